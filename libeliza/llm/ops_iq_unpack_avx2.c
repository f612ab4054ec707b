/* AVX2 unpack of the grid i-quants, IQ4_XS and TQ1_0 into K tiles, byte for byte
 * the tiles of ez_llm_ktile_unpack (ops_qtile.c: codes v + zp, one integer
 * scale per 16 elements, offsets equal to the scales, c = 0).
 *
 * Per 32-element sub-block the grid rows (8 bytes for IQ2 and IQ1, 4 for
 * IQ3) are fetched by index with scalar loads into one vector, the sign
 * bits spread to a byte mask (bit j of sign byte k covers element 8k + j),
 * and code = zp + (negated where the mask is set) grid value goes out in
 * one 32-byte store; the scales of the sub-block's two halves in another.
 * IQ4_XS is a 16-byte table lookup of its nibbles. */
#include "ops.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>
#include <string.h>

#include "core/kernels/quant_kernels.h"
#include "core/kernels/quant_tables.h"
#include "core/quant.h"

static inline uint32_t u32_at(const void *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline long long row8(const void *row) {
    long long v;
    memcpy(&v, row, sizeof v);
    return v;
}

/* 0xff in byte 8k + j where bit j of byte k of s is set. */
static inline __m256i sign_mask(uint32_t s) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                            3, 3, 3, 3, 3, 3, 3);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)s), spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
}

/* Four IQ2 / IQ3_XXS sign bytes from the 7-bit indices at bits 0, 7, 14, 21 of a. */
static inline uint32_t ksigns4(uint32_t a) {
    return (uint32_t)ez_ksigns_iq2xs[a & 127] | (uint32_t)ez_ksigns_iq2xs[a >> 7 & 127] << 8 |
           (uint32_t)ez_ksigns_iq2xs[a >> 14 & 127] << 16 | (uint32_t)ez_ksigns_iq2xs[a >> 21 & 127] << 24;
}

/* Codes zp + g (zp - g under the mask) of sub-block ib. */
static inline void store_signed(ez_llm_ktile *t, int ib, __m256i g, __m256i neg, int zp) {
    const __m256i v = _mm256_sub_epi8(_mm256_xor_si256(g, neg), neg);
    _mm256_storeu_si256((__m256i *)(t->codes + 32 * ib), _mm256_add_epi8(v, _mm256_set1_epi8((char)zp)));
}

static inline void store_scales(ez_llm_ktile *t, int ib, int ls0, int ls1) {
    _mm256_storeu_si256((__m256i *)t->scale[ib], _mm256_setr_m128i(_mm_set1_epi16((short)ls0), _mm_set1_epi16((short)ls1)));
    t->offset[2 * ib] = (int16_t)ls0;
    t->offset[2 * ib + 1] = (int16_t)ls1;
}

static void iq2_xxs(const uint8_t *blk, ez_llm_ktile *t) {
    const ez_block_iq2_xxs *b = (const ez_block_iq2_xxs *)blk;
    for (int ib = 0; ib < 8; ib++) {
        const uint32_t g = u32_at(&b->qs[4 * ib]), s = u32_at(&b->qs[4 * ib + 2]);
        const __m256i q = _mm256_setr_epi64x(row8(ez_iq2xxs_grid[g & 255]), row8(ez_iq2xxs_grid[g >> 8 & 255]),
                                             row8(ez_iq2xxs_grid[g >> 16 & 255]), row8(ez_iq2xxs_grid[g >> 24]));
        const int ls = 2 * (int)(s >> 28) + 1;
        store_signed(t, ib, q, sign_mask(ksigns4(s)), 64);
        store_scales(t, ib, ls, ls);
    }
}

