/* The KV cache's storage types in isolation (llm/kv.h): the transforms
 * against their definitions, each format's round trip against its error
 * bound, the exact codes of known inputs, and every fast kernel (AVX2,
 * AVX-512, NEON)
 * against the scalar reference on the same stored codes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/quant.h"
#include "llm/kv.h"
#include "check.h"

static uint64_t g_rng = 4242;
static double urand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(g_rng >> 11) + 0.5) / 9007199254740992.0;
}
/* N(0, 1) by Box-Muller. */
static float grand(void) { return (float)(sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand())); }

static void gauss(float *x, int n, float amp) {
    for (int i = 0; i < n; i++) x[i] = amp * grand();
}

static const int k_block_types[] = {EZ_KV_Q8_0, EZ_KV_Q4_0, EZ_KV_TBQ4_0, EZ_KV_TBQ3_0};
#define N_BLOCK_TYPES 4

/* ---- transforms ------------------------------------------------------------------ */

static void test_kv_hadamard_is_ggml_matrix(void) {
    /* llama.cpp's ggml_gen_hadamard: H[i][j] = (-1)^popcount(i & j) / sqrt(n). */
    enum { N = 64 };
    for (int col = 0; col < N; col += 7) {
        float e[N];
        memset(e, 0, sizeof e);
        e[col] = 1.0f;
        ez_kv_hadamard(e, N);
        for (int i = 0; i < N; i++) {
            const double want = (__builtin_popcount((unsigned)(i & col)) & 1 ? -1.0 : 1.0) / 8.0;
            CHECK(fabs(e[i] - want) < 1e-7);
        }
    }
}

static void test_kv_rotations_are_orthonormal(void) {
    enum { N = 256 };
    const int rots[] = {EZ_KV_ROT_TBQ, 64, 128, 256};
    CHECK(ez_kv_rotation(EZ_KV_Q8_0, 256, 0) == 256 && ez_kv_rotation(EZ_KV_Q8_0, 256, 1) == 64);
    CHECK(ez_kv_rotation(EZ_KV_Q4_0, 192, 0) == 64 && ez_kv_rotation(EZ_KV_Q4_0, 96, 0) == 0);
    CHECK(ez_kv_rotation(EZ_KV_F16, 256, 0) == 0 && ez_kv_rotation(EZ_KV_F32, 256, 1) == 0);
    CHECK(ez_kv_rotation(EZ_KV_TBQ3_0, 32, 0) == EZ_KV_ROT_TBQ && ez_kv_rotation(EZ_KV_TBQ4_0, 96, 1) == EZ_KV_ROT_TBQ);
    for (size_t r = 0; r < sizeof rots / sizeof rots[0]; r++) {
        float a[N], b[N], a2[N], b2[N];
        double dot = 0, dot2 = 0, back = 0;
        gauss(a, N, 1.0f);
        gauss(b, N, 1.0f);
        memcpy(a2, a, sizeof a);
        memcpy(b2, b, sizeof b);
        ez_kv_rotate(a2, N, rots[r]);
        ez_kv_rotate(b2, N, rots[r]);
        for (int i = 0; i < N; i++) dot += (double)a[i] * b[i];
        for (int i = 0; i < N; i++) dot2 += (double)a2[i] * b2[i];
        CHECK_MSG(fabs(dot - dot2) < 1e-4 * N, "rotation %d: dot %g became %g", rots[r], dot, dot2);
        ez_kv_unrotate(a2, N, rots[r]);
        for (int i = 0; i < N; i++)
            if (fabs(a2[i] - a[i]) > back) back = fabs(a2[i] - a[i]);
        CHECK_MSG(back < 1e-5, "rotation %d: round trip off by %g", rots[r], back);
    }
}

/* ---- formats --------------------------------------------------------------------- */

