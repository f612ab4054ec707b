"""llama.cpp's vocabulary and chat-template functions through ctypes, from
the build that tests/tools/llama_cpp.py makes (no llama-cpp-python needed).

    from tools.libllama import LibLlama
    lib = LibLlama.load()           # None when the build is absent
    with lib.vocab(path) as v:      # a GGUF opened vocab_only
        ids = v.tokenize("Hello", add_special=False, parse_special=True)
    text = lib.chat_apply_template(tmpl, [("user", "Hi")], add_assistant=True)

    with lib.model(path) as m:      # a GGUF loaded whole, on the CPU
        logits = m.logits(ids)      # [len(ids), n_vocab], one batch, every position
        with m.context(n_ctx=1024, n_batch=512, type_k="q8_0", type_v="q8_0",
                       flash_attn=True) as ctx:   # a decoding context (bench/llm.py)
            ctx.decode(ids)         # appends ids to the cache
            row = ctx.last_logits() # the last position's logits

Only the calls the tokenizer, chat, model-parity tests and the speed
comparison need are bound.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tools.llama_cpp import cache_dir


class _ModelParams(ctypes.Structure):
    """struct llama_model_params of llama.h (0.3.36's vendored llama.cpp)."""

    _fields_ = [
        ("devices", ctypes.c_void_p),
        ("tensor_buft_overrides", ctypes.c_void_p),
        ("n_gpu_layers", ctypes.c_int32),
        ("split_mode", ctypes.c_int32),
        ("load_mode", ctypes.c_int32),
        ("lazy_mode", ctypes.c_int32),
        ("main_gpu", ctypes.c_int32),
        ("tensor_split", ctypes.c_void_p),
        ("progress_callback", ctypes.c_void_p),
        ("progress_callback_user_data", ctypes.c_void_p),
        ("kv_overrides", ctypes.c_void_p),
        ("vocab_only", ctypes.c_bool),
        ("check_tensors", ctypes.c_bool),
        ("use_extra_bufts", ctypes.c_bool),
        ("no_host", ctypes.c_bool),
        ("no_alloc", ctypes.c_bool),
        ("load_mtp", ctypes.c_bool),
    ]


class _ContextParams(ctypes.Structure):
    """struct llama_context_params of llama.h (0.3.36's vendored llama.cpp)."""

    _fields_ = [
        ("n_ctx", ctypes.c_uint32),
        ("n_batch", ctypes.c_uint32),
        ("n_ubatch", ctypes.c_uint32),
        ("n_seq_max", ctypes.c_uint32),
        ("n_rs_seq", ctypes.c_uint32),
        ("n_outputs_max", ctypes.c_uint32),
        ("n_outputs_max_per_seq", ctypes.c_uint32),
        ("n_threads", ctypes.c_int32),
        ("n_threads_batch", ctypes.c_int32),
        ("ctx_type", ctypes.c_int),
        ("rope_scaling_type", ctypes.c_int),
        ("pooling_type", ctypes.c_int),
        ("attention_type", ctypes.c_int),
        ("flash_attn_type", ctypes.c_int),
        ("rope_freq_base", ctypes.c_float),
        ("rope_freq_scale", ctypes.c_float),
        ("yarn_ext_factor", ctypes.c_float),
        ("yarn_attn_factor", ctypes.c_float),
        ("yarn_beta_fast", ctypes.c_float),
        ("yarn_beta_slow", ctypes.c_float),
        ("yarn_orig_ctx", ctypes.c_uint32),
        ("defrag_thold", ctypes.c_float),
        ("cb_eval", ctypes.c_void_p),
        ("cb_eval_user_data", ctypes.c_void_p),
        ("type_k", ctypes.c_int),
        ("type_v", ctypes.c_int),
        ("abort_callback", ctypes.c_void_p),
        ("abort_callback_data", ctypes.c_void_p),
        ("embeddings", ctypes.c_bool),
        ("offload_kqv", ctypes.c_bool),
        ("no_perf", ctypes.c_bool),
        ("op_offload", ctypes.c_bool),
        ("swa_full", ctypes.c_bool),
        ("kv_unified", ctypes.c_bool),
        ("samplers", ctypes.c_void_p),
        ("n_samplers", ctypes.c_size_t),
        ("ctx_other", ctypes.c_void_p),
    ]


class _Batch(ctypes.Structure):
    _fields_ = [
        ("n_tokens", ctypes.c_int32),
        ("token", ctypes.POINTER(ctypes.c_int32)),
        ("embd", ctypes.POINTER(ctypes.c_float)),
        ("pos", ctypes.POINTER(ctypes.c_int32)),
        ("n_seq_id", ctypes.POINTER(ctypes.c_int32)),
        ("seq_id", ctypes.POINTER(ctypes.POINTER(ctypes.c_int32))),
        ("logits", ctypes.POINTER(ctypes.c_int8)),
    ]


# ggml_type of the cache types llama.cpp's KV cache takes (ggml.h).
CACHE_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8}

