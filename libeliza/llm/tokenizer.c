/* Tokenizer loading, special tokens, and the model-independent steps of
 * tokenize / detokenize, following llama.cpp's llama-vocab.cpp:
 *
 *   load       tokenizer.ggml.* keys -> texts, scores, attributes, special ids;
 *              llama.cpp's text rules for end-of-generation tokens
 *   tokenize   split special-token texts out of the input (longest first;
 *              control tokens only with parse_special), then SPM or BPE on
 *              each remaining fragment; BOS / EOS as the model asks
 *   pieces     the bytes of one token (U+2581 -> space, <0xHH> -> byte,
 *              GPT-2 code points -> bytes); detokenize concatenates them */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/utf8.h"
#include "llm/tokenizer_impl.h"

#define MAX_VOCAB (1 << 24)
#define MAX_MERGES (1 << 24)
/* Attributes whose tokens render as their stored text. */
#define RENDERED_AS_TEXT (EZ_TA_UNKNOWN | EZ_TA_CONTROL | EZ_TA_USER_DEFINED)

int32_t ez_idvec_push(ez_idvec *v, int32_t id) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        int32_t *p = (int32_t *)realloc(v->ids, cap * sizeof *p);
        if (!p) return 0;
        v->ids = p;
        v->cap = cap;
    }
    v->ids[v->n++] = id;
    return 1;
}

int ez_bytevec_put(ez_bytevec *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        char *q;
        while (cap < b->len + n) cap *= 2;
        q = (char *)realloc(b->buf, cap);
        if (!q) return 0;
        b->buf = q;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, p, n);
    b->len += n;
    return 1;
}

/* ---- hash tables ----------------------------------------------------------- */

static int htab_init(ez_htab *t, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    t->slots = (uint32_t(*)[2])calloc(cap, sizeof *t->slots);
    t->mask = (uint32_t)(cap - 1);
    return t->slots != NULL;
}

static void htab_insert(ez_htab *t, uint64_t h, uint32_t index) {
    uint32_t i = (uint32_t)h & t->mask;
    while (t->slots[i][0]) i = (i + 1) & t->mask;
    t->slots[i][0] = index + 1;
    t->slots[i][1] = (uint32_t)(h >> 32);
}

uint64_t ez_hash_span(const char *s, size_t n) {
    const uint64_t k = 0x9E3779B97F4A7C15ull;
    uint64_t h = k ^ ((uint64_t)n * 0xFF51AFD7ED558CCDull), w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * k;
        h ^= h >> 29;
    }
    if (n) {
        w = 0;
        memcpy(&w, s, n);
        h = (h ^ w) * k;
    }
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 30);
}

/* The slot of token text s[0..n) (hash h): the token's, or the empty slot
 * where it would go. */
static uint32_t *vocab_slot(const ez_tokenizer *tok, uint64_t h, const char *s, size_t n) {
    uint32_t i = (uint32_t)h & tok->vocab.mask, tag = (uint32_t)(h >> 32);
    for (;; i = (i + 1) & tok->vocab.mask) {
        uint32_t *slot = tok->vocab.slots[i];
        uint32_t id, off;
        if (slot[0] == 0) return slot;
        if (slot[1] != tag) continue;
        id = slot[0] - 1;
        off = tok->text_off[id];
        if (tok->text_off[id + 1] - off == n && memcmp(tok->text + off, s, n) == 0) return slot;
    }
}

int32_t ez_vocab_find(const ez_tokenizer *tok, const char *s, size_t n) {
    return (int32_t)vocab_slot(tok, ez_hash_span(s, n), s, n)[0] - 1;
}

/* A merge (left, right), stored as its line "left right". */
static uint64_t merge_hash(const char *l, size_t nl, const char *r, size_t nr) {
    uint64_t h = ez_hash_span(l, nl) * 0x9E3779B97F4A7C15ull ^ ez_hash_span(r, nr);
    return h ^ (h >> 29);
}

int32_t ez_merge_find(const ez_tokenizer *tok, const char *l, size_t nl, const char *r,
                      size_t nr) {
    uint64_t h = merge_hash(l, nl, r, nr);
    uint32_t i = (uint32_t)h & tok->merges.mask, tag = (uint32_t)(h >> 32);
    for (;; i = (i + 1) & tok->merges.mask) {
        const uint32_t *slot = tok->merges.slots[i];
        const char *m;
        uint32_t rank;
        if (slot[0] == 0) return -1;
        if (slot[1] != tag) continue;
        rank = slot[0] - 1;
        m = tok->merge_text + tok->merge_off[rank];
        if (tok->merge_split[rank] == nl &&
            tok->merge_off[rank + 1] - tok->merge_off[rank] == nl + 1 + nr &&
            memcmp(m, l, nl) == 0 && memcmp(m + nl + 1, r, nr) == 0)
            return (int32_t)rank;
    }
}

/* ---- tokens sorted by text ---------------------------------------------------- */

typedef struct {
    const char *p;
    uint32_t n;
    int32_t id;
} text_ref;

static int text_order(const void *a, const void *b) {
    const text_ref *x = (const text_ref *)a, *y = (const text_ref *)b;
    int c = memcmp(x->p, y->p, EZ_MIN(x->n, y->n));
    if (c) return c;
    return x->n < y->n ? -1 : x->n > y->n;
}

int32_t ez_vocab_sorted(const ez_tokenizer *tok, uint16_t attrs, int32_t **out, int32_t *n_out) {
    text_ref *refs = (text_ref *)malloc(((size_t)tok->n_vocab + 1) * sizeof *refs);
    int32_t i, n = 0;
    *out = NULL;
    *n_out = 0;
    if (!refs) return ez_fail(ELIZA_E_NOMEM, "out of memory sorting %d tokens", tok->n_vocab);
    for (i = 0; i < tok->n_vocab; i++) {
        if (attrs && !(tok->attr[i] & attrs)) continue;
        refs[n].p = tok->text + tok->text_off[i];
        refs[n].n = tok->text_off[i + 1] - tok->text_off[i];
        refs[n].id = i;
        n++;
    }
    if (n > 1) qsort(refs, (size_t)n, sizeof *refs, text_order);
    *out = (int32_t *)malloc(((size_t)n + 1) * sizeof **out);
    if (!*out) {
        free(refs);
        return ez_fail(ELIZA_E_NOMEM, "out of memory sorting %d tokens", tok->n_vocab);
    }
    for (i = 0; i < n; i++) (*out)[i] = refs[i].id;
    *n_out = n;
    free(refs);
    return ELIZA_OK;
}

/* Byte `depth` of token id's text, or -1 past its end. */
static int byte_at(const ez_tokenizer *tok, int32_t id, uint32_t depth) {
    uint32_t off = tok->text_off[id];
    return depth < tok->text_off[id + 1] - off ? (uint8_t)tok->text[off + depth] : -1;
}

int32_t ez_sorted_step(const ez_tokenizer *tok, const int32_t *ids, int32_t *lo, int32_t *hi,
                       uint32_t depth, uint8_t b) {
    int32_t a = *lo, z = *hi, m;
    /* first with byte >= b, then first with byte > b: ids in [a, z) are
     * ordered by their byte at `depth` (-1, a shorter text, first). */
    while (a < z) {
        m = a + (z - a) / 2;
        if (byte_at(tok, ids[m], depth) < (int)b)
            a = m + 1;
        else
            z = m;
    }
    *lo = a;
    z = *hi;
    while (a < z) {
        m = a + (z - a) / 2;
        if (byte_at(tok, ids[m], depth) <= (int)b)
            a = m + 1;
        else
            z = m;
    }
    *hi = a;
    if (*lo < *hi && tok->text_off[ids[*lo] + 1] - tok->text_off[ids[*lo]] == depth + 1)
        return ids[*lo];
    return -1;
}

/* ---- loading ------------------------------------------------------------------ */

