/* NEON kernels for baseline ARMv8-A (NEON is architectural on aarch64).
 *
 * Dequantization does the reference's float operations lane by lane with
 * block scales from the same scalar converter (FCVT would quiet a signalling
 * NaN), so it is bit-identical to quant_ref.c. The quantized dots
 * live in quant_neon_dots.h over the widening-multiply primitive below; the
 * dotprod table (quant_dotprod.c) reuses everything here but those dots. */
#include "quant_kernels.h"

#if defined(EZ_ARCH_AARCH64)
#include <arm_neon.h>

/* 16 signed products widened to int16 (|a * b| <= 128 * 128 fits), then
 * pairwise accumulated into int32 lanes. */
static inline int32x4_t dot_i8x16(int32x4_t acc, int8x16_t a, int8x16_t b) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
}

#include "quant_neon_dots.h"

/* dst[0..16) = d * q for 16 signed bytes. */
static inline void store_scaled_i8x16(float *dst, int8x16_t q, float d) {
    const int16x8_t lo = vmovl_s8(vget_low_s8(q)), hi = vmovl_high_s8(q);
    vst1q_f32(dst, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), d));
    vst1q_f32(dst + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(lo)), d));
    vst1q_f32(dst + 8, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), d));
    vst1q_f32(dst + 12, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(hi)), d));
}

/* dst[0..4) = dl * q - ml. */
static inline void store_affine_u16x4(float *dst, uint16x4_t q, float dl, float32x4_t ml) {
    const float32x4_t t = vmulq_n_f32(vcvtq_f32_u32(vmovl_u16(q)), dl);
    vst1q_f32(dst, vsubq_f32(t, ml));
}

/* dst[0..16) = dl * q - ml for 16 unsigned bytes (the K-quant affine form). */
static inline void store_affine_u8x16(float *dst, uint8x16_t q, float dl, float ml) {
    const uint16x8_t lo = vmovl_u8(vget_low_u8(q)), hi = vmovl_high_u8(q);
    const float32x4_t m = vdupq_n_f32(ml);
    store_affine_u16x4(dst, vget_low_u16(lo), dl, m);
    store_affine_u16x4(dst + 4, vget_high_u16(lo), dl, m);
    store_affine_u16x4(dst + 8, vget_low_u16(hi), dl, m);
    store_affine_u16x4(dst + 12, vget_high_u16(hi), dl, m);
}

static void dequant_f16_neon(const void *src, float *dst, int64_t n) {
    const uint8_t *p = (const uint8_t *)src;
    const uint16x8_t abs_mask = vdupq_n_u16(0x7fff), inf = vdupq_n_u16(0x7c00);
    int64_t i = 0;
    int k;
    for (; i + 8 <= n; i += 8) {
        const uint16x8_t h = vld1q_u16((const uint16_t *)(const void *)(p + 2 * i));
        if (EZ_UNLIKELY(vmaxvq_u16(vcgtq_u16(vandq_u16(h, abs_mask), inf)))) {
            /* FCVT would quiet a signalling NaN; numpy keeps it. */
            for (k = 0; k < 8; k++) dst[i + k] = ez_half_to_float(ez_load_u16(p + 2 * (i + k)));
        } else {
            const float16x8_t f = vreinterpretq_f16_u16(h);
            vst1q_f32(dst + i, vcvt_f32_f16(vget_low_f16(f)));
            vst1q_f32(dst + i + 4, vcvt_high_f32_f16(f));
        }
    }
    for (; i < n; i++) dst[i] = ez_half_to_float(ez_load_u16(p + 2 * i));
}

static void dequant_bf16_neon(const void *src, float *dst, int64_t n) {
    const uint8_t *p = (const uint8_t *)src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint16x8_t h = vld1q_u16((const uint16_t *)(const void *)(p + 2 * i));
        vst1q_f32(dst + i, vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)));
        vst1q_f32(dst + i + 4, vreinterpretq_f32_u32(vshll_high_n_u16(h, 16)));
    }
    for (; i < n; i++) dst[i] = ez_bf16_to_f32(ez_load_u16(p + 2 * i));
}

void ez_dequant_q4_0_neon(const void *src, float *dst, int64_t n) {
    const ez_block_q4_0 *b = (const ez_block_q4_0 *)src;
    int64_t i, nb = n / EZ_QK;
    for (i = 0; i < nb; i++, dst += EZ_QK) {
        const float d = ez_half_to_float(b[i].d);
        int8x16_t q[2];
        q4_0_bytes(&b[i], q);
        store_scaled_i8x16(dst, q[0], d);
        store_scaled_i8x16(dst + 16, q[1], d);
    }
}

void ez_dequant_q5_0_neon(const void *src, float *dst, int64_t n) {
    const ez_block_q5_0 *b = (const ez_block_q5_0 *)src;
    int64_t i, nb = n / EZ_QK;
    for (i = 0; i < nb; i++, dst += EZ_QK) {
        const float d = ez_half_to_float(b[i].d);
        int8x16_t q[2];
        q5_0_bytes(&b[i], q);
        store_scaled_i8x16(dst, q[0], d);
        store_scaled_i8x16(dst + 16, q[1], d);
    }
}

