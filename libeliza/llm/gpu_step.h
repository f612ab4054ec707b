/* One decode step of a loaded model on the GPU (gpu/), composed of the
 * backend's ops: what a session runs when its model is on the GPU
 * (session.h's ez_llm_session_create_gpu), token by token.
 *
 * Weights are uploaded once in their stored types; the KV cache (F32, n_ctx
 * rows per layer, no ring, so any earlier position can be gone back to) and
 * the activations stay on the device; the pass is recorded once and
 * replayed per token, which reads back the logits or only the greedy
 * choice. Architectures without biases or rope factors only (gemma3, qwen3,
 * llama without scaling); ELIZA_E_UNSUPPORTED otherwise. A build without
 * the Vulkan backend has gpu_step_none.c instead, whose create and
 * supports say so. */
#ifndef EZ_LLM_GPU_STEP_H
#define EZ_LLM_GPU_STEP_H

#include "core/atomic.h"
#include "core/common.h"
#include "gpu/gpu.h"
#include "model.h"

typedef struct ez_llm_gpu ez_llm_gpu;

/* The model's weights on g (which must outlive the result) and a cache of
 * n_ctx positions. */
EZ_INTERNAL int32_t ez_llm_gpu_create(const ez_llm_model *m, ez_gpu *g, int32_t n_ctx, ez_llm_gpu **out);
EZ_INTERNAL void ez_llm_gpu_free(ez_llm_gpu *s);
/* Opens the device p chooses (gpu.h's rules) and creates the model's step
 * on it, which then owns the device (ez_llm_gpu_free closes it). */
EZ_INTERNAL int32_t ez_llm_gpu_open(const ez_llm_model *m, const ez_gpu_params *p, int32_t n_ctx, ez_llm_gpu **out);
/* The name of the step's device. */
EZ_INTERNAL const char *ez_llm_gpu_device_name(const ez_llm_gpu *s);

/* Evaluates `token` at position pos (after positions 0 .. pos-1 were);
 * writes its [n_vocab] logits unless logits is NULL, and the greedy choice
 * (the first index of the largest logit, found on the device: 4 bytes read
 * back) unless best is NULL. */
EZ_INTERNAL int32_t ez_llm_gpu_step(ez_llm_gpu *s, int32_t token, int32_t pos, float *logits, int32_t *best);

/* Where the last step's time went: each recorded op's milliseconds from
 * device timestamps and its kernel's name, in the pass's order; returns the
 * op count (0 without timestamps, see ez_gpu_set_timestamps), filling at
 * most cap of each array. */
EZ_INTERNAL int ez_llm_gpu_timings(const ez_llm_gpu *s, double *ms, const char **names, int cap);

/* The same for the last prompt pass (ez_llm_gpu_eval of several tokens);
 * 0 before one ran. */
EZ_INTERNAL int ez_llm_gpu_prompt_timings(const ez_llm_gpu *s, double *ms, const char **names, int cap);

/* ELIZA_OK when ez_llm_gpu_create can take m (its architecture, features and
 * weight types), else ELIZA_E_UNSUPPORTED saying why; no device is opened. */
EZ_INTERNAL int32_t ez_llm_gpu_supports(const ez_llm_model *m);

/* Evaluates tokens[0..n) at positions pos0 .. pos0 + n - 1 (the cache rows
 * of earlier positions are what earlier calls wrote there). logits: NULL,
 * the last token's [n_vocab], or with all_logits every token's [n,
 * n_vocab]. Several tokens without all_logits run the prompt pass (a batch
 * of up to 512 rows per run, longer prompts in pieces); one token or
 * all_logits runs one replayed decode step each. cancel (may be NULL) is
 * polled between steps or pieces: ELIZA_E_CANCELLED, the tokens before it
 * evaluated. */
EZ_INTERNAL int32_t ez_llm_gpu_eval(ez_llm_gpu *s, const int32_t *tokens, int32_t n, int32_t pos0, float *logits,
                                    int all_logits, ez_atomic_int *cancel);
/* The greedy choice of the last step's logits (the first index of the
 * largest, found on the device: 4 bytes read back). */
EZ_INTERNAL int32_t ez_llm_gpu_best(ez_llm_gpu *s, int32_t *best);

/* The device cache's size in bytes (keys and values of every layer). */
EZ_INTERNAL uint64_t ez_llm_gpu_cache_bytes(const ez_llm_gpu *s);

#endif /* EZ_LLM_GPU_STEP_H */
