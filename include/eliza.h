/*
 * eliza.h — the public C ABI of libeliza.
 *
 * libeliza is an on-device inference library: LLM text generation from GGUF
 * files, Kokoro-82M text-to-speech, and speaker diarization. This header is
 * the only one a host needs; it is plain C (C99 or later, or C++).
 *
 * Rules that hold for every call below:
 *  - Calls that can fail return int32_t: ELIZA_OK (0), a small positive value
 *    where a stream ends (ELIZA_DONE), or a negative ELIZA_E_* code. After a
 *    failure eliza_last_error() returns a message for this thread.
 *  - Memory handed out by the library is released with eliza_free(), never
 *    with the host's free() (the host may use another C runtime).
 *  - Parameter structs start with `uint32_t struct_size`, are filled by the
 *    matching *_default_params() call, and only grow at the end within one
 *    ABI version; the library reads only the fields that fit in struct_size.
 *  - One handle is used by one thread at a time; distinct handles are
 *    independent. Functions without a handle are safe from any thread.
 *  - The library never prints and never calls abort() or exit().
 *
 * Licence: MIT (see LICENSE).
 */
#ifndef ELIZA_H
#define ELIZA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(ELIZA_STATIC)
#define ELIZA_API
#elif defined(_WIN32)
#if defined(ELIZA_BUILD)
#define ELIZA_API __declspec(dllexport)
#else
#define ELIZA_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define ELIZA_API __attribute__((visibility("default")))
#else
#define ELIZA_API
#endif

/* ------------------------------------------------------------------------ */
/* Versions                                                                  */
/* ------------------------------------------------------------------------ */

/* Bumped only when an existing function, struct field or code changes
 * meaning or place. Adding functions, structs, codes, or fields at the end
 * of a struct does not bump it. */
#define ELIZA_ABI_VERSION 1

/* The ABI version this binary was built with; compare with
 * ELIZA_ABI_VERSION to detect a header/binary mismatch at run time. */
ELIZA_API uint32_t eliza_abi_version(void);

/* The release string, e.g. "0.1.0". Static storage; never freed. */
ELIZA_API const char *eliza_version(void);

/* A JSON object describing this build and this CPU: "abi", "version",
 * "simd" (the kernel level chosen at run time), "cpu" (detected features),
 * "quant_types", "engines" (which capabilities are compiled in),
 * "espeak_ng" (whether libespeak-ng could be loaded), "force_scalar".
 * Static storage, computed on first call; never freed. */
ELIZA_API const char *eliza_capabilities_json(void);

/* A JSON object {"struct_name": {"size": N, "align": N, "fields":
 * {"field": [offset, size], ...}}, ...} giving sizeof/offsetof of every
 * public struct as compiled into this binary. Bindings compare it with their
 * own mirrors. Static storage; never freed. */
ELIZA_API const char *eliza_abi_layout_json(void);

/* ------------------------------------------------------------------------ */
/* Status codes (pinned: values never change)                                */
/* ------------------------------------------------------------------------ */

typedef enum eliza_status {
    ELIZA_OK = 0,
    ELIZA_DONE = 1,                /* a stream has no more pieces */
    ELIZA_E_INVALID_ARG = -1,      /* NULL where not allowed, value out of range */
    ELIZA_E_IO = -2,               /* file missing, unreadable, cannot be mapped */
    ELIZA_E_FORMAT = -3,           /* corrupt or truncated file, bad magic, bad extents */
    ELIZA_E_UNSUPPORTED = -4,      /* valid input this build cannot handle */
    ELIZA_E_NOMEM = -5,            /* allocation failed or size absurd */
    ELIZA_E_CANCELLED = -6,        /* a cancel request stopped the work */
    ELIZA_E_ABI = -7,              /* struct_size too small or unknown version */
    ELIZA_E_NOT_FOUND = -8,        /* named tensor, key, voice, ... does not exist */
    ELIZA_E_CONTEXT_FULL = -9,     /* the context window has no room left */
    ELIZA_E_STATE = -10,           /* call not valid in the handle's current state */
    ELIZA_E_INTERNAL = -11         /* a bug in libeliza; please report it */
} eliza_status;

/* The message of the last failed call on this thread ("" if none). Valid
 * until the next libeliza call on this thread; never freed. */
ELIZA_API const char *eliza_last_error(void);

/* A short constant name for a status code, e.g. "ELIZA_E_FORMAT". */
ELIZA_API const char *eliza_status_name(int32_t status);

/* Frees memory the library handed out (JSON strings, arrays). NULL is a
 * no-op. */
ELIZA_API void eliza_free(void *ptr);

/* ------------------------------------------------------------------------ */
/* Logging                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum eliza_log_level {
    ELIZA_LOG_ERROR = 0,
    ELIZA_LOG_WARN = 1,
    ELIZA_LOG_INFO = 2,
    ELIZA_LOG_DEBUG = 3
} eliza_log_level;

/* A log sink. `message` is valid only during the call. Called only on the
 * host thread that is inside a libeliza call, never on a library worker. */
typedef void (*eliza_log_fn)(int32_t level, const char *message, void *user_data);

/* Installs a process-wide log sink receiving messages at `max_level` or more
 * severe. NULL silences the library (the default). Safe from any thread. */
ELIZA_API void eliza_set_log_callback(eliza_log_fn fn, int32_t max_level, void *user_data);

/* ------------------------------------------------------------------------ */
/* GGUF inspection                                                           */
/* ------------------------------------------------------------------------ */

typedef struct eliza_gguf eliza_gguf;

