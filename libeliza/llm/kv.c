/* KV cache storage types: names, sizes, the transforms, the writers and the
 * scalar reference kernels (kv.h has the formats). */
#include "kv.h"

#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "core/quant.h"
#include "kv_plain.h"
#include "ops.h"

const float ez_tbq3_levels[8] = {-2.1519f, -1.3439f, -0.7560f, -0.2451f, 0.2451f, 0.7560f, 1.3439f, 2.1519f};
const float ez_tbq4_levels[16] = {-2.7326f, -2.0690f, -1.6181f, -1.2562f, -0.9424f, -0.6568f, -0.3881f, -0.1284f,
                                  0.1284f,  0.3881f,  0.6568f,  0.9424f,  1.2562f,  1.6181f,  2.0690f,  2.7326f};

/* The TBQ sign flip: bit j set negates element j of a block before the
 * transform. Any fixed pattern decorrelates the Hadamard rows from
 * structure in the head dimensions; this one is 16 of each sign. */
#define TBQ_SIGNS 0x9A5C36E1u

const char *ez_kv_type_name(int type) {
    static const char *const names[EZ_KV_COUNT] = {"f32", "f16", "q8_0", "q4_0", "tbq4_0", "tbq3_0"};
    return type >= 0 && type < EZ_KV_COUNT ? names[type] : "?";
}

int ez_kv_block_size(int type) { return type == EZ_KV_F32 || type == EZ_KV_F16 ? 1 : EZ_KV_BLOCK; }

size_t ez_kv_row_bytes(int type, int64_t n) {
    switch (type) {
    case EZ_KV_F32: return (size_t)n * sizeof(float);
    case EZ_KV_F16: return (size_t)n * sizeof(uint16_t);
    case EZ_KV_Q8_0: return (size_t)(n / EZ_KV_BLOCK) * sizeof(ez_block_q8_0);
    case EZ_KV_Q4_0: return (size_t)(n / EZ_KV_BLOCK) * sizeof(ez_block_q4_0);
    case EZ_KV_TBQ4_0: return (size_t)(n / EZ_KV_BLOCK) * sizeof(ez_block_tbq4_0);
    case EZ_KV_TBQ3_0: return (size_t)(n / EZ_KV_BLOCK) * sizeof(ez_block_tbq3_0);
    default: return 0;
    }
}

/* ---- transforms ---------------------------------------------------------------------- */

void ez_kv_hadamard(float *x, int n) {
    const float scale = 1.0f / sqrtf((float)n);
    for (int len = 1; len < n; len <<= 1)
        for (int i = 0; i < n; i += 2 * len)
            for (int j = i; j < i + len; j++) {
                const float a = x[j], b = x[j + len];
                x[j] = a + b;
                x[j + len] = a - b;
            }
    for (int i = 0; i < n; i++) x[i] *= scale;
}

int ez_kv_rotation(int type, int head_dim, int is_v) {
    int n = 64;
    if (type == EZ_KV_TBQ4_0 || type == EZ_KV_TBQ3_0) return EZ_KV_ROT_TBQ;
    if ((type != EZ_KV_Q8_0 && type != EZ_KV_Q4_0) || head_dim % 64 != 0) return 0;
    if (!is_v)
        while (head_dim % (2 * n) == 0) n *= 2;
    return n;
}

static void flip_signs(float *x) {
    for (int j = 0; j < EZ_KV_BLOCK; j++)
        if ((TBQ_SIGNS >> j) & 1u) x[j] = -x[j];
}

void ez_kv_rotate(float *x, int64_t n, int rot) {
    if (rot == EZ_KV_ROT_TBQ) {
        for (int64_t i = 0; i < n; i += EZ_KV_BLOCK) {
            flip_signs(x + i);
            ez_kv_hadamard(x + i, EZ_KV_BLOCK);
        }
    } else if (rot > 1) {
        for (int64_t i = 0; i < n; i += rot) ez_kv_hadamard(x + i, rot);
    }
}

