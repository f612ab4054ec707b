"""Speaker identification on the real meeting excerpts (see evaluate_real.py
for the data): calibration of ``identify_threshold`` on the train split and
identification accuracy per split.

For every reference speaker of a file with a stretch of at least
``ENROLL_SECONDS`` where nobody else speaks, the first such stretch is the
enrolment audio (``Diarizer.enroll``); the file is then diarized with every
enrolment stretch silenced, so speakers are identified from their other
segments only. Each found speaker is mapped to a reference speaker by
pyannote.metrics' optimal mapping; it is identified correctly when it
carries the enrolled name of its reference speaker, or no name when that
speaker was not enrolled (or it maps to nobody).

Calibration (train only): the cosine distances of every found speaker's
centroid to every enrolled voice of its file, labelled same / different
speaker by the mapping; the threshold is the one that classifies most pairs
right.

    python tests/diar/real/identify_real.py [--threshold D] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evaluate_real import fetch, load_split

RATE = 16000
# Shortest clean reference stretch used to enroll a speaker (seconds).
ENROLL_SECONDS = 2.0


def enrolment_stretches(ref: Any) -> dict[str, tuple[float, float]]:
    """speaker -> the first stretch of >= ENROLL_SECONDS where only they speak."""
    out: dict[str, tuple[float, float]] = {}
    for segment, _, label in ref.itertracks(yield_label=True):
        if label in out:
            continue
        others = ref.subset([x for x in ref.labels() if x != label]).get_timeline().support()
        free = segment
        pieces = [free]
        for o in others:
            pieces = [p for q in pieces for p in (q.__class__(q.start, min(q.end, o.start)),
                                                  q.__class__(max(q.start, o.end), q.end)) if p.duration > 0]
        best = max(pieces, key=lambda p: p.duration, default=None)
        if best is not None and best.duration >= ENROLL_SECONDS:
            out[label] = (best.start, best.end)
    return out


def run_file(d: Any, f: dict[str, Any], threshold: float | None) -> dict[str, Any]:
    """Enrols the file's speakers, identifies them; the pairs for calibration."""
    from pyannote.core import Annotation
    from pyannote.metrics.diarization import DiarizationErrorRate

    from eliza import InvalidArgumentError
    from eliza.diarize import read_wav

    audio, rate = read_wav(f["wav"])
    if rate != RATE:
        raise SystemExit(f"{f['wav']}: {rate} Hz, not {RATE}")
    stretches = enrolment_stretches(f["ref"])
    for label, (a, b) in list(stretches.items()):  # too little speech for the segmentation: not enrolled
        try:
            d.enroll("probe", audio[int(a * RATE) : int(b * RATE)], RATE)
        except InvalidArgumentError:
            del stretches[label]
        d.unenroll()
    names = {label: f"voice{i}" for i, label in enumerate(sorted(stretches))}
    silenced = audio.copy()
    for a, b in stretches.values():
        silenced[int(a * RATE) : int(b * RATE)] = 0.0
    opts = {} if threshold is None else {"identify_threshold": threshold}

    # Each voice alone: the distance of every found speaker to it.
    pairs_of: dict[str, list[float]] = {}
    for label, name in names.items():
        d.unenroll()
        a, b = stretches[label]
        d.enroll(name, audio[int(a * RATE) : int(b * RATE)], RATE)
        pairs_of[label] = d.diarize(silenced, RATE, **opts).distances
    d.unenroll()
    for label, name in names.items():
        a, b = stretches[label]
        d.enroll(name, audio[int(a * RATE) : int(b * RATE)], RATE)
    turns = d.diarize(silenced, RATE, **opts)
    numbered = Annotation(uri=f["uri"])
    for i, t in enumerate(turns):
        numbered[_segment(t.start, t.end), i] = t.speaker
    uem = f["uem"]
    mapping = DiarizationErrorRate().optimal_mapping(f["ref"], numbered, uem=uem) if len(numbered) else {}
    correct = 0
    pairs = []
    labels = sorted(names)
    for s in turns.speakers:
        truth = mapping.get(s)
        want = names.get(truth, "") if truth is not None else ""
        got = turns.names[s] if turns.names[s] in names.values() else ""
        correct += got == want
        for label, distances in pairs_of.items():
            if s < len(distances):
                pairs.append({"same": truth == label, "distance": float(distances[s])})
    d.unenroll()
    return {"uri": f["uri"], "found": len(turns.speakers), "correct": correct, "enrolled": len(names),
            "true_speakers": len(f["ref"].labels()), "pairs": pairs,
            # For identify_at: [found, enrolled] distances, and each found speaker's true voice index.
            "distances": [[pairs_of[label][s] for label in labels] for s in turns.speakers],
            "truth": [labels.index(mapping[s]) if mapping.get(s) in names else -1 for s in turns.speakers]}


