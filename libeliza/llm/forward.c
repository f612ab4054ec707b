/* The forward pass (forward.h): batch buffers, the shared steps and the
 * pass over the layers through the architecture's block function. */
#include "forward.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "core/error.h"
#include "core/platform.h"

const char *ez_llm_phase_name(int phase) {
    static const char *const names[EZ_LLM_PHASE_COUNT] = {"embed",    "norm",    "qkv",      "attention", "attn_out",
                                                         "ffn_up",   "ffn_act", "ffn_down", "output",
                                                         "ssm_conv", "ssm_scan", "ssm_out"};
    return phase >= 0 && phase < EZ_LLM_PHASE_COUNT ? names[phase] : "?";
}

/* ---- creation ---------------------------------------------------------------------- */

static float *alloc_floats(size_t n, int32_t *rc) {
    float *p;
    if (*rc) return NULL;
    if (n > (SIZE_MAX - 64) / sizeof(float)) {
        *rc = ez_fail(ELIZA_E_NOMEM, "LLM buffers: %" PRIu64 " values do not fit in memory", (uint64_t)n);
        return NULL;
    }
    p = (float *)ez_aligned_alloc(n * sizeof(float) + 64);
    if (!p) *rc = ez_fail(ELIZA_E_NOMEM, "LLM buffers: cannot allocate %" PRIu64 " bytes", (uint64_t)(n * sizeof(float)));
    else memset(p, 0, n * sizeof(float));
    return p;
}

int32_t ez_llm_fwd_create(const ez_llm_model *m, ez_llm_backend *be, ez_kv_cache *kv, int32_t n_batch,
                          ez_llm_fwd **out) {
    const ez_llm_hparams *hp = &m->hp;
    const size_t nb = (size_t)n_batch;
    int32_t rc = ELIZA_OK;
    ez_llm_fwd *f;

    *out = NULL;
    f = (ez_llm_fwd *)calloc(1, sizeof *f);
    if (!f) return ez_fail(ELIZA_E_NOMEM, "out of memory for the LLM context");
    f->m = m;
    f->be = be;
    f->n_batch = n_batch;
    f->kv = kv;
    /* LongRoPE: llama.cpp picks the long factors when the context exceeds
     * the trained one (transformers decides by the sequence's length). */
    f->rope_factors = m->rope_factors;
    if (m->rope_factors_long || m->rope_factors_short)
        f->rope_factors = (kv->n_ctx > hp->n_ctx_orig && m->rope_factors_long) || !m->rope_factors_short
                              ? m->rope_factors_long
                              : m->rope_factors_short;
    f->x = alloc_floats(nb * (size_t)hp->n_embd, &rc);
    f->h = alloc_floats(nb * (size_t)hp->n_embd, &rc);
    f->o = alloc_floats(nb * (size_t)hp->n_embd, &rc);
    f->q = alloc_floats(nb * (size_t)hp->n_head * (size_t)hp->head_dim, &rc);
    f->k = alloc_floats(nb * (size_t)hp->n_head_kv * (size_t)hp->head_dim, &rc);
    f->v = alloc_floats(nb * (size_t)hp->n_head_kv * (size_t)hp->head_dim_v, &rc);
    f->att = alloc_floats(nb * (size_t)hp->n_head * (size_t)hp->head_dim_v, &rc);
    f->gate = alloc_floats(nb * (size_t)hp->n_ff, &rc);
    f->up = alloc_floats(nb * (size_t)hp->n_ff, &rc);
    f->rope_cs = alloc_floats(2 * nb * (size_t)hp->n_rot, &rc);
    if (hp->ssm_d_inner > 0) {
        const size_t n_conv = (size_t)hp->ssm_d_inner + 2 * (size_t)hp->ssm_n_group * (size_t)hp->ssm_d_state;
        f->ssm_zxbcdt = alloc_floats(nb * ((size_t)hp->ssm_d_inner + n_conv + (size_t)hp->ssm_n_head), &rc);
        f->ssm_xbc = alloc_floats(nb * n_conv, &rc);
        f->ssm_y = alloc_floats(nb * (size_t)hp->ssm_d_inner, &rc);
        f->ssm_o = alloc_floats(nb * (size_t)hp->n_embd, &rc);
    }
    if (hp->n_embd_per_layer > 0) {
        f->ple = alloc_floats(nb * (size_t)hp->n_layer * (size_t)hp->n_embd_per_layer, &rc);
        /* also one token's row of the per-layer table */
        f->ple_act = alloc_floats(EZ_MAX(nb, (size_t)hp->n_layer) * (size_t)hp->n_embd_per_layer, &rc);
    }
    if (rc) {
        ez_llm_fwd_free(f);
        return rc;
    }
    *out = f;
    return ELIZA_OK;
}

