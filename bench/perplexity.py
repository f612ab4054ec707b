#!/usr/bin/env python3
"""Perplexity of Gemma 3 270M with each KV cache type, beside llama.cpp's
llama-perplexity on the same text, same chunks, same model.

    python bench/perplexity.py [--model gemma-3-270m-q4_k_m.gguf] [--ctx 512]
                               [--chunks 16] [--threads 2] [--no-kl]
                               [--types f32,f16,q8_0,q4_0,tbq4_0,tbq3_0,q8_0/f16,...]
                               [--llama f16,q8_0,q4_0] [--llama-args ARGS]
                               [--json out.json]

The text: the Python 3.11 tutorial, real English prose (its reST sources in
Debian's python3.11-doc, /usr/share/doc/python3.11/html/_sources/tutorial,
installed with apt-get when missing), with code blocks, doctest lines,
directives and markup taken out (prose_text()). Nothing of it is committed.

For each libeliza cache type (T, or K/V for keys of type K and values of
type V): the perplexity of the first --chunks chunks of --ctx tokens by
llama-perplexity's method (LLM.perplexity's chunks and scoring), the KV
bytes per token, and the mean KL divergence of the next-token distribution
from the F32 cache's at every scored position, with its standard error. The
types run chunk by chunk beside an F32 cache (compare_caches); --no-kl runs
each type's LLM.perplexity alone instead.
llama.cpp: llama-perplexity -c CTX -b CTX --chunks N -fa on -ctk T -ctv T
(flash attention on, which a quantized V needs there), from the build that
tests/tools/llama_cpp.py makes ($ELIZA_LLAMA_CPP_DIR, default
~/.cache/eliza/llama.cpp-0.3.36); skipped when that build is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SOURCES = Path("/usr/share/doc/python3.11/html/_sources")
TUTORIAL = SOURCES / "tutorial"
CHAPTERS = ("appetite", "interpreter", "introduction", "controlflow", "datastructures", "modules",
            "inputoutput", "errors", "classes", "stdlib", "stdlib2", "venv", "whatnow", "interactive",
            "floatingpoint", "appendix")
# --text long: the tutorial, then the FAQ, the HOWTOs and the language
# reference of the same package (each folder's pages in name order, its
# index left out): about 5x the tutorial's tokens, enough for 64+ chunks of
# 512 or 16 of 2048, with the tutorial's chunks first and unchanged.
MORE = ("faq", "howto", "reference")
TYPES = ("f32", "f16", "q8_0", "q4_0", "tbq4_0", "tbq3_0")


def ensure_tutorial() -> Path:
    """The tutorial's sources, from Debian's python3.11-doc (installed if absent)."""
    if not TUTORIAL.is_dir():
        subprocess.run(["apt-get", "install", "-y", "-q", "python3.11-doc"], check=True)
    return TUTORIAL


_ROLE = re.compile(r":[a-z:]+:`(?:[^`<]*<)?([^`>]*)>?`")
_LINK = re.compile(r"`([^`<]+?)\s*<[^>]*>`_+")


def source_files(text: str = "tutorial") -> list[Path]:
    """The reST pages of --text `text` ("tutorial" or "long"), in order."""
    root = ensure_tutorial()
    files = [root / f"{name}.rst.txt" for name in CHAPTERS]
    if text == "long":
        for folder in MORE:
            files += sorted(p for p in (SOURCES / folder).glob("*.rst.txt") if p.name != "index.rst.txt")
    return files


def prose_text(text: str = "tutorial") -> str:
    """The pages as plain paragraphs: literal blocks (after '::'), doctest
    and directive lines, section underlines and inline markup removed."""
    paragraphs: list[str] = []
    for path in source_files(text):
        lines = path.read_text(encoding="utf-8").splitlines()
        para: list[str] = []
        literal = False
        for raw in [*lines, ""]:
            line = raw.rstrip()
            if literal:
                if line and not line[0].isspace():
                    literal = False
                else:
                    continue
            stripped = line.strip()
            skip = (stripped.startswith((">>>", "...", ".. ", ":")) or raw.startswith(("   ", "\t"))
                    or (stripped and set(stripped) <= set("=-*~^#+\"'`")))
            if not stripped or skip:
                if para:
                    paragraphs.append(" ".join(para))
                    para = []
                continue
            if stripped.endswith("::"):
                literal = True
                stripped = stripped[:-1] if not stripped.endswith(" ::") else stripped[:-3]
            text = _LINK.sub(r"\1", _ROLE.sub(r"\1", stripped))
            para.append(text.replace("``", "").replace("**", ""))
        if para:
            paragraphs.append(" ".join(para))
    return "\n\n".join(p for p in paragraphs if len(p.split()) >= 8) + "\n"


def default_model() -> Path:
    return Path.home() / ".cache" / "eliza" / "models" / "gemma-3-270m-q4_k_m.gguf"


def llama_perplexity_bin() -> Path | None:
    root = Path(os.environ.get("ELIZA_LLAMA_CPP_DIR", Path.home() / ".cache" / "eliza" / "llama.cpp-0.3.36"))
    exe = root / "build" / "bin" / "llama-perplexity"
    return exe if exe.is_file() else None


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(-1, keepdims=True)
    out: np.ndarray = x - np.log(np.exp(x).sum(-1, keepdims=True))
    return out


def eliza_perplexity(model: Path, text: str, kv_type: str, ctx: int, chunks: int,
                     threads: int, kv_type_v: str | None = None) -> dict[str, Any]:
    import eliza

    with eliza.LLM(model, n_threads=threads, context_size=ctx, n_batch=ctx, kv_type=kv_type,
                   kv_type_v=kv_type_v) as llm:
        ids = llm.tokenize(text, special=False)[: chunks * ctx]
        clipped = llm.detokenize(ids)
        t0 = time.perf_counter()
        result = llm.perplexity(clipped, n_ctx=ctx)
        seconds = time.perf_counter() - t0
        info = llm.info
    return {"ppl": result.ppl, "ppl_error": result.ppl_error, "chunks": result.n_chunks,
            "scored": len(result.nll), "kv_bytes_per_token": info["kv_bytes_per_token"],
            "kv_bytes": info["kv_bytes"], "seconds": seconds, "nll": result.nll}


def paired(nll: np.ndarray, base: np.ndarray) -> tuple[float, float]:
    """Mean of the per-token difference nll - base (the log of the
    perplexity ratio over the same tokens) and its standard error: the
    ratio's own uncertainty, far smaller than either perplexity's."""
    d = nll.astype(np.float64) - base.astype(np.float64)
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))


def prefix_report(results: dict[str, Any], ctx: int, prefixes: list[int]) -> dict[str, Any]:
    """Each type against F16 over the first n chunks, for each n: the
    perplexity ratio, with the paired standard error (in %)."""
    per_chunk = ctx - 1 - ctx // 2
    base = results["f16"]["nll"]
    out: dict[str, Any] = {}
    for n in prefixes:
        if n > results["f16"]["chunks"]:
            continue
        row = {}
        for t, r in results.items():
            if t == "f16":
                continue
            mean, err = paired(r["nll"][: n * per_chunk], base[: n * per_chunk])
            row[t] = {"pct": 100 * (np.exp(mean) - 1), "pct_error": 100 * err}
            print(f"libeliza  first {n:3d} chunks {t:7s} vs f16: "
                  f"{row[t]['pct']:+.3f}% +/- {row[t]['pct_error']:.3f}%")
        out[str(n)] = row
    return out


def cache_spec(spec: str) -> tuple[str, str]:
    """A --types entry: "T" (keys and values T) or "K/V"."""
    k, _, v = spec.partition("/")
    return k, v or k


def open_cache(model: Path, spec: str, ctx: int, threads: int) -> Any:
    """A handle whose eval of a chunk splits it where LLM.perplexity's
    does (eliza_llm_token_nll: the unscored half, then the rest), so that
    the key smoothing is fitted on the same first batch."""
    import eliza

    k, v = cache_spec(spec)
    return eliza.LLM(model, n_threads=threads, context_size=ctx, n_batch=ctx // 2, kv_type=k, kv_type_v=v)


def compare_caches(model: Path, text: str, specs: list[str], ctx: int, chunks: int, threads: int,
                   opener: Any = open_cache) -> dict[str, Any]:
    """Each cache of `specs` against the F32 cache, chunk by chunk in one
    pass: llama-perplexity's chunks (LLM.perplexity: BOS first, each chunk
    from an empty cache, its second half scored), the per-token NLL of
    every scored position (the perplexity), and the KL(F32 || spec) of the
    next-token distribution at each of them. F32 is the reference, so it is
    evaluated once whether or not it is in `specs`."""
    handles = {s: opener(model, s, ctx, threads) for s in dict.fromkeys(["f32", *specs])}
    try:
        base = handles["f32"]
        ids = base.tokenize(text, add_bos=True, special=False)
        n = min(chunks, len(ids) // ctx)
        first, bos = ctx // 2, int(base.info["bos"])
        nll: dict[str, list[np.ndarray]] = {s: [] for s in handles}
        kl: dict[str, list[np.ndarray]] = {s: [] for s in handles}
        seconds = dict.fromkeys(handles, 0.0)
        for c in range(n):
            chunk = list(ids[c * ctx:(c + 1) * ctx])
            chunk[0] = bos
            target = np.asarray(chunk[first + 1:])
            ref = None
            for s, h in handles.items():
                t0 = time.perf_counter()
                logits = h.logits(chunk, all_positions=True)[first:ctx - 1]
                seconds[s] += time.perf_counter() - t0
                # log-softmax in float64, 64 rows at a time (a row is 262,144 values)
                lp = np.concatenate([log_softmax(logits[r:r + 64].astype(np.float64)).astype(np.float32)
                                     for r in range(0, len(logits), 64)])
                del logits
                nll[s].append(-lp[np.arange(len(target)), target].astype(np.float64))
                if ref is None:
                    ref = lp
                    kl[s].append(np.zeros(len(target)))
                    continue
                kl[s].append(np.concatenate([
                    (np.exp(ref[r:r + 64].astype(np.float64))
                     * (ref[r:r + 64].astype(np.float64) - lp[r:r + 64])).sum(-1)
                    for r in range(0, len(lp), 64)]))
        out: dict[str, Any] = {}
        for s, h in handles.items():
            x, d = np.concatenate(nll[s]), np.concatenate(kl[s])
            mean = float(x.mean())
            ppl = float(np.exp(mean))
            out[s] = {"ppl": ppl, "ppl_error": float(x.std() / np.sqrt(len(x) - 1)) * ppl,
                      "chunks": n, "scored": len(x), "kv_bytes_per_token": h.info["kv_bytes_per_token"],
                      "kv_bytes": h.info["kv_bytes"], "seconds": seconds[s], "nll": x,
                      "kl_vs_f32": float(d.mean()), "kl_error": float(d.std(ddof=1) / np.sqrt(len(d)))}
        return out
    finally:
        for h in handles.values():
            h.close()


def llama_cpp_perplexity(exe: Path, model: Path, text_file: Path, kv_type: str, ctx: int, chunks: int,
                         threads: int, extra: Sequence[str] = ()) -> dict[str, Any]:
    cmd = [str(exe), "-m", str(model), "-f", str(text_file), "-c", str(ctx), "-b", str(ctx),
           "--chunks", str(chunks), "-t", str(threads), "-fa", "on", "-ctk", kv_type, "-ctv", kv_type, *extra]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=3600,
                         env={**os.environ, "LD_LIBRARY_PATH": str(exe.parent)})
    seconds = time.perf_counter() - t0
    out = res.stdout + res.stderr
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
    if res.returncode != 0 or not m:
        raise RuntimeError(f"llama-perplexity {kv_type} failed ({res.returncode}):\n{out[-3000:]}")
    return {"ppl": float(m.group(1)), "ppl_error": float(m.group(2)), "seconds": seconds,
            "command": " ".join(cmd)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=default_model())
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-kl", action="store_true",
                    help="each type's LLM.perplexity alone, without the F32 cache beside it and the KL")
    ap.add_argument("--types", default=",".join(TYPES))
    ap.add_argument("--llama", default="f16,q8_0,q4_0", help="llama.cpp cache types ('' for none)")
    ap.add_argument("--llama-args", default="",
                    help="more llama-perplexity arguments, e.g. '-nr' (no weight repacking, which faults on "
                         "some VMs)")
    ap.add_argument("--text", choices=("tutorial", "long"), default="tutorial",
                    help="the tutorial (about 8k tokens), or it followed by the FAQ, HOWTOs and reference")
    ap.add_argument("--prefixes", default="",
                    help="also compare each type with F16 over the first N chunks, e.g. 16,32,64")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--nll", type=Path,
                    help="save each type's per-token NLL (.npz), to compare runs token by token")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "sdk"))

    text = prose_text(args.text)
    text_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"eliza_ppl_{args.text}.txt"
    text_file.write_text(text, encoding="utf-8")
    types = [t for t in args.types.split(",") if t]
    results: dict[str, Any] = {"model": str(args.model), "text": args.text, "ctx": args.ctx,
                               "chunks": args.chunks, "machine": platform.machine(), "eliza": {},
                               "llama.cpp": {}}
    if args.no_kl:
        for t in types:
            k, v = cache_spec(t)
            results["eliza"][t] = eliza_perplexity(args.model, text, k, args.ctx, args.chunks, args.threads,
                                                   v)
    else:
        results["eliza"] = compare_caches(args.model, text, types, args.ctx, args.chunks, args.threads)
        results["eliza"] = {t: results["eliza"][t] for t in types}
    for t, r in results["eliza"].items():
        kl = f"  KL vs F32 {r['kl_vs_f32']:.5f} +/- {r['kl_error']:.5f}" if "kl_vs_f32" in r else ""
        print(f"libeliza  {t:11s} PPL {r['ppl']:.4f} +/- {r['ppl_error']:.4f}  "
              f"{r['kv_bytes_per_token']:6d} B/token  ({r['chunks']} chunks, {r['seconds']:.0f} s){kl}",
              flush=True)
    exe = llama_perplexity_bin()
    llama_types = [t for t in args.llama.split(",") if t]
    if llama_types and exe is None:
        print("llama.cpp: no llama-perplexity build (tests/tools/llama_cpp.py makes one); skipped")
    for t in llama_types if exe is not None else []:
        assert exe is not None
        results["llama.cpp"][t] = llama_cpp_perplexity(exe, args.model, text_file, t, args.ctx, args.chunks,
                                                       args.threads, shlex.split(args.llama_args))
        r = results["llama.cpp"][t]
        print(f"llama.cpp {t:7s} PPL {r['ppl']:.4f} +/- {r['ppl_error']:.4f}  ({r['seconds']:.0f} s)",
              flush=True)
    base = results["eliza"].get("f16", {}).get("ppl")
    if base:
        for t, r in results["eliza"].items():
            mean, err = paired(r["nll"], results["eliza"]["f16"]["nll"])
            print(f"libeliza  {t:11s} vs libeliza f16: {100 * (r['ppl'] / base - 1):+.3f}% "
                  f"(paired: {100 * np.expm1(mean):+.3f}% +/- {100 * err:.3f}%)")
        prefixes = [int(n) for n in args.prefixes.split(",") if n]
        if prefixes:
            results["prefixes"] = prefix_report(results["eliza"], args.ctx, prefixes)
        for t, r in results["llama.cpp"].items():
            ours = results["eliza"].get(t, {}).get("ppl")
            if ours:
                print(f"libeliza  {t:7s} vs llama.cpp {t}: {100 * (ours / r['ppl'] - 1):+.3f}%")
    if args.nll:
        np.savez(args.nll, **{t: r["nll"] for t, r in results["eliza"].items()})
    for r in results["eliza"].values():
        r.pop("nll")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, threads {args.threads}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
