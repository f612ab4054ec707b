/* AVX-512 kernels of ez_gemm_f32 (see gemm_kernels.h and
 * gemm_kernels_ext.h): gemm_avx2.c's design on 16-lane registers, with the
 * register tile re-sized for 32 of them. Compiled with the AVX-512 flags on
 * x86-64 and only called at the avx512 level. */
#include "gemm_kernels_ext.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>
#include <math.h>

#include "core/kernels/vmath_avx2.h"
#include "core/kernels/vmath_avx512.h"

/* 12 x 32: 24 accumulators, two B vectors and a broadcast take 27 of the 32
 * zmm registers; 24 FMAs per 14 loads (the broadcasts fold into the FMAs)
 * keep two 512-bit FMA pipes busy, and 24 independent chains cover their
 * 4-cycle latency. */
#define MR 12
#define NR 32

_Static_assert(MR * NR <= EZ_GEMM_MAX_TILE, "the edge-tile buffer holds an AVX-512 tile");

static inline void store_row(float *c, __m512 lo, __m512 hi, int accumulate) {
    if (accumulate) {
        lo = _mm512_add_ps(_mm512_loadu_ps(c), lo);
        hi = _mm512_add_ps(_mm512_loadu_ps(c + 16), hi);
    }
    _mm512_storeu_ps(c, lo);
    _mm512_storeu_ps(c + 16, hi);
}

/* store_row for the lanes of mlo / mhi only. */
static inline void store_row_part(float *c, __m512 lo, __m512 hi, __mmask16 mlo, __mmask16 mhi, int accumulate) {
    if (accumulate) {
        lo = _mm512_add_ps(_mm512_maskz_loadu_ps(mlo, c), lo);
        hi = _mm512_add_ps(_mm512_maskz_loadu_ps(mhi, c + 16), hi);
    }
    _mm512_mask_storeu_ps(c, mlo, lo);
    _mm512_mask_storeu_ps(c + 16, mhi, hi);
}

#define TILE_ROW(a, acc_lo, acc_hi)                   \
    do {                                              \
        __m512 ai = _mm512_set1_ps(*(a));             \
        acc_lo = _mm512_fmadd_ps(ai, b0, acc_lo);     \
        acc_hi = _mm512_fmadd_ps(ai, b1, acc_hi);     \
    } while (0)

/* The tile over depth [0, kc) with row i of A at a + i * a_row and depth k
 * at k * a_step (packed: a_row = 1, a_step = MR; in place: a_row = lda,
 * a_step = 1); the first rows x cols of it go to c. Rows past `rows` read
 * row 0 again (in bounds) and are dropped. Named accumulators, as in
 * gemm_avx2.c, so gcc keeps them in registers. */
