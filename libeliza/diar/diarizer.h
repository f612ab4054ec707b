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
    ez_atomic_i64 busy;        /* DIAR_IDLE, DIAR_IN_CALL or DIAR_CLOSING */
};

/* The handle's one call at a time, and a close that waits for it: a call
 * that finds another in flight, or the handle being closed, is refused with
 * ELIZA_E_STATE instead of racing it (api/diar_api.c). */
enum { DIAR_IDLE = 0, DIAR_IN_CALL = 1, DIAR_CLOSING = -1 };

EZ_INTERNAL int32_t ez_diarizer_enter(struct eliza_diarizer *d, const char *call);
EZ_INTERNAL void ez_diarizer_leave(struct eliza_diarizer *d);

#endif /* EZ_DIAR_DIARIZER_H */
