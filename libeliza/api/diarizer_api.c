/* The eliza_diarizer handle: its state, open and close, the model calls for
 * tests and inspection (segment, embed), the pipeline call with its option
 * checks (diar/pipeline.h does the work), cancel and progress, and the
 * enrolment calls' argument checks (diar/identify.h keeps the voices). */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomic.h"
#include "core/common.h"
#include "core/error.h"
#include "core/platform.h"
#include "core/pool.h"
#include "core/utf8.h"
#include "diar/embedding.h"
#include "diar/identify.h"
#include "diar/pipeline.h"
#include "diar/segmentation.h"
#include "diar/stream.h"

struct eliza_diarizer {
    ez_seg_model *seg;
    ez_emb_model *emb;
    ez_pool *pool;
    int n_threads;
    ez_atomic_int cancel;      /* set by eliza_diarizer_cancel() */
    ez_atomic_int progress;    /* of the running eliza_diarize(), in 1/1e6 */
    ez_atomic_i64 busy;        /* DIAR_IDLE, DIAR_IN_CALL or DIAR_CLOSING */
    ez_atomic_int refs;        /* the host's handle plus one per open stream */
    ez_diar_speakers last;     /* the speakers of the last successful eliza_diarize() */
    ez_diar_voice_name *last_name; /* [last.n_speakers]: the name of the voice each took, or "" */
    float *last_distance;      /* [last.n_speakers]: cosine distance to it (or the nearest) */
    int have_last;
    ez_diar_voices voices;     /* the enrolled voices */
};

/* The handle's one call at a time, and a close that waits for it: a call
 * that finds another in flight, or the handle being closed, is refused with
 * ELIZA_E_STATE instead of racing it. */
enum { DIAR_IDLE = 0, DIAR_IN_CALL = 1, DIAR_CLOSING = -1 };

void eliza_diarizer_default_params(eliza_diarizer_params *params) {
    if (!params) return;
    memset(params, 0, sizeof *params);
    params->struct_size = (uint32_t)sizeof *params;
}

static int32_t read_params(const eliza_diarizer_params *in, eliza_diarizer_params *p) {
    eliza_diarizer_default_params(p);
    if (!in) return ELIZA_OK;
    if (!EZ_FITS(in, eliza_diarizer_params, n_threads))
        return ez_fail(ELIZA_E_ABI, "eliza_diarizer_params.struct_size %" PRIu32 " is too small (%" PRIu64 ")",
                       in->struct_size, (uint64_t)sizeof(eliza_diarizer_params));
    p->n_threads = in->n_threads;
    if (p->n_threads < 0) return ez_fail(ELIZA_E_INVALID_ARG, "n_threads %d is negative", (int)p->n_threads);
    return ELIZA_OK;
}

static int32_t enter(eliza_diarizer *d, const char *call) {
    if (ez_atomic_i64_cas(&d->busy, DIAR_IDLE, DIAR_IN_CALL)) return ELIZA_OK;
    if (ez_atomic_i64_load(&d->busy) == DIAR_CLOSING)
        return ez_fail(ELIZA_E_STATE, "%s: the diarizer is being closed", call);
    return ez_fail(ELIZA_E_STATE, "%s: another call is running on this diarizer (one thread at a time)", call);
}

static void leave(eliza_diarizer *d) { ez_atomic_i64_store(&d->busy, DIAR_IDLE); }

/* A call still running on another thread is cancelled and waited for:
 * freeing the models under it would crash that thread. */
/* The models and everything else, once neither the host nor a stream holds
 * the handle. */
static void release(eliza_diarizer *d) {
    if (ez_atomic_int_add(&d->refs, -1) != 1) return;
    ez_pool_destroy(d->pool);
    ez_diar_speakers_free(&d->last);
    free(d->last_name);
    free(d->last_distance);
    ez_diar_voices_free(&d->voices);
    ez_seg_free(d->seg);
    ez_emb_free(d->emb);
    free(d);
}

