/* eliza_diarize: the pipeline entry point, its options, cancel and
 * progress. Placeholder until the pipeline lands (issue #5). */
#include <string.h>

#include "core/common.h"
#include "core/error.h"

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

