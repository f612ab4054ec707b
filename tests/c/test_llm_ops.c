/* LLM building blocks in isolation: the AVX2 vector ops against the scalar
 * reference (every length up to a few hundred, so every tail path runs) and
 * against double-precision formulas; rope; the grouped quantized matmul
 * against one dot per output; the decode matvec against its level's dots,
 * bit for bit; and the sampler's contract (greedy, top-k,
 * top-p, min-p, penalties, seeds, the distribution it draws from). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/cpu.h"
#include "core/platform.h"
#include "core/pool.h"
#include "core/quant.h"
#include "llm/ops.h"
#include "llm/sampler.h"
#include "check.h"

static uint64_t g_rng = 99;
static float frand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void fill(float *v, int n, float amp) {
    for (int i = 0; i < n; i++) v[i] = amp * frand();
}

static double rel_err(const float *a, const float *b, int n) {
    double e = 0, m = 1e-30;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        e = d > e ? d : e;
        m = fabs((double)b[i]) > m ? fabs((double)b[i]) : m;
    }
    return e / m;
}

/* ---- vector ops ------------------------------------------------------------------- */

static void check_table_against_reference(const ez_llm_ops *fast, const char *name) {
    const ez_llm_ops *ref = ez_llm_ops_ref();
    enum { MAXN = 300 };
    float a[MAXN], b[MAXN], w[MAXN], y1[MAXN], y2[MAXN], u[MAXN];
    for (int n = 1; n <= MAXN; n += (n < 40 ? 1 : 13)) {
        double e;
        fill(a, n, 3.0f);
        fill(b, n, 3.0f);
        fill(w, n, 1.0f);
        fill(u, n, 2.0f);
        e = fabs((double)fast->dot(a, b, n) - (double)ref->dot(a, b, n));
        CHECK(e <= 1e-5 * n);

        {
            float a4[4 * MAXN], o1[4], o2[4], yy1[4 * MAXN], yy2[4 * MAXN];
            const float w4[4] = {0.5f, -1.25f, 2.0f, 0.0625f};
            fill(a4, 4 * n, 2.0f);
            fast->dot4(a4, n, b, n, o1);
            ref->dot4(a4, n, b, n, o2);
            for (int r = 0; r < 4; r++) CHECK(fabs((double)o1[r] - (double)o2[r]) <= 1e-5 * n);
            fill(yy1, 4 * n, 1.0f);
            memcpy(yy2, yy1, sizeof(float) * 4 * (size_t)n);
            fast->axpy4(yy1, n, w4, a, n);
            ref->axpy4(yy2, n, w4, a, n);
            CHECK(rel_err(yy1, yy2, 4 * n) < 1e-6);
        }
        memcpy(y1, b, sizeof(float) * (size_t)n);
        memcpy(y2, b, sizeof(float) * (size_t)n);
        fast->axpy(y1, 0.37f, a, n);
        ref->axpy(y2, 0.37f, a, n);
        CHECK(rel_err(y1, y2, n) < 1e-6);

        fast->rms_norm(y1, a, w, n, 1e-6f);
        ref->rms_norm(y2, a, w, n, 1e-6f);
        CHECK(rel_err(y1, y2, n) < 1e-5);

        for (int i = 0; i < n; i++) a[i] *= 3.0f; /* reach both GELU tails */
        memcpy(y1, a, sizeof(float) * (size_t)n);
        memcpy(y2, a, sizeof(float) * (size_t)n);
        fast->gelu_tanh_mul(y1, u, n);
        ref->gelu_tanh_mul(y2, u, n);
        CHECK(rel_err(y1, y2, n) < 1e-5);

        memcpy(y1, a, sizeof(float) * (size_t)n);
        memcpy(y2, a, sizeof(float) * (size_t)n);
        fast->silu_mul(y1, u, n);
        ref->silu_mul(y2, u, n);
        CHECK(rel_err(y1, y2, n) < 1e-5);

        for (int i = 0; i < n; i++) y1[i] = y2[i] = 20.0f * a[i];
        fast->softmax(y1, n);
        ref->softmax(y2, n);
        CHECK(rel_err(y1, y2, n) < 1e-5);

        { /* the F16 cache's ops: the same within float rounding, halves written bit-identically */
            float a4[4 * MAXN], o1[4], o2[4], yy1[4 * MAXN], yy2[4 * MAXN];
            const float w4[4] = {0.5f, -1.25f, 2.0f, 0.0625f};
            uint16_t h[MAXN], h2[MAXN];
            fill(a4, 4 * n, 2.0f);
            ref->to_f16(h, b, n);
            fast->to_f16(h2, b, n);
            CHECK(memcmp(h, h2, sizeof(uint16_t) * (size_t)n) == 0);
            fast->dot4_f16(a4, n, h, n, o1);
            ref->dot4_f16(a4, n, h, n, o2);
            for (int r = 0; r < 4; r++) CHECK(fabs((double)o1[r] - (double)o2[r]) <= 1e-5 * n);
            fill(yy1, 4 * n, 1.0f);
            memcpy(yy2, yy1, sizeof(float) * 4 * (size_t)n);
            fast->axpy4_f16(yy1, n, w4, h, n);
            ref->axpy4_f16(yy2, n, w4, h, n);
            CHECK(rel_err(yy1, yy2, 4 * n) < 1e-6);
            memcpy(y1, a, sizeof(float) * (size_t)n);
            memcpy(y2, a, sizeof(float) * (size_t)n);
            fast->axpy_f16(y1, 0.37f, h, n);
            ref->axpy_f16(y2, 0.37f, h, n);
            CHECK(rel_err(y1, y2, n) < 1e-6);
        }
        if (n % 32 == 0) { /* bit-identical codes and scales */
            uint8_t q1[MAXN / 32 * 34], q2[MAXN / 32 * 34];
            fast->quant_q8_0(a, q1, n);
            ref->quant_q8_0(a, q2, n);
            CHECK(memcmp(q1, q2, (size_t)n / 32 * 34) == 0);
        }
    }
    if (g_failed) fprintf(stderr, "ops table '%s' differs from the reference\n", name);
}

static void test_llm_ops_fast_matches_reference(void) {
    check_table_against_reference(ez_llm_ops_ref(), "ref");
    if (ez_llm_ops_avx2() && (ez_cpu_features() & EZ_CPU_AVX2) && (ez_cpu_features() & EZ_CPU_FMA))
        check_table_against_reference(ez_llm_ops_avx2(), "avx2");
    if (ez_llm_ops_avx512() && (ez_cpu_features() & EZ_CPU_LEVEL_AVX512) == EZ_CPU_LEVEL_AVX512)
        check_table_against_reference(ez_llm_ops_avx512(), "avx512");
    if (ez_llm_ops_neon()) check_table_against_reference(ez_llm_ops_neon(), "neon");
    check_table_against_reference(ez_llm_ops_active(), "active");
}

