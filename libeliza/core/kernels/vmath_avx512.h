/* Vector math for AVX-512 kernels, shared by the models' *_avx512.c files
 * (include it only from files compiled with the AVX-512 flags, inside their
 * EZ_ARCH_X86_64 block). The same formulas and constants as vmath_avx2.h,
 * on 16 lanes; see there for their error bounds.
 *
 * ez_exp_avx512: e^x for x clamped to [-87.3, 88.3] (n ln2 + r, Cephes'
 *   degree-7 polynomial, 2^n through the exponent bits: _mm512_scalef_ps).
 * ez_sigmoid_avx512: 1 / (1 + e^-x).
 * ez_gelu_tanh_avx512: GELU's tanh form as x / (1 + e^-2u). */
#ifndef EZ_VMATH_AVX512_H
#define EZ_VMATH_AVX512_H

#include <immintrin.h>

static inline __m512 ez_exp_avx512(__m512 x) {
    const __m512 ln2_hi = _mm512_set1_ps(0.693359375f), ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
    __m512 n, r, p;
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
    n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm512_fnmadd_ps(n, ln2_hi, x);
    r = _mm512_fnmadd_ps(n, ln2_lo, r);
    p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

static inline __m512 ez_sigmoid_avx512(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(one, _mm512_add_ps(one, ez_exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

static inline __m512 ez_gelu_tanh_avx512(__m512 x) {
    const __m512 m2k = _mm512_set1_ps(-2.0f * 0.7978845608028654f), c = _mm512_set1_ps(0.044715f);
    __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
    __m512 e = ez_exp_avx512(_mm512_mul_ps(m2k, _mm512_fmadd_ps(c, x3, x)));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

/* The first n (<= 16) lanes. */
static inline __mmask16 ez_lanes_avx512(int64_t n) { return (__mmask16)((1u << n) - 1u); }

#endif /* EZ_VMATH_AVX512_H */
