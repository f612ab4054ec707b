#!/usr/bin/env python3
"""Writes tests/data/llm_chat_goldens.json: chat prompts as llama.cpp's
llama_chat_apply_template renders them (libeliza's C renderer is held to
them) and as Hugging Face transformers renders the Jinja templates
(libeliza's jinja2 renderer is held to them).

    python tests/tools/llama_cpp.py      # llama.cpp 0.3.36 built once, cached
    python tests/llm/make_chat_goldens.py

Templates: every built-in name of llama.cpp 0.3.36 (llama-chat.cpp), for
each name a text of only the markers that detect it (MARKERS), and the
real chat templates it ships under models/templates/ (those under 5,000
bytes, stored whole in the goldens: Qwen 2.5/3, Llama 3.x, Gemma 2, Phi-3.5,
SmolLM3, Granite 3.3, DeepSeek R1 distills, LFM2, Kimi K2, ...). For each, the
CONVERSATIONS below with add_generation_prompt on and off: llama.cpp's prompt
(null where it does not know the template) and, for Jinja templates,
transformers' render_jinja_template (bos "<s>", eos "</s>"), or null where
the template refuses the conversation.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests"))

GOLDENS = REPO / "tests" / "data" / "llm_chat_goldens.json"
MAX_TEMPLATE_BYTES = 5000
BOS, EOS = "<s>", "</s>"

CONVERSATIONS: list[list[tuple[str, str]]] = [
    [("system", "You are helpful. "), ("user", " Hello! "), ("assistant", " Hi there \n"),
     ("user", "How are you?")],
    [("user", "Just one question, with ünïcödé and 中文?")],
    [("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d")],
    [("assistant", "starts"), ("tool", "tool out"), ("user", "u")],
    [("system", "sys only")],
    [("system", "s"), ("user", "call f"), ("assistant_tool_call", '{"name": "f"}'), ("tool", "42"),
     ("assistant", "It is 42.")],
]

# llama.cpp 0.3.36's LLM_CHAT_TEMPLATES names.
BUILTIN_NAMES = (
    "chatml", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip", "mistral-v1", "mistral-v3",
    "mistral-v3-tekken", "mistral-v7", "mistral-v7-tekken", "phi3", "phi4", "falcon3", "zephyr",
    "monarch", "gemma", "orion", "openchat", "vicuna", "vicuna-orca", "deepseek", "deepseek2",
    "deepseek3", "deepseek-ocr", "command-r", "llama3", "chatglm3", "chatglm4", "glmedge", "minicpm",
    "exaone3", "exaone4", "exaone-moe", "rwkv-world", "granite", "granite-4.0", "granite-4.1",
    "gigachat", "megrez", "yandex", "bailing", "bailing-think", "bailing2", "llama4", "smolvlm",
    "hunyuan-moe", "gpt-oss", "hunyuan-dense", "hunyuan-vl", "kimi-k2", "seed_oss", "grok-2",
    "pangu-embedded", "solar-open",
)


FW, LB = "\uff5c", "\u2581"  # FULLWIDTH VERTICAL LINE, LOWER ONE EIGHTH BLOCK
# For each name, a text holding only the markers by which llama.cpp's
# llm_chat_detect_template recognizes it (its rules, tried in its order), so
# that detection and rendering are each held to llama.cpp rule by rule.
MARKERS: dict[str, str] = {
    "chatml": "<|im_start|>",
    "phi4": "<|im_start|><|im_sep|>",
    "smolvlm": "<|im_start|><end_of_utterance>",
    "mistral-v7": "[INST][SYSTEM_PROMPT]",
    "mistral-v1": "' [INST] ' + system_message",
    "mistral-v3-tekken": '[AVAILABLE_TOOLS]"[INST]"',
    "mistral-v3": "[AVAILABLE_TOOLS][INST]",
    "llama2-sys-strip": "[INST]content.strip()",
    "llama2-sys-bos": "bos_token + '[INST]<<SYS>>",
    "llama2-sys": "[INST]<<SYS>>",
    "llama2": "[INST]",
    "phi3": "<|assistant|><|end|>",
    "chatglm4": "[gMASK]<sop>",
    "exaone-moe": "<|assistant|><|user|><|tool_declare|>",
    "falcon3": "<|assistant|><|user|></s>",
    "glmedge": "<|{{ item['role'] }}|><|begin_of_image|>",
    "zephyr": "<|user|><|endoftext|>",
    "monarch": "bos_token + message['role']",
    "gemma": "<start_of_turn>",
    "orion": "'\\n\\nAssistant: ' + eos_token",
    "openchat": "GPT4 Correct ",
    "vicuna-orca": "SYSTEM: USER: ASSISTANT: ",
    "vicuna": "USER: ASSISTANT: ",
    "deepseek": "### Instruction:<|EOT|>",
    "command-r": "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>",
    "llama3": "<|start_header_id|><|end_header_id|>",
    "chatglm3": "[gMASK]sop",
    "minicpm": "<\u7528\u6237>",
    "deepseek2": "'Assistant: ' + message['content'] + eos_token",
    "deepseek3": f"<{FW}Assistant{FW}><{FW}User{FW}><{FW}end{LB}of{LB}sentence{FW}>",
    "exaone4": "[|system|][|assistant|][|endofturn|][|tool|]",
    "exaone3": "[|system|][|assistant|][|endofturn|]",
    "rwkv-world": "rwkv-world",
    "granite-4.0": "<|start_of_role|><tool_call>g4_default_system_message",
    "granite-4.1": "<|start_of_role|><tools>",
    "granite": "<|start_of_role|>",
    "gigachat": "message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]",
    "megrez": "<|role_start|>",
    "yandex": " \u0410\u0441\u0441\u0438\u0441\u0442\u0435\u043d\u0442:",
    "bailing": "<role>ASSISTANT</role>'HUMAN'",
    "bailing-think": '<role>ASSISTANT</role>"HUMAN"<think>',
    "bailing2": "<role>ASSISTANT</role><role>HUMAN</role><|role_end|>",
    "llama4": "<|header_start|><|header_end|>",
    "dots1": "<|endofuserprompt|>",
    "hunyuan-moe": "<|extra_0|><|extra_4|>",
    "gpt-oss": "<|start|><|channel|>",
    "hunyuan-vl": f"<{FW}hy_Assistant{FW}><{FW}hy_begin{LB}of{LB}sentence{FW}>",
    "hunyuan-dense": f"<{FW}hy_Assistant{FW}><{FW}hy_place{LB}holder{LB}no{LB}3{FW}>",
    "kimi-k2": "<|im_assistant|>assistant<|im_middle|>",
    "seed_oss": "<seed:bos>",
    "grok-2": "'Assistant: '  + message['content'] + '<|separator|>",
    "pangu-embedded": "[unused9]\u7cfb\u7edf\uff1a[unused10]",
    "solar-open": "<|begin|><|end|><|content|>",
}


def messages(conv: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"role": r, "content": c} for r, c in conv]


def transformers_render(template: str, conv: list[tuple[str, str]], add: bool) -> str | None:
    """transformers' rendering, or None where the template raises."""
    from transformers.utils.chat_template_utils import render_jinja_template

    try:
        out = render_jinja_template([messages(conv)], chat_template=template, add_generation_prompt=add,
                                    bos_token=BOS, eos_token=EOS)
    except Exception:
        return None
    text: str = out[0][0]
    return text


