/* Strict UTF-8 and the code point table lookup (see unicode.h). */
#include "llm/unicode.h"

uint8_t ez_unicode_code(uint32_t cp) {
    /* Last run whose start is <= cp; run 0 starts at U+0000. */
    uint32_t lo = 0, hi = ez_unicode_n_runs;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ez_unicode_run_start[mid] <= cp)
            lo = mid;
        else
            hi = mid;
    }
    return ez_unicode_run_code[lo];
}

uint32_t ez_unicode_tolower(uint32_t cp) {
    uint32_t lo = 0, hi = ez_unicode_n_lower;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ez_unicode_lower[mid][0] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ez_unicode_n_lower && ez_unicode_lower[lo][0] == cp ? ez_unicode_lower[lo][1] : cp;
}

uint32_t ez_unicode_nfd_first(uint32_t cp) {
    /* The last range whose first code point is <= cp. */
    uint32_t lo = 0, hi = ez_unicode_n_nfd;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ez_unicode_nfd[mid][0] <= cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && cp <= ez_unicode_nfd[lo - 1][1] ? ez_unicode_nfd[lo - 1][2] : cp;
}

size_t ez_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    uint32_t c;
    size_t len, i;
    uint8_t b0 = s[0];

    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        len = 2;
        c = b0 & 0x1Fu;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3;
        c = b0 & 0x0Fu;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4;
        c = b0 & 0x07u;
    } else {
        return 0; /* continuation byte, overlong C0/C1, or F5..FF */
    }
    if (n < len) return 0;
    for (i = 1; i < len; i++) {
        if ((s[i] & 0xC0u) != 0x80u) return 0;
        c = (c << 6) | (s[i] & 0x3Fu);
    }
    if ((len == 3 && (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF))) ||
        (len == 4 && (c < 0x10000 || c > 0x10FFFF)))
        return 0;
    *cp = c;
    return len;
}

size_t ez_utf8_validate(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        size_t len;
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        len = ez_utf8_decode(s + i, n - i, &cp);
        if (len == 0) return i;
        i += len;
    }
    return n;
}

size_t ez_utf8_encode(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}
