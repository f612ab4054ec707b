/* The backend seam: the per-step operations the forward pass (forward.c)
 * runs, as a table an implementation fills. The CPU backend
 * (backend_cpu.c) is today's kernels: ops.h's vector ops and grouped
 * matrix products, attention.c over the KV cache, on the session's thread
 * pool. A GPU backend (DESIGN.md, "GPU backend") is meant to plug in here
 * with its own table; today the Vulkan decode step (gpu_step.c) records
 * its own copy of the block beside this seam, because these calls take
 * host arrays and per-call positions and cannot be recorded and replayed
 * (docs/llm.md, "The backend seam", says what the seam lacks).
 *
 * Buffers. Weights are ez_llm_matrix (stored type, shape, the mapped rows),
 * the small vectors (norms, biases) F32 arrays of the model: a device
 * backend uploads them once, keyed by their address. Activations are the
 * batch buffers of ez_llm_fwd, host float arrays [rows, cols] in this CPU
 * form; the steps name them whole (a batch of rows), never element by
 * element, so a device backend can hold them on the device. */
#ifndef EZ_LLM_BACKEND_H
#define EZ_LLM_BACKEND_H

#include "core/common.h"
#include "core/pool.h"
#include "kv.h"
#include "model.h"
#include "ops.h"
#include "ssm.h"

typedef struct ez_llm_backend ez_llm_backend;

typedef struct {
    const char *name;
    void (*free)(ez_llm_backend *be);
    /* x [n, n_embd] = embedding rows of tokens[0..n) * scale */
    void (*embed)(ez_llm_backend *be, const ez_llm_matrix *e, const int32_t *tokens, int32_t n, float scale, float *x);
    /* every product of the group: mm[i].y [M, rows of mm[i].w] = x [M, K] W^T
     * (quantizing x once per activation format). ELIZA_E_NOMEM. */
    int32_t (*matmul)(ez_llm_backend *be, const float *x, int64_t M, const ez_llm_mm *mm, int n_mm);
    /* y[r] = x[r] / rms(x[r]) * w for n_rows rows of n; y may alias x; w
     * NULL: no scale (Gemma 4's v_norm) */
    void (*rms_norm)(ez_llm_backend *be, float *y, const float *x, const float *w, int64_t n_rows, int64_t n,
                     float eps);
    /* y[r] += b for n_rows rows of n */
    void (*add_bias)(ez_llm_backend *be, float *y, const float *b, int64_t n_rows, int64_t n);
    /* y += x, n values */
    void (*add)(ez_llm_backend *be, float *y, const float *x, int64_t n);
    /* rotary embedding of n_rows vectors of n_heads heads; row i by the
     * angles cs + i * n_rot (ez_rope's layout) */
    void (*rope)(ez_llm_backend *be, float *x, int64_t n_rows, int n_heads, int head_dim, int n_rot, const float *cs,
                 int neox);
    /* g = act(g) * u for n_rows rows of n, u's rows ld_u apart; gelu:
     * GELU-tanh, else SiLU */
    void (*glu)(ez_llm_backend *be, float *g, const float *u, int64_t ld_u, int64_t n_rows, int64_t n, int gelu);
    /* Attention of layer il for the n tokens at pos0 ..: stores their keys k
     * and values v in the cache (unless the layer reads another layer's
     * rows, or k is NULL: a drafter reading its target's cache), then out = softmax(q K^T * scale) V over the rows each token
     * sees. q, k, v are clobbered. */
    void (*attention)(ez_llm_backend *be, ez_kv_cache *kv, int il, float *q, float *k, float *v, float *out, int32_t n,
                      int32_t pos0);
    /* x = cap * tanh(x / cap), n values */
    void (*softcap)(ez_llm_backend *be, float *x, int64_t n, float cap);
    /* x *= s, n values */
    void (*scale)(ez_llm_backend *be, float *x, int64_t n, float s);
    /* y += x * s, n values (the product rounded, then the sum) */
    void (*add_scaled)(ez_llm_backend *be, float *y, const float *x, int64_t n, float s);
    /* Mamba2's depthwise causal conv1d + SiLU (ssm.h's conventions) of n
     * frames x + t * ld_x of n_ch channels into y [n, n_ch], after the
     * d_conv - 1 frames of state [d_conv - 1][n_ch], which then holds the
     * last of them. w [n_ch][d_conv]; b [n_ch] or NULL. */
    void (*ssm_conv)(ez_llm_backend *be, float *state, const float *x, int64_t ld_x, const float *w, const float *b,
                     float *y, int32_t n, int n_ch, int d_conv);
    /* The selective-state recurrence (ssm.h) of every head over n tokens,
     * advancing state [H][P][N]: token t's xbc row (x [H P], B and C [G N]
     * each) at xbc + t * (H P + 2 G N), its dt [H] at dt + t * ld_dt,
     * its output y + t * H P. dt_bias, A, D: [H]. */
    void (*ssm_scan)(ez_llm_backend *be, const ez_ssm_shape *s, float *state, const float *xbc, const float *dt,
                     int64_t ld_dt, const float *dt_bias, const float *A, const float *D, float *y, int32_t n);
    /* Mamba2's gate and grouped norm: y[r] = norm(silu(z[r]) * y[r]) for
     * n_rows rows of n values, z's rows ld_z apart (z is clobbered); norm:
     * RMSNorm of each of n_group groups of n / n_group times w, or nothing
     * when w is NULL. */
    void (*ssm_gate_norm)(ez_llm_backend *be, float *y, float *z, int64_t ld_z, const float *w, int64_t n_rows,
                          int64_t n, int n_group, float eps);
} ez_llm_backend_ops;

struct ez_llm_backend {
    const ez_llm_backend_ops *ops;
};

/* The CPU backend for models of hp over caches like kv (its attention
 * workspace fits kv's largest layer), on pool (which must outlive it).
 * ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_llm_backend_cpu_create(ez_pool *pool, const ez_llm_hparams *hp, const ez_kv_cache *kv,
                                              ez_llm_backend **out);

#endif /* EZ_LLM_BACKEND_H */