# llama_flash_attn_type (llama.h).
FLASH_ATTN = {"auto": -1, "off": 0, "on": 1}


class _ChatMessage(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


_LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


class Vocab:
    """One GGUF's vocabulary as llama.cpp loads it (vocab_only)."""

    def __init__(self, lib: LibLlama, path: Path) -> None:
        self._lib = lib
        c = lib.c
        params = c.llama_model_default_params()
        params.vocab_only = True
        self._model = c.llama_model_load_from_file(str(path).encode(), params)
        if not self._model:
            raise RuntimeError(f"llama.cpp cannot load {path}")
        self._vocab = c.llama_model_get_vocab(self._model)
        self.n_vocab: int = c.llama_vocab_n_tokens(self._vocab)

    def __enter__(self) -> Vocab:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._model:
            self._lib.c.llama_model_free(self._model)
            self._model = None

    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        data = text.encode("utf-8")
        cap = len(data) + 8
        buf = (ctypes.c_int32 * cap)()
        n = self._lib.c.llama_tokenize(self._vocab, data, len(data), buf, cap, add_special, parse_special)
        if n < 0:
            raise RuntimeError(f"llama_tokenize needs {-n} tokens")
        return list(buf[:n])

    def detokenize(self, ids: Sequence[int], remove_special: bool, unparse_special: bool) -> bytes:
        arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
        cap = 64 + 64 * len(ids)
        buf = ctypes.create_string_buffer(cap)
        n = self._lib.c.llama_detokenize(self._vocab, arr, len(ids), buf, cap, remove_special,
                                         unparse_special)
        if n < 0:
            raise RuntimeError(f"llama_detokenize needs {-n} bytes")
        return buf.raw[:n]

    def is_eog(self, token: int) -> bool:
        return bool(self._lib.c.llama_vocab_is_eog(self._vocab, token))

    def eog_ids(self) -> list[int]:
        return [i for i in range(self.n_vocab) if self.is_eog(i)]

    def chat_template(self) -> str | None:
        t = self._lib.c.llama_model_chat_template(self._model, None)
        return t.decode("utf-8") if t else None


class Model:
    """One GGUF loaded whole by llama.cpp (CPU; no extra buffer types unless
    asked: on some VMs of this kind the CPU reports AMX but faults on its
    tiles)."""

    def __init__(self, lib: LibLlama, path: Path, n_threads: int, extra_bufts: bool = False) -> None:
        self._lib = lib
        self.n_threads = n_threads
        c = lib.c
        params = c.llama_model_default_params()
        params.use_extra_bufts = extra_bufts
        self._model = c.llama_model_load_from_file(str(path).encode(), params)
        if not self._model:
            raise RuntimeError(f"llama.cpp cannot load {path}: {''.join(lib.log_tail[-3:]).strip()}")
        self._vocab = c.llama_model_get_vocab(self._model)
        self.n_vocab: int = c.llama_vocab_n_tokens(self._vocab)

    def __enter__(self) -> Model:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._model:
            self._lib.c.llama_model_free(self._model)
            self._model = None

    def is_eog(self, token: int) -> bool:
        return bool(self._lib.c.llama_vocab_is_eog(self._vocab, token))

    def logits(self, ids: Sequence[int], n_ctx: int | None = None, kv_f16: bool = False) -> list[list[float]]:
        """The logits of every position of ``ids`` from position 0 in one
        fresh context of n_ctx (default: the length) and one batch (F32 KV
        cache, or F16 with kv_f16; flash attention off), [len(ids)][n_vocab]."""
        c = self._lib.c
        n = len(ids)
        params = c.llama_context_default_params()
        params.n_batch = params.n_ubatch = max(n, 16)
        params.n_ctx = max(n, 16) if n_ctx is None else n_ctx
        params.n_threads = params.n_threads_batch = self.n_threads
        params.type_k = params.type_v = 1 if kv_f16 else 0  # GGML_TYPE_F16 / GGML_TYPE_F32
        params.no_perf = True
        params.flash_attn_type = 0  # LLAMA_FLASH_ATTN_TYPE_DISABLED: F32 products throughout
        ctx = c.llama_init_from_model(self._model, params)
        if not ctx:
            raise RuntimeError("llama_init_from_model failed")
        batch = c.llama_batch_init(n, 0, 1)
        try:
            for i, t in enumerate(ids):
                batch.token[i] = t
                batch.pos[i] = i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 1
            batch.n_tokens = n
            rc = c.llama_decode(ctx, batch)
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc}")
            rows = []
            for i in range(n):
                row = c.llama_get_logits_ith(ctx, i)
                rows.append(row[: self.n_vocab])
            return rows
        finally:
            c.llama_batch_free(batch)
            c.llama_free(ctx)

    def context(self, n_ctx: int, n_batch: int, type_k: str = "f16", type_v: str = "f16",
                flash_attn: str = "on", n_threads_batch: int | None = None) -> Context:
        """A context that keeps its cache between decode() calls: n_threads
        for one-token steps, n_threads_batch (default the same) for larger
        batches, a type_k / type_v cache (CACHE_TYPES) and flash attention
        (FLASH_ATTN; a quantized V needs it on)."""
        return Context(self, n_ctx, n_batch, type_k, type_v, flash_attn,
                       self.n_threads if n_threads_batch is None else n_threads_batch)


