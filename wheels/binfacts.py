"""What a built library exports, needs and is built for, read from the file
itself (ELF with pyelftools; Mach-O and archives with the LLVM tools; PE with
objdump). Used by wheels/proofs.py to check every artifact against the
public header.

    python wheels/binfacts.py build-pkg/arm64/libeliza.so
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

# ---- the header ------------------------------------------------------------------


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def header_functions(header: str) -> set[str]:
    """Names of every ``ELIZA_API ... eliza_x(...);`` declaration."""
    return set(re.findall(r"^\s*ELIZA_API\s+[^;(#]*?\b(eliza_\w+)\s*\(", strip_comments(header), flags=re.M))


def header_structs(header: str) -> dict[str, list[str]]:
    """Every ``typedef struct NAME { ... } NAME;`` with its field names."""
    out: dict[str, list[str]] = {}
    for name, body in re.findall(
        r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*\w+\s*;", strip_comments(header), re.S
    ):
        out[name] = re.findall(r"(\w+)\s*(?:\[[^\]]*\]\s*)*;", body)
    return out


def header_abi_version(header: str) -> int:
    m = re.search(r"#define\s+ELIZA_ABI_VERSION\s+(\d+)", header)
    if not m:
        raise ValueError("ELIZA_ABI_VERSION not found")
    return int(m.group(1))


# ---- tools -----------------------------------------------------------------------------


def llvm_tool(name: str) -> str | None:
    """``llvm-<name>``, unversioned or the newest versioned one on PATH."""
    found = shutil.which(f"llvm-{name}")
    if found:
        return found
    for version in range(25, 10, -1):
        found = shutil.which(f"llvm-{name}-{version}")
        if found:
            return found
    return None


def _out(cmd: list[str]) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


# ---- ELF ---------------------------------------------------------------------------------


def elf_facts(path: Path) -> dict[str, Any]:
    """machine, soname, needed, exports (defined, default visibility),
    glibc (highest GLIBC_x.y version needed), load_aligns, stripped."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    with path.open("rb") as f:
        elf = ELFFile(f)
        facts: dict[str, Any] = {"format": "ELF", "machine": elf["e_machine"], "needed": [], "soname": None}
        dynamic = elf.get_section_by_name(".dynamic")
        if isinstance(dynamic, DynamicSection):
            for tag in dynamic.iter_tags():
                if tag.entry.d_tag == "DT_NEEDED":
                    facts["needed"].append(tag.needed)  # type: ignore[attr-defined]
                elif tag.entry.d_tag == "DT_SONAME":
                    facts["soname"] = tag.soname  # type: ignore[attr-defined]
        exports: set[str] = set()
        dynsym = elf.get_section_by_name(".dynsym")
        if isinstance(dynsym, SymbolTableSection):
            for sym in dynsym.iter_symbols():
                if (
                    sym.name
                    and sym["st_shndx"] != "SHN_UNDEF"
                    and sym["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")
                    and sym["st_other"]["visibility"] in ("STV_DEFAULT", "STV_PROTECTED")
                    and sym["st_info"]["type"] in ("STT_FUNC", "STT_OBJECT", "STT_TLS")
                ):
                    exports.add(sym.name)
        facts["exports"] = sorted(exports)
        glibc: list[tuple[int, ...]] = []
        verneed = elf.get_section_by_name(".gnu.version_r")
        if verneed is not None:
            for _, auxiliaries in verneed.iter_versions():  # type: ignore[attr-defined]
                for aux in auxiliaries:
                    m = re.fullmatch(r"GLIBC_(\d+(?:\.\d+)+)", aux.name)
                    if m:
                        glibc.append(tuple(int(x) for x in m.group(1).split(".")))
        facts["glibc"] = ".".join(map(str, max(glibc))) if glibc else None
        facts["load_aligns"] = [seg["p_align"] for seg in elf.iter_segments() if seg["p_type"] == "PT_LOAD"]
        facts["stripped"] = elf.get_section_by_name(".symtab") is None and not any(
            s.name.startswith(".debug") for s in elf.iter_sections()
        )
    return facts


