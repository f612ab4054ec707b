/* AVX2 + FMA kernels of ez_gemm_f32 (see gemm_kernels.h). Compiled with
 * -mavx2 -mfma on x86-64 and only called when the CPU has them. */
#include "gemm_kernels.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>
#include <math.h>

/* 6 x 16: twelve accumulators, two B vectors and a broadcast fill 15 of the
 * 16 ymm registers; 12 FMAs per 8 loads keeps both FMA ports busy. */
#define MR 6
#define NR 16

static inline void store_row(float *c, __m256 lo, __m256 hi, int accumulate) {
    if (accumulate) {
        lo = _mm256_add_ps(_mm256_loadu_ps(c), lo);
        hi = _mm256_add_ps(_mm256_loadu_ps(c + 8), hi);
    }
    _mm256_storeu_ps(c, lo);
    _mm256_storeu_ps(c + 8, hi);
}

/* acc_lo/acc_hi += a[i] * (b0, b1): one row of the tile. */
#define TILE_ROW(i, acc_lo, acc_hi)                        \
    do {                                                   \
        __m256 ai = _mm256_broadcast_ss(a + (i));          \
        acc_lo = _mm256_fmadd_ps(ai, b0, acc_lo);          \
        acc_hi = _mm256_fmadd_ps(ai, b1, acc_hi);          \
    } while (0)

/* The accumulators are named variables, not an array: gcc keeps an array
 * of vectors in memory across this loop, costing a store per FMA. */
static void tile_6x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int accumulate) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_load_ps(b);
        __m256 b1 = _mm256_load_ps(b + 8);
        TILE_ROW(0, c00, c01);
        TILE_ROW(1, c10, c11);
        TILE_ROW(2, c20, c21);
        TILE_ROW(3, c30, c31);
        TILE_ROW(4, c40, c41);
        TILE_ROW(5, c50, c51);
        a += MR;
        b += NR;
    }
    store_row(c, c00, c01, accumulate);
    store_row(c + ldc, c10, c11, accumulate);
    store_row(c + 2 * ldc, c20, c21, accumulate);
    store_row(c + 3 * ldc, c30, c31, accumulate);
    store_row(c + 4 * ldc, c40, c41, accumulate);
    store_row(c + 5 * ldc, c50, c51, accumulate);
}

/* r[i] = row i of an 8 x 8 block in, column i out. */
static inline void transpose_8x8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) {
        u[4 * h + 0] = _mm256_shuffle_ps(t[4 * h + 0], t[4 * h + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h + 0], t[4 * h + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
        r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
    }
}

/* One micro-panel of a B stored [N, K]: `rows` (<= NR) rows from B, kc
 * deep, into dst[k * NR + j]. Whole 16 x 8 blocks go through two 8 x 8
 * register transposes; the edges are copied one by one. */
static void pack_panel_nk(int64_t kc, int rows, const float *B, int64_t ldb, float *dst) {
    int64_t k = 0;
    if (rows == NR) {
        for (; k + 8 <= kc; k += 8)
            for (int h = 0; h < 2; h++) {
                __m256 r[8];
                for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(B + (8 * h + i) * ldb + k);
                transpose_8x8(r);
                for (int i = 0; i < 8; i++) _mm256_store_ps(dst + (k + i) * NR + 8 * h, r[i]);
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

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float store_value(float old, float sum, int accumulate) { return accumulate ? old + sum : sum; }

/* The dot kernels below give every output the same operations: an 8-wide
 * FMA chain over k from zero, a horizontal sum, a scalar FMA tail. So
 * results do not depend on how outputs are grouped. Their accumulators are
 * named variables because gcc may keep an array of vectors in memory across
 * the loop. */

/* Finishes C[0..mb, 0..nb) from the vector sums (row-major, nb per row)
 * and the depth [k, K) not yet covered. */
static void finish_dots(int mb, int nb, int64_t k, int64_t K, const float *A, int64_t lda, const float *B,
                        int64_t ldb, const __m256 *sums, float *C, int64_t ldc, int accumulate) {
    for (int i = 0; i < mb; i++)
        for (int j = 0; j < nb; j++) {
            float s = hsum(sums[i * nb + j]);
            for (int64_t t = k; t < K; t++) s = fmaf(A[i * lda + t], B[j * ldb + t], s);
            C[i * ldc + j] = store_value(C[i * ldc + j], s, accumulate);
        }
}

/* acc0..3 += a * (b0, b1, b2, b3): one row of A against four rows of B. */
#define DOT_ROW(acc0, acc1, acc2, acc3, a)                  \
    do {                                                    \
        __m256 a_ = (a);                                    \
        acc0 = _mm256_fmadd_ps(a_, b0, acc0);               \
        acc1 = _mm256_fmadd_ps(a_, b1, acc1);               \
        acc2 = _mm256_fmadd_ps(a_, b2, acc2);               \
        acc3 = _mm256_fmadd_ps(a_, b3, acc3);               \
    } while (0)

/* Three rows of A against four rows of B: 12 accumulators and 4 B vectors
 * fill the 16 ymm registers; 7 loads per 12 FMAs. */
static void dot_3x4(int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                    int accumulate) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00;
    __m256 c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00;
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 b0 = _mm256_loadu_ps(B + k), b1 = _mm256_loadu_ps(B + ldb + k);
        __m256 b2 = _mm256_loadu_ps(B + 2 * ldb + k), b3 = _mm256_loadu_ps(B + 3 * ldb + k);
        DOT_ROW(c00, c01, c02, c03, _mm256_loadu_ps(A + k));
        DOT_ROW(c10, c11, c12, c13, _mm256_loadu_ps(A + lda + k));
        DOT_ROW(c20, c21, c22, c23, _mm256_loadu_ps(A + 2 * lda + k));
    }
    {
        const __m256 sums[12] = {c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23};
        finish_dots(3, 4, k, K, A, lda, B, ldb, sums, C, ldc, accumulate);
    }
}

/* One row of A against four rows of B (the GEMV kernel). */
static void dot_1x4(int64_t K, const float *A, const float *B, int64_t ldb, float *C, int accumulate) {
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 b0 = _mm256_loadu_ps(B + k), b1 = _mm256_loadu_ps(B + ldb + k);
        __m256 b2 = _mm256_loadu_ps(B + 2 * ldb + k), b3 = _mm256_loadu_ps(B + 3 * ldb + k);
        DOT_ROW(c0, c1, c2, c3, _mm256_loadu_ps(A + k));
    }
    {
        const __m256 sums[4] = {c0, c1, c2, c3};
        finish_dots(1, 4, k, K, A, 0, B, ldb, sums, C, 0, accumulate);
    }
}

static void dot_1x1(int64_t K, const float *A, const float *B, float *C, int accumulate) {
    __m256 c0 = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) c0 = _mm256_fmadd_ps(_mm256_loadu_ps(A + k), _mm256_loadu_ps(B + k), c0);
    finish_dots(1, 1, k, K, A, 0, B, 0, &c0, C, 0, accumulate);
}

