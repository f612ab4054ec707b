/* Windowed-sinc sample-rate conversion (see resample.h). */
#include "diar/resample.h"

#include <math.h>
#include <stdlib.h>

#include "core/error.h"

#define RS_ZEROS 24           /* zero crossings of the sinc on each side */
#define RS_ROLLOFF 0.90       /* cutoff, fraction of the lower Nyquist frequency */
#define RS_BETA 9.0           /* Kaiser window shape: ~90 dB side lobes */
#define RS_OVERSAMPLE 512     /* kernel table points per zero crossing (general path) */
#define RS_MAX_PHASES 1024    /* above this the taps are interpolated per output */
#define RS_MAX_RATE 1000000
#define RS_PI 3.14159265358979323846

struct ez_resampler {
    int in_rate, out_rate;
    uint64_t up, down;    /* out_rate / g, in_rate / g (g = gcd): phases, input step */
    double two_fc;        /* 2 * cutoff, in cycles per input sample */
    int half_taps;        /* taps on each side of the output position */
    float *kernel;        /* general path: h at u = i / RS_OVERSAMPLE zero crossings, i <= RS_ZEROS * OS + 1 */
    float *phases;        /* polyphase path: [up][2 * half_taps], each row summing to 1; NULL otherwise */
};

static uint64_t gcd_u64(uint64_t a, uint64_t b) {
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Modified Bessel function of the first kind, order 0 (power series). */
static double bessel_i0(double x) {
    double sum = 1.0, term = 1.0, q = x * x / 4.0;
    for (int k = 1; k < 64; k++) {
        term *= q / ((double)k * (double)k);
        sum += term;
        if (term < sum * 1e-17) break;
    }
    return sum;
}

/* The low-pass kernel at u zero crossings from its centre (|u| < RS_ZEROS):
 * sinc times a Kaiser window, unscaled (rows are normalised to unit gain). */
static double kernel_at(double u) {
    double r, x;
    u = fabs(u);
    if (u >= RS_ZEROS) return 0.0;
    r = u / RS_ZEROS;
    x = u == 0.0 ? 1.0 : sin(RS_PI * u) / (RS_PI * u);
    return x * bessel_i0(RS_BETA * sqrt(1.0 - r * r)) / bessel_i0(RS_BETA);
}

int32_t ez_resampler_create(int in_rate, int out_rate, int force_general, ez_resampler **out) {
    ez_resampler *r;
    uint64_t g;
    int n_taps;

    *out = NULL;
    if (in_rate < 1 || in_rate > RS_MAX_RATE || out_rate < 1 || out_rate > RS_MAX_RATE)
        return ez_fail(ELIZA_E_INVALID_ARG, "resampling %d Hz to %d Hz: rates must be 1..%d Hz", in_rate,
                       out_rate, RS_MAX_RATE);
    r = (ez_resampler *)calloc(1, sizeof *r);
    if (!r) return ez_fail(ELIZA_E_NOMEM, "out of memory for a resampler");
    r->in_rate = in_rate;
    r->out_rate = out_rate;
    g = gcd_u64((uint64_t)in_rate, (uint64_t)out_rate);
    r->up = (uint64_t)out_rate / g;
    r->down = (uint64_t)in_rate / g;
    /* Downsampling moves the cutoff to the output's Nyquist frequency. */
    r->two_fc = RS_ROLLOFF * (out_rate < in_rate ? (double)out_rate / in_rate : 1.0);
    r->half_taps = (int)ceil(RS_ZEROS / r->two_fc);
    n_taps = 2 * r->half_taps;

    if (!force_general && r->up <= RS_MAX_PHASES) {
        r->phases = (float *)malloc(sizeof(float) * (size_t)r->up * (size_t)n_taps);
        if (!r->phases) {
            unsigned long long up = (unsigned long long)r->up;
            free(r);
            return ez_fail(ELIZA_E_NOMEM, "out of memory for %llu resampler phases", up);
        }
        for (uint64_t p = 0; p < r->up; p++) {
            float *row = r->phases + p * (uint64_t)n_taps;
            double frac = (double)p / (double)r->up, sum = 0.0;
            /* Tap j reads input i0 - half_taps + 1 + j, at t = x - k input samples. */
            for (int j = 0; j < n_taps; j++) {
                double h = kernel_at(((double)(r->half_taps - 1 - j) + frac) * r->two_fc);
                row[j] = (float)h;
                sum += h;
            }
            for (int j = 0; j < n_taps; j++) row[j] = (float)(row[j] / sum);
        }
    } else {
        int n = RS_ZEROS * RS_OVERSAMPLE + 2;
        r->kernel = (float *)malloc(sizeof(float) * (size_t)n);
        if (!r->kernel) {
            free(r);
            return ez_fail(ELIZA_E_NOMEM, "out of memory for the resampler kernel");
        }
        for (int i = 0; i < n; i++) r->kernel[i] = (float)kernel_at((double)i / RS_OVERSAMPLE);
    }
    *out = r;
    return ELIZA_OK;
}

void ez_resampler_free(ez_resampler *r) {
    if (!r) return;
    free(r->phases);
    free(r->kernel);
    free(r);
}

uint64_t ez_resampler_out_len(const ez_resampler *r, uint64_t n_in) {
    /* n_in * up / down rounded up, without overflowing for any real length. */
    uint64_t q = n_in / r->down, rem = n_in % r->down;
    return q * r->up + (rem * r->up + r->down - 1) / r->down;
}

int ez_resampler_half_taps(const ez_resampler *r) { return r->half_taps; }

/* One output sample at input position i0 + p / up, general path: taps from
 * the kernel table by linear interpolation, normalised by their sum. */
static float sample_general(const ez_resampler *r, const float *in, uint64_t n_in, uint64_t i0, uint64_t p) {
    double frac = (double)p / (double)r->up, acc = 0.0, sum = 0.0;
    int64_t first = (int64_t)i0 - r->half_taps + 1;
    for (int j = 0; j < 2 * r->half_taps; j++) {
        double pos = fabs(((double)(r->half_taps - 1 - j) + frac) * r->two_fc) * RS_OVERSAMPLE;
        int64_t k = first + j;
        size_t idx;
        double w, h;
        if (pos >= (double)RS_ZEROS * RS_OVERSAMPLE) continue;
        idx = (size_t)pos;
        w = pos - (double)idx;
        h = r->kernel[idx] + w * (r->kernel[idx + 1] - r->kernel[idx]);
        sum += h;
        if (k >= 0 && (uint64_t)k < n_in) acc += h * in[k];
    }
    return (float)(acc / sum);
}

static float sample_polyphase(const ez_resampler *r, const float *in, uint64_t n_in, uint64_t i0, uint64_t p) {
    int n_taps = 2 * r->half_taps;
    const float *row = r->phases + p * (uint64_t)n_taps;
    int64_t first = (int64_t)i0 - r->half_taps + 1;
    float acc = 0.0f;
    if (first >= 0 && (uint64_t)first + (uint64_t)n_taps <= n_in) {
        const float *x = in + first;
        for (int j = 0; j < n_taps; j++) acc += row[j] * x[j];
        return acc;
    }
    for (int j = 0; j < n_taps; j++) {
        int64_t k = first + j;
        if (k >= 0 && (uint64_t)k < n_in) acc += row[j] * in[k];
    }
    return acc;
}

void ez_resampler_run(const ez_resampler *r, const float *in, uint64_t n_in, uint64_t o0, size_t n,
                      float *out) {
    /* Output o sits at input position o * down / up = i0 + p / up. */
    uint64_t i0 = (o0 / r->up) * r->down + ((o0 % r->up) * r->down) / r->up;
    uint64_t p = ((o0 % r->up) * r->down) % r->up;
    for (size_t i = 0; i < n; i++) {
        out[i] = r->phases ? sample_polyphase(r, in, n_in, i0, p) : sample_general(r, in, n_in, i0, p);
        p += r->down;
        i0 += p / r->up;
        p %= r->up;
    }
}
