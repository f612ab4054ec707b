/* Kokoro's prosody side (kokoro/modules.py): the duration encoder and the
 * durations, the F0 / N curves, the text encoder, and the AdainResBlk1d
 * block they share with the decoder (kokoro/istftnet.py). Batch 1 and no
 * padding: every mask KModel builds is all false, so masked_fill and
 * pack_padded_sequence change nothing here. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "tts/kokoro_impl.h"
#include "tts/ops.h"

#define NORM_EPS 1e-5f /* AdaLayerNorm, LayerNorm (channels), InstanceNorm1d */

int32_t ez_kokoro_linear_run(ez_kokoro_ctx *c, const ez_kokoro_linear *l, const float *x, int T, float *y) {
    const int mark = c->st->n;
    const float *w = ez_kokoro_f32(c, &l->w);
    if (!w) return ELIZA_E_NOMEM;
    ez_tts_linear(c->pool, x, T, l->n_in, w, l->b, l->n_out, y);
    ez_kokoro_release(c->st, mark);
    return ELIZA_OK;
}

int32_t ez_kokoro_conv1d_run(ez_kokoro_ctx *c, const ez_kokoro_conv *cv, const float *x, int t_in, int stride,
                             int pad, int dilation, float *y) {
    const int mark = c->st->n;
    const float *w;
    /* the direct path on the panels made at open, where it would run */
    if (cv->panels.h && !ez_tts_conv1d_prefers_fft(cv->c_in, t_in, cv->c_out, cv->k, stride, pad, dilation, 1) &&
        ez_tts_conv1d_direct_panels(c->pool, x, cv->c_in, t_in, &cv->panels, cv->b, cv->c_out, cv->k, stride, pad,
                                    dilation, y) == ELIZA_OK)
        return ELIZA_OK;
    w = ez_kokoro_f32(c, &cv->w);
    if (!w) return ELIZA_E_NOMEM;
    if (c->m->bf16)
        ez_tts_conv1d_bf16(c->pool, x, cv->c_in, t_in, w, cv->b, cv->c_out, cv->k, stride, pad, dilation, 1, y);
    else
        ez_tts_conv1d(c->pool, x, cv->c_in, t_in, w, cv->b, cv->c_out, cv->k, stride, pad, dilation, 1, y);
    ez_kokoro_release(c->st, mark);
    return ELIZA_OK;
}

int32_t ez_kokoro_convt_run(ez_kokoro_ctx *c, const ez_kokoro_conv *cv, const float *x, int t_in, int stride,
                            int pad, int out_pad, int groups, float *y) {
    const int mark = c->st->n;
    const float *w = ez_kokoro_f32(c, &cv->w);
    if (!w) return ELIZA_E_NOMEM;
    ez_tts_conv_transpose1d(c->pool, x, cv->c_in, t_in, w, cv->b, cv->c_out, cv->k, stride, pad, out_pad, groups, y);
    ez_kokoro_release(c->st, mark);
    return ELIZA_OK;
}

/* w_hh in the step panels laid out at load; w_ih widened per use. */
int32_t ez_kokoro_bilstm_run(ez_kokoro_ctx *c, const ez_kokoro_bilstm *l, const float *x, int T, float *y) {
    const int mark = c->st->n;
    const float *w_ih[2];
    int32_t rc = ELIZA_E_NOMEM;
    for (int d = 0; d < 2; d++)
        if (!(w_ih[d] = ez_kokoro_f32(c, &l->w_ih[d]))) goto done;
    rc = ez_tts_lstm_bidir(c->pool, x, T, l->n_in, l->H, w_ih, l->hh_panels, l->b_ih, l->b_hh, y);
done:
    ez_kokoro_release(c->st, mark);
    return rc;
}

