/* The diarization pipeline around the two models, in the spirit of
 * pyannote 3.x's SpeakerDiarization:
 *
 *   1. resample to the models' rate (resample.h), one batch of windows at
 *      a time (the stretch they cover, once);
 *   2. slide the segmentation window (10 s) by `step`; the last window starts
 *      on the step grid and is zero-padded past the end (as pyannote);
 *   3. segmentation per batch of windows; powerset -> per-local-speaker
 *      activity (hard: the argmax class's speakers; soft: the summed
 *      probabilities of the classes holding the speaker);
 *   4. one embedding per (window, local speaker) with speech: the mean of
 *      the embeddings of the 1.6 s grid partials in the window that only
 *      that speaker speaks in (shared across windows, so each stretch of
 *      audio is embedded about once, not once per window), else the
 *      embedding of the speaker's non-overlapped frames (all its frames when
 *      those are too few);
 *   5. agglomerative clustering (cluster.h) of the embeddings with enough
 *      clean speech, two local speakers of one window never in one cluster;
 *      every embedding then goes to its nearest centroid, the local speakers
 *      of a window to distinct clusters;
 *   6. reconstruction: per output frame, each cluster's activity summed over
 *      the overlapping windows, the number of speakers estimated from the
 *      segmentation (average number of active local speakers, rounded), the
 *      top clusters kept; runs of active frames become turns, gaps shorter
 *      than min_duration_off are filled, turns shorter than min_duration_on
 *      dropped; overlapping speech gives overlapping turns.
 *
 * Memory, for D seconds of audio at window step s (defaults 1 s):
 *   per window (D / s of them): n_frames x (1 + n_local) bytes of
 *     segmentation (589 x 4 = 2.4 KB) and up to n_local embeddings
 *     (3 x 1 KB), plus 8 bytes of bookkeeping;
 *   per output frame (D / 16.875 ms): 4 bytes of counts and 6 bytes per
 *     cluster;
 *   fixed: one batch of windows (batch_size x 640 KB of audio plus its
 *     log-probabilities), the stretch of audio they cover with its SincNet
 *     filterbank rows (36 bytes a sample: 17 s, ~10 MB at the defaults),
 *     the clustering's distance matrix (at most
 *     EZ_CLUSTER_MAX_ITEMS^2 x 4 bytes: the training embeddings are thinned
 *     to one window in every `stride` when there are more), and the input is
 *     never copied or resampled whole.
 * That is about 6 KB per second of audio at step 1 s (2 h: ~45 MB), linear
 * in D, plus ~70 MB at most for the clustering. */
#ifndef EZ_DIAR_PIPELINE_H
#define EZ_DIAR_PIPELINE_H

#include "core/atomic.h"
#include "core/common.h"
#include "diar/cluster.h"

/* The two models as the pipeline sees them: the real ones
 * (api/diarizer_api.c) or stand-ins (tests/c/test_diar_pipeline.c). */
typedef struct {
    int sample_rate;          /* Hz, of both models (16000) */
    int chunk_samples;        /* segmentation window (160000) */
    int n_frames;             /* segmentation frames per window (589) */
    double frame_step;        /* seconds between frames */
    double frame_duration;    /* seconds of audio each frame sees */
    int n_classes;            /* powerset classes (7) */
    int n_local;              /* local speakers per window (3) */
    const uint8_t *powerset;  /* [n_classes * n_local]: 1 when class c holds speaker s */
    int emb_dim;              /* embedding size (256) */
    /* logprobs: [n_chunks, n_frames, n_classes] of pcm: [n_chunks, chunk_samples] */
    int32_t (*segment)(void *ctx, const float *pcm, int n_chunks, float *logprobs);
    /* segment() of windows of one stretch of audio, window c at
     * span[offset[c]], offsets multiples of span_quantum; NULL: segment()
     * on copies of the windows */
    int32_t (*segment_span)(void *ctx, const float *span, int64_t span_len, const int64_t *offset, int n_chunks,
                            float *logprobs);
    int span_quantum;
    /* out: [emb_dim], the embedding of n samples (n >= 1) */
    int32_t (*embed)(void *ctx, const float *pcm, size_t n, float *out);
    /* out: [n_clips, emb_dim], embed() of each of n_clips clips of n
     * samples, computed together; NULL: embed() one clip at a time */
    int32_t (*embed_clips)(void *ctx, const float *const *pcm, int n_clips, size_t n, float *out);
    void *ctx;
} ez_diar_models;

