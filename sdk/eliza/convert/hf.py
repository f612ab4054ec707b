"""Hugging Face ``transformers`` checkpoints to GGUF, the way llama.cpp's
``convert_hf_to_gguf.py`` writes them for the architectures libeliza runs:
the same tensor names, metadata keys, Q/K layout and tokenizer metadata, so
a file from either converter loads in either engine. docs/convert.md pins the
schema.

Weights are read from safetensors with the ``safetensors`` package into
numpy (no torch needed); a checkpoint saved only as ``pytorch_model.bin``
needs torch. The GGUF is written with the ``gguf`` package.

Example::

    from eliza.convert import convert_hf
    report = convert_hf("Qwen3-0.6B/", "qwen3-0.6b-q8_0.gguf", outtype="q8_0")
    print(report.architecture, report.n_tensors, report.path)
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ..errors import ElizaIOError, FormatError, Status, UnsupportedError
from ._output import gguf_file

__all__ = ["ARCHITECTURES", "OUTTYPES", "ConversionReport", "convert_hf"]

# transformers class name (config.json "architectures") -> GGUF architecture.
ARCHITECTURES: dict[str, str] = {
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Gemma3ForCausalLM": "gemma3",
    "FalconH1ForCausalLM": "falcon-h1",
    "Gemma4ForCausalLM": "gemma4",  # eliza.convert.gemma4
    "Gemma4AssistantForCausalLM": "gemma4-assistant",
    "Phi3ForCausalLM": "phi3",
    "Gemma2ForCausalLM": "gemma2",
    "GraniteForCausalLM": "granite",
    "SmolLM3ForCausalLM": "smollm3",
    "Olmo2ForCausalLM": "olmo2",
}

# Architectures whose q/k rows llama.cpp's converter permutes for the
# interleaved ("normal") rope; the others rotate NEOX halves as HF does.
_NORMAL_ROPE = ("llama", "granite", "smollm3")
# Gemma's RMSNorm scales by 1 + weight: the converter stores 1 + weight.
_GEMMA = ("gemma2", "gemma3")
# SmolLM3: llama.cpp hard-codes rope off on every 4th layer (no GGUF key).
SMOLLM3_NO_ROPE_STEP = 4

OUTTYPES = ("f32", "f16", "bf16", "q8_0")

# llama.cpp's token types (SentencePiece's piece types use the same numbers).
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_USER_DEFINED, TOKEN_UNUSED, TOKEN_BYTE = 1, 2, 3, 4, 5, 6

# Gemma 3 layers: five sliding-window layers then one global layer. GGUF has
# no key for the pattern nor for the local rope base; llama.cpp assumes both.
GEMMA3_SWA_PERIOD = 6
GEMMA3_LOCAL_ROPE_BASE = 10000.0

# Byte-level BPE pre-tokenizer regexes (as in tokenizer.json) -> the
# tokenizer.ggml.pre name llama.cpp gives them.
_BPE_PRE_BY_REGEX: dict[str, str] = {
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+": "llama-bpe",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+": "qwen2",
}

_SPECIAL_TOKEN_KEYS = {
    "bos": "tokenizer.ggml.bos_token_id",
    "eos": "tokenizer.ggml.eos_token_id",
    "unk": "tokenizer.ggml.unknown_token_id",
    "sep": "tokenizer.ggml.seperator_token_id",  # sic: llama.cpp's spelling
    "pad": "tokenizer.ggml.padding_token_id",
    "cls": "tokenizer.ggml.cls_token_id",
    "mask": "tokenizer.ggml.mask_token_id",
}

Json = dict[str, Any]
F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class ConversionReport:
    """What :func:`convert_hf` wrote."""

    path: Path
    architecture: str
    outtype: str
    n_tensors: int
    n_params: int
    n_vocab: int
    tokenizer_model: str  # tokenizer.ggml.model: "llama", "gpt2" or "gemma4"
    tensor_types: dict[str, int] = field(default_factory=dict)  # GGML type name -> tensor count


# ---------------------------------------------------------------------------
# Hyperparameters
# ---------------------------------------------------------------------------


class _VocabTarget(Protocol):
    """What reading a tokenizer needs of a model's hyperparameters."""

    @property
    def arch(self) -> str: ...

    @property
    def n_vocab(self) -> int: ...


@dataclass(frozen=True)
class _HParams:
    arch: str
    n_vocab: int
    n_ctx: int
    n_embd: int
    n_ff: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    head_dim_in_config: bool  # llama.cpp writes key/value_length only then
    norm_eps: float
    rope_base: float
    rope_linear_factor: float | None  # rope.scaling.type "linear"
    rope_llama3: Json | None  # llama 3 scaling -> rope_freqs.weight
    sliding_window: int  # gemma2, gemma3; 0 otherwise
    tied: bool
    attention_bias: bool  # q/k/v (+ o for llama) biases
    mlp_bias: bool
    falcon_h1: _FalconH1 | None = None
    rope_dims: int = 0  # rotated dims per head (phi3's partial rope); 0: head_dim
    rope_yarn: Json | None = None  # llama YaRN: factor, original context, betas
    longrope: Json | None = None  # phi3: short/long factors, original context
    attn_softcap: float | None = None  # gemma2
    final_softcap: float | None = None  # gemma2
    granite_scales: tuple[float, float, float, float] | None = None  # attention, embedding, residual, logit
    n_ctx_orig: int = 0  # phi3: original_max_position_embeddings (0: n_ctx)


@dataclass(frozen=True)
class _FalconH1:
    """The Mamba2 mixer and the muP multipliers of a FalconH1 checkpoint.
    llama.cpp's converter bakes every multiplier into the weights it scales,
    so its GGUF has no multiplier keys; so does this one."""

    d_ssm: int  # mamba_d_ssm (or mamba_expand * hidden_size): the SSM inner size
    n_heads: int  # mamba_n_heads; GGUF ssm.time_step_rank
    d_head: int  # mamba_d_head = d_ssm / n_heads
    n_groups: int  # mamba_n_groups: B and C are shared by n_heads / n_groups heads
    d_state: int  # mamba_d_state
    d_conv: int  # mamba_d_conv
    conv_bias: bool
    rms_norm: bool  # mamba_rms_norm: grouped RMSNorm of y * silu(z) (ssm_norm.weight)
    embedding: float
    lm_head: float
    key: float
    attention_in: float
    attention_out: float
    ssm_in: float
    ssm_out: float
    mlp: tuple[float, float]  # gate, down
    ssm: tuple[float, float, float, float, float]  # z, x, B, C, dt rows of in_proj

    @property
    def conv_dim(self) -> int:
        return self.d_ssm + 2 * self.n_groups * self.d_state

    @property
    def in_proj_rows(self) -> int:
        return self.d_ssm + self.conv_dim + self.n_heads


def _unsupported(msg: str) -> UnsupportedError:
    return UnsupportedError(Status.E_UNSUPPORTED, msg)


def _format(msg: str) -> FormatError:
    return FormatError(Status.E_FORMAT, msg)


def _read_json(path: Path) -> Json:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ElizaIOError(Status.E_IO, f"{path}: {e}") from e
    except ValueError as e:
        raise _format(f"{path}: not valid JSON: {e}") from e
    if not isinstance(doc, dict):
        raise _format(f"{path}: expected a JSON object")
    return doc


def _int(cfg: Json, key: str, default: int | None = None) -> int:
    value = cfg.get(key)
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _format(f"config.json: {key} = {value!r}, expected a positive integer")
    return value


def _rope(cfg: Json, layer_type: str | None = None) -> tuple[float, Json | None]:
    """(rope base, scaling dict or None) from either spelling: transformers 5's
    ``rope_parameters`` (keyed by layer type for Gemma 3) or the older
    ``rope_theta`` + ``rope_scaling``."""
    params = cfg.get("rope_parameters")
    if isinstance(params, dict) and layer_type is not None and layer_type in params:
        params = params[layer_type]
    if isinstance(params, dict) and "rope_theta" in params:
        base = float(params["rope_theta"])
        kind = params.get("rope_type", params.get("type", "default"))
        return base, (None if kind == "default" else params)
    base = float(cfg.get("rope_theta", 10000.0))
    scaling = cfg.get("rope_scaling")
    if isinstance(scaling, dict) and scaling.get("rope_type", scaling.get("type", "default")) != "default":
        return base, scaling
    return base, None


