/* LLM engine end to end on tiny random models written as GGUF files by the
 * writer below: the forward pass of each architecture (llama, qwen2, qwen3,
 * gemma3) against a naive double-precision reference written here from the
 * architecture's definition; incremental decoding against full recompute;
 * load errors; the stream's contract (context full, max tokens, stop strings,
 * EOS, cancel from another thread, seeds, struct sizes). Runs under
 * -DELIZA_SANITIZE=ON too. */
#define _POSIX_C_SOURCE 200809L /* setenv: the GPU engine test turns the validation layer on */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/platform.h"
#include "core/quant.h"
#include "eliza.h"
#include "check.h"
#include "core/gguf.h"
#include "llm/backend.h"
#include "llm/forward.h"
#include "llm/model.h"
#include "llm/session.h"
#include "rec_backend.h"
#if defined(ELIZA_VULKAN)
#include "gpu/gpu.h"
#include "llm/gpu_step.h"
#endif

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "test: out of memory\n");
        exit(2);
    }
    return p;
}

/* ---- a GGUF writer --------------------------------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t len, cap;
} buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n) cap *= 2;
        b->p = (uint8_t *)realloc(b->p, cap);
        if (!b->p) exit(2);
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, d, n);
    b->len += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); } /* little-endian hosts, as GGUF */
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

enum { T_U32 = 4, T_I32 = 5, T_F32 = 6, T_BOOL = 7, T_STR = 8, T_ARR = 9 };

#define MAX_TENSORS 256

typedef struct {
    char name[64];
    uint32_t type;
    uint64_t ne[2];
    uint8_t *data;
    size_t nbytes;
} wtensor;

typedef struct {
    buf kv;
    uint64_t n_kv;
    wtensor t[MAX_TENSORS];
    int n_t;
} gguf_w;

static void kv_key(gguf_w *w, const char *key, uint32_t type) {
    put_str(&w->kv, key);
    put_u32(&w->kv, type);
    w->n_kv++;
}
static void kv_u32(gguf_w *w, const char *key, uint32_t v) {
    kv_key(w, key, T_U32);
    put_u32(&w->kv, v);
}
static void kv_f32(gguf_w *w, const char *key, float v) {
    kv_key(w, key, T_F32);
    put(&w->kv, &v, 4);
}
static void kv_bool(gguf_w *w, const char *key, int v) {
    uint8_t x = (uint8_t)(v != 0);
    kv_key(w, key, T_BOOL);
    put(&w->kv, &x, 1);
}
static void kv_str(gguf_w *w, const char *key, const char *s) {
    kv_key(w, key, T_STR);
    put_str(&w->kv, s);
}
static void kv_arr_head(gguf_w *w, const char *key, uint32_t elem, uint64_t n) {
    kv_key(w, key, T_ARR);
    put_u32(&w->kv, elem);
    put_u64(&w->kv, n);
}

/* Takes ownership of data. */
static void add_tensor(gguf_w *w, const char *name, uint32_t type, uint64_t ne0, uint64_t ne1, uint8_t *data,
                       size_t nbytes) {
    wtensor *t = &w->t[w->n_t++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->data = data;
    t->nbytes = nbytes;
}

static void drop_tensor(gguf_w *w, const char *name) {
    for (int i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0) {
            free(w->t[i].data);
            w->t[i] = w->t[--w->n_t];
            return;
        }
}

static wtensor *find_tensor(gguf_w *w, const char *name) {
    for (int i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0) return &w->t[i];
    return NULL;
}

static buf gguf_bytes(gguf_w *w) {
    buf out = {0};
    uint64_t off = 0;
    put(&out, "GGUF", 4);
    put_u32(&out, 3);
    put_u64(&out, (uint64_t)w->n_t);
    put_u64(&out, w->n_kv);
    put(&out, w->kv.p, w->kv.len);
    for (int i = 0; i < w->n_t; i++) {
        wtensor *t = &w->t[i];
        put_str(&out, t->name);
        put_u32(&out, t->ne[1] == 1 ? 1 : 2);
        put_u64(&out, t->ne[0]);
        if (t->ne[1] != 1) put_u64(&out, t->ne[1]);
        put_u32(&out, t->type);
        put_u64(&out, off);
        off += (t->nbytes + 31) / 32 * 32;
    }
    while (out.len % 32) put(&out, "", 1);
    for (int i = 0; i < w->n_t; i++) {
        put(&out, w->t[i].data, w->t[i].nbytes);
        while (out.len % 32) put(&out, "", 1);
    }
    return out;
}

static void gguf_free(gguf_w *w) {
    for (int i = 0; i < w->n_t; i++) free(w->t[i].data);
    free(w->kv.p);
    memset(w, 0, sizeof *w);
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        fprintf(stderr, "test: cannot write %s\n", path);
        exit(2);
    }
    fclose(f);
}

/* ---- tiny models ------------------------------------------------------------------- */

/* Vocabulary: <unk> <s> </s>, the 256 byte tokens, then a few pieces. */
static const char *const k_pieces[] = {"\xe2\x96\x81", "a", "b", "c", "d", "e", "\xe2\x96\x81the", "he", "llo",
                                       "\xe2\x96\x81hello", "wor", "ld", "<start_of_turn>"};
#define N_PIECES ((int)(sizeof k_pieces / sizeof k_pieces[0]))
#define N_VOCAB (3 + 256 + N_PIECES)
#define EOS_ID 2

typedef struct {
    const char *arch;
    int n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    int n_ctx_train;
    float rope_base, rope_base_swa, eps;
    int n_swa, swa_period;      /* gemma3 */
    float softcap;              /* gemma3 final_logit_softcapping; 0 = absent */
    int qkv_bias, tied, out_bias;
    uint32_t wtype;             /* matrices: F32, F16 or Q8_0 */
    float eos_bias;             /* output.bias[EOS] when out_bias */
} spec;

/* The model as float arrays (dequantized from what was written), for the
 * reference. Matrices are [rows][cols] (rows = outputs). */
typedef struct {
    float *attn_norm, *wq, *wk, *wv, *bq, *bk, *bv, *q_norm, *k_norm, *wo, *post_attn_norm;
    float *ffn_norm, *wg, *wu, *wd, *post_ffw_norm;
    int is_swa;
} ref_layer;

typedef struct {
    spec s;
    float *embd, *out_norm, *out, *out_b;
    ref_layer L[8];
} ref_model;

static uint64_t g_rng = 1;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static int is_gemma(const spec *s) { return strcmp(s->arch, "gemma3") == 0; }
static int has_qk_norm(const spec *s) { return is_gemma(s) || strcmp(s->arch, "qwen3") == 0; }

/* Q4_0 as llama.cpp's reference quantizer writes it: d = (signed value of
 * largest magnitude) / -8, codes round(x / d) + 8 clamped to 15. (The library
 * only quantizes activations, so the test brings its own weight quantizer.) */
static void quant_q4_0(const float *x, uint8_t *dst, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, x += 32, dst += 18) {
        float amax = 0.0f, max = 0.0f, d, id;
        uint16_t h;
        for (int j = 0; j < 32; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        d = max / -8.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        h = ez_f32_to_f16(d);
        memcpy(dst, &h, 2);
        for (int j = 0; j < 16; j++) {
            int lo = (int)(x[j] * id + 8.5f), hi = (int)(x[16 + j] * id + 8.5f);
            lo = lo > 15 ? 15 : lo;
            hi = hi > 15 ? 15 : hi;
            dst[2 + j] = (uint8_t)(lo | hi << 4);
        }
    }
}

/* A matrix [rows, cols] of random values of scale `amp`, written as s->wtype;
 * returns the float values the file holds. */
static float *add_matrix(gguf_w *w, const spec *s, const char *name, int rows, int cols, float amp) {
    size_t n = (size_t)rows * (size_t)cols;
    float *v = (float *)xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) v[i] = amp * frand();
    if (s->wtype == EZ_TYPE_F32) {
        float *d = (float *)xmalloc(n * sizeof(float));
        memcpy(d, v, n * sizeof(float));
        add_tensor(w, name, EZ_TYPE_F32, (uint64_t)cols, (uint64_t)rows, (uint8_t *)d, n * sizeof(float));
    } else if (s->wtype == EZ_TYPE_F16) {
        uint16_t *d = (uint16_t *)xmalloc(n * 2);
        for (size_t i = 0; i < n; i++) {
            d[i] = ez_f32_to_f16(v[i]);
            v[i] = ez_f16_to_f32(d[i]);
        }
        add_tensor(w, name, EZ_TYPE_F16, (uint64_t)cols, (uint64_t)rows, (uint8_t *)d, n * 2);
    } else {
        size_t nb = (size_t)ez_row_bytes(s->wtype, (uint64_t)cols) * (size_t)rows;
        uint8_t *d = (uint8_t *)xmalloc(nb);
        if (s->wtype == EZ_TYPE_Q4_0) quant_q4_0(v, d, (int64_t)n);
        else ez_kernels_ref(s->wtype)->quant(v, d, (int64_t)n);
        ez_kernels_ref(s->wtype)->dequant(d, v, (int64_t)n);
        add_tensor(w, name, s->wtype, (uint64_t)cols, (uint64_t)rows, d, nb);
    }
    return v;
}

static float *add_vector(gguf_w *w, const char *name, int n, float base, float amp) {
    float *v = (float *)xmalloc((size_t)n * sizeof(float));
    float *d = (float *)xmalloc((size_t)n * sizeof(float));
    for (int i = 0; i < n; i++) v[i] = base + amp * frand();
    memcpy(d, v, (size_t)n * sizeof(float));
    add_tensor(w, name, EZ_TYPE_F32, (uint64_t)n, 1, (uint8_t *)d, (size_t)n * sizeof(float));
    return v;
}

static void add_tokenizer(gguf_w *w) {
    char name[16];
    kv_str(w, "tokenizer.ggml.model", "llama");
    kv_arr_head(w, "tokenizer.ggml.tokens", T_STR, N_VOCAB);
    put_str(&w->kv, "<unk>");
    put_str(&w->kv, "<s>");
    put_str(&w->kv, "</s>");
    for (int i = 0; i < 256; i++) {
        snprintf(name, sizeof name, "<0x%02X>", i);
        put_str(&w->kv, name);
    }
    for (int i = 0; i < N_PIECES; i++) put_str(&w->kv, k_pieces[i]);
    kv_arr_head(w, "tokenizer.ggml.scores", T_F32, N_VOCAB);
    for (int i = 0; i < N_VOCAB; i++) {
        float sc = i < 259 ? 0.0f : (float)strlen(k_pieces[i - 259]) - 10.0f;
        put(&w->kv, &sc, 4);
    }
    kv_arr_head(w, "tokenizer.ggml.token_type", T_I32, N_VOCAB);
    for (int i = 0; i < N_VOCAB; i++) {
        int32_t ty = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
        if (i == N_VOCAB - 1) ty = 4; /* <start_of_turn>: user-defined */
        put(&w->kv, &ty, 4);
    }
    kv_u32(w, "tokenizer.ggml.bos_token_id", 1);
    kv_u32(w, "tokenizer.ggml.eos_token_id", EOS_ID);
    kv_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    kv_bool(w, "tokenizer.ggml.add_bos_token", 1);
    kv_bool(w, "tokenizer.ggml.add_space_prefix", 0);
}

