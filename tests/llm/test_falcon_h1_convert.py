"""``eliza.convert hf`` on FalconH1 checkpoints: the GGUF llama.cpp's own
converter writes (``falcon-h1`` keys, tensor names and types, every muP
multiplier baked into the weights it scales), the checkpoints it refuses,
and, with the cached llama.cpp build, llama.cpp's ``falcon-h1`` on the file
against transformers on the checkpoint. No libeliza needed.

Measured (llama.cpp 0.3.36, F32 KV cache, flash attention off, 300 tokens):
max |llama.cpp - transformers| 8.2e-6 (falcon_h1, logits up to 4.3),
8.2e-8 (falcon_h1_g2, logits up to 0.18), 5.7e-6 (falcon_h1_s128, up to 2.4).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

for _module in ("torch", "transformers", "gguf", "safetensors", "tokenizers"):
    pytest.importorskip(_module)

import gguf  # noqa: E402
import tiny_models as tm  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

import eliza  # noqa: E402
from eliza.convert import convert_hf  # noqa: E402

Array = npt.NDArray[Any]
F32 = gguf.GGMLQuantizationType.F32


def _config(variant: str) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((tm.checkpoint(variant) / "config.json").read_text())
    return cfg


def _tensors(variant: str, outtype: str = "f32") -> dict[str, Any]:
    return {t.name: t for t in gguf.GGUFReader(tm.gguf_file(variant, outtype)).tensors}


def _values(t: Any) -> Array:
    """A GGUF tensor as float32 in PyTorch's order (outermost first)."""
    return np.asarray(t.data, dtype=np.float32).reshape([int(d) for d in reversed(t.shape)])


def _hf(variant: str) -> dict[str, Array]:
    return dict(load_file(str(tm.checkpoint(variant) / "model.safetensors")))


@pytest.mark.parametrize("variant", tm.FALCON_H1_VARIANTS)
def test_falcon_h1_keys_are_llama_cpps(variant: str) -> None:
    cfg = _config(variant)
    fields = gguf.GGUFReader(tm.gguf_file(variant, "f32")).fields
    a = "falcon-h1"

    def value(key: str) -> Any:
        return fields[key].contents()

    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    assert value("general.architecture") == a
    assert value(f"{a}.ssm.conv_kernel") == 4
    assert value(f"{a}.ssm.inner_size") == cfg["mamba_d_ssm"]
    assert value(f"{a}.ssm.state_size") == cfg["mamba_d_state"]
    assert value(f"{a}.ssm.time_step_rank") == cfg["mamba_n_heads"]
    assert value(f"{a}.ssm.group_count") == cfg["mamba_n_groups"]
    assert value(f"{a}.attention.key_length") == value(f"{a}.attention.value_length") == hd
    assert value(f"{a}.vocab_size") == cfg["vocab_size"]
    assert value(f"{a}.context_length") == tm.FALCON_H1_CONTEXT_LENGTH
    assert value(f"{a}.feed_forward_length") == cfg["intermediate_size"]
    assert math.isclose(value(f"{a}.rope.freq_base"), 100000.0)
    # Baked in: no multiplier reaches the file.
    assert not [k for k in fields if "multiplier" in k or "mup" in k]


