"""``eliza batch say|diarize|generate INPUT OUTPUT``: the batch jobs from the
command line. :func:`register` adds the ``batch`` command to ``eliza``'s
parser; nothing here imports Ray until a job runs.

Example::

    $ eliza batch say articles.txt voiced/ --actors 2 --threads-per-actor 1
    $ eliza batch diarize meetings/ rttm/ --address 10.0.0.5:6379 --num-speakers 2
    $ eliza batch generate prompts.jsonl gen/ --model gemma.gguf --max-tokens 64 --temp 0
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["register"]

def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def _common(cmd: argparse.ArgumentParser, input_help: str, output_help: str) -> None:
    cmd.add_argument("input", metavar="INPUT", help=input_help)
    cmd.add_argument("output", metavar="OUTPUT", help=output_help + "; manifest.jsonl records every item")
    cmd.add_argument(
        "--address",
        default="local",
        help="'local' (default: a Ray instance on this machine, bound to 127.0.0.1), a head's "
        "HOST:PORT (ray start --head), or ray://HOST:PORT",
    )
    cmd.add_argument("--actors", type=_positive, metavar="N",
                     help="engine actors (default: as many as the nodes' cores allow)")
    cmd.add_argument("--threads-per-actor", type=_positive, default=1, metavar="T",
                     help="threads (and Ray CPUs) per actor (default 1)")
    cmd.add_argument("--retries", type=int, default=1, metavar="R",
                     help="retries of an item whose actor died (default 1)")


def _report(report: Any) -> int:
    print(
        f"eliza: {report.out_dir}: {report.done} done, {report.skipped} skipped (done before), "
        f"{len(report.failures)} failed, of {report.total}, on {len(report.node_ids)} node(s) "
        f"in {report.wall_seconds:.1f} s",
        file=sys.stderr,
    )
    for f in report.failures:
        print(f"eliza: {f.id}: {f.error_type}: {f.error}", file=sys.stderr)
    return 0 if report.ok else 1


def _run_args(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "address": args.address,
        "actors": args.actors,
        "threads_per_actor": args.threads_per_actor,
        "retries": args.retries,
    }


def _cmd_say(args: argparse.Namespace) -> int:
    from . import speak

    return _report(
        speak(
            args.input,
            args.output,
            voice=args.voice,
            model=args.model,
            speed=args.speed,
            phonemes=args.phonemes,
            no_noise=args.no_noise,
            seed=args.seed,
            text_column=args.text_column,
            **_run_args(args),
        )
    )


def _cmd_diarize(args: argparse.Namespace) -> int:
    from . import diarize

    return _report(
        diarize(
            args.input,
            args.output,
            num_speakers=args.num_speakers,
            min_speakers=args.min_speakers,
            max_speakers=args.max_speakers,
            threshold=args.threshold,
            segmentation=args.segmentation,
            embedding=args.embedding,
            **_run_args(args),
        )
    )


def _cmd_generate(args: argparse.Namespace) -> int:
    from ..llm import GenerateOptions
    from . import generate

    if args.model is None:
        from .. import models

        args.model = str(models.path("gemma3-270m"))
    return _report(
        generate(
            args.input,
            args.output,
            model=args.model,
            prompt_column=args.prompt_column,
            options=GenerateOptions(max_tokens=args.max_tokens, temperature=args.temp, top_k=args.top_k,
                                    top_p=args.top_p, min_p=args.min_p, seed=args.seed, stop=args.stop or ()),
            context_size=args.ctx,
            **_run_args(args),
        )
    )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds ``batch`` with its ``say``, ``diarize`` and ``generate`` jobs."""
    batch = commands.add_parser(
        "batch",
        help="speak, diarize or generate over a whole corpus on Ray (pip install 'libeliza[ray]')",
        description="Runs a job over every item of INPUT on Ray Data, one engine per actor, and "
        "writes the results and a manifest into OUTPUT. A rerun skips finished items and retries "
        "failed ones. Exits 1 when an item failed. See docs/batch.md.",
    )
    jobs = batch.add_subparsers(dest="job", metavar="JOB", required=True)

    say = jobs.add_parser("say", help="text to WAV files (OUTPUT/wav/ID.wav)")
    _common(say, "a text file (one item per line), a folder of .txt files, or a .jsonl/.parquet "
            "file with a text column", "output folder")
    say.add_argument("--voice", default=None,
                     help="a voice or a blend a:0.7,b:0.3 of one language (default: the model's first, "
                     "af_heart)")
    say.add_argument("--model", metavar="PATH", help="a Kokoro GGUF (default: the default model, per node)")
    say.add_argument("--speed", type=float, help="speaking rate 0.25..4 (default: the library's, 1)")
    say.add_argument("--phonemes", action="store_true", help="the items are Kokoro phonemes, not text")
    say.add_argument("--seed", type=int, help="seed of the source noise (default: the library's, 0)")
    say.add_argument("--no-noise", action="store_true", help="no source noise")
    say.add_argument("--text-column", default="text", metavar="NAME",
                     help="in .jsonl/.parquet (default text)")
    say.set_defaults(func=_cmd_say)

    dia = jobs.add_parser("diarize", help="WAV files to RTTM (OUTPUT/rttm/ID.rttm)")
    _common(dia, "a WAV file or a folder of them", "output folder")
    dia.add_argument("--num-speakers", type=int, metavar="N", help="exact number of speakers")
    dia.add_argument("--min-speakers", type=int, metavar="N", help="at least N speakers")
    dia.add_argument("--max-speakers", type=int, metavar="N", help="at most N speakers")
    dia.add_argument("--threshold", type=float, metavar="D", help="clustering threshold (cosine distance)")
    dia.add_argument("--segmentation", metavar="PATH", help="segmentation GGUF (with --embedding)")
    dia.add_argument("--embedding", metavar="PATH", help="speaker-embedding GGUF (with --segmentation)")
    dia.set_defaults(func=_cmd_diarize)

    gen = jobs.add_parser("generate", help="prompts to OUTPUT/generations.jsonl and .parquet")
    _common(gen, "a .jsonl/.parquet file with a prompt column, or a text file (one prompt per line)",
            "output folder")
    gen.add_argument("--model", metavar="PATH", help="a GGUF language model (default: Gemma 3 270M)")
    gen.add_argument("--prompt-column", default="prompt", metavar="NAME", help="(default prompt)")
    # Sampling options left out take the library's defaults (eliza.GenerateOptions.defaults()).
    gen.add_argument("--max-tokens", type=int, metavar="N", help="tokens per prompt at most")
    gen.add_argument("--temp", type=float, metavar="T", help="0 = greedy")
    gen.add_argument("--top-k", type=int, metavar="K", help="0 = off")
    gen.add_argument("--top-p", type=float, metavar="P", help="1 = off")
    gen.add_argument("--min-p", type=float, metavar="P", help="0 = off")
    gen.add_argument("--seed", type=int, help="sampling seed")
    gen.add_argument("--stop", action="append", metavar="S", help="stop before this string; repeatable")
    gen.add_argument("--ctx", type=int, default=0, metavar="N", help="context size; 0 = the model's")
    gen.set_defaults(func=_cmd_generate)
