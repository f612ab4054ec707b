/* The layers Kokoro is built from, on float32 buffers.
 *
 * Layouts follow the reference (PyTorch, batch 1): convolution inputs and
 * outputs are channel-major [C, T] (row c holds T samples), linear layers
 * and LSTMs work on time-major [T, C]. Weights are as stored in the GGUF
 * (docs/kokoro.md), dequantized to float32 at load.
 *
 * Each op has a scalar reference (ops_ref.c, ez_tts_*_ref) and a fast path
 * (ops.c) chosen at run time; ELIZA_FORCE_SCALAR=1 selects the reference.
 * tests/c/test_tts_ops.c holds fast == reference. Outputs never alias
 * inputs unless an op says it works in place.
 *
 * The ops that take a pool split their work over it and give bit-identical
 * results for any thread count. Like ez_gemm_f32 they use the pool's
 * scratch slots (ez_pool_scratch): a scratch pointer taken before the call
 * is stale after it. They may be called from inside a loop body of the same
 * pool (they then run on that thread, with its scratch slot). Without
 * scratch memory they still compute the right result, more slowly, and log
 * a warning. */
#ifndef EZ_TTS_OPS_H
#define EZ_TTS_OPS_H

#include "core/common.h"
#include "core/cpu.h"
#include "core/pool.h"

