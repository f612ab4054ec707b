/* The diarization pipeline without the real models: the resampler
 * (passband, alias rejection, random access, both paths), clustering with
 * cannot-link and a target number, powerset decoding, frame-level
 * reconstruction into turns (and its stages: the sums over windows, each
 * frame's speakers), the run's clustering and speaker stages, and whole runs on synthetic conversations with
 * stand-in models (tones as speakers), including cancel, silence and two
 * hours of audio in bounded memory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__)
#include <sys/resource.h>
#endif

#include "core/atomic.h"
#include "core/error.h"
#include "diar/cluster.h"
#include "diar/identify.h"
#include "diar/pipeline.h"
#include "diar/resample.h"
#include "diar/stream.h"
#include "check.h"

/* Not fmax(): Debian's aarch64 gcc 12 crashes vectorising fmax reductions. */
static inline double max_d(double a, double b) { return a > b ? a : b; }

#define PI 3.14159265358979323846

/* A xorshift64 generator. Each test that draws seeds its own, so that its
 * inputs do not depend on which tests ran before it (one stream shared by
 * the file let a test added earlier change a later test's conversation).
 * The seeds are the states that shared stream had when each test began, so
 * the inputs are those the tests were written against. */
typedef struct {
    uint64_t s; /* nonzero */
} rng;

static double frand(rng *r) { /* uniform in [0, 1) */
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return (double)(r->s >> 11) / 9007199254740992.0;
}
static double grand(rng *r) {
    double u = frand(r) + 1e-12, v = frand(r);
    return sqrt(-2.0 * log(u)) * cos(2 * PI * v);
}

/* ------------------------------------------------------------------------ */
/* Resampler                                                                 */
/* ------------------------------------------------------------------------ */

/* Amplitude of the component at freq (Hz) in x[a..b) at rate sr, by least
 * squares against a sine/cosine pair. */
static double tone_amplitude(const float *x, size_t a, size_t b, double freq, int sr) {
    double ss = 0, sc = 0, cc = 0, xs = 0, xc = 0, det, ps, pc;
    for (size_t i = a; i < b; i++) {
        double s = sin(2 * PI * freq * i / sr), c = cos(2 * PI * freq * i / sr);
        ss += s * s;
        sc += s * c;
        cc += c * c;
        xs += x[i] * s;
        xc += x[i] * c;
    }
    det = ss * cc - sc * sc;
    ps = (xs * cc - xc * sc) / det;
    pc = (xc * ss - xs * sc) / det;
    return sqrt(ps * ps + pc * pc);
}

static double rms(const float *x, size_t a, size_t b) {
    double s = 0;
    for (size_t i = a; i < b; i++) s += (double)x[i] * x[i];
    return sqrt(s / (double)(b - a));
}

/* Resamples one second of a unit tone; returns the output (malloc'ed). */
static float *resample_tone(int in_rate, int out_rate, double freq, int force_general, size_t *n_out) {
    ez_resampler *r = NULL;
    size_t n = (size_t)in_rate;
    float *in = (float *)malloc(sizeof(float) * n), *out;
    for (size_t i = 0; i < n; i++) in[i] = (float)sin(2 * PI * freq * i / in_rate);
    if (ez_resampler_create(in_rate, out_rate, force_general, &r) != ELIZA_OK) {
        free(in);
        return NULL;
    }
    *n_out = (size_t)ez_resampler_out_len(r, n);
    out = (float *)malloc(sizeof(float) * *n_out);
    ez_resampler_run(r, in, n, 0, *n_out, out);
    ez_resampler_free(r);
    free(in);
    return out;
}

static void test_resampler_lengths_and_bad_rates(void) {
    ez_resampler *r = NULL;
    CHECK_MSG(ez_resampler_create(0, 16000, 0, &r) == ELIZA_E_INVALID_ARG && !r, "rate 0 accepted");
    CHECK_MSG(ez_resampler_create(44100, -1, 0, &r) == ELIZA_E_INVALID_ARG && !r, "rate -1 accepted");
    CHECK_MSG(ez_resampler_create(44100, 16000, 0, &r) == ELIZA_OK, "44100 -> 16000 refused");
    CHECK_MSG(ez_resampler_out_len(r, 44100) == 16000, "1 s at 44.1 kHz is %llu samples at 16 kHz",
          (unsigned long long)ez_resampler_out_len(r, 44100));
    CHECK_MSG(ez_resampler_out_len(r, 1) == 1, "one sample gives %llu", (unsigned long long)ez_resampler_out_len(r, 1));
    CHECK_MSG(ez_resampler_out_len(r, 0) == 0, "no samples give %llu", (unsigned long long)ez_resampler_out_len(r, 0));
    CHECK_MSG(ez_resampler_out_len(r, 44101) == 16001, "44101 samples give %llu",
          (unsigned long long)ez_resampler_out_len(r, 44101));
    ez_resampler_free(r);
    CHECK_MSG(ez_resampler_create(8000, 16000, 0, &r) == ELIZA_OK && ez_resampler_out_len(r, 8001) == 16002,
          "8 kHz -> 16 kHz length");
    ez_resampler_free(r);
    ez_resampler_free(NULL);
}

static void test_resampler_identity_and_dc(void) {
    ez_resampler *r = NULL;
    float in[4000], out[4000];
    double err = 0;
    /* Equal rates: a signal inside the passband comes through unchanged. */
    for (int i = 0; i < 4000; i++)
        in[i] = (float)(0.3 * sin(2 * PI * 440.0 * i / 16000) + 0.2 * sin(2 * PI * 3100.0 * i / 16000 + 1.0) +
                        0.1 * sin(2 * PI * 5700.0 * i / 16000 + 2.0));
    ez_resampler_create(16000, 16000, 0, &r);
    ez_resampler_run(r, in, 4000, 0, 4000, out);
    for (int i = 100; i < 3900; i++) err = max_d(err, fabs(out[i] - in[i]));
    CHECK_MSG(err < 2e-3, "16 kHz -> 16 kHz changes a passband signal by %g", err);
    ez_resampler_free(r);

    for (int i = 0; i < 4000; i++) in[i] = 0.5f;
    ez_resampler_create(48000, 16000, 0, &r);
    ez_resampler_run(r, in, 4000, 0, 1333, out);
    err = 0;
    for (int i = 100; i < 1233; i++) err = max_d(err, fabs(out[i] - 0.5));
    CHECK_MSG(err < 1e-6, "48 kHz -> 16 kHz changes DC by %g", err);
    ez_resampler_free(r);
}

static void test_resampler_passband_and_alias_rejection(void) {
    static const int rates[] = {48000, 44100, 22050, 96000, 192000, 44099, 8000, 11025};
    for (size_t ri = 0; ri < sizeof rates / sizeof *rates; ri++) {
        int in_rate = rates[ri];
        size_t n = 0;
        const size_t a = 2000, b = 14000; /* away from the zero-padded edges */
        /* Passband: 1 kHz and 6 kHz (below the input's Nyquist) keep their amplitude. */
        static const double pass[] = {1000.0, 3000.0, 6000.0};
        for (int fi = 0; fi < 3; fi++) {
            float *y;
            double amp;
            if (pass[fi] >= 0.45 * in_rate) continue;
            y = resample_tone(in_rate, 16000, pass[fi], 0, &n);
            amp = tone_amplitude(y, a, b, pass[fi], 16000);
            CHECK_MSG(fabs(20 * log10(amp)) < 0.05, "%d Hz -> 16 kHz: a %g Hz tone comes out at %+.3f dB", in_rate,
                  pass[fi], 20 * log10(amp));
            free(y);
        }
        /* Stopband: tones above 8 kHz must not alias into the output. */
        if (in_rate > 16000) {
            static const double stop[] = {8700.0, 9000.0, 12000.0, 15000.0};
            for (int fi = 0; fi < 4; fi++) {
                float *y;
                double level;
                if (stop[fi] >= 0.5 * in_rate) continue;
                y = resample_tone(in_rate, 16000, stop[fi], 0, &n);
                level = 20 * log10(rms(y, a, b) * sqrt(2.0) + 1e-12);
                CHECK_MSG(level < -70.0, "%d Hz -> 16 kHz: a %g Hz tone aliases at %.1f dB", in_rate, stop[fi], level);
                free(y);
            }
        } else {
            /* Upsampling: a 1 kHz tone comes out as the ideal tone (no images). */
            float *y = resample_tone(in_rate, 16000, 1000.0, 0, &n);
            double err = 0;
            for (size_t i = a; i < b; i++) err = max_d(err, fabs(y[i] - sin(2 * PI * 1000.0 * i / 16000)));
            CHECK_MSG(err < 2e-3, "%d Hz -> 16 kHz: 1 kHz tone off by %g", in_rate, err);
            free(y);
        }
    }
}

static void test_resampler_polyphase_matches_general_and_random_access(void) {
    static const int rates[] = {44100, 48000, 8000, 22050};
    rng r = {0x9e3779b97f4a7c15ull};
    for (size_t ri = 0; ri < sizeof rates / sizeof *rates; ri++) {
        ez_resampler *fast = NULL, *ref = NULL;
        size_t n = (size_t)rates[ri] / 2, m;
        float *in = (float *)malloc(sizeof(float) * n);
        float *y1, *y2, *part;
        double err = 0, err_part = 0;
        for (size_t i = 0; i < n; i++) in[i] = (float)(0.3 * grand(&r));
        ez_resampler_create(rates[ri], 16000, 0, &fast);
        ez_resampler_create(rates[ri], 16000, 1, &ref);
        m = (size_t)ez_resampler_out_len(fast, n);
        y1 = (float *)malloc(sizeof(float) * m);
        y2 = (float *)malloc(sizeof(float) * m);
        part = (float *)malloc(sizeof(float) * m);
        ez_resampler_run(fast, in, n, 0, m, y1);
        ez_resampler_run(ref, in, n, 0, m, y2);
        for (size_t i = 0; i < m; i++) err = max_d(err, fabs(y1[i] - y2[i]));
        CHECK_MSG(err < 1e-4, "%d Hz: polyphase and general paths differ by %g", rates[ri], err);
        /* Any output range equals the same range of the whole conversion. */
        for (size_t o0 = 0; o0 < m; o0 += 777) {
            size_t len = EZ_MIN((size_t)1234, m - o0);
            ez_resampler_run(fast, in, n, o0, len, part);
            for (size_t i = 0; i < len; i++) err_part = max_d(err_part, fabs(part[i] - y1[o0 + i]));
        }
        CHECK_MSG(err_part == 0.0, "%d Hz: a range differs from the whole conversion by %g", rates[ri], err_part);
        ez_resampler_free(fast);
        ez_resampler_free(ref);
        free(in);
        free(y1);
        free(y2);
        free(part);
    }
}

/* ------------------------------------------------------------------------ */
/* Clustering                                                                */
/* ------------------------------------------------------------------------ */

#define DIM 32

static void random_unit(rng *r, float *v) {
    double n = 0;
    for (int j = 0; j < DIM; j++) {
        v[j] = (float)grand(r);
        n += (double)v[j] * v[j];
    }
    for (int j = 0; j < DIM; j++) v[j] = (float)(v[j] / sqrt(n));
}