static void test_llm_ops_match_formulas(void) {
    const ez_llm_ops *ops = ez_llm_ops_active();
    float x[16] = {-30, -12, -5, -2, -1, -0.5f, -0.01f, 0, 0.01f, 0.5f, 1, 2, 5, 12, 30, 88};
    const float s4[4] = {1000.0f, -1000.0f, 999.0f, 0.0f};
    float g[16], one[16], s[20];
    for (int i = 0; i < 16; i++) one[i] = 1.0f;
    memcpy(g, x, sizeof g);
    ops->gelu_tanh_mul(g, one, 16);
    for (int i = 0; i < 16; i++) {
        double a = x[i], want = 0.5 * a * (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)));
        CHECK(isfinite(g[i]) && fabs(g[i] - want) <= 1e-6 + 1e-5 * fabs(want));
    }
    memcpy(g, x, sizeof g);
    ops->silu_mul(g, one, 16);
    for (int i = 0; i < 16; i++) {
        double a = x[i], want = a / (1.0 + exp(-a));
        CHECK(isfinite(g[i]) && fabs(g[i] - want) <= 1e-6 + 1e-5 * fabs(want));
    }
    /* No overflow with large logits, and underflow to 0, in the vector
     * loop (16 values) as in the scalar tail (the last 4). */
    for (int r = 0; r < 5; r++) memcpy(s + 4 * r, s4, sizeof s4);
    ops->softmax(s, 20);
    for (int r = 0; r < 5; r++)
        CHECK(fabs(s[4 * r] - 0.2 / (1.0 + exp(-1.0))) < 1e-7 && s[4 * r + 1] == 0.0f &&
              fabs(s[4 * r + 2] - 0.2 / (1.0 + exp(1.0))) < 1e-7);
}

/* Halves for the cache: nearest even, overflow to inf, subnormals, NaN; the
 * vector loop (first 16) and the scalar tail (last 3) alike. */
static void test_llm_to_f16_edges(void) {
    const float v[19] = {1.0f,          1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 65504.0f, 65519.0f, 65520.0f, -1e6f,
                         0x1p-24f,      0x1p-25f,        0x3p-25f,        -0.0f,    INFINITY, NAN,      1e-30f,
                         -2.5e-6f,      0.1f,            1.0f + 0x1p-11f, 65520.0f, 0x3p-25f};
    const uint16_t want[19] = {0x3c00, 0x3c00, 0x3c02, 0x7bff, 0x7bff, 0x7c00, 0xfc00, 0x0001, 0x0000, 0x0002,
                               0x8000, 0x7c00, 0,      0x0000, 0x802a, 0x2e66, 0x3c00, 0x7c00, 0x0002};
    uint16_t h[19];
    ez_llm_ops_active()->to_f16(h, v, 19);
    for (int i = 0; i < 19; i++) {
        if (i == 12) CHECK((h[i] & 0x7c00) == 0x7c00 && (h[i] & 0x3ff) != 0); /* NaN */
        else CHECK_MSG(h[i] == want[i], "to_f16 differs from the expected half");
    }
    for (int i = 0; i < 19; i++)
        if (i != 12) CHECK(ez_f32_to_f16(v[i]) == want[i]);
}

/* Ties round to even, and on x86-64 the inverse scale is 127 / amax (ggml's
 * AVX path): a block whose largest value is 127 keeps exact halves. */
static void test_llm_quant_q8_0_rounds_like_llama_cpp(void) {
    float x[32];
    uint8_t q[34];
    const ez_block_q8_0 *b = (const ez_block_q8_0 *)q;
    for (int i = 0; i < 32; i++) x[i] = 0.0f;
    x[0] = 127.0f;
    x[1] = 2.5f;
    x[2] = -3.5f;
    x[3] = 0.5f;
    ez_llm_ops_active()->quant_q8_0(x, q, 32);
    CHECK(b->qs[0] == 127 && ez_f16_to_f32(b->d) == 1.0f);
#if EZ_ARCH_X86_64 || EZ_ARCH_AARCH64
    CHECK(b->qs[1] == 2 && b->qs[2] == -4 && b->qs[3] == 0);
#endif
}

static void test_llm_rope_rotates_pairs(void) {
    float v[2 * 8], w[2 * 8], cs[8];
    double n0 = 0, n1 = 0;
    fill(v, 16, 1.0f);
    memcpy(w, v, sizeof v);
    /* Position 0 is the identity. */
    ez_rope_angles(cs, 0, 8, 10000.0f, 1.0f, NULL);
    ez_rope(w, 2, 8, 8, cs, 1);
    CHECK(memcmp(v, w, sizeof v) == 0);
    /* Pair 0 turns by pos radians; neox pairs (0,4), normal pairs (0,1). */
    ez_rope_angles(cs, 3, 8, 10000.0f, 1.0f, NULL);
    CHECK(fabs(cs[0] - cos(3.0)) < 1e-7 && fabs(cs[1] - sin(3.0)) < 1e-7);
    CHECK(fabs(cs[2] - cos(3.0 * pow(10000.0, -0.25))) < 1e-7);
    memcpy(w, v, sizeof v);
    ez_rope(w, 2, 8, 8, cs, 1);
    CHECK(fabs(w[0] - (v[0] * cos(3.0) - v[4] * sin(3.0))) < 1e-6);
    CHECK(fabs(w[4] - (v[0] * sin(3.0) + v[4] * cos(3.0))) < 1e-6);
    memcpy(w, v, sizeof v);
    ez_rope(w, 2, 8, 8, cs, 0);
    CHECK(fabs(w[8] - (v[8] * cos(3.0) - v[9] * sin(3.0))) < 1e-6);
    for (int i = 0; i < 16; i++) n0 += (double)v[i] * v[i], n1 += (double)w[i] * w[i];
    CHECK(fabs(n0 - n1) < 1e-5);
    /* Linear scaling: position 6 at scale 0.5 is position 3. */
    {
        float cs2[8];
        ez_rope_angles(cs2, 6, 8, 10000.0f, 0.5f, NULL);
        for (int i = 0; i < 8; i++) CHECK(fabs(cs2[i] - cs[i]) < 1e-7);
    }
}

/* YaRN and LongRoPE angles (ggml's rope_yarn): with no mix and no scale
 * they are the plain angles; dims below the ramp keep the extrapolated
 * (unscaled) angle, dims above it the interpolated one, in between a blend;
 * factors divide the frequency and mscale multiplies cos and sin. */
static void test_llm_rope_yarn_and_longrope(void) {
    const float factors[4] = {1.0f, 2.0f, 4.0f, 8.0f};
    float plain[8], cs[8];
    ez_rope_scaling r = {10000.0f, 0.25f, NULL, 1.0f, 0.0f, 0.0f, 0.0f};
    ez_rope_angles(plain, 37, 8, 10000.0f, 0.25f, NULL);
    ez_rope_angles_scaled(cs, 37, 8, &r);
    for (int i = 0; i < 8; i++) CHECK(fabs(cs[i] - plain[i]) < 1e-7);

    r.ext_factor = 1.0f;
    r.corr_lo = 1.0f;
    r.corr_hi = 3.0f;
    r.mscale = 1.5f;
    ez_rope_angles_scaled(cs, 37, 8, &r);
    for (int i = 0; i < 4; i++) {
        const double extrap = 37.0 * pow(10000.0, -2.0 * i / 8.0), interp = 0.25 * extrap;
        const double y = i <= 1 ? 0.0 : i >= 3 ? 1.0 : (i - 1.0) / 2.0, mix = 1.0 - y;
        const double theta = interp * (1.0 - mix) + extrap * mix;
        CHECK(fabs(cs[2 * i] - 1.5 * cos(theta)) < 1e-6 && fabs(cs[2 * i + 1] - 1.5 * sin(theta)) < 1e-6);
    }
    CHECK(fabs(cs[0] - 1.5 * cos(37.0)) < 1e-6); /* dim 0: extrapolated, as without scaling */

    r.freq_scale = 1.0f;
    r.ext_factor = 0.0f;
    r.factors = factors;
    r.mscale = 1.25f;
    ez_rope_angles_scaled(cs, 37, 8, &r);
    for (int i = 0; i < 4; i++) {
        const double theta = 37.0 * pow(10000.0, -2.0 * i / 8.0) / factors[i];
        CHECK(fabs(cs[2 * i] - 1.25 * cos(theta)) < 1e-6 && fabs(cs[2 * i + 1] - 1.25 * sin(theta)) < 1e-6);
    }
}

