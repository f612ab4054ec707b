/* The LSTM shared by the diarization models (diar/nn.h): the gate-order
 * parser and the recurrence over a pool against a plain loop of reference
 * steps, bit-identical for any thread count (the step kernels themselves:
 * tests/c/test_lstm.c). The models themselves are checked
 * against onnxruntime / resemblyzer in tests/diar.
 *
 * `test_diar_models shared SEG.gguf EMB.gguf` (run by
 * tests/diar/test_pipeline.py with the real models) checks the pipeline's
 * shortcuts against the plain calls: overlapping windows segmented with one
 * shared SincNet filterbank (ez_seg_forward_span) against each window on its
 * own (ez_seg_forward), and clips embedded side by side (ez_emb_embed_clips)
 * against one at a time (ez_emb_embed), bit for bit.
 *
 * `test_diar_models race SEG.gguf EMB.gguf` (same test file; run under the
 * ASan and TSan builds too) closes a diarizer while eliza_diarize runs on
 * another thread: the close cancels and waits, a second call is refused
 * with ELIZA_E_STATE, nothing crashes or leaks. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/kernels/lstm.h"
#include "core/platform.h"
#include "core/pool.h"
#include "diar/embedding.h"
#include "diar/nn.h"
#include "diar/segmentation.h"
#include "check.h"

/* Not fmax(): Debian's aarch64 gcc 12 crashes vectorising fmax reductions. */
static inline double max_d(double a, double b) { return a > b ? a : b; }

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static float next_f32(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (float)((g_rng * 0x2545f4914f6cdd1dull) >> 40) / 8388608.0f - 1.0f;
}

static ez_pool *g_pool2; /* two threads */

static float *random_floats(size_t n, float scale) {
    float *p = (float *)malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = scale * next_f32();
    return p;
}

static void test_gate_order_parser(void) {
    static const struct {
        const char *order;
        int ok, perm[4];
    } cases[] = {
        {"iofc", 1, {0, 2, 3, 1}}, {"ifgo", 1, {0, 1, 2, 3}}, {"ifco", 1, {0, 1, 2, 3}},
        {"cfoi", 1, {3, 1, 0, 2}}, {"iof", 0, {0}},           {"iofcc", 0, {0}},
        {"iofx", 0, {0}},          {"iiof", 0, {0}},           {"IOFC", 0, {0}},
        {"", 0, {0}},              {"icgo", 0, {0}}, /* c and g are the same gate */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int perm[4] = {-1, -1, -1, -1};
        int32_t rc = ez_nn_gate_order(cases[i].order, perm);
        CHECK_MSG((rc == ELIZA_OK) == cases[i].ok, "gate order '%s': rc %d", cases[i].order, (int)rc);
        if (rc == ELIZA_E_FORMAT) CHECK_MSG(strstr(ez_error_message(), "gate order") != NULL, "message: %s", ez_error_message());
        if (cases[i].ok)
            CHECK_MSG(memcmp(perm, cases[i].perm, sizeof perm) == 0, "gate order '%s': perm %d %d %d %d", cases[i].order,
                  perm[0], perm[1], perm[2], perm[3]);
    }
}

/* A layer loaded by hand: weights straight into the ez_nn_lstm fields (the
 * loader itself is covered by the model tests). */
static void fill_layer(ez_nn_lstm *l, int n_dirs, int n_in, int H) {
    int G = 4 * H;
    memset(l, 0, sizeof *l);
    l->n_in = n_in;
    l->H = H;
    l->n_dirs = n_dirs;
    for (int k = 0; k < 4; k++) l->perm[k] = k;
    l->own_ih = random_floats((size_t)n_dirs * G * n_in, 0.3f);
    l->w_ih = l->own_ih;
    l->bias = random_floats((size_t)n_dirs * G, 0.5f);
    l->w_hh = (float *)ez_aligned_alloc(sizeof(float) * (size_t)n_dirs * ez_lstm_panels_floats(H));
    for (int d = 0; d < n_dirs; d++) {
        float *w = random_floats((size_t)G * H, 1.0f / sqrtf((float)H));
        ez_lstm_pack(H, w, NULL, l->w_hh + (size_t)d * ez_lstm_panels_floats(H));
        free(w);
    }
}

