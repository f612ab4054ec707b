"""Whole-model runs of every weight type: a tiny llama whose matrices are
all of one type against its F32 twin holding the same weights
(quant_models.py), through batched prefill (tile and x8 kernels) and one
token at a time (the per-pair dots).

The twins differ only by the activation quantization of the fused dots
(8 bits per element, per 32 or 256 elements). Measured on the AVX2 (Zen 5)
machine over 24 random tokens, logits of standard deviation 1 to 3.8: max
|diff| 0.02 (Q2_K, Q4_K) to 0.20 (IQ3_XXS), relative RMS 0.0006 to 0.033,
the same in prefill and per token; the bounds are about twice the worst.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

for _module in ("torch", "transformers", "gguf", "safetensors", "sentencepiece", "tokenizers"):
    pytest.importorskip(_module)

import quant_models as qm  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402

import eliza  # noqa: E402

TYPES = [
    Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.IQ4_NL, Q.IQ4_XS,
    Q.TQ1_0, Q.TQ2_0, Q.MXFP4, Q.IQ3_XXS, Q.IQ3_S, Q.IQ2_XXS, Q.IQ2_XS, Q.IQ2_S, Q.IQ1_S, Q.IQ1_M,
]  # fmt: skip
MAX_DIFF = 0.4
REL_RMS = 0.065
N_TOKENS = 24


def _logits(path: Path, ids: list[int], n_batch: int) -> npt.NDArray[np.float32]:
    with eliza.LLM(path, n_threads=2, n_batch=n_batch) as llm:
        out: npt.NDArray[np.float32] = llm.logits(ids, all_positions=True)
    return out


@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
def test_quant_type_model_matches_its_f32_twin(qtype: Q) -> None:
    typed, twin = qm.files(qtype)
    ids = [int(i) for i in np.random.default_rng(3).integers(0, 512, N_TOKENS)]
    want = _logits(twin, ids, 0)
    for n_batch in (0, 1):  # prefill kernels, then the per-token dots
        got = _logits(typed, ids, n_batch)
        diff = np.abs(got - want)
        rel = float(np.linalg.norm(got - want) / np.linalg.norm(want))
        assert float(diff.max()) <= MAX_DIFF and rel <= REL_RMS, (
            f"{qtype.name} n_batch={n_batch}: max |diff| {diff.max():.3f}, relative RMS {rel:.4f}"
        )
