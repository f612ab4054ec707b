/* gemma4 (text): Gemma 3's block with per-layer embeddings, KV-shared
 * layers, two head sizes, a unit attention scale and a scalar per layer;
 * and gemma4-assistant, the multi-token-prediction drafter made of the same
 * layers without keys and values (llm/draft_mtp.c runs it). transformers
 * modeling_gemma4.py (Gemma4TextModel), llama.cpp src/models/gemma4.cpp.
 *
 *   x = embed(t) * sqrt(n_embd)
 *   ple[l] = (rms_norm(x Wple_model / sqrt(n_embd)) * w + embed_ple(t)[l] * sqrt(ple)) / sqrt(2)
 *   per layer l (head size hd: head_dim_swa on sliding layers, head_dim on full ones):
 *     h = rms_norm(x) * w;  q = rms_norm_head(h Wq) * wq_norm;  rope(q)
 *     k = rms_norm_head(h Wk) * wk_norm, rope(k); v = rms_norm_head(h Wv)   (no scale)
 *       (the last n_kv_shared layers have no k, v: they read the last
 *        non-shared layer of their own kind, sliding or full)
 *     x += rms_norm(softmax(q k^T) v Wo) * w          scale 1, window on sliding layers
 *     x += rms_norm(ffn(rms_norm(x) * w)) * w         GeGLU (tanh)
 *     x += rms_norm((gelu(x Wgate) * ple[l]) Wproj) * w
 *     x *= layer_scalar
 *   logits = softcap(rms_norm(x) * w Wembd^T)
 *
 * Sliding layers use rope base freq_base_swa over all head_dim_swa dims;
 * full layers use "proportional" rope: base freq_base with exponents over
 * head_dim, the first pairs rotated, the rest not (rope_freqs.weight holds
 * 1 or 1e30 per pair, llama.cpp's encoding). RMSNorm multiplies by the
 * stored weight (no +1, unlike Gemma 3). */
#include "arch.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/quant.h"

static int32_t gemma4_common_hparams(ez_llm_keys *k, ez_llm_hparams *hp) {
    int32_t rc, v_swa = 0;
    hp->rope_neox = 1;
    hp->ffn_gelu = 1;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->attn_scale = 1.0f; /* Gemma4TextAttention: self.scaling = 1.0 (q and k are normed) */
    hp->head_dim_swa = hp->head_dim;
    if ((rc = ez_llm_key_opt_u32(k, "attention.sliding_window", 0, INT32_MAX, &hp->n_swa)) ||
        (rc = ez_llm_key_opt_f32(k, "final_logit_softcapping", &hp->final_softcap)) ||
        (rc = ez_llm_key_opt_u32(k, "attention.key_length_swa", 2, (uint32_t)hp->head_dim, &hp->head_dim_swa)))
        return rc;
    v_swa = hp->head_dim_swa;
    hp->n_rot_swa = hp->head_dim_swa;
    if ((rc = ez_llm_key_opt_u32(k, "attention.value_length_swa", 1, (uint32_t)hp->head_dim, &v_swa)) ||
        (rc = ez_llm_key_opt_u32(k, "rope.dimension_count_swa", 2, (uint32_t)hp->head_dim_swa, &hp->n_rot_swa)) ||
        (rc = ez_llm_key_opt_u32(k, "attention.shared_kv_layers", 0, (uint32_t)hp->n_layer, &hp->n_kv_shared)) ||
        (rc = ez_llm_key_opt_u32(k, "embedding_length_per_layer_input", 0, 65536, &hp->n_embd_per_layer)))
        return rc;
    if (v_swa != hp->head_dim_swa)
        return ez_fail(ELIZA_E_UNSUPPORTED, "sliding-layer key head size %d differs from value head size %d",
                       hp->head_dim_swa, v_swa);
    if (hp->n_rot_swa % 2 || hp->head_dim_swa % 2)
        return ez_fail(ELIZA_E_FORMAT, "sliding layers: head size %d, rotated dims %d must be even", hp->head_dim_swa,
                       hp->n_rot_swa);
    if (hp->final_softcap < 0.0f)
        return ez_fail(ELIZA_E_FORMAT, "final_logit_softcapping %g is negative", (double)hp->final_softcap);
    if (ez_gguf_find_kv(k->g, ez_llm_key(k, "expert_count")))
        return ez_fail(ELIZA_E_UNSUPPORTED, "Gemma 4 with mixture-of-experts layers is not supported");
    return ELIZA_OK;
}

