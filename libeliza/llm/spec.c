/* The speculative-decoding loop and its acceptance rules; see spec.h. */
#include "spec.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/platform.h"

/* One more row's cost relative to a one-row pass, where no row count near
 * it was measured yet: Gemma 3 270M Q4_K_M at 2 threads on the 2-core Zen 5
 * machines costs ~4x a decode pass for 8 rows, ~6x for 16. */
#define SPEC_COST_PER_TOKEN 0.35
/* Weight of a new measurement in the cost averages. */
#define SPEC_COST_WEIGHT 0.25
/* Plain rounds after which one round drafts again. */
#define SPEC_PROBE 8
/* Weight of the past in the acceptance counts (per round). */
#define SPEC_DECAY 0.8
/* The acceptance rate assumed before any round. */
#define SPEC_PRIOR_RATE 0.6

struct ez_spec {
    int32_t n_vocab, n_embd, k_max, k;
    double acc_w, rej_w;          /* decayed counts of accepted and rejected drafts */
    double pass_ns[EZ_DRAFT_MAX + 2]; /* [rows] average target pass, 0 = not measured */
    double draft_ns;              /* average drafter time per drafted token */
    int32_t k_probe;              /* the k of the last drafting round */
    int32_t plain_rounds;         /* rounds without drafts in a row */
    int untimed;                  /* costs from the prior only (ez_spec_set_untimed) */
    ez_spec_stats stats;
    float *logits;                /* [k_max + 1, n_vocab] */
    int32_t *batch;               /* [k_max + 1] the pending token then the drafts */
    int32_t *ids;                 /* [n_vocab] the target distribution of one row */
    float *probs;                 /* [n_vocab] */
    float *hidden;                /* [k_max + 1, n_embd] with want_hidden, else NULL */
    const float *last_hidden;     /* the row of hidden that produced the last token */
    int32_t *hist;                /* the context and the drafts, for the penalties */
    size_t cap_hist;
};

int32_t ez_spec_create(int32_t n_vocab, int32_t n_embd, int32_t k_max, int want_hidden, ez_spec **out) {
    ez_spec *sp;
    *out = NULL;
    if (k_max < 1 || k_max > EZ_DRAFT_MAX)
        return ez_fail(ELIZA_E_INVALID_ARG, "draft_max_tokens %d is outside 1..%d", k_max, EZ_DRAFT_MAX);
    if (n_vocab < 1) return ez_fail(ELIZA_E_INVALID_ARG, "speculative decoding: empty vocabulary");
    sp = (ez_spec *)calloc(1, sizeof *sp);
    if (!sp) return ez_fail(ELIZA_E_NOMEM, "out of memory for speculative decoding");
    sp->n_vocab = n_vocab;
    sp->n_embd = n_embd;
    sp->k_max = k_max;
    sp->logits = (float *)malloc(sizeof(float) * (size_t)(k_max + 1) * (size_t)n_vocab);
    sp->batch = (int32_t *)malloc(sizeof(int32_t) * (size_t)(k_max + 1));
    sp->ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)n_vocab);
    sp->probs = (float *)malloc(sizeof(float) * (size_t)n_vocab);
    if (want_hidden) sp->hidden = (float *)malloc(sizeof(float) * (size_t)(k_max + 1) * (size_t)EZ_MAX(n_embd, 1));
    if (!sp->logits || !sp->batch || !sp->ids || !sp->probs || (want_hidden && !sp->hidden)) {
        ez_spec_free(sp);
        return ez_fail(ELIZA_E_NOMEM, "out of memory for %d rows of draft logits", k_max + 1);
    }
    ez_spec_reset(sp);
    *out = sp;
    return ELIZA_OK;
}

void ez_spec_free(ez_spec *sp) {
    if (!sp) return;
    free(sp->logits);
    free(sp->batch);
    free(sp->ids);
    free(sp->probs);
    free(sp->hist);
    free(sp->hidden);
    free(sp);
}

static void choose_k(ez_spec *sp);

void ez_spec_reset(ez_spec *sp) {
    memset(&sp->stats, 0, sizeof sp->stats);
    memset(sp->pass_ns, 0, sizeof sp->pass_ns);
    sp->last_hidden = NULL;
    sp->draft_ns = 0.0;
    sp->plain_rounds = 0;
    sp->acc_w = SPEC_PRIOR_RATE;
    sp->rej_w = 1.0 - SPEC_PRIOR_RATE;
    choose_k(sp);
    if (sp->k == 0) sp->k = sp->k_max;
    sp->k_probe = sp->k;
    sp->stats.k = sp->k;
}