/* x = centre + noise * gaussian, renormalised. */
static void around(rng *r, const float *centre, double noise, float *x) {
    double n = 0;
    for (int j = 0; j < DIM; j++) {
        x[j] = (float)(centre[j] + noise * grand(r));
        n += (double)x[j] * x[j];
    }
    for (int j = 0; j < DIM; j++) x[j] = (float)(x[j] / sqrt(n));
}

static ez_cluster_config cfg_default(void) {
    ez_cluster_config c;
    memset(&c, 0, sizeof c);
    c.threshold = 0.5f;
    c.min_cluster_size = 3;
    return c;
}

static void test_cluster_finds_separated_speakers(void) {
    float centres[3][DIM], x[60 * DIM], *cent = NULL;
    int32_t group[60], labels[60], truth[60];
    int k = 0, consistent = 1;
    ez_cluster_config cfg = cfg_default();
    rng r = {0x51d830301cdd4d0bull};
    for (int c = 0; c < 3; c++) random_unit(&r, centres[c]);
    for (int i = 0; i < 60; i++) {
        truth[i] = i % 3;
        group[i] = i; /* no constraint */
        around(&r, centres[truth[i]], 0.05, x + i * DIM);
    }
    CHECK_MSG(ez_cluster_ahc(x, 60, DIM, group, &cfg, labels, &cent, &k) == ELIZA_OK, "clustering failed");
    CHECK_MSG(k == 3, "found %d clusters of 3", k);
    for (int i = 0; i < 60; i++)
        for (int j = 0; j < 60; j++)
            if ((truth[i] == truth[j]) != (labels[i] == labels[j])) consistent = 0;
    CHECK_MSG(consistent, "the clusters are not the speakers");
    CHECK_MSG(labels[0] == 0 && labels[1] == 1 && labels[2] == 2, "clusters are not numbered by first member");
    free(cent);

    cfg.num_clusters = 2;
    CHECK_MSG(ez_cluster_ahc(x, 60, DIM, group, &cfg, labels, &cent, &k) == ELIZA_OK && k == 2,
          "num_clusters 2 gave %d", k);
    free(cent);
    cfg.num_clusters = 1;
    CHECK_MSG(ez_cluster_ahc(x, 60, DIM, group, &cfg, labels, &cent, &k) == ELIZA_OK && k == 1 && labels[59] == 0,
          "num_clusters 1 gave %d", k);
    free(cent);
    cfg.num_clusters = 0;
    cfg.max_clusters = 2;
    CHECK_MSG(ez_cluster_ahc(x, 60, DIM, group, &cfg, labels, &cent, &k) == ELIZA_OK && k == 2,
          "max_clusters 2 gave %d", k);
    free(cent);
    /* A threshold that merges everything, overruled by min_clusters. */
    cfg.max_clusters = 0;
    cfg.threshold = 1.9f;
    CHECK_MSG(ez_cluster_ahc(x, 60, DIM, group, &cfg, labels, &cent, &k) == ELIZA_OK && k == 1,
          "threshold 1.9 gave %d clusters", k);
    free(cent);
    cfg.min_clusters = 3;
    CHECK_MSG(ez_cluster_ahc(x, 60, DIM, group, &cfg, labels, &cent, &k) == ELIZA_OK && k == 3,
          "min_clusters 3 gave %d", k);
    free(cent);
    CHECK_MSG(ez_cluster_ahc(x, 0, DIM, group, &cfg, labels, &cent, &k) == ELIZA_OK && k == 0 && !cent,
          "no items gave %d clusters", k);
    CHECK_MSG(ez_cluster_ahc(x, EZ_CLUSTER_MAX_ITEMS + 1, DIM, group, &cfg, labels, &cent, &k) == ELIZA_E_INVALID_ARG,
          "too many items accepted");
}

/* Two tight groups whose centroids are at cosine distance `dist`: how many
 * clusters the threshold leaves. */
static int clusters_at_distance(rng *rg, double dist, float threshold) {
    float a[DIM], r[DIM], b[DIM], x[20 * DIM], *cent = NULL;
    int32_t group[20], labels[20];
    double ra = 0, rn = 0, c = 1.0 - dist, sn = sqrt(1.0 - c * c);
    int k = -1;
    ez_cluster_config cfg = cfg_default();
    cfg.threshold = threshold;
    random_unit(rg, a);
    random_unit(rg, r);
    for (int j = 0; j < DIM; j++) ra += (double)r[j] * a[j];
    for (int j = 0; j < DIM; j++) {
        r[j] = (float)(r[j] - ra * a[j]);
        rn += (double)r[j] * r[j];
    }
    for (int j = 0; j < DIM; j++) b[j] = (float)(c * a[j] + sn * r[j] / sqrt(rn));
    for (int i = 0; i < 20; i++) {
        memcpy(x + i * DIM, i < 10 ? a : b, sizeof a);
        group[i] = i;
    }
    CHECK_MSG(ez_cluster_ahc(x, 20, DIM, group, &cfg, labels, &cent, &k) == ELIZA_OK, "clustering failed");
    free(cent);
    return k;
}

/* Merging stops exactly at the threshold, and the pipeline's default is the
 * tuned 0.5 of docs/diarization.md: groups 5% nearer merge, 5% farther stay
 * apart, so a threshold shifted by 10% either way fails here. */
static void test_cluster_threshold_is_the_cut(void) {
    eliza_diarize_options o;
    float t;
    rng r = {0x3fefa16cb215f52aull};
    eliza_diarize_default_options(&o);
    t = o.threshold;
    CHECK_MSG(clusters_at_distance(&r, 0.95 * 0.5, t) == 1, "groups 5%% inside the default threshold %g stayed apart",
              (double)t);
    CHECK_MSG(clusters_at_distance(&r, 1.05 * 0.5, t) == 2, "groups 5%% outside the default threshold %g merged",
              (double)t);
    CHECK_MSG(clusters_at_distance(&r, 0.95 * 0.3, 0.3f) == 1 && clusters_at_distance(&r, 1.05 * 0.3, 0.3f) == 2,
              "threshold 0.3 is not the cut");
}

static void test_cluster_cannot_link_keeps_window_speakers_apart(void) {
    /* Two close voices (cosine distance ~0.03, far under the threshold) that
     * always speak in the same windows: unconstrained they merge; with one
     * group per window they stay two. */
    float a[DIM], b[DIM], x[40 * DIM], *cent = NULL;
    int32_t group[40], labels[40], free_groups[40];
    int k = 0, apart = 1;
    ez_cluster_config cfg = cfg_default();
    rng r = {0x0aea0283736f7d15ull};
    random_unit(&r, a);
    around(&r, a, 0.04, b);
    for (int i = 0; i < 40; i++) {
        around(&r, i % 2 ? b : a, 0.005, x + i * DIM);
        group[i] = i / 2;
        free_groups[i] = i;
    }
    ez_cluster_ahc(x, 40, DIM, free_groups, &cfg, labels, &cent, &k);
    CHECK_MSG(k == 1, "unconstrained, the close voices gave %d clusters (expected 1)", k);
    free(cent);
    ez_cluster_ahc(x, 40, DIM, group, &cfg, labels, &cent, &k);
    CHECK_MSG(k == 2, "with cannot-link, the close voices gave %d clusters (expected 2)", k);
    for (int i = 0; i < 40; i += 2) apart &= labels[i] != labels[i + 1] && labels[i] >= 0 && labels[i + 1] >= 0;
    CHECK_MSG(apart, "two speakers of one window share a cluster");
    free(cent);
}

static void test_cluster_small_clusters_are_not_speakers(void) {
    float a[DIM], b[DIM], outlier[DIM], x[31 * DIM], *cent = NULL;
    int32_t group[31], labels[31];
    int k = 0;
    ez_cluster_config cfg = cfg_default();
    rng r = {0xc9b4e269e5cae2bdull};
    random_unit(&r, a);
    random_unit(&r, b);
    random_unit(&r, outlier);
    for (int i = 0; i < 30; i++) around(&r, i < 15 ? a : b, 0.05, x + i * DIM);
    memcpy(x + 30 * DIM, outlier, sizeof outlier);
    for (int i = 0; i < 31; i++) group[i] = i;
    ez_cluster_ahc(x, 31, DIM, group, &cfg, labels, &cent, &k);
    CHECK_MSG(k == 2, "an outlier made %d clusters (expected 2)", k);
    CHECK_MSG(labels[30] == -1, "the outlier is in cluster %d", labels[30]);
    free(cent);
}

/* Each centroid is the unit-norm sum of its members' unit vectors: the
 * members' own norms do not weigh in, unlabelled items do not count, and an
 * empty cluster is zeros. */
static void test_cluster_centroids_are_unit_mean_directions(void) {
    const float x[4 * 2] = {3, 0, 0, 0.5f, 100, 100, 7, -7};
    const int32_t labels[4] = {0, 0, -1, 1};
    const float want0 = (float)(1.0 / sqrt(2.0));
    float *c = NULL;
    CHECK_MSG(ez_cluster_centroids(x, 4, 2, labels, 3, &c) == ELIZA_OK && c, "centroids failed");
    if (!c) return;
    CHECK_MSG(fabsf(c[0] - want0) < 1e-6f && fabsf(c[1] - want0) < 1e-6f, "cluster 0: %g %g", (double)c[0],
              (double)c[1]);
    CHECK_MSG(fabsf(c[2] - want0) < 1e-6f && fabsf(c[3] + want0) < 1e-6f, "cluster 1: %g %g", (double)c[2],
              (double)c[3]);
    CHECK_MSG(c[4] == 0.0f && c[5] == 0.0f, "the empty cluster is not zeros");
    free(c);
}

static void test_cluster_assign_distinct_within_group(void) {
    float cent[2 * DIM], x[3 * DIM];
    int32_t group[3] = {0, 0, 1}, labels[3];
    rng r = {0x6ddca8057bf4e456ull};
    random_unit(&r, cent);
    random_unit(&r, cent + DIM);
    /* Both items of group 0 are nearest to centroid 0; the closer one keeps it. */
    around(&r, cent, 0.01, x);
    around(&r, cent, 0.2, x + DIM);
    around(&r, cent, 0.2, x + 2 * DIM);
    CHECK_MSG(ez_cluster_assign(x, 3, DIM, group, cent, 2, labels) == ELIZA_OK, "assign failed");
    CHECK_MSG(labels[0] == 0 && labels[1] == 1, "group 0 got clusters %d and %d", labels[0], labels[1]);
    CHECK_MSG(labels[2] == 0, "a lone item did not take its nearest centroid (%d)", labels[2]);
    /* More items than clusters: each takes its nearest. */
    group[2] = 0;
    ez_cluster_assign(x, 3, DIM, group, cent, 2, labels);
    CHECK_MSG(labels[0] == 0 && labels[1] == 0 && labels[2] == 0, "an oversized group was not assigned by nearest");
}