typedef struct eliza_gguf_info_params {
    uint32_t struct_size;       /* sizeof(eliza_gguf_info_params) */
    uint32_t max_array_items;   /* arrays longer than this are shown as the
                                 * first items plus "len"; default 8 */
    uint32_t include_tensors;   /* nonzero: list every tensor; default 1 */
    uint32_t reserved;          /* 0 */
} eliza_gguf_info_params;

/* Fills *params with defaults (params->struct_size set by the library). */
ELIZA_API void eliza_gguf_info_default_params(eliza_gguf_info_params *params);

/* Opens a GGUF file (v2 or v3), memory-maps it and validates the header,
 * every metadata entry and every tensor's type, shape and extent against the
 * file size. On success *out owns the file; release it with
 * eliza_gguf_close(). Returns ELIZA_OK, ELIZA_E_IO, ELIZA_E_FORMAT (corrupt,
 * truncated, unknown tensor type id), ELIZA_E_UNSUPPORTED (GGUF v1 or v4+,
 * big-endian, nested arrays) or ELIZA_E_NOMEM. Known tensor types without
 * kernels open fine; only eliza_gguf_tensor_f32() refuses them. */
ELIZA_API int32_t eliza_gguf_open(const char *path, eliza_gguf **out);

/* Releases a file opened by eliza_gguf_open(). NULL is a no-op. */
ELIZA_API void eliza_gguf_close(eliza_gguf *gguf);

/* A JSON document {"version", "alignment", "data_offset", "file_size",
 * "architecture", "metadata": {key: value}, "tensor_count", "tensors":
 * [{"name", "type", "shape", "offset", "nbytes"}]} (shape innermost first,
 * as stored). params may be NULL for defaults. *out_json is freed with
 * eliza_free(). */
ELIZA_API int32_t eliza_gguf_info_json(const eliza_gguf *gguf,
                                       const eliza_gguf_info_params *params,
                                       char **out_json);

/* Dequantizes tensor `name` to float32 in storage order (innermost dimension
 * first). On success *out_data (freed with eliza_free()) holds *out_count
 * floats. Returns ELIZA_E_NOT_FOUND if no tensor has that name,
 * ELIZA_E_UNSUPPORTED for a type without kernels in this build. */
ELIZA_API int32_t eliza_gguf_tensor_f32(const eliza_gguf *gguf, const char *name,
                                        float **out_data, uint64_t *out_count);

/* ------------------------------------------------------------------------ */
/* LLM text generation                                                       */
/* ------------------------------------------------------------------------ */

typedef struct eliza_llm eliza_llm;
typedef struct eliza_llm_stream eliza_llm_stream;

typedef struct eliza_llm_params {
    uint32_t struct_size;    /* sizeof(eliza_llm_params) */
    int32_t n_threads;       /* worker threads incl. the caller; 0 = one per core */
    uint32_t context_size;   /* KV cache length in tokens; 0 = the model's
                              * training context capped at 4096 */
    uint32_t n_batch;        /* prompt tokens per forward pass; 0 = 256 */
    uint32_t kv_type;        /* eliza_llm_kv_type of the cached keys (and of the
                              * values unless kv_type_v says otherwise); 0 = F32 */
    uint32_t kv_type_v;      /* eliza_llm_kv_type of the cached values, or
                              * ELIZA_LLM_KV_AS_K (the default): kv_type's */
    uint32_t draft_kind;     /* eliza_llm_draft_kind: speculative decoding of
                              * every stream of the handle; default NONE */
    int32_t draft_max_tokens; /* the most tokens one round drafts (the loop
                              * adapts below it); 1 .. ELIZA_LLM_DRAFT_MAX
                              * and below n_batch; default 15 */
    const char *draft_path;  /* the draft model's (MODEL) or the MTP
                              * assistant's (MTP) GGUF; NULL otherwise */
    /* The GPU (Vulkan; docs/gpu.md). Layers on the GPU: 0 = none, the CPU
     * engine (the default); -1, or n_layer or more, = all of them. The
     * GPU takes a whole model or nothing: 1 .. n_layer - 1 also puts all
     * layers there, with a log line saying so. Below -1:
     * ELIZA_E_INVALID_ARG. Where the model cannot run on the GPU (no
     * loader or device, a denylisted driver, out of device memory, an
     * architecture, feature or weight type the GPU step lacks, a kv_type
     * other than F32, an MTP drafter) it runs on the CPU, the reason
     * logged (WARN) and in eliza_llm_info_json()'s "gpu_fallback". */
    int32_t n_gpu_layers;
    const char *gpu_device;  /* NULL = $ELIZA_GPU_DEVICE; "" the best GPU,
                              * "none", an index into the Vulkan device
                              * list, or a case-insensitive part of a device
                              * name ("llvmpipe" picks Mesa's CPU driver) */
    uint32_t gpu_required;   /* nonzero: eliza_llm_open fails with the
                              * reason's code (ELIZA_E_UNSUPPORTED;
                              * ELIZA_E_NOT_FOUND for a gpu_device no
                              * device matches; ELIZA_E_NOMEM) and message
                              * instead of running on the CPU */
} eliza_llm_params;

/* Who drafts the tokens a speculative stream verifies in one batched pass
 * of the model. Greedy output is token for token the output without a
 * drafter; with sampling the output has the same distribution (the
 * speculative-sampling acceptance rule), not the same tokens for a seed.
 * eliza_capabilities_json()'s "llm_drafters" lists the kinds this build
 * has; another kind is ELIZA_E_UNSUPPORTED at open. */