static void build_model(const spec *s, gguf_w *w, ref_model *r) {
    char key[128], name[96];
    const int d = s->n_embd, hd = s->head_dim, nq = s->n_head * hd, nkv = s->n_head_kv * hd;
    const float a_in = 1.0f / sqrtf((float)d);
    const int gemma = is_gemma(s);
    memset(w, 0, sizeof *w);
    memset(r, 0, sizeof *r);
    r->s = *s;
    g_rng = 12345;
    kv_str(w, "general.architecture", s->arch);
#define AK(suffix) (snprintf(key, sizeof key, "%s." suffix, s->arch), key)
    kv_u32(w, AK("context_length"), (uint32_t)s->n_ctx_train);
    kv_u32(w, AK("embedding_length"), (uint32_t)d);
    kv_u32(w, AK("block_count"), (uint32_t)s->n_layer);
    kv_u32(w, AK("feed_forward_length"), (uint32_t)s->n_ff);
    kv_u32(w, AK("attention.head_count"), (uint32_t)s->n_head);
    kv_u32(w, AK("attention.head_count_kv"), (uint32_t)s->n_head_kv);
    kv_u32(w, AK("attention.key_length"), (uint32_t)hd);
    kv_u32(w, AK("attention.value_length"), (uint32_t)hd);
    kv_f32(w, AK("attention.layer_norm_rms_epsilon"), s->eps);
    kv_f32(w, AK("rope.freq_base"), s->rope_base);
    if (gemma) {
        kv_u32(w, AK("attention.sliding_window"), (uint32_t)s->n_swa);
        kv_u32(w, AK("attention.sliding_window_pattern"), (uint32_t)s->swa_period);
        kv_f32(w, AK("rope.freq_base_swa"), s->rope_base_swa);
        if (s->softcap > 0) kv_f32(w, AK("final_logit_softcapping"), s->softcap);
    }
#undef AK
    add_tokenizer(w);

    r->embd = add_matrix(w, s, "token_embd.weight", N_VOCAB, d, 1.0f);
    r->out_norm = add_vector(w, "output_norm.weight", d, 1.0f, 0.2f);
    if (s->tied) r->out = r->embd;
    else r->out = add_matrix(w, s, "output.weight", N_VOCAB, d, a_in);
    if (s->out_bias) {
        r->out_b = add_vector(w, "output.bias", N_VOCAB, 0.0f, 0.1f);
        r->out_b[EOS_ID] = s->eos_bias;
        ((float *)find_tensor(w, "output.bias")->data)[EOS_ID] = s->eos_bias;
    }
    for (int il = 0; il < s->n_layer; il++) {
        ref_layer *L = &r->L[il];
#define BN(what) (snprintf(name, sizeof name, "blk.%d." what, il), name)
        L->attn_norm = add_vector(w, BN("attn_norm.weight"), d, 1.0f, 0.2f);
        L->wq = add_matrix(w, s, BN("attn_q.weight"), nq, d, a_in);
        L->wk = add_matrix(w, s, BN("attn_k.weight"), nkv, d, a_in);
        L->wv = add_matrix(w, s, BN("attn_v.weight"), nkv, d, a_in);
        if (s->qkv_bias) {
            L->bq = add_vector(w, BN("attn_q.bias"), nq, 0.0f, 0.1f);
            L->bk = add_vector(w, BN("attn_k.bias"), nkv, 0.0f, 0.1f);
            L->bv = add_vector(w, BN("attn_v.bias"), nkv, 0.0f, 0.1f);
        }
        if (has_qk_norm(s)) {
            L->q_norm = add_vector(w, BN("attn_q_norm.weight"), hd, 1.0f, 0.2f);
            L->k_norm = add_vector(w, BN("attn_k_norm.weight"), hd, 1.0f, 0.2f);
        }
        L->wo = add_matrix(w, s, BN("attn_output.weight"), d, nq, 1.0f / sqrtf((float)nq));
        if (gemma) L->post_attn_norm = add_vector(w, BN("post_attention_norm.weight"), d, 1.0f, 0.2f);
        L->ffn_norm = add_vector(w, BN("ffn_norm.weight"), d, 1.0f, 0.2f);
        L->wg = add_matrix(w, s, BN("ffn_gate.weight"), s->n_ff, d, a_in);
        L->wu = add_matrix(w, s, BN("ffn_up.weight"), s->n_ff, d, a_in);
        L->wd = add_matrix(w, s, BN("ffn_down.weight"), d, s->n_ff, 1.0f / sqrtf((float)s->n_ff));
        if (gemma) L->post_ffw_norm = add_vector(w, BN("post_ffw_norm.weight"), d, 1.0f, 0.2f);
        L->is_swa = gemma && s->n_swa > 0 && (s->swa_period == 0 || il % s->swa_period < s->swa_period - 1);
#undef BN
    }
}

static void ref_free(ref_model *r) {
    free(r->embd);
    free(r->out_norm);
    if (!r->s.tied) free(r->out);
    free(r->out_b);
    for (int il = 0; il < r->s.n_layer; il++) {
        ref_layer *L = &r->L[il];
        float *all[] = {L->attn_norm, L->wq, L->wk, L->wv, L->bq, L->bk, L->bv, L->q_norm,
                        L->k_norm, L->wo, L->post_attn_norm, L->ffn_norm, L->wg, L->wu, L->wd, L->post_ffw_norm};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    }
}

/* ---- the naive reference forward pass (double precision) ---------------------------- */

static void ref_rms_norm(double *y, const double *x, const float *w, int n, double eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    ss = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * ss * w[i];
}

static void ref_matvec(double *y, const float *W, const float *b, const double *x, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        double s = b ? b[r] : 0.0;
        for (int c = 0; c < cols; c++) s += (double)W[(size_t)r * cols + c] * x[c];
        y[r] = s;
    }
}

/* HF's rotate_half (neox) or GPT-J's interleaved pairs (llama in GGUF). */
static void ref_rope(double *v, int hd, int pos, double base, int neox) {
    for (int i = 0; i < hd / 2; i++) {
        double th = pos * pow(base, -2.0 * i / hd), c = cos(th), s = sin(th);
        int a = neox ? i : 2 * i, b = neox ? i + hd / 2 : 2 * i + 1;
        double x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
    }
}

/* logits [n, N_VOCAB] of tokens[0..n) from position 0. */
static void ref_forward(const ref_model *r, const int32_t *tokens, int n, double *logits) {
    const spec *s = &r->s;
    const int d = s->n_embd, hd = s->head_dim, nq = s->n_head * hd, nkv = s->n_head_kv * hd, ff = s->n_ff;
    const int gemma = is_gemma(s), neox = strcmp(s->arch, "llama") != 0;
    double *x = (double *)xmalloc(sizeof(double) * (size_t)n * d);
    double *h = (double *)xmalloc(sizeof(double) * d), *o = (double *)xmalloc(sizeof(double) * d);
    double *q = (double *)xmalloc(sizeof(double) * (size_t)n * nq);
    double *k = (double *)xmalloc(sizeof(double) * (size_t)n * nkv);
    double *v = (double *)xmalloc(sizeof(double) * (size_t)n * nkv);
    double *att = (double *)xmalloc(sizeof(double) * nq), *w = (double *)xmalloc(sizeof(double) * n);
    double *g = (double *)xmalloc(sizeof(double) * ff), *u = (double *)xmalloc(sizeof(double) * ff);
    const double scale = 1.0 / sqrt((double)hd);

    for (int t = 0; t < n; t++)
        for (int i = 0; i < d; i++)
            x[(size_t)t * d + i] = r->embd[(size_t)tokens[t] * d + i] * (gemma ? sqrt((double)d) : 1.0);
    for (int il = 0; il < s->n_layer; il++) {
        const ref_layer *L = &r->L[il];
        const double base = L->is_swa ? s->rope_base_swa : s->rope_base;
        for (int t = 0; t < n; t++) {
            double *qt = q + (size_t)t * nq, *kt = k + (size_t)t * nkv;
            ref_rms_norm(h, x + (size_t)t * d, L->attn_norm, d, s->eps);
            ref_matvec(qt, L->wq, L->bq, h, nq, d);
            ref_matvec(kt, L->wk, L->bk, h, nkv, d);
            ref_matvec(v + (size_t)t * nkv, L->wv, L->bv, h, nkv, d);
            for (int hh = 0; hh < s->n_head; hh++) {
                if (L->q_norm) ref_rms_norm(qt + hh * hd, qt + hh * hd, L->q_norm, hd, s->eps);
                ref_rope(qt + hh * hd, hd, t, base, neox);
            }
            for (int hh = 0; hh < s->n_head_kv; hh++) {
                if (L->k_norm) ref_rms_norm(kt + hh * hd, kt + hh * hd, L->k_norm, hd, s->eps);
                ref_rope(kt + hh * hd, hd, t, base, neox);
            }
        }
        for (int t = 0; t < n; t++) {
            double *xt = x + (size_t)t * d;
            const int lo = L->is_swa ? (t - s->n_swa + 1 > 0 ? t - s->n_swa + 1 : 0) : 0;
            for (int hh = 0; hh < s->n_head; hh++) {
                const int gk = hh / (s->n_head / s->n_head_kv);
                double mx = -1e300, sum = 0;
                for (int p = lo; p <= t; p++) {
                    double dot = 0;
                    for (int i = 0; i < hd; i++) dot += q[(size_t)t * nq + hh * hd + i] * k[(size_t)p * nkv + gk * hd + i];
                    w[p] = dot * scale;
                    mx = w[p] > mx ? w[p] : mx;
                }
                for (int p = lo; p <= t; p++) sum += (w[p] = exp(w[p] - mx));
                for (int i = 0; i < hd; i++) {
                    double acc = 0;
                    for (int p = lo; p <= t; p++) acc += w[p] / sum * v[(size_t)p * nkv + gk * hd + i];
                    att[hh * hd + i] = acc;
                }
            }
            ref_matvec(o, L->wo, NULL, att, d, nq);
            if (L->post_attn_norm) ref_rms_norm(o, o, L->post_attn_norm, d, s->eps);
            for (int i = 0; i < d; i++) xt[i] += o[i];
        }
        for (int t = 0; t < n; t++) {
            double *xt = x + (size_t)t * d;
            ref_rms_norm(h, xt, L->ffn_norm, d, s->eps);
            ref_matvec(g, L->wg, NULL, h, ff, d);
            ref_matvec(u, L->wu, NULL, h, ff, d);
            for (int i = 0; i < ff; i++) {
                double a = g[i];
                if (gemma) a = 0.5 * a * (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)));
                else a = a / (1.0 + exp(-a));
                g[i] = a * u[i];
            }
            ref_matvec(o, L->wd, NULL, g, d, ff);
            if (L->post_ffw_norm) ref_rms_norm(o, o, L->post_ffw_norm, d, s->eps);
            for (int i = 0; i < d; i++) xt[i] += o[i];
        }
    }
    for (int t = 0; t < n; t++) {
        double *lt = logits + (size_t)t * N_VOCAB;
        ref_rms_norm(h, x + (size_t)t * d, r->out_norm, d, s->eps);
        ref_matvec(lt, r->out, r->out_b, h, N_VOCAB, d);
        if (s->softcap > 0)
            for (int i = 0; i < N_VOCAB; i++) lt[i] = s->softcap * tanh(lt[i] / s->softcap);
    }
    free(x);
    free(h);
    free(o);
    free(q);
    free(k);
    free(v);
    free(att);
    free(w);
    free(g);
    free(u);
}

/* ---- fixtures -------------------------------------------------------------------------- */

static spec base_spec(const char *arch) {
    spec s;
    memset(&s, 0, sizeof s);
    s.arch = arch;
    s.n_embd = 64;
    s.n_layer = 3;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.head_dim = 16;
    s.n_ff = 96;
    s.n_ctx_train = 128;
    s.rope_base = 10000.0f;
    s.rope_base_swa = 10000.0f;
    s.eps = 1e-6f;
    s.wtype = EZ_TYPE_F32;
    if (strcmp(arch, "llama") == 0) s.eps = 1e-5f;
    if (strcmp(arch, "qwen2") == 0) s.qkv_bias = 1, s.rope_base = 1e6f;
    if (strcmp(arch, "qwen3") == 0) s.tied = 1;
    if (strcmp(arch, "gemma3") == 0) {
        s.tied = 1;
        s.head_dim = 32; /* head_dim * n_head != n_embd, as in Gemma 3 */
        s.n_swa = 5;
        s.swa_period = 2;
        s.rope_base = 1e6f;
        s.softcap = 3.0f;
    }
    return s;
}

static const char *k_path = "test_llm_tmp.gguf";

static void write_model(const spec *s, ref_model *r) {
    gguf_w w;
    buf b;
    build_model(s, &w, r);
    b = gguf_bytes(&w);
    write_file(k_path, b.p, b.len);
    free(b.p);
    gguf_free(&w);
}

/* kv_type_v: ELIZA_LLM_KV_AS_K for the keys' type. */
static eliza_llm *open_model_kv2(int32_t n_ctx, int32_t n_batch, int32_t n_threads, uint32_t kv_type,
                                 uint32_t kv_type_v) {
    eliza_llm_params p;
    eliza_llm *llm = NULL;
    eliza_llm_default_params(&p);
    p.context_size = (uint32_t)n_ctx;
    p.n_batch = (uint32_t)n_batch;
    p.n_threads = n_threads;
    p.kv_type = kv_type;
    p.kv_type_v = kv_type_v;
    CHECK_RC(eliza_llm_open(k_path, &p, &llm), ELIZA_OK);
    return llm;
}

static eliza_llm *open_model_kv(int32_t n_ctx, int32_t n_batch, int32_t n_threads, uint32_t kv_type) {
    return open_model_kv2(n_ctx, n_batch, n_threads, kv_type, ELIZA_LLM_KV_AS_K);
}

static eliza_llm *open_model(int32_t n_ctx, int32_t n_batch, int32_t n_threads) {
    return open_model_kv(n_ctx, n_batch, n_threads, ELIZA_LLM_KV_F32);
}

static void random_tokens(int32_t *t, int n) {
    t[0] = 1;
    for (int i = 1; i < n; i++) t[i] = 3 + (int32_t)((frand() + 1.0f) * 0.5f * (N_VOCAB - 4));
}

/* ---- forward pass vs the reference ------------------------------------------------------- */

static double compare_with_reference_kv(const spec *s, int n_tokens, int n_ctx, int n_batch, int n_threads,
                                        uint32_t kv_type, uint32_t kv_type_v) {
    ref_model r;
    eliza_llm *llm;
    int32_t tokens[320];
    float *logits = NULL;
    size_t count = 0;
    double *want = (double *)xmalloc(sizeof(double) * (size_t)n_tokens * N_VOCAB);
    double max_err = 0, max_ref = 0;

    write_model(s, &r);
    llm = open_model_kv2(n_ctx, n_batch, n_threads, kv_type, kv_type_v);
    g_rng = 777;
    random_tokens(tokens, n_tokens);
    ref_forward(&r, tokens, n_tokens, want);
    if (llm) {
        CHECK_RC(eliza_llm_logits(llm, tokens, (size_t)n_tokens, 1, &logits, &count), ELIZA_OK);
        CHECK(count == (size_t)n_tokens * N_VOCAB);
        for (size_t i = 0; logits && i < count; i++) {
            double e = fabs((double)logits[i] - want[i]);
            max_err = e > max_err ? e : max_err;
            max_ref = fabs(want[i]) > max_ref ? fabs(want[i]) : max_ref;
        }
        eliza_free(logits);
        /* The last-position form returns the same row. */
        CHECK_RC(eliza_llm_logits(llm, tokens, (size_t)n_tokens, 0, &logits, &count), ELIZA_OK);
        CHECK(count == N_VOCAB);
        for (size_t i = 0; logits && i < count; i++)
            CHECK(fabs((double)logits[i] - want[(size_t)(n_tokens - 1) * N_VOCAB + i]) <= max_err + 1e-6);
        eliza_free(logits);
    }
    eliza_llm_close(llm);
    ref_free(&r);
    free(want);
    return max_ref > 0 ? max_err / max_ref : 1.0;
}