static void test_kv_sizes_and_names(void) {
    CHECK(ez_kv_row_bytes(EZ_KV_F32, 64) == 256 && ez_kv_row_bytes(EZ_KV_F16, 64) == 128);
    CHECK(ez_kv_row_bytes(EZ_KV_Q8_0, 64) == 68 && ez_kv_row_bytes(EZ_KV_Q4_0, 64) == 36);
    CHECK(ez_kv_row_bytes(EZ_KV_TBQ4_0, 64) == 36 && ez_kv_row_bytes(EZ_KV_TBQ3_0, 64) == 28);
    CHECK(sizeof(ez_block_tbq4_0) == 18 && sizeof(ez_block_tbq3_0) == 14);
    CHECK(strcmp(ez_kv_type_name(EZ_KV_TBQ3_0), "tbq3_0") == 0 && strcmp(ez_kv_type_name(99), "?") == 0);
    CHECK(ez_kv_block_size(EZ_KV_F16) == 1 && ez_kv_block_size(EZ_KV_Q4_0) == 32);
    CHECK(ez_kv_kernels_ref(EZ_KV_COUNT) == NULL && ez_kv_kernels_ref(-1) == NULL);
}

/* Codes of known values: the TBQ codes are the nearest Lloyd-Max levels at
 * the scale that fits best, ggml's rules give Q4_0's, and the 3-bit codes
 * sit at bits 3j of the block. */
static void test_kv_codes_of_known_values(void) {
    float x[32], y[32];
    ez_block_tbq3_0 b3;
    ez_block_tbq4_0 b4;
    ez_block_q4_0 q4;
    int c3[32];
    /* +-1 alternating: every value has the same magnitude, so one level
     * and d = 1 / level reproduce the block up to d's fp16 rounding, with
     * mirrored codes c and 7 - c. */
    for (int j = 0; j < 32; j++) x[j] = j % 2 ? -1.0f : 1.0f;
    ez_kv_store_tbq3_0(x, &b3, 32);
    for (int j = 0; j < 32; j++) {
        const int bit = 3 * j;
        int c = b3.qs[bit / 8] >> (bit % 8);
        if (bit % 8 > 5) c |= b3.qs[bit / 8 + 1] << (8 - bit % 8);
        c3[j] = c & 7;
    }
    CHECK(c3[0] >= 4 && c3[0] + c3[1] == 7);
    for (int j = 2; j < 32; j++) CHECK(c3[j] == c3[j % 2]);
    CHECK(fabsf(ez_f16_to_f32(b3.d) * ez_tbq3_levels[c3[0]] - 1.0f) < 1e-3f);
    ez_kv_kernels_ref(EZ_KV_TBQ3_0)->load(&b3, y, 32);
    for (int j = 0; j < 32; j++) CHECK(fabsf(y[j] - x[j]) < 1e-3f);
    ez_kv_store_tbq4_0(x, &b4, 32);
    CHECK((b4.qs[0] & 15) + (b4.qs[1] & 15) == 15 && (b4.qs[0] >> 4) == (b4.qs[0] & 15));
    ez_kv_kernels_ref(EZ_KV_TBQ4_0)->load(&b4, y, 32);
    for (int j = 0; j < 32; j++) CHECK(fabsf(y[j] - x[j]) < 1e-3f);
    /* Q4_0: largest magnitude -4 gives d = 0.5; codes trunc(x / d + 8.5):
     * -4 -> 0, 3.5 -> 15, 0.25 -> 9. */
    for (int j = 0; j < 32; j++) x[j] = 0.0f;
    x[0] = -4.0f;
    x[1] = 3.5f;
    x[16] = 0.25f;
    ez_kv_store_q4_0(x, &q4, 32);
    CHECK(ez_f16_to_f32(q4.d) == 0.5f && (q4.qs[0] & 15) == 0 && (q4.qs[1] & 15) == 15 && (q4.qs[0] >> 4) == 9);
    /* An all-zero block decodes to zeros in every format. */
    for (int t = 0; t < N_BLOCK_TYPES; t++) {
        uint8_t row[64];
        float z[32];
        memset(z, 0, sizeof z);
        ez_kv_kernels_ref(k_block_types[t])->store(z, row, 32);
        ez_kv_kernels_ref(k_block_types[t])->load(row, y, 32);
        for (int j = 0; j < 32; j++) CHECK(y[j] == 0.0f);
    }
}

/* Relative mean squared error of the round trip on Gaussian blocks. The
 * Lloyd-Max quantizers at d = RMS have their textbook distortions, 0.0345
 * (3 bits) and 0.0095 (4 bits); the scale search (kv.c) brings them to
 * about 0.0255 and 0.0061. Absmax Q4_0 and Q8_0: about 0.0074 and 3e-5. */