def _rope_kind(scaling: Json) -> str:
    return str(scaling.get("rope_type", scaling.get("type")))


def _hparams(cfg: Json) -> _HParams:
    archs = cfg.get("architectures") or []
    known = [a for a in archs if a in ARCHITECTURES]
    if not known:
        raise _unsupported(f"config.json: architectures {archs}; supported: {', '.join(ARCHITECTURES)}")
    arch = ARCHITECTURES[known[0]]
    n_embd = _int(cfg, "hidden_size")
    n_head = _int(cfg, "num_attention_heads")
    n_head_kv = _int(cfg, "num_key_value_heads", n_head)
    if n_head % n_head_kv:
        raise _format(
            f"config.json: num_attention_heads {n_head} is not a multiple of num_key_value_heads {n_head_kv}"
        )
    head_dim_in_config = cfg.get("head_dim") is not None
    head_dim = _int(cfg, "head_dim") if head_dim_in_config else n_embd // n_head
    if not head_dim_in_config and n_embd % n_head:
        raise _format(f"config.json: hidden_size {n_embd} is not a multiple of num_attention_heads {n_head}")
    if head_dim % 2:
        raise _format(f"config.json: head_dim {head_dim} is odd")

    gemma = arch in _GEMMA
    act = cfg.get("hidden_activation" if gemma else "hidden_act", cfg.get("hidden_act"))
    want_act = "gelu_pytorch_tanh" if gemma else "silu"
    if act != want_act:
        raise _unsupported(f"config.json: activation {act!r}; {arch} in GGUF implies {want_act!r}")

    sliding_window = 0
    if arch == "gemma3":
        base, scaling = _rope(cfg, "full_attention")
        if "sliding_attention" in (cfg.get("rope_parameters") or {}):
            local_base, local_scaling = _rope(cfg, "sliding_attention")
        else:  # transformers 4: the scaling is the global layers'
            local_base, local_scaling = float(cfg.get("rope_local_base_freq", GEMMA3_LOCAL_ROPE_BASE)), None
        if local_base != GEMMA3_LOCAL_ROPE_BASE or local_scaling is not None:
            raise _unsupported(
                f"config.json: gemma3 local rope base {local_base} (scaling "
                f"{local_scaling}); GGUF readers assume {GEMMA3_LOCAL_ROPE_BASE}, unscaled"
            )
        n_layer = _int(cfg, "num_hidden_layers")
        want = [
            "full_attention" if (i + 1) % GEMMA3_SWA_PERIOD == 0 else "sliding_attention"
            for i in range(n_layer)
        ]
        layer_types = cfg.get("layer_types", want)
        if list(layer_types) != want:
            raise _unsupported(
                f"config.json: gemma3 layer_types {layer_types}; GGUF readers assume one "
                f"global layer after every {GEMMA3_SWA_PERIOD - 1} sliding-window layers"
            )
        sliding_window = _int(cfg, "sliding_window")
        scalar = cfg.get("query_pre_attn_scalar", head_dim)
        if scalar != head_dim:
            raise _unsupported(
                f"config.json: query_pre_attn_scalar {scalar} != head_dim {head_dim}; "
                "GGUF readers scale attention by 1/sqrt(head_dim)"
            )
        for key in ("final_logit_softcapping", "attn_logit_softcapping"):
            if cfg.get(key) is not None:
                raise _unsupported(f"config.json: {key} = {cfg[key]} (Gemma 3 has none)")
        if cfg.get("use_bidirectional_attention"):
            raise _unsupported("config.json: use_bidirectional_attention (not a causal LM)")
    elif arch == "gemma2":
        base, scaling = _rope(cfg)
        n_layer = _int(cfg, "num_hidden_layers")
        want = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n_layer)]
        if list(cfg.get("layer_types", want)) != want:
            raise _unsupported(
                f"config.json: gemma2 layer_types {cfg.get('layer_types')}; GGUF readers assume "
                "sliding-window and global layers alternating, sliding first")
        sliding_window = _int(cfg, "sliding_window")
        scalar = cfg.get("query_pre_attn_scalar", head_dim)
        if scalar != head_dim:
            raise _unsupported(
                f"config.json: query_pre_attn_scalar {scalar} != head_dim {head_dim}; "
                "GGUF readers scale gemma2 attention by 1/sqrt(head_dim) (27B excepted)")
    else:
        base, scaling = _rope(cfg)
        if cfg.get("use_sliding_window"):
            raise _unsupported(f"config.json: use_sliding_window on {arch} (not expressible in GGUF)")
        if arch in ("phi3", "olmo2") and cfg.get("sliding_window"):
            raise _unsupported(
                f"config.json: sliding_window {cfg['sliding_window']} on {arch} (Phi-4 / OLMo 3 style "
                "sliding-window layers are not converted here)")

    linear_factor: float | None = None
    llama3: Json | None = None
    yarn: Json | None = None
    longrope: Json | None = None
    if scaling is not None:
        kind = _rope_kind(scaling)
        if kind == "linear" and arch in ("llama", "gemma3"):
            linear_factor = float(scaling["factor"])
        elif kind == "llama3" and arch == "llama":
            llama3 = scaling
        elif kind == "yarn" and arch in ("llama", "qwen2", "qwen3") and scaling.get("factor") is not None:
            for key in ("mscale", "mscale_all_dim"):
                if scaling.get(key) not in (None, 0, 1, 1.0):
                    raise _unsupported(f"config.json: YaRN {key} {scaling[key]} (DeepSeek style) on {arch}")
            if scaling.get("truncate") is False:
                raise _unsupported("config.json: YaRN truncate = false (GGUF readers truncate)")
            yarn = scaling
        elif kind in ("longrope", "su") and arch == "phi3":
            longrope = scaling
        else:
            raise _unsupported(f"config.json: rope scaling {kind!r} on {arch}")

    rope_dims = 0
    if arch == "phi3":
        rope_params = cfg.get("rope_parameters") or {}
        partial = float(rope_params.get("partial_rotary_factor", cfg.get("partial_rotary_factor")) or 1.0)
        rope_dims = int(partial * n_embd) // n_head
        if rope_dims <= 0 or rope_dims > head_dim or rope_dims % 2:
            raise _format(
                f"config.json: partial_rotary_factor {partial} gives {rope_dims} rotary dims of {head_dim}")
        if longrope is not None:
            want_len = rope_dims // 2
            for key in ("short_factor", "long_factor"):
                factors = longrope.get(key)
                if not isinstance(factors, list) or len(factors) != want_len:
                    raise _format(
                        f"config.json: LongRoPE {key} must list {want_len} factors, got {factors!r}")
            if not isinstance(longrope.get("original_max_position_embeddings",
                                           cfg.get("original_max_position_embeddings")), int):
                raise _format("config.json: LongRoPE needs original_max_position_embeddings")
    if arch == "smollm3":
        n_layer = _int(cfg, "num_hidden_layers")
        want_rope = [int((i + 1) % SMOLLM3_NO_ROPE_STEP != 0) for i in range(n_layer)]
        if list(cfg.get("no_rope_layers", want_rope)) != want_rope:
            raise _unsupported(
                f"config.json: smollm3 no_rope_layers {cfg.get('no_rope_layers')}; GGUF readers "
                f"assume rope off on every {SMOLLM3_NO_ROPE_STEP}th layer")

    attn_softcap = final_softcap = None
    if arch == "gemma2":
        attn_softcap = float(cfg["attn_logit_softcapping"]) if cfg.get("attn_logit_softcapping") else None
        final_softcap = float(cfg["final_logit_softcapping"]) if cfg.get("final_logit_softcapping") else None
    granite_scales = None
    if arch == "granite":
        attn, embd, resid, logit = (float(cfg.get(k) or 1.0) for k in (
            "attention_multiplier", "embedding_multiplier", "residual_multiplier", "logits_scaling"))
        granite_scales = (attn, embd, resid, logit)
        if cfg.get("head_dim") is not None and cfg["head_dim"] != n_embd // n_head:
            raise _unsupported(f"config.json: granite head_dim {cfg['head_dim']} != hidden_size / heads")
        head_dim_in_config = False

    attention_bias = bool(cfg.get("attention_bias", arch == "qwen2"))
    mlp_bias = bool(cfg.get("mlp_bias", False))
    if arch not in ("llama", "qwen2") and attention_bias:
        raise _unsupported(f"config.json: attention_bias on {arch}")
    if arch != "llama" and mlp_bias:
        raise _unsupported(f"config.json: mlp_bias on {arch}")

    return _HParams(
        arch=arch,
        n_vocab=_int(cfg, "vocab_size"),
        n_ctx=_int(cfg, "max_position_embeddings", 131072 if arch == "gemma3" else None),
        n_embd=n_embd,
        n_ff=_int(cfg, "intermediate_size"),
        n_layer=_int(cfg, "num_hidden_layers"),
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_dim=head_dim,
        head_dim_in_config=head_dim_in_config,
        norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        rope_base=base,
        rope_linear_factor=linear_factor,
        rope_llama3=llama3,
        sliding_window=sliding_window,
        tied=bool(cfg.get("tie_word_embeddings", gemma)),
        attention_bias=attention_bias,
        mlp_bias=mlp_bias,
        falcon_h1=_falcon_h1(cfg, n_embd) if arch == "falcon-h1" else None,
        rope_dims=rope_dims,
        rope_yarn=yarn,
        longrope=longrope,
        attn_softcap=attn_softcap,
        final_softcap=final_softcap,
        granite_scales=granite_scales,
        n_ctx_orig=int(cfg.get("original_max_position_embeddings") or 0),
    )


