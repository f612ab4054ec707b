/* NEON pieces of the fast Kokoro ops (ops_kernels.h): the AVX2 ones
 * (ops_avx2.c) on four lanes, with the same polynomials (Cephes' sin and
 * exp, evaluated with fused multiply-adds), so the same error bounds hold:
 * see ops_avx2.c's file comment and tests/c/test_tts_ops.c. NEON is part
 * of the aarch64 baseline, so this file needs no special flags. */
#include "tts/ops_kernels.h"

#if EZ_ARCH_AARCH64

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "core/kernels/vmath_neon.h"

/* ---- vector math ------------------------------------------------------------------ */

/* Valid where |x| <= 8192; sin_ps checks. Octant reduction by pi/4 in three
 * parts, then the sine or cosine polynomial. */
static inline float32x4_t sin_ps_reduced(float32x4_t x) {
    float32x4_t ax = vabsq_f32(x), y, r, z, ps, pc, res;
    uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x80000000u)), use_cos;
    int32x4_t j = vcvtq_s32_f32(vmulq_n_f32(ax, 1.27323954473516f));
    j = vandq_s32(vaddq_s32(j, vdupq_n_s32(1)), vdupq_n_s32(~1));
    y = vcvtq_f32_s32(j);
    /* octants 4..7 flip the sign; octants 2, 3, 6, 7 take the cosine polynomial */
    sign = veorq_u32(sign, vshlq_n_u32(vandq_u32(vreinterpretq_u32_s32(j), vdupq_n_u32(4)), 29));
    use_cos = vceqq_s32(vandq_s32(j, vdupq_n_s32(2)), vdupq_n_s32(2));
    r = vfmsq_f32(ax, y, vdupq_n_f32(0.78515625f));
    r = vfmsq_f32(r, y, vdupq_n_f32(2.4187564849853515625e-4f));
    r = vfmsq_f32(r, y, vdupq_n_f32(3.77489497744594108e-8f));
    z = vmulq_f32(r, r);
    pc = vdupq_n_f32(2.443315711809948e-5f);
    pc = vfmaq_f32(vdupq_n_f32(-1.388731625493765e-3f), pc, z);
    pc = vfmaq_f32(vdupq_n_f32(4.166664568298827e-2f), pc, z);
    pc = vmulq_f32(vmulq_f32(pc, z), z);
    pc = vfmsq_f32(pc, vdupq_n_f32(0.5f), z);
    pc = vaddq_f32(pc, vdupq_n_f32(1.0f));
    ps = vdupq_n_f32(-1.9515295891e-4f);
    ps = vfmaq_f32(vdupq_n_f32(8.3321608736e-3f), ps, z);
    ps = vfmaq_f32(vdupq_n_f32(-1.6666654611e-1f), ps, z);
    ps = vfmaq_f32(r, vmulq_f32(ps, z), r);
    res = vbslq_f32(use_cos, pc, ps);
    return vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(res), sign));
}

static inline float32x4_t sin_ps(float32x4_t x) {
    uint32x4_t big = vmvnq_u32(vcleq_f32(vabsq_f32(x), vdupq_n_f32(8192.0f))); /* also inf, NaN */
    if (vmaxvq_u32(big)) {
        float v[4];
        vst1q_f32(v, x);
        for (int i = 0; i < 4; i++) v[i] = sinf(v[i]);
        return vbslq_f32(big, vld1q_f32(v), sin_ps_reduced(x));
    }
    return sin_ps_reduced(x);
}

/* The last n < 4 values of a row go through the vector code in a
 * zero-padded buffer (what the pad lanes give is dropped). */
