/* Conv1d by overlap-save FFT (ops.h: ez_tts_conv1d_fft): the generator's
 * stride-1 convolutions with 1.5 to 1.8 multiply-adds per output and
 * channel pair instead of k (3, 7, 11).
 *
 * Contract: same operands and result as ez_tts_conv1d with stride 1 and
 * groups 1, x: [c_in, t_in], w: [c_out, c_in, k], b: [c_out] or NULL, y:
 * [c_out, t_out], any padding and dilation, 2k <= N. Returns ELIZA_OK, or
 * without touching y ELIZA_E_UNSUPPORTED (no GEMM kernels: ELIZA_FORCE_SCALAR
 * or an unknown CPU) or ELIZA_E_NOMEM.
 *
 * Method. Output row o is a sum over input channels ci of correlations
 * y[t] = sum_j w[o, ci, j] x[ci, t - pad + j d]. The outputs of one phase
 * p (t = p, p + d, p + 2d, ...) only read the inputs x[p - pad + d u]:
 * each phase is an undilated correlation, so dilation costs nothing. Its
 * outputs are cut into blocks of L = N - k + 1 (N = FFT_N); the block from
 * output t0 reads N inputs x[t0 - pad + d u], u < N, and the first L
 * samples of their circular correlation with the k taps are the block's
 * outputs (overlap-save). In the frequency domain that correlation is
 * Y[f] = X[f] conj(W[f]) per bin, and the sum over input channels makes it,
 * per bin, a complex matrix product over all the blocks of all phases:
 *   Y_f[blocks, c_out] = X_f[blocks, c_in] . (C + i S)[c_in, c_out],
 * C + i S = conj(W_f). Bins 1 .. M-1 (M = N / 2) take three real GEMMs
 * each (Gauss's three-multiplication product):
 *   k1 = (Xr + Xi) C,  k2 = Xr (S - C),  k3 = Xi (C + S),
 *   Yr = k1 - k3,  Yi = k1 + k2,
 * and bins 0 and M, which are real, one each, sharing a slot: M slots,
 * (3 M - 1) c_in c_out multiply-adds per block of L outputs (95 / 54 = 1.76
 * for k = 11, 95 / 62 = 1.53 for k = 3, N = 64).
 *
 * Blocks run in rows: row q holds block q of every phase, whose outputs
 * together fill [q L d, (q + 1) L d) and whose inputs lie in a span of d N
 * samples. Per call, in slabs of whole rows (so X and Y stay within
 * SLAB_BYTES whatever the length):
 *  1. forward (per row and 8 input channels): the span into lanes
 *     (ez_fft_kernels.to_lanes: the 8 channels in the lanes of a vector),
 *     each block transformed (forward_block) into its row of X, slot by
 *     slot: [Re | Im | Re + Im] per channel;
 *  2. products (per group of slots f, M - f, and block of cb output
 *     channels): the filters' spectra from the taps (spectra; the two slots
 *     share their tap sums, since cos and sin of (M - f) j differ from those
 *     of f j only in the signs of odd taps: 2k multiply-adds per filter for
 *     both) as packed GEMM panels, then the tiles of core/kernels (A, the
 *     rows of X, read in place by tile_direct where the ISA has it, packed
 *     otherwise) into Y: k1 into Re, copied to Im, then -k3 and k2 added;
 *  3. inverse (per row and 8 output channels): each block back to time
 *     (inverse_block), its L outputs to every d-th place of the row's span,
 *     the span out of lanes into y with the bias (from_lanes).
 * The scale 1 / (2N) the transforms leave out is folded into the filter
 * spectra (a power of two: exact).
 *
 * BF16 products (ez_tts_conv1d_fft_bf16): between steps 1 and 2 the slab's
 * X is rounded to bf16 (Xb, same layout), each task's spectra are rounded
 * into BF16 panels (core/kernels/gemm_bf16.h), and the products run on the
 * BF16 tile over the whole depth; transforms and sums stay float32. Xb
 * (half of X) lives in the caller's scratch, the BF16 spectra in each
 * task's working memory in place of the packed A.
 *
 * Threads and bits: every block is transformed by the same operations
 * whichever thread does it, and every product element is summed over the
 * same kc slices of depth in the same order by the tile kernel (which forms
 * each sum from zero), so results are bit-identical for any thread count.
 *
 * Error: the transforms add a relative error of about eps log2 N to each
 * spectrum, so an output's error scales with the magnitude of its whole
 * block (sum over ci of |x block| |w|), not with its own sum of |w x|.
 * Measured max |fft - ref| / max |ref| <= 6e-7 on Kokoro's shapes, at most
 * 0.09 of (8 sqrt(c_in k) + 4) eps times the largest sum |w x| of the
 * output's row, the bound tests/c/test_tts_ops.c holds it to.
 *
 * Memory: the caller's pool scratch slot holds the transposed taps (c_in k
 * c_out floats), the slab's X and Y (at most SLAB_BYTES, or one row) and
 * the caller's own working memory; every other thread's slot holds its
 * working memory: a task's spectra (6 ci_pad x cb floats) and packed A, or
 * a row's span in lanes. Without the caller's scratch the call returns
 * ELIZA_E_NOMEM before touching y; a thread without working memory leaves
 * its part to the caller, which then runs the whole step (same bits). */
