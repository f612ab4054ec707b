/* Tokenizer: tiny SentencePiece and byte-level BPE vocabularies built here as
 * in-memory GGUF images pin the merge order, byte fallback, special-token
 * splitting, every pre-tokenizer's word cuts, pieces and detokenization, the
 * refusal of bad metadata and of invalid UTF-8 (with its byte offset), and a
 * seeded fuzz of random byte strings (no crash; valid text round-trips).
 * Run under -DELIZA_SANITIZE=ON for the "no crash" part.
 *
 * With arguments it is the tokenizer tool that tests/llm/test_tokenizer.py
 * drives (llama.cpp-free, no ctypes):
 *   test_tokenizer tokenize MODEL.gguf IN OUT
 *       IN: records [u32 LE length][u8 flags: 1 add_bos, 2 parse_special][bytes];
 *       OUT: per record "ids <id>..." (or "error <code> <message>"), then
 *       "text <hex>" and "special <hex>": ez_detokenize of the ids with
 *       render_special 0 and 1
 *   test_tokenizer bench MODEL.gguf FILE REPEATS
 *       prints "bytes tokens seconds load_seconds" for REPEATS runs over FILE
 *   test_tokenizer eog MODEL.gguf
 *       prints "eog <id>...": the end-of-generation set */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/gguf.h"
#include "core/platform.h"
#include "core/utf8.h"
#include "eliza.h"
#include "llm/regex.h"
#include "llm/tokenizer.h"
#include "llm/tokenizer_impl.h"
#include "check.h"

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* ---- an in-memory GGUF writer (metadata only) ---------------------------------- */

typedef struct {
    uint8_t *p;
    size_t len, cap;
    uint64_t n_kv;
} gw;

static void gw_put(gw *w, const void *d, size_t n) {
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 1024;
        while (cap < w->len + n) cap *= 2;
        w->p = (uint8_t *)realloc(w->p, cap);
        if (!w->p) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
        w->cap = cap;
    }
    if (n) memcpy(w->p + w->len, d, n);
    w->len += n;
}

static void gw_u32v(gw *w, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    gw_put(w, x, 4);
}

static void gw_u64v(gw *w, uint64_t v) {
    gw_u32v(w, (uint32_t)v);
    gw_u32v(w, (uint32_t)(v >> 32));
}

static void gw_strv(gw *w, const char *s, size_t n) {
    gw_u64v(w, n);
    gw_put(w, s, n);
}

static void gw_key(gw *w, const char *key, uint32_t type) {
    gw_strv(w, key, strlen(key));
    gw_u32v(w, type);
    w->n_kv++;
}

static void gw_str(gw *w, const char *key, const char *v) {
    gw_key(w, key, EZ_GGUF_STRING);
    gw_strv(w, v, strlen(v));
}

static void gw_u32(gw *w, const char *key, uint32_t v) {
    gw_key(w, key, EZ_GGUF_U32);
    gw_u32v(w, v);
}

static void gw_bool(gw *w, const char *key, int v) {
    uint8_t b = (uint8_t)(v != 0);
    gw_key(w, key, EZ_GGUF_BOOL);
    gw_put(w, &b, 1);
}

/* n strings; lens[i] may be 0 for a NUL-free string measured with strlen. */
static void gw_strs(gw *w, const char *key, const char *const *v, const size_t *lens, size_t n) {
    size_t i;
    gw_key(w, key, EZ_GGUF_ARRAY);
    gw_u32v(w, EZ_GGUF_STRING);
    gw_u64v(w, n);
    for (i = 0; i < n; i++) gw_strv(w, v[i], lens && lens[i] ? lens[i] : strlen(v[i]));
}

static void gw_f32s(gw *w, const char *key, const float *v, size_t n) {
    size_t i;
    gw_key(w, key, EZ_GGUF_ARRAY);
    gw_u32v(w, EZ_GGUF_F32);
    gw_u64v(w, n);
    for (i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], 4);
        gw_u32v(w, bits);
    }
}

static void gw_i32s(gw *w, const char *key, const int32_t *v, size_t n) {
    size_t i;
    gw_key(w, key, EZ_GGUF_ARRAY);
    gw_u32v(w, EZ_GGUF_I32);
    gw_u64v(w, n);
    for (i = 0; i < n; i++) gw_u32v(w, (uint32_t)v[i]);
}

/* The finished image: header + metadata, no tensors. Caller frees. */
static uint8_t *gw_finish(gw *w, size_t *size) {
    gw out = {NULL, 0, 0, 0};
    gw_put(&out, "GGUF", 4);
    gw_u32v(&out, 3);
    gw_u64v(&out, 0);
    gw_u64v(&out, w->n_kv);
    gw_put(&out, w->p, w->len);
    free(w->p);
    *size = out.len;
    return out.p;
}

/* ---- vocabularies ------------------------------------------------------------------ */

/* A vocabulary under construction: texts, scores, types. */
typedef struct {
    char *text[600];
    float score[600];
    int32_t type[600];
    size_t n;
} vocab;

static int32_t vadd(vocab *v, const char *text, float score, int32_t type) {
    size_t n = strlen(text);
    v->text[v->n] = (char *)xmalloc(n + 1);
    memcpy(v->text[v->n], text, n + 1);
    v->score[v->n] = score;
    v->type[v->n] = type;
    return (int32_t)v->n++;
}

static void vfree(vocab *v) {
    size_t i;
    for (i = 0; i < v->n; i++) free(v->text[i]);
    v->n = 0;
}

enum { T_NORMAL = 1, T_UNKNOWN = 2, T_CONTROL = 3, T_USER = 4, T_BYTE = 6 };

/* Ids of the tiny SentencePiece vocabulary. */
enum {
    S_UNK = 0, S_BOS = 1, S_EOS = 2, S_BYTE0 = 3, /* <0x00>..<0xFF> = 3..258 */
    S_SPACE = 259, S_A, S_B, S_C, S_AB, S_BC, S_SP_A, S_SP_AB, S_CTRL, S_USER, S_IM_END,
    S_END_OF_TURN, S_SP_SP, S_N_TOKENS
};

static void spm_vocab(vocab *v) {
    char name[8];
    int i;
    vadd(v, "<unk>", 0.0f, T_UNKNOWN);
    vadd(v, "<s>", 0.0f, T_CONTROL);
    vadd(v, "</s>", 0.0f, T_CONTROL);
    for (i = 0; i < 256; i++) {
        snprintf(name, sizeof name, "<0x%02X>", i);
        vadd(v, name, 0.0f, T_BYTE);
    }
    vadd(v, "\xE2\x96\x81", -1.0f, T_NORMAL);       /* ▁ */
    vadd(v, "a", -2.0f, T_NORMAL);
    vadd(v, "b", -2.0f, T_NORMAL);
    vadd(v, "c", -2.0f, T_NORMAL);
    vadd(v, "ab", -3.0f, T_NORMAL);
    vadd(v, "bc", -3.0f, T_NORMAL);                  /* ties with "ab": leftmost wins */
    vadd(v, "\xE2\x96\x81" "a", -0.5f, T_NORMAL);   /* ▁a */
    vadd(v, "\xE2\x96\x81" "ab", -0.25f, T_NORMAL); /* ▁ab */
    vadd(v, "<ctrl>", 0.0f, T_CONTROL);
    vadd(v, "<user>", 0.0f, T_USER);
    vadd(v, "<|im_end|>", 0.0f, T_NORMAL);           /* end-of-generation by its text */
    vadd(v, "<end_of_turn>", 0.0f, T_USER);
    vadd(v, "  ", 0.0f, T_USER);                     /* Gemma-style space run */
}

