/* Scalar reference kernels: the definition every fast variant is checked
 * against.
 *
 * Dequantization reproduces gguf-py's gguf.quants.dequantize bit for bit:
 * numpy works in float32 with one rounding per operation, and so does the
 * code below, in numpy's order ((d * scale) * q - dmin * min). Every product
 * here is exact in float32 (a float16 scale has 11 significant bits, a
 * sub-block scale at most 7, a quant at most 6: 24 in all), so only the
 * K-quant subtraction rounds, and a compiler contracting a*b-c into an FMA
 * cannot change a result.
 *
 * Activation quantization follows ggml's reference quantizers
 * (quantize_row_q8_0_ref, quantize_row_q8_K_ref). Dots keep the integer
 * products of a block in integers, as ggml does, and apply the float scales
 * once per block. */
#include <math.h>
#include <string.h>

#include "quant_kernels.h"
#include "quant_tables.h"

void ez_dequant_f32_ref(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void dequant_f16_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *p = (const uint8_t *)src;
    int64_t i;
    for (i = 0; i < n; i++) dst[i] = ez_half_to_float(ez_load_u16(p + 2 * i));
}

static void dequant_bf16_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *p = (const uint8_t *)src;
    int64_t i;
    for (i = 0; i < n; i++) dst[i] = ez_bf16_to_f32(ez_load_u16(p + 2 * i));
}

/* Q4_0: element j < 16 is the low nibble of qs[j], element 16 + j its high
 * nibble; value d * (q - 8). */
static void dequant_q4_0_ref(const void *src, float *dst, int64_t n) {
    const ez_block_q4_0 *b = (const ez_block_q4_0 *)src;
    int64_t i, nb = n / EZ_QK;
    int j;
    for (i = 0; i < nb; i++, dst += EZ_QK) {
        const float d = ez_half_to_float(b[i].d);
        for (j = 0; j < EZ_QK / 2; j++) {
            dst[j] = d * (float)((b[i].qs[j] & 15) - 8);
            dst[j + 16] = d * (float)((b[i].qs[j] >> 4) - 8);
        }
    }
}

/* Q5_0: as Q4_0 plus a fifth bit, bit j of the little-endian qh word for
 * element j; value d * (q - 16). */
