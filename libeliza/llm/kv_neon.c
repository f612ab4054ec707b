/* NEON kernels of the KV cache's block types (aarch64, where NEON is
 * baseline). Q8_0 and Q4_0 blocks are widened in registers; TBQ codes go
 * through their level tables one value at a time into a 32-float block
 * (vector lookups of 4-byte levels would need byte-sliced tables), after
 * which the arithmetic is the same. Every block is dotted or accumulated
 * unscaled and scaled by d once, as in kv_avx2.c. */
#include "kv.h"

#if EZ_ARCH_AARCH64

#include <arm_neon.h>
#include <string.h>

#include "core/quant.h"
#include "kv_plain.h"
#include "ops.h"

static inline float32x4_t widen_s8(int8x8_t x, int high) {
    const int16x8_t w = vmovl_s8(x);
    return vcvtq_f32_s32(vmovl_s16(high ? vget_high_s16(w) : vget_low_s16(w)));
}

/* Block b of a row as eight vectors of four unscaled values; returns d. */
static EZ_ALWAYS_INLINE float decode(int type, const void *row, int64_t b, float32x4_t v[8]) {
    switch (type) {
    case EZ_KV_Q8_0: {
        const ez_block_q8_0 *k = (const ez_block_q8_0 *)row + b;
        for (int i = 0; i < 4; i++) {
            const int8x8_t x = vld1_s8(k->qs + 8 * i);
            v[2 * i] = widen_s8(x, 0);
            v[2 * i + 1] = widen_s8(x, 1);
        }
        return ez_f16_to_f32(k->d);
    }
    case EZ_KV_Q4_0: {
        const ez_block_q4_0 *k = (const ez_block_q4_0 *)row + b;
        const uint8x16_t bytes = vld1q_u8(k->qs);
        const int8x16_t eight = vdupq_n_s8(8);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(bytes, vdupq_n_u8(15))), eight);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(bytes, 4)), eight);
        v[0] = widen_s8(vget_low_s8(lo), 0);
        v[1] = widen_s8(vget_low_s8(lo), 1);
        v[2] = widen_s8(vget_high_s8(lo), 0);
        v[3] = widen_s8(vget_high_s8(lo), 1);
        v[4] = widen_s8(vget_low_s8(hi), 0);
        v[5] = widen_s8(vget_low_s8(hi), 1);
        v[6] = widen_s8(vget_high_s8(hi), 0);
        v[7] = widen_s8(vget_high_s8(hi), 1);
        return ez_f16_to_f32(k->d);
    }
    case EZ_KV_TBQ4_0: {
        const ez_block_tbq4_0 *k = (const ez_block_tbq4_0 *)row + b;
        float x[EZ_KV_BLOCK];
        for (int j = 0; j < EZ_KV_BLOCK / 2; j++) {
            x[j] = ez_tbq4_levels[k->qs[j] & 15];
            x[j + 16] = ez_tbq4_levels[k->qs[j] >> 4];
        }
        for (int i = 0; i < 8; i++) v[i] = vld1q_f32(x + 4 * i);
        return ez_f16_to_f32(k->d);
    }
    default: {
        const ez_block_tbq3_0 *k = (const ez_block_tbq3_0 *)row + b;
        float x[EZ_KV_BLOCK];
        for (int g = 0; g < 4; g++) {
            const uint8_t *p = k->qs + 3 * g; /* eight codes in 24 bits */
            const uint32_t bits = p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16);
            for (int j = 0; j < 8; j++) x[8 * g + j] = ez_tbq3_levels[(bits >> (3 * j)) & 7];
        }
        for (int i = 0; i < 8; i++) v[i] = vld1q_f32(x + 4 * i);
        return ez_f16_to_f32(k->d);
    }
    }
}

static EZ_ALWAYS_INLINE float32x4_t block_dot(const float *q, const float32x4_t v[8]) {
    float32x4_t t0 = vmulq_f32(vld1q_f32(q), v[0]), t1 = vmulq_f32(vld1q_f32(q + 4), v[1]);
    for (int i = 2; i < 8; i += 2) {
        t0 = vfmaq_f32(t0, vld1q_f32(q + 4 * i), v[i]);
        t1 = vfmaq_f32(t1, vld1q_f32(q + 4 * i + 4), v[i + 1]);
    }
    return vaddq_f32(t0, t1);
}

static EZ_ALWAYS_INLINE void block_axpy(float *y, float w, const float32x4_t v[8]) {
    for (int i = 0; i < 8; i++) vst1q_f32(y + 4 * i, vfmaq_n_f32(vld1q_f32(y + 4 * i), v[i], w));
}

