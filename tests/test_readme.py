"""Every Python block of README.md runs as written: in order, in one
namespace (a reader's session), in a scratch directory holding the files the
blocks name (``model.gguf``: the cached Gemma model; ``meeting.wav``: a
synthetic conversation; ``articles.txt``, ``meetings/`` and
``prompts.jsonl``: small inputs of the batch jobs). A block whose default
model is not cached, or that needs Ray where it is not installed, is skipped,
by name, and the others still run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from eliza import models

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "diar"))
from diar_models_util import speech_like  # noqa: E402

BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks() -> list[str]:
    return BLOCK.findall((REPO / "README.md").read_text())


def _needs(block: str) -> list[str]:
    """The default models a block uses."""
    need = []
    if "model.gguf" in block or "gemma3-270m" in block or "eliza.LLM(" in block:
        need.append("gemma3-270m")
    if "eliza.TTS(" in block:
        need.append(models.KOKORO)
    if "eliza.Diarizer(" in block:
        need.append("diarization")
    if "eliza.batch" in block:
        need += ["ray", "gemma3-270m", models.KOKORO, "diarization"]
    return need


def _available(name: str) -> bool:
    if name == "ray":
        import importlib.util

        return importlib.util.find_spec("ray") is not None
    if name == "diarization":
        try:
            models.diarization_model_paths(install=False)
        except ImportError:
            return False
        return True
    return models.is_cached(name)


def test_readme_has_python_blocks() -> None:
    assert len(_blocks()) >= 4


# Runs the blocks it is given (a JSON list on stdin) in one namespace, in a
# fresh interpreter: what `import eliza` alone provides is what they get.
RUNNER = r"""
import json, sys, traceback
blocks = json.load(sys.stdin)
namespace = {"__name__": "__readme__"}
for number, block in blocks:
    try:
        exec(compile(block, f"README.md python block {number}", "exec"), namespace)
    except Exception:
        print(f"block {number} fails:\n{block}\n{traceback.format_exc()}", file=sys.stderr)
        sys.exit(1)
"""


def test_every_readme_python_block_runs(tmp_path: Path) -> None:
    import eliza

    if models.is_cached("gemma3-270m"):
        os.symlink(models.cache_dir() / models.MODELS["gemma3-270m"].filename, tmp_path / "model.gguf")
    eliza.write_wav(tmp_path / "meeting.wav", speech_like(5, 12.0), 16000)
    (tmp_path / "articles.txt").write_text("Hello there.\nThe batch job speaks each line.\n")
    (tmp_path / "meetings").mkdir()
    eliza.write_wav(tmp_path / "meetings" / "meeting.wav", speech_like(5, 12.0), 16000)
    (tmp_path / "prompts.jsonl").write_text(json.dumps({"prompt": "The sky is"}) + "\n")
    run_blocks, skipped = [], []
    for i, block in enumerate(_blocks(), start=1):
        missing = [n for n in _needs(block) if not _available(n)]
        if missing:
            skipped.append(f"block {i} (needs {', '.join(missing)})")
        else:
            run_blocks.append((i, block))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "sdk"), env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(run_blocks), capture_output=True,
                         text=True, cwd=tmp_path, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    if skipped:
        pytest.skip("not run: " + "; ".join(skipped))
