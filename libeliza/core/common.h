/* Internal conventions shared by every module of libeliza.
 * Internal symbols are ez_<module>_...; EZ_INTERNAL hides them from the
 * shared library's export table. */
#ifndef EZ_COMMON_H
#define EZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "eliza.h"

#if defined(_WIN32)
/* PE/COFF exports only what ELIZA_API marks; there is no "hidden". */
#define EZ_INTERNAL
#elif defined(__GNUC__) || defined(__clang__)
#define EZ_INTERNAL __attribute__((visibility("hidden")))
#else
#define EZ_INTERNAL
#endif

#if defined(__GNUC__) || defined(__clang__)
#if defined(__MINGW32__)
/* With __USE_MINGW_ANSI_STDIO the C99 printf is used, not msvcrt's. */
#define EZ_PRINTF(fmt_idx, arg_idx) __attribute__((format(gnu_printf, fmt_idx, arg_idx)))
#else
#define EZ_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#endif
#define EZ_LIKELY(x) __builtin_expect(!!(x), 1)
#define EZ_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define EZ_ALIGNED(n) __attribute__((aligned(n)))
/* For a kernel body shared by variants that differ in a constant argument. */
#define EZ_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define EZ_PRINTF(fmt_idx, arg_idx)
#define EZ_LIKELY(x) (x)
#define EZ_UNLIKELY(x) (x)
#define EZ_ALIGNED(n) __declspec(align(n))
#define EZ_ALWAYS_INLINE __forceinline
#endif

#if defined(_MSC_VER)
#define EZ_THREAD_LOCAL __declspec(thread)
#else
#define EZ_THREAD_LOCAL _Thread_local
#endif

#if defined(__x86_64__) || defined(_M_X64)
#define EZ_ARCH_X86_64 1
#endif
#if defined(__aarch64__) || defined(_M_ARM64)
#define EZ_ARCH_AARCH64 1
#endif

#define EZ_MIN(a, b) ((a) < (b) ? (a) : (b))
#define EZ_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Whether the caller's struct (of public type `type`, sized by its leading
 * struct_size) reaches past `field`: an ABI struct only grows at the end,
 * so a library reads only the fields an older host's struct has. */
#define EZ_FITS(ptr, type, field) ((ptr)->struct_size >= offsetof(type, field) + sizeof((ptr)->field))

/* Overflow-checked size arithmetic: return 0 and leave *out untouched on
 * overflow, 1 otherwise. */
static inline int ez_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (a > UINT64_MAX - b) return 0;
    *out = a + b;
    return 1;
}
static inline int ez_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (a != 0 && b > UINT64_MAX / a) return 0;
    *out = a * b;
    return 1;
}

#endif /* EZ_COMMON_H */
