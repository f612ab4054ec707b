"""The ABI contract: include/eliza.h, the binary and the Python bindings
agree on every struct layout, function prototype, status code and version.

The header side comes from parsing its text and compiling a probe generated
from it (tests/tools/layout_probe.py); the binary side from
eliza_abi_layout_json() and the exported symbols; the Python side from
eliza._native.
"""

from __future__ import annotations

import ctypes
import dataclasses
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import eliza
from eliza import _native
from eliza._native import StructLayout
from tools.layout_probe import (
    parse_define,
    parse_enum,
    parse_functions,
    parse_opaque_types,
    parse_structs,
    probe_layout,
)

REPO = Path(__file__).resolve().parents[1]
HEADER = REPO / "include" / "eliza.h"

_SCALARS: dict[str, Any] = {
    "void": None,
    "char": ctypes.c_char,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "int32_t": ctypes.c_int32,
    "uint32_t": ctypes.c_uint32,
    "int64_t": ctypes.c_int64,
    "uint64_t": ctypes.c_uint64,
    "size_t": ctypes.c_size_t,
    "eliza_log_fn": _native.LOG_FN,
}


def expected_ctype(c_type: str, opaque: set[str]) -> Any:
    """The ctypes type the bindings must use for a header type: ``char *`` is
    c_char_p, ``void *`` and opaque handles are c_void_p, a struct pointer is
    POINTER(mirror), const is ignored, arrays become ctypes arrays."""
    extents = [int(n) for n in re.findall(r"\[(\d+)\]", c_type)]
    words = [w for w in re.findall(r"\w+|\*", c_type.split("[")[0]) if w != "const"]
    stars = words.count("*")
    base = " ".join(w for w in words if w != "*")
    t: Any
    if stars == 0:
        t = _SCALARS[base]
    else:
        if base == "char":
            t = ctypes.c_char_p
        elif base == "void" or base in opaque:
            t = ctypes.c_void_p
        elif base in _native.STRUCTS:
            t = ctypes.POINTER(_native.STRUCTS[base])
        else:
            t = ctypes.POINTER(_SCALARS[base])
        for _ in range(stars - 1):
            t = ctypes.POINTER(t)
    for n in reversed(extents):
        t = t * n
    return t


@pytest.fixture(scope="module")
def binary_layout() -> dict[str, StructLayout]:
    raw: bytes = _native.lib().eliza_abi_layout_json()
    return _native.parse_layout_json(raw.decode())


def _compilers() -> list[str]:
    found = ["cc"] if shutil.which("cc") else []
    if (
        shutil.which("clang")
        and Path(shutil.which("clang") or "").resolve() != Path(shutil.which("cc") or "").resolve()
    ):
        found.append("clang")
    return found


def _assert_same_layouts(left: dict[str, StructLayout], right: dict[str, StructLayout], what: str) -> None:
    assert sorted(left) == sorted(right), f"{what}: different sets of structs"
    for name in left:
        assert left[name] == right[name], f"{what}: {name} differs"


@pytest.mark.parametrize("compiler", _compilers())
def test_header_probe_layout_equals_binary_report(
    compiler: str, tmp_path: Path, binary_layout: dict[str, StructLayout]
) -> None:
    probed = _native.parse_layout_json(probe_layout(HEADER, compiler, tmp_path))
    _assert_same_layouts(probed, binary_layout, f"header probe ({compiler}) vs eliza_abi_layout_json()")


def test_python_mirrors_equal_binary_report(binary_layout: dict[str, StructLayout]) -> None:
    _assert_same_layouts(_native.mirror_layout(), binary_layout, "Python mirrors vs eliza_abi_layout_json()")


def test_python_mirrors_have_header_fields_and_types(header_text: str) -> None:
    opaque = parse_opaque_types(header_text)
    header = parse_structs(header_text)
    assert sorted(header) == sorted(_native.STRUCTS)
    for name, fields in header.items():
        mirror = _native.STRUCTS[name]._fields_
        assert [f[0] for f in mirror] == [f for f, _ in fields], name
        for (field, c_type), entry in zip(fields, mirror):
            py_type = entry[1]
            assert py_type is expected_ctype(c_type, opaque), (
                f"{name}.{field}: {c_type} mirrored as {py_type}"
            )


