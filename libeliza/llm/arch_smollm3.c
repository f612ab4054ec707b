/* smollm3: llama's block, but every 4th layer (il % 4 == 3) attends without
 * rope ("NoPE": ez_fwd_rope skips layers marked no_rope). The GGUF carries
 * no key for it: llama.cpp hard-codes the step (src/models/smollm3.cpp,
 * n_no_rope_layer_step = 4), as transformers' no_rope_layer_interval
 * default does (modeling_smollm3.py). */
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
    for (int il = 0; il < m->hp.n_layer; il++) m->layers[il].no_rope = (il + 1) % NO_ROPE_STEP == 0;
    return ez_llm_load_std_layers(m, &want);
}

const ez_llm_arch_def ez_llm_arch_smollm3 = {"smollm3", smollm3_hparams, smollm3_weights, ez_llm_block_prenorm, NULL};
