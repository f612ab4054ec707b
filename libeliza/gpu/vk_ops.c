/* The ops: argument checks, push constants and grid sizes of each kernel. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/quant.h"
#include "vk_impl.h"

/* A 2-D grid of at least n workgroups, no side past 65535 (the smallest
 * maxComputeWorkGroupCount Vulkan allows); shaders flatten it again. */
static void grid(uint32_t n, uint32_t *gx, uint32_t *gy) {
    *gx = n < 65535u ? (n ? n : 1u) : 65535u;
    *gy = (n + *gx - 1) / *gx;
    if (*gy == 0) *gy = 1;
}

static uint32_t groups_for(uint32_t n_items) { return (n_items + EZ_GPU_WORKGROUP - 1) / EZ_GPU_WORKGROUP; }

static int32_t fits(const ez_gpu_buf *b, uint64_t n_floats, const char *what) {
    if (n_floats > b->size / 4)
        return ez_fail(ELIZA_E_INVALID_ARG, "GPU op: %s needs %llu floats, its buffer holds %llu", what,
                       (unsigned long long)n_floats, (unsigned long long)(b->size / 4));
    return ELIZA_OK;
}

static ez_gpu_kernel matvec_kernel(uint32_t type) {
    switch (type) {
    case EZ_TYPE_F32: return EZ_GPU_K_MV_F32;
    case EZ_TYPE_F16: return EZ_GPU_K_MV_F16;
    case EZ_TYPE_BF16: return EZ_GPU_K_MV_BF16;
    case EZ_TYPE_Q4_0: return EZ_GPU_K_MV_Q4_0;
    case EZ_TYPE_Q4_1: return EZ_GPU_K_MV_Q4_1;
    case EZ_TYPE_Q5_0: return EZ_GPU_K_MV_Q5_0;
    case EZ_TYPE_Q8_0: return EZ_GPU_K_MV_Q8_0;
    case EZ_TYPE_Q4_K: return EZ_GPU_K_MV_Q4_K;
    case EZ_TYPE_Q5_K: return EZ_GPU_K_MV_Q5_K;
    default: return EZ_GPU_K_MV_Q6_K;
    }
}

/* Invocations per row group (MV_ROWS = 2 rows): the largest power of two
 * up to the row's units, at most the workgroup (a row of 2,048 elements
 * then takes each invocation 4 quads: decode's matvecs are bound by memory
 * latency, not by bandwidth, so more invocations per row finish sooner),
 * but for a matrix of MV_MANY_ROWS rows or more (an output projection) no
 * more than leave each invocation MV_MANY_UNITS quads (not the slices): its grid fills the
 * device anyway, and fewer, longer rows per workgroup were faster there
 * (docs/gpu.md: Gemma 3's 262,144 x 640 Q8_0 output took 0.160 ms at 32
 * lanes, 0.267 ms at 128). At least the subgroup where the shaders reduce
 * with subgroup arithmetic. A unit is a quad (4 elements), but the K
 * quants' shaders read 16-byte runs of slices: 32 elements for Q4_K
 * (mv_q4_k.comp), 64 for Q6_K (mv_q6_k.comp). The workgroup (g->mv_workgroup)
 * and, for the K quants, a cap on lanes (g->mv_lanes_k) are tuning switches
 * read at open (docs/gpu.md). */
#define MV_ROWS 2
#define MV_MANY_ROWS 16384u
#define MV_MANY_UNITS 4u

static uint32_t matvec_unit(uint32_t type) {
    return type == EZ_TYPE_Q4_K ? 32u : type == EZ_TYPE_Q6_K ? 64u : 4u;
}

static uint32_t matvec_lanes(const ez_gpu *g, uint32_t type, uint32_t n_cols, uint32_t n_rows) {
    const uint32_t unit = matvec_unit(type), units = n_cols / unit;
    uint32_t most = unit == 4u && n_rows >= MV_MANY_ROWS ? units / MV_MANY_UNITS : units, lanes = 1;
    if (unit != 4u && g->mv_lanes_k && most > g->mv_lanes_k) most = g->mv_lanes_k;
    while (lanes * 2 <= most && lanes < g->mv_workgroup) lanes *= 2;
    return EZ_MAX(EZ_MAX(lanes, MV_ROWS), g->mv_subgroup);
}

