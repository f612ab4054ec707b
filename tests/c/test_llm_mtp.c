/* The Gemma 4 assistant drafter (llm/draft_mtp.c).
 *
 *   test_llm_mtp                         what needs no model: bad arguments
 *   test_llm_mtp open TARGET DRAFTER     opens the pair; prints "ok" or the
 *                                        status name and message, exit 0
 *   test_llm_mtp state TARGET DRAFTER    propose() without the target's
 *                                        session, without its hidden state,
 *                                        with cancel set: the errors
 *   test_llm_mtp run TARGET DRAFTER K N_NEW ID...
 *                                        greedy speculative decoding of N_NEW
 *                                        tokens after the prompt ids, drafts
 *                                        of min(K, tokens left - 1) as
 *                                        transformers' generate() makes them;
 *                                        prints one line per round
 *                                        "round D0 D1 ... : ACCEPTED" and
 *                                        "tokens T0 T1 ..." (the MTP test,
 *                                        tests/llm/test_mtp_gemma4.py, compares
 *                                        them with transformers)
 *
 * The round is the one draft.h describes: propose from the pending token and
 * the target's hidden state, one target pass over [pending, drafts], the
 * longest agreeing prefix, the target's own token, a rewind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/error.h"
#include "core/gguf.h"
#include "core/pool.h"
#include "llm/draft_mtp.h"
#include "llm/session.h"

#define MAX_TOKENS 512

static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

typedef struct {
    ez_pool *pool;
    ez_llm_model *target;
    ez_drafter *drafter;
} pair;

static int32_t open_pair(const char *target, const char *drafter, pair *p) {
    ez_gguf *g = NULL;
    ez_draft_open_params dp;
    int32_t rc;
    memset(p, 0, sizeof *p);
    p->pool = ez_pool_create(2);
    if (!p->pool) return ELIZA_E_NOMEM;
    if ((rc = ez_gguf_open(target, &g)) || (rc = ez_llm_model_load(g, &p->target))) return rc;
    memset(&dp, 0, sizeof dp);
    dp.kind = EZ_DRAFT_MTP;
    dp.path = drafter;
    dp.target = p->target;
    dp.pool = p->pool;
    dp.n_ctx = MAX_TOKENS;
    dp.k_max = 8;
    return ez_draft_mtp_open(&dp, &p->drafter);
}

static void close_pair(pair *p) {
    if (p->drafter) p->drafter->vt->free(p->drafter);
    ez_llm_model_free(p->target);
    if (p->pool) ez_pool_destroy(p->pool);
}

static int run(const char *target, const char *drafter, int k, int n_new, int n_prompt, char **ids) {
    pair p;
    ez_llm_session *s = NULL;
    int32_t toks[MAX_TOKENS], drafts[EZ_DRAFT_MAX + 1], rc;
    float *logits = NULL, *hidden = NULL;
    int32_t n = n_prompt, n_vocab, n_embd;
    if (n_prompt < 1 || n_prompt + n_new >= MAX_TOKENS || k < 1 || k > EZ_DRAFT_MAX) return 2;
    for (int i = 0; i < n_prompt; i++) toks[i] = atoi(ids[i]);
    rc = open_pair(target, drafter, &p);
    if (rc == ELIZA_OK) rc = ez_llm_session_create(p.target, p.pool, MAX_TOKENS, 64, 0, 0, &s);
    if (rc == ELIZA_OK) {
        n_vocab = p.target->hp.n_vocab;
        n_embd = p.target->hp.n_embd;
        logits = (float *)malloc(sizeof(float) * (size_t)n_vocab * (EZ_DRAFT_MAX + 1));
        hidden = (float *)malloc(sizeof(float) * (size_t)n_embd * MAX_TOKENS);
        if (!logits || !hidden) rc = ELIZA_E_NOMEM;
    }
    /* prefill: the prompt, its last row's token is the first pending one */
    if (rc == ELIZA_OK) rc = ez_llm_session_eval(s, toks, n, logits, 0, hidden, NULL);
    if (rc == ELIZA_OK) {
        memmove(hidden, hidden + (size_t)(n - 1) * n_embd, sizeof(float) * (size_t)n_embd);
        toks[n++] = argmax(logits, n_vocab);
    }
    while (rc == ELIZA_OK && n - n_prompt < n_new) {
        ez_draft_target tv = {toks, (size_t)n, n - 1, hidden, s};
        int32_t m = k < n_prompt + n_new - n - 1 ? k : n_prompt + n_new - n - 1, n_out = 0, a = 0;
        if (m > 0 && (rc = p.drafter->vt->propose(p.drafter, &tv, m, drafts + 1, &n_out, NULL, NULL, NULL))) break;
        drafts[0] = toks[n - 1];
        if ((rc = ez_llm_session_eval(s, drafts, n_out + 1, logits, 1, hidden, NULL))) break;
        while (a < n_out && argmax(logits + (size_t)a * n_vocab, n_vocab) == drafts[1 + a]) a++;
        for (int32_t i = 0; i < a; i++) toks[n++] = drafts[1 + i];
        toks[n++] = argmax(logits + (size_t)a * n_vocab, n_vocab);
        memmove(hidden, hidden + (size_t)a * n_embd, sizeof(float) * (size_t)n_embd);
        if ((rc = ez_llm_session_rewind(s, n_out - a))) break;
        if (n_out > 0) {
            printf("round");
            for (int32_t i = 0; i < n_out; i++) printf(" %d", drafts[1 + i]);
            printf(" : %d\n", a);
        }
        if ((rc = p.drafter->vt->observe(p.drafter, n_out, toks + n - a - 1, a + 1))) break;
    }
    if (rc == ELIZA_OK) {
        printf("tokens");
        for (int32_t i = n_prompt; i < n_prompt + n_new; i++) printf(" %d", toks[i]);
        printf("\n");
    } else {
        printf("error %s: %s\n", eliza_status_name(rc), eliza_last_error());
    }
    free(logits);
    free(hidden);
    ez_llm_session_free(s);
    close_pair(&p);
    return rc == ELIZA_OK ? 0 : 1;
}