/* Cross-thread state of a run; either pointer may be NULL. */
typedef struct {
    ez_atomic_int *cancel;    /* nonzero: stop at the next check with ELIZA_E_CANCELLED */
    ez_atomic_int *progress;  /* written as the run advances, in 1/1e6 */
} ez_diar_control;

/* Least amount of clean speech (seconds, at most one window) for an
 * embedding to take part in the clustering (pyannote: 20% of a window). */
#define EZ_DIAR_TRAIN_MIN_SECONDS 2.0
/* Least speech (seconds) of a local speaker in a window to embed it at all. */
#define EZ_DIAR_EMBED_MIN_SECONDS 0.25
/* Embeddings are means of embeddings of EZ_DIAR_PARTIAL_SECONDS of audio on
 * a grid every EZ_DIAR_PARTIAL_HOP_SECONDS over the whole recording
 * (resemblyzer's embed_utterance: 160 frames every 77), each computed once
 * and shared by all the windows that hold it; a partial speaks for a local
 * speaker when nobody else is active in it and the speaker is in at least
 * EZ_DIAR_PARTIAL_PURITY of its frames. */
#define EZ_DIAR_PARTIAL_SECONDS 1.6
#define EZ_DIAR_PARTIAL_HOP_SECONDS 0.8
#define EZ_DIAR_PARTIAL_PURITY 0.7
/* Clusters spanning less than this many seconds of windows are not speakers
 * of their own (pyannote: 12 embeddings at the default 1 s step). */
#define EZ_DIAR_MIN_CLUSTER_SECONDS 12.0

/* Windows over n samples: 1 + ceil((n - chunk) / step) (at least 1). */
EZ_INTERNAL int64_t ez_diar_n_windows(uint64_t n_samples, int chunk_samples, int64_t step_samples);

/* First output frame of window w: round(w * step / frame_step), both in
 * samples (pyannote's closest_frame). */
EZ_INTERNAL int64_t ez_diar_window_frame(int64_t w, int64_t step_samples, double frame_step_samples);

/* One window's log-probabilities [n_frames, n_classes] -> cls[f] (argmax
 * class) and soft[f * n_local + s] (probability that speaker s is active,
 * 0..255). */
EZ_INTERNAL void ez_diar_decode_powerset(const float *logprobs, int n_frames, int n_classes, int n_local,
                                         const uint8_t *powerset, uint8_t *cls, uint8_t *soft);

/* The audio of the frames flagged in mask ([n_frames]) of one window
 * (chunk: [chunk_samples]), concatenated into out; each frame contributes
 * the frame_step-long stretch at the centre of what it sees (offset: half
 * the receptive field less half a step, in samples). Returns the number of
 * samples written (at most chunk_samples). */
EZ_INTERNAL size_t ez_diar_gather_frames(const float *chunk, int chunk_samples, const uint8_t *mask, int n_frames,
                                         double frame_step_samples, double offset, float *out);

/* What reconstruction needs: the segmentation of every window and the
 * cluster of every local speaker. */
typedef struct {
    int64_t n_windows;
    const int64_t *start_frame;   /* [n_windows] output frame of each window's frame 0 */
    int n_frames, n_classes, n_local;
    const uint8_t *powerset;      /* [n_classes * n_local] */
    const uint8_t *cls;           /* [n_windows, n_frames] */
    const uint8_t *soft;          /* [n_windows, n_frames, n_local] */
    const int32_t *cluster;       /* [n_windows, n_local], -1: no cluster */
    int n_clusters;
    int max_per_frame;            /* cap on the speaker count, 0 = none */
    double frame_step;            /* seconds */
    double frame_duration;        /* seconds */
    double duration;              /* of the audio, seconds: turns end there */
    double min_duration_on, min_duration_off;
    int exclusive;                /* at most one speaker per frame: the most active */
    int32_t *speaker_of;          /* out, [n_clusters] or NULL: each cluster's speaker number in
                                   * the turns, -1 for a cluster left without turns */
} ez_diar_recon;

