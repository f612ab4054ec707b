/* AVX-512 dots (F, DQ, BW, VL and VNNI; this file is compiled with the
 * AVX-512 flags and only called at the avx512 level). Dequantization stays
 * with the AVX2 table: it is bit-exact there and bound by memory. The Q8_K
 * activation quantizer is here, bit-equal to the reference.
 *
 * The int8 products are VNNI's vpdpbusd (unsigned x signed bytes, four per
 * int32 lane). Signed weights (Q4_0, Q5_0, Q8_0) move their sign onto the
 * activation, which lies in [-127, 127] as ez_quant_q8_0_ref makes it;
 * the K-quants' codes are unsigned already. 32-element blocks go two to a
 * register and accumulate in float lanes, so only the summation order
 * differs from the reference; K-quant super-blocks are reduced to one exact
 * integer each, as in the reference. */
#include "quant_kernels.h"
#include "quant_tables.h"

#if defined(EZ_ARCH_X86_64)
#include <immintrin.h>

#include "quant_avx512.h"

/* Sixteen int32 lanes, each the sum of four products w * y of signed bytes
 * (y in [-127, 127]). */
static inline __m512i dot_i8_quads(__m512i w, __m512i y) {
    const __m512i ys = _mm512_mask_sub_epi8(y, _mm512_movepi8_mask(w), _mm512_setzero_si512(), y);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(w), ys);
}

/* Q4_0 keeps its unsigned codes c = q + 8: sum(q y) = sum(c y) - 8 sum(y),
 * the second term a vpdpbusd of its own that starts the first. */
static inline __m512i q4_0_pair_dot(const ez_block_q4_0 *a, __m512i y) {
    const __m512i off = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(8), y);
    return _mm512_dpbusd_epi32(_mm512_sub_epi32(_mm512_setzero_si512(), off), ez_avx512_nibble_pair(a[0].qs, a[1].qs),
                               y);
}

static inline __m512i q5_0_pair_dot(const ez_block_q5_0 *a, __m512i y) {
    return dot_i8_quads(ez_avx512_q5_0_pair(a), y);
}

/* IQ4_NL: the codes of two blocks looked up in its value table. */
static inline __m512i iq4_nl_pair_dot(const ez_block_iq4_nl *a, __m512i y) {
    const __m512i kv = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ez_kvalues_iq4nl));
    return dot_i8_quads(_mm512_shuffle_epi8(kv, ez_avx512_nibble_pair(a[0].qs, a[1].qs)), y);
}

static inline __m512i q8_0_pair_dot(const ez_block_q8_0 *a, __m512i y) {
    return dot_i8_quads(ez_avx512_q8_0_pair(a), y);
}

/* acc + (d_w d_x per block) * sum(w * x) for blocks i, i + 1. A last odd
 * block goes through the same code with a zero second scale (its second
 * block reads block i again: in bounds). */
