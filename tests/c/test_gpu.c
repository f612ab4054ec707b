/* The Vulkan backend against the CPU scalar reference: every matrix-vector
 * kernel (each weight type, matrices split over several bindings), RMSNorm,
 * rope (both layouts), GeGLU / SwiGLU, residual add / copy, softcap,
 * softmax, argmax, single-token
 * attention over F32 and F16 caches; a command buffer recorded once and
 * replayed with new inputs, its timestamps; device choice, the denylist and
 * the error paths. The validation layer is on and any error it reports
 * fails the test (and a deliberate invalid call shows the hook is live).
 *
 * Runs on any Vulkan device, CPU ones (lavapipe) included; exits 77 (ctest
 * SKIP) when the build has no GPU backend or the machine no Vulkan device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(ELIZA_VULKAN)
int main(void) {
    printf("test_gpu: SKIPPED (this build has no Vulkan backend)\n");
    return 77;
}
#else

#include "check.h"
#include "core/error.h"
#include "core/quant.h"
#include "gpu/gpu.h"
#include "gpu/vk_impl.h"
#include "llm/ops.h"

static uint64_t g_rng = 12345;
static uint32_t rnd_u32(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 32);
}
static float frand(void) { return (float)((double)rnd_u32() / 4294967296.0 * 2.0 - 1.0); }
static void fill(float *v, size_t n, float amp) {
    for (size_t i = 0; i < n; i++) v[i] = amp * frand();
}

static ez_gpu *g_gpu;
/* A second context held to the end, never closed, so the driver stays
 * loaded until exit: libraries a driver pulls in (ICU under lavapipe's
 * LLVM) keep one-time allocations in their globals, which LeakSanitizer
 * would report as leaks once the loader unloaded them. */
static ez_gpu *g_keep_driver_loaded;
/* Small enough that the test's larger matrices take several bindings. */
#define TEST_BINDING_BYTES 32768
/* A context with a wider binding limit, for the batched ops' activations
 * (64 tokens of 256 floats already pass the one above); while a test runs
 * on it, it is g_gpu. */
static ez_gpu *g_wide;
#define WIDE_BINDING_BYTES (256 * 1024)
/* A context like g_gpu whose matvecs keep the shared-memory reduction
 * (no_subgroup), where g_gpu's use subgroup arithmetic. */
static ez_gpu *g_tree;

static ez_gpu_buf *host_buf(size_t n_floats) {
    ez_gpu_buf *b = NULL;
    CHECK_RC(ez_gpu_buf_create(g_gpu, n_floats * sizeof(float), EZ_GPU_HOST, &b), ELIZA_OK);
    return b;
}

static ez_gpu_buf *device_buf_from(const float *v, size_t n) {
    ez_gpu_buf *b = NULL;
    CHECK_RC(ez_gpu_buf_create(g_gpu, n * sizeof(float), EZ_GPU_DEVICE_LOCAL, &b), ELIZA_OK);
    if (b) CHECK_RC(ez_gpu_upload(b, 0, v, n * sizeof(float)), ELIZA_OK);
    return b;
}

/* Runs a command buffer that holds one recorded op. */
static int32_t run_one(ez_gpu_cmd *c) {
    int32_t rc = ez_gpu_cmd_end(c);
    if (rc == ELIZA_OK) rc = ez_gpu_cmd_run(c);
    return rc;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double e = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - (double)b[i]);
        e = d > e || d != d ? d : e;
    }
    return e;
}

/* ---- matrix-vector products --------------------------------------------------------- */

/* Random rows of `type`: random bytes with every F16 scale replaced by a
 * modest one (random bits would make infinities and NaNs). */
static void random_rows(uint32_t type, int64_t rows, int64_t cols, uint8_t *dst) {
    const ez_type_traits *tr = ez_type_traits_of(type);
    const uint64_t row_bytes = ez_row_bytes(type, (uint64_t)cols);
    const int64_t nb = cols / tr->block_size;
    for (uint64_t i = 0; i < (uint64_t)rows * row_bytes; i++) dst[i] = (uint8_t)rnd_u32();
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = dst + (uint64_t)r * row_bytes;
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *blk = row + (uint64_t)b * tr->type_size;
            const uint16_t d = ez_f32_to_f16(0.002f + 0.02f * fabsf(frand()));
            const uint16_t dmin = ez_f32_to_f16(0.001f + 0.01f * fabsf(frand()));
            switch (type) {
            case EZ_TYPE_F32: {
                const float v = frand();
                memcpy(blk, &v, 4);
                break;
            }
            case EZ_TYPE_F16: {
                const uint16_t h = ez_f32_to_f16(frand());
                memcpy(blk, &h, 2);
                break;
            }
            case EZ_TYPE_BF16: {
                const float v = frand();
                uint32_t bits;
                memcpy(&bits, &v, 4);
                blk[0] = (uint8_t)(bits >> 16);
                blk[1] = (uint8_t)(bits >> 24);
                break;
            }
            case EZ_TYPE_Q6_K: memcpy(blk + 208, &d, 2); break;
            case EZ_TYPE_Q4_1:
            case EZ_TYPE_Q4_K:
            case EZ_TYPE_Q5_K:
                memcpy(blk, &d, 2);
                memcpy(blk + 2, &dmin, 2);
                break;
            default: memcpy(blk, &d, 2); break;
            }
        }
    }
}

/* ref[r] = the double sum over the scalar dequantizer's row r times x;
 * returns the largest sum of |w x| of a row (the error's scale). */
static double ref_rows(uint32_t type, int64_t rows, int64_t cols, const uint8_t *w, const float *x, float *ref) {
    const uint64_t row_bytes = ez_row_bytes(type, (uint64_t)cols);
    float *wrow = (float *)malloc((size_t)cols * sizeof(float));
    double tol = 0.0;
    CHECK(wrow != NULL);
    for (int64_t r = 0; r < rows && wrow; r++) {
        double sum = 0.0, mag = 0.0;
        ez_kernels_ref(type)->dequant(w + (uint64_t)r * row_bytes, wrow, cols);
        for (int64_t i = 0; i < cols; i++) {
            sum += (double)wrow[i] * (double)x[i];
            mag += fabs((double)wrow[i] * (double)x[i]);
        }
        ref[r] = (float)sum;
        tol = mag > tol ? mag : tol;
    }
    free(wrow);
    return tol;
}

/* Rows per binding of a matrix upload: whole pairs of rows where two fit. */
static int64_t rows_per_binding(uint64_t row_bytes) {
    const int64_t per = (int64_t)((g_gpu == g_wide ? WIDE_BINDING_BYTES : TEST_BINDING_BYTES) / row_bytes);
    return per > 1 ? per & ~(int64_t)1 : per;
}

/* Runs a recorded matvec into yb and checks y[y_off ..] against ref (within
 * 2e-6 of tol, the sums' scale) and the y_off floats before it untouched
 * (zero); returns the largest difference. */
static double run_matvec_check(ez_gpu_cmd *c, ez_gpu_buf *yb, float *got, uint32_t y_off, const float *ref,
                               int64_t rows, double tol, uint32_t type, int64_t cols, const char *what) {
    double worst;
    CHECK_RC(run_one(c), ELIZA_OK);
    CHECK_RC(ez_gpu_download(yb, 0, got, (size_t)(rows + y_off) * sizeof(float)), ELIZA_OK);
    worst = max_abs_diff(got + y_off, ref, (size_t)rows);
    CHECK_MSG(worst <= 2e-6 * tol + 1e-6, "matvec %s%s [%lld x %lld]: max |gpu - ref| %.3g (scale %.3g)",
              ez_type_traits_of(type)->name, what, (long long)rows, (long long)cols, worst, tol);
    CHECK(got[0] == 0.0f && got[y_off - 1] == 0.0f);
    return worst;
}

/* One weight type at one shape: the GPU's product against the double sum
 * over the scalar dequantizer's rows, x at x_off (a multiple of 4 takes the
 * shader's vec4 loads), y at an odd offset (at x_off 3, part of it from a
 * step word: ez_gpu_op_matvec_at). */
static void check_matvec(uint32_t type, int64_t rows, int64_t cols, uint32_t x_off) {
    const uint32_t y_off = 5;
    const uint64_t row_bytes = ez_row_bytes(type, (uint64_t)cols);
    float *x = (float *)malloc((size_t)(cols + x_off) * sizeof(float));
    float *ref = (float *)malloc((size_t)rows * sizeof(float));
    float *got = (float *)calloc((size_t)(rows + y_off), sizeof(float));
    uint8_t *w = (uint8_t *)malloc((size_t)(rows * (int64_t)row_bytes));
    ez_gpu_buf *xb = host_buf((size_t)(cols + x_off)), *yb = host_buf((size_t)(rows + y_off)), *sb = host_buf(2);
    const uint32_t words[2] = {7, y_off - 2};
    ez_gpu_matrix m;
    ez_gpu_cmd *c = NULL;
    double worst = 0.0, tol_worst = 0.0;
    CHECK(x && ref && got && w && xb && yb && sb);
    if (sb) CHECK_RC(ez_gpu_upload(sb, 0, words, sizeof words), ELIZA_OK);
    if (!x || !ref || !got || !w || !xb || !yb) goto done;
    fill(x, (size_t)(cols + x_off), 1.0f);
    CHECK_RC(ez_gpu_upload(xb, 0, x, (size_t)(cols + x_off) * sizeof(float)), ELIZA_OK);
    random_rows(type, rows, cols, w);
    tol_worst = ref_rows(type, rows, cols, w, x + x_off, ref);
    CHECK_RC(ez_gpu_matrix_upload(g_gpu, type, rows, cols, w, &m), ELIZA_OK);
    CHECK_MSG(m.n_parts == (int)((rows + rows_per_binding(row_bytes) - 1) / rows_per_binding(row_bytes)),
              "%s: %d parts", ez_type_traits_of(type)->name, m.n_parts);
    for (int i = 0; i < m.n_parts && rows_per_binding(row_bytes) > 1; i++) CHECK(m.part_row0[i] % 2 == 0);
    CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
    if (c && m.n_parts) {
        CHECK_RC(ez_gpu_upload(yb, 0, got, (size_t)(rows + y_off) * sizeof(float)), ELIZA_OK);
        if (x_off == 3 && sb) {
            /* y_off as 2 in the push constants and 3 from a step word. */
            CHECK_RC(ez_gpu_op_matvec_at(c, &m, xb, x_off, yb, 2, NULL, 1), ELIZA_E_INVALID_ARG);
            CHECK_RC(ez_gpu_op_matvec_at(c, &m, xb, x_off, yb, 2, sb, 1000), ELIZA_E_INVALID_ARG);
            CHECK_RC(ez_gpu_op_matvec_at(c, &m, xb, x_off, yb, 2, sb, 1), ELIZA_OK);
        } else {
            CHECK_RC(ez_gpu_op_matvec(c, &m, xb, x_off, yb, y_off), ELIZA_OK);
        }
        worst = run_matvec_check(c, yb, got, y_off, ref, rows, tol_worst, type, cols, "");
    }
    printf("  matvec %-5s [%lld x %lld] in %d binding(s), x at %u: max |gpu - ref| %.3g\n",
           ez_type_traits_of(type)->name, (long long)rows, (long long)cols, m.n_parts, x_off, worst);
    ez_gpu_cmd_free(c);
    ez_gpu_matrix_free(&m);
done:
    ez_gpu_buf_free(xb);
    ez_gpu_buf_free(yb);
    ez_gpu_buf_free(sb);
    free(x);
    free(ref);
    free(got);
    free(w);
}

