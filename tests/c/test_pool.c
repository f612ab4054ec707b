/* Thread pool: every index visited exactly once, chunk boundaries on grain
 * multiples, many back-to-back dispatches (a lost wake-up hangs until the
 * ctest timeout), sleeping and waking, waiting through the yielding spin,
 * nesting, scratch, create/destroy. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/platform.h"
#include "core/pool.h"
#include "check.h"

#define MAX_THREADS 8

/* Each thread counts its visits in its own array, so the check needs no
 * atomics and a double visit by two threads cannot hide as a lost update. */
typedef struct {
    int64_t n, grain;
    int n_threads;
    uint8_t *visits[MAX_THREADS];
    int bad_range;  /* a chunk off the grain grid, empty, or out of bounds */
    int bad_thread; /* a thread index outside [0, n_threads) */
} visit_job;

static void count_visits(void *ctx, int64_t begin, int64_t end, int thread_index) {
    visit_job *job = (visit_job *)ctx;
    if (thread_index < 0 || thread_index >= job->n_threads) {
        job->bad_thread = 1;
        return;
    }
    if (begin < 0 || end > job->n || begin >= end || begin % job->grain != 0 ||
        (end != job->n && end % job->grain != 0))
        job->bad_range = 1;
    for (int64_t i = begin; i < end && i < job->n; i++) job->visits[thread_index][i]++;
}

/* 1 if every index in [0, n) was visited exactly once. */
static int visited_once(const visit_job *job) {
    for (int64_t i = 0; i < job->n; i++) {
        int total = 0;
        for (int t = 0; t < job->n_threads; t++) total += job->visits[t][i];
        if (total != 1) return 0;
    }
    return 1;
}

static void run_visit(ez_pool *pool, int n_threads, int64_t n, int64_t grain) {
    visit_job job;
    memset(&job, 0, sizeof job);
    job.n = n;
    job.grain = grain < 1 ? 1 : grain;
    job.n_threads = n_threads;
    for (int t = 0; t < n_threads; t++) job.visits[t] = (uint8_t *)calloc((size_t)(n > 0 ? n : 1), 1);
    ez_pool_for(pool, n, grain, count_visits, &job);
    CHECK_MSG(visited_once(&job), "threads=%d n=%lld grain=%lld: an index was not visited exactly once", n_threads,
          (long long)n, (long long)grain);
    CHECK_MSG(!job.bad_range, "threads=%d n=%lld grain=%lld: a chunk was off the grain grid", n_threads,
          (long long)n, (long long)grain);
    CHECK_MSG(!job.bad_thread, "threads=%d: thread index out of range", n_threads);
    for (int t = 0; t < n_threads; t++) free(job.visits[t]);
}

static void test_pool_visits_every_index_once(void) {
    static const int64_t sizes[] = {0, 1, 2, 3, 7, 8, 9, 63, 64, 65, 1000, 4099, 100003, 1 << 20};
    static const int64_t grains[] = {0, 1, 3, 64, 1000, 1 << 21};
    for (int nt = 1; nt <= MAX_THREADS; nt++) {
        ez_pool *pool = ez_pool_create(nt);
        CHECK_MSG(pool != NULL, "create %d threads: %s", nt, ez_error_message());
        if (!pool) continue;
        CHECK_MSG(ez_pool_threads(pool) == nt, "ez_pool_threads = %d, want %d", ez_pool_threads(pool), nt);
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (size_t g = 0; g < sizeof grains / sizeof grains[0]; g++) run_visit(pool, nt, sizes[s], grains[g]);
        ez_pool_destroy(pool);
    }
}

static void test_pool_null_runs_inline(void) {
    run_visit(NULL, 1, 12345, 7);
    CHECK_MSG(ez_pool_threads(NULL) == 1, "ez_pool_threads(NULL) = %d", ez_pool_threads(NULL));
}

/* A sum over many tiny loops: each iteration adds i to its own slot. */
typedef struct {
    int64_t *slots;
} sum_job;

static void add_index(void *ctx, int64_t begin, int64_t end, int thread_index) {
    sum_job *job = (sum_job *)ctx;
    (void)thread_index;
    for (int64_t i = begin; i < end; i++) job->slots[i] += i + 1;
}

