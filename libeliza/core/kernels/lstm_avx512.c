/* AVX-512 LSTM step (lstm.h): several sequences as lstm_avx2.c blocks them,
 * a panel row of 16 columns in one register; one sequence over whole panel
 * groups, one sequential stream each. Compiled with the AVX-512 flags; used
 * at the avx512 level only. */
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

/* gates[nr rows][n0 .. n0 + 16 np) for nr = 1..8 and np = 1 or 2 panels
 * of one group (constants where inlined: nr np independent chains, each
 * broadcast of h feeding np FMAs); wp: the first panel, row k at wp + k *
 * stride, the second panel's row after it. */
static EZ_ALWAYS_INLINE void rows_cols(const int nr, const int np, int H, int64_t G, const float *const *xp,
                                       const float *bias, const float *wp, int64_t stride, const float *h,
                                       float *gates, int64_t n0) {
    __m512 a[8][2];
    for (int r = 0; r < nr; r++)
        for (int v = 0; v < np; v++) a[r][v] = start16(xp[r], bias, n0 + 16 * v);
    for (int k = 0; k < H; k++) {
        const float *row = wp + (int64_t)k * stride;
        const __m512 w0 = _mm512_loadu_ps(row), w1 = np > 1 ? _mm512_loadu_ps(row + 16) : w0;
        for (int r = 0; r < nr; r++) {
            const __m512 x = _mm512_set1_ps(h[(int64_t)r * H + k]);
            a[r][0] = _mm512_fmadd_ps(x, w0, a[r][0]);
            if (np > 1) a[r][1] = _mm512_fmadd_ps(x, w1, a[r][1]);
        }
    }
    for (int r = 0; r < nr; r++)
        for (int v = 0; v < np; v++) _mm512_storeu_ps(gates + (int64_t)r * G + n0 + 16 * v, a[r][v]);
}

/* rows_cols over every row: blocks of 8, then the rest. */
static EZ_ALWAYS_INLINE void all_rows(const int np, int nb, int H, int64_t G, const float *const *xp,
                                      const float *bias, const float *wp, int64_t stride, const float *h,
                                      float *gates, int64_t n0) {
    const int b8 = nb / 8 * 8;
    const float *const *xr = xp + b8;
    const float *hr = h + (int64_t)b8 * H;
    float *gr = gates + (int64_t)b8 * G;
    for (int b = 0; b < b8; b += 8)
        rows_cols(8, np, H, G, xp + b, bias, wp, stride, h + (int64_t)b * H, gates + (int64_t)b * G, n0);
    switch (nb - b8) {
    case 1: rows_cols(1, np, H, G, xr, bias, wp, stride, hr, gr, n0); break;
    case 2: rows_cols(2, np, H, G, xr, bias, wp, stride, hr, gr, n0); break;
    case 3: rows_cols(3, np, H, G, xr, bias, wp, stride, hr, gr, n0); break;
    case 4: rows_cols(4, np, H, G, xr, bias, wp, stride, hr, gr, n0); break;
    case 5: rows_cols(5, np, H, G, xr, bias, wp, stride, hr, gr, n0); break;
    case 6: rows_cols(6, np, H, G, xr, bias, wp, stride, hr, gr, n0); break;
    case 7: rows_cols(7, np, H, G, xr, bias, wp, stride, hr, gr, n0); break;
    default: break;
    }
}

/* Rows of k ahead of the one read that one-sequence steps prefetch the
 * first line of: with it a step at H 128 (panels in L2) takes 2.06 us
 * instead of 2.25, 1.3 cycles per 64-byte line instead of 1.4. */
#define ROW1_PREFETCH 8

/* One row, np consecutive panels of one group (np = 1..8, constant where
 * inlined: np independent chains) from column n0; wp: the first panel, row
 * k at wp + k * stride, the others following it. */
static EZ_ALWAYS_INLINE void row1_panels(const int np, int H, const float *xp, const float *bias, const float *wp,
                                         int64_t stride, const float *h, float *gates, int64_t n0) {
    __m512 a[EZ_LSTM_GROUP];
    for (int v = 0; v < np; v++) a[v] = start16(xp, bias, n0 + 16 * v);
    for (int k = 0; k < H; k++) {
        const float *row = wp + (int64_t)k * stride;
        const __m512 x = _mm512_set1_ps(h[k]);
        /* An address past the group (past the panels at the end) is only a
         * hint: prefetching never faults. */
        _mm_prefetch((const char *)((uintptr_t)row + sizeof(float) * ROW1_PREFETCH * (size_t)stride), _MM_HINT_T0);
        for (int v = 0; v < np; v++) a[v] = _mm512_fmadd_ps(x, _mm512_loadu_ps(row + 16 * v), a[v]);
    }
    for (int v = 0; v < np; v++) _mm512_storeu_ps(gates + n0 + 16 * v, a[v]);
}

/* One row, units [u0, u1) of the four gates: each gate's panels in runs
 * that stay inside one group. */
static void row1(int H, int u0, int u1, const float *xp, const float *bias, const float *w, const float *h,
                 float *gates) {
    for (int q = 0; q < 4; q++) {
        int64_t p = ((int64_t)q * H + u0) / EZ_LSTM_PANEL;
        const int64_t end = ((int64_t)q * H + u1) / EZ_LSTM_PANEL;
        while (p < end) {
            const int64_t group_end = (p / EZ_LSTM_GROUP + 1) * EZ_LSTM_GROUP;
            const int np = (int)(EZ_MIN(end, group_end) - p);
            const int64_t n0 = p * EZ_LSTM_PANEL;
            int64_t st;
            const float *wp = ez_lstm_panel(w, H, p, &st);
            switch (np) {
            case 8: row1_panels(8, H, xp, bias, wp, st, h, gates, n0); break;
            case 7: row1_panels(7, H, xp, bias, wp, st, h, gates, n0); break;
            case 6: row1_panels(6, H, xp, bias, wp, st, h, gates, n0); break;
            case 5: row1_panels(5, H, xp, bias, wp, st, h, gates, n0); break;
            case 4: row1_panels(4, H, xp, bias, wp, st, h, gates, n0); break;
            case 3: row1_panels(3, H, xp, bias, wp, st, h, gates, n0); break;
            case 2: row1_panels(2, H, xp, bias, wp, st, h, gates, n0); break;
            default: row1_panels(1, H, xp, bias, wp, st, h, gates, n0); break;
            }
            p += np;
        }
    }
}

static void step_avx512(int nb, int H, int u0, int u1, const float *const *xp, const float *bias, const float *w,
                        const float *h_prev, float *h_out, float *c, float *gates) {
    const int64_t G = 4 * (int64_t)H;
    if (nb == 1) {
        row1(H, u0, u1, xp[0], bias, w, h_prev, gates);
    } else {
        /* Panels outside, rows inside: a panel (or a pair of one group)
         * stays in L1 while every group of rows uses it. */
        for (int q = 0; q < 4; q++) {
            int64_t p = ((int64_t)q * H + u0) / EZ_LSTM_PANEL;
            const int64_t end = ((int64_t)q * H + u1) / EZ_LSTM_PANEL;
            while (p < end) {
                int64_t st;
                const float *wp = ez_lstm_panel(w, H, p, &st);
                const int pair = p + 1 < end && (p + 1) % EZ_LSTM_GROUP != 0;
                if (pair) all_rows(2, nb, H, G, xp, bias, wp, st, h_prev, gates, p * EZ_LSTM_PANEL);
                else all_rows(1, nb, H, G, xp, bias, wp, st, h_prev, gates, p * EZ_LSTM_PANEL);
                p += pair ? 2 : 1;
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