/* A query's or key's matvec with its rope (ez_gpu_op_matvec_rope): heads of
 * 64 rows, the first n_rot dims of each rotated by random angles of pair
 * d / 2 at cs_off, against the double sums rotated on the host; with a step
 * buffer, y_off 2 grows by its word 1 (the key's cache row). */
static void check_matvec_rope(uint32_t type, int64_t rows, int64_t cols, uint32_t n_rot, int at_step) {
    enum { HD = 64, CS_OFF = 6 };
    const uint32_t y_off = 5, words[2] = {9, y_off - 2};
    const uint64_t row_bytes = ez_row_bytes(type, (uint64_t)cols);
    float *x = (float *)malloc((size_t)cols * sizeof(float)), *ref = (float *)malloc((size_t)rows * sizeof(float));
    float *got = (float *)calloc((size_t)(rows + y_off), sizeof(float)), cs[CS_OFF + HD];
    uint8_t *w = (uint8_t *)malloc((size_t)(rows * (int64_t)row_bytes));
    ez_gpu_buf *xb = host_buf((size_t)cols), *yb = host_buf((size_t)(rows + y_off)), *sb = host_buf(2);
    ez_gpu_buf *ab = host_buf(CS_OFF + HD);
    ez_gpu_matrix m;
    ez_gpu_cmd *c = NULL;
    double worst = 0.0, tol = 0.0;
    memset(&m, 0, sizeof m);
    CHECK(x && ref && got && w && xb && yb && sb && ab);
    if (!x || !ref || !got || !w || !xb || !yb || !sb || !ab) goto done;
    fill(x, (size_t)cols, 1.0f);
    for (int i = 0; i < CS_OFF + HD; i += 2) {
        const double th = 3.0 * frand();
        cs[i] = (float)cos(th);
        cs[i + 1] = (float)sin(th);
    }
    CHECK_RC(ez_gpu_upload(xb, 0, x, (size_t)cols * sizeof(float)), ELIZA_OK);
    CHECK_RC(ez_gpu_upload(sb, 0, words, sizeof words), ELIZA_OK);
    CHECK_RC(ez_gpu_upload(ab, 0, cs, sizeof cs), ELIZA_OK);
    CHECK_RC(ez_gpu_upload(yb, 0, got, (size_t)(rows + y_off) * sizeof(float)), ELIZA_OK);
    random_rows(type, rows, cols, w);
    tol = ref_rows(type, rows, cols, w, x, ref);
    for (int64_t r = 0; r < rows; r += 2) {
        const uint32_t d = (uint32_t)(r % HD);
        const double a = ref[r], b = ref[r + 1], co = cs[CS_OFF + d], si = cs[CS_OFF + d + 1];
        if (d >= n_rot) continue;
        ref[r] = (float)(a * co - b * si);
        ref[r + 1] = (float)(a * si + b * co);
    }
    CHECK_RC(ez_gpu_matrix_upload(g_gpu, type, rows, cols, w, &m), ELIZA_OK);
    CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
    if (c && m.n_parts) {
        const ez_gpu_mv_rope rope = {HD, n_rot, CS_OFF, ab}, odd = {HD, n_rot + 1, CS_OFF, ab};
        const ez_gpu_mv_rope past = {HD, n_rot, HD, ab};
        CHECK_RC(ez_gpu_op_matvec_rope(c, &m, xb, 0, yb, y_off, NULL, 0, NULL), ELIZA_E_INVALID_ARG);
        CHECK_RC(ez_gpu_op_matvec_rope(c, &m, xb, 0, yb, y_off, NULL, 0, &odd), ELIZA_E_INVALID_ARG);
        CHECK_RC(ez_gpu_op_matvec_rope(c, &m, xb, 0, yb, y_off, NULL, 0, &past), ELIZA_E_INVALID_ARG);
        CHECK_RC(at_step ? ez_gpu_op_matvec_rope(c, &m, xb, 0, yb, 2, sb, 1, &rope)
                         : ez_gpu_op_matvec_rope(c, &m, xb, 0, yb, y_off, NULL, 0, &rope),
                 ELIZA_OK);
        worst = run_matvec_check(c, yb, got, y_off, ref, rows, tol, type, cols, " with rope");
    }
    printf("  matvec %-5s with rope [%lld x %lld] in %d binding(s), %u of %d dims rotated%s: max |gpu - ref| %.3g\n",
           ez_type_traits_of(type)->name, (long long)rows, (long long)cols, m.n_parts, n_rot, HD,
           at_step ? ", at a step word" : "", worst);
    ez_gpu_cmd_free(c);
done:
    ez_gpu_matrix_free(&m);
    ez_gpu_buf_free(xb);
    ez_gpu_buf_free(yb);
    ez_gpu_buf_free(sb);
    ez_gpu_buf_free(ab);
    free(x);
    free(ref);
    free(got);
    free(w);
}

/* The gated matvec of a paired matrix (gate's and up's rows interleaved):
 * act(gate . x) * (up . x) against the double sums over the scalar
 * dequantizer's rows and the CPU's activation, on g_gpu's binding limit (so
 * the larger shapes split the pair over several bindings, at even rows). */
static void check_matvec_glu(uint32_t type, int64_t rows, int64_t cols, uint32_t x_off, ez_gpu_glu act) {
    const uint32_t y_off = 3;
    const uint64_t row_bytes = ez_row_bytes(type, (uint64_t)cols);
    float *x = (float *)malloc((size_t)(cols + x_off) * sizeof(float));
    float *gate = (float *)malloc((size_t)rows * sizeof(float));
    float *up = (float *)malloc((size_t)rows * sizeof(float));
    float *got = (float *)calloc((size_t)(rows + y_off), sizeof(float));
    uint8_t *w = (uint8_t *)malloc((size_t)(2 * rows * (int64_t)row_bytes));
    ez_gpu_buf *xb = host_buf((size_t)(cols + x_off)), *yb = host_buf((size_t)(rows + y_off));
    ez_gpu_matrix m;
    ez_gpu_cmd *c = NULL;
    double worst = 0.0, tol = 0.0;
    memset(&m, 0, sizeof m);
    CHECK(x && gate && up && got && w && xb && yb);
    if (!x || !gate || !up || !got || !w || !xb || !yb) goto done;
    fill(x, (size_t)(cols + x_off), 1.0f);
    CHECK_RC(ez_gpu_upload(xb, 0, x, (size_t)(cols + x_off) * sizeof(float)), ELIZA_OK);
    random_rows(type, 2 * rows, cols, w);
    tol = ref_rows(type, rows, cols, w, x + x_off, gate);
    tol = fmax(tol, ref_rows(type, rows, cols, w + (uint64_t)rows * row_bytes, x + x_off, up));
    if (act == EZ_GPU_GELU_TANH) {
        ez_llm_ops_ref()->gelu_tanh_mul(gate, up, rows);
    } else {
        ez_llm_ops_ref()->silu_mul(gate, up, rows);
    }
    CHECK_RC(ez_gpu_matrix_upload_pair(g_gpu, type, rows, cols, w, w + (uint64_t)rows * row_bytes, &m), ELIZA_OK);
    CHECK(m.paired && m.n_rows == 2 * rows);
    for (int i = 0; i < m.n_parts; i++) CHECK(m.part_row0[i] % 2 == 0);
    CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
    if (c && m.n_parts) {
        CHECK_RC(ez_gpu_upload(yb, 0, got, (size_t)(rows + y_off) * sizeof(float)), ELIZA_OK);
        CHECK_RC(ez_gpu_op_matvec_glu(c, &m, xb, x_off, yb, y_off, act), ELIZA_OK);
        CHECK_RC(run_one(c), ELIZA_OK);
        CHECK_RC(ez_gpu_download(yb, 0, got, (size_t)(rows + y_off) * sizeof(float)), ELIZA_OK);
        worst = max_abs_diff(got + y_off, gate, (size_t)rows);
        /* The product's error of each factor (2e-6 of the sums' scale) times the other's size. */
        CHECK_MSG(worst <= (2e-6 * tol + 1e-6) * (2.0 * tol + 1.0),
                  "gated matvec %s [%lld x %lld]: max |gpu - ref| %.3g (scale %.3g)",
                  ez_type_traits_of(type)->name, (long long)rows, (long long)cols, worst, tol);
        CHECK(got[0] == 0.0f && got[y_off - 1] == 0.0f);
    }
    printf("  gated matvec %-5s [2 x %lld x %lld] in %d binding(s), %s: max |gpu - ref| %.3g\n",
           ez_type_traits_of(type)->name, (long long)rows, (long long)cols, m.n_parts,
           act == EZ_GPU_GELU_TANH ? "GELU" : "SiLU", worst);
    ez_gpu_cmd_free(c);
done:
    ez_gpu_matrix_free(&m);
    ez_gpu_buf_free(xb);
    ez_gpu_buf_free(yb);
    free(x);
    free(gate);
    free(up);
    free(got);
    free(w);
}

/* Every type at rows of 128, 320 and 1088 quads (one per lane, a partial
 * round, two unrolled rounds of four and a remainder), the row counts
 * leaving the last workgroup partly idle; the float
 * types also at 203 columns (a tail past the last quad, rows at odd byte
 * offsets for F16 / BF16). */
