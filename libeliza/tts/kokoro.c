/* Kokoro-82M: loading one GGUF (docs/kokoro.md) and the forward pass of
 * kokoro 0.9.4's KModel.forward_with_tokens, stage by stage:
 *
 *   ids -> ALBERT -> bert_encoder -> duration encoder -> durations
 *       -> alignment -> F0 / N curves; ids -> text encoder -> alignment
 *       -> decoder -> harmonic source + iSTFTNet generator -> 24 kHz audio
 *
 * Every hyperparameter comes from the metadata, the decoder widths the
 * reference hardcodes (1024, 64) from the tensor shapes; every tensor is
 * checked against them before anything runs, and read in place from the
 * file's mapping (float16 widened where a layer uses it). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/gguf.h"
#include "core/kernels/lstm.h"
#include "core/platform.h"
#include "core/quant.h"
#include "core/utf8.h"
#include "tts/kokoro_impl.h"
#include "tts/ops.h"

/* Bounds that no real model comes near; they keep every size product far
 * from overflow and turn absurd metadata into a clear error. */
#define MAX_WIDTH 8192
#define MAX_TOKENS 65536
#define MAX_POS 8192
#define MAX_KERNEL 64
#define MAX_UPSAMPLING 4096 /* audio samples per predicted frame (Kokoro: 300) */
#define MAX_SAMPLES (1 << 30)
/* Frames (of upp samples, 25 ms, each) one chunk may last: as many as the
 * longest chunk (max_pos tokens of max_dur frames) at speed 0.5. */
static int max_frames(const ez_kokoro_hparams *hp) { return 2 * hp->bert_max_pos * hp->max_dur; }

/* ---- per-forward scratch ------------------------------------------------------------ */

float *ez_kokoro_alloc(ez_kokoro_stack *st, int64_t n) {
    float *p;
    if (st->n >= EZ_KOKORO_STACK_MAX) {
        ez_fail(ELIZA_E_NOMEM, "Kokoro scratch: more than %d live buffers", EZ_KOKORO_STACK_MAX);
        return NULL;
    }
    if (n < 1) n = 1;
    if ((uint64_t)n > SIZE_MAX / sizeof(float) / 2 || !(p = malloc((size_t)n * sizeof(float)))) {
        ez_fail(ELIZA_E_NOMEM, "Kokoro scratch: cannot allocate %" PRId64 " floats", n);
        return NULL;
    }
    st->p[st->n++] = p;
    return p;
}

void ez_kokoro_release(ez_kokoro_stack *st, int mark) {
    while (st->n > mark) free(st->p[--st->n]);
}

void ez_kokoro_transpose(const float *x, int rows, int cols, float *y) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) y[(int64_t)c * rows + r] = x[(int64_t)r * cols + c];
}

int32_t ez_kokoro_record(ez_kokoro_ctx *c, const char *name, const float *x, int64_t d0, int64_t d1,
                         int transpose) {
    ez_kokoro_trace *t = c->trace;
    ez_kokoro_stage *s;
    int64_t n = d0 * (d1 ? d1 : 1);
    if (!t) return ELIZA_OK;
    if (t->n >= EZ_KOKORO_MAX_STAGES) return ez_fail(ELIZA_E_NOMEM, "Kokoro trace: more than %d stages", t->n);
    s = &t->stage[t->n];
    memset(s, 0, sizeof *s);
    if (!(s->data = malloc((size_t)n * sizeof(float))))
        return ez_fail(ELIZA_E_NOMEM, "Kokoro trace: cannot copy stage '%s'", name);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->d0 = d0;
    s->d1 = d1;
    if (transpose && d1)
        ez_kokoro_transpose(x, (int)d1, (int)d0, s->data);
    else
        memcpy(s->data, x, (size_t)n * sizeof(float));
    t->n++;
    return ELIZA_OK;
}

void ez_kokoro_trace_free(ez_kokoro_trace *trace) {
    if (!trace) return;
    for (int i = 0; i < trace->n; i++) free(trace->stage[i].data);
    trace->n = 0;
}

/* ---- metadata ------------------------------------------------------------------------- */

static int32_t need_u32(const ez_gguf *g, const char *key, uint32_t lo, uint32_t hi, int *out) {
    uint32_t v;
    int32_t rc = ez_gguf_need_u32(g, key, lo, hi, &v);
    if (rc == ELIZA_OK) *out = (int)v;
    return rc;
}

/* An integer array of 1..max elements, each in [lo, hi]; *n gets the count. */
static int32_t need_ints(const ez_gguf *g, const char *key, int max, int lo, int hi, int *out, int *n) {
    const ez_gguf_kv *kv = ez_gguf_find_kv(g, key);
    if (!kv) return ez_gguf_need_arr(g, key, EZ_GGUF_I32, &kv);
    if (kv->type != EZ_GGUF_ARRAY || (kv->arr_type != EZ_GGUF_I32 && kv->arr_type != EZ_GGUF_U32))
        return ez_fail(ELIZA_E_FORMAT, "Kokoro metadata '%s' is not an array of 32-bit integers", key);
    if (kv->arr_len < 1 || kv->arr_len > (uint64_t)max)
        return ez_fail(ELIZA_E_FORMAT, "Kokoro metadata '%s' has %" PRIu64 " elements (1 to %d supported)", key,
                       kv->arr_len, max);
    for (uint64_t i = 0; i < kv->arr_len; i++) {
        int32_t v;
        memcpy(&v, kv->arr_data + 4 * i, 4);
        if (kv->arr_type == EZ_GGUF_U32 && v < 0) v = -1;
        if (v < lo || v > hi)
            return ez_fail(ELIZA_E_FORMAT, "Kokoro metadata '%s'[%" PRIu64 "] = %" PRId32 " is out of range [%d, %d]",
                           key, i, v, lo, hi);
        out[i] = v;
    }
    *n = (int)kv->arr_len;
    return ELIZA_OK;
}

static int str_is(ez_str s, const char *lit) {
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.ptr, lit, n) == 0;
}

/* A Kokoro file whose LSTMs store their gates in the order the engine reads. */
static int32_t check_kind(const ez_gguf *g) {
    ez_str s;
    int32_t rc;
    if ((rc = ez_gguf_need_str(g, "general.architecture", &s))) return rc;
    if (!str_is(s, "kokoro"))
        return ez_fail(ELIZA_E_FORMAT, "architecture '%.*s' is not a Kokoro model ('kokoro')",
                       (int)EZ_MIN(s.len, 64u), s.ptr);
    if ((rc = ez_gguf_need_str(g, "kokoro.lstm_gate_order", &s))) return rc;
    if (!str_is(s, "ifgo"))
        return ez_fail(ELIZA_E_FORMAT, "Kokoro LSTM gate order '%.*s' is not supported (the engine reads 'ifgo')",
                       (int)EZ_MIN(s.len, 16u), s.ptr);
    return ELIZA_OK;
}

