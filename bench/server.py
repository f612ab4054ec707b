"""A bounded load test of ``eliza serve`` on loopback: N short completion
requests (default 200, 4 tokens each, greedy) from C concurrent clients
(default 4), then the latency percentiles and the throughput. It starts its
own server on a free loopback port unless ``--url`` names one (loopback
only), and stops by itself.

The model answers one request at a time (the ABI's rule for a handle), so
latency grows with the clients waiting in the queue: p50 is about
C x (one request's time).

Usage::

    python bench/server.py [--model PATH] [--requests 200] [--clients 4] [--tokens 4]
                           [--threads 2] [--url http://127.0.0.1:PORT] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import httpx

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _start(model: str, threads: int) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "sdk"), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, "-m", "eliza", "serve", "--llm", f"bench={model}", "--port", str(port),
         "--threads", str(threads), "--ctx", "512"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(url + "/v1/models", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("eliza serve did not start")


def _percentile(sorted_values: list[float], q: float) -> float:
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a GGUF model (default: the cached gemma3-270m)")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--url", help="a running eliza serve on loopback (its model must be named 'bench')")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    if args.url and urlparse(args.url).hostname not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit("loopback only: --url must be http://127.0.0.1:PORT")
    proc = None
    if args.url:
        url = args.url.rstrip("/")
    else:
        sys.path.insert(0, str(REPO / "sdk"))
        from eliza import models

        model = args.model or str(models.path("gemma3-270m", install=False))
        proc, url = _start(model, args.threads)
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    todo = iter(range(args.requests))

    def client() -> None:
        with httpx.Client(timeout=120) as http:
            while True:
                with lock:
                    i = next(todo, None)
                if i is None:
                    return
                body = {"model": "bench", "prompt": f"Request {i}: the weather today is",
                        "max_tokens": args.tokens, "temperature": 0}
                t0 = time.perf_counter()
                r = http.post(url + "/v1/completions", json=body)
                took = time.perf_counter() - t0
                with lock:
                    if r.status_code == 200:
                        latencies.append(took)
                    else:
                        failures.append(f"{r.status_code} {r.text[:200]}")

    try:
        t0 = time.perf_counter()
        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
    lat = sorted(latencies)
    doc = {
        "requests": args.requests, "clients": args.clients, "tokens": args.tokens, "ok": len(lat),
        "failed": len(failures), "wall_s": wall, "requests_per_s": len(lat) / wall if wall else 0.0,
        "p50_ms": 1e3 * _percentile(lat, 0.50) if lat else None,
        "p90_ms": 1e3 * _percentile(lat, 0.90) if lat else None,
        "p99_ms": 1e3 * _percentile(lat, 0.99) if lat else None,
        "mean_ms": 1e3 * statistics.fmean(lat) if lat else None,
    }
    print(f"{doc['ok']}/{args.requests} ok, {doc['failed']} failed, {args.clients} clients, "
          f"{args.tokens} tokens each: {doc['requests_per_s']:.1f} req/s; "
          f"latency p50 {doc['p50_ms']:.0f} ms, "
          f"p90 {doc['p90_ms']:.0f} ms, p99 {doc['p99_ms']:.0f} ms")
    for f in failures[:5]:
        print("failure:", f)
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