static void test_gpu_matvec_matches_reference(void) {
    static const uint32_t types[] = {EZ_TYPE_F32,  EZ_TYPE_F16,  EZ_TYPE_BF16, EZ_TYPE_Q4_0, EZ_TYPE_Q4_1,
                                     EZ_TYPE_Q5_0, EZ_TYPE_Q8_0, EZ_TYPE_Q4_K, EZ_TYPE_Q5_K, EZ_TYPE_Q6_K};
    ez_gpu *sub = g_gpu;
    for (int pass = 0; pass < 2; pass++) {
        g_gpu = pass == 0 ? sub : g_tree;
        printf("  matvecs with %s\n", pass == 0 && ez_gpu_info(sub)->subgroup_arith ? "subgroup arithmetic"
                                                                                  : "the shared-memory reduction");
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            check_matvec(types[t], 37, 512, 4);
            check_matvec(types[t], 70, 1280, 3);
            check_matvec(types[t], 21, 4352, 0);
            if (ez_type_traits_of(types[t])->block_size == 1) check_matvec(types[t], 29, 203, 0);
            check_matvec_glu(types[t], 37, 512, 4, EZ_GPU_GELU_TANH);
            check_matvec_glu(types[t], 21, types[t] == EZ_TYPE_F32 ? 203 : 4352, 0, EZ_GPU_SILU);
        }
        check_matvec_rope(EZ_TYPE_Q4_K, 256, 2048, 64, 0);
        check_matvec_rope(EZ_TYPE_Q4_K, 128, 512, 32, 1);
        check_matvec_rope(EZ_TYPE_Q6_K, 128, 512, 64, 1);
        check_matvec_rope(EZ_TYPE_F32, 192, 256, 48, 0);
    }
    /* An output projection's many rows take fewer lanes (vk_ops.c's
     * MV_MANY_ROWS); its vectors need the wider bindings. */
    g_gpu = g_wide;
    check_matvec(EZ_TYPE_Q8_0, 16390, 320, 0);
    check_matvec(EZ_TYPE_Q6_K, 16390, 512, 4);
    g_gpu = sub;
}

/* One weight type at one shape of the batched product: n_tok tokens
 * against the double sums over the scalar dequantizer's rows (on g_gpu's
 * binding limit: 1 and 7 tokens split the weights over several). With row0 >
 * 0 (read from a step word), the token tiles wholly before it are skipped:
 * their outputs keep the sentinel the buffer held. */
static void check_matmul(uint32_t type, int64_t rows, int64_t cols, uint32_t n_tok, uint32_t row0) {
    const uint64_t row_bytes = ez_row_bytes(type, (uint64_t)cols);
    const size_t nx = (size_t)n_tok * (size_t)cols, ny = (size_t)n_tok * (size_t)rows;
    float *x = (float *)malloc(nx * sizeof(float)), *wrow = (float *)malloc((size_t)cols * sizeof(float));
    float *ref = (float *)malloc(ny * sizeof(float)), *got = (float *)malloc(ny * sizeof(float));
    double *mag = (double *)calloc(ny, sizeof(double));
    uint8_t *w = (uint8_t *)malloc((size_t)(rows * (int64_t)row_bytes));
    ez_gpu_buf *xb = host_buf(nx), *yb = host_buf(ny), *step = host_buf(1);
    ez_gpu_matrix m;
    ez_gpu_cmd *c = NULL;
    double worst = 0.0;
    int bad = 0;
    memset(&m, 0, sizeof m);
    CHECK(x && wrow && ref && got && mag && w && xb && yb && step);
    if (!x || !wrow || !ref || !got || !mag || !w || !xb || !yb || !step) goto done;
    fill(x, nx, 1.0f);
    CHECK_RC(ez_gpu_upload(xb, 0, x, nx * sizeof(float)), ELIZA_OK);
    CHECK_RC(ez_gpu_upload(step, 0, &row0, sizeof row0), ELIZA_OK);
    random_rows(type, rows, cols, w);
    for (int64_t r = 0; r < rows; r++) {
        ez_kernels_ref(type)->dequant(w + (uint64_t)r * row_bytes, wrow, cols);
        for (uint32_t t = 0; t < n_tok; t++) {
            double sum = 0.0;
            for (int64_t i = 0; i < cols; i++) {
                sum += (double)wrow[i] * (double)x[(size_t)t * cols + i];
                mag[(size_t)t * rows + r] += fabs((double)wrow[i] * (double)x[(size_t)t * cols + i]);
            }
            ref[(size_t)t * rows + r] = (float)sum;
        }
    }
    for (size_t i = 0; i < ny; i++) got[i] = -7.0f;
    CHECK_RC(ez_gpu_upload(yb, 0, got, ny * sizeof(float)), ELIZA_OK);
    CHECK_RC(ez_gpu_matrix_upload(g_gpu, type, rows, cols, w, &m), ELIZA_OK);
    CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
    if (c && m.n_parts) {
        CHECK_RC(ez_gpu_op_matmul(c, &m, xb, yb, n_tok + 1, NULL, 0), ELIZA_E_INVALID_ARG);
        CHECK_RC(ez_gpu_op_matmul(c, &m, xb, yb, n_tok, row0 ? step : NULL, 0), ELIZA_OK);
        CHECK_RC(run_one(c), ELIZA_OK);
        CHECK_RC(ez_gpu_download(yb, 0, got, ny * sizeof(float)), ELIZA_OK);
        for (uint32_t t = 0; t < n_tok; t++) {
            const int skipped = t < row0 / 64 * 64;
            for (int64_t r = 0; r < rows; r++) {
                const size_t i = (size_t)t * rows + r;
                const double d = fabs((double)got[i] - (double)ref[i]);
                if (skipped) {
                    bad += got[i] != -7.0f;
                } else {
                    bad += !(d <= 2e-6 * mag[i] + 1e-6);
                    worst = d > worst ? d : worst;
                }
            }
        }
        CHECK_MSG(bad == 0, "matmul %s [%lld x %lld] x %u tokens (row0 %u): %d wrong, max |gpu - ref| %.3g",
                  ez_type_traits_of(type)->name, (long long)rows, (long long)cols, n_tok, row0, bad, worst);
    }
    printf("  matmul %-5s [%lld x %lld] x %u tokens in %d binding(s), row0 %u: max |gpu - ref| %.3g\n",
           ez_type_traits_of(type)->name, (long long)rows, (long long)cols, n_tok, m.n_parts, row0, worst);
    ez_gpu_cmd_free(c);
    ez_gpu_matrix_free(&m);
done:
    ez_gpu_buf_free(xb);
    ez_gpu_buf_free(yb);
    ez_gpu_buf_free(step);
    free(x);
    free(wrow);
    free(ref);
    free(got);
    free(mag);
    free(w);
}

/* Every type: 1, 7, 64 and 70 tokens (one token, a partial tile, a whole
 * one, a whole and a partial one), 37 and 70 rows (a partial row tile, two
 * tiles over several bindings); 70 tokens from row0 = 66 skip the first
 * token tile; the float types also at 203 columns (a partial last quad). */
static void test_gpu_matmul_matches_reference(void) {
    static const uint32_t types[] = {EZ_TYPE_F32,  EZ_TYPE_F16,  EZ_TYPE_BF16, EZ_TYPE_Q4_0, EZ_TYPE_Q4_1,
                                     EZ_TYPE_Q5_0, EZ_TYPE_Q8_0, EZ_TYPE_Q4_K, EZ_TYPE_Q5_K, EZ_TYPE_Q6_K};
    ez_gpu *narrow = g_gpu;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        check_matmul(types[t], 37, 512, 1, 0);
        check_matmul(types[t], 37, 512, 7, 0);
        if (ez_type_traits_of(types[t])->block_size == 1) check_matmul(types[t], 29, 203, 7, 0);
        g_gpu = g_wide;
        check_matmul(types[t], 70, 256, 64, 0);
        check_matmul(types[t], 70, 256, 70, 66);
        g_gpu = narrow;
    }
}

/* ---- element-wise and row ops ---------------------------------------------------------- */

/* The fused block seam against the CPU ops composed: with Gemma's post norm
 * (o normed first) and without (llama), on rows held in registers (1000)
 * and on the passes over the row (1002: not whole vec4s; 5000: past the
 * registers). */
static void test_gpu_add_rms_norm_matches_composed_ops(void) {
    const ez_llm_ops *ref = ez_llm_ops_ref();
    enum { NMAX = 5000, ROWS = 3 };
    static float o[ROWS * NMAX], wp[NMAX], x[ROWS * NMAX], w[NMAX], on[ROWS * NMAX], xw[ROWS * NMAX], hw[ROWS * NMAX];
    static float got_x[ROWS * NMAX], got_h[ROWS * NMAX];
    static const int sizes[] = {1000, 1002, 5000};
    for (int it = 0; it < 6; it++) {
        const int post = it % 2, N = sizes[it / 2];
        ez_gpu *keep = g_gpu;
        if (N > 2000) g_gpu = g_wide; /* three rows of 5000 need the wider bindings */
        ez_gpu_buf *ob, *wpb, *xb, *wb, *hb = host_buf(ROWS * N);
        ez_gpu_cmd *c = NULL;
        fill(o, ROWS * N, 4.0f);
        fill(wp, N, 2.0f);
        fill(x, ROWS * N, 3.0f);
        fill(w, N, 2.0f);
        for (int r = 0; r < ROWS; r++) {
            if (post) {
                ref->rms_norm(on + r * N, o + r * N, wp, N, 1e-6f);
            } else {
                memcpy(on + r * N, o + r * N, N * sizeof(float));
            }
            for (int i = 0; i < N; i++) xw[r * N + i] = x[r * N + i] + on[r * N + i];
            ref->rms_norm(hw + r * N, xw + r * N, w, N, 1e-6f);
        }
        ob = device_buf_from(o, ROWS * N);
        wpb = device_buf_from(wp, N);
        xb = device_buf_from(x, ROWS * N);
        wb = device_buf_from(w, N);
        CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
        if (c && ob && wpb && xb && wb && hb) {
            CHECK_RC(ez_gpu_op_add_rms_norm(c, ob, wpb, xb, wb, hb, 0, ROWS, 1e-6f), ELIZA_E_INVALID_ARG);
            CHECK_RC(ez_gpu_op_add_rms_norm(c, ob, wpb, xb, wb, hb, N + 1, ROWS, 1e-6f), ELIZA_E_INVALID_ARG);
            CHECK_RC(ez_gpu_op_add_rms_norm(c, ob, wpb, xb, wb, hb, N, ROWS + 1, 1e-6f), ELIZA_E_INVALID_ARG);
            CHECK_RC(ez_gpu_op_add_rms_norm(c, ob, post ? wpb : NULL, xb, wb, hb, N, ROWS, 1e-6f), ELIZA_OK);
            CHECK_RC(run_one(c), ELIZA_OK);
            CHECK_RC(ez_gpu_download(xb, 0, got_x, (size_t)(ROWS * N) * sizeof(float)), ELIZA_OK);
            CHECK_RC(ez_gpu_download(hb, 0, got_h, (size_t)(ROWS * N) * sizeof(float)), ELIZA_OK);
            CHECK_MSG(max_abs_diff(got_x, xw, ROWS * N) <= 2e-5 && max_abs_diff(got_h, hw, ROWS * N) <= 2e-5,
                      "add_rms_norm (post %d, n %d): x %.3g, h %.3g", post, N, max_abs_diff(got_x, xw, ROWS * N),
                      max_abs_diff(got_h, hw, ROWS * N));
        }
        ez_gpu_cmd_free(c);
        ez_gpu_buf_free(ob);
        ez_gpu_buf_free(wpb);
        ez_gpu_buf_free(xb);
        ez_gpu_buf_free(wb);
        ez_gpu_buf_free(hb);
        g_gpu = keep;
    }
}

