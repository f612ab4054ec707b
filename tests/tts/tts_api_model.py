"""A small random Kokoro GGUF for the TTS API tests (tests/tts/test_tts_api.py,
test_tts_bad_input.py): kokoro 0.9.4's KModel with a reduced text side
(2-layer, 64-wide ALBERT; one prosody layer; one resblock kernel) and
max_dur 3, so a phoneme lasts at most three frames and the audio stays
short; the decoder keeps its fixed 1024/512 channels. Seeded, built once per
process (~10 s).

Voices (stored F32, so blends are exact): ``af_alpha`` and ``am_kumo``
(random; American English by their names), ``mix`` = 0.7 af_alpha + 0.3
am_kumo row by row (the blend test's manual blend), and ``flat`` (one style
vector on every row, so the style does not depend on the phoneme count);
the last two have no language (their names are not Kokoro's scheme).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

os.environ.setdefault("HF_HUB_OFFLINE", "1")

F32 = npt.NDArray[np.float32]

VOICES = ("af_alpha", "am_kumo", "mix", "flat")
MIX = {"af_alpha": 0.7, "am_kumo": 0.3}
SEED = 1234


def tiny_config() -> dict[str, Any]:
    """KModel's config: v1.0's vocab and decoder, a small text side."""
    import kokoro_ref as kr

    cfg: dict[str, Any] = kr.kokoro_onnx_config()
    cfg.update(n_layer=1, max_dur=2)
    cfg["plbert"] = {
        "hidden_size": 64,
        "num_attention_heads": 2,
        "intermediate_size": 128,
        "max_position_embeddings": 512,
        "num_hidden_layers": 2,
        "dropout": 0.1,
    }
    cfg["istftnet"] = dict(
        cfg["istftnet"],
        upsample_rates=[2, 2],
        upsample_kernel_sizes=[4, 4],
        resblock_kernel_sizes=[3],
        resblock_dilation_sizes=[[1, 3, 5]],
    )
    return cfg


def tiny_voices() -> dict[str, F32]:
    rng = np.random.default_rng(SEED)
    a = (0.3 * rng.standard_normal((510, 256))).astype(np.float32)
    b = (0.3 * rng.standard_normal((510, 256))).astype(np.float32)
    mix = (np.float32(MIX["af_alpha"]) * a + np.float32(MIX["am_kumo"]) * b).astype(np.float32)
    flat = np.repeat((0.3 * rng.standard_normal((1, 256))).astype(np.float32), 510, axis=0)
    return {"af_alpha": a, "am_kumo": b, "mix": mix, "flat": flat}


def _fingerprint() -> str:
    """What the file depends on: this module, the converter, the kokoro and
    torch versions."""
    from importlib.metadata import version

    from eliza.convert import kokoro as kconv

    h = hashlib.sha256()
    for path in (Path(__file__), Path(kconv.__file__)):
        h.update(path.read_bytes())
    h.update(f"{version('kokoro')} {version('torch')}".encode())
    return h.hexdigest()[:16]


@functools.cache
def tiny_kokoro_gguf(cache_dir: Path | None = None) -> Path:
    """The GGUF (F16 weights, ~120 MB). Kept in ``cache_dir`` (e.g. pytest's
    cache) under a name that changes with its inputs, else written once per
    process to a temporary directory removed at exit."""
    import kokoro_ref as kr

    from eliza.convert import kokoro as kconv

    if cache_dir is None:
        tmp = tempfile.mkdtemp(prefix="eliza-tts-api-")
        atexit.register(shutil.rmtree, tmp, True)
        cache_dir = Path(tmp)
    out = cache_dir / f"tiny-kokoro-{_fingerprint()}.gguf"
    if out.exists():
        return out
    for stale in cache_dir.glob("tiny-kokoro-*.gguf"):
        stale.unlink()
    with warnings.catch_warnings():
        # KModel's own: dropout on a one-layer LSTM, torch's old weight_norm.
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", FutureWarning)
        model = kr.random_kmodel(SEED, tiny_config())
    kconv.convert_state_dict(
        model.state_dict(),
        tiny_config(),
        tiny_voices(),
        out,
        "f16",
        name="tiny random Kokoro",
        voice_type="f32",
    )
    return out


BLEND = {"af_heart": 0.3, "af_bella": 0.7}


def kokoro_js_voices_with_blend(voices_dir: Path) -> dict[str, F32]:
    """The voice files of ``voices_dir`` (kokoro-js's 54) and ``af_blend``,
    :data:`BLEND` row by row in float32: KPipeline's weighted voice."""
    from eliza.convert import kokoro as kconv

    voices = kconv.load_voices(voices_dir)
    voices["af_blend"] = sum(
        (np.float32(w) * voices[name] for name, w in BLEND.items()), np.zeros((510, 256), np.float32)
    )
    return voices


def tiny_kokoro_voices_gguf(voices_dir: Path, cache_dir: Path | None = None) -> Path:
    """The tiny model of :func:`tiny_kokoro_gguf` with the voices of
    :func:`kokoro_js_voices_with_blend` (F32), kept in ``cache_dir`` like it
    (or a temporary directory removed at exit)."""
    import kokoro_ref as kr

    from eliza import models
    from eliza.convert import kokoro as kconv

    if cache_dir is None:
        tmp = tempfile.mkdtemp(prefix="eliza-tts-voices-")
        atexit.register(shutil.rmtree, tmp, True)
        cache_dir = Path(tmp)
    voices = kokoro_js_voices_with_blend(voices_dir)
    tag = hashlib.sha256(f"{_fingerprint()} {models.voices_digest(dict(voices))}".encode()).hexdigest()[:16]
    out = cache_dir / f"tiny-kokoro-voices-{tag}.gguf"
    if out.exists():
        return out
    for stale in cache_dir.glob("tiny-kokoro-voices-*.gguf"):
        stale.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", FutureWarning)
        model = kr.random_kmodel(SEED, tiny_config())
    kconv.convert_state_dict(
        model.state_dict(), tiny_config(), voices, out, "f16", name="tiny random Kokoro", voice_type="f32"
    )
    return out