void eliza_diarizer_close(eliza_diarizer *diarizer) {
    if (!diarizer) return;
    while (!ez_atomic_i64_cas(&diarizer->busy, DIAR_IDLE, DIAR_CLOSING)) {
        if (ez_atomic_i64_load(&diarizer->busy) == DIAR_CLOSING) return; /* closed twice at once: one frees */
        ez_atomic_int_store(&diarizer->cancel, 1);
        ez_sleep_ms(1);
    }
    release(diarizer);
}

int32_t eliza_diarizer_open(const char *segmentation_path, const char *embedding_path,
                            const eliza_diarizer_params *params, eliza_diarizer **out) {
    eliza_diarizer_params p;
    eliza_diarizer *d;
    int32_t rc;
    ez_clear_error();
    if (out) *out = NULL;
    if (!out) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_open: out is NULL");
    if (!segmentation_path) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_open: segmentation_path is NULL");
    if (!embedding_path) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_open: embedding_path is NULL");
    if ((rc = read_params(params, &p))) return rc;
    d = (eliza_diarizer *)calloc(1, sizeof *d);
    if (!d) return ez_fail(ELIZA_E_NOMEM, "out of memory opening the diarizer");
    ez_atomic_int_store(&d->refs, 1);
    rc = ez_seg_load(segmentation_path, &d->seg);
    if (rc == ELIZA_OK) rc = ez_emb_load(embedding_path, &d->emb);
    if (rc == ELIZA_OK && ez_seg_sample_rate(d->seg) != ez_emb_sample_rate(d->emb))
        rc = ez_fail(ELIZA_E_FORMAT, "the segmentation model runs at %d Hz, the embedding model at %d Hz",
                     ez_seg_sample_rate(d->seg), ez_emb_sample_rate(d->emb));
    if (rc == ELIZA_OK) {
        d->pool = ez_pool_create(p.n_threads);
        if (!d->pool) rc = ELIZA_E_NOMEM; /* ez_pool_create set the message */
    }
    if (rc) {
        eliza_diarizer_close(d);
        return rc;
    }
    d->n_threads = ez_pool_threads(d->pool);
    ez_atomic_int_store(&d->cancel, 0);
    ez_atomic_int_store(&d->progress, 0);
    ez_atomic_i64_store(&d->busy, DIAR_IDLE);
    *out = d;
    return ELIZA_OK;
}

int32_t eliza_diarizer_segment(eliza_diarizer *diarizer, const float *pcm, size_t n_chunks,
                               size_t chunk_samples, float **out_logprobs, size_t *out_frames,
                               size_t *out_classes) {
    int frames, classes;
    float *buf = NULL;
    int32_t rc;
    ez_clear_error();
    if (out_logprobs) *out_logprobs = NULL;
    if (out_frames) *out_frames = 0;
    if (out_classes) *out_classes = 0;
    if (!diarizer || !pcm || !out_logprobs || !out_frames || !out_classes)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_segment: a required pointer is NULL");
    if (n_chunks == 0 || n_chunks > INT32_MAX || chunk_samples > INT32_MAX)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_segment: %zu chunks of %zu samples", n_chunks,
                       chunk_samples);
    if ((rc = enter(diarizer, "eliza_diarizer_segment"))) return rc;
    frames = ez_seg_frames(diarizer->seg, (int)chunk_samples);
    classes = ez_seg_n_classes(diarizer->seg);
    if (frames < 1) {
        rc = ez_fail(ELIZA_E_INVALID_ARG,
                     "eliza_diarizer_segment: %zu samples is shorter than one frame of the model (%.1f ms)",
                     chunk_samples, ez_seg_frame_duration(diarizer->seg) * 1e3);
    } else if ((uint64_t)n_chunks * (uint64_t)frames * (uint64_t)classes > ((uint64_t)1 << 36) / sizeof(float)) {
        rc = ez_fail(ELIZA_E_NOMEM, "eliza_diarizer_segment: %zu chunks of %d frames is too much output", n_chunks,
                     frames);
    } else if (!(buf = (float *)malloc(n_chunks * (size_t)frames * (size_t)classes * sizeof(float)))) {
        rc = ez_fail(ELIZA_E_NOMEM, "eliza_diarizer_segment: no memory for the output");
    } else {
        rc = ez_seg_forward(diarizer->seg, diarizer->pool, pcm, (int)n_chunks, (int)chunk_samples, buf);
    }
    leave(diarizer);
    if (rc) {
        free(buf);
        return rc;
    }
    *out_logprobs = buf;
    *out_frames = (size_t)frames;
    *out_classes = (size_t)classes;
    return ELIZA_OK;
}

