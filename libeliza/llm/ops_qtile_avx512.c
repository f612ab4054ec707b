/* AVX-512 x8 kernels (see ops.h and ops_qtile_avx2.c): the AVX2 kernels'
 * scheme with two packed groups of 8 activation rows in the two halves of
 * each register, so a weight's broadcast codes serve 16 rows per
 * instruction. The Q32 family (signed codes shifted to unsigned, see
 * EZ_LLM_SIGNED_ZP) sums with VNNI's vpdpbusd, and so does every K-tile
 * type (its scales, one per 32 or per 16 elements, applied to the 32-bit
 * sums).
 * Compiled with the AVX-512 flags; used at the avx512 level only. */
#include "ops.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>
#include <string.h>

#include "core/kernels/quant_avx512.h"
#include "core/quant.h"

static inline __m512i bcast4(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* 32 bytes of group g0 in the low half, of g1 in the high half. */
static inline __m512i halves(const void *lo, const void *hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)),
                              _mm256_loadu_si256((const __m256i *)hi), 1);
}

static inline __m512 halves_ps(const float *lo, const float *hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(lo)), _mm256_loadu_ps(hi), 1);
}

/* A row's 32 codes c against 8 + 8 activation rows (q): eight vpdpbusd in
 * two chains, *lo (from init) over elements 0-15, *hi over 16-31. */
static inline void dot32(const uint8_t *c, const __m512i q[8], __m512i init, __m512i *lo, __m512i *hi) {
    __m512i l = _mm512_dpbusd_epi32(init, bcast4(c), q[0]);
    __m512i h = _mm512_dpbusd_epi32(_mm512_setzero_si512(), bcast4(c + 16), q[4]);
    l = _mm512_dpbusd_epi32(l, bcast4(c + 4), q[1]);
    h = _mm512_dpbusd_epi32(h, bcast4(c + 20), q[5]);
    l = _mm512_dpbusd_epi32(l, bcast4(c + 8), q[2]);
    h = _mm512_dpbusd_epi32(h, bcast4(c + 24), q[6]);
    *lo = _mm512_dpbusd_epi32(l, bcast4(c + 12), q[3]);
    *hi = _mm512_dpbusd_epi32(h, bcast4(c + 28), q[7]);
}

/* out[r][0..8) for group x0's rows, out[r][8..16) for x1's. mins: NULL for
 * the types without a min (the packs hold sums), else their mins (the packs
 * hold s: one more FMA per block and row). */
static void x16_rows(int64_t nb, const uint8_t *codes, const float *scales, const float *mins,
                     const ez_llm_x8_block *x0, const ez_llm_x8_block *x1, int zp, float out[EZ_LLM_TILE_ROWS][16]) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const __m512i vzp = _mm512_set1_epi32(-zp);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *cb = codes + (size_t)b * EZ_LLM_TILE_ROWS * EZ_QK;
        const float *s = scales + (size_t)b * EZ_LLM_TILE_ROWS;
        const __m512 dx = halves_ps(x0[b].d, x1[b].d);
        const __m512i nz = mins ? _mm512_setzero_si512() : _mm512_mullo_epi32(halves(x0[b].sum, x1[b].sum), vzp);
        __m512i q[8], isum[EZ_LLM_TILE_ROWS];
        for (int k = 0; k < 8; k++) q[k] = halves(x0[b].q[k], x1[b].q[k]);
        for (int r = 0; r < EZ_LLM_TILE_ROWS; r++) {
            __m512i lo, hi;
            dot32(cb + r * EZ_QK, q, nz, &lo, &hi);
            isum[r] = _mm512_add_epi32(lo, hi);
        }
        a0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[0]), _mm512_mul_ps(dx, _mm512_set1_ps(s[0])), a0);
        a1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[1]), _mm512_mul_ps(dx, _mm512_set1_ps(s[1])), a1);
        a2 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[2]), _mm512_mul_ps(dx, _mm512_set1_ps(s[2])), a2);
        a3 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[3]), _mm512_mul_ps(dx, _mm512_set1_ps(s[3])), a3);
        if (mins) {
            const float *mn = mins + (size_t)b * EZ_LLM_TILE_ROWS;
            const __m512 sx = halves_ps(x0[b].s, x1[b].s);
            a0 = _mm512_fmadd_ps(sx, _mm512_set1_ps(mn[0]), a0);
            a1 = _mm512_fmadd_ps(sx, _mm512_set1_ps(mn[1]), a1);
            a2 = _mm512_fmadd_ps(sx, _mm512_set1_ps(mn[2]), a2);
            a3 = _mm512_fmadd_ps(sx, _mm512_set1_ps(mn[3]), a3);
        }
    }
    _mm512_storeu_ps(out[0], a0);
    _mm512_storeu_ps(out[1], a1);
    _mm512_storeu_ps(out[2], a2);
    _mm512_storeu_ps(out[3], a3);
}

