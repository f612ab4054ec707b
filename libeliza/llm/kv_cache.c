/* The KV cache object: per-layer rows and rings, rewind, snapshots and
 * recurrent states (kv.h describes the rules). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/platform.h"
#include "kv.h"

struct ez_kv_snapshot {
    const ez_kv_cache *cache;  /* compared only, never read: the snapshot may outlive it */
    int n_layer, mode;
    uint32_t generation;
    int32_t n_pos, hi;
    uint8_t **rows;            /* FULL: [n_layer][2] copies of k and v (cap rows), NULL for layers without */
    uint8_t **states;          /* [n_layer] copies of the recurrent states, NULL for layers without */
    float **smooth;            /* FULL: [n_layer] copies of the key smoothing (ready, m, s, bias), NULL for layers without */
    size_t bytes;
};

static int32_t format_make(int type, int head_dim, int n_heads, int is_v, int il, ez_kv_format *f) {
    if (type < 0 || type >= EZ_KV_COUNT) return ez_fail(ELIZA_E_INVALID_ARG, "KV cache type %d is unknown", type);
    if (head_dim < 1 || head_dim % ez_kv_block_size(type) != 0)
        return ez_fail(ELIZA_E_INVALID_ARG,
                       "a %s %s cache needs a head size that is a multiple of %d; this model's is %d (layer %d)",
                       ez_kv_type_name(type), is_v ? "value" : "key", ez_kv_block_size(type), head_dim, il);
    f->type = type;
    f->kern = ez_kv_kernels_active(type);
    f->head_dim = head_dim;
    f->head_bytes = ez_kv_row_bytes(type, head_dim);
    f->row_bytes = f->head_bytes * (size_t)n_heads;
    f->rot = ez_kv_rotation(type, head_dim, is_v);
    return ELIZA_OK;
}

/* n zeroed bytes (64 spare for the kernels' vector loads). */
static uint8_t *alloc_bytes(size_t n, int32_t *rc) {
    uint8_t *p;
    if (*rc) return NULL;
    if (n > SIZE_MAX - 64) {
        *rc = ez_fail(ELIZA_E_NOMEM, "KV cache: %" PRIu64 " bytes do not fit in memory", (uint64_t)n);
        return NULL;
    }
    p = (uint8_t *)ez_aligned_alloc(n + 64);
    if (!p) *rc = ez_fail(ELIZA_E_NOMEM, "KV cache: cannot allocate %" PRIu64 " bytes", (uint64_t)n);
    else memset(p, 0, n + 64);
    return p;
}

/* The floats a FULL snapshot keeps of a smoothing: ready, then m, s and bias. */
static size_t smooth_floats(const ez_kv_smooth *sm) { return 1 + 3 * (size_t)sm->n_head_kv * (size_t)sm->head_dim; }

static ez_kv_smooth *smooth_make(const ez_kv_format *fk, int n_head_kv, int32_t *rc) {
    const size_t n = (size_t)n_head_kv * (size_t)fk->head_dim;
    ez_kv_smooth *sm = (ez_kv_smooth *)calloc(1, sizeof *sm + 3 * n * sizeof(float));
    if (!sm) {
        *rc = ez_fail(ELIZA_E_NOMEM, "out of memory for the KV cache's key smoothing");
        return NULL;
    }
    sm->n_head_kv = n_head_kv;
    sm->head_dim = fk->head_dim;
    sm->rot = fk->rot;
    sm->mean = (float *)(void *)(sm + 1);
    sm->scale = sm->mean + n;
    sm->bias = sm->scale + n;
    return sm;
}

