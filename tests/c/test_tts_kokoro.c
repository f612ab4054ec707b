/* The Kokoro engine (libeliza/tts/kokoro*.c) on the tiny random model of
 * tests/data/kokoro_tiny.gguf: every stage against kokoro 0.9.4's KModel
 * (tests/data/kokoro_tiny_golden.gguf, written by
 * tests/tts/make_kokoro_engine_golden.py), malformed files refused with
 * ELIZA_E_FORMAT (missing tensor, wrong shape, gate order, architecture,
 * hyperparameters, non-finite weights) and random corruption survived,
 * argument checks, cancel, noise and seeds. Runs under -DELIZA_SANITIZE=ON.
 *
 * Tool modes (tests/tts/test_kokoro_engine.py drives them):
 *   test_tts_kokoro stages MODEL IN OUT   one forward; IN/OUT formats below
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/gguf.h"
#include "core/pool.h"
#include "core/quant.h"
#include "eliza.h"
#include "tts/kokoro.h"
#include "tts/kokoro_impl.h"
#include "check.h"

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "test: out of memory\n");
        exit(2);
    }
    return p;
}

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    uint8_t *p;
    long len;
    if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
        fprintf(stderr, "test: cannot read %s\n", path);
        exit(2);
    }
    p = xmalloc((size_t)len);
    if (fread(p, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "test: short read of %s\n", path);
        exit(2);
    }
    fclose(f);
    *n = (size_t)len;
    return p;
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        fprintf(stderr, "test: cannot write %s\n", path);
        exit(2);
    }
    fclose(f);
}

/* tests/data/<name>, found from this file's path. */
static void data_path(char *out, size_t size, const char *name) {
    const char *file = __FILE__, *slash = strrchr(file, '/');
    int dir = slash ? (int)(slash - file) : 0;
    snprintf(out, size, "%.*s/../data/%s", dir, file, name);
}

static const char *k_tmp = "test_tts_kokoro_tmp.gguf";
static char g_model[1024], g_golden[1024];

/* ---- stage comparison against the golden ---------------------------------------------- */

typedef struct {
    double max_err, max_ref, corr;
} diff;

static diff compare(const float *got, const float *want, int64_t n) {
    diff d = {0, 0, 0};
    double sg = 0, sw = 0, sgg = 0, sww = 0, sgw = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (e > d.max_err || e != e) d.max_err = e;
        if (fabs(want[i]) > d.max_ref) d.max_ref = fabs(want[i]);
        sg += got[i], sw += want[i], sgg += (double)got[i] * got[i], sww += (double)want[i] * want[i];
        sgw += (double)got[i] * want[i];
    }
    {
        double cov = sgw - sg * sw / n, vg = sgg - sg * sg / n, vw = sww - sw * sw / n;
        d.corr = vg > 0 && vw > 0 ? cov / sqrt(vg * vw) : (vg == vw ? 1.0 : 0.0);
    }
    return d;
}

static const ez_kokoro_stage *find_stage(const ez_kokoro_trace *t, const char *name) {
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->stage[i].name, name) == 0) return &t->stage[i];
    return NULL;
}

/* Audio correlation bounds on the random tiny model, whose generator is
 * badly conditioned. (1) F0's last-bit differences (float32 sums in another
 * order) become phase differences of the harmonic source: KModel itself,
 * its F0 scaled by 1 + 2^-23, correlates 0.935 to 0.961 with its own output
 * on these cases; the engine reaches 0.968 to 0.981. (2) Fed KModel's F0 and
 * N curves, the source is exact (6e-8), but an STFT bin whose magnitude is
 * at float32 rounding level has an arbitrary phase (MKL's rounding in the
 * reference, a double DFT here), and the untrained noise_convs pass those
 * phases on: 0.9972 to 0.9984. The trained model is far better conditioned:
 * 0.9997 on real speech (tests/tts/test_kokoro_engine.py).
 * The golden was made with glibc's libm; another libm (mingw-w64's under
 * wine) rounds tanhf/expf/atan2 differently in the last bit, and this random
 * model turns that into audio correlation 0.90-0.93 while every stage up to
 * the harmonic source still matches. There the audio is reported, not
 * checked. */
