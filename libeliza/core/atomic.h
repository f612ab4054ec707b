/* Atomics shared by the modules: C11 <stdatomic.h> where the compiler has
 * it, Interlocked* on MSVC. All operations are sequentially consistent
 * (MSVC x64 loads: a plain load plus a compiler barrier, which x64 makes an
 * acquire). */
#ifndef EZ_ATOMIC_H
#define EZ_ATOMIC_H

#include "common.h"

#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#else
#include <stdatomic.h>
#endif

#if defined(_MSC_VER) && !defined(__clang__)
typedef volatile long ez_atomic_int;
typedef volatile __int64 ez_atomic_i64;

/* x64 loads are acquire loads and MSVC keeps volatile accesses in order;
 * elsewhere an interlocked no-op gives the ordering. */
static inline int ez_atomic_int_load(ez_atomic_int *a) {
#if defined(_M_X64)
    long v = *a;
    _ReadWriteBarrier();
    return (int)v;
#else
    return (int)_InterlockedOr(a, 0);
#endif
}
static inline int64_t ez_atomic_i64_load(ez_atomic_i64 *a) {
#if defined(_M_X64)
    __int64 v = *a;
    _ReadWriteBarrier();
    return v;
#else
    return _InterlockedOr64(a, 0);
#endif
}
static inline void ez_atomic_int_store(ez_atomic_int *a, int v) { _InterlockedExchange(a, v); }
static inline int ez_atomic_int_add(ez_atomic_int *a, int v) { return (int)_InterlockedExchangeAdd(a, v); }
static inline void ez_atomic_i64_store(ez_atomic_i64 *a, int64_t v) { _InterlockedExchange64(a, v); }
static inline int64_t ez_atomic_i64_add(ez_atomic_i64 *a, int64_t v) { return _InterlockedExchangeAdd64(a, v); }
static inline int ez_atomic_i64_cas(ez_atomic_i64 *a, int64_t expected, int64_t desired) {
    return _InterlockedCompareExchange64(a, desired, expected) == expected;
}
/* A full barrier: an interlocked operation orders everything on MSVC targets. */
static inline void ez_atomic_fence(void) {
    static volatile long fence_target;
    _InterlockedOr(&fence_target, 0);
}
#else
typedef atomic_int ez_atomic_int;
typedef _Atomic int64_t ez_atomic_i64;

static inline int ez_atomic_int_load(ez_atomic_int *a) { return atomic_load(a); }
static inline int64_t ez_atomic_i64_load(ez_atomic_i64 *a) { return atomic_load(a); }
static inline void ez_atomic_int_store(ez_atomic_int *a, int v) { atomic_store(a, v); }
static inline int ez_atomic_int_add(ez_atomic_int *a, int v) { return atomic_fetch_add(a, v); }
static inline void ez_atomic_i64_store(ez_atomic_i64 *a, int64_t v) { atomic_store(a, v); }
static inline int64_t ez_atomic_i64_add(ez_atomic_i64 *a, int64_t v) { return atomic_fetch_add(a, v); }
static inline int ez_atomic_i64_cas(ez_atomic_i64 *a, int64_t expected, int64_t desired) {
    return atomic_compare_exchange_strong(a, &expected, desired);
}
static inline void ez_atomic_fence(void) { atomic_thread_fence(memory_order_seq_cst); }
#endif

#endif /* EZ_ATOMIC_H */
