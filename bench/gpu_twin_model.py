#!/usr/bin/env python3
"""Random-weight GGUF models for the GPU peer comparison (bench/gpu_peers.sh),
made where the comparison runs, since a real model is too big to carry
there: the speed of a decode step depends on the shapes and weight types,
not on the values.

    python bench/gpu_twin_model.py skeleton REAL.gguf SKELETON.gguf
        every key of REAL (tokenizer included) and a manifest of its tensors
        (name, shape, type), no tensor data: a few MB for Gemma 3 270M
    python bench/gpu_twin_model.py expand SKELETON.gguf OUT.gguf
        the twin: REAL's keys, tensors of REAL's shapes and types filled with
        random blocks whose float16 scales give weights of std 0.02
    python bench/gpu_twin_model.py llama1b OUT.gguf
        a TinyLlama-1.1B-shaped llama (22 layers, n_embd 2048, 32 / 4 heads,
        n_ff 5632, a synthetic 32,000-token SentencePiece vocabulary) in
        llama-quantize's Q4_K_M mix (Q6_K output and, on the layers that
        mix picks, Q6_K attn_v / ffn_down; Q4_K elsewhere)

Seeded: the same call writes the same bytes. Needs numpy and gguf.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

MANIFEST_KEY = "eliza.twin.tensors"
WEIGHT_STD = 0.02

# Byte offsets of the float16 scales in one block of each type: the block
# scale d, and the min / dmin where the type has one. Every other byte may
# hold any value.
SCALE_OFFSETS = {
    Q.Q4_0: (0,), Q.Q4_1: (0, 2), Q.Q5_0: (0,), Q.Q5_1: (0, 2), Q.Q8_0: (0,),
    Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (208,),
}  # fmt: skip


def _copy_fields(reader: GGUFReader, writer: GGUFWriter, skip: tuple[str, ...] = ()) -> None:
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture" or field.name in skip:
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)


def _random_tensor(qtype: Q, shape: list[int], rng: np.random.Generator) -> np.ndarray:
    """A tensor of GGUF shape (ne0 first) in qtype, values of std WEIGHT_STD
    (a 1-D F32 tensor is a norm weight: ones plus noise)."""
    if qtype in (Q.F32, Q.F16):
        rows = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        if len(shape) == 1:
            w = 1.0 + WEIGHT_STD * rng.standard_normal(shape[0], dtype=np.float32)
        else:
            w = WEIGHT_STD * rng.standard_normal((rows, shape[0]), dtype=np.float32)
        return w.astype(np.float16 if qtype == Q.F16 else np.float32)
    if qtype not in SCALE_OFFSETS:
        raise SystemExit(f"gpu_twin_model: no random blocks for {qtype.name}")
    block, size = GGML_QUANT_SIZES[qtype]
    rows = int(np.prod(shape[1:]))
    n_blocks = rows * (shape[0] // block)
    blocks = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    sample = blocks[: min(n_blocks, 256)].copy()
    for off in SCALE_OFFSETS[qtype]:
        sample[:, off : off + 2] = np.ones(len(sample), dtype=np.float16).view(np.uint8).reshape(-1, 2)
    d = np.float16(WEIGHT_STD / float(np.std(dequantize(sample, qtype))))
    for off in SCALE_OFFSETS[qtype]:
        blocks[:, off : off + 2] = np.full(n_blocks, d, dtype=np.float16).view(np.uint8).reshape(-1, 2)
    return blocks.reshape(rows, -1)


def _add(writer: GGUFWriter, name: str, qtype: Q, data: np.ndarray) -> None:
    if qtype in (Q.F32, Q.F16):
        writer.add_tensor(name, data)
    else:
        writer.add_tensor(name, data, raw_dtype=qtype)


def _write(writer: GGUFWriter) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def skeleton(src: Path, dst: Path) -> None:
    reader = GGUFReader(src)
    writer = GGUFWriter(str(dst), reader.fields["general.architecture"].contents())
    _copy_fields(reader, writer)
    manifest = [[t.name, [int(n) for n in t.shape], int(t.tensor_type)] for t in reader.tensors]
    writer.add_string(MANIFEST_KEY, json.dumps(manifest))
    _write(writer)


def expand(src: Path, dst: Path, seed: int = 0) -> None:
    reader = GGUFReader(src)
    writer = GGUFWriter(str(dst), reader.fields["general.architecture"].contents())
    _copy_fields(reader, writer, skip=(MANIFEST_KEY,))
    rng = np.random.default_rng(seed)
    for name, shape, qtype in json.loads(reader.fields[MANIFEST_KEY].contents()):
        _add(writer, name, Q(qtype), _random_tensor(Q(qtype), shape, rng))
    _write(writer)


def _spm_vocab(n: int) -> tuple[list[str], npt.NDArray[np.float32], npt.NDArray[np.int32]]:
    """<unk>, <s>, </s>, the 256 byte tokens, then pieces '▁t<i>'."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    tokens += [f"\u2581t{i}" for i in range(n - len(tokens))]
    types += [1] * (n - len(types))
    scores = -np.arange(n, dtype=np.float32)
    return tokens, scores, np.asarray(types, dtype=np.int32)