#define AUDIO_CORR 0.95
#define AUDIO_CORR_INJECTED 0.995
#if defined(__GLIBC__)
#define AUDIO_CHECKED 1
#else
#define AUDIO_CHECKED 0
#endif

static void test_golden(ez_kokoro *m, ez_pool *pool, int inject) {
    ez_gguf *g;
    uint32_t n_cases = 0;
    int verbose = getenv("ELIZA_TEST_VERBOSE") != NULL;
    CHECK_RC(ez_gguf_open(g_golden, &g), ELIZA_OK);
    if (!g) return;
    CHECK_RC(ez_gguf_get_u32(g, "golden.n_cases", &n_cases), ELIZA_OK);
    CHECK(n_cases >= 1);
    for (uint32_t ci = 0; ci < n_cases; ci++) {
        char key[96];
        const ez_gguf_tensor *tid, *tst;
        float *style = NULL, *f0_in = NULL, *n_in = NULL, *pcm = NULL, speed = 1.0f, row[EZ_KOKORO_STYLE_DIM];
        int32_t *ids;
        size_t n_pcm = 0;
        ez_kokoro_trace trace = {0};
        int n_checked = 0;

        snprintf(key, sizeof key, "case%u.ids", ci);
        tid = ez_gguf_find_tensor(g, key);
        snprintf(key, sizeof key, "case%u.style", ci);
        tst = ez_gguf_find_tensor(g, key);
        snprintf(key, sizeof key, "golden.case%u.speed", ci);
        CHECK(tid && tst && tid->type == 26 /* I32 */ && tst->n_elements == EZ_KOKORO_STYLE_DIM);
        CHECK_RC(ez_gguf_get_f32(g, key, &speed), ELIZA_OK);
        if (!tid || !tst) break;
        ids = xmalloc(tid->n_elements * sizeof *ids);
        memcpy(ids, tid->data, tid->n_elements * sizeof *ids);
        CHECK_RC(ez_gguf_tensor_f32(tst, &style), ELIZA_OK);
        /* the golden's ids carry KModel's pad ids; the engine adds them itself */
        if (inject) {
            snprintf(key, sizeof key, "case%u.F0_pred", ci);
            CHECK_RC(ez_gguf_tensor_f32(ez_gguf_find_tensor(g, key), &f0_in), ELIZA_OK);
            snprintf(key, sizeof key, "case%u.N_pred", ci);
            CHECK_RC(ez_gguf_tensor_f32(ez_gguf_find_tensor(g, key), &n_in), ELIZA_OK);
            trace.f0_in = f0_in;
            trace.n_in = n_in;
            trace.n_curve = (int64_t)ez_gguf_find_tensor(g, key)->n_elements;
        }
        CHECK_RC(ez_kokoro_forward_trace(m, pool, ids + 1, (int)tid->n_elements - 2, style, speed, 1, 0, NULL,
                                         &trace, &pcm, &n_pcm),
                 ELIZA_OK);
        /* the style is the voice's row n - 1, as the API layer picks it */
        CHECK(ez_kokoro_voice_style(m, 0, (int)tid->n_elements - 3, row) == 0);
        CHECK(memcmp(style, row, EZ_KOKORO_STYLE_DIM * sizeof(float)) == 0);
        for (uint64_t ti = 0; ti < g->n_tensors; ti++) {
            const ez_gguf_tensor *t = &g->tensors[ti];
            const ez_kokoro_stage *s;
            char prefix[32];
            const char *stage;
            float *want = NULL;
            int64_t n, w0, w1;
            diff d;
            int ok;
            snprintf(prefix, sizeof prefix, "case%u.", ci);
            if (strncmp(t->name, prefix, strlen(prefix)) != 0) continue;
            stage = t->name + strlen(prefix);
            if (!strcmp(stage, "ids") || !strcmp(stage, "style")) continue;
            s = find_stage(&trace, stage);
            if (!s) {
                fprintf(stderr, "case %u: the engine has no stage '%s'\n", ci, stage);
                g_failed = 1;
                continue;
            }
            w0 = t->n_dims == 2 ? (int64_t)t->ne[1] : (int64_t)t->ne[0];
            w1 = t->n_dims == 2 ? (int64_t)t->ne[0] : 0;
            if (s->d0 != w0 || s->d1 != w1) {
                fprintf(stderr, "case %u stage %s: shape [%" PRId64 ", %" PRId64 "], golden [%" PRId64 ", %" PRId64 "]\n",
                        ci, stage, s->d0, s->d1, w0, w1);
                g_failed = 1;
                continue;
            }
            n = w0 * (w1 ? w1 : 1);
            CHECK_RC(ez_gguf_tensor_f32(t, &want), ELIZA_OK);
            if (!want) continue;
            d = compare(s->data, want, n);
            if (!strcmp(stage, "pred_dur"))
                ok = d.max_err == 0.0;
            else if (!strcmp(stage, "har_source"))
                ok = d.corr >= 0.99999 && (!inject || d.max_err <= 2e-4); /* stored as float16 */
            else if (!strcmp(stage, "audio"))
                ok = !AUDIO_CHECKED || d.corr >= (inject ? AUDIO_CORR_INJECTED : AUDIO_CORR);
            else
                ok = d.max_err <= 1e-4 * (d.max_ref > 1.0 ? d.max_ref : 1.0);
            if (!ok || verbose)
                fprintf(stderr, "case %u%s %-11s max |err| %.3g (max |ref| %.3g, relative %.3g) corr %.7f%s\n", ci,
                        inject ? " (F0/N injected)" : "", stage,
                        d.max_err, d.max_ref, d.max_err / (d.max_ref > 0 ? d.max_ref : 1), d.corr, ok ? "" : "  FAIL");
            if (!ok) g_failed = 1;
            n_checked++;
            free(want);
        }
        CHECK(n_checked >= 12);
        CHECK(n_pcm > 0 && find_stage(&trace, "audio") && (int64_t)n_pcm == find_stage(&trace, "audio")->d0);
        ez_kokoro_trace_free(&trace);
        free(pcm);
        free(style);
        free(ids);
        free(f0_in);
        free(n_in);
    }
    ez_gguf_close(g);
}

