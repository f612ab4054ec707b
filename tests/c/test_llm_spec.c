/* Speculative decoding without a model (llm/spec.h, llm/draft.h): the
 * n-gram lookup, the acceptance rules against the distributions they must
 * reproduce, the adaptive draft length, and whole rounds over a synthetic
 * target whose next token is a known function of the last one: speculative
 * greedy output equals plain greedy output with a drafter that is wrong at
 * every position in turn, sampled output has the plain sampler's
 * distribution, and a cancel while verifying appends nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/atomic.h"
#include "core/platform.h"
#include "llm/draft.h"
#include "llm/sampler.h"
#include "llm/spec.h"
#include "check.h"

static uint64_t g_rng = 777;
static double urand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}

/* ---- n-gram lookup ---------------------------------------------------------------- */

static void test_ngram_prefers_longest_then_latest(void) {
    const ez_ngram_params p = {1, 3};
    int32_t out[8];
    /* "5 6 7" occurs at 0 (followed by 1 2) and the last token 7 alone at 9 (followed by 3). */
    const int32_t ctx[] = {5, 6, 7, 1, 2, 9, 9, 9, 9, 7, 3, 4, 5, 6, 7};
    int32_t n = ez_ngram_lookup(&p, ctx, sizeof ctx / sizeof ctx[0], 4, out);
    CHECK_MSG(n == 4 && out[0] == 1 && out[1] == 2 && out[2] == 9 && out[3] == 9, "n=%d out0=%d", n, out[0]);
    {
        /* Only a one-token match: the latest occurrence of 7 wins (followed by 3 4). */
        const int32_t ctx2[] = {7, 8, 1, 7, 3, 4, 2, 7};
        n = ez_ngram_lookup(&p, ctx2, 8, 2, out);
        CHECK_MSG(n == 2 && out[0] == 3 && out[1] == 4, "n=%d out0=%d", n, out[0]);
    }
}

static void test_ngram_clips_and_misses(void) {
    const ez_ngram_params p = {2, 3};
    int32_t out[8];
    const int32_t ctx[] = {1, 2, 3, 1, 2};
    const int32_t none[] = {1, 2, 3, 4, 5};
    const int32_t one[] = {4};
    /* "1 2" matched at 0: the continuation runs to the end of the context (3 1 2). */
    int32_t n = ez_ngram_lookup(&p, ctx, 5, 8, out);
    CHECK_MSG(n == 3 && out[0] == 3 && out[1] == 1 && out[2] == 2, "n=%d", n);
    CHECK(ez_ngram_lookup(&p, none, 5, 8, out) == 0);
    CHECK(ez_ngram_lookup(&p, one, 1, 8, out) == 0);
    {
        /* A loop: the latest match of "7 7" is just behind the end (one token
         * follows it); an earlier one gives the whole draft. */
        const int32_t loop[] = {7, 7, 7, 7, 7, 7};
        n = ez_ngram_lookup(&p, loop, 6, 3, out);
        CHECK_MSG(n == 3 && out[0] == 7 && out[2] == 7, "n=%d", n);
        n = ez_ngram_lookup(&p, loop, 6, 8, out);
        CHECK_MSG(n == 3, "n=%d: the longest continuation of '7 7 7' has 3 tokens", n);
    }
    {
        /* Bigram needed: a lone repeated token does not count with ngram_min 2. */
        const int32_t ctx3[] = {9, 5, 1, 2, 9};
        CHECK(ez_ngram_lookup(&p, ctx3, 5, 8, out) == 0);
    }
}

/* ---- the rules ---------------------------------------------------------------------- */

static void test_agree_counts_leading_matches(void) {
    const int32_t d[] = {1, 2, 3, 4}, t[] = {1, 2, 9, 4};
    CHECK(ez_spec_agree(d, t, 4) == 2);
    CHECK(ez_spec_agree(d, d, 4) == 4);
    CHECK(ez_spec_agree(t + 2, d + 2, 2) == 0);
    CHECK(ez_spec_agree(d, t, 0) == 0);
}

/* Drafting x ~ q, then accepting or drawing from the residual, must give
 * tokens distributed as p, for a one-hot q (deterministic drafter) and a
 * dense q. Total-variation distance of 400k draws against p. */
