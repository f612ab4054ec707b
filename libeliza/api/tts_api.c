/* The eliza_tts_* entry points: argument and struct_size checks, handle
 * lifetimes and error mapping. The behaviour (G2P per language, the
 * stream, its chunks and seams) is tts/stream.c's. */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/error.h"
#include "core/pool.h"
#include "core/strbuf.h"
#include "core/utf8.h"
#include "tts/kokoro.h"
#include "tts/stream.h"
#include "tts/voices.h"

#define MIN_SPEED 0.25f
#define MAX_SPEED 4.0f

struct eliza_tts {
    ez_kokoro *model;
    ez_pool *pool;
    ez_tts_frontend *fe;
    eliza_tts_stream *stream;    /* the open stream, if any */
    ez_tts_profile prof;         /* of the last synthesis */
};

struct eliza_tts_stream {
    eliza_tts *tts;              /* NULL once the model was closed under it */
    ez_tts_stream *st;
};

static int32_t check_utf8(const char *s, size_t n) {
    size_t i = ez_utf8_invalid_at(s, n);
    if (i < n) return ez_fail(ELIZA_E_INVALID_ARG, "the text is not valid UTF-8 (byte %" PRIu64 ")", (uint64_t)i);
    return ELIZA_OK;
}

/* ------------------------------------------------------------------------ */
/* Open / close / info                                                       */
/* ------------------------------------------------------------------------ */

void eliza_tts_default_params(eliza_tts_params *params) {
    if (!params) return;
    memset(params, 0, sizeof *params);
    params->struct_size = (uint32_t)sizeof *params;
    params->n_threads = 0;
    params->espeak_library = NULL;
    params->espeak_data = NULL;
    params->language = NULL;
}

void eliza_tts_default_config(eliza_tts_config *config) {
    if (!config) return;
    memset(config, 0, sizeof *config);
    config->struct_size = (uint32_t)sizeof *config;
    config->text = NULL;
    config->voice = NULL;
    config->speed = 1.0f;
    config->flags = 0;
    config->seed = 0;
}

void eliza_tts_close(eliza_tts *tts) {
    if (!tts) return;
    /* A stream left open must not reach a freed model: it fails with
     * ELIZA_E_STATE from here on. */
    if (tts->stream) tts->stream->tts = NULL;
    ez_tts_frontend_free(tts->fe);
    ez_pool_destroy(tts->pool);
    ez_kokoro_free(tts->model);
    free(tts);
}

int32_t eliza_tts_open(const char *path, const eliza_tts_params *params, eliza_tts **out) {
    eliza_tts_params p;
    eliza_tts *tts;
    int32_t rc;

    ez_clear_error();
    if (out) *out = NULL;
    if (!out) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_tts_open: out is NULL");
    if (!path) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_tts_open: path is NULL");
    eliza_tts_default_params(&p);
    if (params) {
        if (!EZ_FITS(params, eliza_tts_params, n_threads))
            return ez_fail(ELIZA_E_ABI, "eliza_tts_params.struct_size %" PRIu32 " is too small (%" PRIu64 ")",
                           params->struct_size, (uint64_t)sizeof(eliza_tts_params));
#define TAKE(f) \
    if (EZ_FITS(params, eliza_tts_params, f)) p.f = params->f
        TAKE(n_threads);
        TAKE(espeak_library);
        TAKE(espeak_data);
        TAKE(language);
#undef TAKE
    }
    if (p.n_threads < 0) return ez_fail(ELIZA_E_INVALID_ARG, "n_threads %d is negative", p.n_threads);

    tts = (eliza_tts *)calloc(1, sizeof *tts);
    if (!tts) return ez_fail(ELIZA_E_NOMEM, "out of memory opening '%s'", path);
    rc = ez_tts_frontend_create(p.espeak_library, p.espeak_data, p.language, path, &tts->fe);
    if (rc == ELIZA_OK) rc = ez_kokoro_load(path, &tts->model);
    if (rc == ELIZA_OK) {
        tts->pool = ez_pool_create(p.n_threads);
        if (!tts->pool) rc = ELIZA_E_NOMEM; /* ez_pool_create set the message */
    }
    if (rc) {
        eliza_tts_close(tts);
        return rc;
    }
    *out = tts;
    ez_clear_error(); /* lookups of optional keys may have left a message */
    return ELIZA_OK;
}

int32_t eliza_tts_sample_rate(const eliza_tts *tts) {
    ez_clear_error();
    if (!tts) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_tts_sample_rate: tts is NULL");
    return (int32_t)ez_kokoro_sample_rate(tts->model);
}

int32_t eliza_tts_voice_count(const eliza_tts *tts) {
    ez_clear_error();
    if (!tts) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_tts_voice_count: tts is NULL");
    return (int32_t)ez_kokoro_voice_count(tts->model);
}