/* ---- grouped matmul and tile kernels --------------------------------------------------- */

/* Random but valid rows of `type`: random code bytes, small finite scales. */
static uint8_t *random_rows(uint32_t type, int rows, int K) {
    size_t rb = (size_t)ez_row_bytes(type, (uint64_t)K), n = rb * (size_t)rows;
    uint8_t *d = (uint8_t *)malloc(n);
    if (type == EZ_TYPE_F32) {
        for (size_t i = 0; i < n / 4; i++) ((float *)d)[i] = frand();
    } else if (type == EZ_TYPE_F16) {
        for (size_t i = 0; i < n / 2; i++) ((uint16_t *)d)[i] = ez_f32_to_f16(frand());
    } else if (type == EZ_TYPE_BF16) {
        for (size_t i = 0; i < n / 2; i++) { /* a float's top half, the last of five a subnormal */
            float f = i % 5 == 4 ? frand() * 1e-39f : frand();
            uint32_t bits;
            memcpy(&bits, &f, 4);
            ((uint16_t *)d)[i] = (uint16_t)(bits >> 16);
        }
    } else {
        const ez_type_traits *tr = ez_type_traits_of(type);
        for (size_t i = 0; i < n; i++) d[i] = (uint8_t)(frand() * 127.0f + 128.0f);
        for (size_t b = 0; b < n / tr->type_size; b++) { /* small finite f16 scales */
            uint16_t h = ez_f32_to_f16(0.01f + 0.02f * (frand() + 1.0f));
            uint16_t h2 = ez_f32_to_f16(0.005f + 0.01f * (frand() + 1.0f));
            uint8_t *blk = d + b * tr->type_size;
            if (type == EZ_TYPE_Q4_0 || type == EZ_TYPE_Q5_0 || type == EZ_TYPE_Q8_0 || type == EZ_TYPE_IQ4_NL ||
                type == EZ_TYPE_IQ4_XS)
                memcpy(blk, &h, 2);
            if (type == EZ_TYPE_Q4_K || type == EZ_TYPE_Q5_K || type == EZ_TYPE_Q4_1 || type == EZ_TYPE_Q5_1) {
                memcpy(blk, &h, 2);
                memcpy(blk + 2, &h2, 2);
            }
            if (type == EZ_TYPE_Q2_K) {
                memcpy(blk + 80, &h, 2);
                memcpy(blk + 82, &h2, 2);
            }
            if (type == EZ_TYPE_Q3_K || type == EZ_TYPE_TQ1_0 || type == EZ_TYPE_TQ2_0)
                memcpy(blk + tr->type_size - 2, &h, 2);
            if (type == EZ_TYPE_IQ2_XXS || type == EZ_TYPE_IQ2_XS || type == EZ_TYPE_IQ2_S ||
                type == EZ_TYPE_IQ3_XXS || type == EZ_TYPE_IQ3_S || type == EZ_TYPE_IQ1_S)
                memcpy(blk, &h, 2);
            if (type == EZ_TYPE_IQ1_M) /* d's four nibbles top the four scale words */
                for (int i = 0; i < 4; i++) {
                    uint16_t w;
                    memcpy(&w, blk + 48 + 2 * i, 2);
                    w = (uint16_t)((w & 0x0fff) | ((h >> (4 * i)) & 15) << 12);
                    memcpy(blk + 48 + 2 * i, &w, 2);
                }
            if (type == EZ_TYPE_MXFP4) blk[0] = (uint8_t)(120 + (int)(frand() * 3.0f));
            if (type == EZ_TYPE_Q6_K) {
                /* int8 scales of a realistic size (llama.cpp's quantizer keeps them within +-63
                 * and below); full-range random ones push integer sums past 2^24, where the
                 * float conversions of the kernels under test round differently. */
                for (int j = 0; j < 16; j++) blk[192 + j] = (uint8_t)(int8_t)(frand() * 31.0f);
                memcpy(blk + tr->type_size - 2, &h, 2);
            }
        }
        if (type == EZ_TYPE_Q8_0) /* codes in [-127, 127] as llama.cpp's quantizer writes them */
            for (size_t b = 0; b < n / tr->type_size; b++)
                for (int j = 0; j < 32; j++)
                    if ((int8_t)d[b * tr->type_size + 2 + j] == -128) d[b * tr->type_size + 2 + j] = 0x81;
    }
    return d;
}

/* A matrix of R random rows of K columns of `type` (its data malloc'ed). */
static ez_llm_matrix random_matrix(uint32_t type, int R, int K) {
    ez_llm_matrix w;
    w.name = "w";
    w.type = type;
    w.n_rows = R;
    w.n_cols = K;
    w.row_bytes = (size_t)ez_row_bytes(type, (uint64_t)K);
    w.data = random_rows(type, R, K);
    return w;
}

static int close_to(float got, float want, float scale) { return fabsf(got - want) <= 1e-5f * scale + 1e-6f; }

/* The activation rows a weight type's dot reads, quantized as ez_llm_matmul
 * quantizes them (llama.cpp's rounding on this CPU). */
static const uint8_t *llm_activation(uint32_t vdt, const float *x, int K, uint8_t *buf) {
    if (vdt == EZ_TYPE_F32) return (const uint8_t *)x;
    if (vdt == EZ_TYPE_Q8_0) ez_llm_ops_active()->quant_q8_0(x, buf, K);
    else if (vdt == EZ_TYPE_Q8_1) ez_llm_quant_q8_1(x, buf, K);
    else ez_kernels(vdt)->quant(x, buf, K);
    return buf;
}

/* A group of three matrices (one type each: the same type, or a mix whose
 * dots read three activation formats) against the single dots; M from the
 * per-pair dots through the tiles to the x8 kernels (8 rows: one group of
 * packed activations per format, 13: a partial second, 16: two whole). */
