/* The eliza_llm_* entry points: argument and struct_size checks, handle
 * lifetimes, and the streaming session (prompt, sampling, stop strings,
 * UTF-8-complete pieces, cancel, stats). The model itself is llm/. */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/error.h"
#include "core/gguf.h"
#include "core/platform.h"
#include "core/pool.h"
#include "core/strbuf.h"
#include "llm/chat.h"
#include "llm/check.h"
#include "llm/draft.h"
#include "llm/forward.h"
#include "llm/kv.h"
#include "llm/model.h"
#include "llm/sampler.h"
#include "llm/spec.h"
#include "llm/tokenizer.h"

#define DEFAULT_CONTEXT_CAP 4096
#define DEFAULT_BATCH 256
#define MAX_CONTEXT (1 << 24)
#define MAX_BATCH (1 << 16)
#define MAX_STOP_STRINGS 64
#define DEFAULT_DRAFT_MAX 8

/* Does `field` lie inside the caller's struct (struct_size bytes)? A
 * struct_size too small for the first field after it is ELIZA_E_ABI; fields
 * past it are read (or written) only when they fit, so an older, shorter
 * struct gets defaults for what it lacks (docs/abi.md). */
#define FITS(ptr, type, field) ((ptr)->struct_size >= offsetof(type, field) + sizeof((ptr)->field))

struct eliza_llm {
    ez_llm_model *model;
    ez_tokenizer *tok;
    ez_pool *pool;
    ez_llm_ctx *ctx;
    int32_t n_ctx, n_batch, n_threads;
    eliza_llm_stream *stream;   /* the open stream, if any */
    float *logits;              /* [n_vocab] of the stream's last position */
    ez_llm_flag cancel;         /* set by eliza_llm_cancel() for eliza_llm_logits() */
    ez_drafter *drafter;        /* speculative decoding of the streams, or NULL */
    int32_t draft_max;          /* the most tokens a round drafts */
};

/* ------------------------------------------------------------------------ */
/* Open / close / info                                                       */
/* ------------------------------------------------------------------------ */

void eliza_llm_default_params(eliza_llm_params *params) {
    if (!params) return;
    memset(params, 0, sizeof *params);
    params->struct_size = (uint32_t)sizeof *params;
    params->n_threads = 0;
    params->context_size = 0;
    params->n_batch = 0;
    params->kv_type = ELIZA_LLM_KV_F32;
    params->kv_type_v = ELIZA_LLM_KV_AS_K;
    params->draft_kind = ELIZA_LLM_DRAFT_NONE;
    params->draft_max_tokens = DEFAULT_DRAFT_MAX;
    params->draft_path = NULL;
}

static void detach_stream(eliza_llm_stream *s);

void eliza_llm_close(eliza_llm *llm) {
    if (!llm) return;
    /* A stream left open must not reach a freed model: it fails with
     * ELIZA_E_STATE from here on, and closes as usual. */
    if (llm->stream) detach_stream(llm->stream);
    ez_drafter_free(llm->drafter);
    ez_llm_ctx_free(llm->ctx);
    ez_pool_destroy(llm->pool);
    ez_tokenizer_free(llm->tok);
    ez_llm_model_free(llm->model);
    free(llm->logits);
    free(llm);
}

static int32_t read_params(const eliza_llm_params *in, eliza_llm_params *p) {
    eliza_llm_default_params(p);
    p->kv_type_v = p->kv_type;
    if (!in) return ELIZA_OK;
    if (!FITS(in, eliza_llm_params, n_threads))
        return ez_fail(ELIZA_E_ABI, "eliza_llm_params.struct_size %" PRIu32 " is too small (%" PRIu64 ")", in->struct_size,
                       (uint64_t)sizeof(eliza_llm_params));
    if (FITS(in, eliza_llm_params, n_threads)) p->n_threads = in->n_threads;
    if (FITS(in, eliza_llm_params, context_size)) p->context_size = in->context_size;
    if (FITS(in, eliza_llm_params, n_batch)) p->n_batch = in->n_batch;
    if (FITS(in, eliza_llm_params, kv_type)) p->kv_type = in->kv_type;
    p->kv_type_v = p->kv_type;
    if (FITS(in, eliza_llm_params, kv_type_v) && in->kv_type_v != ELIZA_LLM_KV_AS_K) p->kv_type_v = in->kv_type_v;
    if (FITS(in, eliza_llm_params, draft_kind)) p->draft_kind = in->draft_kind;
    if (FITS(in, eliza_llm_params, draft_max_tokens)) p->draft_max_tokens = in->draft_max_tokens;
    if (FITS(in, eliza_llm_params, draft_path)) p->draft_path = in->draft_path;
    if (p->n_threads < 0) return ez_fail(ELIZA_E_INVALID_ARG, "n_threads %d is negative", p->n_threads);
    if (p->context_size > MAX_CONTEXT)
        return ez_fail(ELIZA_E_INVALID_ARG, "context_size %" PRIu32 " is above %d", p->context_size, MAX_CONTEXT);
    if (p->n_batch > MAX_BATCH)
        return ez_fail(ELIZA_E_INVALID_ARG, "n_batch %" PRIu32 " is above %d", p->n_batch, MAX_BATCH);
    if (p->kv_type > ELIZA_LLM_KV_TBQ3_0)
        return ez_fail(ELIZA_E_INVALID_ARG, "kv_type %" PRIu32 " is not an eliza_llm_kv_type", p->kv_type);
    if (p->kv_type_v > ELIZA_LLM_KV_TBQ3_0)
        return ez_fail(ELIZA_E_INVALID_ARG, "kv_type_v %" PRIu32 " is not an eliza_llm_kv_type", p->kv_type_v);
    if (p->draft_kind > ELIZA_LLM_DRAFT_MODEL)
        return ez_fail(ELIZA_E_INVALID_ARG, "draft_kind %" PRIu32 " is not an eliza_llm_draft_kind", p->draft_kind);
    if (p->draft_kind != ELIZA_LLM_DRAFT_NONE && (p->draft_max_tokens < 1 || p->draft_max_tokens > ELIZA_LLM_DRAFT_MAX))
        return ez_fail(ELIZA_E_INVALID_ARG, "draft_max_tokens %d is outside 1..%d", p->draft_max_tokens,
                       ELIZA_LLM_DRAFT_MAX);
    if ((p->draft_kind == ELIZA_LLM_DRAFT_MODEL || p->draft_kind == ELIZA_LLM_DRAFT_MTP) && !p->draft_path)
        return ez_fail(ELIZA_E_INVALID_ARG, "draft kind '%s' needs draft_path", ez_draft_kind_name((int)p->draft_kind));
    return ELIZA_OK;
}