void ez_kv_unrotate(float *x, int64_t n, int rot) {
    if (rot == EZ_KV_ROT_TBQ) {
        for (int64_t i = 0; i < n; i += EZ_KV_BLOCK) {
            ez_kv_hadamard(x + i, EZ_KV_BLOCK);
            flip_signs(x + i);
        }
    } else {
        ez_kv_rotate(x, n, rot);
    }
}

/* ---- key smoothing (kv.h) ------------------------------------------------------------ */

void ez_kv_smooth_fit(ez_kv_smooth *sm, const float *k, const float *q, int32_t n, int n_head) {
    const int hd = sm->head_dim, n_rep = q ? n_head / sm->n_head_kv : 0;
    const int64_t row = (int64_t)sm->n_head_kv * hd;
    const double prior = EZ_KV_SMOOTH_PRIOR;
    for (int g = 0; g < sm->n_head_kv; g++) {
        float *m = sm->mean + (int64_t)g * hd, *sc = sm->scale + (int64_t)g * hd, *b = sm->bias + (int64_t)g * hd;
        double head_sq = 0.0, q_sq = 0.0, norm = 0.0;
        for (int c = 0; c < hd; c++) {
            double sum = 0.0, sq = 0.0;
            for (int32_t t = 0; t < n; t++) {
                const double x = k[t * row + (int64_t)g * hd + c];
                sum += x;
                sq += x * x;
            }
            m[c] = (float)(sum / (n + prior));
            /* the spread about m, for now in sc */
            sc[c] = (float)EZ_MAX(0.0, sq - 2.0 * m[c] * sum + (double)n * m[c] * m[c]);
            head_sq += sq;
        }
        head_sq /= (double)n * hd;
        /* the mean square of the queries that meet this head, over channels, in b for now */
        for (int c = 0; c < hd; c++) {
            double sq = 0.0;
            for (int32_t t = 0; t < n && q; t++)
                for (int r = 0; r < n_rep; r++) {
                    const double x = q[((int64_t)t * n_head + g * n_rep + r) * hd + c];
                    sq += x * x;
                }
            b[c] = (float)sq;
            q_sq += sq;
        }
        q_sq /= (double)EZ_MAX(1, n * n_rep) * hd;
        for (int c = 0; c < hd; c++) {
            const double var = ((double)sc[c] + prior * head_sq) / (n + prior);
            const double qv = q ? ((double)b[c] + prior * q_sq) / ((double)n * n_rep + prior) : 1.0;
            sc[c] = var > 0.0 && qv > 0.0 ? (float)sqrt(sqrt(var / qv)) : 1.0f;
            norm += (double)sc[c] * sc[c];
        }
        norm = sqrt(norm / hd);
        for (int c = 0; c < hd; c++) {
            sc[c] = (float)(sc[c] / norm);
            b[c] = m[c] / sc[c];
        }
        ez_kv_rotate(b, hd, sm->rot);
    }
    sm->ready = 1;
}

void ez_kv_smooth_keys(const ez_kv_smooth *sm, float *k, int32_t n) {
    const int64_t row = (int64_t)sm->n_head_kv * sm->head_dim;
    for (int32_t t = 0; t < n; t++)
        for (int64_t c = 0; c < row; c++) k[t * row + c] = (k[t * row + c] - sm->mean[c]) / sm->scale[c];
}

void ez_kv_smooth_queries(const ez_kv_smooth *sm, float *q, int32_t n, int n_head) {
    const int hd = sm->head_dim, n_rep = n_head / sm->n_head_kv;
    for (int32_t t = 0; t < n; t++)
        for (int h = 0; h < n_head; h++) {
            float *x = q + ((int64_t)t * n_head + h) * hd;
            const float *sc = sm->scale + (int64_t)(h / n_rep) * hd;
            for (int c = 0; c < hd; c++) x[c] *= sc[c];
        }
}

/* ---- writers ------------------------------------------------------------------------- */

