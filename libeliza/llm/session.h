/* A session: one KV cache (kv.h) and the batch buffers (forward.h) over a
 * shared, immutable model; the eval of token batches, and the generation
 * stream (sampling, stop strings, UTF-8-complete pieces) on top of it.
 *
 * The session appends: eval puts its tokens at the next positions after
 * the n_pos held, and remembers which token each held position has, so a
 * caller (or the next stream) can rewind to a common prefix. What a
 * speculative decoder needs is here: eval of k tokens with all k logit
 * rows, the hidden states after the final norm (an MTP drafter reads them),
 * rewind, and the cache itself for snapshots of recurrent state. One thread
 * at a time per session; ez_llm_stream_cancel is the exception. */
#ifndef EZ_LLM_SESSION_H
#define EZ_LLM_SESSION_H

#include "core/common.h"
#include "core/pool.h"
#include "draft.h"
#include "forward.h"
#include "gpu_step.h"
#include "kv.h"
#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

typedef struct ez_llm_session ez_llm_session;

/* n_ctx >= 1 positions, n_batch >= 1 tokens per pass; kv_type_k,
 * kv_type_v: the ez_kv_type of every layer's cached keys and values.
 * ELIZA_E_INVALID_ARG for an unknown type or a block type the head size
 * does not divide into, ELIZA_E_NOMEM. m and pool must outlive it. */
EZ_INTERNAL int32_t ez_llm_session_create(const ez_llm_model *m, ez_pool *pool, int32_t n_ctx, int32_t n_batch,
                                          int kv_type_k, int kv_type_v, ez_llm_session **out);
EZ_INTERNAL void ez_llm_session_free(ez_llm_session *s);

/* A session whose model runs on the GPU: step (gpu_step.h; owned by the
 * session from here, also on failure) holds the weights and a cache of
 * n_ctx positions (its context). Eval runs every token as one replayed
 * step (all_logits reads every row back); there is no CPU cache
 * (ez_llm_session_cache is NULL), no hidden states (ELIZA_E_UNSUPPORTED),
 * and any held position can be rewound to. ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_llm_session_create_gpu(const ez_llm_model *m, ez_llm_gpu *step, int32_t n_ctx,
                                              ez_llm_session **out);
EZ_INTERNAL int ez_llm_session_on_gpu(const ez_llm_session *s);
/* The GPU session's device name; NULL for a CPU session. */
EZ_INTERNAL const char *ez_llm_session_gpu_device(const ez_llm_session *s);
/* A GPU session's greedy choice for the last position evaluated (an eval
 * with logits NULL leaves it on the device: 4 bytes read back), as the
 * sampler's greedy pick of that position's logits. ELIZA_E_STATE on a CPU
 * session or before any eval. */
EZ_INTERNAL int32_t ez_llm_session_greedy(ez_llm_session *s, int32_t *best);

/* The cache, for snapshots (kv.h; the speculative loop's recurrent state). */
EZ_INTERNAL const ez_llm_model *ez_llm_session_model(const ez_llm_session *s);
EZ_INTERNAL ez_kv_cache *ez_llm_session_cache(ez_llm_session *s);
/* The ez_kv_type of the keys (values = 0) or of the values. */
EZ_INTERNAL int ez_llm_session_kv_type(const ez_llm_session *s, int values);
/* The KV cache's size over all layers, and per position. */
EZ_INTERNAL size_t ez_llm_session_kv_bytes(const ez_llm_session *s);
EZ_INTERNAL size_t ez_llm_session_kv_bytes_per_token(const ez_llm_session *s);
EZ_INTERNAL const ez_llm_profile *ez_llm_session_profile(const ez_llm_session *s);

/* Positions held, and the token at each of them ([n_pos]). */
EZ_INTERNAL int32_t ez_llm_session_n_pos(const ez_llm_session *s);
EZ_INTERNAL const int32_t *ez_llm_session_tokens(const ez_llm_session *s);
/* Drops every position. */
EZ_INTERNAL void ez_llm_session_clear(ez_llm_session *s);
/* Drops the last n positions (ez_kv_cache_rewind's rules). */
EZ_INTERNAL int32_t ez_llm_session_rewind(ez_llm_session *s, int32_t n);

/* Evaluates tokens[0..n) at positions n_pos .. n_pos + n - 1, in passes of
 * up to n_batch tokens, and holds them. logits: NULL for none; else the
 * last token's [n_vocab], or with all_logits every token's [n, n_vocab].
 * hidden: NULL, or every token's state after the final norm [n, n_embd].
 * ELIZA_E_CONTEXT_FULL past n_ctx, ELIZA_E_INVALID_ARG for a token id
 * outside the embedding table (nothing evaluated then); cancel (may be
 * NULL) is polled between layers: ELIZA_E_CANCELLED, the passes before it
 * held. */
