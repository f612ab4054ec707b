/* Live diarization: audio pushed in chunks of any size, turns pulled as
 * they are decided, speaker numbers stable for the whole stream (in the
 * manner of diart, Coria et al. 2021, on the same two models as the
 * offline pipeline):
 *
 *   1. every `step` seconds, the segmentation window of the last 10 s of
 *      audio (zeros before the start of the stream);
 *   2. an embedding per local speaker of the window with enough speech
 *      (its frames where it speaks alone, at most two partials long);
 *   3. incremental clustering: the local speakers go to distinct running
 *      centroids (the assignment with the largest total similarity); one
 *      farther than `threshold` (cosine distance) from its centroid, with
 *      enough clean speech, starts a new speaker instead (up to
 *      max_speakers / num_speakers); an assigned embedding is added to its
 *      centroid;
 *   4. a frame is decided once every window that ends at most `latency`
 *      seconds after it has been seen: as offline, the clusters' activity
 *      summed over those windows and the most active kept, as many as the
 *      windows' average count of active local speakers;
 *   5. runs of decided frames become turns. A turn still going on when the
 *      host pulls is handed out up to the decided edge, and continues in a
 *      later turn of the same speaker that starts where it ended: turns are
 *      never revised once handed out.
 *
 * Memory is bounded: the last window of audio, the frames not yet decided
 * (latency + window), and the centroids. */
#ifndef EZ_DIAR_STREAM_H
#define EZ_DIAR_STREAM_H

#include "core/common.h"
#include "diar/pipeline.h"

/* Most speakers one stream tells apart; later voices join the nearest. */
#define EZ_DIAR_STREAM_MAX_SPEAKERS 32

typedef struct ez_diar_stream ez_diar_stream;

/* A stream over models m (which must outlive it) with validated options
 * (step, threshold, num/min/max_speakers, exclusive are used) and a
 * latency of `latency` seconds (step..window). ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_diar_stream_create(const ez_diar_models *m, const eliza_diarize_options *opt, double latency,
                                          ez_diar_stream **out);
EZ_INTERNAL void ez_diar_stream_free(ez_diar_stream *s);

/* Appends n finite samples at the models' rate and runs every window they
 * complete. After ez_diar_stream_finish: ELIZA_E_STATE. */
EZ_INTERNAL int32_t ez_diar_stream_push(ez_diar_stream *s, const float *pcm, size_t n);

/* The end of the audio: runs the last windows and decides every frame. */
EZ_INTERNAL int32_t ez_diar_stream_finish(ez_diar_stream *s);

/* The turns decided since the last pull (*out malloc'ed, never NULL on
 * success), sorted by start. ELIZA_DONE (and no turns) once the stream is
 * finished and everything was handed out. */
EZ_INTERNAL int32_t ez_diar_stream_pull(ez_diar_stream *s, eliza_diarize_turn **out, size_t *n_out);

/* Seconds of audio pushed, and seconds decided (turns up to there are final). */
EZ_INTERNAL double ez_diar_stream_pushed(const ez_diar_stream *s);
EZ_INTERNAL double ez_diar_stream_decided(const ez_diar_stream *s);

#endif /* EZ_DIAR_STREAM_H */
