"""Diarization error rate of a system on the generated evaluation set
(generate.py), per file and overall, with pyannote.metrics, plus
speaker-count accuracy.

Systems: ``eliza`` (libeliza's eliza_diarize through eliza.Diarizer) and
``baseline`` (bench/diar_baseline.py: the same two models in plain Python,
onnxruntime + resemblyzer + scipy).

Collars: 0 (every frame counts) and 0.25 s on each side of every reference
boundary (the NIST md-eval convention; pyannote.metrics calls that
``collar=0.5``, its total width). Overlapping speech is scored.

Usage::

    python tests/diar/dataset/evaluate.py [--system eliza|baseline] [--data DIR] [--json OUT.json]

The audio is generated into DIR (default: a cache directory) when missing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
# md-eval's "collar 0.25 s" (each side) is pyannote.metrics' collar=0.5.
COLLARS = {"0": 0.0, "0.25": 0.5}

System = Callable[[Path], list[tuple[float, float, int]]]


def default_data_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "eliza" / "diar-eval"


def ensure_audio(data: Path, names: Sequence[str]) -> None:
    missing = [n for n in names if not (data / f"{n}.wav").is_file()]
    if missing:
        subprocess.run([sys.executable, str(HERE / "generate.py"), str(data), "--only", *missing], check=True)


def load_rttm(path: Path) -> Any:
    from pyannote.core import Annotation, Segment

    ann = Annotation(uri=path.stem)
    for line in path.read_text().splitlines():
        f = line.split()
        if f and f[0] == "SPEAKER":
            start, dur = float(f[3]), float(f[4])
            ann[Segment(start, start + dur)] = f[7]
    return ann


def to_annotation(turns: Sequence[tuple[float, float, int]], uri: str) -> Any:
    from pyannote.core import Annotation, Segment

    ann = Annotation(uri=uri)
    for start, end, speaker in turns:
        if end > start:
            ann[Segment(start, end)] = f"S{speaker}"
    return ann


def eliza_system(threads: int, **options: Any) -> System:
    sys.path.insert(0, str(REPO / "sdk"))
    import eliza

    diarizer = eliza.Diarizer(n_threads=threads)

    def run(wav: Path) -> list[tuple[float, float, int]]:
        return [(t.start, t.end, t.speaker) for t in diarizer.diarize(wav, **options)]

    return run


def live_system(threads: int, **options: Any) -> System:
    """The live stream (Diarizer.stream), fed 0.5 s chunks of 16 kHz audio."""
    sys.path.insert(0, str(REPO / "sdk"))
    import eliza
    from eliza.audio import read_audio

    diarizer = eliza.Diarizer(n_threads=threads)

    def run(wav: Path) -> list[tuple[float, float, int]]:
        audio, _ = read_audio(wav, sample_rate=16000)
        turns = []
        with diarizer.stream(**options) as live:
            for at in range(0, len(audio), 8000):
                turns += live.push(audio[at : at + 8000])
            turns += live.finish()
        return [(t.start, t.end, t.speaker) for t in turns]

    return run


def baseline_system(threads: int, **options: Any) -> System:
    sys.path.insert(0, str(REPO / "bench"))
    from diar_baseline import Baseline  # type: ignore[import-not-found]

    baseline = Baseline(threads=threads)

    def run(wav: Path) -> list[tuple[float, float, int]]:
        turns: list[tuple[float, float, int]] = baseline.diarize_file(wav, **options)
        return turns

    return run


def evaluate(system: System, data: Path, names: Sequence[str]) -> dict[str, Any]:
    """Per-file and overall DER at each collar, speaker counts, timing."""
    from pyannote.metrics.diarization import DiarizationErrorRate

    metrics = {k: DiarizationErrorRate(collar=c, skip_overlap=False) for k, c in COLLARS.items()}
    meta = {f["name"]: f for f in json.loads((HERE / "dataset.json").read_text())["files"]}
    rows = []
    total_audio = total_time = 0.0
    for name in names:
        ref = load_rttm(HERE / f"{name}.rttm")
        t0 = time.perf_counter()
        turns = system(data / f"{name}.wav")
        elapsed = time.perf_counter() - t0
        hyp = to_annotation(turns, name)
        row: dict[str, Any] = {"name": name, "seconds": elapsed, "duration": meta[name]["duration"]}
        for key, metric in metrics.items():
            row[f"der_{key}"] = float(metric(ref, hyp, uem=None))
        row["true_speakers"] = len(ref.labels())
        row["found_speakers"] = len(hyp.labels())
        rows.append(row)
        total_audio += meta[name]["duration"]
        total_time += elapsed
    overall = {f"der_{k}": float(abs(m)) for k, m in metrics.items()}
    overall["speaker_count_accuracy"] = sum(r["true_speakers"] == r["found_speakers"] for r in rows) / len(
        rows
    )
    overall["rtf"] = total_time / total_audio
    return {"files": rows, "overall": overall}


def print_report(result: dict[str, Any], title: str) -> None:
    print(f"== {title}")
    print(f"{'file':36} {'dur s':>6} {'DER c0':>7} {'DER c.25':>8} {'spk':>7} {'RTF':>6}")
    for r in result["files"]:
        print(
            f"{r['name']:36} {r['duration']:6.0f} {100 * r['der_0']:6.2f}% {100 * r['der_0.25']:7.2f}% "
            f"{r['found_speakers']:>3}/{r['true_speakers']:<3} {r['seconds'] / r['duration']:6.3f}"
        )
    o = result["overall"]
    print(
        f"{'overall':36} {'':6} {100 * o['der_0']:6.2f}% {100 * o['der_0.25']:7.2f}% "
        f"{100 * o['speaker_count_accuracy']:5.0f}%  {o['rtf']:6.3f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--system", choices=("eliza", "live", "baseline"), default="eliza")
    parser.add_argument("--data", type=Path, default=None, help="directory of the generated WAV files")
    parser.add_argument("--only", nargs="*", metavar="NAME")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--threshold", type=float, default=None)
    parser.add_argument("--step", type=float, default=None, help="window step, seconds")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    data = args.data or default_data_dir()
    meta = json.loads((HERE / "dataset.json").read_text())
    names = [f["name"] for f in meta["files"] if not args.only or f["name"] in args.only]
    ensure_audio(data, names)
    options = {k: v for k, v in (("threshold", args.threshold), ("step", args.step)) if v is not None}
    make = {"eliza": eliza_system, "live": live_system, "baseline": baseline_system}[args.system]
    result = evaluate(make(args.threads, **options), data, names)
    result["system"] = args.system
    result["options"] = options
    print_report(result, f"{args.system} on {len(names)} files ({data})")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
