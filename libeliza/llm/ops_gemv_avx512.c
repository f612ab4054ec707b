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
#define EZ_GEMV_PAIRS(wtype, codes, zp, w_type)                                                                  \
    const int64_t nb = w->n_cols / EZ_QK;                                                                        \
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)x;                                                           \
    const __m512i pick01 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);                   \
    const __m512i pick23 = _mm512_add_epi32(pick01, _mm512_set1_epi32(2));                                       \
    const ez_dot_fn dot = ez_kernels_avx512(w_type)->dot;                                                        \
    const int64_t q = (r1 - r0) / GEMV_ROWS;                                                                     \
    for (int64_t j = 0; j < q; j++) {                                                                            \
        const wtype *a[GEMV_ROWS];                                                                               \
        __m512 acc0[GEMV_ROWS], acc1[GEMV_ROWS];                                                                 \
        int64_t i = 0;                                                                                           \
        for (int k = 0; k < GEMV_ROWS; k++) {                                                                    \
            a[k] = (const wtype *)(w->data + (size_t)(r0 + k * q + j) * w->row_bytes);                           \
            acc0[k] = acc1[k] = _mm512_setzero_ps();                                                             \
        }                                                                                                        \
        for (; i + 4 <= nb; i += 4) {                                                                            \
            const __m512i y0 = ez_avx512_q8_0_pair(&b[i]), y1 = ez_avx512_q8_0_pair(&b[i + 2]);                 \
            const __m512i n0 = neg_zp_sums(y0, zp), n1 = neg_zp_sums(y1, zp);                                    \
            for (int k = 0; k < GEMV_ROWS; k++) {                                                                \
                const __m512 d4 = _mm512_castps128_ps512(ez_avx512_scale_products4(&a[k][i], sizeof(wtype), &b[i])); \
                ez_avx512_prefetch(&a[k][i], 4 * (int)sizeof(wtype));                                           \
                acc0[k] = _mm512_fmadd_ps(_mm512_permutexvar_ps(pick01, d4),                                     \
                                          _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(n0, codes(&a[k][i]), y0)), acc0[k]); \
                acc1[k] = _mm512_fmadd_ps(_mm512_permutexvar_ps(pick23, d4),                                     \
                                          _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(n1, codes(&a[k][i + 2]), y1)),  \
                                          acc1[k]);                                                              \
            }                                                                                                    \
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
    EZ_GEMV_PAIRS(ez_block_q4_0, q4_0_codes, 8, EZ_TYPE_Q4_0);
}

static void gemv_q5_0(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, float *y) {
    EZ_GEMV_PAIRS(ez_block_q5_0, q5_0_codes, 16, EZ_TYPE_Q5_0);
}

static void gemv_q8_0(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, float *y) {
    EZ_GEMV_PAIRS(ez_block_q8_0, q8_0_codes, 128, EZ_TYPE_Q8_0);
}

static void gemv_iq4_nl(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, float *y) {
    EZ_GEMV_PAIRS(ez_block_iq4_nl, iq4_nl_codes, 128, EZ_TYPE_IQ4_NL);
}
#undef EZ_GEMV_PAIRS

/* [sum of v0's lanes, .., sum of v3's]: four rows' integer sums at once
 * where the dot reduces each alone (the same integers). */
