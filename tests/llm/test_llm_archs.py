"""libeliza's phi3, gemma2, granite, smollm3, olmo2, and llama and qwen3
with YaRN, against transformers and llama.cpp, on the tiny random checkpoints of
tests/llm/tiny_archs.py converted with ``eliza.convert``.

- F32 logits at every position within 1e-4 of transformers (measured
  <= 7e-6), over 100 tokens (past the 64-token original context of the
  YaRN and LongRoPE models, and 8 Gemma 2 windows).
- The same files' logits within 1e-4 of llama.cpp's at the positions
  tests/data/llm_arch_goldens.json keeps (gemma2: 3e-3, llama.cpp's GELU
  comes from an F16 table; it is that far from transformers too).
- Greedy decoding through the KV cache equals transformers' generate.
- Each quirk matters: transformers without it gives other logits, so the
  comparisons above can fail.

Phi-3's LongRoPE factors follow llama.cpp: long ones when the session's
context exceeds the original one, short ones otherwise (transformers picks
by the sequence's length, so both agree for a 64-token context and for a
100-token sequence in a 256-token one).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

for _module in ("torch", "transformers", "gguf", "safetensors", "sentencepiece", "tokenizers"):
    pytest.importorskip(_module)

import tiny_archs as ta  # noqa: E402
import tiny_models as tm  # noqa: E402

import eliza  # noqa: E402

_spec = importlib.util.spec_from_file_location("make_arch_goldens",
                                               Path(__file__).with_name("make_arch_goldens.py"))
assert _spec and _spec.loader
gen = importlib.util.module_from_spec(_spec)
sys.modules["make_arch_goldens"] = gen
_spec.loader.exec_module(gen)

EXACT = 1e-4
LLAMA_CPP = {"gemma2": 3e-3}


def _logits(variant: str, ids: list[int], context: int = tm.CONTEXT_LENGTH, outtype: str = "f32",
            n_batch: int = 0) -> npt.NDArray[np.float32]:
    with eliza.LLM(ta.gguf_file(variant, outtype), n_threads=2, context_size=context, n_batch=n_batch) as llm:
        return llm.logits(ids, all_positions=True)


@pytest.fixture(scope="module")
def goldens() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gen.GOLDENS.read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("variant", ta.VARIANTS)
def test_logits_match_transformers(variant: str) -> None:
    ids = ta.random_ids(variant, 100, seed=2)
    got = _logits(variant, ids)
    want = ta.reference_logits(variant, ids)
    assert got.shape == want.shape
    assert float(np.abs(got - want).max()) <= EXACT


@pytest.mark.parametrize("variant", ["phi3", "gemma2"])
def test_short_context_and_batches_match_transformers(variant: str) -> None:
    # phi3: a 64-token context takes the short LongRoPE factors; gemma2: the
    # prompt in batches of 16 straddles the 12-token window.
    ids = ta.random_ids(variant, 40, seed=3)
    got = _logits(variant, ids, context=64, n_batch=16)
    assert float(np.abs(got - ta.reference_logits(variant, ids)).max()) <= EXACT


@pytest.mark.parametrize("variant", ta.VARIANTS)
def test_logits_match_llama_cpp(variant: str, goldens: dict[str, Any]) -> None:
    entry = goldens["variants"][variant]
    for seq in entry["sequences"]:
        want = np.frombuffer(base64.b64decode(seq["logits"]), dtype="<f4").reshape(-1, entry["n_vocab"])
        got = _logits(variant, ta.random_ids(variant, seq["n"], seq["seed"]))[seq["positions"]]
        assert float(np.abs(got - want).max()) <= LLAMA_CPP.get(variant, EXACT), (variant, seq["n"])


@pytest.mark.parametrize("variant", ta.VARIANTS)
def test_quantized_logits_stay_close(variant: str) -> None:
    ids = ta.random_ids(variant, 100, seed=1)
    got = _logits(variant, ids, outtype="q8_0")
    want = ta.reference_logits(variant, ids)
    assert float(np.linalg.norm(got - want) / np.linalg.norm(want)) <= 0.08


# Texts that end generation in llama.cpp (and so in libeliza).
EOG_TEXTS = ("</s>", "<eos>", "<end_of_turn>", "<|endoftext|>", "<|im_end|>", "<|end_of_text|>", "<|eot_id|>",
             "<|end|>")


@pytest.mark.parametrize("variant", ta.VARIANTS)
def test_greedy_decoding_matches_transformers(variant: str) -> None:
    # Token by token through the KV cache on both sides, from a prompt past
    # the original context of 64 (so transformers also takes Phi-3's long
    # factors) over many Gemma 2 windows; compared as text through
    # libeliza's detokenizer.
    n_new = 40
    prompt = " ".join(["The people know the water, and they write it down."] * 3)
    with eliza.LLM(ta.gguf_file(variant, "f32"), n_threads=2) as llm:
        prompt_ids = llm.tokenize(prompt)
        assert len(prompt_ids) > ta.ORIGINAL_CONTEXT
        text = llm.generate(prompt, max_tokens=n_new, temperature=0.0)
        eog = set()
        for t in EOG_TEXTS:
            ids = llm.tokenize(t, add_bos=False, special=True)
            if len(ids) == 1:
                eog.add(ids[0])
        want_ids = tm.reference_greedy_of(ta.reference_model(variant), prompt_ids, n_new)
        ended = next((i for i, t in enumerate(want_ids) if t in eog), None)
        want = llm.detokenize(want_ids[:ended] if ended is not None else want_ids)
    assert text.replace("\ufffd", "").lstrip() == want.replace("\ufffd", "").lstrip()


# transformers without each quirk (same weights): the logits must move.
WITHOUT: dict[str, dict[str, Any]] = {
    "phi3": {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                 "partial_rotary_factor": 0.5}},
    "gemma2": {"attn_logit_softcapping": None, "final_logit_softcapping": None},
    "granite": {"embedding_multiplier": 1.0, "residual_multiplier": 1.0, "attention_multiplier": 0.25,
                "logits_scaling": 1.0},
    "smollm3": {"no_rope_layers": [1, 1, 1, 1]},
    "llama-yarn": {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}},
    "qwen3-yarn": {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}},
}


@pytest.mark.parametrize("variant", list(WITHOUT))
def test_each_quirk_matters(variant: str) -> None:
    import torch

    hf = tm._transformers()
    cfg = hf.AutoConfig.from_pretrained(ta.checkpoint(variant))
    for key, value in WITHOUT[variant].items():
        setattr(cfg, key, value)
    plain = hf.AutoModelForCausalLM.from_pretrained(ta.checkpoint(variant), config=cfg, dtype=torch.float32)
    plain.eval()
    ids = ta.random_ids(variant, 100, seed=2)
    with torch.no_grad():
        without = plain(torch.tensor([ids])).logits[0].numpy()
    assert float(np.abs(without - ta.reference_logits(variant, ids)).max()) > 0.05


def test_gemma2_window_matters() -> None:
    import torch

    ids = ta.random_ids("gemma2", 40, seed=3)
    model = ta.reference_model("gemma2")
    saved = model.config.sliding_window
    try:
        model.config.sliding_window = 1 << 20
        with torch.no_grad():
            unwindowed = model(torch.tensor([ids])).logits[0].numpy()
    finally:
        model.config.sliding_window = saved
    assert float(np.abs(unwindowed - ta.reference_logits("gemma2", ids)).max()) > 0.05


@pytest.mark.parametrize("arch, key, value, message", [
    ("granite", "granite.logit_scale", -1.0, "logit_scale"),
    ("gemma2", "gemma2.attn_logit_softcapping", -2.0, "softcapping"),
])
def test_bad_arch_metadata_is_refused(arch: str, key: str, value: float, message: str,
                                      tmp_path: Path) -> None:
    import gguf

    src = gguf.GGUFReader(str(ta.gguf_file(arch, "f32")))
    out = tmp_path / "bad.gguf"
    w = gguf.GGUFWriter(str(out), arch=arch)
    for name, field in src.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == key:
            w.add_float32(name, value)
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            w.add_array(name, field.contents())
        else:
            w.add_key_value(name, field.contents(), vtype)
    for tensor in src.tensors:
        w.add_tensor(tensor.name, np.array(tensor.data), raw_dtype=tensor.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(eliza.ElizaError, match=message):
        eliza.LLM(out)


@pytest.mark.reference
@pytest.mark.parametrize("variant", ta.VARIANTS)
def test_logits_match_live_llama_cpp(variant: str) -> None:
    from tools.libllama import LibLlama

    lib = LibLlama.load()
    if lib is None:
        pytest.skip("llama.cpp is not built (tests/tools/llama_cpp.py)")
    for n, seed in ((100, 5), (150, 6)):
        ids = ta.random_ids(variant, n, seed)
        with lib.model(ta.gguf_file(variant, "f32")) as m:
            want = np.asarray(m.logits(ids, n_ctx=gen.N_CTX), dtype=np.float32)
        got = _logits(variant, ids, context=gen.N_CTX)
        assert float(np.abs(got - want).max()) <= LLAMA_CPP.get(variant, EXACT), (variant, n)


def test_yarn_keys_of_the_file_are_honoured(tmp_path: Path) -> None:
    # beta_slow 2 moves the ramp's end (dim 5 -> 3) and attention_factor
    # replaces 0.1 ln(4) + 1; llama.cpp 0.3.36 ignores both keys,
    # transformers honours them, and so does libeliza.
    import shutil

    import torch

    from eliza.convert import convert_hf

    src = tmp_path / "ck"
    shutil.copytree(ta.checkpoint("llama-yarn"), src)
    cfg = json.loads((src / "config.json").read_text())
    cfg["rope_parameters"].update({"beta_slow": 2.0, "attention_factor": 1.3})
    (src / "config.json").write_text(json.dumps(cfg))
    path = convert_hf(src, tmp_path / "yarn.gguf", "f32").path
    model = tm._transformers().AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    model.eval()
    ids = ta.random_ids("llama-yarn", 100, seed=2)
    with torch.no_grad():
        want = model(torch.tensor([ids])).logits[0].numpy()
    with eliza.LLM(path, n_threads=2) as llm:
        got = llm.logits(ids, all_positions=True)
    assert float(np.abs(got - want).max()) <= EXACT
    assert float(np.abs(want - ta.reference_logits("llama-yarn", ids)).max()) > 0.05
