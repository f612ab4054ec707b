/* Sessions and their generation streams (session.h). */
#include "session.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/platform.h"
#include "core/strbuf.h"
#include "core/utf8.h"
#include "spec.h"

struct ez_llm_session {
    const ez_llm_model *m;
    ez_kv_cache *kv;
    ez_llm_backend *be;
    ez_llm_fwd *fwd;
    int32_t n_ctx, n_batch;
    int kv_type_k, kv_type_v;
    int32_t *tokens;            /* [n_ctx] the token at each held position */
    uint8_t *starts;            /* [n_ctx] 1 where a held position began a forward pass */
    int recurrent;              /* some layer holds recurrent state (it cannot rewind) */
    ez_kv_snapshot *spec_snap;  /* recurrent models: the states before a speculative pass */
    /* A session on the GPU: the step holds the weights and the cache (kv,
     * be and fwd are NULL); n_pos_gpu positions are held, prof counts its
     * tokens and passes (one per token; the whole step is one dispatch
     * chain, so no phase times). */
    ez_llm_gpu *gpu;
    int32_t n_pos_gpu;
    ez_llm_profile prof;
};

int32_t ez_llm_session_create(const ez_llm_model *m, ez_pool *pool, int32_t n_ctx, int32_t n_batch, int kv_type_k,
                              int kv_type_v, ez_llm_session **out) {
    const ez_llm_hparams *hp = &m->hp;
    ez_kv_layer_spec *specs;
    ez_llm_session *s;
    int32_t rc;

    *out = NULL;
    if (n_ctx < 1 || n_batch < 1) return ez_fail(ELIZA_E_INVALID_ARG, "context %d / batch %d must be >= 1", n_ctx, n_batch);
    if (kv_type_k < 0 || kv_type_k >= EZ_KV_COUNT) return ez_fail(ELIZA_E_INVALID_ARG, "KV cache type %d is unknown", kv_type_k);
    if (kv_type_v < 0 || kv_type_v >= EZ_KV_COUNT) return ez_fail(ELIZA_E_INVALID_ARG, "KV cache type %d is unknown", kv_type_v);
    s = (ez_llm_session *)calloc(1, sizeof *s);
    specs = (ez_kv_layer_spec *)calloc((size_t)hp->n_layer, sizeof *specs);
    if (!s || !specs) {
        free(s);
        free(specs);
        return ez_fail(ELIZA_E_NOMEM, "out of memory for the LLM context");
    }
    s->m = m;
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    s->kv_type_k = kv_type_k;
    s->kv_type_v = kv_type_v;
    for (int il = 0; il < hp->n_layer; il++) {
        const ez_llm_layer *L = &m->layers[il];
        ez_kv_layer_spec *sp = &specs[il];
        sp->type_k = kv_type_k;
        sp->type_v = kv_type_v;
        sp->n_head_kv = hp->n_head_kv;
        sp->head_dim_k = L->head_dim ? L->head_dim : hp->head_dim;
        sp->head_dim_v = L->head_dim ? L->head_dim : hp->head_dim_v;
        sp->n_swa = L->is_swa ? hp->n_swa : 0;
        sp->alias = L->kv_alias;
        sp->state_bytes = L->state_bytes;
        sp->smooth_k = kv_type_k != EZ_KV_F32 && kv_type_k != EZ_KV_F16;
    }
    rc = ez_kv_cache_create(specs, hp->n_layer, n_ctx, n_batch, &s->kv);
    for (int il = 0; il < hp->n_layer; il++) s->recurrent |= specs[il].state_bytes > 0;
    free(specs);
    if (rc == ELIZA_OK) rc = ez_llm_backend_cpu_create(pool, hp, s->kv, &s->be);
    if (rc == ELIZA_OK) rc = ez_llm_fwd_create(m, s->be, s->kv, n_batch, &s->fwd);
    if (rc == ELIZA_OK) {
        s->tokens = (int32_t *)malloc(sizeof(int32_t) * (size_t)n_ctx);
        s->starts = (uint8_t *)malloc((size_t)n_ctx);
        if (!s->tokens || !s->starts) rc = ez_fail(ELIZA_E_NOMEM, "out of memory for the context's tokens");
    }
    if (rc) {
        ez_llm_session_free(s);
        return rc;
    }
    *out = s;
    return ELIZA_OK;
}

