/* One decode step on the GPU, in the order of the CPU blocks (llm/arch_gemma3.c, llm/arch_qwen3.c):
 *
 *   x = embd(token) * embd_scale                         (on the host: one row)
 *   per layer: h = rms_norm(x) ; q, k, v = h Wq, h Wk, h Wv
 *              q, k = per-head rms_norm (q/k norms) ; rope(q, k) ; cache k, v
 *              a = attention(q, cache window) Wo ; a = post_attn_norm(a) ; x += a
 *              h = rms_norm(x) ; f = act(h Wgate) * (h Wup) ; f = f Wdown
 *              f = post_ffw_norm(f) ; x += f
 *   logits = rms_norm(x) Wout (+ softcap) ; best = argmax(logits)
 *
 * The pass is recorded once, at create, and replayed for every token: what
 * moves with the position comes through host-visible buffers written before
 * each run, the input row, the rope angles (ez_rope_angles on the host, per
 * layer base, as the CPU does) and the step words (the cache row, each
 * attention window).
 *
 * A prompt of several tokens runs the same blocks on a batch of rows
 * instead (the prompt pass): matrix-matrix products, the batched qk_rope,
 * copy into the cache and causal attention, one recording per bucket of
 * row counts (BUCKETS, at most n_batch rows), each replayed for any count
 * up to its size: the tokens fill the bucket's last rows, the rows before
 * (padding) are skipped by the kernels that write the cache or would cost
 * time, so the last token is always the bucket's last row, whose logits
 * end the pass. */
#include "gpu_step.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/platform.h"
#include "core/quant.h"
#include "ops.h"

typedef struct {
    ez_gpu_matrix wq, wk, wv, wo, gate, up, down;
    /* gate and up as one paired matrix (ez_gpu_matrix_upload_pair) where
     * their types agree, gate_up.paired set and gate, up left empty. */
    ez_gpu_matrix gate_up;
    ez_gpu_buf *attn_norm, *q_norm, *k_norm, *post_attn_norm, *ffn_norm, *post_ffw_norm;
    ez_gpu_buf *k_cache, *v_cache;   /* [n_ctx][n_head_kv * head_dim] F32 */
} gpu_layer;

struct ez_llm_gpu {
    const ez_llm_model *m;
    ez_gpu *g;
    int32_t n_ctx;
    gpu_layer *layers;
    ez_gpu_matrix output;
    ez_gpu_buf *output_norm;
    ez_gpu_buf *x;          /* [n_embd]: the residual stream */
    ez_gpu_buf *h, *o;      /* [n_embd] */
    ez_gpu_buf *q, *k, *att; /* [n_head * head_dim], [n_head_kv * head_dim], [n_head * head_dim] */
    ez_gpu_buf *f, *u;      /* [n_ff] */
    ez_gpu_buf *scores;     /* attention's counters and per-chunk partials (ez_gpu_attn_scratch_floats) */
    ez_gpu_buf *argmax_part; /* the argmax's partial maxima */
    ez_gpu_buf *angles;     /* [n_layer * n_rot] */
    ez_gpu_buf *step;       /* uint32 STEP_WORDS */
    ez_gpu_buf *logits;     /* [n_vocab] */
    /* Host-visible: what the host writes before each run (the input row, the
     * angles, the step words), copied into the device-local buffers above
     * first thing in the pass, so no kernel reads host memory; the greedy
     * choice (4 bytes) and the logits when asked for. */
    ez_gpu_buf *in_x, *in_angles, *in_step, *best, *out_logits;
    ez_gpu_cmd *cmd;        /* the recorded pass */
    ez_gpu_cmd *read_cmd;   /* logits -> out_logits */
    float *embd_row;        /* [n_embd] */
    float *cs;              /* [n_layer * n_rot] */
    ez_gpu *own_g;          /* g when the step opened it (ez_llm_gpu_open) */
    /* The prompt pass: activations of n_batch rows, their host-visible
     * inputs, one recording per bucket (made on first use). */
    int32_t n_batch;
    ez_gpu_buf *bx, *bh, *bo;    /* [n_batch, n_embd] */
    ez_gpu_buf *bq, *batt;       /* [n_batch, n_head * head_dim] */
    ez_gpu_buf *bk, *bv;         /* [n_batch, n_head_kv * head_dim] */
    ez_gpu_buf *bf, *bu;         /* [n_batch, n_ff]; bf [n_batch, 2 n_ff] where a layer is paired */
    ez_gpu_buf *b_angles, *in_b_angles; /* [n_rope][n_batch][n_rot] */
    ez_gpu_buf *b_step, *in_b_step;     /* uint32 BATCH_WORDS */
    ez_gpu_buf *in_bx;           /* [n_batch, n_embd] */
    ez_gpu_cmd *batch_cmd[4];    /* per BUCKETS entry */
    ez_gpu_cmd *last_batch;      /* the last prompt pass run */
    float *b_cs;                 /* [n_rope][n_batch][n_rot] */
    float *b_embd;               /* [n_batch, n_embd] */
    int32_t n_rope;              /* distinct (rope base, frequency scale) pairs of the layers */
    int32_t *rope_of_layer;      /* [n_layer]: which pair */
};

/* Row counts of the prompt pass's recordings (each held to n_batch). */
static const int32_t BUCKETS[4] = {16, 64, 256, 512};
#define MAX_BATCH 512

/* The prompt pass's step words: the bucket's first real row (row0), the
 * position of row 0 (pos0 - row0, as an int32), and the cache element
 * offset where row 0's key / value row would go (modulo 2^32). */
enum { BATCH_ROW0 = 0, BATCH_POS = 1, BATCH_CACHE = 2, BATCH_WORDS = 3 };

/* The step words: the cache row's first element, then (first row, rows)
 * of the global and of the sliding-window attention. */
