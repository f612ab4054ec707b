/* olmo2: norms after the sublayers instead of before them (x += norm(f(x))),
 * q and k each RMS-normed over the whole projection (all heads at once)
 * before NEOX rope, SwiGLU. llama.cpp src/models/olmo2.cpp, transformers
 * modeling_olmo2.py. OLMo 3's sliding-window layers are not supported. */
#include "arch.h"

#include <string.h>

#include "core/error.h"

static int32_t olmo2_hparams(ez_llm_keys *k, ez_llm_hparams *hp) {
    int32_t swa = 0, rc;
    hp->rope_neox = 1;
    hp->ffn_gelu = 0;
    if ((rc = ez_llm_key_opt_u32(k, "attention.sliding_window", 0, INT32_MAX, &swa))) return rc;
    if (swa > 0)
        return ez_fail(ELIZA_E_UNSUPPORTED, "olmo2 with a sliding window of %d (OLMo 3) is not supported", (int)swa);
    return ELIZA_OK;
}

static int32_t olmo2_layer(ez_llm_model *m, int il) {
    const ez_llm_hparams *hp = &m->hp;
    ez_llm_layer *L = &m->layers[il];
    const int64_t d = hp->n_embd, n_q = (int64_t)hp->n_head * hp->head_dim,
                  n_kv = (int64_t)hp->n_head_kv * hp->head_dim, n_ff = hp->n_ff;
    char b[96];
    int32_t rc;
    if ((rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_q.weight"), n_q, d, 1, &L->wq)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_k.weight"), n_kv, d, 1, &L->wk)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_v.weight"), n_kv, d, 1, &L->wv)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_q_norm.weight"), n_q, 1, &L->q_norm)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_k_norm.weight"), n_kv, 1, &L->k_norm)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_output.weight"), d, n_q, 1, &L->wo)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "post_attention_norm.weight"), d, 1,
                                &L->post_attn_norm)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "ffn_gate.weight"), n_ff, d, 1, &L->ffn_gate)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "ffn_up.weight"), n_ff, d, 1, &L->ffn_up)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "ffn_down.weight"), d, n_ff, 1, &L->ffn_down)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "post_ffw_norm.weight"), d, 1, &L->post_ffw_norm)))
        return rc;
    L->rope_base = hp->rope_base;
    L->rope_freq_scale = hp->rope_freq_scale;
    return ELIZA_OK;
}

static int32_t olmo2_weights(ez_llm_model *m) {
    for (int il = 0; il < m->hp.n_layer; il++) {
        int32_t rc = olmo2_layer(m, il);
        if (rc) return rc;
    }
    return ELIZA_OK;
}

/* x: [n, n_embd], updated in place. */
static int32_t olmo2_block(ez_llm_fwd *f, int il, int32_t n, int32_t pos0) {
    const ez_llm_layer *L = &f->m->layers[il];
    const size_t row = sizeof(float) * (size_t)f->m->hp.n_embd;
    int32_t rc;

    memcpy(f->h, f->x, row * (size_t)n); /* the sublayers read x unnormed */
    if ((rc = ez_fwd_qkv(f, L, n))) return rc;
    ez_fwd_qk_norm_rows(f, L->q_norm, L->k_norm, n);
    ez_fwd_rope(f, L, n);
    ez_fwd_attention(f, il, n, pos0);
    if ((rc = ez_fwd_attn_out(f, L, n))) return rc;
    ez_fwd_norm(f, f->o, f->o, L->post_attn_norm, n);
    ez_fwd_residual(f, n);

    memcpy(f->h, f->x, row * (size_t)n);
    if ((rc = ez_fwd_ffn(f, L, n, 0))) return rc;
    ez_fwd_norm(f, f->o, f->o, L->post_ffw_norm, n);
    ez_fwd_residual(f, n);
    return ELIZA_OK;
}

const ez_llm_arch_def ez_llm_arch_olmo2 = {"olmo2", olmo2_hparams, olmo2_weights, olmo2_block, NULL};
