/* The per-ISA pieces of the FFT convolution (ez_tts_conv1d_fft, ops_fft.c):
 * real transforms of 8 signals at once and the weight spectra. ops_fft.c
 * does the blocking, the products and the threading around them.
 *
 * The bodies are in ops_fft_impl.h, compiled twice: by ops_fft.c for the
 * baseline ISA (the compiler vectorizes the 8-lane loops with what it has)
 * and by ops_fft_avx2.c with AVX2 + FMA; ops_fft_avx512.c widens the AVX2
 * ones to two samples per vector. Chosen at run time.
 *
 * Conventions (N the transform size, M = N / 2):
 *  - A signal is N samples of EZ_FFT_LANES floats: lane l of every sample
 *    belongs to one channel, so each butterfly is one vector operation.
 *  - The forward transform returns 2 X[f] for bins f = 0..M (X[f] =
 *    sum_u x[u] e^{-2 pi i f u / N}); the imaginary parts of bins 0 and M
 *    are zero and not stored: bins 0 and M share slot 0.
 *  - The inverse takes the same slots and returns the unnormalized sum_f
 *    Y[f] e^{+2 pi i f u / N} over the full, Hermitian spectrum, i.e. N
 *    times the inverse transform. (So a product of the two carries 2 N,
 *    which the filter spectra's scale 1 / (2N) takes out.) */
#ifndef EZ_TTS_OPS_FFT_H
#define EZ_TTS_OPS_FFT_H

#include "core/common.h"
#include "core/kernels/gemm_bf16.h"
#include "core/pool.h"

#define EZ_FFT_LANES 8
#define EZ_FFT_MAX_N 128
/* Widest GEMM micro-panel (ez_gemm_kernels.nr) the spectra are packed for. */
#define EZ_FFT_MAX_NR 32

typedef float ez_fft_lanes[EZ_FFT_LANES];

/* Twiddles and the bit-reversal permutation of one transform size. */
typedef struct {
    int n, m;                            /* N (a power of two, 8..EZ_FFT_MAX_N) and N / 2 */
    float cos_n[EZ_FFT_MAX_N];           /* cos(2 pi j / N) */
    float sin_n[EZ_FFT_MAX_N];           /* sin(2 pi j / N) */
    int rev[EZ_FFT_MAX_N / 2];           /* bit reversal of 0..M-1 */
} ez_fft_plan;

typedef struct {
    /* One block forward: the N samples in[u step] (8 lanes each) into the
     * slots of x: slot f at x + f x_slot, its parts part floats apart:
     * slot 0: 2 X[0], 2 X[M]; slot f: 2 Re X[f], 2 Im X[f], their sum. */
    void (*forward_block)(const ez_fft_plan *p, const float *in, int64_t step, float *x, int64_t x_slot,
                          int64_t part);

    /* One block back: the slots of y (as above, without the sum: slot 0:
     * Y[0], Y[M]; slot f: Re Y[f], Im Y[f]) into out[r step] = N times the
     * inverse transform, r < count. */
    void (*inverse_block)(const ez_fft_plan *p, const float *y, int64_t y_slot, int64_t part, float *out,
                          int64_t step, int count);

    /* Into lanes: dst[t dst_ld + l] = x[l ld + t0 + t] for t < n, l < 8,
     * zero where t0 + t is outside [0, t_len) and for l >= n_rows. */
    void (*to_lanes)(const float *x, int64_t ld, int n_rows, int64_t t0, int64_t n, int64_t t_len, float *dst,
                     int64_t dst_ld);

    /* Out of lanes: y[l ld + t] = src[t][l] + bias[l] for t < n, l < n_rows
     * (<= 8); bias may be NULL (zero). */
    void (*from_lanes)(const float *src, int n_rows, int64_t n, const float *bias, float *y, int64_t ld);

    /* The conjugated, scaled spectra of k-tap filters as packed GEMM
     * operands (ops_fft.c describes the layout): for slot f (1 <= f < M)
     * the slots f and M - f, for f = 0 the bins 0 and M. wt[(ci k + j) w +
     * c], w = n_panels nr, is tap j of the filter from input ci to output
     * column c; rows ci in [c_in, ci_pad) come out zero. */
    void (*spectra)(const ez_fft_plan *p, int f, float scale, const float *wt, int k, int c_in, int ci_pad,
                    int n_panels, int nr, float *out);
} ez_fft_kernels;

/* Packed spectra (ops_fft.c): floats from one panel of K x nr to the next,
 * and from one plane of n_panels panels to the next. Both are skewed by
 * cache lines: K nr floats is a multiple of 4 KiB, and the rows a kernel
 * writes together would otherwise all share one L1 set. */
static inline int64_t ez_fft_panel_stride(int64_t K, int nr) { return K * nr + 16; }
static inline int64_t ez_fft_plane_stride(int64_t K, int nr, int n_panels) {
    return n_panels * ez_fft_panel_stride(K, nr) + 32;
}

EZ_INTERNAL void ez_fft_plan_init(ez_fft_plan *p, int n);

/* The baseline-ISA kernels (always there), and the AVX2 + FMA ones (NULL
 * when this build or architecture has none; the caller checks the CPU). */
EZ_INTERNAL const ez_fft_kernels *ez_fft_kernels_portable(void);
EZ_INTERNAL const ez_fft_kernels *ez_fft_kernels_avx2(void);
/* AVX-512 (NULL off x86-64; the caller checks the level): uses the AVX2
 * kernels for the moves in and out of lanes. */
EZ_INTERNAL const ez_fft_kernels *ez_fft_kernels_avx512(void);

/* ez_tts_conv1d_fft with the given transform kernels (tests run the
 * portable ones on any CPU) and, with bk, the products in BF16 on those
 * kernels (ez_tts_conv1d_fft_bf16; bk->nr must be the float32 GEMM's nr,
 * else ELIZA_E_UNSUPPORTED). */
EZ_INTERNAL int32_t ez_fft_conv1d_with(const ez_fft_kernels *fk, const ez_gemm_bf16_kernels *bk, ez_pool *pool,
                                       const float *x, int c_in, int t_in, const float *w, const float *b, int c_out,
                                       int k, int pad, int dilation, float *y);

#endif /* EZ_TTS_OPS_FFT_H */