static double compare_with_reference(const spec *s, int n_tokens, int n_ctx, int n_batch, int n_threads,
                                     uint32_t kv_type) {
    return compare_with_reference_kv(s, n_tokens, n_ctx, n_batch, n_threads, kv_type, ELIZA_LLM_KV_AS_K);
}

static void test_llm_forward_matches_reference_per_arch(void) {
    static const char *const archs[] = {"llama", "qwen2", "qwen3", "gemma3"};
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        spec s = base_spec(archs[i]);
        /* Batches of 4 over 23 tokens: several passes, a partial last one, and
         * gemma3's ring-buffered window (5) wrapping its cache (5 + 4 slots). */
        double err1 = compare_with_reference(&s, 23, 40, 4, 2, ELIZA_LLM_KV_F32);
        double err2 = compare_with_reference(&s, 23, 40, 256, 1, ELIZA_LLM_KV_F32);
        /* F16 keys and values: 11 significant bits, through two layers */
        double err3 = compare_with_reference(&s, 23, 40, 4, 2, ELIZA_LLM_KV_F16);
        if (getenv("ELIZA_TEST_VERBOSE") || !(err1 < 2e-5 && err2 < 2e-5 && err3 < 2e-3))
            fprintf(stderr, "%s: relative logit error %.3g (batch 4) %.3g (one batch) %.3g (F16 cache)\n", archs[i],
                    err1, err2, err3);
        /* Prompt batches of 32 and more run the blocked (GEMM) attention:
         * 3 batches of 32 (gemma3's window ring of 5 + 32 slots wraps), and
         * batches of 40 (blocks of 32 and 8) then 16 (the per-token path). */
        double err4 = compare_with_reference(&s, 96, 100, 32, 2, ELIZA_LLM_KV_F32);
        double err5 = compare_with_reference(&s, 56, 60, 40, 2, ELIZA_LLM_KV_F32);
        /* ... with an F16 cache, widened 256 rows at a time (300 positions);
         * and in a 20000-token context, whose 4 MB workspace per thread
         * holds blocks of 26 tokens (26, 26, 4) */
        double err6 = compare_with_reference(&s, 300, 320, 64, 2, ELIZA_LLM_KV_F16);
        double err7 = compare_with_reference(&s, 56, 20000, 64, 2, ELIZA_LLM_KV_F32);
        if (getenv("ELIZA_TEST_VERBOSE") || !(err4 < 2e-5 && err5 < 2e-5 && err6 < 2e-3 && err7 < 2e-5))
            fprintf(stderr,
                    "%s: relative logit error %.3g (96 tokens, batch 32) %.3g (56, batch 40) %.3g (300, F16) %.3g "
                    "(context 20000)\n",
                    archs[i], err4, err5, err6, err7);
        CHECK(err1 < 2e-5);
        CHECK(err2 < 2e-5);
        CHECK(err3 < 2e-3 && err3 > 0.0);
        CHECK(err4 < 2e-5);
        CHECK(err5 < 2e-5);
        CHECK(err6 < 2e-3 && err6 > 0.0);
        CHECK(err7 < 2e-5);
    }
}

static void test_llm_forward_quantized_weights_close_to_reference(void) {
    /* Q4_0 runs the prompt-batch kernels (x8 at 8 rows, tiles below) and the
     * per-pair dots for the single last token; Q8_0 the signed tile kernel. */
    static const uint32_t types[] = {EZ_TYPE_Q8_0, EZ_TYPE_F16, EZ_TYPE_Q4_0};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        spec s = base_spec("gemma3");
        double err;
        s.wtype = types[i];
        s.softcap = 0.0f;
        err = compare_with_reference(&s, 17, 32, 8, 2, ELIZA_LLM_KV_F32);
        /* Q8_0 weights also mean Q8_0 activations (as llama.cpp): about 1% of
         * scale; F16 weights take F32 activations. */
        if (getenv("ELIZA_TEST_VERBOSE") || !(err < (types[i] == EZ_TYPE_F16 ? 1e-4 : 1e-2))) fprintf(stderr, "type %u: relative error %.3g\n", types[i], err);
        CHECK(err < (types[i] == EZ_TYPE_F16 ? 1e-4 : 1e-2));
    }
}

/* Decoding one token at a time past 128 cached positions takes the split
 * schedule (attention.c: runs of positions per thread, merged after);
 * with 2 and 3 threads, one and two key/value heads, F32 and Q8_0 caches,
 * it stays as close to the double-precision reference as the batched
 * forms, and its logits equal a batch-4 run's up to rounding. */
static void test_llm_split_decode_matches_reference(void) {
    static const char *const archs[] = {"llama", "gemma3"};
    for (size_t ai = 0; ai < 2; ai++)
        for (int threads = 2; threads <= 3; threads++)
            for (int kv1 = 0; kv1 < 2; kv1++) {
                spec s = base_spec(archs[ai]);
                double e32, e8;
                if (kv1) {
                    s.n_head = 4;
                    s.n_head_kv = 1;
                }
                s.head_dim = 64;
                s.softcap = 0.0f;
                e32 = compare_with_reference(&s, 300, 320, 1, threads, ELIZA_LLM_KV_F32);
                e8 = compare_with_reference(&s, 300, 320, 1, threads, ELIZA_LLM_KV_Q8_0);
                if (getenv("ELIZA_TEST_VERBOSE") || !(e32 < 2e-6 && e8 < 1e-2))
                    fprintf(stderr, "%s, %d threads, %d kv heads: split decode error %.3g (f32) %.3g (q8_0)\n",
                            archs[ai], threads, s.n_head_kv, e32, e8);
                CHECK(e32 < 2e-6);
                CHECK(e8 < 1e-2);
            }
}

/* Every cache type against the double-precision reference (an F32 cache):
 * gemma3 with 8 query heads on 2 key/value heads (the four-head kernels),
 * head sizes 64 and 128 (Hadamard sizes 64 / 64 and 128 / 64 for Q8_0 and
 * Q4_0), its window of 5 ring-buffered and wrapping; batches of 4 (the
 * per-token attention, then single-token decoding steps) and of 32 (the
 * blocked attention, which widens cached rows chunk by chunk). The bounds
 * are relative logit errors, a few times what each type gives here. */
static void test_llm_quantized_kv_caches_close_to_reference(void) {
    static const struct {
        uint32_t k, v;
        double bound;
    } cases[] = {
        {ELIZA_LLM_KV_Q8_0, ELIZA_LLM_KV_AS_K, 4e-3},   {ELIZA_LLM_KV_Q4_0, ELIZA_LLM_KV_AS_K, 5e-2},
        {ELIZA_LLM_KV_TBQ4_0, ELIZA_LLM_KV_AS_K, 4e-2}, {ELIZA_LLM_KV_TBQ3_0, ELIZA_LLM_KV_AS_K, 8e-2},
        {ELIZA_LLM_KV_TBQ4_0, ELIZA_LLM_KV_Q8_0, 3e-2}, {ELIZA_LLM_KV_F16, ELIZA_LLM_KV_TBQ3_0, 7e-2},
    };
    eliza_llm *llm;
    char *json = NULL;
    for (int hd = 64; hd <= 128; hd *= 2) {
        spec s = base_spec("gemma3");
        s.n_head = 8;
        s.head_dim = hd;
        s.softcap = 0.0f; /* errors unsaturated */
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            const double e1 = compare_with_reference_kv(&s, 23, 40, 4, 2, cases[i].k, cases[i].v);
            const double e2 = compare_with_reference_kv(&s, 96, 100, 32, 2, cases[i].k, cases[i].v);
            if (getenv("ELIZA_TEST_VERBOSE") || !(e1 < cases[i].bound && e2 < cases[i].bound))
                fprintf(stderr, "head %d, kv %u/%u: relative logit error %.3g (batch 4) %.3g (batch 32)\n", hd,
                        cases[i].k, cases[i].v, e1, e2);
            CHECK(e1 < cases[i].bound && e1 > 0.0);
            CHECK(e2 < cases[i].bound && e2 > 0.0);
        }
    }
    /* The last model (3 layers, 2 key/value heads of 128): one position's
     * keys and values take 3 * 2 * 2 * 4 blocks of 14 bytes as TBQ3_0, and a
     * struct from before kv_type_v gets values of the keys' type. */
    llm = open_model_kv2(16, 4, 1, ELIZA_LLM_KV_TBQ3_0, ELIZA_LLM_KV_AS_K);
    CHECK_RC(eliza_llm_info_json(llm, &json), ELIZA_OK);
    CHECK(json && strstr(json, "\"kv_type\": \"tbq3_0\", \"kv_type_v\": \"tbq3_0\"") &&
          strstr(json, "\"kv_bytes_per_token\": 672"));
    eliza_free(json);
    eliza_llm_close(llm);
    {
        eliza_llm_params p;
        eliza_llm_default_params(&p);
        p.context_size = 16;
        p.kv_type = ELIZA_LLM_KV_TBQ4_0;
        p.kv_type_v = ELIZA_LLM_KV_F32;
        p.struct_size = (uint32_t)offsetof(eliza_llm_params, kv_type_v);
        llm = NULL;
        CHECK_RC(eliza_llm_open(k_path, &p, &llm), ELIZA_OK);
        CHECK_RC(eliza_llm_info_json(llm, &json), ELIZA_OK);
        CHECK(json && strstr(json, "\"kv_type\": \"tbq4_0\", \"kv_type_v\": \"tbq4_0\"") &&
              strstr(json, "\"kv_bytes_per_token\": 864"));
        eliza_free(json);
        eliza_llm_close(llm);
    }
}
#if defined(ELIZA_VULKAN)
/* A context opened and never closed (it makes no pipelines): the Vulkan
 * driver then stays loaded to exit, where LeakSanitizer would read its
 * libraries' one-time allocations as leaks once the loader unloaded them
 * (as in test_gpu). */
static ez_gpu *g_keep_driver_loaded;

/* The experimental GPU decode step (llm/gpu_step.c) token by token, past
 * the sliding window, on the tiny gemma3 (local and global layers, q/k
 * norms, post norms, soft-capping): against the double-precision reference
 * of the same (dequantized) weights, and against the CPU engine, whose
 * quantized types also quantize the activations (the GPU keeps them F32).
 * On any Vulkan device, lavapipe included. */
static void test_llm_gpu_step_matches_reference_and_cpu_engine(void) {
    static const uint32_t types[] = {EZ_TYPE_F32, EZ_TYPE_F16, EZ_TYPE_Q8_0, EZ_TYPE_Q4_0};
    enum { N_TOK = 9, N_CTX = 16 };
    ez_gpu_params p;
    ez_gpu *g_gpu = NULL;
    int32_t rc;
    ez_gpu_params_default(&p);
    p.allow_cpu = 1;
    rc = ez_gpu_open(&p, &g_keep_driver_loaded);
    if (rc == ELIZA_OK) rc = ez_gpu_open(&p, &g_gpu);
    if (rc != ELIZA_OK) {
        printf("test_llm_gpu_step: skipped (%s)\n", eliza_last_error());
        CHECK(rc == ELIZA_E_UNSUPPORTED);
        return;
    }
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const int quantized = types[ti] == EZ_TYPE_Q8_0 || types[ti] == EZ_TYPE_Q4_0;
        spec s = base_spec("gemma3");
        ref_model r;
        eliza_llm *llm;
        ez_gguf *gg = NULL;
        ez_llm_model *m = NULL;
        ez_llm_gpu *st = NULL;
        int32_t tokens[N_TOK];
        double *want = (double *)xmalloc(sizeof(double) * N_TOK * N_VOCAB);
        float *cpu = NULL, gpu[N_VOCAB];
        size_t count = 0;
        double diff_ref = 0.0, diff_cpu = 0.0, max_logit = 0.0;
        int agree = 0, decided = 0;
        s.wtype = types[ti];
        write_model(&s, &r);
        g_rng = 4242;
        random_tokens(tokens, N_TOK);
        ref_forward(&r, tokens, N_TOK, want);
        ref_free(&r);
        llm = open_model(N_CTX, 8, 1);
        if (llm) CHECK_RC(eliza_llm_logits(llm, tokens, N_TOK, 1, &cpu, &count), ELIZA_OK);
        eliza_llm_close(llm);
        CHECK_RC(ez_gguf_open(k_path, &gg), ELIZA_OK);
        if (gg) CHECK_RC(ez_llm_model_load(gg, &m), ELIZA_OK);
        if (m) CHECK_RC(ez_llm_gpu_create(m, g_gpu, N_CTX, &st), ELIZA_OK);
        for (int t = 0; st && cpu && t < N_TOK; t++) {
            const double *ref = want + (size_t)t * N_VOCAB;
            double diff = 0.0;
            int gb = 0, rb = 0, r2 = -1;
            int32_t device_best = -1;
            CHECK_RC(ez_llm_gpu_step(st, tokens[t], t, gpu, &device_best), ELIZA_OK);
            for (int i = 0; i < N_VOCAB; i++) {
                const double e = fabs((double)gpu[i] - ref[i]), ec = fabs((double)gpu[i] - cpu[(size_t)t * N_VOCAB + i]);
                diff = e > diff || e != e ? e : diff;
                diff_cpu = ec > diff_cpu || ec != ec ? ec : diff_cpu;
                max_logit = fabs(ref[i]) > max_logit ? fabs(ref[i]) : max_logit;
                if (gpu[i] > gpu[gb]) gb = i;
                if (ref[i] > ref[rb]) rb = i;
            }
            for (int i = 0; i < N_VOCAB; i++)
                if (i != rb && (r2 < 0 || ref[i] > ref[r2])) r2 = i;
            /* Top-1 must agree wherever the reference's margin over its
             * second choice passes twice this position's difference. */
            if (ref[rb] - ref[r2] > 2.0 * diff) {
                decided++;
                agree += gb == rb;
            }
            diff_ref = diff > diff_ref ? diff : diff_ref;
            CHECK(device_best == gb); /* the device's argmax of its own logits */
        }
        if (st) {
            /* The last position again, greedy only: the same cache row rewritten, the same pick. */
            int32_t again = -1, last = 0;
            for (int i = 1; i < N_VOCAB; i++)
                if (gpu[i] > gpu[last]) last = i;
            CHECK_RC(ez_llm_gpu_step(st, tokens[N_TOK - 1], N_TOK - 1, NULL, &again), ELIZA_OK);
            CHECK(again == last);
            CHECK_RC(ez_llm_gpu_step(st, 0, N_CTX, gpu, NULL), ELIZA_E_CONTEXT_FULL);
        }
        printf("  GPU step, gemma3 %s weights, %d tokens: max |gpu - ref| %.3g, max |gpu - cpu| %.3g (logits up to "
               "%.3g), top-1 %d/%d decided\n",
               ez_type_traits_of(types[ti])->name, N_TOK, diff_ref, diff_cpu, max_logit, agree, decided);
        CHECK(diff_ref <= 1e-4 * max_logit);
        CHECK(diff_cpu <= (quantized ? 5e-2 : 1e-4) * max_logit);
        CHECK(agree == decided && decided >= N_TOK - 1);
        ez_llm_gpu_free(st);
        ez_llm_model_free(m);
        eliza_free(cpu);
        free(want);
    }
    CHECK(ez_gpu_validation_errors(g_gpu) == 0);
    ez_gpu_close(g_gpu);
}
#endif

