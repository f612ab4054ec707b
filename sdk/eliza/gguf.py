"""Reading GGUF files through libeliza's validating reader.

Example::

    with eliza.GGUFFile("gemma-3-270m-q4_k_m.gguf") as f:
        print(f.architecture)                      # "gemma3"
        emb = f.tensor("token_embd.weight")        # float32, shape (262144, 640)
"""

from __future__ import annotations

import ctypes
import json
import os
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

from ._native import GgufInfoParams, lib
from .errors import StateError, Status, check

__all__ = ["GGUFFile", "TensorInfo", "ALL_ITEMS"]

# max_array_items that lists every element of every array.
ALL_ITEMS = 0xFFFFFFFF


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a GGUF file.

    ``shape`` is in numpy order (outermost first): GGUF's ``ne`` reversed,
    the shape :meth:`GGUFFile.tensor` returns. ``type`` is the GGML type
    name (``"Q4_K"``, ``"F32"``, ...); ``offset`` is from the start of the
    data section; ``nbytes`` is the stored size.
    """

    name: str
    type: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


class GGUFFile:
    """An open, validated GGUF file (memory-mapped by the library).

    Use it as a context manager, or call :meth:`close`; closing is
    idempotent, and an unclosed file is closed when collected.

    Example::

        with eliza.GGUFFile(path) as f:
            n_layers = f.metadata[f"{f.architecture}.block_count"]
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._handle: ctypes.c_void_p | None = None
        self._summary_doc: dict[str, Any] | None = None
        self._tensors: dict[str, TensorInfo] | None = None
        self._metadata: dict[str, Any] | None = None
        # Held so that close() in __del__ needs no module globals, which may
        # already be gone at interpreter exit.
        self._native = lib()
        handle = ctypes.c_void_p()
        check(self._native.eliza_gguf_open(os.fsencode(self.path), ctypes.byref(handle)))
        self._handle = handle

    def close(self) -> None:
        """Unmaps the file. Calling it again is a no-op."""
        handle, self._handle = self._handle, None
        if handle is not None:
            self._native.eliza_gguf_close(handle)

    def __enter__(self) -> GGUFFile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        # getattr: __init__ may have failed before _handle existed.
        if getattr(self, "_handle", None) is not None:
            self.close()

    def __repr__(self) -> str:
        state = "open" if self._handle is not None else "closed"
        return f"GGUFFile({self.path!r}, {state})"

    def _open_handle(self) -> ctypes.c_void_p:
        if self._handle is None:
            raise StateError(Status.E_STATE, f"{self.path}: the GGUF file is closed")
        return self._handle

    def info(self, max_array_items: int = 8, include_tensors: bool = True) -> dict[str, Any]:
        """The library's description of the file: ``version``, ``alignment``,
        ``data_offset``, ``file_size``, ``architecture``, ``metadata``,
        ``metadata_types``, ``tensor_count`` and (if ``include_tensors``)
        ``tensors`` with shapes as stored (innermost first). Each array value
        is ``{"type", "len", "items"}`` with the first ``max_array_items``
        items (:data:`ALL_ITEMS` keeps them all)."""
        handle = self._open_handle()
        native = self._native
        params = GgufInfoParams()
        native.eliza_gguf_info_default_params(ctypes.byref(params))
        params.max_array_items = max_array_items
        params.include_tensors = 1 if include_tensors else 0
        out = ctypes.c_char_p()
        check(native.eliza_gguf_info_json(handle, ctypes.byref(params), ctypes.byref(out)))
        try:
            text = out.value or b""
        finally:
            native.eliza_free(out)
        doc: dict[str, Any] = json.loads(text.decode("utf-8"))
        return doc

    def _summary(self) -> dict[str, Any]:
        if self._summary_doc is None:
            self._summary_doc = self.info(max_array_items=0, include_tensors=True)
        return self._summary_doc

    def _tensor_index(self) -> dict[str, TensorInfo]:
        if self._tensors is None:
            self._tensors = {
                t["name"]: TensorInfo(
                    name=t["name"],
                    type=t["type"],
                    shape=tuple(reversed(t["shape"])),
                    offset=t["offset"],
                    nbytes=t["nbytes"],
                )
                for t in self._summary()["tensors"]
            }
        return self._tensors

    @property
    def architecture(self) -> str | None:
        """``general.architecture``, or None if the file has none."""
        arch: str | None = self._summary()["architecture"]
        return arch

    @property
    def tensors(self) -> list[TensorInfo]:
        """Every tensor, in file order."""
        return list(self._tensor_index().values())

    @property
    def metadata(self) -> dict[str, Any]:
        """Every metadata key with its whole value; arrays become lists."""
        if self._metadata is None:
            doc = self.info(max_array_items=ALL_ITEMS, include_tensors=False)
            # A JSON object among the values can only be an array.
            self._metadata = {
                key: value["items"] if isinstance(value, dict) else value
                for key, value in doc["metadata"].items()
            }
        return self._metadata

    def tensor(self, name: str) -> npt.NDArray[np.float32]:
        """Tensor ``name`` dequantized to float32, in numpy order (GGUF's
        ``ne`` reversed). Raises :class:`NotFoundError` if there is none,
        :class:`UnsupportedError` if this build cannot dequantize its type."""
        handle = self._open_handle()
        native = self._native
        data = ctypes.POINTER(ctypes.c_float)()
        count = ctypes.c_uint64()
        check(
            native.eliza_gguf_tensor_f32(
                handle, name.encode("utf-8"), ctypes.byref(data), ctypes.byref(count)
            )
        )
        try:
            flat = np.ctypeslib.as_array(data, shape=(count.value,)).copy()
        finally:
            native.eliza_free(data)
        return flat.reshape(self._tensor_index()[name].shape)
