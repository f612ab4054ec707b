/* SentencePiece unigram ("t5" vocabularies: T5, XLM-R style files), as
 * llama.cpp's llm_tokenizer_ugm runs it:
 *
 *   normalize  at each position: the longest prefix of a user-defined token
 *              is kept as it is; else the longest match in the file's
 *              precompiled charsmap (SentencePiece's XOR-compressed double
 *              array of normalization rules) is replaced by its string; else
 *              one code point is kept. Spaces become U+2581; with
 *              add_space_prefix one goes before the first word, and
 *              remove_extra_whitespaces drops leading, trailing and repeated
 *              spaces (putting one before every word).
 *   segment    Viterbi over the normalized bytes: the best sum of piece
 *              scores (user-defined pieces score 0), a code point no piece
 *              covers is the unknown token at the lowest normal score - 10,
 *              and runs of unknown tokens become one. */
#include <float.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/utf8.h"
#include "llm/tokenizer_impl.h"

#define SP "\xE2\x96\x81" /* U+2581, SentencePiece's space */
#define UNK_PENALTY 10.0f

static uint32_t rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static int32_t load_charsmap(ez_tokenizer *tok, const ez_gguf *g) {
    const char *key = "tokenizer.ggml.precompiled_charsmap";
    const ez_gguf_kv *kv = ez_gguf_find_kv(g, key);
    uint64_t n, blob, i;
    if (!kv) return ELIZA_OK;
    if (kv->type != EZ_GGUF_ARRAY || (kv->arr_type != EZ_GGUF_U8 && kv->arr_type != EZ_GGUF_I8))
        return ez_fail(ELIZA_E_FORMAT, "tokenizer: '%s' is not an array of INT8 or UINT8", key);
    n = kv->arr_len;
    if (n < 4)
        return ez_fail(ELIZA_E_FORMAT, "tokenizer: '%s' has %" PRIu64 " bytes, too few for its"
                       " 4-byte size", key, n);
    blob = rd_u32(kv->arr_data);
    if (blob + 4 >= n)
        return ez_fail(ELIZA_E_FORMAT, "tokenizer: '%s' says its double array has %" PRIu64
                       " bytes, but %" PRIu64 " follow the size", key, blob, n - 4);
    tok->n_xcda = (uint32_t)(blob / 4);
    tok->n_replacements = (uint32_t)(n - 4 - blob);
    tok->xcda = (uint32_t *)malloc(((size_t)tok->n_xcda + 1) * sizeof *tok->xcda);
    tok->replacements = (char *)malloc(tok->n_replacements);
    if (!tok->xcda || !tok->replacements)
        return ez_fail(ELIZA_E_NOMEM, "out of memory for a %" PRIu64 "-byte charsmap", n);
    for (i = 0; i < tok->n_xcda; i++) tok->xcda[i] = rd_u32(kv->arr_data + 4 + 4 * i);
    memcpy(tok->replacements, kv->arr_data + 4 + blob, tok->n_replacements);
    return ELIZA_OK;
}

int32_t ez_ugm_init(ez_tokenizer *tok, const ez_gguf *g) {
    float min_score = FLT_MAX;
    int32_t i, rc;
    rc = ez_vocab_sorted(tok, EZ_TA_NORMAL | EZ_TA_USER_DEFINED | EZ_TA_UNUSED, &tok->sorted,
                         &tok->n_sorted);
    if (rc == ELIZA_OK) rc = ez_vocab_sorted(tok, EZ_TA_USER_DEFINED, &tok->sorted_user,
                                             &tok->n_sorted_user);
    if (rc) return rc;
    for (i = 0; i < tok->n_vocab; i++)
        if ((tok->attr[i] & EZ_TA_NORMAL) && tok->score[i] < min_score) min_score = tok->score[i];
    tok->unk_score = min_score - UNK_PENALTY;
    return load_charsmap(tok, g);
}

/* ---- normalization ------------------------------------------------------------- */

