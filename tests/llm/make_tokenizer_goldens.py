#!/usr/bin/env python3
"""Writes tests/data/llm_tokenizer_goldens.json: llama.cpp's token ids and
detokenized text for the tokenizer corpus, the reference that
tests/llm/test_tokenizer.py holds libeliza's tokenizer to.

    pip install llama-cpp-python==0.3.36 tokenizers
    python tests/llm/make_tokenizer_goldens.py [--model GEMMA.gguf]

Two parts:

gemma   the real Gemma 3 270M GGUF (SentencePiece, 262,144 tokens): every
        corpus line, the empty text, the whole corpus as one text and seeded
        random texts; with parse_special off and on. Stored per text: "ids"
        (add_bos off, parse_special off), "ids_special" when parse_special
        changes them, "bos" when add_bos does anything but prepend BOS,
        "text" / "text_special" when llama.cpp's detokenize (remove_special
        off, unparse_special off / on) does not give the input back.
spm     a small SentencePiece BPE vocabulary (1,200 pieces, byte fallback,
        llama 1/2 style: add_space_prefix and add_bos by default) trained here
        with `sentencepiece` on the corpus: llama.cpp's ids and text per
        text; "sp_ids" where SentencePiece's own encoder differs (it knows
        nothing of llama.cpp's special-token splitting).
bpe     one byte-level BPE vocabulary trained here with `tokenizers` on the
        corpus (1,000 tokens + 3 control + 1 user-defined token), written as a
        GGUF per pre-tokenizer (default, gpt-2, llama-bpe, qwen2, qwen35);
        llama.cpp's ids per text and pre-tokenizer, and where the Hugging Face
        tokenizer built from the same vocabulary and pre-tokenizer regex
        differs, its ids as "hf_ids" (for the record: llama.cpp is the
        reference).

The header records llama-cpp-python's version, the model's SHA-256, the
corpus's SHA-256 and the random seed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CORPUS = HERE / "tokenizer_corpus.txt"
GOLDENS = REPO / "tests" / "data" / "llm_tokenizer_goldens.json"
SEED = 20240607
N_RANDOM = 300
N_RANDOM_BPE = 100
BPE_VOCAB_SIZE = 1000
BPE_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
BPE_USER_DEFINED = "<tool_call>"
BPE_PRES = ("default", "gpt-2", "llama-bpe", "qwen2", "qwen35")

# The pre-tokenizer regexes as the Hugging Face tokenizer.json files write them.
GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


# ---- the corpus -------------------------------------------------------------------

def decode_line(line: str) -> str:
    """A corpus line with its escapes resolved (see the corpus header)."""
    out = []
    i = 0
    simple = {"n": "\n", "t": "\t", "r": "\r", "s": " ", "\\": "\\"}
    while i < len(line):
        c = line[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = line[i + 1] if i + 1 < len(line) else ""
        if e in simple:
            out.append(simple[e])
            i += 2
        elif e == "u":
            out.append(chr(int(line[i + 2:i + 6], 16)))
            i += 6
        elif e == "U":
            out.append(chr(int(line[i + 2:i + 10], 16)))
            i += 10
        else:
            raise ValueError(f"bad escape \\{e} in corpus line {line!r}")
    return "".join(out)


def load_corpus(path: Path = CORPUS) -> list[str]:
    """The corpus texts, in file order."""
    texts = []
    for raw in path.read_text(encoding="utf-8").split("\n"):
        if raw.startswith("# ") or raw == "#" or raw == "":
            continue
        texts.append(decode_line(raw))
    return texts


# Pieces the random texts are made of: every path of both tokenizers.
RANDOM_PIECES = [
    " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\u00a0", "\u3000", "\u2009", "\u200b",
    "a", "b", "the", "The", " the", "Hello", "world", "x", "Z", "é", "ß", "ñ", "İ",
    "0", "1", "12", "123", "4567", "٣", "५", "½",
    ".", ",", "!", "?", "'", "'s", "'ll", "'RE", '"', "-", "_", "(", ")", "<", ">", "$", "+", "`",
    "|", "~", "^", "=", "@", "#", "%", "&", "*", "/", "\\", "…", "—", "«", "»", "“", "”", "\u2019",
    "你", "好", "世界", "こんにちは", "カタカナ", "한국어", "مرحبا", "नमस्ते", "สวัสดี", "Привет",
    "e\u0301", "\u0301", "\u0308", "😀", "👍🏽", "👨‍👩‍👧", "🇯🇵", "❤️", "\u200d", "\ufe0f", "\ufffd",
    "\ue000", "\U0010fffd", "\u0000", "\u007f", "\u0085",
    "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "</s>", "<unk>", "<b>", "</b>",
    "<unused7>", "[multimodal]", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>",
]


def random_texts(seed: int = SEED, n: int = N_RANDOM) -> list[str]:
    """Seeded random texts of 1 to 40 random pieces."""
    rng = random.Random(seed)
    return ["".join(rng.choice(RANDOM_PIECES) for _ in range(rng.randint(1, 40))) for _ in range(n)]


def gemma_texts(corpus: list[str]) -> list[str]:
    """What the Gemma goldens cover: the corpus, the empty text, the whole
    corpus as one text, and the random texts."""
    return [*corpus, "", "\n".join(corpus), *random_texts()]


def bpe_texts(corpus: list[str]) -> list[str]:
    """What the BPE goldens cover (fewer random texts: byte-level BPE with a
    small vocabulary makes many tokens, and the file stays small)."""
    return [*corpus, "", *random_texts()[:N_RANDOM_BPE]]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---- llama.cpp --------------------------------------------------------------------

_LOG_SINK: Any = None


def quiet_llama_cpp() -> None:
    """Silences llama.cpp's log (the callback object must stay alive)."""
    global _LOG_SINK
    import llama_cpp

    if _LOG_SINK is None:
        _LOG_SINK = llama_cpp.llama_log_callback(lambda level, text, user: None)
        llama_cpp.llama_log_set(_LOG_SINK, None)


