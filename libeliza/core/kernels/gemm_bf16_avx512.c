/* AVX512_BF16 kernels of the BF16 tile (gemm_bf16.h): vdpbf16ps on a
 * 12 x 32 register tile, the shape of gemm_avx512.c's float32 tile (24
 * accumulators, two B vectors and a broadcast in the 32 zmm registers),
 * each instruction two multiply-adds per lane instead of one (on the Intel
 * Xeon measured, with AMX, it retires at a quarter of vfmadd231ps's rate:
 * half the multiply-adds per cycle; bench_gemm tiles). Compiled with the AVX-512 flags (-mavx512bf16
 * among them) and only called where ez_gemm_bf16_kernels_active says the
 * CPU has AVX512_BF16. GCC and Clang only: the bf16 vector types are cast
 * from the integer ones as GNU C vectors (MSVC builds have no BF16 tile). */
#include "gemm_bf16.h"

#if EZ_ARCH_X86_64 && (defined(__GNUC__) || defined(__clang__))

#include <immintrin.h>

#include "core/kernels/vmath_avx512.h"

#define MR 12
#define NR 32

static inline __m512bh pair(const ez_bf16 *a) {
    int32_t v;
    memcpy(&v, a, sizeof v);
    return (__m512bh)_mm512_set1_epi32(v);
}

static inline void store_row(float *c, __m512 lo, __m512 hi, __mmask16 mlo, __mmask16 mhi, int accumulate) {
    if (accumulate) {
        lo = _mm512_add_ps(_mm512_maskz_loadu_ps(mlo, c), lo);
        hi = _mm512_add_ps(_mm512_maskz_loadu_ps(mhi, c + 16), hi);
    }
    _mm512_mask_storeu_ps(c, mlo, lo);
    _mm512_mask_storeu_ps(c + 16, mhi, hi);
}

#define TILE_ROW(a, acc_lo, acc_hi)                     \
    do {                                                \
        __m512bh ai = pair(a);                          \
        acc_lo = _mm512_dpbf16_ps(acc_lo, ai, b0);      \
        acc_hi = _mm512_dpbf16_ps(acc_hi, ai, b1);      \
    } while (0)

/* Rows past `rows` read row 0 again (in bounds) and are dropped. Named
 * accumulators, as in gemm_avx512.c, so gcc keeps them in registers. */
static void tile(int64_t K, const ez_bf16 *a, int64_t lda, int rows, const ez_bf16 *b, float *c, int64_t ldc,
                 int cols, int accumulate) {
    const ez_bf16 *a0 = a, *a1 = rows > 1 ? a + lda : a, *a2 = rows > 2 ? a + 2 * lda : a;
    const ez_bf16 *a3 = rows > 3 ? a + 3 * lda : a, *a4 = rows > 4 ? a + 4 * lda : a;
    const ez_bf16 *a5 = rows > 5 ? a + 5 * lda : a, *a6 = rows > 6 ? a + 6 * lda : a;
    const ez_bf16 *a7 = rows > 7 ? a + 7 * lda : a, *a8 = rows > 8 ? a + 8 * lda : a;
    const ez_bf16 *a9 = rows > 9 ? a + 9 * lda : a, *a10 = rows > 10 ? a + 10 * lda : a;
    const ez_bf16 *a11 = rows > 11 ? a + 11 * lda : a;
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    __m512 c60 = c00, c61 = c00, c70 = c00, c71 = c00, c80 = c00, c81 = c00;
    __m512 c90 = c00, c91 = c00, ca0 = c00, ca1 = c00, cb0 = c00, cb1 = c00;
    for (int64_t k = 0; k < K; k += 2) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + k * NR);
        const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + k * NR + 32);
        TILE_ROW(a0 + k, c00, c01);
        TILE_ROW(a1 + k, c10, c11);
        TILE_ROW(a2 + k, c20, c21);
        TILE_ROW(a3 + k, c30, c31);
        TILE_ROW(a4 + k, c40, c41);
        TILE_ROW(a5 + k, c50, c51);
        TILE_ROW(a6 + k, c60, c61);
        TILE_ROW(a7 + k, c70, c71);
        TILE_ROW(a8 + k, c80, c81);
        TILE_ROW(a9 + k, c90, c91);
        TILE_ROW(a10 + k, ca0, ca1);
        TILE_ROW(a11 + k, cb0, cb1);
    }
    {
        const __mmask16 mlo = ez_lanes_avx512(EZ_MIN(cols, 16)), mhi = ez_lanes_avx512(EZ_MAX(cols - 16, 0));
        store_row(c, c00, c01, mlo, mhi, accumulate);
        if (rows > 1) store_row(c + ldc, c10, c11, mlo, mhi, accumulate);
        if (rows > 2) store_row(c + 2 * ldc, c20, c21, mlo, mhi, accumulate);
        if (rows > 3) store_row(c + 3 * ldc, c30, c31, mlo, mhi, accumulate);
        if (rows > 4) store_row(c + 4 * ldc, c40, c41, mlo, mhi, accumulate);
        if (rows > 5) store_row(c + 5 * ldc, c50, c51, mlo, mhi, accumulate);
        if (rows > 6) store_row(c + 6 * ldc, c60, c61, mlo, mhi, accumulate);
        if (rows > 7) store_row(c + 7 * ldc, c70, c71, mlo, mhi, accumulate);
        if (rows > 8) store_row(c + 8 * ldc, c80, c81, mlo, mhi, accumulate);
        if (rows > 9) store_row(c + 9 * ldc, c90, c91, mlo, mhi, accumulate);
        if (rows > 10) store_row(c + 10 * ldc, ca0, ca1, mlo, mhi, accumulate);
        if (rows > 11) store_row(c + 11 * ldc, cb0, cb1, mlo, mhi, accumulate);
    }
}

