/* Token sampling; see sampler.h for the order of the steps. */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

typedef struct {
    float logit;
    int32_t id;
} candidate;

struct ez_sampler {
    ez_sampler_params p;
    int32_t n_vocab;
    uint64_t rng[4];       /* xoshiro256** state */
    candidate *cand;       /* [n_vocab] */
    uint32_t *seen;        /* [n_vocab] stamp of the last penalty pass that saw the token */
    uint32_t stamp;
};

/* ---- PRNG --------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4]) {
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double uniform01(uint64_t s[4]) { return (double)(xoshiro_next(s) >> 11) * (1.0 / 9007199254740992.0); }

/* ---- lifetime ----------------------------------------------------------------------- */

int32_t ez_sampler_create(const ez_sampler_params *p, int32_t n_vocab, ez_sampler **out) {
    ez_sampler *s;
    uint64_t x;
    *out = NULL;
    if (n_vocab < 1) return ez_fail(ELIZA_E_INVALID_ARG, "sampler: empty vocabulary");
    if (isnan(p->temperature) || isnan(p->top_p) || isnan(p->min_p) || isnan(p->repeat_penalty))
        return ez_fail(ELIZA_E_INVALID_ARG, "sampler: temperature, top_p, min_p and repeat_penalty must be numbers");
    if (p->top_p < 0.0f) return ez_fail(ELIZA_E_INVALID_ARG, "sampler: top_p %g is negative", (double)p->top_p);
    if (p->min_p < 0.0f || p->min_p > 1.0f)
        return ez_fail(ELIZA_E_INVALID_ARG, "sampler: min_p %g is outside [0, 1]", (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f) || isinf(p->repeat_penalty))
        return ez_fail(ELIZA_E_INVALID_ARG, "sampler: repeat_penalty %g must be positive", (double)p->repeat_penalty);
    if (p->repeat_last_n < -1)
        return ez_fail(ELIZA_E_INVALID_ARG, "sampler: repeat_last_n %d is below -1", p->repeat_last_n);
    if (isinf(p->temperature) && p->temperature > 0)
        return ez_fail(ELIZA_E_INVALID_ARG, "sampler: temperature is infinite");
    s = (ez_sampler *)calloc(1, sizeof *s);
    if (!s) return ez_fail(ELIZA_E_NOMEM, "sampler: out of memory");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->cand = (candidate *)malloc(sizeof(candidate) * (size_t)n_vocab);
    s->seen = (uint32_t *)calloc((size_t)n_vocab, sizeof(uint32_t));
    if (!s->cand || !s->seen) {
        ez_sampler_free(s);
        return ez_fail(ELIZA_E_NOMEM, "sampler: out of memory for %d candidates", n_vocab);
    }
    x = p->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    *out = s;
    return ELIZA_OK;
}

void ez_sampler_free(ez_sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s->seen);
    free(s);
}

/* ---- steps -------------------------------------------------------------------------- */

/* llama.cpp's penalty: each distinct recent token once, dividing a positive
 * logit and multiplying a negative one, so it always becomes less likely. */
static void repetition_penalty(ez_sampler *s, float *logits, const int32_t *history, size_t n_history) {
    size_t n = n_history, i;
    if (s->p.repeat_penalty == 1.0f || s->p.repeat_last_n == 0) return;
    if (s->p.repeat_last_n > 0 && (size_t)s->p.repeat_last_n < n) n = (size_t)s->p.repeat_last_n;
    if (++s->stamp == 0) {
        memset(s->seen, 0, sizeof(uint32_t) * (size_t)s->n_vocab);
        s->stamp = 1;
    }
    for (i = n_history - n; i < n_history; i++) {
        int32_t id = history[i];
        if (id < 0 || id >= s->n_vocab || s->seen[id] == s->stamp) continue;
        s->seen[id] = s->stamp;
        logits[id] = logits[id] > 0.0f ? logits[id] / s->p.repeat_penalty : logits[id] * s->p.repeat_penalty;
    }
}

/* Lanes of argmax's first pass. */
#define ARGMAX_LANES 16

/* The first index of the largest logit (NaNs never win; a NaN at 0 gives
 * 0), as the plain running-best loop finds it. That loop waits on one
 * compare per logit (290 us for Gemma 3's 262k vocabulary on the 2.6 GHz
 * Xeon, 2% of a decode step); here the largest value comes from
 * independent lanes, then a scan finds its first index (156 us with the
 * maximum at three quarters of the vocabulary). */
static int32_t argmax(const float *logits, int32_t n) {
    float lane[ARGMAX_LANES], mx;
    int32_t i = 0;
    if (n <= 0 || logits[0] != logits[0]) return 0;
    for (int j = 0; j < ARGMAX_LANES; j++) lane[j] = logits[0];
    for (; i + ARGMAX_LANES <= n; i += ARGMAX_LANES)
        for (int j = 0; j < ARGMAX_LANES; j++) lane[j] = logits[i + j] > lane[j] ? logits[i + j] : lane[j];
    for (; i < n; i++) lane[0] = logits[i] > lane[0] ? logits[i] : lane[0];
    mx = lane[0];
    for (int j = 1; j < ARGMAX_LANES; j++) mx = lane[j] > mx ? lane[j] : mx;
    for (i = 0; i < n; i++)
        if (logits[i] == mx) break;
    return i;
}

static int32_t argmax_candidate(const candidate *c, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (c[i].logit > c[best].logit) best = i;
    return best;
}

