/* falcon-h1: every block is a parallel hybrid of a Mamba2 mixer and
 * attention on the same normed input, then a SwiGLU FFN:
 *   h = rms_norm(x) attn_norm
 *   x += mamba2(h) + attention(h)        (muP multipliers baked into the weights)
 *   x += ffn(rms_norm(x) ffn_norm)
 * Mamba2 (llm/ssm.h): zxbcdt = h in_proj (one pass with q, k, v); xBC = silu(conv1d(xBC) + b);
 * y = scan(x, dt, A, B, C) + D x; y = y silu(z), grouped RMSNorm when the
 * file has ssm_norm; out_proj. Attention: NEOX rope, GQA, 1/sqrt(head_dim).
 * The conv window and the SSM state of every layer live in the cache
 * object's recurrent-state slot of that layer ([K-1][C] then [H][P][N]
 * floats), so a STATES snapshot rolls the model back. A prompt runs the
 * chunked SSD scan, a single token the recurrent step: the same numbers.
 * llama.cpp src/models/falcon-h1.cpp + mamba-base.cpp (build_mamba2_layer),
 * transformers modeling_falcon_h1.py; the GGUF is llama.cpp's converter's
 * (eliza.convert hf writes the same; docs/convert.md). */
#include "arch.h"

#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "ssm.h"

static int32_t falcon_h1_hparams(ez_llm_keys *k, ez_llm_hparams *hp) {
    int32_t rc;
    hp->rope_neox = 1;
    hp->ffn_gelu = 0;
    if ((rc = ez_llm_key_u32(k, "ssm.conv_kernel", 1, EZ_SSM_MAX_CONV, &hp->ssm_d_conv)) ||
        (rc = ez_llm_key_u32(k, "ssm.inner_size", 1, 1 << 20, &hp->ssm_d_inner)) ||
        (rc = ez_llm_key_u32(k, "ssm.state_size", 1, 4096, &hp->ssm_d_state)) ||
        (rc = ez_llm_key_u32(k, "ssm.time_step_rank", 1, 1 << 16, &hp->ssm_n_head)) ||
        (rc = ez_llm_key_u32(k, "ssm.group_count", 1, 1 << 16, &hp->ssm_n_group)))
        return rc;
    if (hp->ssm_d_inner % hp->ssm_n_head)
        return ez_fail(ELIZA_E_FORMAT, "falcon-h1: ssm.inner_size %d is not a multiple of ssm.time_step_rank %d",
                       hp->ssm_d_inner, hp->ssm_n_head);
    if (hp->ssm_n_head % hp->ssm_n_group)
        return ez_fail(ELIZA_E_FORMAT, "falcon-h1: ssm.group_count %d does not divide ssm.time_step_rank %d",
                       hp->ssm_n_group, hp->ssm_n_head);
    return ELIZA_OK;
}

static int32_t falcon_h1_layer(ez_llm_model *m, int il) {
    const ez_llm_hparams *hp = &m->hp;
    ez_llm_layer *L = &m->layers[il];
    const int64_t e = hp->n_embd, n_q = (int64_t)hp->n_head * hp->head_dim, n_kv = (int64_t)hp->n_head_kv * hp->head_dim,
                  d_in = hp->ssm_d_inner, H = hp->ssm_n_head, G = hp->ssm_n_group, N = hp->ssm_d_state,
                  K = hp->ssm_d_conv, C = d_in + 2 * G * N;
    char b[96];
    int32_t rc;
    if ((rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_norm.weight"), e, 1, &L->attn_norm)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "ssm_in.weight"), d_in + C + H, e, 1, &L->ssm_in)) ||
        (rc = ez_llm_get_array(m, ez_llm_blk(b, sizeof b, il, "ssm_conv1d.weight"), K, C, 1, &L->ssm_conv1d)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "ssm_conv1d.bias"), C, 0, &L->ssm_conv1d_b)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "ssm_dt.bias"), H, 1, &L->ssm_dt_b)) ||
        (rc = ez_llm_get_array(m, ez_llm_blk(b, sizeof b, il, "ssm_a"), 1, H, 1, &L->ssm_a)) ||
        (rc = ez_llm_get_array(m, ez_llm_blk(b, sizeof b, il, "ssm_d"), 1, H, 1, &L->ssm_d)) ||
        (rc = ez_llm_get_array(m, ez_llm_blk(b, sizeof b, il, "ssm_norm.weight"), d_in / G, G, 0, &L->ssm_norm)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "ssm_out.weight"), e, d_in, 1, &L->ssm_out)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_q.weight"), n_q, e, 1, &L->wq)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_k.weight"), n_kv, e, 1, &L->wk)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_v.weight"), n_kv, e, 1, &L->wv)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_q.bias"), n_q, 0, &L->bq)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_k.bias"), n_kv, 0, &L->bk)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_v.bias"), n_kv, 0, &L->bv)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_output.weight"), e, n_q, 1, &L->wo)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_output.bias"), e, 0, &L->bo)) ||
        /* llama.cpp's falcon-h1 names it without ".weight" (its converter maps
         * pre_ff_layernorm.weight to FFN_PRE_NORM, "blk.N.ffn_norm") */
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "ffn_norm"), e, 1, &L->ffn_norm)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "ffn_gate.weight"), hp->n_ff, e, 1, &L->ffn_gate)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "ffn_up.weight"), hp->n_ff, e, 1, &L->ffn_up)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "ffn_down.weight"), e, hp->n_ff, 1, &L->ffn_down)))
        return rc;
    L->rope_base = hp->rope_base;
    L->rope_freq_scale = hp->rope_freq_scale;
    L->state_bytes = sizeof(float) * (size_t)((K - 1) * C + d_in * N);
    return ELIZA_OK;
}