/* ---- streams ------------------------------------------------------------------------------ */

typedef struct {
    int32_t tokens[512];
    int n_tokens;
    char text[4096];
    size_t text_len;
    int32_t rc;
    eliza_llm_stats stats;
} run_result;

static void stream_config(eliza_llm_stream_config *c, const char *prompt) {
    eliza_llm_stream_default_config(c);
    c->prompt = prompt;
    c->temperature = 0.0f;
    c->max_tokens = 20;
}

/* Runs a stream to its end; collects tokens, text and stats. */
static run_result run_stream(eliza_llm *llm, const eliza_llm_stream_config *c) {
    run_result r;
    eliza_llm_stream *st = NULL;
    memset(&r, 0, sizeof r);
    r.rc = eliza_llm_stream_open(llm, c, &st);
    if (r.rc) return r;
    for (;;) {
        eliza_llm_piece piece;
        memset(&piece, 0, sizeof piece);
        piece.struct_size = sizeof piece;
        r.rc = eliza_llm_stream_next(st, &piece);
        if (r.rc != ELIZA_OK) break;
        CHECK(piece.text != NULL && strlen(piece.text) == piece.text_len);
        if (r.n_tokens < 512) r.tokens[r.n_tokens++] = piece.token;
        if (r.text_len + piece.text_len < sizeof r.text) {
            memcpy(r.text + r.text_len, piece.text, piece.text_len);
            r.text_len += piece.text_len;
        }
    }
    r.stats.struct_size = sizeof r.stats;
    CHECK_RC(eliza_llm_stream_stats(st, &r.stats), ELIZA_OK);
    eliza_llm_stream_close(st);
    return r;
}

static void test_llm_stream_greedy_matches_full_recompute(void) {
    spec s = base_spec("gemma3");
    ref_model r;
    eliza_llm *llm;
    eliza_llm_stream_config c;
    eliza_llm_stream *st = NULL;
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    int32_t seq[128];
    int n_seq;

    write_model(&s, &r);
    llm = open_model(64, 3, 2);
    if (!llm) goto done;
    stream_config(&c, "hello world");
    c.max_tokens = 12;
    CHECK_RC(eliza_llm_tokenize(llm, c.prompt, strlen(c.prompt), ELIZA_TOKENIZE_ADD_BOS | ELIZA_TOKENIZE_PARSE_SPECIAL,
                                &prompt, &n_prompt),
             ELIZA_OK);
    CHECK(n_prompt >= 2 && prompt[0] == 1);
    memcpy(seq, prompt, n_prompt * sizeof(int32_t));
    n_seq = (int)n_prompt;
    CHECK_RC(eliza_llm_stream_open(llm, &c, &st), ELIZA_OK);
    for (int step = 0; st && step < 12; step++) {
        eliza_llm_piece piece;
        float *logits = NULL;
        size_t count = 0;
        int32_t best = 0;
        piece.struct_size = sizeof piece;
        CHECK_RC(eliza_llm_stream_next(st, &piece), ELIZA_OK);
        /* The same choice from scratch: every token evaluated in one pass. */
        eliza_llm_stream_close(st);
        CHECK_RC(eliza_llm_logits(llm, seq, (size_t)n_seq, 0, &logits, &count), ELIZA_OK);
        for (int i = 1; logits && i < N_VOCAB; i++)
            if (logits[i] > logits[best]) best = i;
        eliza_free(logits);
        CHECK(best == piece.token);
        seq[n_seq++] = piece.token;
        /* Reopen and replay to the same point. */
        c.max_tokens = 12;
        st = NULL;
        CHECK_RC(eliza_llm_stream_open(llm, &c, &st), ELIZA_OK);
        for (int k = 0; st && k <= step; k++) {
            piece.struct_size = sizeof piece;
            CHECK_RC(eliza_llm_stream_next(st, &piece), ELIZA_OK);
        }
    }
    eliza_llm_stream_close(st);
    eliza_free(prompt);
done:
    eliza_llm_close(llm);
    ref_free(&r);
}

static void test_llm_stream_context_full_and_limits(void) {
    spec s = base_spec("llama");
    ref_model r;
    eliza_llm *llm;
    eliza_llm_stream_config c;
    run_result res;
    eliza_llm_stream *st = NULL, *st2 = NULL;
    int32_t *prompt = NULL;
    size_t n_prompt = 0;

    write_model(&s, &r);
    llm = open_model(32, 4, 2);
    if (!llm) goto done;
    stream_config(&c, "abcde");
    CHECK_RC(eliza_llm_tokenize(llm, c.prompt, strlen(c.prompt), ELIZA_TOKENIZE_ADD_BOS, &prompt, &n_prompt), ELIZA_OK);

    /* Generation fills the stream's context (16): DONE, CONTEXT_FULL. */
    c.context_size = 16;
    c.max_tokens = 0;
    res = run_stream(llm, &c);
    CHECK_RC(res.rc, ELIZA_DONE);
    CHECK(res.stats.stop_reason == ELIZA_STOP_CONTEXT_FULL);
    CHECK(res.stats.generated_tokens == 16 - n_prompt + 1);
    CHECK(res.stats.prompt_tokens == n_prompt);

    /* max_tokens */
    c.context_size = 0;
    c.max_tokens = 7;
    res = run_stream(llm, &c);
    CHECK_RC(res.rc, ELIZA_DONE);
    CHECK(res.stats.stop_reason == ELIZA_STOP_MAX_TOKENS);
    CHECK(res.stats.generated_tokens == 7);
    CHECK(res.stats.decode_ms >= 0 && res.stats.prefill_ms > 0);

    /* Prompt longer than the context. */
    c.context_size = (uint32_t)n_prompt - 1;
    CHECK_RC(eliza_llm_stream_open(llm, &c, &st), ELIZA_E_CONTEXT_FULL);
    CHECK(st == NULL);
    c.context_size = 33; /* above the handle's */
    CHECK_RC(eliza_llm_stream_open(llm, &c, &st), ELIZA_E_INVALID_ARG);
    c.context_size = 0;

    /* Empty prompt, invalid UTF-8, NULL prompt. */
    c.prompt = "";
    CHECK_RC(eliza_llm_stream_open(llm, &c, &st), ELIZA_E_INVALID_ARG);
    c.prompt = "ab\xff";
    CHECK_RC(eliza_llm_stream_open(llm, &c, &st), ELIZA_E_INVALID_ARG);
    c.prompt = NULL;
    CHECK_RC(eliza_llm_stream_open(llm, &c, &st), ELIZA_E_INVALID_ARG);
    c.prompt = "abcde";

    /* struct sizes */
    c.struct_size = 4;
    CHECK_RC(eliza_llm_stream_open(llm, &c, &st), ELIZA_E_ABI);
    c.struct_size = sizeof c;

    /* One stream per model; logits refused while it is open. */
    CHECK_RC(eliza_llm_stream_open(llm, &c, &st), ELIZA_OK);
    CHECK_RC(eliza_llm_stream_open(llm, &c, &st2), ELIZA_E_STATE);
    {
        float *lg = NULL;
        size_t cnt = 0;
        eliza_llm_piece piece;
        eliza_llm_stats stats;
        CHECK_RC(eliza_llm_logits(llm, prompt, n_prompt, 0, &lg, &cnt), ELIZA_E_STATE);
        piece.struct_size = 4;
        CHECK_RC(eliza_llm_stream_next(st, &piece), ELIZA_E_ABI);
        stats.struct_size = 4;
        CHECK_RC(eliza_llm_stream_stats(st, &stats), ELIZA_E_ABI);
    }
    eliza_llm_stream_close(st);
    eliza_llm_stream_close(NULL);
    eliza_free(prompt);
done:
    eliza_llm_close(llm);
    ref_free(&r);
}

static void test_llm_stream_stop_strings_are_held_back_and_never_emitted(void) {
    spec s = base_spec("qwen3");
    ref_model r;
    eliza_llm *llm;
    eliza_llm_stream_config c;
    run_result full, cut;
    char stop[8];
    const char *stops[2];

    write_model(&s, &r);
    llm = open_model(64, 8, 2);
    if (!llm) goto done;
    stream_config(&c, "hello");
    c.max_tokens = 30;
    full = run_stream(llm, &c);
    CHECK_RC(full.rc, ELIZA_DONE);
    CHECK(full.text_len > 12);
    if (full.text_len > 12) {
        /* Stop at a 3-byte string that first occurs at byte >= 6. */
        size_t at = 6, first;
        char *hit;
        memcpy(stop, full.text + at, 3);
        stop[3] = '\0';
        full.text[full.text_len] = '\0';
        hit = strstr(full.text, stop);
        first = (size_t)(hit - full.text);
        stops[0] = "never-appears-\x01";
        stops[1] = stop;
        c.stop = stops;
        c.n_stop = 2;
        cut = run_stream(llm, &c);
        CHECK_RC(cut.rc, ELIZA_DONE);
        CHECK(cut.stats.stop_reason == ELIZA_STOP_STRING);
        CHECK(cut.text_len == first);
        CHECK(memcmp(cut.text, full.text, first) == 0);
    }
    c.n_stop = 1;
    stops[0] = NULL;
    {
        eliza_llm_stream *st = NULL;
        CHECK_RC(eliza_llm_stream_open(llm, &c, &st), ELIZA_E_INVALID_ARG);
    }
done:
    eliza_llm_close(llm);
    ref_free(&r);
}

static void test_llm_stream_eos_and_seeds(void) {
    spec s = base_spec("qwen2");
    ref_model r;
    eliza_llm *llm;
    eliza_llm_stream_config c;
    run_result a, b, other;

    /* An output bias that makes EOS certain: the stream ends at once. */
    s.out_bias = 1;
    s.eos_bias = 1000.0f;
    write_model(&s, &r);
    llm = open_model(64, 8, 2);
    if (llm) {
        stream_config(&c, "abc");
        a = run_stream(llm, &c);
        CHECK_RC(a.rc, ELIZA_DONE);
        CHECK(a.stats.stop_reason == ELIZA_STOP_EOS);
        CHECK(a.stats.generated_tokens == 0);
        CHECK(a.text_len == 0);
    }
    eliza_llm_close(llm);
    ref_free(&r);

    s = base_spec("qwen2");
    write_model(&s, &r);
    llm = open_model(64, 8, 2);
    if (!llm) goto done;
    stream_config(&c, "abc");
    c.temperature = 1.5f;
    c.top_k = 0;
    c.top_p = 1.0f;
    c.min_p = 0.0f;
    c.max_tokens = 24;
    c.seed = 42;
    a = run_stream(llm, &c);
    b = run_stream(llm, &c);
    CHECK(a.stats.generated_tokens == 24 && b.stats.generated_tokens == 24);
    CHECK(a.text_len == b.text_len && memcmp(a.text, b.text, a.text_len) == 0);
    c.seed = 43;
    other = run_stream(llm, &c);
    CHECK(other.text_len != a.text_len || memcmp(other.text, a.text, a.text_len) != 0);
    /* Penalties and truncations run too. */
    c.top_k = 5;
    c.top_p = 0.9f;
    c.min_p = 0.1f;
    c.repeat_penalty = 1.3f;
    other = run_stream(llm, &c);
    CHECK_RC(other.rc, ELIZA_DONE);
    c.temperature = NAN;
    {
        eliza_llm_stream *st = NULL;
        CHECK_RC(eliza_llm_stream_open(llm, &c, &st), ELIZA_E_INVALID_ARG);
    }
done:
    eliza_llm_close(llm);
    ref_free(&r);
}

