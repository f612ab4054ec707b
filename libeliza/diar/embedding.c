/* GE2E speaker embedding as resemblyzer's VoiceEncoder.embed_utterance
 * computes it (docs/diarization.md):
 *
 *   partial slices of 160 mel frames every round(sr / rate / hop) frames,
 *   the last one kept when it covers min_coverage of a partial;
 *   audio zero-padded to the end of the last slice;
 *   mel power spectrogram (librosa: centred frames, zero padding, periodic
 *   Hann window, |rfft|^2, Slaney mel filterbank stored in the file);
 *   per partial: 3-layer LSTM, last hidden state -> Linear -> ReLU -> L2;
 *   mean of the partial embeddings, L2-normalised.
 *
 * The DFT is a GEMM against a [2 * bins, n_fft] cos / sin matrix with the
 * window folded in, whose A rows are the overlapping frames of the padded
 * audio (row j starts at j * hop: no framing copy). Partials share their
 * first-layer input projection: it depends on the frame only, so it is
 * computed once per frame and the recurrence indexes it per partial. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/gemm.h"
#include "core/gguf.h"
#include "diar/embedding.h"
#include "diar/nn.h"

#define ARCH "resemblyzer"
#define MAX_LSTM_LAYERS 8
/* Partials run through the LSTM together, at most this many at once (their
 * activations are [group, frames, 4H]). */
#define PARTIAL_GROUP 16
#define ROUND16(n) (((n) + 15) / 16 * 16)

struct ez_emb_model {
    ez_gguf *gguf;                    /* the file, mapped: the LSTMs read their weights there */
    int sample_rate, n_fft, hop, n_mels, n_bins;
    int partial_frames, frame_step;  /* frames per partial, frames between partials */
    float min_coverage;
    int n_layers, H, n_embd;
    float *dft;                      /* [2 * n_bins, n_fft]: w[n] cos(2 pi k n / N), then w[n] sin(...) */
    const float *mel;                /* [n_mels, n_bins], in place */
    ez_nn_lstm lstm[MAX_LSTM_LAYERS];
    const float *lin_w, *lin_b;      /* [n_embd, H], [n_embd], in place */
    ez_nn_owned owned;               /* copies where the file is aligned to less than a float */
    ez_nn_arena work;                /* activations, kept between calls */
};

void ez_emb_free(ez_emb_model *m) {
    if (!m) return;
    free(m->dft);
    for (int l = 0; l < MAX_LSTM_LAYERS; l++) ez_nn_lstm_free(&m->lstm[l]);
    ez_nn_owned_free(&m->owned);
    ez_nn_arena_free(&m->work);
    ez_gguf_close(m->gguf);
    free(m);
}

/* The metadata: sizes, the front end this build runs, the partials'
 * geometry; the LSTMs' gate order into order[16]. */
