"""Chat prompts: libeliza's C renderer against llama.cpp's
llama_chat_apply_template, its jinja2 renderer against transformers, and
``LLM.chat`` / ``eliza chat`` on the real Gemma 3 file.

Normal runs compare with tests/data/llm_chat_goldens.json (written by
tests/llm/make_chat_goldens.py) and with transformers where it is
installed; ``pytest -m reference`` renders every template llama.cpp ships
live with libllama.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import eliza
from eliza import chat
from eliza._native import ChatMessage, lib

REPO = Path(__file__).resolve().parents[2]
GOLDENS = REPO / "tests" / "data" / "llm_chat_goldens.json"

_spec = importlib.util.spec_from_file_location("make_chat_goldens",
                                               Path(__file__).with_name("make_chat_goldens.py"))
assert _spec and _spec.loader
gen = importlib.util.module_from_spec(_spec)
sys.modules["make_chat_goldens"] = gen
_spec.loader.exec_module(gen)

_DATA: dict[str, Any] = json.loads(GOLDENS.read_text(encoding="utf-8"))
CASES: list[dict[str, Any]] = _DATA["templates"]
JINJA_CASES = [c for c in CASES if c["label"].endswith(".jinja")]


def _runs() -> list[tuple[list[tuple[str, str]], bool]]:
    return [(conv, add) for conv in gen.CONVERSATIONS for add in (True, False)]


def _builtin(template: str, conv: list[tuple[str, str]], add: bool) -> str | None:
    try:
        return chat.render_builtin(template, gen.messages(conv), add_generation_prompt=add)
    except eliza.UnsupportedError:
        return None


def test_goldens_cover_every_builtin_name_and_the_conversations() -> None:
    assert [c["label"] for c in CASES[:len(gen.BUILTIN_NAMES)]] == list(gen.BUILTIN_NAMES)
    assert _DATA["conversations"] == [[list(t) for t in conv] for conv in gen.CONVERSATIONS]
    assert len(JINJA_CASES) >= 30
    assert [c["label"] for c in CASES if c["label"].startswith("markers:")] == [
        f"markers:{name}" for name in gen.MARKERS]


@pytest.mark.parametrize("name", list(gen.MARKERS))
def test_each_detection_rule_names_its_template(name: str) -> None:
    # The goldens hold llama.cpp's rendering of each marker text; this holds
    # libeliza's detection of it to the name llama.cpp's rule gives.
    assert chat.template_name(gen.MARKERS[name]) == name


@pytest.mark.parametrize("case", CASES, ids=[c["label"] for c in CASES])
def test_builtin_renderer_matches_llama_cpp(case: dict[str, Any]) -> None:
    got = [_builtin(case["template"], conv, add) for conv, add in _runs()]
    assert got == case["llama_cpp"]


@pytest.mark.parametrize("case", JINJA_CASES, ids=[c["label"] for c in JINJA_CASES])
def test_jinja_renderer_matches_transformers(case: dict[str, Any]) -> None:
    if not chat.jinja_available():
        pytest.skip("jinja2 is not installed")
    got: list[str | None] = []
    for conv, add in _runs():
        try:
            got.append(chat.render_jinja(case["template"], gen.messages(conv), add_generation_prompt=add,
                                         bos_token=gen.BOS, eos_token=gen.EOS))
        except chat.ChatTemplateError:
            got.append(None)
    # Templates that print today's date (strftime_now) differ from the goldens
    # on another day: compare those with transformers itself.
    if "strftime_now" in case["template"]:
        pytest.importorskip("transformers")
        want = [gen.transformers_render(case["template"], conv, add) for conv, add in _runs()]
    else:
        want = case["jinja"]
    assert got == want


def test_template_names_are_recognized() -> None:
    assert chat.template_name("chatml") == "chatml"
    qwen = next(c for c in JINJA_CASES if c["label"] == "Qwen-Qwen2.5-7B-Instruct.jinja")
    assert chat.template_name(qwen["template"]) == "chatml"
    gemma = next(c for c in JINJA_CASES if c["label"] == "google-gemma-2-2b-it.jinja")
    assert chat.template_name(gemma["template"]) == "gemma"
    assert chat.template_name("{{ messages }}") is None


def test_unknown_template_is_refused_clearly() -> None:
    with pytest.raises(eliza.UnsupportedError, match="chat template not recognized"):
        chat.render_builtin("{% for m in messages %}{{ m.content }}{% endfor %}",
                            [{"role": "user", "content": "x"}])


def test_template_that_does_not_parse_is_a_clear_error() -> None:
    if not chat.jinja_available():
        pytest.skip("jinja2 is not installed")
    with pytest.raises(eliza.ChatTemplateError, match=r"does not parse: .* \(line 1\)") as e:
        chat.render_jinja("{% for m in messages %}{{ m.content }", [{"role": "user", "content": "x"}])
    assert isinstance(e.value, eliza.FormatError)
    with pytest.raises(eliza.ChatTemplateError, match="roles must alternate"):
        chat.render_jinja("{{ raise_exception('roles must alternate') }}", [])


def test_c_renderer_refuses_a_message_without_content() -> None:
    msgs = (ChatMessage * 1)(ChatMessage(b"user", None))
    out, n = ctypes.c_char_p(), ctypes.c_size_t()
    rc = lib().eliza_llm_chat_apply(None, b"chatml", msgs, 1, 1, ctypes.byref(out), ctypes.byref(n))
    assert rc == eliza.Status.E_INVALID_ARG and out.value is None
    assert "message 0 has no content" in lib().eliza_last_error().decode()
    rc = lib().eliza_llm_chat_apply(None, None, msgs, 1, 1, ctypes.byref(out), ctypes.byref(n))
    assert rc == eliza.Status.E_INVALID_ARG


@pytest.mark.reference
def test_every_llama_cpp_template_matches_live() -> None:
    from tools.libllama import LibLlama
    from tools.llama_cpp import cache_dir

    lib_llama = LibLlama.load()
    if lib_llama is None:
        pytest.skip("llama.cpp is not built (tests/tools/llama_cpp.py)")
    src = cache_dir() / "src"
    tmpls = {**gen.templates(src), **{p.name: p.read_text(encoding="utf-8")
                                     for p in (src / "models" / "templates").glob("*.jinja")}}
    for label, tmpl in tmpls.items():
        for conv, add in _runs():
            assert _builtin(tmpl, conv, add) == lib_llama.chat_apply_template(tmpl, conv, add), label
            if label.endswith(".jinja") and "strftime_now" not in tmpl:
                try:
                    got: str | None = chat.render_jinja(tmpl, gen.messages(conv), add_generation_prompt=add,
                                                        bos_token=gen.BOS, eos_token=gen.EOS)
                except chat.ChatTemplateError:
                    got = None
                assert got == gen.transformers_render(tmpl, conv, add), label


# ---- LLM.chat and eliza chat on Gemma 3 ------------------------------------------------------

def test_llm_chat_prompt_and_reply(gemma_path: Path) -> None:
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    with eliza.LLM(gemma_path, context_size=256) as llm:
        assert llm.chat_template is None
        prompt = llm.chat_prompt(msgs, template="gemma")
        assert prompt == ("<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n"
                          "<start_of_turn>model\n")
        assert llm.chat_prompt(msgs) == chat.render_builtin("chatml", msgs)
        jinja = ("{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}"
                 "<end_of_turn>\n{% endfor %}<start_of_turn>model{{ '\\n' }}")
        if chat.jinja_available():
            assert llm.chat_prompt(msgs, template=jinja) == "<bos>" + prompt
        reply = llm.chat(msgs, template="gemma", max_tokens=8, temperature=0)
        stats = llm.last_stats
        assert stats is not None and stats.generated_tokens <= 8
        assert stats.prompt_tokens == len(llm.tokenize(prompt, add_bos=True, special=True))
        assert reply == llm.generate(prompt, max_tokens=8, temperature=0)
        if chat.jinja_available():
            # The template's own <bos>: no second one.
            llm.chat(msgs, template=jinja, max_tokens=1, temperature=0)
            again = llm.last_stats
            assert again is not None and again.prompt_tokens == stats.prompt_tokens


def _chat_cli(gemma_path: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "sdk") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-m", "eliza", "chat", str(gemma_path), "--template", "gemma",
                             "--temp", "0", "--ctx", "1024", *extra], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_eliza_chat_keeps_history(gemma_path: Path) -> None:
    p = _chat_cli(gemma_path, "--max-tokens", "6")
    out, err = p.communicate("Hello\nWhat did I say?\n/reset\nAgain\n/exit\n", timeout=300)
    assert p.returncode == 0, err
    assert len(out.strip("\n").split("\n")) >= 3


def test_eliza_chat_ctrl_c_stops_the_reply_not_the_program(gemma_path: Path) -> None:
    p = _chat_cli(gemma_path, "--max-tokens", "0")
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write("Write a very long story about a dragon.\n")
    p.stdin.flush()
    first = p.stdout.read(1)          # the reply has started
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    p.stdin.write("/exit\n")
    p.stdin.flush()
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert "[stopped]" in first + out


def _read_until(fd: int, marker: bytes, seconds: float) -> bytes:
    """Bytes from ``fd`` until ``marker`` has arrived; fails after
    ``seconds`` instead of hanging the suite."""
    got = b""
    deadline = time.monotonic() + seconds
    while marker not in got:
        left = deadline - time.monotonic()
        assert left > 0, f"no {marker!r} within {seconds} s; got {got[-200:]!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            assert chunk, f"the output ended before {marker!r}; got {got[-200:]!r}"
            got += chunk
    return got


def test_eliza_chat_ctrl_c_at_any_moment_of_a_reply(gemma_path: Path) -> None:
    # Ctrl-C early and late in consecutive replies of one session (it once
    # hung the REPL when the interrupt landed in the stream's bookkeeping):
    # every reply stops, the program goes on and exits cleanly.
    env = {**os.environ, "PYTHONPATH": str(REPO / "sdk") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.Popen([sys.executable, "-m", "eliza", "chat", str(gemma_path), "--template", "gemma",
                          "--temp", "0", "--ctx", "2048", "--max-tokens", "0"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert p.stdin is not None and p.stdout is not None
    fd = p.stdout.fileno()
    try:
        for delay in (0.0, 0.003, 0.02, 0.1, 0.4):
            p.stdin.write(b"Tell me a very long story about a lighthouse.\n")
            p.stdin.flush()
            assert os.read(fd, 1)      # the reply has started
            time.sleep(delay)
            p.send_signal(signal.SIGINT)
            _read_until(fd, b"[stopped]\n", 120)
        p.stdin.write(b"/exit\n")
        p.stdin.flush()
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
