"""Tiny random Gemma 4 text models and Gemma 4 assistant (MTP) drafters,
built with transformers 5.24 offline, for comparing libeliza and llama.cpp
against the reference implementation (no Gemma 4 weights ship anywhere).

Targets (``Gemma4ForCausalLM``, the tiny Gemma SentencePiece tokenizer of
tiny_models.py, vocab 512, hidden 64, window 12):

    gemma4         7 layers S S F S F S F, the last 2 KV-shared (layer 5 reuses
                   layer 3's K/V, layer 6 layer 4's: llama.cpp assumes the
                   last non-shared layer full, the one before it sliding), per-layer embeddings
                   (8 per layer), head_dim 16 / global_head_dim 32,
                   proportional rope (0.25) on full layers, softcap 5
    gemma4_plain   4 layers S F S F, no KV sharing, no per-layer embeddings,
                   no softcap, global_head_dim 32

Drafters (``Gemma4AssistantForCausalLM`` of the ``gemma4`` target: hidden 32,
so its row width differs from the backbone's 64, the first of the fork's
lessons):

    gemma4_assistant          2 layers S F, full LM head
    gemma4_assistant_masked   the same with the masked embedding (16
                              centroids of 32 tokens, top 4, a random token
                              ordering)

Every parameter and every ``layer_scalar`` is re-drawn with a seed, so a
mistake in a norm, a scale or the rope shows in the logits; the same call
builds the same bytes. A purely random drafter never guesses a random
target's token, which would make acceptance counts trivially zero; these
drafters are random too but lean towards repeating the token they are fed
(the target's embedding of it, through ``pre_projection``, matches its own
LM head row), and random targets often repeat tokens, so rounds accept
anything from none to all of their drafts. Example::

    target = gemma4_models.checkpoint("gemma4")
    drafter = gemma4_models.checkpoint("gemma4_assistant")
    logits = gemma4_models.reference_logits("gemma4", ids)
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import tiny_models as tm

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TARGETS = ("gemma4", "gemma4_plain")
DRAFTERS = ("gemma4_assistant", "gemma4_assistant_masked")
VARIANTS = TARGETS + DRAFTERS
# The target each drafter was made for.
DRAFTER_TARGET = {"gemma4_assistant": "gemma4", "gemma4_assistant_masked": "gemma4"}
GGUF_ARCH = {"gemma4": "gemma4", "gemma4_plain": "gemma4", **{d: "gemma4-assistant" for d in DRAFTERS}}

SLIDING_WINDOW = 12
N_VOCAB_TOKENS = 512  # what the tokenizer produces; every id below it is valid
S, F = "sliding_attention", "full_attention"


def _text_config(variant: str, special: dict[str, int | None]) -> Any:
    from transformers import Gemma4TextConfig

    common: dict[str, Any] = {
        "vocab_size": N_VOCAB_TOKENS,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "global_head_dim": 32,
        "max_position_embeddings": tm.CONTEXT_LENGTH,
        "rms_norm_eps": 1e-6,
        "sliding_window": SLIDING_WINDOW,
        "bos_token_id": special.get("bos"),
        "eos_token_id": special.get("eos"),
        "pad_token_id": special.get("pad"),
    }
    if variant == "gemma4":
        return Gemma4TextConfig(
            num_hidden_layers=7,
            layer_types=[S, S, F, S, F, S, F],
            num_kv_shared_layers=2,
            vocab_size_per_layer_input=N_VOCAB_TOKENS,
            hidden_size_per_layer_input=8,
            final_logit_softcapping=5.0,
            **common,
        )
    if variant == "gemma4_plain":
        return Gemma4TextConfig(
            num_hidden_layers=4,
            layer_types=[S, F, S, F],
            num_kv_shared_layers=0,
            vocab_size_per_layer_input=0,
            hidden_size_per_layer_input=0,
            final_logit_softcapping=None,
            **common,
        )
    if variant in DRAFTERS:
        # The drafter's heads read the target's K/V: same head sizes and KV
        # heads as the target, its own hidden size and query heads.
        common.update(hidden_size=32, intermediate_size=64, num_attention_heads=2)
        return Gemma4TextConfig(
            num_hidden_layers=2,
            layer_types=[S, F],
            num_kv_shared_layers=2,
            vocab_size_per_layer_input=0,
            hidden_size_per_layer_input=0,
            final_logit_softcapping=None,
            **common,
        )
    raise ValueError(f"unknown variant {variant!r}; choose from {VARIANTS}")


def config(variant: str, special: dict[str, int | None]) -> Any:
    """The transformers config of ``variant``."""
    text = _text_config(variant, special)
    if variant not in DRAFTERS:
        return text
    from transformers import Gemma4AssistantConfig

    return Gemma4AssistantConfig(
        text_config=text,
        backbone_hidden_size=64,
        use_ordered_embeddings=variant == "gemma4_assistant_masked",
        num_centroids=16,
        centroid_intermediate_top_k=4,
        architectures=["Gemma4AssistantForCausalLM"],
    )


def randomize(model: Any, seed: int) -> None:
    """Re-draws every parameter (matrices N(0, 1/fan_in), norm weights
    around 1: Gemma 4 multiplies by w), every layer_scalar around 1 and the
    masked embedding's token ordering (a permutation of the vocabulary)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            p.copy_(noise / math.sqrt(p.shape[1]) if p.ndim >= 2 else 1.0 + 0.2 * noise)
        for name, b in sorted(model.named_buffers()):
            if name.endswith("layer_scalar"):
                b.copy_(1.0 + 0.2 * torch.randn(b.shape, generator=gen))
            elif name.endswith("token_ordering"):
                b.copy_(torch.randperm(b.numel(), generator=gen))


