/* Single-thread GEMV throughput of the quantized dot kernels, reference
 * against the kernels ez_kernels() picks on this CPU, at Gemma 3 270M's
 * shapes: y[rows] = W[rows, cols] . x[cols], with x quantized to the
 * weight type's activation format inside the timed region.
 *
 *   bench_kernels [seconds per measurement, default 0.3]
 *
 * Prints, per type and shape, GB/s of weight bytes streamed and rows/s.
 * ELIZA_FORCE_SCALAR=1 makes both columns the reference. Built by hand or by
 * the ELIZA_BUILD_BENCH CMake option; links the static library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/platform.h"
#include "core/quant.h"

typedef struct {
    uint32_t type;
    int64_t rows, cols;
    const char *what;
} shape;

static const shape g_shapes[] = {
    {EZ_TYPE_F32, 640, 2048, "ffn_down"},    {EZ_TYPE_F32, 2048, 640, "ffn_up"},
    /* as many weight bytes as the Q8_0 lm_head: the memory-bound yardstick */
    {EZ_TYPE_F32, 65536, 680, "stream"},
    {EZ_TYPE_F16, 640, 2048, "ffn_down"},    {EZ_TYPE_F16, 2048, 640, "ffn_up"},
    {EZ_TYPE_BF16, 640, 2048, "ffn_down"},   {EZ_TYPE_BF16, 2048, 640, "ffn_up"},
    {EZ_TYPE_Q4_0, 640, 2048, "ffn_down"},   {EZ_TYPE_Q4_0, 2048, 640, "ffn_up"},
    {EZ_TYPE_Q5_0, 640, 2048, "ffn_down"},   {EZ_TYPE_Q5_0, 2048, 640, "ffn_up"},
    {EZ_TYPE_Q8_0, 640, 2048, "ffn_down"},   {EZ_TYPE_Q8_0, 2048, 640, "ffn_up"},
    {EZ_TYPE_Q8_0, 262144, 640, "lm_head"},  {EZ_TYPE_Q4_K, 640, 2048, "ffn_down"},
    {EZ_TYPE_Q5_K, 640, 2048, "ffn_down"},   {EZ_TYPE_Q6_K, 640, 2048, "ffn_down"},
    {EZ_TYPE_IQ2_XXS, 640, 2048, "ffn_down"}, {EZ_TYPE_IQ2_XS, 640, 2048, "ffn_down"},
    {EZ_TYPE_IQ2_S, 640, 2048, "ffn_down"},   {EZ_TYPE_IQ3_XXS, 640, 2048, "ffn_down"},
    {EZ_TYPE_IQ3_S, 640, 2048, "ffn_down"},   {EZ_TYPE_IQ1_S, 640, 2048, "ffn_down"},
    {EZ_TYPE_IQ1_M, 640, 2048, "ffn_down"},   {EZ_TYPE_TQ1_0, 640, 2048, "ffn_down"},
    {EZ_TYPE_Q4_1, 640, 2048, "ffn_down"},    {EZ_TYPE_Q5_1, 640, 2048, "ffn_down"},
    {EZ_TYPE_Q2_K, 640, 2048, "ffn_down"},    {EZ_TYPE_Q3_K, 640, 2048, "ffn_down"},
    {EZ_TYPE_IQ4_NL, 640, 2048, "ffn_down"},  {EZ_TYPE_IQ4_XS, 640, 2048, "ffn_down"},
    {EZ_TYPE_TQ2_0, 640, 2048, "ffn_down"},   {EZ_TYPE_MXFP4, 640, 2048, "ffn_down"},
};

static uint64_t g_rng = 0x1234567887654321ull;

