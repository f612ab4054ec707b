/* GFLOP/s of the reference and the fast F32 GEMM at the shapes of a small
 * LLM (K = 640: GEMV for decode, M = 256 for prefill) and of the TTS and
 * diarization models, and the thread pool's dispatch overhead.
 *
 *   bench_gemm                 all of it
 *   bench_gemm --quick         fewer repetitions (a smoke run)
 *   bench_gemm SECTION...      only these of llm, diar, tts, tiles, pool
 *   bench_gemm --match TEXT    only the GEMM shapes whose name contains TEXT
 *
 * Build: configure with -DELIZA_BUILD_BENCH=ON (bench_*.c link against the
 * static library).
 *
 * Each figure is the best of several timed batches, so other load on the
 * machine shows up as noise in fewer of them. The reference (double
 * accumulation, one thread) is timed at the LLM shapes only: at the model
 * shapes it would take minutes.
 *
 * "tiles": one register tile of the float32 GEMM (tile_direct, A read in
 * place) against the BF16 tile (core/kernels/gemm_bf16.h, vdpbf16ps) where
 * the level has one, on one thread, operands in L1 (the FFT convolutions'
 * shape: rows of depth 256 at a row stride of 768, one panel): the multiply-add rate of the instructions themselves. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/gemm.h"
#include "core/kernels/gemm_bf16.h"
#include "core/kernels/gemm_kernels_ext.h"
#include "core/platform.h"
#include "core/pool.h"

static int g_batches = 5;
static const char *g_match;
static double g_batch_seconds = 0.05;

typedef void (*bench_fn)(void *ctx);

/* Seconds per call: best batch of calls, each batch about g_batch_seconds. */
static double seconds_per_call(bench_fn fn, void *ctx) {
    uint64_t t0 = ez_time_ns();
    int64_t reps = 1;
    double best = 1e30, once;
    fn(ctx);
    once = (double)(ez_time_ns() - t0) * 1e-9;
    if (once > 0) reps = (int64_t)(g_batch_seconds / once) + 1;
    for (int b = 0; b < g_batches; b++) {
        uint64_t start = ez_time_ns();
        double per_call;
        for (int64_t r = 0; r < reps; r++) fn(ctx);
        per_call = (double)(ez_time_ns() - start) * 1e-9 / (double)reps;
        if (per_call < best) best = per_call;
    }
    return best;
}

/* One product as a model issues it: lda = 0 means K (rows of A apart); a
 * smaller lda is a convolution reading overlapping windows of a time-major
 * input in place. ldb = 0 means the packed width (K for [N,K], N for [K,N]). */
typedef struct {
    const char *name;
    int64_t M, N, K, lda, ldb;
    int trans_b;
} gemm_shape;

typedef struct {
    ez_pool *pool;
    int use_ref;
    gemm_shape s;
    const float *A, *B;
    float *C;
} gemm_ctx;

static void run_gemm(void *p) {
    gemm_ctx *g = (gemm_ctx *)p;
    const gemm_shape *s = &g->s;
    if (g->use_ref)
        ez_gemm_f32_ref(s->M, s->N, s->K, g->A, s->lda, g->B, s->ldb, s->trans_b, g->C, s->N, 0);
    else
        ez_gemm_f32(g->pool, s->M, s->N, s->K, g->A, s->lda, g->B, s->ldb, s->trans_b, g->C, s->N, 0);
}

static float *filled(size_t n) {
    float *p = (float *)ez_aligned_alloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) p[i] = (float)((i * 7919u) % 1000u) / 1000.0f - 0.5f;
    return p;
}