int32_t ez_kokoro_adain_run(ez_kokoro_ctx *c, const ez_kokoro_adain *a, const float *s, float *x, int T,
                            ez_kokoro_act act, const float *alpha) {
    const int mark = c->st->n, C = a->C;
    float *gb = ez_kokoro_alloc(c->st, 2 * (int64_t)C);
    if (!gb || ez_kokoro_linear_run(c, &a->fc, s, 1, gb)) {
        ez_kokoro_release(c->st, mark);
        return ELIZA_E_NOMEM;
    }
    if (!a->affine_identity) {
        /* (1 + g) * (norm(x) * w + b) + beta folded into one AdaIN step */
        for (int i = 0; i < C; i++) {
            float g1 = 1.0f + gb[i];
            gb[C + i] = g1 * a->norm_b[i] + gb[C + i];
            gb[i] = g1 * a->norm_w[i] - 1.0f;
        }
    }
    if (act == EZ_KOKORO_ACT_LEAKY)
        ez_tts_adain1d_leaky_relu(c->pool, x, C, T, gb, NORM_EPS, 0.2f);
    else if (act == EZ_KOKORO_ACT_SNAKE)
        ez_tts_adain1d_snake(c->pool, x, C, T, gb, NORM_EPS, alpha);
    else
        ez_tts_adain1d(x, C, T, gb, NORM_EPS);
    ez_kokoro_release(c->st, mark);
    return ELIZA_OK;
}

int32_t ez_kokoro_resblk_run(ez_kokoro_ctx *c, const ez_kokoro_resblk *b, const float *x, int T, const float *s,
                             float *out) {
    const int mark = c->st->n, Ci = b->dim_in, Co = b->dim_out, T2 = b->upsample ? 2 * T : T;
    /* torch.rsqrt(torch.tensor(2)) in float32 */
    const float rsqrt2 = 1.0f / sqrtf(2.0f);
    float *t, *u, *h, *sc;
    int32_t rc = ELIZA_E_NOMEM;

    if (ez_kokoro_cancelled(c)) return ez_fail(ELIZA_E_CANCELLED, "Kokoro forward cancelled in a residual block");
    if (!(t = ez_kokoro_alloc(c->st, (int64_t)Ci * T)) || !(h = ez_kokoro_alloc(c->st, (int64_t)Co * T2))) goto done;
    /* residual: norm1, actv, pool, conv1, norm2, actv, conv2 */
    memcpy(t, x, (size_t)Ci * T * sizeof *t);
    if ((rc = ez_kokoro_adain_run(c, &b->norm1, s, t, T, EZ_KOKORO_ACT_LEAKY, NULL))) goto done;
    if (b->upsample) {
        rc = ELIZA_E_NOMEM;
        if (!(u = ez_kokoro_alloc(c->st, (int64_t)Ci * T2))) goto done;
        if ((rc = ez_kokoro_convt_run(c, &b->pool, t, T, 2, 1, 1, Ci, u))) goto done;
        t = u;
    }
    if ((rc = ez_kokoro_conv1d_run(c, &b->conv1, t, T2, 1, 1, 1, h)) ||
        (rc = ez_kokoro_adain_run(c, &b->norm2, s, h, T2, EZ_KOKORO_ACT_LEAKY, NULL)) ||
        (rc = ez_kokoro_conv1d_run(c, &b->conv2, h, T2, 1, 1, 1, out)))
        goto done;

    /* shortcut: nearest x2 upsample, then the 1x1 conv when the width changes */
    sc = (float *)x;
    if (b->upsample) {
        rc = ELIZA_E_NOMEM;
        if (!(u = ez_kokoro_alloc(c->st, (int64_t)Ci * T2))) goto done;
        for (int64_t ch = 0; ch < Ci; ch++)
            for (int i = 0; i < T2; i++) u[ch * T2 + i] = x[ch * T + i / 2];
        sc = u;
    }
    if (b->learned_sc) {
        rc = ELIZA_E_NOMEM;
        if (!(u = ez_kokoro_alloc(c->st, (int64_t)Co * T2))) goto done;
        if ((rc = ez_kokoro_conv1d_run(c, &b->conv1x1, sc, T2, 1, 0, 1, u))) goto done;
        sc = u;
    }
    for (int64_t i = 0; i < (int64_t)Co * T2; i++) out[i] = (out[i] + sc[i]) * rsqrt2;
    rc = ELIZA_OK;
done:
    ez_kokoro_release(c->st, mark);
    return rc;
}

