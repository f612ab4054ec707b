/* The GPU decode step (llm/gpu_step.c) against the CPU engine on a real
 * model, then its speed:
 *
 * 1. correctness, token by token over a fixed prompt: max |logit
 *    difference| and top-1 agreement per position (the margin rule: a
 *    position counts when the CPU's margin between its first and second
 *    choice passes twice the difference), and the wall time per token of
 *    each (the CPU engine with one thread per core and an F32 cache, as the
 *    GPU step's cache is); then the same tokens as one prompt pass, its
 *    last row's logits against the CPU's last position;
 * 2. speed, device timestamps off: N_PROMPT prompt tokens as one prompt
 *    pass (ez_llm_gpu_eval: batches of up to 512 rows) and as single
 *    replayed steps, then N_DECODE greedy tokens from position 0 again,
 *    each step's choice (4 bytes read back) fed to the next: tokens/s of
 *    each, as llama-bench's pp and tg (from an empty context) report them;
 * 3. where the time goes: one more decode step and one prompt pass
 *    recorded with timestamps, the milliseconds per kernel summed over the
 *    pass, and each op of the first block and the last three in us.
 *
 *   bench_gpu_llm MODEL.gguf [N_CHECK [N_DECODE [N_PROMPT]]]   (defaults 8, 128, 512;
 *                                                              ELIZA_GPU_DEVICE picks the device)
 *
 * Build: configure with -DELIZA_BUILD_BENCH=ON. Token ids are a fixed list
 * taken modulo the vocabulary, the same on both sides. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
#define N_PROMPT_IDS ((int)(sizeof PROMPT / sizeof PROMPT[0]))
#define MAX_OPS 4096

/* Host CPU time of the process (every thread), in ns. */
static uint64_t cpu_time_ns(void) { return (uint64_t)((double)clock() * (1e9 / (double)CLOCKS_PER_SEC)); }

static int32_t token_at(const ez_llm_model *m, int i) { return PROMPT[i % N_PROMPT_IDS] % m->hp.n_vocab; }

/* Part 1: the GPU step against the CPU engine; returns 0 when every decided
 * position agrees, 1 when one does not, -1 on an error. */
static int check_against_cpu(const ez_llm_model *m, ez_llm_session *ctx, ez_llm_gpu *st, int n_tok) {
    float *cpu = (float *)malloc((size_t)m->hp.n_vocab * sizeof(float));
    float *gl = (float *)malloc((size_t)m->hp.n_vocab * sizeof(float));
    double cpu_s = 0.0, gpu_s = 0.0, worst = 0.0;
    int agree = 0, decided = 0, rc = 0;
    if (!cpu || !gl) rc = ez_fail(ELIZA_E_NOMEM, "out of memory for the logits");
    for (int t = 0; t < n_tok && rc == 0; t++) {
        const int32_t tok = token_at(m, t);
        double diff = 0.0;
        int cb = 0, c2 = -1, gb = 0;
        uint64_t t0 = ez_time_ns();
        if ((rc = ez_llm_session_eval(ctx, &tok, 1, cpu, 0, NULL, NULL))) break;
        cpu_s += (double)(ez_time_ns() - t0) * 1e-9;
        t0 = ez_time_ns();
        if ((rc = ez_llm_gpu_step(st, tok, t, gl, NULL))) break;
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
        printf("  pos %2d token %6d: cpu top-1 %6d (margin %.3f), gpu top-1 %6d, max |diff| %.4f\n", t, tok, cb,
               cpu[cb] - cpu[c2], gb, diff);
    }
    if (rc == 0 && n_tok > 1) {
        /* The prompt pass over the same tokens: its last row against the CPU's last position (cpu holds it). */
        int32_t *toks = (int32_t *)malloc((size_t)n_tok * sizeof(int32_t));
        double diff = 0.0;
        int cb = 0, gb = 0;
        if (!toks) rc = ez_fail(ELIZA_E_NOMEM, "out of memory for the tokens");
        for (int t = 0; t < n_tok && toks; t++) toks[t] = token_at(m, t);
        if (rc == 0 && (rc = ez_llm_gpu_eval(st, toks, n_tok, 0, gl, 0, NULL)) == 0) {
            for (int32_t i = 0; i < m->hp.n_vocab; i++) {
                const double e = fabs((double)gl[i] - (double)cpu[i]);
                diff = e > diff || e != e ? e : diff;
                if (cpu[i] > cpu[cb]) cb = i;
                if (gl[i] > gl[gb]) gb = i;
            }
            printf("prompt pass of %d tokens: last row's top-1 %d (CPU %d), max |diff| %.4f\n", n_tok, gb, cb, diff);
        }
        free(toks);
    }
    free(cpu);
    free(gl);
    if (rc) return -1;
    printf("max |diff| %.4f; top-1 agrees at %d of %d decided positions (of %d)\n", worst, agree, decided, n_tok);
    printf("per token with the logits read back: CPU engine %.2f ms (%d threads), GPU step %.2f ms\n",
           cpu_s * 1e3 / n_tok, ez_cpu_count(), gpu_s * 1e3 / n_tok);
    return agree == decided ? 0 : 1;
}

