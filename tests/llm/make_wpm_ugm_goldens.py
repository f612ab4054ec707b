#!/usr/bin/env python3
"""Writes tests/data/llm_wpm_ugm_goldens.json: llama.cpp's token ids and
detokenized text for WordPiece ("bert") and SentencePiece unigram ("t5")
vocabularies, the reference tests/llm/test_tokenizer_wpm_ugm.py holds
libeliza to.

    python tests/tools/llama_cpp.py      # llama.cpp 0.3.36 built once, cached
    python tests/llm/make_wpm_ugm_goldens.py

Vocabularies, trained here on the tokenizer corpus and stored in the goldens:

wpm      two WordPiece vocabularies (1,500 tokens each, BERT's [PAD] [UNK]
         [CLS] [SEP] [MASK]) trained with `tokenizers`, one on lowercased,
         accent-stripped text, one cased; written as llama.cpp's converter
         writes BERT files (word-initial pieces with U+2581, "##" dropped,
         control tokens as they are).
ugm      one unigram vocabulary (1,200 pieces, a user-defined and a control
         piece) trained with `sentencepiece` under its nmt_nfkc rule, whose
         precompiled charsmap (the same for every model of that rule; the
         goldens keep its SHA-256, the tests rebuild it with sentencepiece)
         the GGUF carries, as llama.cpp's T5 converter writes it.

CONFIGS are the GGUFs: each vocabulary with the flags real files use and
variations of them (normalizer options, add_space_prefix,
remove_extra_whitespaces, no charsmap, an XLM-R style <mask> that takes
the whitespace before it). Per config and text the goldens keep
CRC-32s: of llama_tokenize's ids with (add_special, parse_special) off/off
and on/on, and of llama_detokenize(ids off/off, remove_special off,
unparse_special off). The texts are those of the pre-tokenizer goldens plus
EXTRA (>= 600). The header records the agreement of the Hugging Face
WordPiece tokenizer and of SentencePiece's own encoder with llama.cpp, for
the record (llama.cpp is the reference).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests"))
import make_pretok_goldens as pretok  # noqa: E402
import make_tokenizer_goldens as gen  # noqa: E402

GOLDENS = REPO / "tests" / "data" / "llm_wpm_ugm_goldens.json"

WPM_SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WPM_VOCAB_SIZE = 1500
UGM_VOCAB_SIZE = 1200
UGM_USER_DEFINED = "<tool_call>"
UGM_CONTROL = "<ctrl>"

# What the corpus reaches less for these normalizers: cases and accents,
# compatibility forms the charsmap rewrites, control and format characters,
# BERT's special tokens, space runs, words longer than any token.
EXTRA = [
    "HELLO World hello WORLD Héllo ÀÉÎÕÜ àéîõü Çà ñÑ ßẞ İı ǅǆ", "Ａｂｃ１２３ ﬁ ﬂ ① ⅷ ㎏ ㈱ ｶﾀｶﾅ ½ ™ ℃",  # noqa: RUF001
    "[CLS] a [SEP] b [MASK] [PAD] [UNK] [cls] </s> <s> <pad> <unk> <ctrl> <tool_call> <tool",
    "a\u0000b\u0001c\u007fd\u200be\u200df\ufeffg\u00adh", "e\u0301 o\u0308 n\u0303 a\u030a \u0301\u0301",
    "   leading and trailing   ", "a  b   c    d", "\t\n\r \u3000\u00a0\u2003 x", "\u2001\u2000 quad",
    "supercalifragilisticexpialidocious" * 3, "pneumonoultramicroscopicsilicovolcanoconiosis",
    "中文分词没有空格日本語もない한국어는있다", "𠀀𠀁𪜀 rare ideographs 〇 々 〆",  # noqa: RUF001
    "it's don't I'm we're they've you'll he'd", "a.b,c;d:e!f?g(h)i[j]k{l}m<n>o/p\\q|r~s`t",
    "fill <mask> in, twice:\t <mask><mask> \n<mask>", "$5 + 3 = 8 ^ 2 % 1 & * # @", "x" * 300,
    "Ω ω Σ σ ς Ά ά",  # noqa: RUF001
    "\U0001f600\U0001f44d\U0001f3fd",
]

CONFIGS: dict[str, dict[str, Any]] = {
    "wpm-uncased": {"vocab": "wpm-uncased"},  # no normalizer keys: lowercase, strip accents
    "wpm-uncased-keep-accents": {"vocab": "wpm-uncased", "lowercase": True, "strip_accents": False},
    "wpm-cased": {"vocab": "wpm-cased", "lowercase": False},
    "wpm-cased-strip-accents": {"vocab": "wpm-cased", "lowercase": False, "strip_accents": True},
    "ugm-t5": {"vocab": "ugm", "charsmap": True, "add_space_prefix": True, "remove_extra_ws": True},
    "ugm-keep-spaces": {"vocab": "ugm", "charsmap": True, "add_space_prefix": True,
                        "remove_extra_ws": False},
    "ugm-no-prefix": {"vocab": "ugm", "charsmap": True, "add_space_prefix": False,
                      "remove_extra_ws": False},
    "ugm-no-charsmap": {"vocab": "ugm", "charsmap": False, "add_space_prefix": True,
                        "remove_extra_ws": True},
    # An XLM-R style file (nomic-bert-moe): <mask> takes the whitespace
    # before it (spaces kept, so that the difference shows).
    "ugm-nomic-mask": {"vocab": "ugm", "charsmap": True, "add_space_prefix": True, "remove_extra_ws": False,
                       "arch": "nomic-bert-moe", "mask": True},
}


def texts(corpus: list[str]) -> list[str]:
    t: list[str] = pretok.texts(corpus)
    return [*t, *EXTRA]


def crc(data: bytes) -> int:
    return zlib.crc32(data)


def ids_crc(ids: list[int]) -> int:
    return crc(",".join(map(str, ids)).encode())


# ---- vocabularies -------------------------------------------------------------------

def train_wordpiece(corpus: list[str], lowercase: bool) -> tuple[list[str], Any]:
    """A WordPiece vocabulary (BERT strings, id order) and its tokenizer."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=WPM_VOCAB_SIZE, special_tokens=WPM_SPECIAL,
                                        show_progress=False)
    tok.train_from_iterator(corpus * 3, trainer)
    vocab = tok.get_vocab()
    tokens = [""] * len(vocab)
    for text, i in vocab.items():
        tokens[i] = text
    return tokens, tok


