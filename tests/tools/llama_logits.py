"""llama.cpp's logits through tests/tools/llama_logits.c, compiled once
against the cached llama.cpp build (tests/tools/llama_cpp.py).

    from tools.llama_logits import llama_logits, llama_loads
    if llama_loads(path):                 # None when llama.cpp is not built
        logits = llama_logits(path, ids)  # [len(ids), n_vocab] float32
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools.llama_cpp import cache_dir, llama_cpp_dir

SOURCE = Path(__file__).with_name("llama_logits.c")


def tool() -> Path | None:
    """The compiled tool (built on first use), or None without llama.cpp."""
    root = llama_cpp_dir()
    if root is None:
        return None
    exe = cache_dir() / "build" / "bin" / "eliza-llama-logits"
    if exe.is_file() and exe.stat().st_mtime >= SOURCE.stat().st_mtime:
        return exe
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    lib = root / "build" / "bin"
    subprocess.run(
        [
            cc,
            "-O1",
            "-o",
            str(exe),
            str(SOURCE),
            f"-I{root / 'src' / 'include'}",
            f"-I{root / 'src' / 'ggml' / 'include'}",
            f"-L{lib}",
            "-lllama",
            "-lggml",
            "-lggml-base",
            f"-Wl,-rpath,{lib}",
        ],
        check=True,
    )
    return exe


def llama_loads(path: Path) -> tuple[bool, str] | None:
    """(whether llama.cpp loads the GGUF, its error text); None without llama.cpp."""
    exe = tool()
    if exe is None:
        return None
    r = subprocess.run([str(exe), str(path)], capture_output=True, text=True, timeout=120)
    return r.returncode == 0, r.stderr


def llama_logits(path: Path, ids: Sequence[int]) -> npt.NDArray[np.float32]:
    """llama.cpp's logits of every position of ``ids`` (one batch)."""
    exe = tool()
    if exe is None:
        raise RuntimeError("llama.cpp is not built (python tests/tools/llama_cpp.py)")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "logits.f32"
        r = subprocess.run(
            [str(exe), str(path), str(out), *map(str, ids)], capture_output=True, text=True, timeout=300
        )
        if r.returncode != 0:
            raise RuntimeError(f"llama.cpp on {path}: {r.stderr.strip()}")
        data = np.fromfile(out, dtype=np.float32)
    return data.reshape(len(ids), -1)
