"""What a batch job reads: its items as ``{"id": ..., column: ...}`` rows.

Text-like inputs (lines of a text file, a folder of ``.txt`` files, JSONL,
Parquet, a Python list, a Ray Dataset) are small beside the work done on
them and are read on the driver, which needs every id to skip finished
items. Audio is listed here by path and read by Ray's own reader
(``ray.data.read_binary_files``) on the workers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Union

from ..errors import InvalidArgumentError, Status
from ._workers import item_id_for_path

__all__ = ["Source", "audio_paths", "rows"]

# A path, a list of strings or of dicts, or a ray.data.Dataset.
Source = Union[str, "os.PathLike[str]", Sequence[Any], Any]


def _invalid(message: str) -> InvalidArgumentError:
    return InvalidArgumentError(Status.E_INVALID_ARG, message)


def _file_rows(path: Path, column: str) -> list[dict[str, Any]]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".txt" and p.is_file())
        return [{"id": p.stem, column: p.read_text(encoding="utf-8")} for p in files]
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        table: list[dict[str, Any]] = pq.read_table(path).to_pylist()
        return table
    if path.suffix in (".jsonl", ".json"):
        out = []
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        raise _invalid(f"{path}:{n}: not a JSON object: {e}") from None
        return out
    # Plain text: one item per non-blank line, its id the line number.
    with path.open(encoding="utf-8") as f:
        return [{"id": f"{n:06d}", column: line.rstrip("\n")} for n, line in enumerate(f, 1) if line.strip()]


def _check_id(item_id: str) -> str:
    if not item_id or item_id in (".", "..") or "/" in item_id or "\\" in item_id or "\0" in item_id:
        raise _invalid(f"item id {item_id!r} cannot name an output file")
    return item_id


def rows(source: Source, column: str, id_column: str, key: str) -> list[dict[str, Any]]:
    """The items of ``source`` as ``{"id", key}`` rows (``key`` holding
    ``column``, or the strings of a list or a text file); ids are the
    ``id_column`` when the rows have one, else their 1-based position as six
    digits (a text file's line number). Raises InvalidArgumentError for a
    row without ``column``, an id that cannot name a file, or an id given
    twice."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise _invalid(f"{path}: no such file or directory")
        raw: list[Any] = _file_rows(path, column)
    elif hasattr(source, "take_all"):
        raw = list(source.take_all())
    else:
        raw = list(source)
    out = []
    for n, r in enumerate(raw, 1):
        record = {column: r} if isinstance(r, str) else dict(r)
        if column not in record:
            raise _invalid(f"item {n} has no '{column}' column (it has: {', '.join(map(str, record))})")
        given = record.get(id_column)
        item_id = _check_id(str(given) if given is not None else f"{n:06d}")
        out.append({"id": item_id, key: str(record[column])})
    _no_duplicates([r["id"] for r in out])
    return out


def audio_paths(source: Source) -> list[str]:
    """Absolute paths of the WAV files of ``source``: one file, a folder
    (its ``.wav`` files), or a list of paths. Their items' ids are the file
    names without extension."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix.lower() == ".wav" and p.is_file())
        elif path.exists():
            found = [path]
        else:
            raise _invalid(f"{path}: no such file or directory")
    else:
        found = [Path(p) for p in source]
    paths = [os.path.abspath(p) for p in found]
    _no_duplicates([_check_id(item_id_for_path(p)) for p in paths])
    return paths


def _no_duplicates(ids: list[str]) -> None:
    seen: set[str] = set()
    for item_id in ids:
        if item_id in seen:
            raise _invalid(f"two items have the id {item_id!r}")
        seen.add(item_id)