/* Part 2: the prompt pass, prompt steps, then greedy decode, timestamps off. */
static int32_t measure_speed(ez_llm_gpu *st, const ez_llm_model *m, int n_prompt, int n_decode) {
    int32_t rc = ELIZA_OK, tok = token_at(m, 0);
    int32_t *toks = (int32_t *)malloc((size_t)n_prompt * sizeof(int32_t));
    uint64_t t0, c0;
    if (!toks) return ez_fail(ELIZA_E_NOMEM, "out of memory for the prompt");
    for (int i = 0; i < n_prompt; i++) toks[i] = token_at(m, i);
    /* A warm-up (the first run of a bucket records it), then the timed pass. */
    rc = ez_llm_gpu_eval(st, toks, n_prompt, 0, NULL, 0, NULL);
    t0 = ez_time_ns();
    c0 = cpu_time_ns();
    if (rc == ELIZA_OK) rc = ez_llm_gpu_eval(st, toks, n_prompt, 0, NULL, 0, NULL);
    const double pass_s = (double)(ez_time_ns() - t0) * 1e-9, pass_cpu_s = (double)(cpu_time_ns() - c0) * 1e-9;
    free(toks);
    if (rc) return rc;
    if ((rc = ez_llm_gpu_step(st, tok, 0, NULL, &tok))) return rc;
    t0 = ez_time_ns();
    for (int i = 0; i < n_prompt && rc == ELIZA_OK; i++) rc = ez_llm_gpu_step(st, token_at(m, i), i, NULL, &tok);
    if (rc) return rc;
    const double pp_s = (double)(ez_time_ns() - t0) * 1e-9;
    t0 = ez_time_ns();
    for (int i = 0; i < n_decode && rc == ELIZA_OK; i++) rc = ez_llm_gpu_step(st, tok, i, NULL, &tok);
    if (rc) return rc;
    const double tg_s = (double)(ez_time_ns() - t0) * 1e-9;
    printf("speed: prompt %d tokens as one prompt pass %.1f tokens/s (%.3f ms wall, %.3f ms host CPU); as single "
           "steps %.1f tokens/s (%.3f ms each); decode %d tokens from position 0 %.1f tokens/s (%.3f ms each)\n",
           n_prompt, n_prompt / pass_s, pass_s * 1e3, pass_cpu_s * 1e3, n_prompt / pp_s, pp_s * 1e3 / n_prompt,
           n_decode, n_decode / tg_s, tg_s * 1e3 / n_decode);
    return ELIZA_OK;
}

/* Part 3: the ops of the last run, summed per kernel. */
static void print_ops(const char *what, const double *ms, const char *const *names, int n) {
    const char *kinds[64];
    double sum[64], total = 0.0;
    int count[64], n_kinds = 0;
    if (n == 0) {
        printf("no device timestamps on this device\n");
        return;
    }
    for (int i = 0; i < n && i < MAX_OPS; i++) {
        int k = 0;
        while (k < n_kinds && strcmp(kinds[k], names[i]) != 0) k++;
        if (k == n_kinds) {
            if (n_kinds == 64) continue;
            kinds[n_kinds] = names[i];
            sum[n_kinds] = 0.0;
            count[n_kinds++] = 0;
        }
        sum[k] += ms[i];
        count[k]++;
        total += ms[i];
    }
    printf("device time of %s, %d ops: %.3f ms in kernels\n", what, n, total);
    for (int k = 0; k < n_kinds; k++)
        printf("  %-12s %4d ops %8.3f ms %5.1f%%\n", kinds[k], count[k], sum[k], 100.0 * sum[k] / total);
    /* Each op of the first block (after the pass's copies and first norm) and the last three, in us. */
    printf("  ops 4..15 and the last 3 (us):");
    for (int i = 4; i < n && i < 16 && i < MAX_OPS; i++) printf(" %s %.1f", names[i], ms[i] * 1e3);
    for (int i = EZ_MAX(16, n - 3); i < n && i < MAX_OPS; i++) printf(" %s %.1f", names[i], ms[i] * 1e3);
    printf("\n");
}