static uint32_t rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static int32_t load_texts(ez_tokenizer *tok, const ez_gguf *g) {
    const ez_gguf_kv *kv;
    ez_str *strs = NULL;
    uint64_t total = 0, i;
    char name[32];
    int32_t rc;

    rc = ez_gguf_need_arr(g, "tokenizer.ggml.tokens", EZ_GGUF_STRING, &kv);
    if (rc) return rc;
    if (kv->arr_len == 0 || kv->arr_len > MAX_VOCAB)
        return ez_fail(ELIZA_E_FORMAT, "tokenizer: %" PRIu64 " tokens (1 to %d supported)",
                       kv->arr_len, MAX_VOCAB);
    rc = ez_gguf_arr_strings(kv, &strs);
    if (rc) return rc;
    tok->n_vocab = (int32_t)kv->arr_len;
    for (i = 0; i < kv->arr_len; i++) total += strs[i].len ? strs[i].len : sizeof name;
    if (total >= UINT32_MAX) {
        free(strs);
        return ez_fail(ELIZA_E_FORMAT, "tokenizer: token texts total %" PRIu64 " bytes", total);
    }
    tok->text = (char *)malloc((size_t)total + 1);
    tok->text_off = (uint32_t *)malloc(((size_t)tok->n_vocab + 1) * sizeof *tok->text_off);
    if (!tok->text || !tok->text_off) {
        free(strs);
        return ez_fail(ELIZA_E_NOMEM, "out of memory copying %d token texts", tok->n_vocab);
    }
    total = 0;
    for (i = 0; i < kv->arr_len; i++) {
        const char *s = strs[i].ptr;
        size_t n = (size_t)strs[i].len;
        if (n == 0) {
            /* llama.cpp renames empty tokens so that every text is distinct. */
            n = (size_t)snprintf(name, sizeof name, "[EMPTY_%u]", (unsigned)i);
            s = name;
        }
        tok->text_off[i] = (uint32_t)total;
        memcpy(tok->text + total, s, n);
        total += n;
    }
    tok->text_off[tok->n_vocab] = (uint32_t)total;
    free(strs);

    if (!htab_init(&tok->vocab, (size_t)tok->n_vocab))
        return ez_fail(ELIZA_E_NOMEM, "out of memory indexing %d tokens", tok->n_vocab);
    for (i = 0; i < (uint64_t)tok->n_vocab; i++) {
        uint32_t off = tok->text_off[i], n = tok->text_off[i + 1] - off;
        uint64_t h = ez_hash_span(tok->text + off, n);
        uint32_t *slot = vocab_slot(tok, h, tok->text + off, n);
        if (slot[0])
            return ez_fail(ELIZA_E_FORMAT, "tokenizer: tokens %u and %u have the same text '%.*s'",
                           slot[0] - 1, (unsigned)i, (int)EZ_MIN(n, 64u), tok->text + off);
        slot[0] = (uint32_t)i + 1;
        slot[1] = (uint32_t)(h >> 32);
    }
    return ELIZA_OK;
}

static int32_t load_scores_types(ez_tokenizer *tok, const ez_gguf *g) {
    const ez_gguf_kv *scores = ez_gguf_find_kv(g, "tokenizer.ggml.scores");
    const ez_gguf_kv *types = ez_gguf_find_kv(g, "tokenizer.ggml.token_type");
    int32_t i, n = tok->n_vocab;

    if (scores && (scores->type != EZ_GGUF_ARRAY ||
                   (scores->arr_type != EZ_GGUF_F32 && scores->arr_type != EZ_GGUF_I32)))
        return ez_fail(ELIZA_E_FORMAT, "tokenizer: 'tokenizer.ggml.scores' is not an array of"
                       " FLOAT32 or INT32");
    if (scores && scores->arr_len < (uint64_t)n)
        return ez_fail(ELIZA_E_FORMAT, "tokenizer: %" PRIu64 " scores for %d tokens",
                       scores->arr_len, n);
    if (types && (types->type != EZ_GGUF_ARRAY || types->arr_type != EZ_GGUF_I32))
        return ez_fail(ELIZA_E_FORMAT, "tokenizer: 'tokenizer.ggml.token_type' is not an array"
                       " of INT32");
    if (types && types->arr_len < (uint64_t)n)
        return ez_fail(ELIZA_E_FORMAT, "tokenizer: %" PRIu64 " token types for %d tokens",
                       types->arr_len, n);

    tok->score = (float *)malloc((size_t)n * sizeof *tok->score);
    tok->attr = (uint16_t *)malloc((size_t)n * sizeof *tok->attr);
    if (!tok->score || !tok->attr)
        return ez_fail(ELIZA_E_NOMEM, "out of memory for %d token scores", n);
    for (i = 0; i < n; i++) {
        float s = 0.0f;
        uint16_t a = EZ_TA_NORMAL;
        if (scores) {
            uint32_t bits = rd_u32(scores->arr_data + 4 * (size_t)i);
            if (scores->arr_type == EZ_GGUF_F32)
                memcpy(&s, &bits, sizeof s);
            else
                s = (float)(int32_t)bits;
        }
        if (types) {
            switch ((int32_t)rd_u32(types->arr_data + 4 * (size_t)i)) {
            case 1: a = EZ_TA_NORMAL; break;
            case 2: a = EZ_TA_UNKNOWN; break;
            case 3: a = EZ_TA_CONTROL; break;
            case 4: a = EZ_TA_USER_DEFINED; break;
            case 5: a = EZ_TA_UNUSED; break;
            case 6: a = EZ_TA_BYTE; break;
            default: a = 0; break; /* undefined */
            }
        }
        tok->score[i] = s;
        tok->attr[i] = a;
    }
    return ELIZA_OK;
}

/* A merge must join two tokens into a third (as Hugging Face's BPE model
 * requires); llama.cpp would fall back to bytes silently instead. m[0..n)
 * is the line, split the offset of its space. */
static int32_t check_merge(const ez_tokenizer *tok, uint64_t i, const char *m, uint32_t split,
                           size_t n) {
    const char *r = m + split + 1, *missing = NULL;
    size_t nr = n - split - 1, nm = 0;
    char *joined;
    if (ez_vocab_find(tok, m, split) < 0) {
        missing = m;
        nm = split;
    } else if (ez_vocab_find(tok, r, nr) < 0) {
        missing = r;
        nm = nr;
    }
    if (!missing) {
        joined = (char *)malloc(n);
        if (!joined) return ez_fail(ELIZA_E_NOMEM, "out of memory checking merges");
        memcpy(joined, m, split);
        memcpy(joined + split, r, nr);
        if (ez_vocab_find(tok, joined, n - 1) < 0) {
            free(joined);
            return ez_fail(ELIZA_E_FORMAT,
                           "tokenizer: merge %" PRIu64 " '%.*s' makes '%.*s%.*s', which is not a "
                           "token of the vocabulary", i, (int)EZ_MIN(n, 64u), m,
                           (int)EZ_MIN(split, 32u), m, (int)EZ_MIN(nr, 32u), r);
        }
        free(joined);
        return ELIZA_OK;
    }
    return ez_fail(ELIZA_E_FORMAT,
                   "tokenizer: merge %" PRIu64 " '%.*s' refers to '%.*s', which is not a token "
                   "of the vocabulary", i, (int)EZ_MIN(n, 64u), m, (int)EZ_MIN(nm, 64u), missing);
}

