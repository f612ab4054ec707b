"""Reads include/eliza.h as text and probes it with a C compiler.

The tests compare what this finds in the header against the binary's own
reports and the Python bindings, so it deliberately shares no code with
either: it parses the header's text and compiles a probe program generated
from it.

    python tests/tools/layout_probe.py [include/eliza.h] [--cc clang]

prints the layout JSON (same format as eliza_abi_layout_json()) of every
public struct, as compiled by the given compiler.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Function",
    "strip_comments",
    "parse_structs",
    "parse_opaque_types",
    "parse_enum",
    "parse_define",
    "parse_functions",
    "probe_source",
    "probe_layout",
]


@dataclass(frozen=True)
class Function:
    """An ELIZA_API prototype: return type and parameter types as written
    (without parameter names), whitespace normalized."""

    name: str
    restype: str
    argtypes: tuple[str, ...]


def strip_comments(text: str) -> str:
    """The header without /* */ and // comments."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _normalize_type(text: str) -> str:
    text = re.sub(r"\s*\*\s*", " *", text.strip())
    return re.sub(r"\s+", " ", text).replace("* *", "**").strip()


def parse_structs(header: str) -> dict[str, list[tuple[str, str]]]:
    """Every ``typedef struct NAME { ... } NAME;``: its fields in order as
    (name, type) pairs, the type as written with whitespace normalized and
    array extents appended (``"uint64_t[4]"``). One declarator per
    declaration, no function-pointer fields (ValueError otherwise)."""
    structs: dict[str, list[tuple[str, str]]] = {}
    pattern = r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;"
    for tag, body, name in re.findall(pattern, strip_comments(header), flags=re.S):
        if tag != name:
            raise ValueError(f"typedef struct {tag} {{...}} {name}: tag and name differ")
        fields: list[tuple[str, str]] = []
        for decl in filter(None, (d.strip() for d in body.split(";"))):
            m = re.fullmatch(r"([\w\s*]*?)\b(\w+)\s*((?:\[\s*\w+\s*\]\s*)*)", decl)
            if not m or not m.group(1).strip():
                raise ValueError(f"struct {name}: cannot parse field declaration {decl!r}")
            extents = "".join(f"[{e}]" for e in re.findall(r"\[\s*(\w+)\s*\]", m.group(3)))
            fields.append((m.group(2), _normalize_type(m.group(1)) + extents))
        structs[name] = fields
    return structs


def parse_opaque_types(header: str) -> set[str]:
    """Every ``typedef struct NAME NAME;`` (a handle type without a body)."""
    return {
        a for a, b in re.findall(r"typedef\s+struct\s+(\w+)\s+(\w+)\s*;", strip_comments(header)) if a == b
    }


def parse_enum(header: str, name: str) -> dict[str, int]:
    """The members of ``typedef enum NAME { ... }`` with their values."""
    m = re.search(r"typedef\s+enum\s+" + name + r"\s*\{(.*?)\}", strip_comments(header), flags=re.S)
    if not m:
        raise ValueError(f"enum {name} not found")
    members: dict[str, int] = {}
    for item in m.group(1).split(","):
        if item.strip():
            key, value = item.split("=")
            members[key.strip()] = int(value.strip(), 0)
    return members


def parse_define(header: str, name: str) -> int:
    """The integer value of ``#define NAME value``."""
    m = re.search(r"#define\s+" + name + r"\s+(\w+)", header)
    if not m:
        raise ValueError(f"#define {name} not found")
    return int(m.group(1), 0)


def parse_functions(header: str) -> dict[str, Function]:
    """Every ``ELIZA_API ret name(params);`` declaration."""
    text = strip_comments(header)
    out: dict[str, Function] = {}
    for ret, name, params in re.findall(
        r"^[ \t]*ELIZA_API\s+([^;(#]*?)\b(eliza_\w+)\s*\(([^)]*)\)\s*;", text, flags=re.M
    ):
        argtypes: list[str] = []
        if params.strip() != "void":
            for param in params.split(","):
                m = re.match(r"(.*?)\b\w+\s*$", param.strip(), flags=re.S)
                if not m or not m.group(1).strip():
                    raise ValueError(f"{name}: cannot parse parameter {param.strip()!r}")
                argtypes.append(_normalize_type(m.group(1)))
        out[name] = Function(name, _normalize_type(ret), tuple(argtypes))
    return out


def probe_source(header: str) -> str:
    """A C program that prints the layout of every struct of ``header``."""
    lines = [
        "#include <stddef.h>",
        "#include <stdio.h>",
        '#include "eliza.h"',
        "int main(void) {",
        '    printf("{");',
    ]
    for i, (name, fields) in enumerate(parse_structs(header).items()):
        lines.append(
            f'    printf("%s\\"{name}\\":{{\\"size\\":%zu,\\"align\\":%zu,\\"fields\\":{{", '
            f'"{"," if i else ""}", sizeof({name}), (size_t)_Alignof({name}));'
        )
        for j, (field, _) in enumerate(fields):
            lines.append(
                f'    printf("%s\\"{field}\\":[%zu,%zu]", "{"," if j else ""}", '
                f"offsetof({name}, {field}), sizeof((({name} *)0)->{field}));"
            )
        lines.append('    printf("}}");')
    lines += ['    printf("}\\n");', "    return 0;", "}", ""]
    return "\n".join(lines)


def probe_layout(header_path: Path, compiler: str, workdir: Path) -> str:
    """Compiles and runs the probe of ``header_path`` with ``compiler`` (a
    command line, e.g. ``"clang"``); returns its JSON output. Raises
    subprocess.CalledProcessError with the compiler's output on failure."""
    src = workdir / "layout_probe.c"
    exe = workdir / "layout_probe"
    src.write_text(probe_source(header_path.read_text()))
    cmd = [
        *shlex.split(compiler),
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-I",
        str(header_path.parent),
        str(src),
        "-o",
        str(exe),
    ]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout


def _main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    default_header = Path(__file__).resolve().parents[2] / "include" / "eliza.h"
    parser.add_argument("header", nargs="?", type=Path, default=default_header)
    parser.add_argument("--cc", default="cc", help="compiler command (default: cc)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(json.loads(probe_layout(args.header, args.cc, Path(tmp))), indent=2))


if __name__ == "__main__":
    _main()