/* ------------------------------------------------------------------------ */
/* Powerset decoding and reconstruction                                      */
/* ------------------------------------------------------------------------ */

/* pyannote segmentation-3.0's powerset: {}, {0}, {1}, {2}, {0,1}, {0,2}, {1,2}. */
static const uint8_t POWERSET[7 * 3] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 1, 0, 1, 0, 1, 1};

static void test_decode_powerset(void) {
    float lp[2 * 7];
    uint8_t cls[2], soft[2 * 3];
    const float p0[7] = {0.05f, 0.1f, 0.05f, 0.0f, 0.6f, 0.1f, 0.1f};
    for (int c = 0; c < 7; c++) {
        lp[c] = logf(p0[c] > 0 ? p0[c] : 1e-30f);
        lp[7 + c] = c == 0 ? 0.0f : -30.0f;
    }
    ez_diar_decode_powerset(lp, 2, 7, 3, POWERSET, cls, soft);
    CHECK_MSG(cls[0] == 4 && cls[1] == 0, "argmax classes %d %d (expected 4 0)", cls[0], cls[1]);
    /* speaker 0: {0} + {0,1} + {0,2} = 0.8; speaker 1: 0.05 + 0.6 + 0.1 = 0.75; speaker 2: 0 + 0.1 + 0.1 = 0.2 */
    CHECK_MSG(abs(soft[0] - 204) <= 1 && abs(soft[1] - 191) <= 1 && abs(soft[2] - 51) <= 1, "soft activity %d %d %d",
          soft[0], soft[1], soft[2]);
    CHECK_MSG(soft[3] == 0 && soft[4] == 0 && soft[5] == 0, "silence has activity");
}

static void test_window_geometry(void) {
    CHECK_MSG(ez_diar_n_windows(1, 160000, 16000) == 1, "1 sample: windows");
    CHECK_MSG(ez_diar_n_windows(160000, 160000, 16000) == 1, "10 s: windows");
    CHECK_MSG(ez_diar_n_windows(160001, 160000, 16000) == 2, "10 s + 1: windows");
    CHECK_MSG(ez_diar_n_windows(480000, 160000, 16000) == 21, "30 s: %lld windows",
          (long long)ez_diar_n_windows(480000, 160000, 16000));
    CHECK_MSG(ez_diar_n_windows(485000, 160000, 16000) == 22, "30.3 s: windows");
    CHECK_MSG(ez_diar_window_frame(1, 16000, 270.0) == 59 && ez_diar_window_frame(3, 16000, 270.0) == 178,
          "window start frames %lld %lld", (long long)ez_diar_window_frame(1, 16000, 270.0),
          (long long)ez_diar_window_frame(3, 16000, 270.0));
}

/* Windows of 20 frames every 5 frames (0.1 s frames): the local speakers of
 * each window are given as powerset classes per frame. */
#define RF 20
#define RSTEP 5

static void set_frames(uint8_t *cls, int w, int f0, int f1, uint8_t c) {
    for (int f = f0; f < f1; f++) cls[w * RF + f] = c;
}

static int g_recon_exclusive;  /* run_recon's exclusive option */

static int32_t run_recon(int n_windows, const uint8_t *cls, const int32_t *cluster, int n_clusters, double min_on,
                         double min_off, eliza_diarize_turn **turns, size_t *n) {
    int64_t start[16];
    uint8_t soft[16 * RF * 3];
    ez_diar_recon r;
    for (int w = 0; w < n_windows; w++) start[w] = (int64_t)w * RSTEP;
    for (int w = 0; w < n_windows; w++)
        for (int f = 0; f < RF; f++)
            for (int s = 0; s < 3; s++) soft[(w * RF + f) * 3 + s] = POWERSET[cls[w * RF + f] * 3 + s] ? 230 : 10;
    memset(&r, 0, sizeof r);
    r.n_windows = n_windows;
    r.start_frame = start;
    r.n_frames = RF;
    r.n_classes = 7;
    r.n_local = 3;
    r.powerset = POWERSET;
    r.cls = cls;
    r.soft = soft;
    r.cluster = cluster;
    r.n_clusters = n_clusters;
    r.frame_step = 0.1;
    r.frame_duration = 0.1;
    r.duration = 100.0;
    r.min_duration_on = min_on;
    r.min_duration_off = min_off;
    r.exclusive = g_recon_exclusive;
    return ez_diar_reconstruct(&r, turns, n);
}

static int near(double a, double b) { return fabs(a - b) < 1e-9; }

static void test_reconstruct_turns_across_permuted_windows(void) {
    /* Frames 0..34 (3 windows). Speaker X speaks frames 2..12, Y frames
     * 15..24, both (overlap) 22..24; local slots differ per window. */
    uint8_t cls[3 * RF];
    int32_t cluster[3 * 3] = {
        1, 0, -1,   /* window 0: slot 0 = Y (cluster 1), slot 1 = X (cluster 0) */
        0, 1, -1,   /* window 1: slot 0 = X, slot 1 = Y */
        -1, 0, 1,   /* window 2: slot 1 = X, slot 2 = Y */
    };
    eliza_diarize_turn *t = NULL;
    size_t n = 0;
    memset(cls, 0, sizeof cls);
    /* window 0 (frames 0..19): X slot 1 -> class 2; Y slot 0 -> class 1; both -> class 4 */
    set_frames(cls, 0, 2, 13, 2);
    set_frames(cls, 0, 15, 20, 1);
    /* window 1 (frames 5..24): X slot 0 -> class 1; Y slot 1 -> class 2 */
    set_frames(cls, 1, 0, 8, 1);
    set_frames(cls, 1, 10, 17, 2);
    set_frames(cls, 1, 17, 20, 4);
    /* window 2 (frames 10..29): X slot 1 -> class 2; Y slot 2 -> class 3; both -> class 6 */
    set_frames(cls, 2, 0, 3, 2);
    set_frames(cls, 2, 5, 12, 3);
    set_frames(cls, 2, 12, 15, 6);
    /* Frames 22..24 hold X too in window 2 (class 6 = {1, 2}): overlap. */
    CHECK_MSG(run_recon(3, cls, cluster, 2, 0, 0, &t, &n) == ELIZA_OK, "reconstruction failed");
    CHECK_MSG(n == 3, "%zu turns (expected 3)", n);
    if (n == 3) {
        /* Timestamps are frame centres: t * 0.1 + 0.05. */
        CHECK_MSG(t[0].speaker == 0 && near(t[0].start, 0.25) && near(t[0].end, 1.35), "turn 0: %d %.3f..%.3f",
              t[0].speaker, t[0].start, t[0].end);
        CHECK_MSG(t[1].speaker == 1 && near(t[1].start, 1.55) && near(t[1].end, 2.55), "turn 1: %d %.3f..%.3f",
              t[1].speaker, t[1].start, t[1].end);
        CHECK_MSG(t[2].speaker == 0 && near(t[2].start, 2.25) && near(t[2].end, 2.55), "turn 2 (overlap): %d %.3f..%.3f",
              t[2].speaker, t[2].start, t[2].end);
        CHECK_MSG(t[0].confidence > 0.5f && t[0].confidence <= 1.0f, "confidence %g", t[0].confidence);
    }
    free(t);

    /* Gaps under min_duration_off close; turns under min_duration_on go. */
    CHECK_MSG(run_recon(3, cls, cluster, 2, 0.5, 1.0, &t, &n) == ELIZA_OK && n == 2, "%zu turns after filling", n);
    if (n == 2) CHECK_MSG(t[0].speaker == 0 && near(t[0].start, 0.25) && near(t[0].end, 2.55), "filled turn %.3f..%.3f",
                      t[0].start, t[0].end);
    free(t);
    CHECK_MSG(run_recon(3, cls, cluster, 2, 1.05, 0, &t, &n) == ELIZA_OK && n == 1, "%zu turns after dropping", n);
    free(t);
}

static void test_reconstruct_count_limits_speakers(void) {
    /* One window says two speakers, two say one: the rounded average keeps
     * only the more active cluster. */
    uint8_t cls[3 * RF];
    int32_t cluster[3 * 3] = {0, 1, -1, 0, 1, -1, 0, 1, -1};
    eliza_diarize_turn *t = NULL;
    size_t n = 0;
    memset(cls, 0, sizeof cls);
    set_frames(cls, 0, 10, 20, 4);  /* frames 10..19: both */
    set_frames(cls, 1, 5, 15, 1);   /* frames 10..19: slot 0 */
    set_frames(cls, 2, 0, 10, 1);   /* frames 10..19: slot 0 */
    run_recon(3, cls, cluster, 2, 0, 0, &t, &n);
    CHECK_MSG(n == 1 && t[0].speaker == 0, "%zu turns, the count of 1.33 was not respected", n);
    free(t);
    /* Nothing assigned: no turns, an empty (freeable) array. */
    memset(cluster, 0xff, sizeof cluster);
    CHECK_MSG(run_recon(3, cls, cluster, 0, 0, 0, &t, &n) == ELIZA_OK && n == 0 && t, "unassigned speakers gave turns");
    free(t);
}

static void test_reconstruct_exclusive_has_one_speaker_at_a_time(void) {
    /* Every window says both speakers over frames 10..19, and speaker 1
     * alone after: overlapping turns, unless exclusive keeps the more
     * active one (cluster 0, also active in 5..9) and hands over after. */
    uint8_t cls[3 * RF];
    int32_t cluster[3 * 3] = {0, 1, -1, 0, 1, -1, 0, 1, -1};
    int32_t speaker_of[2] = {-5, -5};
    eliza_diarize_turn *t = NULL;
    size_t n = 0;
    ez_diar_recon r;
    memset(cls, 0, sizeof cls);
    for (int w = 0; w < 3; w++) {
        int f0 = 10 - RSTEP * w;
        set_frames(cls, w, EZ_MAX(f0 - 5, 0), EZ_MAX(f0, 0), 1);
        set_frames(cls, w, EZ_MAX(f0, 0), f0 + 10, 4);
        set_frames(cls, w, f0 + 10, EZ_MIN(f0 + 15, RF), 2);
    }
    CHECK_MSG(run_recon(3, cls, cluster, 2, 0, 0, &t, &n) == ELIZA_OK && n == 2 && t[0].end > t[1].start,
              "overlap: %zu turns, not two overlapping ones", n);
    free(t);
    g_recon_exclusive = 1;
    CHECK_MSG(run_recon(3, cls, cluster, 2, 0, 0, &t, &n) == ELIZA_OK && n == 2, "exclusive: %zu turns", n);
    g_recon_exclusive = 0;
    for (size_t i = 1; i < n; i++)
        CHECK_MSG(t[i].start >= t[i - 1].end - 1e-9, "exclusive turns %zu and %zu overlap (%.2f > %.2f)", i - 1, i,
                  t[i - 1].end, t[i].start);
    CHECK_MSG(n == 2 && t[0].speaker == 0 && near(t[0].end, 2.05) && t[1].speaker == 1,
              "exclusive: the more active speaker does not hold the overlap (%.2f)", n ? t[0].end : -1.0);
    free(t);
    /* The cluster -> speaker map the run uses for centroids. */
    {
        int32_t cl2[3 * 3] = {1, 0, -1, 1, 0, -1, 1, 0, -1};
        uint8_t soft[3 * RF * 3];
        int64_t start[3] = {0, RSTEP, 2 * RSTEP};
        memset(soft, 128, sizeof soft);
        memset(&r, 0, sizeof r);
        r.n_windows = 3;
        r.start_frame = start;
        r.n_frames = RF;
        r.n_classes = 7;
        r.n_local = 3;
        r.powerset = POWERSET;
        r.cls = cls;
        r.soft = soft;
        r.cluster = cl2;
        r.n_clusters = 2;
        r.frame_step = 0.1;
        r.frame_duration = 0.1;
        r.duration = 100.0;
        r.speaker_of = speaker_of;
        CHECK_MSG(ez_diar_reconstruct(&r, &t, &n) == ELIZA_OK && speaker_of[1] == 0 && speaker_of[0] == 1,
                  "speaker_of %d %d: cluster 1 speaks first", speaker_of[0], speaker_of[1]);
        free(t);
    }
}

