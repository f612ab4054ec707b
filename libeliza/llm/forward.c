/* The decoder forward pass, shared by llama, qwen2, qwen3 and gemma3 (see
 * model.h for where they differ). Reads top-down as the architecture:
 *
 *   x = embed(tokens) * embd_scale
 *   for each layer:
 *     h = rms_norm(x) ; q, k, v = h Wq, h Wk, h Wv (+ biases)
 *     q, k = rms_norm per head (qwen3, gemma3) ; rope(q, k)
 *     a = softmax(q k^T * scale, causal [+ sliding window]) v
 *     o = a Wo ; o = rms_norm(o) (gemma3) ; x += o
 *     h = rms_norm(x) ; f = act(h Wgate) * (h Wup) ; f = f Wdown
 *     f = rms_norm(f) (gemma3) ; x += f
 *   logits = rms_norm(x) Wout (+ softcap, gemma3)
 *
 * Every step works on a batch of tokens (rows); the matrix products take all
 * rows at once so each weight is read once per batch. */
#include "forward.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/gemm.h"
#include "core/platform.h"
#include "core/quant.h"
#include "kv.h"
#include "ops.h"

/* Query tokens per task of the blocked attention (prompt batches): their
 * scores against the keys they see are one GEMM. At most ATT_BLOCK, fewer
 * where a thread's workspace would pass ATT_WS_BYTES (long contexts), and
 * none below ATT_MIN_BLOCK (the per-token path then). */
#define ATT_BLOCK 32
#define ATT_MIN_BLOCK 8
#define ATT_WS_BYTES ((size_t)4 << 20)
/* Cache rows a cache of another type than F32 widens at a time for those
 * GEMMs (the one bounded copy of cached rows attention makes). */
#define ATT_KV_CHUNK 256

typedef struct {
    void *k;       /* [cap] rows of n_head_kv * head_dim keys in the key type */
    void *v;       /* [cap] rows of n_head_kv * head_dim_v values in the value type */
    int32_t cap;   /* slots; position p lives in slot p % cap */
} kv_layer;

/* How keys (or values) are stored: the type, its kernels, the bytes of one
 * head and one row (all heads of a position), and the transform that the
 * stored vectors are in (kv.h; 0 none). */
typedef struct {
    int type;
    const ez_kv_kernels *kern;
    size_t head_bytes, row_bytes;
    int rot;
} kv_format;

struct ez_llm_ctx {
    const ez_llm_model *m;
    const ez_llm_ops *ops;
    ez_pool *pool;
    int n_threads;
    int32_t n_ctx, n_batch;
    kv_layer *kv;           /* [n_layer] */
    kv_format fk, fv;       /* keys, values */
    size_t kv_bytes;
    int32_t max_cap;
    int32_t att_block;      /* tokens per blocked-attention task; 0: per-token only */

    /* Working rows for one batch of up to n_batch tokens. */
    float *x;               /* [n_batch, n_embd] residual stream */
    float *h;               /* [n_batch, n_embd] normed input of a sublayer */
    float *q;               /* [n_batch, n_head * head_dim] */
    float *k;               /* [n_batch, n_head_kv * head_dim] */
    float *v;               /* [n_batch, n_head_kv * head_dim_v] */
    float *att;             /* [n_batch, n_head * head_dim_v] attention output */
    float *o;               /* [n_batch, n_embd] sublayer output */
    float *gate;            /* [n_batch, n_ff] */
    float *up;              /* [n_batch, n_ff] */
    float *rope_cs;         /* [2][n_batch][n_rot] cos/sin pairs: global, local */
    float *scores;          /* [n_threads][scores_per_thread] attention weights */
    size_t scores_per_thread; /* the larger of attend's and attend_block's workspaces */
    ez_llm_acts acts;

    ez_llm_profile prof;
};

const char *ez_llm_phase_name(int phase) {
    static const char *const names[EZ_LLM_PHASE_COUNT] = {"embed",    "norm",    "qkv",      "attention", "attn_out",
                                                         "ffn_up",   "ffn_act", "ffn_down", "output"};
    return phase >= 0 && phase < EZ_LLM_PHASE_COUNT ? names[phase] : "?";
}

/* ---- creation ---------------------------------------------------------------------- */