int32_t eliza_llm_open(const char *path, const eliza_llm_params *params, eliza_llm **out) {
    eliza_llm_params p;
    eliza_llm *llm;
    ez_gguf *g = NULL;
    int32_t rc;

    ez_clear_error();
    if (out) *out = NULL;
    if (!out) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_llm_open: out is NULL");
    if (!path) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_llm_open: path is NULL");
    if ((rc = read_params(params, &p))) return rc;
    llm = (eliza_llm *)calloc(1, sizeof *llm);
    if (!llm) return ez_fail(ELIZA_E_NOMEM, "out of memory opening '%s'", path);

    /* The model first: a GGUF of another kind is refused for its architecture,
     * not for lacking tokenizer keys. */
    rc = ez_gguf_open(path, &g);
    if (rc == ELIZA_OK) {
        rc = ez_llm_model_load(g, &llm->model); /* owns g from here, also on failure */
        g = NULL;
    }
    if (rc == ELIZA_OK) rc = ez_tokenizer_load(llm->model->gguf, &llm->tok);
    if (rc == ELIZA_OK && ez_tokenizer_n_vocab(llm->tok) > llm->model->tok_embd.n_rows)
        rc = ez_fail(ELIZA_E_FORMAT, "the tokenizer has %d tokens but token_embd only %" PRId64 " rows",
                     ez_tokenizer_n_vocab(llm->tok), llm->model->tok_embd.n_rows);
    if (rc == ELIZA_OK) {
        const ez_llm_hparams *hp = &llm->model->hp;
        llm->n_ctx = p.context_size ? (int32_t)p.context_size : EZ_MIN(hp->n_ctx_train, DEFAULT_CONTEXT_CAP);
        llm->n_batch = EZ_MIN(p.n_batch ? (int32_t)p.n_batch : DEFAULT_BATCH, llm->n_ctx);
        llm->pool = ez_pool_create(p.n_threads);
        if (!llm->pool) rc = ELIZA_E_NOMEM; /* ez_pool_create set the message */
    }
    if (rc == ELIZA_OK) {
        llm->n_threads = ez_pool_threads(llm->pool);
        rc = ez_llm_ctx_create(llm->model, llm->pool, llm->n_ctx, llm->n_batch, (int)p.kv_type, (int)p.kv_type_v,
                               &llm->ctx);
    }
    if (rc == ELIZA_OK) {
        llm->logits = (float *)malloc(sizeof(float) * (size_t)llm->model->hp.n_vocab);
        if (!llm->logits) rc = ez_fail(ELIZA_E_NOMEM, "out of memory for the logits");
    }
    if (rc == ELIZA_OK && p.draft_kind != ELIZA_LLM_DRAFT_NONE) {
        ez_draft_open_params dp;
        dp.kind = (ez_draft_kind)p.draft_kind;
        dp.path = p.draft_path;
        dp.target = llm->model;
        dp.pool = llm->pool;
        dp.n_ctx = llm->n_ctx;
        dp.k_max = p.draft_max_tokens;
        /* A round evaluates k + 1 tokens in one batch; sliding-window rings
         * keep n_batch positions beyond the window, which is what makes
         * evaluating over rejected positions a rewind. */
        if (p.draft_max_tokens >= llm->n_batch)
            rc = ez_fail(ELIZA_E_INVALID_ARG, "draft_max_tokens %d needs n_batch above it (n_batch is %d)",
                         p.draft_max_tokens, llm->n_batch);
        else
            rc = ez_drafter_open(&dp, &llm->drafter);
        llm->draft_max = p.draft_max_tokens;
    }
    if (rc) {
        ez_gguf_close(g);
        eliza_llm_close(llm);
        return rc;
    }
    *out = llm;
    ez_clear_error(); /* lookups of optional keys may have left a message */
    return ELIZA_OK;
}

int32_t eliza_llm_info_json(const eliza_llm *llm, char **out_json) {
    ez_strbuf sb = {0};
    const ez_llm_hparams *hp;
    const ez_llm_profile *prof;
    char *json;

    ez_clear_error();
    if (out_json) *out_json = NULL;
    if (!llm || !out_json) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_llm_info_json: NULL argument");
    hp = &llm->model->hp;
    prof = ez_llm_ctx_profile(llm->ctx);
    ez_sb_printf(&sb, "{\"architecture\": \"%s\", \"n_vocab\": %d, \"n_ctx_train\": %d, \"context_size\": %d",
                 hp->arch_name, hp->n_vocab, hp->n_ctx_train, llm->n_ctx);
    ez_sb_printf(&sb, ", \"n_embd\": %d, \"n_layer\": %d, \"n_head\": %d, \"n_head_kv\": %d, \"head_dim\": %d",
                 hp->n_embd, hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim);
    ez_sb_printf(&sb, ", \"n_ff\": %d, \"bos\": %d, \"eos\": %d, \"n_threads\": %d, \"n_batch\": %d", hp->n_ff,
                 ez_tokenizer_bos(llm->tok), ez_tokenizer_eos(llm->tok), llm->n_threads, llm->n_batch);
    ez_sb_printf(&sb, ", \"sliding_window\": %d, \"tied_output\": %s, \"kv_type\": \"%s\", \"kv_type_v\": \"%s\"",
                 hp->n_swa, llm->model->tied_output ? "true" : "false",
                 ez_kv_type_name(ez_llm_ctx_kv_type(llm->ctx, 0)), ez_kv_type_name(ez_llm_ctx_kv_type(llm->ctx, 1)));
    ez_sb_printf(&sb, ", \"draft\": \"%s\", \"draft_max_tokens\": %d",
                 llm->drafter ? ez_draft_kind_name(llm->drafter->kind) : "none", llm->drafter ? llm->draft_max : 0);
    ez_sb_printf(&sb, ", \"kv_bytes\": %" PRIu64 ", \"kv_bytes_per_token\": %" PRIu64,
                 (uint64_t)ez_llm_ctx_kv_bytes(llm->ctx), (uint64_t)ez_llm_ctx_kv_bytes_per_token(llm->ctx));
    ez_sb_printf(&sb, ", \"profile\": {\"tokens\": %" PRIu64 ", \"batches\": %" PRIu64, prof->tokens, prof->batches);
    for (int i = 0; i < EZ_LLM_PHASE_COUNT; i++) {
        ez_sb_printf(&sb, ", \"%s_ms\": ", ez_llm_phase_name(i));
        ez_sb_json_num(&sb, (double)prof->ns[i] / 1e6);
    }
    ez_sb_puts(&sb, "}}");
    json = ez_sb_take(&sb);
    if (!json) return ez_fail(ELIZA_E_NOMEM, "out of memory for the model info");
    *out_json = json;
    return ELIZA_OK;
}