int32_t eliza_diarizer_embed(eliza_diarizer *diarizer, const float *pcm, size_t n_samples,
                             float **out_embedding, size_t *out_dim) {
    int dim;
    float *buf;
    int32_t rc;
    ez_clear_error();
    if (out_embedding) *out_embedding = NULL;
    if (out_dim) *out_dim = 0;
    if (!diarizer || !pcm || !out_embedding || !out_dim)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_embed: a required pointer is NULL");
    if ((rc = enter(diarizer, "eliza_diarizer_embed"))) return rc;
    dim = ez_emb_dim(diarizer->emb);
    buf = (float *)malloc((size_t)dim * sizeof(float));
    rc = buf ? ez_emb_embed(diarizer->emb, diarizer->pool, pcm, n_samples, buf)
             : ez_fail(ELIZA_E_NOMEM, "eliza_diarizer_embed: no memory for the output");
    leave(diarizer);
    if (rc) {
        free(buf);
        return rc;
    }
    *out_embedding = buf;
    *out_dim = (size_t)dim;
    return ELIZA_OK;
}

/* ---- the pipeline ---------------------------------------------------------------- */

#define MIN_RATE 8000
#define MAX_RATE 192000
#define MIN_STEP 0.1f          /* seconds; at most 101 windows see each frame */
#define MAX_SPEAKERS 1000
#define MAX_BATCH 64           /* windows of 640 KB each */
/* Calibrated on the train split of the real meetings
 * (tests/diar/real/calibrate_identify.py, docs/diarization.md). */
#define IDENTIFY_THRESHOLD 0.2f

void eliza_diarize_default_options(eliza_diarize_options *options) {
    if (!options) return;
    memset(options, 0, sizeof *options);
    options->struct_size = (uint32_t)sizeof *options;
    options->step = 1.0f;
    options->threshold = 0.5f;
    options->batch_size = 8;
    options->identify_threshold = IDENTIFY_THRESHOLD;
    options->latency = 5.0f;
}