@pytest.mark.parametrize("variant", tm.FALCON_H1_VARIANTS)
def test_falcon_h1_tensor_names_shapes_and_types(variant: str) -> None:
    cfg = _config(variant)
    e, ff, n_vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = cfg.get("head_dim") or e // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    d_ssm, h, g, n = cfg["mamba_d_ssm"], cfg["mamba_n_heads"], cfg["mamba_n_groups"], cfg["mamba_d_state"]
    conv = d_ssm + 2 * g * n
    want: dict[str, tuple[int, ...]] = {
        "token_embd.weight": (e, n_vocab), "output_norm.weight": (e,), "output.weight": (e, n_vocab),
    }
    for i in range(cfg["num_hidden_layers"]):
        b = f"blk.{i}."
        want |= {
            b + "attn_norm.weight": (e,), b + "ffn_norm": (e,),
            b + "ssm_in.weight": (e, d_ssm + conv + h), b + "ssm_conv1d.weight": (4, conv),
            b + "ssm_conv1d.bias": (conv,), b + "ssm_dt.bias": (h,), b + "ssm_a": (1, h), b + "ssm_d": (1, h),
            b + "ssm_out.weight": (d_ssm, e),
            b + "attn_q.weight": (e, q), b + "attn_k.weight": (e, kv), b + "attn_v.weight": (e, kv),
            b + "attn_output.weight": (q, e),
            b + "ffn_gate.weight": (e, ff), b + "ffn_up.weight": (e, ff), b + "ffn_down.weight": (ff, e),
        }
        if cfg["mamba_rms_norm"]:
            want[b + "ssm_norm.weight"] = (d_ssm // g, g)
    got = _tensors(variant, "q8_0")
    assert {k: tuple(int(d) for d in t.shape) for k, t in got.items()} == want
    # As llama.cpp's converter: F32 for vectors, norms, the conv kernel and
    # names without ".weight"; the other matrices in the outtype.
    for name, t in got.items():
        small = len(want[name]) == 1 or "norm" in name or "conv1d" in name or not name.endswith(".weight")
        assert (t.tensor_type == F32) == small, name


@pytest.mark.parametrize("variant", tm.FALCON_H1_VARIANTS)
def test_falcon_h1_multipliers_are_baked_into_the_weights(variant: str) -> None:
    cfg, hf, got = _config(variant), _hf(variant), _tensors(variant)
    d_ssm, h = cfg["mamba_d_ssm"], cfg["mamba_n_heads"]
    gn = cfg["mamba_n_groups"] * cfg["mamba_d_state"]
    z, x, b, c, dt = cfg["ssm_multipliers"]
    gate, down = cfg["mlp_multipliers"]
    lm_src = "model.embed_tokens.weight" if cfg["tie_word_embeddings"] else "lm_head.weight"

    def close(name: str, want: Array) -> None:
        np.testing.assert_allclose(_values(got[name]), want, rtol=1e-6, atol=1e-7, err_msg=name)

    close("token_embd.weight", hf["model.embed_tokens.weight"] * cfg["embedding_multiplier"])
    close("output.weight", hf[lm_src] * cfg["lm_head_multiplier"])
    for i in range(cfg["num_hidden_layers"]):
        p, m = f"model.layers.{i}.", f"blk.{i}."
        rows = np.repeat([z, x, b, c, dt], [d_ssm, d_ssm, gn, gn, h]) * cfg["ssm_in_multiplier"]
        close(m + "ssm_in.weight", hf[p + "mamba.in_proj.weight"] * rows[:, None])
        close(m + "ssm_out.weight", hf[p + "mamba.out_proj.weight"] * cfg["ssm_out_multiplier"])
        close(m + "ssm_a", -np.exp(hf[p + "mamba.A_log"])[:, None])
        close(m + "ssm_d", hf[p + "mamba.D"][:, None])
        close(m + "ssm_dt.bias", hf[p + "mamba.dt_bias"])
        # Not flipped: window[0] is the oldest frame in both engines.
        close(m + "ssm_conv1d.weight", hf[p + "mamba.conv1d.weight"][:, 0, :])
        a_in = cfg["attention_in_multiplier"]
        close(m + "attn_q.weight", hf[p + "self_attn.q_proj.weight"] * a_in)
        close(m + "attn_k.weight", hf[p + "self_attn.k_proj.weight"] * a_in * cfg["key_multiplier"])
        close(m + "attn_v.weight", hf[p + "self_attn.v_proj.weight"] * a_in)
        close(m + "attn_output.weight", hf[p + "self_attn.o_proj.weight"] * cfg["attention_out_multiplier"])
        close(m + "ffn_gate.weight", hf[p + "feed_forward.gate_proj.weight"] * gate)
        close(m + "ffn_up.weight", hf[p + "feed_forward.up_proj.weight"])
        close(m + "ffn_down.weight", hf[p + "feed_forward.down_proj.weight"] * down)
        close(m + "ffn_norm", hf[p + "pre_ff_layernorm.weight"])
        if cfg["mamba_rms_norm"]:
            w = hf[p + "mamba.norm.weight"].reshape(cfg["mamba_n_groups"], -1)
            close(m + "ssm_norm.weight", w)


def _edited_copy(variant: str, dst: Path, **config: Any) -> Path:
    shutil.copytree(tm.checkpoint(variant), dst)
    cfg = _config(variant)
    cfg.update(config)
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


@pytest.mark.parametrize(
    ("config", "error", "words"),
    [
        ({"mamba_n_heads": 5}, eliza.FormatError, "SSM inner size 96 is not a multiple of mamba_n_heads 5"),
        ({"mamba_n_groups": 4}, eliza.FormatError, "mamba_n_groups 4 does not divide mamba_n_heads 6"),
        ({"mamba_d_head": 8}, eliza.FormatError, "mamba_d_head 8 x mamba_n_heads 6"),
        ({"mamba_norm_before_gate": True}, eliza.UnsupportedError, "gate first, then normalize"),
        ({"time_step_limit": [0.0, 0.1]}, eliza.UnsupportedError, "do not clamp dt"),
        ({"projectors_bias": True}, eliza.UnsupportedError, "projectors_bias"),
        ({"attention_bias": True}, eliza.UnsupportedError, "attention_bias on falcon-h1"),
        ({"mlp_multipliers": [1.0]}, eliza.FormatError, "mlp_multipliers"),
        ({"mamba_d_state": 32}, eliza.FormatError, r"in_proj\.weight has shape"),
        ({"rope_parameters": {"rope_type": "linear", "rope_theta": 1e5, "factor": 2.0}},
         eliza.UnsupportedError, "rope scaling 'linear' on falcon-h1"),
    ],
)
def test_falcon_h1_refuses_inconsistent_or_inexpressible_configs(
    tmp_path: Path, config: dict[str, Any], error: type[eliza.ElizaError], words: str
) -> None:
    src = _edited_copy("falcon_h1_g2", tmp_path / "ckpt", **config)
    with pytest.raises(error, match=words):
        convert_hf(src, tmp_path / "out.gguf", "f32")
    assert list(tmp_path.glob("out.gguf*")) == []


def test_falcon_h1_refuses_a_checkpoint_missing_a_state_tensor(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    src = _edited_copy("falcon_h1", tmp_path / "ckpt")
    tensors = _hf("falcon_h1")
    del tensors["model.layers.1.mamba.A_log"]
    save_file(tensors, str(src / "model.safetensors"))
    with pytest.raises(eliza.FormatError, match=r"model\.layers\.1\.mamba\.A_log is missing"):
        convert_hf(src, tmp_path / "out.gguf")


@pytest.mark.reference
@pytest.mark.parametrize("variant", tm.FALCON_H1_VARIANTS)
def test_falcon_h1_gguf_in_llama_cpp_matches_transformers(variant: str) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tools.libllama import LibLlama

    lib = LibLlama.load()
    if lib is None:
        pytest.skip("no llama.cpp build (python tests/tools/llama_cpp.py makes it)")
    ids = [int(i) for i in np.random.default_rng(1).integers(0, 500, 300)]
    want = tm.reference_logits(variant, ids)
    with lib.model(tm.gguf_file(variant, "f32")) as m:
        got = np.asarray(m.logits(ids), dtype=np.float32)
    assert got.shape == want.shape
    assert float(np.abs(got - want).max()) <= 5e-5
