/* The GPU step of a build without the Vulkan backend (gpu/none.c): no
 * model goes to the GPU, and supports / create say why. */
#include "core/error.h"
#include "gpu_step.h"

int32_t ez_llm_gpu_supports(const ez_llm_model *m) {
    (void)m;
    return ez_fail(ELIZA_E_UNSUPPORTED, "this build has no GPU backend (built without glslc / Vulkan headers)");
}

int32_t ez_llm_gpu_create(const ez_llm_model *m, ez_gpu *g, int32_t n_ctx, ez_llm_gpu **out) {
    (void)g;
    (void)n_ctx;
    *out = NULL;
    return ez_llm_gpu_supports(m);
}

void ez_llm_gpu_free(ez_llm_gpu *s) { (void)s; }

int32_t ez_llm_gpu_open(const ez_llm_model *m, const ez_gpu_params *p, int32_t n_ctx, ez_llm_gpu **out) {
    (void)p;
    return ez_llm_gpu_create(m, NULL, n_ctx, out);
}

/* Never reached (no ez_llm_gpu exists in this build); here so the session links. */
int32_t ez_llm_gpu_eval(ez_llm_gpu *s, const int32_t *tokens, int32_t n, int32_t pos0, float *logits, int all_logits,
                        ez_atomic_int *cancel) {
    (void)s, (void)tokens, (void)n, (void)pos0, (void)logits, (void)all_logits, (void)cancel;
    return ez_fail(ELIZA_E_UNSUPPORTED, "this build has no GPU backend");
}

int32_t ez_llm_gpu_best(ez_llm_gpu *s, int32_t *best) {
    (void)s;
    *best = -1;
    return ez_fail(ELIZA_E_UNSUPPORTED, "this build has no GPU backend");
}

uint64_t ez_llm_gpu_cache_bytes(const ez_llm_gpu *s) {
    (void)s;
    return 0;
}

const char *ez_llm_gpu_device_name(const ez_llm_gpu *s) {
    (void)s;
    return "";
}