/* ggml's quantize_row_q4_0_ref: d = (the value of largest magnitude) / -8,
 * codes min(15, trunc(x / d + 8.5)). */
void ez_kv_store_q4_0(const float *x, void *dst, int64_t n) {
    ez_block_q4_0 *y = (ez_block_q4_0 *)dst;
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++, x += EZ_KV_BLOCK) {
        float amax = 0.0f, mx = 0.0f, d, id;
        for (int j = 0; j < EZ_KV_BLOCK; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                mx = x[j];
            }
        d = mx / -8.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = ez_f32_to_f16(d);
        for (int j = 0; j < EZ_KV_BLOCK / 2; j++) {
            const int q0 = EZ_MIN(15, (int)(x[j] * id + 8.5f)), q1 = EZ_MIN(15, (int)(x[j + 16] * id + 8.5f));
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* Codes and scale of one conditioned block. The decoder reads d * level[c];
 * d = the block's RMS (TurboQuant's choice, optimal for a Gaussian source
 * of known variance) wastes the outer levels on a block of only 32 values,
 * whose largest magnitude is about 2 RMS. So the codes are tried at d =
 * RMS * f for f = 0.6 .. 1.3, each set gets its least-squares d (sum x l /
 * sum l^2), and the pair with the smallest squared error is kept: on
 * Gaussian blocks the relative error goes from 0.0089 to 0.0061 (4 bits)
 * and 0.0325 to 0.0257 (3 bits), in the same format.
 *
 * The levels are symmetric: levels[h + m] = -levels[h - 1 - m] for the h =
 * n_levels / 2 magnitudes, so a value's code is its sign and the number m
 * of positive midpoints below |x| / d, counted without branches (the loops
 * vectorize). */
static EZ_ALWAYS_INLINE float tbq_block(const float *x, const float *levels, int n_levels,
                                        uint8_t codes[EZ_KV_BLOCK]) {
    const int h = n_levels / 2;
    float ss = 0.0f, rms, best_gain = -1.0f, best_d = 0.0f, ax[EZ_KV_BLOCK];
    int32_t best_m[EZ_KV_BLOCK];
    for (int j = 0; j < EZ_KV_BLOCK; j++) {
        ax[j] = fabsf(x[j]);
        ss += x[j] * x[j];
        best_m[j] = 0;
    }
    rms = sqrtf(ss / (float)EZ_KV_BLOCK);
    for (int f = 6; f <= 13 && rms > 0.0f; f++) {
        const float id = 1.0f / (rms * 0.1f * (float)f);
        float t[EZ_KV_BLOCK], lev[EZ_KV_BLOCK], sxl = 0.0f, sll = 0.0f;
        int32_t m[EZ_KV_BLOCK];
        for (int j = 0; j < EZ_KV_BLOCK; j++) {
            t[j] = ax[j] * id;
            m[j] = 0;
            lev[j] = levels[h];
        }
        for (int l = 0; l + 1 < h; l++) {
            const float mid = 0.5f * (levels[h + l] + levels[h + l + 1]), step = levels[h + l + 1] - levels[h + l];
            for (int j = 0; j < EZ_KV_BLOCK; j++) {
                const int above = t[j] > mid;
                m[j] += above;
                lev[j] += (float)above * step;
            }
        }
        for (int j = 0; j < EZ_KV_BLOCK; j++) {
            sxl += ax[j] * lev[j];
            sll += lev[j] * lev[j];
        }
        /* The squared error at the least-squares d is ss - sxl^2 / sll. */
        if (sxl * sxl / sll > best_gain) {
            best_gain = sxl * sxl / sll;
            best_d = sxl / sll;
            memcpy(best_m, m, sizeof m);
        }
    }
    for (int j = 0; j < EZ_KV_BLOCK; j++)
        codes[j] = (uint8_t)(x[j] > 0.0f ? h + best_m[j] : h - 1 - best_m[j]);
    return best_d;
}

void ez_kv_store_tbq4_0(const float *x, void *dst, int64_t n) {
    ez_block_tbq4_0 *y = (ez_block_tbq4_0 *)dst;
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++, x += EZ_KV_BLOCK) {
        uint8_t c[EZ_KV_BLOCK];
        y[b].d = ez_f32_to_f16(tbq_block(x, ez_tbq4_levels, 16, c));
        for (int j = 0; j < EZ_KV_BLOCK / 2; j++) y[b].qs[j] = (uint8_t)(c[j] | (c[j + 16] << 4));
    }
}