static void dequant_q5_0_ref(const void *src, float *dst, int64_t n) {
    const ez_block_q5_0 *b = (const ez_block_q5_0 *)src;
    int64_t i, nb = n / EZ_QK;
    int j;
    for (i = 0; i < nb; i++, dst += EZ_QK) {
        const float d = ez_half_to_float(b[i].d);
        uint32_t qh;
        memcpy(&qh, b[i].qh, sizeof qh);
        for (j = 0; j < EZ_QK / 2; j++) {
            const int q0 = (int)((b[i].qs[j] & 15) | (((qh >> j) & 1) << 4));
            const int q1 = (int)((b[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
            dst[j] = d * (float)(q0 - 16);
            dst[j + 16] = d * (float)(q1 - 16);
        }
    }
}

static void dequant_q8_0_ref(const void *src, float *dst, int64_t n) {
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)src;
    int64_t i, nb = n / EZ_QK;
    int j;
    for (i = 0; i < nb; i++, dst += EZ_QK) {
        const float d = ez_half_to_float(b[i].d);
        for (j = 0; j < EZ_QK; j++) dst[j] = d * (float)b[i].qs[j];
    }
}

/* Q4_K: eight sub-blocks of 32; qs byte 32*k + l holds element l of
 * sub-block 2k (low nibble) and of sub-block 2k+1 (high nibble). Value
 * (d * scale) * q - (dmin * min), each product rounded to float. */
static void dequant_q4_k_ref(const void *src, float *dst, int64_t n) {
    const ez_block_q4_k *b = (const ez_block_q4_k *)src;
    int64_t i, nb = n / EZ_QK_K;
    int k, l;
    for (i = 0; i < nb; i++) {
        const float d = ez_half_to_float(b[i].d);
        const float dmin = ez_half_to_float(b[i].dmin);
        uint8_t sc[8], mn[8];
        ez_unpack_q4k_scales(b[i].scales, sc, mn);
        for (k = 0; k < 8; k++, dst += 32) {
            const float dl = d * (float)sc[k];
            const float ml = dmin * (float)mn[k];
            const uint8_t *q = b[i].qs + 32 * (k / 2);
            const int shift = 4 * (k % 2);
            for (l = 0; l < 32; l++) {
                const float t = dl * (float)((q[l] >> shift) & 15);
                dst[l] = t - ml;
            }
        }
    }
}

/* Q5_K: Q4_K's layout plus bit k of qh[l] as the fifth bit of element l of
 * sub-block k. */
static void dequant_q5_k_ref(const void *src, float *dst, int64_t n) {
    const ez_block_q5_k *b = (const ez_block_q5_k *)src;
    int64_t i, nb = n / EZ_QK_K;
    int k, l;
    for (i = 0; i < nb; i++) {
        const float d = ez_half_to_float(b[i].d);
        const float dmin = ez_half_to_float(b[i].dmin);
        uint8_t sc[8], mn[8];
        ez_unpack_q4k_scales(b[i].scales, sc, mn);
        for (k = 0; k < 8; k++, dst += 32) {
            const float dl = d * (float)sc[k];
            const float ml = dmin * (float)mn[k];
            const uint8_t *q = b[i].qs + 32 * (k / 2);
            const int shift = 4 * (k % 2);
            for (l = 0; l < 32; l++) {
                const int v = ((q[l] >> shift) & 15) | (((b[i].qh[l] >> k) & 1) << 4);
                const float t = dl * (float)v;
                dst[l] = t - ml;
            }
        }
    }
}

/* Q6_K: two halves of 128. In half h, byte l < 32 of ql holds the low 4
 * bits of elements l (low nibble) and 64 + l (high nibble), byte 32 + l
 * those of 32 + l and 96 + l; byte l of qh holds the high 2 bits of elements
 * l, 32 + l, 64 + l, 96 + l (bits 0-1, 2-3, 4-5, 6-7). Sixteen sub-blocks of
 * 16 have int8 scales. Value (d * scale) * (q - 32). */
static void q6_k_half_quants(const uint8_t *ql, const uint8_t *qh, int l, int q[4]) {
    q[0] = (int)((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32;
    q[1] = (int)((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
    q[2] = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
    q[3] = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
}

static void dequant_q6_k_ref(const void *src, float *dst, int64_t n) {
    const ez_block_q6_k *b = (const ez_block_q6_k *)src;
    int64_t i, nb = n / EZ_QK_K;
    int h, l, k;
    for (i = 0; i < nb; i++) {
        const float d = ez_half_to_float(b[i].d);
        for (h = 0; h < 2; h++, dst += 128) {
            float dl[8];
            for (k = 0; k < 8; k++) dl[k] = d * (float)b[i].scales[8 * h + k];
            for (l = 0; l < 32; l++) {
                int q[4];
                q6_k_half_quants(b[i].ql + 64 * h, b[i].qh + 32 * h, l, q);
                for (k = 0; k < 4; k++) dst[32 * k + l] = dl[2 * k + l / 16] * (float)q[k];
            }
        }
    }
}

/* Q4_1: Q4_0's layout with a float16 min; value d * q + m (gguf-py's order;
 * d * q is exact, so a contracted FMA rounds the same). */
void ez_dequant_q4_1_ref(const void *src, float *dst, int64_t n) {
    const ez_block_q4_1 *b = (const ez_block_q4_1 *)src;
    int64_t i, nb = n / EZ_QK;
    int j;
    for (i = 0; i < nb; i++, dst += EZ_QK) {
        const float d = ez_half_to_float(b[i].d), m = ez_half_to_float(b[i].m);
        for (j = 0; j < EZ_QK / 2; j++) {
            dst[j] = d * (float)(b[i].qs[j] & 15) + m;
            dst[j + 16] = d * (float)(b[i].qs[j] >> 4) + m;
        }
    }
}

/* Q5_1: Q5_0's bits with a float16 min; value d * q + m. */
void ez_dequant_q5_1_ref(const void *src, float *dst, int64_t n) {
    const ez_block_q5_1 *b = (const ez_block_q5_1 *)src;
    int64_t i, nb = n / EZ_QK;
    int j;
    for (i = 0; i < nb; i++, dst += EZ_QK) {
        const float d = ez_half_to_float(b[i].d), m = ez_half_to_float(b[i].m);
        uint32_t qh;
        memcpy(&qh, b[i].qh, sizeof qh);
        for (j = 0; j < EZ_QK / 2; j++) {
            const int q0 = (int)((b[i].qs[j] & 15) | (((qh >> j) & 1) << 4));
            const int q1 = (int)((b[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
            dst[j] = d * (float)q0 + m;
            dst[j + 16] = d * (float)q1 + m;
        }
    }
}

/* IQ4_NL: Q4_0's nibble order; value d * kvalue[q]. */
void ez_dequant_iq4_nl_ref(const void *src, float *dst, int64_t n) {
    const ez_block_iq4_nl *b = (const ez_block_iq4_nl *)src;
    int64_t i, nb = n / EZ_QK;
    int j;
    for (i = 0; i < nb; i++, dst += EZ_QK) {
        const float d = ez_half_to_float(b[i].d);
        for (j = 0; j < EZ_QK / 2; j++) {
            dst[j] = d * (float)ez_kvalues_iq4nl[b[i].qs[j] & 15];
            dst[j + 16] = d * (float)ez_kvalues_iq4nl[b[i].qs[j] >> 4];
        }
    }
}

float ez_e8m0_to_float_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* MXFP4: Q4_0's nibble order; value 2^(e-128) * kvalue[q] (the doubled
 * E2M1 values against the halved E8M0 scale, as ggml and gguf-py). */
void ez_dequant_mxfp4_ref(const void *src, float *dst, int64_t n) {
    const ez_block_mxfp4 *b = (const ez_block_mxfp4 *)src;
    int64_t i, nb = n / EZ_QK;
    int j;
    for (i = 0; i < nb; i++, dst += EZ_QK) {
        const float d = ez_e8m0_to_float_half(b[i].e);
        for (j = 0; j < EZ_QK / 2; j++) {
            dst[j] = d * (float)ez_kvalues_mxfp4[b[i].qs[j] & 15];
            dst[j + 16] = d * (float)ez_kvalues_mxfp4[b[i].qs[j] >> 4];
        }
    }
}

/* Q2_K: element 128h + 32s + l is bits 2s..2s+1 of qs[32h + l]; sixteen
 * sub-blocks of 16, each with a 4-bit scale and a 4-bit min. Value
 * (d * scale) * q - (dmin * min). */
void ez_dequant_q2_k_ref(const void *src, float *dst, int64_t n) {
    const ez_block_q2_k *b = (const ez_block_q2_k *)src;
    int64_t i, nb = n / EZ_QK_K;
    int e;
    for (i = 0; i < nb; i++, dst += EZ_QK_K) {
        const float d = ez_half_to_float(b[i].d), dmin = ez_half_to_float(b[i].dmin);
        for (e = 0; e < EZ_QK_K; e++) {
            const int q = (b[i].qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
            const uint8_t sc = b[i].scales[e / 16];
            const float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);
            const float t = dl * (float)q;
            dst[e] = t - ml;
        }
    }
}

/* Bytes 0-7 hold the low 4 bits of Q3_K scales 0-7 (low nibbles) and 8-15
 * (high nibbles), bits 2j..2j+1 of byte 8 + i%4 the high 2 bits of scale i
 * with j = i / 4. */
void ez_unpack_q3k_scales(const uint8_t s[12], int sc[16]) {
    int i;
    for (i = 0; i < 16; i++) {
        const int lo = (s[i % 8] >> (4 * (i / 8))) & 15;
        const int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        sc[i] = (lo | (hi << 4)) - 32;
    }
}

/* Q3_K quant of element e: Q2_K's 2-bit layout, minus 4 unless bit e / 32
 * of hmask[e % 32] is set. */
static inline int q3_k_quant(const ez_block_q3_k *b, int e) {
    const int lo = (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
    return lo - ((b->hmask[e % 32] >> (e / 32)) & 1 ? 0 : 4);
}

void ez_dequant_q3_k_ref(const void *src, float *dst, int64_t n) {
    const ez_block_q3_k *b = (const ez_block_q3_k *)src;
    int64_t i, nb = n / EZ_QK_K;
    int e;
    for (i = 0; i < nb; i++, dst += EZ_QK_K) {
        const float d = ez_half_to_float(b[i].d);
        int sc[16];
        ez_unpack_q3k_scales(b[i].scales, sc);
        for (e = 0; e < EZ_QK_K; e++) dst[e] = (d * (float)sc[e / 16]) * (float)q3_k_quant(&b[i], e);
    }
}

/* IQ4_XS: eight sub-blocks of 32 with 6-bit scales (offset 32), low 4 bits
 * in scales_l, high 2 in scales_h; sub-block k's codes are qs[16k..16k+15],
 * Q4_0's nibble order. Value (d * scale) * kvalue[q]. */
static inline int iq4_xs_scale(const ez_block_iq4_xs *b, int k) {
    const int lo = (b->scales_l[k / 2] >> (4 * (k % 2))) & 15;
    const int hi = (ez_load_u16(&b->scales_h) >> (2 * k)) & 3;
    return (lo | (hi << 4)) - 32;
}

void ez_dequant_iq4_xs_ref(const void *src, float *dst, int64_t n) {
    const ez_block_iq4_xs *b = (const ez_block_iq4_xs *)src;
    int64_t i, nb = n / EZ_QK_K;
    int k, j;
    for (i = 0; i < nb; i++) {
        const float d = ez_half_to_float(b[i].d);
        for (k = 0; k < 8; k++, dst += 32) {
            const float dl = d * (float)iq4_xs_scale(&b[i], k);
            const uint8_t *q = b[i].qs + 16 * k;
            for (j = 0; j < 16; j++) {
                dst[j] = dl * (float)ez_kvalues_iq4nl[q[j] & 15];
                dst[j + 16] = dl * (float)ez_kvalues_iq4nl[q[j] >> 4];
            }
        }
    }
}

/* TQ1_0 trit of element e (0, 1, 2 for -1, 0, +1): elements 0-159 are
 * digit e / 32 of qs[e % 32], 160-239 digit (e - 160) / 16 of qs[32 + e % 16],
 * 240-255 digit (e - 240) / 4 of qh[e % 4]. A byte holds its base-3 digits
 * as a fraction of 243 scaled to 256: multiplying by 3^k (mod 256) brings
 * digit k to the top, and (q * 3) >> 8 reads it. */
static inline int tq1_0_trit(const ez_block_tq1_0 *b, int e) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    uint8_t q;
    if (e < 160) q = (uint8_t)(b->qs[e % 32] * pow3[e / 32]);
    else if (e < 240) q = (uint8_t)(b->qs[32 + (e - 160) % 16] * pow3[(e - 160) / 16]);
    else q = (uint8_t)(b->qh[(e - 240) % 4] * pow3[(e - 240) / 4]);
    return ((int)q * 3) >> 8;
}

void ez_dequant_tq1_0_ref(const void *src, float *dst, int64_t n) {
    const ez_block_tq1_0 *b = (const ez_block_tq1_0 *)src;
    int64_t i, nb = n / EZ_QK_K;
    int e;
    for (i = 0; i < nb; i++, dst += EZ_QK_K) {
        const float d = ez_half_to_float(b[i].d);
        for (e = 0; e < EZ_QK_K; e++) dst[e] = d * (float)(tq1_0_trit(&b[i], e) - 1);
    }
}

/* TQ2_0: Q2_K's 2-bit layout; value d * (q - 1). */
static inline int tq2_0_code(const ez_block_tq2_0 *b, int e) {
    return (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
}

void ez_dequant_tq2_0_ref(const void *src, float *dst, int64_t n) {
    const ez_block_tq2_0 *b = (const ez_block_tq2_0 *)src;
    int64_t i, nb = n / EZ_QK_K;
    int e;
    for (i = 0; i < nb; i++, dst += EZ_QK_K) {
        const float d = ez_half_to_float(b[i].d);
        for (e = 0; e < EZ_QK_K; e++) dst[e] = d * (float)(tq2_0_code(&b[i], e) - 1);
    }
}

void ez_quant_q8_0_ref(const float *src, void *dst, int64_t n) {
    ez_block_q8_0 *y = (ez_block_q8_0 *)dst;
    int64_t i, nb = n / EZ_QK;
    int j;
    for (i = 0; i < nb; i++, src += EZ_QK) {
        float amax = 0.0f, d, id;
        for (j = 0; j < EZ_QK; j++) amax = EZ_MAX(amax, fabsf(src[j]));
        d = amax / 127.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = ez_f32_to_f16(d);
        /* roundf: half away from zero, as ggml and gguf-py's np_roundf do. */
        for (j = 0; j < EZ_QK; j++) y[i].qs[j] = (int8_t)roundf(src[j] * id);
    }
}

/* Q8_1: Q8_0's codes plus s = d * sum(codes), both rounded to float16 as
 * ggml's quantize_row_q8_1_ref stores them. */
void ez_quant_q8_1_ref(const float *src, void *dst, int64_t n) {
    ez_block_q8_1 *y = (ez_block_q8_1 *)dst;
    int64_t i, nb = n / EZ_QK;
    int j;
    for (i = 0; i < nb; i++, src += EZ_QK) {
        float amax = 0.0f, d, id;
        int sum = 0;
        for (j = 0; j < EZ_QK; j++) amax = EZ_MAX(amax, fabsf(src[j]));
        d = amax / 127.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        for (j = 0; j < EZ_QK; j++) {
            y[i].qs[j] = (int8_t)roundf(src[j] * id);
            sum += y[i].qs[j];
        }
        y[i].d = ez_half_to_float(ez_f32_to_f16(d));
        y[i].s = ez_half_to_float(ez_f32_to_f16((float)sum * d));
    }
}

/* Round to nearest, ties to even, by adding 1.5 * 2^23 so the integer lands
 * in the low mantissa bits (ggml's nearest_int; |v| <= 2^22). */
static int nearest_int(float v) {
    const float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* Q8_K: scale from the signed value of largest magnitude (the first one on a
 * tie), iscale = -127 / max, so quants stay within [-127, 127]; d = 1 /
 * iscale; bsums hold the sums of each 16 quants for the K-quant min terms. */
void ez_quant_q8_k_ref(const float *src, void *dst, int64_t n) {
    ez_block_q8_k *y = (ez_block_q8_k *)dst;
    int64_t i, nb = n / EZ_QK_K;
    int j, l;
    for (i = 0; i < nb; i++, src += EZ_QK_K) {
        float max = 0.0f, amax = 0.0f, iscale;
        for (j = 0; j < EZ_QK_K; j++) {
            const float ax = fabsf(src[j]);
            if (ax > amax) {
                amax = ax;
                max = src[j];
            }
        }
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        iscale = -127.0f / max;
        for (j = 0; j < EZ_QK_K; j++) {
            const int v = nearest_int(iscale * src[j]);
            y[i].qs[j] = (int8_t)EZ_MIN(127, v);
        }
        for (j = 0; j < EZ_QK_K / 16; j++) {
            int sum = 0;
            for (l = 0; l < 16; l++) sum += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1.0f / iscale;
    }
}

/* Float dots accumulate each float product in double, like ggml's
 * ggml_vec_dot_f32 with ggml_float. */
static float dot_f32_ref(int64_t n, const void *w, const void *x) {
    const float *a = (const float *)w, *b = (const float *)x;
    double sum = 0.0;
    int64_t i;
    for (i = 0; i < n; i++) {
        const float p = a[i] * b[i];
        sum += (double)p;
    }
    return (float)sum;
}

static float dot_f16_ref(int64_t n, const void *w, const void *x) {
    const uint8_t *a = (const uint8_t *)w;
    const float *b = (const float *)x;
    double sum = 0.0;
    int64_t i;
    for (i = 0; i < n; i++) {
        const float p = ez_half_to_float(ez_load_u16(a + 2 * i)) * b[i];
        sum += (double)p;
    }
    return (float)sum;
}

static float dot_bf16_ref(int64_t n, const void *w, const void *x) {
    const uint8_t *a = (const uint8_t *)w;
    const float *b = (const float *)x;
    double sum = 0.0;
    int64_t i;
    for (i = 0; i < n; i++) {
        const float p = ez_bf16_to_f32(ez_load_u16(a + 2 * i)) * b[i];
        sum += (double)p;
    }
    return (float)sum;
}

static float dot_q4_0_q8_0_ref(int64_t n, const void *w, const void *x) {
    const ez_block_q4_0 *a = (const ez_block_q4_0 *)w;
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)x;
    int64_t i, nb = n / EZ_QK;
    float sum = 0.0f;
    int j;
    for (i = 0; i < nb; i++) {
        int isum = 0;
        float d;
        for (j = 0; j < EZ_QK / 2; j++) {
            isum += ((a[i].qs[j] & 15) - 8) * b[i].qs[j];
            isum += ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + 16];
        }
        d = ez_half_to_float(a[i].d) * ez_half_to_float(b[i].d);
        d *= (float)isum;
        sum += d;
    }
    return sum;
}

static float dot_q5_0_q8_0_ref(int64_t n, const void *w, const void *x) {
    const ez_block_q5_0 *a = (const ez_block_q5_0 *)w;
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)x;
    int64_t i, nb = n / EZ_QK;
    float sum = 0.0f;
    int j;
    for (i = 0; i < nb; i++) {
        int isum = 0;
        uint32_t qh;
        float d;
        memcpy(&qh, a[i].qh, sizeof qh);
        for (j = 0; j < EZ_QK / 2; j++) {
            const int q0 = (int)((a[i].qs[j] & 15) | (((qh >> j) & 1) << 4)) - 16;
            const int q1 = (int)((a[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
            isum += q0 * b[i].qs[j] + q1 * b[i].qs[j + 16];
        }
        d = ez_half_to_float(a[i].d) * ez_half_to_float(b[i].d);
        d *= (float)isum;
        sum += d;
    }
    return sum;
}

static float dot_q8_0_q8_0_ref(int64_t n, const void *w, const void *x) {
    const ez_block_q8_0 *a = (const ez_block_q8_0 *)w;
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)x;
    int64_t i, nb = n / EZ_QK;
    float sum = 0.0f;
    int j;
    for (i = 0; i < nb; i++) {
        int isum = 0;
        float d;
        for (j = 0; j < EZ_QK; j++) isum += a[i].qs[j] * b[i].qs[j];
        d = ez_half_to_float(a[i].d) * ez_half_to_float(b[i].d);
        d *= (float)isum;
        sum += d;
    }
    return sum;
}

/* Sum over a super-block of (d * scale) * q * y - (dmin * min) * y, as
 * d * sum(scale * q * y) - dmin * sum(min * bsum): the min term needs only
 * the activation's 16-element sums. */
static float dot_q4_k_q8_k_ref(int64_t n, const void *w, const void *x) {
    const ez_block_q4_k *a = (const ez_block_q4_k *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int k, l;
    for (i = 0; i < nb; i++) {
        uint8_t sc[8], mn[8];
        int isum = 0, msum = 0;
        float d, dmin;
        ez_unpack_q4k_scales(a[i].scales, sc, mn);
        for (k = 0; k < 4; k++) {
            const uint8_t *q = a[i].qs + 32 * k;
            const int8_t *y = b[i].qs + 64 * k;
            int s0 = 0, s1 = 0;
            for (l = 0; l < 32; l++) {
                s0 += (q[l] & 15) * y[l];
                s1 += (q[l] >> 4) * y[l + 32];
            }
            isum += sc[2 * k] * s0 + sc[2 * k + 1] * s1;
        }
        for (k = 0; k < 8; k++) msum += mn[k] * (b[i].bsums[2 * k] + b[i].bsums[2 * k + 1]);
        d = ez_half_to_float(a[i].d) * b[i].d;
        dmin = ez_half_to_float(a[i].dmin) * b[i].d;
        d *= (float)isum;
        dmin *= (float)msum;
        sum += d - dmin;
    }
    return sum;
}

static float dot_q5_k_q8_k_ref(int64_t n, const void *w, const void *x) {
    const ez_block_q5_k *a = (const ez_block_q5_k *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int k, l;
    for (i = 0; i < nb; i++) {
        uint8_t sc[8], mn[8];
        int isum = 0, msum = 0;
        float d, dmin;
        ez_unpack_q4k_scales(a[i].scales, sc, mn);
        for (k = 0; k < 4; k++) {
            const uint8_t *q = a[i].qs + 32 * k;
            const int8_t *y = b[i].qs + 64 * k;
            int s0 = 0, s1 = 0;
            for (l = 0; l < 32; l++) {
                const int q0 = (q[l] & 15) | (((a[i].qh[l] >> (2 * k)) & 1) << 4);
                const int q1 = (q[l] >> 4) | (((a[i].qh[l] >> (2 * k + 1)) & 1) << 4);
                s0 += q0 * y[l];
                s1 += q1 * y[l + 32];
            }
            isum += sc[2 * k] * s0 + sc[2 * k + 1] * s1;
        }
        for (k = 0; k < 8; k++) msum += mn[k] * (b[i].bsums[2 * k] + b[i].bsums[2 * k + 1]);
        d = ez_half_to_float(a[i].d) * b[i].d;
        dmin = ez_half_to_float(a[i].dmin) * b[i].d;
        d *= (float)isum;
        dmin *= (float)msum;
        sum += d - dmin;
    }
    return sum;
}

static float dot_q6_k_q8_k_ref(int64_t n, const void *w, const void *x) {
    const ez_block_q6_k *a = (const ez_block_q6_k *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int h, l, k;
    for (i = 0; i < nb; i++) {
        int sub[16] = {0};
        int isum = 0;
        float d;
        for (h = 0; h < 2; h++) {
            const int8_t *y = b[i].qs + 128 * h;
            for (l = 0; l < 32; l++) {
                int q[4];
                q6_k_half_quants(a[i].ql + 64 * h, a[i].qh + 32 * h, l, q);
                for (k = 0; k < 4; k++) sub[8 * h + 2 * k + l / 16] += q[k] * y[32 * k + l];
            }
        }
        for (k = 0; k < 16; k++) isum += a[i].scales[k] * sub[k];
        d = ez_half_to_float(a[i].d) * b[i].d;
        d *= (float)isum;
        sum += d;
    }
    return sum;
}

/* sum (d q + m) y = d dy sum(q c) + m * s, s = dy * sum(c) from the block. */
static float dot_q4_1_q8_1_ref(int64_t n, const void *w, const void *x) {
    const ez_block_q4_1 *a = (const ez_block_q4_1 *)w;
    const ez_block_q8_1 *b = (const ez_block_q8_1 *)x;
    int64_t i, nb = n / EZ_QK;
    float sum = 0.0f;
    int j;
    for (i = 0; i < nb; i++) {
        int isum = 0;
        for (j = 0; j < EZ_QK / 2; j++) isum += (a[i].qs[j] & 15) * b[i].qs[j] + (a[i].qs[j] >> 4) * b[i].qs[j + 16];
        sum += ez_half_to_float(a[i].d) * b[i].d * (float)isum + ez_half_to_float(a[i].m) * b[i].s;
    }
    return sum;
}

static float dot_q5_1_q8_1_ref(int64_t n, const void *w, const void *x) {
    const ez_block_q5_1 *a = (const ez_block_q5_1 *)w;
    const ez_block_q8_1 *b = (const ez_block_q8_1 *)x;
    int64_t i, nb = n / EZ_QK;
    float sum = 0.0f;
    int j;
    for (i = 0; i < nb; i++) {
        int isum = 0;
        uint32_t qh;
        memcpy(&qh, a[i].qh, sizeof qh);
        for (j = 0; j < EZ_QK / 2; j++) {
            const int q0 = (int)((a[i].qs[j] & 15) | (((qh >> j) & 1) << 4));
            const int q1 = (int)((a[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
            isum += q0 * b[i].qs[j] + q1 * b[i].qs[j + 16];
        }
        sum += ez_half_to_float(a[i].d) * b[i].d * (float)isum + ez_half_to_float(a[i].m) * b[i].s;
    }
    return sum;
}

static float dot_iq4_nl_q8_0_ref(int64_t n, const void *w, const void *x) {
    const ez_block_iq4_nl *a = (const ez_block_iq4_nl *)w;
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)x;
    int64_t i, nb = n / EZ_QK;
    float sum = 0.0f;
    int j;
    for (i = 0; i < nb; i++) {
        int isum = 0;
        float d;
        for (j = 0; j < EZ_QK / 2; j++)
            isum += ez_kvalues_iq4nl[a[i].qs[j] & 15] * b[i].qs[j] + ez_kvalues_iq4nl[a[i].qs[j] >> 4] * b[i].qs[j + 16];
        d = ez_half_to_float(a[i].d) * ez_half_to_float(b[i].d);
        d *= (float)isum;
        sum += d;
    }
    return sum;
}

static float dot_mxfp4_q8_0_ref(int64_t n, const void *w, const void *x) {
    const ez_block_mxfp4 *a = (const ez_block_mxfp4 *)w;
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)x;
    int64_t i, nb = n / EZ_QK;
    float sum = 0.0f;
    int j;
    for (i = 0; i < nb; i++) {
        int isum = 0;
        float d;
        for (j = 0; j < EZ_QK / 2; j++)
            isum += ez_kvalues_mxfp4[a[i].qs[j] & 15] * b[i].qs[j] + ez_kvalues_mxfp4[a[i].qs[j] >> 4] * b[i].qs[j + 16];
        d = ez_e8m0_to_float_half(a[i].e) * ez_half_to_float(b[i].d);
        d *= (float)isum;
        sum += d;
    }
    return sum;
}

/* d * sum_j scale_j sum(q y) - dmin * sum_j min_j bsum_j over sub-blocks of 16. */
static float dot_q2_k_q8_k_ref(int64_t n, const void *w, const void *x) {
    const ez_block_q2_k *a = (const ez_block_q2_k *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int j, l;
    for (i = 0; i < nb; i++) {
        int isum = 0, msum = 0;
        float d, dmin;
        for (j = 0; j < 16; j++) {
            int s = 0;
            for (l = 16 * j; l < 16 * j + 16; l++)
                s += ((a[i].qs[32 * (l / 128) + l % 32] >> (2 * ((l / 32) % 4))) & 3) * b[i].qs[l];
            isum += (a[i].scales[j] & 15) * s;
            msum += (a[i].scales[j] >> 4) * b[i].bsums[j];
        }
        d = ez_half_to_float(a[i].d) * b[i].d;
        dmin = ez_half_to_float(a[i].dmin) * b[i].d;
        d *= (float)isum;
        dmin *= (float)msum;
        sum += d - dmin;
    }
    return sum;
}

static float dot_q3_k_q8_k_ref(int64_t n, const void *w, const void *x) {
    const ez_block_q3_k *a = (const ez_block_q3_k *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int j, l;
    for (i = 0; i < nb; i++) {
        int sc[16], isum = 0;
        float d;
        ez_unpack_q3k_scales(a[i].scales, sc);
        for (j = 0; j < 16; j++) {
            int s = 0;
            for (l = 16 * j; l < 16 * j + 16; l++) s += q3_k_quant(&a[i], l) * b[i].qs[l];
            isum += sc[j] * s;
        }
        d = ez_half_to_float(a[i].d) * b[i].d;
        d *= (float)isum;
        sum += d;
    }
    return sum;
}

static float dot_iq4_xs_q8_k_ref(int64_t n, const void *w, const void *x) {
    const ez_block_iq4_xs *a = (const ez_block_iq4_xs *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int k, j;
    for (i = 0; i < nb; i++) {
        int isum = 0;
        float d;
        for (k = 0; k < 8; k++) {
            const uint8_t *q = a[i].qs + 16 * k;
            const int8_t *y = b[i].qs + 32 * k;
            int s = 0;
            for (j = 0; j < 16; j++) s += ez_kvalues_iq4nl[q[j] & 15] * y[j] + ez_kvalues_iq4nl[q[j] >> 4] * y[j + 16];
            isum += iq4_xs_scale(&a[i], k) * s;
        }
        d = ez_half_to_float(a[i].d) * b[i].d;
        d *= (float)isum;
        sum += d;
    }
    return sum;
}

/* Ternary: d * dy * sum((t - 1) y) = d * dy * (sum(t y) - sum(y)). */
static float dot_tq1_0_q8_k_ref(int64_t n, const void *w, const void *x) {
    const ez_block_tq1_0 *a = (const ez_block_tq1_0 *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int e;
    for (i = 0; i < nb; i++) {
        int isum = 0;
        float d;
        for (e = 0; e < EZ_QK_K; e++) isum += (tq1_0_trit(&a[i], e) - 1) * b[i].qs[e];
        d = ez_half_to_float(a[i].d) * b[i].d;
        d *= (float)isum;
        sum += d;
    }
    return sum;
}

static float dot_tq2_0_q8_k_ref(int64_t n, const void *w, const void *x) {
    const ez_block_tq2_0 *a = (const ez_block_tq2_0 *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int e;
    for (i = 0; i < nb; i++) {
        int isum = 0;
        float d;
        for (e = 0; e < EZ_QK_K; e++) isum += (tq2_0_code(&a[i], e) - 1) * b[i].qs[e];
        d = ez_half_to_float(a[i].d) * b[i].d;
        d *= (float)isum;
        sum += d;
    }
    return sum;
}

/* ---- grid i-quants ------------------------------------------------------------
 *
 * Each 32-element sub-block ib decodes to integers v[32] (grid magnitude
 * times sign, or for IQ1 8 * grid +- 1 with the delta folded in) and two
 * integer scales ls[2] (its halves of 16; equal except for IQ2_XS / IQ2_S /
 * IQ1_M); the values are d * ls * v * unit with unit 1/8 (IQ2, IQ1), 1/4
 * (IQ3_XXS) or 1 (IQ3_S). Every product is exact in float32 (d: 11
 * significant bits, ls: 5, v: 6, unit a power of two), so the order gguf-py
 * multiplies in cannot change a result, and dots keep ls * v * y in
 * integers as ggml does. */

static float iq_unit(uint32_t type) {
    return type == EZ_TYPE_IQ3_XXS ? 0.25f : type == EZ_TYPE_IQ3_S ? 1.0f : 0.125f;
}

static inline uint32_t load_u32(const void *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The 8 signed values of an IQ2 / IQ3_XXS grid row against a sign byte. */
static inline void signed_row(const uint8_t *grid, int n, uint8_t signs, int8_t *v) {
    int j;
    for (j = 0; j < n; j++) v[j] = (int8_t)(signs >> j & 1 ? -grid[j] : grid[j]);
}

/* The float16 super-block scale of a block of `type`. */
static uint16_t iq_d(uint32_t type, const uint8_t *blk) {
    if (type == EZ_TYPE_IQ1_M) return ez_iq1_m_d((const ez_block_iq1_m *)blk);
    return ez_load_u16(blk);
}

static void iq_sub32(uint32_t type, const uint8_t *blk, int ib, int8_t v[32], int ls[2]) {
    int l, j;
    switch (type) {
    case EZ_TYPE_IQ2_XXS: {
        const ez_block_iq2_xxs *b = (const ez_block_iq2_xxs *)blk;
        const uint32_t a0 = load_u32(&b->qs[4 * ib]), a1 = load_u32(&b->qs[4 * ib + 2]);
        for (l = 0; l < 4; l++)
            signed_row(ez_iq2xxs_grid[(a0 >> (8 * l)) & 255], 8, ez_ksigns_iq2xs[(a1 >> (7 * l)) & 127], v + 8 * l);
        ls[0] = ls[1] = 2 * (int)(a1 >> 28) + 1;
        break;
    }
    case EZ_TYPE_IQ2_XS: {
        const ez_block_iq2_xs *b = (const ez_block_iq2_xs *)blk;
        for (l = 0; l < 4; l++) {
            const uint16_t q = ez_load_u16(&b->qs[4 * ib + l]);
            signed_row(ez_iq2xs_grid[q & 511], 8, ez_ksigns_iq2xs[q >> 9], v + 8 * l);
        }
        ls[0] = 2 * (b->scales[ib] & 15) + 1;
        ls[1] = 2 * (b->scales[ib] >> 4) + 1;
        break;
    }
    case EZ_TYPE_IQ2_S: {
        const ez_block_iq2_s *b = (const ez_block_iq2_s *)blk;
        for (l = 0; l < 4; l++) {
            const int code = b->qs[4 * ib + l] | (((b->qh[ib] >> (2 * l)) & 3) << 8);
            signed_row(ez_iq2s_grid[code], 8, b->qs[32 + 4 * ib + l], v + 8 * l);
        }
        ls[0] = 2 * (b->scales[ib] & 15) + 1;
        ls[1] = 2 * (b->scales[ib] >> 4) + 1;
        break;
    }
    case EZ_TYPE_IQ3_XXS: {
        const ez_block_iq3_xxs *b = (const ez_block_iq3_xxs *)blk;
        const uint32_t aux = load_u32(b->qs + 64 + 4 * ib);
        for (l = 0; l < 4; l++) {
            const uint8_t signs = ez_ksigns_iq2xs[(aux >> (7 * l)) & 127];
            signed_row(ez_iq3xxs_grid[b->qs[8 * ib + 2 * l]], 4, signs, v + 8 * l);
            signed_row(ez_iq3xxs_grid[b->qs[8 * ib + 2 * l + 1]], 4, (uint8_t)(signs >> 4), v + 8 * l + 4);
        }
        ls[0] = ls[1] = 2 * (int)(aux >> 28) + 1;
        break;
    }
    case EZ_TYPE_IQ3_S: {
        const ez_block_iq3_s *b = (const ez_block_iq3_s *)blk;
        for (l = 0; l < 8; l++) {
            const int code = b->qs[8 * ib + l] | (((b->qh[ib] >> l) & 1) << 8);
            signed_row(ez_iq3s_grid[code], 4, (uint8_t)(b->signs[4 * ib + l / 2] >> (4 * (l % 2))), v + 4 * l);
        }
        ls[0] = ls[1] = 2 * ((b->scales[ib / 2] >> (4 * (ib % 2))) & 15) + 1;
        break;
    }
    case EZ_TYPE_IQ1_S: {
        const ez_block_iq1_s *b = (const ez_block_iq1_s *)blk;
        const uint16_t qh = ez_load_u16(&b->qh[ib]);
        const int delta = qh & 0x8000 ? -1 : 1;
        for (l = 0; l < 4; l++) {
            const int8_t *g = ez_iq1s_grid[b->qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
            for (j = 0; j < 8; j++) v[8 * l + j] = (int8_t)(8 * g[j] + delta);
        }
        ls[0] = ls[1] = 2 * ((qh >> 12) & 7) + 1;
        break;
    }
    default: { /* IQ1_M */
        const ez_block_iq1_m *b = (const ez_block_iq1_m *)blk;
        const uint16_t sc = ez_load_u16(b->scales + 2 * (ib / 2));
        for (l = 0; l < 4; l++) {
            const int nib = (b->qh[2 * ib + l / 2] >> (4 * (l % 2))) & 15;
            const int8_t *g = ez_iq1s_grid[b->qs[4 * ib + l] | ((nib & 7) << 8)];
            const int delta = nib & 8 ? -1 : 1;
            for (j = 0; j < 8; j++) v[8 * l + j] = (int8_t)(8 * g[j] + delta);
        }
        ls[0] = 2 * ((sc >> (6 * (ib % 2))) & 7) + 1;
        ls[1] = 2 * ((sc >> (6 * (ib % 2) + 3)) & 7) + 1;
        break;
    }
    }
}

void ez_iq_sub32(uint32_t type, const void *blk, int ib, int8_t v[32], int ls[2]) {
    int j;
    if (type == EZ_TYPE_IQ4_XS) {
        const ez_block_iq4_xs *b = (const ez_block_iq4_xs *)blk;
        const uint8_t *q = b->qs + 16 * ib;
        for (j = 0; j < 16; j++) {
            v[j] = ez_kvalues_iq4nl[q[j] & 15];
            v[j + 16] = ez_kvalues_iq4nl[q[j] >> 4];
        }
        ls[0] = ls[1] = iq4_xs_scale(b, ib);
    } else if (type == EZ_TYPE_TQ1_0) {
        for (j = 0; j < 32; j++) v[j] = (int8_t)(tq1_0_trit((const ez_block_tq1_0 *)blk, 32 * ib + j) - 1);
        ls[0] = ls[1] = 1;
    } else {
        iq_sub32(type, (const uint8_t *)blk, ib, v, ls);
    }
}

float ez_iq_sub32_d(uint32_t type, const void *blk) {
    if (type == EZ_TYPE_TQ1_0) return ez_half_to_float(((const ez_block_tq1_0 *)blk)->d);
    if (type == EZ_TYPE_IQ4_XS) return ez_half_to_float(((const ez_block_iq4_xs *)blk)->d);
    return ez_half_to_float(iq_d(type, (const uint8_t *)blk)) * iq_unit(type);
}

static void dequant_iq_grid(uint32_t type, const void *src, float *dst, int64_t n) {
    const ez_type_traits *tr = ez_type_traits_of(type);
    const uint8_t *p = (const uint8_t *)src;
    const float unit = iq_unit(type);
    int64_t i, nb = n / EZ_QK_K;
    int ib, j;
    for (i = 0; i < nb; i++, p += tr->type_size) {
        const float d = ez_half_to_float(iq_d(type, p));
        for (ib = 0; ib < 8; ib++, dst += 32) {
            int8_t v[32];
            int ls[2];
            iq_sub32(type, p, ib, v, ls);
            for (j = 0; j < 32; j++) dst[j] = d * (float)(ls[j / 16] * v[j]) * unit;
        }
    }
}

static float dot_iq_grid(uint32_t type, int64_t n, const void *w, const void *x) {
    const ez_type_traits *tr = ez_type_traits_of(type);
    const uint8_t *p = (const uint8_t *)w;
    const ez_block_q8_k *b = (const ez_block_q8_k *)x;
    int64_t i, nb = n / EZ_QK_K;
    float sum = 0.0f;
    int ib, j;
    for (i = 0; i < nb; i++, p += tr->type_size) {
        int isum = 0;
        float d;
        for (ib = 0; ib < 8; ib++) {
            int8_t v[32];
            int ls[2], s0 = 0, s1 = 0;
            iq_sub32(type, p, ib, v, ls);
            for (j = 0; j < 16; j++) {
                s0 += v[j] * b[i].qs[32 * ib + j];
                s1 += v[j + 16] * b[i].qs[32 * ib + 16 + j];
            }
            isum += ls[0] * s0 + ls[1] * s1;
        }
        d = ez_half_to_float(iq_d(type, p)) * b[i].d;
        d *= (float)isum;
        sum += d;
    }
    return sum * iq_unit(type);
}

#define EZ_IQ_GRID_KERNELS(lower, TYPE)                                                        \
    void ez_dequant_##lower##_ref(const void *src, float *dst, int64_t n) {                    \
        dequant_iq_grid(TYPE, src, dst, n);                                                    \
    }                                                                                          \
    static float dot_##lower##_q8_k_ref(int64_t n, const void *w, const void *x) {             \
        return dot_iq_grid(TYPE, n, w, x);                                                     \
    }
EZ_IQ_GRID_KERNELS(iq2_xxs, EZ_TYPE_IQ2_XXS)
EZ_IQ_GRID_KERNELS(iq2_xs, EZ_TYPE_IQ2_XS)
EZ_IQ_GRID_KERNELS(iq2_s, EZ_TYPE_IQ2_S)
EZ_IQ_GRID_KERNELS(iq3_xxs, EZ_TYPE_IQ3_XXS)
EZ_IQ_GRID_KERNELS(iq3_s, EZ_TYPE_IQ3_S)
EZ_IQ_GRID_KERNELS(iq1_s, EZ_TYPE_IQ1_S)
EZ_IQ_GRID_KERNELS(iq1_m, EZ_TYPE_IQ1_M)
#undef EZ_IQ_GRID_KERNELS

static const ez_type_kernels g_ref[EZ_TYPE_COUNT] = {
    [EZ_TYPE_F32] = {ez_dequant_f32_ref, NULL, dot_f32_ref},
    [EZ_TYPE_F16] = {dequant_f16_ref, NULL, dot_f16_ref},
    [EZ_TYPE_BF16] = {dequant_bf16_ref, NULL, dot_bf16_ref},
    [EZ_TYPE_Q4_0] = {dequant_q4_0_ref, NULL, dot_q4_0_q8_0_ref},
    [EZ_TYPE_Q5_0] = {dequant_q5_0_ref, NULL, dot_q5_0_q8_0_ref},
    [EZ_TYPE_Q8_0] = {dequant_q8_0_ref, ez_quant_q8_0_ref, dot_q8_0_q8_0_ref},
    [EZ_TYPE_Q4_K] = {dequant_q4_k_ref, NULL, dot_q4_k_q8_k_ref},
    [EZ_TYPE_Q5_K] = {dequant_q5_k_ref, NULL, dot_q5_k_q8_k_ref},
    [EZ_TYPE_Q6_K] = {dequant_q6_k_ref, NULL, dot_q6_k_q8_k_ref},
    [EZ_TYPE_Q8_K] = {NULL, ez_quant_q8_k_ref, NULL},
    [EZ_TYPE_Q4_1] = {ez_dequant_q4_1_ref, NULL, dot_q4_1_q8_1_ref},
    [EZ_TYPE_Q5_1] = {ez_dequant_q5_1_ref, NULL, dot_q5_1_q8_1_ref},
    [EZ_TYPE_Q8_1] = {NULL, ez_quant_q8_1_ref, NULL},
    [EZ_TYPE_IQ4_NL] = {ez_dequant_iq4_nl_ref, NULL, dot_iq4_nl_q8_0_ref},
    [EZ_TYPE_MXFP4] = {ez_dequant_mxfp4_ref, NULL, dot_mxfp4_q8_0_ref},
    [EZ_TYPE_Q2_K] = {ez_dequant_q2_k_ref, NULL, dot_q2_k_q8_k_ref},
    [EZ_TYPE_Q3_K] = {ez_dequant_q3_k_ref, NULL, dot_q3_k_q8_k_ref},
    [EZ_TYPE_IQ4_XS] = {ez_dequant_iq4_xs_ref, NULL, dot_iq4_xs_q8_k_ref},
    [EZ_TYPE_TQ1_0] = {ez_dequant_tq1_0_ref, NULL, dot_tq1_0_q8_k_ref},
    [EZ_TYPE_TQ2_0] = {ez_dequant_tq2_0_ref, NULL, dot_tq2_0_q8_k_ref},
    [EZ_TYPE_IQ2_XXS] = {ez_dequant_iq2_xxs_ref, NULL, dot_iq2_xxs_q8_k_ref},
    [EZ_TYPE_IQ2_XS] = {ez_dequant_iq2_xs_ref, NULL, dot_iq2_xs_q8_k_ref},
    [EZ_TYPE_IQ2_S] = {ez_dequant_iq2_s_ref, NULL, dot_iq2_s_q8_k_ref},
    [EZ_TYPE_IQ3_XXS] = {ez_dequant_iq3_xxs_ref, NULL, dot_iq3_xxs_q8_k_ref},
    [EZ_TYPE_IQ3_S] = {ez_dequant_iq3_s_ref, NULL, dot_iq3_s_q8_k_ref},
    [EZ_TYPE_IQ1_S] = {ez_dequant_iq1_s_ref, NULL, dot_iq1_s_q8_k_ref},
    [EZ_TYPE_IQ1_M] = {ez_dequant_iq1_m_ref, NULL, dot_iq1_m_q8_k_ref},
};

const ez_type_kernels *ez_kernels_ref(uint32_t type) {
    if (!ez_type_traits_of(type)) return NULL;
    return &g_ref[type];
}
