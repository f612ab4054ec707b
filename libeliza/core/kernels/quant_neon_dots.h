/* NEON unpacking helpers and quantized dot kernels, written once over an
 * int8 multiply-accumulate primitive that the including file defines first:
 *
 *   static inline int32x4_t dot_i8x16(int32x4_t acc, int8x16_t a, int8x16_t b);
 *     acc plus the 16 products a[i] * b[i], spread over the four lanes.
 *
 * quant_neon.c defines it with widening multiplies (baseline ARMv8),
 * quant_dotprod.c with SDOT (ARMv8.2 dotprod). Which lane receives which
 * product differs between the two, so every accumulator covers exactly one
 * scale group and is only ever reduced whole. Aarch64 only. */
#ifndef EZ_QUANT_NEON_DOTS_H
#define EZ_QUANT_NEON_DOTS_H

#include <arm_neon.h>

#include "quant_kernels.h"
#include "quant_tables.h"

/* Float16 -> float32 of two scales at once, for dots only: the hardware
 * conversion quiets signalling NaNs, which dequantization must not do. */
static inline float32x2_t halves_to_float(uint16_t a, uint16_t b) {
    const uint16x4_t h = vcreate_u16((uint64_t)a | ((uint64_t)b << 16));
    return vget_low_f32(vcvt_f32_f16(vreinterpret_f16_u16(h)));
}

static inline float half_to_float_hw(uint16_t h) {
    return vget_lane_f32(halves_to_float(h, 0), 0);
}

static inline float half_product(uint16_t a, uint16_t b) {
    const float32x2_t v = halves_to_float(a, b);
    return vget_lane_f32(v, 0) * vget_lane_f32(v, 1);
}

/* 8 bits -> 8 bytes of 0xff / 0x00, twice: bits of lo for bytes 0-7, of hi
 * for bytes 8-15. */
static inline uint8x16_t bits_to_bytes(uint8_t lo, uint8_t hi) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    return vtstq_u8(vcombine_u8(vdup_n_u8(lo), vdup_n_u8(hi)), vld1q_u8(bit));
}

/* Q4_0 quants as signed bytes q - 8: q[0] elements 0-15, q[1] 16-31. */
static inline void q4_0_bytes(const ez_block_q4_0 *b, int8x16_t q[2]) {
    const uint8x16_t v = vld1q_u8(b->qs);
    const int8x16_t eight = vdupq_n_s8(8);
    q[0] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f))), eight);
    q[1] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight);
}

/* Q5_0 quants as signed bytes q - 16, fifth bit j of qh for element j. */
static inline void q5_0_bytes(const ez_block_q5_0 *b, int8x16_t q[2]) {
    const uint8x16_t v = vld1q_u8(b->qs);
    const uint8x16_t m5 = vdupq_n_u8(0x10);
    const int8x16_t sixteen = vdupq_n_s8(16);
    const uint8x16_t h0 = vandq_u8(bits_to_bytes(b->qh[0], b->qh[1]), m5);
    const uint8x16_t h1 = vandq_u8(bits_to_bytes(b->qh[2], b->qh[3]), m5);
    q[0] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v, vdupq_n_u8(0x0f)), h0)), sixteen);
    q[1] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v, 4), h1)), sixteen);
}

/* The eight 16-element sub-blocks of a Q6_K half as unsigned 6-bit values,
 * in element order: q[2k] and q[2k+1] are elements 32k..32k+31. */
static inline void q6_k_half_bytes(const uint8_t *ql, const uint8_t *qh, uint8x16_t q[8]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m2 = vdupq_n_u8(0x30);
    int j;
    for (j = 0; j < 2; j++) {
        const uint8x16_t l0 = vld1q_u8(ql + 16 * j), l1 = vld1q_u8(ql + 32 + 16 * j);
        const uint8x16_t h = vld1q_u8(qh + 16 * j);
        q[0 + j] = vorrq_u8(vandq_u8(l0, m4), vandq_u8(vshlq_n_u8(h, 4), m2));
        q[2 + j] = vorrq_u8(vandq_u8(l1, m4), vandq_u8(vshlq_n_u8(h, 2), m2));
        q[4 + j] = vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(h, m2));
        q[6 + j] = vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(vshrq_n_u8(h, 2), m2));
    }
}

static inline float32x4_t q4_0_block(const ez_block_q4_0 *a, const ez_block_q8_0 *b, float32x4_t acc) {
    int8x16_t q[2];
    int32x4_t s;
    q4_0_bytes(a, q);
    s = dot_i8x16(dot_i8x16(vdupq_n_s32(0), q[0], vld1q_s8(b->qs)), q[1], vld1q_s8(b->qs + 16));
    return vfmaq_n_f32(acc, vcvtq_f32_s32(s), half_product(a->d, b->d));
}

