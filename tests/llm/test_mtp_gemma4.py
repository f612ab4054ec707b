"""The Gemma 4 assistant as libeliza's MTP drafter (llm/draft_mtp.c), driven
by tests/c/test_llm_mtp.c on the tiny models of tests/llm/gemma4_models.py:
greedy speculative decoding drafts the same tokens, round by round, as
transformers' MTP loop (gemma4_models.reference_mtp) and accepts as many,
with and without the masked embedding, for k = 1 .. 6 and contexts past the
sliding window; its output is plain greedy output; a drafter that does not
fit its target is refused naming both sides."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

for _module in ("torch", "transformers", "gguf", "safetensors", "sentencepiece", "tokenizers"):
    pytest.importorskip(_module)

import gemma4_models as g4  # noqa: E402
import gguf  # noqa: E402

import c_tools  # noqa: E402

GOLDENS = Path(__file__).resolve().parents[1] / "data" / "llm_gemma4_goldens.json"


@pytest.fixture(scope="module")
def goldens() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(GOLDENS.read_text())
    return doc


def _tool(*args: Any) -> str:
    exe = c_tools.require("test_llm_mtp")
    r = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def _run(drafter: str, prompt: list[int], n_new: int, k: int, target: Path | None = None) -> dict[str, Any]:
    out = _tool("run", target or g4.gguf_file("gemma4"), g4.gguf_file(drafter), k, n_new, *prompt)
    rounds, tokens = [], None
    for line in out.splitlines():
        if line.startswith("round "):
            drafted, accepted = line[len("round ") :].split(" : ")
            rounds.append({"drafted": [int(t) for t in drafted.split()], "accepted": int(accepted)})
        elif line.startswith("tokens"):
            tokens = [int(t) for t in line.split()[1:]]
    assert tokens is not None, out
    return {"tokens": tokens, "rounds": rounds}


@pytest.mark.parametrize("drafter", g4.DRAFTERS)
def test_mtp_rounds_equal_transformers_count_for_count(goldens: dict[str, Any], drafter: str) -> None:
    cases = goldens["drafters"][drafter]["mtp"]
    for case in cases:
        got = _run(drafter, case["prompt"], len(case["tokens"]), case["k"])
        assert got == {"tokens": case["tokens"], "rounds": case["rounds"]}, case["k"]
    # rounds that accept none and all of their drafts, past the window
    accepted = [(r["accepted"], len(r["drafted"])) for c in cases for r in c["rounds"]]
    assert any(a == 0 for a, _ in accepted) and any(a == m for a, m in accepted)
    assert max(len(c["prompt"]) + len(c["tokens"]) for c in cases) > 4 * g4.SLIDING_WINDOW


@pytest.mark.reference
def test_mtp_rounds_equal_a_live_transformers_run() -> None:
    prompt = g4.random_ids(6, 77)
    want = g4.reference_mtp("gemma4_assistant_masked", prompt, 30, 3)
    assert _run("gemma4_assistant_masked", prompt, 30, 3) == want


@pytest.mark.parametrize("k", [1, 2, 5, 8])
def test_speculative_greedy_output_is_plain_greedy_output(k: int) -> None:
    prompt = g4.random_ids(5, 100 + k)
    got = _run("gemma4_assistant", prompt, 36, k)
    assert got["tokens"] == g4.reference_greedy("gemma4", prompt, 36)


def test_drafter_needs_the_target_context_and_stops_on_cancel() -> None:
    """propose() without the target's session or its hidden state is
    ELIZA_E_STATE (the fork's third lesson); a set cancel flag stops it."""
    assert _tool("state", g4.gguf_file("gemma4"), g4.gguf_file("gemma4_assistant")).strip() == "ok"


def _rewritten(src: Path, dst: Path, keys: dict[str, int], tensors: dict[str, Any], drop: set[str]) -> Path:
    """A copy of the GGUF src with some u32 keys and tensors replaced."""
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(str(dst), arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name in keys:
            w.add_uint32(name, keys[name])
        elif f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, f.contents(), f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(name, f.contents(), f.types[0])
    for t in r.tensors:
        if t.name in drop:
            continue
        w.add_tensor(t.name, tensors.get(t.name, np.asarray(t.data)))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def test_refuses_a_drafter_that_does_not_fit(tmp_path: Path) -> None:
    target, drafter = g4.gguf_file("gemma4"), g4.gguf_file("gemma4_assistant")
    rng = np.random.default_rng(0)
    # hidden size: rows of 48 exchanged with a target of width 64
    narrow = _rewritten(
        drafter,
        tmp_path / "narrow.gguf",
        {"gemma4-assistant.embedding_length_out": 48},
        {
            "nextn.pre_projection.weight": rng.standard_normal((32, 96)).astype(np.float32),
            "nextn.post_projection.weight": rng.standard_normal((48, 32)).astype(np.float32),
        },
        set(),
    )
    out = _tool("open", target, narrow)
    assert (
        "ELIZA_E_INVALID_ARG" in out
        and "rows of 48 (embedding_length_out)" in out
        and "hidden size is 64" in out
    )
    # vocabulary: 256 tokens against 512
    small = _rewritten(
        drafter,
        tmp_path / "small.gguf",
        {},
        {"token_embd.weight": rng.standard_normal((256, 32)).astype(np.float32)},
        set(),
    )
    out = _tool("open", target, small)
    assert "ELIZA_E_INVALID_ARG" in out and "vocabulary of 256 tokens, the target 512" in out
    # not a drafter; not a gemma4 target
    assert "is a gemma4 model, not a gemma4-assistant" in _tool("open", target, target)
    assert "needs a gemma4 target; the target is a gemma4-assistant" in _tool("open", drafter, drafter)
    # a masked embedding whose ordering is no permutation
    masked = g4.gguf_file("gemma4_assistant_masked")
    bad = _rewritten(
        masked, tmp_path / "bad.gguf", {}, {"masked_embd_ordering": np.zeros(512, np.int32)}, set()
    )
    assert "not a permutation" in _tool("open", target, bad)


def test_an_assistant_is_no_model_of_its_own() -> None:
    import eliza

    with (
        eliza.LLM(g4.gguf_file("gemma4_assistant"), n_threads=1) as llm,
        pytest.raises(eliza.UnsupportedError, match="multi-token-prediction drafter"),
    ):
        llm.logits([1, 2, 3])