/* The matvec of w's parts; glu 0 writes every row, otherwise 1 + the
 * activation of a paired matrix's gated unit (one output per row pair);
 * with step, y_off grows by its word step_word at run time; with rope, the
 * row pairs are rotated (ez_gpu_op_matvec_rope). */
static int32_t record_matvec(ez_gpu_cmd *c, const ez_gpu_matrix *w, ez_gpu_buf *x, uint32_t x_off, ez_gpu_buf *y,
                             uint32_t y_off, uint32_t glu, ez_gpu_buf *step, uint32_t step_word,
                             const ez_gpu_mv_rope *rope) {
    const uint32_t per_out = glu ? 2u : 1u;
    int32_t rc;
    int i;
    if (!ez_gpu_has_matvec(w->type) || w->n_parts <= 0) return ez_fail(ELIZA_E_INVALID_ARG, "GPU matvec: no matrix");
    if (glu && !w->paired) return ez_fail(ELIZA_E_INVALID_ARG, "GPU gated matvec of a matrix that is not a pair");
    if ((rc = fits(x, (uint64_t)x_off + (uint64_t)w->n_cols, "matvec input")) != ELIZA_OK) return rc;
    if ((rc = fits(y, (uint64_t)y_off + (uint64_t)w->n_rows / per_out, "matvec output")) != ELIZA_OK ||
        (step && (rc = fits(step, (uint64_t)step_word + 1, "matvec step word")) != ELIZA_OK))
        return rc;
    if (rope) {
        if (w->paired || !rope->angles || rope->head_dim == 0 || rope->head_dim % 2 || rope->n_rot % 2 ||
            rope->n_rot > rope->head_dim || w->n_rows % rope->head_dim)
            return ez_fail(ELIZA_E_INVALID_ARG, "GPU matvec with rope: %lld rows, heads of %u, %u rotated",
                           (long long)w->n_rows, rope->head_dim, rope->n_rot);
        for (i = 0; i < w->n_parts; i++)
            if (w->part_row0[i] % 2)
                return ez_fail(ELIZA_E_INVALID_ARG, "GPU matvec with rope: a part starts at odd row %lld",
                               (long long)w->part_row0[i]);
        if ((rc = fits(rope->angles, (uint64_t)rope->cs_off + rope->n_rot, "matvec rope angles")) != ELIZA_OK)
            return rc;
    }
    for (i = 0; i < w->n_parts; i++) {
        const uint32_t rows = (uint32_t)(w->part_row0[i + 1] - w->part_row0[i]);
        const uint32_t lanes = matvec_lanes(w->parts[i]->g, w->type, (uint32_t)w->n_cols,
                                             (uint32_t)(w->n_rows / per_out));
        const uint32_t push[12] = {(uint32_t)w->n_cols,
                                   rows,
                                   (uint32_t)w->row_bytes,
                                   x_off,
                                   y_off + (uint32_t)(w->part_row0[i] / per_out),
                                   lanes,
                                   glu,
                                   step ? step_word : EZ_GPU_NO_WORD,
                                   rope ? rope->head_dim : 0,
                                   rope ? rope->n_rot : 0,
                                   rope ? rope->cs_off : 0,
                                   (uint32_t)w->part_row0[i]};
        /* Without a step buffer or rope their bindings are there but never read: x fills them. */
        ez_gpu_buf *bufs[5] = {w->parts[i], x, y, step ? step : x, rope ? rope->angles : x};
        const uint32_t rows_per_group = w->parts[i]->g->mv_workgroup / lanes * MV_ROWS;
        uint32_t gx, gy;
        grid((rows + rows_per_group - 1) / rows_per_group, &gx, &gy);
        rc = ez_gpu_cmd_dispatch(c, matvec_kernel(w->type), bufs, 5, push, sizeof push, gx, gy);
        if (rc != ELIZA_OK) return rc;
    }
    return ELIZA_OK;
}

int32_t ez_gpu_op_matvec(ez_gpu_cmd *c, const ez_gpu_matrix *w, ez_gpu_buf *x, uint32_t x_off, ez_gpu_buf *y,
                         uint32_t y_off) {
    return record_matvec(c, w, x, x_off, y, y_off, 0, NULL, 0, NULL);
}

