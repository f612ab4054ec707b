/* Persistent thread pool.
 *
 * Dispatch protocol. All coordination goes through one 64-bit `gate`: a job
 * generation (high bits), a "closed" flag, and the number of workers inside
 * the job (low bits). The caller publishes a job (fn, ctx, n, chunk), then
 * stores a new open generation in the gate. A worker joins by incrementing
 * the count with a compare-and-swap, which succeeds only while that
 * generation is open; it then claims chunks from an atomic counter until none
 * are left, and leaves (decrements the count). The caller claims chunks too,
 * then closes the gate and waits only for the workers that joined. A worker
 * that arrives late (descheduled, or still waking up) finds the gate closed
 * and does not touch the job, so a short loop never waits for a thread that
 * was not running, and the job fields are never overwritten while a worker
 * can still read them.
 *
 * Waiting spins for a short while and then sleeps on a condition variable.
 * Past its first microseconds the spin offers the core to other threads
 * between its looks at the condition (ez_thread_yield): on a machine whose
 * cores other processes hold, nearly every plain spin ran to its end (the
 * likely reason, not traced: a worker woken onto the caller's core holds
 * off the very thread it waits for until the spin gives up).
 * Sleeping uses a Dekker-style handshake on sequentially consistent atomics:
 * the sleeper announces itself (`sleepers` / `caller_asleep`) and re-checks
 * its condition under the mutex; the waker changes the condition and then
 * looks at the announcement. One of the two always sees the other, so no
 * wake-up is lost and the spinning path takes no lock at all. Each side puts
 * a full fence between its write and its read: seq_cst accesses alone
 * already order them in C11, but emulators (qemu-user on an x86 host, seen
 * deadlocking here) implement aarch64's acquire loads and release stores
 * without the store-load barrier the handshake depends on. */
#include "pool.h"

#include <stdlib.h>
#include <string.h>

#include "atomic.h"
#include "error.h"
#include "platform.h"

#if EZ_ARCH_X86_64 && !(defined(_MSC_VER) && !defined(__clang__))
#include <immintrin.h>
#endif

/* Tells the core (and a hyper-threaded sibling) that this is a spin loop. */
static inline void cpu_relax(void) {
#if EZ_ARCH_X86_64
    _mm_pause();
#elif EZ_ARCH_AARCH64 && defined(_MSC_VER) && !defined(__clang__)
    __yield();
#elif EZ_ARCH_AARCH64
    __asm__ __volatile__("yield");
#endif
}

/* ---- the pool ------------------------------------------------------------------- */

#define POOL_MAX_THREADS 512
/* Gaps between parallel loops of a decode step are a few microseconds, so a
 * worker that spins this long catches the next loop without a futex wake-up.
 * Longer spins hurt when other processes hold the cores: a spinning thread
 * then takes the CPU from the thread it waits for (measured on a loaded
 * 2-vCPU VM: 200 us spins let the worker join 30% of back-to-back loops,
 * 50 us spins 60%). */
#define POOL_SPIN_NS 50000u
/* Spinning on pauses alone for this long, then yielding the core between
 * looks. Decode of the 90M-weight Q4_0 bench llama (2 threads, a 2-vCPU Zen
 * 4 VM at load 13): 4.1-4.3 ms of CPU per token with the plain spin,
 * 3.1-3.5 yielding after 0, 2 or 10 us; with nothing else ready to run a
 * yield returns at once, so an idle machine's short gaps see the spin as
 * it was. */
#define POOL_SPIN_PURE_NS 10000u
/* Chunks per thread: enough to even out uneven chunk costs, few enough that
 * claiming a chunk stays rare next to doing it. */
#define POOL_CHUNKS_PER_THREAD 4
#define CACHE_LINE 64

/* The gate: generation << GATE_GEN_SHIFT | GATE_CLOSED | workers inside. */
#define GATE_COUNT_MASK ((int64_t)0x7fff)
#define GATE_CLOSED ((int64_t)1 << 15)
#define GATE_GEN_SHIFT 16

