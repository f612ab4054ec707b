#!/usr/bin/env python3
"""Writes tests/data/llm_arch_goldens.json: for each tiny checkpoint of
tests/llm/tiny_archs.py (phi3, gemma2, granite, smollm3, olmo2, llama and
qwen3 with YaRN), what llama.cpp makes of it, the reference that
tests/llm/test_convert_archs.py (and the architecture tests) hold libeliza to
without llama.cpp:

    python tests/tools/llama_cpp.py      # llama.cpp 0.3.36 built once, cached
    python tests/llm/make_arch_goldens.py

manifest  llama.cpp's convert_hf_to_gguf.py output (F32): every metadata key
          but general.* and tokenizer.*, and per tensor its type, shape and
          the SHA-256 of its bytes
logits    llama.cpp's logits on the F32 GGUF that eliza.convert writes (one
          batch from position 0, F32 KV cache, context 256) at POSITIONS of
          two random id sequences (40 and 100 tokens), as base64 float32
          rows; with the max |llama.cpp - transformers| over all positions
          for the record

The header records llama-cpp-python's version, the seeds and the files'
SHA-256 (the checkpoints are rebuilt from seeds; a different torch could
draw other weights, which the tests then report).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "sdk"))
import tiny_archs as ta  # noqa: E402
import tiny_models as tm  # noqa: E402

GOLDENS = REPO / "tests" / "data" / "llm_arch_goldens.json"
N_CTX = 256
# (length, seed) of the id sequences; the positions kept of each.
SEQUENCES = ((40, 1), (100, 2))
POSITIONS = ((0, 13, 39), (63, 64, 99))
# What llama.cpp's converter hashes the trained BPE tokenizers as.
BPE_PRE = {"granite": "llama-bpe", "smollm3": "llama-bpe", "olmo2": "qwen2", "qwen3-yarn": "qwen2"}


def manifest(path: Path) -> dict[str, Any]:
    """Metadata (but general.* and tokenizer.*) and tensors of a GGUF."""
    import gguf

    r = gguf.GGUFReader(str(path))
    kv: dict[str, Any] = {}
    for key, field in r.fields.items():
        if key.startswith(("GGUF.", "general.", "tokenizer.")):
            continue
        value = field.contents()
        kv[key] = float(np.float32(value)) if isinstance(value, float) else value
    tensors = {t.name: [t.tensor_type.name, [int(x) for x in t.shape],
                        hashlib.sha256(np.ascontiguousarray(t.data).tobytes()).hexdigest()]
               for t in r.tensors}
    return {"kv": kv, "tensors": tensors}


def encode_rows(rows: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(rows, dtype="<f4").tobytes()).decode()


def main() -> int:
    sys.path.insert(0, str(REPO / "tests" / "tools"))
    from eliza.convert import convert_hf
    from tools.libllama import LibLlama
    from tools.llama_convert import convert

    lib = LibLlama.load()
    if lib is None:
        print("llama.cpp is not built: run tests/tools/llama_cpp.py first", file=sys.stderr)
        return 1
    out: dict[str, Any] = {"variants": {}}
    versions: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant in ta.VARIANTS:
            ck = ta.build(variant, Path(tmp) / variant)
            ref = convert(ck, Path(tmp) / f"{variant}-llama.cpp.gguf", "f32", BPE_PRE.get(variant))
            ours = convert_hf(ck, Path(tmp) / f"{variant}-eliza.gguf", "f32").path
            entry: dict[str, Any] = {"manifest": manifest(ref), "sequences": []}
            import torch

            model = tm._transformers().AutoModelForCausalLM.from_pretrained(ck, dtype=torch.float32).eval()
            with lib.model(ours) as m:
                entry["n_vocab"] = m.n_vocab
                for (n, seed), keep in zip(SEQUENCES, POSITIONS):
                    ids = ta.random_ids(variant, n, seed)
                    got = np.asarray(m.logits(ids, n_ctx=N_CTX), dtype=np.float32)
                    with torch.no_grad():
                        want = model(torch.tensor([ids])).logits[0].numpy()
                    entry["sequences"].append({
                        "n": n, "seed": seed, "positions": list(keep),
                        "logits": encode_rows(got[list(keep)]),
                        "max_diff_vs_transformers": float(np.abs(got - want).max()),
                    })
            entry["eliza_gguf_sha256"] = hashlib.sha256(ours.read_bytes()).hexdigest()
            out["variants"][variant] = entry
            print(variant, [s["max_diff_vs_transformers"] for s in entry["sequences"]])
    import torch
    import transformers

    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    out["header"] = {
        "generator": "tests/llm/make_arch_goldens.py",
        "reference": "llama.cpp of llama-cpp-python 0.3.36 (convert_hf_to_gguf.py, libllama)",
        "n_ctx": N_CTX,
        "versions": versions,
    }
    ordered = {"header": out["header"], "variants": out["variants"]}
    GOLDENS.write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")
    print(f"-> {GOLDENS} ({GOLDENS.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