/* ---- cancel ------------------------------------------------------------------------------- */

typedef struct {
    eliza_llm_stream *st;
    uint64_t delay_ns;
    uint64_t cancelled_at;
} canceller;

static void cancel_later(void *arg) {
    canceller *cn = (canceller *)arg;
    uint64_t t0 = ez_time_ns();
    while (ez_time_ns() - t0 < cn->delay_ns) {}
    cn->cancelled_at = ez_time_ns();
    eliza_llm_stream_cancel(cn->st);
}

static void test_llm_stream_cancel(void) {
    spec s = base_spec("llama");
    ref_model r;
    eliza_llm *llm;
    eliza_llm_stream_config c;
    eliza_llm_stream *st = NULL;
    eliza_llm_piece piece;
    eliza_llm_stats stats;
    char prompt[480];

    s.n_embd = 256;
    s.head_dim = 64;
    s.n_ff = 768;
    s.n_layer = 8;
    write_model(&s, &r);
    llm = open_model(512, 32, 2);
    if (!llm) goto done;
    for (int i = 0; i < (int)sizeof prompt - 1; i++) prompt[i] = (char)('a' + i % 5);
    prompt[sizeof prompt - 1] = '\0';
    stream_config(&c, prompt);
    c.max_tokens = 0;

    /* Cancelled before it starts. */
    CHECK_RC(eliza_llm_stream_open(llm, &c, &st), ELIZA_OK);
    eliza_llm_stream_cancel(st);
    piece.struct_size = sizeof piece;
    CHECK_RC(eliza_llm_stream_next(st, &piece), ELIZA_E_CANCELLED);
    CHECK_RC(eliza_llm_stream_next(st, &piece), ELIZA_E_CANCELLED);
    stats.struct_size = sizeof stats;
    CHECK_RC(eliza_llm_stream_stats(st, &stats), ELIZA_OK);
    CHECK(stats.stop_reason == ELIZA_STOP_CANCELLED);
    eliza_llm_stream_close(st);

    /* Cancelled from another thread while the prompt runs: the running call
     * returns within a small part of the prompt's time (it polls between
     * layers: 8 layers x 15 batches here), whatever the machine's speed (the
     * test also runs under qemu). */
    {
        canceller cn;
        ez_thread *th;
        int32_t rc = ELIZA_OK;
        uint64_t returned_at, t0, full_ns;
        int32_t *ids = NULL;
        size_t n_ids = 0;
        float *lg = NULL;
        size_t cnt = 0;
        CHECK_RC(eliza_llm_tokenize(llm, prompt, strlen(prompt), ELIZA_TOKENIZE_ADD_BOS, &ids, &n_ids), ELIZA_OK);
        t0 = ez_time_ns();
        CHECK_RC(eliza_llm_logits(llm, ids, n_ids, 0, &lg, &cnt), ELIZA_OK);
        full_ns = ez_time_ns() - t0;
        eliza_free(lg);
        /* The cache now holds the prompt, which the stream would reuse: one
         * other token in its place, so the stream runs the whole prompt. */
        CHECK_RC(eliza_llm_logits(llm, ids + 1, 1, 0, &lg, &cnt), ELIZA_OK);
        eliza_free(lg);
        eliza_free(ids);
        CHECK_RC(eliza_llm_stream_open(llm, &c, &st), ELIZA_OK);
        cn.st = st;
        cn.delay_ns = full_ns / 4;
        cn.cancelled_at = 0;
        th = ez_thread_start(cancel_later, &cn);
        CHECK(th != NULL);
        for (int i = 0; i < 100000 && rc == ELIZA_OK; i++) {
            piece.struct_size = sizeof piece;
            rc = eliza_llm_stream_next(st, &piece);
        }
        returned_at = ez_time_ns();
        ez_thread_join(th);
        CHECK_RC(rc, ELIZA_E_CANCELLED);
        CHECK(cn.cancelled_at > 0 && returned_at - cn.cancelled_at < full_ns / 4);
        if (getenv("ELIZA_TEST_VERBOSE"))
            fprintf(stderr, "cancel: prompt %.1f ms, returned %.2f ms after the cancel\n", (double)full_ns / 1e6,
                    (double)(returned_at - cn.cancelled_at) / 1e6);
        eliza_llm_stream_close(st);
    }
    /* The model is usable afterwards. */
    stream_config(&c, "abc");
    {
        run_result res = run_stream(llm, &c);
        CHECK_RC(res.rc, ELIZA_DONE);
        CHECK(res.stats.generated_tokens == 20);
    }
done:
    eliza_llm_close(llm);
    ref_free(&r);
}

typedef struct {
    eliza_llm *llm;
    uint64_t delay_ns;
} llm_canceller;

static void cancel_llm_later(void *arg) {
    llm_canceller *cn = (llm_canceller *)arg;
    uint64_t t0 = ez_time_ns();
    while (ez_time_ns() - t0 < cn->delay_ns) {}
    eliza_llm_cancel(cn->llm);
}

/* eliza_llm_cancel stops a running eliza_llm_logits; closing the model
 * under an open stream detaches the stream (ELIZA_E_STATE, no dangling
 * model). */
static void test_llm_cancel_logits_and_close_under_a_stream(void) {
    spec s = base_spec("llama");
    ref_model r;
    eliza_llm *llm;
    eliza_llm_stream_config c;
    eliza_llm_stream *st = NULL;
    eliza_llm_piece piece;
    eliza_llm_stats stats;
    int32_t ids[400];
    float *lg = NULL;
    size_t cnt = 0;
    uint64_t t0, full_ns;
    llm_canceller cn;
    ez_thread *th;

    s.n_embd = 256;
    s.head_dim = 64;
    s.n_ff = 768;
    s.n_layer = 8;
    write_model(&s, &r);
    llm = open_model(512, 32, 2);
    if (!llm) goto done;
    for (int i = 0; i < 400; i++) ids[i] = 3 + i % 50;
    t0 = ez_time_ns();
    CHECK_RC(eliza_llm_logits(llm, ids, 400, 0, &lg, &cnt), ELIZA_OK);
    full_ns = ez_time_ns() - t0;
    eliza_free(lg);
    lg = NULL;
    cn.llm = llm;
    cn.delay_ns = full_ns / 4;
    th = ez_thread_start(cancel_llm_later, &cn);
    CHECK(th != NULL);
    CHECK_RC(eliza_llm_logits(llm, ids, 400, 0, &lg, &cnt), ELIZA_E_CANCELLED);
    CHECK(lg == NULL && cnt == 0);
    ez_thread_join(th);
    CHECK_RC(eliza_llm_logits(llm, ids, 4, 0, &lg, &cnt), ELIZA_OK); /* a later call starts afresh */
    eliza_free(lg);

    stream_config(&c, "abc");
    CHECK_RC(eliza_llm_stream_open(llm, &c, &st), ELIZA_OK);
    piece.struct_size = sizeof piece;
    CHECK_RC(eliza_llm_stream_next(st, &piece), ELIZA_OK);
    eliza_llm_close(llm);
    CHECK_RC(eliza_llm_stream_next(st, &piece), ELIZA_E_STATE);
    stats.struct_size = sizeof stats;
    CHECK_RC(eliza_llm_stream_stats(st, &stats), ELIZA_OK);
    eliza_llm_stream_close(st);
done:
    ref_free(&r);
}

/* ---- load errors --------------------------------------------------------------------------- */

static int32_t open_bytes(const buf *b) {
    eliza_llm *llm = NULL;
    int32_t rc;
    write_file(k_path, b->p, b->len);
    rc = eliza_llm_open(k_path, NULL, &llm);
    CHECK((rc == ELIZA_OK) == (llm != NULL));
    eliza_llm_close(llm);
    return rc;
}

static int message_has(const char *needle) {
    if (strstr(eliza_last_error(), needle)) return 1;
    fprintf(stderr, "message '%s' lacks '%s'\n", eliza_last_error(), needle);
    return 0;
}

/* The file spec s builds fails to open with rc, the message holding needle (when not NULL). */
static void expect_spec_refused(const spec *s, int32_t rc, const char *needle) {
    ref_model r;
    gguf_w w;
    buf b;
    build_model(s, &w, &r);
    b = gguf_bytes(&w);
    CHECK_RC(open_bytes(&b), rc);
    if (needle) CHECK(message_has(needle));
    free(b.p);
    gguf_free(&w);
    ref_free(&r);
}

static void test_llm_open_rejects_bad_files(void) {
    spec s = base_spec("llama");
    ref_model r;
    gguf_w w;
    buf b;
    eliza_llm *llm = NULL;
    eliza_llm_params p;

    /* Valid, then truncated at many points: FORMAT (or IO), never a crash. */
    build_model(&s, &w, &r);
    b = gguf_bytes(&w);
    CHECK_RC(open_bytes(&b), ELIZA_OK);
    for (size_t cut = 0; cut < b.len; cut += 1 + b.len / 97) {
        buf t = b;
        int32_t rc;
        t.len = cut;
        rc = open_bytes(&t);
        CHECK(rc == ELIZA_E_FORMAT || rc == ELIZA_E_IO);
    }
    free(b.p);

    /* A missing tensor names itself. */
    drop_tensor(&w, "blk.1.ffn_up.weight");
    b = gguf_bytes(&w);
    CHECK_RC(open_bytes(&b), ELIZA_E_FORMAT);
    CHECK(message_has("blk.1.ffn_up.weight"));
    free(b.p);
    gguf_free(&w);
    ref_free(&r);

    /* A shape that contradicts the hyperparameters. */
    build_model(&s, &w, &r);
    find_tensor(&w, "blk.0.attn_q.weight")->ne[1] = 32;
    find_tensor(&w, "blk.0.attn_q.weight")->nbytes = 32 * 64 * 4;
    b = gguf_bytes(&w);
    CHECK_RC(open_bytes(&b), ELIZA_E_FORMAT);
    CHECK(message_has("blk.0.attn_q.weight"));
    free(b.p);
    gguf_free(&w);
    ref_free(&r);

    /* Not a language model. */
    s.arch = "kokoro";
    expect_spec_refused(&s, ELIZA_E_UNSUPPORTED, "kokoro");

    /* Heads that do not divide. */
    s = base_spec("llama");
    s.n_head_kv = 3;
    expect_spec_refused(&s, ELIZA_E_FORMAT, NULL);

    /* Metadata out of range or not a number: the message names the key. */
    s = base_spec("llama");
    s.n_ctx_train = 0;
    expect_spec_refused(&s, ELIZA_E_FORMAT, "metadata 'llama.context_length' = 0 is outside [1, 2147483647]");
    s = base_spec("llama");
    s.eps = NAN;
    expect_spec_refused(&s, ELIZA_E_FORMAT,
                        "metadata 'llama.attention.layer_norm_rms_epsilon' = nan is not a finite number");
    /* The loader's stages (architecture, sizes, norm and rope) each refuse
     * their own keys: the first two above, the third here. */
    s = base_spec("llama");
    s.rope_base = 1.0f;
    expect_spec_refused(&s, ELIZA_E_FORMAT, "rope base 1 / 10000 must be above 1");

    /* Missing file; NULL arguments; struct_size too small. */
    CHECK_RC(eliza_llm_open("/nonexistent/model.gguf", NULL, &llm), ELIZA_E_IO);
    CHECK_RC(eliza_llm_open(NULL, NULL, &llm), ELIZA_E_INVALID_ARG);
    CHECK_RC(eliza_llm_open(k_path, NULL, NULL), ELIZA_E_INVALID_ARG);
    eliza_llm_default_params(&p);
    p.struct_size = 4;
    s = base_spec("llama");
    write_model(&s, &r);
    CHECK_RC(eliza_llm_open(k_path, &p, &llm), ELIZA_E_ABI);
    eliza_llm_default_params(&p);
    p.n_threads = -2;
    CHECK_RC(eliza_llm_open(k_path, &p, &llm), ELIZA_E_INVALID_ARG);
    ref_free(&r);
}

