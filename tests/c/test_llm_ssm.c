/* The Mamba2 kernels of llm/ssm.h: the conv and the recurrent step of every
 * table against the scalar reference (channel and state counts that hit
 * every tail), the reference against double-precision formulas, the conv's
 * orientation (window[0] is the oldest frame) and its state across calls,
 * and the chunked SSD scan against the token-by-token recurrence (prompts
 * shorter than, equal to and longer than a chunk; a split over heads). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "llm/ops.h"
#include "llm/ssm.h"
#include "check.h"

static uint64_t g_rng = 7;
static float frand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *rand_vec(int64_t n, float amp) {
    float *v = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = amp * frand();
    return v;
}

static float *copy_vec(const float *v, int64_t n) {
    float *c = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    memcpy(c, v, sizeof(float) * (size_t)n);
    return c;
}

/* max |a - b| / max(|b|, floor) */
static double rel_err(const float *a, const float *b, int64_t n, double floor) {
    double e = 0, m = floor;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        e = d > e ? d : e;
        m = fabs((double)b[i]) > m ? fabs((double)b[i]) : m;
    }
    return e / m;
}

static int all_finite(const float *v, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

typedef struct {
    const ez_ssm_ops *ops;
    const char *name;
} table;

static int tables(table out[4]) {
    int n = 0;
    out[n++] = (table){ez_ssm_ops_ref(), "ref"};
    if (ez_ssm_ops_avx2() && (ez_cpu_features() & EZ_CPU_LEVEL_AVX2) == EZ_CPU_LEVEL_AVX2)
        out[n++] = (table){ez_ssm_ops_avx2(), "avx2"};
    if (ez_ssm_ops_neon()) out[n++] = (table){ez_ssm_ops_neon(), "neon"};
    out[n++] = (table){ez_ssm_ops_active(), "active"};
    return n;
}

/* ---- conv ---------------------------------------------------------------------------- */

static double silu_d(double v) { return v / (1.0 + exp(-v)); }

static void test_ssm_conv_matches_formula_and_reference(void) {
    static const int chans[] = {1, 3, 7, 8, 9, 16, 31, 40, 263, 352, 1795};
    static const int kernels[] = {2, 3, 4, 7};
    static const int toks[] = {1, 2, 3, 5, 17};
    table t[4];
    const int nt = tables(t);
    for (size_t ci = 0; ci < sizeof chans / sizeof *chans; ci++)
        for (size_t ki = 0; ki < sizeof kernels / sizeof *kernels; ki++)
            for (size_t ti = 0; ti < sizeof toks / sizeof *toks; ti++) {
                const int C = chans[ci], K = kernels[ki], T = toks[ti];
                const int64_t ld_x = C + 5, ld_y = C + 3;
                float *state = rand_vec((int64_t)(K - 1) * C, 1.5f), *x = rand_vec(T * ld_x, 1.5f);
                float *w = rand_vec((int64_t)C * K, 0.7f), *b = rand_vec(C, 0.3f);
                float *want = malloc(sizeof(float) * (size_t)(T * ld_y));
                for (int tok = 0; tok < T; tok++)
                    for (int c = 0; c < C; c++) {
                        double acc = b[c];
                        for (int k = 0; k < K; k++) {
                            const int s = tok - K + 1 + k;
                            const float v = s < 0 ? state[(int64_t)(K - 1 + s) * C + c] : x[s * ld_x + c];
                            acc += (double)w[(int64_t)c * K + k] * v;
                        }
                        want[tok * ld_y + c] = (float)silu_d(acc);
                    }
                for (int i = 0; i < nt; i++) {
                    float *y = calloc((size_t)(T * ld_y), sizeof(float));
                    double e = 0;
                    t[i].ops->conv(state, x, ld_x, w, b, y, ld_y, T, C, K);
                    for (int tok = 0; tok < T; tok++) {
                        double r = rel_err(y + tok * ld_y, want + tok * ld_y, C, 1.0);
                        e = r > e ? r : e;
                    }
                    CHECK_MSG(e < 2e-6, "conv %s C=%d K=%d T=%d: rel err %.3g", t[i].name, C, K, T, e);
                    free(y);
                }
                free(state), free(x), free(w), free(b), free(want);
            }
}

static void test_ssm_conv_is_not_flipped(void) {
    /* A window (0, ..., 0, 1) passes the newest frame through; (1, 0, ...)
     * the oldest: transformers' and ggml's cross-correlation. */
    enum { C = 12, K = 4, T = 6 };
    float x[T * C], y[T * C], state[(K - 1) * C], w[C * K], b[C];
    table t[4];
    const int nt = tables(t);
    for (int i = 0; i < T * C; i++) x[i] = 0.1f * (float)(i + 1);
    for (int i = 0; i < (K - 1) * C; i++) state[i] = -0.05f * (float)(i + 1);
    memset(b, 0, sizeof b);
    for (int i = 0; i < nt; i++) {
        memset(w, 0, sizeof w);
        for (int c = 0; c < C; c++) w[c * K + K - 1] = 1.0f;
        t[i].ops->conv(state, x, C, w, b, y, C, T, C, K);
        for (int j = 0; j < T * C; j++) CHECK_MSG(fabsf(y[j] - (float)silu_d(x[j])) < 1e-6f, "%s newest %d", t[i].name, j);
        memset(w, 0, sizeof w);
        for (int c = 0; c < C; c++) w[c * K] = 1.0f;
        t[i].ops->conv(state, x, C, w, b, y, C, T, C, K);
        for (int tok = 0; tok < T; tok++)
            for (int c = 0; c < C; c++) {
                const int s = tok - K + 1;
                const float v = s < 0 ? state[(K - 1 + s) * C + c] : x[s * C + c];
                CHECK_MSG(fabsf(y[tok * C + c] - (float)silu_d(v)) < 1e-6f, "%s oldest t=%d c=%d", t[i].name, tok, c);
            }
    }
}

static void test_ssm_conv_state_carries_across_calls(void) {
    /* One call over 13 frames == calls of 1, 2, 1, 5 and 4 frames: the same
     * outputs and the same final state (the last K-1 frames). */
    enum { C = 19, K = 4, T = 13 };
    static const int parts[] = {1, 2, 1, 5, 4};
    float *x = rand_vec(T * C, 1.0f), *w = rand_vec(C * K, 0.6f), *b = rand_vec(C, 0.2f);
    float *s0 = rand_vec((K - 1) * C, 1.0f);
    float *s1 = copy_vec(s0, (K - 1) * C);
    float y0[T * C], y1[T * C];
    const ez_ssm_ops *ops = ez_ssm_ops_active();
    int at = 0;
    ez_ssm_conv(ops, s0, x, C, w, b, y0, C, T, C, K);
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        ez_ssm_conv(ops, s1, x + at * C, C, w, b, y1 + at * C, C, parts[i], C, K);
        at += parts[i];
    }
    CHECK(at == T);
    CHECK(memcmp(y0, y1, sizeof y0) == 0);
    CHECK(memcmp(s0, s1, sizeof(float) * (K - 1) * C) == 0);
    CHECK(memcmp(s0, x + (T - K + 1) * C, sizeof(float) * (K - 1) * C) == 0);
    free(x), free(w), free(b), free(s0), free(s1);
}