const char *eliza_tts_voice_name(const eliza_tts *tts, int32_t index) {
    ez_clear_error();
    if (!tts || index < 0 || index >= ez_kokoro_voice_count(tts->model)) return NULL;
    return ez_kokoro_voice_name(tts->model, (int)index);
}

const char *eliza_tts_voice_language(const eliza_tts *tts, int32_t index) {
    ez_clear_error();
    if (!tts || index < 0 || index >= ez_kokoro_voice_count(tts->model)) return NULL;
    return ez_kokoro_voice_language(tts->model, (int)index);
}

const char *eliza_tts_voice_gender(const eliza_tts *tts, int32_t index) {
    ez_clear_error();
    if (!tts || index < 0 || index >= ez_kokoro_voice_count(tts->model)) return NULL;
    return ez_kokoro_voice_gender(tts->model, (int)index);
}

int32_t eliza_tts_profile_json(const eliza_tts *tts, char **out_json) {
    ez_strbuf sb = {0};
    char *json;

    ez_clear_error();
    if (out_json) *out_json = NULL;
    if (!tts || !out_json) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_tts_profile_json: NULL argument");
    ez_tts_profile_json(&tts->prof, &sb);
    json = ez_sb_take(&sb);
    if (!json) return ez_fail(ELIZA_E_NOMEM, "out of memory for the profile");
    *out_json = json;
    return ELIZA_OK;
}

/* ------------------------------------------------------------------------ */
/* Text -> phoneme lines                                                     */
/* ------------------------------------------------------------------------ */

int32_t eliza_tts_phonemize_language(eliza_tts *tts, const char *text, const char *language, char **out_phonemes) {
    size_t n;
    int32_t rc;

    ez_clear_error();
    if (out_phonemes) *out_phonemes = NULL;
    if (!tts || !text || !out_phonemes) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_tts_phonemize: NULL argument");
    if (!language) language = ez_tts_default_language(tts->fe, tts->model, 0);
    n = strlen(text);
    if ((rc = check_utf8(text, n))) return rc;
    return ez_tts_phonemize(tts->fe, tts->model, text, n, language, out_phonemes);
}

int32_t eliza_tts_phonemize(eliza_tts *tts, const char *text, char **out_phonemes) {
    return eliza_tts_phonemize_language(tts, text, NULL, out_phonemes);
}

/* ------------------------------------------------------------------------ */
/* Streams                                                                   */
/* ------------------------------------------------------------------------ */

static int32_t read_config(const eliza_tts_config *in, eliza_tts_config *c) {
    eliza_tts_default_config(c);
    if (!EZ_FITS(in, eliza_tts_config, text))
        return ez_fail(ELIZA_E_ABI, "eliza_tts_config.struct_size %" PRIu32 " is too small (%" PRIu64 ")",
                       in->struct_size, (uint64_t)sizeof(eliza_tts_config));
#define TAKE(f) \
    if (EZ_FITS(in, eliza_tts_config, f)) c->f = in->f
    TAKE(text);
    TAKE(voice);
    TAKE(speed);
    TAKE(flags);
    TAKE(seed);
    TAKE(language);
#undef TAKE
    if (!c->text) return ez_fail(ELIZA_E_INVALID_ARG, "the text is NULL");
    if (!isfinite(c->speed) || c->speed < MIN_SPEED || c->speed > MAX_SPEED)
        return ez_fail(ELIZA_E_INVALID_ARG, "speed %g is outside %g..%g", (double)c->speed, (double)MIN_SPEED,
                       (double)MAX_SPEED);
    if (c->flags & ~(uint32_t)(ELIZA_TTS_PHONEMES | ELIZA_TTS_NO_NOISE | ELIZA_TTS_WHOLE_LINES))
        return ez_fail(ELIZA_E_INVALID_ARG, "unknown flags 0x%" PRIx32, c->flags);
    return ELIZA_OK;
}

int32_t eliza_tts_stream_open(eliza_tts *tts, const eliza_tts_config *config, eliza_tts_stream **out) {
    eliza_tts_config c;
    ez_tts_stream_config sc;
    eliza_tts_stream *s;
    int32_t rc;

    ez_clear_error();
    if (out) *out = NULL;
    if (!tts || !config || !out) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_tts_stream_open: NULL argument");
    if ((rc = read_config(config, &c))) return rc;
    if (tts->stream) return ez_fail(ELIZA_E_STATE, "a stream of this model is already open");

    memset(&sc, 0, sizeof sc);
    sc.text = c.text;
    sc.text_len = strlen(c.text);
    sc.phoneme_input = (c.flags & ELIZA_TTS_PHONEMES) != 0;
    sc.no_noise = (c.flags & ELIZA_TTS_NO_NOISE) != 0;
    sc.whole_lines = (c.flags & ELIZA_TTS_WHOLE_LINES) != 0;
    sc.language = c.language;
    sc.speed = c.speed;
    sc.seed = c.seed;
    if ((rc = check_utf8(c.text, sc.text_len)) || (rc = ez_tts_blend_parse(tts->model, c.voice, &sc.voice))) return rc;
    s = (eliza_tts_stream *)calloc(1, sizeof *s);
    if (!s) return ez_fail(ELIZA_E_NOMEM, "out of memory for a stream");
    if ((rc = ez_tts_stream_open(tts->model, tts->pool, tts->fe, &tts->prof, &sc, &s->st))) {
        free(s);
        return rc;
    }
    s->tts = tts;
    tts->stream = s;
    *out = s;
    return ELIZA_OK;
}

