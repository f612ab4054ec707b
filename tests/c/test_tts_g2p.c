/* G2P: the text side (phonemizer's punctuation handling, misaki's rewriting,
 * sentences, chunks, refusal of bad text) against a stand-in espeak that
 * returns its input, with expectations computed by running misaki 0.9.4 with
 * the same stand-in patched into phonemizer; then, when libespeak-ng can be
 * loaded, the real thing: voices, two handles, threads, bad paths.
 *
 * espeak-ng is looked for in $ELIZA_ESPEAK_LIBRARY (data: $ELIZA_ESPEAK_DATA),
 * then the system. When $ELIZA_ESPEAK_LIBRARY is set it is expected: failing
 * to load it fails the test; otherwise its part is skipped with a note.
 *
 * With arguments it is the tool tests/tts/test_g2p.py drives:
 *   test_tts_g2p phonemize MAX_CHUNK IN OUT
 *   test_tts_g2p whole IN OUT
 *       IN: records [u32 LE length][bytes]; OUT: "version <espeak-ng version>",
 *       then per record "ok <hex of the output>" or "error <code> <hex of
 *       the message>"; `phonemize` is ez_g2p_phonemize (lines joined by
 *       '\n'), `whole` one misaki call on the record. The espeak voice is
 *       $ELIZA_TEST_G2P_LANGUAGE, else en-us. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/platform.h"
#include "eliza.h"
#include "tts/g2p.h"
#include "tts/g2p_en.h"
#include "tts/g2p_impl.h"
#include "check.h"

/* ---- the stand-in espeak: its input back, but for a few fixed pieces -------- */

static int g_fake_calls;

static int32_t fake_espeak(void *ctx, const char *text, ez_strbuf *out) {
    static const char *const k_override[][2] = {
        /* a language switch, '_' separators, a clause break, double spaces */
        {"flags", "\xc9\x90 (fr)\xca\x92\xc9\x99(en) _b__ c_\nd  e"},
        /* every tie misaki maps, and a '-' */
        {"ties", "a\xcd\xa1\xc9\xaa t\xcd\xa1\xca\x83-o\xcd\xa1\xca\x8a d\xcd\xa1z "
                 "\xc9\x94\xcd\xa1\xc9\xaa s\xcd\xa1s"},
        {"nothing", ""},
        {"NOTHING", ""},
        {"clauses", " one \n two "},
    };
    size_t i;
    (void)ctx;
    g_fake_calls++;
    for (i = 0; i < sizeof k_override / sizeof k_override[0]; i++)
        if (strcmp(text, k_override[i][0]) == 0) {
            ez_sb_puts(out, k_override[i][1]);
            return ELIZA_OK;
        }
    ez_sb_puts(out, text);
    return ELIZA_OK;
}

static int32_t failing_espeak(void *ctx, const char *text, ez_strbuf *out) {
    (void)ctx, (void)text, (void)out;
    return ez_fail(ELIZA_E_INTERNAL, "stand-in failure");
}

static char *misaki(const char *text) {
    ez_strbuf sb = {0};
    int32_t rc = ez_g2p_misaki(text, strlen(text), 0, fake_espeak, NULL, &sb);
    if (rc < 0) {
        ez_sb_free(&sb);
        return NULL;
    }
    return ez_sb_take(&sb);
}

static char *run(const char *text, int max_chunk, int32_t *rc) {
    ez_strbuf sb = {0};
    *rc = ez_g2p_run(text, strlen(text), max_chunk, fake_espeak, NULL, &sb);
    return ez_sb_take(&sb);
}

#define CHECK_MISAKI(text, want)                                                            \
    do {                                                                                    \
        char *got_ = misaki(text);                                                          \
        if (!got_ || strcmp(got_, want) != 0) {                                             \
            fprintf(stderr, "%s:%d: misaki(\"%s\") gave \"%s\", expected \"%s\"\n", __FILE__, \
                    __LINE__, text, got_ ? got_ : "(error)", want);                         \
            g_failed = 1;                                                                   \
        }                                                                                   \
        free(got_);                                                                         \
    } while (0)