/* One decode step with timestamps. */
static int32_t print_breakdown(ez_llm_gpu *st, const ez_llm_model *m, int pos) {
    static double ms[MAX_OPS];
    static const char *names[MAX_OPS];
    char what[64];
    int32_t best, rc = ez_llm_gpu_step(st, token_at(m, 1), pos, NULL, &best);
    if (rc) return rc;
    snprintf(what, sizeof what, "one decode step at position %d", pos);
    print_ops(what, ms, names, ez_llm_gpu_timings(st, ms, names, MAX_OPS));
    return ELIZA_OK;
}

/* One prompt pass of n tokens (at most 512: one piece) from position 0 with timestamps. */
static int32_t print_prompt_breakdown(ez_llm_gpu *st, const ez_llm_model *m, int n) {
    static double ms[MAX_OPS];
    static const char *names[MAX_OPS];
    char what[64];
    int32_t *toks = (int32_t *)malloc((size_t)n * sizeof(int32_t)), rc;
    if (!toks) return ez_fail(ELIZA_E_NOMEM, "out of memory for the prompt");
    for (int i = 0; i < n; i++) toks[i] = token_at(m, i);
    rc = ez_llm_gpu_eval(st, toks, n, 0, NULL, 0, NULL);
    free(toks);
    if (rc) return rc;
    snprintf(what, sizeof what, "one prompt pass of %d tokens", n);
    print_ops(what, ms, names, ez_llm_gpu_prompt_timings(st, ms, names, MAX_OPS));
    return ELIZA_OK;
}

int main(int argc, char **argv) {
    const int n_check = argc > 2 ? atoi(argv[2]) : 8;
    const int n_decode = argc > 3 ? atoi(argv[3]) : 128;
    const int n_prompt = argc > 4 ? atoi(argv[4]) : 512;
    const int32_t n_ctx = EZ_MAX(EZ_MAX(n_prompt, n_decode), n_check) + 1;
    ez_gguf *gg = NULL;
    ez_llm_model *m = NULL;
    ez_pool *pool = NULL;
    ez_llm_session *ctx = NULL;
    ez_gpu *gpu = NULL;
    ez_llm_gpu *st = NULL;
    ez_gpu_params p;
    int rc, status = 1;
    uint64_t t0;
    if (argc < 2 || n_check < 0 || n_decode < 1 || n_prompt < 1 || n_prompt > 65536 || n_decode > 65536) {
        fprintf(stderr, "usage: bench_gpu_llm MODEL.gguf [N_CHECK [N_DECODE [N_PROMPT]]]\n");
        return 2;
    }
    ez_gpu_params_default(&p);
    p.allow_cpu = 1;
    if ((rc = ez_gguf_open(argv[1], &gg)) || (rc = ez_llm_model_load(gg, &m)) ||
        !(pool = ez_pool_create(ez_cpu_count())) ||
        (rc = ez_llm_session_create(m, pool, EZ_MAX(n_check, 1), 1, ELIZA_LLM_KV_F32, ELIZA_LLM_KV_F32, &ctx)) ||
        (rc = ez_gpu_open(&p, &gpu))) {
        fprintf(stderr, "bench_gpu_llm: %s\n", ez_error_message());
        goto done;
    }
    printf("model %s (%s, %d layers, n_embd %d, vocab %d), device '%s' (%s, driver %s)\n", argv[1], m->hp.arch_name,
           (int)m->hp.n_layer, (int)m->hp.n_embd, (int)m->hp.n_vocab, ez_gpu_info(gpu)->name, ez_gpu_info(gpu)->type,
           ez_gpu_info(gpu)->driver);
    ez_gpu_set_timestamps(gpu, 0);
    t0 = ez_time_ns();
    if ((rc = ez_llm_gpu_create(m, gpu, n_ctx, &st))) goto fail;
    printf("weights uploaded in %.2f s\n", (double)(ez_time_ns() - t0) * 1e-9);
    status = n_check > 0 ? check_against_cpu(m, ctx, st, n_check) : 0;
    if (status < 0 || (rc = measure_speed(st, m, n_prompt, n_decode))) goto fail;
    ez_llm_gpu_free(st);
    st = NULL;
    ez_gpu_set_timestamps(gpu, 1);
    if ((rc = ez_llm_gpu_create(m, gpu, n_ctx, &st)) || (rc = print_breakdown(st, m, 0)) ||
        (rc = print_breakdown(st, m, n_prompt)) ||
        (n_prompt > 1 && (rc = print_prompt_breakdown(st, m, EZ_MIN(n_prompt, 512)))))
        goto fail;
    goto done;
fail:
    fprintf(stderr, "bench_gpu_llm: %s\n", ez_error_message());
    status = 1;
done:
    ez_llm_gpu_free(st);
    ez_gpu_close(gpu);
    ez_llm_session_free(ctx);
    ez_pool_destroy(pool);
    ez_llm_model_free(m); /* owns gg, closed by ez_llm_model_load itself on failure */
    return status;
}
#endif
