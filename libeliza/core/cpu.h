/* CPU feature detection and kernel selection. Detection runs once; the
 * chosen level can be forced down to the scalar reference with
 * ELIZA_FORCE_SCALAR=1 (read once, at first use). */
#ifndef EZ_CPU_H
#define EZ_CPU_H

#include "common.h"

enum {
    EZ_CPU_AVX2 = 1u << 0,
    EZ_CPU_FMA = 1u << 1,
    EZ_CPU_F16C = 1u << 2,
    EZ_CPU_AVX512F = 1u << 3,
    EZ_CPU_AVX512BW = 1u << 4,
    EZ_CPU_AVX512VL = 1u << 5,
    EZ_CPU_NEON = 1u << 8,
    EZ_CPU_DOTPROD = 1u << 9,
    EZ_CPU_FP16 = 1u << 10
};

typedef enum {
    EZ_SIMD_SCALAR = 0,
    EZ_SIMD_AVX2 = 1,   /* AVX2 + FMA + F16C */
    EZ_SIMD_NEON = 2,
    EZ_SIMD_NEON_DOTPROD = 3
} ez_simd_level;

/* Features the CPU and OS support (EZ_CPU_* bits), whatever is forced. */
EZ_INTERNAL uint32_t ez_cpu_features(void);

/* The kernel level in use: the best the CPU and this build support, or
 * EZ_SIMD_SCALAR under ELIZA_FORCE_SCALAR=1. */
EZ_INTERNAL ez_simd_level ez_simd_level_active(void);

/* "scalar", "avx2", "neon", "neon+dotprod". */
EZ_INTERNAL const char *ez_simd_level_name(ez_simd_level level);

/* Nonzero when ELIZA_FORCE_SCALAR is set. */
EZ_INTERNAL int ez_force_scalar(void);

#endif /* EZ_CPU_H */
