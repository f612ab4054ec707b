"""Gemma 4 checkpoints to GGUF: the text model (``Gemma4ForCausalLM``, arch
``gemma4``) and its multi-token-prediction drafter
(``Gemma4AssistantForCausalLM``, arch ``gemma4-assistant``), with the tensor
names and metadata keys llama.cpp's converter (llama-cpp-python 0.3.36)
writes, plus the assistant's masked embedding, which that converter drops.
docs/convert.md pins the schema; :func:`eliza.convert.convert_hf` calls
:func:`convert_gemma4` for these architectures.

Example::

    from eliza.convert import convert_hf
    convert_hf("gemma-4-E2B-it/", "gemma4-e2b-f16.gguf")
    convert_hf("gemma-4-E2B-it-assistant/", "gemma4-e2b-assistant-f16.gguf")
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .hf import (
    F32,
    ConversionReport,
    Json,
    _check_outtype,
    _Checkpoint,
    _file_type,
    _format,
    _int,
    _load_vocab,
    _TensorSpec,
    _unsupported,
    _write_gguf,
)

SLIDING, FULL = "sliding_attention", "full_attention"
# Gemma4TextConfig's default layer pattern: five sliding layers, one full.
DEFAULT_SWA_PERIOD = 6
ACTIVATION = "gelu_pytorch_tanh"
# rope_freqs.weight divisor of the unrotated dims of proportional rope
# (llama.cpp's: their angle becomes 0, cos 1, sin 0).
UNROTATED = 1e30


@dataclass(frozen=True)
class Gemma4HParams:
    arch: str  # "gemma4" or "gemma4-assistant"
    n_vocab: int
    n_ctx: int
    n_embd: int
    n_ff: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim_swa: int
    head_dim_full: int
    n_rot_swa: int  # rotated dims of sliding layers (all)
    n_rot_pairs_full: int  # rotated pairs of full layers' proportional rope
    norm_eps: float
    rope_base_full: float
    rope_base_swa: float
    sliding_window: int
    swa_layers: tuple[bool, ...]
    n_kv_shared: int  # the last n_kv_shared layers reuse earlier K/V
    n_ple: int  # per-layer embedding width; 0: none
    final_softcap: float | None
    tied: bool
    backbone: int  # assistant: the target's hidden size; 0 for a target
    n_centroids: int  # assistant with a masked embedding; 0 otherwise
    centroid_top_k: int

    def is_shared(self, layer: int) -> bool:
        return layer >= self.n_layer - self.n_kv_shared

    def head_dim(self, layer: int) -> int:
        return self.head_dim_swa if self.swa_layers[layer] else self.head_dim_full


def _refuse(cfg: Json, key: str, why: str) -> None:
    if cfg.get(key):
        raise _unsupported(f"config.json: {key} = {cfg[key]!r} ({why})")


def _rope_params(cfg: Json, layer_type: str) -> Json:
    params = cfg.get("rope_parameters") or {
        SLIDING: {"rope_type": "default", "rope_theta": 10_000.0},
        FULL: {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
    }
    entry = params.get(layer_type)
    if not isinstance(entry, dict) or "rope_theta" not in entry:
        raise _format(f"config.json: rope_parameters[{layer_type!r}] = {entry!r}, expected a rope_theta")
    if float(entry.get("factor", 1.0)) != 1.0:
        raise _unsupported(f"config.json: rope_parameters[{layer_type!r}] scales positions ({entry})")
    return entry


def _full_layer_override(cfg: Json, layer_types: list[str], key: str) -> Any:
    """A full-attention layer's value of ``key`` in per_layer_config (the
    first such layer's, as llama.cpp reads it)."""
    for index, override in sorted((cfg.get("per_layer_config") or {}).items(), key=lambda kv: int(kv[0])):
        i = int(index)
        if i < len(layer_types) and layer_types[i] == FULL and key in override:
            return override[key]
    return None


