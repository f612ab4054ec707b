/* The diarization pipeline (see pipeline.h). */
#include "diar/pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "diar/cluster.h"
#include "diar/resample.h"

/* Progress reached when every window is segmented and embedded. */
#define PROGRESS_WINDOWS 0.95

int64_t ez_diar_n_windows(uint64_t n_samples, int chunk_samples, int64_t step_samples) {
    if (n_samples <= (uint64_t)chunk_samples) return 1;
    return 1 + (int64_t)((n_samples - (uint64_t)chunk_samples + (uint64_t)step_samples - 1) / (uint64_t)step_samples);
}

int64_t ez_diar_window_frame(int64_t w, int64_t step_samples, double frame_step_samples) {
    return (int64_t)llround((double)w * (double)step_samples / frame_step_samples);
}

void ez_diar_decode_powerset(const float *logprobs, int n_frames, int n_classes, int n_local,
                             const uint8_t *powerset, uint8_t *cls, uint8_t *soft) {
    for (int f = 0; f < n_frames; f++) {
        const float *row = logprobs + (size_t)f * n_classes;
        int best = 0;
        for (int c = 1; c < n_classes; c++)
            if (row[c] > row[best]) best = c;
        cls[f] = (uint8_t)best;
        for (int s = 0; s < n_local; s++) {
            double p = 0.0;
            for (int c = 0; c < n_classes; c++)
                if (powerset[c * n_local + s]) p += exp((double)row[c]);
            soft[(size_t)f * n_local + s] = (uint8_t)lrint(EZ_MIN(p, 1.0) * 255.0);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Reconstruction                                                            */
/* ------------------------------------------------------------------------ */

static int push_turn(ez_diar_turns *l, ez_diar_raw_turn t) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        ez_diar_raw_turn *v = (ez_diar_raw_turn *)realloc(l->v, cap * sizeof *v);
        if (!v) return 0;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = t;
    return 1;
}

static int by_speaker_start(const void *a, const void *b) {
    const ez_diar_raw_turn *x = (const ez_diar_raw_turn *)a, *y = (const ez_diar_raw_turn *)b;
    if (x->speaker != y->speaker) return x->speaker < y->speaker ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int by_start_speaker(const void *a, const void *b) {
    const ez_diar_raw_turn *x = (const ez_diar_raw_turn *)a, *y = (const ez_diar_raw_turn *)b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->speaker < y->speaker ? -1 : x->speaker > y->speaker;
}

void ez_diar_clip_turns(ez_diar_turns *l, double duration) {
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++) {
        ez_diar_raw_turn t = l->v[i];
        t.start = EZ_MAX(t.start, 0.0);
        t.end = EZ_MIN(t.end, duration);
        if (t.end > t.start) l->v[n++] = t;
    }
    l->n = n;
}

void ez_diar_fill_gaps(ez_diar_turns *l, double min_off) {
    size_t n = 0;
    if (l->n) qsort(l->v, l->n, sizeof *l->v, by_speaker_start);
    for (size_t i = 0; i < l->n; i++) {
        ez_diar_raw_turn *prev = n ? &l->v[n - 1] : NULL;
        if (prev && prev->speaker == l->v[i].speaker && l->v[i].start - prev->end < min_off) {
            prev->end = EZ_MAX(prev->end, l->v[i].end);
            prev->conf_sum += l->v[i].conf_sum;
            prev->n_frames += l->v[i].n_frames;
        } else {
            l->v[n++] = l->v[i];
        }
    }
    l->n = n;
}

void ez_diar_drop_short(ez_diar_turns *l, double min_on) {
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].end - l->v[i].start >= min_on) l->v[n++] = l->v[i];
    l->n = n;
    if (l->n) qsort(l->v, l->n, sizeof *l->v, by_start_speaker);
}

int32_t ez_diar_number_turns(ez_diar_turns *l, int n_clusters, int32_t *speaker_of) {
    int32_t *number = (int32_t *)malloc(sizeof(int32_t) * (size_t)EZ_MAX(n_clusters, 1));
    int32_t next = 0;
    if (!number) return ez_fail(ELIZA_E_NOMEM, "out of memory for %d speakers", n_clusters);
    for (int k = 0; k < n_clusters; k++) number[k] = -1;
    for (size_t i = 0; i < l->n; i++) {
        int32_t *k = &number[l->v[i].speaker];
        if (*k < 0) *k = next++;
        l->v[i].speaker = *k;
    }
    if (speaker_of) memcpy(speaker_of, number, sizeof(int32_t) * (size_t)n_clusters);
    free(number);
    if (l->n) qsort(l->v, l->n, sizeof *l->v, by_start_speaker);
    return ELIZA_OK;
}

int32_t ez_diar_turns_out(const ez_diar_turns *l, eliza_diarize_turn **out, size_t *n_out) {
    eliza_diarize_turn *turns = (eliza_diarize_turn *)malloc(sizeof *turns * EZ_MAX(l->n, (size_t)1));
    if (!turns) return ez_fail(ELIZA_E_NOMEM, "out of memory for %zu turns", l->n);
    for (size_t i = 0; i < l->n; i++) {
        turns[i].start = l->v[i].start;
        turns[i].end = l->v[i].end;
        turns[i].speaker = l->v[i].speaker;
        turns[i].confidence = (float)(l->v[i].n_frames ? l->v[i].conf_sum / (double)l->v[i].n_frames : 0.0);
    }
    *out = turns;
    *n_out = l->n;
    return ELIZA_OK;
}

void ez_diar_frame_sums_free(ez_diar_frame_sums *s) {
    free(s->cover);
    free(s->count);
    free(s->hard);
    free(s->soft);
    memset(s, 0, sizeof *s);
}

