"""Bad input to the TTS entry points (issue #4): empty text, only
punctuation, 50k characters, invalid UTF-8, unknown voices, absurd speeds,
NaN blend weights, bad files, NULLs and struct sizes. Each gives a clear
error or sensible output, never a crash; the model stays usable after."""

from __future__ import annotations

import ctypes
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

for _module in ("torch", "kokoro", "gguf"):
    pytest.importorskip(_module)

import tts_api_model as tm  # noqa: E402

import eliza  # noqa: E402
from eliza._native import TtsChunk, TtsConfig, TtsParams, lib  # noqa: E402
from eliza.errors import Status  # noqa: E402

PHONEMES = "həlˈO wˈɜɹld."  # noqa: RUF001
# A cheap 10-code-point word: '#' is not in the vocabulary (dropped, yet
# counted towards the 510 code points of a chunk).
WORD = "a" + "#" * 9


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
    try:
        tts.phonemize("a")
    except eliza.UnsupportedError as e:
        pytest.skip(f"no espeak-ng: {e}")


@pytest.fixture(autouse=True)
def still_usable(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every test the model takes a new stream (nothing left open)."""
    yield
    if "tts" in request.fixturenames:
        t: eliza.TTS = request.getfixturevalue("tts")
        t.stream(PHONEMES, phonemes=True).close()


# ---- nothing to say ----------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "\n\n\n", " \r\n\t "])
@pytest.mark.parametrize("phonemes", [False, True])
def test_empty_text_gives_no_audio(tts: eliza.TTS, text: str, phonemes: bool) -> None:
    audio = tts.synthesize(text, phonemes=phonemes)
    assert audio.dtype == np.float32 and audio.shape == (0,)
    assert list(tts.stream(text, phonemes=phonemes)) == []


@pytest.mark.parametrize("text", ["...", "?!", ",;:", "…", "“”", "(.)"])
def test_only_punctuation_phonemes_give_no_audio(tts: eliza.TTS, text: str) -> None:
    assert len(tts.synthesize(text, phonemes=True)) == 0


@pytest.mark.parametrize("text", ["...", "?! ,;:", "!!!\n???", "— …"])
def test_only_punctuation_text_gives_no_audio(tts: eliza.TTS, espeak: None, text: str) -> None:
    assert len(tts.synthesize(text)) == 0
    assert tts.phonemize(text) == ""


def test_unknown_symbols_only_give_no_audio(tts: eliza.TTS) -> None:
    assert len(tts.synthesize("#@$%&", phonemes=True)) == 0


# ---- long text -------------------------------------------------------------------


def test_50k_characters_of_text_are_phonemized_in_chunks(tts: eliza.TTS, espeak: None) -> None:
    sentence = "The quick brown fox jumps over the lazy dog. "
    text = sentence * (50_000 // len(sentence) + 1)
    assert len(text) >= 50_000
    lines = tts.phonemize(text).split("\n")
    assert len(lines) >= 1000  # one per sentence
    assert all(0 < len(line) <= 510 for line in lines)


def test_50k_characters_without_sentence_ends(tts: eliza.TTS, espeak: None) -> None:
    text = "and " * 12_500  # one 50k-character sentence
    lines = tts.phonemize(text).split("\n")
    assert len(lines) > 50 and all(0 < len(line) <= 510 for line in lines)


def test_50k_characters_stream_chunk_by_chunk(tts: eliza.TTS, espeak: None) -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 1200
    got = []
    for chunk in tts.stream(text, no_noise=True):
        got.append(chunk)
        if len(got) == 3:
            break
    assert [c.index for c in got] == [0, 1, 2]
    assert len({c.phonemes for c in got}) == 1  # the same sentence three times


def test_50k_characters_of_phonemes_on_one_line(tts: eliza.TTS) -> None:
    text = " ".join([WORD] * 4600)  # 50,599 code points, no line break
    stream = tts.stream(text, phonemes=True, no_noise=True)
    first = next(stream)
    assert len(first.phonemes) <= 510 and first.phonemes.startswith(WORD)
    stream.close()


def test_a_50k_character_word_is_cut_hard(tts: eliza.TTS) -> None:
    text = WORD * 5000
    stream = tts.stream(text, phonemes=True, no_noise=True)
    assert next(stream).phonemes == text[:510]
    stream.close()


# ---- invalid text ----------------------------------------------------------------


INVALID_UTF8 = [b"\xff", b"abc\xc3", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"]


@pytest.mark.parametrize("data", INVALID_UTF8)
@pytest.mark.parametrize("phonemes", [False, True])
def test_invalid_utf8_is_refused(tts: eliza.TTS, data: bytes, phonemes: bool) -> None:
    with pytest.raises(eliza.InvalidArgumentError, match="UTF-8"):
        tts.synthesize(b"hello " + data, phonemes=phonemes)
    with pytest.raises(eliza.InvalidArgumentError, match="UTF-8"):
        tts.stream(b"hello " + data, phonemes=phonemes)


@pytest.mark.parametrize("data", INVALID_UTF8)
def test_phonemize_refuses_invalid_utf8(tts: eliza.TTS, data: bytes) -> None:
    with pytest.raises(eliza.InvalidArgumentError, match="UTF-8"):
        tts.phonemize(data)


def test_lone_surrogate_is_invalid_utf8(tts: eliza.TTS) -> None:
    with pytest.raises(eliza.InvalidArgumentError):
        tts.synthesize("a\ud800b", phonemes=True)


def test_nul_in_text_is_refused(tts: eliza.TTS) -> None:
    with pytest.raises(eliza.InvalidArgumentError, match="NUL"):
        tts.synthesize("a\0b", phonemes=True)


# ---- voices ------------------------------------------------------------------------


@pytest.mark.parametrize("voice", ["nobody", "af_alpha:0.5,nobody:0.5", "JF_ALPHA", "jf_alph"])
def test_unknown_voice_is_not_found_and_named(tts: eliza.TTS, voice: str) -> None:
    with pytest.raises(eliza.NotFoundError) as e:
        tts.synthesize(PHONEMES, voice=voice, phonemes=True)
    assert voice.split(",")[-1].split(":")[0] in e.value.message
    assert "af_alpha" in e.value.message  # the known voices are listed


@pytest.mark.parametrize(
    "voice",
    [
        "af_alpha:nan,am_kumo:0.5",
        "af_alpha:NaN",
        "af_alpha:inf",
        "af_alpha:-0.5,am_kumo:1",
        "af_alpha:0",
        "af_alpha:abc",
        "af_alpha:",
        "af_alpha:0.5x",
        "af_alpha:1e999",
        ":0.5",
        "af_alpha,",
        ",af_alpha",
        "",
        ",",
    ],
)
def test_bad_blend_is_an_invalid_argument(tts: eliza.TTS, voice: str) -> None:
    with pytest.raises(eliza.InvalidArgumentError):
        tts.synthesize(PHONEMES, voice=voice, phonemes=True)


def test_blend_accepts_spaces_and_repeats(tts: eliza.TTS) -> None:
    a = tts.synthesize(PHONEMES, voice=" af_alpha : 0.5 , af_alpha:0.5 ", phonemes=True, no_noise=True)
    b = tts.synthesize(PHONEMES, voice="af_alpha", phonemes=True, no_noise=True)
    np.testing.assert_array_equal(a, b)


# ---- speed, seed, flags ------------------------------------------------------------


@pytest.mark.parametrize("speed", [0.0, 100.0, -1.0, 0.2, 4.01, math.nan, math.inf, -math.inf])
def test_bad_speed_is_an_invalid_argument(tts: eliza.TTS, speed: float) -> None:
    with pytest.raises(eliza.InvalidArgumentError, match="speed"):
        tts.synthesize(PHONEMES, speed=speed, phonemes=True)


@pytest.mark.parametrize("speed", [0.25, 4.0])
def test_speed_limits_are_accepted(tts: eliza.TTS, speed: float) -> None:
    assert len(tts.synthesize(PHONEMES, speed=speed, phonemes=True, no_noise=True)) > 0


@pytest.mark.parametrize("seed", [-1, 1 << 64])
def test_seed_outside_u64_is_refused(tts: eliza.TTS, seed: int) -> None:
    with pytest.raises(eliza.InvalidArgumentError, match="seed"):
        tts.synthesize(PHONEMES, phonemes=True, seed=seed)


def test_largest_seed_is_accepted(tts: eliza.TTS) -> None:
    assert len(tts.synthesize(PHONEMES, phonemes=True, seed=(1 << 64) - 1)) > 0


# ---- files and espeak-ng -----------------------------------------------------------


def test_missing_model_file_is_an_io_error(tmp_path: Path) -> None:
    with pytest.raises(eliza.ElizaIOError):
        eliza.TTS(tmp_path / "missing.gguf")


@pytest.mark.parametrize("content", [b"", b"GGUF", b"not a gguf at all" * 100])
def test_corrupt_model_file_is_a_format_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises((eliza.FormatError, eliza.ElizaIOError)):
        eliza.TTS(path)


def test_a_gguf_of_another_architecture_is_refused(tiny_gguf: Path) -> None:
    with pytest.raises((eliza.FormatError, eliza.UnsupportedError)) as e:
        eliza.TTS(tiny_gguf)
    assert "kokoro" in e.value.message or "tinyarch" in e.value.message


def test_truncated_model_is_a_format_error(model_path: Path, tmp_path: Path) -> None:
    data = model_path.read_bytes()
    for cut in (len(data) // 2, len(data) - 1):
        path = tmp_path / f"cut{cut}.gguf"
        path.write_bytes(data[:cut])
        with pytest.raises(eliza.FormatError):
            eliza.TTS(path)


def test_text_without_espeak_is_unsupported_but_phonemes_work(model_path: Path, tmp_path: Path) -> None:
    with eliza.TTS(model_path, n_threads=1, espeak_library=tmp_path / "no-libespeak-ng.so") as t:
        with pytest.raises(eliza.UnsupportedError, match="espeak"):
            t.synthesize("Hello.")
        with pytest.raises(eliza.UnsupportedError, match="espeak"):
            t.phonemize("Hello.")
        assert len(t.synthesize(PHONEMES, phonemes=True)) > 0
        # Nothing to say needs no espeak-ng either.
        assert len(t.synthesize("  \n ")) == 0


def test_negative_threads_are_refused(model_path: Path) -> None:
    with pytest.raises(eliza.InvalidArgumentError, match="n_threads"):
        eliza.TTS(model_path, n_threads=-1)


# ---- the C entry points: NULLs, struct sizes, handles --------------------------------


def _open(model_path: Path) -> ctypes.c_void_p:
    handle = ctypes.c_void_p()
    assert lib().eliza_tts_open(bytes(model_path), None, ctypes.byref(handle)) == Status.OK
    return handle


@pytest.fixture(scope="module")
def handle(model_path: Path) -> Iterator[ctypes.c_void_p]:
    """A raw eliza_tts handle for the tests of the C entry points."""
    h = _open(model_path)
    yield h
    lib().eliza_tts_close(h)


def _config(text: bytes, flags: int = 1) -> TtsConfig:
    cfg = TtsConfig()
    lib().eliza_tts_default_config(ctypes.byref(cfg))
    cfg.text = text
    cfg.flags = flags
    return cfg


def _synthesize(h: ctypes.c_void_p, cfg: TtsConfig) -> tuple[int, int]:
    """eliza_tts_synthesize's status and sample count (the audio is freed)."""
    pcm = ctypes.POINTER(ctypes.c_float)()
    n = ctypes.c_size_t()
    rc = lib().eliza_tts_synthesize(h, ctypes.byref(cfg), ctypes.byref(pcm), ctypes.byref(n))
    assert rc == Status.OK or (not pcm and n.value == 0)
    lib().eliza_free(pcm)
    return int(rc), int(n.value)


def test_c_defaults() -> None:
    params = TtsParams()
    lib().eliza_tts_default_params(ctypes.byref(params))
    assert params.struct_size == ctypes.sizeof(TtsParams) and params.n_threads == 0
    assert params.espeak_library is None and params.language is None
    cfg = TtsConfig()
    lib().eliza_tts_default_config(ctypes.byref(cfg))
    assert cfg.struct_size == ctypes.sizeof(TtsConfig)
    assert (cfg.text, cfg.voice, cfg.speed, cfg.flags, cfg.seed) == (None, None, 1.0, 0, 0)
    lib().eliza_tts_default_params(None)
    lib().eliza_tts_default_config(None)


def test_c_null_arguments_are_invalid(model_path: Path, handle: ctypes.c_void_p) -> None:
    L = lib()
    out = ctypes.c_void_p()
    assert L.eliza_tts_open(None, None, ctypes.byref(out)) == Status.E_INVALID_ARG
    assert L.eliza_tts_open(bytes(model_path), None, None) == Status.E_INVALID_ARG
    assert L.eliza_tts_sample_rate(None) == Status.E_INVALID_ARG
    assert L.eliza_tts_voice_count(None) == Status.E_INVALID_ARG
    assert L.eliza_tts_voice_name(None, 0) is None
    L.eliza_tts_close(None)
    L.eliza_tts_stream_close(None)
    L.eliza_tts_stream_cancel(None)
    h = handle
    pcm = ctypes.POINTER(ctypes.c_float)()
    n = ctypes.c_size_t()
    cfg = _config(b"a")
    assert L.eliza_tts_voice_name(h, -1) is None
    assert L.eliza_tts_voice_name(h, len(tm.VOICES)) is None
    assert L.eliza_tts_synthesize(h, None, ctypes.byref(pcm), ctypes.byref(n)) == Status.E_INVALID_ARG
    assert L.eliza_tts_synthesize(h, ctypes.byref(cfg), None, ctypes.byref(n)) == Status.E_INVALID_ARG
    assert L.eliza_tts_synthesize(None, ctypes.byref(cfg), ctypes.byref(pcm), ctypes.byref(n)) < 0
    cfg.text = None
    assert _synthesize(h, cfg) == (Status.E_INVALID_ARG, 0)
    assert L.eliza_tts_stream_open(h, ctypes.byref(cfg), None) == Status.E_INVALID_ARG
    assert L.eliza_tts_stream_next(None, None) == Status.E_INVALID_ARG
    assert L.eliza_tts_phonemize(h, None, None) == Status.E_INVALID_ARG
    assert L.eliza_tts_profile_json(h, None) == Status.E_INVALID_ARG


def test_c_struct_sizes(model_path: Path) -> None:
    L = lib()
    params = TtsParams()
    L.eliza_tts_default_params(ctypes.byref(params))
    params.struct_size = 4
    out = ctypes.c_void_p()
    assert L.eliza_tts_open(bytes(model_path), ctypes.byref(params), ctypes.byref(out)) == Status.E_ABI
    # A shorter (older) params struct: the fields it lacks take their defaults.
    params.struct_size = TtsParams.n_threads.offset + 4
    params.espeak_library = b"/nonexistent/libespeak-ng.so"
    assert L.eliza_tts_open(bytes(model_path), ctypes.byref(params), ctypes.byref(out)) == Status.OK
    h = out
    try:
        pcm = ctypes.POINTER(ctypes.c_float)()
        n = ctypes.c_size_t()
        cfg = _config(PHONEMES.encode())
        cfg.struct_size = 4
        assert (
            L.eliza_tts_synthesize(h, ctypes.byref(cfg), ctypes.byref(pcm), ctypes.byref(n)) == Status.E_ABI
        )
        # Up to the voice: speed 1, flags 0 (text input), seed 0.
        cfg = _config(b"", flags=0)
        cfg.struct_size = TtsConfig.speed.offset
        assert L.eliza_tts_synthesize(h, ctypes.byref(cfg), ctypes.byref(pcm), ctypes.byref(n)) == Status.OK
        assert n.value == 0
        L.eliza_free(pcm)
        stream = ctypes.c_void_p()
        cfg = _config(PHONEMES.encode())
        assert L.eliza_tts_stream_open(h, ctypes.byref(cfg), ctypes.byref(stream)) == Status.OK
        chunk = TtsChunk()
        chunk.struct_size = 4
        assert L.eliza_tts_stream_next(stream, ctypes.byref(chunk)) == Status.E_ABI
        # A chunk without the phonemes field still gets its audio.
        chunk.struct_size = TtsChunk.phonemes.offset
        chunk.phonemes = b"untouched"
        assert L.eliza_tts_stream_next(stream, ctypes.byref(chunk)) == Status.OK
        assert chunk.n_samples > 0 and chunk.phonemes == b"untouched"
        assert L.eliza_tts_stream_next(stream, ctypes.byref(chunk)) == Status.DONE
        assert L.eliza_tts_stream_next(stream, ctypes.byref(chunk)) == Status.DONE
        L.eliza_tts_stream_close(stream)
    finally:
        L.eliza_tts_close(h)


def test_c_unknown_flags_are_refused(handle: ctypes.c_void_p) -> None:
    assert _synthesize(handle, _config(PHONEMES.encode(), flags=1 | (1 << 7))) == (Status.E_INVALID_ARG, 0)


def test_c_cancelled_stream_stays_cancelled(handle: ctypes.c_void_p) -> None:
    L = lib()
    stream = ctypes.c_void_p()
    cfg = _config("\n".join([PHONEMES] * 3).encode())
    assert L.eliza_tts_stream_open(handle, ctypes.byref(cfg), ctypes.byref(stream)) == Status.OK
    try:
        chunk = TtsChunk()
        chunk.struct_size = ctypes.sizeof(TtsChunk)
        assert L.eliza_tts_stream_next(stream, ctypes.byref(chunk)) == Status.OK
        L.eliza_tts_stream_cancel(stream)
        assert L.eliza_tts_stream_next(stream, ctypes.byref(chunk)) == Status.E_CANCELLED
        assert L.eliza_tts_stream_next(stream, ctypes.byref(chunk)) == Status.E_CANCELLED
        assert b"cancel" in L.eliza_last_error()
    finally:
        L.eliza_tts_stream_close(stream)


def test_c_stream_outliving_its_model_fails_cleanly(model_path: Path) -> None:
    L = lib()
    h = _open(model_path)
    stream = ctypes.c_void_p()
    cfg = _config(PHONEMES.encode())
    assert L.eliza_tts_stream_open(h, ctypes.byref(cfg), ctypes.byref(stream)) == Status.OK
    L.eliza_tts_close(h)  # against the contract, but it must not crash
    chunk = TtsChunk()
    chunk.struct_size = ctypes.sizeof(TtsChunk)
    assert L.eliza_tts_stream_next(stream, ctypes.byref(chunk)) == Status.E_STATE
    L.eliza_tts_stream_cancel(stream)
    L.eliza_tts_stream_close(stream)
