"""Audio files in and out, through ``soundfile`` (libsndfile: WAV of any bit
depth, FLAC, OGG/Vorbis/Opus, MP3 where the bundled libsndfile has it) and
resampling through ``scipy.signal.resample_poly``. The library itself only
ever sees float32 PCM arrays.

Example::

    audio, rate = eliza.audio.read_audio("meeting.flac", sample_rate=16000)
    eliza.audio.write_audio("hello.ogg", tts_audio, 24000)
"""

from __future__ import annotations

import importlib
import math
import os
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt

from .errors import ElizaIOError, FormatError, InvalidArgumentError, Status, UnsupportedError

__all__ = ["FORMATS", "read_audio", "resample", "write_audio", "format_for"]

# Output formats by file extension: (soundfile format, subtype).
FORMATS: dict[str, tuple[str, str]] = {
    ".wav": ("WAV", "PCM_16"),
    ".flac": ("FLAC", "PCM_16"),
    ".ogg": ("OGG", "VORBIS"),
    ".mp3": ("MP3", "MPEG_LAYER_III"),
}

MIN_RATE, MAX_RATE = 1000, 768000


def _soundfile() -> Any:
    try:
        return importlib.import_module("soundfile")
    except ImportError:
        raise UnsupportedError(
            Status.E_UNSUPPORTED, "audio files need the soundfile package (pip install 'eliza[audio]')"
        ) from None


def _invalid(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(Status.E_INVALID_ARG, message)


def resample(audio: npt.ArrayLike, rate: int, target: int) -> npt.NDArray[np.float32]:
    """Mono ``audio`` from ``rate`` to ``target`` Hz (polyphase, Kaiser
    window: scipy's ``resample_poly``); unchanged when the rates agree."""
    x = np.asarray(audio, dtype=np.float32)
    if rate == target:
        return x
    from scipy.signal import resample_poly

    g = math.gcd(int(rate), int(target))
    return np.asarray(resample_poly(x, target // g, rate // g), dtype=np.float32)


def read_audio(
    path: str | os.PathLike[str], sample_rate: int | None = None
) -> tuple[npt.NDArray[np.float32], int]:
    """Mono float32 samples and their rate from any file libsndfile reads;
    channels are averaged; ``sample_rate`` resamples to that rate. A missing
    or unreadable file raises :class:`eliza.ElizaIOError` (an ``OSError``),
    a file that is not audio :class:`eliza.FormatError`."""
    p = Path(path)
    if not p.is_file():
        raise ElizaIOError(Status.E_IO, f"{p}: no such file")
    try:
        sf = _soundfile()
    except UnsupportedError:
        if p.suffix.lower() != ".wav":
            raise
        from .diarize import read_wav  # the stdlib reader: PCM and float WAV only

        mono, rate = read_wav(p)
        return (resample(mono, rate, sample_rate), sample_rate) if sample_rate else (mono, rate)
    try:
        data, rate = sf.read(str(p), dtype="float32", always_2d=True)
    except sf.LibsndfileError as e:
        raise FormatError(Status.E_FORMAT, f"{p}: not an audio file libsndfile reads ({e})") from None
    except OSError as e:
        raise ElizaIOError(Status.E_IO, f"{p}: {e}") from None
    mono = data.mean(axis=1, dtype=np.float64).astype(np.float32) if data.shape[1] > 1 else data[:, 0]
    rate = int(rate)
    if sample_rate is not None and sample_rate != rate:
        return resample(mono, rate, sample_rate), int(sample_rate)
    return np.ascontiguousarray(mono), rate


def format_for(path: str | os.PathLike[str]) -> tuple[str, str]:
    """(soundfile format, subtype) for the extension of ``path``."""
    ext = Path(path).suffix.lower()
    if ext not in FORMATS:
        raise _invalid(f"{path}: unknown audio extension {ext!r} (known: {', '.join(FORMATS)})")
    return FORMATS[ext]


def _check_mono(audio: npt.ArrayLike, sample_rate: int) -> npt.NDArray[np.float32]:
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, np.integer)):
        raise _invalid(f"sample rate {sample_rate!r} is not an integer")
    if not MIN_RATE <= int(sample_rate) <= MAX_RATE:
        raise _invalid(f"sample rate {sample_rate} Hz is outside {MIN_RATE}..{MAX_RATE} Hz")
    a = np.asarray(audio, dtype=np.float32)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise _invalid(f"audio must be mono (1-D), not shape {a.shape}")
    return np.clip(np.nan_to_num(a), -1.0, 1.0)


def write_audio(
    target: str | os.PathLike[str] | BinaryIO,
    audio: npt.ArrayLike,
    sample_rate: int,
    format: str | None = None,
) -> None:
    """Writes mono float audio (clipped to [-1, 1], NaN as 0). ``format``
    is an extension (".wav", ".flac", ".ogg", ".mp3"); None takes the path's.
    A file object needs ``format``. The file is written beside its final
    name and renamed into place, so a failure leaves no partial file."""
    a = _check_mono(audio, sample_rate)
    if format is None:
        if not isinstance(target, (str, os.PathLike)):
            raise _invalid("a file object needs format=('.wav', '.flac', ...)")
        kind, subtype = format_for(target)
    else:
        kind, subtype = format_for("x" + format)
    sf = _soundfile()
    if not isinstance(target, (str, os.PathLike)):
        sf.write(target, a, int(sample_rate), format=kind, subtype=subtype)
        return
    final = Path(target)
    if not final.parent.is_dir():
        raise ElizaIOError(Status.E_IO, f"{final}: the directory {final.parent} does not exist")
    tmp = final.with_name(f".{final.name}.{os.getpid()}.part")
    try:
        sf.write(str(tmp), a, int(sample_rate), format=kind, subtype=subtype)
        os.replace(tmp, final)
    except (OSError, RuntimeError) as e:  # soundfile's LibsndfileError is a RuntimeError
        raise ElizaIOError(Status.E_IO, f"{final}: {e}") from None
    finally:
        tmp.unlink(missing_ok=True)