static inline __m128i lane_sums4(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

static inline __m256i fold_halves(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/* Q4_K / Q5_K (quant_avx512.c's EZ_DOT_KMIN): per super-block the
 * activation registers and bsums once, per row its codes and the lanes of
 * its two integer sums, reduced four rows together; then each row's float
 * term as the dot makes it. */
#define EZ_GEMV_KMIN(wtype, codes, w_type)                                                                     \
    const int64_t nb = w->n_cols / EZ_QK_K;                                                                  \
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;                                                       \
    const ez_dot_fn dot = ez_kernels_avx512(w_type)->dot;                                                    \
    const int64_t q = (r1 - r0) / GEMV_ROWS;                                                                 \
    for (int64_t j = 0; j < q; j++) {                                                                        \
        const wtype *a[GEMV_ROWS];                                                                           \
        float sum[GEMV_ROWS];                                                                                \
        for (int k = 0; k < GEMV_ROWS; k++) {                                                                \
            a[k] = (const wtype *)(w->data + (size_t)(r0 + k * q + j) * w->row_bytes);                       \
            sum[k] = 0.0f;                                                                                   \
        }                                                                                                    \
        for (int64_t i = 0; i < nb; i++) {                                                                   \
            const __m256i bs = _mm256_loadu_si256((const __m256i *)b[i].bsums);                              \
            __m512i yq[4];                                                                                   \
            __m256i is[GEMV_ROWS], ms[GEMV_ROWS];                                                            \
            int32_t isum[GEMV_ROWS], msum[GEMV_ROWS];                                                        \
            ez_avx512_k_y_quads(b[i].qs, yq);                                                                \
            for (int k = 0; k < GEMV_ROWS; k++) {                                                            \
                uint8_t sc[8], mn[8];                                                                        \
                __m512i q[4];                                                                                \
                ez_avx512_prefetch(&a[k][i], (int)sizeof(wtype));                                            \
                ez_unpack_q4k_scales(a[k][i].scales, sc, mn);                                                \
                codes(&a[k][i], q);                                                                          \
                is[k] = fold_halves(ez_avx512_k_scaled_lanes(q, yq, sc));                                    \
                ms[k] = ez_avx512_k_min_lanes(mn, bs);                                                       \
            }                                                                                                \
            _mm_storeu_si128((__m128i *)isum, lane_sums4(is[0], is[1], is[2], is[3]));                       \
            _mm_storeu_si128((__m128i *)msum, lane_sums4(ms[0], ms[1], ms[2], ms[3]));                       \
            for (int k = 0; k < GEMV_ROWS; k++)                                                              \
                sum[k] += ez_avx512_kmin_block(a[k][i].d, a[k][i].dmin, b[i].d, isum[k], msum[k]);           \
        }                                                                                                    \
        for (int k = 0; k < GEMV_ROWS; k++) y[k * q + j] = sum[k];                                           \
    }                                                                                                        \
    for (int64_t r = r0 + GEMV_ROWS * q; r < r1; r++) y[r - r0] = dot(w->n_cols, w->data + (size_t)r * w->row_bytes, x)

_Static_assert(GEMV_ROWS == 4, "lane_sums4 reduces four rows");

static void gemv_q4_k(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, float *y) {
    EZ_GEMV_KMIN(ez_block_q4_k, ez_avx512_q4k_codes, EZ_TYPE_Q4_K);
}

static void gemv_q5_k(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, float *y) {
    EZ_GEMV_KMIN(ez_block_q5_k, ez_avx512_q5k_codes, EZ_TYPE_Q5_K);
}
#undef EZ_GEMV_KMIN

/* Q6_K (quant_avx512.c's dot_q6_k_q8_k_avx512): per super-block the
 * activation registers once, per row its codes and the lanes of its scaled
 * and offset sums, reduced four rows together; then each row's float term
 * as the dot makes it. */
static void gemv_q6_k(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, float *y) {
    const int64_t nb = w->n_cols / EZ_QK_K;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    const ez_dot_fn dot = ez_kernels_avx512(EZ_TYPE_Q6_K)->dot;
    const int64_t q = (r1 - r0) / GEMV_ROWS;
    for (int64_t j = 0; j < q; j++) {
        const ez_block_q6_k *a[GEMV_ROWS];
        float sum[GEMV_ROWS];
        for (int k = 0; k < GEMV_ROWS; k++) {
            a[k] = (const ez_block_q6_k *)(w->data + (size_t)(r0 + k * q + j) * w->row_bytes);
            sum[k] = 0.0f;
        }
        for (int64_t i = 0; i < nb; i++) {
            __m512i yq[4];
            __m256i is[GEMV_ROWS], os[GEMV_ROWS];
            int32_t isum[GEMV_ROWS], osum[GEMV_ROWS];
            ez_avx512_q6k_y(b[i].qs, yq);
            for (int k = 0; k < GEMV_ROWS; k++) {
                __m512i c[4];
                ez_avx512_prefetch(&a[k][i], (int)sizeof(ez_block_q6_k));
                ez_avx512_q6k_codes(&a[k][i], c);
                is[k] = fold_halves(ez_avx512_q6k_scaled_lanes(c, yq, a[k][i].scales));
                os[k] = ez_avx512_q6k_offset_lanes(a[k][i].scales, b[i].bsums);
            }
            _mm_storeu_si128((__m128i *)isum, lane_sums4(is[0], is[1], is[2], is[3]));
            _mm_storeu_si128((__m128i *)osum, lane_sums4(os[0], os[1], os[2], os[3]));
            for (int k = 0; k < GEMV_ROWS; k++) sum[k] += ez_avx512_q6k_block(a[k][i].d, b[i].d, isum[k], osum[k]);
        }
        for (int k = 0; k < GEMV_ROWS; k++) y[k * q + j] = sum[k];
    }
    for (int64_t r = r0 + GEMV_ROWS * q; r < r1; r++) y[r - r0] = dot(w->n_cols, w->data + (size_t)r * w->row_bytes, x);
}

ez_llm_gemv_fn ez_llm_gemv_avx512(uint32_t w_type) {
    switch (w_type) {
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
