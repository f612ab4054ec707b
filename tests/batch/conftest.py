"""Shared by the batch tests: the environment a Ray cluster started by a
test hands its workers (this checkout's eliza package and library), and a
short temporary folder for Ray's sockets."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import eliza


@pytest.fixture(scope="module")
def worker_env() -> Iterator[None]:
    """Ray workers inherit the environment of the process that starts the
    cluster: put the eliza package under test on their PYTHONPATH."""
    saved = os.environ.get("PYTHONPATH")
    sdk = str(Path(eliza.__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (sdk, saved) if p)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


@pytest.fixture(scope="module")
def ray_tmp() -> Iterator[Path]:
    """Ray's session folder: short, since its Unix sockets live there."""
    path = Path(tempfile.mkdtemp(prefix="ezray", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