int32_t ez_gpu_op_matvec_at(ez_gpu_cmd *c, const ez_gpu_matrix *w, ez_gpu_buf *x, uint32_t x_off, ez_gpu_buf *y,
                            uint32_t y_off, ez_gpu_buf *step, uint32_t step_word) {
    if (!step) return ez_fail(ELIZA_E_INVALID_ARG, "GPU matvec at a step word without a step buffer");
    return record_matvec(c, w, x, x_off, y, y_off, 0, step, step_word, NULL);
}

int32_t ez_gpu_op_matvec_rope(ez_gpu_cmd *c, const ez_gpu_matrix *w, ez_gpu_buf *x, uint32_t x_off, ez_gpu_buf *y,
                              uint32_t y_off, ez_gpu_buf *step, uint32_t step_word, const ez_gpu_mv_rope *rope) {
    if (!rope) return ez_fail(ELIZA_E_INVALID_ARG, "GPU matvec with rope: no rope");
    return record_matvec(c, w, x, x_off, y, y_off, 0, step, step_word, rope);
}

int32_t ez_gpu_op_matvec_glu(ez_gpu_cmd *c, const ez_gpu_matrix *w, ez_gpu_buf *x, uint32_t x_off, ez_gpu_buf *y,
                             uint32_t y_off, ez_gpu_glu act) {
    if (act != EZ_GPU_GELU_TANH && act != EZ_GPU_SILU)
        return ez_fail(ELIZA_E_INVALID_ARG, "GPU gated matvec: activation %d", (int)act);
    return record_matvec(c, w, x, x_off, y, y_off, 1u + (uint32_t)act, NULL, 0, NULL);
}

static ez_gpu_kernel matmul_kernel(uint32_t type) {
    return (ez_gpu_kernel)(EZ_GPU_K_MM_F32 + (matvec_kernel(type) - EZ_GPU_K_MV_F32));
}

#define MM_TILE 64   /* matmul.glsl's BM and BN */

int32_t ez_gpu_op_matmul(ez_gpu_cmd *c, const ez_gpu_matrix *w, ez_gpu_buf *x, ez_gpu_buf *y, uint32_t n_tok,
                         ez_gpu_buf *step, uint32_t row0_word) {
    int32_t rc;
    int i;
    if (!ez_gpu_has_matvec(w->type) || w->n_parts <= 0 || n_tok == 0 || (n_tok + MM_TILE - 1) / MM_TILE > 65535u)
        return ez_fail(ELIZA_E_INVALID_ARG, "GPU matmul: no matrix or %u tokens", n_tok);
    if ((rc = fits(x, (uint64_t)n_tok * (uint64_t)w->n_cols, "matmul input")) != ELIZA_OK) return rc;
    if ((rc = fits(y, (uint64_t)n_tok * (uint64_t)w->n_rows, "matmul output")) != ELIZA_OK) return rc;
    if (step && (rc = fits(step, (uint64_t)row0_word + 1, "matmul step word")) != ELIZA_OK) return rc;
    for (i = 0; i < w->n_parts; i++) {
        const uint32_t rows = (uint32_t)(w->part_row0[i + 1] - w->part_row0[i]);
        const uint32_t push[7] = {(uint32_t)w->n_cols, rows, (uint32_t)w->row_bytes, (uint32_t)w->part_row0[i],
                                  (uint32_t)w->n_rows, n_tok, step ? row0_word : EZ_GPU_NO_WORD};
        /* Without a step buffer its binding is never read: x fills it. */
        ez_gpu_buf *bufs[4] = {w->parts[i], x, y, step ? step : x};
        const uint32_t gx = (rows + MM_TILE - 1) / MM_TILE;
        if (gx > 65535u) return ez_fail(ELIZA_E_INVALID_ARG, "GPU matmul: %u rows in one part", rows);
        rc = ez_gpu_cmd_dispatch(c, matmul_kernel(w->type), bufs, 4, push, sizeof push, gx,
                                 (n_tok + MM_TILE - 1) / MM_TILE);
        if (rc != ELIZA_OK) return rc;
    }
    return ELIZA_OK;
}