/* A super-block's packed bsums of both groups, loaded once for its rows. */
static inline void load_bsums(const ez_llm_x8k_block *x0, const ez_llm_x8k_block *x1, __m512i bs[8]) {
    for (int i = 0; i < 8; i++) bs[i] = halves(x0->bsums[i], x1->bsums[i]);
}

/* One super-block's integer sum of a row into its float accumulator: the
 * offsets (mins, or the zero point) from the packed bsums, then d and c. */
static inline __m512 ksuper_add(const ez_llm_ktile *t, const __m512i bs[8], __m512 dx, __m512i is, __m512 acc) {
    __m512i o = _mm512_setzero_si512();
    for (int i = 0; i < 8; i++) {
        int32_t pair;
        memcpy(&pair, &t->offset[2 * i], 4);
        o = _mm512_add_epi32(o, _mm512_madd_epi16(_mm512_set1_epi32(pair), bs[i]));
    }
    is = _mm512_sub_epi32(is, _mm512_mullo_epi32(o, _mm512_set1_epi32(t->zp)));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(dx, _mm512_set1_ps(t->d)), acc);
    return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(o), _mm512_mul_ps(dx, _mm512_set1_ps(t->c)), acc);
}

/* One 32-element sub-block of a row against 8 + 8 activation rows (q) into
 * is, times its scale (per16: the halves' scales sc[0] and sc[8]). */
static inline __m512i sub32_add(__m512i is, const uint8_t *c, const __m512i q[8], const int16_t sc[16], int per16) {
    __m512i lo, hi;
    dot32(c, q, _mm512_setzero_si512(), &lo, &hi);
    if (per16)
        return _mm512_add_epi32(is, _mm512_add_epi32(_mm512_mullo_epi32(lo, _mm512_set1_epi32(sc[0])),
                                                     _mm512_mullo_epi32(hi, _mm512_set1_epi32(sc[8]))));
    return _mm512_add_epi32(is, _mm512_mullo_epi32(_mm512_add_epi32(lo, hi), _mm512_set1_epi32(sc[0])));
}

/* K quants, per super-block and row: per 32-element sub-block eight vpdpbusd
 * sum the unsigned codes times the activations in 32 bits and vpmulld
 * applies the scale (one per 32, `scale32`, or one per half); then the
 * offsets from the packed bsums. IQ4_XS's codes to 241 need the 32-bit
 * sums; for the others they take fewer instructions than maddubs + madd.
 * out[r][0..8) for group x0's rows, out[r][8..16) for x1's, r < n_rows:
 * rows 0-3 from the tiles ta, rows 4-7 (n_rows 8) from tb, so that each pair
 * of activation registers serves eight rows, half the activation loads and
 * inserts per product. Inlined with a constant n_rows (x16k32_rows,
 * x16k32_rows8). */
static EZ_ALWAYS_INLINE void x16k32_rows_n(int n_rows, int64_t nsb, const ez_llm_ktile *ta, const ez_llm_ktile *tb,
                                           const ez_llm_x8k_block *x0, const ez_llm_x8k_block *x1, int per16,
                                           float out[][16]) {
    enum { R8 = 2 * EZ_LLM_TILE_ROWS };
    __m512 acc[R8];
    for (int r = 0; r < n_rows; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const ez_llm_ktile *t[R8];
        const __m512 dx = halves_ps(x0[sb].d, x1[sb].d);
        __m512i is[R8];
        for (int r = 0; r < n_rows; r++) {
            t[r] = (r < EZ_LLM_TILE_ROWS ? ta : tb) + sb * EZ_LLM_TILE_ROWS + r % EZ_LLM_TILE_ROWS;
            is[r] = _mm512_setzero_si512();
        }
        for (int s = 0; s < 8; s++) {
            __m512i q[8];
            for (int k = 0; k < 8; k++) q[k] = halves(x0[sb].q[8 * s + k], x1[sb].q[8 * s + k]);
            for (int r = 0; r < n_rows; r++) is[r] = sub32_add(is[r], t[r]->codes + 32 * s, q, t[r]->scale[s], per16);
        }
        {
            __m512i bs[8];
            load_bsums(x0 + sb, x1 + sb, bs);
            for (int r = 0; r < n_rows; r++) acc[r] = ksuper_add(t[r], bs, dx, is[r], acc[r]);
        }
    }
    for (int r = 0; r < n_rows; r++) _mm512_storeu_ps(out[r], acc[r]);
}

