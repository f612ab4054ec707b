"""What a new user hits first (issue 22): audio files of any format in,
audio files of any format out, the CLI's papercuts and errors, one
exception hierarchy, and sampling ranges that are the same in C, Python and
the CLI."""

from __future__ import annotations

import ctypes
import io
import subprocess
import sys
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import eliza
from eliza import audio as eaudio
from eliza import models
from eliza._native import LlmStreamConfig, lib

sys.path.insert(0, str(Path(__file__).resolve().parent / "diar"))
from diar_models_util import speech_like

sf = pytest.importorskip("soundfile")
RATE = 16000
# One output frame of pyannote segmentation-3.0 (270 samples at 16 kHz), seconds.
FRAME = 270 / RATE


def _cached(name: str) -> Path | None:
    return models.cache_dir() / models.MODELS[name].filename if models.is_cached(name) else None


def _diar_models() -> tuple[Path, Path] | None:
    try:
        return models.diarization_model_paths(install=False)
    except ImportError:
        return None


# ---------------------------------------------------------------------------
# Audio in and out
# ---------------------------------------------------------------------------


def test_read_audio_any_depth_and_channels(tmp_path: Path) -> None:
    x = (0.5 * np.sin(2 * np.pi * 440 * np.arange(RATE) / RATE)).astype(np.float32)
    for subtype, tol in (("PCM_U8", 1e-2), ("PCM_16", 1e-4), ("PCM_24", 1e-6), ("FLOAT", 1e-7)):
        p = tmp_path / f"{subtype}.wav"
        sf.write(p, np.stack([x, x], axis=1), RATE, subtype=subtype)
        got, rate = eaudio.read_audio(p)
        assert rate == RATE and got.dtype == np.float32 and got.ndim == 1
        assert np.max(np.abs(got - x)) < tol, subtype
    got, rate = eaudio.read_audio(tmp_path / "PCM_24.wav", sample_rate=8000)
    assert rate == 8000 and abs(len(got) - RATE // 2) <= 1


def test_read_audio_errors_are_typed(tmp_path: Path) -> None:
    with pytest.raises(eliza.ElizaIOError) as e:
        eaudio.read_audio(tmp_path / "missing.flac")
    assert isinstance(e.value, OSError) and isinstance(e.value, eliza.ElizaError)
    (tmp_path / "junk.ogg").write_bytes(b"not audio at all")
    with pytest.raises(eliza.FormatError):
        eaudio.read_audio(tmp_path / "junk.ogg")


def test_write_audio_by_extension_and_refusals(tmp_path: Path) -> None:
    x = (0.3 * np.sin(2 * np.pi * 220 * np.arange(24000) / 24000)).astype(np.float32)
    for ext, fmt in ((".wav", "WAV"), (".flac", "FLAC"), (".ogg", "OGG"), (".mp3", "MP3")):
        p = tmp_path / f"out{ext}"
        eaudio.write_audio(p, x, 24000)
        info = sf.info(str(p))
        assert info.format == fmt and info.samplerate == 24000 and info.channels == 1
    with pytest.raises(eliza.InvalidArgumentError, match="mono"):
        eliza.write_wav(tmp_path / "st.wav", np.zeros((100, 2), np.float32), 24000)
    with pytest.raises(eliza.InvalidArgumentError, match="sample rate"):
        eliza.write_wav(tmp_path / "r.wav", x, 0)
    with pytest.raises(eliza.InvalidArgumentError, match="extension"):
        eaudio.write_audio(tmp_path / "x.aac", x, 24000)
    with pytest.raises(eliza.ElizaIOError):
        eliza.write_wav(tmp_path / "nope" / "x.wav", x, 24000)
    assert not list(tmp_path.glob(".*.part"))


def _turns_close(a: list[eliza.Turn], b: list[eliza.Turn], tol: float) -> bool:
    return len(a) == len(b) and all(
        x.speaker == y.speaker and abs(x.start - y.start) <= tol and abs(x.end - y.end) <= tol
        for x, y in zip(a, b)
    )


def _time_agreement(a: list[eliza.Turn], b: list[eliza.Turn], step: float = 0.01) -> float:
    """The fraction of 10 ms instants at which a and b hear the same set of speakers."""
    end = max(t.end for t in [*a, *b])
    grid = np.arange(0.0, end, step)

    def active(turns: list[eliza.Turn]) -> np.ndarray:
        speakers = sorted({t.speaker for t in [*a, *b]})
        on = np.zeros((len(speakers), grid.size), dtype=bool)
        for t in turns:
            on[speakers.index(t.speaker)] |= (grid >= t.start) & (grid < t.end)
        return on

    return float(np.mean(np.all(active(a) == active(b), axis=0)))


@pytest.fixture(scope="module")
def diarizer() -> Iterator[eliza.Diarizer]:
    paths = _diar_models()
    if paths is None:
        pytest.skip("the diarization models are not cached")
    with eliza.Diarizer(*paths, n_threads=2) as d:
        yield d


@pytest.fixture(scope="module")
def conversation() -> np.ndarray:
    """Four alternating lines of two Kokoro voices with pauses, 16 kHz mono
    float32 peaking at 0.95 (real speech: the synthetic signals of
    tests/diar sit on decision boundaries that any lossy step moves)."""
    kokoro = _cached(models.KOKORO)
    if kokoro is None:
        pytest.skip("the Kokoro model is not cached")
    from scipy.signal import resample_poly

    lines = [
        ("af_heart", "Good morning, did you sleep well last night?"),
        ("am_adam", "Not really, the neighbours were loud until two."),
        ("af_heart", "That sounds awful. Maybe talk to them today."),
        ("am_adam", "I will, right after breakfast and coffee."),
    ]
    with eliza.TTS(kokoro, n_threads=2) as tts:
        parts = []
        for voice, text in lines:
            parts += [tts.synthesize(text, voice=voice, no_noise=True), np.zeros(7200, np.float32)]
    x = np.asarray(resample_poly(np.concatenate(parts), 2, 3), dtype=np.float64)
    peaked: np.ndarray = (0.95 * x / np.abs(x).max()).astype(np.float32)
    return peaked


# (file name, samples to write, rate, soundfile arguments, allowed error in frames)
def _variants(x: np.ndarray) -> list[tuple[str, np.ndarray, int, dict[str, str], int]]:
    from scipy.signal import resample_poly

    return [
        ("a.flac", x, RATE, {"subtype": "PCM_16"}, 1),
        ("a.ogg", x, RATE, {"subtype": "VORBIS"}, 1),
        ("a24.wav", x, RATE, {"subtype": "PCM_24"}, 1),
        # 8-bit PCM is ~48 dB of SNR: pauses fill with quantization noise,
        # which moves turn ends by a few frames and can leave a blip of a
        # frame or two in a pause, so it is held to the time both hear the
        # same speakers (frames = 0: see the test).
        ("a8.wav", x, RATE, {"subtype": "PCM_U8"}, 0),
        ("stereo.wav", np.stack([x, x], axis=1), RATE, {"subtype": "PCM_16"}, 1),
        ("a44k.wav", resample_poly(x, 441, 160), 44100, {"subtype": "PCM_16"}, 1),
        ("a48k.wav", resample_poly(x, 3, 1), 48000, {"subtype": "PCM_16"}, 1),
    ]


def test_formats_give_the_turns_of_the_16k_mono_wav(
    diarizer: eliza.Diarizer, conversation: np.ndarray, tmp_path: Path
) -> None:
    sf.write(tmp_path / "ref.wav", conversation, RATE, subtype="PCM_16")
    want = diarizer.diarize(tmp_path / "ref.wav")
    assert len({t.speaker for t in want}) == 2, want
    bad = {}
    for name, data, rate, kw, frames in _variants(conversation):
        sf.write(tmp_path / name, np.clip(data, -1, 1), rate, **kw)
        got = diarizer.diarize(tmp_path / name)
        if frames:
            close = _turns_close(got, want, frames * FRAME + 1e-6)
        else:
            close = _time_agreement(got, want) >= 0.97
        if not close:
            bad[name] = got
    assert not bad, f"want {want}\n" + "\n".join(f"{k}: {v}" for k, v in bad.items())


def test_8k_file_gives_the_turns_of_the_same_band_limited_16k_wav(
    diarizer: eliza.Diarizer, conversation: np.ndarray, tmp_path: Path
) -> None:
    """8 kHz keeps only what is below 4 kHz: the same audio at 16 kHz is
    the band-limited one."""
    from scipy.signal import resample_poly

    narrow = resample_poly(conversation, 1, 2).astype(np.float32)
    sf.write(tmp_path / "ref.wav", resample_poly(narrow, 2, 1), RATE, subtype="PCM_16")
    sf.write(tmp_path / "a8k.wav", narrow, 8000, subtype="PCM_16")
    want, got = diarizer.diarize(tmp_path / "ref.wav"), diarizer.diarize(tmp_path / "a8k.wav")
    assert _turns_close(got, want, FRAME + 1e-6), f"want {want}\ngot {got}"


# ---------------------------------------------------------------------------
# Errors, sampling ranges, the package
# ---------------------------------------------------------------------------


def test_import_eliza_brings_models_and_audio() -> None:
    run = subprocess.run(
        [sys.executable, "-c", "import eliza; print(eliza.models.cache_dir(), eliza.audio.FORMATS['.flac'])"],
        capture_output=True, text=True,
    )
    assert run.returncode == 0, run.stderr
    assert "FLAC" in run.stdout


@pytest.mark.parametrize(
    ("name", "value"),
    [("temperature", -1.0), ("temperature", float("nan")), ("top_p", 1.5), ("min_p", -0.1),
     ("repeat_penalty", 0.0), ("top_k", -1), ("repeat_last_n", -1)],
)
def test_sampling_out_of_range_is_refused_in_c_and_python(name: str, value: float) -> None:
    gemma = _cached("gemma3-270m")
    if gemma is None:
        pytest.skip("gemma3-270m is not cached")
    with pytest.raises(eliza.InvalidArgumentError, match=name):
        eliza.llm.check_sampling(name, value)
    with eliza.LLM(gemma, n_threads=1, context_size=64) as llm:
        with pytest.raises(eliza.InvalidArgumentError, match=name):
            llm.generate("Hi", max_tokens=1, **{name: value})  # type: ignore[arg-type]
        # The C library's own check, without the SDK's in front of it.
        cfg = LlmStreamConfig()
        lib().eliza_llm_stream_default_config(ctypes.byref(cfg))
        cfg.prompt = b"Hi"
        setattr(cfg, name, value)
        out = ctypes.c_void_p()
        assert lib().eliza_llm_stream_open(llm._live(), ctypes.byref(cfg), ctypes.byref(out)) == -1
        assert name in lib().eliza_last_error().decode()


# ---------------------------------------------------------------------------
# The CLI's papercuts
# ---------------------------------------------------------------------------


def _eliza(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    cmd = [sys.executable, "-m", "eliza", *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=300)


def test_cli_generate_rejects_out_of_range_sampling_values() -> None:
    for flag, value in (("--temp", "-1"), ("--top-p", "2"), ("--repeat-penalty", "0"), ("--top-k", "-3")):
        run = _eliza("generate", "model.gguf", "hi", flag, value)
        assert run.returncode == 2, (flag, run.stderr)
        assert b"not within" in run.stderr or b"invalid" in run.stderr


def test_cli_generate_reads_the_prompt_from_stdin_and_a_file(tmp_path: Path) -> None:
    gemma = _cached("gemma3-270m")
    if gemma is None:
        pytest.skip("gemma3-270m is not cached")
    args = ("--max-tokens", "4", "--temp", "0", "--threads", "2")
    direct = _eliza("generate", str(gemma), "The capital of France is", *args)
    piped = _eliza("generate", str(gemma), "-", *args, stdin=b"The capital of France is")
    (tmp_path / "p.txt").write_text("The capital of France is")
    from_file = _eliza("generate", str(gemma), "-f", str(tmp_path / "p.txt"), *args)
    assert direct.returncode == piped.returncode == from_file.returncode == 0, piped.stderr
    assert direct.stdout == piped.stdout == from_file.stdout
    assert b"5 prompt tokens" in piped.stderr or b"prompt tokens" in piped.stderr


def test_cli_say_errors_leave_nothing_behind(tmp_path: Path) -> None:
    empty = _eliza("say", "", "-o", str(tmp_path / "e.wav"))
    assert empty.returncode == 1 and b"no text" in empty.stderr and not (tmp_path / "e.wav").exists()
    missing = _eliza("say", "Hi.", "-o", str(tmp_path / "no" / "x.wav"))
    assert missing.returncode == 1 and b"does not exist" in missing.stderr
    assert b"Traceback" not in missing.stderr and b"Exception ignored" not in missing.stderr
    unknown = _eliza("say", "Hi.", "-o", str(tmp_path / "x.aac"))
    assert unknown.returncode == 1 and b"extension" in unknown.stderr


def test_cli_say_writes_stdout_and_formats_by_extension(tmp_path: Path) -> None:
    kokoro = _cached(models.KOKORO)
    if kokoro is None:
        pytest.skip("the Kokoro model is not cached")
    run = _eliza("say", "Hi.", "-o", "-", "--no-noise", "--threads", "2")
    assert run.returncode == 0, run.stderr
    with wave.open(io.BytesIO(run.stdout)) as w:
        assert w.getframerate() == 24000 and w.getnframes() > 2400
    assert not Path("-").exists()
    run = _eliza("say", "Hi.", "-o", str(tmp_path / "hi.flac"), "--no-noise", "--threads", "2")
    assert run.returncode == 0, run.stderr
    assert sf.info(str(tmp_path / "hi.flac")).format == "FLAC"


def test_cli_models_cover_the_diarization_models() -> None:
    run = _eliza("models", "list")
    assert run.returncode == 0
    for name in ("gemma3-270m", "kokoro-82m", "pyannote-segmentation-3.0", "resemblyzer-ge2e"):
        assert name.encode() in run.stdout
    if _diar_models() is not None:
        path = _eliza("models", "path", "pyannote-segmentation-3.0")
        assert path.returncode == 0 and path.stdout.strip().endswith(b"pyannote-segmentation-3.0.gguf")


def test_model_conversion_progress_is_a_bar_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert models._progress("x") is None
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    show = models._progress("pyannote: converting")
    assert show is not None
    for i in range(7):
        show(i, 7, f"tensor.{i}")
    assert "pyannote: converting" in term.getvalue() and "7/7" in term.getvalue()


def test_cli_diarize_reads_flac_and_labels_like_rttm(tmp_path: Path) -> None:
    if _diar_models() is None:
        pytest.skip("the diarization models are not cached")
    p = tmp_path / "talk.flac"
    sf.write(p, speech_like(4, 12.0), RATE, format="FLAC")
    run = _eliza("diarize", str(p), "--threads", "2", "--rttm", str(tmp_path / "t.rttm"))
    assert run.returncode == 0, run.stderr
    assert b"SPEAKER_00" in run.stdout and b"speaker 0" not in run.stdout
    assert (tmp_path / "t.rttm").read_text().startswith("SPEAKER talk 1 ")