/* Adds window w's frames to s; value: [2K] scratch. */
static void sum_window(const ez_diar_recon *r, const uint8_t *n_active, int64_t w, float *value,
                       ez_diar_frame_sums *s) {
    const int K = r->n_clusters, F = r->n_frames, L = r->n_local;
    const uint8_t *cls = r->cls + (size_t)w * F;
    const uint8_t *sp = r->soft + (size_t)w * F * L;
    const int32_t *cl = r->cluster + (size_t)w * L;
    for (int f = 0; f < F; f++) {
        int64_t t = r->start_frame[w] + f;
        s->cover[t]++;
        s->count[t] += n_active[cls[f]];
        for (int k = 0; k < K; k++) value[2 * k] = value[2 * k + 1] = -1.0f;
        for (int l = 0; l < L; l++) {
            int k = cl[l];
            if (k < 0) continue;
            value[2 * k] = EZ_MAX(value[2 * k], (float)(r->powerset[cls[f] * L + l] != 0));
            value[2 * k + 1] = EZ_MAX(value[2 * k + 1], sp[(size_t)f * L + l] / 255.0f);
        }
        for (int k = 0; k < K; k++) {
            if (value[2 * k] < 0) continue;
            s->hard[t * K + k] += (uint16_t)value[2 * k];
            s->soft[t * K + k] += value[2 * k + 1];
        }
    }
}

int32_t ez_diar_sum_windows(const ez_diar_recon *r, ez_diar_frame_sums *s) {
    const size_t K = (size_t)EZ_MAX(r->n_clusters, 1);
    uint8_t *n_active = (uint8_t *)malloc((size_t)EZ_MAX(r->n_classes, 1));
    float *value = (float *)malloc(sizeof(float) * 2 * K);
    size_t T;
    int32_t rc = ELIZA_OK;
    memset(s, 0, sizeof *s);
    s->n_frames = r->n_windows > 0 ? r->start_frame[r->n_windows - 1] + r->n_frames : 0;
    s->n_clusters = r->n_clusters;
    T = (size_t)EZ_MAX(s->n_frames, 1);
    s->cover = (uint16_t *)calloc(T, sizeof *s->cover);
    s->count = (uint16_t *)calloc(T, sizeof *s->count);
    s->hard = (uint16_t *)calloc(T * K, sizeof *s->hard);
    s->soft = (float *)calloc(T * K, sizeof *s->soft);
    if (!n_active || !value || !s->cover || !s->count || !s->hard || !s->soft) {
        rc = ez_fail(ELIZA_E_NOMEM, "out of memory reconstructing %lld frames x %d speakers", (long long)s->n_frames,
                     r->n_clusters);
        goto done;
    }
    for (int c = 0; c < r->n_classes; c++) {
        n_active[c] = 0;
        for (int l = 0; l < r->n_local; l++) n_active[c] += r->powerset[c * r->n_local + l] != 0;
    }
    for (int64_t w = 0; w < r->n_windows; w++) sum_window(r, n_active, w, value, s);
done:
    free(n_active);
    free(value);
    return rc;
}

void ez_diar_pick_speakers(const uint16_t *hard, const float *soft, int K, int n, uint8_t *on) {
    memset(on, 0, (size_t)EZ_MAX(K, 0));
    for (int i = 0; i < n; i++) {
        int best = -1;
        for (int k = 0; k < K; k++) {
            if (on[k] || !hard[k]) continue;
            if (best < 0 || hard[k] > hard[best] || (hard[k] == hard[best] && soft[k] > soft[best])) best = k;
        }
        if (best < 0) break;
        on[best] = 1;
    }
}

/* Per frame, the `count` most active clusters; runs of a cluster's frames
 * become turns (raw: before gaps and short turns are handled). */
static int32_t frames_to_turns(const ez_diar_recon *r, const ez_diar_frame_sums *s, ez_diar_turns *turns) {
    const int K = r->n_clusters;
    uint8_t *on = (uint8_t *)malloc((size_t)EZ_MAX(K, 1));
    int64_t *open = (int64_t *)malloc(sizeof(int64_t) * (size_t)EZ_MAX(K, 1));
    int32_t rc = ELIZA_OK;
    if (!on || !open) {
        rc = ez_fail(ELIZA_E_NOMEM, "out of memory for %d speakers", K);
        goto done;
    }
    for (int k = 0; k < K; k++) open[k] = -1;
    for (int64_t t = 0; t < s->n_frames; t++) {
        int n_speakers = s->cover[t] ? (int)nearbyint((double)s->count[t] / s->cover[t]) : 0;
        double ts = (double)t * r->frame_step + 0.5 * r->frame_duration;
        if (r->max_per_frame > 0) n_speakers = EZ_MIN(n_speakers, r->max_per_frame);
        if (r->exclusive) n_speakers = EZ_MIN(n_speakers, 1);
        ez_diar_pick_speakers(s->hard + t * K, s->soft + t * K, K, n_speakers, on);
        for (int k = 0; k < K; k++) {
            if (on[k] && open[k] < 0) {
                ez_diar_raw_turn nt = {k, ts, ts, 0.0, 0};
                if (!push_turn(turns, nt)) {
                    rc = ez_fail(ELIZA_E_NOMEM, "out of memory for turns");
                    goto done;
                }
                open[k] = (int64_t)turns->n - 1;
            }
            if (on[k]) {
                turns->v[open[k]].conf_sum += s->soft[t * K + k] / s->cover[t];
                turns->v[open[k]].n_frames++;
            } else if (open[k] >= 0) {
                turns->v[open[k]].end = ts;
                open[k] = -1;
            }
        }
    }
    /* Still active at the last frame: the turn ends at that frame, as
     * pyannote's Binarize ends it. */
    for (int k = 0; k < K; k++)
        if (open[k] >= 0) turns->v[open[k]].end = (double)(s->n_frames - 1) * r->frame_step + 0.5 * r->frame_duration;
done:
    free(on);
    free(open);
    return rc;
}

