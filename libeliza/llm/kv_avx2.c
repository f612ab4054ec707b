/* AVX2 + FMA kernels of the KV cache's block types (compiled with -mavx2
 * -mfma -mf16c; used only when the CPU has them). Each block is decoded in
 * registers (integers or Lloyd-Max levels by vpermps, unscaled), dotted or
 * accumulated, and scaled by d once per block. Same contracts as kv.c's
 * reference; the sums differ from it only in order and in where d is
 * multiplied in. */
#include "kv.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>
#include <string.h>

#include "core/quant.h"
#include "kv_plain.h"
#include "ops.h"

static inline float hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

/* 16 nibble bytes -> codes of elements 0-15 (low nibbles) and 16-31 (high). */
static inline void nibbles(const uint8_t *qs, __m128i *lo, __m128i *hi) {
    const __m128i bytes = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(15);
    *lo = _mm_and_si128(bytes, m);
    *hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), m);
}

static inline __m256 tbq4_lookup(__m128i codes8) {
    const __m256i idx = _mm256_cvtepu8_epi32(codes8);
    const __m256 lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(ez_tbq4_levels), idx);
    const __m256 hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(ez_tbq4_levels + 8), idx);
    return _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

/* Block b of a row as four vectors of eight unscaled values; returns d. */
static EZ_ALWAYS_INLINE float decode(int type, const void *row, int64_t b, __m256 v[4]) {
    switch (type) {
    case EZ_KV_Q8_0: {
        const ez_block_q8_0 *k = (const ez_block_q8_0 *)row + b;
        for (int i = 0; i < 4; i++)
            v[i] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(k->qs + 8 * i))));
        return _cvtsh_ss(k->d);
    }
    case EZ_KV_Q4_0: {
        const ez_block_q4_0 *k = (const ez_block_q4_0 *)row + b;
        const __m128i eight = _mm_set1_epi8(8);
        __m128i lo, hi;
        nibbles(k->qs, &lo, &hi);
        lo = _mm_sub_epi8(lo, eight);
        hi = _mm_sub_epi8(hi, eight);
        v[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
        v[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)));
        v[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
        v[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)));
        return _cvtsh_ss(k->d);
    }
    case EZ_KV_TBQ4_0: {
        const ez_block_tbq4_0 *k = (const ez_block_tbq4_0 *)row + b;
        __m128i lo, hi;
        nibbles(k->qs, &lo, &hi);
        v[0] = tbq4_lookup(lo);
        v[1] = tbq4_lookup(_mm_srli_si128(lo, 8));
        v[2] = tbq4_lookup(hi);
        v[3] = tbq4_lookup(_mm_srli_si128(hi, 8));
        return _cvtsh_ss(k->d);
    }
    default: {
        const ez_block_tbq3_0 *k = (const ez_block_tbq3_0 *)row + b;
        const __m256i shifts = _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21), seven = _mm256_set1_epi32(7);
        const __m256 levels = _mm256_loadu_ps(ez_tbq3_levels);
        for (int g = 0; g < 4; g++) {
            const uint8_t *p = k->qs + 3 * g; /* eight codes in 24 bits */
            const int bits = (int)(p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16));
            const __m256i idx = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(bits), shifts), seven);
            v[g] = _mm256_permutevar8x32_ps(levels, idx);
        }
        return _cvtsh_ss(k->d);
    }
    }
}

static EZ_ALWAYS_INLINE __m256 block_dot(const float *q, const __m256 v[4]) {
    __m256 t = _mm256_mul_ps(_mm256_loadu_ps(q), v[0]);
    t = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8), v[1], t);
    t = _mm256_fmadd_ps(_mm256_loadu_ps(q + 16), v[2], t);
    return _mm256_fmadd_ps(_mm256_loadu_ps(q + 24), v[3], t);
}

static EZ_ALWAYS_INLINE void block_axpy(float *y, __m256 w, const __m256 v[4]) {
    for (int i = 0; i < 4; i++) _mm256_storeu_ps(y + 8 * i, _mm256_fmadd_ps(w, v[i], _mm256_loadu_ps(y + 8 * i)));
}

static EZ_ALWAYS_INLINE float dot_body(int type, const float *q, const void *k, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++) {
        __m256 v[4];
        const float d = decode(type, k, b, v);
        acc = _mm256_fmadd_ps(block_dot(q + b * EZ_KV_BLOCK, v), _mm256_set1_ps(d), acc);
    }
    return hsum256(acc);
}