static void rule_reproduces_p(const float *q_dense, int32_t x_fixed) {
    enum { V = 6, N = 400000 };
    const int32_t ids[V] = {3, 0, 5, 1, 4, 2};
    const float probs[V] = {0.35f, 0.25f, 0.2f, 0.1f, 0.07f, 0.03f};
    double count[V] = {0}, tv = 0.0;
    for (int s = 0; s < N; s++) {
        int32_t x = x_fixed, tok;
        if (q_dense) {
            double r = urand(), cum = 0.0;
            for (x = 0; x < V - 1; x++) {
                cum += q_dense[x];
                if (r < cum) break;
            }
        }
        tok = ez_spec_accept(ids, probs, V, q_dense, x, urand())
                  ? x
                  : ez_spec_draw_residual(ids, probs, V, q_dense, x, urand());
        count[tok] += 1.0;
    }
    for (int i = 0; i < V; i++) tv += 0.5 * fabs(count[ids[i]] / N - probs[i]);
    CHECK_MSG(tv < 0.005, "total variation %.4f (q %s, x %d)", tv, q_dense ? "dense" : "one-hot", x_fixed);
}

static void test_acceptance_rule_keeps_target_distribution(void) {
    const float q[6] = {0.05f, 0.4f, 0.05f, 0.3f, 0.1f, 0.1f}; /* by token id */
    const float q_far[6] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f};
    rule_reproduces_p(NULL, 3);  /* the likeliest token */
    rule_reproduces_p(NULL, 2);  /* the least likely */
    rule_reproduces_p(NULL, 4);
    rule_reproduces_p(q, -1);
    rule_reproduces_p(q_far, -1);
}

static void test_acceptance_edges(void) {
    const int32_t ids[2] = {7, 8};
    const float one[2] = {1.0f, 0.0f};
    /* Greedy p (one-hot at the argmax): the argmax is always accepted, anything else never. */
    CHECK(ez_spec_accept(ids, one, 1, NULL, 7, 0.999999));
    CHECK(!ez_spec_accept(ids, one, 1, NULL, 8, 0.0));
    CHECK(!ez_spec_accept(ids, one, 1, NULL, 3, 0.0));
    /* After a rejection the argmax itself comes back. */
    CHECK(ez_spec_draw_residual(ids, one, 1, NULL, 8, 0.5) == 7);
    /* No residual mass left (x was p's only token): drawn from p. */
    CHECK(ez_spec_draw_residual(ids, one, 1, NULL, 7, 0.5) == 7);
    CHECK(ez_spec_prob(ids, one, 2, 9) == 0.0f);
}

static void test_best_k_follows_acceptance_and_cost(void) {
    double linear[17], flat[17], steep[17];
    for (int k = 0; k <= 16; k++) {
        linear[k] = 1.0 + 0.35 * k;
        flat[k] = k == 0 ? 1.0 : 4.0;    /* the weights read once: any batch costs the same */
        steep[k] = 1.0 + 1.2 * k;        /* every row as dear as a pass */
    }
    CHECK(ez_spec_best_k(0.0, linear, 16) == 0);
    CHECK(ez_spec_best_k(0.2, linear, 16) == 0);
    CHECK(ez_spec_best_k(0.95, linear, 16) > ez_spec_best_k(0.8, linear, 16));
    CHECK(ez_spec_best_k(0.8, linear, 16) >= ez_spec_best_k(0.6, linear, 16));
    CHECK(ez_spec_best_k(0.95, linear, 16) >= 1);
    CHECK(ez_spec_best_k(1.0, linear, 8) == 8);
    CHECK(ez_spec_best_k(1.0, linear, 1) == 1);
    /* A flat cost drafts all it may once drafting pays at all, a steep one never. */
    CHECK(ez_spec_best_k(0.9, flat, 16) == 16);
    CHECK(ez_spec_best_k(0.5, flat, 16) == 0);
    CHECK(ez_spec_best_k(0.99, steep, 16) == 0);
}

/* ---- rounds over a synthetic target ------------------------------------------------ */

enum { TV = 11 };

/* The target: after token t at position pos, logit 4 on (3t + pos) % TV,
 * 2 on (t + 1) % TV, 0 elsewhere; counts its passes and their largest
 * batch; takes 8 us + 0.8 us per row. */
