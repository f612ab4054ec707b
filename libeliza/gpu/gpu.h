/* The GPU backend: Vulkan compute through a loader opened at run time
 * (libvulkan.so.1, vulkan-1.dll, libvulkan.1.dylib), never linked. A build
 * without glslc compiles gpu/none.c instead, whose ez_gpu_open() says so.
 *
 * Objects: one ez_gpu (instance, device, queue, pipelines made on first use),
 * buffers on it, weight matrices split into buffers where one binding would
 * pass the device's maxStorageBufferRange, and command buffers recorded once
 * and run any number of times (the decode step's replay). Ops (vk_ops.c)
 * record one kernel each into a command buffer; the engine composes them.
 *
 * Errors: every Vulkan failure becomes an ELIZA_E_* code with a message
 * naming the call and the VkResult; nothing is printed, validation-layer
 * messages go to the host log and, for errors, fail the next call. One
 * ez_gpu is used by one thread at a time. */
#ifndef EZ_GPU_H
#define EZ_GPU_H

#include "core/common.h"
#include "core/strbuf.h"

typedef struct ez_gpu ez_gpu;
typedef struct ez_gpu_buf ez_gpu_buf;
typedef struct ez_gpu_cmd ez_gpu_cmd;

typedef struct {
    /* Which device: NULL reads $ELIZA_GPU_DEVICE. Empty or unset: the best
     * GPU (discrete, then integrated, then virtual); "none": no GPU; a
     * decimal index into the loader's list; otherwise a case-insensitive
     * substring of the device name. An index or a name may pick a CPU
     * device (lavapipe); the automatic choice does only with allow_cpu. */
    const char *device;
    int allow_cpu;
    /* Enable VK_LAYER_KHRONOS_validation (also $ELIZA_GPU_VALIDATION=1);
     * ELIZA_E_UNSUPPORTED when it is not installed. */
    int validation;
    /* Test hooks: comma-separated name substrings treated as denylisted (as
     * $ELIZA_GPU_DENY is), and a binding limit below the device's (0: the
     * device's maxStorageBufferRange) so tests split small matrices. */
    const char *deny;
    uint64_t max_binding_bytes;
    /* The shared-memory reductions (matvecs, row ops) even where the
     * device has subgroup arithmetic (also $ELIZA_GPU_NO_SUBGROUP=1). */
    int no_subgroup;
} ez_gpu_params;

typedef struct {
    char name[256];
    char driver[256];          /* driver name and info, "" before Vulkan 1.2 */
    const char *type;          /* "discrete", "integrated", "virtual", "cpu", "other" */
    uint32_t vendor_id, device_id, api_version, driver_version;
    int fp16;                  /* shaderFloat16 */
    int int8;                  /* shaderInt8 */
    int int8_dot;              /* 4x8-bit packed signed dot product accelerated */
    int cooperative_matrix;    /* VK_KHR_cooperative_matrix present */
    int timestamps;            /* the compute queue writes timestamps */
    uint32_t timestamp_bits;   /* of them that count (timestampValidBits) */
    uint32_t subgroup_size;
    int subgroup_arith;        /* subgroup arithmetic (subgroupAdd) in compute shaders */
    uint32_t max_workgroup_invocations;
    uint64_t device_local_bytes;   /* largest device-local heap */
    uint64_t max_binding_bytes;    /* maxStorageBufferRange */
} ez_gpu_device_info;

EZ_INTERNAL void ez_gpu_params_default(ez_gpu_params *p);

/* Opens the chosen device. ELIZA_E_UNSUPPORTED with the reason when there is
 * no loader, no usable device, a denylisted driver, or no GPU backend in
 * this build. */
EZ_INTERNAL int32_t ez_gpu_open(const ez_gpu_params *p, ez_gpu **out);
EZ_INTERNAL void ez_gpu_close(ez_gpu *g);
EZ_INTERNAL const ez_gpu_device_info *ez_gpu_info(const ez_gpu *g);
/* Validation-layer errors seen so far (0 without validation). */
EZ_INTERNAL int ez_gpu_validation_errors(const ez_gpu *g);

/* Appends `"gpu": {...}` for the capabilities JSON: the backend, every
 * Vulkan device with its features, or why there is none. */
EZ_INTERNAL void ez_gpu_append_capabilities(ez_strbuf *sb);

/* ---- buffers --------------------------------------------------------------------- */

