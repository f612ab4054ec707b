#!/usr/bin/env python3
"""Packs a prebuilt libeliza into a ``py3-none-<platform>`` wheel.

For cross builds (aarch64 Linux, Windows, macOS from a Linux host) where the
library is built once by CMake with a toolchain file and then packaged: the
wheel holds exactly what scikit-build-core puts in the native one (every
file under sdk/eliza/ plus the library beside it) and the metadata of
pyproject.toml's [project] table, written and checked by ``packaging``
(core metadata, the wheel tag, the filename).

    python wheels/pack_wheel.py build-pkg/arm64/libeliza.so linux_aarch64 -o dist/

prints the path of the wheel it wrote.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

import tomllib  # Python 3.11+ on the machine that packs
from packaging.metadata import Metadata, RawMetadata
from packaging.tags import Tag
from packaging.utils import canonicalize_name, parse_wheel_filename

REPO = Path(__file__).resolve().parents[1]

# Fixed timestamp so the same inputs give the same wheel bytes.
_DATE_TIME = (2020, 1, 1, 0, 0, 0)


def project_metadata(repo: Path = REPO) -> dict[str, Any]:
    """[project] of pyproject.toml with the version resolved (a dynamic
    version is read, like scikit-build-core's regex provider, from the file
    that tool.scikit-build.metadata.version.input names)."""
    doc = tomllib.loads((repo / "pyproject.toml").read_text())
    project: dict[str, Any] = dict(doc["project"])
    if "version" not in project:
        provider = doc.get("tool", {}).get("scikit-build", {}).get("metadata", {}).get("version", {})
        source = repo / provider.get("input", "sdk/eliza/__init__.py")
        m = re.search(r"""^__version__\s*=\s*["']([^"']+)["']""", source.read_text(), flags=re.M)
        if not m:
            raise ValueError(f"no __version__ in {source}")
        project["version"] = m.group(1)
    return project


def wheel_metadata(project: dict[str, Any]) -> Metadata:
    """The core metadata of a [project] table, checked by ``packaging``
    (names, versions, requirement strings, extras): every extra is a
    Provides-Extra and its requirements Requires-Dist with ``extra == "..."``."""
    raw: RawMetadata = {"metadata_version": "2.1", "name": project["name"], "version": project["version"]}
    if project.get("description"):
        raw["summary"] = project["description"]
    licence = project.get("license")
    if isinstance(licence, dict) and licence.get("text"):
        raw["license"] = licence["text"]
    elif isinstance(licence, str):
        raw["metadata_version"] = "2.4"  # License-Expression came with 2.4
        raw["license_expression"] = licence
    if project.get("requires-python"):
        raw["requires_python"] = project["requires-python"]
    raw["classifiers"] = list(project.get("classifiers", []))
    requires = list(project.get("dependencies", []))
    extras = project.get("optional-dependencies", {})
    for extra, requirements in extras.items():
        requires += [f'{d}; extra == "{extra}"' for d in requirements]
    raw["requires_dist"] = requires
    raw["provides_extra"] = list(extras)
    return Metadata.from_raw(raw)


def _wheel_text(tag: Tag) -> str:
    return (
        "Wheel-Version: 1.0\nGenerator: libeliza wheels/pack_wheel.py\n"
        f"Root-Is-Purelib: false\nTag: {tag}\n"
    )


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def package_files(repo: Path = REPO) -> dict[str, bytes]:
    """Every file of the Python package, by its path inside the wheel."""
    root = repo / "sdk" / "eliza"
    files: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
            files["eliza/" + path.relative_to(root).as_posix()] = path.read_bytes()
    return files


def pack(library: Path, platform_tag: str, out_dir: Path, repo: Path = REPO) -> Path:
    """Writes ``<name>-<version>-py3-none-<platform_tag>.whl`` into
    ``out_dir`` and returns its path."""
    project = project_metadata(repo)
    metadata = wheel_metadata(project)
    tag = Tag("py3", "none", platform_tag)
    # The wheel filename's escaping of the distribution name (PEP 427 / 503).
    dist = canonicalize_name(metadata.name).replace("-", "_")
    version = str(metadata.version)
    info = f"{dist}-{version}.dist-info"
    files = package_files(repo)
    files[f"eliza/{library.name}"] = library.read_bytes()
    files[f"{info}/METADATA"] = metadata.as_rfc822().as_bytes()
    files[f"{info}/WHEEL"] = _wheel_text(tag).encode()
    scripts = project.get("scripts", {})
    if scripts:
        body = "".join(f"{k} = {v}\n" for k, v in scripts.items())
        files[f"{info}/entry_points.txt"] = f"[console_scripts]\n{body}".encode()
    licence = repo / "LICENSE"
    if licence.is_file():
        files[f"{info}/licenses/LICENSE"] = licence.read_bytes()
    record = [_record_line(name, data) for name, data in files.items()]
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()

    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"{dist}-{version}-{tag}.whl"
    parse_wheel_filename(wheel.name)  # InvalidWheelFilename for a tag or name a wheel cannot have
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            entry = zipfile.ZipInfo(name, date_time=_DATE_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            executable = name.endswith((".so", ".dylib", ".dll"))
            entry.external_attr = (0o755 if executable else 0o644) << 16
            zf.writestr(entry, data)
    return wheel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("library", type=Path, help="libeliza.so / libeliza.dylib / libeliza.dll")
    parser.add_argument("platform", help="platform tag, e.g. linux_aarch64, win_amd64, macosx_11_0_arm64")
    parser.add_argument("-o", "--out-dir", type=Path, default=Path("dist"))
    args = parser.parse_args(argv)
    print(pack(args.library, args.platform, args.out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
