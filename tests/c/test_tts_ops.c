/* The fast Kokoro ops (tts/ops.c) against their scalar references
 * (tts/ops_ref.c): on random shapes (strides, paddings, dilations, groups,
 * depthwise, edge sizes) and on Kokoro-82M's own layer shapes (time shortened
 * so the double-precision references stay quick), each with 1, 2 and 3
 * threads and without a pool, which must give the same bits.
 *
 * Error bounds (eps = 2^-23, FLT_EPSILON):
 *  - linear, conv1d, conv_transpose1d: per output,
 *      |fast - ref| <= (8 sqrt(K) + 4) eps sum |w x| (+ |b|),
 *    K the length of the sum; sum |w x| is the reference run on |w|, |x|, |b|.
 *  - conv1d by FFT (ez_tts_conv1d_fft, and ez_tts_conv1d where it takes
 *    that path): the same bound with sum |w x| replaced by its largest value
 *    in the output's row, since the transforms spread each block's rounding
 *    over the block; and max |fast - ref| / max |ref| <= 1e-5 per call.
 *  - AdaIN: |fast - ref| <= 4 eps (|(1 + gamma) n| + |beta|), n the
 *    normalized value.
 *  - Snake (alone or after AdaIN): |fast - ref| <= 2^-21 (|y| + |s| / |alpha|),
 *    y the output, s = sin(alpha x); plus twice the AdaIN bound of its input
 *    when fused (d snake / dx <= 2).
 *  - LSTM (core's step, tests/c/test_lstm.c, under the input projection and
 *    the threading here): |h - h_oracle| <= 2e-6 after every step (h in
 *    [-1, 1]) with PyTorch's default weight scale, against the double
 *    precision loop lstm_oracle below, at every level.
 * Each check prints the largest error seen as a fraction of its bound.
 * Under ELIZA_FORCE_SCALAR=1 the other ops are the references: equality is
 * exact. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/platform.h"
#include "core/pool.h"
#include "core/quant.h"
#include "core/kernels/lstm.h"
#include "tts/ops.h"
#include "tts/ops_fft.h"
#include "tts_ops_golden.h"
#include "check.h"

static uint64_t g_rng = 0x2545f4914f6cdd1dull;

static uint32_t next_u32(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (uint32_t)((g_rng * 0x2545f4914f6cdd1dull) >> 32);
}

/* Uniform in [-scale, scale). */
static float next_f32(float scale) { return scale * ((float)next_u32() / 2147483648.0f - 1.0f); }

static float *random_floats(int64_t n, float scale) {
    float *p = (float *)malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = next_f32(scale);
    return p;
}

static float *abs_copy(const float *p, int64_t n) {
    float *q = (float *)malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) q[i] = fabsf(p[i]);
    return q;
}

static float *filled(int64_t n, float v) {
    float *p = (float *)malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = v;
    return p;
}

static ez_pool *g_pool1, *g_pool2, *g_pool3;
static int g_scalar;
static double g_worst_sum, g_worst_adain, g_worst_snake, g_worst_lstm, g_worst_fft, g_worst_fft_rel, g_worst_gelu;
static double g_worst_fft_bf16, g_worst_fft_bf16_rel;

/* Outputs over the bound, and the largest error / bound into *worst. */
static int64_t count_over(const float *fast, const float *ref, const double *bound, int64_t n, double *worst) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)fast[i] - (double)ref[i]);
        if (!(err <= bound[i])) bad++;
        if (bound[i] > 0 && err / bound[i] > *worst) *worst = err / bound[i];
    }
    return bad;
}

/* ez_tts_conv1d_fft_bf16's bound over the float32 path's. Its products'
 * operands are rounded to 8 significant bits instead of 24; measured on
 * the shapes below, the largest error is about 200 times the float32
 * bound (0.4 of this one), max |error| / max |ref| 3.3e-3 to 3.7e-3. */
#define BF16_TOLERANCE 512.0

static double sum_tolerance(int64_t K) { return (8.0 * sqrt((double)K) + 4.0) * FLT_EPSILON; }

/* The FFT path's bound: sum_tolerance times the row's largest sum |w x|. */
static void row_bounds(const float *mag, int rows, int cols, int64_t K, double *bound) {
    for (int r = 0; r < rows; r++) {
        double top = 0;
        for (int c = 0; c < cols; c++)
            if (mag[(int64_t)r * cols + c] > top) top = mag[(int64_t)r * cols + c];
        for (int c = 0; c < cols; c++) bound[(int64_t)r * cols + c] = sum_tolerance(K) * top;
    }
}

/* max |got - want| / max |want| (no fmax reductions: aarch64 gcc 12 ICEs on them) */
static double relative_error(const float *got, const float *want, int64_t n) {
    double err = 0, top = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]), v = fabs((double)want[i]);
        if (e > err) err = e;
        if (v > top) top = v;
    }
    return top > 0 ? err / top : err;
}

/* fast(pool) with 1 thread into out[0], with 2 into out[1], then without a
 * pool and with 3 threads into out[2]; reports differing bits. */
typedef void (*run_fn)(void *ctx, ez_pool *pool, float *out);

static void run_all_pools(run_fn fn, void *ctx, float *out[3], int64_t n, const char *what) {
    fn(ctx, g_pool1, out[0]);
    fn(ctx, g_pool2, out[1]);
    CHECK_MSG(memcmp(out[0], out[1], sizeof(float) * (size_t)n) == 0, "%s: 1 and 2 threads differ", what);
    fn(ctx, NULL, out[2]);
    CHECK_MSG(memcmp(out[0], out[2], sizeof(float) * (size_t)n) == 0, "%s: pool and no pool differ", what);
    fn(ctx, g_pool3, out[2]);
    CHECK_MSG(memcmp(out[0], out[2], sizeof(float) * (size_t)n) == 0, "%s: 1 and 3 threads differ", what);
}

static float **alloc3(int64_t n) {
    float **o = (float **)malloc(3 * sizeof(float *));
    for (int i = 0; i < 3; i++) o[i] = filled(n, NAN);
    return o;
}

static void free3(float **o) {
    for (int i = 0; i < 3; i++) free(o[i]);
    free(o);
}

/* ---- conv1d ------------------------------------------------------------------------- */

typedef struct {
    int c_in, t_in, c_out, k, stride, pad, dilation, groups;
} conv_shape;

typedef struct {
    conv_shape s;
    const float *x, *w, *b;
} conv_ctx;

static void run_conv1d(void *p, ez_pool *pool, float *out) {
    const conv_ctx *c = (const conv_ctx *)p;
    ez_tts_conv1d(pool, c->x, c->s.c_in, c->s.t_in, c->w, c->b, c->s.c_out, c->s.k, c->s.stride, c->s.pad,
                  c->s.dilation, c->s.groups, out);
}

static void check_conv1d(conv_shape s, int with_bias) {
    int t_out = ez_conv1d_out_len(s.t_in, s.k, s.stride, s.pad, s.dilation);
    int64_t nx = (int64_t)s.c_in * s.t_in, nw = (int64_t)s.c_out * (s.c_in / s.groups) * s.k;
    int64_t ny = (int64_t)s.c_out * t_out, K = (int64_t)(s.c_in / s.groups) * s.k, bad;
    conv_ctx c = {s, random_floats(nx, 1.0f), random_floats(nw, 0.2f), with_bias ? random_floats(s.c_out, 1.0f) : NULL};
    float *ref = filled(ny, NAN), *mag = filled(ny, 0), **out = alloc3(ny);
    float *ax = abs_copy(c.x, nx), *aw = abs_copy(c.w, nw), *ab = c.b ? abs_copy(c.b, s.c_out) : NULL;
    double *bound = (double *)malloc(sizeof(double) * (size_t)ny);
    char what[160];
    snprintf(what, sizeof what, "conv1d c_in=%d t_in=%d c_out=%d k=%d stride=%d pad=%d dil=%d groups=%d bias=%d",
             s.c_in, s.t_in, s.c_out, s.k, s.stride, s.pad, s.dilation, s.groups, with_bias);
    ez_tts_conv1d_ref(c.x, s.c_in, s.t_in, c.w, c.b, s.c_out, s.k, s.stride, s.pad, s.dilation, s.groups, ref);
    ez_tts_conv1d_ref(ax, s.c_in, s.t_in, aw, ab, s.c_out, s.k, s.stride, s.pad, s.dilation, s.groups, mag);
    run_all_pools(run_conv1d, &c, out, ny, what);
    if (ez_tts_conv1d_prefers_fft(s.c_in, s.t_in, s.c_out, s.k, s.stride, s.pad, s.dilation, s.groups))
        row_bounds(mag, s.c_out, t_out, K, bound);
    else
        for (int64_t i = 0; i < ny; i++) bound[i] = g_scalar ? 0.0 : sum_tolerance(K) * mag[i];
    bad = count_over(out[0], ref, bound, ny, &g_worst_sum);
    CHECK_MSG(bad == 0, "%s: %lld of %lld outputs off the reference", what, (long long)bad, (long long)ny);
    free((void *)c.x), free((void *)c.w), free((void *)c.b), free(ax), free(aw), free(ab);
    free(ref), free(mag), free(bound), free3(out);
}

