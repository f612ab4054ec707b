"""Text-to-speech with Kokoro-82M through libeliza's ``eliza_tts_*`` calls.

Example::

    with eliza.TTS() as tts:            # default model, fetched and converted once
        audio = tts.synthesize("Hello there.", voice="af_heart")   # float32, tts.sample_rate Hz
        eliza.write_wav("hello.wav", audio, tts.sample_rate)
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import wave
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ._handle import NativeModel
from ._interrupt import InFlight, run
from ._native import TtsChunk, TtsConfig, TtsParams, lib
from .errors import ElizaIOError, InvalidArgumentError, StateError, Status, UnsupportedError, check

__all__ = ["TTS", "Chunk", "Voice", "write_wav", "pcm16"]

_PHONEMES = 1 << 0
_NO_NOISE = 1 << 1
_WHOLE_LINES = 1 << 2
_U64_MAX = (1 << 64) - 1


@dataclass(frozen=True)
class Chunk:
    """One piece of a :meth:`TTS.stream`: a sentence (or part of a long
    one), its float32 ``audio`` at :attr:`TTS.sample_rate`, and the Kokoro
    ``phonemes`` it speaks."""

    index: int
    audio: npt.NDArray[np.float32] = field(repr=False)
    phonemes: str


@dataclass(frozen=True)
class Voice:
    """One voice of the model: its ``name``, the G2P ``language`` its text
    goes through ("en-us", "en-gb", "es", "fr-fr", "hi", "it", "pt-br", "ja",
    "zh"; "" when the model does not say) and its ``gender`` ("f", "m" or
    "")."""

    name: str
    language: str
    gender: str


def _c_text(text: str | bytes, what: str) -> bytes:
    # Lone surrogates pass through as the invalid UTF-8 they encode to, so
    # the library refuses them like any other invalid input.
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    if b"\0" in data:
        raise InvalidArgumentError(Status.E_INVALID_ARG, f"{what} contains a NUL character")
    return data


def _espeak_defaults() -> tuple[str | None, str | None]:
    """The library and data of the ``espeakng_loader`` package if it is
    installed, else (None, None): $ELIZA_ESPEAK_LIBRARY / $ELIZA_ESPEAK_DATA
    or the system's espeak-ng. The variables, when set, win."""
    if os.environ.get("ELIZA_ESPEAK_LIBRARY") or os.environ.get("ELIZA_ESPEAK_DATA"):
        return None, None
    try:
        loader = importlib.import_module("espeakng_loader")
    except ImportError:
        return None, None
    return str(loader.get_library_path()), str(loader.get_data_path())


def _default_model() -> str:
    """The default model's GGUF, converted once into the model cache by
    ``eliza.models.kokoro_model_path`` (fetching its packages if needed)."""
    from . import models

    find = getattr(models, "kokoro_model_path", None)
    if find is None:
        raise UnsupportedError(
            Status.E_UNSUPPORTED, "this eliza has no default Kokoro model; pass model=PATH"
        )
    path: str = os.fspath(find())
    return path


class _Stream:
    """One open ``eliza_tts_stream``. ``cancel`` may come from any thread;
    ``close`` cancels a ``next_chunk`` running on another thread and waits
    for it before freeing the stream."""

    def __init__(self, tts: TTS, handle: ctypes.c_void_p) -> None:
        self._tts = tts
        self._handle: ctypes.c_void_p | None = handle
        self._guard = InFlight("TTS stream")
        self._chunk = TtsChunk()
        self._chunk.struct_size = ctypes.sizeof(TtsChunk)

    def next_chunk(self) -> Chunk | None:
        """The next chunk, or None once the stream has ended (also after a
        cancel or a close). Ctrl-C cancels the synthesis and raises
        KeyboardInterrupt once the library has stopped."""
        try:
            with self._guard.call():
                handle = self._handle
                if handle is None:
                    return None
                return run(lambda: self._next(handle), cancel=lambda: lib().eliza_tts_stream_cancel(handle))
        except StateError:
            return None

    def _next(self, handle: ctypes.c_void_p) -> Chunk | None:
        status = lib().eliza_tts_stream_next(handle, ctypes.byref(self._chunk))
        if status == Status.DONE or status == Status.E_CANCELLED:
            return None
        check(status)
        c = self._chunk
        n = int(c.n_samples)
        audio = np.ctypeslib.as_array(c.pcm, shape=(n,)).copy() if n else np.zeros(0, np.float32)
        phonemes = c.phonemes.decode("utf-8", "replace") if c.phonemes else ""
        return Chunk(index=int(c.index), audio=audio, phonemes=phonemes)

    def cancel(self) -> None:
        try:
            with self._guard.call():
                if self._handle is not None:
                    lib().eliza_tts_stream_cancel(self._handle)
        except StateError:
            pass

    def close(self) -> None:
        handle = self._handle
        if handle is None:
            return

        def free() -> None:
            self._handle = None
            lib().eliza_tts_stream_close(handle)
            self._tts._forget(self)

        self._guard.close(cancel=lambda: lib().eliza_tts_stream_cancel(handle), free=free)

    def __del__(self) -> None:
        # A stream dropped before it was iterated still holds the model's
        # one stream slot; give it back.
        with contextlib.suppress(Exception):
            self.close()