int32_t ez_gpu_op_rms_norm(ez_gpu_cmd *c, ez_gpu_buf *x, ez_gpu_buf *w, ez_gpu_buf *y, uint32_t n, uint32_t n_rows,
                           float eps) {
    uint32_t push[3] = {n, n_rows, 0};
    ez_gpu_buf *bufs[3] = {x, w, y};
    uint32_t gx, gy;
    int32_t rc;
    if (n == 0 || n_rows == 0) return ez_fail(ELIZA_E_INVALID_ARG, "GPU rms_norm of %u x %u", n_rows, n);
    if ((rc = fits(x, (uint64_t)n * n_rows, "rms_norm input")) != ELIZA_OK ||
        (rc = fits(w, n, "rms_norm weight")) != ELIZA_OK || (rc = fits(y, (uint64_t)n * n_rows, "rms_norm output")) != ELIZA_OK)
        return rc;
    memcpy(&push[2], &eps, sizeof eps);
    grid(n_rows, &gx, &gy);
    return ez_gpu_cmd_dispatch(c, EZ_GPU_K_RMS_NORM, bufs, 3, push, sizeof push, gx, gy);
}

int32_t ez_gpu_op_add_rms_norm(ez_gpu_cmd *c, ez_gpu_buf *o, ez_gpu_buf *w_post, ez_gpu_buf *x, ez_gpu_buf *w,
                               ez_gpu_buf *h, uint32_t n, uint32_t n_rows, float eps) {
    uint32_t push[4] = {n, w_post ? 1u : 0u, 0, n_rows};
    const uint64_t all = (uint64_t)n * n_rows;
    uint32_t gx, gy;
    /* Without a post norm its binding is never read: w fills it. */
    ez_gpu_buf *bufs[5] = {o, w_post ? w_post : w, x, w, h};
    int32_t rc;
    if (n == 0 || n_rows == 0) return ez_fail(ELIZA_E_INVALID_ARG, "GPU add_rms_norm of %u x %u", n_rows, n);
    if ((rc = fits(o, all, "add_rms_norm delta")) != ELIZA_OK ||
        (w_post && (rc = fits(w_post, n, "add_rms_norm post weight")) != ELIZA_OK) ||
        (rc = fits(x, all, "add_rms_norm residual")) != ELIZA_OK || (rc = fits(w, n, "add_rms_norm weight")) != ELIZA_OK ||
        (rc = fits(h, all, "add_rms_norm output")) != ELIZA_OK)
        return rc;
    memcpy(&push[2], &eps, sizeof eps);
    grid(n_rows, &gx, &gy);
    return ez_gpu_cmd_dispatch(c, EZ_GPU_K_ADD_NORM, bufs, 5, push, sizeof push, gx, gy);
}

int32_t ez_gpu_op_rope(ez_gpu_cmd *c, ez_gpu_buf *x, uint32_t x_off, ez_gpu_buf *cs, uint32_t cs_off,
                       uint32_t n_heads, uint32_t head_dim, uint32_t n_rot, int neox) {
    const uint32_t push[6] = {x_off, cs_off, n_heads, head_dim, n_rot, neox ? 1u : 0u};
    ez_gpu_buf *bufs[2] = {x, cs};
    uint32_t gx, gy;
    int32_t rc;
    if (n_heads == 0 || n_rot == 0 || n_rot % 2 || n_rot > head_dim)
        return ez_fail(ELIZA_E_INVALID_ARG, "GPU rope: %u heads of %u, %u rotated", n_heads, head_dim, n_rot);
    if ((rc = fits(x, (uint64_t)x_off + (uint64_t)n_heads * head_dim, "rope vector")) != ELIZA_OK ||
        (rc = fits(cs, (uint64_t)cs_off + n_rot, "rope angles")) != ELIZA_OK)
        return rc;
    grid(groups_for(n_heads * (n_rot / 2)), &gx, &gy);
    return ez_gpu_cmd_dispatch(c, EZ_GPU_K_ROPE, bufs, 2, push, sizeof push, gx, gy);
}