/* ---- recurrence ---------------------------------------------------------------------- */

typedef struct {
    ez_ssm_shape s;
    float *dt_bias, *A, *D;
} mixer;

/* Mamba's scales: A = -U(1, 16), dt_bias giving dt in about [0.001, 0.1]. */
static mixer make_mixer(int H, int P, int G, int N) {
    mixer m = {{H, P, G, N}, malloc(sizeof(float) * (size_t)H), malloc(sizeof(float) * (size_t)H),
               malloc(sizeof(float) * (size_t)H)};
    for (int h = 0; h < H; h++) {
        const double dt = exp(log(1e-3) + (frand() * 0.5 + 0.5) * (log(0.1) - log(1e-3)));
        m.dt_bias[h] = (float)(dt + log(-expm1(-dt)));
        m.A[h] = -(1.0f + 7.5f * (frand() + 1.0f));
        m.D[h] = 1.0f + 0.1f * frand();
    }
    return m;
}

static void free_mixer(mixer *m) { free(m->dt_bias), free(m->A), free(m->D); }

static const ez_ssm_shape SHAPES[] = {{4, 16, 1, 16}, {6, 16, 2, 64}, {8, 16, 4, 128}, {3, 5, 3, 7}, {2, 24, 1, 33}};

static void test_ssm_step_matches_formula_and_reference(void) {
    table t[4];
    const int nt = tables(t);
    for (size_t si = 0; si < sizeof SHAPES / sizeof *SHAPES; si++) {
        const ez_ssm_shape sh = SHAPES[si];
        const int H = sh.n_head, P = sh.head_dim, G = sh.n_group, N = sh.d_state;
        const int64_t ns = (int64_t)H * P * N;
        mixer m = make_mixer(H, P, G, N);
        float *state = rand_vec(ns, 2.0f), *x = rand_vec(H * P, 1.0f), *B = rand_vec(G * N, 1.0f);
        float *C = rand_vec(G * N, 1.0f), *dt = rand_vec(H, 2.0f);
        float *want_s = malloc(sizeof(float) * (size_t)ns), *want_y = malloc(sizeof(float) * (size_t)(H * P));
        for (int h = 0; h < H; h++) {
            const double dth = log1p(exp((double)dt[h] + m.dt_bias[h])), dA = exp(dth * m.A[h]);
            const int g = h / (H / G);
            for (int p = 0; p < P; p++) {
                double acc = 0;
                for (int n = 0; n < N; n++) {
                    const int64_t i = ((int64_t)h * P + p) * N + n;
                    const double sn = state[i] * dA + dth * x[h * P + p] * B[g * N + n];
                    want_s[i] = (float)sn;
                    acc += sn * C[g * N + n];
                }
                want_y[h * P + p] = (float)(acc + (double)m.D[h] * x[h * P + p]);
            }
        }
        for (int i = 0; i < nt; i++) {
            float *s = copy_vec(state, ns), *y = malloc(sizeof(float) * (size_t)(H * P));
            double es, ey;
            /* two head ranges: a split over threads computes the same */
            t[i].ops->step(&m.s, s, x, B, C, dt, m.dt_bias, m.A, m.D, y, 0, H / 2);
            t[i].ops->step(&m.s, s, x, B, C, dt, m.dt_bias, m.A, m.D, y, H / 2, H);
            es = rel_err(s, want_s, ns, 1.0);
            ey = rel_err(y, want_y, H * P, 1.0);
            CHECK_MSG(es < 1e-6 && ey < 1e-5, "step %s H=%d P=%d G=%d N=%d: state %.3g, y %.3g", t[i].name, H, P, G,
                      N, es, ey);
            free(s), free(y);
        }
        free_mixer(&m);
        free(state), free(x), free(B), free(C), free(dt), free(want_s), free(want_y);
    }
}