typedef struct {
    int32_t evals, max_batch;
    ez_atomic_int *cancel_seen;
    uint32_t row_ns;   /* cost of a row beyond the first; 0: 800 ns */
} fake_target;

static int32_t fake_next(int32_t t, int32_t pos) { return (3 * t + pos) % TV; }

static int32_t fake_eval(void *self, const int32_t *tokens, int32_t n, int32_t pos0, float *logits, float *hidden,
                         ez_atomic_int *cancel) {
    fake_target *f = (fake_target *)self;
    const uint64_t until = ez_time_ns() + 8000u + (f->row_ns ? f->row_ns : 800u) * (uint64_t)n;
    if (cancel && ez_atomic_int_load(cancel)) return ELIZA_E_CANCELLED;
    /* The "hidden state" of a row: its position. */
    for (int32_t i = 0; hidden && i < n; i++) hidden[i] = (float)(pos0 + i);
    /* A model's cost: mostly reading the weights once per pass (the loop
     * measures passes to choose its draft length). */
    while (ez_time_ns() < until) continue;
    f->evals++;
    if (n > f->max_batch) f->max_batch = n;
    for (int32_t i = 0; i < n; i++) {
        float *row = logits + (size_t)i * TV;
        for (int v = 0; v < TV; v++) row[v] = 0.0f;
        row[(tokens[i] + 1) % TV] = 2.0f;
        row[fake_next(tokens[i], pos0 + i)] = 4.0f;
    }
    return ELIZA_OK;
}

/* A drafter that knows the target's greedy rule and lies at one index of
 * each draft, cycling through the indices (or never, wrong_at < 0). */
typedef struct {
    ez_drafter base;
    int32_t wrong_at, period;
    int32_t set_cancel;
    ez_atomic_int *cancel;
    int32_t observed;
} oracle_drafter;

static int32_t oracle_propose(ez_drafter *d, const ez_draft_target *t, int32_t k, int32_t *out, int32_t *n_out,
                              float *q, int *has_q, ez_atomic_int *cancel) {
    oracle_drafter *o = (oracle_drafter *)d;
    int32_t tok = t->tokens[t->n_tokens - 1];
    /* After the first round: the hidden state of the row that produced the
     * pending token, at position n_past - 1. */
    if (t->hidden) CHECK_MSG(t->hidden[0] == (float)(t->n_past - 1), "hidden of position %g at n_past %d",
                             (double)t->hidden[0], t->n_past);
    (void)q;
    (void)cancel;
    *has_q = 0;
    for (int32_t i = 0; i < k; i++) {
        tok = fake_next(tok, t->n_past + i);
        out[i] = (o->wrong_at >= 0 && i == o->wrong_at % (o->period ? o->period : 1)) ? (tok + 5) % TV : tok;
    }
    if (o->wrong_at >= 0) o->wrong_at++;
    if (o->set_cancel) ez_atomic_int_store(o->cancel, 1);
    *n_out = k;
    return ELIZA_OK;
}

static int32_t oracle_observe(ez_drafter *d, int32_t n_proposed, const int32_t *acc, int32_t n_acc) {
    (void)n_proposed;
    (void)acc;
    ((oracle_drafter *)d)->observed += n_acc;
    return ELIZA_OK;
}

static void oracle_reset(ez_drafter *d) { (void)d; }
static void oracle_free(ez_drafter *d) { (void)d; }
static const ez_drafter_vtable oracle_vt = {"oracle", oracle_propose, oracle_observe, oracle_reset, oracle_free};

static ez_sampler *make_sampler(float temperature, uint64_t seed) {
    ez_sampler_params sp = {temperature, 0, 1.0f, 0.0f, 1.0f, 0, seed};
    ez_sampler *s = NULL;
    CHECK_RC(ez_sampler_create(&sp, TV, &s), ELIZA_OK);
    return s;
}

/* Generates n tokens after {first}: speculatively with drafter d (NULL:
 * plain decoding, one eval per token). */