void ez_dequant_q8_0_neon(const void *src, float *dst, int64_t n) {
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)src;
    int64_t i, nb = n / EZ_QK;
    for (i = 0; i < nb; i++, dst += EZ_QK) {
        const float d = ez_half_to_float(b[i].d);
        store_scaled_i8x16(dst, vld1q_s8(b[i].qs), d);
        store_scaled_i8x16(dst + 16, vld1q_s8(b[i].qs + 16), d);
    }
}

/* Q4_K and Q5_K: sub-block 2k is the low nibbles of qs[32k..32k+31], 2k+1
 * the high nibbles; Q5_K adds bit k of qh[l] as the fifth bit. */
static void dequant_k4_or_k5(const uint8_t *qs, const uint8_t *qh, uint16_t dh, uint16_t dminh,
                             const uint8_t *scales, float *dst) {
    const float d = ez_half_to_float(dh), dmin = ez_half_to_float(dminh);
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m5 = vdupq_n_u8(0x10);
    uint8x16_t h[2] = {vdupq_n_u8(0), vdupq_n_u8(0)};
    uint8_t sc[8], mn[8];
    int k, j;
    ez_unpack_q4k_scales(scales, sc, mn);
    if (qh) {
        h[0] = vld1q_u8(qh);
        h[1] = vld1q_u8(qh + 16);
    }
    for (k = 0; k < 4; k++, dst += 64) {
        const float dl0 = d * (float)sc[2 * k], ml0 = dmin * (float)mn[2 * k];
        const float dl1 = d * (float)sc[2 * k + 1], ml1 = dmin * (float)mn[2 * k + 1];
        for (j = 0; j < 2; j++) {
            const uint8x16_t q = vld1q_u8(qs + 32 * k + 16 * j);
            uint8x16_t lo = vandq_u8(q, m4), hi = vshrq_n_u8(q, 4);
            if (qh) {
                lo = vorrq_u8(lo, vandq_u8(vshlq_n_u8(h[j], 4), m5));
                hi = vorrq_u8(hi, vandq_u8(vshlq_n_u8(h[j], 3), m5));
                h[j] = vshrq_n_u8(h[j], 2);
            }
            store_affine_u8x16(dst + 16 * j, lo, dl0, ml0);
            store_affine_u8x16(dst + 32 + 16 * j, hi, dl1, ml1);
        }
    }
}

void ez_dequant_q4_k_neon(const void *src, float *dst, int64_t n) {
    const ez_block_q4_k *b = (const ez_block_q4_k *)src;
    int64_t i, nb = n / EZ_QK_K;
    for (i = 0; i < nb; i++, dst += EZ_QK_K) dequant_k4_or_k5(b[i].qs, NULL, b[i].d, b[i].dmin, b[i].scales, dst);
}

void ez_dequant_q5_k_neon(const void *src, float *dst, int64_t n) {
    const ez_block_q5_k *b = (const ez_block_q5_k *)src;
    int64_t i, nb = n / EZ_QK_K;
    for (i = 0; i < nb; i++, dst += EZ_QK_K) dequant_k4_or_k5(b[i].qs, b[i].qh, b[i].d, b[i].dmin, b[i].scales, dst);
}

void ez_dequant_q6_k_neon(const void *src, float *dst, int64_t n) {
    const ez_block_q6_k *b = (const ez_block_q6_k *)src;
    const int8x16_t off = vdupq_n_s8(32);
    int64_t i, nb = n / EZ_QK_K;
    int h, k;
    for (i = 0; i < nb; i++) {
        const float d = ez_half_to_float(b[i].d);
        for (h = 0; h < 2; h++) {
            uint8x16_t q[8];
            q6_k_half_bytes(b[i].ql + 64 * h, b[i].qh + 32 * h, q);
            for (k = 0; k < 8; k++, dst += 16)
                store_scaled_i8x16(dst, vsubq_s8(vreinterpretq_s8_u8(q[k]), off), d * (float)b[i].scales[8 * h + k]);
        }
    }
}

static float dot_f32_neon(int64_t n, const void *w, const void *x) {
    const float *a = (const float *)w, *b = (const float *)x;
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    float sum;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
        s2 = vfmaq_f32(s2, vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
        s3 = vfmaq_f32(s3, vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
    }
    for (; i + 4 <= n; i += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    sum = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; i < n; i++) sum += a[i] * b[i];
    return sum;
}

static float dot_f16_neon(int64_t n, const void *w, const void *x) {
    const uint8_t *a = (const uint8_t *)w;
    const float *b = (const float *)x;
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    float sum;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const float16x8_t h0 = vreinterpretq_f16_u16(vld1q_u16((const uint16_t *)(const void *)(a + 2 * i)));
        const float16x8_t h1 = vreinterpretq_f16_u16(vld1q_u16((const uint16_t *)(const void *)(a + 2 * i + 16)));
        s0 = vfmaq_f32(s0, vcvt_f32_f16(vget_low_f16(h0)), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vcvt_high_f32_f16(h0), vld1q_f32(b + i + 4));
        s2 = vfmaq_f32(s2, vcvt_f32_f16(vget_low_f16(h1)), vld1q_f32(b + i + 8));
        s3 = vfmaq_f32(s3, vcvt_high_f32_f16(h1), vld1q_f32(b + i + 12));
    }
    sum = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; i < n; i++) sum += half_to_float_hw(ez_load_u16(a + 2 * i)) * b[i];
    return sum;
}

