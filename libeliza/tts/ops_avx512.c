/* AVX-512 pieces of the fast Kokoro ops (ops_kernels.h): ops_avx2.c's
 * operations on 16 lanes, with the same polynomials, constants and
 * reductions per element (see that file for their error bounds), masks for
 * the tails. Compiled with the AVX-512 flags; used at the avx512 level only. */
#include "tts/ops_kernels.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>
#include <math.h>

#include "core/kernels/vmath_avx512.h"

/* ---- vector math ------------------------------------------------------------------ */

/* Valid where |x| <= 8192; sin_ps checks. */
static inline __m512 sin_ps_reduced(__m512 x) {
    const __m512 ax = _mm512_abs_ps(x);
    __m512i sign = _mm512_andnot_si512(_mm512_castps_si512(ax), _mm512_castps_si512(x));
    __m512i j = _mm512_cvttps_epi32(_mm512_mul_ps(ax, _mm512_set1_ps(1.27323954473516f)));
    __mmask16 use_cos;
    __m512 y, r, z, ps, pc, res;
    j = _mm512_and_si512(_mm512_add_epi32(j, _mm512_set1_epi32(1)), _mm512_set1_epi32(~1));
    y = _mm512_cvtepi32_ps(j);
    /* octants 4..7 flip the sign; octants 2, 3, 6, 7 take the cosine polynomial */
    sign = _mm512_xor_si512(sign, _mm512_slli_epi32(_mm512_and_si512(j, _mm512_set1_epi32(4)), 29));
    use_cos = _mm512_test_epi32_mask(j, _mm512_set1_epi32(2));
    r = _mm512_fnmadd_ps(y, _mm512_set1_ps(0.78515625f), ax);
    r = _mm512_fnmadd_ps(y, _mm512_set1_ps(2.4187564849853515625e-4f), r);
    r = _mm512_fnmadd_ps(y, _mm512_set1_ps(3.77489497744594108e-8f), r);
    z = _mm512_mul_ps(r, r);
    pc = _mm512_set1_ps(2.443315711809948e-5f);
    pc = _mm512_fmadd_ps(pc, z, _mm512_set1_ps(-1.388731625493765e-3f));
    pc = _mm512_fmadd_ps(pc, z, _mm512_set1_ps(4.166664568298827e-2f));
    pc = _mm512_mul_ps(_mm512_mul_ps(pc, z), z);
    pc = _mm512_fnmadd_ps(_mm512_set1_ps(0.5f), z, pc);
    pc = _mm512_add_ps(pc, _mm512_set1_ps(1.0f));
    ps = _mm512_set1_ps(-1.9515295891e-4f);
    ps = _mm512_fmadd_ps(ps, z, _mm512_set1_ps(8.3321608736e-3f));
    ps = _mm512_fmadd_ps(ps, z, _mm512_set1_ps(-1.6666654611e-1f));
    ps = _mm512_fmadd_ps(_mm512_mul_ps(ps, z), r, r);
    res = _mm512_mask_blend_ps(use_cos, ps, pc);
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(res), sign));
}

static inline __m512 sin_ps(__m512 x) {
    const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(x), _mm512_set1_ps(8192.0f), _CMP_NLE_UQ);
    if (EZ_UNLIKELY(big)) {
        float v[16];
        _mm512_storeu_ps(v, x);
        for (int i = 0; i < 16; i++) v[i] = sinf(v[i]);
        return _mm512_mask_blend_ps(big, sin_ps_reduced(x), _mm512_loadu_ps(v));
    }
    return sin_ps_reduced(x);
}

/* ---- Snake, AdaIN --------------------------------------------------------------------- */

static inline __m512 snake_ps(__m512 v, __m512 alpha, __m512 inv_alpha) {
    __m512 s = sin_ps(_mm512_mul_ps(alpha, v));
    return _mm512_fmadd_ps(inv_alpha, _mm512_mul_ps(s, s), v);
}

