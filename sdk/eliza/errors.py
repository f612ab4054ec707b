"""Status codes of the C ABI and the exceptions that carry them.

Every failing libeliza call returns a negative ``ELIZA_E_*`` code; the SDK
raises the matching :class:`ElizaError` subclass with the code and the
library's message for this thread.

Example::

    try:
        eliza.GGUFFile("missing.gguf")
    except eliza.ElizaIOError as e:
        print(e.code, e.message)     # Status.E_IO, "... missing.gguf ..."
"""

from __future__ import annotations

import enum

__all__ = [
    "Status",
    "ElizaError",
    "InvalidArgumentError",
    "ElizaIOError",
    "FormatError",
    "UnsupportedError",
    "OutOfMemoryError",
    "CancelledError",
    "AbiError",
    "NotFoundError",
    "ContextFullError",
    "StateError",
    "InternalError",
    "error_for",
    "check",
]


class Status(enum.IntEnum):
    """``eliza_status`` from eliza.h, names without the ``ELIZA_`` prefix.
    The values are pinned by the ABI and never change."""

    OK = 0
    DONE = 1
    E_INVALID_ARG = -1
    E_IO = -2
    E_FORMAT = -3
    E_UNSUPPORTED = -4
    E_NOMEM = -5
    E_CANCELLED = -6
    E_ABI = -7
    E_NOT_FOUND = -8
    E_CONTEXT_FULL = -9
    E_STATE = -10
    E_INTERNAL = -11


class ElizaError(Exception):
    """A libeliza failure: ``code`` is the C status, ``message`` says why."""

    status: Status = Status.E_INTERNAL

    def __init__(self, code: int, message: str) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        try:
            name = "ELIZA_" + Status(self.code).name
        except ValueError:
            name = f"status {self.code}"
        return f"{self.message} ({name})" if self.message else name


class InvalidArgumentError(ElizaError):
    """NULL where not allowed, or a value out of range."""

    status = Status.E_INVALID_ARG


class ElizaIOError(ElizaError, OSError):
    """A file is missing, unreadable, or cannot be mapped. Also an
    ``OSError``, so ``except OSError`` catches it as it catches Python's
    own I/O errors."""

    status = Status.E_IO


class FormatError(ElizaError):
    """A corrupt or truncated file: bad magic, counts, offsets or extents."""

    status = Status.E_FORMAT


class UnsupportedError(ElizaError):
    """Valid input that this build cannot handle."""

    status = Status.E_UNSUPPORTED


class OutOfMemoryError(ElizaError):
    """An allocation failed or a size was absurd."""

    status = Status.E_NOMEM


class CancelledError(ElizaError):
    """A cancel request stopped the work."""

    status = Status.E_CANCELLED


class AbiError(ElizaError):
    """The library and its caller disagree on the ABI: a struct_size the
    library refuses, or (raised by the SDK when it loads the library) a
    different ABI version or struct layout than the SDK's mirrors."""

    status = Status.E_ABI


class NotFoundError(ElizaError):
    """A named tensor, key, voice, ... does not exist."""

    status = Status.E_NOT_FOUND


class ContextFullError(ElizaError):
    """The context window has no room left."""

    status = Status.E_CONTEXT_FULL


class StateError(ElizaError):
    """The call is not valid in the handle's current state (e.g. closed)."""

    status = Status.E_STATE


class InternalError(ElizaError):
    """A bug in libeliza (or a status code this SDK does not know)."""

    status = Status.E_INTERNAL


_BY_STATUS: dict[int, type[ElizaError]] = {
    cls.status: cls
    for cls in (
        InvalidArgumentError,
        ElizaIOError,
        FormatError,
        UnsupportedError,
        OutOfMemoryError,
        CancelledError,
        AbiError,
        NotFoundError,
        ContextFullError,
        StateError,
        InternalError,
    )
}


def error_for(code: int, message: str) -> ElizaError:
    """The exception for a negative status ``code``; unknown codes map to
    :class:`InternalError` (keeping the code)."""
    return _BY_STATUS.get(code, InternalError)(code, message)


def check(status: int) -> int:
    """Returns a non-negative ``status`` (OK or DONE) unchanged; raises the
    matching :class:`ElizaError` with ``eliza_last_error()`` otherwise. Call
    it right after the failing call, on the same thread."""
    if status >= 0:
        return status
    from ._native import lib  # errors.py is imported by _native itself

    raw: bytes | None = lib().eliza_last_error()
    raise error_for(status, raw.decode("utf-8", "replace") if raw else "")
