/* ez_gemm_f32 against the reference triple loop on many shapes (1x1x1,
 * primes, GEMV, a prefill-sized product, tall-skinny products, both B
 * layouts, accumulate, padded and overlapping leading dimensions, with and
 * without a pool, nested in a pool loop), bit-identical results for any
 * thread count. Run it a second time with ELIZA_FORCE_SCALAR=1
 * to check that the scalar mode is exactly the reference. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/gemm.h"
#include "core/kernels/gemm_kernels_ext.h"
#include "core/platform.h"
#include "core/pool.h"
#include "check.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint32_t next_u32(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (uint32_t)((g_rng * 0x2545f4914f6cdd1dull) >> 32);
}

/* Uniform in [-1, 1). */
static float next_f32(void) { return (float)next_u32() / 2147483648.0f - 1.0f; }

static float *random_floats(size_t n) {
    float *p = (float *)malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = next_f32();
    return p;
}

/* Float rounding of a sum of K products: errors grow about like sqrt(K)
 * times the sum of magnitudes; a wrong index or a lost term is far larger. */
static double sum_tolerance(int64_t K, double magnitude) {
    return (8.0 * sqrt((double)K) + 4.0) * FLT_EPSILON * magnitude;
}

typedef struct {
    int64_t M, N, K;
} shape;

typedef struct {
    shape s;
    int trans_b, accumulate;
    int64_t lda, ldb, ldc;
    float *A, *B, *C0, *C_fast, *C_ref;
} gemm_case;

static const float PAD_SENTINEL = 777.0f;

/* lda 0: rows of A K + 3 pad apart; a smaller lda makes rows overlap, as a
 * convolution reading windows of a time-major input in place does. */
static void case_init_lda(gemm_case *c, shape s, int trans_b, int accumulate, int pad, int64_t lda) {
    size_t c_size;
    c->s = s;
    c->trans_b = trans_b;
    c->accumulate = accumulate;
    c->lda = lda > 0 ? lda : s.K + 3 * pad;
    c->ldb = (trans_b ? s.K : s.N) + 5 * pad;
    c->ldc = s.N + 2 * pad;
    c->A = random_floats((size_t)(s.M > 0 ? (s.M - 1) * c->lda + s.K : 0));
    c->B = random_floats((size_t)((trans_b ? s.N : s.K) * c->ldb));
    c_size = (size_t)(s.M * c->ldc);
    c->C0 = random_floats(c_size);
    for (int64_t m = 0; m < s.M; m++)
        for (int64_t n = s.N; n < c->ldc; n++) c->C0[m * c->ldc + n] = PAD_SENTINEL;
    c->C_fast = (float *)malloc(sizeof(float) * (c_size ? c_size : 1));
    c->C_ref = (float *)malloc(sizeof(float) * (c_size ? c_size : 1));
    memcpy(c->C_fast, c->C0, sizeof(float) * c_size);
    memcpy(c->C_ref, c->C0, sizeof(float) * c_size);
}

static void case_init(gemm_case *c, shape s, int trans_b, int accumulate, int pad) {
    case_init_lda(c, s, trans_b, accumulate, pad, 0);
}

static void case_free(gemm_case *c) {
    free(c->A);
    free(c->B);
    free(c->C0);
    free(c->C_fast);
    free(c->C_ref);
}

static void case_run_fast(gemm_case *c, ez_pool *pool) {
    ez_gemm_f32(pool, c->s.M, c->s.N, c->s.K, c->A, c->lda, c->B, c->ldb, c->trans_b, c->C_fast, c->ldc,
                c->accumulate);
}

static void case_run_ref(gemm_case *c) {
    ez_gemm_f32_ref(c->s.M, c->s.N, c->s.K, c->A, c->lda, c->B, c->ldb, c->trans_b, c->C_ref, c->ldc,
                    c->accumulate);
}

/* ||A row m|| * ||op(B) column n|| (Cauchy-Schwarz: at least the sum of
 * |A[m,k] op(B)[k,n]|, and cheap to get for every element), plus |C0|
 * when accumulating. */
static double magnitude(const gemm_case *c, const double *a_norm, const double *b_norm, int64_t m, int64_t n) {
    double s = a_norm[m] * b_norm[n];
    return c->accumulate ? s + fabs((double)c->C0[m * c->ldc + n]) : s;
}

static void norms(const gemm_case *c, double *a_norm, double *b_norm) {
    for (int64_t m = 0; m < c->s.M; m++) {
        double s = 0.0;
        for (int64_t k = 0; k < c->s.K; k++) s += (double)c->A[m * c->lda + k] * c->A[m * c->lda + k];
        a_norm[m] = sqrt(s);
    }
    for (int64_t n = 0; n < c->s.N; n++) {
        double s = 0.0;
        for (int64_t k = 0; k < c->s.K; k++) {
            double b = c->trans_b ? c->B[n * c->ldb + k] : c->B[k * c->ldb + n];
            s += b * b;
        }
        b_norm[n] = sqrt(s);
    }
}