static void test_llm_matmul_group_matches_single_dots(void) {
    static const uint32_t groups[][3] = {
        {EZ_TYPE_F32, EZ_TYPE_F32, EZ_TYPE_F32},    {EZ_TYPE_F16, EZ_TYPE_F16, EZ_TYPE_F16},
        {EZ_TYPE_BF16, EZ_TYPE_F16, EZ_TYPE_BF16},
        {EZ_TYPE_Q4_0, EZ_TYPE_Q4_0, EZ_TYPE_Q4_0}, {EZ_TYPE_Q5_0, EZ_TYPE_Q5_0, EZ_TYPE_Q5_0},
        {EZ_TYPE_Q8_0, EZ_TYPE_Q8_0, EZ_TYPE_Q8_0}, {EZ_TYPE_Q4_1, EZ_TYPE_Q5_1, EZ_TYPE_Q4_1},
        /* Q8_0, Q8_1 and Q8_K activations in one group, twice over with F32 */
        {EZ_TYPE_Q4_0, EZ_TYPE_Q4_1, EZ_TYPE_Q4_K}, {EZ_TYPE_Q2_K, EZ_TYPE_Q5_1, EZ_TYPE_IQ4_NL},
        {EZ_TYPE_F32, EZ_TYPE_Q3_K, EZ_TYPE_MXFP4}, {EZ_TYPE_IQ4_XS, EZ_TYPE_TQ2_0, EZ_TYPE_TQ1_0},
        {EZ_TYPE_IQ2_XXS, EZ_TYPE_IQ3_S, EZ_TYPE_IQ1_M}, {EZ_TYPE_IQ2_XS, EZ_TYPE_IQ2_S, EZ_TYPE_IQ3_XXS},
        {EZ_TYPE_IQ1_S, EZ_TYPE_Q8_0, EZ_TYPE_IQ4_XS},
    };
    static const int Ms[] = {1, 3, 4, 5, 8, 13, 16};
    ez_pool *pool = ez_pool_create(2);
    const int K = 256;
    const int rows[3] = {37, 16, 70};
    static float x[16 * 256];
    static uint8_t xq[16 * 1024];
    int bad = 0;
    CHECK(pool != NULL);
    fill(x, 16 * K, 1.0f);
    for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
        ez_llm_matrix w[3];
        ez_llm_mm mm[3];
        float *y[3];
        ez_llm_acts acts;
        ez_llm_acts_init(&acts);
        for (int i = 0; i < 3; i++) {
            const uint32_t t = groups[gi][i];
            w[i].name = "w";
            w[i].type = t;
            w[i].n_rows = rows[i];
            w[i].n_cols = K;
            w[i].row_bytes = (size_t)ez_row_bytes(t, (uint64_t)K);
            w[i].data = random_rows(t, rows[i], K);
            y[i] = (float *)malloc(sizeof(float) * 16 * (size_t)(rows[i] + 3));
            mm[i].w = &w[i];
            mm[i].y = y[i];
            mm[i].ldy = rows[i] + 3;
        }
        for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
            const int M = Ms[mi];
            int32_t rc = ez_llm_matmul(pool, &acts, x, M, mm, 3);
            CHECK_MSG(rc == ELIZA_OK, "group %zu M=%d: %d %s", gi, M, rc, ez_error_message());
            for (int m = 0; m < M; m++)
                for (int i = 0; i < 3; i++) {
                    const uint32_t vdt = ez_type_traits_of(w[i].type)->vec_dot_type;
                    const uint8_t *xr = llm_activation(vdt, x + m * K, K, xq);
                    for (int r = 0; r < rows[i]; r++) {
                        float want = ez_kernels(w[i].type)->dot(K, w[i].data + (size_t)r * w[i].row_bytes, xr);
                        if (!close_to(y[i][m * mm[i].ldy + r], want, 10.0f)) {
                            if (bad++ < 5)
                                fprintf(stderr, "  group %zu %s M=%d m=%d r=%d: %g vs %g\n", gi,
                                        ez_type_traits_of(w[i].type)->name, M, m, r, y[i][m * mm[i].ldy + r], want);
                        }
                    }
                }
        }
        for (int i = 0; i < 3; i++) {
            free((void *)w[i].data);
            free(y[i]);
        }
        ez_llm_acts_free(&acts);
    }
    CHECK(bad == 0);
    ez_pool_destroy(pool);
}

/* The multi-row matvec of a single activation row (decode) against the
 * per-row dots of its own level: identical floats (memcmp), for ragged row
 * counts (rows past each group of 4 go through the dot) and K whose block
 * counts end on every tail of the 32-element types (8, 16, 136 blocks:
 * whole steps of 4; 3, 5 and 138: an odd block, a step and an odd block, a
 * step and a pair; the K quants take 1, 2 and 17 super-blocks), where the
 * CPU has AVX-512. The reference dots agree within float rounding: 1e-5
 * of |dot| + K / 32 (the summation order of one float term per block
 * differs). ez_llm_matmul with M = 1 gives the active level's dots exactly,
 * through a kernel or the per-row dots (scalar). */
/* The K-quant matvecs pack two vpdpbusd lanes (four code * activation
 * products each) into int16: exact only while a lane stays within 2^15.
 * The largest codes against the largest activations of either sign and the
 * most negative Q6_K scale must still give the dots' floats bit for bit. */
static void test_llm_gemv_extreme_codes(void) {
    static const uint32_t types[] = {EZ_TYPE_Q4_K, EZ_TYPE_Q5_K, EZ_TYPE_Q6_K};
    enum { R = 8, K = 512 };
    static float x[K], y[R], want[R];
    static uint8_t xq[K / 256 * 292];
    if ((ez_cpu_features() & EZ_CPU_LEVEL_AVX512) != EZ_CPU_LEVEL_AVX512) return;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        ez_llm_matrix w = random_matrix(types[ti], R, K);
        uint8_t *data = (uint8_t *)w.data;
        for (int64_t b = 0; b < (int64_t)R * K / 256; b++) {
            if (types[ti] == EZ_TYPE_Q4_K) memset(((ez_block_q4_k *)data)[b].qs, 0xff, sizeof(((ez_block_q4_k *)data)[b].qs));
            if (types[ti] == EZ_TYPE_Q5_K) {
                ez_block_q5_k *blk = &((ez_block_q5_k *)data)[b];
                memset(blk->qs, 0xff, sizeof blk->qs);
                memset(blk->qh, 0xff, sizeof blk->qh);
            }
            if (types[ti] == EZ_TYPE_Q6_K) {
                ez_block_q6_k *blk = &((ez_block_q6_k *)data)[b];
                memset(blk->ql, 0xff, sizeof blk->ql);
                memset(blk->qh, 0xff, sizeof blk->qh);
                memset(blk->scales, 0x80, sizeof blk->scales);
            }
        }
        for (int flip = 0; flip < 2; flip++) {
            /* Q8_K scales each 256 by its largest-magnitude value m as
             * -127 / m: a constant row quantizes to -127, and a row of 1
             * whose last element per 256 is -1.001 to +127 (that one -127). */
            for (int k = 0; k < K; k++) x[k] = flip && k % 256 == 255 ? -1.001f : 1.0f;
            llm_activation(ez_type_traits_of(types[ti])->vec_dot_type, x, K, xq);
            for (int r = 0; r < R; r++) want[r] = ez_kernels_avx512(types[ti])->dot(K, w.data + (size_t)r * w.row_bytes, xq);
            ez_llm_gemv_avx512(types[ti])(&w, 0, R, xq, y);
            CHECK_MSG(memcmp(y, want, sizeof y) == 0, "gemv %s, extreme codes (%s activations): differs from its dots",
                      ez_type_traits_of(types[ti])->name, flip ? "+127" : "-127");
        }
        free((void *)w.data);
    }
}

