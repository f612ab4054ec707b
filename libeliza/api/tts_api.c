/* The eliza_tts_* entry points: argument and struct_size checks, handle
 * lifetimes, text -> phoneme lines (G2P, opened lazily), and the pull
 * stream. The model itself is tts/kokoro.c, the G2P tts/g2p.c, voice specs
 * and blending tts/voices.c, chunking to the model's 510 phonemes (fewer
 * for a model with a shorter ALBERT) tts/chunk.c.
 *
 * Chunks follow kokoro 0.9.4's KPipeline: the text is cut at line breaks
 * (its split_pattern r'\n+'), G2P splits a line into sentences, a chunk's
 * style is row len(phonemes) - 1 of the voice pack, symbols outside the
 * vocabulary are dropped (KModel.forward), and a whole synthesis is the
 * chunks' audio back to back with nothing between them (kokoro's CLI).
 * Two departures, for a stream's latency and its seams: the first chunk of
 * a long line ends at its first clause boundary (tts/chunk.c), and every
 * seam fades out and in over a few milliseconds (SEAM_FADE_MS). */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomic.h"
#include "core/common.h"
#include "core/error.h"
#include "core/platform.h"
#include "core/pool.h"
#include "core/strbuf.h"
#include "core/utf8.h"
#include "tts/g2p.h"
#include "tts/g2p_en.h"
#include "tts/kokoro.h"
#include "tts/chunk.h"
#include "tts/voices.h"

#define MIN_SPEED 0.25f
#define MAX_SPEED 4.0f
/* Each chunk fades in (all but the first) and out over SEAM_FADE_MS with a
 * raised cosine, so chunks join at silence, without a click. */
#define SEAM_FADE_MS 4
/* G2P languages open at once on one model (each an espeak-ng voice). */
#define MAX_G2P 16
/* Phases of the profile: the model's, plus g2p and total. */
#define MAX_PROFILE (EZ_KOKORO_MAX_PHASES + 2)

typedef struct {
    int n;
    const char *name[MAX_PROFILE]; /* static strings (the model's phase names) */
    double ms[MAX_PROFILE];
} profile;

struct eliza_tts {
    ez_kokoro *model;
    ez_pool *pool;
    struct {
        char *language;
        ez_g2p *g2p;
    } g2p[MAX_G2P];              /* one per language, opened on its first text */
    int n_g2p;
    char *espeak_library;        /* copies of the params (NULL = default) */
    char *espeak_data;
    char *language;
    char *path;                  /* the model file (the English lexicon lies beside it) */
    eliza_tts_stream *stream;    /* the open stream, if any */
    profile prof;                /* of the last synthesis */
};

/* ------------------------------------------------------------------------ */
/* UTF-8                                                                     */
/* ------------------------------------------------------------------------ */

static int32_t check_utf8(const char *s, size_t n) {
    size_t i = ez_utf8_invalid_at(s, n);
    if (i < n) return ez_fail(ELIZA_E_INVALID_ARG, "the text is not valid UTF-8 (byte %" PRIu64 ")", (uint64_t)i);
    return ELIZA_OK;
}

/* ------------------------------------------------------------------------ */
/* Profile                                                                   */
/* ------------------------------------------------------------------------ */

static void profile_add(profile *p, const char *name, double ms) {
    int i;
    for (i = 0; i < p->n; i++)
        if (strcmp(p->name[i], name) == 0) break;
    if (i == p->n) {
        if (p->n == MAX_PROFILE) return;
        p->name[p->n] = name;
        p->ms[p->n++] = 0.0;
    }
    p->ms[i] += ms;
}

static void profile_add_model(profile *p, const ez_kokoro *m) {
    ez_kokoro_phase phases[EZ_KOKORO_MAX_PHASES];
    int n = ez_kokoro_profile(m, phases, EZ_KOKORO_MAX_PHASES);
    for (int i = 0; i < n; i++)
        if (phases[i].name) profile_add(p, phases[i].name, phases[i].ms);
}

