/* Choosing the next token from logits.
 *
 * In llama.cpp's order: repetition penalty over the last repeat_last_n
 * tokens; then greedy (argmax) when temperature <= 0; otherwise top-k,
 * top-p (nucleus, probabilities at temperature 1 over what top-k kept),
 * min-p (logit >= max + log(min_p)), temperature, and a draw from the
 * renormalized distribution with our own PRNG (xoshiro256** seeded by
 * splitmix64), so one seed gives one output on every platform. */
#ifndef EZ_LLM_SAMPLER_H
#define EZ_LLM_SAMPLER_H

#include "core/common.h"

typedef struct {
    float temperature;      /* <= 0: greedy */
    int32_t top_k;          /* <= 0: off */
    float top_p;            /* >= 1: off */
    float min_p;            /* <= 0: off */
    float repeat_penalty;   /* 1: off */
    int32_t repeat_last_n;  /* tokens looked back on; 0 = off, -1 = all */
    uint64_t seed;
} ez_sampler_params;

typedef struct ez_sampler ez_sampler;

/* ELIZA_E_INVALID_ARG for values out of range (NaN, negative top_p, ...),
 * ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_sampler_create(const ez_sampler_params *p, int32_t n_vocab, ez_sampler **out);
EZ_INTERNAL void ez_sampler_free(ez_sampler *s);

/* The next token for logits[0..n_vocab) (modified: penalties applied);
 * history[0..n_history) are the tokens so far (prompt and generated). */
EZ_INTERNAL int32_t ez_sampler_sample(ez_sampler *s, float *logits, const int32_t *history, size_t n_history);

/* The distribution ez_sampler_sample draws from, for the speculative
 * acceptance rule: ids[0..n) and their probabilities probs[0..n) (summing
 * to 1), n returned; ids and probs need room for n_vocab entries. Greedy
 * sampling gives the one argmax token with probability 1. logits are
 * modified as by ez_sampler_sample; no random number is drawn. */
EZ_INTERNAL int32_t ez_sampler_dist(ez_sampler *s, float *logits, const int32_t *history, size_t n_history,
                                    int32_t *ids, float *probs);
/* The next number of the sampler's stream, uniform in [0, 1). */
EZ_INTERNAL double ez_sampler_uniform(ez_sampler *s);

#endif /* EZ_LLM_SAMPLER_H */
