/* pyannote segmentation-3.0 (PyanNet) forward, as the ONNX export computes
 * it (docs/diarization.md):
 *
 *   wav -> InstanceNorm (affine, over the whole chunk)
 *       -> SincNet filterbank conv (stride 10) -> |.| -> MaxPool 3 -> InstanceNorm -> LeakyReLU
 *       -> conv 5 -> MaxPool 3 -> InstanceNorm -> LeakyReLU
 *       -> conv 5 -> MaxPool 3 -> InstanceNorm -> LeakyReLU
 *       -> 4 x BiLSTM -> Linear + LeakyReLU -> Linear + LeakyReLU -> Linear -> log-softmax
 *
 * Activations are time-major ([T, C], row t holds the C channels of frame
 * t), so every convolution is one GEMM whose A rows are overlapping windows
 * of its input (row t starts at t * stride * C: no im2col copy), with the
 * weights of conv 1 and 2 reordered at load to [C_out, k, C_in] (the
 * SincNet filters, one input channel, are that order as stored). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/gemm.h"
#include "core/gguf.h"
#include "diar/nn.h"
#include "diar/segmentation.h"

#define ARCH "pyannote"
#define MAX_LSTM_LAYERS 8
#define N_CONV 3
/* Rows of the SincNet output computed at once before pooling (a multiple
 * of any pool size up to 8). */
#define SINC_BLOCK_ROWS 1680
/* Float budget of the projected LSTM input of one group of chunks. */
#define GROUP_FLOATS (8 << 20)
#define ROUND16(n) (((n) + 15) / 16 * 16)
/* Floats of an instance_norm_lrelu workspace for the widest layer. */
#define STATS_FLOATS(m) ROUND16(6 * (size_t)EZ_MAX((m)->chan[0], EZ_MAX((m)->chan[1], (m)->chan[2])))

typedef struct {
    int f0, n;                        /* filters f0 .. f0 + n - 1 */
    int sym;                          /* 1 symmetric, 0 antisymmetric */
} sinc_run;

struct ez_seg_model {
    ez_gguf *gguf;                    /* the file, mapped: the LSTMs read their weights there */
    int sample_rate, chunk_samples;
    int frame_step, receptive_field;  /* samples, as the file states and the layers imply */
    int stride, pool;                 /* SincNet conv stride, max-pool kernel = stride */
    int chan[N_CONV], kernel[N_CONV]; /* output channels and kernel of conv 0 (SincNet), 1, 2 */
    int n_layers, H, n_lin0, n_lin1, n_classes, n_speakers;
    float eps, slope;
    float wav_w, wav_b;               /* the waveform InstanceNorm's affine step */
    const float *conv_w[N_CONV];      /* [chan, kernel, chan_in] ([80, 251] for SincNet, in place) */
    float *conv_own[N_CONV];          /* the re-laid-out copies conv_w points to (conv 1, 2), or NULL */
    const float *conv_b[N_CONV];      /* [chan]; NULL for SincNet (no bias) */
    /* SincNet's filters come in pairs, a cosine band-pass that is exactly
     * symmetric and a sine one that is exactly antisymmetric (the right half
     * is built as the mirror of the left). The fast path adds (subtracts)
     * mirrored input samples first and multiplies the stored filters' left
     * halves, read in place: half the multiply-adds. One product per run of
     * consecutive filters of one parity (segmentation-3.0: 40 symmetric,
     * then 40 antisymmetric); no runs when some stored filter is neither. */
    sinc_run *sinc_runs;              /* [n_sinc_runs] */
    int n_sinc_runs;
    double *sinc_sum;                 /* [chan[0]]: the sum of filter c's taps */
    /* Biases, norms and linear layers are read in place from the mapping
     * (copies only in `owned`, for a file aligned to less than a float). */
    const float *norm_w[N_CONV], *norm_b[N_CONV];
    ez_nn_lstm lstm[MAX_LSTM_LAYERS];
    const float *lin0_w, *lin0_b;     /* [n_lin0, 2H], [n_lin0] */
    const float *lin1_w, *lin1_b;     /* [n_lin1, n_lin0] */
    const float *cls_w, *cls_b;       /* [n_classes, n_lin1] */
    ez_nn_owned owned;
    uint8_t *powerset;                /* [n_classes, n_speakers] */
    ez_nn_arena work;                 /* activations, kept between calls */
    ez_nn_arena span_work;            /* ez_seg_forward_span's filterbank rows */
};

/* ---- loading ------------------------------------------------------------------- */

void ez_seg_free(ez_seg_model *m) {
    if (!m) return;
    free(m->sinc_sum);
    for (int i = 0; i < N_CONV; i++) free(m->conv_own[i]);
    ez_nn_owned_free(&m->owned);
    for (int l = 0; l < MAX_LSTM_LAYERS; l++) ez_nn_lstm_free(&m->lstm[l]);
    free(m->sinc_runs);
    free(m->powerset);
    ez_nn_arena_free(&m->work);
    ez_nn_arena_free(&m->span_work);
    ez_gguf_close(m->gguf);
    free(m);
}