typedef enum eliza_llm_draft_kind {
    ELIZA_LLM_DRAFT_NONE = 0,
    ELIZA_LLM_DRAFT_NGRAM = 1,   /* prompt lookup: what followed the latest
                                  * earlier occurrence of the last 3, 2 or 1
                                  * tokens (prompt and text so far); any model */
    ELIZA_LLM_DRAFT_MTP = 2,     /* a Gemma 4 assistant (multi-token
                                  * prediction over the model's own state) */
    ELIZA_LLM_DRAFT_MODEL = 3    /* a separate small model with the same
                                  * vocabulary (ELIZA_E_INVALID_ARG naming
                                  * both sizes otherwise) */
} eliza_llm_draft_kind;

#define ELIZA_LLM_DRAFT_MAX 64

/* How the KV cache stores keys and values. The block types hold 32 values
 * per block and need a head size that is a multiple of 32 (else
 * eliza_llm_open fails with ELIZA_E_INVALID_ARG); attention reads their
 * codes directly. Bytes per value: F32 4, F16 2, Q8_0 1.0625, Q4_0 and
 * TBQ4_0 0.5625, TBQ3_0 0.4375. */
typedef enum eliza_llm_kv_type {
    ELIZA_LLM_KV_F32 = 0,    /* float32: the reference implementations' numbers */
    ELIZA_LLM_KV_F16 = 1,    /* float16 (llama.cpp's default cache type): half
                              * the memory, keys and values rounded to 11 bits */
    ELIZA_LLM_KV_Q8_0 = 2,   /* ggml's q8_0 blocks (fp16 scale + 32 int8) */
    ELIZA_LLM_KV_Q4_0 = 3,   /* ggml's q4_0 blocks (fp16 scale + 32 nibbles) */
    /* Q8_0 and Q4_0 are stored Walsh-Hadamard rotated when the head size
     * is a multiple of 64, as llama.cpp does. */
    ELIZA_LLM_KV_TBQ4_0 = 4, /* TurboQuant 4-bit: each block sign-flipped and
                              * Hadamard-transformed, fp16 RMS scale, 16
                              * Lloyd-Max levels (4.5 bits per value) */
    ELIZA_LLM_KV_TBQ3_0 = 5, /* the same with 8 levels (3.5 bits per value) */
    ELIZA_LLM_KV_AS_K = 0x7fffffff /* kv_type_v only: the same as kv_type */
} eliza_llm_kv_type;

/* Fills *params with defaults (params->struct_size set by the library). */
ELIZA_API void eliza_llm_default_params(eliza_llm_params *params);

/* Opens a GGUF language model (architectures: gemma3, llama, qwen2, qwen3).
 * Weights stay memory-mapped in their stored types. On success *out owns the
 * model and its KV cache; release it with eliza_llm_close(). Returns
 * ELIZA_E_IO, ELIZA_E_FORMAT (corrupt file, missing tensor, shape that
 * contradicts the hyperparameters), ELIZA_E_UNSUPPORTED (architecture or
 * tensor type), ELIZA_E_INVALID_ARG (a parameter out of range, an unknown
 * kv_type), ELIZA_E_NOMEM or ELIZA_E_ABI (struct_size too small). */
ELIZA_API int32_t eliza_llm_open(const char *path, const eliza_llm_params *params,
                                 eliza_llm **out);

/* Releases the model. NULL is a no-op. A stream of it still open fails with
 * ELIZA_E_STATE from then on and must still be closed. Not while a call on
 * the model runs on another thread (cancel it and wait first). */
ELIZA_API void eliza_llm_close(eliza_llm *llm);

/* A JSON object describing the loaded model: "architecture", "n_vocab",
 * "n_ctx_train", "context_size", "n_embd", "n_layer", "bos", "eos",
 * "n_threads", the cache's "kv_type" and "kv_type_v" (names such as "f16",
 * "tbq3_0"), "kv_bytes" (the whole cache) and "kv_bytes_per_token" (one
 * position's keys and values over all layers), "backend" ("cpu", or
 * "vulkan: " and the device's name), "gpu_layers" (layers on the GPU) and
 * "gpu_fallback" (why the GPU asked for is not used, or null). Freed with
 * eliza_free(). */
ELIZA_API int32_t eliza_llm_info_json(const eliza_llm *llm, char **out_json);

enum {
    ELIZA_TOKENIZE_ADD_BOS = 1u << 0,       /* prepend BOS if the model wants one */
    ELIZA_TOKENIZE_PARSE_SPECIAL = 1u << 1  /* "<start_of_turn>" etc. become their ids */
};

/* Tokenizes `text_len` bytes of UTF-8 text. *out_tokens (freed with
 * eliza_free()) holds *out_count ids. Invalid UTF-8 is ELIZA_E_INVALID_ARG. */
ELIZA_API int32_t eliza_llm_tokenize(const eliza_llm *llm, const char *text, size_t text_len,
                                     uint32_t flags, int32_t **out_tokens, size_t *out_count);

enum {
    ELIZA_DETOKENIZE_RENDER_SPECIAL = 1u << 0  /* control tokens as their text */
};

/* The text of `count` tokens. *out_text (freed with eliza_free()) is
 * NUL-terminated and *out_len bytes long; a token id out of range is
 * ELIZA_E_INVALID_ARG. */
ELIZA_API int32_t eliza_llm_detokenize(const eliza_llm *llm, const int32_t *tokens, size_t count,
                                       uint32_t flags, char **out_text, size_t *out_len);

/* Evaluates `count` tokens from position 0 (the KV cache is reset) and
 * returns the logits of the last position, or of every position when
 * `all_positions` is nonzero, as *out_logits (freed with eliza_free()) of
 * *out_count floats (positions x n_vocab). For scoring and tests. */
ELIZA_API int32_t eliza_llm_logits(eliza_llm *llm, const int32_t *tokens, size_t count,
                                   uint32_t all_positions, float **out_logits, size_t *out_count);

