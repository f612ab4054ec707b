"""Packaging proofs (wheels/proofs.py) as tests, plus quick checks of the
packaging helpers and of the CI configuration.

Each proof builds libeliza once for its target (build-pkg/<target>, reused),
checks the artifact against include/eliza.h and runs what can run on this
machine. A proof whose tools are missing here is skipped with the reason.
The proofs are invoked through the Makefile target of the same job when the
Makefile has it (`make check-windows`, ...), else through wheels/proofs.py
directly: the two are the same command.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.metadata import Metadata
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the packaging tests run on 3.11+
    pytest.skip("needs Python 3.11+ (tomllib)", allow_module_level=True)

REPO = Path(__file__).resolve().parents[1]
WHEELS = REPO / "wheels"
PROOFS = WHEELS / "proofs.py"
OUT = Path(os.environ.get("ELIZA_PKG_OUT", REPO / "build-pkg"))

_spec = importlib.util.spec_from_file_location("pack_wheel", WHEELS / "pack_wheel.py")
assert _spec is not None and _spec.loader is not None
pack_wheel = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pack_wheel)


def _has_make_target(target: str) -> bool:
    """The Makefile has ``target`` and its recipe runs wheels/proofs.py."""
    makefile = REPO / "Makefile"
    if not makefile.is_file():
        return False
    m = re.search(rf"^{re.escape(target)}\s*:[^\n]*\n((?:\t[^\n]*\n?)*)", makefile.read_text(), re.M)
    return m is not None and "wheels/proofs.py" in m.group(0)


def _prove(proof: str, make_target: str, timeout: int) -> None:
    if _has_make_target(make_target):
        cmd = ["make", "-C", str(REPO), "--no-print-directory", f"PYTHON={sys.executable}", make_target]
    else:
        cmd = [sys.executable, str(PROOFS), proof]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False)
    output = proc.stdout + proc.stderr
    results_file = OUT / "proofs.json"
    result = json.loads(results_file.read_text()).get(proof, {}) if results_file.is_file() else {}
    if result.get("result") == "skipped":
        pytest.skip(f"{proof}: {result.get('why')}")
    assert proc.returncode == 0 and result.get("result") == "passed", (
        f"{' '.join(cmd)} exited {proc.returncode}: {result.get('why', '')}\n{output[-8000:]}"
    )
    print(json.dumps(result, indent=2))


# ---- the proofs -------------------------------------------------------------------------


def test_wheel_is_built_repaired_installed_and_smoke_tested() -> None:
    """python -m build (sdist, then a wheel from it) -> auditwheel repair ->
    fresh venv -> tests/wheel passes."""
    _prove("wheel", "check-wheel", timeout=1200)


def test_portable_zig_wheel_is_manylinux2014() -> None:
    """zig cc -target x86_64-linux-gnu.2.17: auditwheel says manylinux_2_17;
    installed and smoke-tested."""
    _prove("portable", "check-portable", timeout=1200)


def test_arm64_cross_build_passes_its_tests_under_qemu_and_wheels() -> None:
    """aarch64 gcc cross build: ctest and an ABI probe under qemu-aarch64; a
    linux_aarch64 wheel that auditwheel accepts."""
    _prove("arm64", "check-arm64", timeout=1800)


def test_windows_dll_passes_its_tests_under_wine() -> None:
    """mingw-w64: one DLL importing only OS/CRT DLLs, exports == header; ctest
    and an ABI probe under wine; a win_amd64 wheel."""
    _prove("windows", "check-windows", timeout=1800)


def test_macos_dylibs_are_rpath_warning_free_and_minimal() -> None:
    """zig cc for arm64 macOS 11 and x86_64 macOS 10.13: @rpath install
    name, right minos, libSystem only, exports == header, no warnings."""
    _prove("macos", "check-macos", timeout=1200)


def test_ios_static_archive_exports_what_the_dylib_does() -> None:
    """ios/build-xcframework.sh (zig proxy): every source for
    arm64-apple-ios13.0 in libeliza.a; its eliza_* globals == dylib exports."""
    _prove("ios", "check-ios", timeout=1200)


def test_android_build_script_with_a_stand_in_toolchain() -> None:
    """android/build.sh (aarch64 musl proxy): 16 KB LOAD alignment, stripped,
    JNI bridge, ctest under qemu, prefab AAR."""
    _prove("android", "check-android-proxy", timeout=1800)


def test_jni_bridge_and_wrapper_on_the_host_jvm() -> None:
    """The JNI bridge against the JDK's jni.h, driven from Java (and Kotlin
    when kotlinc exists) on this machine's JVM."""
    _prove("jni", "check-jni", timeout=900)


