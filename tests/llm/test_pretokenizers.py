"""Every BPE pre-tokenizer name against llama.cpp.

Normal runs compare with tests/data/llm_pretok_goldens.json (written by
tests/llm/make_pretok_goldens.py: one trained vocabulary as a GGUF per
`tokenizer.ggml.pre` name, llama.cpp's ids per text as CRC-32s) through the
``test_tokenizer`` tool of the C build. ``pytest -m reference`` recomputes
the ids live with libllama of the cached llama.cpp build and compares them
id for id.
"""

from __future__ import annotations

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
GOLDENS = REPO / "tests" / "data" / "llm_pretok_goldens.json"


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


gen = _load("make_pretok_goldens", Path(__file__).with_name("make_pretok_goldens.py"))
NAMES = (*gen.PRE_NAMES, *gen.RAW_NAMES)


def tokenize_with_tool(exe: Path, model: Path, tmp: Path, texts: Sequence[str],
                       add_bos: bool = False, special: bool = True) -> list[list[int] | str]:
    """libeliza's ids per text (add_bos, parse_special), or the error line."""
    inp, out = tmp / "in.bin", tmp / "out.txt"
    with open(inp, "wb") as f:
        for t in texts:
            data = t.encode("utf-8")
            f.write(struct.pack("<IB", len(data), int(add_bos) | (2 * int(special))) + data)
    subprocess.run([str(exe), "tokenize", str(model), str(inp), str(out)], check=True, timeout=600)
    lines = out.read_bytes().split(b"\n")
    res: list[list[int] | str] = []
    for i in range(len(texts)):
        tag, _, rest = lines[3 * i].decode("utf-8", "replace").partition(" ")
        res.append([int(x) for x in rest.split()] if tag == "ids" else rest)
    return res