def identify_at(rows: list[dict[str, Any]], threshold: float) -> float:
    """Identification accuracy at another threshold, with the library's
    one-to-one matching (closest pair first) redone on the stored distances."""
    right = total = 0
    for r in rows:
        dist = np.array(r["distances"], dtype=float).reshape(len(r["truth"]), r["enrolled"])
        voice = [-1] * len(r["truth"])
        taken: set[int] = set()
        order = sorted((dist[s, v], s, v) for s in range(dist.shape[0]) for v in range(dist.shape[1]))
        for dv, s, v in order:
            if dv <= threshold and voice[s] < 0 and v not in taken:
                voice[s] = v
                taken.add(v)
        right += sum(a == b for a, b in zip(voice, r["truth"]))
        total += len(r["truth"])
    return right / max(total, 1)


def _segment(a: float, b: float) -> Any:
    from pyannote.core import Segment

    return Segment(a, b)


def best_threshold(pairs: list[dict[str, Any]]) -> tuple[float, float]:
    """The distance cut that classifies most pairs right (same: <= cut), and its accuracy."""
    d = np.array([p["distance"] for p in pairs])
    same = np.array([p["same"] for p in pairs])
    best = (0.0, -1.0)
    for cut in np.unique(np.concatenate([d, [0.0]])):
        acc = float(((d <= cut) == same).mean())
        if acc > best[1]:
            best = (float(cut), acc)
    return best


def identify_split(d: Any, files: list[dict[str, Any]], threshold: float | None) -> dict[str, Any]:
    """run_file over the files, with the split's totals and the threshold sweep."""
    rows = [run_file(d, f, threshold) for f in files]
    pairs = [p for r in rows for p in r["pairs"]]
    found = sum(r["found"] for r in rows)
    return {
        "files": rows,
        "identification_accuracy": sum(r["correct"] for r in rows) / max(found, 1),
        "found_speakers": found,
        "enrolled": sum(r["enrolled"] for r in rows),
        "same_pairs": int(sum(p["same"] for p in pairs)),
        "different_pairs": int(sum(not p["same"] for p in pairs)),
        "best_threshold": best_threshold(pairs) if pairs else None,
        "accuracy_by_threshold": {f"{t:.2f}": identify_at(rows, t) for t in np.arange(0.0, 0.61, 0.02)},
    }


def main(argv: list[str] | None = None) -> int:
    import eliza

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threshold", type=float, default=None,
                        help="identify_threshold (default: the library's)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    data = fetch()
    results: dict[str, Any] = {}
    with eliza.Diarizer(n_threads=args.threads) as d:
        for name, splits in (("train", ["train"]), ("heldout", ["development", "test"])):
            files = [f for s in splits for f in load_split(data, s)]
            results[name] = identify_split(d, files, args.threshold)
            pairs = [p for r in results[name]["files"] for p in r["pairs"]]
            found = results[name]["found_speakers"]
            same = [p["distance"] for p in pairs if p["same"]]
            diff = [p["distance"] for p in pairs if not p["same"]]
            print(f"{name}: {results[name]['enrolled']} voices enrolled, {found} speakers found, "
                  f"identified right {100 * results[name]['identification_accuracy']:.1f}%")
            print(f"  same-speaker distance median {np.median(same) if same else float('nan'):.3f}, "
                  f"different {np.median(diff) if diff else float('nan'):.3f}; "
                  f"best cut {results[name]['best_threshold']}")
            sweep = results[name]["accuracy_by_threshold"]
            print("  accuracy by threshold: " + " ".join(f"{t}:{100 * a:.0f}%" for t, a in sweep.items()))
            for r in results[name]["files"]:
                print(f"  {r['uri']}: {r['correct']}/{r['found']} right, {r['enrolled']} enrolled of "
                      f"{r['true_speakers']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
