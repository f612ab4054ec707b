"""eliza_gguf_info_json on the real Gemma 3 270M file agrees with gguf-py's
GGUFReader: every key with its type and value, array lengths and leading
items, and every tensor's name, type, shape, offset and size; a few tensors
also dequantize to what gguf-py computes. The `eliza info` CLI reports it."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import eliza

gguf = pytest.importorskip("gguf")

N_ITEMS = 16


@pytest.fixture(scope="module")
def reader(gemma_path: Path) -> Any:
    return gguf.GGUFReader(str(gemma_path))


@pytest.fixture(scope="module")
def doc(gemma_path: Path) -> dict[str, Any]:
    with eliza.GGUFFile(gemma_path) as f:
        return f.info(max_array_items=N_ITEMS, include_tensors=True)


def _fields(reader: Any) -> dict[str, Any]:
    # GGUFReader adds pseudo-fields for the header.
    return {k: v for k, v in reader.fields.items() if not k.startswith("GGUF.")}


def _same(ours: Any, theirs: Any, vtype: Any) -> bool:
    if vtype == gguf.GGUFValueType.FLOAT32:
        # We print the shortest digits that read back as the same float32,
        # always as a JSON float ("-1000.0", not "-1000").
        if ours is None:
            return not math.isfinite(theirs)
        return isinstance(ours, float) and bool(np.float32(ours) == np.float32(theirs))
    if vtype == gguf.GGUFValueType.FLOAT64:
        if ours is None:
            return not math.isfinite(theirs)
        return isinstance(ours, float) and ours == float(theirs)
    if vtype == gguf.GGUFValueType.BOOL:
        return ours is bool(theirs)
    if vtype == gguf.GGUFValueType.STRING:
        return bool(ours == theirs)
    return ours == int(theirs) and not isinstance(ours, bool)


def test_header_matches(doc: dict[str, Any], reader: Any, gemma_path: Path) -> None:
    assert doc["version"] == 3
    assert doc["architecture"] == "gemma3"
    assert doc["alignment"] == reader.alignment
    assert doc["data_offset"] == reader.data_offset
    assert doc["file_size"] == gemma_path.stat().st_size
    assert doc["tensor_count"] == len(reader.tensors)
    assert len(doc["metadata"]) == len(_fields(reader))


def test_every_key_type_and_value_matches(doc: dict[str, Any], reader: Any) -> None:
    fields = _fields(reader)
    assert list(doc["metadata"]) == list(fields)  # file order
    assert list(doc["metadata_types"]) == list(fields)
    for key, fld in fields.items():
        ours = doc["metadata"][key]
        kind = doc["metadata_types"][key]
        if fld.types[0] == gguf.GGUFValueType.ARRAY:
            etype = fld.types[1]
            assert kind == f"ARRAY[{etype.name}]", key
            n = len(fld.data)
            assert ours["type"] == etype.name, key
            assert ours["len"] == n, key
            assert len(ours["items"]) == min(n, N_ITEMS), key
            theirs = fld.contents(slice(0, N_ITEMS))
            for i, (a, b) in enumerate(zip(ours["items"], theirs)):
                assert _same(a, b, etype), f"{key}[{i}]: {a!r} != {b!r}"
        else:
            assert kind == fld.types[0].name, key
            assert _same(ours, fld.contents(), fld.types[0]), f"{key}: {ours!r} != {fld.contents()!r}"


def test_known_gemma_values(doc: dict[str, Any]) -> None:
    meta = doc["metadata"]
    assert meta["gemma3.block_count"] == 18
    assert meta["gemma3.embedding_length"] == 640
    assert meta["gemma3.rope.freq_base"] == 1000000.0
    assert meta["gemma3.attention.layer_norm_rms_epsilon"] == 1e-06  # float32 1e-6, shortest form
    assert meta["tokenizer.ggml.tokens"]["len"] == 262144
    assert meta["tokenizer.ggml.tokens"]["items"][:3] == ["<pad>", "<eos>", "<bos>"]
    assert meta["tokenizer.ggml.add_bos_token"] is True


def test_full_vocab_matches(gemma_path: Path, reader: Any) -> None:
    with eliza.GGUFFile(gemma_path) as f:
        tokens = f.metadata["tokenizer.ggml.tokens"]
    theirs = reader.fields["tokenizer.ggml.tokens"].contents()
    assert len(tokens) == 262144
    assert tokens == theirs


def test_every_tensor_matches(doc: dict[str, Any], reader: Any) -> None:
    ours = doc["tensors"]
    assert [t["name"] for t in ours] == [t.name for t in reader.tensors]
    for a, b in zip(ours, reader.tensors):
        assert a["type"] == b.tensor_type.name, a["name"]
        assert a["type_id"] == int(b.tensor_type), a["name"]
        assert a["shape"] == [int(x) for x in b.shape], a["name"]  # innermost first, as stored
        assert doc["data_offset"] + a["offset"] == b.data_offset, a["name"]
        assert a["nbytes"] == b.n_bytes, a["name"]


def test_tensors_dequantize_like_gguf_py(gemma_path: Path, reader: Any) -> None:
    by_type: dict[str, Any] = {}
    for t in reader.tensors:  # the smallest tensor of each type
        if t.name == "token_embd.weight":
            continue
        best = by_type.get(t.tensor_type.name)
        if best is None or t.n_elements < best.n_elements:
            by_type[t.tensor_type.name] = t
    assert set(by_type) == {"F32", "Q4_K", "Q5_0", "Q6_K", "Q8_0"}
    with eliza.GGUFFile(gemma_path) as f:
        for type_name, t in sorted(by_type.items()):
            want = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
            got = f.tensor(t.name)
            assert got.shape == tuple(int(x) for x in reversed(t.shape)), t.name
            np.testing.assert_allclose(
                got, want.reshape(got.shape), rtol=1e-6, atol=1e-7, err_msg=f"{t.name} ({type_name})"
            )


def test_info_is_fast_on_a_big_vocab(gemma_path: Path) -> None:
    import time

    with eliza.GGUFFile(gemma_path) as f:
        t0 = time.perf_counter()
        for _ in range(20):
            f.info(max_array_items=8)
        per_call = (time.perf_counter() - t0) / 20
    assert per_call < 0.05, f"info() took {per_call * 1000:.1f} ms with a 262144-token vocab"


def test_cli_info_reports_the_architecture(gemma_path: Path, run_cli: Any) -> None:
    proc = run_cli("info", str(gemma_path))
    assert proc.returncode == 0, proc.stderr
    assert "gemma3" in proc.stdout