ez_spec_stats ez_spec_get_stats(const ez_spec *sp) { return sp->stats; }
int ez_spec_wants_hidden(const ez_spec *sp) { return sp->hidden != NULL; }
void ez_spec_set_untimed(ez_spec *sp) { sp->untimed = 1; }
const float *ez_spec_last_hidden(const ez_spec *sp) { return sp->last_hidden; }

/* ---- rules ------------------------------------------------------------------------- */

int32_t ez_spec_agree(const int32_t *draft, const int32_t *target, int32_t m) {
    int32_t a = 0;
    while (a < m && draft[a] == target[a]) a++;
    return a;
}

float ez_spec_prob(const int32_t *ids, const float *probs, int32_t n, int32_t x) {
    for (int32_t i = 0; i < n; i++)
        if (ids[i] == x) return probs[i];
    return 0.0f;
}

int ez_spec_accept(const int32_t *ids, const float *probs, int32_t n, const float *q, int32_t x, double u) {
    const double p = ez_spec_prob(ids, probs, n, x);
    const double qx = q ? q[x] : 1.0;
    if (p <= 0.0) return 0;
    if (qx <= p) return 1; /* min(1, p / q) = 1, also for q(x) = 0 */
    return u < p / qx;
}

/* max(0, p - q) at candidate i. */
static double residual(const int32_t *ids, const float *probs, int32_t i, const float *q, int32_t x) {
    const double qv = q ? q[ids[i]] : (ids[i] == x ? 1.0 : 0.0);
    const double r = (double)probs[i] - qv;
    return r > 0.0 ? r : 0.0;
}

int32_t ez_spec_draw_residual(const int32_t *ids, const float *probs, int32_t n, const float *q, int32_t x,
                              double u) {
    double total = 0.0, cum = 0.0, r;
    int32_t i, last = -1;
    for (i = 0; i < n; i++) total += residual(ids, probs, i, q, x);
    if (!(total > 0.0)) return ez_spec_draw(ids, probs, n, u);
    r = u * total;
    for (i = 0; i < n; i++) {
        const double w = residual(ids, probs, i, q, x);
        if (w <= 0.0) continue;
        cum += w;
        last = i;
        if (r < cum) break;
    }
    return ids[i < n ? i : last];
}

int32_t ez_spec_draw(const int32_t *ids, const float *probs, int32_t n, double u) {
    double total = 0.0, cum = 0.0, r;
    int32_t i;
    for (i = 0; i < n; i++) total += probs[i];
    r = u * total;
    for (i = 0; i < n - 1; i++) {
        cum += probs[i];
        if (r < cum) break;
    }
    return ids[i];
}

int32_t ez_spec_best_k(double a, const double *cost, int32_t k_max) {
    int32_t best = 0;
    double best_rate = 0.0;
    if (a > 0.999) a = 0.999;
    if (a < 0.0) a = 0.0;
    for (int32_t k = 0; k <= k_max; k++) {
        const double tokens = (1.0 - pow(a, (double)(k + 1))) / (1.0 - a);
        const double rate = tokens / cost[k];
        if (rate > best_rate) {
            best_rate = rate;
            best = k;
        }
    }
    return best;
}

/* The cost of a pass over n rows: measured, else scaled from the nearest
 * measured row count, else the prior alone (in units of a one-row pass). */
static double pass_cost(const ez_spec *sp, int32_t n) {
    int32_t near = 0;
    if (sp->pass_ns[n] > 0.0) return sp->pass_ns[n];
    for (int32_t d = 1; d <= sp->k_max + 1 && !near; d++) {
        if (n + d <= sp->k_max + 1 && sp->pass_ns[n + d] > 0.0) near = n + d;
        else if (n - d >= 1 && sp->pass_ns[n - d] > 0.0) near = n - d;
    }
    if (!near) return 1.0 + SPEC_COST_PER_TOKEN * (double)(n - 1);
    return sp->pass_ns[near] * (1.0 + SPEC_COST_PER_TOKEN * (double)(n - 1)) /
           (1.0 + SPEC_COST_PER_TOKEN * (double)(near - 1));
}

static void choose_k(ez_spec *sp) {
    double cost[EZ_DRAFT_MAX + 1];
    for (int32_t k = 0; k <= sp->k_max; k++) cost[k] = pass_cost(sp, k + 1) + (double)k * sp->draft_ns;
    sp->k = ez_spec_best_k(sp->acc_w / (sp->acc_w + sp->rej_w), cost, sp->k_max);
    if (sp->k > 0) sp->k_probe = sp->k;
}

static void measure(double *avg, double ns) { *avg = *avg > 0.0 ? *avg + SPEC_COST_WEIGHT * (ns - *avg) : ns; }

/* ---- the round --------------------------------------------------------------------- */

static void adapt(ez_spec *sp, int32_t proposed, int32_t accepted) {
    sp->acc_w = SPEC_DECAY * sp->acc_w + (double)accepted;
    sp->rej_w = SPEC_DECAY * sp->rej_w + (accepted < proposed ? 1.0 : 0.0);
}

