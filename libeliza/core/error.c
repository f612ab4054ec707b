/* Thread-local error messages and the host's log sink. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

#include "platform.h"

#define EZ_ERROR_CAP 512

static EZ_THREAD_LOCAL char g_error[EZ_ERROR_CAP];

/* The sink is read on every log call and swapped rarely: guard it with the
 * global lock so a host swapping sinks never sees a torn (fn, user) pair. */
static eliza_log_fn g_log_fn;
static void *g_log_user;
static int32_t g_log_max = ELIZA_LOG_WARN;

int32_t ez_fail(int32_t code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_error, sizeof g_error, fmt, ap);
    va_end(ap);
    return code;
}

void ez_clear_error(void) { g_error[0] = '\0'; }

const char *ez_error_message(void) { return g_error; }

void ez_log_set_callback(eliza_log_fn fn, int32_t max_level, void *user_data) {
    ez_global_lock();
    g_log_fn = fn;
    g_log_user = user_data;
    g_log_max = max_level;
    ez_global_unlock();
}

void ez_log(int32_t level, const char *fmt, ...) {
    char line[1024];
    eliza_log_fn fn;
    void *user;
    int32_t max;
    va_list ap;

    ez_global_lock();
    fn = g_log_fn;
    user = g_log_user;
    max = g_log_max;
    ez_global_unlock();
    if (!fn || level > max) return;

    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fn(level, line, user);
}
