/* The LLM's prompt products (ez_llm_matmul: the x8 kernels of the level in
 * use) per weight type: M activation rows against a 2048 x 1024 matrix of
 * random codes, in ms of process CPU time (ISO C clock(): all threads; the
 * best of the runs), which other load on the machine inflates less than
 * wall time.
 *
 *   bench_prompt_products [-m MATRICES] [threads, default 1] [rows M, default 256] [TYPE ...]
 *
 * TYPE: weight type names (Q8_0, IQ2_XXS, ...), default Q8_0 Q4_0 Q4_K Q6_K.
 * -m N: each run passes over N different matrices of that size (default 1,
 * which stays in L2): with N = 64 the weights (75 MB of Q4_K) come from
 * memory as a decode step's do; the time printed is then that of all N.
 *
 * ELIZA_SIMD=avx2 / avx512 compares the levels. Built by the
 * ELIZA_BUILD_BENCH CMake option; links the static library. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cpu.h"
#include "core/pool.h"
#include "core/quant.h"
#include "llm/model.h"
#include "llm/ops.h"

#define ROWS 2048
#define COLS 1024
#define RUNS 8

static uint64_t g_rng = 0x1234567887654321ull;

static uint64_t rng_u64(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static double cpu_s(void) { return (double)clock() / CLOCKS_PER_SEC; }

/* Random codes; every block scale (Q4_K: d and dmin, Q6_K / Q3_K / TQ*: d
 * at the block's end) 2^-8; IQ1_M's scattered d is left random (the
 * integer work, which is what is timed, does not depend on it). */
static uint8_t *random_matrix(uint32_t type, size_t row_bytes) {
    const ez_type_traits *tr = ez_type_traits_of(type);
    const size_t bytes = row_bytes * ROWS;
    const uint16_t scale = ez_f32_to_f16(1.0f / 256);
    uint8_t *w = (uint8_t *)malloc(bytes);
    if (!w) return NULL;
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)rng_u64();
    for (size_t b = 0; b < bytes / tr->type_size; b++) {
        uint8_t *blk = w + b * tr->type_size;
        if (type == EZ_TYPE_Q6_K || type == EZ_TYPE_Q3_K || type == EZ_TYPE_TQ1_0 || type == EZ_TYPE_TQ2_0) {
            memcpy(blk + tr->type_size - 2, &scale, 2);
        } else {
            memcpy(blk, &scale, 2);
            if (type == EZ_TYPE_Q4_K) memcpy(blk + 2, &scale, 2);
        }
    }
    return w;
}

static uint32_t type_named(const char *name) {
    for (uint32_t t = 0; t < EZ_TYPE_COUNT; t++)
        if (ez_type_traits_of(t) && ez_type_traits_of(t)->name && strcmp(ez_type_traits_of(t)->name, name) == 0)
            return t;
    return EZ_TYPE_COUNT;
}

int main(int argc, char **argv) {
    uint32_t types[EZ_TYPE_COUNT] = {EZ_TYPE_Q8_0, EZ_TYPE_Q4_0, EZ_TYPE_Q4_K, EZ_TYPE_Q6_K};
    size_t n_types = 4;
    const int skip = argc > 2 && strcmp(argv[1], "-m") == 0 ? 2 : 0;
    const int n_mat = skip ? atoi(argv[2]) : 1;
    const int threads = argc > 1 + skip ? atoi(argv[1 + skip]) : 1;
    const int64_t M = argc > 2 + skip ? atoll(argv[2 + skip]) : 256;
    ez_pool *pool = ez_pool_create(threads);
    float *x = (float *)malloc(sizeof(float) * (size_t)(M * COLS)), *y = (float *)malloc(sizeof(float) * (size_t)(M * ROWS));
    if (!pool || !x || !y || M < 1 || n_mat < 1) {
        fprintf(stderr, "bench_prompt_products: bad arguments or out of memory\n");
        return 1;
    }
    if (argc > 3 + skip) n_types = 0;
    for (int a = 3 + skip; a < argc && n_types < EZ_TYPE_COUNT; a++) {
        types[n_types] = type_named(argv[a]);
        if (types[n_types] == EZ_TYPE_COUNT || !ez_type_traits_of(types[n_types])->type_size) {
            fprintf(stderr, "bench_prompt_products: no weight type %s\n", argv[a]);
            return 1;
        }
        n_types++;
    }
    for (int64_t i = 0; i < M * COLS; i++) x[i] = (float)((double)(rng_u64() >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    printf("simd level %s, %d thread(s), %lld activation rows x %d x %d, %d matrices\n",
           ez_simd_level_name(ez_simd_level_active()), threads, (long long)M, ROWS, COLS, n_mat);
    for (size_t t = 0; t < n_types; t++) {
        ez_llm_matrix w = {"w", types[t], ROWS, COLS, (size_t)ez_row_bytes(types[t], COLS), NULL};
        ez_llm_mm mm = {&w, y, ROWS};
        ez_llm_acts acts;
        double best = 1e30;
        uint8_t **data = (uint8_t **)calloc((size_t)n_mat, sizeof *data);
        if (!data) return 1;
        for (int i = 0; i < n_mat; i++)
            if (!(data[i] = random_matrix(types[t], w.row_bytes))) return 1;
        ez_llm_acts_init(&acts);
        for (int r = 0; r < RUNS; r++) {
            const double c0 = cpu_s();
            double s;
            for (int i = 0; i < n_mat; i++) {
                w.data = data[i];
                if (ez_llm_matmul(pool, &acts, x, M, &mm, 1) != ELIZA_OK) return 1;
            }
            s = cpu_s() - c0;
            if (s < best) best = s;
        }
        printf("%-5s %8.2f ms CPU  %6.1f G multiply-adds per CPU second  %5.1f GB of weights per CPU second\n",
               ez_type_traits_of(types[t])->name, best * 1e3, (double)n_mat * M * ROWS * COLS / best * 1e-9,
               (double)n_mat * ROWS * w.row_bytes / best * 1e-9);
        ez_llm_acts_free(&acts);
        for (int i = 0; i < n_mat; i++) free(data[i]);
        free(data);
    }
    ez_pool_destroy(pool);
    free(x);
    free(y);
    return 0;
}
