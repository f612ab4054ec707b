"""libeliza's tokenizer against llama.cpp.

Normal runs compare with tests/data/llm_tokenizer_goldens.json (written by
tests/llm/make_tokenizer_goldens.py; llama.cpp is not needed): the real
Gemma 3 270M vocabulary through ``eliza.LLM`` (or, where the SDK has no LLM
class yet, through the ``test_tokenizer`` tool of the C build) and five
byte-level BPE pre-tokenizers over a vocabulary stored in the goldens,
through the tool. ``pytest -m reference`` recomputes everything live with
llama-cpp-python, on the corpus and on fresh random texts.
"""

from __future__ import annotations

import importlib.util
import json
import random
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import c_tools

REPO = Path(__file__).resolve().parents[2]
GOLDENS = REPO / "tests" / "data" / "llm_tokenizer_goldens.json"

_spec = importlib.util.spec_from_file_location("make_tokenizer_goldens",
                                               Path(__file__).with_name("make_tokenizer_goldens.py"))
assert _spec and _spec.loader
gen = importlib.util.module_from_spec(_spec)
sys.modules["make_tokenizer_goldens"] = gen
_spec.loader.exec_module(gen)

# (text, add_bos, special) -> ids; (ids, render_special) -> bytes
Tokenize = Callable[[Sequence[tuple[str, bool, bool]]], list[list[int]]]
Detokenize = Callable[[Sequence[tuple[list[int], bool]]], list[bytes]]


@pytest.fixture(scope="session")
def goldens() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(GOLDENS.read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="session")
def corpus() -> list[str]:
    texts: list[str] = gen.load_corpus()
    return texts


# ---- the test_tokenizer tool (the C build) -----------------------------------------

class Tool:
    """Runs the tool's `tokenize` command over a batch of texts."""

    def __init__(self, exe: Path, model: Path, tmp: Path) -> None:
        self.exe, self.model, self.tmp = exe, model, tmp

    def run(self, cases: Sequence[tuple[bytes, bool, bool]]) -> list[dict[str, Any]]:
        inp, out = self.tmp / "in.bin", self.tmp / "out.txt"
        with open(inp, "wb") as f:
            for data, bos, special in cases:
                f.write(struct.pack("<IB", len(data), int(bos) | (2 * int(special))) + data)
        subprocess.run([str(self.exe), "tokenize", str(self.model), str(inp), str(out)],
                       check=True, timeout=600)
        lines = out.read_bytes().split(b"\n")
        results = []
        for i in range(len(cases)):
            head, plain_hex, special_hex = lines[3 * i:3 * i + 3]
            tag, _, rest = head.decode("utf-8", "replace").partition(" ")
            r: dict[str, Any] = {}
            if tag == "ids":
                r["ids"] = [int(x) for x in rest.split()]
            else:
                code, _, message = rest.partition(" ")
                r["error"], r["message"] = int(code), message
            r["text"] = bytes.fromhex(plain_hex.decode().partition(" ")[2])
            r["text_special"] = bytes.fromhex(special_hex.decode().partition(" ")[2])
            results.append(r)
        return results

    def bench(self, text_file: Path, repeats: int) -> tuple[int, int, float, float]:
        out = subprocess.run([str(self.exe), "bench", str(self.model), str(text_file), str(repeats)],
                             check=True, capture_output=True, text=True, timeout=600).stdout.split()
        return int(out[0]), int(out[1]), float(out[2]), float(out[3])


@pytest.fixture(scope="session")
def tool_exe() -> Path:
    return c_tools.require("test_tokenizer")


# ---- Gemma through eliza.LLM or the tool -------------------------------------------------

def _llm_class() -> Any:
    try:
        import eliza
    except ImportError:
        return None
    cls = getattr(eliza, "LLM", None)
    if cls is None or not hasattr(cls, "tokenize") or not hasattr(cls, "detokenize"):
        return None
    return cls


