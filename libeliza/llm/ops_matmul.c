/* Products of activations with stored weights through the fused quant dot
 * kernels of core/quant.h: the activations are quantized once to each
 * weight type's vec_dot_type (Q8_0, Q8_1 or Q8_K; F32 as is for
 * F32/F16/BF16) exactly as llama.cpp does, then every output is one dot of a
 * weight row with an activation row.
 *
 * Work is split over tiles of weight rows; a tile stays in L1 while all
 * activation rows pass over it, so each weight byte comes from memory once
 * per call whatever the number of tokens; a single token (decode) takes the
 * multi-row matvec where the type has one, several weight rows per pass over
 * its activations, the per-row dots' sums exactly. The matrices of a group (q, k, v
 * or gate, up) share one parallel pass, which saves a pool dispatch each. */
#include <inttypes.h>
#include <string.h>

#include "core/error.h"
#include "core/platform.h"
#include "core/quant.h"
#include "ops.h"

/* Weight rows per task tile. */
#define ROW_TILE 16
/* Weight rows per task of the multi-row matvec at most: the kernel reads its
 * range as four streams of consecutive rows, which the hardware prefetchers
 * follow once they are long (Q8_0 output matrix of Gemma 3, 262,144 rows of
 * 680 bytes, one thread on Zen 5: 16.2 ms at 16 rows a task, 11.4 at 64,
 * 8.9 at 256, 8.6 at 1,024; the per-row dots 9.1-12.3). Smaller matrices
 * take four tasks per thread so the threads stay balanced. */
#define GEMV_TILE 1024
/* Activation rows from which unpacking a weight tile once beats unpacking it
 * in every per-pair dot. */
#define MIN_ROWS_FOR_TILES 4
/* Activation elements per quantization task. */
#define QUANT_GRAIN 16384
#define MAX_GROUP 4

void ez_llm_acts_init(ez_llm_acts *a) {
    memset(a, 0, sizeof *a);
    for (int i = 0; i < EZ_LLM_ACT_FORMATS; i++) a->fmt[i].type = EZ_TYPE_COUNT;
}

void ez_llm_acts_free(ez_llm_acts *a) {
    for (int i = 0; i < EZ_LLM_ACT_FORMATS; i++) {
        ez_aligned_free(a->fmt[i].data);
        ez_aligned_free(a->fmt[i].x8);
    }
    ez_llm_acts_init(a);
}

typedef struct {
    uint32_t vdt;
    const uint8_t *xq;
    size_t row_bytes;
    int64_t M, K;
    void *dst;
    size_t group_bytes;
} pack_job;

static void pack_groups(void *ctx, int64_t g0, int64_t g1, int thread_index) {
    const pack_job *j = (const pack_job *)ctx;
    const uint8_t *xq = j->xq + (size_t)(g0 * 8) * j->row_bytes;
    const int64_t rows = EZ_MIN(j->M - g0 * 8, (g1 - g0) * 8);
    uint8_t *dst = (uint8_t *)j->dst + (size_t)g0 * j->group_bytes;
    (void)thread_index;
    if (j->vdt == EZ_TYPE_Q8_0) ez_llm_pack_x8(xq, j->row_bytes, rows, j->K, (ez_llm_x8_block *)dst);
    else if (j->vdt == EZ_TYPE_Q8_1) ez_llm_pack_x8_1(xq, j->row_bytes, rows, j->K, (ez_llm_x8_block *)dst);
    else ez_llm_pack_x8k(xq, j->row_bytes, rows, j->K, (ez_llm_x8k_block *)dst);
}

/* The quantized activation rows of `f` repacked for the x8 kernels, once
 * per call. */
static int32_t x8_activations(ez_pool *pool, const ez_llm_acts *a, ez_llm_act_rows *f, const void **out) {
    const int64_t n_groups = (a->n_rows + 7) / 8;
    pack_job job;
    size_t need;
    job.group_bytes = f->type == EZ_TYPE_Q8_0 || f->type == EZ_TYPE_Q8_1
                          ? (size_t)(a->n_cols / EZ_QK) * sizeof(ez_llm_x8_block)
                          : (size_t)(a->n_cols / EZ_QK_K) * sizeof(ez_llm_x8k_block);
    need = (size_t)n_groups * job.group_bytes;
    if (!f->x8_ready) {
        if (f->x8_cap < need) {
            void *p = ez_aligned_alloc(need);
            if (!p)
                return ez_fail(ELIZA_E_NOMEM, "matmul: cannot allocate %" PRIu64 " bytes of packed activations",
                               (uint64_t)need);
            ez_aligned_free(f->x8);
            f->x8 = p;
            f->x8_cap = need;
        }
        job.vdt = f->type;
        job.xq = f->data;
        job.row_bytes = f->row_bytes;
        job.M = a->n_rows;
        job.K = a->n_cols;
        job.dst = f->x8;
        ez_pool_for(pool, n_groups, 1, pack_groups, &job);
        f->x8_ready = 1;
    }
    *out = f->x8;
    return ELIZA_OK;
}