/* GPT-2 printable form of byte b, as UTF-8. */
static void gpt2_char(uint8_t b, char *out) {
    uint32_t cp = ez_bpe_byte_to_cp(b);
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = '\0';
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = '\0';
    }
}

/* Ids of the tiny BPE vocabulary: the 256 byte characters in byte order, then: */
enum { B_AB = 256, B_SP_AB, B_HE, B_LL, B_HELL, B_HELLO, B_SP_W, B_ENDOFTEXT, B_IM_END,
       B_N_TOKENS };

static const char *const bpe_merges[] = {
    "a b", "\xC4\xA0 ab", "h e", "l l", "he ll", "hell o", "\xC4\xA0 w", "a b",
    "nospace"};

static void bpe_vocab(vocab *v) {
    char s[4];
    int i;
    for (i = 0; i < 256; i++) {
        gpt2_char((uint8_t)i, s);
        vadd(v, s, 0.0f, T_NORMAL);
    }
    vadd(v, "ab", 0.0f, T_NORMAL);
    vadd(v, "\xC4\xA0" "ab", 0.0f, T_NORMAL); /* Ġab */
    vadd(v, "he", 0.0f, T_NORMAL);
    vadd(v, "ll", 0.0f, T_NORMAL);
    vadd(v, "hell", 0.0f, T_NORMAL);
    vadd(v, "hello", 0.0f, T_NORMAL);
    vadd(v, "\xC4\xA0w", 0.0f, T_NORMAL);
    vadd(v, "<|endoftext|>", 0.0f, T_CONTROL);
    vadd(v, "<|im_end|>", 0.0f, T_CONTROL);
}

typedef struct {
    const char *model, *pre;
    int add_space_prefix; /* -1: key absent */
    int add_bos;          /* -1: key absent */
    int with_scores, with_types, with_merges;
    const char *name; /* general.name, or NULL */
    int32_t unk, sep; /* unknown / separator token ids, written when >= 0 */
    int lowercase;    /* WordPiece normalizer.lowercase: 0 absent, 1 true, 2 false */
    int remove_extra_ws;
} spec;

static uint8_t *build_image(const vocab *v, const spec *sp, size_t *size) {
    gw w = {NULL, 0, 0, 0};
    gw_str(&w, "general.architecture", "llama");
    if (sp->name) gw_str(&w, "general.name", sp->name);
    if (sp->model) gw_str(&w, "tokenizer.ggml.model", sp->model);
    if (sp->pre) gw_str(&w, "tokenizer.ggml.pre", sp->pre);
    gw_strs(&w, "tokenizer.ggml.tokens", (const char *const *)v->text, NULL, v->n);
    if (sp->with_scores) gw_f32s(&w, "tokenizer.ggml.scores", v->score, v->n);
    if (sp->with_types) gw_i32s(&w, "tokenizer.ggml.token_type", v->type, v->n);
    if (sp->with_merges)
        gw_strs(&w, "tokenizer.ggml.merges", bpe_merges, NULL,
                sizeof bpe_merges / sizeof bpe_merges[0]);
    if (sp->add_space_prefix >= 0) gw_bool(&w, "tokenizer.ggml.add_space_prefix", sp->add_space_prefix);
    if (sp->add_bos >= 0) gw_bool(&w, "tokenizer.ggml.add_bos_token", sp->add_bos);
    gw_u32(&w, "tokenizer.ggml.bos_token_id", 1);
    gw_u32(&w, "tokenizer.ggml.eos_token_id", 2);
    if (sp->unk >= 0) gw_u32(&w, "tokenizer.ggml.unknown_token_id", (uint32_t)sp->unk);
    if (sp->sep >= 0) gw_u32(&w, "tokenizer.ggml.seperator_token_id", (uint32_t)sp->sep);
    if (sp->lowercase > 0) gw_bool(&w, "tokenizer.ggml.normalizer.lowercase", sp->lowercase == 1);
    if (sp->remove_extra_ws) gw_bool(&w, "tokenizer.ggml.remove_extra_whitespaces", 1);
    return gw_finish(&w, size);
}

/* Loads a tokenizer from an image; returns the status. */
static int32_t load(const uint8_t *img, size_t size, ez_tokenizer **tok) {
    ez_gguf *g = NULL;
    int32_t rc = ez_gguf_open_memory(img, size, &g);
    *tok = NULL;
    if (rc) return rc;
    rc = ez_tokenizer_load(g, tok);
    ez_gguf_close(g);
    return rc;
}

typedef struct {
    uint8_t *img;
    ez_tokenizer *tok;
} fixture;

static fixture make(void (*fill)(vocab *), const spec *sp) {
    vocab v;
    fixture f;
    size_t size;
    v.n = 0;
    fill(&v);
    f.img = build_image(&v, sp, &size);
    vfree(&v);
    CHECK_RC(load(f.img, size, &f.tok), ELIZA_OK);
    return f;
}

static void unmake(fixture *f) {
    ez_tokenizer_free(f->tok);
    free(f->img);
}

/* Tokenizes s and compares with want[0..n_want). */
static int ids_are(const ez_tokenizer *tok, const char *s, int add_bos, int special,
                   const int32_t *want, size_t n_want) {
    int32_t *ids = NULL;
    size_t n = 0, i;
    int ok;
    int32_t rc = ez_tokenize(tok, s, strlen(s), add_bos, special, &ids, &n);
    if (rc) {
        fprintf(stderr, "tokenize('%s') failed: %s\n", s, ez_error_message());
        return 0;
    }
    ok = n == n_want && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    if (!ok) {
        fprintf(stderr, "tokenize('%s'): got", s);
        for (i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, ", want");
        for (i = 0; i < n_want; i++) fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n");
    }
    free(ids);
    return ok;
}

#define IDS(tok, s, bos, special, ...)                                                 \
    do {                                                                               \
        static const int32_t want_[] = {__VA_ARGS__};                                  \
        CHECK(ids_are(tok, s, bos, special, want_, sizeof want_ / sizeof want_[0]));   \
    } while (0)

/* detokenize(tokenize(s)) with render_special. */
static int round_trips(const ez_tokenizer *tok, const char *s, size_t len, int special) {
    int32_t *ids = NULL;
    char *text = NULL;
    size_t n = 0, n_text = 0;
    int ok;
    if (ez_tokenize(tok, s, len, 0, special, &ids, &n) != ELIZA_OK) return 0;
    if (ez_detokenize(tok, ids, n, special, &text, &n_text) != ELIZA_OK) {
        free(ids);
        return 0;
    }
    ok = n_text == len && memcmp(text, s, len) == 0;
    free(ids);
    free(text);
    return ok;
}

/* ---- SentencePiece ------------------------------------------------------------ */

static const spec spm_spec = {"llama", NULL, 0, 1, 1, 1, 0, NULL, -1, -1, 0, 0};

static void test_spm_merges_by_score_leftmost_first(void) {
    fixture f = make(spm_vocab, &spm_spec);
    IDS(f.tok, "ab", 0, 0, S_AB);
    IDS(f.tok, "abc", 0, 0, S_AB, S_C);     /* "ab" and "bc" tie: the left pair merges */
    IDS(f.tok, "bc", 0, 0, S_BC);
    IDS(f.tok, " ab", 0, 0, S_SP_AB);       /* ▁ab beats ▁a + b */
    IDS(f.tok, "a a", 0, 0, S_A, S_SP_A);
    unmake(&f);
}

