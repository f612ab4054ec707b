/* Scalar reference of the Mamba2 kernels, the conv state's update, the
 * chunked SSD scan and the table dispatch. */
#include "ssm.h"

#include <string.h>

#include "core/cpu.h"
#include "core/gemm.h"

/* Frame s of a conv input: rows of the state for s < 0, of x after. */
static inline const float *conv_frame(const float *state, const float *x, int64_t ld_x, int n_ch, int d_conv, int s) {
    return s < 0 ? state + (int64_t)(d_conv - 1 + s) * n_ch : x + (int64_t)s * ld_x;
}

static inline float silu(float v) { return v / (1.0f + expf(-v)); }

static void conv_ref(const float *state, const float *x, int64_t ld_x, const float *w, const float *b, float *y,
                     int64_t ld_y, int n_tok, int n_ch, int d_conv) {
    for (int t = 0; t < n_tok; t++) {
        for (int c = 0; c < n_ch; c++) {
            float acc = b ? b[c] : 0.0f;
            for (int k = 0; k < d_conv; k++)
                acc += w[(int64_t)c * d_conv + k] * conv_frame(state, x, ld_x, n_ch, d_conv, t - d_conv + 1 + k)[c];
            y[(int64_t)t * ld_y + c] = silu(acc);
        }
    }
}

static void step_ref(const ez_ssm_shape *s, float *state, const float *x, const float *B, const float *C,
                     const float *dt, const float *dt_bias, const float *A, const float *D, float *y, int h0, int h1) {
    const int P = s->head_dim, N = s->d_state, heads_per_group = s->n_head / s->n_group;
    for (int h = h0; h < h1; h++) {
        const float dth = ez_softplus(dt[h] + dt_bias[h]), dA = expf(dth * A[h]);
        const float *Bg = B + (int64_t)(h / heads_per_group) * N, *Cg = C + (int64_t)(h / heads_per_group) * N;
        for (int p = 0; p < P; p++) {
            float *sp = state + ((int64_t)h * P + p) * N;
            const float xp = x[h * P + p], xdt = xp * dth;
            float acc = 0.0f;
            for (int n = 0; n < N; n++) {
                sp[n] = sp[n] * dA + xdt * Bg[n];
                acc += sp[n] * Cg[n];
            }
            y[h * P + p] = acc + D[h] * xp;
        }
    }
}

void ez_ssm_conv(const ez_ssm_ops *ops, float *state, const float *x, int64_t ld_x, const float *w, const float *b,
                 float *y, int64_t ld_y, int n_tok, int n_ch, int d_conv) {
    const int keep = d_conv - 1;
    ops->conv(state, x, ld_x, w, b, y, ld_y, n_tok, n_ch, d_conv);
    if (keep == 0 || n_tok <= 0) return;
    if (n_tok < keep) /* the newest keep - n_tok rows stay, moved up to the front */
        memmove(state, state + (int64_t)n_tok * n_ch, sizeof(float) * (size_t)(keep - n_tok) * (size_t)n_ch);
    for (int j = keep - (n_tok < keep ? n_tok : keep); j < keep; j++)
        memcpy(state + (int64_t)j * n_ch, x + (int64_t)(n_tok - keep + j) * ld_x, sizeof(float) * (size_t)n_ch);
}

/* ---- chunked scan -------------------------------------------------------------------- */

int64_t ez_ssm_scan_work_floats(const ez_ssm_shape *s) {
    /* dt_h and cumulative a per token, the state update's weights, the
     * chunk's C B^T of one group (shared by its H / G heads), one head's
     * weighted C B^T, and its weighted X^T */
    return 3 * (int64_t)EZ_SSM_CHUNK + 2 * (int64_t)EZ_SSM_CHUNK * EZ_SSM_CHUNK +
           (int64_t)s->head_dim * EZ_SSM_CHUNK;
}