/* ---- malformed files ---------------------------------------------------------------------- */

/* The position of `needle` in buf, or -1. */
static int64_t find_bytes(const uint8_t *buf, size_t n, const void *needle, size_t len) {
    for (size_t i = 0; i + len <= n; i++)
        if (memcmp(buf + i, needle, len) == 0) return (int64_t)i;
    return -1;
}

/* The tensor-info record of `name`: points past the name (at n_dims). */
static uint8_t *tensor_info(uint8_t *buf, size_t n, const char *name) {
    size_t len = strlen(name);
    uint8_t rec[128];
    uint64_t l = len;
    int64_t at;
    memcpy(rec, &l, 8);
    memcpy(rec + 8, name, len);
    at = find_bytes(buf, n, rec, len + 8);
    return at < 0 ? NULL : buf + at + 8 + len;
}

static void expect_load_error(const uint8_t *img, size_t n, int32_t want, const char *what, const char *needle) {
    ez_kokoro *m = NULL;
    int32_t rc;
    write_file(k_tmp, img, n);
    rc = ez_kokoro_load(k_tmp, &m);
    if (rc != want || m || (needle && !strstr(ez_error_message(), needle))) {
        fprintf(stderr, "%s: load returned %d (want %d), message '%s' (want '%s')\n", what, rc, want,
                ez_error_message(), needle ? needle : "");
        g_failed = 1;
    } else if (getenv("ELIZA_TEST_VERBOSE")) {
        fprintf(stderr, "%s: %s\n", what, ez_error_message());
    }
    ez_kokoro_free(m);
}