static int32_t read_options(const eliza_diarize_options *in, float chunk_seconds, eliza_diarize_options *o) {
    eliza_diarize_default_options(o);
    if (!in) return ELIZA_OK;
    if (!EZ_FITS(in, eliza_diarize_options, step))
        return ez_fail(ELIZA_E_ABI, "eliza_diarize_options.struct_size %" PRIu32 " is too small (%zu)",
                       in->struct_size, sizeof(eliza_diarize_options));
    if (EZ_FITS(in, eliza_diarize_options, step)) o->step = in->step;
    if (EZ_FITS(in, eliza_diarize_options, num_speakers)) o->num_speakers = in->num_speakers;
    if (EZ_FITS(in, eliza_diarize_options, min_speakers)) o->min_speakers = in->min_speakers;
    if (EZ_FITS(in, eliza_diarize_options, max_speakers)) o->max_speakers = in->max_speakers;
    if (EZ_FITS(in, eliza_diarize_options, threshold)) o->threshold = in->threshold;
    if (EZ_FITS(in, eliza_diarize_options, min_duration_on)) o->min_duration_on = in->min_duration_on;
    if (EZ_FITS(in, eliza_diarize_options, min_duration_off)) o->min_duration_off = in->min_duration_off;
    if (EZ_FITS(in, eliza_diarize_options, batch_size)) o->batch_size = in->batch_size;
    if (EZ_FITS(in, eliza_diarize_options, exclusive)) o->exclusive = in->exclusive;
    if (EZ_FITS(in, eliza_diarize_options, identify_threshold)) o->identify_threshold = in->identify_threshold;
    if (EZ_FITS(in, eliza_diarize_options, latency)) o->latency = in->latency;

    if (!(o->step >= MIN_STEP && o->step <= chunk_seconds))
        return ez_fail(ELIZA_E_INVALID_ARG, "step %g s is outside %g..%g s (the window)", (double)o->step,
                       (double)MIN_STEP, (double)chunk_seconds);
    if (o->num_speakers < 0 || o->num_speakers > MAX_SPEAKERS)
        return ez_fail(ELIZA_E_INVALID_ARG, "num_speakers %d is outside 0..%d", o->num_speakers, MAX_SPEAKERS);
    if (o->min_speakers < 0 || o->min_speakers > MAX_SPEAKERS)
        return ez_fail(ELIZA_E_INVALID_ARG, "min_speakers %d is outside 0..%d", o->min_speakers, MAX_SPEAKERS);
    if (o->max_speakers < 0 || o->max_speakers > MAX_SPEAKERS)
        return ez_fail(ELIZA_E_INVALID_ARG, "max_speakers %d is outside 0..%d", o->max_speakers, MAX_SPEAKERS);
    if (o->max_speakers > 0 && o->min_speakers > o->max_speakers)
        return ez_fail(ELIZA_E_INVALID_ARG, "min_speakers %d is above max_speakers %d", o->min_speakers,
                       o->max_speakers);
    if (o->num_speakers > 0 && (o->num_speakers < o->min_speakers ||
                                (o->max_speakers > 0 && o->num_speakers > o->max_speakers)))
        return ez_fail(ELIZA_E_INVALID_ARG, "num_speakers %d contradicts min_speakers %d / max_speakers %d",
                       o->num_speakers, o->min_speakers, o->max_speakers);
    if (!(o->threshold >= 0.0f && o->threshold <= 2.0f))
        return ez_fail(ELIZA_E_INVALID_ARG, "threshold %g is outside 0..2 (a cosine distance)", (double)o->threshold);
    if (!(o->min_duration_on >= 0.0f) || !isfinite(o->min_duration_on))
        return ez_fail(ELIZA_E_INVALID_ARG, "min_duration_on %g s is not a duration", (double)o->min_duration_on);
    if (!(o->min_duration_off >= 0.0f) || !isfinite(o->min_duration_off))
        return ez_fail(ELIZA_E_INVALID_ARG, "min_duration_off %g s is not a duration", (double)o->min_duration_off);
    if (o->batch_size < 1 || o->batch_size > MAX_BATCH)
        return ez_fail(ELIZA_E_INVALID_ARG, "batch_size %d is outside 1..%d", o->batch_size, MAX_BATCH);
    if (o->exclusive != 0 && o->exclusive != 1)
        return ez_fail(ELIZA_E_INVALID_ARG, "exclusive %d is not 0 or 1", o->exclusive);
    if (!(o->latency >= o->step && o->latency <= chunk_seconds))
        return ez_fail(ELIZA_E_INVALID_ARG, "latency %g s is outside the step %g s .. %g s (the window)",
                       (double)o->latency, (double)o->step, (double)chunk_seconds);
    if (!(o->identify_threshold >= 0.0f && o->identify_threshold <= 2.0f))
        return ez_fail(ELIZA_E_INVALID_ARG, "identify_threshold %g is outside 0..2 (a cosine distance)",
                       (double)o->identify_threshold);
    return ELIZA_OK;
}

static int32_t segment_fn(void *ctx, const float *pcm, int n_chunks, float *logprobs) {
    eliza_diarizer *d = (eliza_diarizer *)ctx;
    return ez_seg_forward(d->seg, d->pool, pcm, n_chunks, ez_seg_chunk_samples(d->seg), logprobs);
}

static int32_t segment_span_fn(void *ctx, const float *span, int64_t span_len, const int64_t *offset, int n_chunks,
                               float *logprobs) {
    eliza_diarizer *d = (eliza_diarizer *)ctx;
    return ez_seg_forward_span(d->seg, d->pool, span, span_len, offset, n_chunks, ez_seg_chunk_samples(d->seg),
                               logprobs);
}