def _hparams(cfg: Json, arch: str) -> Gemma4HParams:
    top = cfg
    if arch == "gemma4-assistant":
        text = cfg.get("text_config")
        if not isinstance(text, dict):
            raise _format("config.json: a Gemma4AssistantForCausalLM without text_config")
        cfg = text
    _refuse(cfg, "enable_moe_block", "mixture-of-experts Gemma 4 is not supported")
    _refuse(cfg, "attention_k_eq_v", "keys reused as values are not supported")
    _refuse(cfg, "use_double_wide_mlp", "per-layer feed-forward widths are not supported")
    _refuse(cfg, "attention_bias", "Gemma 4 has no attention biases")
    _refuse(cfg, "use_bidirectional_attention", "not a causal LM")
    act = cfg.get("hidden_activation", ACTIVATION)
    if act != ACTIVATION:
        raise _unsupported(f"config.json: hidden_activation {act!r}; gemma4 in GGUF implies {ACTIVATION!r}")

    n_layer = _int(cfg, "num_hidden_layers")
    default_types = [SLIDING if (i + 1) % DEFAULT_SWA_PERIOD else FULL for i in range(n_layer)]
    layer_types = list(cfg.get("layer_types") or default_types)
    if len(layer_types) != n_layer or any(t not in (SLIDING, FULL) for t in layer_types):
        raise _format(f"config.json: layer_types {layer_types} for {n_layer} layers")
    n_head_kv = _int(cfg, "num_key_value_heads")
    global_kv = _full_layer_override(cfg, layer_types, "num_key_value_heads")
    if global_kv is not None and global_kv != n_head_kv:
        raise _unsupported(f"config.json: full layers with {global_kv} KV heads, sliding with {n_head_kv}")
    head_dim_swa = _int(cfg, "head_dim")
    head_dim_full = cfg.get("global_head_dim") or _full_layer_override(cfg, layer_types, "head_dim")
    if FULL not in layer_types:
        head_dim_full = head_dim_full or head_dim_swa
    if not isinstance(head_dim_full, int) or head_dim_full <= 0 or head_dim_full % 2 or head_dim_swa % 2:
        raise _format(f"config.json: head sizes {head_dim_swa} (sliding) / {head_dim_full!r} (full)")

    swa_rope, full_rope = _rope_params(cfg, SLIDING), _rope_params(cfg, FULL)
    if (
        swa_rope.get("rope_type", "default") != "default"
        or float(swa_rope.get("partial_rotary_factor", 1.0)) != 1
    ):
        raise _unsupported(f"config.json: sliding-layer rope {swa_rope}; GGUF readers assume plain rope")
    if full_rope.get("rope_type") != "proportional":
        raise _unsupported(f"config.json: full-layer rope {full_rope}; gemma4 in GGUF implies 'proportional'")
    n_rot_pairs_full = int(float(full_rope.get("partial_rotary_factor", 1.0)) * head_dim_full // 2)

    n_kv_shared = int(cfg.get("num_kv_shared_layers") or 0)
    backbone, n_centroids, top_k = 0, 0, 0
    if arch == "gemma4-assistant":
        backbone = _int(top, "backbone_hidden_size")
        if n_kv_shared != n_layer:
            raise _format(
                f"config.json: an assistant shares K/V in {n_kv_shared} of {n_layer} layers, not all"
            )
        if top.get("use_ordered_embeddings"):
            n_centroids = _int(top, "num_centroids")
            top_k = _int(top, "centroid_intermediate_top_k")
    elif not 0 <= n_kv_shared < n_layer:
        raise _format(f"config.json: num_kv_shared_layers {n_kv_shared} of {n_layer} layers")
    else:
        producers = set(layer_types[: n_layer - n_kv_shared])
        if set(layer_types[n_layer - n_kv_shared :]) - producers:
            raise _format(
                f"config.json: a KV-shared layer type has no earlier layer of its type ({layer_types})"
            )

    n_ple = int(cfg.get("hidden_size_per_layer_input") or 0)
    n_vocab = _int(cfg, "vocab_size")
    if n_ple and int(cfg.get("vocab_size_per_layer_input") or 0) != n_vocab:
        raise _unsupported(
            f"config.json: vocab_size_per_layer_input {cfg.get('vocab_size_per_layer_input')} != "
            f"vocab_size {n_vocab} (GGUF has no key for it)"
        )
    if arch == "gemma4-assistant" and n_ple:
        raise _format("config.json: an assistant with per-layer embeddings")
    softcap = cfg.get("final_logit_softcapping")
    return Gemma4HParams(
        arch=arch,
        n_vocab=n_vocab,
        n_ctx=_int(cfg, "max_position_embeddings", 131072),
        n_embd=_int(cfg, "hidden_size"),
        n_ff=_int(cfg, "intermediate_size"),
        n_layer=n_layer,
        n_head=_int(cfg, "num_attention_heads"),
        n_head_kv=n_head_kv,
        head_dim_swa=head_dim_swa,
        head_dim_full=head_dim_full,
        n_rot_swa=head_dim_swa,
        n_rot_pairs_full=n_rot_pairs_full,
        norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        rope_base_full=float(full_rope["rope_theta"]),
        rope_base_swa=float(swa_rope["rope_theta"]),
        sliding_window=_int(cfg, "sliding_window"),
        swa_layers=tuple(t == SLIDING for t in layer_types),
        n_kv_shared=n_kv_shared,
        n_ple=n_ple,
        final_softcap=float(softcap) if softcap is not None else None,
        tied=bool(top.get("tie_word_embeddings", True)),
        backbone=backbone,
        n_centroids=n_centroids,
        centroid_top_k=top_k,
    )


def _tensor_plan(hp: Gemma4HParams) -> list[_TensorSpec]:
    e, ple, L = hp.n_embd, hp.n_ple, hp.n_layer
    plan = [_TensorSpec("model.embed_tokens.weight", "token_embd.weight", (hp.n_vocab, e))]
    if ple:
        plan += [
            _TensorSpec(
                "model.embed_tokens_per_layer.weight", "per_layer_token_embd.weight", (hp.n_vocab, L * ple)
            ),
            _TensorSpec(
                "model.per_layer_model_projection.weight", "per_layer_model_proj.weight", (L * ple, e)
            ),
            _TensorSpec("model.per_layer_projection_norm.weight", "per_layer_proj_norm.weight", (ple,)),
        ]
    if hp.backbone:
        plan += [
            _TensorSpec("pre_projection.weight", "nextn.pre_projection.weight", (e, 2 * hp.backbone)),
            _TensorSpec("post_projection.weight", "nextn.post_projection.weight", (hp.backbone, e)),
        ]
    if hp.n_centroids:
        plan.append(
            _TensorSpec(
                "masked_embedding.centroids.weight", "masked_embd_centroids.weight", (hp.n_centroids, e)
            )
        )
    for i in range(L):
        hf, gg, hd = f"model.layers.{i}.", f"blk.{i}.", hp.head_dim(i)
        attn, mlp = hf + "self_attn.", hf + "mlp."
        q, kv = hp.n_head * hd, hp.n_head_kv * hd
        plan += [
            _TensorSpec(hf + "input_layernorm.weight", gg + "attn_norm.weight", (e,)),
            _TensorSpec(attn + "q_proj.weight", gg + "attn_q.weight", (q, e)),
            _TensorSpec(attn + "q_norm.weight", gg + "attn_q_norm.weight", (hd,)),
        ]
        if not hp.is_shared(i):
            plan += [
                _TensorSpec(attn + "k_proj.weight", gg + "attn_k.weight", (kv, e)),
                _TensorSpec(attn + "k_norm.weight", gg + "attn_k_norm.weight", (hd,)),
                _TensorSpec(attn + "v_proj.weight", gg + "attn_v.weight", (kv, e)),
            ]
        plan += [
            _TensorSpec(attn + "o_proj.weight", gg + "attn_output.weight", (e, q)),
            _TensorSpec(hf + "post_attention_layernorm.weight", gg + "post_attention_norm.weight", (e,)),
            _TensorSpec(hf + "pre_feedforward_layernorm.weight", gg + "ffn_norm.weight", (e,)),
            _TensorSpec(hf + "post_feedforward_layernorm.weight", gg + "post_ffw_norm.weight", (e,)),
            _TensorSpec(mlp + "gate_proj.weight", gg + "ffn_gate.weight", (hp.n_ff, e)),
            _TensorSpec(mlp + "up_proj.weight", gg + "ffn_up.weight", (hp.n_ff, e)),
            _TensorSpec(mlp + "down_proj.weight", gg + "ffn_down.weight", (e, hp.n_ff)),
        ]
        if ple:
            plan += [
                _TensorSpec(hf + "per_layer_input_gate.weight", gg + "inp_gate.weight", (ple, e)),
                _TensorSpec(hf + "per_layer_projection.weight", gg + "proj.weight", (e, ple)),
                _TensorSpec(hf + "post_per_layer_input_norm.weight", gg + "post_norm.weight", (e,)),
            ]
        plan.append(_TensorSpec(hf + "layer_scalar", gg + "layer_output_scale.weight", (1,)))
    plan.append(_TensorSpec("model.norm.weight", "output_norm.weight", (e,)))
    if not hp.tied:
        plan.append(_TensorSpec("lm_head.weight", "output.weight", (hp.n_vocab, e)))
    return plan


def _ordering_name(hp: Gemma4HParams) -> str | None:
    return "masked_embedding.token_ordering" if hp.n_centroids else None


def _check(ckpt: _Checkpoint, plan: list[_TensorSpec], hp: Gemma4HParams, where: Path) -> None:
    expected = {s.hf: s.shape for s in plan}
    if (ordering := _ordering_name(hp)) is not None:
        expected[ordering] = (hp.n_vocab,)
    for name, shape in expected.items():
        if name not in ckpt.shapes:
            raise _format(f"{where}: tensor {name} is missing from the checkpoint")
        if ckpt.shapes[name] != shape:
            raise _format(
                f"{where}: tensor {name} has shape {list(ckpt.shapes[name])}, "
                f"config.json implies {list(shape)}"
            )
    # transformers drops the K/V weights of KV-shared layers when loading.
    dropped = {
        f"model.layers.{i}.self_attn.{w}.weight"
        for i in range(hp.n_layer)
        if hp.is_shared(i)
        for w in ("k_proj", "v_proj", "k_norm", "v_norm")
    }
    ignorable = dropped | ({"lm_head.weight"} if hp.tied else set())
    for name in ckpt.shapes:
        if name not in expected and name not in ignorable and not name.endswith("inv_freq"):
            raise _unsupported(f"{where}: tensor {name} has no place in a {hp.arch} GGUF")


def _rope_freqs(hp: Gemma4HParams) -> F32:
    """Frequency divisors of the full layers (llama.cpp's rope_freqs.weight):
    proportional rope rotates the first n pairs with base^(-2i/head_dim) and
    leaves the others in place."""
    n_pairs = hp.head_dim_full // 2
    return np.asarray([1.0] * hp.n_rot_pairs_full + [UNROTATED] * (n_pairs - hp.n_rot_pairs_full), np.float32)


def _add_metadata(w: Any, hp: Gemma4HParams, name: str, file_type: int) -> None:
    import gguf

    w.add_type("model")
    w.add_name(name)
    w.add_block_count(hp.n_layer)
    w.add_context_length(hp.n_ctx)
    w.add_embedding_length(hp.n_embd)
    w.add_feed_forward_length(hp.n_ff)
    w.add_head_count(hp.n_head)
    w.add_head_count_kv(hp.n_head_kv)
    w.add_rope_freq_base(hp.rope_base_full)
    w.add_rope_freq_base_swa(hp.rope_base_swa)
    w.add_layer_norm_rms_eps(hp.norm_eps)
    w.add_key_length(hp.head_dim_full)
    w.add_value_length(hp.head_dim_full)
    w.add_file_type(file_type)
    if hp.final_softcap is not None:
        w.add_final_logit_softcapping(hp.final_softcap)
    w.add_sliding_window(hp.sliding_window)
    w.add_shared_kv_layers(hp.n_kv_shared)
    w.add_embedding_length_per_layer_input(hp.n_ple)
    w.add_sliding_window_pattern(list(hp.swa_layers))
    w.add_key_length_swa(hp.head_dim_swa)
    w.add_value_length_swa(hp.head_dim_swa)
    w.add_rope_dimension_count(hp.head_dim_full)
    w.add_rope_dimension_count_swa(hp.n_rot_swa)
    if hp.backbone:
        w.add_embedding_length_out(hp.backbone)
        w.add_nextn_predict_layers(hp.n_layer)
    if hp.n_centroids:
        w.add_uint32(f"{hp.arch}.masked_embd.top_k", hp.centroid_top_k)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)


