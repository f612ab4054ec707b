/* Kokoro-82M: the model (weights, voices, hyperparameters from one GGUF,
 * docs/kokoro.md) and its forward pass, phoneme ids -> 24 kHz audio.
 * G2P, chunking and streaming are tts/stream.c's, voice blending
 * tts/voices.c's; this module knows one chunk of at most 510 phonemes. */
#ifndef EZ_TTS_KOKORO_H
#define EZ_TTS_KOKORO_H

#include "core/atomic.h"
#include "core/common.h"
#include "core/pool.h"

typedef struct ez_kokoro ez_kokoro;

#define EZ_KOKORO_MAX_PHONEMES 510   /* per chunk, without the two pad ids */
#define EZ_KOKORO_STYLE_DIM 256      /* a voice row: [decoder style 128, predictor style 128] */

/* Loads and validates the GGUF (every tensor, its shape against the
 * hyperparameters). *out owns the model. */
EZ_INTERNAL int32_t ez_kokoro_load(const char *path, ez_kokoro **out);
EZ_INTERNAL void ez_kokoro_free(ez_kokoro *m);

EZ_INTERNAL int ez_kokoro_sample_rate(const ez_kokoro *m);
EZ_INTERNAL int ez_kokoro_voice_count(const ez_kokoro *m);
EZ_INTERNAL const char *ez_kokoro_voice_name(const ez_kokoro *m, int index);
/* Voice `index`'s language ("en-us", "en-gb", "es", "fr-fr", "hi", "it",
 * "pt-br", "ja", "zh", ...) and gender ("f", "m"), as the file lists them
 * (kokoro.voice_languages / kokoro.voice_genders); "" when it does not. */
EZ_INTERNAL const char *ez_kokoro_voice_language(const ez_kokoro *m, int index);
EZ_INTERNAL const char *ez_kokoro_voice_gender(const ez_kokoro *m, int index);
/* Row `row` of voice `index`'s pack [EZ_KOKORO_MAX_PHONEMES, EZ_KOKORO_STYLE_DIM]
 * (row n - 1 is the style for an utterance of n phonemes) as float32 into
 * style [EZ_KOKORO_STYLE_DIM]. 0, or -1 for an index or row out of range. */
EZ_INTERNAL int ez_kokoro_voice_style(const ez_kokoro *m, int index, int row, float *style);

/* The most phonemes one chunk of this model takes: 510, or fewer when its
 * ALBERT has fewer than 512 positions (two go to the pad ids). */
EZ_INTERNAL int ez_kokoro_max_phonemes(const ez_kokoro *m);

/* The id of one Kokoro phoneme symbol (a UTF-8 code point, `len` bytes at
 * sym), or -1 when the vocabulary has no such symbol. */
EZ_INTERNAL int ez_kokoro_symbol_id(const ez_kokoro *m, const char *sym, int len);

/* Per-phase wall times of the last ez_kokoro_forward, milliseconds. */
typedef struct {
    const char *name;
    double ms;
} ez_kokoro_phase;
#define EZ_KOKORO_MAX_PHASES 16
EZ_INTERNAL int ez_kokoro_profile(const ez_kokoro *m, ez_kokoro_phase *out, int max);

/* One chunk: ids [n] (1 <= n <= ez_kokoro_max_phonemes(m), without the pad ids
 * the model adds at both ends), style [256], speed > 0. no_noise zeroes the
 * random phase and noise of the harmonic source; otherwise they are drawn
 * from `seed`. *out_pcm (malloc'd) holds *out_n samples. `cancel`, if not
 * NULL, is polled (atomically: another thread sets it) between stages and
 * blocks: a nonzero value gives ELIZA_E_CANCELLED. */
EZ_INTERNAL int32_t ez_kokoro_forward(ez_kokoro *m, ez_pool *pool, const int32_t *ids, int n,
                                      const float *style, float speed, int no_noise,
                                      uint64_t seed, ez_atomic_int *cancel,
                                      float **out_pcm, size_t *out_n);

/* ---- test only: the stage outputs of one forward pass ------------------------------
 * tests/c/test_tts_kokoro.c compares them with kokoro's KModel stage by stage.
 * Each stage is a copy in PyTorch's layout with the batch dimension dropped
 * (d1 == 0 for a 1-D stage). */
#define EZ_KOKORO_MAX_STAGES 32
typedef struct {
    char name[32];
    float *data; /* malloc'd, d0 * (d1 ? d1 : 1) floats */
    int64_t d0, d1;
} ez_kokoro_stage;
typedef struct {
    ez_kokoro_stage stage[EZ_KOKORO_MAX_STAGES];
    int n;
    /* Optional inputs: the F0 and N curves to use in place of the predicted
     * ones (n_curve values each, which must be 2 * frames) once they are
     * recorded. The harmonic source turns F0's last-bit differences into
     * phase differences that a random-weight generator amplifies; fed the
     * reference's own curves, the generator can be held to float32 accuracy. */
    const float *f0_in, *n_in;
    int64_t n_curve;
} ez_kokoro_trace;

/* ez_kokoro_forward that also fills `trace` (if not NULL; release it with
 * ez_kokoro_trace_free, also after a failure). */
EZ_INTERNAL int32_t ez_kokoro_forward_trace(ez_kokoro *m, ez_pool *pool, const int32_t *ids, int n,
                                            const float *style, float speed, int no_noise,
                                            uint64_t seed, ez_atomic_int *cancel,
                                            ez_kokoro_trace *trace, float **out_pcm, size_t *out_n);
EZ_INTERNAL void ez_kokoro_trace_free(ez_kokoro_trace *trace);

#endif /* EZ_TTS_KOKORO_H */