#define EZ_DOT_PAIRS(wtype, pair_dot)                                                                          \
    const wtype *a = (const wtype *)w;                                                                         \
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)x;                                                         \
    const __m512i pick01 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);                  \
    const __m512i pick23 = _mm512_add_epi32(pick01, _mm512_set1_epi32(2));                                     \
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();                                             \
    int64_t i = 0, nb = n / EZ_QK;                                                                             \
    for (; i + 4 <= nb; i += 4) {                                                                              \
        const __m512 d4 = _mm512_castps128_ps512(ez_avx512_scale_products4(&a[i], sizeof(wtype), &b[i]));      \
        ez_avx512_prefetch(&a[i], 4 * (int)sizeof(wtype));                                                     \
        acc0 = _mm512_fmadd_ps(_mm512_permutexvar_ps(pick01, d4),                                              \
                               _mm512_cvtepi32_ps(pair_dot(&a[i], ez_avx512_q8_0_pair(&b[i]))), acc0);         \
        acc1 = _mm512_fmadd_ps(_mm512_permutexvar_ps(pick23, d4),                                              \
                               _mm512_cvtepi32_ps(pair_dot(&a[i + 2], ez_avx512_q8_0_pair(&b[i + 2]))), acc1); \
    }                                                                                                          \
    for (; i + 2 <= nb; i += 2)                                                                                \
        acc0 = _mm512_fmadd_ps(ez_avx512_two_scales(ez_avx512_half_product(a[i].d, b[i].d),                    \
                                                    ez_avx512_half_product(a[i + 1].d, b[i + 1].d)),           \
                               _mm512_cvtepi32_ps(pair_dot(&a[i], ez_avx512_q8_0_pair(&b[i]))), acc0);         \
    if (i < nb) {                                                                                              \
        const wtype pair[2] = {a[i], a[i]};                                                                    \
        const ez_block_q8_0 ys[2] = {b[i], b[i]};                                                              \
        acc1 = _mm512_fmadd_ps(ez_avx512_two_scales(ez_avx512_half_product(a[i].d, b[i].d), 0.0f),             \
                               _mm512_cvtepi32_ps(pair_dot(pair, ez_avx512_q8_0_pair(ys))), acc1);             \
    }                                                                                                          \
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1))

static float dot_q4_0_q8_0_avx512(int64_t n, const void *w, const void *x) {
    EZ_DOT_PAIRS(ez_block_q4_0, q4_0_pair_dot);
}

static float dot_q5_0_q8_0_avx512(int64_t n, const void *w, const void *x) {
    EZ_DOT_PAIRS(ez_block_q5_0, q5_0_pair_dot);
}

static float dot_q8_0_q8_0_avx512(int64_t n, const void *w, const void *x) {
    EZ_DOT_PAIRS(ez_block_q8_0, q8_0_pair_dot);
}

static float dot_iq4_nl_q8_0_avx512(int64_t n, const void *w, const void *x) {
    EZ_DOT_PAIRS(ez_block_iq4_nl, iq4_nl_pair_dot);
}
#undef EZ_DOT_PAIRS

/* ---- K-quants ---- */

/* A Q4_K / Q5_K super-block of one row: its scaled sum, its min sum and
 * scales in float as the reference orders them (ez_avx512_kmin_block). */
#define EZ_DOT_KMIN(wtype, codes)                                                                      \
    const wtype *a = (const wtype *)w;                                                                 \
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;                                                 \
    const int64_t nb = n / EZ_QK_K;                                                                    \
    float sum = 0.0f;                                                                                  \
    for (int64_t i = 0; i < nb; i++) {                                                                 \
        uint8_t sc[8], mn[8];                                                                          \
        __m512i q[4], yq[4];                                                                           \
        ez_avx512_prefetch(&a[i], (int)sizeof(wtype));                                                 \
        ez_unpack_q4k_scales(a[i].scales, sc, mn);                                                     \
        codes(&a[i], q);                                                                               \
        ez_avx512_k_y_quads(b[i].qs, yq);                                                              \
        sum += ez_avx512_kmin_block(a[i].d, a[i].dmin, b[i].d,                                         \
                                    _mm512_reduce_add_epi32(ez_avx512_k_scaled_lanes(q, yq, sc)),      \
                                    _mm512_reduce_add_epi32(_mm512_zextsi256_si512(ez_avx512_k_min_lanes( \
                                        mn, _mm256_loadu_si256((const __m256i *)b[i].bsums)))));       \
    }                                                                                                  \
    return sum

static float dot_q4_k_q8_k_avx512(int64_t n, const void *w, const void *x) {
    EZ_DOT_KMIN(ez_block_q4_k, ez_avx512_q4k_codes);
}

static float dot_q5_k_q8_k_avx512(int64_t n, const void *w, const void *x) {
    EZ_DOT_KMIN(ez_block_q5_k, ez_avx512_q5k_codes);
}
#undef EZ_DOT_KMIN

