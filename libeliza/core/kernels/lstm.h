/* One LSTM step, shared by the TTS and diarization engines: the scalar
 * reference and the AVX2, AVX-512 and NEON kernels, picked once per CPU
 * level (core/cpu.h: ELIZA_SIMD pins the level, ELIZA_FORCE_SCALAR=1 picks
 * the reference).
 *
 * Gates are PyTorch's blocks i, f, g, o of H rows each. The recurrent
 * weight w_hh [4H, H] is read in panels of EZ_LSTM_PANEL gate rows: panel p
 * holds w_hh[16p .. 16p + 16, k] for k = 0 .. H-1, 16 consecutive floats per
 * k (ez_lstm_pack). Groups of EZ_LSTM_GROUP consecutive panels are
 * interleaved by k: a group's row k is its panels' 16 floats of k side by
 * side (ez_lstm_panel), so a kernel running over a whole group reads one
 * sequential stream instead of eight 8 KB apart (at H 128 that and a
 * prefetch took the AVX-512 one-sequence step from 2.4 to 2.05 us). A step streams each panel
 * once with h broadcast, where the stored rows would need a horizontal sum
 * per gate row; with one sequence the kernels keep 8 (AVX2) or 8 x 16-lane
 * (AVX-512) independent accumulators, with several they reuse each panel
 * across rows. */
#ifndef EZ_CORE_KERNELS_LSTM_H
#define EZ_CORE_KERNELS_LSTM_H

#include "../common.h"

#define EZ_LSTM_PANEL 16
#define EZ_LSTM_GROUP 8

/* Panel p of the packed w_hh at w: its row k (16 floats) starts at the
 * returned pointer + k * *stride (16 floats times the panels of p's group:
 * EZ_LSTM_GROUP but for a short last group). */
static inline const float *ez_lstm_panel(const float *w, int H, int64_t p, int64_t *stride) {
    const int64_t n_panels = (4 * (int64_t)H + EZ_LSTM_PANEL - 1) / EZ_LSTM_PANEL;
    const int64_t first = p / EZ_LSTM_GROUP * EZ_LSTM_GROUP;
    *stride = EZ_MIN((int64_t)EZ_LSTM_GROUP, n_panels - first) * EZ_LSTM_PANEL;
    return w + first * EZ_LSTM_PANEL * H + (p - first) * EZ_LSTM_PANEL;
}

/* Floats of the panels of a [4H, H] w_hh (the last panel zero-padded when
 * 4H is not a multiple of 16). */
EZ_INTERNAL size_t ez_lstm_panels_floats(int H);

/* w_hh [4H, H], row-major F32, into panels at dst (ez_lstm_panels_floats(H)
 * floats). perm[q]: the block of w_hh holding gate q of i, f, g, o (a file
 * may store another order), or NULL for i, f, g, o. */
EZ_INTERNAL void ez_lstm_pack(int H, const float *w_hh, const int perm[4], float *dst);

/* One step of nb sequences for hidden units [u0, u1):
 *   gates[b, qH + u] = xp[b][qH + u] + bias[qH + u] + sum over k of w_hh[qH + u, k] h_prev[b, k]
 * for q = i, f, g, o, then
 *   c[b, u] = sigmoid(f) c[b, u] + sigmoid(i) tanh(g),  h_out[b, u] = sigmoid(o) tanh(c[b, u]).
 * xp[b]: a row of 4H (the input projection); bias: [4H] or NULL; w: the
 * panels; h_prev, h_out, c: [nb, H]; gates: [nb, 4H] scratch, of which only
 * the range's columns are written. h_out may be h_prev only when the range
 * is [0, H). Every gate is xp (+ bias), then its products added in k order,
 * however sequences are grouped and units split, so results do not depend
 * on nb or on the range. The vector kernels need H % 16 == 0 and u0, u1
 * multiples of 16 (ez_lstm_step_for hands out the reference otherwise). */
typedef void (*ez_lstm_step_fn)(int nb, int H, int u0, int u1, const float *const *xp, const float *bias,
                                const float *w, const float *h_prev, float *h_out, float *c, float *gates);

EZ_INTERNAL void ez_lstm_step_ref(int nb, int H, int u0, int u1, const float *const *xp, const float *bias,
                                  const float *w, const float *h_prev, float *h_out, float *c, float *gates);

/* The kernel of each level, or NULL where this build or architecture has
 * none; the caller checks the CPU (ez_cpu_features) before running one. */
EZ_INTERNAL ez_lstm_step_fn ez_lstm_step_avx2(void);
EZ_INTERNAL ez_lstm_step_fn ez_lstm_step_avx512(void);
EZ_INTERNAL ez_lstm_step_fn ez_lstm_step_neon(void);

/* The step for hidden size H at the active level: the best vector kernel
 * when H % 16 == 0, the reference otherwise. */
EZ_INTERNAL ez_lstm_step_fn ez_lstm_step_for(int H);

#endif /* EZ_CORE_KERNELS_LSTM_H */
