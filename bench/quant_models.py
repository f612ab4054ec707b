#!/usr/bin/env python3
"""Writes the bench-size llama (90M weights, tests/llm/quant_models.py) in
each weight type, for bench/llm.py --model runs against llama.cpp:

    python bench/quant_models.py [--dir ~/.cache/eliza/quant-bench] [TYPE ...]
    python bench/llm.py --model ~/.cache/eliza/quant-bench/llama-bench-Q4_1.gguf

Matrices quantized by gguf-py where it can, else random blocks with sane
scales (a type's speed does not depend on its values); cached in --dir,
never committed. Prints one path per line.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "sdk"), str(REPO / "tests" / "llm")]

import quant_models as qm  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402

DEFAULT_TYPES = (
    "Q4_0",
    "Q4_1",
    "Q5_0",
    "Q5_1",
    "Q8_0",
    "Q2_K",
    "Q3_K",
    "Q4_K",
    "Q5_K",
    "Q6_K",
    "IQ4_NL",
    "IQ4_XS",
    "TQ2_0",
    "MXFP4",
    "TQ1_0",
    "IQ3_XXS",
    "IQ3_S",
    "IQ2_XXS",
    "IQ2_XS",
    "IQ2_S",
    "IQ1_S",
    "IQ1_M",
    "F16",
    "BF16",
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=Path.home() / ".cache" / "eliza" / "quant-bench")
    ap.add_argument("types", nargs="*", default=DEFAULT_TYPES)
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    for name in args.types:
        print(qm.bench_file(Q[name], args.dir), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
