/* The forward pass of a decoder over a batch of tokens: the working rows of
 * one batch, the shared steps every architecture's block composes
 * (llm/arch_<name>.c), and the pass that runs them over a KV cache.
 *
 *   x = embed(tokens) * embd_scale
 *   for each layer: arch->block(f, il)       x updated in place
 *   logits = rms_norm(x) Wout (+ bias, softcap)
 *
 * Every step works on a batch of n tokens (rows); the matrix products take
 * all rows at once so each weight is read once per batch. */
#ifndef EZ_LLM_FORWARD_H
#define EZ_LLM_FORWARD_H

#include "backend.h"
#include "core/atomic.h"
#include "core/common.h"
#include "core/pool.h"
#include "kv.h"
#include "model.h"
#include "ops.h"

/* A flag one thread sets and another polls (the cancel request). */
typedef ez_atomic_int ez_llm_flag;
static inline int ez_llm_flag_get(ez_llm_flag *f) { return ez_atomic_int_load(f); }
static inline void ez_llm_flag_set(ez_llm_flag *f, int v) { ez_atomic_int_store(f, v); }

/* Where the time went, cumulative since the session was made (ns). */
typedef enum {
    EZ_LLM_PHASE_EMBED = 0,
    EZ_LLM_PHASE_NORM,       /* RMSNorms, biases, q/k norms, rope, residuals */
    EZ_LLM_PHASE_QKV,        /* q, k, v projections (falcon-h1: with the Mamba2 in_proj, one pass) */
    EZ_LLM_PHASE_ATTENTION,  /* scores, softmax, weighted values, cache writes */
    EZ_LLM_PHASE_ATTN_OUT,   /* output projection of attention */
    EZ_LLM_PHASE_FFN_UP,     /* gate and up projections */
    EZ_LLM_PHASE_FFN_ACT,    /* GELU / SiLU gate */
    EZ_LLM_PHASE_FFN_DOWN,
    EZ_LLM_PHASE_OUTPUT,     /* final norm, vocabulary projection, softcap */
    EZ_LLM_PHASE_SSM_CONV,   /* its depthwise conv1d + SiLU */
    EZ_LLM_PHASE_SSM_SCAN,   /* the SSM scan (prompt) or step (decode), gate, grouped norm */
    EZ_LLM_PHASE_SSM_OUT,    /* out_proj */
    EZ_LLM_PHASE_COUNT
} ez_llm_phase;

EZ_INTERNAL const char *ez_llm_phase_name(int phase);

typedef struct {
    uint64_t ns[EZ_LLM_PHASE_COUNT];
    uint64_t tokens;         /* tokens evaluated */
    uint64_t batches;        /* forward passes */
} ez_llm_profile;

/* The working state of one batch of up to n_batch tokens. */
typedef struct ez_llm_fwd {
    const ez_llm_model *m;
    ez_llm_backend *be;     /* every step runs through it */
    int32_t n_batch;
    ez_kv_cache *kv;

    float *x;               /* [n_batch, n_embd] residual stream */
    float *h;               /* [n_batch, n_embd] normed input of a sublayer */
    float *q;               /* [n_batch, n_head * head_dim] */
    float *k;               /* [n_batch, n_head_kv * head_dim] */
    float *v;               /* [n_batch, n_head_kv * head_dim_v] */
    float *att;             /* [n_batch, n_head * head_dim_v] attention output */
    float *o;               /* [n_batch, n_embd] sublayer output */
    float *gate;            /* [n_batch, n_ff] */
    float *up;              /* [n_batch, n_ff] */
    float *rope_cs;         /* [2][n_batch][n_rot] cos/sin pairs: global layers' rows n_rot apart, then
                             * sliding layers' rows n_rot_swa apart (n_rot without it) */
    /* Mamba2 mixers (NULL without): C = d_inner + 2 G N */
    float *ssm_zxbcdt;      /* [n_batch, d_inner + C + H] in_proj output */
    float *ssm_xbc;         /* [n_batch, C] conv output */
    float *ssm_y;           /* [n_batch, d_inner] scan output */
    float *ssm_o;           /* [n_batch, n_embd] mixer output */
    float *ple;             /* [n_batch, n_layer * n_embd_per_layer] per-layer inputs (gemma4), or NULL */
    float *ple_act;         /* [n_batch, n_embd_per_layer], or NULL */
    const float *rope_factors; /* the model's frequency divisors for this context (phi3: long or short), or NULL */

    ez_llm_profile prof;
    uint64_t t;             /* when the running phase began */
} ez_llm_fwd;

