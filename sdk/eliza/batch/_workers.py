"""The Ray Data actors of the batch jobs, one class per engine.

Ray Data builds each actor once (``__init__`` opens one libeliza handle with
``n_threads`` threads) and then feeds it batches of items (``__call__``).
Every item gives one output row, failed or not: an item's failure is
recorded in its row (``ok`` False, ``error``), never raised, so one bad item
cannot stop the job. A model that does not open fails every item of the
actor with the reason.

Each row carries the columns of :data:`COMMON` and those of its job, with
the same types whether the item succeeded or not (Arrow needs one schema).
"""

from __future__ import annotations

import io
import os
import time
import wave
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from ..diarize import Diarizer, decode_wav, to_rttm
from ..llm import LLM
from ..tts import TTS, pcm16

__all__ = [
    "COMMON",
    "CRASH_ENV",
    "DiarizeWorker",
    "GenerateWorker",
    "SpeakWorker",
    "item_id_for_path",
    "wav_bytes",
]

# Test hook, not API: a folder; an actor that meets an item whose id names a
# file there ends its process at once, as the OOM killer or a segfault would.
CRASH_ENV = "ELIZA_BATCH_TEST_CRASH_DIR"

Batch = dict[str, npt.NDArray[Any]]
Row = dict[str, Any]

COMMON: dict[str, Any] = {
    "id": "",
    "ok": False,
    "error": "",
    "error_type": "",
    "node_id": "",
    "pid": 0,
    "seconds": 0.0,
}


def item_id_for_path(path: str) -> str:
    """The id of a file's item: its name without the extension."""
    name = os.path.basename(path.rstrip("/"))
    stem, _ = os.path.splitext(name)
    return stem or name


def _node_id() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())


def _describe(e: BaseException) -> tuple[str, str]:
    return type(e).__name__, str(e) or type(e).__name__


class _Worker:
    """One engine handle and the per-item loop around it."""

    columns: ClassVar[dict[str, Any]] = {}

    def __init__(self, opener: Callable[[], Any]) -> None:
        self._engine: Any = None
        self._open_error: tuple[str, str] | None = None
        try:
            self._engine = opener()
        except Exception as e:  # every item of this actor then reports it
            kind, message = _describe(e)
            self._open_error = (kind, f"the model did not open: {message}")
        self._node = _node_id()
        self._pid = os.getpid()
        self._crash_dir = os.environ.get(CRASH_ENV)

    def _one(self, item: Row) -> Row:
        raise NotImplementedError

    def __call__(self, batch: Batch) -> dict[str, list[Any]]:
        rows: list[Row] = []
        names = list(batch)
        for i in range(len(batch["id"])):
            item = {name: batch[name][i] for name in names}
            row: Row = {**COMMON, **self.columns, "id": str(item["id"])}
            row.update(node_id=self._node, pid=self._pid)
            if self._crash_dir and os.path.exists(os.path.join(self._crash_dir, row["id"])):
                os._exit(70)
            t0 = time.perf_counter()
            if self._open_error is not None:
                row["error_type"], row["error"] = self._open_error
            else:
                try:
                    row.update(self._one(item))
                    row["ok"] = True
                except Exception as e:  # recorded per item, the job goes on
                    row["error_type"], row["error"] = _describe(e)
            row["seconds"] = time.perf_counter() - t0
            rows.append(row)
        return {name: [r[name] for r in rows] for name in rows[0]} if rows else {}


def _empty(what: str) -> ValueError:
    return ValueError(f"the {what} is empty")


def wav_bytes(audio: npt.NDArray[np.float32], sample_rate: int) -> bytes:
    """A 16-bit mono WAV file of ``audio``, as :func:`eliza.write_wav` writes it."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(int(sample_rate))
        w.writeframes(pcm16(audio))
    return buf.getvalue()


class SpeakWorker(_Worker):
    """``eliza.TTS`` over items ``{id, text}``: a WAV file per item."""

    columns: ClassVar[dict[str, Any]] = {"wav": b"", "audio_seconds": 0.0}

    def __init__(
        self,
        model: str | None,
        n_threads: int,
        voice: str | None,
        speed: float | None,
        phonemes: bool,
        no_noise: bool,
        seed: int | None,
        language: str,
    ) -> None:
        self._say = {"voice": voice, "speed": speed, "phonemes": phonemes, "no_noise": no_noise, "seed": seed}
        super().__init__(lambda: TTS(model, n_threads=n_threads, language=language))

    def _one(self, item: Row) -> Row:
        text = str(item["text"])
        if not text.strip():
            raise _empty("text")
        tts: TTS = self._engine
        audio = tts.synthesize(text, **self._say)  # type: ignore[arg-type]
        rate = tts.sample_rate
        return {"wav": wav_bytes(audio, rate), "audio_seconds": len(audio) / rate}


class DiarizeWorker(_Worker):
    """``eliza.Diarizer`` over items ``{id, path, bytes}`` (a WAV file's
    contents): RTTM text per item."""

    columns: ClassVar[dict[str, Any]] = {"rttm": "", "n_turns": 0, "n_speakers": 0, "audio_seconds": 0.0}

    def __init__(
        self, segmentation: str | None, embedding: str | None, n_threads: int, options: dict[str, Any]
    ) -> None:
        self._options = {k: v for k, v in options.items() if v is not None}
        super().__init__(lambda: Diarizer(segmentation, embedding, n_threads=n_threads))

    def __call__(self, batch: Batch) -> dict[str, list[Any]]:
        # ray.data.read_binary_files gives each file's path and bytes.
        ids = np.array([item_id_for_path(str(p)) for p in batch["path"]], dtype=object)
        return super().__call__({**batch, "id": ids})

    def _one(self, item: Row) -> Row:
        data = bytes(item["bytes"])
        if not data:
            raise _empty(f"file {item['path']}")
        samples, rate = decode_wav(data, str(item["path"]))
        diarizer: Diarizer = self._engine
        turns = diarizer.diarize(samples, rate, **self._options)
        uri = "".join("_" if c.isspace() else c for c in str(item["id"])) or "audio"
        return {
            "rttm": to_rttm(turns, uri=uri),
            "n_turns": len(turns),
            "n_speakers": len({t.speaker for t in turns}),
            "audio_seconds": len(samples) / rate,
        }


class GenerateWorker(_Worker):
    """``eliza.LLM`` over items ``{id, prompt}``: the generated text per item."""

    columns: ClassVar[dict[str, Any]] = {
        "prompt": "",
        "text": "",
        "prompt_tokens": 0,
        "generated_tokens": 0,
        "stop_reason": "",
    }

    def __init__(self, model: str, n_threads: int, context_size: int, sampling: dict[str, Any]) -> None:
        self._sampling = sampling
        super().__init__(lambda: LLM(model, n_threads=n_threads, context_size=context_size))

    def _one(self, item: Row) -> Row:
        prompt = str(item["prompt"])
        if not prompt:
            raise _empty("prompt")
        llm: LLM = self._engine
        text = llm.generate(prompt, **self._sampling)
        stats = llm.last_stats
        return {
            "prompt": prompt,
            "text": text,
            "prompt_tokens": stats.prompt_tokens if stats else 0,
            "generated_tokens": stats.generated_tokens if stats else 0,
            "stop_reason": stats.stop_reason.name.lower() if stats else "",
        }
