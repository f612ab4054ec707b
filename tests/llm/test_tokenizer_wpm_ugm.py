"""WordPiece ("bert") and SentencePiece unigram ("t5") tokenizers against
llama.cpp.

Normal runs compare with tests/data/llm_wpm_ugm_goldens.json (written by
tests/llm/make_wpm_ugm_goldens.py: vocabularies trained on the tokenizer
corpus, written as GGUFs with several normalizer settings; llama.cpp's ids
and detokenized text per text as CRC-32s) through the ``test_tokenizer``
tool of the C build. ``pytest -m reference`` recomputes them live with
libllama of the cached llama.cpp build on more random texts, and runs
llama.cpp's own BERT and XLM-R vocabulary files from its source tree.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
import struct
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import c_tools

REPO = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


gen = _load("make_wpm_ugm_goldens", Path(__file__).with_name("make_wpm_ugm_goldens.py"))

Record = tuple[list[int] | str, bytes]


def run_tool(model: Path, tmp: Path, texts: Sequence[str], flags: int) -> list[Record]:
    """libeliza's (ids or error line, detokenized ids) per text; flags: 1
    add_bos (llama.cpp's add_special), 2 parse_special."""
    exe = c_tools.require("test_tokenizer")
    inp, out = tmp / "in.bin", tmp / "out.txt"
    with open(inp, "wb") as f:
        for t in texts:
            data = t.encode("utf-8")
            f.write(struct.pack("<IB", len(data), flags) + data)
    subprocess.run([str(exe), "tokenize", str(model), str(inp), str(out)], check=True, timeout=600)
    lines = out.read_bytes().split(b"\n")
    res: list[Record] = []
    for i in range(len(texts)):
        tag, _, rest = lines[3 * i].decode("utf-8", "replace").partition(" ")
        text = bytes.fromhex(lines[3 * i + 1].decode().partition(" ")[2])
        res.append(([int(x) for x in rest.split()] if tag == "ids" else rest, text))
    return res


@pytest.fixture(scope="module")
def goldens() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gen.GOLDENS.read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def texts() -> list[str]:
    t: list[str] = gen.texts(gen.gen.load_corpus())
    return t


@pytest.fixture(scope="module")
def charsmap(goldens: dict[str, Any]) -> bytes:
    pytest.importorskip("sentencepiece")
    blob: bytes = gen.nmt_nfkc_charsmap()
    assert hashlib.sha256(blob).hexdigest() == goldens["header"]["charsmap_sha256"], (
        "sentencepiece's nmt_nfkc charsmap changed: rerun tests/llm/make_wpm_ugm_goldens.py")
    return blob


@pytest.fixture(scope="module")
def models(goldens: dict[str, Any], charsmap: bytes,
           tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("gguf")
    tmp = tmp_path_factory.mktemp("wpm_ugm")
    paths = {}
    for name in gen.CONFIGS:
        paths[name] = tmp / f"{name}.gguf"
        gen.write_config(paths[name], name, goldens["vocabs"], charsmap)
    return paths


def test_goldens_are_for_these_texts(goldens: dict[str, Any], texts: list[str]) -> None:
    h = goldens["header"]
    assert h["n_texts"] == len(texts) >= 600
    assert h["texts_sha256"] == hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()
    assert sorted(goldens["configs"]) == sorted(gen.CONFIGS)
    assert gen.GOLDENS.stat().st_size < 400_000


@pytest.mark.parametrize("name", list(gen.CONFIGS))
def test_ids_and_text_match_llama_cpp(name: str, goldens: dict[str, Any], texts: list[str],
                                      models: dict[str, Path], tmp_path: Path) -> None:
    want = {k: [int(c, 16) for c in v.split()] for k, v in goldens["configs"][name].items()}
    plain = run_tool(models[name], tmp_path, texts, 0)
    special = run_tool(models[name], tmp_path, texts, 3)
    bad = []
    for i, t in enumerate(texts):
        ids, text = plain[i]
        ids_s = special[i][0]
        if not isinstance(ids, list) or not isinstance(ids_s, list):
            bad.append(f"{t[:50]!r}: {ids if isinstance(ids, str) else ids_s}")
        elif gen.ids_crc(ids) != want["ids"][i]:
            bad.append(f"{t[:50]!r} ids {ids}")
        elif gen.ids_crc(ids_s) != want["ids_special"][i]:
            bad.append(f"{t[:50]!r} add_special+parse_special ids {ids_s}")
        elif gen.crc(text) != want["text"][i]:
            bad.append(f"{t[:50]!r} detokenized {text!r}")
    assert not bad, (f"{name}: {len(texts) - len(bad)}/{len(texts)} texts match llama.cpp; "
                     + "; ".join(bad[:3]))


def test_wordpiece_adds_cls_and_sep(goldens: dict[str, Any], models: dict[str, Path],
                                    tmp_path: Path) -> None:
    tokens = goldens["vocabs"]["wpm-uncased"]["tokens"]
    [(ids, _)] = run_tool(models["wpm-uncased"], tmp_path, ["Hello"], 1)
    assert isinstance(ids, list)
    assert ids[0] == tokens.index("[CLS]") and ids[-1] == tokens.index("[SEP]") and len(ids) > 2


def test_unigram_appends_eos(goldens: dict[str, Any], models: dict[str, Path], tmp_path: Path) -> None:
    pieces = goldens["vocabs"]["ugm"]["tokens"]
    [(ids, _), (empty, _)] = run_tool(models["ugm-t5"], tmp_path, ["Hello", ""], 1)
    assert isinstance(ids, list) and ids[-1] == pieces.index("</s>")
    assert empty == [pieces.index("</s>")]


# ---- bad input ------------------------------------------------------------------------

def _tool_error(path: Path, tmp: Path, texts: Sequence[str] = ()) -> tuple[int, str, list[Record]]:
    exe = c_tools.require("test_tokenizer")
    inp, out = tmp / "in.bin", tmp / "out.txt"
    with open(inp, "wb") as f:
        for t in texts:
            data = t.encode("utf-8")
            f.write(struct.pack("<IB", len(data), 0) + data)
    r = subprocess.run([str(exe), "tokenize", str(path), str(inp), str(out)], capture_output=True,
                       text=True, timeout=60)
    recs: list[Record] = []
    if r.returncode == 0:
        lines = out.read_bytes().split(b"\n")
        for i in range(len(texts)):
            tag, _, rest = lines[3 * i].decode("utf-8", "replace").partition(" ")
            recs.append(([int(x) for x in rest.split()] if tag == "ids" else rest, b""))
    return r.returncode, r.stderr, recs


def _ugm_with_charsmap(path: Path, goldens: dict[str, Any], blob: bytes) -> None:
    gen.write_ugm_gguf(path, goldens["vocabs"]["ugm"], blob, gen.CONFIGS["ugm-t5"])


@pytest.mark.parametrize("blob, message", [
    (b"\x01\x00", "too few for its 4-byte size"),
    (struct.pack("<I", 64) + bytes(60), "says its double array has 64 bytes, but 60 follow"),
    (struct.pack("<I", 8) + bytes(8), "says its double array has 8 bytes, but 8 follow"),
])
def test_truncated_charsmap_is_refused(blob: bytes, message: str, goldens: dict[str, Any],
                                       tmp_path: Path) -> None:
    pytest.importorskip("gguf")
    path = tmp_path / "bad.gguf"
    _ugm_with_charsmap(path, goldens, blob)
    rc, err, _ = _tool_error(path, tmp_path)
    assert rc != 0 and message in err


def test_corrupt_charsmap_fails_tokenizing_not_crashing(goldens: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("gguf")
    # Root BASE points far past the 2-entry array: every first byte walks out.
    path = tmp_path / "bad.gguf"
    _ugm_with_charsmap(path, goldens, struct.pack("<III", 8, 0xFFFFFC00, 0) + b"x\x00")
    rc, err, recs = _tool_error(path, tmp_path, ["hello"])
    assert rc == 0, err
    assert isinstance(recs[0][0], str) and "charsmap is corrupt" in recs[0][0]


def test_wordpiece_without_unknown_token_is_refused(goldens: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("gguf")
    import gguf

    texts, types = gen.phantom(goldens["vocabs"]["wpm-uncased"]["tokens"][:50])
    path = tmp_path / "bad.gguf"
    w = gen._writer(path)
    w.add_tokenizer_model("bert")
    w.add_token_list(texts)
    w.add_token_types([gguf.TokenType(t) for t in types])
    gen._close(w)
    rc, err, _ = _tool_error(path, tmp_path)
    assert rc != 0 and "no unknown token" in err


# ---- live llama.cpp ------------------------------------------------------------------------

def _libllama() -> Any:
    from tools.libllama import LibLlama

    lib = LibLlama.load()
    if lib is None:
        pytest.skip("llama.cpp is not built (tests/tools/llama_cpp.py)")
    return lib


def _compare_live(lib: Any, path: Path, cases: list[str], tmp: Path) -> None:
    want = gen.live_records(lib, path, cases)
    plain = run_tool(path, tmp, cases, 0)
    special = run_tool(path, tmp, cases, 3)
    bad = [i for i in range(len(cases))
           if plain[i][0] != want[i][0] or special[i][0] != want[i][1] or plain[i][1] != want[i][2]]
    assert not bad, "\n".join(
        f"{cases[i][:60]!r}\n  ours      {plain[i]} {special[i][0]}\n  llama.cpp {want[i]}" for i in bad[:4])


@pytest.mark.reference
@pytest.mark.parametrize("name", list(gen.CONFIGS))
def test_ids_match_live_llama_cpp(name: str, texts: list[str], models: dict[str, Path],
                                  tmp_path: Path) -> None:
    lib = _libllama()
    rng = random.Random(13)
    cases = texts + gen.gen.random_texts(seed=13, n=300)
    cases += ["".join(chr(rng.choice([rng.randint(0x20, 0x7E), rng.randint(0xA0, 0x2FFF),
                                      rng.randint(0x3000, 0xD7FF), rng.randint(0xE000, 0xFFFD),
                                      rng.randint(0x10000, 0x10FFFF)]))
                      for _ in range(rng.randint(1, 30))) for _ in range(300)]
    _compare_live(lib, models[name], cases, tmp_path)


@pytest.mark.reference
@pytest.mark.parametrize("vocab", ["ggml-vocab-bert-bge.gguf", "ggml-vocab-nomic-bert-moe.gguf"])
def test_llama_cpp_vocab_files_match_live(vocab: str, texts: list[str], tmp_path: Path) -> None:
    """llama.cpp's own BERT (WPM) and XLM-R (UGM, 250k pieces, nmt_nfkc
    charsmap) vocabularies from its source tree."""
    from tools.llama_cpp import cache_dir

    lib = _libllama()
    path = cache_dir() / "src" / "models" / vocab
    if not path.is_file():
        pytest.skip(f"{path} is not there")
    inp = path.with_name(vocab + ".inp")
    cases = list(texts)
    if inp.is_file():
        cases += [t for t in inp.read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n") if t]
    _compare_live(lib, path, cases, tmp_path)
