"""Text generation with a GGUF language model (falcon-h1, gemma2, gemma3,
gemma4, granite, llama, olmo2, phi3, qwen2, qwen3, smollm3)
through libeliza's ``eliza_llm_*`` calls.

Example::

    with eliza.LLM("gemma-3-270m-q4_k_m.gguf") as llm:
        for piece in llm.stream("The capital of France is", max_tokens=16, temperature=0):
            print(piece, end="", flush=True)
        print("\\n", llm.last_stats)
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import json
import os
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ._handle import NativeModel
from ._interrupt import InFlight, run
from ._native import LlmParams, LlmPiece, LlmStats, LlmStreamConfig, lib
from .errors import InternalError, InvalidArgumentError, StateError, Status, check

__all__ = [
    "GenerateOptions", "LLM", "LLMStats", "Perplexity", "StopReason", "SAMPLING_RANGES", "check_sampling",
]

# The sampling values eliza_llm_stream_open accepts (eliza.h), as
# (low, high, low excluded); the CLI and the server check the same.
SAMPLING_RANGES: dict[str, tuple[float, float, bool]] = {
    "temperature": (0.0, 100.0, False),
    "top_k": (0, float("inf"), False),
    "top_p": (0.0, 1.0, False),
    "min_p": (0.0, 1.0, False),
    "repeat_penalty": (0.0, 100.0, True),
    "repeat_last_n": (0, float("inf"), False),
}


def check_sampling(name: str, value: float) -> None:
    """Raises InvalidArgumentError when ``value`` is outside the range of
    sampling parameter ``name`` (:data:`SAMPLING_RANGES`)."""
    lo, hi, open_low = SAMPLING_RANGES[name]
    inside = (value > lo if open_low else value >= lo) and value <= hi
    if not inside:
        if open_low:
            span = f"({lo:g}, {hi:g}]"
        else:
            span = f"{lo:g}..{hi:g}" if hi != float("inf") else f"{lo:g} and up"
        raise InvalidArgumentError(Status.E_INVALID_ARG, f"{name} {value} is not within {span}")

_TOKENIZE_ADD_BOS = 1 << 0
_TOKENIZE_PARSE_SPECIAL = 1 << 1
_DETOKENIZE_RENDER_SPECIAL = 1 << 0
_U64_MAX = (1 << 64) - 1


class StopReason(enum.IntEnum):
    """``eliza_llm_stop_reason``: why a stream ended."""

    NONE = 0  # still running
    EOS = 1  # the model ended its text
    MAX_TOKENS = 2
    STRING = 3  # a stop string matched
    CONTEXT_FULL = 4
    CANCELLED = 5


@dataclass(frozen=True)
class LLMStats:
    """``eliza_llm_stats`` of one stream: token counts, why it stopped, and
    the time spent on the prompt (prefill) and on each new token (decode).
    ``prompt_evaluated`` of the ``prompt_tokens`` ran; the rest was a prefix
    the handle's cache already held (the earlier turns of a chat)."""

    prompt_tokens: int
    generated_tokens: int
    stop_reason: StopReason
    prefill_ms: float
    decode_ms: float
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    prompt_evaluated: int
    draft_tokens: int = 0  # drafted tokens the model verified (speculative decoding)
    draft_accepted: int = 0  # of them accepted
    draft_rounds: int = 0  # verification passes with drafts

    @property
    def draft_acceptance(self) -> float:
        """The share of drafted tokens accepted (0 without drafts)."""
        return self.draft_accepted / self.draft_tokens if self.draft_tokens else 0.0

    @classmethod
    def _from_c(cls, s: LlmStats) -> LLMStats:
        try:
            reason = StopReason(s.stop_reason)
        except ValueError:
            reason = StopReason.NONE
        return cls(
            prompt_tokens=int(s.prompt_tokens),
            generated_tokens=int(s.generated_tokens),
            stop_reason=reason,
            prefill_ms=float(s.prefill_ms),
            decode_ms=float(s.decode_ms),
            prefill_tokens_per_s=float(s.prefill_tokens_per_s),
            decode_tokens_per_s=float(s.decode_tokens_per_s),
            prompt_evaluated=int(s.prompt_evaluated),
            draft_tokens=int(s.draft_tokens),
            draft_accepted=int(s.draft_accepted),
            draft_rounds=int(s.draft_rounds),
        )