static void test_conv1d_random_shapes_match_reference(void) {
    static const conv_shape shapes[] = {
        {1, 1, 1, 1, 1, 0, 1, 1},      {3, 17, 5, 3, 1, 1, 1, 1},     {7, 40, 13, 5, 2, 2, 1, 1},
        {4, 33, 6, 3, 3, 0, 2, 2},     {6, 50, 9, 7, 1, 9, 3, 3},     {16, 100, 16, 3, 1, 1, 1, 16},
        {8, 29, 8, 5, 2, 4, 2, 8},     {2, 300, 40, 11, 1, 25, 5, 1}, {33, 70, 31, 1, 1, 0, 1, 1},
        {1, 200, 1, 3, 2, 1, 1, 1},    {5, 10, 7, 9, 1, 20, 1, 1},    {300, 37, 20, 3, 1, 1, 1, 1},
        {12, 1000, 22, 4, 4, 0, 1, 2},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        check_conv1d(shapes[i], 1);
        check_conv1d(shapes[i], 0);
    }
}

/* Kokoro-82M: text encoder k5; decoder blocks (1090 -> 1024 k3, 1x1
 * shortcuts); asr_res; generator resblocks at 256 and 128 channels with
 * kernels 3, 7, 11 and dilations 1, 3, 5; noise convs; conv_post; F0_conv. */
static void test_conv1d_kokoro_shapes_match_reference(void) {
    static const conv_shape shapes[] = {
        {512, 120, 512, 5, 1, 2, 1, 1},  {1090, 40, 1024, 3, 1, 1, 1, 1}, {1090, 40, 1024, 1, 1, 0, 1, 1},
        {512, 150, 64, 1, 1, 0, 1, 1},   {256, 600, 256, 3, 1, 1, 1, 1},  {256, 600, 256, 7, 1, 9, 3, 1},
        {256, 600, 256, 11, 1, 25, 5, 1}, {128, 1500, 128, 11, 1, 25, 5, 1}, {128, 1500, 128, 7, 1, 3, 1, 1},
        {22, 3600, 256, 12, 6, 3, 1, 1}, {22, 1500, 128, 1, 1, 0, 1, 1},  {128, 1500, 22, 7, 1, 3, 1, 1},
        {1, 400, 1, 3, 2, 1, 1, 1},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_conv1d(shapes[i], 1);
}

/* ---- conv1d on panels ---------------------------------------------------------------- */

typedef struct {
    conv_shape s;
    const float *x, *b;
    const ez_tts_panels *panels;
    int32_t rc;
} panels_ctx;

static void run_conv1d_panels(void *p, ez_pool *pool, float *out) {
    panels_ctx *c = (panels_ctx *)p;
    c->rc = ez_tts_conv1d_direct_panels(pool, c->x, c->s.c_in, c->s.t_in, c->panels, c->b, c->s.c_out, c->s.k,
                                        c->s.stride, c->s.pad, c->s.dilation, out);
}

/* A float16 weight laid out as panels (what Kokoro does at open) gives the
 * bits of the direct path on the weight widened whole, for any thread count;
 * panels made for another row tile are refused without touching y. */
static void check_conv1d_panels(conv_shape s, int with_bias) {
    const int mr = ez_tts_panels_mr();
    const int64_t K = (int64_t)s.c_in * s.k, nw = (int64_t)s.c_out * K;
    int t_out = ez_conv1d_out_len(s.t_in, s.k, s.stride, s.pad, s.dilation);
    int64_t ny = (int64_t)s.c_out * t_out;
    float *x = random_floats((int64_t)s.c_in * s.t_in, 1.0f), *b = with_bias ? random_floats(s.c_out, 1.0f) : NULL;
    float *w = random_floats(nw, 0.2f), *want = filled(ny, NAN), **out = alloc3(ny);
    uint16_t *h = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)nw), *lay;
    ez_tts_panels panels = {NULL, mr}, other;
    panels_ctx c = {s, x, b, &panels, ELIZA_OK};
    char what[160];
    snprintf(what, sizeof what, "conv1d on panels c_in=%d t_in=%d c_out=%d k=%d stride=%d pad=%d dil=%d bias=%d",
             s.c_in, s.t_in, s.c_out, s.k, s.stride, s.pad, s.dilation, with_bias);
    for (int64_t i = 0; i < nw; i++) {
        h[i] = ez_f32_to_f16(w[i]);
        w[i] = ez_f16_to_f32(h[i]);
    }
    lay = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)ez_tts_panels_count(s.c_out, K, mr));
    ez_tts_panels_pack(h, s.c_out, K, mr, lay);
    panels.h = lay;
    ez_tts_conv1d_direct(g_pool2, x, s.c_in, s.t_in, w, b, s.c_out, s.k, s.stride, s.pad, s.dilation, 1, want);
    run_all_pools(run_conv1d_panels, &c, out, ny, what);
    CHECK_MSG(c.rc == ELIZA_OK, "%s: rc %d", what, (int)c.rc);
    CHECK_MSG(memcmp(out[0], want, sizeof(float) * (size_t)ny) == 0, "%s: differs from the widened weight", what);
    other = panels;
    other.mr = mr + 1;
    out[1][0] = 42.0f;
    c.panels = &other;
    run_conv1d_panels(&c, g_pool2, out[1]);
    CHECK_MSG(c.rc == ELIZA_E_UNSUPPORTED && out[1][0] == 42.0f, "%s: panels for mr %d were used", what, other.mr);
    free(x), free(b), free(w), free(want), free(h), free(lay), free3(out);
}

/* Kokoro's direct-path shapes (decoder, F0 / N, text encoder, asr_res,
 * noise convolutions, conv_post, the generator's kernel-3 resblocks) and
 * edges: c_out not a multiple of the row tile, a depth over several slices,
 * strides, dilation. */
static void test_conv1d_panels_match_widened_weights(void) {
    static const conv_shape shapes[] = {
        {1090, 40, 1024, 3, 1, 1, 1, 1}, {1090, 40, 1024, 1, 1, 0, 1, 1}, {514, 33, 1024, 3, 1, 1, 1, 1},
        {512, 20, 512, 5, 1, 2, 1, 1},   {512, 150, 64, 1, 1, 0, 1, 1},   {256, 600, 256, 3, 1, 3, 3, 1},
        {22, 3600, 256, 12, 6, 3, 1, 1}, {128, 700, 22, 7, 1, 3, 1, 1},   {3, 17, 5, 3, 1, 1, 1, 1},
        {7, 40, 13, 5, 2, 2, 1, 1},      {300, 37, 20, 3, 1, 1, 2, 1},
    };
    if (ez_tts_panels_mr() == 0) {
        printf("conv1d on panels: no GEMM kernels at this level (Kokoro makes no panels)\n");
        return;
    }
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        check_conv1d_panels(shapes[i], 1);
        check_conv1d_panels(shapes[i], 0);
    }
}

/* ---- conv1d by FFT ------------------------------------------------------------------ */

typedef struct {
    conv_shape s;
    const float *x, *w, *b;
    const ez_fft_kernels *kernels; /* NULL: ez_tts_conv1d_fft's own choice */
    int bf16;                      /* ez_tts_conv1d_fft_bf16 instead */
    int32_t rc;
} fft_ctx;

static void run_conv1d_fft(void *p, ez_pool *pool, float *out) {
    fft_ctx *c = (fft_ctx *)p;
    int32_t rc = c->kernels  ? ez_fft_conv1d_with(c->kernels, NULL, pool, c->x, c->s.c_in, c->s.t_in, c->w, c->b,
                                                  c->s.c_out, c->s.k, c->s.pad, c->s.dilation, out)
                 : c->bf16 ? ez_tts_conv1d_fft_bf16(pool, c->x, c->s.c_in, c->s.t_in, c->w, c->b, c->s.c_out, c->s.k,
                                                    c->s.pad, c->s.dilation, out)
                           : ez_tts_conv1d_fft(pool, c->x, c->s.c_in, c->s.t_in, c->w, c->b, c->s.c_out, c->s.k,
                                               c->s.pad, c->s.dilation, out);
    if (rc != ELIZA_OK) c->rc = rc;
}

