/* The per-ISA pieces core/gemm.c and tts/ops_fft.c use beside the
 * ez_gemm_kernels of gemm_kernels.h (which tts/ops.c shares, so its layout
 * stays put). Same packed layouts as there. */
#ifndef EZ_GEMM_KERNELS_EXT_H
#define EZ_GEMM_KERNELS_EXT_H

#include "gemm_kernels.h"

typedef struct {
    /* The tile of ez_gemm_kernels with A read in place: row i of the tile
     * is a + i * lda (any lda, rows may overlap), and only the first `rows`
     * (<= mr) rows of A are read and of C written, and the first `cols`
     * (<= nr) columns of C. Every element gets the same operations as from
     * tile on a packed panel of the same rows, so the same bits. NULL: the
     * ISA packs A (pack_a) and uses tile. */
    void (*tile_direct)(int64_t kc, const float *a, int64_t lda, int rows, const float *b, float *c, int64_t ldc,
                        int cols, int accumulate);

    /* Packs rows [0, m_len) x depth [0, kc) of A into ceil(m_len / mr)
     * zero-padded micro-panels. */
    void (*pack_a)(int64_t kc, int64_t m_len, const float *A, int64_t lda, float *dst);

    /* Packs columns [0, n_len) x depth [0, kc) of a B stored [K, N] into
     * ceil(n_len / nr) zero-padded micro-panels. */
    void (*pack_b_kn)(int64_t kc, int64_t n_len, const float *B, int64_t ldb, float *dst);
} ez_gemm_kernels_ext;

/* NULL when this build or architecture has no such kernels. */
EZ_INTERNAL const ez_gemm_kernels_ext *ez_gemm_kernels_ext_avx2(void);
EZ_INTERNAL const ez_gemm_kernels_ext *ez_gemm_kernels_ext_avx512(void);
EZ_INTERNAL const ez_gemm_kernels_ext *ez_gemm_kernels_ext_neon(void);

/* The tables for the SIMD level in use (core/cpu.h), or NULL (and *ext
 * NULL) when there are none: ELIZA_FORCE_SCALAR or a CPU without them.
 * ext may be NULL when only the base table is wanted. */
EZ_INTERNAL const ez_gemm_kernels *ez_gemm_kernels_active(const ez_gemm_kernels_ext **ext);

#endif /* EZ_GEMM_KERNELS_EXT_H */