static int32_t load_merges(ez_tokenizer *tok, const ez_gguf *g) {
    const ez_gguf_kv *kv;
    ez_str *strs = NULL;
    uint64_t total = 0, i;
    int32_t rc;

    rc = ez_gguf_need_arr(g, "tokenizer.ggml.merges", EZ_GGUF_STRING, &kv);
    if (rc) return rc;
    if (kv->arr_len > MAX_MERGES)
        return ez_fail(ELIZA_E_FORMAT, "tokenizer: %" PRIu64 " merges (at most %d supported)",
                       kv->arr_len, MAX_MERGES);
    rc = ez_gguf_arr_strings(kv, &strs);
    if (rc) return rc;
    tok->n_merges = (int32_t)kv->arr_len;
    for (i = 0; i < kv->arr_len; i++) total += strs[i].len;
    if (total >= UINT32_MAX) {
        free(strs);
        return ez_fail(ELIZA_E_FORMAT, "tokenizer: merges total %" PRIu64 " bytes", total);
    }
    tok->merge_text = (char *)malloc((size_t)total + 1);
    tok->merge_off = (uint32_t *)malloc(((size_t)tok->n_merges + 1) * sizeof *tok->merge_off);
    tok->merge_split = (uint32_t *)malloc(((size_t)tok->n_merges + 1) * sizeof(uint32_t));
    if (!tok->merge_text || !tok->merge_off || !tok->merge_split ||
        !htab_init(&tok->merges, (size_t)tok->n_merges)) {
        free(strs);
        return ez_fail(ELIZA_E_NOMEM, "out of memory for %d merges", tok->n_merges);
    }
    total = 0;
    for (i = 0; i < kv->arr_len; i++) {
        const char *m = strs[i].ptr, *sp;
        size_t n = (size_t)strs[i].len;
        uint32_t split;
        tok->merge_off[i] = (uint32_t)total;
        memcpy(tok->merge_text + total, m, n);
        total += n;
        tok->merge_off[i + 1] = (uint32_t)total;
        /* "left right", split at the first space after the first byte. A line
         * without one, or a pair seen before, never matches: keep the first. */
        sp = n > 1 ? (const char *)memchr(m + 1, ' ', n - 1) : NULL;
        if (!sp) continue;
        split = (uint32_t)(sp - m);
        if ((rc = check_merge(tok, i, m, split, n)) != ELIZA_OK) break;
        if (ez_merge_find(tok, m, split, sp + 1, n - split - 1) >= 0) continue;
        tok->merge_split[i] = split;
        htab_insert(&tok->merges, merge_hash(m, split, sp + 1, n - split - 1), (uint32_t)i);
    }
    free(strs);
    return rc;
}

/* The pre-tokenizer named by tokenizer.ggml.pre, with llama.cpp's flags. */
static int32_t pick_pre(ez_tokenizer *tok, const ez_gguf *g) {
    static const struct {
        const char *name;
        ez_pre_type pre;
        int clean_spaces, ignore_merges, add_bos, no_bos;
    } table[] = {
        {"default", EZ_PRE_DEFAULT, 1, 0, 0, 0},
        {"minicpm5", EZ_PRE_MINICPM5, 1, 1, 0, 0},
        {"llama3", EZ_PRE_LLAMA3, 1, 1, 1, 0},
        {"llama-v3", EZ_PRE_LLAMA3, 1, 1, 1, 0},
        {"llama-bpe", EZ_PRE_LLAMA3, 1, 1, 1, 0},
        {"falcon3", EZ_PRE_LLAMA3, 1, 1, 1, 0},
        {"falcon-h1", EZ_PRE_LLAMA3, 1, 1, 1, 0},
        {"pixtral", EZ_PRE_LLAMA3, 1, 1, 1, 0},
        {"midm-2.0", EZ_PRE_LLAMA3, 1, 1, 1, 0},
        {"lfm2", EZ_PRE_LLAMA3, 1, 1, 1, 0},
        {"jina-v5-nano", EZ_PRE_LLAMA3, 1, 1, 1, 0},
        {"deepseek-llm", EZ_PRE_DEEPSEEK_LLM, 0, 0, 0, 0},
        {"deepseek-coder", EZ_PRE_DEEPSEEK_CODER, 0, 0, 0, 0},
        {"deepseek-v3", EZ_PRE_DEEPSEEK3_LLM, 0, 0, 0, 0},
        {"spark2_5", EZ_PRE_SPARK2_5, 0, 0, 0, 0},
        {"youtu", EZ_PRE_YOUTU, 0, 1, 0, 0},
        {"falcon", EZ_PRE_FALCON, 1, 0, 0, 0},
        {"mpt", EZ_PRE_GPT2, 1, 0, 0, 0},
        {"starcoder", EZ_PRE_STARCODER, 1, 0, 0, 0},
        {"gpt-2", EZ_PRE_GPT2, 1, 0, 0, 0},
        {"phi-2", EZ_PRE_GPT2, 1, 0, 0, 0},
        {"jina-es", EZ_PRE_GPT2, 1, 0, 0, 0},
        {"jina-de", EZ_PRE_GPT2, 1, 0, 0, 0},
        {"gigachat", EZ_PRE_GPT2, 1, 0, 0, 0},
        {"jina-v2-es", EZ_PRE_GPT2, 1, 0, 0, 0},
        {"jina-v2-de", EZ_PRE_GPT2, 1, 0, 0, 0},
        {"a.x-4.0", EZ_PRE_GPT2, 1, 0, 0, 0},
        {"mellum", EZ_PRE_GPT2, 1, 0, 0, 0},
        {"modern-bert", EZ_PRE_GPT2, 1, 0, 0, 0},
        {"jais-2", EZ_PRE_JAIS2, 1, 0, 0, 0},
        {"jina-v1-en", EZ_PRE_GPT2, 1, 0, 0, 0},
        {"jina-v2-code", EZ_PRE_GPT2, 1, 0, 0, 0},
        {"roberta-bpe", EZ_PRE_GPT2, 1, 0, 0, 0},
        {"refact", EZ_PRE_STARCODER, 1, 0, 0, 0},
        {"command-r", EZ_PRE_STARCODER, 0, 0, 0, 0},
        {"qwen2", EZ_PRE_QWEN2, 0, 0, 0, 0},
        {"deepseek-r1-qwen", EZ_PRE_QWEN2, 0, 0, 0, 0},
        {"kormo", EZ_PRE_QWEN2, 0, 0, 0, 0},
        {"f2llmv2", EZ_PRE_QWEN2, 0, 0, 0, 0},
        {"qwen35", EZ_PRE_QWEN35, 0, 0, 0, 0},
        {"stablelm2", EZ_PRE_QWEN2, 1, 0, 0, 0},
        {"olmo", EZ_PRE_GPT2, 1, 0, 0, 0},
        {"dbrx", EZ_PRE_LLAMA3, 1, 0, 0, 0},
        {"smaug-bpe", EZ_PRE_LLAMA3, 1, 0, 0, 0},
        {"poro-chat", EZ_PRE_PORO, 0, 0, 0, 0},
        {"chatglm-bpe", EZ_PRE_LLAMA3, 1, 0, 0, 1},
        {"glm4", EZ_PRE_LLAMA3, 1, 1, 0, 1},
        {"glm5", EZ_PRE_LLAMA3, 1, 1, 0, 1},
        {"viking", EZ_PRE_VIKING, 0, 0, 0, 0},
        {"jais", EZ_PRE_GPT2, 1, 0, 0, 0},
        {"tekken", EZ_PRE_TEKKEN, 0, 1, 1, 0},
        {"smollm", EZ_PRE_STARCODER, 0, 0, 0, 0},
        {"codeshell", EZ_PRE_STARCODER, 1, 0, 0, 0},
        {"bloom", EZ_PRE_PORO, 1, 0, 0, 0},
        {"gpt3-finnish", EZ_PRE_PORO, 1, 0, 0, 0},
        {"exaone", EZ_PRE_STARCODER, 1, 0, 0, 0},
        {"exaone4", EZ_PRE_GPT2, 1, 0, 0, 0},
        {"exaone-moe", EZ_PRE_EXAONE_MOE, 1, 0, 0, 0},
        {"chameleon", EZ_PRE_CHAMELEON, 0, 0, 1, 0},
        {"minerva-7b", EZ_PRE_STARCODER, 1, 0, 0, 0},
        {"megrez", EZ_PRE_QWEN2, 1, 0, 0, 0},
        {"gpt-4o", EZ_PRE_GPT4O, 0, 0, 0, 0},
        {"llama4", EZ_PRE_GPT4O, 0, 0, 0, 0},
        {"kanana2", EZ_PRE_GPT4O, 0, 0, 0, 0},
        {"talkie", EZ_PRE_GPT4O, 0, 0, 0, 0},
        {"granite-embed-multi-97m", EZ_PRE_GRANITE_EMB_MULTI, 0, 1, 0, 0},
        {"tiny_aya", EZ_PRE_TINY_AYA, 0, 0, 0, 0},
        {"cohere2moe", EZ_PRE_TINY_AYA, 0, 0, 0, 0},
        {"superbpe", EZ_PRE_SUPERBPE, 0, 0, 0, 0},
        {"trillion", EZ_PRE_GPT2, 0, 0, 0, 0},
        {"granite-docling", EZ_PRE_GPT2, 0, 0, 0, 0},
        {"bailingmoe", EZ_PRE_BAILINGMOE, 0, 0, 0, 0},
        {"bailingmoe2", EZ_PRE_BAILINGMOE, 0, 0, 0, 0},
        {"llada-moe", EZ_PRE_BAILINGMOE, 0, 0, 0, 0},
        {"seed-coder", EZ_PRE_SEED_CODER, 0, 0, 0, 0},
        {"hunyuan", EZ_PRE_QWEN2, 0, 0, 0, 0},
        {"hunyuan-dense", EZ_PRE_DEEPSEEK3_LLM, 0, 0, 0, 0},
        {"hy_v4", EZ_PRE_DEEPSEEK3_LLM, 0, 0, 0, 0},
        {"joyai-llm", EZ_PRE_DEEPSEEK3_LLM, 0, 0, 0, 0},
        {"kimi-k2", EZ_PRE_KIMI_K2, 0, 0, 0, 0},
        {"ufakzeka", EZ_PRE_UFAKZEKA, 0, 0, 0, 0},
        {"grok-2", EZ_PRE_QWEN2, 0, 0, 0, 0},
        {"afmoe", EZ_PRE_AFMOE, 0, 0, 0, 0},
        {"laguna", EZ_PRE_LAGUNA, 0, 0, 0, 0},
        {"minimax-m2", EZ_PRE_GPT4O, 0, 0, 0, 0},
        {"solar-open", EZ_PRE_QWEN2, 0, 0, 0, 0},
        {"mellum2", EZ_PRE_STARCODER, 1, 0, 0, 0},
        {"gemma4", EZ_PRE_GEMMA4, 1, 0, 0, 0},
        {"granite-embed-multi-311m", EZ_PRE_GEMMA4, 1, 0, 0, 0},
        {"sarvam-moe", EZ_PRE_SARVAM_MOE, 0, 0, 0, 0},
        {"whitespace", EZ_PRE_WHITESPACE, 1, 0, 0, 0},
    };
    ez_str pre = {"", 0};
    size_t i;
    int32_t rc = ez_gguf_opt_str(g, "tokenizer.ggml.pre", &pre);

    if (rc) return rc;
    if (tok->gemma4_model) { /* tokenizer.ggml.model "gemma4" names its pre-tokenizer */
        pre.ptr = "gemma4";
        pre.len = 6;
    }
    if (pre.len == 0) {
        pre.ptr = "default";
        pre.len = 7;
    }
    for (i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strlen(table[i].name) == pre.len && memcmp(table[i].name, pre.ptr, pre.len) == 0) {
            tok->pre = table[i].pre;
            tok->clean_spaces = table[i].clean_spaces;
            tok->ignore_merges = table[i].ignore_merges;
            if (table[i].add_bos) tok->add_bos = 1;
            if (table[i].no_bos) tok->bos = -1;
            /* Vocabularies of raw UTF-8 (no GPT-2 byte code points). */
            tok->raw_utf8 = tok->pre >= EZ_PRE_GEMMA4;
            tok->escape_spaces = tok->pre == EZ_PRE_GEMMA4 || tok->pre == EZ_PRE_SARVAM_MOE;
            tok->newline_words = tok->pre == EZ_PRE_GEMMA4;
            return ELIZA_OK;
        }
    }
    return ez_fail(ELIZA_E_UNSUPPORTED, "tokenizer: BPE pre-tokenizer '%.*s' is not supported",
                   (int)EZ_MIN(pre.len, 64u), pre.ptr);
}