# ---- the helpers ------------------------------------------------------------------------------


def test_pack_wheel_writes_a_valid_py3_none_wheel(tmp_path: Path) -> None:
    lib = tmp_path / "libeliza.so"
    lib.write_bytes(b"\x7fELF not really")
    wheel = pack_wheel.pack(lib, "linux_aarch64", tmp_path / "dist")
    project = pack_wheel.project_metadata()
    version = project["version"]
    dist = re.sub(r"[-_.]+", "_", project["name"]).lower()
    assert wheel.name == f"{dist}-{version}-py3-none-linux_aarch64.whl"
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        info = f"{dist}-{version}.dist-info"
        assert "eliza/__init__.py" in names and "eliza/libeliza.so" in names
        assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
        wheel_meta = zf.read(f"{info}/WHEEL").decode()
        assert "Tag: py3-none-linux_aarch64" in wheel_meta and "Root-Is-Purelib: false" in wheel_meta
        metadata = Metadata.from_email(zf.read(f"{info}/METADATA"))  # validates every field
        assert (metadata.name, str(metadata.version)) == (project["name"], version)
        assert metadata.requires_python == SpecifierSet(project["requires-python"])
        extras = project["optional-dependencies"]
        assert extras and metadata.provides_extra == list(extras)
        requires = {str(r) for r in metadata.requires_dist or []}
        assert {str(Requirement(d)) for d in project["dependencies"]} <= requires
        for extra, deps in extras.items():
            for dep in deps:
                assert str(Requirement(f'{dep}; extra == "{extra}"')) in requires, (extra, dep)
        assert "eliza = eliza.cli:main" in zf.read(f"{info}/entry_points.txt").decode()
        record = zf.read(f"{info}/RECORD").decode().splitlines()
        for line in record:
            name, digest, size = line.rsplit(",", 2)
            if name.endswith("RECORD"):
                continue
            data = zf.read(name)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={want}" and int(size) == len(data), name
        assert len(record) == len(names)


def test_zig_cc_wrapper_spells_march_the_zig_way(tmp_path: Path) -> None:
    fake_zig = tmp_path / "zig"
    fake_zig.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    fake_zig.chmod(0o755)
    out = subprocess.run(
        ["sh", str(WHEELS / "zig-cc"), "-O3", "-march=armv8.2-a+dotprod", "a b.c"],
        env={**os.environ, "ZIG": str(fake_zig)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out == ["cc", "-O3", "-mcpu=generic+v8_2a+dotprod", "a b.c"]


# ---- CI configuration ---------------------------------------------------------------------------


def _cibuildwheel() -> dict[str, object]:
    doc = tomllib.loads((REPO / "pyproject.toml").read_text())
    config = doc.get("tool", {}).get("cibuildwheel")
    assert config, "pyproject.toml has no [tool.cibuildwheel] (see wheels/README.md)"
    return dict(config)


def test_cibuildwheel_builds_one_py3_wheel_per_platform_and_runs_the_smoke_suite() -> None:
    config = _cibuildwheel()
    assert str(config["build"]).split() == ["cp311-*"], config["build"]
    test_command = str(config["test-command"])
    assert "tests/wheel/pytest.ini" in test_command and "{project}/tests/wheel" in test_command
    requires = " ".join(map(str, config.get("test-requires", [])))  # type: ignore[call-overload]
    for package in ("pytest", "gguf", "numpy"):
        assert package in requires
    mac = config.get("macos", {})
    assert isinstance(mac, dict)
    assert "--require-archs" in str(mac.get("repair-wheel-command", "--require-archs"))
    assert "MACOSX_DEPLOYMENT_TARGET" in str(mac.get("environment", ""))


def test_workflow_runs_what_runs_here() -> None:
    workflow = (REPO / ".github" / "workflows" / "wheels.yml").read_text()
    for command in ("cibuildwheel", "android/build.sh", "ios/build-xcframework.sh", "wheels/proofs.py"):
        assert command in workflow, command
    for runner in ("ubuntu-", "ubuntu-24.04-arm", "macos-", "windows-"):
        assert runner in workflow, runner