/* Scores a text the way llama.cpp's llama-perplexity scores one chunk:
 * evaluates tokens[0 .. count - 1) from position 0 (the KV cache is reset)
 * and writes out_nll[i - first] = -log p(tokens[i + 1] | tokens[0 .. i])
 * (natural log) for every first <= i < count - 1: count - 1 - first values
 * into the caller's array. Needs 2 <= count <= the context size and first
 * < count - 1 (else ELIZA_E_INVALID_ARG or ELIZA_E_CONTEXT_FULL); memory
 * stays at most 64 positions of logits whatever count is. */
ELIZA_API int32_t eliza_llm_token_nll(eliza_llm *llm, const int32_t *tokens, size_t count,
                                      size_t first, double *out_nll);

/* Asks a running eliza_llm_logits() or eliza_llm_token_nll() to stop as soon as possible; it then
 * returns ELIZA_E_CANCELLED. Safe from any thread while the handle is open;
 * a later call starts afresh. Streams have eliza_llm_stream_cancel(). */
ELIZA_API void eliza_llm_cancel(eliza_llm *llm);

typedef struct eliza_llm_stream_config {
    uint32_t struct_size;          /* sizeof(eliza_llm_stream_config) */
    uint32_t flags;                /* ELIZA_TOKENIZE_* applied to the prompt;
                                    * default ADD_BOS | PARSE_SPECIAL */
    const char *prompt;            /* UTF-8, NUL-terminated, not empty */
    int32_t max_tokens;            /* tokens to generate; default 256; <= 0
                                    * means until EOS or a full context */
    float temperature;             /* 0 = greedy; default 0.8. Out of range
                                    * (ELIZA_E_INVALID_ARG at open): temperature
                                    * outside 0..100, top_k < 0, top_p or
                                    * min_p outside 0..1, repeat_penalty
                                    * outside (0, 100], repeat_last_n < 0 */
    int32_t top_k;                 /* 0 = off; default 40 */
    float top_p;                   /* 1 = off; default 0.95 */
    float min_p;                   /* 0 = off; default 0.05 */
    float repeat_penalty;          /* 1 = off; default 1.0 */
    int32_t repeat_last_n;         /* tokens the penalty looks back on; default 64 */
    uint64_t seed;                 /* same seed + same input = same output; default 0 */
    const char *const *stop;       /* n_stop UTF-8 stop strings (not emitted) */
    uint32_t n_stop;
    uint32_t context_size;         /* 0 = the handle's; else must not exceed it */
} eliza_llm_stream_config;

/* Fills *config with defaults (config->struct_size set by the library). */
ELIZA_API void eliza_llm_stream_default_config(eliza_llm_stream_config *config);

typedef struct eliza_llm_piece {
    uint32_t struct_size;   /* sizeof(eliza_llm_piece), set by the caller */
    int32_t token;          /* the last token of this piece */
    const char *text;       /* UTF-8-complete text, NUL-terminated; valid until
                             * the next call on the stream */
    uint32_t text_len;      /* bytes, may be 0 while a multi-byte character or
                             * a possible stop string is held back */
} eliza_llm_piece;

typedef enum eliza_llm_stop_reason {
    ELIZA_STOP_NONE = 0,          /* still running */
    ELIZA_STOP_EOS = 1,           /* the model ended its text */
    ELIZA_STOP_MAX_TOKENS = 2,
    ELIZA_STOP_STRING = 3,        /* a stop string matched */
    ELIZA_STOP_CONTEXT_FULL = 4,
    ELIZA_STOP_CANCELLED = 5
} eliza_llm_stop_reason;

typedef struct eliza_llm_stats {
    uint32_t struct_size;        /* sizeof(eliza_llm_stats), set by the caller */
    uint32_t prompt_tokens;
    uint32_t generated_tokens;
    int32_t stop_reason;         /* eliza_llm_stop_reason */
    double prefill_ms;
    double decode_ms;
    double prefill_tokens_per_s;  /* of the prompt tokens evaluated */
    double decode_tokens_per_s;   /* generated tokens per second of decoding */
    uint32_t draft_tokens;        /* drafted tokens the model verified */
    uint32_t draft_accepted;      /* of them accepted */
    uint32_t draft_rounds;        /* verification passes with drafts */
    /* The prompt tokens this stream evaluated: a prompt that begins with
     * what the handle's cache holds (the previous stream's prompt and
     * output, e.g. the earlier turns of a chat) evaluates only the rest;
     * prompt_tokens - prompt_evaluated came from the cache. */
    uint32_t prompt_evaluated;
} eliza_llm_stats;

/* Tokenizes the prompt and prepares generation; the prompt itself is
 * evaluated on the first eliza_llm_stream_next(). One stream per model at a
 * time (ELIZA_E_STATE otherwise). Empty prompt or invalid UTF-8:
 * ELIZA_E_INVALID_ARG; a prompt that does not fit the context:
 * ELIZA_E_CONTEXT_FULL. */
ELIZA_API int32_t eliza_llm_stream_open(eliza_llm *llm, const eliza_llm_stream_config *config,
                                        eliza_llm_stream **out);

/* Generates until a piece of text is ready. Returns ELIZA_OK with *piece
 * filled, ELIZA_DONE when generation has ended (see the stats' stop_reason;
 * any held-back text is returned first), ELIZA_E_CANCELLED after a cancel,
 * or another error. */
ELIZA_API int32_t eliza_llm_stream_next(eliza_llm_stream *stream, eliza_llm_piece *piece);