static void test_gpu_row_and_elementwise_ops_match_reference(void) {
    const ez_llm_ops *ref = ez_llm_ops_ref();
    enum { N = 640, ROWS = 3, NG = 1000, NS = 300 };
    static float x[ROWS * N], w[N], want[ROWS * N], got[ROWS * N], g[NG], u[NG], gw[NG];
    ez_gpu_buf *xb, *wb, *gb, *ub;
    ez_gpu_cmd *c = NULL;
    fill(x, ROWS * N, 3.0f);
    fill(w, N, 2.0f);
    for (int r = 0; r < ROWS; r++) ref->rms_norm(want + r * N, x + r * N, w, N, 1e-6f);
    xb = device_buf_from(x, ROWS * N);
    wb = device_buf_from(w, N);
    CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
    if (c && xb && wb) {
        CHECK_RC(ez_gpu_op_rms_norm(c, xb, wb, xb, N, ROWS, 1e-6f), ELIZA_OK);
        CHECK_RC(run_one(c), ELIZA_OK);
        CHECK_RC(ez_gpu_download(xb, 0, got, sizeof got), ELIZA_OK);
        CHECK_MSG(max_abs_diff(got, want, ROWS * N) <= 1e-5, "rms_norm: %.3g", max_abs_diff(got, want, ROWS * N));
    }
    ez_gpu_cmd_free(c);
    ez_gpu_buf_free(xb);
    ez_gpu_buf_free(wb);

    for (int act = 0; act < 2; act++) {
        fill(g, NG, 6.0f);
        fill(u, NG, 2.0f);
        g[0] = -30.0f;
        g[1] = 30.0f;
        memcpy(gw, g, sizeof g);
        if (act == 0) {
            ref->gelu_tanh_mul(gw, u, NG);
        } else {
            ref->silu_mul(gw, u, NG);
        }
        gb = device_buf_from(g, NG);
        ub = device_buf_from(u, NG);
        c = NULL;
        CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
        if (c && gb && ub) {
            CHECK_RC(ez_gpu_op_glu(c, gb, ub, NG, act == 0 ? EZ_GPU_GELU_TANH : EZ_GPU_SILU), ELIZA_OK);
            CHECK_RC(run_one(c), ELIZA_OK);
            CHECK_RC(ez_gpu_download(gb, 0, got, NG * sizeof(float)), ELIZA_OK);
            CHECK_MSG(max_abs_diff(got, gw, NG) <= 2e-5, "%s: %.3g", act == 0 ? "geglu" : "swiglu",
                      max_abs_diff(got, gw, NG));
        }
        ez_gpu_cmd_free(c);
        ez_gpu_buf_free(gb);
        ez_gpu_buf_free(ub);
        /* The same unit over interleaved pairs (a paired matrix's products)
         * into u's buffer. */
        {
            float pairs[2 * NG], zero[NG];
            for (int i = 0; i < NG; i++) {
                pairs[2 * i] = g[i];
                pairs[2 * i + 1] = u[i];
                zero[i] = 0.0f;
            }
            gb = device_buf_from(pairs, 2 * NG);
            ub = device_buf_from(zero, NG);
            c = NULL;
            CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
            if (c && gb && ub) {
                CHECK_RC(ez_gpu_op_glu_pairs(c, gb, ub, NG, act == 0 ? EZ_GPU_GELU_TANH : EZ_GPU_SILU), ELIZA_OK);
                CHECK_RC(ez_gpu_op_glu_pairs(c, ub, ub, NG, act == 0 ? EZ_GPU_GELU_TANH : EZ_GPU_SILU),
                         ELIZA_E_INVALID_ARG);
                CHECK_RC(run_one(c), ELIZA_OK);
                CHECK_RC(ez_gpu_download(ub, 0, got, NG * sizeof(float)), ELIZA_OK);
                CHECK_MSG(max_abs_diff(got, gw, NG) <= 2e-5, "%s pairs: %.3g", act == 0 ? "geglu" : "swiglu",
                          max_abs_diff(got, gw, NG));
            }
            ez_gpu_cmd_free(c);
            ez_gpu_buf_free(gb);
            ez_gpu_buf_free(ub);
        }
    }

    /* Residual add and copy at offsets; soft-capping as the CPU engine's tanhf. */
    for (int acc = 0; acc < 2; acc++) {
        fill(g, NG, 3.0f);
        fill(u, NG, 3.0f);
        memcpy(gw, g, sizeof g);
        for (int i = 0; i < 500; i++) gw[300 + i] = acc ? g[300 + i] + u[7 + i] : u[7 + i];
        gb = device_buf_from(g, NG);
        ub = device_buf_from(u, NG);
        c = NULL;
        CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
        if (c && gb && ub) {
            CHECK_RC(ez_gpu_op_add(c, ub, 7, gb, 300, 500, acc), ELIZA_OK);
            CHECK_RC(ez_gpu_op_add(c, ub, 7, gb, 600, 500, acc), ELIZA_E_INVALID_ARG);
            CHECK_RC(run_one(c), ELIZA_OK);
            CHECK_RC(ez_gpu_download(gb, 0, got, NG * sizeof(float)), ELIZA_OK);
            CHECK_MSG(max_abs_diff(got, gw, NG) == 0.0, "add (accumulate %d): %.3g", acc, max_abs_diff(got, gw, NG));
        }
        ez_gpu_cmd_free(c);
        ez_gpu_buf_free(gb);
        ez_gpu_buf_free(ub);
    }
    fill(g, NG, 100.0f);
    for (int i = 0; i < NG; i++) gw[i] = 30.0f * tanhf(g[i] / 30.0f);
    gb = device_buf_from(g, NG);
    c = NULL;
    CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
    if (c && gb) {
        CHECK_RC(ez_gpu_op_softcap(c, gb, NG, 30.0f), ELIZA_OK);
        CHECK_RC(run_one(c), ELIZA_OK);
        CHECK_RC(ez_gpu_download(gb, 0, got, NG * sizeof(float)), ELIZA_OK);
        CHECK_MSG(max_abs_diff(got, gw, NG) <= 1e-5, "softcap: %.3g", max_abs_diff(got, gw, NG));
    }
    ez_gpu_cmd_free(c);
    ez_gpu_buf_free(gb);

    fill(x, 2 * NS, 8.0f);
    memcpy(want, x, 2 * NS * sizeof(float));
    ref->softmax(want, NS);
    ref->softmax(want + NS, NS);
    xb = device_buf_from(x, 2 * NS);
    c = NULL;
    CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
    if (c && xb) {
        CHECK_RC(ez_gpu_op_softmax(c, xb, NS, 2), ELIZA_OK);
        CHECK_RC(run_one(c), ELIZA_OK);
        CHECK_RC(ez_gpu_download(xb, 0, got, 2 * NS * sizeof(float)), ELIZA_OK);
        CHECK_MSG(max_abs_diff(got, want, 2 * NS) <= 1e-6, "softmax: %.3g", max_abs_diff(got, want, 2 * NS));
    }
    ez_gpu_cmd_free(c);
    ez_gpu_buf_free(xb);
}

static void test_gpu_rope_matches_reference(void) {
    enum { HEADS = 4, HD = 64 };
    static const int n_rots[] = {64, 32};
    float x[HEADS * HD + 2], want[HEADS * HD + 2], got[HEADS * HD + 2], cs[HD];
    for (int neox = 0; neox < 2; neox++) {
        for (int k = 0; k < 2; k++) {
            const int n_rot = n_rots[k];
            ez_gpu_buf *xb, *cb;
            ez_gpu_cmd *c = NULL;
            fill(x, HEADS * HD + 2, 2.0f);
            memcpy(want, x, sizeof x);
            ez_rope_angles(cs, 1234, n_rot, 10000.0f, 1.0f, NULL);
            ez_rope(want + 2, HEADS, HD, n_rot, cs, neox);
            xb = device_buf_from(x, HEADS * HD + 2);
            cb = device_buf_from(cs, (size_t)n_rot);
            CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
            if (c && xb && cb) {
                CHECK_RC(ez_gpu_op_rope(c, xb, 2, cb, 0, HEADS, HD, (uint32_t)n_rot, neox), ELIZA_OK);
                CHECK_RC(run_one(c), ELIZA_OK);
                CHECK_RC(ez_gpu_download(xb, 0, got, sizeof got), ELIZA_OK);
                CHECK_MSG(max_abs_diff(got, want, HEADS * HD + 2) <= 1e-6, "rope neox=%d n_rot=%d: %.3g", neox, n_rot,
                          max_abs_diff(got, want, HEADS * HD + 2));
            }
            ez_gpu_cmd_free(c);
            ez_gpu_buf_free(xb);
            ez_gpu_buf_free(cb);
        }
    }
}

/* The fused query / key step against the separate ops it replaces (each
 * checked against the CPU above): per-head norms or none, GPT-J and NeoX
 * pairs, a partial rotation, the key written into a cache row. */