static int32_t gemma4_hparams(ez_llm_keys *k, ez_llm_hparams *hp) {
    int32_t rc = gemma4_common_hparams(k, hp);
    if (rc) return rc;
    if (hp->n_kv_shared >= hp->n_layer)
        return ez_fail(ELIZA_E_FORMAT, "attention.shared_kv_layers %d leaves no layer of %d with keys and values",
                       hp->n_kv_shared, hp->n_layer);
    return ELIZA_OK;
}

/* A layer's tensors; kv: whether it has keys and values of its own. */
static int32_t load_layer(ez_llm_model *m, int il, int kv) {
    const ez_llm_hparams *hp = &m->hp;
    ez_llm_layer *L = &m->layers[il];
    const int64_t e = hp->n_embd, hd = L->is_swa ? hp->head_dim_swa : hp->head_dim;
    const int64_t n_q = (int64_t)hp->n_head * hd, n_kv = (int64_t)hp->n_head_kv * hd, ple = hp->n_embd_per_layer;
    const float *scale = NULL;
    char b[96];
    int32_t rc;
    L->head_dim = (int32_t)hd;
    L->rope_base = L->is_swa ? hp->rope_base_swa : hp->rope_base;
    L->rope_freq_scale = L->is_swa ? 1.0f : hp->rope_freq_scale;
    if ((rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_norm.weight"), e, 1, &L->attn_norm)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_q.weight"), n_q, e, 1, &L->wq)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_q_norm.weight"), hd, 1, &L->q_norm)) ||
        (kv && (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_k.weight"), n_kv, e, 1, &L->wk))) ||
        (kv && (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_v.weight"), n_kv, e, 1, &L->wv))) ||
        (kv && (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_k_norm.weight"), hd, 1, &L->k_norm))) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_output.weight"), e, n_q, 1, &L->wo)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "post_attention_norm.weight"), e, 1, &L->post_attn_norm)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "ffn_norm.weight"), e, 1, &L->ffn_norm)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "ffn_gate.weight"), hp->n_ff, e, 1, &L->ffn_gate)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "ffn_up.weight"), hp->n_ff, e, 1, &L->ffn_up)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "ffn_down.weight"), e, hp->n_ff, 1, &L->ffn_down)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "post_ffw_norm.weight"), e, 1, &L->post_ffw_norm)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "layer_output_scale.weight"), 1, 0, &scale)))
        return rc;
    if (!kv && ez_gguf_find_tensor(m->gguf, ez_llm_blk(b, sizeof b, il, "attn_k.weight")))
        return ez_fail(ELIZA_E_FORMAT, "layer %d shares keys and values but has '%s'", il, b);
    if (ple && ((rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "inp_gate.weight"), ple, e, 1, &L->ple_gate)) ||
                (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "proj.weight"), e, ple, 1, &L->ple_proj)) ||
                (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "post_norm.weight"), e, 1, &L->ple_post_norm))))
        return rc;
    if (ez_gguf_find_tensor(m->gguf, ez_llm_blk(b, sizeof b, il, "ffn_gate_inp.weight")))
        return ez_fail(ELIZA_E_UNSUPPORTED, "Gemma 4 with mixture-of-experts layers ('%s') is not supported", b);
    if (scale) L->out_scale = scale[0];
    return ELIZA_OK;
}

/* transformers' kv_sharing_modes: a shared layer reads the last non-shared
 * layer of its own kind. (llama.cpp instead assumes that layer is the last
 * non-shared one for full layers and the one before it for sliding ones.) */
