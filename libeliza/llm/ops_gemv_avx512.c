/* AVX-512 multi-row matvec (see ops.h, "gemv"): GEMV_ROWS weight rows per
 * pass over the activation row: a Q8_0 row for the 32-element block types
 * whose per-row dot is quant_avx512.c's EZ_DOT_PAIRS (Q4_0, Q5_0, Q8_0,
 * IQ4_NL), a Q8_K row for Q4_K, Q5_K and Q6_K (below).
 *
 * Per pair of blocks, the dot moves each weight's sign onto the activation
 * (four instructions a row). Here the codes are unsigned, u = c + zp (Q4_0's
 * and Q5_0's stored codes, the signed types' c ^ 0x80 with zp 128), so
 * vpdpbusd(-zp * sum4(y), u, y) gives the same exact int32 lanes:
 * sum (c + zp) y - zp sum y = sum c y. The activation pair, its lane sums
 * and the scale conversion of x are made once per pass; each row keeps the
 * dot's two accumulators, the same FMAs in the same order and the same final
 * reduction, so every y[r] is the dot's float bit for bit.
 * Compiled with the AVX-512 flags; used at the avx512 level only. */
#include "ops.h"

#if EZ_ARCH_X86_64

#include "core/kernels/quant_avx512.h"
#include "core/kernels/quant_tables.h"

/* Weight rows per pass: 8 accumulators and their codes fit the 32 registers.
 * The rows of a pass are a quarter of the range apart (rows r0 + k q + j,
 * k < 4, for q = (r1 - r0) / 4), so that each of the four streams reads
 * consecutive rows: four adjacent rows a pass (four short streams a few
 * hundred bytes apart) halved the Q8_0 output matrix's streaming rate on
 * Zen 5, whatever the prefetch distance. The rows past 4q go through the
 * level's dot. */
#define GEMV_ROWS 4

/* 16 bytes from each of four places, one per 128-bit lane. */
static inline __m512i lanes4(const void *p0, const void *p1, const void *p2, const void *p3) {
    __m512i v = _mm512_zextsi128_si512(_mm_loadu_si128((const __m128i *)p0));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)p1), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)p2), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)p3), 3);
}

/* Four consecutive 18-byte blocks (a float16 d, 16 bytes of nibbles:
 * Q4_0, IQ4_NL) from two loads, words 0-31 and 4-35 of their 72 bytes:
 * block j's d is word 9j, its nibbles words 9j + 1 .. 9j + 8, moved to
 * 128-bit lane j. */
static inline __m512i nibble_blocks4(const void *a, __m128 *wd) {
    static const int16_t qs_words[32] = {1,  2,  3,  4,  5,  6,  7,  8,  10, 11, 12, 13, 14, 15, 16, 17,
                                         19, 20, 21, 22, 23, 24, 25, 26, 56, 57, 58, 59, 60, 61, 62, 63};
    static const int16_t d_words[32] = {0, 9, 18, 27};
    const __m512i v0 = _mm512_loadu_si512(a), v1 = _mm512_loadu_si512((const void *)((const uint8_t *)a + 8));
    *wd = _mm_cvtph_ps(_mm512_castsi512_si128(_mm512_permutexvar_epi16(_mm512_loadu_si512((const void *)d_words), v0)));
    return _mm512_permutex2var_epi16(v0, _mm512_loadu_si512((const void *)qs_words), v1);
}

_Static_assert(sizeof(ez_block_q4_0) == 18 && sizeof(ez_block_iq4_nl) == 18, "nibble_blocks4 reads 18-byte blocks");

/* Blocks i .. i + 3 of a row for the four-block steps: lo with block
 * i + j's codes 0-15 in 128-bit lane j, hi with its codes 16-31 (the
 * unsigned codes of the *_codes functions below, in another order). */
