"""Tiny random transformers checkpoints, with tiny tokenizers trained here,
for comparing libeliza against the reference implementation without any
download (HF_HUB_OFFLINE=1).

Each variant is a real ``save_pretrained`` directory (config.json,
model.safetensors, tokenizer files) of the shape the converter meets in the
wild, only small: hidden 64, a handful of layers, grouped-query attention,
random weights scaled so activations and logits are O(1) (a mistake in rope,
norms or attention then shows in the logits). Everything is seeded: the same
call builds the same bytes.

    llama    LlamaForCausalLM, SentencePiece BPE (byte fallback), untied output
    llama3   LlamaForCausalLM, byte-level BPE ("llama-bpe"), llama 3 rope
             scaling (rope_freqs), tied output
    qwen2    Qwen2ForCausalLM, byte-level BPE ("qwen2"), q/k/v biases, tied,
             config vocab larger than the tokenizer's (padding)
    qwen3    Qwen3ForCausalLM, byte-level BPE, q/k norms, head_dim 32 != 64/4
    gemma3   Gemma3ForCausalLM, SentencePiece (Gemma's ids and token types), 7
             layers (sliding, x5, global, sliding), window 12, head_dim 32

and the FalconH1ForCausalLM variants (parallel Mamba2 + attention blocks,
byte-level BPE "llama-bpe"), kept apart in FALCON_H1_VARIANTS because the
C engine does not run them yet (see FALCON_H1 for what each one covers).

The builds, their GGUF conversions and the reference models are cached for
the process (in one temporary directory removed at exit), so every test
module shares them. Example::

    gguf_path = tiny_models.gguf_file("gemma3", "f32")
    ref = tiny_models.reference_logits("gemma3", ids)     # [len(ids), n_vocab]
"""

from __future__ import annotations

import atexit
import functools
import importlib
import io
import math
import os
import random
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

VARIANTS = ("llama", "llama3", "qwen2", "qwen3", "gemma3")

# FalconH1 configs: d_state 16 / 64 / 128, one and several groups, the gated
# RMSNorm on and off, head_dim set and unset, tied and untied outputs, muP
# multipliers at 1 and at Falcon-H1-like values, SSM chunks of 16 / 32 / 64
# (transformers' chunked scan crosses several chunk edges over 300 tokens).
FALCON_H1: dict[str, dict[str, Any]] = {
    "falcon_h1": {
        "num_hidden_layers": 2, "mamba_d_ssm": 64, "mamba_n_heads": 4, "mamba_n_groups": 1,
        "mamba_d_state": 16, "mamba_rms_norm": False, "mamba_chunk_size": 16,
    },
    "falcon_h1_g2": {
        "num_hidden_layers": 2, "head_dim": 24, "mamba_d_ssm": 96, "mamba_n_heads": 6, "mamba_n_groups": 2,
        "mamba_d_state": 64, "mamba_rms_norm": True, "mamba_norm_before_gate": False, "mamba_chunk_size": 32,
        "embedding_multiplier": 5.65, "lm_head_multiplier": 0.039, "key_multiplier": 0.39,
        "attention_in_multiplier": 1.2, "attention_out_multiplier": 0.94, "ssm_in_multiplier": 1.25,
        "ssm_out_multiplier": 0.23, "mlp_multipliers": [0.88, 0.56],
        "ssm_multipliers": [0.35, 0.25, 0.5, 0.7, 0.35],
    },
    "falcon_h1_s128": {
        "num_hidden_layers": 3, "mamba_d_ssm": 128, "mamba_n_heads": 8, "mamba_n_groups": 4,
        "mamba_d_state": 128, "mamba_rms_norm": True, "mamba_norm_before_gate": False, "mamba_chunk_size": 64,
        "tie_word_embeddings": True, "embedding_multiplier": 2.0, "lm_head_multiplier": 0.5,
        "key_multiplier": 0.7, "ssm_in_multiplier": 0.8, "ssm_out_multiplier": 1.5,
        "mlp_multipliers": [1.1, 0.9], "ssm_multipliers": [1.0, 0.6, 1.3, 0.8, 1.2],
    },
}
FALCON_H1_VARIANTS = tuple(FALCON_H1)
FALCON_H1_CONTEXT_LENGTH = 4096

