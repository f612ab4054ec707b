"""Shared by the batch tests: the tiny Kokoro, test audio, and what a Ray
cluster that a test starts needs (the environment it hands its workers, a
short folder for its sockets)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

import eliza

TESTS = Path(__file__).resolve().parents[1]
TINY_KOKORO = TESTS / "data" / "kokoro_tiny.gguf"
TINY_VOICE = "tiny_a"


def conversation(seed: int, seconds: float) -> npt.NDArray[np.float32]:
    """Two synthetic speakers taking turns, 16 kHz (tests/diar's generator)."""
    if str(TESTS / "diar") not in sys.path:
        sys.path.insert(0, str(TESTS / "diar"))
    from diar_models_util import speech_like

    return speech_like(seed, seconds)


@contextlib.contextmanager
def worker_env() -> Iterator[None]:
    """Ray workers inherit the environment of the process that starts the
    cluster: put the eliza package under test on their PYTHONPATH."""
    saved = os.environ.get("PYTHONPATH")
    sdk = str(Path(eliza.__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (sdk, saved) if p)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


@contextlib.contextmanager
def ray_tmp() -> Iterator[Path]:
    """Ray's session folder: short, since its Unix sockets live there."""
    path = Path(tempfile.mkdtemp(prefix="ezray", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _listening(table: str) -> dict[str, str]:
    """inode -> local address of the listening TCP sockets in /proc/net/TABLE."""
    out = {}
    with open(f"/proc/net/{table}") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # TCP_LISTEN
                out[fields[9]] = fields[1].rsplit(":", 1)[0]
    return out


def listening_addresses(marker: str) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp{,6} write them) of the TCP
    sockets listened on by processes whose command line contains
    ``marker``."""
    tables = {**_listening("tcp"), **_listening("tcp6")}
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() not in f.read():
                    continue
            fds = os.listdir(f"/proc/{pid}/fd")
            targets = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in fds]
        except OSError:  # gone, or not ours to read
            continue
        for target in targets:
            if target.startswith("socket:[") and target[8:-1] in tables:
                found.add(tables[target[8:-1]])
    return found


# 127.0.0.1 as /proc/net/tcp and tcp6 (an IPv4-mapped address) write it.
LOOPBACK_HEX = {"0100007F", "0000000000000000FFFF00000100007F"}
