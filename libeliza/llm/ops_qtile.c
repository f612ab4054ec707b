/* Tile kernels for products with many activation rows (prompt batches):
 * scalar reference and dispatch. See ops.h.
 *
 * A group of EZ_LLM_TILE_ROWS weight rows is unpacked once into bytes, then
 * dotted with every activation row. All integer sums are exact, so results
 * differ from the per-pair dot kernels only in the order of float additions.
 *
 * Q4_0 / Q5_0 / Q8_0 / IQ4_NL / MXFP4 (Q8_0 activations): codes per
 * 32-element block with the block's float scale. Q4_0 and Q5_0 keep their
 * unsigned codes (0..15, 0..31) and the zero point (8, 16) comes off the
 * integer sum; Q8_0 stays signed, and IQ4_NL / MXFP4 codes become their
 * signed table values. Q4_1 / Q5_1 (Q8_1 activations, x8 kernels only) keep
 * their unsigned codes with zero point 0 and add the min: per block
 * d * dx * sum(code * x) + m * s, s = Q8_1's stored dx * sum(x).
 *
 * Q2_K / Q3_K / Q4_K / Q5_K / Q6_K / TQ2_0 (Q8_K activations, 256-element
 * super-blocks): unsigned codes (0..3, 0..7, 0..15, 0..31, 0..63, 0..2), an
 * integer scale per 16 elements, and an
 * integer "offset weight" per 16 elements; with S = sum_j offset_j * sum_{i in
 * j} x_i (from Q8_K's bsums, the activation sums per 16),
 *   dot = dx * (d * (sum_j scale_j * sum_{i in j} code_i x_i - zp * S) - c * S).
 * Q4_K / Q5_K: scale_j = the sub-block's 6-bit scale, offset_j its 6-bit
 * min, zp = 0, c = dmin; Q2_K the same with 4-bit ones. Q6_K: scale_j =
 * offset_j = its int8 scale, zp = 32 (its zero point, taken off in integers:
 * no float cancellation), c = 0; Q3_K likewise with zp = 4 (codes q + 4),
 * TQ2_0 with scale 1 and zp = 1.
 *
 * The grid i-quants, IQ4_XS and TQ1_0 (Q8_K activations) decode to signed
 * integers per element and integer scales per 16 (ez_iq_sub32); their codes
 * are those integers plus a zero point that makes them unsigned, offset_j =
 * scale_j, c = 0: zp = 16 for IQ1_S / IQ1_M (8 * grid +- 1 in -9..9) and
 * IQ3_S (-15..15), 64 for IQ2_* (-43..43) and IQ3_XXS (-62..62), 128 for
 * IQ4_XS (-127..113), 1 for TQ1_0. */
#include <string.h>

#include "core/cpu.h"
#include "core/kernels/quant_kernels.h"
#include "core/kernels/quant_tables.h"
#include "core/quant.h"
#include "ops.h"

_Static_assert(sizeof(ez_llm_ktile) % 32 == 0, "K tiles must keep their codes 32-byte aligned");

