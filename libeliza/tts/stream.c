/* Text -> phoneme lines (a G2P per language, opened lazily) and the pull
 * stream that speaks them one chunk at a time. The model itself is
 * tts/kokoro.c, the G2P tts/g2p.c, voice blending tts/voices.c, chunking to
 * the model's 510 phonemes (fewer for a model with a shorter ALBERT)
 * tts/chunk.c.
 *
 * Chunks follow kokoro 0.9.4's KPipeline: the text is cut at line breaks
 * (its split_pattern r'\n+'), a line's phonemes go in chunks of up to 510
 * (en_tokenize; the G2P gives them sentence by sentence), a chunk's
 * style is row len(phonemes) - 1 of the voice pack, symbols outside the
 * vocabulary are dropped (KModel.forward), and a whole synthesis is the
 * chunks' audio back to back with nothing between them (kokoro's CLI).
 * Departures, for a stream's latency and its seams: the G2P's sentences
 * are chunks of their own, the first chunk of a long line ends at its first
 * clause boundary (tts/chunk.c), and every seam fades out and in over a few
 * milliseconds (SEAM_FADE_MS). A stream of whole lines (ELIZA_TTS_WHOLE_LINES,
 * what synthesis uses) makes neither cut: a text line's sentences go
 * together up to the model's 510 phonemes, as KPipeline's en_tokenize. */
#include "tts/stream.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/platform.h"
#include "tts/chunk.h"
#include "tts/g2p_en.h"

/* Each chunk fades in (all but the first) and out over SEAM_FADE_MS with a
 * raised cosine, so chunks join at silence, without a click. */
#define SEAM_FADE_MS 4
/* G2P languages open at once on one model (each an espeak-ng voice). */
#define MAX_G2P 16

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

/* ------------------------------------------------------------------------ */
/* Profile                                                                   */
/* ------------------------------------------------------------------------ */

static void profile_add(ez_tts_profile *p, const char *name, double ms) {
    int i;
    for (i = 0; i < p->n; i++)
        if (strcmp(p->name[i], name) == 0) break;
    if (i == p->n) {
        if (p->n == EZ_TTS_MAX_PROFILE) return;
        p->name[p->n] = name;
        p->ms[p->n++] = 0.0;
    }
    p->ms[i] += ms;
}

static void profile_add_model(ez_tts_profile *p, const ez_kokoro *m) {
    ez_kokoro_phase phases[EZ_KOKORO_MAX_PHASES];
    int n = ez_kokoro_profile(m, phases, EZ_KOKORO_MAX_PHASES);
    for (int i = 0; i < n; i++)
        if (phases[i].name) profile_add(p, phases[i].name, phases[i].ms);
}

void ez_tts_profile_json(const ez_tts_profile *p, ez_strbuf *sb) {
    ez_sb_puts(sb, "{");
    for (int i = 0; i < p->n; i++) {
        if (i) ez_sb_puts(sb, ", ");
        ez_sb_json_str(sb, p->name[i], strlen(p->name[i]));
        ez_sb_puts(sb, ": ");
        ez_sb_json_num(sb, p->ms[i]);
    }
    ez_sb_puts(sb, "}");
}

/* ------------------------------------------------------------------------ */
/* The text front end                                                        */
/* ------------------------------------------------------------------------ */

struct ez_tts_frontend {
    struct {
        char *language;
        ez_g2p *g2p;
    } g2p[MAX_G2P];              /* one per language, opened on its first text */
    int n_g2p;
    char *espeak_library;        /* NULL = default */
    char *espeak_data;
    char *language;
    char *model_path;            /* the English lexicon lies beside it */
};

void ez_tts_frontend_free(ez_tts_frontend *fe) {
    if (!fe) return;
    for (int i = 0; i < fe->n_g2p; i++) {
        ez_g2p_close(fe->g2p[i].g2p);
        free(fe->g2p[i].language);
    }
    free(fe->espeak_library);
    free(fe->espeak_data);
    free(fe->language);
    free(fe->model_path);
    free(fe);
}

