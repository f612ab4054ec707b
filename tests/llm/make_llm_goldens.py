#!/usr/bin/env python3
"""Writes tests/data/llm_goldens.json: llama.cpp's greedy continuations and
logits on the real Gemma 3 270M Q4_K_M GGUF, the reference that
tests/llm/test_llm_gemma.py holds libeliza's LLM engine to.

    pip install llama-cpp-python==0.3.36
    python tests/llm/make_llm_goldens.py [--model gemma3-270m-q4_k_m.gguf]

For each prompt (tokenized by llama.cpp with BOS and special tokens): the
prompt ids; up to N_NEW greedy tokens (argmax, first index on ties; an
end-of-generation token ends the list and is its last entry), each step
evaluated by llama.cpp one token at a time after a batched prompt; their
text (without the end-of-generation token); at every position that predicts a generated token, the TOP_K best
(id, logit) pairs and the margin between the best two; the same top-k for
the prompt positions (llama.cpp's batched prefill); and at three positions
the logits at PROBE fixed random token ids, a sample of the whole vector.

llama.cpp is run as llama-cpp-python's defaults leave it (KV cache F16,
flash attention off), with 2 threads and without its extra buffer types
(weight repacking, AMX): on this kind of VM the CPU reports AMX but
executing a tile instruction faults, and the extra types change only the
summation order of the same integer dots. The header records llama-cpp-python's
version, the model's SHA-256, the prompts and these settings.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[2]
GOLDENS = REPO / "tests" / "data" / "llm_goldens.json"
DEFAULT_MODEL = Path("/work/models/gemma3-270m-q4_k_m.gguf")

# Varied text: logits are compared at every position; the greedy texts agree
# up to the first near-tie (see test_llm_gemma.py).
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village by the sea, there lived",
    'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    "<start_of_turn>user\nExplain photosynthesis in two sentences.<end_of_turn>\n<start_of_turn>model\n",
    "Les feuilles mortes se ramassent à la pelle, les souvenirs et les regrets aussi.",
    "1, 1, 2, 3, 5, 8, 13, 21,",
    "Ingredients:\n- 2 cups flour\n- 1 cup sugar\n",
    # Chosen from 30 candidates for llama.cpp's smallest top-2 margin over
    # its 128 greedy tokens (0.22 to 3.7): far from ties, so the whole greedy
    # continuation must be identical.
    "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,",
    "Twinkle, twinkle, little star,",
    "red, green, blue, red, green, blue, red,",
    "<html>\n<head>\n<title>",
    "The alphabet: a, b, c, d, e,",
    "Monday, Tuesday, Wednesday, Thursday, Friday,",
    "A B C D E F G H I J K L M N O P",
    "The sun rises in the east and sets in the",
    "for i in range(10):\n",
]
N_NEW = 128
TOP_K = 8
N_PROBE = 256
PROBE_AT = (0, N_NEW // 2, N_NEW - 1)
SEED = 3
N_CTX = 512


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def probe_ids(n_vocab: int) -> list[int]:
    return sorted(random.Random(SEED).sample(range(n_vocab), N_PROBE))


def top_k(logits: np.ndarray, k: int = TOP_K) -> list[list[float]]:
    """The k best (id, logit) pairs, best first (ties: lower id first)."""
    order = np.lexsort((np.arange(len(logits)), -logits))[:k]
    return [[int(i), round(float(logits[i]), 5)] for i in order]


def no_extra_buffer_types() -> None:
    """Makes llama-cpp-python load models with use_extra_bufts = false (its
    Llama class does not expose the flag): patches the binding module that
    Llama calls."""
    import llama_cpp.llama_cpp as binding

    default = binding.llama_model_default_params
    if getattr(default, "_eliza_patched", False):
        return

    def params() -> Any:
        p = default()
        p.use_extra_bufts = False
        return p

    params._eliza_patched = True  # type: ignore[attr-defined]
    binding.llama_model_default_params = params


class LlamaCpp:
    """llama-cpp-python with every position's logits kept."""

    def __init__(self, path: Path, n_ctx: int = N_CTX) -> None:
        import llama_cpp
        from llama_cpp import Llama

        no_extra_buffer_types()

        self.llm = Llama(model_path=str(path), n_ctx=n_ctx, n_batch=n_ctx, n_threads=2, logits_all=True,
                         verbose=False)
        self.n_vocab = int(self.llm.n_vocab())
        self._vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self._is_eog = llama_cpp.llama_vocab_is_eog

    def tokenize(self, text: str) -> list[int]:
        return [int(t) for t in self.llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)]

    def detokenize(self, ids: list[int]) -> str:
        return bytes(self.llm.detokenize(ids)).decode("utf-8", "replace")

    def is_eog(self, tok: int) -> bool:
        return bool(self._is_eog(self._vocab, tok))

    def greedy(self, prompt_ids: list[int], n_new: int) -> tuple[list[int], np.ndarray, np.ndarray]:
        """(generated ids, logits of the prompt positions [n_prompt, n_vocab],
        logits that chose each generated token [len(generated), n_vocab])."""
        llm = self.llm
        llm.reset()  # type: ignore[no-untyped-call]
        llm.eval(prompt_ids)
        prompt_logits = np.array(llm.scores[: len(prompt_ids)], dtype=np.float32)
        step = prompt_logits[-1].copy()
        out: list[int] = []
        chose = np.zeros((n_new, self.n_vocab), dtype=np.float32)
        for j in range(n_new):
            chose[j] = step
            tok = int(np.argmax(step))
            out.append(tok)
            if self.is_eog(tok):
                break
            if j + 1 < n_new:
                llm.eval([tok])
                step = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        return out, prompt_logits, chose[: len(out)]