static inline void tile_any(int64_t kc, const float *a, int64_t a_row, int rows, int64_t a_step, const float *b,
                            float *c, int64_t ldc, int cols, int accumulate) {
    const float *a0 = a, *a1 = rows > 1 ? a + a_row : a, *a2 = rows > 2 ? a + 2 * a_row : a;
    const float *a3 = rows > 3 ? a + 3 * a_row : a, *a4 = rows > 4 ? a + 4 * a_row : a;
    const float *a5 = rows > 5 ? a + 5 * a_row : a, *a6 = rows > 6 ? a + 6 * a_row : a;
    const float *a7 = rows > 7 ? a + 7 * a_row : a, *a8 = rows > 8 ? a + 8 * a_row : a;
    const float *a9 = rows > 9 ? a + 9 * a_row : a, *a10 = rows > 10 ? a + 10 * a_row : a;
    const float *a11 = rows > 11 ? a + 11 * a_row : a;
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    __m512 c60 = c00, c61 = c00, c70 = c00, c71 = c00, c80 = c00, c81 = c00;
    __m512 c90 = c00, c91 = c00, ca0 = c00, ca1 = c00, cb0 = c00, cb1 = c00;
    for (int64_t k = 0; k < kc; k++) {
        const int64_t o = k * a_step;
        __m512 b0 = _mm512_loadu_ps(b + k * NR);
        __m512 b1 = _mm512_loadu_ps(b + k * NR + 16);
        TILE_ROW(a0 + o, c00, c01);
        TILE_ROW(a1 + o, c10, c11);
        TILE_ROW(a2 + o, c20, c21);
        TILE_ROW(a3 + o, c30, c31);
        TILE_ROW(a4 + o, c40, c41);
        TILE_ROW(a5 + o, c50, c51);
        TILE_ROW(a6 + o, c60, c61);
        TILE_ROW(a7 + o, c70, c71);
        TILE_ROW(a8 + o, c80, c81);
        TILE_ROW(a9 + o, c90, c91);
        TILE_ROW(a10 + o, ca0, ca1);
        TILE_ROW(a11 + o, cb0, cb1);
    }
    if (rows == MR && cols == NR) {
        store_row(c, c00, c01, accumulate);
        store_row(c + ldc, c10, c11, accumulate);
        store_row(c + 2 * ldc, c20, c21, accumulate);
        store_row(c + 3 * ldc, c30, c31, accumulate);
        store_row(c + 4 * ldc, c40, c41, accumulate);
        store_row(c + 5 * ldc, c50, c51, accumulate);
        store_row(c + 6 * ldc, c60, c61, accumulate);
        store_row(c + 7 * ldc, c70, c71, accumulate);
        store_row(c + 8 * ldc, c80, c81, accumulate);
        store_row(c + 9 * ldc, c90, c91, accumulate);
        store_row(c + 10 * ldc, ca0, ca1, accumulate);
        store_row(c + 11 * ldc, cb0, cb1, accumulate);
    } else {
        const __mmask16 mlo = ez_lanes_avx512(EZ_MIN(cols, 16)), mhi = ez_lanes_avx512(EZ_MAX(cols - 16, 0));
        store_row_part(c, c00, c01, mlo, mhi, accumulate);
        if (rows > 1) store_row_part(c + ldc, c10, c11, mlo, mhi, accumulate);
        if (rows > 2) store_row_part(c + 2 * ldc, c20, c21, mlo, mhi, accumulate);
        if (rows > 3) store_row_part(c + 3 * ldc, c30, c31, mlo, mhi, accumulate);
        if (rows > 4) store_row_part(c + 4 * ldc, c40, c41, mlo, mhi, accumulate);
        if (rows > 5) store_row_part(c + 5 * ldc, c50, c51, mlo, mhi, accumulate);
        if (rows > 6) store_row_part(c + 6 * ldc, c60, c61, mlo, mhi, accumulate);
        if (rows > 7) store_row_part(c + 7 * ldc, c70, c71, mlo, mhi, accumulate);
        if (rows > 8) store_row_part(c + 8 * ldc, c80, c81, mlo, mhi, accumulate);
        if (rows > 9) store_row_part(c + 9 * ldc, c90, c91, mlo, mhi, accumulate);
        if (rows > 10) store_row_part(c + 10 * ldc, ca0, ca1, mlo, mhi, accumulate);
        if (rows > 11) store_row_part(c + 11 * ldc, cb0, cb1, mlo, mhi, accumulate);
    }
}

static void tile_12x32(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int accumulate) {
    tile_any(kc, a, 1, MR, MR, b, c, ldc, NR, accumulate);
}

/* Rows [0, rows) (at most 4) of the tile with A read in place: each row's
 * sums as tile_any forms them, without the 12-row tile's work on rows past
 * the edge. */
static void tile_direct4(int64_t kc, const float *a, int64_t lda, int rows, const float *b, float *c, int64_t ldc,
                         int cols, int accumulate) {
    const float *a0 = a, *a1 = rows > 1 ? a + lda : a, *a2 = rows > 2 ? a + 2 * lda : a;
    const float *a3 = rows > 3 ? a + 3 * lda : a;
    const __mmask16 mlo = ez_lanes_avx512(EZ_MIN(cols, 16)), mhi = ez_lanes_avx512(EZ_MAX(cols - 16, 0));
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    for (int64_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_loadu_ps(b + k * NR);
        __m512 b1 = _mm512_loadu_ps(b + k * NR + 16);
        TILE_ROW(a0 + k, c00, c01);
        TILE_ROW(a1 + k, c10, c11);
        TILE_ROW(a2 + k, c20, c21);
        TILE_ROW(a3 + k, c30, c31);
    }
    store_row_part(c, c00, c01, mlo, mhi, accumulate);
    if (rows > 1) store_row_part(c + ldc, c10, c11, mlo, mhi, accumulate);
    if (rows > 2) store_row_part(c + 2 * ldc, c20, c21, mlo, mhi, accumulate);
    if (rows > 3) store_row_part(c + 3 * ldc, c30, c31, mlo, mhi, accumulate);
}

/* An edge of up to 8 rows in tiles of 4 (an FFT convolution of a short chunk
 * has 25 rows of blocks: 36 with 12-row tiles only, 28 so); the same bits. */