/* Descending logit, then ascending id, so ties order the same everywhere. */
static int cmp_desc(const void *a, const void *b) {
    const candidate *x = (const candidate *)a, *y = (const candidate *)b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int better(const candidate *x, const candidate *y) { return cmp_desc(x, y) < 0; }

/* Moves the k best of c[0..n) to c[0..k), sorted: a min-heap of the k best
 * so far (its root the worst of them), O(n log k). */
static void top_k_sorted(candidate *c, int32_t n, int32_t k) {
    for (int32_t i = 0; i < n; i++) {
        int32_t j;
        candidate x = c[i];
        if (i < k) {
            j = i; /* sift up */
            while (j > 0 && better(&c[(j - 1) / 2], &x)) {
                c[j] = c[(j - 1) / 2];
                j = (j - 1) / 2;
            }
            c[j] = x;
            continue;
        }
        if (!better(&x, &c[0])) continue;
        j = 0; /* replace the root, sift down */
        for (;;) {
            int32_t l = 2 * j + 1, r = l + 1, w = j;
            const candidate *wc = &x;
            if (l < k && better(wc, &c[l])) {
                w = l;
                wc = &c[l];
            }
            if (r < k && better(wc, &c[r])) w = r;
            if (w == j) break;
            c[j] = c[w];
            j = w;
        }
        c[j] = x;
    }
    qsort(c, (size_t)k, sizeof *c, cmp_desc);
}

/* Mass of c[0..n) at temperature 1 relative to max logit mx: sum of exp(l - mx). */
static double mass(const candidate *c, int32_t n, double mx) {
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)c[i].logit - mx);
    return sum;
}

/* Nucleus cut over candidates already sorted: the shortest prefix whose
 * probability (mass relative to `total`) reaches top_p. */
static int32_t top_p_prefix(const candidate *c, int32_t n, double mx, double total, float top_p) {
    double cum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        cum += exp((double)c[i].logit - mx) / total;
        if (cum >= top_p) return i + 1;
    }
    return n;
}

/* Penalties, then top-k, top-p and min-p: the candidates the draw chooses
 * from are c[0..*n_out), mx their largest logit. Returns the argmax token
 * when sampling is greedy (temperature <= 0), else -1. */
static int32_t filter(ez_sampler *s, float *logits, const int32_t *history, size_t n_history, int32_t *n_out,
                      double *mx_out) {
    const ez_sampler_params *p = &s->p;
    candidate *c = s->cand;
    int32_t n = s->n_vocab, i;
    int sorted = 0;
    double mx;

    repetition_penalty(s, logits, history, n_history);
    if (!(p->temperature > 0.0f)) return argmax(logits, s->n_vocab);

    for (i = 0; i < n; i++) {
        c[i].logit = logits[i];
        c[i].id = i;
    }
    if (p->top_k > 0 && p->top_k < n) {
        top_k_sorted(c, n, p->top_k);
        n = p->top_k;
        sorted = 1;
    }
    mx = c[argmax_candidate(c, n)].logit;
    if (p->top_p < 1.0f) {
        const double total = mass(c, n, mx);
        if (!sorted) {
            /* Without top-k, sorting the whole vocabulary for the nucleus would
             * cost more than the model; select the best 64, 256, ... until
             * they hold top_p of the probability. */
            int32_t k = 64;
            for (;;) {
                k = EZ_MIN(k, n);
                top_k_sorted(c, n, k);
                if (k == n || mass(c, k, mx) / total >= p->top_p) break;
                k *= 4;
            }
            n = k;
            sorted = 1;
        }
        n = top_p_prefix(c, n, mx, total, p->top_p);
    }
    if (p->min_p > 0.0f) {
        /* Keeps logits >= max + ln(min_p): a prefix when sorted, a filter
         * (in id order) otherwise. */
        const double floor_logit = mx + log((double)p->min_p);
        int32_t kept = 0;
        for (i = 0; i < n; i++)
            if ((double)c[i].logit >= floor_logit) c[kept++] = c[i];
        n = kept;
    }
    *n_out = n;
    *mx_out = mx;
    return -1;
}

int32_t ez_sampler_sample(ez_sampler *s, float *logits, const int32_t *history, size_t n_history) {
    const candidate *c = s->cand;
    const float t = s->p.temperature;
    int32_t n = 0, i;
    double mx = 0.0, sum, cum, r;
    const int32_t greedy = filter(s, logits, history, n_history, &n, &mx);

    if (greedy >= 0) return greedy;
    for (sum = 0.0, i = 0; i < n; i++) sum += exp(((double)c[i].logit - mx) / t);
    r = uniform01(s->rng) * sum;
    for (cum = 0.0, i = 0; i < n - 1; i++) {
        cum += exp(((double)c[i].logit - mx) / t);
        if (r < cum) break;
    }
    return c[i].id;
}

int32_t ez_sampler_dist(ez_sampler *s, float *logits, const int32_t *history, size_t n_history, int32_t *ids,
                        float *probs) {
    const candidate *c = s->cand;
    const float t = s->p.temperature;
    int32_t n = 0, i;
    double mx = 0.0, sum = 0.0;
    const int32_t greedy = filter(s, logits, history, n_history, &n, &mx);

    if (greedy >= 0) {
        ids[0] = greedy;
        probs[0] = 1.0f;
        return 1;
    }
    for (i = 0; i < n; i++) sum += exp(((double)c[i].logit - mx) / t);
    for (i = 0; i < n; i++) {
        ids[i] = c[i].id;
        probs[i] = (float)(exp(((double)c[i].logit - mx) / t) / sum);
    }
    return n;
}

double ez_sampler_uniform(ez_sampler *s) { return uniform01(s->rng); }
