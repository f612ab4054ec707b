/* What ez_llm_model_load and ez_tokenizer_load would refuse in a file, each
 * named once: an unknown architecture, every tensor type without kernels
 * (with a tensor that has it and how many do), a tokenizer or pre-tokenizer
 * this build lacks. Hyperparameter values and shapes are checked at open. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/quant.h"
#include "llm/chat.h"
#include "llm/check.h"
#include "llm/model.h"
#include "llm/tokenizer.h"

static void json_str_or_null(ez_strbuf *sb, const ez_gguf *g, const char *key) {
    ez_str s;
    if (ez_gguf_find_kv(g, key) && ez_gguf_get_str(g, key, &s) == ELIZA_OK)
        ez_sb_json_str(sb, s.ptr, (size_t)s.len);
    else
        ez_sb_puts(sb, "null");
}

static void missing(ez_strbuf *sb, int *n, const char *text) {
    ez_sb_puts(sb, *n ? ", " : "");
    ez_sb_json_str(sb, text, strlen(text));
    (*n)++;
}

static int type_runs(uint32_t type) {
    const ez_type_traits *tr = ez_type_traits_of(type);
    const ez_type_kernels *kw;
    if (!tr || !tr->has_kernels) return 0;
    kw = ez_kernels(type);
    return kw->dequant != NULL && kw->dot != NULL &&
           (tr->vec_dot_type == EZ_TYPE_F32 || ez_kernels(tr->vec_dot_type)->quant != NULL);
}

static void check_arch(const ez_gguf *g, ez_strbuf *sb, int *n) {
    ez_str arch;
    size_t i;
    char msg[512];
    int at;
    if (!ez_gguf_find_kv(g, "general.architecture") ||
        ez_gguf_get_str(g, "general.architecture", &arch) != ELIZA_OK) {
        missing(sb, n, "general.architecture: the file names no architecture");
        return;
    }
    for (i = 0; i < ez_llm_n_archs(); i++) {
        const char *name = ez_llm_arch_name(i);
        if (strlen(name) == arch.len && memcmp(name, arch.ptr, arch.len) == 0) return;
    }
    at = snprintf(msg, sizeof msg, "architecture '%.*s' (this build runs", (int)EZ_MIN(arch.len, 64u),
                  arch.ptr);
    for (i = 0; i < ez_llm_n_archs() && at > 0 && (size_t)at < sizeof msg; i++)
        at += snprintf(msg + at, sizeof msg - (size_t)at, "%s %s", i ? "," : "", ez_llm_arch_name(i));
    if (at > 0 && (size_t)at < sizeof msg - 1) snprintf(msg + at, sizeof msg - (size_t)at, ")");
    missing(sb, n, msg);
}

static void check_types(const ez_gguf *g, ez_strbuf *sb, int *n) {
    uint64_t i, j;
    for (i = 0; i < g->n_tensors; i++) {
        uint32_t type = g->tensors[i].type;
        uint64_t count = 0;
        const ez_type_traits *tr;
        char msg[256];
        for (j = 0; j < i && g->tensors[j].type != type; j++) {}
        if (j < i || type_runs(type)) continue; /* seen before, or fine */
        for (j = i; j < g->n_tensors; j++) count += g->tensors[j].type == type;
        tr = ez_type_traits_of(type);
        if (tr)
            snprintf(msg, sizeof msg, "kernels for tensor type %s ('%s'%s)", tr->name, g->tensors[i].name,
                     count > 1 ? " and others" : "");
        else
            snprintf(msg, sizeof msg, "tensor type id %u ('%s')", type, g->tensors[i].name);
        if (count > 1) {
            size_t len = strlen(msg);
            snprintf(msg + len - 1, sizeof msg - len + 1, ": %" PRIu64 " tensors)", count);
        }
        missing(sb, n, msg);
    }
}

void ez_llm_check(const ez_gguf *g, ez_strbuf *sb) {
    ez_tokenizer *tok = NULL;
    ez_str tmpl;
    int n = 0, t = -1;
    int32_t rc;

    ez_sb_puts(sb, "{\"architecture\": ");
    json_str_or_null(sb, g, "general.architecture");
    ez_sb_puts(sb, ", \"tokenizer\": ");
    json_str_or_null(sb, g, "tokenizer.ggml.model");
    ez_sb_puts(sb, ", \"pre_tokenizer\": ");
    json_str_or_null(sb, g, "tokenizer.ggml.pre");
    ez_sb_puts(sb, ", \"chat_template\": ");
    if (ez_gguf_find_kv(g, "tokenizer.chat_template") &&
        ez_gguf_get_str(g, "tokenizer.chat_template", &tmpl) == ELIZA_OK) {
        /* ez_chat_detect wants a C string: the value is not NUL-terminated. */
        ez_strbuf copy = {0};
        ez_sb_append(&copy, tmpl.ptr, (size_t)tmpl.len);
        t = copy.data ? ez_chat_detect(copy.data) : -1;
        ez_sb_free(&copy);
        ez_sb_printf(sb, "\"%s\"", t >= 0 ? ez_chat_name(t) : "jinja");
    } else {
        ez_sb_puts(sb, "null");
    }
    ez_sb_puts(sb, ", \"missing\": [");
    check_arch(g, sb, &n);
    check_types(g, sb, &n);
    rc = ez_tokenizer_load(g, &tok);
    if (rc != ELIZA_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ez_error_message());
        missing(sb, &n, msg);
    }
    ez_tokenizer_free(tok);
    ez_clear_error();
    ez_sb_printf(sb, "], \"runnable\": %s}", n == 0 ? "true" : "false");
}