/* ez_tts_conv1d_fft (or the conv with the given kernels, or with bf16
 * ez_tts_conv1d_fft_bf16, whose bound is BF16_TOLERANCE times wider) against
 * the reference, with 1, 2, 3 threads and without a pool (same bits).
 * Under ELIZA_FORCE_SCALAR it must decline. */
static void check_conv1d_fft_any(conv_shape s, int with_bias, const ez_fft_kernels *kernels, int bf16) {
    int t_out = ez_conv1d_out_len(s.t_in, s.k, 1, s.pad, s.dilation);
    int64_t nx = (int64_t)s.c_in * s.t_in, nw = (int64_t)s.c_out * s.c_in * s.k, K = (int64_t)s.c_in * s.k;
    int64_t ny = (int64_t)s.c_out * EZ_MAX(t_out, 0), bad;
    fft_ctx c = {s, random_floats(nx, 1.0f), random_floats(nw, 0.2f), with_bias ? random_floats(s.c_out, 1.0f) : NULL,
                 kernels, bf16, ELIZA_OK};
    float *ref = filled(ny, NAN), *mag = filled(ny, 0), **out = alloc3(ny);
    float *ax = abs_copy(c.x, nx), *aw = abs_copy(c.w, nw), *ab = c.b ? abs_copy(c.b, s.c_out) : NULL;
    double *bound = (double *)malloc(sizeof(double) * (size_t)(ny > 0 ? ny : 1)), rel;
    char what[160];
    snprintf(what, sizeof what, "conv1d_fft%s c_in=%d t_in=%d c_out=%d k=%d pad=%d dil=%d bias=%d",
             kernels ? " (portable)" : bf16 ? " (bf16)" : "", s.c_in, s.t_in, s.c_out, s.k, s.pad, s.dilation,
             with_bias);
    if (g_scalar) {
        float y = 0;
        CHECK_MSG(ez_tts_conv1d_fft(g_pool2, c.x, s.c_in, s.t_in, c.w, c.b, s.c_out, s.k, s.pad, s.dilation, &y) ==
                  ELIZA_E_UNSUPPORTED,
              "%s: runs under ELIZA_FORCE_SCALAR", what);
    } else {
        ez_tts_conv1d_ref(c.x, s.c_in, s.t_in, c.w, c.b, s.c_out, s.k, 1, s.pad, s.dilation, 1, ref);
        ez_tts_conv1d_ref(ax, s.c_in, s.t_in, aw, ab, s.c_out, s.k, 1, s.pad, s.dilation, 1, mag);
        run_all_pools(run_conv1d_fft, &c, out, ny, what);
        CHECK_MSG(c.rc == ELIZA_OK, "%s: returned %d", what, (int)c.rc);
        row_bounds(mag, s.c_out, EZ_MAX(t_out, 0), K, bound);
        if (bf16)
            for (int64_t i = 0; i < ny; i++) bound[i] *= BF16_TOLERANCE;
        bad = count_over(out[0], ref, bound, ny, bf16 ? &g_worst_fft_bf16 : &g_worst_fft);
        rel = relative_error(out[0], ref, ny);
        if (bf16 && rel > g_worst_fft_bf16_rel) g_worst_fft_bf16_rel = rel;
        if (!bf16 && rel > g_worst_fft_rel) g_worst_fft_rel = rel;
        CHECK_MSG(bad == 0, "%s: %lld of %lld outputs off the reference", what, (long long)bad, (long long)ny);
        CHECK_MSG(rel <= (bf16 ? 8e-3 : 1e-5), "%s: max |fft - ref| / max |ref| = %.3g", what, rel);
    }
    free((void *)c.x), free((void *)c.w), free((void *)c.b), free(ax), free(aw), free(ab);
    free(ref), free(mag), free(bound), free3(out);
}

static void check_conv1d_fft_with(conv_shape s, int with_bias, const ez_fft_kernels *kernels) {
    check_conv1d_fft_any(s, with_bias, kernels, 0);
}

static void check_conv1d_fft(conv_shape s, int with_bias) { check_conv1d_fft_with(s, with_bias, NULL); }

/* The generator's resblock convolutions (256 and 128 channels, k 3, 7, 11,
 * dilations 1, 3, 5, "same" padding) at lengths around the block size
 * (54 to 62 outputs per block of 64): shorter than the kernel, than a
 * block, one block exactly, odd lengths over several blocks; then odd
 * channel counts and other paddings. */
static void test_conv1d_fft_matches_reference(void) {
    static const int ks[3] = {3, 7, 11}, ds[3] = {1, 3, 5};
    static const int t256[] = {1, 5, 64, 199}, t128[] = {1, 10, 63, 65, 130, 777};
    static const conv_shape odd[] = {
        {13, 100, 21, 5, 1, 0, 2, 1},  {40, 333, 33, 9, 1, 4, 1, 1}, {1, 50, 8, 3, 1, 1, 1, 1},
        {9, 70, 17, 31, 1, 40, 1, 1},  {24, 90, 40, 6, 1, 7, 3, 1},  {16, 300, 16, 7, 1, 0, 16, 1},
        {32, 1000, 32, 11, 1, 60, 2, 1},
    };
    for (int i = 0; i < 3; i++)
        for (int dd = 0; dd < 3; dd++) {
            int k = ks[i], d = ds[dd];
            for (size_t t = 0; t < sizeof t128 / sizeof t128[0]; t++) {
                conv_shape s = {128, t128[t], 128, k, 1, (k * d - d) / 2, d, 1};
                check_conv1d_fft(s, (int)(t & 1));
            }
            if (dd == i)
                for (size_t t = 0; t < sizeof t256 / sizeof t256[0]; t++) {
                    conv_shape s = {256, t256[t], 256, k, 1, (k * d - d) / 2, d, 1};
                    check_conv1d_fft(s, 1);
                }
        }
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) check_conv1d_fft(odd[i], (int)(i & 1));
}

/* The BF16 products (ez_tts_conv1d_fft_bf16) on the generator's shapes
 * and some odd ones: a bound BF16_TOLERANCE times the float32 path's (the
 * inputs of each product rounded to 8 bits instead of 24), the same bits
 * for any thread count. Where the level has no BF16 kernels it declines. */
static void test_conv1d_fft_bf16_matches_reference(void) {
    static const conv_shape shapes[] = {
        {256, 600, 256, 3, 1, 1, 1, 1},   {256, 600, 256, 7, 1, 9, 3, 1},   {256, 600, 256, 11, 1, 25, 5, 1},
        {128, 1500, 128, 11, 1, 25, 5, 1}, {128, 1500, 128, 7, 1, 3, 1, 1}, {128, 777, 128, 3, 1, 5, 5, 1},
        {256, 5, 256, 11, 1, 5, 1, 1},    {40, 333, 33, 9, 1, 4, 1, 1},    {13, 100, 21, 5, 1, 0, 2, 1},
    };
    if (!ez_tts_bf16_available()) {
        float y = 0;
        CHECK_MSG(ez_tts_conv1d_fft_bf16(g_pool2, &y, 1, 1, &y, NULL, 1, 1, 0, 1, &y) == ELIZA_E_UNSUPPORTED,
                  "conv1d_fft_bf16 runs at level %s", ez_simd_level_name(ez_simd_level_active()));
        printf("conv1d_fft_bf16: no BF16 kernels at this level\n");
        return;
    }
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_conv1d_fft_any(shapes[i], (int)(i & 1), NULL, 1);
}

/* The BF16 default is a rule of the CPU's identity and the environment,
 * never of a timing: on for AMD family 0x19 (Zen 4, measured faster), off
 * for the Intel Xeon measured slower, for AMD before Zen 4 and for Zen 5
 * (family 0x1A, not measured), ELIZA_TTS_BF16
 * "0" / "1" forcing it either way where the kernels exist, off wherever
 * they do not; any other value of it counts as unset. */
