/* core's LSTM step (core/kernels/lstm.h), which TTS and diarization share:
 *  - the panel packing (groups of 8 panels interleaved by k, padding, gate
 *    reorder) against its index formula;
 *  - the scalar reference against plain double-precision math on the
 *    stored rows, odd H included;
 *  - every vector kernel this CPU runs against the reference, nb 1 to 5 (and
 *    the AVX-512 8-row blocks), H 16, 128 and 256, with and without a bias,
 *    over three steps so the state feeds back;
 *  - the invariances the engines rely on, bit for bit: a batch of nb equals
 *    nb single-row calls (each row reads its own xp and h: a kernel reading
 *    row 0 for all fails here), a unit range split into pieces equals the
 *    whole range (TTS splits one sequence over its threads), h updated in
 *    place equals h written elsewhere (diarization's use);
 *  - the dispatch: the reference for H % 16 != 0 and under
 *    ELIZA_FORCE_SCALAR=1, the pinned level's kernel under ELIZA_SIMD.
 * Buffers are exactly as large as the contract says, so the ASan build
 * catches a read past them. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/kernels/lstm.h"
#include "check.h"

static uint64_t g_rng = 0x2545f4914f6cdd1dull;

static float next_f32(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (float)((g_rng * 0x2545f4914f6cdd1dull) >> 40) / 8388608.0f - 1.0f;
}

static float *random_floats(size_t n, float scale) {
    float *p = (float *)malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) p[i] = scale * next_f32();
    return p;
}

static float *copy_of(const float *src, size_t n) {
    float *p = (float *)malloc(sizeof(float) * n);
    memcpy(p, src, sizeof(float) * n);
    return p;
}

typedef struct {
    const char *name;
    ez_lstm_step_fn (*kernel)(void);
    uint32_t needs;
} isa;

static const isa g_isas[] = {
    {"avx2", ez_lstm_step_avx2, EZ_CPU_LEVEL_AVX2},
    {"avx512", ez_lstm_step_avx512, EZ_CPU_LEVEL_AVX512},
    {"neon", ez_lstm_step_neon, EZ_CPU_NEON},
};
#define N_ISAS (sizeof g_isas / sizeof g_isas[0])

static ez_lstm_step_fn isa_kernel(size_t v) {
    if ((ez_cpu_features() & g_isas[v].needs) != g_isas[v].needs) return NULL;
    return g_isas[v].kernel();
}

/* One problem: nb sequences, xp rows each in a block of its own. */
typedef struct {
    int nb, H;
    float *w, *panels, *bias, *h, *c;
    float *xp[16];
} problem;

static void problem_init(problem *p, int nb, int H, int with_bias) {
    const size_t G = 4 * (size_t)H;
    p->nb = nb;
    p->H = H;
    p->w = random_floats(G * H, 1.0f / sqrtf((float)H));
    p->panels = (float *)malloc(sizeof(float) * ez_lstm_panels_floats(H));
    ez_lstm_pack(H, p->w, NULL, p->panels);
    p->bias = with_bias ? random_floats(G, 0.5f) : NULL;
    p->h = random_floats((size_t)nb * H, 1.0f);
    p->c = random_floats((size_t)nb * H, 2.0f);
    for (int b = 0; b < nb; b++) p->xp[b] = random_floats(G, 3.0f);
}

static void problem_free(problem *p) {
    free(p->w), free(p->panels), free(p->bias), free(p->h), free(p->c);
    for (int b = 0; b < p->nb; b++) free(p->xp[b]);
}

static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

/* The step in double from the stored rows of w (no panels). */
static void oracle_step(const problem *p, const double *h, double *c, double *h_out) {
    const int H = p->H;
    for (int b = 0; b < p->nb; b++) {
        double g[4];
        for (int u = 0; u < H; u++) {
            for (int q = 0; q < 4; q++) {
                const int r = q * H + u;
                double s = (double)p->xp[b][r] + (p->bias ? p->bias[r] : 0.0);
                for (int k = 0; k < H; k++) s += (double)p->w[(size_t)r * H + k] * h[(size_t)b * H + k];
                g[q] = s;
            }
            c[(size_t)b * H + u] = sigmoid_d(g[1]) * c[(size_t)b * H + u] + sigmoid_d(g[0]) * tanh(g[2]);
            h_out[(size_t)b * H + u] = sigmoid_d(g[3]) * tanh(c[(size_t)b * H + u]);
        }
    }
}

