/* Speaker identification: the voice embedding of a known person from
 * reference audio, and the matching of a run's speakers to the enrolled
 * voices (a speaker takes a voice's name when the cosine distance of its
 * centroid to the voice is under a threshold calibrated on real meetings,
 * tests/diar/real/calibrate_identify.py). */
#ifndef EZ_DIAR_IDENTIFY_H
#define EZ_DIAR_IDENTIFY_H

#include "core/common.h"
#include "diar/pipeline.h"

/* Least speech (seconds) reference audio must hold to enroll a voice. */
#define EZ_DIAR_ENROLL_MIN_SECONDS 1.0
/* Longest reference audio accepted (seconds). */
#define EZ_DIAR_ENROLL_MAX_SECONDS 600.0

/* The voice embedding (out: [emb_dim], unit norm) of the person speaking in
 * pcm (n finite samples at sample_rate, 8000..192000 Hz): the embedding of
 * the frames where one local speaker of the segmentation speaks alone, in
 * each 10 s window the one with the most such frames (a window the audio
 * does not fill is filled with repeats of it). *speech receives
 * the seconds of speech used. ELIZA_E_INVALID_ARG when that is under
 * EZ_DIAR_ENROLL_MIN_SECONDS (silence, noise, a clip too short) or the
 * audio is longer than EZ_DIAR_ENROLL_MAX_SECONDS; ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_diar_voice_embedding(const ez_diar_models *m, const float *pcm, size_t n, int sample_rate,
                                            float *out, double *speech);

/* Names speakers by voices, one to one: the closest (speaker, voice) pair
 * first, then the closest of the rest, while the cosine distance is at
 * most threshold. centroids: [n_speakers, dim], voices: [n_voices, dim],
 * both unit norm. voice[s]: the voice speaker s took, or -1; distance[s]:
 * its cosine distance to that voice, else to the nearest voice (NAN when
 * there are none). ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_diar_identify(const float *centroids, int n_speakers, const float *voices, int n_voices,
                                     int dim, float threshold, int32_t *voice, float *distance);

#endif /* EZ_DIAR_IDENTIFY_H */
