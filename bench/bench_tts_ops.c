/* GFLOP/s of the scalar references (tts/ops_ref.c) and the fast Kokoro ops
 * (tts/ops.c) with 1 and 2 threads, at Kokoro-82M's layer shapes for about
 * 5 s of speech (200 frames: the decoder at 2 x 200 = 400 steps, the
 * generator at 4,000 and 24,000 samples).
 *
 *   bench_tts_ops            all of it
 *   bench_tts_ops --quick    fewer repetitions (a smoke run)
 *   bench_tts_ops WORD       only the rows whose name contains WORD
 *
 * Then the generator's resblock convolutions (Kokoro's AdaINResBlock1:
 * 256 channels at 4,000 steps, 128 at 24,000; kernels 3, 7, 11; dilations
 * 1, 3, 5) by the direct im2col GEMM (ez_tts_conv1d_direct) and by FFT
 * (ez_tts_conv1d_fft), in ms per call, and their total over one forward
 * pass of the generator at that length (each shape times the number of
 * times the generator runs it). "gen" selects just that table.
 *
 * Build: configure with -DELIZA_BUILD_BENCH=ON (bench_*.c link against the
 * static library). The references are timed on the same channels and
 * kernels but at most REF_MAX_T steps (their speed does not depend on the
 * length), so the run stays short. Each figure is the best of several timed
 * batches; other load on the machine shows up as noise in fewer of them.
 * Flops count 2 per multiply-add of the layer's definition (elementwise ops:
 * per element). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cpu.h"
#include "core/kernels/lstm.h"
#include "core/platform.h"
#include "core/pool.h"
#include "tts/ops.h"

#define REF_MAX_T 400

static int g_batches = 3;
static double g_batch_seconds = 0.2;

typedef void (*bench_fn)(void *ctx);

/* Seconds per call: best batch of calls, each batch about g_batch_seconds,
 * in wall time, and in process CPU time into *cpu (ISO C clock(): all
 * threads, so with one thread it is that thread's time, which other load on
 * the machine barely changes). */
static double seconds_per_call(bench_fn fn, void *ctx, double *cpu) {
    uint64_t t0 = ez_time_ns();
    int64_t reps = 1;
    double best = 1e30, once;
    fn(ctx);
    once = (double)(ez_time_ns() - t0) * 1e-9;
    if (once > 0) reps = (int64_t)(g_batch_seconds / once) + 1;
    *cpu = 1e30;
    for (int b = 0; b < g_batches; b++) {
        uint64_t start = ez_time_ns();
        clock_t c0 = clock();
        double per_call, cpu_per_call;
        for (int64_t r = 0; r < reps; r++) fn(ctx);
        per_call = (double)(ez_time_ns() - start) * 1e-9 / (double)reps;
        cpu_per_call = (double)(clock() - c0) / CLOCKS_PER_SEC / (double)reps;
        if (per_call < best) best = per_call;
        if (cpu_per_call < *cpu) *cpu = cpu_per_call;
    }
    return best;
}

static float *filled(int64_t n, float scale) {
    float *p = (float *)ez_aligned_alloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = scale * ((float)((i * 7919u) % 1000u) / 500.0f - 1.0f);
    return p;
}

typedef enum { OP_CONV, OP_CONVT, OP_LINEAR, OP_LSTM, OP_ADAIN_SNAKE } op_kind;

typedef struct {
    const char *name;
    op_kind kind;
    int c_in, t, c_out, k, stride, pad, dilation, groups; /* convT: dilation = output padding;
                                                           linear: t = rows; lstm: c_out = H */
} shape;

typedef struct {
    shape s;
    ez_pool *pool; /* NULL: run the reference */
    float *x, *w, *w2, *b, *b2, *y, *gb;
    float *ws;   /* lstm reference: projections [T, 4H], c and gates */
} run_ctx;

