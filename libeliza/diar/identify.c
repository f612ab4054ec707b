/* Speaker identification (see identify.h). */
#include "diar/identify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "diar/resample.h"

/* The reference audio at the models' rate (malloc'ed into *out, *n_out
 * samples). */
static int32_t to_model_rate(const ez_diar_models *m, const float *pcm, size_t n, int sample_rate, float **out,
                             size_t *n_out) {
    ez_resampler *rs = NULL;
    uint64_t n16 = n;
    float *x;
    int32_t rc;
    *out = NULL;
    if (sample_rate != m->sample_rate) {
        if ((rc = ez_resampler_create(sample_rate, m->sample_rate, 0, &rs))) return rc;
        n16 = ez_resampler_out_len(rs, n);
    }
    x = (float *)malloc(sizeof(float) * (size_t)EZ_MAX(n16, (uint64_t)1));
    if (!x) {
        ez_resampler_free(rs);
        return ez_fail(ELIZA_E_NOMEM, "out of memory for %llu samples of reference audio", (unsigned long long)n16);
    }
    if (rs)
        ez_resampler_run(rs, pcm, n, 0, (size_t)n16, x);
    else if (n)
        memcpy(x, pcm, sizeof(float) * n);
    ez_resampler_free(rs);
    *out = x;
    *n_out = (size_t)n16;
    return ELIZA_OK;
}

int32_t ez_diar_voice_embedding(const ez_diar_models *m, const float *pcm, size_t n, int sample_rate, float *out,
                                double *speech) {
    const int W = m->chunk_samples, F = m->n_frames, C = m->n_classes, L = m->n_local;
    const double fss = m->frame_step * m->sample_rate;
    const double offset = 0.5 * (m->frame_duration * m->sample_rate - fss);
    float *x = NULL, *win = NULL, *lp = NULL, *voiced = NULL;
    uint8_t *cls = NULL, *soft = NULL, *mask = NULL, n_active[256];
    size_t n16 = 0, n_voiced = 0;
    int32_t rc;

    *speech = 0.0;
    if ((double)n > EZ_DIAR_ENROLL_MAX_SECONDS * sample_rate)
        return ez_fail(ELIZA_E_INVALID_ARG, "reference audio of %.1f s is longer than %.0f s",
                       (double)n / sample_rate, EZ_DIAR_ENROLL_MAX_SECONDS);
    if (C > 256) return ez_fail(ELIZA_E_INTERNAL, "a segmentation model with %d classes", C);
    for (int c = 0; c < C; c++) {
        n_active[c] = 0;
        for (int s = 0; s < L; s++) n_active[c] += m->powerset[c * L + s] != 0;
    }
    if ((rc = to_model_rate(m, pcm, n, sample_rate, &x, &n16))) return rc;
    win = (float *)malloc(sizeof(float) * (size_t)W);
    lp = (float *)malloc(sizeof(float) * (size_t)F * (size_t)C);
    voiced = (float *)malloc(sizeof(float) * (n16 + (size_t)W));
    cls = (uint8_t *)malloc((size_t)F);
    soft = (uint8_t *)malloc((size_t)F * (size_t)L);
    mask = (uint8_t *)malloc((size_t)F);
    if (!win || !lp || !voiced || !cls || !soft || !mask) {
        rc = ez_fail(ELIZA_E_NOMEM, "out of memory for %zu samples of reference audio", n16);
        goto done;
    }
    for (size_t at = 0; at < n16; at += (size_t)W) {
        size_t avail = EZ_MIN((size_t)W, n16 - at);
        int best = 0, best_n = -1;
        /* A short last window is filled with repeats of its audio, not zeros:
         * the model, trained on 10 s chunks, finds little speech in a short
         * clip followed by silence. Only the first copy is gathered. */
        for (size_t i = 0; i < (size_t)W; i += avail) memcpy(win + i, x + at, sizeof(float) * EZ_MIN(avail, (size_t)W - i));
        if ((rc = m->segment(m->ctx, win, 1, lp))) goto done;
        ez_diar_decode_powerset(lp, F, C, L, m->powerset, cls, soft);
        for (int s = 0; s < L; s++) {
            int alone = 0;
            for (int f = 0; f < F; f++) alone += n_active[cls[f]] == 1 && m->powerset[cls[f] * L + s];
            if (alone > best_n) {
                best_n = alone;
                best = s;
            }
        }
        for (int f = 0; f < F; f++) mask[f] = n_active[cls[f]] == 1 && m->powerset[cls[f] * L + best];
        n_voiced += ez_diar_gather_frames(win, (int)avail, mask, F, fss, offset, voiced + n_voiced);
    }
    *speech = (double)n_voiced / m->sample_rate;
    if (*speech < EZ_DIAR_ENROLL_MIN_SECONDS) {
        rc = ez_fail(ELIZA_E_INVALID_ARG, "reference audio of %.2f s holds %.2f s of speech, at least %.1f s needed",
                     (double)n / sample_rate, *speech, EZ_DIAR_ENROLL_MIN_SECONDS);
        goto done;
    }
    rc = m->embed(m->ctx, voiced, n_voiced, out);
done:
    free(x);
    free(win);
    free(lp);
    free(voiced);
    free(cls);
    free(soft);
    free(mask);
    return rc;
}

