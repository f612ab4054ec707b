/* Run-time CPU feature detection. x86-64 reads CPUID and XGETBV (the OS must
 * save the YMM/ZMM state for AVX to be usable); aarch64 reads the kernel's
 * hwcaps (NEON is architectural on aarch64). */
#include "cpu.h"

#include <stdlib.h>
#include <string.h>

#include "atomic.h"
#include "error.h"
#include "platform.h"

#if defined(EZ_ARCH_X86_64)
#if defined(_MSC_VER)
#include <intrin.h>
static void cpuid(int leaf, int sub, unsigned r[4]) {
    int v[4];
    __cpuidex(v, leaf, sub);
    r[0] = (unsigned)v[0]; r[1] = (unsigned)v[1]; r[2] = (unsigned)v[2]; r[3] = (unsigned)v[3];
}
static uint64_t xgetbv0(void) { return _xgetbv(0); }
#else
#include <cpuid.h>
static void cpuid(int leaf, int sub, unsigned r[4]) {
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}
static uint64_t xgetbv0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}
#endif

/* Leaf 0's vendor string is EBX, EDX, ECX. */
static ez_cpu_vendor vendor_of(const unsigned r[4]) {
    char s[13];
    memcpy(s, &r[1], 4);
    memcpy(s + 4, &r[3], 4);
    memcpy(s + 8, &r[2], 4);
    s[12] = 0;
    if (strcmp(s, "GenuineIntel") == 0) return EZ_CPU_VENDOR_INTEL;
    if (strcmp(s, "AuthenticAMD") == 0) return EZ_CPU_VENDOR_AMD;
    return EZ_CPU_VENDOR_OTHER;
}

/* Leaf 1's EAX: the family and model as Intel's and AMD's manuals compose
 * them from the base and extended fields. */
static void family_model(unsigned eax, ez_cpu_info *info) {
    const unsigned base_family = (eax >> 8) & 0xf;
    info->family = base_family == 0xf ? base_family + ((eax >> 20) & 0xff) : base_family;
    info->model = (eax >> 4) & 0xf;
    if (base_family == 6 || base_family == 0xf) info->model |= ((eax >> 16) & 0xf) << 4;
}

/* XCR0 bits 1-2 (SSE, AVX state) for the YMM registers, bits 5-7 (opmask,
 * ZMM0-15 upper halves, ZMM16-31) for AVX-512. */
static ez_cpu_info detect(void) {
    ez_cpu_info info = {0, EZ_CPU_VENDOR_OTHER, 0, 0};
    unsigned r[4], max_leaf, max_sub7;
    uint32_t f = 0;
    int osxsave, ymm_ok = 0, zmm_ok = 0;

    cpuid(0, 0, r);
    max_leaf = r[0];
    info.vendor = vendor_of(r);
    if (max_leaf < 1) return info;
    cpuid(1, 0, r);
    family_model(r[0], &info);
    if (max_leaf < 7) return info;
    osxsave = (r[2] >> 27) & 1;
    if (osxsave) {
        uint64_t xcr0 = xgetbv0();
        ymm_ok = (xcr0 & 0x6) == 0x6;
        zmm_ok = ymm_ok && (xcr0 & 0xe0) == 0xe0;
    }
    if (ymm_ok && ((r[2] >> 12) & 1)) f |= EZ_CPU_FMA;
    if (ymm_ok && ((r[2] >> 29) & 1)) f |= EZ_CPU_F16C;
    cpuid(7, 0, r);
    max_sub7 = r[0];
    if (ymm_ok && ((r[1] >> 5) & 1)) f |= EZ_CPU_AVX2;
    if (zmm_ok && ((r[1] >> 16) & 1)) f |= EZ_CPU_AVX512F;
    if (zmm_ok && ((r[1] >> 17) & 1)) f |= EZ_CPU_AVX512DQ;
    if (zmm_ok && ((r[1] >> 30) & 1)) f |= EZ_CPU_AVX512BW;
    if (zmm_ok && ((r[1] >> 31) & 1)) f |= EZ_CPU_AVX512VL;
    if (zmm_ok && ((r[2] >> 1) & 1)) f |= EZ_CPU_AVX512VBMI;
    if (zmm_ok && ((r[2] >> 11) & 1)) f |= EZ_CPU_AVX512VNNI;
    if (max_sub7 >= 1) {
        cpuid(7, 1, r);
        if (ymm_ok && ((r[0] >> 4) & 1)) f |= EZ_CPU_AVXVNNI;
        if (zmm_ok && ((r[0] >> 5) & 1)) f |= EZ_CPU_AVX512BF16;
    }
    info.features = f;
    return info;
}

#elif defined(EZ_ARCH_AARCH64)
#if defined(__linux__)
#include <sys/auxv.h>
#define EZ_HWCAP_ASIMDHP (1UL << 10)
#define EZ_HWCAP_ASIMDDP (1UL << 20)
static ez_cpu_info detect(void) {
    unsigned long hw = getauxval(AT_HWCAP);
    ez_cpu_info info = {EZ_CPU_NEON, EZ_CPU_VENDOR_OTHER, 0, 0};
    if (hw & EZ_HWCAP_ASIMDDP) info.features |= EZ_CPU_DOTPROD;
    if (hw & EZ_HWCAP_ASIMDHP) info.features |= EZ_CPU_FP16;
    return info;
}
#elif defined(__APPLE__)
#include <sys/sysctl.h>
static int sysctl_flag(const char *name) {
    int v = 0;
    size_t n = sizeof v;
    return sysctlbyname(name, &v, &n, NULL, 0) == 0 && v;
}
static ez_cpu_info detect(void) {
    ez_cpu_info info = {EZ_CPU_NEON, EZ_CPU_VENDOR_OTHER, 0, 0};
    if (sysctl_flag("hw.optional.arm.FEAT_DotProd")) info.features |= EZ_CPU_DOTPROD;
    if (sysctl_flag("hw.optional.arm.FEAT_FP16")) info.features |= EZ_CPU_FP16;
    return info;
}
#else
/* Other aarch64 systems (Windows on ARM): NEON only, the safe floor. */
static ez_cpu_info detect(void) {
    ez_cpu_info info = {EZ_CPU_NEON, EZ_CPU_VENDOR_OTHER, 0, 0};
    return info;
}
#endif

