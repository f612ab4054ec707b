/* NEON kernels of ez_gemm_f32 (see gemm_kernels.h and gemm_kernels_ext.h).
 * NEON is part of the aarch64 baseline, so this file needs no special
 * flags. */
#include "gemm_kernels_ext.h"

#if EZ_ARCH_AARCH64

#include <arm_neon.h>
#include <math.h>

/* 8 x 12: 24 accumulators, three B vectors and two A vectors use 29 of the
 * 32 vector registers; A values are applied by lane (fmla by element). */
#define MR 8
#define NR 12

/* acc0..2 += a lane of av * (b0, b1, b2): one row of the tile. */
#define TILE_ROW(acc0, acc1, acc2, av, lane)                 \
    do {                                                     \
        acc0 = vfmaq_laneq_f32(acc0, b0, av, lane);          \
        acc1 = vfmaq_laneq_f32(acc1, b1, av, lane);          \
        acc2 = vfmaq_laneq_f32(acc2, b2, av, lane);          \
    } while (0)

static inline void store_row(float *c, float32x4_t v0, float32x4_t v1, float32x4_t v2, int accumulate) {
    if (accumulate) {
        v0 = vaddq_f32(vld1q_f32(c), v0);
        v1 = vaddq_f32(vld1q_f32(c + 4), v1);
        v2 = vaddq_f32(vld1q_f32(c + 8), v2);
    }
    vst1q_f32(c, v0);
    vst1q_f32(c + 4, v1);
    vst1q_f32(c + 8, v2);
}

/* The accumulators are named variables, not an array: gcc keeps an array
 * of vectors in memory across this loop, costing a store per FMA. */
static void tile_8x12(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int accumulate) {
    float32x4_t c00 = vdupq_n_f32(0.0f), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00;
    float32x4_t c20 = c00, c21 = c00, c22 = c00, c30 = c00, c31 = c00, c32 = c00;
    float32x4_t c40 = c00, c41 = c00, c42 = c00, c50 = c00, c51 = c00, c52 = c00;
    float32x4_t c60 = c00, c61 = c00, c62 = c00, c70 = c00, c71 = c00, c72 = c00;
    for (int64_t k = 0; k < kc; k++) {
        float32x4_t a0 = vld1q_f32(a), a1 = vld1q_f32(a + 4);
        float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), b2 = vld1q_f32(b + 8);
        TILE_ROW(c00, c01, c02, a0, 0);
        TILE_ROW(c10, c11, c12, a0, 1);
        TILE_ROW(c20, c21, c22, a0, 2);
        TILE_ROW(c30, c31, c32, a0, 3);
        TILE_ROW(c40, c41, c42, a1, 0);
        TILE_ROW(c50, c51, c52, a1, 1);
        TILE_ROW(c60, c61, c62, a1, 2);
        TILE_ROW(c70, c71, c72, a1, 3);
        a += MR;
        b += NR;
    }
    store_row(c, c00, c01, c02, accumulate);
    store_row(c + ldc, c10, c11, c12, accumulate);
    store_row(c + 2 * ldc, c20, c21, c22, accumulate);
    store_row(c + 3 * ldc, c30, c31, c32, accumulate);
    store_row(c + 4 * ldc, c40, c41, c42, accumulate);
    store_row(c + 5 * ldc, c50, c51, c52, accumulate);
    store_row(c + 6 * ldc, c60, c61, c62, accumulate);
    store_row(c + 7 * ldc, c70, c71, c72, accumulate);
}

/* r[i] = row i of a 4 x 4 block in, column i out. */
static inline void transpose_4x4(float32x4_t r[4]) {
    float32x4x2_t t01 = vtrnq_f32(r[0], r[1]);
    float32x4x2_t t23 = vtrnq_f32(r[2], r[3]);
    r[0] = vcombine_f32(vget_low_f32(t01.val[0]), vget_low_f32(t23.val[0]));
    r[1] = vcombine_f32(vget_low_f32(t01.val[1]), vget_low_f32(t23.val[1]));
    r[2] = vcombine_f32(vget_high_f32(t01.val[0]), vget_high_f32(t23.val[0]));
    r[3] = vcombine_f32(vget_high_f32(t01.val[1]), vget_high_f32(t23.val[1]));
}

/* One micro-panel of a B stored [N, K]: `rows` (<= NR) rows from B, kc
 * deep, into dst[k * NR + j]. Whole 12 x 4 blocks go through three 4 x 4
 * register transposes; the edges are copied one by one. */
static void pack_panel_nk(int64_t kc, int rows, const float *B, int64_t ldb, float *dst) {
    int64_t k = 0;
    if (rows == NR) {
        for (; k + 4 <= kc; k += 4)
            for (int g = 0; g < NR / 4; g++) {
                float32x4_t r[4];
                for (int i = 0; i < 4; i++) r[i] = vld1q_f32(B + (4 * g + i) * ldb + k);
                transpose_4x4(r);
                for (int i = 0; i < 4; i++) vst1q_f32(dst + (k + i) * NR + 4 * g, r[i]);
            }
    }
    for (; k < kc; k++)
        for (int j = 0; j < NR; j++) dst[k * NR + j] = j < rows ? B[j * ldb + k] : 0.0f;
}

