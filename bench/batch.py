#!/usr/bin/env python3
"""Batch TTS on one machine: ``eliza.batch.speak`` on a local Ray instance
against the plain single-process loop, in audio seconds per wall second.

    python bench/batch.py [--model kokoro.gguf] [--sentences 16] [--rounds 2]
                          [--cores 2] [--actors N] [--threads-per-actor T]

The loop: one ``eliza.TTS`` with ``--cores`` threads synthesizing the
sentences one after another. The job: ``eliza.batch.speak`` of the same
sentences on ``ray.init(num_cpus=cores)`` (started once, beforehand, as a
cluster would be), ``--actors`` actors (default cores / T) of
``--threads-per-actor`` threads each (default 1); its time counts actor
start-up and model loading, the pipeline and the WAV and manifest writes.
The two alternate for ``--rounds`` rounds (the machine is shared and
noisy); the best round of each counts. Goal: job >= 90% of the loop.

Text goes through espeak-ng (the espeakng-loader package); without --model
the model is the default Kokoro-82M (converted once into the cache).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "She sells seashells by the seashore, and the shells she sells are surely seashells.",
    "How much wood would a woodchuck chuck if a woodchuck could chuck wood?",
    "Please call Stella and ask her to bring these things with her from the store.",
    "In the beginning, the universe was created; this has made many people very angry.",
    "A journey of a thousand miles begins with a single step, or so the saying goes.",
    "The rain in Spain stays mainly in the plain, said the professor to his student.",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
)


def loop(model: str, texts: list[str], voice: str, threads: int) -> tuple[float, float]:
    """(audio seconds, wall seconds) of the single-process loop, model load included."""
    import eliza

    t0 = time.perf_counter()
    audio = 0.0
    with eliza.TTS(model, n_threads=threads) as tts:
        for text in texts:
            audio += len(tts.synthesize(text, voice=voice)) / tts.sample_rate
    return audio, time.perf_counter() - t0


def job(model: str, texts: list[str], voice: str, actors: int, threads: int) -> tuple[float, float]:
    """(audio seconds, wall seconds) of the batch job into a fresh folder."""
    import eliza.batch

    out = Path(tempfile.mkdtemp(prefix="eliza-bench-batch-"))
    try:
        t0 = time.perf_counter()
        report = eliza.batch.speak(
            texts, out, model=model, voice=voice, actors=actors, threads_per_actor=threads
        )
        wall = time.perf_counter() - t0
        if not report.ok:
            raise SystemExit(f"batch job failed: {report.failures}")
        return report.audio_seconds, wall
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a Kokoro GGUF (default: the default model)")
    ap.add_argument("--voice", default="af_heart")
    ap.add_argument("--sentences", type=int, default=16, help="items (default 16)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--threads-per-actor", type=int, default=1)
    ap.add_argument("--actors", type=int, help="default: cores / threads-per-actor")
    args = ap.parse_args()

    import ray

    from eliza import models
    from eliza.batch import init_local

    model = args.model or str(models.kokoro_model_path())
    texts = [SENTENCES[i % len(SENTENCES)] for i in range(args.sentences)]
    actors = args.actors or max(1, args.cores // args.threads_per_actor)
    # Workers import this eliza and its library.
    sdk = str(Path(__file__).resolve().parents[1] / "sdk")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (sdk, os.environ.get("PYTHONPATH")) if p)
    t0 = time.perf_counter()
    init_local(num_cpus=args.cores, log_to_driver=False)
    print(f"ray.init(num_cpus={args.cores}): {time.perf_counter() - t0:.1f} s (not counted)")
    try:
        best_loop = best_job = 0.0
        for r in range(args.rounds):
            audio, wall = loop(model, texts, args.voice, args.cores)
            best_loop = max(best_loop, audio / wall)
            print(f"round {r + 1} loop: {audio:.1f} s of audio in {wall:.1f} s = "
                  f"{audio / wall:.3f} audio s/s (1 process, {args.cores} threads)")
            audio, wall = job(model, texts, args.voice, actors, args.threads_per_actor)
            best_job = max(best_job, audio / wall)
            print(f"round {r + 1} job:  {audio:.1f} s of audio in {wall:.1f} s = "
                  f"{audio / wall:.3f} audio s/s ({actors} actors x {args.threads_per_actor} threads)")
    finally:
        ray.shutdown()
    ratio = best_job / best_loop
    print(f"best: loop {best_loop:.3f}, job {best_job:.3f} audio s/s; job / loop = {ratio:.1%} "
          f"(goal >= 90%): {'PASS' if ratio >= 0.9 else 'FAIL'}")


if __name__ == "__main__":
    main()