# GGUF architecture of each variant.
GGUF_ARCH = {"llama": "llama", "llama3": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gemma3": "gemma3"}
GGUF_ARCH.update({v: "falcon-h1" for v in FALCON_H1_VARIANTS})

# User-defined pieces of the Gemma 3 SentencePiece model, as in Gemma's own.
GEMMA3_USER_DEFINED = ("[multimodal]", "<start_of_turn>", "<end_of_turn>")
GEMMA3_SLIDING_WINDOW = 12
CONTEXT_LENGTH = 256

# The split regexes of the real tokenizers (tokenizer.json "pre_tokenizer").
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

_WORDS = tuple(
    word
    for line in (
        "the of and to in is was for on are with as his they be at one have this from or had by hot word",
        "but what some we can out other were all there when up use your how said an each she which do",
        "their time if will way about many then them write would like so these her long make thing see",
        "him two has look more day could go come did number sound no most people my over know water than",
        "call first who may down side been now find any new work part take get place made live where after",
        "back little only round man year came show every good me give our under name very through just form",
        "sentence great think say help low line differ turn cause much mean before move right boy old too",
        "same tell does set three want air well also play small end put home read hand port large spell add",
        "even land here must big high such follow act why ask men change went light kind off need house",
        "picture try us again animal point mother world near build self earth father don't it's we'll I'm",
        "they've",
    )
    for word in line.split()
)
_RARE = ("café", "naïve", "Zürich", "日本語", "über", "😀", "2024", "31415", "—", "(ok)", "x=y+1;")


def corpus(n_lines: int = 2000, seed: int = 0) -> list[str]:
    """Seeded English-like lines with some digits, punctuation, accents, CJK
    and emoji, so tokenizers learn merges and still need byte fallback."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        words = [
            rng.choice(_RARE) if rng.random() < 0.06 else rng.choice(_WORDS)
            for _ in range(rng.randint(3, 14))
        ]
        line = " ".join(words)
        lines.append(line[:1].upper() + line[1:] + rng.choice(".!?,;"))
    return lines


# ---------------------------------------------------------------------------
# Tokenizers
# ---------------------------------------------------------------------------


def train_sentencepiece(vocab_size: int, gemma: bool) -> bytes:
    """A SentencePiece BPE model with byte fallback and no normalization
    (as Llama's and Gemma's are). Gemma ids: pad 0, eos 1, bos 2, unk 3,
    <mask> 4, then the user-defined pieces [multimodal], <start_of_turn>,
    <end_of_turn> (the last two become control tokens through the HF
    tokenizer, as in Gemma's own files) and no dummy prefix; Llama ids:
    unk 0, bos 1, eos 2 and a dummy prefix."""
    import sentencepiece as spm

    ids: dict[str, Any] = (
        {
            "pad_id": 0,
            "eos_id": 1,
            "bos_id": 2,
            "unk_id": 3,
            "pad_piece": "<pad>",
            "eos_piece": "<eos>",
            "bos_piece": "<bos>",
            "control_symbols": ["<mask>"],
            "user_defined_symbols": list(GEMMA3_USER_DEFINED),
        }
        if gemma
        else {"unk_id": 0, "bos_id": 1, "eos_id": 2, "pad_id": -1}
    )
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus()),
        model_writer=out,
        vocab_size=vocab_size,
        model_type="bpe",
        byte_fallback=True,
        character_coverage=1.0,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=not gemma,
        split_digits=True,
        allow_whitespace_only_pieces=True,
        num_threads=1,
        minloglevel=2,
        **ids,
    )
    return out.getvalue()


def _transformers() -> Any:
    """The transformers package, as Any: not all of its signatures are typed."""
    return importlib.import_module("transformers")


def _spm_vocab_merges(model: bytes) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The vocabulary and BPE merges equivalent to a SentencePiece BPE model:
    every split of a piece into two pieces, ranked by the merged piece's id
    (SentencePiece BPE scores fall with the id)."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_proto=model)
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    merges: list[tuple[str, str]] = []
    for piece, pid in vocab.items():
        if sp.is_control(pid) or sp.is_unknown(pid) or sp.is_byte(pid):
            continue
        splits = [
            (piece[:k], piece[k:]) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab
        ]
        merges += sorted(splits, key=lambda lr: (vocab[lr[0]], vocab[lr[1]]))
    return vocab, merges


def train_byte_bpe(vocab_size: int, split_regex: str) -> Any:
    """A byte-level BPE ``tokenizers.Tokenizer`` (GPT-2 byte alphabet) with
    the given split regex in front, as Llama 3's and Qwen's are built."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(split_regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer)
    return tok


def _bpe_vocab_merges(tok: Any) -> tuple[dict[str, int], list[tuple[str, str]]]:
    import json

    model = json.loads(tok.to_str())["model"]
    pairs = (m.split(" ", 1) if isinstance(m, str) else m for m in model["merges"])
    merges = [(str(left), str(right)) for left, right in pairs]
    return dict(model["vocab"]), merges


def _tokenizer(variant: str, out: Path) -> Any:
    """Builds the variant's transformers tokenizer (saved later with the
    model); SentencePiece variants also get tokenizer.model in ``out``."""
    from tokenizers import processors

    hf = _transformers()

    if variant in ("llama", "gemma3"):
        model = train_sentencepiece(512, gemma=variant == "gemma3")
        (out / "tokenizer.model").write_bytes(model)
        vocab, merges = _spm_vocab_merges(model)
        if variant == "gemma3":
            tok = hf.GemmaTokenizer(vocab=vocab, merges=merges, add_bos_token=True)
            tok.add_tokens(["<start_of_turn>", "<end_of_turn>"], special_tokens=True)
            return tok
        return hf.LlamaTokenizer(vocab=vocab, merges=merges, add_bos_token=True)
    if variant == "llama3" or variant in FALCON_H1:
        bpe = train_byte_bpe(509, LLAMA3_SPLIT)
        bos, eos, eot = "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"
        bpe.add_special_tokens([bos, eos, eot])
        bpe.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, bpe.token_to_id(bos))]
        )
        return hf.TokenizersBackend(tokenizer_object=bpe, bos_token=bos, eos_token=eos)
    vocab, merges = _bpe_vocab_merges(train_byte_bpe(397, QWEN2_SPLIT))
    tok = hf.Qwen2Tokenizer(vocab=vocab, merges=merges)
    tok.add_tokens(["<|im_start|>", "<|im_end|>"], special_tokens=True)
    return tok


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------