static inline void q4_0_quads(const ez_block_q4_0 *a, __m512i *lo, __m512i *hi, __m128 *wd) {
    const __m512i v = nibble_blocks4(a, wd), m4 = _mm512_set1_epi8(0x0f);
    *lo = _mm512_and_si512(v, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
}

/* The float16 d at the start of four consecutive blocks of `size` bytes. */
static inline __m128 block_scales4(const void *a, size_t size) {
    const uint8_t *p = (const uint8_t *)a;
    return _mm_cvtph_ps(_mm_setr_epi16((short)ez_load_u16(p), (short)ez_load_u16(p + size), (short)ez_load_u16(p + 2 * size),
                                       (short)ez_load_u16(p + 3 * size), 0, 0, 0, 0));
}

/* The fifth bits of codes 0-15 (low) or 16-31 (high) of four Q5_0 blocks
 * as a mask, 16 bits a block. */
static inline __mmask64 q5_0_quad_mask(const ez_block_q5_0 *a, int high) {
    uint64_t m = 0;
    for (int j = 0; j < 4; j++) {
        uint32_t h;
        memcpy(&h, a[j].qh, sizeof h);
        m |= (uint64_t)((high ? h >> 16 : h) & 0xffffu) << (16 * j);
    }
    return (__mmask64)m;
}

static inline void q5_0_quads(const ez_block_q5_0 *a, __m512i *lo, __m512i *hi, __m128 *wd) {
    const __m512i v = lanes4(a[0].qs, a[1].qs, a[2].qs, a[3].qs), m4 = _mm512_set1_epi8(0x0f);
    const __m512i l = _mm512_and_si512(v, m4), h = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    *wd = block_scales4(a, sizeof *a);
    *lo = _mm512_mask_add_epi8(l, q5_0_quad_mask(a, 0), l, _mm512_set1_epi8(16));
    *hi = _mm512_mask_add_epi8(h, q5_0_quad_mask(a, 1), h, _mm512_set1_epi8(16));
}

static inline void q8_0_quads(const ez_block_q8_0 *a, __m512i *lo, __m512i *hi, __m128 *wd) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const __m512i p0 = ez_avx512_q8_0_pair(a), p1 = ez_avx512_q8_0_pair(a + 2);
    *wd = block_scales4(a, sizeof *a);
    *lo = _mm512_xor_si512(_mm512_permutex2var_epi64(p0, _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13), p1), flip);
    *hi = _mm512_xor_si512(_mm512_permutex2var_epi64(p0, _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15), p1), flip);
}

static inline void iq4_nl_quads(const ez_block_iq4_nl *a, __m512i *lo, __m512i *hi, __m128 *wd) {
    const __m512i kv = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ez_kvalues_iq4nl));
    const __m512i v = nibble_blocks4(a, wd), m4 = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8((char)0x80);
    *lo = _mm512_xor_si512(_mm512_shuffle_epi8(kv, _mm512_and_si512(v, m4)), flip);
    *hi = _mm512_xor_si512(_mm512_shuffle_epi8(kv, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4)), flip);
}

static inline __m512i q4_0_codes(const ez_block_q4_0 *a) { return ez_avx512_nibble_pair(a[0].qs, a[1].qs); }

/* nibble + 16 where the fifth bit is set: the stored code, value + 16. */
static inline __m512i q5_0_codes(const ez_block_q5_0 *a) {
    uint32_t h0, h1;
    const __m512i q = ez_avx512_nibble_pair(a[0].qs, a[1].qs);
    memcpy(&h0, a[0].qh, sizeof h0);
    memcpy(&h1, a[1].qh, sizeof h1);
    return _mm512_mask_add_epi8(q, (__mmask64)((uint64_t)h0 | ((uint64_t)h1 << 32)), q, _mm512_set1_epi8(16));
}

static inline __m512i q8_0_codes(const ez_block_q8_0 *a) {
    return _mm512_xor_si512(ez_avx512_q8_0_pair(a), _mm512_set1_epi8((char)0x80));
}