/* A special id from its key: in range replaces *id, out of range keeps it. */
static int32_t read_id(const ez_tokenizer *tok, const ez_gguf *g, const char *key, int32_t *id) {
    uint32_t v = UINT32_MAX;
    int32_t rc = ez_gguf_opt_u32(g, key, 0, UINT32_MAX, &v);
    if (*id >= tok->n_vocab) *id = -1;
    if (rc) return rc;
    if (v < (uint32_t)tok->n_vocab) *id = (int32_t)v;
    return ELIZA_OK;
}

static int32_t find_text(const ez_tokenizer *tok, const char *s) {
    return ez_vocab_find(tok, s, strlen(s));
}

/* The first of `names` in the vocabulary, or -1. */
static int32_t find_any(const ez_tokenizer *tok, const char *const *names) {
    for (; *names; names++) {
        int32_t id = find_text(tok, *names);
        if (id >= 0) return id;
    }
    return -1;
}

static int has_text(const ez_tokenizer *tok, int32_t id, const char *s) {
    size_t n = strlen(s);
    return tok->text_off[id + 1] - tok->text_off[id] == n &&
           memcmp(tok->text + tok->text_off[id], s, n) == 0;
}

#define FW "\xEF\xBD\x9C" /* U+FF5C FULLWIDTH VERTICAL LINE */
#define SP "\xE2\x96\x81" /* U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space */

/* llama.cpp finds end-of-turn, fill-in-the-middle and end-of-generation
 * tokens by their text where the file does not name them, and marks them
 * CONTROL (so they are split out only with parse_special and render as ""). */