static void bench_gemm_shape(ez_pool *pools[2], gemm_shape s, int with_ref) {
    gemm_ctx g;
    double flops = 2.0 * (double)s.M * (double)s.N * (double)s.K;
    double fast1, fast2;
    if (s.lda == 0) s.lda = s.K;
    if (s.ldb == 0) s.ldb = s.trans_b ? s.K : s.N;
    g.s = s;
    g.A = filled((size_t)((s.M - 1) * s.lda + s.K));
    g.B = filled((size_t)((s.trans_b ? s.N : s.K) * s.ldb));
    g.C = filled((size_t)(s.M * s.N));
    printf("%-16s %5lld %5lld %5lld %5lld %5s |", s.name, (long long)s.M, (long long)s.N, (long long)s.K,
           (long long)s.lda, s.trans_b ? "[N,K]" : "[K,N]");
    if (with_ref) {
        g.use_ref = 1;
        g.pool = NULL;
        printf(" %7.2f |", flops / seconds_per_call(run_gemm, &g) * 1e-9);
    } else {
        printf(" %7s |", "-");
    }
    fflush(stdout);
    g.use_ref = 0;
    g.pool = pools[0];
    fast1 = seconds_per_call(run_gemm, &g);
    g.pool = pools[1];
    fast2 = seconds_per_call(run_gemm, &g);
    printf(" %7.2f %7.2f | %9.1f\n", flops / fast1 * 1e-9, flops / fast2 * 1e-9, fast2 * 1e6);
    ez_aligned_free((void *)g.A);
    ez_aligned_free((void *)g.B);
    ez_aligned_free(g.C);
}

/* LLM: a small model's projections at decode (M = 1) and prefill. */
static const gemm_shape k_llm_shapes[] = {
    {"decode", 1, 2048, 640, 0, 0, 1},   {"decode", 1, 2048, 640, 0, 0, 0},
    {"decode", 1, 640, 640, 0, 0, 1},    {"decode", 1, 640, 640, 0, 0, 0},
    {"prefill", 256, 2048, 640, 0, 0, 1}, {"prefill", 256, 2048, 640, 0, 0, 0},
    {"prefill", 256, 640, 640, 0, 0, 1},  {"prefill", 256, 640, 640, 0, 0, 0},
};

/* Diarization, as libeliza/diar issues them for 10 s chunks at 16 kHz
 * (pyannote segmentation: SincNet folded into two half filterbanks, convs
 * over overlapping windows of [T, C_in], 8 chunks per LSTM batch of 589
 * frames; resemblyzer GE2E: DFT over overlapping frames, mel, 16 partials).
 * "long" is conv 1 over three chunks' frames. */
static const gemm_shape k_diar_shapes[] = {
    {"seg sinc half", 1680, 40, 126, 251, 0, 1},
    {"seg conv1", 5321, 60, 400, 80, 0, 1},
    {"seg conv1 long", 17000, 60, 400, 80, 0, 1},
    {"seg conv2", 1769, 60, 300, 60, 0, 1},
    {"seg lstm0 proj", 4712, 1024, 60, 0, 0, 1},
    {"seg lstm proj", 4712, 1024, 256, 0, 0, 1},
    {"seg linear", 4712, 128, 256, 0, 0, 1},
    {"seg classifier", 4712, 7, 128, 0, 0, 1},
    {"ge2e dft", 1360, 402, 400, 160, 0, 1},
    {"ge2e mel", 1360, 40, 201, 402, 0, 1},
    {"ge2e lstm0 proj", 1360, 1024, 40, 0, 0, 1},
    {"ge2e lstm proj", 2560, 1024, 256, 0, 0, 1},
};

/* Kokoro, as im2col GEMMs in both orientations: channels-major
 * (weights [C_out, C_in k] . cols [C_in k, T]) and time-major (windows of
 * a [T, C_in] input read in place . weights [C_out, k C_in]^T); the
 * transposed-conv columns x^T . w; ALBERT attention (12 heads of 64) and
 * feed-forward over 128 tokens; a linear over 512 frames. */
