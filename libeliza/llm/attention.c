/* Attention over the KV cache (attention.h). Three schedules of one
 * computation, chosen by batch size: blocks of query tokens as GEMMs
 * (prompts), (token, key/value head) pairs, and (token, query head) pairs
 * (decoding, so that every thread has work even with one key/value head). */
#include "attention.h"

#include <math.h>
#include <string.h>

#include "core/gemm.h"

typedef struct {
    const ez_attn *a;
    const ez_kv_layer *kv;
    const float *q;
    float *out;
    int32_t n, pos0;
} attn_job;

void ez_attn_plan(ez_attn *a, int32_t max_cap, int quantized) {
    const size_t per_token = (size_t)(a->n_head / a->n_head_kv) *
                             ((size_t)max_cap + (size_t)a->head_dim + (size_t)a->head_dim_v);
    const size_t block = EZ_ATT_WS_BYTES / sizeof(float) / per_token;
    a->block = block >= EZ_ATT_MIN_BLOCK ? (int32_t)EZ_MIN(block, (size_t)EZ_ATT_BLOCK) : 0;
    a->per_thread = EZ_MAX((size_t)a->block * per_token, (size_t)max_cap * (size_t)(a->n_head / a->n_head_kv)) +
                    (quantized ? (size_t)EZ_ATT_KV_CHUNK * (size_t)EZ_MAX(a->head_dim, a->head_dim_v) : 0);
}

/* Head g of the cached row of position p. */
static const void *kv_head(const void *base, const ez_kv_format *f, int32_t cap, int32_t p, int g) {
    return (const uint8_t *)base + (size_t)(p % cap) * f->row_bytes + (size_t)g * f->head_bytes;
}

/* Gemma 2's attention logit soft-capping, in place. */
static void softcap_rows(float *s, int64_t n, float cap) {
    const float inv = 1.0f / cap;
    for (int64_t i = 0; i < n; i++) s[i] = cap * tanhf(s[i] * inv);
}

/* softmax(q k^T * scale) v for query heads h0 .. h0 + n_h - 1 of token i,
 * which share key/value head g, over the cached positions the token sees:
 * causal, and inside the window on sliding layers. Each key and value row
 * is read once for all n_h heads, in its stored type. w: n_h * window
 * scratch floats. */