/* The scalar sizes of every module and what they must satisfy together. */
static int32_t load_sizes(const ez_gguf *g, ez_kokoro_hparams *hp) {
    int32_t rc;
    if ((rc = need_u32(g, "kokoro.sample_rate", 1000, 384000, &hp->sample_rate)) ||
        (rc = need_u32(g, "kokoro.n_token", 1, MAX_TOKENS, &hp->n_token)) ||
        (rc = need_u32(g, "kokoro.hidden_dim", 2, MAX_WIDTH, &hp->hidden)) ||
        (rc = need_u32(g, "kokoro.style_dim", 1, MAX_WIDTH, &hp->style)) ||
        (rc = need_u32(g, "kokoro.max_dur", 1, 1000, &hp->max_dur)) ||
        (rc = need_u32(g, "kokoro.n_layer", 1, EZ_KOKORO_MAX_LAYERS, &hp->n_layer)) ||
        (rc = need_u32(g, "kokoro.text_encoder_kernel_size", 1, MAX_KERNEL, &hp->te_kernel)) ||
        (rc = need_u32(g, "kokoro.plbert.hidden_size", 1, MAX_WIDTH, &hp->bert_hidden)) ||
        (rc = need_u32(g, "kokoro.plbert.num_attention_heads", 1, 256, &hp->bert_heads)) ||
        (rc = need_u32(g, "kokoro.plbert.intermediate_size", 1, 4 * MAX_WIDTH, &hp->bert_ff)) ||
        (rc = need_u32(g, "kokoro.plbert.num_hidden_layers", 1, 256, &hp->bert_layers)) ||
        (rc = need_u32(g, "kokoro.plbert.embedding_size", 1, MAX_WIDTH, &hp->bert_embd)) ||
        (rc = need_u32(g, "kokoro.plbert.max_position_embeddings", 3, MAX_POS, &hp->bert_max_pos)) ||
        (rc = need_u32(g, "kokoro.istftnet.upsample_initial_channel", 1, MAX_WIDTH, &hp->ups_channels)) ||
        (rc = need_u32(g, "kokoro.istftnet.n_fft", 2, EZ_KOKORO_MAX_FFT, &hp->n_fft)) ||
        (rc = need_u32(g, "kokoro.istftnet.hop_size", 1, 1024, &hp->hop)))
        return rc;
    if ((rc = ez_gguf_need_f32(g, "kokoro.plbert.layer_norm_eps", 0.0f, 1.0f, &hp->bert_eps))) return rc;
    if (hp->bert_eps >= 1.0f)
        return ez_fail(ELIZA_E_FORMAT, "Kokoro metadata 'kokoro.plbert.layer_norm_eps' = %g is out of range [0, 1)",
                       (double)hp->bert_eps);
    if (2 * hp->style != EZ_KOKORO_STYLE_DIM)
        return ez_fail(ELIZA_E_FORMAT, "Kokoro style_dim %d: voices of %d values need %d", hp->style,
                       EZ_KOKORO_STYLE_DIM, EZ_KOKORO_STYLE_DIM / 2);
    if (hp->hidden % 4)
        return ez_fail(ELIZA_E_FORMAT, "Kokoro hidden_dim %d is not a multiple of 4", hp->hidden);
    if (hp->te_kernel % 2 == 0)
        return ez_fail(ELIZA_E_FORMAT, "Kokoro text_encoder_kernel_size %d is even", hp->te_kernel);
    if (hp->bert_hidden % hp->bert_heads)
        return ez_fail(ELIZA_E_FORMAT, "ALBERT hidden_size %d is not a multiple of its %d heads", hp->bert_hidden,
                       hp->bert_heads);
    if (hp->n_fft % 2 || hp->hop > hp->n_fft)
        return ez_fail(ELIZA_E_FORMAT, "iSTFT n_fft %d / hop %d: n_fft must be even and at least the hop",
                       hp->n_fft, hp->hop);
    return ELIZA_OK;
}

/* The iSTFTNet generator's upsampling stages and resblock kernels. */
static int32_t load_generator(const ez_gguf *g, ez_kokoro_hparams *hp) {
    int32_t rc;
    int n, dil[3 * EZ_KOKORO_MAX_KERNELS];

    if ((rc = need_ints(g, "kokoro.istftnet.upsample_rates", EZ_KOKORO_MAX_UPS, 1, 64, hp->ups_rate, &hp->n_ups)) ||
        (rc = need_ints(g, "kokoro.istftnet.upsample_kernel_sizes", EZ_KOKORO_MAX_UPS, 1, 4 * 64, hp->ups_kernel, &n)))
        return rc;
    if (n != hp->n_ups)
        return ez_fail(ELIZA_E_FORMAT, "Kokoro metadata: %d upsample rates but %d upsample kernel sizes", hp->n_ups, n);
    for (int i = 0; i < hp->n_ups; i++)
        if (hp->ups_kernel[i] < hp->ups_rate[i])
            return ez_fail(ELIZA_E_FORMAT, "Kokoro upsample stage %d: kernel %d is shorter than its rate %d", i,
                           hp->ups_kernel[i], hp->ups_rate[i]);
    {
        int64_t upp = hp->hop;
        for (int i = 0; i < hp->n_ups; i++) upp *= hp->ups_rate[i];
        if (upp > MAX_UPSAMPLING)
            return ez_fail(ELIZA_E_FORMAT, "Kokoro: %" PRId64 " samples per frame (upsample rates x hop; at most %d)",
                           upp, MAX_UPSAMPLING);
    }
    if (hp->ups_channels % (1 << hp->n_ups))
        return ez_fail(ELIZA_E_FORMAT, "Kokoro upsample_initial_channel %d does not halve %d times", hp->ups_channels,
                       hp->n_ups);
    if ((rc = need_ints(g, "kokoro.istftnet.resblock_kernel_sizes", EZ_KOKORO_MAX_KERNELS, 1, MAX_KERNEL,
                        hp->rb_kernel, &hp->n_kernels)) ||
        (rc = need_ints(g, "kokoro.istftnet.resblock_dilation_sizes", 3 * EZ_KOKORO_MAX_KERNELS, 1, MAX_KERNEL, dil,
                        &n)))
        return rc;
    for (int j = 0; j < hp->n_kernels; j++)
        if (hp->rb_kernel[j] % 2 == 0)
            return ez_fail(ELIZA_E_FORMAT, "Kokoro resblock kernel %d is even (%d): the residual sums need odd kernels",
                           j, hp->rb_kernel[j]);
    if (n != 3 * hp->n_kernels)
        return ez_fail(ELIZA_E_FORMAT,
                       "Kokoro resblock_dilation_sizes has %d values; %d resblock kernels need 3 each (%d)", n,
                       hp->n_kernels, 3 * hp->n_kernels);
    for (int j = 0; j < hp->n_kernels; j++)
        for (int d = 0; d < 3; d++) hp->rb_dilation[j][d] = dil[3 * j + d];
    return ELIZA_OK;
}

static int32_t load_hparams(const ez_gguf *g, ez_kokoro_hparams *hp) {
    int32_t rc;
    memset(hp, 0, sizeof *hp);
    if ((rc = check_kind(g)) || (rc = load_sizes(g, hp))) return rc;
    return load_generator(g, hp);
}

/* ---- tensors ------------------------------------------------------------------------------ */

typedef struct {
    ez_kokoro *m;
    const ez_gguf *g;
    char name[192];
} loader;

static int32_t keep(ez_kokoro *m, float *p) {
    if (m->n_bufs == m->cap_bufs) {
        int cap = m->cap_bufs ? 2 * m->cap_bufs : 1024;
        float **b = realloc(m->bufs, (size_t)cap * sizeof *b);
        if (!b) {
            free(p);
            return ez_fail(ELIZA_E_NOMEM, "Kokoro: cannot grow the weight table to %d tensors", cap);
        }
        m->bufs = b;
        m->cap_bufs = cap;
    }
    m->bufs[m->n_bufs++] = p;
    return ELIZA_OK;
}

static void shape_str(char *buf, size_t size, int nd, const int64_t *d) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, size - o, "[");
    for (int i = 0; i < nd && o < size; i++)
        o += (size_t)snprintf(buf + o, size - o, i ? ", %" PRId64 : "%" PRId64, d[i]);
    if (o < size) snprintf(buf + o, size - o, "]");
}

/* Whether the n values of a float16 tensor are all finite: exponent bits
 * below all ones. *bad gets the first that is not. */
static int f16_finite(const uint16_t *h, uint64_t n, uint64_t *bad) {
    for (uint64_t i = 0; i < n; i++)
        if ((h[i] & 0x7C00u) == 0x7C00u) {
            *bad = i;
            return 0;
        }
    return 1;
}