int32_t ez_diar_reconstruct(const ez_diar_recon *r, eliza_diarize_turn **out, size_t *n_out) {
    ez_diar_frame_sums s;
    ez_diar_turns turns = {0};
    int32_t rc;
    *out = NULL;
    *n_out = 0;
    if ((rc = ez_diar_sum_windows(r, &s)) == ELIZA_OK && (rc = frames_to_turns(r, &s, &turns)) == ELIZA_OK) {
        ez_diar_clip_turns(&turns, r->duration);
        ez_diar_fill_gaps(&turns, r->min_duration_off);
        ez_diar_drop_short(&turns, r->min_duration_on);
        if ((rc = ez_diar_number_turns(&turns, r->n_clusters, r->speaker_of)) == ELIZA_OK)
            rc = ez_diar_turns_out(&turns, out, n_out);
    }
    free(turns.v);
    ez_diar_frame_sums_free(&s);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The run                                                                   */
/* ------------------------------------------------------------------------ */

static int emb_reserve(ez_diar_embs *e) {
    size_t cap;
    float *v;
    int32_t *window;
    uint8_t *local, *train;
    if (e->n < e->cap) return 1;
    cap = e->cap ? 2 * e->cap : 256;
    v = (float *)realloc(e->v, cap * (size_t)e->dim * sizeof *v);
    if (v) e->v = v;
    window = (int32_t *)realloc(e->window, cap * sizeof *window);
    if (window) e->window = window;
    local = (uint8_t *)realloc(e->local, cap);
    if (local) e->local = local;
    train = (uint8_t *)realloc(e->train, cap);
    if (train) e->train = train;
    if (!v || !window || !local || !train) return 0;
    e->cap = cap;
    return 1;
}

static void emb_free(ez_diar_embs *e) {
    free(e->v);
    free(e->window);
    free(e->local);
    free(e->train);
    memset(e, 0, sizeof *e);
}

static int cancelled(const ez_diar_control *ctl) {
    return ctl && ctl->cancel && ez_atomic_int_load(ctl->cancel);
}

static void set_progress(const ez_diar_control *ctl, double p) {
    if (ctl && ctl->progress) ez_atomic_int_store(ctl->progress, (int)lrint(EZ_MIN(EZ_MAX(p, 0.0), 1.0) * 1e6));
}

/* Window w's audio at the models' rate into dst[chunk]; returns 1 if it is
 * all zeros (digital silence). */
static int fill_window(const float *pcm, size_t n, const ez_resampler *rs, uint64_t n16, uint64_t start, int chunk,
                       int sample_rate, int model_rate, float *dst) {
    uint64_t avail = start < n16 ? EZ_MIN((uint64_t)chunk, n16 - start) : 0;
    if (rs) {
        /* The input the filter reads for these outputs; zeros in, zeros out. */
        uint64_t taps = (uint64_t)ez_resampler_half_taps(rs) + 1;
        uint64_t a = start * (uint64_t)sample_rate / (uint64_t)model_rate;
        uint64_t b = (start + avail) * (uint64_t)sample_rate / (uint64_t)model_rate + taps + 1;
        int silent = 1;
        a = a > taps ? a - taps : 0;
        b = EZ_MIN(b, (uint64_t)n);
        for (uint64_t i = a; i < b && silent; i++) silent = pcm[i] == 0.0f;
        if (silent)
            memset(dst, 0, sizeof(float) * (size_t)avail);
        else
            ez_resampler_run(rs, pcm, n, start, (size_t)avail, dst);
    } else if (avail) {
        memcpy(dst, pcm + start, sizeof(float) * (size_t)avail);
    }
    memset(dst + avail, 0, sizeof(float) * (size_t)((uint64_t)chunk - avail));
    for (uint64_t i = 0; i < avail; i++)
        if (dst[i] != 0.0f) return 0;
    return 1;
}

/* Window `at` (samples) cut from span, the audio from `from` on (as
 * fill_window wrote it); returns 1 if it is all zeros. */
static int window_from_span(const float *span, uint64_t n16, uint64_t from, uint64_t at, int chunk, float *dst) {
    uint64_t avail = at < n16 ? EZ_MIN((uint64_t)chunk, n16 - at) : 0;
    if (avail) memcpy(dst, span + (at - from), sizeof(float) * (size_t)avail);
    memset(dst + avail, 0, sizeof(float) * (size_t)((uint64_t)chunk - avail));
    for (uint64_t i = 0; i < avail; i++)
        if (dst[i] != 0.0f) return 0;
    return 1;
}

size_t ez_diar_gather_frames(const float *chunk, int chunk_samples, const uint8_t *mask, int n_frames,
                             double frame_step_samples, double offset, float *out) {
    size_t n = 0;
    for (int f = 0; f < n_frames; f++) {
        int64_t a, b;
        if (!mask[f]) continue;
        a = EZ_MAX((int64_t)llround(f * frame_step_samples + offset), 0);
        b = EZ_MIN((int64_t)llround((f + 1) * frame_step_samples + offset), (int64_t)chunk_samples);
        if (b > a) {
            memcpy(out + n, chunk + a, sizeof(float) * (size_t)(b - a));
            n += (size_t)(b - a);
        }
    }
    return n;
}

/* Embeddings of 1.6 s partials on a grid over the whole audio, computed
 * once and shared by every window that holds them (one slot per grid point
 * a batch of windows can hold, plus slack: a slot is reused only by a later
 * point, which no earlier window needs). A batch's missing partials are
 * computed together (prefetch_partials) before its windows read them. */
typedef struct {
    int64_t *index;   /* [slots] grid point held by each slot, -1: none */
    float *emb;       /* [slots, dim] */
    int slots, dim;
    int64_t partial, hop;  /* samples at the models' rate */
    int64_t *want;    /* [slots] points a batch still needs */
    const float **clip;  /* [slots] their audio */
    float *got;       /* [slots, dim] their embeddings */
} partial_cache;

/* Slots for the grid points of one batch of windows (step: window step,
 * samples). */
static int partial_cache_init(partial_cache *pc, const ez_diar_models *m, int batch, int64_t step) {
    int64_t span = (int64_t)(batch - 1) * EZ_MIN(step, (int64_t)m->chunk_samples) + m->chunk_samples;
    pc->dim = m->emb_dim;
    pc->partial = (int64_t)llround(EZ_DIAR_PARTIAL_SECONDS * m->sample_rate);
    pc->hop = (int64_t)llround(EZ_DIAR_PARTIAL_HOP_SECONDS * m->sample_rate);
    pc->slots = (int)(EZ_MAX((int64_t)0, span - pc->partial) / pc->hop) + 3;
    pc->want = (int64_t *)malloc(sizeof(int64_t) * (size_t)pc->slots);
    pc->clip = (const float **)malloc(sizeof(float *) * (size_t)pc->slots);
    pc->got = (float *)malloc(sizeof(float) * (size_t)pc->slots * (size_t)pc->dim);
    if (!pc->want || !pc->clip || !pc->got) return 0;
    pc->index = (int64_t *)malloc(sizeof(int64_t) * (size_t)pc->slots);
    pc->emb = (float *)malloc(sizeof(float) * (size_t)pc->slots * (size_t)pc->dim);
    if (!pc->index || !pc->emb) return 0;
    for (int i = 0; i < pc->slots; i++) pc->index[i] = -1;
    return 1;
}

static void partial_cache_free(partial_cache *pc) {
    free(pc->index);
    free(pc->emb);
    free(pc->want);
    free((void *)pc->clip);
    free(pc->got);
}

/* The embedding of grid point p, whose audio starts at chunk[local]. */
static int32_t partial_embedding(const ez_diar_models *m, partial_cache *pc, int64_t p, const float *chunk,
                                 int64_t local, const float **out) {
    int slot = (int)(p % pc->slots);
    float *e = pc->emb + (size_t)slot * (size_t)pc->dim;
    if (pc->index[slot] != p) {
        int32_t rc = m->embed(m->ctx, chunk + local, (size_t)pc->partial, e);
        if (rc) return rc;
        pc->index[slot] = p;
    }
    *out = e;
    return ELIZA_OK;
}

typedef struct {
    const ez_diar_models *m;
    int64_t step;          /* window step, samples */
    uint64_t n16;          /* audio length at the models' rate */
    const uint8_t *n_active;  /* [n_classes] speakers in each class */
    uint8_t *mask;         /* [n_frames] scratch */
    float *gather;         /* [chunk_samples] scratch */
    double *sum;           /* [dim] scratch */
    partial_cache cache;
} embed_state;

/* Frames of local speaker s in a window (cls: its argmax classes) into
 * *n_act, the ones where it speaks alone into *n_clean. */
static void speaker_frames(const embed_state *st, const uint8_t *cls, int s, int *n_act, int *n_clean) {
    const ez_diar_models *m = st->m;
    *n_act = *n_clean = 0;
    for (int f = 0; f < m->n_frames; f++) {
        int a = m->powerset[cls[f] * m->n_local + s] != 0;
        *n_act += a;
        *n_clean += a && st->n_active[cls[f]] == 1;
    }
}

/* Whether the grid partial starting at sample `local` of a window speaks
 * for its local speaker s: nobody else is active in the frames it covers,
 * and s in at least EZ_DIAR_PARTIAL_PURITY of them. */
static int partial_is_clean(const embed_state *st, const uint8_t *cls, int s, int64_t local) {
    const ez_diar_models *m = st->m;
    const int F = m->n_frames, L = m->n_local;
    const double fss = m->frame_step * m->sample_rate;
    const double offset = 0.5 * (m->frame_duration * m->sample_rate - fss);
    int f0 = EZ_MAX(0, (int)floor((local - offset) / fss));
    int f1 = EZ_MIN(F, (int)ceil((local + st->cache.partial - offset) / fss));
    int alone = 0;
    for (int f = f0; f < f1; f++) {
        int mine = m->powerset[cls[f] * L + s] != 0;
        if (st->n_active[cls[f]] > mine) return 0;
        alone += mine;
    }
    return alone >= EZ_DIAR_PARTIAL_PURITY * (f1 - f0);
}

/* The grid points of window w: p0 .. p1 - 1 (the ones wholly inside its
 * audio). */
static void window_points(const embed_state *st, int64_t w, int64_t *p0, int64_t *p1) {
    const int64_t start = w * st->step, P = st->cache.partial, H = st->cache.hop;
    const int64_t end = (int64_t)EZ_MIN((uint64_t)(start + st->m->chunk_samples), st->n16);
    *p0 = (start + H - 1) / H;
    *p1 = end >= P ? EZ_MAX(*p0, (end - P) / H + 1) : *p0;
}

/* Embeds the listed points together and files them in the cache. */
static int32_t flush_partials(embed_state *st, int *n_want) {
    partial_cache *pc = &st->cache;
    int32_t rc;
    if (*n_want == 0) return ELIZA_OK;
    rc = st->m->embed_clips(st->m->ctx, pc->clip, *n_want, (size_t)pc->partial, pc->got);
    for (int i = 0; i < *n_want && rc == ELIZA_OK; i++) {
        int slot = (int)(pc->want[i] % pc->slots);
        memcpy(pc->emb + (size_t)slot * (size_t)pc->dim, pc->got + (size_t)i * (size_t)pc->dim,
               sizeof(float) * (size_t)pc->dim);
        pc->index[slot] = pc->want[i];
    }
    *n_want = 0;
    return rc;
}

/* Lists the partials window w (audio: chunk) will ask embed_window for
 * that the cache lacks, embedding the list when it is full. */
static int32_t want_partials(embed_state *st, int64_t w, const float *chunk, const uint8_t *cls, int *n_want) {
    partial_cache *pc = &st->cache;
    const int min_embed = (int)ceil(EZ_DIAR_EMBED_MIN_SECONDS / st->m->frame_step);
    int64_t p0, p1;
    int32_t rc;
    window_points(st, w, &p0, &p1);
    for (int s = 0; s < st->m->n_local; s++) {
        int n_act, n_clean;
        speaker_frames(st, cls, s, &n_act, &n_clean);
        if (n_act < min_embed) continue;
        for (int64_t p = p0; p < p1; p++) {
            int listed = pc->index[p % pc->slots] == p;
            for (int i = 0; i < *n_want && !listed; i++) listed = pc->want[i] == p;
            if (listed || !partial_is_clean(st, cls, s, p * pc->hop - w * st->step)) continue;
            if (*n_want == pc->slots && (rc = flush_partials(st, n_want))) return rc;
            pc->want[*n_want] = p;
            pc->clip[(*n_want)++] = chunk + (p * pc->hop - w * st->step);
        }
    }
    return ELIZA_OK;
}

/* Embeddings of the local speakers of one window (its audio: chunk): the
 * mean of the grid partials inside the window where the speaker is (nearly)
 * alone; without one, the embedding of the speaker's non-overlapped frames
 * (all its frames when those are too few), at most two partials long. */
static int32_t embed_window(embed_state *st, int64_t w, const float *chunk, const uint8_t *cls, ez_diar_embs *embs) {
    const ez_diar_models *m = st->m;
    const int F = m->n_frames, L = m->n_local, dim = m->emb_dim;
    const double fss = m->frame_step * m->sample_rate;
    const double offset = 0.5 * (m->frame_duration * m->sample_rate - fss);
    const int min_embed = (int)ceil(EZ_DIAR_EMBED_MIN_SECONDS / m->frame_step);
    const int min_train = (int)ceil(EZ_MIN(EZ_DIAR_TRAIN_MIN_SECONDS, m->chunk_samples / (double)m->sample_rate) /
                                    m->frame_step);
    const int64_t start = w * st->step, P = st->cache.partial;
    int64_t p0, p1;
    window_points(st, w, &p0, &p1);
    for (int s = 0; s < L; s++) {
        int n_act, n_clean, n_partials = 0, use_clean;
        float *out;
        int32_t rc;
        speaker_frames(st, cls, s, &n_act, &n_clean);
        if (n_act < min_embed) continue;
        if (!emb_reserve(embs)) return ez_fail(ELIZA_E_NOMEM, "out of memory for %zu embeddings", embs->n + 1);
        out = embs->v + embs->n * (size_t)dim;
        for (int j = 0; j < dim; j++) st->sum[j] = 0.0;
        for (int64_t p = p0; p < p1; p++) {
            int64_t local = p * st->cache.hop - start;
            const float *e;
            if (!partial_is_clean(st, cls, s, local)) continue;
            if ((rc = partial_embedding(m, &st->cache, p, chunk, local, &e))) return rc;
            for (int j = 0; j < dim; j++) st->sum[j] += e[j];
            n_partials++;
        }
        if (n_partials > 0) {
            double norm = 0.0;
            for (int j = 0; j < dim; j++) norm += st->sum[j] * st->sum[j];
            norm = sqrt(norm);
            for (int j = 0; j < dim; j++) out[j] = (float)(norm > 0 ? st->sum[j] / norm : 0.0);
        } else {
            size_t len;
            use_clean = n_clean >= min_embed;
            for (int f = 0; f < F; f++)
                st->mask[f] = m->powerset[cls[f] * L + s] && (!use_clean || st->n_active[cls[f]] == 1);
            len = ez_diar_gather_frames(chunk, m->chunk_samples, st->mask, F, fss, offset, st->gather);
            if (len == 0) continue;
            if ((rc = m->embed(m->ctx, st->gather, (size_t)EZ_MIN((int64_t)len, 2 * P), out))) return rc;
        }
        embs->window[embs->n] = (int32_t)w;
        embs->local[embs->n] = (uint8_t)s;
        embs->train[embs->n] = n_clean >= min_train;
        embs->n++;
    }
    return ELIZA_OK;
}

void ez_diar_train_set_free(ez_diar_train_set *t) {
    free(t->x);
    free(t->group);
    memset(t, 0, sizeof *t);
}

int32_t ez_diar_train_set_pick(const ez_diar_embs *embs, ez_diar_train_set *t) {
    const size_t dim = (size_t)embs->dim;
    int any_train = 0;
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < embs->n; i++) any_train |= embs->train[i];
    for (t->stride = 1;; t->stride++) {
        t->n = 0;
        for (size_t i = 0; i < embs->n; i++)
            t->n += (!any_train || embs->train[i]) && embs->window[i] % t->stride == 0;
        if (t->n <= EZ_CLUSTER_MAX_ITEMS) break;
    }
    t->x = (float *)malloc(sizeof(float) * EZ_MAX(t->n, (size_t)1) * dim);
    t->group = (int32_t *)malloc(sizeof(int32_t) * EZ_MAX(t->n, (size_t)1));
    if (!t->x || !t->group) return ez_fail(ELIZA_E_NOMEM, "out of memory clustering %zu embeddings", t->n);
    t->n = 0;
    for (size_t i = 0; i < embs->n; i++) {
        if ((any_train && !embs->train[i]) || embs->window[i] % t->stride != 0) continue;
        memcpy(t->x + t->n * dim, embs->v + i * dim, sizeof(float) * dim);
        t->group[t->n++] = embs->window[i];
    }
    return ELIZA_OK;
}