/* Returns the number of elements out of tolerance, and of padding cells
 * written. */
static int64_t case_mismatches(const gemm_case *c, int64_t *pad_written) {
    int64_t bad = 0;
    double *a_norm = (double *)malloc(sizeof(double) * (size_t)c->s.M);
    double *b_norm = (double *)malloc(sizeof(double) * (size_t)c->s.N);
    norms(c, a_norm, b_norm);
    *pad_written = 0;
    for (int64_t m = 0; m < c->s.M; m++) {
        for (int64_t n = 0; n < c->s.N; n++) {
            double d = fabs((double)c->C_fast[m * c->ldc + n] - (double)c->C_ref[m * c->ldc + n]);
            if (!(d <= sum_tolerance(c->s.K, magnitude(c, a_norm, b_norm, m, n)) + 1e-30)) bad++;
        }
        for (int64_t n = c->s.N; n < c->ldc; n++) *pad_written += c->C_fast[m * c->ldc + n] != PAD_SENTINEL;
    }
    free(a_norm);
    free(b_norm);
    return bad;
}

static void check_gemm_lda(ez_pool *pool, shape s, int trans_b, int accumulate, int pad, int64_t lda) {
    gemm_case c;
    int64_t bad, pad_written;
    case_init_lda(&c, s, trans_b, accumulate, pad, lda);
    case_run_fast(&c, pool);
    case_run_ref(&c);
    bad = case_mismatches(&c, &pad_written);
    CHECK_MSG(bad == 0 && pad_written == 0,
          "gemm M=%lld N=%lld K=%lld lda=%lld trans_b=%d acc=%d pad=%d threads=%d: %lld out of tolerance, %lld "
          "padding cells written",
          (long long)s.M, (long long)s.N, (long long)s.K, (long long)c.lda, trans_b, accumulate, pad,
          ez_pool_threads(pool), (long long)bad, (long long)pad_written);
    case_free(&c);
}

static void check_gemm(ez_pool *pool, shape s, int trans_b, int accumulate, int pad) {
    check_gemm_lda(pool, s, trans_b, accumulate, pad, 0);
}

static const shape k_shapes[] = {
    {1, 1, 1},     {1, 2, 3},     {2, 1, 1},     {1, 17, 5},    {1, 64, 640}, {1, 1000, 33},  {2, 37, 19},
    {3, 50, 257},  {4, 33, 100},  {5, 7, 9},     {6, 16, 8},    {7, 17, 3},   {12, 32, 256}, {13, 31, 29},
    {31, 37, 41},  {97, 101, 103}, {6, 600, 1},  {150, 20, 300}, {64, 1, 64},  {1, 513, 1031}, {75, 200, 270},
    {24, 70, 33},  {25, 70, 33},  {40, 50, 600}, /* around the direct-path cut-off; three depth slices */
    {301, 7, 129}, {160, 130, 40}, {200, 29, 300}, /* several row blocks: B packed once for all of them */
};

static void test_gemm_fast_matches_reference(void) {
    ez_pool *pools[3];
    pools[0] = NULL;
    pools[1] = ez_pool_create(2);
    pools[2] = ez_pool_create(3);
    for (size_t i = 0; i < sizeof k_shapes / sizeof k_shapes[0]; i++)
        for (int p = 0; p < 3; p++)
            for (int trans_b = 0; trans_b <= 1; trans_b++)
                for (int acc = 0; acc <= 1; acc++)
                    for (int pad = 0; pad <= 1; pad++) check_gemm(pools[p], k_shapes[i], trans_b, acc, pad);
    ez_pool_destroy(pools[1]);
    ez_pool_destroy(pools[2]);
}

/* Convolutions over a time-major input [T, C_in] pass its frames as A with
 * lda = C_in < K = taps * C_in. */
static void test_gemm_overlapping_rows_of_a(void) {
    static const struct {
        shape s;
        int64_t lda;
    } cases[] = {{{200, 60, 400}, 80}, {{37, 45, 30}, 6}, {{150, 33, 251}, 10}, {{13, 20, 9}, 1}};
    ez_pool *pool = ez_pool_create(2);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int trans_b = 0; trans_b <= 1; trans_b++)
            for (int acc = 0; acc <= 1; acc++) {
                check_gemm_lda(NULL, cases[i].s, trans_b, acc, acc, cases[i].lda);
                check_gemm_lda(pool, cases[i].s, trans_b, acc, acc, cases[i].lda);
            }
    ez_pool_destroy(pool);
}