/* The tensor L->name, which must have the numpy shape d[0..nd), as stored:
 * float32 and float16 in place (at their natural alignment), any other type
 * dequantized to a float32 copy the model keeps. */
static int32_t tensor_view(loader *L, ez_kokoro_tensor *out, int nd, int64_t d0, int64_t d1, int64_t d2) {
    const ez_gguf_tensor *t = ez_gguf_find_tensor(L->g, L->name);
    int64_t want[3] = {d0, d1, d2}, have[EZ_GGUF_MAX_DIMS];
    char a[96], b[96];
    uint64_t bad = 0;
    float *p;
    int32_t rc;
    int ok;
    if (!t) return ez_fail(ELIZA_E_FORMAT, "Kokoro tensor '%s' is missing", L->name);
    for (uint32_t i = 0; i < t->n_dims; i++) have[i] = (int64_t)t->ne[t->n_dims - 1 - i];
    ok = (int)t->n_dims == nd;
    for (int i = 0; ok && i < nd; i++) ok = have[i] == want[i];
    if (!ok) {
        shape_str(a, sizeof a, (int)t->n_dims, have);
        shape_str(b, sizeof b, nd, want);
        return ez_fail(ELIZA_E_FORMAT, "Kokoro tensor '%s' has shape %s where the hyperparameters give %s", L->name,
                       a, b);
    }
    out->n = (int64_t)t->n_elements;
    if (t->type == EZ_TYPE_F16 && (uintptr_t)t->data % sizeof(uint16_t) == 0) {
        out->data = t->data;
        out->type = EZ_TYPE_F16;
        ok = f16_finite((const uint16_t *)t->data, t->n_elements, &bad);
    } else {
        if (t->type == EZ_TYPE_F32 && (uintptr_t)t->data % sizeof(float) == 0) {
            p = (float *)(uintptr_t)t->data;
        } else if ((rc = ez_gguf_tensor_f32(t, &p))) {
            if (rc == ELIZA_E_UNSUPPORTED)
                return ez_fail(ELIZA_E_FORMAT, "Kokoro tensor '%s' has type %" PRIu32 ", which this build cannot read",
                               L->name, t->type);
            return rc;
        } else if ((rc = keep(L->m, p))) {
            return rc;
        }
        out->data = p;
        out->type = EZ_TYPE_F32;
        for (uint64_t i = 0; ok && i < t->n_elements; i++)
            if (!isfinite(p[i])) ok = 0, bad = i;
    }
    if (!ok)
        return ez_fail(ELIZA_E_FORMAT, "Kokoro tensor '%s' holds a non-finite value at element %" PRIu64, L->name,
                       bad);
    return ELIZA_OK;
}

/* A tensor the engine reads as float32 as it is (vectors, alphas):
 * float16 is widened to a copy here. */
static int32_t tensor(loader *L, const float **out, int nd, int64_t d0, int64_t d1, int64_t d2) {
    ez_kokoro_tensor v;
    float *p;
    int32_t rc;
    if ((rc = tensor_view(L, &v, nd, d0, d1, d2))) return rc;
    if (v.type == EZ_TYPE_F32) {
        *out = (const float *)v.data;
        return ELIZA_OK;
    }
    if (!(p = malloc((size_t)v.n * sizeof *p)))
        return ez_fail(ELIZA_E_NOMEM, "Kokoro tensor '%s': %" PRId64 " floats", L->name, v.n);
    ez_kokoro_rows(&v, 0, 1, v.n, p);
    if ((rc = keep(L->m, p))) return rc;
    *out = p;
    return ELIZA_OK;
}

static void set_name(loader *L, const char *prefix, const char *suffix) {
    if (snprintf(L->name, sizeof L->name, "%s%s", prefix, suffix) < 0) L->name[0] = 0;
}

/* Dimension `axis` (numpy order) of a tensor whose other dimensions depend on it. */
static int32_t dim_of(loader *L, const char *name, int nd, int axis, int lo, int hi, int *out) {
    const ez_gguf_tensor *t = ez_gguf_find_tensor(L->g, name);
    uint64_t v;
    if (!t) return ez_fail(ELIZA_E_FORMAT, "Kokoro tensor '%s' is missing", name);
    if ((int)t->n_dims != nd)
        return ez_fail(ELIZA_E_FORMAT, "Kokoro tensor '%s' has %" PRIu32 " dimensions where %d are expected", name,
                       t->n_dims, nd);
    v = t->ne[nd - 1 - axis];
    if (v < (uint64_t)lo || v > (uint64_t)hi)
        return ez_fail(ELIZA_E_FORMAT, "Kokoro tensor '%s': dimension %d is %" PRIu64 ", out of range [%d, %d]", name,
                       axis, v, lo, hi);
    *out = (int)v;
    return ELIZA_OK;
}

static int32_t load_vec(loader *L, const char *prefix, const char *suffix, int n, const float **out) {
    set_name(L, prefix, suffix);
    return tensor(L, out, 1, n, 0, 0);
}

static int32_t load_linear(loader *L, ez_kokoro_linear *l, const char *prefix, int n_out, int n_in) {
    int32_t rc;
    l->n_out = n_out;
    l->n_in = n_in;
    set_name(L, prefix, ".weight");
    if ((rc = tensor_view(L, &l->w, 2, n_out, n_in, 0))) return rc;
    return load_vec(L, prefix, ".bias", n_out, &l->b);
}

/* Conv1d (transposed = 0, w [c_out, c_in / groups, k]) or ConvTranspose1d
 * (transposed = 1, w [c_in, c_out / groups, k]). */
static int32_t load_conv(loader *L, ez_kokoro_conv *c, const char *prefix, int c_out, int c_in, int k, int groups,
                         int transposed, int bias) {
    int32_t rc;
    c->c_out = c_out;
    c->c_in = c_in;
    c->k = k;
    c->b = NULL;
    set_name(L, prefix, ".weight");
    if (transposed)
        rc = tensor_view(L, &c->w, 3, c_in, c_out / groups, k);
    else
        rc = tensor_view(L, &c->w, 3, c_out, c_in / groups, k);
    if (rc || !bias) return rc;
    return load_vec(L, prefix, ".bias", c_out, &c->b);
}

/* w_hh as core's step panels, once: every forward widened and laid it out
 * again (ez_lstm_pack). 4 MB a layer at H 256, 12.6 MB for Kokoro-82M's
 * six; a float16 w_hh's pages in the mapping are then released (nothing
 * reads it again). */
static int32_t lstm_panels(loader *L, const ez_kokoro_tensor *w_hh, int H, const float **out) {
    float *w = malloc((size_t)w_hh->n * sizeof *w), *panels = malloc(ez_lstm_panels_floats(H) * sizeof *panels);
    int32_t rc;
    if (!w || !panels) {
        free(w);
        free(panels);
        return ez_fail(ELIZA_E_NOMEM, "Kokoro tensor '%s': no memory for its step panels", L->name);
    }
    ez_kokoro_rows(w_hh, 0, 1, w_hh->n, w);
    ez_lstm_pack(H, w, NULL, panels);
    free(w);
    if (w_hh->type == EZ_TYPE_F16) ez_map_release(w_hh->data, (size_t)w_hh->n * sizeof(uint16_t));
    if ((rc = keep(L->m, panels))) return rc;
    *out = panels;
    return ELIZA_OK;
}