/* ------------------------------------------------------------------------ */
/* Tokens                                                                    */
/* ------------------------------------------------------------------------ */

int32_t eliza_llm_tokenize(const eliza_llm *llm, const char *text, size_t text_len, uint32_t flags,
                           int32_t **out_tokens, size_t *out_count) {
    int32_t *ids = NULL;
    size_t n = 0;
    int32_t rc;

    ez_clear_error();
    if (out_tokens) *out_tokens = NULL;
    if (out_count) *out_count = 0;
    if (!llm || !out_tokens || !out_count || (!text && text_len))
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_llm_tokenize: NULL argument");
    rc = ez_tokenize(llm->tok, text ? text : "", text_len, (flags & ELIZA_TOKENIZE_ADD_BOS) != 0,
                     (flags & ELIZA_TOKENIZE_PARSE_SPECIAL) != 0, &ids, &n);
    if (rc) return rc;
    if (!ids) {
        /* Hand out a real (empty) array so the host can always eliza_free it. */
        ids = (int32_t *)malloc(sizeof(int32_t));
        if (!ids) return ez_fail(ELIZA_E_NOMEM, "out of memory for tokens");
    }
    *out_tokens = ids;
    *out_count = n;
    return ELIZA_OK;
}

/* Appends the text of one token to sb. */
static int32_t append_piece(const ez_tokenizer *tok, int32_t id, int render_special, ez_strbuf *sb) {
    char small[64];
    size_t len = 0;
    int32_t rc = ez_token_piece(tok, id, render_special, small, sizeof small, &len);
    if (rc) return rc;
    if (len <= sizeof small) {
        ez_sb_append(sb, small, len);
        return ELIZA_OK;
    }
    {
        char *big = (char *)malloc(len);
        if (!big) return ez_fail(ELIZA_E_NOMEM, "out of memory for a token's text");
        rc = ez_token_piece(tok, id, render_special, big, len, &len);
        if (rc == ELIZA_OK) ez_sb_append(sb, big, len);
        free(big);
    }
    return rc;
}

int32_t eliza_llm_detokenize(const eliza_llm *llm, const int32_t *tokens, size_t count, uint32_t flags,
                             char **out_text, size_t *out_len) {
    char *text = NULL;
    size_t len = 0;
    int32_t rc;

    ez_clear_error();
    if (out_text) *out_text = NULL;
    if (out_len) *out_len = 0;
    if (!llm || !out_text || !out_len || (!tokens && count))
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_llm_detokenize: NULL argument");
    /* llama_detokenize's rules (the first piece's prefix space, BPE clean-up). */
    rc = ez_detokenize(llm->tok, tokens, count, (flags & ELIZA_DETOKENIZE_RENDER_SPECIAL) != 0, &text, &len);
    if (rc) return rc;
    *out_text = text;
    *out_len = len;
    return ELIZA_OK;
}

/* ------------------------------------------------------------------------ */
/* Logits                                                                    */
/* ------------------------------------------------------------------------ */

int32_t eliza_llm_logits(eliza_llm *llm, const int32_t *tokens, size_t count, uint32_t all_positions,
                         float **out_logits, size_t *out_count) {
    float *logits;
    size_t n_rows, total;
    int32_t rc;

    ez_clear_error();
    if (out_logits) *out_logits = NULL;
    if (out_count) *out_count = 0;
    if (!llm || !tokens || !out_logits || !out_count)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_llm_logits: NULL argument");
    if (count == 0) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_llm_logits: no tokens");
    if (llm->stream) return ez_fail(ELIZA_E_STATE, "eliza_llm_logits: a stream of this model is open");
    if (count > (size_t)llm->n_ctx)
        return ez_fail(ELIZA_E_CONTEXT_FULL, "%" PRIu64 " tokens do not fit the context of %d", (uint64_t)count, llm->n_ctx);
    n_rows = all_positions ? count : 1;
    total = n_rows * (size_t)llm->model->hp.n_vocab;
    if (total > SIZE_MAX / sizeof(float)) return ez_fail(ELIZA_E_NOMEM, "logits of %" PRIu64 " rows do not fit", (uint64_t)n_rows);
    logits = (float *)malloc(total * sizeof(float));
    if (!logits) return ez_fail(ELIZA_E_NOMEM, "cannot allocate %" PRIu64 " logits", (uint64_t)total);
    ez_llm_flag_set(&llm->cancel, 0);
    rc = ez_llm_eval(llm->ctx, tokens, (int32_t)count, 0, logits, all_positions != 0, &llm->cancel);
    if (rc) {
        free(logits);
        return rc;
    }
    *out_logits = logits;
    *out_count = total;
    return ELIZA_OK;
}