ez_cluster_config ez_diar_cluster_config(const eliza_diarize_options *opt, int64_t stride) {
    ez_cluster_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.threshold = opt->threshold;
    cfg.num_clusters = opt->num_speakers;
    cfg.min_clusters = opt->min_speakers;
    cfg.max_clusters = opt->max_speakers;
    cfg.min_cluster_size =
        (int)EZ_MAX(1, llround(EZ_DIAR_MIN_CLUSTER_SECONDS / ((double)opt->step * (double)stride)));
    return cfg;
}

/* The centroids ([*k, dim] into *centroids, malloc'ed) of the training
 * set's clusters. Its labels are not kept: every embedding is assigned to
 * a centroid afterwards. */
static int32_t train_centroids(const eliza_diarize_options *opt, const ez_diar_train_set *t, int dim,
                               float **centroids, int *k) {
    const ez_cluster_config cfg = ez_diar_cluster_config(opt, t->stride);
    int32_t *labels = (int32_t *)malloc(sizeof(int32_t) * EZ_MAX(t->n, (size_t)1));
    int32_t rc;
    if (!labels) return ez_fail(ELIZA_E_NOMEM, "out of memory clustering %zu embeddings", t->n);
    rc = ez_cluster_ahc(t->x, (int)t->n, dim, t->group, &cfg, labels, centroids, k);
    free(labels);
    return rc;
}

