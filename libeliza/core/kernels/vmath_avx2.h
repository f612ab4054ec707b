/* Vector math for AVX2 + FMA kernels, shared by the models' *_avx2.c files
 * (include it only from files compiled with -mavx2 -mfma, inside their
 * EZ_ARCH_X86_64 block).
 *
 * ez_exp_avx2: e^x for x clamped to [-87.3, 88.3]: x = n ln2 + r with
 *   |r| <= ln2 / 2, e^r by Cephes' expf polynomial (degree 7 in r, about
 *   1 ulp), 2^n through the exponent bits.
 * ez_sigmoid_avx2: 1 / (1 + e^-x) on top of it.
 * ez_gelu_tanh_avx2: GELU's tanh form 0.5 x (1 + tanh u), u = sqrt(2 / pi)
 *   (x + 0.044715 x^3), as x / (1 + e^-2u): no cancellation, no overflow.
 * ez_transpose8x8_avx2: an 8 x 8 block of floats in eight registers, rows
 *   in, columns out. */
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

static inline __m256 ez_gelu_tanh_avx2(__m256 x) {
    const __m256 m2k = _mm256_set1_ps(-2.0f * 0.7978845608028654f), c = _mm256_set1_ps(0.044715f);
    __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
    __m256 e = ez_exp_avx2(_mm256_mul_ps(m2k, _mm256_fmadd_ps(c, x3, x)));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* r[i] = row i of an 8 x 8 block in, column i out. */
static inline void ez_transpose8x8_avx2(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) {
        u[4 * h + 0] = _mm256_shuffle_ps(t[4 * h + 0], t[4 * h + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h + 0], t[4 * h + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
        r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
    }
}

#endif /* EZ_VMATH_AVX2_H */
