/* AVX2 tile kernels (see ops_qtile.c): four weight rows unpacked once per
 * block, then two activation rows at a time against them, eight running
 * sums in registers. Unsigned codes go straight into maddubs (code x signed
 * activation, no saturation: 31 * 128 * 2 < 2^15) and the zero point comes
 * off as maddubs(zp, x), computed once per activation block; signed Q8_0
 * codes use the usual |w| x sign(x, w) form. */
#include "ops.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>
#include <string.h>

#include "core/cpu.h"
#include "core/kernels/quant_tables.h"
#include "core/quant.h"

/* AVX-VNNI (vpdpbusd on 256-bit vectors) through a function target, so the
 * file keeps the AVX2 baseline flags; used only when CPUID says so. GCC 11+
 * and clang 12+ have the intrinsics; MSVC builds keep the AVX2 kernels. */
#if !defined(_MSC_VER) && ((defined(__clang__) && __clang_major__ >= 12) || \
                           (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#define EZ_LLM_HAVE_AVXVNNI 1
#else
#define EZ_LLM_HAVE_AVXVNNI 0
#endif

static inline float hsum8(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

static inline float f16(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }

/* 16 bytes of nibbles -> 32 bytes: low nibbles first, then high nibbles. */
static inline __m256i nibbles(const uint8_t *qs) {
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    const __m128i m = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}

/* A 16-byte value table in both lanes, for _mm256_shuffle_epi8 lookups. */
static inline __m256i table16(const int8_t t[16]) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t));
}

/* Bit j of qh -> 0x10 in byte j, else 0. */
static inline __m256i fifth_bits(const uint8_t qh_bytes[4]) {
    uint32_t qh;
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                            3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v;
    memcpy(&qh, qh_bytes, 4);
    v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), spread);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* Q4_K / Q5_K codes: 32 bytes of nibbles per pair of 32-element
 * sub-blocks, low nibbles first; Q5_K's fifth bit k of qh[l] for
 * sub-block k. */
static void ksuper_codes_k45(uint32_t type, const uint8_t *blk, uint8_t *codes) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), b5 = _mm256_set1_epi8(0x10);
    const uint8_t *qs = type == EZ_TYPE_Q4_K ? ((const ez_block_q4_k *)blk)->qs : ((const ez_block_q5_k *)blk)->qs;
    const __m256i qh = type == EZ_TYPE_Q5_K ? _mm256_loadu_si256((const __m256i *)((const ez_block_q5_k *)blk)->qh)
                                            : _mm256_setzero_si256();
    for (int p = 0; p < 4; p++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * p));
        __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        if (type == EZ_TYPE_Q5_K) {
            const __m256i bl = _mm256_set1_epi8((char)(1 << (2 * p))), bh = _mm256_set1_epi8((char)(2 << (2 * p)));
            lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bl), bl), b5));
            hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bh), bh), b5));
        }
        _mm256_storeu_si256((__m256i *)(codes + 64 * p), lo);
        _mm256_storeu_si256((__m256i *)(codes + 64 * p + 32), hi);
    }
}

/* Q6_K codes: per half, ql's nibbles below two bits of qh. */
static void ksuper_codes_q6k(const ez_block_q6_k *b, uint8_t *codes) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        uint8_t *c = codes + 128 * h;
        _mm256_storeu_si256((__m256i *)c,
                            _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2)));
        _mm256_storeu_si256((__m256i *)(c + 32),
                            _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2)));
        _mm256_storeu_si256((__m256i *)(c + 64),
                            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m2)));
        _mm256_storeu_si256((__m256i *)(c + 96), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                                                 _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2)));
    }
}

/* Q2_K / TQ2_0 codes (bits 2s..2s+1 of qs[32h + l] for element 128h + 32s +
 * l) and Q3_K's (the same plus 4 where bit j of hmask[l] is set, element
 * 32j + l). */
static void ksuper_codes_2bit(const uint8_t *qs, const uint8_t *hmask, uint8_t *codes) {
    const __m256i m2 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    const __m256i hm = hmask ? _mm256_loadu_si256((const __m256i *)hmask) : _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * h));
        for (int s = 0; s < 4; s++) {
            __m256i c = _mm256_and_si256(_mm256_srli_epi16(q, 2 * s), m2);
            if (hmask) {
                const __m256i bit = _mm256_set1_epi8((char)(1 << (4 * h + s)));
                c = _mm256_or_si256(c, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit), four));
            }
            _mm256_storeu_si256((__m256i *)(codes + 128 * h + 32 * s), c);
        }
    }
}

static void ksuper_q2_k(const uint8_t *blk, ez_llm_ktile *t) {
    ksuper_codes_2bit(((const ez_block_q2_k *)blk)->qs, NULL, t->codes);
    ez_llm_ksuper_scales(EZ_TYPE_Q2_K, blk, t);
}

static void ksuper_q3_k(const uint8_t *blk, ez_llm_ktile *t) {
    ksuper_codes_2bit(((const ez_block_q3_k *)blk)->qs, ((const ez_block_q3_k *)blk)->hmask, t->codes);
    ez_llm_ksuper_scales(EZ_TYPE_Q3_K, blk, t);
}

static void ksuper_tq2_0(const uint8_t *blk, ez_llm_ktile *t) {
    ksuper_codes_2bit(((const ez_block_tq2_0 *)blk)->qs, NULL, t->codes);
    ez_llm_ksuper_scales(EZ_TYPE_TQ2_0, blk, t);
}