static void test_pool_many_tiny_loops_back_to_back(void) {
    enum { LOOPS = 20000, WIDTH = 16 };
    for (int nt = 2; nt <= 4; nt++) {
        ez_pool *pool = ez_pool_create(nt);
        int64_t slots[WIDTH] = {0};
        sum_job job = {slots};
        int ok = 1;
        if (!pool) continue;
        for (int l = 0; l < LOOPS; l++) ez_pool_for(pool, WIDTH, 1, add_index, &job);
        for (int i = 0; i < WIDTH; i++) ok &= slots[i] == (int64_t)LOOPS * (i + 1);
        CHECK_MSG(ok, "threads=%d: %d tiny loops lost or repeated work", nt, LOOPS);
        ez_pool_destroy(pool);
    }
}

static void wait_ns(uint64_t ns) {
    uint64_t start = ez_time_ns();
    while (ez_time_ns() - start < ns) {
    }
}

/* Idle gaps longer than the spin window put workers to sleep; the next loop
 * must wake them. */
static void test_pool_wakes_sleeping_workers(void) {
    ez_pool *pool = ez_pool_create(2);
    int64_t slots[64] = {0};
    sum_job job = {slots};
    int ok = 1;
    if (!pool) return;
    for (int l = 0; l < 20; l++) {
        ez_pool_for(pool, 64, 1, add_index, &job);
        wait_ns(l % 2 ? 2000000 : 50000);
    }
    for (int i = 0; i < 64; i++) ok &= slots[i] == 20 * (int64_t)(i + 1);
    CHECK_MSG(ok, "loops after idle gaps lost work");
    ez_pool_destroy(pool);
}

typedef struct {
    int64_t *slots;
    uint64_t busy_ns; /* per index */
} slow_job;

static void add_index_slowly(void *ctx, int64_t begin, int64_t end, int thread_index) {
    slow_job *job = (slow_job *)ctx;
    (void)thread_index;
    for (int64_t i = begin; i < end; i++) {
        wait_ns(job->busy_ns);
        job->slots[i] += i + 1;
    }
}

/* Gaps and chunks that end inside the spin's yielding part (after its
 * first 10 us of pauses, before the 50 us it gives up at): workers waiting
 * for the next loop and the caller waiting for the workers yield their
 * cores between looks, and must still see each loop and each leaving
 * worker exactly once. */
static void test_pool_gaps_in_the_yielding_spin(void) {
    for (int nt = 2; nt <= 3; nt++) {
        ez_pool *pool = ez_pool_create(nt);
        int64_t slots[8] = {0};
        slow_job job = {slots, 0};
        int ok = 1;
        if (!pool) continue;
        for (int l = 0; l < 400; l++) {
            job.busy_ns = (uint64_t)(l % 4) * 10000;
            ez_pool_for(pool, 8, 1, add_index_slowly, &job);
            wait_ns(15000 + (uint64_t)(l % 7) * 5000);
        }
        for (int i = 0; i < 8; i++) ok &= slots[i] == 400 * (int64_t)(i + 1);
        CHECK_MSG(ok, "threads=%d: loops with gaps of 15-45 us lost or repeated work", nt);
        ez_pool_destroy(pool);
    }
}

typedef struct {
    ez_pool *pool;
    int64_t inner_n;
    int64_t *counts; /* [outer_n][inner_n] */
    int bad_thread;
} nested_job;

typedef struct {
    nested_job *outer;
    int64_t row;
    int thread_index;
} inner_ctx;

static void inner_body(void *ctx, int64_t begin, int64_t end, int thread_index) {
    inner_ctx *in = (inner_ctx *)ctx;
    if (thread_index != in->thread_index || ez_pool_thread_index(in->outer->pool) != thread_index)
        in->outer->bad_thread = 1;
    for (int64_t i = begin; i < end; i++) in->outer->counts[in->row * in->outer->inner_n + i]++;
}

static void outer_body(void *ctx, int64_t begin, int64_t end, int thread_index) {
    nested_job *job = (nested_job *)ctx;
    for (int64_t r = begin; r < end; r++) {
        inner_ctx in = {job, r, thread_index};
        ez_pool_for(job->pool, job->inner_n, 1, inner_body, &in);
        /* one chunk (n <= grain): still this thread's index, not 0 */
        ez_pool_for(job->pool, job->inner_n, job->inner_n, inner_body, &in);
    }
}