#include <math.h>
#include <string.h>

#include "core/atomic.h"
#include "core/cpu.h"
#include "core/kernels/gemm_bf16.h"
#include "core/kernels/gemm_kernels_ext.h"
#include "core/platform.h"
#include "tts/ops.h"
#include "tts/ops_fft.h"

#include "tts/ops_fft_impl.h"

/* Transform size. N = 64 leaves L = 54 outputs per block at k = 11: 1.76
 * multiply-adds per output and channel pair (N = 32: 2.14; N = 128: 1.62,
 * for twice the filter spectra per slab). */
#define FFT_N 64
/* X and Y of one slab at most: the filter spectra are made once per slab,
 * so a slab should hold a whole generator chunk (256 channels x 3,760 steps,
 * 4.7 s of audio, is 11.5 MB at k = 11; measured there: 8 MB 10-20% slower,
 * 16 MB no faster). */
#define SLAB_BYTES ((int64_t)12 << 20)
/* Output channels of a product task, in GEMM panels (nr). */
#define TASK_PANELS 4

void ez_fft_plan_init(ez_fft_plan *p, int n) {
    const double two_pi = 6.283185307179586476925286766559;
    int bits = 0;
    p->n = n;
    p->m = n / 2;
    while ((1 << bits) < p->m) bits++;
    for (int j = 0; j < n; j++) {
        p->cos_n[j] = (float)cos(two_pi * j / n);
        p->sin_n[j] = (float)sin(two_pi * j / n);
    }
    for (int q = 0; q < p->m; q++) {
        int r = 0;
        for (int b = 0; b < bits; b++) r |= ((q >> b) & 1) << (bits - 1 - b);
        p->rev[q] = r;
    }
}

static const ez_fft_kernels portable_kernels = {forward_block, inverse_block, to_lanes, from_lanes, spectra};

const ez_fft_kernels *ez_fft_kernels_portable(void) { return &portable_kernels; }

static const ez_fft_kernels *fft_kernels(void) {
    return EZ_SIMD_PICK(ez_fft_kernels_avx512(), ez_fft_kernels_avx2(), NULL, NULL, ez_fft_kernels_portable());
}



static int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

/* Measured on a 2-core AVX2 machine, 2 threads: at 256 channels the FFT
 * path breaks even with the direct one at about 900 outputs for k = 3, 350
 * for k = 5 (512 channels), under 200 for k = 7; at the generator's lengths
 * (bench_tts_ops "generator resblock") it is 1.2x to 1.6x faster at k = 3,
 * 2.8x to 3.1x at k = 7 and 3.9x to 5.4x at k = 11. Below 32 channels the
 * GEMM tiles are mostly padding either way. */