static int32_t generate_with(ez_drafter *d, int32_t k_max, float temperature, uint64_t seed, int32_t n, int32_t *toks,
                             fake_target *f, int untimed, uint64_t *drafted) {
    ez_sampler *smp = make_sampler(temperature, seed);
    ez_spec *sp = NULL;
    ez_spec_target t = {f, TV, fake_eval, NULL};
    float logits[TV];
    int32_t len = 1, rc = ELIZA_OK;
    toks[0] = 1;
    if (d) CHECK_RC(ez_spec_create(TV, 1, k_max, 1, &sp), ELIZA_OK);
    if (sp && untimed) ez_spec_set_untimed(sp);
    while (len < n && rc == ELIZA_OK) {
        if (!d) {
            rc = fake_eval(f, &toks[len - 1], 1, len - 1, logits, NULL, NULL);
            toks[len] = ez_sampler_sample(smp, logits, toks, (size_t)len);
            len++;
            continue;
        }
        {
            int32_t out[EZ_DRAFT_MAX + 1], n_out = 0;
            ez_draft_target view = {toks, (size_t)len, len - 1, ez_spec_last_hidden(sp), NULL};
            rc = ez_spec_round(sp, &t, d, smp, &view, n - len - 1, out, &n_out, NULL);
            for (int32_t i = 0; i < n_out && len < n; i++) toks[len++] = out[i];
        }
    }
    if (sp && drafted) *drafted = ez_spec_get_stats(sp).drafted;
    ez_spec_free(sp);
    ez_sampler_free(smp);
    return rc;
}

static int32_t generate(ez_drafter *d, int32_t k_max, float temperature, uint64_t seed, int32_t n, int32_t *toks,
                        fake_target *f) {
    return generate_with(d, k_max, temperature, seed, n, toks, f, 0, NULL);
}

static void test_spec_sampling_untimed_is_reproducible(void) {
    /* The same seed on a target whose rows cost little, then a lot: timed,
     * the loop drafts differently (and so draws differently); untimed, the
     * tokens are the same. */
    enum { N = 80 };
    int32_t a[N], b[N];
    uint64_t da = 0, db = 0;
    fake_target cheap = {0, 0, NULL, 100}, dear = {0, 0, NULL, 60000};
    oracle_drafter o1 = {{&oracle_vt, EZ_DRAFT_NGRAM, TV}, 0, 3, 0, NULL, 0};
    oracle_drafter o2 = o1;
    CHECK_RC(generate_with(&o1.base, 8, 1.0f, 99, N, a, &cheap, 0, &da), ELIZA_OK);
    CHECK_RC(generate_with(&o2.base, 8, 1.0f, 99, N, b, &dear, 0, &db), ELIZA_OK);
    CHECK_MSG(da != db, "timed rounds drafted %llu and %llu tokens on cheap and dear rows", (unsigned long long)da,
              (unsigned long long)db);
    o1.wrong_at = o2.wrong_at = 0;
    CHECK_RC(generate_with(&o1.base, 8, 1.0f, 99, N, a, &cheap, 1, &da), ELIZA_OK);
    CHECK_RC(generate_with(&o2.base, 8, 1.0f, 99, N, b, &dear, 1, &db), ELIZA_OK);
    CHECK_MSG(da == db && memcmp(a, b, sizeof a) == 0, "untimed: %llu and %llu drafted, tokens %s",
              (unsigned long long)da, (unsigned long long)db, memcmp(a, b, sizeof a) ? "differ" : "equal");
}

static void test_spec_greedy_equals_plain_with_rejections_everywhere(void) {
    enum { N = 200 };
    int32_t plain[N], spec[N];
    fake_target f0 = {0, 0, NULL, 0};
    CHECK_RC(generate(NULL, 0, 0.0f, 1, N, plain, &f0), ELIZA_OK);
    for (int32_t k = 1; k <= 9; k += 4) {
        for (int32_t period = 0; period <= k; period++) {
            /* period 0: never wrong; otherwise wrong at index 0, 1, ..., period - 1 in turn. */
            oracle_drafter o = {{&oracle_vt, EZ_DRAFT_NGRAM, TV}, period ? 0 : -1, period, 0, NULL, 0};
            fake_target f = {0, 0, NULL, 0};
            /* Untimed (the cost prior alone): timed, a slow build (TSan)
             * can measure a pass dear enough that some rounds do not draft,
             * and the pass count below would depend on the machine. */
            CHECK_RC(generate_with(&o.base, k, 0.0f, 1, N, spec, &f, 1, NULL), ELIZA_OK);
            CHECK_MSG(memcmp(plain, spec, sizeof plain) == 0, "k=%d period=%d: speculative greedy differs", k, period);
            CHECK_MSG(f.max_batch <= k + 1, "a pass of %d tokens for k=%d", f.max_batch, k);
            if (period == 0)
                CHECK_MSG(f.evals <= N / 2, "k=%d, always right: %d passes for %d tokens", k, f.evals, N);
            CHECK_MSG(o.observed == N - 1, "observed %d tokens", o.observed);
        }
    }
}