int32_t ez_llm_session_create_gpu(const ez_llm_model *m, ez_llm_gpu *step, int32_t n_ctx, ez_llm_session **out) {
    ez_llm_session *s;
    *out = NULL;
    if (n_ctx < 1) {
        ez_llm_gpu_free(step);
        return ez_fail(ELIZA_E_INVALID_ARG, "context %d must be >= 1", n_ctx);
    }
    s = (ez_llm_session *)calloc(1, sizeof *s);
    if (s) s->tokens = (int32_t *)malloc(sizeof(int32_t) * (size_t)n_ctx);
    if (!s || !s->tokens) {
        free(s);
        ez_llm_gpu_free(step);
        return ez_fail(ELIZA_E_NOMEM, "out of memory for the LLM context");
    }
    s->m = m;
    s->gpu = step;
    s->n_ctx = n_ctx;
    s->n_batch = 1;
    s->kv_type_k = s->kv_type_v = EZ_KV_F32;
    *out = s;
    return ELIZA_OK;
}

int ez_llm_session_on_gpu(const ez_llm_session *s) { return s->gpu != NULL; }
const char *ez_llm_session_gpu_device(const ez_llm_session *s) {
    return s->gpu ? ez_llm_gpu_device_name(s->gpu) : NULL;
}

int32_t ez_llm_session_greedy(ez_llm_session *s, int32_t *best) {
    *best = -1;
    if (!s->gpu) return ez_fail(ELIZA_E_STATE, "the greedy choice is read back from GPU sessions only");
    if (s->n_pos_gpu == 0) return ez_fail(ELIZA_E_STATE, "no position evaluated yet");
    return ez_llm_gpu_best(s->gpu, best);
}

void ez_llm_session_free(ez_llm_session *s) {
    if (!s) return;
    ez_llm_gpu_free(s->gpu);
    ez_llm_fwd_free(s->fwd);
    if (s->be) s->be->ops->free(s->be);
    ez_kv_snapshot_free(s->spec_snap);
    ez_kv_cache_free(s->kv);
    free(s->tokens);
    free(s->starts);
    free(s);
}

const ez_llm_model *ez_llm_session_model(const ez_llm_session *s) { return s->m; }
ez_kv_cache *ez_llm_session_cache(ez_llm_session *s) { return s->kv; }
int ez_llm_session_kv_type(const ez_llm_session *s, int values) { return values ? s->kv_type_v : s->kv_type_k; }
size_t ez_llm_session_kv_bytes(const ez_llm_session *s) {
    return s->gpu ? (size_t)ez_llm_gpu_cache_bytes(s->gpu) : s->kv->bytes;
}
size_t ez_llm_session_kv_bytes_per_token(const ez_llm_session *s) {
    return s->gpu ? (size_t)(ez_llm_gpu_cache_bytes(s->gpu) / (uint64_t)s->n_ctx) : ez_kv_cache_bytes_per_token(s->kv);
}
const ez_llm_profile *ez_llm_session_profile(const ez_llm_session *s) { return s->gpu ? &s->prof : &s->fwd->prof; }
int32_t ez_llm_session_n_pos(const ez_llm_session *s) { return s->gpu ? s->n_pos_gpu : s->kv->n_pos; }
const int32_t *ez_llm_session_tokens(const ez_llm_session *s) { return s->tokens; }
void ez_llm_session_clear(ez_llm_session *s) {
    if (s->gpu) s->n_pos_gpu = 0;
    else ez_kv_cache_clear(s->kv);
}
int32_t ez_llm_session_rewind(ez_llm_session *s, int32_t n) {
    if (!s->gpu) return ez_kv_cache_rewind(s->kv, n);
    /* The GPU cache keeps every position's row: any rewind is valid. */
    if (n < 0 || n > s->n_pos_gpu)
        return ez_fail(ELIZA_E_INVALID_ARG, "rewind of %d positions; %d are held", n, s->n_pos_gpu);
    s->n_pos_gpu -= n;
    return ELIZA_OK;
}

/* Eval on the GPU: a prompt pass for several tokens without all_logits,
 * one replayed step per token otherwise (ez_llm_gpu_eval); an error holds
 * none of the call's tokens (their cache rows are written again by the
 * next eval). */