int32_t ez_diar_assign_embs(const ez_diar_embs *embs, const float *centroids, int k, int n_local,
                            int32_t *cluster) {
    int32_t *group = (int32_t *)malloc(sizeof(int32_t) * EZ_MAX(embs->n, (size_t)1));
    int32_t *labels = (int32_t *)malloc(sizeof(int32_t) * EZ_MAX(embs->n, (size_t)1));
    int32_t rc;
    if (!group || !labels) {
        rc = ez_fail(ELIZA_E_NOMEM, "out of memory clustering %zu embeddings", embs->n);
        goto done;
    }
    for (size_t i = 0; i < embs->n; i++) group[i] = embs->window[i];
    rc = ez_cluster_assign(embs->v, (int)embs->n, embs->dim, group, centroids, k, labels);
    if (rc) goto done;
    for (size_t i = 0; i < embs->n; i++) cluster[(size_t)embs->window[i] * n_local + embs->local[i]] = labels[i];
done:
    free(group);
    free(labels);
    return rc;
}

int32_t ez_diar_cluster_embs(const eliza_diarize_options *opt, const ez_diar_embs *embs, int64_t n_windows,
                             int n_local, int32_t *cluster, int *out_k) {
    ez_diar_train_set t;
    float *centroids = NULL;
    int k = 0;
    int32_t rc;
    *out_k = 0;
    for (int64_t i = 0; i < n_windows * n_local; i++) cluster[i] = -1;
    if (embs->n == 0) return ELIZA_OK;
    if ((rc = ez_diar_train_set_pick(embs, &t)) == ELIZA_OK) rc = train_centroids(opt, &t, embs->dim, &centroids, &k);
    ez_diar_train_set_free(&t);
    if (rc == ELIZA_OK && (rc = ez_diar_assign_embs(embs, centroids, k, n_local, cluster)) == ELIZA_OK) *out_k = k;
    free(centroids);
    return rc;
}