static void test_bf16_default_follows_the_cpu_rule(void) {
    static const struct {
        ez_cpu_vendor vendor;
        unsigned family;
        int available;
        const char *env;
        int on;
    } cases[] = {
        {EZ_CPU_VENDOR_AMD, 0x19, 1, NULL, 1},   {EZ_CPU_VENDOR_AMD, 0x1a, 1, NULL, 0},
        {EZ_CPU_VENDOR_AMD, 0x17, 1, NULL, 0},   {EZ_CPU_VENDOR_INTEL, 6, 1, NULL, 0},
        {EZ_CPU_VENDOR_OTHER, 0x19, 1, NULL, 0}, {EZ_CPU_VENDOR_AMD, 0x19, 1, "0", 0},
        {EZ_CPU_VENDOR_INTEL, 6, 1, "1", 1},     {EZ_CPU_VENDOR_AMD, 0x19, 0, NULL, 0},
        {EZ_CPU_VENDOR_AMD, 0x1a, 0, "1", 0},    {EZ_CPU_VENDOR_INTEL, 6, 0, "1", 0},
        {EZ_CPU_VENDOR_AMD, 0x19, 1, "", 1},     {EZ_CPU_VENDOR_AMD, 0x19, 1, "yes", 1},
        {EZ_CPU_VENDOR_INTEL, 6, 1, "on", 0},
    };
    const char *why = NULL, *why_again = NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const ez_cpu_info cpu = {EZ_CPU_LEVEL_AVX512 | EZ_CPU_AVX512BF16, cases[i].vendor, cases[i].family, 0};
        why = NULL;
        CHECK_MSG(ez_tts_bf16_rule(&cpu, cases[i].available, cases[i].env, &why) == cases[i].on,
                  "case %zu: %s family 0x%x, available %d, ELIZA_TTS_BF16=%s: expected %s", i,
                  ez_cpu_vendor_name(cases[i].vendor), cases[i].family, cases[i].available,
                  cases[i].env ? cases[i].env : "(unset)", cases[i].on ? "on" : "off");
        CHECK_MSG(why && strncmp(why, cases[i].on ? "on" : "off", cases[i].on ? 2 : 3) == 0,
                  "case %zu: the reason '%s' does not say %s", i, why ? why : "(none)", cases[i].on ? "on" : "off");
    }
    /* This process: the rule on the probed CPU, the same answer each time. */
    CHECK(ez_tts_bf16_default(&why) ==
          ez_tts_bf16_rule(ez_cpu_info_get(), ez_tts_bf16_available(), getenv("ELIZA_TTS_BF16"), &why_again));
    CHECK(why == why_again);
    CHECK(ez_cpu_info_get()->features == ez_cpu_features());
    if (!(ez_cpu_features() & EZ_CPU_AVX512BF16)) CHECK(!ez_tts_bf16_available());
    printf("bf16 default here: %s (%s family 0x%x model 0x%x)\n", why, ez_cpu_vendor_name(ez_cpu_info_get()->vendor),
           ez_cpu_info_get()->family, ez_cpu_info_get()->model);
}

/* The BF16 kernels of this CPU (AVX-512 where it has AVX512_BF16) against
 * the scalar reference of the same arithmetic (core/kernels/gemm_bf16.h):
 * rounding (ties, subnormals, infinities, NaN) and packing bit for bit,
 * the tile within one float32 rounding of each of its additions. */
static void test_bf16_kernels_match_reference(void) {
    const ez_gemm_bf16_kernels *bk = ez_gemm_bf16_kernels_active(), *ref = ez_gemm_bf16_kernels_ref();
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u,
                                       0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0x7f7fffffu, 0x7f800000u,
                                       0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffbfffffu, 0x3f7fffffu};
    static const int depths[] = {2, 8, 30, 128, 256, 384};
    enum { N_ROUND = 1000 };
    float src[N_ROUND + sizeof special / sizeof special[0]];
    ez_bf16 got[sizeof src / sizeof src[0]], want[sizeof src / sizeof src[0]];
    int64_t n = 0, exact = 0, total = 0;
    double worst = 0;
    if (!bk) {
        printf("bf16 kernels: none at this level\n");
        return;
    }
    CHECK_MSG(bk->nr == EZ_GEMM_BF16_REF_TILE, "bf16 tile nr %d, the reference packs %d", bk->nr,
              EZ_GEMM_BF16_REF_TILE);
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) memcpy(&src[n++], &special[i], sizeof(float));
    for (int i = 0; i < N_ROUND; i++) src[n++] = next_f32(4.0f) * ldexpf(1.0f, (int)(next_u32() % 60) - 30);
    for (int64_t len = 1; len <= n; len += len < 40 ? 1 : 97) {
        memset(got, 0xff, sizeof got);
        memset(want, 0xff, sizeof want);
        bk->round(src, len, got);
        ref->round(src, len, want);
        CHECK_MSG(memcmp(got, want, sizeof got) == 0, "bf16 round of %lld floats differs from the reference",
                  (long long)len);
    }
    for (size_t di = 0; di < sizeof depths / sizeof depths[0]; di++) {
        const int64_t K = depths[di], lda = K + 6;
        const int mr = bk->mr, nr = bk->nr;
        float *bf = random_floats(K * nr, 1.0f), *af = random_floats((int64_t)mr * lda, 1.0f);
        ez_bf16 *a = (ez_bf16 *)malloc(sizeof(ez_bf16) * (size_t)(mr * lda));
        ez_bf16 *pb = (ez_bf16 *)malloc(sizeof(ez_bf16) * (size_t)(K * nr));
        ez_bf16 *pr = (ez_bf16 *)malloc(sizeof(ez_bf16) * (size_t)(K * nr));
        float c_fast[EZ_GEMM_BF16_REF_TILE * EZ_GEMM_BF16_REF_TILE], c_ref[sizeof c_fast / sizeof c_fast[0]];
        ref->round(af, (int64_t)mr * lda, a);
        for (int cols = nr; cols >= 1; cols -= 13) {
            bk->pack_b_kn(K, cols, bf, nr, pb);
            ref->pack_b_kn(K, cols, bf, nr, pr);
            CHECK_MSG(memcmp(pb, pr, sizeof(ez_bf16) * (size_t)(K * nr)) == 0, "bf16 pack K=%lld cols=%d differs",
                      (long long)K, cols);
            for (int rows = mr; rows >= 1; rows -= 5)
                for (int acc = 0; acc < 2; acc++) {
                    for (int i = 0; i < mr * nr; i++) c_fast[i] = c_ref[i] = (float)i;
                    bk->tile(K, a, lda, rows, pb, c_fast, nr, cols, acc);
                    ez_gemm_bf16_tile_ref(K, a, lda, rows, pr, nr, c_ref, nr, cols, acc);
                    for (int i = 0; i < mr * nr; i++) {
                        const int r = i / nr, col = i % nr, inside = r < rows && col < cols;
                        /* every addition of the K rounds by at most half an ulp of a sum no
                         * larger than sum |a b| */
                        double mag = 0, err = fabs((double)c_fast[i] - (double)c_ref[i]), bound;
                        for (int64_t k = 0; k < K && inside; k++)
                            mag += fabs((double)ez_bf16_to_f32(a[r * lda + k]) *
                                        (double)ez_bf16_to_f32(pr[(k / 2) * 2 * nr + 2 * col + (k & 1)]));
                        bound = inside ? (double)K * FLT_EPSILON * (mag + (acc ? fabs(c_ref[i]) : 0)) : 0;
                        CHECK_MSG(err <= bound, "bf16 tile K=%lld rows=%d cols=%d acc=%d: [%d][%d] %.9g vs %.9g",
                                  (long long)K, rows, cols, acc, r, col, c_fast[i], c_ref[i]);
                        if (inside) {
                            exact += c_fast[i] == c_ref[i];
                            total++;
                            if (bound > 0 && err / bound > worst) worst = err / bound;
                        }
                    }
                }
        }
        free(bf), free(af), free(a), free(pb), free(pr);
    }
    printf("bf16 tile: %lld of %lld outputs bit-equal to the reference, largest error / bound %.3g\n",
           (long long)exact, (long long)total, worst);
}

/* The portable transform kernels (the build's only ones off x86-64) in
 * the whole convolution, on any CPU. */
