/*
 * JNI bridge between ai.eliza.ElizaNative (Java, static natives) and the C
 * ABI of include/eliza.h. The Kotlin wrapper (ai.eliza.Eliza, Llm,
 * LlmStream) sits on top of ElizaNative; apps use that.
 *
 * Rules this file keeps:
 *  - Every failing libeliza call becomes an ai.eliza.ElizaException(status,
 *    message) thrown into Java; nothing is printed, nothing aborts.
 *  - Strings cross as real UTF-8 <-> UTF-16 (JNI's "modified UTF-8" would
 *    mangle emoji and embedded NULs), invalid input becoming U+FFFD.
 *  - Memory from the library is released with eliza_free(); memory of the
 *    bridge with free().
 *  - Handles are jlong pointers. A stream handle points to a bridge record
 *    that also owns the prompt and stop strings for the stream's lifetime.
 *  - eliza_llm_stream_cancel() may be called from any thread while the
 *    stream is open; the Kotlin wrapper guarantees it never races close.
 */
#include <jni.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eliza.h"

#define EXCEPTION_CLASS "ai/eliza/ElizaException"

static jclass g_exception_class;
static jmethodID g_exception_ctor;

/* ---- strings --------------------------------------------------------------- */

/* Decodes one UTF-8 sequence at s[*i] (n bytes in all); returns the code
 * point, or U+FFFD for an invalid or truncated sequence (consuming 1 byte). */
static uint32_t next_code_point(const unsigned char *s, size_t n, size_t *i) {
    unsigned char c = s[*i];
    uint32_t cp, min;
    size_t len, k;
    if (c < 0x80) {
        *i += 1;
        return c;
    }
    if ((c & 0xE0) == 0xC0) {
        len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4, cp = c & 0x07, min = 0x10000;
    } else {
        *i += 1;
        return 0xFFFD;
    }
    if (*i + len > n) {
        *i += 1;
        return 0xFFFD;
    }
    for (k = 1; k < len; k++) {
        unsigned char cc = s[*i + k];
        if ((cc & 0xC0) != 0x80) {
            *i += 1;
            return 0xFFFD;
        }
        cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        *i += 1;
        return 0xFFFD;
    }
    *i += len;
    return cp;
}

/* A Java string of `n` bytes of UTF-8; NULL (with OutOfMemoryError
 * pending) if allocation fails. */
static jstring utf8_to_jstring(JNIEnv *env, const char *text, size_t n) {
    jchar *buf;
    size_t i = 0, m = 0;
    jstring out;
    if (!text) n = 0;
    buf = (jchar *)malloc((n + 1) * sizeof(jchar)); /* UTF-16 never needs more units than UTF-8 bytes */
    if (!buf) {
        jclass oom = (*env)->FindClass(env, "java/lang/OutOfMemoryError");
        if (oom) (*env)->ThrowNew(env, oom, "eliza_jni: string conversion");
        return NULL;
    }
    while (i < n) {
        uint32_t cp = next_code_point((const unsigned char *)text, n, &i);
        if (cp >= 0x10000) {
            cp -= 0x10000;
            buf[m++] = (jchar)(0xD800 + (cp >> 10));
            buf[m++] = (jchar)(0xDC00 + (cp & 0x3FF));
        } else {
            buf[m++] = (jchar)cp;
        }
    }
    out = (*env)->NewString(env, buf, (jsize)m);
    free(buf);
    return out;
}

static jstring cstr_to_jstring(JNIEnv *env, const char *text) {
    return utf8_to_jstring(env, text, text ? strlen(text) : 0);
}

/* A malloc'ed NUL-terminated UTF-8 copy of a Java string (lone surrogates
 * become U+FFFD); *out_len gets its length without the NUL. NULL if `s` is
 * null or allocation fails. */