int32_t ez_gpu_op_qk_rope(ez_gpu_cmd *c, const ez_gpu_qk *a, ez_gpu_buf *q, ez_gpu_buf *k, ez_gpu_buf *angles,
                          ez_gpu_buf *k_cache) {
    uint32_t push[12] = {a->n_head, a->n_head_kv, a->head_dim, a->n_rot, a->neox ? 1u : 0u, a->cs_off,
                         (a->q_norm ? 1u : 0u) | (a->k_norm ? 2u : 0u), 0, a->step_word, a->n_tok, a->cs_stride,
                         a->row0_word};
    const uint64_t n_tok = a->n_tok, last_cs = (uint64_t)a->cs_off + (n_tok ? n_tok - 1 : 0) * a->cs_stride;
    /* Absent norms' bindings are never read: q fills them. */
    ez_gpu_buf *bufs[7] = {q, k, a->q_norm ? a->q_norm : q, a->k_norm ? a->k_norm : q, angles, k_cache, a->step};
    uint32_t gx, gy;
    int32_t rc;
    if (a->n_head == 0 || a->n_head_kv == 0 || a->head_dim == 0 || a->head_dim > 512 || a->n_rot % 2 ||
        a->n_rot > a->head_dim || !a->step || a->n_tok == 0 || n_tok * (a->n_head + a->n_head_kv) > 0xffffffffu)
        return ez_fail(ELIZA_E_INVALID_ARG, "GPU qk_rope: %u + %u heads of %u, %u rotated", a->n_head, a->n_head_kv,
                       a->head_dim, a->n_rot);
    if ((rc = fits(q, n_tok * a->n_head * a->head_dim, "qk_rope queries")) != ELIZA_OK ||
        (rc = fits(k, n_tok * a->n_head_kv * a->head_dim, "qk_rope keys")) != ELIZA_OK ||
        (a->q_norm && (rc = fits(a->q_norm, a->head_dim, "qk_rope query norm")) != ELIZA_OK) ||
        (a->k_norm && (rc = fits(a->k_norm, a->head_dim, "qk_rope key norm")) != ELIZA_OK) ||
        (rc = fits(angles, last_cs + a->n_rot, "qk_rope angles")) != ELIZA_OK ||
        (rc = fits(k_cache, (uint64_t)a->n_head_kv * a->head_dim, "qk_rope cache")) != ELIZA_OK ||
        (rc = fits(a->step, (uint64_t)a->step_word + 1, "qk_rope step word")) != ELIZA_OK ||
        (a->row0_word != EZ_GPU_NO_WORD && (rc = fits(a->step, (uint64_t)a->row0_word + 1, "qk_rope row word"))))
        return rc;
    memcpy(&push[7], &a->eps, sizeof a->eps);
    grid(a->n_tok * (a->n_head + a->n_head_kv), &gx, &gy);
    return ez_gpu_cmd_dispatch(c, EZ_GPU_K_QK_ROPE, bufs, 7, push, sizeof push, gx, gy);
}

static int32_t record_glu(ez_gpu_cmd *c, ez_gpu_buf *g, ez_gpu_buf *u, uint32_t n, ez_gpu_glu act, uint32_t pairs) {
    const uint32_t push[3] = {n, (uint32_t)act, pairs};
    ez_gpu_buf *bufs[2] = {g, u};
    uint32_t gx, gy;
    int32_t rc;
    if (n == 0 || n > UINT32_MAX / 2) return ez_fail(ELIZA_E_INVALID_ARG, "GPU glu of %u elements", n);
    if (act != EZ_GPU_GELU_TANH && act != EZ_GPU_SILU)
        return ez_fail(ELIZA_E_INVALID_ARG, "GPU glu: activation %d", (int)act);
    if ((rc = fits(g, (uint64_t)n * (pairs ? 2u : 1u), "glu gate")) != ELIZA_OK ||
        (rc = fits(u, n, "glu up")) != ELIZA_OK)
        return rc;
    grid(groups_for(n), &gx, &gy);
    return ez_gpu_cmd_dispatch(c, EZ_GPU_K_GLU, bufs, 2, push, sizeof push, gx, gy);
}

int32_t ez_gpu_op_glu(ez_gpu_cmd *c, ez_gpu_buf *g, ez_gpu_buf *u, uint32_t n, ez_gpu_glu act) {
    return record_glu(c, g, u, n, act, 0);
}

int32_t ez_gpu_op_glu_pairs(ez_gpu_cmd *c, ez_gpu_buf *g, ez_gpu_buf *u, uint32_t n, ez_gpu_glu act) {
    return record_glu(c, g, u, n, act, 1);
}