static int32_t load_hparams(ez_emb_model *m, const ez_gguf *g, char *order) {
    uint32_t sr, n_fft, hop, n_mels, pf, n_layers, H, n_embd;
    float power, rate;
    int center, bidir;
    char pad[16];
    int32_t rc;

    if ((rc = ez_nn_check_arch(g, ARCH, "not a resemblyzer speaker-embedding model")) ||
        (rc = ez_gguf_need_u32(g, ARCH ".sample_rate", 1000, 192000, &sr)) ||
        (rc = ez_gguf_need_u32(g, ARCH ".mel.n_fft", 2, 1u << 14, &n_fft)) ||
        (rc = ez_gguf_need_u32(g, ARCH ".mel.hop_length", 1, n_fft, &hop)) ||
        (rc = ez_gguf_need_u32(g, ARCH ".mel.n_mels", 1, 1024, &n_mels)) ||
        (rc = ez_gguf_need_f32(g, ARCH ".mel.power", 0.0f, 8.0f, &power)) ||
        (rc = ez_gguf_need_bool(g, ARCH ".mel.center", &center)) ||
        (rc = ez_nn_key_str(g, ARCH ".mel.pad_mode", pad, sizeof pad)) ||
        (rc = ez_gguf_need_u32(g, ARCH ".partial.frames", 1, 100000, &pf)) ||
        (rc = ez_gguf_need_f32(g, ARCH ".partial.rate", 1e-3f, 1000.0f, &rate)) ||
        (rc = ez_gguf_need_f32(g, ARCH ".partial.min_coverage", 1e-6f, 1.0f, &m->min_coverage)) ||
        (rc = ez_gguf_need_u32(g, ARCH ".lstm.layer_count", 1, MAX_LSTM_LAYERS, &n_layers)) ||
        (rc = ez_gguf_need_u32(g, ARCH ".lstm.hidden_size", 1, 4096, &H)) ||
        (rc = ez_gguf_need_bool(g, ARCH ".lstm.bidirectional", &bidir)) ||
        (rc = ez_nn_key_str(g, ARCH ".lstm.gate_order", order, 16)) ||
        (rc = ez_gguf_need_u32(g, ARCH ".embedding_length", 1, 65536, &n_embd)))
        return rc;
    if (power != 2.0f || !center || strcmp(pad, "constant") != 0 || bidir)
        return ez_fail(ELIZA_E_UNSUPPORTED,
                       "embedding front end: power %g, center %d, pad_mode '%s', bidirectional %d (this build runs "
                       "power 2, centred frames, constant padding, one direction)",
                       (double)power, center, pad, bidir);
    m->sample_rate = (int)sr;
    m->n_fft = (int)n_fft;
    m->hop = (int)hop;
    m->n_mels = (int)n_mels;
    m->n_bins = (int)n_fft / 2 + 1;
    m->partial_frames = (int)pf;
    m->n_layers = (int)n_layers;
    m->H = (int)H;
    m->n_embd = (int)n_embd;
    /* resemblyzer: frame_step = int(np.round((sampling_rate / rate) / samples_per_frame)),
     * rounding half to even as nearbyint does. */
    {
        double fs = nearbyint((double)sr / (double)rate / (double)hop);
        if (!(fs >= 1.0 && fs <= (double)pf))
            return ez_fail(ELIZA_E_FORMAT, ARCH ".partial.rate %g gives a partial step of %g frames, outside [1, %u]",
                           (double)rate, fs, pf);
        m->frame_step = (int)fs;
    }
    return ELIZA_OK;
}

/* The mel front end: the windowed DFT matrix and the mel filters. */
static int32_t load_front_end(ez_emb_model *m, const ez_gguf *g) {
    float *window = NULL;
    int32_t rc;
    {
        int64_t dw[1] = {m->n_fft}, dm[2] = {m->n_mels, m->n_bins};
        if ((rc = ez_nn_tensor(g, "mel.window", 1, dw, &window))) return rc;
        if ((rc = ez_nn_weight(g, "mel.filters", 2, dm, &m->mel, &m->owned))) {
            free(window);
            return rc;
        }
    }
    m->dft = (float *)malloc((size_t)2 * (size_t)m->n_bins * (size_t)m->n_fft * sizeof(float));
    if (!m->dft) {
        free(window);
        return ez_fail(ELIZA_E_NOMEM, "no memory for the DFT matrix");
    }
    for (int k = 0; k < m->n_bins; k++)
        for (int n = 0; n < m->n_fft; n++) {
            /* k n mod N keeps the angle small, so cos / sin stay exact to double. */
            double a = 2.0 * 3.14159265358979323846 * (double)(((int64_t)k * n) % m->n_fft) / m->n_fft;
            m->dft[(int64_t)k * m->n_fft + n] = (float)(window[n] * cos(a));
            m->dft[(int64_t)(m->n_bins + k) * m->n_fft + n] = (float)(window[n] * sin(a));
        }
    free(window);
    return ELIZA_OK;
}