def compute(model: Path, prompts: list[str], n_new: int = N_NEW) -> dict[str, Any]:
    import llama_cpp

    ref = LlamaCpp(model)
    probes = probe_ids(ref.n_vocab)
    cases = []
    for prompt in prompts:
        ids = ref.tokenize(prompt)
        gen, prompt_logits, chose = ref.greedy(ids, n_new)
        tops = [top_k(row) for row in chose]
        cases.append({
            "prompt": prompt,
            "prompt_ids": ids,
            "generated_ids": gen,
            "text": ref.detokenize(gen[:-1] if ref.is_eog(gen[-1]) else gen),
            "ends_with_eog": ref.is_eog(gen[-1]),
            "top": tops,
            "margin": [round(t[0][1] - t[1][1], 5) for t in tops],
            "prompt_top": [top_k(row) for row in prompt_logits[:-1]],
            "probe": {str(j): [round(float(chose[j][i]), 5) for i in probes]
                      for j in sorted({min(p, len(gen) - 1) for p in PROBE_AT})},
        })
    return {
        "header": {
            "generator": "tests/llm/make_llm_goldens.py",
            "reference": "llama.cpp via llama-cpp-python",
            "llama_cpp_python": llama_cpp.__version__,
            "model": model.name,
            "model_sha256": sha256_file(model),
            "n_ctx": N_CTX,
            "n_threads": 2,
            "kv_cache": "f16 (llama.cpp default)",
            "flash_attn": False,
            "use_extra_bufts": False,
            "n_new": n_new,
            "top_k": TOP_K,
            "probe_seed": SEED,
            "probe_ids": probes,
            "prompts": prompts,
        },
        "cases": cases,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=None, help="the Gemma 3 270M Q4_K_M GGUF")
    ap.add_argument("--out", type=Path, default=GOLDENS)
    args = ap.parse_args()
    model = args.model
    if model is None:
        sys.path.insert(0, str(REPO / "sdk"))
        try:
            from eliza import models

            model = Path(models.path("gemma3-270m", install=False))
        except Exception:
            model = DEFAULT_MODEL
    doc = compute(model, PROMPTS)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