static void test_spm_empty_text_gives_only_bos(void) {
    fixture f = make(spm_vocab, &spm_spec);
    int32_t *ids = NULL;
    size_t n = 99;
    CHECK_RC(ez_tokenize(f.tok, "", 0, 0, 1, &ids, &n), ELIZA_OK);
    CHECK(n == 0 && ids != NULL);
    free(ids);
    CHECK_RC(ez_tokenize(f.tok, NULL, 0, 1, 1, &ids, &n), ELIZA_OK);
    CHECK(n == 1 && ids[0] == S_BOS);
    free(ids);
    unmake(&f);
}

static void test_spm_byte_fallback_for_unknown_characters(void) {
    fixture f = make(spm_vocab, &spm_spec);
    IDS(f.tok, "\xC3\xA9", 0, 0, S_BYTE0 + 0xC3, S_BYTE0 + 0xA9); /* é */
    IDS(f.tok, "a\xF0\x9F\x98\x80", 0, 0, S_A, S_BYTE0 + 0xF0, S_BYTE0 + 0x9F, S_BYTE0 + 0x98,
        S_BYTE0 + 0x80);
    CHECK(round_trips(f.tok, "caf\xC3\xA9 \xF0\x9F\x98\x80!", 11, 0));
    unmake(&f);
}

static void test_spm_special_tokens_split_only_when_asked(void) {
    fixture f = make(spm_vocab, &spm_spec);
    int32_t *ids = NULL;
    size_t n = 0, i;
    IDS(f.tok, "a<ctrl>b", 0, 1, S_A, S_CTRL, S_B);
    /* User-defined tokens are split out either way; control ones only with
     * parse_special. */
    IDS(f.tok, "a<user>b", 0, 0, S_A, S_USER, S_B);
    IDS(f.tok, "<user>a", 0, 1, S_USER, S_A);
    CHECK_RC(ez_tokenize(f.tok, "a<ctrl>b", 8, 0, 0, &ids, &n), ELIZA_OK);
    for (i = 0; i < n; i++) CHECK(ids[i] != S_CTRL);
    free(ids);
    CHECK(round_trips(f.tok, "a<ctrl>b", 8, 0));
    /* A space run that is a user-defined token, longest first. */
    IDS(f.tok, "a  b", 0, 0, S_A, S_SP_SP, S_B);
    IDS(f.tok, "a   b", 0, 0, S_A, S_SP_SP, S_SPACE, S_B);
    /* "<end_of_turn>" and "<|im_end|>" are control (by llama.cpp's text rule)
     * and end generation. */
    IDS(f.tok, "<end_of_turn><|im_end|>", 0, 1, S_END_OF_TURN, S_IM_END);
    CHECK(ez_tokenizer_is_eog(f.tok, S_END_OF_TURN));
    CHECK(ez_tokenizer_is_eog(f.tok, S_IM_END));
    CHECK(ez_tokenizer_is_eog(f.tok, S_EOS));
    CHECK(!ez_tokenizer_is_eog(f.tok, S_BOS));
    CHECK(!ez_tokenizer_is_eog(f.tok, -1));
    CHECK(!ez_tokenizer_is_eog(f.tok, S_N_TOKENS));
    unmake(&f);
}

static void test_spm_add_space_prefix_and_bos(void) {
    spec sp = spm_spec;
    fixture f;
    char *text = NULL;
    size_t n = 0;
    static const int32_t ids[] = {S_BOS, S_SP_AB};
    sp.add_space_prefix = -1; /* SentencePiece default: on */
    sp.add_bos = -1;          /* default: on */
    f = make(spm_vocab, &sp);
    CHECK(ez_tokenizer_add_bos(f.tok));
    CHECK(ez_tokenizer_bos(f.tok) == S_BOS && ez_tokenizer_eos(f.tok) == S_EOS);
    IDS(f.tok, "ab", 1, 0, S_BOS, S_SP_AB);
    IDS(f.tok, "ab", 0, 0, S_SP_AB);
    /* After a special token the next fragment gets its space again. */
    IDS(f.tok, "ab<ctrl>ab", 0, 1, S_SP_AB, S_CTRL, S_SP_AB);
    /* Detokenize drops the prefix space of the first piece; BOS renders as
     * "" and keeps the space after it (remove_special off, as llama.cpp). */
    CHECK_RC(ez_detokenize(f.tok, ids + 1, 1, 0, &text, &n), ELIZA_OK);
    CHECK(n == 2 && strcmp(text, "ab") == 0);
    free(text);
    CHECK_RC(ez_detokenize(f.tok, ids, 2, 0, &text, &n), ELIZA_OK);
    CHECK(n == 3 && strcmp(text, " ab") == 0);
    free(text);
    CHECK_RC(ez_detokenize(f.tok, ids, 2, 1, &text, &n), ELIZA_OK);
    CHECK(n == 6 && strcmp(text, "<s> ab") == 0);
    free(text);
    unmake(&f);
}

/* llama.cpp gives Phi-3's special tokens RSTRIP (by the model's name): the
 * whitespace after them goes, except after <unk>, <s>, <|endoftext|>. */
static void test_phi3_special_tokens_eat_following_whitespace(void) {
    spec sp = spm_spec;
    fixture f;
    sp.name = "Phi-3 Mini 4k Instruct";
    f = make(spm_vocab, &sp);
    IDS(f.tok, "a<ctrl>  b", 0, 1, S_A, S_CTRL, S_B);
    IDS(f.tok, "a<user> \n\tb", 0, 0, S_A, S_USER, S_B);
    IDS(f.tok, "</s> a", 0, 1, S_EOS, S_A);
    IDS(f.tok, "<unk> a", 0, 1, S_UNK, S_SP_A);
    unmake(&f);
    f = make(spm_vocab, &spm_spec);
    IDS(f.tok, "a<ctrl>  b", 0, 1, S_A, S_CTRL, S_SP_SP, S_B);
    unmake(&f);
}

static void test_pieces(void) {
    fixture f = make(spm_vocab, &spm_spec);
    char buf[8];
    size_t len = 0;
    CHECK_RC(ez_token_piece(f.tok, S_SP_AB, 0, buf, sizeof buf, &len), ELIZA_OK);
    CHECK(len == 3 && memcmp(buf, " ab", 3) == 0);
    CHECK_RC(ez_token_piece(f.tok, S_BYTE0 + 0x41, 0, buf, sizeof buf, &len), ELIZA_OK);
    CHECK(len == 1 && buf[0] == 'A');
    CHECK_RC(ez_token_piece(f.tok, S_CTRL, 0, buf, sizeof buf, &len), ELIZA_OK);
    CHECK(len == 0);
    CHECK_RC(ez_token_piece(f.tok, S_CTRL, 1, buf, sizeof buf, &len), ELIZA_OK);
    CHECK(len == 6 && memcmp(buf, "<ctrl>", 6) == 0);
    CHECK_RC(ez_token_piece(f.tok, S_USER, 0, buf, sizeof buf, &len), ELIZA_OK);
    CHECK(len == 6 && memcmp(buf, "<user>", 6) == 0);
    /* Too small a buffer: the full length, the bytes that fit. */
    memset(buf, 'x', sizeof buf);
    CHECK_RC(ez_token_piece(f.tok, S_END_OF_TURN, 1, buf, 4, &len), ELIZA_OK);
    CHECK(len == 13 && memcmp(buf, "<endxxxx", 8) == 0);
    CHECK_RC(ez_token_piece(f.tok, S_SP_AB, 0, NULL, 0, &len), ELIZA_OK);
    CHECK(len == 3);
    CHECK_RC(ez_token_piece(f.tok, -1, 0, buf, sizeof buf, &len), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_token_piece(f.tok, S_N_TOKENS, 0, buf, sizeof buf, &len), ELIZA_E_INVALID_ARG);
    unmake(&f);
}