def wordpiece_tokenizer(tokens: list[str], lowercase: bool, strip_accents: bool | None) -> Any:
    """The Hugging Face tokenizer of a stored WordPiece vocabulary."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tok = Tokenizer(models.WordPiece(vocab={t: i for i, t in enumerate(tokens)}, unk_token="[UNK]",
                                     max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=strip_accents, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


def train_unigram(corpus: list[str]) -> tuple[list[str], list[float], list[int], bytes, Any]:
    """A SentencePiece unigram model: pieces, scores, GGUF token types, the
    precompiled charsmap, the processor."""
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([c for c in corpus if c.strip()] * 3), model_writer=model,
        vocab_size=UGM_VOCAB_SIZE, model_type="unigram", character_coverage=1.0,
        normalization_rule_name="nmt_nfkc", user_defined_symbols=[UGM_USER_DEFINED],
        control_symbols=[UGM_CONTROL], num_threads=1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    pieces, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        pieces.append(sp.id_to_piece(i))
        scores.append(float(sp.get_score(i)))
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 5 if sp.is_unused(i)
                     else 4 if pieces[-1] == UGM_USER_DEFINED else 1)
    return pieces, scores, types, charsmap_of(model.getvalue()), sp


def charsmap_of(model_proto: bytes) -> bytes:
    from sentencepiece import sentencepiece_model_pb2 as mp

    m = mp.ModelProto()  # type: ignore[attr-defined]
    m.ParseFromString(model_proto)
    return bytes(m.normalizer_spec.precompiled_charsmap)


def nmt_nfkc_charsmap() -> bytes:
    """sentencepiece's nmt_nfkc charsmap, from a model trained on a few lines
    (the rule's table does not depend on the text)."""
    import sentencepiece as spm

    model = io.BytesIO()
    lines = ["the quick brown fox jumps over the lazy dog", "hello world"] * 20
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=32,
                                   model_type="unigram", normalization_rule_name="nmt_nfkc",
                                   num_threads=1, minloglevel=2)
    return charsmap_of(model.getvalue())


# ---- GGUF files -------------------------------------------------------------------------

def _writer(path: Path, arch: str = "llama") -> Any:
    import gguf

    w = gguf.GGUFWriter(str(path), arch=arch)
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(1)
    w.add_layer_norm_rms_eps(1e-5)
    return w


def _close(w: Any) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def phantom(tokens: list[str]) -> tuple[list[str], list[int]]:
    """BERT strings as llama.cpp's converter stores them, and their types."""
    out, types = [], []
    for t in tokens:
        if t in WPM_SPECIAL:
            out.append(t)
            types.append(3)
        else:
            out.append(t[2:] if t.startswith("##") else "\u2581" + t)
            types.append(1)
    return out, types


def write_wpm_gguf(path: Path, tokens: list[str], cfg: dict[str, Any]) -> None:
    texts, types = phantom(tokens)
    w = _writer(path)
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("default")
    w.add_token_list(texts)
    w.add_token_types(types)
    w.add_pad_token_id(tokens.index("[PAD]"))
    w.add_unk_token_id(tokens.index("[UNK]"))
    w.add_bos_token_id(tokens.index("[CLS]"))
    w.add_sep_token_id(tokens.index("[SEP]"))
    w.add_mask_token_id(tokens.index("[MASK]"))
    if "lowercase" in cfg:
        w.add_bool("tokenizer.ggml.normalizer.lowercase", cfg["lowercase"])
    if "strip_accents" in cfg:
        w.add_bool("tokenizer.ggml.normalizer.strip_accents", cfg["strip_accents"])
    _close(w)


