/* BF16 products with float32 accumulation: the register tile of a GEMM whose
 * operands are rounded to bfloat16 (1 sign, 8 exponent, 7 mantissa bits) and
 * whose sums stay float32, as AVX512_BF16's vdpbf16ps computes them.
 *
 * Layouts: A is read in place, row i at a + i lda, depth k at a[k] (bf16);
 * B is one packed panel of nr columns, pairs of depth side by side:
 * b[(k / 2) (2 nr) + 2 j + k % 2] for depth k, column j (what vdpbf16ps
 * multiplies lane j by). The tile's depth K is even.
 *
 * Arithmetic (Intel's definition of vdpbf16ps, which the scalar reference
 * follows): bf16 inputs that are subnormal count as zero; a product of two
 * bf16 is exact in float32 (in its normal range); per pair, the odd depth's product is added to
 * the sum first, then the even one's, each addition rounded to nearest even
 * and a subnormal sum flushed to zero. Rounding float32 to bf16 is to
 * nearest even, a subnormal to a zero of its sign, a NaN stays a (quiet)
 * NaN (vcvtneps2bf16). */
#ifndef EZ_GEMM_BF16_H
#define EZ_GEMM_BF16_H

#include <string.h>

#include "../common.h"
#include "../quant.h" /* ez_bf16_to_f32 */

typedef uint16_t ez_bf16;

typedef struct {
    int mr, nr; /* register tile */

    /* c[i ldc + j] = (accumulate ? c[i ldc + j] : 0) + sum over k < K of
     * a[i lda + k] b(k, j) for i < rows (<= mr), j < cols (<= nr); rows
     * past `rows` are neither read nor written, columns past `cols` of the
     * panel are read (zero padding) but not written. The sum is formed from
     * zero and then added, so it does not depend on accumulate. */
    void (*tile)(int64_t K, const ez_bf16 *a, int64_t lda, int rows, const ez_bf16 *b, float *c, int64_t ldc,
                 int cols, int accumulate);

    /* dst[i] = bf16(src[i]) for i < n. */
    void (*round)(const float *src, int64_t n, ez_bf16 *dst);

    /* One panel from a float32 B stored [K][ldb] (b[k ldb + j]): columns
     * [0, cols) rounded to bf16 in the packed layout, zero for columns
     * [cols, nr) and for the pad of an odd K. */
    void (*pack_b_kn)(int64_t K, int cols, const float *B, int64_t ldb, ez_bf16 *dst);
} ez_gemm_bf16_kernels;

/* The scalar reference of every entry, with nr = mr = EZ_GEMM_BF16_REF_TILE
 * (any shape up to it). */
#define EZ_GEMM_BF16_REF_TILE 32
EZ_INTERNAL const ez_gemm_bf16_kernels *ez_gemm_bf16_kernels_ref(void);

/* The same operations with nr given (tests compare the AVX-512 tile with
 * it on the AVX-512 panel width): ez_gemm_bf16_kernels_ref's tile for a
 * panel of nr columns. */
EZ_INTERNAL void ez_gemm_bf16_tile_ref(int64_t K, const ez_bf16 *a, int64_t lda, int rows, const ez_bf16 *b,
                                       int nr, float *c, int64_t ldc, int cols, int accumulate);

/* NULL off x86-64. The caller checks the CPU (ez_gemm_bf16_kernels_active). */
EZ_INTERNAL const ez_gemm_bf16_kernels *ez_gemm_bf16_kernels_avx512(void);

/* The AVX-512 kernels at the avx512 level on a CPU with AVX512_BF16, else
 * NULL (any other level, ELIZA_SIMD pinning a lower one, ELIZA_FORCE_SCALAR). */
EZ_INTERNAL const ez_gemm_bf16_kernels *ez_gemm_bf16_kernels_active(void);

/* float32 to bf16, as defined above (back: quant.h's ez_bf16_to_f32). */
static inline ez_bf16 ez_bf16_from_f32(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0) return (ez_bf16)((u >> 16) & 0x8000u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ez_bf16)((u >> 16) | 0x0040u);
    return (ez_bf16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#endif /* EZ_GEMM_BF16_H */