/* The outermost dimension of tensor `name` (its output count), in [1, max]. */
static int32_t outer_dim(const ez_gguf *g, const char *name, int max, int *out) {
    const ez_gguf_tensor *t = ez_gguf_find_tensor(g, name);
    if (!t) return ez_fail(ELIZA_E_FORMAT, "tensor '%s' is missing", name);
    if (t->ne[t->n_dims - 1] < 1 || t->ne[t->n_dims - 1] > (uint64_t)max)
        return ez_fail(ELIZA_E_FORMAT, "tensor '%s': outer dimension %" PRIu64 " is outside [1, %d]", name,
                       t->ne[t->n_dims - 1], max);
    *out = (int)t->ne[t->n_dims - 1];
    return ELIZA_OK;
}

/* The innermost dimension of tensor `name` (a kernel size), in [1, max]. */
static int32_t inner_dim(const ez_gguf *g, const char *name, int max, int *out) {
    const ez_gguf_tensor *t = ez_gguf_find_tensor(g, name);
    if (!t) return ez_fail(ELIZA_E_FORMAT, "tensor '%s' is missing", name);
    if (t->ne[0] < 1 || t->ne[0] > (uint64_t)max)
        return ez_fail(ELIZA_E_FORMAT, "tensor '%s': inner dimension %" PRIu64 " is outside [1, %d]", name, t->ne[0],
                       max);
    *out = (int)t->ne[0];
    return ELIZA_OK;
}

/* Frames of each stage for n samples: t[0] SincNet conv, t[1] pool, t[2]
 * conv 1, t[3] pool, t[4] conv 2, t[5] pool (the model's frames). Returns
 * t[5], or 0 when n is too short for some stage. */
static int stage_frames(const ez_seg_model *m, int64_t n, int64_t t[6]) {
    int64_t len = n;
    for (int i = 0; i < N_CONV; i++) {
        int stride = i == 0 ? m->stride : 1;
        if (len < m->kernel[i]) return 0;
        len = (len - m->kernel[i]) / stride + 1;
        t[2 * i] = len;
        if (len < m->pool) return 0;
        len = (len - m->pool) / m->pool + 1;
        t[2 * i + 1] = len;
    }
    return len > INT32_MAX ? 0 : (int)len;
}

/* The weight of conv i, [out, in, k] as stored, as [out, k, in]: the GEMM's
 * A row is k frames of in channels. One input channel (SincNet) is that
 * order already and is read in place. */
static int32_t load_conv_weight(ez_seg_model *m, const ez_gguf *g, const char *name, int i, int c_in) {
    const int64_t dims[3] = {m->chan[i], c_in, m->kernel[i]};
    float *w = NULL, *t;
    int32_t rc;
    if (c_in == 1) return ez_nn_weight(g, name, 3, dims, &m->conv_w[i], &m->owned);
    if ((rc = ez_nn_tensor(g, name, 3, dims, &w))) return rc;
    t = (float *)malloc((size_t)m->chan[i] * (size_t)m->kernel[i] * (size_t)c_in * sizeof(float));
    if (!t) {
        free(w);
        return ez_fail(ELIZA_E_NOMEM, "no memory for '%s'", name);
    }
    for (int o = 0; o < m->chan[i]; o++)
        for (int c = 0; c < c_in; c++)
            for (int k = 0; k < m->kernel[i]; k++)
                t[((int64_t)o * m->kernel[i] + k) * c_in + c] = w[((int64_t)o * c_in + c) * m->kernel[i] + k];
    free(w);
    m->conv_w[i] = m->conv_own[i] = t;
    return ELIZA_OK;
}

static int32_t load_conv(ez_seg_model *m, const ez_gguf *g, int i, int c_in) {
    char name[64];
    int32_t rc;
    snprintf(name, sizeof name, i == 0 ? "sincnet.filterbank.weight" : "sincnet.conv.%d.weight", i);
    if ((rc = outer_dim(g, name, 4096, &m->chan[i])) || (rc = inner_dim(g, name, 65536, &m->kernel[i])) ||
        (rc = load_conv_weight(m, g, name, i, c_in)))
        return rc;
    if (i > 0) {
        int64_t dims[1] = {m->chan[i]};
        snprintf(name, sizeof name, "sincnet.conv.%d.bias", i);
        if ((rc = ez_nn_weight(g, name, 1, dims, &m->conv_b[i], &m->owned))) return rc;
    }
    {
        int64_t dims[1] = {m->chan[i]};
        snprintf(name, sizeof name, "sincnet.norm.%d.weight", i);
        if ((rc = ez_nn_weight(g, name, 1, dims, &m->norm_w[i], &m->owned))) return rc;
        snprintf(name, sizeof name, "sincnet.norm.%d.bias", i);
        if ((rc = ez_nn_weight(g, name, 1, dims, &m->norm_b[i], &m->owned))) return rc;
    }
    return ELIZA_OK;
}

/* 1 symmetric, -1 antisymmetric (centre tap 0 included), 0 neither. */
static int filter_parity(const float *w, int K) {
    int sym = 1, anti = K % 2 == 0 || w[K / 2] == 0.0f;
    for (int k = 0; k < K / 2; k++) {
        sym &= w[k] == w[K - 1 - k];
        anti &= w[k] == -w[K - 1 - k];
    }
    return sym ? 1 : anti ? -1 : 0;
}