static inline float32x4_t q5_0_block(const ez_block_q5_0 *a, const ez_block_q8_0 *b, float32x4_t acc) {
    int8x16_t q[2];
    int32x4_t s;
    q5_0_bytes(a, q);
    s = dot_i8x16(dot_i8x16(vdupq_n_s32(0), q[0], vld1q_s8(b->qs)), q[1], vld1q_s8(b->qs + 16));
    return vfmaq_n_f32(acc, vcvtq_f32_s32(s), half_product(a->d, b->d));
}

static inline float32x4_t q8_0_block(const ez_block_q8_0 *a, const ez_block_q8_0 *b, float32x4_t acc) {
    const int32x4_t s0 = dot_i8x16(vdupq_n_s32(0), vld1q_s8(a->qs), vld1q_s8(b->qs));
    const int32x4_t s = dot_i8x16(s0, vld1q_s8(a->qs + 16), vld1q_s8(b->qs + 16));
    return vfmaq_n_f32(acc, vcvtq_f32_s32(s), half_product(a->d, b->d));
}

/* Two float accumulators, one per alternate block, hide the FMA latency. */
#define EZ_DOT_BLOCKS32(wtype, block_fn)                                   \
    const wtype *a = (const wtype *)w;                                     \
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)x;                     \
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);        \
    int64_t i = 0, nb = n / EZ_QK;                                         \
    for (; i + 2 <= nb; i += 2) {                                          \
        acc0 = block_fn(&a[i], &b[i], acc0);                               \
        acc1 = block_fn(&a[i + 1], &b[i + 1], acc1);                       \
    }                                                                      \
    if (i < nb) acc0 = block_fn(&a[i], &b[i], acc0);                       \
    return vaddvq_f32(vaddq_f32(acc0, acc1))

static float dot_q4_0_q8_0(int64_t n, const void *w, const void *x) {
    EZ_DOT_BLOCKS32(ez_block_q4_0, q4_0_block);
}

static float dot_q5_0_q8_0(int64_t n, const void *w, const void *x) {
    EZ_DOT_BLOCKS32(ez_block_q5_0, q5_0_block);
}

static float dot_q8_0_q8_0(int64_t n, const void *w, const void *x) {
    EZ_DOT_BLOCKS32(ez_block_q8_0, q8_0_block);
}
#undef EZ_DOT_BLOCKS32

/* sum(min_k * (bsum[2k] + bsum[2k+1])) of a Q4_K / Q5_K super-block. */
static inline int k_min_sum(const uint8_t mn[8], const int16_t bsums[16]) {
    const int16x8_t pairs = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
    const int16x8_t m = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn)));
    const int32x4_t s = vmull_s16(vget_low_s16(pairs), vget_low_s16(m));
    return vaddvq_s32(vmlal_s16(s, vget_high_s16(pairs), vget_high_s16(m)));
}

/* Integer sum(scale_k * q * y) of a Q4_K super-block (qh NULL) or a Q5_K
 * one (qh its 32 fifth-bit bytes). */
static inline int k_scaled_sum(const uint8_t *qs, const uint8_t *qh, const int8_t *y, const uint8_t sc[8]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m5 = vdupq_n_u8(0x10);
    uint8x16_t h0 = vdupq_n_u8(0), h1 = vdupq_n_u8(0);
    int32x4_t acc = vdupq_n_s32(0);
    int k;
    if (qh) {
        h0 = vld1q_u8(qh);
        h1 = vld1q_u8(qh + 16);
    }
    for (k = 0; k < 4; k++) {
        const uint8x16_t q0 = vld1q_u8(qs + 32 * k), q1 = vld1q_u8(qs + 32 * k + 16);
        uint8x16_t lo0 = vandq_u8(q0, m4), lo1 = vandq_u8(q1, m4);
        uint8x16_t hi0 = vshrq_n_u8(q0, 4), hi1 = vshrq_n_u8(q1, 4);
        int32x4_t s0, s1;
        if (qh) {
            /* bit 2k of qh[l] is the fifth bit of sub-block 2k, bit 2k+1 of 2k+1 */
            lo0 = vorrq_u8(lo0, vandq_u8(vshlq_n_u8(h0, 4), m5));
            lo1 = vorrq_u8(lo1, vandq_u8(vshlq_n_u8(h1, 4), m5));
            hi0 = vorrq_u8(hi0, vandq_u8(vshlq_n_u8(h0, 3), m5));
            hi1 = vorrq_u8(hi1, vandq_u8(vshlq_n_u8(h1, 3), m5));
            h0 = vshrq_n_u8(h0, 2);
            h1 = vshrq_n_u8(h1, 2);
        }
        s0 = dot_i8x16(vdupq_n_s32(0), vreinterpretq_s8_u8(lo0), vld1q_s8(y + 64 * k));
        s0 = dot_i8x16(s0, vreinterpretq_s8_u8(lo1), vld1q_s8(y + 64 * k + 16));
        s1 = dot_i8x16(vdupq_n_s32(0), vreinterpretq_s8_u8(hi0), vld1q_s8(y + 64 * k + 32));
        s1 = dot_i8x16(s1, vreinterpretq_s8_u8(hi1), vld1q_s8(y + 64 * k + 48));
        acc = vmlaq_n_s32(acc, s0, sc[2 * k]);
        acc = vmlaq_n_s32(acc, s1, sc[2 * k + 1]);
    }
    return vaddvq_s32(acc);
}

