/* Fast paths of the Kokoro layers (ops.h).
 *
 * The convolutions are GEMMs on core/gemm's register-blocked tiles
 * (core/kernels/gemm_kernels.h), with operands packed straight from the
 * layers' own layouts:
 *  - conv1d, stride 1 and groups 1, long enough (ez_tts_conv1d_prefers_fft):
 *    by overlap-save FFT, per-bin GEMMs on the same tiles (ops_fft.c);
 *  - conv1d otherwise, per group: y[c_out, t_out] = w[c_out, c_in k] .
 *    cols[c_in k, t_out], cols being im2col(x); its panels are packed from x
 *    as the tiles need them, so there is no im2col buffer.
 *  - conv_transpose1d, per group: cols[(o, j), s] = sum over c of
 *    w[c, o, j] x[c, s] (w read as the transpose it is), then col2im:
 *    y[o, s stride - pad + j] += cols[(o, j), s]. Tasks own whole output
 *    channels, so no two threads add into the same row.
 *  - depthwise convolutions (one channel per group) are direct loops.
 *  - LSTM: one GEMM for the input projections of every step, then per step
 *    only w_hh . h_{t-1} and the cell update, split over hidden units: core's
 *    LSTM step (core/kernels/lstm.h), which diarization shares.
 * Work is split over blocks of outputs (channels, time, hidden units), and
 * each output is computed by the same operations whatever block holds it:
 * depth is always cut at the same kc boundaries, and the tile kernels form
 * each sum from zero. So results are bit-identical for any thread count.
 *
 * Working memory is the pool's per-thread scratch. A thread that cannot get
 * it computes its block by plain loops instead (right, only slower), and the
 * op logs a warning. ELIZA_FORCE_SCALAR=1 (or a CPU without kernels) runs
 * the references in ops_ref.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomic.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/gemm.h"
#include "core/kernels/gemm_bf16.h"
#include "core/kernels/gemm_kernels_ext.h"
#include "core/kernels/lstm.h"
#include "core/platform.h"
#include "core/quant.h"
#include "tts/ops.h"
#include "tts/ops_kernels.h"

/* ---- kernel selection (GEMM tiles: ez_gemm_kernels_active) ------------------------------ */

static void snake_c(float *x, int64_t n, float alpha) {
    for (int64_t i = 0; i < n; i++) {
        float s = sinf(alpha * x[i]);
        x[i] += (1.0f / alpha) * (s * s);
    }
}

static void mean_var_c(const float *x, int64_t n, double *mean_out, double *var_out) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; i++) mean += x[i];
    mean /= (double)n;
    for (int64_t i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    *mean_out = mean;
    *var_out = var / (double)n;
}

static void affine_act_c(float *x, int64_t n, double mean, float inv, float scale, float shift, int act,
                         float param) {
    for (int64_t i = 0; i < n; i++) {
        float v = scale * ((float)(x[i] - mean) * inv) + shift;
        if (act == EZ_TTS_ACT_SNAKE) {
            float s = sinf(param * v);
            v += (1.0f / param) * (s * s);
        } else if (act == EZ_TTS_ACT_LEAKY_RELU) {
            v = v < 0 ? v * param : v;
        }
        x[i] = v;
    }
}

static const ez_tts_kernels portable_kernels = {snake_c, mean_var_c, affine_act_c, ez_tts_gelu_tanh_ref};

/* NULL under ELIZA_FORCE_SCALAR or on a CPU without GEMM kernels: the
 * references run then. */
static const ez_tts_kernels *tts_kernels(void) {
    if (ez_simd_level_active() == EZ_SIMD_SCALAR) return NULL;
    return EZ_SIMD_PICK(ez_tts_kernels_avx512(), ez_tts_kernels_avx2(), NULL, ez_tts_kernels_neon(),
                        &portable_kernels);
}

/* ---- working memory ------------------------------------------------------------------------ */

/* The scratch slot of thread_index, or without a pool a private block the
 * caller frees (ez_aligned_free(*owned)). */
static float *take_scratch(ez_pool *pool, int thread_index, size_t bytes, void **owned) {
    *owned = NULL;
    if (pool) return (float *)ez_pool_scratch(pool, thread_index, bytes);
    *owned = ez_aligned_alloc(bytes);
    return (float *)*owned;
}

/* Floats, rounded up to whole 64-byte lines, so carved regions stay aligned. */
static size_t whole_lines(int64_t floats) { return (size_t)((floats + 15) / 16 * 16); }

/* Logging is for the thread inside the API call, never for pool workers. */
static void warn_starved(ez_pool *pool, const char *op, int starved) {
    if (starved && ez_pool_thread_index(pool) == 0)
        ez_log(ELIZA_LOG_WARN, "%s: no scratch memory for the packed kernels; ran the plain loops instead", op);
}

static int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

/* ---- GEMM on packed operands -------------------------------------------------------------- */

enum { B_IM2COL, B_NK };

/* C[M, N] (+)= A[M, K] . B[K, N] with A and B described, not stored:
 *   A[m, k] = a[m * a_rs + k * a_cs] (row-major weights, or a transpose),
 *             or with a_panels: panel m / mr of them at row m % mr, depth k
 *             (ez_tts_panels, made for this mr);
 *   B_IM2COL: B[ci * taps + j, n] = x[ci, n * stride - pad + j * dilation],
 *             x = b with rows of t_in, zero outside [0, t_in);
 *   B_NK:     B[k, n] = b[n * ldb + k] (a weight stored [N, K]);
 * and with b_packed, B's micro-panels made once for every block (pack_b of
 * each depth slice k0 at b_packed + k0 b_n_pad, b_n_pad = N rounded up to
 * nr). */
typedef struct {
    int64_t M, N, K;
    const float *a;
    int64_t a_rs, a_cs;
    const uint16_t *a_panels;
    int b_kind;
    const float *b;
    int64_t ldb, t_in;
    const float *b_packed;
    int64_t b_n_pad;
    int taps, stride, pad, dilation;
} operands;

static float a_at(const operands *op, int mr, int64_t m, int64_t k) {
    if (op->a_panels) return ez_f16_to_f32(op->a_panels[((m / mr) * op->K + k) * mr + m % mr]);
    return op->a[m * op->a_rs + k * op->a_cs];
}