static void x16k32_rows(int64_t nsb, const ez_llm_ktile *tiles, const ez_llm_x8k_block *x0,
                        const ez_llm_x8k_block *x1, int per16, float out[EZ_LLM_TILE_ROWS][16]) {
    x16k32_rows_n(EZ_LLM_TILE_ROWS, nsb, tiles, tiles, x0, x1, per16, out);
}

static void x16k32_rows8(int64_t nsb, const ez_llm_ktile *ta, const ez_llm_ktile *tb, const ez_llm_x8k_block *x0,
                         const ez_llm_x8k_block *x1, int per16, float out[2 * EZ_LLM_TILE_ROWS][16]) {
    x16k32_rows_n(2 * EZ_LLM_TILE_ROWS, nsb, ta, tb, x0, x1, per16, out);
}

/* Activation rows m .. m + 15 from groups m / 8 and m / 8 + 1; a last lone
 * group runs in both halves and the second half's results are dropped. */
static void store_rows(const float (*out)[16], int n_acts, int n_rows, float *y, int64_t ldy) {
    for (int a = 0; a < n_acts; a++)
        for (int r = 0; r < n_rows; r++) y[a * ldy + r] = out[r][a];
}

static void x8_avx512(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *xv, int64_t M, float *y,
                      int64_t ldy, void *scratch) {
    const ez_llm_x8_block *x = (const ez_llm_x8_block *)xv;
    const int64_t nb = w->n_cols / EZ_QK;
    const int is_signed = ez_llm_tile_traits_of(w->type)->is_signed;
    const int zp = is_signed ? EZ_LLM_SIGNED_ZP : ez_llm_tile_traits_of(w->type)->zero_point;
    uint8_t *codes = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *scales = (float *)(codes + (size_t)nb * EZ_LLM_TILE_ROWS * EZ_QK);
    float *mins = ez_llm_tile_traits_of(w->type)->has_min ? scales + (size_t)nb * EZ_LLM_TILE_ROWS : NULL;
    float out[EZ_LLM_TILE_ROWS][16];
    for (int64_t g0 = r0; g0 < r1; g0 += EZ_LLM_TILE_ROWS) {
        const int n_rows = (int)EZ_MIN((int64_t)EZ_LLM_TILE_ROWS, r1 - g0);
        ez_llm_tile_unpack_avx2(w, g0, n_rows, codes, scales, mins);
        if (is_signed) ez_llm_tile_codes_unsigned(codes, (size_t)nb * EZ_LLM_TILE_ROWS * EZ_QK);
        for (int64_t m = 0; m < M; m += 16) {
            const ez_llm_x8_block *xa = x + (m / 8) * nb, *xb = m + 8 < M ? xa + nb : xa;
            x16_rows(nb, codes, scales, mins, xa, xb, zp, out);
            store_rows((const float(*)[16])out, (int)EZ_MIN((int64_t)16, M - m), n_rows, y + m * ldy + g0, ldy);
        }
    }
}

/* Two row groups at a time (x16k32_rows8) while eight or more rows are
 * left; the scratch holds both groups' tiles. */
