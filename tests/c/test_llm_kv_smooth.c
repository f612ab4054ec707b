/* Key smoothing (llm/kv.h): the fitted mean and scale, the exact algebra of
 * a smoothed score, and attention through the CPU backend with smoothed
 * keys against the same cache unsmoothed, over one script of evals: a
 * prompt batch (per-token path), a batch of 40 (the blocked GEMM path), one
 * token at a time (the split schedule), a sliding ring that wraps, a rewind
 * followed by other tokens, a clear that refits, and a FULL snapshot taken
 * before the clear and restored after it; with and without a soft-cap (the
 * only case that needs q . m back in the scores). The keys have what makes
 * Gemma's hard to quantize: large per-channel offsets and a spread that
 * differs by 60x between channels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/error.h"
#include "core/pool.h"
#include "llm/backend.h"
#include "llm/kv.h"

#define HD 64
#define N_HEAD 4
#define N_KV 2
#define N_CTX 128
#define N_BATCH 40
#define N_SWA 7
#define N_POS 96

static uint64_t g_rng = 1919;
static double urand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(g_rng >> 11) + 0.5) / 9007199254740992.0;
}
static float grand(void) { return (float)(sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand())); }

/* Rows of a stream of tokens: queries [N_POS, N_HEAD * HD], keys and
 * values [N_POS, N_KV * HD]; keys offset + spread * N(0, 1) per channel. */
typedef struct {
    float q[N_POS][N_HEAD * HD], k[N_POS][N_KV * HD], v[N_POS][N_KV * HD];
} stream;

static void make_stream(stream *s, float offset_amp) {
    float offset[N_KV * HD], spread[N_KV * HD];
    for (int c = 0; c < N_KV * HD; c++) {
        offset[c] = c % 9 == 0 ? offset_amp * grand() : 0.3f * grand();
        spread[c] = (float)(0.05 * pow(60.0, urand()));
    }
    for (int p = 0; p < N_POS; p++) {
        for (int c = 0; c < N_HEAD * HD; c++) s->q[p][c] = grand();
        for (int c = 0; c < N_KV * HD; c++) {
            s->k[p][c] = offset[c] + spread[c] * grand();
            s->v[p][c] = grand();
        }
    }
}

/* ---- the fit and the algebra -------------------------------------------------------- */

static ez_kv_smooth *smooth_new(int rot) {
    ez_kv_smooth *sm = (ez_kv_smooth *)calloc(1, sizeof *sm);
    sm->n_head_kv = N_KV;
    sm->head_dim = HD;
    sm->rot = rot;
    sm->mean = (float *)calloc(3 * N_KV * HD, sizeof(float));
    sm->scale = sm->mean + N_KV * HD;
    sm->bias = sm->scale + N_KV * HD;
    return sm;
}

static void smooth_del(ez_kv_smooth *sm) {
    free(sm->mean);
    free(sm);
}

