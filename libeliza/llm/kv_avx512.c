/* AVX-512 kernels of the KV cache's block types (compiled with the AVX-512
 * flags; used at the avx512 level only). A block of 32 values is two
 * 16-lane vectors: codes widened to 32-bit lanes, the Lloyd-Max levels
 * looked up by vpermps from one register (16 levels) or half of one (8),
 * the block dotted or accumulated unscaled and scaled by d once. Same
 * contracts as kv.c's reference; the sums differ from it only in order and
 * in where d is multiplied in. F32 and F16 have no entry here: they keep
 * the AVX2 kernels, which bench_kv measured 3-4x faster than the AVX-512
 * LLM ops' masked-store loops on Zen 5 (4,096 positions of one head). */
#include "kv.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>
#include <string.h>

#include "core/quant.h"
#include "ops.h"

/* Block b of a row as two vectors of 16 unscaled values; returns d. */
static EZ_ALWAYS_INLINE float decode(int type, const void *row, int64_t b, __m512 v[2]) {
    switch (type) {
    case EZ_KV_Q8_0: {
        const ez_block_q8_0 *k = (const ez_block_q8_0 *)row + b;
        v[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)k->qs)));
        v[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(k->qs + 16))));
        return _cvtsh_ss(k->d);
    }
    case EZ_KV_Q4_0: {
        const ez_block_q4_0 *k = (const ez_block_q4_0 *)row + b;
        const __m512i codes = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)k->qs));
        const __m512i m = _mm512_set1_epi32(15), eight = _mm512_set1_epi32(8);
        v[0] = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_and_si512(codes, m), eight));
        v[1] = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(codes, 4), eight));
        return _cvtsh_ss(k->d);
    }
    case EZ_KV_TBQ4_0: {
        const ez_block_tbq4_0 *k = (const ez_block_tbq4_0 *)row + b;
        const __m512i codes = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)k->qs));
        const __m512 levels = _mm512_loadu_ps(ez_tbq4_levels);
        v[0] = _mm512_permutexvar_ps(_mm512_and_si512(codes, _mm512_set1_epi32(15)), levels);
        v[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(codes, 4), levels);
        return _cvtsh_ss(k->d);
    }
    default: {
        /* The 12 code bytes (a masked load: nothing past the block is
         * read), in every 128-bit lane; lane j of v[h] takes the three
         * bytes of its group of eight codes (bytes 3g .. 3g + 2, g = 2h +
         * j / 8), shifted to its code. */
        const ez_block_tbq3_0 *k = (const ez_block_tbq3_0 *)row + b;
        const __m512i bytes = _mm512_broadcast_i32x4(_mm_maskz_loadu_epi8(0x0FFF, k->qs));
        const __m512i shifts = _mm512_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21, 0, 3, 6, 9, 12, 15, 18, 21);
        const __m512 levels = _mm512_castps256_ps512(_mm256_loadu_ps(ez_tbq3_levels));
        /* Byte 3 of each lane repeats byte 2: the shifts keep 24 bits. */
        const __m512i ctl[2] = {
            _mm512_setr_epi32(0x02020100, 0x02020100, 0x02020100, 0x02020100, 0x02020100, 0x02020100, 0x02020100,
                              0x02020100, 0x05050403, 0x05050403, 0x05050403, 0x05050403, 0x05050403, 0x05050403,
                              0x05050403, 0x05050403),
            _mm512_setr_epi32(0x08080706, 0x08080706, 0x08080706, 0x08080706, 0x08080706, 0x08080706, 0x08080706,
                              0x08080706, 0x0B0B0A09, 0x0B0B0A09, 0x0B0B0A09, 0x0B0B0A09, 0x0B0B0A09, 0x0B0B0A09,
                              0x0B0B0A09, 0x0B0B0A09)};
        for (int h = 0; h < 2; h++) {
            const __m512i bits = _mm512_shuffle_epi8(bytes, ctl[h]);
            v[h] = _mm512_permutexvar_ps(_mm512_and_si512(_mm512_srlv_epi32(bits, shifts), _mm512_set1_epi32(7)),
                                         levels);
        }
        return _cvtsh_ss(k->d);
    }
    }
}

static EZ_ALWAYS_INLINE __m512 block_dot(const float *q, const __m512 v[2]) {
    return _mm512_fmadd_ps(_mm512_loadu_ps(q + 16), v[1], _mm512_mul_ps(_mm512_loadu_ps(q), v[0]));
}

static EZ_ALWAYS_INLINE void block_axpy(float *y, __m512 w, const __m512 v[2]) {
    _mm512_storeu_ps(y, _mm512_fmadd_ps(w, v[0], _mm512_loadu_ps(y)));
    _mm512_storeu_ps(y + 16, _mm512_fmadd_ps(w, v[1], _mm512_loadu_ps(y + 16)));
}