/* Asks a running eliza_llm_stream_next() to stop as soon as possible. Safe
 * from any thread, at any time while the stream is open. */
ELIZA_API void eliza_llm_stream_cancel(eliza_llm_stream *stream);

/* Counters and timings of the stream so far. */
ELIZA_API int32_t eliza_llm_stream_stats(const eliza_llm_stream *stream, eliza_llm_stats *stats);

/* Releases the stream. NULL is a no-op. */
ELIZA_API void eliza_llm_stream_close(eliza_llm_stream *stream);

/* ---- chat templates (llama.cpp's llama_chat_apply_template) ---- */

/* One turn of a conversation: NUL-terminated UTF-8. */
typedef struct eliza_chat_message {
    const char *role;        /* "system", "user", "assistant", "tool", ... */
    const char *content;
} eliza_chat_message;

/* Renders messages[0..n_messages) into a prompt the way llama.cpp's
 * llama_chat_apply_template does: by rules written in C for its known
 * templates (chatml, llama2, llama3, llama4, gemma, phi3, phi4, granite,
 * smolvlm, mistral-v1/v3/v3-tekken/v7/v7-tekken, zephyr, falcon3,
 * command-r, deepseek..., 55 in all), not by a Jinja engine. tmpl is a
 * template name or a Jinja chat template, recognized by the markers
 * llama.cpp looks for; NULL takes the model's tokenizer.chat_template (llm
 * must then be non-NULL; otherwise llm is unused and may be NULL).
 * add_assistant ends the prompt with the opening of the assistant's turn.
 * *out_text (freed with eliza_free()) is NUL-terminated, *out_len bytes.
 * ELIZA_E_UNSUPPORTED when tmpl is no template llama.cpp knows (the message
 * says so; render such a template with a Jinja engine instead),
 * ELIZA_E_NOT_FOUND when tmpl is NULL and the model has no chat template,
 * ELIZA_E_INVALID_ARG for a message without role or content. */
ELIZA_API int32_t eliza_llm_chat_apply(const eliza_llm *llm, const char *tmpl,
                                       const eliza_chat_message *messages, size_t n_messages,
                                       uint32_t add_assistant, char **out_text, size_t *out_len);

/* The name of the template tmpl is or contains ("chatml", "gemma", ...), or
 * NULL when it is none that eliza_llm_chat_apply() knows. Static storage. */
ELIZA_API const char *eliza_chat_template_name(const char *tmpl);

/* ---- can this build run a file (eliza info MODEL.gguf) ---- */

/* Says, from the GGUF's metadata and tensor table alone (no weights read),
 * whether eliza_llm_open() can run the language model at path: *out_json
 * (freed with eliza_free()) is {"architecture", "tokenizer",
 * "pre_tokenizer": the file's values or null; "chat_template": the built-in
 * template it is recognized as, "jinja" for one only a Jinja engine renders,
 * or null; "missing": what this build lacks, one line each (an unknown
 * architecture, each tensor type without kernels with a tensor that has it,
 * a tokenizer or pre-tokenizer it does not implement); "runnable": whether
 * "missing" is empty}. Hyperparameters and shapes are checked only at open.
 * ELIZA_E_IO or ELIZA_E_FORMAT when the file is no readable GGUF. */
ELIZA_API int32_t eliza_llm_check_json(const char *path, char **out_json);

/* ------------------------------------------------------------------------ */
/* Text-to-speech (Kokoro-82M)                                               */
/* ------------------------------------------------------------------------ */

typedef struct eliza_tts eliza_tts;
typedef struct eliza_tts_stream eliza_tts_stream;

typedef struct eliza_tts_params {
    uint32_t struct_size;        /* sizeof(eliza_tts_params) */
    int32_t n_threads;           /* worker threads incl. the caller; 0 = one per core */
    const char *espeak_library;  /* libespeak-ng to load for text input; NULL =
                                  * $ELIZA_ESPEAK_LIBRARY, then the system's */
    const char *espeak_data;     /* its espeak-ng-data directory; NULL =
                                  * $ELIZA_ESPEAK_DATA, then the library's default */
    const char *language;        /* G2P language for every synthesis (an espeak-ng
                                  * language, e.g. "en-us"; English goes through
                                  * misaki's English G2P, docs/kokoro.md, and
                                  * "espeak:en-us" through espeak-ng alone); NULL = each voice's
                                  * own (eliza_tts_voice_language), "en-us" for a
                                  * voice whose model does not say */
} eliza_tts_params;

/* Fills *params with defaults (params->struct_size set by the library). */
ELIZA_API void eliza_tts_default_params(eliza_tts_params *params);

/* Opens a Kokoro model (one GGUF file, docs/kokoro.md), voices included. On
 * success *out owns the model; release it with eliza_tts_close(). espeak-ng
 * is loaded lazily, on the first call that needs text -> phonemes, so a host
 * that passes phonemes never needs it. Returns ELIZA_E_IO, ELIZA_E_FORMAT
 * (corrupt file, missing tensor, shape that contradicts the
 * hyperparameters), ELIZA_E_UNSUPPORTED, ELIZA_E_NOMEM or ELIZA_E_ABI. */
ELIZA_API int32_t eliza_tts_open(const char *path, const eliza_tts_params *params,
                                 eliza_tts **out);

/* Releases the model. NULL is a no-op. No stream of it may still be open. */
ELIZA_API void eliza_tts_close(eliza_tts *tts);

/* Output sample rate in Hz (24000 for Kokoro). */
ELIZA_API int32_t eliza_tts_sample_rate(const eliza_tts *tts);

/* Number of voices in the model, and the name of voice `index` (NULL when out
 * of range; valid while the model is open). */