static int out_len(const shape *s) {
    if (s->kind == OP_CONV) return ez_conv1d_out_len(s->t, s->k, s->stride, s->pad, s->dilation);
    if (s->kind == OP_CONVT) return ez_conv_transpose1d_out_len(s->t, s->k, s->stride, s->pad, s->dilation);
    return s->t;
}

static double flops_of(const shape *s) {
    double cig = (double)s->c_in / s->groups, t_out = out_len(s);
    switch (s->kind) {
    case OP_CONV: return 2.0 * s->c_out * t_out * cig * s->k;
    case OP_CONVT: return 2.0 * s->c_out / s->groups * s->t * s->c_in * s->k;
    case OP_LINEAR: return 2.0 * s->t * s->c_in * s->c_out;
    case OP_LSTM: return 2.0 * 2.0 * s->t * 4.0 * s->c_out * (s->c_in + s->c_out);
    case OP_ADAIN_SNAKE: return (double)s->c_in * s->t;
    }
    return 0;
}

static void run(void *p) {
    run_ctx *r = (run_ctx *)p;
    const shape *s = &r->s;
    switch (s->kind) {
    case OP_CONV:
        if (r->pool)
            ez_tts_conv1d(r->pool, r->x, s->c_in, s->t, r->w, r->b, s->c_out, s->k, s->stride, s->pad, s->dilation,
                          s->groups, r->y);
        else
            ez_tts_conv1d_ref(r->x, s->c_in, s->t, r->w, r->b, s->c_out, s->k, s->stride, s->pad, s->dilation,
                              s->groups, r->y);
        break;
    case OP_CONVT:
        if (r->pool)
            ez_tts_conv_transpose1d(r->pool, r->x, s->c_in, s->t, r->w, r->b, s->c_out, s->k, s->stride, s->pad, s->dilation,
                                    s->groups, r->y);
        else
            ez_tts_conv_transpose1d_ref(r->x, s->c_in, s->t, r->w, r->b, s->c_out, s->k, s->stride, s->pad, s->dilation,
                                        s->groups, r->y);
        break;
    case OP_LINEAR:
        if (r->pool)
            ez_tts_linear(r->pool, r->x, s->t, s->c_in, r->w, r->b, s->c_out, r->y);
        else
            ez_tts_linear_ref(r->x, s->t, s->c_in, r->w, r->b, s->c_out, r->y);
        break;
    case OP_LSTM: {
        int H = s->c_out;
        if (r->pool) {
            const float *const wi[2] = {r->w, r->w}, *const wh[2] = {r->w2, r->w2};
            const float *const bi[2] = {r->b, r->b}, *const bh[2] = {r->b2, r->b2};
            ez_tts_lstm_bidir(r->pool, r->x, s->t, s->c_in, H, wi, wh, bi, bh, r->y);
        } else {
            /* the linear reference for the projections, core's reference step (w2: panels) */
            float *xp = r->ws, *c = xp + (int64_t)s->t * 4 * H, *gates = c + H;
            ez_tts_linear_ref(r->x, s->t, s->c_in, r->w, r->b, 4 * H, xp);
            for (int d = 0; d < 2; d++) {
                memset(c, 0, sizeof(float) * (size_t)H);
                for (int step = 0; step < s->t; step++) {
                    int t = d ? s->t - 1 - step : step;
                    const float *row = xp + (int64_t)t * 4 * H, *h_prev = r->y + (int64_t)(d ? t + 1 : t - 1) * 2 * H + d * H;
                    if (step == 0) h_prev = r->b2 + 4 * H; /* zeros */
                    ez_lstm_step_ref(1, H, 0, H, &row, r->b2, r->w2, h_prev, r->y + (int64_t)t * 2 * H + d * H, c, gates);
                }
            }
        }
        break;
    }
    case OP_ADAIN_SNAKE:
        /* x is renormalized every call, so repeated calls stay in range */
        if (r->pool) {
            ez_tts_adain1d_snake(r->pool, r->x, s->c_in, s->t, r->gb, 1e-5f, r->b);
        } else {
            ez_tts_adain1d_ref(r->x, s->c_in, s->t, r->gb, 1e-5f);
            ez_tts_snake_ref(r->x, s->c_in, s->t, r->b);
        }
        break;
    }
}

