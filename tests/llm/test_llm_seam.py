"""The backend seam (llm/backend.h) carries every step of the architectures
that used to run some on host kernels beside it: falcon-h1's Mamba2 mixer
(conv, scan, gated norm), gemma4's per-layer inputs, head norms and layer
scale, granite's scaled residual and logit scale. tests/c/test_llm_seam.c
runs passes of 8, 1 and 3 tokens of a tiny model through a recording
backend and checks the logits bit for bit against the session's; here we
check which steps it saw."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

for _module in ("torch", "transformers", "gguf", "safetensors", "tokenizers"):
    pytest.importorskip(_module)

import gemma4_models as g4  # noqa: E402
import tiny_archs as ta  # noqa: E402
import tiny_models as tm  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import c_tools  # noqa: E402

N_PASSES = 3


def _calls(path: Path) -> dict[str, int]:
    tool = c_tools.require("test_llm_seam")
    run = subprocess.run([str(tool), str(path)], capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, f"{path.name}: {run.stdout}{run.stderr}"
    calls = {}
    for line in run.stdout.splitlines():
        if line.startswith("calls "):
            _, name, count = line.split()
            calls[name] = int(count)
    return calls


def _key(path: Path, name: str, default: int = 0) -> int:
    """The architecture's integer key ``name`` (``block_count``), or default."""
    import gguf

    reader = gguf.GGUFReader(path)
    arch = str(bytes(reader.fields["general.architecture"].parts[-1]), "utf-8")
    field: Any = reader.fields.get(f"{arch}.{name}")
    return int(field.parts[-1][0]) if field is not None else default


def _n_layer(path: Path) -> int:
    return _key(path, "block_count")


@pytest.mark.parametrize("variant", tm.FALCON_H1_VARIANTS)
def test_falcon_h1_mixer_runs_through_the_seam(variant: str) -> None:
    path = tm.gguf_file(variant, "f32")
    calls, n_layer = _calls(path), _n_layer(path)
    for op in ("ssm_conv", "ssm_scan", "ssm_gate_norm"):
        assert calls[op] == N_PASSES * n_layer, (op, calls)
    # the mixer's and attention's outputs join the residual in two adds
    assert calls["add"] == N_PASSES * 3 * n_layer, calls


@pytest.mark.parametrize("variant", g4.TARGETS)
def test_gemma4_per_layer_inputs_and_head_norms_run_through_the_seam(variant: str) -> None:
    path = g4.gguf_file(variant)
    calls, n_layer = _calls(path), _n_layer(path)
    n_own_kv = n_layer - _key(path, "attention.shared_kv_layers")
    has_ple = variant == "gemma4"
    n_tokens = 8 + 1 + 3
    # per layer: the input norm, q's head norm and 3 sublayer norms (+1 on
    # the per-layer input); k's and the weightless v's on layers with their
    # own keys; the per-layer inputs' norm and the final norm once a pass
    per_pass = (5 + has_ple) * n_layer + 2 * n_own_kv + has_ple + 1
    assert calls["rms_norm"] == N_PASSES * per_pass, calls
    assert calls["rope"] == N_PASSES * (n_layer + n_own_kv), calls
    # the per-layer inputs: each token's row of the table, added scaled
    assert calls["embed"] == N_PASSES + has_ple * n_tokens, calls
    assert calls["add_scaled"] == has_ple * n_tokens, calls
    assert calls["glu"] == N_PASSES * (1 + has_ple) * n_layer, calls
    assert calls["scale"] >= 2 * N_PASSES * has_ple, calls


def test_granite_scaled_residual_and_logit_scale_run_through_the_seam() -> None:
    path = ta.gguf_file("granite", "f32")
    calls, n_layer = _calls(path), _n_layer(path)
    assert calls["add_scaled"] == N_PASSES * 2 * n_layer, calls
    assert calls["add"] == 0, calls
    assert calls["scale"] == N_PASSES, calls