/* The runs of filters of one parity, or none when some filter has neither. */
static int32_t fold_sincnet(ez_seg_model *m) {
    const int F = m->chan[0], K = m->kernel[0];
    int n = 0;
    for (int f = 0; f < F; f++)
        if (filter_parity(m->conv_w[0] + (int64_t)f * K, K) == 0) return ELIZA_OK;
    if (!(m->sinc_runs = (sinc_run *)malloc((size_t)F * sizeof *m->sinc_runs)))
        return ez_fail(ELIZA_E_NOMEM, "no memory for the SincNet filters");
    for (int f = 0; f < F; f++) {
        int sym = filter_parity(m->conv_w[0] + (int64_t)f * K, K) > 0;
        if (n > 0 && m->sinc_runs[n - 1].sym == sym) {
            m->sinc_runs[n - 1].n++;
        } else {
            sinc_run r = {f, 1, sym};
            m->sinc_runs[n++] = r;
        }
    }
    m->n_sinc_runs = n;
    return ELIZA_OK;
}

static int32_t load_linear(ez_seg_model *m, const ez_gguf *g, const char *prefix, int n_in, int *n_out,
                           const float **w, const float **b) {
    char name[64];
    int32_t rc;
    snprintf(name, sizeof name, "%s.weight", prefix);
    if ((rc = outer_dim(g, name, 65536, n_out))) return rc;
    {
        int64_t dw[2] = {*n_out, n_in}, db[1] = {*n_out};
        if ((rc = ez_nn_weight(g, name, 2, dw, w, &m->owned))) return rc;
        snprintf(name, sizeof name, "%s.bias", prefix);
        return ez_nn_weight(g, name, 1, db, b, &m->owned);
    }
}

static int32_t load_powerset(ez_seg_model *m, const ez_gguf *g) {
    const ez_gguf_kv *kv;
    uint32_t n_spk, max_per_frame;
    int32_t rc;
    if ((rc = ez_gguf_need_u32(g, ARCH ".powerset.speaker_count", 1, 16, &n_spk)) ||
        (rc = ez_gguf_need_u32(g, ARCH ".powerset.max_speakers_per_frame", 1, n_spk, &max_per_frame)))
        return rc;
    if ((rc = ez_gguf_need_arr(g, ARCH ".powerset.mapping", EZ_GGUF_U8, &kv))) return rc;
    m->n_speakers = (int)n_spk;
    if (kv->arr_len != (uint64_t)m->n_classes * n_spk)
        return ez_fail(ELIZA_E_FORMAT, ARCH ".powerset.mapping has %" PRIu64 " entries, expected %d classes x %u speakers",
                       kv->arr_len, m->n_classes, n_spk);
    m->powerset = (uint8_t *)malloc((size_t)kv->arr_len);
    if (!m->powerset) return ez_fail(ELIZA_E_NOMEM, "no memory for the powerset mapping");
    memcpy(m->powerset, kv->arr_data, (size_t)kv->arr_len);
    for (int c = 0; c < m->n_classes; c++) {
        unsigned count = 0;
        for (int s = 0; s < m->n_speakers; s++) {
            uint8_t v = m->powerset[c * m->n_speakers + s];
            if (v > 1) return ez_fail(ELIZA_E_FORMAT, ARCH ".powerset.mapping: class %d speaker %d is %u, not 0 or 1", c, s, v);
            count += v;
        }
        if (count > max_per_frame)
            return ez_fail(ELIZA_E_FORMAT, ARCH ".powerset.mapping: class %d has %u speakers, above %u", c, count,
                           max_per_frame);
    }
    return ELIZA_OK;
}

/* The metadata; the LSTMs' gate order into order[16]. */
static int32_t load_hparams(ez_seg_model *m, const ez_gguf *g, char *order) {
    uint32_t sr, step, field, stride, pool, n_layers, H;
    float chunk_s;
    int bidir;
    int32_t rc;

    if ((rc = ez_nn_check_arch(g, ARCH, "not a pyannote segmentation model")) ||
        (rc = ez_gguf_need_u32(g, ARCH ".sample_rate", 1000, 192000, &sr)) ||
        (rc = ez_gguf_need_f32(g, ARCH ".chunk_duration", 0.1f, 600.0f, &chunk_s)) ||
        (rc = ez_gguf_need_u32(g, ARCH ".frame_step", 1, 1u << 20, &step)) ||
        (rc = ez_gguf_need_u32(g, ARCH ".receptive_field", 1, 1u << 20, &field)) ||
        (rc = ez_gguf_need_u32(g, ARCH ".sincnet.stride", 1, 1024, &stride)) ||
        (rc = ez_gguf_need_u32(g, ARCH ".sincnet.pool_size", 1, 8, &pool)) ||
        (rc = ez_gguf_need_f32(g, ARCH ".norm_epsilon", 0.0f, 1.0f, &m->eps)) ||
        (rc = ez_gguf_need_f32(g, ARCH ".leaky_relu_slope", 0.0f, 1.0f, &m->slope)) ||
        (rc = ez_gguf_need_u32(g, ARCH ".lstm.layer_count", 1, MAX_LSTM_LAYERS, &n_layers)) ||
        (rc = ez_gguf_need_u32(g, ARCH ".lstm.hidden_size", 1, 4096, &H)) ||
        (rc = ez_gguf_need_bool(g, ARCH ".lstm.bidirectional", &bidir)) ||
        (rc = ez_nn_key_str(g, ARCH ".lstm.gate_order", order, 16)))
        return rc;
    if (!bidir) return ez_fail(ELIZA_E_FORMAT, ARCH ".lstm.bidirectional is false; PyanNet's LSTMs are bidirectional");
    m->sample_rate = (int)sr;
    m->chunk_samples = (int)lroundf(chunk_s * (float)sr);
    m->stride = (int)stride;
    m->pool = (int)pool;
    m->n_layers = (int)n_layers;
    m->H = (int)H;
    m->frame_step = (int)step;
    m->receptive_field = (int)field;
    return ELIZA_OK;
}