static int32_t kv_source(const ez_llm_model *m, int il, int first_shared) {
    for (int j = first_shared - 1; j >= 0; j--)
        if (m->layers[j].is_swa == m->layers[il].is_swa) return j;
    return ez_fail(ELIZA_E_FORMAT, "KV-shared layer %d (%s) has no earlier layer of its kind to read", il,
                   m->layers[il].is_swa ? "sliding" : "full");
}

static int32_t gemma4_weights(ez_llm_model *m) {
    const ez_llm_hparams *hp = &m->hp;
    const int first_shared = hp->n_layer - hp->n_kv_shared;
    const int64_t ple = hp->n_embd_per_layer, n_ple = (int64_t)hp->n_layer * ple;
    int32_t rc;
    if (hp->n_swa > 0 && (rc = ez_llm_load_swa_pattern(m->gguf, hp, m->layers))) return rc;
    for (int il = 0; il < hp->n_layer; il++) {
        m->layers[il].is_swa = m->layers[il].is_swa && hp->n_swa > 0;
        if ((rc = load_layer(m, il, il < first_shared))) return rc;
        if (il >= first_shared) {
            int32_t src = kv_source(m, il, first_shared);
            if (src < 0) return src;
            m->layers[il].kv_alias = src;
        }
    }
    if (ple && ((rc = ez_llm_get_matrix(m, "per_layer_token_embd.weight", m->tok_embd.n_rows, n_ple, 1, &m->ple_embd)) ||
                (rc = ez_llm_get_matrix(m, "per_layer_model_proj.weight", n_ple, hp->n_embd, 1, &m->ple_model_proj)) ||
                (rc = ez_llm_get_vector(m, "per_layer_proj_norm.weight", ple, 1, &m->ple_proj_norm))))
        return rc;
    return ELIZA_OK;
}

/* f->ple = the per-layer inputs of the batch (Gemma4TextModel's
 * get_per_layer_inputs + project_per_layer_inputs). */
static int32_t gemma4_prepare(ez_llm_fwd *f, const int32_t *tokens, int32_t n) {
    const ez_llm_model *m = f->m;
    const ez_llm_hparams *hp = &m->hp;
    const int64_t ple = hp->n_embd_per_layer, n_ple = (int64_t)hp->n_layer * ple;
    const float proj_scale = 1.0f / sqrtf((float)hp->n_embd), embd_scale = sqrtf((float)ple),
                mix = 0.70710678118654752f; /* 2^-0.5 */
    ez_llm_mm proj = {&m->ple_model_proj, f->ple, n_ple};
    ez_llm_backend *be = f->be;
    int32_t rc;
    if (ple == 0) return ELIZA_OK;
    if ((rc = be->ops->matmul(be, f->x, n, &proj, 1))) return rc;
    /* f->ple is [n * n_layer, ple]: each token's row of each layer */
    be->ops->scale(be, f->ple, n * n_ple, proj_scale);
    be->ops->rms_norm(be, f->ple, f->ple, m->ple_proj_norm, (int64_t)n * hp->n_layer, ple, hp->norm_eps);
    for (int32_t r = 0; r < n; r++) {
        be->ops->embed(be, &m->ple_embd, tokens + r, 1, 1.0f, f->ple_act);
        be->ops->add_scaled(be, f->ple + (int64_t)r * n_ple, f->ple_act, n_ple, embd_scale);
    }
    be->ops->scale(be, f->ple, n * n_ple, mix);
    return ELIZA_OK;
}

