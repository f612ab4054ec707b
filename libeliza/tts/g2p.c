/* espeak-ng for the G2P: found and loaded at run time (it is GPL-3.0 and is
 * never linked), initialised once per process and library, and called under
 * a lock because it keeps all of its state in globals. The text around it
 * is g2p_text.c.
 *
 * The calls are phonemizer's: espeak_Initialize's steps (through the
 * espeak_ng_* functions, which report a failure instead of printing it and
 * calling exit()), the voice chosen as phonemizer chooses it (the first
 * voice from espeak_ListVoices whose first language is `language`), and
 * espeak_TextToPhonemes with UTF-8 text, IPA output and U+0361 ties.
 *
 * A loaded library stays loaded and initialised until the process exits:
 * espeak-ng cannot be re-initialised reliably, and closing one ez_g2p must
 * not break another. */
#include <locale.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/platform.h"
#include "tts/g2p.h"
#include "tts/g2p_en.h"
#include "tts/g2p_impl.h"

/* From espeak-ng's speak_lib.h / espeak_ng.h (stable since 1.49). */
typedef struct {
    const char *name;
    const char *languages; /* (priority byte, language, NUL) pairs, then NUL */
    const char *identifier;
    unsigned char gender, age, variant, xx1;
    int score;
    void *spare;
} espeak_voice;

enum {
    ESPEAK_OUTPUT_SYNCHRONOUS = 0x0001, /* ENOUTPUT_MODE_SYNCHRONOUS */
    ESPEAK_CHARS_UTF8 = 1,              /* espeakCHARS_UTF8 */
    /* phonememode: bit 1 IPA, bit 7 tie character in bits 8-23 (U+0361),
     * as phonemizer asks for with tie=True */
    ESPEAK_PHONEMES_IPA_TIE = 0x02 | (1 << 7) | (0x361 << 8)
};

typedef struct espeak_lib {
    struct espeak_lib *next;
    void *handle;
    char *data;       /* data directory it was initialised with; NULL = its default */
    ez_mutex *lock;   /* serialises every call into it */
    char *voice;      /* identifier of the voice set last; NULL before the first */
    const char *version;
    void (*initialize_path)(const char *path);
    int (*initialize)(void **context);
    int (*initialize_output)(int mode, int buffer_ms, const char *device);
    void (*status_message)(int status, char *buf, size_t size);
    void (*clear_context)(void **context);
    const espeak_voice **(*list_voices)(espeak_voice *selector);
    int (*set_voice_by_name)(const char *name);
    const char *(*text_to_phonemes)(const void **text, int textmode, int phonememode);
    const char *(*info)(const char **data_path);
} espeak_lib;

struct ez_g2p {
    espeak_lib *lib;
    char *voice;   /* espeak voice identifier, e.g. "gmw/en-US" */
    ez_g2p_en *en; /* misaki's English G2P (ez_g2p_use_lexicon); NULL = espeak only */
};

static espeak_lib *g_libs; /* every library loaded so far; under ez_global_lock */

static const char *const k_system_names[] = {
#if defined(_WIN32)
    "libespeak-ng.dll", "espeak-ng.dll",
#elif defined(__APPLE__)
    "libespeak-ng.1.dylib", "libespeak-ng.dylib",
    "/opt/homebrew/lib/libespeak-ng.1.dylib", "/usr/local/lib/libespeak-ng.1.dylib",
#else
    "libespeak-ng.so.1", "libespeak-ng.so",
#endif
};

#define HOW_TO_GET_ESPEAK                                                                         \
    "`pip install espeakng-loader` and pass espeakng_loader.get_library_path() and "             \
    "get_data_path() as espeak_library and espeak_data (or set $ELIZA_ESPEAK_LIBRARY and "        \
    "$ELIZA_ESPEAK_DATA), or install the system library (apt install libespeak-ng1, "             \
    "brew install espeak-ng); or pass phonemes instead of text (ELIZA_TTS_PHONEMES)"

