/* The checks of the C tests. A failed check reports where it is and the
 * test goes on; main() returns nonzero when g_failed is.
 *
 *   CHECK(cond)           reports the condition's text on stderr;
 *   CHECK_MSG(cond, ...)  reports a printf-style message on stdout;
 *   CHECK_RC(expr, want)  expr must return the status `want`; reports the
 *                         status it got and the library's last message.
 *
 * Every check counts into g_passed or g_failed. */
#ifndef EZ_TEST_CHECK_H
#define EZ_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "eliza.h"

static int g_passed, g_failed;

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (cond) {                                                                   \
            g_passed++;                                                               \
        } else {                                                                      \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            g_failed++;                                                               \
        }                                                                             \
    } while (0)

#define CHECK_MSG(cond, ...)                            \
    do {                                                \
        if (cond) {                                     \
            g_passed++;                                 \
        } else {                                        \
            g_failed++;                                 \
            printf("FAIL %s:%d: ", __FILE__, __LINE__); \
            printf(__VA_ARGS__);                        \
            printf("\n");                               \
        }                                               \
    } while (0)

#define CHECK_RC(expr, want)                                                           \
    do {                                                                               \
        int32_t rc_ = (expr);                                                          \
        if (rc_ == (want)) {                                                           \
            g_passed++;                                                                \
        } else {                                                                       \
            fprintf(stderr, "%s:%d: %s returned %d (%s), expected %s; message: %s\n", \
                    __FILE__, __LINE__, #expr, (int)rc_, eliza_status_name(rc_), #want, \
                    eliza_last_error());                                               \
            g_failed++;                                                                \
        }                                                                              \
    } while (0)

/* ctest's SKIP_RETURN_CODE for a test that cannot run on this CPU. */
#define EZ_TEST_SKIP 77

/* Under ELIZA_SIMD=<level> (ctest's *_avx2 repeats): nonzero, after saying
 * so, when the library runs another level because the CPU lacks that one. */
static inline int pinned_level_missing(void) {
    const char *want = getenv("ELIZA_SIMD");
    const char *active;
    if (!want || !*want) return 0;
    /* The level itself, not eliza_capabilities_json(): that also probes the
     * Vulkan devices, whose drivers leave allocations behind under ASan. */
    active = ez_simd_level_name(ez_simd_level_active());
    if (strcmp(active, want) == 0) return 0;
    printf("skipped: ELIZA_SIMD=%s but this CPU lacks that level (running %s)\n", want, active);
    return 1;
}

#define SKIP_IF_PINNED_LEVEL_MISSING()                    \
    do {                                                  \
        if (pinned_level_missing()) return EZ_TEST_SKIP; \
    } while (0)

#endif /* EZ_TEST_CHECK_H */