static int32_t eval_gpu(ez_llm_session *s, const int32_t *tokens, int32_t n, float *logits, int all_logits,
                        float *hidden, ez_llm_flag *cancel) {
    const int32_t pos0 = s->n_pos_gpu;
    int32_t rc;
    if (hidden) return ez_fail(ELIZA_E_UNSUPPORTED, "the GPU step does not read back hidden states");
    if ((rc = ez_llm_gpu_eval(s->gpu, tokens, n, pos0, logits, all_logits, cancel))) return rc;
    memcpy(s->tokens + pos0, tokens, sizeof(int32_t) * (size_t)n);
    s->n_pos_gpu += n;
    s->prof.tokens += (uint64_t)n;
    s->prof.batches += (uint64_t)n;
    return ELIZA_OK;
}

int32_t ez_llm_session_eval(ez_llm_session *s, const int32_t *tokens, int32_t n, float *logits, int all_logits,
                            float *hidden, ez_llm_flag *cancel) {
    const int64_t n_vocab_embd = s->m->tok_embd.n_rows;
    const int32_t pos0 = ez_llm_session_n_pos(s);
    if (n < 1 || (int64_t)pos0 + n > s->n_ctx)
        return ez_fail(ELIZA_E_CONTEXT_FULL, "%d tokens at position %d do not fit a context of %d", n, pos0, s->n_ctx);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab_embd)
            return ez_fail(ELIZA_E_INVALID_ARG, "token %d at index %d is outside the vocabulary (%" PRId64 ")",
                           tokens[i], i, n_vocab_embd);
    if (s->gpu) return eval_gpu(s, tokens, n, logits, all_logits, hidden, cancel);
    for (int32_t b0 = 0; b0 < n; b0 += s->n_batch) {
        const int32_t nb = EZ_MIN(s->n_batch, n - b0);
        const int last = b0 + nb == n;
        float *out = NULL;
        int32_t rc;
        if (logits && all_logits) out = logits + (size_t)b0 * (size_t)s->m->hp.n_vocab;
        else if (logits && last) out = logits;
        rc = ez_llm_forward(s->fwd, tokens + b0, nb, out, all_logits, hidden ? hidden + (size_t)b0 * (size_t)s->m->hp.n_embd : NULL,
                            cancel);
        if (rc) return rc;
        memcpy(s->tokens + pos0 + b0, tokens + b0, sizeof(int32_t) * (size_t)nb);
        memset(s->starts + pos0 + b0, 0, (size_t)nb);
        s->starts[pos0 + b0] = 1;
    }
    return ELIZA_OK;
}

int32_t ez_llm_session_eval_prompt(ez_llm_session *s, const int32_t *tokens, int32_t n, float *logits,
                                   float *hidden, ez_llm_flag *cancel, int32_t *n_reused) {
    const int32_t held = ez_llm_session_n_pos(s);
    int32_t keep = 0, rc;
    *n_reused = 0;
    if (n < 1) return ez_fail(ELIZA_E_INVALID_ARG, "the prompt has no tokens");
    while (keep < held && keep < n - 1 && s->tokens[keep] == tokens[keep]) keep++;
    if (s->gpu) {
        /* One step per token: the logits of a position do not depend on
         * how the tokens before it were batched, so any prefix stays. */
        s->n_pos_gpu = keep;
        *n_reused = keep;
        return ez_llm_session_eval(s, tokens + keep, n - keep, logits, 0, hidden, cancel);
    }
    /* Going back inside what the cache holds, start again where a pass
     * began: the passes from there are those that ran before, so the same
     * prompt twice gives the same logits (a pass's kernels depend on its
     * row count, and so do the last bits of every row). */
    if (keep < held)
        while (keep > 0 && !s->starts[keep]) keep--;
    if (!ez_kv_cache_can_rewind_to(s->kv, keep)) keep = 0;
    if (keep == 0) ez_llm_session_clear(s);
    else if ((rc = ez_kv_cache_rewind(s->kv, held - keep))) return rc;
    *n_reused = keep;
    return ez_llm_session_eval(s, tokens + keep, n - keep, logits, 0, hidden, cancel);
}

/* ---- the generation stream ------------------------------------------------------------ */

