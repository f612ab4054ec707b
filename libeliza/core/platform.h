/* The operating system seam: file mapping, threads, once, time, dynamic
 * loading, aligned memory. POSIX and Windows implementations live in
 * platform.c; nothing else in libeliza includes an OS header. */
#ifndef EZ_PLATFORM_H
#define EZ_PLATFORM_H

#include "common.h"

/* A read-only mapping of a whole file. data is NULL for an empty file. */
typedef struct {
    const uint8_t *data;
    uint64_t size;     /* bytes */
    void *os_handle;   /* platform bookkeeping */
} ez_mapped_file;

/* Maps `path` read-only. Returns ELIZA_OK, or ELIZA_E_IO / ELIZA_E_INVALID_ARG
 * with a message naming the path and the OS error. */
EZ_INTERNAL int32_t ez_map_file(const char *path, ez_mapped_file *out);
EZ_INTERNAL void ez_unmap_file(ez_mapped_file *m);

/* Advice that the whole pages inside [p, p + n) of a read-only file mapping
 * will not be read again soon: they leave the process's resident set and
 * are read back from the file if touched (POSIX madvise MADV_DONTNEED). A
 * no-op on Windows. */
EZ_INTERNAL void ez_map_release(const void *p, size_t n);

/* 64-byte aligned allocation, freed with ez_aligned_free. Returns NULL on
 * failure or when `size` overflows. */
EZ_INTERNAL void *ez_aligned_alloc(size_t size);
EZ_INTERNAL void ez_aligned_free(void *p);

/* Monotonic clock in nanoseconds. */
EZ_INTERNAL uint64_t ez_time_ns(void);

/* Sleeps the calling thread for about `ms` milliseconds. */
EZ_INTERNAL void ez_sleep_ms(int ms);

/* Offers the calling thread's core to another thread that is ready to run
 * on it; returns at once when there is none. */
EZ_INTERNAL void ez_thread_yield(void);

/* Number of online logical CPUs (>= 1). */
EZ_INTERNAL int ez_cpu_count(void);

/* Reads an environment variable as a boolean ("1", "true", "yes", "on"). */
EZ_INTERNAL int ez_env_flag(const char *name);

/* Mutex and condition variable. */
typedef struct ez_mutex ez_mutex;
typedef struct ez_cond ez_cond;
EZ_INTERNAL ez_mutex *ez_mutex_create(void);
EZ_INTERNAL void ez_mutex_destroy(ez_mutex *m);
EZ_INTERNAL void ez_mutex_lock(ez_mutex *m);
EZ_INTERNAL void ez_mutex_unlock(ez_mutex *m);
EZ_INTERNAL ez_cond *ez_cond_create(void);
EZ_INTERNAL void ez_cond_destroy(ez_cond *c);
EZ_INTERNAL void ez_cond_wait(ez_cond *c, ez_mutex *m);
EZ_INTERNAL void ez_cond_broadcast(ez_cond *c);

/* A process-wide lock for lazily built static state (capabilities, layout). */
EZ_INTERNAL void ez_global_lock(void);
EZ_INTERNAL void ez_global_unlock(void);

/* Threads. */
typedef struct ez_thread ez_thread;
EZ_INTERNAL ez_thread *ez_thread_start(void (*fn)(void *), void *arg);
EZ_INTERNAL void ez_thread_join(ez_thread *t);

/* Dynamic loading; NULL when the library cannot be loaded. */
EZ_INTERNAL void *ez_dlopen(const char *name);
EZ_INTERNAL void *ez_dlsym(void *lib, const char *sym);
EZ_INTERNAL void ez_dlclose(void *lib);

#endif /* EZ_PLATFORM_H */