class TTS(NativeModel["_Stream"]):
    """A Kokoro-82M model opened from one GGUF file, voices included.

    ``model`` None takes the default model (converted once from its pinned
    packages into the model cache, 54 voices). Text goes through espeak-ng,
    loaded on the first text input: ``espeak_library`` / ``espeak_data``
    default to $ELIZA_ESPEAK_LIBRARY / $ELIZA_ESPEAK_DATA when set, else to
    the ``espeakng_loader`` package's when it is installed, else to the
    system's. The G2P language follows the voice (:attr:`voices`); a
    ``language`` here (an espeak-ng language, e.g. "en-us") replaces it for
    every call, and ``lang=`` of a call replaces both. ``n_threads`` 0 uses
    one thread per core. One thread at a time may use it; :meth:`cancel` is
    the exception.

    Failures raise :class:`eliza.ElizaError` subclasses: an unknown voice
    :class:`~eliza.NotFoundError`; a speed outside 0.25..4, a blend weight
    that is not a finite number > 0, a blend of voices of two languages, or
    invalid UTF-8 :class:`~eliza.InvalidArgumentError`; text input without
    espeak-ng, or in a language without a G2P here (Japanese, Mandarin: pass
    ``phonemes=True``) :class:`~eliza.UnsupportedError`.

    Example::

        with eliza.TTS(n_threads=2) as tts:
            for chunk in tts.stream("One. Two. Three.", voice="af_heart:0.7,af_bella:0.3"):
                print(chunk.index, chunk.phonemes, len(chunk.audio) / tts.sample_rate)
    """

    _kind = "TTS"

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        n_threads: int = 0,
        espeak_library: str | os.PathLike[str] | None = None,
        espeak_data: str | os.PathLike[str] | None = None,
        language: str | None = None,
    ) -> None:
        super().__init__(_default_model() if model is None else os.fspath(model))
        if espeak_library is None and espeak_data is None:
            espeak_library, espeak_data = _espeak_defaults()
        params = TtsParams()
        lib().eliza_tts_default_params(ctypes.byref(params))
        params.n_threads = n_threads
        # Kept for the call only: the library copies them.
        keep = [
            None if espeak_library is None else os.fsencode(espeak_library),
            None if espeak_data is None else os.fsencode(espeak_data),
            None if language is None else _c_text(language, "language"),
        ]
        params.espeak_library, params.espeak_data, params.language = keep
        handle = ctypes.c_void_p()
        check(lib().eliza_tts_open(os.fsencode(self.path), ctypes.byref(params), ctypes.byref(handle)))
        self._handle = handle
        self._language_set = language is not None

    def _close_handle(self, handle: ctypes.c_void_p) -> None:
        lib().eliza_tts_close(handle)

    # -- model ----------------------------------------------------------------

    @property
    def sample_rate(self) -> int:
        """Output sample rate in Hz (24000)."""
        with self._calling() as handle:
            return check(lib().eliza_tts_sample_rate(handle))

    @property
    def voices(self) -> list[Voice]:
        """The model's voices in its order (the first, af_heart in the
        default model, is the default)."""
        out: list[Voice] = []
        with self._calling() as handle:
            for i in range(check(lib().eliza_tts_voice_count(handle))):
                fields = [
                    lib().eliza_tts_voice_name(handle, i),
                    lib().eliza_tts_voice_language(handle, i),
                    lib().eliza_tts_voice_gender(handle, i),
                ]
                name, language, gender = (f.decode("utf-8", "replace") if f else "" for f in fields)
                out.append(Voice(name=name, language=language, gender=gender))
        return out

    def _voice_language(self, voice: str | Voice | None) -> str | None:
        """The language of ``voice`` (a name or blend: its first voice), None
        when the model does not say or the name is unknown."""
        voices = self.voices
        if isinstance(voice, Voice):
            return voice.language or None
        if voice is None:
            first = voices[0] if voices else None
        else:
            name = voice.split(",")[0].split(":")[0].strip()
            first = next((v for v in voices if v.name == name), None)
        return first.language if first is not None and first.language else None

    def profile(self) -> dict[str, float]:
        """Per-phase wall times (ms) of the last synthesis or stream: the
        model's phases, ``g2p`` and ``total``."""
        out = ctypes.c_char_p()
        with self._calling() as handle:
            check(lib().eliza_tts_profile_json(handle, ctypes.byref(out)))
        raw = out.value or b"{}"
        lib().eliza_free(ctypes.cast(out, ctypes.c_void_p))
        doc: dict[str, Any] = json.loads(raw.decode("utf-8"))
        return {str(k): float(v) for k, v in doc.items() if v is not None}

    def phonemize(self, text: str | bytes, voice: str | Voice | None = None, lang: str | None = None) -> str:
        """Kokoro phonemes of ``text``, one line per chunk as synthesis with
        ``voice`` would speak them: in language ``lang``, else the model's
        ``language``, else ``voice``'s (None: the default voice's)."""
        data = _c_text(text, "the text")
        language = lang if lang is not None else (None if self._language_set else self._voice_language(voice))
        out = ctypes.c_char_p()
        c_lang = None if language is None else _c_text(language, "the language")
        with self._calling() as handle:
            check(lib().eliza_tts_phonemize_language(handle, data, c_lang, ctypes.byref(out)))
        raw = out.value or b""
        lib().eliza_free(ctypes.cast(out, ctypes.c_void_p))
        return raw.decode("utf-8", "replace")

    # -- synthesis ------------------------------------------------------------

    def _config(
        self,
        text: str | bytes,
        voice: str | Voice | None,
        speed: float | None,
        phonemes: bool,
        no_noise: bool,
        seed: int | None,
        lang: str | None,
        whole_lines: bool = False,
    ) -> tuple[TtsConfig, tuple[bytes, bytes | None, bytes | None]]:
        if seed is not None and not 0 <= seed <= _U64_MAX:
            raise InvalidArgumentError(Status.E_INVALID_ARG, f"seed {seed} is not an unsigned 64-bit integer")
        text_bytes = _c_text(text, "the text")
        if isinstance(voice, Voice):
            voice = voice.name
        voice_bytes = None if voice is None else _c_text(voice, "the voice")
        lang_bytes = None if lang is None else _c_text(lang, "the language")
        cfg = TtsConfig()
        lib().eliza_tts_default_config(ctypes.byref(cfg))
        cfg.text = text_bytes
        cfg.voice = voice_bytes
        if speed is not None:
            cfg.speed = float(speed)
        cfg.flags = (
            (_PHONEMES if phonemes else 0)
            | (_NO_NOISE if no_noise else 0)
            | (_WHOLE_LINES if whole_lines else 0)
        )
        if seed is not None:
            cfg.seed = seed
        cfg.language = lang_bytes
        return cfg, (text_bytes, voice_bytes, lang_bytes)

    def synthesize(
        self,
        text: str | bytes,
        voice: str | Voice | None = None,
        speed: float | None = None,
        phonemes: bool = False,
        no_noise: bool = False,
        seed: int | None = None,
        lang: str | None = None,
    ) -> npt.NDArray[np.float32]:
        """The whole of ``text`` as float32 mono audio at :attr:`sample_rate`.

        ``voice`` is a name (or a :class:`Voice`) or a weighted blend ``"a:0.7,b:0.3"`` of voices
        of one language (None: the model's first voice, af_heart in the
        default model); ``lang`` the G2P language (None: the model's
        ``language``, else the voice's); ``speed`` 0.25..4; ``phonemes`` takes ``text``
        as Kokoro phonemes (lines split on ``"\\n"``) instead of running
        G2P; ``no_noise`` makes the output repeatable whatever the seed;
        otherwise ``seed`` draws the source noise. ``speed`` and ``seed``
        left None take the library's defaults (``eliza_tts_default_config``:
        1 and 0). Text with nothing to say
        gives an empty array. Ctrl-C stops the synthesis within a fraction
        of a second (the chunks of :meth:`stream` with ``whole_lines``, each
        cancellable): a text line's sentences are spoken together, as KPipeline
        speaks them, with no cut for an early first audio.
        """
        chunks = [
            c.audio for c in self.stream(text, voice, speed, phonemes, no_noise, seed, lang, whole_lines=True)
        ]
        return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)

    def stream(
        self,
        text: str | bytes,
        voice: str | Voice | None = None,
        speed: float | None = None,
        phonemes: bool = False,
        no_noise: bool = False,
        seed: int | None = None,
        lang: str | None = None,
        whole_lines: bool = False,
    ) -> Generator[Chunk, None, None]:
        """The audio of ``text`` one chunk (sentence) at a time, as it is
        made; arguments as in :meth:`synthesize`, whose result is the chunks'
        audio back to back with ``whole_lines``. Without it each sentence is
        a chunk and the first chunk of a long first sentence ends at its
        first clause boundary, for a sooner first audio; with it a text
        line's sentences go together up to the model's 510 phonemes, with
        no early cut (KPipeline's chunks).

        The arguments are checked here, so a bad one raises at once; the
        model runs as the iterator is consumed. Leaving the loop early
        closes the stream; :meth:`cancel` from another thread ends it.
        """
        cfg, _keep = self._config(text, voice, speed, phonemes, no_noise, seed, lang, whole_lines)
        out = ctypes.c_void_p()
        with self._calling() as handle:
            check(lib().eliza_tts_stream_open(handle, ctypes.byref(cfg), ctypes.byref(out)))
        return self._chunks(self._adopt(_Stream(self, out)))

    def cancel(self) -> None:
        """Asks the open stream, if any, to stop as soon as possible; its
        iterator then ends. Safe from any thread."""
        stream = self._open_stream_object()
        if stream is not None:
            stream.cancel()

    @staticmethod
    def _chunks(stream: _Stream) -> Generator[Chunk, None, None]:
        try:
            while True:
                chunk = stream.next_chunk()
                if chunk is None:
                    return
                yield chunk
        finally:
            stream.close()


