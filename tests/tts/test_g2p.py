"""libeliza's G2P (text -> Kokoro phonemes through espeak-ng) against misaki.

Normal runs compare with tests/tts/g2p_golden.json (written by
tests/tts/make_g2p_golden.py from misaki 0.9.4's EspeakG2P on the corpus
tests/tts/g2p_corpus.txt): through the ``test_tts_g2p`` tool of the C build
(found in $ELIZA_BUILD_DIR, next to $ELIZA_LIBRARY, or in build/), with the
espeak-ng bundled in ``espeakng-loader`` named explicitly (a system
espeak-ng of another version phonemizes differently). ``pytest -m
reference`` reruns misaki live, on the corpus and on seeded random texts.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import random
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import c_tools

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

_spec = importlib.util.spec_from_file_location("make_g2p_golden", HERE / "make_g2p_golden.py")
assert _spec and _spec.loader
gen = importlib.util.module_from_spec(_spec)
sys.modules["make_g2p_golden"] = gen
_spec.loader.exec_module(gen)

MIN_MATCH = 0.98
MAX_CHUNK = 510
# phonemizer's punctuation marks: a text whose phonemes are only these (and
# spaces) has nothing to say, and the G2P gives no line for it
MARKS = set(';:,.!?¡¿—…"«»“”(){}[]')


@dataclass
class Result:
    ok: bool
    text: str  # the phonemes, or the error message
    code: int = 0


class Tool:
    """Runs the C tool over a batch of texts with espeakng-loader's espeak-ng."""

    def __init__(self, exe: Path, tmp: Path) -> None:
        library, data = gen.espeak_paths()
        self.exe, self.tmp = exe, tmp
        self.env = {**os.environ, "ELIZA_ESPEAK_LIBRARY": library, "ELIZA_ESPEAK_DATA": data}
        self.version = ""

    def run(
        self, texts: Sequence[str | bytes], mode: str = "phonemize", max_chunk: int = MAX_CHUNK
    ) -> list[Result]:
        inp, out = self.tmp / "in.bin", self.tmp / "out.txt"
        with open(inp, "wb") as f:
            for t in texts:
                data = t.encode("utf-8") if isinstance(t, str) else t
                f.write(struct.pack("<I", len(data)) + data)
        args = [str(self.exe), mode, *([str(max_chunk)] if mode == "phonemize" else []), str(inp), str(out)]
        proc = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{args} failed ({proc.returncode}): {proc.stderr}"
        lines = out.read_text(encoding="ascii").splitlines()
        assert lines[0].startswith("version ")
        self.version = lines[0].split(" ", 1)[1]
        results = []
        for line in lines[1:]:
            parts = line.split(" ")
            if parts[0] == "ok":
                results.append(
                    Result(True, bytes.fromhex(parts[1] if len(parts) > 1 else "").decode("utf-8"))
                )
            else:
                results.append(
                    Result(False, bytes.fromhex(parts[2]).decode("utf-8", "replace"), int(parts[1]))
                )
        assert len(results) == len(texts)
        return results


@pytest.fixture(scope="module")
def tool(tmp_path_factory: pytest.TempPathFactory) -> Tool:
    pytest.importorskip("espeakng_loader")
    return Tool(c_tools.require("test_tts_g2p"), tmp_path_factory.mktemp("g2p"))


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HERE / "g2p_golden.json").read_text(encoding="utf-8"))
    return data


def expected_lines(misaki: str) -> str:
    """What the pipeline gives for one corpus line, its lines joined by spaces:
    misaki's string, or nothing when that is only punctuation."""
    return "" if all(c in MARKS or c.isspace() for c in misaki) else misaki


def report(pairs: Sequence[tuple[str, str, str]]) -> str:
    return "\n".join(f"  text:   {t!r}\n  ours:   {o!r}\n  misaki: {m!r}" for t, o, m in pairs)


def check_rate(texts: Sequence[str], ours: Sequence[str], ref: Sequence[str]) -> None:
    bad = [(t, o, m) for t, o, m in zip(texts, ours, ref) if o != m]
    rate = 1 - len(bad) / len(texts)
    print(f"exact: {len(texts) - len(bad)}/{len(texts)} ({rate:.2%})")
    if bad:
        print(report(bad))
    assert rate >= MIN_MATCH, f"only {rate:.2%} exact; differing:\n{report(bad)}"


def test_golden_is_current(golden: dict[str, Any]) -> None:
    digest = hashlib.sha256(gen.CORPUS.read_bytes()).hexdigest()
    assert golden["header"]["corpus_sha256"] == digest, "corpus changed: rerun make_g2p_golden.py"
    assert [c[0] for c in golden["cases"]] == gen.load_corpus()
    assert len(golden["cases"]) >= 300


