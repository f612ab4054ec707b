/* The per-ISA pieces of the fast Kokoro ops; tts/ops.c does the blocking,
 * the packing and the threading around them (and takes its GEMM tiles from
 * core/kernels/gemm_kernels.h). Each table entry has a portable C version in
 * ops.c; ops_avx2.c has the AVX2 + FMA ones, ops_neon.c the NEON ones.
 *
 * Vector sin and exp are polynomial approximations (Cephes' single-precision
 * ones): see ops_avx2.c for their error bounds, and tests/c/test_tts_ops.c
 * for the bounds the ops are held to. */
#ifndef EZ_TTS_OPS_KERNELS_H
#define EZ_TTS_OPS_KERNELS_H

#include "core/common.h"

enum { EZ_TTS_ACT_NONE = 0, EZ_TTS_ACT_SNAKE = 1, EZ_TTS_ACT_LEAKY_RELU = 2 };

typedef struct {
    /* x[i] += (1 / alpha) * sin(alpha x[i])^2 over n values. */
    void (*snake)(float *x, int64_t n, float alpha);

    /* Mean and biased variance of x[0..n), two passes, sums in double. */
    void (*mean_var)(const float *x, int64_t n, double *mean, double *var);

    /* x[i] = scale * ((x[i] - mean) * inv) + shift over n values, with
     * x[i] - mean formed in double and rounded once (as the reference
     * does), then the activation `act` (EZ_TTS_ACT_*)
     * with its parameter (Snake's alpha, leaky ReLU's slope). */
    void (*affine_act)(float *x, int64_t n, double mean, float inv, float scale, float shift, int act,
                       float param);

    /* ez_tts_gelu_tanh over n values (the AVX2 one as x / (1 + e^-2u),
     * which is 0.5 x (1 + tanh u)). */
    void (*gelu_tanh)(float *x, int64_t n);
} ez_tts_kernels;

/* NULL when this build or architecture has no AVX2 code; the caller checks
 * ez_simd_level_active() first. */
EZ_INTERNAL const ez_tts_kernels *ez_tts_kernels_avx2(void);
/* The same for AVX-512 (ops_avx512.c). */
EZ_INTERNAL const ez_tts_kernels *ez_tts_kernels_avx512(void);
/* NULL off aarch64 (ops_neon.c). */
EZ_INTERNAL const ez_tts_kernels *ez_tts_kernels_neon(void);

#endif /* EZ_TTS_OPS_KERNELS_H */