static void ksuper_q4_k(const uint8_t *blk, ez_llm_ktile *t) {
    ksuper_codes_k45(EZ_TYPE_Q4_K, blk, t->codes);
    ez_llm_ksuper_scales(EZ_TYPE_Q4_K, blk, t);
}

static void ksuper_q5_k(const uint8_t *blk, ez_llm_ktile *t) {
    ksuper_codes_k45(EZ_TYPE_Q5_K, blk, t->codes);
    ez_llm_ksuper_scales(EZ_TYPE_Q5_K, blk, t);
}

static void ksuper_q6_k(const uint8_t *blk, ez_llm_ktile *t) {
    ksuper_codes_q6k((const ez_block_q6_k *)blk, t->codes);
    ez_llm_ksuper_scales(EZ_TYPE_Q6_K, blk, t);
}

static ez_llm_ksuper_fn ksuper_avx2(uint32_t type) {
    switch (type) {
    case EZ_TYPE_Q2_K: return ksuper_q2_k;
    case EZ_TYPE_Q3_K: return ksuper_q3_k;
    case EZ_TYPE_TQ2_0: return ksuper_tq2_0;
    case EZ_TYPE_Q4_K: return ksuper_q4_k;
    case EZ_TYPE_Q5_K: return ksuper_q5_k;
    case EZ_TYPE_Q6_K: return ksuper_q6_k;
    default: return ez_llm_ksuper_iq_avx2(type);
    }
}

void ez_llm_ktile_unpack_avx2(const ez_llm_matrix *w, int64_t r0, int n_rows, ez_llm_ktile *tiles) {
    const int64_t nsb = w->n_cols / EZ_QK_K;
    const size_t bsize = w->row_bytes / (size_t)nsb;
    const ez_llm_ksuper_fn unpack = ksuper_avx2(w->type);
    if (!unpack) {
        ez_llm_ktile_unpack(w, r0, n_rows, tiles);
        return;
    }
    for (int64_t sb = 0; sb < nsb; sb++)
        for (int r = 0; r < EZ_LLM_TILE_ROWS; r++) {
            ez_llm_ktile *t = &tiles[sb * EZ_LLM_TILE_ROWS + r];
            if (r < n_rows) unpack(w->data + (size_t)(r0 + r) * w->row_bytes + (size_t)sb * bsize, t);
            else memset(t, 0, sizeof *t);
        }
}

void ez_llm_tile_unpack_avx2(const ez_llm_matrix *w, int64_t r0, int n_rows, uint8_t *codes, float *scales,
                             float *mins) {
    const int64_t nb = w->n_cols / EZ_QK;
    const int has_min = ez_llm_tile_traits_of(w->type)->has_min;
    for (int r = 0; r < EZ_LLM_TILE_ROWS; r++) {
        const uint8_t *row = w->data + (size_t)(r0 + r) * w->row_bytes;
        for (int64_t b = 0; b < nb; b++) {
            __m256i *c = (__m256i *)(codes + ((size_t)b * EZ_LLM_TILE_ROWS + (size_t)r) * EZ_QK);
            float *s = scales + (size_t)b * EZ_LLM_TILE_ROWS + (size_t)r;
            if (r >= n_rows) {
                _mm256_store_si256(c, _mm256_setzero_si256());
                *s = 0.0f;
                if (has_min) mins[(size_t)b * EZ_LLM_TILE_ROWS + (size_t)r] = 0.0f;
            } else if (w->type == EZ_TYPE_Q4_1) {
                const ez_block_q4_1 *blk = (const ez_block_q4_1 *)row + b;
                _mm256_store_si256(c, nibbles(blk->qs));
                *s = f16(blk->d);
                mins[(size_t)b * EZ_LLM_TILE_ROWS + (size_t)r] = f16(blk->m);
            } else if (w->type == EZ_TYPE_Q5_1) {
                const ez_block_q5_1 *blk = (const ez_block_q5_1 *)row + b;
                _mm256_store_si256(c, _mm256_or_si256(nibbles(blk->qs), fifth_bits(blk->qh)));
                *s = f16(blk->d);
                mins[(size_t)b * EZ_LLM_TILE_ROWS + (size_t)r] = f16(blk->m);
            } else if (w->type == EZ_TYPE_Q8_0) {
                const ez_block_q8_0 *blk = (const ez_block_q8_0 *)row + b;
                _mm256_store_si256(c, _mm256_loadu_si256((const __m256i *)blk->qs));
                *s = f16(blk->d);
            } else if (w->type == EZ_TYPE_Q4_0) {
                const ez_block_q4_0 *blk = (const ez_block_q4_0 *)row + b;
                _mm256_store_si256(c, nibbles(blk->qs));
                *s = f16(blk->d);
            } else if (w->type == EZ_TYPE_IQ4_NL) {
                const ez_block_iq4_nl *blk = (const ez_block_iq4_nl *)row + b;
                _mm256_store_si256(c, _mm256_shuffle_epi8(table16(ez_kvalues_iq4nl), nibbles(blk->qs)));
                *s = f16(blk->d);
            } else if (w->type == EZ_TYPE_MXFP4) {
                const ez_block_mxfp4 *blk = (const ez_block_mxfp4 *)row + b;
                _mm256_store_si256(c, _mm256_shuffle_epi8(table16(ez_kvalues_mxfp4), nibbles(blk->qs)));
                *s = ez_e8m0_to_float_half(blk->e);
            } else {
                const ez_block_q5_0 *blk = (const ez_block_q5_0 *)row + b;
                _mm256_store_si256(c, _mm256_or_si256(nibbles(blk->qs), fifth_bits(blk->qh)));
                *s = f16(blk->d);
            }
        }
    }
}

