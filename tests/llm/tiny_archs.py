"""Tiny random transformers checkpoints of the architectures that issue 13
adds, built like tiny_models' (same tokenizers, same seeded weights, hidden
64), each with the quirks its GGUF must carry:

    phi3        Phi3ForCausalLM: fused qkv and gate_up, partial rope (half of
                each head), LongRoPE short/long factors (original context
                64), Phi-3's added chat tokens
    gemma2      Gemma2ForCausalLM: sliding / global layers (window 12),
                attention and final logit softcapping small enough to bind,
                post-attention and post-FFN norms
    granite     GraniteForCausalLM: embedding, residual, attention and logit
                multipliers
    smollm3     SmolLM3ForCausalLM: every fourth layer without rope
    olmo2       Olmo2ForCausalLM: norms after attention and FFN (none
                before), q/k RMSNorm over all heads
    llama-yarn  LlamaForCausalLM with YaRN rope scaling (factor 4 over an
                original context of 64)
    qwen3-yarn  Qwen3ForCausalLM with YaRN (factor 4): NEOX rope, q/k norms

Example::

    path = tiny_archs.checkpoint("gemma2")        # a save_pretrained directory
    logits = tiny_archs.reference_logits("gemma2", ids)
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import tiny_models as tm

VARIANTS = ("phi3", "gemma2", "granite", "smollm3", "olmo2", "llama-yarn", "qwen3-yarn")

GGUF_ARCH = {"phi3": "phi3", "gemma2": "gemma2", "granite": "granite", "smollm3": "smollm3",
             "olmo2": "olmo2", "llama-yarn": "llama", "qwen3-yarn": "qwen3"}

# tiny_models' tokenizer each variant takes (the kind its real models ship).
TOKENIZER = {"phi3": "llama", "gemma2": "gemma3", "granite": "llama3", "smollm3": "llama3",
             "olmo2": "qwen2", "llama-yarn": "llama", "qwen3-yarn": "qwen2"}

# Phi-3's added tokens (llama.cpp looks up <|endoftext|> in files named phi3).
PHI3_SPECIAL = ("<|endoftext|>", "<|assistant|>", "<|end|>", "<|system|>", "<|user|>")
ORIGINAL_CONTEXT = 64  # LongRoPE / YaRN: the context the model was trained at
GEMMA2_SLIDING_WINDOW = 12


def config(variant: str, n_vocab: int, special: dict[str, int | None]) -> Any:
    """The transformers config of a variant for a tokenizer of ``n_vocab``
    tokens with the given special token ids."""
    hf = tm._transformers()
    common: dict[str, Any] = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": tm.CONTEXT_LENGTH,
        "rms_norm_eps": 1e-6,
        "vocab_size": n_vocab,
        "bos_token_id": special.get("bos"),
        "eos_token_id": special.get("eos"),
        "pad_token_id": special.get("pad"),
    }
    if variant == "phi3":
        # Rotary dims 8 of 16 per head: 4 factors each, short near 1, long larger.
        rope = {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                "short_factor": [1.0, 1.05, 1.2, 1.6], "long_factor": [1.0, 1.8, 3.5, 6.0],
                "original_max_position_embeddings": ORIGINAL_CONTEXT}
        return hf.Phi3Config(num_hidden_layers=2, tie_word_embeddings=False, rope_parameters=rope,
                             original_max_position_embeddings=ORIGINAL_CONTEXT, **common)
    if variant == "gemma2":
        return hf.Gemma2Config(num_hidden_layers=4, head_dim=32, query_pre_attn_scalar=32,
                               sliding_window=GEMMA2_SLIDING_WINDOW, attn_logit_softcapping=2.0,
                               final_logit_softcapping=5.0, **common)
    if variant == "granite":
        return hf.GraniteConfig(num_hidden_layers=2, tie_word_embeddings=True, embedding_multiplier=6.0,
                                residual_multiplier=0.4, attention_multiplier=0.09, logits_scaling=2.5,
                                rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, **common)
    if variant == "smollm3":
        return hf.SmolLM3Config(num_hidden_layers=4, no_rope_layer_interval=4, tie_word_embeddings=True,
                                rope_parameters={"rope_type": "default", "rope_theta": 100000.0}, **common)
    if variant == "olmo2":
        return hf.Olmo2Config(num_hidden_layers=2, tie_word_embeddings=False,
                              rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, **common)
    if variant == "llama-yarn":
        rope = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                "original_max_position_embeddings": ORIGINAL_CONTEXT}
        return hf.LlamaConfig(num_hidden_layers=2, tie_word_embeddings=False, rope_parameters=rope, **common)
    if variant == "qwen3-yarn":
        rope = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                "original_max_position_embeddings": ORIGINAL_CONTEXT}
        return hf.Qwen3Config(num_hidden_layers=2, head_dim=32, tie_word_embeddings=True,
                              rope_parameters=rope, **common)
    raise ValueError(f"unknown variant {variant!r}; choose from {VARIANTS}")


def build(variant: str, out: Path, seed: int = 0) -> Path:
    """Writes the tiny ``variant`` checkpoint (model and tokenizer) into ``out``."""
    import torch

    hf = tm._transformers()
    hf.utils.logging.disable_progress_bar()
    out.mkdir(parents=True, exist_ok=True)
    tok = tm._tokenizer(TOKENIZER[variant], out)
    if variant == "phi3":
        tok.add_tokens(list(PHI3_SPECIAL), special_tokens=True)
    special = {name: getattr(tok, f"{name}_token_id", None) for name in ("bos", "eos", "pad")}
    cfg = config(variant, len(tok), special)
    torch.manual_seed(seed)
    model = hf.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    tm.randomize(model, seed, gemma=variant == "gemma2")
    model.eval()
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@functools.cache
def checkpoint(variant: str) -> Path:
    """The ``variant`` checkpoint directory, built once per process."""
    return build(variant, tm._root() / f"arch-{variant}")


@functools.cache
def gguf_file(variant: str, outtype: str) -> Path:
    """``variant`` converted with eliza.convert to ``outtype``, once per process."""
    return tm.convert(checkpoint(variant), f"arch-{variant}", outtype)


@functools.cache
def reference_model(variant: str) -> Any:
    import torch

    hf = tm._transformers()
    model = hf.AutoModelForCausalLM.from_pretrained(checkpoint(variant), dtype=torch.float32)
    model.eval()
    return model


def reference_logits(variant: str, ids: Sequence[int]) -> npt.NDArray[np.float32]:
    """transformers' logits for ``ids`` from position 0, [len(ids), n_vocab]."""
    import torch

    with torch.no_grad():
        out = reference_model(variant)(torch.tensor([list(ids)])).logits[0]
    logits: npt.NDArray[np.float32] = out.numpy().astype(np.float32)
    return logits


def random_ids(variant: str, n: int, seed: int) -> list[int]:
    """Ids the variant's tokenizer can produce."""
    n_tokens = 400 if TOKENIZER[variant] == "qwen2" else 512
    return [int(i) for i in np.random.default_rng(seed).integers(0, n_tokens, n)]