/* Logit rows of at most this many positions at a time when scoring. */
#define SCORE_ROWS 64

int32_t eliza_llm_token_nll(eliza_llm *llm, const int32_t *tokens, size_t count, size_t first, double *out_nll) {
    const int64_t n_vocab = llm ? llm->model->hp.n_vocab : 0;
    float *logits;
    int32_t rc = ELIZA_OK;

    ez_clear_error();
    if (!llm || !tokens || !out_nll) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_llm_token_nll: NULL argument");
    if (llm->stream) return ez_fail(ELIZA_E_STATE, "eliza_llm_token_nll: a stream of this model is open");
    if (count < 2 || first >= count - 1)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_llm_token_nll: %" PRIu64 " tokens scored from %" PRIu64
                       " leave nothing to score", (uint64_t)count, (uint64_t)first);
    if (count > (size_t)llm->n_ctx)
        return ez_fail(ELIZA_E_CONTEXT_FULL, "%" PRIu64 " tokens do not fit the context of %d", (uint64_t)count, llm->n_ctx);
    for (size_t i = 1; i < count; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return ez_fail(ELIZA_E_INVALID_ARG, "token %d at index %" PRIu64 " is outside the vocabulary (%" PRId64 ")",
                           tokens[i], (uint64_t)i, n_vocab);
    logits = (float *)malloc(sizeof(float) * (size_t)SCORE_ROWS * (size_t)n_vocab);
    if (!logits) return ez_fail(ELIZA_E_NOMEM, "out of memory for %d rows of logits", SCORE_ROWS);
    ez_llm_flag_set(&llm->cancel, 0);
    if (first > 0) rc = ez_llm_eval(llm->ctx, tokens, (int32_t)first, 0, NULL, 0, &llm->cancel);
    for (size_t b0 = first; rc == ELIZA_OK && b0 < count - 1; b0 += SCORE_ROWS) {
        const size_t nb = EZ_MIN((size_t)SCORE_ROWS, count - 1 - b0);
        rc = ez_llm_eval(llm->ctx, tokens + b0, (int32_t)nb, (int32_t)b0, logits, 1, &llm->cancel);
        for (size_t r = 0; rc == ELIZA_OK && r < nb; r++) {
            const float *row = logits + r * (size_t)n_vocab;
            double mx = row[0], sum = 0.0;
            for (int64_t j = 1; j < n_vocab; j++) mx = row[j] > mx ? row[j] : mx;
            for (int64_t j = 0; j < n_vocab; j++) sum += exp((double)row[j] - mx);
            out_nll[b0 + r - first] = log(sum) + mx - (double)row[tokens[b0 + r + 1]];
        }
    }
    free(logits);
    return rc;
}

void eliza_llm_cancel(eliza_llm *llm) {
    if (llm) ez_llm_flag_set(&llm->cancel, 1);
}

/* ------------------------------------------------------------------------ */
/* Streams                                                                   */
/* ------------------------------------------------------------------------ */

typedef enum {
    STREAM_PROMPT,     /* the prompt is not evaluated yet */
    STREAM_SAMPLE,     /* logits of the last position are ready */
    STREAM_EVAL,       /* the last sampled token must be evaluated first */
    STREAM_FLUSH,      /* ended; held-back text still to hand out */
    STREAM_DONE,
    STREAM_FAILED      /* cancelled or an error; every call repeats it */
} stream_state;

struct eliza_llm_stream {
    eliza_llm *llm;
    ez_llm_flag cancel;
    ez_sampler *sampler;
    int32_t n_ctx;             /* this stream's context limit */
    int32_t max_tokens;        /* <= 0: unlimited */
    stream_state state;
    int32_t failure;           /* the code STREAM_FAILED repeats */
    int32_t stop_reason;

    int32_t *tokens;           /* prompt then generated tokens */
    size_t n_tokens, cap_tokens, n_prompt;
    int32_t n_past;            /* positions in the KV cache */
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
    uint32_t decode_evals;     /* tokens the decode passes produced */

    ez_spec *spec;             /* speculative decoding, when the handle drafts */
    int32_t queue[EZ_DRAFT_MAX + 1]; /* a round's tokens not handed out yet */
    int32_t n_queue, i_queue;
};

void eliza_llm_stream_default_config(eliza_llm_stream_config *config) {
    if (!config) return;
    memset(config, 0, sizeof *config);
    config->struct_size = (uint32_t)sizeof *config;
    config->flags = ELIZA_TOKENIZE_ADD_BOS | ELIZA_TOKENIZE_PARSE_SPECIAL;
    config->prompt = NULL;
    config->max_tokens = 256;
    config->temperature = 0.8f;
    config->top_k = 40;
    config->top_p = 0.95f;
    config->min_p = 0.05f;
    config->repeat_penalty = 1.0f;
    config->repeat_last_n = 64;
    config->seed = 0;
    config->stop = NULL;
    config->n_stop = 0;
    config->context_size = 0;
}

static int32_t read_config(const eliza_llm_stream_config *in, eliza_llm_stream_config *c) {
    eliza_llm_stream_default_config(c);
    if (!FITS(in, eliza_llm_stream_config, flags))
        return ez_fail(ELIZA_E_ABI, "eliza_llm_stream_config.struct_size %" PRIu32 " is too small (%" PRIu64 ")",
                       in->struct_size, (uint64_t)sizeof(eliza_llm_stream_config));
#define TAKE(f) \
    if (FITS(in, eliza_llm_stream_config, f)) c->f = in->f
    TAKE(flags);
    TAKE(prompt);
    TAKE(max_tokens);
    TAKE(temperature);
    TAKE(top_k);
    TAKE(top_p);
    TAKE(min_p);
    TAKE(repeat_penalty);
    TAKE(repeat_last_n);
    TAKE(seed);
    TAKE(stop);
    TAKE(n_stop);
    TAKE(context_size);
#undef TAKE
    return ELIZA_OK;
}

