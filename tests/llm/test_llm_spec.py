"""Speculative decoding end to end on the tiny random models: every drafter
gives plain greedy output token for token (several draft lengths, drafts
rejected at many positions, Gemma 3's sliding window wrapping with the
smallest batch the draft length allows, with every quantized KV cache type
as well, a stop string inside an accepted
run); with sampling the tokens keep the plain sampler's distribution (a
two-sample chi-square test); bad drafter settings are refused clearly.

The rules themselves, and rejections at every draft position in turn, are
pinned without a model in tests/c/test_llm_spec.c."""

from __future__ import annotations

import functools
import subprocess
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

for _module in ("torch", "transformers", "gguf", "safetensors", "sentencepiece", "tokenizers"):
    pytest.importorskip(_module)

import tiny_models as tm  # noqa: E402

import eliza  # noqa: E402

# Repeats make the n-gram drafter find matches; the random models then
# continue them their own way, so many drafts are refused.
PROMPT = "The people know the water. The people know the water and the"


@functools.cache
def other_gemma3() -> Path:
    """A second tiny Gemma 3 with the same tokenizer and other weights: a
    draft model that disagrees with the target often."""
    from eliza.convert import convert_hf

    root = Path(tempfile.mkdtemp(prefix="eliza-spec-"))
    ckpt = tm.build("gemma3", root / "gemma3-seed1", seed=1)
    return convert_hf(ckpt, root / "gemma3-seed1-f32.gguf", "f32").path


def _drafts() -> dict[str, str]:
    return {
        "ngram": "ngram",
        "model-close": f"model:{tm.gguf_file('gemma3', 'q8_0')}",
        "model-other": f"model:{other_gemma3()}",
    }


def _generate(
    draft: str | None, k: int = 8, n_batch: int = 0, prompt: str = PROMPT, kv_type: str = "f32", **kw: object
) -> tuple[str, eliza.LLMStats]:
    with eliza.LLM(
        tm.gguf_file("gemma3", "f32"), n_threads=2, n_batch=n_batch, draft=draft, draft_max_tokens=k,
        kv_type=kv_type,
    ) as llm:
        text = llm.generate(prompt, temperature=0.0, **kw)  # type: ignore[arg-type]
        stats = llm.last_stats
    assert stats is not None
    return text, stats


@pytest.mark.parametrize("k", [1, 3, 8])
@pytest.mark.parametrize("drafter", ["ngram", "model-close", "model-other"])
def test_speculative_greedy_equals_plain_greedy(drafter: str, k: int) -> None:
    want, plain = _generate(None, max_tokens=200)
    got, spec = _generate(_drafts()[drafter], k=k, max_tokens=200)
    assert got == want
    assert spec.generated_tokens == plain.generated_tokens
    assert spec.stop_reason == plain.stop_reason
    assert plain.draft_tokens == 0
    assert spec.draft_rounds > 0
    assert spec.draft_accepted <= spec.draft_tokens <= k * spec.draft_rounds
    if drafter == "model-other":
        # Drafts were refused (the point of the comparison; the n-gram
        # drafter predicts the random model's loops all too well) ...
        assert spec.draft_accepted < spec.draft_tokens
    # ... and accepted: fewer passes than tokens.
    assert spec.draft_accepted > 0


@pytest.mark.parametrize("drafter", ["ngram", "model-other"])
def test_speculative_greedy_over_the_sliding_window_wrap(drafter: str) -> None:
    # The window is 12 tokens; with n_batch = k + 1 the rings hold only
    # window + k + 1 positions, so every verification pass that is rolled
    # back overwrites ring slots of positions still in use by then.
    k = 6
    want, _ = _generate(None, n_batch=k + 1, max_tokens=220)
    got, spec = _generate(_drafts()[drafter], k=k, n_batch=k + 1, max_tokens=220)
    assert got == want
    assert spec.draft_accepted > 0
    if drafter == "model-other":
        assert spec.draft_tokens > spec.draft_accepted


