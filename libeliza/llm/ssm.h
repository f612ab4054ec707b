/* Kernels of the Mamba2 mixer (Falcon-H1's SSM half): the depthwise causal
 * conv1d over xBC, the selective-state recurrence of one token, and the
 * chunked (SSD) scan that computes the same recurrence for a prompt as
 * matrix products.
 *
 * Conventions, as transformers' FalconH1Mixer and llama.cpp's ggml_ssm_conv
 * / ggml_ssm_scan compute them:
 *   - conv: cross-correlation, not flipped. With the window w[c * K + k]
 *     (GGUF ssm_conv1d, ne [K, C]), output t of channel c is
 *       silu(b[c] + sum_k w[c * K + k] * frame(t - K + 1 + k)[c]):
 *     w[.., 0] meets the oldest frame, w[.., K-1] the newest.
 *   - conv state: the last K-1 input frames, [K-1][C], row 0 the oldest.
 *   - SSM state: [H][P][N] (head, head_dim, d_state; d_state innermost).
 *     Head h reads group g = h / (H / G) of B and C.
 *   - dt_h = softplus(dt[h] + dt_bias[h]) (no clamp: both GGUF readers run
 *     with time_step_limit (0, inf)); dA = exp(dt_h * A[h]), A = -exp(A_log);
 *       s[h][p][n] = s[h][p][n] * dA + dt_h * x[h * P + p] * B[g * N + n]
 *       y[h * P + p] = sum_n s[h][p][n] * C[g * N + n] + D[h] * x[h * P + p]
 *     (the gate and the grouped norm are the arch's).
 *
 * The table holds the scalar reference (ssm.c), AVX2+FMA (ssm_avx2.c) and
 * NEON (ssm_neon.c), chosen once from ez_simd_level_active(), so
 * ELIZA_FORCE_SCALAR=1 selects the reference; tests/c/test_llm_ssm.c holds
 * them to each other and the chunked scan to the token-by-token recurrence. */
#ifndef EZ_LLM_SSM_H
#define EZ_LLM_SSM_H

#include <math.h>

#include "core/common.h"
#include "ops.h"

/* The largest conv window the kernels keep in registers (Falcon-H1: 4). */
#define EZ_SSM_MAX_CONV 16

/* Sizes of one Mamba2 mixer. */
typedef struct {
    int n_head;   /* H: SSM heads (GGUF ssm.time_step_rank) */
    int head_dim; /* P = d_inner / H */
    int n_group;  /* G: divides H */
    int d_state;  /* N */
} ez_ssm_shape;

typedef struct {
    /* The conv outputs of n_tok frames (x + t * ld_x, n_ch channels each),
     * y + t * ld_y, after the K-1 frames of the state; the state is not
     * changed (ez_ssm_conv does both). b may be NULL. */
    void (*conv)(const float *state, const float *x, int64_t ld_x, const float *w, const float *b, float *y,
                 int64_t ld_y, int n_tok, int n_ch, int d_conv);
    /* One token of the recurrence for heads [h0, h1): reads x [H * P], B and
     * C [G * N], dt [H] (before dt_bias); updates state [H][P][N], writes y
     * [H * P] of those heads. */
    void (*step)(const ez_ssm_shape *s, float *state, const float *x, const float *B, const float *C, const float *dt,
                 const float *dt_bias, const float *A, const float *D, float *y, int h0, int h1);
} ez_ssm_ops;

EZ_INTERNAL const ez_ssm_ops *ez_ssm_ops_active(void);
EZ_INTERNAL const ez_ssm_ops *ez_ssm_ops_ref(void);
/* NULL when this build has no such variant; callers check the CPU. */
EZ_INTERNAL const ez_ssm_ops *ez_ssm_ops_avx2(void);
EZ_INTERNAL const ez_ssm_ops *ez_ssm_ops_neon(void);

/* softplus as torch.nn.functional.softplus (threshold 20). */
static inline float ez_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* The conv of n_tok frames (ops->conv), then the state advanced to the last
 * K-1 frames it has seen. n_tok 1 is the decode step. */
EZ_INTERNAL void ez_ssm_conv(const ez_ssm_ops *ops, float *state, const float *x, int64_t ld_x, const float *w,
                             const float *b, float *y, int64_t ld_y, int n_tok, int n_ch, int d_conv);

/* Chunk length of the SSD scan. */
#define EZ_SSM_CHUNK 64

/* Floats of scratch ez_ssm_scan needs for one call (one thread). */
EZ_INTERNAL int64_t ez_ssm_scan_work_floats(const ez_ssm_shape *s);

/* The recurrence over n_tok tokens for heads [h0, h1), chunked: within a
 * chunk of L tokens, head h's outputs are
 *   Y = (L_h o (C B^T)) (dt o X) + diag(exp(cum a)) C S^T + D X
 * and its state S <- exp(a_total) S + X^T diag(dt exp(a_total - cum a)) B
 * (a = dt * A; L_h[t][u] = exp(cum a_t - cum a_u) for u <= t, else 0):
 * the chunk's C S^T, (L_h o C B^T) X and X^T B products through
 * ez_gemm_f32 (on `pool`, which is the caller's when called from inside one
 * of its loops; NULL runs inline), C B^T through vo's dot, no per-token
 * pass over the state. Token t's x is x + t * ld_x (head h at
 * h * P), its B and C are B + t * ld_bc and C + t * ld_bc (group g at
 * g * N), its dt is dt + t * ld_dt; y + t * ld_y receives the outputs.
 * work: ez_ssm_scan_work_floats(s) floats. Equal to n_tok ops->step calls
 * up to float rounding. */
EZ_INTERNAL void ez_ssm_scan(ez_pool *pool, const ez_llm_ops *vo, const ez_ssm_shape *s, float *state,
                             const float *x, int64_t ld_x, const float *B, const float *C, int64_t ld_bc,
                             const float *dt, int64_t ld_dt, const float *dt_bias, const float *A, const float *D,
                             float *y, int64_t ld_y, int n_tok, int h0, int h1, float *work);

#endif /* EZ_LLM_SSM_H */