#define CHECK_RUN(text, max_chunk, want)                                                    \
    do {                                                                                    \
        int32_t rc_;                                                                        \
        char *got_ = run(text, max_chunk, &rc_);                                            \
        if (rc_ != ELIZA_OK || !got_ || strcmp(got_, want) != 0) {                          \
            fprintf(stderr, "%s:%d: run(\"%s\", %d) gave rc %d \"%s\", expected \"%s\"\n",  \
                    __FILE__, __LINE__, text, max_chunk, rc_, got_ ? got_ : "", want);      \
            g_failed = 1;                                                                   \
        }                                                                                   \
        free(got_);                                                                         \
    } while (0)

/* Expected values: misaki 0.9.4 EspeakG2P(language="en-us") with
 * EspeakWrapper.text_to_phonemes replaced by the same stand-in. */
static void test_g2p_restores_punctuation_as_phonemizer(void) {
    CHECK_MISAKI("Hello, world!", "Hello, world!");
    CHECK_MISAKI("(Parens) and \xc2\xab" "angles\xc2\xbb", "(Parens) and \xe2\x80\x9c" "angles\xe2\x80\x9d");
    CHECK_MISAKI("\"Quoted\" text", "\"Quoted\" text");
    CHECK_MISAKI("[x] {y}", "[x] {y}");
    CHECK_MISAKI("\xc2\xa1Hola! \xc2\xbfQu\xc3\xa9?", "\xc2\xa1Hola! \xc2\xbfQu\xc3\xa9?");
    CHECK_MISAKI("Wait\xe2\x80\xa6 what\xe2\x80\x94really?", "Wait\xe2\x80\xa6 what\xe2\x80\x94really?");
    CHECK_MISAKI("end.", "end.");
    CHECK_MISAKI(".start", ".start");
    CHECK_MISAKI("a.b.c", "a.b.c");
    CHECK_MISAKI("A , B ,C", "A , B ,C");
    /* NBSP and ideographic space count as whitespace around marks and at the ends */
    CHECK_MISAKI("x\xc2\xa0, y\xe3\x80\x80", "x\xc2\xa0, y");
    /* an empty piece loses the space before the next mark, as in restore() */
    CHECK_MISAKI("nothing, nothing.", ",.");
    CHECK_MISAKI("a, nothing, b", "a,, b");
}

static void test_g2p_only_punctuation_and_empty(void) {
    CHECK_MISAKI("...", "...");
    CHECK_MISAKI(" . ! ", ". !");
    CHECK_MISAKI("", "");
    CHECK_MISAKI("   ", "");
    /* ... but the pipeline has nothing to say for them */
    CHECK_RUN("...", 510, "");
    CHECK_RUN(" (!) \n\n  \n", 510, "");
    CHECK_RUN("", 510, "");
}

static void test_g2p_postprocesses_espeak_output(void) {
    CHECK_MISAKI("flags", "\xc9\x90 \xca\x92\xc9\x99 _b c d e");
    CHECK_MISAKI("ties", "I \xca\xa7O \xca\xa3 Y S");
    CHECK_MISAKI("clauses; ok", "one  two; ok");
    CHECK_MISAKI("a -- b", "a  b");
}

static void test_g2p_splits_lines_and_sentences(void) {
    CHECK_RUN("Hello. World!", 510, "Hello.\nWorld!");
    CHECK_RUN("One.\nTwo\n\nThree?! Four", 510, "One.\nTwo\nThree?!\nFour");
    /* no cut before a lower-case word, after an abbreviation or an initial */
    CHECK_RUN("It is 5 p.m. now. ok then.", 510, "It is 5 p.m. now. ok then.");
    CHECK_RUN("Dr. Smith met J. Doe. Then left.", 510, "Dr. Smith met J. Doe.\nThen left.");
    /* closing quotes and brackets stay with their sentence */
    CHECK_RUN("He said \"Stop!\" Then (quietly.) Left.", 510,
              "He said \"Stop!\"\nThen (quietly.)\nLeft.");
    /* no cut where restore() eats the space (an empty piece follows) */
    CHECK_RUN("Hello. NOTHING. World.", 510, "Hello..\nWorld.");
    CHECK_RUN("Hello. NOTHING", 510, "Hello.");
    /* a sentence with nothing to say joins its neighbour */
    CHECK_RUN("Hello! \xe2\x80\x94NOTHING", 510, "Hello! \xe2\x80\x94");
    CHECK_RUN("NOTHING. Hello. World", 510, ". Hello.\nWorld");
    /* a leading run opens the sentence instead of ending one */
    CHECK_RUN("... Well. Yes", 510, "... Well.\nYes");
}

