/* What the segmentation and the embedding model share: reading their GGUF
 * files (checked keys, F32 tensors of an exact shape) and LSTM layers.
 *
 * LSTM weights are kept in the order PyTorch documents (gate blocks i, f, g,
 * o of H rows each); a file says in which order it stores them
 * (`<arch>.lstm.gate_order`, docs/diarization.md) and ez_nn_lstm_load()
 * reorders. Each step of the recurrence is core's LSTM step
 * (core/kernels/lstm.h: scalar reference, AVX2, AVX-512, NEON), which the
 * TTS engine shares. */
#ifndef EZ_DIAR_NN_H
#define EZ_DIAR_NN_H

#include "core/common.h"
#include "core/gguf.h"
#include "core/pool.h"

/* ---- GGUF reading -------------------------------------------------------- */

/* Metadata: core/gguf's ez_gguf_need_* getters. A string key copied into
 * out (NUL-terminated, at most cap - 1 bytes). */
EZ_INTERNAL int32_t ez_nn_key_str(const ez_gguf *g, const char *key, char *out, size_t cap);
/* ELIZA_E_UNSUPPORTED unless general.architecture is `arch` (FORMAT if absent). */
EZ_INTERNAL int32_t ez_nn_check_arch(const ez_gguf *g, const char *arch, const char *what);

/* The F32 tensor `name`, whose shape (outermost first, as numpy writes
 * it) must be dims[0..n_dims) and whose values must be finite, read in
 * place: *out points into g's mapping (g must outlive its use), or, where
 * the file aligns it to less than a float, to a malloc'd copy that *own
 * also holds for the caller to free (*own is NULL otherwise). */
EZ_INTERNAL int32_t ez_nn_tensor_view(const ez_gguf *g, const char *name, int n_dims, const int64_t *dims,
                                      const float **out, float **own);
/* The same checks, and a malloc'd copy: for weights a loader re-lays out. */
EZ_INTERNAL int32_t ez_nn_tensor(const ez_gguf *g, const char *name, int n_dims, const int64_t *dims,
                                 float **out);

/* The copies a model had to make of tensors it otherwise reads in place
 * (ez_nn_tensor_view: a file aligned to less than a float), freed with it. */
#define EZ_NN_MAX_OWNED 16
typedef struct {
    float *p[EZ_NN_MAX_OWNED];
    int n;
} ez_nn_owned;

/* ez_nn_tensor_view, keeping a copy it makes in *owned. */
EZ_INTERNAL int32_t ez_nn_weight(const ez_gguf *g, const char *name, int n_dims, const int64_t *dims,
                                 const float **out, ez_nn_owned *owned);
EZ_INTERNAL void ez_nn_owned_free(ez_nn_owned *owned);

/* A growable buffer kept by a model between calls, so repeated calls do not
 * map and fault in fresh pages each time. */
typedef struct {
    float *data;
    size_t floats;
} ez_nn_arena;

/* At least `floats` floats (contents undefined); NULL with ez_fail on
 * allocation failure. */
EZ_INTERNAL float *ez_nn_arena_get(ez_nn_arena *a, size_t floats, const char *what);
EZ_INTERNAL void ez_nn_arena_free(ez_nn_arena *a);

/* ---- LSTM ------------------------------------------------------------------ */

/* w_ih is read in place from the file's mapping, in the file's gate order:
 * the input projection computes each gate block (or run of consecutive
 * blocks) into its internal place (perm). w_hh is a copy, the only one a
 * layer keeps: the step kernels read it in panels (core/kernels/lstm.h),
 * reordered on the way; each step streams every panel once with h
 * broadcast, where the stored rows would need a horizontal sum per gate row
 * (docs/diarization.md has the figures). */
typedef struct {
    int n_in, H, n_dirs;
    int perm[4];        /* perm[k]: the file's block of internal gate k (i, f, g, o) */
    const float *w_ih;  /* [n_dirs * 4H, n_in], gate blocks in the file's order per direction */
    float *bias;        /* [n_dirs * 4H], b_ih + b_hh, gate blocks i, f, g, o */
    float *w_hh;        /* n_dirs x ez_lstm_panels_floats(H): w_hh of each direction in panels */
    float *own_ih;      /* a copy w_ih points to (a file aligned to less than a float), or NULL */
} ez_nn_lstm;

/* Parses a gate order: four distinct letters of i, f, o and c (or g, the
 * cell candidate). perm[k] = the block index in the file of internal gate k
 * (i, f, g, o). ELIZA_E_FORMAT for anything else. */
EZ_INTERNAL int32_t ez_nn_gate_order(const char *order, int perm[4]);

/* Loads `prefix`.{weight_ih, weight_hh, bias_ih, bias_hh} of shapes
 * [n_dirs, 4H, n_in], [n_dirs, 4H, H], [n_dirs, 4H], [n_dirs, 4H], gate
 * blocks in the file's `gate_order`. g must outlive the layer. */
EZ_INTERNAL int32_t ez_nn_lstm_load(const ez_gguf *g, const char *prefix, const char *gate_order, int n_dirs,
                                    int n_in, int H, ez_nn_lstm *out);
EZ_INTERNAL void ez_nn_lstm_free(ez_nn_lstm *l);

/* xp[rows, n_dirs * 4H] = x[rows, n_in] . w_ih^T, gate blocks i, f, g, o
 * (the bias is added by the recurrence, saving a pass over xp). */
EZ_INTERNAL void ez_nn_lstm_project(const ez_nn_lstm *l, ez_pool *pool, const float *x, int64_t rows,
                                    float *xp);

/* The recurrence over B sequences of T steps, zero initial state. The
 * projected input of sequence b at step t is the row xp + b * xp_bstride +
 * t * xp_tstride (n_dirs * 4H floats, direction d at d * 4H); h of
 * direction d is written to y + b * y_bstride + t * y_tstride + d * H.
 * Direction 1 runs t = T-1 .. 0. Directions and groups of sequences are
 * spread over the pool. ELIZA_E_NOMEM when scratch cannot be allocated. */
EZ_INTERNAL int32_t ez_nn_lstm_recur(const ez_nn_lstm *l, ez_pool *pool, const float *xp, int B, int T,
                                     int64_t xp_bstride, int64_t xp_tstride, float *y, int64_t y_bstride,
                                     int64_t y_tstride);

#endif /* EZ_DIAR_NN_H */