static int32_t falcon_h1_weights(ez_llm_model *m) {
    for (int il = 0; il < m->hp.n_layer; il++) {
        int32_t rc = falcon_h1_layer(m, il);
        if (rc) return rc;
    }
    return ELIZA_OK;
}

/* ---- the mixer ------------------------------------------------------------------------- */

/* q, k, v and the mixer's in_proj of f->h: one pass of the products (the
 * input quantized once, one pool dispatch for the four matrices); profiled
 * as the qkv phase. */
static int32_t in_projections(ez_llm_fwd *f, const ez_llm_layer *L, int32_t n) {
    const ez_llm_hparams *hp = &f->m->hp;
    const int64_t n_q = (int64_t)hp->n_head * hp->head_dim, n_kv = (int64_t)hp->n_head_kv * hp->head_dim,
                  C = hp->ssm_d_inner + 2 * (int64_t)hp->ssm_n_group * hp->ssm_d_state,
                  ld_z = hp->ssm_d_inner + C + hp->ssm_n_head;
    const ez_llm_mm mm[4] = {{&L->wq, f->q, n_q}, {&L->wk, f->k, n_kv}, {&L->wv, f->v, n_kv},
                             {&L->ssm_in, f->ssm_zxbcdt, ld_z}};
    ez_llm_backend *be = f->be;
    int32_t rc = be->ops->matmul(be, f->h, n, mm, 4);
    if (rc) return rc;
    ez_fwd_tick(f, EZ_LLM_PHASE_QKV);
    if (L->bq) be->ops->add_bias(be, f->q, L->bq, n, n_q);
    if (L->bk) be->ops->add_bias(be, f->k, L->bk, n, n_kv);
    if (L->bv) be->ops->add_bias(be, f->v, L->bv, n, n_kv);
    ez_fwd_tick(f, EZ_LLM_PHASE_NORM);
    return ELIZA_OK;
}

/* f->ssm_o = mamba2 of the n tokens whose in_proj is in f->ssm_zxbcdt,
 * advancing layer il's states. */
static int32_t mamba2(ez_llm_fwd *f, int il, int32_t n) {
    const ez_llm_hparams *hp = &f->m->hp;
    const ez_llm_layer *L = &f->m->layers[il];
    const int64_t d_in = hp->ssm_d_inner, H = hp->ssm_n_head, G = hp->ssm_n_group, N = hp->ssm_d_state,
                  K = hp->ssm_d_conv, C = d_in + 2 * G * N, ld_z = d_in + C + H;
    const ez_ssm_shape sh = {(int)H, (int)(d_in / H), (int)G, (int)N};
    float *conv_state = (float *)(void *)f->kv->layers[il].state, *ssm_state = conv_state + (K - 1) * C;
    ez_llm_mm out = {&L->ssm_out, f->ssm_o, hp->n_embd};
    ez_llm_backend *be = f->be;
    int32_t rc;

    be->ops->ssm_conv(be, conv_state, f->ssm_zxbcdt + d_in, ld_z, L->ssm_conv1d, L->ssm_conv1d_b, f->ssm_xbc, n,
                      (int)C, (int)K);
    ez_fwd_tick(f, EZ_LLM_PHASE_SSM_CONV);
    be->ops->ssm_scan(be, &sh, ssm_state, f->ssm_xbc, f->ssm_zxbcdt + d_in + C, ld_z, L->ssm_dt_b, L->ssm_a,
                      L->ssm_d, f->ssm_y, n);
    be->ops->ssm_gate_norm(be, f->ssm_y, f->ssm_zxbcdt, ld_z, L->ssm_norm, n, d_in, (int)G, hp->norm_eps);
    ez_fwd_tick(f, EZ_LLM_PHASE_SSM_SCAN);
    if ((rc = be->ops->matmul(be, f->ssm_y, n, &out, 1))) return rc;
    ez_fwd_tick(f, EZ_LLM_PHASE_SSM_OUT);
    return ELIZA_OK;
}

/* x: [n, n_embd], updated in place. */
static int32_t falcon_h1_block(ez_llm_fwd *f, int il, int32_t n, int32_t pos0) {
    const ez_llm_layer *L = &f->m->layers[il];
    const int64_t n_elems = (int64_t)n * f->m->hp.n_embd;
    int32_t rc;

    ez_fwd_norm(f, f->h, f->x, L->attn_norm, n);
    if ((rc = in_projections(f, L, n))) return rc;
    ez_fwd_rope(f, L, n);
    ez_fwd_attention(f, il, n, pos0);
    if ((rc = ez_fwd_attn_out(f, L, n))) return rc;
    if ((rc = mamba2(f, il, n))) return rc;
    /* x + (o + ssm_o), as the reference sums them */
    f->be->ops->add(f->be, f->o, f->ssm_o, n_elems);
    f->be->ops->add(f->be, f->x, f->o, n_elems);
    ez_fwd_tick(f, EZ_LLM_PHASE_NORM);

    ez_fwd_norm(f, f->h, f->x, L->ffn_norm, n);
    if ((rc = ez_fwd_ffn(f, L, n, 0))) return rc;
    ez_fwd_residual(f, n);
    return ELIZA_OK;
}

const ez_llm_arch_def ez_llm_arch_falcon_h1 = {"falcon-h1", falcon_h1_hparams, falcon_h1_weights, falcon_h1_block,
                                                NULL};
