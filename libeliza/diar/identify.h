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

/* Longest enrolled name (bytes) and most enrolled voices. */
#define EZ_DIAR_VOICE_NAME_MAX 64
#define EZ_DIAR_MAX_VOICES 1024

typedef char ez_diar_voice_name[EZ_DIAR_VOICE_NAME_MAX + 1];

/* The enrolled voices of a diarizer, in enrolment order; zeroed is empty. */
typedef struct {
    ez_diar_voice_name *name; /* [n] */
    float *emb;               /* [n, dim] unit-norm voice embeddings */
    int n, dim;
} ez_diar_voices;

EZ_INTERNAL void ez_diar_voices_free(ez_diar_voices *v);
/* The index of the voice enrolled as name, or -1. */
EZ_INTERNAL int ez_diar_voices_find(const ez_diar_voices *v, const char *name);
/* Enrolls name (checked by the caller: 1..EZ_DIAR_VOICE_NAME_MAX bytes)
 * with the voice embedding of pcm (ez_diar_voice_embedding's rules).
 * ELIZA_E_INVALID_ARG for a name enrolled already, a full table or audio
 * that holds too little speech; ELIZA_E_NOMEM. Nothing changes on error. */
EZ_INTERNAL int32_t ez_diar_voices_enroll(ez_diar_voices *v, const ez_diar_models *m, const char *name,
                                          const float *pcm, size_t n, int sample_rate);
/* Removes the voice enrolled as name, or every voice when name is NULL;
 * ELIZA_E_NOT_FOUND when none is enrolled as name. */
EZ_INTERNAL int32_t ez_diar_voices_remove(ez_diar_voices *v, const char *name);
/* The names, each followed by a newline, NUL-terminated (malloc'ed). */
EZ_INTERNAL int32_t ez_diar_voices_list(const ez_diar_voices *v, char **out);
/* The run's speakers named by the voices (ez_diar_identify at threshold):
 * *names [n_speakers] each speaker's voice name or "", *distance
 * [n_speakers] ez_diar_identify's distances; both malloc'ed. ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_diar_voices_name(const ez_diar_voices *v, const ez_diar_speakers *sp, float threshold,
                                        ez_diar_voice_name **names, float **distance);

#endif /* EZ_DIAR_IDENTIFY_H */