/* The add kernel with every push constant (add.comp). */
static int32_t record_add(ez_gpu_cmd *c, ez_gpu_buf *x, uint32_t x_off, ez_gpu_buf *y, uint32_t y_off, uint32_t n,
                          int accumulate, ez_gpu_buf *step, uint32_t step_word, uint32_t from_word, uint32_t row_len) {
    const uint32_t push[7] = {n, x_off, y_off, accumulate ? 1u : 0u, step ? step_word : EZ_GPU_NO_WORD,
                              step ? from_word : EZ_GPU_NO_WORD, row_len};
    /* Without a step buffer the binding is there but never read: x fills it. */
    ez_gpu_buf *bufs[3] = {x, y, step ? step : x};
    uint32_t gx, gy;
    grid(groups_for(n), &gx, &gy);
    return ez_gpu_cmd_dispatch(c, EZ_GPU_K_ADD, bufs, 3, push, sizeof push, gx, gy);
}

int32_t ez_gpu_op_add_at(ez_gpu_cmd *c, ez_gpu_buf *x, uint32_t x_off, ez_gpu_buf *y, uint32_t y_off, uint32_t n,
                         int accumulate, ez_gpu_buf *step, uint32_t step_word) {
    int32_t rc;
    if (n == 0) return ez_fail(ELIZA_E_INVALID_ARG, "GPU add of 0 elements");
    if ((rc = fits(x, (uint64_t)x_off + n, "add input")) != ELIZA_OK ||
        (rc = fits(y, (uint64_t)y_off + n, "add output")) != ELIZA_OK ||
        (step && (rc = fits(step, (uint64_t)step_word + 1, "add step word")) != ELIZA_OK))
        return rc;
    return record_add(c, x, x_off, y, y_off, n, accumulate, step, step_word, EZ_GPU_NO_WORD, 0);
}

int32_t ez_gpu_op_copy_rows(ez_gpu_cmd *c, ez_gpu_buf *x, ez_gpu_buf *y, uint32_t n_rows, uint32_t row_len,
                            ez_gpu_buf *step, uint32_t dst_word, uint32_t row0_word) {
    const uint64_t n = (uint64_t)n_rows * row_len;
    int32_t rc;
    if (n == 0 || n > 0xffffffffu || !step)
        return ez_fail(ELIZA_E_INVALID_ARG, "GPU copy_rows of %u rows of %u", n_rows, row_len);
    if ((rc = fits(x, n, "copy_rows input")) != ELIZA_OK || (rc = fits(y, row_len, "copy_rows output")) != ELIZA_OK ||
        (rc = fits(step, (uint64_t)EZ_MAX(dst_word, row0_word) + 1, "copy_rows step words")) != ELIZA_OK)
        return rc;
    return record_add(c, x, 0, y, 0, (uint32_t)n, 0, step, dst_word, row0_word, row_len);
}

int32_t ez_gpu_op_add(ez_gpu_cmd *c, ez_gpu_buf *x, uint32_t x_off, ez_gpu_buf *y, uint32_t y_off, uint32_t n,
                      int accumulate) {
    return ez_gpu_op_add_at(c, x, x_off, y, y_off, n, accumulate, NULL, 0);
}

int32_t ez_gpu_op_softcap(ez_gpu_cmd *c, ez_gpu_buf *x, uint32_t n, float cap) {
    uint32_t push[2] = {n, 0};
    uint32_t gx, gy;
    int32_t rc;
    if (n == 0 || !(cap > 0.0f)) return ez_fail(ELIZA_E_INVALID_ARG, "GPU softcap of %u elements at %g", n, (double)cap);
    if ((rc = fits(x, n, "softcap input")) != ELIZA_OK) return rc;
    memcpy(&push[1], &cap, sizeof cap);
    grid(groups_for(n), &gx, &gy);
    return ez_gpu_cmd_dispatch(c, EZ_GPU_K_SOFTCAP, &x, 1, push, sizeof push, gx, gy);
}

int32_t ez_gpu_op_softmax(ez_gpu_cmd *c, ez_gpu_buf *x, uint32_t n, uint32_t n_rows) {
    const uint32_t push[2] = {n, n_rows};
    uint32_t gx, gy;
    int32_t rc;
    if (n == 0 || n_rows == 0) return ez_fail(ELIZA_E_INVALID_ARG, "GPU softmax of %u x %u", n_rows, n);
    if ((rc = fits(x, (uint64_t)n * n_rows, "softmax rows")) != ELIZA_OK) return rc;
    grid(n_rows, &gx, &gy);
    return ez_gpu_cmd_dispatch(c, EZ_GPU_K_SOFTMAX, &x, 1, push, sizeof push, gx, gy);
}