static void attend(const attn_job *job, int32_t i, int h0, int n_h, int g, float *w) {
    const ez_attn *a = job->a;
    const ez_kv_layer *kv = job->kv;
    const ez_kv_kernels *kk = kv->fk.kern, *kvv = kv->fv.kern;
    const int hd = a->head_dim, hdv = a->head_dim_v;
    const int32_t p = job->pos0 + i, cap = kv->cap;
    const int32_t lo = kv->n_swa > 0 ? EZ_MAX(0, p - kv->n_swa + 1) : 0;
    const int32_t len = p - lo + 1;
    const float *q = job->q + (int64_t)i * a->n_head * hd + (int64_t)h0 * hd;
    float *out = job->out + (int64_t)i * a->n_head * hdv + (int64_t)h0 * hdv;
    for (int32_t s = 0; s < len; s++) {
        const void *k = kv_head(kv->k, &kv->fk, cap, lo + s, g);
        int r = 0;
        for (; r + 4 <= n_h; r += 4) {
            float d4[4];
            kk->dot4(q + (int64_t)r * hd, hd, k, hd, d4);
            for (int j = 0; j < 4; j++) w[(int64_t)(r + j) * len + s] = d4[j] * a->scale;
        }
        for (; r < n_h; r++) w[(int64_t)r * len + s] = kk->dot(q + (int64_t)r * hd, k, hd) * a->scale;
    }
    if (a->softcap > 0.0f) softcap_rows(w, (int64_t)n_h * len, a->softcap);
    for (int r = 0; r < n_h; r++) a->ops->softmax(w + (int64_t)r * len, len);
    memset(out, 0, sizeof(float) * (size_t)n_h * (size_t)hdv);
    for (int32_t s = 0; s < len; s++) {
        const void *v = kv_head(kv->v, &kv->fv, cap, lo + s, g);
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
    const ez_attn *a = job->a;
    const int n_rep = a->n_head / a->n_head_kv;
    float *w = a->scratch + (size_t)thread_index * a->per_thread;
    for (int64_t t = t0; t < t1; t++) {
        const int g = (int)(t % a->n_head_kv);
        attend(job, (int32_t)(t / a->n_head_kv), g * n_rep, n_rep, g, w);
    }
}

/* Items are (token, query head) pairs: few tokens (decoding). */
static void attend_heads(void *ctx, int64_t t0, int64_t t1, int thread_index) {
    const attn_job *job = (const attn_job *)ctx;
    const ez_attn *a = job->a;
    const int n_rep = a->n_head / a->n_head_kv;
    float *w = a->scratch + (size_t)thread_index * a->per_thread;
    for (int64_t t = t0; t < t1; t++) {
        const int h = (int)(t % a->n_head);
        attend(job, (int32_t)(t / a->n_head), h, 1, h / n_rep, w);
    }
}

/* Rows [slot, slot + n) of a cache buffer, head g (width values), as F32:
 * in place for an F32 cache (leading dimension: the row), else widened into
 * buf (leading dimension: width). */
static const float *cache_rows(const void *base, const ez_kv_format *f, int g, int32_t slot, int32_t n, int width,
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
 * EZ_ATT_KV_CHUNK rows with a cache of another type than F32 (widened
 * first, chunk by chunk: the only copy of cached rows). ws: (i1 - i0) *
 * n_rep * (hd + hdv + len) floats, then EZ_ATT_KV_CHUNK * max(hd, hdv). */
static void attend_block(const attn_job *job, int32_t i0, int32_t i1, int g, float *ws) {
    const ez_attn *a = job->a;
    const ez_kv_layer *kv = job->kv;
    const int hd = a->head_dim, hdv = a->head_dim_v, n_rep = a->n_head / a->n_head_kv;
    const int64_t n_q = (int64_t)a->n_head * hd, n_att = (int64_t)a->n_head * hdv;
    const int32_t cap = kv->cap, rows = (i1 - i0) * n_rep;
    const int32_t lo = kv->n_swa > 0 ? EZ_MAX(0, job->pos0 + i0 - kv->n_swa + 1) : 0, hi = job->pos0 + i1 - 1;
    const int32_t len = hi - lo + 1;
    const int32_t chunk_k = kv->fk.type == EZ_KV_F32 ? len : EZ_ATT_KV_CHUNK;
    const int32_t chunk_v = kv->fv.type == EZ_KV_F32 ? len : EZ_ATT_KV_CHUNK;
    float *q = ws, *o = q + (int64_t)rows * hd, *sc = o + (int64_t)rows * hdv; /* [rows, hd], [rows, hdv], [rows, len] */
    float *buf = sc + (int64_t)rows * len;
    int64_t ld;
    for (int32_t i = i0; i < i1; i++)
        memcpy(q + (int64_t)(i - i0) * n_rep * hd, job->q + (int64_t)i * n_q + (int64_t)g * n_rep * hd,
               sizeof(float) * (size_t)n_rep * (size_t)hd);
    /* sc [rows, len] = q [rows, hd] . keys [len, hd]^T */
    for (int32_t j = 0; j < len;) {
        const int32_t slot = (lo + j) % cap, n = EZ_MIN(EZ_MIN(len - j, cap - slot), chunk_k);
        const float *k = cache_rows(kv->k, &kv->fk, g, slot, n, hd, buf, &ld);
        ez_gemm_f32(a->pool, rows, n, hd, q, hd, k, ld, 1, sc + j, len, 0);
        j += n;
    }
    for (int32_t k = 0; k < rows; k++) {
        const int32_t p = job->pos0 + i0 + k / n_rep;
        const int32_t from = (kv->n_swa > 0 ? EZ_MAX(0, p - kv->n_swa + 1) : 0) - lo, to = p - lo + 1;
        float *row = sc + (int64_t)k * len;
        for (int32_t j = from; j < to; j++) row[j] *= a->scale;
        if (a->softcap > 0.0f) softcap_rows(row + from, to - from, a->softcap);
        a->ops->softmax(row + from, to - from);
        memset(row, 0, sizeof(float) * (size_t)from);
        memset(row + to, 0, sizeof(float) * (size_t)(len - to));
    }
    /* o [rows, hdv] = weights [rows, len] . values [len, hdv] */
    for (int32_t j = 0; j < len;) {
        const int32_t slot = (lo + j) % cap, n = EZ_MIN(EZ_MIN(len - j, cap - slot), chunk_v);
        const float *v = cache_rows(kv->v, &kv->fv, g, slot, n, hdv, buf, &ld);
        ez_gemm_f32(a->pool, rows, hdv, n, sc + j, len, v, ld, 0, o, hdv, j > 0);
        j += n;
    }
    for (int32_t i = i0; i < i1; i++)
        memcpy(job->out + (int64_t)i * n_att + (int64_t)g * n_rep * hdv, o + (int64_t)(i - i0) * n_rep * hdv,
               sizeof(float) * (size_t)n_rep * (size_t)hdv);
}

/* Items are (block of `block` tokens, key/value head) pairs: prompt batches
 * of at least `block` tokens. */
static void attend_blocks(void *ctx, int64_t t0, int64_t t1, int thread_index) {
    const attn_job *job = (const attn_job *)ctx;
    const ez_attn *a = job->a;
    float *s = a->scratch + (size_t)thread_index * a->per_thread;
    for (int64_t t = t0; t < t1; t++) {
        const int32_t i0 = (int32_t)(t / a->n_head_kv) * a->block;
        attend_block(job, i0, EZ_MIN(i0 + a->block, job->n), (int)(t % a->n_head_kv), s);
    }
}

void ez_attention(const ez_attn *a, const ez_kv_layer *kv, const float *q, float *out, int32_t n, int32_t pos0) {
    attn_job job = {a, kv, q, out, n, pos0};
    if (a->block && n >= a->block)
        ez_pool_for(a->pool, (int64_t)((n + a->block - 1) / a->block) * a->n_head_kv, 1, attend_blocks, &job);
    else if ((int64_t)n * a->n_head_kv >= 4 * (int64_t)a->n_threads)
        ez_pool_for(a->pool, (int64_t)n * a->n_head_kv, 1, attend_groups, &job);
    else
        ez_pool_for(a->pool, (int64_t)n * a->n_head, 1, attend_heads, &job);
}