/* ELIZA_PROFILE=1: one INFO line per synthesis with its phase times. */
static void log_profile(const profile *p, uint32_t n_chunks, uint64_t n_samples, int sample_rate) {
    ez_strbuf sb = {0};
    char *line;
    if (!ez_env_flag("ELIZA_PROFILE")) return;
    ez_sb_printf(&sb, "tts profile: %" PRIu32 " chunks, %.2f s of audio; ms:", n_chunks,
                 sample_rate > 0 ? (double)n_samples / sample_rate : 0.0);
    for (int i = 0; i < p->n; i++) ez_sb_printf(&sb, " %s %.1f", p->name[i], p->ms[i]);
    line = ez_sb_take(&sb);
    if (line) ez_log(ELIZA_LOG_INFO, "%s", line);
    free(line);
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

static void detach_stream(eliza_tts_stream *s);

void eliza_tts_close(eliza_tts *tts) {
    if (!tts) return;
    /* A stream left open must not reach a freed model: it fails with
     * ELIZA_E_STATE from here on. */
    if (tts->stream) detach_stream(tts->stream);
    for (int i = 0; i < tts->n_g2p; i++) {
        ez_g2p_close(tts->g2p[i].g2p);
        free(tts->g2p[i].language);
    }
    ez_pool_destroy(tts->pool);
    ez_kokoro_free(tts->model);
    free(tts->espeak_library);
    free(tts->espeak_data);
    free(tts->language);
    free(tts->path);
    free(tts);
}

static int32_t copy_string(const char *s, char **out) {
    size_t n;
    *out = NULL;
    if (!s) return ELIZA_OK;
    n = strlen(s);
    *out = (char *)malloc(n + 1);
    if (!*out) return ez_fail(ELIZA_E_NOMEM, "out of memory copying a %" PRIu64 "-byte string", (uint64_t)n);
    memcpy(*out, s, n + 1);
    return ELIZA_OK;
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
    rc = copy_string(p.espeak_library, &tts->espeak_library);
    if (rc == ELIZA_OK) rc = copy_string(p.espeak_data, &tts->espeak_data);
    if (rc == ELIZA_OK) rc = copy_string(p.language, &tts->language);
    if (rc == ELIZA_OK) rc = copy_string(path, &tts->path);
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
    ez_sb_puts(&sb, "{");
    for (int i = 0; i < tts->prof.n; i++) {
        if (i) ez_sb_puts(&sb, ", ");
        ez_sb_json_str(&sb, tts->prof.name[i], strlen(tts->prof.name[i]));
        ez_sb_puts(&sb, ": ");
        ez_sb_json_num(&sb, tts->prof.ms[i]);
    }
    ez_sb_puts(&sb, "}");
    json = ez_sb_take(&sb);
    if (!json) return ez_fail(ELIZA_E_NOMEM, "out of memory for the profile");
    *out_json = json;
    return ELIZA_OK;
}

/* ------------------------------------------------------------------------ */
/* Text -> phoneme lines                                                     */
/* ------------------------------------------------------------------------ */

/* Kokoro's languages whose G2P is not espeak-ng (misaki's ja and zh
 * modules): libeliza has none, so their text must come as phonemes. */
static const char *no_g2p_name(const char *language) {
    static const struct {
        const char *tag, *name;
    } k[] = {{"ja", "Japanese"}, {"zh", "Mandarin Chinese"}, {"cmn", "Mandarin Chinese"}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        size_t n = strlen(k[i].tag);
        if (strncmp(language, k[i].tag, n) == 0 && (language[n] == '\0' || language[n] == '-')) return k[i].name;
    }
    return NULL;
}

/* The G2P language when the caller names none: the params', else the
 * voice's (the first voice of a blend: they share one), else "en-us". */
static const char *default_language(const eliza_tts *tts, int voice) {
    const char *v = ez_kokoro_voice_language(tts->model, voice);
    if (tts->language) return tts->language;
    return v && *v ? v : "en-us";
}

/* The G2P of `language`, opened on first use. */
static int32_t need_g2p(eliza_tts *tts, const char *language, ez_g2p **out) {
    const char *no_g2p = no_g2p_name(language);
    int32_t rc;
    *out = NULL;
    if (no_g2p)
        return ez_fail(ELIZA_E_UNSUPPORTED, "libeliza has no G2P for %s ('%s'): pass Kokoro phonemes "
                       "(ELIZA_TTS_PHONEMES; misaki's %s G2P makes them), or choose another language", no_g2p,
                       language, strcmp(no_g2p, "Japanese") == 0 ? "ja" : "zh");
    for (int i = 0; i < tts->n_g2p; i++)
        if (strcmp(tts->g2p[i].language, language) == 0) {
            *out = tts->g2p[i].g2p;
            return ELIZA_OK;
        }
    if (tts->n_g2p == MAX_G2P)
        return ez_fail(ELIZA_E_INVALID_ARG, "G2P language '%.64s': this model already has %d languages open", language,
                       MAX_G2P);
    if ((rc = copy_string(language, &tts->g2p[tts->n_g2p].language))) return rc;
    /* "espeak:en-us": espeak-ng alone, as misaki's EspeakG2P; else English
     * through misaki's en.G2P (tts/g2p_en.c) */
    if (strncmp(language, "espeak:", 7) == 0) {
        rc = ez_g2p_open(tts->espeak_library, tts->espeak_data, language + 7, &tts->g2p[tts->n_g2p].g2p);
    } else {
        rc = ez_g2p_open(tts->espeak_library, tts->espeak_data, language, &tts->g2p[tts->n_g2p].g2p);
        if (rc == ELIZA_OK && (rc = ez_g2p_en_attach(tts->g2p[tts->n_g2p].g2p, language, tts->path)) < 0)
            ez_g2p_close(tts->g2p[tts->n_g2p].g2p);
    }
    if (rc) {
        free(tts->g2p[tts->n_g2p].language);
        return rc;
    }
    *out = tts->g2p[tts->n_g2p++].g2p;
    return ELIZA_OK;
}

int32_t eliza_tts_phonemize_language(eliza_tts *tts, const char *text, const char *language, char **out_phonemes) {
    ez_strbuf raw = {0}, sb = {0};
    size_t n, pos = 0, b, e;
    int32_t rc;
    int32_t ids[EZ_KOKORO_MAX_PHONEMES];
    int n_cp;
    char *res;
    ez_g2p *g2p = NULL;

    ez_clear_error();
    if (out_phonemes) *out_phonemes = NULL;
    if (!tts || !text || !out_phonemes) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_tts_phonemize: NULL argument");
    if (!language) language = default_language(tts, 0);
    n = strlen(text);
    if ((rc = check_utf8(text, n))) return rc;
    while (rc == ELIZA_OK && ez_tts_next_text_piece(text, n, &pos, &b, &e)) {
        if (ez_tts_is_blank(text, b, e)) continue;
        rc = need_g2p(tts, language, &g2p);
        if (rc == ELIZA_OK)
            rc = ez_g2p_phonemize(g2p, text + b, e - b, ez_kokoro_max_phonemes(tts->model), &raw);
        if (rc == ELIZA_OK) ez_sb_puts(&raw, "\n");
    }
    /* The lines synthesis would speak: cut to the model's limit, without the
     * ones that are only punctuation. */
    pos = 0;
    while (rc == ELIZA_OK && raw.len &&
           ez_tts_next_phoneme_chunk(raw.data, raw.len, ez_kokoro_max_phonemes(tts->model), &pos, &b, &e, &n_cp)) {
        int speaks;
        ez_tts_phoneme_ids(tts->model, raw.data + b, e - b, ids, &speaks);
        if (!speaks) continue;
        if (sb.len) ez_sb_puts(&sb, "\n");
        ez_sb_append(&sb, raw.data + b, e - b);
    }
    ez_sb_free(&raw);
    if (rc) {
        ez_sb_free(&sb);
        return rc;
    }
    res = ez_sb_take(&sb);
    if (!res) return ez_fail(ELIZA_E_NOMEM, "out of memory for the phonemes");
    *out_phonemes = res;
    return ELIZA_OK;
}

int32_t eliza_tts_phonemize(eliza_tts *tts, const char *text, char **out_phonemes) {
    return eliza_tts_phonemize_language(tts, text, NULL, out_phonemes);
}

/* ------------------------------------------------------------------------ */
/* Streams                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum { STREAM_RUNNING, STREAM_DONE, STREAM_FAILED } stream_state;

struct eliza_tts_stream {
    eliza_tts *tts;            /* NULL once the model was closed under it */
    ez_atomic_int cancel;
    stream_state state;
    int32_t failure;           /* the code STREAM_FAILED repeats */

    char *text;                /* copy of config->text */
    size_t text_len, text_pos; /* text input: what the G2P has not seen yet */
    int phoneme_input;
    char *language;            /* G2P language (text input) */
    ez_tts_blend voice;
    float speed;
    int no_noise;
    uint64_t seed;

    ez_strbuf lines;           /* phoneme lines not spoken yet (text input) */
    size_t lines_pos;

    uint32_t index;            /* of the next chunk */
    uint64_t n_samples;        /* so far */
    char *phonemes;            /* of the last chunk, NUL-terminated */
    size_t phonemes_cap;
    float *pcm;                /* of the last chunk */
};

