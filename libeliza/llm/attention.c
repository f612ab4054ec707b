/* Attention over the KV cache (attention.h). Three schedules of one
 * computation, chosen by batch size: blocks of query tokens as GEMMs
 * (prompts), (token, key/value head) pairs, and, for few tokens (decoding),
 * (token, key/value head, run of positions) triples whose partial softmaxes
 * are merged after, so that every thread has work even with one key/value
 * head and every cached row is read once for all the query heads that
 * share it. */
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
    int32_t n_split; /* runs of positions per (token, key/value head) in the split schedule */
} attn_job;

/* One partial result of the split schedule: the n_rep heads' outputs
 * [n_rep, head_dim_v] over a run of positions (softmax-weighted within the
 * run), then each head's largest scaled score and sum of exp(score - that). */
static size_t part_floats(const ez_attn *a) {
    return (size_t)(a->n_head / a->n_head_kv) * ((size_t)a->head_dim_v + 2);
}

void ez_attn_plan(ez_attn *a, int32_t max_cap, int quantized) {
    const size_t per_token = (size_t)(a->n_head / a->n_head_kv) *
                             ((size_t)max_cap + (size_t)a->head_dim + (size_t)a->head_dim_v);
    const size_t block = EZ_ATT_WS_BYTES / sizeof(float) / per_token;
    a->block = block >= EZ_ATT_MIN_BLOCK ? (int32_t)EZ_MIN(block, (size_t)EZ_ATT_BLOCK) : 0;
    a->part_at = EZ_MAX((size_t)a->block * per_token, (size_t)max_cap * (size_t)(a->n_head / a->n_head_kv)) +
                 (quantized ? (size_t)EZ_ATT_KV_CHUNK * (size_t)EZ_MAX(a->head_dim, a->head_dim_v) : 0);
    a->per_thread = a->part_at + EZ_ATT_SPLIT_SLOTS * part_floats(a);
}

/* Head g of the cached row of position p. */
static const void *kv_head(const void *base, const ez_kv_format *f, int32_t cap, int32_t p, int g) {
    return (const uint8_t *)base + (size_t)(p % cap) * f->row_bytes + (size_t)g * f->head_bytes;
}

/* What key smoothing took out of every score of one query head (q . m,
 * kv.h), or 0 where the softmax alone follows (no soft-cap: a shift of all
 * of a row's scores does not change it). q: the head's query as attention
 * gets it. */
static float smooth_shift(const ez_attn *a, const ez_kv_layer *kv, const float *q, int g) {
    if (!(a->softcap > 0.0f) || !kv->smooth || !kv->smooth->ready) return 0.0f;
    return a->ops->dot(q, kv->smooth->bias + (int64_t)g * a->head_dim, a->head_dim);
}

/* Gemma 2's attention logit soft-capping, in place. */
static void softcap_rows(float *s, int64_t n, float cap) {
    const float inv = 1.0f / cap;
    for (int64_t i = 0; i < n; i++) s[i] = cap * tanhf(s[i] * inv);
}

/* softmax(q k^T * scale) v for query heads h0 .. h0 + n_h - 1 of token i,
 * which share key/value head g, over the run s0 .. s1 - 1 of the cached
 * positions the token sees (causal, and inside the window on sliding
 * layers; s counts from the first it sees). Each key and value row is read
 * once for all n_h heads, in its stored type. out: [n_h, head_dim_v].
 * stats, unless NULL: [2, n_h], each head's largest scaled score and the
 * sum of exp(score - largest) over the run, for merging runs. w: n_h *
 * (s1 - s0) scratch floats. */