/* Two windows of RF frames, the second from frame RSTEP: every frame's
 * cover, speaker count and each cluster's hard and soft sums, by hand. */
static void test_sum_windows_adds_each_clusters_activity(void) {
    uint8_t cls[2 * RF], soft[2 * RF * 3];
    int64_t start[2] = {0, RSTEP};
    int32_t cluster[2 * 3] = {0, 1, -1, 1, -1, 0}; /* window 1: slot 0 is cluster 1, slot 2 cluster 0 */
    ez_diar_frame_sums s;
    ez_diar_recon r;
    memset(cls, 0, sizeof cls);
    memset(soft, 0, sizeof soft);
    set_frames(cls, 0, 0, RF, 4);   /* window 0: slots 0 and 1 (class {1,2}) */
    set_frames(cls, 1, 0, 10, 1);   /* window 1: slot 0, then slot 2 (class {3}) */
    set_frames(cls, 1, 10, RF, 3);
    for (int f = 0; f < RF; f++) {
        soft[(0 * RF + f) * 3 + 0] = 51;  /* 0.2 */
        soft[(0 * RF + f) * 3 + 1] = 102; /* 0.4 */
        soft[(1 * RF + f) * 3 + 0] = 153; /* 0.6 */
        soft[(1 * RF + f) * 3 + 1] = 255; /* no cluster: ignored */
        soft[(1 * RF + f) * 3 + 2] = 204; /* 0.8 */
    }
    memset(&r, 0, sizeof r);
    r.n_windows = 2, r.start_frame = start, r.n_frames = RF, r.n_classes = 7, r.n_local = 3;
    r.powerset = POWERSET, r.cls = cls, r.soft = soft, r.cluster = cluster, r.n_clusters = 2;
    CHECK_RC(ez_diar_sum_windows(&r, &s), ELIZA_OK);
    CHECK_MSG(s.n_frames == RSTEP + RF && s.n_clusters == 2, "%lld frames, %d clusters", (long long)s.n_frames,
              s.n_clusters);
    if (s.n_frames == RSTEP + RF) {
        /* frame 2: window 0 only; 7: both, window 1 on slot 0; 20: window 1 only, slot 2 */
        CHECK_MSG(s.cover[2] == 1 && s.count[2] == 2 && s.hard[2 * 2] == 1 && s.hard[2 * 2 + 1] == 1,
                  "frame 2: cover %d count %d hard %d %d", s.cover[2], s.count[2], s.hard[4], s.hard[5]);
        CHECK_MSG(fabsf(s.soft[2 * 2] - 0.2f) < 1e-6f && fabsf(s.soft[2 * 2 + 1] - 0.4f) < 1e-6f, "frame 2: soft %g %g",
                  (double)s.soft[4], (double)s.soft[5]);
        CHECK_MSG(s.cover[7] == 2 && s.count[7] == 3 && s.hard[7 * 2] == 1 && s.hard[7 * 2 + 1] == 2,
                  "frame 7: cover %d count %d hard %d %d", s.cover[7], s.count[7], s.hard[14], s.hard[15]);
        /* cluster 0 in window 1 is slot 2 (soft 0.8, silent here): 0.2 + 0.8 */
        CHECK_MSG(fabsf(s.soft[7 * 2] - 1.0f) < 1e-6f && fabsf(s.soft[7 * 2 + 1] - 1.0f) < 1e-6f, "frame 7: soft %g %g",
                  (double)s.soft[14], (double)s.soft[15]);
        CHECK_MSG(s.cover[20] == 1 && s.count[20] == 1 && s.hard[20 * 2] == 1 && s.hard[20 * 2 + 1] == 0,
                  "frame 20: cover %d count %d hard %d %d", s.cover[20], s.count[20], s.hard[40], s.hard[41]);
    }
    ez_diar_frame_sums_free(&s);
}

static void test_pick_speakers_most_active_first(void) {
    const uint16_t hard[4] = {2, 1, 0, 1};
    const float soft[4] = {0.5f, 0.3f, 9.0f, 0.9f};
    uint8_t on[4];
    ez_diar_pick_speakers(hard, soft, 4, 1, on);
    CHECK_MSG(on[0] && !on[1] && !on[2] && !on[3], "one: %d %d %d %d", on[0], on[1], on[2], on[3]);
    /* the tie between 1 and 3 goes to the larger soft sum */
    ez_diar_pick_speakers(hard, soft, 4, 2, on);
    CHECK_MSG(on[0] && !on[1] && !on[2] && on[3], "two: %d %d %d %d", on[0], on[1], on[2], on[3]);
    /* cluster 2 is active in no window: never picked, whatever its soft sum */
    ez_diar_pick_speakers(hard, soft, 4, 4, on);
    CHECK_MSG(on[0] && on[1] && !on[2] && on[3], "four: %d %d %d %d", on[0], on[1], on[2], on[3]);
    ez_diar_pick_speakers(hard, soft, 4, 0, on);
    CHECK_MSG(!on[0] && !on[1] && !on[2] && !on[3], "none: %d %d %d %d", on[0], on[1], on[2], on[3]);
}

/* The stages after the frames, each on turns made by hand. */
static int turn_is(const ez_diar_raw_turn *t, int32_t speaker, double start, double end) {
    return t->speaker == speaker && near(t->start, start) && near(t->end, end);
}

static void test_clip_turns_to_the_audio(void) {
    ez_diar_raw_turn v[5] = {{0, -0.5, 1.0, 1, 1}, {1, 2.0, 3.0, 1, 1}, {0, 99.0, 101.0, 1, 1},
                             {1, 100.5, 102.0, 1, 1}, {0, 5.0, 5.0, 1, 1}};
    ez_diar_turns l = {v, 5, 5};
    ez_diar_clip_turns(&l, 100.0);
    CHECK_MSG(l.n == 3, "%zu turns left of 5 (one past the end, one empty)", l.n);
    if (l.n == 3)
        CHECK_MSG(turn_is(&v[0], 0, 0.0, 1.0) && turn_is(&v[1], 1, 2.0, 3.0) && turn_is(&v[2], 0, 99.0, 100.0),
                  "clipped: %g..%g %g..%g %g..%g", v[0].start, v[0].end, v[1].start, v[1].end, v[2].start, v[2].end);
}

/* Speaker 0: 0..1 holds 0.5..0.8; 1.4 starts 0.4 after it (joins), 2.5
 * exactly min_off after 2.0 (stays apart). Speaker 1's 0.2 gap closes. */
static void test_fill_gaps_joins_a_speakers_close_turns(void) {
    ez_diar_raw_turn v[6] = {{1, 5.0, 6.0, 2.0, 2}, {0, 1.4, 2.0, 3.0, 3}, {0, 0.0, 1.0, 1.0, 1},
                             {0, 2.5, 3.0, 1.0, 1}, {1, 6.2, 6.5, 1.0, 1}, {0, 0.5, 0.8, 0.5, 1}};
    ez_diar_turns l = {v, 6, 6};
    ez_diar_fill_gaps(&l, 0.5);
    CHECK_MSG(l.n == 3, "%zu turns after filling (expected 3)", l.n);
    if (l.n == 3) {
        CHECK_MSG(turn_is(&v[0], 0, 0.0, 2.0) && near(v[0].conf_sum, 4.5) && v[0].n_frames == 5,
                  "first: %d %g..%g, %g over %lld frames", v[0].speaker, v[0].start, v[0].end, v[0].conf_sum,
                  (long long)v[0].n_frames);
        CHECK_MSG(turn_is(&v[1], 0, 2.5, 3.0), "second: %d %g..%g", v[1].speaker, v[1].start, v[1].end);
        CHECK_MSG(turn_is(&v[2], 1, 5.0, 6.5) && near(v[2].conf_sum, 3.0) && v[2].n_frames == 3,
                  "third: %d %g..%g, %g over %lld frames", v[2].speaker, v[2].start, v[2].end, v[2].conf_sum,
                  (long long)v[2].n_frames);
    }
}

static void test_drop_short_keeps_long_turns_by_start(void) {
    ez_diar_raw_turn v[4] = {{1, 3.0, 4.0, 1, 1}, {0, 3.0, 3.5, 1, 1}, {2, 1.0, 1.2, 1, 1}, {0, 0.0, 0.5, 1, 1}};
    ez_diar_turns l = {v, 4, 4};
    ez_diar_drop_short(&l, 0.5);
    CHECK_MSG(l.n == 3, "%zu turns left (0.2 s goes, exactly 0.5 s stays)", l.n);
    if (l.n == 3)
        CHECK_MSG(turn_is(&v[0], 0, 0.0, 0.5) && turn_is(&v[1], 0, 3.0, 3.5) && turn_is(&v[2], 1, 3.0, 4.0),
                  "order: %d@%g %d@%g %d@%g", v[0].speaker, v[0].start, v[1].speaker, v[1].start, v[2].speaker,
                  v[2].start);
}

/* Clusters 4, 0 speak in that order (1 and 3 never): 4 is speaker 0, 0 is
 * speaker 1; the tie at 1.0 s then sorts by the new numbers. */
static void test_number_turns_by_first_appearance(void) {
    ez_diar_raw_turn v[3] = {{4, 0.0, 0.5, 1, 1}, {0, 1.0, 2.0, 1, 1}, {4, 1.0, 1.5, 1, 1}};
    ez_diar_turns l = {v, 3, 3};
    int32_t speaker_of[5] = {9, 9, 9, 9, 9};
    CHECK_RC(ez_diar_number_turns(&l, 5, speaker_of), ELIZA_OK);
    CHECK_MSG(speaker_of[0] == 1 && speaker_of[1] == -1 && speaker_of[2] == -1 && speaker_of[3] == -1 &&
                  speaker_of[4] == 0,
              "speaker_of %d %d %d %d %d", speaker_of[0], speaker_of[1], speaker_of[2], speaker_of[3], speaker_of[4]);
    CHECK_MSG(turn_is(&v[0], 0, 0.0, 0.5) && turn_is(&v[1], 0, 1.0, 1.5) && turn_is(&v[2], 1, 1.0, 2.0),
              "turns %d@%g %d@%g %d@%g", v[0].speaker, v[0].start, v[1].speaker, v[1].start, v[2].speaker, v[2].start);
    CHECK_RC(ez_diar_number_turns(&l, 5, NULL), ELIZA_OK);
}