static float b_at(const operands *op, int64_t k, int64_t n) {
    int64_t ci, j, ti;
    if (op->b_kind == B_NK) return op->b[n * op->ldb + k];
    ci = k / op->taps;
    j = k % op->taps;
    ti = n * op->stride - op->pad + j * op->dilation;
    return ti >= 0 && ti < op->t_in ? op->b[ci * op->t_in + ti] : 0.0f;
}

/* Rows [m0, m0 + m_len) x depth [k0, k0 + kc) of A as zero-padded micro-panels. */
static void pack_a(const operands *op, int mr, int64_t k0, int64_t kc, int64_t m0, int64_t m_len, float *dst) {
    if (op->a_panels) { /* laid out already (m0 is a multiple of mr): widen each panel's slice */
        const ez_dequant_fn widen = ez_kernels(EZ_TYPE_F16)->dequant;
        for (int64_t i0 = 0; i0 < m_len; i0 += mr)
            widen(op->a_panels + ((m0 + i0) / mr * op->K + k0) * mr, dst + i0 * kc, kc * mr);
        return;
    }
    for (int64_t i0 = 0; i0 < m_len; i0 += mr) {
        int rows = (int)EZ_MIN((int64_t)mr, m_len - i0);
        const float *src = op->a + (m0 + i0) * op->a_rs + k0 * op->a_cs;
        if (op->a_cs == 1) { /* rows stored along k: read each row in order */
            for (int i = 0; i < rows; i++)
                for (int64_t k = 0; k < kc; k++) dst[k * mr + i] = src[i * op->a_rs + k];
            for (int i = rows; i < mr; i++)
                for (int64_t k = 0; k < kc; k++) dst[k * mr + i] = 0.0f;
            dst += kc * mr;
            continue;
        }
        for (int64_t k = 0; k < kc; k++) {
            for (int i = 0; i < rows; i++) dst[i] = src[i * op->a_rs + k * op->a_cs];
            for (int i = rows; i < mr; i++) dst[i] = 0.0f;
            dst += mr;
        }
    }
}

/* Columns [n0, n0 + n_len) x depth [k0, k0 + kc) of an im2col B as
 * zero-padded micro-panels: runs of x where the stride is 1 and the window
 * is inside, element by element at the edges. */
static void pack_b_im2col(const operands *op, int nr, int64_t k0, int64_t kc, int64_t n0, int64_t n_len,
                          float *dst) {
    for (int64_t j0 = 0; j0 < n_len; j0 += nr) {
        int cols = (int)EZ_MIN((int64_t)nr, n_len - j0);
        int64_t ci = k0 / op->taps, j = k0 % op->taps;
        for (int64_t k = 0; k < kc; k++) {
            const float *row = op->b + ci * op->t_in;
            int64_t base = (n0 + j0) * op->stride - op->pad + j * op->dilation;
            float *d = dst + k * nr;
            if (op->stride == 1 && base >= 0 && base + cols <= op->t_in) {
                if (cols == 16) /* the common case: a fixed-size copy the compiler inlines */
                    memcpy(d, row + base, sizeof(float) * 16);
                else
                    memcpy(d, row + base, sizeof(float) * (size_t)cols);
            } else {
                for (int c = 0; c < cols; c++) {
                    int64_t ti = base + (int64_t)c * op->stride;
                    d[c] = ti >= 0 && ti < op->t_in ? row[ti] : 0.0f;
                }
            }
            for (int c = cols; c < nr; c++) d[c] = 0.0f;
            if (++j == op->taps) {
                j = 0;
                ci++;
            }
        }
        dst += kc * nr;
    }
}

static void pack_b(const ez_gemm_kernels *kern, const operands *op, int64_t k0, int64_t kc, int64_t n0,
                   int64_t n_len, float *dst) {
    const int nr = kern->nr;
    if (op->b_kind == B_IM2COL) {
        pack_b_im2col(op, nr, k0, kc, n0, n_len, dst);
    } else if (kern->pack_b_nk) {
        kern->pack_b_nk(kc, n_len, op->b + n0 * op->ldb + k0, op->ldb, dst);
    } else {
        for (int64_t j0 = 0; j0 < n_len; j0 += nr) {
            int cols = (int)EZ_MIN((int64_t)nr, n_len - j0);
            for (int64_t k = 0; k < kc; k++)
                for (int c = 0; c < nr; c++) dst[k * nr + c] = c < cols ? b_at(op, k0 + k, n0 + j0 + c) : 0.0f;
            dst += kc * nr;
        }
    }
}

/* B's micro-panels of depth [k0, k0 + kc) x columns [n0, n0 + n_len)
 * (n0 a multiple of nr): where op has them made already, or packed into dst. */
static const float *b_panels(const ez_gemm_kernels *kern, const operands *op, int64_t k0, int64_t kc, int64_t n0,
                             int64_t n_len, float *dst) {
    if (op->b_packed) return op->b_packed + k0 * op->b_n_pad + n0 * kc;
    pack_b(kern, op, k0, kc, n0, n_len, dst);
    return dst;
}

/* Floats of working memory gemm_block needs. */
static int64_t gemm_ws_floats(const ez_gemm_kernels *kern) { return (int64_t)kern->kc * (kern->mc + kern->nc); }

/* The tiles of one packed A block (mb rows) times one packed B panel (nb
 * columns) onto c (row stride ldc), added when acc. */
static void gemm_tiles(const ez_gemm_kernels *kern, int64_t kc, const float *a_pack, int64_t mb, const float *b_pack,
                       int64_t nb, float *c, int64_t ldc, int acc) {
    const int mr = kern->mr, nr = kern->nr;
    for (int64_t j = 0; j < nb; j += nr) {
        const float *bp = b_pack + j * kc;
        for (int64_t i = 0; i < mb; i += mr) {
            const float *ap = a_pack + i * kc;
            float *ct = c + i * ldc + j;
            int rows = (int)EZ_MIN((int64_t)mr, mb - i), cols = (int)EZ_MIN((int64_t)nr, nb - j);
            if (rows == mr && cols == nr) {
                kern->tile(kc, ap, bp, ct, ldc, acc);
            } else {
                float tile[EZ_GEMM_MAX_TILE];
                kern->tile(kc, ap, bp, tile, nr, 0);
                for (int r = 0; r < rows; r++)
                    for (int q = 0; q < cols; q++)
                        ct[r * ldc + q] = acc ? ct[r * ldc + q] + tile[r * nr + q] : tile[r * nr + q];
            }
        }
    }
}