static void test_malformed(void) {
    size_t n;
    uint8_t *orig = read_file(g_model, &n), *img = xmalloc(n), *p;
    int64_t at;

    /* a missing tensor: its name changed by one letter */
    memcpy(img, orig, n);
    p = tensor_info(img, n, "decoder.generator.conv_post.weight");
    CHECK(p != NULL);
    if (p) p[-1] = 'x';
    expect_load_error(img, n, ELIZA_E_FORMAT, "missing tensor", "'decoder.generator.conv_post.weight' is missing");

    /* a wrong shape: [8, 16] stored as [16, 8] (same element count) */
    memcpy(img, orig, n);
    p = tensor_info(img, n, "predictor.duration_proj.linear_layer.weight");
    CHECK(p != NULL);
    if (p) {
        uint64_t ne[2];
        memcpy(ne, p + 4, 16);
        CHECK(ne[0] == 16 && ne[1] == 8);
        ne[0] = 8, ne[1] = 16;
        memcpy(p + 4, ne, 16);
    }
    expect_load_error(img, n, ELIZA_E_FORMAT, "wrong shape",
                      "'predictor.duration_proj.linear_layer.weight' has shape [16, 8] where the hyperparameters give [8, 16]");

    /* another gate order */
    memcpy(img, orig, n);
    at = find_bytes(img, n, "ifgo", 4);
    CHECK(at >= 0);
    if (at >= 0) memcpy(img + at, "iofc", 4);
    expect_load_error(img, n, ELIZA_E_FORMAT, "gate order", "gate order 'iofc'");

    /* another architecture */
    memcpy(img, orig, n);
    at = find_bytes(img, n, "general.architecture", 20);
    CHECK(at >= 0);
    if (at >= 0) memcpy(img + at + 20 + 4 + 8, "kokorx", 6); /* key, value type, length, value */
    expect_load_error(img, n, ELIZA_E_FORMAT, "architecture", "'kokorx' is not a Kokoro model");

    /* a hyperparameter key missing */
    memcpy(img, orig, n);
    at = find_bytes(img, n, "kokoro.max_dur", 14);
    CHECK(at >= 0);
    if (at >= 0) img[at + 13] = 'x';
    expect_load_error(img, n, ELIZA_E_FORMAT, "missing key", "'kokoro.max_dur' is missing");

    /* a generator key missing (an array) */
    memcpy(img, orig, n);
    at = find_bytes(img, n, "kokoro.istftnet.resblock_kernel_sizes", 37);
    CHECK(at >= 0);
    if (at >= 0) img[at + 36] = 'x';
    expect_load_error(img, n, ELIZA_E_FORMAT, "missing generator key",
                      "'kokoro.istftnet.resblock_kernel_sizes' is missing");

    /* a hyperparameter that disagrees with the tensors */
    memcpy(img, orig, n);
    at = find_bytes(img, n, "kokoro.max_dur", 14);
    CHECK(at >= 0);
    if (at >= 0) {
        uint32_t v;
        memcpy(&v, img + at + 14 + 4, 4);
        CHECK(v == 8);
        v = 9;
        memcpy(img + at + 14 + 4, &v, 4);
    }
    expect_load_error(img, n, ELIZA_E_FORMAT, "max_dur 9", "where the hyperparameters give [9, 16]");

    /* a NaN weight (an F32 bias) */
    memcpy(img, orig, n);
    {
        ez_gguf *g;
        const ez_gguf_tensor *t;
        CHECK_RC(ez_gguf_open_memory(orig, n, &g), ELIZA_OK);
        t = g ? ez_gguf_find_tensor(g, "decoder.asr_res.0.bias") : NULL;
        CHECK(t && t->type == 0);
        if (t) {
            float nan = NAN;
            memcpy(img + (t->data - orig), &nan, 4);
        }
        ez_gguf_close(g);
    }
    expect_load_error(img, n, ELIZA_E_FORMAT, "NaN weight", "'decoder.asr_res.0.bias' holds a non-finite value");

    /* truncated */
    expect_load_error(orig, n / 2, ELIZA_E_FORMAT, "truncated", NULL);
    expect_load_error(orig, 100, ELIZA_E_FORMAT, "header only", NULL);

    /* random corruption of the metadata and tensor infos: an error or a
     * model, never a crash (ASan/UBSan builds check the rest) */
    {
        uint64_t state = 12345;
        int n_ok = 0, n_err = 0;
        size_t head = (size_t)(tensor_info(orig, n, "voice.tiny_a") - orig) + 64;
        for (int it = 0; it < 60; it++) {
            ez_kokoro *m = NULL;
            int32_t rc;
            memcpy(img, orig, n);
            for (int f = 0; f < 4; f++) {
                state = state * 6364136223846793005ull + 1442695040888963407ull;
                img[(state >> 33) % head] ^= (uint8_t)(1u << ((state >> 20) & 7));
            }
            write_file(k_tmp, img, n);
            rc = ez_kokoro_load(k_tmp, &m);
            CHECK((rc == ELIZA_OK) == (m != NULL));
            CHECK(rc == ELIZA_OK || rc == ELIZA_E_FORMAT || rc == ELIZA_E_UNSUPPORTED || rc == ELIZA_E_NOMEM);
            if (rc == ELIZA_OK) n_ok++;
            else n_err++;
            ez_kokoro_free(m);
        }
        CHECK(n_err > 0);
        (void)n_ok;
    }
    remove(k_tmp);
    free(orig);
    free(img);
}