static void test_gpu_qk_rope_matches_separate_ops(void) {
    enum { NH = 4, NKV = 2, HD = 64, ROW = 3 };
    float q[NH * HD], k[NKV * HD], qn[HD], kn[HD], cs[HD], want_q[NH * HD], got_q[NH * HD];
    float want_k[4 * NKV * HD], got_k[4 * NKV * HD];
    const uint32_t words[1] = {ROW * NKV * HD};
    for (int variant = 0; variant < 4; variant++) {
        const int neox = variant & 1, normed = variant < 2;
        const uint32_t n_rot = variant == 3 ? 32 : HD;
        ez_gpu_buf *qa, *ka, *qb, *kb, *qnb, *knb, *cb, *ca, *cbk, *step = host_buf(1);
        ez_gpu_cmd *c = NULL;
        ez_gpu_qk an = {NH, NKV, HD, n_rot, neox, 0, 1e-6f, NULL, NULL, step, 0, 1, 0, EZ_GPU_NO_WORD};
        fill(q, NH * HD, 2.0f);
        fill(k, NKV * HD, 2.0f);
        fill(qn, HD, 2.0f);
        fill(kn, HD, 2.0f);
        memset(want_k, 0, sizeof want_k);
        ez_rope_angles(cs, 77, (int32_t)n_rot, 10000.0f, 1.0f, NULL);
        qa = device_buf_from(q, NH * HD);
        ka = device_buf_from(k, NKV * HD);
        qb = device_buf_from(q, NH * HD);
        kb = device_buf_from(k, NKV * HD);
        qnb = device_buf_from(qn, HD);
        knb = device_buf_from(kn, HD);
        cb = device_buf_from(cs, n_rot);
        ca = device_buf_from(want_k, 4 * NKV * HD);
        cbk = device_buf_from(want_k, 4 * NKV * HD);
        if (normed) {
            an.q_norm = qnb;
            an.k_norm = knb;
        }
        if (step) CHECK_RC(ez_gpu_upload(step, 0, words, sizeof words), ELIZA_OK);
        CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
        if (c && qa && ka && qb && kb && qnb && knb && cb && ca && cbk && step) {
            if (normed) {
                CHECK_RC(ez_gpu_op_rms_norm(c, qa, qnb, qa, HD, NH, 1e-6f), ELIZA_OK);
                CHECK_RC(ez_gpu_op_rms_norm(c, ka, knb, ka, HD, NKV, 1e-6f), ELIZA_OK);
            }
            CHECK_RC(ez_gpu_op_rope(c, qa, 0, cb, 0, NH, HD, n_rot, neox), ELIZA_OK);
            CHECK_RC(ez_gpu_op_rope(c, ka, 0, cb, 0, NKV, HD, n_rot, neox), ELIZA_OK);
            CHECK_RC(ez_gpu_op_add_at(c, ka, 0, ca, 0, NKV * HD, 0, step, 0), ELIZA_OK);
            CHECK_RC(ez_gpu_op_qk_rope(c, &an, qb, kb, cb, cbk), ELIZA_OK);
            CHECK_RC(run_one(c), ELIZA_OK);
            CHECK_RC(ez_gpu_download(qa, 0, want_q, sizeof want_q), ELIZA_OK);
            CHECK_RC(ez_gpu_download(qb, 0, got_q, sizeof got_q), ELIZA_OK);
            CHECK_RC(ez_gpu_download(ca, 0, want_k, sizeof want_k), ELIZA_OK);
            CHECK_RC(ez_gpu_download(cbk, 0, got_k, sizeof got_k), ELIZA_OK);
            CHECK_MSG(max_abs_diff(got_q, want_q, NH * HD) <= 1e-6 && max_abs_diff(got_k, want_k, 4 * NKV * HD) <= 1e-6,
                      "qk_rope variant %d: q %.3g, k %.3g", variant, max_abs_diff(got_q, want_q, NH * HD),
                      max_abs_diff(got_k, want_k, 4 * NKV * HD));
            CHECK(got_k[ROW * NKV * HD] != 0.0f && got_k[0] == 0.0f);
        }
        if (variant == 0) {
            ez_gpu_qk bad = an;
            bad.step = NULL;
            CHECK_RC(ez_gpu_op_qk_rope(c, &bad, qb, kb, cb, cbk), ELIZA_E_INVALID_ARG);
            bad = an;
            bad.n_rot = 3;
            CHECK_RC(ez_gpu_op_qk_rope(c, &bad, qb, kb, cb, cbk), ELIZA_E_INVALID_ARG);
        }
        ez_gpu_cmd_free(c);
        ez_gpu_buf *all[] = {qa, ka, qb, kb, qnb, knb, cb, ca, cbk, step};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ez_gpu_buf_free(all[i]);
    }
}

/* Three tokens in one qk_rope dispatch, each with its own angles, from row0
 * = 1 (token 0 is a bucket's padding: left alone), against the CPU's
 * per-head norm and rope; keys land in cache rows ROW, ROW + 1 for tokens
 * 1 and 2 (the step word holds where token 0's row would go). */
static void test_gpu_qk_rope_batch_matches_reference(void) {
    enum { NH = 4, NKV = 2, HD = 64, NT = 3, ROW = 2, NROT = 32 };
    const ez_llm_ops *ref = ez_llm_ops_ref();
    static float q[NT * NH * HD], k[NT * NKV * HD], qn[HD], kn[HD], cs[NT * NROT], want_q[NT * NH * HD];
    static float got_q[NT * NH * HD], want_k[6 * NKV * HD], got_k[6 * NKV * HD];
    const uint32_t words[2] = {(ROW - 1) * NKV * HD, 1};
    ez_gpu_buf *qb, *kb, *qnb, *knb, *cb, *cache, *step = host_buf(2);
    ez_gpu_cmd *c = NULL;
    fill(q, NT * NH * HD, 2.0f);
    fill(k, NT * NKV * HD, 2.0f);
    fill(qn, HD, 2.0f);
    fill(kn, HD, 2.0f);
    memset(want_k, 0, sizeof want_k);
    memcpy(want_q, q, sizeof q);
    for (int t = 0; t < NT; t++) ez_rope_angles(cs + t * NROT, 40 + t, NROT, 10000.0f, 1.0f, NULL);
    for (int t = 1; t < NT; t++) {
        float kr[NKV * HD];
        for (int h = 0; h < NH; h++) ref->rms_norm(want_q + (t * NH + h) * HD, q + (t * NH + h) * HD, qn, HD, 1e-6f);
        for (int h = 0; h < NKV; h++) ref->rms_norm(kr + h * HD, k + (t * NKV + h) * HD, kn, HD, 1e-6f);
        ez_rope(want_q + t * NH * HD, NH, HD, NROT, cs + t * NROT, 1);
        ez_rope(kr, NKV, HD, NROT, cs + t * NROT, 1);
        memcpy(want_k + (ROW - 1 + t) * NKV * HD, kr, sizeof kr);
    }
    qb = device_buf_from(q, NT * NH * HD);
    kb = device_buf_from(k, NT * NKV * HD);
    qnb = device_buf_from(qn, HD);
    knb = device_buf_from(kn, HD);
    cb = device_buf_from(cs, NT * NROT);
    memset(got_k, 0, sizeof got_k);
    cache = device_buf_from(got_k, 6 * NKV * HD);
    if (step) CHECK_RC(ez_gpu_upload(step, 0, words, sizeof words), ELIZA_OK);
    CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
    if (c && qb && kb && qnb && knb && cb && cache && step) {
        const ez_gpu_qk a = {NH, NKV, HD, NROT, 1, 0, 1e-6f, qnb, knb, step, 0, NT, NROT, 1};
        ez_gpu_qk bad = a;
        bad.n_tok = NT + 1;
        CHECK_RC(ez_gpu_op_qk_rope(c, &bad, qb, kb, cb, cache), ELIZA_E_INVALID_ARG);
        CHECK_RC(ez_gpu_op_qk_rope(c, &a, qb, kb, cb, cache), ELIZA_OK);
        CHECK_RC(run_one(c), ELIZA_OK);
        CHECK_RC(ez_gpu_download(qb, 0, got_q, sizeof got_q), ELIZA_OK);
        CHECK_RC(ez_gpu_download(cache, 0, got_k, sizeof got_k), ELIZA_OK);
        CHECK_MSG(max_abs_diff(got_q, want_q, NT * NH * HD) <= 2e-6 && max_abs_diff(got_k, want_k, 6 * NKV * HD) <= 2e-6,
                  "qk_rope batch: q %.3g, k %.3g", max_abs_diff(got_q, want_q, NT * NH * HD),
                  max_abs_diff(got_k, want_k, 6 * NKV * HD));
    }
    ez_gpu_cmd_free(c);
    ez_gpu_buf *all[] = {qb, kb, qnb, knb, cb, cache, step};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ez_gpu_buf_free(all[i]);
}

/* At 5000 elements and 8000 (5 and 8 partial maxima, within the tests'
 * binding limit), the largest at the end, at the start, and tied between
 * two places (the first wins). */
static void test_gpu_argmax_picks_the_first_largest(void) {
    static const uint32_t sizes[] = {5000, 8000};
    float *x = (float *)malloc(8000 * sizeof(float));
    for (size_t z = 0; z < 2 && x; z++) {
        const uint32_t n = sizes[z], at[] = {n - 1, 17, 0};
        for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
            ez_gpu_buf *xb, *ob, *sb = NULL;
            ez_gpu_cmd *c = NULL;
            uint32_t got = 0xffffffffu;
            fill(x, n, 1.0f);
            x[at[k]] = 5.0f;
            if (at[k] == 17) x[n - 2000] = 5.0f;
            xb = device_buf_from(x, n);
            ob = host_buf(1);
            CHECK_RC(ez_gpu_buf_create(g_gpu, 4u * ez_gpu_argmax_scratch_words(n), EZ_GPU_DEVICE_LOCAL, &sb), ELIZA_OK);
            CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
            if (c && xb && ob && sb) {
                CHECK_RC(ez_gpu_op_argmax(c, xb, n, sb, ob), ELIZA_OK);
                CHECK_RC(run_one(c), ELIZA_OK);
                CHECK_RC(ez_gpu_download(ob, 0, &got, sizeof got), ELIZA_OK);
                CHECK_MSG(got == at[k], "argmax of %u: %u, want %u", n, got, at[k]);
            }
            ez_gpu_cmd_free(c);
            ez_gpu_buf_free(xb);
            ez_gpu_buf_free(ob);
            ez_gpu_buf_free(sb);
        }
    }
    free(x);
}

/* ---- attention --------------------------------------------------------------------------- */

/* The reference: scores in double, softmax, weighted values. k and v hold
 * floats (already widened from F16 for that cache). */