/* Frame-level reconstruction and binarization into turns sorted by start,
 * speakers renumbered by first appearance. *out (malloc'ed, never NULL on
 * success) holds *n_out turns. ELIZA_E_NOMEM. The stages: the sums over
 * the windows (ez_diar_sum_windows), each frame's speakers
 * (ez_diar_pick_speakers), runs of frames into turns, then, in this order,
 * ez_diar_clip_turns, ez_diar_fill_gaps, ez_diar_drop_short,
 * ez_diar_number_turns and ez_diar_turns_out. */
EZ_INTERNAL int32_t ez_diar_reconstruct(const ez_diar_recon *r, eliza_diarize_turn **out, size_t *n_out);

/* A turn as runs of a cluster's frames give it, before gaps and short
 * turns are handled. */
typedef struct {
    int32_t speaker;     /* cluster; its speaker number after ez_diar_number_turns */
    double start, end;   /* seconds */
    double conf_sum;     /* sum of per-frame activity over the turn's frames */
    int64_t n_frames;
} ez_diar_raw_turn;

typedef struct {
    ez_diar_raw_turn *v; /* [n] of cap, malloc'ed */
    size_t n, cap;
} ez_diar_turns;

/* The turns clipped to [0, duration]; those left empty go. */
EZ_INTERNAL void ez_diar_clip_turns(ez_diar_turns *l, double duration);
/* The turns sorted by speaker, then start; a turn that starts less than
 * min_off after the end of its speaker's previous one joins it (frames and
 * activity added). */
EZ_INTERNAL void ez_diar_fill_gaps(ez_diar_turns *l, double min_off);
/* Turns shorter than min_on go; the rest sorted by start, then speaker. */
EZ_INTERNAL void ez_diar_drop_short(ez_diar_turns *l, double min_on);
/* The clusters [0, n_clusters) of the turns (in their order) renumbered by
 * first appearance, then the turns sorted by start and new number;
 * speaker_of ([n_clusters] or NULL): each cluster's number, -1 for one
 * without turns. ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_diar_number_turns(ez_diar_turns *l, int n_clusters, int32_t *speaker_of);
/* The turns as the ABI's into *out (malloc'ed, never NULL on success),
 * each one's confidence the mean activity of its frames. ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_diar_turns_out(const ez_diar_turns *l, eliza_diarize_turn **out, size_t *n_out);

/* What the windows say of each frame of the global grid, summed over the
 * windows that cover it. */
typedef struct {
    int64_t n_frames;   /* T: the last window's end */
    int n_clusters;     /* K */
    uint16_t *cover;    /* [T]: windows covering the frame */
    uint16_t *count;    /* [T]: their active local speakers (argmax class), summed */
    uint16_t *hard;     /* [T, K]: windows in which cluster k is active (one of its local speakers is) */
    float *soft;        /* [T, K]: cluster k's soft activity (its most active local speaker's), summed */
} ez_diar_frame_sums;

/* The sums of r's windows into *s (freed with ez_diar_frame_sums_free,
 * also after a failure). ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_diar_sum_windows(const ez_diar_recon *r, ez_diar_frame_sums *s);
EZ_INTERNAL void ez_diar_frame_sums_free(ez_diar_frame_sums *s);

/* The n most active of K clusters of one frame into on[K] (1: speaks):
 * active in the most windows first (hard), ties broken by soft activity; a
 * cluster active in no window is never picked, so fewer than n may be. */
EZ_INTERNAL void ez_diar_pick_speakers(const uint16_t *hard, const float *soft, int K, int n, uint8_t *on);