void ez_llm_fwd_free(ez_llm_fwd *f) {
    if (!f) return;
    ez_aligned_free(f->x);
    ez_aligned_free(f->h);
    ez_aligned_free(f->o);
    ez_aligned_free(f->q);
    ez_aligned_free(f->k);
    ez_aligned_free(f->v);
    ez_aligned_free(f->att);
    ez_aligned_free(f->gate);
    ez_aligned_free(f->up);
    ez_aligned_free(f->rope_cs);
    ez_aligned_free(f->ssm_zxbcdt);
    ez_aligned_free(f->ssm_xbc);
    ez_aligned_free(f->ssm_y);
    ez_aligned_free(f->ssm_o);
    ez_aligned_free(f->ple);
    ez_aligned_free(f->ple_act);
    free(f);
}

/* ---- the steps ---------------------------------------------------------------------- */

void ez_fwd_tick(ez_llm_fwd *f, int phase) {
    const uint64_t t1 = ez_time_ns();
    f->prof.ns[phase] += t1 - f->t;
    f->t = t1;
}

/* y[r] += b for rows of n, where the layer has a bias. */
static void add_bias(ez_llm_fwd *f, float *y, const float *b, int64_t n_rows, int64_t n) {
    if (b) f->be->ops->add_bias(f->be, y, b, n_rows, n);
}

static void norm_rows(ez_llm_fwd *f, float *y, const float *x, const float *w, int64_t n_rows) {
    f->be->ops->rms_norm(f->be, y, x, w, n_rows, f->m->hp.n_embd, f->m->hp.norm_eps);
}

void ez_fwd_norm(ez_llm_fwd *f, float *y, const float *x, const float *w, int32_t n) {
    norm_rows(f, y, x, w, n);
    ez_fwd_tick(f, EZ_LLM_PHASE_NORM);
}

int32_t ez_fwd_qkv(ez_llm_fwd *f, const ez_llm_layer *L, int32_t n) {
    const ez_llm_hparams *hp = &f->m->hp;
    const int64_t n_q = (int64_t)hp->n_head * hp->head_dim, n_k = (int64_t)hp->n_head_kv * hp->head_dim,
                  n_v = (int64_t)hp->n_head_kv * hp->head_dim_v;
    ez_llm_mm qkv[3] = {{&L->wq, f->q, n_q}, {&L->wk, f->k, n_k}, {&L->wv, f->v, n_v}};
    int32_t rc = f->be->ops->matmul(f->be, f->h, n, qkv, 3);
    if (rc) return rc;
    ez_fwd_tick(f, EZ_LLM_PHASE_QKV);
    add_bias(f, f->q, L->bq, n, n_q);
    add_bias(f, f->k, L->bk, n, n_k);
    add_bias(f, f->v, L->bv, n, n_v);
    ez_fwd_tick(f, EZ_LLM_PHASE_NORM);
    return ELIZA_OK;
}

void ez_fwd_qk_norm(ez_llm_fwd *f, const float *w_q, const float *w_k, int32_t n) {
    const ez_llm_hparams *hp = &f->m->hp;
    if (w_q) f->be->ops->rms_norm(f->be, f->q, f->q, w_q, (int64_t)n * hp->n_head, hp->head_dim, hp->norm_eps);
    if (w_k) f->be->ops->rms_norm(f->be, f->k, f->k, w_k, (int64_t)n * hp->n_head_kv, hp->head_dim, hp->norm_eps);
    ez_fwd_tick(f, EZ_LLM_PHASE_NORM);
}

void ez_fwd_qk_norm_rows(ez_llm_fwd *f, const float *w_q, const float *w_k, int32_t n) {
    const ez_llm_hparams *hp = &f->m->hp;
    const int64_t n_q = (int64_t)hp->n_head * hp->head_dim, n_k = (int64_t)hp->n_head_kv * hp->head_dim;
    if (w_q) f->be->ops->rms_norm(f->be, f->q, f->q, w_q, n, n_q, hp->norm_eps);
    if (w_k) f->be->ops->rms_norm(f->be, f->k, f->k, w_k, n, n_k, hp->norm_eps);
    ez_fwd_tick(f, EZ_LLM_PHASE_NORM);
}