static float dot_q4_k_q8_k(int64_t n, const void *w, const void *x) {
    const ez_block_q4_k *a = (const ez_block_q4_k *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    for (i = 0; i < nb; i++) {
        uint8_t sc[8], mn[8];
        const float32x2_t dd = halves_to_float(a[i].d, a[i].dmin);
        float d = vget_lane_f32(dd, 0) * b[i].d, dmin = vget_lane_f32(dd, 1) * b[i].d;
        ez_unpack_q4k_scales(a[i].scales, sc, mn);
        d *= (float)k_scaled_sum(a[i].qs, NULL, b[i].qs, sc);
        dmin *= (float)k_min_sum(mn, b[i].bsums);
        sum += d - dmin;
    }
    return sum;
}

static float dot_q5_k_q8_k(int64_t n, const void *w, const void *x) {
    const ez_block_q5_k *a = (const ez_block_q5_k *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    for (i = 0; i < nb; i++) {
        uint8_t sc[8], mn[8];
        const float32x2_t dd = halves_to_float(a[i].d, a[i].dmin);
        float d = vget_lane_f32(dd, 0) * b[i].d, dmin = vget_lane_f32(dd, 1) * b[i].d;
        ez_unpack_q4k_scales(a[i].scales, sc, mn);
        d *= (float)k_scaled_sum(a[i].qs, a[i].qh, b[i].qs, sc);
        dmin *= (float)k_min_sum(mn, b[i].bsums);
        sum += d - dmin;
    }
    return sum;
}

static float dot_q6_k_q8_k(int64_t n, const void *w, const void *x) {
    const ez_block_q6_k *a = (const ez_block_q6_k *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    const int8x16_t off = vdupq_n_s8(32);
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int h, k;
    for (i = 0; i < nb; i++) {
        int32x4_t acc = vdupq_n_s32(0);
        float d;
        for (h = 0; h < 2; h++) {
            uint8x16_t q[8];
            q6_k_half_bytes(a[i].ql + 64 * h, a[i].qh + 32 * h, q);
            for (k = 0; k < 8; k++) {
                const int8x16_t qs = vsubq_s8(vreinterpretq_s8_u8(q[k]), off);
                const int32x4_t s = dot_i8x16(vdupq_n_s32(0), qs, vld1q_s8(b[i].qs + 128 * h + 16 * k));
                acc = vmlaq_n_s32(acc, s, a[i].scales[8 * h + k]);
            }
        }
        d = half_to_float_hw(a[i].d) * b[i].d;
        d *= (float)vaddvq_s32(acc);
        sum += d;
    }
    return sum;
}

/* ---- the types added for issue 13 ---------------------------------------------- */

/* Q4_1 / Q5_1 against Q8_1: unsigned codes (< 32, so valid as signed bytes)
 * in integers, the min term m * s beside the vector sum. */
static float dot_q4_1_q8_1(int64_t n, const void *w, const void *x) {
    const ez_block_q4_1 *a = (const ez_block_q4_1 *)w;
    const ez_block_q8_1 *b = (const ez_block_q8_1 *)x;
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    float32x4_t acc = vdupq_n_f32(0.0f);
    float ms = 0.0f;
    int64_t i, nb = n / EZ_QK;
    for (i = 0; i < nb; i++) {
        const uint8x16_t v = vld1q_u8(a[i].qs);
        const float32x2_t dm = halves_to_float(a[i].d, a[i].m);
        int32x4_t s = dot_i8x16(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(v, m4)), vld1q_s8(b[i].qs));
        s = dot_i8x16(s, vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), vld1q_s8(b[i].qs + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s), vget_lane_f32(dm, 0) * b[i].d);
        ms += vget_lane_f32(dm, 1) * b[i].s;
    }
    return vaddvq_f32(acc) + ms;
}

static float dot_q5_1_q8_1(int64_t n, const void *w, const void *x) {
    const ez_block_q5_1 *a = (const ez_block_q5_1 *)w;
    const ez_block_q8_1 *b = (const ez_block_q8_1 *)x;
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m5 = vdupq_n_u8(0x10);
    float32x4_t acc = vdupq_n_f32(0.0f);
    float ms = 0.0f;
    int64_t i, nb = n / EZ_QK;
    for (i = 0; i < nb; i++) {
        const uint8x16_t v = vld1q_u8(a[i].qs);
        const uint8x16_t h0 = vandq_u8(bits_to_bytes(a[i].qh[0], a[i].qh[1]), m5);
        const uint8x16_t h1 = vandq_u8(bits_to_bytes(a[i].qh[2], a[i].qh[3]), m5);
        const float32x2_t dm = halves_to_float(a[i].d, a[i].m);
        int32x4_t s = dot_i8x16(vdupq_n_s32(0), vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v, m4), h0)), vld1q_s8(b[i].qs));
        s = dot_i8x16(s, vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v, 4), h1)), vld1q_s8(b[i].qs + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s), vget_lane_f32(dm, 0) * b[i].d);
        ms += vget_lane_f32(dm, 1) * b[i].s;
    }
    return vaddvq_f32(acc) + ms;
}