static void test_invalid_utf8_is_refused_with_its_offset(void) {
    fixture f = make(spm_vocab, &spm_spec);
    static const char *const bad[] = {
        "ab\xC3", "ab\x80", "abc\xC0\x80", "ab\xED\xA0\x80" /* surrogate */,
        "ab\xF4\x90\x80\x80" /* > U+10FFFF */, "ab\xE2\x82", "ab\xFF"};
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t sentinel = 0, *ids = &sentinel; /* must come back NULL */
        size_t n = 7;
        char want[32];
        size_t off = i == 2 ? 3 : 2;
        CHECK_RC(ez_tokenize(f.tok, bad[i], strlen(bad[i]), 1, 1, &ids, &n), ELIZA_E_INVALID_ARG);
        CHECK(ids == NULL && n == 0);
        snprintf(want, sizeof want, "offset %zu", off);
        CHECK(strstr(ez_error_message(), want) != NULL);
    }
    {
        int32_t *ids = NULL;
        size_t n = 0;
        CHECK_RC(ez_tokenize(f.tok, NULL, 3, 0, 0, &ids, &n), ELIZA_E_INVALID_ARG);
        CHECK_RC(ez_tokenize(f.tok, "a", 1, 0, 0, NULL, &n), ELIZA_E_INVALID_ARG);
        /* NUL is a valid character. */
        CHECK_RC(ez_tokenize(f.tok, "a\0b", 3, 0, 0, &ids, &n), ELIZA_OK);
        CHECK(n == 3 && ids[1] == S_BYTE0);
        free(ids);
    }
    {
        static const int32_t bad_ids[] = {S_A, 100000};
        char *text = NULL;
        size_t n = 0;
        CHECK_RC(ez_detokenize(f.tok, bad_ids, 2, 0, &text, &n), ELIZA_E_INVALID_ARG);
        CHECK(text == NULL);
    }
    unmake(&f);
}

/* ---- BPE ------------------------------------------------------------------------- */

static void test_bpe_merges_by_rank(void) {
    spec sp = {"gpt2", "qwen2", -1, -1, 0, 1, 1, NULL, -1, -1, 0, 0};
    fixture f = make(bpe_vocab, &sp);
    char *text = NULL;
    size_t n = 0;
    static const int32_t hello[] = {B_HELLO, B_SP_W};
    IDS(f.tok, "ab ab", 0, 0, B_AB, B_SP_AB);
    IDS(f.tok, "hello", 0, 0, B_HELLO);
    IDS(f.tok, "hellx", 0, 0, B_HELL, 'x');
    IDS(f.tok, "hel", 0, 0, B_HE, 'l');
    IDS(f.tok, "w", 0, 0, 'w');
    IDS(f.tok, "a<|im_end|>", 0, 1, 'a', B_IM_END);
    CHECK(ez_tokenizer_is_eog(f.tok, B_IM_END) && ez_tokenizer_is_eog(f.tok, B_ENDOFTEXT));
    CHECK(!ez_tokenizer_add_bos(f.tok));
    /* A byte that is not a printable character maps to U+0100.. */
    IDS(f.tok, "\n", 0, 0, '\n');
    CHECK_RC(ez_detokenize(f.tok, hello, 2, 0, &text, &n), ELIZA_OK);
    CHECK(n == 7 && strcmp(text, "hello w") == 0);
    free(text);
    CHECK(round_trips(f.tok, "caf\xC3\xA9 \xF0\x9F\x98\x80\n\t x", 14, 0));
    unmake(&f);
}

static void test_bpe_detokenize_cleans_spaces_for_gpt2(void) {
    spec sp = {"gpt2", "gpt-2", -1, -1, 0, 1, 1, NULL, -1, -1, 0, 0};
    fixture f = make(bpe_vocab, &sp);
    int32_t *ids = NULL;
    char *text = NULL;
    size_t n = 0, n_text = 0;
    const char *s = "a . b ' c 's d";
    CHECK_RC(ez_tokenize(f.tok, s, strlen(s), 0, 0, &ids, &n), ELIZA_OK);
    CHECK_RC(ez_detokenize(f.tok, ids, n, 0, &text, &n_text), ELIZA_OK);
    CHECK(strcmp(text, "a. b'c's d") == 0);
    free(text);
    free(ids);
    unmake(&f);
}

/* Words of s under pre, joined with '|'. */
static int words_are(ez_pre_type pre, const char *s, const char *want) {
    size_t *lens = NULL, n = 0, i, at = 0, k = 0;
    char got[512];
    int ok;
    if (ez_bpe_pretokenize(pre, s, strlen(s), &lens, &n) != ELIZA_OK) return 0;
    for (i = 0; i < n; i++) {
        if (i) got[k++] = '|';
        memcpy(got + k, s + at, lens[i]);
        k += lens[i];
        at += lens[i];
    }
    got[k] = '\0';
    free(lens);
    ok = at == strlen(s) && strcmp(got, want) == 0;
    if (!ok) fprintf(stderr, "pre %d of '%s': got '%s', want '%s'\n", (int)pre, s, got, want);
    return ok;
}

static void test_pretokenizers_cut_words_like_llama_cpp(void) {
    CHECK(words_are(EZ_PRE_GPT2, "Hello world's  test 123!!", "Hello| world|'s| | test| 123|!!"));
    CHECK(words_are(EZ_PRE_GPT2, "a  \n", "a|  \n"));
    CHECK(words_are(EZ_PRE_GPT2, "x  y", "x| | y"));
    CHECK(words_are(EZ_PRE_GPT2, "It'S", "It|'|S"));
    CHECK(words_are(EZ_PRE_LLAMA3, "Hello, 12345 world!\n\n  x", "Hello|,| |123|45| world|!\n\n| | x"));
    CHECK(words_are(EZ_PRE_LLAMA3, "It'S a\r\n\r\nb", "It|'S| a|\r\n\r\n|b"));
    CHECK(words_are(EZ_PRE_LLAMA3, "\xE4\xBD\xA0\xE5\xA5\xBD 42", "\xE4\xBD\xA0\xE5\xA5\xBD| |42"));
    CHECK(words_are(EZ_PRE_QWEN2, "ab 12345", "ab| |1|2|3|4|5"));
    /* Qwen 3.5 keeps combining marks in letter runs: e + U+0301. */
    CHECK(words_are(EZ_PRE_QWEN35, "e\xCC\x81t\xCC\x81", "e\xCC\x81t\xCC\x81"));
    CHECK(words_are(EZ_PRE_QWEN2, "e\xCC\x81t", "e|\xCC\x81t"));
    CHECK(words_are(EZ_PRE_DEFAULT, "Hello, world!! 1234567 a+b $x",
                    "Hello|,| world|!!| |123|456|7| a|+|b| |$|x"));
    CHECK(words_are(EZ_PRE_DEFAULT, "`a` \xC2\xA7", "`|a|`| |\xC2\xA7"));
    /* Through the regex matcher: a zero-width lookahead split (superbpe), a
     * lookahead inside a repeated group (tekken, gpt-4o), several passes
     * (deepseek-coder), a cascade of whitespace lengths (jais-2). */
    CHECK(words_are(EZ_PRE_SUPERBPE, "ab 1234567", "ab |1|234|567"));
    CHECK(words_are(EZ_PRE_TEKKEN, "HelloWorld foo", "Hello|World| foo"));
    CHECK(words_are(EZ_PRE_GPT4O, "I'm HAPPY", "I'm| HAPPY"));
    CHECK(words_are(EZ_PRE_DEEPSEEK_CODER, "ab,c 12", "ab|,|c| |1|2"));
    CHECK(words_are(EZ_PRE_JAIS2, "a     b", "a|    | b"));
    /* Hand-written rules: digit groups from the right, the text before a run
     * going with its first group (afmoe); Han runs (kimi-k2). */
    CHECK(words_are(EZ_PRE_AFMOE, "x1234 56", "x|1|234| |56"));
    CHECK(words_are(EZ_PRE_KIMI_K2, "\xE4\xBD\xA0\xE5\xA5\xBD" "ab's 1234",
                    "\xE4\xBD\xA0\xE5\xA5\xBD|" "ab's| |123|4"));
}