static void attention_ref(const ez_gpu_attn *a, const float *q, const float *k, const float *v, float *out) {
    double *p = (double *)malloc(a->n_kv * sizeof(double));
    const uint32_t group = a->n_head / a->n_head_kv;
    for (uint32_t h = 0; h < a->n_head; h++) {
        const uint32_t kvh = h / group;
        double mx = -INFINITY, sum = 0.0;
        for (uint32_t t = 0; t < a->n_kv; t++) {
            double s = 0.0;
            for (uint32_t d = 0; d < a->head_dim; d++)
                s += (double)q[h * a->head_dim + d] * (double)k[t * a->kv_stride + kvh * a->head_dim + d];
            p[t] = s * a->scale;
            mx = p[t] > mx ? p[t] : mx;
        }
        for (uint32_t t = 0; t < a->n_kv; t++) sum += (p[t] = exp(p[t] - mx));
        for (uint32_t d = 0; d < a->head_dim; d++) {
            double acc = 0.0;
            for (uint32_t t = 0; t < a->n_kv; t++) acc += p[t] * (double)v[t * a->kv_stride + kvh * a->head_dim + d];
            out[h * a->head_dim + d] = (float)(acc / sum);
        }
    }
    free(p);
}

/* 120 positions: two chunks of the split, the last one partial; one kv head
 * for the four query heads. */
static void test_gpu_attention_matches_reference(void) {
    ez_gpu_attn a = {4, 1, 64, 120, 64, EZ_TYPE_F32, 0.125f, 0, NULL, 0};
    const size_t n_kv_elems = (size_t)a.n_kv * a.kv_stride;
    float *k = (float *)malloc(n_kv_elems * sizeof(float)), *v = (float *)malloc(n_kv_elems * sizeof(float));
    uint16_t *k16 = (uint16_t *)malloc(n_kv_elems * 2), *v16 = (uint16_t *)malloc(n_kv_elems * 2);
    float q[4 * 64], want[4 * 64], got[4 * 64];
    for (int f16 = 0; f16 < 2; f16++) {
        ez_gpu_buf *qb, *kb = NULL, *vb = NULL, *ob, *sb;
        ez_gpu_cmd *c = NULL;
        fill(q, 4 * 64, 2.0f);
        fill(k, n_kv_elems, 2.0f);
        fill(v, n_kv_elems, 1.0f);
        if (f16) {
            for (size_t i = 0; i < n_kv_elems; i++) {
                k16[i] = ez_f32_to_f16(k[i]);
                v16[i] = ez_f32_to_f16(v[i]);
                k[i] = ez_f16_to_f32(k16[i]);
                v[i] = ez_f16_to_f32(v16[i]);
            }
        }
        a.kv_type = f16 ? EZ_TYPE_F16 : EZ_TYPE_F32;
        /* The F16 pass reads a window: rows [5, 120) as a sliding layer would. */
        a.kv_first = f16 ? 5 : 0;
        a.n_kv = f16 ? 115 : 120;
        attention_ref(&a, q, k + (size_t)a.kv_first * a.kv_stride, v + (size_t)a.kv_first * a.kv_stride, want);
        qb = device_buf_from(q, 4 * 64);
        if (f16) {
            CHECK_RC(ez_gpu_buf_create(g_gpu, n_kv_elems * 2, EZ_GPU_DEVICE_LOCAL, &kb), ELIZA_OK);
            CHECK_RC(ez_gpu_buf_create(g_gpu, n_kv_elems * 2, EZ_GPU_DEVICE_LOCAL, &vb), ELIZA_OK);
            if (kb) CHECK_RC(ez_gpu_upload(kb, 0, k16, n_kv_elems * 2), ELIZA_OK);
            if (vb) CHECK_RC(ez_gpu_upload(vb, 0, v16, n_kv_elems * 2), ELIZA_OK);
        } else {
            kb = device_buf_from(k, n_kv_elems);
            vb = device_buf_from(v, n_kv_elems);
        }
        ob = host_buf(4 * 64);
        sb = host_buf((size_t)ez_gpu_attn_scratch_floats(&a));
        if (sb) CHECK_RC(ez_gpu_attn_scratch_reset(sb, a.n_head), ELIZA_OK);
        CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
        if (c && qb && kb && vb && ob && sb) {
            CHECK_RC(ez_gpu_op_attention(c, &a, qb, kb, vb, ob, sb), ELIZA_OK);
            CHECK_RC(run_one(c), ELIZA_OK);
            CHECK_RC(ez_gpu_download(ob, 0, got, sizeof got), ELIZA_OK);
            CHECK_MSG(max_abs_diff(got, want, 4 * 64) <= 2e-6, "attention %s: %.3g", f16 ? "F16" : "F32",
                      max_abs_diff(got, want, 4 * 64));
            printf("  attention %s cache, %u positions: max |gpu - ref| %.3g\n", f16 ? "F16" : "F32", a.n_kv,
                   max_abs_diff(got, want, 4 * 64));
        }
        ez_gpu_cmd_free(c);
        ez_gpu_buf_free(qb);
        ez_gpu_buf_free(kb);
        ez_gpu_buf_free(vb);
        ez_gpu_buf_free(ob);
        ez_gpu_buf_free(sb);
    }
    free(k);
    free(v);
    free(k16);
    free(v16);
}

/* The prompt pass's attention: a batch of NT rows whose first is padding
 * (row0 = 1), rows 1.. at positions 100.. of a 120-row cache, each against
 * the single-token reference over its own causal window: the whole prefix
 * (head size 80: a partial round of dims) and a 37-position sliding window
 * (crossing chunk boundaries); the copy of the batch's values into the
 * cache rows (copy_rows) first. */
static void test_gpu_attention_batch_matches_reference(void) {
    enum { NT = 5, NH = 4, NKV = 2, NCTX = 120, POS1 = 100 };
    static const uint32_t head_dims[] = {80, 64, 256, 256}, windows[] = {0, 37, 0, 3};
    ez_gpu *narrow = g_gpu;
    g_gpu = g_wide;
    for (int variant = 0; variant < 4; variant++) {
        const uint32_t hd = head_dims[variant], kvs = NKV * hd, n_swa = windows[variant];
        const size_t n_cache = (size_t)NCTX * kvs, n_q = (size_t)NT * NH * hd;
        float *k = (float *)malloc(n_cache * sizeof(float)), *v = (float *)malloc(n_cache * sizeof(float));
        float *q = (float *)malloc(n_q * sizeof(float)), *want = (float *)calloc(n_q, sizeof(float));
        float *got = (float *)malloc(n_q * sizeof(float)), *vnew = (float *)malloc((size_t)NT * kvs * sizeof(float));
        /* Word 0: row0; word 1: row 0's position; word 2: where row 0's values would go. */
        const uint32_t words[3] = {1, POS1 - 1, (uint32_t)((POS1 - 1) * kvs)};
        ez_gpu_buf *qb = NULL, *kb = NULL, *vb = NULL, *vnb = NULL, *ob = NULL, *step = host_buf(3);
        ez_gpu_cmd *c = NULL;
        if (!k || !v || !q || !want || !got || !vnew) {
            CHECK(0);
            goto next;
        }
        fill(k, n_cache, 2.0f);
        fill(v, n_cache, 1.0f);
        fill(q, n_q, 2.0f);
        fill(vnew, (size_t)NT * kvs, 1.0f);
        vb = device_buf_from(v, n_cache);
        for (uint32_t t = 1; t < NT; t++) memcpy(v + (size_t)(POS1 + t - 1) * kvs, vnew + (size_t)t * kvs, kvs * sizeof(float));
        for (uint32_t t = 1; t < NT; t++) {
            const uint32_t pos = POS1 + t - 1, first = n_swa && pos + 1 > n_swa ? pos + 1 - n_swa : 0;
            ez_gpu_attn a = {NH, NKV, hd, pos + 1 - first, kvs, EZ_TYPE_F32, 0.1f, 0, NULL, 0};
            attention_ref(&a, q + (size_t)t * NH * hd, k + (size_t)first * kvs, v + (size_t)first * kvs,
                          want + (size_t)t * NH * hd);
        }
        qb = device_buf_from(q, n_q);
        kb = device_buf_from(k, n_cache);
        vnb = device_buf_from(vnew, (size_t)NT * kvs);
        ob = host_buf(n_q);
        if (ob) CHECK_RC(ez_gpu_upload(ob, 0, want, hd * NH * sizeof(float)), ELIZA_OK);
        if (step) CHECK_RC(ez_gpu_upload(step, 0, words, sizeof words), ELIZA_OK);
        CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
        if (c && qb && kb && vb && vnb && ob && step) {
            const ez_gpu_attn_batch a = {NH, NKV, hd, NCTX, kvs, 0.1f, n_swa, NT, step, 0, 1};
            ez_gpu_attn_batch bad = a;
            bad.head_dim = 600;
            CHECK_RC(ez_gpu_op_attention_batch(c, &bad, qb, kb, vb, ob), ELIZA_E_INVALID_ARG);
            CHECK_RC(ez_gpu_op_copy_rows(c, vnb, vb, NT, kvs, step, 2, 0), ELIZA_OK);
            CHECK_RC(ez_gpu_op_attention_batch(c, &a, qb, kb, vb, ob), ELIZA_OK);
            CHECK_RC(run_one(c), ELIZA_OK);
            CHECK_RC(ez_gpu_download(ob, 0, got, n_q * sizeof(float)), ELIZA_OK);
            CHECK_MSG(max_abs_diff(got, want, n_q) <= 2e-6, "batch attention, head %u, window %u: %.3g", hd, n_swa,
                      max_abs_diff(got, want, n_q));
            printf("  batch attention, head %u, window %u: max |gpu - ref| %.3g\n", hd, n_swa,
                   max_abs_diff(got, want, n_q));
        }
        ez_gpu_cmd_free(c);
    next:
        ez_gpu_buf_free(qb);
        ez_gpu_buf_free(kb);
        ez_gpu_buf_free(vb);
        ez_gpu_buf_free(vnb);
        ez_gpu_buf_free(ob);
        ez_gpu_buf_free(step);
        free(k);
        free(v);
        free(q);
        free(want);
        free(got);
        free(vnew);
    }
    g_gpu = narrow;
}

/* Two independent copies recorded to overlap (no barrier between them),
 * then an op that reads both: it still waits for each. */
