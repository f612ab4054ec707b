/* The eliza_diarizer_* entry points that wrap the two models: open, close,
 * and the model calls for tests and inspection (segment, embed). The
 * pipeline call is in diarize_api.c. */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/error.h"
#include "core/platform.h"
#include "core/pool.h"
#include "diar/diarizer.h"


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

int32_t ez_diarizer_enter(eliza_diarizer *d, const char *call) {
    if (ez_atomic_i64_cas(&d->busy, DIAR_IDLE, DIAR_IN_CALL)) return ELIZA_OK;
    if (ez_atomic_i64_load(&d->busy) == DIAR_CLOSING)
        return ez_fail(ELIZA_E_STATE, "%s: the diarizer is being closed", call);
    return ez_fail(ELIZA_E_STATE, "%s: another call is running on this diarizer (one thread at a time)", call);
}

void ez_diarizer_leave(eliza_diarizer *d) { ez_atomic_i64_store(&d->busy, DIAR_IDLE); }

/* A call still running on another thread is cancelled and waited for:
 * freeing the models under it would crash that thread. */
void eliza_diarizer_close(eliza_diarizer *diarizer) {
    if (!diarizer) return;
    while (!ez_atomic_i64_cas(&diarizer->busy, DIAR_IDLE, DIAR_CLOSING)) {
        if (ez_atomic_i64_load(&diarizer->busy) == DIAR_CLOSING) return; /* closed twice at once: one frees */
        ez_atomic_int_store(&diarizer->cancel, 1);
        ez_sleep_ms(1);
    }
    ez_pool_destroy(diarizer->pool);
    ez_seg_free(diarizer->seg);
    ez_emb_free(diarizer->emb);
    free(diarizer);
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
    if ((rc = ez_diarizer_enter(diarizer, "eliza_diarizer_segment"))) return rc;
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
    ez_diarizer_leave(diarizer);
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
    if ((rc = ez_diarizer_enter(diarizer, "eliza_diarizer_embed"))) return rc;
    dim = ez_emb_dim(diarizer->emb);
    buf = (float *)malloc((size_t)dim * sizeof(float));
    rc = buf ? ez_emb_embed(diarizer->emb, diarizer->pool, pcm, n_samples, buf)
             : ez_fail(ELIZA_E_NOMEM, "eliza_diarizer_embed: no memory for the output");
    ez_diarizer_leave(diarizer);
    if (rc) {
        free(buf);
        return rc;
    }
    *out_embedding = buf;
    *out_dim = (size_t)dim;
    return ELIZA_OK;
}
