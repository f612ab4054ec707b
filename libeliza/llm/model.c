/* Loading a decoder-only LLM from GGUF: architecture, hyperparameters,
 * then every tensor checked against them. Conventions that the files do not
 * spell out follow llama.cpp (src/llama-model.cpp, src/models/<arch>.cpp),
 * since that is what wrote and runs these files; each is noted where used. */
#include "model.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "core/error.h"
#include "core/quant.h"

/* Bounds that no real model comes near; they keep every size product below
 * overflow and turn absurd metadata into a clear error. */
#define MAX_EMBD 65536
#define MAX_LAYERS 1024
#define MAX_HEADS 1024
#define MAX_HEAD_DIM 1024
#define MAX_FF (1 << 20)
#define MAX_VOCAB (1 << 24)

/* Every architecture this build runs (arch.h): adding one is its file and a row here. */
static const ez_llm_arch_def *const ARCHS[] = {
    &ez_llm_arch_llama,
    &ez_llm_arch_qwen2,
    &ez_llm_arch_qwen3,
    &ez_llm_arch_gemma3,
    &ez_llm_arch_falcon_h1,
    &ez_llm_arch_gemma4,
    &ez_llm_arch_gemma4_assistant,
    &ez_llm_arch_phi3,
    &ez_llm_arch_gemma2,
    &ez_llm_arch_granite,
    &ez_llm_arch_smollm3,
    &ez_llm_arch_olmo2,
};

size_t ez_llm_n_archs(void) { return sizeof ARCHS / sizeof ARCHS[0]; }
const char *ez_llm_arch_name(size_t i) { return i < ez_llm_n_archs() ? ARCHS[i]->name : NULL; }

/* ---- metadata -------------------------------------------------------------------- */

const char *ez_llm_key(ez_llm_keys *k, const char *suffix) {
    snprintf(k->key, sizeof k->key, "%s.%s", k->arch, suffix);
    return k->key;
}

/* core's checked getters under the architecture's prefix, into the int32
 * fields of ez_llm_hparams (every hi here is at most INT32_MAX). */
int32_t ez_llm_key_u32(ez_llm_keys *k, const char *suffix, uint32_t lo, uint32_t hi, int32_t *out) {
    uint32_t v = 0;
    int32_t rc = ez_gguf_need_u32(k->g, ez_llm_key(k, suffix), lo, hi, &v);
    if (rc == ELIZA_OK) *out = (int32_t)v;
    return rc;
}

int32_t ez_llm_key_opt_u32(ez_llm_keys *k, const char *suffix, uint32_t lo, uint32_t hi, int32_t *out) {
    return ez_gguf_find_kv(k->g, ez_llm_key(k, suffix)) ? ez_llm_key_u32(k, suffix, lo, hi, out) : ELIZA_OK;
}

int32_t ez_llm_key_opt_f32(ez_llm_keys *k, const char *suffix, float *out) {
    return ez_gguf_opt_f32(k->g, ez_llm_key(k, suffix), -FLT_MAX, FLT_MAX, out);
}

static int str_is(ez_str s, const char *lit) {
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.ptr, lit, n) == 0;
}

#define PI 3.14159265358979323846

/* ggml's ggml_rope_yarn_corr_dim: the dimension whose wavelength turns
 * `rotations` times over the original context. */
static double yarn_corr_dim(int n_rot, int32_t n_ctx_orig, float rotations, float base) {
    return n_rot * log((double)n_ctx_orig / ((double)rotations * 2.0 * PI)) / (2.0 * log((double)base));
}

/* rope.scaling.*, as llama.cpp reads them (llama-model.cpp, llama-context.cpp):
 * the type defaults to linear, a factor of 0 or none means 1, and every type
 * may carry rope.scaling.attn_factor (cos/sin scale, phi3's LongRoPE). YaRN
 * (ext_factor 1) blends angles over the dims between the ramp's ends, beta
 * fast 32 and slow 1 rotations over original_context_length, and scales
 * cos/sin by 0.1 ln(factor) + 1 or yarn_attn_factor (llama.cpp 0.3.36
 * ignores the yarn_* keys; they are read here, as transformers honours
 * them). */
