/* NEON LSTM step (lstm.h): lstm_avx2.c's blocking on four-lane vectors.
 * NEON is part of the aarch64 baseline, so this file needs no special
 * flags. */
#include "lstm.h"

#if EZ_ARCH_AARCH64

#include <arm_neon.h>

#include "vmath_neon.h"

/* tanh x = 2 sigmoid(2x) - 1: absolute error a few 1e-8, which is what the
 * recurrence needs (tanh's relative error near 0 does not matter here). */
static inline float32x4_t tanh4(float32x4_t x) {
    return vsubq_f32(vmulq_n_f32(ez_sigmoid_neon(vmulq_n_f32(x, 2.0f)), 2.0f), vdupq_n_f32(1.0f));
}

static inline float32x4_t start4(const float *xp, const float *bias, int64_t n) {
    return bias ? vaddq_f32(vld1q_f32(xp + n), vld1q_f32(bias + n)) : vld1q_f32(xp + n);
}

/* gates[nr rows][n0 .. n0 + 16) = xp (+ bias) + h . w over k, nr = 1..4 (a
 * constant where it is inlined, so the 16 accumulators stay in registers);
 * wp: the panel of columns n0 .. n0 + 16, row k at wp + k * stride. */
static EZ_ALWAYS_INLINE void rows_cols16(const int nr, int H, int64_t G, const float *const *xp, const float *bias,
                                         const float *wp, int64_t stride, const float *h, float *gates, int64_t n0) {
    float32x4_t a[4][4];
    for (int r = 0; r < nr; r++)
        for (int v = 0; v < 4; v++) a[r][v] = start4(xp[r], bias, n0 + 4 * v);
    for (int k = 0; k < H; k++) {
        const float *w = wp + (int64_t)k * stride;
        float32x4_t w0 = vld1q_f32(w), w1 = vld1q_f32(w + 4), w2 = vld1q_f32(w + 8), w3 = vld1q_f32(w + 12);
        for (int r = 0; r < nr; r++) {
            float32x4_t x = vdupq_n_f32(h[(int64_t)r * H + k]);
            a[r][0] = vfmaq_f32(a[r][0], x, w0);
            a[r][1] = vfmaq_f32(a[r][1], x, w1);
            a[r][2] = vfmaq_f32(a[r][2], x, w2);
            a[r][3] = vfmaq_f32(a[r][3], x, w3);
        }
    }
    for (int r = 0; r < nr; r++)
        for (int v = 0; v < 4; v++) vst1q_f32(gates + (int64_t)r * G + n0 + 4 * v, a[r][v]);
}

static void step_neon(int nb, int H, int u0, int u1, const float *const *xp, const float *bias, const float *w,
                      const float *h_prev, float *h_out, float *c, float *gates) {
    const int64_t G = 4 * (int64_t)H;
    const int b4 = nb / 4 * 4, rest = nb - b4;
    /* Column blocks outside, rows inside: a [H, 16] panel stays in L1 while
     * every group of rows uses it. */
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
    for (int b = 0; b < nb; b++) {
        const float *gb = gates + (int64_t)b * G;
        float *hb = h_out + (int64_t)b * H, *cb = c + (int64_t)b * H;
        for (int j = u0; j < u1; j += 4) {
            float32x4_t i = ez_sigmoid_neon(vld1q_f32(gb + j));
            float32x4_t f = ez_sigmoid_neon(vld1q_f32(gb + H + j));
            float32x4_t g = tanh4(vld1q_f32(gb + 2 * H + j));
            float32x4_t o = ez_sigmoid_neon(vld1q_f32(gb + 3 * H + j));
            float32x4_t cn = vfmaq_f32(vmulq_f32(i, g), f, vld1q_f32(cb + j));
            vst1q_f32(cb + j, cn);
            vst1q_f32(hb + j, vmulq_f32(o, tanh4(cn)));
        }
    }
}

ez_lstm_step_fn ez_lstm_step_neon(void) { return step_neon; }

#else

ez_lstm_step_fn ez_lstm_step_neon(void) { return NULL; }

#endif /* EZ_ARCH_AARCH64 */