/* Buffers for batches of up to n_batch tokens over the cache kv, run by
 * the backend be (both must outlive the result). ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_llm_fwd_create(const ez_llm_model *m, ez_llm_backend *be, ez_kv_cache *kv, int32_t n_batch,
                                      ez_llm_fwd **out);
EZ_INTERNAL void ez_llm_fwd_free(ez_llm_fwd *f);

/* Evaluates tokens[0..n) (n <= n_batch, valid ids) at the cache's next
 * positions and holds them there. logits: NULL for none; else the last
 * token's [n_vocab], or with all_logits every token's [n, n_vocab].
 * hidden: NULL, or [n, n_embd] states after the final norm. cancel (may be
 * NULL) is polled between layers: ELIZA_E_CANCELLED, nothing held. */
EZ_INTERNAL int32_t ez_llm_forward(ez_llm_fwd *f, const int32_t *tokens, int32_t n, float *logits, int all_logits,
                                   float *hidden, ez_llm_flag *cancel);

/* ---- the steps a block composes (all over rows [0, n) of the batch) ----------------- */

/* Ends the running phase: its time goes to `phase`. */
EZ_INTERNAL void ez_fwd_tick(ez_llm_fwd *f, int phase);
/* y[r] = rms_norm(x[r]) * w for rows of n_embd; y may alias x. */
EZ_INTERNAL void ez_fwd_norm(ez_llm_fwd *f, float *y, const float *x, const float *w, int32_t n);
/* q, k, v = h Wq, h Wk, h Wv (+ biases). */
EZ_INTERNAL int32_t ez_fwd_qkv(ez_llm_fwd *f, const ez_llm_layer *L, int32_t n);
/* Per-head RMSNorm of q (w_q) and k (w_k), either may be NULL (qwen3, gemma3). */
EZ_INTERNAL void ez_fwd_qk_norm(ez_llm_fwd *f, const float *w_q, const float *w_k, int32_t n);
/* Rotary embedding of q and k with the layer's table (global or sliding);
 * nothing on a layer without rope. */
EZ_INTERNAL void ez_fwd_rope(ez_llm_fwd *f, const ez_llm_layer *L, int32_t n);
/* att = attention of q over layer il's cache, after storing k and v there
 * (unless the layer reads another's rows). */
EZ_INTERNAL void ez_fwd_attention(ez_llm_fwd *f, int il, int32_t n, int32_t pos0);
/* o = att Wo (+ bias). */
EZ_INTERNAL int32_t ez_fwd_attn_out(ez_llm_fwd *f, const ez_llm_layer *L, int32_t n);
/* o = (act(h Wgate + b) * (h Wup + b)) Wdown (+ b); gelu: GELU-tanh, else SiLU. */
EZ_INTERNAL int32_t ez_fwd_ffn(ez_llm_fwd *f, const ez_llm_layer *L, int32_t n, int gelu);
/* RMSNorm of each token's whole q row (w_q [n_head * head_dim]) and k row
 * (w_k [n_head_kv * head_dim]) (olmo2). */
EZ_INTERNAL void ez_fwd_qk_norm_rows(ez_llm_fwd *f, const float *w_q, const float *w_k, int32_t n);
/* The rope table of a global or sliding layer: cos/sin rows for the batch,
 * *n_rot dims each. */
EZ_INTERNAL const float *ez_fwd_rope_table(const ez_llm_fwd *f, int is_swa, int *n_rot);
/* x += o (granite: x += o * residual_scale). */
EZ_INTERNAL void ez_fwd_residual(ez_llm_fwd *f, int32_t n);

#endif /* EZ_LLM_FORWARD_H */