static void test_pack_layout(void) {
    static const int perm[4] = {0, 2, 3, 1}; /* a file storing i, o, f, c */
    /* 36 and 40: more panels than a group of 8, the last group short. */
    const int Hs[] = {3, 16, 5, 36, 40};
    for (size_t i = 0; i < sizeof Hs / sizeof Hs[0]; i++) {
        const int H = Hs[i], G = 4 * H, n_panels = (G + 15) / 16;
        const size_t n = ez_lstm_panels_floats(H);
        float *w = random_floats((size_t)G * H, 1.0f), *dst = (float *)malloc(sizeof(float) * n);
        int ok = 1;
        CHECK_MSG(n == (size_t)((G + 15) / 16 * 16) * (size_t)H, "H %d: %zu panel floats", H, n);
        ez_lstm_pack(H, w, perm, dst);
        for (int r = 0; r < n_panels * 16; r++)
            for (int k = 0; k < H; k++) {
                /* Panel r / 16 in its group of 8, rows k of the group's
                 * panels side by side. */
                const int panel = r / 16, first = panel / 8 * 8;
                const int width = n_panels - first < 8 ? n_panels - first : 8;
                const size_t at = (size_t)first * 16 * H + ((size_t)k * width + (size_t)(panel - first)) * 16 + r % 16;
                float want = r < G ? w[((size_t)perm[r / H] * H + r % H) * H + k] : 0.0f;
                ok &= dst[at] == want;
            }
        CHECK_MSG(ok, "H %d: panels do not hold the reordered rows (or the padding is not zero)", H);
        free(w), free(dst);
    }
}

/* Three steps of `fn` against the double oracle; largest |h| and relative
 * |c| error. */
static void run_against_oracle(ez_lstm_step_fn fn, problem *p, double *err_h, double *err_c) {
    const size_t n = (size_t)p->nb * p->H;
    double *hd = (double *)malloc(sizeof(double) * n), *cd = (double *)malloc(sizeof(double) * n);
    double *hn = (double *)malloc(sizeof(double) * n);
    float *gates = (float *)malloc(sizeof(float) * 4 * n);
    for (size_t i = 0; i < n; i++) hd[i] = p->h[i], cd[i] = p->c[i];
    *err_h = *err_c = 0;
    for (int s = 0; s < 3; s++) {
        oracle_step(p, hd, cd, hn);
        memcpy(hd, hn, sizeof(double) * n);
        fn(p->nb, p->H, 0, p->H, (const float *const *)p->xp, p->bias, p->panels, p->h, p->h, p->c, gates);
        for (size_t i = 0; i < n; i++) {
            double eh = fabs(hd[i] - p->h[i]), ec = fabs(cd[i] - p->c[i]) / (1.0 + fabs(cd[i]));
            if (eh > *err_h) *err_h = eh;
            if (ec > *err_c) *err_c = ec;
        }
    }
    free(hd), free(cd), free(hn), free(gates);
}

static void test_reference_matches_plain_math(void) {
    const int Hs[] = {1, 7, 13, 128};
    for (size_t hi = 0; hi < sizeof Hs / sizeof Hs[0]; hi++)
        for (int nb = 1; nb <= 5; nb += 2)
            for (int with_bias = 0; with_bias <= 1; with_bias++) {
                problem p;
                double eh, ec;
                problem_init(&p, nb, Hs[hi], with_bias);
                run_against_oracle(ez_lstm_step_ref, &p, &eh, &ec);
                CHECK_MSG(eh <= 2e-6 && ec <= 2e-6, "reference H %d nb %d bias %d: h err %.3g, c err %.3g", Hs[hi],
                          nb, with_bias, eh, ec);
                problem_free(&p);
            }
}

static double g_worst[N_ISAS];

static void test_kernels_match_reference(void) {
    /* 48: 12 panels, a group of 8 and a short one, gate blocks across both. */
    const int Hs[] = {16, 48, 128, 256}, nbs[] = {1, 2, 3, 4, 5, 8, 9, 13};
    for (size_t v = 0; v < N_ISAS; v++) {
        ez_lstm_step_fn fn = isa_kernel(v);
        if (!fn) continue;
        for (size_t hi = 0; hi < sizeof Hs / sizeof Hs[0]; hi++)
            for (size_t ni = 0; ni < sizeof nbs / sizeof nbs[0]; ni++)
                for (int with_bias = 0; with_bias <= 1; with_bias++) {
                    const int H = Hs[hi], nb = nbs[ni];
                    const size_t n = (size_t)nb * H;
                    problem p;
                    float *h0, *c0, *gates = (float *)malloc(sizeof(float) * 4 * n);
                    double eh = 0, ec = 0;
                    problem_init(&p, nb, H, with_bias);
                    h0 = copy_of(p.h, n);
                    c0 = copy_of(p.c, n);
                    for (int s = 0; s < 3; s++) {
                        ez_lstm_step_ref(nb, H, 0, H, (const float *const *)p.xp, p.bias, p.panels, h0, h0, c0, gates);
                        fn(nb, H, 0, H, (const float *const *)p.xp, p.bias, p.panels, p.h, p.h, p.c, gates);
                    }
                    for (size_t i = 0; i < n; i++) {
                        double e1 = fabs((double)h0[i] - p.h[i]), e2 = fabs((double)c0[i] - p.c[i]) / (1.0 + fabs(c0[i]));
                        if (e1 > eh) eh = e1;
                        if (e2 > ec) ec = e2;
                    }
                    if (eh > g_worst[v]) g_worst[v] = eh;
                    CHECK_MSG(eh <= 2e-6 && ec <= 2e-6, "%s H %d nb %d bias %d: h err %.3g, c err %.3g against the reference",
                              g_isas[v].name, H, nb, with_bias, eh, ec);
                    free(h0), free(c0), free(gates);
                    problem_free(&p);
                }
    }
}