static inline __m512i iq4_nl_codes(const ez_block_iq4_nl *a) {
    const __m512i kv = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ez_kvalues_iq4nl));
    return _mm512_xor_si512(_mm512_shuffle_epi8(kv, ez_avx512_nibble_pair(a[0].qs, a[1].qs)),
                            _mm512_set1_epi8((char)0x80));
}

/* -zp times the sum of each lane's four activation bytes: the integer
 * lanes' starting value. */
static inline __m512i neg_zp_sums(__m512i y, int zp) {
    return _mm512_sub_epi32(_mm512_setzero_si512(),
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)zp), y));
}

/* Block pairs as in EZ_DOT_PAIRS: four blocks a step (scales of two pairs
 * from one F16C conversion), then a pair, then a lone block with a zero
 * second scale. */
#define EZ_GEMV_PAIRS(wtype, codes, quads, zp, w_type)                                                           \
    const int64_t nb = w->n_cols / EZ_QK;                                                                        \
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)x;                                                           \
    const __m512i pick4 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);                     \
    const __m512i to_acc0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);           \
    const __m512i to_acc1 = _mm512_add_epi32(to_acc0, _mm512_set1_epi32(8));                                     \
    const ez_dot_fn dot = ez_kernels_avx512(w_type)->dot;                                                        \
    const int64_t q = (r1 - r0) / GEMV_ROWS;                                                                     \
    for (int64_t j = 0; j < q; j++) {                                                                            \
        const wtype *a[GEMV_ROWS];                                                                               \
        __m512 acc0[GEMV_ROWS], acc1[GEMV_ROWS], lo_acc[GEMV_ROWS], hi_acc[GEMV_ROWS];                           \
        int64_t i = 0;                                                                                           \
        for (int k = 0; k < GEMV_ROWS; k++) {                                                                    \
            a[k] = (const wtype *)(w->data + (size_t)(r0 + k * q + j) * w->row_bytes);                           \
            lo_acc[k] = hi_acc[k] = _mm512_setzero_ps();                                                         \
        }                                                                                                        \
        /* The dot's acc0 lanes are (block i codes 0-15, 16-31, block i + 1 \
         * codes 0-15, 16-31), acc1's blocks i + 2 and i + 3: here lo_acc \
         * holds the four blocks' codes 0-15 and hi_acc their codes 16-31, \
         * the same lanes in another order, put back after the loop. */    \
        for (; i + 4 <= nb; i += 4) {                                                                            \
            const __m512i ylo = lanes4(b[i].qs, b[i + 1].qs, b[i + 2].qs, b[i + 3].qs);                        \
            const __m512i yhi = lanes4(b[i].qs + 16, b[i + 1].qs + 16, b[i + 2].qs + 16, b[i + 3].qs + 16);    \
            const __m512i nlo = neg_zp_sums(ylo, zp), nhi = neg_zp_sums(yhi, zp);                                \
            const __m128 xd = block_scales4(&b[i], sizeof *b);                                                   \
            for (int k = 0; k < GEMV_ROWS; k++) {                                                                \
                __m512i lo, hi;                                                                                  \
                __m128 wd;                                                                                       \
                __m512 d4;                                                                                       \
                ez_avx512_prefetch(&a[k][i], 4 * (int)sizeof(wtype));                                           \
                quads(&a[k][i], &lo, &hi, &wd);                                                                  \
                /* ez_avx512_scale_products4's products */                                                       \
                d4 = _mm512_permutexvar_ps(pick4, _mm512_castps128_ps512(_mm_mul_ps(wd, xd)));                   \
                lo_acc[k] = _mm512_fmadd_ps(d4, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(nlo, lo, ylo)), lo_acc[k]); \
                hi_acc[k] = _mm512_fmadd_ps(d4, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(nhi, hi, yhi)), hi_acc[k]); \
            }                                                                                                    \
        }                                                                                                        \
        for (int k = 0; k < GEMV_ROWS; k++) {                                                                    \
            acc0[k] = _mm512_permutex2var_ps(lo_acc[k], to_acc0, hi_acc[k]);                                     \
            acc1[k] = _mm512_permutex2var_ps(lo_acc[k], to_acc1, hi_acc[k]);                                     \
        }                                                                                                        \
        for (; i + 2 <= nb; i += 2) {                                                                            \
            const __m512i y0 = ez_avx512_q8_0_pair(&b[i]), n0 = neg_zp_sums(y0, zp);                             \
            for (int k = 0; k < GEMV_ROWS; k++)                                                                  \
                acc0[k] = _mm512_fmadd_ps(ez_avx512_two_scales(ez_avx512_half_product(a[k][i].d, b[i].d),       \
                                                               ez_avx512_half_product(a[k][i + 1].d, b[i + 1].d)), \
                                          _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(n0, codes(&a[k][i]), y0)), acc0[k]); \
        }                                                                                                        \
        if (i < nb) {                                                                                            \
            const ez_block_q8_0 ys[2] = {b[i], b[i]};                                                            \
            const __m512i y0 = ez_avx512_q8_0_pair(ys), n0 = neg_zp_sums(y0, zp);                                \
            for (int k = 0; k < GEMV_ROWS; k++) {                                                                \
                const wtype pair[2] = {a[k][i], a[k][i]};                                                        \
                acc1[k] = _mm512_fmadd_ps(ez_avx512_two_scales(ez_avx512_half_product(a[k][i].d, b[i].d), 0.0f), \
                                          _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(n0, codes(pair), y0)), acc1[k]); \
            }                                                                                                    \
        }                                                                                                        \
        for (int k = 0; k < GEMV_ROWS; k++) y[k * q + j] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[k], acc1[k])); \
    }                                                                                                            \
    for (int64_t r = r0 + GEMV_ROWS * q; r < r1; r++) y[r - r0] = dot(w->n_cols, w->data + (size_t)r * w->row_bytes, x)

