/* Quantization formats and kernels: type traits and row sizes, float16
 * rounding, the reference activation quantizers, and every fast kernel the
 * CPU can run against the scalar reference (dequantization bit for bit, dots
 * within a relative tolerance, bit for bit against Q8_K activations), on
 * random rows of every type (odd block counts too) and, when
 * ELIZA_TEST_GGUF names a GGUF file, on rows of every tensor in it.
 *
 * Prints one line per failure, the worst fast-vs-reference dot error per
 * type and instruction set, and a "N passed, M failed" summary; exits
 * nonzero on any failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/gguf.h"
#include "core/quant.h"
#include "check.h"

/* Relative error bounds, against sum(|w_i * x_i|) of the row. The fast dots
 * differ from the reference only in float summation order; the reference
 * differs from the dequantize-then-dot value by its per-block float
 * rounding. */
#define FAST_DOT_TOL 2e-6
#define REF_DOT_TOL 2e-6

/* ---- deterministic random numbers (splitmix64) ---- */

static uint64_t g_rng = 0x5eed1234abcdull;

static uint64_t rng_u64(void) {
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float rng_float(void) {
    return (float)((double)(rng_u64() >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

static void fill_bytes(uint8_t *p, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) p[i] = (uint8_t)rng_u64();
}

/* Activations: mostly small values with a few larger ones, as hidden states
 * look. */
static void fill_activations(float *x, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++) x[i] = rng_float() * ((rng_u64() & 31) == 0 ? 8.0f : 1.0f);
}

/* A float16 scale of random sign and magnitude in [2^-12, 2^-6). */
static uint16_t random_scale(void) {
    const float m = ldexpf(1.0f + 0.5f * (rng_float() + 1.0f), -12 + (int)(rng_u64() % 6));
    return ez_f32_to_f16(rng_u64() & 1 ? m : -m);
}

/* A weight row of `type`: random quant bits with sane scales (random bytes
 * everywhere else), or random floats for the float types. */
static void fill_weights(uint32_t type, void *row, int64_t n) {
    const ez_type_traits *tr = ez_type_traits_of(type);
    const int64_t nb = n / tr->block_size;
    uint8_t *p = (uint8_t *)row;
    int64_t i;
    fill_bytes(p, (size_t)ez_row_bytes(type, (uint64_t)n));
    for (i = 0; i < nb; i++) {
        uint8_t *blk = p + i * tr->type_size;
        uint16_t h;
        float f;
        switch (type) {
        case EZ_TYPE_F32:
            f = rng_float();
            memcpy(blk, &f, 4);
            break;
        case EZ_TYPE_F16:
            h = ez_f32_to_f16(rng_float());
            memcpy(blk, &h, 2);
            break;
        case EZ_TYPE_BF16:
            f = rng_float();
            memcpy(&h, (uint8_t *)&f + 2, 2);
            memcpy(blk, &h, 2);
            break;
        case EZ_TYPE_Q4_0:
        case EZ_TYPE_Q5_0:
        case EZ_TYPE_Q8_0:
        case EZ_TYPE_IQ4_NL:
        case EZ_TYPE_IQ4_XS:
        case EZ_TYPE_IQ2_XXS:
        case EZ_TYPE_IQ2_XS:
        case EZ_TYPE_IQ2_S:
        case EZ_TYPE_IQ3_XXS:
        case EZ_TYPE_IQ3_S:
        case EZ_TYPE_IQ1_S:
            h = random_scale();
            memcpy(blk, &h, 2);
            break;
        case EZ_TYPE_Q4_1:
        case EZ_TYPE_Q5_1:
        case EZ_TYPE_Q4_K:
        case EZ_TYPE_Q5_K:
            h = random_scale();
            memcpy(blk, &h, 2);
            h = random_scale();
            memcpy(blk + 2, &h, 2);
            break;
        case EZ_TYPE_Q2_K:
            h = random_scale();
            memcpy(blk + 80, &h, 2);
            h = random_scale();
            memcpy(blk + 82, &h, 2);
            break;
        case EZ_TYPE_Q3_K:
        case EZ_TYPE_Q6_K:
        case EZ_TYPE_TQ1_0:
        case EZ_TYPE_TQ2_0:
            h = random_scale();
            memcpy(blk + tr->type_size - 2, &h, 2);
            break;
        case EZ_TYPE_IQ1_M: {
            /* the float16 d lives in the top nibbles of the four scale words */
            uint16_t sc[4];
            int k;
            h = random_scale();
            memcpy(sc, blk + 48, sizeof sc);
            for (k = 0; k < 4; k++) sc[k] = (uint16_t)((sc[k] & 0x0fff) | (((h >> (4 * k)) & 15) << 12));
            memcpy(blk + 48, sc, sizeof sc);
            break;
        }
        case EZ_TYPE_MXFP4:
            blk[0] = (uint8_t)(115 + rng_u64() % 8); /* 2^-13 .. 2^-6 */
            break;
        default:
            break;
        }
    }
}

/* ---- instruction sets this CPU can run ---- */

typedef struct {
    const char *name;
    const ez_type_kernels *(*table)(uint32_t type);
    uint32_t needs; /* EZ_CPU_* bits */
} isa_variant;

static const isa_variant g_isas[] = {
    {"avx2", ez_kernels_avx2, EZ_CPU_LEVEL_AVX2},
    {"avx512", ez_kernels_avx512, EZ_CPU_LEVEL_AVX512},
    {"neon", ez_kernels_neon, EZ_CPU_NEON},
    {"neon+dotprod", ez_kernels_neon_dotprod, EZ_CPU_NEON | EZ_CPU_DOTPROD},
};
#define N_ISAS (sizeof g_isas / sizeof g_isas[0])

static const ez_type_kernels *isa_kernels(size_t v, uint32_t type) {
    if ((ez_cpu_features() & g_isas[v].needs) != g_isas[v].needs) return NULL;
    return g_isas[v].table(type);
}

static const uint32_t g_kernel_types[] = {
    EZ_TYPE_F32,  EZ_TYPE_F16,  EZ_TYPE_BF16, EZ_TYPE_Q4_0,   EZ_TYPE_Q4_1,  EZ_TYPE_Q5_0,   EZ_TYPE_Q5_1,
    EZ_TYPE_Q8_0, EZ_TYPE_Q2_K, EZ_TYPE_Q3_K, EZ_TYPE_Q4_K,   EZ_TYPE_Q5_K,  EZ_TYPE_Q6_K,   EZ_TYPE_IQ4_NL,
    EZ_TYPE_IQ4_XS, EZ_TYPE_TQ1_0, EZ_TYPE_TQ2_0, EZ_TYPE_MXFP4, EZ_TYPE_IQ3_XXS, EZ_TYPE_IQ3_S,
    EZ_TYPE_IQ2_XXS, EZ_TYPE_IQ2_XS, EZ_TYPE_IQ2_S, EZ_TYPE_IQ1_S, EZ_TYPE_IQ1_M};
#define N_KERNEL_TYPES (sizeof g_kernel_types / sizeof g_kernel_types[0])

/* Worst fast-vs-reference dot error seen, per instruction set and type. */
static double g_worst[N_ISAS][EZ_TYPE_COUNT];

/* ---- helpers over one row ---- */

static int same_bits(const float *a, const float *b, int64_t n, int64_t *where) {
    int64_t i;
    for (i = 0; i < n; i++) {
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            *where = i;
            return 0;
        }
    }
    return 1;
}

/* An activation row in the dot's format and its float values. */
typedef struct {
    void *q;      /* quantized (or the floats themselves for F32) */
    float *value; /* what q stands for, element by element */
} activation;

static int make_activation(uint32_t vec_type, const float *x, int64_t n, activation *act) {
    const ez_type_kernels *ref = ez_kernels_ref(vec_type);
    int64_t i, j;
    act->q = malloc((size_t)ez_row_bytes(vec_type, (uint64_t)n) + 1);
    act->value = (float *)malloc((size_t)n * sizeof(float));
    if (!act->q || !act->value) return 0;
    if (vec_type == EZ_TYPE_F32) {
        memcpy(act->q, x, (size_t)n * sizeof(float));
        memcpy(act->value, x, (size_t)n * sizeof(float));
    } else if (vec_type == EZ_TYPE_Q8_0) {
        ref->quant(x, act->q, n);
        ez_kernels_ref(EZ_TYPE_Q8_0)->dequant(act->q, act->value, n);
    } else if (vec_type == EZ_TYPE_Q8_1) {
        const ez_block_q8_1 *b = (const ez_block_q8_1 *)act->q;
        ref->quant(x, act->q, n);
        for (i = 0; i < n / EZ_QK; i++)
            for (j = 0; j < EZ_QK; j++) act->value[i * EZ_QK + j] = b[i].d * (float)b[i].qs[j];
    } else {
        const ez_block_q8_k *b = (const ez_block_q8_k *)act->q;
        ref->quant(x, act->q, n);
        for (i = 0; i < n / EZ_QK_K; i++)
            for (j = 0; j < EZ_QK_K; j++) act->value[i * EZ_QK_K + j] = b[i].d * (float)b[i].qs[j];
    }
    return 1;
}

static void free_activation(activation *act) {
    free(act->q);
    free(act->value);
}

/* Dequantization of every instruction set against the reference, bit for
 * bit, for one row. */
static void check_dequant_row(uint32_t type, const void *row, int64_t n, const char *what) {
    const ez_type_kernels *ref = ez_kernels_ref(type);
    float *want = (float *)malloc((size_t)n * sizeof(float));
    float *got = (float *)malloc((size_t)n * sizeof(float));
    size_t v;
    int64_t at = 0;
    if (!want || !got) {
        CHECK_MSG(0, "out of memory");
        free(want);
        free(got);
        return;
    }
    ref->dequant(row, want, n);
    for (v = 0; v < N_ISAS; v++) {
        const ez_type_kernels *k = isa_kernels(v, type);
        if (!k) continue;
        memset(got, 0xa5, (size_t)n * sizeof(float));
        k->dequant(row, got, n);
        CHECK_MSG(same_bits(want, got, n, &at), "%s %s dequant %s n=%lld: element %lld is %a, reference %a",
              g_isas[v].name, ez_type_traits_of(type)->name, what, (long long)n, (long long)at, got[at],
              want[at]);
    }
    free(want);
    free(got);
}

/* For one weight row and one activation: reference dot against the exact
 * dot of the dequantized values, and every fast dot against the reference. */
static void check_dot_row(uint32_t type, const void *row, int64_t n, const float *x, const char *what) {
    const ez_type_traits *tr = ez_type_traits_of(type);
    const ez_type_kernels *ref = ez_kernels_ref(type);
    float *w = (float *)malloc((size_t)n * sizeof(float));
    activation act = {NULL, NULL};
    double exact = 0.0, mag = 0.0;
    float want, first_fast = 0.0f;
    const char *first_isa = NULL;
    size_t v;
    int64_t i;
    if (!w || !make_activation(tr->vec_dot_type, x, n, &act)) {
        CHECK_MSG(0, "out of memory");
        free(w);
        free_activation(&act);
        return;
    }
    ref->dequant(row, w, n);
    for (i = 0; i < n; i++) {
        exact += (double)w[i] * (double)act.value[i];
        mag += fabs((double)w[i] * (double)act.value[i]);
    }
    if (tr->vec_dot_type == EZ_TYPE_Q8_1) {
        /* The min term reads the block's s, d * sum(codes) rounded to
         * float16 on its own (ggml's format), not the sum of the values. */
        const ez_block_q8_1 *b = (const ez_block_q8_1 *)act.q;
        for (i = 0; i < n / EZ_QK; i++) {
            uint16_t mh;
            double sum = 0.0;
            int64_t j;
            float m;
            memcpy(&mh, (const uint8_t *)row + i * tr->type_size + 2, 2);
            m = ez_f16_to_f32(mh);
            for (j = 0; j < EZ_QK; j++) sum += (double)act.value[i * EZ_QK + j];
            exact += (double)m * ((double)b[i].s - sum);
        }
    }
    want = ref->dot(n, row, act.q);
    CHECK_MSG(fabs((double)want - exact) <= REF_DOT_TOL * mag + 1e-30,
          "%s ref dot %s n=%lld: %.9g, dequantized dot %.9g (rel %.3g)", tr->name, what, (long long)n, want,
          exact, fabs((double)want - exact) / mag);
    for (v = 0; v < N_ISAS; v++) {
        const ez_type_kernels *k = isa_kernels(v, type);
        double err;
        float got;
        if (!k) continue;
        got = k->dot(n, row, act.q);
        err = mag > 0 ? fabs((double)got - (double)want) / mag : fabs((double)got - (double)want);
        if (err > g_worst[v][type]) g_worst[v][type] = err;
        CHECK_MSG(err <= FAST_DOT_TOL, "%s %s dot %s n=%lld: %.9g, reference %.9g (rel %.3g)", g_isas[v].name,
              tr->name, what, (long long)n, got, want, err);
        /* Against Q8_K every kernel sums a super-block in integers and
         * scales it as the reference does: the same bits. */
        if (tr->vec_dot_type == EZ_TYPE_Q8_K)
            CHECK_MSG(memcmp(&got, &want, sizeof got) == 0, "%s %s dot %s n=%lld: %a, reference %a (not bit-identical)",
                      g_isas[v].name, tr->name, what, (long long)n, got, want);
        /* Fast levels against each other (avx512 against avx2), the same bound. */
        if (first_isa)
            CHECK_MSG(fabs((double)got - (double)first_fast) <= FAST_DOT_TOL * mag + 1e-30,
                      "%s %s dot %s n=%lld: %.9g, %s %.9g", g_isas[v].name, tr->name, what, (long long)n, got,
                      first_isa, first_fast);
        else
            first_isa = g_isas[v].name, first_fast = got;
    }
    free(w);
    free_activation(&act);
}

/* ---- tests ---- */

static void test_traits(void) {
    static const struct {
        uint32_t type;
        const char *name;
        uint32_t block, size;
    } known[] = {
        {EZ_TYPE_F32, "F32", 1, 4},       {EZ_TYPE_F16, "F16", 1, 2},        {EZ_TYPE_Q4_0, "Q4_0", 32, 18},
        {EZ_TYPE_Q4_1, "Q4_1", 32, 20},   {EZ_TYPE_Q5_0, "Q5_0", 32, 22},    {EZ_TYPE_Q5_1, "Q5_1", 32, 24},
        {EZ_TYPE_Q8_0, "Q8_0", 32, 34},   {EZ_TYPE_Q8_1, "Q8_1", 32, 40},    {EZ_TYPE_Q2_K, "Q2_K", 256, 84},
        {EZ_TYPE_Q3_K, "Q3_K", 256, 110}, {EZ_TYPE_Q4_K, "Q4_K", 256, 144},  {EZ_TYPE_Q5_K, "Q5_K", 256, 176},
        {EZ_TYPE_Q6_K, "Q6_K", 256, 210}, {EZ_TYPE_Q8_K, "Q8_K", 256, 292},  {16, "IQ2_XXS", 256, 66},
        {17, "IQ2_XS", 256, 74},          {18, "IQ3_XXS", 256, 98},          {19, "IQ1_S", 256, 50},
        {20, "IQ4_NL", 32, 18},           {21, "IQ3_S", 256, 110},           {22, "IQ2_S", 256, 82},
        {23, "IQ4_XS", 256, 136},         {EZ_TYPE_I8, "I8", 1, 1},          {EZ_TYPE_I16, "I16", 1, 2},
        {EZ_TYPE_I32, "I32", 1, 4},       {EZ_TYPE_I64, "I64", 1, 8},        {EZ_TYPE_F64, "F64", 1, 8},
        {29, "IQ1_M", 256, 56},           {EZ_TYPE_BF16, "BF16", 1, 2},      {34, "TQ1_0", 256, 54},
        {35, "TQ2_0", 256, 66},           {39, "MXFP4", 32, 17},             {40, "NVFP4", 64, 36},
        {41, "Q1_0", 128, 18},
    };
    static const uint32_t unknown[] = {4, 5, 31, 32, 33, 36, 37, 38, EZ_TYPE_COUNT, 1000, 0xffffffffu};
    size_t i;
    uint32_t t;
    for (i = 0; i < sizeof known / sizeof known[0]; i++) {
        const ez_type_traits *tr = ez_type_traits_of(known[i].type);
        CHECK_MSG(tr && strcmp(tr->name, known[i].name) == 0 && tr->block_size == known[i].block &&
                  tr->type_size == known[i].size,
              "traits of type %u (%s)", known[i].type, known[i].name);
    }
    for (i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        CHECK_MSG(ez_type_traits_of(unknown[i]) == NULL, "type %u should be unknown", unknown[i]);
        CHECK_MSG(ez_kernels(unknown[i]) == NULL && ez_kernels_ref(unknown[i]) == NULL, "no kernels for type %u",
              unknown[i]);
        CHECK_MSG(ez_row_bytes(unknown[i], 256) == 0, "row bytes of unknown type %u", unknown[i]);
    }
    for (t = 0; t < EZ_TYPE_COUNT; t++) {
        const ez_type_traits *tr = ez_type_traits_of(t);
        int listed = 0;
        for (i = 0; i < N_KERNEL_TYPES; i++) listed |= g_kernel_types[i] == t;
        if (!tr) continue;
        CHECK_MSG(tr->has_kernels == listed, "%s has_kernels is %d", tr->name, tr->has_kernels);
        CHECK_MSG(ez_kernels(t) != NULL && ez_kernels_ref(t) != NULL, "%s has a kernel table", tr->name);
        CHECK_MSG(!listed || (ez_kernels(t)->dequant && ez_kernels(t)->dot && ez_kernels_ref(t)->dequant &&
                          ez_kernels_ref(t)->dot),
              "%s kernels are set", tr->name);
    }
    CHECK_MSG(ez_type_traits_of(EZ_TYPE_Q4_K)->vec_dot_type == EZ_TYPE_Q8_K, "Q4_K dots with Q8_K");
    CHECK_MSG(ez_type_traits_of(EZ_TYPE_Q5_0)->vec_dot_type == EZ_TYPE_Q8_0, "Q5_0 dots with Q8_0");
    CHECK_MSG(ez_type_traits_of(EZ_TYPE_BF16)->vec_dot_type == EZ_TYPE_F32, "BF16 dots with F32");
    CHECK_MSG(ez_kernels(EZ_TYPE_Q8_0)->quant && ez_kernels(EZ_TYPE_Q8_K)->quant, "activation quantizers set");
    CHECK_MSG(ez_kernels(EZ_TYPE_Q4_K)->quant == NULL, "no quantizer for weight-only types");

    CHECK_MSG(ez_row_bytes(EZ_TYPE_Q4_K, 2048) == 8 * 144, "Q4_K row of 2048");
    CHECK_MSG(ez_row_bytes(EZ_TYPE_Q8_0, 640) == 20 * 34, "Q8_0 row of 640");
    CHECK_MSG(ez_row_bytes(EZ_TYPE_F32, 7) == 28, "F32 row of 7");
    CHECK_MSG(ez_row_bytes(EZ_TYPE_Q4_K, 640) == 0, "Q4_K row of 640 is not whole blocks");
    CHECK_MSG(ez_row_bytes(EZ_TYPE_Q8_0, 33) == 0, "Q8_0 row of 33 is not whole blocks");
    CHECK_MSG(ez_row_bytes(EZ_TYPE_F64, UINT64_MAX) == 0, "F64 row of 2^64-1 overflows");
    CHECK_MSG(ez_row_bytes(EZ_TYPE_Q8_K, UINT64_MAX - (UINT64_MAX % 256)) == 0, "Q8_K huge row overflows");
    CHECK_MSG(ez_row_bytes(EZ_TYPE_Q6_K, UINT64_MAX - (UINT64_MAX % 256)) == (UINT64_MAX / 256) * 210,
          "Q6_K huge row still fits (210 bytes per 256 elements)");
    CHECK_MSG(ez_row_bytes(EZ_TYPE_Q4_0, (UINT64_MAX / 18) / 32 * 32) == (UINT64_MAX / 18) / 32 * 18,
          "Q4_0 largest row that fits");
    CHECK_MSG(ez_row_bytes(EZ_TYPE_F32, 0) == 0, "empty row");
}

static uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Every half widens exactly and narrows back to itself; the midpoint
 * between two neighbouring halves goes to the even one, and the floats just
 * either side of it to the nearer one. */
static void test_half_conversions(void) {
    uint32_t h;
    int bad_round_trip = 0, bad_tie = 0, bad_near = 0;
    for (h = 0; h < 0x10000; h++) {
        const float f = ez_f16_to_f32((uint16_t)h);
        const uint32_t e = (h >> 10) & 0x1f;
        if (e == 0x1f && (h & 0x3ff)) {
            /* NaN: payload shifted into the float mantissa, signalling kept */
            bad_round_trip += float_bits(f) != (((h & 0x8000u) << 16) | 0x7f800000u | ((h & 0x3ffu) << 13));
            continue;
        }
        bad_round_trip += ez_f32_to_f16(f) != h;
        if ((h & 0x7fff) < 0x7bff) {
            const float next = ez_f16_to_f32((uint16_t)(h + 1));
            const float mid = (float)(((double)f + (double)next) / 2);
            const uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
            bad_tie += ez_f32_to_f16(mid) != even;
            bad_near += ez_f32_to_f16(nextafterf(mid, 0.0f)) != h;
            bad_near += ez_f32_to_f16(nextafterf(mid, (h & 0x8000) ? -1e9f : 1e9f)) != (uint16_t)(h + 1);
        }
    }
    CHECK_MSG(bad_round_trip == 0, "%d halves do not round-trip", bad_round_trip);
    CHECK_MSG(bad_tie == 0, "%d half midpoints do not round to even", bad_tie);
    CHECK_MSG(bad_near == 0, "%d near-midpoint floats round the wrong way", bad_near);
    CHECK_MSG(ez_f32_to_f16(65520.0f) == 0x7c00 && ez_f32_to_f16(65519.99f) == 0x7bff, "overflow to inf at 65520");
    CHECK_MSG(ez_f32_to_f16(-1e30f) == 0xfc00, "-1e30 narrows to -inf");
    CHECK_MSG(ez_f32_to_f16(ldexpf(1.0f, -25)) == 0 && ez_f32_to_f16(ldexpf(1.5f, -25)) == 1, "smallest subnormal");
    CHECK_MSG((ez_f32_to_f16(bits_float(0x7f800001u)) & 0x7e00) == 0x7e00, "float NaN narrows to a quiet half NaN");
    CHECK_MSG(float_bits(ez_bf16_to_f32(0x3f80)) == 0x3f800000u && float_bits(ez_bf16_to_f32(0xff81)) == 0xff810000u,
          "bfloat16 widens by a 16-bit shift");
}

/* ggml's reference quantizers: Q8_0 rounds half away from zero with d =
 * amax / 127; Q8_K rounds half to even with iscale = -127 / max. */
static void test_activation_quantizers(void) {
    float x[EZ_QK_K];
    ez_block_q8_0 q0[EZ_QK_K / EZ_QK];
    ez_block_q8_k qk;
    const ez_type_kernels *k0 = ez_kernels_ref(EZ_TYPE_Q8_0), *kk = ez_kernels_ref(EZ_TYPE_Q8_K);
    int j, bad;

    for (j = 0; j < EZ_QK; j++) x[j] = 0.0f;
    x[0] = 127.0f, x[1] = 0.5f, x[2] = -0.5f, x[3] = 2.5f, x[4] = -1.5f;
    k0->quant(x, q0, EZ_QK);
    CHECK_MSG(q0[0].d == 0x3c00 && q0[0].qs[0] == 127 && q0[0].qs[1] == 1 && q0[0].qs[2] == -1 && q0[0].qs[3] == 3 &&
              q0[0].qs[4] == -2 && q0[0].qs[5] == 0,
          "Q8_0 rounds half away from zero (d=%04x q=%d %d %d %d %d)", q0[0].d, q0[0].qs[0], q0[0].qs[1],
          q0[0].qs[2], q0[0].qs[3], q0[0].qs[4]);

    for (j = 0; j < EZ_QK_K; j++) x[j] = 0.0f;
    x[0] = -127.0f, x[1] = 0.5f, x[2] = 1.5f, x[3] = 2.5f, x[4] = -0.5f, x[17] = 100.0f;
    kk->quant(x, &qk, EZ_QK_K);
    /* iscale = -127 / -127 = 1 */
    CHECK_MSG(qk.d == 1.0f && qk.qs[0] == -127 && qk.qs[1] == 0 && qk.qs[2] == 2 && qk.qs[3] == 2 && qk.qs[4] == 0 &&
              qk.bsums[0] == -123 && qk.bsums[1] == 100,
          "Q8_K rounds half to even (d=%g q=%d %d %d %d %d bsums %d %d)", qk.d, qk.qs[0], qk.qs[1], qk.qs[2],
          qk.qs[3], qk.qs[4], qk.bsums[0], qk.bsums[1]);

    for (j = 0; j < EZ_QK_K; j++) x[j] = 0.0f;
    x[9] = 3.0f, x[200] = -3.0f;
    kk->quant(x, &qk, EZ_QK_K);
    CHECK_MSG(qk.qs[9] == -127 && qk.qs[200] == 127 && qk.d < 0, "Q8_K takes the sign of the first largest value");

    for (j = 0; j < EZ_QK_K; j++) x[j] = 0.0f;
    memset(&qk, 0x55, sizeof qk);
    kk->quant(x, &qk, EZ_QK_K);
    bad = qk.d != 0.0f;
    for (j = 0; j < EZ_QK_K; j++) bad |= qk.qs[j] != 0;
    for (j = 0; j < EZ_QK_K / 16; j++) bad |= qk.bsums[j] != 0;
    CHECK_MSG(!bad, "Q8_K of zeros is all zero, bsums included");

    fill_activations(x, EZ_QK_K);
    k0->quant(x, q0, EZ_QK_K);
    kk->quant(x, &qk, EZ_QK_K);
    bad = 0;
    for (j = 0; j < EZ_QK_K; j++) {
        const float d0 = ez_f16_to_f32(q0[j / EZ_QK].d);
        /* Q8_0 quantizes with the float d but stores it as float16: up to
         * 127 * 2^-11 of a step more */
        bad += fabsf(d0 * (float)q0[j / EZ_QK].qs[j % EZ_QK] - x[j]) > 0.57f * d0;
        bad += fabsf(qk.d * (float)qk.qs[j] - x[j]) > 0.5f * fabsf(qk.d) * 1.01f;
        bad += qk.qs[j] < -127 || q0[j / EZ_QK].qs[j % EZ_QK] < -127;
    }
    for (j = 0; j < EZ_QK_K / 16; j++) {
        int s = 0, l;
        for (l = 0; l < 16; l++) s += qk.qs[16 * j + l];
        bad += s != qk.bsums[j];
    }
    CHECK_MSG(bad == 0, "%d quantized activations off by more than half a step, or bad bsums", bad);
}

/* Row lengths per block size: one block, a few, the Gemma widths, and odd
 * block counts. */
static int row_lengths(uint32_t block, int64_t out[8]) {
    if (block == 1) {
        static const int64_t v[] = {1, 7, 31, 33, 640, 2049};
        memcpy(out, v, sizeof v);
        return 6;
    }
    if (block == EZ_QK) {
        static const int64_t v[] = {32, 96, 640, 2048, 2080};
        memcpy(out, v, sizeof v);
        return 5;
    }
    {
        static const int64_t v[] = {256, 768, 2048, 2304};
        memcpy(out, v, sizeof v);
        return 4;
    }
}

static void test_random_rows(void) {
    size_t t;
    for (t = 0; t < N_KERNEL_TYPES; t++) {
        const uint32_t type = g_kernel_types[t];
        const ez_type_traits *tr = ez_type_traits_of(type);
        int64_t lens[8];
        int n_lens = row_lengths(tr->block_size, lens), l, rep;
        for (l = 0; l < n_lens; l++) {
            const int64_t n = lens[l];
            const size_t bytes = (size_t)ez_row_bytes(type, (uint64_t)n);
            /* rows start 4 bytes into the buffer: aligned for every block
             * struct, but not for any vector register */
            uint8_t *buf = (uint8_t *)malloc(bytes + 4);
            float *x = (float *)malloc((size_t)n * sizeof(float));
            if (!buf || !x) {
                CHECK_MSG(0, "out of memory");
                free(buf);
                free(x);
                return;
            }
            for (rep = 0; rep < 4; rep++) {
                uint8_t *row = buf + 4;
                /* random bits everywhere: NaN, inf and subnormal scales too */
                fill_bytes(row, bytes);
                check_dequant_row(type, row, n, "random bits");
                fill_weights(type, row, n);
                check_dequant_row(type, row, n, "sane scales");
                fill_activations(x, n);
                check_dot_row(type, row, n, x, "random row");
            }
            free(buf);
            free(x);
        }
    }
}

/* When the CPU has a fast level and it is not forced off, ez_kernels()
 * hands out the fast table; under ELIZA_FORCE_SCALAR=1, the reference. */
static void test_dispatch(void) {
    const ez_simd_level level = ez_simd_level_active();
    const ez_type_kernels *k = ez_kernels(EZ_TYPE_Q4_K);
    if (ez_force_scalar() || level == EZ_SIMD_SCALAR) {
        CHECK_MSG(k == ez_kernels_ref(EZ_TYPE_Q4_K), "scalar level uses the reference kernels");
    } else {
        CHECK_MSG(k != ez_kernels_ref(EZ_TYPE_Q4_K), "level %s uses fast kernels", ez_simd_level_name(level));
    }
    if (level == EZ_SIMD_AVX2) CHECK_MSG(k == ez_kernels_avx2(EZ_TYPE_Q4_K), "avx2 level uses the AVX2 table");
    if (level == EZ_SIMD_AVX512) CHECK_MSG(k == ez_kernels_avx512(EZ_TYPE_Q4_K), "avx512 level uses the AVX-512 table");
    printf("simd level: %s%s\n", ez_simd_level_name(level), ez_force_scalar() ? " (forced)" : "");
}

/* Rows 0, middle and last of every tensor with kernels in a real file. */
static void test_gguf_file(const char *path) {
    ez_gguf *g = NULL;
    int32_t rc = ez_gguf_open(path, &g);
    uint64_t t, n_checked = 0;
    CHECK_MSG(rc == ELIZA_OK, "ez_gguf_open(%s) = %d", path, rc);
    if (rc != ELIZA_OK) return;
    for (t = 0; t < g->n_tensors; t++) {
        const ez_gguf_tensor *ten = &g->tensors[t];
        const ez_type_traits *tr = ez_type_traits_of(ten->type);
        const int64_t n = (int64_t)ten->ne[0];
        uint64_t rows, row_bytes, picks[3];
        float *x;
        int p;
        if (!tr || !tr->has_kernels) continue;
        row_bytes = ez_row_bytes(ten->type, ten->ne[0]);
        rows = ten->n_elements / ten->ne[0];
        picks[0] = 0, picks[1] = rows / 2, picks[2] = rows - 1;
        x = (float *)malloc((size_t)n * sizeof(float));
        if (!x) {
            CHECK_MSG(0, "out of memory");
            break;
        }
        for (p = 0; p < 3; p++) {
            const uint8_t *row = ten->data + picks[p] * row_bytes;
            if (p > 0 && picks[p] == picks[p - 1]) continue;
            check_dequant_row(ten->type, row, n, ten->name);
            if (n % ez_type_traits_of(tr->vec_dot_type)->block_size == 0) {
                fill_activations(x, n);
                check_dot_row(ten->type, row, n, x, ten->name);
            }
        }
        free(x);
        n_checked++;
    }
    printf("%s: %llu tensors with kernels checked\n", path, (unsigned long long)n_checked);
    CHECK_MSG(n_checked > 0, "%s has no tensor with kernels", path);
    ez_gguf_close(g);
}

/* Every instruction set's activation quantizers give the reference's bytes:
 * random rows at scales from 1e-30 to 1e30, zero blocks, ties between +a
 * and -a for the largest magnitude, and values on the rounding midpoints. */
static void test_activation_quantizers_isas(void) {
    enum { NB = 9, N = NB * EZ_QK_K };
    static const uint32_t types[] = {EZ_TYPE_Q8_0, EZ_TYPE_Q8_K};
    static float x[N];
    static uint8_t want[NB * sizeof(ez_block_q8_k)], got[NB * sizeof(ez_block_q8_k)];
    for (int round = 0; round < 40; round++) {
        const float scale = powf(10.0f, (float)(round % 13) * 5.0f - 30.0f);
        for (int j = 0; j < N; j++) x[j] = scale * rng_float();
        for (int j = 0; j < EZ_QK_K; j++) x[EZ_QK_K + j] = 0.0f;
        x[2 * EZ_QK_K + 7] = 2.0f * scale, x[2 * EZ_QK_K + 100] = -2.0f * scale;
        x[3 * EZ_QK_K + 5] = -2.0f * scale, x[3 * EZ_QK_K + 200] = 2.0f * scale;
        x[4 * EZ_QK_K] = 127.0f;
        for (int j = 1; j < EZ_QK_K; j++) x[4 * EZ_QK_K + j] = (float)(j % 255 - 127) * 0.5f;
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            const uint64_t bytes = ez_row_bytes(types[t], N);
            ez_kernels_ref(types[t])->quant(x, want, N);
            for (size_t v = 0; v < N_ISAS; v++) {
                const ez_type_kernels *k = isa_kernels(v, types[t]);
                if (!k || !k->quant) continue;
                memset(got, 0x55, sizeof got);
                k->quant(x, got, N);
                CHECK_MSG(memcmp(want, got, (size_t)bytes) == 0, "%s %s quantizer equals the reference (round %d)",
                          g_isas[v].name, ez_type_traits_of(types[t])->name, round);
            }
        }
    }
}

int main(void) {
    const char *gguf_path = getenv("ELIZA_TEST_GGUF");
    size_t v, t;
    SKIP_IF_PINNED_LEVEL_MISSING();
    test_traits();
    test_half_conversions();
    test_activation_quantizers();
    test_activation_quantizers_isas();
    test_dispatch();
    test_random_rows();
    if (gguf_path && *gguf_path) test_gguf_file(gguf_path);
    for (v = 0; v < N_ISAS; v++) {
        if (!isa_kernels(v, EZ_TYPE_F32) && !isa_kernels(v, EZ_TYPE_Q4_K)) continue;
        printf("%s: worst dot error vs reference (relative to sum |w*x|):", g_isas[v].name);
        for (t = 0; t < N_KERNEL_TYPES; t++) {
            const uint32_t type = g_kernel_types[t];
            if (isa_kernels(v, type)) printf(" %s %.2g", ez_type_traits_of(type)->name, g_worst[v][type]);
        }
        printf("\n");
    }
    printf("test_quant: %d passed, %d failed\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
}