static void test_llm_gemv_matches_dots(void) {
    static const uint32_t types[] = {EZ_TYPE_Q4_0, EZ_TYPE_Q5_0, EZ_TYPE_Q8_0, EZ_TYPE_IQ4_NL,
                                     EZ_TYPE_Q4_K, EZ_TYPE_Q5_K, EZ_TYPE_Q6_K, EZ_TYPE_F16, EZ_TYPE_BF16};
    /* 100 and 7 (F16 / BF16 only): a masked rest after the whole chunks */
    static const int Ks[] = {256, 512, 4352, 96, 160, 4416, 100, 7};
    static const int Rs[] = {1, 3, 4, 5, 37};
    const int has_avx512 = (ez_cpu_features() & EZ_CPU_LEVEL_AVX512) == EZ_CPU_LEVEL_AVX512;
    ez_pool *pool = ez_pool_create(2);
    static float x[4416], y[40], want[40];
    static uint8_t xq[4352 / 256 * 292]; /* a Q8_K row of 4352, more than a Q8_0 row of 4416 */
    int bad = 0;
    CHECK(pool != NULL);
    fill(x, 4416, 2.0f);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const ez_llm_gemv_fn gemv = has_avx512 ? ez_llm_gemv_avx512(types[ti]) : NULL;
        CHECK_MSG(!has_avx512 || gemv, "type %u: no AVX-512 gemv", types[ti]);
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
            for (size_t ri = 0; ri < sizeof Rs / sizeof Rs[0]; ri++) {
                const int K = Ks[ki], R = Rs[ri];
                ez_llm_matrix w;
                ez_llm_mm mm;
                ez_llm_acts acts;
                const uint8_t *xq_or_x;
                if (K % (int)ez_type_traits_of(types[ti])->block_size) continue;
                w = random_matrix(types[ti], R, K);
                xq_or_x = llm_activation(ez_type_traits_of(types[ti])->vec_dot_type, x, K, xq);
                if (gemv) {
                    for (int r = 0; r < R; r++) want[r] = ez_kernels_avx512(types[ti])->dot(K, w.data + (size_t)r * w.row_bytes, xq_or_x);
                    gemv(&w, 0, R, xq_or_x, y);
                    if (memcmp(y, want, sizeof(float) * (size_t)R) != 0) {
                        fprintf(stderr, "  gemv %s K=%d R=%d differs from its dots\n", ez_type_traits_of(types[ti])->name, K, R);
                        bad++;
                    }
                    if (R > 1) { /* a row range that starts inside the matrix */
                        gemv(&w, 1, R, xq_or_x, y);
                        bad += memcmp(y, want + 1, sizeof(float) * (size_t)(R - 1)) != 0;
                    }
                    for (int r = 0; r < R; r++) {
                        const float ref = ez_kernels_ref(types[ti])->dot(K, w.data + (size_t)r * w.row_bytes, xq_or_x);
                        if (!close_to(want[r], ref, fabsf(ref) + (float)(K / 32))) {
                            fprintf(stderr, "  %s K=%d r=%d: dot %g, reference %g\n", ez_type_traits_of(types[ti])->name, K, r, want[r], ref);
                            bad++;
                        }
                    }
                }
                /* the matmul at the level in use: its own level's dots, bit for bit */
                for (int r = 0; r < R; r++) want[r] = ez_kernels(types[ti])->dot(K, w.data + (size_t)r * w.row_bytes, xq_or_x);
                ez_llm_acts_init(&acts);
                mm.w = &w;
                mm.y = y;
                mm.ldy = R;
                CHECK(ez_llm_matmul(pool, &acts, x, 1, &mm, 1) == ELIZA_OK);
                if (memcmp(y, want, sizeof(float) * (size_t)R) != 0) {
                    fprintf(stderr, "  matmul M=1 %s K=%d R=%d differs from the dots\n",
                            ez_type_traits_of(types[ti])->name, K, R);
                    bad++;
                }
                ez_llm_acts_free(&acts);
                free((void *)w.data);
            }
    }
    CHECK(ez_llm_gemv_avx512(EZ_TYPE_F32) == NULL && ez_llm_gemv_avx512(EZ_TYPE_Q3_K) == NULL);
    CHECK(ez_simd_level_active() == EZ_SIMD_AVX512 || ez_llm_gemv_active(EZ_TYPE_Q8_0) == NULL);
    CHECK(bad == 0);
    ez_pool_destroy(pool);
}

/* The AVX2 tile kernel, the scalar tile reference and the per-pair
 * reference dots agree for every tile type, ragged row counts and odd M. */
static void test_llm_tile_kernels_match_dots(void) {
    static const uint32_t types[] = {EZ_TYPE_Q4_0,    EZ_TYPE_Q5_0,   EZ_TYPE_Q8_0,   EZ_TYPE_Q4_K,
                                     EZ_TYPE_Q5_K,    EZ_TYPE_Q6_K,   EZ_TYPE_IQ4_NL, EZ_TYPE_MXFP4,
                                     EZ_TYPE_Q2_K,    EZ_TYPE_Q3_K,   EZ_TYPE_TQ2_0,  EZ_TYPE_TQ1_0,
                                     EZ_TYPE_IQ2_XXS, EZ_TYPE_IQ2_XS, EZ_TYPE_IQ2_S,  EZ_TYPE_IQ3_XXS,
                                     EZ_TYPE_IQ3_S,   EZ_TYPE_IQ1_S,  EZ_TYPE_IQ1_M,  EZ_TYPE_IQ4_XS};
    enum { K = 512, R = 11, M = 7 };
    float x[M * K], y_ref[M * R], y_fast[M * R];
    uint8_t xq[M * 600];
    int bad = 0;
    fill(x, M * K, 2.0f);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        ez_llm_matrix w;
        ez_llm_tile_fn fast = ez_llm_tile_avx2(types[ti]);
        const uint32_t vdt = ez_type_traits_of(types[ti])->vec_dot_type;
        const size_t xrb = (size_t)ez_row_bytes(vdt, (uint64_t)K);
        void *scratch = malloc(ez_llm_tile_scratch(types[ti], K) + 64);
        for (int m = 0; m < M; m++) ez_kernels_ref(vdt)->quant(x + m * K, xq + (size_t)m * xrb, K);
        w = random_matrix(types[ti], R, K);
        CHECK(ez_llm_tile_ref(types[ti]) != NULL);
        ez_llm_tile_ref(types[ti])(&w, 1, R, xq, xrb, M, y_ref, R, scratch);
        for (int m = 0; m < M; m++)
            for (int r = 1; r < R; r++) {
                float want = ez_kernels_ref(types[ti])->dot(K, w.data + (size_t)r * w.row_bytes, xq + (size_t)m * xrb);
                if (!close_to(y_ref[m * R + r], want, fabsf(want) + 1.0f)) {
                    if (getenv("ELIZA_TEST_VERBOSE")) fprintf(stderr, "type %u m %d r %d: tile %g dot %g\n", types[ti], m, r, y_ref[m * R + r], want);
                    bad++;
                }
            }
        if (fast && (ez_cpu_features() & EZ_CPU_AVX2)) {
            fast(&w, 1, R, xq, xrb, M, y_fast, R, scratch);
            for (int m = 0; m < M; m++)
                for (int r = 1; r < R; r++) {
                    if (!close_to(y_fast[m * R + r], y_ref[m * R + r], fabsf(y_ref[m * R + r]) + 10.0f)) {
                        if (getenv("ELIZA_TEST_VERBOSE"))
                            fprintf(stderr, "type %u m %d r %d: avx2 %g ref %g\n", types[ti], m, r, y_fast[m * R + r], y_ref[m * R + r]);
                        bad++;
                    }
                }
        }
        if (bad) fprintf(stderr, "tile kernel of type %u disagrees\n", types[ti]);
        free((void *)w.data);
        free(scratch);
    }
    CHECK(ez_llm_tile_ref(EZ_TYPE_F16) == NULL);
    /* every type with tile traits is in the list above, but those with a min
     * (Q8_1 activations), which have only x8 kernels */
    for (uint32_t t = 0; t < EZ_TYPE_COUNT; t++) {
        const ez_llm_tile_traits *tt = ez_llm_tile_traits_of(t);
        int listed = 0;
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) listed |= types[ti] == t;
        if (tt && tt->has_min) {
            CHECK_MSG(!listed && !ez_llm_tile_ref(t) && !ez_llm_tile_avx2(t) && !ez_llm_tile_avx2_vnni(t),
                      "type %u has a min but a tile kernel", t);
            continue;
        }
        CHECK_MSG(!tt || listed, "type %u has tile traits but no tile test", t);
    }
    CHECK(bad == 0);
}