static int32_t layer_make(ez_kv_cache *c, const ez_kv_layer_spec *s, int il) {
    ez_kv_layer *L = &c->layers[il];
    int32_t rc = ELIZA_OK;
    L->src = il;
    L->n_swa = s->n_swa > 0 ? s->n_swa : 0;
    if (s->alias >= 0) {
        const ez_kv_layer *A;
        if (s->alias >= il || c->layers[s->alias].src != s->alias || !c->layers[s->alias].k)
            return ez_fail(ELIZA_E_INVALID_ARG, "layer %d aliases layer %d, which is not an earlier layer with keys",
                           il, s->alias);
        A = &c->layers[s->alias];
        if (A->n_swa != L->n_swa)
            return ez_fail(ELIZA_E_INVALID_ARG, "layer %d (window %d) aliases layer %d (window %d)", il, L->n_swa,
                           s->alias, A->n_swa);
        L->fk = A->fk;
        L->fv = A->fv;
        L->k = A->k;
        L->v = A->v;
        L->cap = A->cap;
        L->smooth = A->smooth;
        L->src = s->alias;
    } else if (s->n_head_kv > 0) {
        if ((rc = format_make(s->type_k, s->head_dim_k, s->n_head_kv, 0, il, &L->fk)) ||
            (rc = format_make(s->type_v, s->head_dim_v, s->n_head_kv, 1, il, &L->fv)))
            return rc;
        L->cap = c->n_ctx;
        if (L->n_swa > 0 && (int64_t)L->n_swa + c->n_batch < c->n_ctx) L->cap = L->n_swa + c->n_batch;
        if ((size_t)L->cap > SIZE_MAX / 2 / (L->fk.row_bytes + L->fv.row_bytes))
            return ez_fail(ELIZA_E_NOMEM, "KV cache: %d rows of layer %d do not fit in memory", L->cap, il);
        L->k = alloc_bytes((size_t)L->cap * L->fk.row_bytes, &rc);
        L->v = alloc_bytes((size_t)L->cap * L->fv.row_bytes, &rc);
        if (s->smooth_k && !rc) L->smooth = smooth_make(&L->fk, s->n_head_kv, &rc);
        c->bytes += (size_t)L->cap * (L->fk.row_bytes + L->fv.row_bytes);
    }
    if (s->state_bytes > 0) {
        L->state = alloc_bytes(s->state_bytes, &rc);
        L->state_bytes = s->state_bytes;
        c->bytes += s->state_bytes;
    }
    return rc;
}

int32_t ez_kv_cache_create(const ez_kv_layer_spec *specs, int n_layer, int32_t n_ctx, int32_t n_batch,
                           ez_kv_cache **out) {
    ez_kv_cache *c;
    int32_t rc = ELIZA_OK;
    *out = NULL;
    if (n_ctx < 1 || n_batch < 1 || n_layer < 1)
        return ez_fail(ELIZA_E_INVALID_ARG, "KV cache: context %d / batch %d / %d layers must be >= 1", n_ctx, n_batch,
                       n_layer);
    c = (ez_kv_cache *)calloc(1, sizeof *c);
    if (!c) return ez_fail(ELIZA_E_NOMEM, "out of memory for the KV cache");
    c->n_layer = n_layer;
    c->n_ctx = n_ctx;
    c->n_batch = n_batch;
    c->layers = (ez_kv_layer *)calloc((size_t)n_layer, sizeof *c->layers);
    if (!c->layers) rc = ez_fail(ELIZA_E_NOMEM, "out of memory for the KV cache");
    for (int il = 0; il < n_layer && !rc; il++) rc = layer_make(c, &specs[il], il);
    if (rc) {
        ez_kv_cache_free(c);
        return rc;
    }
    *out = c;
    return ELIZA_OK;
}

void ez_kv_cache_free(ez_kv_cache *c) {
    if (!c) return;
    if (c->layers)
        for (int il = 0; il < c->n_layer; il++) {
            ez_kv_layer *L = &c->layers[il];
            if (L->src == il) {
                ez_aligned_free(L->k);
                ez_aligned_free(L->v);
                free(L->smooth);
            }
            ez_aligned_free(L->state);
        }
    free(c->layers);
    free(c);
}

static void set_n_pos(ez_kv_cache *c, int32_t pos) {
    c->n_pos = pos;
    c->mark_low = EZ_MIN(c->mark_low, pos);
}

void ez_kv_cache_clear(ez_kv_cache *c) {
    set_n_pos(c, 0);
    c->hi = 0;
    for (int il = 0; il < c->n_layer; il++) {
        if (c->layers[il].state) memset(c->layers[il].state, 0, c->layers[il].state_bytes);
        if (c->layers[il].smooth) c->layers[il].smooth->ready = 0;
    }
}

/* A ring holds positions [hi - cap, hi); the next query at pos sees its
 * window back to pos - n_swa + 1, which must all still be there. */
static int rows_reach(const ez_kv_cache *c, int32_t pos) {
    for (int il = 0; il < c->n_layer; il++) {
        const ez_kv_layer *L = &c->layers[il];
        const int32_t need = L->n_swa > 0 ? EZ_MAX(0, pos - L->n_swa + 1) : 0;
        if (L->src == il && L->k && c->hi > L->cap && need < c->hi - L->cap) return 0;
    }
    return 1;
}

