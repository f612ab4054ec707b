/* AVX-512 LSTM step (see nn.h): nn_avx2.c's blocking with a [H, 16] weight
 * panel row in one register. Every gate is xp + bias, then one FMA per k in
 * order, whichever path computes it, so results do not depend on how
 * sequences are grouped. Compiled with the AVX-512 flags; used at the
 * avx512 level only. */
#include "diar/nn.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>

#include "core/kernels/vmath_avx512.h"

static inline __m512 tanh16(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f), two = _mm512_set1_ps(2.0f);
    return _mm512_fmsub_ps(two, ez_sigmoid_avx512(_mm512_mul_ps(two, x)), one);
}

/* gates[nr rows][n0 .. n0 + 16) for nr = 1..8 (constant where inlined). */
static EZ_ALWAYS_INLINE void rows_cols16(const int nr, int H, int G, const float *const *xp, const float *bias,
                                         const float *wp, const float *h, float *gates, int n0) {
    const __m512 b = _mm512_loadu_ps(bias + n0);
    __m512 a[8];
    for (int r = 0; r < nr; r++) a[r] = _mm512_add_ps(_mm512_loadu_ps(xp[r] + n0), b);
    for (int k = 0; k < H; k++) {
        const __m512 w = _mm512_loadu_ps(wp + (int64_t)k * 16);
        for (int r = 0; r < nr; r++) a[r] = _mm512_fmadd_ps(_mm512_set1_ps(h[(int64_t)r * H + k]), w, a[r]);
    }
    for (int r = 0; r < nr; r++) _mm512_storeu_ps(gates + (int64_t)r * G + n0, a[r]);
}

/* One row, `V` panels (16 columns each) from wp: V independent chains. */
static EZ_ALWAYS_INLINE void row1_panels(const int V, int H, const float *xp, const float *bias, const float *wp,
                                         const float *h, float *gates, int n0) {
    __m512 a[8];
    for (int v = 0; v < V; v++) a[v] = _mm512_add_ps(_mm512_loadu_ps(xp + n0 + 16 * v), _mm512_loadu_ps(bias + n0 + 16 * v));
    for (int k = 0; k < H; k++) {
        const __m512 x = _mm512_set1_ps(h[k]);
        for (int v = 0; v < V; v++) a[v] = _mm512_fmadd_ps(x, _mm512_loadu_ps(wp + (int64_t)v * H * 16 + k * 16), a[v]);
    }
    for (int v = 0; v < V; v++) _mm512_storeu_ps(gates + n0 + 16 * v, a[v]);
}

void ez_nn_lstm_step_avx512(int nb, int H, const float *const *xp, const float *bias, const float *wt,
                            float *gates, float *h, float *c) {
    const int G = 4 * H, b8 = nb / 8 * 8, rest = nb - b8;
    if (nb == 1) {
        int n0 = 0;
        for (; n0 + 128 <= G; n0 += 128) row1_panels(8, H, xp[0], bias, wt + (int64_t)n0 * H, h, gates, n0);
        for (; n0 < G; n0 += 16) row1_panels(1, H, xp[0], bias, wt + (int64_t)n0 * H, h, gates, n0);
    } else {
        for (int n0 = 0; n0 < G; n0 += 16) {
            const float *wp = wt + (int64_t)n0 * H;
            const float *const *xr = xp + b8;
            const float *hr = h + (int64_t)b8 * H;
            float *gr = gates + (int64_t)b8 * G;
            for (int b = 0; b < b8; b += 8)
                rows_cols16(8, H, G, xp + b, bias, wp, h + (int64_t)b * H, gates + (int64_t)b * G, n0);
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
        float *hb = h + (int64_t)b * H, *cb = c + (int64_t)b * H;
        for (int j = 0; j < H; j += 16) {
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

#endif /* EZ_ARCH_X86_64 */
