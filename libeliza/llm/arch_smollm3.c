/* smollm3: llama's block, but every 4th layer (il % 4 == 3) attends without
 * rope ("NoPE"). The GGUF carries no key for it: llama.cpp hard-codes the
 * step (src/models/smollm3.cpp, n_no_rope_layer_step = 4), as transformers'
 * no_rope_layer_interval default does (modeling_smollm3.py). */
#include "arch.h"

#define NO_ROPE_STEP 4

static int32_t smollm3_hparams(ez_llm_keys *k, ez_llm_hparams *hp) {
    (void)k;
    hp->rope_neox = 0;
    hp->ffn_gelu = 0;
    return ELIZA_OK;
}

static int32_t smollm3_weights(ez_llm_model *m) {
    const ez_llm_layer_tensors want = {0, 0};
    return ez_llm_load_std_layers(m, &want);
}

/* x: [n, n_embd], updated in place. */
static int32_t smollm3_block(ez_llm_fwd *f, int il, int32_t n, int32_t pos0) {
    const ez_llm_layer *L = &f->m->layers[il];
    int32_t rc;

    ez_fwd_norm(f, f->h, f->x, L->attn_norm, n);
    if ((rc = ez_fwd_qkv(f, L, n))) return rc;
    if ((il + 1) % NO_ROPE_STEP != 0) ez_fwd_rope(f, L, n);
    ez_fwd_attention(f, il, n, pos0);
    if ((rc = ez_fwd_attn_out(f, L, n))) return rc;
    ez_fwd_residual(f, n);

    ez_fwd_norm(f, f->h, f->x, L->ffn_norm, n);
    if ((rc = ez_fwd_ffn(f, L, n, 0))) return rc;
    ez_fwd_residual(f, n);
    return ELIZA_OK;
}

const ez_llm_arch_def ez_llm_arch_smollm3 = {"smollm3", smollm3_hparams, smollm3_weights, smollm3_block};
