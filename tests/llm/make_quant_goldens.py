#!/usr/bin/env python3
"""Writes tests/data/llm_quant_goldens.json: llama.cpp's logits on the tiny
llama of tests/llm/quant_models.py stored in each weight type, the reference
that tests/llm/test_llm_quant_types.py holds libeliza to without llama.cpp.

    LLAMA_CPP_LIB_PATH=~/.cache/eliza/llama.cpp-0.3.36/build/bin \\
        python tests/llm/make_quant_goldens.py

needs llama-cpp-python 0.3.36 (its Python package; with LLAMA_CPP_LIB_PATH
it loads the libllama that tests/tools/llama_cpp.py builds). For each type:
the SHA-256 of its tensors (the files are rebuilt from seeds, so the test
can tell it reads the same weights), and at every position of a fixed random token
sequence the TOP_K best (id, logit) pairs, the margin between the best two,
and the logits of N_PROBE fixed random ids. llama.cpp runs as
make_llm_goldens.py runs it: 2 threads, no extra buffer types, its default
F16 KV cache, one batch.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import quant_models as qm
from make_llm_goldens import no_extra_buffer_types

REPO = Path(__file__).resolve().parents[2]
GOLDENS = REPO / "tests" / "data" / "llm_quant_goldens.json"
SEED = 3
N_TOKENS = 24
N_VOCAB_IDS = 512  # ids the tiny tokenizer can produce
TOP_K = 5
N_PROBE = 8


def token_ids() -> list[int]:
    return [int(i) for i in np.random.default_rng(SEED).integers(0, N_VOCAB_IDS, N_TOKENS)]


def probe_ids(n_vocab: int) -> list[int]:
    return [int(i) for i in np.random.default_rng(SEED + 1).choice(n_vocab, N_PROBE, replace=False)]


def weights_sha256(path: Path) -> str:
    """SHA-256 over the tensors (name, type, shape, bytes) of a GGUF: what the
    logits depend on, whatever metadata the converter adds around them."""
    from gguf import GGUFReader

    h = hashlib.sha256()
    for t in GGUFReader(path).tensors:
        h.update(f"{t.name}:{t.tensor_type.name}:{list(t.shape)}".encode())
        h.update(np.ascontiguousarray(t.data).tobytes())
    return h.hexdigest()


def llama_logits(path: Path, ids: list[int]) -> np.ndarray:
    from llama_cpp import Llama

    no_extra_buffer_types()
    llm = Llama(model_path=str(path), n_ctx=64, n_batch=64, n_threads=2, logits_all=True, verbose=False)
    llm.reset()  # type: ignore[no-untyped-call]
    llm.eval(ids)
    return np.array(llm.scores[: len(ids)], dtype=np.float32)


def case(qtype: Any, ids: list[int]) -> dict[str, Any]:
    typed, _ = qm.files(qtype)
    logits = llama_logits(typed, ids)
    probes = probe_ids(logits.shape[1])
    top = np.argsort(-logits, axis=1, kind="stable")[:, :TOP_K]
    rows = np.arange(len(ids))
    return {
        "type": qtype.name,
        "weights_sha256": weights_sha256(typed),
        "top_ids": top.tolist(),
        "top_logits": np.round(np.take_along_axis(logits, top, axis=1), 4).tolist(),
        "margin": np.round(logits[rows, top[:, 0]] - logits[rows, top[:, 1]], 4).tolist(),
        "n_vocab": int(logits.shape[1]),
        "probe_logits": np.round(logits[:, probes], 4).tolist(),
    }


def main() -> int:
    from test_llm_quant_types import TYPES

    ids = token_ids()
    doc = {
        "generator": "tests/llm/make_quant_goldens.py",
        "llama_cpp_python": importlib.metadata.version("llama-cpp-python"),
        "gguf": importlib.metadata.version("gguf"),
        "seed": SEED,
        "ids": ids,
        "settings": "2 threads, use_extra_bufts false, KV cache F16, one batch",
        "cases": [case(t, ids) for t in TYPES],
    }
    GOLDENS.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"wrote {GOLDENS} ({GOLDENS.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