void ez_kv_store_tbq3_0(const float *x, void *dst, int64_t n) {
    ez_block_tbq3_0 *y = (ez_block_tbq3_0 *)dst;
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++, x += EZ_KV_BLOCK) {
        uint8_t c[EZ_KV_BLOCK];
        y[b].d = ez_f32_to_f16(tbq_block(x, ez_tbq3_levels, 8, c));
        memset(y[b].qs, 0, sizeof y[b].qs);
        for (int j = 0; j < EZ_KV_BLOCK; j++) {
            const int bit = 3 * j;
            y[b].qs[bit / 8] |= (uint8_t)(c[j] << (bit % 8));
            if (bit % 8 > 5) y[b].qs[bit / 8 + 1] |= (uint8_t)(c[j] >> (8 - bit % 8));
        }
    }
}

/* ---- reference reads ----------------------------------------------------------------- */

/* Block b of a row of a block type, as 32 floats. */
static void block_values(int type, const void *row, int64_t b, float v[EZ_KV_BLOCK]) {
    switch (type) {
    case EZ_KV_Q8_0: {
        const ez_block_q8_0 *k = (const ez_block_q8_0 *)row + b;
        const float d = ez_f16_to_f32(k->d);
        for (int j = 0; j < EZ_KV_BLOCK; j++) v[j] = d * (float)k->qs[j];
        break;
    }
    case EZ_KV_Q4_0: {
        const ez_block_q4_0 *k = (const ez_block_q4_0 *)row + b;
        const float d = ez_f16_to_f32(k->d);
        for (int j = 0; j < EZ_KV_BLOCK / 2; j++) {
            v[j] = d * (float)((k->qs[j] & 15) - 8);
            v[j + 16] = d * (float)((k->qs[j] >> 4) - 8);
        }
        break;
    }
    case EZ_KV_TBQ4_0: {
        const ez_block_tbq4_0 *k = (const ez_block_tbq4_0 *)row + b;
        const float d = ez_f16_to_f32(k->d);
        for (int j = 0; j < EZ_KV_BLOCK / 2; j++) {
            v[j] = d * ez_tbq4_levels[k->qs[j] & 15];
            v[j + 16] = d * ez_tbq4_levels[k->qs[j] >> 4];
        }
        break;
    }
    default: {
        const ez_block_tbq3_0 *k = (const ez_block_tbq3_0 *)row + b;
        const float d = ez_f16_to_f32(k->d);
        for (int j = 0; j < EZ_KV_BLOCK; j++) {
            const int bit = 3 * j;
            int c = k->qs[bit / 8] >> (bit % 8);
            if (bit % 8 > 5) c |= k->qs[bit / 8 + 1] << (8 - bit % 8);
            v[j] = d * ez_tbq3_levels[c & 7];
        }
        break;
    }
    }
}

void ez_kv_load_tbq4_0(const void *src, float *y, int64_t n) {
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++) block_values(EZ_KV_TBQ4_0, src, b, y + b * EZ_KV_BLOCK);
}

void ez_kv_load_tbq3_0(const void *src, float *y, int64_t n) {
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++) block_values(EZ_KV_TBQ3_0, src, b, y + b * EZ_KV_BLOCK);
}

static EZ_ALWAYS_INLINE void dot4_ref(int type, const float *a, int64_t lda, const void *k, int64_t n, float *out,
                                      int n_rows) {
    double s[4] = {0, 0, 0, 0};
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++) {
        float v[EZ_KV_BLOCK];
        block_values(type, k, b, v);
        for (int r = 0; r < n_rows; r++)
            for (int j = 0; j < EZ_KV_BLOCK; j++) s[r] += (double)a[r * lda + b * EZ_KV_BLOCK + j] * v[j];
    }
    for (int r = 0; r < n_rows; r++) out[r] = (float)s[r];
}

