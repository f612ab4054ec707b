/* Drafters for speculative decoding: who proposes the tokens the target
 * model then verifies in one batched pass.
 *
 * The loop (llm/spec.h) owns the target's session; a drafter only proposes.
 * One round, with the context t[0..n) (prompt and accepted tokens):
 *
 *   1. The target's KV cache holds positions 0 .. n-2; t[n-1] is the
 *      pending token, sampled but not evaluated yet ("n_past = n - 1").
 *   2. propose(): the drafter writes up to k_max guesses d[0..m) for
 *      t[n], t[n+1], ... (m = 0 is a valid answer: "no idea", the loop then
 *      decodes one token plainly). With q != NULL it may also give, per
 *      guess, the distribution it drew it from (q[i * n_vocab + v]); a
 *      drafter that picks deterministically (argmax, lookup) leaves
 *      *has_q = 0 and the acceptance rule treats q as one-hot.
 *   3. The loop evaluates [t[n-1], d0 .. d(m-1)] at positions n-1 .. n-1+m
 *      in ONE target pass (m + 1 logits rows), accepts a prefix d[0..a) by
 *      the greedy or the speculative-sampling rule, appends the target's own
 *      token for row a, and rewinds the target's cache to n + a positions
 *      (n-1 .. n-1+a stay: t[n-1] and the accepted drafts).
 *   4. observe(): the drafter is told the outcome: `accepted` tokens
 *      appended (a accepted drafts then the target's token, so a + 1
 *      values; fewer when a stop condition cut the run) after m proposals.
 *      A drafter with a cache of its own (a draft model) rewinds it here.
 *
 * The target view handed to propose() is valid for that call only:
 *   tokens, n_tokens   the context t[0..n), read-only;
 *   n_past             positions in the target's cache (n - 1);
 *   hidden             the target's hidden state after the final norm for
 *                      the position that produced t[n-1] (the row whose
 *                      logits were sampled), [n_embd] floats; NULL when
 *                      the session did not keep it (MTP drafters need it
 *                      and fail with ELIZA_E_STATE without);
 *   session            the target session, for a drafter that reads its KV
 *                      cache in place (Gemma 4's assistant attends to the
 *                      target's K/V of its last non-shared layers); it must
 *                      not evaluate, rewind or otherwise change it.
 *
 * Threads: one drafter belongs to one stream; propose() polls `cancel`
 * (the stream's cancel flag, read with ez_atomic_int_load; may be NULL)
 * at least once per drafted token and returns ELIZA_E_CANCELLED when it
 * is set. Errors are ELIZA_E_* with a message
 * (ez_fail); a drafter never prints or aborts. reset() forgets everything
 * learned from a context (a new stream starts); free(NULL-safe via
 * ez_drafter_free) releases it.
 *
 * Adding a drafter: one file llm/draft_<name>.c that fills an
 * ez_drafter_vtable and a constructor, one case in ez_drafter_open
 * (draft.c). */
#ifndef EZ_LLM_DRAFT_H
#define EZ_LLM_DRAFT_H

#include "core/atomic.h"
#include "core/common.h"
#include "core/pool.h"
#include "model.h"

/* The same numbers as eliza_llm_draft_kind. */
typedef enum {
    EZ_DRAFT_NONE = 0,
    EZ_DRAFT_NGRAM = 1,   /* prompt lookup: the continuation of the longest
                           * recent n-gram match in the context */
    EZ_DRAFT_MTP = 2,     /* a multi-token-prediction head reading the
                           * target's hidden state and KV (gemma4-assistant) */
    EZ_DRAFT_MODEL = 3,   /* a separate small model with the same vocabulary */
    EZ_DRAFT_COUNT
} ez_draft_kind;

/* The longest run one round may draft (eliza.h's ELIZA_LLM_DRAFT_MAX). */
#define EZ_DRAFT_MAX 64

struct ez_llm_session; /* llm/session.h */

typedef struct {
    const int32_t *tokens;          /* [n_tokens] prompt + accepted tokens */
    size_t n_tokens;
    int32_t n_past;                 /* positions in the target's cache */
    const float *hidden;            /* [n_embd] or NULL, see above */
    struct ez_llm_session *session; /* read-only use, see above; may be NULL */
} ez_draft_target;

typedef struct ez_drafter ez_drafter;

typedef struct {
    const char *name;   /* "ngram", "mtp", "model" */
    /* Writes up to k_max (1 <= k_max <= EZ_DRAFT_MAX) guesses to out and
     * their count to *n_out; q: NULL, or room for k_max rows of n_vocab
     * floats (see above; *has_q says whether they were written). */
    int32_t (*propose)(ez_drafter *d, const ez_draft_target *t, int32_t k_max, int32_t *out, int32_t *n_out,
                       float *q, int *has_q, ez_atomic_int *cancel);
    /* n_proposed guesses led to accepted[0..n_accepted) being appended. */
    int32_t (*observe)(ez_drafter *d, int32_t n_proposed, const int32_t *accepted, int32_t n_accepted);
    void (*reset)(ez_drafter *d);
    void (*free)(ez_drafter *d);
} ez_drafter_vtable;

/* The common head of every drafter (its own state follows in its file). */
struct ez_drafter {
    const ez_drafter_vtable *vt;
    ez_draft_kind kind;
    int32_t n_vocab;    /* the target's, which the drafter's guesses lie in */
};

/* What a drafter is made from. */
typedef struct {
    ez_draft_kind kind;
    const char *path;               /* GGUF of the draft model / MTP head;
                                     * NULL for ngram */
    const ez_llm_model *target;     /* the target (vocab and width checks) */
    ez_pool *pool;                  /* the target's threads, shared */
    int32_t n_ctx;                  /* the target's context length */
    int32_t k_max;                  /* longest draft that will be asked */
} ez_draft_open_params;

/* Makes the drafter p names. ELIZA_E_UNSUPPORTED for a kind this build has
 * no drafter for (the message names it), ELIZA_E_INVALID_ARG for a missing
 * path or a draft model whose vocabulary (or, for MTP, hidden size) differs
 * from the target's (the message names both), the model's own load errors,
 * ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_drafter_open(const ez_draft_open_params *p, ez_drafter **out);
EZ_INTERNAL void ez_drafter_free(ez_drafter *d);
/* "none", "ngram", "mtp", "model"; "?" otherwise. */
EZ_INTERNAL const char *ez_draft_kind_name(int kind);
/* Whether this build can make drafters of `kind` (capabilities JSON). */
EZ_INTERNAL int ez_draft_kind_available(int kind);

/* ---- the n-gram drafter's rule, exposed for its unit test ---------------- */

typedef struct {
    int32_t ngram_min;   /* shortest suffix that counts as a match (>= 1) */
    int32_t ngram_max;   /* longest suffix tried first */
} ez_ngram_params;

/* Prompt lookup (llama.cpp's lookup decoding, transformers' prompt-lookup
 * candidate generator): for n = ngram_max down to ngram_min, the last n
 * tokens of ctx[0..n_ctx) are searched for earlier in ctx, latest match
 * first; the tokens after the first match found (at most k_max, never past
 * the end of ctx) are the draft. Returns their count, 0 without a match. */
EZ_INTERNAL int32_t ez_ngram_lookup(const ez_ngram_params *p, const int32_t *ctx, size_t n_ctx, int32_t k_max,
                                    int32_t *out);

#endif /* EZ_LLM_DRAFT_H */