ELIZA_API int32_t eliza_tts_voice_count(const eliza_tts *tts);
ELIZA_API const char *eliza_tts_voice_name(const eliza_tts *tts, int32_t index);

/* The language of voice `index` ("en-us", "en-gb", "es", "fr-fr", "hi", "it",
 * "pt-br", "ja", "zh"; "" when the model does not say) and its gender ("f",
 * "m" or ""); NULL when out of range; valid while the model is open. Text for
 * a voice goes through that language's G2P; "ja" and "zh" have none in
 * libeliza (pass phonemes). */
ELIZA_API const char *eliza_tts_voice_language(const eliza_tts *tts, int32_t index);
ELIZA_API const char *eliza_tts_voice_gender(const eliza_tts *tts, int32_t index);

enum {
    ELIZA_TTS_PHONEMES = 1u << 0,  /* `text` is Kokoro phonemes, not text: no G2P */
    ELIZA_TTS_NO_NOISE = 1u << 1,  /* no random phase or noise in the harmonic
                                    * source: repeatable output, as the
                                    * reference with its random draws zeroed */
    ELIZA_TTS_WHOLE_LINES = 1u << 2 /* a stream of KPipeline's chunks: each text
                                    * line's sentences together up to the model's
                                    * 510 phonemes, no early first cut; the first
                                    * audio waits for the whole first chunk */
};

typedef struct eliza_tts_config {
    uint32_t struct_size;    /* sizeof(eliza_tts_config) */
    const char *text;        /* UTF-8, NUL-terminated: text, or phonemes with
                              * ELIZA_TTS_PHONEMES (sentences split on '\n') */
    const char *voice;       /* a voice name, or a weighted blend
                              * "af_heart:0.7,af_bella:0.3" (weights > 0, normalised;
                              * voices of one language); NULL = the first voice */
    float speed;             /* speaking rate, 1 = normal; 0.25..4; default 1 */
    uint32_t flags;          /* ELIZA_TTS_*; default 0 */
    uint64_t seed;           /* seeds the source noise; default 0 */
    const char *language;    /* G2P language of this text; NULL (default) =
                              * eliza_tts_params.language, else the voice's */
} eliza_tts_config;

/* Fills *config with defaults (config->struct_size set by the library). */
ELIZA_API void eliza_tts_default_config(eliza_tts_config *config);

/* Text -> Kokoro phonemes, the way synthesis would see them: one line per
 * chunk (sentence, or part of one that would exceed the model's 510 tokens,
 * fewer for a model with a shorter text encoder), lines separated by '\n'.
 * *out_phonemes is freed with eliza_free(). Returns
 * ELIZA_E_UNSUPPORTED with instructions when no espeak-ng can be loaded,
 * ELIZA_E_INVALID_ARG for invalid UTF-8. */
ELIZA_API int32_t eliza_tts_phonemize(eliza_tts *tts, const char *text, char **out_phonemes);

/* eliza_tts_phonemize in G2P language `language` (NULL = what
 * eliza_tts_phonemize uses: eliza_tts_params.language, else the first
 * voice's, else "en-us"). A language without a G2P here ("ja", "zh"):
 * ELIZA_E_UNSUPPORTED. */
ELIZA_API int32_t eliza_tts_phonemize_language(eliza_tts *tts, const char *text, const char *language,
                                               char **out_phonemes);

/* Synthesizes the whole text: *out_pcm (freed with eliza_free()) holds
 * *out_count float32 samples, mono, at eliza_tts_sample_rate(): the chunks
 * of a stream with ELIZA_TTS_WHOLE_LINES (set whatever config->flags say)
 * back to back. Text with nothing to say (empty, only punctuation) gives
 * ELIZA_OK and 0 samples. Unknown voice: ELIZA_E_NOT_FOUND; bad speed or blend weight, a blend of
 * voices of two languages, invalid UTF-8: ELIZA_E_INVALID_ARG; text in a
 * language without a G2P here (Japanese, Mandarin: pass phonemes):
 * ELIZA_E_UNSUPPORTED. */
ELIZA_API int32_t eliza_tts_synthesize(eliza_tts *tts, const eliza_tts_config *config,
                                       float **out_pcm, size_t *out_count);

typedef struct eliza_tts_chunk {
    uint32_t struct_size;     /* sizeof(eliza_tts_chunk), set by the caller */
    uint32_t index;           /* 0, 1, ... */
    const float *pcm;         /* n_samples float32 samples; valid until the next
                               * call on the stream */
    size_t n_samples;
    const char *phonemes;     /* the phonemes this chunk speaks, NUL-terminated */
} eliza_tts_chunk;

/* Prepares a pull stream over `config` (copied: its strings need not outlive
 * the call): one chunk of audio per sentence, except that the first chunk of
 * a long first sentence ends at its first clause boundary (comma, colon,
 * semicolon, dash), so the first audio comes sooner (ELIZA_TTS_WHOLE_LINES:
 * neither cut); chunks fade out and in over 4 ms at their seams. One stream
 * per model at a time (ELIZA_E_STATE otherwise). */
ELIZA_API int32_t eliza_tts_stream_open(eliza_tts *tts, const eliza_tts_config *config,
                                        eliza_tts_stream **out);

/* Synthesizes the next chunk. ELIZA_OK with *chunk filled, ELIZA_DONE after
 * the last one, ELIZA_E_CANCELLED after a cancel, or another error. */
ELIZA_API int32_t eliza_tts_stream_next(eliza_tts_stream *stream, eliza_tts_chunk *chunk);

/* Asks a running eliza_tts_stream_next() to stop as soon as possible. Safe
 * from any thread, at any time while the stream is open. */