static int32_t load_rope_scaling(ez_llm_keys *k, ez_llm_hparams *hp) {
    ez_str type = {"linear", 6};
    float factor = 0.0f, attn_factor = 1.0f, beta_fast = 32.0f, beta_slow = 1.0f, ext = 1.0f, yarn_attn = 0.0f;
    int32_t rc;
    if ((rc = ez_gguf_opt_str(k->g, ez_llm_key(k, "rope.scaling.type"), &type))) return rc;
    if (str_is(type, "none")) hp->rope_scaling = EZ_ROPE_SCALING_NONE;
    else if (str_is(type, "linear")) hp->rope_scaling = EZ_ROPE_SCALING_LINEAR;
    else if (str_is(type, "yarn")) hp->rope_scaling = EZ_ROPE_SCALING_YARN;
    else if (str_is(type, "longrope")) hp->rope_scaling = EZ_ROPE_SCALING_LONGROPE;
    else
        return ez_fail(ELIZA_E_UNSUPPORTED, "rope scaling '%.*s' is not supported (none, linear, yarn, longrope)",
                       (int)EZ_MIN(type.len, 32u), type.ptr);
    hp->n_ctx_orig = hp->n_ctx_train;
    if ((rc = ez_llm_key_opt_f32(k, "rope.scaling.factor", &factor)) ||
        (rc = ez_llm_key_opt_f32(k, "rope.scaling.attn_factor", &attn_factor)) ||
        (rc = ez_llm_key_opt_u32(k, "rope.scaling.original_context_length", 1, INT32_MAX, &hp->n_ctx_orig)) ||
        (rc = ez_llm_key_opt_f32(k, "rope.scaling.yarn_ext_factor", &ext)) ||
        (rc = ez_llm_key_opt_f32(k, "rope.scaling.yarn_beta_fast", &beta_fast)) ||
        (rc = ez_llm_key_opt_f32(k, "rope.scaling.yarn_beta_slow", &beta_slow)) ||
        (rc = ez_llm_key_opt_f32(k, "rope.scaling.yarn_attn_factor", &yarn_attn)))
        return rc;
    if (factor < 0.0f) return ez_fail(ELIZA_E_FORMAT, "rope scaling factor %g is negative", (double)factor);
    if (!(attn_factor > 0.0f)) return ez_fail(ELIZA_E_FORMAT, "rope attn_factor %g is not positive", (double)attn_factor);
    hp->rope_freq_scale = hp->rope_scaling == EZ_ROPE_SCALING_NONE || factor == 0.0f ? 1.0f : 1.0f / factor;
    hp->rope_mscale = attn_factor;
    if (hp->rope_scaling == EZ_ROPE_SCALING_YARN) {
        const float f = 1.0f / hp->rope_freq_scale;
        if (!(ext >= 0.0f && ext <= 1.0f) || !(beta_fast > 0.0f) || !(beta_slow > 0.0f))
            return ez_fail(ELIZA_E_FORMAT, "YaRN ext_factor %g / beta_fast %g / beta_slow %g out of range",
                           (double)ext, (double)beta_fast, (double)beta_slow);
        if (yarn_attn < 0.0f) return ez_fail(ELIZA_E_FORMAT, "YaRN attn_factor %g is negative", (double)yarn_attn);
        hp->rope_ext_factor = ext;
        if (yarn_attn > 0.0f) hp->rope_mscale *= yarn_attn; /* transformers' attention_factor */
        else if (ext != 0.0f && f > 1.0f) hp->rope_mscale *= 0.1f * logf(f) + 1.0f;
        hp->yarn_corr[0] = (float)EZ_MAX(0.0, floor(yarn_corr_dim(hp->n_rot, hp->n_ctx_orig, beta_fast, hp->rope_base)));
        hp->yarn_corr[1] = (float)EZ_MIN((double)hp->n_rot - 1,
                                         ceil(yarn_corr_dim(hp->n_rot, hp->n_ctx_orig, beta_slow, hp->rope_base)));
    }
    return ELIZA_OK;
}

