/* gemma2: gemma3's block (ez_llm_block_gemma) without the q/k norms: a
 * norm after each sublayer (before its residual), GeGLU (tanh), the
 * embedding scaled by sqrt(n_embd), attention logits soft-capped
 * (c tanh(s / c)) after the scale, a final logit softcap, and sliding-window
 * attention on every other layer (the even ones), all with the one rope
 * base. llama.cpp src/models/gemma2.cpp, transformers modeling_gemma2.py
 * (Gemma's "+1" norm offset is folded into the GGUF weights by the
 * converter). */
#include "arch.h"

#include <math.h>

#include "core/error.h"

static int32_t gemma2_hparams(ez_llm_keys *k, ez_llm_hparams *hp) {
    int32_t rc;
    hp->rope_neox = 1;
    hp->ffn_gelu = 1;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->n_swa = 4096; /* llama.cpp's default for Gemma 2 */
    /* Local layers use the global base unless the file names one. */
    if (!ez_gguf_find_kv(k->g, ez_llm_key(k, "rope.freq_base_swa"))) hp->rope_base_swa = hp->rope_base;
    /* llama.cpp (after gemma_pytorch): 27B (46 layers) scales by n_embd / n_head. */
    if (hp->n_layer == 46) hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
    if ((rc = ez_llm_key_opt_u32(k, "attention.sliding_window", 0, INT32_MAX, &hp->n_swa)) ||
        (rc = ez_llm_key_opt_f32(k, "attn_logit_softcapping", &hp->attn_softcap)) ||
        (rc = ez_llm_key_opt_f32(k, "final_logit_softcapping", &hp->final_softcap)))
        return rc;
    if (hp->attn_softcap < 0.0f || hp->final_softcap < 0.0f)
        return ez_fail(ELIZA_E_FORMAT, "gemma2 softcapping %g / %g is negative", (double)hp->attn_softcap,
                       (double)hp->final_softcap);
    return ELIZA_OK;
}

static int32_t gemma2_weights(ez_llm_model *m) {
    const ez_llm_layer_tensors want = {0, 1};
    /* llama.cpp's load_swa_pattern(2): layer il is local when il % 2 < 1. */
    for (int il = 0; il < m->hp.n_layer; il++) m->layers[il].is_swa = il % 2 == 0;
    return ez_llm_load_std_layers(m, &want);
}

const ez_llm_arch_def ez_llm_arch_gemma2 = {"gemma2", gemma2_hparams, gemma2_weights, ez_llm_block_gemma, NULL};