/* The fork's third lesson (the drafter needs the target's context) and
 * cancel, on a real pair. */
static int state_checks(const char *target, const char *drafter) {
    pair p;
    ez_llm_session *s = NULL;
    const int32_t prompt[3] = {5, 6, 7};
    int32_t out[4], n_out = -1;
    float *hidden = NULL;
    ez_atomic_int cancel;
    int32_t rc = open_pair(target, drafter, &p);
    if (rc == ELIZA_OK) rc = ez_llm_session_create(p.target, p.pool, 64, 8, 0, 0, &s);
    if (rc == ELIZA_OK) {
        hidden = (float *)malloc(sizeof(float) * 3 * (size_t)p.target->hp.n_embd);
        rc = hidden ? ez_llm_session_eval(s, prompt, 2, NULL, 0, hidden, NULL) : ELIZA_E_NOMEM;
    }
    CHECK_RC(rc, ELIZA_OK);
    if (rc == ELIZA_OK) {
        ez_draft_target tv = {prompt, 3, 2, hidden + p.target->hp.n_embd, NULL};
        CHECK_RC(p.drafter->vt->propose(p.drafter, &tv, 4, out, &n_out, NULL, NULL, NULL), ELIZA_E_STATE);
        CHECK(strstr(eliza_last_error(), "session") != NULL);
        tv.session = s;
        tv.hidden = NULL;
        CHECK_RC(p.drafter->vt->propose(p.drafter, &tv, 4, out, &n_out, NULL, NULL, NULL), ELIZA_E_STATE);
        CHECK(strstr(eliza_last_error(), "hidden") != NULL);
        tv.hidden = hidden + p.target->hp.n_embd;
        ez_atomic_int_store(&cancel, 1);
        CHECK_RC(p.drafter->vt->propose(p.drafter, &tv, 4, out, &n_out, NULL, NULL, &cancel), ELIZA_E_CANCELLED);
        ez_atomic_int_store(&cancel, 0);
        CHECK_RC(p.drafter->vt->propose(p.drafter, &tv, 4, out, &n_out, NULL, NULL, &cancel), ELIZA_OK);
        CHECK(n_out == 4);
        for (int i = 0; i < 4 && n_out == 4; i++) CHECK(out[i] >= 0 && out[i] < p.target->hp.n_vocab);
    }
    free(hidden);
    ez_llm_session_free(s);
    close_pair(&p);
    printf("%s\n", g_failed ? "failed" : "ok");
    return g_failed ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "state") == 0) return state_checks(argv[2], argv[3]);
    if (argc >= 4 && strcmp(argv[1], "open") == 0) {
        pair p;
        int32_t rc = open_pair(argv[2], argv[3], &p);
        if (rc) printf("%s: %s\n", eliza_status_name(rc), eliza_last_error());
        else printf("ok\n");
        close_pair(&p);
        return 0;
    }
    if (argc >= 6 && strcmp(argv[1], "run") == 0)
        return run(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]), argc - 6, argv + 6);
    {
        ez_draft_open_params dp;
        ez_drafter *d = NULL;
        memset(&dp, 0, sizeof dp);
        dp.kind = EZ_DRAFT_MTP;
        CHECK_RC(ez_draft_mtp_open(&dp, &d), ELIZA_E_INVALID_ARG);
        CHECK(strstr(eliza_last_error(), "gemma4-assistant GGUF") != NULL);
        CHECK(d == NULL);
    }
    printf("test_llm_mtp: %d passed, %d failed\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
}