static void test_every_pre_tokenizer_compiles(void) {
    int pre;
    for (pre = EZ_PRE_DEFAULT; pre < EZ_PRE_COUNT; pre++) {
        size_t *lens = NULL, n = 0;
        const char *s = "Hi there, 12345 \xE4\xBD\xA0 \xF0\x9F\x98\x80!\n";
        int32_t rc = ez_bpe_pretokenize((ez_pre_type)pre, s, strlen(s), &lens, &n);
        if (rc) fprintf(stderr, "pre %d: %s\n", pre, ez_error_message());
        CHECK(rc == ELIZA_OK && n > 0);
        free(lens);
    }
}

/* Long words: a repeated one-character group is a loop (gpt-4o, tekken), so
 * is a greedy group that ends the match (exaone-moe's letter runs joined by
 * single spaces); other repeated groups recurse and stop within their stack
 * budget with a clear error (superbpe's digit groups). */
static void test_long_words_do_not_exhaust_the_stack(void) {
    size_t n = 20000, *lens = NULL, n_words = 0, i;
    char *s = (char *)malloc(n + 1);
    if (!s) return;
    memset(s, 'a', n);
    s[n] = '\0';
    CHECK_RC(ez_bpe_pretokenize(EZ_PRE_GPT4O, s, n, &lens, &n_words), ELIZA_OK);
    CHECK(n_words == 1 && lens && lens[0] == n);
    free(lens);
    CHECK_RC(ez_bpe_pretokenize(EZ_PRE_TEKKEN, s, n, &lens, &n_words), ELIZA_OK);
    free(lens);
    for (i = 1; i < n; i += 2) s[i] = ' ';
    CHECK_RC(ez_bpe_pretokenize(EZ_PRE_EXAONE_MOE, s, n, &lens, &n_words), ELIZA_OK);
    CHECK(n_words == 2 && lens && lens[0] == n - 1 && lens[1] == 1);
    free(lens);
    memset(s, '7', n);
    lens = NULL;
    CHECK_RC(ez_bpe_pretokenize(EZ_PRE_SUPERBPE, s, n, &lens, &n_words), ELIZA_E_UNSUPPORTED);
    CHECK(lens == NULL && strstr(ez_error_message(), "backtracking") != NULL);
    free(s);
}

static int regex_refused(const char *pattern) {
    ez_regex *re = NULL;
    int32_t rc = ez_regex_compile(pattern, &re);
    ez_regex_free(re);
    return rc == ELIZA_E_INVALID_ARG && re == NULL;
}

/* Words of s under one pattern (the ASCII view), joined with '|'. */
static int regex_words_are(const char *pattern, const char *s, const char *want) {
    ez_regex *re = NULL;
    uint32_t view[64];
    size_t *lens = (size_t *)malloc(sizeof *lens), n = 1, i, at = 0, k = 0;
    char got[256];
    int ok = 0;
    if (!lens || ez_regex_compile(pattern, &re) != ELIZA_OK) goto done;
    for (i = 0; s[i]; i++) view[i] = ez_regex_view(re, (uint8_t)s[i]);
    lens[0] = strlen(s);
    if (ez_regex_split(re, view, &lens, &n) != ELIZA_OK) goto done;
    for (i = 0; i < n; i++) {
        if (i) got[k++] = '|';
        memcpy(got + k, s + at, lens[i]);
        k += lens[i];
        at += lens[i];
    }
    got[k] = '\0';
    ok = strcmp(got, want) == 0;
    if (!ok) fprintf(stderr, "regex '%s' on '%s': got '%s', want '%s'\n", pattern, s, got, want);
done:
    free(lens);
    ez_regex_free(re);
    return ok;
}

static void test_regex_follows_ecmascript(void) {
    /* First alternative that matches, not the longest. */
    CHECK(regex_words_are("a|ab", "abab", "a|b|a|b"));
    /* Lazy and greedy repeats, bounded repeats. */
    CHECK(regex_words_are("x+?", "xxx", "x|x|x"));
    CHECK(regex_words_are("x{2,3}", "xxxxxxx", "xxx|xxx|x"));
    /* Lookaheads are atomic and take nothing. */
    CHECK(regex_words_are("\\s+(?!\\S)", "a   b", "a|  | b"));
    CHECK(regex_words_are("b(?=c)", "abcbd", "a|b|cbd"));
    /* Anchors and word boundaries. */
    CHECK(regex_words_are("\\s+$", "a b  ", "a b|  "));
    CHECK(regex_words_are("\\b\\w", "ab cd", "a|b |c|d"));
    /* An empty match is followed by a non-empty one at the same place, as
     * std::regex_iterator does. */
    CHECK(regex_words_are("(?=b)|b", "abb", "a|b|b"));
    /* Classes: negation, ranges, escapes inside. */
    CHECK(regex_words_are("[^a-c\\s]+", "abxy zc", "ab|xy| |z|c"));
    /* Patterns outside the supported syntax are refused. */
    CHECK(regex_refused("(ab"));
    CHECK(regex_refused("ab)"));
    CHECK(regex_refused("a{3,1}"));
    CHECK(regex_refused("[z-a]"));
    CHECK(regex_refused("\\p{Greek}"));
    CHECK(regex_refused("(?<=a)b"));
    CHECK(regex_refused("a**"));
    CHECK(regex_refused("[abc"));
}

/* ---- WordPiece and unigram ----------------------------------------------------------- */

#define SP_ "\xE2\x96\x81" /* ▁ */

/* A WordPiece vocabulary as llama.cpp's converter writes BERT's. */
enum { W_PAD, W_CLS, W_SEP, W_UNK, W_HELLO, W_HE, W_LLO, W_WORLD, W_COMMA, W_BANG, W_CAFE, W_S,
       W_NI, W_HAO, W_A };

