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
 * makes the block close to Gaussian; d is the block's RMS after that, and
 * each value is the nearest Lloyd-Max level of N(0, 1) to x / d (8 levels
 * for 3 bits, 16 for 4). Q8_0 and Q4_0 are rotated by an orthonormal
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
EZ_INTERNAL const ez_kv_kernels *ez_kv_kernels_neon(int type);

/* The block types' reference pieces the fast tables share: writing a row
 * (quantizing is done once per token, not hot), and widening TBQ rows. */
EZ_INTERNAL void ez_kv_store_q4_0(const float *x, void *dst, int64_t n);
EZ_INTERNAL void ez_kv_store_tbq4_0(const float *x, void *dst, int64_t n);
EZ_INTERNAL void ez_kv_store_tbq3_0(const float *x, void *dst, int64_t n);
EZ_INTERNAL void ez_kv_load_tbq4_0(const void *src, float *y, int64_t n);
EZ_INTERNAL void ez_kv_load_tbq3_0(const void *src, float *y, int64_t n);

#endif /* EZ_LLM_KV_H */