int ez_tts_conv1d_prefers_fft(int c_in, int t_in, int c_out, int k, int stride, int pad, int dilation, int groups) {
    int t_out = ez_conv1d_out_len(t_in, k, stride, pad, dilation);
    if (stride != 1 || groups != 1 || k < 3 || 2 * k > FFT_N || dilation > 16 || c_in < 32 || c_out < 32 ||
        !ez_gemm_kernels_active(NULL))
        return 0;
    return (int64_t)t_out * (k - 2) >= 1000 && t_out >= 4 * (FFT_N - k + 1);
}

typedef struct {
    const ez_gemm_kernels *kern;
    const ez_gemm_kernels_ext *ext;
    const ez_fft_kernels *fk;
    const ez_gemm_bf16_kernels *bk; /* the products in BF16 (X and the spectra rounded), or NULL: float32 */
    ez_fft_plan plan;
    const float *x, *w, *b;
    float *y;
    int c_in, t_in, c_out, k, pad, d, t_out;
    int L;                   /* outputs per block */
    int64_t n_rows;          /* rows of blocks (below) */
    int ci_pad, co_y;        /* c_in, c_out rounded up to 8 lanes */
    float scale;             /* 1 / (2N) */
    float *wt;               /* per product block of cb output channels: [c_in][k][width] (transpose_taps) */
    float *X;                /* [M][s][3 ci_pad]: slot (x_slot apart), block, (Re | Im | Re + Im) ci */
    ez_bf16 *Xb;             /* with bk: X rounded to bf16, same layout */
    float *Y;                /* [M][s][2 co_y]: slot (y_slot apart), block, (Re | Im) o */
    int64_t x_slot, y_slot;  /* floats per slot */
    int64_t row0;            /* the slab: its first row, its rows and blocks */
    int rows, nb;
    int cb, n_cblocks, n_groups; /* product tasks: output channels per task, tasks per slot group */
    ez_pool *pool;
    int caller;              /* this thread uses caller_ws instead of its scratch slot */
    float *caller_ws;
    size_t ws_bytes;
    ez_atomic_int starved;
} fft_job;

/* Blocks run in rows: row q holds block q of each phase p < d, whose
 * outputs t = p + d (q L + r), r < L, together fill [q L d, (q + 1) L d).
 * Phases have the same number of blocks or one fewer (the last ones), so
 * block g is row g / d, phase g % d, and only the last row is short. */
static int64_t block_count(const fft_job *j) {
    int64_t n = 0;
    for (int p = 0; p < j->d && p < j->t_out; p++) n += ((j->t_out - 1 - p) / j->d + 1 + j->L - 1) / j->L;
    return n;
}

/* Output channels of product block q (through co_y), rounded up to nr. */
static int block_width(const fft_job *j, int q) {
    return (int)round_up(EZ_MIN(j->cb, j->co_y - q * j->cb), j->kern->nr);
}

/* Working memory of a thread: its product task's spectra, or a row's
 * samples in lanes. NULL (and starved set) without any. */
static float *thread_ws(fft_job *j, int thread_index, void **owned) {
    float *ws = thread_index == j->caller ? j->caller_ws : NULL;
    *owned = NULL;
    if (!ws && j->pool) ws = (float *)ez_pool_scratch(j->pool, thread_index, j->ws_bytes);
    if (!ws) ws = (float *)(*owned = ez_aligned_alloc(j->ws_bytes));
    if (!ws) ez_atomic_int_store(&j->starved, 1);
    return ws;
}

/* ---- weights ------------------------------------------------------------------------------ */

/* wt, block q of cb output channels: [c_in][k][width] (width: the
 * block's channels rounded up to nr), w transposed, zero past c_out: runs
 * of 8 output channels are lanes (ez_fft_kernels.to_lanes). A width that
 * is not a multiple of 8 (nr = 12) ends in a part run, which goes through
 * a buffer: to_lanes writes whole runs. */