static EZ_ALWAYS_INLINE void axpy4_ref(int type, float *y, int64_t ldy, const float *w, const void *x, int64_t n,
                                       int n_rows) {
    for (int64_t b = 0; b < n / EZ_KV_BLOCK; b++) {
        float v[EZ_KV_BLOCK];
        block_values(type, x, b, v);
        for (int r = 0; r < n_rows; r++)
            for (int j = 0; j < EZ_KV_BLOCK; j++) y[r * ldy + b * EZ_KV_BLOCK + j] += w[r] * v[j];
    }
}

#define REF_KERNELS(T, sfx)                                                                                   \
    static float dot_##sfx##_ref(const float *q, const void *k, int64_t n) {                                  \
        float o;                                                                                              \
        dot4_ref(T, q, 0, k, n, &o, 1);                                                                       \
        return o;                                                                                             \
    }                                                                                                         \
    static void dot4_##sfx##_ref(const float *a, int64_t lda, const void *k, int64_t n, float out[4]) {       \
        dot4_ref(T, a, lda, k, n, out, 4);                                                                    \
    }                                                                                                         \
    static void axpy_##sfx##_ref(float *y, float w, const void *v, int64_t n) { axpy4_ref(T, y, 0, &w, v, n, 1); } \
    static void axpy4_##sfx##_ref(float *y, int64_t ldy, const float w[4], const void *v, int64_t n) {        \
        axpy4_ref(T, y, ldy, w, v, n, 4);                                                                     \
    }

REF_KERNELS(EZ_KV_Q8_0, q8_0)
REF_KERNELS(EZ_KV_Q4_0, q4_0)
REF_KERNELS(EZ_KV_TBQ4_0, tbq4_0)
REF_KERNELS(EZ_KV_TBQ3_0, tbq3_0)

static void load_q8_0_ref(const void *src, float *y, int64_t n) { ez_kernels_ref(EZ_TYPE_Q8_0)->dequant(src, y, n); }
static void load_q4_0_ref(const void *src, float *y, int64_t n) { ez_kernels_ref(EZ_TYPE_Q4_0)->dequant(src, y, n); }

EZ_KV_PLAIN_KERNELS(ref, ez_llm_ops_ref(), ez_kernels_ref(EZ_TYPE_F16))

static const ez_kv_kernels KV_REF[EZ_KV_COUNT] = {
    EZ_KV_PLAIN_TABLE(ref),
    {ez_llm_quant_q8_0_ref, load_q8_0_ref, dot_q8_0_ref, dot4_q8_0_ref, axpy_q8_0_ref, axpy4_q8_0_ref},
    {ez_kv_store_q4_0, load_q4_0_ref, dot_q4_0_ref, dot4_q4_0_ref, axpy_q4_0_ref, axpy4_q4_0_ref},
    {ez_kv_store_tbq4_0, ez_kv_load_tbq4_0, dot_tbq4_0_ref, dot4_tbq4_0_ref, axpy_tbq4_0_ref, axpy4_tbq4_0_ref},
    {ez_kv_store_tbq3_0, ez_kv_load_tbq3_0, dot_tbq3_0_ref, dot4_tbq3_0_ref, axpy_tbq3_0_ref, axpy4_tbq3_0_ref},
};

const ez_kv_kernels *ez_kv_kernels_ref(int type) { return type >= 0 && type < EZ_KV_COUNT ? &KV_REF[type] : NULL; }

const ez_kv_kernels *ez_kv_kernels_active(int type) {
    return EZ_SIMD_PICK(ez_kv_kernels_avx512(type), ez_kv_kernels_avx2(type), NULL, ez_kv_kernels_neon(type),
                        ez_kv_kernels_ref(type));
}