class LlamaCppVocab:
    """llama.cpp's tokenizer of one GGUF (vocab_only), through its C API."""

    def __init__(self, path: Path) -> None:
        import ctypes

        import llama_cpp

        self._c = ctypes
        self._l = llama_cpp
        llama_cpp.llama_backend_init()
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        self._model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        if not self._model:
            raise RuntimeError(f"llama.cpp cannot load {path}")
        self.vocab = llama_cpp.llama_model_get_vocab(self._model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.bos = llama_cpp.llama_vocab_bos(self.vocab)

    def close(self) -> None:
        self._l.llama_model_free(self._model)

    def tokenize(self, text: str, add_bos: bool, special: bool) -> list[int]:
        data = text.encode("utf-8")
        cap = len(data) + 8
        buf = (self._l.llama_token * cap)()
        n = self._l.llama_tokenize(self.vocab, data, len(data), buf, cap, add_bos, special)
        if n < 0:
            raise RuntimeError(f"llama_tokenize needs {-n} tokens")
        return list(buf[:n])

    def detokenize(self, ids: list[int], special: bool) -> bytes:
        arr = (self._l.llama_token * max(len(ids), 1))(*ids)
        cap = 64 + 64 * len(ids)
        out = self._c.create_string_buffer(cap)
        n = self._l.llama_detokenize(self.vocab, arr, len(ids), out, cap, False, special)
        if n < 0:
            raise RuntimeError(f"llama_detokenize needs {-n} bytes")
        return out.raw[:n]

    def eog_ids(self) -> list[int]:
        return [i for i in range(self.n_vocab) if self._l.llama_vocab_is_eog(self.vocab, i)]

    def add_bos(self) -> bool:
        return bool(self._l.llama_vocab_get_add_bos(self.vocab))


def golden_entry(vocab: LlamaCppVocab, text: str) -> dict[str, Any]:
    """One text's record (see the module doc)."""
    entry: dict[str, Any] = {}
    plain = vocab.tokenize(text, False, False)
    special = vocab.tokenize(text, False, True)
    entry["ids"] = plain
    if special != plain:
        entry["ids_special"] = special
    with_bos = [vocab.tokenize(text, True, False), vocab.tokenize(text, True, True)]
    prefix = [vocab.bos] if vocab.add_bos() else []
    if with_bos != [prefix + plain, prefix + special]:
        entry["bos"] = with_bos
    want = text.encode("utf-8")
    for key, ids, render in (("text", plain, False), ("text_special", special, True)):
        detok = vocab.detokenize(ids, render)
        if detok != want:
            entry[key] = as_json_text(detok)
    return entry


def as_json_text(data: bytes) -> Any:
    """Text as a JSON string, or {"hex": ...} when it is not valid UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": data.hex()}


# ---- the BPE vocabulary --------------------------------------------------------------

def train_bpe(corpus: list[str]) -> tuple[list[str], list[str]]:
    """A byte-level BPE trained on the corpus: (tokens in id order, merges)."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB_SIZE, special_tokens=BPE_SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus * 3, trainer)
    tok.add_tokens([AddedToken(BPE_USER_DEFINED, special=False, normalized=False)])
    model = json.loads(tok.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    vocab = tok.get_vocab()
    tokens = [""] * len(vocab)
    for text, i in vocab.items():
        tokens[i] = text
    return tokens, merges


def write_bpe_gguf(path: Path, tokens: list[str], merges: list[str], pre: str, model: str = "gpt2") -> None:
    """A vocab-only GGUF llama.cpp loads (llama architecture, no tensors;
    tokenizer.ggml.model `model`)."""
    import gguf

    types = []
    for t in tokens:
        if t in BPE_SPECIAL:
            types.append(gguf.TokenType.CONTROL)
        elif t == BPE_USER_DEFINED:
            types.append(gguf.TokenType.USER_DEFINED)
        else:
            types.append(gguf.TokenType.NORMAL)
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model(model)
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|im_start|>"))
    w.add_eos_token_id(tokens.index("<|endoftext|>"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def hf_tokenizer(tokens: list[str], merges: list[str], pre: str) -> Any:
    """The Hugging Face tokenizer of the same vocabulary with pre's regexes."""
    from tokenizers import AddedToken, Regex, Tokenizer, models, pre_tokenizers

    vocab = {t: i for i, t in enumerate(tokens) if t != BPE_USER_DEFINED}
    pairs = [(a, b) for a, b in (m.split(" ", 1) for m in merges)]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs, ignore_merges=(pre == "llama-bpe")))

    def split(regex: str) -> Any:
        return pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False)

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    seq = {
        "default": [split(r"[\p{P}\$\+<=>\^~\|]+"), split(GPT2_REGEX), split(r"\p{N}+"),
                    split(r"[0-9][0-9][0-9]")],
        "gpt-2": [split(GPT2_REGEX)],
        "llama-bpe": [split(LLAMA3_REGEX)],
        "qwen2": [split(QWEN2_REGEX)],
        "qwen35": [split(QWEN35_REGEX)],
    }[pre]
    tok.pre_tokenizer = pre_tokenizers.Sequence([*seq, byte_level])
    for t in BPE_SPECIAL:
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False)])
    tok.add_tokens([AddedToken(BPE_USER_DEFINED, special=False, normalized=False)])
    assert [tok.token_to_id(t) for t in tokens] == list(range(len(tokens)))
    return tok