static int64_t gate_generation(int64_t gate) { return gate >> GATE_GEN_SHIFT; }
static int64_t gate_workers(int64_t gate) { return gate & GATE_COUNT_MASK; }

typedef struct {
    void *ptr;
    size_t bytes;
    char pad[CACHE_LINE - sizeof(void *) - sizeof(size_t)];
} scratch_slot;

typedef struct {
    ez_pool *pool;
    ez_thread *thread;
    int index;
} worker;

struct ez_pool {
    /* Each atomic that one side writes while the other spins on it gets its
     * own cache line. */
    ez_atomic_i64 gate;
    char pad0[CACHE_LINE - sizeof(ez_atomic_i64)];
    ez_atomic_i64 next_item;
    char pad1[CACHE_LINE - sizeof(ez_atomic_i64)];
    ez_atomic_int sleepers;
    ez_atomic_int caller_asleep;
    ez_atomic_int stop;

    /* The job; written by the caller before the gate opens. */
    ez_range_fn fn;
    void *ctx;
    int64_t n;
    int64_t chunk;
    int64_t generation;      /* of the last job; only the caller writes it */

    int n_threads;
    uint64_t spin_ns;        /* 0 when threads outnumber cores: spinning would steal them */
    ez_mutex *mutex;
    ez_cond *wake;           /* workers sleep here for a new generation */
    ez_cond *done;           /* the caller sleeps here for the last worker to leave */
    worker *workers;         /* n_threads - 1 */
    scratch_slot *scratch;   /* n_threads */
};

/* Set while a thread runs a chunk, so a nested ez_pool_for on the same pool
 * runs inline instead of waiting for workers that are busy with the outer one. */
static EZ_THREAD_LOCAL const ez_pool *tls_pool;
static EZ_THREAD_LOCAL int tls_thread_index;

static void run_chunks(ez_pool *pool, int thread_index) {
    const ez_pool *outer_pool = tls_pool;
    int outer_index = tls_thread_index;
    tls_pool = pool;
    tls_thread_index = thread_index;
    for (;;) {
        int64_t begin = ez_atomic_i64_add(&pool->next_item, pool->chunk);
        if (begin >= pool->n) break;
        pool->fn(pool->ctx, begin, EZ_MIN(begin + pool->chunk, pool->n), thread_index);
    }
    tls_pool = outer_pool;
    tls_thread_index = outer_index;
}

/* Spins until done(pool) or for spin_ns, yielding the core now and then
 * after the first POOL_SPIN_PURE_NS; returns done(pool). */
static int spin_until(ez_pool *pool, int (*done)(ez_pool *, int64_t), int64_t arg) {
    uint64_t start = 0;
    for (uint32_t spins = 0;; spins++) {
        if (done(pool, arg)) return 1;
        if (pool->spin_ns == 0) return 0;
        /* Reading the clock costs more than a pause; look at it now and then. */
        if ((spins & 63) == 0) {
            uint64_t now = ez_time_ns();
            if (start == 0) start = now;
            else if (now - start > pool->spin_ns) return 0;
            else if (now - start > POOL_SPIN_PURE_NS) ez_thread_yield();
        }
        cpu_relax();
    }
}

static int new_generation(ez_pool *pool, int64_t seen) {
    return gate_generation(ez_atomic_i64_load(&pool->gate)) != seen;
}

/* Returns once the gate holds a generation other than `seen`. */
static void wait_for_job(ez_pool *pool, int64_t seen) {
    if (spin_until(pool, new_generation, seen)) return;
    ez_mutex_lock(pool->mutex);
    ez_atomic_int_add(&pool->sleepers, 1);
    ez_atomic_fence();
    while (!new_generation(pool, seen)) ez_cond_wait(pool->wake, pool->mutex);
    ez_atomic_int_add(&pool->sleepers, -1);
    ez_mutex_unlock(pool->mutex);
}

