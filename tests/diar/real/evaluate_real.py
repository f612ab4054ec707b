"""Diarization error rate on real recorded speech: the fourteen 30 s meeting
excerpts (with RTTM references and UEMs) that ship in the source
distribution of ``pyannote-audio==4.0.7`` under ``tests/data/``, split by its
``database.yml`` into train (trn00..trn09), development (dev00, dev01) and
test (tst00, tst01). Tune only on train; the development + test figure is
the honest one.

The sdist is fetched with pip once into a cache directory (never
committed): ``$ELIZA_DIAR_REAL`` or ``~/.cache/eliza/diar-real``.

    python tests/diar/real/evaluate_real.py [--split train|heldout|all] [--json OUT]

Scores: pyannote.metrics' DER inside each file's UEM with overlap included,
at no collar and at a 0.25 s collar each side, per file and per split, and
the share of files whose speaker count is exact.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
VERSION = "4.0.7"
__all__ = [
    "COLLARS",
    "cache_dir",
    "eliza_system",
    "evaluate",
    "fetch",
    "load_split",
    "miss_breakdown",
    "print_components",
    "print_report",
    "to_annotation",
]

# The generated set's evaluation: its collars, systems and Annotation helper.
sys.path.insert(0, str(HERE.parent / "dataset"))
from evaluate import COLLARS, System, eliza_system, live_system, to_annotation  # noqa: E402


def cache_dir() -> Path:
    env = os.environ.get("ELIZA_DIAR_REAL")
    return Path(env) if env else Path.home() / ".cache" / "eliza" / "diar-real"


def fetch(root: Path | None = None) -> Path:
    """The directory of the sdist's tests/data (fetched once)."""
    root = root or cache_dir()
    data = root / "data"
    if (data / "database.yml").is_file():
        return data
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"pyannote-audio=={VERSION}",
                "-d",
                tmp,
            ],
            check=True,
        )
        sdist = next(Path(tmp).glob("pyannote_audio-*.tar.gz"))
        prefix = f"{sdist.name[: -len('.tar.gz')]}/tests/data/"
        unpacked = Path(tmp) / "data"
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
            for m in members:
                m.name = m.name[len(prefix) :]
            tar.extractall(unpacked, members=members, filter="data")
        unpacked.rename(data)
    return data


def _uri_key(uri: str) -> str:
    # The list spells the first train file "trñ00", its RTTM and UEM "trn00".
    return uri.replace("ñ", "n")


def load_split(data: Path, split: str) -> list[dict[str, Any]]:
    """The files of one split: uri, wav path, reference Annotation, UEM Timeline."""
    from pyannote.core import Annotation, Segment, Timeline

    uris = [u.strip() for u in (data / f"debug.{split}.lst").read_text(encoding="utf-8").split() if u.strip()]
    refs: dict[str, Any] = {}
    for line in (data / f"debug.{split}.rttm").read_text(encoding="utf-8").splitlines():
        f = line.split()
        if f and f[0] == "SPEAKER":
            start, dur = float(f[3]), float(f[4])
            refs.setdefault(f[1], Annotation(uri=f[1]))[Segment(start, start + dur)] = f[7]
    uems: dict[str, Any] = {}
    for line in (data / f"debug.{split}.uem").read_text(encoding="utf-8").splitlines():
        f = line.split()
        if f:
            uems.setdefault(f[0], Timeline(uri=f[0])).add(Segment(float(f[2]), float(f[3])))
    files = []
    for uri in uris:
        key = _uri_key(uri)
        files.append(
            {
                "uri": key,
                "wav": data / f"{uri}.wav",
                "ref": refs.get(key, Annotation(uri=key)),
                "uem": uems[key],
            }
        )
    return files


def miss_breakdown(ref: Any, hyp: Any, uem: Any, step: float = 0.01) -> dict[str, float]:
    """Missed speaker time (seconds, on a grid of ``step``) where the output
    has nobody speaking ("undetected") and where it has fewer speakers than
    the reference but someone ("overlap"), and the reference speaker time
    beyond two at once ("beyond_two"), which no output of a segmentation
    model with at most two speakers per frame can recover."""
    import numpy as np

    end = max(s.end for s in uem)
    n = int(np.ceil(end / step))
    t = (np.arange(n) + 0.5) * step
    inside = np.zeros(n, bool)
    for s in uem:
        inside |= (t >= s.start) & (t < s.end)

    def count(ann: Any) -> Any:
        c = np.zeros(n, int)
        for seg, _, _ in ann.itertracks(yield_label=True):
            c += (t >= seg.start) & (t < seg.end)
        return c

    r, h = count(ref), count(hyp)
    undetected = float(np.sum(r[inside & (h == 0)]) * step)
    overlap = float(np.sum(np.maximum(r - h, 0)[inside & (h > 0)]) * step)
    beyond_two = float(np.sum(np.maximum(r - 2, 0)[inside]) * step)
    return {"miss_undetected": undetected, "miss_overlap": overlap, "miss_beyond_two": beyond_two}


