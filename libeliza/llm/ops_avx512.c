/* AVX-512 variants of the LLM vector ops (see ops_avx2.c; compiled with the
 * AVX-512 flags, used at the avx512 level only): 16 lanes, masked tails in
 * the same lanes, so every element of a row is treated alike. */
#include "ops.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>
#include <math.h>

#include "core/kernels/vmath_avx512.h"
#include "core/quant.h"

/* x[i .. i + 16), masked to m, as floats: F32 or the KV cache's halves
 * (widened exactly by vcvtph2ps). */
static inline __m512 load16(const void *x, int64_t i, __mmask16 m, int f16) {
    return f16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)x + i))
               : _mm512_maskz_loadu_ps(m, (const float *)x + i);
}

static float dot_avx512(const float *a, const float *b, int64_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), s3);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = ez_lanes_avx512(EZ_MIN(n - i, (int64_t)16));
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

static EZ_ALWAYS_INLINE void axpy_body(float *y, float a, const void *x, int64_t n, int f16) {
    const __m512 va = _mm512_set1_ps(a);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = ez_lanes_avx512(EZ_MIN(n - i, (int64_t)16));
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(va, load16(x, i, m, f16), _mm512_maskz_loadu_ps(m, y + i)));
    }
}

static EZ_ALWAYS_INLINE void dot4_body(const float *a, int64_t lda, const void *b, int64_t n, float out[4], int f16) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = ez_lanes_avx512(EZ_MIN(n - i, (int64_t)16));
        const __m512 v = load16(b, i, m, f16);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), v, s0);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + lda + i), v, s1);
        s2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + 2 * lda + i), v, s2);
        s3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + 3 * lda + i), v, s3);
    }
    out[0] = _mm512_reduce_add_ps(s0);
    out[1] = _mm512_reduce_add_ps(s1);
    out[2] = _mm512_reduce_add_ps(s2);
    out[3] = _mm512_reduce_add_ps(s3);
}

static EZ_ALWAYS_INLINE void axpy4_body(float *y, int64_t ldy, const float w[4], const void *x, int64_t n, int f16) {
    const __m512 w0 = _mm512_set1_ps(w[0]), w1 = _mm512_set1_ps(w[1]), w2 = _mm512_set1_ps(w[2]),
                 w3 = _mm512_set1_ps(w[3]);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = ez_lanes_avx512(EZ_MIN(n - i, (int64_t)16));
        const __m512 v = load16(x, i, m, f16);
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(w0, v, _mm512_maskz_loadu_ps(m, y + i)));
        _mm512_mask_storeu_ps(y + ldy + i, m, _mm512_fmadd_ps(w1, v, _mm512_maskz_loadu_ps(m, y + ldy + i)));
        _mm512_mask_storeu_ps(y + 2 * ldy + i, m, _mm512_fmadd_ps(w2, v, _mm512_maskz_loadu_ps(m, y + 2 * ldy + i)));
        _mm512_mask_storeu_ps(y + 3 * ldy + i, m, _mm512_fmadd_ps(w3, v, _mm512_maskz_loadu_ps(m, y + 3 * ldy + i)));
    }
}

static void axpy_avx512(float *y, float a, const float *x, int64_t n) { axpy_body(y, a, x, n, 0); }
static void dot4_avx512(const float *a, int64_t lda, const float *b, int64_t n, float out[4]) {
    dot4_body(a, lda, b, n, out, 0);
}
static void axpy4_avx512(float *y, int64_t ldy, const float w[4], const float *x, int64_t n) {
    axpy4_body(y, ldy, w, x, n, 0);
}
static void axpy_f16_avx512(float *y, float a, const uint16_t *x, int64_t n) { axpy_body(y, a, x, n, 1); }
static void dot4_f16_avx512(const float *a, int64_t lda, const uint16_t *b, int64_t n, float out[4]) {
    dot4_body(a, lda, b, n, out, 1);
}
static void axpy4_f16_avx512(float *y, int64_t ldy, const float w[4], const uint16_t *x, int64_t n) {
    axpy4_body(y, ldy, w, x, n, 1);
}

