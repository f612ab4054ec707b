/* The Gemma 4 assistant as a drafter (draft.h, EZ_DRAFT_MTP): a small
 * gemma4-assistant model that reads its gemma4 target's state instead of
 * keeping its own. transformers SinglePositionMultiTokenCandidateGenerator
 * and Gemma4AssistantForCausalLM; llama.cpp src/models/gemma4-assistant.cpp.
 *
 * One round, the pending token t at position p (= n_past) and the target's
 * hidden state h after its final norm (of the row that produced t):
 *
 *   for each draft step (every step at position p):
 *     x = [embed_target(t) * sqrt(n_embd_out), h] Wpre      2 n_embd_out -> n_embd
 *     the layers: queries only; keys and values are the target's cache rows
 *       0 .. p-1 of its last non-shared layer of the same kind, read in place
 *     y = rms_norm(x) * w
 *     t = argmax(y Wembd^T), over the top clusters' tokens with a masked embedding
 *     h = y Wpost                                           n_embd -> n_embd_out
 *
 * The fork's three lessons are its checks: rows exchanged with the target
 * are n_embd_out wide (the target's, not the drafter's); h is the target's
 * state after the final norm (the target view's `hidden`); and the drafter
 * needs the target's session (cache) and token embeddings, or it cannot run.
 *
 * transformers' generate() also shows the drafter the verification pass's
 * row at p (the rejected draft's keys, when one was rejected); this drafter
 * sees only the tokens of the context (tests/llm/gemma4_models.py says
 * more). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "core/error.h"
#include "core/quant.h"
#include "draft_mtp.h"
#include "session.h"

typedef struct {
    ez_drafter base;
    ez_llm_model *m;             /* the assistant (owned) */
    const ez_llm_model *target;
    ez_pool *pool;
    ez_llm_backend *be;          /* runs f's steps */
    ez_llm_fwd *f;               /* one row, over the target cache it was made for */
    const ez_kv_cache *f_kv;
    int src[2];                  /* target layers the full (0) and sliding (1) layers read */
    float *xh;                   /* [2 * n_embd_out] */
    float *h;                    /* [n_embd_out] */
    float *y;                    /* [n_embd] */
    float *logits;               /* [n_vocab] */
    float *row;                  /* [n_embd] a dequantized LM head row */
    int32_t *top;                /* [centroid_top_k] */
} mtp_drafter;

static void mtp_free(ez_drafter *d) {
    mtp_drafter *t = (mtp_drafter *)d;
    ez_llm_fwd_free(t->f);
    if (t->be) t->be->ops->free(t->be);
    ez_llm_model_free(t->m);
    free(t->xh);
    free(t->h);
    free(t->y);
    free(t->logits);
    free(t->row);
    free(t->top);
    free(t);
}

static int32_t mtp_observe(ez_drafter *d, int32_t n_proposed, const int32_t *accepted, int32_t n_accepted) {
    (void)d, (void)n_proposed, (void)accepted, (void)n_accepted;
    return ELIZA_OK; /* no state of its own: the target's cache is the drafter's */
}

static void mtp_reset(ez_drafter *d) { (void)d; }

/* The first index of the largest of x[0..n). */
static int32_t argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

/* The token of the largest logit among the tokens of the top_k clusters
 * whose centroids score highest (Gemma4AssistantMaskedEmbedder; the other
 * tokens' logits are below all of them, so the argmax is among these; the
 * first index on ties, as over the scattered vector). */
static int32_t masked_argmax(mtp_drafter *t) {
    const ez_llm_model *m = t->m;
    const int64_t d = m->hp.n_embd, n_c = m->centroids.n_rows, per = m->hp.n_vocab / n_c;
    const ez_type_kernels *kc = ez_kernels(m->centroids.type), *ke = ez_kernels(m->tok_embd.type);
    const ez_llm_ops *ops = ez_llm_ops_active();
    float *cl = t->logits; /* the centroid scores, [n_c] */
    int32_t best = -1;
    float best_v = 0.0f;
    for (int64_t c = 0; c < n_c; c++) {
        kc->dequant(m->centroids.data + (size_t)c * m->centroids.row_bytes, t->row, d);
        cl[c] = ops->dot(t->row, t->y, d);
    }
    /* torch.topk: the k largest, the lower index first among equals */
    for (int32_t j = 0; j < m->centroid_top_k; j++) {
        int64_t pick = -1;
        for (int64_t c = 0; c < n_c; c++) {
            int taken = 0;
            for (int32_t i = 0; i < j; i++) taken |= t->top[i] == c;
            if (!taken && (pick < 0 || cl[c] > cl[pick])) pick = c;
        }
        t->top[j] = (int32_t)pick;
    }
    for (int32_t j = 0; j < m->centroid_top_k; j++)
        for (int64_t i = 0; i < per; i++) {
            const int32_t tok = m->token_order[(int64_t)t->top[j] * per + i];
            float v;
            ke->dequant(m->tok_embd.data + (size_t)tok * m->tok_embd.row_bytes, t->row, d);
            v = ops->dot(t->row, t->y, d);
            if (best < 0 || v > best_v || (v == best_v && tok < best)) {
                best = tok;
                best_v = v;
            }
        }
    return best;
}