static void test_kv_smooth_fit(void) {
    static stream s;
    ez_kv_smooth *sm = smooth_new(0);
    double ms = 0.0, err = 0.0;
    int ok = 1;
    make_stream(&s, 8.0f);
    ez_kv_smooth_fit(sm, &s.k[0][0], NULL, 24, N_HEAD);
    CHECK(sm->ready);
    /* m: the sum over (24 + EZ_KV_SMOOTH_PRIOR) positions; s: the fourth
     * root of each channel's variance, normalised to a mean square of 1 */
    for (int c = 0; c < N_KV * HD; c++) {
        double sum = 0.0;
        for (int p = 0; p < 24; p++) sum += s.k[p][c];
        err = fmax(err, fabs(sum / (24 + EZ_KV_SMOOTH_PRIOR) - sm->mean[c]));
        ok &= isfinite(sm->scale[c]) && sm->scale[c] > 0.0f;
    }
    for (int c = 0; c < HD; c++) ms += (double)sm->scale[c] * sm->scale[c];
    CHECK(err < 1e-5);
    CHECK(ok);
    CHECK(fabs(ms / HD - 1.0) < 1e-5);
    /* one position: finite, positive, and m a fifth of it */
    ez_kv_smooth_fit(sm, &s.k[0][0], NULL, 1, N_HEAD);
    err = 0.0;
    for (int c = 0; c < N_KV * HD; c++) {
        ok &= isfinite(sm->scale[c]) && sm->scale[c] > 0.0f;
        err = fmax(err, fabs(s.k[0][c] / (1 + EZ_KV_SMOOTH_PRIOR) - sm->mean[c]));
    }
    CHECK(ok && err < 1e-6);
    /* with the queries: s^4 is the channel's key variance over its query
     * mean square (each with its prior), up to one factor per head */
    for (int p = 0; p < N_POS; p++)
        for (int c = 0; c < N_HEAD * HD; c++) s.q[p][c] *= (float)(0.1 + (c % HD) % 7);
    ez_kv_smooth_fit(sm, &s.k[0][0], &s.q[0][0], 24, N_HEAD);
    for (int g = 0; g < N_KV; g++) {
        double ratio[HD], k_ms = 0.0, q_ms = 0.0, lo = 1e300, hi = 0.0;
        for (int c = 0; c < HD; c++)
            for (int p = 0; p < 24; p++) {
                k_ms += (double)s.k[p][g * HD + c] * s.k[p][g * HD + c];
                for (int r = 0; r < N_HEAD / N_KV; r++) {
                    const double x = s.q[p][(g * (N_HEAD / N_KV) + r) * HD + c];
                    q_ms += x * x;
                }
            }
        k_ms /= 24.0 * HD;
        q_ms /= 24.0 * HD * (N_HEAD / N_KV);
        for (int c = 0; c < HD; c++) {
            double m = 0.0, kv = 0.0, qv = 0.0;
            for (int p = 0; p < 24; p++) m += s.k[p][g * HD + c];
            m /= 24 + EZ_KV_SMOOTH_PRIOR;
            for (int p = 0; p < 24; p++) {
                kv += pow(s.k[p][g * HD + c] - m, 2.0);
                for (int r = 0; r < N_HEAD / N_KV; r++) qv += pow(s.q[p][(g * (N_HEAD / N_KV) + r) * HD + c], 2.0);
            }
            kv = (kv + EZ_KV_SMOOTH_PRIOR * k_ms) / (24 + EZ_KV_SMOOTH_PRIOR);
            qv = (qv + EZ_KV_SMOOTH_PRIOR * q_ms) / (24 * (N_HEAD / N_KV) + EZ_KV_SMOOTH_PRIOR);
            ratio[c] = pow(sm->scale[g * HD + c], 4.0) * qv / kv;
            lo = fmin(lo, ratio[c]);
            hi = fmax(hi, ratio[c]);
        }
        CHECK_MSG(hi / lo < 1.0 + 1e-4, "head %d: s^4 q^2 / var from %g to %g", g, lo, hi);
    }
    smooth_del(sm);
}

/* The fit that counts the queries in (kv.h: s = (key variance / query mean
 * square)^(1/4) minimises the expected squared score error of a block
 * quantizer) gives squared score errors at least 10% below the keys-only
 * fit's when the queries' channels differ in size, as Gemma's do. */
static void test_kv_smooth_query_weights_cut_score_error(void) {
    static stream s;
    static const int types[] = {EZ_KV_Q4_0, EZ_KV_TBQ4_0, EZ_KV_TBQ3_0};
    make_stream(&s, 8.0f);
    for (int c = 0; c < N_HEAD * HD; c++) {
        const float w = (float)(0.05 * pow(100.0, urand()));
        for (int p = 0; p < N_POS; p++) s.q[p][c] *= w;
    }
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const int t = types[ti], rot = ez_kv_rotation(t, HD, 0);
        const ez_kv_kernels *kk = ez_kv_kernels_ref(t);
        double e[2] = {0.0, 0.0}, ref_ss = 0.0;
        for (int with_q = 0; with_q < 2; with_q++) {
            ez_kv_smooth *sm = smooth_new(rot);
            ez_kv_smooth_fit(sm, &s.k[0][0], with_q ? &s.q[0][0] : NULL, 32, N_HEAD);
            for (int p = 32; p < N_POS; p++) {
                float q[N_HEAD * HD], k[N_KV * HD];
                uint8_t stored[HD * 4];
                memcpy(q, s.q[p], sizeof q);
                memcpy(k, s.k[p], sizeof k);
                ez_kv_smooth_queries(sm, q, 1, N_HEAD);
                ez_kv_smooth_keys(sm, k, 1);
                ez_kv_rotate(q, N_HEAD * HD, rot);
                ez_kv_rotate(k, N_KV * HD, rot);
                for (int h = 0; h < N_HEAD; h++) {
                    const int g = h / (N_HEAD / N_KV);
                    double exact = 0.0, shift = 0.0;
                    for (int c = 0; c < HD; c++) {
                        exact += (double)s.q[p][h * HD + c] * s.k[p][g * HD + c];
                        shift += (double)q[h * HD + c] * sm->bias[g * HD + c];
                    }
                    kk->store(k + g * HD, stored, HD);
                    e[with_q] += pow(kk->dot(q + h * HD, stored, HD) + shift - exact, 2.0);
                    if (!with_q) ref_ss += exact * exact;
                }
            }
            smooth_del(sm);
        }
        if (getenv("ELIZA_TEST_VERBOSE") || !(e[1] < 0.9 * e[0]))
            printf("%s: relative score error %.3g with the queries' weights, %.3g without\n", ez_kv_type_name(t),
                   sqrt(e[1] / ref_ss), sqrt(e[0] / ref_ss));
        CHECK(e[1] < 0.9 * e[0]);
    }
}