@pytest.mark.parametrize("kv_type", ["q8_0", "q4_0", "tbq4_0", "tbq3_0"])
def test_speculative_greedy_rolls_back_every_cache_type(kv_type: str) -> None:
    # A rolled-back verification pass leaves its quantized rows behind and
    # the next pass overwrites them; on the sliding layers (head size 32:
    # one block per head) the ring of window + k + 1 slots wraps as well.
    # Over the three drafters some run has drafts both accepted and refused.
    k = 6
    want, _ = _generate(None, n_batch=k + 1, max_tokens=160, kv_type=kv_type)
    runs = []
    for name, draft in _drafts().items():
        got, spec = _generate(draft, k=k, n_batch=k + 1, max_tokens=160, kv_type=kv_type)
        assert got == want, name
        runs.append(spec)
    assert any(0 < s.draft_accepted < s.draft_tokens for s in runs), runs


def test_stop_string_inside_an_accepted_run() -> None:
    # The close draft model agrees with the target on most tokens: the stop
    # string, late in the plain text, ends the speculative text at the same
    # place even when it lies inside a round's accepted tokens.
    # A prompt whose greedy text varies (most of the random model's texts
    # loop on one token); the printable six characters whose first
    # occurrence comes latest.
    prompt = "2024 31415 x=y+1;"
    full, _ = _generate(None, prompt=prompt, max_tokens=120)
    windows = [i for i in range(len(full) - 6) if full[i : i + 6].isascii() and full[i : i + 6].isprintable()]
    at = max(windows, key=lambda i: full.index(full[i : i + 6]))
    stop = full[at : at + 6]
    assert full.index(stop) > 40
    want, plain = _generate(None, prompt=prompt, max_tokens=120, stop=[stop])
    got, spec = _generate(_drafts()["model-close"], k=8, prompt=prompt, max_tokens=120, stop=[stop])
    assert got == want == full[: full.index(stop)]
    assert spec.stop_reason == plain.stop_reason == eliza.StopReason.STRING
    assert spec.generated_tokens == plain.generated_tokens
    assert spec.draft_accepted > 0


def test_max_tokens_and_context_full_cut_runs_like_plain() -> None:
    cases: list[dict[str, Any]] = [{"max_tokens": 37}, {"max_tokens": 0, "context_size": 60}]
    for kw in cases:
        want, plain = _generate(None, **kw)
        got, spec = _generate("ngram", k=8, **kw)
        assert got == want
        assert (spec.generated_tokens, spec.stop_reason) == (plain.generated_tokens, plain.stop_reason)


def _outcomes(draft: str | None, runs: int, seed0: int) -> Counter[str]:
    """How often each text of (up to) 3 sampled tokens comes out, over
    `runs` seeds: the first token is sampled plainly after the prompt, the
    next two by a speculative round (a draft, then the target's token)."""
    seen: Counter[str] = Counter()
    with eliza.LLM(tm.gguf_file("gemma3", "f32"), n_threads=2, draft=draft, draft_max_tokens=4) as llm:
        for r in range(runs):
            text = llm.generate(
                PROMPT, max_tokens=3, temperature=0.6, top_k=0, top_p=1.0, min_p=0.0, seed=seed0 + r
            )
            seen[text] += 1
    return seen


def test_speculative_sampling_keeps_the_distribution() -> None:
    # Two-sample chi-square, outcomes seen fewer than 8 times in all pooled:
    # plain sampling against sampling with a draft model that is right about
    # half the time (so both the acceptance and the residual draw run).
    from scipy.stats import chi2_contingency

    runs = 1500
    plain = _outcomes(None, runs, 0)
    spec = _outcomes(f"model:{tm.gguf_file('gemma3', 'q8_0')}", runs, 10**6)
    common = sorted(t for t in plain.keys() | spec.keys() if plain[t] + spec[t] >= 8)
    table = np.array(
        [
            [plain[t] for t in common] + [runs - sum(plain[t] for t in common)],
            [spec[t] for t in common] + [runs - sum(spec[t] for t in common)],
        ]
    )
    assert table.shape[1] >= 6, "the test needs a spread distribution"
    p_value = chi2_contingency(table)[1]
    assert p_value > 1e-3, f"plain and speculative sampling differ (p = {p_value:.2e})"


