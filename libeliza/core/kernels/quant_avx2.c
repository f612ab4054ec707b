/* AVX2 + FMA + F16C kernels (this file is compiled with -mavx2 -mfma -mf16c
 * and only called after the CPU reported all three).
 *
 * Dequantization does the reference's float operations lane by lane and
 * takes block scales from the same scalar converter (F16C would quiet a
 * signalling NaN), so it is bit-identical to quant_ref.c. Dots keep
 * integer sums per block: K-quant super-blocks are reduced to one exact
 * integer each and scaled like the reference; 32-element blocks accumulate
 * in float lanes, so only the summation order differs.
 *
 * Activation quants must lie in [-127, 127], as ez_quant_q8_0_ref and
 * ez_quant_q8_k_ref produce them: the signed-by-signed int8 products use
 * _mm256_sign_epi8 to move the weight's sign onto the activation. */
#include "quant_kernels.h"
#include "quant_tables.h"

#if defined(EZ_ARCH_X86_64)
#include <immintrin.h>

/* GEMV streams weight rows from memory one after another; with this much
 * compute per byte the out-of-order window holds too few loads to cover
 * DRAM latency, so the dots prefetch the weights this many bytes ahead (into
 * the next rows). Measured on the 178 MB Q8_0 lm_head: 1.5x. */
#ifndef EZ_PREFETCH_AHEAD
#define EZ_PREFETCH_AHEAD 4096
#endif

/* Prefetches the cache lines of [p, p + bytes) EZ_PREFETCH_AHEAD bytes on;
 * a prefetch never faults, past the end of the mapping included. */
static inline void prefetch_ahead(const void *p, int bytes) {
    int off;
    for (off = 0; off < bytes; off += 64) _mm_prefetch((const char *)p + EZ_PREFETCH_AHEAD + off, _MM_HINT_T0);
}

static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

/* Product of two float16 scales, converted together by F16C (dots only:
 * F16C quiets signalling NaNs, which dequantization must not do). */
static inline float half_product(uint16_t a, uint16_t b) {
    const __m128 v = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)a | ((uint32_t)b << 16))));
    return _mm_cvtss_f32(_mm_mul_ss(v, _mm_movehdup_ps(v)));
}

static inline float half_to_float_f16c(uint16_t h) {
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

/* 16 packed nibbles -> 32 bytes: low nibbles are elements 0-15, high nibbles
 * elements 16-31 (the Q4_0 / Q5_0 order). The upper lane is shifted right 4
 * bits as 64-bit words; the mask drops what the shift carries in from the
 * next byte. */
static inline __m256i nibbles_to_bytes(const uint8_t *qs) {
    const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_srlv_epi64(q, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0f));
}

/* Bit j of a 32-bit word -> byte j of 0xff or 0x00. */
static inline __m256i bits_to_bytes(uint32_t bits) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128,
                                         1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

/* Q5_0 quants of one block as signed bytes: q - 16 is the nibble, less 16
 * where the fifth bit is clear. */
static inline __m256i q5_0_bytes(const ez_block_q5_0 *b) {
    uint32_t qh;
    memcpy(&qh, b->qh, sizeof qh);
    return _mm256_sub_epi8(nibbles_to_bytes(b->qs), _mm256_andnot_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
}

/* Eight int32 lanes, each the sum of four products w * y of signed bytes. */
static inline __m256i dot_i8_quads(__m256i w, __m256i y) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(y, w));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* dst[0..32) = d * q for 32 signed bytes. */
static inline void store_scaled_i8(float *dst, __m256i q, float d) {
    const __m256 vd = _mm256_set1_ps(d);
    const __m128i lo = _mm256_castsi256_si128(q);
    const __m128i hi = _mm256_extracti128_si256(q, 1);
    _mm256_storeu_ps(dst, _mm256_mul_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
    _mm256_storeu_ps(dst + 8, _mm256_mul_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
    _mm256_storeu_ps(dst + 16, _mm256_mul_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
    _mm256_storeu_ps(dst + 24, _mm256_mul_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
}

/* dst[0..8) = dl * q - ml for 8 unsigned bytes (the K-quant affine form). */
static inline void store_affine_u8x8(float *dst, __m128i q8, __m256 dl, __m256 ml) {
    const __m256 t = _mm256_mul_ps(dl, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q8)));
    _mm256_storeu_ps(dst, _mm256_sub_ps(t, ml));
}

/* dst[0..32) = dl * q - ml for 32 unsigned bytes. */
static inline void store_affine_u8(float *dst, __m256i q, float dl, float ml) {
    const __m256 vd = _mm256_set1_ps(dl), vm = _mm256_set1_ps(ml);
    const __m128i lo = _mm256_castsi256_si128(q);
    const __m128i hi = _mm256_extracti128_si256(q, 1);
    store_affine_u8x8(dst, lo, vd, vm);
    store_affine_u8x8(dst + 8, _mm_srli_si128(lo, 8), vd, vm);
    store_affine_u8x8(dst + 16, hi, vd, vm);
    store_affine_u8x8(dst + 24, _mm_srli_si128(hi, 8), vd, vm);
}

static void dequant_f16_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *p = (const uint8_t *)src;
    const __m128i abs_mask = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00);
    int64_t i = 0;
    int k;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128((const __m128i *)(p + 2 * i));
        const __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, abs_mask), inf);
        if (EZ_UNLIKELY(_mm_movemask_epi8(nan))) {
            for (k = 0; k < 8; k++) dst[i + k] = ez_half_to_float(ez_load_u16(p + 2 * (i + k)));
        } else {
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
        }
    }
    for (; i < n; i++) dst[i] = ez_half_to_float(ez_load_u16(p + 2 * i));
}

static inline __m256 bf16x8_to_ps(const uint8_t *p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

static void dequant_bf16_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *p = (const uint8_t *)src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, bf16x8_to_ps(p + 2 * i));
    for (; i < n; i++) dst[i] = ez_bf16_to_f32(ez_load_u16(p + 2 * i));
}

static void dequant_q4_0_avx2(const void *src, float *dst, int64_t n) {
    const ez_block_q4_0 *b = (const ez_block_q4_0 *)src;
    int64_t i, nb = n / EZ_QK;
    for (i = 0; i < nb; i++, dst += EZ_QK) {
        const __m256i q = _mm256_sub_epi8(nibbles_to_bytes(b[i].qs), _mm256_set1_epi8(8));
        store_scaled_i8(dst, q, ez_half_to_float(b[i].d));
    }
}

static void dequant_q5_0_avx2(const void *src, float *dst, int64_t n) {
    const ez_block_q5_0 *b = (const ez_block_q5_0 *)src;
    int64_t i, nb = n / EZ_QK;
    for (i = 0; i < nb; i++, dst += EZ_QK) store_scaled_i8(dst, q5_0_bytes(&b[i]), ez_half_to_float(b[i].d));
}