/* The x8 kernels (packed activations, 8 rows per lane) against the per-pair
 * reference dots: every kernel the CPU runs, ragged row counts, a partial
 * group of activation rows. Q4_1 / Q5_1 read Q8_1 packs (d and s). */
static void test_llm_x8_kernels_match_dots(void) {
    static const uint32_t types[] = {EZ_TYPE_Q4_0,   EZ_TYPE_Q5_0,    EZ_TYPE_Q4_1,   EZ_TYPE_Q5_1,
                                     EZ_TYPE_Q8_0,   EZ_TYPE_IQ4_NL, EZ_TYPE_MXFP4,
                                     EZ_TYPE_Q4_K,   EZ_TYPE_Q5_K,    EZ_TYPE_Q6_K,   EZ_TYPE_Q2_K,   EZ_TYPE_Q3_K,
                                     EZ_TYPE_TQ2_0,  EZ_TYPE_TQ1_0,   EZ_TYPE_IQ2_XXS, EZ_TYPE_IQ2_XS, EZ_TYPE_IQ2_S,
                                     EZ_TYPE_IQ3_XXS, EZ_TYPE_IQ3_S,  EZ_TYPE_IQ1_S,  EZ_TYPE_IQ1_M,  EZ_TYPE_IQ4_XS};
    /* M = 21: two whole groups of 8 rows and a partial third, so the AVX-512
     * kernels' pairs of groups include a lone one. */
    enum { K = 512, R = 11, M = 21 };
    static float x[M * K], y[M * R];
    static uint8_t xq[M * 640]; /* a Q8_1 row of K */
    int bad = 0;
    fill(x, M * K, 3.0f);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t vdt = ez_type_traits_of(types[ti])->vec_dot_type;
        const size_t xrb = (size_t)ez_row_bytes(vdt, (uint64_t)K);
        const int q32 = vdt == EZ_TYPE_Q8_0 || vdt == EZ_TYPE_Q8_1;
        void *pack = ez_aligned_alloc((M + 7) / 8 * (q32 ? (K / 32) * sizeof(ez_llm_x8_block)
                                                         : (K / 256) * sizeof(ez_llm_x8k_block)));
        void *scratch = malloc(ez_llm_tile_scratch(types[ti], K) + 64);
        ez_llm_x8_fn fns[4];
        ez_llm_matrix w;
        for (int m = 0; m < M; m++) {
            if (vdt == EZ_TYPE_Q8_0) ez_llm_quant_q8_0_ref(x + m * K, xq + (size_t)m * xrb, K);
            else if (vdt == EZ_TYPE_Q8_1) ez_llm_quant_q8_1(x + m * K, xq + (size_t)m * xrb, K);
            else ez_kernels_ref(vdt)->quant(x + m * K, xq + (size_t)m * xrb, K);
        }
        if (vdt == EZ_TYPE_Q8_0) ez_llm_pack_x8(xq, xrb, M, K, (ez_llm_x8_block *)pack);
        else if (vdt == EZ_TYPE_Q8_1) ez_llm_pack_x8_1(xq, xrb, M, K, (ez_llm_x8_block *)pack);
        else ez_llm_pack_x8k(xq, xrb, M, K, (ez_llm_x8k_block *)pack);
        fns[0] = ez_llm_x8_ref(types[ti]);
        fns[1] = (ez_cpu_features() & EZ_CPU_AVX2) ? ez_llm_x8_avx2(types[ti]) : NULL;
        fns[2] = (ez_cpu_features() & EZ_CPU_AVX2) && ez_llm_cpu_has_avxvnni() ? ez_llm_x8_avx2_vnni(types[ti]) : NULL;
        fns[3] = (ez_cpu_features() & EZ_CPU_LEVEL_AVX512) == EZ_CPU_LEVEL_AVX512 ? ez_llm_x8_avx512(types[ti]) : NULL;
        CHECK(fns[0] != NULL);
        w = random_matrix(types[ti], R, K);
        for (int f = 0; f < 4; f++) {
            if (!fns[f]) continue;
            for (int i = 0; i < M * R; i++) y[i] = NAN;
            fns[f](&w, 1, R, pack, M, y, R, scratch);
            for (int m = 0; m < M; m++)
                for (int r = 1; r < R; r++) {
                    float want = ez_kernels_ref(types[ti])->dot(K, w.data + (size_t)r * w.row_bytes, xq + (size_t)m * xrb);
                    if (!close_to(y[m * R + r], want, fabsf(want) + 10.0f)) {
                        if (getenv("ELIZA_TEST_VERBOSE"))
                            fprintf(stderr, "x8 kernel %d type %u m %d r %d: %g, dot %g\n", f, types[ti], m, r, y[m * R + r], want);
                        bad++;
                    }
                }
        }
        free((void *)w.data);
        free(scratch);
        ez_aligned_free(pack);
    }
    CHECK(ez_llm_x8_ref(EZ_TYPE_F16) == NULL && ez_llm_x8_ref(EZ_TYPE_IQ4_XS) != NULL);
    /* every type with tile traits is in the list above */
    for (uint32_t t = 0; t < EZ_TYPE_COUNT; t++) {
        int listed = 0;
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) listed |= types[ti] == t;
        CHECK_MSG(!ez_llm_tile_traits_of(t) || listed, "type %u has x8 kernels but no x8 test", t);
    }
    /* Q5_1's codes reach 31 like Q5_0's: the plain AVX2 kernel's 16-bit sums hold them. */
    CHECK(!(ez_cpu_features() & EZ_CPU_AVX2) || (ez_llm_x8_avx2(EZ_TYPE_Q4_1) && ez_llm_x8_avx2(EZ_TYPE_Q5_1)));
    /* IQ4_XS codes reach 241: one maddubs could leave int16, so AVX2 has no tile or x8 kernel. */
    CHECK(ez_llm_x8_avx2(EZ_TYPE_IQ4_XS) == NULL && ez_llm_tile_avx2(EZ_TYPE_IQ4_XS) == NULL);
    /* maddubs would saturate on signed codes: the plain AVX2 kernel refuses them. */
    CHECK(ez_llm_x8_avx2(EZ_TYPE_Q8_0) == NULL && ez_llm_x8_avx2(EZ_TYPE_IQ4_NL) == NULL);
    CHECK(bad == 0);
}

/* The AVX2 K-quant tile unpack writes the reference's tiles byte for byte:
 * every K type (the ones without AVX2 codes pass through), several
 * super-blocks, every ragged row group (the rows past n_rows zeroed, the
 * pad bytes untouched), on valid rows and on raw random bytes (every f16
 * scale, infinities and NaNs included, and every bit of the scale fields). */
