#!/usr/bin/env python3
"""Digests of libeliza's TTS output on a fixed set of cases (text and
phoneme input, American and British English, Spanish, a blend, a speed, a
long line, punctuation only): per case the chunk count, a SHA-256 of the
stream's chunks (phonemes and audio), of ``synthesize``'s audio and of
``phonemize``'s lines. A restructuring that must not change the audio is
checked by running this before and after it on one machine:

    python bench/tts_digest.py > before.json
    ... change, rebuild ...
    python bench/tts_digest.py --compare before.json

Audio depends on the SIMD level, so compare digests of one machine and one
ELIZA_SIMD setting only. Uses the default model (``eliza models fetch``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(REPO / "sdk"))

REPLY = (
    "Of course, I can help with that: the meeting has moved to Thursday at three in the afternoon. "
    "It will be in the small conference room on the second floor. "
    "Would you like me to send a reminder to the whole team?"
)
LONG = " ".join(["The quick brown fox, who had been running all day, jumps over the lazy dog"] * 9) + "."
CASES: list[tuple[str, dict[str, Any]]] = [
    ("reply", {"text": REPLY, "voice": "af_heart", "seed": 0}),
    ("reply-no-noise", {"text": REPLY, "voice": "am_adam", "no_noise": True}),
    ("gb", {"text": "Hello there, my friend. It's a lovely day; isn't it?\n\nYes.", "voice": "bf_emma"}),
    ("long", {"text": LONG, "voice": "af_bella", "seed": 1}),
    ("es", {"text": "Hola, ¿cómo estás? Muy bien, gracias.", "voice": "ef_dora", "seed": 2}),
    ("blend", {"text": "Two voices, blended into one.", "voice": "af_heart:0.3,af_bella:0.7", "seed": 5}),
    (
        "phonemes",
        {
            "text": "hˈɛloʊ wˈɜɹld, ðɪs ɪz ɐ tˈɛst ʌv ðə fənˈimz pˈæθ, wɪð ɐ kˈʌt.",  # noqa: RUF001
            "voice": "af_heart",
            "phonemes": True,
            "seed": 9,
        },
    ),
    (
        "speed",
        {
            "text": "Faster speech, please, for this long enough sentence here.",
            "voice": "af_heart",
            "speed": 1.3,
            "seed": 4,
        },
    ),
    ("punctuation", {"text": "... !!! ,,,", "voice": "af_heart", "seed": 0}),
]


def digests(threads: int) -> dict[str, list[Any]]:
    import numpy as np

    import eliza

    out: dict[str, list[Any]] = {}
    with eliza.TTS(n_threads=threads) as tts:
        for name, case in CASES:
            kw = dict(case)
            text = kw.pop("text")
            stream = hashlib.sha256()
            n = 0
            for chunk in tts.stream(text, **kw):
                stream.update(chunk.phonemes.encode())
                stream.update(np.ascontiguousarray(chunk.audio).tobytes())
                n += 1
            audio = tts.synthesize(text, **kw)
            lines = "" if kw.get("phonemes") else tts.phonemize(text, voice=kw.get("voice"))
            out[name] = [
                n,
                stream.hexdigest()[:16],
                hashlib.sha256(audio.tobytes()).hexdigest()[:16],
                hashlib.sha256(lines.encode()).hexdigest()[:16],
            ]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--compare", type=Path, help="a previous run's output: report the cases that differ")
    args = ap.parse_args()
    return print_or_compare(digests(args.threads), args.compare)


def print_or_compare(now: dict[str, Any], compare: Path | None, width: int = 16) -> int:
    """Prints the digests as JSON, or with ``compare`` (an earlier run's
    output) whether each case is identical; 1 when some case differs."""
    if not compare:
        print(json.dumps(now, indent=1))
        return 0
    before = json.loads(compare.read_text(encoding="utf-8"))
    differ = [name for name in now if before.get(name) != now[name]]
    for name in now:
        print(f"{name:{width}s} {'DIFFERS' if name in differ else 'identical'}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