/* The architecture general.architecture names, from ARCHS. */
static int32_t find_arch(const ez_gguf *g, const ez_llm_arch_def **out) {
    ez_str arch;
    int32_t rc;
    if (!ez_gguf_find_kv(g, "general.architecture"))
        return ez_fail(ELIZA_E_FORMAT, "not a model file: 'general.architecture' is missing");
    if ((rc = ez_gguf_get_str(g, "general.architecture", &arch))) return rc;
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++)
        if (str_is(arch, ARCHS[i]->name)) {
            *out = ARCHS[i];
            return ELIZA_OK;
        }
    return ez_fail(ELIZA_E_UNSUPPORTED,
                   "architecture '%.*s' is not a language model this build runs (falcon-h1, gemma2, gemma3, "
                   "gemma4, granite, llama, olmo2, phi3, qwen2, qwen3, smollm3)",
                   (int)EZ_MIN(arch.len, 64u), arch.ptr);
}

/* Context, widths, layers, heads, head sizes and rotated dims, and how
 * they must relate. */
static int32_t load_sizes(ez_llm_keys *k, ez_llm_hparams *hp) {
    int32_t rc, n_embd_head_default;
    if ((rc = ez_llm_key_u32(k, "context_length", 1, INT32_MAX, &hp->n_ctx_train)) ||
        (rc = ez_llm_key_u32(k, "embedding_length", 1, MAX_EMBD, &hp->n_embd)) ||
        (rc = ez_llm_key_u32(k, "block_count", 1, MAX_LAYERS, &hp->n_layer)) ||
        (rc = ez_llm_key_u32(k, "feed_forward_length", 1, MAX_FF, &hp->n_ff)) ||
        (rc = ez_llm_key_u32(k, "attention.head_count", 1, MAX_HEADS, &hp->n_head)))
        return rc;
    hp->n_head_kv = hp->n_head;
    if ((rc = ez_llm_key_opt_u32(k, "attention.head_count_kv", 1, MAX_HEADS, &hp->n_head_kv))) return rc;
    if (hp->n_head % hp->n_head_kv != 0)
        return ez_fail(ELIZA_E_FORMAT, "attention.head_count %d is not a multiple of head_count_kv %d", hp->n_head,
                       hp->n_head_kv);
    /* llama.cpp: head size defaults to n_embd / n_head, rotated dims to the head size. */
    n_embd_head_default = hp->n_embd / hp->n_head;
    hp->head_dim = n_embd_head_default;
    hp->head_dim_v = n_embd_head_default;
    if ((rc = ez_llm_key_opt_u32(k, "attention.key_length", 1, MAX_HEAD_DIM, &hp->head_dim)) ||
        (rc = ez_llm_key_opt_u32(k, "attention.value_length", 1, MAX_HEAD_DIM, &hp->head_dim_v)))
        return rc;
    if (hp->head_dim < 2 || hp->head_dim_v < 1)
        return ez_fail(ELIZA_E_FORMAT, "head size %d (n_embd %d / %d heads) is too small", hp->head_dim, hp->n_embd,
                       hp->n_head);
    if (hp->head_dim_v != hp->head_dim)
        return ez_fail(ELIZA_E_UNSUPPORTED, "key head size %d differs from value head size %d", hp->head_dim,
                       hp->head_dim_v);
    hp->n_rot = hp->head_dim;
    if ((rc = ez_llm_key_opt_u32(k, "rope.dimension_count", 2, (uint32_t)hp->head_dim, &hp->n_rot))) return rc;
    if (hp->n_rot % 2 != 0) return ez_fail(ELIZA_E_FORMAT, "rope.dimension_count %d is odd", hp->n_rot);
    return ELIZA_OK;
}

/* The RMSNorm epsilon, the rope bases and the rope scaling. */
static int32_t load_norm_rope(ez_llm_keys *k, ez_llm_hparams *hp) {
    int32_t rc;
    if ((rc = ez_gguf_need_f32(k->g, ez_llm_key(k, "attention.layer_norm_rms_epsilon"), 0.0f, 1.0f, &hp->norm_eps)))
        return rc;
    if (!(hp->norm_eps < 1.0f))
        return ez_fail(ELIZA_E_FORMAT, "RMSNorm epsilon %g is out of range", (double)hp->norm_eps);
    hp->rope_base = 10000.0f;
    hp->rope_base_swa = 10000.0f; /* llama.cpp's default for gemma3's local layers */
    hp->rope_freq_scale = 1.0f;
    if ((rc = ez_llm_key_opt_f32(k, "rope.freq_base", &hp->rope_base)) ||
        (rc = ez_llm_key_opt_f32(k, "rope.freq_base_swa", &hp->rope_base_swa)))
        return rc;
    if (!(hp->rope_base > 1.0f) || !(hp->rope_base_swa > 1.0f))
        return ez_fail(ELIZA_E_FORMAT, "rope base %g / %g must be above 1", (double)hp->rope_base,
                       (double)hp->rope_base_swa);
    return load_rope_scaling(k, hp);
}

