/* The experimental GPU decode step (llm/gpu_step.c) against the CPU engine
 * on a real model, token by token: max |logit difference| and top-1
 * agreement per position (the margin rule: a position counts when the CPU's
 * margin between its first and second choice passes twice the difference),
 * and the wall time per token of each.
 *
 *   bench_gpu_llm MODEL.gguf [N_TOKENS]      (default 8; ELIZA_GPU_DEVICE picks the device)
 *
 * Build: configure with -DELIZA_BUILD_BENCH=ON. The prompt is a fixed list
 * of token ids (BOS first), the same on both sides; the CPU engine runs with
 * one thread per core and an F32 cache, as the GPU step's cache is. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#if !defined(ELIZA_VULKAN)
int main(void) {
    printf("bench_gpu_llm: this build has no Vulkan backend\n");
    return 0;
}
#else

#include "core/error.h"
#include "core/gguf.h"
#include "core/platform.h"
#include "core/pool.h"
#include "gpu/gpu.h"
#include "llm/gpu_step.h"
#include "llm/model.h"
#include "llm/session.h"

static const int32_t PROMPT[] = {2, 818, 5279, 529, 7001, 563, 1018, 236761, 107, 818, 1374, 9869, 563, 496, 2295, 236761};

int main(int argc, char **argv) {
    const int n_tok = argc > 2 ? atoi(argv[2]) : 8;
    ez_gguf *gg = NULL;
    ez_llm_model *m = NULL;
    ez_pool *pool = NULL;
    ez_llm_session *ctx = NULL;
    ez_gpu *gpu = NULL;
    ez_llm_gpu *st = NULL;
    ez_gpu_params p;
    float *cpu = NULL, *gl = NULL;
    double cpu_s = 0.0, gpu_s = 0.0, worst = 0.0;
    int agree = 0, decided = 0, rc, status = 1;
    uint64_t t0;
    if (argc < 2 || n_tok < 1 || n_tok > (int)(sizeof PROMPT / sizeof PROMPT[0])) {
        fprintf(stderr, "usage: bench_gpu_llm MODEL.gguf [N_TOKENS <= %d]\n", (int)(sizeof PROMPT / sizeof PROMPT[0]));
        return 2;
    }
    ez_gpu_params_default(&p);
    p.allow_cpu = 1;
    if ((rc = ez_gguf_open(argv[1], &gg)) || (rc = ez_llm_model_load(gg, &m)) ||
        !(pool = ez_pool_create(ez_cpu_count())) || (rc = ez_llm_session_create(m, pool, 64, 1, ELIZA_LLM_KV_F32, ELIZA_LLM_KV_F32, &ctx)) ||
        (rc = ez_gpu_open(&p, &gpu))) {
        fprintf(stderr, "bench_gpu_llm: %s\n", ez_error_message());
        goto done;
    }
    printf("model %s (%s), device '%s' (%s)\n", argv[1], m->hp.arch_name, ez_gpu_info(gpu)->name,
           ez_gpu_info(gpu)->type);
    t0 = ez_time_ns();
    if ((rc = ez_llm_gpu_create(m, gpu, 64, &st))) {
        fprintf(stderr, "bench_gpu_llm: %s\n", ez_error_message());
        goto done;
    }
    printf("weights uploaded in %.2f s\n", (double)(ez_time_ns() - t0) * 1e-9);
    cpu = (float *)malloc((size_t)m->hp.n_vocab * sizeof(float));
    gl = (float *)malloc((size_t)m->hp.n_vocab * sizeof(float));
    if (!cpu || !gl) goto done;
    for (int t = 0; t < n_tok; t++) {
        double diff = 0.0;
        int cb = 0, c2 = -1, gb = 0;
        t0 = ez_time_ns();
        if ((rc = ez_llm_session_eval(ctx, &PROMPT[t], 1, cpu, 0, NULL, NULL))) break;
        cpu_s += (double)(ez_time_ns() - t0) * 1e-9;
        t0 = ez_time_ns();
        if ((rc = ez_llm_gpu_step(st, PROMPT[t], t, gl, NULL))) break;
        gpu_s += (double)(ez_time_ns() - t0) * 1e-9;
        for (int32_t i = 0; i < m->hp.n_vocab; i++) {
            const double e = fabs((double)gl[i] - (double)cpu[i]);
            diff = e > diff || e != e ? e : diff;
            if (cpu[i] > cpu[cb]) cb = i;
            if (gl[i] > gl[gb]) gb = i;
        }
        for (int32_t i = 0; i < m->hp.n_vocab; i++)
            if (i != cb && (c2 < 0 || cpu[i] > cpu[c2])) c2 = i;
        if (cpu[cb] - cpu[c2] > 2.0 * diff) {
            decided++;
            agree += gb == cb;
        }
        worst = diff > worst ? diff : worst;
        printf("  pos %2d token %6d: cpu top-1 %6d (margin %.3f), gpu top-1 %6d, max |diff| %.4f\n", t, PROMPT[t], cb,
               cpu[cb] - cpu[c2], gb, diff);
    }
    if (rc) {
        fprintf(stderr, "bench_gpu_llm: %s\n", ez_error_message());
        goto done;
    }
    printf("max |diff| %.4f; top-1 agrees at %d of %d decided positions (of %d)\n", worst, agree, decided, n_tok);
    printf("per token: CPU engine %.1f ms (%d threads), GPU step %.1f ms\n", cpu_s * 1e3 / n_tok, ez_cpu_count(),
           gpu_s * 1e3 / n_tok);
    status = agree == decided ? 0 : 1;
done:
    free(cpu);
    free(gl);
    ez_llm_gpu_free(st);
    ez_gpu_close(gpu);
    ez_llm_session_free(ctx);
    ez_pool_destroy(pool);
    ez_llm_model_free(m); /* owns gg, closed by ez_llm_model_load itself on failure */
    return status;
}
#endif