def write_wav(path: str | os.PathLike[str], audio: npt.ArrayLike, sample_rate: int) -> None:
    """Writes mono float audio (clipped to [-1, 1]) as a 16-bit PCM WAV file
    (stdlib ``wave``; :func:`eliza.audio.write_audio` writes other formats).
    A rate outside 1000..768000 Hz or a multi-channel array is refused
    (:class:`~eliza.InvalidArgumentError`), a missing directory is an
    :class:`~eliza.ElizaIOError`; a failure leaves no partial file.

    Example::

        eliza.write_wav("out.wav", tts.synthesize("Hi."), tts.sample_rate)
    """
    from .audio import _check_mono

    frames = pcm16(_check_mono(audio, sample_rate))
    final = Path(os.fspath(path))
    if not final.parent.is_dir():
        raise ElizaIOError(Status.E_IO, f"{final}: the directory {final.parent} does not exist")
    tmp = final.with_name(f".{final.name}.{os.getpid()}.part")
    try:
        with wave.open(str(tmp), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(int(sample_rate))
            w.writeframes(frames)
        os.replace(tmp, final)
    except OSError as e:
        raise ElizaIOError(Status.E_IO, f"{final}: {e}") from None
    finally:
        tmp.unlink(missing_ok=True)


def pcm16(audio: npt.ArrayLike) -> bytes:
    """Float audio as little-endian 16-bit PCM bytes (clipped to [-1, 1],
    NaN as 0), the frames :func:`write_wav` writes."""
    samples = np.nan_to_num(np.asarray(audio, dtype=np.float32).reshape(-1))
    return (np.clip(samples, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()
