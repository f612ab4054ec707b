/* The eliza_tts_* entry points from C: defaults, NULLs, struct sizes and bad
 * files without a model; with $ELIZA_TTS_TEST_MODEL (a Kokoro GGUF, e.g.
 * tests/tts/tts_api_model.py's) also synthesis, streams, voice specs, speeds,
 * and cancel from another thread. Run it under -DELIZA_SANITIZE=ON: nothing
 * may crash or leak. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/platform.h"
#include "eliza.h"
#include "check.h"

static const char *PHONEMES = "h\xC9\x99l\xCB\x88O w\xCB\x88\xC9\x9C\xC9\xB9ld.";  /* həlˈO wˈɜɹld. */

/* ---- without a model --------------------------------------------------------- */

static void test_tts_defaults(void) {
    eliza_tts_params p;
    eliza_tts_config c;
    eliza_tts_default_params(&p);
    CHECK(p.struct_size == sizeof p && p.n_threads == 0 && !p.espeak_library && !p.espeak_data && !p.language);
    eliza_tts_default_config(&c);
    CHECK(c.struct_size == sizeof c && !c.text && !c.voice && c.speed == 1.0f && c.flags == 0 && c.seed == 0);
    eliza_tts_default_params(NULL);
    eliza_tts_default_config(NULL);
}

static void test_tts_nulls_are_refused(void) {
    eliza_tts *tts = (eliza_tts *)1;
    eliza_tts_chunk chunk = {sizeof chunk, 0, NULL, 0, NULL};
    float *pcm = (float *)1;
    size_t n = 1;
    char *s = (char *)1;
    CHECK_RC(eliza_tts_open(NULL, NULL, &tts), ELIZA_E_INVALID_ARG);
    CHECK(tts == NULL);
    CHECK_RC(eliza_tts_open("x.gguf", NULL, NULL), ELIZA_E_INVALID_ARG);
    CHECK_RC(eliza_tts_sample_rate(NULL), ELIZA_E_INVALID_ARG);
    CHECK_RC(eliza_tts_voice_count(NULL), ELIZA_E_INVALID_ARG);
    CHECK(eliza_tts_voice_name(NULL, 0) == NULL);
    CHECK_RC(eliza_tts_phonemize(NULL, "a", &s), ELIZA_E_INVALID_ARG);
    CHECK(s == NULL);
    CHECK_RC(eliza_tts_synthesize(NULL, NULL, &pcm, &n), ELIZA_E_INVALID_ARG);
    CHECK(pcm == NULL && n == 0);
    CHECK_RC(eliza_tts_stream_open(NULL, NULL, NULL), ELIZA_E_INVALID_ARG);
    CHECK_RC(eliza_tts_stream_next(NULL, &chunk), ELIZA_E_INVALID_ARG);
    CHECK_RC(eliza_tts_profile_json(NULL, &s), ELIZA_E_INVALID_ARG);
    eliza_tts_stream_cancel(NULL);
    eliza_tts_stream_close(NULL);
    eliza_tts_close(NULL);
}

static void test_tts_open_refuses_bad_files(void) {
    eliza_tts_params p;
    eliza_tts *tts = NULL;
    const char *path = "test_tts_api_not_a_model.gguf";
    FILE *f;
    CHECK_RC(eliza_tts_open("/nonexistent/kokoro.gguf", NULL, &tts), ELIZA_E_IO);
    CHECK(tts == NULL && strstr(eliza_last_error(), "kokoro.gguf") != NULL);
    f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs("this is not a GGUF file, just some text that is long enough", f);
    fclose(f);
    CHECK_RC(eliza_tts_open(path, NULL, &tts), ELIZA_E_FORMAT);
    CHECK(tts == NULL);
    eliza_tts_default_params(&p);
    p.struct_size = 2;
    CHECK_RC(eliza_tts_open(path, &p, &tts), ELIZA_E_ABI);
    eliza_tts_default_params(&p);
    p.n_threads = -3;
    CHECK_RC(eliza_tts_open(path, &p, &tts), ELIZA_E_INVALID_ARG);
    remove(path);
}

