"""Prompt-prefix reuse across streams of one handle: a prompt that begins
with what the cache holds (the previous prompt and its output) evaluates
only the rest, and generates what a cold handle generates; where a sliding
window's ring can no longer go back that far, the whole prompt runs again.
The bit-for-bit logits comparison is tests/c/test_llm_model.c's
test_llm_session_prompt_reuses_the_held_prefix."""

from __future__ import annotations

import pytest

for _module in ("torch", "transformers", "gguf", "safetensors", "sentencepiece", "tokenizers"):
    pytest.importorskip(_module)

import tiny_models as tm  # noqa: E402

import eliza  # noqa: E402

FIRST = "The people know the water and the water knows the people"


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _stats(llm: eliza.LLM) -> eliza.LLMStats:
    stats = llm.last_stats
    assert stats is not None
    return stats


@pytest.mark.parametrize("variant", ["llama", "gemma3"])
def test_second_prompt_evaluates_only_its_new_tokens(variant: str) -> None:
    path = tm.gguf_file(variant, "f32")
    # max_tokens=1: the one sampled token is never evaluated, so the cache
    # holds exactly the first prompt's tokens.
    second = FIRST + " and more"
    with eliza.LLM(path, n_threads=1, n_batch=64) as llm:
        first_ids, second_ids = llm.tokenize(FIRST), llm.tokenize(second)
        llm.generate(FIRST, max_tokens=1, temperature=0.0)
        stats = _stats(llm)
        assert stats.prompt_evaluated == stats.prompt_tokens == len(first_ids)
        warm = llm.generate(second, max_tokens=8, temperature=0.0)
        stats = _stats(llm)
        kept = min(_common(first_ids, second_ids), len(second_ids) - 1)
        assert kept >= len(first_ids) - 2
        assert stats.prompt_tokens == len(second_ids)
        assert stats.prompt_evaluated == len(second_ids) - kept
    with eliza.LLM(path, n_threads=1, n_batch=64) as cold:
        assert cold.generate(second, max_tokens=8, temperature=0.0) == warm
        assert _stats(cold).prompt_evaluated == len(second_ids)


def test_a_chat_turn_reuses_the_previous_turn_and_its_reply() -> None:
    with eliza.LLM(tm.gguf_file("llama", "f32"), n_threads=1) as llm:
        reply = llm.generate(FIRST, max_tokens=6, temperature=0.0)
        n_first = _stats(llm).prompt_tokens
        llm.generate(FIRST + reply + " then", max_tokens=2, temperature=0.0)
        stats = _stats(llm)
        # the first prompt and the reply's tokens were evaluated before; the
        # tiny tokenizer may split the reply's text differently from the
        # tokens sampled, so only the first prompt is sure to be reused
        assert stats.prompt_evaluated <= stats.prompt_tokens - n_first


def test_gemma3_ring_past_its_reach_runs_the_whole_prompt() -> None:
    window = tm.GEMMA3_SLIDING_WINDOW
    with eliza.LLM(tm.gguf_file("gemma3", "f32"), n_threads=1, n_batch=4) as llm:
        first_ids = llm.tokenize(FIRST * 2)
        assert len(first_ids) > window + 12
        llm.generate(FIRST * 2, max_tokens=1, temperature=0.0)
        # 3 tokens shared of 20+: back past the ring (window + n_batch rows)
        llm.generate("The people", max_tokens=1, temperature=0.0)
        stats = _stats(llm)
        assert stats.prompt_evaluated == stats.prompt_tokens
        # and a prompt 2 tokens shorter than what is held: within reach,
        # back to where the pass of its last token began (passes of 4)
        llm.generate(FIRST * 2, max_tokens=1, temperature=0.0)
        cut = llm.detokenize(first_ids[1:-2])
        n_cut = len(llm.tokenize(cut))
        llm.generate(cut, max_tokens=1, temperature=0.0)
        stats = _stats(llm)
        assert stats.prompt_evaluated == n_cut - (n_cut - 1) // 4 * 4


def test_the_same_prompt_twice_gives_the_same_text() -> None:
    # The second call re-runs the prompt's last pass as it ran the first
    # time (a pass's kernels, and so the last bits of its rows, depend on its
    # row count), so greedy output cannot drift on a near tie.
    with eliza.LLM(tm.gguf_file("llama", "q8_0"), n_threads=2, n_batch=8) as llm:
        prompt = FIRST * 3
        first = llm.generate(prompt, max_tokens=24, temperature=0.0)
        n_prompt = _stats(llm).prompt_tokens
        second = llm.generate(prompt, max_tokens=24, temperature=0.0)
        stats = _stats(llm)
    assert second == first
    assert 1 <= stats.prompt_evaluated <= 8 and stats.prompt_tokens == n_prompt
