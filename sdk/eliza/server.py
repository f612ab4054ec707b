"""``eliza serve``: an OpenAI-compatible HTTP server on loopback, one process
holding the model handles (FastAPI + uvicorn: ``pip install 'eliza[server]'``).

Endpoints: ``GET /v1/models``; ``POST /v1/completions`` and
``/v1/chat/completions`` (server-sent events with ``stream``; ``stop``,
``max_tokens``, ``temperature``, ``top_p``, ``seed``; usage counts);
``POST /v1/audio/speech`` (wav, flac, mp3, pcm; ``speed``; pcm streams as
it is made); ``POST /v1/audio/diarizations`` (multipart ``file``; JSON turns
or RTTM). Each handle serves one request at a time, the others wait in
arrival order; a client that goes away cancels its generation. Errors are
OpenAI-style JSON (``{"error": {"message", "type", "param", "code"}}``)
with the matching 4xx status; ``api_key`` makes every route require
``Authorization: Bearer KEY``. docs/server.md has the details.

Example::

    from eliza.server import ServerConfig, create_app
    app = create_app(ServerConfig(llms={"gemma": "gemma-3-270m-q4_k_m.gguf"}))
    # uvicorn.run(app, host="127.0.0.1", port=8080)
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import io
import json
import secrets
import time
import wave
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .errors import (
    ContextFullError,
    ElizaError,
    InvalidArgumentError,
    NotFoundError,
    Status,
    UnsupportedError,
)
from .llm import LLM, GenerateOptions, StopReason

__all__ = ["ServerConfig", "ApiError", "create_app", "render_chat", "serve"]

T = TypeVar("T")

# What a model without a tokenizer.chat_template (a base model) is given:
# each message on its own lines, then the assistant's turn to speak.
FALLBACK_CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


@dataclass
class ServerConfig:
    """What the server opens and how it guards itself.

    ``llms``: model name -> GGUF path; ``tts``: a Kokoro GGUF path, or
    ``"default"`` for the default model, or None for no speech endpoint;
    ``diarizer``: (segmentation, embedding) paths, ``"default"``, or None.
    ``max_input_chars`` bounds a prompt, a message list or a speech input;
    ``max_upload_bytes`` an audio upload; ``max_tokens_limit`` a request's
    ``max_tokens``."""

    llms: dict[str, str] = field(default_factory=dict)
    tts: str | None = None
    diarizer: tuple[str, str] | str | None = None
    api_key: str | None = None
    n_threads: int = 0
    context_size: int = 0
    max_input_chars: int = 32768
    max_upload_bytes: int = 200 << 20
    max_tokens_limit: int = 4096
    tts_name: str = "kokoro-82m"
    diarizer_name: str = "pyannote-diarization"


class ApiError(Exception):
    """An error reply: HTTP ``status`` and the OpenAI error object."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type_, param, code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def _from_eliza(e: ElizaError) -> ApiError:
    # A request the model cannot serve as asked (a voice without a G2P for
    # text) is the client's to change: 400, like a bad argument.
    if isinstance(e, (InvalidArgumentError, ContextFullError, UnsupportedError)):
        return ApiError(400, e.message, code=Status(e.code).name.lower())
    if isinstance(e, NotFoundError):
        return ApiError(404, e.message, code="not_found")
    return ApiError(500, e.message, type_="server_error", code=Status(e.code).name.lower())


def render_chat(template: str | None, messages: Sequence[dict[str, Any]], bos_token: str = "",
                eos_token: str = "") -> str:
    """The prompt of a chat: ``messages`` rendered with the model's Jinja
    chat template (``tokenizer.chat_template``; None: a plain fallback),
    ending in the assistant's turn. Rendered in jinja2's sandbox, as the
    template comes from the model file.

    Example::

        render_chat(None, [{"role": "user", "content": "Hi"}])  # 'user: Hi\\n\\nassistant:'
    """
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message: str) -> None:
        raise ApiError(400, f"the chat template refuses the messages: {message}", param="messages")

    env.globals["raise_exception"] = raise_exception
    try:
        return env.from_string(template or FALLBACK_CHAT_TEMPLATE).render(
            messages=list(messages), add_generation_prompt=True, bos_token=bos_token, eos_token=eos_token
        )
    except TemplateError as e:
        raise ApiError(400, f"the chat template fails on these messages: {e}", param="messages") from None