/* What the window pass leaves for clustering and reconstruction. */
typedef struct {
    int64_t n_windows;
    uint8_t *cls;          /* [n_windows, F]: powerset class of each frame */
    uint8_t *soft;         /* [n_windows, F, L]: each local speaker's soft activity */
    int64_t *start_frame;  /* [n_windows]: first frame on the global grid */
    ez_diar_embs embs;         /* one embedding per (window, local speaker) that speaks */
} window_pass;

static void window_pass_free(window_pass *wp) {
    free(wp->cls);
    free(wp->soft);
    free(wp->start_frame);
    emb_free(&wp->embs);
    memset(wp, 0, sizeof *wp);
}

/* The audio and the batch buffers of the window pass. */
typedef struct {
    const ez_diar_models *m;
    const float *pcm;
    size_t n;
    int sample_rate;
    const ez_resampler *rs; /* NULL at the models' rate */
    uint64_t n16;           /* audio length at the models' rate */
    int64_t step;           /* window step, samples */
    int B;                  /* windows per batch */
    float *span;            /* [span_len]: the stretch a batch of overlapping windows covers, or NULL */
    int span_len;
    float *buf;             /* [B, W]: the batch's live windows */
    float *lp;              /* [B, F, C]: their log-probabilities */
    float *zero_lp;         /* [F, C]: digital silence's, once computed */
    int have_zero;
    int *slot;              /* [B]: window i's row in buf, or -1 for silence */
    int64_t *offset;        /* [B]: live window i's start in span */
} batch_state;

static void batch_free(batch_state *b) {
    free(b->span);
    free(b->buf);
    free(b->lp);
    free(b->zero_lp);
    free(b->slot);
    free(b->offset);
}

static int32_t batch_init(batch_state *b) {
    const ez_diar_models *m = b->m;
    const int W = m->chunk_samples;
    /* Overlapping windows are cut from the stretch their batch covers,
     * resampled once. */
    if (b->step < W) {
        b->span_len = (int)EZ_MIN((int64_t)(b->B - 1) * b->step + W, (int64_t)INT32_MAX);
        if (!(b->span = (float *)malloc(sizeof(float) * (size_t)b->span_len)))
            return ez_fail(ELIZA_E_NOMEM, "out of memory for %d samples of audio", b->span_len);
    }
    b->buf = (float *)malloc(sizeof(float) * (size_t)b->B * (size_t)W);
    b->lp = (float *)malloc(sizeof(float) * (size_t)b->B * (size_t)m->n_frames * (size_t)m->n_classes);
    b->zero_lp = (float *)malloc(sizeof(float) * (size_t)m->n_frames * (size_t)m->n_classes);
    b->slot = (int *)malloc(sizeof(int) * (size_t)b->B);
    b->offset = (int64_t *)malloc(sizeof(int64_t) * (size_t)b->B);
    if (!b->buf || !b->lp || !b->zero_lp || !b->slot || !b->offset)
        return ez_fail(ELIZA_E_NOMEM, "out of memory for a batch of %d windows", b->B);
    return ELIZA_OK;
}

/* Windows [w0, w0 + nb): cut into buf (windows of digital silence get slot
 * -1 and share one cached model output, computed on first need), then the
 * live ones segmented into lp. */
static int32_t segment_batch(batch_state *b, int64_t w0, int nb) {
    const ez_diar_models *m = b->m;
    const int W = m->chunk_samples;
    const uint64_t from = (uint64_t)w0 * (uint64_t)b->step;
    int n_live = 0;
    int32_t rc;
    if (b->span) fill_window(b->pcm, b->n, b->rs, b->n16, from, b->span_len, b->sample_rate, m->sample_rate, b->span);
    for (int i = 0; i < nb; i++) {
        uint64_t at = (uint64_t)(w0 + i) * (uint64_t)b->step;
        float *dst = b->buf + (size_t)n_live * (size_t)W;
        int zero = b->span ? window_from_span(b->span, b->n16, from, at, W, dst)
                           : fill_window(b->pcm, b->n, b->rs, b->n16, at, W, b->sample_rate, m->sample_rate, dst);
        b->slot[i] = zero ? -1 : n_live++;
    }
    if (n_live > 0) {
        if (b->span && m->segment_span && b->step % m->span_quantum == 0) {
            for (int i = 0; i < nb; i++)
                if (b->slot[i] >= 0) b->offset[b->slot[i]] = (int64_t)i * b->step;
            rc = m->segment_span(m->ctx, b->span, b->span_len, b->offset, n_live, b->lp);
        } else {
            rc = m->segment(m->ctx, b->buf, n_live, b->lp);
        }
        if (rc) return rc;
    }
    if (n_live < nb && !b->have_zero) {
        float *z = b->buf + (size_t)n_live * (size_t)W;
        memset(z, 0, sizeof(float) * (size_t)W);
        if ((rc = m->segment(m->ctx, z, 1, b->zero_lp))) return rc;
        b->have_zero = 1;
    }
    return ELIZA_OK;
}

static int32_t cancelled_at(const ez_diar_control *ctl, int64_t w, int64_t n_windows) {
    if (!cancelled(ctl)) return ELIZA_OK;
    return ez_fail(ELIZA_E_CANCELLED, "diarization cancelled at window %lld of %lld", (long long)w,
                   (long long)n_windows);
}

/* The embeddings of the batch's live windows (their partial embeddings
 * first, batched, where the model takes clips). */
