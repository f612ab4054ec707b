#!/usr/bin/env python3
"""Digests of libeliza's diarization output on fixed inputs: per case a
SHA-256 of the RTTM that ``diarize`` gives (default options, exclusive,
step 2 s, four speakers forced), and of the raw model outputs
(``segment`` of one and of three 10 s chunks, ``embed`` of 0.5 s and 12 s).
A restructuring that must not change the output is checked by running this
before and after it on one machine:

    python bench/diar_digest.py > before.json
    ... change, rebuild ...
    python bench/diar_digest.py --compare before.json

The inputs are the generated conversations ``--conversations`` (default
conv01_2spk_30s, conv08_3spk_60s_overlap; regenerated with espeak-ng into
a temporary folder) and a deterministic two-voice signal made here.
Outputs depend on the SIMD level, so compare digests of one machine and one
ELIZA_SIMD setting only. Uses the default models (``eliza models fetch``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tts_digest import print_or_compare

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "tests" / "diar" / "dataset"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(REPO / "sdk"))

OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("default", {}),
    ("exclusive", {"exclusive": True}),
    ("step2", {"step": 2.0}),
    ("four", {"num_speakers": 4}),
]


def two_voices(seconds: int = 40, rate: int = 16000) -> Any:
    """Two harmonic voices taking 2.5 s turns, with syllable envelopes and noise."""
    import numpy as np

    t = np.arange(seconds * rate) / rate
    rng = np.random.default_rng(12)
    out = np.zeros_like(t)
    for i, f0 in enumerate((130.0, 240.0)):
        v = sum(np.sin(2 * np.pi * f0 * h * t + h) / h for h in range(1, 7))
        on = (np.floor(t / 2.5) % 2) == i
        out += 0.1 * v * (0.5 + 0.5 * np.sin(2 * np.pi * 3.3 * t + i)) * on
    return (out + 0.005 * rng.standard_normal(t.size)).astype(np.float32)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def digests(threads: int, conversations: list[str]) -> dict[str, Any]:
    import numpy as np

    import eliza
    from eliza.diarize import read_wav

    inputs: list[tuple[str, Any, int]] = [("two_voices", two_voices(), 16000)]
    with tempfile.TemporaryDirectory() as tmp:
        for name in conversations:
            subprocess.run(
                [sys.executable, str(DATASET / "generate.py"), tmp, "--only", name],
                check=True,
                capture_output=True,
            )
            pcm, rate = read_wav(Path(tmp) / f"{name}.wav")
            inputs.append((name, pcm, rate))
    out: dict[str, Any] = {}
    with eliza.Diarizer(n_threads=threads) as d:
        for name, pcm, rate in inputs:
            for label, kw in OPTIONS:
                out[f"{name}/{label}"] = sha(d.diarize(pcm, rate, **kw).to_rttm(name).encode())
        voice = two_voices()
        out["segment/1"] = sha(np.ascontiguousarray(d.segment(voice[None, :160000])).tobytes())
        out["segment/3"] = sha(np.ascontiguousarray(d.segment(voice[:480000].reshape(3, 160000))).tobytes())
        out["embed/0.5s"] = sha(np.ascontiguousarray(d.embed(voice[:8000])).tobytes())
        out["embed/12s"] = sha(np.ascontiguousarray(d.embed(voice[:192000])).tobytes())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--conversations", default="conv01_2spk_30s,conv08_3spk_60s_overlap")
    ap.add_argument("--compare", type=Path, help="a previous run's output: report the cases that differ")
    args = ap.parse_args()
    now = digests(args.threads, [c for c in args.conversations.split(",") if c])
    return print_or_compare(now, args.compare, 36)


if __name__ == "__main__":
    sys.exit(main())
