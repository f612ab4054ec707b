"""Library-wide entry points through the SDK: versions, capabilities, errors,
memory and logging."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import eliza
from eliza import _native
from eliza.errors import check, error_for

REPO = Path(__file__).resolve().parents[1]


def _last_error() -> str:
    raw: bytes = _native.lib().eliza_last_error()
    return raw.decode()


def _open_status(path: str) -> int:
    handle = ctypes.c_void_p()
    status = int(_native.lib().eliza_gguf_open(path.encode(), ctypes.byref(handle)))
    _native.lib().eliza_gguf_close(handle)
    return status


def test_capabilities_has_the_documented_keys() -> None:
    caps = eliza.capabilities()
    assert caps["abi"] == eliza.ABI_VERSION
    assert caps["version"] == eliza.version()
    assert isinstance(caps["simd"], str) and caps["simd"]
    assert isinstance(caps["cpu"], list)
    assert isinstance(caps["quant_types"], list) and "F32" in caps["quant_types"]
    assert isinstance(caps["engines"], dict)
    assert isinstance(caps["espeak_ng"], bool)
    assert isinstance(caps["force_scalar"], bool)
    assert caps["cpu_id"]["vendor"] in ("intel", "amd", "other")
    assert isinstance(caps["cpu_id"]["family"], int) and isinstance(caps["cpu_id"]["model"], int)
    bf16 = caps["tts_bf16"]
    assert isinstance(bf16["available"], bool) and isinstance(bf16["on"], bool)
    assert bf16["why"].startswith("on" if bf16["on"] else "off")
    gpu = caps["gpu"]
    assert gpu["backend"] in ("vulkan", None)
    assert isinstance(gpu["devices"], list)
    assert gpu["reason"] is None or isinstance(gpu["reason"], str)
    for device in gpu["devices"]:
        assert device["type"] in ("discrete", "integrated", "virtual", "cpu", "other")
        for flag in ("fp16", "int8", "int8_dot", "cooperative_matrix", "timestamps", "usable"):
            assert isinstance(device[flag], bool)
        assert device["subgroup_size"] >= 1 and device["max_binding_mb"] >= 0
    # No usable GPU is always said, never left silent.
    if not any(d["usable"] and d["type"] != "cpu" for d in gpu["devices"]):
        assert gpu["reason"]


def test_capabilities_say_why_there_is_no_gpu_when_disabled() -> None:
    code = "import eliza, json; print(json.dumps(eliza.capabilities()['gpu']))"
    env = {**os.environ, "ELIZA_GPU_DEVICE": "none"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    gpu = json.loads(out.stdout)
    assert gpu["devices"] == []
    assert gpu["reason"]


def test_version_matches_the_sdk_and_cmake_project() -> None:
    cmake = (REPO / "CMakeLists.txt").read_text()
    m = re.search(r"project\(\s*libeliza\s+VERSION\s+([\d.]+)", cmake)
    assert m is not None
    assert eliza.version() == eliza.__version__ == m.group(1)


def test_last_error_names_the_failure_and_clears_on_success(tiny_gguf: Path, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-model.gguf")
    assert _open_status(missing) == eliza.Status.E_IO
    assert "no-such-model.gguf" in _last_error()
    assert _open_status(str(tiny_gguf)) == eliza.Status.OK
    assert _last_error() == ""


def test_last_error_is_per_thread(tmp_path: Path) -> None:
    assert _open_status(str(tmp_path / "main-thread.gguf")) == eliza.Status.E_IO
    seen: list[str] = []

    def other() -> None:
        seen.append(_last_error())
        _open_status(str(tmp_path / "other-thread.gguf"))
        seen.append(_last_error())

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen[0] == ""
    assert "other-thread.gguf" in seen[1]
    assert "main-thread.gguf" in _last_error()


def test_check_raises_the_subclass_of_the_status_with_the_message(tmp_path: Path) -> None:
    status = _open_status(str(tmp_path / "gone.gguf"))
    with pytest.raises(eliza.ElizaIOError) as info:
        check(status)
    assert info.value.code == eliza.Status.E_IO
    assert "gone.gguf" in info.value.message
    assert str(info.value).endswith("(ELIZA_E_IO)")


def test_check_passes_ok_and_done_through() -> None:
    assert check(eliza.Status.OK) == 0
    assert check(eliza.Status.DONE) == 1


def test_every_error_status_has_its_own_subclass() -> None:
    classes = {type(error_for(int(s), "m")) for s in eliza.Status if s < 0}
    assert len(classes) == sum(1 for s in eliza.Status if s < 0)
    for status in eliza.Status:
        if status < 0:
            err = error_for(int(status), "why")
            assert isinstance(err, eliza.ElizaError) and err.status == status and err.code == status


def test_unknown_status_is_an_internal_error_keeping_its_code() -> None:
    err = error_for(-99, "from the future")
    assert isinstance(err, eliza.InternalError)
    assert err.code == -99
    assert str(err) == "from the future (status -99)"


def test_free_and_close_of_null_are_no_ops() -> None:
    _native.lib().eliza_free(None)
    _native.lib().eliza_gguf_close(None)


def test_missing_library_is_an_io_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELIZA_LIBRARY", str(tmp_path / "libnothing.so"))
    with pytest.raises(eliza.ElizaIOError, match="libnothing"):
        _native.find_library()


def test_unloadable_library_is_an_io_error(tmp_path: Path) -> None:
    bogus = tmp_path / "libeliza.so"
    bogus.write_bytes(b"not a shared library")
    with pytest.raises(eliza.ElizaIOError, match="cannot load"):
        _native.load(bogus)


def test_library_is_silent_without_a_log_handler(tiny_gguf: Path, tmp_path: Path) -> None:
    # Work that succeeds and work that fails, in a fresh process that exits
    # with a file still open: nothing may reach stdout or stderr.
    script = textwrap.dedent(
        f"""
        import eliza
        eliza.capabilities()
        with eliza.GGUFFile({str(tiny_gguf)!r}) as f:
            f.info(); f.tensor("weight.f32")
        try:
            eliza.GGUFFile({str(tmp_path / "missing.gguf")!r})
        except eliza.ElizaIOError:
            pass
        left_open = eliza.GGUFFile({str(tiny_gguf)!r})  # closed at interpreter exit
        """
    )
    env = dict(os.environ, PYTHONPATH=str(Path(eliza.__file__).resolve().parents[1]))
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (result.stdout, result.stderr) == ("", "")


def test_log_handler_receives_decoded_messages_and_can_be_removed() -> None:
    got: list[tuple[eliza.LogLevel, str]] = []
    eliza.set_log_handler(lambda level, message: got.append((level, message)), eliza.LogLevel.DEBUG)
    try:
        # The C side calls this trampoline; call it the same way.
        eliza._log_trampoline(int(eliza.LogLevel.INFO), "caf\u00e9".encode(), None)
        eliza._log_trampoline(7, None, None)
    finally:
        eliza.set_log_handler(None)
    eliza._log_trampoline(int(eliza.LogLevel.ERROR), b"after removal", None)
    assert got == [(eliza.LogLevel.INFO, "caf\u00e9"), (eliza.LogLevel.DEBUG, "")]


def test_forward_to_logging_maps_levels(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("DEBUG", logger="eliza"):
        eliza.forward_to_logging(eliza.LogLevel.WARN, "careful")
        eliza.forward_to_logging(eliza.LogLevel.DEBUG, "details")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "careful"),
        ("DEBUG", "details"),
    ]


@pytest.mark.skipif(os.environ.get("ELIZA_TEST_INSTALLED") == "1", reason="testing an installed eliza")
def test_tests_import_the_checkouts_sdk() -> None:
    assert Path(eliza.__file__).resolve().is_relative_to(REPO / "sdk")


_LEVEL_FEATURES = {
    "scalar": set(),
    "avx2": {"avx2", "fma", "f16c"},
    "avx512": {"avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512vnni"},
}


def _capabilities_under(env_overrides: dict[str, str]) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k not in ("ELIZA_SIMD", "ELIZA_FORCE_SCALAR")}
    env.update(env_overrides)
    code = "import json, eliza; print(json.dumps(eliza.capabilities()))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    caps: dict[str, object] = json.loads(out.stdout)
    return caps


@pytest.mark.parametrize("level", sorted(_LEVEL_FEATURES))
def test_eliza_simd_pins_a_level_the_cpu_has(level: str) -> None:
    cpu = set(eliza.capabilities()["cpu"])
    if not _LEVEL_FEATURES[level] <= cpu:
        pytest.skip(f"this CPU lacks the {level} level ({sorted(cpu)})")
    assert _capabilities_under({"ELIZA_SIMD": level})["simd"] == level


# The capabilities' x86 feature names and the Linux /proc/cpuinfo flags of
# the same features (the kernel lists a flag only where the OS saves its
# registers, as the library's probe checks XCR0).
_CPUINFO_FLAGS = {
    "avx2": "avx2",
    "fma": "fma",
    "f16c": "f16c",
    "avx512f": "avx512f",
    "avx512bw": "avx512bw",
    "avx512vl": "avx512vl",
    "avx512dq": "avx512dq",
    "avx512vnni": "avx512_vnni",
    "avx512bf16": "avx512_bf16",
    "avx512vbmi": "avx512vbmi",
    "avxvnni": "avx_vnni",
}


def test_capabilities_cpu_list_is_the_cpus_features() -> None:
    """One probe reports every x86 feature the kernels use, AVX-VNNI and the
    AVX-512 sub-features included, and nothing the CPU lacks."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file() or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("needs Linux on x86-64 (/proc/cpuinfo flags)")
    flags: set[str] = set()
    for line in cpuinfo.read_text().splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
            break
    want = {name for name, flag in _CPUINFO_FLAGS.items() if flag in flags}
    assert set(eliza.capabilities()["cpu"]) == want