typedef enum {
    STREAM_PROMPT,     /* the prompt is not evaluated yet */
    STREAM_SAMPLE,     /* logits of the last position are ready */
    STREAM_EVAL,       /* the last sampled token must be evaluated first */
    STREAM_FLUSH,      /* ended; held-back text still to hand out */
    STREAM_DONE,
    STREAM_FAILED      /* cancelled or an error; every call repeats it */
} stream_state;

struct ez_llm_stream {
    ez_llm_session *s;         /* NULL once detached */
    const ez_tokenizer *tok;
    ez_llm_flag cancel;
    ez_sampler *sampler;
    float *logits;             /* [n_vocab] of the last position */
    int32_t n_ctx;             /* this stream's context limit */
    int32_t max_tokens;        /* <= 0: unlimited */
    stream_state state;
    int32_t failure;           /* the code STREAM_FAILED repeats */
    int32_t stop_reason;

    int32_t *tokens;           /* prompt then generated tokens */
    size_t n_tokens, cap_tokens, n_prompt;
    int32_t n_reused;          /* prompt tokens the session already held */
    int32_t n_generated;
    int32_t last_text_token;   /* the last token whose text entered `pending` */

    char **stop;               /* stop strings (copies) */
    size_t *stop_len;
    uint32_t n_stop;

    char *pending;             /* generated text not handed out yet */
    size_t pending_len, pending_cap;
    char *out;                 /* the piece handed out last (NUL-terminated) */
    size_t out_cap;

    uint64_t prefill_ns, decode_ns;
    uint32_t decode_evals;

    ez_drafter *drafter;       /* speculative decoding, or NULL */
    ez_spec *spec;
    int32_t queue[EZ_DRAFT_MAX + 1]; /* a round's tokens not handed out yet */
    int32_t n_queue, i_queue;
    float *hidden;             /* MTP drafters: [n_prompt, n_embd] after the prompt,
                                * then the spec's rows; the row that predicted the
                                * pending token is `last_hidden` */
    const float *last_hidden;
    /* A GPU session decoding greedily without penalties reads back only
     * the device's argmax: `best` is the next token then, not the logits. */
    int device_greedy;
    int32_t best;
};

static void stream_release(ez_llm_stream *st) {
    ez_spec_free(st->spec);
    free(st->hidden);
    ez_sampler_free(st->sampler);
    free(st->logits);
    free(st->tokens);
    for (uint32_t i = 0; i < st->n_stop; i++) free(st->stop[i]);
    free(st->stop);
    free(st->stop_len);
    free(st->pending);
    free(st->out);
    free(st);
}

static int32_t copy_stop_strings(ez_llm_stream *st, const ez_llm_gen_params *p) {
    if (p->n_stop == 0) return ELIZA_OK;
    st->stop = (char **)calloc(p->n_stop, sizeof *st->stop);
    st->stop_len = (size_t *)calloc(p->n_stop, sizeof *st->stop_len);
    if (!st->stop || !st->stop_len) return ez_fail(ELIZA_E_NOMEM, "out of memory for stop strings");
    for (uint32_t i = 0; i < p->n_stop; i++) {
        const size_t n = strlen(p->stop[i]);
        st->stop[i] = (char *)malloc(n + 1);
        if (!st->stop[i]) return ez_fail(ELIZA_E_NOMEM, "out of memory for stop strings");
        memcpy(st->stop[i], p->stop[i], n + 1);
        st->stop_len[i] = n;
        st->n_stop = i + 1;
    }
    return ELIZA_OK;
}

