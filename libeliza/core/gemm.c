/* F32 GEMM (packed, register-blocked, threaded) and the matmul of quantized
 * weights with F32 activations. See gemm.h for the contracts and
 * kernels/gemm_kernels.h for the packed layouts. */
#include "gemm.h"

#include <string.h>

#include "cpu.h"
#include "kernels/gemm_kernels_ext.h"
#include "platform.h"

/* ---- reference ------------------------------------------------------------------ */

/* Accumulates in double: the reference is the yardstick the fast paths are
 * measured against, so its own rounding error should be negligible. With
 * accumulate, C + sum is also formed in double and rounded once. */
void ez_gemm_f32_ref(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                     int trans_b, float *C, int64_t ldc, int accumulate) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double sum = accumulate ? (double)C[m * ldc + n] : 0.0;
            for (int64_t k = 0; k < K; k++) {
                float b = trans_b ? B[n * ldb + k] : B[k * ldb + n];
                sum += (double)A[m * lda + k] * (double)b;
            }
            C[m * ldc + n] = (float)sum;
        }
}

/* ---- what every path shares: the problem, and column offsets into B ----------- */

typedef struct {
    int64_t M, N, K;
    const float *A;
    int64_t lda;
    const float *B;
    int64_t ldb;
    int trans_b;
    float *C;
    int64_t ldc;
    int accumulate;
} gemm_problem;

/* op(B) at depth k, column n. */
static const float *b_at(const gemm_problem *p, int64_t k, int64_t n) {
    return p->trans_b ? p->B + n * p->ldb + k : p->B + k * p->ldb + n;
}

/* ---- scalar: the reference, split over column ranges ---------------------------- */

static void ref_columns(void *ctx, int64_t n0, int64_t n1, int thread_index) {
    const gemm_problem *p = (const gemm_problem *)ctx;
    (void)thread_index;
    ez_gemm_f32_ref(p->M, n1 - n0, p->K, p->A, p->lda, b_at(p, 0, n0), p->ldb, p->trans_b, p->C + n0, p->ldc,
                    p->accumulate);
}

/* ---- small M: direct row kernels, split over column ranges ------------------------ */

typedef struct {
    gemm_problem p;
    const ez_gemm_kernels *kern;
} direct_job;

static void direct_block(const ez_gemm_kernels *kern, const gemm_problem *p, int64_t m0, int64_t m_len,
                         int64_t n0, int64_t n_len) {
    const float *a = p->A + m0 * p->lda;
    float *c = p->C + m0 * p->ldc + n0;
    if (p->trans_b)
        kern->rows_nk(m_len, n_len, p->K, a, p->lda, b_at(p, 0, n0), p->ldb, c, p->ldc, p->accumulate);
    else
        kern->rows_kn(m_len, n_len, p->K, a, p->lda, b_at(p, 0, n0), p->ldb, c, p->ldc, p->accumulate);
}

static void direct_columns(void *ctx, int64_t n0, int64_t n1, int thread_index) {
    const direct_job *job = (const direct_job *)ctx;
    (void)thread_index;
    direct_block(job->kern, &job->p, 0, job->p.M, n0, n1 - n0);
}

/* ---- packed path ------------------------------------------------------------------ */

/* The packed path cuts depth into slices of kern->kc (the last one shorter)
 * and, per slice, packs op(B) into micro-panels of nr columns; A is read in
 * place (ext->tile_direct) or packed into micro-panels of mr rows per task.
 * Every element sees the same slices in the same order, summed by the same
 * tile operations, whatever the task shapes, the thread count, and whether
 * its B panel was packed once for all tasks or by its own task: results do
 * not depend on the thread count.
 *
 * When the whole of op(B), packed, is at most SHARED_B_BYTES, it is packed
 * once (by the threads together) and every task reads it: tall-skinny
 * products (thousands of rows, tens to hundreds of columns) then pack each B
 * element once instead of once per row block. Otherwise each task packs the
 * slice of its columns. */
#define SHARED_B_BYTES ((size_t)4 << 20)