typedef struct {
    int fft; /* 0 direct, 1 FFT, 2 FFT with BF16 products */
    int c, t, k, d;
    ez_pool *pool;
    const float *x, *w, *b;
    float *y;
} gen_ctx;

static void run_gen(void *p) {
    gen_ctx *g = (gen_ctx *)p;
    if (g->fft == 2)
        ez_tts_conv1d_fft_bf16(g->pool, g->x, g->c, g->t, g->w, g->b, g->c, g->k, (g->k * g->d - g->d) / 2, g->d,
                               g->y);
    else if (g->fft)
        ez_tts_conv1d_fft(g->pool, g->x, g->c, g->t, g->w, g->b, g->c, g->k, (g->k * g->d - g->d) / 2, g->d, g->y);
    else
        ez_tts_conv1d_direct(g->pool, g->x, g->c, g->t, g->w, g->b, g->c, g->k, 1, (g->k * g->d - g->d) / 2, g->d, 1,
                             g->y);
}

/* One row of the direct / FFT (/ FFT in BF16) table; adds uses x ms (2
 * threads) to totals. */
static void bench_generator_conv(ez_pool *pools[2], int c, int t, int k, int d, int uses, double totals[3]) {
    const int n_paths = ez_tts_bf16_available() ? 3 : 2;
    gen_ctx g;
    double ms[3][2] = {{0, 0}, {0, 0}, {0, 0}}, cpu;
    float *x = filled((int64_t)c * t, 1.0f), *w = filled((int64_t)c * c * k, 0.05f), *b = filled(c, 0.5f);
    float *y = filled((int64_t)c * t, 0.0f);
    g.c = c, g.t = t, g.k = k, g.d = d, g.x = x, g.w = w, g.b = b, g.y = y;
    for (int fft = 0; fft < n_paths; fft++)
        for (int p = 0; p < 2; p++) {
            g.fft = fft;
            g.pool = pools[p];
            ms[fft][p] = seconds_per_call(run_gen, &g, &cpu) * 1e3;
        }
    char name[64];
    snprintf(name, sizeof name, "conv1d %d->%d k%d d%d T%d x%d", c, c, k, d, t, uses);
    printf("%-34s | %8.2f %8.2f | %8.2f %8.2f | %5.2fx %5.2fx", name, ms[0][0], ms[1][0], ms[0][1], ms[1][1],
           ms[0][0] / ms[1][0], ms[0][1] / ms[1][1]);
    if (n_paths == 3)
        printf(" | %8.2f %8.2f | %5.2fx %5.2fx", ms[2][0], ms[2][1], ms[1][0] / ms[2][0], ms[1][1] / ms[2][1]);
    printf("\n");
    for (int i = 0; i < n_paths; i++) totals[i] += uses * ms[i][1];
    ez_aligned_free(x), ez_aligned_free(w), ez_aligned_free(b), ez_aligned_free(y);
}

/* Each resblock runs convs1 at dilations 1, 3, 5 and convs2 three times at 1; the
 * stages run resblocks of kernels 3, 7, 11 and one noise_res (kernel 7 at
 * 256 channels, 11 at 128). */
static void bench_generator(ez_pool *pools[2]) {
    static const int ks[3] = {3, 7, 11}, ds[3] = {1, 3, 5};
    double totals[3] = {0, 0, 0};
    printf("\ngenerator resblock convolutions, ms per call (about 5 s of speech)\n");
    printf("%-34s | %17s | %17s | %13s | %17s | %13s\n", "", "1 thread", "2 threads", "FFT speed-up",
           "FFT bf16 1t, 2t", "bf16 vs FFT");
    printf("%-34s | %8s %8s | %8s %8s | %6s %6s\n", "shape x uses per generator pass", "direct", "FFT", "direct",
           "FFT", "1t", "2t");
    for (int stage = 0; stage < 2; stage++) {
        const int c = stage ? 128 : 256, t = stage ? 24000 : 4000, noise_k = stage ? 11 : 7;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                int per_block = ds[j] == 1 ? 4 : 1, uses = per_block * (1 + (ks[i] == noise_k));
                bench_generator_conv(pools, c, t, ks[i], ds[j], uses, totals);
            }
    }
    printf("one generator pass, 2 threads: direct %.1f ms, FFT %.1f ms (%.2fx)", totals[0], totals[1],
           totals[0] / totals[1]);
    if (totals[2] > 0) printf(", FFT with BF16 products %.1f ms (%.2fx the FFT)", totals[2], totals[1] / totals[2]);
    printf("\n");
}

