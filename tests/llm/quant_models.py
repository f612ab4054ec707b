"""GGUF files of one tiny model in every weight type libeliza has kernels
for, and the float32 files that hold exactly the same weights.

A wide tiny llama (hidden 256, so every matrix row is whole 256-element
super-blocks) is converted to F32 with ``eliza.convert``; each weight matrix
is then stored in the type under test, by ``gguf.quants.quantize`` where
gguf-py can quantize it, else as random blocks whose float16 scales are set
so the matrix keeps its float32 standard deviation. The twin file stores
``gguf.quants.dequantize`` of those blocks as F32: the two compute on
identical weights, so any difference between their logits comes from the
activation quantization (Q8_0 / Q8_1 / Q8_K) alone. Seeded: the same call
writes the same bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
import tiny_models as tm
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

# Config overrides of tiny_models' llama: "tiny" for the tests, "bench" (90M
# weights, 8 layers, memory bound on 2 cores) for bench/llm.py runs.
SIZES: dict[str, dict[str, int]] = {
    "tiny": {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2,
             "head_dim": 64},
    "bench": {"hidden_size": 1024, "intermediate_size": 2816, "num_attention_heads": 16,
              "num_key_value_heads": 4, "head_dim": 64, "num_hidden_layers": 8},
}  # fmt: skip

# Byte offsets of the float16 scales of one block (the super-block d, and
# dmin where the type has one), for types gguf-py cannot quantize.
SCALE_OFFSETS = {
    Q.Q2_K: (80, 82), Q.Q3_K: (108,), Q.Q4_K: (0, 2), Q.Q5_K: (0, 2), Q.Q6_K: (208,), Q.IQ4_NL: (0,),
    Q.IQ4_XS: (0,), Q.IQ3_XXS: (0,), Q.IQ3_S: (0,), Q.IQ2_XXS: (0,), Q.IQ2_XS: (0,), Q.IQ2_S: (0,),
    Q.IQ1_S: (0,),
}  # fmt: skip


def _set_scales(qtype: Q, blocks: npt.NDArray[np.uint8], d: npt.NDArray[np.float16]) -> None:
    """Writes the per-block float16 scale d into every scale field."""
    if qtype == Q.IQ1_M:
        bits = d.view(np.uint16)
        words = blocks[:, 48:56].copy().view(np.uint16)
        for k in range(4):
            words[:, k] = (words[:, k] & 0x0FFF) | (((bits >> (4 * k)) & 0xF) << 12)
        blocks[:, 48:56] = words.view(np.uint8)
        return
    for off in SCALE_OFFSETS[qtype]:
        blocks[:, off : off + 2] = d.view(np.uint8).reshape(-1, 2)


def _random_blocks(qtype: Q, w: npt.NDArray[np.float32], rng: np.random.Generator) -> npt.NDArray[np.uint8]:
    block, size = GGML_QUANT_SIZES[qtype]
    n_blocks = w.size // block
    blocks = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    _set_scales(qtype, blocks, np.ones(n_blocks, dtype=np.float16))
    unit = float(np.std(dequantize(blocks, qtype)))
    target = float(np.std(w))
    _set_scales(qtype, blocks, np.full(n_blocks, target / unit, dtype=np.float16))
    return blocks.reshape(w.shape[0], -1)


def stored(qtype: Q, w: npt.NDArray[np.float32], rng: np.random.Generator) -> npt.NDArray[np.uint8]:
    """Matrix w (rows, cols) in qtype: gguf-py's quantizer, or sane random blocks."""
    if qtype not in SCALE_OFFSETS and qtype != Q.IQ1_M:
        return np.asarray(quantize(w, qtype))
    return _random_blocks(qtype, w, rng)


def _copy_fields(reader: GGUFReader, writer: GGUFWriter) -> None:
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), vtype, sub_type=sub)


MatrixFn = Callable[[str, npt.NDArray[np.float32]], tuple[np.ndarray, Q]]


def _rewrite(src: Path, dst: Path, matrix: MatrixFn) -> Path:
    reader = GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = GGUFWriter(str(dst), arch)
    _copy_fields(reader, writer)
    for t in reader.tensors:
        data = np.array(t.data)
        if data.ndim == 2 and t.name.endswith(".weight"):
            out, qtype = matrix(t.name, data.astype(np.float32))
            if qtype == Q.F32:
                writer.add_tensor(t.name, out)
            else:
                writer.add_tensor(t.name, out, raw_dtype=qtype)
        else:
            writer.add_tensor(t.name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst


@functools.cache
def base_f32(size: str = "tiny", root: Path | None = None) -> Path:
    """The wide llama of `size` as F32 GGUF, in root (default: the
    per-process directory of tiny_models), once per process."""
    from eliza.convert import convert_hf

    root = root or tm._root()
    ckpt = tm.build("llama", root / f"llama-{size}", seed=5, **SIZES[size])
    return convert_hf(ckpt, root / f"llama-{size}-f32.gguf", "f32").path


@functools.cache
def files(qtype: Q) -> tuple[Path, Path]:
    """(the tiny model with every weight matrix in qtype, its F32 twin)."""
    rng = np.random.default_rng(int(qtype))
    blocks: dict[str, np.ndarray] = {}

    def to_type(name: str, w: npt.NDArray[np.float32]) -> tuple[np.ndarray, Q]:
        blocks[name] = stored(qtype, w, rng)
        return blocks[name], qtype

    def to_twin(name: str, w: npt.NDArray[np.float32]) -> tuple[np.ndarray, Q]:
        return np.asarray(dequantize(blocks[name], qtype), dtype=np.float32).reshape(w.shape), Q.F32

    root = tm._root()
    typed = _rewrite(base_f32(), root / f"llama-tiny-{qtype.name}.gguf", to_type)
    twin = _rewrite(base_f32(), root / f"llama-tiny-{qtype.name}-twin-f32.gguf", to_twin)
    return typed, twin


def bench_file(qtype: Q, root: Path) -> Path:
    """The bench-size model with every matrix in qtype, as stored() makes it,
    written into root once."""
    out = root / f"llama-bench-{qtype.name}.gguf"
    if not out.is_file():
        rng = np.random.default_rng(int(qtype))

        def to_type(name: str, w: npt.NDArray[np.float32]) -> tuple[np.ndarray, Q]:
            return stored(qtype, w, rng), qtype

        _rewrite(base_f32("bench", root), out, to_type)
    return out