/* The F16 / BF16 tile against the AVX-512 per-row dot, bit for bit (the
 * prompt pass's sums are the decode's): row lengths with and without whole
 * 64-element steps, 16-element chunks after them and a masked rest; activation
 * rows short of a whole block of six and weight rows short of a group of four. */
static void test_llm_float_tile_matches_avx512_dots(void) {
    static const uint32_t types[] = {EZ_TYPE_F16, EZ_TYPE_BF16};
    static const int Ks[] = {640, 64, 16, 7, 100, 200, 1000};
    enum { R = 11, M = 13, KMAX = 1000 };
    static float x[M * KMAX], y[M * R];
    int bad = 0;
    CHECK(ez_llm_tile_float_avx512(EZ_TYPE_F32) == NULL && ez_llm_tile_float_avx512(EZ_TYPE_Q8_0) == NULL);
    if ((ez_cpu_features() & EZ_CPU_LEVEL_AVX512) != EZ_CPU_LEVEL_AVX512 || !ez_kernels_avx512(EZ_TYPE_F16)) return;
    fill(x, M * KMAX, 3.0f);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
            const int K = Ks[ki];
            ez_llm_matrix w = random_matrix(types[ti], R, K);
            void *scratch = malloc(ez_llm_tile_scratch(types[ti], K));
            ez_llm_tile_fn tile = ez_llm_tile_float_avx512(types[ti]);
            CHECK(tile != NULL && scratch != NULL);
            for (int i = 0; i < M * R; i++) y[i] = -1.0f;
            tile(&w, 1, R, (const uint8_t *)x, sizeof(float) * KMAX, M, y, R, scratch);
            for (int m = 0; m < M; m++)
                for (int r = 0; r < R; r++) {
                    const float want = r == 0 ? -1.0f
                                              : ez_kernels_avx512(types[ti])->dot(
                                                    K, w.data + (size_t)r * w.row_bytes, x + (size_t)m * KMAX);
                    if (memcmp(&y[m * R + r], &want, sizeof want) && bad++ < 5)
                        fprintf(stderr, "  %s K=%d m=%d r=%d: tile %.9g dot %.9g\n", ez_type_traits_of(types[ti])->name,
                                K, m, r, y[m * R + r], want);
                }
            free((void *)w.data);
            free(scratch);
        }
    CHECK(bad == 0);
}

static void test_llm_ktile_unpack_matches_reference(void) {
    static const uint32_t types[] = {EZ_TYPE_Q4_K,    EZ_TYPE_Q5_K,   EZ_TYPE_Q6_K,    EZ_TYPE_Q2_K,
                                     EZ_TYPE_Q3_K,    EZ_TYPE_TQ2_0,  EZ_TYPE_TQ1_0,   EZ_TYPE_IQ2_XXS,
                                     EZ_TYPE_IQ2_XS,  EZ_TYPE_IQ2_S,  EZ_TYPE_IQ3_XXS, EZ_TYPE_IQ3_S,
                                     EZ_TYPE_IQ1_S,   EZ_TYPE_IQ1_M,  EZ_TYPE_IQ4_XS};
    enum { K = 768, R = 11, NSB = K / 256 };
    const size_t tiles_bytes = NSB * EZ_LLM_TILE_ROWS * sizeof(ez_llm_ktile);
    ez_llm_ktile *want = (ez_llm_ktile *)malloc(tiles_bytes);
    ez_llm_ktile *got = (ez_llm_ktile *)malloc(tiles_bytes);
    if (!(ez_cpu_features() & EZ_CPU_AVX2)) {
        free(want);
        free(got);
        return;
    }
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (int raw = 0; raw < 2; raw++) {
            ez_llm_matrix w;
            uint8_t *data = random_rows(types[ti], R, K);
            w.name = "w";
            w.type = types[ti];
            w.n_rows = R;
            w.n_cols = K;
            w.row_bytes = (size_t)ez_row_bytes(types[ti], (uint64_t)K);
            if (raw)
                for (size_t i = 0; i < w.row_bytes * R; i++) data[i] = (uint8_t)(frand() * 128.0f + 128.0f);
            w.data = data;
            for (int r0 = 0; r0 < R; r0++)
                for (int n_rows = 1; n_rows <= EZ_LLM_TILE_ROWS && r0 + n_rows <= R; n_rows++) {
                    memset(want, 0xa5, tiles_bytes);
                    memset(got, 0xa5, tiles_bytes);
                    ez_llm_ktile_unpack(&w, r0, n_rows, want);
                    ez_llm_ktile_unpack_avx2(&w, r0, n_rows, got);
                    CHECK_MSG(!memcmp(want, got, tiles_bytes), "type %u%s rows %d..%d: AVX2 tiles differ", types[ti],
                              raw ? " (raw bytes)" : "", r0, r0 + n_rows);
                }
            free(data);
        }
    /* the i-quants and TQ1_0 have their own AVX2 unpack, the others not */
    for (uint32_t t = 0; t < EZ_TYPE_COUNT; t++) {
        const int iq = t == EZ_TYPE_IQ2_XXS || t == EZ_TYPE_IQ2_XS || t == EZ_TYPE_IQ2_S || t == EZ_TYPE_IQ3_XXS ||
                       t == EZ_TYPE_IQ3_S || t == EZ_TYPE_IQ1_S || t == EZ_TYPE_IQ1_M || t == EZ_TYPE_IQ4_XS ||
                       t == EZ_TYPE_TQ1_0;
        CHECK_MSG((ez_llm_ksuper_iq_avx2(t) != NULL) == iq, "type %u: AVX2 i-quant unpack %s", t,
                  iq ? "missing" : "unexpected");
    }
    free(want);
    free(got);
}

/* ---- sampler ---------------------------------------------------------------------------- */

static ez_sampler_params greedy_params(void) {
    ez_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 0.0f;
    p.top_p = 1.0f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    return p;
}

static int32_t sample_once(const ez_sampler_params *p, const float *logits, int n, const int32_t *hist, size_t nh) {
    ez_sampler *s = NULL;
    float *l = (float *)malloc(sizeof(float) * (size_t)n);
    int32_t id = -1;
    memcpy(l, logits, sizeof(float) * (size_t)n);
    if (ez_sampler_create(p, n, &s) == ELIZA_OK) id = ez_sampler_sample(s, l, hist, nh);
    ez_sampler_free(s);
    free(l);
    return id;
}

/* Greedy against the running-best loop: the first index of the largest
 * logit, NaNs never winning (a NaN at 0 gives 0), over lengths around the
 * argmax's 16 lanes, with ties, signed zeros and NaNs planted. */
static void test_llm_sampler_greedy_first_max(void) {
    const ez_sampler_params p = greedy_params();
    int bad = 0;
    for (int n = 1; n <= 70; n++)
        for (int v = 0; v < 8; v++) {
            float l[70];
            int32_t want = 0;
            fill(l, n, 1.0f);
            for (int i = 0; i < n; i++) l[i] = (float)(int)(3.0f * l[i]); /* few values: ties */
            if (v & 1) l[(v * 7) % n] = NAN;
            if (v & 2) l[n - 1] = (v & 4) ? -0.0f : 0.0f;
            if (v == 4) l[0] = NAN;
            for (int i = 1; i < n; i++)
                if (l[i] > l[want]) want = i;
            bad += sample_once(&p, l, n, NULL, 0) != want;
        }
    CHECK_MSG(bad == 0, "greedy differs from the running-best loop in %d cases", bad);
}

