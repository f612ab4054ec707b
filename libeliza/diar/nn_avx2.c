/* AVX2 + FMA LSTM step (see nn.h). Compiled with -mavx2 -mfma on x86-64 and
 * only called when the CPU has them. */
#include "diar/nn.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>

#include "core/kernels/vmath_avx2.h"

/* tanh x = 2 sigmoid(2x) - 1: absolute error a few 1e-8, which is what the
 * recurrence needs (tanh's relative error near 0 does not matter here). */
static inline __m256 tanh8(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f);
    return _mm256_fmsub_ps(two, ez_sigmoid_avx2(_mm256_mul_ps(two, x)), one);
}

/* gates[4 rows][n0 .. n0 + 16) = xp + bias + h . w over k; wp: the panel of
 * columns n0 .. n0 + 16 ([H, 16]). */
static inline void rows4_cols16(int H, int G, const float *const *xp, const float *bias, const float *wp,
                                const float *h, float *gates, int n0) {
    __m256 b0 = _mm256_loadu_ps(bias + n0), b1 = _mm256_loadu_ps(bias + n0 + 8);
    __m256 a00 = _mm256_add_ps(_mm256_loadu_ps(xp[0] + n0), b0), a01 = _mm256_add_ps(_mm256_loadu_ps(xp[0] + n0 + 8), b1);
    __m256 a10 = _mm256_add_ps(_mm256_loadu_ps(xp[1] + n0), b0), a11 = _mm256_add_ps(_mm256_loadu_ps(xp[1] + n0 + 8), b1);
    __m256 a20 = _mm256_add_ps(_mm256_loadu_ps(xp[2] + n0), b0), a21 = _mm256_add_ps(_mm256_loadu_ps(xp[2] + n0 + 8), b1);
    __m256 a30 = _mm256_add_ps(_mm256_loadu_ps(xp[3] + n0), b0), a31 = _mm256_add_ps(_mm256_loadu_ps(xp[3] + n0 + 8), b1);
    const float *h0 = h, *h1 = h + H, *h2 = h + 2 * H, *h3 = h + 3 * H;
    for (int k = 0; k < H; k++) {
        const float *w = wp + (int64_t)k * 16;
        __m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + 8), x;
        x = _mm256_broadcast_ss(h0 + k);
        a00 = _mm256_fmadd_ps(x, w0, a00);
        a01 = _mm256_fmadd_ps(x, w1, a01);
        x = _mm256_broadcast_ss(h1 + k);
        a10 = _mm256_fmadd_ps(x, w0, a10);
        a11 = _mm256_fmadd_ps(x, w1, a11);
        x = _mm256_broadcast_ss(h2 + k);
        a20 = _mm256_fmadd_ps(x, w0, a20);
        a21 = _mm256_fmadd_ps(x, w1, a21);
        x = _mm256_broadcast_ss(h3 + k);
        a30 = _mm256_fmadd_ps(x, w0, a30);
        a31 = _mm256_fmadd_ps(x, w1, a31);
    }
    _mm256_storeu_ps(gates + n0, a00);
    _mm256_storeu_ps(gates + n0 + 8, a01);
    _mm256_storeu_ps(gates + G + n0, a10);
    _mm256_storeu_ps(gates + G + n0 + 8, a11);
    _mm256_storeu_ps(gates + 2 * G + n0, a20);
    _mm256_storeu_ps(gates + 2 * G + n0 + 8, a21);
    _mm256_storeu_ps(gates + 3 * G + n0, a30);
    _mm256_storeu_ps(gates + 3 * G + n0 + 8, a31);
}

/* gates[one row][n0 .. n0 + 64) = xp + bias + h . w over k, from the four panels
 * starting at wp: eight independent accumulators keep the FMA pipes full
 * with a single row. */
static inline void row1_cols64(int H, const float *xp, const float *bias, const float *wp, const float *h,
                               float *gates, int n0) {
    __m256 a[8];
    const float *w0 = wp, *w1 = wp + (int64_t)H * 16, *w2 = wp + (int64_t)H * 32, *w3 = wp + (int64_t)H * 48;
    for (int v = 0; v < 8; v++) a[v] = _mm256_add_ps(_mm256_loadu_ps(xp + n0 + 8 * v), _mm256_loadu_ps(bias + n0 + 8 * v));
    for (int k = 0; k < H; k++) {
        __m256 x = _mm256_broadcast_ss(h + k);
        a[0] = _mm256_fmadd_ps(x, _mm256_loadu_ps(w0 + k * 16), a[0]);
        a[1] = _mm256_fmadd_ps(x, _mm256_loadu_ps(w0 + k * 16 + 8), a[1]);
        a[2] = _mm256_fmadd_ps(x, _mm256_loadu_ps(w1 + k * 16), a[2]);
        a[3] = _mm256_fmadd_ps(x, _mm256_loadu_ps(w1 + k * 16 + 8), a[3]);
        a[4] = _mm256_fmadd_ps(x, _mm256_loadu_ps(w2 + k * 16), a[4]);
        a[5] = _mm256_fmadd_ps(x, _mm256_loadu_ps(w2 + k * 16 + 8), a[5]);
        a[6] = _mm256_fmadd_ps(x, _mm256_loadu_ps(w3 + k * 16), a[6]);
        a[7] = _mm256_fmadd_ps(x, _mm256_loadu_ps(w3 + k * 16 + 8), a[7]);
    }
    for (int v = 0; v < 8; v++) _mm256_storeu_ps(gates + n0 + 8 * v, a[v]);
}

void ez_nn_lstm_step_avx2(int nb, int H, const float *const *xp, const float *bias, const float *wt,
                          float *gates, float *h, float *c) {
    int G = 4 * H, b4 = nb / 4 * 4;
    /* Column blocks outside, rows inside: a [H, 16] block of weights stays
     * in L1 while every group of four rows uses it. */
    for (int n0 = 0; n0 < G && b4 > 0; n0 += 16)
        for (int b = 0; b < b4; b += 4)
            rows4_cols16(H, G, xp + b, bias, wt + (int64_t)n0 * H, h + (int64_t)b * H, gates + (int64_t)b * G, n0);
    for (int b = b4; b < nb; b++)
        for (int n0 = 0; n0 < G; n0 += 64)
            row1_cols64(H, xp[b], bias, wt + (int64_t)n0 * H, h + (int64_t)b * H, gates + (int64_t)b * G, n0);
    for (int b = 0; b < nb; b++) {
        const float *gb = gates + (int64_t)b * G;
        float *hb = h + (int64_t)b * H, *cb = c + (int64_t)b * H;
        for (int j = 0; j < H; j += 8) {
            __m256 i = ez_sigmoid_avx2(_mm256_loadu_ps(gb + j));
            __m256 f = ez_sigmoid_avx2(_mm256_loadu_ps(gb + H + j));
            __m256 g = tanh8(_mm256_loadu_ps(gb + 2 * H + j));
            __m256 o = ez_sigmoid_avx2(_mm256_loadu_ps(gb + 3 * H + j));
            __m256 cn = _mm256_fmadd_ps(f, _mm256_loadu_ps(cb + j), _mm256_mul_ps(i, g));
            _mm256_storeu_ps(cb + j, cn);
            _mm256_storeu_ps(hb + j, _mm256_mul_ps(o, tanh8(cn)));
        }
    }
}

#endif /* EZ_ARCH_X86_64 */
