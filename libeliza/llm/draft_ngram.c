/* The n-gram (prompt lookup) drafter: the context predicts itself. Text
 * grounded in the prompt (a summary, a rewrite, an extraction, code edits)
 * repeats runs of it; where the last few tokens occurred before, what
 * followed them then is the guess. No model, no state beyond the context. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "draft.h"

/* Tried longest first; one token of context already finds most runs and
 * verification refuses the rest at the cost of one batch row each. */
#define NGRAM_MIN 1
#define NGRAM_MAX 3

typedef struct {
    ez_drafter base;
    ez_ngram_params p;
} ngram_drafter;

int32_t ez_ngram_lookup(const ez_ngram_params *p, const int32_t *ctx, size_t n_ctx, int32_t k_max, int32_t *out) {
    for (int32_t n = p->ngram_max; n >= p->ngram_min; n--) {
        const int32_t *suffix;
        if ((size_t)n >= n_ctx) continue;
        size_t best = 0, best_len = 0;
        suffix = ctx + n_ctx - (size_t)n;
        /* Latest occurrence first, unless the context ends before k_max
         * tokens follow it (a loop of a few tokens matches just behind
         * the end): then the one followed by the most. */
        for (size_t i = n_ctx - (size_t)n; i-- > 0;) {
            size_t len;
            if (ctx[i] != suffix[0] || memcmp(ctx + i, suffix, sizeof(int32_t) * (size_t)n) != 0) continue;
            len = EZ_MIN((size_t)k_max, n_ctx - i - (size_t)n);
            if (len > best_len) {
                best = i + (size_t)n;
                best_len = len;
            }
            if (len == (size_t)k_max) break;
        }
        if (best_len) {
            memcpy(out, ctx + best, sizeof(int32_t) * best_len);
            return (int32_t)best_len;
        }
    }
    return 0;
}

static int32_t ngram_propose(ez_drafter *d, const ez_draft_target *t, int32_t k_max, int32_t *out, int32_t *n_out,
                             float *q, int *has_q, ez_atomic_int *cancel) {
    const ngram_drafter *g = (const ngram_drafter *)d;
    (void)q;
    *has_q = 0;
    *n_out = 0;
    if (cancel && ez_atomic_int_load(cancel)) return ez_fail(ELIZA_E_CANCELLED, "cancelled");
    *n_out = ez_ngram_lookup(&g->p, t->tokens, t->n_tokens, k_max, out);
    return ELIZA_OK;
}

static void ngram_reset(ez_drafter *d) { (void)d; }

static void ngram_free(ez_drafter *d) { free(d); }

static const ez_drafter_vtable ngram_vtable = {"ngram", ngram_propose, NULL, ngram_reset, ngram_free};

int32_t ez_drafter_ngram_open(const ez_draft_open_params *p, ez_drafter **out) {
    ngram_drafter *g = (ngram_drafter *)calloc(1, sizeof *g);
    *out = NULL;
    if (!g) return ez_fail(ELIZA_E_NOMEM, "out of memory for the n-gram drafter");
    g->base.vt = &ngram_vtable;
    g->base.kind = EZ_DRAFT_NGRAM;
    g->base.n_vocab = p->target->hp.n_vocab;
    g->p.ngram_min = NGRAM_MIN;
    g->p.ngram_max = NGRAM_MAX;
    *out = &g->base;
    return ELIZA_OK;
}