typedef enum {
    EZ_GPU_DEVICE_LOCAL = 0,   /* filled through a staging copy */
    EZ_GPU_HOST = 1            /* host-visible and coherent: step inputs, readback */
} ez_gpu_mem;

/* A buffer of `bytes` (rounded up to 16) usable as one storage binding:
 * ELIZA_E_UNSUPPORTED past the binding limit, ELIZA_E_NOMEM past the heap. */
EZ_INTERNAL int32_t ez_gpu_buf_create(ez_gpu *g, uint64_t bytes, ez_gpu_mem mem, ez_gpu_buf **out);
EZ_INTERNAL void ez_gpu_buf_free(ez_gpu_buf *b);
EZ_INTERNAL uint64_t ez_gpu_buf_size(const ez_gpu_buf *b);
EZ_INTERNAL int32_t ez_gpu_upload(ez_gpu_buf *b, uint64_t offset, const void *src, uint64_t n);
EZ_INTERNAL int32_t ez_gpu_download(const ez_gpu_buf *b, uint64_t offset, void *dst, uint64_t n);

/* A weight matrix [n_rows, n_cols] in its stored type, device-local, rows
 * split over parts so no part passes the binding limit. */
typedef struct {
    uint32_t type;              /* EZ_TYPE_* */
    int64_t n_rows, n_cols;
    uint64_t row_bytes;
    int n_parts;
    ez_gpu_buf **parts;
    int64_t *part_row0;         /* first row of each part; [n_parts + 1], last = n_rows */
    int paired;                 /* rows interleave two matrices (ez_gpu_matrix_upload_pair) */
} ez_gpu_matrix;

/* ELIZA_E_UNSUPPORTED for a type without a GPU kernel. */
EZ_INTERNAL int32_t ez_gpu_matrix_upload(ez_gpu *g, uint32_t type, int64_t n_rows, int64_t n_cols,
                                         const void *data, ez_gpu_matrix *out);
/* Two matrices of one type and shape [n_rows, n_cols] (a gate's and an
 * up's) as one of 2 n_rows rows, a's row i at 2 i and b's at 2 i + 1, so one
 * matvec reads both (ez_gpu_op_matvec_glu) and one matmul makes both
 * products (then ez_gpu_op_glu_pairs). */
EZ_INTERNAL int32_t ez_gpu_matrix_upload_pair(ez_gpu *g, uint32_t type, int64_t n_rows, int64_t n_cols,
                                              const void *a, const void *b, ez_gpu_matrix *out);
EZ_INTERNAL void ez_gpu_matrix_free(ez_gpu_matrix *m);
/* Nonzero when ez_gpu_op_matvec has a kernel for this weight type. */
EZ_INTERNAL int ez_gpu_has_matvec(uint32_t type);

/* ---- command buffers --------------------------------------------------------------- */

/* Starts recording. Every op recorded waits for the ones before it. */
EZ_INTERNAL int32_t ez_gpu_cmd_begin(ez_gpu *g, ez_gpu_cmd **out);
EZ_INTERNAL int32_t ez_gpu_cmd_end(ez_gpu_cmd *c);
/* The next op recorded need not wait for the one recorded last (it reads
 * nothing that op writes and writes nothing that op reads or writes), so
 * the device may run the two at once; it still waits for every op before
 * that one. For independent products of the same input (q, k, v; gate, up). */
EZ_INTERNAL void ez_gpu_cmd_overlap_next(ez_gpu_cmd *c);
/* Submits the recorded commands and waits for them; may be called again
 * (replay) after host-visible inputs change. */
EZ_INTERNAL int32_t ez_gpu_cmd_run(ez_gpu_cmd *c);
/* Milliseconds each recorded op took in the last run, from device
 * timestamps: fills ms[0..min(n, cap)) and returns the op count n, or 0
 * when the device has no timestamps. */
EZ_INTERNAL int ez_gpu_cmd_timings(const ez_gpu_cmd *c, double *ms, int cap);
/* The shader name of recorded op i ("copy" for ez_gpu_op_copy), NULL past the end. */
EZ_INTERNAL const char *ez_gpu_cmd_op_name(const ez_gpu_cmd *c, int i);
/* Whether command buffers begun from now on write timestamps (on by
 * default where the device has them): each op's pair costs a little. */
EZ_INTERNAL void ez_gpu_set_timestamps(ez_gpu *g, int on);
EZ_INTERNAL void ez_gpu_cmd_free(ez_gpu_cmd *c);