/* x[T, D + S] = cat(y[T, D], s) */
static void cat_style(const float *y, int T, int D, const float *s, int S, float *x) {
    for (int t = 0; t < T; t++) {
        memcpy(x + (int64_t)t * (D + S), y + (int64_t)t * D, (size_t)D * sizeof *x);
        memcpy(x + (int64_t)t * (D + S) + D, s, (size_t)S * sizeof *x);
    }
}

int32_t ez_kokoro_durations(ez_kokoro_ctx *c, const float *d_en, int T, const float *s, float speed, float *d,
                            int32_t *dur, int *n_frames) {
    const ez_kokoro_hparams *hp = &c->m->hp;
    const ez_kokoro_weights *w = &c->m->w;
    const int D = hp->hidden, S = hp->style, mark = c->st->n;
    float *y, *gb, *logits, *dv;
    int64_t total = 0;
    int32_t rc = ELIZA_E_NOMEM;

    if (!(y = ez_kokoro_alloc(c->st, (int64_t)T * D)) || !(gb = ez_kokoro_alloc(c->st, 2 * (int64_t)D)) ||
        !(logits = ez_kokoro_alloc(c->st, (int64_t)T * hp->max_dur)) || !(dv = ez_kokoro_alloc(c->st, T)))
        goto done;

    /* DurationEncoder: (BiLSTM, AdaLayerNorm) x n_layer, the style appended each time */
    cat_style(d_en, T, D, s, S, d);
    for (int l = 0; l < hp->n_layer; l++) {
        if ((rc = ez_kokoro_bilstm_run(c, &w->dur_lstm[l], d, T, y)) ||
            (rc = ez_kokoro_linear_run(c, &w->dur_aln[l], s, 1, gb)))
            goto done;
        ez_tts_layer_norm(y, T, D, NULL, NULL, NORM_EPS);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < D; i++) {
                float *p = y + (int64_t)t * D + i;
                *p = (1.0f + gb[i]) * *p + gb[D + i];
            }
        cat_style(y, T, D, s, S, d);
    }
    if ((rc = ez_kokoro_record(c, "d", d, T, D + S, 0))) goto done;

    /* duration = sigmoid(duration_proj(lstm(d))).sum(-1) / speed; round half to even, at least 1 */
    if ((rc = ez_kokoro_bilstm_run(c, &w->pred_lstm, d, T, y)) || (rc = ez_kokoro_record(c, "lstm", y, T, D, 0)) ||
        (rc = ez_kokoro_linear_run(c, &w->duration_proj, y, T, logits)))
        goto done;
    for (int t = 0; t < T; t++) {
        double sum = 0.0;
        float r;
        for (int j = 0; j < hp->max_dur; j++) sum += 1.0f / (1.0f + expf(-logits[(int64_t)t * hp->max_dur + j]));
        dv[t] = (float)sum / speed;
        r = nearbyintf(dv[t]);
        if (!(r < 1e6f)) {
            rc = ez_fail(ELIZA_E_INVALID_ARG, "Kokoro durations: token %d lasts %g frames at speed %g", t,
                         (double)dv[t], (double)speed);
            goto done;
        }
        dur[t] = r < 1.0f ? 1 : (int32_t)r;
        total += dur[t];
    }
    if ((rc = ez_kokoro_record(c, "duration", dv, T, 0, 0))) goto done;
    for (int t = 0; t < T; t++) dv[t] = (float)dur[t];
    if ((rc = ez_kokoro_record(c, "pred_dur", dv, T, 0, 0))) goto done;
    if (total > INT32_MAX / 4) {
        rc = ez_fail(ELIZA_E_INVALID_ARG, "Kokoro durations: %lld frames", (long long)total);
        goto done;
    }
    *n_frames = (int)total;
    rc = ELIZA_OK;
