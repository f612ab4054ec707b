/* pyannote segmentation-3.0 (docs/diarization.md): 16 kHz chunks ->
 * per-frame log-probabilities of the powerset classes (no speaker, one
 * speaker, two overlapping speakers), SincNet + 4 BiLSTM + linears. */
#ifndef EZ_DIAR_SEGMENTATION_H
#define EZ_DIAR_SEGMENTATION_H

#include "core/common.h"
#include "core/pool.h"

typedef struct ez_seg_model ez_seg_model;

/* Loads and validates the GGUF, LSTM gate order included (a missing or
 * unknown order, or shapes that contradict it: ELIZA_E_FORMAT). */
EZ_INTERNAL int32_t ez_seg_load(const char *path, ez_seg_model **out);
EZ_INTERNAL void ez_seg_free(ez_seg_model *m);

EZ_INTERNAL int ez_seg_sample_rate(const ez_seg_model *m);     /* 16000 */
EZ_INTERNAL int ez_seg_chunk_samples(const ez_seg_model *m);   /* 160000 (10 s) */
EZ_INTERNAL int ez_seg_frames(const ez_seg_model *m, int n_samples);  /* 589 for 10 s */
EZ_INTERNAL double ez_seg_frame_step(const ez_seg_model *m);   /* seconds between frames */
EZ_INTERNAL double ez_seg_frame_duration(const ez_seg_model *m); /* receptive field, seconds */
EZ_INTERNAL int ez_seg_n_classes(const ez_seg_model *m);       /* 7 */
EZ_INTERNAL int ez_seg_n_speakers(const ez_seg_model *m);      /* 3 */
/* mapping[c * n_speakers + s] = 1 when powerset class c has speaker s. */
EZ_INTERNAL const uint8_t *ez_seg_powerset(const ez_seg_model *m);

/* pcm: [n_chunks, n_samples] at 16 kHz; out: [n_chunks, frames, classes]
 * log-probabilities (log-softmax), as the ONNX model outputs them. */
EZ_INTERNAL int32_t ez_seg_forward(ez_seg_model *m, ez_pool *pool, const float *pcm,
                                   int n_chunks, int n_samples, float *out);

/* ez_seg_forward of n_chunks overlapping windows of one stretch of audio:
 * window c is span[offset[c] .. offset[c] + n_samples), each offset a
 * multiple of ez_seg_offset_quantum() (the SincNet stride) and inside
 * span (span_len samples). The SincNet filterbank, the costliest layer
 * before the LSTMs, then runs once over the samples the windows cover
 * instead of once per window: it is linear, so each window's waveform
 * InstanceNorm becomes a per-filter scale and shift of the shared rows.
 * Agrees with ez_seg_forward on the same windows to float rounding
 * (tests/c/test_diar_models.c: log-probabilities within 4e-5 on voiced
 * audio, with and without a DC offset). Memory: 36 bytes per sample covered. */
EZ_INTERNAL int32_t ez_seg_forward_span(ez_seg_model *m, ez_pool *pool, const float *span, int64_t span_len,
                                        const int64_t *offset, int n_chunks, int n_samples, float *out);
EZ_INTERNAL int ez_seg_offset_quantum(const ez_seg_model *m);

#endif /* EZ_DIAR_SEGMENTATION_H */
