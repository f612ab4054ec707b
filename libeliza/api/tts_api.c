/* The eliza_tts_* entry points. Placeholder until the Kokoro engine lands
 * (issue #4): every call that would need the model reports
 * ELIZA_E_UNSUPPORTED. */
#include <string.h>

#include "core/common.h"
#include "core/error.h"

void eliza_tts_default_params(eliza_tts_params *params) {
    if (!params) return;
    memset(params, 0, sizeof *params);
    params->struct_size = (uint32_t)sizeof *params;
}

void eliza_tts_default_config(eliza_tts_config *config) {
    if (!config) return;
    memset(config, 0, sizeof *config);
    config->struct_size = (uint32_t)sizeof *config;
    config->speed = 1.0f;
}

static int32_t not_built(void) {
    return ez_fail(ELIZA_E_UNSUPPORTED, "text-to-speech is not in this build yet (issue #4)");
}

int32_t eliza_tts_open(const char *path, const eliza_tts_params *params, eliza_tts **out) {
    (void)path, (void)params;
    if (out) *out = NULL;
    return not_built();
}

void eliza_tts_close(eliza_tts *tts) { (void)tts; }
int32_t eliza_tts_sample_rate(const eliza_tts *tts) { (void)tts; return 0; }
int32_t eliza_tts_voice_count(const eliza_tts *tts) { (void)tts; return 0; }
const char *eliza_tts_voice_name(const eliza_tts *tts, int32_t index) { (void)tts, (void)index; return NULL; }

int32_t eliza_tts_phonemize(eliza_tts *tts, const char *text, char **out_phonemes) {
    (void)tts, (void)text;
    if (out_phonemes) *out_phonemes = NULL;
    return not_built();
}

int32_t eliza_tts_synthesize(eliza_tts *tts, const eliza_tts_config *config, float **out_pcm,
                             size_t *out_count) {
    (void)tts, (void)config;
    if (out_pcm) *out_pcm = NULL;
    if (out_count) *out_count = 0;
    return not_built();
}

int32_t eliza_tts_stream_open(eliza_tts *tts, const eliza_tts_config *config, eliza_tts_stream **out) {
    (void)tts, (void)config;
    if (out) *out = NULL;
    return not_built();
}

int32_t eliza_tts_stream_next(eliza_tts_stream *stream, eliza_tts_chunk *chunk) {
    (void)stream, (void)chunk;
    return not_built();
}

void eliza_tts_stream_cancel(eliza_tts_stream *stream) { (void)stream; }
void eliza_tts_stream_close(eliza_tts_stream *stream) { (void)stream; }

int32_t eliza_tts_profile_json(const eliza_tts *tts, char **out_json) {
    (void)tts;
    if (out_json) *out_json = NULL;
    return not_built();
}