static void test_gpu_overlapped_ops_are_still_waited_for(void) {
    enum { N = 3000 };
    static float x[N], want[N], got[N];
    ez_gpu_buf *xb, *a = host_buf(N), *b = host_buf(N);
    ez_gpu_cmd *c = NULL;
    fill(x, N, 2.0f);
    for (int i = 0; i < N; i++) want[i] = x[i] + x[i];
    xb = device_buf_from(x, N);
    CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
    if (c && xb && a && b) {
        CHECK_RC(ez_gpu_op_add(c, xb, 0, a, 0, N, 0), ELIZA_OK);
        ez_gpu_cmd_overlap_next(c);
        CHECK_RC(ez_gpu_op_add(c, xb, 0, b, 0, N, 0), ELIZA_OK);
        CHECK_RC(ez_gpu_op_add(c, b, 0, a, 0, N, 1), ELIZA_OK);
        CHECK_RC(run_one(c), ELIZA_OK);
        CHECK_RC(ez_gpu_download(a, 0, got, sizeof got), ELIZA_OK);
        CHECK_MSG(max_abs_diff(got, want, N) == 0.0, "overlapped ops: %.3g", max_abs_diff(got, want, N));
    }
    ez_gpu_cmd_free(c);
    ez_gpu_buf_free(xb);
    ez_gpu_buf_free(a);
    ez_gpu_buf_free(b);
}

/* ---- replay, timestamps --------------------------------------------------------------- */

/* Attention's window and a copy's destination row read from a step buffer:
 * one recording, run for three positions (one chunk, two, five: the merging
 * chunk's counters set back to 0 after each run). */
static void test_gpu_step_words_move_a_replayed_recording(void) {
    ez_gpu *narrow = g_gpu;
    ez_gpu_attn a = {4, 1, 64, 300, 64, EZ_TYPE_F32, 0.125f, 0, NULL, 1};
    const size_t n_kv_elems = (size_t)a.n_kv * a.kv_stride;
    float *k = (float *)malloc(n_kv_elems * sizeof(float)), *v = (float *)malloc(n_kv_elems * sizeof(float));
    float q[4 * 64], want[4 * 64], got[4 * 64], row[8], rows[32];
    static const uint32_t windows[3][2] = {{0, 10}, {5, 115}, {20, 280}};
    ez_gpu_buf *qb, *kb, *vb, *ob, *sb, *step, *rb, *db;
    ez_gpu_cmd *c = NULL;
    g_gpu = g_wide; /* 300 cached rows pass the narrow binding limit */
    fill(q, 4 * 64, 2.0f);
    fill(k, n_kv_elems, 2.0f);
    fill(v, n_kv_elems, 1.0f);
    fill(row, 8, 1.0f);
    memset(rows, 0, sizeof rows);
    qb = device_buf_from(q, 4 * 64);
    kb = device_buf_from(k, n_kv_elems);
    vb = device_buf_from(v, n_kv_elems);
    rb = device_buf_from(row, 8);
    db = device_buf_from(rows, 32);
    ob = host_buf(4 * 64);
    sb = host_buf((size_t)ez_gpu_attn_scratch_floats(&a));
    if (sb) CHECK_RC(ez_gpu_attn_scratch_reset(sb, a.n_head), ELIZA_OK);
    step = host_buf(4);
    a.step = step;
    CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
    if (c && qb && kb && vb && ob && sb && step && rb && db) {
        CHECK_RC(ez_gpu_op_attention(c, &a, qb, kb, vb, ob, sb), ELIZA_OK);
        CHECK_RC(ez_gpu_op_add_at(c, rb, 0, db, 0, 8, 0, step, 3), ELIZA_OK);
        CHECK_RC(ez_gpu_cmd_end(c), ELIZA_OK);
        for (int w = 0; w < 3; w++) {
            const uint32_t words[4] = {0, windows[w][0], windows[w][1], 8u * (uint32_t)(w + 1)};
            ez_gpu_attn ra = a;
            float back[32];
            uint32_t counters[4];
            ra.kv_first = windows[w][0];
            ra.n_kv = windows[w][1];
            attention_ref(&ra, q, k + (size_t)ra.kv_first * ra.kv_stride, v + (size_t)ra.kv_first * ra.kv_stride, want);
            CHECK_RC(ez_gpu_upload(step, 0, words, sizeof words), ELIZA_OK);
            CHECK_RC(ez_gpu_cmd_run(c), ELIZA_OK);
            CHECK_RC(ez_gpu_download(ob, 0, got, sizeof got), ELIZA_OK);
            CHECK_MSG(max_abs_diff(got, want, 4 * 64) <= 2e-6, "replayed attention, window %u + %u: %.3g",
                      windows[w][0], windows[w][1], max_abs_diff(got, want, 4 * 64));
            CHECK_RC(ez_gpu_download(db, 0, back, sizeof back), ELIZA_OK);
            CHECK(memcmp(back + 8 * (w + 1), row, sizeof row) == 0);
            CHECK_RC(ez_gpu_download(sb, 0, counters, sizeof counters), ELIZA_OK);
            CHECK(counters[0] == 0 && counters[1] == 0 && counters[2] == 0 && counters[3] == 0);
        }
    }
    ez_gpu_cmd_free(c);
    ez_gpu_buf_free(qb);
    ez_gpu_buf_free(kb);
    ez_gpu_buf_free(vb);
    ez_gpu_buf_free(ob);
    ez_gpu_buf_free(sb);
    ez_gpu_buf_free(step);
    ez_gpu_buf_free(rb);
    ez_gpu_buf_free(db);
    free(k);
    free(v);
    g_gpu = narrow;
}

/* rms_norm -> matvec -> argmax recorded once, run for two inputs written
 * into a host-visible buffer between the runs: the decode step's reuse. */
static void test_gpu_recorded_step_replays_with_new_inputs(void) {
    enum { K = 256, ROWS = 50 };
    static float x[K], w[K], normed[K], wq[ROWS * K], logits[ROWS];
    uint8_t q8[ROWS * (K / 32) * 34];
    ez_gpu_matrix m;
    ez_gpu_buf *xb = host_buf(K), *xd = device_buf_from(x, K), *wb = device_buf_from(w, K), *yb = host_buf(ROWS),
               *ob = host_buf(1), *pb = host_buf(ez_gpu_argmax_scratch_words(ROWS));
    ez_gpu_cmd *c = NULL, *quiet = NULL;
    fill(w, K, 1.0f);
    if (wb) CHECK_RC(ez_gpu_upload(wb, 0, w, sizeof w), ELIZA_OK);
    fill(wq, ROWS * K, 1.0f);
    for (int r = 0; r < ROWS; r++) ez_llm_quant_q8_0_ref(wq + r * K, q8 + r * (K / 32) * 34, K);
    CHECK_RC(ez_gpu_matrix_upload(g_gpu, EZ_TYPE_Q8_0, ROWS, K, q8, &m), ELIZA_OK);
    CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
    if (!c || !xb || !xd || !wb || !yb || !ob || !pb || !m.n_parts) goto done;
    /* The host's input is staged into device-local memory by the first op. */
    CHECK_RC(ez_gpu_op_copy(c, xb, 0, xd, 0, sizeof x + 4), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_gpu_op_copy(c, xb, 4, xd, 0, sizeof x), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_gpu_op_copy(c, xb, 0, xd, 0, 0), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_gpu_op_copy(c, xb, 0, xd, 0, sizeof x), ELIZA_OK);
    CHECK_RC(ez_gpu_op_rms_norm(c, xd, wb, xd, K, 1, 1e-6f), ELIZA_OK);
    CHECK_RC(ez_gpu_op_matvec(c, &m, xd, 0, yb, 0), ELIZA_OK);
    CHECK_RC(ez_gpu_op_argmax(c, yb, ROWS, pb, ob), ELIZA_OK);
    CHECK_RC(ez_gpu_cmd_end(c), ELIZA_OK);
    CHECK_RC(ez_gpu_op_argmax(c, yb, ROWS, pb, ob), ELIZA_E_STATE);
    CHECK_RC(ez_gpu_op_copy(c, xb, 0, xd, 0, sizeof x), ELIZA_E_STATE);
    CHECK(strcmp(ez_gpu_cmd_op_name(c, 0), "copy") == 0 && strcmp(ez_gpu_cmd_op_name(c, 1), "rms_norm") == 0 &&
          strcmp(ez_gpu_cmd_op_name(c, 2), "mv_q8_0") == 0 && strcmp(ez_gpu_cmd_op_name(c, 2 + m.n_parts), "argmax") == 0 &&
          strcmp(ez_gpu_cmd_op_name(c, 3 + m.n_parts), "argmax") == 0);
    CHECK(ez_gpu_cmd_op_name(c, 4 + m.n_parts) == NULL && ez_gpu_cmd_op_name(c, -1) == NULL);
    for (int step = 0; step < 3; step++) {
        float wrow[K];
        uint32_t got = 0xffffffffu;
        int best = 0;
        double ms[8];
        int n_ms;
        fill(x, K, 1.0f);
        ez_llm_ops_ref()->rms_norm(normed, x, w, K, 1e-6f);
        for (int r = 0; r < ROWS; r++) {
            double s = 0.0;
            ez_kernels_ref(EZ_TYPE_Q8_0)->dequant(q8 + r * (K / 32) * 34, wrow, K);
            for (int i = 0; i < K; i++) s += (double)wrow[i] * (double)normed[i];
            logits[r] = (float)s;
            if (logits[r] > logits[best]) best = r;
        }
        CHECK_RC(ez_gpu_upload(xb, 0, x, sizeof x), ELIZA_OK);
        CHECK_RC(ez_gpu_cmd_run(c), ELIZA_OK);
        CHECK_RC(ez_gpu_download(ob, 0, &got, sizeof got), ELIZA_OK);
        CHECK_MSG(got == (uint32_t)best, "replay %d: argmax %u, want %d", step, got, best);
        n_ms = ez_gpu_cmd_timings(c, ms, 8);
        if (ez_gpu_info(g_gpu)->timestamps) {
            CHECK_MSG(n_ms == 4 + m.n_parts, "%d timed ops", n_ms);
            for (int i = 0; i < n_ms && i < 8; i++) CHECK(ms[i] >= 0.0 && ms[i] < 1e4);
            if (step == 2)
                printf("  replayed step: rms_norm %.3f ms, matvec %.3f ms, argmax %.3f ms (device timestamps)\n",
                       ms[1], ms[2], ms[n_ms - 1]);
        } else {
            CHECK(n_ms == 0);
        }
    }
    /* Timestamps off: a recording without them runs the same and times nothing. */
    ez_gpu_set_timestamps(g_gpu, 0);
    CHECK_RC(ez_gpu_cmd_begin(g_gpu, &quiet), ELIZA_OK);
    ez_gpu_set_timestamps(g_gpu, 1);
    if (quiet) {
        double ms[1];
        uint32_t got = 0xffffffffu;
        CHECK_RC(ez_gpu_op_argmax(quiet, yb, ROWS, pb, ob), ELIZA_OK);
        CHECK_RC(run_one(quiet), ELIZA_OK);
        CHECK_RC(ez_gpu_download(ob, 0, &got, sizeof got), ELIZA_OK);
        CHECK(got < ROWS && ez_gpu_cmd_timings(quiet, ms, 1) == 0);
    }
done:
    ez_gpu_cmd_free(quiet);
    ez_gpu_cmd_free(c);
    ez_gpu_matrix_free(&m);
    ez_gpu_buf_free(xb);
    ez_gpu_buf_free(xd);
    ez_gpu_buf_free(wb);
    ez_gpu_buf_free(yb);
    ez_gpu_buf_free(ob);
    ez_gpu_buf_free(pb);
}