/* n zeroed values of `size` bytes. */
static void *alloc_zeroed(size_t n, size_t size, int32_t *rc) {
    void *p;
    if (*rc) return NULL;
    if (n > (SIZE_MAX - 64) / size) {
        *rc = ez_fail(ELIZA_E_NOMEM, "LLM buffers: %" PRIu64 " values do not fit in memory", (uint64_t)n);
        return NULL;
    }
    p = ez_aligned_alloc(n * size + 64);
    if (!p) *rc = ez_fail(ELIZA_E_NOMEM, "LLM buffers: cannot allocate %" PRIu64 " bytes", (uint64_t)(n * size));
    else memset(p, 0, n * size);
    return p;
}

static float *alloc_floats(size_t n, int32_t *rc) { return (float *)alloc_zeroed(n, sizeof(float), rc); }

/* The format of heads of head_dim values stored as `type` (n_heads per row). */
static int32_t kv_format_make(int type, int head_dim, int n_heads, int is_v, kv_format *f) {
    if (type < 0 || type >= EZ_KV_COUNT) return ez_fail(ELIZA_E_INVALID_ARG, "KV cache type %d is unknown", type);
    if (head_dim % ez_kv_block_size(type) != 0)
        return ez_fail(ELIZA_E_INVALID_ARG, "a %s %s cache needs a head size that is a multiple of %d; this model's is %d",
                       ez_kv_type_name(type), is_v ? "value" : "key", ez_kv_block_size(type), head_dim);
    f->type = type;
    f->kern = ez_kv_kernels_active(type);
    f->head_bytes = ez_kv_row_bytes(type, head_dim);
    f->row_bytes = f->head_bytes * (size_t)n_heads;
    f->rot = ez_kv_rotation(type, head_dim, is_v);
    return ELIZA_OK;
}

int32_t ez_llm_ctx_create(const ez_llm_model *m, ez_pool *pool, int32_t n_ctx, int32_t n_batch, int kv_type_k,
                          int kv_type_v, ez_llm_ctx **out) {
    const ez_llm_hparams *hp = &m->hp;
    const size_t nb = (size_t)n_batch;
    const size_t n_q = (size_t)hp->n_head * (size_t)hp->head_dim;
    const size_t n_k = (size_t)hp->n_head_kv * (size_t)hp->head_dim;
    const size_t n_v = (size_t)hp->n_head_kv * (size_t)hp->head_dim_v;
    kv_format fk, fv;
    ez_llm_ctx *c;
    int32_t rc = ELIZA_OK;

    *out = NULL;
    if (n_ctx < 1 || n_batch < 1) return ez_fail(ELIZA_E_INVALID_ARG, "context %d / batch %d must be >= 1", n_ctx, n_batch);
    if ((rc = kv_format_make(kv_type_k, hp->head_dim, hp->n_head_kv, 0, &fk)) ||
        (rc = kv_format_make(kv_type_v, hp->head_dim_v, hp->n_head_kv, 1, &fv)))
        return rc;
    c = (ez_llm_ctx *)calloc(1, sizeof *c);
    if (!c) return ez_fail(ELIZA_E_NOMEM, "out of memory for the LLM context");
    c->m = m;
    c->ops = ez_llm_ops_active();
    c->pool = pool;
    c->n_threads = ez_pool_threads(pool);
    c->n_ctx = n_ctx;
    c->n_batch = n_batch;
    c->fk = fk;
    c->fv = fv;
    ez_llm_acts_init(&c->acts);

    c->kv = (kv_layer *)calloc((size_t)hp->n_layer, sizeof *c->kv);
    if (!c->kv) rc = ez_fail(ELIZA_E_NOMEM, "out of memory for the KV cache");
    for (int il = 0; il < hp->n_layer && !rc; il++) {
        kv_layer *kv = &c->kv[il];
        kv->cap = n_ctx;
        if (m->layers[il].is_swa && (int64_t)hp->n_swa + n_batch < n_ctx) kv->cap = hp->n_swa + n_batch;
        kv->k = alloc_zeroed((size_t)kv->cap, fk.row_bytes, &rc);
        kv->v = alloc_zeroed((size_t)kv->cap, fv.row_bytes, &rc);
        c->kv_bytes += (size_t)kv->cap * (fk.row_bytes + fv.row_bytes);
        c->max_cap = EZ_MAX(c->max_cap, kv->cap);
    }
    c->x = alloc_floats(nb * (size_t)hp->n_embd, &rc);
    c->h = alloc_floats(nb * (size_t)hp->n_embd, &rc);
    c->o = alloc_floats(nb * (size_t)hp->n_embd, &rc);
    c->q = alloc_floats(nb * n_q, &rc);
    c->k = alloc_floats(nb * n_k, &rc);
    c->v = alloc_floats(nb * n_v, &rc);
    c->att = alloc_floats(nb * (size_t)hp->n_head * (size_t)hp->head_dim_v, &rc);
    c->gate = alloc_floats(nb * (size_t)hp->n_ff, &rc);
    c->up = alloc_floats(nb * (size_t)hp->n_ff, &rc);
    c->rope_cs = alloc_floats(2 * nb * (size_t)hp->n_rot, &rc);
    {
        const size_t per_token = (size_t)(hp->n_head / hp->n_head_kv) *
                                 ((size_t)c->max_cap + (size_t)hp->head_dim + (size_t)hp->head_dim_v);
        const size_t block = ATT_WS_BYTES / sizeof(float) / per_token;
        c->att_block = block >= ATT_MIN_BLOCK ? (int32_t)EZ_MIN(block, (size_t)ATT_BLOCK) : 0;
        c->scores_per_thread =
            EZ_MAX((size_t)c->att_block * per_token, (size_t)c->max_cap * (size_t)(hp->n_head / hp->n_head_kv)) +
            (fk.type != EZ_KV_F32 || fv.type != EZ_KV_F32
                 ? (size_t)ATT_KV_CHUNK * (size_t)EZ_MAX(hp->head_dim, hp->head_dim_v)
                 : 0);
    }
    c->scores = alloc_floats((size_t)c->n_threads * c->scores_per_thread, &rc);
    if (rc) {
        ez_llm_ctx_free(c);
        return rc;
    }
    *out = c;
    return ELIZA_OK;
}

