/* Vector math for NEON kernels, shared by the models' *_neon.c files
 * (include it only inside their EZ_ARCH_AARCH64 block). The same
 * polynomials as vmath_avx2.h, so the same error bounds:
 *
 * ez_exp_neon: e^x for x clamped to [-87.3, 88.3]: x = n ln2 + r with
 *   |r| <= ln2 / 2, e^r by Cephes' expf polynomial (degree 7 in r, about
 *   1 ulp), 2^n through the exponent bits.
 * ez_sigmoid_neon: 1 / (1 + e^-x) on top of it.
 * ez_gelu_tanh_neon: GELU's tanh form 0.5 x (1 + tanh u), u = sqrt(2 / pi)
 *   (x + 0.044715 x^3), as x / (1 + e^-2u): no cancellation, no overflow. */
#ifndef EZ_VMATH_NEON_H
#define EZ_VMATH_NEON_H

#include <arm_neon.h>

static inline float32x4_t ez_exp_neon(float32x4_t x) {
    float32x4_t n, r, p;
    int32x4_t e;
    x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.3f)), vdupq_n_f32(88.3f));
    n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
    r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(e));
}

static inline float32x4_t ez_sigmoid_neon(float32x4_t x) {
    const float32x4_t one = vdupq_n_f32(1.0f);
    return vdivq_f32(one, vaddq_f32(one, ez_exp_neon(vnegq_f32(x))));
}

static inline float32x4_t ez_gelu_tanh_neon(float32x4_t x) {
    float32x4_t x3 = vmulq_f32(vmulq_f32(x, x), x);
    float32x4_t e = ez_exp_neon(vmulq_n_f32(vfmaq_n_f32(x, x3, 0.044715f), -2.0f * 0.7978845608028654f));
    return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), e));
}

#endif /* EZ_VMATH_NEON_H */