def test_g2p_espeak_version_is_the_goldens(tool: Tool, golden: dict[str, Any]) -> None:
    tool.run(["a"])
    assert tool.version == golden["header"]["espeak_ng"], (
        f"espeakng-loader's espeak-ng is {tool.version}, the goldens were made with "
        f"{golden['header']['espeak_ng']}: install espeakng-loader=="
        f"{golden['header']['packages']['espeakng-loader']} or rerun make_g2p_golden.py"
    )


def test_g2p_one_call_matches_misaki(tool: Tool, golden: dict[str, Any]) -> None:
    texts = [c[0] for c in golden["cases"]]
    results = tool.run(texts, mode="whole")
    assert all(r.ok for r in results)
    check_rate(texts, [r.text for r in results], [c[1] for c in golden["cases"]])


def test_g2p_sentences_join_to_misaki(tool: Tool, golden: dict[str, Any]) -> None:
    texts = [c[0] for c in golden["cases"]]
    results = tool.run(texts)
    assert all(r.ok for r in results)
    check_rate(
        texts,
        [" ".join(r.text.split("\n")) for r in results],
        [expected_lines(c[1]) for c in golden["cases"]],
    )
    # the multi-sentence lines are really cut
    assert sum("\n" in r.text for r in results) >= 10


def test_g2p_lines_of_text_give_lines_of_phonemes(tool: Tool, golden: dict[str, Any]) -> None:
    texts = [c[0] for c in golden["cases"][:40]]
    each = tool.run(texts)
    joined = tool.run(["\n".join(texts), "\n\n".join(texts) + "\n", "\r\n".join(texts)])
    want = "\n".join(r.text for r in each if r.text)
    assert [r.text for r in joined] == [want, want, want]


@pytest.mark.parametrize("max_chunk", [1, 12, 40])
def test_g2p_chunks_fit_and_cut_at_spaces(tool: Tool, golden: dict[str, Any], max_chunk: int) -> None:
    texts = [c[0] for c in golden["cases"]]
    whole = tool.run(texts)
    cut = tool.run(texts, max_chunk=max_chunk)
    for t, w, c in zip(texts, whole, cut):
        assert c.ok
        lines = c.text.split("\n") if c.text else []
        assert all(0 < len(line) <= max_chunk for line in lines), (t, lines)
        words = w.text.split()
        if all(len(word) <= max_chunk for word in words):
            # cut only at spaces: the words are the same
            assert " ".join(lines).split() == words, t
        else:
            # a word longer than max_chunk is cut inside
            assert "".join(lines).replace(" ", "") == "".join(words), t


def test_g2p_nothing_to_say(tool: Tool) -> None:
    results = tool.run(["", " ", "\n\n", "...", "(!) — «»", "?!\n;"])
    assert [(r.ok, r.text) for r in results] == [(True, "")] * 6


def test_g2p_refuses_invalid_utf8(tool: Tool) -> None:
    bad = [b"caf\xc3", b"\xff hello", b"ok \xed\xa0\x80", b"\xc0\xaf", b"a\x00b"]
    for mode in ("phonemize", "whole"):
        results = tool.run(bad, mode=mode)
        assert all(not r.ok and r.code == -1 for r in results), results
    assert "offset 3" in tool.run([b"caf\xc3"])[0].text