static void test_turns_out_confidence_is_the_frames_mean(void) {
    ez_diar_raw_turn v[2] = {{0, 0.25, 1.35, 3.0, 4}, {1, 2.0, 3.0, 0.0, 0}};
    ez_diar_turns l = {v, 2, 2};
    eliza_diarize_turn *t = NULL;
    size_t n = 0;
    CHECK_RC(ez_diar_turns_out(&l, &t, &n), ELIZA_OK);
    CHECK_MSG(n == 2 && t && t[0].speaker == 0 && near(t[0].start, 0.25) && near(t[0].end, 1.35) &&
                  t[0].confidence == 0.75f && t[1].speaker == 1 && t[1].confidence == 0.0f,
              "%zu turns, confidences %g %g", n, t ? (double)t[0].confidence : -1.0,
              t && n > 1 ? (double)t[1].confidence : -1.0);
    free(t);
    l.n = 0;
    t = NULL;
    CHECK_MSG(ez_diar_turns_out(&l, &t, &n) == ELIZA_OK && n == 0 && t, "no turns: not an empty array");
    free(t);
}

/* ------------------------------------------------------------------------ */
/* The run's stages                                                          */
/* ------------------------------------------------------------------------ */

/* Unit vector near axis `axis`, moved by a little of every other axis. */
static void near_axis(int axis, int seed, float *v) {
    double n = 0;
    for (int j = 0; j < DIM; j++) {
        v[j] = (float)((j == axis) + 0.05 * sin(7.0 * j + seed));
        n += (double)v[j] * v[j];
    }
    for (int j = 0; j < DIM; j++) v[j] = (float)(v[j] / sqrt(n));
}

/* Eight windows, 4 s apart (a cluster needs 3 windows): speaker A in slot 0
 * of every window, speaker B in slot 1 of windows 2..7, slot 2 silent. */
static void test_cluster_embs_labels_every_local_speaker(void) {
    float v[14 * DIM];
    int32_t window[14], cluster[8 * 3];
    uint8_t local[14], train[14];
    ez_diar_embs e;
    eliza_diarize_options o;
    int k = -1;
    eliza_diarize_default_options(&o);
    o.step = 4.0f;
    memset(&e, 0, sizeof e);
    e.v = v, e.window = window, e.local = local, e.train = train, e.dim = DIM;
    for (int w = 0; w < 8; w++)
        for (int sl = 0; sl < 2; sl++) {
            if (sl == 1 && w < 2) continue;
            near_axis(sl, (int)e.n, v + e.n * DIM);
            window[e.n] = w, local[e.n] = (uint8_t)sl, train[e.n] = 1;
            e.n++;
        }
    CHECK_RC(ez_diar_cluster_embs(&o, &e, 8, 3, cluster, &k), ELIZA_OK);
    CHECK_MSG(k == 2, "%d clusters", k);
    for (int w = 0; w < 8; w++) {
        CHECK_MSG(cluster[w * 3] == cluster[0] && cluster[w * 3 + 2] == -1, "window %d: %d %d %d", w, cluster[w * 3],
                  cluster[w * 3 + 1], cluster[w * 3 + 2]);
        if (w < 2) CHECK_MSG(cluster[w * 3 + 1] == -1, "window %d: slot 1 is %d", w, cluster[w * 3 + 1]);
        else CHECK_MSG(cluster[w * 3 + 1] == cluster[2 * 3 + 1] && cluster[w * 3 + 1] != cluster[0],
                       "window %d: slot 1 is %d", w, cluster[w * 3 + 1]);
    }
    e.n = 0;
    CHECK_RC(ez_diar_cluster_embs(&o, &e, 8, 3, cluster, &k), ELIZA_OK);
    CHECK_MSG(k == 0 && cluster[0] == -1 && cluster[3 * 3 + 1] == -1, "no embeddings: %d clusters, %d", k, cluster[0]);
}

/* 4,001 windows of one training embedding each: one window in two; 4,000
 * fit as they are. Only those with enough clean speech train, unless none
 * has. */
static void test_train_set_thins_to_the_clustering_limit(void) {
    const size_t max = EZ_CLUSTER_MAX_ITEMS;
    float *v = (float *)malloc(sizeof(float) * 2 * (max + 1));
    int32_t *window = (int32_t *)malloc(sizeof(int32_t) * (max + 1));
    uint8_t *local = (uint8_t *)calloc(max + 1, 1), *train = (uint8_t *)malloc(max + 1);
    ez_diar_embs e;
    ez_diar_train_set t;
    int same = 1;
    memset(&e, 0, sizeof e);
    e.v = v, e.window = window, e.local = local, e.train = train, e.dim = 2;
    for (size_t i = 0; i <= max; i++) {
        v[2 * i] = (float)i, v[2 * i + 1] = -(float)i;
        window[i] = (int32_t)i, train[i] = 1;
    }
    e.n = max;
    CHECK_RC(ez_diar_train_set_pick(&e, &t), ELIZA_OK);
    CHECK_MSG(t.stride == 1 && t.n == max, "%zu embeddings: stride %lld, %zu kept", max, (long long)t.stride, t.n);
    ez_diar_train_set_free(&t);
    e.n = max + 1;
    CHECK_RC(ez_diar_train_set_pick(&e, &t), ELIZA_OK);
    CHECK_MSG(t.stride == 2 && t.n == max / 2 + 1, "%zu embeddings: stride %lld, %zu kept", max + 1,
              (long long)t.stride, t.n);
    for (size_t j = 0; j < t.n && same; j++)
        same = t.group[j] == (int32_t)(2 * j) && t.x[2 * j] == (float)(2 * j) && t.x[2 * j + 1] == -(float)(2 * j);
    CHECK_MSG(same, "the thinned set is not the even windows' embeddings");
    ez_diar_train_set_free(&t);
    e.n = 10;
    for (size_t i = 0; i < 10; i++) train[i] = i % 3 == 0;
    CHECK_RC(ez_diar_train_set_pick(&e, &t), ELIZA_OK);
    CHECK_MSG(t.n == 4 && t.group[0] == 0 && t.group[1] == 3 && t.group[2] == 6 && t.group[3] == 9,
              "clean ones: %zu kept", t.n);
    ez_diar_train_set_free(&t);
    memset(train, 0, 10);
    CHECK_RC(ez_diar_train_set_pick(&e, &t), ELIZA_OK);
    CHECK_MSG(t.n == 10 && t.stride == 1, "none clean: %zu kept of 10", t.n);
    ez_diar_train_set_free(&t);
    free(v);
    free(window);
    free(local);
    free(train);
}

static void test_cluster_config_follows_the_options(void) {
    eliza_diarize_options o;
    ez_cluster_config c;
    eliza_diarize_default_options(&o);
    o.num_speakers = 3, o.min_speakers = 2, o.max_speakers = 5, o.step = 1.0f;
    c = ez_diar_cluster_config(&o, 1);
    CHECK_MSG(c.threshold == o.threshold && c.num_clusters == 3 && c.min_clusters == 2 && c.max_clusters == 5,
              "threshold %g, speakers %d %d %d", (double)c.threshold, c.num_clusters, c.min_clusters, c.max_clusters);
    CHECK_MSG(c.min_cluster_size == (int)EZ_DIAR_MIN_CLUSTER_SECONDS, "step 1 s: clusters of %d", c.min_cluster_size);
    c = ez_diar_cluster_config(&o, 2);
    CHECK_MSG(c.min_cluster_size == (int)EZ_DIAR_MIN_CLUSTER_SECONDS / 2, "stride 2: clusters of %d",
              c.min_cluster_size);
    o.step = 5.0f;
    c = ez_diar_cluster_config(&o, 1);
    CHECK_MSG(c.min_cluster_size == (int)lround(EZ_DIAR_MIN_CLUSTER_SECONDS / 5.0), "step 5 s: clusters of %d",
              c.min_cluster_size);
    o.step = 30.0f;
    c = ez_diar_cluster_config(&o, 3);
    CHECK_MSG(c.min_cluster_size == 1, "step 30 s, stride 3: clusters of %d", c.min_cluster_size);
}

/* Window 0: slots 0 and 2; window 1: slots 0 and 1, both nearer centroid 0,
 * so slot 1 (the farther) takes centroid 1; entries without an embedding
 * keep what they held. */
static void test_assign_embs_fills_each_window_slot(void) {
    float cent[2 * DIM], v[4 * DIM];
    int32_t window[4] = {0, 0, 1, 1}, cluster[2 * 3];
    uint8_t local[4] = {0, 2, 0, 1}, train[4] = {1, 1, 1, 1};
    ez_diar_embs e;
    memset(cent, 0, sizeof cent);
    memset(v, 0, sizeof v);
    cent[0] = 1.0f, cent[DIM + 1] = 1.0f;
    v[0] = 1.0f;
    v[DIM + 1] = 1.0f;
    v[2 * DIM] = 1.0f;
    v[3 * DIM] = 0.8f, v[3 * DIM + 1] = 0.6f;
    memset(&e, 0, sizeof e);
    e.v = v, e.window = window, e.local = local, e.train = train, e.dim = DIM, e.n = 4;
    for (int i = 0; i < 6; i++) cluster[i] = -7;
    CHECK_RC(ez_diar_assign_embs(&e, cent, 2, 3, cluster), ELIZA_OK);
    CHECK_MSG(cluster[0] == 0 && cluster[1] == -7 && cluster[2] == 1 && cluster[3] == 0 && cluster[4] == 1 &&
                  cluster[5] == -7,
              "clusters %d %d %d / %d %d %d", cluster[0], cluster[1], cluster[2], cluster[3], cluster[4], cluster[5]);
}

static void test_speakers_of_turns_follow_the_renumbering(void) {
    const float centroids[3 * 2] = {1, 0, 0, 1, 0.6f, 0.8f};
    const int32_t speaker_of[3] = {1, -1, 0}; /* cluster 1 has no turns */
    ez_diar_speakers sp;
    memset(&sp, 0, sizeof sp);
    CHECK_RC(ez_diar_speakers_of_turns(centroids, 3, 2, speaker_of, &sp), ELIZA_OK);
    CHECK_MSG(sp.n_speakers == 2 && sp.dim == 2, "%d speakers of dim %d", sp.n_speakers, sp.dim);
    if (sp.centroids && sp.n_speakers == 2)
        CHECK_MSG(sp.centroids[0] == 0.6f && sp.centroids[1] == 0.8f && sp.centroids[2] == 1 && sp.centroids[3] == 0,
                  "centroids %g %g / %g %g", (double)sp.centroids[0], (double)sp.centroids[1], (double)sp.centroids[2],
                  (double)sp.centroids[3]);
    ez_diar_speakers_free(&sp);
}

