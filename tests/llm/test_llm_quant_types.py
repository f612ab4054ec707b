"""Whole-model runs of every weight type: a tiny llama whose matrices are
all of one type against its F32 twin holding the same weights
(quant_models.py), through batched prefill (tile and x8 kernels) and one
token at a time (the per-pair dots); and against llama.cpp on the same
file, from goldens (tests/llm/make_quant_goldens.py) and, under ``pytest -m
reference``, live.

The twins differ only by the activation quantization of the fused dots
(8 bits per element, per 32 or 256 elements). Measured on the AVX2 (Zen 5)
machine over 24 random tokens, logits of standard deviation 1 to 3.8: max
|diff| 0.02 (Q2_K, Q4_K) to 0.20 (IQ3_XXS), relative RMS 0.0006 to 0.033,
the same in prefill and per token; the bounds are about twice the worst.

Against llama.cpp (its F16 KV cache, ours F16; the tests run ours in F32): max |diff| 0.0005 (Q5_K) to
0.15 (IQ4_XS) on the 24 x 512 logits; on the F32 model quantized by
llama.cpp's own llama-quantize (the reference test, where the build of
tests/tools/llama_cpp.py is present; the ftypes that need no importance
matrix) 0.068 (Q5_0) to 0.13 (TQ1_0); every argmax llama.cpp picks with a
top-two margin of 0.5 or more is ours too (the tiny model's logits are
close together: 14 to 24 of the 24 positions of most types are such near
ties, which are excepted and counted).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
LLAMA_MAX_DIFF = 0.3  # against llama.cpp: about twice the worst measured
NEAR_TIE = 0.5  # llama.cpp top-two margins below this are within the noise
GOLDENS = Path(__file__).resolve().parents[1] / "data" / "llm_quant_goldens.json"


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


@pytest.fixture(scope="module")
def goldens() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(GOLDENS.read_text())
    return doc


def _case(goldens: dict[str, Any], qtype: Q) -> dict[str, Any]:
    case: dict[str, Any] = next(c for c in goldens["cases"] if c["type"] == qtype.name)
    return case


def _check_argmax(
    ours: npt.NDArray[np.float32],
    llama_top: npt.NDArray[np.int64],
    margin: npt.NDArray[np.float64],
    what: str,
) -> int:
    """Our argmax is llama.cpp's wherever its margin is not a near tie;
    returns how many positions were near ties."""
    differ = (np.argmax(ours, axis=1) != llama_top) & (margin >= NEAR_TIE)
    assert not differ.any(), f"{what}: argmax differs from llama.cpp at positions {np.flatnonzero(differ)}"
    return int((margin < NEAR_TIE).sum())


@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
def test_quant_type_model_matches_llama_cpp_goldens(qtype: Q, goldens: dict[str, Any]) -> None:
    case = _case(goldens, qtype)
    typed, _ = qm.files(qtype)
    import make_quant_goldens as mg

    assert mg.weights_sha256(typed) == case["weights_sha256"], (
        f"{typed.name} does not hold the weights llama.cpp read for the goldens "
        "(rerun tests/llm/make_quant_goldens.py)"
    )
    ours = _logits(typed, goldens["ids"], 0)
    top = np.array(case["top_ids"])
    probes = np.array(goldens_probe_ids(goldens, case))
    diff_top = np.abs(np.take_along_axis(ours, top, axis=1) - np.array(case["top_logits"]))
    diff_probe = np.abs(ours[:, probes] - np.array(case["probe_logits"]))
    worst = float(max(diff_top.max(), diff_probe.max()))
    assert worst <= LLAMA_MAX_DIFF, f"{qtype.name}: max |ours - llama.cpp| {worst:.3f}"
    _check_argmax(ours, top[:, 0], np.array(case["margin"]), qtype.name)


def goldens_probe_ids(goldens: dict[str, Any], case: dict[str, Any]) -> list[int]:
    """The probe ids make_quant_goldens.py sampled for this vocabulary."""
    import make_quant_goldens as mg

    probes: list[int] = mg.probe_ids(int(case["n_vocab"]))
    return probes


@pytest.mark.reference
@pytest.mark.parametrize("qtype", TYPES, ids=lambda t: t.name)
def test_quant_type_model_matches_llama_cpp_live(qtype: Q) -> None:
    """Every logit against llama.cpp's on the same file (llama-cpp-python,
    loading the libllama of tests/tools/llama_cpp.py through LLAMA_CPP_LIB_PATH)."""
    pytest.importorskip("llama_cpp")
    import make_quant_goldens as mg

    typed, _ = qm.files(qtype)
    ids = mg.token_ids()
    ref = mg.llama_logits(typed, ids)
    ours = _logits(typed, ids, 0)
    worst = float(np.abs(ours - ref).max())
    assert worst <= LLAMA_MAX_DIFF, f"{qtype.name}: max |ours - llama.cpp| {worst:.3f}"
    srt = np.sort(ref, axis=1)
    _check_argmax(ours, np.argmax(ref, axis=1), srt[:, -1] - srt[:, -2], qtype.name)


# llama-quantize's ftypes that need no importance matrix (IQ3_XXS, IQ2_*,
# IQ1_* do; llama-imatrix is not among the tools built).
LLAMA_FTYPES = [
    "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS",
    "IQ3_S", "TQ1_0", "TQ2_0", "MXFP4_MOE",
]  # fmt: skip


def _llama_cpp_build() -> Path | None:
    """The root of the llama.cpp build of tests/tools/llama_cpp.py, or None
    (loaded by path: the module's name is that of llama-cpp-python's package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "llama_cpp_build", Path(__file__).resolve().parents[1] / "tools" / "llama_cpp.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    root: Path | None = module.llama_cpp_dir()
    return root


@pytest.mark.reference
@pytest.mark.parametrize("ftype", LLAMA_FTYPES)
def test_llama_quantized_model_matches_llama_cpp(ftype: str) -> None:
    """The tiny model quantized by llama-quantize (its type mixes included)
    against llama.cpp on that file."""
    import subprocess

    pytest.importorskip("llama_cpp")
    import make_quant_goldens as mg

    root = _llama_cpp_build()
    if root is None:
        pytest.skip("llama.cpp is not built (python tests/tools/llama_cpp.py)")
    base = qm.base_f32()
    out = base.with_name(f"llama-tiny-llama-quantize-{ftype}.gguf")
    run = subprocess.run(
        [str(root / "build" / "bin" / "llama-quantize"), str(base), str(out), ftype],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    ids = mg.token_ids()
    ref = mg.llama_logits(out, ids)
    ours = _logits(out, ids, 0)
    worst = float(np.abs(ours - ref).max())
    assert worst <= LLAMA_MAX_DIFF, f"{ftype}: max |ours - llama.cpp| {worst:.3f}"
    srt = np.sort(ref, axis=1)
    _check_argmax(ours, np.argmax(ref, axis=1), srt[:, -1] - srt[:, -2], ftype)


# The "Q8_0 differs from llama.cpp by 0.07 while the F32 twin matches to
# 0.002" of earlier runs: those ran llama.cpp with its default F16 KV cache
# (llama-cpp-python) against ours in F32. The F16 rounding of K and V is a
# perturbation of ~1e-3 relative; where every matrix product quantizes its
# activations to 8 bits it moves some of them across a rounding boundary, a
# whole step (amax / 127) each, and the logits move ~20x more than in the F32
# model, whose products are continuous in their inputs. With llama.cpp's KV
# cache in F32 (flash attention off) the same Q8_0 file gives llama.cpp's
# logits to float rounding. Measured on the Zen 5 machine, 24 tokens x 512
# logits, ours F32 KV: llama-quantize's Q8_0 file 7e-7 (F32 KV) / 0.072 (F16
# KV); the F32 model 3e-6 / 0.0032. Not explained yet (with F32 KV): a
# Q4_1 or Q5_1 token_embd gives 0.04 / 0.02 in prefill and per token (the
# same file with an F32 or IQ4_NL token_embd: 5e-7; the F32 model with a Q4_1
# or Q5_1 token_embd: 2.5e-6, so the lookup itself agrees and the gap needs
# the 8-bit activations to grow), a Q5_0 token_embd 0.04 in
# prefill only, and llama-quantize's IQ4_NL file 0.037 in prefill at avx2 and
# avx512 but 1e-6 under ELIZA_FORCE_SCALAR. That last one is not an IQ4_NL
# kernel error (its dots equal the reference's to 3.5e-8 of sum |w x|): the
# prefill tile kernels only sum in another float order, and on 12 random
# 32-token prompts libeliza at avx512 against itself under
# ELIZA_FORCE_SCALAR differs by <= 1e-6 on 9 and by 0.025-0.047 on 3 for
# IQ4_NL, on 5 of 12 for Q4_0 and 2 of 12 for Q8_0 (llama-quantize files):
# one 8-bit activation code flipping at a rounding boundary, amplified as
# above. The token_embd gaps may be the same effect against llama.cpp's order.
Q8_0_GAP_BOUNDS = {"F32": (1e-4, 0.01), "Q8_0": (1e-4, 0.02)}  # (F32 KV at most, F16 KV; see the test)


@pytest.mark.reference
@pytest.mark.parametrize("ftype", sorted(Q8_0_GAP_BOUNDS))
def test_q8_0_gap_to_llama_cpp_is_its_f16_kv_cache(ftype: str) -> None:
    import subprocess

    import make_quant_goldens as mg

    from tools.libllama import LibLlama

    lib_llama = LibLlama.load()
    root = _llama_cpp_build()
    if lib_llama is None or root is None:
        pytest.skip("llama.cpp is not built (python tests/tools/llama_cpp.py)")
    path = qm.base_f32()
    if ftype != "F32":
        path = path.with_name(f"llama-tiny-llama-quantize-{ftype}.gguf")
        run = subprocess.run(
            [str(root / "build" / "bin" / "llama-quantize"), str(qm.base_f32()), str(path), ftype],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-2000:]
    ids = mg.token_ids()
    ours = _logits(path, ids, 0)
    with lib_llama.model(path, 2) as m:
        ref_f32 = np.array(m.logits(ids), dtype=np.float32)
        ref_f16 = np.array(m.logits(ids, kv_f16=True), dtype=np.float32)
    exact, f16_gap = Q8_0_GAP_BOUNDS[ftype]
    worst_f32 = float(np.abs(ours - ref_f32).max())
    worst_f16 = float(np.abs(ours - ref_f16).max())
    assert worst_f32 <= exact, f"{ftype}: llama.cpp with an F32 KV cache differs by {worst_f32:.3g}"
    if ftype == "F32":
        assert worst_f16 <= f16_gap, f"F32 model: llama.cpp's F16 KV moves its logits {worst_f16:.3g}"
    else:
        assert worst_f16 >= f16_gap, f"{ftype}: llama.cpp's F16 KV moves its logits only {worst_f16:.3g}"