# ---- the SentencePiece vocabulary -------------------------------------------------------

SPM_VOCAB_SIZE = 1200
SPM_CONTROL = "<ctrl>"
SPM_USER_DEFINED = "<tool_call>"


def train_spm(corpus: list[str]) -> tuple[list[str], list[float], list[int], Any]:
    """A SentencePiece BPE model trained on the corpus: pieces, scores, GGUF
    token types, and the processor."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter([c for c in corpus if c.strip()] * 3), model_writer=model,
        vocab_size=SPM_VOCAB_SIZE, model_type="bpe", byte_fallback=True, character_coverage=1.0,
        normalization_rule_name="identity", add_dummy_prefix=True, remove_extra_whitespaces=False,
        user_defined_symbols=[SPM_USER_DEFINED], control_symbols=[SPM_CONTROL],
        allow_whitespace_only_pieces=True, split_digits=False, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    pieces, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        pieces.append(sp.id_to_piece(i))
        scores.append(float(sp.get_score(i)))
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i)
                     else 4 if pieces[-1] == SPM_USER_DEFINED else 1)
    return pieces, scores, types, sp


def write_spm_gguf(path: Path, pieces: list[str], scores: list[float], types: list[int]) -> None:
    """A vocab-only llama-architecture GGUF with a SentencePiece vocabulary;
    add_space_prefix and add_bos are left to their defaults (on)."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("llama")
    w.add_token_list(pieces)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---- main ---------------------------------------------------------------------------------