int32_t ez_tts_frontend_create(const char *espeak_library, const char *espeak_data, const char *language,
                               const char *model_path, ez_tts_frontend **out) {
    ez_tts_frontend *fe = (ez_tts_frontend *)calloc(1, sizeof *fe);
    int32_t rc;
    *out = NULL;
    if (!fe) return ez_fail(ELIZA_E_NOMEM, "out of memory for a G2P front end");
    rc = copy_string(espeak_library, &fe->espeak_library);
    if (rc == ELIZA_OK) rc = copy_string(espeak_data, &fe->espeak_data);
    if (rc == ELIZA_OK) rc = copy_string(language, &fe->language);
    if (rc == ELIZA_OK) rc = copy_string(model_path, &fe->model_path);
    if (rc) {
        ez_tts_frontend_free(fe);
        return rc;
    }
    *out = fe;
    return ELIZA_OK;
}

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

const char *ez_tts_default_language(const ez_tts_frontend *fe, const ez_kokoro *m, int voice) {
    const char *v = ez_kokoro_voice_language(m, voice);
    if (fe->language) return fe->language;
    return v && *v ? v : "en-us";
}

/* The G2P of `language`, opened on first use. */
static int32_t need_g2p(ez_tts_frontend *fe, const char *language, ez_g2p **out) {
    const char *no_g2p = no_g2p_name(language);
    ez_g2p **g;
    int32_t rc;
    *out = NULL;
    if (no_g2p)
        return ez_fail(ELIZA_E_UNSUPPORTED, "libeliza has no G2P for %s ('%s'): pass Kokoro phonemes "
                       "(ELIZA_TTS_PHONEMES; misaki's %s G2P makes them), or choose another language", no_g2p,
                       language, strcmp(no_g2p, "Japanese") == 0 ? "ja" : "zh");
    for (int i = 0; i < fe->n_g2p; i++)
        if (strcmp(fe->g2p[i].language, language) == 0) {
            *out = fe->g2p[i].g2p;
            return ELIZA_OK;
        }
    if (fe->n_g2p == MAX_G2P)
        return ez_fail(ELIZA_E_INVALID_ARG, "G2P language '%.64s': this model already has %d languages open", language,
                       MAX_G2P);
    if ((rc = copy_string(language, &fe->g2p[fe->n_g2p].language))) return rc;
    g = &fe->g2p[fe->n_g2p].g2p;
    /* "espeak:en-us": espeak-ng alone, as misaki's EspeakG2P; else English
     * through misaki's en.G2P (tts/g2p_en.c) */
    if (strncmp(language, "espeak:", 7) == 0) {
        rc = ez_g2p_open(fe->espeak_library, fe->espeak_data, language + 7, g);
    } else {
        rc = ez_g2p_open(fe->espeak_library, fe->espeak_data, language, g);
        if (rc == ELIZA_OK && (rc = ez_g2p_en_attach(*g, language, fe->model_path)) < 0) ez_g2p_close(*g);
    }
    if (rc) {
        free(fe->g2p[fe->n_g2p].language);
        return rc;
    }
    *out = fe->g2p[fe->n_g2p++].g2p;
    return ELIZA_OK;
}

int32_t ez_tts_phonemize(ez_tts_frontend *fe, const ez_kokoro *m, const char *text, size_t n, const char *language,
                         char **out) {
    const int max_cp = ez_kokoro_max_phonemes(m);
    ez_strbuf raw = {0}, sb = {0};
    size_t pos = 0, b, e;
    int32_t rc = ELIZA_OK;
    int32_t ids[EZ_KOKORO_MAX_PHONEMES];
    int n_cp;
    ez_g2p *g2p = NULL;

    *out = NULL;
    while (rc == ELIZA_OK && ez_tts_next_text_piece(text, n, &pos, &b, &e)) {
        if (ez_tts_is_blank(text, b, e)) continue;
        rc = need_g2p(fe, language, &g2p);
        if (rc == ELIZA_OK) rc = ez_g2p_phonemize(g2p, text + b, e - b, max_cp, &raw);
        if (rc == ELIZA_OK) ez_sb_puts(&raw, "\n");
    }
    pos = 0;
    while (rc == ELIZA_OK && raw.len && ez_tts_next_phoneme_chunk(raw.data, raw.len, max_cp, &pos, &b, &e, &n_cp)) {
        int speaks;
        ez_tts_phoneme_ids(m, raw.data + b, e - b, ids, &speaks);
        if (!speaks) continue;
        if (sb.len) ez_sb_puts(&sb, "\n");
        ez_sb_append(&sb, raw.data + b, e - b);
    }
    ez_sb_free(&raw);
    if (rc) {
        ez_sb_free(&sb);
        return rc;
    }
    *out = ez_sb_take(&sb);
    if (!*out) return ez_fail(ELIZA_E_NOMEM, "out of memory for the phonemes");
    return ELIZA_OK;
}