/* 32 floats into 32 bf16: vcvtne2ps2bf16 puts its second operand in the low half. */
static inline __m512i round32(const float *src) {
    return (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 16), _mm512_loadu_ps(src));
}

static void round_rows(const float *src, int64_t n, ez_bf16 *dst) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) _mm512_storeu_si512(dst + i, round32(src + i));
    for (; i < n; i += 16) {
        const __mmask16 m = ez_lanes_avx512(EZ_MIN(n - i, (int64_t)16));
        _mm256_mask_storeu_epi16(dst + i, m, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i)));
    }
}

/* Rows k and k + 1 of B interleaved: columns 0-15 of both into the first
 * vector (b(k, j), b(k + 1, j) side by side), 16-31 into the second. */
static void pack_b_kn(int64_t K, int cols, const float *B, int64_t ldb, ez_bf16 *dst) {
    const __mmask16 mlo = ez_lanes_avx512(EZ_MIN(cols, 16)), mhi = ez_lanes_avx512(EZ_MAX(cols - 16, 0));
    const __m512i lo_idx = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38,
                                            6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi_idx = _mm512_add_epi16(lo_idx, _mm512_set1_epi16(16));
    for (int64_t k = 0; k < K; k += 2) {
        const float *r0 = B + k * ldb, *r1 = r0 + ldb;
        const int odd = k + 1 < K;
        /* even row's 32 bf16 in one vector, odd row's in another */
        __m512i e = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(mhi, r0 + 16), _mm512_maskz_loadu_ps(mlo, r0));
        __m512i o = odd ? (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(mhi, r1 + 16),
                                                       _mm512_maskz_loadu_ps(mlo, r1))
                        : _mm512_setzero_si512();
        _mm512_storeu_si512(dst + k * NR, _mm512_permutex2var_epi16(e, lo_idx, o));
        _mm512_storeu_si512(dst + k * NR + 32, _mm512_permutex2var_epi16(e, hi_idx, o));
    }
}

static const ez_gemm_bf16_kernels avx512_kernels = {MR, NR, tile, round_rows, pack_b_kn};

const ez_gemm_bf16_kernels *ez_gemm_bf16_kernels_avx512(void) { return &avx512_kernels; }

#else

const ez_gemm_bf16_kernels *ez_gemm_bf16_kernels_avx512(void) { return NULL; }

#endif