static void bench_shape(ez_pool *pools[2], shape s) {
    shape ref_shape = s;
    run_ctx r;
    double flops, ref, f1, f2, ref_cpu, f1_cpu, f2_cpu;
    int64_t nx, nw, nw2 = 0, ny;
    if (s.kind != OP_LINEAR && ref_shape.t > REF_MAX_T) ref_shape.t = REF_MAX_T;
    nx = (int64_t)s.c_in * s.t;
    ny = (int64_t)s.c_out * out_len(&s) * (s.kind == OP_LSTM ? 2 : 1);
    nw = (int64_t)s.c_out * (s.c_in / s.groups) * s.k;
    if (s.kind == OP_CONVT) nw = (int64_t)s.c_in * (s.c_out / s.groups) * s.k;
    if (s.kind == OP_LINEAR) nw = (int64_t)s.c_out * s.c_in;
    if (s.kind == OP_LSTM) nw = (int64_t)4 * s.c_out * s.c_in, nw2 = (int64_t)ez_lstm_panels_floats(s.c_out);
    if (s.kind == OP_ADAIN_SNAKE) ny = nx;
    memset(&r, 0, sizeof r);
    r.x = filled(nx, 1.0f);
    r.w = filled(nw, 0.05f);
    r.w2 = filled(nw2, 0.05f);
    r.b = filled(EZ_MAX(4 * s.c_out, s.c_in), 0.5f);
    r.b2 = filled(5 * s.c_out, 0.1f);
    memset(r.b2 + 4 * s.c_out, 0, sizeof(float) * (size_t)s.c_out); /* h_{-1} of the lstm reference */
    if (s.kind == OP_LSTM) r.ws = filled((int64_t)s.t * 4 * s.c_out + 5 * s.c_out, 0.0f);
    r.gb = filled(2 * s.c_in, 0.5f);
    if (s.kind == OP_ADAIN_SNAKE) /* Snake's alpha: r.b in [0.5, 1.5) */
        for (int i = 0; i < s.c_in; i++) r.b[i] += 1.0f;
    r.y = filled(ny, 0.0f);
    r.s = ref_shape;
    ref = seconds_per_call(run, &r, &ref_cpu) * flops_of(&s) / flops_of(&ref_shape);
    ref_cpu *= flops_of(&s) / flops_of(&ref_shape);
    r.s = s;
    r.pool = pools[0];
    f1 = seconds_per_call(run, &r, &f1_cpu);
    r.pool = pools[1];
    f2 = seconds_per_call(run, &r, &f2_cpu);
    flops = flops_of(&s) * 1e-9;
    printf("%-38s | %7.2f %7.2f | %7.2f %7.2f | %7.2f | %6.1fx %6.1fx | %8.2f\n", s.name, flops / ref, flops / ref_cpu,
           flops / f1, flops / f1_cpu, flops / f2, ref_cpu / f1_cpu, ref / f2, f2 * 1e3);
    ez_aligned_free(r.x), ez_aligned_free(r.w), ez_aligned_free(r.w2), ez_aligned_free(r.b);
    ez_aligned_free(r.b2), ez_aligned_free(r.gb), ez_aligned_free(r.y), ez_aligned_free(r.ws);
}