static int32_t embed_fn(void *ctx, const float *pcm, size_t n, float *out) {
    eliza_diarizer *d = (eliza_diarizer *)ctx;
    return ez_emb_embed(d->emb, d->pool, pcm, n, out);
}

static int32_t embed_clips_fn(void *ctx, const float *const *pcm, int n_clips, size_t n, float *out) {
    eliza_diarizer *d = (eliza_diarizer *)ctx;
    return ez_emb_embed_clips(d->emb, d->pool, pcm, n_clips, n, out);
}

/* The two models as the pipeline sees them. */
static int32_t models_of(eliza_diarizer *diarizer, ez_diar_models *m) {
    memset(m, 0, sizeof *m);
    m->sample_rate = ez_seg_sample_rate(diarizer->seg);
    m->chunk_samples = ez_seg_chunk_samples(diarizer->seg);
    m->n_frames = ez_seg_frames(diarizer->seg, m->chunk_samples);
    m->frame_step = ez_seg_frame_step(diarizer->seg);
    m->frame_duration = ez_seg_frame_duration(diarizer->seg);
    m->n_classes = ez_seg_n_classes(diarizer->seg);
    m->n_local = ez_seg_n_speakers(diarizer->seg);
    m->powerset = ez_seg_powerset(diarizer->seg);
    m->emb_dim = ez_emb_dim(diarizer->emb);
    m->segment = segment_fn;
    m->segment_span = segment_span_fn;
    m->span_quantum = ez_seg_offset_quantum(diarizer->seg);
    m->embed = embed_fn;
    m->embed_clips = embed_clips_fn;
    m->ctx = diarizer;
    if (ez_emb_sample_rate(diarizer->emb) != m->sample_rate)
        return ez_fail(ELIZA_E_UNSUPPORTED, "the segmentation model runs at %d Hz, the embedding model at %d Hz",
                       m->sample_rate, ez_emb_sample_rate(diarizer->emb));
    if (m->sample_rate <= 0 || m->chunk_samples <= 0 || m->n_frames <= 0 || !(m->frame_step > 0) || !m->powerset ||
        m->n_classes <= 0 || m->n_local <= 0 || m->emb_dim <= 0)
        return ez_fail(ELIZA_E_INTERNAL, "the diarization models report no usable geometry");
    return ELIZA_OK;
}

static int32_t diarize_entered(eliza_diarizer *diarizer, const float *pcm, size_t n_samples, int32_t sample_rate,
                               const eliza_diarize_options *options, eliza_diarize_turn **out_turns,
                               size_t *out_count) {
    eliza_diarize_options opt;
    ez_diar_models m;
    ez_diar_control ctl;
    ez_diar_speakers speakers;
    float *distance;
    ez_diar_voice_name *names;
    int32_t rc;

    if (!pcm && n_samples)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarize: pcm is NULL but n_samples is %zu", n_samples);
    if (sample_rate < MIN_RATE || sample_rate > MAX_RATE)
        return ez_fail(ELIZA_E_INVALID_ARG, "sample_rate %" PRId32 " Hz is outside %d..%d Hz", sample_rate,
                       MIN_RATE, MAX_RATE);
    if (!diarizer->seg || !diarizer->emb)
        return ez_fail(ELIZA_E_STATE, "eliza_diarize: the diarizer has no models");

    if ((rc = models_of(diarizer, &m))) return rc;
    if ((rc = read_options(options, (float)m.chunk_samples / (float)m.sample_rate, &opt))) return rc;
    for (size_t i = 0; i < n_samples; i++)
        if (!isfinite(pcm[i]))
            return ez_fail(ELIZA_E_INVALID_ARG, "sample %zu is %s", i, isnan(pcm[i]) ? "NaN" : "infinite");

    ez_atomic_int_store(&diarizer->cancel, 0);
    ctl.cancel = &diarizer->cancel;
    ctl.progress = &diarizer->progress;
    rc = ez_diar_run(&m, pcm, n_samples, sample_rate, &opt, &ctl, out_turns, out_count, &speakers);
    if (rc) return rc;
    if ((rc = ez_diar_voices_name(&diarizer->voices, &speakers, opt.identify_threshold, &names, &distance))) {
        ez_diar_speakers_free(&speakers);
        free(*out_turns);
        *out_turns = NULL;
        *out_count = 0;
        return rc;
    }
    ez_diar_speakers_free(&diarizer->last);
    free(diarizer->last_name);
    free(diarizer->last_distance);
    diarizer->last = speakers;
    diarizer->last_name = names;
    diarizer->last_distance = distance;
    diarizer->have_last = 1;
    return ELIZA_OK;
}