int32_t ez_llm_stream_open(ez_llm_session *s, const ez_tokenizer *tok, const char *prompt, const ez_llm_gen_params *p,
                           ez_llm_stream **out) {
    const int32_t n_vocab = s->m->hp.n_vocab;
    ez_llm_stream *st;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int32_t rc;

    *out = NULL;
    st = (ez_llm_stream *)calloc(1, sizeof *st);
    if (!st) return ez_fail(ELIZA_E_NOMEM, "out of memory for a stream");
    st->s = s;
    st->tok = tok;
    ez_llm_flag_set(&st->cancel, 0);
    st->n_ctx = p->n_ctx > 0 ? EZ_MIN(p->n_ctx, s->n_ctx) : s->n_ctx;
    st->max_tokens = p->max_tokens;
    st->last_text_token = -1;
    st->state = STREAM_PROMPT;
    st->device_greedy = ez_llm_session_on_gpu(s) && !p->drafter && p->sampling.temperature <= 0.0f &&
                        (p->sampling.repeat_penalty == 1.0f || p->sampling.repeat_last_n == 0);

    rc = copy_stop_strings(st, p);
    if (rc == ELIZA_OK) rc = ez_sampler_create(&p->sampling, n_vocab, &st->sampler);
    if (rc == ELIZA_OK) {
        st->logits = (float *)malloc(sizeof(float) * (size_t)n_vocab);
        if (!st->logits) rc = ez_fail(ELIZA_E_NOMEM, "out of memory for the logits");
    }
    if (rc == ELIZA_OK && p->drafter) {
        st->drafter = p->drafter;
        st->drafter->vt->reset(st->drafter);
        rc = ez_spec_create(n_vocab, s->m->hp.n_embd, p->draft_max, p->drafter->kind == EZ_DRAFT_MTP, &st->spec);
        if (rc == ELIZA_OK && p->sampling.temperature > 0.0f) ez_spec_set_untimed(st->spec);
    }
    if (rc == ELIZA_OK)
        rc = ez_tokenize(tok, prompt, strlen(prompt), p->add_bos, p->parse_special, &ids, &n_ids);
    if (rc == ELIZA_OK && n_ids == 0) rc = ez_fail(ELIZA_E_INVALID_ARG, "the prompt has no tokens");
    if (rc == ELIZA_OK && n_ids > (size_t)st->n_ctx)
        rc = ez_fail(ELIZA_E_CONTEXT_FULL, "the prompt has %" PRIu64 " tokens; the context holds %d", (uint64_t)n_ids,
                     st->n_ctx);
    if (rc) {
        free(ids);
        stream_release(st);
        return rc;
    }
    st->tokens = ids;
    st->n_tokens = st->n_prompt = st->cap_tokens = n_ids;
    *out = st;
    return ELIZA_OK;
}

void ez_llm_stream_cancel(ez_llm_stream *st) { ez_llm_flag_set(&st->cancel, 1); }

void ez_llm_stream_detach(ez_llm_stream *st) { st->s = NULL; }

void ez_llm_stream_stats(const ez_llm_stream *st, ez_llm_gen_stats *out) {
    out->n_prompt = (uint32_t)st->n_prompt;
    out->n_generated = (uint32_t)st->n_generated;
    out->n_prompt_evaluated = (uint32_t)(st->n_prompt - (size_t)st->n_reused);
    out->stop_reason = st->stop_reason;
    out->prefill_ns = st->prefill_ns;
    out->decode_ns = st->decode_ns;
    out->decode_evals = st->decode_evals;
    out->draft_tokens = out->draft_accepted = out->draft_rounds = 0;
    if (st->spec) {
        const ez_spec_stats sp = ez_spec_get_stats(st->spec);
        out->draft_tokens = (uint32_t)sp.drafted;
        out->draft_accepted = (uint32_t)sp.accepted;
        out->draft_rounds = (uint32_t)sp.rounds;
    }
}

/* ELIZA_PROFILE=1: one log line per stream (level INFO) with its rates and
 * where the model's forward time has gone so far (cumulative per session). */
static void log_profile(const ez_llm_stream *st) {
    const ez_llm_profile *prof;
    ez_strbuf sb = {0};
    char *line;
    if (!st->s || !ez_env_flag("ELIZA_PROFILE")) return;
    prof = ez_llm_session_profile(st->s);
    ez_sb_printf(&sb,
                 "llm profile: prompt %" PRIu64 " tokens (%d from the cache) in %.1f ms, %d generated, decode %.1f ms; "
                 "forward ms:",
                 (uint64_t)st->n_prompt, st->n_reused, (double)st->prefill_ns / 1e6, st->n_generated,
                 (double)st->decode_ns / 1e6);
    for (int i = 0; i < EZ_LLM_PHASE_COUNT; i++)
        ez_sb_printf(&sb, " %s %.1f", ez_llm_phase_name(i), (double)prof->ns[i] / 1e6);
    line = ez_sb_take(&sb);
    if (line) ez_log(ELIZA_LOG_INFO, "%s", line);
    free(line);
}

void ez_llm_stream_free(ez_llm_stream *st) {
    if (!st) return;
    log_profile(st);
    stream_release(st);
}

/* ---- text: stop strings and UTF-8 ---------------------------------------------------- */