/* SincNet: the waveform norm, the three convolutions (folded filters for the
 * first) and the frame geometry they imply, which must be the file's. */
static int32_t load_sincnet(ez_seg_model *m, const ez_gguf *g) {
    float *wv = NULL;
    int64_t t[6];
    int32_t rc;
    {
        int64_t dims[1] = {1};
        if ((rc = ez_nn_tensor(g, "sincnet.wav_norm.weight", 1, dims, &wv))) return rc;
        m->wav_w = wv[0];
        free(wv);
        if ((rc = ez_nn_tensor(g, "sincnet.wav_norm.bias", 1, dims, &wv))) return rc;
        m->wav_b = wv[0];
        free(wv);
    }
    for (int i = 0; i < N_CONV; i++)
        if ((rc = load_conv(m, g, i, i == 0 ? 1 : m->chan[i - 1]))) return rc;
    if ((rc = fold_sincnet(m))) return rc;
    if (!(m->sinc_sum = (double *)calloc((size_t)m->chan[0], sizeof(double))))
        return ez_fail(ELIZA_E_NOMEM, "no memory for the SincNet filters");
    for (int f = 0; f < m->chan[0]; f++)
        for (int j = 0; j < m->kernel[0]; j++) m->sinc_sum[f] += m->conv_w[0][(int64_t)f * m->kernel[0] + j];

    /* The geometry the layers imply must be the one the file states. */
    {
        int64_t jump = 1, rf = 1;
        for (int i = 0; i < N_CONV; i++) {
            rf += (int64_t)(m->kernel[i] - 1) * jump;
            jump *= i == 0 ? m->stride : 1;
            rf += (int64_t)(m->pool - 1) * jump;
            jump *= m->pool;
        }
        if (jump != (int64_t)m->frame_step || rf != (int64_t)m->receptive_field)
            return ez_fail(ELIZA_E_FORMAT,
                           "the layers give a frame step of %" PRId64 " and a receptive field of %" PRId64
                           " samples, the file says %d and %d",
                           jump, rf, m->frame_step, m->receptive_field);
        if (stage_frames(m, m->chunk_samples, t) == 0)
            return ez_fail(ELIZA_E_FORMAT, "a %g s chunk is shorter than the receptive field",
                           (double)m->chunk_samples / m->sample_rate);
    }
    return ELIZA_OK;
}

/* The LSTM stack, the linear layers, the classifier and its powerset. */
static int32_t load_head(ez_seg_model *m, const ez_gguf *g, const char *order) {
    int32_t rc;
    for (int l = 0; l < m->n_layers; l++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "lstm.%d", l);
        if ((rc = ez_nn_lstm_load(g, prefix, order, 2, l == 0 ? m->chan[N_CONV - 1] : 2 * m->H, m->H, &m->lstm[l])))
            return rc;
    }
    {
        char name[32];
        snprintf(name, sizeof name, "lstm.%d.weight_ih", m->n_layers);
        if (ez_gguf_find_tensor(g, name))
            return ez_fail(ELIZA_E_FORMAT, "tensor '%s' exists but " ARCH ".lstm.layer_count is %d", name, m->n_layers);
    }
    if ((rc = load_linear(m, g, "linear.0", 2 * m->H, &m->n_lin0, &m->lin0_w, &m->lin0_b)) ||
        (rc = load_linear(m, g, "linear.1", m->n_lin0, &m->n_lin1, &m->lin1_w, &m->lin1_b)) ||
        (rc = load_linear(m, g, "classifier", m->n_lin1, &m->n_classes, &m->cls_w, &m->cls_b)))
        return rc;
    return load_powerset(m, g);
}

static int32_t load(ez_seg_model *m, const ez_gguf *g) {
    char order[16];
    int32_t rc;
    if ((rc = load_hparams(m, g, order)) || (rc = load_sincnet(m, g))) return rc;
    return load_head(m, g, order);
}

int32_t ez_seg_load(const char *path, ez_seg_model **out) {
    ez_gguf *g = NULL;
    ez_seg_model *m;
    int32_t rc;
    *out = NULL;
    if ((rc = ez_gguf_open(path, &g))) return rc;
    m = (ez_seg_model *)calloc(1, sizeof *m);
    if (!m) {
        ez_gguf_close(g);
        return ez_fail(ELIZA_E_NOMEM, "no memory for the segmentation model");
    }
    m->gguf = g;
    rc = load(m, g);
    if (rc) {
        ez_seg_free(m);
        return rc;
    }
    *out = m;
    return ELIZA_OK;
}

int ez_seg_sample_rate(const ez_seg_model *m) { return m->sample_rate; }
int ez_seg_chunk_samples(const ez_seg_model *m) { return m->chunk_samples; }
int ez_seg_frames(const ez_seg_model *m, int n_samples) {
    int64_t t[6];
    return stage_frames(m, n_samples, t);
}
double ez_seg_frame_step(const ez_seg_model *m) { return (double)m->frame_step / m->sample_rate; }
double ez_seg_frame_duration(const ez_seg_model *m) { return (double)m->receptive_field / m->sample_rate; }
int ez_seg_n_classes(const ez_seg_model *m) { return m->n_classes; }
int ez_seg_n_speakers(const ez_seg_model *m) { return m->n_speakers; }
const uint8_t *ez_seg_powerset(const ez_seg_model *m) { return m->powerset; }

