/* Attention over the KV cache: softmax(q k^T * scale, causal [+ window]) v
 * for a batch of queries, reading cached rows in their stored type.
 *
 * Queries arrive, and the output leaves, in the cache's transformed domain
 * (kv.h): the caller rotates them and transforms the output back. */
#ifndef EZ_LLM_ATTENTION_H
#define EZ_LLM_ATTENTION_H

#include "core/common.h"
#include "core/pool.h"
#include "kv.h"
#include "ops.h"

/* Query tokens per task of the blocked attention (prompt batches): their
 * scores against the keys they see are one GEMM. At most ATT_BLOCK, fewer
 * where a thread's workspace would pass ATT_WS_BYTES (long contexts), and
 * none below ATT_MIN_BLOCK (the per-token path then). */
#define EZ_ATT_BLOCK 32
#define EZ_ATT_MIN_BLOCK 8
#define EZ_ATT_WS_BYTES ((size_t)4 << 20)
/* Cache rows a cache of another type than F32 widens at a time for those
 * GEMMs (the one bounded copy of cached rows attention makes). */
#define EZ_ATT_KV_CHUNK 256
/* The split schedule (few query tokens): runs of at least ATT_SPLIT_RUN
 * positions, and at most ATT_SPLIT_SLOTS partial results per thread. */
#define EZ_ATT_SPLIT_RUN 64
#define EZ_ATT_SPLIT_SLOTS 8

/* The shapes every layer's attention shares, and its workspace. */
typedef struct {
    ez_pool *pool;
    const ez_llm_ops *ops;
    int n_threads;
    int n_head, n_head_kv, head_dim, head_dim_v;
    float scale;                /* multiplies q.k */
    float softcap;              /* scores = softcap * tanh(scores / softcap) after the scale (gemma2); 0 = off */
    int32_t block;              /* tokens per blocked-attention task; 0: per-token only */
    float *scratch;             /* [n_threads][per_thread] */
    size_t per_thread;
    size_t part_at;             /* where a thread's partial-result slots start in its per_thread floats */
} ez_attn;

/* block and per_thread for caches of up to max_cap rows per layer
 * (quantized: some layer's rows are not F32). */
EZ_INTERNAL void ez_attn_plan(ez_attn *a, int32_t max_cap, int quantized);

/* out [n, n_head * head_dim_v] = attention of the queries q [n, n_head *
 * head_dim] at positions pos0 .. pos0 + n - 1 over the rows of kv (their
 * own keys and values already stored). */
EZ_INTERNAL void ez_attention(const ez_attn *a, const ez_kv_layer *kv, const float *q, float *out, int32_t n,
                              int32_t pos0);

#endif /* EZ_LLM_ATTENTION_H */
