"""libeliza's forward pass against transformers, on tiny random checkpoints
of every supported architecture converted with ``eliza.convert``.

F32, F16 and BF16 files must give transformers' logits to float32 accuracy
once transformers runs on the same rounded weights; against the original
float32 model they differ only by the rounding of the weights. Q8_0 files
are compared with the original model under bounds about twice the worst
error measured (the engine also rounds activations to 8 bits there).

Measured max |eliza - transformers| over 48 random tokens (3 seeds, 5
variants): F32 5e-6; F16 7e-6 on its rounded weights, 0.007 against the
float32 model; BF16 7e-6 / 0.062; Q8_0 0.26 (relative RMS 0.040).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

for _module in ("torch", "transformers", "gguf", "safetensors", "sentencepiece", "tokenizers"):
    pytest.importorskip(_module)

import tiny_models as tm  # noqa: E402

import eliza  # noqa: E402

OUTTYPES = ("f32", "f16", "bf16", "q8_0")
N_TOKENS = 48  # four Gemma 3 windows

# Max |diff| of the logits against the model on the file's own rounded weights.
EXACT = 1e-3
# Against the original float32 model: (max |diff|, relative RMS of the diff).
AGAINST_FLOAT = {"f32": (1e-3, 1e-4), "f16": (0.02, 0.003), "bf16": (0.15, 0.02), "q8_0": (0.5, 0.08)}

# Texts that end generation in llama.cpp (and so in libeliza).
EOG_TEXTS = ("</s>", "<eos>", "<end_of_turn>", "<|endoftext|>", "<|im_end|>", "<|end_of_text|>", "<|eot_id|>")


def _random_ids(variant: str, n: int, seed: int) -> list[int]:
    # Ids the tokenizer can produce (Qwen's config pads the vocabulary).
    n_tokens = 400 if variant.startswith("qwen") else 512
    return [int(i) for i in np.random.default_rng(seed).integers(0, n_tokens, n)]


def _relative_rms(got: npt.NDArray[np.float32], want: npt.NDArray[np.float32]) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def _eliza_logits(
    variant: str, outtype: str, ids: Sequence[int], n_batch: int = 0
) -> npt.NDArray[np.float32]:
    with eliza.LLM(tm.gguf_file(variant, outtype), n_threads=2, n_batch=n_batch) as llm:
        return llm.logits(ids, all_positions=True)


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("variant", tm.VARIANTS)
def test_logits_match_transformers(variant: str, outtype: str) -> None:
    ids = _random_ids(variant, N_TOKENS, seed=1)
    got = _eliza_logits(variant, outtype, ids)
    want = tm.reference_logits(variant, ids)
    assert got.shape == want.shape
    assert got.dtype == np.float32
    max_diff, max_rel = AGAINST_FLOAT[outtype]
    assert float(np.abs(got - want).max()) <= max_diff
    assert _relative_rms(got, want) <= max_rel
    if outtype != "q8_0":
        rounded = tm.reference_logits(variant, ids, stored_as=outtype)
        assert float(np.abs(got - rounded).max()) <= EXACT


@pytest.mark.parametrize("n_batch", [0, 16])
def test_gemma3_sliding_window_over_a_long_sequence(n_batch: int) -> None:
    # 200 tokens: 16 windows of 12, most of the 256-token context; with
    # n_batch 16 the prompt goes in chunks that straddle window edges.
    ids = _random_ids("gemma3", 200, seed=2)
    got = _eliza_logits("gemma3", "f32", ids, n_batch=n_batch)
    want = tm.reference_logits("gemma3", ids)
    assert float(np.abs(got - want).max()) <= EXACT


def test_gemma3_window_matters() -> None:
    # The comparison above can fail: a model attending globally on every
    # layer gives other logits past the window.
    import torch

    ids = _random_ids("gemma3", 40, seed=3)
    model = tm.reference_model("gemma3")
    with torch.no_grad():
        windowed = model(torch.tensor([ids])).logits[0].numpy()
        saved = model.config.sliding_window
        model.config.sliding_window = 1 << 20
        try:
            unwindowed = model(torch.tensor([ids])).logits[0].numpy()
        finally:
            model.config.sliding_window = saved
    early = tm.GEMMA3_SLIDING_WINDOW
    assert np.abs(windowed[:early] - unwindowed[:early]).max() <= 1e-5
    assert np.abs(windowed[early:] - unwindowed[early:]).max() > 0.1


@pytest.mark.parametrize("variant", tm.VARIANTS)
def test_greedy_decoding_matches_transformers(variant: str) -> None:
    # Token by token through the KV cache (and Gemma 3's window) on both
    # sides; compared as text through libeliza's own detokenizer.
    n_new = 24
    with eliza.LLM(tm.gguf_file(variant, "f32"), n_threads=2) as llm:
        prompt = "The people know the water"
        text = llm.generate(prompt, max_tokens=n_new, temperature=0.0)
        stats = llm.last_stats
        eog = set()
        for t in EOG_TEXTS:
            ids = llm.tokenize(t, add_bos=False, special=True)
            if len(ids) == 1:
                eog.add(ids[0])
        want_ids = tm.reference_greedy(variant, llm.tokenize(prompt), n_new)
        ended = next((i for i, t in enumerate(want_ids) if t in eog), None)
        if ended is not None:
            want_ids = want_ids[:ended]
        want = llm.detokenize(want_ids)
    assert stats is not None
    assert stats.generated_tokens == len(want_ids)
    assert stats.stop_reason == (eliza.StopReason.EOS if ended is not None else eliza.StopReason.MAX_TOKENS)
    # Held-back or cut characters are U+FFFD on either side; a SentencePiece
    # detokenizer drops the dummy-prefix space of a first token.
    assert text.replace("\ufffd", "").lstrip() == want.replace("\ufffd", "").lstrip()