def test_capabilities_cpu_id_is_the_cpus() -> None:
    """The vendor and the family / model the one probe read (CPUID leaves 0
    and 1) are the ones Linux shows."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file() or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("needs Linux on x86-64 (/proc/cpuinfo)")
    fields: dict[str, str] = {}
    for line in cpuinfo.read_text().splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    vendor = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}.get(fields["vendor_id"], "other")
    assert eliza.capabilities()["cpu_id"] == {
        "vendor": vendor,
        "family": int(fields["cpu family"]),
        "model": int(fields["model"]),
    }


def test_tts_bf16_default_is_the_cpu_rule_and_the_environment_forces_it() -> None:
    """BF16 products are on by default exactly on AMD family 0x19 (Zen 4)
    where the kernels exist; ELIZA_TTS_BF16=0 / 1 force them off /
    on where they exist; without the kernels (ELIZA_SIMD=avx2) they are off
    whatever is asked."""
    caps = _capabilities_under({"ELIZA_TTS_BF16": ""})
    bf16, cpu_id = caps["tts_bf16"], caps["cpu_id"]
    assert isinstance(bf16, dict) and isinstance(cpu_id, dict)
    zen4 = cpu_id["vendor"] == "amd" and cpu_id["family"] == 0x19
    assert bf16["available"] == ("avx512bf16" in caps["cpu"] and caps["simd"] == "avx512")  # type: ignore[operator]
    assert bf16["on"] == (bf16["available"] and zen4)
    for value, on in (("0", False), ("1", True)):
        forced = _capabilities_under({"ELIZA_TTS_BF16": value})["tts_bf16"]
        assert forced["on"] == (on and bf16["available"]), (value, forced)  # type: ignore[index]
        assert f"ELIZA_TTS_BF16={value}" in forced["why"]  # type: ignore[index]
    if "avx2" in caps["cpu"]:  # type: ignore[operator]
        at_avx2 = _capabilities_under({"ELIZA_SIMD": "avx2", "ELIZA_TTS_BF16": "1"})["tts_bf16"]
        assert at_avx2["available"] is False and at_avx2["on"] is False  # type: ignore[index]


def test_eliza_simd_keeps_the_best_level_for_one_the_cpu_lacks() -> None:
    best = _capabilities_under({})["simd"]
    for name in ("no-such-level", "neon" if best in ("avx2", "avx512") else "avx512"):
        assert _capabilities_under({"ELIZA_SIMD": name})["simd"] == best


def test_force_scalar_wins_over_eliza_simd() -> None:
    caps = _capabilities_under({"ELIZA_SIMD": "avx2", "ELIZA_FORCE_SCALAR": "1"})
    assert caps["simd"] == "scalar" and caps["force_scalar"] is True