static void pack_b_nk(int64_t kc, int64_t n_len, const float *B, int64_t ldb, float *dst) {
    for (int64_t j0 = 0; j0 < n_len; j0 += NR) {
        pack_panel_nk(kc, (int)EZ_MIN((int64_t)NR, n_len - j0), B + j0 * ldb, ldb, dst);
        dst += kc * NR;
    }
}

/* Rows [0, m_len) of A into micro-panels a[k * MR + i], zero past m_len:
 * depths in whole 4s go through two 4 x 4 register transposes per panel,
 * the rest is copied one by one. */
static void pack_a(int64_t kc, int64_t m_len, const float *A, int64_t lda, float *dst) {
    for (int64_t i0 = 0; i0 < m_len; i0 += MR) {
        const float *a = A + i0 * lda;
        int rows = (int)EZ_MIN((int64_t)MR, m_len - i0);
        int64_t k = 0;
        for (; k + 4 <= kc; k += 4)
            for (int h = 0; h < 2; h++) {
                float32x4_t r[4];
                for (int i = 0; i < 4; i++)
                    r[i] = 4 * h + i < rows ? vld1q_f32(a + (4 * h + i) * lda + k) : vdupq_n_f32(0.0f);
                transpose_4x4(r);
                for (int i = 0; i < 4; i++) vst1q_f32(dst + (k + i) * MR + 4 * h, r[i]);
            }
        for (; k < kc; k++)
            for (int i = 0; i < MR; i++) dst[k * MR + i] = i < rows ? a[i * lda + k] : 0.0f;
        dst += kc * MR;
    }
}

/* Columns of a B stored [K, N] are rows of 12 consecutive floats already:
 * a copy, zero-padded at the last panel. Depth is the outer loop so that B
 * is read along its rows: down a column, every line would be a new page. */
static void pack_b_kn(int64_t kc, int64_t n_len, const float *B, int64_t ldb, float *dst) {
    const int64_t full = n_len / NR;
    const int rest = (int)(n_len - full * NR);
    for (int64_t k = 0; k < kc; k++) {
        const float *src = B + k * ldb;
        float *d = dst + k * NR;
        for (int64_t q = 0; q < full; q++, src += NR, d += kc * NR) {
            vst1q_f32(d, vld1q_f32(src));
            vst1q_f32(d + 4, vld1q_f32(src + 4));
            vst1q_f32(d + 8, vld1q_f32(src + 8));
        }
        for (int j = 0; j < NR && rest > 0; j++) d[j] = j < rest ? src[j] : 0.0f;
    }
}

static inline float store_value(float old, float sum, int accumulate) { return accumulate ? old + sum : sum; }

/* The dot kernels below give every output the same operations: a 4-wide
 * FMA chain over k from zero, a horizontal sum, a scalar FMA tail. So
 * results do not depend on how outputs are grouped. Their accumulators are
 * named variables because gcc keeps an array of vectors in memory across
 * the loop. */

/* Finishes C[0..mb, 0..nb) from the vector sums (row-major, nb per row)
 * and the depth [k, K) not yet covered. */
static void finish_dots(int mb, int nb, int64_t k, int64_t K, const float *A, int64_t lda, const float *B,
                        int64_t ldb, const float32x4_t *sums, float *C, int64_t ldc, int accumulate) {
    for (int i = 0; i < mb; i++)
        for (int j = 0; j < nb; j++) {
            float s = vaddvq_f32(sums[i * nb + j]);
            for (int64_t t = k; t < K; t++) s = fmaf(A[i * lda + t], B[j * ldb + t], s);
            C[i * ldc + j] = store_value(C[i * ldc + j], s, accumulate);
        }
}

/* acc0..3 += a * (b0, b1, b2, b3): one row of A against four rows of B. */
#define DOT_ROW(acc0, acc1, acc2, acc3, a)          \
    do {                                            \
        acc0 = vfmaq_f32(acc0, a, b0);              \
        acc1 = vfmaq_f32(acc1, a, b1);              \
        acc2 = vfmaq_f32(acc2, a, b2);              \
        acc3 = vfmaq_f32(acc3, a, b3);              \
    } while (0)

/* Four rows of A against four rows of B: 8 loads per 16 FMAs. */
static void dot_4x4(int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                    int accumulate) {
    float32x4_t c00 = vdupq_n_f32(0.0f), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00;
    float32x4_t c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00, c32 = c00;
    float32x4_t c33 = c00;
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
        float32x4_t b0 = vld1q_f32(B + k), b1 = vld1q_f32(B + ldb + k);
        float32x4_t b2 = vld1q_f32(B + 2 * ldb + k), b3 = vld1q_f32(B + 3 * ldb + k);
        DOT_ROW(c00, c01, c02, c03, vld1q_f32(A + k));
        DOT_ROW(c10, c11, c12, c13, vld1q_f32(A + lda + k));
        DOT_ROW(c20, c21, c22, c23, vld1q_f32(A + 2 * lda + k));
        DOT_ROW(c30, c31, c32, c33, vld1q_f32(A + 3 * lda + k));
    }
    {
        const float32x4_t sums[16] = {c00, c01, c02, c03, c10, c11, c12, c13,
                                      c20, c21, c22, c23, c30, c31, c32, c33};
        finish_dots(4, 4, k, K, A, lda, B, ldb, sums, C, ldc, accumulate);
    }
}

