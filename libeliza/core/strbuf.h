/* A growable string for building JSON and messages. On allocation failure
 * the buffer turns "failed" and further appends are no-ops, so callers check
 * once at the end. */
#ifndef EZ_STRBUF_H
#define EZ_STRBUF_H

#include "common.h"

typedef struct {
    char *data;     /* NUL-terminated when len > 0 */
    size_t len, cap;
    int failed;
} ez_strbuf;

EZ_INTERNAL void ez_sb_append(ez_strbuf *sb, const char *s, size_t n);
EZ_INTERNAL void ez_sb_puts(ez_strbuf *sb, const char *s);
EZ_INTERNAL void ez_sb_printf(ez_strbuf *sb, const char *fmt, ...) EZ_PRINTF(2, 3);
/* Appends s[0..n) as a quoted JSON string; invalid UTF-8 becomes U+FFFD. */
EZ_INTERNAL void ez_sb_json_str(ez_strbuf *sb, const char *s, size_t n);
/* Appends a double as JSON (non-finite values become null). */
EZ_INTERNAL void ez_sb_json_num(ez_strbuf *sb, double v);
/* The same for a float, shortest digits that read back as the same float
 * (0.1f prints as 0.1, not 0.10000000149011612). */
EZ_INTERNAL void ez_sb_json_f32(ez_strbuf *sb, float v);
/* Hands the buffer out (malloc'd, NUL-terminated; "" if empty) or returns
 * NULL if any append failed; the strbuf is reset either way. */
EZ_INTERNAL char *ez_sb_take(ez_strbuf *sb);
EZ_INTERNAL void ez_sb_free(ez_strbuf *sb);

#endif /* EZ_STRBUF_H */