static void gemv_q4_0(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, float *y) {
    EZ_GEMV_PAIRS(ez_block_q4_0, q4_0_codes, q4_0_quads, 8, EZ_TYPE_Q4_0);
}

static void gemv_q5_0(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, float *y) {
    EZ_GEMV_PAIRS(ez_block_q5_0, q5_0_codes, q5_0_quads, 16, EZ_TYPE_Q5_0);
}

static void gemv_q8_0(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, float *y) {
    EZ_GEMV_PAIRS(ez_block_q8_0, q8_0_codes, q8_0_quads, 128, EZ_TYPE_Q8_0);
}

static void gemv_iq4_nl(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, float *y) {
    EZ_GEMV_PAIRS(ez_block_iq4_nl, iq4_nl_codes, iq4_nl_quads, 128, EZ_TYPE_IQ4_NL);
}
#undef EZ_GEMV_PAIRS

/* The K-quant matvecs below reach the dots' integer sums by another route:
 * a vpdpbusd lane (four code * activation products) stays below 2^15 in
 * magnitude (Q4_K 4 * 15 * 128, Q5_K 4 * 31 * 128, Q6_K 4 * 63 * 128), so
 * two such vectors pack into int16 exactly and one vpdpwssd multiplies each
 * word by its sub-block's scale and accumulates: the same integer as the
 * dot's scaled int32 lanes. The float term of each super-block is then made
 * for four rows at once, lane r the dot's operations for row r in its order,
 * so every y[r] is still the dot's float bit for bit. */

/* [sum of v0's lanes, .., sum of v3's]. */
static inline __m128i lane_sums4(__m512i v0, __m512i v1, __m512i v2, __m512i v3) {
    const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1), _mm512_unpackhi_epi32(v0, v1));
    const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(v2, v3), _mm512_unpackhi_epi32(v2, v3));
    /* each 128-bit lane: its part of the four sums */
    const __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
    const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* Word indices into a register of per-row scale words for vpermw: in each
 * 128-bit lane L, four words of scale lo[L] then four of hi[L], plus `base`. */
