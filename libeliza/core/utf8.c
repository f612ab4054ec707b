#include "utf8.h"

#include <string.h>

/* Bytes of the sequence lead byte c starts, 0 when no valid one starts with c. */
static size_t lead_len(unsigned c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

size_t ez_utf8_seq(const void *s, size_t n, size_t *bad) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned c = u[0], lo = 0x80, hi = 0xBF;
    size_t len = lead_len(c), i;
    if (len == 1) return 1;
    if (len == 0) {
        if (bad) *bad = 1;
        return 0;
    }
    if (c == 0xE0) lo = 0xA0; /* overlong */
    if (c == 0xED) hi = 0x9F; /* surrogates */
    if (c == 0xF0) lo = 0x90; /* overlong */
    if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
    for (i = 1; i < len && i < n; i++)
        if (i == 1 ? (u[i] < lo || u[i] > hi) : (u[i] < 0x80 || u[i] > 0xBF)) break;
    if (i == len) return len;
    if (bad) *bad = i;
    return 0;
}

size_t ez_utf8_invalid_at(const void *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, len;
    while (i < n) {
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        if (!(len = ez_utf8_seq(u + i, n - i, NULL))) return i;
        i += len;
    }
    return n;
}

uint32_t ez_utf8_next(const char *s, size_t *i) {
    const unsigned char *p = (const unsigned char *)s + *i;
    if (p[0] < 0x80) {
        *i += 1;
        return p[0];
    }
    if (p[0] < 0xE0) {
        *i += 2;
        return ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    }
    if (p[0] < 0xF0) {
        *i += 3;
        return ((uint32_t)(p[0] & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    }
    *i += 4;
    return ((uint32_t)(p[0] & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) | ((uint32_t)(p[2] & 0x3F) << 6) |
           (p[3] & 0x3F);
}

size_t ez_utf8_prev(const char *s, size_t end) {
    do end--;
    while (end > 0 && ((unsigned char)s[end] & 0xC0) == 0x80);
    return end;
}

int64_t ez_utf8_one(const void *s, size_t n) {
    size_t i = 0;
    if (n == 0 || ez_utf8_seq(s, n, NULL) != n) return -1;
    return ez_utf8_next((const char *)s, &i);
}

size_t ez_utf8_decode(const void *s, size_t n, uint32_t *cp) {
    size_t i = 0, len = ez_utf8_seq(s, n, NULL);
    if (len) *cp = ez_utf8_next((const char *)s, &i);
    return len;
}

size_t ez_utf8_encode(uint32_t cp, void *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t ez_utf8_complete(const void *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, len, bad;
    while (i < n) {
        if ((len = ez_utf8_seq(u + i, n - i, &bad))) {
            i += len;
            continue;
        }
        /* A valid lead byte whose valid continuation runs into the end. */
        if (lead_len(u[i]) && bad == n - i) return i;
        i += bad;
    }
    return n;
}

size_t ez_utf8_repair(void *out, const void *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned char *o = (unsigned char *)out;
    size_t i = 0, w = 0, len, bad;
    while (i < n) {
        if ((len = ez_utf8_seq(u + i, n - i, &bad))) {
            memcpy(o + w, u + i, len);
            w += len;
            i += len;
        } else {
            memcpy(o + w, "\xEF\xBF\xBD", 3);
            w += 3;
            i += bad;
        }
    }
    return w;
}
