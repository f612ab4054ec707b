/* CPU feature detection and kernel selection. Detection runs once; the
 * chosen level can be pinned with ELIZA_SIMD=scalar|avx2|avx512 (or
 * neon|neon+dotprod on aarch64), never above what the CPU has, or forced
 * down to the scalar reference with ELIZA_FORCE_SCALAR=1 (both read once,
 * at first use). */
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
    EZ_CPU_AVX512DQ = 1u << 6,
    EZ_CPU_AVX512VNNI = 1u << 7,
    EZ_CPU_AVX512BF16 = 1u << 11,
    EZ_CPU_AVX512VBMI = 1u << 12,
    EZ_CPU_AVXVNNI = 1u << 13,
    EZ_CPU_NEON = 1u << 8,
    EZ_CPU_DOTPROD = 1u << 9,
    EZ_CPU_FP16 = 1u << 10
};

typedef enum {
    EZ_SIMD_SCALAR = 0,
    EZ_SIMD_AVX2 = 1,   /* AVX2 + FMA + F16C */
    EZ_SIMD_NEON = 2,
    EZ_SIMD_NEON_DOTPROD = 3,
    EZ_SIMD_AVX512 = 4  /* AVX2's set + AVX-512 F, DQ, BW, VL, VNNI (BF16 where EZ_CPU_AVX512BF16) */
} ez_simd_level;

/* The EZ_CPU_* bits each level needs. */
#define EZ_CPU_LEVEL_AVX2 (EZ_CPU_AVX2 | EZ_CPU_FMA | EZ_CPU_F16C)
#define EZ_CPU_LEVEL_AVX512 \
    (EZ_CPU_LEVEL_AVX2 | EZ_CPU_AVX512F | EZ_CPU_AVX512DQ | EZ_CPU_AVX512BW | EZ_CPU_AVX512VL | EZ_CPU_AVX512VNNI)

typedef enum { EZ_CPU_VENDOR_OTHER = 0, EZ_CPU_VENDOR_INTEL = 1, EZ_CPU_VENDOR_AMD = 2 } ez_cpu_vendor;

/* What the one probe found. features: the EZ_CPU_* bits the CPU and OS
 * support, whatever is forced. On x86-64 also the vendor (CPUID leaf 0)
 * and the family and model as the vendors' manuals define them (leaf 1:
 * the extended family added where the base family is 0xF, the extended
 * model prepended where the family is 6 or 0xF and above; 0x19 is AMD's
 * Zen 3 and Zen 4, 0x1A Zen 5); elsewhere those are OTHER and 0. A choice
 * that hangs on how fast an instruction runs, not on whether it exists,
 * reads them (the BF16 default of Kokoro, docs/kokoro.md): under a
 * hypervisor they are what it reports. */
typedef struct {
    uint32_t features;
    ez_cpu_vendor vendor;
    unsigned family; /* e.g. 6 for Intel's Core and Xeon, 0x19 for AMD Zen 4 */
    unsigned model;
} ez_cpu_info;

EZ_INTERNAL const ez_cpu_info *ez_cpu_info_get(void);

/* ez_cpu_info_get()->features. */
EZ_INTERNAL uint32_t ez_cpu_features(void);

/* "intel", "amd", "other". */
EZ_INTERNAL const char *ez_cpu_vendor_name(ez_cpu_vendor vendor);

/* The kernel level in use: the best the CPU and this build support, the
 * level ELIZA_SIMD pins (when the CPU has it), or EZ_SIMD_SCALAR under
 * ELIZA_FORCE_SCALAR=1. */
EZ_INTERNAL ez_simd_level ez_simd_level_active(void);

/* Nonzero when the kernels of `level` may run: the active level is `level`
 * or one above it on the same architecture (the AVX2 kernels run at
 * avx512 too, the NEON ones at neon+dotprod). Dispatchers without a kernel
 * of the active level fall back through this. */
EZ_INTERNAL int ez_simd_at_least(ez_simd_level level);

/* The one dispatch rule of every kernel table (or kernel function): the
 * first candidate, best first, that the active level may run
 * (ez_simd_at_least) and that this build, CPU or type has (non-NULL; pass
 * NULL for a level with no table), else `fallback`: the scalar reference,
 * or NULL where the caller then runs its reference itself. Under
 * ELIZA_FORCE_SCALAR (level scalar) that is always the fallback. The
 * candidates are calls of getters without side effects: a chosen one is
 * evaluated twice. */
#define EZ_SIMD_PICK(avx512, avx2, neon_dotprod, neon, fallback)                  \
    (ez_simd_at_least(EZ_SIMD_AVX512) && (avx512)               ? (avx512)       \
     : ez_simd_at_least(EZ_SIMD_AVX2) && (avx2)                 ? (avx2)         \
     : ez_simd_at_least(EZ_SIMD_NEON_DOTPROD) && (neon_dotprod) ? (neon_dotprod) \
     : ez_simd_at_least(EZ_SIMD_NEON) && (neon)                 ? (neon)         \
                                                                : (fallback))

/* "scalar", "avx2", "avx512", "neon", "neon+dotprod". */
EZ_INTERNAL const char *ez_simd_level_name(ez_simd_level level);

/* Nonzero when ELIZA_FORCE_SCALAR is set. */
EZ_INTERNAL int ez_force_scalar(void);

#endif /* EZ_CPU_H */