static char *dup_str(const char *s) {
    size_t n;
    char *d;
    if (!s) return NULL;
    n = strlen(s) + 1;
    d = (char *)malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static const char *env_or_null(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Resolves every symbol we use; 0 and a message naming the first missing one. */
static int resolve(espeak_lib *L, const char *name) {
#define SYM(field, sym)                                                                       \
    do {                                                                                      \
        void *p_ = ez_dlsym(L->handle, sym);                                                  \
        if (!p_) {                                                                            \
            ez_fail(ELIZA_E_UNSUPPORTED, "'%s' has no symbol %s: it is not libespeak-ng "     \
                    "1.49 or later; " HOW_TO_GET_ESPEAK, name, sym);                          \
            return 0;                                                                         \
        }                                                                                     \
        memcpy(&L->field, &p_, sizeof p_);                                                    \
    } while (0)
    SYM(initialize_path, "espeak_ng_InitializePath");
    SYM(initialize, "espeak_ng_Initialize");
    SYM(initialize_output, "espeak_ng_InitializeOutput");
    SYM(status_message, "espeak_ng_GetStatusCodeMessage");
    SYM(clear_context, "espeak_ng_ClearErrorContext");
    SYM(list_voices, "espeak_ListVoices");
    SYM(set_voice_by_name, "espeak_SetVoiceByName");
    SYM(text_to_phonemes, "espeak_TextToPhonemes");
    SYM(info, "espeak_Info");
#undef SYM
    return 1;
}

/* espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, data, 0) without its
 * printing and exit(1) on failure. */
static int32_t initialize(espeak_lib *L, const char *name, const char *data) {
    void *context = NULL;
    char msg[256];
    int st;
    /* espeak_ng_Initialize sets LC_CTYPE to C.UTF-8 for the whole process;
     * the host's locale is put back (espeak-ng 1.52 phonemizes the same
     * either way: its character classes are its own) */
    char *locale = dup_str(setlocale(LC_CTYPE, NULL));

    L->initialize_path(data);
    st = L->initialize(&context);
    if (locale) setlocale(LC_CTYPE, locale);
    free(locale);
    if (st != 0) {
        msg[0] = '\0';
        L->status_message(st, msg, sizeof msg);
        L->clear_context(&context);
        return ez_fail(ELIZA_E_UNSUPPORTED,
                       "espeak-ng '%s' did not start with data directory '%s': %s (status 0x%x); "
                       "pass the espeak-ng-data directory as espeak_data or $ELIZA_ESPEAK_DATA "
                       "(espeakng-loader's is espeakng_loader.get_data_path())",
                       name, data ? data : "(its default)", msg, (unsigned)st);
    }
    st = L->initialize_output(ESPEAK_OUTPUT_SYNCHRONOUS, 0, NULL);
    if (st != 0)
        return ez_fail(ELIZA_E_NOMEM, "espeak-ng '%s': espeak_ng_InitializeOutput failed (status 0x%x)", name,
                       (unsigned)st);
    L->version = L->info(NULL);
    return ELIZA_OK;
}

/* The process's espeak_lib for `library` (NULL: the system's), loaded and
 * initialised with `data` on first use. Called under ez_global_lock. */
static int32_t acquire(const char *library, const char *data, espeak_lib **out) {
    void *handle = NULL;
    const char *name = library;
    espeak_lib *L;
    size_t i;
    int32_t rc;

    if (library) {
        handle = ez_dlopen(library);
        if (!handle)
            return ez_fail(ELIZA_E_UNSUPPORTED, "cannot load libespeak-ng '%s' (espeak_library or "
                           "$ELIZA_ESPEAK_LIBRARY); " HOW_TO_GET_ESPEAK, library);
    } else {
        char tried[256] = "";
        for (i = 0; i < sizeof k_system_names / sizeof k_system_names[0] && !handle; i++) {
            name = k_system_names[i];
            handle = ez_dlopen(name);
            if (strlen(tried) + strlen(name) + 3 < sizeof tried) {
                if (i) strcat(tried, ", ");
                strcat(tried, name);
            }
        }
        if (!handle)
            return ez_fail(ELIZA_E_UNSUPPORTED, "text input needs espeak-ng and none was found "
                           "(tried %s): " HOW_TO_GET_ESPEAK, tried);
    }

    for (L = g_libs; L; L = L->next) {
        if (L->handle != handle) continue;
        ez_dlclose(handle); /* drop the reference this call took */
        if (data && (!L->data || strcmp(L->data, data) != 0))
            return ez_fail(ELIZA_E_INVALID_ARG, "espeak-ng '%s' is already running with data directory "
                           "'%s' in this process; it cannot switch to '%s'",
                           name, L->data ? L->data : "(its default)", data);
        *out = L;
        return ELIZA_OK;
    }

    L = (espeak_lib *)calloc(1, sizeof *L);
    if (!L) {
        ez_dlclose(handle);
        return ez_fail(ELIZA_E_NOMEM, "out of memory loading espeak-ng");
    }
    L->handle = handle;
    rc = resolve(L, name) ? ELIZA_OK : ELIZA_E_UNSUPPORTED;
    if (rc == ELIZA_OK) {
        L->lock = ez_mutex_create();
        L->data = dup_str(data);
        if (!L->lock || (data && !L->data)) rc = ez_fail(ELIZA_E_NOMEM, "out of memory loading espeak-ng");
    }
    if (rc == ELIZA_OK) rc = initialize(L, name, data);
    if (rc < 0) {
        if (L->lock) ez_mutex_destroy(L->lock);
        free(L->data);
        free(L);
        ez_dlclose(handle);
        return rc;
    }
    L->next = g_libs;
    g_libs = L;
    *out = L;
    return ELIZA_OK;
}

/* Makes `voice` espeak's current voice. Called under L->lock. */
static int32_t set_voice(espeak_lib *L, const char *voice) {
    char *copy;
    int st;
    if (L->voice && strcmp(L->voice, voice) == 0) return ELIZA_OK;
    copy = dup_str(voice);
    if (!copy) return ez_fail(ELIZA_E_NOMEM, "out of memory selecting espeak-ng voice '%s'", voice);
    st = L->set_voice_by_name(voice);
    if (st != 0) {
        free(copy);
        return ez_fail(ELIZA_E_NOT_FOUND, "espeak-ng cannot load voice '%s' (error %d)", voice, st);
    }
    free(L->voice);
    L->voice = copy;
    return ELIZA_OK;
}

/* phonemizer's set_voice: the first listed voice whose first language is
 * `language`; else `language` itself as a voice name. Called under L->lock. */
static const char *find_voice(espeak_lib *L, const char *language) {
    const espeak_voice **v = L->list_voices(NULL);
    for (; v && *v; v++)
        if ((*v)->languages && (*v)->languages[0] && (*v)->identifier &&
            strcmp((*v)->languages + 1, language) == 0)
            return (*v)->identifier;
    return language;
}

int32_t ez_g2p_open(const char *library, const char *data, const char *language, ez_g2p **out) {
    espeak_lib *L = NULL;
    ez_g2p *g;
    int32_t rc;

    if (!out) return ez_fail(ELIZA_E_INVALID_ARG, "g2p: NULL output handle");
    *out = NULL;
    if (!library || !*library) library = env_or_null("ELIZA_ESPEAK_LIBRARY");
    if (!data || !*data) data = env_or_null("ELIZA_ESPEAK_DATA");
    if (!language || !*language) language = "en-us";

    ez_global_lock();
    rc = acquire(library, data, &L);
    ez_global_unlock();
    if (rc < 0) return rc;

    g = (ez_g2p *)calloc(1, sizeof *g);
    if (!g) return ez_fail(ELIZA_E_NOMEM, "out of memory opening the G2P");
    g->lib = L;
    ez_mutex_lock(L->lock);
    g->voice = dup_str(find_voice(L, language));
    rc = g->voice ? set_voice(L, g->voice) : ez_fail(ELIZA_E_NOMEM, "out of memory opening the G2P");
    ez_mutex_unlock(L->lock);
    if (rc < 0) {
        if (rc == ELIZA_E_NOT_FOUND)
            rc = ez_fail(ELIZA_E_NOT_FOUND, "espeak-ng %s has no voice for language '%s'",
                         L->version ? L->version : "", language);
        ez_g2p_close(g);
        return rc;
    }
    *out = g;
    return ELIZA_OK;
}

void ez_g2p_close(ez_g2p *g) {
    if (!g) return;
    ez_g2p_en_close(g->en);
    free(g->voice);
    free(g);
}

const char *ez_g2p_espeak_version(const ez_g2p *g) {
    return g && g->lib->version ? g->lib->version : "";
}

/* phonemizer's EspeakWrapper.text_to_phonemes. Called under the lock. */
static int32_t espeak_text(void *ctx, const char *text, ez_strbuf *out) {
    espeak_lib *L = (espeak_lib *)ctx;
    const void *p = text;
    int n = 0;
    while (p) {
        const void *before = p;
        const char *ph = L->text_to_phonemes(&p, ESPEAK_CHARS_UTF8, ESPEAK_PHONEMES_IPA_TIE);
        if (ph && *ph) {
            if (n++) ez_sb_append(out, " ", 1);
            ez_sb_puts(out, ph);
        }
        if (p == before)
            return ez_fail(ELIZA_E_INTERNAL, "espeak-ng made no progress through %zu bytes of text",
                           strlen(text));
    }
    return ELIZA_OK;
}

int32_t ez_g2p_use_lexicon(ez_g2p *g, const char *path, int british) {
    ez_g2p_en *en = NULL;
    int32_t rc;
    if (!g || !path) return ez_fail(ELIZA_E_INVALID_ARG, "g2p: NULL handle or lexicon path");
    rc = ez_g2p_en_open(path, british, &en);
    if (rc < 0) return rc;
    ez_g2p_en_close(g->en);
    g->en = en;
    return ELIZA_OK;
}

/* misaki's English G2P on one line, espeak-ng (under the lock) for the
 * words its lexicons lack. */
static int32_t english_sentences(void *ctx, const char *text, size_t len, ez_strbuf *out) {
    const ez_g2p *g = (const ez_g2p *)ctx;
    return ez_g2p_en_line(g->en, text, len, 1, espeak_text, g->lib, out);
}

int32_t ez_g2p_phonemize(ez_g2p *g, const char *text, size_t len, int max_chunk, ez_strbuf *out) {
    int32_t rc;
    if (!g || (!text && len) || !out) return ez_fail(ELIZA_E_INVALID_ARG, "g2p: NULL handle, text or output");
    ez_mutex_lock(g->lib->lock);
    rc = set_voice(g->lib, g->voice);
    if (rc >= 0)
        rc = g->en ? ez_g2p_run_lines(text, len, max_chunk, english_sentences, g, out)
                   : ez_g2p_run(text, len, max_chunk, espeak_text, g->lib, out);
    ez_mutex_unlock(g->lib->lock);
    return rc;
}

int32_t ez_g2p_phonemize_whole(ez_g2p *g, const char *text, size_t len, ez_strbuf *out) {
    int32_t rc;
    if (!g || (!text && len) || !out) return ez_fail(ELIZA_E_INVALID_ARG, "g2p: NULL handle, text or output");
    ez_mutex_lock(g->lib->lock);
    rc = set_voice(g->lib, g->voice);
    if (rc >= 0) rc = ez_g2p_check_text(text, len);
    if (rc >= 0)
        rc = g->en ? ez_g2p_en_line(g->en, text, len, 0, espeak_text, g->lib, out)
                   : ez_g2p_misaki(text, len, 0, espeak_text, g->lib, out);
    ez_mutex_unlock(g->lib->lock);
    return rc;
}