typedef struct {
    gemm_problem p;
    const ez_gemm_kernels *kern;
    const ez_gemm_kernels_ext *ext;
    ez_pool *pool;
    int64_t mb, nb;        /* task shape: rows of A (<= mc), columns (a multiple of nr) */
    int64_t m_blocks, n_blocks;
    int64_t n_chunks;      /* runs of tasks handed to the pool */
    int64_t n_pad;         /* N rounded up to nr: the floats per depth of a slice of b_all */
    float *b_all;          /* op(B) packed whole (slice at k0 from b_all + k0 * n_pad), or NULL */
    size_t ws_bytes;       /* per task: packed A block unless A is read in place, packed B slice unless b_all */
    int caller_index;      /* the calling thread's scratch slot, which also holds b_all */
    float *caller_ws;
} packed_job;

/* Slice [k0, k0 + kc) of op(B) columns [n0, n0 + n_len) into ceil(n_len / nr) micro-panels. */
static void pack_b(const packed_job *job, int64_t k0, int64_t kc, int64_t n0, int64_t n_len, float *dst) {
    const gemm_problem *p = &job->p;
    if (p->trans_b)
        job->kern->pack_b_nk(kc, n_len, b_at(p, k0, n0), p->ldb, dst);
    else
        job->ext->pack_b_kn(kc, n_len, b_at(p, k0, n0), p->ldb, dst);
}

/* Panels [q0, q1) of b_all, every slice. */
static void pack_b_all(void *ctx, int64_t q0, int64_t q1, int thread_index) {
    const packed_job *job = (const packed_job *)ctx;
    const int64_t nr = job->kern->nr, n0 = q0 * nr, n_len = EZ_MIN(q1 * nr, job->p.N) - n0;
    (void)thread_index;
    for (int64_t k0 = 0; k0 < job->p.K; k0 += job->kern->kc) {
        int64_t kc = EZ_MIN((int64_t)job->kern->kc, job->p.K - k0);
        pack_b(job, k0, kc, n0, n_len, job->b_all + k0 * job->n_pad + n0 * kc);
    }
}

/* A tile that sticks out of C: computed whole into a buffer, then the part
 * inside C is added (or copied), with the same operations as the tile kernel
 * uses in place. */
static void edge_tile(const ez_gemm_kernels *kern, int64_t kc, const float *a, const float *b, float *c,
                      int64_t ldc, int accumulate, int rows, int cols) {
    float tile[EZ_GEMM_MAX_TILE];
    kern->tile(kc, a, b, tile, kern->nr, 0);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            float *ci = c + i * ldc + j;
            *ci = accumulate ? *ci + tile[i * kern->nr + j] : tile[i * kern->nr + j];
        }
}

/* One task: C[m0 .. m0+m_len, n0 .. n0+n_len), slice by slice; the B
 * micro-panel of a column stays in L1 while the rows pass over it. */
static void packed_block(const packed_job *job, float *ws, int64_t m0, int64_t m_len, int64_t n0, int64_t n_len) {
    const ez_gemm_kernels *kern = job->kern;
    const gemm_problem *p = &job->p;
    const int mr = kern->mr, nr = kern->nr;
    const int direct = job->ext->tile_direct != NULL;
    float *b_pack = ws;
    float *a_pack = job->b_all ? ws : ws + (int64_t)kern->kc * job->nb;
    for (int64_t k0 = 0; k0 < p->K; k0 += kern->kc) {
        int64_t kc = EZ_MIN((int64_t)kern->kc, p->K - k0);
        int accumulate = k0 > 0 || p->accumulate;
        const float *a = p->A + m0 * p->lda + k0;
        const float *b;
        if (job->b_all) {
            b = job->b_all + k0 * job->n_pad + n0 * kc;
        } else {
            pack_b(job, k0, kc, n0, n_len, b_pack);
            b = b_pack;
        }
        if (!direct) job->ext->pack_a(kc, m_len, a, p->lda, a_pack);
        for (int64_t j = 0; j < n_len; j += nr, b += kc * nr) {
            int cols = (int)EZ_MIN((int64_t)nr, n_len - j);
            for (int64_t i = 0; i < m_len; i += mr) {
                int rows = (int)EZ_MIN((int64_t)mr, m_len - i);
                float *c = p->C + (m0 + i) * p->ldc + n0 + j;
                if (direct)
                    job->ext->tile_direct(kc, a + i * p->lda, p->lda, rows, b, c, p->ldc, cols, accumulate);
                else if (rows == mr && cols == nr)
                    kern->tile(kc, a_pack + i * kc, b, c, p->ldc, accumulate);
                else
                    edge_tile(kern, kc, a_pack + i * kc, b, c, p->ldc, accumulate, rows, cols);
            }
        }
    }
}