/* q (and k, v where the layer has them) of the batch, normed and rotated. */
static int32_t gemma4_qkv(ez_llm_fwd *f, const ez_llm_layer *L, int32_t n) {
    const ez_llm_hparams *hp = &f->m->hp;
    const int64_t hd = L->head_dim, n_q = (int64_t)hp->n_head * hd, n_k = (int64_t)hp->n_head_kv * hd;
    const int own_kv = L->wk.data != NULL;
    ez_llm_mm qkv[3] = {{&L->wq, f->q, n_q}, {&L->wk, f->k, n_k}, {&L->wv, f->v, n_k}};
    ez_llm_backend *be = f->be;
    int n_rot;
    const float *cs = ez_fwd_rope_table(f, L->is_swa, &n_rot);
    int32_t rc = be->ops->matmul(be, f->h, n, qkv, own_kv ? 3 : 1);
    if (rc) return rc;
    ez_fwd_tick(f, EZ_LLM_PHASE_QKV);
    /* per-head norms; v's has no weight */
    be->ops->rms_norm(be, f->q, f->q, L->q_norm, (int64_t)n * hp->n_head, hd, hp->norm_eps);
    be->ops->rope(be, f->q, n, hp->n_head, (int)hd, n_rot, cs, 1);
    if (own_kv) {
        be->ops->rms_norm(be, f->k, f->k, L->k_norm, (int64_t)n * hp->n_head_kv, hd, hp->norm_eps);
        be->ops->rms_norm(be, f->v, f->v, NULL, (int64_t)n * hp->n_head_kv, hd, hp->norm_eps);
        be->ops->rope(be, f->k, n, hp->n_head_kv, (int)hd, n_rot, cs, 1);
    }
    ez_fwd_tick(f, EZ_LLM_PHASE_NORM);
    return ELIZA_OK;
}

/* f->att = attention of f->q (layer il's head size) over layer kv_layer of
 * the cache kv, after storing f->k, f->v there at pos0 .. when `store`. The
 * drafter (draft_mtp.c) calls it with the target's cache. */
int32_t ez_llm_gemma4_attention(ez_llm_fwd *f, const ez_kv_cache *kv, int il, int kv_layer, int32_t n, int32_t pos0,
                                int store) {
    const ez_kv_layer *c = &kv->layers[kv_layer];
    const int hd = f->m->layers[il].head_dim;
    if (c->fk.head_dim != hd)
        return ez_fail(ELIZA_E_INTERNAL, "layer %d (head size %d) reads cache layer %d of another head size", il, hd,
                       kv_layer);
    f->be->ops->attention(f->be, (ez_kv_cache *)kv, kv_layer, f->q, store ? f->k : NULL, f->v, f->att, n, pos0);
    ez_fwd_tick(f, EZ_LLM_PHASE_ATTENTION);
    return ELIZA_OK;
}

/* x *= s over n rows. */
static void scale_rows(ez_llm_fwd *f, float s, int32_t n) {
    if (s != 1.0f) f->be->ops->scale(f->be, f->x, (int64_t)n * f->m->hp.n_embd, s);
}

/* The attention sublayer's output in f->o (before its post norm), the FFN
 * and its residuals: what the target's and the drafter's layers share. */
static int32_t attn_out_and_ffn(ez_llm_fwd *f, const ez_llm_layer *L, int32_t n) {
    const int64_t e = f->m->hp.n_embd;
    ez_llm_mm out = {&L->wo, f->o, e};
    int32_t rc;
    if ((rc = f->be->ops->matmul(f->be, f->att, n, &out, 1))) return rc;
    ez_fwd_tick(f, EZ_LLM_PHASE_ATTN_OUT);
    ez_fwd_norm(f, f->o, f->o, L->post_attn_norm, n);
    ez_fwd_residual(f, n);
    ez_fwd_norm(f, f->h, f->x, L->ffn_norm, n);
    if ((rc = ez_fwd_ffn(f, L, n, 1))) return rc;
    ez_fwd_norm(f, f->o, f->o, L->post_ffw_norm, n);
    ez_fwd_residual(f, n);
    return ELIZA_OK;
}

/* x += rms_norm((gelu(x Wgate) * ple[il]) Wproj) * w. */
static int32_t per_layer_input(ez_llm_fwd *f, const ez_llm_layer *L, int il, int32_t n) {
    const ez_llm_hparams *hp = &f->m->hp;
    const int64_t ple = hp->n_embd_per_layer, n_ple = (int64_t)hp->n_layer * ple;
    ez_llm_mm gate = {&L->ple_gate, f->ple_act, ple}, proj = {&L->ple_proj, f->o, hp->n_embd};
    int32_t rc;
    if ((rc = f->be->ops->matmul(f->be, f->x, n, &gate, 1))) return rc;
    f->be->ops->glu(f->be, f->ple_act, f->ple + (int64_t)il * ple, n_ple, n, ple, 1);
    ez_fwd_tick(f, EZ_LLM_PHASE_FFN_ACT);
    if ((rc = f->be->ops->matmul(f->be, f->ple_act, n, &proj, 1))) return rc;
    ez_fwd_tick(f, EZ_LLM_PHASE_FFN_DOWN);
    ez_fwd_norm(f, f->o, f->o, L->ple_post_norm, n);
    ez_fwd_residual(f, n);
    return ELIZA_OK;
}