static void test_kv_round_trip_error(void) {
    enum { N = 32 * 512 };
    static float x[N], y[N];
    static uint8_t row[N * 2];
    const double bound[N_BLOCK_TYPES] = {5e-5, 0.0085, 0.0068, 0.0275};
    for (int t = 0; t < N_BLOCK_TYPES; t++) {
        const ez_kv_kernels *k = ez_kv_kernels_ref(k_block_types[t]);
        double se = 0, ss = 0;
        gauss(x, N, 0.3f);
        k->store(x, row, N);
        k->load(row, y, N);
        for (int i = 0; i < N; i++) se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        for (int i = 0; i < N; i++) ss += (double)x[i] * x[i];
        if (getenv("ELIZA_TEST_VERBOSE") || !(se / ss < bound[t]))
            fprintf(stderr, "%s: relative MSE %.4g (bound %.3g)\n", ez_kv_type_name(k_block_types[t]), se / ss,
                    bound[t]);
        CHECK(se / ss < bound[t]);
        if (k_block_types[t] == EZ_KV_TBQ3_0) CHECK(se / ss > 0.022);
        if (k_block_types[t] == EZ_KV_TBQ4_0) CHECK(se / ss > 0.005);
    }
}

/* The TBQ scale is the least-squares one for its codes: sum x y = sum y y
 * over each block (up to d's fp16 rounding), which d = RMS is not. */
static void test_kv_tbq_scale_is_least_squares(void) {
    enum { N = 32 * 64 };
    static float x[N], y[N];
    static uint8_t row[N];
    const int types[2] = {EZ_KV_TBQ4_0, EZ_KV_TBQ3_0};
    for (int t = 0; t < 2; t++) {
        gauss(x, N, 1.5f);
        ez_kv_kernels_ref(types[t])->store(x, row, N);
        ez_kv_kernels_ref(types[t])->load(row, y, N);
        for (int b = 0; b < N / 32; b++) {
            double sxy = 0, syy = 0;
            for (int j = 0; j < 32; j++) {
                sxy += (double)x[b * 32 + j] * y[b * 32 + j];
                syy += (double)y[b * 32 + j] * y[b * 32 + j];
            }
            CHECK_MSG(fabs(sxy / syy - 1.0) < 1e-3, "%s block %d: sum x y / sum y y = %g", ez_kv_type_name(types[t]),
                      b, sxy / syy);
        }
    }
}

/* ---- fast kernels vs the reference, on the same codes ------------------------------ */

static double rel_err(const float *a, const float *b, int n) {
    double e = 0, m = 1e-30;
    for (int i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - b[i]);
        if (d > e) e = d;
        if (fabs((double)b[i]) > m) m = fabs((double)b[i]);
    }
    return e / m;
}

