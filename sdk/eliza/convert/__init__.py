"""Model converters: checkpoints of other frameworks to the GGUF files
libeliza loads (written with the ``gguf`` package; docs/convert.md pins the
schemas).

From the command line::

    python -m eliza.convert hf path/to/hf-checkpoint out.gguf --outtype q8_0
    python -m eliza.convert kokoro kokoro.gguf          # the shipped Kokoro-82M int8 ONNX
    python -m eliza.convert pyannote segmentation-3.0.onnx seg.gguf
    python -m eliza.convert resemblyzer pretrained.pt emb.gguf
    python -m eliza.convert lexicon misaki-en.gguf       # misaki's English lexicons

From Python::

    from eliza.convert import convert_hf
    convert_hf("path/to/hf-checkpoint", "out.gguf", outtype="f16")
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .._progress import Steps
from ..errors import ElizaError
from . import kokoro, lexicon, pyannote, resemblyzer
from .hf import ARCHITECTURES, OUTTYPES, ConversionReport, convert_hf

__all__ = ["ARCHITECTURES", "OUTTYPES", "ConversionReport", "build_parser", "convert_hf", "main"]


def build_parser(prog: str = "python -m eliza.convert") -> argparse.ArgumentParser:
    """The converter's argument parser (one subcommand per source format)."""
    parser = argparse.ArgumentParser(prog=prog, description="Convert model checkpoints to GGUF.")
    formats = parser.add_subparsers(dest="format", metavar="FORMAT", required=True)
    hf = formats.add_parser(
        "hf",
        help="a Hugging Face transformers checkpoint directory",
        description=f"Converts a transformers checkpoint ({', '.join(ARCHITECTURES)}) to GGUF "
        "with the tensor names and metadata llama.cpp's converter writes.",
    )
    hf.add_argument("model_dir", metavar="DIR", help="directory with config.json, weights, tokenizer")
    hf.add_argument("out", metavar="OUT.gguf", help="the GGUF file to write")
    hf.add_argument(
        "--outtype", choices=OUTTYPES, default="f16", help="type of the weight matrices (default f16)"
    )
    hf.add_argument("--name", help="general.name (default: the directory's name)")
    hf.add_argument("-q", "--quiet", action="store_true", help="no progress line on a terminal")
    kokoro.add_parser(formats)
    pyannote.add_parser(formats)
    resemblyzer.add_parser(formats)
    lexicon.add_parser(formats)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "python -m eliza.convert") -> int:
    """Runs the converter's command line; returns the exit status (130 after
    Ctrl-C, which leaves no partial output: the file is written whole or not
    at all)."""
    try:
        return _run(build_parser(prog).parse_args(argv))
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130


def _run(args: argparse.Namespace) -> int:
    with Steps("converting", show=False if args.quiet else None) as progress:
        return _convert(args, progress)


def _convert(args: argparse.Namespace, progress: Steps) -> int:
    if args.format in ("pyannote", "resemblyzer", "lexicon"):
        module = {"pyannote": pyannote, "resemblyzer": resemblyzer, "lexicon": lexicon}[args.format]
        try:
            summary = module.run_cli(args, progress)
        except (ElizaError, OSError) as e:
            progress.close()
            print(f"eliza.convert: error: {e}", file=sys.stderr)
            return 1
        print(summary)
        return 0
    try:
        if args.format == "kokoro":
            kreport = kokoro.run_cli(args, progress)
        else:
            report: ConversionReport = convert_hf(args.model_dir, args.out, args.outtype, args.name, progress)
    except (ElizaError, OSError) as e:
        progress.close()
        print(f"eliza.convert: error: {e}", file=sys.stderr)
        return 1
    if args.format == "kokoro":
        ktypes = ", ".join(f"{n} {t}" for t, n in sorted(kreport.tensor_types.items()))
        print(
            f"{kreport.path}: kokoro ({kreport.source}), {kreport.n_tensors} tensors ({ktypes}), "
            f"{kreport.n_params / 1e6:.1f}M parameters, {kreport.n_voices} voices; KModel keys: "
            f"{kreport.n_from_source} from the source, {kreport.n_constant} constant; {kreport.seconds:.1f} s"
        )
        return 0
    types = ", ".join(f"{n} {t}" for t, n in sorted(report.tensor_types.items()))
    print(
        f"{report.path}: {report.architecture}, {report.n_tensors} tensors ({types}), "
        f"{report.n_params / 1e6:.1f}M parameters, vocab {report.n_vocab} ({report.tokenizer_model})"
    )
    return 0
