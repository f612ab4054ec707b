/* Voice blends: which voices and how much of each. */
#ifndef EZ_TTS_VOICES_H
#define EZ_TTS_VOICES_H

#include "core/common.h"
#include "tts/kokoro.h"

#define EZ_TTS_MAX_BLEND 64

typedef struct {
    int n;
    int index[EZ_TTS_MAX_BLEND];
    float weight[EZ_TTS_MAX_BLEND]; /* > 0, sum 1 */
} ez_tts_blend;

/* spec: "name" or "name:w,name:w,..." (weights finite, > 0; normalised),
 * or NULL for the model's first voice. ELIZA_E_NOT_FOUND for an unknown
 * name (the message lists the voices), ELIZA_E_INVALID_ARG for a bad weight,
 * more than EZ_TTS_MAX_BLEND voices, or voices of two languages. */
EZ_INTERNAL int32_t ez_tts_blend_parse(const ez_kokoro *m, const char *spec, ez_tts_blend *out);

/* style [EZ_KOKORO_STYLE_DIM] for an utterance of n_phonemes: row n - 1 of
 * each voice's pack, weighted. */
EZ_INTERNAL void ez_tts_blend_style(const ez_kokoro *m, const ez_tts_blend *b, int n_phonemes, float *style);

#endif /* EZ_TTS_VOICES_H */