static void test_conv1d_fft_portable_kernels_match_reference(void) {
    static const conv_shape shapes[] = {
        {128, 300, 128, 11, 1, 25, 5, 1}, {256, 70, 256, 3, 1, 1, 1, 1}, {40, 333, 33, 9, 1, 4, 1, 1},
        {13, 100, 21, 5, 1, 0, 2, 1},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        check_conv1d_fft_with(shapes[i], 1, ez_fft_kernels_portable());
}

/* Every transform kernel set this CPU runs (portable, AVX2, AVX-512)
 * against a plain DFT in double, at every transform size. */
static void test_fft_kernels_match_dft(void) {
    const ez_fft_kernels *kernels[3] = {ez_fft_kernels_portable(), NULL, NULL};
    const int step = 3 * EZ_FFT_LANES, slot = 3 * EZ_FFT_LANES;
    float *in = random_floats((int64_t)EZ_FFT_MAX_N * step, 1.0f);
    float *y = random_floats((int64_t)slot * (EZ_FFT_MAX_N / 2), 1.0f);
    float *x = (float *)malloc(sizeof(float) * (size_t)slot * (EZ_FFT_MAX_N / 2));
    float *out = (float *)malloc(sizeof(float) * (size_t)step * EZ_FFT_MAX_N);
    double worst_fwd = 0, worst_inv = 0, bound = 0;
    if (ez_simd_at_least(EZ_SIMD_AVX2)) kernels[1] = ez_fft_kernels_avx2();
    if (ez_simd_at_least(EZ_SIMD_AVX512)) kernels[2] = ez_fft_kernels_avx512();
    for (int n = 8; n <= EZ_FFT_MAX_N; n *= 2) {
        const int m = n / 2, count = n - 3;
        ez_fft_plan plan;
        ez_fft_plan_init(&plan, n);
        bound = 8 * FLT_EPSILON * log2(n);
        for (int kk = 0; kk < 3; kk++) {
            double fwd = 0, inv = 0;
            if (!kernels[kk]) continue;
            /* x: slot f at f * 24 floats, parts 8 apart (Re, Im, Re + Im); y
             * likewise (Re, Im) */
            kernels[kk]->forward_block(&plan, in, step, x, slot, 8);
            for (int f = 0; f <= m; f++)
                for (int l = 0; l < EZ_FFT_LANES; l++) {
                    double re = 0, im = 0, top = 0, got_re, got_im, e;
                    for (int u = 0; u < n; u++) {
                        double v = in[u * step + l], a = 6.283185307179586 * f * u / n;
                        re += v * cos(a);
                        im -= v * sin(a);
                        top += fabs(v);
                    }
                    got_re = f == 0 ? x[l] : f == m ? x[8 + l] : x[f * slot + l];
                    got_im = f == 0 || f == m ? 0.0 : x[f * slot + 8 + l];
                    e = (fabs(got_re - 2 * re) + fabs(got_im - 2 * im)) / (2 * top);
                    if (f > 0 && f < m) e += fabs(x[f * slot + 16 + l] - (got_re + got_im)) / (2 * top);
                    if (e > fwd) fwd = e;
                }
            kernels[kk]->inverse_block(&plan, y, slot, 8, out, step, count);
            for (int r = 0; r < count; r++)
                for (int l = 0; l < EZ_FFT_LANES; l++) {
                    /* the sum over the Hermitian spectrum: Y0 + (-1)^r YM + 2 sum Re(Y e^{+...}) */
                    double acc = y[l] + (r & 1 ? -y[8 + l] : y[8 + l]), top = fabs(y[l]) + fabs(y[8 + l]);
                    for (int f = 1; f < m; f++) {
                        double yr = y[f * slot + l], yi = y[f * slot + 8 + l];
                        double a = 6.283185307179586 * f * r / n;
                        acc += 2 * (yr * cos(a) - yi * sin(a));
                        top += 2 * (fabs(yr) + fabs(yi));
                    }
                    if (fabs(out[r * step + l] - acc) / top > inv) inv = fabs(out[r * step + l] - acc) / top;
                }
            CHECK_MSG(fwd <= bound, "kernels %d, N = %d: forward transform off the DFT by %.3g of sum |x|", kk, n, fwd);
            CHECK_MSG(inv <= bound, "kernels %d, N = %d: inverse transform off the DFT by %.3g of sum |Y|", kk, n, inv);
            if (fwd > worst_fwd) worst_fwd = fwd;
            if (inv > worst_inv) worst_inv = inv;
        }
    }
    printf("fft kernels: forward %.3g, inverse %.3g of sum |x| (bound %.3g at N = %d)\n", worst_fwd, worst_inv,
           bound, EZ_FFT_MAX_N);
    free(in), free(y), free(x), free(out);
}

/* ---- conv_transpose1d --------------------------------------------------------------- */

typedef struct {
    int c_in, t_in, c_out, k, stride, pad, out_pad, groups;
} convt_shape;

typedef struct {
    convt_shape s;
    const float *x, *w, *b;
} convt_ctx;

static void run_convt(void *p, ez_pool *pool, float *out) {
    const convt_ctx *c = (const convt_ctx *)p;
    ez_tts_conv_transpose1d(pool, c->x, c->s.c_in, c->s.t_in, c->w, c->b, c->s.c_out, c->s.k, c->s.stride,
                            c->s.pad, c->s.out_pad, c->s.groups, out);
}

static void check_convt(convt_shape s, int with_bias) {
    int t_out = ez_conv_transpose1d_out_len(s.t_in, s.k, s.stride, s.pad, s.out_pad);
    int64_t nx = (int64_t)s.c_in * s.t_in, nw = (int64_t)s.c_in * (s.c_out / s.groups) * s.k;
    int64_t ny = (int64_t)s.c_out * t_out, K = (int64_t)(s.c_in / s.groups) * ((s.k + s.stride - 1) / s.stride);
    int64_t bad;
    convt_ctx c = {s, random_floats(nx, 1.0f), random_floats(nw, 0.2f), with_bias ? random_floats(s.c_out, 1.0f) : NULL};
    float *ref = filled(ny, NAN), *mag = filled(ny, 0), **out = alloc3(ny);
    float *ax = abs_copy(c.x, nx), *aw = abs_copy(c.w, nw), *ab = c.b ? abs_copy(c.b, s.c_out) : NULL;
    double *bound = (double *)malloc(sizeof(double) * (size_t)(ny > 0 ? ny : 1));
    char what[160];
    snprintf(what, sizeof what, "conv_transpose1d c_in=%d t_in=%d c_out=%d k=%d stride=%d pad=%d out_pad=%d groups=%d",
             s.c_in, s.t_in, s.c_out, s.k, s.stride, s.pad, s.out_pad, s.groups);
    ez_tts_conv_transpose1d_ref(c.x, s.c_in, s.t_in, c.w, c.b, s.c_out, s.k, s.stride, s.pad, s.out_pad, s.groups, ref);
    ez_tts_conv_transpose1d_ref(ax, s.c_in, s.t_in, aw, ab, s.c_out, s.k, s.stride, s.pad, s.out_pad, s.groups, mag);
    run_all_pools(run_convt, &c, out, ny, what);
    for (int64_t i = 0; i < ny; i++) bound[i] = g_scalar ? 0.0 : sum_tolerance(K) * mag[i];
    bad = count_over(out[0], ref, bound, ny, &g_worst_sum);
    CHECK_MSG(bad == 0, "%s: %lld of %lld outputs off the reference", what, (long long)bad, (long long)ny);
    free((void *)c.x), free((void *)c.w), free((void *)c.b), free(ax), free(aw), free(ab);
    free(ref), free(mag), free(bound), free3(out);
}

static void test_conv_transpose1d_random_shapes_match_reference(void) {
    static const convt_shape shapes[] = {
        {1, 1, 1, 1, 1, 0, 0, 1},    {3, 9, 5, 4, 2, 1, 1, 1},    {6, 20, 4, 5, 3, 2, 0, 2},
        {7, 30, 7, 3, 2, 1, 1, 7},   {5, 11, 3, 2, 5, 0, 3, 1},   {16, 50, 8, 7, 1, 3, 0, 1},
        {9, 40, 12, 6, 3, 0, 2, 3},  {40, 700, 3, 10, 4, 3, 1, 1}, {4, 13, 6, 1, 1, 0, 0, 2},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        check_convt(shapes[i], 1);
        check_convt(shapes[i], 0);
    }
}

/* The generator's upsamplers (512 -> 256 k20 s10, 256 -> 128 k12 s6), the
 * depthwise 'pool' upsamplers (k3 s2 pad 1, output padding 1) and an
 * inverse-STFT-like basis (22 -> 1, k20 s5). */
static void test_conv_transpose1d_kokoro_shapes_match_reference(void) {
    static const convt_shape shapes[] = {
        {512, 80, 256, 20, 10, 5, 0, 1}, {256, 400, 128, 12, 6, 3, 0, 1}, {512, 100, 512, 3, 2, 1, 1, 512},
        {1090, 40, 1090, 3, 2, 1, 1, 1090}, {22, 1500, 1, 20, 5, 0, 0, 1},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_convt(shapes[i], 1);
}

/* ---- linear ------------------------------------------------------------------------- */

typedef struct {
    int T, n_in, n_out;
    const float *x, *w, *b;
} linear_ctx;

static void run_linear(void *p, ez_pool *pool, float *out) {
    const linear_ctx *c = (const linear_ctx *)p;
    ez_tts_linear(pool, c->x, c->T, c->n_in, c->w, c->b, c->n_out, out);
}

static void check_linear(int T, int n_in, int n_out, int with_bias) {
    int64_t ny = (int64_t)T * n_out, bad;
    linear_ctx c = {T, n_in, n_out, random_floats((int64_t)T * n_in, 1.0f), random_floats((int64_t)n_out * n_in, 0.1f),
                    with_bias ? random_floats(n_out, 1.0f) : NULL};
    float *ref = filled(ny, NAN), *mag = filled(ny, 0), **out = alloc3(ny);
    float *ax = abs_copy(c.x, (int64_t)T * n_in), *aw = abs_copy(c.w, (int64_t)n_out * n_in);
    float *ab = c.b ? abs_copy(c.b, n_out) : NULL;
    double *bound = (double *)malloc(sizeof(double) * (size_t)ny);
    char what[96];
    snprintf(what, sizeof what, "linear T=%d n_in=%d n_out=%d bias=%d", T, n_in, n_out, with_bias);
    ez_tts_linear_ref(c.x, T, n_in, c.w, c.b, n_out, ref);
    ez_tts_linear_ref(ax, T, n_in, aw, ab, n_out, mag);
    run_all_pools(run_linear, &c, out, ny, what);
    for (int64_t i = 0; i < ny; i++) bound[i] = g_scalar ? 0.0 : sum_tolerance(n_in) * mag[i];
    bad = count_over(out[0], ref, bound, ny, &g_worst_sum);
    CHECK_MSG(bad == 0, "%s: %lld of %lld outputs off the reference", what, (long long)bad, (long long)ny);
    free((void *)c.x), free((void *)c.w), free((void *)c.b), free(ax), free(aw), free(ab);
    free(ref), free(mag), free(bound), free3(out);
}

/* ALBERT 768 x 768 and its 2048 FFN, the bert_encoder 768 -> 512, a style
 * projection (one row), odd sizes. */
static void test_linear_matches_reference(void) {
    check_linear(1, 1, 1, 1);
    check_linear(7, 13, 5, 0);
    check_linear(1, 128, 1024, 1);
    check_linear(64, 768, 768, 1);
    check_linear(40, 768, 2048, 1);
    check_linear(64, 768, 512, 0);
}

/* ---- LSTM --------------------------------------------------------------------------- */

static double sigmoid_d(double v) { return 1.0 / (1.0 + exp(-v)); }

/* One direction of PyTorch's LSTM in double from the stored rows (w_hh
 * [4H, H]), h_t to y + t * y_stride. */
static void lstm_oracle(const float *x, int T, int n_in, int H, const float *w_ih, const float *w_hh,
                        const float *b_ih, const float *b_hh, int reverse, float *y, int y_stride) {
    double *c = (double *)calloc((size_t)H, sizeof(double));
    float *h = (float *)calloc((size_t)H, sizeof(float)), *hn = (float *)malloc(sizeof(float) * (size_t)H);
    for (int step = 0; step < T; step++) {
        int t = reverse ? T - 1 - step : step;
        for (int j = 0; j < H; j++) {
            double g[4];
            for (int q = 0; q < 4; q++) {
                int r = q * H + j;
                double acc = (b_ih ? b_ih[r] : 0.0) + (b_hh ? b_hh[r] : 0.0);
                for (int i = 0; i < n_in; i++) acc += (double)w_ih[(int64_t)r * n_in + i] * x[(int64_t)t * n_in + i];
                for (int i = 0; i < H; i++) acc += (double)w_hh[(int64_t)r * H + i] * h[i];
                g[q] = acc;
            }
            c[j] = sigmoid_d(g[1]) * c[j] + sigmoid_d(g[0]) * tanh(g[2]);
            hn[j] = (float)(sigmoid_d(g[3]) * tanh(c[j]));
        }
        memcpy(h, hn, sizeof(float) * (size_t)H);
        memcpy(y + (int64_t)t * y_stride, h, sizeof(float) * (size_t)H);
    }
    free(c), free(h), free(hn);
}

static float *lstm_panels(const float *w_hh, int H) {
    float *p = (float *)malloc(sizeof(float) * ez_lstm_panels_floats(H));
    ez_lstm_pack(H, w_hh, NULL, p);
    return p;
}

typedef struct {
    int T, n_in, H;
    const float *x, *w_ih[2], *w_hh[2], *panels[2], *b_ih[2], *b_hh[2];
} lstm_ctx;

static void run_lstm_bidir(void *p, ez_pool *pool, float *out) {
    const lstm_ctx *c = (const lstm_ctx *)p;
    CHECK_RC(ez_tts_lstm_bidir(pool, c->x, c->T, c->n_in, c->H, c->w_ih, c->panels, c->b_ih, c->b_hh, out), ELIZA_OK);
}

static void check_lstm(int T, int n_in, int H, int with_bias) {
    float scale = 1.0f / sqrtf((float)H); /* PyTorch's initialisation range */
    int64_t ny = (int64_t)T * 2 * H, bad;
    lstm_ctx c;
    float *ref = filled(ny, NAN), *single = filled(ny, NAN), **out = alloc3(ny);
    double *bound = (double *)malloc(sizeof(double) * (size_t)ny);
    char what[96];
    c.T = T, c.n_in = n_in, c.H = H;
    c.x = random_floats((int64_t)T * n_in, 1.0f);
    for (int d = 0; d < 2; d++) {
        c.w_ih[d] = random_floats((int64_t)4 * H * n_in, scale);
        c.w_hh[d] = random_floats((int64_t)4 * H * H, scale);
        c.panels[d] = lstm_panels(c.w_hh[d], H);
        c.b_ih[d] = with_bias ? random_floats(4 * H, scale) : NULL;
        c.b_hh[d] = with_bias ? random_floats(4 * H, scale) : NULL;
    }
    snprintf(what, sizeof what, "lstm T=%d n_in=%d H=%d bias=%d", T, n_in, H, with_bias);
    for (int d = 0; d < 2; d++)
        lstm_oracle(c.x, T, n_in, H, c.w_ih[d], c.w_hh[d], c.b_ih[d], c.b_hh[d], d, ref + d * H, 2 * H);
    run_all_pools(run_lstm_bidir, &c, out, ny, what);
    for (int d = 0; d < 2; d++)
        CHECK_RC(ez_tts_lstm(g_pool2, c.x, T, n_in, H, c.w_ih[d], c.panels[d], c.b_ih[d], c.b_hh[d], d, single + d * H,
                             2 * H),
                 ELIZA_OK);
    CHECK_MSG(memcmp(single, out[0], sizeof(float) * (size_t)ny) == 0, "%s: bidir differs from two single directions",
          what);
    for (int64_t i = 0; i < ny; i++) bound[i] = 2e-6;
    bad = count_over(out[0], ref, bound, ny, &g_worst_lstm);
    CHECK_MSG(bad == 0, "%s: %lld of %lld outputs off the reference", what, (long long)bad, (long long)ny);
    free((void *)c.x);
    for (int d = 0; d < 2; d++)
        free((void *)c.w_ih[d]), free((void *)c.w_hh[d]), free((void *)c.panels[d]), free((void *)c.b_ih[d]),
            free((void *)c.b_hh[d]);
    free(ref), free(single), free(bound), free3(out);
}

/* Kokoro: text encoder (512 -> 2 x 256), prosody predictor and duration
 * encoder (640 -> 2 x 256); odd sizes (the reference step) for the tails. */
static void test_lstm_matches_reference(void) {
    check_lstm(1, 1, 1, 1);
    check_lstm(5, 3, 7, 0);
    check_lstm(9, 20, 13, 1);
    check_lstm(30, 17, 40, 1);
    check_lstm(20, 24, 48, 0);
    check_lstm(60, 512, 256, 1);
    check_lstm(40, 640, 256, 1);
}

/* A direction writes its H columns of each row and nothing else. */
static void test_lstm_writes_only_its_half(void) {
    const int T = 6, n_in = 4, Hs[2] = {5, 32};
    for (int i = 0; i < 2; i++) {
        const int H = Hs[i];
        float *x = random_floats(T * n_in, 1.0f), *wi = random_floats(4 * H * n_in, 0.5f);
        float *wh = random_floats(4 * H * H, 0.5f), *wp = lstm_panels(wh, H);
        float *y = filled(T * 2 * H, 7.0f), *y2 = filled(T * 2 * H, 7.0f);
        int untouched = 1;
        CHECK_RC(ez_tts_lstm(g_pool2, x, T, n_in, H, wi, wp, NULL, NULL, 1, y + H, 2 * H), ELIZA_OK);
        CHECK_RC(ez_tts_lstm(g_pool2, x, T, n_in, H, wi, wp, NULL, NULL, 0, y2, 2 * H), ELIZA_OK);
        for (int t = 0; t < T; t++)
            for (int j = 0; j < H; j++) untouched &= y[t * 2 * H + j] == 7.0f && y2[t * 2 * H + H + j] == 7.0f;
        CHECK_MSG(untouched, "lstm H %d wrote outside its half of y", H);
        free(x), free(wi), free(wh), free(wp), free(y), free(y2);
    }
}

/* ---- AdaIN, Snake ------------------------------------------------------------------- */

typedef struct {
    int C, T, act; /* 0: AdaIN; 1: AdaIN + Snake; 2: AdaIN + leaky ReLU */
    const float *x, *gb, *alpha;
} norm_ctx;

static void run_norm(void *p, ez_pool *pool, float *out) {
    const norm_ctx *c = (const norm_ctx *)p;
    memcpy(out, c->x, sizeof(float) * (size_t)c->C * (size_t)c->T);
    if (c->act == 1)
        ez_tts_adain1d_snake(pool, out, c->C, c->T, c->gb, 1e-5f, c->alpha);
    else if (c->act == 2)
        ez_tts_adain1d_leaky_relu(pool, out, c->C, c->T, c->gb, 1e-5f, 0.2f);
    else
        ez_tts_adain1d(out, c->C, c->T, c->gb, 1e-5f);
}

/* Bound of the AdaIN output (before the activation), from the exact
 * normalized value. */
static void adain_bounds(const float *x, int C, int T, const float *gb, double *bound) {
    for (int c = 0; c < C; c++) {
        const float *r = x + (int64_t)c * T;
        double mean = 0, var = 0;
        for (int t = 0; t < T; t++) mean += r[t];
        mean /= T;
        for (int t = 0; t < T; t++) var += (r[t] - mean) * (r[t] - mean);
        var /= T;
        for (int t = 0; t < T; t++) {
            double n = (r[t] - mean) / sqrt(var + 1e-5);
            bound[(int64_t)c * T + t] = 4.0 * FLT_EPSILON * (fabs((1.0 + gb[c]) * n) + fabs(gb[C + c]));
        }
    }
}

static void check_adain(int C, int T, int act, float x_scale) {
    int64_t n = (int64_t)C * T, bad;
    norm_ctx c = {C, T, act, random_floats(n, x_scale), random_floats(2 * C, 1.0f), NULL};
    float *ref = filled(n, NAN), **out = alloc3(n), *alpha = random_floats(C, 1.0f);
    double *bound = (double *)malloc(sizeof(double) * (size_t)n), *worst;
    char what[96];
    for (int i = 0; i < C; i++) alpha[i] = alpha[i] >= 0 ? 0.05f + 2.0f * alpha[i] : -0.05f + 2.0f * alpha[i];
    c.alpha = alpha;
    /* a constant channel: zero variance, eps alone */
    for (int t = 0; t < T; t++) ((float *)c.x)[t] = 0.25f;
    snprintf(what, sizeof what, "adain C=%d T=%d act=%d x_scale=%g", C, T, act, x_scale);
    memcpy(ref, c.x, sizeof(float) * (size_t)n);
    ez_tts_adain1d_ref(ref, C, T, c.gb, 1e-5f);
    adain_bounds(c.x, C, T, c.gb, bound);
    if (act == 1) {
        ez_tts_snake_ref(ref, C, T, alpha);
        for (int64_t i = 0; i < n; i++) {
            float a = alpha[i / T], s = sinf(a * ref[i]);
            bound[i] = 2.0 * bound[i] + ldexp(fabs(ref[i]) + fabs(s) / fabs(a), -21);
        }
    } else if (act == 2) {
        ez_tts_leaky_relu(ref, n, 0.2f);
    }
    run_all_pools(run_norm, &c, out, n, what);
    if (g_scalar)
        for (int64_t i = 0; i < n; i++) bound[i] = 0.0;
    worst = act == 1 ? &g_worst_snake : &g_worst_adain;
    bad = count_over(out[0], ref, bound, n, worst);
    CHECK_MSG(bad == 0, "%s: %lld of %lld outputs off the reference", what, (long long)bad, (long long)n);
    free((void *)c.x), free((void *)c.gb), free(alpha), free(ref), free(bound), free3(out);
}

/* Channel counts and lengths of the decoder (512 x ~100) and the generator
 * (256 / 128 channels, thousands of samples); odd lengths for the tails;
 * large inputs push alpha x past the polynomial's range. */
static void test_adain_matches_reference(void) {
    check_adain(3, 1, 0, 1.0f);
    check_adain(5, 13, 0, 3.0f);
    check_adain(512, 101, 0, 1.0f);
    check_adain(7, 37, 2, 1.0f);
    check_adain(512, 100, 2, 2.0f);
    check_adain(3, 1, 1, 1.0f);
    check_adain(9, 77, 1, 1.0f);
    check_adain(128, 3001, 1, 1.0f);
    check_adain(256, 1203, 1, 5.0f);
}

static void check_snake(int C, int T, float x_scale) {
    int64_t n = (int64_t)C * T, bad;
    float *x = random_floats(n, x_scale), *ref = filled(n, 0), *fast = filled(n, 0), *alpha = random_floats(C, 2.0f);
    double *bound = (double *)malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < C; i++)
        if (fabsf(alpha[i]) < 0.05f) alpha[i] = 0.05f;
    memcpy(ref, x, sizeof(float) * (size_t)n);
    memcpy(fast, x, sizeof(float) * (size_t)n);
    ez_tts_snake_ref(ref, C, T, alpha);
    ez_tts_snake(fast, C, T, alpha);
    for (int64_t i = 0; i < n; i++) {
        float a = alpha[i / T], s = sinf(a * x[i]);
        bound[i] = g_scalar ? 0.0 : ldexp(fabs(ref[i]) + fabs(s) / fabs(a), -21);
    }
    bad = count_over(fast, ref, bound, n, &g_worst_snake);
    CHECK_MSG(bad == 0, "snake C=%d T=%d x_scale=%g: %lld of %lld outputs off the reference", C, T, x_scale,
          (long long)bad, (long long)n);
    free(x), free(ref), free(fast), free(alpha), free(bound);
}

/* Up to |alpha x| ~ 2e4: both the polynomial and the libm lanes. */
static void test_snake_matches_reference(void) {
    check_snake(1, 1, 1.0f);
    check_snake(4, 1003, 3.0f);
    check_snake(64, 4096, 100.0f);
    check_snake(16, 4096, 5000.0f);
    check_snake(8, 4096, 1e4f);
}

/* Lengths around the vector width and the pool's grain, inputs up to +-x_scale;
 * any thread count gives the same bits. The fast form x / (1 + e^-2u) and the
 * reference's 0.5 x (1 + tanh u) differ by a few ulp of x (the reference's
 * 1 + tanh u cancels for negative x). */
static void check_gelu(int64_t n, float x_scale) {
    float *x = random_floats(n, x_scale), *ref = filled(n, 0), *fast = filled(n, 0), *fast1 = filled(n, 0);
    double *bound = (double *)malloc(sizeof(double) * (size_t)(n ? n : 1));
    int64_t bad;
    memcpy(ref, x, sizeof(float) * (size_t)n);
    memcpy(fast, x, sizeof(float) * (size_t)n);
    memcpy(fast1, x, sizeof(float) * (size_t)n);
    ez_tts_gelu_tanh_ref(ref, n);
    ez_tts_gelu_tanh(g_pool2, fast, n);
    ez_tts_gelu_tanh(g_pool1, fast1, n);
    for (int64_t i = 0; i < n; i++) bound[i] = g_scalar ? 0.0 : ldexp(fabs(x[i]), -21);
    bad = count_over(fast, ref, bound, n, &g_worst_gelu);
    CHECK_MSG(bad == 0, "gelu n=%lld x_scale=%g: %lld outputs off the reference", (long long)n, x_scale,
              (long long)bad);
    CHECK_MSG(n == 0 || memcmp(fast, fast1, sizeof(float) * (size_t)n) == 0, "gelu n=%lld: 1 and 2 threads differ",
              (long long)n);
    free(x), free(ref), free(fast), free(fast1), free(bound);
}

static void test_gelu_matches_reference(void) {
    for (int n = 0; n < 20; n++) check_gelu(n, 3.0f);
    check_gelu(4096 * 3 + 5, 6.0f);
    check_gelu(100000, 50.0f);
    check_gelu(1000, 1e-3f);
}

/* Any length (vector bodies and tails), signed zeros, infinities, NaN. */
static void test_leaky_relu_is_exact(void) {
    const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-40f, -1e-40f, 3e38f, -3e38f};
    const int n_special = (int)(sizeof special / sizeof special[0]);
    for (int n = 0; n < 40; n++) {
        float *x = random_floats(n, 4.0f), *y = filled(n, 0.0f);
        int same = 1;
        for (int i = 0; i < n && i < n_special; i++) x[(i * 7) % n] = special[i];
        memcpy(y, x, sizeof(float) * (size_t)n);
        ez_tts_leaky_relu(y, n, 0.2f);
        for (int i = 0; i < n; i++) {
            float want = x[i] < 0 ? x[i] * 0.2f : x[i];
            same &= isnan(want) ? isnan(y[i]) != 0 : memcmp(&want, &y[i], sizeof want) == 0;
        }
        CHECK_MSG(same, "leaky_relu over %d values differs from x < 0 ? slope x : x", n);
        free(x), free(y);
    }
}