int32_t eliza_diarize(eliza_diarizer *diarizer, const float *pcm, size_t n_samples, int32_t sample_rate,
                      const eliza_diarize_options *options, eliza_diarize_turn **out_turns, size_t *out_count) {
    int32_t rc;

    ez_clear_error();
    if (out_turns) *out_turns = NULL;
    if (out_count) *out_count = 0;
    if (!diarizer || !out_turns || !out_count)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarize: NULL %s",
                       !diarizer ? "diarizer" : !out_turns ? "out_turns" : "out_count");
    /* Everything after this reads the handle: inside its one-call section. */
    if ((rc = enter(diarizer, "eliza_diarize"))) return rc;
    rc = diarize_entered(diarizer, pcm, n_samples, sample_rate, options, out_turns, out_count);
    leave(diarizer);
    return rc;
}

int32_t eliza_diarizer_centroids(eliza_diarizer *diarizer, float **out_centroids, size_t *out_count,
                                 size_t *out_dim) {
    size_t n;
    float *buf = NULL;
    int32_t rc;
    ez_clear_error();
    if (out_centroids) *out_centroids = NULL;
    if (out_count) *out_count = 0;
    if (out_dim) *out_dim = 0;
    if (!diarizer || !out_centroids || !out_count || !out_dim)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_centroids: a required pointer is NULL");
    if ((rc = enter(diarizer, "eliza_diarizer_centroids"))) return rc;
    if (!diarizer->have_last) {
        leave(diarizer);
        return ez_fail(ELIZA_E_STATE, "eliza_diarizer_centroids: no eliza_diarize() has succeeded on this diarizer");
    }
    n = (size_t)diarizer->last.n_speakers * (size_t)diarizer->last.dim;
    buf = (float *)malloc(sizeof(float) * EZ_MAX(n, (size_t)1));
    if (!buf) {
        leave(diarizer);
        return ez_fail(ELIZA_E_NOMEM, "eliza_diarizer_centroids: no memory for %zu floats", n);
    }
    if (n) memcpy(buf, diarizer->last.centroids, sizeof(float) * n);
    *out_centroids = buf;
    *out_count = (size_t)diarizer->last.n_speakers;
    *out_dim = (size_t)diarizer->last.dim;
    leave(diarizer);
    return ELIZA_OK;
}

void eliza_diarizer_cancel(eliza_diarizer *diarizer) {
    if (diarizer) ez_atomic_int_store(&diarizer->cancel, 1);
}

float eliza_diarizer_progress(const eliza_diarizer *diarizer) {
    if (!diarizer) return 0.0f;
    return (float)ez_atomic_int_load((ez_atomic_int *)&diarizer->progress) / 1e6f;
}

/* ---- enrolled voices (diar/identify.h keeps them) --------------------------------- */

/* A name fit for labels and RTTM: 1..EZ_DIAR_VOICE_NAME_MAX bytes of UTF-8
 * without spaces or control characters. */
static int32_t check_name(const char *name) {
    size_t len;
    if (!name) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_enroll: name is NULL");
    len = strlen(name);
    if (len == 0) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_enroll: the name is empty");
    if (len > EZ_DIAR_VOICE_NAME_MAX)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_enroll: the name is %zu bytes, at most %d", len,
                       EZ_DIAR_VOICE_NAME_MAX);
    if (ez_utf8_invalid_at(name, len) != len)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_enroll: the name is not valid UTF-8 (byte %zu)",
                       ez_utf8_invalid_at(name, len));
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)name[i] <= ' ' || (unsigned char)name[i] == 0x7f)
            return ez_fail(ELIZA_E_INVALID_ARG,
                           "eliza_diarizer_enroll: name '%s' has a space or control character at byte %zu", name, i);
    return ELIZA_OK;
}

