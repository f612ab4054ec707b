/* The per-ISA pieces of ez_gemm_f32; core/gemm.c does the blocking, the
 * packing and the threading around them.
 *
 * Packed layouts: an A micro-panel holds mr rows of a kc-deep slice of A,
 * k-major (a[k * mr + i]); a B micro-panel holds nr columns of op(B),
 * k-major (b[k * nr + j]). Panels are zero-padded past the matrix edge, so
 * the tile kernel always computes a whole mr x nr tile. */
#ifndef EZ_GEMM_KERNELS_H
#define EZ_GEMM_KERNELS_H

#include "../common.h"

/* Largest mr * nr of any ISA: the size of the edge-tile buffer. */
#define EZ_GEMM_MAX_TILE 384

typedef struct {
    int mr, nr;   /* register tile */
    int kc;       /* depth of a packed slice: one B micro-panel (kc * nr floats) stays in L1 */
    int mc;       /* rows of a packed A block (a multiple of mr): the block stays in L2 */
    int nc;       /* widest packed B panel (a multiple of nr) */
    int small_m_nk; /* up to this many rows of A the row kernels beat packing, B stored [N, K] */
    int small_m_kn; /* the same for B stored [K, N] */

    /* c[i*ldc + j] = (accumulate ? c[i*ldc + j] : 0) + sum over k of
     * a[k*mr + i] * b[k*nr + j]. The sum is formed from zero and then added,
     * so an element gets the same bits whether its tile is written in place
     * or through the edge buffer. */
    void (*tile)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int accumulate);

    /* Packs rows [0, n_len) x depth [0, kc) of a B stored [N, K] (a
     * transpose) into ceil(n_len / nr) zero-padded micro-panels. NULL: the
     * portable packer in gemm.c. */
    void (*pack_b_nk)(int64_t kc, int64_t n_len, const float *B, int64_t ldb, float *dst);

    /* Direct kernels for small M, without packing; C and B point at the first
     * column to compute. rows_nk: B stored [N, K] (C[m,n] = dot of A row m and
     * B row n). rows_kn: B stored [K, N]. Every element is computed by the
     * same operations whatever its position, so results do not depend on how
     * the columns were split between threads. */
    void (*rows_nk)(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                    float *C, int64_t ldc, int accumulate);
    void (*rows_kn)(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                    float *C, int64_t ldc, int accumulate);
} ez_gemm_kernels;

/* NULL when this build or architecture has no such kernels; the caller
 * checks the CPU (ez_simd_level_active) before using them. */
EZ_INTERNAL const ez_gemm_kernels *ez_gemm_kernels_avx2(void);
EZ_INTERNAL const ez_gemm_kernels *ez_gemm_kernels_avx512(void);
EZ_INTERNAL const ez_gemm_kernels *ez_gemm_kernels_neon(void);

#endif /* EZ_GEMM_KERNELS_H */