enum { STEP_CACHE_ROW = 0, STEP_GLOBAL = 1, STEP_SWA = 3, STEP_WORDS = 5 };

static int32_t record_pass(ez_llm_gpu *s);

static int32_t upload_vec(ez_gpu *g, const float *v, int64_t n, ez_gpu_buf **out) {
    int32_t rc;
    *out = NULL;
    if (!v) return ELIZA_OK;
    rc = ez_gpu_buf_create(g, (uint64_t)n * sizeof(float), EZ_GPU_DEVICE_LOCAL, out);
    if (rc == ELIZA_OK) rc = ez_gpu_upload(*out, 0, v, (uint64_t)n * sizeof(float));
    return rc;
}

static int32_t upload_matrix(ez_gpu *g, const ez_llm_matrix *w, ez_gpu_matrix *out) {
    return ez_gpu_matrix_upload(g, w->type, w->n_rows, w->n_cols, w->data, out);
}

/* A layer's gate and up: one paired matrix where their types and shapes
 * agree (one matvec then makes the gated unit), unless
 * $ELIZA_GPU_NO_FUSED_GLU=1; two matrices otherwise. */
static int32_t upload_ffn_in(ez_gpu *g, const ez_llm_layer *L, gpu_layer *G) {
    const ez_llm_matrix *a = &L->ffn_gate, *b = &L->ffn_up;
    int32_t rc;
    if (a->type == b->type && a->n_rows == b->n_rows && a->n_cols == b->n_cols && a->row_bytes == b->row_bytes &&
        !ez_env_flag("ELIZA_GPU_NO_FUSED_GLU"))
        return ez_gpu_matrix_upload_pair(g, a->type, a->n_rows, a->n_cols, a->data, b->data, &G->gate_up);
    if ((rc = upload_matrix(g, a, &G->gate)) != ELIZA_OK) return rc;
    return upload_matrix(g, b, &G->up);
}

static int32_t scratch(ez_gpu *g, int64_t n, ez_gpu_mem mem, ez_gpu_buf **out) {
    return ez_gpu_buf_create(g, (uint64_t)n * sizeof(float), mem, out);
}

/* Floats of attention's scratch for a cache of n_ctx positions. */
static uint64_t attn_scratch(const ez_llm_hparams *hp, int32_t n_ctx) {
    ez_gpu_attn a;
    memset(&a, 0, sizeof a);
    a.n_head = (uint32_t)hp->n_head;
    a.head_dim = (uint32_t)hp->head_dim;
    a.n_kv = (uint32_t)n_ctx;
    return ez_gpu_attn_scratch_floats(&a);
}

static int32_t check_supported(const ez_llm_model *m) {
    static const char *const archs[] = {"llama", "qwen2", "qwen3", "gemma3"};
    const ez_llm_hparams *hp = &m->hp;
    size_t i;
    for (i = 0; i < sizeof archs / sizeof archs[0] && strcmp(hp->arch_name, archs[i]) != 0; i++) {}
    if (i == sizeof archs / sizeof archs[0])
        return ez_fail(ELIZA_E_UNSUPPORTED, "GPU step: no %s block (llama, qwen2, qwen3, gemma3 only)", hp->arch_name);
    if (hp->rope_mscale != 1.0f || hp->rope_ext_factor != 0.0f)
        return ez_fail(ELIZA_E_UNSUPPORTED, "GPU step: %s with YaRN or scaled rope", hp->arch_name);
    if (m->rope_factors || m->output_bias)
        return ez_fail(ELIZA_E_UNSUPPORTED, "GPU step: %s with rope factors or an output bias", m->hp.arch_name);
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const ez_llm_layer *L = &m->layers[il];
        if (L->bq || L->bk || L->bv || L->bo || L->b_gate || L->b_up || L->b_down)
            return ez_fail(ELIZA_E_UNSUPPORTED, "GPU step: %s layer %d has biases", m->hp.arch_name, (int)il);
    }
    if (m->hp.head_dim_v != m->hp.head_dim)
        return ez_fail(ELIZA_E_UNSUPPORTED, "GPU step: value heads of %d, key heads of %d", (int)m->hp.head_dim_v,
                       (int)m->hp.head_dim);
    if (hp->attn_softcap != 0.0f || hp->residual_scale != 1.0f || hp->logit_scale != 1.0f ||
        hp->n_embd_per_layer > 0 || m->rope_factors_long || m->rope_factors_short)
        return ez_fail(ELIZA_E_UNSUPPORTED,
                       "GPU step: %s with attention soft-capping, scaled residuals or logits, per-layer inputs or "
                       "LongRoPE", hp->arch_name);
    for (int32_t il = 0; il < hp->n_layer; il++) {
        const ez_llm_layer *L = &m->layers[il];
        if (L->no_rope || L->kv_alias >= 0 || L->state_bytes || (L->head_dim && L->head_dim != hp->head_dim) ||
            L->out_scale != 1.0f)
            return ez_fail(ELIZA_E_UNSUPPORTED,
                           "GPU step: %s layer %d skips rope, shares another layer's cache, keeps recurrent state, "
                           "has its own head size or scales its output", hp->arch_name, (int)il);
    }
    return ELIZA_OK;
}

static int32_t check_type(const ez_llm_matrix *w) {
    if (ez_gpu_has_matvec(w->type)) return ELIZA_OK;
    return ez_fail(ELIZA_E_UNSUPPORTED, "GPU step: no GPU kernel for %s's type %s", w->name ? w->name : "a matrix",
                   ez_type_traits_of(w->type)->name);
}

/* Every matrix the pass reads has a GPU kernel for its stored type, and
 * the embedding a host dequantizer. */