static void snake_avx512(float *x, int64_t n, float alpha) {
    const __m512 a = _mm512_set1_ps(alpha), ia = _mm512_set1_ps(1.0f / alpha);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, snake_ps(_mm512_loadu_ps(x + i), a, ia));
    if (i < n) {
        const __mmask16 m = ez_lanes_avx512(n - i);
        _mm512_mask_storeu_ps(x + i, m, snake_ps(_mm512_maskz_loadu_ps(m, x + i), a, ia));
    }
}

static void mean_var_avx512(const float *x, int64_t n, double *mean_out, double *var_out) {
    __m512d s0 = _mm512_setzero_pd(), s1 = s0, m;
    double sum, mean, var;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 a = _mm512_loadu_ps(x + i);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(a)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(a, 1)));
    }
    sum = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    for (; i < n; i++) sum += x[i];
    mean = sum / (double)n;
    m = _mm512_set1_pd(mean);
    s0 = s1 = _mm512_setzero_pd();
    for (i = 0; i + 16 <= n; i += 16) {
        __m512 a = _mm512_loadu_ps(x + i);
        __m512d d0 = _mm512_sub_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(a)), m);
        __m512d d1 = _mm512_sub_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(a, 1)), m);
        s0 = _mm512_fmadd_pd(d0, d0, s0);
        s1 = _mm512_fmadd_pd(d1, d1, s1);
    }
    var = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    for (; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    *mean_out = mean;
    *var_out = var / (double)n;
}

/* (x - mean) is formed in double and rounded once, as the reference does. */
static inline __m512 normalize_ps(__m512 v, __m512d mean, __m512 inv, __m512 scale, __m512 shift) {
    __m256 lo = _mm512_cvtpd_ps(_mm512_sub_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), mean));
    __m256 hi = _mm512_cvtpd_ps(_mm512_sub_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)), mean));
    __m512 d = _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
    return _mm512_fmadd_ps(scale, _mm512_mul_ps(d, inv), shift);
}

static inline __m512 act_ps(__m512 v, int act, __m512 param, __m512 inv_param) {
    if (act == EZ_TTS_ACT_SNAKE) return snake_ps(v, param, inv_param);
    if (act == EZ_TTS_ACT_LEAKY_RELU)
        return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), v, param);
    return v;
}

static void affine_act_avx512(float *x, int64_t n, double mean, float inv, float scale, float shift, int act,
                              float param) {
    const __m512d m = _mm512_set1_pd(mean);
    const __m512 vi = _mm512_set1_ps(inv), vs = _mm512_set1_ps(scale), vb = _mm512_set1_ps(shift);
    const __m512 p = _mm512_set1_ps(param), ip = _mm512_set1_ps(1.0f / param);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(x + i, act_ps(normalize_ps(_mm512_loadu_ps(x + i), m, vi, vs, vb), act, p, ip));
    if (i < n) {
        const __mmask16 mask = ez_lanes_avx512(n - i);
        __m512 v = normalize_ps(_mm512_maskz_loadu_ps(mask, x + i), m, vi, vs, vb);
        _mm512_mask_storeu_ps(x + i, mask, act_ps(v, act, p, ip));
    }
}

/* ---- GELU (tanh form) ----------------------------------------------------------------- */

static void gelu_tanh_avx512(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, ez_gelu_tanh_avx512(_mm512_loadu_ps(x + i)));
    if (i < n) {
        const __mmask16 m = ez_lanes_avx512(n - i);
        _mm512_mask_storeu_ps(x + i, m, ez_gelu_tanh_avx512(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

static const ez_tts_kernels avx512_kernels = {
    snake_avx512, mean_var_avx512, affine_act_avx512, gelu_tanh_avx512,
};

const ez_tts_kernels *ez_tts_kernels_avx512(void) { return &avx512_kernels; }

#else

const ez_tts_kernels *ez_tts_kernels_avx512(void) { return NULL; }

#endif
