/* Live diarization (see stream.h). */
#include "diar/stream.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "diar/cluster.h"

#define KMAX EZ_DIAR_STREAM_MAX_SPEAKERS

typedef struct {
    int32_t speaker;   /* centroid index */
    double start, end; /* seconds */
    double conf_sum;
    int64_t n_frames;
} live_turn;

struct ez_diar_stream {
    const ez_diar_models *m;
    eliza_diarize_options opt;
    int W, F, C, L, dim, kmax;
    int64_t step, latency;  /* samples */
    double fss, offset;     /* frame step and gathering offset, samples */
    uint8_t n_active[256];

    float *audio;           /* samples [audio_base, audio_base + audio_n) */
    size_t audio_n, audio_cap;
    int64_t audio_base, pushed;
    int64_t next_window;    /* window w ends at sample (w + 1) * step */
    int finished;

    float *win, *lp, *gather, *emb;  /* [W], [F, C], [W], [L, dim] */
    uint8_t *cls, *soft, *mask;      /* [F], [F, L], [F] */

    double *sum;            /* [KMAX, dim] running sums of each speaker's embeddings */
    float *cent;            /* [KMAX, dim] their directions */
    int k;

    /* Frames [frame0, frame_hi) not yet decided, in a ring of ring frames. */
    int64_t frame0, frame_hi;
    int ring;
    uint16_t *cover, *count, *hard;  /* [ring], [ring], [ring, KMAX] */
    float *softacc;                  /* [ring, KMAX] */

    int open[KMAX];         /* index in turns of each speaker's open turn, or -1 */
    live_turn *turns;       /* decided, not yet handed out */
    size_t n_turns, cap_turns;
    int32_t public_id[KMAX];
    int n_public;
};

static double frame_time(const ez_diar_stream *s, int64_t t) {
    return (double)t * s->m->frame_step + 0.5 * s->m->frame_duration;
}

void ez_diar_stream_free(ez_diar_stream *s) {
    if (!s) return;
    free(s->audio);
    free(s->win);
    free(s->lp);
    free(s->gather);
    free(s->emb);
    free(s->cls);
    free(s->soft);
    free(s->mask);
    free(s->sum);
    free(s->cent);
    free(s->cover);
    free(s->count);
    free(s->hard);
    free(s->softacc);
    free(s->turns);
    free(s);
}