/* The sampling ranges (eliza.h; the Python SDK and the CLI check the same). */
static int32_t check_sampling(const eliza_llm_stream_config *c) {
    if (!(c->temperature >= 0.0f && c->temperature <= 100.0f))
        return ez_fail(ELIZA_E_INVALID_ARG, "temperature %g is outside 0..100", (double)c->temperature);
    if (c->top_k < 0) return ez_fail(ELIZA_E_INVALID_ARG, "top_k %d is negative", (int)c->top_k);
    if (!(c->top_p >= 0.0f && c->top_p <= 1.0f))
        return ez_fail(ELIZA_E_INVALID_ARG, "top_p %g is outside 0..1", (double)c->top_p);
    if (!(c->min_p >= 0.0f && c->min_p <= 1.0f))
        return ez_fail(ELIZA_E_INVALID_ARG, "min_p %g is outside 0..1", (double)c->min_p);
    if (!(c->repeat_penalty > 0.0f && c->repeat_penalty <= 100.0f))
        return ez_fail(ELIZA_E_INVALID_ARG, "repeat_penalty %g is outside (0, 100]", (double)c->repeat_penalty);
    if (c->repeat_last_n < 0)
        return ez_fail(ELIZA_E_INVALID_ARG, "repeat_last_n %d is negative", (int)c->repeat_last_n);
    return ELIZA_OK;
}

static void detach_stream(eliza_llm_stream *s) { s->llm = NULL; }

static void stream_free(eliza_llm_stream *s) {
    if (!s) return;
    ez_spec_free(s->spec);
    ez_sampler_free(s->sampler);
    free(s->tokens);
    for (uint32_t i = 0; i < s->n_stop; i++) free(s->stop[i]);
    free(s->stop);
    free(s->stop_len);
    free(s->pending);
    free(s->out);
    free(s);
}

static int32_t copy_stop_strings(eliza_llm_stream *s, const eliza_llm_stream_config *c) {
    if (c->n_stop == 0) return ELIZA_OK;
    if (!c->stop) return ez_fail(ELIZA_E_INVALID_ARG, "n_stop is %" PRIu32 " but stop is NULL", c->n_stop);
    if (c->n_stop > MAX_STOP_STRINGS)
        return ez_fail(ELIZA_E_INVALID_ARG, "%" PRIu32 " stop strings (at most %d)", c->n_stop, MAX_STOP_STRINGS);
    s->stop = (char **)calloc(c->n_stop, sizeof *s->stop);
    s->stop_len = (size_t *)calloc(c->n_stop, sizeof *s->stop_len);
    if (!s->stop || !s->stop_len) return ez_fail(ELIZA_E_NOMEM, "out of memory for stop strings");
    for (uint32_t i = 0; i < c->n_stop; i++) {
        size_t n;
        if (!c->stop[i]) return ez_fail(ELIZA_E_INVALID_ARG, "stop string %" PRIu32 " is NULL", i);
        n = strlen(c->stop[i]);
        if (n == 0) return ez_fail(ELIZA_E_INVALID_ARG, "stop string %" PRIu32 " is empty", i);
        s->stop[i] = (char *)malloc(n + 1);
        if (!s->stop[i]) return ez_fail(ELIZA_E_NOMEM, "out of memory for stop strings");
        memcpy(s->stop[i], c->stop[i], n + 1);
        s->stop_len[i] = n;
        s->n_stop = i + 1;
    }
    return ELIZA_OK;
}

int32_t eliza_llm_stream_open(eliza_llm *llm, const eliza_llm_stream_config *config, eliza_llm_stream **out) {
    eliza_llm_stream_config c;
    eliza_llm_stream *s;
    ez_sampler_params sp;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int32_t rc;

    ez_clear_error();
    if (out) *out = NULL;
    if (!llm || !config || !out) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_llm_stream_open: NULL argument");
    if ((rc = read_config(config, &c))) return rc;
    if (llm->stream) return ez_fail(ELIZA_E_STATE, "a stream of this model is already open");
    if (!c.prompt || !c.prompt[0]) return ez_fail(ELIZA_E_INVALID_ARG, "the prompt is empty");
    if ((rc = check_sampling(&c))) return rc;
    if (c.context_size > (uint32_t)llm->n_ctx)
        return ez_fail(ELIZA_E_INVALID_ARG, "stream context_size %" PRIu32 " exceeds the model's %d", c.context_size,
                       llm->n_ctx);

    s = (eliza_llm_stream *)calloc(1, sizeof *s);
    if (!s) return ez_fail(ELIZA_E_NOMEM, "out of memory for a stream");
    s->llm = llm;
    ez_llm_flag_set(&s->cancel, 0);
    s->n_ctx = c.context_size ? (int32_t)c.context_size : llm->n_ctx;
    s->max_tokens = c.max_tokens;
    s->last_text_token = -1;
    s->state = STREAM_PROMPT;

    sp.temperature = c.temperature;
    sp.top_k = c.top_k;
    sp.top_p = c.top_p;
    sp.min_p = c.min_p;
    sp.repeat_penalty = c.repeat_penalty;
    sp.repeat_last_n = c.repeat_last_n;
    sp.seed = c.seed;
    rc = copy_stop_strings(s, &c);
    if (rc == ELIZA_OK) rc = ez_sampler_create(&sp, llm->model->hp.n_vocab, &s->sampler);
    if (rc == ELIZA_OK && llm->drafter) {
        rc = ez_spec_create(llm->model->hp.n_vocab, llm->draft_max, &s->spec);
        llm->drafter->vt->reset(llm->drafter);
    }
    if (rc == ELIZA_OK)
        rc = ez_tokenize(llm->tok, c.prompt, strlen(c.prompt), (c.flags & ELIZA_TOKENIZE_ADD_BOS) != 0,
                         (c.flags & ELIZA_TOKENIZE_PARSE_SPECIAL) != 0, &ids, &n_ids);
    if (rc == ELIZA_OK && n_ids == 0) rc = ez_fail(ELIZA_E_INVALID_ARG, "the prompt has no tokens");
    if (rc == ELIZA_OK && n_ids > (size_t)s->n_ctx)
        rc = ez_fail(ELIZA_E_CONTEXT_FULL, "the prompt has %" PRIu64 " tokens; the context holds %d", (uint64_t)n_ids, s->n_ctx);
    if (rc) {
        free(ids);
        stream_free(s);
        return rc;
    }
    s->tokens = ids;
    s->n_tokens = s->n_prompt = s->cap_tokens = n_ids;
    llm->stream = s;
    *out = s;
    return ELIZA_OK;
}