static void iq2_xs(const uint8_t *blk, ez_llm_ktile *t) {
    const ez_block_iq2_xs *b = (const ez_block_iq2_xs *)blk;
    for (int ib = 0; ib < 8; ib++) {
        uint16_t q[4];
        memcpy(q, &b->qs[4 * ib], sizeof q);
        store_signed(t, ib,
                     _mm256_setr_epi64x(row8(ez_iq2xs_grid[q[0] & 511]), row8(ez_iq2xs_grid[q[1] & 511]),
                                        row8(ez_iq2xs_grid[q[2] & 511]), row8(ez_iq2xs_grid[q[3] & 511])),
                     sign_mask((uint32_t)ez_ksigns_iq2xs[q[0] >> 9] | (uint32_t)ez_ksigns_iq2xs[q[1] >> 9] << 8 |
                               (uint32_t)ez_ksigns_iq2xs[q[2] >> 9] << 16 | (uint32_t)ez_ksigns_iq2xs[q[3] >> 9] << 24),
                     64);
        store_scales(t, ib, 2 * (b->scales[ib] & 15) + 1, 2 * (b->scales[ib] >> 4) + 1);
    }
}

static void iq2_s(const uint8_t *blk, ez_llm_ktile *t) {
    const ez_block_iq2_s *b = (const ez_block_iq2_s *)blk;
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *qs = b->qs + 4 * ib;
        const unsigned h = b->qh[ib];
        store_signed(t, ib,
                     _mm256_setr_epi64x(row8(ez_iq2s_grid[qs[0] | (h << 8 & 0x300)]),
                                        row8(ez_iq2s_grid[qs[1] | (h << 6 & 0x300)]),
                                        row8(ez_iq2s_grid[qs[2] | (h << 4 & 0x300)]),
                                        row8(ez_iq2s_grid[qs[3] | (h << 2 & 0x300)])),
                     sign_mask(u32_at(b->qs + 32 + 4 * ib)), 64);
        store_scales(t, ib, 2 * (b->scales[ib] & 15) + 1, 2 * (b->scales[ib] >> 4) + 1);
    }
}

static void iq3_xxs(const uint8_t *blk, ez_llm_ktile *t) {
    const ez_block_iq3_xxs *b = (const ez_block_iq3_xxs *)blk;
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = b->qs + 8 * ib;
        const uint32_t aux = u32_at(b->qs + 64 + 4 * ib);
        const int ls = 2 * (int)(aux >> 28) + 1;
        const __m256i g = _mm256_setr_epi32(
            (int)u32_at(ez_iq3xxs_grid[q[0]]), (int)u32_at(ez_iq3xxs_grid[q[1]]), (int)u32_at(ez_iq3xxs_grid[q[2]]),
            (int)u32_at(ez_iq3xxs_grid[q[3]]), (int)u32_at(ez_iq3xxs_grid[q[4]]), (int)u32_at(ez_iq3xxs_grid[q[5]]),
            (int)u32_at(ez_iq3xxs_grid[q[6]]), (int)u32_at(ez_iq3xxs_grid[q[7]]));
        store_signed(t, ib, g, sign_mask(ksigns4(aux)), 64);
        store_scales(t, ib, ls, ls);
    }
}

static void iq3_s(const uint8_t *blk, ez_llm_ktile *t) {
    const ez_block_iq3_s *b = (const ez_block_iq3_s *)blk;
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = b->qs + 8 * ib;
        const unsigned h = b->qh[ib];
        const int ls = 2 * ((b->scales[ib / 2] >> (4 * (ib % 2))) & 15) + 1;
        const __m256i g = _mm256_setr_epi32(
            (int)u32_at(ez_iq3s_grid[q[0] | (h << 8 & 0x100)]), (int)u32_at(ez_iq3s_grid[q[1] | (h << 7 & 0x100)]),
            (int)u32_at(ez_iq3s_grid[q[2] | (h << 6 & 0x100)]), (int)u32_at(ez_iq3s_grid[q[3] | (h << 5 & 0x100)]),
            (int)u32_at(ez_iq3s_grid[q[4] | (h << 4 & 0x100)]), (int)u32_at(ez_iq3s_grid[q[5] | (h << 3 & 0x100)]),
            (int)u32_at(ez_iq3s_grid[q[6] | (h << 2 & 0x100)]), (int)u32_at(ez_iq3s_grid[q[7] | (h << 1 & 0x100)]));
        store_signed(t, ib, g, sign_mask(u32_at(b->signs + 4 * ib)), 16);
        store_scales(t, ib, ls, ls);
    }
}

/* IQ1: v = 8 g + delta with g in {-1, 0, 1}, code v + 16; dz holds 16 + delta per byte. */
static inline void store_iq1(ez_llm_ktile *t, int ib, __m256i g, __m256i dz) {
    _mm256_storeu_si256((__m256i *)(t->codes + 32 * ib), _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), dz));
}