static void test_g2p_chunks_at_word_boundaries(void) {
    /* 23 code points: "aaa bbb, ccc ddd. eee f" */
    CHECK_RUN("aaa bbb, ccc ddd. eee f", 23, "aaa bbb, ccc ddd. eee f");
    CHECK_RUN("aaa bbb ccc ddd eee f", 17, "aaa bbb ccc ddd\neee f");
    /* the last break after .!?… wins, then :; then , or — (Kokoro's waterfall) */
    CHECK_RUN("aaa bbb, ccc ddd eee f", 17, "aaa bbb,\nccc ddd eee f");
    CHECK_RUN("a; b. c, d e f g h", 15, "a; b.\nc, d e f g h");
    CHECK_RUN("a; b: c, d e f g h", 15, "a; b:\nc, d e f g h");
    CHECK_RUN("a (b.) c, d e f g", 15, "a (b.)\nc, d e f g");
    CHECK_RUN("aaa bbb ccc", 7, "aaa bbb\nccc");
    CHECK_RUN("aaa bbb ccc", 6, "aaa\nbbb\nccc");
    /* a word longer than the limit is cut inside; code points, not bytes */
    CHECK_RUN("abcdefgh", 3, "abc\ndef\ngh");
    CHECK_RUN("\xc3\xa9\xc3\xa9\xc3\xa9 x", 2, "\xc3\xa9\xc3\xa9\n\xc3\xa9\nx");
}

static void test_g2p_refuses_bad_text(void) {
    static const char *const bad[] = {
        "\xff", "a\xc3", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
        "\xf8\x88\x80\x80\x80",
    };
    ez_strbuf sb = {0};
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        g_fake_calls = 0;
        CHECK_RC(ez_g2p_run(bad[i], strlen(bad[i]), 510, fake_espeak, NULL, &sb), ELIZA_E_INVALID_ARG);
        CHECK(g_fake_calls == 0 && sb.len == 0);
    }
    CHECK_RC(ez_g2p_run("ok a\xc3", 5, 510, fake_espeak, NULL, &sb), ELIZA_E_INVALID_ARG);
    CHECK(strstr(ez_error_message(), "offset 4") != NULL);
    CHECK_RC(ez_g2p_run("a\0b", 3, 510, fake_espeak, NULL, &sb), ELIZA_E_INVALID_ARG);
    CHECK(strstr(ez_error_message(), "NUL byte at offset 1") != NULL);
    CHECK_RC(ez_g2p_run("a", 1, 0, fake_espeak, NULL, &sb), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_g2p_run(NULL, 1, 510, fake_espeak, NULL, &sb), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_g2p_run(NULL, 0, 510, fake_espeak, NULL, &sb), ELIZA_OK);
    /* valid edge code points pass */
    {
        static const char edge[] = "\xf4\x8f\xbf\xbf \xed\x9f\xbf \xef\xbf\xbf \xc2\x80";
        CHECK_RC(ez_g2p_run(edge, sizeof edge - 1, 510, fake_espeak, NULL, &sb), ELIZA_OK);
    }
    /* espeak's failure comes back as is */
    CHECK_RC(ez_g2p_run("a, b", 4, 510, failing_espeak, NULL, &sb), ELIZA_E_INTERNAL);
    ez_sb_free(&sb);
}

/* 50,000 characters in one line, in one sentence and in many: linear time. */
static void test_g2p_long_text_in_bounded_time(void) {
    enum { N = 50000 };
    static const char *const unit[] = {"word ", "a, b. ", "X.\t", "(\xc3\xa9!) "};
    size_t u;
    for (u = 0; u < sizeof unit / sizeof unit[0]; u++) {
        char *text = (char *)malloc(N + 1);
        ez_strbuf sb = {0};
        size_t i, n = strlen(unit[u]), lines = 0, longest = 0, cur = 0;
        uint64_t t0;
        for (i = 0; i + n <= N; i += n) memcpy(text + i, unit[u], n);
        text[i] = '\0';
        t0 = ez_time_ns();
        CHECK_RC(ez_g2p_run(text, strlen(text), 510, fake_espeak, NULL, &sb), ELIZA_OK);
        CHECK(ez_time_ns() - t0 < 2000000000ull);
        printf("test_tts_g2p: 50,000 characters of \"%s\" in %.3f s\n", unit[u], (double)(ez_time_ns() - t0) * 1e-9);
        for (i = 0; i < sb.len; i++) {
            if (sb.data[i] == '\n') {
                lines++;
                cur = 0;
            } else if (((unsigned char)sb.data[i] & 0xC0) != 0x80) {
                cur++;
                if (cur > longest) longest = cur;
            }
        }
        CHECK(longest <= 510 && lines > 0);
        ez_sb_free(&sb);
        free(text);
    }
}