const float *ez_fwd_rope_table(const ez_llm_fwd *f, int is_swa, int *n_rot) {
    const ez_llm_hparams *hp = &f->m->hp;
    *n_rot = is_swa && hp->n_rot_swa > 0 ? hp->n_rot_swa : hp->n_rot;
    return f->rope_cs + (is_swa ? (size_t)f->n_batch * (size_t)hp->n_rot : 0);
}

void ez_fwd_rope(ez_llm_fwd *f, const ez_llm_layer *L, int32_t n) {
    const ez_llm_hparams *hp = &f->m->hp;
    int n_rot;
    const float *cs = ez_fwd_rope_table(f, L->is_swa, &n_rot);
    if (L->no_rope) return;
    f->be->ops->rope(f->be, f->q, n, hp->n_head, hp->head_dim, n_rot, cs, hp->rope_neox);
    f->be->ops->rope(f->be, f->k, n, hp->n_head_kv, hp->head_dim, n_rot, cs, hp->rope_neox);
    ez_fwd_tick(f, EZ_LLM_PHASE_NORM);
}

void ez_fwd_attention(ez_llm_fwd *f, int il, int32_t n, int32_t pos0) {
    f->be->ops->attention(f->be, f->kv, il, f->q, f->k, f->v, f->att, n, pos0);
    ez_fwd_tick(f, EZ_LLM_PHASE_ATTENTION);
}

int32_t ez_fwd_attn_out(ez_llm_fwd *f, const ez_llm_layer *L, int32_t n) {
    const int64_t d = f->m->hp.n_embd;
    ez_llm_mm out = {&L->wo, f->o, d};
    int32_t rc = f->be->ops->matmul(f->be, f->att, n, &out, 1);
    if (rc) return rc;
    ez_fwd_tick(f, EZ_LLM_PHASE_ATTN_OUT);
    add_bias(f, f->o, L->bo, n, d);
    return ELIZA_OK;
}

int32_t ez_fwd_ffn(ez_llm_fwd *f, const ez_llm_layer *L, int32_t n, int gelu) {
    const int64_t d = f->m->hp.n_embd, n_ff = f->m->hp.n_ff;
    ez_llm_mm gate_up[2] = {{&L->ffn_gate, f->gate, n_ff}, {&L->ffn_up, f->up, n_ff}};
    ez_llm_mm down = {&L->ffn_down, f->o, d};
    int32_t rc;
    if ((rc = f->be->ops->matmul(f->be, f->h, n, gate_up, 2))) return rc;
    ez_fwd_tick(f, EZ_LLM_PHASE_FFN_UP);
    add_bias(f, f->gate, L->b_gate, n, n_ff);
    add_bias(f, f->up, L->b_up, n, n_ff);
    f->be->ops->glu(f->be, f->gate, f->up, n_ff, n, n_ff, gelu);
    ez_fwd_tick(f, EZ_LLM_PHASE_FFN_ACT);
    if ((rc = f->be->ops->matmul(f->be, f->gate, n, &down, 1))) return rc;
    ez_fwd_tick(f, EZ_LLM_PHASE_FFN_DOWN);
    add_bias(f, f->o, L->b_down, n, d);
    return ELIZA_OK;
}

void ez_fwd_residual(ez_llm_fwd *f, int32_t n) {
    const int64_t n_elems = (int64_t)n * f->m->hp.n_embd;
    const float scale = f->m->hp.residual_scale;
    if (scale == 1.0f) f->be->ops->add(f->be, f->x, f->o, n_elems);
    else f->be->ops->add_scaled(f->be, f->x, f->o, n_elems, scale);
    ez_fwd_tick(f, EZ_LLM_PHASE_NORM);
}

/* ---- the pass ----------------------------------------------------------------------- */

/* cos/sin of every batch position for the global (slot 0) and sliding
 * (slot 1) rope bases. The frequency divisors (rope_freqs.weight) are the
 * global layers' (llama.cpp: gemma4's proportional rope); sliding layers
 * rotate n_rot_swa dims (gemma4's heads are smaller there). */
