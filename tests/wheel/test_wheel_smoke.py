"""Smoke tests of an installed eliza wheel: the package and its library load,
agree on the ABI and struct layouts, do real work on a tiny GGUF, and the
console script runs. Nothing here reads the source tree except the public
header, which the binary must match, and the tiny Kokoro model of
tests/data (a random-weight file too intricate to rebuild here).

Each engine in the build's capabilities has a test below, so every platform
wheel proves it can run it, not only load it.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

import eliza
from eliza import _native

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def _console_script(name: str) -> Path:
    scripts = Path(sysconfig.get_path("scripts"))
    for candidate in (scripts / name, scripts / f"{name}.exe"):
        if candidate.is_file():
            return candidate
    found = shutil.which(name, path=str(scripts))
    if found is None:
        raise AssertionError(f"console script {name!r} not found in {scripts}")
    return Path(found)


def _run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ELIZA_LIBRARY", "PYTHONPATH")}
    return subprocess.run(
        [str(_console_script("eliza")), *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        env=env,
        check=False,
    )


def _header_functions(header: str) -> set[str]:
    text = re.sub(r"/\*.*?\*/", " ", header, flags=re.S)
    return set(re.findall(r"^\s*ELIZA_API\s+[^;(]*?\b(eliza_\w+)\s*\(", text, flags=re.M))


def _header_structs(header: str) -> set[str]:
    return set(re.findall(r"typedef\s+struct\s+(\w+)\s*\{", header))


def _header_abi_version(header: str) -> int:
    m = re.search(r"#define\s+ELIZA_ABI_VERSION\s+(\d+)", header)
    assert m, "ELIZA_ABI_VERSION not found in eliza.h"
    return int(m.group(1))


def _dist() -> metadata.Distribution:
    """The installed distribution that ships the ``eliza`` package (its
    project name need not be "eliza")."""
    for dist in metadata.distributions():
        if any(str(f).replace("\\", "/") == "eliza/__init__.py" for f in dist.files or ()):
            return dist
    raise AssertionError("no installed distribution ships eliza/__init__.py")


def _capabilities() -> dict[str, Any]:
    return eliza.capabilities()


# ---- where things come from ---------------------------------------------------


def test_package_is_the_installed_wheel_not_the_source_tree() -> None:
    package_dir = Path(eliza.__file__).resolve().parent
    assert not package_dir.is_relative_to(REPO / "sdk"), f"eliza imported from the source tree: {package_dir}"
    site_dirs = {Path(sysconfig.get_path(k)).resolve() for k in ("purelib", "platlib")}
    assert package_dir.parent in site_dirs, f"{package_dir} is not in {site_dirs}"
    dist = _dist()
    assert dist.version == eliza.__version__
    installed = {Path(str(dist.locate_file(f))).resolve() for f in dist.files or ()}
    assert package_dir / "__init__.py" in installed


def test_library_is_packaged_beside_the_module() -> None:
    assert "ELIZA_LIBRARY" not in os.environ
    path = _native.find_library().resolve()
    assert path.parent == Path(eliza.__file__).resolve().parent
    assert path.name in _native.LIBRARY_NAMES
    loaded = Path(_native.lib()._name).resolve()
    assert loaded == path


def test_wheel_ships_one_native_library_and_nothing_grafted() -> None:
    """The library needs only the C runtime: a repair tool that had to graft a
    dependency (auditwheel's eliza.libs/, delocate's .dylibs/, delvewheel's
    eliza.libs/) means it linked something it should not."""
    dist = _dist()
    files = [str(f).replace("\\", "/") for f in dist.files or ()]
    native = [f for f in files if re.search(r"\.(so(\.\d+)*|dylib|dll|pyd)$", f)]
    assert len(native) == 1, native
    assert native[0].startswith("eliza/"), native
    grafted = [f for f in files if re.match(r"(eliza\.libs|eliza/\.dylibs)/", f)]
    assert not grafted, grafted


def test_wheel_tag_is_py3_none_platform() -> None:
    dist = _dist()
    wheel_file = dist.read_text("WHEEL") or ""
    tags = re.findall(r"^Tag:\s*(\S+)", wheel_file, flags=re.M)
    assert tags, wheel_file
    for tag in tags:
        py, abi, plat = tag.split("-")
        assert (py, abi) == ("py3", "none"), tag
        assert plat != "any", tag
    assert re.search(r"^Root-Is-Purelib:\s*false", wheel_file, flags=re.M | re.I), wheel_file


# ---- ABI ------------------------------------------------------------------------


def test_abi_version_matches_header_sdk_and_binary(header_text: str) -> None:
    assert _header_abi_version(header_text) == eliza.ABI_VERSION == eliza.abi_version()


def test_binary_layout_matches_sdk_mirrors_and_header(header_text: str) -> None:
    native = _native.lib()
    _native.check_abi(native)  # raises AbiError with both sides' numbers
    binary = _native.parse_layout_json(native.eliza_abi_layout_json().decode("utf-8"))
    assert set(binary) == _header_structs(header_text)


def test_every_header_function_is_exported(header_text: str) -> None:
    cdll = ctypes.CDLL(str(_native.find_library()))
    declared = _header_functions(header_text)
    assert declared, "no ELIZA_API declarations found in eliza.h"
    missing = sorted(name for name in declared if not hasattr(cdll, name))
    assert not missing, f"declared in eliza.h but not exported: {missing}"


def test_library_version_is_the_package_version() -> None:
    assert eliza.version() == eliza.__version__ == _dist().version


def test_capabilities_describe_this_build() -> None:
    caps = _capabilities()
    assert caps["abi"] == eliza.ABI_VERSION
    assert caps["version"] == eliza.__version__
    assert isinstance(caps["simd"], str) and caps["simd"]
    for key in ("cpu", "quant_types", "engines"):
        assert key in caps, f"capabilities lack {key!r}: {sorted(caps)}"
    assert caps["quant_types"], caps


def test_scalar_kernels_can_be_forced(tmp_path: Path) -> None:
    code = "import eliza, json; print(json.dumps(eliza.capabilities()))"
    env = {k: v for k, v in os.environ.items() if k != "ELIZA_LIBRARY"}
    env["ELIZA_FORCE_SCALAR"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, check=True
    )
    caps = json.loads(out.stdout)
    assert caps["force_scalar"] is True, caps
    assert caps["simd"] == "scalar", caps


# ---- real work on a tiny GGUF ------------------------------------------------------


def test_gguf_metadata_and_tensors_read_back(tiny_gguf: Path) -> None:
    np = pytest.importorskip("numpy")
    with eliza.GGUFFile(tiny_gguf) as f:
        assert f.architecture == "smokearch"
        assert f.metadata["general.name"] == "wheel smoke model"
        assert f.metadata["smokearch.block_count"] == 3
        names = {t.name for t in f.tensors}
        assert names == {"smoke.weight", "smoke.half"}
        weight = f.tensor("smoke.weight")
        half = f.tensor("smoke.half")
    np.testing.assert_array_equal(weight.reshape(-1), np.arange(8, dtype=np.float32) - 3.5)
    np.testing.assert_allclose(half.reshape(-1), np.linspace(-1, 1, 6), atol=1e-3)


def test_corrupt_file_is_an_error_not_a_crash(tmp_path: Path, tiny_gguf: Path) -> None:
    bad = tmp_path / "truncated.gguf"
    bad.write_bytes(tiny_gguf.read_bytes()[:40])
    with pytest.raises(eliza.ElizaError) as info:
        eliza.GGUFFile(bad)
    assert info.value.code in (eliza.Status.E_FORMAT, eliza.Status.E_IO)
    assert str(bad.name) in str(info.value) or info.value.message


# ---- the console script -----------------------------------------------------------


def test_cli_info_describes_the_build() -> None:
    out = _run_cli("info", "--json")
    assert out.returncode == 0, out.stderr
    caps = json.loads(out.stdout)
    assert caps["abi"] == eliza.ABI_VERSION


def test_cli_info_reads_a_gguf(tiny_gguf: Path) -> None:
    out = _run_cli("info", str(tiny_gguf))
    assert out.returncode == 0, out.stderr
    assert "smokearch" in out.stdout
    assert "smoke.weight" in out.stdout
    out = _run_cli("info", "--json", str(tiny_gguf))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["tensor_count"] == 2


def test_cli_fails_cleanly_on_a_missing_file(tmp_path: Path) -> None:
    out = _run_cli("info", str(tmp_path / "missing.gguf"))
    assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)
    assert "missing.gguf" in out.stderr
    assert "Traceback" not in out.stderr


def test_cli_models_list_names_the_pinned_models() -> None:
    """`eliza models list` works offline from the wheel (no fetch)."""
    out = _run_cli("models", "list")
    assert out.returncode == 0, out.stderr
    from eliza import models

    for name in models.MODELS:
        assert name in out.stdout, (name, out.stdout)


# ---- tiny end-to-end runs of each engine (added as the engines land) ----------------


def _engines() -> Any:
    return _capabilities().get("engines", {})


def _has_engine(name: str) -> bool:
    engines = _engines()
    if isinstance(engines, dict):
        return bool(engines.get(name))
    return name in engines


def test_llm_refuses_a_file_of_another_architecture(tiny_gguf: Path) -> None:
    assert _has_engine("llm"), _engines()
    with pytest.raises(eliza.ElizaError) as info:
        eliza.LLM(tiny_gguf)
    assert info.value.code in (eliza.Status.E_UNSUPPORTED, eliza.Status.E_FORMAT), info.value


def test_llm_generates_from_a_tiny_model(tiny_llama_gguf: Path) -> None:
    """Tokenize, evaluate and stream greedy tokens from a random 2-layer
    llama: the whole engine runs on this platform, deterministically."""
    with eliza.LLM(tiny_llama_gguf, n_threads=2) as llm:
        ids = llm.tokenize("the cat sat")
        assert ids[0] == 1 and len(ids) > 1
        assert llm.detokenize(llm.tokenize("the cat sat", add_bos=False)) == "the cat sat"
        logits = llm.logits(ids)
        assert logits.shape == (3 + 256 + 8,)
        first = llm.generate("the cat", max_tokens=8, temperature=0.0)
        again = llm.generate("the cat", max_tokens=8, temperature=0.0)
        stats = llm.last_stats
    assert first == again
    assert stats is not None and stats.generated_tokens >= 1


def test_tts_speaks_phonemes_with_a_tiny_model() -> None:
    """The whole Kokoro forward pass (ALBERT to iSTFT) on the repository's
    tiny random-weight model, from phonemes so no espeak-ng is needed:
    finite audio, repeatable with the noise off, streamed like it is
    synthesized."""
    import numpy as np

    assert _has_engine("tts"), _engines()
    model = REPO / "tests" / "data" / "kokoro_tiny.gguf"
    said = "h\u02c8\u025blo\u028a w\u02c8\u025c\u02d0ld"  # "hello world" in Kokoro's IPA
    with eliza.TTS(model, n_threads=2) as tts:
        voice = tts.voices[0]
        pcm = tts.synthesize(said, voice=voice, phonemes=True, no_noise=True)
        again = tts.synthesize(said, voice=voice, phonemes=True, no_noise=True)
        chunks = list(tts.stream(said, voice=voice, phonemes=True, no_noise=True))
    assert pcm.dtype == np.float32 and pcm.size > 0 and bool(np.isfinite(pcm).all())
    assert np.array_equal(pcm, again)
    assert len(chunks) == 1 and np.array_equal(chunks[0].audio, pcm)


def test_diarizer_runs_tiny_models(tiny_diar_models: tuple[Path, Path]) -> None:
    """Segmentation, embedding and the whole pipeline (resampling, windows,
    clustering, turns) on random-weight models in the real schemas: sane
    shapes and values, the same turns twice, 48 kHz accepted."""
    import numpy as np

    assert _has_engine("diarization"), _engines()
    rng = np.random.default_rng(3)
    t = np.arange(16000 * 25) / 16000
    audio = (0.3 * np.sin(2 * np.pi * 180 * t) * (np.sin(2 * np.pi * 0.2 * t) > 0)).astype(np.float32)
    audio += (0.01 * rng.standard_normal(audio.size)).astype(np.float32)
    with eliza.Diarizer(*tiny_diar_models, n_threads=2) as d:
        logp = d.segment(audio[: 2 * 160000].reshape(2, 160000))
        emb = d.embed(audio[:32000])
        turns = d.diarize(audio, 16000)
        again = d.diarize(audio, 16000)
        at_48k = d.diarize(np.repeat(audio, 3), 48000)
    assert logp.shape == (2, 589, 7) and bool(np.isfinite(logp).all())
    assert np.allclose(np.exp(logp).sum(axis=-1), 1.0, atol=1e-4)
    assert emb.shape == (16,) and abs(float(np.linalg.norm(emb)) - 1.0) < 1e-5
    assert turns == again
    for turn in turns + at_48k:
        assert 0.0 <= turn.start < turn.end <= 25.0 + 1e-6 and turn.speaker >= 0
