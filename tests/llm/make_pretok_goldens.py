#!/usr/bin/env python3
"""Writes tests/data/llm_pretok_goldens.json: llama.cpp's token ids for every
BPE pre-tokenizer name (`tokenizer.ggml.pre`) that libeliza supports, the
reference tests/llm/test_pretokenizers.py holds libeliza to.

    python tests/tools/llama_cpp.py      # llama.cpp 0.3.36 built once, cached
    python tests/llm/make_pretok_goldens.py

One byte-level BPE vocabulary, trained with `tokenizers` on the tokenizer
corpus (the one stored in llm_tokenizer_goldens.json, 1,000 tokens + 3
control + 1 user-defined), or for RAW_NAMES one of raw UTF-8 (stored here
as "raw_vocab"), is written as a vocab-only GGUF once per
pre-tokenizer name and tokenized by llama.cpp (libllama through ctypes) with
add_special off and parse_special on, over the texts of `texts()`: the
corpus (code, CJK, emoji, Arabic/Hebrew, Hindi, Thai, whitespace runs, digits,
special tokens), the digit/space/script lines below and 300 seeded random
texts. To stay small the goldens keep, per group of names that give the same
ids for every text, one CRC-32 of the ids per text.

"eog" holds llama.cpp's end-of-generation set (llama_vocab_is_eog over every
id) of the vocabularies of EOG_CASES: the same vocabulary plus special tokens
found by their text, named by tokenizer.ggml.eot/eom_token_id, or dropped
again by llama.cpp's harmony and gemma4 rules.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))
import make_tokenizer_goldens as gen  # noqa: E402

GOLDENS = REPO / "tests" / "data" / "llm_pretok_goldens.json"
N_RANDOM = 300

# Every tokenizer.ggml.pre value of llama.cpp 0.3.36's llama-vocab.cpp that
# libeliza runs (all of them but the four without GPT-2 byte encoding).
PRE_NAMES = (
    "default", "minicpm5", "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
    "midm-2.0", "lfm2", "jina-v5-nano", "deepseek-llm", "deepseek-coder", "deepseek-v3", "spark2_5",
    "youtu", "falcon", "mpt", "starcoder", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat",
    "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert", "jais-2", "jina-v1-en",
    "jina-v2-code", "roberta-bpe", "refact", "command-r", "qwen2", "deepseek-r1-qwen", "kormo",
    "f2llmv2", "qwen35", "stablelm2", "olmo", "dbrx", "smaug-bpe", "poro-chat", "chatglm-bpe", "glm4",
    "glm5", "viking", "jais", "tekken", "smollm", "codeshell", "bloom", "gpt3-finnish", "exaone",
    "exaone4", "exaone-moe", "chameleon", "minerva-7b", "megrez", "gpt-4o", "llama4", "kanana2",
    "talkie", "granite-embed-multi-97m", "tiny_aya", "cohere2moe", "superbpe", "trillion",
    "granite-docling", "bailingmoe", "bailingmoe2", "llada-moe", "seed-coder", "hunyuan",
    "hunyuan-dense", "hy_v4", "joyai-llm", "kimi-k2", "ufakzeka", "grok-2", "afmoe", "laguna",
    "minimax-m2", "solar-open", "mellum2",
)
# The names whose vocabularies are raw UTF-8, not GPT-2 byte code points
# (gemma4, granite-embed-multi-311m and sarvam-moe with spaces as U+2581): a
# second vocabulary, trained SentencePiece-style and stored in the goldens.
RAW_NAMES = ("gemma4", "granite-embed-multi-311m", "sarvam-moe", "whitespace")
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]
RAW_VOCAB_SIZE = 1500

# Lines for the rules the corpus reaches less: digit grouping, long space
# runs, scripts with marks, the chameleon and superbpe special cases.
EXTRA = [
    "1", "12", "123", "1234", "12345", "123456", "1234567", "12345678901234567890",
    "pi is 3.14159265358979 and e 2.718281828", "٣٤٥٦٧ ۱۲۳۴ ५६७८९ ๑๒๓", "½ ¼ ¾ Ⅻ ⑦",
    "a" + " " * 3 + "b" + " " * 7 + "c" + " " * 20 + "d", " " * 40, "\t\t\t x \n\n\n y\r\n\r\n z",
    "x" + " " * 600 + "y", "<sentinel:12> IMGIMGABCZ IMGIMGAAAAAZ\t\n    code  here",
    "Hello WORLD HeLLo wORLD iPhone McDonald's DON'T we'LL they'Re",
    "日本語のテキストとカタカナ、ひらがな。中文文本，标点符号！한국어 텍스트입니다.",  # noqa: RUF001
    "עברית עם ניקוד: שָׁלוֹם. العربية مع التشكيل: مَرْحَبًا بِكُمْ", "हिन्दी में लिखा गया वाक्य। ภาษาไทยไม่มีช่องว่าง",
    "Ελληνικά και Русский текст, Ёжик", "café naïve coöperate résumé Æsir ŒUVRE straße",
    "def f(x):\n    return x**2  # square\n\n\tprint(f(12345))", "if (a<=b && c!=d) { x += y; } // done",
    "https://example.com/path?q=1&r=2#frag user@mail.org", "emoji 👩‍💻👍🏽🇯🇵 ❤️ text",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "a<|endoftext|>b <tool_call> c",
    "mixed123abc456 x1y2z3 1,234,567.89 $100 €200 ¥300", "...!!!???;;;::: --- ___ ***",
    "\u00a0\u2009\u3000\u200b nbsp thin ideographic zwsp", "ℌ𝔢𝔩𝔩𝔬 𝟙𝟚𝟛 ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",  # noqa: RUF001
]


def texts(corpus: list[str]) -> list[str]:
    """What the goldens cover (>= 500 texts)."""
    return [*corpus, *EXTRA, "", "\n".join(corpus), *gen.random_texts(seed=7, n=N_RANDOM)]


def ids_crc(ids: list[int]) -> int:
    return zlib.crc32(",".join(map(str, ids)).encode())


def write_gguf(path: Path, vocab: dict[str, Any], pre: str) -> None:
    """The vocabulary as a GGUF for pre; "whitespace" under llama.cpp's
    whitespace tokenizer model (with model gpt2 its merges assert on a run of
    two spaces)."""
    model = "whitespace" if pre == "whitespace" else "gpt2"
    gen.write_bpe_gguf(path, vocab["tokens"], vocab["merges"], pre, model)


def train_raw_vocab(corpus: list[str]) -> dict[str, Any]:
    """A BPE over raw UTF-8 with spaces as U+2581, lines cut at newlines and
    <0xHH> byte fallback tokens (the shape of Gemma 4's tokenizer.json),
    trained with `tokenizers` on the corpus: {"tokens", "merges"}."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("\n+"), behavior="isolated")
    specials = [*gen.BPE_SPECIAL, gen.BPE_USER_DEFINED, *BYTE_TOKENS]
    trainer = trainers.BpeTrainer(vocab_size=RAW_VOCAB_SIZE, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    vocab = tok.get_vocab()
    tokens = sorted(vocab, key=vocab.__getitem__)
    merges = json.loads(tok.to_str())["model"]["merges"]
    return {"tokens": tokens, "merges": [m if isinstance(m, str) else " ".join(m) for m in merges]}


def stored_raw_vocab() -> dict[str, Any]:
    """The raw UTF-8 vocabulary the goldens were made with."""
    data: dict[str, Any] = json.loads(GOLDENS.read_text(encoding="utf-8"))["raw_vocab"]
    return data


def vocab_for(pre: str) -> dict[str, Any]:
    return stored_raw_vocab() if pre in RAW_NAMES else stored_vocab()


def stored_vocab() -> dict[str, Any]:
    """The BPE vocabulary of the tokenizer goldens (tokens, merges)."""
    data: dict[str, Any] = json.loads(gen.GOLDENS.read_text(encoding="utf-8"))["bpe"]
    return data


# Vocabularies for the end-of-generation set: the stored vocabulary plus
# special tokens (text, GGUF token type: 3 control, 4 user-defined, 1 normal),
# and the tokenizer.ggml.* ids the file names.
EOG_CASES: dict[str, tuple[list[tuple[str, int]], dict[str, str]]] = {
    "chatml-fim": ([("<|fim_prefix|>", 3), ("<|fim_pad|>", 3), ("<|file_sep|>", 3), ("</s>", 4)], {}),
    "llama3": ([("<|eot_id|>", 3), ("<|eom_id|>", 3), ("<|end_of_text|>", 3), ("<|start_header_id|>", 3)],
               {"eot_token_id": "<|eot_id|>"}),
    "harmony": ([("<|end|>", 3), ("<|return|>", 3), ("<|call|>", 3), ("<|channel|>", 3)], {}),
    "gemma4-marker": ([("<|tool_response>", 3), ("</s>", 3), ("<turn|>", 3)], {}),
    "normal-typed": ([("<end_of_turn>", 1), ("<EOT>", 4), ("[EOS]", 1), ("<eos>", 1)],
                     {"eom_token_id": "[EOS]"}),
}


def write_eog_gguf(path: Path, vocab: dict[str, Any], case: str) -> None:
    """The stored vocabulary with EOG_CASES[case]'s tokens appended."""
    import gguf

    extra, ids = EOG_CASES[case]
    tokens = [*vocab["tokens"], *(t for t, _ in extra)]
    types = [gguf.TokenType.CONTROL if t in gen.BPE_SPECIAL else
             gguf.TokenType.USER_DEFINED if t == gen.BPE_USER_DEFINED else gguf.TokenType.NORMAL
             for t in vocab["tokens"]] + [gguf.TokenType(k) for _, k in extra]
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(vocab["merges"])
    w.add_bos_token_id(tokens.index("<|im_start|>"))
    w.add_eos_token_id(tokens.index("<|endoftext|>"))
    for key, text in ids.items():
        w.add_uint32(f"tokenizer.ggml.{key}", tokens.index(text))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def live_ids(lib: Any, path: Path, cases: list[str]) -> list[list[int]]:
    with lib.vocab(path) as v:
        return [v.tokenize(t, False, True) for t in cases]


def main() -> int:
    from tools.libllama import LibLlama

    lib = LibLlama.load()
    if lib is None:
        print("llama.cpp is not built: run tests/tools/llama_cpp.py first", file=sys.stderr)
        return 1
    corpus = gen.load_corpus()
    cases = texts(corpus)
    vocab = stored_vocab()
    raw_vocab = train_raw_vocab(corpus)
    groups: dict[tuple[int, ...], list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for pre in (*PRE_NAMES, *RAW_NAMES):
            path = Path(tmp) / f"{pre}.gguf"
            write_gguf(path, raw_vocab if pre in RAW_NAMES else vocab, pre)
            crcs = tuple(ids_crc(ids) for ids in live_ids(lib, path, cases))
            groups.setdefault(crcs, []).append(pre)
        eog: dict[str, list[int]] = {}
        for case in EOG_CASES:
            path = Path(tmp) / f"eog-{case}.gguf"
            write_eog_gguf(path, vocab, case)
            with lib.vocab(path) as v:
                eog[case] = v.eog_ids()
    blob = "\n".join(cases).encode("utf-8")
    out = {
        "header": {
            "reference": "llama.cpp of llama-cpp-python 0.3.36 (libllama, vocab_only), "
                         "llama_tokenize(add_special=false, parse_special=true)",
            "texts_sha256": hashlib.sha256(blob).hexdigest(),
            "n_texts": len(cases),
            "random_seed": 7,
        },
        "groups": [{"names": names, "crc32": " ".join(f"{c:08x}" for c in crcs)}
                   for crcs, names in groups.items()],
        "eog": eog,
        "raw_vocab": raw_vocab,
    }
    GOLDENS.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(cases)} texts, {len(PRE_NAMES) + len(RAW_NAMES)} names in {len(groups)} groups -> {GOLDENS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