typedef struct {
    const float *x;
    int64_t K;
    uint8_t *dst;
    size_t row_bytes;
    ez_quant_fn quant;
} quant_job;

static void quantize_rows(void *ctx, int64_t m0, int64_t m1, int thread_index) {
    const quant_job *j = (const quant_job *)ctx;
    (void)thread_index;
    for (int64_t m = m0; m < m1; m++) j->quant(j->x + m * j->K, j->dst + (size_t)m * j->row_bytes, j->K);
}

/* The quantizer of activation format `vdt`: Q8_0 and Q8_1 rounded as
 * llama.cpp rounds them on this CPU (ops.h); Q8_K is ggml's reference. */
static ez_quant_fn activation_quantizer(uint32_t vdt) {
    if (vdt == EZ_TYPE_Q8_0) return ez_llm_ops_active()->quant_q8_0;
    if (vdt == EZ_TYPE_Q8_1) return ez_llm_quant_q8_1;
    return ez_kernels(vdt)->quant;
}

/* The activation rows in format `vdt`: *f NULL and x itself for F32, else
 * the slot holding a quantized copy, made on first use in this call. */
static int32_t activations(ez_pool *pool, ez_llm_acts *a, uint32_t vdt, ez_llm_act_rows **f, const uint8_t **rows,
                           size_t *row_bytes) {
    ez_llm_act_rows *slot = NULL;
    size_t rb, need;
    quant_job job;
    *f = NULL;
    if (vdt == EZ_TYPE_F32) {
        *rows = (const uint8_t *)a->x;
        *row_bytes = sizeof(float) * (size_t)a->n_cols;
        return ELIZA_OK;
    }
    for (int i = 0; i < EZ_LLM_ACT_FORMATS && !slot; i++)
        if (a->fmt[i].type == vdt || a->fmt[i].type == EZ_TYPE_COUNT) slot = &a->fmt[i];
    if (!slot) return ez_fail(ELIZA_E_INTERNAL, "matmul: more than %d activation formats", EZ_LLM_ACT_FORMATS);
    if (slot->type != vdt) {
        rb = (size_t)ez_row_bytes(vdt, (uint64_t)a->n_cols);
        job.quant = activation_quantizer(vdt);
        if (rb == 0 || !job.quant)
            return ez_fail(ELIZA_E_UNSUPPORTED, "matmul: cannot quantize rows of %" PRId64 " to %s", a->n_cols,
                           ez_type_traits_of(vdt)->name);
        need = rb * (size_t)a->n_rows;
        if (slot->cap < need) {
            uint8_t *p = (uint8_t *)ez_aligned_alloc(need);
            if (!p)
                return ez_fail(ELIZA_E_NOMEM, "matmul: cannot allocate %" PRIu64 " bytes of activations",
                               (uint64_t)need);
            ez_aligned_free(slot->data);
            slot->data = p;
            slot->cap = need;
        }
        job.x = a->x;
        job.K = a->n_cols;
        job.dst = slot->data;
        job.row_bytes = rb;
        ez_pool_for(pool, a->n_rows, EZ_MAX((int64_t)1, QUANT_GRAIN / a->n_cols), quantize_rows, &job);
        slot->type = vdt;
        slot->row_bytes = rb;
        slot->x8_ready = 0;
    }
    *f = slot;
    *rows = slot->data;
    *row_bytes = slot->row_bytes;
    return ELIZA_OK;
}

typedef struct {
    const ez_llm_matrix *w;
    ez_dot_fn dot;
    ez_llm_tile_fn tile;       /* NULL: per-pair dots */
    ez_llm_x8_fn x8;           /* set: packed activations in x8_data */
    ez_llm_gemv_fn gemv;       /* set: M = 1, several weight rows per pass over x */
    const void *x8_data;
    const uint8_t *x;
    size_t x_row_bytes;
    float *y;
    int64_t ldy;
    int64_t tile_rows;    /* weight rows per tile */
    int64_t first_tile;   /* index of this matrix's first tile in the group */
} mm_part;

