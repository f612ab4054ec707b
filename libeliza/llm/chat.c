/* Chat templates: llama.cpp's llm_chat_detect_template and
 * llm_chat_apply_template (llama-chat.cpp, llama.cpp 0.3.36), rule for rule.
 * Each template is a few lines; the markers and the order in which they are
 * tried are llama.cpp's, so that a file gets the template llama.cpp gives it. */
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "llm/chat.h"

enum {
    T_CHATML, T_LLAMA_2, T_LLAMA_2_SYS, T_LLAMA_2_SYS_BOS, T_LLAMA_2_SYS_STRIP, T_MISTRAL_V1,
    T_MISTRAL_V3, T_MISTRAL_V3_TEKKEN, T_MISTRAL_V7, T_MISTRAL_V7_TEKKEN, T_PHI_3, T_PHI_4,
    T_FALCON_3, T_ZEPHYR, T_MONARCH, T_GEMMA, T_ORION, T_OPENCHAT, T_VICUNA, T_VICUNA_ORCA,
    T_DEEPSEEK, T_DEEPSEEK_2, T_DEEPSEEK_3, T_DEEPSEEK_OCR, T_COMMAND_R, T_LLAMA_3, T_CHATGLM_3,
    T_CHATGLM_4, T_GLMEDGE, T_MINICPM, T_EXAONE_3, T_EXAONE_4, T_EXAONE_MOE, T_RWKV_WORLD,
    T_GRANITE_3_X, T_GRANITE_4_0, T_GRANITE_4_1, T_GIGACHAT, T_MEGREZ, T_YANDEX, T_BAILING,
    T_BAILING_THINK, T_BAILING2, T_LLAMA4, T_SMOLVLM, T_DOTS1, T_HUNYUAN_MOE, T_OPENAI_MOE,
    T_HUNYUAN_DENSE, T_HUNYUAN_VL, T_KIMI_K2, T_SEED_OSS, T_GROK_2, T_PANGU_EMBED, T_SOLAR_OPEN,
    T_COUNT
};

/* llama.cpp's names (LLM_CHAT_TEMPLATES); dots1 has none there. */
static const char *const k_names[T_COUNT] = {
    [T_CHATML] = "chatml", [T_LLAMA_2] = "llama2", [T_LLAMA_2_SYS] = "llama2-sys",
    [T_LLAMA_2_SYS_BOS] = "llama2-sys-bos", [T_LLAMA_2_SYS_STRIP] = "llama2-sys-strip",
    [T_MISTRAL_V1] = "mistral-v1", [T_MISTRAL_V3] = "mistral-v3",
    [T_MISTRAL_V3_TEKKEN] = "mistral-v3-tekken", [T_MISTRAL_V7] = "mistral-v7",
    [T_MISTRAL_V7_TEKKEN] = "mistral-v7-tekken", [T_PHI_3] = "phi3", [T_PHI_4] = "phi4",
    [T_FALCON_3] = "falcon3", [T_ZEPHYR] = "zephyr", [T_MONARCH] = "monarch", [T_GEMMA] = "gemma",
    [T_ORION] = "orion", [T_OPENCHAT] = "openchat", [T_VICUNA] = "vicuna",
    [T_VICUNA_ORCA] = "vicuna-orca", [T_DEEPSEEK] = "deepseek", [T_DEEPSEEK_2] = "deepseek2",
    [T_DEEPSEEK_3] = "deepseek3", [T_DEEPSEEK_OCR] = "deepseek-ocr", [T_COMMAND_R] = "command-r",
    [T_LLAMA_3] = "llama3", [T_CHATGLM_3] = "chatglm3", [T_CHATGLM_4] = "chatglm4",
    [T_GLMEDGE] = "glmedge", [T_MINICPM] = "minicpm", [T_EXAONE_3] = "exaone3",
    [T_EXAONE_4] = "exaone4", [T_EXAONE_MOE] = "exaone-moe", [T_RWKV_WORLD] = "rwkv-world",
    [T_GRANITE_3_X] = "granite", [T_GRANITE_4_0] = "granite-4.0", [T_GRANITE_4_1] = "granite-4.1",
    [T_GIGACHAT] = "gigachat", [T_MEGREZ] = "megrez", [T_YANDEX] = "yandex",
    [T_BAILING] = "bailing", [T_BAILING_THINK] = "bailing-think", [T_BAILING2] = "bailing2",
    [T_LLAMA4] = "llama4", [T_SMOLVLM] = "smolvlm", [T_DOTS1] = NULL,
    [T_HUNYUAN_MOE] = "hunyuan-moe", [T_OPENAI_MOE] = "gpt-oss", [T_HUNYUAN_DENSE] = "hunyuan-dense",
    [T_HUNYUAN_VL] = "hunyuan-vl", [T_KIMI_K2] = "kimi-k2", [T_SEED_OSS] = "seed_oss",
    [T_GROK_2] = "grok-2", [T_PANGU_EMBED] = "pangu-embedded", [T_SOLAR_OPEN] = "solar-open",
};