static int32_t embed_batch(embed_state *est, const batch_state *b, int64_t w0, int nb, window_pass *wp,
                           const ez_diar_control *ctl) {
    const int W = b->m->chunk_samples, F = b->m->n_frames;
    int32_t rc = ELIZA_OK;
    if (b->m->embed_clips) {
        int n_want = 0;
        for (int i = 0; i < nb && rc == ELIZA_OK; i++)
            if (b->slot[i] >= 0)
                rc = want_partials(est, w0 + i, b->buf + (size_t)b->slot[i] * (size_t)W, wp->cls + (size_t)(w0 + i) * F,
                                   &n_want);
        if (rc || (rc = flush_partials(est, &n_want))) return rc;
    }
    for (int i = 0; i < nb; i++) {
        int64_t w = w0 + i;
        if (b->slot[i] < 0) continue;
        if ((rc = cancelled_at(ctl, w, wp->n_windows)) ||
            (rc = embed_window(est, w, b->buf + (size_t)b->slot[i] * (size_t)W, wp->cls + (size_t)w * F, &wp->embs)))
            return rc;
    }
    return ELIZA_OK;
}

/* Every window: segmentation, powerset decoding, embeddings of its local
 * speakers. Owns the batch buffers and the embedding scratch. */
static int32_t run_windows(batch_state *b, const ez_diar_control *ctl, window_pass *wp) {
    const ez_diar_models *m = b->m;
    const int F = m->n_frames, C = m->n_classes, L = m->n_local;
    const double fss = m->frame_step * m->sample_rate;
    uint8_t n_active[256];
    embed_state est;
    int32_t rc;

    for (int c = 0; c < C; c++) {
        n_active[c] = 0;
        for (int s = 0; s < L; s++) n_active[c] += m->powerset[c * L + s] != 0;
    }
    memset(&est, 0, sizeof est);
    est.m = m;
    est.step = b->step;
    est.n16 = b->n16;
    est.n_active = n_active;
    est.mask = (uint8_t *)malloc((size_t)F);
    est.gather = (float *)malloc(sizeof(float) * (size_t)m->chunk_samples);
    est.sum = (double *)malloc(sizeof(double) * (size_t)m->emb_dim);
    if (!est.mask || !est.gather || !est.sum || !partial_cache_init(&est.cache, m, b->B, b->step)) {
        rc = ez_fail(ELIZA_E_NOMEM, "out of memory for %lld windows", (long long)wp->n_windows);
        goto done;
    }
    if ((rc = batch_init(b))) goto done;
    for (int64_t w0 = 0; w0 < wp->n_windows; w0 += b->B) {
        int nb = (int)EZ_MIN((int64_t)b->B, wp->n_windows - w0);
        if ((rc = cancelled_at(ctl, w0, wp->n_windows)) || (rc = segment_batch(b, w0, nb))) goto done;
        /* Between the batch's segmentation and its embeddings: the two halves
         * of a batch take about as long, so a cancel waits half as much. */
        if ((rc = cancelled_at(ctl, w0, wp->n_windows))) goto done;
        for (int i = 0; i < nb; i++) {
            int64_t w = w0 + i;
            const float *wlp = b->slot[i] < 0 ? b->zero_lp : b->lp + (size_t)b->slot[i] * (size_t)F * (size_t)C;
            wp->start_frame[w] = ez_diar_window_frame(w, b->step, fss);
            ez_diar_decode_powerset(wlp, F, C, L, m->powerset, wp->cls + (size_t)w * F, wp->soft + (size_t)w * F * L);
        }
        if ((rc = embed_batch(&est, b, w0, nb, wp, ctl))) goto done;
        set_progress(ctl, PROGRESS_WINDOWS * (double)(w0 + nb) / (double)wp->n_windows);
    }
done:
    batch_free(b);
    partial_cache_free(&est.cache);
    free(est.mask);
    free(est.gather);
    free(est.sum);
    return rc;
}

/* The turns from the windows' decoded frames and their speakers' clusters;
 * speaker_of (NULL or [k]) receives each cluster's speaker number. */
static int32_t reconstruct(const ez_diar_models *m, const eliza_diarize_options *opt, const window_pass *wp,
                           const int32_t *cluster, int k, double duration, int32_t *speaker_of,
                           eliza_diarize_turn **out, size_t *n_out) {
    ez_diar_recon recon;
    memset(&recon, 0, sizeof recon);
    recon.n_windows = wp->n_windows;
    recon.start_frame = wp->start_frame;
    recon.n_frames = m->n_frames;
    recon.n_classes = m->n_classes;
    recon.n_local = m->n_local;
    recon.powerset = m->powerset;
    recon.cls = wp->cls;
    recon.soft = wp->soft;
    recon.cluster = cluster;
    recon.n_clusters = k;
    recon.max_per_frame = opt->num_speakers > 0 ? opt->num_speakers : opt->max_speakers;
    recon.frame_step = m->frame_step;
    recon.frame_duration = m->frame_duration;
    recon.duration = duration;
    recon.min_duration_on = opt->min_duration_on;
    recon.min_duration_off = opt->min_duration_off;
    recon.exclusive = opt->exclusive;
    recon.speaker_of = speaker_of;
    return ez_diar_reconstruct(&recon, out, n_out);
}

void ez_diar_speakers_free(ez_diar_speakers *s) {
    if (!s) return;
    free(s->centroids);
    memset(s, 0, sizeof *s);
}

/* Each cluster's centroid ([k, dim] into *out): the mean direction of the
 * embeddings of the local speakers assigned to it. */
static int32_t cluster_centroids(const ez_diar_models *m, const ez_diar_embs *embs, const int32_t *cluster, int k,
                                 float **out) {
    int32_t *labels = (int32_t *)malloc(sizeof(int32_t) * EZ_MAX(embs->n, (size_t)1));
    int32_t rc;
    *out = NULL;
    if (!labels) return ez_fail(ELIZA_E_NOMEM, "out of memory for %zu labels", embs->n);
    for (size_t i = 0; i < embs->n; i++) labels[i] = cluster[(size_t)embs->window[i] * m->n_local + embs->local[i]];
    rc = ez_cluster_centroids(embs->v, (int)embs->n, m->emb_dim, labels, k, out);
    free(labels);
    return rc;
}

