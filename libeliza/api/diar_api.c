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
