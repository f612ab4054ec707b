/* The forward pass of a loaded model over a batch of tokens, with its KV
 * cache and working buffers (one ez_llm_ctx per eliza_llm handle).
 *
 * KV cache: keys and values each in one of kv.h's types (F32, F16, Q8_0,
 * Q4_0, TBQ4_0, TBQ3_0), one pair of buffers per layer; position p lives in slot
 * p % cap. Global layers have cap = n_ctx; sliding-window layers keep only
 * what their window can still see, cap = min(n_ctx, n_swa + n_batch), which
 * is enough that a batch never overwrites a key an earlier query of the same
 * batch still needs. */
#ifndef EZ_LLM_FORWARD_H
#define EZ_LLM_FORWARD_H

#include "core/atomic.h"
#include "core/common.h"
#include "core/pool.h"
#include "model.h"

/* A flag one thread sets and another polls (the cancel request). */
typedef ez_atomic_int ez_llm_flag;
static inline int ez_llm_flag_get(ez_llm_flag *f) { return ez_atomic_int_load(f); }
static inline void ez_llm_flag_set(ez_llm_flag *f, int v) { ez_atomic_int_store(f, v); }

/* Where the time went, cumulative since the context was made (ns). */
typedef enum {
    EZ_LLM_PHASE_EMBED = 0,
    EZ_LLM_PHASE_NORM,       /* RMSNorms, biases, q/k norms, rope, residuals */
    EZ_LLM_PHASE_QKV,        /* q, k, v projections */
    EZ_LLM_PHASE_ATTENTION,  /* scores, softmax, weighted values, cache writes */
    EZ_LLM_PHASE_ATTN_OUT,   /* output projection of attention */
    EZ_LLM_PHASE_FFN_UP,     /* gate and up projections */
    EZ_LLM_PHASE_FFN_ACT,    /* GELU / SiLU gate */
    EZ_LLM_PHASE_FFN_DOWN,
    EZ_LLM_PHASE_OUTPUT,     /* final norm, vocabulary projection, softcap */
    EZ_LLM_PHASE_COUNT
} ez_llm_phase;

EZ_INTERNAL const char *ez_llm_phase_name(int phase);

typedef struct {
    uint64_t ns[EZ_LLM_PHASE_COUNT];
    uint64_t tokens;         /* tokens evaluated */
    uint64_t batches;        /* eval_batch calls */
} ez_llm_profile;

typedef struct ez_llm_ctx ez_llm_ctx;

/* n_ctx >= 1 positions, n_batch >= 1 tokens per pass; kv_type_k,
 * kv_type_v: the ez_kv_type of the cached keys and values (each written
 * once, when its token is evaluated). ELIZA_E_INVALID_ARG for an unknown
 * type or a block type the head size does not divide into, ELIZA_E_NOMEM
 * if the cache or buffers do not fit. */
EZ_INTERNAL int32_t ez_llm_ctx_create(const ez_llm_model *m, ez_pool *pool, int32_t n_ctx, int32_t n_batch,
                                      int kv_type_k, int kv_type_v, ez_llm_ctx **out);
EZ_INTERNAL void ez_llm_ctx_free(ez_llm_ctx *c);
EZ_INTERNAL int32_t ez_llm_ctx_n_ctx(const ez_llm_ctx *c);
/* The ez_kv_type of the keys (values = 0) or of the values. */
EZ_INTERNAL int ez_llm_ctx_kv_type(const ez_llm_ctx *c, int values);
/* The KV cache's size over all layers. */
EZ_INTERNAL size_t ez_llm_ctx_kv_bytes(const ez_llm_ctx *c);
/* The bytes one position's keys and values take over all layers. */
EZ_INTERNAL size_t ez_llm_ctx_kv_bytes_per_token(const ez_llm_ctx *c);
EZ_INTERNAL const ez_llm_profile *ez_llm_ctx_profile(const ez_llm_ctx *c);

/* Evaluates tokens[0..n) at positions pos0 .. pos0+n-1 (pos0 + n <= n_ctx),
 * after the cached positions 0 .. pos0-1, and caches their keys and values.
 * logits: NULL for none; else the last token's [n_vocab] logits, or with
 * all_logits every token's, [n, n_vocab]. cancel (may be NULL) is polled
 * between layers: ELIZA_E_CANCELLED, and the cache past pos0 is undefined.
 * A token id outside the embedding table is ELIZA_E_INVALID_ARG. */
EZ_INTERNAL int32_t ez_llm_eval(ez_llm_ctx *c, const int32_t *tokens, int32_t n, int32_t pos0, float *logits,
                                int all_logits, ez_llm_flag *cancel);

#endif /* EZ_LLM_FORWARD_H */