done:
    ez_kokoro_release(c->st, mark);
    return rc;
}

int32_t ez_kokoro_f0n(ez_kokoro_ctx *c, const float *en, int F, const float *s, float *f0, float *n) {
    const ez_kokoro_weights *w = &c->m->w;
    const int D = c->m->hp.hidden, mark = c->st->n;
    float *y, *xc, *a, *b, *e;
    int32_t rc = ELIZA_E_NOMEM;

    if (!(y = ez_kokoro_alloc(c->st, (int64_t)F * D)) || !(xc = ez_kokoro_alloc(c->st, (int64_t)D * F)) ||
        !(a = ez_kokoro_alloc(c->st, (int64_t)D * F)) || !(b = ez_kokoro_alloc(c->st, (int64_t)D * F)) ||
        !(e = ez_kokoro_alloc(c->st, (int64_t)D * F)))
        goto done;
    if ((rc = ez_kokoro_bilstm_run(c, &w->shared, en, F, y))) goto done;
    ez_kokoro_transpose(y, F, D, xc);
    for (int br = 0; br < 2; br++) {
        const ez_kokoro_resblk *blk = br ? w->n : w->f0;
        const ez_kokoro_conv *proj = br ? &w->n_proj : &w->f0_proj;
        float *out = br ? n : f0;
        if ((rc = ez_kokoro_resblk_run(c, &blk[0], xc, F, s, a)) ||
            (rc = ez_kokoro_resblk_run(c, &blk[1], a, F, s, b)) ||
            (rc = ez_kokoro_resblk_run(c, &blk[2], b, 2 * F, s, e)))
            goto done;
        if ((rc = ez_kokoro_conv1d_run(c, proj, e, 2 * F, 1, 0, 1, out)) ||
            (rc = ez_kokoro_record(c, br ? "N_pred" : "F0_pred", out, 2 * (int64_t)F, 0, 0))) goto done;
    }
    rc = ELIZA_OK;
done:
    ez_kokoro_release(c->st, mark);
    return rc;
}

int32_t ez_kokoro_text_encoder(ez_kokoro_ctx *c, const int32_t *ids, int T, float *t_en) {
    const ez_kokoro_hparams *hp = &c->m->hp;
    const ez_kokoro_weights *w = &c->m->w;
    const int D = hp->hidden, K = hp->te_kernel, mark = c->st->n;
    float *xt, *xc, *yc;
    int32_t rc = ELIZA_E_NOMEM;

    if (!(xt = ez_kokoro_alloc(c->st, (int64_t)T * D)) || !(xc = ez_kokoro_alloc(c->st, (int64_t)D * T)) ||
        !(yc = ez_kokoro_alloc(c->st, (int64_t)D * T)))
        goto done;
    for (int t = 0; t < T; t++) ez_kokoro_rows(&w->te_emb, ids[t], 1, D, xt + (int64_t)t * D);
    ez_kokoro_transpose(xt, T, D, xc);
    /* cnn: (conv, LayerNorm over channels, LeakyReLU 0.2) x n_layer */
    for (int l = 0; l < hp->n_layer; l++) {
        if ((rc = ez_kokoro_conv1d_run(c, &w->te_conv[l], xc, T, 1, (K - 1) / 2, 1, yc))) goto done;
        ez_kokoro_transpose(yc, D, T, xt);
        ez_tts_layer_norm(xt, T, D, w->te_ln_g[l], w->te_ln_b[l], NORM_EPS);
        ez_tts_leaky_relu(xt, (int64_t)T * D, 0.2f);
        ez_kokoro_transpose(xt, T, D, xc);
    }
    ez_kokoro_transpose(xc, D, T, xt);
    if ((rc = ez_kokoro_bilstm_run(c, &w->te_lstm, xt, T, t_en))) goto done;
    rc = ez_kokoro_record(c, "t_en", t_en, D, T, 1);
done:
    ez_kokoro_release(c->st, mark);
    return rc;
}
