"""Setup of the wheel smoke suite: it runs only against an installed wheel.

The suite is selected with ``-c tests/wheel/pytest.ini`` (cibuildwheel's
test-command and ``wheels/proofs.py`` do this). Collected any other way, for
example by ``pytest tests`` with the source tree on ``sys.path``, every test
here is skipped: it would otherwise test the source tree, not a wheel.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def wheel_mode(config: pytest.Config) -> bool:
    """True when pytest was started with this directory's pytest.ini."""
    return config.inipath is not None and Path(config.inipath).resolve() == HERE / "pytest.ini"


def pytest_configure(config: pytest.Config) -> None:
    if wheel_mode(config):
        # The installed package must find its own library.
        os.environ.pop("ELIZA_LIBRARY", None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if wheel_mode(config):
        return
    skip = pytest.mark.skip(
        reason="wheel smoke suite: run `python -m pytest -c tests/wheel/pytest.ini tests/wheel` "
        "in an environment where the eliza wheel is installed"
    )
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def header_text() -> str:
    """include/eliza.h of the checkout the wheel was built from."""
    return (REPO / "include" / "eliza.h").read_text()


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small GGUF written with the ``gguf`` package: typed keys, a string
    array and two tensors with known values."""
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")
    path = tmp_path_factory.mktemp("gguf") / "smoke.gguf"
    w = gguf.GGUFWriter(str(path), arch="smokearch")
    w.add_string("general.name", "wheel smoke model")
    w.add_uint32("smokearch.block_count", 3)
    w.add_float32("smokearch.rope.freq_base", 10000.0)
    w.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(12)])
    w.add_tensor("smoke.weight", np.arange(8, dtype=np.float32).reshape(2, 4) - 3.5)
    w.add_tensor("smoke.half", np.linspace(-1, 1, 6, dtype=np.float32).astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="session")
def tiny_llama_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer random llama with a SentencePiece-style vocabulary of byte
    tokens plus a few words, written with the ``gguf`` package alone."""
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")
    path = tmp_path_factory.mktemp("llm") / "tiny-llama.gguf"
    n_embd, n_ff, n_head, n_layer = 32, 64, 4, 2
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    words = ["\u2581the", "\u2581a", "\u2581cat", "\u2581sat", "e", "t", "a", "\u2581"]
    tokens += words
    types = [2, 3, 3] + [6] * 256 + [1] * len(words)  # unknown, control, byte, normal
    scores = [0.0] * (3 + 256) + [-float(i) for i in range(len(words))]
    rng = np.random.default_rng(7)

    def mat(n_out: int, n_in: int) -> Any:
        return (rng.standard_normal((n_out, n_in)) * 0.2).astype(np.float32)

    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_context_length(128)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_tensor("token_embd.weight", mat(len(tokens), n_embd))
    w.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    w.add_tensor("output.weight", mat(len(tokens), n_embd))
    head_dim = n_embd // n_head
    for i in range(n_layer):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        w.add_tensor(f"blk.{i}.attn_q.weight", mat(n_embd, n_embd))
        w.add_tensor(f"blk.{i}.attn_k.weight", mat(2 * head_dim, n_embd))
        w.add_tensor(f"blk.{i}.attn_v.weight", mat(2 * head_dim, n_embd))
        w.add_tensor(f"blk.{i}.attn_output.weight", mat(n_embd, n_embd))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", mat(n_ff, n_embd))
        w.add_tensor(f"blk.{i}.ffn_up.weight", mat(n_ff, n_embd))
        w.add_tensor(f"blk.{i}.ffn_down.weight", mat(n_embd, n_ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="session")
def tiny_diar_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Random-weight diarization models in the schemas of
    docs/diarization.md, written with the ``gguf`` package alone: a pyannote
    segmentation model with segmentation-3.0's geometry (10 s chunks, 589
    frames) but 16-unit LSTMs, and a one-layer resemblyzer embedding."""
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")
    from eliza.convert.pyannote import powerset_mapping

    out = tmp_path_factory.mktemp("diar")
    rng = np.random.default_rng(11)

    def rand(*shape: int, scale: float = 0.3) -> Any:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def lstm(w: Any, n_layers: int, d: int, n_in: int, H: int) -> None:
        for layer in range(n_layers):
            p = f"lstm.{layer}"
            w.add_tensor(f"{p}.weight_ih", rand(d, 4 * H, n_in if layer == 0 else d * H))
            w.add_tensor(f"{p}.weight_hh", rand(d, 4 * H, H))
            w.add_tensor(f"{p}.bias_ih", rand(d, 4 * H, scale=0.1))
            w.add_tensor(f"{p}.bias_hh", rand(d, 4 * H, scale=0.1))

    def finish(w: Any) -> None:
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    # segmentation: stride 10, pools of 3, kernels 251 / 5 / 5 -> 270-sample frames, 991-sample field
    seg, H, F, C1, C2 = out / "seg.gguf", 16, 8, 12, 12
    w = gguf.GGUFWriter(str(seg), "pyannote")
    for key, value in (("sample_rate", 16000), ("frame_step", 270), ("receptive_field", 991)):
        w.add_uint32(f"pyannote.{key}", value)
    w.add_float32("pyannote.chunk_duration", 10.0)
    w.add_uint32("pyannote.sincnet.stride", 10)
    w.add_uint32("pyannote.sincnet.pool_size", 3)
    w.add_float32("pyannote.norm_epsilon", 1e-5)
    w.add_float32("pyannote.leaky_relu_slope", 0.01)
    w.add_uint32("pyannote.lstm.layer_count", 2)
    w.add_uint32("pyannote.lstm.hidden_size", H)
    w.add_bool("pyannote.lstm.bidirectional", True)
    w.add_string("pyannote.lstm.gate_order", "iofc")
    w.add_uint32("pyannote.powerset.speaker_count", 3)
    w.add_uint32("pyannote.powerset.max_speakers_per_frame", 2)
    w.add_key_value(
        "pyannote.powerset.mapping",
        [int(v) for v in powerset_mapping(3, 2).reshape(-1)],
        gguf.GGUFValueType.ARRAY,
        sub_type=gguf.GGUFValueType.UINT8,
    )
    w.add_tensor("sincnet.wav_norm.weight", np.ones(1, np.float32))
    w.add_tensor("sincnet.wav_norm.bias", np.zeros(1, np.float32))
    w.add_tensor("sincnet.filterbank.weight", rand(F, 1, 251, scale=0.05))
    for i, (c, c_in) in enumerate(((F, 0), (C1, F), (C2, C1))):
        w.add_tensor(f"sincnet.norm.{i}.weight", np.ones(c, np.float32))
        w.add_tensor(f"sincnet.norm.{i}.bias", np.zeros(c, np.float32))
        if i:
            w.add_tensor(f"sincnet.conv.{i}.weight", rand(c, c_in, 5))
            w.add_tensor(f"sincnet.conv.{i}.bias", rand(c, scale=0.1))
    lstm(w, 2, 2, C2, H)
    w.add_tensor("linear.0.weight", rand(16, 2 * H))
    w.add_tensor("linear.0.bias", rand(16, scale=0.1))
    w.add_tensor("linear.1.weight", rand(16, 16))
    w.add_tensor("linear.1.bias", rand(16, scale=0.1))
    w.add_tensor("classifier.weight", rand(7, 16))
    w.add_tensor("classifier.bias", rand(7, scale=0.1))
    finish(w)

    # embedding: resemblyzer's front end (400-sample frames, hop 160, 40 mels), one 16-unit LSTM layer
    emb, H = out / "emb.gguf", 16
    w = gguf.GGUFWriter(str(emb), "resemblyzer")
    front = (("sample_rate", 16000), ("mel.n_fft", 400), ("mel.hop_length", 160), ("mel.n_mels", 40))
    for key, value in front:
        w.add_uint32(f"resemblyzer.{key}", value)
    w.add_float32("resemblyzer.mel.power", 2.0)
    w.add_bool("resemblyzer.mel.center", True)
    w.add_string("resemblyzer.mel.pad_mode", "constant")
    w.add_uint32("resemblyzer.partial.frames", 160)
    w.add_float32("resemblyzer.partial.rate", 1.3)
    w.add_float32("resemblyzer.partial.min_coverage", 0.75)
    w.add_uint32("resemblyzer.lstm.layer_count", 1)
    w.add_uint32("resemblyzer.lstm.hidden_size", H)
    w.add_bool("resemblyzer.lstm.bidirectional", False)
    w.add_string("resemblyzer.lstm.gate_order", "ifgo")
    w.add_uint32("resemblyzer.embedding_length", 16)
    w.add_tensor("mel.window", (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(400) / 400)).astype(np.float32))
    w.add_tensor("mel.filters", np.abs(rand(40, 201, scale=0.01)))
    lstm(w, 1, 1, 40, H)
    w.add_tensor("linear.weight", rand(16, H))
    w.add_tensor("linear.bias", rand(16, scale=0.1))
    finish(w)
    return seg, emb
