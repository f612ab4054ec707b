/* llama (and the many models that reuse its layout: Mistral, SmolLM, ...):
 * pre-norm blocks, normal (GPT-J pair) rope, since llama.cpp's converter
 * permutes the q/k rows to match; optional biases; SwiGLU. llama.cpp
 * src/models/llama.cpp, transformers modeling_llama.py. */
#include "arch.h"

static int32_t llama_hparams(ez_llm_keys *k, ez_llm_hparams *hp) {
    (void)k;
    hp->rope_neox = 0;
    hp->ffn_gelu = 0;
    return ELIZA_OK;
}

static int32_t llama_weights(ez_llm_model *m) {
    const ez_llm_layer_tensors want = {0, 0};
    return ez_llm_load_std_layers(m, &want);
}

int32_t ez_llm_block_prenorm(ez_llm_fwd *f, int il, int32_t n, int32_t pos0) {
    const ez_llm_layer *L = &f->m->layers[il];
    int32_t rc;

    ez_fwd_norm(f, f->h, f->x, L->attn_norm, n);
    if ((rc = ez_fwd_qkv(f, L, n))) return rc; /* with the biases the file has */
    ez_fwd_qk_norm(f, L->q_norm, L->k_norm, n); /* none in llama's files */
    ez_fwd_rope(f, L, n);
    ez_fwd_attention(f, il, n, pos0);
    if ((rc = ez_fwd_attn_out(f, L, n))) return rc;
    ez_fwd_residual(f, n);

    ez_fwd_norm(f, f->h, f->x, L->ffn_norm, n);
    if ((rc = ez_fwd_ffn(f, L, n, 0))) return rc;
    ez_fwd_residual(f, n);
    return ELIZA_OK;
}

const ez_llm_arch_def ez_llm_arch_llama = {"llama", llama_hparams, llama_weights, ez_llm_block_prenorm};
