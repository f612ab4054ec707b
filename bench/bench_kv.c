/* Single-thread throughput of the KV cache kernels at Gemma 3 270M's decode
 * shape: one key/value head of 256 values shared by 4 query heads, over a
 * cache of N positions: scores = dot4 of the 4 queries with every cached
 * key, then axpy4 of every cached value into the 4 outputs (attend()'s
 * inner loops, the softmax left out). Reference against the table this CPU
 * runs (kv.h).
 *
 *   bench_kv [positions, default 4096] [seconds per measurement, default 0.3]
 *
 * Prints per type: cache bytes per position of one layer and head (K + V),
 * microseconds per pass over the cache, GB/s of cache read, and the
 * nanoseconds that writing one head takes (the store, once per token). Built by
 * the ELIZA_BUILD_BENCH CMake option; links the static library. Times are
 * CPU time (clock()); ELIZA_SIMD pins the fast table's level. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llm/kv.h"
#define HD 256

/* Process CPU time in ns: the machines here are shared, and a single-thread
 * benchmark's CPU time stays comparable under load where wall time does not. */
static double cpu_ns(void) { return (double)clock() * (1e9 / (double)CLOCKS_PER_SEC); }

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* Seconds per pass of the kernels over n cached positions. */
static double measure(const ez_kv_kernels *k, const uint8_t *keys, const uint8_t *vals, size_t row, int n,
                      const float *q, float *w, float *out, double seconds) {
    double t0 = cpu_ns(), t;
    long passes = 0;
    do {
        for (int s = 0; s < n; s++) k->dot4(q, HD, keys + (size_t)s * row, HD, w + 4 * s);
        memset(out, 0, sizeof(float) * 4 * HD);
        for (int s = 0; s < n; s++) {
            const float w4[4] = {w[4 * s] * 1e-3f, w[4 * s + 1] * 1e-3f, w[4 * s + 2] * 1e-3f, w[4 * s + 3] * 1e-3f};
            k->axpy4(out, HD, w4, vals + (size_t)s * row, HD);
        }
        passes++;
        t = cpu_ns();
    } while (t - t0 < seconds * 1e9);
    return (t - t0) / 1e9 / (double)passes;
}

/* Seconds per store of one head. */
static double measure_store(const ez_kv_kernels *k, const float *x, uint8_t *row, double seconds) {
    double t0 = cpu_ns(), t;
    long passes = 0;
    do {
        for (int i = 0; i < 64; i++) k->store(x, row, HD);
        passes += 64;
        t = cpu_ns();
    } while (t - t0 < seconds * 1e9);
    return (t - t0) / 1e9 / (double)passes;
}

int main(int argc, char **argv) {
    const int n = argc > 1 ? atoi(argv[1]) : 4096;
    const double seconds = argc > 2 ? atof(argv[2]) : 0.3;
    float *x = (float *)malloc(sizeof(float) * HD), *q = (float *)malloc(sizeof(float) * 4 * HD);
    float *w = (float *)malloc(sizeof(float) * 4 * (size_t)(n > 0 ? n : 1)), *out = (float *)malloc(sizeof(float) * 4 * HD);
    if (n < 1 || !x || !q || !w || !out) return 1;
    for (int i = 0; i < 4 * HD; i++) q[i] = frand();
    printf("%d positions, head %d, 4 query heads per key/value head, one thread\n", n, HD);
    printf("%-8s %10s %12s %12s %10s %10s %10s\n", "type", "B/pos", "ref us", "fast us", "fast GB/s", "speedup",
           "store ns");
    for (int t = 0; t < EZ_KV_COUNT; t++) {
        const size_t row = ez_kv_row_bytes(t, HD);
        uint8_t *keys = (uint8_t *)malloc(row * (size_t)n), *vals = (uint8_t *)malloc(row * (size_t)n);
        double ref, fast, store;
        if (!keys || !vals) return 1;
        for (int s = 0; s < n; s++) {
            for (int i = 0; i < HD; i++) x[i] = frand();
            ez_kv_kernels_ref(t)->store(x, keys + (size_t)s * row, HD);
            for (int i = 0; i < HD; i++) x[i] = frand();
            ez_kv_kernels_ref(t)->store(x, vals + (size_t)s * row, HD);
        }
        ref = measure(ez_kv_kernels_ref(t), keys, vals, row, n, q, w, out, seconds);
        fast = measure(ez_kv_kernels_active(t), keys, vals, row, n, q, w, out, seconds);
        store = measure_store(ez_kv_kernels_active(t), x, keys, seconds);
        printf("%-8s %10zu %12.1f %12.1f %10.2f %9.2fx %10.0f\n", ez_kv_type_name(t), 2 * row, ref * 1e6, fast * 1e6,
               2.0 * (double)row * n / fast / 1e9, ref / fast, store * 1e9);
        free(keys);
        free(vals);
    }
    free(x);
    free(q);
    free(w);
    free(out);
    return 0;
}
