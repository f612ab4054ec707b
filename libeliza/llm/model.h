/* Decoder-only language models read from GGUF: hyperparameters and weights,
 * validated against the file before anything runs. The model is immutable
 * once loaded: several sessions (llm/session.h) may share one.
 *
 * model.c reads what every architecture shares (sizes, heads, epsilon, rope,
 * the embedding, output and final norm); each architecture (llm/arch.h, one
 * file each) adds its quirks and its layers' tensors:
 *
 *               llama      qwen2      qwen3      gemma3
 *   rope        normal     neox       neox       neox
 *   q/k/v bias  optional   yes        no         no
 *   q/k norm    -          -          yes        yes
 *   post norms  -          -          -          after attention and FFN
 *   FFN gate    SiLU       SiLU       SiLU       GELU (tanh)
 *   embedding   x 1        x 1        x 1        x sqrt(n_embd)
 *   attention   global     global     global     sliding window on local
 *                                                layers, own rope base
 *
 *               phi3       gemma2     granite    smollm3    olmo2
 *   rope        neox,      neox       normal     normal,    neox
 *               partial,                         none on
 *               LongRoPE                         every 4th
 *   q/k norm    -          -          -          -          whole rows
 *   norms       pre        pre + post pre        pre        post only
 *   FFN gate    SiLU       GELU       SiLU       SiLU       SiLU
 *   scales      -          embedding, attention, -          -
 *                          softcaps   embedding,
 *                                     residual,
 *                                     logits
 *   matrices    fused qkv,
 *               gate+up
 *
 * Tensor names and metadata keys are those llama.cpp's convert_hf_to_gguf.py
 * writes (docs/llm.md lists them). Matrices stay in the mapping in their
 * stored type; the small vectors (norm weights, biases) are copied to F32.
 *
 * Shapes are written [rows, cols] in the row-major sense: a matrix
 * [n_out, n_in] has n_out rows of n_in elements, GGUF ne = {n_in, n_out}, and
 * computes y[n_out] = W x[n_in]. */
#ifndef EZ_LLM_MODEL_H
#define EZ_LLM_MODEL_H

#include "core/common.h"
#include "core/gguf.h"

typedef struct ez_llm_arch_def ez_llm_arch_def;

/* A weight matrix in the mapping: n_rows rows of n_cols elements of `type`. */
typedef struct {
    const char *name;       /* GGUF tensor name (owned by the gguf) */
    uint32_t type;          /* ez_type, with kernels in this build */
    int64_t n_rows;         /* outputs */
    int64_t n_cols;         /* inputs */
    size_t row_bytes;
    const uint8_t *data;    /* n_rows * row_bytes bytes */
} ez_llm_matrix;

typedef struct {
    const char *arch_name;     /* "gemma3", ... (static storage) */
    int32_t n_vocab;           /* rows of the output projection */
    int32_t n_ctx_train;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_ff;
    int32_t n_head;
    int32_t n_head_kv;         /* divides n_head (grouped-query attention) */
    int32_t head_dim;          /* of queries and keys */
    int32_t head_dim_v;        /* of values; equal to head_dim in all four */
    int32_t n_rot;             /* rotated dimensions of each head (even, <= head_dim) */
    float norm_eps;            /* RMSNorm epsilon */
    float rope_base;           /* global layers */
    float rope_base_swa;       /* sliding-window layers (gemma3) */
    float rope_freq_scale;     /* 1 / linear scaling factor (global layers) */
    int rope_neox;             /* rotate (i, i + n_rot/2) pairs, else (2i, 2i+1) */
    int32_t n_swa;             /* sliding window in tokens, 0 = none */
    float attn_scale;          /* multiplies q.k */
    float embd_scale;          /* multiplies the token embedding */
    float final_softcap;       /* logits = c * tanh(logits / c); 0 = off */
    int ffn_gelu;              /* gate activation: 1 GELU-tanh, 0 SiLU */
    /* Mamba2 mixer (falcon-h1; all 0 elsewhere): llm/ssm.h */
    int32_t ssm_d_conv;        /* K: conv window (ssm.conv_kernel) */
    int32_t ssm_d_inner;       /* d_inner = n_head * head_dim (ssm.inner_size) */
    int32_t ssm_d_state;       /* N (ssm.state_size) */
    int32_t ssm_n_head;        /* H (ssm.time_step_rank) */
    int32_t ssm_n_group;       /* G (ssm.group_count), divides H */
    int32_t head_dim_swa;      /* head size of sliding layers (gemma4); head_dim elsewhere */
    int32_t n_rot_swa;         /* rotated dims of sliding layers; n_rot elsewhere */
    int32_t n_embd_per_layer;  /* per-layer embedding width (gemma4), 0 = none */
    int32_t n_kv_shared;       /* the last n_kv_shared layers read earlier layers' K/V (gemma4) */
    int32_t n_embd_out;        /* a drafter's target hidden size (gemma4-assistant), 0 = n_embd */

    /* Rope scaling beyond linear (global layers), as llama.cpp computes it:
     * cos and sin are multiplied by rope_mscale; YaRN (rope_ext_factor > 0)
     * blends interpolated and extrapolated angles over the dims between
     * yarn_corr[0] and yarn_corr[1]; LongRoPE (phi3) divides each frequency
     * by a factor, long or short by the session's context (ez_llm_fwd). */
    int rope_scaling;          /* EZ_ROPE_SCALING_* */
    float rope_mscale;         /* 1 = none */
    float rope_ext_factor;     /* YaRN: 1 unless the file says otherwise; 0 = off */
    float yarn_corr[2];        /* YaRN: first and last dims of the ramp */
    int32_t n_ctx_orig;        /* YaRN, LongRoPE: the context trained at */

    float attn_softcap;        /* gemma2: scores = c * tanh(scores / c); 0 = off */
    float residual_scale;      /* granite: x += o * residual_scale; 1 elsewhere */
    float logit_scale;         /* granite: logits / logit_scale; 1 elsewhere */
} ez_llm_hparams;

