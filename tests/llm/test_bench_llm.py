"""bench/llm.py's llama.cpp side: how its options map onto llama.cpp's
context (no model run), and, against the built llama.cpp (-m reference),
that tests/tools/libllama.py's decoding context gives the logits of one
whole batch when it is fed token by token."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from tools.libllama import CACHE_TYPES, FLASH_ATTN, LibLlama  # noqa: E402


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_llm", REPO / "bench" / "llm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BENCH = _bench()


def _args(*argv: str) -> object:
    args = BENCH.parser().parse_args(["--model", "m.gguf", *argv])
    return args


def test_cache_types_are_ggml_types() -> None:
    # ggml.h: GGML_TYPE_F32 0, F16 1, Q4_0 2, Q8_0 8; llama.h's flash attention enum.
    assert CACHE_TYPES == {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8}
    assert FLASH_ATTN == {"auto": -1, "off": 0, "on": 1}


@pytest.mark.parametrize(
    ("argv", "cache"),
    [
        ((), ("f32", "f32")),
        (("--kv-type", "f16"), ("f16", "f16")),
        (("--kv-type", "q8_0"), ("q8_0", "q8_0")),
        (("--kv-type", "q4_0"), ("q4_0", "q4_0")),
        (("--kv-type", "q8_0", "--kv-type-v", "q4_0"), ("q8_0", "q4_0")),
        (("--kv-type", "tbq4_0"), None),
        (("--kv-type", "tbq3_0"), None),
        (("--kv-type", "f16", "--kv-type-v", "tbq4_0"), None),
    ],
)
def test_kv_type_maps_to_llama_cache(argv: tuple[str, ...], cache: tuple[str, str] | None) -> None:
    assert BENCH.llama_cache(_args(*argv)) == cache


def test_llama_worker_gets_ids_context_and_flash_attention() -> None:
    args = _args("--kv-type", "q4_0", "--decode-context", "16384", "--context-threads", "16",
                 "--cpus", "2,3", "--threads", "2")
    cmd = BENCH.worker_args("llama.cpp", args, Path("/tmp/ids.json"))
    flags = " ".join(cmd[2:])
    assert "--worker llama.cpp" in flags
    assert "--kv-type q4_0" in flags and "--decode-context 16384" in flags
    assert "--ids /tmp/ids.json" in flags and "--llama-flash-attn on" in flags
    assert "--context-threads 16" in flags and "--cpus 2,3" in flags and "--threads 2" in flags
    # The worker parses what the driver wrote.
    worker = BENCH.parser().parse_args(cmd[2:])
    assert worker.cpus == [2, 3] and worker.context_threads == 16 and worker.ids == Path("/tmp/ids.json")
    assert BENCH.llama_cache(worker) == ("q4_0", "q4_0")


def test_libeliza_worker_takes_no_llama_options() -> None:
    args = _args("--kv-type", "tbq3_0", "--decode-context", "4096", "--context-threads", "16",
                 "--llama-flash-attn", "off")
    flags = " ".join(BENCH.worker_args("libeliza", args, Path("/tmp/ids.json")))
    assert "--kv-type tbq3_0" in flags and "--decode-context 4096" in flags
    assert "--ids" not in flags and "--context-threads" not in flags and "--llama-flash-attn" not in flags


def test_llama_wait_policies() -> None:
    assert BENCH.llama_envs("both") == [{}, {"OMP_WAIT_POLICY": "PASSIVE"}]
    assert BENCH.llama_envs("active") == [{}]
    assert BENCH.llama_envs("passive") == [{"OMP_WAIT_POLICY": "PASSIVE"}]


@pytest.mark.reference
def test_decoding_context_equals_one_batch() -> None:
    import tiny_models as tm

    lib = LibLlama.load()
    if lib is None:
        pytest.skip("no llama.cpp build (python tests/tools/llama_cpp.py)")
    path = tm.gguf_file("llama", "f32")
    ids = [1, 5, 9, 200, 31, 7, 64, 3, 18, 250]
    with lib.model(path) as model:
        whole = np.array(model.logits(ids), np.float32)
        with model.context(n_ctx=64, n_batch=4, type_k="f32", type_v="f32", flash_attn="off") as ctx:
            ctx.decode(ids[:6])  # two batches of n_batch
            rows = [np.ctypeslib.as_array(ctx.last_logits()).copy()]
            for t in ids[6:]:
                ctx.decode([t])
                rows.append(np.ctypeslib.as_array(ctx.last_logits()).copy())
            assert ctx.n_past == len(ids)
            ctx.clear()
            ctx.decode(ids[:3])
            again = np.ctypeslib.as_array(ctx.last_logits()).copy()
    np.testing.assert_allclose(np.stack(rows), whole[5:], atol=1e-4)
    np.testing.assert_allclose(again, whole[2], atol=1e-4)


def test_sweep_gives_each_worker_its_own_cpus() -> None:
    args = _args("--sweep", "f16,tbq4_0,q4_0", "--threads", "2")
    jobs = BENCH.sweep_jobs(args, list(range(10)))
    assert jobs == [("libeliza", "f16", [0, 1]), ("llama.cpp", "f16", [2, 3]), ("libeliza", "tbq4_0", [4, 5]),
                    ("libeliza", "q4_0", [6, 7]), ("llama.cpp", "q4_0", [8, 9])]
    assert [j[:2] for j in BENCH.sweep_jobs(_args("--sweep", "q8_0", "--no-llama"), [0, 1])] == [
        ("libeliza", "q8_0")]
    with pytest.raises(SystemExit):
        BENCH.sweep_jobs(args, list(range(9)))


def test_sweep_workers_meet_at_a_barrier(tmp_path: Path) -> None:
    args = _args("--kv-type", "q8_0")
    cmd = BENCH.worker_args("libeliza", args, tmp_path / "ids.json", tmp_path)
    worker = BENCH.parser().parse_args(cmd[2:])
    assert worker.barrier == tmp_path and worker.ids == tmp_path / "ids.json"
    (tmp_path / "go-libeliza-q8_0").touch()
    BENCH.barrier(worker, "libeliza")  # returns at once: its turn has come
    assert (tmp_path / "ready-libeliza-q8_0").exists()


def test_libeliza_decode_cpu_leaves_out_the_prompt(gemma_path: Path) -> None:
    # The timed stream reuses the prompt a first stream evaluated; the one-token
    # stream it is differenced against must reuse it too (it once paid the whole
    # prompt, and the decode CPU per token came out negative after long prompts).
    args = _args("--decode-context", "600", "--decode", "6", "--prefill", "16", "--no-llama")
    args.model = str(gemma_path)  # type: ignore[attr-defined]
    res = BENCH.run_eliza(args)
    assert res["generated"] == 6
    assert 0 < res["decode_cpu_ms"] < 1000