static int has_states(const ez_kv_cache *c) {
    for (int il = 0; il < c->n_layer; il++)
        if (c->layers[il].state) return 1;
    return 0;
}

int ez_kv_cache_can_rewind_to(const ez_kv_cache *c, int32_t pos) {
    if (pos < 0 || pos > c->n_pos) return 0;
    if (pos == c->n_pos) return 1;
    return !has_states(c) && rows_reach(c, pos);
}

int32_t ez_kv_cache_rewind(ez_kv_cache *c, int32_t n) {
    if (n < 0 || n > c->n_pos)
        return ez_fail(ELIZA_E_INVALID_ARG, "cannot rewind %d of the %d positions held", n, c->n_pos);
    if (n > 0 && has_states(c))
        return ez_fail(ELIZA_E_INVALID_ARG, "the cache holds recurrent state: restore a snapshot instead of rewinding");
    if (!rows_reach(c, c->n_pos - n))
        return ez_fail(ELIZA_E_INVALID_ARG,
                       "cannot rewind %d positions: a sliding-window ring keeps %d past its window (n_batch + 1)", n,
                       c->n_batch + 1);
    set_n_pos(c, c->n_pos - n);
    return ELIZA_OK;
}

void ez_kv_cache_begin(ez_kv_cache *c, int32_t n) { c->hi = EZ_MAX(c->hi, c->n_pos + n); }

void ez_kv_cache_commit(ez_kv_cache *c, int32_t n) { c->n_pos += n; }

size_t ez_kv_cache_bytes_per_token(const ez_kv_cache *c) {
    size_t n = 0;
    for (int il = 0; il < c->n_layer; il++) {
        const ez_kv_layer *L = &c->layers[il];
        if (L->src == il && L->k) n += L->fk.row_bytes + L->fv.row_bytes;
    }
    return n;
}

/* ---- snapshots ---------------------------------------------------------------------- */

/* Rows of layer L that a FULL snapshot copies: the held positions of a
 * global layer, the whole ring of a sliding one. */
static int32_t held_rows(const ez_kv_layer *L, int32_t n_pos, int32_t hi) {
    return EZ_MIN(L->cap, EZ_MAX(n_pos, hi));
}

static int32_t snapshot_alloc(const ez_kv_cache *c, int mode, ez_kv_snapshot **out) {
    ez_kv_snapshot *s = (ez_kv_snapshot *)calloc(1, sizeof *s);
    int32_t rc = ELIZA_OK;
    if (!s) return ez_fail(ELIZA_E_NOMEM, "out of memory for a KV snapshot");
    s->cache = c;
    s->n_layer = c->n_layer;
    s->mode = mode;
    s->states = (uint8_t **)calloc((size_t)c->n_layer, sizeof *s->states);
    if (mode == EZ_KV_SNAP_FULL) {
        s->rows = (uint8_t **)calloc(2 * (size_t)c->n_layer, sizeof *s->rows);
        s->smooth = (float **)calloc((size_t)c->n_layer, sizeof *s->smooth);
    }
    if (!s->states || (mode == EZ_KV_SNAP_FULL && (!s->rows || !s->smooth)))
        rc = ez_fail(ELIZA_E_NOMEM, "out of memory for a KV snapshot");
    for (int il = 0; il < c->n_layer && !rc; il++) {
        const ez_kv_layer *L = &c->layers[il];
        if (L->state) {
            s->states[il] = alloc_bytes(L->state_bytes, &rc);
            s->bytes += L->state_bytes;
        }
        if (mode == EZ_KV_SNAP_FULL && L->src == il && L->k) {
            s->rows[2 * il] = alloc_bytes((size_t)L->cap * L->fk.row_bytes, &rc);
            s->rows[2 * il + 1] = alloc_bytes((size_t)L->cap * L->fv.row_bytes, &rc);
            s->bytes += (size_t)L->cap * (L->fk.row_bytes + L->fv.row_bytes);
        }
        if (mode == EZ_KV_SNAP_FULL && L->src == il && L->smooth) {
            s->smooth[il] = (float *)(void *)alloc_bytes(smooth_floats(L->smooth) * sizeof(float), &rc);
            s->bytes += smooth_floats(L->smooth) * sizeof(float);
        }
    }
    if (rc) {
        ez_kv_snapshot_free(s);
        return rc;
    }
    *out = s;
    return ELIZA_OK;
}