static void test_llm_api_arguments(void) {
    spec s = base_spec("llama");
    ref_model r;
    eliza_llm *llm;
    int32_t *ids = NULL, bad[2] = {1, N_VOCAB + 5};
    size_t n = 0, len = 0;
    char *text = NULL, *json = NULL;
    float *lg = NULL;

    /* F32 keys and values of 16 positions, every layer */
    const unsigned long long kv_bytes = (unsigned long long)s.n_layer * 16 * 2 * s.n_head_kv * s.head_dim * 4;

    write_model(&s, &r);
    llm = open_model(16, 4, 1);
    if (!llm) goto done;
    CHECK_RC(eliza_llm_tokenize(llm, "hello", 5, ELIZA_TOKENIZE_ADD_BOS, &ids, &n), ELIZA_OK);
    CHECK_RC(eliza_llm_detokenize(llm, ids, n, 0, &text, &len), ELIZA_OK);
    CHECK(text && len == 5 && strcmp(text, "hello") == 0);
    eliza_free(text);
    CHECK_RC(eliza_llm_detokenize(llm, bad, 2, 0, &text, &len), ELIZA_E_INVALID_ARG);
    CHECK_RC(eliza_llm_logits(llm, bad, 2, 0, &lg, &n), ELIZA_E_INVALID_ARG);
    CHECK_RC(eliza_llm_logits(llm, ids, 0, 0, &lg, &n), ELIZA_E_INVALID_ARG);
    {
        int32_t many[17] = {1};
        CHECK_RC(eliza_llm_logits(llm, many, 17, 0, &lg, &n), ELIZA_E_CONTEXT_FULL);
    }
    CHECK_RC(eliza_llm_info_json(llm, &json), ELIZA_OK);
    CHECK(json && strstr(json, "\"architecture\": \"llama\"") && strstr(json, "\"context_size\": 16"));
    CHECK(json && strstr(json, "\"kv_type\": \"f32\"") && strstr(json, "\"kv_bytes\": ") &&
          strtoull(strstr(json, "\"kv_bytes\": ") + 12, NULL, 10) == kv_bytes);
    eliza_free(json);
    {
        /* An F16 cache: half the bytes; an unknown type is refused. */
        eliza_llm *half = open_model_kv(16, 4, 1, ELIZA_LLM_KV_F16), *bad_llm = NULL;
        eliza_llm_params p;
        CHECK_RC(eliza_llm_info_json(half, &json), ELIZA_OK);
        CHECK(json && strstr(json, "\"kv_type\": \"f16\"") &&
              strtoull(strstr(json, "\"kv_bytes\": ") + 12, NULL, 10) == kv_bytes / 2);
        eliza_free(json);
        eliza_llm_close(half);
        eliza_llm_default_params(&p);
        p.kv_type = 6;
        CHECK_RC(eliza_llm_open(k_path, &p, &bad_llm), ELIZA_E_INVALID_ARG);
        CHECK(bad_llm == NULL && strstr(eliza_last_error(), "kv_type 6"));
        p.kv_type = ELIZA_LLM_KV_F16;
        p.kv_type_v = 77;
        CHECK_RC(eliza_llm_open(k_path, &p, &bad_llm), ELIZA_E_INVALID_ARG);
        CHECK(bad_llm == NULL && strstr(eliza_last_error(), "kv_type_v 77"));
        /* The block types need head sizes that are multiples of 32 (16 here). */
        p.kv_type = ELIZA_LLM_KV_Q8_0;
        p.kv_type_v = ELIZA_LLM_KV_AS_K;
        CHECK_RC(eliza_llm_open(k_path, &p, &bad_llm), ELIZA_E_INVALID_ARG);
        CHECK(bad_llm == NULL && strstr(eliza_last_error(), "q8_0 key cache needs a head size that is a multiple of 32"));
        p.kv_type = ELIZA_LLM_KV_F16;
        p.kv_type_v = ELIZA_LLM_KV_TBQ3_0;
        CHECK_RC(eliza_llm_open(k_path, &p, &bad_llm), ELIZA_E_INVALID_ARG);
        CHECK(bad_llm == NULL && strstr(eliza_last_error(), "tbq3_0 value cache"));
        p.kv_type_v = ELIZA_LLM_KV_AS_K;
        /* A host built before kv_type existed: the field is not read, F32. */
        p.kv_type = ELIZA_LLM_KV_F16;
        p.context_size = 16;
        p.struct_size = (uint32_t)offsetof(eliza_llm_params, kv_type);
        CHECK_RC(eliza_llm_open(k_path, &p, &bad_llm), ELIZA_OK);
        CHECK_RC(eliza_llm_info_json(bad_llm, &json), ELIZA_OK);
        CHECK(json && strstr(json, "\"kv_type\": \"f32\""));
        eliza_free(json);
        eliza_llm_close(bad_llm);
    }
    CHECK_RC(eliza_llm_info_json(NULL, &json), ELIZA_E_INVALID_ARG);
    {
        /* Token scores: -log softmax of the next token, finite and positive. */
        const int32_t t3[3] = {1, 5, 6};
        double nll[2] = {0, 0};
        CHECK_RC(eliza_llm_token_nll(NULL, t3, 3, 0, nll), ELIZA_E_INVALID_ARG);
        CHECK_RC(eliza_llm_token_nll(llm, t3, 3, 0, NULL), ELIZA_E_INVALID_ARG);
        CHECK_RC(eliza_llm_token_nll(llm, t3, 3, 2, nll), ELIZA_E_INVALID_ARG);
        CHECK_RC(eliza_llm_token_nll(llm, t3, 1, 0, nll), ELIZA_E_INVALID_ARG);
        CHECK_RC(eliza_llm_token_nll(llm, t3, 3, 0, nll), ELIZA_OK);
        CHECK(isfinite(nll[0]) && nll[0] > 0 && isfinite(nll[1]) && nll[1] > 0);
    }
    eliza_free(ids);
done:
    eliza_llm_close(llm);
    eliza_llm_close(NULL);
    ref_free(&r);
}

/* ---- sessions: rewind, hidden states, several sessions over one model ---------------- */

typedef struct {
    ez_llm_model *m;
    ez_pool *pool;
} loaded;

static int load_written(loaded *l) {
    ez_gguf *g = NULL;
    memset(l, 0, sizeof *l);
    CHECK_RC(ez_gguf_open(k_path, &g), ELIZA_OK);
    if (!g) return 0;
    CHECK_RC(ez_llm_model_load(g, &l->m), ELIZA_OK);
    l->pool = ez_pool_create(2);
    CHECK(l->pool != NULL);
    return l->m && l->pool;
}

static void loaded_free(loaded *l) {
    ez_pool_destroy(l->pool);
    ez_llm_model_free(l->m);
}

/* gemma3's window of 5 in a ring of 5 + 4 rows: a session that ran 21
 * tokens, rewound 5 (the most a ring allows past its window: n_batch + 1)
 * and ran 4 others gives bit for bit the logits of a session that ran the 16
 * then the 4 in the same batches; so does re-running the dropped tokens;
 * one more position back is refused. Both sessions share one model. */
static void test_llm_session_rewind_matches_a_fresh_session(void) {
    spec s = base_spec("gemma3");
    ref_model r;
    loaded l;
    ez_llm_session *a = NULL, *b = NULL;
    int32_t tokens[32], other[4];
    float *la = (float *)xmalloc(sizeof(float) * 4 * N_VOCAB), *lb = (float *)xmalloc(sizeof(float) * 4 * N_VOCAB);
    float *hidden = (float *)xmalloc(sizeof(float) * 4 * 64), *lh = (float *)xmalloc(sizeof(float) * N_VOCAB);
    int finite = 1;

    write_model(&s, &r);
    g_rng = 4242;
    random_tokens(tokens, 21);
    random_tokens(other, 4);
    other[0] = 7;
    if (!load_written(&l)) goto done;
    CHECK_RC(ez_llm_session_create(l.m, l.pool, 40, 4, EZ_KV_F32, EZ_KV_F32, &a), ELIZA_OK);
    CHECK_RC(ez_llm_session_create(l.m, l.pool, 40, 4, EZ_KV_F32, EZ_KV_F32, &b), ELIZA_OK);
    if (!a || !b) goto done;
    CHECK_RC(ez_llm_session_eval(a, tokens, 21, NULL, 0, NULL, NULL), ELIZA_OK);
    CHECK(ez_llm_session_n_pos(a) == 21 && ez_llm_session_tokens(a)[20] == tokens[20]);
    CHECK_RC(ez_llm_session_rewind(a, 6), ELIZA_E_INVALID_ARG);
    CHECK(ez_llm_session_n_pos(a) == 21);
    CHECK_RC(ez_llm_session_rewind(a, 5), ELIZA_OK);
    CHECK_RC(ez_llm_session_eval(a, other, 4, la, 1, NULL, NULL), ELIZA_OK);
    CHECK_RC(ez_llm_session_eval(b, tokens, 16, NULL, 0, NULL, NULL), ELIZA_OK);
    CHECK_RC(ez_llm_session_eval(b, other, 4, lb, 1, hidden, NULL), ELIZA_OK);
    CHECK(memcmp(la, lb, sizeof(float) * 4 * N_VOCAB) == 0);
    /* the same tokens again after a rewind: the same logits */
    CHECK_RC(ez_llm_session_rewind(b, 4), ELIZA_OK);
    CHECK_RC(ez_llm_session_eval(b, other, 4, lb, 1, NULL, NULL), ELIZA_OK);
    CHECK(memcmp(la, lb, sizeof(float) * 4 * N_VOCAB) == 0);
    /* hidden states after the final norm: one row per token, finite, and
     * asking for them does not change the logits */
    for (int i = 0; i < 4 * 64; i++) finite &= isfinite(hidden[i]) && (i % 64 || hidden[i] != 0.0f);
    CHECK(finite);
    CHECK_RC(ez_llm_session_rewind(b, 1), ELIZA_OK);
    CHECK_RC(ez_llm_session_eval(b, other + 3, 1, lh, 0, NULL, NULL), ELIZA_OK);
    CHECK_RC(ez_llm_session_rewind(a, 1), ELIZA_OK);
    CHECK_RC(ez_llm_session_eval(a, other + 3, 1, lb, 0, hidden, NULL), ELIZA_OK);
    CHECK(memcmp(lh, lb, sizeof(float) * N_VOCAB) == 0);
    /* the speculative recipe: a STATES snapshot, k = 4 drafted tokens with
     * all their logits, restore, the accepted 2 again: what the draft's
     * first two rows said */
    {
        ez_kv_snapshot *snap = NULL;
        float *l4 = (float *)xmalloc(sizeof(float) * 4 * N_VOCAB);
        CHECK_RC(ez_kv_snapshot_take(ez_llm_session_cache(b), EZ_KV_SNAP_STATES, &snap), ELIZA_OK);
        CHECK_RC(ez_llm_session_eval(b, tokens, 4, l4, 1, NULL, NULL), ELIZA_OK);
        CHECK_RC(ez_kv_snapshot_restore(ez_llm_session_cache(b), snap), ELIZA_OK);
        CHECK(ez_llm_session_n_pos(b) == 20);
        CHECK_RC(ez_llm_session_eval(b, tokens, 4, la, 1, NULL, NULL), ELIZA_OK);
        CHECK(memcmp(la, l4, sizeof(float) * 4 * N_VOCAB) == 0);
        ez_kv_snapshot_free(snap);
        free(l4);
    }
    /* the whole context: full, nothing evaluated */
    CHECK_RC(ez_llm_session_eval(a, tokens, 21, NULL, 0, NULL, NULL), ELIZA_E_CONTEXT_FULL);
    CHECK(ez_llm_session_n_pos(a) == 20);
done:
    ez_llm_session_free(a);
    ez_llm_session_free(b);
    loaded_free(&l);
    free(la);
    free(lb);
    free(hidden);
    free(lh);
    ref_free(&r);
}

/* Prompt-prefix reuse: a prompt that begins with what the session holds
 * evaluates only the rest, and its logits are bit for bit those of a cold
 * session (the suffix starts at a multiple of n_batch here, so both run the
 * same passes). gemma3's ring (window 5 + batch 4) reaches 5 positions back:
 * further, the whole prompt runs again; llama's global cache goes back
 * anywhere. */
static void test_llm_session_prompt_reuses_the_held_prefix(void) {
    static const char *const archs[] = {"gemma3", "llama"};
    for (size_t ia = 0; ia < 2; ia++) {
        spec s = base_spec(archs[ia]);
        const int ring = ia == 0;
        ref_model r;
        loaded l;
        ez_llm_session *warm = NULL, *cold = NULL;
        int32_t p1[12], p2[13], p3[14], reused = -1;
        float *lw = (float *)xmalloc(sizeof(float) * N_VOCAB), *lc = (float *)xmalloc(sizeof(float) * N_VOCAB);

        write_model(&s, &r);
        g_rng = 99 + ia;
        random_tokens(p1, 12);
        memcpy(p2, p1, sizeof(int32_t) * 8);
        random_tokens(p2 + 8, 5);
        p2[8] = p1[8] == 5 ? 6 : 5;
        memcpy(p3, p2, sizeof(int32_t) * 4);
        random_tokens(p3 + 4, 10);
        p3[4] = p2[4] == 5 ? 6 : 5;
        if (!load_written(&l)) goto next;
        CHECK_RC(ez_llm_session_create(l.m, l.pool, 40, 4, EZ_KV_F32, EZ_KV_F32, &warm), ELIZA_OK);
        CHECK_RC(ez_llm_session_create(l.m, l.pool, 40, 4, EZ_KV_F32, EZ_KV_F32, &cold), ELIZA_OK);
        if (!warm || !cold) goto next;
        CHECK_RC(ez_llm_session_eval_prompt(warm, p1, 12, lw, NULL, NULL, &reused), ELIZA_OK);
        CHECK(reused == 0);
        /* 8 shared: 4 back from 12, inside the ring's reach */
        CHECK_RC(ez_llm_session_eval_prompt(warm, p2, 13, lw, NULL, NULL, &reused), ELIZA_OK);
        CHECK(reused == 8 && ez_llm_session_n_pos(warm) == 13);
        CHECK_RC(ez_llm_session_eval_prompt(cold, p2, 13, lc, NULL, NULL, &reused), ELIZA_OK);
        CHECK(reused == 0);
        CHECK(memcmp(lw, lc, sizeof(float) * N_VOCAB) == 0);
        /* 4 shared: 9 back, past the ring */
        CHECK_RC(ez_llm_session_eval_prompt(warm, p3, 14, lw, NULL, NULL, &reused), ELIZA_OK);
        CHECK(reused == (ring ? 0 : 4));
        ez_llm_session_clear(cold);
        CHECK_RC(ez_llm_session_eval_prompt(cold, p3, 14, lc, NULL, NULL, &reused), ELIZA_OK);
        CHECK(reused == 0);
        CHECK(memcmp(lw, lc, sizeof(float) * N_VOCAB) == 0);
        /* the same prompt again: back to where the pass of its last token
         * began (passes of 4: position 12), and the same logits */
        CHECK_RC(ez_llm_session_eval_prompt(warm, p3, 14, lw, NULL, NULL, &reused), ELIZA_OK);
        CHECK(reused == 12 && ez_llm_session_n_pos(warm) == 14);
        CHECK(memcmp(lw, lc, sizeof(float) * N_VOCAB) == 0);
        /* a prompt that shares nothing */
        CHECK_RC(ez_llm_session_eval_prompt(warm, p1 + 1, 3, lw, NULL, NULL, &reused), ELIZA_OK);
        CHECK(reused == 0 && ez_llm_session_n_pos(warm) == 3);
        CHECK_RC(ez_llm_session_eval_prompt(warm, p1, 0, lw, NULL, NULL, &reused), ELIZA_E_INVALID_ARG);
    next:
        ez_llm_session_free(warm);
        ez_llm_session_free(cold);
        loaded_free(&l);
        free(lw);
        free(lc);
        ref_free(&r);
    }
}

