"""resemblyzer's GE2E speaker encoder (``resemblyzer/pretrained.pt`` in
``resemblyzer==0.1.4``) to the GGUF file libeliza's embedding engine loads.
docs/diarization.md pins the schema.

``pretrained.pt`` is a legacy (pre-zip) torch pickle. It is read with the
standard library: a restricted unpickler that knows only the three globals
such a state dict uses (``collections.OrderedDict``,
``torch._utils._rebuild_tensor_v2`` and the typed storages) and refuses any
other, then the raw storages that follow the pickle. No torch needed.

The mel front end is librosa's ``melspectrogram`` as resemblyzer calls it
(16 kHz, n_fft 400, hop 160, periodic Hann window, power 2, 40 Slaney mel
bands, no log); its window and filterbank are computed here and stored in
the file so the engine does not rebuild librosa's filter construction.

Example::

    from eliza.convert import convert_resemblyzer
    report = convert_resemblyzer("pretrained.pt", "resemblyzer.gguf")
"""

from __future__ import annotations

import argparse
import os
import pickle
import struct
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from ..errors import ElizaIOError, FormatError, Status
from ._output import gguf_file

__all__ = [
    "RESEMBLYZER_ARCH",
    "EmbeddingReport",
    "convert_resemblyzer",
    "read_legacy_state_dict",
    "mel_filterbank",
    "hann_window",
    "add_parser",
    "run_cli",
]

RESEMBLYZER_ARCH = "resemblyzer"

F32 = npt.NDArray[np.float32]

# resemblyzer/hparams.py and voice_encoder.py (embed_utterance defaults).
SAMPLE_RATE = 16000
N_FFT = 400  # 25 ms
HOP = 160  # 10 ms
N_MELS = 40
PARTIAL_FRAMES = 160
PARTIAL_RATE = 1.3
MIN_COVERAGE = 0.75
# librosa >= 0.10 pads centred frames with zeros ("constant"); resemblyzer
# leaves pad_mode at librosa's default.
PAD_MODE = "constant"
GATE_ORDER_TORCH = "ifgo"

_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_STORAGE_DTYPES = {
    "FloatStorage": "<f4",
    "DoubleStorage": "<f8",
    "HalfStorage": "<f2",
    "LongStorage": "<i8",
    "IntStorage": "<i4",
    "ShortStorage": "<i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "u1",
}


def _format(where: Path, msg: str) -> FormatError:
    return FormatError(Status.E_FORMAT, f"{where}: {msg}")


# ---------------------------------------------------------------------------
# Legacy torch pickle
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _StorageType:
    name: str


@dataclass(frozen=True)
class _StorageRef:
    key: str
    dtype: str
    n_elements: int


@dataclass(frozen=True)
class _TensorRef:
    storage: _StorageRef
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]


def _rebuild_tensor_v2(storage: _StorageRef, offset: int, size: Any, stride: Any, *_: Any) -> _TensorRef:
    return _TensorRef(storage, int(offset), tuple(int(s) for s in size), tuple(int(s) for s in stride))


class _Unpickler(pickle.Unpickler):
    """Builds nothing but dicts, numbers and references: every storage met
    is recorded in ``storages`` by key."""

    def __init__(self, f: IO[bytes]) -> None:
        super().__init__(f)
        self.storages: dict[str, _StorageRef] = {}

    def find_class(self, module: str, name: str) -> Any:
        if module == "collections" and name == "OrderedDict":
            return OrderedDict
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return _rebuild_tensor_v2
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in a weights file")

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unexpected persistent id {pid!r}")
        kind, key, n = pid[1], str(pid[2]), int(pid[4])
        if not isinstance(kind, _StorageType):
            raise pickle.UnpicklingError(f"storage type {kind!r}")
        ref = self.storages.setdefault(key, _StorageRef(key, _STORAGE_DTYPES[kind.name], n))
        return ref


def _load_pickles(f: IO[bytes], path: Path) -> tuple[Any, list[str], dict[str, _StorageRef]]:
    """The root object, the storage keys in file order and the storages."""
    try:
        if _Unpickler(f).load() != _LEGACY_MAGIC:
            raise _format(path, "not a legacy torch file (bad magic number)")
        if _Unpickler(f).load() != 1001:
            raise _format(path, "unknown legacy torch protocol version")
        sys_info = _Unpickler(f).load()
        if not isinstance(sys_info, dict) or not sys_info.get("little_endian", False):
            raise _format(path, "big-endian torch file")
        unpickler = _Unpickler(f)
        root = unpickler.load()
        keys = _Unpickler(f).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as e:
        raise _format(path, f"not a readable torch checkpoint ({e})") from e
    if not isinstance(keys, list) or any(str(k) not in unpickler.storages for k in keys):
        raise _format(path, "the storage key list does not match the pickled storages")
    return root, [str(k) for k in keys], unpickler.storages