/* c[0..m_len, 0..n_len) (+)= rows [m0, ..) of A . columns [n0, ..) of B, c
 * with row stride ldc: added to c when accumulate, written otherwise. The
 * first depth slice goes straight onto c (tiles form their sums from zero
 * and then add), later slices add, so every element sees the same kc slices
 * in the same order whatever block it is in (and whichever loop order).
 * Rows that fit one A block (m_len <= mc) are packed once per depth slice
 * for all the columns; taller blocks pack A per column panel. */
static void gemm_block(const ez_gemm_kernels *kern, const operands *op, float *ws, int64_t m0, int64_t m_len,
                       int64_t n0, int64_t n_len, float *c, int64_t ldc, int accumulate) {
    const int mr = kern->mr;
    float *a_pack = ws, *b_pack = ws + (int64_t)kern->mc * kern->kc;
    const float *b;
    if (op->K <= 0) {
        if (!accumulate)
            for (int64_t i = 0; i < m_len; i++) memset(c + i * ldc, 0, sizeof(float) * (size_t)n_len);
        return;
    }
    if (m_len <= kern->mc) {
        for (int64_t k0 = 0; k0 < op->K; k0 += kern->kc) {
            int64_t kc = EZ_MIN((int64_t)kern->kc, op->K - k0);
            pack_a(op, mr, k0, kc, m0, m_len, a_pack);
            for (int64_t nb0 = 0; nb0 < n_len; nb0 += kern->nc) {
                int64_t nb = EZ_MIN((int64_t)kern->nc, n_len - nb0);
                b = b_panels(kern, op, k0, kc, n0 + nb0, nb, b_pack);
                gemm_tiles(kern, kc, a_pack, m_len, b, nb, c + nb0, ldc, accumulate || k0 > 0);
            }
        }
        return;
    }
    for (int64_t nb0 = 0; nb0 < n_len; nb0 += kern->nc) {
        int64_t nb = EZ_MIN((int64_t)kern->nc, n_len - nb0);
        for (int64_t k0 = 0; k0 < op->K; k0 += kern->kc) {
            int64_t kc = EZ_MIN((int64_t)kern->kc, op->K - k0);
            b = b_panels(kern, op, k0, kc, n0 + nb0, nb, b_pack);
            for (int64_t mb0 = 0; mb0 < m_len; mb0 += kern->mc) {
                int64_t mb = EZ_MIN((int64_t)kern->mc, m_len - mb0);
                pack_a(op, mr, k0, kc, m0 + mb0, mb, a_pack);
                gemm_tiles(kern, kc, a_pack, mb, b, nb, c + mb0 * ldc + nb0, ldc, accumulate || k0 > 0);
            }
        }
    }
}

/* gemm_block without working memory, for a thread that could not get any. */
static void gemm_block_plain(const ez_gemm_kernels *kern, const operands *op, int64_t m0, int64_t m_len, int64_t n0,
                             int64_t n_len, float *c, int64_t ldc, int accumulate) {
    for (int64_t i = 0; i < m_len; i++)
        for (int64_t j = 0; j < n_len; j++) {
            float s = 0.0f;
            for (int64_t k = 0; k < op->K; k++) s += a_at(op, kern->mr, m0 + i, k) * b_at(op, k, n0 + j);
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + s : s;
        }
}

/* A threaded GEMM over groups x row blocks x column blocks. Group g uses A
 * and B displaced by g * a_group, g * b_group and writes C + g * c_group. */
typedef struct {
    const ez_gemm_kernels *kern;
    operands op;
    int groups;
    int64_t a_group, b_group, c_group;
    float *c;
    int64_t ldc;
    const float *row_bias; /* [groups * M] written into each block first, or NULL */
    int accumulate;        /* without row_bias: add onto C */
    int64_t mb, nb, m_blocks, n_blocks;
    ez_pool *pool;
    int caller_index;      /* this thread uses caller_ws, when set, instead of its slot */
    float *caller_ws;
    size_t ws_bytes;
    ez_atomic_int starved;
} gemm_job;

static void gemm_tasks(void *ctx, int64_t t0, int64_t t1, int thread_index) {
    gemm_job *job = (gemm_job *)ctx;
    void *owned = NULL;
    float *ws = thread_index == job->caller_index && job->caller_ws
                    ? job->caller_ws
                    : take_scratch(job->pool, thread_index, job->ws_bytes, &owned);
    int64_t per_group = job->m_blocks * job->n_blocks;
    for (int64_t t = t0; t < t1; t++) {
        int64_t g = t / per_group, r = t % per_group;
        int64_t m0 = (r % job->m_blocks) * job->mb, n0 = (r / job->m_blocks) * job->nb;
        int64_t m_len = EZ_MIN(job->mb, job->op.M - m0), n_len = EZ_MIN(job->nb, job->op.N - n0);
        operands op = job->op;
        float *c = job->c + g * job->c_group + m0 * job->ldc + n0;
        int accumulate = job->accumulate;
        if (op.a) op.a += g * job->a_group; /* NULL with panels (groups 1) */
        op.b += g * job->b_group;
        if (job->row_bias) {
            for (int64_t i = 0; i < m_len; i++) {
                float v = job->row_bias[g * job->op.M + m0 + i];
                for (int64_t j = 0; j < n_len; j++) c[i * job->ldc + j] = v;
            }
            accumulate = 1;
        }
        if (ws) {
            gemm_block(job->kern, &op, ws, m0, m_len, n0, n_len, c, job->ldc, accumulate);
        } else {
            gemm_block_plain(job->kern, &op, m0, m_len, n0, n_len, c, job->ldc, accumulate);
            ez_atomic_int_store(&job->starved, 1);
        }
    }
    ez_aligned_free(owned);
}

/* Row blocks of at most mc rows, as even as whole micro-panels make them (a
 * decoder layer's 1,024 rows in 144-row blocks left a last block of 16: on
 * two threads one ran four blocks while the other ran three and that one);
 * column blocks cut so there are a few tasks per thread (for balance), no
 * wider than GEMM_NC_BLOCKS panels of nc (gemm_block packs a block's A once
 * for all of them). Every output sees the same depth slices whatever its
 * block, so the blocking changes no bits. */
#define GEMM_NC_BLOCKS 4

