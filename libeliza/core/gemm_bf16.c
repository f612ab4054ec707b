/* The scalar reference of the BF16 tile (kernels/gemm_bf16.h) and the
 * choice of kernels. */
#include "kernels/gemm_bf16.h"

#include <math.h>

#include "cpu.h"

/* A float32 sum as vdpbf16ps leaves it: a subnormal becomes a zero of its sign. */
static float flush(float x) { return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x; }

/* A bf16 input as vdpbf16ps reads it: a subnormal counts as zero. */
static float widen(ez_bf16 h) { return (h & 0x7f80u) == 0 ? 0.0f : ez_bf16_to_f32(h); }

void ez_gemm_bf16_tile_ref(int64_t K, const ez_bf16 *a, int64_t lda, int rows, const ez_bf16 *b, int nr, float *c,
                           int64_t ldc, int cols, int accumulate) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            float sum = 0.0f;
            for (int64_t k = 0; k < K; k += 2) {
                const ez_bf16 *bp = b + (k / 2) * 2 * nr + 2 * j;
                /* a product of two bf16 is exact (in float32's normal range), so
                 * sum + a b rounds once whether or not the compiler fuses it */
                sum = flush(sum + widen(a[i * lda + k + 1]) * widen(bp[1]));
                sum = flush(sum + widen(a[i * lda + k]) * widen(bp[0]));
            }
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + sum : sum;
        }
}

static void tile_ref(int64_t K, const ez_bf16 *a, int64_t lda, int rows, const ez_bf16 *b, float *c, int64_t ldc,
                     int cols, int accumulate) {
    ez_gemm_bf16_tile_ref(K, a, lda, rows, b, EZ_GEMM_BF16_REF_TILE, c, ldc, cols, accumulate);
}

static void round_ref(const float *src, int64_t n, ez_bf16 *dst) {
    for (int64_t i = 0; i < n; i++) dst[i] = ez_bf16_from_f32(src[i]);
}

static void pack_b_kn_ref(int64_t K, int cols, const float *B, int64_t ldb, ez_bf16 *dst) {
    const int nr = EZ_GEMM_BF16_REF_TILE;
    for (int64_t k = 0; k < K + (K & 1); k++)
        for (int j = 0; j < nr; j++)
            dst[(k / 2) * 2 * nr + 2 * j + (k & 1)] = k < K && j < cols ? ez_bf16_from_f32(B[k * ldb + j]) : 0;
}

static const ez_gemm_bf16_kernels ref_kernels = {
    EZ_GEMM_BF16_REF_TILE, EZ_GEMM_BF16_REF_TILE, tile_ref, round_ref, pack_b_kn_ref,
};

const ez_gemm_bf16_kernels *ez_gemm_bf16_kernels_ref(void) { return &ref_kernels; }

const ez_gemm_bf16_kernels *ez_gemm_bf16_kernels_active(void) {
    if (ez_simd_level_active() != EZ_SIMD_AVX512 || !(ez_cpu_features() & EZ_CPU_AVX512BF16)) return NULL;
    return ez_gemm_bf16_kernels_avx512();
}