/* q' . k' + q' . bias = q . k in each transform's domain, to float
 * rounding; and stored quantized, the smoothed scores are closer to q . k
 * than the same type's without smoothing. */
static void test_kv_smooth_scores_equal_unsmoothed_algebra(void) {
    static stream s;
    static const int types[] = {EZ_KV_F32, EZ_KV_Q8_0, EZ_KV_Q4_0, EZ_KV_TBQ4_0, EZ_KV_TBQ3_0};
    make_stream(&s, 8.0f);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const int t = types[ti], rot = t == EZ_KV_F32 ? 64 : ez_kv_rotation(t, HD, 0);
        const ez_kv_kernels *kk = ez_kv_kernels_ref(t);
        ez_kv_smooth *sm = smooth_new(rot);
        uint8_t stored[HD * 4], plain[HD * 4];
        double e_smooth = 0.0, e_plain = 0.0, e_exact = 0.0, ref_ss = 0.0;
        ez_kv_smooth_fit(sm, &s.k[0][0], NULL, 32, N_HEAD);
        for (int p = 32; p < N_POS; p++) {
            float q[N_HEAD * HD], k[N_KV * HD], qp[N_HEAD * HD], kp[N_KV * HD];
            memcpy(q, s.q[p], sizeof q);
            memcpy(k, s.k[p], sizeof k);
            memcpy(qp, q, sizeof q);
            memcpy(kp, k, sizeof k);
            ez_kv_smooth_queries(sm, q, 1, N_HEAD);
            ez_kv_smooth_keys(sm, k, 1);
            ez_kv_rotate(q, N_HEAD * HD, rot);
            ez_kv_rotate(k, N_KV * HD, rot);
            ez_kv_rotate(qp, N_HEAD * HD, rot);
            ez_kv_rotate(kp, N_KV * HD, rot);
            for (int h = 0; h < N_HEAD; h++) {
                const int g = h / (N_HEAD / N_KV);
                const float *qh = q + h * HD, *bh = sm->bias + g * HD;
                double exact = 0.0, shift = 0.0, dot = 0.0;
                for (int c = 0; c < HD; c++) {
                    exact += (double)s.q[p][h * HD + c] * s.k[p][g * HD + c];
                    shift += (double)qh[c] * bh[c];
                    dot += (double)qh[c] * k[g * HD + c];
                }
                kk->store(k + g * HD, stored, HD);
                kk->store(kp + g * HD, plain, HD);
                e_exact += (dot + shift - exact) * (dot + shift - exact);
                e_smooth += pow(kk->dot(qh, stored, HD) + shift - exact, 2.0);
                e_plain += pow(kk->dot(qp + h * HD, plain, HD) - exact, 2.0);
                ref_ss += exact * exact;
            }
        }
        e_exact = sqrt(e_exact / ref_ss);
        e_smooth = sqrt(e_smooth / ref_ss);
        e_plain = sqrt(e_plain / ref_ss);
        if (getenv("ELIZA_TEST_VERBOSE") || !(e_exact < 1e-6 && (t == EZ_KV_F32 || e_smooth < 0.8 * e_plain)))
            printf("%s: relative score error %.3g smoothed (algebra %.3g), %.3g plain\n", ez_kv_type_name(t), e_smooth,
                   e_exact, e_plain);
        CHECK(e_exact < 1e-6);
        if (t == EZ_KV_F32) CHECK(e_smooth < 1e-6);
        else CHECK(e_smooth < 0.8 * e_plain);
        smooth_del(sm);
    }
}