static void gemm_plan(gemm_job *job, int n_threads) {
    const ez_gemm_kernels *kern = job->kern;
    int64_t want = 4 * (int64_t)n_threads, column_blocks;
    job->m_blocks = (round_up(job->op.M, kern->mr) + kern->mc - 1) / kern->mc;
    job->mb = round_up((job->op.M + job->m_blocks - 1) / job->m_blocks, kern->mr);
    job->m_blocks = (job->op.M + job->mb - 1) / job->mb;
    column_blocks = EZ_MAX((int64_t)1, (want + job->m_blocks * job->groups - 1) / (job->m_blocks * job->groups));
    job->nb = EZ_MIN(round_up((job->op.N + column_blocks - 1) / column_blocks, kern->nr),
                      (int64_t)kern->nc * GEMM_NC_BLOCKS);
    job->n_blocks = (job->op.N + job->nb - 1) / job->nb;
    job->ws_bytes = sizeof(float) * (size_t)gemm_ws_floats(kern);
}

static void gemm_job_init(gemm_job *job, ez_pool *pool, const ez_gemm_kernels *kern, const operands *op, int groups,
                          float *c, int64_t ldc) {
    memset(job, 0, sizeof *job);
    job->kern = kern;
    job->op = *op;
    job->groups = groups;
    job->c = c;
    job->ldc = ldc;
    job->pool = pool;
    job->caller_index = -1;
    ez_atomic_int_store(&job->starved, 0);
    gemm_plan(job, ez_pool_threads(pool));
}

static int gemm_run(gemm_job *job) {
    ez_pool_for(job->pool, job->groups * job->m_blocks * job->n_blocks, 1, gemm_tasks, job);
    return ez_atomic_int_load(&job->starved);
}

/* ---- linear ------------------------------------------------------------------------------- */

typedef struct {
    const float *x, *w, *b;
    int n_in, n_out;
    float *y;
} linear_job;

static void linear_ref_rows(void *ctx, int64_t t0, int64_t t1, int thread_index) {
    const linear_job *job = (const linear_job *)ctx;
    (void)thread_index;
    ez_tts_linear_ref(job->x + t0 * job->n_in, (int)(t1 - t0), job->n_in, job->w, job->b, job->n_out,
                      job->y + t0 * job->n_out);
}

void ez_tts_linear(ez_pool *pool, const float *x, int T, int n_in, const float *w, const float *b, int n_out,
                   float *y) {
    if (T <= 0 || n_out <= 0) return;
    if (!ez_gemm_kernels_active(NULL)) {
        linear_job job = {x, w, b, n_in, n_out, y};
        ez_pool_for(pool, T, 4, linear_ref_rows, &job);
        return;
    }
    if (b)
        for (int t = 0; t < T; t++) memcpy(y + (int64_t)t * n_out, b, sizeof(float) * (size_t)n_out);
    ez_gemm_f32(pool, T, n_out, n_in, x, n_in, w, n_in, 1, y, n_out, b != NULL);
}

/* ---- conv1d ------------------------------------------------------------------------------- */

typedef struct {
    const float *x, *w, *b;
    int c_in, t_in, c_out, k, stride, pad, dilation, t_out;
    float *y;
} conv_job;

static void conv1d_ref_channels(void *ctx, int64_t o0, int64_t o1, int thread_index) {
    const conv_job *j = (const conv_job *)ctx;
    (void)thread_index;
    ez_tts_conv1d_ref(j->x, j->c_in, j->t_in, j->w + o0 * j->c_in * j->k, j->b ? j->b + o0 : NULL, (int)(o1 - o0),
                      j->k, j->stride, j->pad, j->dilation, 1, j->y + o0 * j->t_out);
}

/* One input channel per output channel. */
static void conv1d_depthwise(void *ctx, int64_t c0, int64_t c1, int thread_index) {
    const conv_job *j = (const conv_job *)ctx;
    (void)thread_index;
    for (int64_t c = c0; c < c1; c++) {
        const float *xr = j->x + c * j->t_in, *wc = j->w + c * j->k;
        float *yr = j->y + c * j->t_out;
        for (int t = 0; t < j->t_out; t++) {
            float acc = j->b ? j->b[c] : 0.0f;
            for (int q = 0; q < j->k; q++) {
                int ti = t * j->stride - j->pad + q * j->dilation;
                if (ti >= 0 && ti < j->t_in) acc += wc[q] * xr[ti];
            }
            yr[t] = acc;
        }
    }
}

void ez_tts_conv1d(ez_pool *pool, const float *x, int c_in, int t_in, const float *w, const float *b, int c_out,
                   int k, int stride, int pad, int dilation, int groups, float *y) {
    if (ez_tts_conv1d_prefers_fft(c_in, t_in, c_out, k, stride, pad, dilation, groups)) {
        if (ez_tts_conv1d_fft(pool, x, c_in, t_in, w, b, c_out, k, pad, dilation, y) == ELIZA_OK) return;
        if (ez_pool_thread_index(pool) == 0)
            ez_log(ELIZA_LOG_WARN, "conv1d: no scratch memory for the FFT path; ran the direct one");
    }
    ez_tts_conv1d_direct(pool, x, c_in, t_in, w, b, c_out, k, stride, pad, dilation, groups, y);
}

void ez_tts_conv1d_bf16(ez_pool *pool, const float *x, int c_in, int t_in, const float *w, const float *b, int c_out,
                        int k, int stride, int pad, int dilation, int groups, float *y) {
    if (ez_tts_conv1d_prefers_fft(c_in, t_in, c_out, k, stride, pad, dilation, groups) &&
        ez_tts_conv1d_fft_bf16(pool, x, c_in, t_in, w, b, c_out, k, pad, dilation, y) == ELIZA_OK)
        return;
    ez_tts_conv1d(pool, x, c_in, t_in, w, b, c_out, k, stride, pad, dilation, groups, y);
}

int ez_tts_bf16_available(void) { return ez_gemm_bf16_kernels_active() != NULL; }

int ez_tts_bf16_rule(const ez_cpu_info *cpu, int available, const char *env, const char **why) {
    const int forced_on = env && strcmp(env, "1") == 0, forced_off = env && strcmp(env, "0") == 0;
    const char *w;
    int on = 0;
    if (!available)
        w = forced_on ? "off: ELIZA_TTS_BF16=1, but this CPU or level has no BF16 kernels (avx512 with AVX512_BF16)"
                      : "off: no BF16 kernels at this CPU or level (avx512 with AVX512_BF16)";
    else if (forced_on)
        on = 1, w = "on: ELIZA_TTS_BF16=1";
    else if (forced_off)
        w = "off: ELIZA_TTS_BF16=0";
    else if (cpu->vendor == EZ_CPU_VENDOR_AMD && cpu->family == 0x19)
        on = 1, w = "on by default: AMD family 0x19 (Zen 4) runs vdpbf16ps at twice float32's multiply-add rate";
    else
        w = "off by default: vdpbf16ps is not known to run at full rate on this CPU (half float32's rate on the "
            "Intel Xeon measured; Zen 5 not measured)";
    if (why) *why = w;
    return on;
}

