/* NEON variants of the LLM vector ops (aarch64, where NEON is baseline).
 * Same contracts as the reference in ops.c; exp is vmath_neon.h's, the
 * same polynomial as the AVX2 table's. The Q8_0 activation quantizer is
 * bit-identical to ez_llm_quant_q8_0_ref on aarch64 (ggml's NEON loop:
 * id = 1 / d, vcvtnq rounds to nearest even). */
#include "ops.h"

#if EZ_ARCH_AARCH64

#include <arm_neon.h>
#include <math.h>

#include "core/kernels/vmath_neon.h"
#include "core/quant.h"

/* Each of axpy, dot4 and axpy4 has one body for F32 and F16 operands
 * (the KV cache's halves, widened exactly by vcvt); `f16` is a constant in
 * every caller, so each variant compiles to its own loop. */
static inline float32x4_t load_f16(const uint16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

static inline float32x4_t load4(const void *x, int64_t i, int f16) {
    return f16 ? load_f16((const uint16_t *)x + i) : vld1q_f32((const float *)x + i);
}

static inline float value_at(const void *x, int64_t i, int f16) {
    return f16 ? ez_f16_to_f32(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

static float dot_neon(const float *a, const float *b, int64_t n) {
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    float s;
    for (; i + 16 <= n; i += 16) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
        s2 = vfmaq_f32(s2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
        s3 = vfmaq_f32(s3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
    }
    for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    s = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static EZ_ALWAYS_INLINE void axpy_body(float *y, float a, const void *x, int64_t n, int f16) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), load4(x, i, f16), a));
    for (; i < n; i++) y[i] += a * value_at(x, i, f16);
}

static EZ_ALWAYS_INLINE void dot4_body(const float *a, int64_t lda, const void *b, int64_t n, float out[4], int f16) {
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = load4(b, i, f16);
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), v);
        s1 = vfmaq_f32(s1, vld1q_f32(a + lda + i), v);
        s2 = vfmaq_f32(s2, vld1q_f32(a + 2 * lda + i), v);
        s3 = vfmaq_f32(s3, vld1q_f32(a + 3 * lda + i), v);
    }
    /* four horizontal sums at once: pairwise adds, twice */
    vst1q_f32(out, vpaddq_f32(vpaddq_f32(s0, s1), vpaddq_f32(s2, s3)));
    for (; i < n; i++)
        for (int r = 0; r < 4; r++) out[r] += a[r * lda + i] * value_at(b, i, f16);
}

static EZ_ALWAYS_INLINE void axpy4_body(float *y, int64_t ldy, const float w[4], const void *x, int64_t n, int f16) {
    const float32x4_t vw = vld1q_f32(w);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = load4(x, i, f16);
        vst1q_f32(y + i, vfmaq_laneq_f32(vld1q_f32(y + i), v, vw, 0));
        vst1q_f32(y + ldy + i, vfmaq_laneq_f32(vld1q_f32(y + ldy + i), v, vw, 1));
        vst1q_f32(y + 2 * ldy + i, vfmaq_laneq_f32(vld1q_f32(y + 2 * ldy + i), v, vw, 2));
        vst1q_f32(y + 3 * ldy + i, vfmaq_laneq_f32(vld1q_f32(y + 3 * ldy + i), v, vw, 3));
    }
    for (; i < n; i++)
        for (int r = 0; r < 4; r++) y[r * ldy + i] += w[r] * value_at(x, i, f16);
}

static void axpy_neon(float *y, float a, const float *x, int64_t n) { axpy_body(y, a, x, n, 0); }
static void dot4_neon(const float *a, int64_t lda, const float *b, int64_t n, float out[4]) {
    dot4_body(a, lda, b, n, out, 0);
}
static void axpy4_neon(float *y, int64_t ldy, const float w[4], const float *x, int64_t n) {
    axpy4_body(y, ldy, w, x, n, 0);
}
static void axpy_f16_neon(float *y, float a, const uint16_t *x, int64_t n) { axpy_body(y, a, x, n, 1); }
static void dot4_f16_neon(const float *a, int64_t lda, const uint16_t *b, int64_t n, float out[4]) {
    dot4_body(a, lda, b, n, out, 1);
}
static void axpy4_f16_neon(float *y, int64_t ldy, const float w[4], const uint16_t *x, int64_t n) {
    axpy4_body(y, ldy, w, x, n, 1);
}