@pytest.fixture(scope="module")
def goldens() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(GOLDENS.read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def texts() -> list[str]:
    t: list[str] = gen.texts(gen.gen.load_corpus())
    return t


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("gguf")
    tmp = tmp_path_factory.mktemp("pretok")
    paths = {}
    for pre in NAMES:
        paths[pre] = tmp / f"{pre}.gguf"
        gen.write_gguf(paths[pre], gen.vocab_for(pre), pre)
    return paths


def _golden_crcs(goldens: dict[str, Any], pre: str) -> list[int]:
    for g in goldens["groups"]:
        if pre in g["names"]:
            return [int(c, 16) for c in g["crc32"].split()]
    raise AssertionError(f"no goldens for {pre}")


def test_goldens_are_for_these_texts(goldens: dict[str, Any], texts: list[str]) -> None:
    import hashlib

    h = goldens["header"]
    assert h["n_texts"] == len(texts) >= 500
    assert h["texts_sha256"] == hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()
    assert sorted(n for g in goldens["groups"] for n in g["names"]) == sorted(NAMES)


@pytest.mark.parametrize("pre", NAMES)
def test_pre_tokenizer_ids_match_llama_cpp(pre: str, goldens: dict[str, Any], texts: list[str],
                                           models: dict[str, Path], tmp_path: Path) -> None:
    exe = c_tools.require("test_tokenizer")
    got = tokenize_with_tool(exe, models[pre], tmp_path, texts)
    want = _golden_crcs(goldens, pre)
    bad = [i for i, (g, w) in enumerate(zip(got, want))
           if not isinstance(g, list) or gen.ids_crc(g) != w]
    assert not bad, (f"{pre}: {len(texts) - len(bad)}/{len(texts)} texts match llama.cpp; first: "
                     + "; ".join(f"{texts[i][:50]!r} -> {got[i]}" for i in bad[:3]))


def test_unknown_pre_tokenizer_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("gguf")
    exe = c_tools.require("test_tokenizer")
    path = tmp_path / "unknown.gguf"
    gen.write_gguf(path, gen.stored_vocab(), "no-such-pre")
    (tmp_path / "in.bin").write_bytes(b"")
    r = subprocess.run([str(exe), "tokenize", str(path), str(tmp_path / "in.bin"),
                        str(tmp_path / "out.txt")], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "BPE pre-tokenizer 'no-such-pre' is not supported" in r.stderr


@pytest.mark.parametrize("pre", ["gemma4", "sarvam-moe"])
def test_spm_style_bpe_renders_u2581_as_space(pre: str, models: dict[str, Path], tmp_path: Path) -> None:
    """Gemma 4's BPE: spaces become U+2581 before the merges and come back as
    spaces in the text (llama.cpp's escape_whitespaces)."""
    exe = c_tools.require("test_tokenizer")
    text = "Hello world,  two  spaces\n\nand a line"
    inp, out = tmp_path / "in.bin", tmp_path / "out.txt"
    data = text.encode("utf-8")
    inp.write_bytes(struct.pack("<IB", len(data), 2) + data)
    subprocess.run([str(exe), "tokenize", str(models[pre]), str(inp), str(out)], check=True, timeout=60)
    lines = out.read_text(encoding="utf-8").split("\n")
    ids = [int(x) for x in lines[0].split()[1:]]
    assert len(ids) < len(data) and bytes.fromhex(lines[1].split(" ", 1)[1]).decode("utf-8") == text


@pytest.mark.parametrize("merge, missing", [("zq qz", "zq"), ("a zqz", "zqz"), ("( (", "((")])
def test_merges_of_missing_tokens_are_refused(merge: str, missing: str, tmp_path: Path) -> None:
    pytest.importorskip("gguf")
    exe = c_tools.require("test_tokenizer")
    vocab = gen.stored_vocab()
    assert "((" not in vocab["tokens"]
    path = tmp_path / "bad.gguf"
    gen.gen.write_bpe_gguf(path, vocab["tokens"], [*vocab["merges"], merge], "qwen2")
    (tmp_path / "in.bin").write_bytes(b"")
    r = subprocess.run([str(exe), "tokenize", str(path), str(tmp_path / "in.bin"), str(tmp_path / "out.txt")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert f"merge {len(vocab['merges'])} '{merge}'" in r.stderr and f"'{missing}'" in r.stderr


@pytest.mark.reference
@pytest.mark.parametrize("pre", NAMES)
def test_pre_tokenizer_ids_match_live_llama_cpp(pre: str, texts: list[str], models: dict[str, Path],
                                                tmp_path: Path) -> None:
    from tools.libllama import LibLlama

    lib = LibLlama.load()
    if lib is None:
        pytest.skip("llama.cpp is not built (tests/tools/llama_cpp.py)")
    exe = c_tools.require("test_tokenizer")
    rng = random.Random(11)
    cases = texts + gen.gen.random_texts(seed=11, n=300)
    cases += ["".join(chr(rng.choice([rng.randint(0x20, 0x7E), rng.randint(0xA0, 0x2FFF),
                                      rng.randint(0x3000, 0xD7FF), rng.randint(0xE000, 0xFFFD),
                                      rng.randint(0x10000, 0x10FFFF)]))
                      for _ in range(rng.randint(1, 30))) for _ in range(200)]
    want = gen.live_ids(lib, models[pre], cases)
    got = tokenize_with_tool(exe, models[pre], tmp_path, cases)
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    assert not bad, "\n".join(f"{cases[i][:60]!r}\n  ours      {got[i]}\n  llama.cpp {want[i]}"
                              for i in bad[:4])


# ---- end-of-generation set -------------------------------------------------------------

def _tool_eog(path: Path) -> list[int]:
    exe = c_tools.require("test_tokenizer")
    out = subprocess.run([str(exe), "eog", str(path)], check=True, capture_output=True, text=True,
                         timeout=60).stdout.split()
    assert out[0] == "eog"
    return [int(x) for x in out[1:]]


@pytest.fixture(scope="module")
def eog_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("gguf")
    tmp = tmp_path_factory.mktemp("eog")
    vocab = gen.stored_vocab()
    paths = {}
    for case in gen.EOG_CASES:
        paths[case] = tmp / f"{case}.gguf"
        gen.write_eog_gguf(paths[case], vocab, case)
    return paths


@pytest.mark.parametrize("case", list(gen.EOG_CASES))
def test_eog_set_matches_llama_cpp(case: str, goldens: dict[str, Any], eog_models: dict[str, Path]) -> None:
    assert _tool_eog(eog_models[case]) == goldens["eog"][case]


def test_gemma_eog_set_is_llama_cpps(gemma_path: Path) -> None:
    # llama.cpp 0.3.36 on this file: <eos>, <end_of_turn>, </s> (REFERENCES.md).
    assert _tool_eog(gemma_path) == [1, 106, 212]


@pytest.mark.reference
def test_eog_sets_match_live_llama_cpp(eog_models: dict[str, Path], gemma_path: Path) -> None:
    from tools.libllama import LibLlama

    lib = LibLlama.load()
    if lib is None:
        pytest.skip("llama.cpp is not built (tests/tools/llama_cpp.py)")
    for path in [*eog_models.values(), gemma_path]:
        with lib.vocab(path) as v:
            assert _tool_eog(path) == v.eog_ids(), path.name


@pytest.mark.parametrize(
    "pre, bos_first", [("gemma4", True), ("granite-embed-multi-311m", True), ("sarvam-moe", False)]
)
def test_gemma4_always_adds_bos(pre: str, bos_first: bool, models: dict[str, Path], tmp_path: Path) -> None:
    """llama.cpp turns add_bos_token on for the gemma4 pre-tokenizer whatever
    the file says (the test vocabulary's file says nothing: off for gpt2)."""
    exe = c_tools.require("test_tokenizer")
    bos = gen.stored_raw_vocab()["tokens"].index("<|im_start|>")
    got = tokenize_with_tool(exe, models[pre], tmp_path, ["Hello world"], add_bos=True)[0]
    assert isinstance(got, list) and (got[0] == bos) == bos_first


@pytest.mark.reference
@pytest.mark.parametrize("pre", gen.RAW_NAMES)
def test_raw_names_add_special_as_llama_cpp(pre: str, models: dict[str, Path], tmp_path: Path) -> None:
    from tools.libllama import LibLlama

    lib = LibLlama.load()
    if lib is None:
        pytest.skip("llama.cpp is not built (tests/tools/llama_cpp.py)")
    exe = c_tools.require("test_tokenizer")
    cases = ["Hello world", "two\n\nlines", ""]
    got = tokenize_with_tool(exe, models[pre], tmp_path, cases, add_bos=True)
    with lib.vocab(models[pre]) as v:
        assert got == [v.tokenize(t, True, True) for t in cases]