# ---- Mach-O ----------------------------------------------------------------------------


def macho_facts(path: Path) -> dict[str, Any]:
    """install_name, dylibs, platform, minos, archs, exports (of a dylib;
    for an archive: of all members), with the LLVM tools."""
    objdump = llvm_tool("objdump")
    nm = llvm_tool("nm")
    if not objdump or not nm:
        raise RuntimeError("llvm-objdump and llvm-nm are needed (apt-get install llvm)")
    headers = _out([objdump, "--macho", "--private-headers", str(path)])
    facts: dict[str, Any] = {"format": "Mach-O"}
    m = re.search(r"cmd LC_ID_DYLIB.*?name (\S+)", headers, re.S)
    facts["install_name"] = m.group(1) if m else None
    facts["dylibs"] = re.findall(r"cmd LC_LOAD_DYLIB.*?name (\S+)", headers, re.S)
    facts["platforms"] = sorted(set(re.findall(r"platform (\w+)", headers)))
    minos = set(re.findall(r"minos (\S+)", headers))
    minos |= set(re.findall(r"cmd LC_VERSION_MIN_MACOSX.*?version (\S+)", headers, re.S))
    facts["minos"] = sorted(minos)
    # llvm-objdump -f prints the format, then may exit 1 on a dylib's header.
    file_out = subprocess.run([objdump, "-f", str(path)], capture_output=True, text=True, check=False).stdout
    formats = re.findall(r"file format mach-o (.+)$", file_out, flags=re.M)
    facts["archs"] = sorted(
        {"X86_64" if "x86-64" in f or "x86_64" in f else f.strip().upper() for f in formats}
    )
    syms = _out([nm, "--extern-only", "--defined-only", "--format=just-symbols", str(path)])
    facts["exports"] = sorted(
        {s[1:] if s.startswith("_") else s for s in syms.split() if not s.endswith(":")}
    )
    return facts


def archive_globals(path: Path, macho: bool) -> set[str]:
    """Global defined symbols of every member of a static archive, with the
    Mach-O leading underscore removed when ``macho``."""
    nm = llvm_tool("nm")
    if not nm:
        raise RuntimeError("llvm-nm is needed (apt-get install llvm)")
    syms = _out([nm, "--extern-only", "--defined-only", "--format=just-symbols", str(path)])
    names = {s for s in syms.split() if not s.endswith(":")}
    return {s[1:] if macho and s.startswith("_") else s for s in names}


# ---- PE -------------------------------------------------------------------------------------


def pe_facts(path: Path) -> dict[str, Any]:
    """machine, imports (DLL names), exports, from ``objdump -p``."""
    objdump = shutil.which("x86_64-w64-mingw32-objdump") or llvm_tool("objdump")
    if not objdump:
        raise RuntimeError("x86_64-w64-mingw32-objdump or llvm-objdump is needed")
    text = _out([objdump, "-p", str(path)])
    facts: dict[str, Any] = {"format": "PE"}
    facts["imports"] = sorted(set(re.findall(r"DLL Name:\s*(\S+)", text)))
    exports: set[str] = set()
    m = re.search(r"\[Ordinal/Name Pointer\] Table(.*?)(?:\n\s*\n|\Z)", text, re.S)
    if m:
        exports = set(re.findall(r"\]\s+(\w+)\s*$", m.group(1), flags=re.M))
    facts["exports"] = sorted(exports)
    mm = re.search(r"file format (\S+)", text)
    facts["machine"] = mm.group(1) if mm else None
    return facts


def facts(path: Path) -> dict[str, Any]:
    head = path.read_bytes()[:8]
    if head[:4] == b"\x7fELF":
        return elf_facts(path)
    if head[:2] == b"MZ":
        return pe_facts(path)
    if head[:4] in (b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe") or head.startswith(b"!<arch>"):
        return macho_facts(path)
    raise ValueError(f"{path}: not an ELF, PE or Mach-O file")


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(json.dumps({arg: facts(Path(arg))}, indent=2))
