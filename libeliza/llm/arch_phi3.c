/* phi3: llama's pre-norm block with NEOX rope over part of each head
 * (rope.dimension_count), q/k/v in one fused matrix and gate/up in another,
 * and LongRoPE: per-frequency divisors (long ones when the context exceeds
 * the trained one, else short) and a cos/sin scale
 * (rope.scaling.attn_factor). llama.cpp src/models/phi3.cpp, transformers
 * modeling_phi3.py. The fused matrices are split into row ranges of the
 * mapping: q, k, v (and gate, up) are consecutive rows, so no copy. */
#include "arch.h"

#include <string.h>

#include "core/error.h"

static int32_t phi3_hparams(ez_llm_keys *k, ez_llm_hparams *hp) {
    (void)k;
    hp->rope_neox = 1;
    hp->ffn_gelu = 0;
    /* llama.cpp disables Phi's sliding window (a positive one is ignored). */
    hp->n_swa = 0;
    return ELIZA_OK;
}

/* rows [r0, r0 + n) of w as a matrix of their own. */
static ez_llm_matrix rows_of(const ez_llm_matrix *w, int64_t r0, int64_t n) {
    ez_llm_matrix out = *w;
    out.n_rows = n;
    out.data = w->data + (size_t)r0 * w->row_bytes;
    return out;
}

static int32_t phi3_layer(ez_llm_model *m, int il) {
    const ez_llm_hparams *hp = &m->hp;
    ez_llm_layer *L = &m->layers[il];
    const int64_t d = hp->n_embd, n_q = (int64_t)hp->n_head * hp->head_dim,
                  n_kv = (int64_t)hp->n_head_kv * hp->head_dim, n_ff = hp->n_ff;
    ez_llm_matrix qkv, gate_up;
    char b[96];
    int32_t rc;
    if ((rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_norm.weight"), d, 1, &L->attn_norm)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_qkv.weight"), n_q + 2 * n_kv, d, 0, &qkv)))
        return rc;
    if (qkv.data) {
        L->wq = rows_of(&qkv, 0, n_q);
        L->wk = rows_of(&qkv, n_q, n_kv);
        L->wv = rows_of(&qkv, n_q + n_kv, n_kv);
    } else if ((rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_q.weight"), n_q, d, 1, &L->wq)) ||
               (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_k.weight"), n_kv, d, 1, &L->wk)) ||
               (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_v.weight"), n_kv, d, 1, &L->wv))) {
        return rc;
    }
    if ((rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_output.weight"), d, n_q, 1, &L->wo)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "ffn_norm.weight"), d, 1, &L->ffn_norm)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "ffn_up.weight"), 2 * n_ff, d, 1, &gate_up)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "ffn_down.weight"), d, n_ff, 1, &L->ffn_down)))
        return rc;
    /* transformers' gate_up_proj: gate rows first, then up (llama.cpp's swiglu halves). */
    L->ffn_gate = rows_of(&gate_up, 0, n_ff);
    L->ffn_up = rows_of(&gate_up, n_ff, n_ff);
    L->rope_base = hp->rope_base;
    L->rope_freq_scale = hp->rope_freq_scale;
    return ELIZA_OK;
}

static int32_t phi3_weights(ez_llm_model *m) {
    const int64_t n_f = m->hp.n_rot / 2;
    int32_t rc;
    if ((rc = ez_llm_get_vector(m, "rope_factors_long.weight", n_f, 0, &m->rope_factors_long)) ||
        (rc = ez_llm_get_vector(m, "rope_factors_short.weight", n_f, 0, &m->rope_factors_short)))
        return rc;
    for (int64_t i = 0; i < n_f; i++)
        if ((m->rope_factors_long && !(m->rope_factors_long[i] > 0.0f)) ||
            (m->rope_factors_short && !(m->rope_factors_short[i] > 0.0f)))
            return ez_fail(ELIZA_E_FORMAT, "LongRoPE factor %d is not positive", (int)i);
    for (int il = 0; il < m->hp.n_layer; il++)
        if ((rc = phi3_layer(m, il))) return rc;
    return ELIZA_OK;
}

const ez_llm_arch_def ez_llm_arch_phi3 = {"phi3", phi3_hparams, phi3_weights, ez_llm_block_prenorm, NULL};
