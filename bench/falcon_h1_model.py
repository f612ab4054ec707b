#!/usr/bin/env python3
"""A random-weight Falcon-H1 for bench/llm.py: transformers'
FalconH1ForCausalLM with the widths of the Falcon-H1-0.5B release (hidden
1024, FFN 2048, 8 query / 2 KV heads of 64, SSM inner 1536 in 24 heads of
64, d_state 128, one group, window 4, vocabulary 32,784; as its config.json
is remembered here: no model hub to check it against), Mamba's weight
scales (tests/llm/tiny_models.py), converted with eliza.convert to F32 and
Q8_0, and to Q4_K with llama.cpp's llama-quantize when its build exists.

    python bench/falcon_h1_model.py OUT_DIR [--layers 36]
    python bench/llm.py --model OUT_DIR/falcon-h1-q8_0.gguf --no-llama
    llama-bench -m OUT_DIR/falcon-h1-q8_0.gguf -t 2 -p 256 -n 64

--layers cuts the depth (the per-token ratio between engines does not
depend on it; the build does: 36 layers are 0.52B parameters, 2 GB in F32).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "llm"))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "sdk"))

SHAPE: dict[str, Any] = {
    "hidden_size": 1024, "intermediate_size": 2048, "num_attention_heads": 8, "num_key_value_heads": 2,
    "head_dim": 64, "mamba_d_ssm": 1536, "mamba_n_heads": 24, "mamba_d_head": 64, "mamba_n_groups": 1,
    "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_rms_norm": False, "vocab_size": 32784,
    "max_position_embeddings": 16384,
}


def main() -> int:
    import tiny_models as tm
    import torch
    from transformers import FalconH1Config, FalconH1ForCausalLM

    from eliza.convert import convert_hf

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--layers", type=int, default=36)
    args = ap.parse_args()
    ckpt = args.out / "checkpoint"
    ckpt.mkdir(parents=True, exist_ok=True)
    tok = tm._tokenizer("falcon_h1", ckpt)
    rope = {"rope_type": "default", "rope_theta": 1e11}
    cfg = FalconH1Config(num_hidden_layers=args.layers, rope_parameters=rope, bos_token_id=tok.bos_token_id,
                         eos_token_id=tok.eos_token_id, **SHAPE)
    torch.manual_seed(0)
    model = FalconH1ForCausalLM(cfg)
    tm.randomize(model, 0, gemma=False)
    model.save_pretrained(ckpt)
    tok.save_pretrained(ckpt)
    del model
    for outtype in ("f32", "q8_0"):
        report = convert_hf(ckpt, args.out / f"falcon-h1-{outtype}.gguf", outtype)
        print(f"wrote {report.path} ({report.n_params / 1e6:.0f}M parameters, {report.tensor_types})")
    from tools.llama_cpp import llama_cpp_dir

    root = llama_cpp_dir()
    if root is not None:
        q4k = args.out / "falcon-h1-q4_k.gguf"
        subprocess.run([str(root / "build" / "bin" / "llama-quantize"), str(args.out / "falcon-h1-f32.gguf"),
                        str(q4k), "Q4_K"], check=True, capture_output=True)
        print(f"wrote {q4k}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
