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

const ez_llm_arch_def ez_llm_arch_qwen2 = {"qwen2", qwen2_hparams, qwen2_weights, ez_llm_block_prenorm};