static void wpm_vocab(vocab *v) {
    vadd(v, "[PAD]", 0.0f, T_CONTROL);
    vadd(v, "[CLS]", 0.0f, T_CONTROL);
    vadd(v, "[SEP]", 0.0f, T_CONTROL);
    vadd(v, "[UNK]", 0.0f, T_CONTROL);
    vadd(v, SP_ "hello", 0.0f, T_NORMAL);
    vadd(v, SP_ "he", 0.0f, T_NORMAL);
    vadd(v, "llo", 0.0f, T_NORMAL);
    vadd(v, SP_ "world", 0.0f, T_NORMAL);
    vadd(v, SP_ ",", 0.0f, T_NORMAL);
    vadd(v, SP_ "!", 0.0f, T_NORMAL);
    vadd(v, SP_ "cafe", 0.0f, T_NORMAL);
    vadd(v, "s", 0.0f, T_NORMAL);
    vadd(v, SP_ "\xE4\xBD\xA0", 0.0f, T_NORMAL); /* ▁你 */
    vadd(v, SP_ "\xE5\xA5\xBD", 0.0f, T_NORMAL); /* ▁好 */
    vadd(v, SP_ "a", 0.0f, T_NORMAL);
}

static void detok_is(const ez_tokenizer *tok, const int32_t *ids, size_t n, const char *want) {
    char *text = NULL;
    size_t len = 0;
    CHECK_RC(ez_detokenize(tok, ids, n, 0, &text, &len), ELIZA_OK);
    CHECK(text && len == strlen(want) && memcmp(text, want, len) == 0);
    free(text);
}

static void test_wordpiece_longest_pieces_and_bert_normalizer(void) {
    static const int32_t hello_world[] = {W_HELLO, W_COMMA, W_WORLD, W_BANG};
    spec sp = {"bert", NULL, -1, -1, 0, 1, 0, NULL, W_UNK, W_SEP, 0, 0};
    fixture f = make(wpm_vocab, &sp);
    IDS(f.tok, "Hello, World!", 0, 0, W_HELLO, W_COMMA, W_WORLD, W_BANG);
    IDS(f.tok, "Hello, World!", 1, 0, W_CLS, W_HELLO, W_COMMA, W_WORLD, W_BANG, W_SEP);
    IDS(f.tok, "hellos hello", 0, 0, W_HELLO, W_S, W_HELLO);
    IDS(f.tok, "hex", 0, 0, W_UNK);         /* "▁he" + nothing for "x": the word is unknown */
    IDS(f.tok, "Caf\xC3\xA9", 0, 0, W_CAFE); /* é: e + a combining accent, dropped */
    IDS(f.tok, "\xE4\xBD\xA0\xE5\xA5\xBD", 0, 0, W_NI, W_HAO); /* ideographs stand alone */
    IDS(f.tok, "a\x01\xE2\x80\x8B \t a", 0, 0, W_A, W_A); /* control, format characters go */
    IDS(f.tok, "", 1, 0, W_CLS, W_SEP);
    IDS(f.tok, "[CLS]a", 0, 1, W_CLS, W_A);
    detok_is(f.tok, hello_world, 4, " hello, world!");
    unmake(&f);

    sp.lowercase = 2; /* cased: nothing is lowercased or stripped */
    f = make(wpm_vocab, &sp);
    IDS(f.tok, "Hello hello", 0, 0, W_UNK, W_HELLO);
    IDS(f.tok, "caf\xC3\xA9", 0, 0, W_UNK);
    unmake(&f);
}

/* A unigram vocabulary: ids and scores the segmentation below follows. */
enum { U_UNK, U_BOS, U_EOS, U_SP, U_A, U_B, U_AB, U_SP_A, U_SP_AB, U_USER, U_ZZ };

static void ugm_vocab(vocab *v) {
    vadd(v, "<unk>", 0.0f, T_UNKNOWN);
    vadd(v, "<s>", 0.0f, T_CONTROL);
    vadd(v, "</s>", 0.0f, T_CONTROL);
    vadd(v, SP_, -3.0f, T_NORMAL);
    vadd(v, "a", -2.0f, T_NORMAL);
    vadd(v, "b", -2.0f, T_NORMAL);
    vadd(v, "ab", -1.5f, T_NORMAL);
    vadd(v, SP_ "a", -1.0f, T_NORMAL);
    vadd(v, SP_ "ab", -5.0f, T_NORMAL);
    vadd(v, "<user>", -100.0f, T_USER);
    vadd(v, "zz", -1.0f, 5); /* unused: still a piece */
}

static void test_unigram_best_segmentation(void) {
    static const int32_t ab[] = {U_SP_A, U_B};
    spec sp = {"t5", NULL, 1, -1, 1, 1, 0, NULL, U_UNK, -1, 0, 0};
    fixture f = make(ugm_vocab, &sp);
    IDS(f.tok, "ab", 0, 0, U_SP_A, U_B);          /* -3 beats "▁ab" -5 and "▁" "ab" -4.5 */
    IDS(f.tok, "abab", 0, 0, U_SP_A, U_B, U_AB);
    IDS(f.tok, "axxb", 0, 0, U_SP_A, U_UNK, U_B); /* unknown characters: one <unk> per run */
    IDS(f.tok, "zz", 0, 0, U_SP, U_ZZ);
    IDS(f.tok, "a  b", 0, 0, U_SP_A, U_SP, U_SP, U_B);
    IDS(f.tok, "x<user>y", 0, 0, U_SP, U_UNK, U_USER, U_SP, U_UNK);
    IDS(f.tok, "a", 1, 0, U_SP_A, U_EOS);
    IDS(f.tok, "", 1, 0, U_EOS);
    detok_is(f.tok, ab, 2, "ab");
    unmake(&f);

    sp.remove_extra_ws = 1;
    f = make(ugm_vocab, &sp);
    IDS(f.tok, "  a  b  ", 0, 0, U_SP_A, U_SP, U_B);
    unmake(&f);
}

/* ---- bad metadata -------------------------------------------------------------------- */

static void test_bad_metadata_is_refused(void) {
    vocab v;
    uint8_t *img;
    size_t size;
    ez_tokenizer *tok = NULL;
    spec sp;

    v.n = 0;
    spm_vocab(&v);
    sp = spm_spec;
    sp.model = NULL;
    img = build_image(&v, &sp, &size);
    CHECK_RC(load(img, size, &tok), ELIZA_E_FORMAT);
    CHECK(strstr(ez_error_message(), "tokenizer.ggml.model") != NULL);
    free(img);

    sp.model = "rwkv";
    img = build_image(&v, &sp, &size);
    CHECK_RC(load(img, size, &tok), ELIZA_E_UNSUPPORTED);
    CHECK(strstr(ez_error_message(), "'rwkv'") != NULL);
    free(img);

    sp.model = "gpt2";
    sp.pre = "no-such-pre";
    sp.with_merges = 1;
    img = build_image(&v, &sp, &size);
    CHECK_RC(load(img, size, &tok), ELIZA_E_UNSUPPORTED);
    CHECK(strstr(ez_error_message(), "no-such-pre") != NULL);
    free(img);

    sp.pre = "llama-bpe";
    sp.with_merges = 0;
    img = build_image(&v, &sp, &size);
    CHECK_RC(load(img, size, &tok), ELIZA_E_FORMAT);
    CHECK(strstr(ez_error_message(), "merges") != NULL);
    free(img);

    /* Duplicate texts. */
    sp = spm_spec;
    free(v.text[S_C]);
    v.text[S_C] = (char *)xmalloc(2);
    memcpy(v.text[S_C], "a", 2);
    img = build_image(&v, &sp, &size);
    CHECK_RC(load(img, size, &tok), ELIZA_E_FORMAT);
    CHECK(strstr(ez_error_message(), "same text") != NULL);
    free(img);

    /* A byte token whose text cannot hold a byte. */
    memcpy(v.text[S_C], "c", 2);
    free(v.text[S_BYTE0]);
    v.text[S_BYTE0] = (char *)xmalloc(3);
    memcpy(v.text[S_BYTE0], "<0", 3);
    img = build_image(&v, &sp, &size);
    CHECK_RC(load(img, size, &tok), ELIZA_E_FORMAT);
    free(img);
    vfree(&v);

    /* Fewer scores than tokens. */
    {
        gw w = {NULL, 0, 0, 0};
        static const char *const toks[] = {"a", "b", "c"};
        static const float scores[] = {0.0f, 1.0f};
        gw_str(&w, "tokenizer.ggml.model", "llama");
        gw_strs(&w, "tokenizer.ggml.tokens", toks, NULL, 3);
        gw_f32s(&w, "tokenizer.ggml.scores", scores, 2);
        img = gw_finish(&w, &size);
        CHECK_RC(load(img, size, &tok), ELIZA_E_FORMAT);
        CHECK(strstr(ez_error_message(), "2 scores for 3 tokens") != NULL);
        free(img);
    }
    /* Tokens of the wrong type. */
    {
        gw w = {NULL, 0, 0, 0};
        gw_str(&w, "tokenizer.ggml.model", "llama");
        gw_u32(&w, "tokenizer.ggml.tokens", 3);
        img = gw_finish(&w, &size);
        CHECK_RC(load(img, size, &tok), ELIZA_E_FORMAT);
        free(img);
    }
    CHECK(tok == NULL);
}