static void transpose_taps(void *ctx, int64_t ci0, int64_t ci1, int thread_index) {
    const fft_job *j = (const fft_job *)ctx;
    const int64_t taps = (int64_t)j->c_in * j->k;
    (void)thread_index;
    for (int q = 0; q < j->n_cblocks; q++) {
        const int width = block_width(j, q);
        float *blk = j->wt + q * taps * j->cb + ci0 * j->k * width;
        for (int c = 0; c < width; c += EZ_FFT_LANES) {
            const int o = q * j->cb + c, rows = EZ_MAX(0, EZ_MIN(EZ_FFT_LANES, j->c_out - o));
            const float *src = j->w + (int64_t)EZ_MIN(o, j->c_out - 1) * taps;
            if (c + EZ_FFT_LANES <= width) {
                j->fk->to_lanes(src, taps, rows, ci0 * j->k, (ci1 - ci0) * j->k, taps, blk + c, width);
                continue;
            }
            for (int64_t t = ci0 * j->k; t < ci1 * j->k; t++) {
                ez_fft_lanes run;
                j->fk->to_lanes(src, taps, rows, t, 1, taps, run, EZ_FFT_LANES);
                memcpy(blk + (t - ci0 * j->k) * width + c, run, sizeof(float) * (size_t)(width - c));
            }
        }
    }
}

/* ---- forward ------------------------------------------------------------------------------ */

/* Items: (input channel group of 8) x (row of the slab). The row's inputs
 * x[t], t in [q L d - pad, q L d - pad + d N), go into lanes once; block p
 * reads every d-th of them from p on. Each spectrum goes to its slot's row
 * of X as whole vectors. */
static void forward_items(void *ctx, int64_t i0, int64_t i1, int thread_index) {
    fft_job *j = (fft_job *)ctx;
    const int n = j->plan.n, d = j->d;
    const int64_t ldx = 3 * (int64_t)j->ci_pad;
    void *owned;
    float *lanes = thread_ws(j, thread_index, &owned);
    if (!lanes) return;
    for (int64_t it = i0; it < i1; it++) {
        const int ci0 = (int)(it / j->rows) * EZ_FFT_LANES, row = (int)(it % j->rows);
        const int64_t q = j->row0 + row, base = q * j->L * d - j->pad;
        j->fk->to_lanes(j->x + (int64_t)ci0 * j->t_in, j->t_in, EZ_MIN(EZ_FFT_LANES, j->c_in - ci0), base,
                        (int64_t)d * n, j->t_in, lanes, EZ_FFT_LANES);
        for (int p = 0; p < d && row * d + p < j->nb; p++)
            j->fk->forward_block(&j->plan, lanes + (int64_t)p * EZ_FFT_LANES, (int64_t)d * EZ_FFT_LANES,
                                 j->X + (int64_t)(row * d + p) * ldx + ci0, j->x_slot, j->ci_pad);
    }
    ez_aligned_free(owned);
}

/* ---- products ----------------------------------------------------------------------------- */

/* c[nb, cols] (row stride 2 co_y) (+)= A . B: A the slab's rows of one X
 * slot at depth [k_off, k_off + K), B packed panels (ez_fft_panel_stride
 * apart) of [K][nr]. Depth in kc slices, the first written (or added when
 * accumulate), the others added. A is read in place where the ISA can
 * (tile_direct), else packed per slice into a_pack. */