@pytest.fixture(scope="session")
def gemma_tok(gemma_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        tuple[Tokenize, Detokenize]]:
    """Batch tokenize / detokenize on the real Gemma vocabulary."""
    cls = _llm_class()
    if cls is not None:
        llm = cls(str(gemma_path))

        def tok(cases: Sequence[tuple[str, bool, bool]]) -> list[list[int]]:
            return [list(llm.tokenize(t, add_bos=b, special=s)) for t, b, s in cases]

        def detok(cases: Sequence[tuple[list[int], bool]]) -> list[bytes]:
            return [llm.detokenize(ids, render_special=r).encode("utf-8") for ids, r in cases]

        yield tok, detok
        close = getattr(llm, "close", None)
        if close:
            close()
        return

    exe = c_tools.find("test_tokenizer")
    if exe is None:
        pytest.skip("neither eliza.LLM nor the test_tokenizer tool is available")
    tool = Tool(exe, gemma_path, tmp_path_factory.mktemp("tok"))

    def tok_tool(cases: Sequence[tuple[str, bool, bool]]) -> list[list[int]]:
        res = tool.run([(t.encode("utf-8"), b, s) for t, b, s in cases])
        assert all("ids" in r for r in res), [r for r in res if "ids" not in r][:3]
        return [r["ids"] for r in res]

    def detok_tool(cases: Sequence[tuple[list[int], bool]]) -> list[bytes]:
        raise AssertionError("the tool detokenizes the ids it made itself")

    yield tok_tool, detok_tool


def _golden_text(value: Any) -> bytes:
    return bytes.fromhex(value["hex"]) if isinstance(value, dict) else value.encode("utf-8")


def _expected(case: dict[str, Any], text: str, bos: int, add_bos: bool) -> dict[tuple[bool, bool], list[int]]:
    plain = case["ids"]
    special = case.get("ids_special", plain)
    if "bos" in case:
        bos_plain, bos_special = case["bos"]
    else:
        prefix = [bos] if add_bos else []
        bos_plain, bos_special = prefix + plain, prefix + special
    return {(False, False): plain, (False, True): special, (True, False): bos_plain,
            (True, True): bos_special}


def _report(name: str, got: list[Any], want: list[Any], labels: list[str]) -> None:
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    if bad:
        lines = [f"{name}: {len(got) - len(bad)}/{len(got)} match; first differences:"]
        for i in bad[:5]:
            lines.append(f"  {labels[i]}\n    ours      {got[i]}\n    llama.cpp {want[i]}")
        pytest.fail("\n".join(lines))


def test_goldens_are_for_this_corpus(goldens: dict[str, Any]) -> None:
    assert goldens["header"]["corpus_sha256"] == gen.sha256_file(gen.CORPUS), (
        "tests/llm/tokenizer_corpus.txt changed: rerun tests/llm/make_tokenizer_goldens.py")
    assert GOLDENS.stat().st_size < 1 << 20


def test_corpus_is_varied(corpus: list[str]) -> None:
    assert len(corpus) >= 200
    joined = "".join(corpus)
    for needle in ("\u200d", "\U0001f3fd", "你", "مرحبا", "नमस्ते", "สวัสดี", "\ufffd", "\t", "  ",
                   "<start_of_turn>", "https://", "12345678901234567890"):
        assert needle in joined, needle


def test_gemma_ids_match_llama_cpp(goldens: dict[str, Any], corpus: list[str],
                                   gemma_tok: tuple[Tokenize, Detokenize]) -> None:
    tok, _ = gemma_tok
    g = goldens["gemma"]
    texts = gen.gemma_texts(corpus)
    assert len(texts) == len(g["cases"])
    cases, want, labels = [], [], []
    for text, case in zip(texts, g["cases"]):
        for key, ids in _expected(case, text, g["bos"], g["add_bos"]).items():
            cases.append((text, key[0], key[1]))
            want.append(ids)
            labels.append(f"{text[:60]!r} add_bos={key[0]} special={key[1]}")
    _report("Gemma token ids", tok(cases), want, labels)


def test_gemma_detokenize_matches_llama_cpp(goldens: dict[str, Any], corpus: list[str],
                                            gemma_tok: tuple[Tokenize, Detokenize],
                                            gemma_path: Path, tmp_path: Path) -> None:
    texts = gen.gemma_texts(corpus)
    cases = goldens["gemma"]["cases"]
    want = []
    for text, case in zip(texts, cases):
        want.append(_golden_text(case["text"]) if "text" in case else text.encode("utf-8"))
        want.append(_golden_text(case["text_special"]) if "text_special" in case
                    else text.encode("utf-8"))
    labels = [f"{t[:60]!r} render_special={r}" for t in texts for r in (False, True)]
    if _llm_class() is not None:
        _, detok = gemma_tok
        jobs = []
        for case in cases:
            jobs.append((case["ids"], False))
            jobs.append((case.get("ids_special", case["ids"]), True))
        got = detok(jobs)
    else:
        exe = c_tools.find("test_tokenizer")
        assert exe is not None
        res = Tool(exe, gemma_path, tmp_path).run(
            [(t.encode("utf-8"), False, s) for t in texts for s in (False, True)])
        got = [r["text"] if i % 2 == 0 else r["text_special"] for i, r in enumerate(res)]
    _report("Gemma detokenized text", got, want, labels)