/* ------------------------------------------------------------------------ */
/* The stream                                                                */
/* ------------------------------------------------------------------------ */

typedef enum { STREAM_RUNNING, STREAM_DONE, STREAM_FAILED } stream_state;

struct ez_tts_stream {
    ez_kokoro *model;
    ez_pool *pool;
    ez_tts_frontend *fe;
    ez_tts_profile *prof;
    ez_atomic_int cancel;
    stream_state state;
    int32_t failure;           /* the code STREAM_FAILED repeats */

    char *text;                /* copy of the config's text */
    size_t text_len, text_pos; /* text input: what the G2P has not seen yet */
    int phoneme_input;
    char *language;            /* G2P language (text input) */
    ez_tts_blend voice;
    float speed;
    int no_noise;
    int whole_lines;           /* no early first cut */
    uint64_t seed;

    ez_strbuf lines;           /* phoneme lines not spoken yet (text input) */
    size_t lines_pos;

    uint32_t index;            /* of the next chunk */
    uint64_t n_samples;        /* so far */
    char *phonemes;            /* of the last chunk, NUL-terminated */
    size_t phonemes_cap;
    float *pcm;                /* of the last chunk */
};

void ez_tts_stream_free(ez_tts_stream *s) {
    if (!s) return;
    free(s->text);
    free(s->language);
    ez_sb_free(&s->lines);
    free(s->phonemes);
    free(s->pcm);
    free(s);
}

int32_t ez_tts_stream_open(ez_kokoro *m, ez_pool *pool, ez_tts_frontend *fe, ez_tts_profile *prof,
                           const ez_tts_stream_config *c, ez_tts_stream **out) {
    ez_tts_stream *s = (ez_tts_stream *)calloc(1, sizeof *s);
    int32_t rc;
    *out = NULL;
    if (!s) return ez_fail(ELIZA_E_NOMEM, "out of memory for a stream");
    ez_atomic_int_store(&s->cancel, 0);
    s->model = m;
    s->pool = pool;
    s->fe = fe;
    s->prof = prof;
    s->state = STREAM_RUNNING;
    s->phoneme_input = c->phoneme_input;
    s->no_noise = c->no_noise;
    s->whole_lines = c->whole_lines;
    s->speed = c->speed;
    s->seed = c->seed;
    s->voice = c->voice;
    s->text_len = c->text_len;
    s->text = (char *)malloc(c->text_len + 1);
    if (!s->text) {
        rc = ez_fail(ELIZA_E_NOMEM, "out of memory copying a %" PRIu64 "-byte text", (uint64_t)c->text_len);
    } else {
        memcpy(s->text, c->text, c->text_len);
        s->text[c->text_len] = '\0';
        rc = copy_string(c->language ? c->language : ez_tts_default_language(fe, m, s->voice.index[0]), &s->language);
    }
    if (rc == ELIZA_OK && !s->phoneme_input && !ez_tts_is_blank(s->text, 0, s->text_len) && no_g2p_name(s->language)) {
        ez_g2p *g2p;
        rc = need_g2p(fe, s->language, &g2p);
    }
    if (rc) {
        ez_tts_stream_free(s);
        return rc;
    }
    memset(prof, 0, sizeof *prof);
    *out = s;
    return ELIZA_OK;
}

void ez_tts_stream_cancel(ez_tts_stream *s) { ez_atomic_int_store(&s->cancel, 1); }

void ez_tts_stream_log_profile(const ez_tts_stream *s) {
    const int rate = ez_kokoro_sample_rate(s->model);
    ez_strbuf sb = {0};
    char *line;
    if (!ez_env_flag("ELIZA_PROFILE")) return;
    ez_sb_printf(&sb, "tts profile: %" PRIu32 " chunks, %.2f s of audio; ms:", s->index,
                 rate > 0 ? (double)s->n_samples / rate : 0.0);
    for (int i = 0; i < s->prof->n; i++) ez_sb_printf(&sb, " %s %.1f", s->prof->name[i], s->prof->ms[i]);
    line = ez_sb_take(&sb);
    if (line) ez_log(ELIZA_LOG_INFO, "%s", line);
    free(line);
}