ELIZA_API void eliza_tts_stream_cancel(eliza_tts_stream *stream);

/* Releases the stream. NULL is a no-op. */
ELIZA_API void eliza_tts_stream_close(eliza_tts_stream *stream);

/* Per-phase wall times (ms) of the model's last synthesis, as a JSON object
 * {"phase": ms, ...}; also logged at INFO when ELIZA_PROFILE=1. Freed with
 * eliza_free(). */
ELIZA_API int32_t eliza_tts_profile_json(const eliza_tts *tts, char **out_json);

/* ------------------------------------------------------------------------ */
/* Speaker diarization                                                       */
/* ------------------------------------------------------------------------ */

typedef struct eliza_diarizer eliza_diarizer;

typedef struct eliza_diarizer_params {
    uint32_t struct_size;   /* sizeof(eliza_diarizer_params) */
    int32_t n_threads;      /* worker threads incl. the caller; 0 = one per core */
} eliza_diarizer_params;

/* Fills *params with defaults (params->struct_size set by the library). */
ELIZA_API void eliza_diarizer_default_params(eliza_diarizer_params *params);

/* Opens a segmentation model and a speaker-embedding model (GGUF files,
 * docs/diarization.md). On success *out owns both; release it with
 * eliza_diarizer_close(). Returns ELIZA_E_IO, ELIZA_E_FORMAT (corrupt file,
 * missing tensor or LSTM gate order, shape that contradicts the
 * hyperparameters), ELIZA_E_UNSUPPORTED, ELIZA_E_NOMEM or ELIZA_E_ABI. */
ELIZA_API int32_t eliza_diarizer_open(const char *segmentation_path, const char *embedding_path,
                                      const eliza_diarizer_params *params,
                                      eliza_diarizer **out);

/* Releases the diarizer. NULL is a no-op. A call still running on it on
 * another thread is cancelled and waited for first; a call made while it
 * closes (or while another call runs on it) gets ELIZA_E_STATE. */
ELIZA_API void eliza_diarizer_close(eliza_diarizer *diarizer);

typedef struct eliza_diarize_options {
    uint32_t struct_size;     /* sizeof(eliza_diarize_options) */
    float step;               /* window step in seconds; default 1.0 (windows are
                               * the model's chunk, 10 s) */
    int32_t num_speakers;     /* exact number of speakers; 0 = estimate */
    int32_t min_speakers;     /* 0 = no bound */
    int32_t max_speakers;     /* 0 = no bound */
    float threshold;          /* agglomerative clustering threshold (cosine
                               * distance) when the number is estimated */
    float min_duration_on;    /* turns shorter than this (s) are dropped; default 0 */
    float min_duration_off;   /* gaps shorter than this (s) within one speaker are
                               * filled; default 0 */
    int32_t batch_size;       /* windows per segmentation batch; default 8 */
    int32_t exclusive;        /* 1: at most one speaker at any time (where several
                               * overlap, the most active one), for aligning turns
                               * with a transcript; default 0: overlapping speech
                               * gives overlapping turns */
    float identify_threshold; /* a speaker takes the name of an enrolled voice
                               * (eliza_diarizer_enroll) when the cosine distance
                               * of its centroid to the voice is at most this;
                               * default calibrated on real meetings
                               * (docs/diarization.md) */
    float latency;            /* live streams only (eliza_diar_stream_open): seconds
                               * of audio after an instant that are heard before
                               * it is decided; step..window, default 5.0 */
} eliza_diarize_options;

/* Fills *options with defaults (options->struct_size set by the library). */
ELIZA_API void eliza_diarize_default_options(eliza_diarize_options *options);

typedef struct eliza_diarize_turn {
    double start;        /* seconds from the start of the audio */
    double end;
    int32_t speaker;     /* 0, 1, ... in order of first appearance */
    float confidence;    /* mean speaker-activity probability over the turn */
} eliza_diarize_turn;

/* Who spoke when in n_samples float32 mono samples at sample_rate Hz
 * (resampled to the model's rate inside; 8000..192000 Hz). *out_turns (freed
 * with eliza_free()) holds *out_count turns sorted by start; overlapping
 * speech gives overlapping turns. Silence gives ELIZA_OK and 0 turns. NaN or
 * Inf samples, a bad rate or option: ELIZA_E_INVALID_ARG; after
 * eliza_diarizer_cancel(): ELIZA_E_CANCELLED. Memory stays bounded however
 * long the audio is (windows are processed as a stream). */
ELIZA_API int32_t eliza_diarize(eliza_diarizer *diarizer, const float *pcm, size_t n_samples,
                                int32_t sample_rate, const eliza_diarize_options *options,
                                eliza_diarize_turn **out_turns, size_t *out_count);

/* The speakers of the last successful eliza_diarize() on this handle:
 * *out_centroids (freed with eliza_free()) holds *out_count x *out_dim
 * floats, row s the unit-norm centroid of speaker s of the turns (the mean
 * direction of the speaker-embedding of its stretches, comparable with
 * eliza_diarizer_embed()). Before any run: ELIZA_E_STATE. */
ELIZA_API int32_t eliza_diarizer_centroids(eliza_diarizer *diarizer, float **out_centroids, size_t *out_count,
                                           size_t *out_dim);

/* Enrolls a known speaker: name (1..64 bytes of UTF-8, no spaces or control
 * characters) and reference audio of that person alone, n_samples float32
 * mono samples at sample_rate Hz (8000..192000, at most 600 s). Later runs
 * name the speaker whose centroid is closest to the voice, one speaker per
 * voice, when the distance is at most the options' identify_threshold (see
 * eliza_diarizer_speaker_name()). Reference audio with less than 1 s of
 * speech (silence, a clip too short), NaN or Inf samples, an empty or
 * malformed name, or a name already enrolled: ELIZA_E_INVALID_ARG, and
 * nothing is enrolled. */