def lean_to_repeat(model: Any, target_embed: Any, seed: int) -> None:
    """Makes a randomized drafter lean towards repeating its input token:
    pre_projection maps the target's scaled embedding e(x) by a random A
    (the hidden-state half scaled down), the LM head rows are A e(x) / 8,
    attention and MLP outputs are scaled down, and with a masked embedding
    each centroid is the mean of its cluster's LM head rows."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    n_embd, n_backbone = model.pre_projection.weight.shape[0], target_embed.shape[1]
    a = torch.randn((n_embd, n_backbone), generator=gen) / math.sqrt(n_backbone)
    with torch.no_grad():
        pre = model.pre_projection.weight
        pre[:, :n_backbone] = a
        pre[:, n_backbone:] *= 0.1
        model.lm_head.weight.copy_(target_embed @ a.T)
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight *= 0.1
            layer.mlp.down_proj.weight *= 0.1
        if model.masked_embedding is not None:
            me = model.masked_embedding
            rows = model.lm_head.weight[me.token_ordering.long().view(me.num_centroids, -1)]
            me.centroids.weight.copy_(rows.mean(dim=1))


def build(variant: str, out: Path, seed: int = 0) -> Path:
    """Writes the ``variant`` checkpoint (model and tokenizer) into ``out``."""
    import torch

    transformers = tm._transformers()
    transformers.utils.logging.disable_progress_bar()
    out.mkdir(parents=True, exist_ok=True)
    tok = tm._tokenizer("gemma3", out)
    special = {name: getattr(tok, f"{name}_token_id", None) for name in ("bos", "eos", "pad")}
    cfg = config(variant, special)
    torch.manual_seed(seed)
    cls = transformers.Gemma4AssistantForCausalLM if variant in DRAFTERS else transformers.Gemma4ForCausalLM
    model = cls(cfg).to(torch.float32)
    variant_seed = seed + {v: i for i, v in enumerate(VARIANTS)}[variant]
    randomize(model, variant_seed)
    if variant in DRAFTERS:
        from safetensors.torch import load_file

        target = load_file(str(checkpoint(DRAFTER_TARGET[variant]) / "model.safetensors"))
        lean_to_repeat(model, target["model.embed_tokens.weight"], variant_seed)
    model.eval()
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@functools.cache
def checkpoint(variant: str) -> Path:
    """The ``variant`` checkpoint directory, built once per process."""
    return build(variant, tm._root() / variant)


@functools.cache
def gguf_file(variant: str, outtype: str = "f32") -> Path:
    """``variant`` converted with eliza.convert to ``outtype``, once per process."""
    return tm.convert(checkpoint(variant), variant, outtype)


@functools.cache
def reference_model(variant: str) -> Any:
    """The transformers model of ``variant`` (float32, eval)."""
    import torch

    transformers = tm._transformers()
    cls = transformers.Gemma4AssistantForCausalLM if variant in DRAFTERS else transformers.Gemma4ForCausalLM
    model = cls.from_pretrained(checkpoint(variant), dtype=torch.float32)
    model.eval()
    return model


def random_ids(n: int, seed: int) -> list[int]:
    return [int(i) for i in np.random.default_rng(seed).integers(0, N_VOCAB_TOKENS, n)]


def reference_logits(variant: str, ids: Sequence[int]) -> npt.NDArray[np.float32]:
    """transformers' logits of target ``variant`` for ``ids`` from position
    0, [len(ids), n_vocab]."""
    import torch

    with torch.no_grad():
        out = reference_model(variant)(torch.tensor([list(ids)])).logits[0]
    logits: npt.NDArray[np.float32] = out.numpy().astype(np.float32)
    return logits


def reference_greedy(variant: str, ids: Sequence[int], n_new: int) -> list[int]:
    """transformers' plain greedy continuation of ``ids``, EOS ignored."""
    return tm.reference_greedy_of(reference_model(variant), ids, n_new)


