/* Band-limited sample-rate conversion (windowed-sinc interpolation, J. O.
 * Smith's "bandlimited interpolation"): a Kaiser-windowed sinc low-pass at
 * RS_ROLLOFF of the lower Nyquist frequency, evaluated at each output
 * position. When the rates' ratio has few phases (out_rate / gcd <= 1024:
 * every common rate) the taps of each phase are tabulated once (polyphase);
 * otherwise they are interpolated from a finely sampled kernel.
 *
 * Output samples are computed independently of each other (random access),
 * so a caller can convert any range [o0, o0 + n) of a long input without
 * converting what precedes it: the diarizer resamples one window at a time
 * and never holds the whole converted signal. Input outside [0, n_in) is
 * taken as zeros. */
#ifndef EZ_DIAR_RESAMPLE_H
#define EZ_DIAR_RESAMPLE_H

#include "core/common.h"

typedef struct ez_resampler ez_resampler;

/* in_rate, out_rate: 1..1000000 Hz. force_general = 1 skips the polyphase
 * table (the reference path, for tests). ELIZA_E_INVALID_ARG on bad rates,
 * ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_resampler_create(int in_rate, int out_rate, int force_general, ez_resampler **out);
EZ_INTERNAL void ez_resampler_free(ez_resampler *r);

/* Output length for n_in input samples: ceil(n_in * out_rate / in_rate). */
EZ_INTERNAL uint64_t ez_resampler_out_len(const ez_resampler *r, uint64_t n_in);

/* Input samples each side of an output position that the filter reads. */
EZ_INTERNAL int ez_resampler_half_taps(const ez_resampler *r);

/* out[i] = output sample o0 + i of in[0..n_in), for i in [0, n). */
EZ_INTERNAL void ez_resampler_run(const ez_resampler *r, const float *in, uint64_t n_in, uint64_t o0,
                                  size_t n, float *out);

#endif /* EZ_DIAR_RESAMPLE_H */