static inline __m512i scale_words_index(const int lo[4], const int hi[4], int base) {
    int16_t idx[32];
    for (int L = 0; L < 4; L++)
        for (int e = 0; e < 4; e++) {
            idx[8 * L + e] = (int16_t)(base + lo[L]);
            idx[8 * L + 4 + e] = (int16_t)(base + hi[L]);
        }
    return _mm512_loadu_si512((const void *)idx);
}

/* The packed int16 of two vpdpbusd products, each word times its scale
 * word, added into acc. */
static inline __m512i scaled_pair(__m512i acc, const __m512i q[2], const __m512i yq[2], __m512i scales) {
    const __m512i z = _mm512_setzero_si512();
    return _mm512_dpwssd_epi32(
        acc, _mm512_packs_epi32(_mm512_dpbusd_epi32(z, q[0], yq[0]), _mm512_dpbusd_epi32(z, q[1], yq[1])), scales);
}

/* Q4_K / Q5_K heads (d, dmin, scales[12] as 32-bit words e0..e3) to the
 * eight 6-bit scales (bytes 0-7) and mins (bytes 8-15) of each lane, as
 * ez_unpack_q4k_scales makes them from w = e1..e3. */
static inline __m512i q4k_unpack4(__m512i h) {
    const __m512i lo = _mm512_and_si512(
        _mm512_srlv_epi32(_mm512_shuffle_epi32(h, _MM_SHUFFLE(3, 2, 3, 1)), _mm512_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4)),
        _mm512_broadcast_i32x4(_mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f)));
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(_mm512_shuffle_epi32(h, _MM_SHUFFLE(2, 2, 1, 1)), 2),
                                        _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0x30303030, 0, 0x30303030)));
    return _mm512_or_si512(lo, hi);
}

/* The vpshufb control that makes bytes first .. first + 7 of each 128-bit
 * lane eight words. */
static inline __m512i byte_words_control(int first) {
    int8_t ctl[16];
    for (int j = 0; j < 8; j++) {
        ctl[2 * j] = (int8_t)(first + j);
        ctl[2 * j + 1] = (int8_t)0x80;
    }
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ctl));
}

/* Element 0 of each 128-bit lane, then the sum of each lane's four, as
 * [lane 0, .., lane 3]. */
static inline __m128i lane_heads(__m512i v) {
    return _mm512_castsi512_si128(_mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12, 0, 4, 8, 12), v));
}

static inline __m128i lane_totals(__m512i v) {
    v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));
    return lane_heads(_mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1))));
}

/* y[k q + j] = lane k of sum. */
static inline void store_rows(float *y, int64_t q, int64_t j, __m128 sum) {
    float s[GEMV_ROWS];
    _mm_storeu_ps(s, sum);
    for (int k = 0; k < GEMV_ROWS; k++) y[k * q + j] = s[k];
}

/* Q4_K / Q5_K (quant_avx512.c's EZ_DOT_KMIN): per super-block the
 * activation registers and the sums of bsum pairs (one per min) once; the
 * four rows' heads in one register, their scales and mins unpacked
 * together; per row its codes and one int32 register whose lanes sum to its
 * scaled integer. */
