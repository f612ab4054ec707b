/* AVX2 + FMA kernels of ez_gemm_f32 (see gemm_kernels.h and
 * gemm_kernels_ext.h). Compiled with -mavx2 -mfma on x86-64 and only called
 * when the CPU has them. */
#include "gemm_kernels_ext.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>
#include <math.h>

#include "core/kernels/vmath_avx2.h"

/* 6 x 16: twelve accumulators, two B vectors and a broadcast fill 15 of the
 * 16 ymm registers; 12 FMAs per 8 loads keeps both FMA ports busy. */
#define MR 6
#define NR 16

/* Lanes j of the two halves of a 16-wide row with j < cols. */
static inline void column_masks(int cols, __m256i *lo, __m256i *hi) {
    __m256i n = _mm256_set1_epi32(cols);
    *lo = _mm256_cmpgt_epi32(n, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    *hi = _mm256_cmpgt_epi32(n, _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15));
}

static inline void store_row(float *c, __m256 lo, __m256 hi, int accumulate) {
    if (accumulate) {
        lo = _mm256_add_ps(_mm256_loadu_ps(c), lo);
        hi = _mm256_add_ps(_mm256_loadu_ps(c + 8), hi);
    }
    _mm256_storeu_ps(c, lo);
    _mm256_storeu_ps(c + 8, hi);
}

/* store_row for the first cols (mask lanes) of the row only. */
static inline void store_row_part(float *c, __m256 lo, __m256 hi, __m256i mlo, __m256i mhi, int accumulate) {
    if (accumulate) {
        lo = _mm256_add_ps(_mm256_maskload_ps(c, mlo), lo);
        hi = _mm256_add_ps(_mm256_maskload_ps(c + 8, mhi), hi);
    }
    _mm256_maskstore_ps(c, mlo, lo);
    _mm256_maskstore_ps(c + 8, mhi, hi);
}

/* acc_lo/acc_hi += *a * (b0, b1): one row of the tile at one depth. */
#define TILE_ROW(a, acc_lo, acc_hi)                        \
    do {                                                   \
        __m256 ai = _mm256_broadcast_ss(a);                \
        acc_lo = _mm256_fmadd_ps(ai, b0, acc_lo);          \
        acc_hi = _mm256_fmadd_ps(ai, b1, acc_hi);          \
    } while (0)

/* The tile over depth [0, kc) with A at row i, depth k at a_i[k * a_step]
 * (packed: a_i = a + i, a_step = MR; in place: a_i = a + i * lda,
 * a_step = 1); the first rows x cols of it go to c. Inlined into each
 * caller with a_step (and for tile_6x16 rows and cols) constant. The
 * accumulators are named variables, not an array: gcc keeps an array of
 * vectors in memory across this loop, costing a store per FMA. */
static inline void tile_any(int64_t kc, const float *a0, const float *a1, const float *a2, const float *a3,
                            const float *a4, const float *a5, int64_t a_step, const float *b, float *c, int64_t ldc,
                            int rows, int cols, int accumulate) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int64_t k = 0; k < kc; k++) {
        const int64_t o = k * a_step;
        __m256 b0 = _mm256_load_ps(b + k * NR);
        __m256 b1 = _mm256_load_ps(b + k * NR + 8);
        TILE_ROW(a0 + o, c00, c01);
        TILE_ROW(a1 + o, c10, c11);
        TILE_ROW(a2 + o, c20, c21);
        TILE_ROW(a3 + o, c30, c31);
        TILE_ROW(a4 + o, c40, c41);
        TILE_ROW(a5 + o, c50, c51);
    }
    if (rows == MR && cols == NR) {
        store_row(c, c00, c01, accumulate);
        store_row(c + ldc, c10, c11, accumulate);
        store_row(c + 2 * ldc, c20, c21, accumulate);
        store_row(c + 3 * ldc, c30, c31, accumulate);
        store_row(c + 4 * ldc, c40, c41, accumulate);
        store_row(c + 5 * ldc, c50, c51, accumulate);
    } else {
        __m256i mlo, mhi;
        column_masks(cols, &mlo, &mhi);
        store_row_part(c, c00, c01, mlo, mhi, accumulate);
        if (rows > 1) store_row_part(c + ldc, c10, c11, mlo, mhi, accumulate);
        if (rows > 2) store_row_part(c + 2 * ldc, c20, c21, mlo, mhi, accumulate);
        if (rows > 3) store_row_part(c + 3 * ldc, c30, c31, mlo, mhi, accumulate);
        if (rows > 4) store_row_part(c + 4 * ldc, c40, c41, mlo, mhi, accumulate);
        if (rows > 5) store_row_part(c + 5 * ldc, c50, c51, mlo, mhi, accumulate);
    }
}