class Context:
    """One llama_context of a Model, decoding one sequence from position 0."""

    def __init__(self, model: Model, n_ctx: int, n_batch: int, type_k: str, type_v: str, flash_attn: str,
                 n_threads_batch: int) -> None:
        self._lib = model._lib
        self.n_vocab = model.n_vocab
        self.n_batch = n_batch
        c = self._lib.c
        params = c.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = n_batch
        params.n_threads = model.n_threads
        params.n_threads_batch = n_threads_batch
        params.type_k = CACHE_TYPES[type_k]
        params.type_v = CACHE_TYPES[type_v]
        params.flash_attn_type = FLASH_ATTN[flash_attn]
        params.no_perf = True
        self._ctx = c.llama_init_from_model(model._model, params)
        if not self._ctx:
            raise RuntimeError(f"llama_init_from_model failed: {''.join(self._lib.log_tail[-3:]).strip()}")
        self._batch = c.llama_batch_init(n_batch, 0, 1)
        self.n_past = 0

    def __enter__(self) -> Context:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._ctx:
            self._lib.c.llama_batch_free(self._batch)
            self._lib.c.llama_free(self._ctx)
            self._ctx = None

    def clear(self) -> None:
        """Empties the cache: the next decode() starts at position 0."""
        c = self._lib.c
        c.llama_memory_clear(c.llama_get_memory(self._ctx), True)
        self.n_past = 0

    def set_threads(self, n_threads: int, n_threads_batch: int) -> None:
        self._lib.c.llama_set_n_threads(self._ctx, n_threads, n_threads_batch)

    def decode(self, ids: Sequence[int]) -> None:
        """Appends ids to the cache in batches of n_batch; the logits of the
        last one are kept (last_logits)."""
        c = self._lib.c
        b = self._batch
        for start in range(0, len(ids), self.n_batch):
            chunk = ids[start:start + self.n_batch]
            for i, t in enumerate(chunk):
                b.token[i] = t
                b.pos[i] = self.n_past + i
                b.n_seq_id[i] = 1
                b.seq_id[i][0] = 0
                b.logits[i] = 0
            b.logits[len(chunk) - 1] = 1
            b.n_tokens = len(chunk)
            rc = c.llama_decode(self._ctx, b)
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc} at position {self.n_past}")
            self.n_past += len(chunk)

    def last_logits(self) -> ctypes.Array[ctypes.c_float]:
        """The last decoded position's logits, [n_vocab], valid until the next decode()."""
        row = self._lib.c.llama_get_logits_ith(self._ctx, -1)
        return (ctypes.c_float * self.n_vocab).from_address(ctypes.addressof(row.contents))


