/* The eliza_tts_* entry points: argument and struct_size checks, handle
 * lifetimes, voice specs and blending, text -> phoneme lines (G2P, opened
 * lazily), chunking to the model's 510 phonemes (fewer for a model with a
 * shorter ALBERT), and the pull stream. The model itself is tts/kokoro.c,
 * the G2P tts/g2p.c.
 *
 * Chunks follow kokoro 0.9.4's KPipeline: the text is cut at line breaks
 * (its split_pattern r'\n+'), G2P splits a line into sentences, a chunk's
 * style is row len(phonemes) - 1 of the voice pack, symbols outside the
 * vocabulary are dropped (KModel.forward), and a whole synthesis is the
 * chunks' audio back to back with nothing between them (kokoro's CLI).
 * Two departures, for a stream's latency and its seams: the first chunk of
 * a long line ends at its first clause boundary (FIRST_CUT_*), and every
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
#include "tts/g2p.h"
#include "tts/g2p_en.h"
#include "tts/kokoro.h"

/* Text handed to the G2P at a time: a line, or a sentence-aligned part of a
 * longer one, so the first chunk's audio does not wait for the whole text. */
#define TEXT_PIECE_MAX 2000
#define MIN_SPEED 0.25f
#define MAX_SPEED 4.0f
#define MAX_BLEND 64
/* The stream's first chunk, when its phoneme line is longer than
 * FIRST_CUT_MIN_LINE code points, ends at the line's first clause boundary
 * (a comma, colon, semicolon or dash followed by a space) that leaves at
 * least FIRST_CUT_MIN code points before it and FIRST_CUT_MIN_REST after:
 * first audio after a clause, not a sentence. Later chunks stay whole lines. */
#define FIRST_CUT_MIN_LINE 40
#define FIRST_CUT_MIN 8
#define FIRST_CUT_MIN_REST 12
/* Each chunk fades in (all but the first) and out over SEAM_FADE_MS with a
 * raised cosine, so chunks join at silence, without a click. */
#define SEAM_FADE_MS 4
/* G2P languages open at once on one model (each an espeak-ng voice). */
#define MAX_G2P 16
/* Phases of the profile: the model's, plus g2p and total. */
#define MAX_PROFILE (EZ_KOKORO_MAX_PHASES + 2)

/* See llm_api.c: a field is read (or written) only when it lies inside the
 * caller's struct_size. */
#define FITS(ptr, type, field) ((ptr)->struct_size >= offsetof(type, field) + sizeof((ptr)->field))

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

/* Length of the valid UTF-8 sequence at s[0..n), 0 if invalid. */
static int utf8_seq(const unsigned char *s, size_t n) {
    int len;
    if (s[0] < 0x80) return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF) len = 2;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF) len = 3;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4) len = 4;
    else return 0;
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        unsigned char lo = 0x80, hi = 0xBF;
        if (i == 1 && s[0] == 0xE0) lo = 0xA0;
        if (i == 1 && s[0] == 0xED) hi = 0x9F;
        if (i == 1 && s[0] == 0xF0) lo = 0x90;
        if (i == 1 && s[0] == 0xF4) hi = 0x8F;
        if (s[i] < lo || s[i] > hi) return 0;
    }
    return len;
}

static int32_t check_utf8(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        int len = utf8_seq((const unsigned char *)s + i, n - i);
        if (len == 0)
            return ez_fail(ELIZA_E_INVALID_ARG, "the text is not valid UTF-8 (byte %" PRIu64 ")", (uint64_t)i);
        i += (size_t)len;
    }
    return ELIZA_OK;
}

/* Length of the (already validated) sequence at s. */
static int utf8_len(const char *s) {
    unsigned char b = (unsigned char)*s;
    return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

static uint32_t utf8_decode(const char *s, int len) {
    const unsigned char *u = (const unsigned char *)s;
    switch (len) {
    case 1: return u[0];
    case 2: return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    case 3: return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    default:
        return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) | ((uint32_t)(u[2] & 0x3F) << 6) |
               (u[3] & 0x3F);
    }
}