/* ---- Q4_0 / Q5_0 / Q8_0: two weight rows against four activation rows -------------------
 *
 * Per block, each of the 8 (row, activation) pairs costs one integer dot of
 * 32 bytes, one conversion and one FMA with the product of the two block
 * scales; eight float accumulators stay in registers. The integer dot is
 * maddubs + madd on AVX2; with AVX-VNNI (vpdpbusd) it is one instruction,
 * its accumulator input carrying the zero-point correction. */

#define PAIR_ACTS 4

typedef struct {
    const ez_block_q8_0 *x[PAIR_ACTS];   /* activation rows (repeated past M) */
} act_rows;

static inline __m256 scales_of(const act_rows *a, int64_t b) {
    /* the four activation block scales of block b as floats, lanes 0-3 */
    return _mm256_castps128_ps256(_mm_cvtph_ps(_mm_setr_epi16((short)a->x[0][b].d, (short)a->x[1][b].d,
                                                              (short)a->x[2][b].d, (short)a->x[3][b].d, 0, 0, 0, 0)));
}

#define PAIR_KERNEL(NAME, ATTR, ZTERM, IDOT_U, IDOT_S)                                                      \
    ATTR static void NAME(int64_t nb, const uint8_t *codes, const float *scales, int r, const act_rows *a,  \
                          int zp, int is_signed, float out[PAIR_ACTS][2]) {                                \
        __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00;                                 \
        __m256 c20 = c00, c21 = c00, c30 = c00, c31 = c00;                                                 \
        const __m256i vzp = _mm256_set1_epi8((char)zp);                                                    \
        const __m256i ones = _mm256_set1_epi16(1);                                                         \
        (void)ones;                                                                                        \
        for (int64_t b = 0; b < nb; b++) {                                                                 \
            const uint8_t *cb = codes + ((size_t)b * EZ_LLM_TILE_ROWS + (size_t)r) * EZ_QK;                \
            const __m256i q0 = _mm256_load_si256((const __m256i *)cb);                                     \
            const __m256i q1 = _mm256_load_si256((const __m256i *)(cb + EZ_QK));                           \
            const float s0 = scales[b * EZ_LLM_TILE_ROWS + r], s1 = scales[b * EZ_LLM_TILE_ROWS + r + 1];  \
            const __m256 dx = scales_of(a, b);                                                             \
            const __m256 d0 = _mm256_mul_ps(dx, _mm256_set1_ps(s0)), d1 = _mm256_mul_ps(dx, _mm256_set1_ps(s1)); \
            __m256i p0, p1;                                                                                \
            if (is_signed) {                                                                               \
                const __m256i u0 = _mm256_sign_epi8(q0, q0), u1 = _mm256_sign_epi8(q1, q1);                \
                PAIR_STEP_S(0, c00, c01, IDOT_S)                                                                   \
                PAIR_STEP_S(1, c10, c11, IDOT_S)                                                                   \
                PAIR_STEP_S(2, c20, c21, IDOT_S)                                                                   \
                PAIR_STEP_S(3, c30, c31, IDOT_S)                                                                   \
            } else {                                                                                       \
                PAIR_STEP_U(0, c00, c01, ZTERM, IDOT_U)                                                                   \
                PAIR_STEP_U(1, c10, c11, ZTERM, IDOT_U)                                                                   \
                PAIR_STEP_U(2, c20, c21, ZTERM, IDOT_U)                                                                   \
                PAIR_STEP_U(3, c30, c31, ZTERM, IDOT_U)                                                                   \
            }                                                                                              \
        }                                                                                                  \
        out[0][0] = hsum8(c00), out[0][1] = hsum8(c01), out[1][0] = hsum8(c10), out[1][1] = hsum8(c11);    \
        out[2][0] = hsum8(c20), out[2][1] = hsum8(c21), out[3][0] = hsum8(c30), out[3][1] = hsum8(c31);    \
    }

/* Activation j of the group against rows 0 and 1 of the pair. */
#define PAIR_STEP_U(j, acc0, acc1, ZTERM, IDOT_U)                                                                       \
    {                                                                                                      \
        const __m256i v = _mm256_loadu_si256((const __m256i *)a->x[j][b].qs);                              \
        const __m256i z = ZTERM(vzp, v);                                                                   \
        p0 = IDOT_U(z, q0, v);                                                                             \
        p1 = IDOT_U(z, q1, v);                                                                             \
        acc0 = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(d0, _mm256_set1_epi32(j)), _mm256_cvtepi32_ps(p0), acc0); \
        acc1 = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(d1, _mm256_set1_epi32(j)), _mm256_cvtepi32_ps(p1), acc1); \
    }