/* fn on the whole batch in place, against fn on each row alone and on the
 * unit range in pieces [0, 16), [16, 48), [48, H) into another buffer. */
static void check_invariances(const char *name, ez_lstm_step_fn fn, int nb, int H) {
    const size_t n = (size_t)nb * H;
    problem p;
    float *h_in, *c_in, *h_rows, *c_rows, *h_split, *c_split, *gates = (float *)malloc(sizeof(float) * 4 * n);
    const int cuts[] = {0, 16, 48, H};
    problem_init(&p, nb, H, 1);
    h_in = copy_of(p.h, n), c_in = copy_of(p.c, n);
    h_rows = (float *)malloc(sizeof(float) * n), c_rows = copy_of(p.c, n);
    h_split = (float *)malloc(sizeof(float) * n), c_split = copy_of(p.c, n);
    fn(nb, H, 0, H, (const float *const *)p.xp, p.bias, p.panels, p.h, p.h, p.c, gates);
    for (int b = 0; b < nb; b++) {
        float *g1 = (float *)malloc(sizeof(float) * 4 * (size_t)H);
        const float *row = p.xp[b];
        fn(1, H, 0, H, &row, p.bias, p.panels, h_in + (size_t)b * H, h_rows + (size_t)b * H, c_rows + (size_t)b * H, g1);
        free(g1);
    }
    for (int i = 0; i < 3; i++)
        fn(nb, H, cuts[i], cuts[i + 1], (const float *const *)p.xp, p.bias, p.panels, h_in, h_split, c_split, gates);
    CHECK_MSG(memcmp(p.h, h_rows, sizeof(float) * n) == 0 && memcmp(p.c, c_rows, sizeof(float) * n) == 0,
              "%s H %d nb %d: the batch differs from its rows one at a time", name, H, nb);
    CHECK_MSG(memcmp(p.h, h_split, sizeof(float) * n) == 0 && memcmp(p.c, c_split, sizeof(float) * n) == 0,
              "%s H %d nb %d: units in three ranges (h elsewhere) differ from one range (h in place)", name, H, nb);
    free(h_in), free(c_in), free(h_rows), free(c_rows), free(h_split), free(c_split), free(gates);
    problem_free(&p);
}

static void test_batches_and_ranges_are_bit_identical(void) {
    for (int nb = 1; nb <= 9; nb++) {
        check_invariances("reference", ez_lstm_step_ref, nb, 64);
        for (size_t v = 0; v < N_ISAS; v++)
            if (isa_kernel(v)) {
                check_invariances(g_isas[v].name, isa_kernel(v), nb, 48);
                check_invariances(g_isas[v].name, isa_kernel(v), nb, 128);
                check_invariances(g_isas[v].name, isa_kernel(v), nb, 256);
            }
    }
}

static void test_dispatch(void) {
    const char *simd = getenv("ELIZA_SIMD");
    CHECK(ez_lstm_step_for(40) == ez_lstm_step_ref);
    CHECK(ez_lstm_step_for(7) == ez_lstm_step_ref);
    if (ez_force_scalar()) CHECK(ez_lstm_step_for(256) == ez_lstm_step_ref);
    if (simd && strcmp(simd, "avx2") == 0) CHECK(ez_lstm_step_for(256) == ez_lstm_step_avx2());
    switch (ez_simd_level_active()) {
    case EZ_SIMD_AVX512: CHECK(ez_lstm_step_for(128) == ez_lstm_step_avx512()); break;
    case EZ_SIMD_AVX2: CHECK(ez_lstm_step_for(128) == ez_lstm_step_avx2()); break;
    case EZ_SIMD_NEON:
    case EZ_SIMD_NEON_DOTPROD: CHECK(ez_lstm_step_for(128) == ez_lstm_step_neon()); break;
    case EZ_SIMD_SCALAR: CHECK(ez_lstm_step_for(128) == ez_lstm_step_ref); break;
    }
}

int main(void) {
    SKIP_IF_PINNED_LEVEL_MISSING();
    test_pack_layout();
    test_reference_matches_plain_math();
    test_kernels_match_reference();
    test_batches_and_ranges_are_bit_identical();
    test_dispatch();
    for (size_t v = 0; v < N_ISAS; v++)
        if (isa_kernel(v)) printf("%s: worst |h| error vs the reference %.3g (bound 2e-6)\n", g_isas[v].name, g_worst[v]);
    printf("test_lstm: %d passed, %d failed\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
}