static void detach_stream(eliza_tts_stream *s) { s->tts = NULL; }

static void stream_free(eliza_tts_stream *s) {
    if (!s) return;
    free(s->text);
    free(s->language);
    ez_sb_free(&s->lines);
    free(s->phonemes);
    free(s->pcm);
    free(s);
}

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
    if (c->flags & ~(uint32_t)(ELIZA_TTS_PHONEMES | ELIZA_TTS_NO_NOISE))
        return ez_fail(ELIZA_E_INVALID_ARG, "unknown flags 0x%" PRIx32, c->flags);
    return ELIZA_OK;
}

int32_t eliza_tts_stream_open(eliza_tts *tts, const eliza_tts_config *config, eliza_tts_stream **out) {
    eliza_tts_config c;
    eliza_tts_stream *s;
    int32_t rc;

    ez_clear_error();
    if (out) *out = NULL;
    if (!tts || !config || !out) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_tts_stream_open: NULL argument");
    if ((rc = read_config(config, &c))) return rc;
    if (tts->stream) return ez_fail(ELIZA_E_STATE, "a stream of this model is already open");

    s = (eliza_tts_stream *)calloc(1, sizeof *s);
    if (!s) return ez_fail(ELIZA_E_NOMEM, "out of memory for a stream");
    ez_atomic_int_store(&s->cancel, 0);
    s->tts = tts;
    s->state = STREAM_RUNNING;
    s->phoneme_input = (c.flags & ELIZA_TTS_PHONEMES) != 0;
    s->no_noise = (c.flags & ELIZA_TTS_NO_NOISE) != 0;
    s->speed = c.speed;
    s->seed = c.seed;
    s->text_len = strlen(c.text);
    rc = check_utf8(c.text, s->text_len);
    if (rc == ELIZA_OK) rc = ez_tts_blend_parse(tts->model, c.voice, &s->voice);
    if (rc == ELIZA_OK) rc = copy_string(c.text, &s->text);
    if (rc == ELIZA_OK) rc = copy_string(c.language ? c.language : default_language(tts, s->voice.index[0]), &s->language);
    /* Text in a language with no G2P fails here, before any audio. */
    if (rc == ELIZA_OK && !s->phoneme_input && !ez_tts_is_blank(s->text, 0, s->text_len) && no_g2p_name(s->language)) {
        ez_g2p *g2p;
        rc = need_g2p(tts, s->language, &g2p);
    }
    if (rc) {
        stream_free(s);
        return rc;
    }
    memset(&tts->prof, 0, sizeof tts->prof);
    tts->stream = s;
    *out = s;
    return ELIZA_OK;
}