/* The context followed by the drafts, so row i's penalties see drafts 0..i-1. */
static int32_t fill_history(ez_spec *sp, const ez_draft_target *view, const int32_t *drafts, int32_t m) {
    const size_t need = view->n_tokens + (size_t)m;
    if (need > sp->cap_hist) {
        int32_t *h = (int32_t *)realloc(sp->hist, sizeof(int32_t) * need);
        if (!h) return ez_fail(ELIZA_E_NOMEM, "out of memory for %" PRIu64 " tokens of history", (uint64_t)need);
        sp->hist = h;
        sp->cap_hist = need;
    }
    memcpy(sp->hist, view->tokens, sizeof(int32_t) * view->n_tokens);
    if (m) memcpy(sp->hist + view->n_tokens, drafts, sizeof(int32_t) * (size_t)m);
    return ELIZA_OK;
}

int32_t ez_spec_round(ez_spec *sp, const ez_spec_target *t, ez_drafter *d, ez_sampler *smp,
                      const ez_draft_target *view, int32_t k_room, int32_t *out, int32_t *n_out,
                      ez_atomic_int *cancel) {
    int32_t *drafts = sp->batch + 1;
    int32_t m = 0, a, rc, k;
    uint64_t t0, t1;

    /* Plain rounds for a while, then one that drafts to see whether that
     * pays again. */
    k = sp->k;
    if (k == 0 && sp->plain_rounds >= SPEC_PROBE) k = sp->k_probe;
    k = EZ_MIN(k, k_room);

    *n_out = 0;
    if (view->n_tokens < 1 || view->n_past != (int32_t)view->n_tokens - 1)
        return ez_fail(ELIZA_E_INTERNAL, "speculative round: %d cached positions for %" PRIu64 " tokens",
                       view->n_past, (uint64_t)view->n_tokens);
    t0 = ez_time_ns();
    if (k >= 1) {
        int has_q = 0;
        rc = d->vt->propose(d, view, k, drafts, &m, NULL, &has_q, cancel);
        if (rc) return rc;
        if (m < 0 || m > k) return ez_fail(ELIZA_E_INTERNAL, "drafter '%s' proposed %d tokens of %d", d->vt->name, m, k);
        for (int32_t i = 0; i < m; i++)
            if (drafts[i] < 0 || drafts[i] >= sp->n_vocab)
                return ez_fail(ELIZA_E_INTERNAL, "drafter '%s' proposed token %d outside the vocabulary (%d)",
                               d->vt->name, drafts[i], sp->n_vocab);
    }
    sp->batch[0] = view->tokens[view->n_tokens - 1];
    t1 = ez_time_ns();
    if ((rc = t->eval(t->self, sp->batch, m + 1, view->n_past, sp->logits, sp->hidden, cancel))) return rc;
    if (!sp->untimed) {
        measure(&sp->pass_ns[m + 1], (double)(ez_time_ns() - t1));
        if (m > 0) measure(&sp->draft_ns, (double)(t1 - t0) / (double)m);
    }
    if ((rc = fill_history(sp, view, drafts, m))) return rc;

    /* Row i predicts the token after batch[i]; drafts[i] is its guess. */
    for (a = 0;; a++) {
        float *row = sp->logits + (size_t)a * (size_t)sp->n_vocab;
        const int32_t n = ez_sampler_dist(smp, row, sp->hist, view->n_tokens + (size_t)a, sp->ids, sp->probs);
        if (a == m) {
            out[a] = ez_spec_draw(sp->ids, sp->probs, n, ez_sampler_uniform(smp));
            break;
        }
        if (ez_spec_accept(sp->ids, sp->probs, n, NULL, drafts[a], ez_sampler_uniform(smp))) {
            out[a] = drafts[a];
            continue;
        }
        out[a] = ez_spec_draw_residual(sp->ids, sp->probs, n, NULL, drafts[a], ez_sampler_uniform(smp));
        break;
    }
    if (t->rewind && (rc = t->rewind(t->self, view->n_past + a + 1))) return rc;
    if (sp->hidden) sp->last_hidden = sp->hidden + (size_t)a * (size_t)sp->n_embd;
    if (m > 0) {
        sp->stats.rounds++;
        sp->stats.drafted += (uint64_t)m;
        sp->stats.accepted += (uint64_t)a;
        adapt(sp, m, a);
    }
    sp->plain_rounds = k > 0 ? 0 : sp->plain_rounds + 1;
    choose_k(sp);
    sp->stats.k = sp->k;
    if (d->vt->observe && (rc = d->vt->observe(d, m, out, a + 1))) return rc;
    *n_out = a + 1;
    return ELIZA_OK;
}