/* ---- PyTorch's own outputs (tts_ops_golden.h) --------------------------------------- */

#define N_OF(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))

/* |got - want| <= tol (1 + |want|) everywhere: PyTorch computes in float,
 * the references in double, so they differ by float rounding only. */
static int close_to(const float *got, const float *want, int64_t n, double tol) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol * (1.0 + fabs(want[i])))) return 0;
    return 1;
}

static void test_references_match_pytorch(void) {
    float y[256], y2[256], h[36], h2[36], a[27];
    const float *const wi[2] = {g_lstm_weight_ih, g_lstm_weight_ih_reverse};
    const float *const wh[2] = {g_lstm_weight_hh, g_lstm_weight_hh_reverse};
    const float *const bi[2] = {g_lstm_bias_ih, g_lstm_bias_ih_reverse};
    const float *const bh[2] = {g_lstm_bias_hh, g_lstm_bias_hh_reverse};

    ez_tts_conv1d_ref(g_conv1d_x, 6, 11, g_conv1d_w, g_conv1d_b, 4, 3, 2, 2, 2, 2, y);
    ez_tts_conv1d(g_pool2, g_conv1d_x, 6, 11, g_conv1d_w, g_conv1d_b, 4, 3, 2, 2, 2, 2, y2);
    CHECK_MSG(ez_conv1d_out_len(11, 3, 2, 2, 2) * 4 == N_OF(g_conv1d_y), "conv1d output length");
    CHECK_MSG(close_to(y, g_conv1d_y, N_OF(g_conv1d_y), 1e-6), "conv1d reference differs from torch");
    CHECK_MSG(close_to(y2, g_conv1d_y, N_OF(g_conv1d_y), 1e-6), "conv1d differs from torch");

    ez_tts_conv_transpose1d_ref(g_convt_x, 4, 7, g_convt_w, g_convt_b, 6, 5, 3, 2, 1, 2, y);
    ez_tts_conv_transpose1d(g_pool2, g_convt_x, 4, 7, g_convt_w, g_convt_b, 6, 5, 3, 2, 1, 2, y2);
    CHECK_MSG(ez_conv_transpose1d_out_len(7, 5, 3, 2, 1) * 6 == N_OF(g_convt_y), "conv_transpose1d output length");
    CHECK_MSG(close_to(y, g_convt_y, N_OF(g_convt_y), 1e-6), "conv_transpose1d reference differs from torch");
    CHECK_MSG(close_to(y2, g_convt_y, N_OF(g_convt_y), 1e-6), "conv_transpose1d differs from torch");

    for (int d = 0; d < 2; d++) lstm_oracle(g_lstm_x, 6, 5, 3, wi[d], wh[d], bi[d], bh[d], d, h + d * 3, 6);
    {
        const float *const wp[2] = {lstm_panels(wh[0], 3), lstm_panels(wh[1], 3)};
        CHECK_RC(ez_tts_lstm_bidir(g_pool2, g_lstm_x, 6, 5, 3, wi, wp, bi, bh, h2), ELIZA_OK);
        free((void *)wp[0]), free((void *)wp[1]);
    }
    CHECK_MSG(close_to(h, g_lstm_y, N_OF(g_lstm_y), 1e-6), "lstm oracle differs from torch");
    CHECK_MSG(close_to(h2, g_lstm_y, N_OF(g_lstm_y), 1e-6), "lstm differs from torch");

    memcpy(a, g_adain_x, sizeof a);
    ez_tts_adain1d_ref(a, 3, 9, g_adain_gamma_beta, 1e-5f);
    CHECK_MSG(close_to(a, g_adain_y, 27, 1e-6), "adain reference differs from torch");
    ez_tts_snake_ref(a, 3, 9, g_adain_alpha);
    CHECK_MSG(close_to(a, g_snake_y, 27, 1e-6), "snake reference differs from torch");
    memcpy(a, g_adain_x, sizeof a);
    ez_tts_adain1d_snake(g_pool2, a, 3, 9, g_adain_gamma_beta, 1e-5f, g_adain_alpha);
    CHECK_MSG(close_to(a, g_snake_y, 27, 1e-6), "adain + snake differs from torch");

    memcpy(y, g_small_x, sizeof g_small_x);
    ez_tts_layer_norm(y, 4, 8, g_ln_gamma, g_ln_beta, 1e-5f);
    CHECK_MSG(close_to(y, g_ln_y, 32, 1e-6), "layer_norm differs from torch");
    memcpy(y, g_small_x, sizeof g_small_x);
    ez_tts_leaky_relu(y, 32, 0.2f);
    CHECK_MSG(close_to(y, g_leaky_y, 32, 0.0), "leaky_relu differs from torch");
    ez_tts_linear_ref(g_small_x, 4, 8, g_linear_w, g_linear_b, 5, y);
    ez_tts_linear(g_pool2, g_small_x, 4, 8, g_linear_w, g_linear_b, 5, y2);
    CHECK_MSG(close_to(y, g_linear_y, 20, 1e-6), "linear reference differs from torch");
    CHECK_MSG(close_to(y2, g_linear_y, 20, 1e-6), "linear differs from torch");
}