static int32_t check_types(const ez_llm_model *m) {
    int32_t rc;
    if (!ez_kernels_ref(m->tok_embd.type))
        return ez_fail(ELIZA_E_UNSUPPORTED, "GPU step: no dequantizer for the embedding's type %s",
                       ez_type_traits_of(m->tok_embd.type)->name);
    for (int32_t il = 0; il < m->hp.n_layer; il++) {
        const ez_llm_layer *L = &m->layers[il];
        if ((rc = check_type(&L->wq)) || (rc = check_type(&L->wk)) || (rc = check_type(&L->wv)) ||
            (rc = check_type(&L->wo)) || (rc = check_type(&L->ffn_gate)) || (rc = check_type(&L->ffn_up)) ||
            (rc = check_type(&L->ffn_down)))
            return rc;
    }
    return check_type(&m->output);
}

int32_t ez_llm_gpu_supports(const ez_llm_model *m) {
    const int32_t rc = check_supported(m);
    return rc ? rc : check_types(m);
}

/* The prompt pass's buffers (its recordings come on first use). */
static int32_t create_batch(ez_llm_gpu *s) {
    const ez_llm_hparams *hp = &s->m->hp;
    const int64_t nb = s->n_batch, kv_row = (int64_t)hp->n_head_kv * hp->head_dim;
    const int64_t q_row = (int64_t)hp->n_head * hp->head_dim, n_cs = (int64_t)s->n_rope * nb * hp->n_rot;
    ez_gpu *g = s->g;
    int32_t rc;
    int paired = 0;
    for (int32_t il = 0; il < hp->n_layer; il++) paired |= s->layers[il].gate_up.paired;
    if ((rc = scratch(g, nb * hp->n_embd, EZ_GPU_DEVICE_LOCAL, &s->bx)) ||
        (rc = scratch(g, nb * hp->n_embd, EZ_GPU_DEVICE_LOCAL, &s->bh)) ||
        (rc = scratch(g, nb * hp->n_embd, EZ_GPU_DEVICE_LOCAL, &s->bo)) ||
        (rc = scratch(g, nb * q_row, EZ_GPU_DEVICE_LOCAL, &s->bq)) ||
        (rc = scratch(g, nb * q_row, EZ_GPU_DEVICE_LOCAL, &s->batt)) ||
        (rc = scratch(g, nb * kv_row, EZ_GPU_DEVICE_LOCAL, &s->bk)) ||
        (rc = scratch(g, nb * kv_row, EZ_GPU_DEVICE_LOCAL, &s->bv)) ||
        (rc = scratch(g, (paired ? 2 : 1) * nb * hp->n_ff, EZ_GPU_DEVICE_LOCAL, &s->bf)) ||
        (rc = scratch(g, nb * hp->n_ff, EZ_GPU_DEVICE_LOCAL, &s->bu)) ||
        (rc = scratch(g, n_cs, EZ_GPU_DEVICE_LOCAL, &s->b_angles)) ||
        (rc = scratch(g, n_cs, EZ_GPU_HOST, &s->in_b_angles)) ||
        (rc = scratch(g, BATCH_WORDS, EZ_GPU_DEVICE_LOCAL, &s->b_step)) ||
        (rc = scratch(g, BATCH_WORDS, EZ_GPU_HOST, &s->in_b_step)) ||
        (rc = scratch(g, nb * hp->n_embd, EZ_GPU_HOST, &s->in_bx)))
        return rc;
    return ELIZA_OK;
}