/* The backend seam: a backend that records each step and hands it to the
 * CPU one (rec_backend.h) sees the whole pass (every product, every layer's
 * attention, the embedding and the softcap) and gives the session's logits
 * bit for bit; a
 * failing product fails the pass with its code and nothing is held. */
static void test_llm_forward_runs_through_the_backend_seam(void) {
    spec s = base_spec("gemma3");
    ref_model r;
    loaded l;
    ez_kv_layer_spec specs[8];
    ez_kv_cache *kv = NULL;
    ez_llm_fwd *fwd = NULL;
    ez_llm_session *sess = NULL;
    rec_backend rb;
    int32_t tokens[10];
    float *lr = (float *)xmalloc(sizeof(float) * 2 * N_VOCAB), *ls = (float *)xmalloc(sizeof(float) * 2 * N_VOCAB);

    memset(&rb, 0, sizeof rb);
    rb.base.ops = &REC_OPS;
    write_model(&s, &r);
    g_rng = 31;
    random_tokens(tokens, 10);
    if (!load_written(&l)) goto done;
    for (int il = 0; il < l.m->hp.n_layer; il++) {
        memset(&specs[il], 0, sizeof specs[il]);
        specs[il].type_k = specs[il].type_v = EZ_KV_F32;
        specs[il].n_head_kv = l.m->hp.n_head_kv;
        specs[il].head_dim_k = specs[il].head_dim_v = l.m->hp.head_dim;
        specs[il].n_swa = l.m->layers[il].is_swa ? l.m->hp.n_swa : 0;
        specs[il].alias = -1;
    }
    CHECK_RC(ez_kv_cache_create(specs, l.m->hp.n_layer, 40, 8, &kv), ELIZA_OK);
    if (kv) CHECK_RC(ez_llm_backend_cpu_create(l.pool, &l.m->hp, kv, &rb.cpu), ELIZA_OK);
    if (rb.cpu) CHECK_RC(ez_llm_fwd_create(l.m, &rb.base, kv, 8, &fwd), ELIZA_OK);
    CHECK_RC(ez_llm_session_create(l.m, l.pool, 40, 8, EZ_KV_F32, EZ_KV_F32, &sess), ELIZA_OK);
    if (!fwd || !sess) goto done;
    /* passes of 8 then 2, the last with every row's logits */
    CHECK_RC(ez_llm_forward(fwd, tokens, 8, NULL, 0, NULL, NULL), ELIZA_OK);
    CHECK_RC(ez_llm_forward(fwd, tokens + 8, 2, lr, 1, NULL, NULL), ELIZA_OK);
    CHECK_RC(ez_llm_session_eval(sess, tokens, 8, NULL, 0, NULL, NULL), ELIZA_OK);
    CHECK_RC(ez_llm_session_eval(sess, tokens + 8, 2, ls, 1, NULL, NULL), ELIZA_OK);
    CHECK(memcmp(lr, ls, sizeof(float) * 2 * N_VOCAB) == 0);
    CHECK(kv->n_pos == 10);
    /* per pass: the embedding, 4 products and one attention per layer; the
     * logits' product and softcap once; gemma3's 6 norms per layer plus q/k */
    CHECK(rb.calls[REC_EMBED] == 2);
    CHECK(rb.calls[REC_MATMUL] == 2 * 4 * s.n_layer + 1);
    CHECK(rb.calls[REC_ATTN] == 2 * s.n_layer);
    CHECK(rb.calls[REC_ROPE] == 2 * 2 * s.n_layer);
    CHECK(rb.calls[REC_GLU] == 2 * s.n_layer && rb.calls[REC_ADD] == 2 * 2 * s.n_layer);
    CHECK(rb.calls[REC_NORM] == 2 * 6 * s.n_layer + 1 && rb.calls[REC_SOFTCAP] == 1);
    CHECK(rb.calls[REC_BIAS] == 0); /* gemma3 has no biases */
    rb.fail_matmul = ELIZA_E_NOMEM;
    CHECK_RC(ez_llm_forward(fwd, tokens, 1, lr, 0, NULL, NULL), ELIZA_E_NOMEM);
    CHECK(kv->n_pos == 10);
done:
    ez_llm_session_free(sess);
    ez_llm_fwd_free(fwd);
    if (rb.cpu) rb.cpu->ops->free(rb.cpu);
    ez_kv_cache_free(kv);
    loaded_free(&l);
    free(lr);
    free(ls);
    ref_free(&r);
}

#if defined(ELIZA_VULKAN)
/* ---- the engine on the GPU (eliza_llm_params.n_gpu_layers) ------------------------------- */

static void set_env(const char *name, const char *value) {
#if defined(_WIN32)
    _putenv_s(name, value);
#else
    setenv(name, value, 1);
#endif
}

/* The log lines the library sent, for the fallback's reason. */
static char g_log[8192];
static size_t g_log_len;
static void capture_log(int32_t level, const char *message, void *user) {
    const size_t n = strlen(message);
    (void)level;
    (void)user;
    if (g_log_len + n + 2 < sizeof g_log) {
        memcpy(g_log + g_log_len, message, n);
        g_log_len += n;
        g_log[g_log_len++] = '\n';
        g_log[g_log_len] = '\0';
    }
}

static eliza_llm *open_gpu(int32_t n_ctx, int32_t n_gpu_layers, const char *device, uint32_t required,
                           uint32_t kv_type, int32_t *rc) {
    eliza_llm_params p;
    eliza_llm *llm = NULL;
    eliza_llm_default_params(&p);
    p.context_size = (uint32_t)n_ctx;
    p.n_batch = 4;
    p.n_threads = 2;
    p.kv_type = kv_type;
    p.n_gpu_layers = n_gpu_layers;
    p.gpu_device = device;
    p.gpu_required = required;
    *rc = eliza_llm_open(k_path, &p, &llm);
    return llm;
}

static char *info_of(const eliza_llm *llm) {
    char *json = NULL;
    CHECK_RC(eliza_llm_info_json(llm, &json), ELIZA_OK);
    return json;
}

/* The tiny models through eliza_llm_open with every layer on the GPU,
 * against the same file on the CPU: the logits of every position (past
 * gemma3's 5-token window), greedy text, seeded sampling (the logits agree
 * to ~1e-6 of their range, far inside the gaps between the cumulative
 * probabilities a draw lands on, so the same seed draws the same tokens),
 * prefix reuse of a second prompt, token_nll, n-gram speculative decoding,
 * and closing the model under an open stream. F32 and F16 weights: the CPU
 * engine quantizes activations for block-quantized weights and the GPU
 * does not, so only float weights are held to a tight bound. */
static void test_llm_gpu_engine_matches_the_cpu_engine(const char *device) {
    static const char *const archs[] = {"gemma3", "llama", "gemma3"};
    for (size_t ai = 0; ai < sizeof archs / sizeof archs[0]; ai++) {
        enum { N_TOK = 12, N_CTX = 64 };
        spec s = base_spec(archs[ai]);
        ref_model r;
        eliza_llm *cpu, *gpu;
        eliza_llm_stream_config c;
        run_result rc_cpu, rg;
        int32_t tokens[N_TOK], rc;
        float *lc = NULL, *lg = NULL;
        size_t nc = 0, ng = 0;
        double diff = 0.0, top = 0.0, nll_c[N_TOK], nll_g[N_TOK], nll_diff = 0.0;
        char *json;
        if (ai == 2) s.wtype = EZ_TYPE_F16;
        write_model(&s, &r);
        ref_free(&r);
        cpu = open_model(N_CTX, 4, 2);
        gpu = open_gpu(N_CTX, -1, device, 1, ELIZA_LLM_KV_F32, &rc);
        CHECK_RC(rc, ELIZA_OK);
        if (!cpu || !gpu) {
            eliza_llm_close(cpu);
            eliza_llm_close(gpu);
            continue;
        }
        json = info_of(gpu);
        CHECK(json && strstr(json, "\"backend\": \"vulkan: ") && strstr(json, "\"gpu_layers\": 3") &&
              strstr(json, "\"gpu_fallback\": null"));
        eliza_free(json);

        g_rng = 99;
        random_tokens(tokens, N_TOK);
        CHECK_RC(eliza_llm_logits(cpu, tokens, N_TOK, 1, &lc, &nc), ELIZA_OK);
        CHECK_RC(eliza_llm_logits(gpu, tokens, N_TOK, 1, &lg, &ng), ELIZA_OK);
        CHECK(nc == ng && nc == (size_t)N_TOK * N_VOCAB);
        for (size_t i = 0; lc && lg && i < nc; i++) {
            const double e = fabs((double)lg[i] - lc[i]);
            diff = e > diff || e != e ? e : diff;
            top = fabs((double)lc[i]) > top ? fabs((double)lc[i]) : top;
        }
        CHECK_RC(eliza_llm_token_nll(cpu, tokens, N_TOK, 2, nll_c), ELIZA_OK);
        CHECK_RC(eliza_llm_token_nll(gpu, tokens, N_TOK, 2, nll_g), ELIZA_OK);
        for (int i = 0; i < N_TOK - 3; i++)
            nll_diff = fabs(nll_g[i] - nll_c[i]) > nll_diff ? fabs(nll_g[i] - nll_c[i]) : nll_diff;

        /* Greedy: the device's argmax (4 bytes a token) gives the CPU's text. */
        stream_config(&c, "hello world");
        c.max_tokens = 16;
        rc_cpu = run_stream(cpu, &c);
        rg = run_stream(gpu, &c);
        CHECK_RC(rg.rc, ELIZA_DONE);
        CHECK(rg.n_tokens == rc_cpu.n_tokens && rg.n_tokens > 0 &&
              memcmp(rg.tokens, rc_cpu.tokens, sizeof(int32_t) * (size_t)rg.n_tokens) == 0);
        CHECK(rg.text_len == rc_cpu.text_len && memcmp(rg.text, rc_cpu.text, rg.text_len) == 0);
        /* A longer prompt that begins with the first one and its output:
         * the GPU session keeps that prefix and evaluates only the rest. */
        {
            char prompt[4200];
            run_result again_cpu, again_gpu;
            snprintf(prompt, sizeof prompt, "hello world%.*s and more", (int)EZ_MIN(rg.text_len, 12), rg.text);
            c.prompt = prompt;
            c.max_tokens = 6;
            again_gpu = run_stream(gpu, &c);
            again_cpu = run_stream(cpu, &c);
            CHECK_RC(again_gpu.rc, ELIZA_DONE);
            CHECK(again_gpu.stats.prompt_evaluated < again_gpu.stats.prompt_tokens);
            CHECK(again_gpu.n_tokens == again_cpu.n_tokens &&
                  memcmp(again_gpu.tokens, again_cpu.tokens, sizeof(int32_t) * (size_t)again_gpu.n_tokens) == 0);
            /* Back to the short prompt: a rewind inside what the GPU holds. */
            c.prompt = "hello world";
            c.max_tokens = 16;
            again_gpu = run_stream(gpu, &c);
            CHECK(again_gpu.stats.prompt_evaluated == 1);
            CHECK(again_gpu.n_tokens == rc_cpu.n_tokens &&
                  memcmp(again_gpu.tokens, rc_cpu.tokens, sizeof(int32_t) * (size_t)rc_cpu.n_tokens) == 0);
        }
        /* Sampling with a seed reads the logits back and draws as the CPU does. */
        c.temperature = 0.9f;
        c.top_k = 0;
        c.top_p = 1.0f;
        c.min_p = 0.0f;
        c.repeat_penalty = 1.1f;
        c.seed = 31337;
        rc_cpu = run_stream(cpu, &c);
        rg = run_stream(gpu, &c);
        CHECK(rg.n_tokens == rc_cpu.n_tokens && rg.n_tokens > 0 &&
              memcmp(rg.tokens, rc_cpu.tokens, sizeof(int32_t) * (size_t)rg.n_tokens) == 0);
        printf("  GPU engine, %s %s weights: max |gpu - cpu| logit %.3g (logits up to %.3g), token_nll %.3g; "
               "greedy %d tokens equal, sampled %d equal\n",
               archs[ai], ai == 2 ? "F16" : "F32", diff, top, nll_diff, rc_cpu.n_tokens, rg.n_tokens);
        CHECK(diff <= 1e-4 * top);
        CHECK(nll_diff <= 1e-4);
        eliza_free(lc);
        eliza_free(lg);
        eliza_llm_close(cpu);

        /* Closing the model under an open stream: the stream fails with
         * ELIZA_E_STATE and still closes. */
        {
            eliza_llm_stream *st = NULL;
            eliza_llm_piece piece;
            stream_config(&c, "hello");
            CHECK_RC(eliza_llm_stream_open(gpu, &c, &st), ELIZA_OK);
            memset(&piece, 0, sizeof piece);
            piece.struct_size = sizeof piece;
            CHECK_RC(eliza_llm_stream_next(st, &piece), ELIZA_OK);
            eliza_llm_close(gpu);
            CHECK_RC(eliza_llm_stream_next(st, &piece), ELIZA_E_STATE);
            eliza_llm_stream_close(st);
        }
    }
}

