"""Binds libeliza with ctypes: finds and loads the library, declares every
prototype of include/eliza.h, mirrors every public struct, and checks the
ABI version and struct layouts before anything else may call in.

Nothing here has behaviour beyond binding; the friendly API lives in the
other modules. Example::

    from eliza._native import lib
    print(lib().eliza_version())      # b"0.1.0"
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import AbiError, ElizaIOError, Status

__all__ = [
    "ABI_VERSION",
    "LIBRARY_NAMES",
    "LOG_FN",
    "GgufInfoParams",
    "LlmParams",
    "LlmStreamConfig",
    "LlmPiece",
    "LlmStats",
    "STRUCTS",
    "PROTOTYPES",
    "FieldLayout",
    "StructLayout",
    "find_library",
    "parse_layout_json",
    "mirror_layout",
    "check_abi",
    "missing_functions",
    "load",
    "lib",
]

# ELIZA_ABI_VERSION of the header these bindings mirror.
ABI_VERSION = 1

# File names of the library beside this module, in the order they are tried.
LIBRARY_NAMES = ("libeliza.so", "libeliza.dylib", "eliza.dll", "libeliza.dll")

# typedef void (*eliza_log_fn)(int32_t level, const char *message, void *user_data);
LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_char_p, ctypes.c_void_p)


_P = ctypes.POINTER
_u32, _i32, _u64, _f32, _f64 = (
    ctypes.c_uint32,
    ctypes.c_int32,
    ctypes.c_uint64,
    ctypes.c_float,
    ctypes.c_double,
)
_size, _str, _ptr = ctypes.c_size_t, ctypes.c_char_p, ctypes.c_void_p
_handle = ctypes.c_void_p  # opaque handles: eliza_gguf *, eliza_llm *, eliza_tts *, ...


class GgufInfoParams(ctypes.Structure):
    """eliza_gguf_info_params."""

    _fields_ = [
        ("struct_size", _u32),
        ("max_array_items", _u32),
        ("include_tensors", _u32),
        ("reserved", _u32),
    ]


class LlmParams(ctypes.Structure):
    """eliza_llm_params."""

    _fields_ = [
        ("struct_size", _u32),
        ("n_threads", _i32),
        ("context_size", _u32),
        ("n_batch", _u32),
        ("kv_type", _u32),
        ("kv_type_v", _u32),
        ("draft_kind", _u32),
        ("draft_max_tokens", _i32),
        ("draft_path", _str),
        ("n_gpu_layers", _i32),
        ("gpu_device", _str),
        ("gpu_required", _u32),
    ]


class LlmStreamConfig(ctypes.Structure):
    """eliza_llm_stream_config."""

    _fields_ = [
        ("struct_size", _u32),
        ("flags", _u32),
        ("prompt", _str),
        ("max_tokens", _i32),
        ("temperature", _f32),
        ("top_k", _i32),
        ("top_p", _f32),
        ("min_p", _f32),
        ("repeat_penalty", _f32),
        ("repeat_last_n", _i32),
        ("seed", _u64),
        ("stop", _P(_str)),
        ("n_stop", _u32),
        ("context_size", _u32),
    ]


class LlmPiece(ctypes.Structure):
    """eliza_llm_piece."""

    _fields_ = [
        ("struct_size", _u32),
        ("token", _i32),
        ("text", _str),
        ("text_len", _u32),
    ]


class LlmStats(ctypes.Structure):
    """eliza_llm_stats."""

    _fields_ = [
        ("struct_size", _u32),
        ("prompt_tokens", _u32),
        ("generated_tokens", _u32),
        ("stop_reason", _i32),
        ("prefill_ms", _f64),
        ("decode_ms", _f64),
        ("prefill_tokens_per_s", _f64),
        ("decode_tokens_per_s", _f64),
        ("draft_tokens", _u32),
        ("draft_accepted", _u32),
        ("draft_rounds", _u32),
        ("prompt_evaluated", _u32),
    ]


class TtsParams(ctypes.Structure):
    """eliza_tts_params."""

    _fields_ = [
        ("struct_size", _u32),
        ("n_threads", _i32),
        ("espeak_library", _str),
        ("espeak_data", _str),
        ("language", _str),
    ]


class ChatMessage(ctypes.Structure):
    """eliza_chat_message."""

    _fields_ = [
        ("role", _str),
        ("content", _str),
    ]


class TtsConfig(ctypes.Structure):
    """eliza_tts_config."""

    _fields_ = [
        ("struct_size", _u32),
        ("text", _str),
        ("voice", _str),
        ("speed", _f32),
        ("flags", _u32),
        ("seed", _u64),
        ("language", _str),
    ]


class TtsChunk(ctypes.Structure):
    """eliza_tts_chunk."""

    _fields_ = [
        ("struct_size", _u32),
        ("index", _u32),
        ("pcm", _P(_f32)),
        ("n_samples", _size),
        ("phonemes", _str),
    ]


class DiarizerParams(ctypes.Structure):
    """eliza_diarizer_params."""

    _fields_ = [
        ("struct_size", _u32),
        ("n_threads", _i32),
    ]


class DiarizeOptions(ctypes.Structure):
    """eliza_diarize_options."""

    _fields_ = [
        ("struct_size", _u32),
        ("step", _f32),
        ("num_speakers", _i32),
        ("min_speakers", _i32),
        ("max_speakers", _i32),
        ("threshold", _f32),
        ("min_duration_on", _f32),
        ("min_duration_off", _f32),
        ("batch_size", _i32),
        ("exclusive", _i32),
        ("identify_threshold", _f32),
        ("latency", _f32),
    ]


class DiarizeTurn(ctypes.Structure):
    """eliza_diarize_turn."""

    _fields_ = [
        ("start", _f64),
        ("end", _f64),
        ("speaker", _i32),
        ("confidence", _f32),
    ]


# Every public struct of eliza.h by its C name.
STRUCTS: dict[str, type[ctypes.Structure]] = {
    "eliza_gguf_info_params": GgufInfoParams,
    "eliza_llm_params": LlmParams,
    "eliza_llm_stream_config": LlmStreamConfig,
    "eliza_llm_piece": LlmPiece,
    "eliza_llm_stats": LlmStats,
    "eliza_chat_message": ChatMessage,
    "eliza_tts_params": TtsParams,
    "eliza_tts_config": TtsConfig,
    "eliza_tts_chunk": TtsChunk,
    "eliza_diarizer_params": DiarizerParams,
    "eliza_diarize_options": DiarizeOptions,
    "eliza_diarize_turn": DiarizeTurn,
}

# Every exported function: name -> (restype, argtypes).
PROTOTYPES: dict[str, tuple[Any, tuple[Any, ...]]] = {
    "eliza_abi_version": (_u32, ()),
    "eliza_version": (_str, ()),
    "eliza_capabilities_json": (_str, ()),
    "eliza_abi_layout_json": (_str, ()),
    "eliza_last_error": (_str, ()),
    "eliza_status_name": (_str, (_i32,)),
    "eliza_free": (None, (_ptr,)),
    "eliza_set_log_callback": (None, (LOG_FN, _i32, _ptr)),
    "eliza_gguf_info_default_params": (None, (_P(GgufInfoParams),)),
    "eliza_gguf_open": (_i32, (_str, _P(_handle))),
    "eliza_gguf_close": (None, (_handle,)),
    "eliza_gguf_info_json": (_i32, (_handle, _P(GgufInfoParams), _P(_str))),
    "eliza_gguf_tensor_f32": (_i32, (_handle, _str, _P(_P(_f32)), _P(_u64))),
    "eliza_llm_default_params": (None, (_P(LlmParams),)),
    "eliza_llm_open": (_i32, (_str, _P(LlmParams), _P(_handle))),
    "eliza_llm_close": (None, (_handle,)),
    "eliza_llm_info_json": (_i32, (_handle, _P(_str))),
    "eliza_llm_tokenize": (_i32, (_handle, _str, _size, _u32, _P(_P(_i32)), _P(_size))),
    "eliza_llm_detokenize": (_i32, (_handle, _P(_i32), _size, _u32, _P(_str), _P(_size))),
    "eliza_llm_logits": (_i32, (_handle, _P(_i32), _size, _u32, _P(_P(_f32)), _P(_size))),
    "eliza_llm_token_nll": (_i32, (_handle, _P(_i32), _size, _size, _P(ctypes.c_double))),
    "eliza_llm_stream_default_config": (None, (_P(LlmStreamConfig),)),
    "eliza_llm_stream_open": (_i32, (_handle, _P(LlmStreamConfig), _P(_handle))),
    "eliza_llm_stream_next": (_i32, (_handle, _P(LlmPiece))),
    "eliza_llm_stream_cancel": (None, (_handle,)),
    "eliza_llm_cancel": (None, (_handle,)),
    "eliza_llm_stream_stats": (_i32, (_handle, _P(LlmStats))),
    "eliza_llm_stream_close": (None, (_handle,)),
    "eliza_llm_chat_apply": (_i32, (_handle, _str, _P(ChatMessage), _size, _u32, _P(_str), _P(_size))),
    "eliza_chat_template_name": (_str, (_str,)),
    "eliza_llm_check_json": (_i32, (_str, _P(_str))),
    "eliza_tts_default_params": (None, (_P(TtsParams),)),
    "eliza_tts_open": (_i32, (_str, _P(TtsParams), _P(_handle))),
    "eliza_tts_close": (None, (_handle,)),
    "eliza_tts_sample_rate": (_i32, (_handle,)),
    "eliza_tts_voice_count": (_i32, (_handle,)),
    "eliza_tts_voice_name": (_str, (_handle, _i32)),
    "eliza_tts_voice_language": (_str, (_handle, _i32)),
    "eliza_tts_voice_gender": (_str, (_handle, _i32)),
    "eliza_tts_default_config": (None, (_P(TtsConfig),)),
    "eliza_tts_phonemize": (_i32, (_handle, _str, _P(_str))),
    "eliza_tts_phonemize_language": (_i32, (_handle, _str, _str, _P(_str))),
    "eliza_tts_synthesize": (_i32, (_handle, _P(TtsConfig), _P(_P(_f32)), _P(_size))),
    "eliza_tts_stream_open": (_i32, (_handle, _P(TtsConfig), _P(_handle))),
    "eliza_tts_stream_next": (_i32, (_handle, _P(TtsChunk))),
    "eliza_tts_stream_cancel": (None, (_handle,)),
    "eliza_tts_stream_close": (None, (_handle,)),
    "eliza_tts_profile_json": (_i32, (_handle, _P(_str))),
    "eliza_diarizer_default_params": (None, (_P(DiarizerParams),)),
    "eliza_diarizer_open": (_i32, (_str, _str, _P(DiarizerParams), _P(_handle))),
    "eliza_diarizer_close": (None, (_handle,)),
    "eliza_diarize_default_options": (None, (_P(DiarizeOptions),)),
    "eliza_diarize": (
        _i32,
        (_handle, _P(_f32), _size, _i32, _P(DiarizeOptions), _P(_P(DiarizeTurn)), _P(_size)),
    ),
    "eliza_diarizer_centroids": (_i32, (_handle, _P(_P(_f32)), _P(_size), _P(_size))),
    "eliza_diarizer_enroll": (_i32, (_handle, _str, _P(_f32), _size, _i32)),
    "eliza_diarizer_unenroll": (_i32, (_handle, _str)),
    "eliza_diarizer_enrolled": (_i32, (_handle, _P(_str), _P(_size))),
    "eliza_diarizer_speaker_name": (_i32, (_handle, _i32, _P(_str), _P(_f32))),
    "eliza_diarizer_cancel": (None, (_handle,)),
    "eliza_diar_stream_open": (_i32, (_handle, _i32, _P(DiarizeOptions), _P(_handle))),
    "eliza_diar_stream_push": (_i32, (_handle, _P(_f32), _size)),
    "eliza_diar_stream_finish": (_i32, (_handle,)),
    "eliza_diar_stream_pull": (_i32, (_handle, _P(_P(DiarizeTurn)), _P(_size))),
    "eliza_diar_stream_decided": (_f64, (_handle,)),
    "eliza_diar_stream_close": (None, (_handle,)),
    "eliza_diarizer_progress": (_f32, (_handle,)),
    "eliza_diarizer_segment": (
        _i32,
        (_handle, _P(_f32), _size, _size, _P(_P(_f32)), _P(_size), _P(_size)),
    ),
    "eliza_diarizer_embed": (_i32, (_handle, _P(_f32), _size, _P(_P(_f32)), _P(_size))),
}


@dataclass(frozen=True)
class FieldLayout:
    """One struct field: byte offset and size."""

    name: str
    offset: int
    size: int


@dataclass(frozen=True)
class StructLayout:
    """sizeof, _Alignof and the fields (in declaration order) of a struct."""

    name: str
    size: int
    align: int
    fields: tuple[FieldLayout, ...]


def find_library() -> Path:
    """``$ELIZA_LIBRARY`` if set, else the first of :data:`LIBRARY_NAMES`
    beside this module. Raises :class:`ElizaIOError` if there is none."""
    env = os.environ.get("ELIZA_LIBRARY")
    if env:
        path = Path(env)
        if not path.is_file():
            raise ElizaIOError(Status.E_IO, f"ELIZA_LIBRARY={env}: no such file")
        return path
    here = Path(__file__).resolve().parent
    for name in LIBRARY_NAMES:
        if (here / name).is_file():
            return here / name
    raise ElizaIOError(
        Status.E_IO,
        f"libeliza not found in {here} (tried {', '.join(LIBRARY_NAMES)}); "
        "install the eliza wheel or set ELIZA_LIBRARY to the library's path",
    )


def parse_layout_json(text: str) -> dict[str, StructLayout]:
    """Parses the eliza_abi_layout_json() format: {"struct": {"size": N,
    "align": N, "fields": {"field": [offset, size], ...}}, ...}."""
    doc = json.loads(text)
    return {
        name: StructLayout(
            name=name,
            size=int(s["size"]),
            align=int(s["align"]),
            fields=tuple(FieldLayout(f, int(off), int(size)) for f, (off, size) in s["fields"].items()),
        )
        for name, s in doc.items()
    }


def mirror_layout() -> dict[str, StructLayout]:
    """The layout of the ctypes mirrors in :data:`STRUCTS`."""
    out: dict[str, StructLayout] = {}
    for name, cls in STRUCTS.items():
        fields = []
        for fname, *_ in cls._fields_:
            descr = getattr(cls, fname)
            fields.append(FieldLayout(fname, descr.offset, descr.size))
        out[name] = StructLayout(name, ctypes.sizeof(cls), ctypes.alignment(cls), tuple(fields))
    return out


def _struct_differences(name: str, binary: StructLayout, mirror: StructLayout) -> list[str]:
    diffs = []
    if (binary.size, binary.align) != (mirror.size, mirror.align):
        diffs.append(
            f"{name}: size {binary.size} align {binary.align} in libeliza, "
            f"size {mirror.size} align {mirror.align} in the SDK"
        )
    bnames = [f.name for f in binary.fields]
    mnames = [f.name for f in mirror.fields]
    if bnames != mnames:
        diffs.append(f"{name}: fields {bnames} in libeliza, {mnames} in the SDK")
    for bf, mf in zip(binary.fields, mirror.fields):
        if bf.name == mf.name and (bf.offset, bf.size) != (mf.offset, mf.size):
            diffs.append(
                f"{name}.{bf.name}: offset {bf.offset} size {bf.size} in libeliza, "
                f"offset {mf.offset} size {mf.size} in the SDK"
            )
    return diffs


def check_abi(
    cdll: ctypes.CDLL,
    abi_version: int = ABI_VERSION,
    layout: dict[str, StructLayout] | None = None,
) -> None:
    """Raises :class:`AbiError` unless ``cdll`` reports ABI ``abi_version``
    and a struct layout equal, struct by struct and field by field, to
    ``layout`` (default: :func:`mirror_layout`). Messages give both sides'
    numbers. Tests pass doctored expectations to prove the check fires."""
    where = getattr(cdll, "_name", "libeliza")
    got_version = int(cdll.eliza_abi_version())
    if got_version != abi_version:
        raise AbiError(
            Status.E_ABI,
            f"{where} has ABI version {got_version}, this SDK expects {abi_version}",
        )
    expected = mirror_layout() if layout is None else layout
    binary = parse_layout_json(cdll.eliza_abi_layout_json().decode("utf-8"))
    diffs = []
    for name in sorted(expected.keys() - binary.keys()):
        diffs.append(f"{name}: missing from libeliza's layout report, present in the SDK")
    for name in sorted(binary.keys() - expected.keys()):
        diffs.append(f"{name}: in libeliza's layout report, missing from the SDK")
    for name in sorted(binary.keys() & expected.keys()):
        diffs.extend(_struct_differences(name, binary[name], expected[name]))
    if diffs:
        raise AbiError(Status.E_ABI, f"{where}: struct layout mismatch: " + "; ".join(diffs))


def missing_functions(cdll: ctypes.CDLL) -> list[str]:
    """The functions of :data:`PROTOTYPES` that ``cdll`` does not export."""
    return [name for name in PROTOTYPES if not hasattr(cdll, name)]


def load(path: str | os.PathLike[str]) -> ctypes.CDLL:
    """Loads the library at ``path``, declares every prototype it exports
    and runs :func:`check_abi`. Prefer :func:`lib`, which does this once.

    A function of :data:`PROTOTYPES` that the library lacks stays unbound
    (using it raises AttributeError naming the symbol), so one missing entry
    point does not take the rest down; the test suite requires none."""
    try:
        cdll = ctypes.CDLL(os.fspath(path))
    except OSError as e:
        raise ElizaIOError(Status.E_IO, f"cannot load {path}: {e}") from e
    missing = set(missing_functions(cdll))
    for name, (restype, argtypes) in PROTOTYPES.items():
        if name not in missing:
            fn = getattr(cdll, name)
            fn.restype = restype
            fn.argtypes = argtypes
    check_abi(cdll)
    return cdll


_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


def lib() -> ctypes.CDLL:
    """The process's checked libeliza, loaded on first use (thread-safe)."""
    global _lib
    with _lock:
        if _lib is None:
            _lib = load(find_library())
        return _lib
