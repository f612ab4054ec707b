/* qwen3: llama's block with NEOX (rotate-half) rope, no biases, and a
 * per-head RMSNorm of q and k before rope. llama.cpp src/models/qwen3.cpp,
 * transformers modeling_qwen3.py. */
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

const ez_llm_arch_def ez_llm_arch_qwen3 = {"qwen3", qwen3_hparams, qwen3_weights, ez_llm_block_prenorm};
