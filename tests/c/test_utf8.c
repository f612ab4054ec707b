/* core/utf8 against an independent definition of UTF-8: a byte string is
 * one valid sequence when it decodes by the bit patterns alone to a code
 * point that is not a surrogate, at most U+10FFFF, and that needs exactly
 * that many bytes. Every 1-, 2- and 3-byte string, and every 4-byte string
 * with a lead byte F0..F7 and continuation bytes of a sampled grid; then
 * the maximal-subpart lengths Python's errors="replace" uses, the scan, the
 * decoder and the step back, the encoder, and the stream's pieces: the hold
 * of an unfinished end and the U+FFFD repair. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/utf8.h"
#include "check.h"

/* The length of the one valid sequence s[0..n) is, or 0. */
static size_t by_definition(const unsigned char *s, size_t n) {
    uint32_t cp;
    size_t len;
    if (s[0] < 0x80) len = 1, cp = s[0];
    else if ((s[0] & 0xE0) == 0xC0) len = 2, cp = s[0] & 0x1F;
    else if ((s[0] & 0xF0) == 0xE0) len = 3, cp = s[0] & 0x0F;
    else if ((s[0] & 0xF8) == 0xF0) len = 4, cp = s[0] & 0x07;
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    if (len != (cp < 0x80 ? 1u : cp < 0x800 ? 2u : cp < 0x10000 ? 3u : 4u)) return 0;
    return len;
}

static uint32_t decode_by_definition(const unsigned char *s, size_t len) {
    uint32_t cp = len == 1 ? s[0] : s[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) cp = cp << 6 | (s[i] & 0x3F);
    return cp;
}

/* One string s[0..n): the sequence length at its start, the exact-string
 * decode, and (when valid) the decoded code point. */
static int agrees(const unsigned char *s, size_t n) {
    size_t want = by_definition(s, n), got = ez_utf8_seq(s, n, NULL), i = 0;
    int64_t one = ez_utf8_one(s, n);
    if (got != want) return 0;
    if (want == n) {
        uint32_t cp = decode_by_definition(s, n);
        if (one != (int64_t)cp || ez_utf8_next((const char *)s, &i) != cp || i != n) return 0;
        if (ez_utf8_invalid_at(s, n) != n) return 0;
    } else if (one != -1) {
        return 0;
    }
    return 1;
}

static void test_every_short_string_agrees_with_the_definition(void) {
    unsigned char s[4];
    int64_t bad = 0;
    for (uint32_t a = 0; a < 256; a++) {
        s[0] = (unsigned char)a;
        bad += !agrees(s, 1);
        for (uint32_t b = 0; b < 256; b++) {
            s[1] = (unsigned char)b;
            bad += !agrees(s, 2);
            for (uint32_t c = 0; c < 256; c++) {
                s[2] = (unsigned char)c;
                bad += !agrees(s, 3);
            }
        }
    }
    for (uint32_t a = 0xF0; a <= 0xF7; a++)
        for (uint32_t b = 0; b < 256; b++)
            for (uint32_t c = 0x70; c < 0xD0; c += 3)
                for (uint32_t d = 0x70; d < 0xD0; d += 5) {
                    s[0] = (unsigned char)a, s[1] = (unsigned char)b, s[2] = (unsigned char)c, s[3] = (unsigned char)d;
                    bad += !agrees(s, 4);
                }
    CHECK_MSG(bad == 0, "%lld strings disagree with the definition\n", (long long)bad);
}