/* ---- with a model -------------------------------------------------------------- */

static const char *model_path(void) { return getenv("ELIZA_TTS_TEST_MODEL"); }

static eliza_tts *open_model(void) {
    eliza_tts_params p;
    eliza_tts *tts = NULL;
    eliza_tts_default_params(&p);
    p.n_threads = 2;
    CHECK_RC(eliza_tts_open(model_path(), &p, &tts), ELIZA_OK);
    return tts;
}

static int32_t synth(eliza_tts *tts, const char *text, const char *voice, float speed, uint32_t flags,
                     size_t *n_out) {
    eliza_tts_config c;
    float *pcm = NULL;
    size_t n = 0;
    int32_t rc;
    eliza_tts_default_config(&c);
    c.text = text;
    c.voice = voice;
    c.speed = speed;
    c.flags = flags;
    rc = eliza_tts_synthesize(tts, &c, &pcm, &n);
    if (rc == ELIZA_OK) {
        CHECK(pcm != NULL);
        for (size_t i = 0; i < n; i++)
            if (!isfinite(pcm[i])) {
                CHECK(!"finite samples");
                break;
            }
    } else {
        CHECK(pcm == NULL && n == 0);
    }
    eliza_free(pcm);
    if (n_out) *n_out = n;
    return rc;
}