static void dequant_q8_0_avx2(const void *src, float *dst, int64_t n) {
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)src;
    int64_t i, nb = n / EZ_QK;
    for (i = 0; i < nb; i++, dst += EZ_QK)
        store_scaled_i8(dst, _mm256_loadu_si256((const __m256i *)b[i].qs), ez_half_to_float(b[i].d));
}

static void dequant_q4_k_avx2(const void *src, float *dst, int64_t n) {
    const ez_block_q4_k *b = (const ez_block_q4_k *)src;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    int64_t i, nb = n / EZ_QK_K;
    int k;
    for (i = 0; i < nb; i++) {
        const float d = ez_half_to_float(b[i].d);
        const float dmin = ez_half_to_float(b[i].dmin);
        uint8_t sc[8], mn[8];
        ez_unpack_q4k_scales(b[i].scales, sc, mn);
        for (k = 0; k < 4; k++, dst += 64) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * k));
            const float dl0 = d * (float)sc[2 * k], ml0 = dmin * (float)mn[2 * k];
            const float dl1 = d * (float)sc[2 * k + 1], ml1 = dmin * (float)mn[2 * k + 1];
            store_affine_u8(dst, _mm256_and_si256(q, m4), dl0, ml0);
            store_affine_u8(dst + 32, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4), dl1, ml1);
        }
    }
}

static void dequant_q5_k_avx2(const void *src, float *dst, int64_t n) {
    const ez_block_q5_k *b = (const ez_block_q5_k *)src;
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
    int64_t i, nb = n / EZ_QK_K;
    int k;
    for (i = 0; i < nb; i++) {
        const float d = ez_half_to_float(b[i].d);
        const float dmin = ez_half_to_float(b[i].dmin);
        __m256i qh = _mm256_loadu_si256((const __m256i *)b[i].qh);
        uint8_t sc[8], mn[8];
        ez_unpack_q4k_scales(b[i].scales, sc, mn);
        for (k = 0; k < 4; k++, dst += 64) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * k));
            /* qh was shifted right 2k bits, so bits 0 and 1 of each byte are
             * the fifth bits of sub-blocks 2k and 2k+1. */
            const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(qh, one), 4);
            const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), one), 4);
            const float dl0 = d * (float)sc[2 * k], ml0 = dmin * (float)mn[2 * k];
            const float dl1 = d * (float)sc[2 * k + 1], ml1 = dmin * (float)mn[2 * k + 1];
            store_affine_u8(dst, _mm256_or_si256(_mm256_and_si256(q, m4), h0), dl0, ml0);
            store_affine_u8(dst + 32, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1), dl1, ml1);
            qh = _mm256_srli_epi16(qh, 2);
        }
    }
}

/* The four 32-element runs of a Q6_K half (elements 0-31, 32-63, 64-95,
 * 96-127) as unsigned 6-bit values. Shifting 16-bit lanes moves bits across
 * the byte boundary; the 0x30 mask keeps only each byte's own two bits. */
static inline void q6_k_half_bytes(const uint8_t *ql, const uint8_t *qh, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30);
    const __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
    const __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
    const __m256i h = _mm256_loadu_si256((const __m256i *)qh);
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m2));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m2));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(h, m2));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(h, 2), m2));
}

/* dst[0..16) = dl * q for the 16 signed bytes of one 128-bit half. */
static inline void store_scaled_i8x16(float *dst, __m128i q, float dl) {
    const __m256 vd = _mm256_set1_ps(dl);
    _mm256_storeu_ps(dst, _mm256_mul_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
    _mm256_storeu_ps(dst + 8, _mm256_mul_ps(vd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)))));
}

static void dequant_q6_k_avx2(const void *src, float *dst, int64_t n) {
    const ez_block_q6_k *b = (const ez_block_q6_k *)src;
    int64_t i, nb = n / EZ_QK_K;
    int h, k;
    for (i = 0; i < nb; i++) {
        const float d = ez_half_to_float(b[i].d);
        for (h = 0; h < 2; h++) {
            __m256i q[4];
            q6_k_half_bytes(b[i].ql + 64 * h, b[i].qh + 32 * h, q);
            for (k = 0; k < 4; k++, dst += 32) {
                const int8_t *sc = b[i].scales + 8 * h + 2 * k;
                const __m256i qs = _mm256_sub_epi8(q[k], _mm256_set1_epi8(32));
                store_scaled_i8x16(dst, _mm256_castsi256_si128(qs), d * (float)sc[0]);
                store_scaled_i8x16(dst + 16, _mm256_extracti128_si256(qs, 1), d * (float)sc[1]);
            }
        }
    }
}

static float dot_f32_avx2(int64_t n, const void *w, const void *x) {
    const float *a = (const float *)w, *b = (const float *)x;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    float sum;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        prefetch_ahead(a + i, 32 * 4);
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) sum += a[i] * b[i];
    return sum;
}