int32_t ez_diar_stream_create(const ez_diar_models *m, const eliza_diarize_options *opt, double latency,
                              ez_diar_stream **out) {
    ez_diar_stream *s;
    const int W = m->chunk_samples, F = m->n_frames, L = m->n_local, dim = m->emb_dim;
    *out = NULL;
    if (m->n_classes > 256 || L > 255)
        return ez_fail(ELIZA_E_INTERNAL, "a segmentation model with %d classes", m->n_classes);
    s = (ez_diar_stream *)calloc(1, sizeof *s);
    if (!s) return ez_fail(ELIZA_E_NOMEM, "out of memory for a diarization stream");
    s->m = m;
    s->opt = *opt;
    s->W = W;
    s->F = F;
    s->C = m->n_classes;
    s->L = L;
    s->dim = dim;
    s->kmax = opt->num_speakers > 0 ? opt->num_speakers : opt->max_speakers > 0 ? opt->max_speakers : KMAX;
    s->kmax = EZ_MIN(s->kmax, KMAX);
    s->step = EZ_MAX((int64_t)1, (int64_t)llround((double)opt->step * m->sample_rate));
    s->latency = (int64_t)llround(latency * m->sample_rate);
    s->fss = m->frame_step * m->sample_rate;
    s->offset = 0.5 * (m->frame_duration * m->sample_rate - s->fss);
    for (int c = 0; c < s->C; c++) {
        s->n_active[c] = 0;
        for (int j = 0; j < L; j++) s->n_active[c] += m->powerset[c * L + j] != 0;
    }
    s->ring = F + (int)ceil((double)(s->latency + 2 * s->step) / s->fss) + 8;
    s->audio_cap = (size_t)W + (size_t)s->step;
    s->audio = (float *)malloc(sizeof(float) * s->audio_cap);
    s->win = (float *)malloc(sizeof(float) * (size_t)W);
    s->lp = (float *)malloc(sizeof(float) * (size_t)F * (size_t)s->C);
    s->gather = (float *)malloc(sizeof(float) * (size_t)W);
    s->emb = (float *)malloc(sizeof(float) * (size_t)L * (size_t)dim);
    s->cls = (uint8_t *)malloc((size_t)F);
    s->soft = (uint8_t *)malloc((size_t)F * (size_t)L);
    s->mask = (uint8_t *)malloc((size_t)F);
    s->sum = (double *)calloc((size_t)KMAX * (size_t)dim, sizeof(double));
    s->cent = (float *)calloc((size_t)KMAX * (size_t)dim, sizeof(float));
    s->cover = (uint16_t *)calloc((size_t)s->ring, sizeof(uint16_t));
    s->count = (uint16_t *)calloc((size_t)s->ring, sizeof(uint16_t));
    s->hard = (uint16_t *)calloc((size_t)s->ring * KMAX, sizeof(uint16_t));
    s->softacc = (float *)calloc((size_t)s->ring * KMAX, sizeof(float));
    if (!s->audio || !s->win || !s->lp || !s->gather || !s->emb || !s->cls || !s->soft || !s->mask || !s->sum ||
        !s->cent || !s->cover || !s->count || !s->hard || !s->softacc) {
        ez_diar_stream_free(s);
        return ez_fail(ELIZA_E_NOMEM, "out of memory for a diarization stream");
    }
    for (int k = 0; k < KMAX; k++) {
        s->open[k] = -1;
        s->public_id[k] = -1;
    }
    *out = s;
    return ELIZA_OK;
}

/* ---- clustering against the running centroids ------------------------------------- */

static void add_to_centroid(ez_diar_stream *s, int k, const float *e) {
    double *sum = s->sum + (size_t)k * s->dim, norm = 0.0;
    for (int j = 0; j < s->dim; j++) {
        sum[j] += e[j];
        norm += sum[j] * sum[j];
    }
    norm = sqrt(norm);
    for (int j = 0; j < s->dim; j++) s->cent[(size_t)k * s->dim + j] = (float)(norm > 0 ? sum[j] / norm : 0.0);
}

static double distance_to(const ez_diar_stream *s, const float *e, int k) {
    double d = 0.0;
    for (int j = 0; j < s->dim; j++) d += (double)e[j] * s->cent[(size_t)k * s->dim + j];
    return 1.0 - d;
}

/* cluster[j] for the local speakers of the window: -1 (too little speech),
 * a running speaker, or a new one. */