/* ---- forward: SincNet ------------------------------------------------------------- */

static void leaky_relu(float *x, int64_t n, float slope) {
    for (int64_t i = 0; i < n; i++) x[i] = x[i] >= 0.0f ? x[i] : slope * x[i];
}

/* InstanceNorm over time of x [T, C] (biased variance, eps inside the
 * root, then the affine step), fused with the LeakyReLU that follows it.
 * acc: 2C doubles for the statistics, then 2C floats for the affine step. */
static void instance_norm_lrelu(float *x, int64_t T, int C, const float *w, const float *b, float eps,
                                float slope, double *acc) {
    double *mean = acc, *var = acc + C;
    float *scale = (float *)(void *)(acc + 2 * C), *shift = scale + C;
    for (int c = 0; c < C; c++) mean[c] = var[c] = 0.0;
    for (int64_t t = 0; t < T; t++)
        for (int c = 0; c < C; c++) mean[c] += x[t * C + c];
    for (int c = 0; c < C; c++) mean[c] /= (double)T;
    for (int64_t t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            double d = x[t * C + c] - mean[c];
            var[c] += d * d;
        }
    for (int c = 0; c < C; c++) {
        double sc = w[c] / sqrt(var[c] / (double)T + eps);
        scale[c] = (float)sc;
        shift[c] = (float)(b[c] - mean[c] * sc);
    }
    /* Branch-free, so it vectorises: max(v, 0) + slope min(v, 0) is v or slope v exactly. */
    for (int64_t t = 0; t < T; t++) {
        float *r = x + t * C;
        for (int c = 0; c < C; c++) {
            float v = r[c] * scale[c] + shift[c];
            r[c] = (v > 0.0f ? v : 0.0f) + slope * (v < 0.0f ? v : 0.0f);
        }
    }
}

/* y[t] = max over the pool window of x, for T_out rows of C. */
static void max_pool(const float *x, int64_t T_out, int C, int k, float *y) {
    for (int64_t t = 0; t < T_out; t++) {
        const float *r = x + t * k * C;
        float *o = y + t * C;
        memcpy(o, r, (size_t)C * sizeof(float));
        for (int j = 1; j < k; j++)
            for (int c = 0; c < C; c++) o[c] = r[j * C + c] > o[c] ? r[j * C + c] : o[c];
    }
}

/* The same over |x|. */
static void max_abs_pool(const float *x, int64_t T_out, int C, int k, float *y) {
    for (int64_t t = 0; t < T_out; t++) {
        const float *r = x + t * k * C;
        float *o = y + t * C;
        for (int c = 0; c < C; c++) {
            float v = fabsf(r[c]);
            for (int j = 1; j < k; j++) {
                float a = fabsf(r[j * C + c]);
                v = a > v ? a : v;
            }
            o[c] = v;
        }
    }
}

typedef struct {
    int64_t t[6];         /* stage_frames() of the chunk */
    size_t floats;        /* per-chunk workspace */
} sinc_plan;

static void plan_sinc(const ez_seg_model *m, int n_samples, sinc_plan *p) {
    int64_t *t = p->t;
    stage_frames(m, n_samples, t);
    p->floats = STATS_FLOATS(m)                                     /* norm statistics */
                + (size_t)n_samples                                 /* normalised wav */
                + (size_t)SINC_BLOCK_ROWS * (size_t)m->chan[0]      /* SincNet block */
                + (size_t)SINC_BLOCK_ROWS * (size_t)m->kernel[0]    /* its folded input */
                + (size_t)t[1] * (size_t)m->chan[0]                 /* pool 0 */
                + (size_t)t[2] * (size_t)m->chan[1]                 /* conv 1 */
                + (size_t)t[3] * (size_t)m->chan[1]                 /* pool 1 */
                + (size_t)t[4] * (size_t)m->chan[2];                /* conv 2 */
    p->floats = (p->floats + 15) / 16 * 16;                         /* keeps each thread's doubles aligned */
}

/* Conv i (1 or 2) with bias: y[T_out, chan] from x[T_in, chan_in]; each A
 * row is kernel consecutive frames of x. */
static void conv_gemm(const ez_seg_model *m, ez_pool *pool, int i, const float *x, int64_t T_out, float *y) {
    int c_in = m->chan[i - 1], C = m->chan[i];
    for (int64_t t = 0; t < T_out; t++) memcpy(y + t * C, m->conv_b[i], (size_t)C * sizeof(float));
    ez_gemm_f32(pool, T_out, C, (int64_t)m->kernel[i] * c_in, x, c_in, m->conv_w[i], (int64_t)m->kernel[i] * c_in, 1,
                y, C, 1);
}

/* The filterbank (no bias) of `rows` rows of x, row r reading x[r * stride
 * ..], into blk [rows, chan[0]]. fold: [rows, kernel[0]] scratch. */