/* ------------------------------------------------------------------------ */
/* Whole runs with stand-in models                                           */
/* ------------------------------------------------------------------------ */

/* Speakers are pure tones; the stand-in segmentation tells them apart by
 * zero crossings per frame and puts each in a local slot that rotates from
 * window to window; the stand-in embedding is a bump at the tone's pitch. */
static const double VOICE_HZ[3] = {180.0, 430.0, 1000.0};
#define SR 16000
#define CHUNK 160000
#define FRAMES 589
#define FSTEP (270.0 / SR)
#define FDUR (991.0 / SR)
#define EMB_DIM 16

typedef struct {
    int seg_calls, embed_calls, chunks_seen;
    int cancel_after;           /* > 0: raise cancel on this segment call */
    ez_atomic_int *cancel;
    rng *noise;                 /* the test's generator, for the stand-in embedding's noise; NULL: none */
} fake_ctx;

static int voice_of(const float *x, size_t n) {
    size_t zc = 0;
    double energy = 0, hz;
    int best = 0;
    for (size_t i = 0; i < n; i++) energy += (double)x[i] * x[i];
    if (n == 0 || energy / (double)n < 1e-4) return -1;
    for (size_t i = 1; i < n; i++) zc += (x[i - 1] < 0) != (x[i] < 0);
    hz = (double)zc * SR / (2.0 * (double)n);
    for (int v = 1; v < 3; v++)
        if (fabs(log(hz / VOICE_HZ[v])) < fabs(log(hz / VOICE_HZ[best]))) best = v;
    return best;
}

static int32_t fake_segment(void *ctx, const float *pcm, int n_chunks, float *logprobs) {
    fake_ctx *fc = (fake_ctx *)ctx;
    fc->seg_calls++;
    if (fc->cancel_after > 0 && fc->seg_calls == fc->cancel_after) ez_atomic_int_store(fc->cancel, 1);
    for (int c = 0; c < n_chunks; c++) {
        const float *x = pcm + (size_t)c * CHUNK;
        int rotate = -1;
        fc->chunks_seen++;
        for (int f = 0; f < FRAMES; f++) {
            float *row = logprobs + ((size_t)c * FRAMES + f) * 7;
            size_t a = (size_t)(f * 270 + 360);
            int v = voice_of(x + a, 270), cls = 0;
            if (v >= 0) {
                if (rotate < 0) rotate = f % 3;
                cls = 1 + (v + rotate) % 3;
            }
            for (int k = 0; k < 7; k++) row[k] = k == cls ? logf(0.9f) : logf(0.1f / 6);
        }
    }
    return ELIZA_OK;
}

static int32_t fake_embed(void *ctx, const float *pcm, size_t n, float *out) {
    fake_ctx *fc = (fake_ctx *)ctx;
    int v = voice_of(pcm, n);
    double norm = 0;
    fc->embed_calls++;
    for (int j = 0; j < EMB_DIM; j++) {
        double centre = v < 0 ? 0 : 3.0 + 5.0 * v;
        out[j] = (float)(exp(-0.5 * (j - centre) * (j - centre)) + (fc->noise ? 0.02 * frand(fc->noise) : 0.0));
        norm += (double)out[j] * out[j];
    }
    for (int j = 0; j < EMB_DIM; j++) out[j] = (float)(out[j] / sqrt(norm));
    return ELIZA_OK;
}

static ez_diar_models fake_models(fake_ctx *fc) {
    ez_diar_models m;
    memset(&m, 0, sizeof m);
    m.sample_rate = SR;
    m.chunk_samples = CHUNK;
    m.n_frames = FRAMES;
    m.frame_step = FSTEP;
    m.frame_duration = FDUR;
    m.n_classes = 7;
    m.n_local = 3;
    m.powerset = POWERSET;
    m.emb_dim = EMB_DIM;
    m.segment = fake_segment;
    m.embed = fake_embed;
    m.ctx = fc;
    return m;
}

typedef struct {
    double start, end;
    int voice;
} truth_turn;

/* A conversation of n_turns turns at rate sr: voices in a fixed pattern,
 * turns of 1.5..5 s, pauses of 0.2..1 s. Returns the audio (malloc'ed). */
static float *make_conversation(rng *r, int sr, int n_turns, int n_voices, truth_turn *truth, size_t *n_out) {
    double t = 0.5;
    size_t n;
    float *x;
    for (int i = 0; i < n_turns; i++) {
        truth[i].voice = (i * 2 + i / 3) % n_voices;
        if (i > 0 && truth[i].voice == truth[i - 1].voice) truth[i].voice = (truth[i].voice + 1) % n_voices;
        truth[i].start = t;
        truth[i].end = t + 1.5 + 3.5 * frand(r);
        t = truth[i].end + 0.2 + 0.8 * frand(r);
    }
    n = (size_t)((t + 0.5) * sr);
    x = (float *)calloc(n, sizeof *x);
    for (int i = 0; i < n_turns; i++)
        for (size_t s = (size_t)(truth[i].start * sr); s < (size_t)(truth[i].end * sr) && s < n; s++)
            x[s] = (float)(0.5 * sin(2 * PI * VOICE_HZ[truth[i].voice] * (double)s / sr));
    *n_out = n;
    return x;
}

/* Fraction of 10 ms steps where the hypothesis (mapped by the best voice
 * permutation) disagrees with the truth. */
static double frame_error(const truth_turn *truth, int n_truth, const eliza_diarize_turn *hyp, size_t n_hyp,
                          double duration, int n_voices) {
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    double best = 1.0;
    for (int p = 0; p < 6; p++) {
        long bad = 0, total = 0;
        for (double t = 0.005; t < duration; t += 0.01) {
            int ref = 0, sys = 0;
            for (int i = 0; i < n_truth; i++)
                if (t >= truth[i].start && t < truth[i].end) ref |= 1 << truth[i].voice;
            for (size_t i = 0; i < n_hyp; i++)
                if (t >= hyp[i].start && t < hyp[i].end && hyp[i].speaker < n_voices)
                    sys |= 1 << perms[p][hyp[i].speaker];
                else if (t >= hyp[i].start && t < hyp[i].end)
                    sys |= 1 << 7;
            bad += ref != sys;
            total++;
        }
        best = fmin(best, (double)bad / (double)total);
    }
    return best;
}

static eliza_diarize_options default_options(void) {
    eliza_diarize_options o;
    eliza_diarize_default_options(&o);
    return o;
}

static int n_speakers_of(const eliza_diarize_turn *t, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k = EZ_MAX(k, t[i].speaker + 1);
    return k;
}

static void test_run_synthetic_conversation(int sr, uint64_t seed) {
    truth_turn truth[24];
    size_t n = 0, n_turns = 0;
    rng r = {seed};
    float *x = make_conversation(&r, sr, 24, 3, truth, &n);
    fake_ctx fc = {.noise = &r};
    ez_diar_models m = fake_models(&fc);
    eliza_diarize_options o = default_options();
    ez_atomic_int progress = 0, cancel = 0;
    ez_diar_control ctl = {&cancel, &progress};
    eliza_diarize_turn *t = NULL;
    double err, duration = (double)n / sr;
    ez_diar_speakers sp;
    int32_t rc = ez_diar_run(&m, x, n, sr, &o, &ctl, &t, &n_turns, &sp);
    CHECK_MSG(rc == ELIZA_OK, "%d Hz: run failed: %s", sr, ez_error_message());
    /* Speaker s's centroid is the stand-in embedding's bump of the voice
     * of speaker s's first turn. */
    CHECK_MSG(sp.n_speakers == 3 && sp.dim == EMB_DIM, "%d Hz: %d centroids of %d", sr, sp.n_speakers, sp.dim);
    for (int s = 0; s < sp.n_speakers && rc == ELIZA_OK; s++) {
        int peak = 0, voice = -1;
        for (int j = 1; j < EMB_DIM; j++)
            if (sp.centroids[s * EMB_DIM + j] > sp.centroids[s * EMB_DIM + peak]) peak = j;
        for (size_t i = 0; i < n_turns && voice < 0; i++)
            if (t[i].speaker == s && t[i].end - t[i].start > 1.0)
                for (int k = 0; k < 24; k++)
                    if (truth[k].start <= 0.5 * (t[i].start + t[i].end) && 0.5 * (t[i].start + t[i].end) < truth[k].end)
                        voice = truth[k].voice;
        CHECK_MSG(voice >= 0 && peak == 3 + 5 * voice, "%d Hz: speaker %d's centroid peaks at %d, its voice %d at %d",
                  sr, s, peak, voice, 3 + 5 * voice);
    }
    ez_diar_speakers_free(&sp);
    CHECK_MSG(n_speakers_of(t, n_turns) == 3, "%d Hz: %d speakers found of 3", sr, n_speakers_of(t, n_turns));
    err = frame_error(truth, 24, t, n_turns, duration, 3);
    CHECK_MSG(err < 0.03, "%d Hz: %.1f%% of the time is wrong", sr, 100 * err);
    CHECK_MSG(ez_atomic_int_load(&progress) == 1000000, "%d Hz: progress ended at %d", sr, ez_atomic_int_load(&progress));
    for (size_t i = 1; i < n_turns; i++) CHECK_MSG(t[i].start >= t[i - 1].start, "turns are not sorted by start");
    /* Turns of real length are confident; boundary frames may flicker. */
    for (size_t i = 0; i < n_turns; i++)
        CHECK_MSG(t[i].end > t[i].start && t[i].start >= 0 && t[i].end <= duration && t[i].confidence > 0.0f &&
                  t[i].confidence <= 1.0f && (t[i].end - t[i].start < 1.0 || t[i].confidence > 0.6f),
              "turn %zu: %.3f..%.3f confidence %g", i, t[i].start, t[i].end, t[i].confidence);
    CHECK_MSG(t[0].speaker == 0, "the first turn is speaker %d", t[0].speaker);
    free(t);

    /* A given number of speakers is obeyed. */
    o.num_speakers = 2;
    rc = ez_diar_run(&m, x, n, sr, &o, &ctl, &t, &n_turns, NULL);
    CHECK_MSG(rc == ELIZA_OK && n_speakers_of(t, n_turns) == 2, "%d Hz: num_speakers 2 gave %d", sr,
          n_speakers_of(t, n_turns));
    free(t);
    o.num_speakers = 0;
    o.max_speakers = 1;
    rc = ez_diar_run(&m, x, n, sr, &o, &ctl, &t, &n_turns, NULL);
    CHECK_MSG(rc == ELIZA_OK && n_speakers_of(t, n_turns) == 1, "%d Hz: max_speakers 1 gave %d", sr,
          n_speakers_of(t, n_turns));
    free(t);
    free(x);
}