void ez_llm_ctx_free(ez_llm_ctx *c) {
    if (!c) return;
    if (c->kv)
        for (int il = 0; il < c->m->hp.n_layer; il++) {
            ez_aligned_free(c->kv[il].k);
            ez_aligned_free(c->kv[il].v);
        }
    free(c->kv);
    ez_aligned_free(c->x);
    ez_aligned_free(c->h);
    ez_aligned_free(c->o);
    ez_aligned_free(c->q);
    ez_aligned_free(c->k);
    ez_aligned_free(c->v);
    ez_aligned_free(c->att);
    ez_aligned_free(c->gate);
    ez_aligned_free(c->up);
    ez_aligned_free(c->rope_cs);
    ez_aligned_free(c->scores);
    ez_llm_acts_free(&c->acts);
    free(c);
}

int32_t ez_llm_ctx_n_ctx(const ez_llm_ctx *c) { return c->n_ctx; }

int ez_llm_ctx_kv_type(const ez_llm_ctx *c, int values) { return values ? c->fv.type : c->fk.type; }

size_t ez_llm_ctx_kv_bytes_per_token(const ez_llm_ctx *c) {
    return (size_t)c->m->hp.n_layer * (c->fk.row_bytes + c->fv.row_bytes);
}

size_t ez_llm_ctx_kv_bytes(const ez_llm_ctx *c) { return c->kv_bytes; }

const ez_llm_profile *ez_llm_ctx_profile(const ez_llm_ctx *c) { return &c->prof; }

/* ---- small helpers ------------------------------------------------------------------ */

static uint64_t tick(ez_llm_ctx *c, int phase, uint64_t t0) {
    uint64_t t1 = ez_time_ns();
    c->prof.ns[phase] += t1 - t0;
    return t1;
}

static void add_bias(float *y, const float *b, int64_t n_rows, int64_t n) {
    if (!b) return;
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t i = 0; i < n; i++) y[r * n + i] += b[i];
}

static void add_rows(float *x, const float *o, int64_t n_elems) {
    for (int64_t i = 0; i < n_elems; i++) x[i] += o[i];
}

/* y[r] = rms_norm(x[r]) * w for n_rows rows of n. */
static void rms_norm_rows(const ez_llm_ctx *c, float *y, const float *x, const float *w, int64_t n_rows, int64_t n) {
    for (int64_t r = 0; r < n_rows; r++) c->ops->rms_norm(y + r * n, x + r * n, w, n, c->m->hp.norm_eps);
}

/* ---- embedding ---------------------------------------------------------------------- */