/* Kokoro's punctuation and space: symbols with nothing to say on their own. */
static int is_punctuation(uint32_t cp) {
    static const uint32_t marks[] = {' ',    '\t',   ';',    ':',    ',',    '.',    '!',    '?',    '"',
                                     '(',    ')',    '\'',   '-',    0x00A1, 0x00BF, 0x00AB, 0x00BB, 0x2014,
                                     0x2013, 0x2026, 0x201C, 0x201D, 0x2018, 0x2019, '\r'};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (marks[i] == cp) return 1;
    return 0;
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
        if (!FITS(params, eliza_tts_params, n_threads))
            return ez_fail(ELIZA_E_ABI, "eliza_tts_params.struct_size %" PRIu32 " is too small (%" PRIu64 ")",
                           params->struct_size, (uint64_t)sizeof(eliza_tts_params));
#define TAKE(f) \
    if (FITS(params, eliza_tts_params, f)) p.f = params->f
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

/* The next piece of text at text[*pos..n) for the G2P: up to the next line
 * break, cut at a sentence end (or a space) when longer than TEXT_PIECE_MAX
 * bytes. Sets [*begin, *end) and moves *pos past it; 0 when no text is left. */
static int next_text_piece(const char *text, size_t n, size_t *pos, size_t *begin, size_t *end) {
    size_t i = *pos, stop, cut = 0, space = 0;
    while (i < n && (text[i] == '\n' || text[i] == '\r')) i++;
    if (i == n) {
        *pos = n;
        return 0;
    }
    stop = i;
    while (stop < n && text[stop] != '\n' && stop - i < TEXT_PIECE_MAX) stop++;
    if (stop < n && text[stop] != '\n') {
        for (size_t j = i + 1; j < stop; j++) {
            if (text[j] != ' ') continue;
            space = j;
            if (text[j - 1] == '.' || text[j - 1] == '!' || text[j - 1] == '?') cut = j;
        }
        if (!cut) cut = space;
        if (cut) {
            stop = cut;
        } else {
            while (stop > i && ((unsigned char)text[stop] & 0xC0) == 0x80) stop--; /* keep characters whole */
        }
    }
    *pos = stop;
    while (stop > i && text[stop - 1] == '\r') stop--;
    *begin = i;
    *end = stop;
    return 1;
}

/* Is text[b..e) nothing but spaces? */
static int is_blank(const char *text, size_t b, size_t e) {
    for (size_t i = b; i < e; i++)
        if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r') return 0;
    return 1;
}

/* The next chunk of phoneme lines at lines[*pos..n): one line, or its first
 * max_cp code points (the model's ez_kokoro_max_phonemes) cut back to a
 * space. [*begin, *end) has no spaces at its ends; *n_cp is its length in
 * code points. 0 when nothing is left. */
static int next_phoneme_chunk(const char *lines, size_t n, int max_cp, size_t *pos, size_t *begin, size_t *end,
                              int *n_cp) {
    size_t i = *pos, j, last_space = 0;
    int cp = 0, cp_at_space = 0;
    while (i < n && (lines[i] == ' ' || lines[i] == '\n' || lines[i] == '\r' || lines[i] == '\t')) i++;
    if (i == n) {
        *pos = n;
        return 0;
    }
    j = i;
    while (j < n && lines[j] != '\n' && lines[j] != '\r') {
        if (cp == max_cp) {
            if (last_space) {
                j = last_space;
                cp = cp_at_space;
            }
            break;
        }
        if (lines[j] == ' ' || lines[j] == '\t') {
            last_space = j;
            cp_at_space = cp;
        }
        j += (size_t)utf8_len(lines + j);
        cp++;
    }
    *pos = j;
    while (j > i && (lines[j - 1] == ' ' || lines[j - 1] == '\t')) {
        j--;
        cp--;
    }
    *begin = i;
    *end = j;
    *n_cp = cp;
    return 1;
}

/* The vocabulary ids of phonemes[0..n); symbols outside it are dropped as
 * KModel.forward drops them. Returns how many ids, and through *speaks
 * whether any is more than punctuation. */
static int phoneme_ids(const ez_kokoro *m, const char *ph, size_t n, int32_t *ids, int *speaks) {
    const int max_ids = ez_kokoro_max_phonemes(m);
    int n_ids = 0;
    *speaks = 0;
    for (size_t i = 0; i < n;) {
        int len = utf8_len(ph + i);
        int id = ez_kokoro_symbol_id(m, ph + i, len);
        if (id < 0) {
            ez_log(ELIZA_LOG_DEBUG, "tts: dropped phoneme U+%04" PRIX32 " ('%.*s'): not in the model's vocabulary",
                   utf8_decode(ph + i, len), len, ph + i);
        } else if (n_ids < max_ids) {
            ids[n_ids++] = id;
            if (!is_punctuation(utf8_decode(ph + i, len))) *speaks = 1;
        }
        i += (size_t)len;
    }
    return n_ids;
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
    while (rc == ELIZA_OK && next_text_piece(text, n, &pos, &b, &e)) {
        if (is_blank(text, b, e)) continue;
        rc = need_g2p(tts, language, &g2p);
        if (rc == ELIZA_OK)
            rc = ez_g2p_phonemize(g2p, text + b, e - b, ez_kokoro_max_phonemes(tts->model), &raw);
        if (rc == ELIZA_OK) ez_sb_puts(&raw, "\n");
    }
    /* The lines synthesis would speak: cut to the model's limit, without the
     * ones that are only punctuation. */
    pos = 0;
    while (rc == ELIZA_OK && raw.len &&
           next_phoneme_chunk(raw.data, raw.len, ez_kokoro_max_phonemes(tts->model), &pos, &b, &e, &n_cp)) {
        int speaks;
        phoneme_ids(tts->model, raw.data + b, e - b, ids, &speaks);
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
/* Voices                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct {
    int n;
    int index[MAX_BLEND];
    float weight[MAX_BLEND]; /* > 0, sum 1 */
} blend;

static int find_voice(const ez_kokoro *m, const char *name, size_t len) {
    int n = ez_kokoro_voice_count(m);
    for (int i = 0; i < n; i++) {
        const char *v = ez_kokoro_voice_name(m, i);
        if (v && strlen(v) == len && memcmp(v, name, len) == 0) return i;
    }
    return -1;
}

static int32_t voice_not_found(const ez_kokoro *m, const char *name, size_t len) {
    ez_strbuf sb = {0};
    char *known;
    int32_t rc;
    int n = ez_kokoro_voice_count(m);
    for (int i = 0; i < n && i < 16; i++) ez_sb_printf(&sb, "%s%s", i ? ", " : "", ez_kokoro_voice_name(m, i));
    if (n > 16) ez_sb_printf(&sb, ", ... (%d in all)", n);
    known = ez_sb_take(&sb);
    rc = ez_fail(ELIZA_E_NOT_FOUND, "voice '%.*s' is not in the model (voices: %s)", (int)EZ_MIN(len, 200), name,
                 known ? known : "?");
    free(known);
    return rc;
}

static int is_space(char c) { return c == ' ' || c == '\t'; }

/* "name" or "name:w,name:w,..." (weights finite, > 0; normalised). */
static int32_t parse_voice(const ez_kokoro *m, const char *spec, blend *out) {
    const char *p = spec;
    double sum = 0.0;
    out->n = 0;
    if (ez_kokoro_voice_count(m) <= 0) return ez_fail(ELIZA_E_NOT_FOUND, "the model has no voices");
    if (!spec) {
        out->n = 1;
        out->index[0] = 0;
        out->weight[0] = 1.0f;
        return ELIZA_OK;
    }
    for (;;) {
        const char *item = p, *item_end, *colon, *name_end;
        double w = 1.0;
        int idx;
        while (*p && *p != ',') p++;
        item_end = p;
        while (item < item_end && is_space(*item)) item++;
        while (item_end > item && is_space(item_end[-1])) item_end--;
        for (colon = item; colon < item_end && *colon != ':'; colon++) {}
        if (colon == item_end) colon = NULL;
        name_end = colon ? colon : item_end;
        while (name_end > item && is_space(name_end[-1])) name_end--;
        if (name_end == item) return ez_fail(ELIZA_E_INVALID_ARG, "voice '%.200s': an entry has no name", spec);
        if (colon) {
            char num[64], *num_end;
            size_t len = (size_t)(item_end - colon - 1);
            if (len == 0 || len >= sizeof num)
                return ez_fail(ELIZA_E_INVALID_ARG, "voice '%.200s': bad weight for '%.*s'", spec,
                               (int)EZ_MIN(name_end - item, 200), item);
            memcpy(num, colon + 1, len);
            num[len] = '\0';
            w = strtod(num, &num_end);
            while (is_space(*num_end)) num_end++;
            if (num_end == num || *num_end != '\0' || !isfinite(w) || !(w > 0.0) || w > 1e30)
                return ez_fail(ELIZA_E_INVALID_ARG, "voice '%.200s': the weight of '%.*s' must be a finite number > 0",
                               spec, (int)EZ_MIN(name_end - item, 200), item);
        }
        idx = find_voice(m, item, (size_t)(name_end - item));
        if (idx < 0) return voice_not_found(m, item, (size_t)(name_end - item));
        if (out->n == MAX_BLEND)
            return ez_fail(ELIZA_E_INVALID_ARG, "voice '%.40s...': more than %d voices", spec, MAX_BLEND);
        out->index[out->n] = idx;
        out->weight[out->n++] = (float)w;
        sum += w;
        if (!*p) break;
        p++;
    }
    for (int i = 0; i < out->n; i++) out->weight[i] = (float)(out->weight[i] / sum);
    /* Styles of two languages make no voice of either (kokoro's voices are
     * trained per language): refused. A voice of unknown language mixes. */
    for (int i = 1; i < out->n; i++) {
        const char *a = ez_kokoro_voice_language(m, out->index[0]), *b = ez_kokoro_voice_language(m, out->index[i]);
        if (a && b && *a && *b && strcmp(a, b) != 0)
            return ez_fail(ELIZA_E_INVALID_ARG, "voice '%.200s' blends %s (%s) with %s (%s): blend voices of one "
                           "language", spec, ez_kokoro_voice_name(m, out->index[0]), a,
                           ez_kokoro_voice_name(m, out->index[i]), b);
    }
    return ELIZA_OK;
}

/* style [256] for an utterance of n_phonemes: row n - 1 of each pack, blended. */
static void blend_style(const ez_kokoro *m, const blend *b, int n_phonemes, float *style) {
    int row = EZ_MIN(EZ_MAX(n_phonemes, 1), EZ_KOKORO_MAX_PHONEMES) - 1;
    memset(style, 0, sizeof(float) * EZ_KOKORO_STYLE_DIM);
    for (int k = 0; k < b->n; k++) {
        const float *r = ez_kokoro_voice_pack(m, b->index[k]) + (size_t)row * EZ_KOKORO_STYLE_DIM;
        for (int d = 0; d < EZ_KOKORO_STYLE_DIM; d++) style[d] += b->weight[k] * r[d];
    }
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
    blend voice;
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
    if (!FITS(in, eliza_tts_config, text))
        return ez_fail(ELIZA_E_ABI, "eliza_tts_config.struct_size %" PRIu32 " is too small (%" PRIu64 ")",
                       in->struct_size, (uint64_t)sizeof(eliza_tts_config));
#define TAKE(f) \
    if (FITS(in, eliza_tts_config, f)) c->f = in->f
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
    if (rc == ELIZA_OK) rc = parse_voice(tts->model, c.voice, &s->voice);
    if (rc == ELIZA_OK) rc = copy_string(c.text, &s->text);
    if (rc == ELIZA_OK) rc = copy_string(c.language ? c.language : default_language(tts, s->voice.index[0]), &s->language);
    /* Text in a language with no G2P fails here, before any audio. */
    if (rc == ELIZA_OK && !s->phoneme_input && !is_blank(s->text, 0, s->text_len) && no_g2p_name(s->language)) {
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

static int is_clause_mark(uint32_t cp) { return cp == ',' || cp == ':' || cp == ';' || cp == 0x2014 || cp == 0x2013; }

/* The first clause boundary of ph[b, e) (n_cp code points) as described at
 * FIRST_CUT_MIN_LINE: the byte offset just past its mark, or 0 for none.
 * *cut_cp is the code points before it. */
static size_t first_clause_cut(const char *ph, size_t b, size_t e, int n_cp, int *cut_cp) {
    int cp = 0;
    if (n_cp < FIRST_CUT_MIN_LINE) return 0;
    for (size_t i = b; i < e;) {
        int len = utf8_len(ph + i);
        cp++;
        i += (size_t)len;
        if (i < e && ph[i] == ' ' && cp >= FIRST_CUT_MIN && n_cp - cp >= FIRST_CUT_MIN_REST &&
            is_clause_mark(utf8_decode(ph + i - len, len))) {
            *cut_cp = cp;
            return i;
        }
    }
    return 0;
}

/* The next chunk of ph[0, len) from *pos (next_phoneme_chunk), the first of
 * the stream cut early (first_clause_cut): the rest of its line is the
 * next chunk. */
static int stream_chunk(eliza_tts_stream *s, const char *ph, size_t len, size_t *pos, const char **out, size_t *n,
                        int *n_cp) {
    size_t b, e, cut;
    int cut_cp = 0;
    if (!next_phoneme_chunk(ph, len, ez_kokoro_max_phonemes(s->tts->model), pos, &b, &e, n_cp)) return 0;
    if (s->index == 0 && (cut = first_clause_cut(ph, b, e, *n_cp, &cut_cp)) != 0) {
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
            if (!next_text_piece(s->text, s->text_len, &s->text_pos, &b, &e)) return ELIZA_OK;
            if (is_blank(s->text, b, e)) continue;
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
    if (FITS(chunk, eliza_tts_chunk, index)) chunk->index = index;
    if (FITS(chunk, eliza_tts_chunk, pcm)) chunk->pcm = pcm;
    if (FITS(chunk, eliza_tts_chunk, n_samples)) chunk->n_samples = n;
    if (FITS(chunk, eliza_tts_chunk, phonemes)) chunk->phonemes = phonemes;
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
    if (!FITS(chunk, eliza_tts_chunk, index))
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
        n_ids = phoneme_ids(tts->model, ph, n_ph, ids, &speaks);
        if (!speaks) continue; /* only punctuation: nothing to say */
        if ((rc = set_phonemes(s, ph, n_ph))) return fail_stream(s, rc);
        /* KPipeline: pack[len(ps) - 1], the phoneme string's length. */
        blend_style(tts->model, &s->voice, n_cp, style);
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