static float dot_f16_avx2(int64_t n, const void *w, const void *x) {
    const uint8_t *a = (const uint8_t *)w;
    const float *b = (const float *)x;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    float sum;
    int64_t i = 0;
#define EZ_F16X8(off) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + 2 * (i + (off)))))
    for (; i + 32 <= n; i += 32) {
        prefetch_ahead(a + 2 * i, 32 * 2);
        s0 = _mm256_fmadd_ps(EZ_F16X8(0), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(EZ_F16X8(8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(EZ_F16X8(16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(EZ_F16X8(24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(EZ_F16X8(0), _mm256_loadu_ps(b + i), s0);
#undef EZ_F16X8
    sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) sum += half_to_float_f16c(ez_load_u16(a + 2 * i)) * b[i];
    return sum;
}

static float dot_bf16_avx2(int64_t n, const void *w, const void *x) {
    const uint8_t *a = (const uint8_t *)w;
    const float *b = (const float *)x;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    float sum;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        prefetch_ahead(a + 2 * i, 32 * 2);
        s0 = _mm256_fmadd_ps(bf16x8_to_ps(a + 2 * i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(bf16x8_to_ps(a + 2 * (i + 8)), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(bf16x8_to_ps(a + 2 * (i + 16)), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(bf16x8_to_ps(a + 2 * (i + 24)), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(bf16x8_to_ps(a + 2 * i), _mm256_loadu_ps(b + i), s0);
    sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) sum += ez_bf16_to_f32(ez_load_u16(a + 2 * i)) * b[i];
    return sum;
}

/* One 32-element block: acc + d_w * d_x * sum(w * x). */
static inline __m256 q4_0_block(const ez_block_q4_0 *a, const ez_block_q8_0 *b, __m256 acc) {
    const __m256i q = _mm256_sub_epi8(nibbles_to_bytes(a->qs), _mm256_set1_epi8(8));
    const __m256i p = dot_i8_quads(q, _mm256_loadu_si256((const __m256i *)b->qs));
    return _mm256_fmadd_ps(_mm256_set1_ps(half_product(a->d, b->d)), _mm256_cvtepi32_ps(p), acc);
}

static inline __m256 q5_0_block(const ez_block_q5_0 *a, const ez_block_q8_0 *b, __m256 acc) {
    const __m256i p = dot_i8_quads(q5_0_bytes(a), _mm256_loadu_si256((const __m256i *)b->qs));
    return _mm256_fmadd_ps(_mm256_set1_ps(half_product(a->d, b->d)), _mm256_cvtepi32_ps(p), acc);
}

static inline __m256 q8_0_block(const ez_block_q8_0 *a, const ez_block_q8_0 *b, __m256 acc) {
    const __m256i p = dot_i8_quads(_mm256_loadu_si256((const __m256i *)a->qs),
                                   _mm256_loadu_si256((const __m256i *)b->qs));
    return _mm256_fmadd_ps(_mm256_set1_ps(half_product(a->d, b->d)), _mm256_cvtepi32_ps(p), acc);
}

/* Two float accumulators, one per alternate block, hide the FMA latency. */
#define EZ_DOT_BLOCKS32(wtype, block_fn)                                   \
    const wtype *a = (const wtype *)w;                                     \
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)x;                     \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();         \
    int64_t i = 0, nb = n / EZ_QK;                                         \
    for (; i + 2 <= nb; i += 2) {                                          \
        prefetch_ahead(&a[i], 2 * (int)sizeof(wtype));                     \
        acc0 = block_fn(&a[i], &b[i], acc0);                               \
        acc1 = block_fn(&a[i + 1], &b[i + 1], acc1);                       \
    }                                                                      \
    if (i < nb) acc0 = block_fn(&a[i], &b[i], acc0);                       \
    return hsum_ps(_mm256_add_ps(acc0, acc1))

static float dot_q4_0_q8_0_avx2(int64_t n, const void *w, const void *x) {
    EZ_DOT_BLOCKS32(ez_block_q4_0, q4_0_block);
}

static float dot_q5_0_q8_0_avx2(int64_t n, const void *w, const void *x) {
    EZ_DOT_BLOCKS32(ez_block_q5_0, q5_0_block);
}

static float dot_q8_0_q8_0_avx2(int64_t n, const void *w, const void *x) {
    EZ_DOT_BLOCKS32(ez_block_q8_0, q8_0_block);
}
#undef EZ_DOT_BLOCKS32

/* sum(min_k * bsum) over a Q4_K / Q5_K super-block: each 6-bit min covers
 * two 16-element bsums, so the mins are duplicated into 16 int16 lanes. */
static inline int k_min_sum(const uint8_t mn[8], const int16_t bsums[16]) {
    const __m128i m8 = _mm_loadl_epi64((const __m128i *)mn);
    const __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    return hsum_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bsums), m16));
}

/* Unsigned quants (< 64) times activation bytes, scaled per 32-element
 * sub-block: maddubs pairs stay below 2 * 63 * 127, within int16. */
static inline __m256i scaled_u8_dot(__m256i q, __m256i y, __m256i scale16) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), scale16);
}

/* Eight sub-block scales as int16, in both 128-bit lanes. A shuffle_epi8
 * whose control holds 0x0100 + 0x0202 * j in every int16 broadcasts scale j;
 * the dots step the control instead of broadcasting from a register. */
static inline __m256i k_scales16(const uint8_t sc[8]) {
    return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
}

/* The same for Q6_K's signed scales. */
static inline __m256i k_scales16_i8(const int8_t sc[8]) {
    return _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
}

static float dot_q4_k_q8_k_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_q4_k *a = (const ez_block_q4_k *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    const __m256i m4 = _mm256_set1_epi8(0x0f), step = _mm256_set1_epi8(2);
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int k;
    for (i = 0; i < nb; i++) {
        __m256i acc = _mm256_setzero_si256(), pick = _mm256_set1_epi16(0x0100), scales;
        uint8_t sc[8], mn[8];
        float d, dmin;
        prefetch_ahead(&a[i], (int)sizeof(ez_block_q4_k));
        ez_unpack_q4k_scales(a[i].scales, sc, mn);
        scales = k_scales16(sc);
        for (k = 0; k < 4; k++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * k));
            const __m256i y0 = _mm256_loadu_si256((const __m256i *)(b[i].qs + 64 * k));
            const __m256i y1 = _mm256_loadu_si256((const __m256i *)(b[i].qs + 64 * k + 32));
            const __m256i s0 = _mm256_shuffle_epi8(scales, pick);
            const __m256i s1 = _mm256_shuffle_epi8(scales, _mm256_add_epi8(pick, step));
            acc = _mm256_add_epi32(acc, scaled_u8_dot(_mm256_and_si256(q, m4), y0, s0));
            acc = _mm256_add_epi32(acc, scaled_u8_dot(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), y1, s1));
            pick = _mm256_add_epi8(pick, _mm256_add_epi8(step, step));
        }
        d = half_to_float_f16c(a[i].d) * b[i].d;
        dmin = half_to_float_f16c(a[i].dmin) * b[i].d;
        d *= (float)hsum_epi32(acc);
        dmin *= (float)k_min_sum(mn, b[i].bsums);
        sum += d - dmin;
    }
    return sum;
}

static float dot_q5_k_q8_k_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_q5_k *a = (const ez_block_q5_k *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1), step = _mm256_set1_epi8(2);
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int k;
    for (i = 0; i < nb; i++) {
        __m256i acc = _mm256_setzero_si256(), pick = _mm256_set1_epi16(0x0100), scales;
        __m256i qh = _mm256_loadu_si256((const __m256i *)a[i].qh);
        uint8_t sc[8], mn[8];
        float d, dmin;
        prefetch_ahead(&a[i], (int)sizeof(ez_block_q5_k));
        ez_unpack_q4k_scales(a[i].scales, sc, mn);
        scales = k_scales16(sc);
        for (k = 0; k < 4; k++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * k));
            const __m256i y0 = _mm256_loadu_si256((const __m256i *)(b[i].qs + 64 * k));
            const __m256i y1 = _mm256_loadu_si256((const __m256i *)(b[i].qs + 64 * k + 32));
            const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(qh, one), 4);
            const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), one), 4);
            const __m256i q0 = _mm256_or_si256(_mm256_and_si256(q, m4), h0);
            const __m256i q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1);
            const __m256i s0 = _mm256_shuffle_epi8(scales, pick);
            const __m256i s1 = _mm256_shuffle_epi8(scales, _mm256_add_epi8(pick, step));
            acc = _mm256_add_epi32(acc, scaled_u8_dot(q0, y0, s0));
            acc = _mm256_add_epi32(acc, scaled_u8_dot(q1, y1, s1));
            pick = _mm256_add_epi8(pick, _mm256_add_epi8(step, step));
            qh = _mm256_srli_epi16(qh, 2);
        }
        d = half_to_float_f16c(a[i].d) * b[i].d;
        dmin = half_to_float_f16c(a[i].dmin) * b[i].d;
        d *= (float)hsum_epi32(acc);
        dmin *= (float)k_min_sum(mn, b[i].bsums);
        sum += d - dmin;
    }
    return sum;
}

