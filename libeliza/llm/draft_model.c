/* The draft-model drafter: a separate small model with the target's
 * vocabulary, decoding greedily in a session of its own. Its session
 * follows the context: before each draft it keeps the longest prefix of
 * what it holds that the context still starts with (the accepted drafts
 * stay, the rejected ones are rewound), evaluates the rest of the context
 * in one batch, then drafts one token per pass. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/gguf.h"
#include "draft.h"
#include "session.h"

/* Prompt tokens per pass of the draft model when it catches up. */
#define DRAFT_BATCH EZ_DRAFT_MAX

typedef struct {
    ez_drafter base;
    ez_llm_model *model;
    ez_llm_session *session;
    float *logits;        /* [n_vocab] */
    int32_t n_ctx;
} model_drafter;

static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static int32_t model_propose(ez_drafter *d, const ez_draft_target *t, int32_t k_max, int32_t *out, int32_t *n_out,
                             float *q, int *has_q, ez_atomic_int *cancel) {
    model_drafter *md = (model_drafter *)d;
    const int32_t n = (int32_t)t->n_tokens, held = ez_llm_session_n_pos(md->session);
    const int32_t *seq = ez_llm_session_tokens(md->session);
    int32_t keep = 0, rc, k;
    (void)q;
    *has_q = 0;
    *n_out = 0;
    /* Room for the context and the drafts but the last (never evaluated). */
    k = EZ_MIN(k_max, md->n_ctx - n + 1);
    if (k < 1) return ELIZA_OK;
    while (keep < held && keep < n - 1 && seq[keep] == t->tokens[keep]) keep++;
    if (keep < held && (rc = ez_llm_session_rewind(md->session, held - keep))) {
        /* Past what the cache can rewind (a sliding ring): start over. */
        ez_llm_session_clear(md->session);
        keep = 0;
    }
    rc = ez_llm_session_eval(md->session, t->tokens + keep, n - keep, md->logits, 0, NULL, cancel);
    for (int32_t i = 0; rc == ELIZA_OK && i < k; i++) {
        out[i] = argmax(md->logits, md->base.n_vocab);
        if (i + 1 < k) rc = ez_llm_session_eval(md->session, &out[i], 1, md->logits, 0, NULL, cancel);
    }
    if (rc) {
        /* What the failed pass held is unknown: forget it all. */
        ez_llm_session_clear(md->session);
        return rc;
    }
    *n_out = k;
    return ELIZA_OK;
}

static void model_reset(ez_drafter *d) { ez_llm_session_clear(((model_drafter *)d)->session); }

static void model_free(ez_drafter *d) {
    model_drafter *md = (model_drafter *)d;
    ez_llm_session_free(md->session);
    ez_llm_model_free(md->model);
    free(md->logits);
    free(md);
}

static const ez_drafter_vtable model_vtable = {"model", model_propose, NULL, model_reset, model_free};

int32_t ez_drafter_model_open(const ez_draft_open_params *p, ez_drafter **out) {
    model_drafter *md;
    ez_gguf *g = NULL;
    int32_t rc;
    *out = NULL;
    md = (model_drafter *)calloc(1, sizeof *md);
    if (!md) return ez_fail(ELIZA_E_NOMEM, "out of memory for the draft model");
    md->base.vt = &model_vtable;
    md->base.kind = EZ_DRAFT_MODEL;
    md->base.n_vocab = p->target->hp.n_vocab;
    md->n_ctx = p->n_ctx;
    rc = ez_gguf_open(p->path, &g);
    if (rc == ELIZA_OK) rc = ez_llm_model_load(g, &md->model); /* owns g from here */
    if (rc == ELIZA_OK && md->model->hp.n_vocab != p->target->hp.n_vocab)
        rc = ez_fail(ELIZA_E_INVALID_ARG,
                     "draft model '%s' has a vocabulary of %d tokens, the model %d: a draft model needs the same",
                     p->path, md->model->hp.n_vocab, p->target->hp.n_vocab);
    if (rc == ELIZA_OK)
        rc = ez_llm_session_create(md->model, p->pool, p->n_ctx, DRAFT_BATCH, 0, 0, &md->session);
    if (rc == ELIZA_OK) {
        md->logits = (float *)malloc(sizeof(float) * (size_t)md->base.n_vocab);
        if (!md->logits) rc = ez_fail(ELIZA_E_NOMEM, "out of memory for the draft model's logits");
    }
    if (rc) {
        model_free(&md->base);
        return rc;
    }
    *out = &md->base;
    return ELIZA_OK;
}