/* Rows of A three at a time against rows of B four at a time, so each B row
 * is read from memory once and from L1 for the other rows of A. */
static void rows_nk(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                    float *C, int64_t ldc, int accumulate) {
    int64_t n = 0;
    for (; n + 4 <= N; n += 4) {
        int64_t m = 0;
        for (; m + 3 <= M; m += 3) dot_3x4(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc, accumulate);
        for (; m < M; m++) dot_1x4(K, A + m * lda, B + n * ldb, ldb, C + m * ldc + n, accumulate);
    }
    for (; n < N; n++)
        for (int64_t m = 0; m < M; m++) dot_1x1(K, A + m * lda, B + n * ldb, C + m * ldc + n, accumulate);
}

/* C[m, 0..8*V) for V <= 8 vectors of columns: per element a chain of FMAs
 * over k from zero, the same chain for every width and for the scalar tail.
 * Called with constant V, so it is unrolled with acc[] in registers. */
static inline void row_kn_block(int V, int64_t K, const float *a, const float *B, int64_t ldb, float *c,
                                int accumulate) {
    __m256 acc[8];
    for (int v = 0; v < V; v++) acc[v] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        __m256 ak = _mm256_broadcast_ss(a + k);
        for (int v = 0; v < V; v++) acc[v] = _mm256_fmadd_ps(ak, _mm256_loadu_ps(B + k * ldb + 8 * v), acc[v]);
    }
    for (int v = 0; v < V; v++) {
        __m256 sum = accumulate ? _mm256_add_ps(_mm256_loadu_ps(c + 8 * v), acc[v]) : acc[v];
        _mm256_storeu_ps(c + 8 * v, sum);
    }
}

static void rows_kn(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                    float *C, int64_t ldc, int accumulate) {
    for (int64_t m = 0; m < M; m++) {
        const float *a = A + m * lda;
        float *c = C + m * ldc;
        int64_t n = 0;
        for (; n + 64 <= N; n += 64) row_kn_block(8, K, a, B + n, ldb, c + n, accumulate);
        for (; n + 8 <= N; n += 8) row_kn_block(1, K, a, B + n, ldb, c + n, accumulate);
        for (; n < N; n++) {
            float s = 0.0f;
            for (int64_t k = 0; k < K; k++) s = fmaf(a[k], B[k * ldb + n], s);
            c[n] = store_value(c[n], s, accumulate);
        }
    }
}

static const ez_gemm_kernels avx2_kernels = {
    MR, NR,
    256,  /* kc: a 16 KiB B micro-panel in a 32-48 KiB L1 */
    144,  /* mc: a 144 KiB A block in L2 */
    512,  /* nc */
    /* Crossovers measured with bench_gemm-style runs at K = 640, N = 2048:
     * up to 24 rows the A rows stay in L2 and the 3 x 4 dot blocks beat
     * packing B; for B stored [K, N] packing wins from 4 rows. */
    24,   /* small_m_nk */
    3,    /* small_m_kn */
    tile_6x16,
    pack_b_nk,
    rows_nk,
    rows_kn,
};

const ez_gemm_kernels *ez_gemm_kernels_avx2(void) { return &avx2_kernels; }

#else

const ez_gemm_kernels *ez_gemm_kernels_avx2(void) { return NULL; }

#endif