static uint64_t rng_u64(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static float rng_float(void) {
    return (float)((double)(rng_u64() >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* Random quant bits with float16 block scales of 2^-8 (the offsets of d,
 * and dmin for Q4_K / Q5_K) so the dots stay finite; random floats for the
 * float types. */
static void fill_weights(uint32_t type, uint8_t *w, uint64_t bytes) {
    const ez_type_traits *tr = ez_type_traits_of(type);
    const uint16_t scale = ez_f32_to_f16(1.0f / 256);
    uint64_t i, nb = bytes / tr->type_size;
    for (i = 0; i < bytes; i++) w[i] = (uint8_t)rng_u64();
    for (i = 0; i < nb; i++) {
        uint8_t *b = w + i * tr->type_size;
        float f = rng_float();
        uint16_t h;
        switch (type) {
        case EZ_TYPE_F32: memcpy(b, &f, 4); break;
        case EZ_TYPE_F16: h = ez_f32_to_f16(f); memcpy(b, &h, 2); break;
        case EZ_TYPE_BF16: memcpy(b, (uint8_t *)&f + 2, 2); break;
        case EZ_TYPE_Q4_K:
        case EZ_TYPE_Q5_K: memcpy(b + 2, &scale, 2); memcpy(b, &scale, 2); break;
        case EZ_TYPE_Q6_K: memcpy(b + 208, &scale, 2); break;
        case EZ_TYPE_TQ1_0: memcpy(b + 52, &scale, 2); break;
        case EZ_TYPE_TQ2_0: memcpy(b + 64, &scale, 2); break;
        case EZ_TYPE_Q3_K: memcpy(b + 108, &scale, 2); break;
        case EZ_TYPE_Q2_K: memcpy(b + 80, &scale, 2); memcpy(b + 82, &scale, 2); break;
        case EZ_TYPE_Q4_1:
        case EZ_TYPE_Q5_1: memcpy(b, &scale, 2); memcpy(b + 2, &scale, 2); break;
        case EZ_TYPE_MXFP4: b[0] = 120; break;
        default: memcpy(b, &scale, 2); break;
        }
    }
}

static volatile float g_sink;

/* Seconds per GEMV: the best of repeated runs over at least `budget`
 * seconds (three runs at least). */
static double time_gemv(const ez_type_kernels *k, const ez_type_kernels *act, const shape *s, const uint8_t *w,
                        uint64_t row_bytes, const float *x, void *xq, float *y, double budget) {
    double best = 1e30, spent = 0.0;
    int runs = 0;
    while (runs < 3 || spent < budget) {
        const uint64_t t0 = ez_time_ns();
        const void *xv = x;
        double t;
        int64_t r;
        if (act) {
            act->quant(x, xq, s->cols);
            xv = xq;
        }
        for (r = 0; r < s->rows; r++) y[r] = k->dot(s->cols, w + (uint64_t)r * row_bytes, xv);
        t = (double)(ez_time_ns() - t0) * 1e-9;
        g_sink = y[s->rows - 1];
        if (t < best) best = t;
        spent += t;
        runs++;
    }
    return best;
}

int main(int argc, char **argv) {
    const double budget = argc > 1 ? atof(argv[1]) : 0.3;
    size_t i;
    printf("kernels: %s, single thread, best of >= %.2f s per measurement\n",
           ez_simd_level_name(ez_simd_level_active()), budget);
    printf("%-5s %-8s %-13s %9s | %9s %12s | %9s %12s | %7s\n", "type", "tensor", "rows x cols", "weights",
           "ref GB/s", "ref rows/s", "fast GB/s", "fast rows/s", "speedup");
    for (i = 0; i < sizeof g_shapes / sizeof g_shapes[0]; i++) {
        const shape *s = &g_shapes[i];
        const ez_type_traits *tr = ez_type_traits_of(s->type);
        const uint64_t row_bytes = ez_row_bytes(s->type, (uint64_t)s->cols);
        const uint64_t bytes = row_bytes * (uint64_t)s->rows;
        const uint32_t vt = tr->vec_dot_type;
        const ez_type_kernels *act = vt == EZ_TYPE_F32 ? NULL : ez_kernels(vt);
        uint8_t *w = (uint8_t *)ez_aligned_alloc((size_t)bytes);
        float *x = (float *)malloc((size_t)s->cols * sizeof(float));
        void *xq = malloc((size_t)ez_row_bytes(vt, (uint64_t)s->cols) + 64);
        float *y = (float *)malloc((size_t)s->rows * sizeof(float));
        double t_ref, t_fast;
        int64_t j;
        char dims[32];
        if (!w || !x || !xq || !y) {
            fprintf(stderr, "out of memory for %s %lldx%lld\n", tr->name, (long long)s->rows, (long long)s->cols);
            return 1;
        }
        fill_weights(s->type, w, bytes);
        for (j = 0; j < s->cols; j++) x[j] = rng_float();
        t_ref = time_gemv(ez_kernels_ref(s->type), act, s, w, row_bytes, x, xq, y, budget);
        t_fast = time_gemv(ez_kernels(s->type), act, s, w, row_bytes, x, xq, y, budget);
        snprintf(dims, sizeof dims, "%lldx%lld", (long long)s->rows, (long long)s->cols);
        printf("%-5s %-8s %-13s %7.2fMB | %9.2f %12.3g | %9.2f %12.3g | %6.1fx\n", tr->name, s->what, dims,
               (double)bytes / 1e6, (double)bytes / t_ref / 1e9, (double)s->rows / t_ref,
               (double)bytes / t_fast / 1e9, (double)s->rows / t_fast, t_ref / t_fast);
        ez_aligned_free(w);
        free(x);
        free(xq);
        free(y);
    }
    return 0;
}