/* Enters the open job of generation `gen`; 0 if it is closed or gone. */
static int join_job(ez_pool *pool, int64_t gen) {
    for (;;) {
        int64_t gate = ez_atomic_i64_load(&pool->gate);
        if (gate_generation(gate) != gen || (gate & GATE_CLOSED)) return 0;
        if (ez_atomic_i64_cas(&pool->gate, gate, gate + 1)) return 1;
    }
}

static void leave_job(ez_pool *pool) {
    int64_t gate = ez_atomic_i64_add(&pool->gate, -1);
    if (gate_workers(gate) != 1 || !(gate & GATE_CLOSED)) return;
    ez_atomic_fence();
    if (ez_atomic_int_load(&pool->caller_asleep)) {
        ez_mutex_lock(pool->mutex);
        ez_cond_broadcast(pool->done);
        ez_mutex_unlock(pool->mutex);
    }
}

static void worker_main(void *arg) {
    worker *w = (worker *)arg;
    ez_pool *pool = w->pool;
    int64_t seen = 0;
    for (;;) {
        wait_for_job(pool, seen);
        /* The generation first, then stop: stop is set before the gate of
         * its generation opens, so a worker that sees that generation sees
         * stop too. (Read the other way round, a worker could take the stop
         * generation for a job, join it and then wait for one more that
         * never comes: ez_pool_destroy hung on joining it.) */
        seen = gate_generation(ez_atomic_i64_load(&pool->gate));
        if (ez_atomic_int_load(&pool->stop)) break;
        if (join_job(pool, seen)) {
            run_chunks(pool, w->index);
            leave_job(pool);
        }
    }
}

/* Opens a new generation (the job fields are already written). */
static void open_gate(ez_pool *pool) {
    pool->generation++;
    ez_atomic_i64_store(&pool->gate, pool->generation << GATE_GEN_SHIFT);
    ez_atomic_fence();
    if (ez_atomic_int_load(&pool->sleepers) > 0) {
        ez_mutex_lock(pool->mutex);
        ez_cond_broadcast(pool->wake);
        ez_mutex_unlock(pool->mutex);
    }
}

static int workers_gone(ez_pool *pool, int64_t unused) {
    (void)unused;
    return gate_workers(ez_atomic_i64_load(&pool->gate)) == 0;
}

/* Closes the gate and waits for the workers that joined to leave. */
static void close_gate(ez_pool *pool) {
    int64_t gate = ez_atomic_i64_add(&pool->gate, GATE_CLOSED);
    if (gate_workers(gate) == 0 || spin_until(pool, workers_gone, 0)) return;
    ez_mutex_lock(pool->mutex);
    ez_atomic_int_store(&pool->caller_asleep, 1);
    ez_atomic_fence();
    while (!workers_gone(pool, 0)) ez_cond_wait(pool->done, pool->mutex);
    ez_atomic_int_store(&pool->caller_asleep, 0);
    ez_mutex_unlock(pool->mutex);
}

static void stop_workers(ez_pool *pool, int n_started) {
    ez_atomic_int_store(&pool->stop, 1);
    open_gate(pool);
    for (int i = 0; i < n_started; i++) ez_thread_join(pool->workers[i].thread);
}

static void free_pool(ez_pool *pool) {
    if (pool->scratch)
        for (int i = 0; i < pool->n_threads; i++) ez_aligned_free(pool->scratch[i].ptr);
    ez_aligned_free(pool->scratch);
    free(pool->workers);
    ez_cond_destroy(pool->done);
    ez_cond_destroy(pool->wake);
    ez_mutex_destroy(pool->mutex);
    ez_aligned_free(pool);
}

static int start_workers(ez_pool *pool) {
    for (int i = 0; i < pool->n_threads - 1; i++) {
        worker *w = &pool->workers[i];
        w->pool = pool;
        w->index = i + 1;
        w->thread = ez_thread_start(worker_main, w);
        if (!w->thread) {
            stop_workers(pool, i);
            return ez_fail(ELIZA_E_NOMEM, "thread pool: cannot start worker thread %d of %d", i + 1,
                           pool->n_threads - 1);
        }
    }
    return ELIZA_OK;
}