static void x8k_avx512(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *xv, int64_t M, float *y,
                       int64_t ldy, void *scratch) {
    const ez_llm_x8k_block *x = (const ez_llm_x8k_block *)xv;
    const int64_t nsb = w->n_cols / EZ_QK_K;
    const int per16 = !ez_llm_tile_traits_of(w->type)->scale32;
    ez_llm_ktile *tiles = (ez_llm_ktile *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    ez_llm_ktile *tiles_b = tiles + nsb * EZ_LLM_TILE_ROWS;
    float out[2 * EZ_LLM_TILE_ROWS][16];
    for (int64_t g0 = r0; g0 < r1;) {
        if (r1 - g0 >= 2 * EZ_LLM_TILE_ROWS) {
            ez_llm_ktile_unpack_avx2(w, g0, EZ_LLM_TILE_ROWS, tiles);
            ez_llm_ktile_unpack_avx2(w, g0 + EZ_LLM_TILE_ROWS, EZ_LLM_TILE_ROWS, tiles_b);
            for (int64_t m = 0; m < M; m += 16) {
                const ez_llm_x8k_block *xa = x + (m / 8) * nsb, *xb = m + 8 < M ? xa + nsb : xa;
                x16k32_rows8(nsb, tiles, tiles_b, xa, xb, per16, out);
                store_rows((const float(*)[16])out, (int)EZ_MIN((int64_t)16, M - m), 2 * EZ_LLM_TILE_ROWS,
                           y + m * ldy + g0, ldy);
            }
            g0 += 2 * EZ_LLM_TILE_ROWS;
            continue;
        }
        {
            const int n_rows = (int)EZ_MIN((int64_t)EZ_LLM_TILE_ROWS, r1 - g0);
            ez_llm_ktile_unpack_avx2(w, g0, n_rows, tiles);
            for (int64_t m = 0; m < M; m += 16) {
                const ez_llm_x8k_block *xa = x + (m / 8) * nsb, *xb = m + 8 < M ? xa + nsb : xa;
                x16k32_rows(nsb, tiles, xa, xb, per16, out);
                store_rows((const float(*)[16])out, (int)EZ_MIN((int64_t)16, M - m), n_rows, y + m * ldy + g0, ldy);
            }
            g0 += n_rows;
        }
    }
}

ez_llm_x8_fn ez_llm_x8_avx512(uint32_t w_type) {
    const ez_llm_tile_traits *tt = ez_llm_tile_traits_of(w_type);
    if (!tt) return NULL;
    return tt->family == EZ_LLM_TILE_Q32 ? x8_avx512 : x8k_avx512;
}

/* ---- F16 and BF16 weights (float activations) ----
 *
 * FLOAT_GROUPS groups of EZ_LLM_TILE_ROWS weight rows are widened once to
 * float32 (exact for both types) into the scratch, rows padded with zeros to
 * whole 16-lane chunks, then swept by FLOAT_ACTS activation rows at a time. Each output is
 * the AVX-512 per-row dot's sum bit for bit (quant_avx512.c, EZ_DOT_FLOATS):
 * that dot's four accumulators take chunks j, j + 4, j + 8, ... (j = 0..3),
 * accumulator 0 then the whole chunks past the last 64-element step and
 * accumulator 1 the masked rest; here each accumulator is summed over K in
 * its own pass (one register per output and pass instead of four), with the
 * same fused multiply-adds in the same order, and the four are added and
 * reduced as the dot adds and reduces them. */

#define FLOAT_ACTS 6
/* Row groups widened together, each block of activation rows passing over
 * all of them while it is in L1 (ez_llm_tile_scratch holds them). */
#define FLOAT_GROUPS 4

static inline __m512 widen16(uint32_t type, const uint8_t *p, __mmask16 m) {
    return type == EZ_TYPE_F16 ? ez_avx512_f16x16(p, m) : ez_avx512_bf16x16(p, m);
}

/* Rows [g0, g0 + n_rows) of w as float32 rows of k16 floats; rows past
 * n_rows zero. */
static void widen_rows(const ez_llm_matrix *w, int64_t g0, int n_rows, int64_t k16, float *dst) {
    const int64_t n = w->n_cols;
    for (int r = 0; r < EZ_LLM_TILE_ROWS; r++) {
        float *o = dst + r * k16;
        if (r >= n_rows) {
            memset(o, 0, sizeof(float) * (size_t)k16);
            continue;
        }
        {
            const uint8_t *src = w->data + (size_t)(g0 + r) * w->row_bytes;
            for (int64_t i = 0; i < k16; i += 16) {
                const __mmask16 m = i + 16 <= n ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1u);
                _mm512_store_ps(o + i, widen16(w->type, src + 2 * i, m));
            }
        }
    }
}

/* Pass `j` of the dot (see above) of tile rows wt against activation rows
 * x[0..FLOAT_ACTS) into out[a][r]. */