static EZ_ALWAYS_INLINE float dot_body(int type, const float *q, const void *k, int64_t n) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++) {
        __m512 v[2];
        const float d = decode(type, k, b, v);
        acc = _mm512_fmadd_ps(block_dot(q + b * EZ_KV_BLOCK, v), _mm512_set1_ps(d), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

static EZ_ALWAYS_INLINE void dot4_body(int type, const float *a, int64_t lda, const void *k, int64_t n,
                                       float out[4]) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++) {
        __m512 v[2];
        const __m512 d = _mm512_set1_ps(decode(type, k, b, v));
        for (int r = 0; r < 4; r++) acc[r] = _mm512_fmadd_ps(block_dot(a + r * lda + b * EZ_KV_BLOCK, v), d, acc[r]);
    }
    for (int r = 0; r < 4; r++) out[r] = _mm512_reduce_add_ps(acc[r]);
}

static EZ_ALWAYS_INLINE void axpy_body(int type, float *y, float w, const void *x, int64_t n) {
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++) {
        __m512 v[2];
        const float d = decode(type, x, b, v);
        block_axpy(y + b * EZ_KV_BLOCK, _mm512_set1_ps(w * d), v);
    }
}

static EZ_ALWAYS_INLINE void axpy4_body(int type, float *y, int64_t ldy, const float w[4], const void *x,
                                        int64_t n) {
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++) {
        __m512 v[2];
        const float d = decode(type, x, b, v);
        for (int r = 0; r < 4; r++) block_axpy(y + r * ldy + b * EZ_KV_BLOCK, _mm512_set1_ps(w[r] * d), v);
    }
}

#define AVX512_KERNELS(T, sfx)                                                                                \
    static float dot_##sfx##_avx512(const float *q, const void *k, int64_t n) { return dot_body(T, q, k, n); } \
    static void dot4_##sfx##_avx512(const float *a, int64_t lda, const void *k, int64_t n, float out[4]) {    \
        dot4_body(T, a, lda, k, n, out);                                                                      \
    }                                                                                                         \
    static void axpy_##sfx##_avx512(float *y, float w, const void *v, int64_t n) { axpy_body(T, y, w, v, n); } \
    static void axpy4_##sfx##_avx512(float *y, int64_t ldy, const float w[4], const void *v, int64_t n) {     \
        axpy4_body(T, y, ldy, w, v, n);                                                                       \
    }

AVX512_KERNELS(EZ_KV_Q8_0, q8_0)
AVX512_KERNELS(EZ_KV_Q4_0, q4_0)
AVX512_KERNELS(EZ_KV_TBQ4_0, tbq4_0)
AVX512_KERNELS(EZ_KV_TBQ3_0, tbq3_0)

/* Widening a row (the blocked prompt attention's chunks): the block decode
 * above, scaled. */
static EZ_ALWAYS_INLINE void load_body(int type, const void *src, float *y, int64_t n) {
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++) {
        __m512 v[2];
        const __m512 d = _mm512_set1_ps(decode(type, src, b, v));
        _mm512_storeu_ps(y + b * EZ_KV_BLOCK, _mm512_mul_ps(v[0], d));
        _mm512_storeu_ps(y + b * EZ_KV_BLOCK + 16, _mm512_mul_ps(v[1], d));
    }
}

static void load_q8_0_avx512(const void *src, float *y, int64_t n) { load_body(EZ_KV_Q8_0, src, y, n); }
static void load_q4_0_avx512(const void *src, float *y, int64_t n) { load_body(EZ_KV_Q4_0, src, y, n); }
static void load_tbq4_0_avx512(const void *src, float *y, int64_t n) { load_body(EZ_KV_TBQ4_0, src, y, n); }
static void load_tbq3_0_avx512(const void *src, float *y, int64_t n) { load_body(EZ_KV_TBQ3_0, src, y, n); }
static void store_q8_0_avx512(const float *x, void *dst, int64_t n) { ez_llm_ops_avx512()->quant_q8_0(x, dst, n); }

static const ez_kv_kernels KV_AVX512[EZ_KV_COUNT] = {
    [EZ_KV_Q8_0] = {store_q8_0_avx512, load_q8_0_avx512, dot_q8_0_avx512, dot4_q8_0_avx512, axpy_q8_0_avx512,
                    axpy4_q8_0_avx512},
    [EZ_KV_Q4_0] = {ez_kv_store_q4_0, load_q4_0_avx512, dot_q4_0_avx512, dot4_q4_0_avx512, axpy_q4_0_avx512,
                    axpy4_q4_0_avx512},
    [EZ_KV_TBQ4_0] = {ez_kv_store_tbq4_0, load_tbq4_0_avx512, dot_tbq4_0_avx512, dot4_tbq4_0_avx512,
                      axpy_tbq4_0_avx512, axpy4_tbq4_0_avx512},
    [EZ_KV_TBQ3_0] = {ez_kv_store_tbq3_0, load_tbq3_0_avx512, dot_tbq3_0_avx512, dot4_tbq3_0_avx512,
                      axpy_tbq3_0_avx512, axpy4_tbq3_0_avx512},
};

const ez_kv_kernels *ez_kv_kernels_avx512(int type) {
    return type >= 0 && type < EZ_KV_COUNT && KV_AVX512[type].dot ? &KV_AVX512[type] : NULL;
}

#else

const ez_kv_kernels *ez_kv_kernels_avx512(int type) {
    (void)type;
    return NULL;
}

#endif