static void test_recurrence_matches_plain_loop(void) {
    static const int threads[] = {1, 2, 3};
    int B = 5, T = 37, H = 128, n_in = 24, G = 4 * H;
    ez_nn_lstm l;
    float *x, *xp, *want, *got[3];
    fill_layer(&l, 2, n_in, H);
    x = random_floats((size_t)B * T * n_in, 1.0f);
    xp = (float *)malloc(sizeof(float) * (size_t)B * T * 2 * G);
    want = (float *)malloc(sizeof(float) * (size_t)B * T * 2 * H);
    ez_nn_lstm_project(&l, NULL, x, (int64_t)B * T, xp);
    /* The plain loop: reference steps, one sequence and direction at a time. */
    for (int d = 0; d < 2; d++)
        for (int b = 0; b < B; b++) {
            float h[128] = {0}, c[128] = {0}, gates[512];
            for (int s = 0; s < T; s++) {
                int t = d ? T - 1 - s : s;
                const float *row = xp + ((size_t)b * T + t) * 2 * G + (size_t)d * G;
                ez_lstm_step_ref(1, H, 0, H, &row, l.bias + (size_t)d * G, l.w_hh + (size_t)d * ez_lstm_panels_floats(H),
                                 h, h, c, gates);
                memcpy(want + ((size_t)b * T + t) * 2 * H + (size_t)d * H, h, sizeof h);
            }
        }
    for (int i = 0; i < 3; i++) {
        ez_pool *pool = ez_pool_create(threads[i]);
        double err = 0;
        got[i] = (float *)malloc(sizeof(float) * (size_t)B * T * 2 * H);
        CHECK_MSG(ez_nn_lstm_recur(&l, pool, xp, B, T, (int64_t)T * 2 * G, 2 * G, got[i], (int64_t)T * 2 * H, 2 * H) == ELIZA_OK,
              "recur");
        for (size_t j = 0; j < (size_t)B * T * 2 * H; j++) {
            /* not max_d(): Debian's aarch64 gcc 12 crashes vectorising that reduction */
            double e = fabs((double)got[i][j] - want[j]);
            if (e > err) err = e;
        }
        CHECK_MSG(err <= 2e-5, "%d threads: max err %.3g against the plain loop", threads[i], err);
        if (i > 0)
            CHECK_MSG(memcmp(got[i], got[0], sizeof(float) * (size_t)B * T * 2 * H) == 0, "%d threads: bits differ from 1 thread",
                  threads[i]);
        ez_pool_destroy(pool);
    }
    for (int i = 0; i < 3; i++) free(got[i]);
    free(x), free(xp), free(want);
    ez_nn_lstm_free(&l);
}

/* w_ih read in the file's gate order ("iofc", one GEMM per run of blocks)
 * projects to the bits of the same rows reordered into i, f, g, o, for the
 * small-M and the packed products, both directions. */
static void test_projection_reads_file_gate_order_in_place(void) {
    static const int H_cases[] = {32, 20};
    static const int64_t row_cases[] = {3, 150};
    for (int hi = 0; hi < 2; hi++)
        for (int ri = 0; ri < 2; ri++) {
            const int H = H_cases[hi], G = 4 * H, n_in = 24, n_dirs = 2;
            const int64_t rows = row_cases[ri];
            ez_nn_lstm file, internal;
            float *x = random_floats((size_t)rows * n_in, 1.0f);
            float *want = (float *)malloc(sizeof(float) * (size_t)rows * n_dirs * G);
            float *got = (float *)malloc(sizeof(float) * (size_t)rows * n_dirs * G);
            float *reordered;
            fill_layer(&file, n_dirs, n_in, H);
            CHECK_RC(ez_nn_gate_order("iofc", file.perm), ELIZA_OK);
            memcpy(&internal, &file, sizeof internal);
            for (int k = 0; k < 4; k++) internal.perm[k] = k;
            reordered = (float *)malloc(sizeof(float) * (size_t)n_dirs * G * n_in);
            for (int d = 0; d < n_dirs; d++)
                for (int k = 0; k < 4; k++)
                    memcpy(reordered + ((size_t)d * G + (size_t)k * H) * n_in,
                           file.w_ih + ((size_t)d * G + (size_t)file.perm[k] * H) * n_in, sizeof(float) * (size_t)H * n_in);
            internal.w_ih = reordered;
            ez_nn_lstm_project(&internal, g_pool2, x, rows, want);
            ez_nn_lstm_project(&file, g_pool2, x, rows, got);
            CHECK_MSG(memcmp(got, want, sizeof(float) * (size_t)rows * n_dirs * G) == 0,
                      "H %d, %lld rows: the in-place projection differs from the reordered one", H, (long long)rows);
            free(x), free(want), free(got), free(reordered);
            ez_nn_lstm_free(&file);
        }
}