int32_t ez_diar_speakers_of_turns(const float *centroids, int k, int dim, const int32_t *speaker_of,
                                  ez_diar_speakers *sp) {
    int n = 0;
    for (int c = 0; c < k; c++) n = EZ_MAX(n, speaker_of[c] + 1);
    sp->dim = dim;
    sp->n_speakers = n;
    sp->centroids = (float *)calloc((size_t)EZ_MAX(n, 1) * (size_t)dim, sizeof(float));
    if (!sp->centroids) return ez_fail(ELIZA_E_NOMEM, "out of memory for %d centroids", n);
    for (int c = 0; c < k; c++)
        if (speaker_of[c] >= 0)
            memcpy(sp->centroids + (size_t)speaker_of[c] * dim, centroids + (size_t)c * dim, sizeof(float) * (size_t)dim);
    return ELIZA_OK;
}

/* The audio as the window pass reads it: at the models' rate through a
 * resampler (*rs, for the caller to free) when sample_rate is another. */
static int32_t open_audio(batch_state *b, const ez_diar_models *m, const float *pcm, size_t n, int sample_rate,
                          const eliza_diarize_options *opt, ez_resampler **rs) {
    int32_t rc;
    *rs = NULL;
    memset(b, 0, sizeof *b);
    b->m = m;
    b->pcm = pcm;
    b->n = n;
    b->sample_rate = sample_rate;
    b->B = opt->batch_size;
    b->n16 = n;
    b->step = EZ_MAX((int64_t)1, (int64_t)llround((double)opt->step * m->sample_rate));
    if (sample_rate == m->sample_rate) return ELIZA_OK;
    if ((rc = ez_resampler_create(sample_rate, m->sample_rate, 0, rs))) return rc;
    b->rs = *rs;
    b->n16 = ez_resampler_out_len(*rs, n);
    return ELIZA_OK;
}

/* The window pass's outputs for n16 samples, and the clusters' table
 * ([n_windows, n_local] into *cluster). */
static int32_t window_pass_init(window_pass *wp, const ez_diar_models *m, uint64_t n16, int64_t step,
                                int32_t **cluster) {
    const size_t F = (size_t)m->n_frames, L = (size_t)m->n_local;
    memset(wp, 0, sizeof *wp);
    wp->n_windows = ez_diar_n_windows(n16, m->chunk_samples, step);
    wp->embs.dim = m->emb_dim;
    wp->cls = (uint8_t *)malloc((size_t)wp->n_windows * F);
    wp->soft = (uint8_t *)malloc((size_t)wp->n_windows * F * L);
    wp->start_frame = (int64_t *)malloc(sizeof(int64_t) * (size_t)wp->n_windows);
    *cluster = (int32_t *)malloc(sizeof(int32_t) * (size_t)wp->n_windows * L);
    if (!wp->cls || !wp->soft || !wp->start_frame || !*cluster)
        return ez_fail(ELIZA_E_NOMEM, "out of memory for %lld windows", (long long)wp->n_windows);
    return ELIZA_OK;
}

/* The turns (into *out) and their speakers (speakers: NULL, not wanted) of
 * the window pass's k clusters. Frees the embeddings first (the
 * centroids taken): reconstruction then has their memory. */
static int32_t turns_and_speakers(const ez_diar_models *m, const eliza_diarize_options *opt, window_pass *wp,
                                  const int32_t *cluster, int k, double duration, eliza_diarize_turn **out,
                                  size_t *n_out, ez_diar_speakers *speakers) {
    int32_t *speaker_of = (int32_t *)malloc(sizeof(int32_t) * (size_t)EZ_MAX(k, 1));
    float *centroids = NULL;
    int32_t rc;
    if (!speaker_of) return ez_fail(ELIZA_E_NOMEM, "out of memory for %d speakers", k);
    if (speakers && (rc = cluster_centroids(m, &wp->embs, cluster, k, &centroids))) goto done;
    emb_free(&wp->embs);
    rc = reconstruct(m, opt, wp, cluster, k, duration, speaker_of, out, n_out);
    if (rc == ELIZA_OK && speakers) rc = ez_diar_speakers_of_turns(centroids, k, m->emb_dim, speaker_of, speakers);
    if (rc) {
        free(*out);
        *out = NULL;
        *n_out = 0;
        ez_diar_speakers_free(speakers);
    }
done:
    free(speaker_of);
    free(centroids);
    return rc;
}

int32_t ez_diar_run(const ez_diar_models *m, const float *pcm, size_t n, int sample_rate,
                    const eliza_diarize_options *opt, const ez_diar_control *ctl, eliza_diarize_turn **out,
                    size_t *n_out, ez_diar_speakers *speakers) {
    ez_resampler *rs = NULL;
    batch_state b;
    window_pass wp;
    int32_t *cluster = NULL;
    int k = 0;
    int32_t rc;

    *out = NULL;
    *n_out = 0;
    if (speakers) memset(speakers, 0, sizeof *speakers);
    memset(&wp, 0, sizeof wp);
    set_progress(ctl, 0.0);
    if (m->n_classes > 256 || m->n_local > 255 || m->emb_dim < 1 || m->n_frames < 1 || m->chunk_samples < 1)
        return ez_fail(ELIZA_E_INTERNAL, "diarization models with %d classes, %d local speakers, %d frames",
                       m->n_classes, m->n_local, m->n_frames);
    if ((rc = open_audio(&b, m, pcm, n, sample_rate, opt, &rs))) return rc;
    if (b.n16 == 0) {
        /* No audio: no turns, an empty (non-NULL) array. */
        *out = (eliza_diarize_turn *)malloc(sizeof **out);
        if (!*out) rc = ez_fail(ELIZA_E_NOMEM, "out of memory for the turns");
        if (speakers) speakers->dim = m->emb_dim;
    } else if ((rc = window_pass_init(&wp, m, b.n16, b.step, &cluster)) == ELIZA_OK &&
               (rc = run_windows(&b, ctl, &wp)) == ELIZA_OK) {
        if (cancelled(ctl)) rc = ez_fail(ELIZA_E_CANCELLED, "diarization cancelled before clustering");
        else if ((rc = ez_diar_cluster_embs(opt, &wp.embs, wp.n_windows, m->n_local, cluster, &k)) == ELIZA_OK)
            rc = turns_and_speakers(m, opt, &wp, cluster, k, (double)n / sample_rate, out, n_out, speakers);
    }
    if (rc == ELIZA_OK) set_progress(ctl, 1.0);
    ez_resampler_free(rs);
    window_pass_free(&wp);
    free(cluster);
    return rc;
}
