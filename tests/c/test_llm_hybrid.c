/* A hybrid (Mamba2 + attention) model in the session and the cache object:
 * the speculative loop's roll-back. The model is a falcon-h1 GGUF named by
 * argv[1] or $ELIZA_FALCON_H1_TEST_MODEL (tests/llm/test_falcon_h1.py
 * converts a tiny one and runs this program); without one it skips (77).
 *
 *   - a rewind past a recurrent layer is refused and changes nothing;
 *   - STATES snapshot, 5 drafted tokens, restore, 2 accepted + 1 other:
 *     bit for bit a fresh session that ran the prompt and those 3 in the
 *     same batches (conv windows and SSM states restored with the rows);
 *   - a FULL snapshot restores after any number of positions;
 *   - after 600 more tokens one at a time every state is finite and
 *     bounded. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gguf.h"
#include "core/pool.h"
#include "llm/kv.h"
#include "llm/model.h"
#include "llm/session.h"
#include "check.h"

static uint64_t g_rng = 5;
static int32_t rand_token(int32_t n) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((g_rng >> 33) % (uint64_t)n);
}

static int same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

static float max_abs_state(const ez_kv_cache *kv, int *finite) {
    float m = 0.0f;
    *finite = 1;
    for (int il = 0; il < kv->n_layer; il++) {
        const float *s = (const float *)(const void *)kv->layers[il].state;
        for (size_t i = 0; s && i < kv->layers[il].state_bytes / sizeof(float); i++) {
            if (!isfinite(s[i])) *finite = 0;
            m = fabsf(s[i]) > m ? fabsf(s[i]) : m;
        }
    }
    return m;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : getenv("ELIZA_FALCON_H1_TEST_MODEL");
    enum { N_PROMPT = 20, N_DRAFT = 5, N_BATCH = 8, N_CTX = 1024, N_LONG = 600 };
    ez_gguf *g = NULL;
    ez_llm_model *m = NULL;
    ez_pool *pool = NULL;
    ez_llm_session *a = NULL, *b = NULL;
    ez_kv_snapshot *snap = NULL, *full = NULL;
    int32_t prompt[N_PROMPT], draft[N_DRAFT], accepted[3], n_vocab;
    float *la, *lb;
    int finite;

    if (!path || !*path) {
        printf("skipped: no falcon-h1 model (argv[1] or ELIZA_FALCON_H1_TEST_MODEL)\n");
        return EZ_TEST_SKIP;
    }
    CHECK_RC(ez_gguf_open(path, &g), ELIZA_OK);
    if (!g) return 1;
    CHECK_RC(ez_llm_model_load(g, &m), ELIZA_OK);
    if (!m) return 1;
    CHECK(strcmp(m->hp.arch_name, "falcon-h1") == 0);
    n_vocab = m->hp.n_vocab;
    la = (float *)malloc(sizeof(float) * (size_t)n_vocab * 8);
    lb = (float *)malloc(sizeof(float) * (size_t)n_vocab * 8);
    pool = ez_pool_create(2);
    CHECK_RC(ez_llm_session_create(m, pool, N_CTX, N_BATCH, EZ_KV_F32, EZ_KV_F32, &a), ELIZA_OK);
    CHECK_RC(ez_llm_session_create(m, pool, N_CTX, N_BATCH, EZ_KV_F32, EZ_KV_F32, &b), ELIZA_OK);
    if (!a || !b || !la || !lb) return 1;
    for (int i = 0; i < N_PROMPT; i++) prompt[i] = rand_token(n_vocab);
    for (int i = 0; i < N_DRAFT; i++) draft[i] = rand_token(n_vocab);
    accepted[0] = draft[0], accepted[1] = draft[1], accepted[2] = (draft[2] + 1) % n_vocab;

    /* the speculative loop on a: prompt, snapshot, draft, reject, restore, accept */
    CHECK_RC(ez_llm_session_eval(a, prompt, N_PROMPT, NULL, 0, NULL, NULL), ELIZA_OK);
    CHECK_RC(ez_kv_snapshot_take(ez_llm_session_cache(a), EZ_KV_SNAP_STATES, &snap), ELIZA_OK);
    CHECK_RC(ez_llm_session_eval(a, draft, N_DRAFT, la, 1, NULL, NULL), ELIZA_OK);
    CHECK_RC(ez_llm_session_rewind(a, 3), ELIZA_E_INVALID_ARG);
    CHECK(ez_llm_session_n_pos(a) == N_PROMPT + N_DRAFT);
    CHECK_RC(ez_kv_snapshot_restore(ez_llm_session_cache(a), snap), ELIZA_OK);
    CHECK(ez_llm_session_n_pos(a) == N_PROMPT);
    CHECK_RC(ez_llm_session_eval(a, accepted, 3, la, 1, NULL, NULL), ELIZA_OK);

    /* b: the same prompt and the 3 tokens, never drafting */
    CHECK_RC(ez_llm_session_eval(b, prompt, N_PROMPT, NULL, 0, NULL, NULL), ELIZA_OK);
    CHECK_RC(ez_llm_session_eval(b, accepted, 3, lb, 1, NULL, NULL), ELIZA_OK);
    CHECK_MSG(same(la, lb, (size_t)n_vocab * 3), "restored session differs from a fresh one");

    /* without the restore the draft's states would leak in: the check can fail */
    CHECK_RC(ez_llm_session_eval(a, draft, N_DRAFT, la, 1, NULL, NULL), ELIZA_OK);
    CHECK_RC(ez_llm_session_eval(b, draft + 2, 3, lb, 1, NULL, NULL), ELIZA_OK);
    CHECK(!same(la + (size_t)n_vocab * 2, lb, (size_t)n_vocab));

    /* FULL snapshot: back over many positions */
    CHECK_RC(ez_kv_snapshot_take(ez_llm_session_cache(b), EZ_KV_SNAP_FULL, &full), ELIZA_OK);
    CHECK_RC(ez_llm_session_eval(b, prompt, N_PROMPT, NULL, 0, NULL, NULL), ELIZA_OK);
    CHECK_RC(ez_kv_snapshot_restore(ez_llm_session_cache(b), full), ELIZA_OK);
    CHECK_RC(ez_llm_session_eval(b, accepted, 1, lb, 0, NULL, NULL), ELIZA_OK);
    CHECK_RC(ez_kv_snapshot_restore(ez_llm_session_cache(b), full), ELIZA_OK);
    CHECK_RC(ez_llm_session_eval(b, accepted, 1, la, 0, NULL, NULL), ELIZA_OK);
    CHECK(same(la, lb, (size_t)n_vocab));

    /* a long run one token at a time: states finite and bounded */
    for (int i = 0; i < N_LONG; i++) {
        int32_t t = rand_token(n_vocab);
        CHECK_RC(ez_llm_session_eval(b, &t, 1, lb, 0, NULL, NULL), ELIZA_OK);
    }
    {
        const float mx = max_abs_state(ez_llm_session_cache(b), &finite);
        CHECK_MSG(finite && mx < 1e3f, "states after %d tokens: finite %d, max |state| %g", N_LONG, finite,
                  (double)mx);
        for (int i = 0; i < n_vocab; i++) finite &= isfinite(lb[i]) != 0;
        CHECK(finite);
    }

    ez_kv_snapshot_free(snap);
    ez_kv_snapshot_free(full);
    ez_llm_session_free(a);
    ez_llm_session_free(b);
    ez_pool_destroy(pool);
    ez_llm_model_free(m);
    free(la);
    free(lb);
    if (g_failed) {
        fprintf(stderr, "test_llm_hybrid: %d of %d checks FAILED\n", g_failed, g_failed + g_passed);
        return 1;
    }
    printf("test_llm_hybrid: ok (%d checks)\n", g_passed);
    return 0;
}