static void rms_norm_avx512(float *y, const float *x, const float *w, int64_t n, float eps) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, vs;
    int64_t i = 0;
    float scale;
    for (; i + 32 <= n; i += 32) {
        const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        s0 = _mm512_fmadd_ps(a, a, s0);
        s1 = _mm512_fmadd_ps(b, b, s1);
    }
    for (; i < n; i += 16) {
        const __m512 a = _mm512_maskz_loadu_ps(ez_lanes_avx512(EZ_MIN(n - i, (int64_t)16)), x + i);
        s0 = _mm512_fmadd_ps(a, a, s0);
    }
    scale = 1.0f / sqrtf(_mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) / (float)n + eps);
    vs = _mm512_set1_ps(scale);
    for (i = 0; i < n; i += 16) {
        const __mmask16 m = ez_lanes_avx512(EZ_MIN(n - i, (int64_t)16));
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vs),
                                                       _mm512_maskz_loadu_ps(m, w + i)));
    }
}

static void gelu_tanh_mul_avx512(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = ez_lanes_avx512(EZ_MIN(n - i, (int64_t)16));
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(ez_gelu_tanh_avx512(_mm512_maskz_loadu_ps(m, g + i)),
                                                       _mm512_maskz_loadu_ps(m, u + i)));
    }
}

static void silu_mul_avx512(float *g, const float *u, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = ez_lanes_avx512(EZ_MIN(n - i, (int64_t)16));
        const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        const __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, ez_exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, u + i)));
    }
}

static void softmax_avx512(float *x, int64_t n) {
    __m512 vmax = _mm512_set1_ps(-INFINITY), vsum = _mm512_setzero_ps(), vm, vinv;
    int64_t i;
    for (i = 0; i < n; i += 16) {
        const __mmask16 m = ez_lanes_avx512(EZ_MIN(n - i, (int64_t)16));
        vmax = _mm512_mask_max_ps(vmax, m, vmax, _mm512_maskz_loadu_ps(m, x + i));
    }
    vm = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
    for (i = 0; i < n; i += 16) {
        /* below -87.3 ez_exp_avx512 clamps; expf is (nearly) 0 there */
        const __mmask16 m = ez_lanes_avx512(EZ_MIN(n - i, (int64_t)16));
        const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vm);
        const __mmask16 keep = m & _mm512_cmp_ps_mask(d, _mm512_set1_ps(-87.3f), _CMP_GE_OQ);
        const __m512 e = _mm512_maskz_mov_ps(keep, ez_exp_avx512(d));
        _mm512_mask_storeu_ps(x + i, m, e);
        vsum = _mm512_add_ps(vsum, e);
    }
    vinv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
    for (i = 0; i < n; i += 16) {
        const __mmask16 m = ez_lanes_avx512(EZ_MIN(n - i, (int64_t)16));
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vinv));
    }
}

/* Bit-identical to ez_llm_quant_q8_0_ref (id = 127 / amax, rounding to
 * nearest even); the saturating narrow keeps the bytes in order. */
static void quant_q8_0_avx512(const float *x, void *dst, int64_t n) {
    ez_block_q8_0 *y = (ez_block_q8_0 *)dst;
    for (int64_t b = 0; b < n / EZ_QK; b++, x += EZ_QK) {
        const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const __m512 vid = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        const __m512i i0 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m512i i1 = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        y[b].d = ez_f32_to_f16(amax / 127.0f);
        _mm_storeu_si128((__m128i *)y[b].qs, _mm512_cvtsepi32_epi8(i0));
        _mm_storeu_si128((__m128i *)(y[b].qs + 16), _mm512_cvtsepi32_epi8(i1));
    }
}

static void to_f16_avx512(uint16_t *dst, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = ez_f32_to_f16(x[i]);
}

static const ez_llm_ops OPS_AVX512 = {dot_avx512,        axpy_avx512,          dot4_avx512,     axpy4_avx512,
                                      rms_norm_avx512,   gelu_tanh_mul_avx512, silu_mul_avx512, softmax_avx512,
                                      quant_q8_0_avx512, dot4_f16_avx512,      axpy_f16_avx512, axpy4_f16_avx512,
                                      to_f16_avx512};

const ez_llm_ops *ez_llm_ops_avx512(void) { return &OPS_AVX512; }

#else

const ez_llm_ops *ez_llm_ops_avx512(void) { return NULL; }

#endif