static int32_t load_bilstm(loader *L, ez_kokoro_bilstm *l, const char *prefix, int n_in, int H) {
    static const char *const sfx[2] = {"", "_reverse"};
    char name[64];
    int32_t rc;
    l->n_in = n_in;
    l->H = H;
    for (int d = 0; d < 2; d++) {
        snprintf(name, sizeof name, ".weight_ih_l0%s", sfx[d]);
        set_name(L, prefix, name);
        if ((rc = tensor_view(L, &l->w_ih[d], 2, 4 * H, n_in, 0))) return rc;
        snprintf(name, sizeof name, ".weight_hh_l0%s", sfx[d]);
        set_name(L, prefix, name);
        if ((rc = tensor_view(L, &l->w_hh[d], 2, 4 * H, H, 0)) ||
            (rc = lstm_panels(L, &l->w_hh[d], H, &l->hh_panels[d])))
            return rc;
        snprintf(name, sizeof name, ".bias_ih_l0%s", sfx[d]);
        if ((rc = load_vec(L, prefix, name, 4 * H, &l->b_ih[d]))) return rc;
        snprintf(name, sizeof name, ".bias_hh_l0%s", sfx[d]);
        if ((rc = load_vec(L, prefix, name, 4 * H, &l->b_hh[d]))) return rc;
    }
    return ELIZA_OK;
}

static int32_t load_adain(loader *L, ez_kokoro_adain *a, const char *prefix, int C, int S) {
    char p[192];
    int32_t rc;
    a->C = C;
    snprintf(p, sizeof p, "%s.fc", prefix);
    if ((rc = load_linear(L, &a->fc, p, 2 * C, S)) || (rc = load_vec(L, prefix, ".norm.weight", C, &a->norm_w)) ||
        (rc = load_vec(L, prefix, ".norm.bias", C, &a->norm_b)))
        return rc;
    a->affine_identity = 1;
    for (int i = 0; i < C; i++)
        if (a->norm_w[i] != 1.0f || a->norm_b[i] != 0.0f) a->affine_identity = 0;
    return ELIZA_OK;
}

static int32_t load_resblk(loader *L, ez_kokoro_resblk *b, const char *prefix, int dim_in, int dim_out, int upsample,
                           int S) {
    char p[192];
    int32_t rc;
    b->dim_in = dim_in;
    b->dim_out = dim_out;
    b->upsample = upsample;
    b->learned_sc = dim_in != dim_out;
#define SUB(s) (snprintf(p, sizeof p, "%s.%s", prefix, s), p)
    if ((rc = load_adain(L, &b->norm1, SUB("norm1"), dim_in, S)) ||
        (rc = load_adain(L, &b->norm2, SUB("norm2"), dim_out, S)) ||
        (rc = load_conv(L, &b->conv1, SUB("conv1"), dim_out, dim_in, 3, 1, 0, 1)) ||
        (rc = load_conv(L, &b->conv2, SUB("conv2"), dim_out, dim_out, 3, 1, 0, 1)))
        return rc;
    if (b->learned_sc && (rc = load_conv(L, &b->conv1x1, SUB("conv1x1"), dim_out, dim_in, 1, 1, 0, 0))) return rc;
    if (upsample && (rc = load_conv(L, &b->pool, SUB("pool"), dim_in, dim_in, 3, dim_in, 1, 1))) return rc;
#undef SUB
    return ELIZA_OK;
}

static int32_t load_resblock1(loader *L, ez_kokoro_resblock1 *b, const char *prefix, int C, int k,
                              const int *dilation, int S) {
    char p[192];
    int32_t rc;
    b->C = C;
    b->k = k;
    for (int j = 0; j < 3; j++) {
        b->dilation[j] = dilation[j];
        snprintf(p, sizeof p, "%s.adain1.%d", prefix, j);
        if ((rc = load_adain(L, &b->adain1[j], p, C, S))) return rc;
        snprintf(p, sizeof p, "%s.adain2.%d", prefix, j);
        if ((rc = load_adain(L, &b->adain2[j], p, C, S))) return rc;
        snprintf(p, sizeof p, "%s.convs1.%d", prefix, j);
        if ((rc = load_conv(L, &b->convs1[j], p, C, C, k, 1, 0, 1))) return rc;
        snprintf(p, sizeof p, "%s.convs2.%d", prefix, j);
        if ((rc = load_conv(L, &b->convs2[j], p, C, C, k, 1, 0, 1))) return rc;
        /* alpha: nn.Parameter of shape [1, C, 1] */
        snprintf(L->name, sizeof L->name, "%s.alpha1.%d", prefix, j);
        if ((rc = tensor(L, &b->alpha1[j], 3, 1, C, 1))) return rc;
        snprintf(L->name, sizeof L->name, "%s.alpha2.%d", prefix, j);
        if ((rc = tensor(L, &b->alpha2[j], 3, 1, C, 1))) return rc;
        for (int c = 0; c < C; c++)
            if (b->alpha1[j][c] == 0.0f || b->alpha2[j][c] == 0.0f)
                return ez_fail(ELIZA_E_FORMAT, "Kokoro tensor '%s.alpha%c.%d' is zero at channel %d (Snake divides by it)",
                               prefix, b->alpha1[j][c] == 0.0f ? '1' : '2', j, c);
    }
    return ELIZA_OK;
}

static int32_t load_albert(loader *L) {
    const ez_kokoro_hparams *hp = &L->m->hp;
    ez_kokoro_weights *w = &L->m->w;
    const int E = hp->bert_embd, H = hp->bert_hidden, FF = hp->bert_ff;
    const char *lay = "bert.encoder.albert_layer_groups.0.albert_layers.0";
    char p[192];
    int32_t rc;
    int n_type = 0;
#define SUB(s) (snprintf(p, sizeof p, "%s.%s", lay, s), p)
    set_name(L, "bert.embeddings.word_embeddings.weight", "");
    if ((rc = tensor_view(L, &w->word_emb, 2, hp->n_token, E, 0))) return rc;
    set_name(L, "bert.embeddings.position_embeddings.weight", "");
    if ((rc = tensor_view(L, &w->pos_emb, 2, hp->bert_max_pos, E, 0))) return rc;
    set_name(L, "bert.embeddings.token_type_embeddings.weight", "");
    if ((rc = dim_of(L, L->name, 2, 0, 1, MAX_TOKENS, &n_type)) || (rc = tensor_view(L, &w->type_emb, 2, n_type, E, 0)) ||
        (rc = load_vec(L, "bert.embeddings.LayerNorm", ".weight", E, &w->emb_ln_w)) ||
        (rc = load_vec(L, "bert.embeddings.LayerNorm", ".bias", E, &w->emb_ln_b)) ||
        (rc = load_linear(L, &w->emb_map, "bert.encoder.embedding_hidden_mapping_in", H, E)) ||
        (rc = load_linear(L, &w->q, SUB("attention.query"), H, H)) ||
        (rc = load_linear(L, &w->k, SUB("attention.key"), H, H)) ||
        (rc = load_linear(L, &w->v, SUB("attention.value"), H, H)) ||
        (rc = load_linear(L, &w->dense, SUB("attention.dense"), H, H)) ||
        (rc = load_vec(L, SUB("attention.LayerNorm"), ".weight", H, &w->attn_ln_w)) ||
        (rc = load_vec(L, SUB("attention.LayerNorm"), ".bias", H, &w->attn_ln_b)) ||
        (rc = load_linear(L, &w->ffn, SUB("ffn"), FF, H)) ||
        (rc = load_linear(L, &w->ffn_out, SUB("ffn_output"), H, FF)) ||
        (rc = load_vec(L, SUB("full_layer_layer_norm"), ".weight", H, &w->full_ln_w)) ||
        (rc = load_vec(L, SUB("full_layer_layer_norm"), ".bias", H, &w->full_ln_b)) ||
        (rc = load_linear(L, &w->bert_encoder, "bert_encoder", hp->hidden, H)))
        return rc;
#undef SUB
    return ELIZA_OK;
}