static inline void float_pass(int j, int64_t n, int64_t k16, const float *wt, const float *const x[FLOAT_ACTS],
                              __m512 out[FLOAT_ACTS][EZ_LLM_TILE_ROWS]) {
    __m512 acc[FLOAT_ACTS][EZ_LLM_TILE_ROWS];
    const int64_t steps = n / 64 * 64;
    int64_t i;
    for (int a = 0; a < FLOAT_ACTS; a++)
        for (int r = 0; r < EZ_LLM_TILE_ROWS; r++) acc[a][r] = _mm512_setzero_ps();
#define EZ_FLOAT_STEP(xload)                                                                   \
    do {                                                                                       \
        __m512 wv[EZ_LLM_TILE_ROWS];                                                           \
        for (int r = 0; r < EZ_LLM_TILE_ROWS; r++) wv[r] = _mm512_load_ps(wt + r * k16 + i);   \
        for (int a = 0; a < FLOAT_ACTS; a++) {                                                 \
            const __m512 xv = xload;                                                           \
            for (int r = 0; r < EZ_LLM_TILE_ROWS; r++) acc[a][r] = _mm512_fmadd_ps(wv[r], xv, acc[a][r]); \
        }                                                                                      \
    } while (0)
    for (i = 16 * j; i < steps; i += 64) EZ_FLOAT_STEP(_mm512_loadu_ps(x[a] + i));
    if (j == 0)
        for (i = steps; i + 16 <= n; i += 16) EZ_FLOAT_STEP(_mm512_loadu_ps(x[a] + i));
    if (j == 1 && n % 16) {
        const __mmask16 m = (__mmask16)((1u << (n % 16)) - 1u);
        i = n / 16 * 16;
        EZ_FLOAT_STEP(_mm512_maskz_loadu_ps(m, x[a] + i));
    }
#undef EZ_FLOAT_STEP
    for (int a = 0; a < FLOAT_ACTS; a++)
        for (int r = 0; r < EZ_LLM_TILE_ROWS; r++) out[a][r] = acc[a][r];
}

static void tile_float_avx512(const ez_llm_matrix *w, int64_t r0, int64_t r1, const uint8_t *x, size_t x_row_bytes,
                              int64_t M, float *y, int64_t ldy, void *scratch) {
    const int64_t n = w->n_cols, k16 = (n + 15) / 16 * 16;
    float *wt = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    __m512 s[4][FLOAT_ACTS][EZ_LLM_TILE_ROWS];
    for (int64_t c0 = r0; c0 < r1; c0 += FLOAT_GROUPS * EZ_LLM_TILE_ROWS) {
        const int64_t c1 = EZ_MIN(r1, c0 + FLOAT_GROUPS * EZ_LLM_TILE_ROWS);
        for (int64_t g0 = c0; g0 < c1; g0 += EZ_LLM_TILE_ROWS)
            widen_rows(w, g0, (int)EZ_MIN((int64_t)EZ_LLM_TILE_ROWS, c1 - g0), k16,
                       wt + (g0 - c0) * k16);
        for (int64_t m = 0; m < M; m += FLOAT_ACTS) {
            const int n_acts = (int)EZ_MIN((int64_t)FLOAT_ACTS, M - m);
            const float *xr[FLOAT_ACTS];
            /* past the last row: its copies, results dropped */
            for (int a = 0; a < FLOAT_ACTS; a++)
                xr[a] = (const float *)(x + (size_t)(m + EZ_MIN(a, n_acts - 1)) * x_row_bytes);
            for (int64_t g0 = c0; g0 < c1; g0 += EZ_LLM_TILE_ROWS) {
                const int n_rows = (int)EZ_MIN((int64_t)EZ_LLM_TILE_ROWS, c1 - g0);
                for (int j = 0; j < 4; j++) float_pass(j, n, k16, wt + (g0 - c0) * k16, xr, s[j]);
                for (int a = 0; a < n_acts; a++)
                    for (int r = 0; r < n_rows; r++)
                        y[(m + a) * ldy + g0 + r] = _mm512_reduce_add_ps(_mm512_add_ps(
                            _mm512_add_ps(s[0][a][r], s[1][a][r]), _mm512_add_ps(s[2][a][r], s[3][a][r])));
            }
        }
    }
}

ez_llm_tile_fn ez_llm_tile_float_avx512(uint32_t w_type) {
    return w_type == EZ_TYPE_F16 || w_type == EZ_TYPE_BF16 ? tile_float_avx512 : NULL;
}

#else

ez_llm_x8_fn ez_llm_x8_avx512(uint32_t w_type) {
    (void)w_type;
    return NULL;
}

ez_llm_tile_fn ez_llm_tile_float_avx512(uint32_t w_type) {
    (void)w_type;
    return NULL;
}

#endif