/* Chunk c of n_chunks: tasks [c T / n_chunks, (c + 1) T / n_chunks) of the
 * T tasks, row blocks first. */
static void packed_chunks(void *ctx, int64_t c0, int64_t c1, int thread_index) {
    const packed_job *job = (const packed_job *)ctx;
    const int64_t tasks = job->m_blocks * job->n_blocks;
    float *ws = NULL;
    if (job->ws_bytes > 0)
        ws = thread_index == job->caller_index
                 ? job->caller_ws
                 : (float *)ez_pool_scratch(job->pool, thread_index, job->ws_bytes);
    for (int64_t t = c0 * tasks / job->n_chunks; t < c1 * tasks / job->n_chunks; t++) {
        int64_t m0 = (t % job->m_blocks) * job->mb;
        int64_t n0 = (t / job->m_blocks) * job->nb;
        int64_t m_len = EZ_MIN(job->mb, job->p.M - m0);
        int64_t n_len = EZ_MIN(job->nb, job->p.N - n0);
        /* Without scratch the direct kernels still give the right answer. */
        if (ws || job->ws_bytes == 0)
            packed_block(job, ws, m0, m_len, n0, n_len);
        else
            direct_block(job->kern, &job->p, m0, m_len, n0, n_len);
    }
}

static int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }
static int64_t ceil_div(int64_t x, int64_t by) { return (x + by - 1) / by; }

/* Tasks are (row block, column block) pairs of near-equal size: row blocks
 * of at most mc rows, column blocks of at most nc (one block when B is
 * shared). They are handed to the pool in n_chunks runs of near-equal
 * length, as many as the pool's chunks (4 per thread), so that the threads
 * get equal work; when there are fewer tasks than that, blocks are cut
 * smaller: along rows when B is shared (free), otherwise along columns (a
 * task packs only the B of its columns; more row blocks would pack all of B
 * once more each). */
static void plan_tasks(packed_job *job, int n_threads, int share_b) {
    const ez_gemm_kernels *kern = job->kern;
    const gemm_problem *p = &job->p;
    const int64_t want = 4 * (int64_t)n_threads;
    const int64_t m_tiles = ceil_div(p->M, kern->mr), n_tiles = ceil_div(p->N, kern->nr);
    int64_t m_blocks = ceil_div(p->M, kern->mc), n_blocks = share_b ? 1 : ceil_div(p->N, kern->nc);
    if (n_threads > 1 && m_blocks * n_blocks < want) {
        if (share_b) m_blocks = EZ_MIN(m_tiles, ceil_div(want, n_blocks));
        n_blocks = EZ_MIN(n_tiles, EZ_MAX(n_blocks, ceil_div(want, m_blocks)));
        m_blocks = EZ_MIN(m_tiles, EZ_MAX(m_blocks, ceil_div(want, n_blocks)));
    }
    job->mb = round_up(ceil_div(p->M, m_blocks), kern->mr);
    job->m_blocks = ceil_div(p->M, job->mb);
    job->nb = round_up(ceil_div(p->N, n_blocks), kern->nr);
    job->n_blocks = ceil_div(p->N, job->nb);
    job->n_chunks = EZ_MIN(job->m_blocks * job->n_blocks, want);
    job->ws_bytes = sizeof(float) * (size_t)kern->kc *
                    (size_t)((share_b ? 0 : job->nb) + (job->ext->tile_direct ? 0 : job->mb));
}