static int32_t load_predictor(loader *L) {
    const ez_kokoro_hparams *hp = &L->m->hp;
    ez_kokoro_weights *w = &L->m->w;
    const int D = hp->hidden, S = hp->style;
    char p[192];
    int32_t rc;
    for (int l = 0; l < hp->n_layer; l++) {
        snprintf(p, sizeof p, "predictor.text_encoder.lstms.%d", 2 * l);
        if ((rc = load_bilstm(L, &w->dur_lstm[l], p, D + S, D / 2))) return rc;
        snprintf(p, sizeof p, "predictor.text_encoder.lstms.%d.fc", 2 * l + 1);
        if ((rc = load_linear(L, &w->dur_aln[l], p, 2 * D, S))) return rc;
    }
    if ((rc = load_bilstm(L, &w->pred_lstm, "predictor.lstm", D + S, D / 2)) ||
        (rc = load_linear(L, &w->duration_proj, "predictor.duration_proj.linear_layer", hp->max_dur, D)) ||
        (rc = load_bilstm(L, &w->shared, "predictor.shared", D + S, D / 2)))
        return rc;
    for (int br = 0; br < 2; br++) {
        ez_kokoro_resblk *b = br ? w->n : w->f0;
        const char *name = br ? "N" : "F0";
        snprintf(p, sizeof p, "predictor.%s.0", name);
        if ((rc = load_resblk(L, &b[0], p, D, D, 0, S))) return rc;
        snprintf(p, sizeof p, "predictor.%s.1", name);
        if ((rc = load_resblk(L, &b[1], p, D, D / 2, 1, S))) return rc;
        snprintf(p, sizeof p, "predictor.%s.2", name);
        if ((rc = load_resblk(L, &b[2], p, D / 2, D / 2, 0, S))) return rc;
        snprintf(p, sizeof p, "predictor.%s_proj", name);
        if ((rc = load_conv(L, br ? &w->n_proj : &w->f0_proj, p, 1, D / 2, 1, 1, 0, 1))) return rc;
    }
    return ELIZA_OK;
}

static int32_t load_text_encoder(loader *L) {
    const ez_kokoro_hparams *hp = &L->m->hp;
    ez_kokoro_weights *w = &L->m->w;
    const int D = hp->hidden;
    char p[192];
    int32_t rc;
    set_name(L, "text_encoder.embedding.weight", "");
    if ((rc = tensor_view(L, &w->te_emb, 2, hp->n_token, D, 0))) return rc;
    for (int l = 0; l < hp->n_layer; l++) {
        snprintf(p, sizeof p, "text_encoder.cnn.%d.0", l);
        if ((rc = load_conv(L, &w->te_conv[l], p, D, D, hp->te_kernel, 1, 0, 1))) return rc;
        snprintf(p, sizeof p, "text_encoder.cnn.%d.1", l);
        if ((rc = load_vec(L, p, ".gamma", D, &w->te_ln_g[l])) || (rc = load_vec(L, p, ".beta", D, &w->te_ln_b[l])))
            return rc;
    }
    return load_bilstm(L, &w->te_lstm, "text_encoder.lstm", D, D / 2);
}

static int32_t load_decoder(loader *L) {
    ez_kokoro_hparams *hp = &L->m->hp;
    ez_kokoro_weights *w = &L->m->w;
    const int D = hp->hidden, S = hp->style;
    int DE, R, dec_in, ch = hp->ups_channels;
    char p[192];
    int32_t rc;

    if ((rc = dim_of(L, "decoder.encode.conv1.weight", 3, 0, 1, MAX_WIDTH, &hp->dec_hidden)) ||
        (rc = dim_of(L, "decoder.asr_res.0.weight", 3, 0, 1, MAX_WIDTH, &hp->dec_res)) ||
        (rc = dim_of(L, "decoder.generator.m_source.l_linear.weight", 2, 1, 1, EZ_KOKORO_MAX_HARMONICS,
                           &hp->n_harmonic)))
        return rc;
    DE = hp->dec_hidden;
    R = hp->dec_res;
    dec_in = DE + 2 + R;
    if ((rc = load_conv(L, &w->f0_conv, "decoder.F0_conv", 1, 1, 3, 1, 0, 1)) ||
        (rc = load_conv(L, &w->n_conv, "decoder.N_conv", 1, 1, 3, 1, 0, 1)) ||
        (rc = load_conv(L, &w->asr_res, "decoder.asr_res.0", R, D, 1, 1, 0, 1)) ||
        (rc = load_resblk(L, &w->encode, "decoder.encode", D + 2, DE, 0, S)))
        return rc;
    for (int i = 0; i < EZ_KOKORO_N_DECODE; i++) {
        int last = i == EZ_KOKORO_N_DECODE - 1;
        snprintf(p, sizeof p, "decoder.decode.%d", i);
        if ((rc = load_resblk(L, &w->decode[i], p, dec_in, last ? ch : DE, last, S))) return rc;
    }

    if ((rc = load_linear(L, &w->l_linear, "decoder.generator.m_source.l_linear", 1, hp->n_harmonic))) return rc;
    for (int i = 0; i < hp->n_ups; i++) {
        int c_in = ch >> i, c_out = ch >> (i + 1), k_noise = 1;
        static const int noise_dil[3] = {1, 3, 5};
        snprintf(p, sizeof p, "decoder.generator.ups.%d", i);
        if ((rc = load_conv(L, &w->ups[i], p, c_out, c_in, hp->ups_kernel[i], 1, 1, 1))) return rc;
        if (i + 1 < hp->n_ups) {
            int stride = 1;
            for (int j = i + 1; j < hp->n_ups; j++) stride *= hp->ups_rate[j];
            k_noise = 2 * stride;
        }
        snprintf(p, sizeof p, "decoder.generator.noise_convs.%d", i);
        if ((rc = load_conv(L, &w->noise_convs[i], p, c_out, hp->n_fft + 2, k_noise, 1, 0, 1))) return rc;
        /* Generator.__init__: kernel 7 before the last stage, 11 at it, dilations 1, 3, 5 */
        snprintf(p, sizeof p, "decoder.generator.noise_res.%d", i);
        if ((rc = load_resblock1(L, &w->noise_res[i], p, c_out, i + 1 < hp->n_ups ? 7 : 11, noise_dil, S))) return rc;
        for (int j = 0; j < hp->n_kernels; j++) {
            snprintf(p, sizeof p, "decoder.generator.resblocks.%d", i * hp->n_kernels + j);
            if ((rc = load_resblock1(L, &w->resblocks[i * hp->n_kernels + j], p, c_out, hp->rb_kernel[j],
                                     hp->rb_dilation[j], S)))
                return rc;
        }
    }
    return load_conv(L, &w->conv_post, "decoder.generator.conv_post", hp->n_fft + 2, ch >> hp->n_ups, 7, 1, 0, 1);
}

static int32_t load_vocab(loader *L) {
    ez_kokoro *m = L->m;
    const ez_gguf_kv *sym, *ids;
    ez_str *strs = NULL;
    int32_t rc;
    if ((rc = ez_gguf_need_arr(L->g, "kokoro.vocab.symbols", EZ_GGUF_STRING, &sym)) ||
        (rc = ez_gguf_need_arr(L->g, "kokoro.vocab.ids", EZ_GGUF_I32, &ids)))
        return rc;
    if (sym->arr_len != ids->arr_len || sym->arr_len < 1 || sym->arr_len > MAX_TOKENS)
        return ez_fail(ELIZA_E_FORMAT, "Kokoro vocabulary: %" PRIu64 " symbols and %" PRIu64 " ids (1 to %d, equal)",
                       sym->arr_len, ids->arr_len, MAX_TOKENS);
    if ((rc = ez_gguf_arr_strings(sym, &strs))) return rc;
    m->n_vocab = (int)sym->arr_len;
    m->vocab_cp = malloc((size_t)m->n_vocab * sizeof *m->vocab_cp);
    m->vocab_id = malloc((size_t)m->n_vocab * sizeof *m->vocab_id);
    if (!m->vocab_cp || !m->vocab_id) {
        free(strs);
        return ez_fail(ELIZA_E_NOMEM, "Kokoro vocabulary of %d symbols", m->n_vocab);
    }
    for (int i = 0; i < m->n_vocab; i++) {
        int64_t cp = ez_utf8_one(strs[i].ptr, (size_t)strs[i].len);
        int32_t id;
        memcpy(&id, ids->arr_data + 4 * (size_t)i, 4);
        if (cp < 0) {
            free(strs);
            return ez_fail(ELIZA_E_FORMAT, "Kokoro vocabulary symbol %d is not one UTF-8 code point", i);
        }
        if (id < 0 || id >= m->hp.n_token) {
            free(strs);
            return ez_fail(ELIZA_E_FORMAT, "Kokoro vocabulary symbol %d has id %" PRId32 ", outside [0, %d)", i, id,
                           m->hp.n_token);
        }
        m->vocab_cp[i] = (uint32_t)cp;
        m->vocab_id[i] = id;
    }
    free(strs);
    return ELIZA_OK;
}