static void test_tts_synthesis_and_bad_config(void) {
    const uint32_t PH = ELIZA_TTS_PHONEMES | ELIZA_TTS_NO_NOISE;
    eliza_tts *tts = open_model();
    char *json = NULL;
    char *big;
    size_t n = 0;
    if (!tts) return;
    CHECK(eliza_tts_sample_rate(tts) == 24000);
    CHECK(eliza_tts_voice_count(tts) > 0 && eliza_tts_voice_name(tts, 0) != NULL);
    CHECK(eliza_tts_voice_name(tts, eliza_tts_voice_count(tts)) == NULL);

    CHECK_RC(synth(tts, PHONEMES, NULL, 1.0f, PH, &n), ELIZA_OK);
    CHECK(n > 0);
    CHECK_RC(eliza_tts_profile_json(tts, &json), ELIZA_OK);
    CHECK(json && strstr(json, "\"total\"") != NULL);
    eliza_free(json);

    CHECK_RC(synth(tts, "", NULL, 1.0f, 0, &n), ELIZA_OK);
    CHECK(n == 0);
    CHECK_RC(synth(tts, "...!?", NULL, 1.0f, PH, &n), ELIZA_OK);
    CHECK(n == 0);
    CHECK_RC(synth(tts, "ab\xff", NULL, 1.0f, PH, NULL), ELIZA_E_INVALID_ARG);
    CHECK_RC(synth(tts, "\xc3", NULL, 1.0f, 0, NULL), ELIZA_E_INVALID_ARG);
    CHECK_RC(synth(tts, PHONEMES, "nobody", 1.0f, PH, NULL), ELIZA_E_NOT_FOUND);
    CHECK(strstr(eliza_last_error(), "nobody") != NULL);
    CHECK_RC(synth(tts, PHONEMES, NULL, 0.0f, PH, NULL), ELIZA_E_INVALID_ARG);
    CHECK_RC(synth(tts, PHONEMES, NULL, 100.0f, PH, NULL), ELIZA_E_INVALID_ARG);
    CHECK_RC(synth(tts, PHONEMES, NULL, NAN, PH, NULL), ELIZA_E_INVALID_ARG);
    {
        char spec[256];
        snprintf(spec, sizeof spec, "%s:nan", eliza_tts_voice_name(tts, 0));
        CHECK_RC(synth(tts, PHONEMES, spec, 1.0f, PH, NULL), ELIZA_E_INVALID_ARG);
        snprintf(spec, sizeof spec, "%s:-1", eliza_tts_voice_name(tts, 0));
        CHECK_RC(synth(tts, PHONEMES, spec, 1.0f, PH, NULL), ELIZA_E_INVALID_ARG);
        snprintf(spec, sizeof spec, "%s:0.25, %s:0.75", eliza_tts_voice_name(tts, 0), eliza_tts_voice_name(tts, 0));
        CHECK_RC(synth(tts, PHONEMES, spec, 1.0f, PH, &n), ELIZA_OK);
    }

    /* A model without kokoro.voice_languages: "" for every voice. */
    CHECK(eliza_tts_voice_language(tts, 0) && strcmp(eliza_tts_voice_language(tts, 0), "") == 0);
    CHECK(eliza_tts_voice_gender(tts, 0) && strcmp(eliza_tts_voice_gender(tts, 0), "") == 0);
    CHECK(eliza_tts_voice_language(tts, -1) == NULL && eliza_tts_voice_gender(tts, 100000) == NULL);
    {
        /* Text in a language without a G2P fails at open, before espeak-ng. */
        eliza_tts_config c;
        eliza_tts_stream *s = NULL;
        char *ph = NULL;
        eliza_tts_default_config(&c);
        c.text = "Hello.";
        c.language = "ja";
        CHECK_RC(eliza_tts_stream_open(tts, &c, &s), ELIZA_E_UNSUPPORTED);
        CHECK(s == NULL && strstr(eliza_last_error(), "Japanese") != NULL);
        CHECK_RC(eliza_tts_phonemize_language(tts, "Hello.", "zh", &ph), ELIZA_E_UNSUPPORTED);
        CHECK(ph == NULL);
        c.flags = PH; /* phonemes need no G2P */
        c.text = PHONEMES;
        CHECK_RC(eliza_tts_stream_open(tts, &c, &s), ELIZA_OK);
        eliza_tts_stream_close(s);
    }
    {
        /* Chunks fade to 0 at their seams (this model's 38-phoneme chunks
         * are too short for the first chunk's clause cut: the Python tests
         * pin that). */
        const char *line = "hello world test,\nhello world test: hello.";
        eliza_tts_config c;
        eliza_tts_stream *s = NULL;
        eliza_tts_chunk chunk;
        eliza_tts_default_config(&c);
        c.text = line;
        c.flags = PH;
        CHECK_RC(eliza_tts_stream_open(tts, &c, &s), ELIZA_OK);
        memset(&chunk, 0, sizeof chunk);
        chunk.struct_size = sizeof chunk;
        CHECK_RC(eliza_tts_stream_next(s, &chunk), ELIZA_OK);
        CHECK(strcmp(chunk.phonemes, "hello world test,") == 0);
        CHECK(chunk.n_samples > 0 && chunk.pcm[chunk.n_samples - 1] == 0.0f);
        CHECK_RC(eliza_tts_stream_next(s, &chunk), ELIZA_OK);
        CHECK(strcmp(chunk.phonemes, "hello world test: hello.") == 0);
        CHECK(chunk.n_samples > 0 && chunk.pcm[0] == 0.0f && chunk.pcm[chunk.n_samples - 1] == 0.0f);
        CHECK_RC(eliza_tts_stream_next(s, &chunk), ELIZA_DONE);
        eliza_tts_stream_close(s);
    }

    /* 50,000 code points on one line: only the first chunk is made here. */
    big = (char *)malloc(50001);
    CHECK(big != NULL);
    if (big) {
        eliza_tts_config c;
        eliza_tts_stream *s = NULL;
        eliza_tts_chunk chunk;
        memset(big, 'a', 50000);
        for (int i = 7; i < 50000; i += 8) big[i] = ' ';
        big[50000] = '\0';
        eliza_tts_default_config(&c);
        c.text = big;
        c.flags = PH;
        CHECK_RC(eliza_tts_stream_open(tts, &c, &s), ELIZA_OK);
        free(big); /* the stream holds its own copy */
        memset(&chunk, 0, sizeof chunk);
        chunk.struct_size = sizeof chunk;
        CHECK_RC(eliza_tts_stream_next(s, &chunk), ELIZA_OK);
        CHECK(chunk.index == 0 && chunk.n_samples > 0 && strlen(chunk.phonemes) <= 510);
        CHECK_RC(eliza_tts_stream_open(tts, &c, &(eliza_tts_stream *){NULL}), ELIZA_E_STATE);
        eliza_tts_stream_close(s);
    }
    eliza_tts_close(tts);
}