static void product(const fft_job *j, const float *a, int64_t k_off, int64_t K, const float *b, int cols, float *c,
                    int accumulate, float *a_pack) {
    const ez_gemm_kernels *kern = j->kern;
    const int mr = kern->mr, nr = kern->nr, rows = j->nb, direct = j->ext && j->ext->tile_direct;
    const int64_t lda = 3 * (int64_t)j->ci_pad, ldc = 2 * (int64_t)j->co_y;
    for (int64_t k0 = 0; k0 < K; k0 += kern->kc) {
        const int64_t kc = EZ_MIN((int64_t)kern->kc, K - k0);
        const int acc = accumulate || k0 > 0;
        const float *a0 = a + k_off + k0;
        if (!direct) j->ext->pack_a(kc, rows, a0, lda, a_pack);
        for (int q = 0; q * nr < cols; q++) {
            const float *bp = b + q * ez_fft_panel_stride(K, nr) + k0 * nr;
            int n_c = EZ_MIN(nr, cols - q * nr);
            for (int i = 0; i * mr < rows; i++) {
                float *ct = c + (int64_t)i * mr * ldc + (int64_t)q * nr;
                int n_r = EZ_MIN(mr, rows - i * mr);
                if (direct) {
                    j->ext->tile_direct(kc, a0 + (int64_t)i * mr * lda, lda, n_r, bp, ct, ldc, n_c, acc);
                } else if (n_r == mr && n_c == nr) {
                    kern->tile(kc, a_pack + (int64_t)i * mr * kc, bp, ct, ldc, acc);
                } else {
                    float tile[EZ_GEMM_MAX_TILE];
                    kern->tile(kc, a_pack + (int64_t)i * mr * kc, bp, tile, nr, 0);
                    for (int rr = 0; rr < n_r; rr++)
                        for (int cc = 0; cc < n_c; cc++)
                            ct[rr * ldc + cc] = acc ? ct[rr * ldc + cc] + tile[rr * nr + cc] : tile[rr * nr + cc];
                }
            }
        }
    }
}

/* product() in BF16: a the slab's rows of one slot of Xb at the depth to
 * multiply, K = ci_pad deep (whole, one tile pass: a B panel of 256 x 32
 * bf16 is 16 KiB), b the spectra's panels packed by bk->pack_b_kn. */
static void product_bf16(const fft_job *j, const ez_bf16 *a, const ez_bf16 *b, int cols, float *c, int accumulate) {
    const ez_gemm_bf16_kernels *bk = j->bk;
    const int mr = bk->mr, nr = bk->nr, rows = j->nb;
    const int64_t K = j->ci_pad, lda = 3 * (int64_t)j->ci_pad, ldc = 2 * (int64_t)j->co_y;
    for (int q = 0; q * nr < cols; q++) {
        const ez_bf16 *bp = b + q * ez_fft_panel_stride(K, nr);
        const int n_c = EZ_MIN(nr, cols - q * nr);
        for (int i = 0; i * mr < rows; i++)
            bk->tile(K, a + (int64_t)i * mr * lda, lda, EZ_MIN(mr, rows - i * mr), bp,
                     c + (int64_t)i * mr * ldc + q * nr, ldc, n_c, accumulate);
    }
}

/* c (+)= the slab's rows of X slot `slot` at depth [k_off, k_off + ci_pad)
 * times spectrum plane pl of the task's working memory ws: float32
 * spectra in ws (then, without bk, the packed A), their bf16 panels after
 * the six planes with bk. */
static void slot_product(const fft_job *j, int slot, int64_t k_off, int pl, int n_panels, int cols, float *c,
                         int accumulate, float *ws) {
    const int64_t plane = ez_fft_plane_stride(j->ci_pad, j->kern->nr, n_panels);
    if (j->bk)
        product_bf16(j, j->Xb + slot * j->x_slot + k_off, (const ez_bf16 *)(ws + 6 * plane) + pl * plane, cols, c,
                     accumulate);
    else
        product(j, j->X + slot * j->x_slot, k_off, j->ci_pad, ws + pl * plane, cols, c, accumulate, ws + 6 * plane);
}

/* One task: slot group g (slot 0; or slots g and M - g) for output
 * channels [o0, o0 + cb), spectra in ws. Slot 0 holds two real products
 * (bins 0 and M); the others Y = X (C + i S) from three real ones:
 *   k1 = (Xr + Xi) C,  k2 = Xr (S - C),  k3 = Xi (C + S),
 *   Yr = k1 - k3,  Yi = k1 + k2:
 * k1 goes into Yr and is copied to Yi, then -k3 and k2 are added. */
