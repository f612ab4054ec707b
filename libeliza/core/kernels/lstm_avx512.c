/* AVX-512 LSTM step (lstm.h): lstm_avx2.c's blocking with a panel row of
 * 16 columns in one register. Compiled with the AVX-512 flags; used at the
 * avx512 level only. */
#include "lstm.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>

#include "vmath_avx512.h"

static inline __m512 tanh16(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f), two = _mm512_set1_ps(2.0f);
    return _mm512_fmsub_ps(two, ez_sigmoid_avx512(_mm512_mul_ps(two, x)), one);
}

static inline __m512 start16(const float *xp, const float *bias, int64_t n) {
    return bias ? _mm512_add_ps(_mm512_loadu_ps(xp + n), _mm512_loadu_ps(bias + n)) : _mm512_loadu_ps(xp + n);
}

/* gates[nr rows][n0 .. n0 + 16) for nr = 1..8 (constant where inlined). */
static EZ_ALWAYS_INLINE void rows_cols16(const int nr, int H, int64_t G, const float *const *xp, const float *bias,
                                         const float *wp, const float *h, float *gates, int64_t n0) {
    __m512 a[8];
    for (int r = 0; r < nr; r++) a[r] = start16(xp[r], bias, n0);
    for (int k = 0; k < H; k++) {
        const __m512 w = _mm512_loadu_ps(wp + (int64_t)k * 16);
        for (int r = 0; r < nr; r++) a[r] = _mm512_fmadd_ps(_mm512_set1_ps(h[(int64_t)r * H + k]), w, a[r]);
    }
    for (int r = 0; r < nr; r++) _mm512_storeu_ps(gates + (int64_t)r * G + n0, a[r]);
}

/* One row, units u .. u + 16 * S of the four gates (S = 1 or 2: 4 S panels,
 * 4 S independent chains). */
static EZ_ALWAYS_INLINE void row1_units(const int S, int H, const float *xp, const float *bias, const float *w,
                                        const float *h, float *gates, int u) {
    const float *p[8];
    int64_t n[8];
    __m512 a[8];
    for (int v = 0; v < 4 * S; v++) {
        n[v] = (int64_t)(v / S) * H + u + 16 * (v % S);
        p[v] = w + n[v] * H;
        a[v] = start16(xp, bias, n[v]);
    }
    for (int k = 0; k < H; k++) {
        const __m512 x = _mm512_set1_ps(h[k]);
        for (int v = 0; v < 4 * S; v++) a[v] = _mm512_fmadd_ps(x, _mm512_loadu_ps(p[v] + k * 16), a[v]);
    }
    for (int v = 0; v < 4 * S; v++) _mm512_storeu_ps(gates + n[v], a[v]);
}

static void step_avx512(int nb, int H, int u0, int u1, const float *const *xp, const float *bias, const float *w,
                        const float *h_prev, float *h_out, float *c, float *gates) {
    const int64_t G = 4 * (int64_t)H;
    const int b8 = nb / 8 * 8, rest = nb - b8;
    if (nb == 1) {
        int u = u0;
        for (; u + 32 <= u1; u += 32) row1_units(2, H, xp[0], bias, w, h_prev, gates, u);
        for (; u < u1; u += 16) row1_units(1, H, xp[0], bias, w, h_prev, gates, u);
    } else {
        for (int q = 0; q < 4; q++)
            for (int u = u0; u < u1; u += 16) {
                const int64_t n0 = (int64_t)q * H + u;
                const float *wp = w + n0 * H, *hr = h_prev + (int64_t)b8 * H;
                const float *const *xr = xp + b8;
                float *gr = gates + (int64_t)b8 * G;
                for (int b = 0; b < b8; b += 8)
                    rows_cols16(8, H, G, xp + b, bias, wp, h_prev + (int64_t)b * H, gates + (int64_t)b * G, n0);
                switch (rest) {
                case 1: rows_cols16(1, H, G, xr, bias, wp, hr, gr, n0); break;
                case 2: rows_cols16(2, H, G, xr, bias, wp, hr, gr, n0); break;
                case 3: rows_cols16(3, H, G, xr, bias, wp, hr, gr, n0); break;
                case 4: rows_cols16(4, H, G, xr, bias, wp, hr, gr, n0); break;
                case 5: rows_cols16(5, H, G, xr, bias, wp, hr, gr, n0); break;
                case 6: rows_cols16(6, H, G, xr, bias, wp, hr, gr, n0); break;
                case 7: rows_cols16(7, H, G, xr, bias, wp, hr, gr, n0); break;
                default: break;
                }
            }
    }
    for (int b = 0; b < nb; b++) {
        const float *gb = gates + (int64_t)b * G;
        float *hb = h_out + (int64_t)b * H, *cb = c + (int64_t)b * H;
        for (int j = u0; j < u1; j += 16) {
            const __m512 i = ez_sigmoid_avx512(_mm512_loadu_ps(gb + j));
            const __m512 f = ez_sigmoid_avx512(_mm512_loadu_ps(gb + H + j));
            const __m512 g = tanh16(_mm512_loadu_ps(gb + 2 * H + j));
            const __m512 o = ez_sigmoid_avx512(_mm512_loadu_ps(gb + 3 * H + j));
            const __m512 cn = _mm512_fmadd_ps(f, _mm512_loadu_ps(cb + j), _mm512_mul_ps(i, g));
            _mm512_storeu_ps(cb + j, cn);
            _mm512_storeu_ps(hb + j, _mm512_mul_ps(o, tanh16(cn)));
        }
    }
}

ez_lstm_step_fn ez_lstm_step_avx512(void) { return step_avx512; }

#else

ez_lstm_step_fn ez_lstm_step_avx512(void) { return NULL; }

#endif /* EZ_ARCH_X86_64 */
