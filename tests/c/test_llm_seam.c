/* Every step of a model's forward pass goes through the backend seam: the
 * model named by argv[1] or $ELIZA_LLM_SEAM_TEST_MODEL (tests/llm/
 * test_llm_seam.py runs this on the tiny falcon-h1, gemma4 and granite
 * models) runs passes of 8, 1 and 3 tokens through a recording backend
 * (rec_backend.h) over a session's cache, and gives the logits of every
 * row bit for bit as the session itself does. The calls of each step are
 * printed ("calls NAME COUNT") for the caller to check per architecture.
 * Without a model it skips (77). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gguf.h"
#include "core/pool.h"
#include "llm/forward.h"
#include "llm/model.h"
#include "llm/session.h"
#include "check.h"
#include "rec_backend.h"

enum { N_CTX = 64, N_BATCH = 8 };

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : getenv("ELIZA_LLM_SEAM_TEST_MODEL");
    static const int32_t passes[] = {8, 1, 3};
    ez_gguf *g = NULL;
    ez_llm_model *m = NULL;
    ez_pool *pool = NULL;
    ez_llm_session *ref = NULL, *host = NULL;
    ez_llm_fwd *fwd = NULL;
    rec_backend rb;
    int32_t tokens[N_BATCH];
    uint64_t rng = 11;
    float *la = NULL, *lb = NULL;
    size_t n_vocab;

    if (!path || !*path) {
        printf("skipped: no model (argv[1] or ELIZA_LLM_SEAM_TEST_MODEL)\n");
        return EZ_TEST_SKIP;
    }
    memset(&rb, 0, sizeof rb);
    rb.base.ops = &REC_OPS;
    CHECK_RC(ez_gguf_open(path, &g), ELIZA_OK);
    if (g) CHECK_RC(ez_llm_model_load(g, &m), ELIZA_OK);
    if (!m) return 1;
    n_vocab = (size_t)m->hp.n_vocab;
    la = (float *)malloc(sizeof(float) * n_vocab * N_BATCH);
    lb = (float *)malloc(sizeof(float) * n_vocab * N_BATCH);
    pool = ez_pool_create(2);
    CHECK_RC(ez_llm_session_create(m, pool, N_CTX, N_BATCH, EZ_KV_F32, EZ_KV_F32, &ref), ELIZA_OK);
    /* a second session lends its cache to the recorded pass */
    CHECK_RC(ez_llm_session_create(m, pool, N_CTX, N_BATCH, EZ_KV_F32, EZ_KV_F32, &host), ELIZA_OK);
    if (host) CHECK_RC(ez_llm_backend_cpu_create(pool, &m->hp, ez_llm_session_cache(host), &rb.cpu), ELIZA_OK);
    if (rb.cpu) CHECK_RC(ez_llm_fwd_create(m, &rb.base, ez_llm_session_cache(host), N_BATCH, &fwd), ELIZA_OK);
    if (!fwd || !ref || !la || !lb) return 1;

    for (size_t p = 0; p < sizeof passes / sizeof passes[0]; p++) {
        const int32_t n = passes[p];
        for (int32_t i = 0; i < n; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            tokens[i] = (int32_t)((rng >> 33) % n_vocab);
        }
        CHECK_RC(ez_llm_session_eval(ref, tokens, n, la, 1, NULL, NULL), ELIZA_OK);
        CHECK_RC(ez_llm_forward(fwd, tokens, n, lb, 1, NULL, NULL), ELIZA_OK);
        CHECK_MSG(memcmp(la, lb, sizeof(float) * n_vocab * (size_t)n) == 0,
                  "pass %zu (%d tokens): the recorded pass's logits differ from the session's", p, n);
    }
    for (int op = 0; op < REC_COUNT; op++) printf("calls %s %d\n", REC_NAMES[op], rb.calls[op]);

    ez_llm_fwd_free(fwd);
    if (rb.cpu) rb.cpu->ops->free(rb.cpu);
    ez_llm_session_free(ref);
    ez_llm_session_free(host);
    ez_pool_destroy(pool);
    ez_llm_model_free(m);
    free(la);
    free(lb);
    if (g_failed) {
        fprintf(stderr, "test_llm_seam: %d of %d checks FAILED\n", g_failed, g_failed + g_passed);
        return 1;
    }
    printf("test_llm_seam: ok (%d checks)\n", g_passed);
    return 0;
}
