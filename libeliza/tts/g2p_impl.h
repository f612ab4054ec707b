/* The text side of the G2P, apart from espeak-ng itself, so tests can drive
 * it with a stand-in: phonemizer's punctuation handling and misaki's
 * EspeakG2P rewriting (g2p_text.c), and how text is cut into lines. */
#ifndef EZ_TTS_G2P_IMPL_H
#define EZ_TTS_G2P_IMPL_H

#include "core/common.h"
#include "core/strbuf.h"
#include "tts/g2p.h"

/* Phonemizes one NUL-terminated UTF-8 piece of text as phonemizer's
 * EspeakWrapper.text_to_phonemes does: espeak_TextToPhonemes clause by
 * clause (IPA, U+0361 ties), the non-empty clauses joined by one space,
 * appended to `out`. Returns ELIZA_OK or a negative code (message set). */
typedef int32_t (*ez_g2p_espeak_fn)(void *ctx, const char *text, ez_strbuf *out);

/* One call of misaki's EspeakG2P (0.9.4, version=None) on valid UTF-8
 * `text` without NUL bytes, through phonemizer's EspeakBackend
 * (preserve_punctuation, with_stress, tie '^', remove-flags): appends its
 * phoneme string, possibly empty, to `out`. With `sentences` the space after
 * each sentence end is a '\n' instead (text must then hold no '\n'). */
EZ_INTERNAL int32_t ez_g2p_misaki(const char *text, size_t len, int sentences, ez_g2p_espeak_fn espeak,
                                  void *ctx, ez_strbuf *out);

/* ELIZA_E_INVALID_ARG, naming the offset, when text[0, len) holds a NUL
 * byte or is not valid UTF-8 (overlong forms, surrogates and code points
 * past U+10FFFF included). */
EZ_INTERNAL int32_t ez_g2p_check_text(const char *text, size_t len);

/* ez_g2p_phonemize with espeak-ng supplied by the caller. */
EZ_INTERNAL int32_t ez_g2p_run(const char *text, size_t len, int max_chunk, ez_g2p_espeak_fn espeak,
                               void *ctx, ez_strbuf *out);

/* One line of text (no '\n') -> its phonemes, the space after each
 * sentence end a '\n' (ez_g2p_misaki's contract with `sentences`). */
typedef int32_t (*ez_g2p_line_fn)(void *ctx, const char *text, size_t len, ez_strbuf *out);

/* ez_g2p_run with any G2P for the lines: sentences merged and cut to
 * max_chunk the same way. */
EZ_INTERNAL int32_t ez_g2p_run_lines(const char *text, size_t len, int max_chunk, ez_g2p_line_fn g2p,
                                     void *ctx, ez_strbuf *out);

/* ez_g2p_misaki through g's espeak-ng: the whole text as one misaki call,
 * no lines, sentences or chunks (invalid UTF-8 or a NUL byte:
 * ELIZA_E_INVALID_ARG). */
EZ_INTERNAL int32_t ez_g2p_phonemize_whole(ez_g2p *g, const char *text, size_t len, ez_strbuf *out);

/* The version string of the espeak-ng behind `g` (e.g. "1.52.0"). */
EZ_INTERNAL const char *ez_g2p_espeak_version(const ez_g2p *g);

#endif /* EZ_TTS_G2P_IMPL_H */
