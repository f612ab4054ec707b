"""Chat prompts from a list of messages.

Two renderers:

* :func:`render_jinja` runs a model's ``tokenizer.chat_template`` (Jinja)
  with ``jinja2`` in the environment Hugging Face transformers gives chat
  templates (sandboxed, ``trim_blocks`` and ``lstrip_blocks``, loop
  controls, the ``{% generation %}`` tag, ``tojson`` without HTML escaping,
  ``raise_exception`` and ``strftime_now``), so the prompt is byte for byte
  the one transformers' ``apply_chat_template`` makes;
* :func:`render_builtin` is libeliza's C renderer (``eliza_llm_chat_apply``):
  llama.cpp's built-in templates (chatml, llama3, gemma, phi3, granite, ...),
  found by name or recognized in a Jinja template as llama.cpp does, for
  hosts without ``jinja2`` and for models without a template.

Example::

    msgs = [{"role": "user", "content": "Hi"}]
    prompt = eliza.chat.render_builtin("chatml", msgs)
    # '<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n'
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ._native import ChatMessage, lib
from .errors import FormatError, InvalidArgumentError, Status, check

__all__ = ["ChatTemplateError", "Message", "jinja_available", "render_builtin", "render_jinja",
           "template_name"]

Message = Mapping[str, Any]


class ChatTemplateError(FormatError):
    """A chat template that does not parse, or that refuses the messages
    (its ``raise_exception``)."""


def jinja_available() -> bool:
    """Whether jinja2 (>= 3.1) can be imported."""
    try:
        import jinja2
    except ImportError:
        return False
    major, minor = (int(x) for x in jinja2.__version__.split(".")[:2])
    return (major, minor) >= (3, 1)


def _environment() -> Any:
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(jinja2.ext.Extension):
        """``{% generation %}...{% endgeneration %}``: marks the assistant's
        text for training masks; rendering keeps the body as it is."""

        tags = {"generation"}  # noqa: RUF012 (jinja2.ext.Extension declares it so)

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller: Any) -> str:
            return str(caller())

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
               separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def _plain(messages: Sequence[Message]) -> list[dict[str, Any]]:
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or "role" not in m:
            raise InvalidArgumentError(Status.E_INVALID_ARG, f"message {i} is not a mapping with a 'role'")
        out.append(dict(m))
    return out


def render_jinja(template: str, messages: Sequence[Message], *, add_generation_prompt: bool = True,
                 bos_token: str = "", eos_token: str = "", tools: Sequence[Mapping[str, Any]] | None = None,
                 **variables: Any) -> str:
    """The prompt ``template`` (Jinja text) renders for ``messages``.

    ``variables`` reach the template as they do in transformers
    (``enable_thinking=False``, ...). A template that does not parse or
    that raises: :class:`ChatTemplateError` with Jinja's message and line.
    """
    import jinja2

    try:
        compiled = _environment().from_string(template)
    except jinja2.TemplateSyntaxError as e:
        raise ChatTemplateError(Status.E_FORMAT,
                                f"chat template does not parse: {e.message} (line {e.lineno})") from e
    plain = _plain(messages)
    try:
        text: str = compiled.render(messages=plain, add_generation_prompt=add_generation_prompt,
                                    bos_token=bos_token, eos_token=eos_token,
                                    tools=list(tools) if tools is not None else None, documents=None,
                                    **variables)
    except Exception as e:  # a template is a program: any of its errors is the template's
        raise ChatTemplateError(Status.E_FORMAT, f"chat template failed: {type(e).__name__}: {e}") from e
    return text


def _c_messages(messages: Sequence[Message]) -> tuple[Any, list[bytes]]:
    keep: list[bytes] = []
    arr = (ChatMessage * max(len(messages), 1))()
    for i, m in enumerate(_plain(messages)):
        content = m.get("content", "")
        if not isinstance(content, str):
            raise InvalidArgumentError(Status.E_INVALID_ARG,
                                       f"message {i}: the built-in templates take text content only")
        role, text = str(m["role"]).encode("utf-8"), content.encode("utf-8")
        if b"\0" in role or b"\0" in text:
            raise InvalidArgumentError(Status.E_INVALID_ARG, f"message {i} contains a NUL character")
        keep += [role, text]
        arr[i].role, arr[i].content = role, text
    return arr, keep


def render_builtin(template: str | None, messages: Sequence[Message], *, add_generation_prompt: bool = True,
                   llm_handle: Any = None) -> str:
    """The prompt libeliza's C renderer makes (llama.cpp's
    ``llama_chat_apply_template``). ``template`` is a name ("chatml",
    "llama3", ...) or Jinja text recognized by its markers; None takes the
    model's own (``llm_handle`` of an open :class:`eliza.LLM`). An unknown
    template: :class:`eliza.UnsupportedError`."""
    arr, _keep = _c_messages(messages)
    out = ctypes.c_char_p()
    n = ctypes.c_size_t()
    tmpl = template.encode("utf-8") if template is not None else None
    check(lib().eliza_llm_chat_apply(llm_handle, tmpl, arr, len(messages), int(add_generation_prompt),
                                     ctypes.byref(out), ctypes.byref(n)))
    try:
        return ctypes.string_at(out, n.value).decode("utf-8")
    finally:
        lib().eliza_free(ctypes.cast(out, ctypes.c_void_p))


def template_name(template: str) -> str | None:
    """The built-in template ``template`` names or is recognized as
    ("chatml", "gemma", ...), or None."""
    name = lib().eliza_chat_template_name(template.encode("utf-8"))
    return name.decode("ascii") if name else None