/* ---- ops (each records one dispatch; offsets and sizes in floats) ------------------ */

/* A step-buffer word index meaning "none". */
#define EZ_GPU_NO_WORD 0xffffffffu

/* Copies `bytes` from src at byte src_off to dst at byte dst_off (a host
 * input staged into device-local memory, a readback); the ranges stay
 * inside the buffers. */
EZ_INTERNAL int32_t ez_gpu_op_copy(ez_gpu_cmd *c, ez_gpu_buf *src, uint64_t src_off, ez_gpu_buf *dst,
                                   uint64_t dst_off, uint64_t bytes);

/* y[y_off + r] = W[r] . x[x_off ..], r < n_rows: F32, F16, BF16, Q4_0, Q4_1,
 * Q5_0, Q8_0, Q4_K, Q5_K, Q6_K weights times F32 activations. */
EZ_INTERNAL int32_t ez_gpu_op_matvec(ez_gpu_cmd *c, const ez_gpu_matrix *w, ez_gpu_buf *x, uint32_t x_off,
                                     ez_gpu_buf *y, uint32_t y_off);
/* ez_gpu_op_matvec with y_off grown at run time by word step_word of step
 * (a uint32 buffer): the value's matvec writing its KV-cache row. */
EZ_INTERNAL int32_t ez_gpu_op_matvec_at(ez_gpu_cmd *c, const ez_gpu_matrix *w, ez_gpu_buf *x, uint32_t x_off,
                                        ez_gpu_buf *y, uint32_t y_off, ez_gpu_buf *step, uint32_t step_word);
/* A query's or key's rope done by its matvec (ez_gpu_op_matvec_rope): the
 * rows are heads of head_dim rows (GPT-J layout: dims 2 i and 2 i + 1 a
 * pair), and dims d < n_rot of each head are rotated by the cosine and sine
 * angles[cs_off + d], angles[cs_off + d + 1] (d even; as ez_gpu_op_qk_rope
 * without norms). */
typedef struct {
    uint32_t head_dim, n_rot, cs_off;
    ez_gpu_buf *angles;
} ez_gpu_mv_rope;
/* ez_gpu_op_matvec (at a step word where step is not NULL) with each row
 * pair rotated by rope: a llama block's q, and its k written rotated into
 * the cache row, with no qk_rope dispatch. w is not a paired matrix. */
EZ_INTERNAL int32_t ez_gpu_op_matvec_rope(ez_gpu_cmd *c, const ez_gpu_matrix *w, ez_gpu_buf *x, uint32_t x_off,
                                          ez_gpu_buf *y, uint32_t y_off, ez_gpu_buf *step, uint32_t step_word,
                                          const ez_gpu_mv_rope *rope);
typedef enum { EZ_GPU_GELU_TANH = 0, EZ_GPU_SILU = 1 } ez_gpu_glu;
/* y[y_off + i] = act(a[i] . x) * (b[i] . x), i < n_rows / 2, for a paired
 * matrix (ez_gpu_matrix_upload_pair): the gate, the up and their gated
 * unit in one dispatch. */
EZ_INTERNAL int32_t ez_gpu_op_matvec_glu(ez_gpu_cmd *c, const ez_gpu_matrix *w, ez_gpu_buf *x, uint32_t x_off,
                                         ez_gpu_buf *y, uint32_t y_off, ez_gpu_glu act);
/* Y = X W^T for n_tok tokens: y[t * n_rows + r] = W[r] . x[t * n_cols ..]
 * (x [n_tok, n_cols], y [n_tok, n_rows]), in tiles of 64 rows x 64 tokens,
 * for the types ez_gpu_op_matvec takes. With step not NULL, the tiles
 * whose tokens all come before the value of word row0_word of step (a
 * bucket's padding) are skipped at run time. */
EZ_INTERNAL int32_t ez_gpu_op_matmul(ez_gpu_cmd *c, const ez_gpu_matrix *w, ez_gpu_buf *x, ez_gpu_buf *y,
                                     uint32_t n_tok, ez_gpu_buf *step, uint32_t row0_word);
/* Each of n_rows rows of n: y = x / sqrt(mean(x^2) + eps) * w; y may be x. */
EZ_INTERNAL int32_t ez_gpu_op_rms_norm(ez_gpu_cmd *c, ez_gpu_buf *x, ez_gpu_buf *w, ez_gpu_buf *y, uint32_t n,
                                       uint32_t n_rows, float eps);
