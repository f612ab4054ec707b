#!/usr/bin/env python3
"""A random-weight Falcon-H1 for bench/llm.py: transformers'
FalconH1ForCausalLM with the widths of a release, Mamba's weight scales
(tests/llm/tiny_models.py), converted with eliza.convert to F32 and Q8_0, and
to Q4_K with llama.cpp's llama-quantize.

    python bench/falcon_h1_model.py OUT_DIR [--shape 0.5b|0.1b] [--layers N]
                                    [--types f32,q8_0,q4_k] [--quantize PATH]
    python bench/llm.py --model OUT_DIR/falcon-h1-q8_0.gguf

Shapes, as their config.json files are remembered here (no model hub to
check them against):
  0.5b  Falcon-H1-0.5B: 36 layers, hidden 1024, FFN 2048, 8 query / 2 KV
        heads of 64, SSM inner 1536 in 24 heads of 64, d_state 128, one
        group, window 4, vocabulary 32,784 (0.52B parameters)
  0.1b  Falcon-H1-Tiny-90M: 24 layers, hidden 512, FFN 768, 8 / 2 heads of
        64, SSM inner 768 in 24 heads of 32, d_state 64, one group; its
        output matrix untied here (0.11B parameters with this vocabulary)
The tokenizer is a small byte BPE (tests/llm/tiny_models.py); the
vocabulary's rows are the release's.

--layers cuts the depth (the per-token ratio between engines does not
depend on it; the build time and disk do: 0.5b's 36 layers are 2 GB in
F32). --types picks the files; Q4_K is quantized from the F32 file when it
is written, else from the Q8_0 one (--allow-requantize: the weights are
random, only their types matter for speed). --quantize names llama-quantize
(default: tests/tools/llama_cpp.py's build; no Q4_K without one).
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

SHAPES: dict[str, dict[str, Any]] = {
    "0.5b": {
        "num_hidden_layers": 36, "hidden_size": 1024, "intermediate_size": 2048, "num_attention_heads": 8,
        "num_key_value_heads": 2, "head_dim": 64, "mamba_d_ssm": 1536, "mamba_n_heads": 24,
        "mamba_d_head": 64, "mamba_n_groups": 1, "mamba_d_state": 128, "mamba_d_conv": 4,
        "mamba_rms_norm": False, "vocab_size": 32784, "max_position_embeddings": 16384,
    },
    "0.1b": {
        "num_hidden_layers": 24, "hidden_size": 512, "intermediate_size": 768, "num_attention_heads": 8,
        "num_key_value_heads": 2, "head_dim": 64, "mamba_d_ssm": 768, "mamba_n_heads": 24, "mamba_d_head": 32,
        "mamba_n_groups": 1, "mamba_d_state": 64, "mamba_d_conv": 4, "mamba_rms_norm": False,
        "vocab_size": 32784, "max_position_embeddings": 16384,
    },
}


def main() -> int:
    import tiny_models as tm
    import torch
    from transformers import FalconH1Config, FalconH1ForCausalLM

    from eliza.convert import convert_hf

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="0.5b")
    ap.add_argument("--layers", type=int, default=0, help="0: the release's depth")
    ap.add_argument("--types", default="f32,q8_0,q4_k", help="comma-separated: f32, q8_0, q4_k")
    ap.add_argument("--quantize", type=Path, default=None, help="llama-quantize")
    args = ap.parse_args()
    types = args.types.split(",")
    shape = dict(SHAPES[args.shape])
    if args.layers:
        shape["num_hidden_layers"] = args.layers
    ckpt = args.out / "checkpoint"
    ckpt.mkdir(parents=True, exist_ok=True)
    tok = tm._tokenizer("falcon_h1", ckpt)
    rope = {"rope_type": "default", "rope_theta": 1e11}
    cfg = FalconH1Config(rope_parameters=rope, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         **shape)
    torch.manual_seed(0)
    model = FalconH1ForCausalLM(cfg)
    tm.randomize(model, 0, gemma=False)
    model.save_pretrained(ckpt)
    tok.save_pretrained(ckpt)
    del model
    for outtype in ("f32", "q8_0"):
        if outtype in types:
            report = convert_hf(ckpt, args.out / f"falcon-h1-{outtype}.gguf", outtype)
            print(f"wrote {report.path} ({report.n_params / 1e6:.0f}M parameters, {report.tensor_types})")
    if "q4_k" in types:
        from tools.llama_cpp import llama_cpp_dir

        root = llama_cpp_dir()
        quantize = args.quantize or (root / "build" / "bin" / "llama-quantize" if root else None)
        if quantize is None:
            print("no llama-quantize: no Q4_K file (python tests/tools/llama_cpp.py)", file=sys.stderr)
            return 1
        src = "f32" if "f32" in types else "q8_0"
        q4k = args.out / "falcon-h1-q4_k.gguf"
        subprocess.run([str(quantize), *(["--allow-requantize"] if src != "f32" else []),
                        str(args.out / f"falcon-h1-{src}.gguf"), str(q4k), "Q4_K"], check=True,
                       capture_output=True)
        print(f"wrote {q4k} (from the {src.upper()} file)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