#define PAIR_STEP_S(j, acc0, acc1, IDOT_S)                                                                       \
    {                                                                                                      \
        const __m256i v = _mm256_loadu_si256((const __m256i *)a->x[j][b].qs);                              \
        p0 = IDOT_S(u0, _mm256_sign_epi8(v, q0));                                                          \
        p1 = IDOT_S(u1, _mm256_sign_epi8(v, q1));                                                          \
        acc0 = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(d0, _mm256_set1_epi32(j)), _mm256_cvtepi32_ps(p0), acc0); \
        acc1 = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(d1, _mm256_set1_epi32(j)), _mm256_cvtepi32_ps(p1), acc1); \
    }

/* AVX2: the zero-point term stays 16-bit (maddubs(zp, x)); sums of pairs,
 * then of quads. No saturation: 31 * 128 * 2 < 2^15. */
#define ZTERM_AVX2(vzp, v) _mm256_maddubs_epi16(vzp, v)
#define IDOT_U_AVX2(z, q, v) _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(q, v), z), ones)
#define IDOT_S_AVX2(u, sv) _mm256_madd_epi16(_mm256_maddubs_epi16(u, sv), ones)
PAIR_KERNEL(pair_avx2, , ZTERM_AVX2, IDOT_U_AVX2, IDOT_S_AVX2)

#if EZ_LLM_HAVE_AVXVNNI
/* AVX-VNNI: vpdpbusd sums the four byte products into each int32 lane;
 * starting from -zp * (sum of the quad's activations) takes the zero point
 * off in the same instruction. */
#define ZTERM_VNNI(vzp, v) _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), vzp, v))
#define IDOT_U_VNNI(z, q, v) _mm256_dpbusd_avx_epi32(z, q, v)
#define IDOT_S_VNNI(u, sv) _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, sv)
PAIR_KERNEL(pair_vnni, __attribute__((target("avx2,fma,f16c,avxvnni"))), ZTERM_VNNI, IDOT_U_VNNI, IDOT_S_VNNI)
#endif

typedef void (*pair_fn)(int64_t nb, const uint8_t *codes, const float *scales, int r, const act_rows *a, int zp,
                        int is_signed, float out[PAIR_ACTS][2]);

static void tile_with(pair_fn pair, const ez_llm_matrix *w, int64_t r0, int64_t r1, const uint8_t *x,
                      size_t x_row_bytes, int64_t M, float *y, int64_t ldy, void *scratch) {
    const int64_t nb = w->n_cols / EZ_QK;
    const int zp = ez_llm_tile_traits_of(w->type)->zero_point;
    const int is_signed = ez_llm_tile_traits_of(w->type)->is_signed;
    uint8_t *codes = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *scales = (float *)(codes + (size_t)nb * EZ_LLM_TILE_ROWS * EZ_QK);
    float out[PAIR_ACTS][2];
    act_rows a;
    for (int64_t g = r0; g < r1; g += EZ_LLM_TILE_ROWS) {
        const int n_rows = (int)EZ_MIN((int64_t)EZ_LLM_TILE_ROWS, r1 - g);
        ez_llm_tile_unpack_avx2(w, g, n_rows, codes, scales, NULL);
        for (int64_t m = 0; m < M; m += PAIR_ACTS) {
            const int n_acts = (int)EZ_MIN((int64_t)PAIR_ACTS, M - m);
            for (int j = 0; j < PAIR_ACTS; j++)
                a.x[j] = (const ez_block_q8_0 *)(x + (size_t)(m + EZ_MIN(j, n_acts - 1)) * x_row_bytes);
            for (int r = 0; r < n_rows; r += 2) {
                pair(nb, codes, scales, r, &a, zp, is_signed, out);
                for (int j = 0; j < n_acts; j++) {
                    y[(m + j) * ldy + g + r] = out[j][0];
                    if (r + 1 < n_rows) y[(m + j) * ldy + g + r + 1] = out[j][1];
                }
            }
        }
    }
}

static void tile_avx2(const ez_llm_matrix *w, int64_t r0, int64_t r1, const uint8_t *x, size_t x_row_bytes,
                      int64_t M, float *y, int64_t ldy, void *scratch) {
    tile_with(pair_avx2, w, r0, r1, x, x_row_bytes, M, y, ldy, scratch);
}

#if EZ_LLM_HAVE_AVXVNNI
static void tile_vnni(const ez_llm_matrix *w, int64_t r0, int64_t r1, const uint8_t *x, size_t x_row_bytes,
                      int64_t M, float *y, int64_t ldy, void *scratch) {
    tile_with(pair_vnni, w, r0, r1, x, x_row_bytes, M, y, ldy, scratch);
}
#endif

/* ---- x8 kernels (Q4_0 / Q5_0 / Q4_1 / Q5_1): four weight rows against eight packed activation rows --
 *
 * Lanes are activation rows. Per block and weight row: eight 4-byte groups,
 * each the row's 4 codes broadcast (a load) against the 8 rows' 4 bytes (one
 * 32-byte load shared by the 4 weight rows); then one conversion and one FMA
 * for 8 results, and for the types with a min one more FMA (m * s). Two
 * integer chains per weight row hide the VNNI latency. */