/* rope.scaling.type. */
enum { EZ_ROPE_SCALING_NONE = 0, EZ_ROPE_SCALING_LINEAR, EZ_ROPE_SCALING_YARN, EZ_ROPE_SCALING_LONGROPE };

typedef struct {
    int is_swa;                 /* sliding-window (local) attention */
    int no_rope;                /* attends without rope (smollm3's every 4th layer) */
    int kv_alias;               /* >= 0: reads that earlier layer's keys and values (kv.h); -1: its own */
    size_t state_bytes;         /* recurrent state the layer keeps in the cache, 0 for none */
    float rope_base;            /* this layer's base */
    float rope_freq_scale;

    const float *attn_norm;     /* [n_embd] */
    ez_llm_matrix wq;           /* [n_head * head_dim, n_embd] */
    ez_llm_matrix wk;           /* [n_head_kv * head_dim, n_embd] */
    ez_llm_matrix wv;           /* [n_head_kv * head_dim_v, n_embd] */
    const float *bq, *bk, *bv;  /* [rows of wq/wk/wv] or NULL */
    const float *q_norm;        /* [head_dim] per-head RMSNorm (olmo2: [n_head * head_dim], the whole row), or NULL */
    const float *k_norm;        /* [head_dim] (olmo2: [n_head_kv * head_dim]) or NULL */
    ez_llm_matrix wo;           /* [n_embd, n_head * head_dim_v] */
    const float *bo;            /* [n_embd] or NULL */
    const float *post_attn_norm; /* [n_embd] (gemma3) or NULL */

    const float *ffn_norm;      /* [n_embd] */
    ez_llm_matrix ffn_gate;     /* [n_ff, n_embd] */
    ez_llm_matrix ffn_up;       /* [n_ff, n_embd] */
    ez_llm_matrix ffn_down;     /* [n_embd, n_ff] */
    const float *b_gate, *b_up, *b_down; /* or NULL */
    const float *post_ffw_norm; /* [n_embd] (gemma3) or NULL */

    /* Mamba2 mixer (falcon-h1), C = d_inner + 2 G N conv channels */
    ez_llm_matrix ssm_in;       /* [d_inner + C + H, n_embd]: z | xBC | dt */
    const float *ssm_conv1d;    /* [C][K], window[0] meets the oldest frame */
    const float *ssm_conv1d_b;  /* [C] or NULL */
    const float *ssm_dt_b;      /* [H] */
    const float *ssm_a;         /* [H], A = -exp(A_log) */
    const float *ssm_d;         /* [H] */
    const float *ssm_norm;      /* [G][d_inner / G] grouped RMSNorm after the gate, or NULL */
    ez_llm_matrix ssm_out;      /* [n_embd, d_inner] */
    int32_t head_dim;           /* of this layer's queries, keys and values */
    ez_llm_matrix ple_gate;     /* [n_embd_per_layer, n_embd] (gemma4 per-layer input) or no data */
    ez_llm_matrix ple_proj;     /* [n_embd, n_embd_per_layer] */
    const float *ple_post_norm; /* [n_embd] */
    float out_scale;            /* multiplies the layer's output (gemma4 layer_scalar); 1 */
} ez_llm_layer;

