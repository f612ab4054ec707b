/* Vector math for AVX2 + FMA kernels, shared by the models' *_avx2.c files
 * (include it only from files compiled with -mavx2 -mfma, inside their
 * EZ_ARCH_X86_64 block).
 *
 * ez_exp_avx2: e^x for x clamped to [-87.3, 88.3]: x = n ln2 + r with
 *   |r| <= ln2 / 2, e^r by Cephes' expf polynomial (degree 7 in r, about
 *   1 ulp), 2^n through the exponent bits.
 * ez_sigmoid_avx2: 1 / (1 + e^-x) on top of it. */
#ifndef EZ_VMATH_AVX2_H
#define EZ_VMATH_AVX2_H

#include <immintrin.h>

static inline __m256 ez_exp_avx2(__m256 x) {
    const __m256 ln2_hi = _mm256_set1_ps(0.693359375f), ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
    __m256 n, r, p;
    __m256i e;
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_fnmadd_ps(n, ln2_hi, x);
    r = _mm256_fnmadd_ps(n, ln2_lo, r);
    p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

static inline __m256 ez_sigmoid_avx2(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    return _mm256_div_ps(one, _mm256_add_ps(one, ez_exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

#endif /* EZ_VMATH_AVX2_H */