static void embed(ez_llm_ctx *c, const int32_t *tokens, int32_t n) {
    const ez_llm_model *m = c->m;
    const ez_llm_matrix *e = &m->tok_embd;
    const int64_t d = m->hp.n_embd;
    ez_dequant_fn dequant = ez_kernels(e->type)->dequant;
    for (int32_t i = 0; i < n; i++) {
        float *x = c->x + i * d;
        dequant(e->data + (size_t)tokens[i] * e->row_bytes, x, d);
        if (m->hp.embd_scale != 1.0f)
            for (int64_t j = 0; j < d; j++) x[j] *= m->hp.embd_scale;
    }
}

/* cos/sin of every batch position for the global (slot 0) and local (slot 1)
 * rope bases. */
static void rope_tables(ez_llm_ctx *c, int32_t n, int32_t pos0) {
    const ez_llm_hparams *hp = &c->m->hp;
    const int nr = hp->n_rot;
    for (int32_t i = 0; i < n; i++) {
        ez_rope_angles(c->rope_cs + (size_t)i * nr, pos0 + i, nr, hp->rope_base, hp->rope_freq_scale,
                       c->m->rope_factors);
        if (hp->n_swa > 0)
            ez_rope_angles(c->rope_cs + ((size_t)c->n_batch + i) * nr, pos0 + i, nr, hp->rope_base_swa, 1.0f,
                           c->m->rope_factors);
    }
}

/* ---- attention ---------------------------------------------------------------------- */

typedef struct {
    ez_llm_ctx *c;
    const kv_layer *kv;
    int is_swa;
    int32_t n, pos0;
} attn_job;

/* Head g of the cached row of position p. */
static const void *kv_head(const void *base, const kv_format *f, int32_t cap, int32_t p, int g) {
    return (const uint8_t *)base + (size_t)(p % cap) * f->row_bytes + (size_t)g * f->head_bytes;
}

/* softmax(q k^T * scale) v for query heads h0 .. h0 + n_h - 1 of token i,
 * which share key/value head g, over the cached positions the token sees:
 * causal, and inside the window on local layers. Each key and value row is
 * read once for all n_h heads, in its stored type (queries and output in
 * the cache's transformed domain, see attention_block). w: n_h * window
 * scratch floats. */
static void attend(const attn_job *job, int32_t i, int h0, int n_h, int g, float *w) {
    const ez_llm_ctx *c = job->c;
    const ez_kv_kernels *kk = c->fk.kern, *kvv = c->fv.kern;
    const ez_llm_hparams *hp = &c->m->hp;
    const int hd = hp->head_dim, hdv = hp->head_dim_v;
    const int32_t p = job->pos0 + i, cap = job->kv->cap;
    const int32_t lo = job->is_swa ? EZ_MAX(0, p - hp->n_swa + 1) : 0;
    const int32_t len = p - lo + 1;
    const float *q = c->q + (int64_t)i * hp->n_head * hd + (int64_t)h0 * hd;
    float *out = c->att + (int64_t)i * hp->n_head * hdv + (int64_t)h0 * hdv;
    for (int32_t s = 0; s < len; s++) {
        const void *k = kv_head(job->kv->k, &c->fk, cap, lo + s, g);
        int r = 0;
        for (; r + 4 <= n_h; r += 4) {
            float d4[4];
            kk->dot4(q + (int64_t)r * hd, hd, k, hd, d4);
            for (int j = 0; j < 4; j++) w[(int64_t)(r + j) * len + s] = d4[j] * hp->attn_scale;
        }
        for (; r < n_h; r++) w[(int64_t)r * len + s] = kk->dot(q + (int64_t)r * hd, k, hd) * hp->attn_scale;
    }
    for (int r = 0; r < n_h; r++) c->ops->softmax(w + (int64_t)r * len, len);
    memset(out, 0, sizeof(float) * (size_t)n_h * (size_t)hdv);
    for (int32_t s = 0; s < len; s++) {
        const void *v = kv_head(job->kv->v, &c->fv, cap, lo + s, g);
        int r = 0;
        for (; r + 4 <= n_h; r += 4) {
            const float w4[4] = {w[(int64_t)r * len + s], w[(int64_t)(r + 1) * len + s], w[(int64_t)(r + 2) * len + s],
                                 w[(int64_t)(r + 3) * len + s]};
            kvv->axpy4(out + (int64_t)r * hdv, hdv, w4, v, hdv);
        }
        for (; r < n_h; r++) kvv->axpy(out + (int64_t)r * hdv, w[(int64_t)r * len + s], v, hdv);
    }
}