/* The prefill shape of a small LLM projection. */
static void test_gemm_prefill_sized_product(void) {
    ez_pool *pool = ez_pool_create(2);
    shape big = {256, 2048, 640};
    check_gemm(pool, big, 1, 0, 0);
    check_gemm(pool, big, 0, 1, 1);
    ez_pool_destroy(pool);
}

static void test_gemm_same_bits_for_any_thread_count(void) {
    static const shape shapes[] = {{1, 300, 700}, {3, 77, 65}, {50, 300, 600}, {200, 100, 513}, {300, 60, 300},
                                   {310, 1030, 40}};
    static const int threads[] = {1, 2, 3, 5};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int trans_b = 0; trans_b <= 1; trans_b++) {
            gemm_case c;
            int same = 1;
            case_init(&c, shapes[i], trans_b, 1, 0);
            case_run_fast(&c, NULL);
            for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
                ez_pool *pool = ez_pool_create(threads[t]);
                memcpy(c.C_ref, c.C0, sizeof(float) * (size_t)(c.s.M * c.ldc));
                ez_gemm_f32(pool, c.s.M, c.s.N, c.s.K, c.A, c.lda, c.B, c.ldb, c.trans_b, c.C_ref, c.ldc, 1);
                same &= memcmp(c.C_ref, c.C_fast, sizeof(float) * (size_t)(c.s.M * c.ldc)) == 0;
                ez_pool_destroy(pool);
            }
            CHECK_MSG(same, "gemm M=%lld N=%lld K=%lld trans_b=%d: results differ between thread counts",
                  (long long)c.s.M, (long long)c.s.N, (long long)c.s.K, trans_b);
            case_free(&c);
        }
}

/* One ISA's kernels on C[M, N] = A . B^T (B stored [N, K]) without the
 * dispatcher: the row kernels, or B packed by the ISA's packer and the
 * in-place tile (M <= mr, one depth slice). */
static void kernels_product(const ez_gemm_kernels *k, const ez_gemm_kernels_ext *e, int use_tile, int64_t M,
                            int64_t N, int64_t K, const float *A, const float *B, float *C) {
    if (!use_tile) {
        k->rows_nk(M, N, K, A, K, B, K, C, N, 0);
        return;
    }
    {
        const int64_t panels = (N + k->nr - 1) / k->nr;
        float *bp = (float *)ez_aligned_alloc(sizeof(float) * (size_t)(panels * k->nr * K));
        k->pack_b_nk(K, N, B, K, bp);
        for (int64_t p = 0; p < panels; p++)
            e->tile_direct(K, A, K, (int)M, bp + p * k->nr * K, C + p * k->nr, N,
                           (int)EZ_MIN((int64_t)k->nr, N - p * k->nr), 0);
        ez_aligned_free(bp);
    }
}

/* The AVX-512 tables against the AVX2 ones and the reference, called
 * directly (the dispatcher runs one level per process): both within the
 * float-rounding bound of the reference, and of each other. */
static void test_gemm_avx512_kernels_match_avx2(void) {
    static const shape shapes[] = {{1, 1, 1}, {3, 5, 7}, {6, 37, 100}, {12, 64, 256}, {5, 33, 300}, {11, 70, 17}};
    const uint32_t need = EZ_CPU_LEVEL_AVX512;
    if ((ez_cpu_features() & need) != need || !ez_gemm_kernels_avx512()) {
        printf("note: no AVX-512 level on this CPU; avx512-vs-avx2 kernels not checked\n");
        return;
    }
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int use_tile = 0; use_tile < 2; use_tile++) {
            const shape s = shapes[i];
            float *A = random_floats((size_t)(s.M * s.K)), *B = random_floats((size_t)(s.N * s.K));
            float *c2 = (float *)malloc(sizeof(float) * (size_t)(s.M * s.N));
            float *c5 = (float *)malloc(sizeof(float) * (size_t)(s.M * s.N));
            float *cr = (float *)malloc(sizeof(float) * (size_t)(s.M * s.N));
            int64_t bad = 0;
            ez_gemm_f32_ref(s.M, s.N, s.K, A, s.K, B, s.K, 1, cr, s.N, 0);
            kernels_product(ez_gemm_kernels_avx2(), ez_gemm_kernels_ext_avx2(), use_tile && s.M <= 6, s.M, s.N, s.K,
                            A, B, c2);
            kernels_product(ez_gemm_kernels_avx512(), ez_gemm_kernels_ext_avx512(), use_tile, s.M, s.N, s.K, A, B,
                            c5);
            for (int64_t j = 0; j < s.M * s.N; j++) {
                const double tol = sum_tolerance(s.K, (double)s.K);
                if (fabs((double)c5[j] - cr[j]) > tol || fabs((double)c5[j] - c2[j]) > 2 * tol) bad++;
            }
            CHECK_MSG(bad == 0, "avx512 %s %lldx%lldx%lld: %lld elements off avx2 / the reference",
                      use_tile ? "tile" : "rows", (long long)s.M, (long long)s.N, (long long)s.K, (long long)bad);
            free(A), free(B), free(c2), free(c5), free(cr);
        }
}