int ez_tts_bf16_default(const char **why) {
    return ez_tts_bf16_rule(ez_cpu_info_get(), ez_tts_bf16_available(), getenv("ELIZA_TTS_BF16"), why);
}

/* im2col B packed once for all row blocks, up to this many floats: with
 * several row blocks each task packed all of B again (a decoder layer's 8
 * blocks, 3,270 x 64 floats each). */
#define SHARED_B_FLOATS ((int64_t)1 << 21)

typedef struct {
    const ez_gemm_kernels *kern;
    const operands *op;
    float *dst;
    int64_t col_items; /* items per depth slice: nc columns each */
} shared_b_job;

static void shared_b_items(void *ctx, int64_t i0, int64_t i1, int thread_index) {
    const shared_b_job *j = (const shared_b_job *)ctx;
    const int64_t kc_max = j->kern->kc, nc = j->kern->nc;
    (void)thread_index;
    for (int64_t it = i0; it < i1; it++) {
        const int64_t k0 = it / j->col_items * kc_max, n0 = it % j->col_items * nc;
        const int64_t kc = EZ_MIN(kc_max, j->op->K - k0);
        pack_b(j->kern, j->op, k0, kc, n0, EZ_MIN(nc, j->op->N - n0), j->dst + k0 * j->op->b_n_pad + n0 * kc);
    }
}

/* The direct path's GEMM per group: w [c_out, c_in / groups, k] as stored,
 * or (groups 1) as panels. */
static void conv1d_gemm(ez_pool *pool, const ez_gemm_kernels *kern, const float *x, int c_in, int t_in,
                        const float *w, const uint16_t *panels, const float *b, int c_out, int k, int stride,
                        int pad, int dilation, int groups, int t_out, float *y) {
    int cig = c_in / groups, cog = c_out / groups, caller = ez_pool_thread_index(pool);
    void *owned = NULL;
    operands op;
    gemm_job job;
    memset(&op, 0, sizeof op);
    op.M = cog;
    op.N = t_out;
    op.K = (int64_t)cig * k;
    op.a = w;
    op.a_rs = op.K;
    op.a_cs = 1;
    op.a_panels = panels;
    op.b_kind = B_IM2COL;
    op.b = x;
    op.t_in = t_in;
    op.taps = k;
    op.stride = stride;
    op.pad = pad;
    op.dilation = dilation;
    gemm_job_init(&job, pool, kern, &op, groups, y, t_out);
    job.a_group = (int64_t)cog * cig * k;
    job.b_group = (int64_t)cig * t_in;
    job.c_group = (int64_t)cog * t_out;
    job.row_bias = b;
    if (groups == 1 && job.m_blocks > 1) {
        const int64_t n_pad = round_up(op.N, kern->nr), floats = n_pad * op.K;
        const size_t bytes = job.ws_bytes + sizeof(float) * (size_t)floats;
        float *mem = floats <= SHARED_B_FLOATS ? take_scratch(pool, caller, bytes, &owned) : NULL;
        if (mem) {
            shared_b_job sb = {kern, &job.op, mem + job.ws_bytes / sizeof(float), (op.N + kern->nc - 1) / kern->nc};
            job.op.b_n_pad = n_pad;
            ez_pool_for(pool, (op.K + kern->kc - 1) / kern->kc * sb.col_items, 1, shared_b_items, &sb);
            job.op.b_packed = sb.dst;
            job.caller_index = caller;
            job.caller_ws = mem;
        }
    }
    warn_starved(pool, "conv1d", gemm_run(&job));
    ez_aligned_free(owned);
}

void ez_tts_conv1d_direct(ez_pool *pool, const float *x, int c_in, int t_in, const float *w, const float *b,
                          int c_out, int k, int stride, int pad, int dilation, int groups, float *y) {
    const ez_gemm_kernels *kern = ez_gemm_kernels_active(NULL);
    int t_out = ez_conv1d_out_len(t_in, k, stride, pad, dilation);
    conv_job cj = {x, w, b, c_in, t_in, c_out, k, stride, pad, dilation, t_out, y};
    if (t_out <= 0 || c_out <= 0) return;
    if (!kern) {
        if (groups == 1)
            ez_pool_for(pool, c_out, 8, conv1d_ref_channels, &cj);
        else
            ez_tts_conv1d_ref(x, c_in, t_in, w, b, c_out, k, stride, pad, dilation, groups, y);
        return;
    }
    if (c_in / groups == 1 && c_out / groups == 1) {
        ez_pool_for(pool, c_out, 16, conv1d_depthwise, &cj);
        return;
    }
    conv1d_gemm(pool, kern, x, c_in, t_in, w, NULL, b, c_out, k, stride, pad, dilation, groups, t_out, y);
}

/* ---- weights as panels -------------------------------------------------------------------- */

int ez_tts_panels_mr(void) {
    const ez_gemm_kernels *kern = ez_gemm_kernels_active(NULL);
    return kern ? kern->mr : 0;
}

int64_t ez_tts_panels_count(int c_out, int64_t K, int mr) { return round_up(c_out, mr) * K; }

void ez_tts_panels_pack(const uint16_t *w, int c_out, int64_t K, int mr, uint16_t *dst) {
    for (int64_t i0 = 0; i0 < c_out; i0 += mr, dst += K * mr)
        for (int64_t k = 0; k < K; k++)
            for (int i = 0; i < mr; i++) dst[k * mr + i] = i0 + i < c_out ? w[(i0 + i) * K + k] : 0;
}

int32_t ez_tts_conv1d_direct_panels(ez_pool *pool, const float *x, int c_in, int t_in, const ez_tts_panels *w,
                                    const float *b, int c_out, int k, int stride, int pad, int dilation, float *y) {
    const ez_gemm_kernels *kern = ez_gemm_kernels_active(NULL);
    int t_out = ez_conv1d_out_len(t_in, k, stride, pad, dilation);
    if (!kern || !w->h || w->mr != kern->mr || kern->mc % kern->mr) return ELIZA_E_UNSUPPORTED;
    if (t_out > 0 && c_out > 0)
        conv1d_gemm(pool, kern, x, c_in, t_in, NULL, w->h, b, c_out, k, stride, pad, dilation, 1, t_out, y);
    return ELIZA_OK;
}