@pytest.mark.parametrize(
    ("variable", "value", "hint"),
    [
        ("ELIZA_ESPEAK_LIBRARY", "/nonexistent/libespeak-ng.so.1", "espeakng-loader"),
        ("ELIZA_ESPEAK_DATA", "/nonexistent/espeak-ng-data", "espeak_data"),
    ],
)
def test_g2p_bad_espeak_paths_say_how_to_fix(tool: Tool, variable: str, value: str, hint: str) -> None:
    (tool.tmp / "one.bin").write_bytes(struct.pack("<I", 1) + b"a")
    args = [str(tool.exe), "whole", str(tool.tmp / "one.bin"), str(tool.tmp / "one.txt")]
    proc = subprocess.run(args, env={**tool.env, variable: value}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3
    assert value in proc.stderr and hint in proc.stderr, proc.stderr


def test_g2p_long_text_in_bounded_time(tool: Tool, golden: dict[str, Any]) -> None:
    corpus = " ".join(c[0] for c in golden["cases"])
    text = (corpus * (50000 // len(corpus) + 1))[:50000]
    words = ("lorem ipsum dolor sit amet " * 2000)[:50000]  # no punctuation at all
    t0 = time.perf_counter()
    results = tool.run([text, words])
    seconds = time.perf_counter() - t0
    print(f"2 x 50,000 characters: {seconds:.2f} s")
    assert seconds < 60
    for r in results:
        assert r.ok and r.text
        assert max(len(line) for line in r.text.split("\n")) <= MAX_CHUNK


# ---- live comparisons with misaki (pytest -m reference) ----------------------


@pytest.fixture(scope="module")
def reference() -> Any:
    pytest.importorskip("misaki")
    pytest.importorskip("espeakng_loader")
    return gen.Reference()


GLUE = (
    ' | | |, |. |! |? |; | (|) | "|" | — |…|-|  | «|» |.. | < | & |% | $|\t|\u00a0| 😀 |/|\'| [|] |: '
    '|?! |.) |." | {|} | * | #|¡|¿|“|” |...| 12.5 |-3 '
)


def random_texts(n: int, seed: int = 20250401) -> list[str]:
    """Texts glued from corpus words and punctuation, spaced at random."""
    rng = random.Random(seed)
    words = " ".join(gen.load_corpus()).split()
    glue = GLUE.split("|")
    out = []
    for _ in range(n):
        parts = [rng.choice(words) + rng.choice(glue) for _ in range(rng.randint(1, 25))]
        out.append("".join(parts).strip())
    return out


@pytest.mark.reference
def test_g2p_matches_misaki_live(tool: Tool, reference: Any) -> None:
    texts = gen.load_corpus() + random_texts(400)
    ref = [reference(t) for t in texts]
    check_rate(texts, [r.text for r in tool.run(texts, mode="whole")], ref)
    # Cutting at a sentence end drops the spaces there, so where misaki kept
    # a run of them the joined lines have one: equal up to whitespace runs.
    ours = [" ".join(r.text.split("\n")) for r in tool.run(texts)]
    want = [expected_lines(m) for m in ref]
    want = [o if o.split() == w.split() else w for o, w in zip(ours, want)]
    check_rate(texts, ours, want)


# ---- Kokoro's other espeak-ng languages (es, fr-fr, hi, it, pt-br) -----------


@pytest.fixture(scope="module", params=gen.LANGUAGES)
def language(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Tool]:
    """One of the languages KPipeline phonemizes with misaki's EspeakG2P, and
    the tool set to it."""
    pytest.importorskip("espeakng_loader")
    lang: str = request.param
    tool = Tool(c_tools.require("test_tts_g2p"), tmp_path_factory.mktemp(f"g2p-{lang}"))
    tool.env["ELIZA_TEST_G2P_LANGUAGE"] = lang
    return lang, tool


def _golden(lang: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gen.golden_path(lang).read_text(encoding="utf-8"))
    return data


@pytest.mark.parametrize("lang", gen.LANGUAGES)
def test_language_golden_is_current(lang: str) -> None:
    golden = _golden(lang)
    corpus = gen.corpus_path(lang)
    assert golden["header"]["corpus_sha256"] == hashlib.sha256(corpus.read_bytes()).hexdigest(), (
        "corpus changed: rerun make_g2p_golden.py"
    )
    assert golden["header"]["reference"] == f'misaki.espeak.EspeakG2P(language="{lang}")'
    assert [c[0] for c in golden["cases"]] == gen.load_corpus(corpus)
    assert len(golden["cases"]) >= 100


def test_language_matches_misaki(language: tuple[str, Tool]) -> None:
    """≥ 98% identical to misaki's EspeakG2P(language=...) on the language's
    corpus, one call per text and sentence by sentence."""
    lang, tool = language
    golden = _golden(lang)
    texts = [c[0] for c in golden["cases"]]
    whole = tool.run(texts, mode="whole")
    assert tool.version == golden["header"]["espeak_ng"]
    assert all(r.ok for r in whole)
    check_rate(texts, [r.text for r in whole], [c[1] for c in golden["cases"]])
    lines = tool.run(texts)
    assert all(r.ok for r in lines)
    check_rate(
        texts, [" ".join(r.text.split("\n")) for r in lines], [expected_lines(c[1]) for c in golden["cases"]]
    )


@pytest.mark.reference
def test_language_matches_misaki_live(language: tuple[str, Tool]) -> None:
    pytest.importorskip("misaki")
    lang, tool = language
    texts = gen.load_corpus(gen.corpus_path(lang))
    ref = gen.Reference(lang)
    check_rate(texts, [r.text for r in tool.run(texts, mode="whole")], [ref(t) for t in texts])