def _utf8(text: str | bytes) -> bytes:
    # Lone surrogates pass through as the invalid UTF-8 they encode to, so
    # the library refuses them like any other invalid input.
    return text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")


def _c_string(text: str | bytes, what: str) -> bytes:
    data = _utf8(text)
    if b"\0" in data:
        raise InvalidArgumentError(Status.E_INVALID_ARG, f"{what} contains a NUL character")
    return data


@dataclass(frozen=True)
class Perplexity:
    """The result of :meth:`LLM.perplexity`, as llama.cpp's llama-perplexity
    reports it: ``ppl`` = exp(mean of ``nll``) and its uncertainty
    ``ppl_error`` (the standard error of the mean nll times ppl), over
    ``n_chunks`` chunks of ``n_ctx`` tokens whose second halves were scored.
    ``nll``: -log p of each scored token (natural log), in text order."""

    ppl: float
    ppl_error: float
    n_ctx: int
    n_chunks: int
    nll: npt.NDArray[np.float64]


def _token_array(ids: Iterable[int] | npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.int32]:
    values = np.asarray(ids if isinstance(ids, np.ndarray) else list(ids))
    if values.ndim != 1 or (values.size and not np.issubdtype(values.dtype, np.integer)):
        raise InvalidArgumentError(Status.E_INVALID_ARG, "token ids must be a flat sequence of integers")
    if values.size and (values.min() < -(1 << 31) or values.max() >= 1 << 31):
        raise InvalidArgumentError(Status.E_INVALID_ARG, "a token id does not fit in int32")
    return np.ascontiguousarray(values, dtype=np.int32)


def _int32_ptr(arr: npt.NDArray[np.int32]) -> Any:
    return arr.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))


def _take_string(ptr: ctypes.c_char_p, n: int) -> bytes:
    """The n bytes at a library-allocated string, which is then freed."""
    address = ctypes.cast(ptr, ctypes.c_void_p).value
    try:
        return ctypes.string_at(address, n) if address else b""
    finally:
        lib().eliza_free(address)


class _Stream:
    """One open ``eliza_llm_stream``. ``cancel`` may come from any thread;
    ``close`` cancels a ``next_text`` running on another thread and waits
    for it before freeing the stream."""

    def __init__(self, llm: LLM, handle: ctypes.c_void_p, keepalive: tuple[Any, ...]) -> None:
        self._llm = llm
        self._handle: ctypes.c_void_p | None = handle
        self._keepalive = keepalive  # prompt and stop strings, for the stream's life
        self._guard = InFlight("LLM stream")
        self._piece = LlmPiece()
        self._piece.struct_size = ctypes.sizeof(LlmPiece)
        self._text_offset = LlmPiece.text.offset

    def next_text(self) -> str | None:
        """The next piece of text ("" while text is held back), or None once
        the stream has ended (also after a cancel or a close). Ctrl-C
        cancels the generation and raises KeyboardInterrupt once the
        library has stopped."""
        try:
            with self._guard.call():
                handle = self._handle
                if handle is None:
                    return None
                return run(lambda: self._next(handle), cancel=lambda: lib().eliza_llm_stream_cancel(handle))
        except StateError:
            return None

    def _next(self, handle: ctypes.c_void_p) -> str | None:
        status = lib().eliza_llm_stream_next(handle, ctypes.byref(self._piece))
        if status == Status.DONE or status == Status.E_CANCELLED:
            return None
        check(status)
        n = int(self._piece.text_len)
        if n == 0:
            return ""
        address = ctypes.c_void_p.from_buffer(self._piece, self._text_offset).value
        if address is None:
            raise InternalError(Status.E_INTERNAL, f"eliza_llm_stream_next: {n} bytes of text at NULL")
        return ctypes.string_at(address, n).decode("utf-8", "replace")

    def stats(self) -> LLMStats | None:
        try:
            with self._guard.call():
                if self._handle is None:
                    return None
                stats = LlmStats()
                stats.struct_size = ctypes.sizeof(LlmStats)
                check(lib().eliza_llm_stream_stats(self._handle, ctypes.byref(stats)))
                return LLMStats._from_c(stats)
        except StateError:
            return None

    def cancel(self) -> None:
        try:
            with self._guard.call():
                if self._handle is not None:
                    lib().eliza_llm_stream_cancel(self._handle)
        except StateError:
            pass

    def close(self) -> None:
        handle = self._handle
        if handle is None:
            return

        def free() -> None:
            self._handle = None
            try:
                stats = LlmStats()
                stats.struct_size = ctypes.sizeof(LlmStats)
                if lib().eliza_llm_stream_stats(handle, ctypes.byref(stats)) == Status.OK:
                    self._llm._last_stats = LLMStats._from_c(stats)
            finally:
                lib().eliza_llm_stream_close(handle)
                self._llm._forget(self)

        self._guard.close(cancel=lambda: lib().eliza_llm_stream_cancel(handle), free=free)

    def __del__(self) -> None:
        # A stream dropped before it was iterated still holds the model's
        # one stream slot; give it back.
        with contextlib.suppress(Exception):
            self.close()