void ez_ssm_scan(ez_pool *pool, const ez_llm_ops *vo, const ez_ssm_shape *s, float *state, const float *x,
                 int64_t ld_x, const float *B, const float *C, int64_t ld_bc, const float *dt, int64_t ld_dt,
                 const float *dt_bias, const float *A, const float *D, float *y, int64_t ld_y, int n_tok, int h0,
                 int h1, float *work) {
    const int P = s->head_dim, N = s->d_state, heads_per_group = s->n_head / s->n_group;
    float *dth = work, *cum = work + EZ_SSM_CHUNK, *m = work + 2 * EZ_SSM_CHUNK, *cb = work + 3 * EZ_SSM_CHUNK;
    float *wcb = cb + EZ_SSM_CHUNK * EZ_SSM_CHUNK, *xt = wcb + EZ_SSM_CHUNK * EZ_SSM_CHUNK;
    for (int c0 = 0; c0 < n_tok; c0 += EZ_SSM_CHUNK) {
        const int L = n_tok - c0 < EZ_SSM_CHUNK ? n_tok - c0 : EZ_SSM_CHUNK;
        int cb_group = -1;
        for (int h = h0; h < h1; h++) {
            const int g = h / heads_per_group;
            const int64_t go = (int64_t)g * N, ho = (int64_t)h * P;
            float *S = state + ho * N; /* [P][N], carried from the previous chunk */
            float run = 0.0f;
            if (g != cb_group) { /* cb[t][u] = C_t . B_u, u <= t */
                for (int t = 0; t < L; t++)
                    for (int u = 0; u <= t; u++)
                        cb[t * EZ_SSM_CHUNK + u] = vo->dot(C + (int64_t)(c0 + t) * ld_bc + go,
                                                           B + (int64_t)(c0 + u) * ld_bc + go, N);
                cb_group = g;
            }
            for (int t = 0; t < L; t++) {
                dth[t] = ez_softplus(dt[(int64_t)(c0 + t) * ld_dt + h] + dt_bias[h]);
                run += dth[t] * A[h];
                cum[t] = run;
            }
            /* what the chunk's initial state contributes: exp(cum_t) C_t S^T,
             * the [L x N] . [N x P] product for all tokens at once */
            ez_gemm_f32(pool, L, P, N, C + (int64_t)c0 * ld_bc + go, ld_bc, S, N, 1, y + (int64_t)c0 * ld_y + ho, ld_y,
                        0);
            for (int t = 0; t < L; t++) {
                const float *xtok = x + (int64_t)(c0 + t) * ld_x + ho;
                float *yt = y + (int64_t)(c0 + t) * ld_y + ho;
                const float carry = expf(cum[t]);
                for (int p = 0; p < P; p++) yt[p] = carry * yt[p] + D[h] * xtok[p];
                /* within the chunk: sum_u<=t (C_t . B_u) exp(cum_t - cum_u) dt_u x_u,
                 * the weights a lower-triangular [L x L] times X [L x P] */
                for (int u = 0; u < L; u++)
                    wcb[t * L + u] = u <= t ? cb[t * EZ_SSM_CHUNK + u] * expf(cum[t] - cum[u]) * dth[u] : 0.0f;
            }
            ez_gemm_f32(pool, L, P, L, wcb, L, x + (int64_t)c0 * ld_x + ho, ld_x, 0, y + (int64_t)c0 * ld_y + ho, ld_y,
                        1);
            /* S <- exp(cum_end) S + X^T diag(dt_u exp(cum_end - cum_u)) B: the
             * weighted X^T [P x L] times the chunk's B [L x N] */
            {
                const float end = cum[L - 1], decay = expf(end);
                for (int u = 0; u < L; u++) m[u] = dth[u] * expf(end - cum[u]);
                for (int p = 0; p < P; p++)
                    for (int u = 0; u < L; u++) xt[p * L + u] = m[u] * x[(int64_t)(c0 + u) * ld_x + ho + p];
                for (int64_t i = 0; i < (int64_t)P * N; i++) S[i] *= decay;
                ez_gemm_f32(pool, P, N, L, xt, L, B + (int64_t)c0 * ld_bc + go, ld_bc, 0, S, N, 1);
            }
        }
    }
}

/* ---- dispatch ---------------------------------------------------------------------------- */

static const ez_ssm_ops SSM_REF = {conv_ref, step_ref};

const ez_ssm_ops *ez_ssm_ops_ref(void) { return &SSM_REF; }

const ez_ssm_ops *ez_ssm_ops_active(void) {
    return EZ_SIMD_PICK(NULL, ez_ssm_ops_avx2(), NULL, ez_ssm_ops_neon(), &SSM_REF);
}