#define EZ_GEMV_KMIN(wtype, codes, w_type)                                                                     \
    static const int lo0[4] = {0, 0, 2, 2}, hi0[4] = {1, 1, 3, 3}, lo1[4] = {4, 4, 6, 6}, hi1[4] = {5, 5, 7, 7}; \
    const int64_t nb = w->n_cols / EZ_QK_K;                                                                  \
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;                                                       \
    const ez_dot_fn dot = ez_kernels_avx512(w_type)->dot;                                                    \
    const int64_t q = (r1 - r0) / GEMV_ROWS;                                                                 \
    const __m512i sc_words = byte_words_control(0), mn_words = byte_words_control(8);                       \
    __m512i sidx[GEMV_ROWS][2];                                                                              \
    for (int k = 0; k < GEMV_ROWS; k++) {                                                                    \
        sidx[k][0] = scale_words_index(lo0, hi0, 8 * k);                                                     \
        sidx[k][1] = scale_words_index(lo1, hi1, 8 * k);                                                     \
    }                                                                                                        \
    for (int64_t j = 0; j < q; j++) {                                                                        \
        const wtype *a[GEMV_ROWS];                                                                           \
        __m128 sum = _mm_setzero_ps();                                                                       \
        for (int k = 0; k < GEMV_ROWS; k++) a[k] = (const wtype *)(w->data + (size_t)(r0 + k * q + j) * w->row_bytes); \
        for (int64_t i = 0; i < nb; i++) {                                                                   \
            const __m512i h = lanes4(&a[0][i], &a[1][i], &a[2][i], &a[3][i]), u = q4k_unpack4(h);            \
            const __m512i sc = _mm512_shuffle_epi8(u, sc_words);                                                         \
            const __m128i pairs = _mm256_cvtepi32_epi16(                                                     \
                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)b[i].bsums), _mm256_set1_epi16(1)));   \
            const __m128i msum = lane_totals(_mm512_madd_epi16(_mm512_shuffle_epi8(u, mn_words), _mm512_broadcast_i32x4(pairs))); \
            const __m256 dm = _mm256_cvtph_ps(_mm_shuffle_epi8(lane_heads(h),                                \
                                                               _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15))); \
            const __m128 dx = _mm_set1_ps(b[i].d);                                                           \
            __m512i yq[4], is[GEMV_ROWS];                                                                    \
            __m128 d, dmin;                                                                                  \
            ez_avx512_k_y_quads(b[i].qs, yq);                                                                \
            for (int k = 0; k < GEMV_ROWS; k++) {                                                            \
                __m512i c[4];                                                                                \
                ez_avx512_prefetch(&a[k][i], (int)sizeof(wtype));                                            \
                codes(&a[k][i], c);                                                                          \
                is[k] = scaled_pair(scaled_pair(_mm512_setzero_si512(), c, yq, _mm512_permutexvar_epi16(sidx[k][0], sc)), \
                                    c + 2, yq + 2, _mm512_permutexvar_epi16(sidx[k][1], sc));                \
            }                                                                                                \
            /* ez_avx512_kmin_block, four rows */                                                            \
            d = _mm_mul_ps(_mm256_castps256_ps128(dm), dx);                                                  \
            dmin = _mm_mul_ps(_mm256_extractf128_ps(dm, 1), dx);                                             \
            d = _mm_mul_ps(d, _mm_cvtepi32_ps(lane_sums4(is[0], is[1], is[2], is[3])));                      \
            dmin = _mm_mul_ps(dmin, _mm_cvtepi32_ps(msum));                                                  \
            sum = _mm_add_ps(sum, _mm_sub_ps(d, dmin));                                                      \
        }                                                                                                    \
        store_rows(y, q, j, sum);                                                                            \
    }                                                                                                        \
    for (int64_t r = r0 + GEMV_ROWS * q; r < r1; r++) y[r - r0] = dot(w->n_cols, w->data + (size_t)r * w->row_bytes, x)

_Static_assert(GEMV_ROWS == 4, "the K-quant matvecs hold four rows' heads in one register");

static void gemv_q4_k(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, float *y) {
    EZ_GEMV_KMIN(ez_block_q4_k, ez_avx512_q4k_codes, EZ_TYPE_Q4_K);
}

static void gemv_q5_k(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, float *y) {
    EZ_GEMV_KMIN(ez_block_q5_k, ez_avx512_q5k_codes, EZ_TYPE_Q5_K);
}
#undef EZ_GEMV_KMIN

/* Q6_K (quant_avx512.c's dot_q6_k_q8_k_avx512): per super-block the
 * activation registers once; per row its codes, its sixteen scales as
 * words (for the scaled sum and the -32 offset's sum(scale * bsum)) and one
 * int32 register whose lanes sum to its scaled integer. */
