/* AVX2 + FMA pieces of the fast Kokoro ops (ops_kernels.h). Compiled with
 * -mavx2 -mfma on x86-64 and only called when the CPU has them.
 *
 * sin and exp are Cephes' single-precision polynomials, evaluated with FMA.
 * Errors measured against double-precision libm (every fifth float of the
 * range for sin, steps of 1e-5 for exp):
 *  - sin_ps: reduction by pi/4 in three parts (exact products for
 *    |x| <= 8192), degree-7 odd / degree-8 even polynomials: absolute error
 *    <= 7.8e-8 on [-8192, 8192], relative error <= 1.6 ulp wherever
 *    |sin x| >= 1e-3 or |x| < 1. Lanes with |x| > 8192, inf or NaN go
 *    through libm sinf.
 *  - ez_exp_avx2 (core/kernels/vmath_avx2.h): x = n ln2 + r, degree-7 polynomial in r: <= 1.3 ulp on
 *    [-87.3, 88.3] (inputs are clamped to that range).
 * tests/c/test_tts_ops.c holds the ops that use them to bounds derived
 * from these. */
#include "tts/ops_kernels.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>
#include <math.h>

#include "core/kernels/vmath_avx2.h"

/* ---- vector math ------------------------------------------------------------------ */

/* Valid where |x| <= 8192 (see the file comment); sin_ps checks. */
static inline __m256 sin_ps_reduced(__m256 x) {
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    __m256 ax = _mm256_andnot_ps(sign_bit, x);
    __m256 sign = _mm256_and_ps(x, sign_bit);
    __m256i j = _mm256_cvttps_epi32(_mm256_mul_ps(ax, _mm256_set1_ps(1.27323954473516f)));
    __m256 y, r, z, ps, pc, use_cos, res;
    j = _mm256_and_si256(_mm256_add_epi32(j, _mm256_set1_epi32(1)), _mm256_set1_epi32(~1));
    y = _mm256_cvtepi32_ps(j);
    /* octants 4..7 flip the sign; octants 2, 3, 6, 7 take the cosine polynomial */
    sign = _mm256_xor_ps(sign, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(j, _mm256_set1_epi32(4)), 29)));
    use_cos = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(j, _mm256_set1_epi32(2)), _mm256_set1_epi32(2)));
    r = _mm256_fnmadd_ps(y, _mm256_set1_ps(0.78515625f), ax);
    r = _mm256_fnmadd_ps(y, _mm256_set1_ps(2.4187564849853515625e-4f), r);
    r = _mm256_fnmadd_ps(y, _mm256_set1_ps(3.77489497744594108e-8f), r);
    z = _mm256_mul_ps(r, r);
    pc = _mm256_set1_ps(2.443315711809948e-5f);
    pc = _mm256_fmadd_ps(pc, z, _mm256_set1_ps(-1.388731625493765e-3f));
    pc = _mm256_fmadd_ps(pc, z, _mm256_set1_ps(4.166664568298827e-2f));
    pc = _mm256_mul_ps(_mm256_mul_ps(pc, z), z);
    pc = _mm256_fnmadd_ps(_mm256_set1_ps(0.5f), z, pc);
    pc = _mm256_add_ps(pc, _mm256_set1_ps(1.0f));
    ps = _mm256_set1_ps(-1.9515295891e-4f);
    ps = _mm256_fmadd_ps(ps, z, _mm256_set1_ps(8.3321608736e-3f));
    ps = _mm256_fmadd_ps(ps, z, _mm256_set1_ps(-1.6666654611e-1f));
    ps = _mm256_fmadd_ps(_mm256_mul_ps(ps, z), r, r);
    res = _mm256_blendv_ps(ps, pc, use_cos);
    return _mm256_xor_ps(res, sign);
}

static inline __m256 sin_ps(__m256 x) {
    __m256 big = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(8192.0f), _CMP_NLE_UQ);
    if (EZ_UNLIKELY(_mm256_movemask_ps(big))) {
        float v[8];
        _mm256_storeu_ps(v, x);
        for (int i = 0; i < 8; i++) v[i] = sinf(v[i]);
        return _mm256_blendv_ps(sin_ps_reduced(x), _mm256_loadu_ps(v), big);
    }
    return sin_ps_reduced(x);
}

/* Lanes [0, n) of a partial vector, n in [1, 8). */
static inline __m256i tail_mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* ---- Snake, AdaIN --------------------------------------------------------------------- */