/* Integer sum of a table-coded 32-element block (IQ4_NL, MXFP4, an IQ4_XS
 * sub-block): Q4_0's nibble order, each code looked up in kv. */
static inline int32x4_t table_block_sum(int8x16_t kv, const uint8_t *qs, const int8_t *y) {
    const uint8x16_t v = vld1q_u8(qs);
    const int32x4_t s = dot_i8x16(vdupq_n_s32(0), vqtbl1q_s8(kv, vandq_u8(v, vdupq_n_u8(0x0f))), vld1q_s8(y));
    return dot_i8x16(s, vqtbl1q_s8(kv, vshrq_n_u8(v, 4)), vld1q_s8(y + 16));
}

static float dot_iq4_nl_q8_0(int64_t n, const void *w, const void *x) {
    const ez_block_iq4_nl *a = (const ez_block_iq4_nl *)w;
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)x;
    const int8x16_t kv = vld1q_s8(ez_kvalues_iq4nl);
    float32x4_t acc = vdupq_n_f32(0.0f);
    int64_t i, nb = n / EZ_QK;
    for (i = 0; i < nb; i++)
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(table_block_sum(kv, a[i].qs, b[i].qs)), half_product(a[i].d, b[i].d));
    return vaddvq_f32(acc);
}

static float dot_mxfp4_q8_0(int64_t n, const void *w, const void *x) {
    const ez_block_mxfp4 *a = (const ez_block_mxfp4 *)w;
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)x;
    const int8x16_t kv = vld1q_s8(ez_kvalues_mxfp4);
    float32x4_t acc = vdupq_n_f32(0.0f);
    int64_t i, nb = n / EZ_QK;
    for (i = 0; i < nb; i++) {
        const float d = ez_e8m0_to_float_half(a[i].e) * half_to_float_hw(b[i].d);
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(table_block_sum(kv, a[i].qs, b[i].qs)), d);
    }
    return vaddvq_f32(acc);
}

static float dot_iq4_xs_q8_k(int64_t n, const void *w, const void *x) {
    const ez_block_iq4_xs *a = (const ez_block_iq4_xs *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    const int8x16_t kv = vld1q_s8(ez_kvalues_iq4nl);
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int k;
    for (i = 0; i < nb; i++) {
        const uint16_t sh = ez_load_u16(&a[i].scales_h);
        int32x4_t acc = vdupq_n_s32(0);
        float d;
        for (k = 0; k < 8; k++) {
            const int ls = (((a[i].scales_l[k / 2] >> (4 * (k % 2))) & 15) | (((sh >> (2 * k)) & 3) << 4)) - 32;
            acc = vmlaq_n_s32(acc, table_block_sum(kv, a[i].qs + 16 * k, b[i].qs + 32 * k), ls);
        }
        d = half_to_float_hw(a[i].d) * b[i].d;
        d *= (float)vaddvq_s32(acc);
        sum += d;
    }
    return sum;
}

/* The 2-bit codes of Q2_K / Q3_K / TQ2_0 for elements 128h + 32s + 16j ..
 * + 15 (sub-block 8h + 2s + j): bits 2s..2s+1 of bytes 32h + 16j .. + 15. */
static inline uint8x16_t two_bit_codes(const uint8_t *qs, int h, int s, int j) {
    return vandq_u8(vshlq_u8(vld1q_u8(qs + 32 * h + 16 * j), vdupq_n_s8((int8_t)(-2 * s))), vdupq_n_u8(3));
}

static float dot_q2_k_q8_k(int64_t n, const void *w, const void *x) {
    const ez_block_q2_k *a = (const ez_block_q2_k *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int h, s, j;
    for (i = 0; i < nb; i++) {
        const uint8x16_t sc = vld1q_u8(a[i].scales);
        const int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(vshrq_n_u8(sc, 4))));
        const int16x8_t m1 = vreinterpretq_s16_u16(vmovl_high_u8(vshrq_n_u8(sc, 4)));
        const int32x4_t mp = vmull_s16(vget_low_s16(m0), vld1_s16(b[i].bsums));
        int32x4_t msum = vmlal_s16(mp, vget_high_s16(m0), vld1_s16(b[i].bsums + 4));
        int32x4_t acc = vdupq_n_s32(0);
        const float32x2_t dd = halves_to_float(a[i].d, a[i].dmin);
        float d, dmin;
        msum = vmlal_s16(msum, vget_low_s16(m1), vld1_s16(b[i].bsums + 8));
        msum = vmlal_s16(msum, vget_high_s16(m1), vld1_s16(b[i].bsums + 12));
        for (h = 0; h < 2; h++)
            for (s = 0; s < 4; s++)
                for (j = 0; j < 2; j++) {
                    const int sub = 8 * h + 2 * s + j;
                    const int32x4_t p = dot_i8x16(vdupq_n_s32(0), vreinterpretq_s8_u8(two_bit_codes(a[i].qs, h, s, j)),
                                                  vld1q_s8(b[i].qs + 16 * sub));
                    acc = vmlaq_n_s32(acc, p, a[i].scales[sub] & 15);
                }
        d = vget_lane_f32(dd, 0) * b[i].d;
        dmin = vget_lane_f32(dd, 1) * b[i].d;
        d *= (float)vaddvq_s32(acc);
        dmin *= (float)vaddvq_s32(msum);
        sum += d - dmin;
    }
    return sum;
}

