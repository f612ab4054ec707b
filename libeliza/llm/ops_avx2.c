/* AVX2 + FMA variants of the LLM vector ops (compiled with -mavx2 -mfma
 * -mf16c; used only when the CPU has them). Same contracts as the reference
 * in ops.c; exp is Cephes' single-precision polynomial (about 1 ulp). */
#include "ops.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>
#include <math.h>

#include "core/kernels/vmath_avx2.h"
#include "core/quant.h"

static inline float hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

static inline float hmax256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_max_ps(lo, hi);
    lo = _mm_max_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_max_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

/* Each of axpy, dot4 and axpy4 has one body for F32 and F16 operands
 * (the KV cache's halves, widened exactly by F16C); `f16` is a constant in
 * every caller, so each variant compiles to its own loop. */
static inline __m256 load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

static inline __m256 load8(const void *x, int64_t i, int f16) {
    return f16 ? load_f16((const uint16_t *)x + i) : _mm256_loadu_ps((const float *)x + i);
}

static inline float value_at(const void *x, int64_t i, int f16) {
    return f16 ? _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(((const uint16_t *)x)[i]))) : ((const float *)x)[i];
}

static float dot_avx2(const float *a, const float *b, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    int64_t i = 0;
    float s;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s = hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static EZ_ALWAYS_INLINE void axpy_body(float *y, float a, const void *x, int64_t n, int f16) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, load8(x, i, f16), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * value_at(x, i, f16);
}

static EZ_ALWAYS_INLINE void dot4_body(const float *a, int64_t lda, const void *b, int64_t n, float out[4], int f16) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    __m128 t01, t23;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = load8(b, i, f16);
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), v, s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + lda + i), v, s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + 2 * lda + i), v, s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + 3 * lda + i), v, s3);
    }
    /* four horizontal sums at once: lanes of t01 / t23 pair up, hadd twice */
    s0 = _mm256_hadd_ps(s0, s1);
    s2 = _mm256_hadd_ps(s2, s3);
    s0 = _mm256_hadd_ps(s0, s2);
    t01 = _mm256_castps256_ps128(s0);
    t23 = _mm256_extractf128_ps(s0, 1);
    _mm_storeu_ps(out, _mm_add_ps(t01, t23));
    for (; i < n; i++)
        for (int r = 0; r < 4; r++) out[r] += a[r * lda + i] * value_at(b, i, f16);
}

static EZ_ALWAYS_INLINE void axpy4_body(float *y, int64_t ldy, const float w[4], const void *x, int64_t n, int f16) {
    const __m256 w0 = _mm256_set1_ps(w[0]), w1 = _mm256_set1_ps(w[1]), w2 = _mm256_set1_ps(w[2]),
                 w3 = _mm256_set1_ps(w[3]);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = load8(x, i, f16);
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(w0, v, _mm256_loadu_ps(y + i)));
        _mm256_storeu_ps(y + ldy + i, _mm256_fmadd_ps(w1, v, _mm256_loadu_ps(y + ldy + i)));
        _mm256_storeu_ps(y + 2 * ldy + i, _mm256_fmadd_ps(w2, v, _mm256_loadu_ps(y + 2 * ldy + i)));
        _mm256_storeu_ps(y + 3 * ldy + i, _mm256_fmadd_ps(w3, v, _mm256_loadu_ps(y + 3 * ldy + i)));
    }
    for (; i < n; i++)
        for (int r = 0; r < 4; r++) y[r * ldy + i] += w[r] * value_at(x, i, f16);
}

static void axpy_avx2(float *y, float a, const float *x, int64_t n) { axpy_body(y, a, x, n, 0); }
static void dot4_avx2(const float *a, int64_t lda, const float *b, int64_t n, float out[4]) {
    dot4_body(a, lda, b, n, out, 0);
}
static void axpy4_avx2(float *y, int64_t ldy, const float w[4], const float *x, int64_t n) {
    axpy4_body(y, ldy, w, x, n, 0);
}
static void axpy_f16_avx2(float *y, float a, const uint16_t *x, int64_t n) { axpy_body(y, a, x, n, 1); }
static void dot4_f16_avx2(const float *a, int64_t lda, const uint16_t *b, int64_t n, float out[4]) {
    dot4_body(a, lda, b, n, out, 1);
}
static void axpy4_f16_avx2(float *y, int64_t ldy, const float w[4], const uint16_t *x, int64_t n) {
    axpy4_body(y, ldy, w, x, n, 1);
}

