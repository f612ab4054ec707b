#!/usr/bin/env python3
"""Peak resident set added by opening each engine's default model.

    python bench/open_rss.py [--engines tts,diarizer,llm] [--threads 1]

Each engine opens in a child process of its own: the child imports eliza
(so numpy and the library are resident), records ru_maxrss, opens the
model, and records ru_maxrss again. The difference is what opening the
model costs in peak memory: its mmapped pages that were touched plus any
heap the engine keeps or used on the way. ELIZA_LIBRARY picks the library
(the SDK's default lookup otherwise), so two builds compare by running this
twice.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, resource, sys
import eliza
kind, threads = sys.argv[1], int(sys.argv[2])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if kind == "tts":
    h = eliza.TTS(n_threads=threads)
elif kind == "diarizer":
    h = eliza.Diarizer(n_threads=threads)
else:
    import os
    h = eliza.LLM(os.path.expanduser("~/.cache/eliza/models/gemma-3-270m-q4_k_m.gguf"), n_threads=threads)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"engine": kind, "before_mb": before / 1024, "after_mb": after / 1024}))
h.close()
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default="tts,diarizer,llm")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    print(f"library: {os.environ.get('ELIZA_LIBRARY', '(default lookup)')}")
    for kind in args.engines.split(","):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, kind, str(args.threads)], capture_output=True, text=True, check=True
        ).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(f"{kind:9s} peak RSS {r['before_mb']:7.1f} MB -> {r['after_mb']:7.1f} MB after open: "
              f"+{r['after_mb'] - r['before_mb']:.1f} MB")


if __name__ == "__main__":
    main()