static void test_spec_sampling_matches_plain_distribution(void) {
    /* The distribution of tokens 1..3 after the start, over many seeds:
     * plain sampling against rounds with a drafter right and wrong by turns. */
    enum { RUNS = 30000, LEN = 4, CELLS = TV * TV * TV };
    static double plain[CELLS], spec[CELLS];
    double tv = 0.0;
    for (int r = 0; r < RUNS; r++) {
        int32_t a[LEN], b[LEN];
        fake_target f = {0, 0, NULL, 0};
        oracle_drafter o = {{&oracle_vt, EZ_DRAFT_NGRAM, TV}, r % 3, 3, 0, NULL, 0};
        CHECK_RC(generate(NULL, 0, 1.0f, (uint64_t)r, LEN, a, &f), ELIZA_OK);
        CHECK_RC(generate(&o.base, 3, 1.0f, (uint64_t)r + 1000003u, LEN, b, &f), ELIZA_OK);
        plain[(a[1] * TV + a[2]) * TV + a[3]] += 1.0 / RUNS;
        spec[(b[1] * TV + b[2]) * TV + b[3]] += 1.0 / RUNS;
    }
    for (int i = 0; i < CELLS; i++) tv += 0.5 * fabs(plain[i] - spec[i]);
    /* Two samples of 30k over ~a few hundred live cells: sampling noise alone gives ~0.03-0.04. */
    CHECK_MSG(tv < 0.06, "total variation between plain and speculative sampling %.4f", tv);
}

static void test_spec_cancel_during_verification_appends_nothing(void) {
    ez_atomic_int cancel;
    int32_t toks[4] = {1}, out[EZ_DRAFT_MAX + 1], n_out = 7;
    fake_target f = {0, 0, NULL, 0};
    ez_spec_target t = {&f, TV, fake_eval, NULL};
    oracle_drafter o = {{&oracle_vt, EZ_DRAFT_NGRAM, TV}, -1, 0, 1, &cancel, 0};
    ez_draft_target view = {toks, 1, 0, NULL, NULL};
    ez_sampler *smp = make_sampler(0.0f, 0);
    ez_spec *sp = NULL;
    ez_atomic_int_store(&cancel, 0);
    CHECK_RC(ez_spec_create(TV, 1, 4, 0, &sp), ELIZA_OK);
    CHECK_RC(ez_spec_round(sp, &t, &o.base, smp, &view, 8, out, &n_out, &cancel), ELIZA_E_CANCELLED);
    CHECK(n_out == 0 && f.evals == 0 && o.observed == 0);
    ez_spec_free(sp);
    ez_sampler_free(smp);
}

static void test_spec_bad_k_refused(void) {
    ez_spec *sp = (ez_spec *)1;
    CHECK_RC(ez_spec_create(TV, 1, 0, 0, &sp), ELIZA_E_INVALID_ARG);
    CHECK(sp == NULL);
    CHECK_RC(ez_spec_create(TV, 1, EZ_DRAFT_MAX + 1, 0, &sp), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_spec_create(TV, 1, -3, 0, &sp), ELIZA_E_INVALID_ARG);
}

int main(void) {
    test_ngram_prefers_longest_then_latest();
    test_ngram_clips_and_misses();
    test_agree_counts_leading_matches();
    test_acceptance_rule_keeps_target_distribution();
    test_acceptance_edges();
    test_best_k_follows_acceptance_and_cost();
    test_spec_greedy_equals_plain_with_rejections_everywhere();
    test_spec_sampling_matches_plain_distribution();
    test_spec_sampling_untimed_is_reproducible();
    test_spec_cancel_during_verification_appends_nothing();
    test_spec_bad_k_refused();
    printf("test_llm_spec: %d passed, %d failed\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
}
