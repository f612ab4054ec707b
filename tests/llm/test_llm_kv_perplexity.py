"""Perplexity of the real Gemma 3 270M with each KV cache type, against
llama.cpp's llama-perplexity on the same text and chunks (bench/perplexity.py
does the runs; its docstring says where the text comes from). Slow: run with
``-m reference``. Skipped without the model packages, the text (Debian's
python3.11-doc) or, for the llama.cpp half, the llama.cpp build of
tests/tools/llama_cpp.py.

The bounds are what this implementation reaches on 8 chunks of 512 tokens
(docs/llm.md has the full figures), with some room; where they are looser
than the issue's goals (Q8_0 within 0.1% of F16, TBQ4_0 2%, TBQ3_0 10%)
the comment says so.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CTX, CHUNKS = 512, 8


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_perplexity", REPO / "bench" / "perplexity.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_perplexity"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def runs(gemma_path: Path) -> dict[str, Any]:
    bench = _bench()
    if not bench.TUTORIAL.is_dir():
        pytest.skip(f"no {bench.TUTORIAL} (apt-get install python3.11-doc)")
    text = bench.prose_text()
    return {
        "bench": bench,
        "text": text,
        "eliza": bench.compare_caches(gemma_path, text, list(bench.TYPES), CTX, CHUNKS, 2),
    }


@pytest.mark.reference
def test_gemma_perplexity_per_kv_cache_type(runs: dict[str, Any]) -> None:
    ppl = {t: r["ppl"] for t, r in runs["eliza"].items()}
    f16 = ppl["f16"]
    assert abs(ppl["f32"] / f16 - 1) < 0.005
    # Goal 0.1%; measured +0.3%. On this model any change of the cache,
    # down to noise of 1e-6 of a head's RMS, moves the perplexity by a few
    # tenths of a percent either way and gives a KL of about 0.006 against
    # F32 (docs/llm.md, bench/kv_floor.py): Q8_0 is as close to F32 as F16
    # is, which is what can be asserted.
    assert abs(ppl["q8_0"] / f16 - 1) < 0.006
    kl = {t: r["kl_vs_f32"] for t, r in runs["eliza"].items()}
    assert kl["q8_0"] < 1.25 * kl["f16"]
    assert kl["f16"] < kl["tbq4_0"] < kl["tbq3_0"]
    # Goals 2% and 10%; measured +1.46% and +4.96% on 16 chunks (docs/llm.md;
    # +3.0% and +17.7% on 8 chunks before the key smoothing). With the
    # query-weighted smoothing Q4_0 and TBQ4_0 are within each other's
    # noise (8 chunks: 21.81 and 21.86), so their order is not asserted.
    assert ppl["tbq4_0"] / f16 - 1 < 0.045
    assert ppl["tbq3_0"] / f16 - 1 < 0.22
    per_token = {t: r["kv_bytes_per_token"] for t, r in runs["eliza"].items()}
    assert per_token["f16"] * 2 == per_token["f32"]
    assert per_token["tbq3_0"] * 32 == per_token["f32"] * 14 / 4


@pytest.mark.reference
def test_gemma_perplexity_against_llama_cpp(runs: dict[str, Any], gemma_path: Path, tmp_path: Path) -> None:
    bench = runs["bench"]
    exe = bench.llama_perplexity_bin()
    if exe is None:
        pytest.skip("no llama.cpp build (python tests/tools/llama_cpp.py)")
    text_file = tmp_path / "text.txt"
    text_file.write_text(runs["text"], encoding="utf-8")
    # F16 and Q8_0 are the same formats as llama.cpp's: equal within 0.5%.
    # Q4_0 is llama.cpp's block and Hadamard rotation plus our
    # query-weighted key smoothing, which llama.cpp lacks: lower than its
    # (8 chunks, 2026-12-03: 21.81 against 23.37, 6.7% lower).
    for t, bound in (("f16", 0.005), ("q8_0", 0.005)):
        theirs = bench.llama_cpp_perplexity(exe, gemma_path, text_file, t, CTX, CHUNKS, 2)["ppl"]
        ours = runs["eliza"][t]["ppl"]
        assert abs(ours / theirs - 1) < bound, f"{t}: libeliza {ours:.4f}, llama.cpp {theirs:.4f}"
    theirs = bench.llama_cpp_perplexity(exe, gemma_path, text_file, "q4_0", CTX, CHUNKS, 2)["ppl"]
    ours = runs["eliza"]["q4_0"]["ppl"]
    assert ours < theirs, f"q4_0: libeliza {ours:.4f}, llama.cpp {theirs:.4f}"