static int32_t classify_specials(ez_tokenizer *tok, const ez_gguf *g) {
    static const char *const eot_names[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
        "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<" FW "end" SP "of" SP "sentence" FW ">",
        "<end_of_utterance>", NULL};
    static const char *const eom_names[] = {"<|eom_id|>", NULL};
    static const char *const fim_pre_names[] = {
        "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<" FW "fim" SP "begin" FW ">", "<PRE>",
        SP "<PRE>", "<|code_prefix|>", "<|prefix|>", NULL};
    static const char *const fim_suf_names[] = {
        "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<" FW "fim" SP "hole" FW ">", "<SUF>",
        SP "<SUF>", "<|code_suffix|>", "<|suffix|>", NULL};
    static const char *const fim_mid_names[] = {
        "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<" FW "fim" SP "end" FW ">", "<MID>",
        SP "<MID>", "<|code_middle|>", "<|middle|>", NULL};
    static const char *const fim_pad_names[] = {
        "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
    static const char *const fim_rep_names[] = {
        "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
    static const char *const fim_sep_names[] = {"<|file_sep|>", NULL};
    static const char *const eog_names[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
        "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>",
        "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",
        "<|tool_response>", "<" FW "end" SP "of" SP "sentence" FW ">", "[e~[", NULL};
    static const char *const always_rendered[] = {
        "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};
    static const struct {
        const char *key;
        int slot;
    } keys[] = {
        {"tokenizer.ggml.eot_token_id", 0}, {"tokenizer.ggml.eom_token_id", 1},
        {"tokenizer.ggml.fim_pre_token_id", 2}, {"tokenizer.ggml.fim_suf_token_id", 3},
        {"tokenizer.ggml.fim_mid_token_id", 4}, {"tokenizer.ggml.fim_pad_token_id", 5},
        {"tokenizer.ggml.fim_rep_token_id", 6}, {"tokenizer.ggml.fim_sep_token_id", 7},
        {"tokenizer.ggml.prefix_token_id", 2}, {"tokenizer.ggml.suffix_token_id", 3},
        {"tokenizer.ggml.middle_token_id", 4},
    };
    static const char *const *const by_text[8] = {
        eot_names, eom_names, fim_pre_names, fim_suf_names,
        fim_mid_names, fim_pad_names, fim_rep_names, fim_sep_names};
    int32_t ids[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    int32_t i, end_id = -1, s_id = -1;
    int has_return = 0, has_call = 0, has_flush = 0, has_marker = 0;
    const char *const *name;
    size_t k;
    int32_t rc;

    for (k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        rc = read_id(tok, g, keys[k].key, &ids[keys[k].slot]);
        if (rc) return rc;
    }
    for (k = 0; k < 8; k++) {
        if (ids[k] >= 0) continue;
        ids[k] = find_any(tok, by_text[k]);
        if (ids[k] >= 0) tok->attr[ids[k]] |= EZ_TA_CONTROL;
    }
    for (k = 5; k < 8; k++) {
        if (ids[k] >= 0) tok->attr[ids[k]] |= EZ_TA_EOG;
    }
    for (name = eog_names; *name; name++) {
        i = find_text(tok, *name);
        if (i >= 0) tok->attr[i] |= EZ_TA_EOG | EZ_TA_CONTROL;
    }
    /* gpt-oss: rendered always, even when special tokens are not. */
    for (name = always_rendered; *name; name++) {
        i = find_text(tok, *name);
        if (i >= 0) tok->attr[i] = (uint16_t)((tok->attr[i] & EZ_TA_EOG) | EZ_TA_USER_DEFINED);
    }
    if (tok->eos >= 0) tok->attr[tok->eos] |= EZ_TA_EOG;
    if (ids[0] >= 0) tok->attr[ids[0]] |= EZ_TA_EOG;
    if (ids[1] >= 0) tok->attr[ids[1]] |= EZ_TA_EOG;

    /* harmony / solar-open: "<|end|>" ends a message, not the generation. */
    for (i = 0; i < tok->n_vocab; i++) {
        if (!(tok->attr[i] & EZ_TA_EOG)) continue;
        if (has_text(tok, i, "<|return|>")) has_return = 1;
        else if (has_text(tok, i, "<|call|>") || has_text(tok, i, "<|calls|>")) has_call = 1;
        else if (has_text(tok, i, "<|flush|>")) has_flush = 1;
        else if (has_text(tok, i, "<|end|>")) end_id = i;
        if (has_text(tok, i, "<|tool_response>") || has_text(tok, i, "<|plamo:eos|>"))
            has_marker = 1;
        else if (has_text(tok, i, "</s>")) s_id = i;
    }
    if (end_id >= 0 && has_call && (has_return || has_flush))
        tok->attr[end_id] = EZ_TA_USER_DEFINED;
    /* gemma4 / plamo: "</s>" is an ordinary token there. */
    if (has_marker && s_id >= 0) tok->attr[s_id] = EZ_TA_NORMAL;
    return ELIZA_OK;
}

/* A special token to split out, with its text length. */
typedef struct {
    uint32_t len;
    int32_t id;
} candidate;

/* Matching order: longest first (ties by id; llama.cpp leaves them to
 * std::sort, which only matters for equal-length texts that overlap). */
static int longer_first(const void *a, const void *b) {
    const candidate *x = (const candidate *)a, *y = (const candidate *)b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The entry of prefix s[0..n) (hash h), or the empty slot where it goes. */
static struct ez_prefix *prefix_slot(const ez_tokenizer *tok, uint64_t h, const char *s,
                                     uint32_t n) {
    uint32_t i = (uint32_t)h & tok->prefix_mask;
    for (;; i = (i + 1) & tok->prefix_mask) {
        struct ez_prefix *e = &tok->prefix[i];
        if (e->rep < 0 ||
            (e->len == n && memcmp(tok->text + tok->text_off[e->rep], s, n) == 0))
            return e;
    }
}

/* Whether the string key contains needle; general.name compares lowercased,
 * as llama.cpp lowercases the model name. */
static int meta_contains(const ez_gguf *g, const char *key, const char *needle) {
    char low[256];
    ez_str v;
    size_t k, n;
    if (ez_gguf_get_str(g, key, &v) != ELIZA_OK) return 0;
    n = EZ_MIN((size_t)v.len, sizeof low - 1);
    for (k = 0; k < n; k++)
        low[k] = strcmp(key, "general.name") == 0 ? (char)tolower((unsigned char)v.ptr[k]) : v.ptr[k];
    low[n] = '\0';
    return strstr(low, needle) != NULL;
}

static int32_t build_special_index(ez_tokenizer *tok, const ez_gguf *g) {
    const uint16_t special = EZ_TA_CONTROL | EZ_TA_USER_DEFINED | EZ_TA_UNKNOWN;
    size_t n_bytes = 0, cap = 16, k;
    int32_t i;

    tok->n_special = 0;
    for (i = 0; i < tok->n_vocab; i++) {
        if (!(tok->attr[i] & special)) continue;
        tok->n_special++;
        n_bytes += tok->text_off[i + 1] - tok->text_off[i];
    }
    while (cap < 2 * n_bytes) cap *= 2;
    tok->special = (int32_t *)malloc((size_t)(tok->n_special ? tok->n_special : 1) *
                                     sizeof *tok->special);
    tok->prefix = (struct ez_prefix *)malloc(cap * sizeof *tok->prefix);
    if (!tok->special || !tok->prefix)
        return ez_fail(ELIZA_E_NOMEM, "out of memory indexing %d special tokens", tok->n_special);
    tok->prefix_mask = (uint32_t)(cap - 1);
    for (k = 0; k < cap; k++) tok->prefix[k].rep = -1;

    tok->n_special = 0;
    for (i = 0; i < tok->n_vocab; i++) {
        const char *t = tok->text + tok->text_off[i];
        uint32_t n = tok->text_off[i + 1] - tok->text_off[i], len;
        uint64_t h = EZ_HASH_INIT;
        if (!(tok->attr[i] & special)) continue;
        tok->special[tok->n_special++] = i;
        for (len = 1; len <= n; len++) {
            struct ez_prefix *e;
            h = ez_hash_bytes(h, t + len - 1, 1);
            e = prefix_slot(tok, h, t, len);
            if (e->rep < 0) {
                e->rep = i;
                e->len = len;
                e->full = -1;
            }
            if (len == n) e->full = i;
        }
    }

    /* Whitespace next to some special tokens goes with them, by llama.cpp's
     * rules on the pre-tokenizer, architecture and model names: a mask token
     * takes the whitespace before it (jina v2/v3, nomic-bert-moe,
     * modern-bert), Phi-3's special tokens the whitespace after them. */
    if (meta_contains(g, "tokenizer.ggml.pre", "jina-v2-de") || meta_contains(g, "tokenizer.ggml.pre", "jina-v2-es") ||
        meta_contains(g, "tokenizer.ggml.pre", "jina-v2-code") ||
        meta_contains(g, "general.architecture", "nomic-bert-moe") ||
        meta_contains(g, "general.architecture", "jina-bert-v3")) {
        if ((i = find_text(tok, "<mask>")) >= 0) tok->attr[i] |= EZ_TA_LSTRIP;
    } else if (meta_contains(g, "general.name", "phi-3") || meta_contains(g, "general.name", "phi3")) {
        static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>", NULL};
        const char *const *kp;
        for (i = 0; i < tok->n_special; i++) tok->attr[tok->special[i]] |= EZ_TA_RSTRIP;
        if ((i = find_text(tok, "</s>")) >= 0) tok->attr[i] |= EZ_TA_RSTRIP;
        for (kp = keep; *kp; kp++) {
            if ((i = find_text(tok, *kp)) >= 0) tok->attr[i] &= (uint16_t)~EZ_TA_RSTRIP;
        }
    } else if (meta_contains(g, "general.name", "modern-bert")) {
        if ((i = find_text(tok, "[MASK]")) >= 0) tok->attr[i] |= EZ_TA_LSTRIP;
    }
    return ELIZA_OK;
}

/* The byte of a byte token "<0xHH>", read as llama.cpp reads it. */
static int32_t byte_of(const ez_tokenizer *tok, int32_t id, uint8_t *out) {
    uint32_t off = tok->text_off[id], n = tok->text_off[id + 1] - off;
    char hex[3] = {0, 0, 0};
    if (n < 3)
        return ez_fail(ELIZA_E_FORMAT, "tokenizer: byte token %d has text '%.*s' (<0xHH>"
                       " expected)", id, (int)n, tok->text + off);
    memcpy(hex, tok->text + off + 3, EZ_MIN(n - 3, 2u));
    *out = (uint8_t)(unsigned long)strtol(hex, NULL, 16);
    return ELIZA_OK;
}

static int32_t build_byte_tables(ez_tokenizer *tok) {
    static const char hexd[] = "0123456789ABCDEF";
    int32_t i;
    uint8_t b;
    for (i = 0; i < 256; i++) {
        char name[6] = {'<', '0', 'x', hexd[i >> 4], hexd[i & 15], '>'};
        char one = (char)i;
        tok->char_token[i] = ez_vocab_find(tok, &one, 1);
        tok->byte_token[i] = ez_vocab_find(tok, name, 6);
        if (tok->byte_token[i] < 0) tok->byte_token[i] = tok->char_token[i];
    }
    /* Every token rendered as a byte must read as one. */
    for (i = 0; i < tok->n_vocab; i++) {
        int32_t rc;
        if ((tok->attr[i] & (EZ_TA_BYTE | EZ_TA_NORMAL | RENDERED_AS_TEXT)) != EZ_TA_BYTE)
            continue;
        rc = byte_of(tok, i, &b);
        if (rc) return rc;
    }
    return ELIZA_OK;
}

int32_t ez_tokenizer_load(const ez_gguf *g, ez_tokenizer **out) {
    static const char *const id_keys[] = {"tokenizer.ggml.bos_token_id",
                                              "tokenizer.ggml.eos_token_id",
                                              "tokenizer.ggml.unknown_token_id",
                                              "tokenizer.ggml.seperator_token_id"};
    ez_tokenizer *tok;
    ez_str model;
    int32_t rc, *ids[4];
    size_t k;

    if (!g || !out) return ez_fail(ELIZA_E_INVALID_ARG, "ez_tokenizer_load: NULL argument");
    *out = NULL;
    rc = ez_gguf_need_str(g, "tokenizer.ggml.model", &model);
    if (rc) return rc;
    tok = (ez_tokenizer *)calloc(1, sizeof *tok);
    if (!tok) return ez_fail(ELIZA_E_NOMEM, "out of memory loading the tokenizer");
    tok->sep = -1;

    if (model.len == 5 && memcmp(model.ptr, "llama", 5) == 0) {
        tok->type = EZ_TOK_SPM;
        tok->bos = 1;
        tok->eos = 2;
        tok->unk = 0;
        tok->add_bos = 1;
        tok->add_space_prefix = 1;
    } else if (model.len == 4 && memcmp(model.ptr, "gpt2", 4) == 0) {
        tok->type = EZ_TOK_BPE;
        tok->bos = 11;
        tok->eos = 11;
        tok->unk = -1;
    } else if (model.len == 6 && memcmp(model.ptr, "gemma4", 6) == 0) {
        /* Gemma 4's BPE (llama.cpp's converter writes it so): no default ids. */
        tok->type = EZ_TOK_BPE;
        tok->gemma4_model = 1;
        tok->bos = tok->eos = tok->unk = -1;
    } else if (model.len == 10 && memcmp(model.ptr, "whitespace", 10) == 0) {
        tok->type = EZ_TOK_BPE;
        tok->whitespace_model = 1;
        tok->bos = tok->eos = 11;
        tok->unk = -1;
    } else if (model.len == 4 && memcmp(model.ptr, "bert", 4) == 0) {
        tok->type = EZ_TOK_WPM;
        tok->bos = 101;
        tok->eos = -1;
        tok->unk = 100;
        tok->sep = 102;
        tok->add_bos = 1;
        tok->clean_spaces = 1;
    } else if (model.len == 2 && memcmp(model.ptr, "t5", 2) == 0) {
        tok->type = EZ_TOK_UGM;
        tok->bos = -1;
        tok->eos = 1;
        tok->unk = 2;
        tok->add_eos = 1;
    } else {
        rc = ez_fail(ELIZA_E_UNSUPPORTED, "tokenizer model '%.*s' is not supported (\"llama\""
                     " SentencePiece, \"gpt2\", \"gemma4\" and \"whitespace\" BPE, \"bert\""
                     " WordPiece and \"t5\" unigram are)",
                     (int)EZ_MIN(model.len, 64u), model.ptr);
        goto fail;
    }
    if (tok->type == EZ_TOK_BPE && (rc = pick_pre(tok, g)) != ELIZA_OK) goto fail;
    if (tok->type == EZ_TOK_BPE && (rc = ez_pretok_init(&tok->pretok, tok->pre)) != ELIZA_OK)
        goto fail;
    if ((rc = ez_gguf_opt_bool(g, "tokenizer.ggml.add_space_prefix", &tok->add_space_prefix)) ||
        (rc = load_texts(tok, g)) || (rc = load_scores_types(tok, g)))
        goto fail;
    if (tok->type == EZ_TOK_BPE && (rc = load_merges(tok, g)) != ELIZA_OK) goto fail;
    if (tok->type == EZ_TOK_UGM && (rc = ez_ugm_init(tok, g)) != ELIZA_OK) goto fail;
    if (tok->type == EZ_TOK_WPM &&
        (rc = ez_vocab_sorted(tok, 0, &tok->sorted, &tok->n_sorted)) != ELIZA_OK)
        goto fail;

    ids[0] = &tok->bos;
    ids[1] = &tok->eos;
    ids[2] = &tok->unk;
    ids[3] = &tok->sep;
    for (k = 0; k < 4; k++) {
        if ((rc = read_id(tok, g, id_keys[k], ids[k])) != ELIZA_OK) goto fail;
    }
    /* BERT's normalizer: lowercase by default, strip_accents as lowercase. */
    tok->lowercase = tok->pre != EZ_PRE_WHITESPACE;
    if ((rc = ez_gguf_opt_bool(g, "tokenizer.ggml.normalizer.lowercase", &tok->lowercase)) != ELIZA_OK)
        goto fail;
    tok->strip_accents = tok->lowercase;
    if ((rc = ez_gguf_opt_bool(g, "tokenizer.ggml.normalizer.strip_accents", &tok->strip_accents)) ||
        (rc = ez_gguf_opt_bool(g, "tokenizer.ggml.remove_extra_whitespaces", &tok->remove_extra_ws)) ||
        (rc = ez_gguf_opt_bool(g, "tokenizer.ggml.add_bos_token", &tok->add_bos)) ||
        (rc = ez_gguf_opt_bool(g, "tokenizer.ggml.add_eos_token", &tok->add_eos)) ||
        (rc = classify_specials(tok, g)) || (rc = build_special_index(tok, g)) ||
        (rc = build_byte_tables(tok)))
        goto fail;
    if (tok->pre == EZ_PRE_GEMMA4) tok->add_bos = 1; /* llama.cpp overrides the key for Gemma 4 */
    if ((tok->type == EZ_TOK_WPM || tok->type == EZ_TOK_UGM) && tok->unk < 0) {
        rc = ez_fail(ELIZA_E_FORMAT, "tokenizer: this %s vocabulary has no unknown token (%s"
                     " needs one for text it cannot cover)",
                     tok->type == EZ_TOK_WPM ? "WordPiece" : "unigram",
                     "tokenizer.ggml.unknown_token_id");
        goto fail;
    }
    *out = tok;
    return ELIZA_OK;

fail:
    ez_tokenizer_free(tok);
    return rc;
}

void ez_tokenizer_free(ez_tokenizer *tok) {
    if (!tok) return;
    free(tok->text);
    free(tok->text_off);
    free(tok->score);
    free(tok->attr);
    free(tok->vocab.slots);
    free(tok->merge_text);
    free(tok->merge_off);
    free(tok->merge_split);
    free(tok->merges.slots);
    free(tok->special);
    free(tok->prefix);
    free(tok->sorted);
    free(tok->sorted_user);
    free(tok->xcda);
    free(tok->replacements);
    ez_pretok_free(&tok->pretok);
    free(tok);
}

int32_t ez_tokenizer_n_vocab(const ez_tokenizer *tok) { return tok->n_vocab; }
int32_t ez_tokenizer_bos(const ez_tokenizer *tok) { return tok->bos; }
int32_t ez_tokenizer_eos(const ez_tokenizer *tok) { return tok->eos; }
int ez_tokenizer_add_bos(const ez_tokenizer *tok) { return tok->add_bos && tok->bos >= 0; }

int ez_tokenizer_is_eog(const ez_tokenizer *tok, int32_t id) {
    return id >= 0 && id < tok->n_vocab && (tok->attr[id] & EZ_TA_EOG) != 0;
}

/* ---- tokenize ------------------------------------------------------------------ */

static int is_special_allowed(const ez_tokenizer *tok, int32_t id, int parse_special) {
    /* Without parse_special only user-defined tokens are split out. */
    return parse_special || !(tok->attr[id] & (EZ_TA_CONTROL | EZ_TA_UNKNOWN));
}

/* The special tokens whose text occurs anywhere in text, in matching order
 * (*out malloc'd): from every position, follow the prefixes of special texts
 * while they match. */
static int32_t find_candidates(const ez_tokenizer *tok, const char *text, size_t len,
                               int parse_special, candidate **out, size_t *n_out) {
    uint8_t *mark = (uint8_t *)calloc(((size_t)tok->n_vocab + 7) / 8, 1);
    candidate *cand = NULL;
    size_t i, n_cand = 0, cap = 0;

    *out = NULL;
    *n_out = 0;
    if (!mark) goto nomem;
    for (i = 0; i < len; i++) {
        uint64_t h = EZ_HASH_INIT;
        uint32_t n;
        for (n = 1; n <= len - i; n++) {
            const struct ez_prefix *e;
            int32_t id;
            h = ez_hash_bytes(h, text + i + n - 1, 1);
            e = prefix_slot(tok, h, text + i, n);
            if (e->rep < 0) break;
            id = e->full;
            if (id < 0 || !is_special_allowed(tok, id, parse_special) ||
                (mark[id >> 3] & (1u << (id & 7))))
                continue;
            mark[id >> 3] |= (uint8_t)(1u << (id & 7));
            if (n_cand == cap) {
                candidate *p;
                cap = cap ? 2 * cap : 16;
                p = (candidate *)realloc(cand, cap * sizeof *p);
                if (!p) goto nomem;
                cand = p;
            }
            cand[n_cand].len = n;
            cand[n_cand].id = id;
            n_cand++;
        }
    }
    free(mark);
    if (n_cand > 1) qsort(cand, n_cand, sizeof *cand, longer_first);
    *out = cand;
    *n_out = n_cand;
    return ELIZA_OK;
nomem:
    free(mark);
    free(cand);
    return ez_fail(ELIZA_E_NOMEM, "out of memory tokenizing %zu bytes", len);
}

/* First occurrence of needle[0..n) in hay[from..to), or (size_t)-1. */
static size_t find_bytes(const char *hay, size_t from, size_t to, const char *needle, size_t n) {
    while (from + n <= to) {
        const char *p = (const char *)memchr(hay + from, needle[0], to - from - n + 1);
        if (!p) return (size_t)-1;
        from = (size_t)(p - hay);
        if (p[n - 1] == needle[n - 1] && memcmp(p, needle, n) == 0) return from;
        from++;
    }
    return (size_t)-1;
}

static int c_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

typedef struct {
    size_t off, len;
    int32_t id; /* -1: raw text still to tokenize */
} fragment;

typedef struct {
    fragment *f;
    size_t n, cap;
} fraglist;

static int frag_push(fraglist *l, size_t off, size_t len, int32_t id) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        fragment *p = (fragment *)realloc(l->f, cap * sizeof *p);
        if (!p) return 0;
        l->f = p;
        l->cap = cap;
    }
    l->f[l->n].off = off;
    l->f[l->n].len = len;
    l->f[l->n].id = id;
    l->n++;
    return 1;
}

/* llama.cpp's special-token partition: for each candidate, longest first,
 * every occurrence inside what is still raw text becomes that token (raw
 * text is split around it; an RSTRIP token also takes the whitespace after
 * it). Raw text is tracked as the bytes not yet taken: taken[i] is
 * 0 for raw, 1 + the index of the token starting there, or UINT32_MAX for
 * the rest of a token and stripped whitespace. */
static int32_t partition(const ez_tokenizer *tok, const char *text, size_t len,
                         int parse_special, fraglist *frags) {
    candidate *cand = NULL;
    uint32_t *taken = NULL;
    size_t c, i, run = 0, n_cand = 0;
    int32_t rc = find_candidates(tok, text, len, parse_special, &cand, &n_cand);

    if (rc) return rc;
    if (n_cand > 0) {
        taken = (uint32_t *)calloc(len, sizeof *taken);
        if (!taken) goto nomem;
    }
    for (c = 0; c < n_cand; c++) {
        int32_t id = cand[c].id;
        const char *s = tok->text + tok->text_off[id];
        size_t n = cand[c].len, pos = 0, m;
        int rstrip = (tok->attr[id] & EZ_TA_RSTRIP) != 0, lstrip = (tok->attr[id] & EZ_TA_LSTRIP) != 0;
        while ((m = find_bytes(text, pos, len, s, n)) != (size_t)-1) {
            size_t k, end = m + n;
            for (k = m; k < end && taken[k] == 0; k++) {}
            if (k < end) {
                pos = m + 1;
                continue;
            }
            taken[m] = (uint32_t)c + 1;
            for (k = m + 1; k < end; k++) taken[k] = UINT32_MAX;
            if (lstrip)
                for (k = m; k > 0 && taken[k - 1] == 0 && c_space(text[k - 1]); k--) taken[k - 1] = UINT32_MAX;
            if (rstrip)
                for (; end < len && taken[end] == 0 && c_space(text[end]); end++)
                    taken[end] = UINT32_MAX;
            pos = end;
        }
    }
    for (i = 0; i < len; i++) {
        uint32_t t = taken ? taken[i] : 0;
        if (t == 0) continue;
        if (i > run && !frag_push(frags, run, i - run, -1)) goto nomem;
        if (t != UINT32_MAX && !frag_push(frags, i, cand[t - 1].len, cand[t - 1].id)) goto nomem;
        run = i + 1;
    }
    if (len > run && !frag_push(frags, run, len - run, -1)) goto nomem;
    goto done;
nomem:
    rc = ez_fail(ELIZA_E_NOMEM, "out of memory tokenizing %zu bytes", len);
done:
    free(taken);
    free(cand);
    return rc;
}

int32_t ez_tokenize(const ez_tokenizer *tok, const char *text, size_t len, int add_bos,
                    int parse_special, int32_t **out, size_t *n_out) {
    ez_idvec ids = {NULL, 0, 0};
    fraglist frags = {NULL, 0, 0};
    int prev_special = 1, wpm;
    size_t bad, f;
    int32_t rc = ELIZA_OK;

    if (!tok || !out || !n_out || (!text && len))
        return ez_fail(ELIZA_E_INVALID_ARG, "ez_tokenize: NULL argument");
    *out = NULL;
    *n_out = 0;
    bad = ez_utf8_invalid_at((const uint8_t *)text, len);
    if (bad < len)
        return ez_fail(ELIZA_E_INVALID_ARG, "text is not valid UTF-8: byte 0x%02X at offset %zu"
                       " does not start a valid sequence", (uint8_t)text[bad], bad);

    if (len > 0 && (rc = partition(tok, text, len, parse_special, &frags)) != ELIZA_OK)
        goto done;
    /* WordPiece: [CLS] text [SEP] whenever special tokens are asked for, as
     * llama.cpp adds them whatever add_bos_token says. */
    wpm = tok->type == EZ_TOK_WPM;
    if (add_bos && (tok->add_bos || wpm) && tok->bos >= 0 && !ez_idvec_push(&ids, tok->bos))
        goto nomem;
    for (f = 0; f < frags.n; f++) {
        const fragment *fr = &frags.f[f];
        if (fr->id >= 0) {
            if (!ez_idvec_push(&ids, fr->id)) goto nomem;
            prev_special = 1;
            continue;
        }
        switch (tok->type) {
        case EZ_TOK_SPM:
            rc = ez_spm_tokenize(tok, text + fr->off, fr->len,
                                 tok->add_space_prefix && prev_special, &ids);
            break;
        case EZ_TOK_WPM: rc = ez_wpm_tokenize(tok, text + fr->off, fr->len, &ids); break;
        case EZ_TOK_UGM: rc = ez_ugm_tokenize(tok, text + fr->off, fr->len, &ids); break;
        default: rc = ez_bpe_tokenize(tok, text + fr->off, fr->len, &ids); break;
        }
        if (rc) goto done;
        prev_special = 0;
    }
    if (add_bos && wpm && tok->sep >= 0 && !ez_idvec_push(&ids, tok->sep)) goto nomem;
    if (add_bos && !wpm && tok->add_eos && tok->eos >= 0 && !ez_idvec_push(&ids, tok->eos))
        goto nomem;
    if (ids.n == 0) {
        free(ids.ids);
        ids.ids = (int32_t *)malloc(sizeof *ids.ids); /* a freeable pointer, never NULL */
        if (!ids.ids) goto nomem;
    }
    *out = ids.ids;
    *n_out = ids.n;
    ids.ids = NULL;
    goto done;

nomem:
    rc = ez_fail(ELIZA_E_NOMEM, "out of memory tokenizing %zu bytes", len);
done:
    free(ids.ids);
    free(frags.f);
    return rc;
}

/* ---- pieces ------------------------------------------------------------------------ */

typedef struct {
    char *buf;
    size_t cap, len;
} sink;

static void put(sink *s, const char *p, size_t n) {
    if (s->len < s->cap) memcpy(s->buf + s->len, p, EZ_MIN(n, s->cap - s->len));
    s->len += n;
}

/* GPT-2 code points back to bytes. llama.cpp decodes the text leniently
 * (a bad sequence is U+FFFD, one byte consumed) and writes a code point that
 * stands for no byte as "[UNK_BYTE_0x<utf8 hex><token text>]". */
static void put_bpe_text(sink *s, const char *t, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t b = (uint8_t)t[i];
        uint32_t cp = 0xFFFD;
        size_t len = 1, k;
        int byte;
        if (b < 0x80) {
            cp = b;
        } else if ((b & 0xE0) == 0xC0 || (b & 0xF0) == 0xE0 || (b & 0xF8) == 0xF0) {
            size_t want = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : 4;
            if (i + want <= n) {
                cp = b & (want == 2 ? 0x1Fu : want == 3 ? 0x0Fu : 0x07u);
                for (k = 1; k < want && ((uint8_t)t[i + k] & 0xC0) == 0x80; k++)
                    cp = (cp << 6) | ((uint8_t)t[i + k] & 0x3Fu);
                if (k == want)
                    len = want;
                else
                    cp = 0xFFFD;
            }
            if (cp > 0x10FFFF) cp = 0xFFFD;
        }
        i += len;
        byte = ez_bpe_cp_to_byte(cp);
        if (byte >= 0) {
            char c = (char)byte;
            put(s, &c, 1);
        } else {
            uint8_t u[4];
            size_t nu = ez_utf8_encode(cp, u);
            char hex[3];
            put(s, "[UNK_BYTE_0x", 12);
            for (k = 0; k < nu; k++) {
                snprintf(hex, sizeof hex, "%02x", u[k]);
                put(s, hex, 2);
            }
            put(s, t, n);
            put(s, "]", 1);
        }
    }
}

/* The piece of id as llama.cpp's token_to_piece renders it with special on. */
static void render(const ez_tokenizer *tok, int32_t id, sink *s) {
    const char *t = tok->text + tok->text_off[id];
    size_t n = tok->text_off[id + 1] - tok->text_off[id];
    uint16_t a = tok->attr[id];

    if (a & RENDERED_AS_TEXT) {
        put(s, t, n);
    } else if (a & EZ_TA_NORMAL) {
        if (tok->type == EZ_TOK_BPE && !tok->escape_spaces) {
            put_bpe_text(s, t, n);
            return;
        }
        /* SentencePiece's U+2581 back to a space. */
        size_t i = 0, run = 0;
        while (i < n) {
            if (n - i >= 3 && memcmp(t + i, SP, 3) == 0) {
                put(s, t + run, i - run);
                put(s, " ", 1);
                i += 3;
                run = i;
            } else {
                i++;
            }
        }
        put(s, t + run, n - run);
    } else if (a & EZ_TA_BYTE) {
        uint8_t b = 0;
        char c;
        byte_of(tok, id, &b); /* checked at load */
        c = (char)b;
        put(s, &c, 1);
    }
}

int32_t ez_token_piece(const ez_tokenizer *tok, int32_t id, int render_special, char *buf,
                       size_t cap, size_t *len) {
    sink s;
    if (!tok || !len || (!buf && cap))
        return ez_fail(ELIZA_E_INVALID_ARG, "ez_token_piece: NULL argument");
    *len = 0;
    if (id < 0 || id >= tok->n_vocab)
        return ez_fail(ELIZA_E_INVALID_ARG, "token id %d is out of range (vocabulary of %d)", id,
                       tok->n_vocab);
    if (!render_special && (tok->attr[id] & (EZ_TA_UNKNOWN | EZ_TA_CONTROL))) return ELIZA_OK;
    s.buf = buf;
    s.cap = cap;
    s.len = 0;
    render(tok, id, &s);
    *len = s.len;
    return ELIZA_OK;
}

/* llama.cpp's clean-up of BPE output: " ?" " !" " ." " ," lose the space,
 * " ' " loses both, " 's" " 'm" " 're" " 've" lose theirs. In place. */
static size_t clean_spaces(char *t, size_t n) {
    size_t i, w;
    if (n == 0) return 0;
    for (i = 1, w = 1; i < n; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) w--;
        t[w++] = x;
    }
    n = w;
    for (i = 1, w = 1; i < n; i++) {
        char x = t[i];
        if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
            w--;
            t[++i] = '\0'; /* skipped; the next comparison sees it, as llama.cpp's does */
        }
        t[w++] = x;
    }
    n = w;
    for (i = 1, w = 1; i < n; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            char x1 = t[i + 1];
            if (x1 == 's' || x1 == 'm')
                w--;
            else if (i + 2 < n && ((x1 == 'r' && t[i + 2] == 'e') || (x1 == 'v' && t[i + 2] == 'e')))
                w--;
        }
        t[w++] = x;
    }
    return w;
}

