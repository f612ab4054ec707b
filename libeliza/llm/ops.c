/* Scalar reference of the LLM vector ops, rope, and the table dispatch. */
#include "ops.h"

#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "core/quant.h"

static float dot_ref(const float *a, const float *b, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
    return (float)s;
}

static void axpy_ref(float *y, float a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

static void dot4_ref(const float *a, int64_t lda, const float *b, int64_t n, float out[4]) {
    for (int r = 0; r < 4; r++) out[r] = dot_ref(a + r * lda, b, n);
}

static void axpy4_ref(float *y, int64_t ldy, const float w[4], const float *x, int64_t n) {
    for (int r = 0; r < 4; r++) axpy_ref(y + r * ldy, w[r], x, n);
}

/* As llama.cpp's ggml_rms_norm and HF's *RMSNorm: the mean square in high
 * precision, one scale for the row, then the weight. */
static void rms_norm_ref(float *y, const float *x, const float *w, int64_t n, float eps) {
    double ss = 0.0;
    float scale;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
    scale = 1.0f / sqrtf((float)(ss / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale * w[i];
}

/* 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3):
 * the sigmoid form has no cancellation and no overflow at either end. */
static float gelu_tanh(float x) {
    const float sqrt_2_over_pi = 0.7978845608028654f;
    float u = sqrt_2_over_pi * (x + 0.044715f * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
}

static void gelu_tanh_mul_ref(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = gelu_tanh(g[i]) * u[i];
}

static void silu_mul_ref(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void softmax_ref(float *x, int64_t n) {
    float mx = -INFINITY;
    double sum = 0.0;
    float inv;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

#if EZ_ARCH_X86_64 || EZ_ARCH_AARCH64
/* Nearest integer, ties to even (|v| < 2^22), without depending on libm. */
static int32_t round_even(float v) {
    const float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}
#endif

void ez_llm_quant_q8_0_ref(const float *x, void *dst, int64_t n) {
    ez_block_q8_0 *y = (ez_block_q8_0 *)dst;
    for (int64_t b = 0; b < n / EZ_QK; b++, x += EZ_QK) {
        float amax = 0.0f, d, id;
        for (int j = 0; j < EZ_QK; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        d = amax / 127.0f;
#if EZ_ARCH_X86_64
        id = amax != 0.0f ? 127.0f / amax : 0.0f;
#else
        id = d != 0.0f ? 1.0f / d : 0.0f;
#endif
        y[b].d = ez_f32_to_f16(d);
        for (int j = 0; j < EZ_QK; j++) {
#if EZ_ARCH_X86_64 || EZ_ARCH_AARCH64
            y[b].qs[j] = (int8_t)round_even(x[j] * id);
#else
            y[b].qs[j] = (int8_t)roundf(x[j] * id);
#endif
        }
    }
}

void ez_llm_quant_q8_1(const float *x, void *dst, int64_t n) {
    ez_block_q8_1 *y = (ez_block_q8_1 *)dst;
    for (int64_t b = 0; b < n / EZ_QK; b++, x += EZ_QK) {
        ez_block_q8_0 q;
        int sum = 0;
        float amax = 0.0f;
        for (int j = 0; j < EZ_QK; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        ez_llm_quant_q8_0_ref(x, &q, EZ_QK);
        for (int j = 0; j < EZ_QK; j++) sum += q.qs[j];
        memcpy(y[b].qs, q.qs, EZ_QK);
        y[b].d = ez_f16_to_f32(q.d);
        y[b].s = ez_f16_to_f32(ez_f32_to_f16((amax / 127.0f) * (float)sum));
    }
}

static void dot4_f16_ref(const float *a, int64_t lda, const uint16_t *b, int64_t n, float out[4]) {
    for (int r = 0; r < 4; r++) {
        double s = 0.0;
        for (int64_t i = 0; i < n; i++) s += (double)a[r * lda + i] * (double)ez_f16_to_f32(b[i]);
        out[r] = (float)s;
    }
}

static void axpy_f16_ref(float *y, float a, const uint16_t *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * ez_f16_to_f32(x[i]);
}

static void axpy4_f16_ref(float *y, int64_t ldy, const float w[4], const uint16_t *x, int64_t n) {
    for (int r = 0; r < 4; r++) axpy_f16_ref(y + r * ldy, w[r], x, n);
}

static void to_f16_ref(uint16_t *dst, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = ez_f32_to_f16(x[i]);
}

static const ez_llm_ops OPS_REF = {dot_ref,          axpy_ref,          dot4_ref,     axpy4_ref,
                                   rms_norm_ref,     gelu_tanh_mul_ref, silu_mul_ref, softmax_ref,
                                   ez_llm_quant_q8_0_ref, dot4_f16_ref, axpy_f16_ref, axpy4_f16_ref,
                                   to_f16_ref};

const ez_llm_ops *ez_llm_ops_ref(void) { return &OPS_REF; }

const ez_llm_ops *ez_llm_ops_active(void) {
    return EZ_SIMD_PICK(ez_llm_ops_avx512(), ez_llm_ops_avx2(), NULL, ez_llm_ops_neon(), &OPS_REF);
}

/* ---- rope ----------------------------------------------------------------------------- */

void ez_rope_angles(float *cs, int32_t pos, int n_rot, float base, float freq_scale, const float *factors) {
    for (int i = 0; i < n_rot / 2; i++) {
        double theta = (double)pos * (double)freq_scale * pow((double)base, -2.0 * i / (double)n_rot);
        if (factors) theta /= (double)factors[i];
        cs[2 * i] = (float)cos(theta);
        cs[2 * i + 1] = (float)sin(theta);
    }
}

void ez_rope_angles_scaled(float *cs, int32_t pos, int n_rot, const ez_rope_scaling *r) {
    const double span = EZ_MAX(0.001, (double)r->corr_hi - (double)r->corr_lo);
    for (int i = 0; i < n_rot / 2; i++) {
        double extrap = (double)pos * pow((double)r->base, -2.0 * i / (double)n_rot), theta;
        if (r->factors) extrap /= (double)r->factors[i];
        theta = (double)r->freq_scale * extrap;
        if (r->ext_factor != 0.0f) {
            double y = ((double)i - (double)r->corr_lo) / span, mix;
            y = y < 0.0 ? 0.0 : y > 1.0 ? 1.0 : y;
            mix = (1.0 - y) * (double)r->ext_factor;
            theta = theta * (1.0 - mix) + extrap * mix;
        }
        cs[2 * i] = (float)(cos(theta) * (double)r->mscale);
        cs[2 * i + 1] = (float)(sin(theta) * (double)r->mscale);
    }
}

void ez_rope(float *x, int n_heads, int head_dim, int n_rot, const float *cs, int neox) {
    const int half = n_rot / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            const float c = cs[2 * i], s = cs[2 * i + 1];
            const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            const float x0 = v[a], x1 = v[b];
            v[a] = x0 * c - x1 * s;
            v[b] = x0 * s + x1 * c;
        }
    }
}