def _tensors(ckpt: _Checkpoint, plan: list[_TensorSpec], hp: Gemma4HParams) -> Iterator[tuple[str, Any]]:
    yield "rope_freqs.weight", _rope_freqs(hp)
    for spec in plan:
        yield spec.gguf, ckpt.load(spec.hf)
    if (ordering := _ordering_name(hp)) is not None:
        order = ckpt.load_int(ordering)
        if sorted(order.tolist()) != list(range(hp.n_vocab)):
            raise _format(f"tensor {ordering} is not a permutation of the {hp.n_vocab} token ids")
        yield "masked_embd_ordering", order.astype(np.int32)


def convert_gemma4(
    src: Path,
    cfg: Json,
    out: Path,
    outtype: str,
    name: str | None,
    progress: Callable[[int, int, str], None] | None,
) -> ConversionReport:
    """Converts the Gemma 4 (or Gemma 4 assistant) checkpoint ``src`` whose
    config.json is ``cfg`` into ``out``; see :func:`eliza.convert.convert_hf`."""
    _check_outtype(outtype)
    archs = cfg.get("architectures") or []
    arch = "gemma4-assistant" if "Gemma4AssistantForCausalLM" in archs else "gemma4"
    hp = _hparams(cfg, arch)
    ckpt = _Checkpoint(src)
    plan = _tensor_plan(hp)
    _check(ckpt, plan, hp, src)
    vocab = _load_vocab(src, hp, cfg.get("text_config") or cfg)
    total = 1 + len(plan) + (1 if hp.n_centroids else 0)
    file_type, gguf_name = _file_type(outtype), name or src.resolve().name
    return _write_gguf(
        out, hp.arch, hp.n_vocab, lambda w: _add_metadata(w, hp, gguf_name, file_type), vocab,
        _tensors(ckpt, plan, hp), total, outtype, progress,
    )