/* A vocabulary without byte tokens or <unk>: unknown bytes are an error,
 * never a crash. */
static void test_missing_byte_tokens_fail_cleanly(void) {
    gw w = {NULL, 0, 0, 0};
    static const char *const toks[] = {"a", "b", "\xE2\x96\x81"};
    uint8_t *img;
    size_t size, n = 0;
    ez_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    gw_str(&w, "tokenizer.ggml.model", "llama");
    gw_strs(&w, "tokenizer.ggml.tokens", toks, NULL, 3);
    gw_bool(&w, "tokenizer.ggml.add_space_prefix", 0);
    img = gw_finish(&w, &size);
    CHECK_RC(load(img, size, &tok), ELIZA_OK);
    if (tok) {
        /* Default SPM ids 1 / 2 / 0 exist here: b, ▁, a. */
        CHECK(ez_tokenizer_bos(tok) == 1 && ez_tokenizer_eos(tok) == 2);
        CHECK_RC(ez_tokenize(tok, "ab", 2, 0, 0, &ids, &n), ELIZA_OK);
        free(ids);
        /* <unk> defaults to id 0 ("a"): x falls back to it. */
        CHECK_RC(ez_tokenize(tok, "x", 1, 0, 0, &ids, &n), ELIZA_OK);
        CHECK(n == 1 && ids[0] == 0);
        free(ids);
    }
    ez_tokenizer_free(tok);
    free(img);
}

/* ---- fuzz ------------------------------------------------------------------------------- */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}

/* Random text: raw bytes, or characters drawn from a mix that hits every
 * path (spaces, digits, letters, punctuation, specials, multi-byte). */
static size_t random_text(char *s, size_t cap, int raw) {
    static const char *const parts[] = {
        " ", "  ", "a", "b", "c", "ab", "h", "e", "l", "o", "w", "1", "2", "3", "'", "'s", "!",
        ".", ",", "\n", "\r\n", "\t", "<ctrl>", "<user>", "<|im_end|>", "<end_of_turn>",
        "<|endoftext|>", "\xC3\xA9", "\xE4\xBD\xA0", "\xF0\x9F\x98\x80", "\xCC\x81",
        "\xE2\x80\x8D", "\xC2\xA0", "\xE3\x80\x80", "\xEF\xBF\xBD", "\x7F", "\0", "$", "+", "`"};
    size_t n = 0, want = rnd() % (cap / 16);
    if (raw) {
        for (n = 0; n < want; n++) s[n] = (char)rnd();
        return n;
    }
    while (n < want) {
        const char *p = parts[rnd() % (sizeof parts / sizeof parts[0])];
        size_t k = p[0] ? strlen(p) : 1;
        memcpy(s + n, p, k);
        n += k;
    }
    return n;
}

static void fuzz(const ez_tokenizer *tok, int round_trip, int iterations) {
    char s[2048];
    int it;
    for (it = 0; it < iterations; it++) {
        int raw = it % 3 == 0, special = (int)(rnd() & 1);
        size_t len = random_text(s, sizeof s, raw), n = 0, n_text = 0, bad;
        int32_t *ids = NULL, rc;
        char *text = NULL;
        bad = ez_utf8_invalid_at((const uint8_t *)s, len);
        rc = ez_tokenize(tok, s, len, (int)(rnd() & 1), special, &ids, &n);
        if (bad < len) {
            CHECK(rc == ELIZA_E_INVALID_ARG);
            continue;
        }
        CHECK_RC(rc, ELIZA_OK);
        if (rc) continue;
        CHECK_RC(ez_detokenize(tok, ids, n, special, &text, &n_text), ELIZA_OK);
        if (round_trip && !special && text) {
            /* Without parse_special the text comes back exactly (BOS renders ""). */
            if (n_text != len || memcmp(text, s, len) != 0) {
                fprintf(stderr, "round trip failed at iteration %d (%zu bytes)\n", it, len);
                g_failed = 1;
            }
        }
        free(text);
        free(ids);
    }
}

static void test_fuzz_random_text(void) {
    /* Hand-written rules, then the regex matcher's; the second column says
     * whether the text comes back: not for names with the detokenize
     * clean-up, nor for those that add BOS by default (tekken, chameleon:
     * the fixture's BOS is an ordinary character). */
    static const struct {
        const char *pre;
        int round_trip, n;
    } pres[] = {{"default", 0, 1500}, {"gpt-2", 0, 1500}, {"llama-bpe", 0, 1500},
                {"qwen2", 1, 1500}, {"qwen35", 1, 1500}, {"kimi-k2", 1, 400},
                {"afmoe", 1, 400}, {"laguna", 1, 400}, {"gpt-4o", 1, 400}, {"tekken", 0, 400},
                {"deepseek-v3", 1, 400}, {"deepseek-llm", 1, 400}, {"exaone-moe", 0, 400},
                {"superbpe", 1, 400}, {"jais-2", 0, 400}, {"chameleon", 0, 400},
                {"poro-chat", 1, 400}, {"youtu", 1, 400}, {"tiny_aya", 1, 400},
                {"minicpm5", 0, 400}, {"bailingmoe", 1, 400}};
    spec wpm = {"bert", NULL, -1, -1, 0, 1, 0, NULL, W_UNK, W_SEP, 0, 0};
    spec ugm = {"t5", NULL, 1, -1, 1, 1, 0, NULL, U_UNK, -1, 0, 1};
    fixture f = make(spm_vocab, &spm_spec);
    size_t i;
    fuzz(f.tok, 1, 3000);
    unmake(&f);
    f = make(wpm_vocab, &wpm);
    fuzz(f.tok, 0, 1000);
    unmake(&f);
    f = make(ugm_vocab, &ugm);
    fuzz(f.tok, 0, 1000);
    unmake(&f);
    for (i = 0; i < sizeof pres / sizeof pres[0]; i++) {
        spec sp = {"gpt2", pres[i].pre, -1, -1, 0, 1, 1, NULL, -1, -1, 0, 0};
        f = make(bpe_vocab, &sp);
        fuzz(f.tok, pres[i].round_trip, pres[i].n);
        unmake(&f);
    }
}

