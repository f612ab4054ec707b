/* Experimental, not yet used by the engine: one decode step of a loaded model
 * on the GPU (gpu/), composed of the backend's ops, for comparing the GPU
 * with the CPU engine (tests/c/test_llm_model.c) until the engine's backend
 * seam (issue 12) takes it over.
 *
 * Weights are uploaded once in their stored types; the KV cache (F32, n_ctx
 * rows per layer, no ring) and the activations stay on the device; the pass
 * is recorded once and replayed per token, which reads back the logits. Architectures without biases or rope factors only
 * (gemma3, qwen3, llama without scaling); ELIZA_E_UNSUPPORTED otherwise. */
#ifndef EZ_LLM_GPU_STEP_H
#define EZ_LLM_GPU_STEP_H

#include "core/common.h"
#include "gpu/gpu.h"
#include "model.h"

typedef struct ez_llm_gpu ez_llm_gpu;

/* The model's weights on g (which must outlive the result) and a cache of
 * n_ctx positions. */
EZ_INTERNAL int32_t ez_llm_gpu_create(const ez_llm_model *m, ez_gpu *g, int32_t n_ctx, ez_llm_gpu **out);
EZ_INTERNAL void ez_llm_gpu_free(ez_llm_gpu *s);

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

#endif /* EZ_LLM_GPU_STEP_H */