typedef struct {
    ez_llm_hparams hp;
    const ez_llm_arch_def *arch;
    ez_gguf *gguf;              /* owns the mapping every matrix points into */
    ez_llm_matrix tok_embd;     /* [n_vocab_embd, n_embd] */
    const float *output_norm;   /* [n_embd] */
    ez_llm_matrix output;       /* [n_vocab, n_embd]; tok_embd when tied */
    const float *output_bias;   /* [n_vocab] or NULL */
    const float *rope_factors;  /* [n_rot / 2] frequency divisors (llama 3), or NULL */
    const float *rope_factors_long, *rope_factors_short; /* [n_rot / 2] (phi3 LongRoPE), or NULL */
    int tied_output;
    ez_llm_layer *layers;       /* [n_layer] */
    /* gemma4's per-layer embeddings: a table and a projection of the
     * embedding, [n_layer * n_embd_per_layer] per token; no data without. */
    ez_llm_matrix ple_embd;     /* [n_vocab_embd, n_layer * n_embd_per_layer] */
    ez_llm_matrix ple_model_proj; /* [n_layer * n_embd_per_layer, n_embd] */
    const float *ple_proj_norm; /* [n_embd_per_layer] */
    /* gemma4-assistant (an MTP drafter): projections between the target's
     * width n_embd_out and its own, and the masked embedding (or none). */
    ez_llm_matrix nextn_pre;    /* [n_embd, 2 * n_embd_out] */
    ez_llm_matrix nextn_post;   /* [n_embd_out, n_embd] */
    ez_llm_matrix centroids;    /* [n_centroids, n_embd] or no data */
    const int32_t *token_order; /* [n_vocab]: the tokens of cluster c are token_order[c * n_vocab / n_centroids ..] */
    int32_t centroid_top_k;     /* clusters whose tokens get logits */
    void **allocs;              /* own every `const float *` above */
    size_t n_allocs, cap_allocs;
} ez_llm_model;

/* Takes ownership of `g` (closed by ez_llm_model_free, also on failure).
 * ELIZA_E_UNSUPPORTED for an architecture or type this build lacks,
 * ELIZA_E_FORMAT for missing keys/tensors or shapes that contradict the
 * hyperparameters, ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_llm_model_load(ez_gguf *g, ez_llm_model **out);

/* The general.architecture values ez_llm_model_load accepts: i < n. */
EZ_INTERNAL size_t ez_llm_n_archs(void);
EZ_INTERNAL const char *ez_llm_arch_name(size_t i);
EZ_INTERNAL void ez_llm_model_free(ez_llm_model *m);

/* ---- for the architectures' loaders (llm/arch_<name>.c) ----------------------------- */

/* Metadata keys of one architecture: "<arch>.<suffix>". */
typedef struct {
    const ez_gguf *g;
    const char *arch;
    char key[160];
} ez_llm_keys;

EZ_INTERNAL const char *ez_llm_key(ez_llm_keys *k, const char *suffix);
/* A u32 key in [lo, hi]: ELIZA_E_FORMAT when missing or out of range. */
EZ_INTERNAL int32_t ez_llm_key_u32(ez_llm_keys *k, const char *suffix, uint32_t lo, uint32_t hi, int32_t *out);
/* The same; an absent key keeps *out. */
EZ_INTERNAL int32_t ez_llm_key_opt_u32(ez_llm_keys *k, const char *suffix, uint32_t lo, uint32_t hi, int32_t *out);
/* A finite f32 key; an absent key keeps *out. */
EZ_INTERNAL int32_t ez_llm_key_opt_f32(ez_llm_keys *k, const char *suffix, float *out);

/* A matrix of n_rows x n_cols (GGUF ne = {n_cols, n_rows}). n_rows < 0
 * accepts any row count (the vocabulary). Absent and optional: data NULL. */
EZ_INTERNAL int32_t ez_llm_get_matrix(ez_llm_model *m, const char *name, int64_t n_rows, int64_t n_cols, int required,
                                      ez_llm_matrix *out);
/* A vector of n elements, dequantized to F32 and owned by the model; NULL
 * when absent and optional. */
EZ_INTERNAL int32_t ez_llm_get_vector(ez_llm_model *m, const char *name, int64_t n, int required, const float **out);
/* A small tensor of ne = {ne0, ne1} (ne1 = 1 also accepts a vector),
 * dequantized to F32 [ne1][ne0] and owned by the model, checked finite;
 * NULL when absent and optional. */
EZ_INTERNAL int32_t ez_llm_get_array(ez_llm_model *m, const char *name, int64_t ne0, int64_t ne1, int required,
                                     const float **out);
/* bytes of memory owned (and freed) by the model; NULL with ELIZA_E_NOMEM set. */
EZ_INTERNAL void *ez_llm_model_alloc(ez_llm_model *m, size_t bytes);
/* "blk.<il>.<what>" in buf. */
EZ_INTERNAL const char *ez_llm_blk(char *buf, size_t cap, int il, const char *what);

#endif /* EZ_LLM_MODEL_H */
