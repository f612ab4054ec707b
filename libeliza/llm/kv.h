/* The KV cache's storage types: how one row of keys or values is written
 * and how attention reads it back without widening the cache.
 *
 *   F32, F16   plain floats / IEEE halves
 *   Q8_0       ggml's block_q8_0: fp16 d + 32 int8 (34 B per 32 values)
 *   Q4_0       ggml's block_q4_0: fp16 d + 16 nibble bytes (18 B per 32)
 *   TBQ4_0     fp16 d + 16 nibble bytes of 4-bit codes (18 B per 32)
 *   TBQ3_0     fp16 d + 12 bytes of 3-bit codes (14 B per 32)
 *
 * The TBQ formats (TurboQuant, arXiv 2504.19874; the elizaOS llama.cpp
 * fork's layout) condition each 32-value block first: a fixed +-1 sign flip,
 * then the 32-point Walsh-Hadamard transform scaled by 1/sqrt(32), which
 * makes the block close to Gaussian; each value is the nearest Lloyd-Max
 * level of N(0, 1) to x / d (8 levels for 3 bits, 16 for 4), and d is
 * searched around the block's RMS after that (the least-squares scale of
 * the best of eight code sets, kv.c), which the format leaves to the
 * writer: the reader only ever computes d * level. Q8_0 and Q4_0 are rotated by an orthonormal
 * Walsh-Hadamard transform when the head size is a multiple of 64, as
 * llama.cpp does (llama-kv-cache.cpp: keys by the largest power of two
 * dividing the head size, values by 64).
 *
 * Every transform is orthonormal, so a score q . k equals the dot of the
 * query transformed the same way with the stored (transformed) key, and the
 * weighted sum of stored values is transformed back once per head: attention
 * never undoes a transform per cached row. The kernels below work in that
 * transformed domain; the caller rotates queries, new keys and values, and
 * the attention output (ez_kv_rotate / ez_kv_unrotate).
 *
 * Codes: Q4_0 and TBQ4_0 keep element j < 16 in the low nibble of qs[j] and
 * element 16 + j in its high nibble; TBQ3_0 keeps element j in bits 3j ..
 * 3j + 2 of the little-endian 96-bit qs. */
#ifndef EZ_LLM_KV_H
#define EZ_LLM_KV_H

#include "core/common.h"

/* The same numbers as eliza_llm_kv_type. */
typedef enum {
    EZ_KV_F32 = 0,
    EZ_KV_F16 = 1,
    EZ_KV_Q8_0 = 2,
    EZ_KV_Q4_0 = 3,
    EZ_KV_TBQ4_0 = 4,
    EZ_KV_TBQ3_0 = 5,
    EZ_KV_COUNT
} ez_kv_type;

#define EZ_KV_BLOCK 32

typedef struct { uint16_t d; uint8_t qs[16]; } ez_block_tbq4_0; /* 18 B */
typedef struct { uint16_t d; uint8_t qs[12]; } ez_block_tbq3_0; /* 14 B */

/* Lloyd-Max levels of N(0, 1), ascending: code c decodes to d * level[c]. */
EZ_INTERNAL extern const float ez_tbq3_levels[8];
EZ_INTERNAL extern const float ez_tbq4_levels[16];

typedef struct {
    /* dst = x[0..n) in this format (n a multiple of 32 for the block types) */
    void (*store)(const float *x, void *dst, int64_t n);
    /* y[0..n) = the stored values (widening) */
    void (*load)(const void *src, float *y, int64_t n);
    /* sum of q[i] * k[i] */
    float (*dot)(const float *q, const void *k, int64_t n);
    /* out[r] = sum of a[r * lda + i] * k[i], r < 4: one key read for four heads */
    void (*dot4)(const float *a, int64_t lda, const void *k, int64_t n, float out[4]);
    /* y[i] += w * v[i] */
    void (*axpy)(float *y, float w, const void *v, int64_t n);
    /* y[r * ldy + i] += w[r] * v[i], r < 4 */
    void (*axpy4)(float *y, int64_t ldy, const float w[4], const void *v, int64_t n);
} ez_kv_kernels;

/* "f32", "f16", "q8_0", "q4_0", "tbq4_0", "tbq3_0"; "?" otherwise. */
EZ_INTERNAL const char *ez_kv_type_name(int type);
/* Bytes of n values (n a multiple of 32 for the block types). */
EZ_INTERNAL size_t ez_kv_row_bytes(int type, int64_t n);
/* Values per block: 1 for F32 / F16, 32 otherwise. */
EZ_INTERNAL int ez_kv_block_size(int type);