/* ---- forward contract --------------------------------------------------------------------- */

static double corr(const float *a, const float *b, size_t n) { return compare(a, b, (int64_t)n).corr; }

static void test_forward_contract(ez_kokoro *m, ez_pool *pool) {
    const int32_t ids[6] = {50, 83, 54, 156, 57, 135};
    float style[EZ_KOKORO_STYLE_DIM], bad_style[EZ_KOKORO_STYLE_DIM], *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    size_t na = 0, nb = 0, nc = 0, nd = 0;
    int32_t bad_ids[2] = {50, 178};
    ez_atomic_int cancel;
    ez_kokoro_phase ph[EZ_KOKORO_MAX_PHASES];
    int n_ph;

    ez_atomic_int_store(&cancel, 1);
    CHECK(ez_kokoro_voice_style(m, 0, 5, style) == 0);
    CHECK(ez_kokoro_sample_rate(m) == 24000);
    CHECK(ez_kokoro_voice_count(m) == 1);
    CHECK(ez_kokoro_voice_name(m, 0) && !strcmp(ez_kokoro_voice_name(m, 0), "tiny_a"));
    CHECK(ez_kokoro_voice_name(m, 1) == NULL && ez_kokoro_voice_style(m, -1, 0, bad_style) == -1);
    CHECK(ez_kokoro_voice_style(m, 0, EZ_KOKORO_MAX_PHONEMES, bad_style) == -1);
    CHECK(ez_kokoro_symbol_id(m, "a", 1) == 43);
    CHECK(ez_kokoro_symbol_id(m, "\xc9\x99", 2) == 83); /* ə */
    CHECK(ez_kokoro_symbol_id(m, "\xc9\x99", 1) == -1);
    CHECK(ez_kokoro_symbol_id(m, "\x01", 1) == -1);

    CHECK_RC(ez_kokoro_forward(m, pool, ids, 0, style, 1.0f, 1, 0, NULL, &a, &na), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_kokoro_forward(m, pool, ids, 39, style, 1.0f, 1, 0, NULL, &a, &na), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_kokoro_forward(m, pool, bad_ids, 2, style, 1.0f, 1, 0, NULL, &a, &na), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_kokoro_forward(m, pool, ids, 6, style, 0.0f, 1, 0, NULL, &a, &na), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_kokoro_forward(m, pool, ids, 6, style, NAN, 1, 0, NULL, &a, &na), ELIZA_E_INVALID_ARG);
    memcpy(bad_style, style, sizeof bad_style);
    bad_style[7] = INFINITY;
    CHECK_RC(ez_kokoro_forward(m, pool, ids, 6, bad_style, 1.0f, 1, 0, NULL, &a, &na), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_kokoro_forward(m, pool, ids, 6, style, 1.0f, 1, 0, &cancel, &a, &na), ELIZA_E_CANCELLED);
    CHECK(a == NULL && na == 0);

    /* no noise: deterministic, and the same with or without a pool */
    CHECK_RC(ez_kokoro_forward(m, pool, ids, 6, style, 1.0f, 1, 7, NULL, &a, &na), ELIZA_OK);
    CHECK_RC(ez_kokoro_forward(m, NULL, ids, 6, style, 1.0f, 1, 8, NULL, &b, &nb), ELIZA_OK);
    CHECK(na > 0 && na == nb && na % 300 == 0);
    if (a && b && na == nb) CHECK(corr(a, b, na) > 0.99999);
    n_ph = ez_kokoro_profile(m, ph, EZ_KOKORO_MAX_PHASES);
    CHECK(n_ph == 9 && !strcmp(ph[0].name, "albert") && !strcmp(ph[6].name, "generator.0") &&
          !strcmp(ph[n_ph - 1].name, "istft"));
    for (int i = 0; i < n_ph; i++) CHECK(ph[i].ms >= 0.0);
    /* noise: the same seed repeats, another seed differs, both near the noiseless output */
    CHECK_RC(ez_kokoro_forward(m, pool, ids, 6, style, 1.0f, 0, 42, NULL, &c, &nc), ELIZA_OK);
    CHECK_RC(ez_kokoro_forward(m, pool, ids, 6, style, 1.0f, 0, 42, NULL, &d, &nd), ELIZA_OK);
    CHECK(nc == na && nd == na);
    if (c && d && nc == nd) CHECK(memcmp(c, d, nc * sizeof *c) == 0);
    free(d);
    d = NULL;
    CHECK_RC(ez_kokoro_forward(m, pool, ids, 6, style, 1.0f, 0, 43, NULL, &d, &nd), ELIZA_OK);
    if (c && d && nc == nd) {
        double cn = corr(a, c, na), cs = corr(c, d, nc);
        if (getenv("ELIZA_TEST_VERBOSE"))
            fprintf(stderr, "noise: corr(noiseless, seed 42) %.4f, corr(seed 42, seed 43) %.4f\n", cn, cs);
        CHECK(memcmp(c, d, nc * sizeof *c) != 0);
        CHECK(cn > 0.5 && cn < 0.999999);
    }
    /* faster speech is shorter */
    free(b);
    b = NULL;
    CHECK_RC(ez_kokoro_forward(m, pool, ids, 6, style, 2.0f, 1, 0, NULL, &b, &nb), ELIZA_OK);
    CHECK(nb > 0 && nb < na);
    free(a), free(b), free(c), free(d);
}