static int32_t fail_stream(ez_tts_stream *s, int32_t rc) {
    s->state = STREAM_FAILED;
    s->failure = rc;
    return rc;
}

/* The next chunk of ph[0, len) from *pos (ez_tts_next_phoneme_chunk), the first of
 * the stream cut early (ez_tts_first_clause_cut) unless whole_lines: the rest of
 * its line is the next chunk. */
static int stream_chunk(ez_tts_stream *s, const char *ph, size_t len, size_t *pos, const char **out, size_t *n,
                        int *n_cp) {
    size_t b, e, cut;
    int cut_cp = 0;
    if (!ez_tts_next_phoneme_chunk(ph, len, ez_kokoro_max_phonemes(s->model), pos, &b, &e, n_cp)) return 0;
    if (s->index == 0 && !s->whole_lines && (cut = ez_tts_first_clause_cut(ph, b, e, *n_cp, &cut_cp)) != 0) {
        e = cut;
        *n_cp = cut_cp;
        *pos = cut;
    }
    *out = ph + b;
    *n = e - b;
    return 1;
}

/* The phonemes of the next chunk: [*ph, *ph + *n) with *n_cp code points;
 * *found = 0 when the text is used up. Text input runs the G2P one piece
 * at a time. */
static int32_t next_chunk_phonemes(ez_tts_stream *s, const char **ph, size_t *n, int *n_cp, int *found) {
    const int max_cp = ez_kokoro_max_phonemes(s->model);
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
            if ((rc = need_g2p(s->fe, s->language, &g2p))) return rc;
            t0 = ez_time_ns();
            rc = ez_g2p_phonemize(g2p, s->text + b, e - b, max_cp, &s->lines);
            profile_add(s->prof, "g2p", (double)(ez_time_ns() - t0) / 1e6);
            if (rc) return rc;
            if (s->lines.failed) return ez_fail(ELIZA_E_NOMEM, "out of memory for phonemes");
            /* whole lines: the line's sentences in as few chunks as fit, as KPipeline speaks them */
            if (s->whole_lines) s->lines.len = ez_tts_join_sentences(s->lines.data, s->lines.len, max_cp);
        }
    }
}

static int32_t set_phonemes(ez_tts_stream *s, const char *ph, size_t n) {
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

int32_t ez_tts_stream_next(ez_tts_stream *s, ez_tts_audio *out) {
    int32_t ids[EZ_KOKORO_MAX_PHONEMES];
    float style[EZ_KOKORO_STYLE_DIM];
    int32_t rc;

    memset(out, 0, sizeof *out);
    out->index = s->index;
    out->phonemes = "";
    free(s->pcm);
    s->pcm = NULL;
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
        n_ids = ez_tts_phoneme_ids(s->model, ph, n_ph, ids, &speaks);
        if (!speaks) continue; /* only punctuation: nothing to say */
        if ((rc = set_phonemes(s, ph, n_ph))) return fail_stream(s, rc);
        /* KPipeline: pack[len(ps) - 1], the phoneme string's length. */
        ez_tts_blend_style(s->model, &s->voice, n_cp, style);
        /* The forward polls the flag between its stages and blocks. */
        rc = ez_kokoro_forward(s->model, s->pool, ids, n_ids, style, s->speed, s->no_noise,
                               chunk_seed(s->seed, s->index), &s->cancel, &s->pcm, &n_pcm);
        profile_add_model(s->prof, s->model);
        profile_add(s->prof, "total", (double)(ez_time_ns() - t0) / 1e6);
        if (rc) {
            free(s->pcm);
            s->pcm = NULL;
            return fail_stream(s, rc);
        }
        fade_seams(s->pcm, n_pcm, ez_kokoro_sample_rate(s->model), s->index == 0);
        out->pcm = s->pcm;
        out->n_samples = n_pcm;
        out->phonemes = s->phonemes;
        s->index++;
        s->n_samples += n_pcm;
        return ELIZA_OK;
    }
}