static void test_gemm_zero_depth_clears_or_keeps(void) {
    float A[1] = {1.0f}, B[1] = {1.0f}, C[6] = {1, 2, 3, 4, 5, 6};
    ez_gemm_f32(NULL, 2, 3, 0, A, 1, B, 3, 0, C, 3, 1);
    CHECK_MSG(C[0] == 1.0f && C[5] == 6.0f, "K=0 with accumulate must leave C alone");
    ez_gemm_f32(NULL, 2, 3, 0, A, 1, B, 3, 0, C, 3, 0);
    CHECK_MSG(C[0] == 0.0f && C[5] == 0.0f, "K=0 without accumulate must clear C");
}

/* Under ELIZA_FORCE_SCALAR=1 ez_gemm_f32 must be the reference, bit for bit. */
static void test_gemm_scalar_mode_is_the_reference(void) {
    ez_pool *pool;
    gemm_case c;
    shape s = {37, 129, 300};
    if (!ez_force_scalar()) {
        printf("note: ELIZA_FORCE_SCALAR not set (level %s); scalar-mode identity not checked\n",
               ez_simd_level_name(ez_simd_level_active()));
        return;
    }
    CHECK_MSG(ez_simd_level_active() == EZ_SIMD_SCALAR, "forced scalar but level is %s",
          ez_simd_level_name(ez_simd_level_active()));
    pool = ez_pool_create(2);
    for (int trans_b = 0; trans_b <= 1; trans_b++) {
        case_init(&c, s, trans_b, trans_b, 1);
        case_run_fast(&c, pool);
        case_run_ref(&c);
        CHECK_MSG(memcmp(c.C_fast, c.C_ref, sizeof(float) * (size_t)(s.M * c.ldc)) == 0,
              "scalar mode differs from the reference (trans_b=%d)", trans_b);
        case_free(&c);
    }
    ez_pool_destroy(pool);
}

/* Products with several row blocks (B packed once, in the calling thread's
 * scratch slot) issued from inside a loop body of the same pool. */
typedef struct {
    ez_pool *pool;
    const float *A, *B; /* A: [groups * M, K]; B: [N, K] */
    float *C;           /* [groups * M, N] */
    int64_t M, N, K;
} gemm_group_job;

static void gemm_per_group(void *ctx, int64_t g0, int64_t g1, int thread_index) {
    gemm_group_job *job = (gemm_group_job *)ctx;
    (void)thread_index;
    for (int64_t g = g0; g < g1; g++)
        ez_gemm_f32(job->pool, job->M, job->N, job->K, job->A + g * job->M * job->K, job->K, job->B, job->K, 1,
                    job->C + g * job->M * job->N, job->N, 0);
}

static void test_gemm_nested_in_pool_loop_matches_direct(void) {
    enum { GROUPS = 5, M = 400, N = 37, K = 70 };
    ez_pool *pool = ez_pool_create(3);
    float *A = random_floats(GROUPS * M * K);
    float *B = random_floats(N * K);
    float *C = (float *)malloc(sizeof(float) * GROUPS * M * N);
    float *C_direct = (float *)malloc(sizeof(float) * GROUPS * M * N);
    gemm_group_job job = {pool, A, B, C, M, N, K};
    gemm_group_job direct = {NULL, A, B, C_direct, M, N, K};
    ez_pool_for(pool, GROUPS, 1, gemm_per_group, &job);
    gemm_per_group(&direct, 0, GROUPS, 0);
    CHECK_MSG(memcmp(C, C_direct, sizeof(float) * GROUPS * M * N) == 0,
          "GEMMs inside a pool loop differ from the same GEMMs without a pool");
    ez_pool_destroy(pool);
    free(A);
    free(B);
    free(C);
    free(C_direct);
}

int main(void) {
    SKIP_IF_PINNED_LEVEL_MISSING();
    test_gemm_fast_matches_reference();
    test_gemm_overlapping_rows_of_a();
    test_gemm_prefill_sized_product();
    test_gemm_same_bits_for_any_thread_count();
    test_gemm_avx512_kernels_match_avx2();
    test_gemm_zero_depth_clears_or_keeps();
    test_gemm_scalar_mode_is_the_reference();
    test_gemm_nested_in_pool_loop_matches_direct();
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed != 0;
}