/* Items are (token, key/value head) pairs: prompt batches. */
static void attend_groups(void *ctx, int64_t t0, int64_t t1, int thread_index) {
    const attn_job *job = (const attn_job *)ctx;
    const ez_llm_hparams *hp = &job->c->m->hp;
    const int n_rep = hp->n_head / hp->n_head_kv;
    float *w = job->c->scores + (size_t)thread_index * job->c->scores_per_thread;
    for (int64_t t = t0; t < t1; t++) {
        const int g = (int)(t % hp->n_head_kv);
        attend(job, (int32_t)(t / hp->n_head_kv), g * n_rep, n_rep, g, w);
    }
}

/* Items are (token, query head) pairs: few tokens (decoding), so that every
 * thread has work even with a single key/value head. */
static void attend_heads(void *ctx, int64_t t0, int64_t t1, int thread_index) {
    const attn_job *job = (const attn_job *)ctx;
    const ez_llm_hparams *hp = &job->c->m->hp;
    const int n_rep = hp->n_head / hp->n_head_kv;
    float *w = job->c->scores + (size_t)thread_index * job->c->scores_per_thread;
    for (int64_t t = t0; t < t1; t++) {
        const int h = (int)(t % hp->n_head);
        attend(job, (int32_t)(t / hp->n_head), h, 1, h / n_rep, w);
    }
}

/* Rows [slot, slot + n) of a cache buffer, head g (width values), as F32:
 * in place for an F32 cache (leading dimension: the row), else widened into
 * buf (leading dimension: width). */
static const float *cache_rows(const void *base, const kv_format *f, int g, int32_t slot, int32_t n, int width,
                               float *buf, int64_t *ld) {
    const uint8_t *row = (const uint8_t *)base + (size_t)slot * f->row_bytes + (size_t)g * f->head_bytes;
    if (f->type == EZ_KV_F32) {
        *ld = (int64_t)(f->row_bytes / sizeof(float));
        return (const float *)row;
    }
    for (int32_t j = 0; j < n; j++) f->kern->load(row + (size_t)j * f->row_bytes, buf + (int64_t)j * width, width);
    *ld = width;
    return buf;
}

/* The same as attend() for tokens [i0, i1) of the batch and the n_rep query
 * heads of key/value head g, with rows (token, head): S = Q K^T over the
 * positions lo .. hi the block sees, causal and window masks by zeroing
 * after each row's softmax, then O = S V. The keys and values go to the
 * GEMMs in runs of ring slots (the wrap cuts one in two), of at most
 * ATT_KV_CHUNK rows with a cache of another type than F32 (widened first,
 * chunk by chunk: the only copy of cached rows). ws: (i1 - i0) *
 * n_rep * (hd + hdv + len) floats, then ATT_KV_CHUNK * max(hd, hdv). */
