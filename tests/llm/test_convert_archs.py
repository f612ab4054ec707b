"""eliza.convert hf for phi3, gemma2, granite, smollm3, olmo2 and llama with
YaRN, against llama.cpp's convert_hf_to_gguf.py.

Normal runs compare with tests/data/llm_arch_goldens.json (written by
tests/llm/make_arch_goldens.py from llama.cpp's converter on the same seeded
checkpoints): every architecture and rope key and value, and every tensor's
name, type, shape and bytes (F32) must be llama.cpp's. Tokenizer metadata is
eliza.convert's own (tests/llm/test_convert_hf.py). ``pytest -m reference``
runs llama.cpp's converter live.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

for _module in ("torch", "transformers", "gguf", "safetensors", "sentencepiece", "tokenizers"):
    pytest.importorskip(_module)

import tiny_archs as ta  # noqa: E402

import eliza  # noqa: E402
from eliza.convert import convert_hf  # noqa: E402

_spec = importlib.util.spec_from_file_location("make_arch_goldens",
                                               Path(__file__).with_name("make_arch_goldens.py"))
assert _spec and _spec.loader
gen = importlib.util.module_from_spec(_spec)
sys.modules["make_arch_goldens"] = gen
_spec.loader.exec_module(gen)


@pytest.fixture(scope="module")
def goldens() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gen.GOLDENS.read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("variant", ta.VARIANTS)
def test_gguf_is_llama_cpps(variant: str, goldens: dict[str, Any]) -> None:
    got = gen.manifest(ta.gguf_file(variant, "f32"))
    want = goldens["variants"][variant]["manifest"]
    assert got["kv"] == want["kv"]
    assert sorted(got["tensors"]) == sorted(want["tensors"])
    bad = [n for n in want["tensors"] if got["tensors"][n] != want["tensors"][n]]
    assert not bad, f"{variant}: tensors differ from llama.cpp's: {bad[:5]}"


@pytest.mark.parametrize("variant", ta.VARIANTS)
def test_quantized_outtypes_convert(variant: str, tmp_path: Path) -> None:
    report = convert_hf(ta.checkpoint(variant), tmp_path / "q.gguf", "q8_0")
    assert report.architecture == ta.GGUF_ARCH[variant]
    assert report.tensor_types.get("Q8_0", 0) > 0


def _edited(variant: str, tmp: Path, **changes: Any) -> Path:
    src = ta.checkpoint(variant)
    dst = tmp / variant
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    for key, value in changes.items():
        if key == "rope_parameters":
            cfg[key] = {**cfg.get(key, {}), **value}
        else:
            cfg[key] = value
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


@pytest.mark.parametrize("variant, changes, message", [
    ("smollm3", {"no_rope_layers": [1, 0, 1, 0]}, "no_rope_layers"),
    ("gemma2", {"query_pre_attn_scalar": 64}, "query_pre_attn_scalar"),
    ("gemma2", {"layer_types": ["full_attention"] * 4}, "layer_types"),
    ("phi3", {"rope_parameters": {"short_factor": [1.0, 1.0]}}, "short_factor"),
    ("llama-yarn", {"rope_parameters": {"mscale": 0.7}}, "mscale"),
    ("olmo2", {"rope_parameters": {"rope_type": "yarn", "factor": 2.0}}, "rope scaling 'yarn' on olmo2"),
])
def test_settings_gguf_cannot_express_are_refused(variant: str, changes: dict[str, Any], message: str,
                                                  tmp_path: Path) -> None:
    src = _edited(variant, tmp_path, **changes)
    with pytest.raises(eliza.ElizaError, match=message):
        convert_hf(src, tmp_path / "out.gguf", "f32")
    assert not (tmp_path / "out.gguf").exists()


@pytest.mark.reference
@pytest.mark.parametrize("variant", ta.VARIANTS)
def test_gguf_is_live_llama_cpps(variant: str, tmp_path: Path) -> None:
    from tools.llama_convert import convert
    from tools.llama_cpp import llama_cpp_dir

    if llama_cpp_dir() is None:
        pytest.skip("llama.cpp is not built (tests/tools/llama_cpp.py)")
    ref = convert(ta.checkpoint(variant), tmp_path / "ref.gguf", "f32", gen.BPE_PRE.get(variant))
    assert gen.manifest(ta.gguf_file(variant, "f32")) == gen.manifest(ref)