static int32_t reserve(char **buf, size_t *cap, size_t need) {
    char *p;
    size_t n;
    if (need <= *cap) return ELIZA_OK;
    n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    p = (char *)realloc(*buf, n);
    if (!p) return ez_fail(ELIZA_E_NOMEM, "out of memory for generated text");
    *buf = p;
    *cap = n;
    return ELIZA_OK;
}

/* Copies s[0..n) to the stream's out buffer as valid UTF-8 (each invalid
 * subpart, a truncated final character included, becomes U+FFFD). */
static int32_t set_out(ez_llm_stream *st, const char *s, size_t n, size_t *out_len) {
    int32_t rc = reserve(&st->out, &st->out_cap, 3 * n + 1);
    if (rc) return rc;
    *out_len = ez_utf8_repair(st->out, s, n);
    st->out[*out_len] = '\0';
    return ELIZA_OK;
}

/* Position of the first stop string in pending, or SIZE_MAX. */
static size_t find_stop(const ez_llm_stream *st) {
    size_t best = SIZE_MAX;
    for (uint32_t k = 0; k < st->n_stop; k++) {
        const size_t m = st->stop_len[k];
        for (size_t i = 0; i + m <= st->pending_len && i < best; i++)
            if (memcmp(st->pending + i, st->stop[k], m) == 0) {
                best = i;
                break;
            }
    }
    return best;
}

/* Bytes at the end of pending that could be the start of a stop string. */
static size_t stop_prefix_held(const ez_llm_stream *st) {
    size_t held = 0;
    for (uint32_t k = 0; k < st->n_stop; k++) {
        size_t m = EZ_MIN(st->stop_len[k] - 1, st->pending_len);
        for (; m > held; m--)
            if (memcmp(st->pending + st->pending_len - m, st->stop[k], m) == 0) {
                held = m;
                break;
            }
    }
    return held;
}

/* Hands out the releasable head of pending (all of it when final). */
static int32_t emit(ez_llm_stream *st, int32_t token, int final, ez_llm_gen_piece *piece) {
    size_t ready = final ? st->pending_len : st->pending_len - stop_prefix_held(st);
    size_t out_len = 0;
    int32_t rc;
    if (!final) ready = ez_utf8_complete(st->pending, ready);
    if ((rc = set_out(st, st->pending, ready, &out_len))) return rc;
    memmove(st->pending, st->pending + ready, st->pending_len - ready);
    st->pending_len -= ready;
    piece->token = token;
    piece->text = st->out;
    piece->text_len = (uint32_t)out_len;
    return ELIZA_OK;
}

static int32_t fail_stream(ez_llm_stream *st, int32_t rc) {
    st->state = STREAM_FAILED;
    st->failure = rc;
    if (rc == ELIZA_E_CANCELLED) st->stop_reason = ELIZA_STOP_CANCELLED;
    return rc;
}

static void finish(ez_llm_stream *st, int32_t reason) {
    st->stop_reason = reason;
    st->state = STREAM_FLUSH;
}

/* Evaluates the prompt or the last sampled token into st->logits. */
/* The session as the speculative loop's target. */
static int32_t spec_eval(void *self, const int32_t *tokens, int32_t n, int32_t pos0, float *logits, float *hidden,
                         ez_atomic_int *cancel) {
    ez_llm_session *s = (ez_llm_session *)self;
    if (pos0 != ez_llm_session_n_pos(s))
        return ez_fail(ELIZA_E_INTERNAL, "speculative pass at %d, the session holds %d positions", pos0,
                       ez_llm_session_n_pos(s));
    if (s->recurrent) {
        const int32_t rc = ez_kv_snapshot_take(s->kv, EZ_KV_SNAP_STATES, &s->spec_snap);
        if (rc) return rc;
    }
    return ez_llm_session_eval(s, tokens, n, logits, 1, hidden, cancel);
}

/* Keeps the first n_keep positions. A recurrent model cannot rewind: its
 * states go back to the snapshot spec_eval took and the accepted tokens
 * run again (kv.h's speculative recipe). */