static void filterbank(const ez_seg_model *m, ez_pool *pool, const float *x, int64_t rows, int folded, float *fold,
                       float *blk) {
    int F = m->chan[0];
    if (folded) {
        /* Row r: the sums x[j] + x[K-1-j] (and the centre), then the differences. */
        int K = m->kernel[0], hs = (K + 1) / 2, ha = K / 2;
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = x + r * m->stride;
            float *o = fold + r * K;
            for (int j = 0; j < ha; j++) {
                o[j] = xr[j] + xr[K - 1 - j];
                o[hs + j] = xr[j] - xr[K - 1 - j];
            }
            if (K % 2) o[hs - 1] = xr[hs - 1];
        }
        for (int i = 0; i < m->n_sinc_runs; i++) {
            const sinc_run *r = &m->sinc_runs[i];
            ez_gemm_f32(pool, rows, r->n, r->sym ? hs : ha, r->sym ? fold : fold + hs, K,
                        m->conv_w[0] + (int64_t)r->f0 * K, K, 1, blk + r->f0, F, 0);
        }
    } else {
        ez_gemm_f32(pool, rows, F, m->kernel[0], x, m->stride, m->conv_w[0], m->kernel[0], 1, blk, F, 0);
    }
}

/* The folded filterbank runs unless the scalar reference is forced. */
static int sinc_folded(const ez_seg_model *m) { return m->n_sinc_runs > 0 && ez_simd_level_active() != EZ_SIMD_SCALAR; }

/* The waveform InstanceNorm of a chunk as wav = pcm * scale + shift. */
static void wav_norm(const ez_seg_model *m, const float *pcm, int n, double *scale, double *shift) {
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < n; i++) mean += pcm[i];
    mean /= n;
    for (int i = 0; i < n; i++) var += (pcm[i] - mean) * (pcm[i] - mean);
    *scale = m->wav_w / sqrt(var / n + m->eps);
    *shift = m->wav_b - mean * *scale;
}

/* Everything after the first pooling: p0 [t[1], chan[0]] (in ws) -> feat
 * [t[5], chan[2]]. */
static void sincnet_rest(const ez_seg_model *m, ez_pool *pool, const sinc_plan *p, float *ws, float *p0, float *feat) {
    const int64_t *t = p->t;
    double *acc = (double *)(void *)ws;
    float *c1 = p0 + t[1] * m->chan[0], *p1 = c1 + t[2] * m->chan[1], *c2 = p1 + t[3] * m->chan[1];
    instance_norm_lrelu(p0, t[1], m->chan[0], m->norm_w[0], m->norm_b[0], m->eps, m->slope, acc);
    conv_gemm(m, pool, 1, p0, t[2], c1);
    max_pool(c1, t[3], m->chan[1], m->pool, p1);
    instance_norm_lrelu(p1, t[3], m->chan[1], m->norm_w[1], m->norm_b[1], m->eps, m->slope, acc);
    conv_gemm(m, pool, 2, p1, t[4], c2);
    max_pool(c2, t[5], m->chan[2], m->pool, feat);
    instance_norm_lrelu(feat, t[5], m->chan[2], m->norm_w[2], m->norm_b[2], m->eps, m->slope, acc);
}

/* SincNet of one chunk: pcm [n] -> feat [t[5], chan[2]]. */
static void sincnet(const ez_seg_model *m, ez_pool *pool, const sinc_plan *p, const float *pcm, int n, float *ws,
                    float *feat) {
    const int64_t *t = p->t;
    int F = m->chan[0], k = m->pool;
    float *wav = ws + STATS_FLOATS(m);
    float *blk = wav + n, *fold = blk + (size_t)SINC_BLOCK_ROWS * F;
    float *p0 = fold + (size_t)SINC_BLOCK_ROWS * m->kernel[0];
    double scale, shift;
    int folded = sinc_folded(m);

    wav_norm(m, pcm, n, &scale, &shift);
    for (int i = 0; i < n; i++) wav[i] = (float)(pcm[i] * scale + shift);
    /* Filterbank rows in blocks, pooled as they come: only the pooled
     * output is kept. Rows past pool * t[1] are never used by the pool. */
    for (int64_t r0 = 0; r0 < t[1] * k; r0 += SINC_BLOCK_ROWS) {
        int64_t rows = EZ_MIN((int64_t)SINC_BLOCK_ROWS, t[1] * k - r0);
        filterbank(m, pool, wav + r0 * m->stride, rows, folded, fold, blk);
        max_abs_pool(blk, rows / k, F, k, p0 + r0 / k * F);
    }
    sincnet_rest(m, pool, p, ws, p0, feat);
}

/* SincNet of one chunk (pcm [n]) whose raw filterbank rows bank [t[1] *
 * pool, chan[0]] (of pcm - centre) were computed with its neighbours'
 * (ez_seg_forward_span): the filterbank is linear, so the waveform
 * InstanceNorm becomes a per-filter affine step on them. */
static void sincnet_shared(const ez_seg_model *m, const sinc_plan *p, const float *pcm, int n, double centre,
                           const float *bank, ez_pool *pool, float *ws, float *feat) {
    const int64_t *t = p->t;
    const int F = m->chan[0], k = m->pool;
    float *shift = ws + STATS_FLOATS(m), *p0 = shift + ROUND16(F);
    double scale, offset;
    float a;
    wav_norm(m, pcm, n, &scale, &offset);
    /* filter . (pcm scale + offset) = scale filter . (pcm - centre) + (offset + centre scale) sum(filter) */
    a = (float)scale;
    for (int f = 0; f < F; f++) shift[f] = (float)((offset + centre * scale) * m->sinc_sum[f]);
    for (int64_t r = 0; r < t[1]; r++) {
        const float *b = bank + r * k * F;
        float *o = p0 + r * F;
        for (int j = 0; j < F; j++) o[j] = fabsf(a * b[j] + shift[j]);
        for (int i = 1; i < k; i++)
            for (int j = 0; j < F; j++) {
                float u = fabsf(a * b[i * F + j] + shift[j]);
                o[j] = u > o[j] ? u : o[j];
            }
    }
    sincnet_rest(m, pool, p, ws, p0, feat);
}

