/* GE2E speaker embedding (resemblyzer's VoiceEncoder, docs/diarization.md):
 * 16 kHz audio -> 40-band mel frames -> 3-layer LSTM -> linear -> ReLU ->
 * L2 norm, averaged over 160-frame partials as embed_utterance does. */
#ifndef EZ_DIAR_EMBEDDING_H
#define EZ_DIAR_EMBEDDING_H

#include "core/common.h"
#include "core/pool.h"

typedef struct ez_emb_model ez_emb_model;

EZ_INTERNAL int32_t ez_emb_load(const char *path, ez_emb_model **out);
EZ_INTERNAL void ez_emb_free(ez_emb_model *m);

EZ_INTERNAL int ez_emb_dim(const ez_emb_model *m);          /* 256 */
EZ_INTERNAL int ez_emb_sample_rate(const ez_emb_model *m);  /* 16000 */

/* The L2-normalised embedding of n samples (16 kHz) into out[dim]. Audio
 * shorter than one partial is padded as the reference pads it. */
EZ_INTERNAL int32_t ez_emb_embed(ez_emb_model *m, ez_pool *pool, const float *pcm, size_t n,
                                 float *out);

/* out[i * dim ..] = ez_emb_embed(pcm[i], n) for n_clips clips of n samples
 * each, bit for bit; clips of at most one partial run through the LSTM side
 * by side (one weight load per step for all of them, spread over the
 * pool), longer ones one after the other. */
EZ_INTERNAL int32_t ez_emb_embed_clips(ez_emb_model *m, ez_pool *pool, const float *const *pcm, int n_clips,
                                       size_t n, float *out);

#endif /* EZ_DIAR_EMBEDDING_H */