int32_t ez_llm_gpu_create(const ez_llm_model *m, ez_gpu *g, int32_t n_ctx, ez_llm_gpu **out) {
    const ez_llm_hparams *hp = &m->hp;
    const int64_t kv_row = (int64_t)hp->n_head_kv * hp->head_dim, q_row = (int64_t)hp->n_head * hp->head_dim;
    ez_llm_gpu *s;
    int32_t rc;
    *out = NULL;
    if ((rc = ez_llm_gpu_supports(m)) != ELIZA_OK) return rc;
    if (n_ctx < 1) return ez_fail(ELIZA_E_INVALID_ARG, "GPU step: context of %d", (int)n_ctx);
    s = (ez_llm_gpu *)calloc(1, sizeof *s);
    if (!s) return ez_fail(ELIZA_E_NOMEM, "out of memory for the GPU step");
    s->m = m;
    s->g = g;
    s->n_ctx = n_ctx;
    s->layers = (gpu_layer *)calloc((size_t)hp->n_layer, sizeof *s->layers);
    s->embd_row = (float *)malloc((size_t)hp->n_embd * sizeof(float));
    s->cs = (float *)malloc((size_t)hp->n_layer * (size_t)hp->n_rot * sizeof(float));
    s->n_batch = EZ_MIN(n_ctx, MAX_BATCH);
    s->rope_of_layer = (int32_t *)malloc((size_t)hp->n_layer * sizeof(int32_t));
    if (s->rope_of_layer) {
        for (int32_t il = 0; il < hp->n_layer; il++) {
            int32_t j = 0;
            while (j < il && (m->layers[j].rope_base != m->layers[il].rope_base ||
                              m->layers[j].rope_freq_scale != m->layers[il].rope_freq_scale))
                j++;
            s->rope_of_layer[il] = j < il ? s->rope_of_layer[j] : s->n_rope++;
        }
    }
    s->b_cs = (float *)malloc((size_t)s->n_rope * (size_t)s->n_batch * (size_t)hp->n_rot * sizeof(float));
    s->b_embd = (float *)malloc((size_t)s->n_batch * (size_t)hp->n_embd * sizeof(float));
    if (!s->layers || !s->embd_row || !s->cs || !s->rope_of_layer || !s->b_cs || !s->b_embd) {
        ez_llm_gpu_free(s);
        return ez_fail(ELIZA_E_NOMEM, "out of memory for the GPU step");
    }
    rc = ELIZA_OK;
    for (int32_t il = 0; il < hp->n_layer && rc == ELIZA_OK; il++) {
        const ez_llm_layer *L = &m->layers[il];
        gpu_layer *G = &s->layers[il];
        if ((rc = upload_matrix(g, &L->wq, &G->wq)) || (rc = upload_matrix(g, &L->wk, &G->wk)) ||
            (rc = upload_matrix(g, &L->wv, &G->wv)) || (rc = upload_matrix(g, &L->wo, &G->wo)) ||
            (rc = upload_ffn_in(g, L, G)) ||
            (rc = upload_matrix(g, &L->ffn_down, &G->down)) ||
            (rc = upload_vec(g, L->attn_norm, hp->n_embd, &G->attn_norm)) ||
            (rc = upload_vec(g, L->q_norm, hp->head_dim, &G->q_norm)) ||
            (rc = upload_vec(g, L->k_norm, hp->head_dim, &G->k_norm)) ||
            (rc = upload_vec(g, L->post_attn_norm, hp->n_embd, &G->post_attn_norm)) ||
            (rc = upload_vec(g, L->ffn_norm, hp->n_embd, &G->ffn_norm)) ||
            (rc = upload_vec(g, L->post_ffw_norm, hp->n_embd, &G->post_ffw_norm)) ||
            (rc = scratch(g, (int64_t)n_ctx * kv_row, EZ_GPU_DEVICE_LOCAL, &G->k_cache)) ||
            (rc = scratch(g, (int64_t)n_ctx * kv_row, EZ_GPU_DEVICE_LOCAL, &G->v_cache)))
            break;
    }
    if (rc == ELIZA_OK && !((rc = upload_matrix(g, &m->output, &s->output)) ||
                            (rc = upload_vec(g, m->output_norm, hp->n_embd, &s->output_norm)) ||
                            (rc = scratch(g, hp->n_embd, EZ_GPU_DEVICE_LOCAL, &s->x)) ||
                            (rc = scratch(g, hp->n_embd, EZ_GPU_HOST, &s->in_x)) ||
                            (rc = scratch(g, hp->n_embd, EZ_GPU_DEVICE_LOCAL, &s->h)) ||
                            (rc = scratch(g, hp->n_embd, EZ_GPU_DEVICE_LOCAL, &s->o)) ||
                            (rc = scratch(g, q_row, EZ_GPU_DEVICE_LOCAL, &s->q)) ||
                            (rc = scratch(g, kv_row, EZ_GPU_DEVICE_LOCAL, &s->k)) ||
                            (rc = scratch(g, q_row, EZ_GPU_DEVICE_LOCAL, &s->att)) ||
                            (rc = scratch(g, hp->n_ff, EZ_GPU_DEVICE_LOCAL, &s->f)) ||
                            (rc = scratch(g, hp->n_ff, EZ_GPU_DEVICE_LOCAL, &s->u)) ||
                            (rc = scratch(g, (int64_t)attn_scratch(hp, n_ctx), EZ_GPU_DEVICE_LOCAL, &s->scores)) ||
                            (rc = ez_gpu_attn_scratch_reset(s->scores, (uint32_t)hp->n_head)) ||
                            (rc = scratch(g, ez_gpu_argmax_scratch_words((uint32_t)hp->n_vocab), EZ_GPU_DEVICE_LOCAL,
                                          &s->argmax_part)) ||
                            (rc = scratch(g, (int64_t)hp->n_layer * hp->n_rot, EZ_GPU_DEVICE_LOCAL, &s->angles)) ||
                            (rc = scratch(g, (int64_t)hp->n_layer * hp->n_rot, EZ_GPU_HOST, &s->in_angles)) ||
                            (rc = scratch(g, STEP_WORDS, EZ_GPU_DEVICE_LOCAL, &s->step)) ||
                            (rc = scratch(g, STEP_WORDS, EZ_GPU_HOST, &s->in_step)) ||
                            (rc = scratch(g, hp->n_vocab, EZ_GPU_DEVICE_LOCAL, &s->logits)) ||
                            (rc = scratch(g, hp->n_vocab, EZ_GPU_HOST, &s->out_logits)) ||
                            (rc = scratch(g, 1, EZ_GPU_HOST, &s->best)) || (rc = create_batch(s)) ||
                            (rc = record_pass(s)))) {
        *out = s;
        return ELIZA_OK;
    }
    ez_llm_gpu_free(s);
    return rc;
}

void ez_llm_gpu_free(ez_llm_gpu *s) {
    if (!s) return;
    ez_gpu_cmd_free(s->cmd);
    ez_gpu_cmd_free(s->read_cmd);
    for (size_t i = 0; i < sizeof s->batch_cmd / sizeof s->batch_cmd[0]; i++) ez_gpu_cmd_free(s->batch_cmd[i]);
    for (int32_t il = 0; s->layers && il < s->m->hp.n_layer; il++) {
        gpu_layer *G = &s->layers[il];
        ez_gpu_matrix *mats[] = {&G->wq, &G->wk, &G->wv, &G->wo, &G->gate, &G->up, &G->gate_up, &G->down};
        ez_gpu_buf *bufs[] = {G->attn_norm, G->q_norm, G->k_norm, G->post_attn_norm, G->ffn_norm, G->post_ffw_norm,
                              G->k_cache, G->v_cache};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) ez_gpu_matrix_free(mats[i]);
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ez_gpu_buf_free(bufs[i]);
    }
    ez_gpu_matrix_free(&s->output);
    {
        ez_gpu_buf *bufs[] = {s->output_norm, s->x, s->h, s->o, s->q, s->k, s->att, s->f, s->u, s->scores, s->argmax_part,
                              s->angles, s->step, s->logits, s->in_x, s->in_angles, s->in_step, s->best,
                              s->out_logits, s->bx, s->bh, s->bo, s->bq, s->batt, s->bk, s->bv, s->bf, s->bu,
                              s->b_angles, s->in_b_angles, s->b_step, s->in_b_step, s->in_bx};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ez_gpu_buf_free(bufs[i]);
    }
    free(s->layers);
    free(s->rope_of_layer);
    free(s->b_cs);
    free(s->b_embd);
    free(s->embd_row);
    free(s->cs);
    ez_gpu_close(s->own_g);
    free(s);
}