static void test_run_silence_and_tiny_inputs(void) {
    fake_ctx fc = {0};
    ez_diar_models m = fake_models(&fc);
    eliza_diarize_options o = default_options();
    eliza_diarize_turn *t = NULL;
    size_t n = 99;
    float one = 0.25f, *zeros = (float *)calloc(30 * SR, sizeof(float));
    CHECK_MSG(ez_diar_run(&m, NULL, 0, SR, &o, NULL, &t, &n, NULL) == ELIZA_OK && n == 0 && t, "no samples");
    free(t);
    CHECK_MSG(ez_diar_run(&m, &one, 1, 44100, &o, NULL, &t, &n, NULL) == ELIZA_OK && n == 0 && t, "one sample");
    free(t);
    fc.chunks_seen = 0;
    CHECK_MSG(ez_diar_run(&m, zeros, 30 * SR, SR, &o, NULL, &t, &n, NULL) == ELIZA_OK && n == 0, "30 s of zeros gave %zu turns",
          n);
    CHECK_MSG(fc.chunks_seen == 1, "digital silence was segmented %d times (expected once, then cached)",
          fc.chunks_seen);
    free(t);
    free(zeros);
}

/* Two voices whose stand-in embeddings lie at cosine distance `dist`: the
 * first speaks alone for `first` s, then 14.5 s of silence, then the
 * second for 20 s, so no 10 s window holds both and nothing but the
 * threshold keeps them apart. */
typedef struct {
    fake_ctx fc; /* first: fake_segment reads it */
    float voice[2][EMB_DIM];
} pair_ctx;

static int32_t pair_embed(void *ctx, const float *pcm, size_t n, float *out) {
    const pair_ctx *pc = (const pair_ctx *)ctx;
    memcpy(out, pc->voice[voice_of(pcm, n) == 1], sizeof pc->voice[0]);
    return ELIZA_OK;
}

/* How many speakers a whole run finds in that recording: offline, or live
 * (pushed at once, 5 s latency). -1 when the run fails. */
static int pair_speakers(double dist, double first, int live) {
    const double start[2] = {0.5, first + 15.0}, len[2] = {first, 20.0};
    const size_t n = (size_t)((start[1] + len[1] + 0.5) * SR);
    pair_ctx pc;
    ez_diar_models m;
    eliza_diarize_options o = default_options();
    eliza_diarize_turn *t = NULL;
    size_t n_turns = 0;
    float *x = (float *)calloc(n, sizeof *x);
    int k = -1;
    memset(&pc, 0, sizeof pc);
    pc.voice[0][0] = 1.0f;
    pc.voice[1][0] = (float)(1.0 - dist);
    pc.voice[1][1] = (float)sqrt(1.0 - (1.0 - dist) * (1.0 - dist));
    for (int v = 0; v < 2; v++)
        for (size_t i = (size_t)(start[v] * SR); i < (size_t)((start[v] + len[v]) * SR); i++)
            x[i] = (float)(0.5 * sin(2 * PI * VOICE_HZ[v] * (double)i / SR));
    m = fake_models(&pc.fc);
    m.embed = pair_embed;
    m.ctx = &pc;
    if (!live) {
        if (ez_diar_run(&m, x, n, SR, &o, NULL, &t, &n_turns, NULL) == ELIZA_OK) k = n_speakers_of(t, n_turns);
        free(t);
    } else {
        ez_diar_stream *st = NULL;
        int32_t rc = ez_diar_stream_create(&m, &o, 5.0, &st);
        if (rc == ELIZA_OK) rc = ez_diar_stream_push(st, x, n);
        if (rc == ELIZA_OK) rc = ez_diar_stream_finish(st);
        k = 0;
        while (rc == ELIZA_OK) {
            rc = ez_diar_stream_pull(st, &t, &n_turns);
            if (rc == ELIZA_OK || rc == ELIZA_DONE) k = EZ_MAX(k, n_speakers_of(t, n_turns));
            free(t);
            t = NULL;
        }
        if (rc != ELIZA_DONE) k = -1;
        ez_diar_stream_free(st);
    }
    free(x);
    return k;
}

/* The threshold reaches the clustering as given, offline and live: two
 * voices 5% inside the default threshold are one speaker, 5% outside it
 * two, so scaling it by 10% anywhere on the way (the options, the
 * pipeline's hand-off, the cut, the stream's new-speaker test) fails here.
 * Live, the window where the second voice begins (under 2 s of it) joins
 * the running speaker and pulls its centroid towards the new voice by
 * about 1/N of their distance (N windows so far): at 20 s of the first
 * voice that pull ate the 5% margin (0.525 gave one speaker), at 80 s it
 * leaves most of it. */
static void test_run_threshold_separates_two_voices(void) {
    const double t = default_options().threshold;
    for (int live = 0; live < 2; live++) {
        const int inside = pair_speakers(0.95 * t, 80.0, live), outside = pair_speakers(1.05 * t, 80.0, live);
        CHECK_MSG(inside == 1, "%s: voices 5%% inside the threshold %g gave %d speakers", live ? "live" : "offline",
                  t, inside);
        CHECK_MSG(outside == 2, "%s: voices 5%% outside the threshold %g gave %d speakers", live ? "live" : "offline",
                  t, outside);
    }
}

static void test_voice_embedding_of_reference_audio(void) {
    rng r = {0x96f0b0353dbb8e7full};
    fake_ctx fc = {.noise = &r};
    ez_diar_models m = fake_models(&fc);
    size_t n = 4 * SR;
    float *x = (float *)calloc(n, sizeof *x), emb[EMB_DIM];
    double speech = 0;
    int peak = 0;
    /* 3 s of voice 1 (from 0.5 s), then silence. */
    for (size_t i = SR / 2; i < 7 * SR / 2; i++) x[i] = (float)(0.5 * sin(2 * PI * VOICE_HZ[1] * (double)i / SR));
    CHECK_MSG(ez_diar_voice_embedding(&m, x, n, SR, emb, &speech) == ELIZA_OK, "voice: %s", ez_error_message());
    for (int j = 1; j < EMB_DIM; j++)
        if (emb[j] > emb[peak]) peak = j;
    CHECK_MSG(peak == 8 && fabs(speech - 3.0) < 0.1, "voice 1 enrolled with a peak at %d from %.2f s of speech", peak,
              speech);
    /* At 48 kHz too. */
    {
        size_t n48 = 3 * n;
        float *y = (float *)calloc(n48, sizeof *y);
        for (size_t i = 48000 / 2; i < 7 * 48000 / 2; i++)
            y[i] = (float)(0.5 * sin(2 * PI * VOICE_HZ[2] * (double)i / 48000));
        CHECK_MSG(ez_diar_voice_embedding(&m, y, n48, 48000, emb, &speech) == ELIZA_OK && fabs(speech - 3.0) < 0.1,
                  "48 kHz: %s (%.2f s)", ez_error_message(), speech);
        free(y);
    }
    memset(x, 0, n * sizeof *x);
    CHECK_MSG(ez_diar_voice_embedding(&m, x, n, SR, emb, &speech) == ELIZA_E_INVALID_ARG && speech == 0.0 &&
                  strstr(ez_error_message(), "speech"),
              "silence was enrolled: %s", ez_error_message());
    for (size_t i = 0; i < SR / 10; i++) x[i] = (float)(0.5 * sin(2 * PI * VOICE_HZ[0] * (double)i / SR));
    CHECK_MSG(ez_diar_voice_embedding(&m, x, SR / 10, SR, emb, &speech) == ELIZA_E_INVALID_ARG,
              "0.1 s was enrolled (%.2f s of speech)", speech);
    CHECK_MSG(ez_diar_voice_embedding(&m, x, 0, SR, emb, &speech) == ELIZA_E_INVALID_ARG, "no samples was enrolled");
    free(x);
}

/* The enrolled voices: enrol, refuse a name twice and silence (nothing
 * changes), list, name a run's speakers, remove one, remove all. */
static void test_voices_registry(void) {
    rng r = {0x4dcafc5b1f36b3eaull};
    fake_ctx fc = {.noise = &r};
    ez_diar_models m = fake_models(&fc);
    ez_diar_voices v;
    ez_diar_speakers sp;
    ez_diar_voice_name *names = NULL;
    float *dist = NULL, cent[2 * EMB_DIM];
    char *list = NULL;
    size_t n = 4 * SR;
    float *x[2];
    memset(&v, 0, sizeof v);
    for (int k = 0; k < 2; k++) {
        x[k] = (float *)calloc(n, sizeof(float));
        for (size_t i = SR / 2; i < 7 * SR / 2; i++)
            x[k][i] = (float)(0.5 * sin(2 * PI * VOICE_HZ[2 * k] * (double)i / SR));
    }
    CHECK_MSG(ez_diar_voices_enroll(&v, &m, "ann", x[0], n, SR) == ELIZA_OK &&
                  ez_diar_voices_enroll(&v, &m, "bob", x[1], n, SR) == ELIZA_OK && v.n == 2,
              "enrol: %s", ez_error_message());
    CHECK(ez_diar_voices_enroll(&v, &m, "ann", x[1], n, SR) == ELIZA_E_INVALID_ARG && v.n == 2);
    memset(x[0], 0, n * sizeof(float));
    CHECK(ez_diar_voices_enroll(&v, &m, "cid", x[0], n, SR) == ELIZA_E_INVALID_ARG && v.n == 2);
    CHECK(ez_diar_voices_find(&v, "bob") == 1 && ez_diar_voices_find(&v, "cid") == -1);
    CHECK(ez_diar_voices_list(&v, &list) == ELIZA_OK && strcmp(list, "ann\nbob\n") == 0);
    free(list);
    /* Speaker 0 sounds like bob, speaker 1 like ann. */
    memcpy(cent, v.emb + EMB_DIM, sizeof(float) * EMB_DIM);
    memcpy(cent + EMB_DIM, v.emb, sizeof(float) * EMB_DIM);
    memset(&sp, 0, sizeof sp);
    sp.n_speakers = 2;
    sp.dim = EMB_DIM;
    sp.centroids = cent;
    CHECK(ez_diar_voices_name(&v, &sp, 0.2f, &names, &dist) == ELIZA_OK);
    CHECK_MSG(names && strcmp(names[0], "bob") == 0 && strcmp(names[1], "ann") == 0 && dist[0] < 1e-5f,
              "named %s, %s", names ? names[0] : "-", names ? names[1] : "-");
    free(names);
    free(dist);
    CHECK(ez_diar_voices_remove(&v, "ann") == ELIZA_OK && v.n == 1 && ez_diar_voices_find(&v, "bob") == 0);
    CHECK(memcmp(v.emb, cent, sizeof(float) * EMB_DIM) == 0);
    CHECK(ez_diar_voices_remove(&v, "ann") == ELIZA_E_NOT_FOUND);
    CHECK(ez_diar_voices_remove(&v, NULL) == ELIZA_OK && v.n == 0);
    CHECK(ez_diar_voices_list(&v, &list) == ELIZA_OK && list[0] == '\0');
    free(list);
    ez_diar_voices_free(&v);
    free(x[0]);
    free(x[1]);
}