static void check_kernels(const ez_kv_kernels *fast, const ez_kv_kernels *ref, int type, const char *isa) {
    enum { MAXN = 512 };
    static const int lens[] = {32, 64, 96, 256, 512};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int n = ez_kv_block_size(type) == 1 ? lens[li] - 3 : lens[li];
        float x[MAXN], q[4 * MAXN], y1[4 * MAXN], y2[4 * MAXN], o1[4], o2[4];
        uint8_t row[MAXN * 4], row2[MAXN * 4];
        const float w4[4] = {0.5f, -1.25f, 2.0f, 0.0625f};
        double scale = 0;
        gauss(x, n, 2.0f);
        gauss(q, 4 * n, 1.0f);
        ref->store(x, row, n);
        fast->store(x, row2, n);
        CHECK_MSG(memcmp(row, row2, ez_kv_row_bytes(type, n)) == 0, "%s %s: store differs", isa,
                  ez_kv_type_name(type));
        ref->load(row, y1, n);
        fast->load(row, y2, n);
        CHECK_MSG(rel_err(y2, y1, n) < 1e-6, "%s %s: load differs", isa, ez_kv_type_name(type));
        for (int i = 0; i < n; i++) scale += fabs(q[i] * y1[i]);
        CHECK_MSG(fabs(fast->dot(q, row, n) - ref->dot(q, row, n)) <= 1e-5 * scale + 1e-6, "%s %s n %d: dot", isa,
                  ez_kv_type_name(type), n);
        fast->dot4(q, n, row, n, o1);
        ref->dot4(q, n, row, n, o2);
        for (int r = 0; r < 4; r++) {
            CHECK_MSG(fabs(o1[r] - o2[r]) <= 1e-5 * 4 * scale + 1e-6, "%s %s n %d: dot4 row %d", isa,
                      ez_kv_type_name(type), n, r);
            CHECK_MSG(fabs(o2[r] - ref->dot(q + r * n, row, n)) <= 1e-5 * 4 * scale + 1e-6,
                      "%s %s: ref dot4 row %d is not dot", isa, ez_kv_type_name(type), r);
        }
        memcpy(y1, q, sizeof(float) * (size_t)(4 * n));
        memcpy(y2, q, sizeof(float) * (size_t)(4 * n));
        fast->axpy(y1, 0.37f, row, n);
        ref->axpy(y2, 0.37f, row, n);
        CHECK_MSG(rel_err(y1, y2, n) < 1e-6, "%s %s: axpy", isa, ez_kv_type_name(type));
        fast->axpy4(y1, n, w4, row, n);
        ref->axpy4(y2, n, w4, row, n);
        CHECK_MSG(rel_err(y1, y2, 4 * n) < 1e-6, "%s %s: axpy4", isa, ez_kv_type_name(type));
    }
}

static void test_kv_fast_kernels_match_reference(void) {
    for (int t = 0; t < EZ_KV_COUNT; t++) {
        const ez_kv_kernels *ref = ez_kv_kernels_ref(t);
        if (ez_kv_kernels_avx2(t) && (ez_cpu_features() & EZ_CPU_AVX2) && (ez_cpu_features() & EZ_CPU_FMA))
            check_kernels(ez_kv_kernels_avx2(t), ref, t, "avx2");
        if (ez_kv_kernels_avx512(t) && (ez_cpu_features() & EZ_CPU_LEVEL_AVX512) == EZ_CPU_LEVEL_AVX512)
            check_kernels(ez_kv_kernels_avx512(t), ref, t, "avx512");
        if (ez_kv_kernels_neon(t)) check_kernels(ez_kv_kernels_neon(t), ref, t, "neon");
        check_kernels(ez_kv_kernels_active(t), ref, t, "active");
        /* Every vector level runs its own kernels: avx512 the AVX-512 ones,
         * avx2 (ELIZA_SIMD=avx2 on an AVX-512 CPU too) the AVX2 ones. */
        if (ez_simd_at_least(EZ_SIMD_AVX512) && ez_kv_kernels_avx512(t))
            CHECK_MSG(ez_kv_kernels_active(t) == ez_kv_kernels_avx512(t), "%s: level %s runs another table",
                      ez_kv_type_name(t), ez_simd_level_name(ez_simd_level_active()));
        else if (ez_simd_at_least(EZ_SIMD_AVX2) && ez_kv_kernels_avx2(t))
            CHECK_MSG(ez_kv_kernels_active(t) == ez_kv_kernels_avx2(t), "%s: level %s runs the reference",
                      ez_kv_type_name(t), ez_simd_level_name(ez_simd_level_active()));
        if (ez_simd_at_least(EZ_SIMD_NEON) && ez_kv_kernels_neon(t))
            CHECK_MSG(ez_kv_kernels_active(t) == ez_kv_kernels_neon(t), "%s: level %s runs the reference",
                      ez_kv_type_name(t), ez_simd_level_name(ez_simd_level_active()));
    }
}

int main(void) {
    test_kv_hadamard_is_ggml_matrix();
    test_kv_rotations_are_orthonormal();
    test_kv_sizes_and_names();
    test_kv_codes_of_known_values();
    test_kv_round_trip_error();
    test_kv_tbq_scale_is_least_squares();
    test_kv_fast_kernels_match_reference();
    if (g_failed) {
        fprintf(stderr, "test_llm_kv: FAILED\n");
        return 1;
    }
    printf("test_llm_kv: ok (%d checks)\n", g_passed);
    return 0;
}
