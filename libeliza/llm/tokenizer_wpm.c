/* BERT WordPiece ("bert" vocabularies), as llama.cpp's llm_tokenizer_wpm
 * runs it on the vocabulary its converter writes: a word-initial piece is
 * stored with U+2581 in front ("▁hello"), a continuation without BERT's "##"
 * ("ing"), control tokens as they are.
 *
 *   words   BERT's normalizer and pre-tokenizer in one pass over the code
 *           points: whitespace ends a word; NUL, U+FFFD and control
 *           characters vanish; with strip_accents each code point becomes
 *           the first of its canonical decomposition and marks vanish; with
 *           lowercase the simple lowercase mapping; punctuation, ASCII
 *           symbols and CJK ideographs are words of their own.
 *   pieces  "▁" + word, cut greedily into the longest tokens from the left;
 *           a word with a part no token starts is the unknown token whole. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/utf8.h"
#include "llm/tokenizer_impl.h"
#include "llm/unicode.h"

#define SP "\xE2\x96\x81" /* U+2581, the converter's word-start mark */

/* llama.cpp's list (the Hugging Face one, 0x2B920 where the Unicode block
 * starts at 0x2B820 included). */
static int is_cjk_ideograph(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* The ids of one word w[0..n) ("▁" + its text): the longest token at each
 * position, or the unknown token for the whole word. */
static int32_t word_ids(const ez_tokenizer *tok, const char *w, size_t n, ez_idvec *out) {
    size_t start = out->n, i = 0;
    while (i < n) {
        int32_t lo = 0, hi = tok->n_sorted, best = -1, id;
        size_t d, best_len = 0;
        for (d = 0; i + d < n && lo < hi; d++) {
            id = ez_sorted_step(tok, tok->sorted, &lo, &hi, (uint32_t)d, (uint8_t)w[i + d]);
            if (id >= 0) {
                best = id;
                best_len = d + 1;
            }
        }
        if (best < 0) {
            out->n = start;
            break;
        }
        if (!ez_idvec_push(out, best)) return ELIZA_E_NOMEM;
        i += best_len;
    }
    if (out->n == start && !ez_idvec_push(out, tok->unk)) return ELIZA_E_NOMEM;
    return ELIZA_OK;
}

int32_t ez_wpm_tokenize(const ez_tokenizer *tok, const char *text, size_t len, ez_idvec *out) {
    ez_bytevec word = {NULL, 0, 0};
    size_t i = 0;
    int32_t rc = ELIZA_OK;

    if (!ez_bytevec_put(&word, SP, 3)) goto nomem;
    /* A word is flushed when it ends: before whitespace, before and after a
     * one-character word, and at the end of the text. */
    while (i <= len) {
        uint32_t cp = 0;
        size_t n = 0;
        uint8_t code, cat, enc[4];
        int alone;
        if (i < len) {
            n = ez_utf8_decode((const uint8_t *)text + i, len - i, &cp);
            if (n == 0) { /* not reached: the text was validated */
                n = 1;
                cp = 0xFFFD;
            }
            if (tok->strip_accents) cp = ez_unicode_nfd_first(cp);
        }
        if (i == len || (ez_unicode_code(cp) & EZ_UWHITESPACE)) {
            if (word.len > 3 && (rc = word_ids(tok, word.buf, word.len, out)) != ELIZA_OK) break;
            word.len = 3;
            if (i == len) break;
            i += n;
            continue;
        }
        i += n;
        code = ez_unicode_code(cp);
        cat = code & EZ_UCAT_MASK;
        if (cp == 0 || cp == 0xFFFD || cat == EZ_UCAT_CONTROL) continue;
        if (tok->strip_accents && cat == EZ_UCAT_MARK) continue;
        alone = cat == EZ_UCAT_PUNCT || (cp < 0x7F && cat == EZ_UCAT_SYMBOL) ||
                is_cjk_ideograph(cp);
        if (tok->lowercase) cp = ez_unicode_tolower(cp);
        if (alone && word.len > 3) {
            if ((rc = word_ids(tok, word.buf, word.len, out)) != ELIZA_OK) break;
            word.len = 3;
        }
        if (!ez_bytevec_put(&word, enc, ez_utf8_encode(cp, enc))) goto nomem;
        if (alone) {
            if ((rc = word_ids(tok, word.buf, word.len, out)) != ELIZA_OK) break;
            word.len = 3;
        }
    }
    free(word.buf);
    if (rc == ELIZA_E_NOMEM) return ez_fail(ELIZA_E_NOMEM, "out of memory tokenizing %zu bytes", len);
    return rc;
nomem:
    free(word.buf);
    return ez_fail(ELIZA_E_NOMEM, "out of memory tokenizing %zu bytes", len);
}
