"""Batch jobs over whole corpora on Ray Data: speak, diarize and generate,
on this machine or on a Ray cluster with the same code.

An optional part of the package (``pip install 'libeliza[ray]'``): Ray is
imported when a job runs, never by ``import eliza``. Each job is a Ray Data
pipeline whose actors each hold one libeliza handle; results land in the
output directory with a ``manifest.jsonl`` of every item, so a rerun skips
what is done and retries what failed. See docs/batch.md.

Example::

    import eliza.batch
    report = eliza.batch.speak("articles.txt", "voiced/", voice="af_heart", threads_per_actor=1)
    for f in report.failures:
        print(f.id, f.error)
"""

from __future__ import annotations

from ._inputs import Source
from ._jobs import BatchReport, ItemFailure, connect, diarize, generate, init_local, speak
from ._manifest import MANIFEST

__all__ = [
    "BatchReport",
    "ItemFailure",
    "MANIFEST",
    "Source",
    "connect",
    "diarize",
    "generate",
    "init_local",
    "speak",
]