static void tile_direct(int64_t kc, const float *a, int64_t lda, int rows, const float *b, float *c, int64_t ldc,
                        int cols, int accumulate) {
    if (rows > 8) {
        tile_any(kc, a, lda, rows, 1, b, c, ldc, cols, accumulate);
        return;
    }
    for (int r = 0; r < rows; r += 4)
        tile_direct4(kc, a + r * lda, lda, EZ_MIN(4, rows - r), b, c + r * ldc, ldc, cols, accumulate);
}

/* One micro-panel of a B stored [N, K]: `rows` (<= NR) rows from B, kc
 * deep, into dst[k * NR + j], zero past `rows`. Whole 8s of depth go
 * through 8 x 8 register transposes, the rest one by one. */
static void pack_panel_nk(int64_t kc, int rows, const float *B, int64_t ldb, float *dst) {
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8)
        for (int h = 0; h < NR / 8; h++) {
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

/* Depth outer, as in gemm_avx2.c: B is read along its rows. */
static void pack_b_kn(int64_t kc, int64_t n_len, const float *B, int64_t ldb, float *dst) {
    const int64_t full = n_len / NR;
    const int rest = (int)(n_len - full * NR);
    const __mmask16 mlo = ez_lanes_avx512(EZ_MIN(rest, 16)), mhi = ez_lanes_avx512(EZ_MAX(rest - 16, 0));
    for (int64_t k = 0; k < kc; k++) {
        const float *src = B + k * ldb;
        float *d = dst + k * NR;
        for (int64_t q = 0; q < full; q++, src += NR, d += kc * NR) {
            _mm512_storeu_ps(d, _mm512_loadu_ps(src));
            _mm512_storeu_ps(d + 16, _mm512_loadu_ps(src + 16));
        }
        if (rest > 0) {
            _mm512_storeu_ps(d, _mm512_maskz_loadu_ps(mlo, src));
            _mm512_storeu_ps(d + 16, _mm512_maskz_loadu_ps(mhi, src + 16));
        }
    }
}

static inline float store_value(float old, float sum, int accumulate) { return accumulate ? old + sum : sum; }

/* The dot kernels give every output the same operations: a 16-wide FMA
 * chain over k from zero, a horizontal sum, a scalar FMA tail; so results
 * do not depend on how outputs are grouped. */
static void finish_dots(int mb, int nb, int64_t k, int64_t K, const float *A, int64_t lda, const float *B,
                        int64_t ldb, const __m512 *sums, float *C, int64_t ldc, int accumulate) {
    for (int i = 0; i < mb; i++)
        for (int j = 0; j < nb; j++) {
            float s = _mm512_reduce_add_ps(sums[i * nb + j]);
            for (int64_t t = k; t < K; t++) s = fmaf(A[i * lda + t], B[j * ldb + t], s);
            C[i * ldc + j] = store_value(C[i * ldc + j], s, accumulate);
        }
}

#define DOT_ROW(acc0, acc1, acc2, acc3, a)          \
    do {                                            \
        __m512 a_ = (a);                            \
        acc0 = _mm512_fmadd_ps(a_, b0, acc0);       \
        acc1 = _mm512_fmadd_ps(a_, b1, acc1);       \
        acc2 = _mm512_fmadd_ps(a_, b2, acc2);       \
        acc3 = _mm512_fmadd_ps(a_, b3, acc3);       \
    } while (0)

/* Six rows of A against four rows of B: 24 accumulators and 4 B vectors;
 * 10 loads per 24 FMAs. */
static void dot_6x4(int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                    int accumulate) {
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00;
    __m512 c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00, c32 = c00, c33 = c00;
    __m512 c40 = c00, c41 = c00, c42 = c00, c43 = c00, c50 = c00, c51 = c00, c52 = c00, c53 = c00;
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 b0 = _mm512_loadu_ps(B + k), b1 = _mm512_loadu_ps(B + ldb + k);
        __m512 b2 = _mm512_loadu_ps(B + 2 * ldb + k), b3 = _mm512_loadu_ps(B + 3 * ldb + k);
        DOT_ROW(c00, c01, c02, c03, _mm512_loadu_ps(A + k));
        DOT_ROW(c10, c11, c12, c13, _mm512_loadu_ps(A + lda + k));
        DOT_ROW(c20, c21, c22, c23, _mm512_loadu_ps(A + 2 * lda + k));
        DOT_ROW(c30, c31, c32, c33, _mm512_loadu_ps(A + 3 * lda + k));
        DOT_ROW(c40, c41, c42, c43, _mm512_loadu_ps(A + 4 * lda + k));
        DOT_ROW(c50, c51, c52, c53, _mm512_loadu_ps(A + 5 * lda + k));
    }
    {
        const __m512 sums[24] = {c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23,
                                 c30, c31, c32, c33, c40, c41, c42, c43, c50, c51, c52, c53};
        finish_dots(6, 4, k, K, A, lda, B, ldb, sums, C, ldc, accumulate);
    }
}