/* Packing B once pays when more than one row block reads it. */
static int want_shared_b(const packed_job *job) {
    return job->p.M > job->kern->mc && (size_t)job->n_pad * (size_t)job->p.K * sizeof(float) <= SHARED_B_BYTES;
}

/* Elements of B packed per chunk of pack_b_all: worth a thread. */
#define PACK_GRAIN_ELEMENTS 32768

static void gemm_packed(ez_pool *pool, const ez_gemm_kernels *kern, const ez_gemm_kernels_ext *ext,
                        const gemm_problem *p) {
    packed_job job;
    float *owned = NULL;
    size_t shared_bytes = 0;
    memset(&job, 0, sizeof job);
    job.p = *p;
    job.kern = kern;
    job.ext = ext;
    job.pool = pool;
    job.n_pad = round_up(p->N, kern->nr);
    job.caller_index = ez_pool_thread_index(pool);
    for (int share_b = want_shared_b(&job); share_b >= 0; share_b--) {
        size_t bytes;
        plan_tasks(&job, ez_pool_threads(pool), share_b);
        shared_bytes = share_b ? sizeof(float) * (size_t)job.n_pad * (size_t)p->K : 0;
        bytes = shared_bytes + job.ws_bytes;
        if (pool)
            job.caller_ws = (float *)ez_pool_scratch(pool, job.caller_index, bytes);
        else
            job.caller_ws = owned = (float *)ez_aligned_alloc(bytes);
        if (job.caller_ws) break;
    }
    if (shared_bytes > 0 && job.caller_ws) {
        job.b_all = job.caller_ws;
        job.caller_ws += shared_bytes / sizeof(float);
        ez_pool_for(pool, job.n_pad / kern->nr, EZ_MAX((int64_t)1, PACK_GRAIN_ELEMENTS / (kern->nr * p->K)),
                    pack_b_all, &job);
    }
    ez_pool_for(pool, job.n_chunks, 1, packed_chunks, &job);
    ez_aligned_free(owned);
}

/* ---- dispatch ----------------------------------------------------------------------- */

/* Each ISA's file defines both tables or neither, so the two picks agree. */
const ez_gemm_kernels *ez_gemm_kernels_active(const ez_gemm_kernels_ext **ext) {
    if (ext)
        *ext = EZ_SIMD_PICK(ez_gemm_kernels_ext_avx512(), ez_gemm_kernels_ext_avx2(), NULL, ez_gemm_kernels_ext_neon(),
                            NULL);
    return EZ_SIMD_PICK(ez_gemm_kernels_avx512(), ez_gemm_kernels_avx2(), NULL, ez_gemm_kernels_neon(), NULL);
}

static void clear_or_keep(const gemm_problem *p) {
    if (p->accumulate) return;
    for (int64_t m = 0; m < p->M; m++) memset(p->C + m * p->ldc, 0, sizeof(float) * (size_t)p->N);
}

/* Columns per chunk of the column-split paths: whole micro-tiles of the row
 * kernels, and enough work per chunk to pay for claiming it. */
#define COLUMN_GRAIN 64

void ez_gemm_f32(ez_pool *pool, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                 int64_t ldb, int trans_b, float *C, int64_t ldc, int accumulate) {
    const ez_gemm_kernels_ext *ext;
    const ez_gemm_kernels *kern = ez_gemm_kernels_active(&ext);
    gemm_problem p = {M, N, K, A, lda, B, ldb, trans_b, C, ldc, accumulate};
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        clear_or_keep(&p);
        return;
    }
    if (!kern) {
        ez_pool_for(pool, N, COLUMN_GRAIN, ref_columns, &p);
    } else if (M <= (trans_b ? kern->small_m_nk : kern->small_m_kn)) {
        direct_job job = {p, kern};
        ez_pool_for(pool, N, COLUMN_GRAIN, direct_columns, &job);
    } else {
        gemm_packed(pool, kern, ext, &p);
    }
}