static inline __m256i bcast4(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* AVX2: four maddubs summed in 16 bits (|sum| <= 31 * 128 * 2 * 4 < 2^15 for
 * codes up to 31: Q5_0, Q5_1), then pairs summed to 32 bits. */
#define X8_ISUM_AVX2(isum, c, xb, nz)                                                                    \
    {                                                                                                    \
        const __m256i ones16 = _mm256_set1_epi16(1);                                                     \
        __m256i lo = _mm256_maddubs_epi16(bcast4(c), _mm256_load_si256((const __m256i *)xb->q[0]));      \
        __m256i hi = _mm256_maddubs_epi16(bcast4(c + 16), _mm256_load_si256((const __m256i *)xb->q[4])); \
        lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(bcast4(c + 4), _mm256_load_si256((const __m256i *)xb->q[1])));  \
        hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(bcast4(c + 20), _mm256_load_si256((const __m256i *)xb->q[5]))); \
        lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(bcast4(c + 8), _mm256_load_si256((const __m256i *)xb->q[2])));  \
        hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(bcast4(c + 24), _mm256_load_si256((const __m256i *)xb->q[6]))); \
        lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(bcast4(c + 12), _mm256_load_si256((const __m256i *)xb->q[3]))); \
        hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(bcast4(c + 28), _mm256_load_si256((const __m256i *)xb->q[7]))); \
        isum = _mm256_add_epi32(nz, _mm256_add_epi32(_mm256_madd_epi16(lo, ones16), _mm256_madd_epi16(hi, ones16)));  \
    }

/* AVX-VNNI: eight vpdpbusd in two chains, the first starting from -zp * sum. */
#define X8_ISUM_VNNI(isum, c, xb, nz)                                                                                 \
    {                                                                                                                 \
        __m256i e = _mm256_dpbusd_avx_epi32(nz, bcast4(c), _mm256_load_si256((const __m256i *)xb->q[0]));             \
        __m256i o = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), bcast4(c + 4), _mm256_load_si256((const __m256i *)xb->q[1])); \
        e = _mm256_dpbusd_avx_epi32(e, bcast4(c + 8), _mm256_load_si256((const __m256i *)xb->q[2]));                  \
        o = _mm256_dpbusd_avx_epi32(o, bcast4(c + 12), _mm256_load_si256((const __m256i *)xb->q[3]));                 \
        e = _mm256_dpbusd_avx_epi32(e, bcast4(c + 16), _mm256_load_si256((const __m256i *)xb->q[4]));                 \
        o = _mm256_dpbusd_avx_epi32(o, bcast4(c + 20), _mm256_load_si256((const __m256i *)xb->q[5]));                 \
        e = _mm256_dpbusd_avx_epi32(e, bcast4(c + 24), _mm256_load_si256((const __m256i *)xb->q[6]));                 \
        o = _mm256_dpbusd_avx_epi32(o, bcast4(c + 28), _mm256_load_si256((const __m256i *)xb->q[7]));                 \
        isum = _mm256_add_epi32(e, o);                                                                                \
    }

#define X8_KERNEL(NAME, ATTR, ISUM)                                                                          \
    ATTR static void NAME(int64_t nb, const uint8_t *codes, const float *scales, const float *mins,         \
                          const ez_llm_x8_block *xg, int zp, float out[EZ_LLM_TILE_ROWS][8]) {              \
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                          \
        const __m256i vzp = _mm256_set1_epi32(-zp);                                                          \
        for (int64_t b = 0; b < nb; b++) {                                                                   \
            const ez_llm_x8_block *xb = xg + b;                                                              \
            const uint8_t *cb = codes + (size_t)b * EZ_LLM_TILE_ROWS * EZ_QK;                                \
            const float *s = scales + (size_t)b * EZ_LLM_TILE_ROWS;                                          \
            const __m256 dx = _mm256_loadu_ps(xb->d);                                                        \
            const __m256i nz = mins ? _mm256_setzero_si256()                                                 \
                                    : _mm256_mullo_epi32(_mm256_loadu_si256((const __m256i *)xb->sum), vzp); \
            __m256i i0, i1, i2, i3;                                                                          \
            ISUM(i0, cb, xb, nz)                                                                             \
            ISUM(i1, cb + EZ_QK, xb, nz)                                                                     \
            ISUM(i2, cb + 2 * EZ_QK, xb, nz)                                                                 \
            ISUM(i3, cb + 3 * EZ_QK, xb, nz)                                                                 \
            a0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_mul_ps(dx, _mm256_set1_ps(s[0])), a0);       \
            a1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), _mm256_mul_ps(dx, _mm256_set1_ps(s[1])), a1);       \
            a2 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i2), _mm256_mul_ps(dx, _mm256_set1_ps(s[2])), a2);       \
            a3 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i3), _mm256_mul_ps(dx, _mm256_set1_ps(s[3])), a3);       \
            if (mins) {                                                                                      \
                const float *mn = mins + (size_t)b * EZ_LLM_TILE_ROWS;                                       \
                const __m256 sx = _mm256_loadu_ps(xb->s);                                                    \
                a0 = _mm256_fmadd_ps(sx, _mm256_set1_ps(mn[0]), a0);                                         \
                a1 = _mm256_fmadd_ps(sx, _mm256_set1_ps(mn[1]), a1);                                         \
                a2 = _mm256_fmadd_ps(sx, _mm256_set1_ps(mn[2]), a2);                                         \
                a3 = _mm256_fmadd_ps(sx, _mm256_set1_ps(mn[3]), a3);                                         \
            }                                                                                                \
        }                                                                                                    \
        _mm256_storeu_ps(out[0], a0);                                                                        \
        _mm256_storeu_ps(out[1], a1);                                                                        \
        _mm256_storeu_ps(out[2], a2);                                                                        \
        _mm256_storeu_ps(out[3], a3);                                                                        \
    }

