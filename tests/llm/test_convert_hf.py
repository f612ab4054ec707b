"""``eliza.convert hf``: the GGUF it writes for each architecture (tensor
names, shapes, metadata, tokenizer), the values it stores (read back with
gguf.GGUFReader), the llama Q/K row order, the checkpoint layouts it reads,
and the checkpoints it refuses. No libeliza needed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

for _module in ("torch", "transformers", "gguf", "safetensors", "sentencepiece", "tokenizers"):
    pytest.importorskip(_module)

import gguf  # noqa: E402
import tiny_models as tm  # noqa: E402
from gguf.quants import dequantize, quantize  # noqa: E402
from safetensors.numpy import load_file, save_file  # noqa: E402

import eliza  # noqa: E402
from eliza.convert import convert_hf  # noqa: E402

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
Array = npt.NDArray[Any]


def _reader(variant: str, outtype: str = "f32") -> Any:
    return gguf.GGUFReader(tm.gguf_file(variant, outtype))


def _field(reader: Any, key: str) -> Any:
    return reader.fields[key].contents()


def _config(variant: str) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((tm.checkpoint(variant) / "config.json").read_text())
    return cfg


def _hf_tensors(variant: str) -> dict[str, Array]:
    return dict(load_file(str(tm.checkpoint(variant) / "model.safetensors")))


def _expected_shapes(variant: str) -> dict[str, tuple[int, ...]]:
    """GGUF tensor name -> shape as GGUF lists it (innermost first)."""
    cfg = _config(variant)
    arch = tm.GGUF_ARCH[variant]
    e, ff, n_vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = cfg.get("head_dim") or e // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    out: dict[str, tuple[int, ...]] = {"token_embd.weight": (e, n_vocab), "output_norm.weight": (e,)}
    if not cfg["tie_word_embeddings"]:
        out["output.weight"] = (e, n_vocab)
    if variant == "llama3":
        out["rope_freqs.weight"] = (hd // 2,)
    for i in range(cfg["num_hidden_layers"]):
        b = f"blk.{i}."
        out.update(
            {
                b + "attn_norm.weight": (e,),
                b + "attn_q.weight": (e, q),
                b + "attn_k.weight": (e, kv),
                b + "attn_v.weight": (e, kv),
                b + "attn_output.weight": (q, e),
                b + "ffn_norm.weight": (e,),
                b + "ffn_gate.weight": (e, ff),
                b + "ffn_up.weight": (e, ff),
                b + "ffn_down.weight": (ff, e),
            }
        )
        if arch == "qwen2":
            out.update({b + "attn_q.bias": (q,), b + "attn_k.bias": (kv,), b + "attn_v.bias": (kv,)})
        if arch in ("qwen3", "gemma3"):
            out.update({b + "attn_q_norm.weight": (hd,), b + "attn_k_norm.weight": (hd,)})
        if arch == "gemma3":
            out.update({b + "post_attention_norm.weight": (e,), b + "post_ffw_norm.weight": (e,)})
    return out


def _llama_rope_rows(n_head: int, head_dim: int) -> list[int]:
    """GGUF row r of a llama q/k matrix is HF row _llama_rope_rows(...)[r]:
    within a head, GGUF interleaves the pairs (i, i + d/2) HF keeps apart."""
    return [
        h * head_dim + (j // 2) + (j % 2) * (head_dim // 2) for h in range(n_head) for j in range(head_dim)
    ]


def _expected_values(variant: str, hf_tensors: dict[str, Array] | None = None) -> dict[str, Array]:
    """GGUF tensor name -> float32 values in numpy order, derived from the
    checkpoint's tensors (or ``hf_tensors``) by the rules docs/convert.md
    states."""
    cfg = _config(variant)
    arch = tm.GGUF_ARCH[variant]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    names = {
        "input_layernorm.weight": "attn_norm.weight",
        "self_attn.q_proj.weight": "attn_q.weight",
        "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.v_proj.weight": "attn_v.weight",
        "self_attn.o_proj.weight": "attn_output.weight",
        "self_attn.q_proj.bias": "attn_q.bias",
        "self_attn.k_proj.bias": "attn_k.bias",
        "self_attn.v_proj.bias": "attn_v.bias",
        "self_attn.q_norm.weight": "attn_q_norm.weight",
        "self_attn.k_norm.weight": "attn_k_norm.weight",
        "mlp.gate_proj.weight": "ffn_gate.weight",
        "mlp.up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight",
        "post_attention_layernorm.weight": "post_attention_norm.weight"
        if arch == "gemma3"
        else "ffn_norm.weight",
        "pre_feedforward_layernorm.weight": "ffn_norm.weight",
        "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
    }
    out: dict[str, Array] = {}
    for hf_name, value in (hf_tensors if hf_tensors is not None else _hf_tensors(variant)).items():
        if hf_name == "model.embed_tokens.weight":
            name = "token_embd.weight"
        elif hf_name == "model.norm.weight":
            name = "output_norm.weight"
        elif hf_name == "lm_head.weight":
            name = "output.weight"
        else:
            _, _, layer, rest = hf_name.split(".", 3)
            name = f"blk.{layer}.{names[rest]}"
        value = value.astype(np.float32)
        if arch == "gemma3" and name.endswith("norm.weight"):
            value = value + 1.0
        if arch == "llama" and name.endswith(("attn_q.weight", "attn_k.weight")):
            heads = cfg["num_attention_heads"] if "attn_q" in name else cfg["num_key_value_heads"]
            value = value[_llama_rope_rows(heads, hd)]
        out[name] = value
    return out


# ---------------------------------------------------------------------------
# Names, shapes, metadata
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("variant", tm.VARIANTS)
def test_tensor_names_and_shapes(variant: str) -> None:
    reader = _reader(variant)
    got = {t.name: tuple(int(d) for d in t.shape) for t in reader.tensors}
    assert got == _expected_shapes(variant)


@pytest.mark.parametrize("variant", tm.VARIANTS)
def test_hyperparameter_keys(variant: str) -> None:
    reader = _reader(variant, "q8_0")
    cfg = _config(variant)
    arch = tm.GGUF_ARCH[variant]
    rope = cfg["rope_parameters"]
    want: dict[str, Any] = {
        "general.architecture": arch,
        "general.type": "model",
        "general.file_type": int(gguf.LlamaFileType.MOSTLY_Q8_0),
        "general.quantization_version": 2,
        f"{arch}.context_length": tm.CONTEXT_LENGTH,
        f"{arch}.embedding_length": 64,
        f"{arch}.feed_forward_length": 128,
        f"{arch}.block_count": cfg["num_hidden_layers"],
        f"{arch}.attention.head_count": 4,
        f"{arch}.attention.head_count_kv": 2,
        f"{arch}.rope.freq_base": rope["full_attention"]["rope_theta"]
        if arch == "gemma3"
        else rope["rope_theta"],
    }
    if "head_dim" in cfg:
        want[f"{arch}.attention.key_length"] = want[f"{arch}.attention.value_length"] = cfg["head_dim"]
    if arch == "llama":
        want["llama.vocab_size"] = cfg["vocab_size"]
        want["llama.rope.dimension_count"] = cfg["head_dim"]
    if arch == "gemma3":
        want["gemma3.attention.sliding_window"] = tm.GEMMA3_SLIDING_WINDOW
    for key, value in want.items():
        assert _field(reader, key) == pytest.approx(value), key
    assert _field(reader, f"{arch}.attention.layer_norm_rms_epsilon") == pytest.approx(1e-6)
    arch_keys = {k for k in reader.fields if k.startswith(arch + ".")}
    assert arch_keys == {k for k in want if k.startswith(arch + ".")} | {
        f"{arch}.attention.layer_norm_rms_epsilon"
    }


def test_outtype_sets_file_type_and_tensor_types() -> None:
    for outtype, file_type, matrix_type in (
        ("f32", gguf.LlamaFileType.ALL_F32, "F32"),
        ("f16", gguf.LlamaFileType.MOSTLY_F16, "F16"),
        ("bf16", gguf.LlamaFileType.MOSTLY_BF16, "BF16"),
        ("q8_0", gguf.LlamaFileType.MOSTLY_Q8_0, "Q8_0"),
    ):
        reader = _reader("qwen2", outtype)
        assert _field(reader, "general.file_type") == int(file_type)
        for t in reader.tensors:
            assert t.tensor_type.name == (matrix_type if len(t.shape) == 2 else "F32"), t.name


# ---------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("variant", tm.VARIANTS)
def test_f32_values_round_trip(variant: str) -> None:
    tensors = {t.name: t for t in _reader(variant).tensors}
    for name, want in _expected_values(variant).items():
        got = np.asarray(tensors[name].data).reshape(want.shape)
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("outtype", ["f16", "bf16", "q8_0"])
def test_rounded_values_are_the_gguf_rounding_of_the_weights(outtype: str) -> None:
    tensors = {t.name: t for t in _reader("gemma3", outtype).tensors}
    qtype = gguf.GGMLQuantizationType[outtype.upper()]
    for name, want in _expected_values("gemma3").items():
        t = tensors[name]
        got = dequantize(np.asarray(t.data), t.tensor_type).reshape(want.shape)
        if want.ndim == 1:
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            np.testing.assert_array_equal(
                got, dequantize(quantize(want, qtype), qtype).reshape(want.shape), err_msg=name
            )
            assert np.abs(got - want).max() <= 0.01 * np.abs(want).max(), name


def test_llama_q_and_k_rows_are_interleaved_per_head() -> None:
    cfg = _config("llama")
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    hf = _hf_tensors("llama")
    tensors = {t.name: np.asarray(t.data) for t in _reader("llama").tensors}
    for gguf_name, hf_name, n_head in (
        ("attn_q", "q_proj", cfg["num_attention_heads"]),
        ("attn_k", "k_proj", cfg["num_key_value_heads"]),
    ):
        got, src = tensors[f"blk.0.{gguf_name}.weight"], hf[f"model.layers.0.self_attn.{hf_name}.weight"]
        for h in range(n_head):
            for i in range(hd // 2):
                np.testing.assert_array_equal(got[h * hd + 2 * i], src[h * hd + i])
                np.testing.assert_array_equal(got[h * hd + 2 * i + 1], src[h * hd + hd // 2 + i])
    # V is not rotated and keeps HF's order.
    np.testing.assert_array_equal(
        tensors["blk.0.attn_v.weight"], hf["model.layers.0.self_attn.v_proj.weight"]
    )


def test_llama_q_and_k_biases_are_permuted_like_their_rows(tmp_path: Path) -> None:
    src = tm.build("llama", tmp_path / "ckpt", seed=5, attention_bias=True)
    reader = gguf.GGUFReader(convert_hf(src, tmp_path / "out.gguf", "f32").path)
    tensors = {t.name: np.asarray(t.data) for t in reader.tensors}
    hf = dict(load_file(str(src / "model.safetensors")))
    rows = _llama_rope_rows(4, 16)
    np.testing.assert_array_equal(
        tensors["blk.1.attn_q.bias"], hf["model.layers.1.self_attn.q_proj.bias"][rows]
    )
    np.testing.assert_array_equal(
        tensors["blk.1.attn_k.bias"], hf["model.layers.1.self_attn.k_proj.bias"][_llama_rope_rows(2, 16)]
    )
    np.testing.assert_array_equal(tensors["blk.1.attn_v.bias"], hf["model.layers.1.self_attn.v_proj.bias"])
    np.testing.assert_array_equal(
        tensors["blk.1.attn_output.bias"], hf["model.layers.1.self_attn.o_proj.bias"]
    )


def test_llama3_rope_freqs_reproduce_transformers_frequencies() -> None:
    cfg = _config("llama3")
    hd = cfg["head_dim"]
    base = cfg["rope_parameters"]["rope_theta"]
    plain = 1.0 / base ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    factors = np.asarray(next(t.data for t in _reader("llama3").tensors if t.name == "rope_freqs.weight"))
    scaled = tm.reference_model("llama3").model.rotary_emb.inv_freq.numpy()
    np.testing.assert_allclose(plain / factors, scaled, rtol=1e-6)
    assert factors.min() == 1.0 and factors.max() == 8.0  # both ends of the blend occur


# ---------------------------------------------------------------------------
# Tokenizer metadata
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["llama", "gemma3"])
def test_sentencepiece_vocabulary(variant: str) -> None:
    import sentencepiece as spm

    reader = _reader(variant)
    sp = spm.SentencePieceProcessor(model_file=str(tm.checkpoint(variant) / "tokenizer.model"))
    tokens, scores = _field(reader, "tokenizer.ggml.tokens"), _field(reader, "tokenizer.ggml.scores")
    types = _field(reader, "tokenizer.ggml.token_type")
    assert len(tokens) == len(scores) == len(types) == sp.get_piece_size()
    assert _field(reader, "tokenizer.ggml.model") == "llama"
    assert _field(reader, "tokenizer.ggml.pre") == "default"
    gemma = variant == "gemma3"
    added = {
        int(a["id"]): a
        for a in json.loads((tm.checkpoint(variant) / "tokenizer.json").read_text())["added_tokens"]
    }
    for i in range(sp.get_piece_size()):
        assert tokens[i] == sp.id_to_piece(i)
        if i in added:  # added tokens: CONTROL when special, else USER_DEFINED (llama.cpp's rule)
            assert types[i] == (CONTROL if added[i]["special"] else USER_DEFINED)
            assert scores[i] == -1000.0
        else:
            assert scores[i] == pytest.approx(sp.get_score(i))
            user = gemma and tokens[i] in tm.GEMMA3_USER_DEFINED
            assert types[i] == (
                BYTE if sp.is_byte(i) else CONTROL if sp.is_control(i) else USER_DEFINED if user else NORMAL
            )
    special = {"bos": 2, "eos": 1, "unk": 3, "pad": 0, "mask": 4} if gemma else {"bos": 1, "eos": 2, "unk": 0}
    key = {"unk": "unknown", "pad": "padding"}
    for name, tid in special.items():
        assert _field(reader, f"tokenizer.ggml.{key.get(name, name)}_token_id") == tid
    if gemma:  # as in Gemma's own GGUF files
        assert types[tokens.index("<start_of_turn>")] == CONTROL
        assert types[tokens.index("[multimodal]")] == USER_DEFINED
    assert _field(reader, "tokenizer.ggml.add_bos_token") is True
    assert _field(reader, "tokenizer.ggml.add_eos_token") is False
    assert _field(reader, "tokenizer.ggml.add_space_prefix") is (not gemma)


@pytest.mark.parametrize("variant", ["llama3", "qwen2", "qwen3"])
def test_byte_level_bpe_vocabulary(variant: str) -> None:
    reader = _reader(variant)
    tok = json.loads((tm.checkpoint(variant) / "tokenizer.json").read_text())
    n_vocab = _config(variant)["vocab_size"]
    want = ["" for _ in range(n_vocab)]
    for text, tid in tok["model"]["vocab"].items():
        want[tid] = text
    for a in tok["added_tokens"]:
        want[a["id"]] = a["content"]
    pads = [i for i, t in enumerate(want) if not t]
    for i in pads:
        want[i] = f"[PAD{i}]"
    tokens, types = _field(reader, "tokenizer.ggml.tokens"), _field(reader, "tokenizer.ggml.token_type")
    assert tokens == want
    special = {a["id"] for a in tok["added_tokens"]}
    assert types == [UNUSED if i in pads else CONTROL if i in special else NORMAL for i in range(n_vocab)]
    assert (pads == list(range(400, 416))) == (variant == "qwen2")
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    assert _field(reader, "tokenizer.ggml.merges") == merges
    assert _field(reader, "tokenizer.ggml.model") == "gpt2"
    assert _field(reader, "tokenizer.ggml.pre") == ("llama-bpe" if variant == "llama3" else "qwen2")
    assert "tokenizer.ggml.scores" not in reader.fields
    if variant == "llama3":
        assert _field(reader, "tokenizer.ggml.bos_token_id") == tokens.index("<|begin_of_text|>")
        assert _field(reader, "tokenizer.ggml.eos_token_id") == tokens.index("<|end_of_text|>")
        assert _field(reader, "tokenizer.ggml.add_bos_token") is True
    else:
        assert "tokenizer.ggml.bos_token_id" not in reader.fields
        assert _field(reader, "tokenizer.ggml.eos_token_id") == tokens.index("<|endoftext|>")
        assert _field(reader, "tokenizer.ggml.padding_token_id") == tokens.index("<|endoftext|>")
        assert _field(reader, "tokenizer.ggml.add_bos_token") is False
    assert _field(reader, "tokenizer.ggml.add_eos_token") is False


def test_chat_template_is_carried_over(tmp_path: Path) -> None:
    src = tmp_path / "ckpt"
    shutil.copytree(tm.checkpoint("qwen3"), src)
    template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    (src / "chat_template.jinja").write_text(template)
    reader = gguf.GGUFReader(convert_hf(src, tmp_path / "out.gguf", "q8_0").path)
    assert _field(reader, "tokenizer.chat_template") == template


# ---------------------------------------------------------------------------
# Checkpoint layouts
# ---------------------------------------------------------------------------


def _tensor_bytes(path: Path) -> dict[str, bytes]:
    return {t.name: bytes(np.asarray(t.data).tobytes()) for t in gguf.GGUFReader(path).tensors}


def _copy_without_weights(variant: str, dst: Path) -> Path:
    shutil.copytree(tm.checkpoint(variant), dst, ignore=shutil.ignore_patterns("*.safetensors*"))
    return dst


def test_sharded_safetensors_give_the_same_file(tmp_path: Path) -> None:
    src = _copy_without_weights("qwen3", tmp_path / "ckpt")
    model = tm.reference_model("qwen3")
    model.save_pretrained(src, max_shard_size="40KB")
    assert len(list(src.glob("model-*.safetensors"))) > 1 and (src / "model.safetensors.index.json").is_file()
    out = convert_hf(src, tmp_path / "out.gguf", "q8_0").path
    assert _tensor_bytes(out) == _tensor_bytes(tm.gguf_file("qwen3", "q8_0"))


def test_bf16_safetensors_are_read_without_torch_dtypes(tmp_path: Path) -> None:
    import torch
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    src = _copy_without_weights("gemma3", tmp_path / "ckpt")
    AutoModelForCausalLM.from_pretrained(tm.checkpoint("gemma3"), dtype=torch.bfloat16).save_pretrained(src)
    with safe_open(str(src / "model.safetensors"), framework="numpy") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"BF16"}  # noqa: SIM118
    bf16 = {
        k: torch.from_numpy(v).to(torch.bfloat16).float().numpy() for k, v in _hf_tensors("gemma3").items()
    }
    tensors = {
        t.name: np.asarray(t.data)
        for t in gguf.GGUFReader(convert_hf(src, tmp_path / "out.gguf", "f32").path).tensors
    }
    for name, want in _expected_values("gemma3", bf16).items():
        np.testing.assert_array_equal(tensors[name].reshape(want.shape), want, err_msg=name)


def test_pytorch_model_bin_gives_the_same_file(tmp_path: Path) -> None:
    import torch

    src = _copy_without_weights("llama", tmp_path / "ckpt")
    torch.save({k: torch.from_numpy(v) for k, v in _hf_tensors("llama").items()}, src / "pytorch_model.bin")
    out = convert_hf(src, tmp_path / "out.gguf", "f16").path
    assert _tensor_bytes(out) == _tensor_bytes(tm.gguf_file("llama", "f16"))


def test_conversion_needs_no_torch(tmp_path: Path) -> None:
    script = (
        "import sys; sys.modules['torch'] = None\n"  # any 'import torch' now fails
        "from eliza.convert import convert_hf\n"
        f"convert_hf({str(tm.checkpoint('gemma3'))!r}, {str(tmp_path / 'out.gguf')!r}, 'q8_0')\n"
        "assert 'transformers' not in sys.modules\n"
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(Path(eliza.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]),
    )
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert _tensor_bytes(tmp_path / "out.gguf") == _tensor_bytes(tm.gguf_file("gemma3", "q8_0"))


# ---------------------------------------------------------------------------
# Refusals
# ---------------------------------------------------------------------------


def _edited_copy(variant: str, dst: Path, **config: Any) -> Path:
    shutil.copytree(tm.checkpoint(variant), dst)
    cfg = _config(variant)
    cfg.update(config)
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


@pytest.mark.parametrize(
    ("variant", "config", "error", "words"),
    [
        ("llama", {"architectures": ["MistralForCausalLM"]}, eliza.UnsupportedError, "MistralForCausalLM"),
        ("llama", {"intermediate_size": 96}, eliza.FormatError, "gate_proj.weight has shape"),
        ("llama", {"hidden_act": "gelu"}, eliza.UnsupportedError, "activation"),
        (
            "qwen2",
            {"rope_parameters": {"rope_type": "dynamic", "rope_theta": 1e6, "factor": 4.0}},
            eliza.UnsupportedError,
            "dynamic",
        ),
        ("qwen2", {"use_sliding_window": True}, eliza.UnsupportedError, "use_sliding_window"),
        ("gemma3", {"layer_types": ["full_attention"] * 7}, eliza.UnsupportedError, "layer_types"),
        ("gemma3", {"query_pre_attn_scalar": 64}, eliza.UnsupportedError, "query_pre_attn_scalar"),
        ("gemma3", {"final_logit_softcapping": 30.0}, eliza.UnsupportedError, "softcapping"),
        ("qwen3", {"vocab_size": 300}, eliza.FormatError, r"embed_tokens\.weight has shape \[400, 64\]"),
    ],
)
def test_refuses_what_gguf_readers_would_misread(
    tmp_path: Path, variant: str, config: dict[str, Any], error: type[eliza.ElizaError], words: str
) -> None:
    src = _edited_copy(variant, tmp_path / "ckpt", **config)
    out = tmp_path / "out.gguf"
    with pytest.raises(error, match=words):
        convert_hf(src, out, "f32")
    assert list(tmp_path.glob("out.gguf*")) == []


def test_refuses_a_checkpoint_missing_a_tensor(tmp_path: Path) -> None:
    src = _copy_without_weights("qwen3", tmp_path / "ckpt")
    tensors = _hf_tensors("qwen3")
    del tensors["model.layers.2.self_attn.k_norm.weight"]
    save_file(tensors, str(src / "model.safetensors"))
    with pytest.raises(eliza.FormatError, match=r"model\.layers\.2\.self_attn\.k_norm\.weight is missing"):
        convert_hf(src, tmp_path / "out.gguf")


def test_refuses_a_tokenizer_larger_than_the_vocabulary(tmp_path: Path) -> None:
    src = tmp_path / "ckpt"
    shutil.copytree(tm.checkpoint("qwen3"), src)
    tok = json.loads((src / "tokenizer.json").read_text())
    tok["added_tokens"].append({"id": 400, "content": "<|extra|>", "special": True})
    (src / "tokenizer.json").write_text(json.dumps(tok))
    with pytest.raises(eliza.FormatError, match=re.escape("'<|extra|>' has id 400 >= vocab_size 400")):
        convert_hf(src, tmp_path / "out.gguf")


def test_a_corrupt_sentencepiece_model_is_a_format_error(tmp_path: Path) -> None:
    src = tmp_path / "ckpt"
    shutil.copytree(tm.checkpoint("llama"), src)
    model = src / "tokenizer.model"
    model.write_bytes(model.read_bytes()[:1000])  # cut inside a piece
    with pytest.raises(eliza.FormatError, match="truncated or malformed protobuf"):
        convert_hf(src, tmp_path / "out.gguf")


def test_sentencepiece_needs_the_convert_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkpoint = tm.checkpoint("llama")  # built (with sentencepiece) first
    monkeypatch.setitem(sys.modules, "sentencepiece", None)  # import sentencepiece raises ImportError
    with pytest.raises(eliza.UnsupportedError, match=r"libeliza\[convert\]"):
        convert_hf(checkpoint, tmp_path / "out.gguf")


def test_refuses_a_tensor_it_cannot_place(tmp_path: Path) -> None:
    src = _copy_without_weights("qwen3", tmp_path / "ckpt")
    tensors = _hf_tensors("qwen3")
    tensors["model.layers.0.mlp.experts.gate"] = np.zeros((4, 64), np.float32)
    save_file(tensors, str(src / "model.safetensors"))
    with pytest.raises(eliza.UnsupportedError, match="experts"):
        convert_hf(src, tmp_path / "out.gguf")


def test_missing_files_and_bad_outtype(tmp_path: Path) -> None:
    with pytest.raises(eliza.ElizaIOError, match=r"config\.json"):
        convert_hf(tmp_path, tmp_path / "out.gguf")
    with pytest.raises(eliza.UnsupportedError, match="q4_k"):
        convert_hf(tm.checkpoint("llama"), tmp_path / "out.gguf", "q4_k")
    src = _copy_without_weights("llama", tmp_path / "ckpt")
    with pytest.raises(eliza.ElizaIOError, match=r"no model\.safetensors"):
        convert_hf(src, tmp_path / "out.gguf")


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(Path(eliza.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]),
    )
    return subprocess.run(
        [sys.executable, "-m", "eliza.convert", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_python_m_eliza_convert_hf(tmp_path: Path) -> None:
    out = tmp_path / "tiny.gguf"
    result = _run("hf", str(tm.checkpoint("qwen2")), str(out), "--outtype", "q8_0", "--name", "tiny qwen")
    assert result.returncode == 0, result.stderr
    assert f"{out}: qwen2, 26 tensors (11 F32, 15 Q8_0)" in result.stdout
    reader = gguf.GGUFReader(out)
    assert _field(reader, "general.name") == "tiny qwen"
    assert _tensor_bytes(out) == _tensor_bytes(tm.gguf_file("qwen2", "q8_0"))


def test_python_m_eliza_convert_reports_errors(tmp_path: Path) -> None:
    result = _run("hf", str(tmp_path / "nowhere"), str(tmp_path / "out.gguf"))
    assert result.returncode == 1
    assert result.stderr.startswith("eliza.convert: error: ") and "config.json" in result.stderr
