/* eliza_diarize: argument and option checks around the pipeline
 * (diar/pipeline.h), cancel and progress. */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/error.h"
#include "diar/diarizer.h"
#include "diar/pipeline.h"


#define MIN_RATE 8000
#define MAX_RATE 192000
#define MIN_STEP 0.1f          /* seconds; at most 101 windows see each frame */
#define MAX_SPEAKERS 1000
#define MAX_BATCH 64           /* windows of 640 KB each */

void eliza_diarize_default_options(eliza_diarize_options *options) {
    if (!options) return;
    memset(options, 0, sizeof *options);
    options->struct_size = (uint32_t)sizeof *options;
    options->step = 1.0f;
    options->threshold = 0.5f;
    options->batch_size = 8;
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

static int32_t diarize_entered(eliza_diarizer *diarizer, const float *pcm, size_t n_samples, int32_t sample_rate,
                               const eliza_diarize_options *options, eliza_diarize_turn **out_turns,
                               size_t *out_count) {
    eliza_diarize_options opt;
    ez_diar_models m;
    ez_diar_control ctl;
    int32_t rc;

    if (!pcm && n_samples)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_diarize: pcm is NULL but n_samples is %zu", n_samples);
    if (sample_rate < MIN_RATE || sample_rate > MAX_RATE)
        return ez_fail(ELIZA_E_INVALID_ARG, "sample_rate %" PRId32 " Hz is outside %d..%d Hz", sample_rate,
                       MIN_RATE, MAX_RATE);
    if (!diarizer->seg || !diarizer->emb)
        return ez_fail(ELIZA_E_STATE, "eliza_diarize: the diarizer has no models");

    memset(&m, 0, sizeof m);
    m.sample_rate = ez_seg_sample_rate(diarizer->seg);
    m.chunk_samples = ez_seg_chunk_samples(diarizer->seg);
    m.n_frames = ez_seg_frames(diarizer->seg, m.chunk_samples);
    m.frame_step = ez_seg_frame_step(diarizer->seg);
    m.frame_duration = ez_seg_frame_duration(diarizer->seg);
    m.n_classes = ez_seg_n_classes(diarizer->seg);
    m.n_local = ez_seg_n_speakers(diarizer->seg);
    m.powerset = ez_seg_powerset(diarizer->seg);
    m.emb_dim = ez_emb_dim(diarizer->emb);
    m.segment = segment_fn;
    m.segment_span = segment_span_fn;
    m.span_quantum = ez_seg_offset_quantum(diarizer->seg);
    m.embed = embed_fn;
    m.embed_clips = embed_clips_fn;
    m.ctx = diarizer;
    if (ez_emb_sample_rate(diarizer->emb) != m.sample_rate)
        return ez_fail(ELIZA_E_UNSUPPORTED, "the segmentation model runs at %d Hz, the embedding model at %d Hz",
                       m.sample_rate, ez_emb_sample_rate(diarizer->emb));
    if (m.sample_rate <= 0 || m.chunk_samples <= 0 || m.n_frames <= 0 || !(m.frame_step > 0) || !m.powerset ||
        m.n_classes <= 0 || m.n_local <= 0 || m.emb_dim <= 0)
        return ez_fail(ELIZA_E_INTERNAL, "the diarization models report no usable geometry");
    if ((rc = read_options(options, (float)m.chunk_samples / (float)m.sample_rate, &opt))) return rc;
    for (size_t i = 0; i < n_samples; i++)
        if (!isfinite(pcm[i]))
            return ez_fail(ELIZA_E_INVALID_ARG, "sample %zu is %s", i, isnan(pcm[i]) ? "NaN" : "infinite");

    ez_atomic_int_store(&diarizer->cancel, 0);
    ctl.cancel = &diarizer->cancel;
    ctl.progress = &diarizer->progress;
    return ez_diar_run(&m, pcm, n_samples, sample_rate, &opt, &ctl, out_turns, out_count);
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
    if ((rc = ez_diarizer_enter(diarizer, "eliza_diarize"))) return rc;
    rc = diarize_entered(diarizer, pcm, n_samples, sample_rate, options, out_turns, out_count);
    ez_diarizer_leave(diarizer);
    return rc;
}

void eliza_diarizer_cancel(eliza_diarizer *diarizer) {
    if (diarizer) ez_atomic_int_store(&diarizer->cancel, 1);
}

float eliza_diarizer_progress(const eliza_diarizer *diarizer) {
    if (!diarizer) return 0.0f;
    return (float)ez_atomic_int_load((ez_atomic_int *)&diarizer->progress) / 1e6f;
}