/* The prompt pass (several tokens, the last position's logits): gemma3
 * (local layers with a 5-token window and their own rope base, so two
 * angle tables) and llama with F32 weights, against the CPU engine's last
 * position: 12 tokens (a bucket of 16, 4 rows of padding; past two
 * windows), 64 (a whole bucket) and 530 (longer than the largest bucket of
 * 512: two pieces, the second of 18 rows over the first's cache rows). */
static void test_llm_gpu_engine_prompt_pass(const char *device) {
    static const char *const archs[] = {"gemma3", "llama"};
    static const int lengths[] = {12, 64, 530};
    enum { N_CTX = 600, MAX_TOK = 530 };
    for (size_t ai = 0; ai < sizeof archs / sizeof archs[0]; ai++) {
        spec s = base_spec(archs[ai]);
        ref_model r;
        eliza_llm *cpu, *gpu;
        int32_t tokens[MAX_TOK], rc;
        s.n_ctx_train = 1024;
        s.rope_base_swa = 1000.0f;
        write_model(&s, &r);
        ref_free(&r);
        cpu = open_model(N_CTX, 64, 2);
        gpu = open_gpu(N_CTX, -1, device, 1, ELIZA_LLM_KV_F32, &rc);
        CHECK_RC(rc, ELIZA_OK);
        for (size_t li = 0; cpu && gpu && li < sizeof lengths / sizeof lengths[0]; li++) {
            const int n = lengths[li];
            float *lc = NULL, *lg = NULL;
            size_t nc = 0, ng = 0;
            double diff = 0.0, top = 0.0;
            int bc = 0, bg = 0;
            g_rng = 7 + li;
            random_tokens(tokens, n);
            CHECK_RC(eliza_llm_logits(cpu, tokens, (size_t)n, 0, &lc, &nc), ELIZA_OK);
            CHECK_RC(eliza_llm_logits(gpu, tokens, (size_t)n, 0, &lg, &ng), ELIZA_OK);
            CHECK(nc == ng && nc == (size_t)N_VOCAB);
            for (size_t i = 0; lc && lg && nc == ng && i < nc; i++) {
                const double e = fabs((double)lg[i] - lc[i]);
                diff = e > diff || e != e ? e : diff;
                top = fabs((double)lc[i]) > top ? fabs((double)lc[i]) : top;
                if (lc[i] > lc[bc]) bc = (int)i;
                if (lg[i] > lg[bg]) bg = (int)i;
            }
            CHECK_MSG(diff <= 1e-4 * top && bc == bg, "GPU prompt pass, %s, %d tokens: max |gpu - cpu| %.3g of %.3g, "
                      "top-1 %d vs %d", archs[ai], n, diff, top, bg, bc);
            printf("  GPU prompt pass, %s, %d tokens: max |gpu - cpu| logit %.3g (logits up to %.3g), top-1 %s\n",
                   archs[ai], n, diff, top, bc == bg ? "equal" : "differs");
            eliza_free(lc);
            eliza_free(lg);
        }
        eliza_llm_close(cpu);
        eliza_llm_close(gpu);
    }
}

/* Copies the file at from to to; nonzero on success. */
static int copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    int ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    if (in) fclose(in);
    if (out && fclose(out) != 0) ok = 0;
    return ok;
}

/* Speculative decoding on the GPU, n-gram and draft-model (the same file as
 * its own drafter, which runs on the CPU): each verification pass runs its
 * tokens as steps and reads every row back; the greedy output is the plain
 * one. */
static void test_llm_gpu_engine_speculative_greedy(const char *device) {
    static const char *const draft_path = "test_llm_tmp_draft.gguf";
    static const uint32_t kinds[] = {ELIZA_LLM_DRAFT_NGRAM, ELIZA_LLM_DRAFT_MODEL};
    spec s = base_spec("llama");
    ref_model r;
    eliza_llm *plain = NULL;
    eliza_llm_stream_config c;
    run_result a;
    int32_t rc;
    write_model(&s, &r);
    ref_free(&r);
    CHECK(copy_file(k_path, draft_path));
    plain = open_gpu(64, -1, device, 1, ELIZA_LLM_KV_F32, &rc);
    stream_config(&c, "abcabcabcabc");
    c.max_tokens = 24;
    a = run_stream(plain, &c);
    CHECK_RC(a.rc, ELIZA_DONE);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        eliza_llm_params p;
        eliza_llm *spec_llm = NULL;
        run_result b;
        eliza_llm_default_params(&p);
        p.context_size = 64;
        p.n_batch = 8;
        p.n_gpu_layers = -1;
        p.gpu_device = device;
        p.gpu_required = 1;
        p.draft_kind = kinds[k];
        p.draft_path = kinds[k] == ELIZA_LLM_DRAFT_MODEL ? draft_path : NULL;
        p.draft_max_tokens = 4;
        CHECK_RC(eliza_llm_open(k_path, &p, &spec_llm), ELIZA_OK);
        if (!spec_llm) continue;
        b = run_stream(spec_llm, &c);
        CHECK_RC(b.rc, ELIZA_DONE);
        CHECK(a.n_tokens == b.n_tokens && memcmp(a.tokens, b.tokens, sizeof(int32_t) * (size_t)a.n_tokens) == 0);
        /* Whether a round drafts is the loop's timed choice (a GPU pass of
         * k + 1 tokens costs k + 1 steps, so it often does not pay): the
         * check is the output, the rounds are reported. */
        printf("  GPU engine, %s drafts: %u rounds, %u of %u drafted tokens accepted\n",
               kinds[k] == ELIZA_LLM_DRAFT_NGRAM ? "n-gram" : "draft-model", b.stats.draft_rounds,
               b.stats.draft_accepted, b.stats.draft_tokens);
        eliza_llm_close(spec_llm);
    }
    eliza_llm_close(plain);
    remove(draft_path);
}

/* What cannot run on the GPU runs on the CPU with the reason logged and in
 * the info, or fails with it when the GPU is required; bad values. */
static void test_llm_gpu_engine_fallbacks(const char *device) {
    spec s = base_spec("gemma3");
    ref_model r;
    eliza_llm *llm;
    int32_t rc;
    char *json;
    write_model(&s, &r);
    ref_free(&r);
    eliza_set_log_callback(capture_log, ELIZA_LOG_INFO, NULL);

    /* No device ("none", as ELIZA_GPU_DEVICE=none): the CPU, saying why. */
    g_log_len = 0;
    g_log[0] = '\0';
    llm = open_gpu(32, -1, "none", 0, ELIZA_LLM_KV_F32, &rc);
    CHECK_RC(rc, ELIZA_OK);
    json = llm ? info_of(llm) : NULL;
    CHECK(json && strstr(json, "\"backend\": \"cpu\"") && strstr(json, "\"gpu_layers\": 0") &&
          strstr(json, "\"gpu_fallback\": \"") && !strstr(json, "\"gpu_fallback\": null"));
    CHECK(strstr(g_log, "the GPU is not used, the model runs on the CPU") != NULL);
    eliza_free(json);
    eliza_llm_close(llm);
    /* ... and required: the error, saying why. */
    llm = open_gpu(32, -1, "none", 1, ELIZA_LLM_KV_F32, &rc);
    CHECK_RC(rc, ELIZA_E_UNSUPPORTED);
    CHECK(llm == NULL && strstr(eliza_last_error(), "the GPU is required") != NULL);
    /* A device name that matches nothing. */
    llm = open_gpu(32, -1, "no-such-gpu-anywhere", 1, ELIZA_LLM_KV_F32, &rc);
    CHECK_RC(rc, ELIZA_E_NOT_FOUND);
    CHECK(llm == NULL);
    /* A quantized KV cache: the GPU's is F32 only. */
    g_log_len = 0;
    llm = open_gpu(32, -1, device, 0, ELIZA_LLM_KV_F16, &rc);
    CHECK_RC(rc, ELIZA_OK);
    json = llm ? info_of(llm) : NULL;
    CHECK(json && strstr(json, "\"backend\": \"cpu\"") && strstr(json, "F32 keys and values only"));
    CHECK(strstr(g_log, "F32 keys and values only") != NULL);
    eliza_free(json);
    eliza_llm_close(llm);
    llm = open_gpu(32, -1, device, 1, ELIZA_LLM_KV_F16, &rc);
    CHECK_RC(rc, ELIZA_E_UNSUPPORTED);
    /* Partial offload: the whole model goes, a log line says so. */
    g_log_len = 0;
    llm = open_gpu(32, 1, device, 1, ELIZA_LLM_KV_F32, &rc);
    CHECK_RC(rc, ELIZA_OK);
    json = llm ? info_of(llm) : NULL;
    CHECK(json && strstr(json, "\"gpu_layers\": 3"));
    CHECK(strstr(g_log, "n_gpu_layers 1 of 3") != NULL);
    eliza_free(json);
    eliza_llm_close(llm);
    /* n_gpu_layers 0: the CPU, no fallback to report. */
    llm = open_gpu(32, 0, device, 1, ELIZA_LLM_KV_F32, &rc);
    CHECK_RC(rc, ELIZA_OK);
    json = llm ? info_of(llm) : NULL;
    CHECK(json && strstr(json, "\"backend\": \"cpu\"") && strstr(json, "\"gpu_fallback\": null"));
    eliza_free(json);
    eliza_llm_close(llm);
    /* A cache past what the device holds (4 GiB a layer: past the heap or
     * one binding's range): refused before anything runs. */
    llm = open_gpu(1 << 24, -1, device, 1, ELIZA_LLM_KV_F32, &rc);
    CHECK(rc == ELIZA_E_NOMEM || rc == ELIZA_E_UNSUPPORTED);
    CHECK(llm == NULL && strstr(eliza_last_error(), "the GPU is required") != NULL);
    /* Bad values. */
    llm = open_gpu(32, -2, device, 0, ELIZA_LLM_KV_F32, &rc);
    CHECK_RC(rc, ELIZA_E_INVALID_ARG);
    CHECK(llm == NULL);
    /* An architecture the GPU step lacks (qwen2's biases). */
    s = base_spec("qwen2");
    write_model(&s, &r);
    ref_free(&r);
    llm = open_gpu(32, -1, device, 0, ELIZA_LLM_KV_F32, &rc);
    CHECK_RC(rc, ELIZA_OK);
    json = llm ? info_of(llm) : NULL;
    CHECK(json && strstr(json, "\"backend\": \"cpu\"") && strstr(json, "biases"));
    eliza_free(json);
    eliza_llm_close(llm);
    llm = open_gpu(32, -1, device, 1, ELIZA_LLM_KV_F32, &rc);
    CHECK_RC(rc, ELIZA_E_UNSUPPORTED);
    eliza_set_log_callback(NULL, 0, NULL);
}

static void test_llm_gpu_engine(void) {
    ez_gpu_params p;
    ez_gpu *probe = NULL;
    char device[256];
    if (!g_keep_driver_loaded) {
        printf("test_llm_gpu_engine: skipped (no Vulkan device)\n");
        return;
    }
    /* The device the step test used, by name; the validation layer on
     * where it is installed (its errors fail the next GPU call, so a test
     * step fails). */
    snprintf(device, sizeof device, "%s", ez_gpu_info(g_keep_driver_loaded)->name);
    ez_gpu_params_default(&p);
    p.device = device;
    p.validation = 1;
    if (ez_gpu_open(&p, &probe) == ELIZA_OK) set_env("ELIZA_GPU_VALIDATION", "1");
    else printf("test_llm_gpu_engine: %s: running without validation\n", eliza_last_error());
    ez_gpu_close(probe);
    test_llm_gpu_engine_matches_the_cpu_engine(device);
    test_llm_gpu_engine_prompt_pass(device);
    test_llm_gpu_engine_speculative_greedy(device);
    test_llm_gpu_engine_fallbacks(device);
}
#endif

int main(void) {
    test_llm_forward_matches_reference_per_arch();
    test_llm_forward_quantized_weights_close_to_reference();
    test_llm_quantized_kv_caches_close_to_reference();
    test_llm_split_decode_matches_reference();
#if defined(ELIZA_VULKAN)
    test_llm_gpu_step_matches_reference_and_cpu_engine();
#endif
    test_llm_stream_greedy_matches_full_recompute();
    test_llm_stream_context_full_and_limits();
    test_llm_stream_stop_strings_are_held_back_and_never_emitted();
    test_llm_stream_eos_and_seeds();
    test_llm_stream_cancel();
    test_llm_cancel_logits_and_close_under_a_stream();
    test_llm_open_rejects_bad_files();
    test_llm_api_arguments();
    test_llm_session_rewind_matches_a_fresh_session();
    test_llm_session_prompt_reuses_the_held_prefix();
    test_llm_forward_runs_through_the_backend_seam();
#if defined(ELIZA_VULKAN)
    test_llm_gpu_engine();
#endif
    remove(k_path);
    if (g_failed) {
        fprintf(stderr, "test_llm_model: FAILED\n");
        return 1;
    }
    printf("test_llm_model: ok\n");
    return 0;
}