def _floats(cfg: Json, key: str, n: int) -> tuple[float, ...]:
    value = cfg.get(key)
    if value is None:
        return (1.0,) * n
    if not isinstance(value, list | tuple) or len(value) != n:
        raise _format(f"config.json: {key} = {value!r}, expected {n} numbers")
    return tuple(float(v) for v in value)


def _json_float(value: Any, key: str) -> float:
    """A number of config.json; transformers writes infinities as
    {"__float__": "Infinity"} (JSON has none)."""
    if isinstance(value, dict) and "__float__" in value:
        value = value["__float__"]
    try:
        return float(value)
    except (TypeError, ValueError) as e:
        raise _format(f"config.json: {key} holds {value!r}, expected a number") from e


def _float(cfg: Json, key: str) -> float:
    value = cfg.get(key)
    return 1.0 if value is None else float(value)


def _falcon_h1(cfg: Json, n_embd: int) -> _FalconH1:
    """The mixer's sizes, checked against each other as both engines need
    them, and the multipliers to bake in."""
    d_ssm = cfg.get("mamba_d_ssm")
    d_ssm = _int(cfg, "mamba_d_ssm") if d_ssm is not None else _int(cfg, "mamba_expand", 2) * n_embd
    n_heads = _int(cfg, "mamba_n_heads")
    n_groups = _int(cfg, "mamba_n_groups", 1)
    if d_ssm % n_heads:
        raise _format(f"config.json: SSM inner size {d_ssm} is not a multiple of mamba_n_heads {n_heads}")
    d_head = cfg.get("mamba_d_head", "auto")
    d_head = d_ssm // n_heads if d_head in (None, "auto") else _int(cfg, "mamba_d_head")
    if d_head * n_heads != d_ssm:
        raise _format(
            f"config.json: mamba_d_head {d_head} x mamba_n_heads {n_heads} != SSM inner size {d_ssm}"
        )
    if n_heads % n_groups:
        raise _format(f"config.json: mamba_n_groups {n_groups} does not divide mamba_n_heads {n_heads}")
    rms_norm = bool(cfg.get("mamba_rms_norm", False))
    if rms_norm and cfg.get("mamba_norm_before_gate", True):
        raise _unsupported(
            "config.json: mamba_rms_norm with mamba_norm_before_gate; GGUF readers "
            "(llama.cpp's falcon-h1) gate first, then normalize"
        )
    limit = cfg.get("time_step_limit")
    if limit is not None:
        lo, hi = (_json_float(v, "time_step_limit") for v in limit)
        if lo != 0.0 or hi != math.inf:
            raise _unsupported(f"config.json: time_step_limit ({lo}, {hi}); GGUF readers do not clamp dt")
    for key in ("mamba_proj_bias", "projectors_bias"):
        if cfg.get(key):
            raise _unsupported(f"config.json: {key} (falcon-h1 GGUF has no SSM projection biases)")
    gate, down = _floats(cfg, "mlp_multipliers", 2)
    z, x, b, c, dt = _floats(cfg, "ssm_multipliers", 5)
    return _FalconH1(
        d_ssm=d_ssm,
        n_heads=n_heads,
        d_head=d_head,
        n_groups=n_groups,
        d_state=_int(cfg, "mamba_d_state"),
        d_conv=_int(cfg, "mamba_d_conv", 4),
        conv_bias=bool(cfg.get("mamba_conv_bias", True)),
        rms_norm=rms_norm,
        embedding=_float(cfg, "embedding_multiplier"),
        lm_head=_float(cfg, "lm_head_multiplier"),
        key=_float(cfg, "key_multiplier"),
        attention_in=_float(cfg, "attention_in_multiplier"),
        attention_out=_float(cfg, "attention_out_multiplier"),
        ssm_in=_float(cfg, "ssm_in_multiplier"),
        ssm_out=_float(cfg, "ssm_out_multiplier"),
        mlp=(gate, down),
        ssm=(z, x, b, c, dt),
    )


def _phi3_original_ctx(hp: _HParams) -> int:
    orig = (hp.longrope or {}).get("original_max_position_embeddings", hp.n_ctx_orig)
    return int(orig) or hp.n_ctx


def _longrope_attn_factor(hp: _HParams) -> float:
    """Phi-3's cos/sin scale: sqrt(1 + ln(s) / ln(original context)) for the
    context extension s = n_ctx / original (llama.cpp's converter)."""
    orig = _phi3_original_ctx(hp)
    scale = hp.n_ctx / orig
    return math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1.0 else 1.0


def _longrope_factors(hp: _HParams) -> list[tuple[str, F32]]:
    assert hp.longrope is not None
    return [("rope_factors_long.weight", np.asarray(hp.longrope["long_factor"], dtype=np.float32)),
            ("rope_factors_short.weight", np.asarray(hp.longrope["short_factor"], dtype=np.float32))]


def _llama3_rope_factors(hp: _HParams) -> F32:
    """Per-frequency divisors of llama 3 rope scaling (rope_freqs.weight,
    [head_dim / 2]): 1 for short wavelengths, ``factor`` for long ones, a
    smooth blend between (Meta's reference and transformers agree)."""
    assert hp.rope_llama3 is not None
    s = hp.rope_llama3
    factor = float(s.get("factor", 8.0))
    low = float(s.get("low_freq_factor", 1.0))
    high = float(s.get("high_freq_factor", 4.0))
    old_ctx = float(s.get("original_max_position_embeddings", 8192))
    freqs = 1.0 / hp.rope_base ** (np.arange(0, hp.head_dim, 2, dtype=np.float64) / hp.head_dim)
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < old_ctx / high:
            out.append(1.0)
        elif wavelen > old_ctx / low:
            out.append(factor)
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            out.append(1.0 / ((1.0 - smooth) / factor + smooth))
    return np.asarray(out, dtype=np.float32)


# ---------------------------------------------------------------------------
# Checkpoint reading
# ---------------------------------------------------------------------------

_FLOAT_DTYPES = {"F32", "F16", "BF16", "F64"}
_INT_DTYPES = {"I64", "I32"}


