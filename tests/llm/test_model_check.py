"""``eliza.check_model`` / ``eliza info MODEL.gguf``: whether this build can
run a language model, told before loading it, and what it lacks if not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import eliza

gguf = pytest.importorskip("gguf")

REPO = Path(__file__).resolve().parents[2]


def _write(path: Path, arch: str, pre: str = "qwen2", tensor_type: Any = None,
           merges: list[str] | None = None) -> Path:
    tokens = ["a", "b", "ab", "<|endoftext|>"]
    w = gguf.GGUFWriter(str(path), arch=arch)
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.NORMAL] * 3 + [gguf.TokenType.CONTROL])
    w.add_token_merges(merges if merges is not None else ["a b"])
    w.add_eos_token_id(3)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}")
    for name in ("token_embd.weight", "blk.0.attn_q.weight"):
        if tensor_type is None:
            w.add_tensor(name, np.zeros((4, 256), np.float32))
        else:
            block, size = gguf.GGML_QUANT_SIZES[tensor_type]
            w.add_tensor(name, np.zeros((4, 256 // block * size), np.uint8), raw_dtype=tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _type_without_kernels() -> Any:
    have = set(eliza.capabilities()["quant_types"])
    for qt in gguf.GGMLQuantizationType:
        integer = qt.name in ("I8", "I16", "I32", "I64", "F64")
        if qt.name not in have and qt in gguf.GGML_QUANT_SIZES and not integer:
            return qt
    return None


def test_gemma_runs(gemma_path: Path) -> None:
    c = eliza.check_model(gemma_path)
    assert c.runnable and c.missing == ()
    assert (c.architecture, c.tokenizer, c.pre_tokenizer) == ("gemma3", "llama", "default")
    assert c.chat_template is None


def test_a_runnable_small_file(tmp_path: Path) -> None:
    c = eliza.check_model(_write(tmp_path / "ok.gguf", "qwen2"))
    assert c.runnable, c.missing
    assert c.chat_template == "chatml"


def test_what_is_missing_is_named(tmp_path: Path) -> None:
    qt = _type_without_kernels()
    c = eliza.check_model(_write(tmp_path / "bad.gguf", "no-such-arch", pre="no-such-pre", tensor_type=qt))
    assert not c.runnable
    assert any("architecture 'no-such-arch' (this build runs" in m and "gemma3" in m for m in c.missing)
    assert any("BPE pre-tokenizer 'no-such-pre' is not supported" in m for m in c.missing)
    if qt is not None:
        assert any(f"kernels for tensor type {qt.name} ('token_embd.weight' and others: 2 tensors)" in m
                   for m in c.missing)
        assert len(c.missing) == 3
    else:
        assert len(c.missing) == 2


def test_bad_merges_are_named(tmp_path: Path) -> None:
    c = eliza.check_model(_write(tmp_path / "merges.gguf", "llama", merges=["a b", "b zz"]))
    assert not c.runnable
    assert c.missing == ("tokenizer: merge 1 'b zz' refers to 'zz', which is not a token of the vocabulary",)


def test_not_a_gguf_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "x.gguf").write_bytes(b"not a gguf at all")
    with pytest.raises(eliza.FormatError):
        eliza.check_model(tmp_path / "x.gguf")
    with pytest.raises(eliza.ElizaIOError):
        eliza.check_model(tmp_path / "missing.gguf")


def test_eliza_info_says_what_the_build_lacks(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.gguf", "phi9", pre="no-such-pre")
    env = {**os.environ, "PYTHONPATH": str(REPO / "sdk") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-m", "eliza", "info", str(path), "--tensors", "0"], env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert "language model: this build cannot run it; it lacks:" in out
    assert "  - architecture 'phi9'" in out and "pre-tokenizer 'no-such-pre'" in out
    ok = _write(tmp_path / "ok.gguf", "llama")
    out = subprocess.run([sys.executable, "-m", "eliza", "info", str(ok), "--tensors", "0"], env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert "language model: runs in this build (llama, tokenizer gpt2/qwen2; chat template: chatml)" in out