void eliza_tts_stream_cancel(eliza_tts_stream *stream) {
    if (stream) ez_tts_stream_cancel(stream->st);
}

void eliza_tts_stream_close(eliza_tts_stream *stream) {
    if (!stream) return;
    if (stream->tts) {
        ez_tts_stream_log_profile(stream->st);
        stream->tts->stream = NULL;
    }
    ez_tts_stream_free(stream->st);
    free(stream);
}

static void set_chunk(eliza_tts_chunk *chunk, uint32_t index, const float *pcm, size_t n, const char *phonemes) {
    if (EZ_FITS(chunk, eliza_tts_chunk, index)) chunk->index = index;
    if (EZ_FITS(chunk, eliza_tts_chunk, pcm)) chunk->pcm = pcm;
    if (EZ_FITS(chunk, eliza_tts_chunk, n_samples)) chunk->n_samples = n;
    if (EZ_FITS(chunk, eliza_tts_chunk, phonemes)) chunk->phonemes = phonemes;
}

int32_t eliza_tts_stream_next(eliza_tts_stream *s, eliza_tts_chunk *chunk) {
    ez_tts_audio a;
    int32_t rc;

    ez_clear_error();
    if (!s || !chunk) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_tts_stream_next: NULL argument");
    if (!EZ_FITS(chunk, eliza_tts_chunk, index))
        return ez_fail(ELIZA_E_ABI, "eliza_tts_chunk.struct_size %" PRIu32 " is too small (%" PRIu64 ")",
                       chunk->struct_size, (uint64_t)sizeof(eliza_tts_chunk));
    if (!s->tts) {
        set_chunk(chunk, 0, NULL, 0, "");
        return ez_fail(ELIZA_E_STATE, "the stream's model was closed");
    }
    rc = ez_tts_stream_next(s->st, &a);
    set_chunk(chunk, a.index, a.pcm, a.n_samples, a.phonemes);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Whole synthesis                                                           */
/* ------------------------------------------------------------------------ */

int32_t eliza_tts_synthesize(eliza_tts *tts, const eliza_tts_config *config, float **out_pcm, size_t *out_count) {
    eliza_tts_stream *s = NULL;
    eliza_tts_config whole;
    eliza_tts_chunk chunk;
    float *pcm = NULL;
    size_t n = 0, cap = 0;
    int32_t rc;

    ez_clear_error();
    if (out_pcm) *out_pcm = NULL;
    if (out_count) *out_count = 0;
    if (!out_pcm || !out_count) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_tts_synthesize: NULL argument");
    if (!config) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_tts_synthesize: NULL argument");
    /* No first audio to hurry: whole lines, as KPipeline speaks them. */
    if ((rc = read_config(config, &whole))) return rc;
    whole.flags |= ELIZA_TTS_WHOLE_LINES;
    rc = eliza_tts_stream_open(tts, &whole, &s);
    memset(&chunk, 0, sizeof chunk);
    chunk.struct_size = (uint32_t)sizeof chunk;
    while (rc == ELIZA_OK && (rc = eliza_tts_stream_next(s, &chunk)) == ELIZA_OK) {
        if (n + chunk.n_samples > cap) {
            size_t want = EZ_MAX(cap * 2, n + chunk.n_samples);
            float *p = (want <= SIZE_MAX / sizeof(float)) ? (float *)realloc(pcm, want * sizeof(float)) : NULL;
            if (!p) {
                rc = ez_fail(ELIZA_E_NOMEM, "out of memory for %" PRIu64 " samples", (uint64_t)want);
                break;
            }
            pcm = p;
            cap = want;
        }
        if (chunk.n_samples) memcpy(pcm + n, chunk.pcm, chunk.n_samples * sizeof(float));
        n += chunk.n_samples;
    }
    if (rc == ELIZA_DONE) rc = ELIZA_OK;
    if (rc == ELIZA_OK && !pcm) {
        /* A real (empty) array, so the host can always eliza_free it. */
        pcm = (float *)malloc(sizeof(float));
        if (!pcm) rc = ez_fail(ELIZA_E_NOMEM, "out of memory for the audio");
    }
    eliza_tts_stream_close(s);
    if (rc) {
        free(pcm);
        return rc;
    }
    *out_pcm = pcm;
    *out_count = n;
    return ELIZA_OK;
}