/* Q6_K: the unsigned 6-bit codes times the activation, scaled per 16
 * elements, then the -32 offset as 32 * sum(scale * bsum), two runs of 32
 * per register (ez_avx512_q6k_codes). */
static float dot_q6_k_q8_k_avx512(int64_t n, const void *w, const void *x) {
    const ez_block_q6_k *a = (const ez_block_q6_k *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    const int64_t nb = n / EZ_QK_K;
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        __m512i q[4], yq[4];
        ez_avx512_prefetch(&a[i], (int)sizeof(ez_block_q6_k));
        ez_avx512_q6k_codes(&a[i], q);
        ez_avx512_q6k_y(b[i].qs, yq);
        sum += ez_avx512_q6k_block(
            a[i].d, b[i].d, _mm512_reduce_add_epi32(ez_avx512_q6k_scaled_lanes(q, yq, a[i].scales)),
            _mm512_reduce_add_epi32(_mm512_zextsi256_si512(ez_avx512_q6k_offset_lanes(a[i].scales, b[i].bsums))));
    }
    return sum;
}

/* ---- float weights ---- */

static inline __m512 f32x16(const uint8_t *p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, (const void *)p); }

/* Four accumulators over 64 elements a step, then 16 at a time, then the
 * masked rest: the same lanes whatever n. */
#define EZ_DOT_FLOATS(load, wbytes)                                                                 \
    const uint8_t *a = (const uint8_t *)w;                                                          \
    const float *y = (const float *)x;                                                              \
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;                                     \
    int64_t i = 0;                                                                                  \
    for (; i + 64 <= n; i += 64) {                                                                  \
        ez_avx512_prefetch(a + (wbytes) * i, 64 * (wbytes));                                            \
        s0 = _mm512_fmadd_ps(load(a + (wbytes) * i, 0xffff), _mm512_loadu_ps(y + i), s0);           \
        s1 = _mm512_fmadd_ps(load(a + (wbytes) * (i + 16), 0xffff), _mm512_loadu_ps(y + i + 16), s1); \
        s2 = _mm512_fmadd_ps(load(a + (wbytes) * (i + 32), 0xffff), _mm512_loadu_ps(y + i + 32), s2); \
        s3 = _mm512_fmadd_ps(load(a + (wbytes) * (i + 48), 0xffff), _mm512_loadu_ps(y + i + 48), s3); \
    }                                                                                               \
    for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(load(a + (wbytes) * i, 0xffff), _mm512_loadu_ps(y + i), s0); \
    if (i < n) {                                                                                    \
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);                                      \
        s1 = _mm512_fmadd_ps(load(a + (wbytes) * i, m), _mm512_maskz_loadu_ps(m, y + i), s1);       \
    }                                                                                               \
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)))

static float dot_f32_avx512(int64_t n, const void *w, const void *x) { EZ_DOT_FLOATS(f32x16, 4); }
static float dot_f16_avx512(int64_t n, const void *w, const void *x) { EZ_DOT_FLOATS(ez_avx512_f16x16, 2); }
static float dot_bf16_avx512(int64_t n, const void *w, const void *x) { EZ_DOT_FLOATS(ez_avx512_bf16x16, 2); }
#undef EZ_DOT_FLOATS

/* ---- the Q8_K activation quantizer ---- */

/* Q8_K activations, bit-equal to ez_quant_q8_k_ref for finite input: the
 * same largest magnitude (its first occurrence gives the sign), the same
 * float product iscale * x, rounded half to even by vcvtps2dq (the
 * reference's magic-number rounding does the same for |v| <= 2^22), and
 * the same integer sums of 16. */