static const gemm_shape k_tts_shapes[] = {
    {"conv256 k3 T600", 256, 600, 768, 0, 0, 0},
    {"conv256 k3 T600", 600, 256, 768, 256, 0, 1},
    {"conv256 k7 T3000", 256, 3000, 1792, 0, 0, 0},
    {"conv256 k7 T3000", 3000, 256, 1792, 256, 0, 1},
    {"conv256 k11 T12k", 256, 12000, 2816, 0, 0, 0},
    {"conv256 k11 T12k", 12000, 256, 2816, 256, 0, 1},
    {"conv128 k3 T36k", 128, 36000, 384, 0, 0, 0},
    {"conv128 k3 T36k", 36000, 128, 384, 128, 0, 1},
    {"convT 512>256k20", 600, 5120, 512, 0, 0, 0},
    {"convT 256>128k12", 6000, 1536, 256, 0, 0, 0},
    {"albert q.k", 512, 512, 64, 768, 768, 1},
    {"albert p.v", 512, 64, 512, 0, 768, 0},
    {"albert ffn in", 128, 2048, 768, 0, 0, 1},
    {"albert ffn out", 128, 768, 2048, 0, 0, 1},
    {"linear 512>2048", 512, 2048, 512, 0, 0, 1},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void bench_gemm_table(ez_pool *pools[2], const char *title, const gemm_shape *shapes, size_t n, int with_ref) {
    printf("\nF32 GEMM, %s, GFLOP/s (B layout [N,K] is a GGUF weight)\n", title);
    printf("%-16s %5s %5s %5s %5s %5s | %7s | %7s %7s | %9s\n", "shape", "M", "N", "K", "lda", "B", "ref 1t",
           "fast 1t", "fast 2t", "us (2t)");
    for (size_t i = 0; i < n; i++)
        if (!g_match || strstr(shapes[i].name, g_match)) bench_gemm_shape(pools, shapes[i], with_ref);
}

/* Dispatch: loops of one BUSY_NS item per thread. The overhead of a loop
 * is its wall time minus BUSY_NS when every thread took part. On a loaded
 * machine a worker is often not running when the loop starts; the caller
 * then does its item too (the loop takes 2 x BUSY_NS) instead of waiting,
 * which the participation figure shows. */
#define BUSY_NS 2000
#define DISPATCH_LOOPS 20000

typedef struct {
    int ran_on[2];
} dispatch_record;

static void busy_item(void *ctx, int64_t begin, int64_t end, int thread_index) {
    dispatch_record *r = (dispatch_record *)ctx;
    uint64_t start = ez_time_ns();
    for (int64_t i = begin; i < end; i++) r->ran_on[i] = thread_index;
    while (ez_time_ns() - start < (uint64_t)(end - begin) * BUSY_NS) {
    }
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void bench_dispatch(ez_pool *pool, int loops) {
    uint64_t *overhead = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)loops);
    int n = 0, all = 0;
    for (int l = 0; l < loops; l++) {
        dispatch_record r = {{-1, -1}};
        uint64_t t0 = ez_time_ns(), t;
        ez_pool_for(pool, 2, 1, busy_item, &r);
        t = ez_time_ns() - t0;
        if (r.ran_on[0] != r.ran_on[1]) {
            overhead[n++] = t > BUSY_NS ? t - BUSY_NS : 0;
            all++;
        }
    }
    qsort(overhead, (size_t)n, sizeof overhead[0], compare_u64);
    printf("2 threads, %d loops of 2 x %d us items: both threads took part in %.1f%%", loops, BUSY_NS / 1000,
           100.0 * all / loops);
    if (n > 0)
        printf("; overhead then: p10 %.2f us, median %.2f us, p90 %.2f us", overhead[n / 10] * 1e-3,
               overhead[n / 2] * 1e-3, overhead[n * 9 / 10] * 1e-3);
    printf("\n");
    free(overhead);
}

static void empty_range(void *ctx, int64_t begin, int64_t end, int thread_index) {
    (void)ctx;
    (void)begin;
    (void)end;
    (void)thread_index;
}

static void run_empty_loop(void *p) { ez_pool_for((ez_pool *)p, 2, 1, empty_range, NULL); }

enum { TILE_K = 256, TILE_LDA = 768, TILE_ROWS = 96 };

typedef struct {
    const ez_gemm_kernels_ext *ext;
    const ez_gemm_bf16_kernels *bk;
    int mr, nr;
    const float *a, *b;
    const ez_bf16 *ab, *bb;
    float *c;
} tile_ctx;

static void run_tiles_f32(void *p) {
    const tile_ctx *t = (const tile_ctx *)p;
    for (int i = 0; i < TILE_ROWS; i += t->mr)
        t->ext->tile_direct(TILE_K, t->a + i * TILE_LDA, TILE_LDA, EZ_MIN(t->mr, TILE_ROWS - i), t->b,
                            t->c + i * t->nr, t->nr, t->nr, 0);
}

static void run_tiles_bf16(void *p) {
    const tile_ctx *t = (const tile_ctx *)p;
    for (int i = 0; i < TILE_ROWS; i += t->bk->mr)
        t->bk->tile(TILE_K, t->ab + i * TILE_LDA, TILE_LDA, EZ_MIN(t->bk->mr, TILE_ROWS - i), t->bb, t->c + i * t->nr,
                    t->nr, t->nr, 0);
}