@dataclass(frozen=True)
class GenerateOptions:
    """How :meth:`LLM.stream` and :meth:`LLM.generate` generate. A field
    left None takes the library's default (``eliza_llm_stream_default_config``;
    :meth:`defaults` lists them).

    ``max_tokens`` <= 0 runs to EOS or a full context; ``temperature`` 0 is
    greedy; ``top_k`` 0, ``top_p`` 1, ``min_p`` 0 and ``repeat_penalty`` 1
    switch those filters off; ``repeat_last_n`` is how many tokens the
    penalty looks back on. The same ``seed`` and input give the same text.
    Generation ends before the first ``stop`` string, which is not returned.
    ``add_bos`` and ``special`` apply to the prompt as in
    :meth:`LLM.tokenize`; ``context_size`` (0: the model's) limits one
    stream's context.

    Example::

        greedy = eliza.GenerateOptions(max_tokens=32, temperature=0)
        text = llm.generate("Once upon a time", greedy, stop=".")
    """

    max_tokens: int | None = None
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repeat_penalty: float | None = None
    repeat_last_n: int | None = None
    seed: int | None = None
    stop: str | Sequence[str] = ()
    add_bos: bool | None = None
    special: bool | None = None
    context_size: int | None = None

    def __post_init__(self) -> None:
        # One stop string or any sequence of them; kept as a tuple (frozen, hashable).
        object.__setattr__(self, "stop", (self.stop,) if isinstance(self.stop, str) else tuple(self.stop))

    @classmethod
    def defaults(cls) -> GenerateOptions:
        """Every field as the library fills it by default."""
        cfg = LlmStreamConfig()
        lib().eliza_llm_stream_default_config(ctypes.byref(cfg))
        return cls(
            max_tokens=int(cfg.max_tokens),
            temperature=float(cfg.temperature),
            top_k=int(cfg.top_k),
            top_p=float(cfg.top_p),
            min_p=float(cfg.min_p),
            repeat_penalty=float(cfg.repeat_penalty),
            repeat_last_n=int(cfg.repeat_last_n),
            seed=int(cfg.seed),
            add_bos=bool(cfg.flags & _TOKENIZE_ADD_BOS),
            special=bool(cfg.flags & _TOKENIZE_PARSE_SPECIAL),
            context_size=int(cfg.context_size),
        )

    def resolved(self) -> GenerateOptions:
        """These options with every None replaced by the library's default."""
        given = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        return replace(self.defaults(), **given)

    def _config(self, prompt: bytes) -> tuple[LlmStreamConfig, tuple[Any, ...]]:
        """The checked ``eliza_llm_stream_config`` for ``prompt`` and what
        it points to (kept alive by the stream)."""
        o = self.resolved()
        for name in SAMPLING_RANGES:
            check_sampling(name, getattr(o, name))
        seed, max_tokens, context_size = int(o.seed or 0), int(o.max_tokens or 0), int(o.context_size or 0)
        if not 0 <= seed <= _U64_MAX:
            raise InvalidArgumentError(Status.E_INVALID_ARG, f"seed {seed} is not an unsigned 64-bit integer")
        if not -(1 << 31) <= max_tokens < 1 << 31:
            raise InvalidArgumentError(Status.E_INVALID_ARG, f"max_tokens {max_tokens} is out of range")
        stop_bytes = [_c_string(s, "a stop string") for s in o.stop]
        stop_array = (ctypes.c_char_p * max(len(stop_bytes), 1))(*stop_bytes)
        cfg = LlmStreamConfig()
        lib().eliza_llm_stream_default_config(ctypes.byref(cfg))
        cfg.flags = (_TOKENIZE_ADD_BOS if o.add_bos else 0) | (_TOKENIZE_PARSE_SPECIAL if o.special else 0)
        cfg.prompt = prompt
        cfg.max_tokens = max_tokens
        cfg.temperature = o.temperature
        cfg.top_k = o.top_k
        cfg.top_p = o.top_p
        cfg.min_p = o.min_p
        cfg.repeat_penalty = o.repeat_penalty
        cfg.repeat_last_n = o.repeat_last_n
        cfg.seed = seed
        cfg.stop = ctypes.cast(stop_array, ctypes.POINTER(ctypes.c_char_p))
        cfg.n_stop = len(stop_bytes)
        cfg.context_size = _unsigned(context_size, "context_size")
        return cfg, (prompt, stop_bytes, stop_array)