static void rms_norm_neon(float *y, const float *x, const float *w, int64_t n, float eps) {
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
    int64_t i = 0;
    float ss, scale;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + 4);
        s0 = vfmaq_f32(s0, a, a);
        s1 = vfmaq_f32(s1, b, b);
    }
    for (; i + 4 <= n; i += 4) {
        const float32x4_t a = vld1q_f32(x + i);
        s0 = vfmaq_f32(s0, a, a);
    }
    ss = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++) ss += x[i] * x[i];
    scale = 1.0f / sqrtf(ss / (float)n + eps);
    for (i = 0; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), scale), vld1q_f32(w + i)));
    for (; i < n; i++) y[i] = x[i] * scale * w[i];
}

static void gelu_tanh_mul_neon(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(g + i, vmulq_f32(ez_gelu_tanh_neon(vld1q_f32(g + i)), vld1q_f32(u + i)));
    for (; i < n; i++) {
        const float x = g[i];
        const float t = -2.0f * 0.7978845608028654f * (x + 0.044715f * x * x * x);
        g[i] = x / (1.0f + expf(t)) * u[i];
    }
}

static void silu_mul_neon(float *g, const float *u, int64_t n) {
    const float32x4_t one = vdupq_n_f32(1.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t x = vld1q_f32(g + i);
        const float32x4_t s = vdivq_f32(x, vaddq_f32(one, ez_exp_neon(vnegq_f32(x))));
        vst1q_f32(g + i, vmulq_f32(s, vld1q_f32(u + i)));
    }
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void softmax_neon(float *x, int64_t n) {
    float32x4_t vmax = vdupq_n_f32(-INFINITY), vsum = vdupq_n_f32(0.0f), vm;
    int64_t i = 0;
    float mx, sum, inv;
    for (; i + 4 <= n; i += 4) vmax = vmaxq_f32(vmax, vld1q_f32(x + i));
    mx = vmaxvq_f32(vmax);
    for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    vm = vdupq_n_f32(mx);
    for (i = 0; i + 4 <= n; i += 4) {
        /* below -87.3 ez_exp_neon clamps; expf is (nearly) 0 there */
        const float32x4_t d = vsubq_f32(vld1q_f32(x + i), vm);
        const float32x4_t e = vbslq_f32(vcltq_f32(d, vdupq_n_f32(-87.3f)), vdupq_n_f32(0.0f), ez_exp_neon(d));
        vst1q_f32(x + i, e);
        vsum = vaddq_f32(vsum, e);
    }
    sum = vaddvq_f32(vsum);
    for (; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    inv = 1.0f / sum;
    for (i = 0; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), inv));
    for (; i < n; i++) x[i] *= inv;
}

static void quant_q8_0_neon(const float *x, void *dst, int64_t n) {
    ez_block_q8_0 *y = (ez_block_q8_0 *)dst;
    for (int64_t b = 0; b < n / EZ_QK; b++, x += EZ_QK) {
        float32x4_t v[EZ_QK / 4], m = vdupq_n_f32(0.0f);
        float amax, d, id;
        int16x8_t h[EZ_QK / 8];
        for (int j = 0; j < EZ_QK / 4; j++) {
            v[j] = vld1q_f32(x + 4 * j);
            m = vmaxq_f32(m, vabsq_f32(v[j]));
        }
        amax = vmaxvq_f32(m);
        d = amax / 127.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = ez_f32_to_f16(d);
        for (int j = 0; j < EZ_QK / 8; j++)
            h[j] = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[2 * j], id))),
                                vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(v[2 * j + 1], id))));
        for (int j = 0; j < EZ_QK / 16; j++)
            vst1q_s8(y[b].qs + 16 * j, vcombine_s8(vqmovn_s16(h[2 * j]), vqmovn_s16(h[2 * j + 1])));
    }
}

/* ---- the F16 KV cache's conversions ---- */

/* vcvt rounds by FPCR: to nearest even unless the host changed it. */
static void to_f16_neon(uint16_t *dst, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++) dst[i] = ez_f32_to_f16(x[i]);
}

static const ez_llm_ops OPS_NEON = {dot_neon,        axpy_neon,          dot4_neon,      axpy4_neon,
                                    rms_norm_neon,   gelu_tanh_mul_neon, silu_mul_neon,  softmax_neon,
                                    quant_q8_0_neon, dot4_f16_neon,      axpy_f16_neon,  axpy4_f16_neon,
                                    to_f16_neon};

const ez_llm_ops *ez_llm_ops_neon(void) { return &OPS_NEON; }

#else

const ez_llm_ops *ez_llm_ops_neon(void) { return NULL; }

#endif
