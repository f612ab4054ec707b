/* Errors and logging. A failing function records a thread-local message with
 * ez_fail() and returns its code; the API layer hands the message to the host
 * through eliza_last_error(). Logging goes to the host's callback only, and
 * only from threads that are inside an API call (never from pool workers). */
#ifndef EZ_ERROR_H
#define EZ_ERROR_H

#include "common.h"

/* Records "message" for this thread and returns `code` (negative). */
EZ_INTERNAL int32_t ez_fail(int32_t code, const char *fmt, ...) EZ_PRINTF(2, 3);

/* Clears the thread's message; every API entry point calls it first. */
EZ_INTERNAL void ez_clear_error(void);

/* The thread's message ("" if none). */
EZ_INTERNAL const char *ez_error_message(void);

/* Sends one line to the host's log callback if one is installed and `level`
 * passes its filter. Cheap when silent. */
EZ_INTERNAL void ez_log(int32_t level, const char *fmt, ...) EZ_PRINTF(2, 3);

EZ_INTERNAL void ez_log_set_callback(eliza_log_fn fn, int32_t max_level, void *user_data);

#endif /* EZ_ERROR_H */