static void attend_block(const attn_job *job, int32_t i0, int32_t i1, int g, float *ws) {
    const ez_llm_ctx *c = job->c;
    const ez_llm_hparams *hp = &c->m->hp;
    const int hd = hp->head_dim, hdv = hp->head_dim_v, n_rep = hp->n_head / hp->n_head_kv;
    const int64_t n_q = (int64_t)hp->n_head * hd, n_att = (int64_t)hp->n_head * hdv;
    const int32_t cap = job->kv->cap, rows = (i1 - i0) * n_rep;
    const int32_t lo = job->is_swa ? EZ_MAX(0, job->pos0 + i0 - hp->n_swa + 1) : 0, hi = job->pos0 + i1 - 1;
    const int32_t len = hi - lo + 1;
    const int32_t chunk_k = c->fk.type == EZ_KV_F32 ? len : ATT_KV_CHUNK;
    const int32_t chunk_v = c->fv.type == EZ_KV_F32 ? len : ATT_KV_CHUNK;
    float *q = ws, *o = q + (int64_t)rows * hd, *sc = o + (int64_t)rows * hdv; /* [rows, hd], [rows, hdv], [rows, len] */
    float *buf = sc + (int64_t)rows * len;
    int64_t ld;
    for (int32_t i = i0; i < i1; i++)
        memcpy(q + (int64_t)(i - i0) * n_rep * hd, c->q + (int64_t)i * n_q + (int64_t)g * n_rep * hd,
               sizeof(float) * (size_t)n_rep * (size_t)hd);
    /* sc [rows, len] = q [rows, hd] . keys [len, hd]^T */
    for (int32_t j = 0; j < len;) {
        const int32_t slot = (lo + j) % cap, n = EZ_MIN(EZ_MIN(len - j, cap - slot), chunk_k);
        const float *k = cache_rows(job->kv->k, &c->fk, g, slot, n, hd, buf, &ld);
        ez_gemm_f32(c->pool, rows, n, hd, q, hd, k, ld, 1, sc + j, len, 0);
        j += n;
    }
    for (int32_t k = 0; k < rows; k++) {
        const int32_t p = job->pos0 + i0 + k / n_rep;
        const int32_t from = (job->is_swa ? EZ_MAX(0, p - hp->n_swa + 1) : 0) - lo, to = p - lo + 1;
        float *row = sc + (int64_t)k * len;
        for (int32_t j = from; j < to; j++) row[j] *= hp->attn_scale;
        c->ops->softmax(row + from, to - from);
        memset(row, 0, sizeof(float) * (size_t)from);
        memset(row + to, 0, sizeof(float) * (size_t)(len - to));
    }
    /* o [rows, hdv] = weights [rows, len] . values [len, hdv] */
    for (int32_t j = 0; j < len;) {
        const int32_t slot = (lo + j) % cap, n = EZ_MIN(EZ_MIN(len - j, cap - slot), chunk_v);
        const float *v = cache_rows(job->kv->v, &c->fv, g, slot, n, hdv, buf, &ld);
        ez_gemm_f32(c->pool, rows, hdv, n, sc + j, len, v, ld, 0, o, hdv, j > 0);
        j += n;
    }
    for (int32_t i = i0; i < i1; i++)
        memcpy(c->att + (int64_t)i * n_att + (int64_t)g * n_rep * hdv, o + (int64_t)(i - i0) * n_rep * hdv,
               sizeof(float) * (size_t)n_rep * (size_t)hdv);
}

/* Items are (block of att_block tokens, key/value head) pairs: prompt
 * batches of at least att_block tokens. */
static void attend_blocks(void *ctx, int64_t t0, int64_t t1, int thread_index) {
    const attn_job *job = (const attn_job *)ctx;
    const int n_kv = job->c->m->hp.n_head_kv;
    float *s = job->c->scores + (size_t)thread_index * job->c->scores_per_thread;
    for (int64_t t = t0; t < t1; t++) {
        const int32_t i0 = (int32_t)(t / n_kv) * job->c->att_block;
        attend_block(job, i0, EZ_MIN(i0 + job->c->att_block, job->n), (int)(t % n_kv), s);
    }
}

