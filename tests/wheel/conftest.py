"""Setup of the wheel smoke suite: it runs only against an installed wheel.

The suite is selected with ``-c tests/wheel/pytest.ini`` (cibuildwheel's
test-command and ``wheels/proofs.py`` do this). Collected any other way, for
example by ``pytest tests`` with the source tree on ``sys.path``, every test
here is skipped: it would otherwise test the source tree, not a wheel.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def wheel_mode(config: pytest.Config) -> bool:
    """True when pytest was started with this directory's pytest.ini."""
    return config.inipath is not None and Path(config.inipath).resolve() == HERE / "pytest.ini"


def pytest_configure(config: pytest.Config) -> None:
    if wheel_mode(config):
        # The installed package must find its own library.
        os.environ.pop("ELIZA_LIBRARY", None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if wheel_mode(config):
        return
    skip = pytest.mark.skip(
        reason="wheel smoke suite: run `python -m pytest -c tests/wheel/pytest.ini tests/wheel` "
        "in an environment where the eliza wheel is installed"
    )
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def header_text() -> str:
    """include/eliza.h of the checkout the wheel was built from."""
    return (REPO / "include" / "eliza.h").read_text()


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small GGUF written with the ``gguf`` package: typed keys, a string
    array and two tensors with known values."""
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")
    path = tmp_path_factory.mktemp("gguf") / "smoke.gguf"
    w = gguf.GGUFWriter(str(path), arch="smokearch")
    w.add_string("general.name", "wheel smoke model")
    w.add_uint32("smokearch.block_count", 3)
    w.add_float32("smokearch.rope.freq_base", 10000.0)
    w.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(12)])
    w.add_tensor("smoke.weight", np.arange(8, dtype=np.float32).reshape(2, 4) - 3.5)
    w.add_tensor("smoke.half", np.linspace(-1, 1, 6, dtype=np.float32).astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