static int32_t spec_rewind(void *self, int32_t n_keep) {
    ez_llm_session *s = (ez_llm_session *)self;
    int32_t again[EZ_DRAFT_MAX + 1], pos0, rc;
    if (!s->recurrent || n_keep == ez_llm_session_n_pos(s))
        return ez_llm_session_rewind(s, ez_llm_session_n_pos(s) - n_keep);
    if ((rc = ez_kv_snapshot_restore(s->kv, s->spec_snap))) return rc;
    pos0 = ez_llm_session_n_pos(s);
    if (n_keep < pos0 || n_keep - pos0 > EZ_DRAFT_MAX + 1)
        return ez_fail(ELIZA_E_INTERNAL, "speculative rewind to %d from a pass at %d", n_keep, pos0);
    if (n_keep == pos0) return ELIZA_OK;
    memcpy(again, s->tokens + pos0, sizeof(int32_t) * (size_t)(n_keep - pos0));
    return ez_llm_session_eval(s, again, n_keep - pos0, NULL, 0, NULL, NULL);
}

/* One speculative round after the last sampled token: its tokens go to the
 * queue and are handed out one at a time like sampled ones. */
static int32_t advance_speculative(ez_llm_stream *st) {
    const ez_spec_target target = {st->s, st->s->m->hp.n_vocab, spec_eval, spec_rewind};
    const int32_t n_past = ez_llm_session_n_pos(st->s);
    int32_t room = st->n_ctx - n_past - 1, n_out = 0, rc;
    ez_draft_target view;
    /* Never draft past max_tokens: those tokens could not be handed out. */
    if (st->max_tokens > 0) room = EZ_MIN(room, st->max_tokens - st->n_generated - 1);
    view.tokens = st->tokens;
    view.n_tokens = st->n_tokens;
    view.n_past = n_past;
    view.hidden = st->last_hidden;
    view.session = st->s;
    rc = ez_spec_round(st->spec, &target, st->drafter, st->sampler, &view, room, st->queue, &n_out, &st->cancel);
    if (rc) return rc;
    st->last_hidden = ez_spec_last_hidden(st->spec);
    st->n_queue = n_out;
    st->i_queue = 0;
    return ELIZA_OK;
}

/* Evaluates the prompt or the last sampled token into st->logits, or runs
 * a speculative round into the queue. */
static int32_t advance(ez_llm_stream *st) {
    const uint64_t t0 = ez_time_ns();
    int32_t rc;
    if (st->state == STREAM_PROMPT) {
        const int64_t n_embd = st->s->m->hp.n_embd;
        if (st->spec && ez_spec_wants_hidden(st->spec)) {
            /* An MTP drafter starts from the prompt's last hidden state. */
            st->hidden = (float *)malloc(sizeof(float) * st->n_prompt * (size_t)n_embd);
            if (!st->hidden) return ez_fail(ELIZA_E_NOMEM, "out of memory for the prompt's hidden states");
        }
        rc = ez_llm_session_eval_prompt(st->s, st->tokens, (int32_t)st->n_prompt,
                                        st->device_greedy ? NULL : st->logits, st->hidden, &st->cancel, &st->n_reused);
        if (rc == ELIZA_OK && st->device_greedy) rc = ez_llm_session_greedy(st->s, &st->best);
        st->prefill_ns += ez_time_ns() - t0;
        if (rc) return rc;
        if (st->hidden) st->last_hidden = st->hidden + (st->n_prompt - (size_t)st->n_reused - 1) * (size_t)n_embd;
    } else if (st->spec) {
        rc = advance_speculative(st);
        st->decode_ns += ez_time_ns() - t0;
        if (rc) return rc;
        st->decode_evals += (uint32_t)st->n_queue;
    } else {
        rc = ez_llm_session_eval(st->s, &st->tokens[st->n_tokens - 1], 1, st->device_greedy ? NULL : st->logits, 0,
                                 NULL, &st->cancel);
        if (rc == ELIZA_OK && st->device_greedy) rc = ez_llm_session_greedy(st->s, &st->best);
        st->decode_ns += ez_time_ns() - t0;
        if (rc) return rc;
        st->decode_evals++;
    }
    st->state = STREAM_SAMPLE;
    return ELIZA_OK;
}

static int32_t push_token(ez_llm_stream *st, int32_t id) {
    if (st->n_tokens == st->cap_tokens) {
        size_t cap = st->cap_tokens ? 2 * st->cap_tokens : 64;
        int32_t *t = (int32_t *)realloc(st->tokens, cap * sizeof *t);
        if (!t) return ez_fail(ELIZA_E_NOMEM, "out of memory for tokens");
        st->tokens = t;
        st->cap_tokens = cap;
    }
    st->tokens[st->n_tokens++] = id;
    return ELIZA_OK;
}

