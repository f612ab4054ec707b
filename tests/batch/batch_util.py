"""Constants and inputs shared by the batch tests."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt

TESTS = Path(__file__).resolve().parents[1]
TINY_KOKORO = TESTS / "data" / "kokoro_tiny.gguf"
TINY_VOICE = "tiny_a"


def conversation(seed: int, seconds: float) -> npt.NDArray[np.float32]:
    """Two synthetic speakers taking turns, 16 kHz (tests/diar's generator)."""
    if str(TESTS / "diar") not in sys.path:
        sys.path.insert(0, str(TESTS / "diar"))
    from diar_models_util import speech_like

    return speech_like(seed, seconds)