ez_pool *ez_pool_create(int n_threads) {
    ez_pool *pool;
    size_t scratch_bytes;
    if (n_threads <= 0) n_threads = ez_cpu_count();
    if (n_threads > POOL_MAX_THREADS) {
        ez_fail(ELIZA_E_INVALID_ARG, "thread pool: %d threads requested, at most %d supported", n_threads,
                POOL_MAX_THREADS);
        return NULL;
    }
    pool = (ez_pool *)ez_aligned_alloc(sizeof *pool);
    if (!pool) {
        ez_fail(ELIZA_E_NOMEM, "thread pool: out of memory");
        return NULL;
    }
    memset(pool, 0, sizeof *pool);
    pool->n_threads = n_threads;
    pool->spin_ns = n_threads <= ez_cpu_count() ? POOL_SPIN_NS : 0;
    scratch_bytes = (size_t)n_threads * sizeof(scratch_slot);
    pool->scratch = (scratch_slot *)ez_aligned_alloc(scratch_bytes);
    pool->workers = (worker *)calloc((size_t)n_threads, sizeof(worker));
    pool->mutex = ez_mutex_create();
    pool->wake = ez_cond_create();
    pool->done = ez_cond_create();
    if (pool->scratch) memset(pool->scratch, 0, scratch_bytes);
    if (!pool->scratch || !pool->workers || !pool->mutex || !pool->wake || !pool->done) {
        free_pool(pool);
        ez_fail(ELIZA_E_NOMEM, "thread pool: out of memory for %d threads", n_threads);
        return NULL;
    }
    if (start_workers(pool) != ELIZA_OK) {
        free_pool(pool);
        return NULL;
    }
    return pool;
}

void ez_pool_destroy(ez_pool *pool) {
    if (!pool) return;
    stop_workers(pool, pool->n_threads - 1);
    free_pool(pool);
}

int ez_pool_threads(const ez_pool *pool) { return pool ? pool->n_threads : 1; }

int ez_pool_thread_index(const ez_pool *pool) { return pool && tls_pool == pool ? tls_thread_index : 0; }

/* Chunk size: a multiple of grain giving about POOL_CHUNKS_PER_THREAD chunks
 * per thread, so chunk boundaries fall on multiples of grain. */
static int64_t chunk_size(int64_t n, int64_t grain, int n_threads) {
    int64_t grains = (n + grain - 1) / grain;
    int64_t target = (int64_t)n_threads * POOL_CHUNKS_PER_THREAD;
    return grain * ((grains + target - 1) / target);
}

void ez_pool_for(ez_pool *pool, int64_t n, int64_t grain, ez_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    /* Inline: inside a chunk of this pool, under that chunk's thread index. */
    if (!pool || pool->n_threads == 1 || n <= grain || tls_pool == pool) {
        fn(ctx, 0, n, ez_pool_thread_index(pool));
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    pool->n = n;
    pool->chunk = chunk_size(n, grain, pool->n_threads);
    ez_atomic_i64_store(&pool->next_item, 0);
    open_gate(pool);
    run_chunks(pool, 0);
    close_gate(pool);
}

/* Fallback for callers without a pool; see pool.h (tests only: not
 * thread-safe, freed at exit by the OS). */
static scratch_slot g_fallback_scratch;

void *ez_pool_scratch(ez_pool *pool, int thread_index, size_t bytes) {
    scratch_slot *slot;
    if (!pool) {
        slot = &g_fallback_scratch;
    } else {
        if (thread_index < 0 || thread_index >= pool->n_threads) return NULL;
        slot = &pool->scratch[thread_index];
    }
    if (slot->bytes < bytes || !slot->ptr) {
        void *p = ez_aligned_alloc(bytes);
        if (!p) return NULL;
        ez_aligned_free(slot->ptr);
        slot->ptr = p;
        slot->bytes = bytes;
    }
    return slot->ptr;
}