static void gemv_q6_k(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, float *y) {
    static const int lo0[4] = {0, 1, 2, 3}, hi0[4] = {4, 5, 6, 7}, lo1[4] = {8, 9, 10, 11}, hi1[4] = {12, 13, 14, 15};
    const int64_t nb = w->n_cols / EZ_QK_K;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    const ez_dot_fn dot = ez_kernels_avx512(EZ_TYPE_Q6_K)->dot;
    const int64_t q = (r1 - r0) / GEMV_ROWS;
    const __m512i sidx0 = scale_words_index(lo0, hi0, 0), sidx1 = scale_words_index(lo1, hi1, 0);
    for (int64_t j = 0; j < q; j++) {
        const ez_block_q6_k *a[GEMV_ROWS];
        __m128 sum = _mm_setzero_ps();
        for (int k = 0; k < GEMV_ROWS; k++)
            a[k] = (const ez_block_q6_k *)(w->data + (size_t)(r0 + k * q + j) * w->row_bytes);
        for (int64_t i = 0; i < nb; i++) {
            const __m256i bs = _mm256_loadu_si256((const __m256i *)b[i].bsums);
            const __m128 d = _mm_cvtph_ps(_mm_setr_epi16((short)a[0][i].d, (short)a[1][i].d, (short)a[2][i].d,
                                                         (short)a[3][i].d, 0, 0, 0, 0));
            __m512i yq[4], is[GEMV_ROWS], os[GEMV_ROWS];
            ez_avx512_q6k_y(b[i].qs, yq);
            for (int k = 0; k < GEMV_ROWS; k++) {
                __m512i c[4];
                const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a[k][i].scales));
                const __m512i sc = _mm512_zextsi256_si512(s16);
                ez_avx512_prefetch(&a[k][i], (int)sizeof(ez_block_q6_k));
                ez_avx512_q6k_codes(&a[k][i], c);
                is[k] = scaled_pair(scaled_pair(_mm512_setzero_si512(), c, yq, _mm512_permutexvar_epi16(sidx0, sc)),
                                    c + 2, yq + 2, _mm512_permutexvar_epi16(sidx1, sc));
                os[k] = _mm512_zextsi256_si512(_mm256_madd_epi16(s16, bs));
            }
            /* ez_avx512_q6k_block, four rows: d * (isum - 32 osum) */
            sum = _mm_add_ps(sum, _mm_mul_ps(_mm_mul_ps(d, _mm_set1_ps(b[i].d)),
                                             _mm_cvtepi32_ps(_mm_sub_epi32(lane_sums4(is[0], is[1], is[2], is[3]),
                                                                           _mm_slli_epi32(lane_sums4(os[0], os[1], os[2], os[3]), 5)))));
        }
        store_rows(y, q, j, sum);
    }
    for (int64_t r = r0 + GEMV_ROWS * q; r < r1; r++) y[r - r0] = dot(w->n_cols, w->data + (size_t)r * w->row_bytes, x);
}

/* F16 / BF16 against a float row: EZ_DOT_FLOATS of quant_avx512.c (four
 * accumulators over 64-element steps, then whole 16-element chunks into the
 * first, the masked rest into the second) for GEMV_ROWS rows a pass, each
 * activation chunk loaded once for all of them. */
