"""eliza.TTS and the eliza_tts_* entry points on a small random Kokoro
(tts_api_model.py): voices, chunking, streaming, blending, noise and seeds,
cancel, profile, WAV output and ``eliza say``. Tests of the real default
model are marked ``slow`` and skip when its packages are not installed."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import threading
import time
import wave
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

for _module in ("torch", "kokoro", "gguf"):
    pytest.importorskip(_module)

import tts_api_model as tm  # noqa: E402

import eliza  # noqa: E402
from eliza._native import TtsConfig, lib  # noqa: E402
from eliza.tts import Chunk  # noqa: E402

RunCli = Callable[..., "subprocess.CompletedProcess[str]"]

# Three sentences of Kokoro phonemes, one per line ("Hello there. How are you? Fine.").
LINES = ["həlˈO ðˈɛɹ.", "hˌW ɑɹ jˈu?", "fˈIn."]  # noqa: RUF001
# Words to build long lines from.
WORDS = ["hˈɛloʊ", "wˈɜɹld", "tˈɛst"]  # noqa: RUF001
HI = "hˈi"  # noqa: RUF001
# The seam fade: 4 ms at 24 kHz.
FADE = 96
# A long but cheap word: '#' is not in the vocabulary (dropped, yet counted
# towards the 510 code points of a chunk).
PADDED = HI + "#" * 30


@pytest.fixture(scope="module")
def model_path(pytestconfig: pytest.Config) -> Path:
    cache = getattr(pytestconfig, "cache", None)  # None with -p no:cacheprovider
    path: Path = tm.tiny_kokoro_gguf(cache.mkdir("tts-api") if cache is not None else None)
    return path


@pytest.fixture(scope="module")
def tts(model_path: Path) -> Iterator[eliza.TTS]:
    with eliza.TTS(model_path, n_threads=2) as t:
        yield t


@pytest.fixture(scope="module")
def espeak(tts: eliza.TTS) -> None:
    """Skips a test of text input when no espeak-ng can be loaded."""
    try:
        tts.phonemize("a")
    except eliza.UnsupportedError as e:
        pytest.skip(f"no espeak-ng: {e}")


def say(tts: eliza.TTS, text: str, **kw: object) -> np.ndarray:
    return tts.synthesize(text, phonemes=True, no_noise=True, **kw)  # type: ignore[arg-type]


# ---- the model ---------------------------------------------------------------


def test_tts_reports_rate_and_voices(tts: eliza.TTS, model_path: Path) -> None:
    assert tts.sample_rate == 24000
    assert [v.name for v in tts.voices] == list(tm.VOICES)
    assert [(v.language, v.gender) for v in tts.voices] == [
        ("en-us", "f"),
        ("en-us", "m"),
        ("", ""),
        ("", ""),
    ]
    assert repr(tts) == f"<eliza.TTS {str(model_path)!r}>"


def test_tts_close_is_idempotent_and_final(model_path: Path) -> None:
    t = eliza.TTS(model_path, n_threads=1)
    t.close()
    t.close()
    assert t.closed
    with pytest.raises(eliza.StateError):
        t.synthesize("a", phonemes=True)


# ---- synthesis -----------------------------------------------------------------


def test_synthesize_gives_finite_float32_audio(tts: eliza.TTS) -> None:
    audio = say(tts, LINES[0])
    assert audio.dtype == np.float32 and audio.ndim == 1
    assert 0 < len(audio) < 30 * tts.sample_rate
    assert np.isfinite(audio).all() and np.abs(audio).max() > 0


def test_no_noise_output_is_deterministic(tts: eliza.TTS) -> None:
    a = tts.synthesize(LINES[0], phonemes=True, no_noise=True, seed=1)
    b = tts.synthesize(LINES[0], phonemes=True, no_noise=True, seed=99)
    np.testing.assert_array_equal(a, b)


def test_seed_changes_output_when_noise_is_on(tts: eliza.TTS) -> None:
    a = tts.synthesize(LINES[0], phonemes=True, seed=1)
    again = tts.synthesize(LINES[0], phonemes=True, seed=1)
    b = tts.synthesize(LINES[0], phonemes=True, seed=2)
    quiet = tts.synthesize(LINES[0], phonemes=True, no_noise=True)
    np.testing.assert_array_equal(a, again)
    assert len(a) == len(b) == len(quiet)  # noise does not touch the durations
    assert not np.array_equal(a, b)
    assert not np.array_equal(a, quiet)


def test_speed_shortens_the_audio(tts: eliza.TTS) -> None:
    slow = say(tts, LINES[1], speed=0.5)
    fast = say(tts, LINES[1], speed=2.0)
    assert len(fast) < len(slow)


def test_speed_and_seed_left_out_are_the_librarys_defaults(tts: eliza.TTS) -> None:
    cfg = TtsConfig()
    lib().eliza_tts_default_config(ctypes.byref(cfg))
    given = tts.synthesize(LINES[0], phonemes=True, speed=cfg.speed, seed=cfg.seed)
    np.testing.assert_array_equal(tts.synthesize(LINES[0], phonemes=True), given)


def test_voices_differ(tts: eliza.TTS) -> None:
    a = say(tts, LINES[0], voice="af_alpha")
    b = say(tts, LINES[0], voice="am_kumo")
    assert len(a) != len(b) or not np.allclose(a, b)


def test_blend_equals_manually_blended_style(tts: eliza.TTS) -> None:
    spec = ",".join(f"{name}:{w}" for name, w in tm.MIX.items())
    blended = say(tts, LINES[0], voice=spec)
    manual = say(tts, LINES[0], voice="mix")
    assert len(blended) == len(manual)
    np.testing.assert_allclose(blended, manual, rtol=1e-4, atol=1e-5 * np.abs(manual).max())
    # The weights are normalised: 7:3 is 0.7:0.3.
    np.testing.assert_array_equal(say(tts, LINES[0], voice="af_alpha:7, am_kumo:3"), blended)


def test_voice_none_is_the_first_voice(tts: eliza.TTS) -> None:
    np.testing.assert_array_equal(say(tts, LINES[0], voice=None), say(tts, LINES[0], voice=tm.VOICES[0]))


def test_unknown_symbols_are_dropped(tts: eliza.TTS) -> None:
    # "flat" has one style on every row: the extra code points (which count
    # towards the style row, as in KPipeline) cannot change the style.
    clean = say(tts, HI, voice="flat")
    noisy = say(tts, "#" + HI + "@", voice="flat")
    np.testing.assert_array_equal(clean, noisy)


# ---- chunks and streams --------------------------------------------------------


def test_stream_of_three_lines_gives_three_chunks(tts: eliza.TTS) -> None:
    chunks = list(tts.stream("\n".join(LINES), phonemes=True, no_noise=True))
    assert [c.index for c in chunks] == [0, 1, 2]
    assert [c.phonemes for c in chunks] == LINES
    assert all(isinstance(c, Chunk) and c.audio.dtype == np.float32 and len(c.audio) for c in chunks)


def test_synthesize_is_the_streams_chunks_back_to_back(tts: eliza.TTS) -> None:
    text = "\n".join([" ".join(CLAUSES), *LINES])
    chunks = list(tts.stream(text, phonemes=True, seed=5, whole_lines=True))
    whole = tts.synthesize(text, phonemes=True, seed=5)
    np.testing.assert_array_equal(whole, np.concatenate([c.audio for c in chunks]))


def test_each_chunk_is_spoken_as_alone(tts: eliza.TTS) -> None:
    """As the line alone, except that a later chunk fades in at its seam."""
    chunks = list(tts.stream("\n".join(LINES), phonemes=True, no_noise=True))
    for line, chunk in zip(LINES, chunks):
        alone = say(tts, line)
        start = FADE if chunk.index else 0
        np.testing.assert_array_equal(chunk.audio[start:], alone[start:])
        assert np.all(np.abs(chunk.audio[:start]) <= np.abs(alone[:start]))


def test_chunks_join_at_silence_without_clicks(tts: eliza.TTS) -> None:
    text = "\n".join(LINES)
    chunks = list(tts.stream(text, phonemes=True, no_noise=True))
    whole = say(tts, text)
    seams = np.cumsum([len(c.audio) for c in chunks])[:-1]
    ramp = 0.5 - 0.5 * np.cos(np.pi * np.arange(FADE) / FADE)
    for k in seams:
        # both sides of a seam fade to 0 over 4 ms (a raised cosine): no jump
        assert whole[k - 1] == 0 and whole[k] == 0
        assert np.all(np.abs(whole[k : k + FADE]) <= ramp * np.abs(whole).max() + 1e-7)
        assert np.all(np.abs(whole[k - FADE : k][::-1]) <= ramp * np.abs(whole).max() + 1e-7)
    for c in chunks:
        assert c.audio[-1] == 0 and (c.index == 0 or c.audio[0] == 0)
    assert chunks[0].audio[0] != 0  # the first chunk does not fade in


# One clause per entry, 20-21 code points each.
CLAUSES = ["hˈɛloʊ wˈɜɹld tˈɛst,", "hˈɛloʊ wˈɜɹld tˈɛst:", "hˈɛloʊ wˈɜɹld tˈɛst."]  # noqa: RUF001


def test_first_chunk_ends_at_the_first_clause_boundary(tts: eliza.TTS) -> None:
    line = " ".join(CLAUSES)
    phonemes = [c.phonemes for c in tts.stream(f"{line}\n{line}", phonemes=True, no_noise=True)]
    # only the stream's first chunk is cut; the rest of its line follows whole
    assert phonemes == [CLAUSES[0], " ".join(CLAUSES[1:]), line]


def test_first_chunk_cut_needs_a_long_line_and_whole_clauses(tts: eliza.TTS) -> None:
    short = "hˈɛloʊ wˈɜɹld, tˈɛst."  # noqa: RUF001  (under 40 code points: not cut)
    assert [c.phonemes for c in tts.stream(short, phonemes=True)] == [short]
    # a mark without a space after it is inside a word, and a clause of
    # fewer than 8 code points is too short: the cut comes later
    line = "hˈi, hˈɛloʊ,wˈɜɹld tˈɛst, hˈɛloʊ wˈɜɹld tˈɛst."  # noqa: RUF001
    first = next(iter(tts.stream(line, phonemes=True))).phonemes
    assert first == "hˈi, hˈɛloʊ,wˈɜɹld tˈɛst,"  # noqa: RUF001
    # a dash cuts too
    dashed = CLAUSES[0][:-1] + " — " + " ".join(CLAUSES[1:])
    assert next(iter(tts.stream(dashed, phonemes=True))).phonemes == CLAUSES[0][:-1] + " —"


def test_cut_chunks_are_spoken_whole_as_alone(tts: eliza.TTS) -> None:
    """The early cut's first chunk keeps every frame the model gives it: it
    is its phonemes spoken alone, to the sample. (A cap on the first chunk's tail once took frames
    off its last phoneme, and Whisper heard "wind" for "window,",
    "mountain." for "mountains,": docs/kokoro.md, Intelligibility.)"""
    line = " ".join(CLAUSES)
    first, second = list(tts.stream(line, phonemes=True, no_noise=True))[:2]
    head = say(tts, first.phonemes)
    np.testing.assert_array_equal(first.audio, head)
    assert first.audio[-1] == 0 and second.audio[0] == 0


def test_long_phoneme_line_is_split_at_spaces(tts: eliza.TTS) -> None:
    line = " ".join([PADDED] * 33)  # 1,121 code points on one line
    stream = tts.stream(line, phonemes=True, no_noise=True)
    phonemes = [c.phonemes for c in stream]
    assert len(phonemes) == 3
    assert all(0 < len(p) <= 510 for p in phonemes)
    assert " ".join(phonemes) == line  # cut only at spaces, nothing lost


def test_blank_and_punctuation_lines_are_skipped(tts: eliza.TTS) -> None:
    chunks = list(tts.stream(f"\n\n  {LINES[0]}  \n...\n\n{LINES[2]}\n", phonemes=True, no_noise=True))
    assert [c.phonemes for c in chunks] == [LINES[0], LINES[2]]
    assert [c.index for c in chunks] == [0, 1]


def test_one_stream_per_model(tts: eliza.TTS) -> None:
    first = tts.stream(LINES[0], phonemes=True)
    with pytest.raises(eliza.StateError):
        tts.stream(LINES[1], phonemes=True)
    with pytest.raises(eliza.StateError):
        tts.synthesize(LINES[1], phonemes=True)
    assert len(list(first)) == 1
    assert len(tts.synthesize(LINES[1], phonemes=True)) > 0  # the slot is free again


def test_leaving_a_stream_early_frees_the_slot(tts: eliza.TTS) -> None:
    for chunk in tts.stream("\n".join(LINES), phonemes=True):
        assert chunk.index == 0
        break
    assert [c.index for c in tts.stream(LINES[0], phonemes=True)] == [0]


def test_cancel_from_another_thread_ends_the_stream(tts: eliza.TTS) -> None:
    got: list[int] = []
    for chunk in tts.stream("\n".join(LINES), phonemes=True):
        got.append(chunk.index)
        canceller = threading.Thread(target=tts.cancel)
        canceller.start()
        canceller.join()
    assert got == [0]
    assert len(say(tts, LINES[2])) > 0  # the model is usable again at once


def test_cancel_stops_a_chunk_being_computed(tts: eliza.TTS) -> None:
    long_line = " ".join(WORDS * 8)  # ~ 160 code points
    t0 = time.perf_counter()
    say(tts, long_line)
    one_chunk = time.perf_counter() - t0
    timer = threading.Timer(one_chunk / 3, tts.cancel)
    t0 = time.perf_counter()
    stream = tts.stream("\n".join([long_line] * 4), phonemes=True)
    timer.start()
    got = [c.index for c in stream]
    elapsed = time.perf_counter() - t0
    timer.join()
    # The forward polls the flag between its stages and between the
    # generator's blocks: the first chunk stops early, or (cancelled in its
    # last stage) is the only one.
    assert got in ([], [0])
    assert elapsed < 2.5 * one_chunk


def test_cancel_without_a_stream_is_a_no_op(tts: eliza.TTS) -> None:
    tts.cancel()
    assert len(say(tts, LINES[2])) > 0


# ---- profile -------------------------------------------------------------------


def test_profile_has_the_model_phases_of_the_last_synthesis(tts: eliza.TTS) -> None:
    say(tts, "\n".join(LINES))
    prof = tts.profile()
    assert prof["total"] > 0
    phases = {k: v for k, v in prof.items() if k not in ("total", "g2p")}
    assert phases and all(v >= 0 for v in phases.values())
    assert sum(phases.values()) <= prof["total"] * 1.05 + 1.0


# ---- text input (espeak-ng) ------------------------------------------------------


def test_phonemize_gives_one_line_per_sentence(tts: eliza.TTS, espeak: None) -> None:
    lines = tts.phonemize("Hello there. How are you? I am fine.").split("\n")
    assert len(lines) == 3 and all(lines)


def test_text_stream_speaks_the_phonemize_lines(tts: eliza.TTS, espeak: None) -> None:
    text = "Hello there. How are you?\nI am fine."
    lines = tts.phonemize(text).split("\n")
    chunks = list(tts.stream(text, no_noise=True))
    assert [c.phonemes for c in chunks] == lines and len(lines) == 3
    # Text in equals its phonemes in.
    np.testing.assert_array_equal(np.concatenate([c.audio for c in chunks]), say(tts, "\n".join(lines)))
    prof = tts.profile()
    assert "g2p" not in prof  # the phoneme run was the last one


def test_synthesis_speaks_a_text_lines_sentences_together(tts: eliza.TTS, espeak: None) -> None:
    """KPipeline's chunks (its en_tokenize): a text line's sentences in one
    chunk, up to the model's 510 phonemes, and no early first cut. Spoken
    one sentence at a time, the end of each sounds final: bf_emma's "late."
    was heard "later", "Birds sang." "Bird sang" (docs/kokoro.md)."""
    text = "Hello there, my good old friend from the city. How are you?\nI am fine, thank you, and you?"
    lines = tts.phonemize(text).split("\n")
    assert len(lines) == 3
    whole = [f"{lines[0]} {lines[1]}", lines[2]]
    chunks = list(tts.stream(text, no_noise=True, whole_lines=True))
    assert [c.phonemes for c in chunks] == whole
    np.testing.assert_array_equal(tts.synthesize(text, no_noise=True), say(tts, "\n".join(whole)))
    # the plain stream: a chunk per sentence, the first cut at its comma
    assert [c.phonemes for c in tts.stream(text, no_noise=True)][1:] == [
        lines[0].split(", ", 1)[1],
        *lines[1:],
    ]


def test_whole_lines_stream_of_phonemes_keeps_its_lines(tts: eliza.TTS) -> None:
    """Phoneme input's lines are the caller's chunks: not joined, not cut."""
    line = " ".join(CLAUSES)
    chunks = list(tts.stream(f"{line}\n{LINES[0]}", phonemes=True, no_noise=True, whole_lines=True))
    assert [c.phonemes for c in chunks] == [line, LINES[0]]


def test_long_text_line_joins_up_to_the_models_phonemes(tts: eliza.TTS, espeak: None) -> None:
    text = " ".join(["The quick brown fox jumps over the lazy dog."] * 20)
    chunks = [c.phonemes for c in tts.stream(text, no_noise=True, whole_lines=True)]
    sentence = tts.phonemize("The quick brown fox jumps over the lazy dog.")
    assert len(chunks) > 1 and all(len(c) <= 510 for c in chunks)
    assert " ".join(chunks) == " ".join([sentence] * 20)
    # each chunk as full as one sentence more allows
    assert all(len(c) + 1 + len(sentence) > 510 for c in chunks[:-1])


def test_text_profile_counts_g2p(tts: eliza.TTS, espeak: None) -> None:
    tts.synthesize("Hello.", no_noise=True)
    assert tts.profile()["g2p"] >= 0


# ---- WAV and CLI -----------------------------------------------------------------


def test_write_wav_round_trips_16_bit(tmp_path: Path) -> None:
    audio = np.array([0.0, 0.5, -0.5, 1.5, -2.0, np.nan], np.float32)
    path = tmp_path / "a.wav"
    eliza.write_wav(path, audio, 24000)
    with wave.open(str(path), "rb") as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()) == (1, 2, 24000, 6)
        pcm = np.frombuffer(w.readframes(6), "<i2")
    assert pcm.tolist() == [0, 16384, -16384, 32767, -32767, 0]


def test_cli_say_writes_a_wav_and_reports_rtf(
    tts: eliza.TTS, model_path: Path, tmp_path: Path, run_cli: RunCli
) -> None:
    out = tmp_path / "out.wav"
    r = run_cli(
        "say",
        "\n".join(LINES),
        "--phonemes",
        "--model",
        str(model_path),
        "-o",
        str(out),
        "--no-noise",
        "--threads",
        "2",
    )
    assert r.returncode == 0, r.stderr
    assert "RTF" in r.stderr and "3 chunks" in r.stderr
    expected = eliza.tts.pcm16(say(tts, "\n".join(LINES)))
    with wave.open(str(out), "rb") as w:
        assert w.getframerate() == 24000
        assert w.readframes(w.getnframes()) == expected


def test_cli_say_reads_a_file(
    tts: eliza.TTS, model_path: Path, tmp_path: Path, run_cli: RunCli, espeak: None
) -> None:
    """Written to a file, a text line is spoken whole, as synthesize speaks it."""
    text = "Hello there. How are you?"
    src = tmp_path / "text.txt"
    src.write_text(text, encoding="utf-8")
    out = tmp_path / "out.wav"
    args = ("--model", str(model_path), "-o", str(out), "--voice", "am_kumo", "--no-noise", "--threads", "2")
    r = run_cli("say", "-f", str(src), *args)
    assert r.returncode == 0, r.stderr
    assert r.stderr.rstrip().endswith(", 1 chunk")
    expected = eliza.tts.pcm16(tts.synthesize(text, voice="am_kumo", no_noise=True))
    with wave.open(str(out), "rb") as w:
        assert w.readframes(w.getnframes()) == expected


def test_cli_say_reports_an_unknown_voice(model_path: Path, tmp_path: Path, run_cli: RunCli) -> None:
    r = run_cli(
        "say",
        LINES[0],
        "--phonemes",
        "--model",
        str(model_path),
        "-o",
        str(tmp_path / "x.wav"),
        "--voice",
        "nobody",
    )
    assert r.returncode == 1
    assert "nobody" in r.stderr and "ELIZA_E_NOT_FOUND" in r.stderr


# ---- the real default model ----------------------------------------------------


@pytest.mark.slow
def test_default_model_speaks_english() -> None:
    from eliza import models

    find = getattr(models, "kokoro_model_path", None)
    if find is None:
        pytest.skip("eliza.models has no kokoro_model_path yet")
    try:
        find(install=False)
    except ImportError:
        pytest.skip("the Kokoro model packages are not installed")
    with eliza.TTS(n_threads=2) as t:
        try:
            chunks = list(t.stream("Hello world. This is Kokoro.", voice="af_heart", seed=0))
        except eliza.UnsupportedError as e:
            pytest.skip(f"no espeak-ng: {e}")
        assert len(chunks) == 2
        for c in chunks:
            seconds = len(c.audio) / t.sample_rate
            assert 0.3 < seconds < 5.0
            assert 0.01 < float(np.sqrt(np.mean(c.audio**2))) < 0.5


# ---- eliza say --play ---------------------------------------------------------------


class _FakeSoundDevice:
    """A stand-in for the sounddevice module: one output device whose stream
    pulls its callback in a thread until stopped, keeping what it played."""

    class PortAudioError(Exception):
        pass

    def __init__(self, has_device: bool = True) -> None:
        self.has_device = has_device
        self.played: list[np.ndarray] = []

    def query_devices(self, kind: str) -> dict[str, object]:
        if not self.has_device:
            raise self.PortAudioError("Error querying device -1")
        return {"name": "fake", "max_output_channels": 1}

    def OutputStream(
        self, samplerate: int, channels: int, dtype: str, callback: Callable[..., None]
    ) -> object:
        fake = self

        class Stream:
            def start(self) -> None:
                assert (samplerate, channels, dtype) == (24000, 1, "float32")
                self.running = True
                self.thread = threading.Thread(target=self.pull)
                self.thread.start()

            def pull(self) -> None:
                while self.running:
                    block = np.full((512, 1), np.nan, np.float32)
                    callback(block, 512, None, None)
                    fake.played.append(block[:, 0].copy())
                    time.sleep(0.001)

            def stop(self) -> None:
                self.running = False
                self.thread.join()

            def close(self) -> None:
                pass

        return Stream()


def _say_in_process(model_path: Path, *extra: str) -> int:
    from eliza import cli

    return cli.main(["say", "\n".join(LINES), "--phonemes", "--no-noise", "--model", str(model_path), *extra])


def test_cli_say_play_streams_to_the_sound_card(
    tts: eliza.TTS, model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _FakeSoundDevice()
    monkeypatch.setitem(sys.modules, "sounddevice", fake)
    monkeypatch.chdir(tmp_path)
    assert _say_in_process(model_path, "--play") == 0
    assert not (tmp_path / "out.wav").exists()  # played, no file unless -o
    played = np.concatenate(fake.played)
    want = np.clip(say(tts, "\n".join(LINES)), -1, 1)
    assert not np.isnan(played).any()  # every block filled: silence while waiting and after the end
    # the audio, in order, between stretches of silence (the card waits for chunks)
    np.testing.assert_array_equal(played[played != 0], want[want != 0])


def test_cli_say_play_without_a_sound_card_writes_the_file(
    model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for module in (None, _FakeSoundDevice(has_device=False)):
        monkeypatch.setitem(sys.modules, "sounddevice", module)  # None: import fails
        (tmp_path / "out.wav").unlink(missing_ok=True)
        assert _say_in_process(model_path, "--play") == 0
        err = capsys.readouterr().err
        assert "cannot play: " in err and "writing out.wav" in err
        assert ("not installed" if module is None else "no sound card") in err
        with wave.open(str(tmp_path / "out.wav"), "rb") as w:
            assert w.getnframes() > 0