/* The transform of a head of head_dim values stored as `type`, as a code
 * for ez_kv_rotate: 0 none, n > 1 the n-point Walsh-Hadamard transform of
 * each n values, EZ_KV_ROT_TBQ the TBQ conditioning. is_v: for values (the
 * Hadamard size is then 64, else the largest power of two dividing
 * head_dim). */
#define EZ_KV_ROT_TBQ (-1)
EZ_INTERNAL int ez_kv_rotation(int type, int head_dim, int is_v);
/* x[0..n) transformed in place by `rot` (n a multiple of its size), and
 * back. */
EZ_INTERNAL void ez_kv_rotate(float *x, int64_t n, int rot);
EZ_INTERNAL void ez_kv_unrotate(float *x, int64_t n, int rot);
/* The orthonormal n-point Walsh-Hadamard transform of x[0..n), in place
 * (n a power of two); its own inverse. */
EZ_INTERNAL void ez_kv_hadamard(float *x, int n);

/* The kernels in use for `type` (fast for this CPU unless
 * ELIZA_FORCE_SCALAR=1), the scalar reference, and one instruction set's
 * (NULL when this build has none: callers check the CPU). */
EZ_INTERNAL const ez_kv_kernels *ez_kv_kernels_active(int type);
EZ_INTERNAL const ez_kv_kernels *ez_kv_kernels_ref(int type);
EZ_INTERNAL const ez_kv_kernels *ez_kv_kernels_avx2(int type);
EZ_INTERNAL const ez_kv_kernels *ez_kv_kernels_avx512(int type);
EZ_INTERNAL const ez_kv_kernels *ez_kv_kernels_neon(int type);

/* The block types' reference pieces the fast tables share: writing a row
 * (quantizing is done once per token, not hot), and widening TBQ rows. */
EZ_INTERNAL void ez_kv_store_q4_0(const float *x, void *dst, int64_t n);
EZ_INTERNAL void ez_kv_store_tbq4_0(const float *x, void *dst, int64_t n);
EZ_INTERNAL void ez_kv_store_tbq3_0(const float *x, void *dst, int64_t n);
EZ_INTERNAL void ez_kv_load_tbq4_0(const void *src, float *y, int64_t n);
EZ_INTERNAL void ez_kv_load_tbq3_0(const void *src, float *y, int64_t n);


/* ---- the cache object ---------------------------------------------------------------
 *
 * One cache per session (llm/session.h): for each layer the keys and values
 * of the positions it holds, each in the layer's own format, or a recurrent
 * state, or nothing of its own.
 *
 *   global layers     cap = n_ctx rows; position p in row p
 *   sliding layers    a ring of cap = min(n_ctx, n_swa + n_batch) rows;
 *                     position p in row p % cap: enough that a batch of up
 *                     to n_batch tokens never overwrites a key that an
 *                     earlier query of the same batch still sees
 *   aliasing layers   no rows; attention reads an earlier layer's (Gemma 4's
 *                     KV-shared layers)
 *   recurrent layers  state_bytes of opaque state (e.g. Mamba2 conv + SSM),
 *                     zeroed by clear, carried by snapshots
 *
 * n_pos positions (0 .. n_pos-1) are held. An eval appends at n_pos
 * (ez_kv_cache_begin before it writes, ez_kv_cache_commit after a batch).
 *
 * Rewind. ez_kv_cache_rewind(n) drops the last n positions: O(1) for rows
 * (they are overwritten by the next eval). A ring keeps only the last cap
 * positions written, so a rewind is valid while every position the next
 * query still sees (its window, n_swa back) has not been overwritten by a
 * dropped one: up to n_batch + 1 positions back from the highest position
 * written, always. Past that it is ELIZA_E_INVALID_ARG and the cache is
 * unchanged. A layer with recurrent state cannot rewind (the state mixes
 * every position): ELIZA_E_INVALID_ARG unless n is 0; use a snapshot.
 *
 * Snapshots. EZ_KV_SNAP_STATES copies the recurrent states and the position
 * count (cost: the state bytes; nothing for attention-only models); its
 * restore puts the states back and rewinds the rows to the mark, so it is
 * valid under the same rule as a rewind, and only for the latest snapshot
 * taken and while the cache has not gone below its mark since
 * (ELIZA_E_STATE otherwise).
 * EZ_KV_SNAP_FULL also copies every held row and the key smoothing (cost:
 * the held rows' bytes, up to ez_kv_cache_bytes) and restores whatever
 * happened since.
 *
 * The speculative loop: take a STATES snapshot, eval the k drafted tokens
 * (all k logit rows), accept j of them; then either rewind(k - j) (attention
 * only), or, with recurrent layers, restore the snapshot and eval the j
 * accepted tokens again (k <= n_batch keeps both valid). */

