/* UTF-8, strict (RFC 3629): overlong forms, surrogates and code points past
 * U+10FFFF are invalid. The one validator and decoder every engine uses. */
#ifndef EZ_UTF8_H
#define EZ_UTF8_H

#include "common.h"

/* Length (1..4) of the valid sequence at s[0..n) (n >= 1), or 0 when the
 * bytes there do not start one; then *bad (when not NULL) gets the length
 * of the maximal invalid subpart (1..3): Unicode's "substitution of maximal
 * subparts", which Python's errors="replace" follows. */
EZ_INTERNAL size_t ez_utf8_seq(const void *s, size_t n, size_t *bad);

/* Offset of the first byte of s[0..n) that is not part of valid UTF-8, or n. */
EZ_INTERNAL size_t ez_utf8_invalid_at(const void *s, size_t n);

/* The code point at s + *i of valid UTF-8; *i steps over it. */
EZ_INTERNAL uint32_t ez_utf8_next(const char *s, size_t *i);

/* The start of the code point of valid UTF-8 that ends at byte end (> 0). */
EZ_INTERNAL size_t ez_utf8_prev(const char *s, size_t end);

/* The code point that s[0..n) holds exactly (one valid sequence of n bytes), or -1. */
EZ_INTERNAL int64_t ez_utf8_one(const void *s, size_t n);

/* Length (1..4) of the valid sequence at s[0..n) (n >= 1) with its code
 * point in *cp, or 0 (*cp untouched): the decoder for text not yet checked. */
EZ_INTERNAL size_t ez_utf8_decode(const void *s, size_t n, uint32_t *cp);

/* Writes cp (<= U+10FFFF, not a surrogate) as UTF-8 to out (4 bytes of
 * room); returns its length. */
EZ_INTERNAL size_t ez_utf8_encode(uint32_t cp, void *out);

/* For text that arrives in pieces (a token stream): the length of s[0..n)
 * less an unfinished character at its end, the bytes that more text could
 * still complete into a valid sequence. An invalid byte is never held. */
EZ_INTERNAL size_t ez_utf8_complete(const void *s, size_t n);

/* Copies s[0..n) to out as valid UTF-8, each maximal invalid subpart (a
 * truncated sequence at the end included) replaced by one U+FFFD, as
 * Python's errors="replace" does. out needs 3 n bytes; returns the length
 * written (no terminator). */
EZ_INTERNAL size_t ez_utf8_repair(void *out, const void *s, size_t n);

#endif /* EZ_UTF8_H */