def test_gemma_round_trips_the_corpus(corpus: list[str], gemma_tok: tuple[Tokenize, Detokenize],
                                      gemma_path: Path, tmp_path: Path) -> None:
    texts = gen.gemma_texts(corpus)
    if _llm_class() is not None:
        tok, detok = gemma_tok
        ids = tok([(t, True, False) for t in texts])
        got = detok([(i, False) for i in ids])
    else:
        exe = c_tools.find("test_tokenizer")
        assert exe is not None
        got = [r["text"] for r in Tool(exe, gemma_path, tmp_path).run(
            [(t.encode("utf-8"), True, False) for t in texts])]
    _report("Gemma round trip", got, [t.encode("utf-8") for t in texts], [repr(t[:60]) for t in texts])


def test_invalid_utf8_is_refused_with_its_offset(gemma_path: Path, tool_exe: Path,
                                                 tmp_path: Path) -> None:
    bad = [b"abc\xff", b"ok \xc3(", b"\xed\xa0\x80 surrogate", b"caf\xc3\xa9\xe2\x82", b"\x80"]
    offsets = [3, 3, 0, 5, 0]
    res = Tool(tool_exe, gemma_path, tmp_path).run([(b, True, True) for b in bad])
    for r, off in zip(res, offsets):
        assert r.get("error") == -1, r
        assert f"offset {off}" in r["message"], r["message"]
    cls = _llm_class()
    if cls is not None:
        import eliza

        llm = cls(str(gemma_path))
        with pytest.raises(eliza.ElizaError) as info:
            llm.tokenize(b"abc\xff")
        assert "offset 3" in str(info.value)
        llm.close()


def test_gemma_specials(goldens: dict[str, Any], gemma_path: Path, tool_exe: Path,
                        tmp_path: Path) -> None:
    g = goldens["gemma"]
    assert g["eog"] == [1, 106, 212]  # <eos>, <end_of_turn>, </s>
    res = Tool(tool_exe, gemma_path, tmp_path).run([(b"", True, False), (b"", False, False)])
    assert res[0]["ids"] == [g["bos"]] and res[1]["ids"] == []