def config(variant: str, n_vocab: int, special: dict[str, int | None]) -> Any:
    """The transformers config of a variant for a tokenizer of ``n_vocab``
    tokens with the given special token ids."""
    from transformers import FalconH1Config, Gemma3TextConfig, LlamaConfig, Qwen2Config, Qwen3Config

    common: dict[str, Any] = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": CONTEXT_LENGTH,
        "rms_norm_eps": 1e-6,
        "bos_token_id": special.get("bos"),
        "eos_token_id": special.get("eos"),
        "pad_token_id": special.get("pad"),
    }
    if variant == "llama":
        return LlamaConfig(
            num_hidden_layers=2,
            vocab_size=n_vocab,
            tie_word_embeddings=False,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
            **common,
        )
    if variant == "llama3":
        rope = {
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        }
        return LlamaConfig(
            num_hidden_layers=2, vocab_size=n_vocab, tie_word_embeddings=True, rope_parameters=rope, **common
        )
    if variant == "qwen2":
        # Padded like Qwen's own (151,936 rows for 151,665 tokens).
        return Qwen2Config(
            num_hidden_layers=2,
            vocab_size=n_vocab + 16,
            tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            **common,
        )
    if variant == "qwen3":
        return Qwen3Config(
            num_hidden_layers=3,
            vocab_size=n_vocab,
            head_dim=32,
            tie_word_embeddings=False,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            **common,
        )
    if variant in FALCON_H1:
        falcon = {**common, "max_position_embeddings": FALCON_H1_CONTEXT_LENGTH, **FALCON_H1[variant]}
        return FalconH1Config(
            vocab_size=n_vocab,
            mamba_d_conv=4,
            rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
            **falcon,
        )
    if variant == "gemma3":
        return Gemma3TextConfig(
            num_hidden_layers=7,
            vocab_size=n_vocab,
            head_dim=32,
            query_pre_attn_scalar=32,
            sliding_window=GEMMA3_SLIDING_WINDOW,
            **common,
        )
    raise ValueError(f"unknown variant {variant!r}; choose from {VARIANTS}")


