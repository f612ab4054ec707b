/* Kokoro's PL-BERT: transformers' AlbertModel (CustomAlbert returns its
 * last_hidden_state) with one shared layer applied num_hidden_layers times,
 * then KModel.bert_encoder. A single unpadded sequence: the attention mask
 * KModel passes is all ones, so every token attends to every token. */
#include <math.h>
#include <string.h>

#include "core/gemm.h"
#include "tts/kokoro_impl.h"
#include "tts/ops.h"

static void linear(ez_kokoro_ctx *c, const ez_kokoro_linear *l, const float *x, int T, float *y) {
    ez_tts_linear(c->pool, x, T, l->n_in, l->w, l->b, l->n_out, y);
}

/* transformers' gelu_new: the tanh approximation, on x[i0, i1) (ctx: x). */
static void gelu_new(void *ctx, int64_t i0, int64_t i1, int thread_index) {
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
    float *x = (float *)ctx;
    (void)thread_index;
    for (int64_t i = i0; i < i1; i++) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * (v * v * v))));
    }
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

/* Multi-head self-attention of q, k, v [T, H] into ctx [T, H]. */
static void attention(ez_kokoro_ctx *c, const float *q, const float *k, const float *v, int T, float *scores,
                      float *ctx) {
    const int H = c->m->hp.bert_hidden, nh = c->m->hp.bert_heads, dh = H / nh;
    const float scale = 1.0f / sqrtf((float)dh);
    for (int h = 0; h < nh; h++) {
        ez_gemm_f32(c->pool, T, T, dh, q + h * dh, H, k + h * dh, H, 1, scores, T, 0);
        for (int64_t i = 0; i < (int64_t)T * T; i++) scores[i] *= scale;
        softmax_rows(scores, T, T);
        ez_gemm_f32(c->pool, T, dh, T, scores, T, v + h * dh, H, 0, ctx + h * dh, H, 0);
    }
}

int32_t ez_kokoro_albert(ez_kokoro_ctx *c, const int32_t *ids, int T, float *d_en) {
    const ez_kokoro_hparams *hp = &c->m->hp;
    const ez_kokoro_weights *w = &c->m->w;
    const int E = hp->bert_embd, H = hp->bert_hidden, FF = hp->bert_ff;
    const int mark = c->st->n;
    float *emb, *h, *q, *k, *v, *ctx, *a, *ff, *scores;
    int32_t rc = ELIZA_E_NOMEM;

    if (!(emb = ez_kokoro_alloc(c->st, (int64_t)T * E)) || !(h = ez_kokoro_alloc(c->st, (int64_t)T * H)) ||
        !(q = ez_kokoro_alloc(c->st, (int64_t)T * H)) || !(k = ez_kokoro_alloc(c->st, (int64_t)T * H)) ||
        !(v = ez_kokoro_alloc(c->st, (int64_t)T * H)) || !(ctx = ez_kokoro_alloc(c->st, (int64_t)T * H)) ||
        !(a = ez_kokoro_alloc(c->st, (int64_t)T * H)) || !(ff = ez_kokoro_alloc(c->st, (int64_t)T * FF)) ||
        !(scores = ez_kokoro_alloc(c->st, (int64_t)T * T)))
        goto done;

    /* AlbertEmbeddings: (word + token type 0) + position, LayerNorm. */
    for (int t = 0; t < T; t++) {
        const float *we = w->word_emb + (int64_t)ids[t] * E, *pe = w->pos_emb + (int64_t)t * E;
        float *e = emb + (int64_t)t * E;
        for (int i = 0; i < E; i++) e[i] = (we[i] + w->type_emb[i]) + pe[i];
    }
    ez_tts_layer_norm(emb, T, E, w->emb_ln_w, w->emb_ln_b, hp->bert_eps);
    linear(c, &w->emb_map, emb, T, h);

    for (int l = 0; l < hp->bert_layers; l++) {
        linear(c, &w->q, h, T, q);
        linear(c, &w->k, h, T, k);
        linear(c, &w->v, h, T, v);
        attention(c, q, k, v, T, scores, ctx);
        linear(c, &w->dense, ctx, T, a);
        for (int64_t i = 0; i < (int64_t)T * H; i++) a[i] = h[i] + a[i];
        ez_tts_layer_norm(a, T, H, w->attn_ln_w, w->attn_ln_b, hp->bert_eps);
        linear(c, &w->ffn, a, T, ff);
        ez_pool_for(c->pool, (int64_t)T * FF, 4096, gelu_new, ff);
        linear(c, &w->ffn_out, ff, T, h);
        for (int64_t i = 0; i < (int64_t)T * H; i++) h[i] = h[i] + a[i];
        ez_tts_layer_norm(h, T, H, w->full_ln_w, w->full_ln_b, hp->bert_eps);
    }
    if ((rc = ez_kokoro_record(c, "bert", h, T, H, 0))) goto done;
    linear(c, &w->bert_encoder, h, T, d_en);
    rc = ez_kokoro_record(c, "d_en", d_en, T, hp->hidden, 0);
done:
    ez_kokoro_release(c->st, mark);
    return rc;
}
