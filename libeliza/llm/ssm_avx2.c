/* AVX2 + FMA variants of the Mamba2 kernels (compiled with -mavx2 -mfma;
 * used only when the CPU has them). Same contracts as the reference in
 * ssm.c: the conv runs eight channels per register over blocks of
 * channels (their windows transposed once per call, each token's frames
 * read as contiguous rows), the step eight state entries. */
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

/* Channels per block of the conv: their windows, transposed to [K][block],
 * stay in L1 while the block's frames are read row after row. */
#define CONV_BLOCK 256

static void conv_avx2(const float *state, const float *x, int64_t ld_x, const float *w, const float *b, float *y,
                      int64_t ld_y, int n_tok, int n_ch, int d_conv) {
    float wt[EZ_SSM_MAX_CONV * CONV_BLOCK];
    assert(d_conv <= EZ_SSM_MAX_CONV);
    for (int c0 = 0; c0 < n_ch; c0 += CONV_BLOCK) {
        const int nc = n_ch - c0 < CONV_BLOCK ? n_ch - c0 : CONV_BLOCK, nv = nc & ~7;
        for (int c = 0; c < nc; c++)
            for (int k = 0; k < d_conv; k++) wt[k * CONV_BLOCK + c] = w[(int64_t)(c0 + c) * d_conv + k];
        for (int t = 0; t < n_tok; t++) {
            const float *fr[EZ_SSM_MAX_CONV];
            float *yt = y + (int64_t)t * ld_y + c0;
            for (int k = 0; k < d_conv; k++) fr[k] = frame(state, x, ld_x, n_ch, d_conv, t - d_conv + 1 + k) + c0;
            for (int c = 0; c < nv; c += 8) {
                __m256 acc = b ? _mm256_loadu_ps(b + c0 + c) : _mm256_setzero_ps();
                for (int k = 0; k < d_conv; k++)
                    acc = _mm256_fmadd_ps(_mm256_loadu_ps(wt + k * CONV_BLOCK + c), _mm256_loadu_ps(fr[k] + c), acc);
                _mm256_storeu_ps(yt + c, _mm256_mul_ps(acc, ez_sigmoid_avx2(acc)));
            }
            for (int c = nv; c < nc; c++) {
                float acc = b ? b[c0 + c] : 0.0f;
                for (int k = 0; k < d_conv; k++) acc += wt[k * CONV_BLOCK + c] * fr[k][c];
                yt[c] = acc / (1.0f + expf(-acc));
            }
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