def compact(obj: Any) -> str:
    """JSON with one record per line and no spaces inside id lists."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def main() -> None:
    import llama_cpp

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=None, help="Gemma 3 270M GGUF")
    ap.add_argument("--out", type=Path, default=GOLDENS)
    args = ap.parse_args()
    model = args.model
    if model is None:
        sys.path.insert(0, str(REPO / "sdk"))
        from eliza import models

        model = models.path("gemma3-270m", install=False)
    quiet_llama_cpp()

    corpus = load_corpus()
    texts = gemma_texts(corpus)
    vocab = LlamaCppVocab(model)
    gemma = {
        "n_vocab": vocab.n_vocab,
        "bos": vocab.bos,
        "add_bos": vocab.add_bos(),
        "eog": vocab.eog_ids(),
        "cases": [golden_entry(vocab, t) for t in texts],
    }
    vocab.close()

    pieces, scores, types, sp = train_spm(corpus)
    spm_part: dict[str, Any] = {"tokens": pieces, "scores": scores, "types": types}
    texts = bpe_texts(corpus)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spm.gguf"
        write_spm_gguf(path, pieces, scores, types)
        v = LlamaCppVocab(path)
        cases = []
        same = 0
        for t in texts:
            entry = golden_entry(v, t)
            sp_ids = sp.encode(t)
            if sp_ids != entry["ids"]:
                entry["sp_ids"] = sp_ids
            else:
                same += 1
            cases.append(entry)
        spm_part.update({"add_bos": v.add_bos(), "bos": v.bos, "eog": v.eog_ids(), "cases": cases})
        v.close()
    sp_agree = f"{same}/{len(texts)}"

    tokens, merges = train_bpe(corpus)
    bpe: dict[str, Any] = {"tokens": tokens, "merges": merges, "special": BPE_SPECIAL,
                           "user_defined": BPE_USER_DEFINED, "pres": {}}
    agree = {}
    texts = bpe_texts(corpus)
    with tempfile.TemporaryDirectory() as tmp:
        for pre in BPE_PRES:
            path = Path(tmp) / f"bpe-{pre}.gguf"
            write_bpe_gguf(path, tokens, merges, pre)
            v = LlamaCppVocab(path)
            hf = hf_tokenizer(tokens, merges, pre)
            cases = []
            same = 0
            for t in texts:
                entry = golden_entry(v, t)
                hf_ids = hf.encode(t, add_special_tokens=False).ids
                if hf_ids != entry.get("ids_special", entry["ids"]):
                    entry["hf_ids"] = hf_ids
                else:
                    same += 1
                cases.append(entry)
            agree[pre] = f"{same}/{len(texts)}"
            bpe["pres"][pre] = {"add_bos": v.add_bos(), "bos": v.bos, "eog": v.eog_ids(),
                                "cases": cases}
            v.close()

    header = {
        "generator": "tests/llm/make_tokenizer_goldens.py",
        "reference": f"llama-cpp-python {llama_cpp.__version__} (llama.cpp tokenizer, vocab_only)",
        "model": "gemma3-270m-q4_k_m.gguf",
        "model_sha256": sha256_file(model),
        "corpus_sha256": sha256_file(CORPUS),
        "seed": SEED,
        "n_random": N_RANDOM,
        "n_random_bpe": N_RANDOM_BPE,
        "sentencepiece_agreement": sp_agree,
        "hf_tokenizers_agreement": agree,
    }
    lines = ["{", f'"header":{compact(header)},']
    lines.append('"gemma":{' + ",".join(f'"{k}":{compact(gemma[k])}'
                                         for k in ("n_vocab", "bos", "add_bos", "eog")) + ',"cases":[')
    lines.append(",\n".join(compact(c) for c in gemma["cases"]))
    lines.append("]},")
    lines.append('"spm":{' + ",".join(f'"{k}":{compact(spm_part[k])}'
                                       for k in ("tokens", "scores", "types", "add_bos", "bos", "eog"))
                 + ',"cases":[')
    lines.append(",\n".join(compact(c) for c in spm_part["cases"]))
    lines.append("]},")
    lines.append('"bpe":{' + ",".join(f'"{k}":{compact(bpe[k])}'
                                       for k in ("tokens", "merges", "special", "user_defined"))
                 + ',"pres":{')
    pres = []
    for pre, d in bpe["pres"].items():
        head = ",".join(f'"{k}":{compact(d[k])}' for k in ("add_bos", "bos", "eog"))
        pres.append(f'"{pre}":{{{head},"cases":[\n' + ",\n".join(compact(c) for c in d["cases"])
                    + "]}")
    lines.append(",\n".join(pres))
    lines.append("}}}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    json.loads(args.out.read_text(encoding="utf-8"))
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes); SentencePiece agreement {sp_agree};"
          f" HF agreement {agree}")


if __name__ == "__main__":
    main()