/* Python: b"...".decode("utf-8", "replace") gives one U+FFFD per maximal subpart. */
static void test_maximal_subparts(void) {
    static const struct {
        const char *s;
        size_t n, bad;
    } cases[] = {
        {"\x80", 1, 1},         {"\xC0\x80", 2, 1},     {"\xE0\x80\x80", 3, 1}, {"\xE0\xA0", 2, 2},
        {"\xED\xA0\x80", 3, 1}, {"\xF0\x90\x80", 3, 3}, {"\xF4\x90\x80\x80", 4, 1},
        {"\xF5\x80", 2, 1},     {"\xE2\x82x", 3, 2},    {"\xF0\x9F\x98", 3, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t bad = 0;
        CHECK(ez_utf8_seq(cases[i].s, cases[i].n, &bad) == 0);
        CHECK_MSG(bad == cases[i].bad, "case %zu: maximal subpart %zu, want %zu\n", i, bad, cases[i].bad);
    }
}

static void test_scan_decode_and_step_back(void) {
    const char *s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80z"; /* a é € 😀 z */
    const uint32_t cps[5] = {'a', 0xE9, 0x20AC, 0x1F600, 'z'};
    const size_t starts[5] = {0, 1, 3, 6, 10}, n = strlen(s);
    size_t i = 0;
    for (int k = 0; k < 5; k++) {
        CHECK(i == starts[k]);
        CHECK(ez_utf8_next(s, &i) == cps[k]);
    }
    CHECK(i == n);
    for (int k = 4; k >= 0; k--) {
        CHECK(ez_utf8_prev(s, i) == starts[k]);
        i = starts[k];
    }
    CHECK(ez_utf8_invalid_at(s, n) == n);
    CHECK(ez_utf8_invalid_at("ab\xC3", 3) == 2);      /* truncated at the end */
    CHECK(ez_utf8_invalid_at("ab\xED\xA0\x80", 5) == 2); /* a surrogate */
    CHECK(ez_utf8_invalid_at("", 0) == 0);
    CHECK(ez_utf8_one("ab", 2) == -1 && ez_utf8_one("", 0) == -1);
}

/* Every scalar value encodes to the bytes the definition decodes back, and
 * ez_utf8_decode returns it with the length; invalid starts leave *cp. */
static void test_encode_decode_round_trip(void) {
    int64_t bad = 0;
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        unsigned char b[4];
        uint32_t got = 0;
        size_t n;
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        n = ez_utf8_encode(cp, b);
        bad += by_definition(b, n) != n || decode_by_definition(b, n) != cp;
        bad += ez_utf8_decode(b, n, &got) != n || got != cp;
    }
    CHECK_MSG(bad == 0, "%lld code points fail the round trip\n", (long long)bad);
    uint32_t cp = 7;
    CHECK(ez_utf8_decode("\xE2\x82", 2, &cp) == 0 && cp == 7);
    CHECK(ez_utf8_decode("\xED\xA0\x80", 3, &cp) == 0 && cp == 7);
    CHECK(ez_utf8_decode("\xC3\xA9z", 3, &cp) == 2 && cp == 0xE9);
}

/* A stream holds back only what more bytes could still complete. */
static void test_complete_holds_an_unfinished_end(void) {
    CHECK(ez_utf8_complete("ab", 2) == 2);
    CHECK(ez_utf8_complete("", 0) == 0);
    CHECK(ez_utf8_complete("a\xE2", 2) == 1);         /* truncated lead at the end */
    CHECK(ez_utf8_complete("a\xE2\x82", 3) == 1);     /* truncated after one continuation */
    CHECK(ez_utf8_complete("a\xF0\x9F\x98", 4) == 1); /* three of four bytes */
    CHECK(ez_utf8_complete("a\xE2\x82\xAC", 4) == 4); /* finished */
    CHECK(ez_utf8_complete("a\xFF", 2) == 2);         /* an invalid lead byte at the end goes out */
    CHECK(ez_utf8_complete("a\x80", 2) == 2);         /* so does a stray continuation */
    CHECK(ez_utf8_complete("a\xC0", 2) == 2);         /* and an overlong lead */
    CHECK(ez_utf8_complete("a\xE0\x80", 3) == 3);     /* no continuation makes E0 80 valid */
    CHECK(ez_utf8_complete("a\xED\xA0", 3) == 3);     /* a surrogate in the making */
    CHECK(ez_utf8_complete("\xE2\x82x\xC3", 4) == 3); /* invalid inside, unfinished at the end */
}

static void expect_repair(const char *s, size_t n, const char *want) {
    char out[64];
    size_t len = ez_utf8_repair(out, s, n);
    CHECK_MSG(len == strlen(want) && memcmp(out, want, len) == 0, "repair of %zu bytes gave %zu bytes\n", n, len);
}

/* Python's b"...".decode("utf-8", "replace").encode(). */
static void test_repair_replaces_maximal_subparts(void) {
    expect_repair("a\xC3\xA9", 3, "a\xC3\xA9");
    expect_repair("a\xE2", 2, "a\xEF\xBF\xBD");                 /* truncated at the end: one U+FFFD */
    expect_repair("a\xF0\x9F\x98", 4, "a\xEF\xBF\xBD");
    expect_repair("a\xFF", 2, "a\xEF\xBF\xBD");                 /* invalid lead at the end */
    expect_repair("\xE2\x82x", 3, "\xEF\xBF\xBDx");             /* one subpart of two bytes */
    expect_repair("\xC0\x80", 2, "\xEF\xBF\xBD\xEF\xBF\xBD");  /* two subparts of one byte */
    expect_repair("\xED\xA0\x80z", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz");
    expect_repair("", 0, "");
}

int main(void) {
    test_every_short_string_agrees_with_the_definition();
    test_maximal_subparts();
    test_scan_decode_and_step_back();
    test_encode_decode_round_trip();
    test_complete_holds_an_unfinished_end();
    test_repair_replaces_maximal_subparts();
    if (g_failed) {
        fprintf(stderr, "test_utf8: FAILED (%d of %d checks)\n", g_failed, g_failed + g_passed);
        return 1;
    }
    printf("test_utf8: ok (%d checks)\n", g_passed);
    return 0;
}