void eliza_tts_stream_cancel(eliza_tts_stream *stream) {
    if (stream) ez_atomic_int_store(&stream->cancel, 1);
}

void eliza_tts_stream_close(eliza_tts_stream *stream) {
    if (!stream) return;
    if (stream->tts) {
        log_profile(&stream->tts->prof, stream->index, stream->n_samples, ez_kokoro_sample_rate(stream->tts->model));
        if (stream->tts->stream == stream) stream->tts->stream = NULL;
    }
    stream_free(stream);
}

static int32_t fail_stream(eliza_tts_stream *s, int32_t rc) {
    s->state = STREAM_FAILED;
    s->failure = rc;
    return rc;
}

/* The next chunk of ph[0, len) from *pos (ez_tts_next_phoneme_chunk), the first of
 * the stream cut early (ez_tts_first_clause_cut): the rest of its line is the
 * next chunk. */
static int stream_chunk(eliza_tts_stream *s, const char *ph, size_t len, size_t *pos, const char **out, size_t *n,
                        int *n_cp) {
    size_t b, e, cut;
    int cut_cp = 0;
    if (!ez_tts_next_phoneme_chunk(ph, len, ez_kokoro_max_phonemes(s->tts->model), pos, &b, &e, n_cp)) return 0;
    if (s->index == 0 && (cut = ez_tts_first_clause_cut(ph, b, e, *n_cp, &cut_cp)) != 0) {
        e = cut;
        *n_cp = cut_cp;
        *pos = cut;
    }
    *out = ph + b;
    *n = e - b;
    return 1;
}