static void attend(const attn_job *job, int32_t i, int h0, int n_h, int g, int32_t s0, int32_t s1, float *w,
                   float *out, float *stats) {
    const ez_attn *a = job->a;
    const ez_kv_layer *kv = job->kv;
    const ez_kv_kernels *kk = kv->fk.kern, *kvv = kv->fv.kern;
    const int hd = a->head_dim, hdv = a->head_dim_v;
    const int32_t p = job->pos0 + i, cap = kv->cap;
    const int32_t lo = (kv->n_swa > 0 ? EZ_MAX(0, p - kv->n_swa + 1) : 0) + s0;
    const int32_t len = s1 - s0;
    const float *q = job->q + (int64_t)i * a->n_head * hd + (int64_t)h0 * hd;
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
    if (a->softcap > 0.0f) {
        for (int r = 0; r < n_h; r++) {
            const float shift = smooth_shift(a, kv, q + (int64_t)r * hd, g) * a->scale;
            if (shift != 0.0f)
                for (int32_t s = 0; s < len; s++) w[(int64_t)r * len + s] += shift;
        }
        softcap_rows(w, (int64_t)n_h * len, a->softcap);
    }
    for (int r = 0; r < n_h; r++) {
        float *row = w + (int64_t)r * len, top = row[0], pmax = 0.0f;
        if (stats)
            for (int32_t s = 1; s < len; s++) top = EZ_MAX(top, row[s]);
        a->ops->softmax(row, len);
        if (!stats) continue;
        /* The largest score's weight is exp(0) / sum. */
        for (int32_t s = 0; s < len; s++) pmax = EZ_MAX(pmax, row[s]);
        stats[r] = top;
        stats[n_h + r] = 1.0f / pmax;
    }
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

/* The positions token i sees. */
static int32_t visible(const attn_job *job, int32_t i) {
    const int32_t p = job->pos0 + i;
    return p - (job->kv->n_swa > 0 ? EZ_MAX(0, p - job->kv->n_swa + 1) : 0) + 1;
}

/* Items are (token, key/value head) pairs: prompt batches. */
static void attend_groups(void *ctx, int64_t t0, int64_t t1, int thread_index) {
    const attn_job *job = (const attn_job *)ctx;
    const ez_attn *a = job->a;
    const int n_rep = a->n_head / a->n_head_kv;
    float *w = a->scratch + (size_t)thread_index * a->per_thread;
    for (int64_t t = t0; t < t1; t++) {
        const int g = (int)(t % a->n_head_kv);
        const int32_t i = (int32_t)(t / a->n_head_kv);
        attend(job, i, g * n_rep, n_rep, g, 0, visible(job, i), w,
               job->out + (int64_t)i * a->n_head * a->head_dim_v + (int64_t)g * n_rep * a->head_dim_v, NULL);
    }
}

/* Where item t of the split schedule keeps its partial result: slot t /
 * n_threads of thread t % n_threads's workspace, so that no two items
 * share one, whichever thread runs them. */
static float *split_part(const ez_attn *a, int64_t t) {
    return a->scratch + (size_t)(t % a->n_threads) * a->per_thread + a->part_at +
           (size_t)(t / a->n_threads) * part_floats(a);
}

/* Items are (token, key/value head, run of positions) triples: few tokens
 * (decoding). With one run, the result goes straight to the output. */
static void attend_split(void *ctx, int64_t t0, int64_t t1, int thread_index) {
    const attn_job *job = (const attn_job *)ctx;
    const ez_attn *a = job->a;
    const int n_rep = a->n_head / a->n_head_kv;
    float *w = a->scratch + (size_t)thread_index * a->per_thread;
    for (int64_t t = t0; t < t1; t++) {
        const int32_t c = (int32_t)(t % job->n_split);
        const int g = (int)(t / job->n_split % a->n_head_kv);
        const int32_t i = (int32_t)(t / job->n_split / a->n_head_kv), len = visible(job, i);
        const int32_t run = (len + job->n_split - 1) / job->n_split;
        const int32_t s0 = EZ_MIN(len, c * run), s1 = EZ_MIN(len, s0 + run);
        float *part = split_part(a, t);
        if (job->n_split == 1) {
            attend(job, i, g * n_rep, n_rep, g, 0, len, w,
                   job->out + (int64_t)i * a->n_head * a->head_dim_v + (int64_t)g * n_rep * a->head_dim_v, NULL);
        } else if (s0 < s1) {
            attend(job, i, g * n_rep, n_rep, g, s0, s1, w, part, part + (size_t)n_rep * a->head_dim_v);
        } else {
            for (int r = 0; r < n_rep; r++) part[(size_t)n_rep * a->head_dim_v + (size_t)n_rep + (size_t)r] = 0.0f;
        }
    }
}

/* The output of (token, key/value head) pairs from their runs' partial
 * softmaxes: each run weighs by its sum of exp(score - M) for the largest
 * score M over all runs (flash decoding's merge). */
static void merge_split(const attn_job *job) {
    const ez_attn *a = job->a;
    const int n_rep = a->n_head / a->n_head_kv, hdv = a->head_dim_v;
    for (int64_t pair = 0; pair < (int64_t)job->n * a->n_head_kv; pair++) {
        const int64_t t0 = pair * job->n_split;
        const int32_t i = (int32_t)(pair / a->n_head_kv);
        const int g = (int)(pair % a->n_head_kv);
        for (int r = 0; r < n_rep; r++) {
            float *out = job->out + (int64_t)i * a->n_head * hdv + (int64_t)(g * n_rep + r) * hdv;
            float top = -INFINITY, total = 0.0f;
            for (int32_t c = 0; c < job->n_split; c++) {
                const float *st = split_part(a, t0 + c) + (size_t)n_rep * hdv;
                if (st[n_rep + r] > 0.0f) top = EZ_MAX(top, st[r]);
            }
            memset(out, 0, sizeof(float) * (size_t)hdv);
            for (int32_t c = 0; c < job->n_split; c++) {
                const float *part = split_part(a, t0 + c), *st = part + (size_t)n_rep * hdv;
                float wc;
                if (!(st[n_rep + r] > 0.0f)) continue;
                wc = st[n_rep + r] * expf(st[r] - top);
                total += wc;
                a->ops->axpy(out, wc, part + (size_t)r * hdv, hdv);
            }
            for (int j = 0; j < hdv; j++) out[j] /= total;
        }
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
        const float shift = smooth_shift(a, kv, q + (int64_t)k * hd, g);
        for (int32_t j = from; j < to; j++) row[j] = (row[j] + shift) * a->scale;
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
    attn_job job = {a, kv, q, out, n, pos0, 1};
    const int64_t pairs = (int64_t)n * a->n_head_kv;
    if (a->block && n >= a->block) {
        ez_pool_for(a->pool, (int64_t)((n + a->block - 1) / a->block) * a->n_head_kv, 1, attend_blocks, &job);
    } else if (pairs >= 4 * (int64_t)a->n_threads) {
        ez_pool_for(a->pool, pairs, 1, attend_groups, &job);
    } else {
        /* About four items per thread, runs of at least EZ_ATT_SPLIT_RUN
         * positions, and no more items than partial slots. */
        const int64_t by_threads = (4 * (int64_t)a->n_threads + pairs - 1) / pairs;
        const int64_t by_len = visible(&job, n - 1) / EZ_ATT_SPLIT_RUN;
        const int64_t by_slots = (int64_t)EZ_ATT_SPLIT_SLOTS * a->n_threads / pairs;
        job.n_split = (int32_t)EZ_MAX((int64_t)1, EZ_MIN(EZ_MIN(by_threads, by_len), by_slots));
        ez_pool_for(a->pool, pairs * job.n_split, 1, attend_split, &job);
        if (job.n_split > 1) merge_split(&job);
    }
}