/* Random GGUF images around a valid tokenizer: truncations and byte flips
 * load or fail, never crash. */
static void test_fuzz_metadata(void) {
    vocab v;
    spec sp = {"gpt2", "llama-bpe", -1, -1, 1, 1, 1, NULL, -1, -1, 0, 0};
    uint8_t *img, *copy;
    size_t size, i;
    v.n = 0;
    bpe_vocab(&v);
    img = build_image(&v, &sp, &size);
    vfree(&v);
    copy = (uint8_t *)xmalloc(size);
    for (i = 0; i < 600; i++) {
        ez_tokenizer *tok = NULL;
        size_t n = size, k;
        memcpy(copy, img, size);
        if (i % 2) {
            n = rnd() % size;
        } else {
            for (k = 0; k < 4; k++) copy[rnd() % size] ^= (uint8_t)(1u << (rnd() % 8));
        }
        if (load(copy, n, &tok) == ELIZA_OK) {
            int32_t *ids = NULL;
            size_t n_ids = 0;
            if (ez_tokenize(tok, "hello ab <|im_end|> 123", 23, 1, 1, &ids, &n_ids) == ELIZA_OK)
                free(ids);
            ez_tokenizer_free(tok);
        }
    }
    free(copy);
    free(img);
}

/* ---- the tool mode ------------------------------------------------------------------------ */

static int32_t open_tokenizer(const char *path, ez_tokenizer **tok) {
    ez_gguf *g = NULL;
    int32_t rc = ez_gguf_open(path, &g);
    if (rc) return rc;
    rc = ez_tokenizer_load(g, tok);
    ez_gguf_close(g);
    return rc;
}

static double now(void) { return 1e-9 * (double)ez_time_ns(); }

static void put_hex(FILE *out, const char *tag, const char *s, size_t n) {
    size_t i;
    fprintf(out, "%s ", tag);
    for (i = 0; i < n; i++) fprintf(out, "%02x", (uint8_t)s[i]);
    fputc('\n', out);
}

static int tool_tokenize(const char *model, const char *in_path, const char *out_path) {
    ez_tokenizer *tok = NULL;
    FILE *in = fopen(in_path, "rb"), *out = fopen(out_path, "wb");
    uint8_t hdr[5];
    int status = 0;
    if (!in || !out || open_tokenizer(model, &tok) != ELIZA_OK) {
        fprintf(stderr, "cannot open %s / %s / %s: %s\n", model, in_path, out_path,
                ez_error_message());
        status = 1;
    }
    while (status == 0 && fread(hdr, 1, 5, in) == 5) {
        size_t len = (size_t)hdr[0] | ((size_t)hdr[1] << 8) | ((size_t)hdr[2] << 16) |
                     ((size_t)hdr[3] << 24), n = 0, i, n_text = 0;
        char *s = (char *)xmalloc(len), *text = NULL;
        int32_t *ids = NULL, rc;
        if (fread(s, 1, len, in) != len) {
            free(s);
            status = 1;
            break;
        }
        rc = ez_tokenize(tok, s, len, hdr[4] & 1, (hdr[4] & 2) != 0, &ids, &n);
        if (rc) {
            fprintf(out, "error %d %s\ntext \nspecial \n", rc, ez_error_message());
        } else {
            fprintf(out, "ids");
            for (i = 0; i < n; i++) fprintf(out, " %d", ids[i]);
            fputc('\n', out);
            ez_detokenize(tok, ids, n, 0, &text, &n_text);
            put_hex(out, "text", text, n_text);
            free(text);
            ez_detokenize(tok, ids, n, 1, &text, &n_text);
            put_hex(out, "special", text, n_text);
            free(text);
        }
        free(ids);
        free(s);
    }
    ez_tokenizer_free(tok);
    if (in) fclose(in);
    if (out) fclose(out);
    return status;
}

/* The end-of-generation ids of a model, one line. */
static int tool_eog(const char *model) {
    ez_tokenizer *tok = NULL;
    int32_t i;
    if (open_tokenizer(model, &tok) != ELIZA_OK) {
        fprintf(stderr, "cannot open %s: %s\n", model, ez_error_message());
        return 1;
    }
    printf("eog");
    for (i = 0; i < ez_tokenizer_n_vocab(tok); i++)
        if (ez_tokenizer_is_eog(tok, i)) printf(" %d", i);
    printf("\n");
    ez_tokenizer_free(tok);
    return 0;
}

static int tool_bench(const char *model, const char *path, int repeats) {
    ez_tokenizer *tok = NULL;
    FILE *in = fopen(path, "rb");
    char *s;
    long size;
    size_t n_tokens = 0;
    double t0, t_load, t_run;
    int r;
    if (!in || fseek(in, 0, SEEK_END) != 0 || (size = ftell(in)) < 0) return 1;
    rewind(in);
    s = (char *)xmalloc((size_t)size);
    if (fread(s, 1, (size_t)size, in) != (size_t)size) return 1;
    fclose(in);
    t0 = now();
    if (open_tokenizer(model, &tok) != ELIZA_OK) {
        fprintf(stderr, "%s\n", ez_error_message());
        return 1;
    }
    t_load = now() - t0;
    t0 = now();
    for (r = 0; r < repeats; r++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (ez_tokenize(tok, s, (size_t)size, 1, 1, &ids, &n) != ELIZA_OK) {
            fprintf(stderr, "%s\n", ez_error_message());
            return 1;
        }
        n_tokens += n;
        free(ids);
    }
    t_run = now() - t0;
    printf("%ld %zu %.6f %.6f\n", size * repeats, n_tokens, t_run, t_load);
    ez_tokenizer_free(tok);
    free(s);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "tokenize") == 0)
        return tool_tokenize(argv[2], argv[3], argv[4]);
    if (argc == 5 && strcmp(argv[1], "bench") == 0)
        return tool_bench(argv[2], argv[3], atoi(argv[4]));
    if (argc == 3 && strcmp(argv[1], "eog") == 0) return tool_eog(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: %s [tokenize MODEL IN OUT | bench MODEL FILE REPEATS | eog MODEL]\n",
                argv[0]);
        return 2;
    }
    test_spm_merges_by_score_leftmost_first();
    test_spm_empty_text_gives_only_bos();
    test_spm_byte_fallback_for_unknown_characters();
    test_spm_special_tokens_split_only_when_asked();
    test_spm_add_space_prefix_and_bos();
    test_phi3_special_tokens_eat_following_whitespace();
    test_pieces();
    test_invalid_utf8_is_refused_with_its_offset();
    test_bpe_merges_by_rank();
    test_bpe_detokenize_cleans_spaces_for_gpt2();
    test_pretokenizers_cut_words_like_llama_cpp();
    test_every_pre_tokenizer_compiles();
    test_regex_follows_ecmascript();
    test_long_words_do_not_exhaust_the_stack();
    test_wordpiece_longest_pieces_and_bert_normalizer();
    test_unigram_best_segmentation();
    test_bad_metadata_is_refused();
    test_missing_byte_tokens_fail_cleanly();
    test_fuzz_random_text();
    test_fuzz_metadata();
    if (g_failed) {
        fprintf(stderr, "test_tokenizer: FAILED\n");
        return 1;
    }
    printf("test_tokenizer: all tests passed\n");
    return 0;
}
