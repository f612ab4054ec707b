#!/usr/bin/env python3
"""Decode and prefill speed per weight type: libeliza against llama.cpp's
llama-bench on the bench-size llama of bench/quant_models.py (90M weights,
every matrix in the type), both engines back to back for each type.

    python bench/quant_speed.py [--threads 2] [--prefill 128] [--decode 32]
                                [--reps 3] [--rounds 2] [TYPE ...]

llama.cpp: ``llama-bench -t T -p P -n 0`` and ``-p 0 -n D`` from the build
of tests/tools/llama_cpp.py (KV cache F16, its defaults otherwise), with
OMP_WAIT_POLICY=PASSIVE (spinning OpenMP threads burn the CPU time this
counts and collapse on a loaded machine). libeliza: ``LLM.logits`` of a
P-token prompt (one batch, last position's logits, as llama-bench's pp) and
``LLM.generate`` of D greedy tokens after a 1-word prompt (its F32 cache),
less a generation of 1 token (the prompt's pass), per token after the first;
its wall figure is the stream's own decode tokens/s.

Two figures per engine and phase:
  wall   tokens per wall-clock second, the best repetition;
  cpu    CPU milliseconds (user + system, every thread) per token, the
         least of the repetitions. On a shared, loaded machine the wall
         time mostly measures the neighbours; CPU time per token does not
         (a thread waiting for a core is not charged).
llama-bench's CPU time is its process's: the run with 1 repetition is taken
off the run with REPS + 1, which leaves REPS timed repetitions (model load
and warm-up cancel). Prints a markdown table; ratios are libeliza's speed
over llama.cpp's (> 1: libeliza faster).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "sdk"), str(REPO / "tests" / "llm"), str(REPO / "tests")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import quant_models as qm  # noqa: E402  (tests/llm's: the model files)

from tools.llama_cpp import cache_dir  # noqa: E402


def bench_types() -> list[str]:
    """bench/quant_models.py's list of types (a module of the same name)."""
    spec = importlib.util.spec_from_file_location("bench_quant_models", REPO / "bench" / "quant_models.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.DEFAULT_TYPES)

STORY = ("Once upon a time, in a quiet town at the edge of a great forest, there lived an old clockmaker "
         "who repaired every clock in the valley. ")


@dataclass
class Phase:
    wall_tok_s: float
    cpu_ms_tok: float


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ---- libeliza (in a child process, so one type's mapping is gone for the next) ----

def eliza_worker(model: Path, threads: int, prefill: int, decode: int, reps: int) -> dict[str, Any]:
    if "ELIZA_LIBRARY" not in os.environ:
        os.environ["ELIZA_LIBRARY"] = str(REPO / "build" / "libeliza.so")
    sys.path.insert(0, str(REPO / "sdk"))
    import eliza

    with eliza.LLM(str(model), n_threads=threads, context_size=prefill + decode + 64, n_batch=prefill) as llm:
        text, ids = STORY, llm.tokenize(STORY)
        while len(ids) < prefill:
            text += STORY
            ids = llm.tokenize(text)
        ids = ids[:prefill]
        llm.logits(ids[:8])  # page the weights in
        pp_wall, pp_cpu, tg_wall, tg_cpu, generated = 0.0, 1e30, 0.0, 1e30, decode
        for _ in range(reps):
            c0, t0 = cpu_s(), time.perf_counter()
            llm.logits(ids)
            pp_wall = max(pp_wall, prefill / (time.perf_counter() - t0))
            pp_cpu = min(pp_cpu, (cpu_s() - c0) * 1e3 / prefill)
            # the prompt's pass and the first token, then the whole run: the
            # difference is decode alone
            c0 = cpu_s()
            llm.generate("Once", max_tokens=1, temperature=0.0)
            c1 = cpu_s()
            llm.generate("Once", max_tokens=decode, temperature=0.0)
            c2 = cpu_s()
            stats = llm.last_stats
            assert stats is not None
            generated = min(generated, stats.generated_tokens)
            tg_wall = max(tg_wall, stats.decode_tokens_per_s)
            tg_cpu = min(tg_cpu, ((c2 - c1) - (c1 - c0)) * 1e3 / max(stats.generated_tokens - 1, 1))
        return {"pp": [pp_wall, pp_cpu], "tg": [tg_wall, tg_cpu], "generated": generated,
                "simd": llm.info.get("simd", "")}


def run_eliza(model: Path, args: argparse.Namespace) -> tuple[Phase, Phase, int]:
    cmd = [sys.executable, __file__, "--worker", str(model), "--threads", str(args.threads),
           "--prefill", str(args.prefill), "--decode", str(args.decode), "--reps", str(args.reps)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"libeliza worker failed on {model.name}:\n{res.stderr[-2000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    return Phase(*out["pp"]), Phase(*out["tg"]), int(out["generated"])


# ---- llama.cpp --------------------------------------------------------------------

def llama_bench(model: Path, threads: int, n_prompt: int, n_gen: int, reps: int) -> tuple[float, float]:
    """(best tokens/s of `reps` repetitions, CPU seconds of the whole process)."""
    exe = cache_dir() / "build" / "bin" / "llama-bench"
    cmd = [str(exe), "-m", str(model), "-t", str(threads), "-p", str(n_prompt), "-n", str(n_gen),
           "-r", str(reps), "-o", "json"]
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    stdout = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise RuntimeError(f"llama-bench failed on {model.name} (status {status})")
    result = json.loads(stdout)[0]
    return max(result["samples_ts"]), usage.ru_utime + usage.ru_stime


def run_llama(model: Path, args: argparse.Namespace) -> tuple[Phase, Phase]:
    phases = []
    for n_prompt, n_gen in ((args.prefill, 0), (0, args.decode)):
        n_tok = n_prompt + n_gen
        best1, cpu1 = llama_bench(model, args.threads, n_prompt, n_gen, 1)
        best, cpu = llama_bench(model, args.threads, n_prompt, n_gen, args.reps + 1)
        phases.append(Phase(max(best, best1), max(cpu - cpu1, 0.0) * 1e3 / (args.reps * n_tok)))
    return phases[0], phases[1]


# ---- driver -----------------------------------------------------------------------

def better(a: Phase | None, b: Phase) -> Phase:
    if a is None:
        return b
    return Phase(max(a.wall_tok_s, b.wall_tok_s), min(a.cpu_ms_tok, b.cpu_ms_tok))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=Path.home() / ".cache" / "eliza" / "quant-bench")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefill", type=int, default=128)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2, help="both engines back to back, times per type")
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("types", nargs="*", default=bench_types())
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(eliza_worker(args.worker, args.threads, args.prefill, args.decode, args.reps)))
        return 0
    from gguf import GGMLQuantizationType as Q

    args.dir.mkdir(parents=True, exist_ok=True)
    print("| type | MB | eliza pp tok/s | llama pp tok/s | pp wall | pp cpu ms/tok eliza / llama | pp cpu "
          "| eliza tg tok/s | llama tg tok/s | tg wall | tg cpu ms/tok eliza / llama | tg cpu |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.types:
        model = qm.bench_file(Q[name], args.dir)
        e_pp = e_tg = l_pp = l_tg = None
        generated = args.decode
        for _ in range(args.rounds):
            pp, tg, n = run_eliza(model, args)
            e_pp, e_tg, generated = better(e_pp, pp), better(e_tg, tg), min(generated, n)
            pp, tg = run_llama(model, args)
            l_pp, l_tg = better(l_pp, pp), better(l_tg, tg)
        assert e_pp and e_tg and l_pp and l_tg
        short = "" if generated == args.decode else f" ({generated} tokens)"
        print(f"| {name} | {model.stat().st_size / 2**20:.0f} "
              f"| {e_pp.wall_tok_s:.0f} | {l_pp.wall_tok_s:.0f} | {e_pp.wall_tok_s / l_pp.wall_tok_s:.2f}x "
              f"| {e_pp.cpu_ms_tok:.2f} / {l_pp.cpu_ms_tok:.2f} | {l_pp.cpu_ms_tok / e_pp.cpu_ms_tok:.2f}x "
              f"| {e_tg.wall_tok_s:.1f}{short} | {l_tg.wall_tok_s:.1f} "
              f"| {e_tg.wall_tok_s / l_tg.wall_tok_s:.2f}x "
              f"| {e_tg.cpu_ms_tok:.1f} / {l_tg.cpu_ms_tok:.1f} | {l_tg.cpu_ms_tok / e_tg.cpu_ms_tok:.2f}x |",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