static void test_ssm_scan_equals_the_recurrence(void) {
    static const int toks[] = {1, 5, EZ_SSM_CHUNK - 1, EZ_SSM_CHUNK, EZ_SSM_CHUNK + 1, 200};
    const ez_llm_ops *vector_tables[2] = {ez_llm_ops_ref(), ez_llm_ops_active()};
    for (size_t si = 0; si < sizeof SHAPES / sizeof *SHAPES; si++)
        for (size_t ti = 0; ti < sizeof toks / sizeof *toks; ti++) {
            const ez_ssm_shape sh = SHAPES[si];
            const int H = sh.n_head, P = sh.head_dim, G = sh.n_group, N = sh.d_state, T = toks[ti];
            /* one in_proj-like row per token: x | B | C | dt, with padding */
            const int64_t ld = (int64_t)H * P + 2 * G * N + H + 3;
            const int64_t ns = (int64_t)H * P * N, ld_y = (int64_t)H * P + 1;
            mixer m = make_mixer(H, P, G, N);
            float *row = rand_vec(T * ld, 1.0f), *init = rand_vec(ns, 0.5f);
            float *want_s = copy_vec(init, ns), *want_y = calloc((size_t)(T * ld_y), sizeof(float));
            float *work = malloc(sizeof(float) * (size_t)ez_ssm_scan_work_floats(&m.s));
            for (int tok = 0; tok < T; tok++) {
                const float *r = row + tok * ld;
                ez_ssm_ops_ref()->step(&m.s, want_s, r, r + H * P, r + H * P + G * N, r + H * P + 2 * G * N, m.dt_bias,
                                       m.A, m.D, want_y + tok * ld_y, 0, H);
            }
            for (int v = 0; v < 2; v++) {
                float *s = copy_vec(init, ns), *y = calloc((size_t)(T * ld_y), sizeof(float));
                double es, ey = 0;
                const int split = H > 1 ? 1 : H;
                ez_ssm_scan(NULL, vector_tables[v], &m.s, s, row, ld, row + H * P, row + H * P + G * N, ld,
                            row + H * P + 2 * G * N, ld, m.dt_bias, m.A, m.D, y, ld_y, T, 0, split, work);
                ez_ssm_scan(NULL, vector_tables[v], &m.s, s, row, ld, row + H * P, row + H * P + G * N, ld,
                            row + H * P + 2 * G * N, ld, m.dt_bias, m.A, m.D, y, ld_y, T, split, H, work);
                for (int tok = 0; tok < T; tok++) {
                    double r = rel_err(y + tok * ld_y, want_y + tok * ld_y, H * P, 1.0);
                    ey = r > ey ? r : ey;
                }
                es = rel_err(s, want_s, ns, 1.0);
                CHECK_MSG(es < 2e-5 && ey < 2e-5 && all_finite(y, T * ld_y),
                          "scan (%s vectors) H=%d P=%d G=%d N=%d T=%d: state %.3g, y %.3g", v ? "active" : "ref", H,
                          P, G, N, T, es, ey);
                free(s), free(y);
            }
            free_mixer(&m);
            free(row), free(init), free(want_s), free(want_y), free(work);
        }
}

int main(void) {
    SKIP_IF_PINNED_LEVEL_MISSING();
    test_ssm_conv_matches_formula_and_reference();
    test_ssm_conv_is_not_flipped();
    test_ssm_conv_state_carries_across_calls();
    test_ssm_step_matches_formula_and_reference();
    test_ssm_scan_equals_the_recurrence();
    if (g_failed) {
        fprintf(stderr, "test_llm_ssm: %d of %d checks FAILED\n", g_failed, g_failed + g_passed);
        return 1;
    }
    printf("test_llm_ssm: ok (%d checks)\n", g_passed);
    return 0;
}