/* Q6_K: products of the unsigned 6-bit quants, then the -32 offset as
 * 32 * sum(scale * bsum) (the 16-element sub-blocks match Q8_K's bsums). */
static float dot_q6_k_q8_k_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_q6_k *a = (const ez_block_q6_k *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    /* int16 lanes 0-7 of a maddubs product hold sub-block 2k's pair sums,
     * lanes 8-15 sub-block 2k+1's: the scale control picks scale 2k in the
     * low 128 bits and 2k+1 in the high ones, and steps by two scales. */
    const __m256i pick0 = _mm256_setr_epi16(0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100,
                                            0x0302, 0x0302, 0x0302, 0x0302, 0x0302, 0x0302, 0x0302, 0x0302);
    const __m256i step = _mm256_set1_epi8(4);
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int h, k;
    for (i = 0; i < nb; i++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a[i].scales));
        const __m256i offs = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)b[i].bsums));
        __m256i acc = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offs, 5));
        float d;
        prefetch_ahead(&a[i], (int)sizeof(ez_block_q6_k));
        for (h = 0; h < 2; h++) {
            const __m256i scales = k_scales16_i8(a[i].scales + 8 * h);
            __m256i q[4], pick = pick0;
            q6_k_half_bytes(a[i].ql + 64 * h, a[i].qh + 32 * h, q);
            for (k = 0; k < 4; k++) {
                const __m256i y = _mm256_loadu_si256((const __m256i *)(b[i].qs + 128 * h + 32 * k));
                const __m256i s = _mm256_shuffle_epi8(scales, pick);
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], y), s));
                pick = _mm256_add_epi8(pick, step);
            }
        }
        d = half_to_float_f16c(a[i].d) * b[i].d;
        d *= (float)hsum_epi32(acc);
        sum += d;
    }
    return sum;
}

/* ---- the types added for issue 13: fused dots (dequantization is the
 * reference's, which these types only need for embeddings and tests) ---- */

/* Q4_1 / Q5_1: unsigned codes times activation bytes in integers, the
 * block's min term m * s in a scalar beside the vector sum. */
static inline __m256i u8_dot_quads(__m256i q, __m256i y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), _mm256_set1_epi16(1));
}

static float dot_q4_1_q8_1_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_q4_1 *a = (const ez_block_q4_1 *)w;
    const ez_block_q8_1 *b = (const ez_block_q8_1 *)x;
    __m256 acc = _mm256_setzero_ps();
    float ms = 0.0f;
    int64_t i, nb = n / EZ_QK;
    for (i = 0; i < nb; i++) {
        const __m256i p = u8_dot_quads(nibbles_to_bytes(a[i].qs), _mm256_loadu_si256((const __m256i *)b[i].qs));
        prefetch_ahead(&a[i], (int)sizeof(ez_block_q4_1));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float_f16c(a[i].d) * b[i].d), _mm256_cvtepi32_ps(p), acc);
        ms += half_to_float_f16c(a[i].m) * b[i].s;
    }
    return hsum_ps(acc) + ms;
}

static float dot_q5_1_q8_1_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_q5_1 *a = (const ez_block_q5_1 *)w;
    const ez_block_q8_1 *b = (const ez_block_q8_1 *)x;
    __m256 acc = _mm256_setzero_ps();
    float ms = 0.0f;
    int64_t i, nb = n / EZ_QK;
    for (i = 0; i < nb; i++) {
        uint32_t qh;
        __m256i q, p;
        memcpy(&qh, a[i].qh, sizeof qh);
        q = _mm256_or_si256(nibbles_to_bytes(a[i].qs), _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
        p = u8_dot_quads(q, _mm256_loadu_si256((const __m256i *)b[i].qs));
        prefetch_ahead(&a[i], (int)sizeof(ez_block_q5_1));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(half_to_float_f16c(a[i].d) * b[i].d), _mm256_cvtepi32_ps(p), acc);
        ms += half_to_float_f16c(a[i].m) * b[i].s;
    }
    return hsum_ps(acc) + ms;
}

/* A 16-byte value table in both lanes, for _mm256_shuffle_epi8 lookups. */
static inline __m256i table16(const int8_t t[16]) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t));
}

static inline __m256 iq4_nl_block(const ez_block_iq4_nl *a, const ez_block_q8_0 *b, __m256 acc) {
    const __m256i q = _mm256_shuffle_epi8(table16(ez_kvalues_iq4nl), nibbles_to_bytes(a->qs));
    const __m256i p = dot_i8_quads(q, _mm256_loadu_si256((const __m256i *)b->qs));
    return _mm256_fmadd_ps(_mm256_set1_ps(half_product(a->d, b->d)), _mm256_cvtepi32_ps(p), acc);
}

/* ez_e8m0_to_float_half, inlined: 2^(e - 128) as a float. */
static inline float e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline __m256 mxfp4_block(const ez_block_mxfp4 *a, const ez_block_q8_0 *b, __m256 acc) {
    const __m256i q = _mm256_shuffle_epi8(table16(ez_kvalues_mxfp4), nibbles_to_bytes(a->qs));
    const __m256i p = dot_i8_quads(q, _mm256_loadu_si256((const __m256i *)b->qs));
    const float d = e8m0_half(a->e) * half_to_float_f16c(b->d);
    return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(p), acc);
}

static float dot_iq4_nl_q8_0_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_iq4_nl *a = (const ez_block_iq4_nl *)w;
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)x;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0, nb = n / EZ_QK;
    for (; i + 2 <= nb; i += 2) {
        prefetch_ahead(&a[i], 2 * (int)sizeof(ez_block_iq4_nl));
        acc0 = iq4_nl_block(&a[i], &b[i], acc0);
        acc1 = iq4_nl_block(&a[i + 1], &b[i + 1], acc1);
    }
    if (i < nb) acc0 = iq4_nl_block(&a[i], &b[i], acc0);
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

static float dot_mxfp4_q8_0_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_mxfp4 *a = (const ez_block_mxfp4 *)w;
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)x;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0, nb = n / EZ_QK;
    for (; i + 2 <= nb; i += 2) {
        prefetch_ahead(&a[i], 2 * (int)sizeof(ez_block_mxfp4));
        acc0 = mxfp4_block(&a[i], &b[i], acc0);
        acc1 = mxfp4_block(&a[i + 1], &b[i + 1], acc1);
    }
    if (i < nb) acc0 = mxfp4_block(&a[i], &b[i], acc0);
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* The 2-bit layout of Q2_K / Q3_K / TQ2_0: bits 2s..2s+1 of the 32 bytes of
 * half h are elements 128h + 32s .. +31, whose maddubs lanes 0-7 and 8-15
 * fall in sub-blocks 8h + 2s and 8h + 2s + 1; a shuffle control picking
 * int16 scale 2s in the low 128 bits and 2s + 1 in the high ones (Q6_K's
 * scheme) scales them. */