/* ---- weights in place ---------------------------------------------------------------------- */

/* Float32 and float16 weights are the file's own bytes behind the mapping;
 * only tensors of other types (Q8_0 in the tiny model) get a float32 copy,
 * besides what is laid out at open: each LSTM direction's w_hh in step
 * panels, and the direct-path convolutions' float16 weights as GEMM panels
 * (the same values). */
static void test_weights_read_in_place(const ez_kokoro *m) {
    const ez_gguf *g = m->file;
    const ez_gguf_tensor *t;
    const ez_kokoro_tensor *views[3] = {&m->w.word_emb, &m->w.te_lstm.w_hh[1], &m->voices[0]};
    const char *names[3] = {"bert.embeddings.word_embeddings.weight", "text_encoder.lstm.weight_hh_l0_reverse",
                            "voice.tiny_a"};
    const ez_kokoro_conv *cv = &m->w.encode.conv1;
    const int mr = ez_tts_panels_mr(), lstm_directions = 2 * (m->hp.n_layer + 3);
    int converted = 0, in_place = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        converted += g->tensors[i].type != EZ_TYPE_F32 && g->tensors[i].type != EZ_TYPE_F16;
    CHECK(converted > 0 && m->n_bufs == converted + lstm_directions);
    CHECK(m->w.te_lstm.hh_panels[0] && m->w.te_lstm.hh_panels[1]);
    CHECK(cv->w.type == EZ_TYPE_F16 && (cv->panels.h != NULL) == (mr > 0));
    if (cv->panels.h) {
        /* panel p, depth k, row i: weight row p mr + i, column k; past c_out zero */
        const int64_t K = (int64_t)cv->c_in * cv->k;
        const uint16_t *w = (const uint16_t *)cv->w.data;
        int same = cv->panels.mr == mr;
        for (int64_t o = 0; same && o < (cv->c_out + mr - 1) / mr * mr; o++)
            for (int64_t k = 0; same && k < K; k++)
                same = cv->panels.h[((o / mr) * K + k) * mr + o % mr] == (o < cv->c_out ? w[o * K + k] : 0);
        CHECK(same);
    }
    for (int i = 0; i < 3; i++) {
        t = ez_gguf_find_tensor(g, names[i]);
        CHECK(t != NULL);
        if (!t || (t->type != EZ_TYPE_F32 && t->type != EZ_TYPE_F16)) continue;
        in_place++;
        CHECK(views[i]->data == (const void *)t->data && views[i]->type == t->type &&
              views[i]->n == (int64_t)t->n_elements);
    }
    CHECK(in_place > 0);
    t = ez_gguf_find_tensor(g, "bert.embeddings.LayerNorm.weight");
    CHECK(t && t->type == EZ_TYPE_F32 && m->w.emb_ln_w == (const float *)(const void *)t->data);
}

