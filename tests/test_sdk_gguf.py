"""eliza.GGUFFile: lifetime, metadata, tensor list and float32 tensors."""

from __future__ import annotations

import ctypes
import gc
from pathlib import Path

import numpy as np
import pytest

import eliza
from eliza import _native


def test_tiny_file_metadata_and_architecture(tiny_gguf: Path) -> None:
    with eliza.GGUFFile(tiny_gguf) as f:
        assert f.architecture == "tinyarch"
        meta = f.metadata
    assert meta["tinyarch.block_count"] == 2
    assert meta["tinyarch.rope.freq_base"] == 10000.0
    assert meta["general.name"] == "tiny test model"
    assert meta["tinyarch.use_bias"] is True
    assert meta["tokenizer.ggml.tokens"] == [f"tok{i}" for i in range(20)]
    assert meta["tinyarch.layer_sizes"] == [3, 5, 7]


def test_info_cuts_arrays_to_max_array_items(tiny_gguf: Path) -> None:
    with eliza.GGUFFile(tiny_gguf) as f:
        doc = f.info(max_array_items=3, include_tensors=False)
    tokens = doc["metadata"]["tokenizer.ggml.tokens"]
    assert tokens == {"type": "STRING", "len": 20, "items": ["tok0", "tok1", "tok2"]}
    assert "tensors" not in doc
    assert doc["tensor_count"] == 3


def test_tensor_list_is_in_numpy_order(tiny_gguf: Path, tiny_tensors: dict[str, np.ndarray]) -> None:
    with eliza.GGUFFile(tiny_gguf) as f:
        tensors = f.tensors
    assert [t.name for t in tensors] == list(tiny_tensors)
    for info in tensors:
        want = tiny_tensors[info.name]
        assert info.shape == want.shape
        assert info.nbytes == want.nbytes
    assert [t.type for t in tensors] == ["F32", "F16", "F32"]


def test_tensor_returns_float32_in_numpy_order(tiny_gguf: Path, tiny_tensors: dict[str, np.ndarray]) -> None:
    with eliza.GGUFFile(tiny_gguf) as f:
        for name, want in tiny_tensors.items():
            got = f.tensor(name)
            assert got.dtype == np.float32
            np.testing.assert_array_equal(got, want.astype(np.float32))


def test_missing_tensor_is_not_found(tiny_gguf: Path) -> None:
    with eliza.GGUFFile(tiny_gguf) as f, pytest.raises(eliza.NotFoundError, match="nope"):
        f.tensor("nope")


def test_missing_file_is_an_io_error(tmp_path: Path) -> None:
    with pytest.raises(eliza.ElizaIOError, match="absent"):
        eliza.GGUFFile(tmp_path / "absent.gguf")


def test_garbage_file_is_a_format_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"this is not a GGUF file at all" * 4)
    with pytest.raises(eliza.FormatError):
        eliza.GGUFFile(junk)


def _record_closes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    native = _native.lib()
    real_close = native.eliza_gguf_close
    closed: list[int] = []

    def close(handle: ctypes.c_void_p) -> None:
        closed.append(int(handle.value or 0))
        real_close(handle)

    monkeypatch.setattr(native, "eliza_gguf_close", close)
    return closed


def test_close_is_idempotent_and_use_after_close_is_a_state_error(
    tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = _record_closes(monkeypatch)
    f = eliza.GGUFFile(tiny_gguf)
    f.close()
    f.close()
    assert len(closed) == 1
    assert "closed" in repr(f)
    with pytest.raises(eliza.StateError, match="closed"):
        f.tensor("bias")
    with pytest.raises(eliza.StateError):
        f.info()


def test_context_manager_closes_on_exit_and_on_error(
    tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = _record_closes(monkeypatch)
    with eliza.GGUFFile(tiny_gguf):
        pass
    with pytest.raises(eliza.NotFoundError), eliza.GGUFFile(tiny_gguf) as f:
        f.tensor("nope")
    assert len(closed) == 2


def test_unclosed_file_is_closed_when_collected(tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    closed = _record_closes(monkeypatch)
    f = eliza.GGUFFile(tiny_gguf)
    handle = f._handle
    assert handle is not None and handle.value
    address = handle.value
    del f, handle
    gc.collect()
    assert closed == [address]


def test_gemma_tensors_and_hyperparameters(gemma_path: Path) -> None:
    with eliza.GGUFFile(gemma_path) as f:
        assert f.architecture == "gemma3"
        assert f.metadata["gemma3.block_count"] == 18
        assert f.metadata["gemma3.embedding_length"] == 640
        by_name = {t.name: t for t in f.tensors}
        emb = by_name["token_embd.weight"]
        assert emb.shape == (len(f.metadata["tokenizer.ggml.tokens"]), 640)
        norm = f.tensor("output_norm.weight")
        assert norm.shape == (640,) and norm.dtype == np.float32
        assert np.isfinite(norm).all()
        types = {t.type for t in f.tensors}
    assert {"F32", "Q4_K", "Q6_K"} <= types