/* Where the chunks come from: n_chunks x n samples back to back (offset
 * NULL), or windows of one stretch of audio at offset[c] whose filterbank
 * rows (of audio - centre) are already in bank. */
typedef struct {
    const float *pcm;
    const int64_t *offset;
    const float *bank;
    double centre;
    int stride;
} chunk_source;

typedef struct {
    const ez_seg_model *m;
    ez_pool *pool;
    const sinc_plan *plan;
    const chunk_source *src;
    int64_t c0;           /* first chunk of the group */
    int n;
    float *ws;            /* per thread: plan->floats */
    float *feat;          /* [chunks, frames, chan[2]] */
} sinc_job;

static void sinc_chunks(void *ctx, int64_t c0, int64_t c1, int thread_index) {
    const sinc_job *job = (const sinc_job *)ctx;
    const chunk_source *src = job->src;
    int64_t frames = job->plan->t[5], C = job->m->chan[N_CONV - 1];
    float *ws = job->ws + (size_t)thread_index * job->plan->floats;
    for (int64_t i = c0; i < c1; i++) {
        int64_t c = job->c0 + i;
        float *feat = job->feat + i * frames * C;
        if (src->offset)
            sincnet_shared(job->m, job->plan, src->pcm + src->offset[c], job->n, src->centre,
                           src->bank + src->offset[c] / src->stride * job->m->chan[0], job->pool, ws, feat);
        else
            sincnet(job->m, job->pool, job->plan, src->pcm + c * job->n, job->n, ws, feat);
    }
}

/* ---- forward: the rest -------------------------------------------------------------- */

static void linear(ez_pool *pool, const float *x, int64_t rows, int n_in, const float *w, const float *b, int n_out,
                   float *y) {
    for (int64_t r = 0; r < rows; r++) memcpy(y + r * n_out, b, (size_t)n_out * sizeof(float));
    ez_gemm_f32(pool, rows, n_out, n_in, x, n_in, w, n_in, 1, y, n_out, 1);
}

static void log_softmax_rows(float *x, int64_t rows, int n) {
    for (int64_t r = 0; r < rows; r++) {
        float *v = x + r * n, mx = v[0];
        double sum = 0.0;
        float lse;
        for (int i = 1; i < n; i++) mx = v[i] > mx ? v[i] : mx;
        for (int i = 0; i < n; i++) sum += exp((double)(v[i] - mx));
        lse = mx + (float)log(sum);
        for (int i = 0; i < n; i++) v[i] -= lse;
    }
}

/* The model on validated chunks. */
static int32_t forward(ez_seg_model *m, ez_pool *pool, const chunk_source *src, int n_chunks, int n_samples,
                       float *out) {
    sinc_plan plan;
    int threads = pool ? ez_pool_threads(pool) : 1;
    int64_t frames = ez_seg_frames(m, n_samples), G, C = m->chan[N_CONV - 1], H2 = 2 * (int64_t)m->H;
    float *ws = NULL, *feat = NULL, *xp = NULL, *ya = NULL, *yb = NULL;
    int32_t rc = ELIZA_OK;

    plan_sinc(m, n_samples, &plan);
    G = EZ_MAX((int64_t)1, EZ_MIN((int64_t)n_chunks, (int64_t)GROUP_FLOATS / (frames * 4 * H2)));

    {
        size_t n_ws = (size_t)threads * plan.floats, n_feat = ROUND16((size_t)(G * frames * C));
        size_t n_xp = ROUND16((size_t)(G * frames * 4 * H2));
        size_t n_y = ROUND16((size_t)(G * frames * EZ_MAX(H2, (int64_t)EZ_MAX(m->n_lin0, m->n_lin1))));
        ws = ez_nn_arena_get(&m->work, n_ws + n_feat + n_xp + 2 * n_y, "segmentation");
        if (!ws) return ELIZA_E_NOMEM;
        feat = ws + n_ws;
        xp = feat + n_feat;
        ya = xp + n_xp;
        yb = ya + n_y;
    }
    for (int64_t c0 = 0; c0 < n_chunks && rc == ELIZA_OK; c0 += G) {
        int64_t g = EZ_MIN(G, (int64_t)n_chunks - c0), rows = g * frames;
        sinc_job sj = {m, pool, &plan, src, c0, n_samples, ws, feat};
        float *x = feat, *y = ya;
        /* Several chunks: one per thread, each running its GEMMs inline.
         * One chunk: the GEMMs themselves are split over the threads. */
        if (g > 1 && threads > 1)
            ez_pool_for(pool, g, 1, sinc_chunks, &sj);
        else
            sinc_chunks(&sj, 0, g, 0);
        for (int l = 0; l < m->n_layers && rc == ELIZA_OK; l++) {
            ez_nn_lstm_project(&m->lstm[l], pool, x, rows, xp);
            rc = ez_nn_lstm_recur(&m->lstm[l], pool, xp, (int)g, (int)frames, frames * 4 * H2, 4 * H2, y, frames * H2, H2);
            x = y;
            y = y == ya ? yb : ya;
        }
        if (rc) break;
        linear(pool, x, rows, (int)H2, m->lin0_w, m->lin0_b, m->n_lin0, y);
        leaky_relu(y, rows * m->n_lin0, m->slope);
        linear(pool, y, rows, m->n_lin0, m->lin1_w, m->lin1_b, m->n_lin1, x);
        leaky_relu(x, rows * m->n_lin1, m->slope);
        linear(pool, x, rows, m->n_lin1, m->cls_w, m->cls_b, m->n_classes, out + c0 * frames * m->n_classes);
        log_softmax_rows(out + c0 * frames * m->n_classes, rows, m->n_classes);
    }
    return rc;
}