/* Who the speakers of a run are, by their number in the turns. */
typedef struct {
    int n_speakers;
    int dim;
    float *centroids;   /* [n_speakers, dim], unit norm: the mean direction of the
                         * embeddings of the local speakers in the speaker's cluster */
} ez_diar_speakers;

EZ_INTERNAL void ez_diar_speakers_free(ez_diar_speakers *s);

/* The embeddings of a run: one per (window, local speaker) that speaks. */
typedef struct {
    float *v;        /* [n, dim] */
    int32_t *window; /* [n] */
    uint8_t *local;  /* [n] local speaker */
    uint8_t *train;  /* [n] enough clean speech to take part in the clustering */
    size_t n, cap;
    int dim;
} ez_diar_embs;

/* The clustering's training set: copies of the embeddings with enough
 * clean speech (all of them when none has), of the windows w with
 * w % stride == 0 for the least stride that leaves at most
 * EZ_CLUSTER_MAX_ITEMS (neighbouring windows overlap by 1 - step/10 and
 * repeat each other). */
typedef struct {
    float *x;        /* [n, dim] */
    int32_t *group;  /* [n]: each one's window (cannot-link) */
    size_t n;
    int64_t stride;
} ez_diar_train_set;

/* The training set of e into *t (freed with ez_diar_train_set_free, also
 * after a failure). ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_diar_train_set_pick(const ez_diar_embs *e, ez_diar_train_set *t);
EZ_INTERNAL void ez_diar_train_set_free(ez_diar_train_set *t);

/* opt's threshold and speaker counts; a cluster of fewer training windows
 * than EZ_DIAR_MIN_CLUSTER_SECONDS span at opt->step, thinned to one in
 * stride, is not a speaker of its own (at least 1). */
EZ_INTERNAL ez_cluster_config ez_diar_cluster_config(const eliza_diarize_options *opt, int64_t stride);

/* Every embedding of e to its nearest centroid ([k, dim], unit norm), the
 * local speakers of one window to distinct ones (ez_cluster_assign), into
 * cluster[window * n_local + local]; other entries are left as they are.
 * ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_diar_assign_embs(const ez_diar_embs *e, const float *centroids, int k, int n_local,
                                        int32_t *cluster);

/* Clusters the embeddings (step 5 above; opt: threshold, speaker counts,
 * step) and writes the cluster of every local speaker of every window into
 * cluster[n_windows * n_local] (-1: no embedding); *k: the clusters (0
 * without embeddings). ELIZA_E_NOMEM. The stages: ez_diar_train_set_pick,
 * ez_cluster_ahc of that set under ez_diar_cluster_config (its centroids
 * kept), ez_diar_assign_embs. */
EZ_INTERNAL int32_t ez_diar_cluster_embs(const eliza_diarize_options *opt, const ez_diar_embs *e, int64_t n_windows,
                                         int n_local, int32_t *cluster, int *k);

/* The speakers of the turns from the k clusters' centroids ([k, dim]):
 * speaker speaker_of[c] (ez_diar_recon.speaker_of; -1: no turns) gets
 * centroid c. ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_diar_speakers_of_turns(const float *centroids, int k, int dim, const int32_t *speaker_of,
                                              ez_diar_speakers *sp);

/* The whole pipeline on n samples of pcm (finite, checked by the caller) at
 * sample_rate (checked), with validated options. speakers (NULL: not
 * wanted) receives the speakers of the turns. The stages: the window pass
 * (steps 1-4), ez_diar_cluster_embs, ez_diar_reconstruct with
 * ez_diar_speakers_of_turns. */
EZ_INTERNAL int32_t ez_diar_run(const ez_diar_models *m, const float *pcm, size_t n, int sample_rate,
                                const eliza_diarize_options *opt, const ez_diar_control *ctl,
                                eliza_diarize_turn **out, size_t *n_out, ez_diar_speakers *speakers);

#endif /* EZ_DIAR_PIPELINE_H */