typedef struct {
    mm_part part[MAX_GROUP];
    int n_part;
    int64_t M;
    ez_pool *pool;
    size_t tile_scratch;
} mm_job;

static void mm_tiles(void *ctx, int64_t t0, int64_t t1, int thread_index) {
    const mm_job *job = (const mm_job *)ctx;
    void *scratch = job->tile_scratch ? ez_pool_scratch(job->pool, thread_index, job->tile_scratch) : NULL;
    for (int64_t t = t0; t < t1; t++) {
        int p = job->n_part - 1;
        while (job->part[p].first_tile > t) p--;
        {
            const mm_part *pt = &job->part[p];
            const ez_llm_matrix *w = pt->w;
            const int64_t r0 = (t - pt->first_tile) * pt->tile_rows;
            const int64_t r1 = EZ_MIN(r0 + pt->tile_rows, w->n_rows);
            if (pt->x8 && scratch) {
                pt->x8(w, r0, r1, pt->x8_data, job->M, pt->y, pt->ldy, scratch);
                continue;
            }
            if (pt->gemv) {
                pt->gemv(w, r0, r1, pt->x, pt->y + r0);
                continue;
            }
            if (pt->tile && scratch) {
                pt->tile(w, r0, r1, pt->x, pt->x_row_bytes, job->M, pt->y, pt->ldy, scratch);
                continue;
            }
            for (int64_t m = 0; m < job->M; m++) {
                const uint8_t *x = pt->x + (size_t)m * pt->x_row_bytes;
                float *y = pt->y + m * pt->ldy;
                for (int64_t r = r0; r < r1; r++) y[r] = pt->dot(w->n_cols, w->data + (size_t)r * w->row_bytes, x);
            }
        }
    }
}

int32_t ez_llm_matmul(ez_pool *pool, ez_llm_acts *acts, const float *x, int64_t M, const ez_llm_mm *mm, int n_mm) {
    mm_job job;
    int64_t tiles = 0;
    int32_t rc;
    if (n_mm < 1 || n_mm > MAX_GROUP) return ez_fail(ELIZA_E_INTERNAL, "matmul: group of %d", n_mm);
    acts->x = x;
    acts->n_rows = M;
    acts->n_cols = mm[0].w->n_cols;
    for (int i = 0; i < EZ_LLM_ACT_FORMATS; i++) acts->fmt[i].type = EZ_TYPE_COUNT;
    job.n_part = n_mm;
    job.M = M;
    job.pool = pool;
    job.tile_scratch = 0;
    for (int i = 0; i < n_mm; i++) {
        const ez_llm_matrix *w = mm[i].w;
        mm_part *pt = &job.part[i];
        ez_llm_act_rows *f;
        if (w->n_cols != acts->n_cols) return ez_fail(ELIZA_E_INTERNAL, "matmul: group with different inputs");
        pt->w = w;
        pt->dot = ez_kernels(w->type)->dot;
        pt->tile = M >= MIN_ROWS_FOR_TILES ? ez_llm_tile_active(w->type) : NULL;
        pt->gemv = M == 1 ? ez_llm_gemv_active(w->type) : NULL;
        if (pt->tile) job.tile_scratch = EZ_MAX(job.tile_scratch, ez_llm_tile_scratch(w->type, w->n_cols));
        pt->y = mm[i].y;
        pt->ldy = mm[i].ldy;
        pt->first_tile = tiles;
        rc = activations(pool, acts, ez_type_traits_of(w->type)->vec_dot_type, &f, &pt->x, &pt->x_row_bytes);
        if (rc) return rc;
        pt->x8 = M >= EZ_LLM_X8_MIN_ROWS && f ? ez_llm_x8_active(w->type) : NULL;
        pt->x8_data = NULL;
        if (pt->x8 && (rc = x8_activations(pool, acts, f, &pt->x8_data))) return rc;
        if (pt->x8) job.tile_scratch = EZ_MAX(job.tile_scratch, ez_llm_tile_scratch(w->type, w->n_cols));
        pt->tile_rows = ROW_TILE;
        if (pt->gemv) {
            const int64_t quarter = w->n_rows / (4 * ez_pool_threads(pool));
            pt->tile_rows = EZ_MAX((int64_t)ROW_TILE, EZ_MIN((int64_t)GEMV_TILE, quarter / ROW_TILE * ROW_TILE));
        }
        tiles += (w->n_rows + pt->tile_rows - 1) / pt->tile_rows;
    }
    ez_pool_for(pool, tiles, 1, mm_tiles, &job);
    return ELIZA_OK;
}