static inline __m256 snake_ps(__m256 v, __m256 alpha, __m256 inv_alpha) {
    __m256 s = sin_ps(_mm256_mul_ps(alpha, v));
    return _mm256_fmadd_ps(inv_alpha, _mm256_mul_ps(s, s), v);
}

static void snake_avx2(float *x, int64_t n, float alpha) {
    const __m256 a = _mm256_set1_ps(alpha), ia = _mm256_set1_ps(1.0f / alpha);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, snake_ps(_mm256_loadu_ps(x + i), a, ia));
    if (i < n) {
        __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(x + i, m, snake_ps(_mm256_maskload_ps(x + i, m), a, ia));
    }
}

static inline double hsum_pd(__m256d v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

static void mean_var_avx2(const float *x, int64_t n, double *mean_out, double *var_out) {
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0, m;
    double sum, mean, var;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
        s2 = _mm256_add_pd(s2, _mm256_cvtps_pd(_mm256_castps256_ps128(b)));
        s3 = _mm256_add_pd(s3, _mm256_cvtps_pd(_mm256_extractf128_ps(b, 1)));
    }
    sum = hsum_pd(_mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
    for (; i < n; i++) sum += x[i];
    mean = sum / (double)n;
    m = _mm256_set1_pd(mean);
    s0 = s1 = s2 = s3 = _mm256_setzero_pd();
    for (i = 0; i + 16 <= n; i += 16) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(a)), m);
        __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)), m);
        __m256d d2 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(b)), m);
        __m256d d3 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(b, 1)), m);
        s0 = _mm256_fmadd_pd(d0, d0, s0);
        s1 = _mm256_fmadd_pd(d1, d1, s1);
        s2 = _mm256_fmadd_pd(d2, d2, s2);
        s3 = _mm256_fmadd_pd(d3, d3, s3);
    }
    var = hsum_pd(_mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
    for (; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    *mean_out = mean;
    *var_out = var / (double)n;
}

/* (x - mean) is formed in double and rounded once, as the reference does. */
static inline __m256 normalize_ps(__m256 v, __m256d mean, __m256 inv, __m256 scale, __m256 shift) {
    __m128 lo = _mm256_cvtpd_ps(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), mean));
    __m128 hi = _mm256_cvtpd_ps(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), mean));
    __m256 d = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
    return _mm256_fmadd_ps(scale, _mm256_mul_ps(d, inv), shift);
}

static inline __m256 act_ps(__m256 v, int act, __m256 param, __m256 inv_param) {
    if (act == EZ_TTS_ACT_SNAKE) return snake_ps(v, param, inv_param);
    if (act == EZ_TTS_ACT_LEAKY_RELU)
        return _mm256_blendv_ps(v, _mm256_mul_ps(v, param), _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ));
    return v;
}

static void affine_act_avx2(float *x, int64_t n, double mean, float inv, float scale, float shift, int act,
                            float param) {
    const __m256d m = _mm256_set1_pd(mean);
    const __m256 vi = _mm256_set1_ps(inv), vs = _mm256_set1_ps(scale), vb = _mm256_set1_ps(shift);
    const __m256 p = _mm256_set1_ps(param), ip = _mm256_set1_ps(1.0f / param);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, act_ps(normalize_ps(_mm256_loadu_ps(x + i), m, vi, vs, vb), act, p, ip));
    if (i < n) {
        __m256i mask = tail_mask(n - i);
        __m256 v = normalize_ps(_mm256_maskload_ps(x + i, mask), m, vi, vs, vb);
        _mm256_maskstore_ps(x + i, mask, act_ps(v, act, p, ip));
    }
}

/* ---- GELU (tanh form) ----------------------------------------------------------------- */

static void gelu_tanh_avx2(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, ez_gelu_tanh_avx2(_mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i m = tail_mask(n - i);
        _mm256_maskstore_ps(x + i, m, ez_gelu_tanh_avx2(_mm256_maskload_ps(x + i, m)));
    }
}

static const ez_tts_kernels avx2_kernels = {
    snake_avx2, mean_var_avx2, affine_act_avx2, gelu_tanh_avx2,
};

const ez_tts_kernels *ez_tts_kernels_avx2(void) { return &avx2_kernels; }

#else

const ez_tts_kernels *ez_tts_kernels_avx2(void) { return NULL; }

#endif
