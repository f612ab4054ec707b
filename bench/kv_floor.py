#!/usr/bin/env python3
"""Where a KV cache type's loss sits against the model's own rounding floor
(issue #19): each cache of SPECS beside the F32 cache, chunk by chunk
(bench/perplexity.py's compare_caches): perplexity, the paired difference
from F32 and F16, and the mean KL of the next-token distribution from F32's.

    python bench/kv_floor.py CTX CHUNKS 'SPEC;SPEC;...'

A SPEC is a --types entry of bench/perplexity.py (T or K/V), then optional
@-parts: @b<N> evaluates with n_batch N (@b1: the decode path, one token at
a time), @VAR=X,VAR=Y sets environment variables while the handle opens.
The variables are read only by a library built with bench/kv_floor.patch
(experiment switches, never part of the library):

    EZX_NOISE_K=s, EZX_NOISE_V=s  add s * (the head's RMS) * N(0, 1) to each
                                  key / value before it is stored
    EZX_NOSMOOTH=1                store quantized keys without smoothing
    EZX_NOROT=1                   no Hadamard rotation for Q8_0 / Q4_0
    EZX_Q8D=1                     Q8_0 codes rounded against the stored
                                  fp16 scale (rounded up) instead of amax/127

    git worktree add /tmp/floor HEAD && git -C /tmp/floor apply bench/kv_floor.patch
    cmake -S /tmp/floor -B /tmp/floor/build -G Ninja -DCMAKE_BUILD_TYPE=Release
    cmake --build /tmp/floor/build --target eliza
    ELIZA_LIBRARY=/tmp/floor/build/libeliza.so python bench/kv_floor.py 512 4 \\
        'f16;q8_0;f32@EZX_NOISE_K=1e-6,EZX_NOISE_V=1e-6'
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk"))
import perplexity as bench


def open_spec(model: Path, spec: str, ctx: int, threads: int) -> Any:
    import eliza

    name, *extras = spec.split("@")
    k, v = bench.cache_spec(name)
    env: dict[str, str] = {}
    n_batch = ctx
    for extra in extras:
        if extra.startswith("b") and extra[1:].isdigit():
            n_batch = int(extra[1:])
        else:
            for kv in extra.split(","):
                var, _, value = kv.partition("=")
                env[var] = value
    saved = {a: os.environ.get(a) for a in env}
    os.environ.update(env)
    try:
        return eliza.LLM(model, n_threads=threads, context_size=ctx, n_batch=n_batch, kv_type=k, kv_type_v=v)
    finally:
        for a, b in saved.items():
            if b is None:
                os.environ.pop(a, None)
            else:
                os.environ[a] = b


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    ctx, chunks, specs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(";")
    t0 = time.time()
    res = bench.compare_caches(bench.default_model(), bench.prose_text("long"), specs, ctx, chunks, 2,
                               opener=open_spec)
    took, load = time.time() - t0, os.getloadavg()[0]
    print(f"# --text long, ctx {ctx}, {chunks} chunks, {took:.0f} s, load {load:.1f}")
    for s, r in res.items():
        line = f"{s:40s} PPL {r['ppl']:.4f}  KL {r['kl_vs_f32']:.5f} +/- {r['kl_error']:.5f}"
        for b in ("f32", "f16"):
            if b in res and b != s:
                m, e = bench.paired(r["nll"], res[b]["nll"])
                line += f"  vs {b} {100 * np.expm1(m):+.3f}% +/- {100 * e:.3f}%"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