static void test_llm_sampler_contract(void) {
    enum { N = 1000 };
    float logits[N];
    ez_sampler_params p = greedy_params();
    int32_t best = 0, hist[3];
    ez_sampler *s = NULL;
    fill(logits, N, 5.0f);
    for (int i = 1; i < N; i++)
        if (logits[i] > logits[best]) best = i;

    CHECK(sample_once(&p, logits, N, NULL, 0) == best);
    /* top_k 1, min_p 1, or a tiny top_p all leave only the best token. */
    p.temperature = 2.0f;
    p.top_k = 1;
    CHECK(sample_once(&p, logits, N, NULL, 0) == best);
    p.top_k = 0;
    p.min_p = 1.0f;
    CHECK(sample_once(&p, logits, N, NULL, 0) == best);
    p.min_p = 0.0f;
    p.top_p = 1e-6f;
    CHECK(sample_once(&p, logits, N, NULL, 0) == best);

    /* A repetition penalty moves greedy off the best token once it is recent. */
    p = greedy_params();
    p.repeat_penalty = 1e6f;
    hist[0] = best;
    CHECK(sample_once(&p, logits, N, hist, 1) != best);
    p.repeat_last_n = 0;
    CHECK(sample_once(&p, logits, N, hist, 1) == best);

    /* The same seed draws the same sequence; draws follow the distribution:
     * logits (0, ln 3) at temperature 1 give token 1 three times in four. */
    {
        float two[2] = {0.0f, logf(3.0f)};
        int count1 = 0, n_draws = 20000, same = 1;
        ez_sampler *a = NULL, *b = NULL;
        p = greedy_params();
        p.temperature = 1.0f;
        p.seed = 7;
        CHECK(ez_sampler_create(&p, 2, &a) == ELIZA_OK);
        CHECK(ez_sampler_create(&p, 2, &b) == ELIZA_OK);
        for (int i = 0; a && b && i < n_draws; i++) {
            float l1[2] = {two[0], two[1]}, l2[2] = {two[0], two[1]};
            int32_t x = ez_sampler_sample(a, l1, NULL, 0), y = ez_sampler_sample(b, l2, NULL, 0);
            same &= x == y;
            count1 += x == 1;
        }
        CHECK(same);
        CHECK(fabs((double)count1 / n_draws - 0.75) < 0.015);
        ez_sampler_free(a);
        ez_sampler_free(b);
    }
    /* top_k keeps the k best: with k = 3 only they are ever drawn. */
    {
        int32_t order[N];
        int hits_outside = 0;
        p = greedy_params();
        p.temperature = 100.0f; /* nearly flat */
        p.top_k = 3;
        p.seed = 1;
        for (int i = 0; i < N; i++) order[i] = i;
        for (int i = 0; i < 3; i++) /* selection of the 3 best */
            for (int j = i + 1; j < N; j++)
                if (logits[order[j]] > logits[order[i]]) {
                    int32_t t = order[i];
                    order[i] = order[j];
                    order[j] = t;
                }
        CHECK(ez_sampler_create(&p, N, &s) == ELIZA_OK);
        for (int i = 0; s && i < 300; i++) {
            float l[N];
            int32_t id;
            memcpy(l, logits, sizeof l);
            id = ez_sampler_sample(s, l, NULL, 0);
            hits_outside += id != order[0] && id != order[1] && id != order[2];
        }
        CHECK(hits_outside == 0);
        ez_sampler_free(s);
    }
    /* top-p without top-k (the sampler selects instead of sorting 1000 ids):
     * every draw is inside the nucleus a full sort gives, and min-p narrows
     * it further. */
    {
        int32_t order[N];
        double total = 0.0, cum = 0.0, mx;
        int in_nucleus[N], n_nucleus = 0, outside = 0, outside_min_p = 0;
        for (int i = 0; i < N; i++) order[i] = i;
        for (int i = 0; i < N; i++) /* insertion sort, descending */
            for (int j = i; j > 0 && logits[order[j]] > logits[order[j - 1]]; j--) {
                int32_t t = order[j];
                order[j] = order[j - 1];
                order[j - 1] = t;
            }
        mx = logits[order[0]];
        for (int i = 0; i < N; i++) total += exp(logits[i] - mx);
        memset(in_nucleus, 0, sizeof in_nucleus);
        for (int i = 0; i < N && cum < 0.9; i++) {
            cum += exp(logits[order[i]] - mx) / total;
            in_nucleus[order[i]] = 1;
            n_nucleus++;
        }
        CHECK(n_nucleus > 64); /* past the first selection round */
        p = greedy_params();
        p.temperature = 1.0f;
        p.top_p = 0.9f;
        p.seed = 5;
        CHECK(ez_sampler_create(&p, N, &s) == ELIZA_OK);
        for (int i = 0; s && i < 2000; i++) {
            float l[N];
            memcpy(l, logits, sizeof l);
            outside += !in_nucleus[ez_sampler_sample(s, l, NULL, 0)];
        }
        ez_sampler_free(s);
        CHECK(outside == 0);
        p.min_p = 0.5f;
        CHECK(ez_sampler_create(&p, N, &s) == ELIZA_OK);
        for (int i = 0; s && i < 500; i++) {
            float l[N];
            int32_t id;
            memcpy(l, logits, sizeof l);
            id = ez_sampler_sample(s, l, NULL, 0);
            outside_min_p += !in_nucleus[id] || logits[id] < mx + log(0.5) - 1e-6;
        }
        ez_sampler_free(s);
        CHECK(outside_min_p == 0);
    }
    /* Bad parameters. */
    p = greedy_params();
    p.top_p = -1.0f;
    CHECK(ez_sampler_create(&p, N, &s) == ELIZA_E_INVALID_ARG);
    p = greedy_params();
    p.repeat_penalty = 0.0f;
    CHECK(ez_sampler_create(&p, N, &s) == ELIZA_E_INVALID_ARG);
    p = greedy_params();
    p.min_p = 2.0f;
    CHECK(ez_sampler_create(&p, N, &s) == ELIZA_E_INVALID_ARG);
}

int main(void) {
    SKIP_IF_PINNED_LEVEL_MISSING();
    test_llm_ops_fast_matches_reference();
    test_llm_ops_match_formulas();
    test_llm_to_f16_edges();
    test_llm_quant_q8_0_rounds_like_llama_cpp();
    test_llm_rope_rotates_pairs();
    test_llm_rope_yarn_and_longrope();
    test_llm_matmul_group_matches_single_dots();
    test_llm_tile_kernels_match_dots();
    test_llm_x8_kernels_match_dots();
    test_llm_float_tile_matches_avx512_dots();
    test_llm_ktile_unpack_matches_reference();
    test_llm_sampler_greedy_first_max();
    test_llm_sampler_contract();
    test_llm_gemv_matches_dots(); /* last: the random data of the tests above stays as it was */
    test_llm_gemv_extreme_codes();
    if (g_failed) {
        fprintf(stderr, "test_llm_ops: FAILED\n");
        return 1;
    }
    printf("test_llm_ops: ok\n");
    return 0;
}
