"""libeliza for Python: on-device LLM, text-to-speech and diarization
through the library's C ABI (ctypes; no compiled extension).

The native library is loaded, and its ABI checked against this package, on
first use. Example::

    import eliza
    print(eliza.version(), eliza.capabilities()["simd"])
    with eliza.GGUFFile("model.gguf") as f:
        print(f.architecture, len(f.tensors))

Logging: the library is silent unless a handler is installed.
``eliza.set_log_handler(eliza.forward_to_logging, eliza.LogLevel.INFO)``
sends its messages to the ``logging`` logger named ``"eliza"``.
"""

from __future__ import annotations

import enum
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from . import audio, chat, models, plot
from ._native import ABI_VERSION, LOG_FN, lib
from .chat import ChatTemplateError
from .diarize import Diarization, Diarizer, Turn, to_rttm
from .errors import (
    AbiError,
    CancelledError,
    ContextFullError,
    ElizaError,
    ElizaIOError,
    FormatError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfMemoryError,
    StateError,
    Status,
    UnsupportedError,
)
from .gguf import GGUFFile, TensorInfo
from .llm import LLM, GenerateOptions, LLMStats, Perplexity, StopReason
from .model_check import ModelCheck, check_model
from .tts import TTS, write_wav

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "audio",
    "models",
    "plot",
    "ABI_VERSION",
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
    "ChatTemplateError",
    "chat",
    "GGUFFile",
    "TensorInfo",
    "LLM",
    "GenerateOptions",
    "LLMStats",
    "Perplexity",
    "ModelCheck",
    "check_model",
    "StopReason",
    "Diarization",
    "Diarizer",
    "Turn",
    "to_rttm",
    "TTS",
    "write_wav",
    "LogLevel",
    "LogHandler",
    "abi_version",
    "version",
    "capabilities",
    "set_log_handler",
    "forward_to_logging",
]


class LogLevel(enum.IntEnum):
    """``eliza_log_level``: lower is more severe."""

    ERROR = 0
    WARN = 1
    INFO = 2
    DEBUG = 3


LogHandler = Callable[[LogLevel, str], None]


def abi_version() -> int:
    """The ABI version the loaded library was built with (== ABI_VERSION,
    or loading would have raised AbiError)."""
    return int(lib().eliza_abi_version())


def version() -> str:
    """The library's release string, e.g. ``"0.1.0"``."""
    raw: bytes = lib().eliza_version()
    return raw.decode("utf-8")


def capabilities() -> dict[str, Any]:
    """What this build can do on this CPU: ``abi``, ``version``, ``simd``
    (kernel level chosen at run time), ``cpu`` (features), ``quant_types``,
    ``engines``, ``espeak_ng``, ``force_scalar``, ...

    Example::

        if eliza.capabilities()["simd"] == "scalar": print("no SIMD kernels")
    """
    raw: bytes = lib().eliza_capabilities_json()
    caps: dict[str, Any] = json.loads(raw.decode("utf-8"))
    return caps


_PY_LEVELS = {
    LogLevel.ERROR: logging.ERROR,
    LogLevel.WARN: logging.WARNING,
    LogLevel.INFO: logging.INFO,
    LogLevel.DEBUG: logging.DEBUG,
}


def forward_to_logging(level: LogLevel, message: str) -> None:
    """A log handler that sends library messages to ``logging.getLogger("eliza")``."""
    logging.getLogger("eliza").log(_PY_LEVELS.get(level, logging.DEBUG), "%s", message)


_log_lock = threading.Lock()
_log_handler: LogHandler | None = None


def _dispatch_log(c_level: int, message: bytes | None, _user: int | None) -> None:
    handler = _log_handler
    if handler is None:
        return
    try:
        level = LogLevel(c_level)
    except ValueError:
        level = LogLevel.DEBUG
    handler(level, message.decode("utf-8", "replace") if message else "")


# One C entry point for the life of the process, so a library thread that
# read the sink just before a handler change never calls a freed thunk.
_log_trampoline = LOG_FN(_dispatch_log)


def set_log_handler(handler: LogHandler | None, level: LogLevel = LogLevel.WARN) -> None:
    """Installs ``handler(level, message)`` for library messages at ``level``
    or more severe, replacing any previous one; ``None`` silences the library
    (the default). The handler runs on the thread that is inside a libeliza
    call; an exception it raises is reported by ctypes and otherwise ignored.

    Example::

        eliza.set_log_handler(lambda lvl, msg: print(lvl.name, msg), eliza.LogLevel.DEBUG)
    """
    global _log_handler
    with _log_lock:
        _log_handler = handler
        sink = LOG_FN() if handler is None else _log_trampoline  # LOG_FN(): NULL
        lib().eliza_set_log_callback(sink, int(level), None)