int main(int argc, char **argv) {
    static const shape shapes[] = {
        {"conv1d 512->512 k5 T400 (text enc)", OP_CONV, 512, 400, 512, 5, 1, 2, 1, 1},
        {"conv1d 1090->1024 k3 T400 (decoder)", OP_CONV, 1090, 400, 1024, 3, 1, 1, 1, 1},
        {"conv1d 512->64 k1 T400 (asr_res)", OP_CONV, 512, 400, 64, 1, 1, 0, 1, 1},
        {"conv1d 256->256 k3 d1 T4000 (gen 0)", OP_CONV, 256, 4000, 256, 3, 1, 1, 1, 1},
        {"conv1d 256->256 k7 d3 T4000 (gen 0)", OP_CONV, 256, 4000, 256, 7, 1, 9, 3, 1},
        {"conv1d 256->256 k11 d5 T4000 (gen 0)", OP_CONV, 256, 4000, 256, 11, 1, 25, 5, 1},
        {"conv1d 128->128 k11 d5 T24000 (gen 1)", OP_CONV, 128, 24000, 128, 11, 1, 25, 5, 1},
        {"conv1d 128->22 k7 T24000 (conv_post)", OP_CONV, 128, 24000, 22, 7, 1, 3, 1, 1},
        {"conv1d 22->256 k12 s6 T24000 (noise)", OP_CONV, 22, 24000, 256, 12, 6, 3, 1, 1},
        {"convT 512->256 k20 s10 T400 (ups 0)", OP_CONVT, 512, 400, 256, 20, 10, 5, 0, 1},
        {"convT 256->128 k12 s6 T4000 (ups 1)", OP_CONVT, 256, 4000, 128, 12, 6, 3, 0, 1},
        {"convT dw 1090 k3 s2 T200 (pool)", OP_CONVT, 1090, 200, 1090, 3, 2, 1, 1, 1090},
        {"linear 768x768 T64 (ALBERT)", OP_LINEAR, 768, 64, 768, 1, 1, 0, 1, 1},
        {"linear 768x2048 T64 (ALBERT FFN)", OP_LINEAR, 768, 64, 2048, 1, 1, 0, 1, 1},
        {"lstm bi 512->2x256 T64 (text enc)", OP_LSTM, 512, 64, 256, 1, 1, 0, 1, 1},
        {"lstm bi 640->2x256 T200 (predictor)", OP_LSTM, 640, 200, 256, 1, 1, 0, 1, 1},
        {"adain+snake 512 x T400 (elem/s)", OP_ADAIN_SNAKE, 512, 400, 512, 1, 1, 0, 1, 1},
        {"adain+snake 128 x T24000 (elem/s)", OP_ADAIN_SNAKE, 128, 24000, 128, 1, 1, 0, 1, 1},
    };
    ez_pool *pools[2];
    const char *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            g_batches = 1;
            g_batch_seconds = 0.01;
        } else {
            filter = argv[i];
        }
    }
    pools[0] = ez_pool_create(1);
    pools[1] = ez_pool_create(2);
    if (!pools[0] || !pools[1]) {
        fprintf(stderr, "cannot create thread pools\n");
        return 1;
    }
    printf("simd level: %s, %d logical CPUs\n\n", ez_simd_level_name(ez_simd_level_active()), ez_cpu_count());
    printf("GFLOP/s (adain+snake: G elements/s); wall = best wall time, cpu = best CPU time\n");
    printf("%-38s | %15s | %15s | %7s | %14s | %8s\n", "", "reference", "fast, 1 thread", "fast 2t",
           "speed-up", "");
    printf("%-38s | %7s %7s | %7s %7s | %7s | %7s %6s | %8s\n", "op", "wall", "cpu", "wall", "cpu", "wall", "1t cpu",
           "2t", "ms 2t");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!filter || strstr(shapes[i].name, filter)) bench_shape(pools, shapes[i]);
    if (!filter || strstr("generator resblock", filter)) bench_generator(pools);
    ez_pool_destroy(pools[0]);
    ez_pool_destroy(pools[1]);
    return 0;
}