/* The LSTM stack and the projection to the embedding. */
static int32_t load_layers(ez_emb_model *m, const ez_gguf *g, const char *order) {
    int32_t rc;
    for (int l = 0; l < m->n_layers; l++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "lstm.%d", l);
        if ((rc = ez_nn_lstm_load(g, prefix, order, 1, l == 0 ? m->n_mels : m->H, m->H, &m->lstm[l]))) return rc;
    }
    {
        char name[32];
        int64_t dw[2] = {m->n_embd, m->H}, db[1] = {m->n_embd};
        snprintf(name, sizeof name, "lstm.%d.weight_ih", m->n_layers);
        if (ez_gguf_find_tensor(g, name))
            return ez_fail(ELIZA_E_FORMAT, "tensor '%s' exists but " ARCH ".lstm.layer_count is %d", name, m->n_layers);
        if ((rc = ez_nn_weight(g, "linear.weight", 2, dw, &m->lin_w, &m->owned)) ||
            (rc = ez_nn_weight(g, "linear.bias", 1, db, &m->lin_b, &m->owned)))
            return rc;
    }
    return ELIZA_OK;
}

static int32_t load(ez_emb_model *m, const ez_gguf *g) {
    char order[16];
    int32_t rc;
    if ((rc = load_hparams(m, g, order)) || (rc = load_front_end(m, g))) return rc;
    return load_layers(m, g, order);
}

int32_t ez_emb_load(const char *path, ez_emb_model **out) {
    ez_gguf *g = NULL;
    ez_emb_model *m;
    int32_t rc;
    *out = NULL;
    if ((rc = ez_gguf_open(path, &g))) return rc;
    m = (ez_emb_model *)calloc(1, sizeof *m);
    if (!m) {
        ez_gguf_close(g);
        return ez_fail(ELIZA_E_NOMEM, "no memory for the embedding model");
    }
    m->gguf = g;
    rc = load(m, g);
    if (rc) {
        ez_emb_free(m);
        return rc;
    }
    *out = m;
    return ELIZA_OK;
}

int ez_emb_dim(const ez_emb_model *m) { return m->n_embd; }
int ez_emb_sample_rate(const ez_emb_model *m) { return m->sample_rate; }

/* ---- forward ------------------------------------------------------------------- */

/* resemblyzer's compute_partial_slices: the number of partials of n
 * samples (partial p starts at frame p * frame_step). */
static int64_t partial_count(const ez_emb_model *m, size_t n) {
    int64_t n_frames = (int64_t)(((uint64_t)n + 1 + (uint64_t)m->hop - 1) / (uint64_t)m->hop);
    int64_t steps = EZ_MAX((int64_t)1, n_frames - m->partial_frames + m->frame_step + 1);
    int64_t count = (steps + m->frame_step - 1) / m->frame_step;
    int64_t last_start = (count - 1) * m->frame_step * m->hop;
    double coverage = ((double)n - (double)last_start) / ((double)m->partial_frames * m->hop);
    if (coverage < m->min_coverage && count > 1) count--;
    return count;
}

/* Mel power frames [n_frames, n_mels] of frames f0 .. f0 + n_frames - 1 of
 * the audio (n samples, zero-padded on both sides: frame j is centred on
 * sample j * hop). ws: padded audio, then the spectrum. */
static void mel_frames(const ez_emb_model *m, ez_pool *pool, const float *pcm, size_t n, int64_t f0,
                       int64_t n_frames, float *ws, float *mel) {
    int64_t span = (n_frames - 1) * m->hop + m->n_fft, start = f0 * m->hop - m->n_fft / 2;
    int64_t B2 = 2 * (int64_t)m->n_bins;
    float *x = ws, *spec = ws + span;
    for (int64_t i = 0; i < span; i++) {
        int64_t s = start + i;
        x[i] = s >= 0 && s < (int64_t)n ? pcm[s] : 0.0f;
    }
    ez_gemm_f32(pool, n_frames, B2, m->n_fft, x, m->hop, m->dft, m->n_fft, 1, spec, B2, 0);
    for (int64_t j = 0; j < n_frames; j++) {
        float *r = spec + j * B2;
        for (int k = 0; k < m->n_bins; k++) r[k] = r[k] * r[k] + r[m->n_bins + k] * r[m->n_bins + k];
    }
    ez_gemm_f32(pool, n_frames, m->n_mels, m->n_bins, spec, B2, m->mel, m->n_bins, 1, mel, m->n_mels, 0);
}