X8_KERNEL(x8_rows_avx2, , X8_ISUM_AVX2)
#if EZ_LLM_HAVE_AVXVNNI
X8_KERNEL(x8_rows_vnni, __attribute__((target("avx2,fma,f16c,avxvnni"))), X8_ISUM_VNNI)
#endif

/* mins: NULL for the types without a min (xg holds sums), else their mins (xg holds s). */
typedef void (*x8_rows_fn)(int64_t nb, const uint8_t *codes, const float *scales, const float *mins,
                           const ez_llm_x8_block *xg, int zp, float out[EZ_LLM_TILE_ROWS][8]);

/* Signed codes only with the VNNI rows (EZ_LLM_SIGNED_ZP). */
static void x8_with(x8_rows_fn rows, const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *xv, int64_t M,
                    float *y, int64_t ldy, void *scratch) {
    const ez_llm_x8_block *x = (const ez_llm_x8_block *)xv;
    const int64_t nb = w->n_cols / EZ_QK;
    const int is_signed = ez_llm_tile_traits_of(w->type)->is_signed;
    const int zp = is_signed ? EZ_LLM_SIGNED_ZP : ez_llm_tile_traits_of(w->type)->zero_point;
    uint8_t *codes = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *scales = (float *)(codes + (size_t)nb * EZ_LLM_TILE_ROWS * EZ_QK);
    float *mins = ez_llm_tile_traits_of(w->type)->has_min ? scales + (size_t)nb * EZ_LLM_TILE_ROWS : NULL;
    float out[EZ_LLM_TILE_ROWS][8];
    for (int64_t g0 = r0; g0 < r1; g0 += EZ_LLM_TILE_ROWS) {
        const int n_rows = (int)EZ_MIN((int64_t)EZ_LLM_TILE_ROWS, r1 - g0);
        ez_llm_tile_unpack_avx2(w, g0, n_rows, codes, scales, mins);
        if (is_signed) ez_llm_tile_codes_unsigned(codes, (size_t)nb * EZ_LLM_TILE_ROWS * EZ_QK);
        for (int64_t m = 0; m < M; m += 8) {
            const int n_acts = (int)EZ_MIN((int64_t)8, M - m);
            rows(nb, codes, scales, mins, x + (m / 8) * nb, zp, out);
            for (int a = 0; a < n_acts; a++)
                for (int r = 0; r < n_rows; r++) y[(m + a) * ldy + g0 + r] = out[r][a];
        }
    }
}

static void x8_avx2(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, int64_t M, float *y, int64_t ldy,
                    void *scratch) {
    x8_with(x8_rows_avx2, w, r0, r1, x, M, y, ldy, scratch);
}

#if EZ_LLM_HAVE_AVXVNNI
static void x8_vnni(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, int64_t M, float *y, int64_t ldy,
                    void *scratch) {
    x8_with(x8_rows_vnni, w, r0, r1, x, M, y, ldy, scratch);
}
#endif

/* ---- x8 kernels for K quants: four weight rows against eight packed rows ----------------
 *
 * Per 16-element group (one integer scale per weight row): four broadcast
 * maddubs against the shared loads, summed in 16 bits (two at a time for
 * Q6_K's 6-bit codes: 63 * 128 * 2 * 2 < 2^15; each alone for codes to
 * 127), then madds with the group's scale. Codes above 127 (IQ4_XS, `wide`
 * 3) would leave int16 in one maddubs: no AVX2 kernel, the per-pair dots. The offsets (mins, or Q6_K's zero point) use the packed
 * bsums once per super-block. */

#define K16_SUM4(p, c, xb, j)                                                                                \
    p = _mm256_add_epi16(                                                                                      \
        _mm256_add_epi16(_mm256_maddubs_epi16(bcast4(c), _mm256_load_si256((const __m256i *)xb->q[4 * (j)])),    \
                         _mm256_maddubs_epi16(bcast4(c + 4), _mm256_load_si256((const __m256i *)xb->q[4 * (j) + 1]))), \
        _mm256_add_epi16(_mm256_maddubs_epi16(bcast4(c + 8), _mm256_load_si256((const __m256i *)xb->q[4 * (j) + 2])), \
                         _mm256_maddubs_epi16(bcast4(c + 12), _mm256_load_si256((const __m256i *)xb->q[4 * (j) + 3]))))