/* A NUL-terminated copy of s (at most max bytes, no NUL; empty only when
 * allow_empty) into *out, or a FORMAT error naming `what` and entry i. */
static int32_t voice_string(const ez_str *s, uint64_t i, const char *what, size_t max, int allow_empty,
                            char **out) {
    if ((!allow_empty && s->len == 0) || s->len > max || memchr(s->ptr, 0, s->len))
        return ez_fail(ELIZA_E_FORMAT, "Kokoro voice %s %" PRIu64 " is %slonger than %d bytes or holds NUL", what,
                       i, allow_empty ? "" : "empty, ", (int)max);
    if (!(*out = malloc(s->len + 1))) return ez_fail(ELIZA_E_NOMEM, "Kokoro voice %s %" PRIu64, what, i);
    memcpy(*out, s->ptr, s->len);
    (*out)[s->len] = 0;
    return ELIZA_OK;
}

/* kokoro.voice_languages / kokoro.voice_genders: optional (files before
 * them have none: ""), one string per voice when present. */
static int32_t voice_tags(loader *L, const char *key, uint64_t n, size_t max, char ***out) {
    const ez_gguf_kv *kv;
    ez_str *tags = NULL;
    int32_t rc;
    if (!(*out = calloc((size_t)n, sizeof **out))) return ez_fail(ELIZA_E_NOMEM, "Kokoro %s", key);
    if ((rc = ez_gguf_opt_arr(L->g, key, EZ_GGUF_STRING, &kv))) return rc;
    if (kv) {
        if (kv->arr_len != n)
            return ez_fail(ELIZA_E_FORMAT, "Kokoro metadata '%s' has %" PRIu64 " entries for %" PRIu64 " voices",
                           key, kv->arr_len, n);
        if ((rc = ez_gguf_arr_strings(kv, &tags))) return rc;
    }
    for (uint64_t i = 0; i < n; i++) {
        ez_str none = {"", 0};
        if ((rc = voice_string(tags ? &tags[i] : &none, i, key, max, 1, &(*out)[i]))) {
            free(tags);
            return rc;
        }
    }
    free(tags);
    return ELIZA_OK;
}

static int32_t load_voices(loader *L) {
    ez_kokoro *m = L->m;
    const ez_gguf_kv *kv;
    ez_str *names = NULL;
    int32_t rc;
    if ((rc = ez_gguf_need_arr(L->g, "kokoro.voices", EZ_GGUF_STRING, &kv))) return rc;
    if (kv->arr_len > 4096)
        return ez_fail(ELIZA_E_FORMAT, "Kokoro model lists %" PRIu64 " voices (at most 4096)", kv->arr_len);
    if (kv->arr_len == 0) return ELIZA_OK;
    if ((rc = ez_gguf_arr_strings(kv, &names))) return rc;
    m->voice_names = calloc((size_t)kv->arr_len, sizeof *m->voice_names);
    m->voices = calloc((size_t)kv->arr_len, sizeof *m->voices);
    if (!m->voice_names || !m->voices) {
        free(names);
        return ez_fail(ELIZA_E_NOMEM, "Kokoro voices: %" PRIu64 " packs", kv->arr_len);
    }
    for (uint64_t i = 0; i < kv->arr_len; i++) {
        if ((rc = voice_string(&names[i], i, "name", 64, 0, &m->voice_names[i]))) {
            free(names);
            return rc;
        }
        m->n_voices = (int)i + 1;
        snprintf(L->name, sizeof L->name, "voice.%s", m->voice_names[i]);
        if ((rc = tensor_view(L, &m->voices[i], 2, EZ_KOKORO_MAX_PHONEMES, EZ_KOKORO_STYLE_DIM, 0))) {
            free(names);
            return rc;
        }
    }
    free(names);
    if ((rc = voice_tags(L, "kokoro.voice_languages", kv->arr_len, 16, &m->voice_languages))) return rc;
    return voice_tags(L, "kokoro.voice_genders", kv->arr_len, 16, &m->voice_genders);
}

/* ---- weights prepared at open ---------------------------------------------------------- */

#define MAX_PREPARED 256

static void add_conv(ez_kokoro_conv **list, int *n, ez_kokoro_conv *cv) {
    if (*n < MAX_PREPARED && cv->w.type == EZ_TYPE_F16 && (cv->c_in > 1 || cv->c_out > 1)) list[(*n)++] = cv;
}

static void add_resblk(ez_kokoro_conv **list, int *n, ez_kokoro_resblk *b) {
    add_conv(list, n, &b->conv1);
    add_conv(list, n, &b->conv2);
    if (b->learned_sc) add_conv(list, n, &b->conv1x1);
}

/* The float16 Conv1d weights that run on the direct path (ez_tts_conv1d
 * without FFT) at an ordinary chunk's lengths, laid out once as that path's
 * GEMM panels (ez_tts_panels): the decoder's, the F0 / N blocks', the text
 * encoder's, asr_res, the noise convolutions and conv_post, and the
 * generator's first-stage resblocks of kernel 3 (direct below 1,000 steps:
 * chunks under 1.25 s). Every call used to widen each of these weights whole
 * and gather it into panels again; now it widens the panels' slices as it
 * multiplies them (the same operands, so the same audio). The panels hold
 * the file's float16 values (84 MB for Kokoro-82M v1.0) in place of those
 * weights' pages in the mapping, which are released; the rest of the
 * weights stay in place. Float32 and
 * dequantized weights are read in place and not laid out. Nothing is done
 * where the direct path has no GEMM kernels (ez_tts_panels_mr 0). The
 * generator's other convolutions run by FFT, whose filter spectra are made
 * per call from the taps: kept, they would take 95 / k times the taps in
 * float32 (25 MB per 256-channel layer), far past the memory there is. */
