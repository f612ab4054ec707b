/* POSIX and Windows implementations of the platform seam (platform.h). */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* madvise: glibc's posix_madvise ignores POSIX_MADV_DONTNEED */
#if defined(__APPLE__)
#define _DARWIN_C_SOURCE
#endif
#endif

#include "platform.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#if defined(_WIN32)
#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#else
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#endif

/* ---- files ------------------------------------------------------------- */

#if defined(_WIN32)
static wchar_t *utf8_to_wide(const char *s) {
    int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, NULL, 0);
    wchar_t *w;
    if (n <= 0) return NULL;
    w = (wchar_t *)malloc((size_t)n * sizeof(wchar_t));
    if (w && MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, s, -1, w, n) != n) {
        free(w);
        w = NULL;
    }
    return w;
}

int32_t ez_map_file(const char *path, ez_mapped_file *out) {
    HANDLE file = INVALID_HANDLE_VALUE, mapping = NULL;
    LARGE_INTEGER size;
    wchar_t *wpath;
    void *view;

    memset(out, 0, sizeof *out);
    if (!path || !*path) return ez_fail(ELIZA_E_INVALID_ARG, "path is empty");
    wpath = utf8_to_wide(path);
    if (!wpath) return ez_fail(ELIZA_E_INVALID_ARG, "path '%s' is not valid UTF-8", path);
    file = CreateFileW(wpath, GENERIC_READ, FILE_SHARE_READ, NULL, OPEN_EXISTING,
                       FILE_ATTRIBUTE_NORMAL, NULL);
    free(wpath);
    if (file == INVALID_HANDLE_VALUE)
        return ez_fail(ELIZA_E_IO, "cannot open '%s' (Windows error %lu)", path, GetLastError());
    if (!GetFileSizeEx(file, &size)) {
        CloseHandle(file);
        return ez_fail(ELIZA_E_IO, "cannot stat '%s' (Windows error %lu)", path, GetLastError());
    }
    if (size.QuadPart == 0) {
        CloseHandle(file);
        return ELIZA_OK;
    }
    mapping = CreateFileMappingW(file, NULL, PAGE_READONLY, 0, 0, NULL);
    CloseHandle(file);
    if (!mapping)
        return ez_fail(ELIZA_E_IO, "cannot map '%s' (Windows error %lu)", path, GetLastError());
    view = MapViewOfFile(mapping, FILE_MAP_READ, 0, 0, 0);
    if (!view) {
        DWORD err = GetLastError();
        CloseHandle(mapping);
        return ez_fail(ELIZA_E_IO, "cannot map '%s' (Windows error %lu)", path, err);
    }
    out->data = (const uint8_t *)view;
    out->size = (uint64_t)size.QuadPart;
    out->os_handle = mapping;
    return ELIZA_OK;
}

void ez_unmap_file(ez_mapped_file *m) {
    if (!m) return;
    if (m->data) UnmapViewOfFile((void *)m->data);
    if (m->os_handle) CloseHandle((HANDLE)m->os_handle);
    memset(m, 0, sizeof *m);
}

void ez_map_release(const void *p, size_t n) {
    (void)p;
    (void)n;
}
#else
int32_t ez_map_file(const char *path, ez_mapped_file *out) {
    struct stat st;
    void *p;
    int fd;

    memset(out, 0, sizeof *out);
    if (!path || !*path) return ez_fail(ELIZA_E_INVALID_ARG, "path is empty");
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ez_fail(ELIZA_E_IO, "cannot open '%s': %s", path, strerror(errno));
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return ez_fail(ELIZA_E_IO, "cannot stat '%s': %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return ez_fail(ELIZA_E_IO, "'%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return ELIZA_OK;
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return ez_fail(ELIZA_E_NOMEM, "'%s' (%lld bytes) does not fit in the address space",
                       path, (long long)st.st_size);
    }
    p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return ez_fail(ELIZA_E_IO, "cannot map '%s': %s", path, strerror(errno));
    out->data = (const uint8_t *)p;
    out->size = (uint64_t)st.st_size;
    return ELIZA_OK;
}

void ez_unmap_file(ez_mapped_file *m) {
    if (!m) return;
    if (m->data) munmap((void *)m->data, (size_t)m->size);
    memset(m, 0, sizeof *m);
}

void ez_map_release(const void *p, size_t n) {
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t begin, end;
    if (page <= 0 || !p) return;
    begin = ((uintptr_t)p + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
    end = ((uintptr_t)p + n) / (uintptr_t)page * (uintptr_t)page;
    if (end > begin) (void)madvise((void *)begin, end - begin, MADV_DONTNEED);
}
#endif

/* ---- memory --------------------------------------------------------------- */

void *ez_aligned_alloc(size_t size) {
    void *p = NULL;
    if (size == 0) size = 1;
    if (size > SIZE_MAX - 64) return NULL;
#if defined(_WIN32)
    p = _aligned_malloc(size, 64);
#else
    if (posix_memalign(&p, 64, size) != 0) p = NULL;
#endif
    return p;
}

void ez_aligned_free(void *p) {
#if defined(_WIN32)
    _aligned_free(p);
#else
    free(p);
#endif
}

/* ---- time, cpus, environment --------------------------------------------- */

uint64_t ez_time_ns(void) {
#if defined(_WIN32)
    static LARGE_INTEGER freq;
    LARGE_INTEGER now;
    if (!freq.QuadPart) QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&now);
    return (uint64_t)((double)now.QuadPart * 1e9 / (double)freq.QuadPart);
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

void ez_sleep_ms(int ms) {
#if defined(_WIN32)
    Sleep((DWORD)ms);
#else
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
#endif
}

void ez_thread_yield(void) {
#if defined(_WIN32)
    SwitchToThread();
#else
    sched_yield();
#endif
}

int ez_cpu_count(void) {
#if defined(_WIN32)
    DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    return n > 0 ? (int)n : 1;
#else
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
#endif
}

int ez_env_flag(const char *name) {
    const char *v = getenv(name);
    if (!v) return 0;
    return strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "TRUE") == 0 ||
           strcmp(v, "yes") == 0 || strcmp(v, "on") == 0;
}