class _Checkpoint:
    """The tensors of a checkpoint directory by name: shapes up front, data
    (as float32) one tensor at a time. Integer tensors (index buffers) are
    listed in ``integer`` and read with :meth:`load_int`."""

    def __init__(self, model_dir: Path) -> None:
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.integer: set[str] = set()
        self._loaders: dict[str, Callable[[], F32]] = {}
        st_files = self._files(
            model_dir, "model.safetensors", "model.safetensors.index.json", "*.safetensors"
        )
        if st_files:
            for path in st_files:
                self._add_safetensors(path)
            return
        bin_files = self._files(
            model_dir, "pytorch_model.bin", "pytorch_model.bin.index.json", "pytorch_model*.bin"
        )
        if not bin_files:
            raise ElizaIOError(Status.E_IO, f"{model_dir}: no model.safetensors or pytorch_model.bin")
        for path in bin_files:
            self._add_torch(path)

    @staticmethod
    def _files(model_dir: Path, single: str, index: str, pattern: str) -> list[Path]:
        if (model_dir / index).is_file():
            weight_map = _read_json(model_dir / index).get("weight_map")
            if not isinstance(weight_map, dict):
                raise _format(f"{model_dir / index}: no weight_map")
            return [model_dir / name for name in sorted(set(weight_map.values()))]
        if (model_dir / single).is_file():
            return [model_dir / single]
        return sorted(model_dir.glob(pattern))

    def _add(self, name: str, shape: Sequence[int], loader: Callable[[], F32], where: Path) -> None:
        if name in self.shapes:
            raise _format(f"{where}: tensor {name} appears twice in the checkpoint")
        self.shapes[name] = tuple(int(d) for d in shape)
        self._loaders[name] = loader

    def _add_safetensors(self, path: Path) -> None:
        from safetensors import safe_open

        header: tuple[Json, int] | None = None
        with safe_open(str(path), framework="numpy") as f:
            for name in f.keys():  # noqa: SIM118 (safe_open is no mapping)
                sl = f.get_slice(name)
                dtype = sl.get_dtype()
                if dtype in _INT_DTYPES:
                    self._add(name, sl.get_shape(), _safetensors_loader(path, name, np.int64), path)
                    self.integer.add(name)
                    continue
                if dtype not in _FLOAT_DTYPES:
                    raise _unsupported(f"{path}: tensor {name} has dtype {dtype}")
                if dtype == "BF16":
                    # numpy has no bfloat16: read the raw halves of float32.
                    header = header if header is not None else _safetensors_header(path)
                    loader = _bf16_loader(path, header, name)
                else:
                    loader = _safetensors_loader(path, name)
                self._add(name, sl.get_shape(), loader, path)

    def _add_torch(self, path: Path) -> None:
        try:
            import torch
        except ImportError as e:
            raise _unsupported(
                f"{path}: reading pytorch_model.bin needs torch (pip install torch), "
                "or save the checkpoint as safetensors"
            ) from e
        state = torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
        for name, tensor in state.items():
            if not tensor.is_floating_point():
                raise _unsupported(f"{path}: tensor {name} has dtype {tensor.dtype}")
            self._add(name, tuple(tensor.shape), _torch_loader(tensor), path)

    def load(self, name: str) -> F32:
        if name in self.integer:
            raise _unsupported(f"tensor {name} holds integers where weights are expected")
        return np.ascontiguousarray(self._loaders[name](), dtype=np.float32)

    def load_int(self, name: str) -> npt.NDArray[np.int64]:
        if name not in self.integer:
            raise _format(f"tensor {name} holds floats where integers are expected")
        return np.ascontiguousarray(self._loaders[name](), dtype=np.int64)


def _safetensors_loader(path: Path, name: str, dtype: Any = np.float32) -> Callable[[], Any]:
    def load() -> Any:
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as f:
            data = f.get_tensor(name)
        return data.astype(dtype)

    return load


def _safetensors_header(path: Path) -> tuple[Json, int]:
    """The JSON header of a safetensors file and where its data starts."""
    with path.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        doc: Json = json.loads(f.read(n))
    return doc, 8 + n


