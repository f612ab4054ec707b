/* A persistent thread pool: n_threads - 1 workers plus the calling thread.
 * ez_pool_for() splits a range over them and returns when all of it is done.
 * Workers never call back into the host and never log. One pool is used by
 * one host thread at a time (it belongs to a handle). */
#ifndef EZ_POOL_H
#define EZ_POOL_H

#include "common.h"

typedef struct ez_pool ez_pool;

/* Work on [begin, end); `thread_index` in [0, ez_pool_threads(pool)) is
 * stable for the duration of one ez_pool_for() and unique among concurrent
 * calls, so it can index per-thread scratch. */
typedef void (*ez_range_fn)(void *ctx, int64_t begin, int64_t end, int thread_index);

/* n_threads <= 0 means one per logical CPU. Returns NULL (with ez_fail) if
 * the threads cannot be started. */
EZ_INTERNAL ez_pool *ez_pool_create(int n_threads);
EZ_INTERNAL void ez_pool_destroy(ez_pool *pool);
EZ_INTERNAL int ez_pool_threads(const ez_pool *pool);

/* Runs fn over [0, n) in chunks of at least `grain` items. pool may be NULL
 * (runs inline on the caller). Chunk boundaries fall on multiples of grain
 * (the last chunk ends at n), so a grain that is a multiple of a kernel's
 * tile keeps every tile inside one chunk. n <= grain runs inline on the
 * caller. A worker that is not running when the loop starts may miss it
 * (the others do its share). Called from inside fn on the same pool, it runs
 * inline on the calling thread with that thread's index. */
EZ_INTERNAL void ez_pool_for(ez_pool *pool, int64_t n, int64_t grain, ez_range_fn fn, void *ctx);

/* The calling thread's index while it runs a chunk of an ez_pool_for on
 * this pool, 0 otherwise: the scratch slot a kernel called from inside a
 * loop body may use without racing the other threads. */
EZ_INTERNAL int ez_pool_thread_index(const ez_pool *pool);

/* Per-thread scratch of at least `bytes`, 64-byte aligned, owned by the pool
 * and reused across calls (slot thread_index). Valid until the next call
 * with the same thread_index and a larger size. NULL on allocation failure.
 * With a NULL pool, slot 0 of a process-wide fallback is used (tests only). */
EZ_INTERNAL void *ez_pool_scratch(ez_pool *pool, int thread_index, size_t bytes);

#endif /* EZ_POOL_H */
