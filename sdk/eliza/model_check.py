"""Whether this build can run a GGUF language model, before loading it
(``eliza_llm_check_json``: the file's metadata and tensor table only).

Example::

    c = eliza.check_model("model.gguf")
    if not c.runnable:
        print("\\n".join(c.missing))   # e.g. "kernels for tensor type Q4_1 (...)"
"""

from __future__ import annotations

import ctypes
import json
import os
from dataclasses import dataclass

from ._native import lib
from .errors import check

__all__ = ["ModelCheck", "check_model"]


@dataclass(frozen=True)
class ModelCheck:
    """What :func:`check_model` found. ``missing`` holds one line per thing
    this build lacks (an unknown architecture, a tensor type without
    kernels, a tokenizer or pre-tokenizer it does not implement);
    ``chat_template`` is the built-in template the file's is recognized as,
    "jinja" when only a Jinja engine renders it, or None without one."""

    runnable: bool
    architecture: str | None
    tokenizer: str | None
    pre_tokenizer: str | None
    chat_template: str | None
    missing: tuple[str, ...]


def check_model(path: str | os.PathLike[str]) -> ModelCheck:
    """Checks the GGUF at ``path`` without loading its weights. A file that
    is not a readable GGUF raises :class:`eliza.ElizaIOError` or
    :class:`eliza.FormatError`."""
    out = ctypes.c_char_p()
    check(lib().eliza_llm_check_json(os.fsencode(path), ctypes.byref(out)))
    try:
        doc = json.loads((out.value or b"{}").decode("utf-8"))
    finally:
        lib().eliza_free(ctypes.cast(out, ctypes.c_void_p))
    return ModelCheck(runnable=bool(doc["runnable"]), architecture=doc["architecture"],
                      tokenizer=doc["tokenizer"], pre_tokenizer=doc["pre_tokenizer"],
                      chat_template=doc["chat_template"], missing=tuple(doc["missing"]))
