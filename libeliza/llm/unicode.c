/* The code point table lookups (see unicode.h). */
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