#define EZ_GEMV_FLOATS(load)                                                                                     \
    const int64_t n = w->n_cols;                                                                                 \
    const float *xf = (const float *)x;                                                                          \
    const ez_dot_fn dot = ez_kernels_avx512(w->type)->dot;                                                       \
    const int64_t q = (r1 - r0) / GEMV_ROWS;                                                                     \
    for (int64_t j = 0; j < q; j++) {                                                                            \
        const uint8_t *a[GEMV_ROWS];                                                                             \
        __m512 s[GEMV_ROWS][4];                                                                                  \
        int64_t i = 0;                                                                                           \
        for (int k = 0; k < GEMV_ROWS; k++) {                                                                    \
            a[k] = w->data + (size_t)(r0 + k * q + j) * w->row_bytes;                                            \
            s[k][0] = s[k][1] = s[k][2] = s[k][3] = _mm512_setzero_ps();                                         \
        }                                                                                                        \
        for (; i + 64 <= n; i += 64) {                                                                           \
            const __m512 x0 = _mm512_loadu_ps(xf + i), x1 = _mm512_loadu_ps(xf + i + 16);                        \
            const __m512 x2 = _mm512_loadu_ps(xf + i + 32), x3 = _mm512_loadu_ps(xf + i + 48);                   \
            for (int k = 0; k < GEMV_ROWS; k++) {                                                                \
                ez_avx512_prefetch(a[k] + 2 * i, 128);                                                           \
                s[k][0] = _mm512_fmadd_ps(load(a[k] + 2 * i, 0xffff), x0, s[k][0]);                              \
                s[k][1] = _mm512_fmadd_ps(load(a[k] + 2 * (i + 16), 0xffff), x1, s[k][1]);                       \
                s[k][2] = _mm512_fmadd_ps(load(a[k] + 2 * (i + 32), 0xffff), x2, s[k][2]);                       \
                s[k][3] = _mm512_fmadd_ps(load(a[k] + 2 * (i + 48), 0xffff), x3, s[k][3]);                       \
            }                                                                                                    \
        }                                                                                                        \
        for (; i + 16 <= n; i += 16) {                                                                           \
            const __m512 x0 = _mm512_loadu_ps(xf + i);                                                           \
            for (int k = 0; k < GEMV_ROWS; k++) s[k][0] = _mm512_fmadd_ps(load(a[k] + 2 * i, 0xffff), x0, s[k][0]); \
        }                                                                                                        \
        if (i < n) {                                                                                             \
            const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);                                               \
            const __m512 x1 = _mm512_maskz_loadu_ps(m, xf + i);                                                  \
            for (int k = 0; k < GEMV_ROWS; k++) s[k][1] = _mm512_fmadd_ps(load(a[k] + 2 * i, m), x1, s[k][1]);   \
        }                                                                                                        \
        for (int k = 0; k < GEMV_ROWS; k++)                                                                      \
            y[k * q + j] = _mm512_reduce_add_ps(                                                                 \
                _mm512_add_ps(_mm512_add_ps(s[k][0], s[k][1]), _mm512_add_ps(s[k][2], s[k][3])));               \
    }                                                                                                            \
    for (int64_t r = r0 + GEMV_ROWS * q; r < r1; r++) y[r - r0] = dot(n, w->data + (size_t)r * w->row_bytes, x)

static void gemv_f16(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, float *y) {
    EZ_GEMV_FLOATS(ez_avx512_f16x16);
}

static void gemv_bf16(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, float *y) {
    EZ_GEMV_FLOATS(ez_avx512_bf16x16);
}
#undef EZ_GEMV_FLOATS

ez_llm_gemv_fn ez_llm_gemv_avx512(uint32_t w_type) {
    switch (w_type) {
    case EZ_TYPE_F16: return gemv_f16;
    case EZ_TYPE_BF16: return gemv_bf16;
    case EZ_TYPE_Q4_0: return gemv_q4_0;
    case EZ_TYPE_Q5_0: return gemv_q5_0;
    case EZ_TYPE_Q8_0: return gemv_q8_0;
    case EZ_TYPE_IQ4_NL: return gemv_iq4_nl;
    case EZ_TYPE_Q4_K: return gemv_q4_k;
    case EZ_TYPE_Q5_K: return gemv_q5_k;
    case EZ_TYPE_Q6_K: return gemv_q6_k;
    default: return NULL;
    }
}

#else

ez_llm_gemv_fn ez_llm_gemv_avx512(uint32_t w_type) {
    (void)w_type;
    return NULL;
}

#endif