def read_legacy_state_dict(path: Path) -> dict[str, F32]:
    """The tensors of ``checkpoint["model_state"]`` in a legacy torch file,
    as float32 numpy arrays. Nothing in the file is executed: the plain
    pickles before the model (magic number, protocol, system info) hold
    only numbers, strings and dicts, and every pickle may name only the
    globals a state dict needs."""
    try:
        f = path.open("rb")
    except OSError as e:
        raise ElizaIOError(Status.E_IO, f"{path}: {e.strerror or e}") from e
    with f:
        root, keys, storages = _load_pickles(f, path)
        state = root.get("model_state") if isinstance(root, dict) else None
        if not isinstance(state, dict):
            raise _format(path, "no model_state dict")
        refs = {str(k): v for k, v in state.items() if isinstance(v, _TensorRef)}
        wanted = {r.storage.key for r in refs.values()}
        raw: dict[str, bytes] = {}
        for key in keys:
            head = f.read(8)
            if len(head) != 8:
                raise _format(path, f"storage {key}: truncated")
            (count,) = struct.unpack("<q", head)
            itemsize = np.dtype(storages[key].dtype).itemsize
            if count < 0 or count != storages[key].n_elements:
                raise _format(
                    path, f"storage {key}: {count} elements, the pickle says {storages[key].n_elements}"
                )
            data = f.read(count * itemsize)
            if len(data) != count * itemsize:
                raise _format(path, f"storage {key}: truncated ({len(data)} of {count * itemsize} bytes)")
            if key in wanted:
                raw[key] = data
    out: dict[str, F32] = {}
    for name, t in refs.items():
        flat = np.frombuffer(raw[t.storage.key], dtype=t.storage.dtype)
        n = int(np.prod(t.shape)) if t.shape else 1
        last = t.offset + sum((d - 1) * s for d, s in zip(t.shape, t.stride)) if n else t.offset
        if t.offset < 0 or any(s < 0 for s in t.stride) or (n and last >= flat.size):
            raise _format(path, f"tensor {name}: extent outside its storage")
        view = np.lib.stride_tricks.as_strided(
            flat[t.offset :], shape=t.shape, strides=tuple(s * flat.itemsize for s in t.stride)
        )
        out[name] = np.ascontiguousarray(view, dtype=np.float32)
    return out


# ---------------------------------------------------------------------------
# Mel front end
# ---------------------------------------------------------------------------


