#!/usr/bin/env python3
"""llama.cpp's convert_hf_to_gguf.py of the cached llama.cpp source
(tests/tools/llama_cpp.py), run with its own gguf-py:

    python tests/tools/llama_convert.py [--pre NAME] MODEL_DIR OUT.gguf [--outtype f32]

The converter names a byte-level BPE pre-tokenizer by hashing a real
tokenizer's output on a fixed text, which no tokenizer trained here matches;
--pre gives the name instead (what the hash would have found for the real
model family).
"""

from __future__ import annotations

import argparse
import runpy
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools.llama_cpp import cache_dir


def convert(model_dir: Path, out: Path, outtype: str = "f32", pre: str | None = None) -> Path:
    """Runs the converter in a child process; returns out."""
    cmd = [sys.executable, __file__, str(model_dir), str(out), "--outtype", outtype]
    if pre:
        cmd += ["--pre", pre]
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--outtype", default="f32")
    ap.add_argument("--pre", default=None)
    args = ap.parse_args()
    src = cache_dir() / "src"
    if not (src / "convert_hf_to_gguf.py").is_file():
        sys.exit(f"{src}: no llama.cpp source (run tests/tools/llama_cpp.py)")
    sys.path.insert(0, str(src / "gguf-py"))
    sys.path.insert(0, str(src))
    if args.pre:
        import conversion.base as base  # type: ignore[import-not-found]

        pre = args.pre
        base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
    sys.argv = [str(src / "convert_hf_to_gguf.py"), "--outtype", args.outtype, "--outfile", args.out,
                args.model_dir]
    runpy.run_path(str(src / "convert_hf_to_gguf.py"), run_name="__main__")


if __name__ == "__main__":
    main()
