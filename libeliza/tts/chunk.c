/* How a text becomes the chunks a stream speaks: text pieces for the G2P,
 * phoneme lines cut to what one forward takes, the stream's early first
 * cut, and the vocabulary ids of a chunk. */
#include "tts/chunk.h"

#include <inttypes.h>
#include <string.h>

#include "core/error.h"
#include "core/utf8.h"

/* Text handed to the G2P at a time: a line, or a sentence-aligned part of a
 * longer one, so the first chunk's audio does not wait for the whole text. */
#define TEXT_PIECE_MAX 2000
/* The stream's first chunk, when its phoneme line is longer than
 * FIRST_CUT_MIN_LINE code points, ends at the line's first clause boundary
 * (a comma, colon, semicolon or dash followed by a space) that leaves at
 * least FIRST_CUT_MIN code points before it and FIRST_CUT_MIN_REST after:
 * first audio after a clause, not a sentence. Later chunks stay whole lines. */
#define FIRST_CUT_MIN_LINE 40
#define FIRST_CUT_MIN 8
#define FIRST_CUT_MIN_REST 12

/* Kokoro's punctuation and space: symbols with nothing to say on their own. */
static int is_punctuation(uint32_t cp) {
    static const uint32_t marks[] = {' ',    '\t',   ';',    ':',    ',',    '.',    '!',    '?',    '"',
                                     '(',    ')',    '\'',   '-',    0x00A1, 0x00BF, 0x00AB, 0x00BB, 0x2014,
                                     0x2013, 0x2026, 0x201C, 0x201D, 0x2018, 0x2019, '\r'};
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
        if (marks[i] == cp) return 1;
    return 0;
}

int ez_tts_next_text_piece(const char *text, size_t n, size_t *pos, size_t *begin, size_t *end) {
    size_t i = *pos, stop, cut = 0, space = 0;
    while (i < n && (text[i] == '\n' || text[i] == '\r')) i++;
    if (i == n) {
        *pos = n;
        return 0;
    }
    stop = i;
    while (stop < n && text[stop] != '\n' && stop - i < TEXT_PIECE_MAX) stop++;
    if (stop < n && text[stop] != '\n') {
        for (size_t j = i + 1; j < stop; j++) {
            if (text[j] != ' ') continue;
            space = j;
            if (text[j - 1] == '.' || text[j - 1] == '!' || text[j - 1] == '?') cut = j;
        }
        if (!cut) cut = space;
        if (cut) {
            stop = cut;
        } else {
            while (stop > i && ((unsigned char)text[stop] & 0xC0) == 0x80) stop--; /* keep characters whole */
        }
    }
    *pos = stop;
    while (stop > i && text[stop - 1] == '\r') stop--;
    *begin = i;
    *end = stop;
    return 1;
}

int ez_tts_is_blank(const char *text, size_t b, size_t e) {
    for (size_t i = b; i < e; i++)
        if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r') return 0;
    return 1;
}

int ez_tts_next_phoneme_chunk(const char *lines, size_t n, int max_cp, size_t *pos, size_t *begin, size_t *end,
                              int *n_cp) {
    size_t i = *pos, j, last_space = 0;
    int cp = 0, cp_at_space = 0;
    while (i < n && (lines[i] == ' ' || lines[i] == '\n' || lines[i] == '\r' || lines[i] == '\t')) i++;
    if (i == n) {
        *pos = n;
        return 0;
    }
    j = i;
    while (j < n && lines[j] != '\n' && lines[j] != '\r') {
        if (cp == max_cp) {
            if (last_space) {
                j = last_space;
                cp = cp_at_space;
            }
            break;
        }
        if (lines[j] == ' ' || lines[j] == '\t') {
            last_space = j;
            cp_at_space = cp;
        }
        ez_utf8_next(lines, &j);
        cp++;
    }
    *pos = j;
    while (j > i && (lines[j - 1] == ' ' || lines[j - 1] == '\t')) {
        j--;
        cp--;
    }
    *begin = i;
    *end = j;
    *n_cp = cp;
    return 1;
}

int ez_tts_phoneme_ids(const ez_kokoro *m, const char *ph, size_t n, int32_t *ids, int *speaks) {
    const int max_ids = ez_kokoro_max_phonemes(m);
    int n_ids = 0;
    *speaks = 0;
    for (size_t i = 0; i < n;) {
        size_t next = i;
        uint32_t cp = ez_utf8_next(ph, &next);
        int len = (int)(next - i), id = ez_kokoro_symbol_id(m, ph + i, len);
        if (id < 0) {
            ez_log(ELIZA_LOG_DEBUG, "tts: dropped phoneme U+%04" PRIX32 " ('%.*s'): not in the model's vocabulary",
                   cp, len, ph + i);
        } else if (n_ids < max_ids) {
            ids[n_ids++] = id;
            if (!is_punctuation(cp)) *speaks = 1;
        }
        i = next;
    }
    return n_ids;
}

static int is_clause_mark(uint32_t cp) { return cp == ',' || cp == ':' || cp == ';' || cp == 0x2014 || cp == 0x2013; }

size_t ez_tts_first_clause_cut(const char *ph, size_t b, size_t e, int n_cp, int *cut_cp) {
    int cp = 0;
    if (n_cp < FIRST_CUT_MIN_LINE) return 0;
    for (size_t i = b; i < e;) {
        uint32_t c = ez_utf8_next(ph, &i);
        cp++;
        if (i < e && ph[i] == ' ' && cp >= FIRST_CUT_MIN && n_cp - cp >= FIRST_CUT_MIN_REST && is_clause_mark(c)) {
            *cut_cp = cp;
            return i;
        }
    }
    return 0;
}

static int is_blank_byte(char c) { return c == ' ' || c == '\t' || c == '\r'; }

size_t ez_tts_join_sentences(char *lines, size_t n, int max_cp) {
    size_t r = 0, w = 0;
    int cur_cp = 0;
    /* Each separator written replaces at least the '\n' read before the
     * line, so the write position never passes the read position. */
    while (r < n) {
        size_t b = r, e;
        int cp = 0;
        while (r < n && lines[r] != '\n') r++;
        e = r;
        if (r < n) r++;
        while (b < e && is_blank_byte(lines[b])) b++;
        while (e > b && is_blank_byte(lines[e - 1])) e--;
        if (b == e) continue;
        for (size_t i = b; i < e; i++) cp += ((unsigned char)lines[i] & 0xC0) != 0x80;
        if (w > 0) {
            int join = cur_cp + 1 + cp <= max_cp;
            lines[w++] = join ? ' ' : '\n';
            cur_cp = join ? cur_cp + 1 : 0;
        }
        memmove(lines + w, lines + b, e - b);
        w += e - b;
        cur_cp += cp;
    }
    if (w < n) lines[w] = '\0';
    return w;
}
