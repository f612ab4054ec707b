/* gemma3: qwen3's q/k norms plus a norm after each sublayer (before its
 * residual), GeGLU (tanh), the embedding scaled by sqrt(n_embd), a final
 * logit softcap, and sliding-window attention on the local layers, which
 * use their own rope base. llama.cpp src/models/gemma3.cpp, transformers
 * modeling_gemma3.py (Gemma's "+1" norm offset is folded into the GGUF
 * weights by the converter). */
#include "arch.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "core/error.h"

static int32_t gemma3_hparams(ez_llm_keys *k, ez_llm_hparams *hp) {
    int32_t rc;
    hp->rope_neox = 1;
    hp->ffn_gelu = 1;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    /* llama.cpp makes one exception to 1/sqrt(head_dim), Gemma 3 27B (62
     * layers), whose query_pre_attn_scalar is n_embd / n_head (Gemma's
     * query_pre_attn_scalar is not stored in GGUF). */
    if (hp->n_layer == 62) hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
    if ((rc = ez_llm_key_opt_u32(k, "attention.sliding_window", 0, INT32_MAX, &hp->n_swa)) ||
        (rc = ez_llm_key_opt_f32(k, "final_logit_softcapping", &hp->final_softcap)))
        return rc;
    if (hp->final_softcap < 0.0f)
        return ez_fail(ELIZA_E_FORMAT, "final_logit_softcapping %g is negative", (double)hp->final_softcap);
    return ELIZA_OK;
}

/* Which layers attend through the sliding window. llama.cpp (gemma3,
 * load_swa_pattern with its default 6): `attention.sliding_window_pattern`
 * is either one bool per layer or a period n, where layer il is local when
 * il % n < n - 1 (five local layers, then a global one); no key means 6. */
int32_t ez_llm_load_swa_pattern(const ez_gguf *g, const ez_llm_hparams *hp, ez_llm_layer *layers) {
    char key[160];
    const ez_gguf_kv *kv;
    int32_t il;
    uint32_t period = 6;
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", hp->arch_name);
    kv = ez_gguf_find_kv(g, key);
    if (kv && kv->type == EZ_GGUF_ARRAY) {
        if (kv->arr_len != (uint64_t)hp->n_layer)
            return ez_fail(ELIZA_E_FORMAT, "'%s' has %" PRIu64 " entries for %d layers", key, kv->arr_len,
                           hp->n_layer);
        for (il = 0; il < hp->n_layer; il++) {
            int64_t v;
            int32_t rc = ez_gguf_arr_int(kv, (uint64_t)il, &v);
            if (rc) return rc;
            layers[il].is_swa = v != 0;
        }
        return ELIZA_OK;
    }
    if (kv) {
        int32_t rc = ez_gguf_get_u32(g, key, &period);
        if (rc) return rc;
    }
    for (il = 0; il < hp->n_layer; il++)
        layers[il].is_swa = period == 0 || (uint32_t)il % period < period - 1;
    return ELIZA_OK;
}

static int32_t gemma3_weights(ez_llm_model *m) {
    const ez_llm_layer_tensors want = {1, 1};
    int32_t rc;
    if (m->hp.n_swa > 0 && (rc = ez_llm_load_swa_pattern(m->gguf, &m->hp, m->layers))) return rc;
    return ez_llm_load_std_layers(m, &want);
}

int32_t ez_llm_block_gemma(ez_llm_fwd *f, int il, int32_t n, int32_t pos0) {
    const ez_llm_layer *L = &f->m->layers[il];
    int32_t rc;

    ez_fwd_norm(f, f->h, f->x, L->attn_norm, n);
    if ((rc = ez_fwd_qkv(f, L, n))) return rc;
    ez_fwd_qk_norm(f, L->q_norm, L->k_norm, n);
    ez_fwd_rope(f, L, n); /* the local base on sliding layers */
    ez_fwd_attention(f, il, n, pos0);
    if ((rc = ez_fwd_attn_out(f, L, n))) return rc;
    ez_fwd_norm(f, f->o, f->o, L->post_attn_norm, n);
    ez_fwd_residual(f, n);

    ez_fwd_norm(f, f->h, f->x, L->ffn_norm, n);
    if ((rc = ez_fwd_ffn(f, L, n, 1))) return rc;
    ez_fwd_norm(f, f->o, f->o, L->post_ffw_norm, n);
    ez_fwd_residual(f, n);
    return ELIZA_OK;
}

const ez_llm_arch_def ez_llm_arch_gemma3 = {"gemma3", gemma3_hparams, gemma3_weights, ez_llm_block_gemma, NULL};