/* ---- device choice and errors ---------------------------------------------------------- */

static void test_gpu_device_choice_and_denylist(void) {
    ez_gpu_params p;
    ez_gpu *g = NULL;
    const char *name = ez_gpu_info(g_gpu)->name;
    char sub[8];
    ez_gpu_params_default(&p);
    p.device = "none";
    CHECK_RC(ez_gpu_open(&p, &g), ELIZA_E_UNSUPPORTED);
    CHECK(g == NULL);
    p.device = "no-such-gpu-anywhere";
    CHECK_RC(ez_gpu_open(&p, &g), ELIZA_E_NOT_FOUND);
    CHECK(strstr(ez_error_message(), "no-such-gpu-anywhere") != NULL);
    /* The device by a piece of its name, then denylisted by it. */
    memcpy(sub, name, sizeof sub - 1);
    sub[sizeof sub - 1] = 0;
    p.device = sub;
    CHECK_RC(ez_gpu_open(&p, &g), ELIZA_OK);
    if (g) CHECK(strcmp(ez_gpu_info(g)->name, name) == 0);
    ez_gpu_close(g);
    g = NULL;
    p.deny = sub;
    CHECK_RC(ez_gpu_open(&p, &g), ELIZA_E_UNSUPPORTED);
    CHECK(strstr(ez_error_message(), "denylisted") != NULL);
    CHECK(g == NULL);
}

static void test_gpu_bad_sizes_fail_cleanly(void) {
    ez_gpu_buf *b = NULL;
    ez_gpu_matrix m;
    ez_gpu_cmd *c = NULL;
    float v[4] = {0};
    CHECK_RC(ez_gpu_buf_create(g_gpu, TEST_BINDING_BYTES + 1, EZ_GPU_HOST, &b), ELIZA_E_UNSUPPORTED);
    CHECK(b == NULL);
    CHECK_RC(ez_gpu_buf_create(g_gpu, 0, EZ_GPU_HOST, &b), ELIZA_E_INVALID_ARG);
    /* More rows than the whole device-local heap holds: refused before any upload. */
    CHECK_RC(ez_gpu_matrix_upload(g_gpu, EZ_TYPE_F32, (int64_t)UINT32_MAX, 1024, NULL, &m), ELIZA_E_NOMEM);
    CHECK(m.n_parts == 0 && m.parts == NULL);
    CHECK_RC(ez_gpu_matrix_upload(g_gpu, EZ_TYPE_Q2_K, 4, 256, v, &m), ELIZA_E_UNSUPPORTED);
    CHECK_RC(ez_gpu_matrix_upload(g_gpu, EZ_TYPE_Q4_0, 4, 33, v, &m), ELIZA_E_INVALID_ARG);
    b = host_buf(4);
    CHECK_RC(ez_gpu_upload(b, 8, v, sizeof v), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_gpu_cmd_begin(g_gpu, &c), ELIZA_OK);
    if (c && b) {
        CHECK_RC(ez_gpu_op_softmax(c, b, 5, 1), ELIZA_E_INVALID_ARG);
        CHECK_RC(ez_gpu_op_rope(c, b, 0, b, 0, 1, 4, 3, 0), ELIZA_E_INVALID_ARG);
        CHECK_RC(ez_gpu_cmd_run(c), ELIZA_E_STATE);
    }
    ez_gpu_cmd_free(c);
    ez_gpu_buf_free(b);
}

/* The validation hook is live: an invalid Vulkan call (a buffer of size 0,
 * made through the raw entry points) fails the next backend call. */
static void test_gpu_validation_errors_fail_the_next_call(void) {
    ez_gpu_params p;
    ez_gpu *g = NULL;
    ez_gpu_buf *b = NULL;
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    VkBuffer vb = VK_NULL_HANDLE;
    ez_gpu_params_default(&p);
    p.device = ez_gpu_info(g_gpu)->name;
    p.validation = 1;
    CHECK_RC(ez_gpu_open(&p, &g), ELIZA_OK);
    if (!g) return;
    bci.size = 0;
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    if (g->vk.vkCreateBuffer(g->device, &bci, NULL, &vb) == VK_SUCCESS) g->vk.vkDestroyBuffer(g->device, vb, NULL);
    CHECK(ez_gpu_validation_errors(g) >= 1);
    CHECK_RC(ez_gpu_buf_create(g, 64, EZ_GPU_DEVICE_LOCAL, &b), ELIZA_OK);
    if (b) CHECK_RC(ez_gpu_upload(b, 0, &bci, 16), ELIZA_E_INTERNAL);
    CHECK(strstr(ez_error_message(), "validation") != NULL);
    ez_gpu_buf_free(b);
    ez_gpu_close(g);
}

int main(void) {
    ez_gpu_params p;
    int32_t rc;
    ez_gpu_params_default(&p);
    p.allow_cpu = 1;
    p.max_binding_bytes = TEST_BINDING_BYTES;
    p.validation = 0;
    rc = ez_gpu_open(&p, &g_keep_driver_loaded);
    p.validation = 1;
    if (rc == ELIZA_OK) {
        rc = ez_gpu_open(&p, &g_gpu);
        /* Where the layer is not installed (make deps installs it; a Windows
         * loader under wine has none), the kernels are checked without it. */
        if (rc == ELIZA_E_UNSUPPORTED && strstr(ez_error_message(), "validation") != NULL) {
            printf("test_gpu: %s: running without validation\n", ez_error_message());
            p.validation = 0;
            rc = ez_gpu_open(&p, &g_gpu);
        }
    }
    if (rc == ELIZA_OK) {
        p.no_subgroup = 1;
        rc = ez_gpu_open(&p, &g_tree);
        p.no_subgroup = 0;
        if (rc != ELIZA_OK) ez_gpu_close(g_gpu);
    }
    if (rc == ELIZA_OK) {
        p.max_binding_bytes = WIDE_BINDING_BYTES;
        rc = ez_gpu_open(&p, &g_wide);
        if (rc != ELIZA_OK) {
            ez_gpu_close(g_gpu);
            ez_gpu_close(g_tree);
        }
    }
    if (rc != ELIZA_OK) {
        const char *why = ez_error_message();
        /* No loader, no device, a loader or device older than Vulkan 1.1. */
        if (rc == ELIZA_E_UNSUPPORTED) {
            printf("test_gpu: SKIPPED (%s)\n", why);
            return 77;
        }
        fprintf(stderr, "test_gpu: cannot open the GPU: %s (%s)\n", eliza_status_name(rc), why);
        return 1;
    }
    printf("test_gpu: device '%s' (%s, %s), subgroup %u (arithmetic %d), fp16 %d, int8 dot %d, validation %s\n",
           ez_gpu_info(g_gpu)->name, ez_gpu_info(g_gpu)->type, ez_gpu_info(g_gpu)->driver,
           ez_gpu_info(g_gpu)->subgroup_size, ez_gpu_info(g_gpu)->subgroup_arith, ez_gpu_info(g_gpu)->fp16,
           ez_gpu_info(g_gpu)->int8_dot,
           p.validation ? "on" : "off");
    test_gpu_matvec_matches_reference();
    test_gpu_matmul_matches_reference();
    test_gpu_row_and_elementwise_ops_match_reference();
    test_gpu_rope_matches_reference();
    test_gpu_add_rms_norm_matches_composed_ops();
    test_gpu_qk_rope_matches_separate_ops();
    test_gpu_qk_rope_batch_matches_reference();
    test_gpu_argmax_picks_the_first_largest();
    test_gpu_attention_matches_reference();
    test_gpu_attention_batch_matches_reference();
    test_gpu_recorded_step_replays_with_new_inputs();
    test_gpu_overlapped_ops_are_still_waited_for();
    test_gpu_step_words_move_a_replayed_recording();
    if (ez_gpu_info(g_gpu)->subgroup_arith) {
        /* The row ops' workgroup sums and maxima again on the shared-memory trees. */
        ez_gpu *sub = g_gpu;
        printf("  the row ops with the shared-memory reductions\n");
        g_gpu = g_tree;
        test_gpu_row_and_elementwise_ops_match_reference();
        test_gpu_add_rms_norm_matches_composed_ops();
        test_gpu_qk_rope_matches_separate_ops();
        test_gpu_attention_matches_reference();
        g_gpu = sub;
    }
    test_gpu_device_choice_and_denylist();
    test_gpu_bad_sizes_fail_cleanly();
    if (p.validation) test_gpu_validation_errors_fail_the_next_call();
    CHECK_MSG(ez_gpu_validation_errors(g_gpu) == 0 && ez_gpu_validation_errors(g_wide) == 0 &&
                  ez_gpu_validation_errors(g_tree) == 0,
              "%d + %d + %d validation error(s)", ez_gpu_validation_errors(g_gpu), ez_gpu_validation_errors(g_wide),
              ez_gpu_validation_errors(g_tree));
    ez_gpu_close(g_gpu);
    ez_gpu_close(g_tree);
    ez_gpu_close(g_wide);
    if (g_failed) {
        fprintf(stderr, "test_gpu: FAILED (%d of %d checks)\n", g_failed, g_failed + g_passed);
        return 1;
    }
    printf("test_gpu: ok (%d checks)\n", g_passed);
    return 0;
}
#endif
