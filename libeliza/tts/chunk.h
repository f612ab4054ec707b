/* Chunking (tts/chunk.c): what the stream hands the G2P and the model at a time. */
#ifndef EZ_TTS_CHUNK_H
#define EZ_TTS_CHUNK_H

#include "core/common.h"
#include "tts/kokoro.h"

/* The next piece of text at text[*pos..n) for the G2P: up to the next line
 * break, cut at a sentence end (or a space) when longer than 2000 bytes
 * (tts/chunk.c's TEXT_PIECE_MAX). Sets [*begin, *end) and moves *pos past it; 0 when no text is left. */
EZ_INTERNAL int ez_tts_next_text_piece(const char *text, size_t n, size_t *pos, size_t *begin, size_t *end);

/* Is text[b..e) nothing but spaces? */
EZ_INTERNAL int ez_tts_is_blank(const char *text, size_t b, size_t e);

/* The next chunk of phoneme lines at lines[*pos..n): one line, or its first
 * max_cp code points (the model's ez_kokoro_max_phonemes) cut back to a
 * space. [*begin, *end) has no spaces at its ends; *n_cp is its length in
 * code points. 0 when nothing is left. */
EZ_INTERNAL int ez_tts_next_phoneme_chunk(const char *lines, size_t n, int max_cp, size_t *pos, size_t *begin,
                                          size_t *end, int *n_cp);

/* The vocabulary ids of phonemes[0..n); symbols outside it are dropped as
 * KModel.forward drops them. Returns how many ids, and through *speaks
 * whether any is more than punctuation. */
EZ_INTERNAL int ez_tts_phoneme_ids(const ez_kokoro *m, const char *ph, size_t n, int32_t *ids, int *speaks);

/* Where the stream's first chunk ends early: the first clause boundary (a
 * comma, colon, semicolon or dash followed by a space) of a line ph[b, e)
 * of n_cp >= 40 code points that leaves at least 8 before it and 12 after
 * (tts/chunk.c's FIRST_CUT_*): the byte offset just past its mark, or 0 for
 * none; *cut_cp is the code points before it. */
EZ_INTERNAL size_t ez_tts_first_clause_cut(const char *ph, size_t b, size_t e, int n_cp, int *cut_cp);

/* KPipeline's chunks of a text line (its en_tokenize): the G2P's sentence
 * lines of lines[0, n) joined by one space, in place, as long as a joined
 * line stays within max_cp code points (the model's ez_kokoro_max_phonemes);
 * spaces at the lines' ends and empty lines go. Returns the new length
 * (lines[len] = '\0' when it shrank). */
EZ_INTERNAL size_t ez_tts_join_sentences(char *lines, size_t n, int max_cp);

#endif /* EZ_TTS_CHUNK_H */