int32_t ez_llm_gpu_open(const ez_llm_model *m, const ez_gpu_params *p, int32_t n_ctx, ez_llm_gpu **out) {
    ez_gpu *g = NULL;
    int32_t rc;
    *out = NULL;
    if ((rc = ez_gpu_open(p, &g))) return rc;
    if ((rc = ez_llm_gpu_create(m, g, n_ctx, out))) {
        ez_gpu_close(g);
        return rc;
    }
    (*out)->own_g = g;
    return ELIZA_OK;
}

const char *ez_llm_gpu_device_name(const ez_llm_gpu *s) { return ez_gpu_info(s->g)->name; }

/* Records one decoder block, for whatever position the step words say: its
 * input norm h = attn_norm(x) is already recorded (by the pass for the
 * first block, by the block before otherwise), and it ends with the next
 * block's (or the output norm) fused into its last residual. */
static int32_t record_block(ez_llm_gpu *s, ez_gpu_cmd *c, int32_t il) {
    const ez_llm_hparams *hp = &s->m->hp;
    const ez_llm_layer *L = &s->m->layers[il];
    gpu_layer *G = &s->layers[il];
    const uint32_t d = (uint32_t)hp->n_embd, hd = (uint32_t)hp->head_dim, nh = (uint32_t)hp->n_head;
    const uint32_t nkv = (uint32_t)hp->n_head_kv, kv_row = nkv * hd, nrot = (uint32_t)hp->n_rot;
    ez_gpu_attn a;
    int32_t rc;
    memset(&a, 0, sizeof a);
    a.n_head = nh;
    a.n_head_kv = nkv;
    a.head_dim = hd;
    a.n_kv = (uint32_t)s->n_ctx;
    a.kv_stride = kv_row;
    a.kv_type = EZ_TYPE_F32;
    a.scale = hp->attn_scale;
    a.step = s->step;
    a.step_word = L->is_swa && hp->n_swa > 0 ? STEP_SWA : STEP_GLOBAL;
    ez_gpu_buf *next_norm = il + 1 < hp->n_layer ? s->layers[il + 1].attn_norm : s->output_norm;
    const ez_gpu_glu act = hp->ffn_gelu ? EZ_GPU_GELU_TANH : EZ_GPU_SILU;
    const ez_gpu_qk qk = {nh, nkv, hd, nrot, hp->rope_neox, (uint32_t)il * nrot, hp->norm_eps,
                          G->q_norm, G->k_norm, s->step, STEP_CACHE_ROW, 1, 0, EZ_GPU_NO_WORD};
    const ez_gpu_mv_rope rope = {hd, nrot, (uint32_t)il * nrot, s->angles};
    /* q, k and v read h alone: they may run at once (so may gate and up
     * where they are two matrices); the value's matvec writes its cache
     * row. Without q / k norms and with GPT-J pairs (llama), q's and k's
     * matvecs do the rope, k's writing its cache row: no qk_rope. */
    const int rope_in_mv = !G->q_norm && !G->k_norm && !hp->rope_neox && !ez_env_flag("ELIZA_GPU_NO_FUSED_ROPE");
    if ((rc = rope_in_mv ? ez_gpu_op_matvec_rope(c, &G->wq, s->h, 0, s->q, 0, NULL, 0, &rope)
                         : ez_gpu_op_matvec(c, &G->wq, s->h, 0, s->q, 0)) ||
        (ez_gpu_cmd_overlap_next(c),
         rc = rope_in_mv ? ez_gpu_op_matvec_rope(c, &G->wk, s->h, 0, G->k_cache, 0, s->step, STEP_CACHE_ROW, &rope)
                         : ez_gpu_op_matvec(c, &G->wk, s->h, 0, s->k, 0)) ||
        (ez_gpu_cmd_overlap_next(c),
         rc = ez_gpu_op_matvec_at(c, &G->wv, s->h, 0, G->v_cache, 0, s->step, STEP_CACHE_ROW)) ||
        (!rope_in_mv && (rc = ez_gpu_op_qk_rope(c, &qk, s->q, s->k, s->angles, G->k_cache))) ||
        (rc = ez_gpu_op_attention(c, &a, s->q, G->k_cache, G->v_cache, s->att, s->scores)) ||
        (rc = ez_gpu_op_matvec(c, &G->wo, s->att, 0, s->o, 0)))
        return rc;
    if ((rc = ez_gpu_op_add_rms_norm(c, s->o, G->post_attn_norm, s->x, G->ffn_norm, s->h, d, 1, hp->norm_eps)))
        return rc;
    if (G->gate_up.paired)
        rc = ez_gpu_op_matvec_glu(c, &G->gate_up, s->h, 0, s->f, 0, act);
    else if (!(rc = ez_gpu_op_matvec(c, &G->gate, s->h, 0, s->f, 0)) &&
             (ez_gpu_cmd_overlap_next(c), !(rc = ez_gpu_op_matvec(c, &G->up, s->h, 0, s->u, 0))))
        rc = ez_gpu_op_glu(c, s->f, s->u, (uint32_t)hp->n_ff, act);
    if (rc != ELIZA_OK || (rc = ez_gpu_op_matvec(c, &G->down, s->f, 0, s->o, 0))) return rc;
    return ez_gpu_op_add_rms_norm(c, s->o, G->post_ffw_norm, s->x, next_norm, s->h, d, 1, hp->norm_eps);
}

