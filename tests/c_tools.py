"""The C test programs some Python tests drive (tests/c/*.c, built by CMake
beside the library): found in ``$ELIZA_BUILD_DIR``, beside
``$ELIZA_LIBRARY``, or in the checkout's ``build/``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def find(name: str) -> Path | None:
    """The built program ``name`` (``name.exe`` on Windows), or None."""
    dirs = [os.environ.get("ELIZA_BUILD_DIR")]
    if os.environ.get("ELIZA_LIBRARY"):
        dirs.append(str(Path(os.environ["ELIZA_LIBRARY"]).resolve().parent))
    dirs.append(str(REPO / "build"))
    for d in dirs:
        for exe in (name, f"{name}.exe"):
            if d and (Path(d) / exe).is_file():
                return Path(d) / exe
    return None


def require(name: str) -> Path:
    """find(name), or skip the test that needs it."""
    exe = find(name)
    if exe is None:
        pytest.skip(f"no {name} program: build the C tests (or set ELIZA_BUILD_DIR)")
    return exe