const char *ez_chat_name(int t) {
    if (t == T_DOTS1) return "dots1";
    return t >= 0 && t < T_COUNT ? k_names[t] : NULL;
}

/* ---- recognition ------------------------------------------------------------- */

#define FW "\xEF\xBD\x9C"  /* U+FF5C FULLWIDTH VERTICAL LINE */
#define LB "\xE2\x96\x81"  /* U+2581 LOWER ONE EIGHTH BLOCK */

static int has(const char *tmpl, const char *s) { return strstr(tmpl, s) != NULL; }

int ez_chat_detect(const char *t) {
    int i;
    for (i = 0; i < T_COUNT; i++)
        if (k_names[i] && strcmp(t, k_names[i]) == 0) return i;
    if (has(t, "<|im_start|>"))
        return has(t, "<|im_sep|>") ? T_PHI_4 : has(t, "<end_of_utterance>") ? T_SMOLVLM : T_CHATML;
    if (strncmp(t, "mistral", 7) == 0 || has(t, "[INST]")) {
        if (has(t, "[SYSTEM_PROMPT]")) return T_MISTRAL_V7;
        if (has(t, "' [INST] ' + system_message") || has(t, "[AVAILABLE_TOOLS]")) {
            if (has(t, " [INST]")) return T_MISTRAL_V1;
            if (has(t, "\"[INST]\"")) return T_MISTRAL_V3_TEKKEN;
            return T_MISTRAL_V3;
        }
        if (has(t, "content.strip()")) return T_LLAMA_2_SYS_STRIP;
        if (has(t, "bos_token + '[INST]")) return T_LLAMA_2_SYS_BOS;
        if (has(t, "<<SYS>>")) return T_LLAMA_2_SYS;
        return T_LLAMA_2;
    }
    if (has(t, "<|assistant|>") && has(t, "<|end|>")) return T_PHI_3;
    if (has(t, "[gMASK]<sop>")) return T_CHATGLM_4;
    if (has(t, "<|assistant|>") && has(t, "<|user|>")) {
        if (has(t, "<|tool_declare|>")) return T_EXAONE_MOE;
        return has(t, "</s>") ? T_FALCON_3 : T_GLMEDGE;
    }
    if (has(t, "<|{{ item['role'] }}|>") && has(t, "<|begin_of_image|>")) return T_GLMEDGE;
    if (has(t, "<|user|>") && has(t, "<|endoftext|>")) return T_ZEPHYR;
    if (has(t, "bos_token + message['role']")) return T_MONARCH;
    if (has(t, "<start_of_turn>")) return T_GEMMA;
    if (has(t, "'\\n\\nAssistant: ' + eos_token")) return T_ORION;
    if (has(t, "GPT4 Correct ")) return T_OPENCHAT;
    if (has(t, "USER: ") && has(t, "ASSISTANT: "))
        return has(t, "SYSTEM: ") ? T_VICUNA_ORCA : T_VICUNA;
    if (has(t, "### Instruction:") && has(t, "<|EOT|>")) return T_DEEPSEEK;
    if (has(t, "<|START_OF_TURN_TOKEN|>") && has(t, "<|USER_TOKEN|>")) return T_COMMAND_R;
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) return T_LLAMA_3;
    if (has(t, "[gMASK]sop")) return T_CHATGLM_3;
    if (has(t, "<\xE7\x94\xA8\xE6\x88\xB7>")) return T_MINICPM; /* <用户> */
    if (has(t, "'Assistant: ' + message['content'] + eos_token")) return T_DEEPSEEK_2;
    if (has(t, "<" FW "Assistant" FW ">") && has(t, "<" FW "User" FW ">") &&
        has(t, "<" FW "end" LB "of" LB "sentence" FW ">"))
        return T_DEEPSEEK_3;
    if (has(t, "[|system|]") && has(t, "[|assistant|]") && has(t, "[|endofturn|]"))
        return has(t, "[|tool|]") ? T_EXAONE_4 : T_EXAONE_3;
    if (has(t, "rwkv-world") || has(t, "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"))
        return T_RWKV_WORLD;
    if (has(t, "<|start_of_role|>")) {
        if (has(t, "<tool_call>") || has(t, "<tools>"))
            return has(t, "g4_default_system_message") ? T_GRANITE_4_0 : T_GRANITE_4_1;
        return T_GRANITE_3_X;
    }
    if (has(t, "message['role'] + additional_special_tokens[0] + message['content'] + "
               "additional_special_tokens[1]"))
        return T_GIGACHAT;
    if (has(t, "<|role_start|>")) return T_MEGREZ;
    if (has(t, " \xD0\x90\xD1\x81\xD1\x81\xD0\xB8\xD1\x81\xD1\x82\xD0\xB5\xD0\xBD\xD1\x82:"))
        return T_YANDEX; /* " Ассистент:" */
    if (has(t, "<role>ASSISTANT</role>") && has(t, "'HUMAN'")) return T_BAILING;
    if (has(t, "<role>ASSISTANT</role>") && has(t, "\"HUMAN\"") && has(t, "<think>"))
        return T_BAILING_THINK;
    if (has(t, "<role>ASSISTANT</role>") && has(t, "<role>HUMAN</role>") && has(t, "<|role_end|>"))
        return T_BAILING2;
    if (has(t, "<|header_start|>") && has(t, "<|header_end|>")) return T_LLAMA4;
    if (has(t, "<|endofuserprompt|>")) return T_DOTS1;
    if (has(t, "<|extra_0|>") && has(t, "<|extra_4|>")) return T_HUNYUAN_MOE;
    if (has(t, "<|start|>") && has(t, "<|channel|>")) return T_OPENAI_MOE;
    if (has(t, "<" FW "hy_Assistant" FW ">") && has(t, "<" FW "hy_begin" LB "of" LB "sentence" FW ">"))
        return T_HUNYUAN_VL;
    if (has(t, "<" FW "hy_Assistant" FW ">") &&
        has(t, "<" FW "hy_place" LB "holder" LB "no" LB "3" FW ">"))
        return T_HUNYUAN_DENSE;
    if (has(t, "<|im_assistant|>assistant<|im_middle|>")) return T_KIMI_K2;
    if (has(t, "<seed:bos>")) return T_SEED_OSS;
    if (has(t, "'Assistant: '  + message['content'] + '<|separator|>")) return T_GROK_2;
    /* [unused9]系统：[unused10] */
    if (has(t, "[unused9]\xE7\xB3\xBB\xE7\xBB\x9F\xEF\xBC\x9A[unused10]")) return T_PANGU_EMBED;
    if (has(t, "<|begin|>") && has(t, "<|end|>") && has(t, "<|content|>")) return T_SOLAR_OPEN;
    return -1;
}