/* Key smoothing (the quantized key types). Gemma's keys carry large
 * per-channel offsets and a few channels of outsized spread, which a block
 * scale shared by 32 channels serves badly. A layer whose keys are smoothed
 * stores, per key/value head and channel c,
 *     k'[c] = (k[c] - m[c]) / s[c]
 * (then transformed and quantized as its format says), and meets them with
 * the query q'[c] = q[c] * s[c]: q . k = q' . k' + q . m, exactly. q . m is
 * one number per query head and token, the same at every position that
 * query sees, so a softmax drops it; attention adds it back (as the dot of
 * q' with `bias`, m / s in the stored keys' domain) only where a soft-cap
 * makes the scores' level matter. m and s are fixed by the first batch of
 * keys the layer writes after a clear (in a session: the prompt's first
 * batch): m the channel mean, s the fourth root of the channel's key
 * variance about m over the mean square of the queries' channel (over the
 * query heads that share the key/value head), normalised to a mean square
 * of 1. A block quantizer's error is spread over its block (the rotation
 * or conditioning) in proportion to the block's mean square, so the
 * expected squared score error of a block B goes as
 * (sum_B s^2 Q)(sum_B K / s^2) for key variances K and query mean squares
 * Q, which is least (Cauchy-Schwarz) at s^4 = K / Q. Without queries, Q is
 * taken as 1. EZ_KV_SMOOTH_PRIOR positions of mean 0 and the head's mean
 * square (of keys, and of queries) are counted in, so that a batch of one
 * or a few tokens gives m near 0 and s near 1. They then hold for every row
 * written until the next clear, so rewinds, rings, reused prefixes and
 * snapshots keep all rows in one domain. */
#define EZ_KV_SMOOTH_PRIOR 4
typedef struct {
    int ready;          /* mean, scale and bias fixed since the last clear */
    int n_head_kv, head_dim;
    int rot;            /* the keys' transform (ez_kv_rotation), for bias */
    float *mean;        /* [n_head_kv * head_dim] m */
    float *scale;       /* [n_head_kv * head_dim] s, > 0 */
    float *bias;        /* [n_head_kv * head_dim] m / s, transformed by rot */
} ez_kv_smooth;

/* Fixes sm from n positions of keys k [n, n_head_kv * head_dim] and their
 * queries q [n, n_head * head_dim] (before any transform; q may be NULL)
 * and sets ready. */
EZ_INTERNAL void ez_kv_smooth_fit(ez_kv_smooth *sm, const float *k, const float *q, int32_t n, int n_head);
/* k [n, n_head_kv * head_dim] = (k - m) / s, in place. */
EZ_INTERNAL void ez_kv_smooth_keys(const ez_kv_smooth *sm, float *k, int32_t n);
/* q [n, n_head * head_dim] *= s of each query head's key/value head
 * (n_head a multiple of n_head_kv), in place. */
EZ_INTERNAL void ez_kv_smooth_queries(const ez_kv_smooth *sm, float *q, int32_t n, int n_head);

/* How one layer's keys (or values) are stored. */
typedef struct {
    int type;                  /* ez_kv_type */
    const ez_kv_kernels *kern; /* ez_kv_kernels_active(type) */
    int head_dim;              /* values in one head */
    size_t head_bytes;         /* one head of one position */
    size_t row_bytes;          /* all heads of one position */
    int rot;                   /* the transform the stored vectors are in (ez_kv_rotation) */
} ez_kv_format;

/* What a layer needs from the cache. n_head_kv = 0: no keys and values
 * (a recurrent-only layer, or one with alias >= 0). */
typedef struct {
    int type_k, type_v;        /* ez_kv_type */
    int n_head_kv;
    int head_dim_k, head_dim_v;
    int32_t n_swa;             /* > 0: attends through a window of n_swa positions (a ring) */
    int alias;                 /* >= 0: an earlier layer whose keys and values this one reads; -1: none */
    size_t state_bytes;        /* recurrent state, 0 for none */
    int smooth_k;              /* store the keys smoothed (ez_kv_smooth); the session sets it for quantized keys */
} ez_kv_layer_spec;

