/* The eliza_llm_* entry points: argument and struct_size checks, handle
 * lifetimes and error mapping. The behaviour (eval, the stream, sampling,
 * stop strings) is llm/session.c's. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/error.h"
#include "core/gguf.h"
#include "core/pool.h"
#include "core/strbuf.h"
#include "gpu/gpu.h"
#include "llm/chat.h"
#include "llm/check.h"
#include "llm/draft.h"
#include "llm/gpu_step.h"
#include "llm/kv.h"
#include "llm/model.h"
#include "llm/session.h"
#include "llm/tokenizer.h"

#define DEFAULT_CONTEXT_CAP 4096
#define DEFAULT_BATCH 256
#define MAX_CONTEXT (1 << 24)
#define MAX_BATCH (1 << 16)
#define MAX_STOP_STRINGS 64
/* 16 rows cost an AVX-512 pass about what 9 do (two groups of 8 per
 * register); the loop drafts less where that pays. */
#define DEFAULT_DRAFT_MAX 15

struct eliza_llm {
    ez_llm_model *model;
    ez_tokenizer *tok;
    ez_pool *pool;
    ez_llm_session *session;
    int32_t n_ctx, n_batch, n_threads;
    eliza_llm_stream *stream;   /* the open stream, if any */
    ez_llm_flag cancel;         /* set by eliza_llm_cancel() for eliza_llm_logits() */
    ez_drafter *drafter;        /* speculative decoding of the streams, or NULL */
    int32_t draft_max;          /* the most tokens a round drafts */
    char *gpu_fallback;         /* why the GPU asked for is not used, or NULL */
};

struct eliza_llm_stream {
    eliza_llm *llm;             /* NULL once the model is closed */
    ez_llm_stream *st;
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
    params->n_gpu_layers = 0;
    params->gpu_device = NULL;
    params->gpu_required = 0;
}

static void detach_stream(eliza_llm_stream *s);

void eliza_llm_close(eliza_llm *llm) {
    if (!llm) return;
    /* A stream left open must not reach a freed model: it fails with
     * ELIZA_E_STATE from here on, and closes as usual. */
    if (llm->stream) detach_stream(llm->stream);
    ez_drafter_free(llm->drafter);
    ez_llm_session_free(llm->session);
    free(llm->gpu_fallback);
    ez_pool_destroy(llm->pool);
    ez_tokenizer_free(llm->tok);
    ez_llm_model_free(llm->model);
    free(llm);
}

