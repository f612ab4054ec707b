"""Writing a converter's GGUF file whole or not at all."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def gguf_file(
    out: Path, arch: str, *, part: Path | None = None, use_temp_file: bool = False
) -> Iterator[Any]:
    """A ``gguf.GGUFWriter`` for ``arch`` on ``part`` (default ``OUT.part``):
    the body adds the keys and tensors; the file is then written and renamed
    to ``out``. On any error the partial file is removed and the error goes
    on."""
    import gguf

    part = part if part is not None else out.with_name(out.name + ".part")
    writer = gguf.GGUFWriter(str(part), arch, use_temp_file=use_temp_file)
    try:
        yield writer
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(part, out)
    except BaseException:
        writer.close()
        part.unlink(missing_ok=True)
        raise