/* Each of n_rows rows of n, one dispatch: o = rms_norm(o) * w_post where
 * w_post is not NULL (o itself is left as it was), then x += o, then h =
 * rms_norm(x) * w: the residual between two blocks and the next block's
 * input norm. */
EZ_INTERNAL int32_t ez_gpu_op_add_rms_norm(ez_gpu_cmd *c, ez_gpu_buf *o, ez_gpu_buf *w_post, ez_gpu_buf *x,
                                           ez_gpu_buf *w, ez_gpu_buf *h, uint32_t n, uint32_t n_rows, float eps);
/* In place on n_heads heads of head_dim at x[x_off ..], rotating the first
 * n_rot dims by cs[cs_off + 2i], cs[cs_off + 2i + 1] (ez_rope_angles). */
EZ_INTERNAL int32_t ez_gpu_op_rope(ez_gpu_cmd *c, ez_gpu_buf *x, uint32_t x_off, ez_gpu_buf *cs, uint32_t cs_off,
                                   uint32_t n_heads, uint32_t head_dim, uint32_t n_rot, int neox);
/* The query and key heads of n_tok tokens in one dispatch: q [n_tok,
 * n_head, head_dim] and k [n_tok, n_head_kv, head_dim] each get their
 * per-head RMSNorm where q_norm / k_norm is not NULL ([head_dim] weights),
 * then rope on the first n_rot dims, token t by angles[cs_off + t *
 * cs_stride ..] (as ez_gpu_op_rope); q is written back in place, k into
 * k_cache from the element offset in word step_word of `step` (token t one
 * key row further; the caller keeps those rows within k_cache). With
 * row0_word not EZ_GPU_NO_WORD, the tokens before the value of that word
 * (a bucket's padding) are left alone. head_dim <= 512. */
typedef struct {
    uint32_t n_head, n_head_kv, head_dim, n_rot;
    int neox;
    uint32_t cs_off;
    float eps;
    ez_gpu_buf *q_norm, *k_norm;   /* NULL: no norm */
    ez_gpu_buf *step;
    uint32_t step_word;
    uint32_t n_tok, cs_stride, row0_word;
} ez_gpu_qk;
EZ_INTERNAL int32_t ez_gpu_op_qk_rope(ez_gpu_cmd *c, const ez_gpu_qk *a, ez_gpu_buf *q, ez_gpu_buf *k,
                                      ez_gpu_buf *angles, ez_gpu_buf *k_cache);
/* g[i] = act(g[i]) * u[i], i < n. */
EZ_INTERNAL int32_t ez_gpu_op_glu(ez_gpu_cmd *c, ez_gpu_buf *g, ez_gpu_buf *u, uint32_t n, ez_gpu_glu act);
/* u[i] = act(g[2 i]) * g[2 i + 1], i < n: the gated unit of a paired
 * matrix's products (ez_gpu_matrix_upload_pair), g [n_tok, 2 n_ff]. */
EZ_INTERNAL int32_t ez_gpu_op_glu_pairs(ez_gpu_cmd *c, ez_gpu_buf *g, ez_gpu_buf *u, uint32_t n, ez_gpu_glu act);
/* y[y_off + i] = x[x_off + i] (accumulate 0) or += it (accumulate 1), i < n:
 * a copy into the KV cache, a residual. */
EZ_INTERNAL int32_t ez_gpu_op_add(ez_gpu_cmd *c, ez_gpu_buf *x, uint32_t x_off, ez_gpu_buf *y, uint32_t y_off,
                                  uint32_t n, int accumulate);
/* The same with y_off grown, at run time, by word step_word of the uint32
 * buffer `step` (the cache row of a replayed step); the caller keeps that
 * word within y. */
EZ_INTERNAL int32_t ez_gpu_op_add_at(ez_gpu_cmd *c, ez_gpu_buf *x, uint32_t x_off, ez_gpu_buf *y, uint32_t y_off,
                                     uint32_t n, int accumulate, ez_gpu_buf *step, uint32_t step_word);
/* The rows of a batch into the cache: y[st[dst_word] + i] = x[i] for i in
 * [st[row0_word] * row_len, n_rows * row_len), st the uint32 words of
 * `step`, read at run time: rows before row0 (a bucket's padding) are not
 * copied, and dst_word holds the element offset where row 0 would go
 * (modulo 2^32, so it may lie before y's start when row0 > 0); the caller
 * keeps the copied rows within y. */