static int32_t charsmap_error(const char *what) {
    return ez_fail(ELIZA_E_FORMAT, "tokenizer: the precompiled charsmap is corrupt (%s)", what);
}

/* XCDA node fields (Kanda 2018, as SentencePiece packs them): BASE in bits
 * 10-30 (shifted by 8 when bit 9 is set), LCHECK in bits 0-7 (bit 31 set
 * marks a value node), LEAF in bit 8, a value node's value in bits 0-30. */
static uint32_t node_base(uint32_t v) { return (v >> 10) << ((v & (1u << 9)) >> 6); }
static uint32_t node_lcheck(uint32_t v) { return v & ((1u << 31) | 0xFFu); }

/* The longest charsmap match at s[0..n): *match bytes (0: none) and the
 * offset of its replacement. */
static int32_t charsmap_longest(const ez_tokenizer *tok, const uint8_t *s, size_t n,
                                size_t *match, uint32_t *repl) {
    uint32_t node;
    size_t k;
    *match = 0;
    node = node_base(tok->xcda[0]);
    for (k = 0; k < n && s[k] != 0; k++) {
        uint32_t v;
        int leaf;
        node ^= s[k];
        if (node >= tok->n_xcda) return charsmap_error("a child index is out of bounds");
        v = tok->xcda[node];
        if (node_lcheck(v) != s[k]) break;
        leaf = (v >> 8) & 1;
        node ^= node_base(v);
        if (leaf) {
            if (node >= tok->n_xcda) return charsmap_error("a value index is out of bounds");
            *match = k + 1;
            *repl = tok->xcda[node] & ((1u << 31) - 1);
        }
    }
    return ELIZA_OK;
}

/* llama.cpp keeps, unnormalized, the longest run that starts like a
 * user-defined token (whether or not a whole token). */
static size_t user_prefix(const ez_tokenizer *tok, const char *s, size_t n) {
    int32_t lo = 0, hi = tok->n_sorted_user;
    size_t d;
    for (d = 0; d < n; d++) {
        ez_sorted_step(tok, tok->sorted_user, &lo, &hi, (uint32_t)d, (uint8_t)s[d]);
        if (lo >= hi) break;
    }
    return d;
}

/* One normalization step at text[off..len): the bytes to emit (*out, *n_out)
 * and how many input bytes they stand for (*used). */
static int32_t normalize_prefix(const ez_tokenizer *tok, const char *text, size_t len, size_t off,
                                const char **out, size_t *n_out, size_t *used) {
    const char *s = text + off;
    size_t n = len - off, m = user_prefix(tok, s, n);
    uint32_t cp, repl = 0;
    int32_t rc;

    if (m > 0) {
        *out = s;
        *n_out = *used = m;
        return ELIZA_OK;
    }
    if (tok->n_xcda > 0) {
        rc = charsmap_longest(tok, (const uint8_t *)s, n, &m, &repl);
        if (rc) return rc;
        if (m > 0) {
            const char *r, *end;
            if (repl >= tok->n_replacements)
                return charsmap_error("a replacement offset is out of bounds");
            r = tok->replacements + repl;
            end = (const char *)memchr(r, '\0', tok->n_replacements - repl);
            if (!end) return charsmap_error("a replacement string is not terminated");
            *out = r;
            *n_out = (size_t)(end - r);
            *used = m;
            return ELIZA_OK;
        }
    }
    m = ez_utf8_decode((const uint8_t *)s, n, &cp);
    if (m == 0) { /* llama.cpp: one byte becomes U+FFFD */
        *out = "\xEF\xBF\xBD";
        *n_out = 3;
        *used = 1;
        return ELIZA_OK;
    }
    *out = s;
    *n_out = *used = m;
    return ELIZA_OK;
}

