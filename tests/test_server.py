"""``eliza serve`` against real clients: the official ``openai`` package and
``curl``, on a server this module starts on a loopback port with the cached
default models (skipped when Gemma is not cached; speech and diarization
tests need their models too). Greedy outputs are checked against
``eliza.LLM`` run in this process with the same settings."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import eliza
from eliza import models

sys.path.insert(0, str(Path(__file__).resolve().parent / "diar"))

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

REPO = Path(__file__).resolve().parents[1]
KEY = "test-key-22"
MAX_INPUT = 2000


def _gemma() -> Path | None:
    spec = models.MODELS["gemma3-270m"]
    return models.cache_dir() / spec.filename if models.is_cached("gemma3-270m") else None


def _has_diarizer() -> bool:
    try:
        models.diarization_model_paths(install=False)
    except ImportError:
        return False
    return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    def __init__(self, url: str, proc: subprocess.Popen[bytes], tts: bool, diarizer: bool) -> None:
        self.url, self.proc, self.tts, self.diarizer = url, proc, tts, diarizer

    def client(self, **kw: object) -> Any:
        return openai.OpenAI(base_url=self.url + "/v1", api_key=KEY, max_retries=0, timeout=120, **kw)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    gemma = _gemma()
    if gemma is None:
        pytest.skip("gemma3-270m is not cached")
    tts, diarizer = models.is_cached(models.KOKORO), _has_diarizer()
    port = _free_port()
    cmd = [sys.executable, "-m", "eliza", "serve", "--llm", f"gemma={gemma}", "--port", str(port),
           "--api-key", KEY, "--threads", "2", "--ctx", "1024", "--max-input-chars", str(MAX_INPUT)]
    cmd += ["--tts"] if tts else []
    cmd += ["--diarizer"] if diarizer else []
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "sdk"), env.get("PYTHONPATH", "")])
    log = tmp_path_factory.mktemp("server") / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            ready = httpx.get(url + "/v1/models", headers={"Authorization": f"Bearer {KEY}"}, timeout=2)
            if ready.status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"eliza serve did not start: {log.read_text()[-3000:]}")
        time.sleep(0.3)
    yield Server(url, proc, tts, diarizer)
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


@pytest.fixture(scope="module")
def reference() -> Iterator[eliza.LLM]:
    gemma = _gemma()
    if gemma is None:
        pytest.skip("gemma3-270m is not cached")
    with eliza.LLM(gemma, n_threads=1, context_size=1024) as llm:
        yield llm


def _greedy(llm: eliza.LLM, prompt: str, n: int, add_bos: bool = True) -> str:
    return llm.generate(prompt, max_tokens=n, temperature=0, top_k=0, top_p=1.0, min_p=0.0, add_bos=add_bos)


def test_models_list(server: Server) -> None:
    ids = [m.id for m in server.client().models.list()]
    assert "gemma" in ids
    assert ("kokoro-82m" in ids) == server.tts
    assert ("pyannote-diarization" in ids) == server.diarizer


def test_completion_matches_the_library(server: Server, reference: eliza.LLM) -> None:
    prompt = "The capital of France is"
    r = server.client().completions.create(model="gemma", prompt=prompt, max_tokens=8, temperature=0)
    assert r.choices[0].text == _greedy(reference, prompt, 8)
    assert r.choices[0].finish_reason == "length"
    assert r.usage is not None and r.usage.completion_tokens == 8 and r.usage.prompt_tokens == 6
    assert r.usage.total_tokens == 14


def test_completion_stop_string(server: Server, reference: eliza.LLM) -> None:
    prompt = "1, 2, 3, 4,"
    full = _greedy(reference, prompt, 12)
    stop = full.strip()[2:4] if len(full.strip()) > 4 else ","
    r = server.client().completions.create(model="gemma", prompt=prompt, max_tokens=12, temperature=0,
                                           stop=[stop])
    assert r.choices[0].finish_reason == "stop"
    assert stop not in r.choices[0].text and full.startswith(r.choices[0].text)


def test_chat_and_streaming_chat_agree(server: Server, reference: eliza.LLM) -> None:
    from eliza.server import render_chat

    messages = [{"role": "user", "content": "Name a colour."}]
    client = server.client()
    whole = client.chat.completions.create(model="gemma", messages=messages, max_tokens=10, temperature=0)
    text = whole.choices[0].message.content
    assert whole.choices[0].message.role == "assistant" and text
    assert text == _greedy(reference, render_chat(None, messages), 10)
    pieces, usage = [], None
    chunks = client.chat.completions.create(model="gemma", messages=messages, max_tokens=10, temperature=0,
                                            stream=True)
    for chunk in chunks:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        usage = chunk.usage or usage
    assert "".join(pieces) == text
    assert usage is not None and usage.completion_tokens == 10


def test_seed_repeats_a_sampled_completion(server: Server) -> None:
    client = server.client()
    a, b = (client.completions.create(model="gemma", prompt="Once upon a time", max_tokens=8, temperature=0.9,
                                      top_p=0.9, seed=7).choices[0].text for _ in range(2))
    assert a == b


def test_speech_to_a_file(server: Server, tmp_path: Path) -> None:
    if not server.tts:
        pytest.skip("the Kokoro model is not cached")
    out = tmp_path / "hi.wav"
    with server.client().audio.speech.with_streaming_response.create(
        model="kokoro-82m", voice="af_heart", input="Hello there.", response_format="wav"
    ) as r:
        r.stream_to_file(out)
    with wave.open(str(out)) as w:
        assert w.getframerate() == 24000 and w.getnframes() > 12000
    slow = server.client().audio.speech.create(model="kokoro-82m", voice="af_heart", input="Hello there.",
                                               response_format="pcm", speed=0.5)
    fast = server.client().audio.speech.create(model="kokoro-82m", voice="af_heart", input="Hello there.",
                                               response_format="pcm", speed=2.0)
    assert len(slow.content) > 2 * len(fast.content) > 0


def test_curl(server: Server, tmp_path: Path) -> None:
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("no curl")
    auth = ["-H", f"Authorization: Bearer {KEY}"]
    body = json.dumps({"model": "gemma", "prompt": "Hello", "max_tokens": 4, "stream": True})
    run = subprocess.run([curl, "-s", "-N", *auth, "-H", "Content-Type: application/json",
                          server.url + "/v1/completions", "-d", body],
                         capture_output=True, text=True, timeout=60)
    events = [line[6:] for line in run.stdout.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and len(events) >= 3
    assert json.loads(events[-2])["usage"]["completion_tokens"] == 4
    if server.diarizer:
        from diar_models_util import speech_like

        wav = tmp_path / "talk.wav"
        eliza.write_wav(wav, speech_like(6, 10.0), 16000)
        run = subprocess.run([curl, "-s", *auth, server.url + "/v1/audio/diarizations", "-F", f"file=@{wav}",
                              "-F", "response_format=rttm"], capture_output=True, text=True, timeout=120)
        assert run.stdout.startswith("SPEAKER talk 1 "), run.stdout
        run = subprocess.run([curl, "-s", *auth, server.url + "/v1/audio/diarizations", "-F", f"file=@{wav}"],
                             capture_output=True, text=True, timeout=120)
        doc = json.loads(run.stdout)
        assert doc["segments"] and doc["segments"][0]["speaker"] == "SPEAKER_00"
        assert eliza.to_rttm([]) == ""


def test_eight_concurrent_streaming_clients(server: Server, reference: eliza.LLM) -> None:
    prompts = [f"Item {i}: the word for number {i} in French is" for i in range(8)]
    want = {p: _greedy(reference, p, 10) for p in prompts}
    got: dict[str, str] = {}
    errors: list[BaseException] = []

    def client(prompt: str) -> None:
        try:
            pieces = [c.choices[0].text for c in server.client().completions.create(
                model="gemma", prompt=prompt, max_tokens=10, temperature=0, stream=True) if c.choices]
            got[prompt] = "".join(pieces)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=client, args=(p,)) for p in prompts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not errors, errors
    assert got == want


def test_disconnect_mid_stream_frees_the_handle(server: Server) -> None:
    body = {"model": "gemma", "prompt": "Once upon a time", "max_tokens": 1000, "temperature": 1.0,
            "stream": True}
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.stream("POST", server.url + "/v1/completions", json=body, headers=headers, timeout=60) as r:
        assert r.status_code == 200
        for n, _ in enumerate(r.iter_lines()):
            if n >= 6:
                break  # leaves the stream: the connection closes
    t0 = time.monotonic()
    r2 = server.client().completions.create(model="gemma", prompt="Hi", max_tokens=2, temperature=0)
    # 1000 tokens would take tens of seconds; a cancelled stream frees the model at once.
    assert time.monotonic() - t0 < 8.0
    assert r2.usage is not None and r2.usage.completion_tokens == 2


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ("{not json", 400, None),
        (json.dumps({"model": "nope", "prompt": "x"}), 404, "model_not_found"),
        (json.dumps({"model": "gemma", "prompt": "x" * (MAX_INPUT + 1)}), 413, "input_too_large"),
        (json.dumps({"model": "gemma", "prompt": "x", "temperature": -1}), 400, None),
        (json.dumps({"model": "gemma", "prompt": "x", "max_tokens": 0}), 400, None),
        (json.dumps({"model": "gemma", "prompt": ""}), 400, None),
        (json.dumps(["a", "list"]), 400, None),
    ],
)
def test_bad_requests_get_openai_errors(server: Server, body: str, status: int, code: str | None) -> None:
    r = httpx.post(server.url + "/v1/completions", content=body, timeout=30,
                   headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["message"] and err["type"] == "invalid_request_error"
    assert err["code"] == code


def test_wrong_or_missing_key_is_401(server: Server) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
        r = httpx.get(server.url + "/v1/models", headers=headers, timeout=10)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        wrong = openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0)
        wrong.models.list()


def test_render_chat_uses_the_template_in_a_sandbox() -> None:
    from eliza.server import ApiError, render_chat

    template = ("{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>"
                "{% endfor %}"
                "{% if add_generation_prompt %}<assistant>{% endif %}")
    msgs = [{"role": "user", "content": "hi"}]
    assert render_chat(template, msgs, bos_token="<bos>") == "<bos><user>hi</user><assistant>"
    with pytest.raises(ApiError):
        render_chat("{{ raise_exception('no system role') }}", msgs)
    with pytest.raises(ApiError):
        render_chat("{{ ''.__class__.__mro__[1].__subclasses__() }}", msgs)