# ---------------------------------------------------------------------------
# Handles and their queues
# ---------------------------------------------------------------------------


class _Slot:
    """One model handle and the queue in front of it: one request at a
    time, the rest in arrival order (asyncio.Lock is FIFO)."""

    def __init__(self, name: str, kind: str, model: Any) -> None:
        self.name, self.kind, self.model = name, kind, model
        self.lock = asyncio.Lock()
        self.chat_template: str | None = None
        self.bos_text = ""
        self.eos_text = ""


async def _in_thread(fn: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, fn)


def _llm_slot(name: str, path: str, cfg: ServerConfig) -> _Slot:
    from .gguf import GGUFFile

    llm = LLM(path, n_threads=cfg.n_threads, context_size=cfg.context_size)
    slot = _Slot(name, "llm", llm)
    with GGUFFile(path) as f:
        template = f.metadata.get("tokenizer.chat_template")
    slot.chat_template = template if isinstance(template, str) else None
    info = llm.info
    slot.bos_text = llm.detokenize([info["bos"]], render_special=True) if info.get("bos", -1) >= 0 else ""
    slot.eos_text = llm.detokenize([info["eos"]], render_special=True) if info.get("eos", -1) >= 0 else ""
    return slot


# ---------------------------------------------------------------------------
# Request checks
# ---------------------------------------------------------------------------


def _number(body: dict[str, Any], name: str, default: float, kind: type = float) -> Any:
    value = body.get(name, default)
    if value is None:
        value = default
    wrong_kind = kind is int and not isinstance(value, int)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or wrong_kind:
        raise ApiError(400, f"'{name}' must be a {'integer' if kind is int else 'number'}", param=name)
    return kind(value)


def _sampling(body: dict[str, Any], cfg: ServerConfig) -> dict[str, Any]:
    from .llm import check_sampling

    out: dict[str, Any] = {
        "max_tokens": _number(body, "max_tokens", 16 if "messages" not in body else 256, int),
        "temperature": _number(body, "temperature", 1.0),
        "top_p": _number(body, "top_p", 1.0),
        "seed": _number(body, "seed", secrets.randbits(63), int),
    }
    for name in ("temperature", "top_p"):
        try:
            check_sampling(name, out[name])
        except InvalidArgumentError as e:
            raise ApiError(400, e.message, param=name) from None
    if out["temperature"] > 2.0:
        raise ApiError(400, f"temperature {out['temperature']} is above 2 (the OpenAI API's limit)",
                       param="temperature")
    if not 1 <= out["max_tokens"] <= cfg.max_tokens_limit:
        raise ApiError(400, f"max_tokens {out['max_tokens']} is outside 1..{cfg.max_tokens_limit}",
                       param="max_tokens")
    if not 0 <= out["seed"] < 1 << 64:
        raise ApiError(400, f"seed {out['seed']} is not an unsigned 64-bit integer", param="seed")
    stop = body.get("stop")
    if stop is None:
        stops: list[str] = []
    elif isinstance(stop, str):
        stops = [stop]
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop) and len(stop) <= 4:
        stops = list(stop)
    else:
        raise ApiError(400, "'stop' must be a string or a list of at most 4 strings", param="stop")
    out["stop"] = [s for s in stops if s]
    return out


def _finish_reason(reason: StopReason | None) -> str:
    return "length" if reason in (StopReason.MAX_TOKENS, StopReason.CONTEXT_FULL) else "stop"


# ---------------------------------------------------------------------------
# The app
# ---------------------------------------------------------------------------