static double cosine_distance(const float *a, const float *b, int dim) {
    double s = 0.0;
    for (int i = 0; i < dim; i++) s += (double)a[i] * b[i];
    return 1.0 - s;
}

int32_t ez_diar_identify(const float *centroids, int n_speakers, const float *voices, int n_voices, int dim,
                         float threshold, int32_t *voice, float *distance) {
    double *d = (double *)malloc(sizeof(double) * (size_t)EZ_MAX(n_speakers * n_voices, 1));
    uint8_t *taken = (uint8_t *)calloc((size_t)EZ_MAX(n_voices, 1), 1);
    if (!d || !taken) {
        free(d);
        free(taken);
        return ez_fail(ELIZA_E_NOMEM, "out of memory matching %d speakers to %d voices", n_speakers, n_voices);
    }
    for (int s = 0; s < n_speakers; s++) {
        voice[s] = -1;
        distance[s] = NAN;
        for (int v = 0; v < n_voices; v++) {
            d[s * n_voices + v] = cosine_distance(centroids + (size_t)s * dim, voices + (size_t)v * dim, dim);
            if (v == 0 || d[s * n_voices + v] < distance[s]) distance[s] = (float)d[s * n_voices + v];
        }
    }
    for (;;) {
        int bs = -1, bv = -1;
        for (int s = 0; s < n_speakers; s++) {
            if (voice[s] >= 0) continue;
            for (int v = 0; v < n_voices; v++)
                if (!taken[v] && d[s * n_voices + v] <= threshold &&
                    (bs < 0 || d[s * n_voices + v] < d[bs * n_voices + bv])) {
                    bs = s;
                    bv = v;
                }
        }
        if (bs < 0) break;
        voice[bs] = bv;
        distance[bs] = (float)d[bs * n_voices + bv];
        taken[bv] = 1;
    }
    free(d);
    free(taken);
    return ELIZA_OK;
}

/* ---- the enrolled voices ---------------------------------------------------------- */

void ez_diar_voices_free(ez_diar_voices *v) {
    free(v->name);
    free(v->emb);
    memset(v, 0, sizeof *v);
}

int ez_diar_voices_find(const ez_diar_voices *v, const char *name) {
    for (int i = 0; i < v->n; i++)
        if (strcmp(v->name[i], name) == 0) return i;
    return -1;
}