static int32_t attention_block(ez_llm_ctx *c, int il, int32_t n, int32_t pos0) {
    const ez_llm_model *m = c->m;
    const ez_llm_hparams *hp = &m->hp;
    const ez_llm_layer *L = &m->layers[il];
    const kv_layer *kv = &c->kv[il];
    const int64_t d = hp->n_embd, hd = hp->head_dim;
    const int64_t n_q = hp->n_head * hd, n_k = hp->n_head_kv * hd, n_v = (int64_t)hp->n_head_kv * hp->head_dim_v;
    const float *cs = c->rope_cs + (L->is_swa ? (size_t)c->n_batch * (size_t)hp->n_rot : 0);
    ez_llm_mm qkv[3] = {{&L->wq, c->q, n_q}, {&L->wk, c->k, n_k}, {&L->wv, c->v, n_v}};
    ez_llm_mm out = {&L->wo, c->o, d};
    attn_job job = {c, kv, L->is_swa, n, pos0};
    uint64_t t = ez_time_ns();
    int32_t rc;

    rms_norm_rows(c, c->h, c->x, L->attn_norm, n, d);
    t = tick(c, EZ_LLM_PHASE_NORM, t);
    if ((rc = ez_llm_matmul(c->pool, &c->acts, c->h, n, qkv, 3))) return rc;
    t = tick(c, EZ_LLM_PHASE_QKV, t);

    add_bias(c->q, L->bq, n, n_q);
    add_bias(c->k, L->bk, n, n_k);
    add_bias(c->v, L->bv, n, n_v);
    for (int32_t i = 0; i < n; i++) {
        float *q = c->q + i * n_q, *k = c->k + i * n_k;
        if (L->q_norm)
            for (int h = 0; h < hp->n_head; h++) c->ops->rms_norm(q + h * hd, q + h * hd, L->q_norm, hd, hp->norm_eps);
        if (L->k_norm)
            for (int h = 0; h < hp->n_head_kv; h++)
                c->ops->rms_norm(k + h * hd, k + h * hd, L->k_norm, hd, hp->norm_eps);
        ez_rope(q, hp->n_head, (int)hd, hp->n_rot, cs + (size_t)i * hp->n_rot, hp->rope_neox);
        ez_rope(k, hp->n_head_kv, (int)hd, hp->n_rot, cs + (size_t)i * hp->n_rot, hp->rope_neox);
    }
    t = tick(c, EZ_LLM_PHASE_NORM, t);

    /* The cache's transforms (kv.h): new keys and values are stored
     * transformed, queries meet them in that domain, and the output of
     * attention is transformed back. */
    ez_kv_rotate(c->q, (int64_t)n * n_q, c->fk.rot);
    ez_kv_rotate(c->k, (int64_t)n * n_k, c->fk.rot);
    ez_kv_rotate(c->v, (int64_t)n * n_v, c->fv.rot);
    for (int32_t i = 0; i < n; i++) {
        const size_t slot = (size_t)((pos0 + i) % kv->cap);
        c->fk.kern->store(c->k + i * n_k, (uint8_t *)kv->k + slot * c->fk.row_bytes, n_k);
        c->fv.kern->store(c->v + i * n_v, (uint8_t *)kv->v + slot * c->fv.row_bytes, n_v);
    }
    if (c->att_block && n >= c->att_block)
        ez_pool_for(c->pool, (int64_t)((n + c->att_block - 1) / c->att_block) * hp->n_head_kv, 1, attend_blocks,
                    &job);
    else if ((int64_t)n * hp->n_head_kv >= 4 * (int64_t)c->n_threads)
        ez_pool_for(c->pool, (int64_t)n * hp->n_head_kv, 1, attend_groups, &job);
    else
        ez_pool_for(c->pool, (int64_t)n * hp->n_head, 1, attend_heads, &job);
    ez_kv_unrotate(c->att, (int64_t)n * hp->n_head * hp->head_dim_v, c->fv.rot);
    t = tick(c, EZ_LLM_PHASE_ATTENTION, t);

    if ((rc = ez_llm_matmul(c->pool, &c->acts, c->att, n, &out, 1))) return rc;
    t = tick(c, EZ_LLM_PHASE_ATTN_OUT, t);
    add_bias(c->o, L->bo, n, d);
    if (L->post_attn_norm) rms_norm_rows(c, c->o, c->o, L->post_attn_norm, n, d);
    add_rows(c->x, c->o, n * d);
    tick(c, EZ_LLM_PHASE_NORM, t);
    return ELIZA_OK;
}

/* ---- feed-forward ------------------------------------------------------------------- */

typedef struct {
    const ez_llm_ctx *c;
    int64_t n_ff;
} act_job;

static void gate_rows(void *ctx, int64_t r0, int64_t r1, int thread_index) {
    const act_job *job = (const act_job *)ctx;
    const ez_llm_ctx *c = job->c;
    (void)thread_index;
    for (int64_t r = r0; r < r1; r++) {
        float *g = c->gate + r * job->n_ff;
        const float *u = c->up + r * job->n_ff;
        if (c->m->hp.ffn_gelu) c->ops->gelu_tanh_mul(g, u, job->n_ff);
        else c->ops->silu_mul(g, u, job->n_ff);
    }
}

static int32_t ffn_block(ez_llm_ctx *c, int il, int32_t n) {
    const ez_llm_model *m = c->m;
    const ez_llm_layer *L = &m->layers[il];
    const int64_t d = m->hp.n_embd, n_ff = m->hp.n_ff;
    ez_llm_mm gate_up[2] = {{&L->ffn_gate, c->gate, n_ff}, {&L->ffn_up, c->up, n_ff}};
    ez_llm_mm down = {&L->ffn_down, c->o, d};
    act_job job = {c, n_ff};
    uint64_t t = ez_time_ns();
    int32_t rc;

    rms_norm_rows(c, c->h, c->x, L->ffn_norm, n, d);
    t = tick(c, EZ_LLM_PHASE_NORM, t);
    if ((rc = ez_llm_matmul(c->pool, &c->acts, c->h, n, gate_up, 2))) return rc;
    t = tick(c, EZ_LLM_PHASE_FFN_UP, t);
    add_bias(c->gate, L->b_gate, n, n_ff);
    add_bias(c->up, L->b_up, n, n_ff);
    ez_pool_for(c->pool, n, EZ_MAX((int64_t)1, 8192 / n_ff), gate_rows, &job);
    t = tick(c, EZ_LLM_PHASE_FFN_ACT, t);
    if ((rc = ez_llm_matmul(c->pool, &c->acts, c->gate, n, &down, 1))) return rc;
    t = tick(c, EZ_LLM_PHASE_FFN_DOWN, t);
    add_bias(c->o, L->b_down, n, d);
    if (L->post_ffw_norm) rms_norm_rows(c, c->o, c->o, L->post_ffw_norm, n, d);
    add_rows(c->x, c->o, n * d);
    tick(c, EZ_LLM_PHASE_NORM, t);
    return ELIZA_OK;
}

