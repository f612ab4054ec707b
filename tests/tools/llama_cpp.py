#!/usr/bin/env python3
"""llama.cpp built from source, as the reference and the peer of the GGUF side.

    python tests/tools/llama_cpp.py [--jobs 2] [--targets llama-quantize ...]
    python tests/tools/llama_cpp.py --print-dir

Takes ``vendor/llama.cpp`` of the ``llama-cpp-python==0.3.36`` source
distribution (fetched with pip from PyPI, never committed), builds it with
CMake + Ninja for this machine's CPU (``GGML_NATIVE``), and caches the result
under ``$ELIZA_LLAMA_CPP_DIR`` (default ``~/.cache/eliza/llama.cpp-0.3.36``):

    src/        the vendored source (convert_hf_to_gguf.py, gguf-py/, ...)
    build/bin/  llama-quantize, llama-perplexity, llama-tokenize, llama-bench,
                llama-completion and the shared libraries (libllama.so, ...)

A second run with the build present does nothing. Tests that need it call
``llama_cpp_dir()`` and skip when the build is absent; this script is the
one that makes it (about 6 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

VERSION = "0.3.36"
TARGETS = ("llama-quantize", "llama-perplexity", "llama-tokenize", "llama-bench", "llama-completion",
           "llama-lookup")


def cache_dir() -> Path:
    """Where the source and the build live."""
    env = os.environ.get("ELIZA_LLAMA_CPP_DIR")
    return Path(env) if env else Path.home() / ".cache" / "eliza" / f"llama.cpp-{VERSION}"


def llama_cpp_dir() -> Path | None:
    """The cached build's root if its binaries are there, else None."""
    root = cache_dir()
    return root if all((root / "build" / "bin" / t).is_file() for t in TARGETS) else None


def fetch_source(root: Path) -> Path:
    """Unpacks vendor/llama.cpp of the sdist into root/src (once)."""
    src = root / "src"
    if (src / "CMakeLists.txt").is_file():
        return src
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             f"llama-cpp-python=={VERSION}", "-d", tmp],
            check=True,
        )
        sdist = next(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
        prefix = f"{sdist.name[: -len('.tar.gz')]}/vendor/llama.cpp/"
        unpacked = Path(tmp) / "unpacked"
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
            for m in members:
                m.name = m.name[len(prefix):]
            tar.extractall(unpacked, members=[m for m in members if m.name], filter="data")
        shutil.move(str(unpacked), str(src))
    return src


def build(jobs: int, targets: tuple[str, ...]) -> Path:
    root = cache_dir()
    src = fetch_source(root)
    out = root / "build"
    # Without AMX: on the Xeons here (this kind of machine and the lent GPU
    # host) 0.3.36's AMX matmul (ggml_backend_amx_mul_mat, an extra buffer
    # type) segfaults on the first prompt of any model; every other native
    # kernel, the repacked Q4_0 / IQ4_NL ones included, stays on.
    no_amx = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" if platform.machine() in ("x86_64", "AMD64") else ""
    subprocess.run(
        ["cmake", "-S", str(src), "-B", str(out), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
         "-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF", "-DBUILD_SHARED_LIBS=ON", "-DLLAMA_BUILD_TESTS=OFF",
         "-DLLAMA_BUILD_SERVER=OFF", f"-DCMAKE_C_FLAGS={no_amx}", f"-DCMAKE_CXX_FLAGS={no_amx}"],
        check=True,
    )
    subprocess.run(["cmake", "--build", str(out), "-j", str(jobs), "--target", *targets], check=True)
    return root


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--targets", nargs="+", default=list(TARGETS))
    ap.add_argument("--print-dir", action="store_true", help="print the cache directory and exit")
    args = ap.parse_args()
    if args.print_dir:
        print(cache_dir())
        return 0
    if llama_cpp_dir() is None or tuple(args.targets) != TARGETS:
        build(args.jobs, tuple(args.targets))
    print(cache_dir())
    return 0


if __name__ == "__main__":
    sys.exit(main())