static inline float32x4_t load_tail(const float *x, int64_t n) {
    float buf[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    memcpy(buf, x, sizeof(float) * (size_t)n);
    return vld1q_f32(buf);
}

static inline void store_tail(float *x, int64_t n, float32x4_t v) {
    float buf[4];
    vst1q_f32(buf, v);
    memcpy(x, buf, sizeof(float) * (size_t)n);
}

/* ---- Snake, AdaIN --------------------------------------------------------------------- */

static inline float32x4_t snake_ps(float32x4_t v, float32x4_t alpha, float32x4_t inv_alpha) {
    float32x4_t s = sin_ps(vmulq_f32(alpha, v));
    return vfmaq_f32(v, inv_alpha, vmulq_f32(s, s));
}

static void snake_neon(float *x, int64_t n, float alpha) {
    const float32x4_t a = vdupq_n_f32(alpha), ia = vdupq_n_f32(1.0f / alpha);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, snake_ps(vld1q_f32(x + i), a, ia));
    if (i < n) store_tail(x + i, n - i, snake_ps(load_tail(x + i, n - i), a, ia));
}

/* Two passes, sums in double (two lanes per vector, two vectors). */
static void mean_var_neon(const float *x, int64_t n, double *mean_out, double *var_out) {
    float64x2_t s0 = vdupq_n_f64(0.0), s1 = s0, m;
    double sum, mean, var;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t v = vld1q_f32(x + i);
        s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(v)));
        s1 = vaddq_f64(s1, vcvt_high_f64_f32(v));
    }
    sum = vaddvq_f64(vaddq_f64(s0, s1));
    for (; i < n; i++) sum += x[i];
    mean = sum / (double)n;
    m = vdupq_n_f64(mean);
    s0 = s1 = vdupq_n_f64(0.0);
    for (i = 0; i + 4 <= n; i += 4) {
        float32x4_t v = vld1q_f32(x + i);
        float64x2_t d0 = vsubq_f64(vcvt_f64_f32(vget_low_f32(v)), m), d1 = vsubq_f64(vcvt_high_f64_f32(v), m);
        s0 = vfmaq_f64(s0, d0, d0);
        s1 = vfmaq_f64(s1, d1, d1);
    }
    var = vaddvq_f64(vaddq_f64(s0, s1));
    for (; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    *mean_out = mean;
    *var_out = var / (double)n;
}

/* (x - mean) is formed in double and rounded once, as the reference does. */
static inline float32x4_t normalize_ps(float32x4_t v, float64x2_t mean, float32x4_t inv, float32x4_t scale,
                                       float32x4_t shift) {
    float32x2_t lo = vcvt_f32_f64(vsubq_f64(vcvt_f64_f32(vget_low_f32(v)), mean));
    float32x4_t d = vcvt_high_f32_f64(lo, vsubq_f64(vcvt_high_f64_f32(v), mean));
    return vfmaq_f32(shift, scale, vmulq_f32(d, inv));
}

static inline float32x4_t act_ps(float32x4_t v, int act, float32x4_t param, float32x4_t inv_param) {
    if (act == EZ_TTS_ACT_SNAKE) return snake_ps(v, param, inv_param);
    if (act == EZ_TTS_ACT_LEAKY_RELU) return vbslq_f32(vcltzq_f32(v), vmulq_f32(v, param), v);
    return v;
}

static void affine_act_neon(float *x, int64_t n, double mean, float inv, float scale, float shift, int act,
                            float param) {
    const float64x2_t m = vdupq_n_f64(mean);
    const float32x4_t vi = vdupq_n_f32(inv), vs = vdupq_n_f32(scale), vb = vdupq_n_f32(shift);
    const float32x4_t p = vdupq_n_f32(param), ip = vdupq_n_f32(1.0f / param);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, act_ps(normalize_ps(vld1q_f32(x + i), m, vi, vs, vb), act, p, ip));
    if (i < n) store_tail(x + i, n - i, act_ps(normalize_ps(load_tail(x + i, n - i), m, vi, vs, vb), act, p, ip));
}

/* ---- GELU (tanh form) ----------------------------------------------------------------- */

static void gelu_tanh_neon(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, ez_gelu_tanh_neon(vld1q_f32(x + i)));
    if (i < n) store_tail(x + i, n - i, ez_gelu_tanh_neon(load_tail(x + i, n - i)));
}

static const ez_tts_kernels neon_kernels = {
    snake_neon, mean_var_neon, affine_act_neon, gelu_tanh_neon,
};

const ez_tts_kernels *ez_tts_kernels_neon(void) { return &neon_kernels; }

#else

const ez_tts_kernels *ez_tts_kernels_neon(void) { return NULL; }

#endif
