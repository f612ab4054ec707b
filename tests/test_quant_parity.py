"""Dequantization parity with gguf-py, the reference reader of GGUF.

Every type libeliza has kernels for is written into a small GGUF with
``gguf.GGUFWriter`` and read back through ``eliza.GGUFFile.tensor``; the
values must equal ``gguf.quants.dequantize`` bit for bit (NaNs compared as
NaNs). Data comes from ``gguf.quants.quantize`` where gguf-py can quantize
the type, and from random blocks with valid float16 scales where it cannot
(the K quants); every type also gets a tensor of raw random bits, scales
included, so NaN, infinite and subnormal scales are covered.

With ``ELIZA_BUILD_DIR`` set, the C kernel test ``test_quant`` also runs over
every tensor of the real Gemma 3 file.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

import eliza

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as Q  # noqa: E402  (after the skip check)
from gguf import GGUFWriter  # noqa: E402

KERNEL_TYPES = [
    Q.F32,
    Q.F16,
    Q.BF16,
    Q.Q4_0,
    Q.Q4_1,
    Q.Q5_0,
    Q.Q5_1,
    Q.Q8_0,
    Q.Q2_K,
    Q.Q3_K,
    Q.Q4_K,
    Q.Q5_K,
    Q.Q6_K,
    Q.IQ4_NL,
    Q.IQ4_XS,
    Q.TQ1_0,
    Q.TQ2_0,
    Q.MXFP4,
    Q.IQ3_XXS,
    Q.IQ3_S,
    Q.IQ2_XXS,
    Q.IQ2_XS,
    Q.IQ2_S,
    Q.IQ1_S,
    Q.IQ1_M,
]

# Shapes in numpy order; the last axis is the GGUF row (ne[0]).
SHAPES = {
    1: [(7,), (3, 5), (2, 3, 4)],
    32: [(64,), (3, 96), (2, 2, 160)],
    256: [(256,), (3, 512), (2, 2, 256)],
}

# Byte offsets of the float16 (super-)block scales of the types gguf-py
# cannot quantize (d, dmin for Q4_K / Q5_K / Q2_K; d for the others).
K_SCALE_OFFSETS = {
    Q.Q4_K: (0, 2),
    Q.Q5_K: (0, 2),
    Q.Q6_K: (208,),
    Q.Q2_K: (80, 82),
    Q.Q3_K: (108,),
    Q.IQ4_NL: (0,),
    Q.IQ4_XS: (0,),
    Q.IQ3_XXS: (0,),
    Q.IQ3_S: (0,),
    Q.IQ2_XXS: (0,),
    Q.IQ2_XS: (0,),
    Q.IQ2_S: (0,),
    Q.IQ1_S: (0,),
}


def _can_quantize(qtype: Q) -> bool:
    try:
        gguf.quants.quantize(np.zeros((1, 256), dtype=np.float32), qtype)
    except NotImplementedError:
        return False
    return True


def _float_data(rng: np.random.Generator, shape: tuple[int, ...]) -> npt.NDArray[np.float32]:
    """Random values with the awkward ones mixed in."""
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    specials = np.array([0.0, -0.0, 1e-40, -3e-39, 7e4, np.inf, -np.inf, np.nan], dtype=np.float32)
    flat[: min(len(flat), len(specials))] = specials[: len(flat)]
    return x


def _stored(qtype: Q, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """A tensor of `shape` in `qtype` as GGUFWriter takes it: float arrays
    for F32 / F16, quantized bytes (rows, bytes per row) otherwise."""
    if qtype == Q.IQ1_M:
        # its float16 d is spread over the top nibbles of the four scale words
        n_blocks = int(np.prod(shape)) // 256
        blocks = rng.integers(0, 256, size=(n_blocks, 56), dtype=np.uint8)
        d = (rng.uniform(-1, 1, n_blocks) * 2.0**-7).astype(np.float16).view(np.uint16)
        words = blocks[:, 48:56].copy().view(np.uint16)
        for k in range(4):
            words[:, k] = (words[:, k] & 0x0FFF) | (((d >> (4 * k)) & 0xF) << 12)
        blocks[:, 48:56] = words.view(np.uint8)
        return blocks.reshape(*shape[:-1], shape[-1] // 256 * 56)
    if qtype in K_SCALE_OFFSETS and not _can_quantize(qtype):
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        n_blocks = int(np.prod(shape)) // block
        blocks = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
        for off in K_SCALE_OFFSETS[qtype]:
            scale = (rng.uniform(-1, 1, n_blocks) * 2.0**-7).astype(np.float16)
            blocks[:, off : off + 2] = scale.view(np.uint8).reshape(n_blocks, 2)
        return blocks.reshape(*shape[:-1], shape[-1] // block * size)
    # inf and NaN among the inputs make numpy warn about its own casts
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(gguf.quants.quantize(_float_data(rng, shape), qtype))


def _random_bits(qtype: Q, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Raw random bytes of `shape` in `qtype`, in the form _stored gives."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(*shape[:-1], shape[-1] // block * size), dtype=np.uint8)
    if qtype == Q.F32:
        return raw.view(np.float32)
    if qtype == Q.F16:
        return raw.view(np.float16)
    return raw


def _reference(qtype: Q, stored: np.ndarray) -> npt.NDArray[np.float32]:
    with np.errstate(over="ignore", invalid="ignore"):  # inf and NaN scales in the random bits
        out: npt.NDArray[np.float32] = np.asarray(gguf.quants.dequantize(stored, qtype), dtype=np.float32)
    return out


def _add(writer: GGUFWriter, name: str, qtype: Q, stored: np.ndarray) -> None:
    if qtype in (Q.F32, Q.F16):
        writer.add_tensor(name, stored)
    else:
        writer.add_tensor(name, stored, raw_dtype=qtype)


def assert_same_floats(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Bitwise equality, except that any NaN equals any NaN."""
    assert got.dtype == np.float32 and got.shape == want.shape, (what, got.dtype, got.shape, want.shape)
    got_nan, want_nan = np.isnan(got), np.isnan(want)
    assert np.array_equal(got_nan, want_nan), f"{what}: NaNs at different places"
    differ = (got.view(np.uint32) != want.view(np.uint32)) & ~want_nan
    if differ.any():
        at = tuple(np.argwhere(differ)[0])
        pytest.fail(
            f"{what}: {int(differ.sum())} of {got.size} values differ; first at {at}: "
            f"{got[at]!r} ({got.view(np.uint32)[at]:#010x}) vs gguf-py "
            f"{want[at]!r} ({want.view(np.uint32)[at]:#010x})"
        )