def templates(src: Path) -> dict[str, str]:
    """Label -> template text: the names, then llama.cpp's small .jinja files."""
    out = {name: name for name in BUILTIN_NAMES}
    out.update({f"markers:{name}": text for name, text in MARKERS.items()})
    for p in sorted((src / "models" / "templates").glob("*.jinja")):
        if p.stat().st_size < MAX_TEMPLATE_BYTES:
            out[p.name] = p.read_text(encoding="utf-8")
    return out


def main() -> int:
    from tools.libllama import LibLlama
    from tools.llama_cpp import cache_dir

    lib = LibLlama.load()
    if lib is None:
        print("llama.cpp is not built: run tests/tools/llama_cpp.py first", file=sys.stderr)
        return 1
    cases: list[dict[str, Any]] = []
    for label, tmpl in templates(cache_dir() / "src").items():
        entry: dict[str, Any] = {"label": label, "template": tmpl, "llama_cpp": [], "jinja": []}
        for conv in CONVERSATIONS:
            for add in (True, False):
                entry["llama_cpp"].append(lib.chat_apply_template(tmpl, conv, add))
                if label.endswith(".jinja"):
                    entry["jinja"].append(transformers_render(tmpl, conv, add))
        cases.append(entry)
    import transformers

    out = {
        "header": {
            "reference": "llama.cpp of llama-cpp-python 0.3.36 (llama_chat_apply_template); "
                         f"transformers {transformers.__version__} (render_jinja_template)",
            "bos_token": BOS,
            "eos_token": EOS,
            "order": "per conversation: add_generation_prompt true, then false",
        },
        "conversations": CONVERSATIONS,
        "templates": cases,
    }
    GOLDENS.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(cases)} templates -> {GOLDENS} ({GOLDENS.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