/* The phonemes of the next chunk: [*ph, *ph + *n) with *n_cp code points;
 * 0 when the text is used up. Text input runs the G2P one piece at a time. */
static int32_t next_chunk_phonemes(eliza_tts_stream *s, const char **ph, size_t *n, int *n_cp, int *found) {
    eliza_tts *tts = s->tts;
    const int max_cp = ez_kokoro_max_phonemes(tts->model);
    size_t b, e;
    *found = 0;
    for (;;) {
        if (s->phoneme_input) {
            *found = stream_chunk(s, s->text, s->text_len, &s->text_pos, ph, n, n_cp);
            return ELIZA_OK;
        }
        if (s->lines.len && stream_chunk(s, s->lines.data, s->lines.len, &s->lines_pos, ph, n, n_cp)) {
            *found = 1;
            return ELIZA_OK;
        }
        /* The G2P lines are used up: phonemize the next piece of text. */
        ez_sb_free(&s->lines);
        s->lines_pos = 0;
        while (s->lines.len == 0) {
            ez_g2p *g2p;
            uint64_t t0;
            int32_t rc;
            if (!ez_tts_next_text_piece(s->text, s->text_len, &s->text_pos, &b, &e)) return ELIZA_OK;
            if (ez_tts_is_blank(s->text, b, e)) continue;
            if ((rc = need_g2p(tts, s->language, &g2p))) return rc;
            t0 = ez_time_ns();
            rc = ez_g2p_phonemize(g2p, s->text + b, e - b, max_cp, &s->lines);
            profile_add(&tts->prof, "g2p", (double)(ez_time_ns() - t0) / 1e6);
            if (rc) return rc;
            if (s->lines.failed) return ez_fail(ELIZA_E_NOMEM, "out of memory for phonemes");
        }
    }
}

static int32_t set_phonemes(eliza_tts_stream *s, const char *ph, size_t n) {
    if (n + 1 > s->phonemes_cap) {
        char *p = (char *)realloc(s->phonemes, n + 1);
        if (!p) return ez_fail(ELIZA_E_NOMEM, "out of memory for a chunk's phonemes");
        s->phonemes = p;
        s->phonemes_cap = n + 1;
    }
    memcpy(s->phonemes, ph, n);
    s->phonemes[n] = '\0';
    return ELIZA_OK;
}

static void set_chunk(eliza_tts_chunk *chunk, uint32_t index, const float *pcm, size_t n, const char *phonemes) {
    if (EZ_FITS(chunk, eliza_tts_chunk, index)) chunk->index = index;
    if (EZ_FITS(chunk, eliza_tts_chunk, pcm)) chunk->pcm = pcm;
    if (EZ_FITS(chunk, eliza_tts_chunk, n_samples)) chunk->n_samples = n;
    if (EZ_FITS(chunk, eliza_tts_chunk, phonemes)) chunk->phonemes = phonemes;
}

/* The seam fades (SEAM_FADE_MS): in at the start unless `first`, out at the
 * end; the samples at the seam itself become 0. */
static void fade_seams(float *pcm, size_t n, int sample_rate, int first) {
    size_t len = (size_t)sample_rate * SEAM_FADE_MS / 1000;
    if (len > n / 2) len = n / 2;
    for (size_t i = 0; i < len; i++) {
        float g = 0.5f - 0.5f * cosf(3.14159265f * (float)i / (float)len);
        if (!first) pcm[i] *= g;
        pcm[n - 1 - i] *= g;
    }
}