int32_t ez_diar_voices_enroll(ez_diar_voices *v, const ez_diar_models *m, const char *name, const float *pcm,
                              size_t n, int sample_rate) {
    double speech = 0.0;
    int32_t rc;
    if (ez_diar_voices_find(v, name) >= 0)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_enroll: '%s' is already enrolled", name);
    if (v->n >= EZ_DIAR_MAX_VOICES)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_enroll: %d voices are enrolled already, the most", v->n);
    {
        float *emb = (float *)realloc(v->emb, sizeof(float) * (size_t)(v->n + 1) * (size_t)m->emb_dim);
        ez_diar_voice_name *names;
        if (emb) v->emb = emb;
        names = (ez_diar_voice_name *)realloc(v->name, sizeof *names * (size_t)(v->n + 1));
        if (names) v->name = names;
        if (!emb || !names) return ez_fail(ELIZA_E_NOMEM, "out of memory enrolling '%s'", name);
    }
    v->dim = m->emb_dim;
    rc = ez_diar_voice_embedding(m, pcm, n, sample_rate, v->emb + (size_t)v->n * (size_t)v->dim, &speech);
    if (rc == ELIZA_E_INVALID_ARG) {
        char why[256];
        snprintf(why, sizeof why, "%s", ez_error_message());
        return ez_fail(rc, "eliza_diarizer_enroll '%s': %s", name, why);
    }
    if (rc) return rc;
    snprintf(v->name[v->n], sizeof v->name[v->n], "%s", name);
    v->n++;
    return ELIZA_OK;
}

int32_t ez_diar_voices_remove(ez_diar_voices *v, const char *name) {
    int i;
    if (!name) {
        v->n = 0;
        return ELIZA_OK;
    }
    if ((i = ez_diar_voices_find(v, name)) < 0)
        return ez_fail(ELIZA_E_NOT_FOUND, "eliza_diarizer_unenroll: no voice is enrolled as '%s'", name);
    memmove(v->name[i], v->name[i + 1], sizeof *v->name * (size_t)(v->n - i - 1));
    memmove(v->emb + (size_t)i * v->dim, v->emb + (size_t)(i + 1) * v->dim,
            sizeof(float) * (size_t)v->dim * (size_t)(v->n - i - 1));
    v->n--;
    return ELIZA_OK;
}

int32_t ez_diar_voices_list(const ez_diar_voices *v, char **out) {
    size_t len = 0;
    char *buf;
    for (int i = 0; i < v->n; i++) len += strlen(v->name[i]) + 1;
    if (!(buf = (char *)malloc(len + 1)))
        return ez_fail(ELIZA_E_NOMEM, "eliza_diarizer_enrolled: no memory for %zu bytes", len + 1);
    len = 0;
    for (int i = 0; i < v->n; i++) {
        const size_t l = strlen(v->name[i]);
        memcpy(buf + len, v->name[i], l);
        buf[len + l] = '\n';
        len += l + 1;
    }
    buf[len] = '\0';
    *out = buf;
    return ELIZA_OK;
}

int32_t ez_diar_voices_name(const ez_diar_voices *v, const ez_diar_speakers *sp, float threshold,
                            ez_diar_voice_name **names, float **distance) {
    const size_t k = (size_t)EZ_MAX(sp->n_speakers, 1);
    int32_t *voice = (int32_t *)malloc(sizeof(int32_t) * k), rc;
    *names = (ez_diar_voice_name *)malloc(sizeof **names * k);
    *distance = (float *)malloc(sizeof(float) * k);
    if (!voice || !*names || !*distance)
        rc = ez_fail(ELIZA_E_NOMEM, "out of memory naming %d speakers", sp->n_speakers);
    else
        rc = ez_diar_identify(sp->centroids, sp->n_speakers, v->emb, v->n, sp->dim, threshold, voice, *distance);
    for (int s = 0; rc == ELIZA_OK && s < sp->n_speakers; s++)
        snprintf((*names)[s], sizeof (*names)[s], "%s", voice[s] >= 0 ? v->name[voice[s]] : "");
    free(voice);
    if (rc) {
        free(*names);
        free(*distance);
        *names = NULL;
        *distance = NULL;
    }
    return rc;
}
