/* AVX2 + FMA variants of the Mamba2 kernels (compiled with -mavx2 -mfma;
 * used only when the CPU has them). Same contracts as the reference in
 * ssm.c: the conv runs eight channels per register (their windows gathered
 * once per call, the frames read as rows), the step eight state entries. */
#include "ssm.h"

#if EZ_ARCH_X86_64

#include <assert.h>
#include <immintrin.h>

#include "core/kernels/vmath_avx2.h"

static inline float hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

static inline const float *frame(const float *state, const float *x, int64_t ld_x, int n_ch, int d_conv, int s) {
    return s < 0 ? state + (int64_t)(d_conv - 1 + s) * n_ch : x + (int64_t)s * ld_x;
}

static void conv_avx2(const float *state, const float *x, int64_t ld_x, const float *w, const float *b, float *y,
                      int64_t ld_y, int n_tok, int n_ch, int d_conv) {
    const __m256i lanes = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(d_conv));
    int c = 0;
    assert(d_conv <= EZ_SSM_MAX_CONV);
    for (; c + 8 <= n_ch; c += 8) {
        __m256 wk[EZ_SSM_MAX_CONV];
        const __m256 bias = b ? _mm256_loadu_ps(b + c) : _mm256_setzero_ps();
        for (int k = 0; k < d_conv; k++) wk[k] = _mm256_i32gather_ps(w + (int64_t)c * d_conv + k, lanes, 4);
        for (int t = 0; t < n_tok; t++) {
            __m256 acc = bias;
            for (int k = 0; k < d_conv; k++)
                acc = _mm256_fmadd_ps(wk[k], _mm256_loadu_ps(frame(state, x, ld_x, n_ch, d_conv, t - d_conv + 1 + k) + c),
                                      acc);
            _mm256_storeu_ps(y + (int64_t)t * ld_y + c, _mm256_mul_ps(acc, ez_sigmoid_avx2(acc)));
        }
    }
    for (; c < n_ch; c++) {
        for (int t = 0; t < n_tok; t++) {
            float acc = b ? b[c] : 0.0f;
            for (int k = 0; k < d_conv; k++)
                acc += w[(int64_t)c * d_conv + k] * frame(state, x, ld_x, n_ch, d_conv, t - d_conv + 1 + k)[c];
            y[(int64_t)t * ld_y + c] = acc / (1.0f + expf(-acc));
        }
    }
}

static void step_avx2(const ez_ssm_shape *s, float *state, const float *x, const float *B, const float *C,
                      const float *dt, const float *dt_bias, const float *A, const float *D, float *y, int h0, int h1) {
    const int P = s->head_dim, N = s->d_state, heads_per_group = s->n_head / s->n_group;
    for (int h = h0; h < h1; h++) {
        const float dth = ez_softplus(dt[h] + dt_bias[h]), dA = expf(dth * A[h]);
        const float *Bg = B + (int64_t)(h / heads_per_group) * N, *Cg = C + (int64_t)(h / heads_per_group) * N;
        const __m256 vdA = _mm256_set1_ps(dA);
        for (int p = 0; p < P; p++) {
            float *sp = state + ((int64_t)h * P + p) * N;
            const float xp = x[h * P + p], xdt = xp * dth;
            const __m256 vxdt = _mm256_set1_ps(xdt);
            __m256 acc = _mm256_setzero_ps();
            float tail = 0.0f;
            int n = 0;
            for (; n + 8 <= N; n += 8) {
                const __m256 sn = _mm256_fmadd_ps(vxdt, _mm256_loadu_ps(Bg + n), _mm256_mul_ps(_mm256_loadu_ps(sp + n), vdA));
                _mm256_storeu_ps(sp + n, sn);
                acc = _mm256_fmadd_ps(sn, _mm256_loadu_ps(Cg + n), acc);
            }
            for (; n < N; n++) {
                sp[n] = sp[n] * dA + xdt * Bg[n];
                tail += sp[n] * Cg[n];
            }
            y[h * P + p] = hsum256(acc) + tail + D[h] * xp;
        }
    }
}

static const ez_ssm_ops SSM_AVX2 = {conv_avx2, step_avx2};

const ez_ssm_ops *ez_ssm_ops_avx2(void) { return &SSM_AVX2; }

#else

const ez_ssm_ops *ez_ssm_ops_avx2(void) { return NULL; }

#endif
