"""The ``eliza`` command line: ``info`` on this build and on GGUF files,
and one-line errors with exit status 1."""

from __future__ import annotations

import json
import re
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

import eliza
from eliza.cli import main

RunCli = Callable[..., "subprocess.CompletedProcess[str]"]


def test_python_m_eliza_info_prints_capabilities(run_cli: RunCli) -> None:
    result = run_cli("info")
    assert result.returncode == 0, result.stderr
    caps = eliza.capabilities()
    assert f"libeliza {caps['version']} (ABI {caps['abi']})" in result.stdout
    assert re.search(rf"^  simd +{re.escape(caps['simd'])}$", result.stdout, flags=re.M)
    for key in ("library", "simd", "quant_types", "engines", "espeak_ng"):
        assert key in result.stdout
    assert result.stderr == ""


def test_info_lists_vulkan_devices_or_says_why_none(run_cli: RunCli) -> None:
    result = run_cli("info")
    assert result.returncode == 0, result.stderr
    gpu = eliza.capabilities()["gpu"]
    assert re.search(r"^  gpu +", result.stdout, flags=re.M)
    for device in gpu["devices"]:
        assert f"#{device['index']}: {device['name']} ({device['type']}" in result.stdout
    if gpu["reason"]:
        assert f"no GPU: {gpu['reason']}" in result.stdout


def test_info_json_is_the_capabilities_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == eliza.capabilities()


def test_info_on_a_small_gguf(run_cli: RunCli, tiny_gguf: Path) -> None:
    result = run_cli("info", str(tiny_gguf))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "GGUF v3" in out
    assert "architecture: tinyarch" in out
    assert "tinyarch.block_count" in out and " 2\n" in out
    # 20 tokens, 8 shown, the rest counted
    assert '[20 x STRING] "tok0", "tok1"' in out and "... (+12)" in out
    assert "tensors: 3" in out
    assert "weight.f32" in out and "3 x 4" in out
    template = next(line for line in out.splitlines() if "tokenizer.chat_template" in line)
    assert template.endswith('..."') and len(template) < 120


def test_info_all_metadata_prints_arrays_in_full(capsys: pytest.CaptureFixture[str], tiny_gguf: Path) -> None:
    assert main(["info", str(tiny_gguf), "--all-metadata", "--tensors", "0"]) == 0
    out = capsys.readouterr().out
    assert '"tok19"' in out and "(+" not in out
    with eliza.GGUFFile(tiny_gguf) as f:
        template = f.metadata["tokenizer.chat_template"]
    assert len(template) > 200 and json.dumps(template, ensure_ascii=False) in out
    assert "first" not in out


def test_info_json_on_a_gguf_is_the_library_document(
    capsys: pytest.CaptureFixture[str], tiny_gguf: Path
) -> None:
    assert main(["info", str(tiny_gguf), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    with eliza.GGUFFile(tiny_gguf) as f:
        assert doc == f.info()


def test_info_on_gemma(run_cli: RunCli, gemma_path: Path) -> None:
    result = run_cli("info", str(gemma_path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "architecture: gemma3" in out
    assert "gemma3.block_count" in out
    assert "tokenizer.ggml.tokens" in out
    for type_name in ("Q4_K", "Q6_K", "F32"):
        assert f"\n  {type_name} " in out
    assert "token_embd.weight" in out


def test_errors_are_one_line_on_stderr_with_status_1(run_cli: RunCli, tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    result = run_cli("info", str(missing))
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("eliza: error: ") and "missing.gguf" in lines[0]
    assert "Traceback" not in result.stderr


def test_missing_library_is_a_one_line_error(run_cli: RunCli, tmp_path: Path) -> None:
    result = run_cli("info", env={"ELIZA_LIBRARY": str(tmp_path / "libgone.so")})
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("eliza: error: ELIZA_LIBRARY=") and "libgone.so" in result.stderr


def test_corrupt_file_is_a_one_line_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + b"\x05")  # truncated in a key
    assert main(["info", str(junk)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ELIZA_E_FORMAT" in err


def test_a_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    assert "COMMAND" in capsys.readouterr().err


def test_models_list_names_every_pinned_model(run_cli: RunCli, tmp_path: Path) -> None:
    result = run_cli("models", "list", env={"ELIZA_MODEL_CACHE": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert "gemma3-270m" in result.stdout and "not fetched" in result.stdout


def test_models_path_of_an_unfetched_or_unknown_model_fails(run_cli: RunCli, tmp_path: Path) -> None:
    env = {"ELIZA_MODEL_CACHE": str(tmp_path)}
    unfetched = run_cli("models", "path", "gemma3-270m", env=env)
    assert unfetched.returncode == 1 and "eliza models fetch gemma3-270m" in unfetched.stderr
    unknown = run_cli("models", "path", "no-such-model", env=env)
    assert unknown.returncode == 1 and "unknown model 'no-such-model'" in unknown.stderr


def test_models_path_of_a_fetched_model_is_the_verified_file(run_cli: RunCli, gemma_path: Path) -> None:
    result = run_cli("models", "path", "gemma3-270m", env={"ELIZA_MODEL_CACHE": str(gemma_path.parent)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(gemma_path)
