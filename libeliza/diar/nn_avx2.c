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

/* gates[nr rows][n0 .. n0 + 16) = xp + bias + h . w over k, nr = 1..4 (a
 * constant where it is inlined, so the accumulators stay in registers); wp:
 * the panel of columns n0 .. n0 + 16 ([H, 16]). Every row sums in the same
 * order whatever nr is. */
static EZ_ALWAYS_INLINE void rows_cols16(const int nr, int H, int G, const float *const *xp, const float *bias,
                                         const float *wp, const float *h, float *gates, int n0) {
    __m256 b0 = _mm256_loadu_ps(bias + n0), b1 = _mm256_loadu_ps(bias + n0 + 8), a[4][2];
    for (int r = 0; r < nr; r++) {
        a[r][0] = _mm256_add_ps(_mm256_loadu_ps(xp[r] + n0), b0);
        a[r][1] = _mm256_add_ps(_mm256_loadu_ps(xp[r] + n0 + 8), b1);
    }
    for (int k = 0; k < H; k++) {
        const float *w = wp + (int64_t)k * 16;
        __m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + 8);
        for (int r = 0; r < nr; r++) {
            __m256 x = _mm256_broadcast_ss(h + (int64_t)r * H + k);
            a[r][0] = _mm256_fmadd_ps(x, w0, a[r][0]);
            a[r][1] = _mm256_fmadd_ps(x, w1, a[r][1]);
        }
    }
    for (int r = 0; r < nr; r++) {
        _mm256_storeu_ps(gates + (int64_t)r * G + n0, a[r][0]);
        _mm256_storeu_ps(gates + (int64_t)r * G + n0 + 8, a[r][1]);
    }
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
    int G = 4 * H, b4 = nb / 4 * 4, rest = nb - b4;
    if (nb == 1) {
        for (int n0 = 0; n0 < G; n0 += 64) row1_cols64(H, xp[0], bias, wt + (int64_t)n0 * H, h, gates, n0);
    } else {
        /* Column blocks outside, rows inside: a [H, 16] block of weights
         * stays in L1 while every group of rows uses it. */
        for (int n0 = 0; n0 < G; n0 += 16) {
            const float *wp = wt + (int64_t)n0 * H;
            for (int b = 0; b < b4; b += 4)
                rows_cols16(4, H, G, xp + b, bias, wp, h + (int64_t)b * H, gates + (int64_t)b * G, n0);
            if (rest == 1) rows_cols16(1, H, G, xp + b4, bias, wp, h + (int64_t)b4 * H, gates + (int64_t)b4 * G, n0);
            if (rest == 2) rows_cols16(2, H, G, xp + b4, bias, wp, h + (int64_t)b4 * H, gates + (int64_t)b4 * G, n0);
            if (rest == 3) rows_cols16(3, H, G, xp + b4, bias, wp, h + (int64_t)b4 * H, gates + (int64_t)b4 * G, n0);
        }
    }
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