static int32_t assign_window(ez_diar_stream *s, int32_t *cluster) {
    const ez_diar_models *m = s->m;
    const int F = s->F, L = s->L;
    const int min_embed = (int)ceil(EZ_DIAR_EMBED_MIN_SECONDS / m->frame_step);
    const int min_new = (int)ceil(EZ_DIAR_TRAIN_MIN_SECONDS / m->frame_step);
    const int64_t two_partials = 2 * (int64_t)llround(EZ_DIAR_PARTIAL_SECONDS * m->sample_rate);
    int local[3 * 85], n_clean[3 * 85], g = 0, k0 = s->k;
    int32_t labels[3 * 85], group[3 * 85];
    int32_t rc;

    for (int j = 0; j < L; j++) {
        int n_act = 0, clean = 0, use_clean;
        size_t len;
        cluster[j] = -1;
        for (int f = 0; f < F; f++) {
            int a = m->powerset[s->cls[f] * L + j] != 0;
            n_act += a;
            clean += a && s->n_active[s->cls[f]] == 1;
        }
        if (n_act < min_embed) continue;
        use_clean = clean >= min_embed;
        for (int f = 0; f < F; f++)
            s->mask[f] = m->powerset[s->cls[f] * L + j] && (!use_clean || s->n_active[s->cls[f]] == 1);
        len = ez_diar_gather_frames(s->win, s->W, s->mask, F, s->fss, s->offset, s->gather);
        if (len == 0) continue;
        if ((rc = m->embed(m->ctx, s->gather, (size_t)EZ_MIN((int64_t)len, two_partials), s->emb + (size_t)g * s->dim)))
            return rc;
        local[g] = j;
        n_clean[g] = clean;
        group[g] = 0;
        g++;
    }
    if (g == 0) return ELIZA_OK;
    if (k0 > 0 && (rc = ez_cluster_assign(s->emb, g, s->dim, group, s->cent, k0, labels))) return rc;
    for (int i = 0; i < g; i++) {
        const float *e = s->emb + (size_t)i * s->dim;
        int shared = 0, label = k0 > 0 ? labels[i] : -1;
        for (int i2 = 0; i2 < i; i2++) shared |= k0 > 0 && labels[i2] == label;
        /* The first speaker may start from any embedded speech: a recording
         * of one person who rarely talks 2 s on end still has a speaker. */
        if ((label < 0 || shared || distance_to(s, e, label) > s->opt.threshold) &&
            n_clean[i] >= (s->k == 0 ? min_embed : min_new) && s->k < s->kmax) {
            label = s->k++;
        } else if (label < 0) {
            continue; /* no speaker yet, and too little clean speech to start one */
        }
        cluster[local[i]] = label;
        if (n_clean[i] >= min_embed) add_to_centroid(s, label, e);
    }
    return ELIZA_OK;
}

/* ---- frames and turns ------------------------------------------------------------ */

static int push_live_turn(ez_diar_stream *s, live_turn t) {
    if (s->n_turns == s->cap_turns) {
        size_t cap = s->cap_turns ? 2 * s->cap_turns : 32;
        live_turn *v = (live_turn *)realloc(s->turns, cap * sizeof *v);
        if (!v) return 0;
        s->turns = v;
        s->cap_turns = cap;
    }
    s->turns[s->n_turns++] = t;
    return 1;
}

/* Adds the window's activity (its first frame: frame t0) to the undecided frames. */
static int32_t accumulate(ez_diar_stream *s, int64_t t0, const int32_t *cluster) {
    const uint8_t *ps = s->m->powerset;
    const int L = s->L;
    for (int f = 0; f < s->F; f++) {
        int64_t t = t0 + f;
        size_t r;
        float hard[KMAX], soft[KMAX];
        if (t < s->frame0) continue;
        if (t - s->frame0 >= s->ring)
            return ez_fail(ELIZA_E_INTERNAL, "stream frame %lld is past its ring (%lld + %d)", (long long)t,
                           (long long)s->frame0, s->ring);
        r = (size_t)(t % s->ring);
        s->cover[r]++;
        s->count[r] += s->n_active[s->cls[f]];
        for (int k = 0; k < s->k; k++) hard[k] = soft[k] = -1.0f;
        for (int j = 0; j < L; j++) {
            int k = cluster[j];
            if (k < 0) continue;
            hard[k] = EZ_MAX(hard[k], (float)(ps[s->cls[f] * L + j] != 0));
            soft[k] = EZ_MAX(soft[k], s->soft[(size_t)f * L + j] / 255.0f);
        }
        for (int k = 0; k < s->k; k++) {
            if (hard[k] < 0) continue;
            s->hard[r * KMAX + k] += (uint16_t)hard[k];
            s->softacc[r * KMAX + k] += soft[k];
        }
        s->frame_hi = EZ_MAX(s->frame_hi, t + 1);
    }
    return ELIZA_OK;
}