/* Random UTF-8 (marks, spaces, letters, multi-byte): no crash, output is
 * valid UTF-8 and within the chunk limit. */
static void test_g2p_random_text(void) {
    static const char *const atoms[] = {"a", "b", "Z", " ", "  ", ".", ",", "!", "?", "(", ")", "\"",
                                        "\xc2\xab", "\xc2\xbb", "\xe2\x80\xa6", "\xe2\x80\x94", "\xc3\xa9",
                                        "\xc2\xa0", "\n", "-", "_", "^", "\xf0\x9f\x98\x80", "ties", "flags"};
    uint64_t s = 0x9e3779b97f4a7c15ull;
    int it;
    for (it = 0; it < 2000; it++) {
        ez_strbuf text = {0}, out = {0};
        int n, k, max_chunk;
        size_t i, cur = 0;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        n = (int)(s >> 59);
        max_chunk = 1 + (int)((s >> 40) % 12);
        for (k = 0; k < n; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            ez_sb_puts(&text, atoms[(s >> 33) % (sizeof atoms / sizeof atoms[0])]);
        }
        CHECK_RC(ez_g2p_run(text.data, text.len, max_chunk, fake_espeak, NULL, &out), ELIZA_OK);
        CHECK_RC(ez_g2p_check_text(out.data, out.len), ELIZA_OK);
        for (i = 0; i < out.len; i++) {
            if (out.data[i] == '\n') cur = 0;
            else if (((unsigned char)out.data[i] & 0xC0) != 0x80) cur++;
            if (cur > (size_t)max_chunk) break;
        }
        CHECK(i == out.len);
        ez_sb_free(&text);
        ez_sb_free(&out);
    }
}

/* ---- real espeak-ng ------------------------------------------------------------ */

typedef struct {
    ez_g2p *g;
    const char *text;
    char *out;
    int32_t rc;
} job;

static void job_run(void *p) {
    job *j = (job *)p;
    int rep;
    for (rep = 0; rep < 20 && j->rc == ELIZA_OK; rep++) {
        ez_strbuf sb = {0};
        j->rc = ez_g2p_phonemize(j->g, j->text, strlen(j->text), 510, &sb);
        if (j->rc == ELIZA_OK) {
            char *s = ez_sb_take(&sb);
            if (j->out && s && strcmp(j->out, s) != 0) j->rc = ELIZA_E_INTERNAL;
            free(j->out);
            j->out = s;
        }
        ez_sb_free(&sb);
    }
}

static char *phonemize(ez_g2p *g, const char *text) {
    ez_strbuf sb = {0};
    if (ez_g2p_phonemize(g, text, strlen(text), 510, &sb) != ELIZA_OK) {
        fprintf(stderr, "phonemize(\"%s\"): %s\n", text, ez_error_message());
        ez_sb_free(&sb);
        return NULL;
    }
    return ez_sb_take(&sb);
}

