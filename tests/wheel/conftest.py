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