def _hz_to_mel(f: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Slaney's mel scale (librosa's default, htk=False): linear below
    1 kHz, logarithmic above."""
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    return np.where(
        f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-10) / min_log_hz) / logstep, f / f_sp
    )


def _mel_to_hz(m: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), f_sp * m)


def mel_filterbank(sr: int = SAMPLE_RATE, n_fft: int = N_FFT, n_mels: int = N_MELS) -> F32:
    """[n_mels, n_fft // 2 + 1] triangular filters on the Slaney mel scale
    from 0 Hz to sr / 2, each scaled to unit area (Slaney norm): the
    filterbank ``librosa.filters.mel`` builds by default."""
    fft_freqs = np.linspace(0.0, sr / 2.0, n_fft // 2 + 1)
    mel_f = _mel_to_hz(np.linspace(_hz_to_mel(np.array(0.0)), _hz_to_mel(np.array(sr / 2.0)), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    weights *= (2.0 / (mel_f[2 : n_mels + 2] - mel_f[:n_mels]))[:, None]
    return weights.astype(np.float32)


def hann_window(n: int = N_FFT) -> F32:
    """The periodic Hann window (scipy's ``get_window("hann", n)``, which
    librosa uses): 0.5 - 0.5 cos(2 pi k / n)."""
    k = np.arange(n, dtype=np.float64)
    return (0.5 - 0.5 * np.cos(2.0 * np.pi * k / n)).astype(np.float32)


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EmbeddingReport:
    """What :func:`convert_resemblyzer` wrote."""

    path: Path
    n_tensors: int
    n_params: int
    n_layers: int
    hidden: int
    embedding_length: int


def _plan(sd: dict[str, F32], where: Path) -> tuple[list[tuple[str, F32]], int, int, int]:
    """GGUF tensors (name, data), layer count, hidden size, embedding size."""

    def get(name: str, ndim: int) -> F32:
        if name not in sd:
            raise _format(where, f"model_state has no {name}")
        if sd[name].ndim != ndim:
            raise _format(where, f"{name}: {sd[name].ndim} dimensions, expected {ndim}")
        return sd[name]

    n_layers = 0
    while f"lstm.weight_ih_l{n_layers}" in sd:
        n_layers += 1
    if n_layers == 0:
        raise _format(where, "model_state has no LSTM (lstm.weight_ih_l0)")
    H = get("lstm.weight_hh_l0", 2).shape[1]
    n_in = N_MELS
    out: list[tuple[str, F32]] = [("mel.window", hann_window()), ("mel.filters", mel_filterbank())]
    for i in range(n_layers):
        w_ih, w_hh = get(f"lstm.weight_ih_l{i}", 2), get(f"lstm.weight_hh_l{i}", 2)
        b_ih, b_hh = get(f"lstm.bias_ih_l{i}", 1), get(f"lstm.bias_hh_l{i}", 1)
        for name, a, shape in (
            ("weight_ih", w_ih, (4 * H, n_in)),
            ("weight_hh", w_hh, (4 * H, H)),
            ("bias_ih", b_ih, (4 * H,)),
            ("bias_hh", b_hh, (4 * H,)),
        ):
            if a.shape != shape:
                raise _format(where, f"lstm.{name}_l{i}: shape {list(a.shape)}, expected {list(shape)}")
            # One direction: [1, ...], the layout of the bidirectional LSTMs.
            out.append((f"lstm.{i}.{name}", a.reshape((1, *shape))))
        n_in = H
    w, b = get("linear.weight", 2), get("linear.bias", 1)
    if w.shape[1] != H or b.shape != (w.shape[0],):
        raise _format(where, f"linear: weight {list(w.shape)} bias {list(b.shape)} after an LSTM of {H}")
    out += [("linear.weight", w), ("linear.bias", b)]
    return out, n_layers, H, w.shape[0]


def convert_resemblyzer(
    pt_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    progress: Callable[[int, int, str], None] | None = None,
) -> EmbeddingReport:
    """Converts resemblyzer's ``pretrained.pt`` into the GGUF file
    ``out_path`` (all tensors F32, LSTM gates in PyTorch's i, f, g, o
    order). The file appears complete or not at all.

    Raises :class:`eliza.FormatError` for a file that is not such a
    checkpoint, :class:`eliza.ElizaIOError` when it cannot be read.

    Example::

        convert_resemblyzer("pretrained.pt", "resemblyzer-ge2e.gguf")
    """
    import gguf

    src = Path(pt_path)
    tensors, n_layers, hidden, n_embd = _plan(read_legacy_state_dict(src), src)
    out = Path(out_path)
    a = RESEMBLYZER_ARCH
    with gguf_file(out, RESEMBLYZER_ARCH) as writer:
        writer.add_name("resemblyzer GE2E voice encoder")
        writer.add_file_type(int(gguf.LlamaFileType.ALL_F32))
        writer.add_uint32(f"{a}.sample_rate", SAMPLE_RATE)
        writer.add_uint32(f"{a}.mel.n_fft", N_FFT)
        writer.add_uint32(f"{a}.mel.hop_length", HOP)
        writer.add_uint32(f"{a}.mel.n_mels", N_MELS)
        writer.add_float32(f"{a}.mel.power", 2.0)
        writer.add_bool(f"{a}.mel.center", True)
        writer.add_string(f"{a}.mel.pad_mode", PAD_MODE)
        writer.add_uint32(f"{a}.partial.frames", PARTIAL_FRAMES)
        writer.add_float32(f"{a}.partial.rate", PARTIAL_RATE)
        writer.add_float32(f"{a}.partial.min_coverage", MIN_COVERAGE)
        writer.add_uint32(f"{a}.lstm.layer_count", n_layers)
        writer.add_uint32(f"{a}.lstm.hidden_size", hidden)
        writer.add_bool(f"{a}.lstm.bidirectional", False)
        writer.add_string(f"{a}.lstm.gate_order", GATE_ORDER_TORCH)
        writer.add_uint32(f"{a}.embedding_length", n_embd)
        n_params = 0
        for i, (name, data) in enumerate(tensors):
            if progress is not None:
                progress(i, len(tensors), name)
            writer.add_tensor(name, np.ascontiguousarray(data, dtype=np.float32))
            n_params += int(data.size)
    return EmbeddingReport(out, len(tensors), n_params, n_layers, hidden, n_embd)


def add_parser(formats: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Registers ``python -m eliza.convert resemblyzer PT OUT.gguf``."""
    p = formats.add_parser(
        "resemblyzer",
        help="resemblyzer's GE2E speaker encoder (pretrained.pt of resemblyzer==0.1.4)",
        description="Converts resemblyzer/pretrained.pt to the GGUF file of libeliza's speaker-embedding "
        "model (docs/diarization.md). No torch needed.",
    )
    p.add_argument("pt", metavar="PT", help="pretrained.pt")
    p.add_argument("out", metavar="OUT.gguf", help="the GGUF file to write")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line on a terminal")


def run_cli(args: argparse.Namespace, progress: Callable[[int, int, str], None]) -> str:
    """Runs the subcommand; returns the summary line."""
    r = convert_resemblyzer(args.pt, args.out, progress)
    return (
        f"{r.path}: {RESEMBLYZER_ARCH}, {r.n_tensors} tensors (F32), {r.n_params / 1e6:.2f}M parameters, "
        f"LSTM {r.n_layers} x {r.hidden}, embedding {r.embedding_length}"
    )
