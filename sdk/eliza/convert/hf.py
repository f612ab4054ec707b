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
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    tokenizer_model: str  # tokenizer.ggml.model: "llama" or "gpt2"
    tensor_types: dict[str, int] = field(default_factory=dict)  # GGML type name -> tensor count


# ---------------------------------------------------------------------------
# Hyperparameters
# ---------------------------------------------------------------------------


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
    rope_dims: int = 0  # rotated dims per head (phi3's partial rope); 0: head_dim
    rope_yarn: Json | None = None  # llama YaRN: factor, original context, betas
    longrope: Json | None = None  # phi3: short/long factors, original context
    attn_softcap: float | None = None  # gemma2
    final_softcap: float | None = None  # gemma2
    granite_scales: tuple[float, float, float, float] | None = None  # attention, embedding, residual, logit
    n_ctx_orig: int = 0  # phi3: original_max_position_embeddings (0: n_ctx)


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
        rope_dims=rope_dims,
        rope_yarn=yarn,
        longrope=longrope,
        attn_softcap=attn_softcap,
        final_softcap=final_softcap,
        granite_scales=granite_scales,
        n_ctx_orig=int(cfg.get("original_max_position_embeddings") or 0),
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


class _Checkpoint:
    """The tensors of a checkpoint directory by name: shapes up front, data
    (as float32) one tensor at a time."""

    def __init__(self, model_dir: Path) -> None:
        self.shapes: dict[str, tuple[int, ...]] = {}
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
        return np.ascontiguousarray(self._loaders[name](), dtype=np.float32)


def _safetensors_loader(path: Path, name: str) -> Callable[[], F32]:
    def load() -> F32:
        from safetensors import safe_open

        with safe_open(str(path), framework="numpy") as f:
            data: F32 = f.get_tensor(name)
        return data.astype(np.float32)

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


def _tensor_plan(hp: _HParams) -> list[_TensorSpec]:
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
    model: str  # "llama" (SentencePiece) or "gpt2" (byte-level BPE)
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


def _varint(buf: bytes, pos: int, where: Path) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise _format(f"{where}: truncated or malformed protobuf")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _proto_fields(buf: bytes, where: Path) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of a protobuf message: varints as int, every
    other wire type as its raw bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos, where)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos, where)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = buf[pos : pos + size], pos + size
        elif wire == 2:
            size, pos = _varint(buf, pos, where)
            value, pos = buf[pos : pos + size], pos + size
        else:
            raise _format(f"{where}: protobuf wire type {wire} not expected in a SentencePiece model")
        if pos > len(buf):
            raise _format(f"{where}: truncated protobuf")
        yield number, value


def _read_sentencepiece(path: Path) -> _SpModel:
    """The pieces of a SentencePiece ``ModelProto`` (field 1: piece, score,
    type) and its normalizer's add_dummy_prefix (field 3.3, default true)."""
    buf = path.read_bytes()
    pieces: list[_SpPiece] = []
    add_dummy_prefix = True
    for number, value in _proto_fields(buf, path):
        if number == 1 and isinstance(value, bytes):
            text, score, kind = "", 0.0, TOKEN_NORMAL
            for n, v in _proto_fields(value, path):
                if n == 1 and isinstance(v, bytes):
                    text = v.decode("utf-8", "replace")
                elif n == 2 and isinstance(v, bytes) and len(v) == 4:
                    (score,) = struct.unpack("<f", v)
                elif n == 3 and isinstance(v, int):
                    kind = v
            pieces.append(_SpPiece(text, score, kind))
        elif number == 3 and isinstance(value, bytes):
            for n, v in _proto_fields(value, path):
                if n == 3 and isinstance(v, int):
                    add_dummy_prefix = bool(v)
    if not pieces:
        raise _format(f"{path}: no pieces (not a SentencePiece model?)")
    return _SpModel(pieces, add_dummy_prefix)


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


def _vocab_sentencepiece(path: Path, hp: _HParams, tok_json: Json | None, tok_cfg: Json) -> _Vocab:
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
        add_space_prefix=False if hp.arch in _GEMMA else sp.add_dummy_prefix,
    )


def _vocab_bpe(path: Path, hp: _HParams, tok_json: Json, tok_cfg: Json) -> _Vocab:
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