static void product_task(const fft_job *j, int g, int o0, float *ws) {
    const int m = j->plan.m, nr = j->kern->nr, n_o = EZ_MIN(j->cb, j->co_y - o0);
    const int n_panels = block_width(j, o0 / j->cb) / nr;
    const int64_t ci_pad = j->ci_pad, co_y = j->co_y, plane = ez_fft_plane_stride(ci_pad, nr, n_panels);
    const int slots[2] = {g, m - g}, n_planes = g == 0 ? 2 : 2 * g == m ? 3 : 6;
    j->fk->spectra(&j->plan, g, j->scale, j->wt + (int64_t)(o0 / j->cb) * j->c_in * j->k * j->cb, j->k, j->c_in,
                   j->ci_pad, n_panels, nr, ws);
    if (j->bk) {
        ez_bf16 *wb = (ez_bf16 *)(ws + 6 * plane);
        for (int pl = 0; pl < n_planes; pl++)
            for (int q = 0; q < n_panels; q++) {
                const int64_t at = pl * plane + q * ez_fft_panel_stride(ci_pad, nr);
                j->bk->pack_b_kn(ci_pad, nr, ws + at, nr, wb + at);
            }
    }
    if (g == 0) {
        slot_product(j, 0, 0, 0, n_panels, n_o, j->Y + o0, 0, ws);
        slot_product(j, 0, ci_pad, 1, n_panels, n_o, j->Y + co_y + o0, 0, ws);
        return;
    }
    for (int s = 0; s < (2 * g == m ? 1 : 2); s++) {
        float *c = j->Y + slots[s] * j->y_slot + o0;
        slot_product(j, slots[s], 2 * ci_pad, 3 * s, n_panels, n_o, c, 0, ws);
        for (int r = 0; r < j->nb; r++)
            memcpy(c + r * 2 * co_y + co_y, c + r * 2 * co_y, sizeof(float) * (size_t)n_o);
        slot_product(j, slots[s], ci_pad, 3 * s + 2, n_panels, n_o, c, 1, ws);
        slot_product(j, slots[s], 0, 3 * s + 1, n_panels, n_o, c + co_y, 1, ws);
    }
}

/* Items: slots of X, rounded into Xb (the rows of the slab's blocks). */
static void round_items(void *ctx, int64_t s0, int64_t s1, int thread_index) {
    const fft_job *j = (const fft_job *)ctx;
    (void)thread_index;
    for (int64_t s = s0; s < s1; s++)
        j->bk->round(j->X + s * j->x_slot, (int64_t)j->nb * 3 * j->ci_pad, j->Xb + s * j->x_slot);
}

/* Items: (block of output channels) x (slot group). */
static void product_items(void *ctx, int64_t i0, int64_t i1, int thread_index) {
    fft_job *j = (fft_job *)ctx;
    void *owned;
    float *ws = thread_ws(j, thread_index, &owned);
    if (!ws) return;
    for (int64_t it = i0; it < i1; it++)
        product_task(j, (int)(it % j->n_groups), (int)(it / j->n_groups) * j->cb, ws);
    ez_aligned_free(owned);
}

/* ---- inverse ------------------------------------------------------------------------------ */

/* Items: (output channel group of 8) x (row of the slab). Each block of the
 * row goes back to time in lanes, its L outputs to every d-th place of the
 * row's span from its phase on, and the span out of lanes into y. */