static float dot_q3_k_q8_k(int64_t n, const void *w, const void *x) {
    const ez_block_q3_k *a = (const ez_block_q3_k *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    const int8x16_t four = vdupq_n_s8(4);
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int h, s, j;
    for (i = 0; i < nb; i++) {
        const uint8x16_t hm[2] = {vld1q_u8(a[i].hmask), vld1q_u8(a[i].hmask + 16)};
        int32x4_t acc = vdupq_n_s32(0);
        int sc[16];
        float d;
        ez_unpack_q3k_scales(a[i].scales, sc);
        for (h = 0; h < 2; h++)
            for (s = 0; s < 4; s++)
                for (j = 0; j < 2; j++) {
                    const int sub = 8 * h + 2 * s + j;
                    const uint8x16_t hb = vandq_u8(vshlq_u8(hm[j], vdupq_n_s8((int8_t)(-(4 * h + s)))), vdupq_n_u8(1));
                    const uint8x16_t c = vorrq_u8(two_bit_codes(a[i].qs, h, s, j), vshlq_n_u8(hb, 2));
                    const int32x4_t p = dot_i8x16(vdupq_n_s32(0), vsubq_s8(vreinterpretq_s8_u8(c), four),
                                                  vld1q_s8(b[i].qs + 16 * sub));
                    acc = vmlaq_n_s32(acc, p, sc[sub]);
                }
        d = half_to_float_hw(a[i].d) * b[i].d;
        d *= (float)vaddvq_s32(acc);
        sum += d;
    }
    return sum;
}

static float dot_tq2_0_q8_k(int64_t n, const void *w, const void *x) {
    const ez_block_tq2_0 *a = (const ez_block_tq2_0 *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    const int8x16_t one = vdupq_n_s8(1);
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int h, s, j;
    for (i = 0; i < nb; i++) {
        int32x4_t acc = vdupq_n_s32(0);
        float d;
        for (h = 0; h < 2; h++)
            for (s = 0; s < 4; s++)
                for (j = 0; j < 2; j++) {
                    const int8x16_t c = vsubq_s8(vreinterpretq_s8_u8(two_bit_codes(a[i].qs, h, s, j)), one);
                    acc = dot_i8x16(acc, c, vld1q_s8(b[i].qs + 16 * (8 * h + 2 * s + j)));
                }
        d = half_to_float_hw(a[i].d) * b[i].d;
        d *= (float)vaddvq_s32(acc);
        sum += d;
    }
    return sum;
}

/* ---- TQ1_0 and the grid i-quants ---------------------------------------------- */

/* TQ1_0 (layout at tq1_0_trit in quant_ref.c): a byte times 3^k (mod 256)
 * brings trit k to the top, where it is [q >= 86] + [q >= 171]. The trits
 * are 0, 1, 2, so sum((t - 1) y) = sum(t y) - sum(bsums). */
static inline int8x16_t tq1_0_trits(uint8x16_t q) {
    const uint8x16_t ge86 = vcgeq_u8(q, vdupq_n_u8(86)), ge171 = vcgeq_u8(q, vdupq_n_u8(171));
    return vreinterpretq_s8_u8(vsubq_u8(vsubq_u8(vdupq_n_u8(0), ge86), ge171));
}

static float dot_tq1_0_q8_k(int64_t n, const void *w, const void *x) {
    static const uint8_t qh_pow3[16] = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};
    const ez_block_tq1_0 *a = (const ez_block_tq1_0 *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    const uint8x16_t three = vdupq_n_u8(3), pow3 = vld1q_u8(qh_pow3);
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int k;
    for (i = 0; i < nb; i++) {
        const int8_t *y = b[i].qs;
        uint8x16_t q0 = vld1q_u8(a[i].qs), q1 = vld1q_u8(a[i].qs + 16), q2 = vld1q_u8(a[i].qs + 32);
        uint32_t qh;
        int32x4_t acc = vdupq_n_s32(0);
        float d;
        for (k = 0; k < 5; k++) {
            acc = dot_i8x16(acc, tq1_0_trits(q0), vld1q_s8(y + 32 * k));
            acc = dot_i8x16(acc, tq1_0_trits(q1), vld1q_s8(y + 32 * k + 16));
            acc = dot_i8x16(acc, tq1_0_trits(q2), vld1q_s8(y + 160 + 16 * k));
            q0 = vmulq_u8(q0, three);
            q1 = vmulq_u8(q1, three);
            q2 = vmulq_u8(q2, three);
        }
        memcpy(&qh, a[i].qh, sizeof qh);
        acc = dot_i8x16(acc, tq1_0_trits(vmulq_u8(vreinterpretq_u8_u32(vdupq_n_u32(qh)), pow3)), vld1q_s8(y + 240));
        d = half_to_float_hw(a[i].d) * b[i].d;
        d *= (float)(vaddvq_s32(acc) - vaddlvq_s16(vld1q_s16(b[i].bsums)) - vaddlvq_s16(vld1q_s16(b[i].bsums + 8)));
        sum += d;
    }
    return sum;
}

/* Grid rows r0 | r1 (unsigned magnitudes below 64) as signed bytes, bit j of
 * sign byte s0 negating element j and of s1 element 8 + j. */
static inline int8x16_t signed_grid16(uint8x16_t g, uint8_t s0, uint8_t s1) {
    const int8x16_t m = vreinterpretq_s8_u8(bits_to_bytes(s0, s1));
    return vsubq_s8(veorq_s8(vreinterpretq_s8_u8(g), m), m);
}

static inline uint8x16_t rows8(const uint8_t *r0, const uint8_t *r1) {
    return vcombine_u8(vld1_u8(r0), vld1_u8(r1));
}

static inline uint8x16_t rows4(const uint8_t *r0, const uint8_t *r1, const uint8_t *r2, const uint8_t *r3) {
    uint32_t r[4];
    memcpy(&r[0], r0, 4);
    memcpy(&r[1], r1, 4);
    memcpy(&r[2], r2, 4);
    memcpy(&r[3], r3, 4);
    return vreinterpretq_u8_u32(vld1q_u32(r));
}

/* sum of ls0 * v * y over elements 0-15 of a sub-block and ls1 * v * y over
 * 16-31, for its signed values v0 | v1. */
static inline int32x4_t scaled_halves(int32x4_t acc, int8x16_t v0, int8x16_t v1, const int8_t *y, int ls0, int ls1) {
    acc = vmlaq_n_s32(acc, dot_i8x16(vdupq_n_s32(0), v0, vld1q_s8(y)), ls0);
    return vmlaq_n_s32(acc, dot_i8x16(vdupq_n_s32(0), v1, vld1q_s8(y + 16)), ls1);
}

/* One super-block sum of a grid i-quant, scaled as the reference does. */
static inline float iq_block_sum(uint16_t d, float dy, int32x4_t acc) {
    float s = half_to_float_hw(d) * dy;
    s *= (float)vaddvq_s32(acc);
    return s;
}

static float dot_iq2_xxs_q8_k(int64_t n, const void *w, const void *x) {
    const ez_block_iq2_xxs *a = (const ez_block_iq2_xxs *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int ib;
    for (i = 0; i < nb; i++) {
        int32x4_t acc = vdupq_n_s32(0);
        for (ib = 0; ib < 8; ib++) {
            uint32_t g, s;
            int ls;
            memcpy(&g, &a[i].qs[4 * ib], sizeof g);
            memcpy(&s, &a[i].qs[4 * ib + 2], sizeof s);
            ls = 2 * (int)(s >> 28) + 1;
            acc = scaled_halves(acc,
                                signed_grid16(rows8(ez_iq2xxs_grid[g & 255], ez_iq2xxs_grid[g >> 8 & 255]),
                                              ez_ksigns_iq2xs[s & 127], ez_ksigns_iq2xs[s >> 7 & 127]),
                                signed_grid16(rows8(ez_iq2xxs_grid[g >> 16 & 255], ez_iq2xxs_grid[g >> 24]),
                                              ez_ksigns_iq2xs[s >> 14 & 127], ez_ksigns_iq2xs[s >> 21 & 127]),
                                b[i].qs + 32 * ib, ls, ls);
        }
        sum += iq_block_sum(a[i].d, b[i].d, acc);
    }
    return sum * 0.125f;
}

static float dot_iq2_xs_q8_k(int64_t n, const void *w, const void *x) {
    const ez_block_iq2_xs *a = (const ez_block_iq2_xs *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int ib;
    for (i = 0; i < nb; i++) {
        int32x4_t acc = vdupq_n_s32(0);
        for (ib = 0; ib < 8; ib++) {
            uint16_t q[4];
            memcpy(q, &a[i].qs[4 * ib], sizeof q);
            acc = scaled_halves(acc,
                                signed_grid16(rows8(ez_iq2xs_grid[q[0] & 511], ez_iq2xs_grid[q[1] & 511]),
                                              ez_ksigns_iq2xs[q[0] >> 9], ez_ksigns_iq2xs[q[1] >> 9]),
                                signed_grid16(rows8(ez_iq2xs_grid[q[2] & 511], ez_iq2xs_grid[q[3] & 511]),
                                              ez_ksigns_iq2xs[q[2] >> 9], ez_ksigns_iq2xs[q[3] >> 9]),
                                b[i].qs + 32 * ib, 2 * (a[i].scales[ib] & 15) + 1, 2 * (a[i].scales[ib] >> 4) + 1);
        }
        sum += iq_block_sum(a[i].d, b[i].d, acc);
    }
    return sum * 0.125f;
}

static float dot_iq2_s_q8_k(int64_t n, const void *w, const void *x) {
    const ez_block_iq2_s *a = (const ez_block_iq2_s *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int ib;
    for (i = 0; i < nb; i++) {
        int32x4_t acc = vdupq_n_s32(0);
        for (ib = 0; ib < 8; ib++) {
            const uint8_t *qs = a[i].qs + 4 * ib, *sg = a[i].qs + 32 + 4 * ib;
            const unsigned h = a[i].qh[ib];
            acc = scaled_halves(acc,
                                signed_grid16(rows8(ez_iq2s_grid[qs[0] | (h << 8 & 0x300)],
                                                    ez_iq2s_grid[qs[1] | (h << 6 & 0x300)]),
                                              sg[0], sg[1]),
                                signed_grid16(rows8(ez_iq2s_grid[qs[2] | (h << 4 & 0x300)],
                                                    ez_iq2s_grid[qs[3] | (h << 2 & 0x300)]),
                                              sg[2], sg[3]),
                                b[i].qs + 32 * ib, 2 * (a[i].scales[ib] & 15) + 1, 2 * (a[i].scales[ib] >> 4) + 1);
        }
        sum += iq_block_sum(a[i].d, b[i].d, acc);
    }
    return sum * 0.125f;
}

static float dot_iq3_xxs_q8_k(int64_t n, const void *w, const void *x) {
    const ez_block_iq3_xxs *a = (const ez_block_iq3_xxs *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int ib;
    for (i = 0; i < nb; i++) {
        int32x4_t acc = vdupq_n_s32(0);
        for (ib = 0; ib < 8; ib++) {
            const uint8_t *q = a[i].qs + 8 * ib;
            uint32_t aux;
            int ls;
            memcpy(&aux, a[i].qs + 64 + 4 * ib, sizeof aux);
            ls = 2 * (int)(aux >> 28) + 1;
            acc = scaled_halves(
                acc,
                signed_grid16(rows4(ez_iq3xxs_grid[q[0]], ez_iq3xxs_grid[q[1]], ez_iq3xxs_grid[q[2]], ez_iq3xxs_grid[q[3]]),
                              ez_ksigns_iq2xs[aux & 127], ez_ksigns_iq2xs[aux >> 7 & 127]),
                signed_grid16(rows4(ez_iq3xxs_grid[q[4]], ez_iq3xxs_grid[q[5]], ez_iq3xxs_grid[q[6]], ez_iq3xxs_grid[q[7]]),
                              ez_ksigns_iq2xs[aux >> 14 & 127], ez_ksigns_iq2xs[aux >> 21 & 127]),
                b[i].qs + 32 * ib, ls, ls);
        }
        sum += iq_block_sum(a[i].d, b[i].d, acc);
    }
    return sum * 0.25f;
}

static float dot_iq3_s_q8_k(int64_t n, const void *w, const void *x) {
    const ez_block_iq3_s *a = (const ez_block_iq3_s *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int ib;
    for (i = 0; i < nb; i++) {
        int32x4_t acc = vdupq_n_s32(0);
        for (ib = 0; ib < 8; ib++) {
            const uint8_t *q = a[i].qs + 8 * ib, *sg = a[i].signs + 4 * ib;
            const unsigned h = a[i].qh[ib];
            const int ls = 2 * ((a[i].scales[ib / 2] >> (4 * (ib % 2))) & 15) + 1;
            acc = scaled_halves(acc,
                                signed_grid16(rows4(ez_iq3s_grid[q[0] | (h << 8 & 0x100)], ez_iq3s_grid[q[1] | (h << 7 & 0x100)],
                                                    ez_iq3s_grid[q[2] | (h << 6 & 0x100)], ez_iq3s_grid[q[3] | (h << 5 & 0x100)]),
                                              sg[0], sg[1]),
                                signed_grid16(rows4(ez_iq3s_grid[q[4] | (h << 4 & 0x100)], ez_iq3s_grid[q[5] | (h << 3 & 0x100)],
                                                    ez_iq3s_grid[q[6] | (h << 2 & 0x100)], ez_iq3s_grid[q[7] | (h << 1 & 0x100)]),
                                              sg[2], sg[3]),
                                b[i].qs + 32 * ib, ls, ls);
        }
        sum += iq_block_sum(a[i].d, b[i].d, acc);
    }
    return sum;
}

/* IQ1 values 8 * g + delta of two grid rows (g in {-1, 0, 1}), the deltas
 * +-1 per row. */
static inline int8x16_t iq1_values(const int8_t *r0, const int8_t *r1, int8_t d0, int8_t d1) {
    const int8x16_t g = vcombine_s8(vld1_s8(r0), vld1_s8(r1));
    return vaddq_s8(vshlq_n_s8(g, 3), vcombine_s8(vdup_n_s8(d0), vdup_n_s8(d1)));
}

static float dot_iq1_s_q8_k(int64_t n, const void *w, const void *x) {
    const ez_block_iq1_s *a = (const ez_block_iq1_s *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int ib;
    for (i = 0; i < nb; i++) {
        int32x4_t acc = vdupq_n_s32(0);
        for (ib = 0; ib < 8; ib++) {
            const uint8_t *q = a[i].qs + 4 * ib;
            const unsigned qh = ez_load_u16(&a[i].qh[ib]);
            const int8_t delta = qh & 0x8000 ? -1 : 1;
            const int ls = 2 * (int)((qh >> 12) & 7) + 1;
            acc = scaled_halves(acc,
                                iq1_values(ez_iq1s_grid[q[0] | (qh << 8 & 0x700)], ez_iq1s_grid[q[1] | (qh << 5 & 0x700)],
                                           delta, delta),
                                iq1_values(ez_iq1s_grid[q[2] | (qh << 2 & 0x700)], ez_iq1s_grid[q[3] | (qh >> 1 & 0x700)],
                                           delta, delta),
                                b[i].qs + 32 * ib, ls, ls);
        }
        sum += iq_block_sum(a[i].d, b[i].d, acc);
    }
    return sum * 0.125f;
}

static float dot_iq1_m_q8_k(int64_t n, const void *w, const void *x) {
    const ez_block_iq1_m *a = (const ez_block_iq1_m *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int ib;
    for (i = 0; i < nb; i++) {
        int32x4_t acc = vdupq_n_s32(0);
        for (ib = 0; ib < 8; ib++) {
            const uint8_t *q = a[i].qs + 4 * ib;
            const unsigned h0 = a[i].qh[2 * ib], h1 = a[i].qh[2 * ib + 1];
            const unsigned sc = ez_load_u16(a[i].scales + 2 * (ib / 2)) >> (6 * (ib % 2));
            acc = scaled_halves(acc,
                                iq1_values(ez_iq1s_grid[q[0] | (h0 << 8 & 0x700)], ez_iq1s_grid[q[1] | (h0 << 4 & 0x700)],
                                           h0 & 0x08 ? -1 : 1, h0 & 0x80 ? -1 : 1),
                                iq1_values(ez_iq1s_grid[q[2] | (h1 << 8 & 0x700)], ez_iq1s_grid[q[3] | (h1 << 4 & 0x700)],
                                           h1 & 0x08 ? -1 : 1, h1 & 0x80 ? -1 : 1),
                                b[i].qs + 32 * ib, 2 * (int)(sc & 7) + 1, 2 * (int)(sc >> 3 & 7) + 1);
        }
        sum += iq_block_sum(ez_iq1_m_d(&a[i]), b[i].d, acc);
    }
    return sum * 0.125f;
}

#endif /* EZ_QUANT_NEON_DOTS_H */