static void test_g2p_espeak(void) {
    const char *expected = getenv("ELIZA_ESPEAK_LIBRARY");
    ez_g2p *us = NULL, *gb = NULL, *bad = NULL;
    char *a, *b;
    int32_t rc = ez_g2p_open(NULL, NULL, NULL, &us);
    job jobs[2];
    ez_thread *th[2];
    int i;

    if (rc != ELIZA_OK) {
        CHECK_RC(rc, ELIZA_E_UNSUPPORTED);
        CHECK(strstr(ez_error_message(), "espeakng-loader") != NULL);
        if (expected && *expected) {
            fprintf(stderr, "espeak-ng from $ELIZA_ESPEAK_LIBRARY=%s did not load: %s\n", expected,
                    ez_error_message());
            g_failed = 1;
        } else {
            printf("test_tts_g2p: no espeak-ng here (%s); its part is skipped\n", ez_error_message());
        }
        return;
    }
    printf("test_tts_g2p: espeak-ng %s\n", ez_g2p_espeak_version(us));

    a = phonemize(us, "Hello, world!");
    CHECK(a != NULL && a[0] != '\0');
    if (a && strncmp(ez_g2p_espeak_version(us), "1.52", 4) == 0)
        CHECK(strcmp(a, "h\xc9\x99l\xcb\x88O, w\xcb\x88\xc9\x9c\xcb\x90ld!") == 0); /* həlˈO, wˈɜːld! */
    free(a);

    /* a second handle with another voice; closing it leaves the first working */
    CHECK_RC(ez_g2p_open(NULL, NULL, "en-gb", &gb), ELIZA_OK);
    a = phonemize(us, "tomato water");
    b = gb ? phonemize(gb, "tomato water") : NULL;
    CHECK(a && b && strcmp(a, b) != 0);
    ez_g2p_close(gb);
    free(b);
    b = phonemize(us, "tomato water");
    CHECK(a && b && strcmp(a, b) == 0);
    free(b);

    /* two threads, two voices, the same answers as one at a time */
    CHECK_RC(ez_g2p_open(NULL, NULL, "en-gb", &gb), ELIZA_OK);
    if (gb) {
        jobs[0] = (job){us, "tomato water", NULL, ELIZA_OK};
        jobs[1] = (job){gb, "tomato water", NULL, ELIZA_OK};
        for (i = 0; i < 2; i++) th[i] = ez_thread_start(job_run, &jobs[i]);
        for (i = 0; i < 2; i++) ez_thread_join(th[i]);
        CHECK(jobs[0].rc == ELIZA_OK && jobs[1].rc == ELIZA_OK);
        CHECK(jobs[0].out && a && strcmp(jobs[0].out, a) == 0);
        CHECK(jobs[1].out && jobs[0].out && strcmp(jobs[1].out, jobs[0].out) != 0);
        free(jobs[0].out);
        free(jobs[1].out);
    }
    free(a);
    ez_g2p_close(gb);

    CHECK_RC(ez_g2p_open(NULL, NULL, "xx-no-such-language", &bad), ELIZA_E_NOT_FOUND);
    CHECK(bad == NULL);
    CHECK_RC(ez_g2p_open("/nonexistent/libespeak-ng.so.1", NULL, NULL, &bad), ELIZA_E_UNSUPPORTED);
    CHECK(strstr(ez_error_message(), "/nonexistent/libespeak-ng.so.1") != NULL);
    CHECK_RC(ez_g2p_open(NULL, "/nonexistent/espeak-ng-data", NULL, &bad), ELIZA_E_INVALID_ARG);
    CHECK(bad == NULL);

    {
        ez_strbuf sb = {0};
        CHECK_RC(ez_g2p_phonemize(us, "caf\xc3", 4, 510, &sb), ELIZA_E_INVALID_ARG);
        CHECK_RC(ez_g2p_phonemize(us, "", 0, 510, &sb), ELIZA_OK);
        CHECK_RC(ez_g2p_phonemize(us, "?!", 2, 510, &sb), ELIZA_OK);
        CHECK(sb.len == 0);
        ez_sb_free(&sb);
    }
    ez_g2p_close(us);
    ez_g2p_close(NULL);
}

/* ---- the tool -------------------------------------------------------------------- */

static void put_hex(FILE *f, const char *s, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) fprintf(f, "%02x", (unsigned char)s[i]);
}

