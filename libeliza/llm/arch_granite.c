/* granite: llama's block with IBM's multipliers: the embedding times
 * embedding_scale, attention scores times attention.scale (instead of
 * 1/sqrt(head_dim)), each sublayer's output times residual_scale before its
 * residual (ez_fwd_residual), and the logits divided by logit_scale.
 * llama.cpp src/models/granite.cpp, transformers modeling_granite.py. */
#include "arch.h"

#include <float.h>

#include "core/error.h"

static int32_t granite_hparams(ez_llm_keys *k, ez_llm_hparams *hp) {
    float attn = 0.0f, embd = 0.0f, resid = 0.0f;
    int32_t rc;
    hp->rope_neox = 0;
    hp->ffn_gelu = 0;
    /* llama.cpp: a scale of 0 (or absent) leaves that step alone. */
    if ((rc = ez_gguf_need_f32(k->g, ez_llm_key(k, "logit_scale"), -FLT_MAX, FLT_MAX, &hp->logit_scale)) ||
        (rc = ez_llm_key_opt_f32(k, "attention.scale", &attn)) ||
        (rc = ez_llm_key_opt_f32(k, "embedding_scale", &embd)) ||
        (rc = ez_llm_key_opt_f32(k, "residual_scale", &resid)))
        return rc;
    if (!(hp->logit_scale > 0.0f))
        return ez_fail(ELIZA_E_FORMAT, "granite logit_scale %g is not positive", (double)hp->logit_scale);
    if (attn != 0.0f) hp->attn_scale = attn;
    if (embd != 0.0f) hp->embd_scale = embd;
    if (resid != 0.0f) hp->residual_scale = resid;
    return ELIZA_OK;
}

static int32_t granite_weights(ez_llm_model *m) {
    const ez_llm_layer_tensors want = {0, 0};
    return ez_llm_load_std_layers(m, &want);
}

const ez_llm_arch_def ez_llm_arch_granite = {"granite", granite_hparams, granite_weights, ez_llm_block_prenorm, NULL};