#define PICK_16PAIRS                                                                                          \
    _mm256_setr_epi16(0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0100, 0x0302, 0x0302, 0x0302, \
                      0x0302, 0x0302, 0x0302, 0x0302, 0x0302)

static float dot_q2_k_q8_k_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_q2_k *a = (const ez_block_q2_k *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    const __m256i m3 = _mm256_set1_epi8(3), step = _mm256_set1_epi8(4);
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int h, s;
    for (i = 0; i < nb; i++) {
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)a[i].scales);
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(0x0f)));
        const __m128i scl = _mm_and_si128(sc8, _mm_set1_epi8(0x0f));
        __m256i acc = _mm256_setzero_si256();
        float d, dmin;
        prefetch_ahead(&a[i], (int)sizeof(ez_block_q2_k));
        for (h = 0; h < 2; h++) {
            const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(h ? _mm_srli_si128(scl, 8) : scl));
            const __m256i q = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * h));
            __m256i pick = PICK_16PAIRS;
            for (s = 0; s < 4; s++) {
                const __m256i c = _mm256_and_si256(_mm256_srli_epi16(q, 2 * s), m3);
                const __m256i y = _mm256_loadu_si256((const __m256i *)(b[i].qs + 128 * h + 32 * s));
                acc = _mm256_add_epi32(acc, scaled_u8_dot(c, y, _mm256_shuffle_epi8(scales, pick)));
                pick = _mm256_add_epi8(pick, step);
            }
        }
        d = half_to_float_f16c(a[i].d) * b[i].d;
        dmin = half_to_float_f16c(a[i].dmin) * b[i].d;
        d *= (float)hsum_epi32(acc);
        dmin *= (float)hsum_epi32(_mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)b[i].bsums)));
        sum += d - dmin;
    }
    return sum;
}

/* The 16 signed Q3_K scales (ez_unpack_q3k_scales) as int16: low nibbles
 * of bytes 0-7 then their high nibbles, and for scale 4k + j bits 2k..2k+1
 * of byte 8 + j, one variable shift per 32-bit group. */
static inline __m256i q3_k_scales16(const uint8_t s[12]) {
    uint32_t h;
    const __m128i lo8 = _mm_loadl_epi64((const __m128i *)s);
    const __m128i lo = _mm_and_si128(_mm_unpacklo_epi64(lo8, _mm_srli_epi16(lo8, 4)), _mm_set1_epi8(15));
    __m128i hi;
    memcpy(&h, s + 8, sizeof h);
    hi = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)h), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    return _mm256_cvtepi8_epi16(_mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32)));
}

/* Q3_K as unsigned codes c = q + 4 (the hmask bit adds the 4), with
 * sum(scale * q * y) = sum(scale * c * y) - 4 * sum(scale * bsum). */
static float dot_q3_k_q8_k_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_q3_k *a = (const ez_block_q3_k *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), step = _mm256_set1_epi8(4);
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int h, s;
    for (i = 0; i < nb; i++) {
        const __m256i hm = _mm256_loadu_si256((const __m256i *)a[i].hmask);
        const __m256i all = q3_k_scales16(a[i].scales);
        __m256i acc;
        float d;
        prefetch_ahead(&a[i], (int)sizeof(ez_block_q3_k));
        acc = _mm256_slli_epi32(_mm256_madd_epi16(all, _mm256_loadu_si256((const __m256i *)b[i].bsums)), 2);
        acc = _mm256_sub_epi32(_mm256_setzero_si256(), acc);
        for (h = 0; h < 2; h++) {
            const __m256i scales =
                _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(all, 1) : _mm256_castsi256_si128(all));
            const __m256i q = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * h));
            __m256i pick = PICK_16PAIRS;
            for (s = 0; s < 4; s++) {
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + s), one);
                const __m256i c = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * s), m3),
                                                  _mm256_slli_epi16(hb, 2));
                const __m256i y = _mm256_loadu_si256((const __m256i *)(b[i].qs + 128 * h + 32 * s));
                acc = _mm256_add_epi32(acc, scaled_u8_dot(c, y, _mm256_shuffle_epi8(scales, pick)));
                pick = _mm256_add_epi8(pick, step);
            }
        }
        d = half_to_float_f16c(a[i].d) * b[i].d;
        d *= (float)hsum_epi32(acc);
        sum += d;
    }
    return sum;
}

static float dot_iq4_xs_q8_k_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_iq4_xs *a = (const ez_block_iq4_xs *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    const __m256i kv = table16(ez_kvalues_iq4nl);
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int k;
    for (i = 0; i < nb; i++) {
        const uint16_t sh = ez_load_u16(&a[i].scales_h);
        __m256i acc = _mm256_setzero_si256();
        float d;
        prefetch_ahead(&a[i], (int)sizeof(ez_block_iq4_xs));
        for (k = 0; k < 8; k++) {
            const int ls = (((a[i].scales_l[k / 2] >> (4 * (k % 2))) & 15) | (((sh >> (2 * k)) & 3) << 4)) - 32;
            const __m256i q = _mm256_shuffle_epi8(kv, nibbles_to_bytes(a[i].qs + 16 * k));
            const __m256i y = _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * k));
            const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(y, q));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16((short)ls)));
        }
        d = half_to_float_f16c(a[i].d) * b[i].d;
        d *= (float)hsum_epi32(acc);
        sum += d;
    }
    return sum;
}

/* TQ2_0: sum((c - 1) y) = sum(c y) - sum(bsums). */
static float dot_tq2_0_q8_k_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_tq2_0 *a = (const ez_block_tq2_0 *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    const __m256i m3 = _mm256_set1_epi8(3);
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int h, s;
    for (i = 0; i < nb; i++) {
        __m256i acc = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)b[i].bsums), _mm256_set1_epi16(-1));
        float d;
        prefetch_ahead(&a[i], (int)sizeof(ez_block_tq2_0));
        for (h = 0; h < 2; h++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(a[i].qs + 32 * h));
            for (s = 0; s < 4; s++) {
                const __m256i c = _mm256_and_si256(_mm256_srli_epi16(q, 2 * s), m3);
                acc = _mm256_add_epi32(acc, u8_dot_quads(c, _mm256_loadu_si256((const __m256i *)(b[i].qs + 128 * h + 32 * s))));
            }
        }
        d = half_to_float_f16c(a[i].d) * b[i].d;
        d *= (float)hsum_epi32(acc);
        sum += d;
    }
    return sum;
}
#undef PICK_16PAIRS