static EZ_ALWAYS_INLINE float dot_body(int type, const float *q, const void *k, int64_t n) {
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++) {
        float32x4_t v[8];
        const float d = decode(type, k, b, v);
        acc = vfmaq_n_f32(acc, block_dot(q + b * EZ_KV_BLOCK, v), d);
    }
    return vaddvq_f32(acc);
}

static EZ_ALWAYS_INLINE void dot4_body(int type, const float *a, int64_t lda, const void *k, int64_t n,
                                       float out[4]) {
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++) {
        float32x4_t v[8];
        const float d = decode(type, k, b, v);
        for (int r = 0; r < 4; r++) acc[r] = vfmaq_n_f32(acc[r], block_dot(a + r * lda + b * EZ_KV_BLOCK, v), d);
    }
    for (int r = 0; r < 4; r++) out[r] = vaddvq_f32(acc[r]);
}

static EZ_ALWAYS_INLINE void axpy_body(int type, float *y, float w, const void *x, int64_t n) {
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++) {
        float32x4_t v[8];
        const float d = decode(type, x, b, v);
        block_axpy(y + b * EZ_KV_BLOCK, w * d, v);
    }
}

static EZ_ALWAYS_INLINE void axpy4_body(int type, float *y, int64_t ldy, const float w[4], const void *x,
                                        int64_t n) {
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++) {
        float32x4_t v[8];
        const float d = decode(type, x, b, v);
        for (int r = 0; r < 4; r++) block_axpy(y + r * ldy + b * EZ_KV_BLOCK, w[r] * d, v);
    }
}

#define NEON_KERNELS(T, sfx)                                                                                  \
    static float dot_##sfx##_neon(const float *q, const void *k, int64_t n) { return dot_body(T, q, k, n); }   \
    static void dot4_##sfx##_neon(const float *a, int64_t lda, const void *k, int64_t n, float out[4]) {      \
        dot4_body(T, a, lda, k, n, out);                                                                      \
    }                                                                                                         \
    static void axpy_##sfx##_neon(float *y, float w, const void *v, int64_t n) { axpy_body(T, y, w, v, n); }  \
    static void axpy4_##sfx##_neon(float *y, int64_t ldy, const float w[4], const void *v, int64_t n) {       \
        axpy4_body(T, y, ldy, w, v, n);                                                                       \
    }

NEON_KERNELS(EZ_KV_Q8_0, q8_0)
NEON_KERNELS(EZ_KV_Q4_0, q4_0)
NEON_KERNELS(EZ_KV_TBQ4_0, tbq4_0)
NEON_KERNELS(EZ_KV_TBQ3_0, tbq3_0)

static void load_q8_0_neon(const void *src, float *y, int64_t n) { ez_kernels_neon(EZ_TYPE_Q8_0)->dequant(src, y, n); }
static void load_q4_0_neon(const void *src, float *y, int64_t n) { ez_kernels_neon(EZ_TYPE_Q4_0)->dequant(src, y, n); }

EZ_KV_PLAIN_KERNELS(neon, ez_llm_ops_neon(), ez_kernels_neon(EZ_TYPE_F16))

static const ez_kv_kernels KV_NEON[EZ_KV_COUNT] = {
    EZ_KV_PLAIN_TABLE(neon),
    {ez_llm_quant_q8_0_ref, load_q8_0_neon, dot_q8_0_neon, dot4_q8_0_neon, axpy_q8_0_neon, axpy4_q8_0_neon},
    {ez_kv_store_q4_0, load_q4_0_neon, dot_q4_0_neon, dot4_q4_0_neon, axpy_q4_0_neon, axpy4_q4_0_neon},
    {ez_kv_store_tbq4_0, ez_kv_load_tbq4_0, dot_tbq4_0_neon, dot4_tbq4_0_neon, axpy_tbq4_0_neon, axpy4_tbq4_0_neon},
    {ez_kv_store_tbq3_0, ez_kv_load_tbq3_0, dot_tbq3_0_neon, dot4_tbq3_0_neon, axpy_tbq3_0_neon, axpy4_tbq3_0_neon},
};

const ez_kv_kernels *ez_kv_kernels_neon(int type) { return type >= 0 && type < EZ_KV_COUNT ? &KV_NEON[type] : NULL; }

#else

const ez_kv_kernels *ez_kv_kernels_neon(int type) {
    (void)type;
    return NULL;
}

#endif
