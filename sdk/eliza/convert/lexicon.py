"""misaki's English lexicons (``misaki/data/{us,gb}_{gold,silver}.json``
of misaki 0.9.4) packed into the GGUF file libeliza's English G2P reads
(docs/kokoro.md, "English lexicon").

Each of the four dictionaries becomes a sorted string table: tensor
``lexicon.<name>.text`` (I8) holds ``key NUL value NUL`` records in UTF-8
byte order of the keys, ``lexicon.<name>.index`` (I32) the byte offset of
each record. The tables hold misaki's keys as they are: the forms misaki's
``Lexicon.grow_dictionary`` adds on load (a lowercase key's capitalised form,
a capitalised key's lowercase form, never over an existing key) are found by
the C side's lookup, which halves the file. A value that depends on
the part of speech is written ``{TAG=phonemes;TAG=phonemes...}`` in
misaki's order, an empty phoneme string standing for misaki's ``None``.

    python -m eliza.convert lexicon misaki-en.gguf    # from the installed misaki
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FormatError, Status
from ._output import gguf_file

ARCH = "misaki-en"
NAMES = ("us_gold", "us_silver", "gb_gold", "gb_silver")
MISAKI_VERSION = "0.9.4"
# misaki's US_VOCAB and GB_VOCAB: what a phoneme string may hold
VOCAB = {
    "us": frozenset("AIOWYbdfhijklmnpstuvwzæðŋɑɔəɛɜɡɪɹɾʃʊʌʒʤʧˈˌθᵊᵻʔ"),  # noqa: RUF001
    "gb": frozenset("AIQWYabdfhijklmnpstuvwzðŋɑɒɔəɛɜɡɪɹʃʊʌʒʤʧˈˌːθᵊ"),  # noqa: RUF001
}


@dataclass
class LexiconReport:
    path: Path
    entries: dict[str, int]
    misaki: str


def _value(name: str, key: str, v: Any) -> str:
    vocab = VOCAB[name[:2]]

    def check(ps: str) -> str:
        bad = sorted({c for c in ps if c not in vocab})
        if bad or not ps:
            raise FormatError(
                Status.E_FORMAT,
                f"{name}.json: '{key}' -> '{ps}' has symbols outside misaki's vocabulary: {bad}",
            )
        return ps

    if isinstance(v, str):
        return check(v)
    if isinstance(v, dict) and "DEFAULT" in v:
        return "{" + ";".join(f"{t}={'' if p is None else check(p)}" for t, p in v.items()) + "}"
    raise FormatError(Status.E_FORMAT, f"{name}.json: '{key}' has a value of type {type(v).__name__}")


def table(name: str, d: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The record bytes and offsets of one dictionary."""
    blob, index = bytearray(), []
    for key in sorted(d, key=lambda k: k.encode("utf-8")):
        if not key or "\0" in key:
            raise FormatError(Status.E_FORMAT, f"{name}.json: bad key {key!r}")
        index.append(len(blob))
        blob += key.encode("utf-8") + b"\0" + _value(name, key, d[key]).encode("utf-8") + b"\0"
    if len(blob) >= 2**31:
        raise FormatError(Status.E_FORMAT, f"{name}.json: {len(blob)} bytes do not fit I32 offsets")
    return np.frombuffer(bytes(blob), dtype=np.int8).copy(), np.asarray(index, dtype=np.int32)


def load_misaki(name: str) -> dict[str, Any]:
    from misaki import data

    loaded: dict[str, Any] = json.loads((importlib.resources.files(data) / f"{name}.json").read_text("utf-8"))
    return loaded


def convert_lexicon(
    out: str | Path,
    load: Callable[[str], dict[str, Any]] = load_misaki,
    misaki_version: str = MISAKI_VERSION,
) -> LexiconReport:
    """Writes the four grown dictionaries ``load(name)`` gives to ``out``."""
    out = Path(out)
    entries: dict[str, int] = {}
    with gguf_file(out, ARCH) as w:
        w.add_name(f"misaki {misaki_version} English lexicons")
        w.add_string("misaki.version", misaki_version)
        for name in NAMES:
            text, index = table(name, load(name))
            w.add_tensor(f"lexicon.{name}.text", text)
            w.add_tensor(f"lexicon.{name}.index", index)
            entries[name] = len(index)
    return LexiconReport(out, entries, misaki_version)


def add_parser(formats: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Registers ``python -m eliza.convert lexicon OUT.gguf``."""
    p = formats.add_parser(
        "lexicon",
        help="misaki's English lexicons (the installed misaki package)",
        description="Packs misaki's us/gb gold and silver lexicons into the GGUF file of libeliza's "
        "English G2P (docs/kokoro.md).",
    )
    p.add_argument("out", metavar="OUT.gguf", help="the GGUF file to write")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress line on a terminal")


def run_cli(args: argparse.Namespace, progress: Callable[[int, int, str], None]) -> str:
    """Runs the subcommand; returns the summary line."""
    r = convert_lexicon(args.out)
    counts = ", ".join(f"{n} {c}" for n, c in r.entries.items())
    return f"{r.path}: {ARCH} (misaki {r.misaki}), entries: {counts}"
