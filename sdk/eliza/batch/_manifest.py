"""The manifest of a batch job's output directory: ``manifest.jsonl``, one
JSON record per finished attempt of an item, appended (and flushed) as each
result arrives, so a job that dies keeps what it finished.

The last record of an id is its state. A rerun skips the ids whose last
record is ``ok`` under the same settings (``settings`` is a digest of the
job's parameters) and whose output file, when it has one, exists.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import IO, Any

__all__ = ["MANIFEST", "Manifest", "settings_digest"]

MANIFEST = "manifest.jsonl"


def settings_digest(settings: dict[str, Any]) -> str:
    """A short digest of the parameters that shape an item's output."""
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class Manifest:
    """``out_dir/manifest.jsonl``, opened for appending."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.path = out_dir / MANIFEST
        self.last: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            with self.path.open(encoding="utf-8") as f:
                for line in f:
                    # A line cut short by a killed driver is not a record.
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    if isinstance(record, dict) and "id" in record:
                        self.last[str(record["id"])] = record
        self._file: IO[str] | None = None

    def finished(self, settings: str) -> set[str]:
        """Ids done under ``settings`` whose output is still there."""
        done = set()
        for item_id, r in self.last.items():
            output = r.get("output")
            present = not output or (self.out_dir / output).exists()
            if r.get("ok") and r.get("settings") == settings and present:
                done.add(item_id)
        return done

    def append(self, record: dict[str, Any]) -> None:
        if self._file is None:
            self._file = self.path.open("a", encoding="utf-8")
        self._file.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._file.flush()
        self.last[str(record["id"])] = record

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def write_atomic(path: Path, data: bytes) -> None:
    """Writes beside ``path`` and renames into place: an output file is
    whole or absent."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