/* Deterministic voiced-sounding audio: two harmonic series with syllable-rate
 * envelopes, noise, and a DC offset dc. */
static float *voice_like(int64_t n, float dc) {
    const double two_pi = 6.283185307179586;
    float *x = (float *)malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        double t = (double)i / 16000.0, v = 0.0;
        for (int h = 1; h <= 6; h++) {
            v += sin(two_pi * 140.0 * h * t) / h * (0.5 + 0.5 * sin(two_pi * 3.1 * t));
            v += 0.6 * sin(two_pi * 215.0 * h * t + h) / h * (0.5 + 0.5 * cos(two_pi * 2.3 * t));
        }
        x[i] = (float)(0.1 * v + 0.01 * next_f32() + dc);
    }
    return x;
}

static void check_shared_filterbank(ez_seg_model *m, ez_pool *pool, float dc) {
    const int W = ez_seg_chunk_samples(m), F = ez_seg_frames(m, W), C = ez_seg_n_classes(m), n = 5;
    const int64_t step = 16000, len = (n - 1) * step + W;
    int64_t offset[5];
    float *x = voice_like(len, dc), *chunks = (float *)malloc(sizeof(float) * (size_t)n * (size_t)W);
    float *want = (float *)malloc(sizeof(float) * (size_t)n * (size_t)F * (size_t)C);
    float *got = (float *)malloc(sizeof(float) * (size_t)n * (size_t)F * (size_t)C);
    double worst = 0.0;
    /* windows 0, 2, 3, 4 only: a skipped (silent) window leaves a gap */
    for (int c = 0; c < n - 1; c++) {
        offset[c] = (c == 0 ? 0 : c + 1) * step;
        memcpy(chunks + (size_t)c * W, x + offset[c], sizeof(float) * (size_t)W);
    }
    CHECK_MSG(step % ez_seg_offset_quantum(m) == 0, "quantum %d", ez_seg_offset_quantum(m));
    CHECK_MSG(ez_seg_forward(m, pool, chunks, n - 1, W, want) == ELIZA_OK, "%s", ez_error_message());
    CHECK_MSG(ez_seg_forward_span(m, pool, x, len, offset, n - 1, W, got) == ELIZA_OK, "%s", ez_error_message());
    for (size_t i = 0; i < (size_t)(n - 1) * F * C; i++) worst = max_d(worst, fabs((double)got[i] - want[i]));
    printf("shared filterbank, DC %g: max |diff| of the log-probabilities %.3g\n", (double)dc, worst);
    CHECK_MSG(worst <= 1e-4, "shared filterbank (DC %g): max |diff| %g", (double)dc, worst);
    offset[0] = 5;
    CHECK_MSG(ez_seg_forward_span(m, pool, x, len, offset, 1, W, got) == ELIZA_E_INVALID_ARG, "unaligned offset taken");
    offset[0] = len - W + 10;
    CHECK_MSG(ez_seg_forward_span(m, pool, x, len, offset, 1, W, got) == ELIZA_E_INVALID_ARG, "offset past the end taken");
    x[len / 2] = NAN;
    offset[0] = 0;
    offset[1] = len - W;
    CHECK_MSG(ez_seg_forward_span(m, pool, x, len, offset, 2, W, got) == ELIZA_E_INVALID_ARG, "NaN taken");
    free(x), free(chunks), free(want), free(got);
}

static void check_clips(ez_emb_model *m, ez_pool *pool) {
    const int n_clips = 19, dim = ez_emb_dim(m);
    const size_t sizes[3] = {25600, 12000, 40000}; /* one partial, shorter, several */
    float *x = voice_like(25600 * n_clips + 40000, 0.0f);
    float *want = (float *)malloc(sizeof(float) * (size_t)n_clips * (size_t)dim);
    float *got = (float *)malloc(sizeof(float) * (size_t)n_clips * (size_t)dim);
    const float *clip[19];
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < n_clips; i++) {
            clip[i] = x + (size_t)i * 12800;
            CHECK_MSG(ez_emb_embed(m, pool, clip[i], sizes[s], want + (size_t)i * dim) == ELIZA_OK, "%s", ez_error_message());
        }
        CHECK_MSG(ez_emb_embed_clips(m, pool, clip, n_clips, sizes[s], got) == ELIZA_OK, "%s", ez_error_message());
        CHECK_MSG(memcmp(got, want, sizeof(float) * (size_t)n_clips * (size_t)dim) == 0,
              "%d clips of %zu samples side by side differ from one at a time", n_clips, sizes[s]);
    }
    CHECK_MSG(ez_emb_embed_clips(m, pool, clip, 0, sizes[0], got) == ELIZA_OK, "no clips");
    CHECK_MSG(ez_emb_embed_clips(m, pool, clip, 2, 100, got) == ELIZA_E_INVALID_ARG, "too short taken");
    free(x), free(want), free(got);
}