/* ---- grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) ---------------------------------
 * Each 32-element sub-block is four 8-byte grid rows (unsigned values below
 * 64) with a sign byte per row: the rows are gathered into one vector, the
 * signs move onto the activation (_mm256_sign_epi8) and the unsigned-by-
 * signed products pair up in maddubs, then take the sub-block's scale in
 * madd. Integer sums per super-block, scaled as the reference does. */

static inline uint64_t grid_row(const uint8_t *row) {
    uint64_t v;
    memcpy(&v, row, sizeof v);
    return v;
}

/* +1 / -1 bytes: bit j of sign byte k negates element 8k + j. */
static inline __m256i sign_bytes(uint32_t s0, uint32_t s1, uint32_t s2, uint32_t s3) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)(s0 | s1 << 8 | s2 << 16 | s3 << 24)), spread);
    const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
    return _mm256_or_si256(neg, _mm256_set1_epi8(1));
}

/* sum over the sub-block of ls * v * y, ls0 for elements 0-15, ls1 for 16-31. */
static inline __m256i grid_sub32(uint64_t r0, uint64_t r1, uint64_t r2, uint64_t r3, __m256i signs,
                                 const int8_t *y, int ls0, int ls1) {
    const __m256i q = _mm256_setr_epi64x((long long)r0, (long long)r1, (long long)r2, (long long)r3);
    const __m256i ys = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y), signs);
    const __m256i ls = _mm256_setr_m128i(_mm_set1_epi16((short)ls0), _mm_set1_epi16((short)ls1));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, ys), ls);
}

static float dot_iq2_xxs_q8_k_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_iq2_xxs *a = (const ez_block_iq2_xxs *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int ib;
    for (i = 0; i < nb; i++) {
        __m256i acc = _mm256_setzero_si256();
        float d;
        prefetch_ahead(&a[i], (int)sizeof(ez_block_iq2_xxs));
        for (ib = 0; ib < 8; ib++) {
            uint32_t g, s;
            int ls;
            memcpy(&g, &a[i].qs[4 * ib], sizeof g);
            memcpy(&s, &a[i].qs[4 * ib + 2], sizeof s);
            ls = 2 * (int)(s >> 28) + 1;
            acc = _mm256_add_epi32(
                acc, grid_sub32(grid_row(ez_iq2xxs_grid[g & 255]), grid_row(ez_iq2xxs_grid[g >> 8 & 255]),
                                grid_row(ez_iq2xxs_grid[g >> 16 & 255]), grid_row(ez_iq2xxs_grid[g >> 24]),
                                sign_bytes(ez_ksigns_iq2xs[s & 127], ez_ksigns_iq2xs[s >> 7 & 127],
                                           ez_ksigns_iq2xs[s >> 14 & 127], ez_ksigns_iq2xs[s >> 21 & 127]),
                                b[i].qs + 32 * ib, ls, ls));
        }
        d = half_to_float_f16c(a[i].d) * b[i].d;
        d *= (float)hsum_epi32(acc);
        sum += d;
    }
    return sum * 0.125f;
}

static float dot_iq2_xs_q8_k_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_iq2_xs *a = (const ez_block_iq2_xs *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int ib;
    for (i = 0; i < nb; i++) {
        __m256i acc = _mm256_setzero_si256();
        float d;
        prefetch_ahead(&a[i], (int)sizeof(ez_block_iq2_xs));
        for (ib = 0; ib < 8; ib++) {
            uint16_t q[4];
            memcpy(q, &a[i].qs[4 * ib], sizeof q);
            acc = _mm256_add_epi32(
                acc, grid_sub32(grid_row(ez_iq2xs_grid[q[0] & 511]), grid_row(ez_iq2xs_grid[q[1] & 511]),
                                grid_row(ez_iq2xs_grid[q[2] & 511]), grid_row(ez_iq2xs_grid[q[3] & 511]),
                                sign_bytes(ez_ksigns_iq2xs[q[0] >> 9], ez_ksigns_iq2xs[q[1] >> 9],
                                           ez_ksigns_iq2xs[q[2] >> 9], ez_ksigns_iq2xs[q[3] >> 9]),
                                b[i].qs + 32 * ib, 2 * (a[i].scales[ib] & 15) + 1, 2 * (a[i].scales[ib] >> 4) + 1));
        }
        d = half_to_float_f16c(a[i].d) * b[i].d;
        d *= (float)hsum_epi32(acc);
        sum += d;
    }
    return sum * 0.125f;
}

static float dot_iq2_s_q8_k_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_iq2_s *a = (const ez_block_iq2_s *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int ib;
    for (i = 0; i < nb; i++) {
        __m256i acc = _mm256_setzero_si256();
        float d;
        prefetch_ahead(&a[i], (int)sizeof(ez_block_iq2_s));
        for (ib = 0; ib < 8; ib++) {
            const uint8_t *qs = a[i].qs + 4 * ib, *sg = a[i].qs + 32 + 4 * ib;
            const unsigned h = a[i].qh[ib];
            acc = _mm256_add_epi32(
                acc, grid_sub32(grid_row(ez_iq2s_grid[qs[0] | (h << 8 & 0x300)]),
                                grid_row(ez_iq2s_grid[qs[1] | (h << 6 & 0x300)]),
                                grid_row(ez_iq2s_grid[qs[2] | (h << 4 & 0x300)]),
                                grid_row(ez_iq2s_grid[qs[3] | (h << 2 & 0x300)]),
                                sign_bytes(sg[0], sg[1], sg[2], sg[3]), b[i].qs + 32 * ib,
                                2 * (a[i].scales[ib] & 15) + 1, 2 * (a[i].scales[ib] >> 4) + 1));
        }
        d = half_to_float_f16c(a[i].d) * b[i].d;
        d *= (float)hsum_epi32(acc);
        sum += d;
    }
    return sum * 0.125f;
}

/* IQ3_XXS: eight 4-byte grid rows (values below 64) per sub-block, one
 * sign byte per 8 elements, one scale; the reference's unit is 1/4. */
static float dot_iq3_xxs_q8_k_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_iq3_xxs *a = (const ez_block_iq3_xxs *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int ib;
    for (i = 0; i < nb; i++) {
        __m256i acc = _mm256_setzero_si256();
        float d;
        prefetch_ahead(&a[i], (int)sizeof(ez_block_iq3_xxs));
        for (ib = 0; ib < 8; ib++) {
            const uint8_t *q = a[i].qs + 8 * ib;
            uint32_t aux, r[8];
            int k;
            __m256i g, ys;
            memcpy(&aux, a[i].qs + 64 + 4 * ib, sizeof aux);
            for (k = 0; k < 8; k++) memcpy(&r[k], ez_iq3xxs_grid[q[k]], sizeof r[k]);
            g = _mm256_loadu_si256((const __m256i *)r);
            ys = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * ib)),
                                  sign_bytes(ez_ksigns_iq2xs[aux & 127], ez_ksigns_iq2xs[aux >> 7 & 127],
                                             ez_ksigns_iq2xs[aux >> 14 & 127], ez_ksigns_iq2xs[aux >> 21 & 127]));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(g, ys),
                                                          _mm256_set1_epi16((short)(2 * (int)(aux >> 28) + 1))));
        }
        d = half_to_float_f16c(a[i].d) * b[i].d;
        d *= (float)hsum_epi32(acc);
        sum += d;
    }
    return sum * 0.25f;
}