/* ---- attention through the CPU backend ---------------------------------------------- */

enum { N_CACHES = 6 };
/* 0: F32 plain (the reference), 1: F32 smoothed, 2/3: Q8_0 plain / smoothed, 4/5: TBQ3_0 */
static const int k_types[N_CACHES] = {EZ_KV_F32, EZ_KV_F32, EZ_KV_Q8_0, EZ_KV_Q8_0, EZ_KV_TBQ3_0, EZ_KV_TBQ3_0};

typedef struct {
    ez_kv_cache *kv[N_CACHES];
    ez_llm_backend *be[N_CACHES];
    double err[N_CACHES];  /* sum of squared output errors against cache 0 */
    double ref_ss, exact;  /* sum of squares of cache 0's outputs; largest |F32 smoothed - cache 0| */
} rig;

/* Layer 0 global, layer 1 a ring of N_SWA + N_BATCH rows, layer 2 aliasing layer 1. */
static int rig_make(rig *r, ez_pool *pool, float softcap) {
    ez_llm_hparams hp;
    memset(r, 0, sizeof *r);
    memset(&hp, 0, sizeof hp);
    hp.n_head = N_HEAD;
    hp.n_head_kv = N_KV;
    hp.head_dim = hp.head_dim_v = HD;
    hp.attn_scale = 0.125f;
    hp.attn_softcap = softcap;
    for (int i = 0; i < N_CACHES; i++) {
        ez_kv_layer_spec sp[3];
        memset(sp, 0, sizeof sp);
        for (int il = 0; il < 3; il++) {
            sp[il].type_k = k_types[i];
            sp[il].type_v = EZ_KV_F32;
            sp[il].n_head_kv = N_KV;
            sp[il].head_dim_k = sp[il].head_dim_v = HD;
            sp[il].n_swa = il > 0 ? N_SWA : 0;
            sp[il].alias = il == 2 ? 1 : -1;
            sp[il].smooth_k = i % 2;
        }
        CHECK_RC(ez_kv_cache_create(sp, 3, N_CTX, N_BATCH, &r->kv[i]), ELIZA_OK);
        if (!r->kv[i]) return 0;
        CHECK_RC(ez_llm_backend_cpu_create(pool, &hp, r->kv[i], &r->be[i]), ELIZA_OK);
        if (!r->be[i]) return 0;
    }
    CHECK(!r->kv[0]->layers[0].smooth && r->kv[1]->layers[0].smooth && r->kv[1]->layers[1].smooth);
    CHECK(r->kv[1]->layers[2].smooth == r->kv[1]->layers[1].smooth);
    return 1;
}

static void rig_free(rig *r) {
    for (int i = 0; i < N_CACHES; i++) {
        if (r->be[i]) r->be[i]->ops->free(r->be[i]);
        ez_kv_cache_free(r->kv[i]);
    }
}

/* Positions n_pos .. n_pos + n - 1 of every cache take rows from .. of st;
 * each layer's output is compared with cache 0's. */
static void rig_eval(rig *r, const stream *st, int from, int32_t n) {
    static float q[N_BATCH][N_HEAD * HD], k[N_BATCH][N_KV * HD], v[N_BATCH][N_KV * HD];
    static float out[N_CACHES][N_BATCH * N_HEAD * HD];
    const size_t nq = sizeof(float) * (size_t)n * N_HEAD * HD, nk = sizeof(float) * (size_t)n * N_KV * HD;
    for (int i = 0; i < N_CACHES; i++) ez_kv_cache_begin(r->kv[i], n);
    for (int il = 0; il < 3; il++) {
        for (int i = 0; i < N_CACHES; i++) {
            memcpy(q, st->q[from], nq);
            memcpy(k, st->k[from], nk);
            memcpy(v, st->v[from], nk);
            r->be[i]->ops->attention(r->be[i], r->kv[i], il, &q[0][0], il == 2 ? NULL : &k[0][0], &v[0][0], out[i], n,
                                     r->kv[i]->n_pos);
        }
        for (int64_t j = 0; j < (int64_t)n * N_HEAD * HD; j++) {
            r->ref_ss += (double)out[0][j] * out[0][j];
            r->exact = fmax(r->exact, fabs((double)out[1][j] - out[0][j]));
            for (int i = 1; i < N_CACHES; i++) r->err[i] += pow((double)out[i][j] - out[0][j], 2.0);
        }
    }
    for (int i = 0; i < N_CACHES; i++) ez_kv_cache_commit(r->kv[i], n);
}