static int32_t record_pass(ez_llm_gpu *s) {
    const ez_llm_hparams *hp = &s->m->hp;
    int32_t rc = ez_gpu_cmd_begin(s->g, &s->cmd);
    if (rc == ELIZA_OK && !(rc = ez_gpu_op_copy(s->cmd, s->in_x, 0, s->x, 0, (uint64_t)hp->n_embd * sizeof(float))) &&
        !(rc = ez_gpu_op_copy(s->cmd, s->in_angles, 0, s->angles, 0,
                              (uint64_t)hp->n_layer * hp->n_rot * sizeof(float))))
        rc = ez_gpu_op_copy(s->cmd, s->in_step, 0, s->step, 0, STEP_WORDS * sizeof(uint32_t));
    if (rc == ELIZA_OK)
        rc = ez_gpu_op_rms_norm(s->cmd, s->x, s->layers[0].attn_norm, s->h, (uint32_t)hp->n_embd, 1, hp->norm_eps);
    for (int32_t il = 0; il < hp->n_layer && rc == ELIZA_OK; il++) rc = record_block(s, s->cmd, il);
    if (rc == ELIZA_OK) rc = ez_gpu_op_matvec(s->cmd, &s->output, s->h, 0, s->logits, 0);
    if (rc == ELIZA_OK && hp->final_softcap > 0.0f)
        rc = ez_gpu_op_softcap(s->cmd, s->logits, (uint32_t)hp->n_vocab, hp->final_softcap);
    if (rc == ELIZA_OK) rc = ez_gpu_op_argmax(s->cmd, s->logits, (uint32_t)hp->n_vocab, s->argmax_part, s->best);
    if (rc == ELIZA_OK) rc = ez_gpu_cmd_end(s->cmd);
    if (rc == ELIZA_OK) rc = ez_gpu_cmd_begin(s->g, &s->read_cmd);
    if (rc == ELIZA_OK)
        rc = ez_gpu_op_copy(s->read_cmd, s->logits, 0, s->out_logits, 0, (uint64_t)hp->n_vocab * sizeof(float));
    if (rc == ELIZA_OK) rc = ez_gpu_cmd_end(s->read_cmd);
    return rc;
}

/* One decoder block over nb rows of the prompt pass, as record_block over
 * one: bh holds attn_norm(bx) on entry, the next block's input norm on exit. */
static int32_t record_batch_block(ez_llm_gpu *s, ez_gpu_cmd *c, int32_t il, uint32_t nb) {
    const ez_llm_hparams *hp = &s->m->hp;
    const ez_llm_layer *L = &s->m->layers[il];
    gpu_layer *G = &s->layers[il];
    const uint32_t d = (uint32_t)hp->n_embd, hd = (uint32_t)hp->head_dim, nh = (uint32_t)hp->n_head;
    const uint32_t nkv = (uint32_t)hp->n_head_kv, kv_row = nkv * hd, nrot = (uint32_t)hp->n_rot;
    const uint32_t cs_off = (uint32_t)s->rope_of_layer[il] * (uint32_t)s->n_batch * nrot;
    const ez_gpu_qk qk = {nh, nkv, hd, nrot, hp->rope_neox, cs_off, hp->norm_eps, G->q_norm, G->k_norm,
                          s->b_step, BATCH_CACHE, nb, nrot, BATCH_ROW0};
    const ez_gpu_attn_batch a = {nh, nkv, hd, (uint32_t)s->n_ctx, kv_row, hp->attn_scale,
                                 L->is_swa && hp->n_swa > 0 ? (uint32_t)hp->n_swa : 0u, nb, s->b_step, BATCH_ROW0,
                                 BATCH_POS};
    ez_gpu_buf *next_norm = il + 1 < hp->n_layer ? s->layers[il + 1].attn_norm : s->output_norm;
    ez_gpu_buf *st = s->b_step;
    const ez_gpu_glu act = hp->ffn_gelu ? EZ_GPU_GELU_TANH : EZ_GPU_SILU;
    const uint32_t n_ff = nb * (uint32_t)hp->n_ff;
    int32_t rc;
    if ((rc = ez_gpu_op_matmul(c, &G->wq, s->bh, s->bq, nb, st, BATCH_ROW0)) ||
        (ez_gpu_cmd_overlap_next(c), rc = ez_gpu_op_matmul(c, &G->wk, s->bh, s->bk, nb, st, BATCH_ROW0)) ||
        (ez_gpu_cmd_overlap_next(c), rc = ez_gpu_op_matmul(c, &G->wv, s->bh, s->bv, nb, st, BATCH_ROW0)) ||
        (rc = ez_gpu_op_copy_rows(c, s->bv, G->v_cache, nb, kv_row, st, BATCH_CACHE, BATCH_ROW0)) ||
        (rc = ez_gpu_op_qk_rope(c, &qk, s->bq, s->bk, s->b_angles, G->k_cache)) ||
        (rc = ez_gpu_op_attention_batch(c, &a, s->bq, G->k_cache, G->v_cache, s->batt)) ||
        (rc = ez_gpu_op_matmul(c, &G->wo, s->batt, s->bo, nb, st, BATCH_ROW0)))
        return rc;
    if ((rc = ez_gpu_op_add_rms_norm(c, s->bo, G->post_attn_norm, s->bx, G->ffn_norm, s->bh, d, nb, hp->norm_eps)))
        return rc;
    /* Paired: one matmul makes [nb, 2 n_ff] (gate and up interleaved), the
     * gated unit goes to bu; otherwise gate into bf, up into bu, the unit
     * into bf. */
    if (G->gate_up.paired) {
        if ((rc = ez_gpu_op_matmul(c, &G->gate_up, s->bh, s->bf, nb, st, BATCH_ROW0)) ||
            (rc = ez_gpu_op_glu_pairs(c, s->bf, s->bu, n_ff, act)) ||
            (rc = ez_gpu_op_matmul(c, &G->down, s->bu, s->bo, nb, st, BATCH_ROW0)))
            return rc;
    } else if ((rc = ez_gpu_op_matmul(c, &G->gate, s->bh, s->bf, nb, st, BATCH_ROW0)) ||
               (ez_gpu_cmd_overlap_next(c), rc = ez_gpu_op_matmul(c, &G->up, s->bh, s->bu, nb, st, BATCH_ROW0)) ||
               (rc = ez_gpu_op_glu(c, s->bf, s->bu, n_ff, act)) ||
               (rc = ez_gpu_op_matmul(c, &G->down, s->bf, s->bo, nb, st, BATCH_ROW0))) {
        return rc;
    }
    return ez_gpu_op_add_rms_norm(c, s->bo, G->post_ffw_norm, s->bx, next_norm, s->bh, d, nb, hp->norm_eps);
}

