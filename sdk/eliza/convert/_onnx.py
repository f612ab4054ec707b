"""ONNX models as the converters read them, through the ``onnx`` package
(a dependency: the first use of a default model converts its ONNX file): a
graph's nodes with their attributes, its initializers as numpy arrays on
demand, and which node makes or takes each value. A file that is not a
whole ONNX model is a FormatError.

Example::

    g = read_onnx(Path("segmentation-3.0.onnx"), "segmentation-3.0.onnx")
    lstm = [n for n in g.nodes if n.op == "LSTM"][0]
    w = g.array(lstm.inputs[1])          # [2, 4H, in] float32
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..errors import ElizaIOError, FormatError, Status, UnsupportedError

if TYPE_CHECKING:
    import onnx

__all__ = ["OnnxGraph", "OnnxNode", "read_onnx"]

# The initializer element types the converters take (onnx.TensorProto.DataType).
_DTYPES: dict[int, Any] = {
    1: np.float32,
    2: np.uint8,
    3: np.int8,
    6: np.int32,
    7: np.int64,
    10: np.float16,
    11: np.float64,
}


@dataclass
class OnnxNode:
    op: str
    name: str
    inputs: list[str]
    outputs: list[str]
    # Attribute values: int, float, str, list of int/float/str, or an OnnxGraph (If branches).
    attrs: dict[str, Any] = field(default_factory=dict)


def _attribute(attr: onnx.AttributeProto, what: str) -> Any:
    from onnx import helper

    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", "replace") for v in value]
    if attr.type == attr.GRAPH:
        return OnnxGraph(value, f"{what}, attribute {attr.name}")
    return value


class OnnxGraph:
    """The nodes (in file order) and initializers of one ONNX graph, with
    producer and consumer indexes; ``inputs``/``outputs`` are the graph's
    value names."""

    def __init__(self, graph: onnx.GraphProto, what: str) -> None:
        self.what = what
        self.nodes = [
            OnnxNode(n.op_type, n.name, list(n.input), list(n.output),
                     {a.name: _attribute(a, what) for a in n.attribute})
            for n in graph.node
        ]
        self.inits: dict[str, onnx.TensorProto] = {t.name: t for t in graph.initializer}
        self.inputs = [v.name for v in graph.input]
        self.outputs = [v.name for v in graph.output]
        self.producer: dict[str, OnnxNode] = {o: n for n in self.nodes for o in n.outputs}
        self.consumers: dict[str, list[OnnxNode]] = {}
        for n in self.nodes:
            for i in n.inputs:
                self.consumers.setdefault(i, []).append(n)

    def dtype(self, name: str) -> Any:
        """The numpy element type of initializer ``name``."""
        t = self.inits[name]
        if t.data_type not in _DTYPES:
            raise UnsupportedError(
                Status.E_UNSUPPORTED, f"{self.what}: initializer {name!r} has ONNX data type {t.data_type}"
            )
        return _DTYPES[t.data_type]

    def array(self, name: str) -> npt.NDArray[Any]:
        """Initializer ``name`` as a numpy array of its stored type."""
        from onnx import numpy_helper

        t = self.inits[name]
        dtype = self.dtype(name)
        if t.data_location == t.EXTERNAL:
            raise UnsupportedError(
                Status.E_UNSUPPORTED, f"{self.what}: initializer {name!r} keeps its data in an external file"
            )
        if any(d < 0 for d in t.dims):
            raise FormatError(Status.E_FORMAT, f"{self.what}: initializer {name!r} has dims {list(t.dims)}")
        try:
            arr = numpy_helper.to_array(t)
        except (ValueError, TypeError) as e:
            raise FormatError(
                Status.E_FORMAT, f"{self.what}: initializer {name!r} ({list(t.dims)}) is unreadable: {e}"
            ) from e
        return arr.astype(dtype, copy=False)


def _onnx() -> Any:
    try:
        import onnx
    except ImportError as e:
        raise UnsupportedError(
            Status.E_UNSUPPORTED,
            "reading ONNX models needs the onnx package (a dependency of libeliza): pip install onnx",
        ) from e
    return onnx


def read_onnx(source: bytes | memoryview | Path, what: str) -> OnnxGraph:
    """The main graph of an ONNX model (a path or the file's bytes); ``what``
    names it in errors. ElizaIOError for an unreadable file, FormatError for
    bytes that are not a whole ONNX model, UnsupportedError without the
    onnx package."""
    onnx = _onnx()
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

    if isinstance(source, Path):
        try:
            data = source.read_bytes()
        except FileNotFoundError as e:
            raise ElizaIOError(Status.E_IO, f"{what}: no such file") from e
        except OSError as e:
            raise ElizaIOError(Status.E_IO, f"{what}: {e.strerror or e}") from e
    else:
        data = bytes(source)
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise FormatError(
            Status.E_FORMAT, f"{what}: not a readable ONNX model (truncated or corrupt file: {e})"
        ) from e
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise FormatError(
            Status.E_FORMAT, f"{what}: no ONNX graph in the file (not an ONNX model, or truncated)"
        )
    return OnnxGraph(model.graph, what)
