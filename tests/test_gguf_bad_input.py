"""Corrupt and truncated GGUF files are refused with an ElizaError, never a crash.

Files are written with the ``gguf`` package, then damaged field by field
(every count, length, type, shape, offset and alignment the reader checks)
and truncated at many lengths. All variants are opened in one child
process, so a crash is caught and names the file that caused it instead of
taking pytest down with it.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import eliza

gguf = pytest.importorskip("gguf")

# GGUF value types (the ones the layout walker needs).
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


@dataclass
class Layout:
    """Byte offsets of every field of a GGUF file, found by walking it."""

    size: int
    kv: dict[str, dict[str, int]] = field(default_factory=dict)
    tensors: dict[str, dict[str, int]] = field(default_factory=dict)
    data_end: int = 0  # end of the last tensor's data


def _walk(blob: bytes) -> Layout:
    """Walks a valid little-endian GGUF v3 file, recording where each field sits."""
    lay = Layout(size=len(blob))
    n_tensors, n_kv = struct.unpack_from("<QQ", blob, 8)
    pos = 24

    def string(at: int) -> tuple[str, int]:
        (n,) = struct.unpack_from("<Q", blob, at)
        return blob[at + 8 : at + 8 + n].decode(), at + 8 + n

    alignment = 32
    for _ in range(n_kv):
        rec = {"key_len": pos}
        key, pos = string(pos)
        rec["key"] = pos - len(key.encode())
        rec["type"] = pos
        (vtype,) = struct.unpack_from("<I", blob, pos)
        pos += 4
        rec["value"] = pos
        if vtype == _STRING:
            _, pos = string(pos)
        elif vtype == _ARRAY:
            etype, count = struct.unpack_from("<IQ", blob, pos)
            rec["arr_type"], rec["arr_len"] = pos, pos + 4
            pos += 12
            for _ in range(count):
                if etype == _STRING:
                    _, pos = string(pos)
                else:
                    pos += _FIXED[etype]
        else:
            if key == "general.alignment":
                (alignment,) = struct.unpack_from("<I", blob, pos)
            pos += _FIXED[vtype]
        lay.kv[key] = rec
    extents = []
    for _ in range(n_tensors):
        rec = {"name_len": pos}
        name, pos = string(pos)
        rec["name"] = pos - len(name.encode())
        rec["n_dims"] = pos
        (n_dims,) = struct.unpack_from("<I", blob, pos)
        pos += 4
        rec["ne0"] = pos
        ne = struct.unpack_from(f"<{n_dims}Q", blob, pos)
        pos += 8 * n_dims
        rec["type"] = pos
        rec["offset"] = pos + 4
        ttype, offset = struct.unpack_from("<IQ", blob, pos)
        pos += 12
        block, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(ttype)]
        extents.append((offset, int(np.prod(ne)) // block * type_size))
        lay.tensors[name] = rec
    data_start = (pos + alignment - 1) // alignment * alignment
    lay.data_end = max(data_start + off + n for off, n in extents)
    return lay


def _write_base(path: Path, alignment: int | None = None) -> bytes:
    """A small valid file: typed keys, arrays, F32 / F16 / Q8_0 tensors."""
    w = gguf.GGUFWriter(str(path), arch="tinyarch")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    w.add_uint32("tinyarch.block_count", 2)
    w.add_float32("tinyarch.rope.freq_base", 10000.0)
    w.add_bool("tinyarch.flag", True)
    w.add_string("general.name", "tiny")
    w.add_uint32("test.k1", 1)
    w.add_uint32("test.k2", 2)
    w.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(12)])
    w.add_array("tinyarch.sizes", [3, 5, 7, 9])
    x = np.linspace(-1, 1, 128, dtype=np.float32).reshape(2, 64)
    q = gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("t.q8", q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("t.a", np.arange(12, dtype=np.float32).reshape(3, 4))
    w.add_tensor("t.b", np.arange(8, dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


def _patch(blob: bytes, at: int, fmt: str, value: int) -> bytes:
    out = bytearray(blob)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


def _put(blob: bytes, at: int, data: bytes) -> bytes:
    return blob[:at] + data + blob[at + len(data) :]


Variant = tuple[str, bytes, type]  # name, bytes, the ElizaError subclass expected


def _variants(base: bytes, base64: bytes) -> list[Variant]:
    lay = _walk(base)
    lay64 = _walk(base64)
    F, U = eliza.FormatError, eliza.UnsupportedError
    v: list[Variant] = []

    # Truncations: every length inside the header and metadata, then sampled
    # lengths up to the end of the last tensor's data.
    first_tensor_info = min(t["name_len"] for t in lay.tensors.values())
    lengths = sorted(
        set(range(0, first_tensor_info + 40)) | set(range(first_tensor_info + 40, lay.data_end, 7))
    )
    v += [(f"truncated_{n}", base[:n], F) for n in lengths[::2]]
    v.append(("truncated_last_byte", base[: lay.data_end - 1], F))

    # Header.
    v.append(("magic", _put(base, 0, b"GGUX"), F))
    v.append(("magic_ggml", _put(base, 0, b"lmgg"), F))
    v.append(("version_0", _patch(base, 4, "<I", 0), F))
    v.append(("version_1", _patch(base, 4, "<I", 1), U))
    v.append(("version_4", _patch(base, 4, "<I", 4), U))
    v.append(("version_big_endian", _patch(base, 4, ">I", 3), U))
    v.append(("version_huge", _patch(base, 4, "<I", 0xFFFFFFFF), U))
    for n in (2**32, 2**40, 2**63, 2**64 - 1):
        v.append((f"tensor_count_{n}", _patch(base, 8, "<Q", n), F))
        v.append((f"kv_count_{n}", _patch(base, 16, "<Q", n), F))
    v.append(("tensor_count_plus_1", _patch(base, 8, "<Q", len(lay.tensors) + 1), F))

    # Metadata.
    for key, rec in lay.kv.items():
        v.append((f"key_len_0:{key}", _patch(base, rec["key_len"], "<Q", 0), F))
        v.append((f"key_len_huge:{key}", _patch(base, rec["key_len"], "<Q", 2**63), F))
        v.append((f"key_nul:{key}", _put(base, rec["key"] + 1, b"\0"), F))
        v.append((f"vtype_13:{key}", _patch(base, rec["type"], "<I", 13), F))
        v.append((f"vtype_huge:{key}", _patch(base, rec["type"], "<I", 0xFFFFFFFF), F))
    v.append(("str_len_huge", _patch(base, lay.kv["general.name"]["value"], "<Q", 2**62), F))
    v.append(("str_len_past_eof", _patch(base, lay.kv["general.name"]["value"], "<Q", len(base)), F))
    v.append(("bool_2", _patch(base, lay.kv["tinyarch.flag"]["value"], "<B", 2), F))
    for key in ("tokenizer.ggml.tokens", "tinyarch.sizes"):
        rec = lay.kv[key]
        v.append((f"nested_array:{key}", _patch(base, rec["arr_type"], "<I", _ARRAY), U))
        v.append((f"arr_type_13:{key}", _patch(base, rec["arr_type"], "<I", 13), F))
        for n in (2**31, 2**40, 2**62, 2**64 - 1):
            v.append((f"arr_len_{n}:{key}", _patch(base, rec["arr_len"], "<Q", n), F))
    k2 = lay.kv["test.k2"]
    v.append(("duplicate_key", _put(base, k2["key"], b"test.k1"), F))

    # general.alignment (the base64 file sets it to 64).
    align = lay64.kv["general.alignment"]
    for a in (0, 3, 48, 0xFFFFFFFF, 2**31):
        v.append((f"alignment_{a}", _patch(base64, align["value"], "<I", a), F))
    v.append(("alignment_as_int32", _patch(base64, align["type"], "<I", 5), F))
    v.append(("alignment_as_float32", _patch(base64, align["type"], "<I", 6), F))

    # Tensor infos.
    for name, rec in lay.tensors.items():
        v.append((f"name_len_0:{name}", _patch(base, rec["name_len"], "<Q", 0), F))
        v.append((f"name_len_huge:{name}", _patch(base, rec["name_len"], "<Q", 2**64 - 1), F))
        v.append((f"name_nul:{name}", _put(base, rec["name"], b"\0"), F))
        for d in (0, 5, 2**31):
            v.append((f"n_dims_{d}:{name}", _patch(base, rec["n_dims"], "<I", d), F))
        v.append((f"ne0_0:{name}", _patch(base, rec["ne0"], "<Q", 0), F))
        v.append((f"ne0_huge:{name}", _patch(base, rec["ne0"], "<Q", 2**40), F))
        v.append((f"ne0_overflow:{name}", _patch(base, rec["ne0"], "<Q", 2**63), F))
        for t in (4, 5, 99, 0xFFFFFFFF):
            v.append((f"type_{t}:{name}", _patch(base, rec["type"], "<I", t), F))
        (offset,) = struct.unpack_from("<Q", base, rec["offset"])
        v.append((f"offset_misaligned:{name}", _patch(base, rec["offset"], "<Q", offset + 1), F))
        v.append((f"offset_past_eof:{name}", _patch(base, rec["offset"], "<Q", offset + 32 * 1024), F))
        v.append((f"offset_overflow:{name}", _patch(base, rec["offset"], "<Q", 2**64 - 32), F))
    v.append(("q8_row_not_block_multiple", _patch(base, lay.tensors["t.q8"]["ne0"], "<Q", 48), F))
    v.append(("duplicate_tensor", _put(base, lay.tensors["t.b"]["name"], b"t.a"), F))
    return v


# Opens each file named on stdin (one per line) and reports one JSON line per
# file; "start" lines let the parent name the file of a crash.
_CHILD = r"""
import json, sys
import eliza
for line in sys.stdin:
    path = line.strip()
    print(json.dumps({"start": path}), flush=True)
    res = {"path": path}
    try:
        with eliza.GGUFFile(path) as f:
            f.info(max_array_items=4)
            for t in f.tensors:
                try:
                    f.tensor(t.name)
                except eliza.UnsupportedError:
                    pass
        res["ok"] = True
    except eliza.ElizaError as e:
        res.update(ok=False, cls=type(e).__name__, code=e.code, message=e.message)
    except BaseException as e:
        res.update(ok=False, cls="not an ElizaError: " + type(e).__name__, message=str(e))
    print(json.dumps(res), flush=True)