static void quant_q8_k_avx512(const float *src, void *dst, int64_t n) {
    ez_block_q8_k *y = (ez_block_q8_k *)dst;
    const __m512 sign = _mm512_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / EZ_QK_K; i++, src += EZ_QK_K) {
        __m512 amax16 = _mm512_setzero_ps();
        for (int j = 0; j < EZ_QK_K; j += 16)
            amax16 = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(src + j)), amax16);
        const float amax = _mm512_reduce_max_ps(amax16);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < EZ_QK_K; j += 16) {
            const __m512 x = _mm512_loadu_ps(src + j);
            const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, x), _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (hit) {
                int l = 0;
                while (!(hit >> l & 1)) l++;
                max = src[j + l];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m512 is = _mm512_set1_ps(iscale);
        for (int j = 0; j < EZ_QK_K; j += 16) {
            const __m512i v = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(is, _mm512_loadu_ps(src + j))),
                                               _mm512_set1_epi32(127));
            _mm_storeu_si128((__m128i *)(y[i].qs + j), _mm512_cvtepi32_epi8(v));
            y[i].bsums[j / 16] = (int16_t)_mm512_reduce_add_epi32(v);
        }
        y[i].d = 1.0f / iscale;
    }
}

/* ---- the table: AVX2's dequantizers, the reference Q8_0 quantizer, these dots ---- */

#define EZ_AVX2_DEQUANT(name, type) \
    static void name(const void *src, float *dst, int64_t n) { ez_kernels_avx2(type)->dequant(src, dst, n); }
EZ_AVX2_DEQUANT(dequant_f16, EZ_TYPE_F16)
EZ_AVX2_DEQUANT(dequant_bf16, EZ_TYPE_BF16)
EZ_AVX2_DEQUANT(dequant_q4_0, EZ_TYPE_Q4_0)
EZ_AVX2_DEQUANT(dequant_q5_0, EZ_TYPE_Q5_0)
EZ_AVX2_DEQUANT(dequant_q8_0, EZ_TYPE_Q8_0)
EZ_AVX2_DEQUANT(dequant_q4_k, EZ_TYPE_Q4_K)
EZ_AVX2_DEQUANT(dequant_q5_k, EZ_TYPE_Q5_K)
EZ_AVX2_DEQUANT(dequant_q6_k, EZ_TYPE_Q6_K)
#undef EZ_AVX2_DEQUANT

static const ez_type_kernels g_avx512[EZ_TYPE_COUNT] = {
    [EZ_TYPE_F32] = {ez_dequant_f32_ref, NULL, dot_f32_avx512},
    [EZ_TYPE_F16] = {dequant_f16, NULL, dot_f16_avx512},
    [EZ_TYPE_BF16] = {dequant_bf16, NULL, dot_bf16_avx512},
    [EZ_TYPE_Q4_0] = {dequant_q4_0, NULL, dot_q4_0_q8_0_avx512},
    [EZ_TYPE_Q5_0] = {dequant_q5_0, NULL, dot_q5_0_q8_0_avx512},
    [EZ_TYPE_Q8_0] = {dequant_q8_0, ez_quant_q8_0_ref, dot_q8_0_q8_0_avx512},
    [EZ_TYPE_Q4_K] = {dequant_q4_k, NULL, dot_q4_k_q8_k_avx512},
    [EZ_TYPE_Q5_K] = {dequant_q5_k, NULL, dot_q5_k_q8_k_avx512},
    [EZ_TYPE_Q6_K] = {dequant_q6_k, NULL, dot_q6_k_q8_k_avx512},
    [EZ_TYPE_Q8_K] = {NULL, quant_q8_k_avx512, NULL},
    [EZ_TYPE_IQ4_NL] = {ez_dequant_iq4_nl_ref, NULL, dot_iq4_nl_q8_0_avx512},
};

const ez_type_kernels *ez_kernels_avx512(uint32_t type) {
    if (type >= EZ_TYPE_COUNT || (!g_avx512[type].dequant && !g_avx512[type].quant)) return NULL;
    return &g_avx512[type];
}

#else

const ez_type_kernels *ez_kernels_avx512(uint32_t type) {
    (void)type;
    return NULL;
}

#endif