/* Decides frame frame0 (as ez_diar_reconstruct decides a frame) and moves on. */
static int32_t decide_frame(ez_diar_stream *s) {
    const int64_t t = s->frame0;
    const size_t r = (size_t)(t % s->ring);
    const uint16_t *h = s->hard + r * KMAX;
    const float *sf = s->softacc + r * KMAX;
    const double ts = frame_time(s, t);
    int n_speakers = s->cover[r] ? (int)nearbyint((double)s->count[r] / s->cover[r]) : 0;
    uint8_t on[KMAX];
    if (s->opt.num_speakers > 0) n_speakers = EZ_MIN(n_speakers, s->opt.num_speakers);
    if (s->opt.max_speakers > 0) n_speakers = EZ_MIN(n_speakers, s->opt.max_speakers);
    if (s->opt.exclusive) n_speakers = EZ_MIN(n_speakers, 1);
    ez_diar_pick_speakers(h, sf, s->k, n_speakers, on);
    for (int k = 0; k < s->k; k++) {
        if (on[k] && s->open[k] < 0) {
            live_turn nt = {k, ts, ts, 0.0, 0};
            if (!push_live_turn(s, nt)) return ez_fail(ELIZA_E_NOMEM, "out of memory for turns");
            s->open[k] = (int)s->n_turns - 1;
        }
        if (on[k]) {
            s->turns[s->open[k]].conf_sum += sf[k] / s->cover[r];
            s->turns[s->open[k]].n_frames++;
            s->turns[s->open[k]].end = ts;
        } else if (s->open[k] >= 0) {
            s->turns[s->open[k]].end = ts;
            s->open[k] = -1;
        }
    }
    s->cover[r] = s->count[r] = 0;
    memset(s->hard + r * KMAX, 0, sizeof(uint16_t) * KMAX);
    memset(s->softacc + r * KMAX, 0, sizeof(float) * KMAX);
    s->frame0++;
    return ELIZA_OK;
}

/* Window w: the audio, segmentation, clustering, accumulation. */
static int32_t run_window(ez_diar_stream *s, int64_t w) {
    const int64_t end = (w + 1) * s->step, start = end - s->W;
    int32_t cluster[255];
    int32_t rc;
    for (int i = 0; i < s->W; i++) {
        int64_t at = start + i;
        s->win[i] = at >= s->audio_base && at < s->audio_base + (int64_t)s->audio_n && at < s->pushed
                        ? s->audio[at - s->audio_base]
                        : 0.0f;
    }
    if ((rc = s->m->segment(s->m->ctx, s->win, 1, s->lp))) return rc;
    ez_diar_decode_powerset(s->lp, s->F, s->C, s->L, s->m->powerset, s->cls, s->soft);
    if ((rc = assign_window(s, cluster))) return rc;
    return accumulate(s, (int64_t)llround((double)start / s->fss), cluster);
}

/* Decides every frame whose windows (those ending at most `latency` after
 * it) have all run, or every frame when the stream is finished. */
static int32_t decide_ready(ez_diar_stream *s) {
    const double ran = (double)(s->next_window * s->step) / s->m->sample_rate;
    const double lat = (double)s->latency / s->m->sample_rate;
    int32_t rc;
    while (s->frame0 < s->frame_hi) {
        double ts = frame_time(s, s->frame0);
        if (!s->finished && ts + lat > ran) break;
        if (s->finished && ts >= (double)s->pushed / s->m->sample_rate) break;
        if ((rc = decide_frame(s))) return rc;
    }
    return ELIZA_OK;
}

