"""Gemma 4 checkpoints whose tokenizer is only ``tokenizer.json`` (a
SentencePiece-style BPE: spaces as U+2581, <0xHH> byte fallback, no
``tokenizer.model``): ``eliza.convert hf`` writes it as llama.cpp's converter
does (tokenizer model "gemma4") and libeliza's ids equal transformers' on
the same texts; under ``-m reference`` llama.cpp's too."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

for _module in ("torch", "transformers", "gguf", "safetensors", "sentencepiece", "tokenizers"):
    pytest.importorskip(_module)

import gemma4_models as g4  # noqa: E402
import gguf  # noqa: E402
import tiny_models as tm  # noqa: E402

import eliza  # noqa: E402
from eliza.convert import convert_hf  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TEXTS = [
    *tm.corpus(150, seed=21),
    "",
    " ",
    "   leading and trailing   ",
    "two\n\nlines\nand\n\n\nmore",
    "\n",
    "tabs\tand\u00a0nbsp",
    "digits 1234567890 3.14159",
    "日本語のテキスト 中文 한국어 Ελληνικά Русский",
    "emoji 👩\u200d💻👍🏽 ❤️ done",
    "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n",
    "a<eos>b<bos>c",
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny gemma4 target with its tokenizer.json only."""
    dst = tmp_path_factory.mktemp("gemma4-bpe") / "ckpt"
    shutil.copytree(g4.checkpoint("gemma4"), dst)
    (dst / "tokenizer.model").unlink()
    assert (dst / "tokenizer.json").is_file()
    return dst


@pytest.fixture(scope="module")
def converted(checkpoint: Path) -> Path:
    report = convert_hf(checkpoint, checkpoint.parent / "gemma4-bpe.gguf", "f32")
    assert report.tokenizer_model == "gemma4"
    return report.path


@pytest.fixture(scope="module")
def hf_tokenizer(checkpoint: Path) -> Any:
    return tm._transformers().AutoTokenizer.from_pretrained(str(checkpoint))


def test_tokenizer_json_is_written_as_llama_cpp_writes_gemma4(converted: Path, hf_tokenizer: Any) -> None:
    fields = {k: f.contents() for k, f in gguf.GGUFReader(converted).fields.items()}
    assert fields["tokenizer.ggml.model"] == "gemma4"
    assert fields["tokenizer.ggml.add_bos_token"] is True
    assert fields["tokenizer.ggml.add_space_prefix"] is False
    tokens, types = fields["tokenizer.ggml.tokens"], fields["tokenizer.ggml.token_type"]
    vocab = hf_tokenizer.get_vocab()
    assert all(vocab[t] == i for i, t in enumerate(tokens) if t in vocab)
    assert {types[tokens.index(f"<0x{b:02X}>")] for b in (0, 0x0A, 0xFF)} == {gguf.TokenType.BYTE}
    assert types[hf_tokenizer.bos_token_id] == gguf.TokenType.CONTROL
    assert len(fields["tokenizer.ggml.merges"]) > 0
    assert set(fields["tokenizer.ggml.scores"]) == {-1000.0}


def test_ids_equal_transformers(converted: Path, hf_tokenizer: Any) -> None:
    with eliza.LLM(converted, n_threads=1) as llm:
        for text in TEXTS:
            want = hf_tokenizer.encode(text)
            assert llm.tokenize(text, add_bos=True) == want, text
            assert llm.detokenize(want[1:]) == hf_tokenizer.decode(want[1:], skip_special_tokens=True), text


@pytest.mark.reference
def test_ids_equal_llama_cpp(converted: Path) -> None:
    from tools.libllama import LibLlama

    lib = LibLlama.load()
    if lib is None:
        pytest.skip("llama.cpp is not built (tests/tools/llama_cpp.py)")
    with lib.vocab(converted) as v, eliza.LLM(converted, n_threads=1) as llm:
        for text in TEXTS:
            assert llm.tokenize(text, add_bos=True) == v.tokenize(text, True, True), text


def test_the_assistant_drafter_reads_it_too(tmp_path: Path) -> None:
    dst = tmp_path / "assistant"
    shutil.copytree(g4.checkpoint("gemma4_assistant"), dst)
    (dst / "tokenizer.model").unlink()
    report = convert_hf(dst, tmp_path / "assistant.gguf", "f32")
    assert (report.architecture, report.tokenizer_model) == ("gemma4-assistant", "gemma4")