static void iq1_s(const uint8_t *blk, ez_llm_ktile *t) {
    const ez_block_iq1_s *b = (const ez_block_iq1_s *)blk;
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = b->qs + 4 * ib;
        const unsigned qh = ez_load_u16(&b->qh[ib]);
        const int ls = 2 * (int)((qh >> 12) & 7) + 1;
        store_iq1(t, ib,
                  _mm256_setr_epi64x(row8(ez_iq1s_grid[q[0] | (qh << 8 & 0x700)]),
                                     row8(ez_iq1s_grid[q[1] | (qh << 5 & 0x700)]),
                                     row8(ez_iq1s_grid[q[2] | (qh << 2 & 0x700)]),
                                     row8(ez_iq1s_grid[q[3] | (qh >> 1 & 0x700)])),
                  _mm256_set1_epi8(qh & 0x8000 ? 15 : 17));
        store_scales(t, ib, ls, ls);
    }
}

/* Eight bytes of 16 + delta for an IQ1_M grid row whose qh nibble is nib. */
static inline long long iq1_m_dz(unsigned nib) {
    return nib & 8 ? 0x0f0f0f0f0f0f0f0fLL : 0x1111111111111111LL;
}

static void iq1_m(const uint8_t *blk, ez_llm_ktile *t) {
    const ez_block_iq1_m *b = (const ez_block_iq1_m *)blk;
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *q = b->qs + 4 * ib;
        const unsigned h0 = b->qh[2 * ib], h1 = b->qh[2 * ib + 1];
        const unsigned sc = ez_load_u16(b->scales + 2 * (ib / 2)) >> (6 * (ib % 2));
        store_iq1(t, ib,
                  _mm256_setr_epi64x(row8(ez_iq1s_grid[q[0] | (h0 << 8 & 0x700)]),
                                     row8(ez_iq1s_grid[q[1] | (h0 << 4 & 0x700)]),
                                     row8(ez_iq1s_grid[q[2] | (h1 << 8 & 0x700)]),
                                     row8(ez_iq1s_grid[q[3] | (h1 << 4 & 0x700)])),
                  _mm256_setr_epi64x(iq1_m_dz(h0), iq1_m_dz(h0 >> 4), iq1_m_dz(h1), iq1_m_dz(h1 >> 4)));
        store_scales(t, ib, 2 * (int)(sc & 7) + 1, 2 * (int)(sc >> 3 & 7) + 1);
    }
}

/* IQ4_XS: codes kvalue + 128 of the low nibbles (elements 0-15), then the high ones. */
static void iq4_xs(const uint8_t *blk, ez_llm_ktile *t) {
    const ez_block_iq4_xs *b = (const ez_block_iq4_xs *)blk;
    const __m256i kv = _mm256_xor_si256(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ez_kvalues_iq4nl)),
                                        _mm256_set1_epi8((char)0x80));
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const unsigned sh = ez_load_u16(&b->scales_h);
    for (int ib = 0; ib < 8; ib++) {
        const __m128i q = _mm_loadu_si128((const __m128i *)(b->qs + 16 * ib));
        const __m256i n = _mm256_and_si256(_mm256_setr_m128i(q, _mm_srli_epi16(q, 4)), m4);
        const int ls = (((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((sh >> (2 * ib)) & 3) << 4)) - 32;
        _mm256_storeu_si256((__m256i *)(t->codes + 32 * ib), _mm256_shuffle_epi8(kv, n));
        store_scales(t, ib, ls, ls);
    }
}

/* TQ1_0 (layout at tq1_0_trit in quant_ref.c): codes are the trits, (q * 3)
 * >> 8 of each byte q times its power of 3, which is [q >= 86] + [q >= 171]. */
static inline __m256i times3(__m256i v) {
    return _mm256_add_epi8(_mm256_add_epi8(v, v), v);
}

static inline __m256i trits(__m256i q) {
    const __m256i ge86 = _mm256_cmpeq_epi8(_mm256_max_epu8(q, _mm256_set1_epi8(86)), q);
    const __m256i ge171 = _mm256_cmpeq_epi8(_mm256_max_epu8(q, _mm256_set1_epi8((char)171)), q);
    return _mm256_sub_epi8(_mm256_sub_epi8(_mm256_setzero_si256(), ge86), ge171);
}