/* Stage-0 workgroups of the argmax: about 4 elements per invocation of a
 * 256-wide group, at most 256 groups (one stage-1 group reduces them). */
static uint32_t argmax_groups(uint32_t n) {
    const uint32_t g = (n + 1023u) / 1024u;
    return g < 1u ? 1u : g > 256u ? 256u : g;
}

uint32_t ez_gpu_argmax_scratch_words(uint32_t n) { return 2u * argmax_groups(n); }

int32_t ez_gpu_op_argmax(ez_gpu_cmd *c, ez_gpu_buf *x, uint32_t n, ez_gpu_buf *scratch, ez_gpu_buf *out) {
    const uint32_t groups = argmax_groups(n);
    const uint32_t push0[3] = {n, groups, 0}, push1[3] = {n, groups, 1};
    ez_gpu_buf *bufs[3] = {x, scratch, out};
    int32_t rc;
    if (n == 0) return ez_fail(ELIZA_E_INVALID_ARG, "GPU argmax of 0 elements");
    if ((rc = fits(x, n, "argmax input")) != ELIZA_OK || (rc = fits(out, 1, "argmax result")) != ELIZA_OK ||
        (rc = fits(scratch, 2u * groups, "argmax scratch")) != ELIZA_OK)
        return rc;
    if ((rc = ez_gpu_cmd_dispatch(c, EZ_GPU_K_ARGMAX, bufs, 3, push0, sizeof push0, groups, 1)) != ELIZA_OK) return rc;
    return ez_gpu_cmd_dispatch(c, EZ_GPU_K_ARGMAX, bufs, 3, push1, sizeof push1, 1, 1);
}

#define ATTN_MAX_HEAD_DIM 512   /* attention.glsl's MAX_HEAD_DIM */
#define ATTN_PREFILL_ROWS 4     /* attn_prefill.comp's ROWS: batch rows per workgroup */

static uint32_t attn_chunks(const ez_gpu_attn *a) { return (a->n_kv + EZ_GPU_WORKGROUP - 1) / EZ_GPU_WORKGROUP; }

uint64_t ez_gpu_attn_scratch_floats(const ez_gpu_attn *a) {
    return (uint64_t)a->n_head * (1 + (uint64_t)attn_chunks(a) * ((uint64_t)a->head_dim + 2));
}

int32_t ez_gpu_attn_scratch_reset(ez_gpu_buf *scratch, uint32_t n_head) {
    uint32_t *zeros = calloc(n_head ? n_head : 1, sizeof *zeros);
    int32_t rc;
    if (!zeros) return ez_fail(ELIZA_E_NOMEM, "GPU attention: %u counters", n_head);
    rc = n_head ? ez_gpu_upload(scratch, 0, zeros, (uint64_t)n_head * sizeof *zeros) : ELIZA_OK;
    free(zeros);
    return rc;
}