/* Chunks shorter than the receptive field have no frames. */
static int32_t check_chunk(const ez_seg_model *m, int n_chunks, int n_samples) {
    if (n_chunks < 1) return ez_fail(ELIZA_E_INVALID_ARG, "segmentation: %d chunks", n_chunks);
    if (ez_seg_frames(m, n_samples) < 1)
        return ez_fail(ELIZA_E_INVALID_ARG, "segmentation: a chunk of %d samples is shorter than the receptive field (%d)",
                       n_samples, m->receptive_field);
    return ELIZA_OK;
}

int32_t ez_seg_forward(ez_seg_model *m, ez_pool *pool, const float *pcm, int n_chunks, int n_samples, float *out) {
    chunk_source src;
    int32_t rc = check_chunk(m, n_chunks, n_samples);
    if (rc) return rc;
    for (int64_t i = 0; i < (int64_t)n_chunks * n_samples; i++)
        if (!isfinite(pcm[i]))
            return ez_fail(ELIZA_E_INVALID_ARG, "segmentation: sample %" PRId64 " of chunk %" PRId64 " is not finite",
                           i % n_samples, i / n_samples);
    memset(&src, 0, sizeof src);
    src.pcm = pcm;
    return forward(m, pool, &src, n_chunks, n_samples, out);
}

int ez_seg_offset_quantum(const ez_seg_model *m) { return m->stride; }

typedef struct {
    const ez_seg_model *m;
    ez_pool *pool;
    const float *x;       /* the centred audio */
    int64_t rows;
    float *fold;          /* per thread: [SINC_BLOCK_ROWS, kernel[0]] */
    float *bank;
    int folded;
} bank_job;

static void bank_blocks(void *ctx, int64_t b0, int64_t b1, int thread_index) {
    const bank_job *j = (const bank_job *)ctx;
    for (int64_t b = b0; b < b1; b++) {
        int64_t r0 = b * SINC_BLOCK_ROWS, rows = EZ_MIN((int64_t)SINC_BLOCK_ROWS, j->rows - r0);
        filterbank(j->m, j->pool, j->x + r0 * j->m->stride, rows, j->folded,
                   j->fold + (size_t)thread_index * SINC_BLOCK_ROWS * (size_t)j->m->kernel[0],
                   j->bank + r0 * j->m->chan[0]);
    }
}

int32_t ez_seg_forward_span(ez_seg_model *m, ez_pool *pool, const float *span, int64_t span_len,
                            const int64_t *offset, int n_chunks, int n_samples, float *out) {
    chunk_source src;
    bank_job bj;
    int threads = pool ? ez_pool_threads(pool) : 1;
    int64_t end = 0, n_blocks;
    double centre = 0.0;
    float *x;
    int32_t rc = check_chunk(m, n_chunks, n_samples);
    if (rc) return rc;
    for (int c = 0; c < n_chunks; c++) {
        if (offset[c] < 0 || offset[c] % m->stride || offset[c] > span_len - n_samples)
            return ez_fail(ELIZA_E_INVALID_ARG,
                           "segmentation: chunk %d at sample %" PRId64 " of %" PRId64 " (n %d, quantum %d)", c,
                           offset[c], span_len, n_samples, m->stride);
        end = EZ_MAX(end, offset[c] + n_samples);
    }
    for (int64_t i = 0; i < end; i++) {
        if (!isfinite(span[i]))
            return ez_fail(ELIZA_E_INVALID_ARG, "segmentation: sample %" PRId64 " is not finite", i);
        centre += span[i];
    }
    centre /= (double)end;
    /* Filterbank rows of everything the chunks cover, once. */
    memset(&bj, 0, sizeof bj);
    bj.m = m;
    bj.pool = pool;
    bj.rows = (end - m->kernel[0]) / m->stride + 1;
    bj.folded = sinc_folded(m);
    n_blocks = (bj.rows + SINC_BLOCK_ROWS - 1) / SINC_BLOCK_ROWS;
    x = ez_nn_arena_get(&m->span_work,
                        ROUND16((size_t)end) + (size_t)threads * SINC_BLOCK_ROWS * (size_t)m->kernel[0] +
                            (size_t)bj.rows * (size_t)m->chan[0],
                        "segmentation filterbank");
    if (!x) return ELIZA_E_NOMEM;
    for (int64_t i = 0; i < end; i++) x[i] = (float)(span[i] - centre);
    bj.x = x;
    bj.fold = x + ROUND16((size_t)end);
    bj.bank = bj.fold + (size_t)threads * SINC_BLOCK_ROWS * (size_t)m->kernel[0];
    ez_pool_for(pool, n_blocks, 1, bank_blocks, &bj);

    memset(&src, 0, sizeof src);
    src.pcm = span;
    src.offset = offset;
    src.bank = bj.bank;
    src.centre = centre;
    src.stride = m->stride;
    return forward(m, pool, &src, n_chunks, n_samples, out);
}