/* ---- conv_transpose1d ------------------------------------------------------------------------ */

/* Columns of s per GEMM block of a transposed convolution: the column
 * buffer of a task is (channels x k) rows of this. A constant, so the order
 * in which col2im adds into an output never depends on the thread count. */
#define CONVT_COLS 512
/* Rows (output channels x taps) a task aims for: the packed A block. */
#define CONVT_ROWS 256

typedef struct {
    const ez_gemm_kernels *kern;
    const float *x, *w, *b;
    int c_in, t_in, c_out, k, stride, pad, groups, t_out, cig, cog;
    int cb, blocks;  /* output channels per task, tasks per group */
    float *y;
    ez_pool *pool;
    size_t ws_bytes;
    ez_atomic_int starved;
} convt_job;

/* y rows [o0, o0 + n_oc) of group g, without working memory: the
 * reference's gather. */
static void convt_plain(const convt_job *j, int g, int o0, int n_oc) {
    for (int o = o0; o < o0 + n_oc; o++) {
        float *yr = j->y + ((int64_t)g * j->cog + o) * j->t_out;
        for (int t = 0; t < j->t_out; t++) {
            float acc = j->b ? j->b[g * j->cog + o] : 0.0f;
            for (int q = 0; q < j->k; q++) {
                int num = t + j->pad - q, s;
                if (num < 0 || num % j->stride) continue;
                s = num / j->stride;
                if (s >= j->t_in) continue;
                for (int ci = 0; ci < j->cig; ci++) {
                    int64_t c = (int64_t)g * j->cig + ci;
                    acc += j->x[c * j->t_in + s] * j->w[(c * j->cog + o) * j->k + q];
                }
            }
            yr[t] = acc;
        }
    }
}

static void convt_tasks(void *ctx, int64_t t0, int64_t t1, int thread_index) {
    convt_job *j = (convt_job *)ctx;
    void *owned = NULL;
    float *ws = take_scratch(j->pool, thread_index, j->ws_bytes, &owned);
    float *cols = ws ? ws + gemm_ws_floats(j->kern) : NULL;
    for (int64_t task = t0; task < t1; task++) {
        int g = (int)(task / j->blocks), o0 = (int)(task % j->blocks) * j->cb;
        int n_oc = EZ_MIN(j->cb, j->cog - o0);
        float *yrows = j->y + ((int64_t)g * j->cog + o0) * j->t_out;
        operands op;
        memset(&op, 0, sizeof op);
        if (!ws) {
            convt_plain(j, g, o0, n_oc);
            ez_atomic_int_store(&j->starved, 1);
            continue;
        }
        for (int o = 0; o < n_oc; o++) {
            float v = j->b ? j->b[g * j->cog + o0 + o] : 0.0f;
            for (int t = 0; t < j->t_out; t++) yrows[(int64_t)o * j->t_out + t] = v;
        }
        /* A[(o, q), ci] = w[g cig + ci, o0 + o, q]: w read transposed. */
        op.M = (int64_t)n_oc * j->k;
        op.N = j->t_in;
        op.K = j->cig;
        op.a = j->w + ((int64_t)g * j->cig * j->cog + o0) * j->k;
        op.a_rs = 1;
        op.a_cs = (int64_t)j->cog * j->k;
        op.b_kind = B_IM2COL;
        op.b = j->x + (int64_t)g * j->cig * j->t_in;
        op.ldb = 0;
        op.t_in = j->t_in;
        op.taps = 1;
        op.stride = 1;
        op.pad = 0;
        op.dilation = 1;
        for (int s0 = 0; s0 < j->t_in; s0 += CONVT_COLS) {
            int ns = EZ_MIN(CONVT_COLS, j->t_in - s0);
            gemm_block(j->kern, &op, ws, 0, op.M, s0, ns, cols, ns, 0);
            for (int o = 0; o < n_oc; o++) {
                float *yr = yrows + (int64_t)o * j->t_out;
                for (int q = 0; q < j->k; q++) {
                    const float *src = cols + ((int64_t)o * j->k + q) * ns;
                    for (int s = 0; s < ns; s++) {
                        int t = (s0 + s) * j->stride - j->pad + q;
                        if (t >= 0 && t < j->t_out) yr[t] += src[s];
                    }
                }
            }
        }
    }
    ez_aligned_free(owned);
}

typedef struct {
    const float *x, *w, *b;
    int t_in, k, stride, pad, t_out;
    float *y;
} convt_dw_job;

/* One channel per group: y[c, s stride - pad + q] += w[c, q] x[c, s]. */
static void convt_depthwise(void *ctx, int64_t c0, int64_t c1, int thread_index) {
    const convt_dw_job *j = (const convt_dw_job *)ctx;
    (void)thread_index;
    for (int64_t c = c0; c < c1; c++) {
        const float *xr = j->x + c * j->t_in, *wc = j->w + c * j->k;
        float *yr = j->y + c * j->t_out;
        float v = j->b ? j->b[c] : 0.0f;
        for (int t = 0; t < j->t_out; t++) yr[t] = v;
        for (int q = 0; q < j->k; q++)
            for (int s = 0; s < j->t_in; s++) {
                int t = s * j->stride - j->pad + q;
                if (t >= 0 && t < j->t_out) yr[t] += wc[q] * xr[s];
            }
    }
}