int main(void) {
    uint64_t t0 = ez_time_ns();
    SKIP_IF_PINNED_LEVEL_MISSING();
    g_scalar = ez_simd_level_active() == EZ_SIMD_SCALAR;
    g_pool1 = ez_pool_create(1);
    g_pool2 = ez_pool_create(2);
    g_pool3 = ez_pool_create(3);
    if (!g_pool1 || !g_pool2 || !g_pool3) {
        printf("FAIL: cannot create pools\n");
        return 1;
    }
    printf("simd level: %s%s\n", ez_simd_level_name(ez_simd_level_active()), g_scalar ? " (forced scalar)" : "");
    test_references_match_pytorch();
    test_conv1d_random_shapes_match_reference();
    test_conv1d_kokoro_shapes_match_reference();
    test_conv1d_panels_match_widened_weights();
    test_conv1d_fft_matches_reference();
    test_conv1d_fft_portable_kernels_match_reference();
    test_conv1d_fft_bf16_matches_reference();
    test_bf16_kernels_match_reference();
    test_bf16_default_follows_the_cpu_rule();
    test_fft_kernels_match_dft();
    test_conv_transpose1d_random_shapes_match_reference();
    test_conv_transpose1d_kokoro_shapes_match_reference();
    test_linear_matches_reference();
    test_lstm_matches_reference();
    test_lstm_writes_only_its_half();
    test_adain_matches_reference();
    test_snake_matches_reference();
    test_gelu_matches_reference();
    test_leaky_relu_is_exact();
    printf("largest error / bound: sums %.3f, fft %.3f, adain %.3f, snake %.3f, lstm %.3f, gelu %.3f\n", g_worst_sum,
           g_worst_fft, g_worst_adain, g_worst_snake, g_worst_lstm, g_worst_gelu);
    printf("conv1d by FFT: largest max |fft - ref| / max |ref| %.3g\n", g_worst_fft_rel);
    printf("conv1d by FFT in bf16: largest error / bound %.3f, max |fft - ref| / max |ref| %.3g\n",
           g_worst_fft_bf16, g_worst_fft_bf16_rel);
    ez_pool_destroy(g_pool1);
    ez_pool_destroy(g_pool2);
    ez_pool_destroy(g_pool3);
    printf("%d passed, %d failed (%.1f s)\n", g_passed, g_failed, (double)(ez_time_ns() - t0) * 1e-9);
    return g_failed ? 1 : 0;
}
