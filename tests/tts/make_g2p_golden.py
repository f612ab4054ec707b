#!/usr/bin/env python3
"""Writes tests/tts/g2p_golden.json: misaki's phonemes for every line of
tests/tts/g2p_corpus.txt, the reference tests/tts/test_g2p.py holds
libeliza's G2P to; and g2p_golden_<language>.json from
g2p_corpus_<language>.txt for each of the other espeak-ng languages of
Kokoro (:data:`LANGUAGES`).

    pip install misaki==0.9.4 espeakng-loader==0.2.4 phonemizer-fork==3.3.2
    python tests/tts/make_g2p_golden.py

The reference is ``misaki.espeak.EspeakG2P(language=...)`` (version None),
which runs the espeak-ng bundled in ``espeakng-loader`` through
phonemizer-fork; KPipeline uses it for Spanish, French, Hindi, Italian and
Brazilian Portuguese with these language names. The header records the
versions of all three, espeak-ng's own version string and the corpus's
SHA-256. Nothing here is random.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "g2p_corpus.txt"
GOLDEN = HERE / "g2p_golden.json"
LANGUAGE = "en-us"
# kokoro 0.9.4 KPipeline's espeak-ng languages (lang_code e, f, h, i, p).
LANGUAGES = ("es", "fr-fr", "hi", "it", "pt-br")
PACKAGES = ("misaki", "phonemizer-fork", "espeakng-loader")


def corpus_path(language: str = LANGUAGE) -> Path:
    return CORPUS if language == LANGUAGE else HERE / f"g2p_corpus_{language}.txt"


def golden_path(language: str = LANGUAGE) -> Path:
    return GOLDEN if language == LANGUAGE else HERE / f"g2p_golden_{language}.json"


def load_corpus(path: Path = CORPUS) -> list[str]:
    """The corpus texts: every line but comments ("# ...")."""
    lines = path.read_text(encoding="utf-8").split("\n")
    return [line for line in lines if line and not line.startswith("# ")]


def espeak_paths() -> tuple[str, str]:
    """(library, data directory) of the espeak-ng bundled in espeakng-loader."""
    loader = importlib.import_module("espeakng_loader")
    return str(loader.get_library_path()), str(loader.get_data_path())


class Reference:
    """misaki's EspeakG2P, with the versions it runs on."""

    def __init__(self, language: str = LANGUAGE) -> None:
        self.language = language
        # imported here: only the generator and the live tests need misaki
        misaki_espeak = importlib.import_module("misaki.espeak")
        wrapper = importlib.import_module("phonemizer.backend.espeak.wrapper")
        self.g2p = misaki_espeak.EspeakG2P(language=language)
        self.espeak_version = ".".join(str(v) for v in wrapper.EspeakWrapper().version)

    def __call__(self, text: str) -> str:
        phonemes, _ = self.g2p(text)
        return str(phonemes)

    def header(self, corpus_sha256: str) -> dict[str, Any]:
        return {
            "generator": "tests/tts/make_g2p_golden.py",
            "reference": f'misaki.espeak.EspeakG2P(language="{self.language}")',
            "packages": {p: importlib.metadata.version(p) for p in PACKAGES},
            "espeak_ng": self.espeak_version,
            "corpus_sha256": corpus_sha256,
        }


def write(language: str) -> None:
    corpus, golden = corpus_path(language), golden_path(language)
    texts = load_corpus(corpus)
    ref = Reference(language)
    digest = hashlib.sha256(corpus.read_bytes()).hexdigest()
    header = json.dumps(ref.header(digest), ensure_ascii=False)
    cases = ",\n".join(json.dumps([t, ref(t)], ensure_ascii=False) for t in texts)
    golden.write_text(f'{{\n"header":{header},\n"cases":[\n{cases}\n]}}\n', encoding="utf-8")
    print(f"wrote {golden} ({len(texts)} texts, espeak-ng {ref.espeak_version})")


def main() -> None:
    for language in (LANGUAGE, *LANGUAGES):
        write(language)


if __name__ == "__main__":
    main()