static void tile_6x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int accumulate) {
    tile_any(kc, a, a + 1, a + 2, a + 3, a + 4, a + 5, MR, b, c, ldc, MR, NR, accumulate);
}

/* Rows past `rows` read row 0 again (in bounds); their sums are dropped. */
static void tile_direct(int64_t kc, const float *a, int64_t lda, int rows, const float *b, float *c, int64_t ldc,
                        int cols, int accumulate) {
    const float *a1 = rows > 1 ? a + lda : a, *a2 = rows > 2 ? a + 2 * lda : a, *a3 = rows > 3 ? a + 3 * lda : a;
    const float *a4 = rows > 4 ? a + 4 * lda : a, *a5 = rows > 5 ? a + 5 * lda : a;
    tile_any(kc, a, a1, a2, a3, a4, a5, 1, b, c, ldc, rows, cols, accumulate);
}

/* One micro-panel of a B stored [N, K]: `rows` (<= NR) rows from B, kc
 * deep, into dst[k * NR + j], zero past `rows`. Depths in whole 8s go
 * through two 8 x 8 register transposes; the rest is copied one by one. */
static void pack_panel_nk(int64_t kc, int rows, const float *B, int64_t ldb, float *dst) {
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8)
        for (int h = 0; h < 2; h++) {
            __m256 r[8];
            for (int i = 0; i < 8; i++)
                r[i] = 8 * h + i < rows ? _mm256_loadu_ps(B + (8 * h + i) * ldb + k) : _mm256_setzero_ps();
            ez_transpose8x8_avx2(r);
            for (int i = 0; i < 8; i++) _mm256_store_ps(dst + (k + i) * NR + 8 * h, r[i]);
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

/* Columns of a B stored [K, N] are rows of 16 consecutive floats already:
 * a copy, masked at the last panel. Depth is the outer loop so that B is
 * read along its rows: down a column, every line would be a new page. */
static void pack_b_kn(int64_t kc, int64_t n_len, const float *B, int64_t ldb, float *dst) {
    const int64_t full = n_len / NR;
    const int rest = (int)(n_len - full * NR);
    for (int64_t k = 0; k < kc; k++) {
        const float *src = B + k * ldb;
        float *d = dst + k * NR;
        for (int64_t q = 0; q < full; q++, src += NR, d += kc * NR) {
            _mm256_store_ps(d, _mm256_loadu_ps(src));
            _mm256_store_ps(d + 8, _mm256_loadu_ps(src + 8));
        }
        if (rest > 0) {
            __m256i mlo, mhi;
            column_masks(rest, &mlo, &mhi);
            _mm256_store_ps(d, _mm256_maskload_ps(src, mlo));
            _mm256_store_ps(d + 8, _mm256_maskload_ps(src + 8, mhi));
        }
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

/* A is read in place: packing it would cost a copy per element for nothing,
 * since broadcasts load from anywhere at the same price. */
static const ez_gemm_kernels_ext avx2_kernels_ext = {
    tile_direct,
    NULL, /* pack_a */
    pack_b_kn,
};

const ez_gemm_kernels *ez_gemm_kernels_avx2(void) { return &avx2_kernels; }
const ez_gemm_kernels_ext *ez_gemm_kernels_ext_avx2(void) { return &avx2_kernels_ext; }

#else

const ez_gemm_kernels *ez_gemm_kernels_avx2(void) { return NULL; }
const ez_gemm_kernels_ext *ez_gemm_kernels_ext_avx2(void) { return NULL; }

#endif