def _options(options: GenerateOptions | None, overrides: Mapping[str, Any]) -> GenerateOptions:
    """``options`` (None: all defaults) with the fields named in ``overrides`` replaced."""
    if options is not None and not isinstance(options, GenerateOptions):
        raise TypeError(f"options must be an eliza.GenerateOptions, not {type(options).__name__}")
    base = options if options is not None else GenerateOptions()
    return replace(base, **overrides) if overrides else base


# eliza_llm_kv_type
KV_TYPES = {"f32": 0, "f16": 1, "q8_0": 2, "q4_0": 3, "tbq4_0": 4, "tbq3_0": 5}


def _kv_type(name: str, what: str) -> int:
    if name not in KV_TYPES:
        known = ", ".join(KV_TYPES)
        raise InvalidArgumentError(Status.E_INVALID_ARG, f"{what} {name!r} is not one of {known}")
    return KV_TYPES[name]


# eliza_llm_draft_kind
DRAFT_KINDS = {"none": 0, "ngram": 1, "mtp": 2, "model": 3}


def parse_draft(spec: str | None) -> tuple[int, str | None]:
    """``draft=`` as (eliza_llm_draft_kind, path): ``None`` or ``"none"``,
    ``"ngram"``, ``"mtp:ASSISTANT.gguf"``, ``"model:DRAFT.gguf"``."""
    if spec is None or spec == "none":
        return 0, None
    kind, sep, path = spec.partition(":")
    if kind == "ngram" and not sep:
        return DRAFT_KINDS["ngram"], None
    if kind in ("mtp", "model") and path:
        return DRAFT_KINDS[kind], path
    raise InvalidArgumentError(
        Status.E_INVALID_ARG,
        f"draft {spec!r} is none of 'ngram', 'mtp:ASSISTANT.gguf', 'model:DRAFT.gguf'",
    )