static int same_smoothing(const ez_kv_smooth *a, const float *saved) {
    return a->ready && memcmp(a->mean, saved, 3 * N_KV * HD * sizeof(float)) == 0;
}

static void test_kv_smooth_attention_matches_unsmoothed(void) {
    static stream s1, s2;
    static float saved[3 * N_KV * HD];
    ez_pool *pool = ez_pool_create(2);
    make_stream(&s1, 8.0f);
    make_stream(&s2, 3.0f);
    for (int cap = 0; cap < 2; cap++) {
        ez_kv_snapshot *snap[N_CACHES] = {NULL};
        rig r;
        ez_kv_smooth *sm;
        if (!rig_make(&r, pool, cap ? 5.0f : 0.0f)) {
            rig_free(&r);
            continue;
        }
        sm = r.kv[1]->layers[1].smooth;
        CHECK(!sm->ready);
        rig_eval(&r, &s1, 0, 24);          /* the prompt: fits m and s */
        CHECK(sm->ready);
        memcpy(saved, sm->mean, sizeof saved);
        rig_eval(&r, &s1, 24, N_BATCH);    /* blocked attention; the ring (47 rows) wraps */
        for (int p = 64; p < 80; p++) rig_eval(&r, &s1, p, 1); /* decoding, split */
        for (int i = 0; i < N_CACHES; i++) CHECK_RC(ez_kv_cache_rewind(r.kv[i], 5), ELIZA_OK);
        rig_eval(&r, &s2, 40, 3);          /* other tokens at 75 .. 77 */
        CHECK(same_smoothing(sm, saved));  /* rewinding and the ring kept them */
        for (int i = 0; i < N_CACHES; i++) CHECK_RC(ez_kv_snapshot_take(r.kv[i], EZ_KV_SNAP_FULL, &snap[i]), ELIZA_OK);
        /* a clear refits from the next batch: another stream, another m */
        for (int i = 0; i < N_CACHES; i++) ez_kv_cache_clear(r.kv[i]);
        CHECK(!sm->ready);
        rig_eval(&r, &s2, 0, 10);
        CHECK(sm->ready && memcmp(sm->mean, saved, sizeof saved) != 0);
        for (int p = 10; p < 20; p++) rig_eval(&r, &s2, p, 1);
        /* the snapshots bring back the rows and the smoothing of before the
         * clear: decoding on from there still matches the plain cache */
        for (int i = 0; i < N_CACHES; i++)
            if (snap[i]) CHECK_RC(ez_kv_snapshot_restore(r.kv[i], snap[i]), ELIZA_OK);
        CHECK(same_smoothing(sm, saved) && r.kv[1]->n_pos == 78);
        for (int p = 78; p < 86; p++) rig_eval(&r, &s1, p, 1);
        for (int i = 0; i < N_CACHES; i++) ez_kv_snapshot_free(snap[i]);
        if (getenv("ELIZA_TEST_VERBOSE") || !(r.exact < 1e-4))
            printf("soft-cap %d: F32 smoothed against plain, largest difference %.3g\n", cap, r.exact);
        CHECK(r.exact < 1e-4);
        for (int i = 2; i < N_CACHES; i += 2) {
            const double plain = sqrt(r.err[i] / r.ref_ss), smooth = sqrt(r.err[i + 1] / r.ref_ss);
            if (getenv("ELIZA_TEST_VERBOSE") || !(smooth < 0.8 * plain))
                printf("soft-cap %d, %s keys: relative output error %.3g smoothed, %.3g plain\n", cap,
                       ez_kv_type_name(k_types[i]), smooth, plain);
            CHECK(smooth < 0.8 * plain);
        }
        rig_free(&r);
    }
    ez_pool_destroy(pool);
}

int main(void) {
    test_kv_smooth_fit();
    test_kv_smooth_query_weights_cut_score_error();
    test_kv_smooth_scores_equal_unsmoothed_algebra();
    test_kv_smooth_attention_matches_unsmoothed();
    printf("test_llm_kv_smooth: %d passed, %d failed\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
}