typedef struct {
    ez_kv_format fk, fv;       /* of the rows read (the aliased layer's for an alias) */
    uint8_t *k, *v;            /* [cap] rows of fk.row_bytes / fv.row_bytes; NULL without rows */
    int32_t cap;               /* rows; position p lives in row p % cap */
    int32_t n_swa;             /* 0: global */
    int src;                   /* the layer whose rows these are (itself unless aliasing) */
    ez_kv_smooth *smooth;      /* how the keys are smoothed (src's), NULL: stored as they are */
    uint8_t *state;            /* [state_bytes] or NULL */
    size_t state_bytes;
} ez_kv_layer;

typedef struct {
    int n_layer;
    int32_t n_ctx, n_batch;
    int32_t n_pos;             /* positions held */
    int32_t hi;                /* one past the highest position written since the last clear */
    int32_t mark_low;          /* the lowest n_pos since the latest snapshot */
    uint32_t generation;       /* of the latest snapshot */
    ez_kv_layer *layers;       /* [n_layer] */
    size_t bytes;              /* rows and states over all layers (not the key smoothing: 12 B per key channel) */
} ez_kv_cache;

typedef struct ez_kv_snapshot ez_kv_snapshot;
#define EZ_KV_SNAP_STATES 0
#define EZ_KV_SNAP_FULL 1

/* specs[n_layer]; n_ctx, n_batch >= 1. ELIZA_E_INVALID_ARG for an unknown
 * type, a block type the head size does not divide into or an alias that
 * is not an earlier layer with rows of the same shape; ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_kv_cache_create(const ez_kv_layer_spec *specs, int n_layer, int32_t n_ctx, int32_t n_batch,
                                       ez_kv_cache **out);
EZ_INTERNAL void ez_kv_cache_free(ez_kv_cache *c);
/* Drops every position, zeroes the recurrent states and unfixes the key
 * smoothing. */
EZ_INTERNAL void ez_kv_cache_clear(ez_kv_cache *c);
/* Is a rewind to n_pos = pos valid (see above)? */
EZ_INTERNAL int ez_kv_cache_can_rewind_to(const ez_kv_cache *c, int32_t pos);
EZ_INTERNAL int32_t ez_kv_cache_rewind(ez_kv_cache *c, int32_t n);
/* Before an eval writes positions n_pos .. n_pos + n - 1 (a failed eval
 * leaves them written but not held). */
EZ_INTERNAL void ez_kv_cache_begin(ez_kv_cache *c, int32_t n);
/* After n positions were evaluated: they are held. */
EZ_INTERNAL void ez_kv_cache_commit(ez_kv_cache *c, int32_t n);
/* Row of position pos in layer il's keys / values (layers with rows). */
static inline uint8_t *ez_kv_cache_k(const ez_kv_cache *c, int il, int32_t pos) {
    const ez_kv_layer *L = &c->layers[il];
    return L->k + (size_t)(pos % L->cap) * L->fk.row_bytes;
}
static inline uint8_t *ez_kv_cache_v(const ez_kv_cache *c, int il, int32_t pos) {
    const ez_kv_layer *L = &c->layers[il];
    return L->v + (size_t)(pos % L->cap) * L->fv.row_bytes;
}
/* The bytes one position's keys and values take over the layers with rows of their own. */
EZ_INTERNAL size_t ez_kv_cache_bytes_per_token(const ez_kv_cache *c);

/* Takes a snapshot of `mode` into *snap (allocated when *snap is NULL,
 * else reused: a snapshot of the same cache). ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_kv_snapshot_take(ez_kv_cache *c, int mode, ez_kv_snapshot **snap);
/* ELIZA_E_STATE when a STATES snapshot can no longer be restored (see
 * above), ELIZA_E_INVALID_ARG for a snapshot of another cache; the cache
 * is then unchanged. */
EZ_INTERNAL int32_t ez_kv_snapshot_restore(ez_kv_cache *c, const ez_kv_snapshot *snap);
EZ_INTERNAL size_t ez_kv_snapshot_bytes(const ez_kv_snapshot *snap);
EZ_INTERNAL void ez_kv_snapshot_free(ez_kv_snapshot *snap);

#endif /* EZ_LLM_KV_H */