def test_layout_report_is_one_static_string_under_concurrent_first_calls() -> None:
    # A fresh process whose first eliza calls race from 8 threads: every
    # call must return the same pointer to the same document.
    script = textwrap.dedent(
        """
        import ctypes, sys, threading
        lib = ctypes.CDLL(sys.argv[1])
        fn = lib.eliza_abi_layout_json
        fn.restype = ctypes.c_void_p
        barrier = threading.Barrier(8)
        ptrs = []
        def call():
            barrier.wait()
            ptrs.append(fn())
        threads = [threading.Thread(target=call) for _ in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        assert len(set(ptrs)) == 1 and ptrs[0], ptrs
        print(ctypes.string_at(ptrs[0]).decode())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script, _native.lib()._name], capture_output=True, text=True, check=True
    ).stdout
    assert _native.parse_layout_json(out) == _native.mirror_layout()


def test_check_abi_accepts_the_loaded_library() -> None:
    _native.check_abi(_native.lib())


def test_check_abi_rejects_another_abi_version_naming_both() -> None:
    with pytest.raises(eliza.AbiError) as info:
        _native.check_abi(_native.lib(), abi_version=_native.ABI_VERSION + 41)
    assert f"ABI version {_native.ABI_VERSION}," in str(info.value)
    assert f"expects {_native.ABI_VERSION + 41}" in str(info.value)
    assert info.value.code == eliza.Status.E_ABI


def test_check_abi_rejects_a_doctored_struct_size_naming_both() -> None:
    layout = _native.mirror_layout()
    real = layout["eliza_gguf_info_params"]
    layout["eliza_gguf_info_params"] = dataclasses.replace(real, size=real.size + 1000)
    with pytest.raises(eliza.AbiError) as info:
        _native.check_abi(_native.lib(), layout=layout)
    message = str(info.value)
    assert f"size {real.size} align {real.align} in libeliza" in message
    assert f"size {real.size + 1000} align {real.align} in the SDK" in message


def test_check_abi_rejects_a_doctored_field_offset_naming_both() -> None:
    layout = _native.mirror_layout()
    real = layout["eliza_gguf_info_params"]
    field = real.fields[1]
    moved = dataclasses.replace(field, offset=field.offset + 700)
    layout[real.name] = dataclasses.replace(real, fields=(real.fields[0], moved, *real.fields[2:]))
    with pytest.raises(eliza.AbiError) as info:
        _native.check_abi(_native.lib(), layout=layout)
    message = str(info.value)
    assert f"{real.name}.{field.name}: offset {field.offset} size {field.size} in libeliza" in message
    assert f"offset {field.offset + 700} size {field.size} in the SDK" in message


def test_check_abi_rejects_renamed_missing_and_extra_structs() -> None:
    layout = _native.mirror_layout()
    real = layout.pop("eliza_gguf_info_params")
    renamed = tuple(
        dataclasses.replace(f, name=f.name + "_x") if i == 2 else f for i, f in enumerate(real.fields)
    )
    layout["eliza_gguf_info_params"] = dataclasses.replace(real, fields=renamed)
    layout["eliza_no_such_struct"] = dataclasses.replace(real, name="eliza_no_such_struct")
    del layout["eliza_llm_piece"]
    with pytest.raises(eliza.AbiError) as info:
        _native.check_abi(_native.lib(), layout=layout)
    message = str(info.value)
    assert "include_tensors_x" in message
    assert "eliza_no_such_struct: missing from libeliza's layout report" in message
    assert "eliza_llm_piece: in libeliza's layout report, missing from the SDK" in message


def test_abi_version_matches_header(header_text: str) -> None:
    assert parse_define(header_text, "ELIZA_ABI_VERSION") == _native.ABI_VERSION == eliza.abi_version()


def test_status_codes_match_header(header_text: str) -> None:
    header = parse_enum(header_text, "eliza_status")
    assert header == {"ELIZA_" + s.name: int(s) for s in eliza.Status}


def test_status_names_match_the_library() -> None:
    for status in eliza.Status:
        assert _native.lib().eliza_status_name(int(status)).decode() == "ELIZA_" + status.name


def test_log_levels_match_header(header_text: str) -> None:
    header = parse_enum(header_text, "eliza_log_level")
    assert header == {"ELIZA_LOG_" + level.name: int(level) for level in eliza.LogLevel}


def test_every_header_function_is_declared_with_header_types(header_text: str) -> None:
    opaque = parse_opaque_types(header_text)
    functions = parse_functions(header_text)
    assert sorted(functions) == sorted(_native.PROTOTYPES)
    for name, fn in functions.items():
        restype, argtypes = _native.PROTOTYPES[name]
        want = (expected_ctype(fn.restype, opaque), tuple(expected_ctype(a, opaque) for a in fn.argtypes))
        assert (restype, argtypes) == want, f"{name}: header {fn}"


def test_library_exports_every_header_function(header_text: str) -> None:
    assert _native.missing_functions(_native.lib()) == []


def test_library_exports_nothing_beyond_the_header(header_text: str) -> None:
    nm = shutil.which("nm")
    if nm is None or sys.platform != "linux":
        pytest.skip("needs nm and an ELF library")
    out = subprocess.run(
        [nm, "-D", "--defined-only", _native.lib()._name], capture_output=True, text=True, check=True
    ).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.split()[-2:-1] == ["T"]}
    assert sorted(exported - set(parse_functions(header_text))) == []


def test_layout_table_coverage_check_fails_the_build_when_a_field_is_left_out(
    tmp_path: Path, binary_layout: dict[str, StructLayout]
) -> None:
    # Drop the last F(...) of each struct in layout.c's table in turn. The
    # C11 _Static_assert must stop the compile, naming the struct, whenever
    # the field does not fit in the tail padding of the fields before it (a
    # field that does fit there is caught by the probe test above instead).
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    source = (REPO / "libeliza" / "api" / "layout.c").read_text()
    entries = list(re.finditer(r"S\((\w+),((?:\s|\\|F\(\w+\))+)\)", source))
    assert sorted(m.group(1) for m in entries) == sorted(_native.STRUCTS)
    checked = 0
    for entry in entries:
        name = entry.group(1)
        layout = binary_layout[name]
        before = layout.fields[-2]
        if -(-(before.offset + before.size) // layout.align) * layout.align == layout.size:
            continue
        last = list(re.finditer(r"F\(\w+\)", entry.group(2)))[-1]
        start, end = entry.start(2) + last.start(), entry.start(2) + last.end()
        (tmp_path / "layout.c").write_text(source[:start] + source[end:])
        result = subprocess.run(
            [
                cc,
                "-std=c11",
                "-fsyntax-only",
                "-I",
                str(REPO / "include"),
                "-I",
                str(REPO / "libeliza"),
                str(tmp_path / "layout.c"),
            ],
            capture_output=True,
            text=True,
        )
        assert result.returncode != 0, f"{name} without {last.group(0)} compiled"
        assert f"{name}: a field of the struct is missing" in result.stderr
        checked += 1
    assert checked > 0


def test_header_compiles_as_c99_c11_and_cpp(tmp_path: Path) -> None:
    src = tmp_path / "use.c"
    src.write_text('#include "eliza.h"\nint main(void) { return (int)eliza_abi_version(); }\n')
    runs = [["cc", "-std=c99"], ["cc", "-std=c11"]]
    if shutil.which("c++"):
        runs.append(["c++", "-x", "c++", "-std=c++11"])
    for cmd in runs:
        subprocess.run(
            [
                *cmd,
                "-Wall",
                "-Wextra",
                "-Wpedantic",
                "-Werror",
                "-fsyntax-only",
                "-I",
                str(HEADER.parent),
                str(src),
            ],
            check=True,
        )