typedef struct {
    eliza_tts_stream *stream;
    int delay_ms;
} cancel_job;

static void cancel_later(void *arg) {
    cancel_job *job = (cancel_job *)arg;
    uint64_t until = ez_time_ns() + (uint64_t)job->delay_ms * 1000000u;
    while (ez_time_ns() < until) {
    }
    eliza_tts_stream_cancel(job->stream);
}

static void test_tts_cancel_from_another_thread(void) {
    eliza_tts *tts = open_model();
    eliza_tts_config c;
    eliza_tts_stream *s = NULL;
    eliza_tts_chunk chunk;
    cancel_job job;
    ez_thread *t;
    enum { LINES = 2000 };
    static char text[LINES * 33 + 1];
    size_t len = 0;
    int32_t rc;
    uint32_t n_chunks = 0;
    if (!tts) return;
    /* Many lines of 28 code points (within the tiny test model's chunks
     * too): far more work than the 30 ms before the cancel, on any model. */
    for (int line = 0; line < LINES; line++) {
        for (int w = 0; w < 4; w++) {
            memcpy(text + len, "ab\xCB\x88" "cde ", 8);
            len += 8;
        }
        text[len++] = '\n';
    }
    text[len] = '\0';
    eliza_tts_default_config(&c);
    c.text = text;
    c.flags = ELIZA_TTS_PHONEMES;
    CHECK_RC(eliza_tts_stream_open(tts, &c, &s), ELIZA_OK);
    memset(&chunk, 0, sizeof chunk);
    chunk.struct_size = sizeof chunk;
    job.stream = s;
    job.delay_ms = 30;
    t = ez_thread_start(cancel_later, &job);
    CHECK(t != NULL);
    while ((rc = eliza_tts_stream_next(s, &chunk)) == ELIZA_OK) n_chunks++;
    ez_thread_join(t);
    CHECK_RC(rc, ELIZA_E_CANCELLED);
    CHECK(n_chunks < LINES);
    CHECK_RC(eliza_tts_stream_next(s, &chunk), ELIZA_E_CANCELLED);
    eliza_tts_stream_close(s);
    /* The slot is free again. */
    CHECK_RC(synth(tts, PHONEMES, NULL, 1.0f, ELIZA_TTS_PHONEMES, NULL), ELIZA_OK);
    eliza_tts_close(tts);
}

typedef struct {
    const char *name;
    void (*fn)(void);
    int needs_model;
} test_case;

int main(void) {
    static const test_case tests[] = {
        {"test_tts_defaults", test_tts_defaults, 0},
        {"test_tts_nulls_are_refused", test_tts_nulls_are_refused, 0},
        {"test_tts_open_refuses_bad_files", test_tts_open_refuses_bad_files, 0},
        {"test_tts_synthesis_and_bad_config", test_tts_synthesis_and_bad_config, 1},
        {"test_tts_cancel_from_another_thread", test_tts_cancel_from_another_thread, 1},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (tests[i].needs_model && !model_path()) {
            printf("skip %s (set ELIZA_TTS_TEST_MODEL to a Kokoro GGUF)\n", tests[i].name);
            continue;
        }
        g_failed = 0;
        tests[i].fn();
        printf("%s %s\n", g_failed ? "FAIL" : "ok  ", tests[i].name);
        fflush(stdout);
        failed += g_failed;
    }
    return failed ? 1 : 0;
}