static void dot_1x4(int64_t K, const float *A, const float *B, int64_t ldb, float *C, int accumulate) {
    __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        __m512 b0 = _mm512_loadu_ps(B + k), b1 = _mm512_loadu_ps(B + ldb + k);
        __m512 b2 = _mm512_loadu_ps(B + 2 * ldb + k), b3 = _mm512_loadu_ps(B + 3 * ldb + k);
        DOT_ROW(c0, c1, c2, c3, _mm512_loadu_ps(A + k));
    }
    {
        const __m512 sums[4] = {c0, c1, c2, c3};
        finish_dots(1, 4, k, K, A, 0, B, ldb, sums, C, 0, accumulate);
    }
}

static void dot_1x1(int64_t K, const float *A, const float *B, float *C, int accumulate) {
    __m512 c0 = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) c0 = _mm512_fmadd_ps(_mm512_loadu_ps(A + k), _mm512_loadu_ps(B + k), c0);
    finish_dots(1, 1, k, K, A, 0, B, 0, &c0, C, 0, accumulate);
}

static void rows_nk(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                    float *C, int64_t ldc, int accumulate) {
    int64_t n = 0;
    for (; n + 4 <= N; n += 4) {
        int64_t m = 0;
        for (; m + 6 <= M; m += 6) dot_6x4(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc, accumulate);
        for (; m < M; m++) dot_1x4(K, A + m * lda, B + n * ldb, ldb, C + m * ldc + n, accumulate);
    }
    for (; n < N; n++)
        for (int64_t m = 0; m < M; m++) dot_1x1(K, A + m * lda, B + n * ldb, C + m * ldc + n, accumulate);
}

/* C[m, 0..16*V) for V <= 8 vectors of columns, the last one masked to
 * `last` lanes: per element one FMA chain over k from zero, whatever the
 * width. Called with constant V, so acc[] stays in registers. */
static inline void row_kn_block(int V, __mmask16 last, int64_t K, const float *a, const float *B, int64_t ldb,
                                float *c, int accumulate) {
    __m512 acc[8];
    for (int v = 0; v < V; v++) acc[v] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k++) {
        __m512 ak = _mm512_set1_ps(a[k]);
        for (int v = 0; v < V; v++) {
            const __mmask16 m = v == V - 1 ? last : (__mmask16)0xffff;
            acc[v] = _mm512_fmadd_ps(ak, _mm512_maskz_loadu_ps(m, B + k * ldb + 16 * v), acc[v]);
        }
    }
    for (int v = 0; v < V; v++) {
        const __mmask16 m = v == V - 1 ? last : (__mmask16)0xffff;
        __m512 sum = accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, c + 16 * v), acc[v]) : acc[v];
        _mm512_mask_storeu_ps(c + 16 * v, m, sum);
    }
}

static void rows_kn(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                    float *C, int64_t ldc, int accumulate) {
    for (int64_t m = 0; m < M; m++) {
        const float *a = A + m * lda;
        float *c = C + m * ldc;
        int64_t n = 0;
        for (; n + 128 <= N; n += 128) row_kn_block(8, 0xffff, K, a, B + n, ldb, c + n, accumulate);
        for (; n + 16 <= N; n += 16) row_kn_block(1, 0xffff, K, a, B + n, ldb, c + n, accumulate);
        if (n < N) row_kn_block(1, ez_lanes_avx512(N - n), K, a, B + n, ldb, c + n, accumulate);
    }
}

static const ez_gemm_kernels avx512_kernels = {
    MR, NR,
    256,  /* kc: a 32 KiB B micro-panel in Zen 4/5's 32-48 KiB L1 */
    144,  /* mc: a 144 KiB A block in L2 */
    512,  /* nc */
    24,   /* small_m_nk */
    3,    /* small_m_kn */
    tile_12x32,
    pack_b_nk,
    rows_nk,
    rows_kn,
};

static const ez_gemm_kernels_ext avx512_kernels_ext = {
    tile_direct,
    NULL, /* pack_a */
    pack_b_kn,
};

const ez_gemm_kernels *ez_gemm_kernels_avx512(void) { return &avx512_kernels; }
const ez_gemm_kernels_ext *ez_gemm_kernels_ext_avx512(void) { return &avx512_kernels_ext; }

#else

const ez_gemm_kernels *ez_gemm_kernels_avx512(void) { return NULL; }
const ez_gemm_kernels_ext *ez_gemm_kernels_ext_avx512(void) { return NULL; }

#endif