/* One draft step at position pos from token `tok` and t->h: the drafted
 * token, and t->h for the next step. */
static int32_t mtp_step(mtp_drafter *t, const ez_kv_cache *kv, int32_t tok, int32_t pos, int32_t *out) {
    const ez_llm_model *m = t->m, *tg = t->target;
    const ez_llm_hparams *hp = &m->hp;
    const int64_t d = hp->n_embd, d_out = hp->n_embd_out;
    ez_llm_fwd *f = t->f;
    ez_llm_mm pre = {&m->nextn_pre, f->x, d}, head = {&m->output, t->logits, hp->n_vocab},
              post = {&m->nextn_post, t->h, d_out};
    int32_t rc;

    f->be->ops->embed(f->be, &tg->tok_embd, &tok, 1, tg->hp.embd_scale, t->xh);
    memcpy(t->xh + d_out, t->h, sizeof(float) * (size_t)d_out);
    if ((rc = f->be->ops->matmul(f->be, t->xh, 1, &pre, 1))) return rc;
    for (int il = 0; il < hp->n_layer; il++)
        if ((rc = ez_llm_gemma4_assistant_layer(f, kv, il, t->src[m->layers[il].is_swa], pos))) return rc;
    f->be->ops->rms_norm(f->be, t->y, f->x, m->output_norm, 1, d, hp->norm_eps);
    if (m->centroids.data) {
        *out = masked_argmax(t);
    } else {
        if ((rc = f->be->ops->matmul(f->be, t->y, 1, &head, 1))) return rc;
        *out = argmax(t->logits, hp->n_vocab);
    }
    return f->be->ops->matmul(f->be, t->y, 1, &post, 1);
}

static int32_t mtp_propose(ez_drafter *d, const ez_draft_target *tv, int32_t k_max, int32_t *out, int32_t *n_out,
                           float *q, int *has_q, ez_atomic_int *cancel) {
    mtp_drafter *t = (mtp_drafter *)d;
    const ez_llm_hparams *hp = &t->m->hp;
    const int32_t pos = tv->n_past;
    ez_kv_cache *kv;
    int32_t rc, tok;
    (void)q; /* argmax drafts: their q is one-hot */
    *n_out = 0;
    if (has_q) *has_q = 0;
    if (!tv->session || !tv->hidden)
        return ez_fail(ELIZA_E_STATE, "the MTP drafter needs its target's session and its hidden state after the "
                       "final norm (%s missing)", tv->session ? "hidden" : "session");
    if (ez_llm_session_model(tv->session) != t->target)
        return ez_fail(ELIZA_E_STATE, "the MTP drafter was opened for another target model");
    if (tv->n_tokens < 1 || pos < 1 || pos != (int32_t)tv->n_tokens - 1) return ELIZA_OK; /* nothing to read yet */
    kv = ez_llm_session_cache(tv->session);
    if (!t->f || t->f_kv != kv) {
        ez_llm_fwd_free(t->f);
        if (t->be) t->be->ops->free(t->be);
        t->f = NULL;
        t->be = NULL;
        if ((rc = ez_llm_backend_cpu_create(t->pool, &t->m->hp, kv, &t->be)) ||
            (rc = ez_llm_fwd_create(t->m, t->be, kv, 1, &t->f)))
            return rc;
        t->f_kv = kv;
    }
    /* cos/sin of pos: full layers (rope_freqs), sliding layers (their base and dims) */
    ez_rope_angles(t->f->rope_cs, pos, hp->n_rot, hp->rope_base, hp->rope_freq_scale, t->m->rope_factors);
    ez_rope_angles(t->f->rope_cs + hp->n_rot, pos, hp->n_rot_swa, hp->rope_base_swa, 1.0f, NULL);
    memcpy(t->h, tv->hidden, sizeof(float) * (size_t)hp->n_embd_out);
    tok = tv->tokens[tv->n_tokens - 1];
    for (int32_t i = 0; i < k_max; i++) {
        if (cancel && ez_atomic_int_load(cancel)) return ez_fail(ELIZA_E_CANCELLED, "cancelled while drafting");
        if ((rc = mtp_step(t, kv, tok, pos, &tok))) return rc;
        out[(*n_out)++] = tok;
    }
    return ELIZA_OK;
}

static const ez_drafter_vtable MTP_VTABLE = {"mtp", mtp_propose, mtp_observe, mtp_reset, mtp_free};

/* The target's last non-shared layer of each kind (the rows the drafter's
 * layers of that kind read), -1 where it has none. */