static int32_t read_params(const eliza_llm_params *in, eliza_llm_params *p) {
    eliza_llm_default_params(p);
    p->kv_type_v = p->kv_type;
    if (!in) return ELIZA_OK;
    if (!EZ_FITS(in, eliza_llm_params, n_threads))
        return ez_fail(ELIZA_E_ABI, "eliza_llm_params.struct_size %" PRIu32 " is too small (%" PRIu64 ")", in->struct_size,
                       (uint64_t)sizeof(eliza_llm_params));
    if (EZ_FITS(in, eliza_llm_params, n_threads)) p->n_threads = in->n_threads;
    if (EZ_FITS(in, eliza_llm_params, context_size)) p->context_size = in->context_size;
    if (EZ_FITS(in, eliza_llm_params, n_batch)) p->n_batch = in->n_batch;
    if (EZ_FITS(in, eliza_llm_params, kv_type)) p->kv_type = in->kv_type;
    p->kv_type_v = p->kv_type;
    if (EZ_FITS(in, eliza_llm_params, kv_type_v) && in->kv_type_v != ELIZA_LLM_KV_AS_K) p->kv_type_v = in->kv_type_v;
    if (EZ_FITS(in, eliza_llm_params, draft_kind)) p->draft_kind = in->draft_kind;
    if (EZ_FITS(in, eliza_llm_params, draft_max_tokens)) p->draft_max_tokens = in->draft_max_tokens;
    if (EZ_FITS(in, eliza_llm_params, draft_path)) p->draft_path = in->draft_path;
    if (EZ_FITS(in, eliza_llm_params, n_gpu_layers)) p->n_gpu_layers = in->n_gpu_layers;
    if (EZ_FITS(in, eliza_llm_params, gpu_device)) p->gpu_device = in->gpu_device;
    if (EZ_FITS(in, eliza_llm_params, gpu_required)) p->gpu_required = in->gpu_required;
    if (p->n_gpu_layers < -1)
        return ez_fail(ELIZA_E_INVALID_ARG, "n_gpu_layers %d is below -1 (-1 = all, 0 = none)", p->n_gpu_layers);
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

/* The session on the GPU: the checks that need no device first, then the
 * device, the weights' upload and the recorded step. An error says why
 * (ez_fail's message). */
static int32_t open_gpu_session(eliza_llm *llm, const eliza_llm_params *p) {
    const int32_t n_layer = llm->model->hp.n_layer;
    ez_gpu_params gp;
    ez_llm_gpu *step = NULL;
    int32_t rc;
    if (p->kv_type != ELIZA_LLM_KV_F32 || p->kv_type_v != ELIZA_LLM_KV_F32)
        return ez_fail(ELIZA_E_UNSUPPORTED, "the GPU cache holds F32 keys and values only (kv_type %s, kv_type_v %s)",
                       ez_kv_type_name((int)p->kv_type), ez_kv_type_name((int)p->kv_type_v));
    if (p->draft_kind == ELIZA_LLM_DRAFT_MTP)
        return ez_fail(ELIZA_E_UNSUPPORTED, "an MTP drafter reads hidden states, which the GPU step does not read back");
    if ((rc = ez_llm_gpu_supports(llm->model))) return rc;
    if (p->n_gpu_layers > 0 && p->n_gpu_layers < n_layer)
        ez_log(ELIZA_LOG_INFO, "LLM: n_gpu_layers %d of %d: the GPU takes the whole model, all %d layers go there",
               p->n_gpu_layers, n_layer, n_layer);
    ez_gpu_params_default(&gp);
    gp.device = p->gpu_device;
    rc = ez_llm_gpu_open(llm->model, &gp, llm->n_ctx, &step);
    return rc ? rc : ez_llm_session_create_gpu(llm->model, step, llm->n_ctx, &llm->session);
}

/* The GPU when asked for, else (or when it fails and is not required) the
 * CPU engine's session. */
static int32_t open_session(eliza_llm *llm, const eliza_llm_params *p) {
    if (p->n_gpu_layers != 0) {
        const int32_t rc = open_gpu_session(llm, p);
        const size_t n = rc ? strlen(eliza_last_error()) : 0;
        if (rc == ELIZA_OK) {
            ez_log(ELIZA_LOG_INFO, "LLM: %d layers on the GPU (%s)", llm->model->hp.n_layer,
                   ez_llm_session_gpu_device(llm->session));
            return ELIZA_OK;
        }
        llm->gpu_fallback = (char *)malloc(n + 1);
        if (!llm->gpu_fallback) return ez_fail(ELIZA_E_NOMEM, "out of memory opening the model");
        memcpy(llm->gpu_fallback, eliza_last_error(), n + 1);
        if (p->gpu_required) return ez_fail(rc, "the GPU is required and not usable: %s", llm->gpu_fallback);
        ez_log(ELIZA_LOG_WARN, "LLM: the GPU is not used, the model runs on the CPU: %s", llm->gpu_fallback);
    }
    return ez_llm_session_create(llm->model, llm->pool, llm->n_ctx, llm->n_batch, (int)p->kv_type, (int)p->kv_type_v,
                                 &llm->session);
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
        rc = open_session(llm, &p);
    }
    if (rc == ELIZA_OK && p.draft_kind != ELIZA_LLM_DRAFT_NONE) {
        ez_draft_open_params dp;
        dp.kind = (ez_draft_kind)p.draft_kind;
        dp.path = p.draft_path;
        dp.target = llm->model;
        dp.pool = llm->pool;
        dp.n_ctx = llm->n_ctx;
        dp.k_max = p.draft_max_tokens;
        /* A round evaluates k + 1 tokens in one batch and rewinds past the
         * rejected ones: the cache allows rewinds of up to n_batch. */
        if (p.draft_max_tokens >= llm->n_batch)
            rc = ez_fail(ELIZA_E_INVALID_ARG, "draft_max_tokens %d needs n_batch above it (n_batch is %d)",
                         p.draft_max_tokens, llm->n_batch);
        if (rc == ELIZA_OK) rc = ez_drafter_open(&dp, &llm->drafter);
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
    const char *device;
    char *json;

    ez_clear_error();
    if (out_json) *out_json = NULL;
    if (!llm || !out_json) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_llm_info_json: NULL argument");
    hp = &llm->model->hp;
    prof = ez_llm_session_profile(llm->session);
    device = ez_llm_session_gpu_device(llm->session);
    ez_sb_printf(&sb, "{\"architecture\": \"%s\", \"n_vocab\": %d, \"n_ctx_train\": %d, \"context_size\": %d",
                 hp->arch_name, hp->n_vocab, hp->n_ctx_train, llm->n_ctx);
    ez_sb_printf(&sb, ", \"n_embd\": %d, \"n_layer\": %d, \"n_head\": %d, \"n_head_kv\": %d, \"head_dim\": %d",
                 hp->n_embd, hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim);
    ez_sb_printf(&sb, ", \"n_ff\": %d, \"bos\": %d, \"eos\": %d, \"n_threads\": %d, \"n_batch\": %d", hp->n_ff,
                 ez_tokenizer_bos(llm->tok), ez_tokenizer_eos(llm->tok), llm->n_threads, llm->n_batch);
    ez_sb_printf(&sb, ", \"sliding_window\": %d, \"tied_output\": %s, \"kv_type\": \"%s\", \"kv_type_v\": \"%s\"",
                 hp->n_swa, llm->model->tied_output ? "true" : "false",
                 ez_kv_type_name(ez_llm_session_kv_type(llm->session, 0)),
                 ez_kv_type_name(ez_llm_session_kv_type(llm->session, 1)));
    ez_sb_printf(&sb, ", \"draft\": \"%s\", \"draft_max_tokens\": %d",
                 llm->drafter ? ez_draft_kind_name(llm->drafter->kind) : "none", llm->drafter ? llm->draft_max : 0);
    ez_sb_printf(&sb, ", \"kv_bytes\": %" PRIu64 ", \"kv_bytes_per_token\": %" PRIu64,
                 (uint64_t)ez_llm_session_kv_bytes(llm->session),
                 (uint64_t)ez_llm_session_kv_bytes_per_token(llm->session));
    ez_sb_puts(&sb, ", \"backend\": ");
    if (device) {
        char name[300];
        snprintf(name, sizeof name, "vulkan: %s", device);
        ez_sb_json_str(&sb, name, strlen(name));
    } else {
        ez_sb_puts(&sb, "\"cpu\"");
    }
    ez_sb_printf(&sb, ", \"gpu_layers\": %d, \"gpu_fallback\": ", device ? hp->n_layer : 0);
    if (llm->gpu_fallback) ez_sb_json_str(&sb, llm->gpu_fallback, strlen(llm->gpu_fallback));
    else ez_sb_puts(&sb, "null");
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
    ez_llm_session_clear(llm->session);
    rc = ez_llm_session_eval(llm->session, tokens, (int32_t)count, logits, all_positions != 0, NULL, &llm->cancel);
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
    ez_llm_session_clear(llm->session);
    if (first > 0) rc = ez_llm_session_eval(llm->session, tokens, (int32_t)first, NULL, 0, NULL, &llm->cancel);
    for (size_t b0 = first; rc == ELIZA_OK && b0 < count - 1; b0 += SCORE_ROWS) {
        const size_t nb = EZ_MIN((size_t)SCORE_ROWS, count - 1 - b0);
        rc = ez_llm_session_eval(llm->session, tokens + b0, (int32_t)nb, logits, 1, NULL, &llm->cancel);
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
    if (!EZ_FITS(in, eliza_llm_stream_config, flags))
        return ez_fail(ELIZA_E_ABI, "eliza_llm_stream_config.struct_size %" PRIu32 " is too small (%" PRIu64 ")",
                       in->struct_size, (uint64_t)sizeof(eliza_llm_stream_config));
#define TAKE(f) \
    if (EZ_FITS(in, eliza_llm_stream_config, f)) c->f = in->f
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

static void detach_stream(eliza_llm_stream *s) {
    ez_llm_stream_detach(s->st);
    s->llm = NULL;
}

static int32_t check_stop_strings(const eliza_llm_stream_config *c) {
    if (c->n_stop == 0) return ELIZA_OK;
    if (!c->stop) return ez_fail(ELIZA_E_INVALID_ARG, "n_stop is %" PRIu32 " but stop is NULL", c->n_stop);
    if (c->n_stop > MAX_STOP_STRINGS)
        return ez_fail(ELIZA_E_INVALID_ARG, "%" PRIu32 " stop strings (at most %d)", c->n_stop, MAX_STOP_STRINGS);
    for (uint32_t i = 0; i < c->n_stop; i++) {
        if (!c->stop[i]) return ez_fail(ELIZA_E_INVALID_ARG, "stop string %" PRIu32 " is NULL", i);
        if (!c->stop[i][0]) return ez_fail(ELIZA_E_INVALID_ARG, "stop string %" PRIu32 " is empty", i);
    }
    return ELIZA_OK;
}

int32_t eliza_llm_stream_open(eliza_llm *llm, const eliza_llm_stream_config *config, eliza_llm_stream **out) {
    eliza_llm_stream_config c;
    ez_llm_gen_params gp;
    eliza_llm_stream *s;
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
    if ((rc = check_stop_strings(&c))) return rc;

    memset(&gp, 0, sizeof gp);
    gp.sampling.temperature = c.temperature;
    gp.sampling.top_k = c.top_k;
    gp.sampling.top_p = c.top_p;
    gp.sampling.min_p = c.min_p;
    gp.sampling.repeat_penalty = c.repeat_penalty;
    gp.sampling.repeat_last_n = c.repeat_last_n;
    gp.sampling.seed = c.seed;
    gp.max_tokens = c.max_tokens;
    gp.n_ctx = (int32_t)c.context_size;
    gp.add_bos = (c.flags & ELIZA_TOKENIZE_ADD_BOS) != 0;
    gp.parse_special = (c.flags & ELIZA_TOKENIZE_PARSE_SPECIAL) != 0;
    gp.stop = (const char *const *)c.stop;
    gp.n_stop = c.n_stop;
    gp.drafter = llm->drafter;
    gp.draft_max = llm->draft_max;

    s = (eliza_llm_stream *)calloc(1, sizeof *s);
    if (!s) return ez_fail(ELIZA_E_NOMEM, "out of memory for a stream");
    if ((rc = ez_llm_stream_open(llm->session, llm->tok, c.prompt, &gp, &s->st))) {
        free(s);
        return rc;
    }
    s->llm = llm;
    llm->stream = s;
    *out = s;
    return ELIZA_OK;
}

void eliza_llm_stream_cancel(eliza_llm_stream *stream) {
    if (stream) ez_llm_stream_cancel(stream->st);
}

void eliza_llm_stream_close(eliza_llm_stream *stream) {
    if (!stream) return;
    if (stream->llm && stream->llm->stream == stream) stream->llm->stream = NULL;
    ez_llm_stream_free(stream->st);
    free(stream);
}

int32_t eliza_llm_stream_stats(const eliza_llm_stream *s, eliza_llm_stats *stats) {
    ez_llm_gen_stats g;
    ez_clear_error();
    if (!s || !stats) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_llm_stream_stats: NULL argument");
    if (!EZ_FITS(stats, eliza_llm_stats, prompt_tokens))
        return ez_fail(ELIZA_E_ABI, "eliza_llm_stats.struct_size %" PRIu32 " is too small (%" PRIu64 ")", stats->struct_size,
                       (uint64_t)sizeof(eliza_llm_stats));
    ez_llm_stream_stats(s->st, &g);
#define PUT(f, v) \
    if (EZ_FITS(stats, eliza_llm_stats, f)) stats->f = (v)
    PUT(prompt_tokens, g.n_prompt);
    PUT(generated_tokens, g.n_generated);
    PUT(stop_reason, g.stop_reason);
    PUT(prefill_ms, (double)g.prefill_ns / 1e6);
    PUT(decode_ms, (double)g.decode_ns / 1e6);
    PUT(prefill_tokens_per_s, g.prefill_ns ? (double)g.n_prompt_evaluated * 1e9 / (double)g.prefill_ns : 0.0);
    PUT(decode_tokens_per_s, g.decode_ns ? (double)g.decode_evals * 1e9 / (double)g.decode_ns : 0.0);
    PUT(draft_tokens, g.draft_tokens);
    PUT(draft_accepted, g.draft_accepted);
    PUT(draft_rounds, g.draft_rounds);
    PUT(prompt_evaluated, g.n_prompt_evaluated);
#undef PUT
    return ELIZA_OK;
}

static void set_piece(eliza_llm_piece *piece, int32_t token, const char *text, uint32_t len) {
    if (EZ_FITS(piece, eliza_llm_piece, token)) piece->token = token;
    if (EZ_FITS(piece, eliza_llm_piece, text)) piece->text = text;
    if (EZ_FITS(piece, eliza_llm_piece, text_len)) piece->text_len = len;
}

int32_t eliza_llm_stream_next(eliza_llm_stream *s, eliza_llm_piece *piece) {
    ez_llm_gen_piece g;
    int32_t rc;

    ez_clear_error();
    if (!s || !piece) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_llm_stream_next: NULL argument");
    if (!EZ_FITS(piece, eliza_llm_piece, token))
        return ez_fail(ELIZA_E_ABI, "eliza_llm_piece.struct_size %" PRIu32 " is too small (%" PRIu64 ")", piece->struct_size,
                       (uint64_t)sizeof(eliza_llm_piece));
    rc = ez_llm_stream_next(s->st, &g);
    set_piece(piece, g.token, g.text, g.text_len);
    return rc;
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