/* ---- output ------------------------------------------------------------------------- */

/* Logits of rows [r0, r0 + n_rows) of the batch into logits [n_rows, n_vocab]. */
static int32_t output(ez_llm_ctx *c, int32_t r0, int32_t n_rows, float *logits) {
    const ez_llm_model *m = c->m;
    const int64_t d = m->hp.n_embd, nv = m->hp.n_vocab;
    ez_llm_mm proj = {&m->output, logits, nv};
    const float cap = m->hp.final_softcap;
    uint64_t t = ez_time_ns();
    int32_t rc;
    rms_norm_rows(c, c->h, c->x + (int64_t)r0 * d, m->output_norm, n_rows, d);
    if ((rc = ez_llm_matmul(c->pool, &c->acts, c->h, n_rows, &proj, 1))) return rc;
    add_bias(logits, m->output_bias, n_rows, nv);
    if (cap > 0.0f)
        for (int64_t i = 0; i < (int64_t)n_rows * nv; i++) logits[i] = cap * tanhf(logits[i] / cap);
    tick(c, EZ_LLM_PHASE_OUTPUT, t);
    return ELIZA_OK;
}

/* ---- the pass ----------------------------------------------------------------------- */

static int32_t eval_batch(ez_llm_ctx *c, const int32_t *tokens, int32_t n, int32_t pos0, float *logits,
                          int all_logits, ez_llm_flag *cancel) {
    uint64_t t = ez_time_ns();
    int32_t rc;
    embed(c, tokens, n);
    rope_tables(c, n, pos0);
    tick(c, EZ_LLM_PHASE_EMBED, t);
    for (int il = 0; il < c->m->hp.n_layer; il++) {
        if (cancel && ez_llm_flag_get(cancel)) return ez_fail(ELIZA_E_CANCELLED, "cancelled");
        if ((rc = attention_block(c, il, n, pos0)) || (rc = ffn_block(c, il, n))) return rc;
    }
    if (cancel && ez_llm_flag_get(cancel)) return ez_fail(ELIZA_E_CANCELLED, "cancelled");
    c->prof.tokens += (uint64_t)n;
    c->prof.batches++;
    if (!logits) return ELIZA_OK;
    return all_logits ? output(c, 0, n, logits) : output(c, n - 1, 1, logits);
}

int32_t ez_llm_eval(ez_llm_ctx *c, const int32_t *tokens, int32_t n, int32_t pos0, float *logits, int all_logits,
                    ez_llm_flag *cancel) {
    const int64_t n_vocab_embd = c->m->tok_embd.n_rows;
    if (n < 1 || pos0 < 0 || (int64_t)pos0 + n > c->n_ctx)
        return ez_fail(ELIZA_E_CONTEXT_FULL, "%d tokens at position %d do not fit a context of %d", n, pos0, c->n_ctx);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab_embd)
            return ez_fail(ELIZA_E_INVALID_ARG, "token %d at index %d is outside the vocabulary (%" PRId64 ")",
                           tokens[i], i, n_vocab_embd);
    for (int32_t b0 = 0; b0 < n; b0 += c->n_batch) {
        const int32_t nb = EZ_MIN(c->n_batch, n - b0);
        const int last = b0 + nb == n;
        float *out = NULL;
        int32_t rc;
        if (logits && all_logits) out = logits + (size_t)b0 * (size_t)c->m->hp.n_vocab;
        else if (logits && last) out = logits;
        rc = eval_batch(c, tokens + b0, nb, pos0 + b0, out, all_logits, cancel);
        if (rc) return rc;
    }
    return ELIZA_OK;
}