def create_app(cfg: ServerConfig) -> FastAPI:
    """The FastAPI application serving ``cfg``'s models (opened here)."""
    slots: dict[str, _Slot] = {}
    for name, path in cfg.llms.items():
        slots[name] = _llm_slot(name, path, cfg)
    if cfg.tts is not None:
        from .tts import TTS

        slots[cfg.tts_name] = _Slot(cfg.tts_name, "tts",
                                    TTS(None if cfg.tts == "default" else cfg.tts, n_threads=cfg.n_threads))
    if cfg.diarizer is not None:
        from .diarize import Diarizer

        paths: tuple[str | None, str | None] = (None, None)
        if isinstance(cfg.diarizer, tuple):
            paths = cfg.diarizer
        diarizer = Diarizer(paths[0], paths[1], n_threads=cfg.n_threads)
        slots[cfg.diarizer_name] = _Slot(cfg.diarizer_name, "diarizer", diarizer)
    created = int(time.time())

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        yield
        for s in slots.values():
            s.model.close()

    app = FastAPI(title="libeliza", openapi_url=None, docs_url=None, redoc_url=None, lifespan=lifespan)
    app.state.slots = slots

    @app.exception_handler(ApiError)
    async def api_error(_: Request, e: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if e.status == 401 else None
        return JSONResponse(e.body(), status_code=e.status, headers=headers)

    @app.exception_handler(ElizaError)
    async def eliza_error(_: Request, e: ElizaError) -> JSONResponse:
        err = _from_eliza(e)
        return JSONResponse(err.body(), status_code=err.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, e: RequestValidationError) -> JSONResponse:
        first = e.errors()[0] if e.errors() else {}
        err = ApiError(400, f"invalid request: {first.get('msg', 'malformed')}")
        return JSONResponse(err.body(), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, e: StarletteHTTPException) -> JSONResponse:
        code = "not_found" if e.status_code == 404 else None
        err = ApiError(e.status_code, str(e.detail), code=code)
        return JSONResponse(err.body(), status_code=e.status_code)

    @app.middleware("http")
    async def guard(request: Request, call_next: Callable[[Request], Any]) -> Any:
        if cfg.api_key is not None:
            given = request.headers.get("authorization", "")
            want = f"Bearer {cfg.api_key}"
            if not hmac.compare_digest(given.encode(), want.encode()):
                err = ApiError(401, "a valid API key is required (Authorization: Bearer KEY)",
                               code="invalid_api_key")
                return JSONResponse(err.body(), status_code=401, headers={"WWW-Authenticate": "Bearer"})
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > cfg.max_upload_bytes:
            err = ApiError(413, f"the request body is {length} bytes, above {cfg.max_upload_bytes}",
                           code="request_too_large")
            return JSONResponse(err.body(), status_code=413)
        return await call_next(request)

    async def json_body(request: Request) -> dict[str, Any]:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ApiError(400, f"the body is not valid JSON: {e}") from None
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object")
        return body

    def slot_for(body: dict[str, Any], kind: str) -> _Slot:
        name = body.get("model")
        if not isinstance(name, str):
            raise ApiError(400, "'model' is required (GET /v1/models lists them)", param="model")
        slot = slots.get(name)
        if slot is None or slot.kind != kind:
            raise ApiError(404, f"the model '{name}' does not exist here", param="model",
                           code="model_not_found")
        return slot

    def bounded(text: str, what: str) -> str:
        if len(text) > cfg.max_input_chars:
            raise ApiError(413, f"{what} is {len(text)} characters, above {cfg.max_input_chars}",
                           param=what, code="input_too_large")
        return text

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [
            {"id": s.name, "object": "model", "created": created, "owned_by": "libeliza", "kind": s.kind}
            for s in slots.values()
        ]}

    async def generate(request: Request, slot: _Slot, prompt: str, add_bos: bool,
                       params: dict[str, Any]) -> AsyncIterator[str]:
        """The pieces of one generation, holding the slot's turn; leaving
        early (a disconnect) cancels the stream and frees the slot."""
        llm: LLM = slot.model
        async with slot.lock:
            # The OpenAI API has no top_k, min_p or repeat penalty: those filters are off.
            options = GenerateOptions(
                max_tokens=params["max_tokens"], temperature=params["temperature"], top_k=0,
                top_p=params["top_p"], min_p=0.0, repeat_penalty=1.0, seed=params["seed"],
                stop=params["stop"], add_bos=add_bos, special=True)
            stream = await _in_thread(lambda: llm._open_stream(prompt, options))
            try:
                while True:
                    piece = await _in_thread(stream.next_text)
                    if piece is None:
                        break
                    if piece:
                        yield piece
                    if await request.is_disconnected():
                        break
            finally:
                # Synchronous: a cancelled task cannot await. close() cancels a
                # next_text still running on its worker and waits for it (one token).
                stream.close()

    def usage(slot: _Slot) -> dict[str, int]:
        stats = slot.model.last_stats
        p, c = (stats.prompt_tokens, stats.generated_tokens) if stats is not None else (0, 0)
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

    def sse(obj: Any) -> str:
        return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"

    async def completion_reply(request: Request, slot: _Slot, prompt: str, add_bos: bool,
                               params: dict[str, Any], chat: bool, stream: bool) -> Any:
        rid = ("chatcmpl-" if chat else "cmpl-") + secrets.token_hex(12)
        kind = "chat.completion" if chat else "text_completion"
        if not stream:
            text = "".join([p async for p in generate(request, slot, prompt, add_bos, params)])
            stats = slot.model.last_stats
            finish = _finish_reason(stats.stop_reason if stats else None)
            choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
            if chat:
                choice["message"] = {"role": "assistant", "content": text}
            else:
                choice.update(text=text, logprobs=None)
            return {"id": rid, "object": kind, "created": int(time.time()), "model": slot.name,
                    "choices": [choice], "usage": usage(slot)}

        async def events() -> AsyncIterator[str]:
            chunk_kind = "chat.completion.chunk" if chat else "text_completion"
            base = {"id": rid, "object": chunk_kind, "created": int(time.time()), "model": slot.name}
            if chat:
                yield sse({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                "finish_reason": None}]})
            try:
                async for piece in generate(request, slot, prompt, add_bos, params):
                    delta = {"delta": {"content": piece}} if chat else {"text": piece, "logprobs": None}
                    yield sse({**base, "choices": [{"index": 0, **delta, "finish_reason": None}]})
            except ElizaError as e:  # the status line is sent: the error goes in the stream
                yield sse(_from_eliza(e).body())
                yield "data: [DONE]\n\n"
                return
            stats = slot.model.last_stats
            last: dict[str, Any] = {"delta": {}} if chat else {"text": "", "logprobs": None}
            finish = _finish_reason(stats.stop_reason if stats else None)
            choices = [{"index": 0, **last, "finish_reason": finish}]
            yield sse({**base, "choices": choices, "usage": usage(slot)})
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        body = await json_body(request)
        slot = slot_for(body, "llm")
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if not isinstance(prompt, str) or not prompt:
            raise ApiError(400, "'prompt' must be a non-empty string", param="prompt")
        params = _sampling(body, cfg)
        return await completion_reply(request, slot, bounded(prompt, "prompt"), True, params, False,
                                      bool(body.get("stream")))

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Any:
        body = await json_body(request)
        slot = slot_for(body, "llm")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in messages
        ):
            raise ApiError(400, "'messages' must be a non-empty list of {role, content} strings",
                           param="messages")
        bounded("".join(m["content"] for m in messages), "messages")
        params = _sampling(body, cfg)
        prompt = render_chat(slot.chat_template, messages, slot.bos_text, slot.eos_text)
        add_bos = not (slot.bos_text and prompt.startswith(slot.bos_text))
        return await completion_reply(request, slot, prompt, add_bos, params, True, bool(body.get("stream")))

    @app.post("/v1/audio/speech")
    async def speech(request: Request) -> Any:
        body = await json_body(request)
        slot = slot_for(body, "tts")
        text = body.get("input")
        if not isinstance(text, str) or not text.strip():
            raise ApiError(400, "'input' must be non-empty text", param="input")
        bounded(text, "input")
        fmt = body.get("response_format", "wav")
        if fmt not in ("wav", "flac", "mp3", "pcm"):
            raise ApiError(400, f"response_format {fmt!r} is not one of wav, flac, mp3, pcm",
                           param="response_format")
        speed = _number(body, "speed", 1.0)
        if not 0.25 <= speed <= 4.0:
            raise ApiError(400, f"speed {speed} is outside 0.25..4", param="speed")
        voice = body.get("voice")
        if voice is not None and not isinstance(voice, str):
            raise ApiError(400, "'voice' must be a voice name", param="voice")
        tts = slot.model
        rate = tts.sample_rate

        async def chunks() -> AsyncIterator[np.ndarray]:
            async with slot.lock:
                def open_stream() -> tuple[Any, Any]:
                    try:
                        chunks = tts.stream(text, voice=voice, speed=speed)
                    except (NotFoundError, UnsupportedError) as e:
                        raise ApiError(400, e.message, param="voice") from None
                    # The generator owns the stream: kept alive beside it, never iterated.
                    return chunks, tts._open_stream_object()

                _owner, stream = await _in_thread(open_stream)
                try:
                    while True:
                        c = await _in_thread(stream.next_chunk)
                        if c is None:
                            break
                        yield c.audio
                        if await request.is_disconnected():
                            break
                finally:
                    stream.close()  # synchronous, as for the LLM streams

        from .tts import pcm16

        if fmt == "pcm":
            async def pcm() -> AsyncIterator[bytes]:
                async for a in chunks():
                    yield pcm16(a)

            return StreamingResponse(pcm(), media_type="audio/pcm", headers={"X-Sample-Rate": str(rate)})
        parts = [a async for a in chunks()]
        audio = np.concatenate(parts) if parts else np.zeros(0, np.float32)
        buf = io.BytesIO()
        if fmt == "wav":
            with wave.open(buf, "wb") as w:
                w.setnchannels(1)
                w.setsampwidth(2)
                w.setframerate(rate)
                w.writeframes(pcm16(audio))
        else:
            from .audio import write_audio

            write_audio(buf, audio, rate, format="." + fmt)
        media = {"wav": "audio/wav", "flac": "audio/flac", "mp3": "audio/mpeg"}[fmt]
        return Response(buf.getvalue(), media_type=media)

    @app.post("/v1/audio/diarizations")
    async def diarizations(request: Request) -> Any:
        form = await request.form()
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise ApiError(400, "a multipart 'file' with the audio is required", param="file")
        name = form.get("model", cfg.diarizer_name)
        slot = slot_for({"model": name}, "diarizer")
        fmt = form.get("response_format", "json")
        if fmt not in ("json", "rttm"):
            raise ApiError(400, f"response_format {fmt!r} is not json or rttm", param="response_format")
        options: dict[str, int] = {}
        for key in ("num_speakers", "min_speakers", "max_speakers"):
            value = form.get(key)
            if value is not None:
                if not isinstance(value, str) or not value.isdigit():
                    raise ApiError(400, f"'{key}' must be a whole number", param=key)
                options[key] = int(value)
        data = await upload.read()
        suffix = Path(upload.filename or "audio.wav").suffix or ".wav"

        def run() -> tuple[list[Any], float]:
            import tempfile

            from .audio import read_audio

            with tempfile.NamedTemporaryFile(suffix=suffix) as f:
                f.write(data)
                f.flush()
                samples, rate = read_audio(f.name, sample_rate=16000)
            return slot.model.diarize(samples, rate, **options), len(samples) / rate

        async with slot.lock:
            turns, seconds = await _in_thread(run)
        if fmt == "rttm":
            from .diarize import to_rttm

            uri = Path(upload.filename or "audio").stem.replace(" ", "_") or "audio"
            return Response(to_rttm(turns, uri=uri), media_type="text/plain")
        return {"duration": seconds, "num_speakers": len({t.speaker for t in turns}), "segments": [
            {"start": t.start, "end": t.end, "speaker": f"SPEAKER_{t.speaker:02d}",
             "confidence": t.confidence}
            for t in turns
        ]}

    return app


def serve(cfg: ServerConfig, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Runs the server until Ctrl-C (uvicorn, one process, one event loop)."""
    import uvicorn

    uvicorn.run(create_app(cfg), host=host, port=port, log_level="warning")
