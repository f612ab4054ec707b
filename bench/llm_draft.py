#!/usr/bin/env python3
"""Speculative decoding speed: libeliza with a drafter against libeliza
without one and against llama.cpp's prompt-lookup decoding (its
``llama-lookup`` example), same GGUF, same threads, same prompts, one run.

    python bench/llm.py --draft ngram [--model M] [--threads 2] [--decode 128]
                        [--rounds 3] [--draft-max 8] [--tasks summarise,rewrite,extract]

The prompts are input-grounded, the case drafting from the context is for:
summarise, rewrite and extract from bench/data/spec_report.txt (595 Gemma
tokens), in Gemma's chat format. For each task and round, in turn: libeliza
plain greedy decoding, libeliza with the drafter (greedy: the same text,
checked), and llama-lookup at temperature 0 (its n-gram cache of the
context, LLAMA_NGRAM_MIN..MAX; drafting up to --draft-max tokens), run with
OpenMP's default wait policy and with OMP_WAIT_POLICY=PASSIVE, its better
figure kept (spinning threads collapse on a loaded machine). The best round
of each counts. Prints decode tokens/s (generated tokens over decoding
time, drafting included, prompt excluded), the ratios, the share of
drafted tokens accepted, and the ratios of CPU time per decoded token
(plain libeliza / drafting, llama-lookup / drafting; llama-lookup's from a
run decoding --decode tokens less one decoding 1, OMP_WAIT_POLICY=PASSIVE;
read them with --threads 1, where no worker thread waits).

llama-lookup comes from the llama.cpp build of tests/tools/llama_cpp.py.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TEXT = REPO / "bench" / "data" / "spec_report.txt"
TASKS = {
    "summarise": "Summarise the following report in five sentences.",
    "rewrite": "Rewrite the following report in plain, simple English for a newsletter. "
    "Keep every fact, name, date and number.",
    "extract": "List every person, place, date and amount of money in the following report, "
    "one per line, each with the sentence of the report it comes from.",
}


def prompt(task: str) -> str:
    return f"<start_of_turn>user\n{TASKS[task]}\n\n{TEXT.read_text()}<end_of_turn>\n<start_of_turn>model\n"


def llama_lookup() -> Path | None:
    sys.path.insert(0, str(REPO / "tests"))
    from tools.llama_cpp import cache_dir

    binary = cache_dir() / "build" / "bin" / "llama-lookup"
    return binary if binary.is_file() else None


def run_eliza(llm: Any, task: str, n: int) -> dict[str, Any]:
    # CPU time of decoding: the whole generation's less that of the prompt
    # and the first token alone (a figure the machine's other load moves
    # less than the wall clock; meaningful with --threads 1, where no
    # worker thread waits).
    c0 = time.process_time()
    llm.generate(prompt(task), max_tokens=1, temperature=0.0)
    c1 = time.process_time()
    text = llm.generate(prompt(task), max_tokens=n, temperature=0.0)
    c2 = time.process_time()
    s = llm.last_stats
    return {
        "tok_s": s.decode_tokens_per_s,
        "cpu_ms_per_tok": 1e3 * ((c2 - c1) - (c1 - c0)) / max(s.generated_tokens - 1, 1),
        "generated": s.generated_tokens,
        "drafted": s.draft_tokens,
        "accepted": s.draft_accepted,
        "rounds": s.draft_rounds,
        "text": text,
    }


def children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_lookup(binary: Path, args: argparse.Namespace, task: str, passive: bool, n: int) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(prompt(task))
    env = {**os.environ, "LD_LIBRARY_PATH": str(binary.parent)}
    if passive:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    cmd = [str(binary), "-m", str(args.model), "-f", f.name, "-n", str(n), "-t", str(args.threads),
           "-c", "2048", "--temp", "0", "--spec-draft-n-max", str(args.draft_max)]
    c0 = children_cpu_s()
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    finally:
        os.unlink(f.name)
    cpu_s = children_cpu_s() - c0
    out = res.stdout + res.stderr
    dec = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds", out)
    drafted = re.search(r"n_drafted\s+=\s+(\d+)", out)
    accepted = re.search(r"n_accept\s+=\s+(\d+)", out)
    if res.returncode != 0 or not (dec and drafted and accepted):
        raise RuntimeError(f"llama-lookup failed ({res.returncode}):\n{out[-2000:]}")
    n, secs = int(dec.group(1)), float(dec.group(2))
    return {"tok_s": n / secs, "generated": n, "drafted": int(drafted.group(1)),
            "accepted": int(accepted.group(1)), "cpu_s": cpu_s}


def main(argv: list[str] | None = None, default_model: Callable[[], Path] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draft", default="ngram", help="libeliza's drafter (eliza.LLM's draft=)")
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--draft-max", type=int, default=15)
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--no-llama", action="store_true", help="measure libeliza only")
    args = ap.parse_args(argv)
    if default_model is None:
        sys.path.insert(0, str(REPO / "bench"))
        default_model = importlib.import_module("llm").default_model
    args.model = args.model or default_model()
    if "ELIZA_LIBRARY" not in os.environ and (REPO / "build" / "libeliza.so").is_file():
        os.environ["ELIZA_LIBRARY"] = str(REPO / "build" / "libeliza.so")
    sys.path.insert(0, str(REPO / "sdk"))
    import eliza

    binary = None if args.no_llama else llama_lookup()
    if not args.no_llama and binary is None:
        print("llama-lookup is not built: python tests/tools/llama_cpp.py", file=sys.stderr)
        return 1
    tasks = args.tasks.split(",")
    best: dict[tuple[str, str], dict[str, Any]] = {}
    cpu_runs: dict[tuple[str, str], list[dict[str, Any]]] = {}

    def keep(key: tuple[str, str], r: dict[str, Any]) -> None:
        cpu_runs.setdefault(key, []).append(r)
        if key not in best or r["tok_s"] > best[key]["tok_s"]:
            best[key] = r

    common = {"n_threads": args.threads, "context_size": 2048}
    with eliza.LLM(args.model, **common) as plain, eliza.LLM(
        args.model, draft=args.draft, draft_max_tokens=args.draft_max, **common
    ) as spec:
        for task in tasks:  # warm-up: page the weights in
            plain.generate(prompt(task), max_tokens=4, temperature=0.0)
        for rnd in range(args.rounds):
            for task in tasks:
                t0 = time.perf_counter()
                a = run_eliza(plain, task, args.decode)
                b = run_eliza(spec, task, args.decode)
                if a["text"] != b["text"]:
                    raise AssertionError(f"{task}: greedy text differs with draft={args.draft}")
                keep((task, "plain"), a)
                keep((task, "draft"), b)
                line = f"round {rnd + 1} {task:9s}: plain {a['tok_s']:6.1f}  draft {b['tok_s']:6.1f} tok/s"
                if binary is not None:
                    for passive in (False, True):
                        c = run_lookup(binary, args, task, passive, args.decode)
                        if passive:
                            # CPU per decoded token: less a run that decodes one token.
                            one = run_lookup(binary, args, task, passive, 1)
                            cpu = c["cpu_s"] - one["cpu_s"]
                            c["cpu_ms_per_tok"] = 1e3 * cpu / max(c["generated"] - 1, 1)
                        keep((task, "lookup"), c)
                    line += f"  llama-lookup {best[(task, 'lookup')]['tok_s']:6.1f}"
                print(f"{line}  ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)

    print(f"model {args.model.name}, {args.threads} threads, {args.decode} tokens greedy, "
          f"draft={args.draft} (at most {args.draft_max} per pass), best of {args.rounds}; decode tok/s")
    head = f"{'task':10s} {'plain':>7s} {'draft':>7s} {'x plain':>8s} {'accepted':>9s} {'CPU x plain':>12s}"
    if binary is not None:
        head += f" {'lookup':>7s} {'accepted':>9s} {'x lookup':>9s} {'CPU x lookup':>13s}"
    print(head)
    for task in tasks:
        a, b = best[(task, "plain")], best[(task, "draft")]
        acc = b["accepted"] / b["drafted"] if b["drafted"] else 0.0
        cpu = min(r["cpu_ms_per_tok"] for r in cpu_runs[(task, "plain")]) / min(
            r["cpu_ms_per_tok"] for r in cpu_runs[(task, "draft")]
        )
        row = (f"{task:10s} {a['tok_s']:7.1f} {b['tok_s']:7.1f} {b['tok_s'] / a['tok_s']:7.2f}x "
               f"{100 * acc:8.0f}% {cpu:11.2f}x")
        if binary is not None:
            c = best[(task, "lookup")]
            cacc = c["accepted"] / c["drafted"] if c["drafted"] else 0.0
            lcpu = min(r["cpu_ms_per_tok"] for r in cpu_runs[(task, "lookup")] if "cpu_ms_per_tok" in r)
            dcpu = min(r["cpu_ms_per_tok"] for r in cpu_runs[(task, "draft")])
            row += (f" {c['tok_s']:7.1f} {100 * cacc:8.0f}% {b['tok_s'] / c['tok_s']:8.2f}x "
                    f"{lcpu / dcpu:12.2f}x")
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