def write_ugm_gguf(path: Path, ugm: dict[str, Any], charsmap: bytes | None, cfg: dict[str, Any]) -> None:
    tokens, scores, types = list(ugm["tokens"]), list(ugm["scores"]), list(ugm["types"])
    if cfg.get("mask"):
        tokens.append("<mask>")
        scores.append(0.0)
        types.append(3)
    w = _writer(path, cfg.get("arch", "llama"))
    w.add_tokenizer_model("t5")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_add_space_prefix(cfg["add_space_prefix"])
    w.add_remove_extra_whitespaces(cfg["remove_extra_ws"])
    if cfg["charsmap"] and charsmap is not None:
        w.add_precompiled_charsmap(charsmap)
    w.add_unk_token_id(ugm["tokens"].index("<unk>"))
    w.add_eos_token_id(ugm["tokens"].index("</s>"))
    _close(w)


def write_config(path: Path, name: str, vocabs: dict[str, Any], charsmap: bytes | None) -> None:
    cfg = CONFIGS[name]
    if name.startswith("wpm"):
        write_wpm_gguf(path, vocabs[cfg["vocab"]]["tokens"], cfg)
    else:
        write_ugm_gguf(path, vocabs["ugm"], charsmap, cfg)


def stored_vocabs() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(GOLDENS.read_text(encoding="utf-8"))["vocabs"]
    return data


# ---- llama.cpp ------------------------------------------------------------------------

def live_records(lib: Any, path: Path, cases: list[str]) -> list[tuple[list[int], list[int], bytes]]:
    """Per text: ids (off/off), ids (on/on), detokenized off/off ids."""
    out = []
    with lib.vocab(path) as v:
        for t in cases:
            plain = v.tokenize(t, False, False)
            out.append((plain, v.tokenize(t, True, True), v.detokenize(plain, False, False)))
    return out


def main() -> int:
    from tools.libllama import LibLlama

    lib = LibLlama.load()
    if lib is None:
        print("llama.cpp is not built: run tests/tools/llama_cpp.py first", file=sys.stderr)
        return 1
    corpus = gen.load_corpus()
    cases = texts(corpus)
    wpm_uncased, _ = train_wordpiece(corpus, lowercase=True)
    wpm_cased, _ = train_wordpiece(corpus, lowercase=False)
    pieces, scores, types, charsmap, sp = train_unigram(corpus)
    assert charsmap == nmt_nfkc_charsmap()
    vocabs: dict[str, Any] = {
        "wpm-uncased": {"tokens": wpm_uncased},
        "wpm-cased": {"tokens": wpm_cased},
        "ugm": {"tokens": pieces, "scores": scores, "types": types},
    }
    configs: dict[str, Any] = {}
    agreement: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, cfg in CONFIGS.items():
            path = Path(tmp) / f"{name}.gguf"
            write_config(path, name, vocabs, charsmap)
            recs = live_records(lib, path, cases)
            configs[name] = {
                "ids": " ".join(f"{ids_crc(p):08x}" for p, _, _ in recs),
                "ids_special": " ".join(f"{ids_crc(s):08x}" for _, s, _ in recs),
                "text": " ".join(f"{crc(d):08x}" for _, _, d in recs),
            }
            if name.startswith("wpm"):
                hf = wordpiece_tokenizer(vocabs[cfg["vocab"]]["tokens"], cfg.get("lowercase", True),
                                         cfg.get("strip_accents"))
                same = sum(hf.encode(t, add_special_tokens=False).ids == p
                           for t, (p, _, _) in zip(cases, recs))
            elif name == "ugm-t5":
                same = sum(sp.encode(t) == p for t, (p, _, _) in zip(cases, recs))
            else:
                continue
            agreement[name] = f"{same}/{len(cases)}"
    blob = "\n".join(cases).encode("utf-8")
    out = {
        "header": {
            "generator": "tests/llm/make_wpm_ugm_goldens.py",
            "reference": "llama.cpp of llama-cpp-python 0.3.36 (libllama, vocab_only)",
            "texts_sha256": hashlib.sha256(blob).hexdigest(),
            "n_texts": len(cases),
            "charsmap_sha256": hashlib.sha256(charsmap).hexdigest(),
            "charsmap_bytes": len(charsmap),
            "reference_agreement_hf_or_sentencepiece": agreement,
        },
        "vocabs": vocabs,
        "configs": configs,
    }
    lines = ["{", f'"header":{json.dumps(out["header"], ensure_ascii=False)},', '"vocabs":{']
    lines.append(",\n".join(f'"{k}":{json.dumps(v, ensure_ascii=False, separators=(",", ":"))}'
                            for k, v in vocabs.items()))
    lines.append('},"configs":{')
    lines.append(",\n".join(f'"{k}":{json.dumps(v)}' for k, v in configs.items()))
    lines.append("}}")
    GOLDENS.write_text("\n".join(lines) + "\n", encoding="utf-8")
    json.loads(GOLDENS.read_text(encoding="utf-8"))
    print(f"{len(cases)} texts, {len(CONFIGS)} configs -> {GOLDENS} ({GOLDENS.stat().st_size} bytes);"
          f" agreement {agreement}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