static void inverse_items(void *ctx, int64_t i0, int64_t i1, int thread_index) {
    fft_job *j = (fft_job *)ctx;
    const int d = j->d, L = j->L;
    const int64_t ldy = 2 * (int64_t)j->co_y;
    void *owned;
    float *lanes = thread_ws(j, thread_index, &owned);
    if (!lanes) return;
    for (int64_t it = i0; it < i1; it++) {
        const int o0 = (int)(it / j->rows) * EZ_FFT_LANES, row = (int)(it % j->rows);
        const int64_t t0 = (j->row0 + row) * L * d, span = EZ_MIN((int64_t)L * d, j->t_out - t0);
        for (int p = 0; p < d && row * d + p < j->nb; p++)
            j->fk->inverse_block(&j->plan, j->Y + (int64_t)(row * d + p) * ldy + o0, j->y_slot, j->co_y,
                                 lanes + (int64_t)p * EZ_FFT_LANES, (int64_t)d * EZ_FFT_LANES,
                                 (int)EZ_MIN((int64_t)L, (span - p + d - 1) / d));
        j->fk->from_lanes(lanes, EZ_MIN(EZ_FFT_LANES, j->c_out - o0), span, j->b ? j->b + o0 : NULL,
                          j->y + (int64_t)o0 * j->t_out + t0, j->t_out);
    }
    ez_aligned_free(owned);
}

/* ---- the call ----------------------------------------------------------------------------- */

/* Runs fn over [0, n); then, if a thread had no working memory, the whole
 * range again on this thread (same operations, so the same bits). */
static void run_items(fft_job *j, int64_t n, int64_t grain, ez_range_fn fn) {
    ez_atomic_int_store(&j->starved, 0);
    ez_pool_for(j->pool, n, grain, fn, j);
    if (ez_atomic_int_load(&j->starved)) fn(j, 0, n, j->caller);
}

int32_t ez_tts_conv1d_fft(ez_pool *pool, const float *x, int c_in, int t_in, const float *w, const float *b, int c_out,
                          int k, int pad, int dilation, float *y) {
    return ez_fft_conv1d_with(fft_kernels(), NULL, pool, x, c_in, t_in, w, b, c_out, k, pad, dilation, y);
}

int32_t ez_tts_conv1d_fft_bf16(ez_pool *pool, const float *x, int c_in, int t_in, const float *w, const float *b,
                               int c_out, int k, int pad, int dilation, float *y) {
    const ez_gemm_bf16_kernels *bk = ez_gemm_bf16_kernels_active();
    if (!bk) return ELIZA_E_UNSUPPORTED;
    return ez_fft_conv1d_with(fft_kernels(), bk, pool, x, c_in, t_in, w, b, c_out, k, pad, dilation, y);
}