static float dot_bf16_neon(int64_t n, const void *w, const void *x) {
    const uint8_t *a = (const uint8_t *)w;
    const float *b = (const float *)x;
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0;
    float sum;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint16x8_t h = vld1q_u16((const uint16_t *)(const void *)(a + 2 * i));
        s0 = vfmaq_f32(s0, vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vreinterpretq_f32_u32(vshll_high_n_u16(h, 16)), vld1q_f32(b + i + 4));
    }
    sum = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < n; i++) sum += ez_bf16_to_f32(ez_load_u16(a + 2 * i)) * b[i];
    return sum;
}

static const ez_type_kernels g_neon[EZ_TYPE_COUNT] = {
    [EZ_TYPE_F32] = {ez_dequant_f32_ref, NULL, dot_f32_neon},
    [EZ_TYPE_F16] = {dequant_f16_neon, NULL, dot_f16_neon},
    [EZ_TYPE_BF16] = {dequant_bf16_neon, NULL, dot_bf16_neon},
    [EZ_TYPE_Q4_0] = {ez_dequant_q4_0_neon, NULL, dot_q4_0_q8_0},
    [EZ_TYPE_Q5_0] = {ez_dequant_q5_0_neon, NULL, dot_q5_0_q8_0},
    [EZ_TYPE_Q8_0] = {ez_dequant_q8_0_neon, ez_quant_q8_0_ref, dot_q8_0_q8_0},
    [EZ_TYPE_Q4_K] = {ez_dequant_q4_k_neon, NULL, dot_q4_k_q8_k},
    [EZ_TYPE_Q5_K] = {ez_dequant_q5_k_neon, NULL, dot_q5_k_q8_k},
    [EZ_TYPE_Q6_K] = {ez_dequant_q6_k_neon, NULL, dot_q6_k_q8_k},
    [EZ_TYPE_Q8_K] = {NULL, ez_quant_q8_k_ref, NULL},
    [EZ_TYPE_Q8_1] = {NULL, ez_quant_q8_1_ref, NULL},
    [EZ_TYPE_Q4_1] = {ez_dequant_q4_1_ref, NULL, dot_q4_1_q8_1},
    [EZ_TYPE_Q5_1] = {ez_dequant_q5_1_ref, NULL, dot_q5_1_q8_1},
    [EZ_TYPE_IQ4_NL] = {ez_dequant_iq4_nl_ref, NULL, dot_iq4_nl_q8_0},
    [EZ_TYPE_MXFP4] = {ez_dequant_mxfp4_ref, NULL, dot_mxfp4_q8_0},
    [EZ_TYPE_Q2_K] = {ez_dequant_q2_k_ref, NULL, dot_q2_k_q8_k},
    [EZ_TYPE_Q3_K] = {ez_dequant_q3_k_ref, NULL, dot_q3_k_q8_k},
    [EZ_TYPE_IQ4_XS] = {ez_dequant_iq4_xs_ref, NULL, dot_iq4_xs_q8_k},
    [EZ_TYPE_TQ2_0] = {ez_dequant_tq2_0_ref, NULL, dot_tq2_0_q8_k},
    [EZ_TYPE_TQ1_0] = {ez_dequant_tq1_0_ref, NULL, dot_tq1_0_q8_k},
    [EZ_TYPE_IQ2_XXS] = {ez_dequant_iq2_xxs_ref, NULL, dot_iq2_xxs_q8_k},
    [EZ_TYPE_IQ2_XS] = {ez_dequant_iq2_xs_ref, NULL, dot_iq2_xs_q8_k},
    [EZ_TYPE_IQ2_S] = {ez_dequant_iq2_s_ref, NULL, dot_iq2_s_q8_k},
    [EZ_TYPE_IQ3_XXS] = {ez_dequant_iq3_xxs_ref, NULL, dot_iq3_xxs_q8_k},
    [EZ_TYPE_IQ3_S] = {ez_dequant_iq3_s_ref, NULL, dot_iq3_s_q8_k},
    [EZ_TYPE_IQ1_S] = {ez_dequant_iq1_s_ref, NULL, dot_iq1_s_q8_k},
    [EZ_TYPE_IQ1_M] = {ez_dequant_iq1_m_ref, NULL, dot_iq1_m_q8_k},
};

const ez_type_kernels *ez_kernels_neon(uint32_t type) {
    if (type >= EZ_TYPE_COUNT || (!g_neon[type].dequant && !g_neon[type].quant)) return NULL;
    return &g_neon[type];
}

#else

const ez_type_kernels *ez_kernels_neon(uint32_t type) {
    (void)type;
    return NULL;
}

#endif