def llama1b(dst: Path, seed: int = 0) -> None:
    n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab = 2048, 22, 32, 4, 5632, 32000
    head_dim = n_embd // n_head
    writer = GGUFWriter(str(dst), "llama")
    writer.add_name("random TinyLlama-1.1B-shaped llama")
    writer.add_file_type(15)  # LLAMA_FTYPE_MOSTLY_Q4_K_M
    writer.add_context_length(2048)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_rope_dimension_count(head_dim)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(n_vocab)
    tokens, scores, types = _spm_vocab(n_vocab)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores.tolist())
    writer.add_token_types(types.tolist())
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    rng = np.random.default_rng(seed)

    def put(name: str, qtype: Q, shape: list[int]) -> None:
        _add(writer, name, qtype, _random_tensor(qtype, shape, rng))

    put("token_embd.weight", Q.Q4_K, [n_embd, n_vocab])
    for i in range(n_layer):
        # llama-quantize's use_more_bits: the first and last eighth of the
        # layers and every third one between.
        more = i < n_layer // 8 or i >= 7 * n_layer // 8 or (i - n_layer // 8) % 3 == 2
        kv = n_head_kv * head_dim
        put(f"blk.{i}.attn_norm.weight", Q.F32, [n_embd])
        put(f"blk.{i}.attn_q.weight", Q.Q4_K, [n_embd, n_embd])
        put(f"blk.{i}.attn_k.weight", Q.Q4_K, [n_embd, kv])
        put(f"blk.{i}.attn_v.weight", Q.Q6_K if more else Q.Q4_K, [n_embd, kv])
        put(f"blk.{i}.attn_output.weight", Q.Q4_K, [n_embd, n_embd])
        put(f"blk.{i}.ffn_norm.weight", Q.F32, [n_embd])
        put(f"blk.{i}.ffn_gate.weight", Q.Q4_K, [n_embd, n_ff])
        put(f"blk.{i}.ffn_up.weight", Q.Q4_K, [n_embd, n_ff])
        put(f"blk.{i}.ffn_down.weight", Q.Q6_K if more else Q.Q4_K, [n_ff, n_embd])
    put("output_norm.weight", Q.F32, [n_embd])
    put("output.weight", Q.Q6_K, [n_embd, n_vocab])
    _write(writer)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, n_paths in (("skeleton", 2), ("expand", 2), ("llama1b", 1)):
        p = sub.add_parser(name)
        p.add_argument("paths", nargs=n_paths, type=Path)
    args = ap.parse_args()
    if args.cmd == "skeleton":
        skeleton(*args.paths)
    elif args.cmd == "expand":
        expand(*args.paths)
    else:
        llama1b(*args.paths)
    print(args.paths[-1], file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
