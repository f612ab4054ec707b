"""eliza.LLM on the GPU (``gpu_layers``): the tiny converted models through
the Vulkan decode step against the same files on the CPU (greedy text,
logits), the CPU fallback with its reason (``ELIZA_GPU_DEVICE=none``), the
error under ``gpu_required``, bad values, and the CLI's ``--gpu-layers``.
On any Vulkan device, Mesa's lavapipe included (CI has no GPU); skipped
where there is none (the aarch64 tests under qemu, wine). The C-level
checks (every position's logits, sampling, rewind, speculative decoding,
close under a stream) are tests/c/test_llm_model.c's
test_llm_gpu_engine."""

from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pytest

for _module in ("torch", "transformers", "gguf", "safetensors", "sentencepiece", "tokenizers"):
    pytest.importorskip(_module)

import tiny_models as tm  # noqa: E402

import eliza  # noqa: E402

PROMPT = "The people know the water and the water knows the people"


def _device() -> str:
    """The first usable Vulkan device's name, lavapipe included (the
    library's automatic choice skips CPU devices, so the tests name it)."""
    gpu = eliza.capabilities()["gpu"]
    usable = [d for d in gpu.get("devices", []) if d.get("usable")]
    if not usable:
        pytest.skip(f"no usable Vulkan device: {gpu.get('reason')}")
    name: str = usable[0]["name"]
    return name


@pytest.mark.parametrize("variant", ["llama", "gemma3"])
def test_gpu_layers_all_generates_the_cpu_text(variant: str) -> None:
    device = _device()
    path = tm.gguf_file(variant, "f32")
    ids = None
    with eliza.LLM(path, n_threads=1, context_size=128) as cpu:
        want = cpu.generate(PROMPT, max_tokens=12, temperature=0.0)
        ids = cpu.tokenize(PROMPT)
        want_logits = cpu.logits(ids, all_positions=True)
    with eliza.LLM(path, n_threads=1, context_size=128, gpu_layers=-1, gpu_device=device,
                   gpu_required=True) as gpu:
        info = gpu.info
        assert info["backend"] == f"vulkan: {device}"
        assert info["gpu_layers"] == info["n_layer"] and info["gpu_fallback"] is None
        assert gpu.generate(PROMPT, max_tokens=12, temperature=0.0) == want
        got = gpu.logits(ids, all_positions=True)
    assert got.shape == want_logits.shape
    diff = float(np.max(np.abs(got - want_logits)))
    assert diff <= 1e-4 * float(np.max(np.abs(want_logits))), diff


def test_no_device_falls_back_to_the_cpu_saying_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("ELIZA_GPU_DEVICE", "none")
    path = tm.gguf_file("llama", "f32")
    eliza.set_log_handler(eliza.forward_to_logging, eliza.LogLevel.WARN)
    try:
        with (
            caplog.at_level(logging.WARNING, logger="eliza"),
            eliza.LLM(path, n_threads=1, gpu_layers=-1) as llm,
        ):
            info = llm.info
            text = llm.generate(PROMPT, max_tokens=4, temperature=0.0)
    finally:
        eliza.set_log_handler(None)
    assert info["backend"] == "cpu" and info["gpu_layers"] == 0
    reason = info["gpu_fallback"]
    assert reason and ("none" in reason or "no GPU backend" in reason)
    assert any("the model runs on the CPU" in r.getMessage() for r in caplog.records)
    assert text
    with pytest.raises(eliza.UnsupportedError, match="the GPU is required"):
        eliza.LLM(path, n_threads=1, gpu_layers=-1, gpu_required=True)


def test_gpu_layers_below_minus_one_is_an_invalid_argument() -> None:
    with pytest.raises(eliza.InvalidArgumentError, match="n_gpu_layers -2"):
        eliza.LLM(tm.gguf_file("llama", "f32"), gpu_layers=-2)


def test_cli_info_and_generate_say_which_backend_runs() -> None:
    device = _device()
    path = str(tm.gguf_file("llama", "f32"))
    cli = [sys.executable, "-m", "eliza"]
    info = subprocess.run([*cli, "info", path, "--gpu-layers", "-1", "--gpu-device", device],
                          capture_output=True, text=True, check=False)
    assert info.returncode == 0, info.stderr
    assert f"backend: vulkan: {device}" in info.stdout
    gen = subprocess.run([*cli, "generate", path, "hello", "--max-tokens", "3", "--temp", "0",
                          "--gpu-layers", "-1", "--gpu-device", "none"],
                         capture_output=True, text=True, check=False)
    assert gen.returncode == 0, gen.stderr
    assert "backend: cpu (GPU not used: " in gen.stderr