static int tool(int whole, int max_chunk, const char *in_path, const char *out_path) {
    FILE *in = fopen(in_path, "rb"), *out = fopen(out_path, "wb");
    ez_g2p *g = NULL;
    int32_t rc;
    int status = 0;

    if (!in || !out) {
        fprintf(stderr, "cannot open %s or %s\n", in_path, out_path);
        if (in) fclose(in);
        if (out) fclose(out);
        return 2;
    }
    rc = ez_g2p_open(NULL, NULL, getenv("ELIZA_TEST_G2P_LANGUAGE"), &g);
    if (rc != ELIZA_OK) {
        fprintf(stderr, "ez_g2p_open: %s\n", ez_error_message());
        fclose(in);
        fclose(out);
        return 3;
    }
    /* $ELIZA_TEST_G2P_LEXICON: misaki's English G2P with that lexicon
     * file, British when the language is en-gb */
    if (getenv("ELIZA_TEST_G2P_LEXICON")) {
        const char *lang = getenv("ELIZA_TEST_G2P_LANGUAGE");
        rc = ez_g2p_use_lexicon(g, getenv("ELIZA_TEST_G2P_LEXICON"), lang && strcmp(lang, "en-gb") == 0);
        if (rc != ELIZA_OK) {
            fprintf(stderr, "ez_g2p_use_lexicon: %s\n", ez_error_message());
            ez_g2p_close(g);
            fclose(in);
            fclose(out);
            return 3;
        }
    }
    fprintf(out, "version %s\n", ez_g2p_espeak_version(g));
    for (;;) {
        unsigned char hdr[4];
        uint32_t n;
        char *text;
        ez_strbuf sb = {0};
        if (fread(hdr, 1, 4, in) != 4) break;
        n = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 24;
        text = (char *)malloc(n ? n : 1);
        if (!text || fread(text, 1, n, in) != n) {
            fprintf(stderr, "truncated record\n");
            free(text);
            status = 2;
            break;
        }
        rc = whole ? ez_g2p_phonemize_whole(g, text, n, &sb) : ez_g2p_phonemize(g, text, n, max_chunk, &sb);
        if (rc == ELIZA_OK) {
            fputs("ok ", out);
            put_hex(out, sb.data, sb.len);
        } else {
            const char *msg = ez_error_message();
            fprintf(out, "error %d ", rc);
            put_hex(out, msg, strlen(msg));
        }
        fputc('\n', out);
        ez_sb_free(&sb);
        free(text);
    }
    ez_g2p_close(g);
    fclose(in);
    if (fclose(out) != 0) status = 2;
    return status;
}

/* num2words 0.5's words (its "and"s and punctuation dropped, as misaki does). */
static void test_g2p_en_number_words(void) {
    static const struct {
        int kind;
        const char *digits, *words;
    } k[] = {
        {'c', "0", "zero"}, {'c', "15", "fifteen"}, {'c', "100", "one hundred"},
        {'c', "1100", "one thousand one hundred"}, {'c', "1000050", "one million fifty"},
        {'c', "123456789", "one hundred twenty three million four hundred fifty six thousand seven hundred eighty nine"},
        {'o', "21", "twenty first"}, {'o', "20", "twentieth"}, {'o', "12", "twelfth"}, {'o', "100", "one hundredth"},
        {'y', "1905", "nineteen oh five"}, {'y', "2005", "two thousand five"}, {'y', "2010", "twenty ten"},
        {'y', "1900", "nineteen hundred"}, {'f', "3.10", "three point one"}, {'f', "2.0", "two"},
        {'f', ".5", "zero point five"},
    };
    char out[512];
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        CHECK(ez_g2p_en_number_words(k[i].kind, k[i].digits, out, sizeof out));
        CHECK_MSG(strcmp(out, k[i].words) == 0, "%c %s: '%s', want '%s'", k[i].kind, k[i].digits, out, k[i].words);
    }
    CHECK(!ez_g2p_en_number_words('c', "1234567890123456789", out, sizeof out)); /* 19 digits */
    CHECK(!ez_g2p_en_number_words('c', "1234", out, 8));                         /* too small */
    CHECK(!ez_g2p_en_number_words('c', "12a", out, sizeof out));
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "phonemize") == 0) return tool(0, atoi(argv[2]), argv[3], argv[4]);
    if (argc == 4 && strcmp(argv[1], "whole") == 0) return tool(1, 0, argv[2], argv[3]);
    if (argc != 1) {
        fprintf(stderr, "usage: %s [phonemize MAX_CHUNK IN OUT | whole IN OUT]\n", argv[0]);
        return 2;
    }
    test_g2p_restores_punctuation_as_phonemizer();
    test_g2p_only_punctuation_and_empty();
    test_g2p_postprocesses_espeak_output();
    test_g2p_splits_lines_and_sentences();
    test_g2p_chunks_at_word_boundaries();
    test_g2p_refuses_bad_text();
    test_g2p_long_text_in_bounded_time();
    test_g2p_random_text();
    test_g2p_espeak();
    test_g2p_en_number_words();
    if (g_failed) {
        fprintf(stderr, "test_tts_g2p: FAILED\n");
        return 1;
    }
    printf("test_tts_g2p: ok\n");
    return 0;
}