/* Chunk seeds: one stream of noise per chunk, repeatable from the seed. */
static uint64_t chunk_seed(uint64_t seed, uint32_t index) { return seed + (uint64_t)index * 0x9E3779B97F4A7C15ull; }

int32_t eliza_tts_stream_next(eliza_tts_stream *s, eliza_tts_chunk *chunk) {
    int32_t ids[EZ_KOKORO_MAX_PHONEMES];
    float style[EZ_KOKORO_STYLE_DIM];
    eliza_tts *tts;
    int32_t rc;

    ez_clear_error();
    if (!s || !chunk) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_tts_stream_next: NULL argument");
    if (!EZ_FITS(chunk, eliza_tts_chunk, index))
        return ez_fail(ELIZA_E_ABI, "eliza_tts_chunk.struct_size %" PRIu32 " is too small (%" PRIu64 ")",
                       chunk->struct_size, (uint64_t)sizeof(eliza_tts_chunk));
    set_chunk(chunk, s->index, NULL, 0, "");
    free(s->pcm);
    s->pcm = NULL;
    tts = s->tts;
    if (!tts) return ez_fail(ELIZA_E_STATE, "the stream's model was closed");
    if (s->state == STREAM_FAILED)
        return ez_fail(s->failure, "the stream %s", s->failure == ELIZA_E_CANCELLED ? "was cancelled" : "failed");
    if (s->state == STREAM_DONE) return ELIZA_DONE;

    for (;;) {
        const char *ph = NULL;
        size_t n_ph = 0, n_pcm = 0;
        int n_cp = 0, found = 0, speaks = 0, n_ids;
        uint64_t t0 = ez_time_ns();

        if (ez_atomic_int_load(&s->cancel)) return fail_stream(s, ez_fail(ELIZA_E_CANCELLED, "cancelled"));
        rc = next_chunk_phonemes(s, &ph, &n_ph, &n_cp, &found);
        if (rc) return fail_stream(s, rc);
        if (!found) {
            s->state = STREAM_DONE;
            return ELIZA_DONE;
        }
        n_ids = ez_tts_phoneme_ids(tts->model, ph, n_ph, ids, &speaks);
        if (!speaks) continue; /* only punctuation: nothing to say */
        if ((rc = set_phonemes(s, ph, n_ph))) return fail_stream(s, rc);
        /* KPipeline: pack[len(ps) - 1], the phoneme string's length. */
        ez_tts_blend_style(tts->model, &s->voice, n_cp, style);
        /* The forward polls the flag between its stages and blocks. */
        rc = ez_kokoro_forward(tts->model, tts->pool, ids, n_ids, style, s->speed, s->no_noise,
                               chunk_seed(s->seed, s->index), &s->cancel, &s->pcm, &n_pcm);
        profile_add_model(&tts->prof, tts->model);
        profile_add(&tts->prof, "total", (double)(ez_time_ns() - t0) / 1e6);
        if (rc) {
            free(s->pcm);
            s->pcm = NULL;
            return fail_stream(s, rc);
        }
        fade_seams(s->pcm, n_pcm, ez_kokoro_sample_rate(tts->model), s->index == 0);
        set_chunk(chunk, s->index, s->pcm, n_pcm, s->phonemes);
        s->index++;
        s->n_samples += n_pcm;
        return ELIZA_OK;
    }
}

/* ------------------------------------------------------------------------ */
/* Whole synthesis                                                           */
/* ------------------------------------------------------------------------ */

int32_t eliza_tts_synthesize(eliza_tts *tts, const eliza_tts_config *config, float **out_pcm, size_t *out_count) {
    eliza_tts_stream *s = NULL;
    eliza_tts_chunk chunk;
    float *pcm = NULL;
    size_t n = 0, cap = 0;
    int32_t rc;

    ez_clear_error();
    if (out_pcm) *out_pcm = NULL;
    if (out_count) *out_count = 0;
    if (!out_pcm || !out_count) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_tts_synthesize: NULL argument");
    rc = eliza_tts_stream_open(tts, config, &s);
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