def _bf16_loader(path: Path, header: tuple[Json, int], name: str) -> Callable[[], F32]:
    entries, data_start = header
    begin, end = entries[name]["data_offsets"]
    shape = tuple(entries[name]["shape"])
    start = data_start + int(begin)

    def load() -> F32:
        raw = np.fromfile(path, dtype="<u2", count=(int(end) - int(begin)) // 2, offset=start)
        return (raw.astype(np.uint32) << 16).view(np.float32).reshape(shape)

    return load


def _torch_loader(tensor: Any) -> Callable[[], F32]:
    def load() -> F32:
        out: F32 = tensor.float().numpy()
        return out

    return load


# ---------------------------------------------------------------------------
# Tensor plan
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _TensorSpec:
    hf: str
    gguf: str
    shape: tuple[int, ...]  # as stored by PyTorch: [out, in]
    transform: Callable[[F32], F32] | None = None


def _permute_rope_halves(n_head: int) -> Callable[[F32], F32]:
    """HF's llama q/k rows hold each head's rotary pairs as (i, i + d/2);
    GGUF llama ("normal" rope) wants them adjacent, (2i, 2i + 1). Reorders the
    rows of every head from [2, d/2] to [d/2, 2] (weights and biases)."""

    def permute(w: F32) -> F32:
        rows = w.shape[0]
        return w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    return permute


def _plus_one(w: F32) -> F32:
    """Gemma's RMSNorm multiplies by (1 + weight); GGUF stores 1 + weight."""
    return w + np.float32(1.0)


def _scaled(*factors: float) -> Callable[[F32], F32] | None:
    """Multiplies a tensor by the product of ``factors`` (None when it is 1)."""
    k = math.prod(factors)
    if k == 1.0:
        return None
    return lambda w: w * np.float32(k)


def _falcon_h1_in_proj(f: _FalconH1) -> Callable[[F32], F32]:
    """in_proj rows z | x | B | C | dt times ssm_in_multiplier and their
    ssm_multipliers segment (HF's mup_vector), as llama.cpp bakes them."""
    gn = f.n_groups * f.d_state
    ends = np.cumsum([f.d_ssm, f.d_ssm, gn, gn, f.n_heads])
    scale = np.repeat(np.asarray(f.ssm, dtype=np.float64) * f.ssm_in, np.diff(ends, prepend=0))

    def bake(w: F32) -> F32:
        return (w * scale.astype(np.float32)[:, None]).astype(np.float32)

    return bake


def _falcon_h1_plan(hp: _HParams) -> list[_TensorSpec]:
    """FalconH1 (parallel Mamba2 + attention in every block) as llama.cpp's
    converter writes it: multipliers baked in, A stored as -exp(A_log),
    A and D as [n_heads, 1], the conv kernel squeezed to [conv_dim, d_conv],
    the gated norm's weight as [n_groups, d_ssm / n_groups], and the FFN norm
    named ``blk.N.ffn_norm``."""
    f = hp.falcon_h1
    assert f is not None
    e, hd, h = hp.n_embd, hp.head_dim, f.n_heads
    q_rows, kv_rows = hp.n_head * hd, hp.n_head_kv * hd
    plan = [
        _TensorSpec("model.embed_tokens.weight", "token_embd.weight", (hp.n_vocab, e), _scaled(f.embedding))
    ]
    for i in range(hp.n_layer):
        hf, gg = f"model.layers.{i}.", f"blk.{i}."
        attn, mamba, mlp = hf + "self_attn.", hf + "mamba.", hf + "feed_forward."
        plan += [
            _TensorSpec(hf + "input_layernorm.weight", gg + "attn_norm.weight", (e,)),
            _TensorSpec(
                mamba + "in_proj.weight", gg + "ssm_in.weight", (f.in_proj_rows, e), _falcon_h1_in_proj(f)
            ),
            _TensorSpec(
                mamba + "conv1d.weight", gg + "ssm_conv1d.weight", (f.conv_dim, 1, f.d_conv),
                lambda w: w.reshape(w.shape[0], w.shape[2]),
            ),
        ]
        if f.conv_bias:
            plan.append(_TensorSpec(mamba + "conv1d.bias", gg + "ssm_conv1d.bias", (f.conv_dim,)))
        plan += [
            _TensorSpec(mamba + "dt_bias", gg + "ssm_dt.bias", (h,)),
            _TensorSpec(mamba + "A_log", gg + "ssm_a", (h,), lambda w: -np.exp(w).reshape(-1, 1)),
            _TensorSpec(mamba + "D", gg + "ssm_d", (h,), lambda w: w.reshape(-1, 1)),
        ]
        if f.rms_norm:
            plan.append(
                _TensorSpec(
                    mamba + "norm.weight", gg + "ssm_norm.weight", (f.d_ssm,),
                    lambda w: w.reshape(f.n_groups, f.d_ssm // f.n_groups),
                )
            )
        plan += [
            _TensorSpec(mamba + "out_proj.weight", gg + "ssm_out.weight", (e, f.d_ssm), _scaled(f.ssm_out)),
            _TensorSpec(attn + "q_proj.weight", gg + "attn_q.weight", (q_rows, e), _scaled(f.attention_in)),
            _TensorSpec(
                attn + "k_proj.weight", gg + "attn_k.weight", (kv_rows, e), _scaled(f.key, f.attention_in)
            ),
            _TensorSpec(attn + "v_proj.weight", gg + "attn_v.weight", (kv_rows, e), _scaled(f.attention_in)),
            _TensorSpec(
                attn + "o_proj.weight", gg + "attn_output.weight", (e, q_rows), _scaled(f.attention_out)
            ),
            # Without ".weight": llama.cpp's tensor map matches this full HF
            # name to FFN_PRE_NORM ("blk.N.ffn_norm"), and its falcon-h1 loader
            # asks for exactly that name.
            _TensorSpec(hf + "pre_ff_layernorm.weight", gg + "ffn_norm", (e,)),
            _TensorSpec(mlp + "gate_proj.weight", gg + "ffn_gate.weight", (hp.n_ff, e), _scaled(f.mlp[0])),
            _TensorSpec(mlp + "up_proj.weight", gg + "ffn_up.weight", (hp.n_ff, e)),
            _TensorSpec(mlp + "down_proj.weight", gg + "ffn_down.weight", (e, hp.n_ff), _scaled(f.mlp[1])),
        ]
    plan.append(_TensorSpec("model.final_layernorm.weight", "output_norm.weight", (e,)))
    # A tied checkpoint still gets output.weight: the embedding carries the
    # embedding multiplier, the output projection the lm_head one.
    head = "model.embed_tokens.weight" if hp.tied else "lm_head.weight"
    plan.append(_TensorSpec(head, "output.weight", (hp.n_vocab, e), _scaled(f.lm_head)))
    return plan


def _tensor_plan(hp: _HParams) -> list[_TensorSpec]:
    if hp.falcon_h1 is not None:
        return _falcon_h1_plan(hp)
    e, hd = hp.n_embd, hp.head_dim
    q_rows, kv_rows = hp.n_head * hd, hp.n_head_kv * hd
    gemma = hp.arch in _GEMMA
    norm = _plus_one if gemma else None
    normal_rope = hp.arch in _NORMAL_ROPE
    q_perm = _permute_rope_halves(hp.n_head) if normal_rope else None
    k_perm = _permute_rope_halves(hp.n_head_kv) if normal_rope else None

    plan = [_TensorSpec("model.embed_tokens.weight", "token_embd.weight", (hp.n_vocab, e))]
    for i in range(hp.n_layer):
        hf, gg = f"model.layers.{i}.", f"blk.{i}."
        attn, mlp = hf + "self_attn.", hf + "mlp."
        layer = []
        if hp.arch != "olmo2":  # OLMo 2 normalizes after the sublayers only
            layer.append(_TensorSpec(hf + "input_layernorm.weight", gg + "attn_norm.weight", (e,), norm))
        if hp.arch == "phi3":
            qkv_rows = q_rows + 2 * kv_rows
            layer.append(_TensorSpec(attn + "qkv_proj.weight", gg + "attn_qkv.weight", (qkv_rows, e)))
        else:
            layer += [
                _TensorSpec(attn + "q_proj.weight", gg + "attn_q.weight", (q_rows, e), q_perm),
                _TensorSpec(attn + "k_proj.weight", gg + "attn_k.weight", (kv_rows, e), k_perm),
                _TensorSpec(attn + "v_proj.weight", gg + "attn_v.weight", (kv_rows, e)),
            ]
        layer.append(_TensorSpec(attn + "o_proj.weight", gg + "attn_output.weight", (e, q_rows)))
        if hp.attention_bias:
            layer += [
                _TensorSpec(attn + "q_proj.bias", gg + "attn_q.bias", (q_rows,), q_perm),
                _TensorSpec(attn + "k_proj.bias", gg + "attn_k.bias", (kv_rows,), k_perm),
                _TensorSpec(attn + "v_proj.bias", gg + "attn_v.bias", (kv_rows,)),
            ]
            if hp.arch == "llama":
                layer.append(_TensorSpec(attn + "o_proj.bias", gg + "attn_output.bias", (e,)))
        if hp.arch in ("qwen3", "gemma3"):
            layer += [
                _TensorSpec(attn + "q_norm.weight", gg + "attn_q_norm.weight", (hd,), norm),
                _TensorSpec(attn + "k_norm.weight", gg + "attn_k_norm.weight", (hd,), norm),
            ]
        if hp.arch == "olmo2":  # over all heads at once
            layer += [
                _TensorSpec(attn + "q_norm.weight", gg + "attn_q_norm.weight", (q_rows,)),
                _TensorSpec(attn + "k_norm.weight", gg + "attn_k_norm.weight", (kv_rows,)),
                _TensorSpec(hf + "post_attention_layernorm.weight", gg + "post_attention_norm.weight", (e,)),
                _TensorSpec(hf + "post_feedforward_layernorm.weight", gg + "post_ffw_norm.weight", (e,)),
            ]
        elif gemma:
            layer += [
                _TensorSpec(
                    hf + "post_attention_layernorm.weight", gg + "post_attention_norm.weight", (e,), norm
                ),
                _TensorSpec(hf + "pre_feedforward_layernorm.weight", gg + "ffn_norm.weight", (e,), norm),
                _TensorSpec(
                    hf + "post_feedforward_layernorm.weight", gg + "post_ffw_norm.weight", (e,), norm
                ),
            ]
        else:
            layer.append(_TensorSpec(hf + "post_attention_layernorm.weight", gg + "ffn_norm.weight", (e,)))
        if hp.arch == "phi3":  # gate and up stacked: llama.cpp's ffn_up holds both
            layer.append(_TensorSpec(mlp + "gate_up_proj.weight", gg + "ffn_up.weight", (2 * hp.n_ff, e)))
        else:
            layer += [
                _TensorSpec(mlp + "gate_proj.weight", gg + "ffn_gate.weight", (hp.n_ff, e)),
                _TensorSpec(mlp + "up_proj.weight", gg + "ffn_up.weight", (hp.n_ff, e)),
            ]
        layer.append(_TensorSpec(mlp + "down_proj.weight", gg + "ffn_down.weight", (e, hp.n_ff)))
        if hp.mlp_bias:
            layer += [
                _TensorSpec(mlp + "gate_proj.bias", gg + "ffn_gate.bias", (hp.n_ff,)),
                _TensorSpec(mlp + "up_proj.bias", gg + "ffn_up.bias", (hp.n_ff,)),
                _TensorSpec(mlp + "down_proj.bias", gg + "ffn_down.bias", (e,)),
            ]
        plan += layer
    plan.append(_TensorSpec("model.norm.weight", "output_norm.weight", (e,), norm))
    if not hp.tied:
        plan.append(_TensorSpec("lm_head.weight", "output.weight", (hp.n_vocab, e)))
    return plan


def _check_checkpoint(ckpt: _Checkpoint, plan: list[_TensorSpec], hp: _HParams, where: Path) -> None:
    for spec in plan:
        if spec.hf not in ckpt.shapes:
            raise _format(f"{where}: tensor {spec.hf} is missing from the checkpoint")
        if ckpt.shapes[spec.hf] != spec.shape:
            raise _format(
                f"{where}: tensor {spec.hf} has shape {list(ckpt.shapes[spec.hf])}, "
                f"config.json implies {list(spec.shape)}"
            )
    # Tied output: a saved lm_head is the embedding again. Old checkpoints
    # also carry the rotary inverse frequencies, which GGUF readers recompute.
    ignorable = {"lm_head.weight"} if hp.tied else set()
    planned = {s.hf for s in plan}
    for name in ckpt.shapes:
        if name not in planned and name not in ignorable and not name.endswith("rotary_emb.inv_freq"):
            raise _unsupported(f"{where}: tensor {name} has no place in a {hp.arch} GGUF")


# ---------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------


@dataclass
class _Vocab:
    model: str  # "llama" (SentencePiece), "gpt2" (byte-level BPE) or "gemma4" (Gemma 4's BPE)
    pre: str
    tokens: list[str]
    types: list[int]
    scores: list[float] | None = None
    merges: list[str] | None = None
    special: dict[str, int] = field(default_factory=dict)
    add_bos: bool = False
    add_eos: bool = False
    add_sep: bool = False
    add_space_prefix: bool | None = None
    chat_template: str | None = None


@dataclass(frozen=True)
class _SpPiece:
    text: str
    score: float
    type: int


@dataclass(frozen=True)
class _SpModel:
    pieces: list[_SpPiece]
    add_dummy_prefix: bool


def _read_sentencepiece(path: Path) -> _SpModel:
    """The pieces of a SentencePiece ``ModelProto`` (text, score, type) and
    its normalizer's add_dummy_prefix, read with the sentencepiece package's
    own protobuf schema."""
    try:
        from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
        from sentencepiece import sentencepiece_model_pb2
    except ImportError as e:
        raise _unsupported(
            f"{path}: reading a SentencePiece tokenizer.model needs the sentencepiece package: "
            "pip install 'libeliza[convert]'"
        ) from e
    model = sentencepiece_model_pb2.ModelProto()  # type: ignore[attr-defined]
    try:
        model.ParseFromString(path.read_bytes())
    except DecodeError as e:
        raise _format(f"{path}: truncated or malformed protobuf ({e})") from e
    pieces = [_SpPiece(p.piece, p.score, p.type) for p in model.pieces]
    if not pieces:
        raise _format(f"{path}: no pieces (not a SentencePiece model?)")
    return _SpModel(pieces, model.normalizer_spec.add_dummy_prefix)


def _looks_special(text: str) -> bool:
    """Added tokens some checkpoints fail to mark special although they are
    control tokens (llama.cpp's list)."""
    return (
        text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
        or (text.startswith("<|") and text.endswith("|>"))
        or (text.startswith("<\uff5c") and text.endswith("\uff5c>"))
        or (text.startswith("<unused") and text.endswith(">"))
    )


def _added_tokens(tok_json: Json | None, tok_cfg: Json) -> dict[int, tuple[str, bool]]:
    """id -> (text, special) from tokenizer.json and tokenizer_config.json."""
    out: dict[int, tuple[str, bool]] = {}
    for entry in (tok_json or {}).get("added_tokens", []):
        out[int(entry["id"])] = (str(entry["content"]), bool(entry.get("special", False)))
    for key, entry in tok_cfg.get("added_tokens_decoder", {}).items():
        out[int(key)] = (str(entry["content"]), bool(entry.get("special", False)))
    return out


def _apply_added(
    tokens: list[str],
    types: list[int],
    scores: list[float] | None,
    added: Mapping[int, tuple[str, bool]],
    n_vocab: int,
    where: Path,
) -> None:
    for tid, (text, special) in sorted(added.items()):
        if tid >= n_vocab:
            raise _format(f"{where}: added token {text!r} has id {tid} >= vocab_size {n_vocab}")
        if special or _looks_special(text):
            types[tid] = TOKEN_CONTROL
        else:
            types[tid] = TOKEN_USER_DEFINED
            text = text.replace("\u2581", " ")
        tokens[tid] = text
        if scores is not None:
            scores[tid] = -1000.0


def _pad_vocab(
    n_vocab: int, tokens: list[str], types: list[int], scores: list[float] | None, where: Path
) -> None:
    if len(tokens) > n_vocab:
        raise _format(f"{where}: the tokenizer has {len(tokens)} tokens, config.json vocab_size is {n_vocab}")
    for i in range(len(tokens), n_vocab):
        tokens.append(f"[PAD{i}]")
        types.append(TOKEN_UNUSED)
        if scores is not None:
            scores.append(-1000.0)


def _template_adds(tok_json: Json | None, token_id: int | None, first: bool) -> bool | None:
    """Whether tokenizer.json's post-processor puts ``token_id`` first (or
    last) around a single sequence; None if it says nothing."""
    if tok_json is None or token_id is None:
        return None
    proc = tok_json.get("post_processor")
    procs = proc.get("processors", [proc]) if isinstance(proc, dict) else []
    for p in procs:
        if not isinstance(p, dict) or p.get("type") != "TemplateProcessing":
            continue
        single = p.get("single") or []
        if not single:
            return False
        item = single[0] if first else single[-1]
        special = item.get("SpecialToken")
        if special is None:
            return False
        ids = p.get("special_tokens", {}).get(special.get("id"), {}).get("ids", [])
        return bool(ids == [token_id])
    return None


def _special_ids(vocab: _Vocab, tok_json: Json | None, tok_cfg: Json, cfg: Json) -> dict[str, int]:
    """bos/eos/... ids: the token text named in tokenizer_config.json looked
    up in the vocabulary, else config.json's ``<name>_token_id``."""
    index: dict[str, int] = {}
    for i, t in enumerate(vocab.tokens):
        index.setdefault(t, i)
    for entry in (tok_json or {}).get("added_tokens", []):
        index[str(entry["content"])] = int(entry["id"])
    out: dict[str, int] = {}
    for name in _SPECIAL_TOKEN_KEYS:
        entry = tok_cfg.get(f"{name}_token")
        text = entry.get("content") if isinstance(entry, dict) else entry
        if isinstance(text, str) and text in index:
            out[name] = index[text]
            continue
        tid = cfg.get(f"{name}_token_id")
        if isinstance(tid, list):
            tid = tid[0] if tid else None
        if isinstance(tid, int) and not isinstance(tid, bool) and 0 <= tid < len(vocab.tokens):
            out[name] = tid
    if "unk" not in out and vocab.model == "llama" and TOKEN_UNKNOWN in vocab.types:
        out["unk"] = vocab.types.index(TOKEN_UNKNOWN)
    return out


def _bpe_pre(tok_json: Json, where: Path) -> str:
    """tokenizer.ggml.pre for a byte-level BPE tokenizer.json, from its
    pre-tokenizer's split regex."""
    pre = tok_json.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", [pre]) if isinstance(pre, dict) else []
    regexes = [
        s["pattern"]["Regex"]
        for s in steps
        if s.get("type") == "Split" and isinstance(s.get("pattern"), dict) and "Regex" in s["pattern"]
    ]
    byte_level = [s for s in steps if s.get("type") == "ByteLevel"]
    if not byte_level:
        raise _unsupported(f"{where}: BPE tokenizer without a ByteLevel pre-tokenizer")
    if not regexes and byte_level[0].get("use_regex", True):
        return "gpt2"
    if len(regexes) == 1 and regexes[0] in _BPE_PRE_BY_REGEX:
        return _BPE_PRE_BY_REGEX[regexes[0]]
    raise _unsupported(
        f"{where}: pre-tokenizer split {regexes} is not one GGUF readers know "
        f"(known: {', '.join(sorted(set(_BPE_PRE_BY_REGEX.values())))}, gpt2)"
    )


def _vocab_sentencepiece(path: Path, hp: _VocabTarget, tok_json: Json | None, tok_cfg: Json) -> _Vocab:
    sp = _read_sentencepiece(path)
    tokens = [p.text for p in sp.pieces]
    scores = [p.score for p in sp.pieces]
    types = [p.type for p in sp.pieces]
    _pad_vocab(hp.n_vocab, tokens, types, scores, path)
    _apply_added(tokens, types, scores, _added_tokens(tok_json, tok_cfg), hp.n_vocab, path)
    return _Vocab(
        model="llama",
        pre="default",
        tokens=tokens,
        types=types,
        scores=scores,
        # Gemma's tokenizer never prefixes a space; llama.cpp forces that.
        add_space_prefix=False if hp.arch.startswith("gemma") else sp.add_dummy_prefix,
    )


def _vocab_bpe(path: Path, hp: _VocabTarget, tok_json: Json, tok_cfg: Json) -> _Vocab:
    model = tok_json.get("model") or {}
    decoder = tok_json.get("decoder") or {}
    if model.get("type") != "BPE" or decoder.get("type") != "ByteLevel":
        raise _unsupported(
            f"{path}: tokenizer model {model.get('type')!r} with decoder "
            f"{decoder.get('type')!r}; supported: tokenizer.model (SentencePiece) "
            "or a byte-level BPE tokenizer.json"
        )
    pre = _bpe_pre(tok_json, path)
    tokens: list[str | None] = [None] * hp.n_vocab
    for text, tid in model["vocab"].items():
        if tid >= hp.n_vocab:
            raise _format(f"{path}: token {text!r} has id {tid} >= vocab_size {hp.n_vocab}")
        tokens[tid] = text
    types = [TOKEN_NORMAL if t is not None else TOKEN_UNUSED for t in tokens]
    filled = [t if t is not None else f"[PAD{i}]" for i, t in enumerate(tokens)]
    _apply_added(filled, types, None, _added_tokens(tok_json, tok_cfg), hp.n_vocab, path)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    return _Vocab(model="gpt2", pre=pre, tokens=filled, types=types, merges=merges)


# Gemma 4's tokens that llama.cpp's converter marks USER_DEFINED so that they
# always render (its chat parser reads them).
_GEMMA4_VISIBLE = {
    "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>",
    '<|"|>',
}  # fmt: skip
_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")


def _is_gemma4_bpe(tok_json: Json) -> bool:
    """tokenizer.json holds a SentencePiece-style BPE (raw UTF-8 pieces,
    spaces as U+2581, <0xHH> byte fallback), the shape of Gemma 4's."""
    model = tok_json.get("model") or {}
    decoder = tok_json.get("decoder") or {}
    return (
        model.get("type") == "BPE" and bool(model.get("byte_fallback")) and decoder.get("type") == "Sequence"
    )


def _vocab_gemma4_bpe(path: Path, hp: _VocabTarget, tok_json: Json, tok_cfg: Json) -> _Vocab:
    """Gemma 4's tokenizer.json as llama.cpp's converter writes it
    (gguf.LlamaHfVocab + Gemma4Model.set_vocab): tokenizer model "gemma4",
    the vocabulary in id order then the added tokens beyond it, every score
    -1000, <0xHH> pieces BYTE, the special tokens CONTROL, Gemma 4's visible
    markers USER_DEFINED, the merges, BOS on, no space prefix."""
    model = tok_json["model"]
    base: dict[int, str] = {}
    for text, tid in model["vocab"].items():
        base[int(tid)] = text
    added = _added_tokens(tok_json, tok_cfg)
    special_texts = {text for text, special in added.values() if special}
    for name in _SPECIAL_TOKEN_KEYS:
        entry = tok_cfg.get(f"{name}_token")
        text = entry.get("content") if isinstance(entry, dict) else entry
        if isinstance(text, str):
            special_texts.add(text)
    n_base = max(base) + 1 if base else 0
    texts = {**{tid: text for tid, (text, _) in added.items() if tid >= n_base}, **base}
    if sorted(texts) != list(range(len(texts))):
        raise _format(f"{path}: the token ids are not 0..{len(texts) - 1} without gaps")
    tokens = [texts[i] for i in range(len(texts))]
    types = []
    for text in tokens:
        if _BYTE_TOKEN.fullmatch(text):
            types.append(TOKEN_BYTE)
        elif text in _GEMMA4_VISIBLE:
            types.append(TOKEN_USER_DEFINED)
        elif text in special_texts:
            types.append(TOKEN_CONTROL)
        else:
            types.append(TOKEN_NORMAL)
    scores = [-1000.0] * len(tokens)
    _pad_vocab(hp.n_vocab, tokens, types, scores, path)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    return _Vocab(
        model="gemma4",
        pre="gemma4",
        tokens=tokens,
        types=types,
        scores=scores,
        merges=merges,
        add_space_prefix=False,
    )


def _chat_template(model_dir: Path, tok_cfg: Json) -> str | None:
    template = tok_cfg.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if isinstance(template, str) and template:
        return template
    jinja = model_dir / "chat_template.jinja"
    return jinja.read_text(encoding="utf-8") if jinja.is_file() else None


def _load_vocab(model_dir: Path, hp: _VocabTarget, cfg: Json) -> _Vocab:
    tok_json_path = model_dir / "tokenizer.json"
    tok_json = _read_json(tok_json_path) if tok_json_path.is_file() else None
    tok_cfg_path = model_dir / "tokenizer_config.json"
    tok_cfg = _read_json(tok_cfg_path) if tok_cfg_path.is_file() else {}
    if (model_dir / "tokenizer.model").is_file():
        vocab = _vocab_sentencepiece(model_dir / "tokenizer.model", hp, tok_json, tok_cfg)
    elif tok_json is not None and hp.arch.startswith("gemma4") and _is_gemma4_bpe(tok_json):
        vocab = _vocab_gemma4_bpe(tok_json_path, hp, tok_json, tok_cfg)
    elif tok_json is not None:
        vocab = _vocab_bpe(tok_json_path, hp, tok_json, tok_cfg)
    else:
        raise ElizaIOError(Status.E_IO, f"{model_dir}: no tokenizer.model or tokenizer.json")
    vocab.special = _special_ids(vocab, tok_json, tok_cfg, cfg)
    bos, eos = vocab.special.get("bos"), vocab.special.get("eos")
    for attr, tid, first in (("add_bos", bos, True), ("add_eos", eos, False)):
        explicit = tok_cfg.get(f"{attr}_token")
        from_template = _template_adds(tok_json, tid, first)
        if isinstance(explicit, bool):
            setattr(vocab, attr, explicit and tid is not None)
        elif from_template is not None:
            setattr(vocab, attr, from_template)
        else:
            # SentencePiece models prepend BOS unless told otherwise.
            setattr(vocab, attr, first and vocab.model == "llama" and tid is not None)
    if vocab.model == "gemma4":
        vocab.add_bos = True  # as llama.cpp's converter writes it (and its loader forces)
    vocab.add_sep = tok_cfg.get("add_sep_token") is True and "sep" in vocab.special
    vocab.chat_template = _chat_template(model_dir, tok_cfg)
    return vocab


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


def _add_metadata(w: Any, hp: _HParams, name: str, file_type: int) -> None:
    import gguf

    a = hp.arch
    w.add_type("model")
    w.add_name(name)
    if a in _NORMAL_ROPE:
        w.add_vocab_size(hp.n_vocab)
    w.add_context_length(hp.n_ctx)
    if a == "phi3":
        w.add_rope_scaling_orig_ctx_len(_phi3_original_ctx(hp))
    w.add_embedding_length(hp.n_embd)
    w.add_block_count(hp.n_layer)
    w.add_feed_forward_length(hp.n_ff)
    w.add_head_count(hp.n_head)
    w.add_head_count_kv(hp.n_head_kv)
    # llama.cpp's gemma2 converter writes no base (readers assume 10000).
    if a != "gemma2" or hp.rope_base != 10000.0:
        w.add_rope_freq_base(hp.rope_base)
    w.add_layer_norm_rms_eps(hp.norm_eps)
    if hp.head_dim_in_config or a in ("gemma3", "falcon-h1"):
        w.add_key_length(hp.head_dim)
        w.add_value_length(hp.head_dim)
    if hp.falcon_h1 is not None:
        f = hp.falcon_h1
        w.add_vocab_size(hp.n_vocab)
        w.add_ssm_conv_kernel(f.d_conv)
        w.add_ssm_inner_size(f.d_ssm)
        w.add_ssm_state_size(f.d_state)
        w.add_ssm_time_step_rank(f.n_heads)
        w.add_ssm_group_count(f.n_groups)
    if a in _NORMAL_ROPE:
        w.add_rope_dimension_count(hp.head_dim)
    if a == "phi3":
        w.add_rope_dimension_count(hp.rope_dims)
        w.add_sliding_window(0)
        if hp.longrope is not None:
            w.add_float32(f"{a}.rope.scaling.attn_factor", _longrope_attn_factor(hp))
    if hp.rope_linear_factor is not None:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(hp.rope_linear_factor)
    if hp.rope_yarn is not None:
        y = hp.rope_yarn
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(float(y["factor"]))
        w.add_rope_scaling_orig_ctx_len(int(y["original_max_position_embeddings"]))
        for key, suffix in (("extrapolation_factor", "yarn_ext_factor"),
                            ("attention_factor", "yarn_attn_factor"),
                            ("beta_fast", "yarn_beta_fast"), ("beta_slow", "yarn_beta_slow")):
            if y.get(key) is not None:
                w.add_float32(f"{a}.rope.scaling.{suffix}", float(y[key]))
    if a in _GEMMA:
        w.add_sliding_window(hp.sliding_window)
    if hp.attn_softcap is not None:
        w.add_attn_logit_softcapping(hp.attn_softcap)
    if hp.final_softcap is not None:
        w.add_final_logit_softcapping(hp.final_softcap)
    if hp.granite_scales is not None:
        attn_scale, embd_scale, resid_scale, logit_scale = hp.granite_scales
        w.add_attention_scale(attn_scale)
        w.add_embedding_scale(embd_scale)
        w.add_residual_scale(resid_scale)
        w.add_logit_scale(logit_scale)
    w.add_file_type(file_type)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)


def _add_tokenizer_metadata(w: Any, vocab: _Vocab) -> None:
    w.add_tokenizer_model(vocab.model)
    w.add_tokenizer_pre(vocab.pre)
    w.add_token_list(vocab.tokens)
    if vocab.scores is not None:
        w.add_token_scores(vocab.scores)
    w.add_token_types(vocab.types)
    if vocab.merges:
        w.add_token_merges(vocab.merges)
    for key_name, tid in vocab.special.items():
        w.add_uint32(_SPECIAL_TOKEN_KEYS[key_name], tid)
    w.add_add_bos_token(vocab.add_bos)
    w.add_add_eos_token(vocab.add_eos)
    w.add_add_sep_token(vocab.add_sep)
    if vocab.add_space_prefix is not None:
        w.add_add_space_prefix(vocab.add_space_prefix)
    if vocab.chat_template:
        w.add_chat_template(vocab.chat_template)


def _stored_type(data: F32, gguf_name: str, outtype: str) -> Any:
    """The GGML type a tensor is written in: as llama.cpp does, F32 for
    vectors, norms, the SSM conv kernel and every tensor whose name does not
    end in ``.weight`` (ssm_a, ssm_d, biases); other matrices in ``outtype``;
    Q8_0 needs rows of whole 32-blocks, else F16 (llama.cpp's fallback)."""
    from gguf import GGMLQuantizationType as T

    always_f32 = (
        gguf_name.endswith("_norm.weight") or ".ssm_conv1d." in gguf_name or not gguf_name.endswith(".weight")
    )
    if data.ndim <= 1 or always_f32 or outtype == "f32":
        return T.F32
    if outtype == "q8_0" and data.shape[-1] % 32 == 0:
        return T.Q8_0
    return T.BF16 if outtype == "bf16" else T.F16


def convert_hf(
    model_dir: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    outtype: str = "f16",
    name: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> ConversionReport:
    """Converts the transformers checkpoint in ``model_dir`` (config.json,
    safetensors or pytorch_model.bin shards, tokenizer.model or
    tokenizer.json) into the GGUF file ``out_path``.

    ``outtype`` ("f32", "f16", "bf16", "q8_0") is the type of the weight
    matrices; norms and biases stay F32. ``name`` is general.name (default:
    the directory's name). ``progress(i, n, tensor_name)`` is called before
    tensor ``i`` of ``n`` is converted. The file appears complete or not at all.

    Raises :class:`eliza.UnsupportedError` for an architecture or setting
    GGUF readers cannot express, :class:`eliza.FormatError` for a checkpoint
    that contradicts itself, :class:`eliza.ElizaIOError` for missing files.

    Example::

        convert_hf("tiny-llama/", "tiny-llama-f32.gguf", outtype="f32")
    """

    _check_outtype(outtype)
    src = Path(model_dir)
    if not (src / "config.json").is_file():
        raise ElizaIOError(Status.E_IO, f"{src}: no config.json (not a transformers checkpoint directory)")
    cfg = _read_json(src / "config.json")
    if any(ARCHITECTURES.get(a, "").startswith("gemma4") for a in cfg.get("architectures") or []):
        from .gemma4 import convert_gemma4

        return convert_gemma4(src, cfg, Path(out_path), outtype, name, progress)
    hp = _hparams(cfg)
    ckpt = _Checkpoint(src)
    plan = _tensor_plan(hp)
    _check_checkpoint(ckpt, plan, hp, src)
    vocab = _load_vocab(src, hp, cfg)

    extra = [("rope_freqs.weight", _llama3_rope_factors(hp))] if hp.rope_llama3 is not None else []
    if hp.longrope is not None:
        extra += _longrope_factors(hp)
    file_type, gguf_name = _file_type(outtype), name or src.resolve().name
    return _write_gguf(
        Path(out_path), hp.arch, hp.n_vocab, lambda w: _add_metadata(w, hp, gguf_name, file_type), vocab,
        _tensors(ckpt, plan, extra), len(plan) + len(extra), outtype, progress,
    )


def _check_outtype(outtype: str) -> None:
    if outtype not in OUTTYPES:
        raise _unsupported(f"outtype {outtype!r}; choose one of {', '.join(OUTTYPES)}")


def _write_gguf(
    out: Path,
    arch: str,
    n_vocab: int,
    add_metadata: Callable[[Any], None],
    vocab: _Vocab,
    tensors: Iterator[tuple[str, F32]],
    total: int,
    outtype: str,
    progress: Callable[[int, int, str], None] | None,
) -> ConversionReport:
    """Writes the GGUF file ``out`` of ``arch``: the keys ``add_metadata``
    adds, the vocabulary's, then ``tensors`` (``total`` of them) in their
    stored types; the report of what it holds."""
    with gguf_file(out, arch, use_temp_file=True) as writer:
        add_metadata(writer)
        _add_tokenizer_metadata(writer, vocab)
        counts, n_params = _write_tensors(writer, tensors, total, outtype, progress)
    return ConversionReport(
        path=out,
        architecture=arch,
        outtype=outtype,
        n_tensors=sum(counts.values()),
        n_params=n_params,
        n_vocab=n_vocab,
        tokenizer_model=vocab.model,
        tensor_types=counts,
    )


def _file_type(outtype: str) -> int:
    import gguf

    return int(
        {
            "f32": gguf.LlamaFileType.ALL_F32,
            "f16": gguf.LlamaFileType.MOSTLY_F16,
            "bf16": gguf.LlamaFileType.MOSTLY_BF16,
            "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
        }[outtype]
    )


def _write_tensors(
    writer: Any,
    tensors: Iterator[tuple[str, F32]],
    total: int,
    outtype: str,
    progress: Callable[[int, int, str], None] | None,
) -> tuple[dict[str, int], int]:
    """Adds ``tensors`` (float32, or int32 index tensors stored as I32) in
    their stored types; returns the count per GGML type and the number of
    values."""
    import gguf

    counts: dict[str, int] = {}
    n_params = 0
    for i, (gguf_name, data) in enumerate(tensors):
        if progress is not None:
            progress(i, total, gguf_name)
        if data.dtype == np.int32:
            writer.add_tensor(gguf_name, data)
            qname = "I32"
        else:
            qtype = _stored_type(data, gguf_name, outtype)
            stored = gguf.quants.quantize(data, qtype)
            raw = (
                qtype if qtype not in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16) else None
            )
            writer.add_tensor(gguf_name, stored, raw_dtype=raw)
            qname = qtype.name
        counts[qname] = counts.get(qname, 0) + 1
        n_params += int(data.size)
    return counts, n_params


def _tensors(
    ckpt: _Checkpoint, plan: list[_TensorSpec], extra: list[tuple[str, F32]]
) -> Iterator[tuple[str, F32]]:
    for spec in plan:
        data = ckpt.load(spec.hf)
        yield spec.gguf, (spec.transform(data) if spec.transform is not None else data)
    yield from extra
