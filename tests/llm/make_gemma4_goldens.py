#!/usr/bin/env python3
"""Writes tests/data/llm_gemma4_goldens.json: what transformers computes on
the tiny random Gemma 4 targets and Gemma 4 assistant drafters of
tests/llm/gemma4_models.py, the reference libeliza's gemma4 and
gemma4-assistant archs are held to.

    python tests/llm/make_gemma4_goldens.py

Per target: N_LOGITS random token ids (seeded) and, at every position, the
TOP_K best (id, logit) pairs of transformers' logits, the full logits rows
at PROBE_AT, and plain greedy continuations of short prompts. Per drafter:
greedy MTP rounds (drafted tokens, accepted count) of
``gemma4_models.reference_mtp`` (the drafter sees the target's K/V of the
tokens in the context) for prompts that run past the sliding window, and
of transformers' ``generate(..., assistant_model=...)`` for prompts short
enough that its sliding-window cache keeps every row (there the two differ
only by the stale K/V row generate() keeps; see reference_mtp). The header
records the package versions and the seeds.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gemma4_models as g4

REPO = Path(__file__).resolve().parents[2]
GOLDENS = REPO / "tests" / "data" / "llm_gemma4_goldens.json"
N_LOGITS = 160  # more than 13 sliding windows
LOGITS_SEED = 11
TOP_K = 8
PROBE_AT = (0, 11, 12, 63, 127, 159)
# (prompt length, seed, new tokens)
GREEDY_CASES = ((3, 21, 24), (9, 22, 40))
# (prompt length, seed, new tokens, k): past the window of 12
MTP_CASES = ((4, 31, 40, 3), (10, 32, 48, 4), (2, 33, 32, 1), (7, 34, 36, 6))
# Within the window: prompt + new tokens <= 12
GENERATE_CASES = ((3, 41, 9, 3), (4, 42, 8, 2), (2, 43, 10, 4))


def _rounded(x: float) -> float:
    return float(f"{x:.6g}")


def target_goldens(variant: str) -> dict[str, Any]:
    ids = g4.random_ids(N_LOGITS, LOGITS_SEED)
    logits = g4.reference_logits(variant, ids)
    top = []
    for row in logits:
        best = row.argsort()[::-1][:TOP_K]
        top.append([[int(i), _rounded(float(row[i]))] for i in best])
    greedy = []
    for n_prompt, seed, n_new in GREEDY_CASES:
        prompt = g4.random_ids(n_prompt, seed)
        greedy.append({"prompt": prompt, "tokens": g4.reference_greedy(variant, prompt, n_new)})
    return {
        "ids": ids,
        "top": top,
        "probe": {str(p): [_rounded(float(v)) for v in logits[p]] for p in PROBE_AT},
        "greedy": greedy,
    }


def drafter_goldens(drafter: str) -> dict[str, Any]:
    mtp = []
    for n_prompt, seed, n_new, k in MTP_CASES:
        prompt = g4.random_ids(n_prompt, seed)
        mtp.append({"prompt": prompt, "k": k, **g4.reference_mtp(drafter, prompt, n_new, k)})
    generate = []
    for n_prompt, seed, n_new, k in GENERATE_CASES:
        prompt = g4.random_ids(n_prompt, seed)
        generate.append({"prompt": prompt, "k": k, **g4.reference_assisted(drafter, prompt, n_new, k)})
    return {"target": g4.DRAFTER_TARGET[drafter], "mtp": mtp, "generate": generate}


def main() -> int:
    import numpy
    import torch
    import transformers

    doc = {
        "about": "tests/llm/make_gemma4_goldens.py: transformers on tests/llm/gemma4_models.py's tiny models",
        "versions": {
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "numpy": numpy.__version__,
        },
        "logits_seed": LOGITS_SEED,
        "top_k": TOP_K,
        "targets": {v: target_goldens(v) for v in g4.TARGETS},
        "drafters": {d: drafter_goldens(d) for d in g4.DRAFTERS},
    }
    GOLDENS.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"{GOLDENS}: {GOLDENS.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