static const ez_llm_tile_traits g_tile_traits[EZ_TYPE_COUNT] = {
    [EZ_TYPE_Q4_0] = {EZ_LLM_TILE_Q32, 8, 0, 0, 0, 0}, [EZ_TYPE_Q5_0] = {EZ_LLM_TILE_Q32, 16, 0, 0, 0, 0},
    [EZ_TYPE_Q4_1] = {EZ_LLM_TILE_Q32, 0, 0, 0, 0, 1}, [EZ_TYPE_Q5_1] = {EZ_LLM_TILE_Q32, 0, 0, 0, 0, 1},
    [EZ_TYPE_Q8_0] = {EZ_LLM_TILE_Q32, 0, 1, 0, 0, 0}, [EZ_TYPE_IQ4_NL] = {EZ_LLM_TILE_Q32, 0, 1, 0, 0, 0},
    [EZ_TYPE_MXFP4] = {EZ_LLM_TILE_Q32, 0, 1, 0, 0, 0}, [EZ_TYPE_Q2_K] = {EZ_LLM_TILE_QK, 0, 0, 0, 0, 0},
    [EZ_TYPE_Q3_K] = {EZ_LLM_TILE_QK, 0, 0, 0, 0, 0}, [EZ_TYPE_Q4_K] = {EZ_LLM_TILE_QK, 0, 0, 0, 1, 0},
    [EZ_TYPE_Q5_K] = {EZ_LLM_TILE_QK, 0, 0, 0, 1, 0}, [EZ_TYPE_Q6_K] = {EZ_LLM_TILE_QK, 0, 0, 1, 0, 0},
    [EZ_TYPE_TQ2_0] = {EZ_LLM_TILE_QK, 0, 0, 0, 0, 0}, [EZ_TYPE_TQ1_0] = {EZ_LLM_TILE_QK, 0, 0, 0, 1, 0},
    [EZ_TYPE_IQ1_S] = {EZ_LLM_TILE_QK, 0, 0, 0, 1, 0}, [EZ_TYPE_IQ1_M] = {EZ_LLM_TILE_QK, 0, 0, 0, 0, 0},
    [EZ_TYPE_IQ3_S] = {EZ_LLM_TILE_QK, 0, 0, 0, 1, 0}, [EZ_TYPE_IQ2_XXS] = {EZ_LLM_TILE_QK, 0, 0, 2, 1, 0},
    [EZ_TYPE_IQ2_XS] = {EZ_LLM_TILE_QK, 0, 0, 2, 0, 0}, [EZ_TYPE_IQ2_S] = {EZ_LLM_TILE_QK, 0, 0, 2, 0, 0},
    [EZ_TYPE_IQ3_XXS] = {EZ_LLM_TILE_QK, 0, 0, 2, 1, 0}, [EZ_TYPE_IQ4_XS] = {EZ_LLM_TILE_QK, 0, 0, 3, 1, 0},
};

const ez_llm_tile_traits *ez_llm_tile_traits_of(uint32_t w_type) {
    return w_type < EZ_TYPE_COUNT && g_tile_traits[w_type].family ? &g_tile_traits[w_type] : NULL;
}

static int is_family(uint32_t t, ez_llm_tile_family f) {
    const ez_llm_tile_traits *tt = ez_llm_tile_traits_of(t);
    return tt && tt->family == f;
}

/* Unpacked group: Q32 codes[b][r][32], then scale[b][r] and min[b][r] for
 * nb blocks; K quants ez_llm_ktile[sb][r] for nb super-blocks; F16 / BF16
 * four row groups' float32 rows padded to whole 16-lane chunks (the AVX-512
 * kernel's FLOAT_GROUPS). */
size_t ez_llm_tile_scratch(uint32_t w_type, int64_t n_cols) {
    if (w_type == EZ_TYPE_F16 || w_type == EZ_TYPE_BF16)
        return (size_t)((n_cols + 15) / 16 * 16) * 4 * EZ_LLM_TILE_ROWS * sizeof(float) + 64;
    /* K quants: two row groups' tiles (the AVX-512 kernel's pairs). */
    if (is_family(w_type, EZ_LLM_TILE_QK))
        return (size_t)(n_cols / EZ_QK_K) * 2 * EZ_LLM_TILE_ROWS * sizeof(ez_llm_ktile) + 64;
    return (size_t)(n_cols / EZ_QK) * EZ_LLM_TILE_ROWS * (EZ_QK + 2 * sizeof(float)) + 64;
}

/* Codes of one block as bytes: unsigned for Q4_0 / Q5_0 / Q4_1 / Q5_1 (the
 * last two also write *min), signed for the others. */