int32_t ez_gpu_op_attention(ez_gpu_cmd *c, const ez_gpu_attn *a, ez_gpu_buf *q, ez_gpu_buf *k, ez_gpu_buf *v,
                            ez_gpu_buf *out, ez_gpu_buf *scratch) {
    const uint32_t n_chunks = attn_chunks(a), step_word = a->step ? a->step_word : EZ_GPU_NO_WORD;
    uint32_t push[9] = {a->n_head, a->n_head_kv, a->head_dim, a->n_kv, a->kv_stride, 0, a->kv_first, step_word,
                        n_chunks};
    /* Without a step buffer its binding is never read: q fills it. */
    ez_gpu_buf *bufs[6] = {q, k, v, scratch, a->step ? a->step : q, out};
    const uint64_t kv_elems =
        ((uint64_t)a->kv_first + a->n_kv - 1) * a->kv_stride + (uint64_t)a->n_head_kv * a->head_dim;
    const uint64_t kv_floats = a->kv_type == EZ_TYPE_F16 ? (kv_elems + 1) / 2 : kv_elems;
    uint32_t gx, gy;
    int32_t rc;
    if (a->n_head == 0 || a->n_head_kv == 0 || a->n_head % a->n_head_kv || a->head_dim == 0 ||
        a->head_dim > ATTN_MAX_HEAD_DIM || a->n_kv == 0 || a->kv_stride < a->n_head_kv * a->head_dim ||
        (a->kv_type != EZ_TYPE_F32 && a->kv_type != EZ_TYPE_F16) || (a->kv_type == EZ_TYPE_F16 && a->kv_stride % 2) ||
        (uint64_t)a->n_head * n_chunks > 0xffffffffu)
        return ez_fail(ELIZA_E_INVALID_ARG, "GPU attention: %u heads, %u kv heads of %u, %u positions, stride %u",
                       a->n_head, a->n_head_kv, a->head_dim, a->n_kv, a->kv_stride);
    if ((rc = fits(q, (uint64_t)a->n_head * a->head_dim, "attention query")) != ELIZA_OK ||
        (rc = fits(k, kv_floats, "attention keys")) != ELIZA_OK ||
        (rc = fits(v, kv_floats, "attention values")) != ELIZA_OK ||
        (rc = fits(out, (uint64_t)a->n_head * a->head_dim, "attention output")) != ELIZA_OK ||
        (rc = fits(scratch, ez_gpu_attn_scratch_floats(a), "attention scratch")) != ELIZA_OK ||
        (a->step && (rc = fits(a->step, (uint64_t)a->step_word + 2, "attention step words")) != ELIZA_OK))
        return rc;
    memcpy(&push[5], &a->scale, sizeof a->scale);
    grid(a->n_head * n_chunks, &gx, &gy);
    return ez_gpu_cmd_dispatch(c, a->kv_type == EZ_TYPE_F16 ? EZ_GPU_K_ATTN_F16 : EZ_GPU_K_ATTN_F32, bufs, 6, push,
                               sizeof push, gx, gy);
}

int32_t ez_gpu_op_attention_batch(ez_gpu_cmd *c, const ez_gpu_attn_batch *a, ez_gpu_buf *q, ez_gpu_buf *k,
                                  ez_gpu_buf *v, ez_gpu_buf *out) {
    uint32_t push[10] = {a->n_head, a->n_head_kv, a->head_dim, a->kv_stride, 0, a->n_swa, a->n_tok, a->row0_word,
                         a->pos_word, a->n_kv};
    ez_gpu_buf *bufs[5] = {q, k, v, out, a->step};
    const uint64_t rows = (uint64_t)a->n_tok * a->n_head * a->head_dim;
    const uint64_t kv_floats = ((uint64_t)a->n_kv - 1) * a->kv_stride + (uint64_t)a->n_head_kv * a->head_dim;
    uint32_t gx, gy;
    int32_t rc;
    if (a->n_head == 0 || a->n_head_kv == 0 || a->n_head % a->n_head_kv || a->head_dim == 0 ||
        a->head_dim > ATTN_MAX_HEAD_DIM || a->n_kv == 0 || a->n_tok == 0 || a->kv_stride < a->n_head_kv * a->head_dim ||
        !a->step || (uint64_t)a->n_tok * a->n_head > 0xffffffffu)
        return ez_fail(ELIZA_E_INVALID_ARG, "GPU batch attention: %u rows, %u heads, %u kv heads of %u, stride %u",
                       a->n_tok, a->n_head, a->n_head_kv, a->head_dim, a->kv_stride);
    if ((rc = fits(q, rows, "batch attention queries")) != ELIZA_OK ||
        (rc = fits(k, kv_floats, "batch attention keys")) != ELIZA_OK ||
        (rc = fits(v, kv_floats, "batch attention values")) != ELIZA_OK ||
        (rc = fits(out, rows, "batch attention output")) != ELIZA_OK ||
        (rc = fits(a->step, (uint64_t)EZ_MAX(a->row0_word, a->pos_word) + 1, "batch attention step words")) != ELIZA_OK)
        return rc;
    memcpy(&push[4], &a->scale, sizeof a->scale);
    grid((a->n_tok + ATTN_PREFILL_ROWS - 1) / ATTN_PREFILL_ROWS * a->n_head, &gx, &gy);
    return ez_gpu_cmd_dispatch(c, EZ_GPU_K_ATTN_PREFILL, bufs, 5, push, sizeof push, gx, gy);
}
