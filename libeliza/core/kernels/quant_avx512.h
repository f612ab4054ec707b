/* Block helpers of the AVX-512 Q8_0-activation dots (quant_avx512.c) that
 * the multi-row matvec (llm/ops_gemv_avx512.c) shares, so that both sum the
 * same lanes in the same order. Include only from files compiled with the
 * AVX-512 flags. */
#ifndef EZ_QUANT_AVX512_H
#define EZ_QUANT_AVX512_H

#include <immintrin.h>
#include <string.h>

#include "quant_kernels.h"

/* As in quant_avx2.c: the weights are prefetched this far ahead. */
#define EZ_AVX512_PREFETCH_AHEAD 4096

static inline void ez_avx512_prefetch(const void *p, int bytes) {
    for (int off = 0; off < bytes; off += 64) _mm_prefetch((const char *)p + EZ_AVX512_PREFETCH_AHEAD + off, _MM_HINT_T0);
}

static inline float ez_avx512_half_product(uint16_t a, uint16_t b) {
    const __m128 v = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)a | ((uint32_t)b << 16))));
    return _mm_cvtss_f32(_mm_mul_ss(v, _mm_movehdup_ps(v)));
}

/* 16 lanes: d0 in the low eight, d1 in the high eight. */
static inline __m512 ez_avx512_two_scales(float d0, float d1) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(d0)), _mm256_set1_ps(d1), 1);
}

static inline __m512i ez_avx512_two_256(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* The 32 codes of two 16-byte nibble arrays, in block order (low nibbles
 * are elements 0-15, high nibbles 16-31): block 0 in the low 256 bits. */
static inline __m512i ez_avx512_nibble_pair(const uint8_t *qs0, const uint8_t *qs1) {
    const __m256i t = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)qs0)),
                                              _mm_loadu_si128((const __m128i *)qs1), 1);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    /* 128-bit lanes (lo0, lo1, hi0, hi1) reordered to (lo0, hi0, lo1, hi1). */
    const __m512i z = ez_avx512_two_256(_mm256_and_si256(t, m4), _mm256_and_si256(_mm256_srli_epi16(t, 4), m4));
    return _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
}

/* Q5_0: nibble - 16 where the fifth bit (qh bit j for element j) is clear. */
static inline __m512i ez_avx512_q5_0_pair(const ez_block_q5_0 *a) {
    uint32_t h0, h1;
    __m512i q = ez_avx512_nibble_pair(a[0].qs, a[1].qs);
    memcpy(&h0, a[0].qh, sizeof h0);
    memcpy(&h1, a[1].qh, sizeof h1);
    return _mm512_mask_sub_epi8(q, ~(__mmask64)((uint64_t)h0 | ((uint64_t)h1 << 32)), q, _mm512_set1_epi8(16));
}

static inline __m512i ez_avx512_q8_0_pair(const ez_block_q8_0 *a) {
    return ez_avx512_two_256(_mm256_loadu_si256((const __m256i *)a[0].qs),
                             _mm256_loadu_si256((const __m256i *)a[1].qs));
}

/* The products d_w d_x of four consecutive blocks (each starting with its
 * float16 d), converted by one F16C instruction: the same floats as
 * ez_avx512_half_product gives one at a time. */
static inline __m128 ez_avx512_scale_products4(const void *w, size_t w_size, const ez_block_q8_0 *b) {
    const uint8_t *p = (const uint8_t *)w;
    const __m256 f = _mm256_cvtph_ps(_mm_setr_epi16((short)ez_load_u16(p), (short)ez_load_u16(p + w_size),
                                                    (short)ez_load_u16(p + 2 * w_size),
                                                    (short)ez_load_u16(p + 3 * w_size), (short)b[0].d,
                                                    (short)b[1].d, (short)b[2].d, (short)b[3].d));
    return _mm_mul_ps(_mm256_castps256_ps128(f), _mm256_extractf128_ps(f, 1));
}

#endif /* EZ_QUANT_AVX512_H */