void eliza_llm_stream_cancel(eliza_llm_stream *stream) {
    if (stream) ez_llm_flag_set(&stream->cancel, 1);
}

/* ELIZA_PROFILE=1: one log line per stream (level INFO) with its rates and
 * where the model's forward time has gone so far (cumulative per handle). */
static void log_profile(const eliza_llm_stream *s) {
    const ez_llm_profile *prof;
    ez_strbuf sb = {0};
    char *line;
    if (!s->llm || !ez_env_flag("ELIZA_PROFILE")) return;
    prof = ez_llm_ctx_profile(s->llm->ctx);
    ez_sb_printf(&sb, "llm profile: prompt %" PRIu64 " tokens in %.1f ms, %d generated, decode %.1f ms; forward ms:",
                 (uint64_t)s->n_prompt, (double)s->prefill_ns / 1e6, s->n_generated, (double)s->decode_ns / 1e6);
    for (int i = 0; i < EZ_LLM_PHASE_COUNT; i++)
        ez_sb_printf(&sb, " %s %.1f", ez_llm_phase_name(i), (double)prof->ns[i] / 1e6);
    line = ez_sb_take(&sb);
    if (line) ez_log(ELIZA_LOG_INFO, "%s", line);
    free(line);
}

void eliza_llm_stream_close(eliza_llm_stream *stream) {
    if (!stream) return;
    log_profile(stream);
    if (stream->llm && stream->llm->stream == stream) stream->llm->stream = NULL;
    stream_free(stream);
}