def randomize(model: Any, seed: int, gemma: bool) -> None:
    """Re-draws every parameter: matrices N(0, 1/fan_in) (embeddings too),
    biases N(0, 0.1^2), norm weights around 1 (Gemma: around 0, as it
    stores w for a scale of 1 + w). Mamba2 mixers get Mamba's own scales:
    A = -U(1, 16), dt = softplus(dt_bias) log-uniform in [0.001, 0.1] (a
    memory of tens to thousands of tokens), D around 1, the depthwise conv
    N(0, 1/d_conv)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if name.endswith("mamba.A_log"):
                p.copy_(torch.log(1.0 + 15.0 * torch.rand(p.shape, generator=gen)))
            elif name.endswith("mamba.dt_bias"):
                u = torch.rand(p.shape, generator=gen)
                dt = torch.exp(math.log(1e-3) + u * (math.log(0.1) - math.log(1e-3)))
                p.copy_(dt + torch.log(-torch.expm1(-dt)))
            elif name.endswith("mamba.D"):
                p.copy_(1.0 + 0.1 * noise)
            elif name.endswith("conv1d.weight"):
                p.copy_(noise / math.sqrt(p.shape[-1]))
            elif p.ndim >= 2:
                p.copy_(noise / math.sqrt(p.shape[1]))
            elif name.endswith("norm.weight"):
                p.copy_((0.0 if gemma else 1.0) + 0.2 * noise)
            else:
                p.copy_(0.1 * noise)


def build(variant: str, out: Path, seed: int = 0, **overrides: Any) -> Path:
    """Writes the tiny ``variant`` checkpoint (model and tokenizer) into
    ``out`` and returns it; ``overrides`` are set on its config first (e.g.
    ``attention_bias=True``)."""
    import torch

    hf = _transformers()
    hf.utils.logging.disable_progress_bar()
    out.mkdir(parents=True, exist_ok=True)
    tok = _tokenizer(variant, out)
    special = {name: getattr(tok, f"{name}_token_id", None) for name in ("bos", "eos", "pad")}
    cfg = config(variant, len(tok), special)
    for key, value in overrides.items():
        setattr(cfg, key, value)
    torch.manual_seed(seed)
    model = hf.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    randomize(model, seed, gemma=variant == "gemma3")
    model.eval()
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


# ---------------------------------------------------------------------------
# Per-process cache
# ---------------------------------------------------------------------------


@functools.cache
def _root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="eliza-tiny-models-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


@functools.cache
def checkpoint(variant: str) -> Path:
    """The ``variant`` checkpoint directory, built once per process."""
    return build(variant, _root() / variant)


def convert(checkpoint_dir: Path, stem: str, outtype: str) -> Path:
    """``checkpoint_dir`` converted with eliza.convert to ``outtype``, as
    ``stem-outtype.gguf`` in the process's cache (tiny_archs and
    gemma4_models keep their files there too)."""
    from eliza.convert import convert_hf

    return convert_hf(checkpoint_dir, _root() / f"{stem}-{outtype}.gguf", outtype).path


@functools.cache
def gguf_file(variant: str, outtype: str) -> Path:
    """``variant`` converted with eliza.convert to ``outtype``, once per process."""
    return convert(checkpoint(variant), variant, outtype)


@functools.cache
def reference_model(variant: str, stored_as: str = "f32") -> Any:
    """The transformers model of ``variant``. With ``stored_as`` f16, bf16
    or q8_0, every weight matrix is first rounded to that type and back (as
    the GGUF of that type holds it), so the model computes in float32 on
    exactly the weights libeliza reads."""
    import torch

    model = _transformers().AutoModelForCausalLM.from_pretrained(checkpoint(variant), dtype=torch.float32)
    model.eval()
    if stored_as != "f32":
        from gguf import GGMLQuantizationType
        from gguf.quants import dequantize, quantize

        qtype = GGMLQuantizationType[stored_as.upper()]
        with torch.no_grad():
            for p in model.parameters():
                if p.ndim == 2:
                    w = p.detach().numpy()
                    p.copy_(torch.from_numpy(dequantize(quantize(w, qtype), qtype).reshape(w.shape)))
    return model


def reference_logits(variant: str, ids: Sequence[int], stored_as: str = "f32") -> npt.NDArray[np.float32]:
    """transformers' logits for ``ids`` from position 0, [len(ids), n_vocab]."""
    import torch

    with torch.no_grad():
        out = reference_model(variant, stored_as)(torch.tensor([list(ids)])).logits[0]
    logits: npt.NDArray[np.float32] = out.numpy().astype(np.float32)
    return logits


def reference_greedy(variant: str, ids: Sequence[int], n_new: int) -> list[int]:
    """transformers' greedy continuation of ``ids`` (its own KV cache and,
    for Gemma 3, its sliding-window cache), ``n_new`` tokens, EOS ignored."""
    return reference_greedy_of(reference_model(variant), ids, n_new)


def reference_greedy_of(model: Any, ids: Sequence[int], n_new: int) -> list[int]:
    """``model``'s greedy continuation of ``ids``, ``n_new`` tokens, EOS ignored."""
    import torch

    with torch.no_grad():
        out = model.generate(
            torch.tensor([list(ids)]),
            max_new_tokens=n_new,
            min_new_tokens=n_new,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )
    return [int(t) for t in out[0, len(ids) :]]