/* The prompt pass over a bucket of nb rows: the inputs' copies, every block,
 * then the last row's logits and their argmax into the decode step's
 * logits and best (so ez_llm_gpu_best and the logits readback serve both). */
static int32_t record_batch(ez_llm_gpu *s, uint32_t nb, ez_gpu_cmd **out) {
    const ez_llm_hparams *hp = &s->m->hp;
    const uint32_t d = (uint32_t)hp->n_embd;
    ez_gpu_cmd *c = NULL;
    int32_t rc = ez_gpu_cmd_begin(s->g, &c);
    if (rc == ELIZA_OK && !(rc = ez_gpu_op_copy(c, s->in_bx, 0, s->bx, 0, (uint64_t)nb * d * sizeof(float))) &&
        !(rc = ez_gpu_op_copy(c, s->in_b_angles, 0, s->b_angles, 0, ez_gpu_buf_size(s->in_b_angles))))
        rc = ez_gpu_op_copy(c, s->in_b_step, 0, s->b_step, 0, BATCH_WORDS * sizeof(uint32_t));
    if (rc == ELIZA_OK) rc = ez_gpu_op_rms_norm(c, s->bx, s->layers[0].attn_norm, s->bh, d, nb, hp->norm_eps);
    for (int32_t il = 0; il < hp->n_layer && rc == ELIZA_OK; il++) rc = record_batch_block(s, c, il, nb);
    if (rc == ELIZA_OK) rc = ez_gpu_op_matvec(c, &s->output, s->bh, (nb - 1) * d, s->logits, 0);
    if (rc == ELIZA_OK && hp->final_softcap > 0.0f)
        rc = ez_gpu_op_softcap(c, s->logits, (uint32_t)hp->n_vocab, hp->final_softcap);
    if (rc == ELIZA_OK) rc = ez_gpu_op_argmax(c, s->logits, (uint32_t)hp->n_vocab, s->argmax_part, s->best);
    if (rc == ELIZA_OK) rc = ez_gpu_cmd_end(c);
    if (rc != ELIZA_OK) {
        ez_gpu_cmd_free(c);
        return rc;
    }
    *out = c;
    return ELIZA_OK;
}

/* The embedding row of `token`, scaled as the model says, into dst. */
static void embed(const ez_llm_model *m, int32_t token, float *dst) {
    const ez_llm_hparams *hp = &m->hp;
    ez_kernels_ref(m->tok_embd.type)->dequant(m->tok_embd.data + (size_t)token * m->tok_embd.row_bytes, dst, hp->n_embd);
    if (hp->embd_scale != 1.0f)
        for (int32_t i = 0; i < hp->n_embd; i++) dst[i] *= hp->embd_scale;
}

/* tokens[0..n) at positions pos0 .. in one prompt pass, n <= n_batch: the
 * smallest bucket that holds them, the tokens in its last n rows. */
static int32_t run_batch(ez_llm_gpu *s, const int32_t *tokens, int32_t n, int32_t pos0) {
    const ez_llm_model *m = s->m;
    const ez_llm_hparams *hp = &m->hp;
    const size_t d = (size_t)hp->n_embd, nrot = (size_t)hp->n_rot, nbatch = (size_t)s->n_batch;
    int k = 0;
    while (EZ_MIN(BUCKETS[k], s->n_batch) < n) k++;
    const int32_t nb = EZ_MIN(BUCKETS[k], s->n_batch), row0 = nb - n;
    const uint32_t words[BATCH_WORDS] = {(uint32_t)row0, (uint32_t)(pos0 - row0),
                                         (uint32_t)(pos0 - row0) * (uint32_t)(hp->n_head_kv * hp->head_dim)};
    int32_t rc;
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->tok_embd.n_rows)
            return ez_fail(ELIZA_E_INVALID_ARG, "token %d outside the embedding table (%lld rows)", (int)tokens[i],
                           (long long)m->tok_embd.n_rows);
    if (!s->batch_cmd[k] && (rc = record_batch(s, (uint32_t)nb, &s->batch_cmd[k]))) return rc;
    memset(s->b_embd, 0, (size_t)row0 * d * sizeof(float));
    for (int32_t i = 0; i < n; i++) embed(m, tokens[i], s->b_embd + (size_t)(row0 + i) * d);
    for (int32_t r = 0; r < s->n_rope; r++) {
        int32_t il = 0;
        while (s->rope_of_layer[il] != r) il++;
        for (int32_t i = 0; i < n; i++)
            ez_rope_angles(s->b_cs + ((size_t)r * nbatch + (size_t)(row0 + i)) * nrot, pos0 + i, hp->n_rot,
                           m->layers[il].rope_base, m->layers[il].rope_freq_scale, NULL);
    }
    if ((rc = ez_gpu_upload(s->in_bx, 0, s->b_embd, (uint64_t)nb * d * sizeof(float))) ||
        (rc = ez_gpu_upload(s->in_b_angles, 0, s->b_cs, (uint64_t)s->n_rope * nbatch * nrot * sizeof(float))) ||
        (rc = ez_gpu_upload(s->in_b_step, 0, words, sizeof words)))
        return rc;
    s->last_batch = s->batch_cmd[k];
    return ez_gpu_cmd_run(s->batch_cmd[k]);
}