#else
static ez_cpu_info detect(void) {
    ez_cpu_info info = {0, EZ_CPU_VENDOR_OTHER, 0, 0};
    return info;
}
#endif

/* Written once under the global lock, then published through g_ready: the
 * kernels ask for the level on every product, so after the first call the
 * answer costs one atomic load, not a lock. */
static ez_atomic_int g_ready;
static ez_cpu_info g_cpu;
static int g_force_scalar;
static ez_simd_level g_level;

static int has(uint32_t f, uint32_t need) { return (f & need) == need; }

static ez_simd_level best_level(uint32_t f) {
    if (has(f, EZ_CPU_LEVEL_AVX512)) return EZ_SIMD_AVX512;
    if (has(f, EZ_CPU_LEVEL_AVX2)) return EZ_SIMD_AVX2;
    if (f & EZ_CPU_DOTPROD) return EZ_SIMD_NEON_DOTPROD;
    if (f & EZ_CPU_NEON) return EZ_SIMD_NEON;
    return EZ_SIMD_SCALAR;
}

/* Rank within the level's architecture (scalar < avx2 < avx512, scalar <
 * neon < neon+dotprod) and the architecture itself (0 for scalar). */
static int level_rank(ez_simd_level l) {
    switch (l) {
    case EZ_SIMD_AVX2: case EZ_SIMD_NEON: return 1;
    case EZ_SIMD_AVX512: case EZ_SIMD_NEON_DOTPROD: return 2;
    case EZ_SIMD_SCALAR: break;
    }
    return 0;
}

static int level_arch(ez_simd_level l) {
    return l == EZ_SIMD_AVX2 || l == EZ_SIMD_AVX512 ? 1 : l == EZ_SIMD_SCALAR ? 0 : 2;
}

/* ELIZA_SIMD=<name> pins a level at or below the CPU's best. A level the
 * CPU lacks, or a name that is no level, keeps the best one; *refused is
 * then set, for a warning. */
static ez_simd_level pinned_level(ez_simd_level best, int *refused) {
    static const ez_simd_level all[] = {EZ_SIMD_SCALAR, EZ_SIMD_AVX2, EZ_SIMD_AVX512, EZ_SIMD_NEON,
                                        EZ_SIMD_NEON_DOTPROD};
    const char *env = getenv("ELIZA_SIMD");
    size_t i;
    if (!env || !*env) return best;
    for (i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(env, ez_simd_level_name(all[i])) != 0) continue;
        if (all[i] == EZ_SIMD_SCALAR ||
            (level_arch(all[i]) == level_arch(best) && level_rank(all[i]) <= level_rank(best)))
            return all[i];
        break;
    }
    *refused = 1;
    return best;
}

static void init_once(void) {
    int refused = 0;
    if (ez_atomic_int_load(&g_ready)) return;
    ez_global_lock();
    if (!ez_atomic_int_load(&g_ready)) {
        g_cpu = detect();
        g_force_scalar = ez_env_flag("ELIZA_FORCE_SCALAR");
        g_level = g_force_scalar ? EZ_SIMD_SCALAR : pinned_level(best_level(g_cpu.features), &refused);
        ez_atomic_int_store(&g_ready, 1);
    }
    ez_global_unlock();
    /* ez_log takes the global lock itself. */
    if (refused)
        ez_log(ELIZA_LOG_WARN, "ELIZA_SIMD=%s is not a level this CPU has (scalar, avx2, avx512, neon, "
               "neon+dotprod); using %s", getenv("ELIZA_SIMD"), ez_simd_level_name(g_level));
}

const ez_cpu_info *ez_cpu_info_get(void) {
    init_once();
    return &g_cpu;
}

uint32_t ez_cpu_features(void) { return ez_cpu_info_get()->features; }

const char *ez_cpu_vendor_name(ez_cpu_vendor vendor) {
    switch (vendor) {
    case EZ_CPU_VENDOR_INTEL: return "intel";
    case EZ_CPU_VENDOR_AMD: return "amd";
    case EZ_CPU_VENDOR_OTHER: break;
    }
    return "other";
}

ez_simd_level ez_simd_level_active(void) {
    init_once();
    return g_level;
}

int ez_simd_at_least(ez_simd_level level) {
    const ez_simd_level active = ez_simd_level_active();
    return level_arch(active) == level_arch(level) && level_rank(active) >= level_rank(level);
}

int ez_force_scalar(void) {
    init_once();
    return g_force_scalar;
}

const char *ez_simd_level_name(ez_simd_level level) {
    switch (level) {
    case EZ_SIMD_AVX2: return "avx2";
    case EZ_SIMD_AVX512: return "avx512";
    case EZ_SIMD_NEON: return "neon";
    case EZ_SIMD_NEON_DOTPROD: return "neon+dotprod";
    case EZ_SIMD_SCALAR: break;
    }
    return "scalar";
}
