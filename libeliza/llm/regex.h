/* The regular expressions of llama.cpp's pre-tokenizers, matched as its
 * unicode_regex_split() matches them: with C++ std::regex (ECMAScript
 * grammar, leftmost match, first alternative that succeeds) over a "view" of
 * the text in which
 *   - a pattern that names a Unicode category (\p{L}, \p{N}, \p{P}, \p{M},
 *     \p{S}, \p{Lu}, ...) sees every code point below 128 as itself and every
 *     other one as one byte standing for its category: 0x0B for White_Space,
 *     0xD1 number, 0xD2 letter, 0xD3 punctuation, 0xD4 mark, 0xD5 symbol,
 *     0xD0 anything else; the pattern's \p{X} becomes that byte plus the
 *     ASCII members of X (so \p{Lu} is any letter, as in llama.cpp);
 *   - any other pattern sees code points, White_Space above U+007F as 0x0B.
 * Supported syntax: | ( ) (?: ) (?= ) (?! ) * + ? {n} {n,} {n,m} and their
 * lazy forms, . ^ $ \b \B, classes with ranges and negation, \s \S \d \D
 * \w \W \r \n \t \v \f \xHH \uHHHH and escaped punctuation. */
#ifndef EZ_LLM_REGEX_H
#define EZ_LLM_REGEX_H

#include "core/common.h"

typedef struct ez_regex ez_regex;

/* Compiles a UTF-8 pattern. ELIZA_E_INVALID_ARG naming the offset for a
 * pattern outside the supported syntax; *out is freed with ez_regex_free. */
EZ_INTERNAL int32_t ez_regex_compile(const char *pattern, ez_regex **out);
EZ_INTERNAL void ez_regex_free(ez_regex *re);

/* The value the pattern sees for code point cp (see above). */
EZ_INTERNAL uint32_t ez_regex_view(const ez_regex *re, uint32_t cp);

/* Cuts every chunk of a text into words the way llama.cpp's
 * unicode_regex_split_stl does: each match and each gap between matches
 * becomes a word. view: the text as ez_regex_view gives it; lens[0..*n)
 * chunk lengths in code points on entry, replaced by the word lengths (a
 * malloc'd array; zero-length words dropped). ELIZA_E_NOMEM, or
 * ELIZA_E_UNSUPPORTED when a match needs more backtracking depth than the
 * matcher allows. */
EZ_INTERNAL int32_t ez_regex_split(const ez_regex *re, const uint32_t *view, size_t **lens,
                                   size_t *n);

#endif /* EZ_LLM_REGEX_H */