/* Working memory of a group of up to PARTIAL_GROUP partials. */
typedef struct {
    float *ws, *mel, *xp, *ya, *yb, *e;
} emb_buffers;

static int32_t buffers(ez_emb_model *m, emb_buffers *b) {
    int64_t P = m->partial_frames, G4 = 4 * (int64_t)m->H;
    /* Frames of one group: overlapping partials of one clip, or whole clips side by side. */
    int64_t shared = (PARTIAL_GROUP - 1) * (int64_t)m->frame_step + P, frames = EZ_MAX(shared, PARTIAL_GROUP * P);
    size_t n_ws = ROUND16((size_t)((shared - 1) * m->hop + m->n_fft + shared * 2 * m->n_bins));
    size_t n_mel = ROUND16((size_t)(frames * m->n_mels)), n_xp = ROUND16((size_t)(frames * G4));
    size_t n_y = ROUND16((size_t)(PARTIAL_GROUP * P * m->H)), n_e = ROUND16((size_t)m->n_embd);
    b->ws = ez_nn_arena_get(&m->work, n_ws + n_mel + n_xp + 2 * n_y + n_e, "speaker embedding");
    if (!b->ws) return ELIZA_E_NOMEM;
    b->mel = b->ws + n_ws;
    b->xp = b->mel + n_mel;
    b->ya = b->xp + n_xp;
    b->yb = b->ya + n_y;
    b->e = b->yb + n_y;
    return ELIZA_OK;
}

/* The LSTM, linear and ReLU of np partials whose mel frames are rows of
 * b->mel: partial j starts at row j * stride (stride = frame_step when they
 * overlap within one clip, partial_frames when they are separate clips);
 * rows frames of b->mel are filled. sum[j * n_embd ..] += the partial's
 * L2-normalised embedding (an all-zero one, every unit cut by the ReLU,
 * adds nothing; torch would divide 0 by 0 there). */
static int32_t run_partials(ez_emb_model *m, ez_pool *pool, const emb_buffers *b, int64_t np, int64_t stride,
                            int64_t rows, double *sum, int64_t sum_stride) {
    int64_t P = m->partial_frames, G4 = 4 * (int64_t)m->H, H = m->H;
    float *x = b->ya, *y;
    int32_t rc;
    ez_nn_lstm_project(&m->lstm[0], pool, b->mel, rows, b->xp);
    rc = ez_nn_lstm_recur(&m->lstm[0], pool, b->xp, (int)np, (int)P, stride * G4, G4, x, P * H, H);
    for (int l = 1; l < m->n_layers && rc == ELIZA_OK; l++) {
        y = x == b->ya ? b->yb : b->ya;
        ez_nn_lstm_project(&m->lstm[l], pool, x, np * P, b->xp);
        rc = ez_nn_lstm_recur(&m->lstm[l], pool, b->xp, (int)np, (int)P, P * G4, G4, y, P * H, H);
        x = y;
    }
    for (int64_t j = 0; j < np && rc == ELIZA_OK; j++) {
        const float *h = x + (j * P + P - 1) * H;
        double ss = 0.0, *acc = sum + j * sum_stride;
        for (int i = 0; i < m->n_embd; i++) {
            const float *w = m->lin_w + (int64_t)i * H;
            float s = m->lin_b[i];
            for (int64_t k = 0; k < H; k++) s += w[k] * h[k];
            b->e[i] = s > 0.0f ? s : 0.0f;
            ss += (double)b->e[i] * b->e[i];
        }
        if (ss > 0.0)
            for (int i = 0; i < m->n_embd; i++) acc[i] += b->e[i] / sqrt(ss);
    }
    return rc;
}

/* out = sum / |sum| (zero when sum is). */
static void normalise(const double *sum, int n, float *out) {
    double norm = 0.0;
    for (int i = 0; i < n; i++) norm += sum[i] * sum[i];
    norm = sqrt(norm);
    for (int i = 0; i < n; i++) out[i] = norm > 0.0 ? (float)(sum[i] / norm) : 0.0f;
}