class LLM(NativeModel["_Stream"]):
    """A language model opened from one GGUF file, with its KV cache.

    ``n_threads`` 0 uses one thread per core; ``context_size`` 0 takes the
    model's training context capped at 4096 tokens; ``n_batch`` 0 evaluates
    the prompt 256 tokens at a time. ``kv_type`` is how the KV cache stores
    keys and values: ``"f32"`` (the reference's numbers), ``"f16"`` (half
    the memory, llama.cpp's default), ``"q8_0"``, ``"q4_0"`` (ggml's blocks,
    Hadamard-rotated), ``"tbq4_0"`` or ``"tbq3_0"`` (TurboQuant, 4.5 and 3.5
    bits per value); ``kv_type_v`` (None: the same) gives the values another
    type than the keys. ``draft`` turns on speculative decoding: ``"ngram"``
    (prompt lookup, any model), ``"model:DRAFT.gguf"`` (a small model with
    the same vocabulary) or ``"mtp:ASSISTANT.gguf"`` (a Gemma 4 assistant),
    drafting up to ``draft_max_tokens`` tokens per verification pass; greedy
    output stays token for token the same, sampled output keeps its
    distribution, and :class:`LLMStats` counts drafted and accepted tokens.
    ``gpu_layers`` puts the model on the GPU (Vulkan): 0 (the default) runs
    it on the CPU, -1 (or any other positive count: the GPU takes the whole
    model) on the device ``gpu_device`` names (None: ``$ELIZA_GPU_DEVICE``,
    else the best GPU; ``"llvmpipe"`` picks Mesa's CPU driver). A model the
    GPU cannot run falls back to the CPU, the reason logged and in
    ``info["gpu_fallback"]``; ``gpu_required=True`` raises the reason's
    error instead. ``info["backend"]`` says what runs: ``"cpu"`` or
    ``"vulkan: DEVICE"``.
    Use it as a context manager (or call
    :meth:`close`) to free the weights' mapping and the cache at a known
    point. One thread at a time may use it; :meth:`cancel` is the exception.

    Failures raise :class:`eliza.ElizaError` subclasses: a missing file
    :class:`~eliza.ElizaIOError`, a corrupt one :class:`~eliza.FormatError`,
    an empty prompt or invalid UTF-8 :class:`~eliza.InvalidArgumentError`, a
    prompt longer than the context :class:`~eliza.ContextFullError`, a second
    stream while one is open or any use after :meth:`close`
    :class:`~eliza.StateError`.

    Example::

        with eliza.LLM("model.gguf", context_size=2048) as llm:
            text = llm.generate("Once upon a time", max_tokens=64, seed=42)
            print(text, llm.last_stats.decode_tokens_per_s)
    """

    _kind = "LLM"

    def __init__(
        self,
        path: str | os.PathLike[str],
        n_threads: int = 0,
        context_size: int = 0,
        n_batch: int = 0,
        kv_type: str = "f32",
        kv_type_v: str | None = None,
        draft: str | None = None,
        draft_max_tokens: int = 15,
        gpu_layers: int = 0,
        gpu_device: str | None = None,
        gpu_required: bool = False,
    ) -> None:
        super().__init__(os.fspath(path))
        self._last_stats: LLMStats | None = None
        params = LlmParams()
        lib().eliza_llm_default_params(ctypes.byref(params))
        params.n_threads = n_threads
        params.context_size = _unsigned(context_size, "context_size")
        params.n_batch = _unsigned(n_batch, "n_batch")
        params.kv_type = _kv_type(kv_type, "kv_type")
        if kv_type_v is not None:
            params.kv_type_v = _kv_type(kv_type_v, "kv_type_v")
        draft_kind, draft_path = parse_draft(draft)
        params.draft_kind = draft_kind
        params.draft_max_tokens = draft_max_tokens
        params.draft_path = os.fsencode(draft_path) if draft_path is not None else None
        params.n_gpu_layers = gpu_layers
        params.gpu_device = gpu_device.encode("utf-8") if gpu_device is not None else None
        params.gpu_required = 1 if gpu_required else 0
        handle = ctypes.c_void_p()
        check(lib().eliza_llm_open(os.fsencode(self.path), ctypes.byref(params), ctypes.byref(handle)))
        self._handle = handle

    def _close_handle(self, handle: ctypes.c_void_p) -> None:
        lib().eliza_llm_close(handle)

    def _cancel_calls(self, handle: ctypes.c_void_p) -> None:
        lib().eliza_llm_cancel(handle)

    # -- model ------------------------------------------------------------------

    @property
    def info(self) -> dict[str, Any]:
        """``eliza_llm_info_json``: architecture, n_vocab, n_ctx_train,
        context_size, n_embd, n_layer, bos, eos, n_threads, kv_type, kv_type_v, kv_bytes,
        kv_bytes_per_token, backend ("cpu" or "vulkan: DEVICE"), gpu_layers,
        gpu_fallback (why the GPU asked for is not used, or None)."""
        out = ctypes.c_char_p()
        with self._calling() as handle:
            check(lib().eliza_llm_info_json(handle, ctypes.byref(out)))
        raw = out.value or b""
        lib().eliza_free(ctypes.cast(out, ctypes.c_void_p))
        doc: dict[str, Any] = json.loads(raw.decode("utf-8"))
        return doc

    def tokenize(self, text: str | bytes, add_bos: bool = True, special: bool = True) -> list[int]:
        """Token ids of ``text``. ``add_bos`` prepends BOS if the model asks for
        one; ``special`` turns control-token texts ("<start_of_turn>") into
        their ids instead of tokenizing them as plain text."""
        data = _utf8(text)
        flags = (_TOKENIZE_ADD_BOS if add_bos else 0) | (_TOKENIZE_PARSE_SPECIAL if special else 0)
        out = ctypes.POINTER(ctypes.c_int32)()
        count = ctypes.c_size_t()
        with self._calling() as handle:
            check(
                lib().eliza_llm_tokenize(
                    handle, data, len(data), flags, ctypes.byref(out), ctypes.byref(count)
                )
            )
        try:
            return [int(out[i]) for i in range(count.value)]
        finally:
            lib().eliza_free(ctypes.cast(out, ctypes.c_void_p))

    def detokenize(
        self, ids: Iterable[int] | npt.NDArray[np.integer[Any]], render_special: bool = False
    ) -> str:
        """The text of ``ids``; control tokens are dropped unless
        ``render_special``. Bytes that do not form UTF-8 (a character cut
        between token lists) become U+FFFD."""
        arr = _token_array(ids)
        out = ctypes.c_char_p()
        n = ctypes.c_size_t()
        flags = _DETOKENIZE_RENDER_SPECIAL if render_special else 0
        with self._calling() as handle:
            check(
                lib().eliza_llm_detokenize(
                    handle, _int32_ptr(arr), len(arr), flags, ctypes.byref(out), ctypes.byref(n)
                )
            )
        return _take_string(out, n.value).decode("utf-8", "replace")

    def logits(
        self, ids: Iterable[int] | npt.NDArray[np.integer[Any]], all_positions: bool = False
    ) -> npt.NDArray[np.float32]:
        """Evaluates ``ids`` from position 0 (the cache is reset) and returns
        the logits of the last position, float32 [n_vocab], or of every
        position, [len(ids), n_vocab]."""
        arr = _token_array(ids)

        def call(handle: ctypes.c_void_p) -> npt.NDArray[np.float32]:
            out = ctypes.POINTER(ctypes.c_float)()
            count = ctypes.c_size_t()
            check(
                lib().eliza_llm_logits(
                    handle, _int32_ptr(arr), len(arr), int(all_positions), ctypes.byref(out),
                    ctypes.byref(count),
                )
            )
            try:
                return (
                    np.ctypeslib.as_array(out, shape=(count.value,)).copy()
                    if count.value
                    else np.zeros(0, np.float32)
                )
            finally:
                lib().eliza_free(ctypes.cast(out, ctypes.c_void_p))

        with self._calling() as handle:
            flat = run(lambda: call(handle), cancel=lambda: lib().eliza_llm_cancel(handle))
        return flat.reshape(len(arr), -1) if all_positions else flat

    def token_nll(
        self, ids: Iterable[int] | npt.NDArray[np.integer[Any]], first: int = 0
    ) -> npt.NDArray[np.float64]:
        """Evaluates ``ids`` from position 0 (the cache is reset) and returns
        -log p(ids[i + 1] | ids[:i + 1]) for ``first`` <= i < len(ids) - 1
        (``eliza_llm_token_nll``), float64."""
        arr = _token_array(ids)
        out = np.zeros(max(len(arr) - 1 - first, 0), np.float64)
        start = _unsigned(first, "first")

        def call(handle: ctypes.c_void_p) -> None:
            check(
                lib().eliza_llm_token_nll(
                    handle,
                    _int32_ptr(arr),
                    len(arr),
                    start,
                    out.ctypes.data_as(ctypes.POINTER(ctypes.c_double)),
                )
            )

        with self._calling() as handle:
            run(lambda: call(handle), cancel=lambda: lib().eliza_llm_cancel(handle))
        return out

    def perplexity(self, text: str | bytes, n_ctx: int = 0) -> Perplexity:
        """Perplexity of ``text`` by llama.cpp's llama-perplexity method: the
        text is tokenized once (BOS first if the model wants one), cut into
        len // n_ctx chunks of ``n_ctx`` tokens (0: this handle's context
        size), the first token of each chunk is replaced by BOS, and each
        chunk, evaluated from an empty cache, scores the tokens of its second
        half. The text must give at least 2 * n_ctx tokens.

        Example::

            with eliza.LLM("gemma-3-270m-q4_k_m.gguf", context_size=512, kv_type="q8_0") as llm:
                print(llm.perplexity(open("book.txt").read()).ppl)
        """
        n_ctx = _unsigned(n_ctx, "n_ctx") or int(self.info["context_size"])
        ids = self.tokenize(text, add_bos=True, special=False)
        if n_ctx < 4 or len(ids) < 2 * n_ctx:
            raise InvalidArgumentError(
                Status.E_INVALID_ARG,
                f"perplexity needs at least 2 * n_ctx = {2 * n_ctx} tokens (n_ctx >= 4); "
                f"the text has {len(ids)}",
            )
        bos = int(self.info["bos"])
        adds_bos = len(self.tokenize(b"a", add_bos=True)) > len(self.tokenize(b"a", add_bos=False))
        first = n_ctx // 2
        parts = []
        for start in range(0, len(ids) // n_ctx * n_ctx, n_ctx):
            chunk = list(ids[start : start + n_ctx])
            if adds_bos:
                chunk[0] = bos
            parts.append(self.token_nll(chunk, first))
        nll = np.concatenate(parts)
        mean = float(nll.mean())
        var = float((nll * nll).mean()) - mean * mean
        ppl = float(np.exp(mean))
        err = float(np.sqrt(var / (len(nll) - 1))) * ppl if var > 0 else 0.0
        return Perplexity(ppl=ppl, ppl_error=err, n_ctx=n_ctx, n_chunks=len(parts), nll=nll)

    # -- generation -------------------------------------------------------------

    def stream(
        self, prompt: str | bytes, options: GenerateOptions | None = None, **overrides: Any
    ) -> Generator[str, None, None]:
        """Generates text after ``prompt``, piece by piece, as it is made.

        ``options`` (a :class:`GenerateOptions`; None: the library's
        defaults) says how; keyword arguments named after its fields
        (``max_tokens=16, temperature=0``) replace single fields of it.

        The prompt and the options are checked and the prompt tokenized
        here, so a bad one raises at once; the model runs as the iterator is
        consumed. Leaving the loop early (break, an exception, ``close()`` on
        the iterator) closes the stream; :meth:`cancel` from another thread
        ends it at the next token. :attr:`last_stats` then tells why it
        stopped.
        """
        return self._pieces(self._open_stream(prompt, _options(options, overrides)))

    def generate(self, prompt: str | bytes, options: GenerateOptions | None = None, **overrides: Any) -> str:
        """The whole text :meth:`stream` produces with the same arguments.
        The generation runs as one call on a worker thread (no hand-over per
        token); Ctrl-C cancels it as it does a stream."""
        stream = self._open_stream(prompt, _options(options, overrides))
        pieces = self._pieces(stream)
        try:
            return run(lambda: "".join(pieces), cancel=stream.cancel)
        finally:
            pieces.close()  # also when interrupted before the worker started it

    def cancel(self) -> None:
        """Asks the open stream, if any, to stop at its next token; its
        iterator then ends and :attr:`last_stats` says CANCELLED. Safe from
        any thread."""
        stream = self._open_stream_object()
        if stream is not None:
            stream.cancel()

    @property
    def last_stats(self) -> LLMStats | None:
        """Counters and timings of the open stream, or else of the last one
        closed; None before the first stream."""
        stream = self._open_stream_object()
        live = stream.stats() if stream is not None else None
        return live if live is not None else self._last_stats

    def _open_stream(self, prompt: str | bytes, options: GenerateOptions) -> _Stream:
        self._live()  # closed: StateError before any other check
        cfg, keepalive = options._config(_c_string(prompt, "the prompt"))
        out = ctypes.c_void_p()
        with self._calling() as live:
            check(lib().eliza_llm_stream_open(live, ctypes.byref(cfg), ctypes.byref(out)))
        return self._adopt(_Stream(self, out, keepalive))

    @staticmethod
    def _pieces(stream: _Stream) -> Generator[str, None, None]:
        try:
            while True:
                text = stream.next_text()
                if text is None:
                    return
                if text:
                    yield text
        finally:
            stream.close()

    # -- chat (eliza.chat renders the prompt) ------------------------------------

    @property
    def chat_template(self) -> str | None:
        """The file's ``tokenizer.chat_template`` (Jinja), or None."""
        from .gguf import GGUFFile

        if not hasattr(self, "_chat_template"):
            with GGUFFile(self.path) as f:
                value = f.metadata.get("tokenizer.chat_template")
            self._chat_template = value if isinstance(value, str) else None
        return self._chat_template

    def _special_text(self, key: str) -> str:
        token = self.info.get(key, -1)
        return self.detokenize([token], render_special=True) if isinstance(token, int) and token >= 0 else ""

    def chat_prompt(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True,
                    template: str | None = None, renderer: str = "auto", **variables: Any) -> str:
        """The prompt for ``messages`` (``{"role", "content"}`` mappings).

        ``template`` (a built-in name such as "chatml" or Jinja text)
        replaces the file's ``tokenizer.chat_template``; with neither,
        "chatml" as in llama.cpp. ``renderer`` "jinja" renders Jinja text
        with jinja2 exactly as transformers does, "builtin" uses libeliza's
        C renderer (llama.cpp's templates), "auto" jinja2 where it is
        installed and the template is Jinja, else the C renderer.
        ``variables`` reach a Jinja template (``enable_thinking=False``).
        """
        from . import chat

        tmpl = template if template is not None else self.chat_template
        is_name = tmpl is None or chat.template_name(tmpl) == tmpl
        if renderer not in ("auto", "jinja", "builtin"):
            raise InvalidArgumentError(Status.E_INVALID_ARG,
                                       f"renderer {renderer!r} is not auto, jinja or builtin")
        if renderer == "jinja" or (renderer == "auto" and not is_name and chat.jinja_available()):
            if tmpl is None or is_name:
                raise InvalidArgumentError(Status.E_INVALID_ARG,
                                           "renderer 'jinja' needs a Jinja chat template")
            return chat.render_jinja(tmpl, messages, add_generation_prompt=add_generation_prompt,
                                     bos_token=self._special_text("bos"), eos_token=self._special_text("eos"),
                                     **variables)
        return chat.render_builtin(tmpl if tmpl is not None else "chatml", messages,
                                   add_generation_prompt=add_generation_prompt)

    def chat_stream(self, messages: Sequence[Mapping[str, Any]], template: str | None = None,
                    renderer: str = "auto", **generate: Any) -> Generator[str, None, None]:
        """The assistant's reply to ``messages``, piece by piece:
        :meth:`chat_prompt` then :meth:`stream` (special tokens parsed, BOS
        added unless the prompt starts with it; generation ends at any
        end-of-generation token). ``generate`` takes :meth:`stream`'s
        ``options`` and its fields.

        Example::

            history = [{"role": "user", "content": "Name a color."}]
            reply = "".join(llm.chat_stream(history, max_tokens=32, temperature=0))
        """
        prompt = self.chat_prompt(messages, template=template, renderer=renderer)
        options = _options(generate.pop("options", None), generate)
        if options.add_bos is None:
            bos = self._special_text("bos")
            options = replace(options, add_bos=not (bos and prompt.startswith(bos)))
        if options.special is None:
            options = replace(options, special=True)
        return self.stream(prompt, options)

    def chat(self, messages: Sequence[Mapping[str, Any]], template: str | None = None,
             renderer: str = "auto", **generate: Any) -> str:
        """The whole reply :meth:`chat_stream` produces."""
        return "".join(self.chat_stream(messages, template=template, renderer=renderer, **generate))


def _unsigned(value: int, what: str) -> int:
    if not 0 <= value < 1 << 32:
        raise InvalidArgumentError(Status.E_INVALID_ARG, f"{what} {value} is out of range")
    return value
