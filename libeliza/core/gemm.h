/* Matrix products used by the models.
 *
 * ez_gemm_f32: C[M,N] (+)= A[M,K] . op(B), row-major with leading dimensions,
 *   where op(B) is B^T for a B stored [N,K] (trans_b = 1: a GGUF weight, row n
 *   is output n) or B for a B stored [K,N] (trans_b = 0). The fast path packs
 *   panels of B (A is read in place where the ISA allows, packed otherwise)
 *   and runs a register-blocked micro-kernel; the reference is the triple loop.
 *
 * It gives bit-identical results for any pool size (each output is
 * computed by the same operations whichever thread computes it). It uses
 * the pool's scratch slots (ez_pool_scratch): a scratch pointer taken before
 * the call is stale after it. ez_gemm_f32_ref accumulates in double (it is
 * the accuracy yardstick); ELIZA_FORCE_SCALAR=1 makes ez_gemm_f32 run it,
 * split over the pool by columns. */
#ifndef EZ_GEMM_H
#define EZ_GEMM_H

#include "common.h"
#include "pool.h"

EZ_INTERNAL void ez_gemm_f32(ez_pool *pool, int64_t M, int64_t N, int64_t K,
                             const float *A, int64_t lda,
                             const float *B, int64_t ldb, int trans_b,
                             float *C, int64_t ldc, int accumulate);

EZ_INTERNAL void ez_gemm_f32_ref(int64_t M, int64_t N, int64_t K,
                                 const float *A, int64_t lda,
                                 const float *B, int64_t ldb, int trans_b,
                                 float *C, int64_t ldc, int accumulate);

#endif /* EZ_GEMM_H */