int32_t ez_llm_gpu_step(ez_llm_gpu *s, int32_t token, int32_t pos, float *logits, int32_t *best) {
    const ez_llm_model *m = s->m;
    const ez_llm_hparams *hp = &m->hp;
    const int32_t swa_first = hp->n_swa > 0 ? EZ_MAX(0, pos - hp->n_swa + 1) : 0;
    uint32_t words[STEP_WORDS];
    int32_t rc;
    if (token < 0 || token >= m->tok_embd.n_rows)
        return ez_fail(ELIZA_E_INVALID_ARG, "token %d outside the embedding table (%lld rows)", (int)token,
                       (long long)m->tok_embd.n_rows);
    if (pos < 0 || pos >= s->n_ctx)
        return ez_fail(ELIZA_E_CONTEXT_FULL, "GPU step at position %d of a %d-position cache", (int)pos, (int)s->n_ctx);
    embed(m, token, s->embd_row);
    for (int32_t il = 0; il < hp->n_layer; il++)
        ez_rope_angles(s->cs + (size_t)il * hp->n_rot, pos, hp->n_rot, m->layers[il].rope_base,
                       m->layers[il].rope_freq_scale, NULL);
    words[STEP_CACHE_ROW] = (uint32_t)pos * (uint32_t)(hp->n_head_kv * hp->head_dim);
    words[STEP_GLOBAL] = 0;
    words[STEP_GLOBAL + 1] = (uint32_t)pos + 1;
    words[STEP_SWA] = (uint32_t)swa_first;
    words[STEP_SWA + 1] = (uint32_t)(pos - swa_first + 1);
    if ((rc = ez_gpu_upload(s->in_x, 0, s->embd_row, (uint64_t)hp->n_embd * sizeof(float))) ||
        (rc = ez_gpu_upload(s->in_angles, 0, s->cs, (uint64_t)hp->n_layer * hp->n_rot * sizeof(float))) ||
        (rc = ez_gpu_upload(s->in_step, 0, words, sizeof words)) || (rc = ez_gpu_cmd_run(s->cmd)))
        return rc;
    if (best) {
        uint32_t b = 0;
        if ((rc = ez_gpu_download(s->best, 0, &b, sizeof b))) return rc;
        *best = (int32_t)b;
    }
    if (!logits) return ELIZA_OK;
    if ((rc = ez_gpu_cmd_run(s->read_cmd))) return rc;
    return ez_gpu_download(s->out_logits, 0, logits, (uint64_t)hp->n_vocab * sizeof(float));
}

int ez_llm_gpu_timings(const ez_llm_gpu *s, double *ms, const char **names, int cap) {
    const int n = ez_gpu_cmd_timings(s->cmd, ms, cap);
    for (int i = 0; i < n && i < cap; i++) names[i] = ez_gpu_cmd_op_name(s->cmd, i);
    return n;
}

int ez_llm_gpu_prompt_timings(const ez_llm_gpu *s, double *ms, const char **names, int cap) {
    const int n = s->last_batch ? ez_gpu_cmd_timings(s->last_batch, ms, cap) : 0;
    for (int i = 0; i < n && i < cap; i++) names[i] = ez_gpu_cmd_op_name(s->last_batch, i);
    return n;
}

int32_t ez_llm_gpu_eval(ez_llm_gpu *s, const int32_t *tokens, int32_t n, int32_t pos0, float *logits, int all_logits,
                        ez_atomic_int *cancel) {
    const size_t n_vocab = (size_t)s->m->hp.n_vocab;
    if (n < 1 || pos0 < 0 || (int64_t)pos0 + n > s->n_ctx)
        return ez_fail(ELIZA_E_CONTEXT_FULL, "%d tokens at position %d do not fit the GPU cache of %d", (int)n,
                       (int)pos0, (int)s->n_ctx);
    if (n > 1 && !all_logits) {
        /* The prompt pass, in pieces of at most n_batch tokens. */
        for (int32_t done = 0; done < n;) {
            const int32_t piece = EZ_MIN(n - done, s->n_batch);
            int32_t rc;
            if (cancel && ez_atomic_int_load(cancel)) return ez_fail(ELIZA_E_CANCELLED, "cancelled");
            if ((rc = run_batch(s, tokens + done, piece, pos0 + done))) return rc;
            done += piece;
        }
        if (!logits) return ELIZA_OK;
        int32_t rc = ez_gpu_cmd_run(s->read_cmd);
        return rc ? rc : ez_gpu_download(s->out_logits, 0, logits, (uint64_t)n_vocab * sizeof(float));
    }
    for (int32_t i = 0; i < n; i++) {
        float *row = logits && all_logits ? logits + (size_t)i * n_vocab : logits && i == n - 1 ? logits : NULL;
        int32_t rc;
        if (cancel && ez_atomic_int_load(cancel)) return ez_fail(ELIZA_E_CANCELLED, "cancelled");
        if ((rc = ez_llm_gpu_step(s, tokens[i], pos0 + i, row, NULL))) return rc;
    }
    return ELIZA_OK;
}

int32_t ez_llm_gpu_best(ez_llm_gpu *s, int32_t *best) {
    uint32_t b = 0;
    const int32_t rc = ez_gpu_download(s->best, 0, &b, sizeof b);
    *best = (int32_t)b;
    return rc;
}

uint64_t ez_llm_gpu_cache_bytes(const ez_llm_gpu *s) {
    return 2u * (uint64_t)s->m->hp.n_layer * (uint64_t)s->n_ctx * (uint64_t)s->m->hp.n_head_kv *
           (uint64_t)s->m->hp.head_dim * sizeof(float);
}
