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

/* 16 F16 / BF16 weights widened to float, masked to `m` lanes (zero
 * elsewhere): the float dots' loads, shared with the F16 / BF16 prompt tile
 * and matvec. */
static inline __m512 ez_avx512_f16x16(const uint8_t *p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const void *)p));
}

static inline __m512 ez_avx512_bf16x16(const uint8_t *p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const void *)p)), 16));
}

static inline float ez_avx512_half_to_float(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }

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

/* ---- Q4_K / Q5_K against Q8_K ---- */

/* Lanes 0-7 scale s0, lanes 8-15 scale s1 of the 32-bit scales in sc. */
static inline __m512i ez_avx512_pick_scales(__m512i sc, int s0, int s1) {
    return _mm512_permutexvar_epi32(
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(s0)), _mm256_set1_epi32(s1), 1), sc);
}

/* The 256 codes of a Q4_K super-block: q[2h] the low nibbles of qs[64h ..
 * 64h + 64) (sub-blocks 4h and 4h + 2), q[2h + 1] the high ones (4h + 1,
 * 4h + 3). */
static inline void ez_avx512_q4k_codes(const ez_block_q4_k *a, __m512i q[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int h = 0; h < 2; h++) {
        const __m512i v = _mm512_loadu_si512((const void *)(a->qs + 64 * h));
        q[2 * h] = _mm512_and_si512(v, m4);
        q[2 * h + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
}

/* Q5_K: the fifth bit of sub-block s, element l is bit s of qh[l]. A 16-bit
 * shift by s (per 256-bit half) brings it to bit 0 of each byte. */
static inline __m512i ez_avx512_q5_high_bits(__m512i qh2, int s0, int s1) {
    const __m512i shift = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)s0)),
                                             _mm256_set1_epi16((short)s1), 1);
    return _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh2, shift), _mm512_set1_epi8(1)), 4);
}

/* The codes of a Q5_K super-block, in ez_avx512_q4k_codes' order. */
static inline void ez_avx512_q5k_codes(const ez_block_q5_k *a, __m512i q[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m256i qh = _mm256_loadu_si256((const __m256i *)a->qh);
    const __m512i qh2 = ez_avx512_two_256(qh, qh);
    for (int h = 0; h < 2; h++) {
        const __m512i v = _mm512_loadu_si512((const void *)(a->qs + 64 * h));
        q[2 * h] = _mm512_or_si512(_mm512_and_si512(v, m4), ez_avx512_q5_high_bits(qh2, 4 * h, 4 * h + 2));
        q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                       ez_avx512_q5_high_bits(qh2, 4 * h + 1, 4 * h + 3));
    }
}

/* The activation bytes against those codes: yq[2h] sub-blocks (4h, 4h + 2),
 * yq[2h + 1] sub-blocks (4h + 1, 4h + 3) of the Q8_K codes y. */
static inline void ez_avx512_k_y_quads(const int8_t *y, __m512i yq[4]) {
    for (int h = 0; h < 2; h++) {
        const __m512i y0 = _mm512_loadu_si512((const void *)(y + 128 * h));
        const __m512i y1 = _mm512_loadu_si512((const void *)(y + 128 * h + 64));
        yq[2 * h] = _mm512_shuffle_i64x2(y0, y1, _MM_SHUFFLE(1, 0, 1, 0));
        yq[2 * h + 1] = _mm512_shuffle_i64x2(y0, y1, _MM_SHUFFLE(3, 2, 3, 2));
    }
}

/* Lanes whose sum is the super-block's integer sum of scale * code * y
 * (the eight 6-bit scales sc8). */
static inline __m512i ez_avx512_k_scaled_lanes(const __m512i q[4], const __m512i yq[4], const uint8_t sc8[8]) {
    const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)sc8));
    __m512i acc = _mm512_setzero_si512();
    for (int k = 0; k < 4; k++)
        acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q[k], yq[k]),
                                                       ez_avx512_pick_scales(sc, 4 * (k / 2) + k % 2,
                                                                             4 * (k / 2) + k % 2 + 2)));
    return acc;
}

