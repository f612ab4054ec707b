"""The Gemma 4 reference itself: tests/llm/gemma4_models.py rebuilds the
models tests/data/llm_gemma4_goldens.json was made from (same logits, same
greedy and MTP tokens), and its written-out MTP loop is transformers'
assisted generation (generate(..., assistant_model=...)) count for count
once it keeps the stale K/V row generate() keeps. No libeliza needed. The
MTP loops take minutes in transformers: those tests are ``-m reference``
(CI checks libeliza's rounds against the goldens, test_mtp_gemma4.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

for _module in ("torch", "transformers", "safetensors", "sentencepiece", "tokenizers"):
    pytest.importorskip(_module)

import gemma4_models as g4  # noqa: E402

GOLDENS = Path(__file__).resolve().parents[1] / "data" / "llm_gemma4_goldens.json"


@pytest.fixture(scope="module")
def goldens() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(GOLDENS.read_text())
    return doc


@pytest.mark.parametrize("variant", g4.TARGETS)
def test_rebuilt_targets_give_the_golden_logits(goldens: dict[str, Any], variant: str) -> None:
    gold = goldens["targets"][variant]
    logits = g4.reference_logits(variant, gold["ids"])
    assert len(gold["ids"]) >= 128
    for pos, top in enumerate(gold["top"]):
        ids = [i for i, _ in top]
        np.testing.assert_allclose(logits[pos, ids], [v for _, v in top], atol=1e-4, err_msg=str(pos))
        assert int(logits[pos].argmax()) == ids[0]
    for pos, row in gold["probe"].items():
        np.testing.assert_allclose(logits[int(pos)], row, atol=1e-4)
    for case in gold["greedy"]:
        assert g4.reference_greedy(variant, case["prompt"], len(case["tokens"])) == case["tokens"]


@pytest.mark.reference
@pytest.mark.parametrize("drafter", g4.DRAFTERS)
def test_rebuilt_drafters_give_the_golden_rounds(goldens: dict[str, Any], drafter: str) -> None:
    for case in goldens["drafters"][drafter]["mtp"]:
        got = g4.reference_mtp(drafter, case["prompt"], len(case["tokens"]), case["k"])
        assert got == {"tokens": case["tokens"], "rounds": case["rounds"]}


@pytest.mark.reference
@pytest.mark.parametrize("drafter", g4.DRAFTERS)
def test_mtp_loop_with_the_stale_row_is_transformers_assisted_generation(
    goldens: dict[str, Any], drafter: str
) -> None:
    for case in goldens["drafters"][drafter]["generate"]:
        n_new = len(case["tokens"])
        live = g4.reference_assisted(drafter, case["prompt"], n_new, case["k"])
        assert live == {"tokens": case["tokens"], "rounds": case["rounds"]}
        assert g4.reference_mtp(drafter, case["prompt"], n_new, case["k"], stale_kv=True) == live


@pytest.mark.reference
@pytest.mark.parametrize("drafter", g4.DRAFTERS)
def test_speculative_greedy_output_is_plain_greedy_output(goldens: dict[str, Any], drafter: str) -> None:
    target = g4.DRAFTER_TARGET[drafter]
    for case in goldens["drafters"][drafter]["mtp"]:
        assert g4.reference_greedy(target, case["prompt"], len(case["tokens"])) == case["tokens"]
    accepted = sum(r["accepted"] for c in goldens["drafters"][drafter]["mtp"] for r in c["rounds"])
    assert accepted > 0  # rounds accept some drafts, so the counts say something


def test_the_hidden_state_generate_hands_the_drafter_is_after_the_final_norm() -> None:
    """The fork's second lesson: SinglePositionMultiTokenCandidateGenerator
    feeds hidden_states[-1], which transformers makes the state after the
    final norm (what libeliza's session hands the MTP drafter)."""
    import torch

    model = g4.reference_model("gemma4").model
    with torch.no_grad():
        out = model(torch.tensor([g4.random_ids(20, 3)]), output_hidden_states=True)
        before_norm = out.hidden_states[-2]
    assert torch.equal(out.hidden_states[-1], out.last_hidden_state)
    assert not torch.allclose(model.norm(before_norm), before_norm)
