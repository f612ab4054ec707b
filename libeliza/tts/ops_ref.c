/* Scalar references of the Kokoro layers (ops.h): plain loops, double
 * accumulation where a sum is long, written to be checked against the
 * PyTorch definitions line by line. */
#include <math.h>

#include "tts/ops.h"

void ez_tts_linear_ref(const float *x, int T, int n_in, const float *w, const float *b,
                       int n_out, float *y) {
    for (int t = 0; t < T; t++)
        for (int o = 0; o < n_out; o++) {
            double acc = b ? b[o] : 0.0;
            for (int i = 0; i < n_in; i++) acc += (double)x[(int64_t)t * n_in + i] * w[(int64_t)o * n_in + i];
            y[(int64_t)t * n_out + o] = (float)acc;
        }
}

void ez_tts_conv1d_ref(const float *x, int c_in, int t_in, const float *w, const float *b,
                       int c_out, int k, int stride, int pad, int dilation, int groups, float *y) {
    int t_out = ez_conv1d_out_len(t_in, k, stride, pad, dilation);
    int cig = c_in / groups, cog = c_out / groups;
    for (int o = 0; o < c_out; o++) {
        int g = o / cog;
        for (int t = 0; t < t_out; t++) {
            double acc = b ? b[o] : 0.0;
            for (int ci = 0; ci < cig; ci++)
                for (int j = 0; j < k; j++) {
                    int ti = t * stride - pad + j * dilation;
                    if (ti < 0 || ti >= t_in) continue;
                    acc += (double)w[((int64_t)o * cig + ci) * k + j] *
                           x[(int64_t)(g * cig + ci) * t_in + ti];
                }
            y[(int64_t)o * t_out + t] = (float)acc;
        }
    }
}

void ez_tts_conv_transpose1d_ref(const float *x, int c_in, int t_in, const float *w,
                                 const float *b, int c_out, int k, int stride, int pad,
                                 int out_pad, int groups, float *y) {
    int t_out = ez_conv_transpose1d_out_len(t_in, k, stride, pad, out_pad);
    int cig = c_in / groups, cog = c_out / groups;
    for (int o = 0; o < c_out; o++) {
        int g = o / cog, oc = o % cog;
        for (int t = 0; t < t_out; t++) {
            /* y[t] gathers x[s] . w[j] over s * stride - pad + j == t. */
            double acc = b ? b[o] : 0.0;
            for (int j = 0; j < k; j++) {
                int num = t + pad - j;
                if (num < 0 || num % stride) continue;
                int s = num / stride;
                if (s >= t_in) continue;
                for (int ci = 0; ci < cig; ci++) {
                    int c = g * cig + ci;
                    acc += (double)x[(int64_t)c * t_in + s] * w[((int64_t)c * cog + oc) * k + j];
                }
            }
            y[(int64_t)o * t_out + t] = (float)acc;
        }
    }
}

void ez_tts_layer_norm(float *x, int T, int C, const float *gamma, const float *beta, float eps) {
    for (int t = 0; t < T; t++) {
        float *r = x + (int64_t)t * C;
        double mean = 0, var = 0;
        for (int i = 0; i < C; i++) mean += r[i];
        mean /= C;
        for (int i = 0; i < C; i++) var += (r[i] - mean) * (r[i] - mean);
        var /= C;
        float inv = (float)(1.0 / sqrt(var + eps));
        for (int i = 0; i < C; i++) {
            float v = (float)(r[i] - mean) * inv;
            r[i] = v * (gamma ? gamma[i] : 1.0f) + (beta ? beta[i] : 0.0f);
        }
    }
}

void ez_tts_adain1d_ref(float *x, int C, int T, const float *gamma_beta, float eps) {
    for (int c = 0; c < C; c++) {
        float *r = x + (int64_t)c * T;
        double mean = 0, var = 0;
        for (int t = 0; t < T; t++) mean += r[t];
        mean /= T;
        for (int t = 0; t < T; t++) var += (r[t] - mean) * (r[t] - mean);
        var /= T;
        float inv = (float)(1.0 / sqrt(var + eps));
        float g = 1.0f + gamma_beta[c], be = gamma_beta[C + c];
        for (int t = 0; t < T; t++) r[t] = g * ((float)(r[t] - mean) * inv) + be;
    }
}

void ez_tts_snake_ref(float *x, int C, int T, const float *alpha) {
    for (int c = 0; c < C; c++) {
        float a = alpha[c], *r = x + (int64_t)c * T;
        for (int t = 0; t < T; t++) {
            float s = sinf(a * r[t]);
            r[t] += (1.0f / a) * (s * s); /* PyTorch: x + (1 / a) * sin(a x) ** 2 */
        }
    }
}

void ez_tts_gelu_tanh_ref(float *x, int64_t n) {
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * (v * v * v))));
    }
}
