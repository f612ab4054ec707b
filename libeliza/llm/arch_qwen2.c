/* qwen2: llama's block with NEOX (rotate-half) rope and q/k/v biases.
 * llama.cpp src/models/qwen2.cpp, transformers modeling_qwen2.py. */
#include "arch.h"

static int32_t qwen2_hparams(ez_llm_keys *k, ez_llm_hparams *hp) {
    (void)k;
    hp->rope_neox = 1;
    hp->ffn_gelu = 0;
    return ELIZA_OK;
}

static int32_t qwen2_weights(ez_llm_model *m) {
    const ez_llm_layer_tensors want = {0, 0};
    return ez_llm_load_std_layers(m, &want);
}

/* x: [n, n_embd], updated in place. */
static int32_t qwen2_block(ez_llm_fwd *f, int il, int32_t n, int32_t pos0) {
    const ez_llm_layer *L = &f->m->layers[il];
    int32_t rc;

    ez_fwd_norm(f, f->h, f->x, L->attn_norm, n);
    if ((rc = ez_fwd_qkv(f, L, n))) return rc; /* with the q/k/v biases */
    ez_fwd_rope(f, L, n);
    ez_fwd_attention(f, il, n, pos0);
    if ((rc = ez_fwd_attn_out(f, L, n))) return rc;
    ez_fwd_residual(f, n);

    ez_fwd_norm(f, f->h, f->x, L->ffn_norm, n);
    if ((rc = ez_fwd_ffn(f, L, n, 0))) return rc;
    ez_fwd_residual(f, n);
    return ELIZA_OK;
}

const ez_llm_arch_def ez_llm_arch_qwen2 = {"qwen2", qwen2_hparams, qwen2_weights, qwen2_block};
