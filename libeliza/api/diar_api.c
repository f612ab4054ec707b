/* The eliza_diarizer_* entry points. Placeholder until the diarization
 * engine lands (issue #5): every call that would need the models reports
 * ELIZA_E_UNSUPPORTED. */
#include <string.h>

#include "core/common.h"
#include "core/error.h"

void eliza_diarizer_default_params(eliza_diarizer_params *params) {
    if (!params) return;
    memset(params, 0, sizeof *params);
    params->struct_size = (uint32_t)sizeof *params;
}

void eliza_diarize_default_options(eliza_diarize_options *options) {
    if (!options) return;
    memset(options, 0, sizeof *options);
    options->struct_size = (uint32_t)sizeof *options;
    options->step = 1.0f;
    options->threshold = 0.7f;
    options->batch_size = 8;
}

static int32_t not_built(void) {
    return ez_fail(ELIZA_E_UNSUPPORTED, "diarization is not in this build yet (issue #5)");
}

int32_t eliza_diarizer_open(const char *segmentation_path, const char *embedding_path,
                            const eliza_diarizer_params *params, eliza_diarizer **out) {
    (void)segmentation_path, (void)embedding_path, (void)params;
    if (out) *out = NULL;
    return not_built();
}

void eliza_diarizer_close(eliza_diarizer *diarizer) { (void)diarizer; }

int32_t eliza_diarize(eliza_diarizer *diarizer, const float *pcm, size_t n_samples,
                      int32_t sample_rate, const eliza_diarize_options *options,
                      eliza_diarize_turn **out_turns, size_t *out_count) {
    (void)diarizer, (void)pcm, (void)n_samples, (void)sample_rate, (void)options;
    if (out_turns) *out_turns = NULL;
    if (out_count) *out_count = 0;
    return not_built();
}

void eliza_diarizer_cancel(eliza_diarizer *diarizer) { (void)diarizer; }
float eliza_diarizer_progress(const eliza_diarizer *diarizer) { (void)diarizer; return 0.0f; }

int32_t eliza_diarizer_segment(eliza_diarizer *diarizer, const float *pcm, size_t n_chunks,
                               size_t chunk_samples, float **out_logprobs, size_t *out_frames,
                               size_t *out_classes) {
    (void)diarizer, (void)pcm, (void)n_chunks, (void)chunk_samples;
    if (out_logprobs) *out_logprobs = NULL;
    if (out_frames) *out_frames = 0;
    if (out_classes) *out_classes = 0;
    return not_built();
}

int32_t eliza_diarizer_embed(eliza_diarizer *diarizer, const float *pcm, size_t n_samples,
                             float **out_embedding, size_t *out_dim) {
    (void)diarizer, (void)pcm, (void)n_samples;
    if (out_embedding) *out_embedding = NULL;
    if (out_dim) *out_dim = 0;
    return not_built();
}
