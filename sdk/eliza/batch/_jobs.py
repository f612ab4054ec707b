"""The batch jobs: speak, diarize and generate as Ray Data pipelines.

Each job lists its items, drops those a previous run finished (the
manifest), and streams the rest through ``map_batches`` with one actor
class per engine; the driver writes each result (WAV, RTTM, or a record)
and its manifest line as it arrives. An item that fails is recorded with
its error; an item whose actor died (retried ``retries`` times) is recorded
as lost; neither stops the job.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import InvalidArgumentError, Status, UnsupportedError
from ..llm import GenerateOptions
from . import _inputs
from ._manifest import Manifest, settings_digest, write_atomic
from ._workers import DiarizeWorker, GenerateWorker, SpeakWorker, item_id_for_path

__all__ = ["BatchReport", "ItemFailure", "connect", "diarize", "generate", "init_local", "speak"]

# Ray picks its node address, and binds its ports there, from the network
# route unless it takes the machine for a single-node one (its macOS and
# Windows default): then everything is on 127.0.0.1.
_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
_LOCAL_HOSTS = ("127.0.0.1", "localhost")

GENERATIONS = "generations"
# How long a job waits for its whole actor pool to start.
_POOL_START_SECONDS = 600


def _ray() -> ModuleType:
    try:
        import ray
        import ray.data
    except ImportError as e:
        raise UnsupportedError(
            Status.E_UNSUPPORTED, f"eliza.batch needs Ray Data: pip install 'libeliza[ray]' ({e})"
        ) from None
    return ray


@contextlib.contextmanager
def _loopback_only() -> Iterator[ModuleType]:
    """Ray, made to take this process's node for 127.0.0.1 while it starts
    or joins one: the processes it starts then inherit the setting, and the
    environment is as it was afterwards."""
    saved = os.environ.get(_LOOPBACK_ENV)
    os.environ[_LOOPBACK_ENV] = "0"
    try:
        if "ray" in sys.modules:
            from ray._private import ray_constants

            ray_constants.ENABLE_RAY_CLUSTER = False
        yield _ray()
    finally:
        if saved is None:
            os.environ.pop(_LOOPBACK_ENV, None)
        else:
            os.environ[_LOOPBACK_ENV] = saved


def init_local(num_cpus: int | None = None, **init_args: Any) -> None:
    """Starts a Ray instance on this machine alone (``ray.init``), every
    port bound to 127.0.0.1; ``num_cpus`` None takes the machine's cores.
    The jobs then run on it until ``ray.shutdown()``.

    Example::

        eliza.batch.init_local(num_cpus=2)
        report = eliza.batch.speak(["Hello.", "Goodbye."], "out/")
    """
    with _loopback_only() as ray:
        ray.init(num_cpus=num_cpus, include_dashboard=False, **init_args)


@contextlib.contextmanager
def connect(address: str | None) -> Iterator[ModuleType]:
    """The Ray a job runs on: the one this process already joined, else a
    local instance (``address`` None or ``"local"``, see :func:`init_local`)
    or the cluster at ``address`` (``HOST:PORT`` of a head started with
    ``ray start --head``, or ``ray://HOST:PORT``), shut down again when the
    job ends."""
    ray = _ray()
    if ray.is_initialized():
        yield ray
        return
    if address in (None, "local"):
        init_local()
    else:
        host = address.split("://")[-1].rsplit(":", 1)[0]
        with _loopback_only() if host in _LOCAL_HOSTS else contextlib.nullcontext(ray):
            ray.init(address=address)
    try:
        yield ray
    finally:
        ray.shutdown()


@dataclass(frozen=True)
class ItemFailure:
    """An item that did not finish: its id, the exception's type name (or
    ``WorkerDied``) and the message."""

    id: str
    error_type: str
    error: str


@dataclass(frozen=True)
class BatchReport:
    """What a run did. ``total`` items in the input: ``done`` finished now,
    ``skipped`` finished by an earlier run, ``failures`` did not finish
    (rerun the job to retry them). ``node_ids`` are the Ray nodes that ran
    this run's items. The manifest holds every item's record."""

    out_dir: Path
    manifest: Path
    total: int
    done: int
    skipped: int
    failures: tuple[ItemFailure, ...]
    node_ids: frozenset[str]
    wall_seconds: float
    audio_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures


@dataclass
class _Job:
    kind: str
    worker: type
    worker_args: dict[str, Any]
    settings: dict[str, Any]
    # Writes an ok row's output and returns its path under out_dir (None: no file).
    write: Callable[[Path, dict[str, Any]], str | None]
    # Row columns copied into the manifest record.
    fields: tuple[str, ...]
    # An item's expected cost (its text's length, its file's size).
    weight: Callable[[dict[str, Any]], int] = lambda item: 0
    finish: Callable[[Path, Manifest, str], None] = lambda out_dir, manifest, key: None
    missing: dict[str, str] = field(default_factory=dict)


def _count(value: int | None, what: str, minimum: int) -> None:
    if value is not None and value < minimum:
        raise InvalidArgumentError(Status.E_INVALID_ARG, f"{what} must be {minimum} or more, not {value}")


def _default_actors(ray: ModuleType, threads: int) -> int:
    """As many actors as fit on the nodes' cores at ``threads`` cores each."""
    per_node = [int(n["Resources"].get("CPU", 0)) // threads for n in ray.nodes() if n.get("Alive")]
    return max(1, sum(per_node))


def _record(key: str, row: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    record = {
        "id": str(row["id"]),
        "ok": bool(row["ok"]),
        "settings": key,
        "node_id": str(row["node_id"]),
        "pid": int(row["pid"]),
        "seconds": round(float(row["seconds"]), 4),
    }
    if row["ok"]:
        for name in fields:
            value = row[name]
            record[name] = value.item() if hasattr(value, "item") else value
    else:
        record["error_type"] = str(row["error_type"])
        record["error"] = str(row["error"])
    return record


def _run(
    job: _Job,
    items: list[dict[str, Any]],
    dataset: Callable[[ModuleType, list[dict[str, Any]]], Any],
    out_dir: str | os.PathLike[str],
    address: str | None,
    actors: int | None,
    threads_per_actor: int,
    retries: int,
) -> BatchReport:
    _count(actors, "actors", 1)
    _count(threads_per_actor, "threads_per_actor", 1)
    _count(retries, "retries", 0)
    t0 = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest = Manifest(out)
    key = settings_digest({"job": job.kind, **job.settings})
    finished = manifest.finished(key)
    todo = [it for it in items if it["id"] not in finished and it["id"] not in job.missing]
    # Longest first: the last items to finish are short ones, so no actor
    # idles long at the end while another works through a long item.
    todo.sort(key=job.weight, reverse=True)
    failures: list[ItemFailure] = []
    nodes: set[str] = set()
    seen: set[str] = set()
    done = 0
    audio = 0.0

    def fail(item_id: str, error_type: str, error: str) -> None:
        record = {"id": item_id, "ok": False, "settings": key, "error_type": error_type, "error": error}
        manifest.append(record)
        failures.append(ItemFailure(item_id, error_type, error))

    try:
        for item_id, error in job.missing.items():
            fail(item_id, "FileNotFoundError", error)
        if todo:
            with connect(address) as ray:
                ctx = ray.data.DataContext.get_current()
                saved = ctx.max_errored_blocks, ctx.wait_for_min_actors_s
                # A block whose actor died past its retries is dropped, not
                # fatal: its item is then recorded as lost below. The pool
                # starts whole, so the first items do not all go to the
                # first actor up.
                ctx.max_errored_blocks, ctx.wait_for_min_actors_s = -1, _POOL_START_SECONDS
                try:
                    n_actors = actors or _default_actors(ray, threads_per_actor)
                    ds = dataset(ray, todo).map_batches(
                        job.worker,
                        fn_constructor_kwargs={**job.worker_args, "n_threads": threads_per_actor},
                        batch_size=1,
                        # One item in flight per actor: a dying actor takes
                        # no queued item with it.
                        compute=ray.data.ActorPoolStrategy(size=n_actors, max_tasks_in_flight_per_actor=1),
                        num_cpus=threads_per_actor,
                        max_restarts=-1,
                        max_task_retries=retries,
                    )
                    for row in ds.iter_rows():
                        record = _record(key, row, job.fields)
                        seen.add(record["id"])
                        nodes.add(record["node_id"])
                        if record["ok"]:
                            try:
                                record["output"] = job.write(out, row)
                            except OSError as e:
                                fail(record["id"], type(e).__name__, f"writing the output: {e}")
                                continue
                            manifest.append(record)
                            done += 1
                            audio += float(record.get("audio_seconds", 0.0))
                        else:
                            manifest.append(record)
                            failures.append(ItemFailure(record["id"], record["error_type"], record["error"]))
                finally:
                    ctx.max_errored_blocks, ctx.wait_for_min_actors_s = saved
            for it in todo:
                if it["id"] not in seen:
                    fail(
                        it["id"],
                        "WorkerDied",
                        f"the worker process died on this item ({retries + 1} attempt"
                        f"{'s' if retries else ''}); rerun to retry",
                    )
        job.finish(out, manifest, key)
    finally:
        manifest.close()
    return BatchReport(
        out_dir=out,
        manifest=manifest.path,
        total=len(items) + len(job.missing),
        done=done,
        skipped=len(items) - len(todo),
        failures=tuple(failures),
        node_ids=frozenset(nodes),
        wall_seconds=time.perf_counter() - t0,
        audio_seconds=audio,
    )


def _from_items(ray: ModuleType, todo: list[dict[str, Any]]) -> Any:
    # One item per block: an actor that dies loses (and retries) one item.
    return ray.data.from_items(todo, override_num_blocks=len(todo))


def _model_path(model: str | os.PathLike[str] | None) -> str | None:
    return None if model is None else os.path.abspath(model)


def _write_file(folder: str, suffix: str, column: str) -> Callable[[Path, dict[str, Any]], str]:
    def write(out: Path, row: dict[str, Any]) -> str:
        rel = f"{folder}/{row['id']}{suffix}"
        (out / folder).mkdir(exist_ok=True)
        value = row[column]
        write_atomic(out / rel, value if isinstance(value, bytes) else str(value).encode("utf-8"))
        return rel

    return write


def speak(
    texts: _inputs.Source,
    out_dir: str | os.PathLike[str],
    *,
    voice: str | None = None,
    model: str | os.PathLike[str] | None = None,
    speed: float | None = None,
    phonemes: bool = False,
    no_noise: bool = False,
    seed: int | None = None,
    language: str = "en-us",
    text_column: str = "text",
    id_column: str = "id",
    address: str | None = None,
    actors: int | None = None,
    threads_per_actor: int = 1,
    retries: int = 1,
) -> BatchReport:
    """Speaks every item of ``texts`` with ``eliza.TTS`` into
    ``out_dir/wav/<id>.wav`` (16-bit mono), as ``TTS.synthesize`` with the
    same arguments would, one actor per ``threads_per_actor`` cores.

    ``texts``: a text file (one item per non-blank line, ids = line numbers
    ``000001``...), a folder of ``.txt`` files (one item per file, id = its
    name), a ``.jsonl`` / ``.parquet`` file or a list of dicts with
    ``text_column`` (and ``id_column``), a list of strings, or a Ray
    Dataset. ``model`` None: the default Kokoro model, which each node
    converts once into its own cache.

    Example::

        report = eliza.batch.speak("articles.txt", "voiced/", voice="af_heart", actors=2)
        print(report.done, report.failures, report.audio_seconds)
    """
    items = _inputs.rows(texts, text_column, id_column, "text")
    say = {"voice": voice, "speed": speed, "phonemes": phonemes, "no_noise": no_noise, "seed": seed}
    path = _model_path(model)
    job = _Job(
        kind="speak",
        worker=SpeakWorker,
        worker_args={"model": path, "language": language, **say},
        settings={"model": path or "default", "language": language, **say},
        write=_write_file("wav", ".wav", "wav"),
        fields=("audio_seconds",),
        weight=lambda item: len(item["text"]),
    )
    return _run(job, items, _from_items, out_dir, address, actors, threads_per_actor, retries)


def diarize(
    paths: _inputs.Source,
    out_dir: str | os.PathLike[str],
    *,
    num_speakers: int | None = None,
    min_speakers: int | None = None,
    max_speakers: int | None = None,
    threshold: float | None = None,
    segmentation: str | os.PathLike[str] | None = None,
    embedding: str | os.PathLike[str] | None = None,
    address: str | None = None,
    actors: int | None = None,
    threads_per_actor: int = 1,
    retries: int = 1,
) -> BatchReport:
    """Diarizes every WAV file of ``paths`` (one file, a folder's ``.wav``
    files, or a list of paths; id = the file name without extension) with
    ``eliza.Diarizer`` into ``out_dir/rttm/<id>.rttm``, as
    ``Diarizer.diarize`` with the same options would. The files are read by
    ``ray.data.read_binary_files`` on the workers: on a cluster, give paths
    every node can read. ``segmentation``/``embedding`` None: the default
    models, converted once per node.

    Example::

        report = eliza.batch.diarize("meetings/", "rttm_out/", num_speakers=2)
    """
    options = {
        "num_speakers": num_speakers,
        "min_speakers": min_speakers,
        "max_speakers": max_speakers,
        "threshold": threshold,
    }
    listed = _inputs.audio_paths(paths)
    missing = {item_id_for_path(p): f"{p}: no such file" for p in listed if not os.path.isfile(p)}
    present = [p for p in listed if os.path.isfile(p)]
    items = [{"id": item_id_for_path(p), "path": p} for p in present]
    seg, emb = _model_path(segmentation), _model_path(embedding)
    if (seg is None) != (emb is None):
        raise InvalidArgumentError(
            Status.E_INVALID_ARG, "give both model paths (segmentation and embedding) or neither"
        )
    job = _Job(
        kind="diarize",
        worker=DiarizeWorker,
        worker_args={"segmentation": seg, "embedding": emb, "options": options},
        settings={"segmentation": seg or "default", "embedding": emb or "default", **options},
        write=_write_file("rttm", ".rttm", "rttm"),
        fields=("n_turns", "n_speakers", "audio_seconds"),
        weight=lambda item: os.path.getsize(item["path"]),
        missing=missing,
    )

    def read(ray: ModuleType, todo: list[dict[str, Any]]) -> Any:
        files = [it["path"] for it in todo]
        # Reading takes no core: the actors hold them all, and a read that
        # waited for one would never start.
        return ray.data.read_binary_files(
            files, include_paths=True, override_num_blocks=len(files), num_cpus=0
        )

    return _run(job, items, read, out_dir, address, actors, threads_per_actor, retries)


def _write_generations(out: Path, manifest: Manifest, key: str) -> None:
    """``generations.jsonl`` and ``generations.parquet``: every item finished
    under these settings, in id order, rebuilt from the manifest."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = ("id", "prompt", "text", "prompt_tokens", "generated_tokens", "stop_reason")
    done = sorted(
        (r for r in manifest.last.values() if r.get("ok") and r.get("settings") == key), key=lambda r: r["id"]
    )
    records = [{name: r.get(name) for name in names} for r in done]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    write_atomic(out / f"{GENERATIONS}.jsonl", text.encode("utf-8"))
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("prompt", pa.string()),
            ("text", pa.string()),
            ("prompt_tokens", pa.int64()),
            ("generated_tokens", pa.int64()),
            ("stop_reason", pa.string()),
        ]
    )
    tmp = out / f".{GENERATIONS}.parquet.{os.getpid()}.tmp"
    pq.write_table(pa.Table.from_pylist(records, schema=schema), tmp)
    os.replace(tmp, out / f"{GENERATIONS}.parquet")


def generate(
    dataset: _inputs.Source,
    out_dir: str | os.PathLike[str],
    *,
    model: str | os.PathLike[str],
    prompt_column: str = "prompt",
    id_column: str = "id",
    options: GenerateOptions | None = None,
    context_size: int = 0,
    address: str | None = None,
    actors: int | None = None,
    threads_per_actor: int = 1,
    retries: int = 1,
    **overrides: Any,
) -> BatchReport:
    """Runs ``eliza.LLM.generate`` on the ``prompt_column`` of every row of
    ``dataset`` (a ``.jsonl`` / ``.parquet`` file, a text file of one prompt
    per line, a list of strings or dicts, or a Ray Dataset) and writes
    ``out_dir/generations.jsonl`` and ``generations.parquet`` (id, prompt,
    text, token counts, stop reason), sorted by id. Each actor holds one
    model and its KV cache. ``options`` (an :class:`eliza.GenerateOptions`)
    and keyword arguments named after its fields say how to generate, as in
    :meth:`eliza.LLM.generate`; ``context_size`` is the model's context.

    Example::

        report = eliza.batch.generate("prompts.jsonl", "gen/", model="gemma.gguf", temperature=0)
    """
    items = _inputs.rows(dataset, prompt_column, id_column, "prompt")
    # Resolved here, so the settings (and the manifest's digest of them) say
    # what each item was generated with, the library's defaults included.
    resolved = replace(options or GenerateOptions(), **overrides).resolved()
    sampling = {f.name: getattr(resolved, f.name) for f in fields(resolved)}
    sampling["stop"] = list(resolved.stop)
    path = os.path.abspath(model)
    job = _Job(
        kind="generate",
        worker=GenerateWorker,
        worker_args={"model": path, "context_size": context_size, "sampling": sampling},
        settings={"model": path, "context_size": context_size, "options": sampling},
        write=lambda out, row: None,
        fields=("prompt", "text", "prompt_tokens", "generated_tokens", "stop_reason"),
        weight=lambda item: len(item["prompt"]),
        finish=_write_generations,
    )
    return _run(job, items, _from_items, out_dir, address, actors, threads_per_actor, retries)
