"""``eliza.convert hf`` on Gemma 4 text models and Gemma 4 assistant drafters
(tests/llm/gemma4_models.py): the tensors and keys it writes, the values it
stores, what it refuses; under ``-m reference`` the same file against
llama.cpp's own converter and loader. No libeliza needed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

for _module in ("torch", "transformers", "gguf", "safetensors", "sentencepiece", "tokenizers"):
    pytest.importorskip(_module)

import gemma4_models as g4  # noqa: E402
import gguf  # noqa: E402
from safetensors.numpy import load_file, save_file  # noqa: E402

import eliza  # noqa: E402
from eliza.convert import convert_hf  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools.llama_cpp import cache_dir, llama_cpp_dir  # noqa: E402

# Keys llama.cpp's converter writes that depend on its tokenizer reading
# (tokenizer.json as "gemma4" BPE; eliza.convert reads tokenizer.model as
# SentencePiece) or on nothing libeliza reads.
TOKENIZER_KEYS = {
    "tokenizer.ggml.model",
    "tokenizer.ggml.pre",
    "tokenizer.ggml.merges",
    "tokenizer.ggml.add_eos_token",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.scores",
    "tokenizer.ggml.token_type",
}
UNREAD_KEYS = {"general.name", "general.size_label"}


def _reader(variant: str) -> Any:
    return gguf.GGUFReader(g4.gguf_file(variant))


def _fields(reader: Any) -> dict[str, Any]:
    return {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}


def _tensors(reader: Any) -> dict[str, Any]:
    return {t.name: t for t in reader.tensors}


def _hf(variant: str) -> dict[str, Any]:
    return dict(load_file(str(g4.checkpoint(variant) / "model.safetensors")))


def _config(variant: str) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((g4.checkpoint(variant) / "config.json").read_text())
    return cfg


def test_target_keys() -> None:
    got = _fields(_reader("gemma4"))
    want = {
        "general.architecture": "gemma4",
        "gemma4.block_count": 7,
        "gemma4.context_length": 256,
        "gemma4.embedding_length": 64,
        "gemma4.feed_forward_length": 128,
        "gemma4.attention.head_count": 4,
        "gemma4.attention.head_count_kv": 2,
        "gemma4.rope.freq_base": 1e6,
        "gemma4.rope.freq_base_swa": 1e4,
        "gemma4.attention.key_length": 32,
        "gemma4.attention.value_length": 32,
        "gemma4.attention.key_length_swa": 16,
        "gemma4.attention.value_length_swa": 16,
        "gemma4.rope.dimension_count": 32,
        "gemma4.rope.dimension_count_swa": 16,
        "gemma4.final_logit_softcapping": 5.0,
        "gemma4.attention.sliding_window": g4.SLIDING_WINDOW,
        "gemma4.attention.shared_kv_layers": 2,
        "gemma4.embedding_length_per_layer_input": 8,
        "gemma4.attention.sliding_window_pattern": [True, True, False, True, False, True, False],
    }
    for key, value in want.items():
        assert got[key] == pytest.approx(value), key
    assert got["gemma4.attention.layer_norm_rms_epsilon"] == pytest.approx(1e-6)
    assert "gemma4.final_logit_softcapping" not in _fields(_reader("gemma4_plain"))


def test_assistant_keys_carry_the_backbone_width() -> None:
    got = _fields(_reader("gemma4_assistant_masked"))
    assert got["general.architecture"] == "gemma4-assistant"
    arch = "gemma4-assistant."
    # The fork's first lesson: rows the drafter exchanges with the target are
    # the backbone's width (embedding_length_out), not its own.
    assert got[arch + "embedding_length"] == 32
    assert got[arch + "embedding_length_out"] == 64
    assert got[arch + "nextn_predict_layers"] == 2
    assert got[arch + "attention.shared_kv_layers"] == 2
    assert got[arch + "attention.sliding_window_pattern"] == [True, False]
    assert got[arch + "masked_embd.top_k"] == 4
    assert "gemma4-assistant.masked_embd.top_k" not in _fields(_reader("gemma4_assistant"))


@pytest.mark.parametrize("variant", g4.VARIANTS)
def test_every_weight_lands_once_with_its_values(variant: str) -> None:
    """Each checkpoint tensor (but the K/V of shared layers, which have none)
    is one GGUF tensor with the same values (F32 file); the GGUF has only
    those plus rope_freqs."""
    tensors = _tensors(_reader(variant))
    hf = _hf(variant)
    names = {
        "input_layernorm.weight": "attn_norm.weight",
        "self_attn.q_proj.weight": "attn_q.weight",
        "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.v_proj.weight": "attn_v.weight",
        "self_attn.o_proj.weight": "attn_output.weight",
        "self_attn.q_norm.weight": "attn_q_norm.weight",
        "self_attn.k_norm.weight": "attn_k_norm.weight",
        "post_attention_layernorm.weight": "post_attention_norm.weight",
        "pre_feedforward_layernorm.weight": "ffn_norm.weight",
        "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
        "mlp.gate_proj.weight": "ffn_gate.weight",
        "mlp.up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight",
        "per_layer_input_gate.weight": "inp_gate.weight",
        "per_layer_projection.weight": "proj.weight",
        "post_per_layer_input_norm.weight": "post_norm.weight",
        "layer_scalar": "layer_output_scale.weight",
    }
    top = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "model.embed_tokens_per_layer.weight": "per_layer_token_embd.weight",
        "model.per_layer_model_projection.weight": "per_layer_model_proj.weight",
        "model.per_layer_projection_norm.weight": "per_layer_proj_norm.weight",
        "pre_projection.weight": "nextn.pre_projection.weight",
        "post_projection.weight": "nextn.post_projection.weight",
        "masked_embedding.centroids.weight": "masked_embd_centroids.weight",
        "masked_embedding.token_ordering": "masked_embd_ordering",
    }
    seen = {"rope_freqs.weight"}
    for hf_name, value in hf.items():
        if hf_name in top:
            name = top[hf_name]
        else:
            _, _, layer, rest = hf_name.split(".", 3)
            name = f"blk.{layer}.{names[rest]}"
        t = tensors[name]
        got = np.asarray(t.data).reshape(value.shape)
        if name == "masked_embd_ordering":
            assert t.tensor_type == gguf.GGMLQuantizationType.I32
        np.testing.assert_array_equal(got, value.astype(got.dtype), err_msg=name)
        seen.add(name)
    assert set(tensors) == seen


def test_shared_layers_have_no_key_value_weights() -> None:
    tensors = _tensors(_reader("gemma4"))
    for i in range(7):
        has_kv = {f"blk.{i}.attn_k.weight", f"blk.{i}.attn_v.weight", f"blk.{i}.attn_k_norm.weight"} <= set(
            tensors
        )
        assert has_kv == (i < 5), i
    assert not any(
        n.endswith(("attn_k.weight", "attn_v.weight")) for n in _tensors(_reader("gemma4_assistant"))
    )


def test_full_layers_rope_freqs_are_proportional() -> None:
    """rope_freqs.weight divides the angles of the full layers: proportional
    rope (partial 0.25 of global_head_dim 32) rotates 4 of 16 pairs with
    base^(-2i/32) and leaves the rest (divisor 1e30, angle 0)."""
    freqs = np.asarray(_tensors(_reader("gemma4"))["rope_freqs.weight"].data)
    np.testing.assert_array_equal(freqs, np.asarray([1.0] * 4 + [1e30] * 12, np.float32))
    inv = g4.reference_model("gemma4").model.rotary_emb.full_attention_inv_freq.numpy()
    base = 1.0 / 1e6 ** (np.arange(0, 32, 2) / 32)
    np.testing.assert_allclose(np.where(freqs == 1.0, base, 0.0), inv, rtol=1e-6)


def _edited(variant: str, out: Path, drop: str | None = None, **config: Any) -> Path:
    shutil.copytree(g4.checkpoint(variant), out)
    cfg = json.loads((out / "config.json").read_text())
    for key, value in config.items():
        section = cfg["text_config"] if variant in g4.DRAFTERS and key in cfg["text_config"] else cfg
        section[key] = value
    (out / "config.json").write_text(json.dumps(cfg))
    if drop is not None:
        tensors = _hf(variant)
        del tensors[drop]
        save_file(tensors, str(out / "model.safetensors"))
    return out


@pytest.mark.parametrize(
    ("variant", "config", "error", "words"),
    [
        ("gemma4", {"enable_moe_block": True}, eliza.UnsupportedError, "mixture-of-experts"),
        ("gemma4", {"attention_k_eq_v": True}, eliza.UnsupportedError, "attention_k_eq_v"),
        ("gemma4", {"use_double_wide_mlp": True}, eliza.UnsupportedError, "use_double_wide_mlp"),
        ("gemma4", {"hidden_activation": "gelu"}, eliza.UnsupportedError, "hidden_activation"),
        (
            "gemma4",
            {
                "rope_parameters": {
                    "full_attention": {"rope_type": "default", "rope_theta": 1e6},
                    "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                }
            },
            eliza.UnsupportedError,
            "proportional",
        ),
        ("gemma4", {"num_kv_shared_layers": 7}, eliza.FormatError, "num_kv_shared_layers"),
        ("gemma4", {"vocab_size_per_layer_input": 256}, eliza.UnsupportedError, "vocab_size_per_layer_input"),
        ("gemma4_assistant", {"num_kv_shared_layers": 1}, eliza.FormatError, "not all"),
    ],
)
def test_refuses_what_it_cannot_express(
    tmp_path: Path, variant: str, config: dict[str, Any], error: type[eliza.ElizaError], words: str
) -> None:
    src = _edited(variant, tmp_path / "ckpt", **config)
    with pytest.raises(error, match=words):
        convert_hf(src, tmp_path / "out.gguf", "f32")
    assert list(tmp_path.glob("out.gguf*")) == []


def test_refuses_missing_and_misplaced_tensors(tmp_path: Path) -> None:
    src = _edited("gemma4", tmp_path / "a", drop="model.layers.3.self_attn.k_norm.weight")
    with pytest.raises(eliza.FormatError, match=r"model\.layers\.3\.self_attn\.k_norm\.weight is missing"):
        convert_hf(src, tmp_path / "a.gguf")
    src = _edited("gemma4_assistant_masked", tmp_path / "b", drop="masked_embedding.token_ordering")
    with pytest.raises(eliza.FormatError, match="token_ordering is missing"):
        convert_hf(src, tmp_path / "b.gguf")


def test_refuses_an_ordering_that_is_no_permutation(tmp_path: Path) -> None:
    src = _edited("gemma4_assistant_masked", tmp_path / "ckpt")
    tensors = _hf("gemma4_assistant_masked")
    tensors["masked_embedding.token_ordering"] = np.zeros(512, np.int64)
    save_file(tensors, str(src / "model.safetensors"))
    with pytest.raises(eliza.FormatError, match="not a permutation"):
        convert_hf(src, tmp_path / "out.gguf")


def test_quantized_outtypes_keep_vectors_f32() -> None:
    reader = gguf.GGUFReader(
        convert_hf(g4.checkpoint("gemma4"), g4.gguf_file("gemma4").with_name("gemma4-q8.gguf"), "q8_0").path
    )
    for t in reader.tensors:
        want = "F32" if len(t.shape) == 1 else ("Q8_0" if int(t.shape[0]) % 32 == 0 else "F16")
        assert t.tensor_type.name == want, t.name


# ---------------------------------------------------------------------------
# llama.cpp (python tests/tools/llama_cpp.py builds it)
# ---------------------------------------------------------------------------


def _llama_cpp() -> Path:
    root = llama_cpp_dir()
    if root is None:
        pytest.skip("llama.cpp is not built (python tests/tools/llama_cpp.py)")
    return root


@pytest.mark.reference
@pytest.mark.parametrize("variant", g4.VARIANTS)
def test_llama_cpp_converter_writes_the_same_file(tmp_path: Path, variant: str) -> None:
    """llama.cpp's convert_hf_to_gguf.py on the same checkpoint: the same
    keys and values (but the tokenizer's and general.name) and the same
    tensors with the same bytes, except the masked embedding it drops."""
    src = _llama_cpp() / "src"
    out = tmp_path / "llama.gguf"
    subprocess.run(
        [
            sys.executable,
            str(src / "convert_hf_to_gguf.py"),
            str(g4.checkpoint(variant)),
            "--outfile",
            str(out),
            "--outtype",
            "f32",
        ],
        check=True,
        capture_output=True,
        env={"PYTHONPATH": str(src / "gguf-py"), "PATH": "/usr/bin:/bin"},
    )
    theirs, ours = gguf.GGUFReader(out), _reader(variant)
    skip = TOKENIZER_KEYS | UNREAD_KEYS
    a = {k: v for k, v in _fields(theirs).items() if k not in skip}
    b = {k: v for k, v in _fields(ours).items() if k not in skip}
    extra = {"gemma4-assistant.masked_embd.top_k"} if variant == "gemma4_assistant_masked" else set()
    assert set(b) == set(a) | extra
    for key in a:
        assert a[key] == pytest.approx(b[key]), key
    t_theirs, t_ours = _tensors(theirs), _tensors(ours)
    masked = (
        {"masked_embd_centroids.weight", "masked_embd_ordering"}
        if variant == "gemma4_assistant_masked"
        else set()
    )
    assert set(t_ours) == set(t_theirs) | masked
    for name, t in t_theirs.items():
        assert t.tensor_type == t_ours[name].tensor_type, name
        np.testing.assert_array_equal(np.asarray(t.data), np.asarray(t_ours[name].data), err_msg=name)


@pytest.mark.reference
@pytest.mark.parametrize("variant", g4.VARIANTS)
def test_llama_cpp_loads_the_file(variant: str) -> None:
    from tools.llama_logits import llama_loads

    _llama_cpp()
    result = llama_loads(g4.gguf_file(variant))
    assert result is not None
    ok, err = result
    # llama.cpp 0.3.36 declares masked_embd_* without a shape and cannot
    # load a file that has them (its converter drops them).
    assert ok == (variant != "gemma4_assistant_masked"), err


@pytest.mark.reference
@pytest.mark.parametrize("variant", g4.TARGETS)
def test_llama_cpp_logits_follow_transformers(variant: str) -> None:
    """llama.cpp's gemma4 on the file against transformers over 160
    positions. Its CPU path is not float32-exact on this machine (the
    difference is 1e-3 already on the tiny gemma3; here a final-norm-only
    ablation of the model differs by 3e-4 relative, the size of an F16
    rounding), so the bound is loose; transformers agrees with a float64
    forward in numpy to 1e-6."""
    from tools.llama_logits import llama_logits

    _llama_cpp()
    ids = g4.random_ids(160, 11)
    want = g4.reference_logits(variant, ids)
    got = llama_logits(g4.gguf_file(variant), ids)
    assert float(np.linalg.norm(got - want) / np.linalg.norm(want)) < 5e-3
    assert float(np.mean(got.argmax(1) == want.argmax(1))) >= 0.98
    print(f"{variant}: max |llama.cpp - transformers| {np.abs(got - want).max():.4f} ({cache_dir()})")
