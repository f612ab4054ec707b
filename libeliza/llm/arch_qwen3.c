/* qwen3: qwen2 without the biases and with a per-head RMSNorm of q and k
 * before rope. llama.cpp src/models/qwen3.cpp, transformers
 * modeling_qwen3.py. */
#include "arch.h"

static int32_t qwen3_hparams(ez_llm_keys *k, ez_llm_hparams *hp) {
    (void)k;
    hp->rope_neox = 1;
    hp->ffn_gelu = 0;
    return ELIZA_OK;
}

static int32_t qwen3_weights(ez_llm_model *m) {
    const ez_llm_layer_tensors want = {1, 0};
    return ez_llm_load_std_layers(m, &want);
}

/* x: [n, n_embd], updated in place. */
static int32_t qwen3_block(ez_llm_fwd *f, int il, int32_t n, int32_t pos0) {
    const ez_llm_layer *L = &f->m->layers[il];
    int32_t rc;

    ez_fwd_norm(f, f->h, f->x, L->attn_norm, n);
    if ((rc = ez_fwd_qkv(f, L, n))) return rc;
    ez_fwd_qk_norm(f, L->q_norm, L->k_norm, n);
    ez_fwd_rope(f, L, n);
    ez_fwd_attention(f, il, n, pos0);
    if ((rc = ez_fwd_attn_out(f, L, n))) return rc;
    ez_fwd_residual(f, n);

    ez_fwd_norm(f, f->h, f->x, L->ffn_norm, n);
    if ((rc = ez_fwd_ffn(f, L, n, 0))) return rc;
    ez_fwd_residual(f, n);
    return ELIZA_OK;
}

const ez_llm_arch_def ez_llm_arch_qwen3 = {"qwen3", qwen3_hparams, qwen3_weights, qwen3_block};
