#!/usr/bin/env python3
"""Logits, NLLs and generations of one libeliza build, for a bit-for-bit
before/after comparison of an engine change (the restructure of issue 12
was checked so: 98 arrays equal).

    ELIZA_LIBRARY=old/libeliza.so PYTHONPATH=<old checkout>/sdk \
        python bench/llm_logits_dump.py before.npz
    ELIZA_LIBRARY=new/libeliza.so PYTHONPATH=sdk \
        python bench/llm_logits_dump.py after.npz --against before.npz

Covers the real Gemma 3 270M file (~/.cache/eliza/models, or
ELIZA_MODEL_CACHE) and the tiny random models of every architecture
(tests/llm/tiny_models.py, tiny_archs.py, gemma4_models.py; F32 and Q8_0,
copied to --tiny-dir once so both runs read the same bytes):
all-position and last-position logits, token NLLs, greedy and seeded
generations, F16 / Q8_0 / TBQ4_0 caches with batches of 5, and batches of 3
in a 64-token context (sliding-window rings wrapping); for the Gemma 4
targets also greedy generations drafted by their MTP assistants."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "llm"))

import eliza  # noqa: E402

MTP_DRAFTERS = ("gemma4_assistant", "gemma4_assistant_masked")  # drafters of the gemma4 target


def _tiny_sources() -> dict[str, Callable[[str, str], Path]]:
    import gemma4_models
    import tiny_archs
    import tiny_models

    src: dict[str, Callable[[str, str], Path]] = {}
    for v in tiny_models.VARIANTS + tiny_models.FALCON_H1_VARIANTS:
        src[v] = tiny_models.gguf_file
    for v in tiny_archs.VARIANTS:
        src[v] = tiny_archs.gguf_file
    for v in gemma4_models.TARGETS + MTP_DRAFTERS:
        src[v] = gemma4_models.gguf_file
    return src


def models(tiny_dir: Path) -> dict[str, Path]:
    cache = Path(os.environ.get("ELIZA_MODEL_CACHE", Path.home() / ".cache" / "eliza" / "models"))
    out = {"gemma": cache / "gemma-3-270m-q4_k_m.gguf"}
    tiny_dir.mkdir(parents=True, exist_ok=True)
    sources = _tiny_sources()
    for v, make in sources.items():
        for t in ("f32", "q8_0"):
            p = tiny_dir / f"{v}-{t}.gguf"
            if not p.exists():
                shutil.copy(make(v, t), p)
            out[f"{v}-{t}"] = p
    return out


def text(s: str) -> np.ndarray:
    return np.frombuffer(s.encode(), np.uint8)


def dump(paths: dict[str, Path]) -> dict[str, np.ndarray]:
    res: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(0)
    for name, path in paths.items():
        if name.startswith(MTP_DRAFTERS):
            continue
        big = name == "gemma"
        with eliza.LLM(path, n_threads=2) as llm:
            n_vocab = int(llm.info["n_vocab"])
            ids = [int(x) for x in rng.integers(3, min(n_vocab, 30000), 70 if big else 40)]
            res[f"{name}/all"] = llm.logits(ids, all_positions=True)
            res[f"{name}/last"] = llm.logits(ids[:9])
            res[f"{name}/nll"] = np.asarray(llm.token_nll(ids, 2))
            res[f"{name}/gen"] = text(llm.generate("The quick brown fox", max_tokens=12, temperature=0.0))
            res[f"{name}/gen_s"] = text(
                llm.generate("Once upon a time", max_tokens=10, temperature=0.9, seed=7))
        for kv in ("f16", "q8_0", "tbq4_0"):
            try:
                with eliza.LLM(path, n_threads=2, kv_type=kv, n_batch=5, context_size=128) as llm:
                    res[f"{name}/{kv}/b5"] = llm.logits(ids, all_positions=True)
            except eliza.ElizaError:
                pass  # a block cache on a head size it does not divide
        with eliza.LLM(path, n_threads=1, n_batch=3, context_size=64) as llm:
            res[f"{name}/b3"] = llm.logits(ids[:30], all_positions=True)
            res[f"{name}/b3gen"] = text(llm.generate("Hello world, this is", max_tokens=20, temperature=0.0))
        if name.startswith("gemma4-"):
            for drafter in MTP_DRAFTERS:
                res.update(mtp_dump(f"{name}/{drafter}", path, paths[drafter + name[len("gemma4"):]]))
    return res


def mtp_dump(name: str, target: Path, drafter: Path) -> dict[str, np.ndarray]:
    """Greedy generations drafted by the MTP assistant (the draft counts
    are left out: the session picks draft lengths from measured costs)."""
    res: dict[str, np.ndarray] = {}
    for k in (1, 4):
        with eliza.LLM(target, n_threads=2, draft=f"mtp:{drafter}", draft_max_tokens=k) as llm:
            res[f"{name}/mtp{k}"] = text(llm.generate("The quick brown fox", max_tokens=24, temperature=0.0))
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--against", type=Path,
                    help="an earlier dump: report every array that differs in any bit")
    ap.add_argument("--tiny-dir", type=Path, default=Path("/tmp/eliza-logits-dump-models"))
    args = ap.parse_args()
    res = dump(models(args.tiny_dir))
    np.savez(args.out, **res)  # type: ignore[arg-type]
    print(f"{len(res)} arrays -> {args.out}")
    if args.against:
        old = np.load(args.against)
        differ = sorted(set(old.files) ^ set(res))
        differ += [k for k in old.files if k in res and (old[k].shape != res[k].shape or
                                                         old[k].tobytes() != res[k].tobytes())]
        print("bit-identical" if not differ else f"differ: {differ}")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
