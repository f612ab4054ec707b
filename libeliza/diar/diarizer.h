/* The state behind an eliza_diarizer handle, shared by the entry points in
 * api/diar_api.c (open, close, segment, embed) and api/diarize_api.c (the
 * pipeline call, cancel, progress). */
#ifndef EZ_DIAR_DIARIZER_H
#define EZ_DIAR_DIARIZER_H

#include "core/atomic.h"
#include "core/pool.h"
#include "diar/embedding.h"
#include "diar/segmentation.h"

struct eliza_diarizer {
    ez_seg_model *seg;
    ez_emb_model *emb;
    ez_pool *pool;
    int n_threads;
    ez_atomic_int cancel;      /* set by eliza_diarizer_cancel() */
    ez_atomic_int progress;    /* of the running eliza_diarize(), in 1/1e6 */
};

#endif /* EZ_DIAR_DIARIZER_H */