int32_t ez_fft_conv1d_with(const ez_fft_kernels *fk, const ez_gemm_bf16_kernels *bk, ez_pool *pool, const float *x,
                           int c_in, int t_in, const float *w, const float *b, int c_out, int k, int pad, int dilation,
                           float *y) {
    const ez_gemm_kernels_ext *ext = NULL;
    const ez_gemm_kernels *kern = ez_gemm_kernels_active(&ext);
    fft_job j;
    int64_t nblk, per_row, rows_max, n_slabs, rows, wt_floats, x_floats, xb_floats, y_floats, ws_floats, plane;
    size_t bytes;
    void *owned = NULL;
    float *mem;
    if (!kern || k < 1 || 2 * k > FFT_N || dilation < 1 || c_in < 1 || kern->nr > EZ_FFT_MAX_NR ||
        (bk && bk->nr != kern->nr))
        return ELIZA_E_UNSUPPORTED;
    memset(&j, 0, sizeof j);
    j.t_out = ez_conv1d_out_len(t_in, k, 1, pad, dilation);
    if (j.t_out <= 0 || c_out <= 0) return ELIZA_OK;
    j.kern = kern;
    j.ext = ext;
    if (!j.ext || (!j.ext->tile_direct && !j.ext->pack_a)) return ELIZA_E_UNSUPPORTED;
    j.fk = fk;
    j.bk = bk;
    ez_fft_plan_init(&j.plan, FFT_N);
    j.x = x;
    j.w = w;
    j.b = b;
    j.y = y;
    j.c_in = c_in;
    j.t_in = t_in;
    j.c_out = c_out;
    j.k = k;
    j.pad = pad;
    j.d = dilation;
    j.L = FFT_N - k + 1;
    j.ci_pad = (int)round_up(c_in, EZ_FFT_LANES);
    j.co_y = (int)round_up(c_out, EZ_FFT_LANES);
    j.scale = 1.0f / (2.0f * FFT_N);
    j.cb = TASK_PANELS * kern->nr;
    j.n_cblocks = (j.co_y + j.cb - 1) / j.cb;
    j.n_groups = j.plan.m / 2 + 1;
    j.pool = pool;
    j.caller = ez_pool_thread_index(pool);

    /* slabs of whole rows, at most SLAB_BYTES of X and Y (but one row), as
     * even as they come */
    nblk = block_count(&j);
    j.n_rows = (nblk + dilation - 1) / dilation;
    per_row = (int64_t)sizeof(float) * j.plan.m * (3 * j.ci_pad + 2 * j.co_y) * dilation;
    rows_max = EZ_MAX((int64_t)1, SLAB_BYTES / per_row);
    n_slabs = (j.n_rows + rows_max - 1) / rows_max;
    rows = (j.n_rows + n_slabs - 1) / n_slabs;
    /* a cache line past a multiple of 4 KiB, so the rows of all the slots
     * that one block reads or writes fall in different L1 sets */
    j.x_slot = rows * dilation * 3 * j.ci_pad + 16;
    j.y_slot = rows * dilation * 2 * j.co_y + 16;
    wt_floats = round_up((int64_t)j.n_cblocks * c_in * k * j.cb, 16);
    x_floats = j.plan.m * j.x_slot;
    y_floats = round_up(j.plan.m * j.y_slot, 16);
    xb_floats = bk ? round_up((x_floats + 1) / 2, 16) : 0;
    /* per thread: a task's spectra and then its packed A slice (float32)
     * or the spectra in bf16, or a row in lanes */
    plane = ez_fft_plane_stride(j.ci_pad, kern->nr, TASK_PANELS);
    ws_floats = EZ_MAX(6 * plane + (bk ? 3 * plane + 16 : round_up(rows * dilation, kern->mr) * kern->kc),
                       (int64_t)dilation * FFT_N * EZ_FFT_LANES);
    j.ws_bytes = sizeof(float) * (size_t)ws_floats;
    bytes = sizeof(float) * (size_t)(wt_floats + x_floats + xb_floats + y_floats) + j.ws_bytes;
    mem = pool ? (float *)ez_pool_scratch(pool, j.caller, bytes) : (float *)(owned = ez_aligned_alloc(bytes));
    if (!mem) return ELIZA_E_NOMEM;
    j.wt = mem;
    j.Y = mem + wt_floats;
    j.X = j.Y + y_floats;
    j.Xb = bk ? (ez_bf16 *)(j.X + x_floats) : NULL;
    j.caller_ws = j.X + x_floats + xb_floats;

    ez_pool_for(pool, c_in, 8, transpose_taps, &j);
    for (j.row0 = 0; j.row0 < j.n_rows; j.row0 += rows) {
        int64_t groups_in = j.ci_pad / EZ_FFT_LANES, groups_out = j.co_y / EZ_FFT_LANES;
        j.rows = (int)EZ_MIN(rows, j.n_rows - j.row0);
        j.nb = (int)EZ_MIN((int64_t)j.rows * dilation, nblk - j.row0 * dilation);
        run_items(&j, groups_in * j.rows, 1, forward_items);
        if (bk) ez_pool_for(pool, j.plan.m, 1, round_items, &j);
        run_items(&j, (int64_t)j.n_cblocks * j.n_groups, 1, product_items);
        run_items(&j, groups_out * j.rows, 1, inverse_items);
    }
    ez_aligned_free(owned);
    return ELIZA_OK;
}
