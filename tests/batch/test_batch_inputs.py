"""eliza.batch without a Ray cluster: ``import eliza`` (and the CLI) never
imports Ray; what the jobs read from each kind of input; the manifest's
notion of a finished item; the ``eliza batch`` parser."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import eliza
from eliza.batch import _inputs
from eliza.batch._manifest import Manifest
from eliza.cli import build_parser


def test_the_core_package_and_its_cli_never_import_ray() -> None:
    code = "import sys, eliza, eliza.cli, eliza.batch; print('ray' in sys.modules, 'pyarrow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_rows_from_every_kind_of_text_input(tmp_path: Path) -> None:
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "b.txt").write_text("second", encoding="utf-8")
    (folder / "a.txt").write_text("first", encoding="utf-8")
    (folder / "skip.md").write_text("not an item")
    assert _inputs.rows(folder, "text", "id", "text") == [
        {"id": "a", "text": "first"},
        {"id": "b", "text": "second"},
    ]
    lines = tmp_path / "lines.txt"
    lines.write_text("one\n\n  \ntwo\n", encoding="utf-8")
    assert _inputs.rows(lines, "text", "id", "text") == [
        {"id": "000001", "text": "one"},
        {"id": "000004", "text": "two"},
    ]
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"key": 7, "q": "seven"}\n\n{"q": "no id"}\n')
    assert _inputs.rows(jsonl, "q", "key", "prompt") == [
        {"id": "7", "prompt": "seven"},
        {"id": "000002", "prompt": "no id"},
    ]
    assert _inputs.rows(["x", {"id": "k", "text": "y"}], "text", "id", "text") == [
        {"id": "000001", "text": "x"},
        {"id": "k", "text": "y"},
    ]


def test_rows_from_parquet(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": ["u", "v"], "text": ["hi", "there"]}), path)
    assert _inputs.rows(path, "text", "id", "text") == [
        {"id": "u", "text": "hi"},
        {"id": "v", "text": "there"},
    ]


def test_bad_inputs_are_refused_with_the_reason(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n{not json\n')
    with pytest.raises(eliza.InvalidArgumentError, match=r"bad.jsonl:2: not a JSON object"):
        _inputs.rows(bad, "prompt", "id", "prompt")
    with pytest.raises(eliza.InvalidArgumentError, match="item 1 has no 'prompt' column"):
        _inputs.rows([{"text": "x"}], "prompt", "id", "prompt")
    with pytest.raises(eliza.InvalidArgumentError, match="two items have the id 'a'"):
        _inputs.audio_paths([tmp_path / "x" / "a.wav", tmp_path / "y" / "a.wav"])


def test_a_finished_item_is_ok_same_settings_and_still_there(tmp_path: Path) -> None:
    (tmp_path / "wav").mkdir()
    (tmp_path / "wav" / "kept.wav").write_bytes(b"RIFF")
    records = [
        {"id": "kept", "ok": True, "settings": "s1", "output": "wav/kept.wav"},
        {"id": "deleted", "ok": True, "settings": "s1", "output": "wav/deleted.wav"},
        {"id": "other", "ok": True, "settings": "s2", "output": None},
        {"id": "retried", "ok": True, "settings": "s1", "output": None},
        {"id": "retried", "ok": False, "settings": "s1", "error": "boom"},
    ]
    text = "".join(json.dumps(r) + "\n" for r in records) + '{"id": "torn", "ok": tr'
    (tmp_path / "manifest.jsonl").write_text(text)
    manifest = Manifest(tmp_path)
    assert manifest.finished("s1") == {"kept"}
    assert manifest.finished("s2") == {"other"}
    assert "torn" not in manifest.last


def test_the_batch_commands_parse() -> None:
    args = build_parser().parse_args(
        ["batch", "say", "in.txt", "out", "--actors", "3", "--threads-per-actor", "2", "--voice", "jm_kumo"]
    )
    assert (args.job, args.input, args.output, args.actors, args.threads_per_actor) == (
        "say",
        "in.txt",
        "out",
        3,
        2,
    )
    assert args.address == "local" and args.voice == "jm_kumo"
    args = build_parser().parse_args(["batch", "generate", "p.jsonl", "g", "--address", "10.0.0.1:6379"])
    assert (args.job, args.address, args.prompt_column) == ("generate", "10.0.0.1:6379", "prompt")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["batch", "diarize", "in", "out", "--actors", "0"])