static void source_layers(const ez_llm_model *tg, int src[2]) {
    const int first_shared = tg->hp.n_layer - tg->hp.n_kv_shared;
    src[0] = src[1] = -1;
    for (int il = first_shared - 1; il >= 0; il--)
        if (src[tg->layers[il].is_swa] < 0) src[tg->layers[il].is_swa] = il;
}

static int32_t check_pair(const ez_llm_model *m, const ez_llm_model *tg, const int src[2], const char *path) {
    const ez_llm_hparams *a = &m->hp, *b = &tg->hp;
    if (strcmp(a->arch_name, "gemma4-assistant") != 0)
        return ez_fail(ELIZA_E_INVALID_ARG, "%s is a %s model, not a gemma4-assistant (MTP) drafter", path,
                       a->arch_name);
    if (strcmp(b->arch_name, "gemma4") != 0)
        return ez_fail(ELIZA_E_INVALID_ARG, "an MTP drafter needs a gemma4 target; the target is a %s model",
                       b->arch_name);
    if (a->n_embd_out != b->n_embd)
        return ez_fail(ELIZA_E_INVALID_ARG, "the drafter %s exchanges rows of %d (embedding_length_out) but the "
                       "target's hidden size is %d", path, a->n_embd_out, b->n_embd);
    if (a->n_vocab != b->n_vocab)
        return ez_fail(ELIZA_E_INVALID_ARG, "the drafter %s has a vocabulary of %d tokens, the target %d", path,
                       a->n_vocab, b->n_vocab);
    if (a->n_head_kv != b->n_head_kv || a->head_dim != b->head_dim || a->head_dim_swa != b->head_dim_swa)
        return ez_fail(ELIZA_E_INVALID_ARG, "the drafter %s reads %d KV heads of %d / %d (full / sliding) values, "
                       "the target has %d of %d / %d", path, a->n_head_kv, a->head_dim, a->head_dim_swa, b->n_head_kv,
                       b->head_dim, b->head_dim_swa);
    for (int il = 0; il < a->n_layer; il++) {
        const int kind = m->layers[il].is_swa;
        if (src[kind] < 0)
            return ez_fail(ELIZA_E_INVALID_ARG, "drafter layer %d is a %s layer; the target has no non-shared "
                           "layer of that kind to read", il, kind ? "sliding" : "full");
    }
    if (src[1] >= 0 && a->n_swa != b->n_swa)
        return ez_fail(ELIZA_E_INVALID_ARG, "the drafter's sliding window is %d tokens, the target's %d", a->n_swa,
                       b->n_swa);
    return ELIZA_OK;
}

static void *alloc_floats(size_t n, int32_t *rc) {
    void *p = *rc ? NULL : calloc(n ? n : 1, sizeof(float));
    if (!p && !*rc) *rc = ez_fail(ELIZA_E_NOMEM, "out of memory for the MTP drafter");
    return p;
}

int32_t ez_draft_mtp_open(const ez_draft_open_params *p, ez_drafter **out) {
    mtp_drafter *t;
    ez_gguf *g = NULL;
    int32_t rc;
    *out = NULL;
    if (!p->path) return ez_fail(ELIZA_E_INVALID_ARG, "the MTP drafter needs the path of a gemma4-assistant GGUF");
    if (!p->target) return ez_fail(ELIZA_E_INVALID_ARG, "the MTP drafter needs its target model");
    t = (mtp_drafter *)calloc(1, sizeof *t);
    if (!t) return ez_fail(ELIZA_E_NOMEM, "out of memory for the MTP drafter");
    t->base.vt = &MTP_VTABLE;
    t->base.kind = EZ_DRAFT_MTP;
    t->base.n_vocab = p->target->hp.n_vocab;
    t->target = p->target;
    t->pool = p->pool;
    rc = ez_gguf_open(p->path, &g);
    if (rc == ELIZA_OK) rc = ez_llm_model_load(g, &t->m); /* owns g, also on failure */
    if (rc == ELIZA_OK) {
        source_layers(p->target, t->src);
        rc = check_pair(t->m, p->target, t->src, p->path);
    }
    if (rc == ELIZA_OK) {
        const ez_llm_hparams *hp = &t->m->hp;
        t->xh = (float *)alloc_floats(2 * (size_t)hp->n_embd_out, &rc);
        t->h = (float *)alloc_floats((size_t)hp->n_embd_out, &rc);
        t->y = (float *)alloc_floats((size_t)hp->n_embd, &rc);
        t->logits = (float *)alloc_floats((size_t)hp->n_vocab, &rc);
        t->row = (float *)alloc_floats((size_t)hp->n_embd, &rc);
        if (!rc) {
            t->top = (int32_t *)calloc((size_t)EZ_MAX(1, t->m->centroid_top_k), sizeof(int32_t));
            if (!t->top) rc = ez_fail(ELIZA_E_NOMEM, "out of memory for the MTP drafter");
        }
    }
    if (rc) {
        mtp_free(&t->base);
        return rc;
    }
    *out = &t->base;
    return ELIZA_OK;
}