int32_t eliza_llm_stream_stats(const eliza_llm_stream *s, eliza_llm_stats *stats) {
    ez_clear_error();
    if (!s || !stats) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_llm_stream_stats: NULL argument");
    if (!FITS(stats, eliza_llm_stats, prompt_tokens))
        return ez_fail(ELIZA_E_ABI, "eliza_llm_stats.struct_size %" PRIu32 " is too small (%" PRIu64 ")", stats->struct_size,
                       (uint64_t)sizeof(eliza_llm_stats));
#define PUT(f, v) \
    if (FITS(stats, eliza_llm_stats, f)) stats->f = (v)
    PUT(prompt_tokens, (uint32_t)s->n_prompt);
    PUT(generated_tokens, (uint32_t)s->n_generated);
    PUT(stop_reason, s->stop_reason);
    PUT(prefill_ms, (double)s->prefill_ns / 1e6);
    PUT(decode_ms, (double)s->decode_ns / 1e6);
    PUT(prefill_tokens_per_s, s->prefill_ns ? (double)s->n_prompt * 1e9 / (double)s->prefill_ns : 0.0);
    PUT(decode_tokens_per_s, s->decode_ns ? (double)s->decode_evals * 1e9 / (double)s->decode_ns : 0.0);
    if (s->spec) {
        const ez_spec_stats st = ez_spec_get_stats(s->spec);
        PUT(draft_tokens, (uint32_t)st.drafted);
        PUT(draft_accepted, (uint32_t)st.accepted);
        PUT(draft_rounds, (uint32_t)st.rounds);
    } else {
        PUT(draft_tokens, 0);
        PUT(draft_accepted, 0);
        PUT(draft_rounds, 0);
    }
#undef PUT
    return ELIZA_OK;
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

/* Bytes of the UTF-8 sequence a lead byte starts (0 for a continuation or
 * an invalid byte). */
static int utf8_len(unsigned char b) {
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}

/* Length of a valid sequence at s[0..n), 0 if invalid, -1 if s ends inside
 * a sequence that could still become valid. */
static int utf8_seq(const unsigned char *s, size_t n) {
    int len = utf8_len(s[0]);
    if (len == 0) return 0;
    for (int i = 1; i < len; i++) {
        unsigned char lo = 0x80, hi = 0xBF;
        if ((size_t)i >= n) return -1;
        if (i == 1 && s[0] == 0xE0) lo = 0xA0;
        if (i == 1 && s[0] == 0xED) hi = 0x9F;
        if (i == 1 && s[0] == 0xF0) lo = 0x90;
        if (i == 1 && s[0] == 0xF4) hi = 0x8F;
        if (s[i] < lo || s[i] > hi) return 0;
    }
    return len;
}

/* How much of s[0..n) can go out now: everything but an unfinished
 * character at the end (unless `final`). */
static size_t utf8_ready(const char *s, size_t n, int final) {
    size_t i = 0;
    if (final) return n;
    while (i < n) {
        int len = utf8_seq((const unsigned char *)s + i, n - i);
        if (len < 0) return i;
        i += len ? (size_t)len : 1;
    }
    return n;
}

/* Copies s[0..n) to the stream's out buffer as valid UTF-8 (invalid bytes
 * and a truncated final character become U+FFFD). */
static int32_t set_out(eliza_llm_stream *st, const char *s, size_t n, size_t *out_len) {
    size_t o = 0, i = 0;
    int32_t rc = reserve(&st->out, &st->out_cap, 3 * n + 1);
    if (rc) return rc;
    while (i < n) {
        int len = utf8_seq((const unsigned char *)s + i, n - i);
        if (len <= 0) {
            memcpy(st->out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
            /* A truncated sequence is one replacement, not one per byte. */
            while (len < 0 && i < n && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
            continue;
        }
        memcpy(st->out + o, s + i, (size_t)len);
        o += (size_t)len;
        i += (size_t)len;
    }
    st->out[o] = '\0';
    *out_len = o;
    return ELIZA_OK;
}

/* Position of the first stop string in pending, or SIZE_MAX. */
static size_t find_stop(const eliza_llm_stream *s) {
    size_t best = SIZE_MAX;
    for (uint32_t k = 0; k < s->n_stop; k++) {
        const size_t m = s->stop_len[k];
        for (size_t i = 0; i + m <= s->pending_len && i < best; i++)
            if (memcmp(s->pending + i, s->stop[k], m) == 0) {
                best = i;
                break;
            }
    }
    return best;
}

/* Bytes at the end of pending that could be the start of a stop string. */
static size_t stop_prefix_held(const eliza_llm_stream *s) {
    size_t held = 0;
    for (uint32_t k = 0; k < s->n_stop; k++) {
        size_t m = EZ_MIN(s->stop_len[k] - 1, s->pending_len);
        for (; m > held; m--)
            if (memcmp(s->pending + s->pending_len - m, s->stop[k], m) == 0) {
                held = m;
                break;
            }
    }
    return held;
}

static void set_piece(eliza_llm_piece *piece, int32_t token, const char *text, uint32_t len) {
    if (FITS(piece, eliza_llm_piece, token)) piece->token = token;
    if (FITS(piece, eliza_llm_piece, text)) piece->text = text;
    if (FITS(piece, eliza_llm_piece, text_len)) piece->text_len = len;
}

/* Hands out the releasable head of pending (all of it when final). */
static int32_t emit(eliza_llm_stream *s, int32_t token, int final, eliza_llm_piece *piece) {
    size_t ready = final ? s->pending_len : s->pending_len - stop_prefix_held(s);
    size_t out_len = 0;
    int32_t rc;
    ready = utf8_ready(s->pending, ready, final);
    if ((rc = set_out(s, s->pending, ready, &out_len))) return rc;
    memmove(s->pending, s->pending + ready, s->pending_len - ready);
    s->pending_len -= ready;
    set_piece(piece, token, s->out, (uint32_t)out_len);
    return ELIZA_OK;
}

static int32_t fail_stream(eliza_llm_stream *s, int32_t rc) {
    s->state = STREAM_FAILED;
    s->failure = rc;
    if (rc == ELIZA_E_CANCELLED) s->stop_reason = ELIZA_STOP_CANCELLED;
    return rc;
}

static void finish(eliza_llm_stream *s, int32_t reason) {
    s->stop_reason = reason;
    s->state = STREAM_FLUSH;
}

/* The stream's model as the speculative loop's target: every batch row's
 * logits. Positions past a rewind point are simply evaluated over again. */
static int32_t spec_eval(void *self, const int32_t *tokens, int32_t n, int32_t pos0, float *logits,
                         ez_atomic_int *cancel) {
    return ez_llm_eval(((eliza_llm *)self)->ctx, tokens, n, pos0, logits, 1, cancel);
}

/* One speculative round after the last sampled token: its tokens go to the
 * queue, handed out one at a time like sampled ones. */
static int32_t advance_speculative(eliza_llm_stream *s) {
    eliza_llm *llm = s->llm;
    const ez_spec_target target = {llm, llm->model->hp.n_vocab, spec_eval, NULL};
    ez_draft_target view;
    int32_t room = s->n_ctx - s->n_past - 1, n_out = 0, rc;
    /* Never draft past max_tokens: those tokens could not be handed out. */
    if (s->max_tokens > 0) room = EZ_MIN(room, s->max_tokens - s->n_generated - 1);
    view.tokens = s->tokens;
    view.n_tokens = s->n_tokens;
    view.n_past = s->n_past;
    view.hidden = NULL;
    view.session = NULL;
    rc = ez_spec_round(s->spec, &target, llm->drafter, s->sampler, &view, room, s->queue, &n_out, &s->cancel);
    if (rc) return rc;
    s->n_past += n_out;
    s->n_queue = n_out;
    s->i_queue = 0;
    return ELIZA_OK;
}

/* Evaluates the prompt or the last sampled token into llm->logits (or runs
 * a speculative round into the queue). */
static int32_t advance(eliza_llm_stream *s) {
    eliza_llm *llm = s->llm;
    uint64_t t0 = ez_time_ns();
    int32_t rc;
    if (s->state != STREAM_PROMPT && s->spec) {
        rc = advance_speculative(s);
        s->decode_ns += ez_time_ns() - t0;
        if (rc) return rc;
        s->decode_evals += (uint32_t)s->n_queue;
    } else if (s->state == STREAM_PROMPT) {
        rc = ez_llm_eval(llm->ctx, s->tokens, (int32_t)s->n_prompt, 0, llm->logits, 0, &s->cancel);
        s->prefill_ns += ez_time_ns() - t0;
        if (rc) return rc;
        s->n_past = (int32_t)s->n_prompt;
    } else {
        rc = ez_llm_eval(llm->ctx, &s->tokens[s->n_tokens - 1], 1, s->n_past, llm->logits, 0, &s->cancel);
        s->decode_ns += ez_time_ns() - t0;
        if (rc) return rc;
        s->n_past++;
        s->decode_evals++;
    }
    s->state = STREAM_SAMPLE;
    return ELIZA_OK;
}

static int32_t push_token(eliza_llm_stream *s, int32_t id) {
    if (s->n_tokens == s->cap_tokens) {
        size_t cap = s->cap_tokens ? 2 * s->cap_tokens : 64;
        int32_t *t = (int32_t *)realloc(s->tokens, cap * sizeof *t);
        if (!t) return ez_fail(ELIZA_E_NOMEM, "out of memory for tokens");
        s->tokens = t;
        s->cap_tokens = cap;
    }
    s->tokens[s->n_tokens++] = id;
    return ELIZA_OK;
}

/* Samples one token and turns it into a piece. */
static int32_t generate_one(eliza_llm_stream *s, eliza_llm_piece *piece) {
    eliza_llm *llm = s->llm;
    ez_strbuf text = {0};
    size_t at;
    int32_t id, rc;

    id = s->i_queue < s->n_queue ? s->queue[s->i_queue++]
                                 : ez_sampler_sample(s->sampler, llm->logits, s->tokens, s->n_tokens);
    if (ez_tokenizer_is_eog(llm->tok, id)) {
        finish(s, ELIZA_STOP_EOS);
        return ELIZA_DONE; /* nothing of this token to show; the caller flushes */
    }
    if ((rc = push_token(s, id))) return rc;
    s->n_generated++;
    s->state = STREAM_EVAL;

    if ((rc = append_piece(llm->tok, id, 0, &text))) {
        ez_sb_free(&text);
        return rc;
    }
    rc = reserve(&s->pending, &s->pending_cap, s->pending_len + text.len + 1);
    if (rc == ELIZA_OK && text.len) {
        memcpy(s->pending + s->pending_len, text.data, text.len);
        s->pending_len += text.len;
    }
    ez_sb_free(&text);
    if (rc) return rc;
    s->last_text_token = id;

    at = find_stop(s);
    if (at != SIZE_MAX) {
        s->pending_len = at;
        finish(s, ELIZA_STOP_STRING);
    } else if (s->max_tokens > 0 && s->n_generated >= s->max_tokens) {
        finish(s, ELIZA_STOP_MAX_TOKENS);
    }
    if (s->state == STREAM_FLUSH) {
        rc = emit(s, id, 1, piece);
        s->state = STREAM_DONE;
        return rc;
    }
    return emit(s, id, 0, piece);
}

int32_t eliza_llm_stream_next(eliza_llm_stream *s, eliza_llm_piece *piece) {
    int32_t rc;

    ez_clear_error();
    if (!s || !piece) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_llm_stream_next: NULL argument");
    if (!FITS(piece, eliza_llm_piece, token))
        return ez_fail(ELIZA_E_ABI, "eliza_llm_piece.struct_size %" PRIu32 " is too small (%" PRIu64 ")", piece->struct_size,
                       (uint64_t)sizeof(eliza_llm_piece));
    set_piece(piece, -1, "", 0);

    if (!s->llm) return ez_fail(ELIZA_E_STATE, "eliza_llm_stream_next: the stream's model has been closed");
    if (s->state == STREAM_FAILED)
        return ez_fail(s->failure, "the stream %s", s->failure == ELIZA_E_CANCELLED ? "was cancelled" : "failed");
    if (s->state != STREAM_DONE && s->state != STREAM_FLUSH && ez_llm_flag_get(&s->cancel))
        return fail_stream(s, ez_fail(ELIZA_E_CANCELLED, "cancelled"));

    /* The rest of a speculative round's tokens are already evaluated
     * (all but the last) and need no pass. */
    if (s->state == STREAM_EVAL && s->i_queue < s->n_queue) s->state = STREAM_SAMPLE;
    if (s->state == STREAM_EVAL && s->n_past >= s->n_ctx) finish(s, ELIZA_STOP_CONTEXT_FULL);
    if (s->state == STREAM_PROMPT || s->state == STREAM_EVAL) {
        rc = advance(s);
        if (rc) return fail_stream(s, rc);
    }
    if (s->state == STREAM_SAMPLE) {
        rc = generate_one(s, piece);
        if (rc == ELIZA_OK) return ELIZA_OK;
        if (rc != ELIZA_DONE) return fail_stream(s, rc);
    }
    if (s->state == STREAM_FLUSH) {
        s->state = STREAM_DONE;
        if (s->pending_len) {
            rc = emit(s, s->last_text_token, 1, piece);
            return rc ? fail_stream(s, rc) : ELIZA_OK;
        }
    }
    return ELIZA_DONE;
}

/* ------------------------------------------------------------------------ */
/* Chat templates                                                            */
/* ------------------------------------------------------------------------ */

const char *eliza_chat_template_name(const char *tmpl) {
    int t = tmpl ? ez_chat_detect(tmpl) : -1;
    return t >= 0 ? ez_chat_name(t) : NULL;
}

int32_t eliza_llm_chat_apply(const eliza_llm *llm, const char *tmpl,
                             const eliza_chat_message *messages, size_t n_messages,
                             uint32_t add_assistant, char **out_text, size_t *out_len) {
    char *own = NULL;
    int t;
    int32_t rc;

    ez_clear_error();
    if (out_text) *out_text = NULL;
    if (out_len) *out_len = 0;
    if (!out_text || !out_len || (!tmpl && !llm))
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_llm_chat_apply: NULL argument");
    if (!tmpl) {
        ez_str s;
        rc = ez_gguf_get_str(llm->model->gguf, "tokenizer.chat_template", &s);
        if (rc == ELIZA_E_NOT_FOUND)
            return ez_fail(ELIZA_E_NOT_FOUND, "the model has no tokenizer.chat_template; "
                                              "name a template (\"chatml\", ...)");
        if (rc) return rc;
        own = (char *)malloc((size_t)s.len + 1);
        if (!own) return ez_fail(ELIZA_E_NOMEM, "out of memory for the chat template");
        memcpy(own, s.ptr, (size_t)s.len);
        own[s.len] = '\0';
        tmpl = own;
    }
    t = ez_chat_detect(tmpl);
    if (t < 0) {
        rc = ez_fail(ELIZA_E_UNSUPPORTED,
                     "chat template not recognized (none of llama.cpp's built-in templates: "
                     "chatml, llama3, gemma, phi3, ...): '%.60s%s'", tmpl,
                     strlen(tmpl) > 60 ? "..." : "");
    } else {
        rc = ez_chat_apply(t, messages, n_messages, add_assistant != 0, out_text, out_len);
    }
    free(own);
    return rc;
}

int32_t eliza_llm_check_json(const char *path, char **out_json) {
    ez_gguf *g = NULL;
    ez_strbuf sb = {0};
    char *json;
    int32_t rc;

    ez_clear_error();
    if (out_json) *out_json = NULL;
    if (!path || !out_json) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_llm_check_json: NULL argument");
    rc = ez_gguf_open(path, &g);
    if (rc) return rc;
    ez_llm_check(g, &sb);
    ez_gguf_close(g);
    json = ez_sb_take(&sb);
    if (!json) return ez_fail(ELIZA_E_NOMEM, "out of memory for the model check");
    *out_json = json;
    return ELIZA_OK;
}