/* What every architecture shares, then the architecture's own values. */
static int32_t load_hparams(const ez_gguf *g, ez_llm_hparams *hp, const ez_llm_arch_def **out_arch) {
    ez_llm_keys k;
    int32_t rc;
    memset(hp, 0, sizeof *hp);
    if ((rc = find_arch(g, out_arch))) return rc;
    hp->arch_name = (*out_arch)->name;
    k.g = g;
    k.arch = hp->arch_name;
    if ((rc = load_sizes(&k, hp)) || (rc = load_norm_rope(&k, hp))) return rc;
    /* The architecture's values: rope layout, activations, scales. */
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->embd_scale = 1.0f;
    hp->residual_scale = 1.0f;
    hp->logit_scale = 1.0f;
    return (*out_arch)->hparams(&k, hp);
}

/* ---- tensors ----------------------------------------------------------------------- */

static int32_t track(ez_llm_model *m, void *p) {
    if (m->n_allocs == m->cap_allocs) {
        size_t cap = m->cap_allocs ? 2 * m->cap_allocs : 64;
        void **a = (void **)realloc(m->allocs, cap * sizeof *a);
        if (!a) {
            free(p);
            return ez_fail(ELIZA_E_NOMEM, "out of memory loading the model");
        }
        m->allocs = a;
        m->cap_allocs = cap;
    }
    m->allocs[m->n_allocs++] = p;
    return ELIZA_OK;
}

static int32_t shape_error(const ez_gguf_tensor *t, int64_t want0, int64_t want1) {
    return ez_fail(ELIZA_E_FORMAT,
                   "tensor '%s' has shape [%" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
                   "], expected [%" PRId64 ", %" PRId64 "] from the hyperparameters",
                   t->name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], want0, want1);
}

int32_t ez_llm_get_matrix(ez_llm_model *m, const char *name, int64_t n_rows, int64_t n_cols, int required,
                          ez_llm_matrix *out) {
    const ez_gguf_tensor *t = ez_gguf_find_tensor(m->gguf, name);
    const ez_type_traits *tr;
    const ez_type_kernels *kw;
    memset(out, 0, sizeof *out);
    if (!t) return required ? ez_fail(ELIZA_E_FORMAT, "tensor '%s' is missing", name) : ELIZA_OK;
    if (t->ne[2] != 1 || t->ne[3] != 1 || t->ne[0] != (uint64_t)n_cols ||
        (n_rows >= 0 && t->ne[1] != (uint64_t)n_rows) || t->ne[1] == 0 || t->ne[1] > MAX_VOCAB)
        return shape_error(t, n_cols, n_rows);
    tr = ez_type_traits_of(t->type);
    kw = ez_kernels(t->type);
    if (!tr || !tr->has_kernels || !kw->dot || !kw->dequant)
        return ez_fail(ELIZA_E_UNSUPPORTED, "tensor '%s': type %s has no kernels in this build", name,
                       tr ? tr->name : "unknown");
    if (tr->vec_dot_type != EZ_TYPE_F32 && !ez_kernels(tr->vec_dot_type)->quant)
        return ez_fail(ELIZA_E_UNSUPPORTED, "tensor '%s': no quantizer for its activations (%s)", name,
                       ez_type_traits_of(tr->vec_dot_type)->name);
    out->name = t->name;
    out->type = t->type;
    out->n_rows = (int64_t)t->ne[1];
    out->n_cols = n_cols;
    out->row_bytes = (size_t)ez_row_bytes(t->type, (uint64_t)n_cols);
    out->data = t->data;
    if (out->row_bytes == 0 || out->row_bytes * (uint64_t)out->n_rows != t->nbytes)
        return ez_fail(ELIZA_E_FORMAT, "tensor '%s': %" PRIu64 " bytes do not hold %" PRId64 " rows of %" PRId64,
                       name, t->nbytes, out->n_rows, n_cols);
    return ELIZA_OK;
}