def evaluate(
    system: System, files: Sequence[dict[str, Any]], oracle_count: Callable[[int], System] | None = None
) -> dict[str, Any]:
    """Scores system on files; oracle_count (num_speakers -> system), when
    given, runs each file with its reference speaker count instead."""
    from pyannote.metrics.diarization import DiarizationErrorRate

    metrics = {k: DiarizationErrorRate(collar=c, skip_overlap=False) for k, c in COLLARS.items()}
    components = DiarizationErrorRate(collar=0.0, skip_overlap=False)
    rows = []
    total_audio = total_time = 0.0
    for f in files:
        run = oracle_count(len(f["ref"].labels())) if oracle_count else system
        t0 = time.perf_counter()
        turns = run(f["wav"])
        elapsed = time.perf_counter() - t0
        hyp = to_annotation(turns, f["uri"])
        duration = float(f["uem"].duration())
        row: dict[str, Any] = {"name": f["uri"], "seconds": elapsed, "duration": duration}
        for key, metric in metrics.items():
            row[f"der_{key}"] = float(metric(f["ref"], hyp, uem=f["uem"]))
        detail = components(f["ref"], hyp, uem=f["uem"], detailed=True)
        for key in ("missed detection", "false alarm", "confusion", "total"):
            row[key.replace(" ", "_")] = float(detail[key])
        row.update(miss_breakdown(f["ref"], hyp, f["uem"]))
        row["true_speakers"] = len(f["ref"].labels())
        row["found_speakers"] = len(hyp.labels())
        rows.append(row)
        total_audio += duration
        total_time += elapsed
    overall: dict[str, float] = {f"der_{k}": float(abs(m)) for k, m in metrics.items()}
    overall["speaker_count_accuracy"] = sum(r["true_speakers"] == r["found_speakers"] for r in rows) / max(
        len(rows), 1
    )
    overall["rtf"] = total_time / max(total_audio, 1e-9)
    for key in (
        "missed_detection",
        "false_alarm",
        "confusion",
        "total",
        "miss_undetected",
        "miss_overlap",
        "miss_beyond_two",
    ):
        overall[key] = sum(r[key] for r in rows)
    return {"files": rows, "overall": overall}


def print_report(result: dict[str, Any], title: str) -> None:
    print(f"== {title}")
    print(f"{'file':10} {'DER c0':>7} {'DER c.25':>8} {'spk':>7} {'RTF':>6}")
    for r in result["files"]:
        print(
            f"{r['name']:10} {100 * r['der_0']:6.2f}% {100 * r['der_0.25']:7.2f}% "
            f"{r['found_speakers']:>3}/{r['true_speakers']:<3} {r['seconds'] / r['duration']:6.3f}"
        )
    o = result["overall"]
    print(
        f"{'overall':10} {100 * o['der_0']:6.2f}% {100 * o['der_0.25']:7.2f}% "
        f"{100 * o['speaker_count_accuracy']:5.0f}%  {o['rtf']:6.3f}"
    )


def print_components(result: dict[str, Any], title: str) -> None:
    """Seconds of each DER component (collar 0) per file and in all."""
    print(f"== {title}: seconds of reference speaker time, collar 0")
    print(
        f"{'file':10} {'ref':>6} {'missed':>7} {'(none)':>7} {'(ovl)':>7} {'(>2)':>6} "
        f"{'f.alarm':>7} {'confus':>7}"
    )
    for r in [*result["files"], {"name": "overall", **result["overall"]}]:
        print(
            f"{r['name']:10} {r['total']:6.1f} {r['missed_detection']:7.2f} {r['miss_undetected']:7.2f} "
            f"{r['miss_overlap']:7.2f} {r['miss_beyond_two']:6.2f} {r['false_alarm']:7.2f} "
            f"{r['confusion']:7.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--split", choices=("train", "heldout", "all"), default="all")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--threshold", type=float, default=None)
    parser.add_argument("--live", action="store_true", help="score the live stream (Diarizer.stream)")
    parser.add_argument("--step", type=float, default=None, help="window step, seconds")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--components", action="store_true", help="also print missed / false alarm / confusion seconds"
    )
    parser.add_argument(
        "--oracle-count", action="store_true", help="give each file its reference speaker count (diagnosis)"
    )
    args = parser.parse_args(argv)
    data = fetch()
    options = {k: v for k, v in (("threshold", args.threshold), ("step", args.step)) if v is not None}
    make = live_system if args.live else eliza_system
    system = make(args.threads, **options)
    oracle = (lambda k: make(args.threads, num_speakers=k, **options)) if args.oracle_count else None
    groups = {"train": ["train"], "heldout": ["development", "test"]}
    chosen = ["train", "heldout"] if args.split == "all" else [args.split]
    results = {}
    for name in chosen:
        files = [f for split in groups[name] for f in load_split(data, split)]
        results[name] = evaluate(system, files, oracle)
        print_report(results[name], f"libeliza on the {name} split ({len(files)} files)")
        if args.components:
            print_components(results[name], name)
    if args.json:
        args.json.write_text(json.dumps({"options": options, "splits": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