int32_t ez_diar_stream_push(ez_diar_stream *s, const float *pcm, size_t n) {
    int32_t rc;
    if (s->finished) return ez_fail(ELIZA_E_STATE, "audio pushed after the end of the stream");
    while (n > 0) {
        size_t room = s->audio_cap - s->audio_n, take = EZ_MIN(room, n);
        memcpy(s->audio + s->audio_n, pcm, sizeof(float) * take);
        s->audio_n += take;
        s->pushed += (int64_t)take;
        pcm += take;
        n -= take;
        while (s->pushed >= (s->next_window + 1) * s->step) {
            int64_t keep_from;
            if ((rc = run_window(s, s->next_window))) return rc;
            s->next_window++;
            /* The next window starts here: older audio is not needed again. */
            keep_from = EZ_MAX(s->audio_base, (s->next_window + 1) * s->step - s->W);
            if (keep_from > s->audio_base) {
                size_t drop = (size_t)EZ_MIN((int64_t)s->audio_n, keep_from - s->audio_base);
                memmove(s->audio, s->audio + drop, sizeof(float) * (s->audio_n - drop));
                s->audio_n -= drop;
                s->audio_base += (int64_t)drop;
            }
            if ((rc = decide_ready(s))) return rc;
        }
    }
    return ELIZA_OK;
}

int32_t ez_diar_stream_finish(ez_diar_stream *s) {
    int32_t rc;
    if (s->finished) return ELIZA_OK;
    /* The windows that still hold pushed audio, zero-padded past its end. */
    while (s->next_window * s->step < s->pushed) {
        if ((rc = run_window(s, s->next_window))) return rc;
        s->next_window++;
    }
    s->finished = 1;
    if ((rc = decide_ready(s))) return rc;
    {
        const double duration = (double)s->pushed / s->m->sample_rate;
        for (int k = 0; k < s->k; k++)
            if (s->open[k] >= 0) {
                live_turn *t = &s->turns[s->open[k]];
                t->end = EZ_MIN(frame_time(s, s->frame0 - 1), duration);
                s->open[k] = -1;
            }
    }
    return ELIZA_OK;
}

static int by_start(const void *a, const void *b) {
    const eliza_diarize_turn *x = (const eliza_diarize_turn *)a, *y = (const eliza_diarize_turn *)b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->speaker < y->speaker ? -1 : x->speaker > y->speaker;
}

int32_t ez_diar_stream_pull(ez_diar_stream *s, eliza_diarize_turn **out, size_t *n_out) {
    const double edge = s->finished ? (double)s->pushed / s->m->sample_rate : frame_time(s, s->frame0);
    eliza_diarize_turn *v = (eliza_diarize_turn *)malloc(sizeof *v * EZ_MAX(s->n_turns, (size_t)1));
    size_t n = 0, kept = 0;
    *out = NULL;
    *n_out = 0;
    if (!v) return ez_fail(ELIZA_E_NOMEM, "out of memory for %zu turns", s->n_turns);
    for (size_t i = 0; i < s->n_turns; i++) {
        live_turn *t = &s->turns[i];
        int open = s->open[t->speaker] == (int)i;
        double end = open ? edge : t->end;
        if (s->finished) end = EZ_MIN(end, edge);
        if (end > t->start) {
            int32_t *id = &s->public_id[t->speaker];
            if (*id < 0) *id = s->n_public++;
            v[n].start = t->start;
            v[n].end = end;
            v[n].speaker = *id;
            v[n].confidence = (float)(t->n_frames ? t->conf_sum / (double)t->n_frames : 0.0);
            n++;
        }
        if (open) {
            /* The rest of the turn continues from the edge. */
            t->start = EZ_MAX(t->start, end);
            t->conf_sum = 0.0;
            t->n_frames = 0;
            s->turns[kept] = *t;
            s->open[t->speaker] = (int)kept++;
        }
    }
    s->n_turns = kept;
    if (n) qsort(v, n, sizeof *v, by_start);
    *out = v;
    *n_out = n;
    return s->finished && n == 0 && kept == 0 ? ELIZA_DONE : ELIZA_OK;
}

double ez_diar_stream_pushed(const ez_diar_stream *s) { return (double)s->pushed / s->m->sample_rate; }

double ez_diar_stream_decided(const ez_diar_stream *s) {
    return s->finished ? ez_diar_stream_pushed(s) : frame_time(s, s->frame0);
}