def reference_assisted(drafter: str, ids: Sequence[int], n_new: int, k: int) -> dict[str, Any]:
    """transformers' greedy assisted generation of ``drafter``'s target with
    ``drafter`` drafting ``k`` tokens a round (SinglePositionMultiTokenCandidateGenerator):
    the tokens, and per round the drafted tokens and how many the target
    accepted."""
    import torch
    from transformers.generation import candidate_generator as cg

    target = reference_model(DRAFTER_TARGET[drafter])
    assistant = reference_model(drafter)
    assistant.generation_config.num_assistant_tokens = k
    assistant.generation_config.num_assistant_tokens_schedule = "constant"
    rounds: list[dict[str, Any]] = []
    gen_cls = cg.SinglePositionMultiTokenCandidateGenerator
    get_candidates, update = gen_cls.get_candidates, gen_cls.update_candidate_strategy

    def recording_get(self: Any, input_ids: Any, *args: Any, **kwargs: Any) -> Any:
        cand, logits = get_candidates(self, input_ids, *args, **kwargs)
        if cand.shape[1] > input_ids.shape[1]:
            rounds.append({"drafted": [int(t) for t in cand[0, input_ids.shape[1] :]]})
        return cand, logits

    def recording_update(self: Any, input_ids: Any, scores: Any, num_matches: int) -> Any:
        if rounds and "accepted" not in rounds[-1]:
            rounds[-1]["accepted"] = int(num_matches)
        return update(self, input_ids, scores, num_matches)

    gen_cls.get_candidates = recording_get  # type: ignore[method-assign]
    gen_cls.update_candidate_strategy = recording_update  # type: ignore[method-assign]
    try:
        with torch.no_grad():
            out = target.generate(
                torch.tensor([list(ids)]),
                assistant_model=assistant,
                max_new_tokens=n_new,
                min_new_tokens=n_new,
                do_sample=False,
                eos_token_id=None,
                pad_token_id=0,
            )
    finally:
        gen_cls.get_candidates = get_candidates  # type: ignore[method-assign]
        gen_cls.update_candidate_strategy = update  # type: ignore[method-assign]
    return {"tokens": [int(t) for t in out[0, len(ids) :]], "rounds": rounds}


def reference_mtp(
    drafter: str, ids: Sequence[int], n_new: int, k: int, stale_kv: bool = False
) -> dict[str, Any]:
    """Greedy MTP speculative decoding written out with transformers' own
    target and assistant modules, each round from scratch: the target's
    K/V of positions 0 .. p-1 and its post-final-norm hidden state of
    position p-1, the drafter at position p (the pending token's) for every
    step, drafts as many as generate() would (min(k, tokens left - 1)), the
    longest prefix the target's argmax agrees with accepted, then the
    target's own token. Returns what :func:`reference_assisted` returns.

    generate() hands the drafter the K/V of the verification pass cut to
    the new length, which keeps one row more: at position p, the rejected
    draft's K/V (when a draft was rejected). ``stale_kv`` reproduces that,
    which makes this loop equal generate() count for count; without it the
    drafter sees only the K/V of tokens in the context, as libeliza's
    (and llama.cpp's) do."""
    import torch

    target, assistant = reference_model(DRAFTER_TARGET[drafter]), reference_model(drafter)
    toks, rounds = list(ids), []
    rejected: int | None = None
    with torch.no_grad():
        toks.append(int(target(torch.tensor([toks])).logits[0, -1].argmax()))
        while len(toks) - len(ids) < n_new:
            n = len(toks)
            m = min(k, len(ids) + n_new - n - 1)
            if m <= 0:
                toks.append(int(target(torch.tensor([toks])).logits[0, -1].argmax()))
                continue
            cached = toks[:-1] + ([rejected] if stale_kv and rejected is not None else [])
            out = target.model(torch.tensor([cached]), return_shared_kv_states=True)
            hidden = out.last_hidden_state[:, n - 2 : n - 1]
            drafts, last = [], toks[-1]
            for _ in range(m):
                embd = target.model.embed_tokens(torch.tensor([[last]]))
                step = assistant(
                    inputs_embeds=torch.cat([embd, hidden], dim=-1),
                    position_ids=torch.tensor([[n - 1]]),
                    shared_kv_states=out.shared_kv_states,
                )
                last, hidden = int(step.logits[0, -1].argmax()), step.last_hidden_state
                drafts.append(last)
            verified = target(torch.tensor([toks + drafts])).logits[0, n - 1 :].argmax(dim=-1).tolist()
            a = 0
            while a < m and verified[a] == drafts[a]:
                a += 1
            toks += [*drafts[:a], int(verified[a])]
            rejected = drafts[a] if a < m else None
            rounds.append({"drafted": drafts, "accepted": a})
    return {"tokens": toks[len(ids) : len(ids) + n_new], "rounds": rounds}
