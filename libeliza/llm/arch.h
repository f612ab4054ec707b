/* The architectures: one file each (llm/arch_<name>.c), one row each in
 * model.c's table. An architecture owns what sets it apart from the shared
 * decoder: its metadata quirks, which tensors its layers hold, and its block
 * function, composed of forward.h's steps in the order of its reference
 * modeling file (llama.cpp's src/models/<arch>.cpp, transformers'
 * modeling_<arch>.py). docs/llm.md says how to add one. */
#ifndef EZ_LLM_ARCH_H
#define EZ_LLM_ARCH_H

#include "forward.h"
#include "model.h"

struct ez_llm_arch_def {
    const char *name;          /* general.architecture */
    /* After the shared keys (model.c: sizes, heads, epsilon, rope base and
     * scaling, attention scale 1/sqrt(head_dim)): this architecture's
     * values and keys. ELIZA_E_FORMAT for bad metadata. */
    int32_t (*hparams)(ez_llm_keys *k, ez_llm_hparams *hp);
    /* Every layer's tensors (m->layers is allocated and zeroed; the shared
     * tensors are loaded). */
    int32_t (*weights)(ez_llm_model *m);
    /* One decoder block over the n tokens of the batch at positions pos0 ..:
     * f->x updated in place. */
    int32_t (*block)(ez_llm_fwd *f, int il, int32_t n, int32_t pos0);
    /* Optional (NULL: none): before the first layer, with f->x holding the
     * batch's scaled embeddings of tokens[0..n) (gemma4: the per-layer
     * inputs, into f->ple). */
    int32_t (*prepare)(ez_llm_fwd *f, const int32_t *tokens, int32_t n);
};

EZ_INTERNAL extern const ez_llm_arch_def ez_llm_arch_llama;
EZ_INTERNAL extern const ez_llm_arch_def ez_llm_arch_qwen2;
EZ_INTERNAL extern const ez_llm_arch_def ez_llm_arch_qwen3;
EZ_INTERNAL extern const ez_llm_arch_def ez_llm_arch_gemma3;
EZ_INTERNAL extern const ez_llm_arch_def ez_llm_arch_falcon_h1;
EZ_INTERNAL extern const ez_llm_arch_def ez_llm_arch_gemma4;
EZ_INTERNAL extern const ez_llm_arch_def ez_llm_arch_gemma4_assistant;
EZ_INTERNAL extern const ez_llm_arch_def ez_llm_arch_phi3;
EZ_INTERNAL extern const ez_llm_arch_def ez_llm_arch_gemma2;
EZ_INTERNAL extern const ez_llm_arch_def ez_llm_arch_granite;
EZ_INTERNAL extern const ez_llm_arch_def ez_llm_arch_smollm3;
EZ_INTERNAL extern const ez_llm_arch_def ez_llm_arch_olmo2;

/* ---- shared pieces of the architectures ---------------------------------------------- */

/* Which optional tensors a standard pre-norm layer must have. */
typedef struct {
    int qk_norm;               /* attn_q_norm, attn_k_norm (per head) */
    int post_norms;            /* post_attention_norm, post_ffw_norm (gemma) */
} ez_llm_layer_tensors;

/* The tensors of a standard pre-norm attention + gated-FFN layer (q/k/v/o
 * with optional biases, gate/up/down with optional biases, the norms). */
EZ_INTERNAL int32_t ez_llm_load_std_layer(ez_llm_model *m, int il, const ez_llm_layer_tensors *want);
/* Every layer with ez_llm_load_std_layer. */
EZ_INTERNAL int32_t ez_llm_load_std_layers(ez_llm_model *m, const ez_llm_layer_tensors *want);

/* llama's block, which qwen2 and qwen3 share (arch_llama.c):
 *   h = rms_norm(x); q, k, v = h W (+ b); q, k = rms_norm per head (where
 *   the layer has q/k norms); rope; x += attention Wo (+ b)
 *   h = rms_norm(x); x += (silu(h Wgate) * h Wup) Wdown (+ b) */
EZ_INTERNAL int32_t ez_llm_block_prenorm(ez_llm_fwd *f, int il, int32_t n, int32_t pos0);

/* Which layers are sliding-window ones (layers[il].is_swa), from
 * `<arch>.attention.sliding_window_pattern`: one bool per layer, or a
 * period n (layer il is local when il % n < n - 1); no key means 6
 * (arch_gemma3.c, llama.cpp's convention). */
EZ_INTERNAL int32_t ez_llm_load_swa_pattern(const ez_gguf *g, const ez_llm_hparams *hp, ez_llm_layer *layers);
/* Gemma 4's attention of layer il's queries f->q (its head size) over
 * layer kv_layer of the cache kv into f->att, after storing f->k and f->v
 * there at positions pos0 .. pos0 + n - 1 when `store` (arch_gemma4.c; the
 * MTP drafter reads its target's cache with it). */
EZ_INTERNAL int32_t ez_llm_gemma4_attention(ez_llm_fwd *f, const ez_kv_cache *kv, int il, int kv_layer, int32_t n,
                                            int32_t pos0, int store);
/* One gemma4-assistant layer of the drafter's single row f->x at position
 * pos, attending to the target cache's layer kv_layer at positions < pos
 * (f->rope_cs must hold pos's angles). */
EZ_INTERNAL int32_t ez_llm_gemma4_assistant_layer(ez_llm_fwd *f, const ez_kv_cache *target_kv, int il, int kv_layer,
                                                  int32_t pos);
/* gemma3's block, which gemma2 shares (arch_gemma3.c): the pre-norm block
 * with a norm after each sublayer before its residual, q/k norms where the
 * layer has them (gemma3), GELU-tanh; x: [n, n_embd], updated in place. */
EZ_INTERNAL int32_t ez_llm_block_gemma(ez_llm_fwd *f, int il, int32_t n, int32_t pos0);

#endif /* EZ_LLM_ARCH_H */