int32_t ez_kv_snapshot_take(ez_kv_cache *c, int mode, ez_kv_snapshot **snap) {
    ez_kv_snapshot *s = *snap;
    int32_t rc;
    if (mode != EZ_KV_SNAP_STATES && mode != EZ_KV_SNAP_FULL)
        return ez_fail(ELIZA_E_INVALID_ARG, "KV snapshot mode %d is unknown", mode);
    if (s && (s->cache != c || s->mode != mode)) {
        ez_kv_snapshot_free(s);
        *snap = s = NULL;
    }
    if (!s) {
        if ((rc = snapshot_alloc(c, mode, &s))) return rc;
        *snap = s;
    }
    s->n_pos = c->n_pos;
    s->hi = c->hi;
    for (int il = 0; il < c->n_layer; il++) {
        const ez_kv_layer *L = &c->layers[il];
        if (L->state) memcpy(s->states[il], L->state, L->state_bytes);
        if (mode == EZ_KV_SNAP_FULL && s->rows[2 * il]) {
            const size_t n = (size_t)held_rows(L, c->n_pos, c->hi);
            memcpy(s->rows[2 * il], L->k, n * L->fk.row_bytes);
            memcpy(s->rows[2 * il + 1], L->v, n * L->fv.row_bytes);
        }
        if (mode == EZ_KV_SNAP_FULL && s->smooth[il]) {
            s->smooth[il][0] = (float)L->smooth->ready;
            memcpy(s->smooth[il] + 1, L->smooth->mean, (smooth_floats(L->smooth) - 1) * sizeof(float));
        }
    }
    s->generation = ++c->generation;
    c->mark_low = c->n_pos;
    return ELIZA_OK;
}

int32_t ez_kv_snapshot_restore(ez_kv_cache *c, const ez_kv_snapshot *s) {
    if (!s || s->cache != c) return ez_fail(ELIZA_E_INVALID_ARG, "the KV snapshot is of another cache");
    if (s->mode == EZ_KV_SNAP_STATES) {
        if (s->generation != c->generation || c->mark_low < s->n_pos)
            return ez_fail(ELIZA_E_STATE, "the KV snapshot is stale: the cache was rewound below it or snapshot again");
        if (c->n_pos < s->n_pos || !rows_reach(c, s->n_pos))
            return ez_fail(ELIZA_E_STATE, "the KV snapshot at %d positions cannot be restored from %d held", s->n_pos,
                           c->n_pos);
    }
    for (int il = 0; il < c->n_layer; il++) {
        const ez_kv_layer *L = &c->layers[il];
        if (L->state) memcpy(L->state, s->states[il], L->state_bytes);
        if (s->mode == EZ_KV_SNAP_FULL && s->rows[2 * il]) {
            const size_t n = (size_t)held_rows(L, s->n_pos, s->hi);
            memcpy(L->k, s->rows[2 * il], n * L->fk.row_bytes);
            memcpy(L->v, s->rows[2 * il + 1], n * L->fv.row_bytes);
        }
        if (s->mode == EZ_KV_SNAP_FULL && s->smooth[il]) {
            L->smooth->ready = s->smooth[il][0] != 0.0f;
            memcpy(L->smooth->mean, s->smooth[il] + 1, (smooth_floats(L->smooth) - 1) * sizeof(float));
        }
    }
    if (s->mode == EZ_KV_SNAP_FULL) c->hi = s->hi;
    set_n_pos(c, s->n_pos);
    return ELIZA_OK;
}

size_t ez_kv_snapshot_bytes(const ez_kv_snapshot *s) { return s ? s->bytes : 0; }

void ez_kv_snapshot_free(ez_kv_snapshot *s) {
    if (!s) return;
    if (s->states)
        for (int il = 0; il < s->n_layer; il++) ez_aligned_free(s->states[il]);
    if (s->rows)
        for (int i = 0; i < 2 * s->n_layer; i++) ez_aligned_free(s->rows[i]);
    if (s->smooth)
        for (int il = 0; il < s->n_layer; il++) ez_aligned_free(s->smooth[il]);
    free(s->states);
    free(s->rows);
    free(s->smooth);
    free(s);
}