static int32_t gemma4_block(ez_llm_fwd *f, int il, int32_t n, int32_t pos0) {
    const ez_llm_layer *L = &f->m->layers[il];
    const int src = L->kv_alias >= 0 ? L->kv_alias : il;
    int32_t rc;
    ez_fwd_norm(f, f->h, f->x, L->attn_norm, n);
    if ((rc = gemma4_qkv(f, L, n)) || (rc = ez_llm_gemma4_attention(f, f->kv, il, src, n, pos0, src == il)) ||
        (rc = attn_out_and_ffn(f, L, n)))
        return rc;
    if (f->m->hp.n_embd_per_layer > 0 && (rc = per_layer_input(f, L, il, n))) return rc;
    scale_rows(f, L->out_scale, n);
    ez_fwd_tick(f, EZ_LLM_PHASE_NORM);
    return ELIZA_OK;
}

const ez_llm_arch_def ez_llm_arch_gemma4 = {"gemma4", gemma4_hparams, gemma4_weights, gemma4_block, gemma4_prepare};

/* ---- gemma4-assistant: the MTP drafter's file ------------------------------------------ */

static int32_t assistant_hparams(ez_llm_keys *k, ez_llm_hparams *hp) {
    int32_t rc = gemma4_common_hparams(k, hp), n_nextn = hp->n_layer;
    if (rc) return rc;
    hp->n_kv_shared = hp->n_layer;
    if ((rc = ez_llm_key_u32(k, "embedding_length_out", 1, 65536, &hp->n_embd_out)) ||
        (rc = ez_llm_key_opt_u32(k, "nextn_predict_layers", 1, (uint32_t)hp->n_layer, &n_nextn)) ||
        (rc = ez_llm_key_opt_u32(k, "attention.shared_kv_layers", 0, (uint32_t)hp->n_layer, &hp->n_kv_shared)))
        return rc;
    if (n_nextn != hp->n_layer || hp->n_kv_shared != hp->n_layer)
        return ez_fail(ELIZA_E_FORMAT, "a gemma4-assistant reads its target's keys and values in all %d layers "
                       "(nextn_predict_layers %d, shared_kv_layers %d)", hp->n_layer, n_nextn, hp->n_kv_shared);
    if (hp->n_embd_per_layer != 0)
        return ez_fail(ELIZA_E_FORMAT, "a gemma4-assistant has no per-layer embeddings (%d)", hp->n_embd_per_layer);
    return ELIZA_OK;
}

/* masked_embd_ordering: a permutation of the token ids, I32. */
static int32_t load_token_order(ez_llm_model *m) {
    const ez_gguf_tensor *t = ez_gguf_find_tensor(m->gguf, "masked_embd_ordering");
    const int64_t nv = m->hp.n_vocab;
    int32_t *order;
    uint8_t *seen;
    if (!t) return ez_fail(ELIZA_E_FORMAT, "tensor 'masked_embd_ordering' is missing (masked_embd_centroids is there)");
    if (t->type != EZ_TYPE_I32 || t->n_elements != (uint64_t)nv || t->ne[0] != (uint64_t)nv)
        return ez_fail(ELIZA_E_FORMAT, "tensor 'masked_embd_ordering' must be %" PRId64 " I32 token ids", nv);
    order = (int32_t *)ez_llm_model_alloc(m, sizeof(int32_t) * (size_t)nv);
    seen = (uint8_t *)ez_llm_model_alloc(m, (size_t)nv);
    if (!order || !seen) return ELIZA_E_NOMEM;
    memcpy(order, t->data, sizeof(int32_t) * (size_t)nv);
    memset(seen, 0, (size_t)nv);
    for (int64_t i = 0; i < nv; i++) {
        if (order[i] < 0 || order[i] >= nv || seen[order[i]])
            return ez_fail(ELIZA_E_FORMAT, "masked_embd_ordering[%" PRId64 "] = %d: not a permutation of the %" PRId64
                           " token ids", i, order[i], nv);
        seen[order[i]] = 1;
    }
    m->token_order = order;
    return ELIZA_OK;
}