ELIZA_API int32_t eliza_diarizer_enroll(eliza_diarizer *diarizer, const char *name, const float *pcm,
                                        size_t n_samples, int32_t sample_rate);

/* Forgets the enrolled voice called name (ELIZA_E_NOT_FOUND if none is), or
 * every voice when name is NULL. */
ELIZA_API int32_t eliza_diarizer_unenroll(eliza_diarizer *diarizer, const char *name);

/* The enrolled names, in order of enrolment, each ended by '\n', in
 * *out_names (freed with eliza_free(); "" when none), and their count. */
ELIZA_API int32_t eliza_diarizer_enrolled(eliza_diarizer *diarizer, char **out_names, size_t *out_count);

/* The label of speaker s of the last successful eliza_diarize(): the
 * enrolled name it was identified as, else "SPEAKER_%02d" of s, in
 * *out_name (freed with eliza_free()). out_distance (may be NULL) receives
 * the cosine distance of its centroid to that voice, else to the nearest
 * voice (NAN with none enrolled). s out of range: ELIZA_E_INVALID_ARG;
 * before any run: ELIZA_E_STATE. */
ELIZA_API int32_t eliza_diarizer_speaker_name(eliza_diarizer *diarizer, int32_t speaker, char **out_name,
                                              float *out_distance);

/* Asks a running eliza_diarize() to stop as soon as possible. Safe from any
 * thread; a later eliza_diarize() starts afresh. */
ELIZA_API void eliza_diarizer_cancel(eliza_diarizer *diarizer);

/* Progress of the running (or last) eliza_diarize(), 0..1. Safe from any
 * thread: poll it to draw a progress bar. */
ELIZA_API float eliza_diarizer_progress(const eliza_diarizer *diarizer);

/* The segmentation model on n_chunks chunks of chunk_samples samples each
 * (16 kHz, contiguous): *out_logprobs (freed with eliza_free()) holds
 * n_chunks x *out_frames x *out_classes log-probabilities of the powerset
 * classes, as the model outputs them. For tests and inspection. */
ELIZA_API int32_t eliza_diarizer_segment(eliza_diarizer *diarizer, const float *pcm,
                                         size_t n_chunks, size_t chunk_samples,
                                         float **out_logprobs, size_t *out_frames,
                                         size_t *out_classes);

/* The speaker embedding of n_samples samples at 16 kHz: *out_embedding (freed
 * with eliza_free()) holds *out_dim floats, L2-normalised. For tests and
 * inspection. */
ELIZA_API int32_t eliza_diarizer_embed(eliza_diarizer *diarizer, const float *pcm,
                                       size_t n_samples, float **out_embedding, size_t *out_dim);

/* Live diarization: push audio as it arrives, pull turns as they are decided
 * (docs/diarization.md). Speaker numbers are stable for the whole stream;
 * turns are never revised once pulled: a turn still going on at a pull is
 * handed out up to the decided edge and continues in a later turn of the
 * same speaker that starts where it ended. Every instant is decided once
 * `latency` seconds of audio after it have been pushed. */
typedef struct eliza_diar_stream eliza_diar_stream;

/* Opens a stream on the diarizer's models for mono float32 audio at
 * sample_rate, which must be the models' rate (16000 Hz; resample before).
 * Options as eliza_diarize() takes them (step, threshold: the cosine
 * distance past which a voice starts a new speaker: 0.35 did best on the
 * real meetings' train split, docs/diarization.md; num_speakers /
 * max_speakers: at most that many, exclusive, latency; min_speakers,
 * min_duration_on/off and batch_size are not used). The stream uses the
 * diarizer: its calls and the diarizer's take turns (ELIZA_E_STATE when
 * one runs); closing the diarizer first is allowed, the stream's later
 * calls then fail with ELIZA_E_STATE and it must still be closed. */
ELIZA_API int32_t eliza_diar_stream_open(eliza_diarizer *diarizer, int32_t sample_rate,
                                         const eliza_diarize_options *options, eliza_diar_stream **out);

/* Appends n_samples samples (any number, 0 included) and runs the windows
 * they complete, on this thread. NaN or Inf samples: ELIZA_E_INVALID_ARG and
 * nothing of the chunk is taken (the stream stays usable). After
 * eliza_diar_stream_finish(): ELIZA_E_STATE. */
ELIZA_API int32_t eliza_diar_stream_push(eliza_diar_stream *stream, const float *pcm, size_t n_samples);

/* Marks the end of the audio: the last windows run and every instant is
 * decided. Further pushes fail with ELIZA_E_STATE. */
ELIZA_API int32_t eliza_diar_stream_finish(eliza_diar_stream *stream);

/* The turns decided since the last pull: *out_turns (freed with
 * eliza_free(), also when *out_count is 0) sorted by start. Returns
 * ELIZA_OK, or ELIZA_DONE (with no turns) once the stream is finished and
 * everything has been pulled. */
ELIZA_API int32_t eliza_diar_stream_pull(eliza_diar_stream *stream, eliza_diarize_turn **out_turns,
                                         size_t *out_count);

/* Seconds of audio decided so far (turns before it are final). */
ELIZA_API double eliza_diar_stream_decided(eliza_diar_stream *stream);

/* Releases the stream, at any point (mid-stream included). NULL is a no-op. */
ELIZA_API void eliza_diar_stream_close(eliza_diar_stream *stream);

#ifdef __cplusplus
}
#endif

#endif /* ELIZA_H */