static void test_pool_nested_loop_runs_inline(void) {
    enum { OUTER = 37, INNER = 53 };
    ez_pool *pool = ez_pool_create(3);
    int64_t counts[OUTER * INNER] = {0};
    nested_job job = {pool, INNER, counts, 0};
    int ok = 1;
    if (!pool) return;
    ez_pool_for(pool, OUTER, 1, outer_body, &job);
    for (int i = 0; i < OUTER * INNER; i++) ok &= counts[i] == 2;
    CHECK_MSG(ok, "nested loops did not visit every index once each");
    CHECK_MSG(!job.bad_thread, "nested loop ran under another thread index than its outer chunk");
    CHECK_MSG(ez_pool_thread_index(pool) == 0, "thread index outside any loop must be 0");
    ez_pool_destroy(pool);
}

/* Each thread fills its scratch with its index; overlapping or misaligned
 * slots show up as a wrong pattern. */
typedef struct {
    ez_pool *pool;
    size_t bytes;
    int bad;
} scratch_job;

static void fill_scratch(void *ctx, int64_t begin, int64_t end, int thread_index) {
    scratch_job *job = (scratch_job *)ctx;
    uint8_t *p = (uint8_t *)ez_pool_scratch(job->pool, thread_index, job->bytes);
    (void)begin;
    (void)end;
    if (!p || ((uintptr_t)p & 63) != 0) {
        job->bad = 1;
        return;
    }
    for (int rep = 0; rep < 50; rep++) {
        memset(p, thread_index + 1, job->bytes);
        for (size_t i = 0; i < job->bytes; i++)
            if (p[i] != (uint8_t)(thread_index + 1)) job->bad = 1;
    }
}

static void test_pool_scratch_is_per_thread_and_aligned(void) {
    static const size_t sizes[] = {1, 100, 4096, 1000, 1 << 20, 64};
    ez_pool *pool = ez_pool_create(4);
    if (!pool) return;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        scratch_job job = {pool, sizes[s], 0};
        ez_pool_for(pool, 64, 1, fill_scratch, &job);
        CHECK_MSG(!job.bad, "scratch of %zu bytes: misaligned, missing or shared between threads", sizes[s]);
    }
    CHECK_MSG(ez_pool_scratch(pool, 4, 16) == NULL, "scratch slot past the thread count must be refused");
    CHECK_MSG(ez_pool_scratch(pool, -1, 16) == NULL, "negative scratch slot must be refused");
    ez_pool_destroy(pool);
    {
        uint8_t *p = (uint8_t *)ez_pool_scratch(NULL, 0, 300);
        CHECK_MSG(p != NULL && ((uintptr_t)p & 63) == 0, "fallback scratch missing or misaligned");
        if (p) memset(p, 1, 300);
    }
}

static void test_pool_repeated_create_destroy(void) {
    int ok = 1;
    for (int rep = 0; rep < 60; rep++) {
        int nt = 1 + rep % MAX_THREADS;
        ez_pool *pool = ez_pool_create(nt);
        if (!pool) {
            ok = 0;
            continue;
        }
        if (rep % 3 != 0) run_visit(pool, nt, 1000 + rep, 1 + rep % 5);
        if (rep % 2) ez_pool_scratch(pool, nt - 1, 4096);
        ez_pool_destroy(pool);
    }
    CHECK_MSG(ok, "repeated create failed");
    ez_pool_destroy(NULL);
}

static void test_pool_default_and_absurd_thread_counts(void) {
    ez_pool *pool = ez_pool_create(0);
    CHECK_MSG(pool != NULL && ez_pool_threads(pool) == ez_cpu_count(), "n_threads=0 must give one per CPU (%d)",
          ez_cpu_count());
    ez_pool_destroy(pool);
    pool = ez_pool_create(1000000);
    CHECK_MSG(pool == NULL && ez_error_message()[0] != '\0', "a million threads must be refused with a message");
    ez_pool_destroy(pool);
}

int main(void) {
    test_pool_visits_every_index_once();
    test_pool_null_runs_inline();
    test_pool_many_tiny_loops_back_to_back();
    test_pool_wakes_sleeping_workers();
    test_pool_gaps_in_the_yielding_spin();
    test_pool_nested_loop_runs_inline();
    test_pool_scratch_is_per_thread_and_aligned();
    test_pool_repeated_create_destroy();
    test_pool_default_and_absurd_thread_counts();
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed != 0;
}