EZ_INTERNAL int32_t ez_gpu_op_copy_rows(ez_gpu_cmd *c, ez_gpu_buf *x, ez_gpu_buf *y, uint32_t n_rows,
                                        uint32_t row_len, ez_gpu_buf *step, uint32_t dst_word, uint32_t row0_word);
/* x[i] = cap * tanh(x[i] / cap), i < n; cap > 0. */
EZ_INTERNAL int32_t ez_gpu_op_softcap(ez_gpu_cmd *c, ez_gpu_buf *x, uint32_t n, float cap);
/* Each of n_rows rows of n in place: softmax. */
EZ_INTERNAL int32_t ez_gpu_op_softmax(ez_gpu_cmd *c, ez_gpu_buf *x, uint32_t n, uint32_t n_rows);
/* out[0] = the first index of the largest of x[0..n), as a uint32, in two
 * dispatches (partial maxima over many workgroups, then one); scratch holds
 * ez_gpu_argmax_scratch_words(n) words. */
EZ_INTERNAL int32_t ez_gpu_op_argmax(ez_gpu_cmd *c, ez_gpu_buf *x, uint32_t n, ez_gpu_buf *scratch, ez_gpu_buf *out);
EZ_INTERNAL uint32_t ez_gpu_argmax_scratch_words(uint32_t n);

/* One query token over n_kv cached positions from row kv_first (a sliding
 * window's start). q: [n_head, head_dim]; k, v: rows [kv_first, kv_first +
 * n_kv) of [n_head_kv, head_dim] in F32 or F16 (kv_type), rows kv_stride
 * elements apart; query head h reads kv head h / (n_head / n_head_kv);
 * scores scaled by `scale`; out: [n_head, head_dim]; head_dim <= 512;
 * scratch holds ez_gpu_attn_scratch_floats(a) floats: a counter per head,
 * which must be 0 before the first run (ez_gpu_attn_scratch_reset) and
 * which every run leaves 0, then the chunks' partials. Split over the
 * cache: chunks of 64 positions per workgroup, the last of a head's chunks
 * to finish merging them (one dispatch). With `step` set, kv_first and n_kv are read at run
 * time from its words step_word and step_word + 1 (a replayed step), and
 * the struct's n_kv is their largest sum (what the buffers must hold). */
typedef struct {
    uint32_t n_head, n_head_kv, head_dim, n_kv, kv_stride;
    uint32_t kv_type;   /* EZ_TYPE_F32 or EZ_TYPE_F16 */
    float scale;
    uint32_t kv_first;
    ez_gpu_buf *step;   /* NULL: kv_first and n_kv as given */
    uint32_t step_word;
} ez_gpu_attn;
EZ_INTERNAL int32_t ez_gpu_op_attention(ez_gpu_cmd *c, const ez_gpu_attn *a, ez_gpu_buf *q, ez_gpu_buf *k,
                                        ez_gpu_buf *v, ez_gpu_buf *out, ez_gpu_buf *scratch);
EZ_INTERNAL uint64_t ez_gpu_attn_scratch_floats(const ez_gpu_attn *a);
/* Sets the n_head counters at the start of an attention scratch to 0. */
EZ_INTERNAL int32_t ez_gpu_attn_scratch_reset(ez_gpu_buf *scratch, uint32_t n_head);

/* Causal attention of a batch (the prompt pass) over an F32 cache that
 * already holds the batch's keys and values: q, out [n_tok, n_head,
 * head_dim]; batch row t is at position pos = (int32) word pos_word of
 * `step` + t and attends to cache rows [pos - n_swa + 1 (at least 0), pos]
 * with n_swa > 0, [0, pos] with 0; rows before word row0_word are skipped
 * (a bucket's padding). The other fields as in ez_gpu_attn (kv_type F32,
 * n_kv the cache rows the buffers hold); one workgroup per row and head,
 * one pass over the window (no scratch). */
typedef struct {
    uint32_t n_head, n_head_kv, head_dim, n_kv, kv_stride;
    float scale;
    uint32_t n_swa, n_tok;
    ez_gpu_buf *step;
    uint32_t row0_word, pos_word;
} ez_gpu_attn_batch;
EZ_INTERNAL int32_t ez_gpu_op_attention_batch(ez_gpu_cmd *c, const ez_gpu_attn_batch *a, ez_gpu_buf *q,
                                              ez_gpu_buf *k, ez_gpu_buf *v, ez_gpu_buf *out);

#endif /* EZ_GPU_H */