static void rms_norm_avx2(float *y, const float *x, const float *w, int64_t n, float eps) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    __m256 vs;
    int64_t i = 0;
    float ss, scale;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        s0 = _mm256_fmadd_ps(a, a, s0);
        s1 = _mm256_fmadd_ps(b, b, s1);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_loadu_ps(x + i);
        s0 = _mm256_fmadd_ps(a, a, s0);
    }
    ss = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++) ss += x[i] * x[i];
    scale = 1.0f / sqrtf(ss / (float)n + eps);
    vs = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
    for (; i < n; i++) y[i] = x[i] * scale * w[i];
}

static void gelu_tanh_mul_avx2(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(g + i, _mm256_mul_ps(ez_gelu_tanh_avx2(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
    for (; i < n; i++) {
        float x = g[i];
        float t = -2.0f * 0.7978845608028654f * (x + 0.044715f * x * x * x);
        g[i] = x / (1.0f + expf(t)) * u[i];
    }
}

static void silu_mul_avx2(float *g, const float *u, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 neg = _mm256_set1_ps(-0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, ez_exp_avx2(_mm256_xor_ps(x, neg))));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void softmax_avx2(float *x, int64_t n) {
    __m256 vmax = _mm256_set1_ps(-INFINITY), vsum = _mm256_setzero_ps(), vm, vinv;
    int64_t i = 0;
    float mx, sum, inv;
    for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
    mx = hmax256(vmax);
    for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    vm = _mm256_set1_ps(mx);
    for (i = 0; i + 8 <= n; i += 8) {
        /* below -87.3 ez_exp_avx2 clamps; expf is (nearly) 0 there */
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
        __m256 e = _mm256_andnot_ps(_mm256_cmp_ps(d, _mm256_set1_ps(-87.3f), _CMP_LT_OQ), ez_exp_avx2(d));
        _mm256_storeu_ps(x + i, e);
        vsum = _mm256_add_ps(vsum, e);
    }
    sum = hsum256(vsum);
    for (; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    inv = 1.0f / sum;
    vinv = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
    for (; i < n; i++) x[i] *= inv;
}

/* Bit-identical to ez_llm_quant_q8_0_ref on x86-64 (ggml's AVX2 loop):
 * id = 127 / amax, _mm256_round_ps to nearest even. */
static void quant_q8_0_avx2(const float *x, void *dst, int64_t n) {
    ez_block_q8_0 *y = (ez_block_q8_0 *)dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < n / EZ_QK; b++, x += EZ_QK) {
        __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
        __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        const float amax = hmax256(m);
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        __m256i i0, i1, i2, i3;
        y[b].d = ez_f32_to_f16(amax / 127.0f);
        i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        /* packs work per 128-bit lane; the permute puts the 4-byte groups back in order */
        i0 = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        _mm256_storeu_si256((__m256i *)y[b].qs, _mm256_permutevar8x32_epi32(i0, perm));
    }
}

/* ---- the F16 KV cache's conversions ---- */

static void to_f16_avx2(uint16_t *dst, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = ez_f32_to_f16(x[i]);
}

static const ez_llm_ops OPS_AVX2 = {dot_avx2,        axpy_avx2,          dot4_avx2,      axpy4_avx2,
                                    rms_norm_avx2,   gelu_tanh_mul_avx2, silu_mul_avx2,  softmax_avx2,
                                    quant_q8_0_avx2, dot4_f16_avx2,      axpy_f16_avx2,  axpy4_f16_avx2,
                                    to_f16_avx2};

const ez_llm_ops *ez_llm_ops_avx2(void) { return &OPS_AVX2; }

#else

const ez_llm_ops *ez_llm_ops_avx2(void) { return NULL; }

#endif