static void x8k_rows(int64_t nsb, const ez_llm_ktile *tiles, const ez_llm_x8k_block *xg, int wide,
                     float out[EZ_LLM_TILE_ROWS][8]) {
    __m256 acc[EZ_LLM_TILE_ROWS];
    for (int r = 0; r < EZ_LLM_TILE_ROWS; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const ez_llm_x8k_block *xb = xg + sb;
        const ez_llm_ktile *t = tiles + sb * EZ_LLM_TILE_ROWS;
        const __m256 dx = _mm256_load_ps(xb->d);
        __m256i is0 = _mm256_setzero_si256(), is1 = is0, is2 = is0, is3 = is0;
        for (int j = 0; j < 16; j++) {
#define K16_ROW(isum, row)                                                                                          \
    {                                                                                                               \
        const uint8_t *c = t[row].codes + 16 * j;                                                                   \
        const __m256i sc = _mm256_set1_epi16(t[row].scale[j / 2][(j % 2) * 8]);                                     \
        if (wide == 2) {                                                                                            \
            __m256i s4 = _mm256_madd_epi16(                                                                         \
                _mm256_maddubs_epi16(bcast4(c), _mm256_load_si256((const __m256i *)xb->q[4 * j])), sc);              \
            for (int k4 = 1; k4 < 4; k4++)                                                                          \
                s4 = _mm256_add_epi32(s4, _mm256_madd_epi16(_mm256_maddubs_epi16(bcast4(c + 4 * k4),                \
                                                                                 _mm256_load_si256(                  \
                                                                                     (const __m256i *)xb->q[4 * j + k4])), \
                                                            sc));                                                   \
            isum = _mm256_add_epi32(isum, s4);                                                                      \
        } else if (wide) {                                                                                          \
            const __m256i a = _mm256_add_epi16(                                                                     \
                _mm256_maddubs_epi16(bcast4(c), _mm256_load_si256((const __m256i *)xb->q[4 * j])),                    \
                _mm256_maddubs_epi16(bcast4(c + 4), _mm256_load_si256((const __m256i *)xb->q[4 * j + 1])));           \
            const __m256i b = _mm256_add_epi16(                                                                     \
                _mm256_maddubs_epi16(bcast4(c + 8), _mm256_load_si256((const __m256i *)xb->q[4 * j + 2])),            \
                _mm256_maddubs_epi16(bcast4(c + 12), _mm256_load_si256((const __m256i *)xb->q[4 * j + 3])));          \
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(_mm256_madd_epi16(a, sc), _mm256_madd_epi16(b, sc)));     \
        } else {                                                                                                    \
            __m256i p;                                                                                              \
            K16_SUM4(p, c, xb, j);                                                                                  \
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, sc));                                                 \
        }                                                                                                           \
    }
            K16_ROW(is0, 0)
            K16_ROW(is1, 1)
            K16_ROW(is2, 2)
            K16_ROW(is3, 3)
#undef K16_ROW
        }
        {
            __m256i *is[EZ_LLM_TILE_ROWS] = {&is0, &is1, &is2, &is3};
            for (int r = 0; r < EZ_LLM_TILE_ROWS; r++) {
                __m256i o = _mm256_setzero_si256();
                for (int i = 0; i < 8; i++) {
                    int32_t pair;
                    memcpy(&pair, &t[r].offset[2 * i], 4);
                    o = _mm256_add_epi32(o, _mm256_madd_epi16(_mm256_set1_epi32(pair),
                                                              _mm256_load_si256((const __m256i *)xb->bsums[i])));
                }
                *is[r] = _mm256_sub_epi32(*is[r], _mm256_mullo_epi32(o, _mm256_set1_epi32(t[r].zp)));
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(*is[r]), _mm256_mul_ps(dx, _mm256_set1_ps(t[r].d)), acc[r]);
                acc[r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(o), _mm256_mul_ps(dx, _mm256_set1_ps(t[r].c)), acc[r]);
            }
        }
    }
    for (int r = 0; r < EZ_LLM_TILE_ROWS; r++) _mm256_storeu_ps(out[r], acc[r]);
}

static void x8k_avx2(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *xv, int64_t M, float *y, int64_t ldy,
                     void *scratch) {
    const ez_llm_x8k_block *x = (const ez_llm_x8k_block *)xv;
    const int64_t nsb = w->n_cols / EZ_QK_K;
    const int wide = ez_llm_tile_traits_of(w->type)->wide;
    ez_llm_ktile *tiles = (ez_llm_ktile *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float out[EZ_LLM_TILE_ROWS][8];
    for (int64_t g0 = r0; g0 < r1; g0 += EZ_LLM_TILE_ROWS) {
        const int n_rows = (int)EZ_MIN((int64_t)EZ_LLM_TILE_ROWS, r1 - g0);
        ez_llm_ktile_unpack_avx2(w, g0, n_rows, tiles);
        for (int64_t m = 0; m < M; m += 8) {
            const int n_acts = (int)EZ_MIN((int64_t)8, M - m);
            x8k_rows(nsb, tiles, x + (m / 8) * nsb, wide, out);
            for (int a = 0; a < n_acts; a++)
                for (int r = 0; r < n_rows; r++) y[(m + a) * ldy + g0 + r] = out[r][a];
        }
    }
}

ez_llm_x8_fn ez_llm_x8_avx2(uint32_t w_type) {
    const ez_llm_tile_traits *tt = ez_llm_tile_traits_of(w_type);
    if (!tt) return NULL;
    if (tt->family == EZ_LLM_TILE_Q32) return tt->is_signed ? NULL : x8_avx2;
    return tt->wide == 3 ? NULL : x8k_avx2;
}

/* VNNI only pays for the Q*_0 family (and only it sums signed codes
 * exactly): K quants need their per-16 scales in 16 bits, which maddubs +
 * madd give for free. */
ez_llm_x8_fn ez_llm_x8_avx2_vnni(uint32_t w_type) {
#if EZ_LLM_HAVE_AVXVNNI
    const ez_llm_tile_traits *tt = ez_llm_tile_traits_of(w_type);
    if (tt && tt->family == EZ_LLM_TILE_Q32) return x8_vnni;
    return ez_llm_x8_avx2(w_type);
#else
    (void)w_type;
    return NULL;
#endif
}

/* ---- K quants: four weight rows against one activation row ------------------------ */

/* Integer sums stay in int32 over a whole super-block (|sum| < 2^25), then
 * one scaled float FMA per super-block and row, and one for the offsets. */
static void krow4(int64_t nsb, const ez_llm_ktile *tiles, const ez_block_q8_k *x, float out[EZ_LLM_TILE_ROWS]) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t sb = 0; sb < nsb; sb++) {
        const ez_llm_ktile *t = tiles + sb * EZ_LLM_TILE_ROWS;
        __m256i i0 = _mm256_setzero_si256(), i1 = i0, i2 = i0, i3 = i0;
        const __m256i bs = _mm256_loadu_si256((const __m256i *)x[sb].bsums);
        const float dx = x[sb].d;
        for (int k = 0; k < 8; k++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(x[sb].qs + 32 * k));
#define KSUM(acc, row)                                                                                        \
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(                                                            \
                                    _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(t[row].codes + 32 * k)), v), \
                                    _mm256_loadu_si256((const __m256i *)t[row].scale[k])))
            KSUM(i0, 0);
            KSUM(i1, 1);
            KSUM(i2, 2);
            KSUM(i3, 3);