static char *jstring_to_utf8(JNIEnv *env, jstring s, size_t *out_len) {
    jsize n, k;
    jchar *units;
    char *out;
    size_t m = 0;
    if (!s) return NULL;
    n = (*env)->GetStringLength(env, s);
    units = (jchar *)malloc(((size_t)n + 1) * sizeof(jchar));
    out = (char *)malloc((size_t)n * 3 + 1); /* a UTF-16 unit never needs more than 3 bytes */
    if (!units || !out) {
        free(units);
        free(out);
        return NULL;
    }
    (*env)->GetStringRegion(env, s, 0, n, units);
    for (k = 0; k < n; k++) {
        uint32_t cp = units[k];
        if (cp >= 0xD800 && cp <= 0xDBFF && k + 1 < n && units[k + 1] >= 0xDC00 && units[k + 1] <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (units[k + 1] - 0xDC00u);
            k++;
        } else if (cp >= 0xD800 && cp <= 0xDFFF) {
            cp = 0xFFFD;
        }
        if (cp < 0x80) {
            out[m++] = (char)cp;
        } else if (cp < 0x800) {
            out[m++] = (char)(0xC0 | (cp >> 6));
            out[m++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out[m++] = (char)(0xE0 | (cp >> 12));
            out[m++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            out[m++] = (char)(0x80 | (cp & 0x3F));
        } else {
            out[m++] = (char)(0xF0 | (cp >> 18));
            out[m++] = (char)(0x80 | ((cp >> 12) & 0x3F));
            out[m++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            out[m++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    out[m] = '\0';
    free(units);
    if (out_len) *out_len = m;
    return out;
}

/* ---- errors ------------------------------------------------------------------ */

static void throw_message(JNIEnv *env, int32_t status, const char *message) {
    jstring msg = cstr_to_jstring(env, message);
    jobject exc;
    if (!msg) return; /* OutOfMemoryError pending */
    exc = (*env)->NewObject(env, g_exception_class, g_exception_ctor, (jint)status, msg);
    if (exc) (*env)->Throw(env, (jthrowable)exc);
}

/* Throws the library's last error for this thread. */
static void throw_status(JNIEnv *env, int32_t status) {
    const char *message = eliza_last_error();
    throw_message(env, status, message && *message ? message : eliza_status_name(status));
}

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
    JNIEnv *env;
    jclass local;
    (void)reserved;
    if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_6) != JNI_OK) return JNI_ERR;
    local = (*env)->FindClass(env, EXCEPTION_CLASS);
    if (!local) return JNI_ERR;
    g_exception_class = (jclass)(*env)->NewGlobalRef(env, local);
    (*env)->DeleteLocalRef(env, local);
    if (!g_exception_class) return JNI_ERR;
    g_exception_ctor = (*env)->GetMethodID(env, g_exception_class, "<init>", "(ILjava/lang/String;)V");
    if (!g_exception_ctor) return JNI_ERR;
    return JNI_VERSION_1_6;
}

/* ---- versions, capabilities ------------------------------------------------------------- */

JNIEXPORT jint JNICALL Java_ai_eliza_ElizaNative_abiVersion(JNIEnv *env, jclass cls) {
    (void)env, (void)cls;
    return (jint)eliza_abi_version();
}

/* The ABI version of the header this bridge was compiled against. */
JNIEXPORT jint JNICALL Java_ai_eliza_ElizaNative_headerAbiVersion(JNIEnv *env, jclass cls) {
    (void)env, (void)cls;
    return (jint)ELIZA_ABI_VERSION;
}

JNIEXPORT jstring JNICALL Java_ai_eliza_ElizaNative_version(JNIEnv *env, jclass cls) {
    (void)cls;
    return cstr_to_jstring(env, eliza_version());
}

JNIEXPORT jstring JNICALL Java_ai_eliza_ElizaNative_capabilitiesJson(JNIEnv *env, jclass cls) {
    (void)cls;
    return cstr_to_jstring(env, eliza_capabilities_json());
}

/* ---- GGUF ---------------------------------------------------------------------------------- */

JNIEXPORT jstring JNICALL Java_ai_eliza_ElizaNative_ggufInfoJson(JNIEnv *env, jclass cls, jstring jpath,
                                                                 jint max_array_items, jboolean include_tensors) {
    eliza_gguf_info_params params;
    eliza_gguf *gguf = NULL;
    char *path, *json = NULL;
    jstring result = NULL;
    int32_t rc;
    (void)cls;
    path = jstring_to_utf8(env, jpath, NULL);
    if (!path) {
        throw_message(env, ELIZA_E_INVALID_ARG, "path is null");
        return NULL;
    }
    eliza_gguf_info_default_params(&params);
    if (max_array_items >= 0) params.max_array_items = (uint32_t)max_array_items;
    params.include_tensors = include_tensors ? 1u : 0u;
    rc = eliza_gguf_open(path, &gguf);
    if (rc == ELIZA_OK) rc = eliza_gguf_info_json(gguf, &params, &json);
    if (rc == ELIZA_OK)
        result = cstr_to_jstring(env, json);
    else
        throw_status(env, rc);
    eliza_free(json);
    eliza_gguf_close(gguf);
    free(path);
    return result;
}

/* ---- LLM ------------------------------------------------------------------------------------- */

JNIEXPORT jlong JNICALL Java_ai_eliza_ElizaNative_llmOpen(JNIEnv *env, jclass cls, jstring jpath, jint n_threads,
                                                          jint context_size, jint n_batch) {
    eliza_llm_params params;
    eliza_llm *llm = NULL;
    char *path;
    int32_t rc;
    (void)cls;
    if (context_size < 0 || n_batch < 0) {
        throw_message(env, ELIZA_E_INVALID_ARG, "contextSize and nBatch must not be negative");
        return 0;
    }
    path = jstring_to_utf8(env, jpath, NULL);
    if (!path) {
        throw_message(env, ELIZA_E_INVALID_ARG, "path is null");
        return 0;
    }
    eliza_llm_default_params(&params);
    params.n_threads = (int32_t)n_threads;
    params.context_size = (uint32_t)context_size;
    params.n_batch = (uint32_t)n_batch;
    rc = eliza_llm_open(path, &params, &llm);
    free(path);
    if (rc != ELIZA_OK) {
        throw_status(env, rc);
        return 0;
    }
    return (jlong)(intptr_t)llm;
}

JNIEXPORT void JNICALL Java_ai_eliza_ElizaNative_llmClose(JNIEnv *env, jclass cls, jlong llm) {
    (void)env, (void)cls;
    eliza_llm_close((eliza_llm *)(intptr_t)llm);
}

JNIEXPORT jstring JNICALL Java_ai_eliza_ElizaNative_llmInfoJson(JNIEnv *env, jclass cls, jlong llm) {
    char *json = NULL;
    jstring result = NULL;
    int32_t rc;
    (void)cls;
    rc = eliza_llm_info_json((const eliza_llm *)(intptr_t)llm, &json);
    if (rc == ELIZA_OK)
        result = cstr_to_jstring(env, json);
    else
        throw_status(env, rc);
    eliza_free(json);
    return result;
}

/* What a stream handle points to: the library's stream and the strings its
 * config refers to, kept alive until the stream is closed. */
typedef struct jni_stream {
    eliza_llm_stream *stream;
    char *prompt;
    char **stop;
    uint32_t n_stop;
} jni_stream;

static void jni_stream_free(jni_stream *s) {
    uint32_t i;
    if (!s) return;
    eliza_llm_stream_close(s->stream);
    for (i = 0; i < s->n_stop; i++) free(s->stop[i]);
    free(s->stop);
    free(s->prompt);
    free(s);
}

/* Bits of `set_mask` saying which config values the caller chose; the rest
 * keep eliza_llm_stream_default_config()'s defaults. Kept in step with
 * ElizaNative.java. */
enum {
    SET_MAX_TOKENS = 1 << 0,
    SET_TEMPERATURE = 1 << 1,
    SET_TOP_K = 1 << 2,
    SET_TOP_P = 1 << 3,
    SET_MIN_P = 1 << 4,
    SET_REPEAT_PENALTY = 1 << 5,
    SET_REPEAT_LAST_N = 1 << 6,
    SET_SEED = 1 << 7,
    SET_CONTEXT_SIZE = 1 << 8,
    SET_FLAGS = 1 << 9
};

JNIEXPORT jlong JNICALL Java_ai_eliza_ElizaNative_llmStreamOpen(
    JNIEnv *env, jclass cls, jlong llm, jstring jprompt, jint set_mask, jint flags, jint max_tokens,
    jfloat temperature, jint top_k, jfloat top_p, jfloat min_p, jfloat repeat_penalty, jint repeat_last_n,
    jlong seed, jint context_size, jobjectArray jstop) {
    eliza_llm_stream_config config;
    jni_stream *s;
    jsize n_stop = 0, i;
    int32_t rc;
    (void)cls;
    s = (jni_stream *)calloc(1, sizeof *s);
    if (!s) {
        throw_message(env, ELIZA_E_NOMEM, "eliza_jni: stream record");
        return 0;
    }
    s->prompt = jstring_to_utf8(env, jprompt, NULL);
    if (!s->prompt) {
        jni_stream_free(s);
        throw_message(env, ELIZA_E_INVALID_ARG, "prompt is null");
        return 0;
    }
    if (jstop) n_stop = (*env)->GetArrayLength(env, jstop);
    if (n_stop > 0) {
        s->stop = (char **)calloc((size_t)n_stop, sizeof(char *));
        if (!s->stop) {
            jni_stream_free(s);
            throw_message(env, ELIZA_E_NOMEM, "eliza_jni: stop strings");
            return 0;
        }
        for (i = 0; i < n_stop; i++) {
            jstring js = (jstring)(*env)->GetObjectArrayElement(env, jstop, i);
            s->stop[i] = jstring_to_utf8(env, js, NULL);
            if (js) (*env)->DeleteLocalRef(env, js);
            s->n_stop = (uint32_t)i + 1;
            if (!s->stop[i]) {
                jni_stream_free(s);
                throw_message(env, ELIZA_E_INVALID_ARG, "a stop string is null");
                return 0;
            }
        }
    }
    eliza_llm_stream_default_config(&config);
    config.prompt = s->prompt;
    if (set_mask & SET_FLAGS) config.flags = (uint32_t)flags;
    if (set_mask & SET_MAX_TOKENS) config.max_tokens = (int32_t)max_tokens;
    if (set_mask & SET_TEMPERATURE) config.temperature = (float)temperature;
    if (set_mask & SET_TOP_K) config.top_k = (int32_t)top_k;
    if (set_mask & SET_TOP_P) config.top_p = (float)top_p;
    if (set_mask & SET_MIN_P) config.min_p = (float)min_p;
    if (set_mask & SET_REPEAT_PENALTY) config.repeat_penalty = (float)repeat_penalty;
    if (set_mask & SET_REPEAT_LAST_N) config.repeat_last_n = (int32_t)repeat_last_n;
    if (set_mask & SET_SEED) config.seed = (uint64_t)seed;
    if (set_mask & SET_CONTEXT_SIZE) config.context_size = (uint32_t)context_size;
    config.stop = (const char *const *)s->stop;
    config.n_stop = s->n_stop;
    rc = eliza_llm_stream_open((eliza_llm *)(intptr_t)llm, &config, &s->stream);
    if (rc != ELIZA_OK) {
        throw_status(env, rc); /* before jni_stream_free: it calls into the library */
        jni_stream_free(s);
        return 0;
    }
    return (jlong)(intptr_t)s;
}

/* The next piece of text ("" while text is held back), or null when the
 * stream has ended. Throws on an error or after a cancel. */
JNIEXPORT jstring JNICALL Java_ai_eliza_ElizaNative_llmStreamNext(JNIEnv *env, jclass cls, jlong handle) {
    jni_stream *s = (jni_stream *)(intptr_t)handle;
    eliza_llm_piece piece;
    int32_t rc;
    (void)cls;
    memset(&piece, 0, sizeof piece);
    piece.struct_size = (uint32_t)sizeof piece;
    rc = eliza_llm_stream_next(s->stream, &piece);
    if (rc == ELIZA_DONE) return NULL;
    if (rc != ELIZA_OK) {
        throw_status(env, rc);
        return NULL;
    }
    return utf8_to_jstring(env, piece.text, piece.text_len);
}

JNIEXPORT void JNICALL Java_ai_eliza_ElizaNative_llmStreamCancel(JNIEnv *env, jclass cls, jlong handle) {
    jni_stream *s = (jni_stream *)(intptr_t)handle;
    (void)env, (void)cls;
    if (s) eliza_llm_stream_cancel(s->stream);
}

/* [prompt_tokens, generated_tokens, stop_reason, prefill_ms, decode_ms,
 *  prefill_tokens_per_s, decode_tokens_per_s] */
JNIEXPORT jdoubleArray JNICALL Java_ai_eliza_ElizaNative_llmStreamStats(JNIEnv *env, jclass cls, jlong handle) {
    jni_stream *s = (jni_stream *)(intptr_t)handle;
    eliza_llm_stats st;
    jdouble values[7];
    jdoubleArray out;
    int32_t rc;
    (void)cls;
    memset(&st, 0, sizeof st);
    st.struct_size = (uint32_t)sizeof st;
    rc = eliza_llm_stream_stats(s->stream, &st);
    if (rc != ELIZA_OK) {
        throw_status(env, rc);
        return NULL;
    }
    values[0] = st.prompt_tokens;
    values[1] = st.generated_tokens;
    values[2] = st.stop_reason;
    values[3] = st.prefill_ms;
    values[4] = st.decode_ms;
    values[5] = st.prefill_tokens_per_s;
    values[6] = st.decode_tokens_per_s;
    out = (*env)->NewDoubleArray(env, 7);
    if (out) (*env)->SetDoubleArrayRegion(env, out, 0, 7, values);
    return out;
}

JNIEXPORT void JNICALL Java_ai_eliza_ElizaNative_llmStreamClose(JNIEnv *env, jclass cls, jlong handle) {
    (void)env, (void)cls;
    jni_stream_free((jni_stream *)(intptr_t)handle);
}
