/* Fast paths of the Kokoro layers (ops.h). For now each forwards to its
 * scalar reference; issue #4 replaces them one by one (im2col + packed GEMM,
 * batched LSTM input projections, fused AdaIN/Snake), each with a parity
 * test against ops_ref.c. */
#include "core/gemm.h"
#include "tts/ops.h"

void ez_tts_linear(ez_pool *pool, const float *x, int T, int n_in, const float *w,
                   const float *b, int n_out, float *y) {
    ez_gemm_f32(pool, T, n_out, n_in, x, n_in, w, n_in, 1, y, n_out, 0);
    if (b)
        for (int t = 0; t < T; t++)
            for (int o = 0; o < n_out; o++) y[(int64_t)t * n_out + o] += b[o];
}

void ez_tts_conv1d(ez_pool *pool, const float *x, int c_in, int t_in, const float *w,
                   const float *b, int c_out, int k, int stride, int pad, int dilation,
                   int groups, float *y) {
    (void)pool;
    ez_tts_conv1d_ref(x, c_in, t_in, w, b, c_out, k, stride, pad, dilation, groups, y);
}

void ez_tts_conv_transpose1d(ez_pool *pool, const float *x, int c_in, int t_in, const float *w,
                             const float *b, int c_out, int k, int stride, int pad, int out_pad,
                             int groups, float *y) {
    (void)pool;
    ez_tts_conv_transpose1d_ref(x, c_in, t_in, w, b, c_out, k, stride, pad, out_pad, groups, y);
}

void ez_tts_lstm(ez_pool *pool, const float *x, int T, int n_in, int H, const float *w_ih,
                 const float *w_hh, const float *b_ih, const float *b_hh, int reverse, float *y,
                 int y_stride) {
    (void)pool;
    ez_tts_lstm_ref(x, T, n_in, H, w_ih, w_hh, b_ih, b_hh, reverse, y, y_stride);
}

void ez_tts_adain1d(float *x, int C, int T, const float *gamma_beta, float eps) {
    ez_tts_adain1d_ref(x, C, T, gamma_beta, eps);
}

void ez_tts_snake(float *x, int C, int T, const float *alpha) { ez_tts_snake_ref(x, C, T, alpha); }
