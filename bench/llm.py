#!/usr/bin/env python3
"""LLM speed: libeliza against llama.cpp on the same GGUF, same machine,
same thread count, the same token ids, in one run.

    python bench/llm.py [--model gemma3-270m-q4_k_m.gguf] [--threads 2] [--cpus 0,1]
                        [--prefill 256] [--decode 128] [--rounds 3] [--kv-type f32]
                        [--kv-type-v T] [--decode-context N [--context-threads N]]
                        [--gpu-layers -1 [--gpu-device NAME]]
    python bench/llm.py --draft ngram ...   speculative decoding: bench/llm_draft.py

Measures, for each engine in its own process (so peak RSS is its own):
  prefill  tokens/s evaluating a PREFILL-token prompt in one batch (logits of
           the last position only, as generation needs)
  decode   tokens/s of DECODE greedy tokens (one token per forward pass, the
           argmax included; until DECODE or an end-of-generation token) after
           a short prompt, or after a prompt of --decode-context tokens: the
           cost of attention over a long cache of each --kv-type
  rss      peak resident set of the process (MB), model mapping included
  CPU      process CPU time (all threads) of the prefill, and per decoded
           token: llama.cpp's around each decode call, libeliza's by
           differencing a one-token stream and the timed one (the same
           prompt); printed per round, since on a loaded machine CPU time
           moves less than wall time
libeliza tokenizes; llama.cpp then evaluates the very same ids. The engines
alternate for --rounds rounds; the best round of each counts, and the
medians of the per-round ratios (speed, and CPU time) are printed beside.
llama.cpp runs under OpenMP's default (spinning) wait policy and
OMP_WAIT_POLICY=PASSIVE (--llama-wait both, the default) and keeps its
better figures: on a loaded machine spinning threads collapse its decode
speed, on a quiet one they win.
Prints the figures, our/llama.cpp ratios, and where libeliza's time goes (the
"profile" of eliza_llm_info_json, per generated token and for the prefill).

llama.cpp is the build tests/tools/llama_cpp.py makes from the
llama-cpp-python==0.3.36 sdist ($ELIZA_LLAMA_CPP_DIR, default
~/.cache/eliza/llama.cpp-0.3.36), driven through tests/tools/libllama.py
(ctypes; llama-cpp-python is not needed), with its extra buffer types (the
repacked CPU kernels; --no-llama-extra-bufts leaves them out). That build
has no AMX kernels: 0.3.36's fault on the Xeons here. --kv-type (f32, f16,
q8_0, q4_0, tbq4_0, tbq3_0; --kv-type-v for
values of another type) sets both engines' cache: llama.cpp's type_k /
type_v with flash attention on (--llama-flash-attn; a quantized V needs it).
llama.cpp has no TBQ cache: with those, libeliza runs alone.

--cpus pins each worker's threads (taskset's effect) for its measurements.
--context-threads lets llama.cpp evaluate the --decode-context prompt on more
threads, unpinned (its n_threads_batch), before it pins and decodes at
--threads; libeliza's thread count is fixed when a model is opened, so it
evaluates that prompt at --threads. Only the decode figure is compared.

--gpu-layers N puts libeliza's model on the GPU (Vulkan; -1 = all;
--gpu-device picks the device, e.g. llvmpipe); the run fails rather than
measuring the CPU when the GPU cannot take the model. The prompt runs token
by token through the replayed decode step there (no batched prefill yet).

On the lent GPU machine's CPU (docs/llm.md, "Speed on the lent Xeon"), with a
llama.cpp built there: bench/xeon_cpu.sh.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

STORY = ("Once upon a time, in a quiet town at the edge of a great forest, there lived an old clockmaker "
         "who repaired every clock in the valley. Each morning he opened his small shop, lit the lamp, "
         "and listened to the ticking of a hundred clocks. ")
DECODE_PROMPT = "Write a long story about a clockmaker and his apprentice. Chapter 1:"


def default_model() -> Path:
    try:
        sys.path.insert(0, str(REPO / "sdk"))
        from eliza import models

        return Path(models.path("gemma3-270m", install=False))
    except Exception:
        return Path("/work/models/gemma3-270m-q4_k_m.gguf")


def peak_rss_mb() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / (1024 * 1024) if sys.platform == "darwin" else kb / 1024


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def prefill_ids(tokenize: Any, n: int) -> list[int]:
    text = STORY
    ids: list[int] = tokenize(text)
    while len(ids) < n:
        text += STORY
        ids = tokenize(text)
    return ids[:n]


# ---- workers (run in a child process) ----------------------------------------------------

def run_eliza(args: argparse.Namespace) -> dict[str, Any]:
    if "ELIZA_LIBRARY" not in os.environ:
        for name in ("libeliza.so", "libeliza.dylib", "eliza.dll"):
            for build in ("build", "build-llm"):
                if (REPO / build / name).is_file():
                    os.environ["ELIZA_LIBRARY"] = str(REPO / build / name)
                    break
            if "ELIZA_LIBRARY" in os.environ:
                break
    sys.path.insert(0, str(REPO / "sdk"))
    import eliza

    pin(args.cpus)
    ctx = max(args.prefill, args.decode_context) + args.decode + 64
    with eliza.LLM(
        args.model, n_threads=args.threads, context_size=ctx, n_batch=args.prefill, kv_type=args.kv_type,
        kv_type_v=args.kv_type_v, gpu_layers=args.gpu_layers, gpu_device=args.gpu_device,
        gpu_required=args.gpu_layers != 0,
    ) as llm:
        ids = prefill_ids(lambda t: llm.tokenize(t), args.prefill)
        prompt = DECODE_PROMPT
        if args.decode_context:
            prompt = llm.detokenize(prefill_ids(lambda t: llm.tokenize(t), args.decode_context))
        decode_ids = llm.tokenize(prompt)
        if args.ids and not args.ids.exists():
            # For llama.cpp's workers of a sweep, which wait for it.
            tmp = args.ids.with_suffix(f".{os.getpid()}")
            tmp.write_text(json.dumps({"prefill": ids, "decode": decode_ids}))
            tmp.replace(args.ids)
        llm.logits(ids[:8])  # warm-up: page in, first-touch buffers
        before = llm.info["profile"]
        c0, t0 = cpu_s(), time.perf_counter()
        llm.logits(ids)
        prefill_s = time.perf_counter() - t0
        prefill_cpu = cpu_s() - c0
        after = llm.info["profile"]
        prefill_profile = {k[:-3]: after[k] - before[k] for k in after if k.endswith("_ms")}
        # Decode CPU by differencing: a stream of one token against the timed
        # stream, whose first piece may come only at its end (text held
        # back). Both come after a first stream has evaluated the prompt, so
        # both reuse it as their prefix and pay the same for it. Not in a
        # sweep, where the prompt is long and only the speed counts.
        one_cpu = 0.0
        if not args.barrier:
            "".join(llm.stream(prompt, max_tokens=1, temperature=0.0))
            c0 = cpu_s()
            "".join(llm.stream(prompt, max_tokens=1, temperature=0.0))
            one_cpu = cpu_s() - c0
        before = llm.info["profile"]
        # The first piece comes once the prompt is evaluated; the stats time
        # the library's evaluations only, not the wait at the barrier.
        c0 = cpu_s()
        pieces = llm.stream(prompt, max_tokens=args.decode, temperature=0.0)
        text = next(pieces, "")
        barrier(args, "libeliza")
        t0 = time.perf_counter()
        text += "".join(pieces)
        total_s = time.perf_counter() - t0
        decode_cpu = cpu_s() - c0 - one_cpu
        stats = llm.last_stats
        after = llm.info["profile"]
        assert stats is not None
        n_gen = stats.generated_tokens
        profile = {k[:-3]: (after[k] - before[k]) / max(n_gen, 1) for k in after if k.endswith("_ms")}
        return {
            "engine": "libeliza",
            "prefill_tok_s": args.prefill / prefill_s,
            "prefill_cpu_s": prefill_cpu,
            "decode_tok_s": stats.decode_tokens_per_s,
            "decode_wall_tok_s": (n_gen - 1) / total_s if total_s else 0.0,
            "decode_cpu_ms": None if args.barrier else 1000 * decode_cpu / max(n_gen - 1, 1),
            "generated": n_gen,
            "decode_context": len(decode_ids),
            "context_prefill_s": stats.prefill_ms / 1000,
            "rss_mb": peak_rss_mb(),
            "kv_mb": llm.info["kv_bytes"] / 2**20,
            "profile_ms_per_token": profile,
            "prefill_profile_ms": prefill_profile,
            "text": text[:80],
            "backend": llm.info["backend"],
            "ids": {"prefill": ids, "decode": decode_ids},
        }


def llama_cache(args: argparse.Namespace) -> tuple[str, str] | None:
    """llama.cpp's type_k / type_v for libeliza's --kv-type / --kv-type-v,
    or None where llama.cpp has no such cache type (the TBQ types)."""
    sys.path.insert(0, str(REPO / "tests"))
    from tools.libllama import CACHE_TYPES

    k, v = args.kv_type, args.kv_type_v or args.kv_type
    return (k, v) if k in CACHE_TYPES and v in CACHE_TYPES else None


def barrier(args: argparse.Namespace, engine: str) -> None:
    """In a sweep: says this worker's prompt is evaluated and waits for its
    turn to decode (one worker decodes at a time, the others idle)."""
    if args.barrier:
        name = f"{engine}-{args.kv_type}"
        (args.barrier / f"ready-{name}").touch()
        while not (args.barrier / f"go-{name}").exists():
            time.sleep(0.01)


def pin(cpus: list[int] | None) -> None:
    """Pins every thread of this process (those to come inherit it) to cpus."""
    if cpus:
        for tid in os.listdir("/proc/self/task"):
            os.sched_setaffinity(int(tid), cpus)


def run_llama(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    sys.path.insert(0, str(REPO / "tests"))
    from tools.libllama import LibLlama

    cache = llama_cache(args)
    assert cache is not None
    deadline = time.monotonic() + 600
    while not args.ids.exists():  # a sweep's libeliza worker writes it
        if time.monotonic() > deadline:
            raise RuntimeError(f"no token ids in {args.ids}")
        time.sleep(0.05)
    ids_of = json.loads(args.ids.read_text())
    ctx_threads = args.context_threads or args.threads
    if ctx_threads == args.threads:
        pin(args.cpus)
    lib = LibLlama.load()
    if lib is None:
        raise RuntimeError("no llama.cpp build: python tests/tools/llama_cpp.py")
    n_ctx = max(args.prefill, len(ids_of["decode"])) + args.decode + 64
    with lib.model(args.model, args.threads, extra_bufts=args.llama_extra_bufts) as model, \
            model.context(n_ctx, args.prefill, cache[0], cache[1], args.llama_flash_attn) as ctx:
        ids = ids_of["prefill"]
        ctx.decode(ids[:8])  # warm-up: page in, first-touch buffers
        ctx.clear()
        c0, t0 = cpu_s(), time.perf_counter()
        ctx.decode(ids)
        prefill_s = time.perf_counter() - t0
        prefill_cpu = cpu_s() - c0

        # The decode prompt: more threads for a long one where asked, then
        # the decode at --threads on --cpus.
        ctx.clear()
        ctx.set_threads(args.threads, ctx_threads)
        t0 = time.perf_counter()
        ctx.decode(ids_of["decode"])
        context_prefill_s = time.perf_counter() - t0
        barrier(args, "llama.cpp")
        ctx.set_threads(args.threads, args.threads)
        pin(args.cpus)
        out: list[int] = []
        t0 = time.perf_counter()
        decode_s = decode_cpu = 0.0
        for _ in range(args.decode):
            tok = int(np.argmax(np.ctypeslib.as_array(ctx.last_logits())))
            if model.is_eog(tok):
                break
            out.append(tok)
            c1, t1 = cpu_s(), time.perf_counter()
            ctx.decode([tok])
            decode_s += time.perf_counter() - t1
            decode_cpu += cpu_s() - c1
        total_s = time.perf_counter() - t0
    return {
        "engine": "llama.cpp",
        "prefill_tok_s": args.prefill / prefill_s,
        "prefill_cpu_s": prefill_cpu,
        "decode_tok_s": len(out) / decode_s if decode_s else 0.0,
        "decode_wall_tok_s": len(out) / total_s if total_s else 0.0,
        "decode_cpu_ms": 1000 * decode_cpu / max(len(out), 1),
        "generated": len(out),
        "decode_context": len(ids_of["decode"]),
        "context_prefill_s": context_prefill_s,
        "rss_mb": peak_rss_mb(),
        "kv_type": f"{cache[0]}/{cache[1]}, flash attention {args.llama_flash_attn}",
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default"),
    }


# ---- driver --------------------------------------------------------------------------------

def worker_args(engine: str, args: argparse.Namespace, ids_file: Path | None,
                barrier_dir: Path | None = None) -> list[str]:
    """The command line of one engine's worker process (barrier_dir: a
    sweep's, where libeliza's worker also writes the token ids)."""
    cmd = [sys.executable, __file__, "--worker", engine, "--model", str(args.model),
           "--threads", str(args.threads), "--prefill", str(args.prefill), "--decode", str(args.decode),
           "--kv-type", args.kv_type, "--decode-context", str(args.decode_context)]
    if args.kv_type_v:
        cmd += ["--kv-type-v", args.kv_type_v]
    if args.cpus:
        cmd += ["--cpus", ",".join(map(str, args.cpus))]
    if engine == "libeliza" and args.gpu_layers:
        cmd += ["--gpu-layers", str(args.gpu_layers)]
        if args.gpu_device:
            cmd += ["--gpu-device", args.gpu_device]
    if barrier_dir is not None:
        assert ids_file is not None
        cmd += ["--barrier", str(barrier_dir), "--ids", str(ids_file)]
    if engine == "llama.cpp":
        assert ids_file is not None
        if barrier_dir is None:
            cmd += ["--ids", str(ids_file)]
        cmd += ["--llama-flash-attn", args.llama_flash_attn]
        if args.context_threads:
            cmd += ["--context-threads", str(args.context_threads)]
        cmd.append("--llama-extra-bufts" if args.llama_extra_bufts else "--no-llama-extra-bufts")
    return cmd


def child(engine: str, args: argparse.Namespace, ids_file: Path | None = None,
          env: dict[str, str] | None = None) -> dict[str, Any]:
    cmd = worker_args(engine, args, ids_file)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env={**os.environ, **(env or {})})
    if res.returncode != 0:
        raise RuntimeError(f"{engine} worker failed ({res.returncode}):\n{res.stderr[-3000:]}")
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("{")][-1]
    result: dict[str, Any] = json.loads(line)
    return result


def llama_envs(policy: str) -> list[dict[str, str]]:
    """The OpenMP wait policies llama.cpp runs under, one run each."""
    passive = {"OMP_WAIT_POLICY": "PASSIVE"}
    envs: dict[str, list[dict[str, str]]] = {"both": [{}, passive], "active": [{}], "passive": [passive]}
    return envs[policy]


def sweep_jobs(args: argparse.Namespace, cpus: list[int]) -> list[tuple[str, str, list[int]]]:
    """(engine, kv type, its CPUs) of one context of a sweep: libeliza for
    every type, llama.cpp for those it has, --threads CPUs each."""
    jobs = []
    for t in args.sweep.split(","):
        jobs.append(("libeliza", t))
        if llama_cache(argparse.Namespace(kv_type=t, kv_type_v=None)) is not None and not args.no_llama:
            jobs.append(("llama.cpp", t))
    n = args.threads
    if len(jobs) * n > len(cpus):
        raise SystemExit(f"a sweep of {len(jobs)} workers needs {len(jobs) * n} CPUs, has {len(cpus)}")
    return [(e, t, cpus[i * n:(i + 1) * n]) for i, (e, t) in enumerate(jobs)]


def sweep(args: argparse.Namespace) -> dict[str, dict[str, dict[str, Any]]]:
    """--sweep: for each context length, every worker evaluates its prompt at
    once, each pinned to its own CPUs; then they decode one at a time, the
    others idle (so the decode figures do not share the memory bus)."""
    cpus = args.sweep_cpus or sorted(os.sched_getaffinity(0))
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for n_ctx in (int(c) for c in args.sweep_contexts.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            bdir, ids_file = Path(tmp), Path(tmp) / "ids.json"
            procs = []
            for engine, kv, mine in sweep_jobs(args, cpus):
                wargs = argparse.Namespace(**{**vars(args), "kv_type": kv, "kv_type_v": None, "cpus": mine,
                                              "decode_context": n_ctx, "context_threads": 0})
                cmd = worker_args(engine, wargs, ids_file, bdir)
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                procs.append((engine, kv, proc))
            t0 = time.perf_counter()
            for engine, kv, proc in procs:
                while not (bdir / f"ready-{engine}-{kv}").exists():
                    if proc.poll() is not None:
                        raise RuntimeError(f"{engine} {kv} worker failed:\n{proc.communicate()[1][-3000:]}")
                    time.sleep(0.05)
            print(f"context {n_ctx}: prompts evaluated in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            row = results.setdefault(str(n_ctx), {})
            for engine, kv, proc in procs:
                (bdir / f"go-{engine}-{kv}").touch()
                out, err = proc.communicate(timeout=1800)
                if proc.returncode != 0:
                    raise RuntimeError(f"{engine} {kv} worker failed ({proc.returncode}):\n{err[-3000:]}")
                res = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
                res.pop("ids", None)
                row[f"{engine} {kv}"] = res
                print(f"context {n_ctx}: {engine:10s} {kv:7s} decode {res['decode_tok_s']:7.1f} tok/s "
                      f"(prompt of {res['decode_context']} in {res['context_prefill_s']:.1f} s)",
                      file=sys.stderr)
    return results


def print_sweep(args: argparse.Namespace, results: dict[str, dict[str, dict[str, Any]]]) -> None:
    types = args.sweep.split(",")
    print(f"model {args.model.name}, decode tok/s of {args.decode} greedy tokens after N tokens of context, "
          f"{args.threads} threads each; llama.cpp flash attention {args.llama_flash_attn}")
    print(f"{'context':>8s} " + " ".join(f"{t:>16s}" for t in types))
    for n_ctx, row in results.items():
        ours = [row[f"libeliza {t}"]["decode_tok_s"] for t in types]
        peer = [row.get(f"llama.cpp {t}", {}).get("decode_tok_s") for t in types]
        print(f"{n_ctx:>8s} " + " ".join(f"{'libeliza':>8s} {o:7.1f}" for o in ours))
        print(f"{'':>8s} " + " ".join(f"{'llama':>8s} {p:7.1f}" if p else f"{'':>16s}" for p in peer))
        print(f"{'':>8s} " + " ".join(f"{'ratio':>8s} {o / p:6.2f}x" if p else f"{'':>16s}"
                                      for o, p in zip(ours, peer, strict=True)))
        if "f16" in types:
            base = row["libeliza f16"]["decode_tok_s"]
            print(f"{'':>8s} " + " ".join(f"{'vs f16':>8s} {o / base:6.2f}x" for o in ours))


def best(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out = dict(rounds[0])
    for key in ("prefill_tok_s", "decode_tok_s", "decode_wall_tok_s"):
        out[key] = max(r[key] for r in rounds)
    out["rss_mb"] = min(r["rss_mb"] for r in rounds)
    if "profile_ms_per_token" in out:
        fastest = max(rounds, key=lambda r: r["decode_tok_s"])
        out["profile_ms_per_token"] = fastest["profile_ms_per_token"]
        out["prefill_profile_ms"] = max(rounds, key=lambda r: r["prefill_tok_s"])["prefill_profile_ms"]
    return out


def round_ratios(ours: list[dict[str, Any]], peer: list[dict[str, Any]]) -> dict[str, float]:
    """Medians over the rounds of libeliza / llama.cpp, speed and CPU time
    (peer CPU / ours: above 1 is libeliza ahead), each round's llama.cpp
    figures the better of its wait policies' runs."""
    import statistics

    per = len(peer) // len(ours)
    out: dict[str, list[float]] = {"prefill": [], "decode": [], "prefill_cpu": [], "decode_cpu": []}
    for r, a in enumerate(ours):
        b = peer[r * per:(r + 1) * per]
        out["prefill"].append(a["prefill_tok_s"] / max(x["prefill_tok_s"] for x in b))
        out["decode"].append(a["decode_tok_s"] / max(x["decode_tok_s"] for x in b))
        out["prefill_cpu"].append(min(x["prefill_cpu_s"] for x in b) / a["prefill_cpu_s"])
        out["decode_cpu"].append(min(x["decode_cpu_ms"] for x in b) / a["decode_cpu_ms"])
    return {k: statistics.median(v) for k, v in out.items()}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefill", type=int, default=256)
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    kv_types = ("f32", "f16", "q8_0", "q4_0", "tbq4_0", "tbq3_0")
    ap.add_argument("--kv-type", choices=kv_types, default="f32",
                    help="the KV cache type (llama.cpp's type_k and type_v where it has it)")
    ap.add_argument("--kv-type-v", choices=kv_types, default=None,
                    help="the value cache type when it differs")
    ap.add_argument("--decode-context", type=int, default=0, metavar="N",
                    help="decode after a prompt of N tokens; 0: a short prompt")
    ap.add_argument("--cpus", type=lambda v: [int(c) for c in v.split(",")], default=None, metavar="LIST",
                    help="pin both engines' decode to these CPUs, e.g. 0,1")
    ap.add_argument("--context-threads", type=int, default=0, metavar="N",
                    help="llama.cpp's threads (unpinned) for the --decode-context prompt; 0: --threads")
    ap.add_argument("--gpu-layers", type=int, default=0, metavar="N",
                    help="libeliza's layers on the GPU (-1 = all; 0 = the CPU, the default)")
    ap.add_argument("--gpu-device", default=None, metavar="NAME", help="the Vulkan device for --gpu-layers")
    ap.add_argument("--no-llama", action="store_true", help="measure libeliza only")
    ap.add_argument("--llama-flash-attn", choices=("on", "off", "auto"), default="on",
                    help="llama.cpp's flash attention (on: a quantized V cache needs it)")
    ap.add_argument("--llama-wait", choices=("both", "active", "passive"), default="both",
                    help="OpenMP wait policies llama.cpp runs under, the better one counts")
    ap.add_argument("--llama-extra-bufts", action=argparse.BooleanOptionalAction, default=True,
                    help="let llama.cpp use its extra buffer types (repacked kernels)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--worker", choices=("libeliza", "llama.cpp"), help=argparse.SUPPRESS)
    ap.add_argument("--sweep", default=None, metavar="TYPES",
                    help="KV types to decode with at each --sweep-contexts, e.g. f16,q8_0,tbq4_0 (see below)")
    ap.add_argument("--sweep-contexts", default="512,4096,16384", metavar="N,N")
    ap.add_argument("--sweep-cpus", default=None, metavar="LIST",
                    help="CPUs for the sweep's workers, two each (default: all of this process's)")
    ap.add_argument("--ids", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--barrier", type=Path, default=None, help=argparse.SUPPRESS)
    return ap


def main() -> int:
    if any(a == "--draft" or a.startswith("--draft=") for a in sys.argv[1:]):
        sys.path.insert(0, str(REPO / "bench"))
        import llm_draft  # type: ignore[import-not-found]

        return int(llm_draft.main(sys.argv[1:], default_model))
    args = parser().parse_args()
    args.model = args.model or default_model()

    if args.worker:
        result = run_eliza(args) if args.worker == "libeliza" else run_llama(args)
        print(json.dumps(result))
        return 0

    if args.sweep:
        if args.sweep_cpus:
            args.sweep_cpus = [int(c) for c in args.sweep_cpus.split(",")]
        swept = sweep(args)
        if args.json:
            print(json.dumps(swept, indent=2))
        else:
            print_sweep(args, swept)
        return 0

    engines = ["libeliza"]
    if args.no_llama or args.gpu_layers:
        pass
    elif llama_cache(args) is None:
        print(f"llama.cpp has no {args.kv_type_v or args.kv_type} cache: libeliza only", file=sys.stderr)
    else:
        engines.append("llama.cpp")
    runs: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
    with tempfile.TemporaryDirectory() as tmp:
        ids_file = Path(tmp) / "ids.json"
        for r in range(args.rounds):
            for e in engines:
                for env in llama_envs(args.llama_wait) if e == "llama.cpp" else [{}]:
                    runs[e].append(child(e, args, ids_file, env))
                    last = runs[e][-1]
                    wait = f" {env['OMP_WAIT_POLICY'].lower()}" if env else ""
                    print(f"round {r + 1}: {e + wait:18s} prefill {last['prefill_tok_s']:7.1f} tok/s "
                          f"({last['prefill_cpu_s']:.2f} s CPU)  decode {last['decode_tok_s']:6.1f} tok/s "
                          f"({last['decode_cpu_ms']:.1f} ms CPU/token) after {last['decode_context']} tokens "
                          f"({last['context_prefill_s']:.1f} s)", file=sys.stderr)
                if e == "libeliza" and not ids_file.exists():
                    # llama.cpp evaluates the very token ids libeliza did.
                    ids_file.write_text(json.dumps(runs[e][-1]["ids"]))
        for rounds in runs.values():
            for run in rounds:
                run.pop("ids", None)
    results = {e: best(runs[e]) for e in engines}
    if args.json:
        print(json.dumps(results, indent=2))
        return 0

    kv = args.kv_type + (f"/{args.kv_type_v}" if args.kv_type_v else "")
    print(f"model {args.model.name}, {args.threads} threads, prefill {args.prefill} tokens, "
          f"decode {args.decode} tokens after {results['libeliza']['decode_context']} tokens of context, "
          f"best of {args.rounds}, KV cache {kv} (libeliza {results['libeliza']['kv_mb']:.1f} MB"
          + (f"; llama.cpp {results['llama.cpp']['kv_type']}" if "llama.cpp" in results else "")
          + f"), libeliza backend {results['libeliza']['backend']}")
    print(f"{'engine':12s} {'prefill tok/s':>14s} {'decode tok/s':>13s} {'peak RSS MB':>12s}")
    for e in engines:
        res = results[e]
        print(f"{e:12s} {res['prefill_tok_s']:14.1f} {res['decode_tok_s']:13.1f} {res['rss_mb']:12.0f}")
    if "llama.cpp" in results:
        a, b = results["libeliza"], results["llama.cpp"]
        print(f"{'ratio':12s} {a['prefill_tok_s'] / b['prefill_tok_s']:13.2f}x "
              f"{a['decode_tok_s'] / b['decode_tok_s']:12.2f}x {a['rss_mb'] / b['rss_mb']:11.2f}x   "
              "(libeliza / llama.cpp; RSS lower is better)")
        med = round_ratios(runs["libeliza"], runs["llama.cpp"])
        print(f"{'median ratio':12s} {med['prefill']:13.2f}x {med['decode']:12.2f}x   "
              "(per round, libeliza / llama.cpp)")
        print(f"{'median CPU':12s} {med['prefill_cpu']:13.2f}x {med['decode_cpu']:12.2f}x   "
              "(per round, llama.cpp CPU time / libeliza's)")
    if results["libeliza"]["backend"] != "cpu":
        # The GPU step is one recorded pass: bench/bench_gpu_llm.c has its kernel timestamps.
        return 0
    phases: list[tuple[str, dict[str, float]]] = [
        ("libeliza decode, ms per token", results["libeliza"]["profile_ms_per_token"]),
        (f"libeliza prefill of {args.prefill} tokens, ms", results["libeliza"]["prefill_profile_ms"]),
    ]
    for title, prof in phases:
        total = sum(prof.values())
        print(f"{title} ({total:.2f} ms in the forward pass):")
        for k, v in sorted(prof.items(), key=lambda kv: -kv[1]):
            print(f"  {k:10s} {v:8.3f}  {100 * v / total if total else 0:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