int32_t ez_detokenize(const ez_tokenizer *tok, const int32_t *ids, size_t n, int render_special,
                      char **out, size_t *len) {
    sink s = {NULL, 0, 0};
    size_t i, total = 0;

    if (!tok || !out || !len || (!ids && n))
        return ez_fail(ELIZA_E_INVALID_ARG, "ez_detokenize: NULL argument");
    *out = NULL;
    *len = 0;
    for (i = 0; i < n; i++) {
        size_t piece;
        if (ids[i] < 0 || ids[i] >= tok->n_vocab)
            return ez_fail(ELIZA_E_INVALID_ARG, "token %zu: id %d is out of range (vocabulary"
                           " of %d)", i, ids[i], tok->n_vocab);
        ez_token_piece(tok, ids[i], render_special, NULL, 0, &piece);
        total += piece;
    }
    s.buf = (char *)malloc(total + 1);
    if (!s.buf) return ez_fail(ELIZA_E_NOMEM, "out of memory detokenizing %zu tokens", n);
    s.cap = total;
    for (i = 0; i < n; i++) {
        size_t at = s.len;
        if (!render_special && (tok->attr[ids[i]] & (EZ_TA_UNKNOWN | EZ_TA_CONTROL))) continue;
        render(tok, ids[i], &s);
        /* add_space_prefix: the first piece loses one leading space. */
        if (i == 0 && tok->add_space_prefix && s.len > at && s.buf[at] == ' ') {
            memmove(s.buf + at, s.buf + at + 1, s.len - at - 1);
            s.len--;
        }
    }
    if (tok->clean_spaces) s.len = clean_spaces(s.buf, s.len);
    s.buf[s.len] = '\0';
    *out = s.buf;
    *len = s.len;
    return ELIZA_OK;
}

/* ---- merge queue (SPM and BPE) ------------------------------------------------- */

static int bigram_before(const ez_bigram *a, const ez_bigram *b) {
    return a->priority > b->priority || (a->priority == b->priority && a->left < b->left);
}

int ez_bigram_push(ez_bigram_queue *q, ez_bigram b) {
    size_t i;
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        ez_bigram *items = (ez_bigram *)realloc(q->items, cap * sizeof *items);
        if (!items) return 0;
        q->items = items;
        q->cap = cap;
    }
    i = q->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&b, &q->items[parent])) break;
        q->items[i] = q->items[parent];
        i = parent;
    }
    q->items[i] = b;
    return 1;
}

ez_bigram ez_bigram_pop(ez_bigram_queue *q) {
    ez_bigram top = q->items[0], last = q->items[--q->n];
    size_t i = 0, n = q->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bigram_before(&q->items[c + 1], &q->items[c])) c++;
        if (!bigram_before(&q->items[c], &last)) break;
        q->items[i] = q->items[c];
        i = c;
    }
    if (n > 0) q->items[i] = last;
    return top;
}