static int32_t prepare_panels(ez_kokoro *m) {
    const ez_kokoro_hparams *hp = &m->hp;
    ez_kokoro_weights *w = &m->w;
    const int mr = ez_tts_panels_mr();
    ez_kokoro_conv *list[MAX_PREPARED];
    int n = 0;
    int64_t total = 0;
    uint64_t t0 = ez_time_ns();
    uint16_t *dst;
    if (mr <= 0) return ELIZA_OK;
    add_resblk(list, &n, &w->encode);
    for (int i = 0; i < EZ_KOKORO_N_DECODE; i++) add_resblk(list, &n, &w->decode[i]);
    for (int i = 0; i < 3; i++) {
        add_resblk(list, &n, &w->f0[i]);
        add_resblk(list, &n, &w->n[i]);
    }
    for (int l = 0; l < hp->n_layer; l++) add_conv(list, &n, &w->te_conv[l]);
    add_conv(list, &n, &w->asr_res);
    for (int i = 0; i < hp->n_ups; i++) add_conv(list, &n, &w->noise_convs[i]);
    add_conv(list, &n, &w->conv_post);
    for (int j = 0; j < hp->n_kernels; j++)
        if (hp->rb_kernel[j] <= 3)
            for (int u = 0; u < 3; u++) {
                add_conv(list, &n, &w->resblocks[j].convs1[u]);
                add_conv(list, &n, &w->resblocks[j].convs2[u]);
            }
    for (int i = 0; i < n; i++) total += ez_tts_panels_count(list[i]->c_out, (int64_t)list[i]->c_in * list[i]->k, mr);
    if (!total) return ELIZA_OK;
    if (!(m->panels = malloc((size_t)total * sizeof *m->panels)))
        return ez_fail(ELIZA_E_NOMEM, "Kokoro: %" PRId64 " bytes for the convolutions' panels", 2 * total);
    dst = m->panels;
    for (int i = 0; i < n; i++) {
        ez_kokoro_conv *cv = list[i];
        const int64_t K = (int64_t)cv->c_in * cv->k;
        ez_tts_panels_pack((const uint16_t *)cv->w.data, cv->c_out, K, mr, dst);
        /* read again only where a call takes another path (FFT at a length
         * no chunk reaches); meanwhile the panels stand in for its pages */
        ez_map_release(cv->w.data, (size_t)cv->w.n * sizeof(uint16_t));
        cv->panels.h = dst;
        cv->panels.mr = mr;
        dst += ez_tts_panels_count(cv->c_out, K, mr);
    }
    ez_log(ELIZA_LOG_INFO, "Kokoro: %d convolutions laid out as GEMM panels (%.1f MB) in %.1f ms", n,
           (double)(2 * total) / 1e6, (double)(ez_time_ns() - t0) / 1e6);
    return ELIZA_OK;
}

/* ez_tts_bf16_default, said in the log (which rule decided; a value of
 * ELIZA_TTS_BF16 the rule ignores). */
static int bf16_at_open(void) {
    const char *why, *env = getenv("ELIZA_TTS_BF16");
    const int on = ez_tts_bf16_default(&why);
    if (env && *env && strcmp(env, "0") != 0 && strcmp(env, "1") != 0)
        ez_log(ELIZA_LOG_WARN, "ELIZA_TTS_BF16=%s is neither 0 nor 1: ignored", env);
    ez_log(ELIZA_LOG_INFO, "Kokoro: BF16 products %s", why);
    return on;
}

int32_t ez_kokoro_load(const char *path, ez_kokoro **out) {
    ez_gguf *g = NULL;
    ez_kokoro *m;
    loader L;
    int32_t rc;

    *out = NULL;
    if ((rc = ez_gguf_open(path, &g))) return rc;
    if (!(m = calloc(1, sizeof *m))) {
        ez_gguf_close(g);
        return ez_fail(ELIZA_E_NOMEM, "Kokoro model struct");
    }
    m->file = g;
    m->bf16 = bf16_at_open();
    L.m = m;
    L.g = g;
    if ((rc = load_hparams(g, &m->hp)) || (rc = load_albert(&L)) || (rc = load_predictor(&L)) ||
        (rc = load_text_encoder(&L)) || (rc = load_decoder(&L)) || (rc = load_vocab(&L)) || (rc = load_voices(&L)) ||
        (rc = prepare_panels(m))) {
        ez_kokoro_free(m);
        return rc;
    }
    *out = m;
    return ELIZA_OK;
}

void ez_kokoro_free(ez_kokoro *m) {
    if (!m) return;
    for (int i = 0; i < m->n_bufs; i++) free(m->bufs[i]);
    free(m->bufs);
    free(m->panels);
    for (int i = 0; i < m->n_voices; i++) {
        free(m->voice_names[i]);
        if (m->voice_languages) free(m->voice_languages[i]);
        if (m->voice_genders) free(m->voice_genders[i]);
    }
    free(m->voice_names);
    free(m->voice_languages);
    free(m->voice_genders);
    free(m->voices);
    free(m->vocab_cp);
    free(m->vocab_id);
    ez_gguf_close(m->file);
    free(m);
}

int ez_kokoro_sample_rate(const ez_kokoro *m) { return m->hp.sample_rate; }
int ez_kokoro_voice_count(const ez_kokoro *m) { return m->n_voices; }

const char *ez_kokoro_voice_name(const ez_kokoro *m, int index) {
    return index >= 0 && index < m->n_voices ? m->voice_names[index] : NULL;
}

const char *ez_kokoro_voice_language(const ez_kokoro *m, int index) {
    return index >= 0 && index < m->n_voices && m->voice_languages ? m->voice_languages[index] : NULL;
}

const char *ez_kokoro_voice_gender(const ez_kokoro *m, int index) {
    return index >= 0 && index < m->n_voices && m->voice_genders ? m->voice_genders[index] : NULL;
}

int ez_kokoro_voice_style(const ez_kokoro *m, int index, int row, float *style) {
    if (index < 0 || index >= m->n_voices || row < 0 || row >= EZ_KOKORO_MAX_PHONEMES) return -1;
    ez_kokoro_rows(&m->voices[index], row, 1, EZ_KOKORO_STYLE_DIM, style);
    return 0;
}

int ez_kokoro_symbol_id(const ez_kokoro *m, const char *sym, int len) {
    int64_t cp;
    if (!sym || len < 1) return -1;
    cp = ez_utf8_one(sym, (size_t)len);
    if (cp < 0) return -1;
    for (int i = 0; i < m->n_vocab; i++)
        if (m->vocab_cp[i] == (uint32_t)cp) return m->vocab_id[i];
    return -1;
}

int ez_kokoro_profile(const ez_kokoro *m, ez_kokoro_phase *out, int max) {
    int n = EZ_MIN(m->phases.n, max);
    for (int i = 0; i < n; i++) out[i] = m->phases.phase[i];
    return n;
}

/* ---- weights ----------------------------------------------------------------------------- */

void ez_kokoro_rows(const ez_kokoro_tensor *w, int64_t row, int64_t n_rows, int64_t width, float *dst) {
    if (w->type == EZ_TYPE_F32)
        memcpy(dst, (const float *)w->data + row * width, (size_t)(n_rows * width) * sizeof *dst);
    else
        ez_kernels(EZ_TYPE_F16)->dequant((const uint16_t *)w->data + row * width, dst, n_rows * width);
}

typedef struct {
    const ez_kokoro_tensor *w;
    float *dst;
} widen_job;

static void widen_range(void *ctx, int64_t begin, int64_t end, int thread_index) {
    const widen_job *j = ctx;
    (void)thread_index;
    ez_kokoro_rows(j->w, begin, end - begin, 1, j->dst + begin);
}

/* The widening of a layer's weights is split over the pool: on one thread it
 * was 3% of a synthesis's CPU time, with the other threads waiting for it.
 * ez_kokoro_rows sees the tensor as rows of one element here. */
const float *ez_kokoro_f32(ez_kokoro_ctx *c, const ez_kokoro_tensor *w) {
    widen_job job;
    if (w->type == EZ_TYPE_F32) return (const float *)w->data;
    if (!(job.dst = ez_kokoro_alloc(c->st, w->n))) return NULL;
    job.w = w;
    ez_pool_for(c->pool, w->n, 1 << 15, widen_range, &job);
    return job.dst;
}

/* ---- forward ----------------------------------------------------------------------------- */

void ez_kokoro_phase_end(ez_kokoro_ctx *c, const char *name) {
    uint64_t now = ez_time_ns();
    ez_kokoro_phases *p = c->phases;
    if (p->n < EZ_KOKORO_MAX_PHASES) {
        p->phase[p->n].name = name;
        p->phase[p->n].ms = (double)(now - p->t0) / 1e6;
        p->n++;
    }
    p->t0 = now;
}