/* ---- tool: one forward with its stages ------------------------------------------------------
 * IN:  "KKIN" u32 n, i32 ids[n] (without pad ids), f32 style[256], f32 speed, u32 no_noise,
 *      u64 seed, u32 n_threads, u32 n_curve, then (n_curve > 0) f32 f0[n_curve], f32 n[n_curve]
 *      to use in place of the predicted F0 and N curves (ez_kokoro_trace.f0_in)
 * OUT: "KKST" u32 n_stages, then per stage: u32 name_len, name, i64 d0, i64 d1, f32 data[d0 * max(d1, 1)];
 *      then u32 n_phases, per phase: u32 name_len, name, f64 ms */

static void put(FILE *f, const void *p, size_t n) {
    if (fwrite(p, 1, n, f) != n) {
        fprintf(stderr, "test: write failed\n");
        exit(2);
    }
}

static int tool_stages(const char *model, const char *in, const char *out) {
    size_t n_buf, n_pcm = 0, o = 0;
    uint8_t *buf = read_file(in, &n_buf);
    uint32_t n, no_noise, n_threads, n_curve, u;
    uint64_t seed;
    float speed, style[EZ_KOKORO_STYLE_DIM], *pcm = NULL, *f0_in = NULL, *n_in = NULL;
    int32_t *ids, rc;
    ez_kokoro *m = NULL;
    ez_kokoro_trace trace = {0};
    ez_kokoro_phase ph[EZ_KOKORO_MAX_PHASES];
    ez_pool *pool;
    FILE *f;
    int n_ph;

#define TAKE(dst, len)                                           \
    do {                                                         \
        if (o + (len) > n_buf) {                                  \
            fprintf(stderr, "stages: input %s is short\n", in); \
            return 2;                                            \
        }                                                        \
        memcpy((dst), buf + o, (len));                           \
        o += (len);                                              \
    } while (0)
    if (n_buf < 4 || memcmp(buf, "KKIN", 4)) {
        fprintf(stderr, "stages: %s is not a KKIN file\n", in);
        return 2;
    }
    o = 4;
    TAKE(&n, 4);
    if (n > 100000) return 2;
    ids = xmalloc(n * sizeof *ids);
    TAKE(ids, n * sizeof *ids);
    TAKE(style, sizeof style);
    TAKE(&speed, 4);
    TAKE(&no_noise, 4);
    TAKE(&seed, 8);
    TAKE(&n_threads, 4);
    TAKE(&n_curve, 4);
    if (n_curve) {
        if (n_curve > 10000000) return 2;
        f0_in = xmalloc(n_curve * sizeof *f0_in);
        n_in = xmalloc(n_curve * sizeof *n_in);
        TAKE(f0_in, n_curve * sizeof *f0_in);
        TAKE(n_in, n_curve * sizeof *n_in);
        trace.f0_in = f0_in;
        trace.n_in = n_in;
        trace.n_curve = n_curve;
    }
#undef TAKE
    if ((rc = ez_kokoro_load(model, &m))) {
        fprintf(stderr, "stages: cannot load %s: %s\n", model, ez_error_message());
        return 1;
    }
    pool = ez_pool_create((int)n_threads);
    rc = ez_kokoro_forward_trace(m, pool, ids, (int)n, style, speed, (int)no_noise, seed, NULL, &trace, &pcm, &n_pcm);
    if (rc) {
        fprintf(stderr, "stages: forward failed (%d): %s\n", rc, ez_error_message());
        return 1;
    }
    n_ph = ez_kokoro_profile(m, ph, EZ_KOKORO_MAX_PHASES);
    if (!(f = fopen(out, "wb"))) return 2;
    put(f, "KKST", 4);
    u = (uint32_t)trace.n;
    put(f, &u, 4);
    for (int i = 0; i < trace.n; i++) {
        const ez_kokoro_stage *s = &trace.stage[i];
        u = (uint32_t)strlen(s->name);
        put(f, &u, 4);
        put(f, s->name, u);
        put(f, &s->d0, 8);
        put(f, &s->d1, 8);
        put(f, s->data, (size_t)(s->d0 * (s->d1 ? s->d1 : 1)) * sizeof(float));
    }
    u = (uint32_t)n_ph;
    put(f, &u, 4);
    for (int i = 0; i < n_ph; i++) {
        u = (uint32_t)strlen(ph[i].name);
        put(f, &u, 4);
        put(f, ph[i].name, u);
        put(f, &ph[i].ms, 8);
    }
    fclose(f);
    ez_kokoro_trace_free(&trace);
    free(pcm);
    ez_pool_destroy(pool);
    ez_kokoro_free(m);
    free(ids);
    free(f0_in);
    free(n_in);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    ez_kokoro *m = NULL;
    ez_pool *pool;
    if (argc == 5 && strcmp(argv[1], "stages") == 0) return tool_stages(argv[2], argv[3], argv[4]);
    if (argc != 1) {
        fprintf(stderr, "usage: %s [stages MODEL IN OUT]\n", argv[0]);
        return 2;
    }
    data_path(g_model, sizeof g_model, "kokoro_tiny.gguf");
    data_path(g_golden, sizeof g_golden, "kokoro_tiny_golden.gguf");
    CHECK_RC(ez_kokoro_load(g_model, &m), ELIZA_OK);
    if (!m) return 1;
    pool = ez_pool_create(2);
    CHECK(pool != NULL);
    test_golden(m, pool, 0);
    test_golden(m, pool, 1);
    test_forward_contract(m, pool);
    test_weights_read_in_place(m);
    test_malformed();
    CHECK_RC(ez_kokoro_load("/nonexistent/kokoro.gguf", &(ez_kokoro *){NULL}), ELIZA_E_IO);
    ez_pool_destroy(pool);
    ez_kokoro_free(m);
    if (g_failed) {
        fprintf(stderr, "test_tts_kokoro: FAILED\n");
        return 1;
    }
    printf("test_tts_kokoro: ok\n");
    return 0;
}