#undef KSUM
        }
#define KACC(acc, isum, row)                                                                                     \
    {                                                                                                            \
        const __m256i o = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)t[row].offset), bs);            \
        isum = _mm256_sub_epi32(isum, _mm256_mullo_epi32(o, _mm256_set1_epi32(t[row].zp)));                     \
        acc = _mm256_fmadd_ps(_mm256_set1_ps(t[row].d * dx), _mm256_cvtepi32_ps(isum), acc);                     \
        acc = _mm256_fnmadd_ps(_mm256_set1_ps(t[row].c * dx), _mm256_cvtepi32_ps(o), acc);                       \
    }
        KACC(a0, i0, 0);
        KACC(a1, i1, 1);
        KACC(a2, i2, 2);
        KACC(a3, i3, 3);
#undef KACC
    }
    out[0] = hsum8(a0);
    out[1] = hsum8(a1);
    out[2] = hsum8(a2);
    out[3] = hsum8(a3);
}

static void ktile_avx2(const ez_llm_matrix *w, int64_t r0, int64_t r1, const uint8_t *x, size_t x_row_bytes,
                       int64_t M, float *y, int64_t ldy, void *scratch) {
    const int64_t nsb = w->n_cols / EZ_QK_K;
    ez_llm_ktile *tiles = (ez_llm_ktile *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float out[EZ_LLM_TILE_ROWS];
    for (int64_t g = r0; g < r1; g += EZ_LLM_TILE_ROWS) {
        const int n_rows = (int)EZ_MIN((int64_t)EZ_LLM_TILE_ROWS, r1 - g);
        ez_llm_ktile_unpack_avx2(w, g, n_rows, tiles);
        for (int64_t m = 0; m < M; m++) {
            krow4(nsb, tiles, (const ez_block_q8_k *)(x + (size_t)m * x_row_bytes), out);
            for (int r = 0; r < n_rows; r++) y[m * ldy + g + r] = out[r];
        }
    }
}

ez_llm_tile_fn ez_llm_tile_avx2(uint32_t w_type) {
    const ez_llm_tile_traits *tt = ez_llm_tile_traits_of(w_type);
    if (!tt || tt->wide == 3 || tt->has_min) return NULL;
    return tt->family == EZ_LLM_TILE_Q32 ? tile_avx2 : ktile_avx2;
}

int ez_llm_cpu_has_avxvnni(void) {
#if EZ_LLM_HAVE_AVXVNNI
    return (ez_cpu_features() & EZ_CPU_AVXVNNI) != 0;
#else
    return 0;
#endif
}

ez_llm_tile_fn ez_llm_tile_avx2_vnni(uint32_t w_type) {
#if EZ_LLM_HAVE_AVXVNNI
    const ez_llm_tile_traits *tt = ez_llm_tile_traits_of(w_type);
    if (tt && tt->family == EZ_LLM_TILE_Q32 && !tt->has_min) return tile_vnni;
    return ez_llm_tile_avx2(w_type);
#else
    (void)w_type;
    return NULL;
#endif
}

#else

void ez_llm_ktile_unpack_avx2(const ez_llm_matrix *w, int64_t r0, int n_rows, ez_llm_ktile *tiles) {
    ez_llm_ktile_unpack(w, r0, n_rows, tiles);
}

ez_llm_x8_fn ez_llm_x8_avx2(uint32_t w_type) {
    (void)w_type;
    return NULL;
}

ez_llm_x8_fn ez_llm_x8_avx2_vnni(uint32_t w_type) {
    (void)w_type;
    return NULL;
}

int ez_llm_cpu_has_avxvnni(void) { return 0; }

ez_llm_tile_fn ez_llm_tile_avx2_vnni(uint32_t w_type) {
    (void)w_type;
    return NULL;
}


ez_llm_tile_fn ez_llm_tile_avx2(uint32_t w_type) {
    (void)w_type;
    return NULL;
}

#endif