def test_tokenizing_100kb_takes_well_under_a_second(corpus: list[str], gemma_path: Path,
                                                    tool_exe: Path, tmp_path: Path) -> None:
    text = ("\n".join(corpus) + "\n").encode("utf-8")
    data = (text * (100_000 // len(text) + 1))[:100_000]
    while data and (data[-1] & 0xC0) == 0x80:
        data = data[:-1]
    while data and data[-1] >= 0xC0:
        data = data[:-1]
    path = tmp_path / "100k.txt"
    path.write_bytes(data)
    _n_bytes, n_tokens, seconds, load = Tool(tool_exe, gemma_path, tmp_path).bench(path, 3)
    per_run = seconds / 3
    print(f"\n100 KB: {n_tokens // 3} tokens in {per_run * 1000:.1f} ms "
          f"({n_tokens / seconds:,.0f} tokens/s); vocabulary load {load * 1000:.1f} ms")
    assert per_run < 0.5
    assert load < 1.0


# ---- small vocabularies: SentencePiece with add_space_prefix, BPE pre-tokenizers ---------

SMALL = ("spm", *tuple(f"bpe-{pre}" for pre in gen.BPE_PRES))


@pytest.fixture(scope="session")
def small_models(goldens: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The goldens' small vocabularies as GGUF files, by name."""
    pytest.importorskip("gguf")
    tmp = tmp_path_factory.mktemp("small")
    s, b = goldens["spm"], goldens["bpe"]
    paths = {"spm": tmp / "spm.gguf"}
    gen.write_spm_gguf(paths["spm"], s["tokens"], s["scores"], s["types"])
    for pre in b["pres"]:
        paths[f"bpe-{pre}"] = tmp / f"bpe-{pre}.gguf"
        gen.write_bpe_gguf(paths[f"bpe-{pre}"], b["tokens"], b["merges"], pre)
    return paths


def _small_golden(goldens: dict[str, Any], name: str) -> dict[str, Any]:
    part: dict[str, Any] = goldens["spm"] if name == "spm" else goldens["bpe"]["pres"][name[4:]]
    return part


@pytest.mark.parametrize("name", SMALL)
def test_small_vocab_matches_llama_cpp(name: str, goldens: dict[str, Any], corpus: list[str],
                                       small_models: dict[str, Path], tool_exe: Path,
                                       tmp_path: Path) -> None:
    g = _small_golden(goldens, name)
    texts = gen.bpe_texts(corpus)
    assert len(texts) == len(g["cases"])
    cases, want, labels = [], [], []
    for text, case in zip(texts, g["cases"]):
        for key, ids in _expected(case, text, g["bos"], g["add_bos"]).items():
            cases.append((text.encode("utf-8"), key[0], key[1]))
            want.append(ids)
            labels.append(f"{text[:60]!r} add_bos={key[0]} special={key[1]}")
    res = Tool(tool_exe, small_models[name], tmp_path).run(cases)
    _report(f"{name} token ids", [r.get("ids") for r in res], want, labels)
    got_text, want_text = [], []
    for i, (text, case) in enumerate(zip(texts, g["cases"])):
        got_text += [res[4 * i]["text"], res[4 * i + 1]["text_special"]]
        want_text += [_golden_text(case["text"]) if "text" in case else text.encode("utf-8"),
                      _golden_text(case["text_special"]) if "text_special" in case
                      else text.encode("utf-8")]
    _report(f"{name} detokenized text", got_text, want_text,
            [f"{t[:60]!r} {k}" for t in texts for k in ("plain", "special")])


# ---- live against llama.cpp ---------------------------------------------------------------------

@pytest.mark.reference
def test_goldens_match_live_llama_cpp(goldens: dict[str, Any], corpus: list[str],
                                      gemma_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    vocab = gen.LlamaCppVocab(gemma_path)
    try:
        live = [gen.golden_entry(vocab, t) for t in gen.gemma_texts(corpus)]
    finally:
        vocab.close()
    assert goldens["header"]["model_sha256"] == gen.sha256_file(gemma_path)
    assert live == goldens["gemma"]["cases"]


@pytest.mark.reference
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fresh_random_texts_match_live_llama_cpp(seed: int, gemma_path: Path, tool_exe: Path,
                                                 small_models: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    texts = gen.random_texts(seed=seed, n=400)
    rng = random.Random(seed)
    texts += ["".join(chr(rng.choice([rng.randint(0x20, 0x7E), rng.randint(0xA0, 0x2FFF),
                                      rng.randint(0x3000, 0xD7FF), rng.randint(0xE000, 0xFFFD),
                                      rng.randint(0x10000, 0x10FFFF)]))
                      for _ in range(rng.randint(1, 30))) for _ in range(200)]
    for name, path in [("gemma", gemma_path), *sorted(small_models.items())]:
        vocab = gen.LlamaCppVocab(path)
        try:
            cases = [(t, b, s) for t in texts for b in (False, True) for s in (False, True)]
            want = [vocab.tokenize(t, b, s) for t, b, s in cases]
            res = Tool(tool_exe, path, tmp_path).run([(t.encode("utf-8"), b, s) for t, b, s in cases])
            _report(f"{name} ids (seed {seed})", [r.get("ids") for r in res], want,
                    [f"{t[:60]!r} add_bos={b} special={s}" for t, b, s in cases])
            want_text = [vocab.detokenize(w, s) for w, (_, _, s) in zip(want, cases)]
            got_text = [r["text_special"] if s else r["text"] for r, (_, _, s) in zip(res, cases)]
            _report(f"{name} text (seed {seed})", got_text, want_text,
                    [f"{t[:60]!r} special={s}" for t, _, s in cases])
        finally:
            vocab.close()


def test_goldens_header_names_the_reference(goldens: dict[str, Any]) -> None:
    h = goldens["header"]
    assert h["reference"].startswith("llama-cpp-python ")
    assert len(h["model_sha256"]) == 64 and h["seed"] == gen.SEED
