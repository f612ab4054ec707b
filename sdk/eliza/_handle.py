"""The lifetime the SDK's model objects share (eliza.LLM, eliza.TTS,
eliza.Diarizer): one native handle, at most one open stream on it, closed
stream first, and never freed under a running call (``_calling`` counts
them, ``close`` cancels and waits). Use after close is a StateError."""

from __future__ import annotations

import contextlib
import ctypes
import threading
import weakref
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

from ._interrupt import InFlight
from .errors import StateError, Status


class _Closable(Protocol):
    def close(self) -> None: ...


S = TypeVar("S", bound=_Closable)
M = TypeVar("M", bound="NativeModel")  # type: ignore[type-arg]


class NativeModel(Generic[S]):
    """Subclasses open their handle into ``_handle`` after ``__init__`` here
    and name their kind (``_kind``, e.g. ``"LLM"``) and their native close
    (``_close_handle``)."""

    _kind = "model"

    def __init__(self, path: str) -> None:
        self._handle: ctypes.c_void_p | None = None
        # Weak: a stream whose iterator is dropped unstarted must be able to
        # die (and close) on its own.
        self._stream: weakref.ref[S] | None = None
        self._stream_lock = threading.Lock()
        self._guard = InFlight(f"{self._kind} {path!r}")  # its StateError names the model as _live's
        self.path = path

    def _close_handle(self, handle: ctypes.c_void_p) -> None:
        raise NotImplementedError

    def _cancel_calls(self, handle: ctypes.c_void_p) -> None:
        """Asks the handle's running calls (not its stream) to stop."""

    def close(self) -> None:
        """Closes an open stream, then frees the model; a call running on
        another thread is cancelled and waited for first. Idempotent."""
        stream = self._open_stream_object()
        if stream is not None:
            stream.close()
        handle = self._handle
        if handle is None:
            return

        def free() -> None:
            self._handle = None
            self._close_handle(handle)

        self._guard.close(cancel=lambda: self._cancel_calls(handle), free=free)

    @property
    def closed(self) -> bool:
        return self._handle is None

    def __enter__(self: M) -> M:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def __repr__(self) -> str:
        return f"<eliza.{self._kind} {self.path!r}{' closed' if self.closed else ''}>"

    def _live(self) -> ctypes.c_void_p:
        if self._handle is None:
            raise StateError(Status.E_STATE, f"the {self._kind} {self.path!r} is closed")
        return self._handle

    @contextlib.contextmanager
    def _calling(self) -> Iterator[ctypes.c_void_p]:
        """The handle, counted as in use until the block ends (close waits)."""
        with self._guard.call():
            yield self._live()

    def _open_stream_object(self) -> S | None:
        with self._stream_lock:
            return self._stream() if self._stream is not None else None

    def _adopt(self, stream: S) -> S:
        """Records ``stream`` as the open one and returns it."""
        with self._stream_lock:
            self._stream = weakref.ref(stream)
        return stream

    def _forget(self, stream: S) -> None:
        with self._stream_lock:
            if self._stream is not None and self._stream() in (stream, None):
                self._stream = None
