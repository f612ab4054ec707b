/* Kokoro's PL-BERT: transformers' AlbertModel (CustomAlbert returns its
 * last_hidden_state) with one shared layer applied num_hidden_layers times,
 * then KModel.bert_encoder. A single unpadded sequence: the attention mask
 * KModel passes is all ones, so every token attends to every token. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "core/gemm.h"
#include "tts/kokoro_impl.h"
#include "tts/ops.h"

/* The shared layer's six matrices as float32, widened once for all its
 * applications. */
enum { W_Q, W_K, W_V, W_DENSE, W_FFN, W_FFN_OUT, N_SHARED };

static void linear(ez_kokoro_ctx *c, const ez_kokoro_linear *l, const float *w, const float *x, int T, float *y) {
    ez_tts_linear(c->pool, x, T, l->n_in, w, l->b, l->n_out, y);
}

static void softmax_rows(float *s, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        float *p = s + (int64_t)r * cols, mx = p[0];
        double sum = 0.0;
        for (int j = 1; j < cols; j++) mx = p[j] > mx ? p[j] : mx;
        for (int j = 0; j < cols; j++) {
            p[j] = expf(p[j] - mx);
            sum += p[j];
        }
        for (int j = 0; j < cols; j++) p[j] = (float)(p[j] / sum);
    }
}

typedef struct {
    ez_pool *pool;
    const float *q, *k, *v; /* [T, H] */
    float *scores;          /* [heads][T, T] */
    float *ctx;             /* [T, H] */
    int T, H, dh;
} attention_job;

/* Heads [h0, h1) of multi-head self-attention, each on one thread with
 * scores of its own: ctx_h = softmax(q_h k_h^T / sqrt(dh)) v_h. The GEMMs,
 * called inside the pool's loop, run inline on this thread with its
 * scratch slot. */
static void attention_heads(void *p, int64_t h0, int64_t h1, int thread_index) {
    const attention_job *j = (const attention_job *)p;
    const int T = j->T, H = j->H, dh = j->dh;
    const float scale = 1.0f / sqrtf((float)dh);
    (void)thread_index;
    for (int64_t h = h0; h < h1; h++) {
        float *s = j->scores + h * T * T;
        ez_gemm_f32(j->pool, T, T, dh, j->q + h * dh, H, j->k + h * dh, H, 1, s, T, 0);
        for (int64_t i = 0; i < (int64_t)T * T; i++) s[i] *= scale;
        softmax_rows(s, T, T);
        ez_gemm_f32(j->pool, T, dh, T, s, T, j->v + h * dh, H, 0, j->ctx + h * dh, H, 0);
    }
}

int32_t ez_kokoro_albert(ez_kokoro_ctx *c, const int32_t *ids, int T, float *d_en) {
    const ez_kokoro_hparams *hp = &c->m->hp;
    const ez_kokoro_weights *w = &c->m->w;
    const int E = hp->bert_embd, H = hp->bert_hidden, FF = hp->bert_ff;
    const int mark = c->st->n;
    const ez_kokoro_linear *shared[N_SHARED] = {&w->q, &w->k, &w->v, &w->dense, &w->ffn, &w->ffn_out};
    const float *sw[N_SHARED];
    float *emb, *h, *q, *k, *v, *ctx, *a, *ff, *scores, *row;
    int32_t rc = ELIZA_E_NOMEM;

    if (!(emb = ez_kokoro_alloc(c->st, (int64_t)T * E)) || !(h = ez_kokoro_alloc(c->st, (int64_t)T * H)) ||
        !(q = ez_kokoro_alloc(c->st, (int64_t)T * H)) || !(k = ez_kokoro_alloc(c->st, (int64_t)T * H)) ||
        !(v = ez_kokoro_alloc(c->st, (int64_t)T * H)) || !(ctx = ez_kokoro_alloc(c->st, (int64_t)T * H)) ||
        !(a = ez_kokoro_alloc(c->st, (int64_t)T * H)) || !(ff = ez_kokoro_alloc(c->st, (int64_t)T * FF)) ||
        !(scores = ez_kokoro_alloc(c->st, (int64_t)hp->bert_heads * T * T)) ||
        !(row = ez_kokoro_alloc(c->st, 2 * (int64_t)E)))
        goto done;

    /* AlbertEmbeddings: (word + token type 0) + position, LayerNorm. */
    ez_kokoro_rows(&w->type_emb, 0, 1, E, row + E);
    for (int t = 0; t < T; t++) {
        float *e = emb + (int64_t)t * E;
        ez_kokoro_rows(&w->word_emb, ids[t], 1, E, e);
        ez_kokoro_rows(&w->pos_emb, t, 1, E, row);
        for (int i = 0; i < E; i++) e[i] = (e[i] + row[E + i]) + row[i];
    }
    ez_tts_layer_norm(emb, T, E, w->emb_ln_w, w->emb_ln_b, hp->bert_eps);
    if ((rc = ez_kokoro_linear_run(c, &w->emb_map, emb, T, h))) goto done;
    rc = ELIZA_E_NOMEM;
    for (int i = 0; i < N_SHARED; i++)
        if (!(sw[i] = ez_kokoro_f32(c, &shared[i]->w))) goto done;

    for (int l = 0; l < hp->bert_layers; l++) {
        attention_job aj = {c->pool, q, k, v, scores, ctx, T, H, H / hp->bert_heads};
        if (ez_kokoro_cancelled(c)) {
            rc = ez_fail(ELIZA_E_CANCELLED, "Kokoro forward cancelled in ALBERT");
            goto done;
        }
        linear(c, &w->q, sw[W_Q], h, T, q);
        linear(c, &w->k, sw[W_K], h, T, k);
        linear(c, &w->v, sw[W_V], h, T, v);
        ez_pool_for(c->pool, hp->bert_heads, 1, attention_heads, &aj);
        linear(c, &w->dense, sw[W_DENSE], ctx, T, a);
        for (int64_t i = 0; i < (int64_t)T * H; i++) a[i] = h[i] + a[i];
        ez_tts_layer_norm(a, T, H, w->attn_ln_w, w->attn_ln_b, hp->bert_eps);
        linear(c, &w->ffn, sw[W_FFN], a, T, ff);
        ez_tts_gelu_tanh(c->pool, ff, (int64_t)T * FF);
        linear(c, &w->ffn_out, sw[W_FFN_OUT], ff, T, h);
        for (int64_t i = 0; i < (int64_t)T * H; i++) h[i] = h[i] + a[i];
        ez_tts_layer_norm(h, T, H, w->full_ln_w, w->full_ln_b, hp->bert_eps);
    }
    if ((rc = ez_kokoro_record(c, "bert", h, T, H, 0))) goto done;
    if ((rc = ez_kokoro_linear_run(c, &w->bert_encoder, h, T, d_en))) goto done;
    rc = ez_kokoro_record(c, "d_en", d_en, T, hp->hidden, 0);
done:
    ez_kokoro_release(c->st, mark);
    return rc;
}