/* ---- rendering --------------------------------------------------------------- */

typedef struct {
    char *s;
    size_t n, cap;
    int failed;
} sbuf;

static void put_n(sbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        char *p;
        while (cap < b->n + n + 1) cap *= 2;
        p = (char *)realloc(b->s, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

/* Appends each string argument up to a NULL. */
static void put(sbuf *b, ...) {
    va_list ap;
    const char *s;
    va_start(ap, b);
    while ((s = va_arg(ap, const char *)) != NULL) put_n(b, s, strlen(s));
    va_end(ap);
}

/* The content without leading and trailing C-locale white space. */
static void put_trim(sbuf *b, const char *s) {
    size_t start = 0, end = strlen(s);
    while (start < end && isspace((unsigned char)s[start])) start++;
    while (end > start && isspace((unsigned char)s[end - 1])) end--;
    put_n(b, s + start, end - start);
}

static int is(const char *role, const char *name) { return strcmp(role, name) == 0; }

/* Role with its first byte upper-cased (openchat) or every byte (bailing). */
static void put_upper(sbuf *b, const char *role, int all) {
    size_t i, n = strlen(role);
    for (i = 0; i < n; i++) {
        char c = role[i];
        if (i == 0 || all) c = (char)toupper((unsigned char)c);
        put_n(b, &c, 1);
    }
}

#define END ((const char *)NULL)

static void mistral(sbuf *b, int t, const eliza_chat_message *m, size_t n) {
    const char *lead = t == T_MISTRAL_V1 ? " " : "", *trail = t == T_MISTRAL_V3_TEKKEN ? "" : " ";
    int inside = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        if (!inside) {
            put(b, lead, "[INST]", trail, END);
            inside = 1;
        }
        if (is(m[i].role, "system")) {
            put(b, m[i].content, "\n\n", END);
        } else if (is(m[i].role, "user")) {
            put(b, m[i].content, lead, "[/INST]", END);
        } else {
            put(b, trail, END);
            if (t == T_MISTRAL_V3)
                put_trim(b, m[i].content);
            else
                put(b, m[i].content, END);
            put(b, "</s>", END);
            inside = 0;
        }
    }
}

static void llama2(sbuf *b, int t, const eliza_chat_message *m, size_t n) {
    int inside = 1;
    size_t i;
    put(b, "[INST] ", END);
    for (i = 0; i < n; i++) {
        sbuf c = {NULL, 0, 0, 0};
        const char *content;
        if (t == T_LLAMA_2_SYS_STRIP) put_trim(&c, m[i].content);
        content = t == T_LLAMA_2_SYS_STRIP ? (c.s ? c.s : "") : m[i].content;
        if (!inside) {
            inside = 1;
            put(b, t == T_LLAMA_2_SYS_BOS ? "<s>[INST] " : "[INST] ", END);
        }
        if (is(m[i].role, "system")) {
            if (t != T_LLAMA_2)
                put(b, "<<SYS>>\n", content, "\n<</SYS>>\n\n", END);
            else
                put(b, content, "\n", END);
        } else if (is(m[i].role, "user")) {
            put(b, content, " [/INST]", END);
        } else {
            put(b, content, "</s>", END);
            inside = 0;
        }
        if (c.failed) b->failed = 1;
        free(c.s);
    }
}

static void gemma(sbuf *b, const eliza_chat_message *m, size_t n, int add_ass) {
    sbuf sys = {NULL, 0, 0, 0};
    size_t i;
    for (i = 0; i < n; i++) {
        const char *role = is(m[i].role, "assistant") ? "model" : m[i].role;
        if (is(m[i].role, "system")) {
            put_trim(&sys, m[i].content);
            continue;
        }
        put(b, "<start_of_turn>", role, "\n", END);
        if (sys.n > 0 && !is(role, "model")) {
            put_n(b, sys.s, sys.n);
            put(b, "\n\n", END);
            sys.n = 0;
        }
        put_trim(b, m[i].content);
        put(b, "<end_of_turn>\n", END);
    }
    if (add_ass) put(b, "<start_of_turn>model\n", END);
    if (sys.failed) b->failed = 1;
    free(sys.s);
}

/* Templates whose turns are "<prefix of role> content <suffix>" with an
 * optional trim: one row each. */
static int simple_turns(sbuf *b, int t, const eliza_chat_message *m, size_t n, int add_ass) {
    size_t i;
    switch (t) {
    case T_CHATML:
        for (i = 0; i < n; i++) put(b, "<|im_start|>", m[i].role, "\n", m[i].content, "<|im_end|>\n", END);
        if (add_ass) put(b, "<|im_start|>assistant\n", END);
        return 1;
    case T_PHI_3:
        for (i = 0; i < n; i++) put(b, "<|", m[i].role, "|>\n", m[i].content, "<|end|>\n", END);
        if (add_ass) put(b, "<|assistant|>\n", END);
        return 1;
    case T_PHI_4:
        for (i = 0; i < n; i++)
            put(b, "<|im_start|>", m[i].role, "<|im_sep|>", m[i].content, "<|im_end|>", END);
        if (add_ass) put(b, "<|im_start|>assistant<|im_sep|>", END);
        return 1;
    case T_FALCON_3:
        for (i = 0; i < n; i++) put(b, "<|", m[i].role, "|>\n", m[i].content, "\n", END);
        if (add_ass) put(b, "<|assistant|>\n", END);
        return 1;
    case T_ZEPHYR:
        for (i = 0; i < n; i++) put(b, "<|", m[i].role, "|>\n", m[i].content, "<|endoftext|>\n", END);
        if (add_ass) put(b, "<|assistant|>\n", END);
        return 1;
    case T_MONARCH:
        for (i = 0; i < n; i++) put(b, i ? "<s>" : "", m[i].role, "\n", m[i].content, "</s>\n", END);
        if (add_ass) put(b, "<s>assistant\n", END);
        return 1;
    case T_LLAMA_3:
        for (i = 0; i < n; i++) {
            put(b, "<|start_header_id|>", m[i].role, "<|end_header_id|>\n\n", END);
            put_trim(b, m[i].content);
            put(b, "<|eot_id|>", END);
        }
        if (add_ass) put(b, "<|start_header_id|>assistant<|end_header_id|>\n\n", END);
        return 1;
    case T_LLAMA4:
        for (i = 0; i < n; i++) {
            put(b, "<|header_start|>", m[i].role, "<|header_end|>\n\n", END);
            put_trim(b, m[i].content);
            put(b, "<|eot|>", END);
        }
        if (add_ass) put(b, "<|header_start|>assistant<|header_end|>\n\n", END);
        return 1;
    case T_CHATGLM_3:
        put(b, "[gMASK]sop", END);
        for (i = 0; i < n; i++) put(b, "<|", m[i].role, "|>\n ", m[i].content, END);
        if (add_ass) put(b, "<|assistant|>", END);
        return 1;
    case T_CHATGLM_4:
        put(b, "[gMASK]<sop>", END);
        for (i = 0; i < n; i++) put(b, "<|", m[i].role, "|>\n", m[i].content, END);
        if (add_ass) put(b, "<|assistant|>\n", END);
        return 1;
    case T_GLMEDGE:
        for (i = 0; i < n; i++) put(b, "<|", m[i].role, "|>\n", m[i].content, END);
        if (add_ass) put(b, "<|assistant|>", END);
        return 1;
    case T_MEGREZ:
        for (i = 0; i < n; i++)
            put(b, "<|role_start|>", m[i].role, "<|role_end|>", m[i].content, "<|turn_end|>", END);
        if (add_ass) put(b, "<|role_start|>assistant<|role_end|>", END);
        return 1;
    case T_OPENAI_MOE:
        for (i = 0; i < n; i++)
            put(b, "<|start|>", m[i].role, "<|message|>", m[i].content,
                is(m[i].role, "assistant") ? "<|return|>" : "<|end|>", END);
        if (add_ass) put(b, "<|start|>assistant", END);
        return 1;
    case T_SEED_OSS:
        for (i = 0; i < n; i++) {
            put(b, "<seed:bos>", m[i].role, "\n", END);
            if (is(m[i].role, "assistant"))
                put_trim(b, m[i].content);
            else
                put(b, m[i].content, END);
            put(b, "<seed:eos>", END);
        }
        if (add_ass) put(b, "<seed:bos>assistant\n", END);
        return 1;
    case T_SOLAR_OPEN:
        for (i = 0; i < n; i++) put(b, "<|begin|>", m[i].role, "<|content|>", m[i].content, "<|end|>", END);
        if (add_ass) put(b, "<|begin|>assistant", END);
        return 1;
    case T_GRANITE_3_X:
        for (i = 0; i < n; i++) {
            put(b, "<|start_of_role|>", m[i].role, "<|end_of_role|>", END);
            if (is(m[i].role, "assistant_tool_call")) put(b, "<|tool_call|>", END);
            put(b, m[i].content, "<|end_of_text|>\n", END);
        }
        if (add_ass) put(b, "<|start_of_role|>assistant<|end_of_role|>", END);
        return 1;
    case T_GRANITE_4_0:
    case T_GRANITE_4_1:
        for (i = 0; i < n; i++) {
            if (is(m[i].role, "assistant_tool_call"))
                put(b, "<|start_of_role|>assistant<|end_of_role|><|tool_call|>", END);
            else
                put(b, "<|start_of_role|>", m[i].role, "<|end_of_role|>", END);
            put(b, m[i].content, "<|end_of_text|>\n", END);
        }
        if (add_ass) put(b, "<|start_of_role|>assistant<|end_of_role|>", END);
        return 1;
    default:
        return 0;
    }
}

/* Templates that map each known role to its own markers: one message. */
typedef struct {
    const char *role, *content;
    int sys, user, asst; /* the role is system, user, assistant */
    int first, last;     /* the first, the last message */
} turn;

/* One turn of Mistral v7, OpenChat, Vicuna, DeepSeek (v1); 0 when t is none of them. */
static int turn_mistral_to_deepseek(sbuf *b, int t, const turn *u) {
    switch (t) {
    case T_MISTRAL_V7:
    case T_MISTRAL_V7_TEKKEN: {
        const char *sp = t == T_MISTRAL_V7 ? " " : "";
        if (u->sys) put(b, "[SYSTEM_PROMPT]", sp, u->content, "[/SYSTEM_PROMPT]", END);
        else if (u->user) put(b, "[INST]", sp, u->content, "[/INST]", END);
        else put(b, sp, u->content, "</s>", END);
        break;
    }
    case T_OPENCHAT:
        if (u->sys) {
            put(b, u->content, "<|end_of_turn|>", END);
        } else {
            put(b, "GPT4 Correct ", END);
            put_upper(b, u->role, 0);
            put(b, ": ", u->content, "<|end_of_turn|>", END);
        }
        break;
    case T_VICUNA:
    case T_VICUNA_ORCA:
        if (u->sys) put(b, t == T_VICUNA_ORCA ? "SYSTEM: " : "", u->content, t == T_VICUNA_ORCA ? "\n" : "\n\n", END);
        else if (u->user) put(b, "USER: ", u->content, "\n", END);
        else if (u->asst) put(b, "ASSISTANT: ", u->content, "</s>\n", END);
        break;
    case T_DEEPSEEK:
        if (u->sys) put(b, u->content, END);
        else if (u->user) put(b, "### Instruction:\n", u->content, "\n", END);
        else if (u->asst) put(b, "### Response:\n", u->content, "\n<|EOT|>\n", END);
        break;
    default:
        return 0;
    }
    return 1;
}

/* One turn of Command-R, MiniCPM, DeepSeek 2 / 3 / OCR; 0 when t is none of them. */
static int turn_command_r_to_deepseek_ocr(sbuf *b, int t, const turn *u) {
    switch (t) {
    case T_COMMAND_R: {
        const char *tag = u->sys    ? "<|SYSTEM_TOKEN|>"
                          : u->user ? "<|USER_TOKEN|>"
                          : u->asst ? "<|CHATBOT_TOKEN|>"
                                    : NULL;
        if (!tag) break;
        put(b, "<|START_OF_TURN_TOKEN|>", tag, END);
        put_trim(b, u->content);
        put(b, "<|END_OF_TURN_TOKEN|>", END);
        break;
    }
    case T_MINICPM:
        if (u->user) put(b, "<\xE7\x94\xA8\xE6\x88\xB7>", END);
        put_trim(b, u->content);
        if (u->user) put(b, "<AI>", END);
        break;
    case T_DEEPSEEK_2:
        if (u->sys) put(b, u->content, "\n\n", END);
        else if (u->user) put(b, "User: ", u->content, "\n\n", END);
        else if (u->asst) put(b, "Assistant: ", u->content, "<" FW "end" LB "of" LB "sentence" FW ">", END);
        break;
    case T_DEEPSEEK_3:
        if (u->sys) put(b, u->content, "\n\n", END);
        else if (u->user) put(b, "<" FW "User" FW ">", u->content, END);
        else if (u->asst) put(b, "<" FW "Assistant" FW ">", u->content, "<" FW "end" LB "of" LB "sentence" FW ">", END);
        break;
    case T_DEEPSEEK_OCR:
        put(b, u->content, END);
        break;
    default:
        return 0;
    }
    return 1;
}

/* One turn of EXAONE 3 / 4 / MoE, RWKV World, Yandex, Bailing; 0 when t is none of them. */
static int turn_exaone_to_bailing(sbuf *b, int t, const turn *u) {
    switch (t) {
    case T_EXAONE_3:
    case T_EXAONE_4: {
        int tool = t == T_EXAONE_4 && is(u->role, "tool");
        const char *tag = u->sys    ? "[|system|]"
                          : u->user ? "[|user|]"
                          : u->asst ? "[|assistant|]"
                          : tool    ? "[|tool|]"
                                    : NULL;
        if (!tag) break;
        put(b, tag, END);
        put_trim(b, u->content);
        put(b, u->user ? "\n" : "[|endofturn|]\n", END);
        break;
    }
    case T_EXAONE_MOE: {
        const char *tag = u->sys ? "<|system|>\n" : u->user ? "<|user|>\n" : u->asst ? "<|assistant|>\n"
                          : is(u->role, "tool") ? "<|tool|>\n" : NULL;
        if (!tag) break;
        put(b, tag, END);
        put_trim(b, u->content);
        put(b, "<|endofturn|>\n", END);
        break;
    }
    case T_RWKV_WORLD:
        if (u->sys) {
            put(b, "System: ", END);
            put_trim(b, u->content);
            put(b, "\n\n", END);
        } else if (u->user) {
            put(b, "User: ", END);
            put_trim(b, u->content);
            put(b, "\n\n", END);
            if (u->last) put(b, "Assistant:", END);
        } else if (u->asst) {
            put(b, "Assistant: ", END);
            put_trim(b, u->content);
            put(b, "\n\n", END);
        }
        break;
    case T_YANDEX:
        /* " Пользователь: " and " Ассистент: " */
        if (u->user) put(b, " \xD0\x9F\xD0\xBE\xD0\xBB\xD1\x8C\xD0\xB7\xD0\xBE\xD0\xB2\xD0\xB0\xD1\x82\xD0\xB5\xD0\xBB\xD1\x8C: ", u->content, "\n\n", END);
        else if (u->asst) put(b, " \xD0\x90\xD1\x81\xD1\x81\xD0\xB8\xD1\x81\xD1\x82\xD0\xB5\xD0\xBD\xD1\x82: ", u->content, "\n\n", END);
        break;
    case T_BAILING:
    case T_BAILING_THINK:
    case T_BAILING2:
        put(b, "<role>", END);
        if (u->user) put(b, "HUMAN", END);
        else put_upper(b, u->role, 1);
        put(b, "</role>", u->content, t == T_BAILING2 ? "<|role_end|>" : "", END);
        break;
    default:
        return 0;
    }
    return 1;
}

/* One turn of SmolVLM, dots.1, Hunyuan, Kimi K2, Grok 2, openPangu-Embedded; 0 when t is none of them. */
static int turn_smolvlm_to_pangu(sbuf *b, int t, const turn *u) {
    switch (t) {
    case T_SMOLVLM:
        if (u->sys) put(b, u->content, "\n\n", END);
        else if (u->user) put(b, "User: ", u->content, "<end_of_utterance>\n", END);
        else put(b, "Assistant: ", u->content, "<end_of_utterance>\n", END);
        break;
    case T_DOTS1:
        if (u->sys) put(b, "<|system|>", u->content, "<|endofsystem|>", END);
        else if (u->user) put(b, "<|userprompt|>", u->content, "<|endofuserprompt|>", END);
        else put(b, "<|response|>", u->content, "<|endofresponse|>", END);
        break;
    case T_HUNYUAN_MOE:
        if (u->sys) put(b, "<|startoftext|>", u->content, "<|extra_4|>", END);
        else if (u->asst) put(b, u->content, "<|eos|>", END);
        else put(b, "<|startoftext|>", u->content, "<|extra_0|>", END);
        break;
    case T_HUNYUAN_DENSE:
        if (u->first && u->sys) put(b, u->content, "<" FW "hy_place" LB "holder" LB "no" LB "3" FW ">", END);
        if (u->asst)
            put(b, "<" FW "hy_Assistant" FW ">", u->content, "<" FW "hy_place" LB "holder" LB "no" LB "2" FW ">", END);
        else if (u->user) put(b, "<" FW "hy_User" FW ">", u->content, "<" FW "hy_Assistant" FW ">", END);
        break;
    case T_HUNYUAN_VL:
        if (u->first && u->sys) put(b, u->content, "<" FW "hy_place" LB "holder" LB "no" LB "3" FW ">", END);
        else if (u->user) put(b, u->content, "<" FW "hy_User" FW ">", END);
        else if (u->asst) put(b, u->content, "<" FW "hy_Assistant" FW ">", END);
        break;
    case T_KIMI_K2:
        if (u->sys) put(b, "<|im_system|>system<|im_middle|>", END);
        else if (u->user) put(b, "<|im_user|>user<|im_middle|>", END);
        else if (u->asst) put(b, "<|im_assistant|>assistant<|im_middle|>", END);
        else if (is(u->role, "tool")) put(b, "<|im_system|>tool<|im_middle|>", END);
        put(b, u->content, "<|im_end|>", END);
        break;
    case T_GROK_2:
        if (u->sys || u->user) {
            put(b, u->sys ? "System: " : "Human: ", END);
            put_trim(b, u->content);
            put(b, "<|separator|>\n\n", END);
        } else if (u->asst) {
            put(b, "Assistant: ", u->content, "<|separator|>\n\n", END);
        }
        break;
    case T_PANGU_EMBED: {
        /* [unused9]系统：, 用户：, 助手：, 工具：, 方法：  ... [unused10] */
        static const char *const roles[5] = {"system", "user", "assistant", "tool", "function"};
        static const char *const tags[5] = {
            "[unused9]\xE7\xB3\xBB\xE7\xBB\x9F\xEF\xBC\x9A", "[unused9]\xE7\x94\xA8\xE6\x88\xB7\xEF\xBC\x9A",
            "[unused9]\xE5\x8A\xA9\xE6\x89\x8B\xEF\xBC\x9A", "[unused9]\xE5\xB7\xA5\xE5\x85\xB7\xEF\xBC\x9A",
            "[unused9]\xE6\x96\xB9\xE6\xB3\x95\xEF\xBC\x9A"};
        int k;
        if (u->first && !u->sys) put(b, tags[0], "[unused10]", END);
        for (k = 0; k < 5; k++)
            if (is(u->role, roles[k])) put(b, tags[k], u->content, "[unused10]", END);
        break;
    }
    default:
        return 0;
    }
    return 1;
}

/* What add_ass appends after the turns of the role-tagged templates. */
static void assistant_prefix(sbuf *b, int t) {
    switch (t) {
    case T_OPENCHAT: put(b, "GPT4 Correct Assistant:", END); break;
    case T_VICUNA:
    case T_VICUNA_ORCA: put(b, "ASSISTANT:", END); break;
    case T_DEEPSEEK: put(b, "### Response:\n", END); break;
    case T_COMMAND_R: put(b, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", END); break;
    case T_DEEPSEEK_2: put(b, "Assistant:", END); break;
    case T_DEEPSEEK_3: put(b, "<" FW "Assistant" FW ">", END); break;
    case T_EXAONE_3:
    case T_EXAONE_4: put(b, "[|assistant|]", END); break;
    case T_EXAONE_MOE: put(b, "<|assistant|>\n", END); break;
    case T_YANDEX: put(b, " \xD0\x90\xD1\x81\xD1\x81\xD0\xB8\xD1\x81\xD1\x82\xD0\xB5\xD0\xBD\xD1\x82:[SEP]", END); break;
    case T_BAILING:
    case T_BAILING2: put(b, "<role>ASSISTANT</role>", END); break;
    case T_BAILING_THINK: put(b, "<role>ASSISTANT</role><think>", END); break;
    case T_SMOLVLM: put(b, "Assistant:", END); break;
    case T_DOTS1: put(b, "<|response|>", END); break;
    case T_KIMI_K2: put(b, "<|im_assistant|>assistant<|im_middle|>", END); break;
    case T_GROK_2: put(b, "Assistant:", END); break;
    case T_PANGU_EMBED: put(b, "[unused9]\xE5\x8A\xA9\xE6\x89\x8B\xEF\xBC\x9A", END); break;
    default: break;
    }
}

/* The role-tagged templates: each message by its family's function, then
 * the assistant prefix; 0 (nothing written) when there are messages and
 * none of the families is t. */
static int role_turns(sbuf *b, int t, const eliza_chat_message *m, size_t n, int add_ass) {
    for (size_t i = 0; i < n; i++) {
        const char *r = m[i].role;
        const turn u = {r, m[i].content, is(r, "system"), is(r, "user"), is(r, "assistant"), i == 0, i == n - 1};
        if (!turn_mistral_to_deepseek(b, t, &u) && !turn_command_r_to_deepseek_ocr(b, t, &u) &&
            !turn_exaone_to_bailing(b, t, &u) && !turn_smolvlm_to_pangu(b, t, &u))
            return 0;
    }
    if (add_ass) assistant_prefix(b, t);
    return 1;
}

int32_t ez_chat_apply(int t, const eliza_chat_message *msgs, size_t n, int add_ass, char **out,
                      size_t *len) {
    sbuf b = {NULL, 0, 0, 0};
    size_t i;
    *out = NULL;
    *len = 0;
    if (n > 0 && !msgs) return ez_fail(ELIZA_E_INVALID_ARG, "chat: messages is NULL");
    for (i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content)
            return ez_fail(ELIZA_E_INVALID_ARG, "chat: message %zu has no %s", i,
                           msgs[i].role ? "content" : "role");
    }
    if (t < 0 || t >= T_COUNT) return ez_fail(ELIZA_E_INTERNAL, "chat: template %d", t);
    put_n(&b, "", 0);
    if (t == T_SMOLVLM) put(&b, "<|im_start|>", END);
    if (t == T_HUNYUAN_VL) put(&b, "<" FW "hy_begin" LB "of" LB "sentence" FW ">", END);
    if (t == T_BAILING2 && !(n > 0 && is(msgs[0].role, "system")))
        put(&b, "<role>SYSTEM</role>detailed thinking off<|role_end|>", END);
    if (t >= T_LLAMA_2 && t <= T_LLAMA_2_SYS_STRIP) {
        llama2(&b, t, msgs, n);
    } else if (t == T_MISTRAL_V1 || t == T_MISTRAL_V3 || t == T_MISTRAL_V3_TEKKEN) {
        mistral(&b, t, msgs, n);
    } else if (t == T_GEMMA) {
        gemma(&b, msgs, n, add_ass);
    } else if (t == T_ORION) {
        sbuf sys = {NULL, 0, 0, 0};
        for (i = 0; i < n; i++) {
            if (is(msgs[i].role, "system")) {
                put(&sys, msgs[i].content, END);
            } else if (is(msgs[i].role, "user")) {
                put(&b, "Human: ", END);
                if (sys.n > 0) {
                    put_n(&b, sys.s, sys.n);
                    put(&b, "\n\n", END);
                    sys.n = 0;
                }
                put(&b, msgs[i].content, "\n\nAssistant: </s>", END);
            } else {
                put(&b, msgs[i].content, "</s>", END);
            }
        }
        if (sys.failed) b.failed = 1;
        free(sys.s);
    } else if (t == T_GIGACHAT) {
        int has_sys = n > 0 && is(msgs[0].role, "system");
        if (has_sys)
            put(&b, "<s>", msgs[0].content, "<|message_sep|>", END);
        else
            put(&b, "<s>", END);
        for (i = has_sys ? 1 : 0; i < n; i++) {
            if (is(msgs[i].role, "user"))
                put(&b, "user<|role_sep|>", msgs[i].content, "<|message_sep|>",
                    "available functions<|role_sep|>[]<|message_sep|>", END);
            else if (is(msgs[i].role, "assistant"))
                put(&b, "assistant<|role_sep|>", msgs[i].content, "<|message_sep|>", END);
        }
        if (add_ass) put(&b, "assistant<|role_sep|>", END);
    } else if (!simple_turns(&b, t, msgs, n, add_ass) && !role_turns(&b, t, msgs, n, add_ass)) {
        free(b.s);
        return ez_fail(ELIZA_E_INTERNAL, "chat: template '%s' has no renderer", ez_chat_name(t));
    }
    if (b.failed) {
        free(b.s);
        return ez_fail(ELIZA_E_NOMEM, "chat: out of memory rendering %zu messages", n);
    }
    *out = b.s;
    *len = b.n;
    return ELIZA_OK;
}