static void test_identify_is_one_to_one_under_the_threshold(void) {
    /* Speakers 0 and 1 are both nearest voice 0; 1 is nearer and takes it,
     * 0 takes voice 1; speaker 2 is near voice 1 too, but it is taken. */
    float c[3 * 2], v[2 * 2], dist[3];
    int32_t voice[3];
    double a0 = 0.35, a1 = 0.2, a2 = 1.6, b0 = 0.0, b1 = 0.9;
    c[0] = (float)cos(a0), c[1] = (float)sin(a0), c[2] = (float)cos(a1), c[3] = (float)sin(a1);
    c[4] = (float)cos(a2), c[5] = (float)sin(a2);
    v[0] = (float)cos(b0), v[1] = (float)sin(b0), v[2] = (float)cos(b1), v[3] = (float)sin(b1);
    CHECK(ez_diar_identify(c, 3, v, 2, 2, 0.3f, voice, dist) == ELIZA_OK);
    CHECK_MSG(voice[1] == 0 && voice[0] == 1 && voice[2] == -1, "voices %d %d %d", voice[0], voice[1], voice[2]);
    CHECK_MSG(fabs(dist[0] - (1 - cos(a0 - b1))) < 1e-6 && fabs(dist[2] - (1 - cos(a2 - b1))) < 1e-6,
              "distances %g %g", dist[0], dist[2]);
    CHECK(ez_diar_identify(c, 3, v, 2, 2, 0.01f, voice, dist) == ELIZA_OK);
    CHECK_MSG(voice[0] == -1 && voice[1] == -1 && voice[2] == -1, "a tight threshold still named a speaker");
    CHECK(ez_diar_identify(c, 3, v, 0, 2, 0.3f, voice, dist) == ELIZA_OK);
    CHECK_MSG(voice[0] == -1 && isnan(dist[0]), "no voices: %d %g", voice[0], dist[0]);
}

static void test_stream_matches_offline_and_never_revises(void) {
    truth_turn truth[24];
    size_t n = 0, off = 0, n_all = 0, cap = 256;
    rng r = {0xaf38c92586f34eb2ull};
    float *x = make_conversation(&r, SR, 24, 3, truth, &n);
    fake_ctx fc = {.noise = &r};
    ez_diar_models m = fake_models(&fc);
    eliza_diarize_options o = default_options();
    ez_diar_stream *st = NULL;
    eliza_diarize_turn *all = (eliza_diarize_turn *)malloc(cap * sizeof *all), *t = NULL;
    double err, last_decided = 0.0, worst_lag = 0.0;
    int32_t rc = ELIZA_OK;
    CHECK(ez_diar_stream_create(&m, &o, 5.0, &st) == ELIZA_OK);
    /* Chunks of 1..20000 samples; pull after each. */
    while (off < n || rc != ELIZA_DONE) {
        size_t k;
        if (off < n) {
            size_t chunk = (size_t)(1 + frand(&r) * 20000);
            chunk = EZ_MIN(chunk, n - off);
            CHECK_MSG(ez_diar_stream_push(st, x + off, chunk) == ELIZA_OK, "push: %s", ez_error_message());
            off += chunk;
            if (off == n) CHECK(ez_diar_stream_finish(st) == ELIZA_OK);
        }
        rc = ez_diar_stream_pull(st, &t, &k);
        CHECK_MSG(rc == ELIZA_OK || rc == ELIZA_DONE, "pull: %d %s", rc, ez_error_message());
        if (off < n) {
            double lag = ez_diar_stream_pushed(st) - ez_diar_stream_decided(st);
            worst_lag = EZ_MAX(worst_lag, lag);
        }
        for (size_t i = 0; i < k; i++) {
            CHECK_MSG(t[i].start >= last_decided - 1e-9, "a turn at %.3f starts before the decided edge %.3f of the last pull",
                      t[i].start, last_decided);
            if (n_all == cap) all = (eliza_diarize_turn *)realloc(all, (cap *= 2) * sizeof *all);
            all[n_all++] = t[i];
        }
        free(t);
        last_decided = ez_diar_stream_decided(st);
        if (rc == ELIZA_DONE) break;
    }
    CHECK_MSG(ez_diar_stream_push(st, x, 10) == ELIZA_E_STATE, "a push after finish was taken");
    CHECK_MSG(worst_lag <= 5.0 + 1.0 + 0.05, "decisions lagged %.2f s behind the audio (latency 5 s, step 1 s)",
              worst_lag);
    err = frame_error(truth, 24, all, n_all, (double)n / SR, 3);
    /* Offline gets under 3%; live decides each frame from the 5 s after it
     * and starts speakers late (measured 5.5%). */
    CHECK_MSG(err < 0.08, "live: %.1f%% of the time is wrong", 100 * err);
    CHECK_MSG(n_speakers_of(all, n_all) == 3, "live: %d speakers", n_speakers_of(all, n_all));
    ez_diar_stream_free(st);
    free(all);
    free(x);
    /* Closing mid-stream, and a stream that never got audio. */
    x = make_conversation(&r, SR, 6, 2, truth, &n);
    CHECK(ez_diar_stream_create(&m, &o, 2.0, &st) == ELIZA_OK);
    CHECK(ez_diar_stream_push(st, x, n / 2) == ELIZA_OK);
    ez_diar_stream_free(st);
    CHECK(ez_diar_stream_create(&m, &o, 2.0, &st) == ELIZA_OK);
    CHECK(ez_diar_stream_finish(st) == ELIZA_OK);
    CHECK_MSG(ez_diar_stream_pull(st, &t, &n_all) == ELIZA_DONE && n_all == 0 && t, "an empty stream has turns");
    free(t);
    ez_diar_stream_free(st);
    free(x);
}

static void test_run_cancel(void) {
    truth_turn truth[24];
    size_t n = 0, n_turns = 5;
    rng r = {0x86741fd5b88a6411ull};
    float *x = make_conversation(&r, SR, 24, 3, truth, &n);
    fake_ctx fc = {.noise = &r};
    ez_diar_models m = fake_models(&fc);
    eliza_diarize_options o = default_options();
    ez_atomic_int progress = 0, cancel = 1;
    ez_diar_control ctl = {&cancel, &progress};
    eliza_diarize_turn *t = NULL;
    CHECK_MSG(ez_diar_run(&m, x, n, SR, &o, &ctl, &t, &n_turns, NULL) == ELIZA_E_CANCELLED && !t && n_turns == 0,
          "a raised cancel flag did not stop the run");
    CHECK_MSG(fc.seg_calls == 0, "segmentation ran %d times after a cancel", fc.seg_calls);
    /* Raised during the third batch: the run stops there. */
    ez_atomic_int_store(&cancel, 0);
    fc.cancel_after = 3;
    fc.cancel = &cancel;
    o.batch_size = 2;
    CHECK_MSG(ez_diar_run(&m, x, n, SR, &o, &ctl, &t, &n_turns, NULL) == ELIZA_E_CANCELLED && !t,
          "a cancel during the run did not stop it");
    CHECK_MSG(fc.seg_calls == 3, "segmentation ran %d times (cancel raised on the 3rd)", fc.seg_calls);
    CHECK_MSG(ez_atomic_int_load(&progress) > 0 && ez_atomic_int_load(&progress) < 1000000, "progress %d after cancel",
          ez_atomic_int_load(&progress));
    free(x);
}

static long peak_rss_kb(void) {
#if defined(__linux__)
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
#else
    return 0;
#endif
}

static void test_run_two_hours_bounded(void) {
    /* 2 h at 16 kHz, silence with a tone conversation every 10 minutes. */
    const size_t n = (size_t)7200 * SR;
    float *x = (float *)malloc(n * sizeof(float));
    rng r = {0x9a43853751d82954ull};
    fake_ctx fc = {.noise = &r};
    ez_diar_models m = fake_models(&fc);
    eliza_diarize_options o = default_options();
    eliza_diarize_turn *t = NULL;
    size_t n_turns = 0;
    long before, after;
    if (!x) {
        CHECK_MSG(0, "cannot allocate 2 h of audio");
        return;
    }
    memset(x, 0, n * sizeof(float));
    for (int block = 0; block < 12; block++)
        for (int s = 0; s < 20 * SR; s++) {
            int v = (s / (5 * SR)) % 2 + (block % 2);
            x[(size_t)block * 600 * SR + (size_t)s] = (float)(0.5 * sin(2 * PI * VOICE_HZ[v] * s / SR));
        }
    before = peak_rss_kb();
    CHECK_MSG(ez_diar_run(&m, x, n, SR, &o, NULL, &t, &n_turns, NULL) == ELIZA_OK, "2 h run failed: %s", ez_error_message());
    after = peak_rss_kb();
    CHECK_MSG(n_speakers_of(t, n_turns) == 3, "2 h: %d speakers of 3", n_speakers_of(t, n_turns));
    CHECK_MSG(n_turns >= 48 && n_turns <= 60, "2 h: %zu turns (48 expected)", n_turns);
#if defined(__linux__)
    printf("2 h of audio (7201 windows): peak RSS grew by %.1f MB over the input's %.0f MB\n",
           (after - before) / 1024.0, n * sizeof(float) / 1048576.0);
    CHECK_MSG(after - before < 120 * 1024, "2 h of audio took %.1f MB beyond the input", (after - before) / 1024.0);
#else
    (void)before;
    (void)after;
#endif
    free(t);
    free(x);
}

int main(void) {
    test_resampler_lengths_and_bad_rates();
    test_resampler_identity_and_dc();
    test_resampler_passband_and_alias_rejection();
    test_resampler_polyphase_matches_general_and_random_access();
    test_cluster_finds_separated_speakers();
    test_cluster_threshold_is_the_cut();
    test_cluster_cannot_link_keeps_window_speakers_apart();
    test_cluster_small_clusters_are_not_speakers();
    test_cluster_centroids_are_unit_mean_directions();
    test_cluster_assign_distinct_within_group();
    test_decode_powerset();
    test_window_geometry();
    test_reconstruct_turns_across_permuted_windows();
    test_reconstruct_count_limits_speakers();
    test_reconstruct_exclusive_has_one_speaker_at_a_time();
    test_sum_windows_adds_each_clusters_activity();
    test_pick_speakers_most_active_first();
    test_clip_turns_to_the_audio();
    test_fill_gaps_joins_a_speakers_close_turns();
    test_drop_short_keeps_long_turns_by_start();
    test_number_turns_by_first_appearance();
    test_turns_out_confidence_is_the_frames_mean();
    test_train_set_thins_to_the_clustering_limit();
    test_cluster_config_follows_the_options();
    test_assign_embs_fills_each_window_slot();
    test_cluster_embs_labels_every_local_speaker();
    test_speakers_of_turns_follow_the_renumbering();
    test_run_silence_and_tiny_inputs();
    test_run_threshold_separates_two_voices();
    test_run_synthetic_conversation(SR, 0xae86f2e3338a0f9dull);
    test_run_synthetic_conversation(48000, 0x20cee39a4e4d1d95ull);
    test_run_synthetic_conversation(8000, 0xc1d6b1ca7a71d471ull);
    test_run_cancel();
    test_voice_embedding_of_reference_audio();
    test_identify_is_one_to_one_under_the_threshold();
    test_voices_registry();
    test_stream_matches_offline_and_never_revises();
    test_run_two_hours_bounded();
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
}
