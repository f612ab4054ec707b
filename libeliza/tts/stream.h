/* Text to audio, one chunk at a time (tts/stream.c): the text front end
 * (a G2P per language, opened on first use), phonemizing, and the pull
 * stream with its states, its chunking, its seams and its profile.
 * api/tts_api.c checks the arguments and owns the handles around these. */
#ifndef EZ_TTS_STREAM_H
#define EZ_TTS_STREAM_H

#include "core/atomic.h"
#include "core/common.h"
#include "core/pool.h"
#include "core/strbuf.h"
#include "tts/g2p.h"
#include "tts/kokoro.h"
#include "tts/voices.h"

/* ---- profile ------------------------------------------------------------------------ */

/* Phases of a profile: the model's, plus g2p and total. */
#define EZ_TTS_MAX_PROFILE (EZ_KOKORO_MAX_PHASES + 2)

/* Wall time per phase, summed over a stream's chunks, milliseconds. */
typedef struct {
    int n;
    const char *name[EZ_TTS_MAX_PROFILE]; /* static strings (the model's phase names) */
    double ms[EZ_TTS_MAX_PROFILE];
} ez_tts_profile;

/* {"phase": ms, ...} appended to sb. */
EZ_INTERNAL void ez_tts_profile_json(const ez_tts_profile *p, ez_strbuf *sb);

/* ---- the text front end ----------------------------------------------------------------- */

typedef struct ez_tts_frontend ez_tts_frontend;

/* The front end of the model file `model_path` (the English lexicon lies
 * beside it): espeak-ng from `espeak_library` and `espeak_data` (NULL: the
 * defaults of ez_g2p_open), G2P language `language` unless a call names one
 * (NULL: the voice's). The strings are copied. */
EZ_INTERNAL int32_t ez_tts_frontend_create(const char *espeak_library, const char *espeak_data, const char *language,
                                           const char *model_path, ez_tts_frontend **out);
EZ_INTERNAL void ez_tts_frontend_free(ez_tts_frontend *fe);

/* The G2P language for text in voice `voice` of m when the caller names
 * none: the front end's, else the voice's, else "en-us". */
EZ_INTERNAL const char *ez_tts_default_language(const ez_tts_frontend *fe, const ez_kokoro *m, int voice);

/* The phoneme lines synthesis would speak for valid UTF-8 text[0, n) in
 * `language`, '\n' between them: cut to the model's limit, without the
 * lines that are only punctuation. *out is malloc'd. ELIZA_E_UNSUPPORTED for
 * a language libeliza has no G2P for. */
EZ_INTERNAL int32_t ez_tts_phonemize(ez_tts_frontend *fe, const ez_kokoro *m, const char *text, size_t n,
                                     const char *language, char **out);

/* ---- the stream --------------------------------------------------------------------- */

typedef struct ez_tts_stream ez_tts_stream;

typedef struct {
    const char *text;     /* valid UTF-8, copied */
    size_t text_len;
    int phoneme_input;    /* text is Kokoro phonemes */
    const char *language; /* G2P language; NULL: ez_tts_default_language */
    ez_tts_blend voice;
    float speed;          /* > 0 */
    int no_noise;
    int whole_lines;      /* no early first cut */
    uint64_t seed;
} ez_tts_stream_config;

/* One chunk of a stream; pcm and phonemes stay valid until the next call
 * on the stream. */
typedef struct {
    uint32_t index;
    const float *pcm;
    size_t n_samples;
    const char *phonemes; /* NUL-terminated */
} ez_tts_audio;

/* A stream of `config` over model m, its pool and front end (which must
 * outlive the stream's use), adding its phase times to *prof (cleared
 * here). Text in a language with no G2P fails here, before any audio. */
EZ_INTERNAL int32_t ez_tts_stream_open(ez_kokoro *m, ez_pool *pool, ez_tts_frontend *fe, ez_tts_profile *prof,
                                       const ez_tts_stream_config *config, ez_tts_stream **out);

/* The next chunk into *out: ELIZA_OK, ELIZA_DONE once the text is spoken
 * (and on every later call), or an error, which the stream then repeats
 * (ELIZA_E_CANCELLED after ez_tts_stream_cancel). */
EZ_INTERNAL int32_t ez_tts_stream_next(ez_tts_stream *s, ez_tts_audio *out);

/* Asks the stream to stop: its running or next ez_tts_stream_next gives
 * ELIZA_E_CANCELLED. Any thread may call it. */
EZ_INTERNAL void ez_tts_stream_cancel(ez_tts_stream *s);

/* ELIZA_PROFILE=1: logs the stream's chunks, audio and phase times (one
 * INFO line). The model and the profile must still be alive. */
EZ_INTERNAL void ez_tts_stream_log_profile(const ez_tts_stream *s);

/* Frees the stream's own memory only (its model may be gone). */
EZ_INTERNAL void ez_tts_stream_free(ez_tts_stream *s);

#endif /* EZ_TTS_STREAM_H */
