/* libFuzzer target for the GGUF reader: open from memory, then everything a
 * consumer does with a file that opened (lookups, typed getters, string
 * tables, the info document, dequantizing small tensors). Crashes, leaks,
 * out-of-bounds reads and undefined behaviour are findings; so is an info
 * document with raw control bytes or invalid UTF-8 in it. See README.md. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gguf.h"
#include "core/quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Largest tensor dequantized per input, to keep executions fast. */
#define MAX_DEQUANT_ELEMENTS (1u << 16)

/* The document must be valid UTF-8 without raw control characters (strict
 * decoding: no overlongs, surrogates or code points past U+10FFFF). */
static int clean_utf8(const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        unsigned c = *u, lo = 0x80, hi = 0xBF;
        int len, i;
        if (c < 0x20) return 0;
        if (c < 0x80) {
            u++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) len = 3;
        else if (c >= 0xF0 && c <= 0xF4) len = 4;
        else return 0;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
        for (i = 1; i < len; i++) {
            unsigned b = u[i];
            if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
        }
        u += len;
    }
    return 1;
}

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz_gguf: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ez_gguf *g = NULL;
    char *json = NULL;
    uint64_t i;

    if (ez_gguf_open_memory(data, size, &g) != ELIZA_OK) {
        check(g == NULL, "failed open left a handle");
        return 0;
    }

    for (i = 0; i < g->n_kv; i++) {
        const ez_gguf_kv *kv = &g->kv[i];
        const ez_gguf_kv *arr;
        uint32_t u32;
        uint64_t u64;
        float f;
        int b;
        ez_str s;
        check(ez_gguf_find_kv(g, kv->key) == kv, "key lookup");
        (void)ez_gguf_get_u32(g, kv->key, &u32);
        (void)ez_gguf_get_u64(g, kv->key, &u64);
        (void)ez_gguf_get_f32(g, kv->key, &f);
        (void)ez_gguf_get_bool(g, kv->key, &b);
        (void)ez_gguf_get_str(g, kv->key, &s);
        if (ez_gguf_get_arr(g, kv->key, EZ_GGUF_STRING, &arr) == ELIZA_OK) {
            ez_str *tab = NULL;
            if (ez_gguf_arr_strings(arr, &tab) == ELIZA_OK) {
                uint64_t j;
                for (j = 0; j < arr->arr_len; j++)
                    check((const uint8_t *)tab[j].ptr >= data &&
                              (const uint8_t *)tab[j].ptr + tab[j].len <= data + size,
                          "string table entry out of bounds");
                free(tab);
            }
        }
    }

    for (i = 0; i < g->n_tensors; i++) {
        const ez_gguf_tensor *t = &g->tensors[i];
        check(ez_gguf_find_tensor(g, t->name) == t, "tensor lookup");
        check(t->data >= data && t->data + t->nbytes <= data + size, "tensor out of bounds");
        if (t->n_elements <= MAX_DEQUANT_ELEMENTS) {
            float *v = NULL;
            (void)ez_gguf_tensor_f32(t, &v);
            free(v);
        }
    }

    if (ez_gguf_info_json(g, 4, 1, &json) == ELIZA_OK) {
        check(clean_utf8(json), "info document is not clean UTF-8");
        free(json);
    }
    if (ez_gguf_info_json(g, 1u << 12, 0, &json) == ELIZA_OK) {
        check(clean_utf8(json), "info document is not clean UTF-8");
        free(json);
    }
    ez_gguf_close(g);
    return 0;
}