void ez_tts_conv_transpose1d(ez_pool *pool, const float *x, int c_in, int t_in, const float *w, const float *b,
                             int c_out, int k, int stride, int pad, int out_pad, int groups, float *y) {
    const ez_gemm_kernels *kern = ez_gemm_kernels_active(NULL);
    int t_out = ez_conv_transpose1d_out_len(t_in, k, stride, pad, out_pad);
    convt_job j;
    int64_t want;
    if (t_out <= 0 || c_out <= 0) return;
    if (!kern) {
        ez_tts_conv_transpose1d_ref(x, c_in, t_in, w, b, c_out, k, stride, pad, out_pad, groups, y);
        return;
    }
    if (c_in == groups && c_out == groups) {
        convt_dw_job dw = {x, w, b, t_in, k, stride, pad, t_out, y};
        ez_pool_for(pool, c_out, 16, convt_depthwise, &dw);
        return;
    }
    memset(&j, 0, sizeof j);
    j.kern = kern;
    j.x = x;
    j.w = w;
    j.b = b;
    j.c_in = c_in;
    j.t_in = t_in;
    j.c_out = c_out;
    j.k = k;
    j.stride = stride;
    j.pad = pad;
    j.groups = groups;
    j.t_out = t_out;
    j.cig = c_in / groups;
    j.cog = c_out / groups;
    j.y = y;
    j.pool = pool;
    /* About CONVT_ROWS rows per task, but a few tasks per thread. */
    want = 4 * (int64_t)ez_pool_threads(pool);
    j.cb = EZ_MAX(1, EZ_MIN(j.cog, (CONVT_ROWS + k - 1) / k));
    j.cb = (int)EZ_MAX((int64_t)1, EZ_MIN((int64_t)j.cb, (int64_t)j.cog * groups / want));
    j.blocks = (j.cog + j.cb - 1) / j.cb;
    j.ws_bytes = sizeof(float) * (size_t)(gemm_ws_floats(kern) + (int64_t)j.cb * k * CONVT_COLS);
    ez_atomic_int_store(&j.starved, 0);
    ez_pool_for(pool, (int64_t)groups * j.blocks, 1, convt_tasks, &j);
    warn_starved(pool, "conv_transpose1d", ez_atomic_int_load(&j.starved));
}

/* ---- LSTM --------------------------------------------------------------------------------- */

/* Hidden units per chunk of a step: a multiple of the step kernels' 16, so
 * every chunk starts on a panel. */
#define LSTM_UNIT_GRAIN 32

typedef struct {
    ez_lstm_step_fn step;
    ez_pool *pool;
    int T, H, reverse, y_stride;
    const float *w_hh;   /* panels (core/kernels/lstm.h) */
    float *gates;        /* [T, 4H]: x . w_ih^T + b_ih + b_hh */
    float *c;            /* [H] */
    float *step_gates;   /* [4H]: the step kernel's scratch */
    const float *zeros;  /* [H]: h_{-1} */
    float *y;
    /* the step being run */
    const float *g_t, *h_prev;
    float *h_out;
} lstm_dir;

static void lstm_units(void *ctx, int64_t u0, int64_t u1, int thread_index) {
    const lstm_dir *d = (const lstm_dir *)ctx;
    (void)thread_index;
    d->step(1, d->H, (int)u0, (int)u1, &d->g_t, NULL, d->w_hh, d->h_prev, d->h_out, d->c, d->step_gates);
}

static void lstm_recurrence(lstm_dir *d) {
    memset(d->c, 0, sizeof(float) * (size_t)d->H);
    for (int step = 0; step < d->T; step++) {
        int t = d->reverse ? d->T - 1 - step : step, dir = d->reverse ? -1 : 1;
        d->g_t = d->gates + (int64_t)t * 4 * d->H;
        d->h_prev = step > 0 ? d->y + (int64_t)(t - dir) * d->y_stride : d->zeros;
        d->h_out = d->y + (int64_t)t * d->y_stride;
        ez_pool_for(d->pool, d->H, LSTM_UNIT_GRAIN, lstm_units, d);
    }
}

static void lstm_directions(void *ctx, int64_t d0, int64_t d1, int thread_index) {
    lstm_dir *dirs = (lstm_dir *)ctx;
    (void)thread_index;
    for (int64_t d = d0; d < d1; d++) lstm_recurrence(&dirs[d]);
}

/* gates[T, 4H] = x . w_ih^T + b_ih + b_hh, with the calling thread's
 * packing memory at ws (the GEMM tiles), or by ez_gemm_f32's reference
 * where there are no tiles (kern NULL). Returns nonzero if some thread ran
 * without scratch. */
static int lstm_project(ez_pool *pool, const ez_gemm_kernels *kern, int caller, float *ws, const float *x, int T,
                        int n_in, int H, const float *w_ih, const float *b_ih, const float *b_hh, float *gates) {
    operands op;
    gemm_job job;
    for (int r = 0; r < 4 * H; r++) gates[r] = (b_ih ? b_ih[r] : 0.0f) + (b_hh ? b_hh[r] : 0.0f);
    for (int t = 1; t < T; t++) memcpy(gates + (int64_t)t * 4 * H, gates, sizeof(float) * 4 * (size_t)H);
    if (!kern) {
        ez_gemm_f32(pool, T, 4 * (int64_t)H, n_in, x, n_in, w_ih, n_in, 1, gates, 4 * (int64_t)H, 1);
        return 0;
    }
    memset(&op, 0, sizeof op);
    op.M = T;
    op.N = 4 * (int64_t)H;
    op.K = n_in;
    op.a = x;
    op.a_rs = n_in;
    op.a_cs = 1;
    op.b_kind = B_NK;
    op.b = w_ih;
    op.ldb = n_in;
    gemm_job_init(&job, pool, kern, &op, 1, gates, 4 * (int64_t)H);
    job.accumulate = 1;
    job.caller_index = caller;
    job.caller_ws = ws;
    return gemm_run(&job);
}

/* n_dir directions (1 or 2) of one layer; direction d reads w_ih[d] ... and
 * writes y + d * H, reverse when reverse[d]. The calling thread's scratch
 * holds the gates, the cell states and its GEMM packing memory. */
static int32_t lstm_layer(ez_pool *pool, const float *x, int T, int n_in, int H, int n_dir,
                          const float *const w_ih[2], const float *const w_hh[2], const float *const b_ih[2],
                          const float *const b_hh[2], const int reverse[2], float *y, int y_stride) {
    const ez_gemm_kernels *kern = ez_gemm_kernels_active(NULL);
    int caller = ez_pool_thread_index(pool), starved = 0;
    size_t gates_floats = whole_lines((int64_t)T * 4 * H), state_floats = whole_lines(H);
    size_t step_floats = whole_lines(4 * (int64_t)H), total;
    void *owned = NULL;
    float *mem, *zeros, *ws;
    lstm_dir dirs[2];
    total = (size_t)n_dir * (gates_floats + state_floats + step_floats) + state_floats +
            (size_t)(kern ? gemm_ws_floats(kern) : 0);
    mem = take_scratch(pool, caller, sizeof(float) * total, &owned);
    if (!mem)
        return ez_fail(ELIZA_E_NOMEM, "lstm: no memory for the gates of %d steps (H %d)", T, H);
    zeros = mem + n_dir * (gates_floats + state_floats + step_floats);
    ws = zeros + state_floats;
    memset(zeros, 0, sizeof(float) * (size_t)H);
    for (int d = 0; d < n_dir; d++) {
        lstm_dir *dd = &dirs[d];
        memset(dd, 0, sizeof *dd);
        dd->step = ez_lstm_step_for(H);
        dd->pool = pool;
        dd->T = T;
        dd->H = H;
        dd->reverse = reverse[d];
        dd->y_stride = y_stride;
        dd->w_hh = w_hh[d];
        dd->gates = mem + d * gates_floats;
        dd->c = mem + n_dir * gates_floats + d * state_floats;
        dd->step_gates = mem + n_dir * (gates_floats + state_floats) + d * step_floats;
        dd->zeros = zeros;
        dd->y = y + d * H;
        starved |= lstm_project(pool, kern, caller, ws, x, T, n_in, H, w_ih[d], b_ih[d], b_hh[d], dd->gates);
    }
    warn_starved(pool, "lstm", starved);
    /* Two directions on two threads need no barrier per step; their own
     * loops over units then run inline. */
    if (n_dir == 2 && ez_pool_threads(pool) >= 2)
        ez_pool_for(pool, 2, 1, lstm_directions, dirs);
    else
        lstm_directions(dirs, 0, n_dir, caller);
    ez_aligned_free(owned);
    return ELIZA_OK;
}