/* IQ3_S: eight 4-byte grid rows (odd values below 16) per sub-block, their
 * ninth index bits in qh, explicit sign bytes, one 4-bit scale; unit 1. */
static float dot_iq3_s_q8_k_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_iq3_s *a = (const ez_block_iq3_s *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int ib;
    for (i = 0; i < nb; i++) {
        __m256i acc = _mm256_setzero_si256();
        float d;
        prefetch_ahead(&a[i], (int)sizeof(ez_block_iq3_s));
        for (ib = 0; ib < 8; ib++) {
            const uint8_t *q = a[i].qs + 8 * ib, *sg = a[i].signs + 4 * ib;
            const unsigned h = a[i].qh[ib];
            const int ls = 2 * ((a[i].scales[ib / 2] >> (4 * (ib % 2))) & 15) + 1;
            uint32_t r[8];
            int k;
            __m256i ys;
            for (k = 0; k < 8; k++) memcpy(&r[k], ez_iq3s_grid[q[k] | (h << (8 - k) & 0x100)], sizeof r[k]);
            ys = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * ib)),
                                  sign_bytes(sg[0], sg[1], sg[2], sg[3]));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)r), ys),
                                                          _mm256_set1_epi16((short)ls)));
        }
        d = half_to_float_f16c(a[i].d) * b[i].d;
        d *= (float)hsum_epi32(acc);
        sum += d;
    }
    return sum;
}

/* IQ1_S / IQ1_M: a sub-block's values are 8 * g + delta with g in {-1, 0, 1}
 * from four 8-byte grid rows and delta = +-1 per row (IQ1_M) or per
 * sub-block (IQ1_S), so |v| <= 9; the products v * y take the sign trick of
 * dot_i8_quads, the scales (per half for IQ1_M) in madd. Unit 1/8. */
static inline __m256i iq1_sub32(uint64_t r0, uint64_t r1, uint64_t r2, uint64_t r3, __m256i delta,
                                const int8_t *y, int ls0, int ls1) {
    const __m256i g = _mm256_setr_epi64x((long long)r0, (long long)r1, (long long)r2, (long long)r3);
    const __m256i v = _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), delta);
    const __m256i yv = _mm256_loadu_si256((const __m256i *)y);
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(yv, v));
    return _mm256_madd_epi16(p16, _mm256_setr_m128i(_mm_set1_epi16((short)ls0), _mm_set1_epi16((short)ls1)));
}

static float dot_iq1_s_q8_k_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_iq1_s *a = (const ez_block_iq1_s *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int ib;
    for (i = 0; i < nb; i++) {
        __m256i acc = _mm256_setzero_si256();
        float d;
        prefetch_ahead(&a[i], (int)sizeof(ez_block_iq1_s));
        for (ib = 0; ib < 8; ib++) {
            const uint8_t *q = a[i].qs + 4 * ib;
            const unsigned qh = ez_load_u16(&a[i].qh[ib]);
            const int ls = 2 * (int)((qh >> 12) & 7) + 1;
            acc = _mm256_add_epi32(
                acc, iq1_sub32(grid_row((const uint8_t *)ez_iq1s_grid[q[0] | (qh << 8 & 0x700)]),
                               grid_row((const uint8_t *)ez_iq1s_grid[q[1] | (qh << 5 & 0x700)]),
                               grid_row((const uint8_t *)ez_iq1s_grid[q[2] | (qh << 2 & 0x700)]),
                               grid_row((const uint8_t *)ez_iq1s_grid[q[3] | (qh >> 1 & 0x700)]),
                               _mm256_set1_epi8(qh & 0x8000 ? -1 : 1), b[i].qs + 32 * ib, ls, ls));
        }
        d = half_to_float_f16c(a[i].d) * b[i].d;
        d *= (float)hsum_epi32(acc);
        sum += d;
    }
    return sum * 0.125f;
}

/* Eight bytes of the IQ1_M delta of a grid row whose qh nibble is nib. */
static inline long long iq1_m_delta(unsigned nib) {
    return nib & 8 ? -1LL : 0x0101010101010101LL;
}

static float dot_iq1_m_q8_k_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_iq1_m *a = (const ez_block_iq1_m *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int ib;
    for (i = 0; i < nb; i++) {
        __m256i acc = _mm256_setzero_si256();
        float d;
        prefetch_ahead(&a[i], (int)sizeof(ez_block_iq1_m));
        for (ib = 0; ib < 8; ib++) {
            const uint8_t *q = a[i].qs + 4 * ib;
            const unsigned h0 = a[i].qh[2 * ib], h1 = a[i].qh[2 * ib + 1];
            const unsigned sc = ez_load_u16(a[i].scales + 2 * (ib / 2)) >> (6 * (ib % 2));
            const __m256i delta = _mm256_setr_epi64x(iq1_m_delta(h0), iq1_m_delta(h0 >> 4), iq1_m_delta(h1),
                                                     iq1_m_delta(h1 >> 4));
            acc = _mm256_add_epi32(
                acc, iq1_sub32(grid_row((const uint8_t *)ez_iq1s_grid[q[0] | (h0 << 8 & 0x700)]),
                               grid_row((const uint8_t *)ez_iq1s_grid[q[1] | (h0 << 4 & 0x700)]),
                               grid_row((const uint8_t *)ez_iq1s_grid[q[2] | (h1 << 8 & 0x700)]),
                               grid_row((const uint8_t *)ez_iq1s_grid[q[3] | (h1 << 4 & 0x700)]), delta,
                               b[i].qs + 32 * ib, 2 * (int)(sc & 7) + 1, 2 * (int)(sc >> 3 & 7) + 1));
        }
        d = half_to_float_f16c(ez_iq1_m_d(&a[i])) * b[i].d;
        d *= (float)hsum_epi32(acc);
        sum += d;
    }
    return sum * 0.125f;
}

/* TQ1_0 (layout at tq1_0_trit in quant_ref.c). Byte times 3 is two byte
 * adds; trit (q * 3) >> 8 is [q >= 86] + [q >= 171]. Elements 160-255 are
 * three vectors: qs[32..47] times 1 | 3, 9 | 27, and 81 | the qh bytes times
 * 1, 3, 9, 27 per group of four. sum((t - 1) y) = sum(t y) - sum(bsums). */
static inline __m256i times3(__m256i v) {
    return _mm256_add_epi8(_mm256_add_epi8(v, v), v);
}