static int32_t enroll_entered(eliza_diarizer *d, const char *name, const float *pcm, size_t n_samples,
                              int32_t sample_rate) {
    ez_diar_models m;
    int32_t rc;
    if ((rc = check_name(name))) return rc;
    if (!pcm && n_samples)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_enroll: pcm is NULL but n_samples is %zu", n_samples);
    if (sample_rate < MIN_RATE || sample_rate > MAX_RATE)
        return ez_fail(ELIZA_E_INVALID_ARG, "sample_rate %" PRId32 " Hz is outside %d..%d Hz", sample_rate,
                       MIN_RATE, MAX_RATE);
    for (size_t i = 0; i < n_samples; i++)
        if (!isfinite(pcm[i]))
            return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_enroll: sample %zu is %s", i,
                           isnan(pcm[i]) ? "NaN" : "infinite");
    if ((rc = models_of(d, &m))) return rc;
    return ez_diar_voices_enroll(&d->voices, &m, name, pcm, n_samples, sample_rate);
}

int32_t eliza_diarizer_enroll(eliza_diarizer *diarizer, const char *name, const float *pcm, size_t n_samples,
                              int32_t sample_rate) {
    int32_t rc;
    ez_clear_error();
    if (!diarizer) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_enroll: diarizer is NULL");
    if ((rc = enter(diarizer, "eliza_diarizer_enroll"))) return rc;
    rc = enroll_entered(diarizer, name, pcm, n_samples, sample_rate);
    leave(diarizer);
    return rc;
}

int32_t eliza_diarizer_unenroll(eliza_diarizer *diarizer, const char *name) {
    int32_t rc;
    ez_clear_error();
    if (!diarizer) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_unenroll: diarizer is NULL");
    if ((rc = enter(diarizer, "eliza_diarizer_unenroll"))) return rc;
    rc = ez_diar_voices_remove(&diarizer->voices, name);
    leave(diarizer);
    return rc;
}

int32_t eliza_diarizer_enrolled(eliza_diarizer *diarizer, char **out_names, size_t *out_count) {
    int32_t rc;
    ez_clear_error();
    if (out_names) *out_names = NULL;
    if (out_count) *out_count = 0;
    if (!diarizer || !out_names || !out_count)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_enrolled: a required pointer is NULL");
    if ((rc = enter(diarizer, "eliza_diarizer_enrolled"))) return rc;
    rc = ez_diar_voices_list(&diarizer->voices, out_names);
    if (rc == ELIZA_OK) *out_count = (size_t)diarizer->voices.n;
    leave(diarizer);
    return rc;
}

int32_t eliza_diarizer_speaker_name(eliza_diarizer *diarizer, int32_t speaker, char **out_name,
                                    float *out_distance) {
    ez_diar_voice_name label;
    char *buf;
    int32_t rc;
    ez_clear_error();
    if (out_name) *out_name = NULL;
    if (out_distance) *out_distance = NAN;
    if (!diarizer || !out_name)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_speaker_name: a required pointer is NULL");
    if ((rc = enter(diarizer, "eliza_diarizer_speaker_name"))) return rc;
    if (!diarizer->have_last) {
        rc = ez_fail(ELIZA_E_STATE, "eliza_diarizer_speaker_name: no eliza_diarize() has succeeded on this diarizer");
    } else if (speaker < 0 || speaker >= diarizer->last.n_speakers) {
        rc = ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarizer_speaker_name: speaker %" PRId32 " is outside 0..%d", speaker,
                     diarizer->last.n_speakers - 1);
    } else {
        if (diarizer->last_name[speaker][0])
            snprintf(label, sizeof label, "%s", diarizer->last_name[speaker]);
        else
            snprintf(label, sizeof label, "SPEAKER_%02d", (int)speaker);
        if (out_distance) *out_distance = diarizer->last_distance[speaker];
    }
    if (rc == ELIZA_OK) {
        buf = (char *)malloc(strlen(label) + 1);
        if (buf) {
            memcpy(buf, label, strlen(label) + 1);
            *out_name = buf;
        } else {
            rc = ez_fail(ELIZA_E_NOMEM, "eliza_diarizer_speaker_name: no memory");
        }
    }
    leave(diarizer);
    return rc;
}

