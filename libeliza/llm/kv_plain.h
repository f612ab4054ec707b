/* The F32 and F16 entries of a KV kernel table (kv.h), built from one
 * instruction set's LLM ops (ops.h) and core's F16 kernels, so the three
 * tables (kv.c, kv_avx2.c, kv_neon.c) share those kernels instead of
 * repeating them. OPS: an expression giving the ez_llm_ops table; F16: one
 * giving core's ez_type_kernels of EZ_TYPE_F16. */
#ifndef EZ_LLM_KV_PLAIN_H
#define EZ_LLM_KV_PLAIN_H

#define EZ_KV_PLAIN_KERNELS(sfx, OPS, F16)                                                                    \
    static void store_f32_##sfx(const float *x, void *dst, int64_t n) {                                       \
        memcpy(dst, x, sizeof(float) * (size_t)n);                                                            \
    }                                                                                                         \
    static void load_f32_##sfx(const void *src, float *y, int64_t n) {                                        \
        memcpy(y, src, sizeof(float) * (size_t)n);                                                            \
    }                                                                                                         \
    static float dot_f32_##sfx(const float *q, const void *k, int64_t n) {                                    \
        return (OPS)->dot(q, (const float *)k, n);                                                            \
    }                                                                                                         \
    static void dot4_f32_##sfx(const float *a, int64_t lda, const void *k, int64_t n, float out[4]) {         \
        (OPS)->dot4(a, lda, (const float *)k, n, out);                                                        \
    }                                                                                                         \
    static void axpy_f32_##sfx(float *y, float w, const void *v, int64_t n) {                                 \
        (OPS)->axpy(y, w, (const float *)v, n);                                                               \
    }                                                                                                         \
    static void axpy4_f32_##sfx(float *y, int64_t ldy, const float w[4], const void *v, int64_t n) {          \
        (OPS)->axpy4(y, ldy, w, (const float *)v, n);                                                         \
    }                                                                                                         \
    static void store_f16_##sfx(const float *x, void *dst, int64_t n) { (OPS)->to_f16((uint16_t *)dst, x, n); } \
    static void load_f16_##sfx(const void *src, float *y, int64_t n) { (F16)->dequant(src, y, n); }          \
    static float dot_f16_##sfx(const float *q, const void *k, int64_t n) { return (F16)->dot(n, k, q); }       \
    static void dot4_f16_##sfx(const float *a, int64_t lda, const void *k, int64_t n, float out[4]) {         \
        (OPS)->dot4_f16(a, lda, (const uint16_t *)k, n, out);                                                 \
    }                                                                                                         \
    static void axpy_f16_##sfx(float *y, float w, const void *v, int64_t n) {                                 \
        (OPS)->axpy_f16(y, w, (const uint16_t *)v, n);                                                        \
    }                                                                                                         \
    static void axpy4_f16_##sfx(float *y, int64_t ldy, const float w[4], const void *v, int64_t n) {          \
        (OPS)->axpy4_f16(y, ldy, w, (const uint16_t *)v, n);                                                  \
    }

#define EZ_KV_PLAIN_TABLE(sfx)                                                                                \
    {store_f32_##sfx, load_f32_##sfx, dot_f32_##sfx, dot4_f32_##sfx, axpy_f32_##sfx, axpy4_f32_##sfx},        \
    {                                                                                                         \
        store_f16_##sfx, load_f16_##sfx, dot_f16_##sfx, dot4_f16_##sfx, axpy_f16_##sfx, axpy4_f16_##sfx       \
    }

#endif /* EZ_LLM_KV_PLAIN_H */