EZ_INTERNAL int32_t ez_llm_session_eval(ez_llm_session *s, const int32_t *tokens, int32_t n, float *logits,
                                        int all_logits, float *hidden, ez_llm_flag *cancel);

/* Evaluates a prompt of n >= 1 tokens from position 0, reusing what the
 * session holds: the longest common prefix of tokens and the held tokens
 * (at most n - 1, so the last token runs and gives logits) stays, the rest
 * is dropped and only the suffix is evaluated; a prefix that ends inside
 * what the session holds is shortened to where a pass began, so the passes
 * that run again are those that ran before. Where the cache cannot go
 * back to that prefix (a ring overwritten past it, or recurrent state), the
 * whole prompt is evaluated again. *n_reused: the prompt tokens taken from
 * the cache. logits: the last token's [n_vocab]; hidden: NULL, or the
 * evaluated tokens' states after the final norm, [n - *n_reused, n_embd].
 * Errors as eval. */
EZ_INTERNAL int32_t ez_llm_session_eval_prompt(ez_llm_session *s, const int32_t *tokens, int32_t n, float *logits,
                                               float *hidden, ez_llm_flag *cancel, int32_t *n_reused);

/* ---- the generation stream ------------------------------------------------------------ */

typedef struct ez_llm_stream ez_llm_stream;

typedef struct {
    ez_sampler_params sampling;
    int32_t max_tokens;          /* <= 0: unlimited */
    int32_t n_ctx;               /* this stream's context limit (<= the session's); 0: the session's */
    int add_bos, parse_special;  /* how the prompt is tokenized */
    const char *const *stop;     /* stop strings, non-empty */
    uint32_t n_stop;
    ez_drafter *drafter;         /* speculative decoding (llm/spec.h), or NULL; reset
                                  * at open, used by this stream only while it runs */
    int32_t draft_max;           /* the most tokens a round drafts, 1 .. EZ_DRAFT_MAX */
} ez_llm_gen_params;

typedef struct {
    int32_t token;               /* -1 when the piece ends the stream */
    const char *text;            /* valid UTF-8, NUL-terminated, owned by the stream until the next call */
    uint32_t text_len;
} ez_llm_gen_piece;

typedef struct {
    uint32_t n_prompt, n_generated;
    uint32_t n_prompt_evaluated; /* the prompt tokens this stream evaluated (the rest: a prefix the session held) */
    int32_t stop_reason;         /* ELIZA_STOP_* */
    uint64_t prefill_ns, decode_ns;
    uint32_t decode_evals;       /* tokens the decoding passes produced (one per
                                  * pass without a drafter) */
    uint32_t draft_tokens;       /* drafted tokens verified */
    uint32_t draft_accepted;     /* of them accepted */
    uint32_t draft_rounds;       /* verification passes with drafts */
} ez_llm_gen_stats;

/* A stream over s (which must outlive it or be detached first) with tok
 * (the same lifetime). ELIZA_E_INVALID_ARG for a prompt without tokens or
 * bad stop strings, ELIZA_E_CONTEXT_FULL for a prompt longer than the
 * context, ELIZA_E_NOMEM. Nothing is evaluated before the first next,
 * which evaluates the prompt with ez_llm_session_eval_prompt (a chat turn
 * runs only its new tokens). */
EZ_INTERNAL int32_t ez_llm_stream_open(ez_llm_session *s, const ez_tokenizer *tok, const char *prompt,
                                       const ez_llm_gen_params *p, ez_llm_stream **out);
/* ELIZA_OK with the next piece, ELIZA_DONE at the end (piece: token -1,
 * empty), or an error, which every later call repeats. */
EZ_INTERNAL int32_t ez_llm_stream_next(ez_llm_stream *st, ez_llm_gen_piece *piece);
/* Safe from any thread. */
EZ_INTERNAL void ez_llm_stream_cancel(ez_llm_stream *st);
EZ_INTERNAL void ez_llm_stream_stats(const ez_llm_stream *st, ez_llm_gen_stats *out);
/* The session is going away: the stream may only be freed from here on. */
EZ_INTERNAL void ez_llm_stream_detach(ez_llm_stream *st);
/* Logs the stream's profile (ELIZA_PROFILE=1) while attached, and frees it. */
EZ_INTERNAL void ez_llm_stream_free(ez_llm_stream *st);

#endif /* EZ_LLM_SESSION_H */
