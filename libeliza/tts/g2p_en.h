/* The official English G2P of Kokoro: a C port of misaki 0.9.4's en.G2P
 * (what KPipeline(lang_code='a'/'b') runs), its gold and silver lexicons
 * read from a GGUF file written by `eliza.convert lexicon`, espeak-ng only
 * for the words they lack (misaki's EspeakFallback). misaki tags words
 * with spaCy; here a small rule set stands in (g2p_en.c says which rules,
 * docs/kokoro.md what differs). */
#ifndef EZ_TTS_G2P_EN_H
#define EZ_TTS_G2P_EN_H

#include "core/common.h"
#include "core/strbuf.h"
#include "tts/g2p.h"
#include "tts/g2p_impl.h"

typedef struct ez_g2p_en ez_g2p_en;

/* Opens the lexicon file `path` (schema misaki-en, docs/kokoro.md) for
 * American (british = 0) or British English. Every table is checked: sorted
 * keys, records inside the file, phonemes of misaki's vocabulary only.
 * ELIZA_E_IO / ELIZA_E_FORMAT / ELIZA_E_NOMEM with a message. */
EZ_INTERNAL int32_t ez_g2p_en_open(const char *path, int british, ez_g2p_en **out);
EZ_INTERNAL void ez_g2p_en_close(ez_g2p_en *en);

/* misaki's G2P(text) on one line of valid UTF-8 `text` (no '\n'): appends
 * its phoneme string to `out`. With `sentences`, the space after each
 * sentence-ending mark (. ! ? …) becomes '\n'. `espeak` phonemizes the
 * words the lexicons lack (in the G2P's own accent). */
EZ_INTERNAL int32_t ez_g2p_en_line(const ez_g2p_en *en, const char *text, size_t len, int sentences,
                                   ez_g2p_espeak_fn espeak, void *ctx, ez_strbuf *out);

/* The file name of the lexicons beside a Kokoro model (`make models` and
 * eliza.models write it there). */
#define EZ_G2P_EN_LEXICON_FILE "misaki-en.gguf"

/* Gives g (an espeak-ng G2P of `language`) misaki's English G2P when the
 * language is American or British English ("en-us", "en-gb", "en"): with
 * the lexicons of $ELIZA_EN_LEXICON, else of EZ_G2P_EN_LEXICON_FILE in the
 * directory of `model_path`. Without either file, g stays espeak-only and
 * a warning is logged. Errors: a lexicon file that does not load. */
EZ_INTERNAL int32_t ez_g2p_en_attach(ez_g2p *g, const char *language, const char *model_path);

/* The words num2words 0.5 spells for a number, separated by single spaces,
 * without the "and"s and punctuation misaki drops: `kind` 'c' cardinal,
 * 'o' ordinal, 'y' year (to='year') of the decimal digits `digits`; 'f'
 * num2words(float(digits)) for "I.F" (I may be empty). 0 when the number is
 * out of range (more than 18 integer digits) or out is too small. */
EZ_INTERNAL int ez_g2p_en_number_words(int kind, const char *digits, char *out, size_t cap);

#endif /* EZ_TTS_G2P_EN_H */