def _chat_template(model_dir: Path, tok_cfg: Json) -> str | None:
    template = tok_cfg.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if isinstance(template, str) and template:
        return template
    jinja = model_dir / "chat_template.jinja"
    return jinja.read_text(encoding="utf-8") if jinja.is_file() else None


def _load_vocab(model_dir: Path, hp: _HParams, cfg: Json) -> _Vocab:
    tok_json_path = model_dir / "tokenizer.json"
    tok_json = _read_json(tok_json_path) if tok_json_path.is_file() else None
    tok_cfg_path = model_dir / "tokenizer_config.json"
    tok_cfg = _read_json(tok_cfg_path) if tok_cfg_path.is_file() else {}
    if (model_dir / "tokenizer.model").is_file():
        vocab = _vocab_sentencepiece(model_dir / "tokenizer.model", hp, tok_json, tok_cfg)
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
    vocab.add_sep = tok_cfg.get("add_sep_token") is True and "sep" in vocab.special
    vocab.chat_template = _chat_template(model_dir, tok_cfg)
    return vocab


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------


def _add_metadata(w: Any, hp: _HParams, vocab: _Vocab, name: str, file_type: int) -> None:
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
    if hp.head_dim_in_config or a == "gemma3":
        w.add_key_length(hp.head_dim)
        w.add_value_length(hp.head_dim)
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


def _stored_type(data: F32, outtype: str) -> Any:
    """The GGML type a tensor is written in: vectors always F32 (as llama.cpp
    does), matrices in ``outtype``; Q8_0 needs rows of whole 32-blocks, else
    F16 (llama.cpp's fallback)."""
    from gguf import GGMLQuantizationType as T

    if data.ndim <= 1 or outtype == "f32":
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
    import gguf

    if outtype not in OUTTYPES:
        raise _unsupported(f"outtype {outtype!r}; choose one of {', '.join(OUTTYPES)}")
    src = Path(model_dir)
    if not (src / "config.json").is_file():
        raise ElizaIOError(Status.E_IO, f"{src}: no config.json (not a transformers checkpoint directory)")
    cfg = _read_json(src / "config.json")
    hp = _hparams(cfg)
    ckpt = _Checkpoint(src)
    plan = _tensor_plan(hp)
    _check_checkpoint(ckpt, plan, hp, src)
    vocab = _load_vocab(src, hp, cfg)

    file_type = {
        "f32": gguf.LlamaFileType.ALL_F32,
        "f16": gguf.LlamaFileType.MOSTLY_F16,
        "bf16": gguf.LlamaFileType.MOSTLY_BF16,
        "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    }[outtype]
    out = Path(out_path)
    counts: dict[str, int] = {}
    n_params = 0
    with gguf_file(out, hp.arch, use_temp_file=True) as writer:
        _add_metadata(writer, hp, vocab, name or src.resolve().name, int(file_type))
        extra = [("rope_freqs.weight", _llama3_rope_factors(hp))] if hp.rope_llama3 is not None else []
        if hp.longrope is not None:
            extra += _longrope_factors(hp)
        total = len(plan) + len(extra)
        for i, (gguf_name, data) in enumerate(_tensors(ckpt, plan, extra)):
            if progress is not None:
                progress(i, total, gguf_name)
            qtype = _stored_type(data, outtype)
            stored = gguf.quants.quantize(data, qtype)
            raw = (
                qtype if qtype not in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16) else None
            )
            writer.add_tensor(gguf_name, stored, raw_dtype=raw)
            counts[qtype.name] = counts.get(qtype.name, 0) + 1
            n_params += int(data.size)
    return ConversionReport(
        path=out,
        architecture=hp.arch,
        outtype=outtype,
        n_tensors=sum(counts.values()),
        n_params=n_params,
        n_vocab=hp.n_vocab,
        tokenizer_model=vocab.model,
        tensor_types=counts,
    )


def _tensors(
    ckpt: _Checkpoint, plan: list[_TensorSpec], extra: list[tuple[str, F32]]
) -> Iterator[tuple[str, F32]]:
    for spec in plan:
        data = ckpt.load(spec.hf)
        yield spec.gguf, (spec.transform(data) if spec.transform is not None else data)
    yield from extra