static void bench_tiles(void) {
    const ez_gemm_kernels_ext *ext;
    const ez_gemm_kernels *kern = ez_gemm_kernels_active(&ext);
    tile_ctx t;
    double macs, f32;
    printf("\nregister tiles, one thread, operands in L1 (K = %d)\n", TILE_K);
    if (!kern || !ext || !ext->tile_direct) {
        printf("no float32 tile that reads A in place at this level\n");
        return;
    }
    t.ext = ext;
    t.bk = ez_gemm_bf16_kernels_active();
    t.mr = kern->mr;
    t.nr = kern->nr;
    t.a = filled((size_t)TILE_ROWS * TILE_LDA);
    t.b = filled((size_t)TILE_K * t.nr);
    t.c = filled((size_t)TILE_ROWS * t.nr);
    macs = (double)TILE_ROWS * t.nr * TILE_K;
    f32 = macs / seconds_per_call(run_tiles_f32, &t) * 1e-9;
    printf("float32 %dx%d tile (FMA):    %6.1f G multiply-adds/s\n", kern->mr, kern->nr, f32);
    if (t.bk && t.bk->nr == t.nr) {
        ez_bf16 *ab = (ez_bf16 *)ez_aligned_alloc(sizeof(ez_bf16) * (size_t)TILE_ROWS * TILE_LDA);
        ez_bf16 *bb = (ez_bf16 *)ez_aligned_alloc(sizeof(ez_bf16) * (size_t)TILE_K * t.nr);
        double bf16;
        t.bk->round(t.a, (int64_t)TILE_ROWS * TILE_LDA, ab);
        t.bk->pack_b_kn(TILE_K, t.nr, t.b, t.nr, bb);
        t.ab = ab;
        t.bb = bb;
        bf16 = macs / seconds_per_call(run_tiles_bf16, &t) * 1e-9;
        printf("BF16 %dx%d tile (vdpbf16ps): %6.1f G multiply-adds/s (%.2fx float32)\n", t.bk->mr, t.bk->nr, bf16,
               bf16 / f32);
        ez_aligned_free(ab);
        ez_aligned_free(bb);
    } else {
        printf("no BF16 tile at this level (AVX512_BF16 at avx512 only)\n");
    }
    ez_aligned_free((void *)t.a);
    ez_aligned_free((void *)t.b);
    ez_aligned_free(t.c);
}

static int wanted(int argc, char **argv, const char *section) {
    int any = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') {
            i += strcmp(argv[i], "--match") == 0;
            continue;
        }
        any = 1;
        if (strcmp(argv[i], section) == 0) return 1;
    }
    return !any;
}

int main(int argc, char **argv) {
    ez_pool *pools[2];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            g_batches = 2;
            g_batch_seconds = 0.005;
        } else if (strcmp(argv[i], "--match") == 0 && i + 1 < argc) {
            g_match = argv[++i];
        }
    }
    pools[0] = ez_pool_create(1);
    pools[1] = ez_pool_create(2);
    if (!pools[0] || !pools[1]) {
        fprintf(stderr, "cannot create thread pools\n");
        return 1;
    }
    printf("simd level: %s, %d logical CPUs\n", ez_simd_level_name(ez_simd_level_active()), ez_cpu_count());

    if (wanted(argc, argv, "llm")) bench_gemm_table(pools, "LLM", k_llm_shapes, COUNT(k_llm_shapes), 1);
    if (wanted(argc, argv, "diar")) bench_gemm_table(pools, "diarization", k_diar_shapes, COUNT(k_diar_shapes), 0);
    if (wanted(argc, argv, "tts")) bench_gemm_table(pools, "TTS", k_tts_shapes, COUNT(k_tts_shapes), 0);
    if (wanted(argc, argv, "tiles")) bench_tiles();

    if (wanted(argc, argv, "pool")) {
        printf("\npool dispatch\n");
        printf("empty 2-item loop: %.3f us (1 thread), %.3f us (2 threads)\n",
               seconds_per_call(run_empty_loop, pools[0]) * 1e6, seconds_per_call(run_empty_loop, pools[1]) * 1e6);
        bench_dispatch(pools[1], g_batches == 5 ? DISPATCH_LOOPS : DISPATCH_LOOPS / 10);
    }
    ez_pool_destroy(pools[0]);
    ez_pool_destroy(pools[1]);
    return 0;
}