/* One row of A against four rows of B (the GEMV kernel). */
static void dot_1x4(int64_t K, const float *A, const float *B, int64_t ldb, float *C, int accumulate) {
    float32x4_t c0 = vdupq_n_f32(0.0f), c1 = c0, c2 = c0, c3 = c0;
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
        float32x4_t b0 = vld1q_f32(B + k), b1 = vld1q_f32(B + ldb + k);
        float32x4_t b2 = vld1q_f32(B + 2 * ldb + k), b3 = vld1q_f32(B + 3 * ldb + k);
        DOT_ROW(c0, c1, c2, c3, vld1q_f32(A + k));
    }
    {
        const float32x4_t sums[4] = {c0, c1, c2, c3};
        finish_dots(1, 4, k, K, A, 0, B, ldb, sums, C, 0, accumulate);
    }
}

static void dot_1x1(int64_t K, const float *A, const float *B, float *C, int accumulate) {
    float32x4_t c0 = vdupq_n_f32(0.0f);
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) c0 = vfmaq_f32(c0, vld1q_f32(A + k), vld1q_f32(B + k));
    finish_dots(1, 1, k, K, A, 0, B, 0, &c0, C, 0, accumulate);
}

/* Rows of A four at a time against rows of B four at a time, so each B row
 * is read from memory once and from L1 for the other rows of A. */
static void rows_nk(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                    float *C, int64_t ldc, int accumulate) {
    int64_t n = 0;
    for (; n + 4 <= N; n += 4) {
        int64_t m = 0;
        for (; m + 4 <= M; m += 4) dot_4x4(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc, accumulate);
        for (; m < M; m++) dot_1x4(K, A + m * lda, B + n * ldb, ldb, C + m * ldc + n, accumulate);
    }
    for (; n < N; n++)
        for (int64_t m = 0; m < M; m++) dot_1x1(K, A + m * lda, B + n * ldb, C + m * ldc + n, accumulate);
}

/* C[m, 0..4*V) for V <= 8 vectors of columns: per element a chain of FMAs
 * over k from zero, the same chain for every width and for the scalar tail.
 * Called with constant V, so it is unrolled with acc[] in registers. */
static inline void row_kn_block(int V, int64_t K, const float *a, const float *B, int64_t ldb, float *c,
                                int accumulate) {
    float32x4_t acc[8];
    for (int v = 0; v < V; v++) acc[v] = vdupq_n_f32(0.0f);
    for (int64_t k = 0; k < K; k++) {
        float32x4_t ak = vdupq_n_f32(a[k]);
        for (int v = 0; v < V; v++) acc[v] = vfmaq_f32(acc[v], ak, vld1q_f32(B + k * ldb + 4 * v));
    }
    for (int v = 0; v < V; v++) vst1q_f32(c + 4 * v, accumulate ? vaddq_f32(vld1q_f32(c + 4 * v), acc[v]) : acc[v]);
}

static void rows_kn(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                    float *C, int64_t ldc, int accumulate) {
    for (int64_t m = 0; m < M; m++) {
        const float *a = A + m * lda;
        float *c = C + m * ldc;
        int64_t n = 0;
        for (; n + 32 <= N; n += 32) row_kn_block(8, K, a, B + n, ldb, c + n, accumulate);
        for (; n + 4 <= N; n += 4) row_kn_block(1, K, a, B + n, ldb, c + n, accumulate);
        for (; n < N; n++) {
            float s = 0.0f;
            for (int64_t k = 0; k < K; k++) s = fmaf(a[k], B[k * ldb + n], s);
            c[n] = store_value(c[n], s, accumulate);
        }
    }
}

static const ez_gemm_kernels neon_kernels = {
    MR, NR,
    256,  /* kc: a 12 KiB B micro-panel in L1 */
    128,  /* mc: a 128 KiB A block in L2 */
    504,  /* nc */
    24,   /* small_m_nk: as measured for AVX2 (not measured on ARM hardware) */
    3,    /* small_m_kn */
    tile_8x12,
    pack_b_nk,
    rows_nk,
    rows_kn,
};

/* The tile applies A by lane from a vector of 4 packed rows; reading rows
 * in place would take 8 single-value loads per depth instead of 2. */
static const ez_gemm_kernels_ext neon_kernels_ext = {
    NULL, /* tile_direct */
    pack_a,
    pack_b_kn,
};

const ez_gemm_kernels *ez_gemm_kernels_neon(void) { return &neon_kernels; }
const ez_gemm_kernels_ext *ez_gemm_kernels_ext_neon(void) { return &neon_kernels_ext; }

#else

const ez_gemm_kernels *ez_gemm_kernels_neon(void) { return NULL; }
const ez_gemm_kernels_ext *ez_gemm_kernels_ext_neon(void) { return NULL; }

#endif