int32_t ez_tts_lstm(ez_pool *pool, const float *x, int T, int n_in, int H, const float *w_ih, const float *w_hh,
                    const float *b_ih, const float *b_hh, int reverse, float *y, int y_stride) {
    const float *const wi[2] = {w_ih, NULL}, *const wh[2] = {w_hh, NULL};
    const float *const bi[2] = {b_ih, NULL}, *const bh[2] = {b_hh, NULL};
    const int rev[2] = {reverse, 0};
    if (T <= 0 || H <= 0) return ELIZA_OK;
    return lstm_layer(pool, x, T, n_in, H, 1, wi, wh, bi, bh, rev, y, y_stride);
}

int32_t ez_tts_lstm_bidir(ez_pool *pool, const float *x, int T, int n_in, int H, const float *const w_ih[2],
                          const float *const w_hh[2], const float *const b_ih[2], const float *const b_hh[2],
                          float *y) {
    const int rev[2] = {0, 1};
    if (T <= 0 || H <= 0) return ELIZA_OK;
    return lstm_layer(pool, x, T, n_in, H, 2, w_ih, w_hh, b_ih, b_hh, rev, y, 2 * H);
}

/* ---- AdaIN, Snake --------------------------------------------------------------------------- */

typedef struct {
    const ez_tts_kernels *tk;
    float *x;
    int C, T;
    const float *gamma_beta, *alpha;
    float eps, slope;
    int act;
} norm_job;

static void adain_channels(void *ctx, int64_t c0, int64_t c1, int thread_index) {
    const norm_job *j = (const norm_job *)ctx;
    (void)thread_index;
    for (int64_t c = c0; c < c1; c++) {
        float *r = j->x + c * j->T;
        double mean, var;
        float param = j->act == EZ_TTS_ACT_SNAKE ? j->alpha[c] : j->slope;
        j->tk->mean_var(r, j->T, &mean, &var);
        j->tk->affine_act(r, j->T, mean, (float)(1.0 / sqrt(var + j->eps)), 1.0f + j->gamma_beta[c],
                          j->gamma_beta[j->C + c], j->act, param);
    }
}

static void adain_act(ez_pool *pool, float *x, int C, int T, const float *gamma_beta, float eps, int act,
                      const float *alpha, float slope) {
    norm_job j = {tts_kernels(), x, C, T, gamma_beta, alpha, eps, slope, act};
    if (C <= 0 || T <= 0) return;
    if (!j.tk) {
        ez_tts_adain1d_ref(x, C, T, gamma_beta, eps);
        if (act == EZ_TTS_ACT_SNAKE) ez_tts_snake_ref(x, C, T, alpha);
        if (act == EZ_TTS_ACT_LEAKY_RELU) ez_tts_leaky_relu(x, (int64_t)C * T, slope);
        return;
    }
    /* A chunk of channels is worth a thread from about 16K values on. */
    ez_pool_for(pool, C, EZ_MAX(1, 16384 / T), adain_channels, &j);
}

void ez_tts_adain1d(float *x, int C, int T, const float *gamma_beta, float eps) {
    adain_act(NULL, x, C, T, gamma_beta, eps, EZ_TTS_ACT_NONE, NULL, 0.0f);
}

void ez_tts_adain1d_snake(ez_pool *pool, float *x, int C, int T, const float *gamma_beta, float eps,
                          const float *alpha) {
    adain_act(pool, x, C, T, gamma_beta, eps, EZ_TTS_ACT_SNAKE, alpha, 0.0f);
}

void ez_tts_adain1d_leaky_relu(ez_pool *pool, float *x, int C, int T, const float *gamma_beta, float eps,
                               float slope) {
    adain_act(pool, x, C, T, gamma_beta, eps, EZ_TTS_ACT_LEAKY_RELU, NULL, slope);
}

/* Exact, so it has no reference of its own: the sign bit picks x * slope
 * (x < 0, and -0 and negative NaNs, which x * slope leaves as they are), as
 * a bit select the compiler vectorizes on any ISA. */
void ez_tts_leaky_relu(float *x, int64_t n, float slope) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], scaled = v * slope;
        uint32_t bits, scaled_bits, negative;
        memcpy(&bits, &v, sizeof bits);
        memcpy(&scaled_bits, &scaled, sizeof scaled_bits);
        negative = 0u - (bits >> 31);
        bits = (scaled_bits & negative) | (bits & ~negative);
        memcpy(&x[i], &bits, sizeof bits);
    }
}

static void gelu_range(void *ctx, int64_t i0, int64_t i1, int thread_index) {
    (void)thread_index;
    tts_kernels()->gelu_tanh((float *)ctx + i0, i1 - i0);
}

void ez_tts_gelu_tanh(ez_pool *pool, float *x, int64_t n) {
    if (!tts_kernels()) {
        ez_tts_gelu_tanh_ref(x, n);
        return;
    }
    ez_pool_for(pool, n, 4096, gelu_range, x);
}

void ez_tts_snake(float *x, int C, int T, const float *alpha) {
    const ez_tts_kernels *tk = tts_kernels();
    if (!tk) {
        ez_tts_snake_ref(x, C, T, alpha);
        return;
    }
    for (int c = 0; c < C; c++) tk->snake(x + (int64_t)c * T, T, alpha[c]);
}