/* Appends the text of one token to pending. */
static int32_t append_piece(ez_llm_stream *st, int32_t id) {
    char small[64], *big = NULL;
    const char *text = small;
    size_t len = 0;
    int32_t rc = ez_token_piece(st->tok, id, 0, small, sizeof small, &len);
    if (rc) return rc;
    if (len > sizeof small) {
        big = (char *)malloc(len);
        if (!big) return ez_fail(ELIZA_E_NOMEM, "out of memory for a token's text");
        rc = ez_token_piece(st->tok, id, 0, big, len, &len);
        text = big;
    }
    if (rc == ELIZA_OK) rc = reserve(&st->pending, &st->pending_cap, st->pending_len + len + 1);
    if (rc == ELIZA_OK && len) {
        memcpy(st->pending + st->pending_len, text, len);
        st->pending_len += len;
    }
    free(big);
    return rc;
}

/* Samples one token and turns it into a piece. */
static int32_t generate_one(ez_llm_stream *st, ez_llm_gen_piece *piece) {
    size_t at;
    int32_t id, rc;

    if (st->i_queue < st->n_queue) id = st->queue[st->i_queue++];
    else if (st->device_greedy) id = st->best;
    else id = ez_sampler_sample(st->sampler, st->logits, st->tokens, st->n_tokens);
    if (ez_tokenizer_is_eog(st->tok, id)) {
        finish(st, ELIZA_STOP_EOS);
        return ELIZA_DONE; /* nothing of this token to show; the caller flushes */
    }
    if ((rc = push_token(st, id))) return rc;
    st->n_generated++;
    st->state = STREAM_EVAL;
    if ((rc = append_piece(st, id))) return rc;
    st->last_text_token = id;

    at = find_stop(st);
    if (at != SIZE_MAX) {
        st->pending_len = at;
        finish(st, ELIZA_STOP_STRING);
    } else if (st->max_tokens > 0 && st->n_generated >= st->max_tokens) {
        finish(st, ELIZA_STOP_MAX_TOKENS);
    }
    if (st->state == STREAM_FLUSH) {
        rc = emit(st, id, 1, piece);
        st->state = STREAM_DONE;
        return rc;
    }
    return emit(st, id, 0, piece);
}

int32_t ez_llm_stream_next(ez_llm_stream *st, ez_llm_gen_piece *piece) {
    int32_t rc;

    piece->token = -1;
    piece->text = "";
    piece->text_len = 0;
    if (!st->s) return ez_fail(ELIZA_E_STATE, "eliza_llm_stream_next: the stream's model has been closed");
    if (st->state == STREAM_FAILED)
        return ez_fail(st->failure, "the stream %s", st->failure == ELIZA_E_CANCELLED ? "was cancelled" : "failed");
    if (st->state != STREAM_DONE && st->state != STREAM_FLUSH && ez_llm_flag_get(&st->cancel))
        return fail_stream(st, ez_fail(ELIZA_E_CANCELLED, "cancelled"));

    /* The rest of a speculative round's tokens are evaluated already (all
     * but the last, the next pending one) and need no pass. */
    if (st->state == STREAM_EVAL && st->i_queue < st->n_queue) st->state = STREAM_SAMPLE;
    if (st->state == STREAM_EVAL && ez_llm_session_n_pos(st->s) >= st->n_ctx) finish(st, ELIZA_STOP_CONTEXT_FULL);
    if (st->state == STREAM_PROMPT || st->state == STREAM_EVAL) {
        rc = advance(st);
        if (rc) return fail_stream(st, rc);
    }
    if (st->state == STREAM_SAMPLE) {
        rc = generate_one(st, piece);
        if (rc == ELIZA_OK) return ELIZA_OK;
        if (rc != ELIZA_DONE) return fail_stream(st, rc);
    }
    if (st->state == STREAM_FLUSH) {
        st->state = STREAM_DONE;
        if (st->pending_len) {
            rc = emit(st, st->last_text_token, 1, piece);
            return rc ? fail_stream(st, rc) : ELIZA_OK;
        }
    }
    return ELIZA_DONE;
}
