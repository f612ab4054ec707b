/* NEON variants of the Mamba2 kernels (aarch64, where NEON is baseline).
 * Same contracts as the reference in ssm.c: the conv runs four channels per
 * register, the step four state entries. */
#include "ssm.h"

#if EZ_ARCH_AARCH64

#include <arm_neon.h>
#include <assert.h>

#include "core/kernels/vmath_neon.h"

static inline const float *frame(const float *state, const float *x, int64_t ld_x, int n_ch, int d_conv, int s) {
    return s < 0 ? state + (int64_t)(d_conv - 1 + s) * n_ch : x + (int64_t)s * ld_x;
}

static void conv_neon(const float *state, const float *x, int64_t ld_x, const float *w, const float *b, float *y,
                      int64_t ld_y, int n_tok, int n_ch, int d_conv) {
    int c = 0;
    assert(d_conv <= EZ_SSM_MAX_CONV);
    for (; c + 4 <= n_ch; c += 4) {
        float32x4_t wk[EZ_SSM_MAX_CONV];
        const float32x4_t bias = b ? vld1q_f32(b + c) : vdupq_n_f32(0.0f);
        for (int k = 0; k < d_conv; k++) {
            const float *wc = w + (int64_t)c * d_conv + k;
            const float lane[4] = {wc[0], wc[d_conv], wc[2 * d_conv], wc[3 * d_conv]};
            wk[k] = vld1q_f32(lane);
        }
        for (int t = 0; t < n_tok; t++) {
            float32x4_t acc = bias;
            for (int k = 0; k < d_conv; k++)
                acc = vfmaq_f32(acc, wk[k], vld1q_f32(frame(state, x, ld_x, n_ch, d_conv, t - d_conv + 1 + k) + c));
            vst1q_f32(y + (int64_t)t * ld_y + c, vmulq_f32(acc, ez_sigmoid_neon(acc)));
        }
    }
    for (; c < n_ch; c++) {
        for (int t = 0; t < n_tok; t++) {
            float acc = b ? b[c] : 0.0f;
            for (int k = 0; k < d_conv; k++)
                acc += w[(int64_t)c * d_conv + k] * frame(state, x, ld_x, n_ch, d_conv, t - d_conv + 1 + k)[c];
            y[(int64_t)t * ld_y + c] = acc / (1.0f + expf(-acc));
        }
    }
}

static void step_neon(const ez_ssm_shape *s, float *state, const float *x, const float *B, const float *C,
                      const float *dt, const float *dt_bias, const float *A, const float *D, float *y, int h0, int h1) {
    const int P = s->head_dim, N = s->d_state, heads_per_group = s->n_head / s->n_group;
    for (int h = h0; h < h1; h++) {
        const float dth = ez_softplus(dt[h] + dt_bias[h]), dA = expf(dth * A[h]);
        const float *Bg = B + (int64_t)(h / heads_per_group) * N, *Cg = C + (int64_t)(h / heads_per_group) * N;
        for (int p = 0; p < P; p++) {
            float *sp = state + ((int64_t)h * P + p) * N;
            const float xp = x[h * P + p], xdt = xp * dth;
            float32x4_t acc = vdupq_n_f32(0.0f);
            float tail = 0.0f;
            int n = 0;
            for (; n + 4 <= N; n += 4) {
                const float32x4_t sn = vfmaq_n_f32(vmulq_n_f32(vld1q_f32(sp + n), dA), vld1q_f32(Bg + n), xdt);
                vst1q_f32(sp + n, sn);
                acc = vfmaq_f32(acc, sn, vld1q_f32(Cg + n));
            }
            for (; n < N; n++) {
                sp[n] = sp[n] * dA + xdt * Bg[n];
                tail += sp[n] * Cg[n];
            }
            y[h * P + p] = vaddvq_f32(acc) + tail + D[h] * xp;
        }
    }
}

static const ez_ssm_ops SSM_NEON = {conv_neon, step_neon};

const ez_ssm_ops *ez_ssm_ops_neon(void) { return &SSM_NEON; }

#else

const ez_ssm_ops *ez_ssm_ops_neon(void) { return NULL; }

#endif