@pytest.mark.parametrize("qtype", KERNEL_TYPES, ids=lambda t: t.name)
def test_dequantize_matches_gguf_py(qtype: Q, tmp_path: Path) -> None:
    rng = np.random.default_rng(1000 + int(qtype))
    block = gguf.GGML_QUANT_SIZES[qtype][0]
    expected: dict[str, np.ndarray] = {}
    path = tmp_path / f"{qtype.name}.gguf"
    writer = GGUFWriter(str(path), arch="quanttest")
    for shape in SHAPES[block]:
        for kind, make in (("values", _stored), ("bits", _random_bits)):
            name = f"{kind}.{'x'.join(map(str, shape))}"
            stored = make(qtype, rng, shape)
            _add(writer, name, qtype, stored)
            expected[name] = _reference(qtype, stored)
            assert expected[name].shape == shape
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    with eliza.GGUFFile(path) as f:
        for name, want in expected.items():
            assert_same_floats(f.tensor(name), want, f"{qtype.name} {name}")


def test_k_quants_are_not_quantizable_by_gguf_py() -> None:
    """Pins why the K-quant and IQ4 data above is random blocks: if gguf-py
    learns to quantize them, _stored starts using it and this test says so."""
    assert not any(_can_quantize(t) for t in K_SCALE_OFFSETS)


def test_gemma_tensors_match_gguf_py(gemma_path: Path) -> None:
    """The smallest tensor of each type in the real Gemma 3 file. Raw bytes
    are read at the offsets libeliza reports (gguf.GGUFReader would take
    a minute over the 262k-token vocabulary)."""
    with eliza.GGUFFile(gemma_path) as f:
        data_offset = f.info(max_array_items=0, include_tensors=False)["data_offset"]
        smallest: dict[Q, eliza.TensorInfo] = {}
        for t in f.tensors:
            qtype = Q[t.type]
            if qtype in KERNEL_TYPES and (qtype not in smallest or t.nbytes < smallest[qtype].nbytes):
                smallest[qtype] = t
        assert {Q.F32, Q.Q8_0, Q.Q5_0, Q.Q4_K, Q.Q6_K} <= set(smallest)
        raw_file = np.memmap(gemma_path, dtype=np.uint8, mode="r")
        for qtype, t in smallest.items():
            raw = np.array(raw_file[data_offset + t.offset : data_offset + t.offset + t.nbytes])
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            raw = raw.reshape(*t.shape[:-1], t.shape[-1] // block * size)
            if qtype in (Q.F32, Q.F16):
                raw = raw.view(np.float32 if qtype == Q.F32 else np.float16)
            assert_same_floats(f.tensor(t.name), _reference(qtype, raw), f"gemma {t.name} ({qtype.name})")


def test_c_kernels_on_gemma(gemma_path: Path) -> None:
    """tests/c/test_quant over every tensor of the Gemma file: each fast
    kernel the CPU runs against the scalar reference."""
    build = os.environ.get("ELIZA_BUILD_DIR")
    if not build:
        pytest.skip("ELIZA_BUILD_DIR is not set")
    exe = Path(build) / ("test_quant.exe" if os.name == "nt" else "test_quant")
    if not exe.is_file():
        pytest.skip(f"{exe} is not built")
    env = dict(os.environ, ELIZA_TEST_GGUF=str(gemma_path))
    run = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "tensors with kernels checked" in run.stdout, run.stdout
    assert " 0 failed" in run.stdout, run.stdout


@pytest.mark.parametrize("qtype", [Q.IQ2_XXS, Q.IQ1_M, Q.IQ3_S], ids=lambda t: t.name)
def test_truncated_iquant_block_is_a_clear_error(qtype: Q, tmp_path: Path) -> None:
    """A file that ends inside the last i-quant block of a tensor is refused
    at open, naming the tensor, instead of reading past the mapping."""
    rng = np.random.default_rng(7)
    path = tmp_path / f"{qtype.name}.gguf"
    writer = GGUFWriter(str(path), arch="quanttest")
    _add(writer, "blk.0.w", qtype, _stored(qtype, rng, (2, 512)))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - gguf.GGML_QUANT_SIZES[qtype][1] // 2])
    with pytest.raises(eliza.FormatError, match=r"blk\.0\.w"):
        eliza.GGUFFile(path).close()