static int32_t normalize(const ez_tokenizer *tok, const char *text, size_t len, ez_bytevec *out) {
    int merge = tok->remove_extra_ws, prepended = 0, in_word = 0;
    size_t off = 0;
    while (off < len) {
        const char *p = NULL;
        size_t n = 0, used = 1, i;
        int32_t rc = normalize_prefix(tok, text, len, off, &p, &n, &used);
        if (rc) return rc;
        for (i = 0; i < n; i++) {
            if (p[i] != ' ') {
                if (!in_word) {
                    in_word = 1;
                    if ((tok->add_space_prefix && !prepended) || merge) {
                        if (!ez_bytevec_put(out, SP, 3)) return ELIZA_E_NOMEM;
                        prepended = 1;
                    }
                }
                if (!ez_bytevec_put(out, p + i, 1)) return ELIZA_E_NOMEM;
            } else {
                in_word = 0;
                if (!merge && !ez_bytevec_put(out, SP, 3)) return ELIZA_E_NOMEM;
            }
        }
        off += used;
    }
    return ELIZA_OK;
}

/* ---- segmentation ----------------------------------------------------------------- */

typedef struct {
    int32_t id;
    size_t from;  /* where the best segmentation's last piece starts */
    double score; /* its total; -DBL_MAX: not reached */
} best;

/* UTF-8 sequence length by the first byte, as llama.cpp counts it (a
 * continuation byte counts 1). */
static size_t seq_len(uint8_t b) {
    static const uint8_t lens[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lens[b >> 4];
}

static int32_t segment(const ez_tokenizer *tok, const char *s, size_t n, ez_idvec *out) {
    best *b = (best *)malloc((n + 1) * sizeof *b);
    size_t i, off, start = out->n;
    int prev_unk = 0;

    if (!b) return ELIZA_E_NOMEM;
    for (i = 0; i <= n; i++) {
        b[i].id = tok->unk;
        b[i].from = 0;
        b[i].score = i == 0 ? 0.0 : -DBL_MAX;
    }
    for (off = 0; off < n;) {
        size_t cp_len = EZ_MIN(seq_len((uint8_t)s[off]), n - off), d;
        int32_t lo = 0, hi = tok->n_sorted;
        int whole_cp = 0;
        double base = b[off].score, cand;
        for (d = 0; off + d < n && lo < hi; d++) {
            int32_t id = ez_sorted_step(tok, tok->sorted, &lo, &hi, (uint32_t)d, (uint8_t)s[off + d]);
            if (id < 0) continue;
            if (d + 1 == cp_len) whole_cp = 1;
            cand = base + ((tok->attr[id] & EZ_TA_USER_DEFINED) ? 0.0 : (double)tok->score[id]);
            if (cand > b[off + d + 1].score) {
                b[off + d + 1].id = id;
                b[off + d + 1].from = off;
                b[off + d + 1].score = cand;
            }
        }
        if (!whole_cp) {
            cand = base + (double)tok->unk_score;
            if (cand > b[off + cp_len].score) {
                b[off + cp_len].id = tok->unk;
                b[off + cp_len].from = off;
                b[off + cp_len].score = cand;
            }
        }
        off += cp_len;
    }
    for (i = n;; i = b[i].from) {
        int unk = b[i].id == tok->unk;
        if (!(prev_unk && unk) && !ez_idvec_push(out, b[i].id)) {
            free(b);
            return ELIZA_E_NOMEM;
        }
        if (b[i].from == 0) break;
        prev_unk = unk;
    }
    free(b);
    for (i = start, off = out->n - 1; i < off; i++, off--) {
        int32_t t = out->ids[i];
        out->ids[i] = out->ids[off];
        out->ids[off] = t;
    }
    return ELIZA_OK;
}

int32_t ez_ugm_tokenize(const ez_tokenizer *tok, const char *text, size_t len, ez_idvec *out) {
    ez_bytevec norm = {NULL, 0, 0};
    int32_t rc = normalize(tok, text, len, &norm);
    if (rc == ELIZA_OK && norm.len > 0) rc = segment(tok, norm.buf, norm.len, out);
    free(norm.buf);
    if (rc == ELIZA_E_NOMEM) return ez_fail(ELIZA_E_NOMEM, "out of memory tokenizing %zu bytes", len);
    return rc;
}