/* Lanes whose sum is sum(min_k * bsum) over the super-block (each 6-bit
 * min covers two 16-element bsums). */
static inline __m256i ez_avx512_k_min_lanes(const uint8_t mn[8], __m256i bsums) {
    const __m128i m8 = _mm_loadl_epi64((const __m128i *)mn);
    return _mm256_madd_epi16(bsums, _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)));
}

/* A Q4_K / Q5_K super-block's float term from its two integer sums, in the
 * reference's order. */
static inline float ez_avx512_kmin_block(uint16_t d16, uint16_t dmin16, float dx, int isum, int msum) {
    float d = ez_avx512_half_to_float(d16) * dx;
    float dmin = ez_avx512_half_to_float(dmin16) * dx;
    d *= (float)isum;
    dmin *= (float)msum;
    return d - dmin;
}

/* ---- Q6_K against Q8_K ---- */

/* The unsigned 6-bit codes of a Q6_K super-block, per 128-element half h:
 * q[2h] runs 0-1 (low nibbles of ql[64h .. 64h + 64) with qh bits 0-1 and
 * 2-3), q[2h + 1] runs 2-3 (high nibbles, qh bits 4-5 and 6-7). */
static inline void ez_avx512_q6k_codes(const ez_block_q6_k *a, __m512i q[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(0x30);
    const __m512i shl01 = ez_avx512_two_256(_mm256_set1_epi16(4), _mm256_set1_epi16(2));
    const __m512i shr23 = ez_avx512_two_256(_mm256_setzero_si256(), _mm256_set1_epi16(2));
    for (int h = 0; h < 2; h++) {
        const __m512i l = _mm512_loadu_si512((const void *)(a->ql + 64 * h));
        const __m256i h8 = _mm256_loadu_si256((const __m256i *)(a->qh + 32 * h));
        const __m512i hh = ez_avx512_two_256(h8, h8);
        q[2 * h] = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(_mm512_sllv_epi16(hh, shl01), m2));
        q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                       _mm512_and_si512(_mm512_srlv_epi16(hh, shr23), m2));
    }
}

/* The activation bytes against those codes: y[2h] and y[2h + 1] the Q8_K
 * codes [128h, 128h + 64) and [128h + 64, 128h + 128). */
static inline void ez_avx512_q6k_y(const int8_t *y, __m512i yq[4]) {
    for (int k = 0; k < 4; k++) yq[k] = _mm512_loadu_si512((const void *)(y + 64 * k));
}

/* Lanes whose sum is the super-block's integer sum of scale * code * y:
 * int32 lanes 4j..4j+3 of q[2h] cover elements 16j..16j+15 of its two
 * runs, scale 8h + j (q[2h + 1]: 8h + j + 4). */
static inline __m512i ez_avx512_q6k_scaled_lanes(const __m512i q[4], const __m512i yq[4], const int8_t scales[16]) {
    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)scales));
    const __m512i run = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    __m512i acc = _mm512_setzero_si512();
    for (int k = 0; k < 4; k++)
        acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q[k], yq[k]),
                                                       _mm512_permutexvar_epi32(
                                                           _mm512_add_epi32(run, _mm512_set1_epi32(4 * k)), sc)));
    return acc;
}

/* Lanes whose sum is sum(scale * bsum): the -32 offset's integer. */
static inline __m256i ez_avx512_q6k_offset_lanes(const int8_t scales[16], const int16_t bsums[16]) {
    return _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)scales)),
                             _mm256_loadu_si256((const __m256i *)bsums));
}

/* A Q6_K super-block's float term from its two integer sums, in the
 * reference's order. */
static inline float ez_avx512_q6k_block(uint16_t d16, float dx, int isum, int osum) {
    float d = ez_avx512_half_to_float(d16) * dx;
    d *= (float)(isum - 32 * osum);
    return d;
}

#endif /* EZ_QUANT_AVX512_H */
