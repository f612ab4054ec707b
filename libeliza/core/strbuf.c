/* Growable string buffer for JSON documents and messages. */
#include "strbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

/* Makes room for `extra` more bytes plus the terminating NUL. */
static int reserve(ez_strbuf *sb, size_t extra) {
    size_t need, cap;
    char *p;

    if (sb->failed) return 0;
    if (extra > SIZE_MAX - 1 - sb->len) goto fail;
    need = sb->len + extra + 1;
    if (need <= sb->cap) return 1;
    cap = sb->cap ? sb->cap : 256;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    p = (char *)realloc(sb->data, cap);
    if (!p) goto fail;
    sb->data = p;
    sb->cap = cap;
    return 1;

fail:
    sb->failed = 1;
    return 0;
}

void ez_sb_append(ez_strbuf *sb, const char *s, size_t n) {
    if (n == 0 || !reserve(sb, n)) return;
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void ez_sb_puts(ez_strbuf *sb, const char *s) {
    ez_sb_append(sb, s, strlen(s));
}

void ez_sb_printf(ez_strbuf *sb, const char *fmt, ...) {
    va_list ap, ap2;
    int n;

    if (sb->failed) return;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    /* First try in the space already there; most appends fit. */
    n = vsnprintf(sb->data ? sb->data + sb->len : NULL, sb->data ? sb->cap - sb->len : 0, fmt, ap);
    if (n < 0) {
        sb->failed = 1;
    } else if (sb->data && (size_t)n < sb->cap - sb->len) {
        sb->len += (size_t)n;
    } else if (reserve(sb, (size_t)n)) {
        vsnprintf(sb->data + sb->len, sb->cap - sb->len, fmt, ap2);
        sb->len += (size_t)n;
    }
    if (sb->data && !sb->failed) sb->data[sb->len] = '\0';
    va_end(ap2);
    va_end(ap);
}

void ez_sb_json_str(ez_strbuf *sb, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0;

    if (n == 0) {
        ez_sb_append(sb, "\"\"", 2);
        return;
    }
    ez_sb_append(sb, "\"", 1);
    while (i < n) {
        unsigned c = u[i];
        size_t len, bad = 0;

        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            i++;
            continue;
        }
        if (c >= 0x80) {
            len = ez_utf8_seq(u + i, n - i, &bad);
            if (len) {
                i += len;
                continue;
            }
        }
        /* Flush the plain run before the byte that needs attention. */
        ez_sb_append(sb, s + run, i - run);
        if (c >= 0x80) {
            ez_sb_append(sb, "\xEF\xBF\xBD", 3);
            i += bad;
        } else {
            char esc[7];
            switch (c) {
            case '"': ez_sb_append(sb, "\\\"", 2); break;
            case '\\': ez_sb_append(sb, "\\\\", 2); break;
            case '\b': ez_sb_append(sb, "\\b", 2); break;
            case '\f': ez_sb_append(sb, "\\f", 2); break;
            case '\n': ez_sb_append(sb, "\\n", 2); break;
            case '\r': ez_sb_append(sb, "\\r", 2); break;
            case '\t': ez_sb_append(sb, "\\t", 2); break;
            default:
                esc[0] = '\\';
                esc[1] = 'u';
                esc[2] = '0';
                esc[3] = '0';
                esc[4] = hex[c >> 4];
                esc[5] = hex[c & 15];
                esc[6] = '\0';
                ez_sb_append(sb, esc, 6);
                break;
            }
            i++;
        }
        run = i;
    }
    ez_sb_append(sb, s + run, i - run);
    ez_sb_append(sb, "\"", 1);
}

/* Appends a printf'd float for JSON: the decimal mark is '.' whatever the C
 * locale says, and an integral value keeps a ".0" so that readers see a
 * float ("-1000.0", not "-1000"). */
static void append_number(ez_strbuf *sb, char *buf) {
    char *p;
    int is_int = 1;
    for (p = buf; *p; p++) {
        if (*p == 'e' || *p == 'E') is_int = 0;
        else if (!((*p >= '0' && *p <= '9') || *p == '-' || *p == '+')) {
            *p = '.';
            is_int = 0;
        }
    }
    ez_sb_puts(sb, buf);
    if (is_int) ez_sb_append(sb, ".0", 2);
}

void ez_sb_json_num(ez_strbuf *sb, double v) {
    char buf[40];
    int prec;

    if (!isfinite(v)) {
        ez_sb_puts(sb, "null");
        return;
    }
    /* The shortest %g that reads back as the same double. */
    for (prec = 15; prec < 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (prec == 17) snprintf(buf, sizeof buf, "%.17g", v);
    append_number(sb, buf);
}

void ez_sb_json_f32(ez_strbuf *sb, float v) {
    char buf[40];
    int prec;

    if (!isfinite(v)) {
        ez_sb_puts(sb, "null");
        return;
    }
    for (prec = 6; prec < 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    if (prec == 9) snprintf(buf, sizeof buf, "%.9g", (double)v);
    append_number(sb, buf);
}

char *ez_sb_take(ez_strbuf *sb) {
    char *out = NULL;

    if (sb->failed) {
        free(sb->data);
    } else if (sb->data) {
        out = sb->data;
    } else {
        out = (char *)malloc(1);
        if (out) out[0] = '\0';
    }
    sb->data = NULL;
    sb->len = sb->cap = 0;
    sb->failed = 0;
    return out;
}

void ez_sb_free(ez_strbuf *sb) {
    free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
    sb->failed = 0;
}