static void rope_tables(ez_llm_fwd *f, int32_t n, int32_t pos0) {
    const ez_llm_hparams *hp = &f->m->hp;
    const int nr = hp->n_rot, nr_swa = hp->n_rot_swa > 0 ? hp->n_rot_swa : nr;
    const ez_rope_scaling sc = {hp->rope_base, hp->rope_freq_scale, f->rope_factors, hp->rope_mscale,
                                hp->rope_ext_factor, hp->yarn_corr[0], hp->yarn_corr[1]};
    const int scaled = hp->rope_mscale != 1.0f || hp->rope_ext_factor != 0.0f;
    for (int32_t i = 0; i < n; i++) {
        if (scaled)
            ez_rope_angles_scaled(f->rope_cs + (size_t)i * nr, pos0 + i, nr, &sc);
        else
            ez_rope_angles(f->rope_cs + (size_t)i * nr, pos0 + i, nr, hp->rope_base, hp->rope_freq_scale,
                           f->rope_factors);
        if (hp->n_swa > 0)
            ez_rope_angles(f->rope_cs + (size_t)f->n_batch * nr + (size_t)i * nr_swa, pos0 + i, nr_swa,
                           hp->rope_base_swa, 1.0f, hp->n_rot_swa > 0 ? NULL : f->m->rope_factors);
    }
}

/* Logits of rows [r0, r0 + n_rows) of the batch into logits [n_rows,
 * n_vocab]; with hidden, every row's normed state too. */
static int32_t output(ez_llm_fwd *f, int32_t n, int all_logits, float *logits, float *hidden) {
    const ez_llm_model *m = f->m;
    const int64_t d = m->hp.n_embd, nv = m->hp.n_vocab;
    const int32_t r0 = hidden || all_logits ? 0 : n - 1, n_rows = all_logits ? n : 1;
    const int32_t n_normed = hidden ? n : n_rows;
    ez_llm_mm proj = {&m->output, logits, nv};
    const float cap = m->hp.final_softcap;
    int32_t rc;
    norm_rows(f, f->h, f->x + (int64_t)r0 * d, m->output_norm, n_normed);
    if (hidden) memcpy(hidden, f->h, sizeof(float) * (size_t)n * (size_t)d);
    if (logits) {
        const float *rows = f->h + (all_logits || !hidden ? 0 : (int64_t)(n - 1) * d);
        if ((rc = f->be->ops->matmul(f->be, rows, n_rows, &proj, 1))) return rc;
        add_bias(f, logits, m->output_bias, n_rows, nv);
        if (m->hp.logit_scale != 1.0f) /* granite; llama.cpp multiplies by the inverse */
            f->be->ops->scale(f->be, logits, (int64_t)n_rows * nv, 1.0f / m->hp.logit_scale);
        if (cap > 0.0f) f->be->ops->softcap(f->be, logits, (int64_t)n_rows * nv, cap);
    }
    ez_fwd_tick(f, EZ_LLM_PHASE_OUTPUT);
    return ELIZA_OK;
}

int32_t ez_llm_forward(ez_llm_fwd *f, const int32_t *tokens, int32_t n, float *logits, int all_logits, float *hidden,
                       ez_llm_flag *cancel) {
    const int32_t pos0 = f->kv->n_pos;
    int32_t rc;
    f->t = ez_time_ns();
    ez_kv_cache_begin(f->kv, n);
    f->be->ops->embed(f->be, &f->m->tok_embd, tokens, n, f->m->hp.embd_scale, f->x);
    rope_tables(f, n, pos0);
    if (f->m->arch->prepare && (rc = f->m->arch->prepare(f, tokens, n))) return rc;
    ez_fwd_tick(f, EZ_LLM_PHASE_EMBED);
    for (int il = 0; il < f->m->hp.n_layer; il++) {
        if (cancel && ez_llm_flag_get(cancel)) return ez_fail(ELIZA_E_CANCELLED, "cancelled");
        if ((rc = f->m->arch->block(f, il, n, pos0))) return rc;
    }
    if (cancel && ez_llm_flag_get(cancel)) return ez_fail(ELIZA_E_CANCELLED, "cancelled");
    f->prof.tokens += (uint64_t)n;
    f->prof.batches++;
    if ((logits || hidden) && (rc = output(f, n, all_logits, logits, hidden))) return rc;
    ez_kv_cache_commit(f->kv, n);
    return ELIZA_OK;
}
