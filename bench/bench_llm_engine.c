/* The LLM engine through the public API on the CPU and on the GPU
 * (eliza_llm_params.n_gpu_layers = -1, gpu_required), the same GGUF and
 * prompt: greedy tokens (how many agree from the start), the last prompt
 * position's logits (max |difference|, top-1), and each backend's prefill
 * and decode tokens/s from the stream's stats.
 *
 *   bench_llm_engine MODEL.gguf [N_GENERATED [DEVICE]]   (default 64;
 *                    DEVICE as eliza_llm_params.gpu_device, default
 *                    $ELIZA_GPU_DEVICE, else the best GPU)
 *
 * Build: configure with -DELIZA_BUILD_BENCH=ON. Both run greedy with an F32
 * cache and one CPU thread per core. Quantized weights: the CPU engine
 * quantizes the activations too and the GPU does not (docs/gpu.md), so the
 * logits differ by more than rounding and greedy text may part where the
 * top two are close. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eliza.h"

#define MAX_GEN 1024

static const char PROMPT[] =
    "The history of the clock begins with the sundial and the water clock. In the fourteenth century";

typedef struct {
    int32_t tokens[MAX_GEN];
    int n;
    eliza_llm_stats stats;
} run;

static int generate(eliza_llm *llm, int n_gen, run *r) {
    eliza_llm_stream_config c;
    eliza_llm_stream *st = NULL;
    int32_t rc;
    eliza_llm_stream_default_config(&c);
    c.prompt = PROMPT;
    c.temperature = 0.0f;
    c.max_tokens = n_gen;
    r->n = 0;
    if ((rc = eliza_llm_stream_open(llm, &c, &st))) return rc;
    for (;;) {
        eliza_llm_piece piece;
        memset(&piece, 0, sizeof piece);
        piece.struct_size = sizeof piece;
        rc = eliza_llm_stream_next(st, &piece);
        if (rc != ELIZA_OK) break;
        if (r->n < MAX_GEN) r->tokens[r->n++] = piece.token;
    }
    memset(&r->stats, 0, sizeof r->stats);
    r->stats.struct_size = sizeof r->stats;
    eliza_llm_stream_stats(st, &r->stats);
    eliza_llm_stream_close(st);
    return rc == ELIZA_DONE ? ELIZA_OK : rc;
}

static eliza_llm *open_llm(const char *path, int32_t gpu_layers, const char *device) {
    eliza_llm_params p;
    eliza_llm *llm = NULL;
    char *info = NULL;
    eliza_llm_default_params(&p);
    p.context_size = 2048;
    p.n_gpu_layers = gpu_layers;
    p.gpu_device = device;
    p.gpu_required = gpu_layers != 0;
    if (eliza_llm_open(path, &p, &llm) != ELIZA_OK) {
        fprintf(stderr, "bench_llm_engine: %s\n", eliza_last_error());
        return NULL;
    }
    if (eliza_llm_info_json(llm, &info) == ELIZA_OK) {
        const char *b = strstr(info, "\"backend\": \"");
        if (b) b += strlen("\"backend\": \"");
        printf("  backend: %.*s\n", b ? (int)strcspn(b, "\"") : 0, b ? b : "?");
    }
    eliza_free(info);
    return llm;
}

int main(int argc, char **argv) {
    const int n_gen = argc > 2 ? atoi(argv[2]) : 64;
    const char *device = argc > 3 ? argv[3] : NULL;
    eliza_llm *llm[2] = {NULL, NULL};
    static run runs[2];
    float *logits[2] = {NULL, NULL};
    size_t count[2] = {0, 0};
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int status = 1;
    if (argc < 2 || n_gen < 1 || n_gen > MAX_GEN) {
        fprintf(stderr, "usage: bench_llm_engine MODEL.gguf [N_GENERATED <= %d [DEVICE]]\n", MAX_GEN);
        return 2;
    }
    for (int b = 0; b < 2; b++) {
        printf("%s:\n", b ? "GPU" : "CPU");
        if (!(llm[b] = open_llm(argv[1], b ? -1 : 0, device))) goto done;
        if (!ids && eliza_llm_tokenize(llm[b], PROMPT, strlen(PROMPT), ELIZA_TOKENIZE_ADD_BOS, &ids, &n_ids)) goto fail;
        /* The stream first: the logits' eval would leave it the prompt to reuse. */
        if (generate(llm[b], n_gen, &runs[b]) || eliza_llm_logits(llm[b], ids, n_ids, 0, &logits[b], &count[b]))
            goto fail;
        printf("  prompt %u tokens: %.1f tok/s; %u generated: %.1f tok/s\n", runs[b].stats.prompt_tokens,
               runs[b].stats.prefill_tokens_per_s, runs[b].stats.generated_tokens, runs[b].stats.decode_tokens_per_s);
    }
    {
        double worst = 0.0;
        size_t top[2] = {0, 0};
        int same = 0;
        for (size_t i = 0; i < count[0] && count[0] == count[1]; i++) {
            const double e = fabs((double)logits[1][i] - logits[0][i]);
            worst = e > worst || e != e ? e : worst;
            for (int b = 0; b < 2; b++)
                if (logits[b][i] > logits[b][top[b]]) top[b] = i;
        }
        while (same < runs[0].n && same < runs[1].n && runs[0].tokens[same] == runs[1].tokens[same]) same++;
        printf("last prompt position: max |gpu - cpu| logit %.4g, top-1 %s; greedy tokens equal from the start: "
               "%d of %d; decode GPU / CPU %.3gx\n",
               worst, top[0] == top[1] ? "equal" : "differs", same, runs[0].n,
               runs[0].stats.decode_tokens_per_s > 0 ? runs[1].stats.decode_tokens_per_s / runs[0].stats.decode_tokens_per_s
                                                     : 0.0);
    }
    status = 0;
    goto done;
fail:
    fprintf(stderr, "bench_llm_engine: %s\n", eliza_last_error());
done:
    for (int b = 0; b < 2; b++) {
        eliza_free(logits[b]);
        eliza_llm_close(llm[b]);
    }
    eliza_free(ids);
    return status;
}
