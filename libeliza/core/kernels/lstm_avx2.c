/* AVX2 + FMA LSTM step (lstm.h). Compiled with -mavx2 -mfma on x86-64 and
 * only called when the CPU has them. */
#include "lstm.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>

#include "vmath_avx2.h"

/* tanh x = 2 sigmoid(2x) - 1: absolute error a few 1e-8, which is what the
 * recurrence needs (tanh's relative error near 0 does not matter here). */
static inline __m256 tanh8(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f);
    return _mm256_fmsub_ps(two, ez_sigmoid_avx2(_mm256_mul_ps(two, x)), one);
}

static inline __m256 start8(const float *xp, const float *bias, int n) {
    return bias ? _mm256_add_ps(_mm256_loadu_ps(xp + n), _mm256_loadu_ps(bias + n)) : _mm256_loadu_ps(xp + n);
}

/* gates[nr rows][n0 .. n0 + 16) = xp (+ bias) + h . w over k, nr = 1..4 (a
 * constant where it is inlined, so the accumulators stay in registers); wp:
 * the panel of columns n0 .. n0 + 16, row k at wp + k * stride. */
static EZ_ALWAYS_INLINE void rows_cols16(const int nr, int H, int64_t G, const float *const *xp, const float *bias,
                                         const float *wp, int64_t stride, const float *h, float *gates, int64_t n0) {
    __m256 a[4][2];
    for (int r = 0; r < nr; r++) {
        a[r][0] = start8(xp[r], bias, (int)n0);
        a[r][1] = start8(xp[r], bias, (int)n0 + 8);
    }
    for (int k = 0; k < H; k++) {
        const float *w = wp + (int64_t)k * stride;
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

/* One row, units u .. u + 16 of the four gates (columns qH + u, four
 * panels): eight independent accumulators keep the FMA pipes full. */
static inline void row1_units16(int H, const float *xp, const float *bias, const float *w, const float *h,
                                float *gates, int u) {
    const float *p[4];
    int64_t st[4];
    __m256 a[8];
    for (int q = 0; q < 4; q++) {
        const int n = q * H + u;
        p[q] = ez_lstm_panel(w, H, n / EZ_LSTM_PANEL, &st[q]);
        a[2 * q] = start8(xp, bias, n);
        a[2 * q + 1] = start8(xp, bias, n + 8);
    }
    for (int k = 0; k < H; k++) {
        __m256 x = _mm256_broadcast_ss(h + k);
        for (int q = 0; q < 4; q++) {
            a[2 * q] = _mm256_fmadd_ps(x, _mm256_loadu_ps(p[q] + k * st[q]), a[2 * q]);
            a[2 * q + 1] = _mm256_fmadd_ps(x, _mm256_loadu_ps(p[q] + k * st[q] + 8), a[2 * q + 1]);
        }
    }
    for (int q = 0; q < 4; q++) {
        _mm256_storeu_ps(gates + q * H + u, a[2 * q]);
        _mm256_storeu_ps(gates + q * H + u + 8, a[2 * q + 1]);
    }
}

static void step_avx2(int nb, int H, int u0, int u1, const float *const *xp, const float *bias, const float *w,
                      const float *h_prev, float *h_out, float *c, float *gates) {
    const int64_t G = 4 * (int64_t)H;
    const int b4 = nb / 4 * 4, rest = nb - b4;
    if (nb == 1) {
        for (int u = u0; u < u1; u += 16) row1_units16(H, xp[0], bias, w, h_prev, gates, u);
    } else {
        /* Column blocks outside, rows inside: a [H, 16] panel stays in L1
         * while every group of rows uses it. */
        for (int q = 0; q < 4; q++)
            for (int u = u0; u < u1; u += 16) {
                const int64_t n0 = (int64_t)q * H + u;
                int64_t st;
            const float *wp = ez_lstm_panel(w, H, n0 / EZ_LSTM_PANEL, &st), *hr = h_prev + (int64_t)b4 * H;
                float *gr = gates + (int64_t)b4 * G;
                for (int b = 0; b < b4; b += 4)
                    rows_cols16(4, H, G, xp + b, bias, wp, st, h_prev + (int64_t)b * H, gates + (int64_t)b * G, n0);
                if (rest == 1) rows_cols16(1, H, G, xp + b4, bias, wp, st, hr, gr, n0);
                if (rest == 2) rows_cols16(2, H, G, xp + b4, bias, wp, st, hr, gr, n0);
                if (rest == 3) rows_cols16(3, H, G, xp + b4, bias, wp, st, hr, gr, n0);
            }
    }
    for (int b = 0; b < nb; b++) {
        const float *gb = gates + (int64_t)b * G;
        float *hb = h_out + (int64_t)b * H, *cb = c + (int64_t)b * H;
        for (int j = u0; j < u1; j += 8) {
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

ez_lstm_step_fn ez_lstm_step_avx2(void) { return step_avx2; }

#else

ez_lstm_step_fn ez_lstm_step_avx2(void) { return NULL; }

#endif /* EZ_ARCH_X86_64 */