class LibLlama:
    """libllama.so of the cached llama.cpp build."""

    def __init__(self, path: Path) -> None:
        c = ctypes.CDLL(str(path))
        self.c = c
        vp, i32 = ctypes.c_void_p, ctypes.c_int32
        c.llama_backend_init.restype = None
        c.llama_log_set.argtypes = [_LOG_FN, vp]
        c.llama_log_set.restype = None
        c.llama_model_default_params.restype = _ModelParams
        c.llama_model_load_from_file.argtypes = [ctypes.c_char_p, _ModelParams]
        c.llama_model_load_from_file.restype = vp
        c.llama_model_free.argtypes = [vp]
        c.llama_model_free.restype = None
        c.llama_model_get_vocab.argtypes = [vp]
        c.llama_model_get_vocab.restype = vp
        c.llama_vocab_n_tokens.argtypes = [vp]
        c.llama_vocab_n_tokens.restype = i32
        c.llama_vocab_is_eog.argtypes = [vp, i32]
        c.llama_vocab_is_eog.restype = ctypes.c_bool
        c.llama_model_chat_template.argtypes = [vp, ctypes.c_char_p]
        c.llama_model_chat_template.restype = ctypes.c_char_p
        c.llama_tokenize.argtypes = [vp, ctypes.c_char_p, i32, ctypes.POINTER(i32), i32, ctypes.c_bool,
                                     ctypes.c_bool]
        c.llama_tokenize.restype = i32
        c.llama_detokenize.argtypes = [vp, ctypes.POINTER(i32), i32, ctypes.c_char_p, i32, ctypes.c_bool,
                                       ctypes.c_bool]
        c.llama_detokenize.restype = i32
        c.llama_chat_apply_template.argtypes = [ctypes.c_char_p, ctypes.POINTER(_ChatMessage),
                                                ctypes.c_size_t, ctypes.c_bool, ctypes.c_char_p, i32]
        c.llama_chat_apply_template.restype = i32
        c.llama_context_default_params.restype = _ContextParams
        c.llama_init_from_model.argtypes = [vp, _ContextParams]
        c.llama_init_from_model.restype = vp
        c.llama_free.argtypes = [vp]
        c.llama_free.restype = None
        c.llama_batch_init.argtypes = [i32, i32, i32]
        c.llama_batch_init.restype = _Batch
        c.llama_batch_free.argtypes = [_Batch]
        c.llama_batch_free.restype = None
        c.llama_decode.argtypes = [vp, _Batch]
        c.llama_decode.restype = i32
        c.llama_get_logits_ith.argtypes = [vp, i32]
        c.llama_get_logits_ith.restype = ctypes.POINTER(ctypes.c_float)
        c.llama_get_memory.argtypes = [vp]
        c.llama_get_memory.restype = vp
        c.llama_memory_clear.argtypes = [vp, ctypes.c_bool]
        c.llama_memory_clear.restype = None
        c.llama_set_n_threads.argtypes = [vp, i32, i32]
        c.llama_set_n_threads.restype = None
        # The last lines llama.cpp logged, for the message of a failed load.
        self.log_tail: list[str] = []

        def log(level: int, text: bytes, user: object) -> None:
            self.log_tail = [*self.log_tail[-19:], text.decode("utf-8", "replace")]

        self._log = _LOG_FN(log)
        c.llama_log_set(self._log, None)
        c.llama_backend_init()

    @staticmethod
    def load() -> LibLlama | None:
        """The cached build's library, or None when it has not been built."""
        path = cache_dir() / "build" / "bin" / "libllama.so"
        return LibLlama(path) if path.is_file() else None

    def vocab(self, path: Path) -> Vocab:
        return Vocab(self, path)

    def model(self, path: Path, n_threads: int = 2, extra_bufts: bool = False) -> Model:
        return Model(self, path, n_threads, extra_bufts)

    def chat_apply_template(self, tmpl: str, messages: Sequence[tuple[str, str]],
                            add_assistant: bool) -> str | None:
        """llama_chat_apply_template's prompt, or None where it does not
        know the template (it returns a negative size)."""
        msgs = (_ChatMessage * max(len(messages), 1))(
            *[_ChatMessage(r.encode("utf-8"), t.encode("utf-8")) for r, t in messages])
        cap = 1024 + 4 * sum(len(r) + len(t) for r, t in messages)
        buf = ctypes.create_string_buffer(cap)
        apply = self.c.llama_chat_apply_template
        n = apply(tmpl.encode("utf-8"), msgs, len(messages), add_assistant, buf, cap)
        if n < 0:
            return None
        if n > cap:
            buf = ctypes.create_string_buffer(n)
            n = apply(tmpl.encode("utf-8"), msgs, len(messages), add_assistant, buf, n)
        return buf.raw[:n].decode("utf-8")