static EZ_ALWAYS_INLINE void dot4_body(int type, const float *a, int64_t lda, const void *k, int64_t n,
                                       float out[4]) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++) {
        __m256 v[4];
        const __m256 d = _mm256_set1_ps(decode(type, k, b, v));
        for (int r = 0; r < 4; r++) acc[r] = _mm256_fmadd_ps(block_dot(a + r * lda + b * EZ_KV_BLOCK, v), d, acc[r]);
    }
    for (int r = 0; r < 4; r++) out[r] = hsum256(acc[r]);
}

static EZ_ALWAYS_INLINE void axpy_body(int type, float *y, float w, const void *x, int64_t n) {
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++) {
        __m256 v[4];
        const float d = decode(type, x, b, v);
        block_axpy(y + b * EZ_KV_BLOCK, _mm256_set1_ps(w * d), v);
    }
}

static EZ_ALWAYS_INLINE void axpy4_body(int type, float *y, int64_t ldy, const float w[4], const void *x,
                                        int64_t n) {
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++) {
        __m256 v[4];
        const float d = decode(type, x, b, v);
        for (int r = 0; r < 4; r++) block_axpy(y + r * ldy + b * EZ_KV_BLOCK, _mm256_set1_ps(w[r] * d), v);
    }
}

#define AVX2_KERNELS(T, sfx)                                                                                  \
    static float dot_##sfx##_avx2(const float *q, const void *k, int64_t n) { return dot_body(T, q, k, n); }   \
    static void dot4_##sfx##_avx2(const float *a, int64_t lda, const void *k, int64_t n, float out[4]) {      \
        dot4_body(T, a, lda, k, n, out);                                                                      \
    }                                                                                                         \
    static void axpy_##sfx##_avx2(float *y, float w, const void *v, int64_t n) { axpy_body(T, y, w, v, n); }  \
    static void axpy4_##sfx##_avx2(float *y, int64_t ldy, const float w[4], const void *v, int64_t n) {       \
        axpy4_body(T, y, ldy, w, v, n);                                                                       \
    }

AVX2_KERNELS(EZ_KV_Q8_0, q8_0)
AVX2_KERNELS(EZ_KV_Q4_0, q4_0)
AVX2_KERNELS(EZ_KV_TBQ4_0, tbq4_0)
AVX2_KERNELS(EZ_KV_TBQ3_0, tbq3_0)

static void load_q8_0_avx2(const void *src, float *y, int64_t n) { ez_kernels_avx2(EZ_TYPE_Q8_0)->dequant(src, y, n); }
static void load_q4_0_avx2(const void *src, float *y, int64_t n) { ez_kernels_avx2(EZ_TYPE_Q4_0)->dequant(src, y, n); }

EZ_KV_PLAIN_KERNELS(avx2, ez_llm_ops_avx2(), ez_kernels_avx2(EZ_TYPE_F16))

static const ez_kv_kernels KV_AVX2[EZ_KV_COUNT] = {
    EZ_KV_PLAIN_TABLE(avx2),
    {ez_llm_quant_q8_0_ref, load_q8_0_avx2, dot_q8_0_avx2, dot4_q8_0_avx2, axpy_q8_0_avx2, axpy4_q8_0_avx2},
    {ez_kv_store_q4_0, load_q4_0_avx2, dot_q4_0_avx2, dot4_q4_0_avx2, axpy_q4_0_avx2, axpy4_q4_0_avx2},
    {ez_kv_store_tbq4_0, ez_kv_load_tbq4_0, dot_tbq4_0_avx2, dot4_tbq4_0_avx2, axpy_tbq4_0_avx2, axpy4_tbq4_0_avx2},
    {ez_kv_store_tbq3_0, ez_kv_load_tbq3_0, dot_tbq3_0_avx2, dot4_tbq3_0_avx2, axpy_tbq3_0_avx2, axpy4_tbq3_0_avx2},
};

const ez_kv_kernels *ez_kv_kernels_avx2(int type) { return type >= 0 && type < EZ_KV_COUNT ? &KV_AVX2[type] : NULL; }

#else

const ez_kv_kernels *ez_kv_kernels_avx2(int type) {
    (void)type;
    return NULL;
}

#endif