int32_t ez_llm_get_vector(ez_llm_model *m, const char *name, int64_t n, int required, const float **out) {
    return ez_llm_get_array(m, name, n, 1, required, out);
}

int32_t ez_llm_get_array(ez_llm_model *m, const char *name, int64_t ne0, int64_t ne1, int required,
                         const float **out) {
    const ez_gguf_tensor *t = ez_gguf_find_tensor(m->gguf, name);
    const ez_type_traits *tr;
    const int64_t n = ne0 * ne1;
    float *v;
    int32_t rc;
    *out = NULL;
    if (!t) return required ? ez_fail(ELIZA_E_FORMAT, "tensor '%s' is missing", name) : ELIZA_OK;
    if (t->n_elements != (uint64_t)n || t->ne[0] != (uint64_t)ne0) return shape_error(t, ne0, ne1);
    tr = ez_type_traits_of(t->type);
    if (!tr || !tr->has_kernels || !ez_kernels(t->type)->dequant)
        return ez_fail(ELIZA_E_UNSUPPORTED, "tensor '%s': type %s has no kernels in this build", name,
                       tr ? tr->name : "unknown");
    if (n % tr->block_size != 0)
        return ez_fail(ELIZA_E_FORMAT, "tensor '%s': %" PRId64 " elements are not whole %s blocks", name, n, tr->name);
    v = (float *)malloc(sizeof(float) * (size_t)n);
    if (!v) return ez_fail(ELIZA_E_NOMEM, "out of memory for tensor '%s'", name);
    if ((rc = track(m, v))) return rc;
    ez_kernels(t->type)->dequant(t->data, v, n);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return ez_fail(ELIZA_E_FORMAT, "tensor '%s' holds a non-finite value at %" PRId64, name, i);
    *out = v;
    return ELIZA_OK;
}

void *ez_llm_model_alloc(ez_llm_model *m, size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        ez_fail(ELIZA_E_NOMEM, "out of memory loading the model (%" PRIu64 " bytes)", (uint64_t)bytes);
        return NULL;
    }
    return track(m, p) == ELIZA_OK ? p : NULL;
}

const char *ez_llm_blk(char *buf, size_t cap, int il, const char *what) {
    snprintf(buf, cap, "blk.%d.%s", il, what);
    return buf;
}

int32_t ez_llm_load_std_layer(ez_llm_model *m, int il, const ez_llm_layer_tensors *want) {
    const ez_llm_hparams *hp = &m->hp;
    ez_llm_layer *L = &m->layers[il];
    const int64_t n_embd = hp->n_embd, n_q = (int64_t)hp->n_head * hp->head_dim,
                  n_kv = (int64_t)hp->n_head_kv * hp->head_dim, n_v = (int64_t)hp->n_head_kv * hp->head_dim_v,
                  n_ff = hp->n_ff;
    const int qk_norm = want->qk_norm, post = want->post_norms;
    char b[96];
    int32_t rc;

    if ((rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_norm.weight"), n_embd, 1, &L->attn_norm)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_q.weight"), n_q, n_embd, 1, &L->wq)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_k.weight"), n_kv, n_embd, 1, &L->wk)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_v.weight"), n_v, n_embd, 1, &L->wv)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_q.bias"), n_q, 0, &L->bq)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_k.bias"), n_kv, 0, &L->bk)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_v.bias"), n_v, 0, &L->bv)) ||
        (qk_norm && (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_q_norm.weight"), hp->head_dim, 1, &L->q_norm))) ||
        (qk_norm && (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_k_norm.weight"), hp->head_dim, 1, &L->k_norm))) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "attn_output.weight"), n_embd, (int64_t)hp->n_head * hp->head_dim_v,
                         1, &L->wo)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "attn_output.bias"), n_embd, 0, &L->bo)) ||
        (post && (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "post_attention_norm.weight"), n_embd, 1,
                                   &L->post_attn_norm))) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "ffn_norm.weight"), n_embd, 1, &L->ffn_norm)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "ffn_gate.weight"), n_ff, n_embd, 1, &L->ffn_gate)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "ffn_up.weight"), n_ff, n_embd, 1, &L->ffn_up)) ||
        (rc = ez_llm_get_matrix(m, ez_llm_blk(b, sizeof b, il, "ffn_down.weight"), n_embd, n_ff, 1, &L->ffn_down)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "ffn_gate.bias"), n_ff, 0, &L->b_gate)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "ffn_up.bias"), n_ff, 0, &L->b_up)) ||
        (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "ffn_down.bias"), n_embd, 0, &L->b_down)) ||
        (post && (rc = ez_llm_get_vector(m, ez_llm_blk(b, sizeof b, il, "post_ffw_norm.weight"), n_embd, 1, &L->post_ffw_norm))))
        return rc;
    /* Sliding-window layers (gemma3's local ones) use their own rope base and no scaling. */
    L->is_swa = L->is_swa && hp->n_swa > 0;
    L->rope_base = L->is_swa ? hp->rope_base_swa : hp->rope_base;
    L->rope_freq_scale = L->is_swa ? 1.0f : hp->rope_freq_scale;
    L->head_dim = hp->head_dim;
    return ELIZA_OK;
}