static inline __m256i trit_dot(__m256i q, const int8_t *y) {
    const __m256i ge86 = _mm256_cmpeq_epi8(_mm256_max_epu8(q, _mm256_set1_epi8(86)), q);
    const __m256i ge171 = _mm256_cmpeq_epi8(_mm256_max_epu8(q, _mm256_set1_epi8((char)171)), q);
    const __m256i t = _mm256_sub_epi8(_mm256_sub_epi8(_mm256_setzero_si256(), ge86), ge171);
    return _mm256_maddubs_epi16(t, _mm256_loadu_si256((const __m256i *)y));
}

static float dot_tq1_0_q8_k_avx2(int64_t n, const void *w, const void *x) {
    const ez_block_tq1_0 *a = (const ez_block_tq1_0 *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int k;
    for (i = 0; i < nb; i++) {
        const int8_t *y = b[i].qs;
        __m256i q = _mm256_loadu_si256((const __m256i *)a[i].qs), p16 = _mm256_setzero_si256(), t, acc;
        __m128i h1, h3, h9;
        uint32_t qh;
        float d;
        prefetch_ahead(&a[i], (int)sizeof(ez_block_tq1_0));
        for (k = 0; k < 5; k++, q = times3(q)) p16 = _mm256_add_epi16(p16, trit_dot(q, y + 32 * k));
        t = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(a[i].qs + 32)));
        t = _mm256_blend_epi32(t, times3(t), 0xf0);
        p16 = _mm256_add_epi16(p16, trit_dot(t, y + 160));
        t = times3(times3(t));
        p16 = _mm256_add_epi16(p16, trit_dot(t, y + 192));
        memcpy(&qh, a[i].qh, sizeof qh);
        h1 = _mm_set1_epi32((int)qh);
        h3 = _mm_add_epi8(_mm_add_epi8(h1, h1), h1);
        h9 = _mm_add_epi8(_mm_add_epi8(h3, h3), h3);
        h1 = _mm_blend_epi32(_mm_blend_epi32(h1, h3, 0x2), h9, 0x4);
        h1 = _mm_blend_epi32(h1, _mm_add_epi8(_mm_add_epi8(h9, h9), h9), 0x8);
        t = _mm256_inserti128_si256(times3(times3(t)), h1, 1);
        p16 = _mm256_add_epi16(p16, trit_dot(t, y + 224));
        acc = _mm256_madd_epi16(_mm256_sub_epi16(p16, _mm256_loadu_si256((const __m256i *)b[i].bsums)),
                                _mm256_set1_epi16(1));
        d = half_to_float_f16c(a[i].d) * b[i].d;
        d *= (float)hsum_epi32(acc);
        sum += d;
    }
    return sum;
}

static const ez_type_kernels g_avx2[EZ_TYPE_COUNT] = {
    [EZ_TYPE_F32] = {ez_dequant_f32_ref, NULL, dot_f32_avx2},
    [EZ_TYPE_F16] = {dequant_f16_avx2, NULL, dot_f16_avx2},
    [EZ_TYPE_BF16] = {dequant_bf16_avx2, NULL, dot_bf16_avx2},
    [EZ_TYPE_Q4_0] = {dequant_q4_0_avx2, NULL, dot_q4_0_q8_0_avx2},
    [EZ_TYPE_Q5_0] = {dequant_q5_0_avx2, NULL, dot_q5_0_q8_0_avx2},
    [EZ_TYPE_Q8_0] = {dequant_q8_0_avx2, ez_quant_q8_0_ref, dot_q8_0_q8_0_avx2},
    [EZ_TYPE_Q4_K] = {dequant_q4_k_avx2, NULL, dot_q4_k_q8_k_avx2},
    [EZ_TYPE_Q5_K] = {dequant_q5_k_avx2, NULL, dot_q5_k_q8_k_avx2},
    [EZ_TYPE_Q6_K] = {dequant_q6_k_avx2, NULL, dot_q6_k_q8_k_avx2},
    [EZ_TYPE_Q8_K] = {NULL, ez_quant_q8_k_ref, NULL},
    [EZ_TYPE_Q4_1] = {ez_dequant_q4_1_ref, NULL, dot_q4_1_q8_1_avx2},
    [EZ_TYPE_Q5_1] = {ez_dequant_q5_1_ref, NULL, dot_q5_1_q8_1_avx2},
    [EZ_TYPE_Q8_1] = {NULL, ez_quant_q8_1_ref, NULL},
    [EZ_TYPE_IQ4_NL] = {ez_dequant_iq4_nl_ref, NULL, dot_iq4_nl_q8_0_avx2},
    [EZ_TYPE_MXFP4] = {ez_dequant_mxfp4_ref, NULL, dot_mxfp4_q8_0_avx2},
    [EZ_TYPE_Q2_K] = {ez_dequant_q2_k_ref, NULL, dot_q2_k_q8_k_avx2},
    [EZ_TYPE_Q3_K] = {ez_dequant_q3_k_ref, NULL, dot_q3_k_q8_k_avx2},
    [EZ_TYPE_IQ4_XS] = {ez_dequant_iq4_xs_ref, NULL, dot_iq4_xs_q8_k_avx2},
    [EZ_TYPE_TQ2_0] = {ez_dequant_tq2_0_ref, NULL, dot_tq2_0_q8_k_avx2},
    [EZ_TYPE_IQ2_XXS] = {ez_dequant_iq2_xxs_ref, NULL, dot_iq2_xxs_q8_k_avx2},
    [EZ_TYPE_IQ2_XS] = {ez_dequant_iq2_xs_ref, NULL, dot_iq2_xs_q8_k_avx2},
    [EZ_TYPE_IQ2_S] = {ez_dequant_iq2_s_ref, NULL, dot_iq2_s_q8_k_avx2},
    [EZ_TYPE_IQ3_XXS] = {ez_dequant_iq3_xxs_ref, NULL, dot_iq3_xxs_q8_k_avx2},
    [EZ_TYPE_IQ3_S] = {ez_dequant_iq3_s_ref, NULL, dot_iq3_s_q8_k_avx2},
    [EZ_TYPE_IQ1_S] = {ez_dequant_iq1_s_ref, NULL, dot_iq1_s_q8_k_avx2},
    [EZ_TYPE_IQ1_M] = {ez_dequant_iq1_m_ref, NULL, dot_iq1_m_q8_k_avx2},
    [EZ_TYPE_TQ1_0] = {ez_dequant_tq1_0_ref, NULL, dot_tq1_0_q8_k_avx2},
};

const ez_type_kernels *ez_kernels_avx2(uint32_t type) {
    if (type >= EZ_TYPE_COUNT || (!g_avx2[type].dequant && !g_avx2[type].quant)) return NULL;
    return &g_avx2[type];
}

#else

const ez_type_kernels *ez_kernels_avx2(uint32_t type) {
    (void)type;
    return NULL;
}

#endif