/* Elements 0-159: qs[0..31] times 1, 3, 9, 27, 81; 160-239: qs[32..47]
 * times the same, 16 at a time; 240-255: the four qh bytes times 1, 3, 9, 27. */
static void tq1_0(const uint8_t *blk, ez_llm_ktile *t) {
    const ez_block_tq1_0 *b = (const ez_block_tq1_0 *)blk;
    const __m256i h1 = _mm256_set1_epi32((int)u32_at(b->qh)), h3 = times3(h1), h9 = times3(h3);
    /* 32-bit words: qh times 1, 3, 9, 27 */
    const __m256i h = _mm256_blend_epi32(_mm256_blend_epi32(h1, h3, 0x2), _mm256_blend_epi32(h9, times3(h9), 0x8), 0xc);
    __m256i q = _mm256_loadu_si256((const __m256i *)b->qs);
    __m256i p = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b->qs + 32)));
    for (int k = 0; k < 5; k++, q = times3(q)) _mm256_storeu_si256((__m256i *)(t->codes + 32 * k), trits(q));
    p = _mm256_blend_epi32(p, times3(p), 0xf0); /* times 1 | 3 */
    _mm256_storeu_si256((__m256i *)(t->codes + 160), trits(p));
    p = times3(times3(p)); /* 9 | 27 */
    _mm256_storeu_si256((__m256i *)(t->codes + 192), trits(p));
    p = times3(times3(p)); /* 81 in the low half */
    _mm256_storeu_si256((__m256i *)(t->codes + 224), trits(_mm256_permute2x128_si256(p, h, 0x20)));
    for (int ib = 0; ib < 8; ib++) store_scales(t, ib, 1, 1);
}

static void iq_super(uint32_t type, void (*codes)(const uint8_t *, ez_llm_ktile *), int zp, const uint8_t *blk,
                     ez_llm_ktile *t) {
    codes(blk, t);
    t->zp = zp;
    t->d = ez_iq_sub32_d(type, blk);
    t->c = 0.0f;
}

#define IQ_SUPER(NAME, TYPE, ZP)                                                                            \
    static void NAME##_super(const uint8_t *blk, ez_llm_ktile *t) { iq_super(TYPE, NAME, ZP, blk, t); }
IQ_SUPER(iq2_xxs, EZ_TYPE_IQ2_XXS, 64)
IQ_SUPER(iq2_xs, EZ_TYPE_IQ2_XS, 64)
IQ_SUPER(iq2_s, EZ_TYPE_IQ2_S, 64)
IQ_SUPER(iq3_xxs, EZ_TYPE_IQ3_XXS, 64)
IQ_SUPER(iq3_s, EZ_TYPE_IQ3_S, 16)
IQ_SUPER(iq1_s, EZ_TYPE_IQ1_S, 16)
IQ_SUPER(iq1_m, EZ_TYPE_IQ1_M, 16)
IQ_SUPER(iq4_xs, EZ_TYPE_IQ4_XS, 128)
IQ_SUPER(tq1_0, EZ_TYPE_TQ1_0, 1)
#undef IQ_SUPER

ez_llm_ksuper_fn ez_llm_ksuper_iq_avx2(uint32_t w_type) {
    switch (w_type) {
    case EZ_TYPE_IQ2_XXS: return iq2_xxs_super;
    case EZ_TYPE_IQ2_XS: return iq2_xs_super;
    case EZ_TYPE_IQ2_S: return iq2_s_super;
    case EZ_TYPE_IQ3_XXS: return iq3_xxs_super;
    case EZ_TYPE_IQ3_S: return iq3_s_super;
    case EZ_TYPE_IQ1_S: return iq1_s_super;
    case EZ_TYPE_IQ1_M: return iq1_m_super;
    case EZ_TYPE_IQ4_XS: return iq4_xs_super;
    case EZ_TYPE_TQ1_0: return tq1_0_super;
    default: return NULL;
    }
}

#else

ez_llm_ksuper_fn ez_llm_ksuper_iq_avx2(uint32_t w_type) {
    (void)w_type;
    return NULL;
}

#endif