/* ---- mutex, condition, threads --------------------------------------------- */

#if defined(_WIN32)
struct ez_mutex { SRWLOCK lock; };
struct ez_cond { CONDITION_VARIABLE cv; };
struct ez_thread { HANDLE h; void (*fn)(void *); void *arg; };

ez_mutex *ez_mutex_create(void) {
    ez_mutex *m = (ez_mutex *)calloc(1, sizeof *m);
    if (m) InitializeSRWLock(&m->lock);
    return m;
}
void ez_mutex_destroy(ez_mutex *m) { free(m); }
void ez_mutex_lock(ez_mutex *m) { AcquireSRWLockExclusive(&m->lock); }
void ez_mutex_unlock(ez_mutex *m) { ReleaseSRWLockExclusive(&m->lock); }
ez_cond *ez_cond_create(void) {
    ez_cond *c = (ez_cond *)calloc(1, sizeof *c);
    if (c) InitializeConditionVariable(&c->cv);
    return c;
}
void ez_cond_destroy(ez_cond *c) { free(c); }
void ez_cond_wait(ez_cond *c, ez_mutex *m) { SleepConditionVariableSRW(&c->cv, &m->lock, INFINITE, 0); }
void ez_cond_broadcast(ez_cond *c) { WakeAllConditionVariable(&c->cv); }

static SRWLOCK g_global = SRWLOCK_INIT;
void ez_global_lock(void) { AcquireSRWLockExclusive(&g_global); }
void ez_global_unlock(void) { ReleaseSRWLockExclusive(&g_global); }

static DWORD WINAPI thread_main(LPVOID p) {
    ez_thread *t = (ez_thread *)p;
    t->fn(t->arg);
    return 0;
}
ez_thread *ez_thread_start(void (*fn)(void *), void *arg) {
    ez_thread *t = (ez_thread *)calloc(1, sizeof *t);
    if (!t) return NULL;
    t->fn = fn;
    t->arg = arg;
    t->h = CreateThread(NULL, 0, thread_main, t, 0, NULL);
    if (!t->h) {
        free(t);
        return NULL;
    }
    return t;
}
void ez_thread_join(ez_thread *t) {
    if (!t) return;
    WaitForSingleObject(t->h, INFINITE);
    CloseHandle(t->h);
    free(t);
}

void *ez_dlopen(const char *name) {
    wchar_t *w = utf8_to_wide(name);
    HMODULE h = NULL;
    if (w) h = LoadLibraryW(w);
    free(w);
    return (void *)h;
}
void *ez_dlsym(void *lib, const char *sym) {
    return lib ? (void *)(uintptr_t)GetProcAddress((HMODULE)lib, sym) : NULL;
}
void ez_dlclose(void *lib) {
    if (lib) FreeLibrary((HMODULE)lib);
}
#else
struct ez_mutex { pthread_mutex_t m; };
struct ez_cond { pthread_cond_t c; };
struct ez_thread { pthread_t t; void (*fn)(void *); void *arg; };

ez_mutex *ez_mutex_create(void) {
    ez_mutex *m = (ez_mutex *)calloc(1, sizeof *m);
    if (m && pthread_mutex_init(&m->m, NULL) != 0) {
        free(m);
        m = NULL;
    }
    return m;
}
void ez_mutex_destroy(ez_mutex *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->m);
    free(m);
}
void ez_mutex_lock(ez_mutex *m) { pthread_mutex_lock(&m->m); }
void ez_mutex_unlock(ez_mutex *m) { pthread_mutex_unlock(&m->m); }
ez_cond *ez_cond_create(void) {
    ez_cond *c = (ez_cond *)calloc(1, sizeof *c);
    if (c && pthread_cond_init(&c->c, NULL) != 0) {
        free(c);
        c = NULL;
    }
    return c;
}
void ez_cond_destroy(ez_cond *c) {
    if (!c) return;
    pthread_cond_destroy(&c->c);
    free(c);
}
void ez_cond_wait(ez_cond *c, ez_mutex *m) { pthread_cond_wait(&c->c, &m->m); }
void ez_cond_broadcast(ez_cond *c) { pthread_cond_broadcast(&c->c); }

static pthread_mutex_t g_global = PTHREAD_MUTEX_INITIALIZER;
void ez_global_lock(void) { pthread_mutex_lock(&g_global); }
void ez_global_unlock(void) { pthread_mutex_unlock(&g_global); }

static void *thread_main(void *p) {
    ez_thread *t = (ez_thread *)p;
    t->fn(t->arg);
    return NULL;
}
ez_thread *ez_thread_start(void (*fn)(void *), void *arg) {
    ez_thread *t = (ez_thread *)calloc(1, sizeof *t);
    if (!t) return NULL;
    t->fn = fn;
    t->arg = arg;
    if (pthread_create(&t->t, NULL, thread_main, t) != 0) {
        free(t);
        return NULL;
    }
    return t;
}
void ez_thread_join(ez_thread *t) {
    if (!t) return;
    pthread_join(t->t, NULL);
    free(t);
}

void *ez_dlopen(const char *name) { return dlopen(name, RTLD_NOW | RTLD_LOCAL); }
void *ez_dlsym(void *lib, const char *sym) { return lib ? dlsym(lib, sym) : NULL; }
void ez_dlclose(void *lib) {
    if (lib) dlclose(lib);
}
#endif