/* Output length of a Conv1d / ConvTranspose1d. */
static inline int ez_conv1d_out_len(int t_in, int k, int stride, int pad, int dilation) {
    return (t_in + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
}
static inline int ez_conv_transpose1d_out_len(int t_in, int k, int stride, int pad, int out_pad) {
    return (t_in - 1) * stride - 2 * pad + (k - 1) + out_pad + 1;
}

/* y[T, n_out] = x[T, n_in] . w^T + b; w: [n_out, n_in]; b: [n_out] or NULL. */
EZ_INTERNAL void ez_tts_linear(ez_pool *pool, const float *x, int T, int n_in,
                               const float *w, const float *b, int n_out, float *y);

/* Conv1d, zero padding. x: [c_in, t_in]; w: [c_out, c_in / groups, k];
 * b: [c_out] or NULL; y: [c_out, ez_conv1d_out_len(...)]. */
EZ_INTERNAL void ez_tts_conv1d(ez_pool *pool, const float *x, int c_in, int t_in,
                               const float *w, const float *b, int c_out, int k,
                               int stride, int pad, int dilation, int groups, float *y);

/* ez_tts_conv1d without the FFT path: the im2col GEMM (for benchmarks and
 * tests; ez_tts_conv1d picks between the two). */
EZ_INTERNAL void ez_tts_conv1d_direct(ez_pool *pool, const float *x, int c_in, int t_in, const float *w,
                                      const float *b, int c_out, int k, int stride, int pad, int dilation,
                                      int groups, float *y);

/* A Conv1d weight w [c_out, c_in, k] of float16 values laid out once as the
 * A operand of the direct path's GEMM (ops.c): ceil(c_out / mr) micro-panels
 * of [c_in k][mr] values each, the rows past c_out zero. The direct path then
 * widens contiguous runs of it per depth slice instead of widening w whole
 * and gathering its rows on every call: the same float32 operands in the
 * same order, so the same bits. */
typedef struct {
    const uint16_t *h; /* NULL: none */
    int mr;            /* the GEMM kernels' row tile it was laid out for */
} ez_tts_panels;

/* The row tile panels are laid out for on this CPU and level (the active
 * GEMM kernels' mr), or 0 where the direct path has no kernels to use them. */
EZ_INTERNAL int ez_tts_panels_mr(void);

/* Values (float16) of the panels of a [c_out, K] weight. */
EZ_INTERNAL int64_t ez_tts_panels_count(int c_out, int64_t K, int mr);

/* w [c_out, K] (float16 bits, row-major) laid out as panels into dst. */
EZ_INTERNAL void ez_tts_panels_pack(const uint16_t *w, int c_out, int64_t K, int mr, uint16_t *dst);

/* ez_tts_conv1d_direct with groups 1 and its weight as panels. Returns
 * ELIZA_OK, or without touching y ELIZA_E_UNSUPPORTED when the panels were
 * laid out for another row tile than the active kernels' (or there are
 * none). */
EZ_INTERNAL int32_t ez_tts_conv1d_direct_panels(ez_pool *pool, const float *x, int c_in, int t_in,
                                                const ez_tts_panels *w, const float *b, int c_out, int k,
                                                int stride, int pad, int dilation, float *y);

/* Conv1d with stride 1 and groups 1 by overlap-save FFT (ops_fft.c), same
 * operands as ez_tts_conv1d. Returns ELIZA_OK, or without touching y:
 * ELIZA_E_UNSUPPORTED (no GEMM kernels on this CPU or under
 * ELIZA_FORCE_SCALAR, or 2k > 64), ELIZA_E_NOMEM (no scratch memory). Its
 * error grows with the magnitude of each output's whole block rather than
 * with the output's own sum of |w x| (ops_fft.c). */
EZ_INTERNAL int32_t ez_tts_conv1d_fft(ez_pool *pool, const float *x, int c_in, int t_in, const float *w,
                                      const float *b, int c_out, int k, int pad, int dilation, float *y);

/* ez_tts_conv1d_fft with the per-bin products in BF16 (vdpbf16ps): the
 * blocks' spectra and the filters' spectra are rounded to bfloat16, the
 * sums stay float32 (core/kernels/gemm_bf16.h). The error is that of the
 * rounding, about 2^-9 of each term, not float32's: for layers whose
 * outputs may carry it (Kokoro's generator, docs/kokoro.md). Returns
 * ELIZA_E_UNSUPPORTED without touching y where ez_tts_bf16_available() is
 * 0, otherwise as ez_tts_conv1d_fft. */
EZ_INTERNAL int32_t ez_tts_conv1d_fft_bf16(ez_pool *pool, const float *x, int c_in, int t_in, const float *w,
                                           const float *b, int c_out, int k, int pad, int dilation, float *y);

/* ez_tts_conv1d, taking ez_tts_conv1d_fft_bf16 where it would take the FFT
 * path and BF16 products are available. */
EZ_INTERNAL void ez_tts_conv1d_bf16(ez_pool *pool, const float *x, int c_in, int t_in, const float *w,
                                    const float *b, int c_out, int k, int stride, int pad, int dilation,
                                    int groups, float *y);

/* 1 when this CPU and level run BF16 products (the avx512 level on a CPU
 * with AVX512_BF16), else 0. */
EZ_INTERNAL int ez_tts_bf16_available(void);

/* The rule for BF16 products (docs/kokoro.md, "BF16 products"), fixed
 * by the CPU and the environment so that one machine always gives the
 * same audio (never a timing taken at run time). With `available` 0 they
 * are off; ELIZA_TTS_BF16 (`env`, NULL when unset) "1" turns them on and
 * "0" off; otherwise they are on where vdpbf16ps is known to run at full
 * rate, as measured: AMD family 0x19 (Zen 4), where its two multiply-adds
 * per lane double float32's rate. Off elsewhere: on the Intel Xeon
 * measured it retires a quarter as often as vfmadd231ps, half float32's
 * rate; Zen 5 (0x1A) was not measured. *why (when not NULL) gets a static
 * sentence saying which part of the rule decided. Any env value other than
 * "0" and "1" counts as unset. */
EZ_INTERNAL int ez_tts_bf16_rule(const ez_cpu_info *cpu, int available, const char *env, const char **why);

/* Whether a model opened now uses BF16 products: ez_tts_bf16_rule for
 * this CPU, ez_tts_bf16_available() and ELIZA_TTS_BF16 as set now. */
EZ_INTERNAL int ez_tts_bf16_default(const char **why);

/* Whether ez_tts_conv1d takes the FFT path for this shape (on this CPU). */
EZ_INTERNAL int ez_tts_conv1d_prefers_fft(int c_in, int t_in, int c_out, int k, int stride, int pad,
                                          int dilation, int groups);

/* ConvTranspose1d. x: [c_in, t_in]; w: [c_in, c_out / groups, k] (PyTorch's
 * layout); b: [c_out] or NULL; y: [c_out, ez_conv_transpose1d_out_len(...)]. */
EZ_INTERNAL void ez_tts_conv_transpose1d(ez_pool *pool, const float *x, int c_in, int t_in,
                                         const float *w, const float *b, int c_out, int k,
                                         int stride, int pad, int out_pad, int groups, float *y);

/* One direction of a PyTorch LSTM layer (gates i, f, g, o).
 * x: [T, n_in]; w_ih: [4H, n_in]; w_hh: [4H, H] in core's step panels
 * (ez_lstm_pack, core/kernels/lstm.h); b_ih, b_hh: [4H] or NULL.
 * Writes h_t to y + t * y_stride (y_stride >= H), so the two directions of a
 * bidirectional layer fill the halves of one [T, 2H] buffer. reverse runs
 * t = T-1 .. 0. Initial state zero. ELIZA_E_NOMEM (with ez_fail) when the
 * gates' working memory cannot be had. */
EZ_INTERNAL int32_t ez_tts_lstm(ez_pool *pool, const float *x, int T, int n_in, int H,
                                const float *w_ih, const float *w_hh,
                                const float *b_ih, const float *b_hh, int reverse,
                                float *y, int y_stride);

/* LayerNorm over the last dimension of x: [T, C], in place; gamma, beta:
 * [C] or NULL. */
EZ_INTERNAL void ez_tts_layer_norm(float *x, int T, int C, const float *gamma,
                                   const float *beta, float eps);

/* AdaIN: x: [C, T] in place, x = (1 + gamma[c]) * instance_norm(x)[c] + beta[c],
 * with gamma_beta = [gamma (C), beta (C)] (the style projection's output).
 * Instance norm: biased variance over T, eps inside the square root. */
EZ_INTERNAL void ez_tts_adain1d(float *x, int C, int T, const float *gamma_beta, float eps);

/* Snake: x: [C, T] in place, x + sin(alpha[c] x)^2 / alpha[c]. */
EZ_INTERNAL void ez_tts_snake(float *x, int C, int T, const float *alpha);

/* x = x >= 0 ? x : slope * x, in place over n values. */
EZ_INTERNAL void ez_tts_leaky_relu(float *x, int64_t n, float slope);

/* transformers' gelu_new (GELU, tanh form): x = 0.5 x (1 + tanh(sqrt(2 / pi)
 * (x + 0.044715 x^3))), in place over n values, split over the pool. */
EZ_INTERNAL void ez_tts_gelu_tanh(ez_pool *pool, float *x, int64_t n);

/* Both directions of a bidirectional PyTorch LSTM layer: direction 0
 * (forward) into y[t, 0:H], direction 1 (reverse) into y[t, H:2H] of
 * y: [T, 2H]. w_ih[d], w_hh[d], b_ih[d], b_hh[d] as in ez_tts_lstm (biases
 * may be NULL). Bit-identical to the two ez_tts_lstm calls; with two or
 * more threads the directions run side by side. */
EZ_INTERNAL int32_t ez_tts_lstm_bidir(ez_pool *pool, const float *x, int T, int n_in, int H,
                                      const float *const w_ih[2], const float *const w_hh[2],
                                      const float *const b_ih[2], const float *const b_hh[2], float *y);

/* ez_tts_adain1d then ez_tts_snake (alpha: [C]), fused: one pass over x
 * after the statistics, split over channels. */
EZ_INTERNAL void ez_tts_adain1d_snake(ez_pool *pool, float *x, int C, int T, const float *gamma_beta,
                                      float eps, const float *alpha);

/* ez_tts_adain1d then ez_tts_leaky_relu(slope), fused like
 * ez_tts_adain1d_snake. */
EZ_INTERNAL void ez_tts_adain1d_leaky_relu(ez_pool *pool, float *x, int C, int T,
                                           const float *gamma_beta, float eps, float slope);

/* Scalar references of the ops above (same contracts). */
EZ_INTERNAL void ez_tts_linear_ref(const float *x, int T, int n_in, const float *w,
                                   const float *b, int n_out, float *y);
EZ_INTERNAL void ez_tts_conv1d_ref(const float *x, int c_in, int t_in, const float *w,
                                   const float *b, int c_out, int k, int stride, int pad,
                                   int dilation, int groups, float *y);
EZ_INTERNAL void ez_tts_conv_transpose1d_ref(const float *x, int c_in, int t_in, const float *w,
                                             const float *b, int c_out, int k, int stride,
                                             int pad, int out_pad, int groups, float *y);
EZ_INTERNAL void ez_tts_adain1d_ref(float *x, int C, int T, const float *gamma_beta, float eps);
EZ_INTERNAL void ez_tts_snake_ref(float *x, int C, int T, const float *alpha);
EZ_INTERNAL void ez_tts_gelu_tanh_ref(float *x, int64_t n);

#endif /* EZ_TTS_OPS_H */