static int32_t check_audio(const ez_emb_model *m, const float *pcm, size_t n) {
    if (n < (size_t)m->n_fft)
        return ez_fail(ELIZA_E_INVALID_ARG, "speaker embedding: %zu samples is shorter than one analysis window (%d)", n,
                       m->n_fft);
    if ((uint64_t)n > ((uint64_t)1 << 40))
        return ez_fail(ELIZA_E_INVALID_ARG, "speaker embedding: %zu samples is absurdly long", n);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(pcm[i])) return ez_fail(ELIZA_E_INVALID_ARG, "speaker embedding: sample %zu is not finite", i);
    return ELIZA_OK;
}

int32_t ez_emb_embed(ez_emb_model *m, ez_pool *pool, const float *pcm, size_t n, float *out) {
    int64_t n_partials, P = m->partial_frames;
    emb_buffers b;
    double *sum = NULL;
    int32_t rc;

    if ((rc = check_audio(m, pcm, n))) return rc;
    n_partials = partial_count(m, n);
    if ((rc = buffers(m, &b))) return rc;
    sum = (double *)calloc((size_t)m->n_embd, sizeof(double));
    if (!sum) return ez_fail(ELIZA_E_NOMEM, "speaker embedding: no memory");
    for (int64_t p0 = 0; p0 < n_partials && rc == ELIZA_OK; p0 += PARTIAL_GROUP) {
        int64_t np = EZ_MIN((int64_t)PARTIAL_GROUP, n_partials - p0);
        int64_t nf = (np - 1) * m->frame_step + P;
        /* Layer 0 is projected once per frame; partial j starts frame_step frames after j - 1. */
        mel_frames(m, pool, pcm, n, p0 * m->frame_step, nf, b.ws, b.mel);
        rc = run_partials(m, pool, &b, np, m->frame_step, nf, sum, 0);
    }
    if (rc == ELIZA_OK) normalise(sum, m->n_embd, out);
    free(sum);
    return rc;
}

int32_t ez_emb_embed_clips(ez_emb_model *m, ez_pool *pool, const float *const *pcm, int n_clips, size_t n,
                           float *out) {
    int64_t P = m->partial_frames;
    emb_buffers b;
    double *sum;
    int32_t rc = ELIZA_OK;

    if (n_clips < 0) return ez_fail(ELIZA_E_INVALID_ARG, "speaker embedding: %d clips", n_clips);
    for (int i = 0; i < n_clips; i++)
        if ((rc = check_audio(m, pcm[i], n))) return rc;
    if (n_clips == 0) return ELIZA_OK;
    if (partial_count(m, n) > 1) {
        for (int i = 0; i < n_clips && rc == ELIZA_OK; i++) rc = ez_emb_embed(m, pool, pcm[i], n, out + (size_t)i * m->n_embd);
        return rc;
    }
    if ((rc = buffers(m, &b))) return rc;
    sum = (double *)calloc((size_t)PARTIAL_GROUP * (size_t)m->n_embd, sizeof(double));
    if (!sum) return ez_fail(ELIZA_E_NOMEM, "speaker embedding: no memory");
    for (int c0 = 0; c0 < n_clips && rc == ELIZA_OK; c0 += PARTIAL_GROUP) {
        int np = EZ_MIN(PARTIAL_GROUP, n_clips - c0);
        for (int j = 0; j < np; j++) mel_frames(m, pool, pcm[c0 + j], n, 0, P, b.ws, b.mel + (int64_t)j * P * m->n_mels);
        memset(sum, 0, sizeof(double) * (size_t)np * (size_t)m->n_embd);
        rc = run_partials(m, pool, &b, np, P, np * P, sum, m->n_embd);
        for (int j = 0; j < np && rc == ELIZA_OK; j++)
            normalise(sum + (size_t)j * m->n_embd, m->n_embd, out + (size_t)(c0 + j) * m->n_embd);
    }
    free(sum);
    return rc;
}