int32_t ez_llm_load_std_layers(ez_llm_model *m, const ez_llm_layer_tensors *want) {
    for (int il = 0; il < m->hp.n_layer; il++) {
        int32_t rc = ez_llm_load_std_layer(m, il, want);
        if (rc) return rc;
    }
    return ELIZA_OK;
}

static int32_t load_weights(ez_llm_model *m) {
    ez_llm_hparams *hp = &m->hp;
    int32_t rc, il;

    if ((rc = ez_llm_get_matrix(m, "token_embd.weight", -1, hp->n_embd, 1, &m->tok_embd)) ||
        (rc = ez_llm_get_vector(m, "output_norm.weight", hp->n_embd, 1, &m->output_norm)) ||
        (rc = ez_llm_get_matrix(m, "output.weight", m->tok_embd.n_rows, hp->n_embd, 0, &m->output)))
        return rc;
    m->tied_output = m->output.data == NULL;
    if (m->tied_output) m->output = m->tok_embd;
    hp->n_vocab = (int32_t)m->output.n_rows;
    if ((rc = ez_llm_get_vector(m, "output.bias", hp->n_vocab, 0, &m->output_bias)) ||
        (rc = ez_llm_get_vector(m, "rope_freqs.weight", hp->n_rot / 2, 0, &m->rope_factors)))
        return rc;
    if (m->rope_factors)
        for (il = 0; il < hp->n_rot / 2; il++)
            if (!(m->rope_factors[il] > 0.0f))
                return ez_fail(ELIZA_E_FORMAT, "rope_freqs.weight[%d] = %g is not positive", il,
                               (double)m->rope_factors[il]);

    m->layers = (ez_llm_layer *)calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return ez_fail(ELIZA_E_NOMEM, "out of memory for %d layers", hp->n_layer);
    for (il = 0; il < hp->n_layer; il++) {
        m->layers[il].kv_alias = -1;
        m->layers[il].out_scale = 1.0f;
    }
    return m->arch->weights(m);
}

int32_t ez_llm_model_load(ez_gguf *g, ez_llm_model **out) {
    ez_llm_model *m;
    int32_t rc;
    *out = NULL;
    m = (ez_llm_model *)calloc(1, sizeof *m);
    if (!m) {
        ez_gguf_close(g);
        return ez_fail(ELIZA_E_NOMEM, "out of memory loading the model");
    }
    m->gguf = g;
    rc = load_hparams(g, &m->hp, &m->arch);
    if (rc == ELIZA_OK) rc = load_weights(m);
    if (rc) {
        ez_llm_model_free(m);
        return rc;
    }
    *out = m;
    return ELIZA_OK;
}

void ez_llm_model_free(ez_llm_model *m) {
    size_t i;
    if (!m) return;
    for (i = 0; i < m->n_allocs; i++) free(m->allocs[i]);
    free(m->allocs);
    free(m->layers);
    ez_gguf_close(m->gguf);
    free(m);
}