static int tool_shared(const char *seg_path, const char *emb_path) {
    ez_seg_model *seg = NULL;
    ez_emb_model *emb = NULL;
    for (int threads = 1; threads <= 2; threads++) {
        ez_pool *pool = ez_pool_create(threads);
        CHECK_MSG(ez_seg_load(seg_path, &seg) == ELIZA_OK, "%s", ez_error_message());
        CHECK_MSG(ez_emb_load(emb_path, &emb) == ELIZA_OK, "%s", ez_error_message());
        if (seg && emb) {
            check_shared_filterbank(seg, pool, 0.0f);
            check_shared_filterbank(seg, pool, 0.5f);
            check_clips(emb, pool);
        }
        ez_seg_free(seg);
        ez_emb_free(emb);
        ez_pool_destroy(pool);
    }
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed != 0;
}

/* How long a close may wait for the cancelled call: 2 s, or 30 s under a
 * sanitizer (TSan runs the models ~10x slower between cancel points). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CLOSE_BOUND_NS 30000000000ull
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CLOSE_BOUND_NS 30000000000ull
#endif
#endif
#ifndef CLOSE_BOUND_NS
#define CLOSE_BOUND_NS 2000000000ull
#endif

typedef struct {
    eliza_diarizer *d;
    const float *pcm;
    size_t n;
    int32_t rc;
} diarize_job;

static void run_diarize(void *arg) {
    diarize_job *job = (diarize_job *)arg;
    eliza_diarize_turn *turns = NULL;
    size_t count = 0;
    job->rc = eliza_diarize(job->d, job->pcm, job->n, 16000, NULL, &turns, &count);
    eliza_free(turns);
}

static int tool_race(const char *seg_path, const char *emb_path) {
    const size_t n = (size_t)16000 * 120; /* two minutes: far longer than the test waits */
    float *pcm = voice_like((int64_t)n, 0.0f);
    for (int round = 0; round < 3; round++) {
        eliza_diarizer *d = NULL;
        diarize_job job = {0};
        float *emb = NULL;
        size_t dim = 0;
        uint64_t t0;
        ez_thread *worker;
        CHECK_RC(eliza_diarizer_open(seg_path, emb_path, NULL, &d), ELIZA_OK);
        if (!d) break;
        job.d = d, job.pcm = pcm, job.n = n, job.rc = 1;
        worker = ez_thread_start(run_diarize, &job);
        /* Inside the call once it reports progress (a close before the call
         * has begun is the host's race, which no library can see). */
        t0 = ez_time_ns();
        while (eliza_diarizer_progress(d) <= 0.0f && ez_time_ns() - t0 < CLOSE_BOUND_NS) ez_sleep_ms(2);
        ez_sleep_ms(10 * round);
        CHECK_RC(eliza_diarizer_embed(d, pcm, 16000, &emb, &dim), ELIZA_E_STATE);
        CHECK_MSG(strstr(eliza_last_error(), "another call") != NULL, "message: %s", eliza_last_error());
        eliza_free(emb);
        t0 = ez_time_ns();
        eliza_diarizer_close(d); /* cancels the running call and waits for it */
        CHECK_MSG(ez_time_ns() - t0 < CLOSE_BOUND_NS, "close took %.0f ms", (double)(ez_time_ns() - t0) / 1e6);
        ez_thread_join(worker);
        CHECK_MSG(job.rc == ELIZA_E_CANCELLED, "the running call returned %d, not ELIZA_E_CANCELLED", (int)job.rc);
    }
    free(pcm);
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed != 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "shared") == 0) return tool_shared(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "race") == 0) return tool_race(argv[2], argv[3]);
    if (argc != 1) {
        fprintf(stderr, "usage: %s [shared|race SEG.gguf EMB.gguf]\n", argv[0]);
        return 2;
    }
    SKIP_IF_PINNED_LEVEL_MISSING();
    test_gate_order_parser();
    test_recurrence_matches_plain_loop();
    g_pool2 = ez_pool_create(2);
    test_projection_reads_file_gate_order_in_place();
    ez_pool_destroy(g_pool2);
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed != 0;
}