def test_bad_drafter_settings_are_refused() -> None:
    path = tm.gguf_file("gemma3", "f32")
    for k in (0, -1, 65, 1000):
        with pytest.raises(eliza.InvalidArgumentError, match="draft_max_tokens"):
            eliza.LLM(path, draft="ngram", draft_max_tokens=k)
    with pytest.raises(eliza.InvalidArgumentError, match="n_batch"):
        eliza.LLM(path, n_batch=8, draft="ngram", draft_max_tokens=8)
    for spec in ("ngram:x", "model", "model:", "lookup", "mtp"):
        with pytest.raises(eliza.InvalidArgumentError, match="draft"):
            eliza.LLM(path, draft=spec)
    with pytest.raises(eliza.ElizaIOError):
        eliza.LLM(path, draft="model:/nonexistent/draft.gguf")


def test_draft_model_with_another_vocabulary_is_refused_naming_both() -> None:
    target = tm.gguf_file("gemma3", "f32")
    draft = tm.gguf_file("qwen2", "f32")
    with eliza.LLM(target) as t, eliza.LLM(draft) as d:
        nt, nd = t.info["n_vocab"], d.info["n_vocab"]
    assert nt != nd
    with pytest.raises(eliza.InvalidArgumentError, match=f"{nd} tokens, the model {nt}"):
        eliza.LLM(target, draft=f"model:{draft}")


@pytest.mark.parametrize("k", [1, 4])
def test_mtp_drafter_through_the_stream_equals_plain_greedy(k: int) -> None:
    # The Gemma 4 assistant drafting for its tiny target through
    # eliza.LLM(draft="mtp:...") (the C driver test_llm_mtp pins the rounds
    # against transformers; this is the public path).
    import gemma4_models as g4

    target, assistant = g4.gguf_file("gemma4"), g4.gguf_file("gemma4_assistant")
    ids = g4.random_ids(20, seed=3)
    runs = []
    for draft in (None, f"mtp:{assistant}"):
        with eliza.LLM(target, n_threads=2, draft=draft, draft_max_tokens=k) as llm:
            prompt = llm.detokenize(ids)
            runs.append((llm.generate(prompt, max_tokens=60, temperature=0.0), llm.last_stats))
    (want, plain), (got, spec) = runs
    assert got == want
    assert plain is not None and spec is not None
    assert spec.generated_tokens == plain.generated_tokens
    assert spec.draft_rounds > 0


def test_mtp_drafter_must_be_a_gemma4_assistant_for_a_gemma4() -> None:
    import gemma4_models as g4

    assert "mtp" in eliza.capabilities()["llm_drafters"]
    with pytest.raises(eliza.InvalidArgumentError, match="not a gemma4-assistant"):
        eliza.LLM(tm.gguf_file("gemma3", "f32"), draft=f"mtp:{tm.gguf_file('gemma3', 'f32')}")
    with pytest.raises(eliza.ElizaError, match="gemma4"):
        eliza.LLM(tm.gguf_file("gemma3", "f32"), draft=f"mtp:{g4.gguf_file('gemma4_assistant')}")


def test_capabilities_and_info_name_the_drafter() -> None:
    assert {"ngram", "model"} <= set(eliza.capabilities()["llm_drafters"])
    with eliza.LLM(tm.gguf_file("gemma3", "f32"), draft="ngram", draft_max_tokens=5) as llm:
        assert (llm.info["draft"], llm.info["draft_max_tokens"]) == ("ngram", 5)
    with eliza.LLM(tm.gguf_file("gemma3", "f32")) as llm:
        assert llm.info["draft"] == "none"


def test_eliza_generate_draft_gives_the_same_text_and_counts_drafts(
    run_cli: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    path = str(tm.gguf_file("gemma3", "f32"))
    common = ("generate", path, PROMPT, "--max-tokens", "60", "--temp", "0", "--threads", "2")
    plain = run_cli(*common)
    spec = run_cli(*common, "--draft", "ngram", "--draft-max", "4")
    assert plain.returncode == spec.returncode == 0, spec.stderr
    assert spec.stdout == plain.stdout
    assert "drafts: " in spec.stderr and "accepted" in spec.stderr
    assert "drafts: " not in plain.stderr
    bad = run_cli(*common, "--draft", "lookup")
    assert bad.returncode == 1 and bad.stderr.startswith("eliza: error: ") and "draft" in bad.stderr