"""


def _open_all(paths: list[Path]) -> dict[str, dict[str, object]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(Path(eliza.__file__).resolve().parents[1]), env.get("PYTHONPATH")) if p
    )
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input="\n".join(str(p) for p in paths) + "\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    results: dict[str, dict[str, object]] = {}
    started = None
    for line in proc.stdout.splitlines():
        rec = json.loads(line)
        if "start" in rec:
            started = rec["start"]
        else:
            results[str(rec["path"])] = rec
            started = None
    assert proc.returncode == 0, (
        f"the child crashed (exit {proc.returncode}) while opening {started}\n{proc.stderr[-3000:]}"
    )
    return results


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, Path, type]]:
    tmp = tmp_path_factory.mktemp("bad_gguf")
    base = _write_base(tmp / "base.gguf")
    base64 = _write_base(tmp / "base64.gguf", alignment=64)
    out = []
    for i, (name, blob, cls) in enumerate(_variants(base, base64)):
        path = tmp / f"v{i:04d}.gguf"
        path.write_bytes(blob)
        out.append((name, path, cls))
    return out


def test_base_files_are_valid(tmp_path: Path) -> None:
    for alignment in (None, 64):
        path = tmp_path / f"base{alignment}.gguf"
        _write_base(path, alignment)
        with eliza.GGUFFile(path) as f:
            assert f.architecture == "tinyarch"
            assert [t.name for t in f.tensors] == ["t.q8", "t.a", "t.b"]
            np.testing.assert_array_equal(f.tensor("t.a"), np.arange(12, dtype=np.float32).reshape(3, 4))
            assert f.info()["alignment"] == (alignment or 32)


def test_every_corrupt_variant_raises_an_eliza_error(variants: list[tuple[str, Path, type]]) -> None:
    assert len(variants) >= 300
    results = _open_all([p for _, p, _ in variants])
    problems = []
    for name, path, want in variants:
        rec = results.get(str(path))
        if rec is None:
            problems.append(f"{name}: no result")
        elif rec["ok"]:
            problems.append(f"{name}: opened without error")
        elif rec["cls"] != want.__name__:
            problems.append(f"{name}: {rec['cls']} ({rec['message']}), expected {want.__name__}")
        elif not str(rec["message"]).strip():
            problems.append(f"{name}: empty message")
    assert not problems, f"{len(problems)} of {len(variants)} variants misbehaved:\n" + "\n".join(
        problems[:40]
    )


def test_messages_name_the_file_and_the_culprit(variants: list[tuple[str, Path, type]]) -> None:
    by_name = {name: path for name, path, _ in variants}
    cases = {
        "offset_past_eof:t.b": ["t.b", "past the end of the file"],
        "offset_misaligned:t.a": ["t.a", "not a multiple of the alignment 32"],
        "duplicate_key": ["test.k1", "more than once"],
        "duplicate_tensor": ["t.a", "more than once"],
        "nested_array:tokenizer.ggml.tokens": ["tokenizer.ggml.tokens", "nested"],
        "version_1": ["version 1"],
        "version_big_endian": ["big-endian"],
        "alignment_3": ["general.alignment", "3"],
        "q8_row_not_block_multiple": ["t.q8", "48", "Q8_0", "32"],
        "type_99:t.a": ["t.a", "99"],
        f"tensor_count_{2**63}": [str(2**63)],
    }
    for name, needles in cases.items():
        path = by_name[name]
        with pytest.raises(eliza.ElizaError) as info:
            eliza.GGUFFile(path)
        msg = info.value.message
        assert path.name in msg, msg
        for needle in needles:
            assert needle in msg, f"{name}: {msg!r} lacks {needle!r}"


def test_random_damage_never_crashes(tmp_path: Path) -> None:
    """Random byte damage anywhere may leave a valid file; it must open or
    raise an ElizaError, and never crash."""
    base = _write_base(tmp_path / "base.gguf")
    rng = np.random.default_rng(20240521)
    paths = []
    for i in range(150):
        blob = bytearray(base)
        for _ in range(int(rng.integers(1, 9))):
            at = int(rng.integers(0, len(blob)))
            blob[at] = int(rng.integers(0, 256))
        path = tmp_path / f"r{i:03d}.gguf"
        path.write_bytes(bytes(blob))
        paths.append(path)
    results = _open_all(paths)
    bad = [r for r in results.values() if not r["ok"] and str(r["cls"]).startswith("not an")]
    assert len(results) == len(paths)
    assert not bad, bad[:5]
    assert all(r["ok"] or str(r["message"]).strip() for r in results.values())