static void unpack_block(uint32_t type, const uint8_t *blk, uint8_t *codes, float *scale, float *min) {
    int j;
    if (type == EZ_TYPE_Q4_1) {
        const ez_block_q4_1 *b = (const ez_block_q4_1 *)blk;
        for (j = 0; j < EZ_QK / 2; j++) {
            codes[j] = (uint8_t)(b->qs[j] & 0x0f);
            codes[j + EZ_QK / 2] = (uint8_t)(b->qs[j] >> 4);
        }
        *scale = ez_f16_to_f32(b->d);
        *min = ez_f16_to_f32(b->m);
    } else if (type == EZ_TYPE_Q5_1) {
        const ez_block_q5_1 *b = (const ez_block_q5_1 *)blk;
        uint32_t qh = (uint32_t)b->qh[0] | (uint32_t)b->qh[1] << 8 | (uint32_t)b->qh[2] << 16 | (uint32_t)b->qh[3] << 24;
        for (j = 0; j < EZ_QK / 2; j++) {
            codes[j] = (uint8_t)((b->qs[j] & 0x0f) | ((qh >> j) & 1) << 4);
            codes[j + EZ_QK / 2] = (uint8_t)((b->qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
        }
        *scale = ez_f16_to_f32(b->d);
        *min = ez_f16_to_f32(b->m);
    } else if (type == EZ_TYPE_IQ4_NL || type == EZ_TYPE_MXFP4) {
        const ez_block_iq4_nl *b = (const ez_block_iq4_nl *)blk;
        const ez_block_mxfp4 *bm = (const ez_block_mxfp4 *)blk;
        const int8_t *kv = type == EZ_TYPE_IQ4_NL ? ez_kvalues_iq4nl : ez_kvalues_mxfp4;
        const uint8_t *qs = type == EZ_TYPE_IQ4_NL ? b->qs : bm->qs;
        for (j = 0; j < EZ_QK / 2; j++) {
            codes[j] = (uint8_t)kv[qs[j] & 15];
            codes[j + EZ_QK / 2] = (uint8_t)kv[qs[j] >> 4];
        }
        *scale = type == EZ_TYPE_IQ4_NL ? ez_f16_to_f32(b->d) : ez_e8m0_to_float_half(bm->e);
    } else if (type == EZ_TYPE_Q8_0) {
        const ez_block_q8_0 *b = (const ez_block_q8_0 *)blk;
        memcpy(codes, b->qs, EZ_QK);
        *scale = ez_f16_to_f32(b->d);
    } else if (type == EZ_TYPE_Q4_0) {
        const ez_block_q4_0 *b = (const ez_block_q4_0 *)blk;
        for (j = 0; j < EZ_QK / 2; j++) {
            codes[j] = (uint8_t)(b->qs[j] & 0x0f);
            codes[j + EZ_QK / 2] = (uint8_t)(b->qs[j] >> 4);
        }
        *scale = ez_f16_to_f32(b->d);
    } else {
        const ez_block_q5_0 *b = (const ez_block_q5_0 *)blk;
        uint32_t qh = (uint32_t)b->qh[0] | (uint32_t)b->qh[1] << 8 | (uint32_t)b->qh[2] << 16 | (uint32_t)b->qh[3] << 24;
        for (j = 0; j < EZ_QK / 2; j++) {
            codes[j] = (uint8_t)((b->qs[j] & 0x0f) | ((qh >> j) & 1) << 4);
            codes[j + EZ_QK / 2] = (uint8_t)((b->qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
        }
        *scale = ez_f16_to_f32(b->d);
    }
}

void ez_llm_tile_unpack_ref(const ez_llm_matrix *w, int64_t r0, int n_rows, uint8_t *codes, float *scales,
                            float *mins) {
    const int64_t nb = w->n_cols / EZ_QK;
    const size_t bsize = w->row_bytes / (size_t)nb;
    const int has_min = ez_llm_tile_traits_of(w->type)->has_min;
    for (int64_t b = 0; b < nb; b++)
        for (int r = 0; r < EZ_LLM_TILE_ROWS; r++) {
            uint8_t *c = codes + ((size_t)b * EZ_LLM_TILE_ROWS + (size_t)r) * EZ_QK;
            const size_t i = (size_t)b * EZ_LLM_TILE_ROWS + (size_t)r;
            float unused;
            if (r < n_rows) {
                unpack_block(w->type, w->data + (size_t)(r0 + r) * w->row_bytes + (size_t)b * bsize, c, &scales[i],
                             has_min ? &mins[i] : &unused);
            } else {
                memset(c, 0, EZ_QK);
                scales[i] = 0.0f;
                if (has_min) mins[i] = 0.0f;
            }
        }
}

static void tile_ref(const ez_llm_matrix *w, int64_t r0, int64_t r1, const uint8_t *x, size_t x_row_bytes,
                     int64_t M, float *y, int64_t ldy, void *scratch) {
    const int64_t nb = w->n_cols / EZ_QK;
    const int zp = ez_llm_tile_traits_of(w->type)->zero_point;
    const int is_signed = ez_llm_tile_traits_of(w->type)->is_signed;
    uint8_t *codes = (uint8_t *)scratch;
    float *scales = (float *)(codes + (size_t)nb * EZ_LLM_TILE_ROWS * EZ_QK);
    for (int64_t g = r0; g < r1; g += EZ_LLM_TILE_ROWS) {
        const int n_rows = (int)EZ_MIN((int64_t)EZ_LLM_TILE_ROWS, r1 - g);
        ez_llm_tile_unpack_ref(w, g, n_rows, codes, scales, NULL);
        for (int64_t m = 0; m < M; m++) {
            const ez_block_q8_0 *xb = (const ez_block_q8_0 *)(x + (size_t)m * x_row_bytes);
            for (int r = 0; r < n_rows; r++) {
                float sum = 0.0f;
                for (int64_t b = 0; b < nb; b++) {
                    const uint8_t *c = codes + ((size_t)b * EZ_LLM_TILE_ROWS + (size_t)r) * EZ_QK;
                    int32_t isum = 0;
                    for (int j = 0; j < EZ_QK; j++) {
                        int32_t wv = is_signed ? (int32_t)(int8_t)c[j] : (int32_t)c[j] - zp;
                        isum += wv * xb[b].qs[j];
                    }
                    sum += scales[b * EZ_LLM_TILE_ROWS + r] * ez_f16_to_f32(xb[b].d) * (float)isum;
                }
                y[m * ldy + g + r] = sum;
            }
        }
    }
}

/* ---- K quants --------------------------------------------------------------------- */

/* The 6-bit scale and min of sub-block j of a Q4_K / Q5_K super-block. */
static void scale_min_k4(const uint8_t *q, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q2_K / Q3_K / TQ2_0 code of element e: bits 2s..2s+1 of qs[32h + l] for
 * e = 128h + 32s + l. */
static inline int two_bits(const uint8_t *qs, int e) {
    return (qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
}

static int iq_zero_point(uint32_t type) {
    switch (type) {
    case EZ_TYPE_IQ2_XXS:
    case EZ_TYPE_IQ2_XS:
    case EZ_TYPE_IQ2_S:
    case EZ_TYPE_IQ3_XXS: return 64;
    case EZ_TYPE_IQ4_XS: return 128;
    case EZ_TYPE_TQ1_0: return 1;
    default: return 16; /* IQ1_S, IQ1_M, IQ3_S */
    }
}

static void unpack_iq_super(uint32_t type, const uint8_t *blk, ez_llm_ktile *t) {
    const int zp = iq_zero_point(type);
    for (int ib = 0; ib < 8; ib++) {
        int8_t v[32];
        int ls[2];
        ez_iq_sub32(type, blk, ib, v, ls);
        for (int j = 0; j < 32; j++) t->codes[32 * ib + j] = (uint8_t)(v[j] + zp);
        for (int l = 0; l < 16; l++) t->scale[ib][l] = (int16_t)ls[l / 8];
        t->offset[2 * ib] = (int16_t)ls[0];
        t->offset[2 * ib + 1] = (int16_t)ls[1];
    }
    t->zp = zp;
    t->d = ez_iq_sub32_d(type, blk);
    t->c = 0.0f;
}

void ez_llm_ksuper_scales(uint32_t type, const uint8_t *blk, ez_llm_ktile *t) {
    int k, l, j;
    if (type == EZ_TYPE_Q2_K || type == EZ_TYPE_Q3_K || type == EZ_TYPE_TQ2_0) {
        const ez_block_q2_k *b2 = (const ez_block_q2_k *)blk;
        const ez_block_q3_k *b3 = (const ez_block_q3_k *)blk;
        const ez_block_tq2_0 *bt = (const ez_block_tq2_0 *)blk;
        int sc[16];
        if (type == EZ_TYPE_Q3_K) ez_unpack_q3k_scales(b3->scales, sc);
        for (j = 0; j < 16; j++) {
            if (type == EZ_TYPE_Q2_K) sc[j] = b2->scales[j] & 15;
            if (type == EZ_TYPE_TQ2_0) sc[j] = 1;
            t->offset[j] = (int16_t)(type == EZ_TYPE_Q2_K ? b2->scales[j] >> 4 : sc[j]);
        }
        for (k = 0; k < 8; k++)
            for (l = 0; l < 16; l++) t->scale[k][l] = (int16_t)sc[2 * k + l / 8];
        t->zp = type == EZ_TYPE_Q2_K ? 0 : type == EZ_TYPE_Q3_K ? 4 : 1;
        t->d = ez_f16_to_f32(type == EZ_TYPE_Q2_K ? b2->d : type == EZ_TYPE_Q3_K ? b3->d : bt->d);
        t->c = type == EZ_TYPE_Q2_K ? ez_f16_to_f32(b2->dmin) : 0.0f;
        return;
    }
    if (type == EZ_TYPE_Q6_K) {
        const ez_block_q6_k *b = (const ez_block_q6_k *)blk;
        for (k = 0; k < 16; k++) t->offset[k] = b->scales[k];
        for (k = 0; k < 8; k++)
            for (l = 0; l < 16; l++) t->scale[k][l] = b->scales[2 * k + l / 8];
        t->zp = 32;
        t->d = ez_f16_to_f32(b->d);
        t->c = 0.0f;
        return;
    }
    {
        /* Q4_K and Q5_K share the scales. */
        const ez_block_q4_k *b4 = (const ez_block_q4_k *)blk;
        const ez_block_q5_k *b5 = (const ez_block_q5_k *)blk;
        const uint8_t *scales = type == EZ_TYPE_Q4_K ? b4->scales : b5->scales;
        const uint16_t d = type == EZ_TYPE_Q4_K ? b4->d : b5->d, dmin = type == EZ_TYPE_Q4_K ? b4->dmin : b5->dmin;
        for (k = 0; k < 8; k++) {
            int sc, m;
            scale_min_k4(scales, k, &sc, &m);
            for (l = 0; l < 16; l++) t->scale[k][l] = (int16_t)sc;
            t->offset[2 * k] = t->offset[2 * k + 1] = (int16_t)m;
        }
        t->zp = 0;
        t->d = ez_f16_to_f32(d);
        t->c = ez_f16_to_f32(dmin);
    }
}

static void unpack_ksuper(uint32_t type, const uint8_t *blk, ez_llm_ktile *t) {
    int k, l;
    if (type != EZ_TYPE_Q2_K && type != EZ_TYPE_Q3_K && type != EZ_TYPE_TQ2_0 && type != EZ_TYPE_Q6_K &&
        type != EZ_TYPE_Q4_K && type != EZ_TYPE_Q5_K) {
        unpack_iq_super(type, blk, t);
        return;
    }
    if (type == EZ_TYPE_Q2_K || type == EZ_TYPE_Q3_K || type == EZ_TYPE_TQ2_0) {
        const ez_block_q2_k *b2 = (const ez_block_q2_k *)blk;
        const ez_block_q3_k *b3 = (const ez_block_q3_k *)blk;
        const ez_block_tq2_0 *bt = (const ez_block_tq2_0 *)blk;
        for (l = 0; l < EZ_QK_K; l++) {
            if (type == EZ_TYPE_Q2_K) t->codes[l] = (uint8_t)two_bits(b2->qs, l);
            else if (type == EZ_TYPE_TQ2_0) t->codes[l] = (uint8_t)two_bits(bt->qs, l);
            else t->codes[l] = (uint8_t)(two_bits(b3->qs, l) + ((b3->hmask[l % 32] >> (l / 32)) & 1 ? 4 : 0));
        }
    } else if (type == EZ_TYPE_Q6_K) {
        const ez_block_q6_k *b = (const ez_block_q6_k *)blk;
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
            uint8_t *c = t->codes + 128 * h;
            for (l = 0; l < 32; l++) {
                c[l] = (uint8_t)((ql[l] & 15) | ((qh[l] & 3) << 4));
                c[l + 32] = (uint8_t)((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4));
                c[l + 64] = (uint8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                c[l + 96] = (uint8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
            }
        }
    } else {
        /* Q4_K and Q5_K share the nibble layout. */
        const ez_block_q4_k *b4 = (const ez_block_q4_k *)blk;
        const ez_block_q5_k *b5 = (const ez_block_q5_k *)blk;
        const uint8_t *qs = type == EZ_TYPE_Q4_K ? b4->qs : b5->qs;
        for (k = 0; k < 8; k++)
            for (l = 0; l < 32; l++) {
                int v = (qs[32 * (k / 2) + l] >> (4 * (k % 2))) & 15;
                if (type == EZ_TYPE_Q5_K) v |= ((b5->qh[l] >> k) & 1) << 4;
                t->codes[32 * k + l] = (uint8_t)v;
            }
    }
    ez_llm_ksuper_scales(type, blk, t);
}

void ez_llm_ktile_unpack(const ez_llm_matrix *w, int64_t r0, int n_rows, ez_llm_ktile *tiles) {
    const int64_t nsb = w->n_cols / EZ_QK_K;
    const size_t bsize = w->row_bytes / (size_t)nsb;
    for (int64_t sb = 0; sb < nsb; sb++)
        for (int r = 0; r < EZ_LLM_TILE_ROWS; r++) {
            ez_llm_ktile *t = &tiles[sb * EZ_LLM_TILE_ROWS + r];
            if (r < n_rows) unpack_ksuper(w->type, w->data + (size_t)(r0 + r) * w->row_bytes + (size_t)sb * bsize, t);
            else memset(t, 0, sizeof *t);
        }
}

static void ktile_ref(const ez_llm_matrix *w, int64_t r0, int64_t r1, const uint8_t *x, size_t x_row_bytes,
                      int64_t M, float *y, int64_t ldy, void *scratch) {
    const int64_t nsb = w->n_cols / EZ_QK_K;
    ez_llm_ktile *tiles = (ez_llm_ktile *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    for (int64_t g = r0; g < r1; g += EZ_LLM_TILE_ROWS) {
        const int n_rows = (int)EZ_MIN((int64_t)EZ_LLM_TILE_ROWS, r1 - g);
        ez_llm_ktile_unpack(w, g, n_rows, tiles);
        for (int64_t m = 0; m < M; m++) {
            const ez_block_q8_k *xb = (const ez_block_q8_k *)(x + (size_t)m * x_row_bytes);
            for (int r = 0; r < n_rows; r++) {
                float sum = 0.0f;
                for (int64_t sb = 0; sb < nsb; sb++) {
                    const ez_llm_ktile *t = &tiles[sb * EZ_LLM_TILE_ROWS + r];
                    int32_t isum = 0, osum = 0;
                    /* scale[k] holds the scales of chunk k's two halves in lanes 0-7 and 8-15 */
                    for (int i = 0; i < EZ_QK_K; i++)
                        isum += t->scale[i / 32][(i % 32) < 16 ? 0 : 8] * t->codes[i] * xb[sb].qs[i];
                    for (int j = 0; j < 16; j++) osum += t->offset[j] * xb[sb].bsums[j];
                    sum += xb[sb].d * (t->d * (float)(isum - t->zp * osum) - t->c * (float)osum);
                }
                y[m * ldy + g + r] = sum;
            }
        }
    }
}

ez_llm_tile_fn ez_llm_tile_ref(uint32_t w_type) {
    if (is_family(w_type, EZ_LLM_TILE_Q32)) return ez_llm_tile_traits_of(w_type)->has_min ? NULL : tile_ref;
    if (is_family(w_type, EZ_LLM_TILE_QK)) return ktile_ref;
    return NULL;
}

/* Under ELIZA_FORCE_SCALAR the per-pair reference dots are the reference
 * path, so there is no active tile kernel. */
ez_llm_tile_fn ez_llm_tile_active(uint32_t w_type) {
    if (!ez_simd_at_least(EZ_SIMD_AVX2)) return NULL;
    if (ez_simd_at_least(EZ_SIMD_AVX512) && ez_llm_tile_float_avx512(w_type)) return ez_llm_tile_float_avx512(w_type);
    if (ez_llm_cpu_has_avxvnni() && ez_llm_tile_avx2_vnni(w_type)) return ez_llm_tile_avx2_vnni(w_type);
    return ez_llm_tile_avx2(w_type);
}

/* ---- x8 kernels: packing and the scalar reference ---------------------------------- */

_Static_assert(sizeof(ez_llm_x8_block) == 320, "x8 blocks are 320 bytes");

void ez_llm_pack_x8(const uint8_t *xq, size_t x_row_bytes, int64_t M, int64_t K, ez_llm_x8_block *dst) {
    const int64_t nb = K / EZ_QK, n_groups = (M + 7) / 8;
    for (int64_t g = 0; g < n_groups; g++)
        for (int64_t b = 0; b < nb; b++) {
            ez_llm_x8_block *o = &dst[g * nb + b];
            for (int a = 0; a < 8; a++) {
                const int64_t m = g * 8 + a;
                if (m < M) {
                    const ez_block_q8_0 *xb = (const ez_block_q8_0 *)(xq + (size_t)m * x_row_bytes) + b;
                    int32_t sum = 0;
                    for (int k4 = 0; k4 < 8; k4++) memcpy(o->q[k4][a], xb->qs + 4 * k4, 4);
                    for (int j = 0; j < EZ_QK; j++) sum += xb->qs[j];
                    o->d[a] = ez_f16_to_f32(xb->d);
                    o->sum[a] = sum;
                } else {
                    for (int k4 = 0; k4 < 8; k4++) memset(o->q[k4][a], 0, 4);
                    o->d[a] = 0.0f;
                    o->sum[a] = 0;
                }
            }
        }
}

void ez_llm_pack_x8_1(const uint8_t *xq, size_t x_row_bytes, int64_t M, int64_t K, ez_llm_x8_block *dst) {
    const int64_t nb = K / EZ_QK, n_groups = (M + 7) / 8;
    for (int64_t g = 0; g < n_groups; g++)
        for (int64_t b = 0; b < nb; b++) {
            ez_llm_x8_block *o = &dst[g * nb + b];
            for (int a = 0; a < 8; a++) {
                const int64_t m = g * 8 + a;
                if (m < M) {
                    const ez_block_q8_1 *xb = (const ez_block_q8_1 *)(xq + (size_t)m * x_row_bytes) + b;
                    for (int k4 = 0; k4 < 8; k4++) memcpy(o->q[k4][a], xb->qs + 4 * k4, 4);
                    o->d[a] = xb->d;
                    o->s[a] = xb->s;
                } else {
                    for (int k4 = 0; k4 < 8; k4++) memset(o->q[k4][a], 0, 4);
                    o->d[a] = 0.0f;
                    o->s[a] = 0.0f;
                }
            }
        }
}

_Static_assert(sizeof(ez_llm_x8k_block) % 32 == 0, "x8k blocks keep 32-byte alignment");

void ez_llm_pack_x8k(const uint8_t *xq, size_t x_row_bytes, int64_t M, int64_t K, ez_llm_x8k_block *dst) {
    const int64_t nsb = K / EZ_QK_K, n_groups = (M + 7) / 8;
    for (int64_t g = 0; g < n_groups; g++)
        for (int64_t sb = 0; sb < nsb; sb++) {
            ez_llm_x8k_block *o = &dst[g * nsb + sb];
            for (int a = 0; a < 8; a++) {
                const int64_t m = g * 8 + a;
                if (m < M) {
                    const ez_block_q8_k *xb = (const ez_block_q8_k *)(xq + (size_t)m * x_row_bytes) + sb;
                    for (int k4 = 0; k4 < 64; k4++) memcpy(o->q[k4][a], xb->qs + 4 * k4, 4);
                    for (int i = 0; i < 8; i++) {
                        o->bsums[i][a][0] = xb->bsums[2 * i];
                        o->bsums[i][a][1] = xb->bsums[2 * i + 1];
                    }
                    o->d[a] = xb->d;
                } else {
                    for (int k4 = 0; k4 < 64; k4++) memset(o->q[k4][a], 0, 4);
                    for (int i = 0; i < 8; i++) o->bsums[i][a][0] = o->bsums[i][a][1] = 0;
                    o->d[a] = 0.0f;
                }
            }
        }
}

static void x8k_ref(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *xv, int64_t M, float *y, int64_t ldy,
                    void *scratch) {
    const ez_llm_x8k_block *x = (const ez_llm_x8k_block *)xv;
    const int64_t nsb = w->n_cols / EZ_QK_K;
    ez_llm_ktile *tiles = (ez_llm_ktile *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    for (int64_t g0 = r0; g0 < r1; g0 += EZ_LLM_TILE_ROWS) {
        const int n_rows = (int)EZ_MIN((int64_t)EZ_LLM_TILE_ROWS, r1 - g0);
        ez_llm_ktile_unpack(w, g0, n_rows, tiles);
        for (int64_t m = 0; m < M; m++) {
            const ez_llm_x8k_block *xg = x + (m / 8) * nsb;
            const int a = (int)(m % 8);
            for (int r = 0; r < n_rows; r++) {
                float sum = 0.0f;
                for (int64_t sb = 0; sb < nsb; sb++) {
                    const ez_llm_ktile *t = &tiles[sb * EZ_LLM_TILE_ROWS + r];
                    int32_t isum = 0, osum = 0;
                    for (int i = 0; i < EZ_QK_K; i++)
                        isum += t->scale[i / 32][(i % 32) < 16 ? 0 : 8] * t->codes[i] * xg[sb].q[i / 4][a][i % 4];
                    for (int j = 0; j < 16; j++) osum += t->offset[j] * xg[sb].bsums[j / 2][a][j % 2];
                    sum += xg[sb].d[a] * (t->d * (float)(isum - t->zp * osum) - t->c * (float)osum);
                }
                y[m * ldy + g0 + r] = sum;
            }
        }
    }
}

void ez_llm_tile_codes_unsigned(uint8_t *codes, size_t n) {
    for (size_t i = 0; i < n; i++) codes[i] ^= 0x80;
}

static void x8_ref(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *xv, int64_t M, float *y,
                   int64_t ldy, void *scratch) {
    const ez_llm_x8_block *x = (const ez_llm_x8_block *)xv;
    const int64_t nb = w->n_cols / EZ_QK;
    const int is_signed = ez_llm_tile_traits_of(w->type)->is_signed;
    const int has_min = ez_llm_tile_traits_of(w->type)->has_min;
    const int zp = is_signed ? EZ_LLM_SIGNED_ZP : ez_llm_tile_traits_of(w->type)->zero_point;
    uint8_t *codes = (uint8_t *)scratch;
    float *scales = (float *)(codes + (size_t)nb * EZ_LLM_TILE_ROWS * EZ_QK);
    float *mins = scales + (size_t)nb * EZ_LLM_TILE_ROWS;
    for (int64_t g0 = r0; g0 < r1; g0 += EZ_LLM_TILE_ROWS) {
        const int n_rows = (int)EZ_MIN((int64_t)EZ_LLM_TILE_ROWS, r1 - g0);
        ez_llm_tile_unpack_ref(w, g0, n_rows, codes, scales, mins);
        if (is_signed) ez_llm_tile_codes_unsigned(codes, (size_t)nb * EZ_LLM_TILE_ROWS * EZ_QK);
        for (int64_t m = 0; m < M; m++) {
            const ez_llm_x8_block *xg = x + (m / 8) * nb;
            const int a = (int)(m % 8);
            for (int r = 0; r < n_rows; r++) {
                float sum = 0.0f;
                for (int64_t b = 0; b < nb; b++) {
                    const uint8_t *c = codes + ((size_t)b * EZ_LLM_TILE_ROWS + (size_t)r) * EZ_QK;
                    /* has_min packs hold s, not sum, and zp is 0 */
                    int32_t isum = has_min ? 0 : -zp * xg[b].sum[a];
                    for (int j = 0; j < EZ_QK; j++) isum += (int32_t)c[j] * xg[b].q[j / 4][a][j % 4];
                    sum += scales[b * EZ_LLM_TILE_ROWS + r] * xg[b].d[a] * (float)isum;
                    if (has_min) sum += mins[b * EZ_LLM_TILE_ROWS + r] * xg[b].s[a];
                }
                y[m * ldy + g0 + r] = sum;
            }
        }
    }
}

ez_llm_x8_fn ez_llm_x8_ref(uint32_t w_type) {
    const ez_llm_tile_traits *tt = ez_llm_tile_traits_of(w_type);
    if (!tt) return NULL;
    return tt->family == EZ_LLM_TILE_Q32 ? x8_ref : x8k_ref;
}

ez_llm_x8_fn ez_llm_x8_active(uint32_t w_type) {
    if (!ez_simd_at_least(EZ_SIMD_AVX2)) return NULL;
    if (ez_simd_at_least(EZ_SIMD_AVX512) && ez_llm_x8_avx512(w_type)) return ez_llm_x8_avx512(w_type);
    if (ez_llm_cpu_has_avxvnni() && ez_llm_x8_avx2_vnni(w_type)) return ez_llm_x8_avx2_vnni(w_type);
    return ez_llm_x8_avx2(w_type);
}
