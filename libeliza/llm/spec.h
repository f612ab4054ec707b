/* Speculative decoding: one loop for every drafter (llm/draft.h).
 *
 * A round drafts k tokens, verifies them in ONE batched target pass that
 * gives all k + 1 logits rows, accepts a prefix, appends the target's own
 * token for the first row not accepted (or a bonus token after the last
 * draft), and rewinds the target's cache past the rejected drafts.
 *
 * Acceptance is the standard speculative-sampling rule (Leviathan et al.
 * 2023, Chen et al. 2023), applied to the distribution p the stream's
 * sampler would draw from (penalties, top-k, top-p, min-p, temperature:
 * ez_sampler_dist) and the drafter's distribution q: draft x is accepted
 * with probability min(1, p(x) / q(x)); else the token is drawn from
 * norm(max(0, p - q)). A drafter that picks deterministically has q
 * one-hot at x: accept with probability p(x), else draw from p without x.
 * The output then has exactly the target's distribution. Greedy sampling
 * makes p one-hot at the argmax, which turns the rule into "accept the
 * longest prefix that agrees with the target's argmax": speculative greedy
 * output is plain greedy output, token for token.
 *
 * k adapts to the acceptance and to what passes cost: with a per-token
 * acceptance rate a (an exponentially weighted count of accepted drafts
 * against rejections), a round of k drafts yields (1 - a^(k+1)) / (1 - a)
 * tokens on average; it costs the drafter's time for k tokens and a target
 * pass over k + 1 rows, both measured as the stream runs (the cost of a
 * pass is far from linear in its rows: the weights are read once, and the
 * kernels change with the row count). k is the value in 0..k_max that
 * gives the most tokens per second; k = 0 decodes plainly, and after
 * SPEC_PROBE plain rounds one round drafts again to keep the estimates
 * current. Row counts not measured yet are estimated from the nearest
 * measured one as 1 + SPEC_COST_PER_TOKEN per extra row. */
#ifndef EZ_LLM_SPEC_H
#define EZ_LLM_SPEC_H

#include "core/atomic.h"
#include "core/common.h"
#include "draft.h"
#include "sampler.h"

/* The target as the loop sees it (the session fills it in). */
typedef struct {
    void *self;
    int32_t n_vocab;
    /* Evaluates tokens[0..n) at positions pos0 .. pos0 + n - 1 after the
     * cached positions 0 .. pos0 - 1 and writes all n logits rows,
     * [n, n_vocab], and (hidden not NULL) the n hidden states after the
     * final norm, [n, n_embd]; polls cancel (ELIZA_E_CANCELLED). */
    int32_t (*eval)(void *self, const int32_t *tokens, int32_t n, int32_t pos0, float *logits, float *hidden,
                    ez_atomic_int *cancel);
    /* Keeps the first n_keep positions of the cache; NULL when evaluating
     * over the stale positions later is all a rewind needs. */
    int32_t (*rewind)(void *self, int32_t n_keep);
} ez_spec_target;

typedef struct {
    uint64_t rounds;      /* verification passes with at least one draft */
    uint64_t drafted;     /* draft tokens verified */
    uint64_t accepted;    /* of them accepted */
    int32_t k;            /* the draft length the next round asks for */
} ez_spec_stats;

typedef struct ez_spec ez_spec;

/* k_max: 1 .. EZ_DRAFT_MAX drafts per round (ELIZA_E_INVALID_ARG
 * otherwise). want_hidden: keep the target's hidden states ([n_embd] per
 * row) for a drafter that reads them (MTP). */
EZ_INTERNAL int32_t ez_spec_create(int32_t n_vocab, int32_t n_embd, int32_t k_max, int want_hidden, ez_spec **out);
/* Choose k from the cost prior alone, never from timings: with sampling,
 * the draws a round makes depend on k, and a seed must give one output. */
EZ_INTERNAL void ez_spec_set_untimed(ez_spec *sp);
EZ_INTERNAL int ez_spec_wants_hidden(const ez_spec *sp);
/* With want_hidden, after a round: the hidden state of the row that
 * produced the round's last token ([n_embd], valid until the next round);
 * else NULL. */
EZ_INTERNAL const float *ez_spec_last_hidden(const ez_spec *sp);
EZ_INTERNAL void ez_spec_free(ez_spec *sp);
EZ_INTERNAL void ez_spec_reset(ez_spec *sp);
EZ_INTERNAL ez_spec_stats ez_spec_get_stats(const ez_spec *sp);

/* One round after the context view->tokens[0..n) whose last token is not
 * evaluated yet (view->n_past = n - 1 positions cached). At most k_room
 * drafts (the context's room: the pass writes 1 + k positions); k_room <
 * 1 decodes one token plainly. Writes the appended tokens to out (room for
 * k_max + 1) and their count to *n_out: the accepted drafts, then the
 * target's token. The cache then holds view->n_past + *n_out positions
 * (all appended tokens but the last). On an error nothing is appended
 * (ELIZA_E_CANCELLED when cancel was set while drafting or verifying) and
 * the cache past view->n_past is undefined. */
EZ_INTERNAL int32_t ez_spec_round(ez_spec *sp, const ez_spec_target *t, ez_drafter *d, ez_sampler *smp,
                                  const ez_draft_target *view, int32_t k_room, int32_t *out, int32_t *n_out,
                                  ez_atomic_int *cancel);

/* ---- the rules, pure functions (tests/c/test_llm_spec.c) ---------------- */

/* How many of draft[0..m) agree with target[0..m), counted from the start. */
EZ_INTERNAL int32_t ez_spec_agree(const int32_t *draft, const int32_t *target, int32_t m);
/* p(x) of the distribution ids/probs[0..n) (0 outside its support). */
EZ_INTERNAL float ez_spec_prob(const int32_t *ids, const float *probs, int32_t n, int32_t x);
/* Whether draft x is accepted given the uniform number u in [0, 1): u <
 * min(1, p(x) / q(x)); q: [n_vocab] or NULL for one-hot at x. */
EZ_INTERNAL int ez_spec_accept(const int32_t *ids, const float *probs, int32_t n, const float *q, int32_t x,
                               double u);
/* The token drawn by u from norm(max(0, p - q)) (q NULL: one-hot at x);
 * from p itself where that has no mass left (rounding). */
EZ_INTERNAL int32_t ez_spec_draw_residual(const int32_t *ids, const float *probs, int32_t n, const float *q,
                                          int32_t x, double u);
/* The token drawn by u from p. */
EZ_INTERNAL int32_t ez_spec_draw(const int32_t *ids, const float *probs, int32_t n, double u);
/* The draft length in 0..k_max with the most tokens per unit of cost for
 * an acceptance rate a in [0, 1]; cost[k] is the cost of a round of k
 * drafts (k + 1 rows), positive. */
EZ_INTERNAL int32_t ez_spec_best_k(double a, const double *cost, int32_t k_max);

#endif /* EZ_LLM_SPEC_H */