/* ---- live streams ---------------------------------------------------------------- */

struct eliza_diar_stream {
    eliza_diarizer *d;
    ez_diar_models m;       /* what the stream's pipeline reads; m.ctx is d */
    ez_diar_stream *s;
};

int32_t eliza_diar_stream_open(eliza_diarizer *diarizer, int32_t sample_rate, const eliza_diarize_options *options,
                               eliza_diar_stream **out) {
    eliza_diarize_options opt;
    eliza_diar_stream *st;
    int32_t rc;
    ez_clear_error();
    if (out) *out = NULL;
    if (!diarizer || !out)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diar_stream_open: NULL %s", !diarizer ? "diarizer" : "out");
    if ((rc = enter(diarizer, "eliza_diar_stream_open"))) return rc;
    st = (eliza_diar_stream *)calloc(1, sizeof *st);
    if (!st) {
        rc = ez_fail(ELIZA_E_NOMEM, "out of memory for a diarization stream");
    } else if ((rc = models_of(diarizer, &st->m)) == ELIZA_OK &&
               (rc = read_options(options, (float)st->m.chunk_samples / (float)st->m.sample_rate, &opt)) ==
                   ELIZA_OK) {
        if (sample_rate != st->m.sample_rate)
            rc = ez_fail(ELIZA_E_UNSUPPORTED, "eliza_diar_stream_open: audio at %" PRId32
                         " Hz; a stream takes the models' rate, %d Hz (resample first)", sample_rate,
                         st->m.sample_rate);
        else
            rc = ez_diar_stream_create(&st->m, &opt, opt.latency, &st->s);
    }
    if (rc) {
        free(st);
        leave(diarizer);
        return rc;
    }
    st->d = diarizer;
    ez_atomic_int_add(&diarizer->refs, 1);
    leave(diarizer);
    *out = st;
    return ELIZA_OK;
}

int32_t eliza_diar_stream_push(eliza_diar_stream *stream, const float *pcm, size_t n_samples) {
    int32_t rc;
    ez_clear_error();
    if (!stream) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diar_stream_push: stream is NULL");
    if (!pcm && n_samples)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diar_stream_push: pcm is NULL but n_samples is %zu", n_samples);
    for (size_t i = 0; i < n_samples; i++)
        if (!isfinite(pcm[i]))
            return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diar_stream_push: sample %zu of the chunk is %s", i,
                           isnan(pcm[i]) ? "NaN" : "infinite");
    if ((rc = enter(stream->d, "eliza_diar_stream_push"))) return rc;
    rc = ez_diar_stream_push(stream->s, pcm, n_samples);
    leave(stream->d);
    return rc;
}

int32_t eliza_diar_stream_finish(eliza_diar_stream *stream) {
    int32_t rc;
    ez_clear_error();
    if (!stream) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diar_stream_finish: stream is NULL");
    if ((rc = enter(stream->d, "eliza_diar_stream_finish"))) return rc;
    rc = ez_diar_stream_finish(stream->s);
    leave(stream->d);
    return rc;
}

int32_t eliza_diar_stream_pull(eliza_diar_stream *stream, eliza_diarize_turn **out_turns, size_t *out_count) {
    ez_clear_error();
    if (out_turns) *out_turns = NULL;
    if (out_count) *out_count = 0;
    if (!stream || !out_turns || !out_count)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diar_stream_pull: a required pointer is NULL");
    return ez_diar_stream_pull(stream->s, out_turns, out_count);
}

double eliza_diar_stream_decided(eliza_diar_stream *stream) {
    return stream ? ez_diar_stream_decided(stream->s) : 0.0;
}

void eliza_diar_stream_close(eliza_diar_stream *stream) {
    if (!stream) return;
    ez_diar_stream_free(stream->s);
    release(stream->d);
    free(stream);
}
