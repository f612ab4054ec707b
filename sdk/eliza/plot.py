"""Pictures of audio and of who spoke when, with matplotlib (an optional
extra: ``pip install 'libeliza[plot]'``).

Example::

    eliza.plot.timeline("meeting.png", turns, audio, 16000)     # speakers over the waveform
    eliza.plot.spectrogram("hello.png", audio, 24000)           # waveform over a mel spectrogram
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .errors import InvalidArgumentError, Status, UnsupportedError

__all__ = ["SPEAKER_COLORS", "speaker_color", "timeline", "spectrogram", "mel_spectrogram"]

# One colour per speaker: tab10, then tab20's light tones (its greys swapped for
# colours, so text and the waveform never look like a speaker).
SPEAKER_COLORS: tuple[str, ...] = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#393b79", "#bcbd22",
    "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#e7ba52",
    "#dbdb8d", "#9edae5",
)

# Figure size in inches at this many dots per inch: 1200 x 500 pixels.
_DPI = 100
_SIZE = (12.0, 5.0)


def speaker_color(speaker: int) -> str:
    """The colour of ``speaker`` (0-based) in :func:`timeline`."""
    return SPEAKER_COLORS[speaker % len(SPEAKER_COLORS)]


def _pyplot() -> Any:
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError:
        raise UnsupportedError(
            Status.E_UNSUPPORTED, "pictures need matplotlib (pip install 'libeliza[plot]')"
        ) from None
    matplotlib.use("Agg")  # files only, no display
    return importlib.import_module("matplotlib.pyplot")


def _mono(audio: npt.ArrayLike, sample_rate: int) -> npt.NDArray[np.float32]:
    a = np.asarray(audio, dtype=np.float32)
    if a.ndim != 1:
        raise InvalidArgumentError(Status.E_INVALID_ARG, f"audio must be mono (1-D), not shape {a.shape}")
    if sample_rate <= 0:
        raise InvalidArgumentError(Status.E_INVALID_ARG, f"sample rate {sample_rate} Hz is not positive")
    return np.nan_to_num(a)


def _save(fig: Any, path: str | os.PathLike[str]) -> None:
    """PNG beside its final name, then renamed: never a partial picture."""
    from pathlib import Path

    final = Path(path)
    tmp = final.with_name(f".{final.name}.{os.getpid()}.part")
    try:
        fig.savefig(tmp, dpi=_DPI, format="png")
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def _waveform(ax: Any, audio: npt.NDArray[np.float32], sample_rate: int) -> None:
    # At most ~4000 points: the min/max envelope of each pixel-wide bucket.
    n = len(audio)
    step = max(1, n // 2000)
    m = n // step * step
    t = np.arange(0, m, step) / sample_rate
    if m:
        buckets = audio[:m].reshape(-1, step)
        ax.fill_between(t, buckets.min(axis=1), buckets.max(axis=1), color="#404040", linewidth=0)
    ax.set_xlim(0, max(n / sample_rate, 1e-3))
    ax.set_ylim(-1, 1)
    ax.set_ylabel("amplitude")


def timeline(
    path: str | os.PathLike[str],
    turns: Sequence[Any],
    audio: npt.ArrayLike,
    sample_rate: int,
    title: str | None = None,
) -> None:
    """Writes a PNG of the speaker turns (one row and one colour per
    speaker, labelled SPEAKER_NN) above the waveform they came from."""
    plt = _pyplot()
    a = _mono(audio, sample_rate)
    speakers = sorted({int(t.speaker) for t in turns})
    fig, (top, bottom) = plt.subplots(2, 1, figsize=_SIZE, dpi=_DPI, sharex=True,
                                      gridspec_kw={"height_ratios": [max(len(speakers), 1), 2]})
    try:
        for row, s in enumerate(speakers):
            spans = [(t.start, t.end - t.start) for t in turns if int(t.speaker) == s]
            top.broken_barh(spans, (row - 0.4, 0.8), facecolors=speaker_color(s), edgecolor="none")
        top.set_yticks(range(len(speakers)), [f"SPEAKER_{s:02d}" for s in speakers])
        top.set_ylim(-0.6, max(len(speakers), 1) - 0.4)
        top.invert_yaxis()
        if title:
            top.set_title(title)
        _waveform(bottom, a, sample_rate)
        bottom.set_xlabel("time (s)")
        fig.tight_layout()
        _save(fig, path)
    finally:
        plt.close(fig)


def mel_spectrogram(
    audio: npt.ArrayLike, sample_rate: int, n_mels: int = 80, n_fft: int = 1024, hop: int = 256
) -> npt.NDArray[np.float32]:
    """Log-mel power spectrogram [n_mels, frames] in dB (Hann window, HTK mel
    scale, triangular filters up to half the sample rate)."""
    a = _mono(audio, sample_rate)
    if len(a) < n_fft:
        a = np.pad(a, (0, n_fft - len(a)))
    frames = 1 + (len(a) - n_fft) // hop
    idx = np.arange(n_fft)[None, :] + hop * np.arange(frames)[:, None]
    power = np.abs(np.fft.rfft(a[idx] * np.hanning(n_fft), axis=1)) ** 2  # [frames, n_fft/2+1]

    def mel(f: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.asarray(2595.0 * np.log10(1.0 + f / 700.0))

    edges_mel = np.linspace(0.0, float(mel(np.array(sample_rate / 2.0))), n_mels + 2)
    edges_hz = 700.0 * (10.0 ** (edges_mel / 2595.0) - 1.0)
    bins = np.fft.rfftfreq(n_fft, 1.0 / sample_rate)
    lo, mid, hi = edges_hz[:-2, None], edges_hz[1:-1, None], edges_hz[2:, None]
    filters = np.maximum(0.0, np.minimum((bins - lo) / (mid - lo), (hi - bins) / (hi - mid)))
    db: npt.NDArray[np.float32] = (10.0 * np.log10(np.maximum(filters @ power.T, 1e-10))).astype(np.float32)
    return db


def spectrogram(path: str | os.PathLike[str], audio: npt.ArrayLike, sample_rate: int,
                title: str | None = None) -> None:
    """Writes a PNG of the waveform above its log-mel spectrogram."""
    plt = _pyplot()
    a = _mono(audio, sample_rate)
    spec = mel_spectrogram(a, sample_rate)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=_SIZE, dpi=_DPI, sharex=True,
                                      gridspec_kw={"height_ratios": [1, 2]})
    try:
        _waveform(top, a, sample_rate)
        if title:
            top.set_title(title)
        seconds = max(len(a) / sample_rate, 1e-3)
        peak = float(spec.max())
        bottom.imshow(spec, origin="lower", aspect="auto", extent=(0.0, seconds, 0, spec.shape[0]),
                      cmap="magma", vmin=peak - 80.0, vmax=peak)
        bottom.set_ylabel("mel band")
        bottom.set_xlabel("time (s)")
        fig.tight_layout()
        _save(fig, path)
    finally:
        plt.close(fig)