static int32_t assistant_weights(ez_llm_model *m) {
    const ez_llm_hparams *hp = &m->hp;
    int32_t rc;
    if (hp->n_swa > 0 && (rc = ez_llm_load_swa_pattern(m->gguf, hp, m->layers))) return rc;
    for (int il = 0; il < hp->n_layer; il++) {
        m->layers[il].is_swa = m->layers[il].is_swa && hp->n_swa > 0;
        if ((rc = load_layer(m, il, 0))) return rc;
    }
    if ((rc = ez_llm_get_matrix(m, "nextn.pre_projection.weight", hp->n_embd, 2 * (int64_t)hp->n_embd_out, 1,
                                &m->nextn_pre)) ||
        (rc = ez_llm_get_matrix(m, "nextn.post_projection.weight", hp->n_embd_out, hp->n_embd, 1, &m->nextn_post)) ||
        (rc = ez_llm_get_matrix(m, "masked_embd_centroids.weight", -1, hp->n_embd, 0, &m->centroids)))
        return rc;
    if (m->centroids.data) {
        ez_llm_keys k = {m->gguf, hp->arch_name, {0}};
        const int32_t n_c = (int32_t)m->centroids.n_rows;
        if (hp->n_vocab % n_c != 0)
            return ez_fail(ELIZA_E_FORMAT, "%d masked-embedding centroids do not split the %d tokens evenly", n_c,
                           hp->n_vocab);
        if ((rc = ez_llm_key_u32(&k, "masked_embd.top_k", 1, (uint32_t)n_c, &m->centroid_top_k)) ||
            (rc = load_token_order(m)))
            return rc;
    }
    return ELIZA_OK;
}

static int32_t assistant_block(ez_llm_fwd *f, int il, int32_t n, int32_t pos0) {
    (void)f, (void)il, (void)n, (void)pos0;
    return ez_fail(ELIZA_E_UNSUPPORTED, "a gemma4-assistant file is a multi-token-prediction drafter: use it as the "
                   "draft model (mtp) of its gemma4 target, not as a model of its own");
}

/* One drafter layer at position pos over the target's cache: the target's
 * rows of layer kv_layer at positions < pos (draft_mtp.c). */
int32_t ez_llm_gemma4_assistant_layer(ez_llm_fwd *f, const ez_kv_cache *target_kv, int il, int kv_layer,
                                      int32_t pos) {
    const ez_llm_layer *L = &f->m->layers[il];
    int32_t rc;
    ez_fwd_norm(f, f->h, f->x, L->attn_norm, 1);
    ez_kv_cache view = *target_kv;
    ez_kv_layer rows = target_kv->layers[kv_layer];
    /* The query sits at pos (the rope tables are pos's); it sees the
     * target's keys 0 .. pos-1, on sliding layers the last n_swa + 1 of
     * them: transformers' Gemma4Assistant masks the shared K/V with a
     * bidirectional window (|q - k| <= n_swa), flipped to look back.
     * (llama.cpp's drafter sees n_swa - 1.) */
    if (rows.n_swa > 0) rows.n_swa++;
    view.layers = &rows;
    if ((rc = gemma4_qkv(f, L, 1)) || (rc = ez_llm_gemma4_attention(f, &view, il, 0, 1, pos - 1, 0)) ||
        (rc = attn_out_and_ffn(f, L, 1)))
        return rc;
    scale_rows(f, L->out_scale, 1);
    ez_fwd_tick(f, EZ_LLM_PHASE_NORM);
    return ELIZA_OK;
}

const ez_llm_arch_def ez_llm_arch_gemma4_assistant = {"gemma4-assistant", assistant_hparams, assistant_weights,
                                                      assistant_block, NULL};
