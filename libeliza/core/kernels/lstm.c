/* The LSTM step's panel packing, scalar reference and dispatch (lstm.h). */
#include "lstm.h"

#include <math.h>
#include <string.h>

#include "../cpu.h"

size_t ez_lstm_panels_floats(int H) {
    const size_t G = 4 * (size_t)H;
    return (G + EZ_LSTM_PANEL - 1) / EZ_LSTM_PANEL * EZ_LSTM_PANEL * (size_t)H;
}

void ez_lstm_pack(int H, const float *w_hh, const int perm[4], float *dst) {
    const int64_t G = 4 * (int64_t)H;
    memset(dst, 0, ez_lstm_panels_floats(H) * sizeof(float));
    for (int64_t r = 0; r < G; r++) {
        const int64_t q = r / H, src = (perm ? perm[q] : q) * (int64_t)H + r % H;
        int64_t stride;
        float *row = (float *)ez_lstm_panel(dst, H, r / EZ_LSTM_PANEL, &stride) + r % EZ_LSTM_PANEL;
        for (int64_t k = 0; k < H; k++) row[k * stride] = w_hh[src * H + k];
    }
}

static float sigmoid_ref(float x) { return 1.0f / (1.0f + expf(-x)); }

void ez_lstm_step_ref(int nb, int H, int u0, int u1, const float *const *xp, const float *bias, const float *w,
                      const float *h_prev, float *h_out, float *c, float *gates) {
    const int64_t G = 4 * (int64_t)H;
    for (int b = 0; b < nb; b++) {
        const float *hb = h_prev + (int64_t)b * H;
        float *gb = gates + (int64_t)b * G;
        for (int q = 0; q < 4; q++)
            for (int u = u0; u < u1; u++) {
                const int64_t r = (int64_t)q * H + u;
                int64_t stride;
                const float *wr = ez_lstm_panel(w, H, r / EZ_LSTM_PANEL, &stride) + r % EZ_LSTM_PANEL;
                float s = 0.0f;
                for (int k = 0; k < H; k++) s += wr[(int64_t)k * stride] * hb[k];
                gb[r] = bias ? xp[b][r] + bias[r] + s : xp[b][r] + s;
            }
    }
    for (int b = 0; b < nb; b++) {
        const float *gb = gates + (int64_t)b * G;
        float *hb = h_out + (int64_t)b * H, *cb = c + (int64_t)b * H;
        for (int j = u0; j < u1; j++) {
            float i = sigmoid_ref(gb[j]), f = sigmoid_ref(gb[H + j]);
            float g = tanhf(gb[2 * H + j]), o = sigmoid_ref(gb[3 * H + j]);
            cb[j] = f * cb[j] + i * g;
            hb[j] = o * tanhf(cb[j]);
        }
    }
}

ez_lstm_step_fn ez_lstm_step_for(int H) {
    if (H % EZ_LSTM_PANEL) return ez_lstm_step_ref;
    return EZ_SIMD_PICK(ez_lstm_step_avx512(), ez_lstm_step_avx2(), NULL, ez_lstm_step_neon(), ez_lstm_step_ref);
}