int ez_kokoro_max_phonemes(const ez_kokoro *m) { return EZ_MIN(EZ_KOKORO_MAX_PHONEMES, m->hp.bert_max_pos - 2); }

static int32_t check_args(const ez_kokoro *m, const int32_t *ids, int n, const float *style, float speed) {
    int max_n = ez_kokoro_max_phonemes(m);
    if (!ids || !style) return ez_fail(ELIZA_E_INVALID_ARG, "Kokoro forward: ids and style are required");
    if (n < 1 || n > max_n)
        return ez_fail(ELIZA_E_INVALID_ARG, "Kokoro forward: %d phonemes (1 to %d per chunk)", n, max_n);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->hp.n_token)
            return ez_fail(ELIZA_E_INVALID_ARG, "Kokoro forward: phoneme id %" PRId32 " at %d is outside [0, %d)",
                           ids[i], i, m->hp.n_token);
    for (int i = 0; i < EZ_KOKORO_STYLE_DIM; i++)
        if (!isfinite(style[i]))
            return ez_fail(ELIZA_E_INVALID_ARG, "Kokoro forward: style value %d is not finite", i);
    if (!(speed > 0.0f) || !isfinite(speed))
        return ez_fail(ELIZA_E_INVALID_ARG, "Kokoro forward: speed %g must be a positive number", (double)speed);
    return ELIZA_OK;
}

int32_t ez_kokoro_forward_trace(ez_kokoro *m, ez_pool *pool, const int32_t *ids, int n, const float *style,
                                float speed, int no_noise, uint64_t seed, ez_atomic_int *cancel,
                                ez_kokoro_trace *trace, float **out_pcm, size_t *out_n) {
    const ez_kokoro_hparams *hp = &m->hp;
    const int D = hp->hidden, S = hp->style, T = n + 2;
    ez_kokoro_stack st = {{0}, 0};
    ez_kokoro_ctx c = {m, pool, &st, trace, &m->phases, cancel};
    const float *s_dec = style, *s_pred = style + S;
    int32_t *ids_pad = NULL, *dur = NULL;
    float *d_en, *d, *en, *f0, *nn, *t_en, *asr, *x, *har, *pcm = NULL;
    int F = 0, upp = hp->hop, T0;
    int64_t L, NF;
    int32_t rc;

    *out_pcm = NULL;
    *out_n = 0;
    m->phases.n = 0;
    m->phases.t0 = ez_time_ns();
    if ((rc = check_args(m, ids, n, style, speed))) return rc;
    for (int i = 0; i < hp->n_ups; i++) upp *= hp->ups_rate[i];

    ids_pad = malloc((size_t)T * sizeof *ids_pad);
    dur = malloc((size_t)T * sizeof *dur);
    if (!ids_pad || !dur) {
        rc = ez_fail(ELIZA_E_NOMEM, "Kokoro forward: %d ids", T);
        goto done;
    }
    /* KModel.forward: [0, *ids, 0] */
    ids_pad[0] = ids_pad[T - 1] = 0;
    memcpy(ids_pad + 1, ids, (size_t)n * sizeof *ids);

#define NEED(p, count)                              \
    if (!((p) = ez_kokoro_alloc(&st, (count)))) { \
        rc = ELIZA_E_NOMEM;                         \
        goto done;                                  \
    }
#define STAGE_END(name)                                                                   \
    do {                                                                                  \
        ez_kokoro_phase_end(&c, name);                                                    \
        if (ez_kokoro_cancelled(&c)) {                                                    \
            rc = ez_fail(ELIZA_E_CANCELLED, "Kokoro forward cancelled after %s", name); \
            goto done;                                                                    \
        }                                                                                 \
    } while (0)

    NEED(d_en, (int64_t)T * D);
    if ((rc = ez_kokoro_albert(&c, ids_pad, T, d_en))) goto done;
    STAGE_END("albert");

    NEED(d, (int64_t)T * (D + S));
    if ((rc = ez_kokoro_durations(&c, d_en, T, s_pred, speed, d, dur, &F))) goto done;
    STAGE_END("duration");
    if (F > max_frames(hp) || (int64_t)2 * F * upp > MAX_SAMPLES) {
        rc = ez_fail(ELIZA_E_INVALID_ARG, "Kokoro forward: %d frames at speed %g exceed the %d a chunk may last", F,
                     (double)speed, max_frames(hp));
        goto done;
    }

    /* en = d^T @ alignment: frame f repeats the token it belongs to. */
    NEED(en, (int64_t)F * (D + S));
    for (int t = 0, f = 0; t < T; t++)
        for (int r = 0; r < dur[t]; r++, f++)
            memcpy(en + (int64_t)f * (D + S), d + (int64_t)t * (D + S), (size_t)(D + S) * sizeof(float));
    NEED(f0, 2 * (int64_t)F);
    NEED(nn, 2 * (int64_t)F);
    if ((rc = ez_kokoro_f0n(&c, en, F, s_pred, f0, nn))) goto done;
    if (trace && trace->f0_in && trace->n_in) {
        if (trace->n_curve != 2 * (int64_t)F) {
            rc = ez_fail(ELIZA_E_INVALID_ARG, "Kokoro trace: %" PRId64 " injected F0/N values for %d frames",
                         trace->n_curve, 2 * F);
            goto done;
        }
        memcpy(f0, trace->f0_in, (size_t)(2 * F) * sizeof *f0);
        memcpy(nn, trace->n_in, (size_t)(2 * F) * sizeof *nn);
    }
    STAGE_END("f0n");

    NEED(t_en, (int64_t)T * D);
    NEED(asr, (int64_t)D * F);
    if ((rc = ez_kokoro_text_encoder(&c, ids_pad, T, t_en))) goto done;
    for (int t = 0, f = 0; t < T; t++)
        for (int r = 0; r < dur[t]; r++, f++)
            for (int ch = 0; ch < D; ch++) asr[(int64_t)ch * F + f] = t_en[(int64_t)t * D + ch];
    STAGE_END("text_encoder");

    T0 = 2 * F;
    NEED(x, (int64_t)hp->ups_channels * T0);
    if ((rc = ez_kokoro_decoder(&c, asr, F, f0, nn, s_dec, x))) goto done;
    STAGE_END("decoder");

    L = (int64_t)T0 * upp;
    NF = L / hp->hop + 1;
    NEED(har, (int64_t)(hp->n_fft + 2) * NF);
    if ((rc = ez_kokoro_source(&c, f0, T0, no_noise ? NULL : &seed, har))) goto done;
    STAGE_END("source");

    if (!(pcm = malloc((size_t)L * sizeof *pcm))) {
        rc = ez_fail(ELIZA_E_NOMEM, "Kokoro forward: %" PRId64 " samples", L);
        goto done;
    }
    if ((rc = ez_kokoro_generator(&c, x, T0, har, s_dec, pcm))) goto done;
    if ((rc = ez_kokoro_record(&c, "audio", pcm, L, 0, 0))) goto done;
    ez_kokoro_phase_end(&c, "istft");
#undef NEED
#undef STAGE_END
    *out_pcm = pcm;
    *out_n = (size_t)L;
    pcm = NULL;
    rc = ELIZA_OK;
done:
    ez_kokoro_release(&st, 0);
    free(pcm);
    free(ids_pad);
    free(dur);
    return rc;
}

int32_t ez_kokoro_forward(ez_kokoro *m, ez_pool *pool, const int32_t *ids, int n, const float *style, float speed,
                          int no_noise, uint64_t seed, ez_atomic_int *cancel, float **out_pcm, size_t *out_n) {
    return ez_kokoro_forward_trace(m, pool, ids, n, style, speed, no_noise, seed, cancel, NULL, out_pcm, out_n);
}
