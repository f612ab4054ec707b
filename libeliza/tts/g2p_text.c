/* Text -> Kokoro phonemes around espeak-ng, exactly as misaki 0.9.4's
 * EspeakG2P (version=None) drives phonemizer-fork 3.3's EspeakBackend:
 *
 *   misaki      « » -> “ ”, then ( ) -> « » so parentheses count as
 *               punctuation; afterwards « » -> ( ) again.
 *   phonemizer  cuts the text at every run of punctuation marks
 *               ;:,.!?¡¿—…"«»“”(){}[] with the whitespace around it,
 *               phonemizes each piece alone (espeak never sees those marks)
 *               and puts the runs back verbatim between the pieces.
 *   misaki      rewrites the IPA: ties a^ɪ -> I, o^ʊ -> O, t^ʃ -> ʧ, ...
 *               (table sorted by key, applied in that order), then deletes
 *               the remaining ties and every '-'.
 *
 * Sentences: misaki runs once per line of text, and the whitespace that
 * follows a sentence-ending run (.!?… then closing marks) becomes a line
 * break in its output, unless restore() deletes it (it eats the space before
 * a mark when the piece in between phonemized to nothing); a sentence that
 * is only punctuation joins its neighbour. So the lines we emit for a line
 * of text, joined by single spaces, are misaki's string for it, but for
 * runs of whitespace at a cut, which become one space, and for a line of
 * nothing but punctuation, which gives no line (misaki gives the marks).
 * Sentences longer than max_chunk code points are cut at spaces.
 *
 * The string helpers mirror Python's: str.strip and re's \s use the same
 * Unicode whitespace set; str.replace scans left to right without overlap. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/utf8.h"
#include "tts/g2p_impl.h"

typedef struct {
    size_t start, end; /* byte offsets, [start, end) */
} span;

/* ---- UTF-8 and Python's character classes ---------------------------------- */

/* str.isspace() (and re's \s on str patterns). */
static int py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* phonemizer's default punctuation marks: ;:,.!?¡¿—…"«»“”(){}[] */
static int py_mark(uint32_t c) {
    switch (c) {
    case ';': case ':': case ',': case '.': case '!': case '?': case '"':
    case '(': case ')': case '{': case '}': case '[': case ']':
    case 0xA1: case 0xBF: case 0xAB: case 0xBB:
    case 0x2014: case 0x2026: case 0x201C: case 0x201D:
        return 1;
    default:
        return 0;
    }
}

/* Marks that end a sentence. */
static int sentence_end(uint32_t c) { return c == '.' || c == '!' || c == '?' || c == 0x2026; }

/* str.strip(): the span of s[start, end) without whitespace at either end. */
static span py_strip(const char *s, size_t start, size_t end) {
    span r;
    size_t i = start;
    while (i < end) {
        size_t j = i;
        if (!py_space(ez_utf8_next(s, &j))) break;
        i = j;
    }
    r.start = i;
    while (end > r.start) {
        size_t j = ez_utf8_prev(s, end), k = j;
        if (!py_space(ez_utf8_next(s, &k))) break;
        end = j;
    }
    r.end = end;
    return r;
}

/* ---- string passes --------------------------------------------------------- */

static void sb_clear(ez_strbuf *sb) {
    sb->len = 0;
    if (sb->data) sb->data[0] = '\0';
}

/* dst = s[0, n) with every `from` replaced by `to`, as str.replace. */
static void replace_all(ez_strbuf *dst, const char *s, size_t n, const char *from, const char *to) {
    size_t flen = strlen(from), tlen = strlen(to), i = 0, run = 0;
    sb_clear(dst);
    while (i < n) {
        if (s[i] == from[0] && n - i >= flen && memcmp(s + i, from, flen) == 0) {
            ez_sb_append(dst, s + run, i - run);
            ez_sb_append(dst, to, tlen);
            i += flen;
            run = i;
        } else {
            i++;
        }
    }
    ez_sb_append(dst, s + run, n - run);
}

/* Applies `from` -> `to` to *a in place (b is scratch). */
static void replace_in(ez_strbuf *a, ez_strbuf *b, const char *from, const char *to) {
    ez_strbuf t;
    if (a->len == 0) return;
    replace_all(b, a->data, a->len, from, to);
    t = *a;
    *a = *b;
    *b = t;
}

/* The runs of punctuation that phonemizer's regex (\s*[marks]+\s*)+ finds:
 * maximal runs of whitespace and marks that hold at least one mark. */
static int find_runs(const char *s, size_t start, size_t end, span **runs, size_t *n) {
    size_t i = start, cap = 0;
    *runs = NULL;
    *n = 0;
    while (i < end) {
        size_t run_start = i, j = i;
        int has_mark = 0;
        uint32_t c = ez_utf8_next(s, &j);
        if (!py_space(c) && !py_mark(c)) {
            i = j;
            continue;
        }
        while (i < end) {
            j = i;
            c = ez_utf8_next(s, &j);
            if (py_mark(c)) has_mark = 1;
            else if (!py_space(c)) break;
            i = j;
        }
        if (!has_mark) continue;
        if (*n == cap) {
            span *p;
            cap = cap ? 2 * cap : 16;
            p = (span *)realloc(*runs, cap * sizeof *p);
            if (!p) return 0;
            *runs = p;
        }
        (*runs)[*n].start = run_start;
        (*runs)[*n].end = i;
        (*n)++;
    }
    return 1;
}

/* ---- phonemizer ---------------------------------------------------------- */

/* EspeakBackend._postprocess_line on espeak's output `raw`, then each word
 * with the U+0361 tie turned into '^' and followed by one space. */
static void postprocess_line(const ez_strbuf *raw, ez_strbuf *a, ez_strbuf *b, ez_strbuf *out) {
    span st;
    size_t i, w;

    sb_clear(out);
    if (raw->len == 0) return;
    st = py_strip(raw->data, 0, raw->len);
    replace_all(a, raw->data + st.start, st.end - st.start, "\n", " ");
    replace_in(a, b, "  ", " ");
    /* re.sub('_+', '_') */
    sb_clear(b);
    for (i = 0; i < a->len; i++)
        if (a->data[i] != '_' || i == 0 || a->data[i - 1] != '_') ez_sb_append(b, a->data + i, 1);
    replace_all(a, b->data, b->len, "_ ", " ");
    /* remove-flags: re.sub(r'\(.+?\)', '') drops espeak's "(fr)" switches */
    sb_clear(b);
    for (i = 0; i < a->len;) {
        if (a->data[i] == '(') {
            const char *close =
                i + 2 <= a->len ? (const char *)memchr(a->data + i + 2, ')', a->len - i - 2) : NULL;
            if (close) {
                i = (size_t)(close - a->data) + 1;
                continue;
            }
        }
        ez_sb_append(b, a->data + i, 1);
        i++;
    }
    if (b->len == 0) return;
    /* line.split(' '): word.strip(), tie -> '^', word + ' ' */
    for (w = 0; w <= b->len;) {
        const char *sp = (const char *)memchr(b->data + w, ' ', b->len - w);
        size_t e = sp ? (size_t)(sp - b->data) : b->len;
        span ws = py_strip(b->data, w, e);
        size_t k = ws.start, run = ws.start;
        while (k < ws.end) {
            if (k + 1 < ws.end && memcmp(b->data + k, "\xcd\xa1", 2) == 0) { /* U+0361 */
                ez_sb_append(out, b->data + run, k - run);
                ez_sb_append(out, "^", 1);
                k += 2;
                run = k;
            } else {
                k++;
            }
        }
        ez_sb_append(out, b->data + run, ws.end - run);
        ez_sb_append(out, " ", 1);
        w = e + 1;
    }
}

/* espeak on one piece of text, post-processed into `out`. */
static int32_t phonemize_piece(const char *s, span p, ez_g2p_espeak_fn espeak, void *ctx,
                               ez_strbuf *seg, ez_strbuf *raw, ez_strbuf *a, ez_strbuf *b,
                               ez_strbuf *out) {
    int32_t rc;
    sb_clear(seg);
    sb_clear(raw);
    ez_sb_append(seg, s + p.start, p.end - p.start);
    if (seg->failed)
        return ez_fail(ELIZA_E_NOMEM, "out of memory copying %zu bytes of text", p.end - p.start);
    rc = espeak(ctx, seg->data, raw);
    if (rc < 0) return rc;
    postprocess_line(raw, a, b, out);
    return ELIZA_OK;
}

/* Drops one trailing space, as restore() does before each mark; a sentence
 * cut that sat on that space goes with it. */
static void drop_trailing_space(ez_strbuf *sb, span *cuts, size_t *ncuts) {
    if (sb->len == 0 || sb->data[sb->len - 1] != ' ') return;
    sb->data[--sb->len] = '\0';
    if (*ncuts > 0 && cuts[*ncuts - 1].start == sb->len) (*ncuts)--;
}

/* Words before a '.' that do not end a sentence: the audio would otherwise
 * break after "Dr." (the phonemes are the same either way). */
static int abbreviation(const char *w, size_t n) {
    static const char *const k_abbr[] = {"Mr", "Mrs", "Ms", "Dr", "Prof", "St", "Sr", "Jr", "Mt", "vs"};
    size_t i;
    if (n == 1) return 1; /* an initial */
    if (memchr(w, '.', n)) return 1; /* U.S, e.g, p.m */
    for (i = 0; i < sizeof k_abbr / sizeof k_abbr[0]; i++)
        if (strlen(k_abbr[i]) == n && memcmp(k_abbr[i], w, n) == 0) return 1;
    return 0;
}

/* Where the run r ends a sentence: the byte offset of the whitespace that
 * follows its last sentence-ending mark, or 0 when it does not end one.
 * The word before it starts at or after `lo` (the previous run's end). */
static size_t sentence_cut(const char *s, size_t sent_start, size_t lo, size_t line_end, span r) {
    size_t i = r.start, last_end = 0, cut = 0, w;
    uint32_t last = 0;
    if (r.start == sent_start || r.end >= line_end) return 0;
    while (i < r.end) {
        size_t j = i;
        uint32_t c = ez_utf8_next(s, &j);
        if (sentence_end(c)) {
            last_end = j;
            last = c;
            cut = 0;
        } else if (last_end && !cut && py_space(c)) {
            cut = i;
        }
        i = j;
    }
    if (!cut) return 0;
    if (s[r.end] >= 'a' && s[r.end] <= 'z') return 0;
    if (last == '.' && cut == r.start + 1) {
        w = r.start;
        lo = EZ_MAX(lo, sent_start);
        while (w > lo && !((unsigned char)s[w - 1] < 0x80 && py_space((unsigned char)s[w - 1]))) w--;
        if (abbreviation(s + w, r.start - w)) return 0;
    }
    return cut;
}

/* misaki's table, sorted by key as misaki sorts it, then its clean-ups. */
static const char *const k_misaki_map[][2] = {
    {"a^\xc9\xaa", "I"},              /* a^ɪ */
    {"a^\xca\x8a", "W"},              /* a^ʊ */
    {"d^z", "\xca\xa3"},              /* ʣ */
    {"d^\xca\x92", "\xca\xa4"},       /* d^ʒ -> ʤ */
    {"e^\xc9\xaa", "A"},              /* e^ɪ */
    {"o^\xca\x8a", "O"},              /* o^ʊ */
    {"s^s", "S"},
    {"t^s", "\xca\xa6"},              /* ʦ */
    {"t^\xca\x83", "\xca\xa7"},       /* t^ʃ -> ʧ */
    {"\xc9\x94^\xc9\xaa", "Y"},       /* ɔ^ɪ */
    {"\xc9\x99^\xca\x8a", "Q"},       /* ə^ʊ */
    {"^", ""},
    {"-", ""},
    {"\xc2\xab", "("},                /* « */
    {"\xc2\xbb", ")"},                /* » */
};

/* misaki's bracket rewrite into *t: « » -> “ ”, then ( ) -> « ». 0 when out of memory. */
static int quote_brackets(const char *text, size_t len, ez_strbuf *t) {
    ez_strbuf a = {0}, b = {0};
    replace_all(&a, text, len, "\xc2\xab", "\xe2\x80\x9c");
    replace_in(&a, &b, "\xc2\xbb", "\xe2\x80\x9d");
    replace_in(&a, &b, "(", "\xc2\xab");
    replace_in(&a, &b, ")", "\xc2\xbb");
    ez_sb_free(&b);
    *t = a;
    return !t->failed;
}

/* phonemizer's Punctuation.restore with every mark on line 0: the text
 * between marks phonemized piece by piece, the marks put back around them,
 * into *cur; with `sentences`, the sentence ends as spans of *cur in *cuts
 * (malloc'ed, *ncuts of them), to become line breaks. */
static int32_t phonemize_marks(const ez_strbuf *t, int sentences, ez_g2p_espeak_fn espeak, void *ctx,
                               ez_strbuf *cur, span **cuts_out, size_t *ncuts_out) {
    ez_strbuf ph = {0}, seg = {0}, raw = {0}, a = {0}, b = {0};
    span *runs = NULL, *pieces = NULL, *cuts = NULL;
    size_t *cut_at = NULL; /* per run: where it ends a sentence in t, or 0 */
    size_t nruns = 0, npieces = 0, ncuts = 0, i, k, prev, sent;
    int32_t rc = ELIZA_OK;

    if (!find_runs(t->data, 0, t->len, &runs, &nruns)) goto nomem;
    if (nruns == 1 && runs[0].start == 0 && runs[0].end == t->len) {
        /* only punctuation: phonemizer gives the marks back as they are */
        ez_sb_append(cur, t->data, t->len);
        goto done;
    }
    pieces = (span *)malloc((nruns + 1) * sizeof *pieces);
    cut_at = (size_t *)calloc(nruns + 1, sizeof *cut_at);
    cuts = (span *)malloc((nruns + 1) * sizeof *cuts);
    if (!pieces || !cut_at || !cuts) goto nomem;
    for (i = 0, prev = 0; i <= nruns; i++) {
        size_t end = i < nruns ? runs[i].start : t->len;
        if (end > prev) pieces[npieces++] = (span){prev, end};
        if (i < nruns) prev = runs[i].end;
    }
    for (i = 0, sent = py_strip(t->data, 0, t->len).start; sentences && i < nruns; i++) {
        cut_at[i] = sentence_cut(t->data, sent, i ? runs[i - 1].end : 0, t->len, runs[i]);
        if (cut_at[i]) sent = py_strip(t->data, cut_at[i], t->len).start;
    }

    rc = phonemize_piece(t->data, pieces[0], espeak, ctx, &seg, &raw, &a, &b, cur);
    if (rc < 0) goto done;
    for (i = 0, k = 1; i < nruns; i++) {
        const char *mark = t->data + runs[i].start;
        size_t mlen = runs[i].end - runs[i].start;
        drop_trailing_space(cur, cuts, &ncuts);
        if (i == 0 && runs[i].start == 0) { /* 'B': the mark opens the line */
            sb_clear(&ph);
            ez_sb_append(&ph, mark, mlen);
            ez_sb_append(&ph, cur->data, cur->len);
            sb_clear(cur);
            ez_sb_append(cur, ph.data, ph.len);
        } else if (i == nruns - 1 && runs[i].end == t->len) { /* 'E': it closes it */
            ez_sb_append(cur, mark, mlen);
            break;
        } else { /* 'I': between two pieces */
            if (cut_at[i]) {
                size_t at = cut_at[i], w = at;
                ez_utf8_next(t->data, &w);
                cuts[ncuts++] = (span){cur->len + (at - runs[i].start), cur->len + (w - runs[i].start)};
            }
            ez_sb_append(cur, mark, mlen);
            if (k < npieces) {
                rc = phonemize_piece(t->data, pieces[k++], espeak, ctx, &seg, &raw, &a, &b, &ph);
                if (rc < 0) goto done;
                ez_sb_append(cur, ph.data, ph.len);
            }
        }
    }
    goto done;
nomem:
    rc = ez_fail(ELIZA_E_NOMEM, "out of memory phonemizing %zu bytes of text", t->len);
done:
    free(runs);
    free(pieces);
    free(cut_at);
    ez_sb_free(&ph);
    ez_sb_free(&seg);
    ez_sb_free(&raw);
    ez_sb_free(&a);
    ez_sb_free(&b);
    if (rc < 0) {
        free(cuts);
        cuts = NULL;
        ncuts = 0;
    }
    *cuts_out = cuts;
    *ncuts_out = ncuts;
    return rc;
}

/* cur with its cuts as line breaks, stripped, through misaki's symbol map,
 * appended to out. 0 when out of memory. */
static int finish_line(const ez_strbuf *cur, const span *cuts, size_t ncuts, ez_strbuf *out) {
    ez_strbuf a = {0}, b = {0};
    size_t i, prev;
    span st;
    int ok;
    for (i = 0, prev = 0; i < ncuts; i++) {
        ez_sb_append(&a, cur->data + prev, cuts[i].start - prev);
        ez_sb_append(&a, "\n", 1);
        prev = cuts[i].end;
    }
    ez_sb_append(&a, cur->data + prev, cur->len - prev);
    if (!a.failed) {
        st = py_strip(a.data, 0, a.len);
        ez_sb_append(&b, a.data + st.start, st.end - st.start);
        for (i = 0; i < sizeof k_misaki_map / sizeof k_misaki_map[0]; i++)
            replace_in(&b, &a, k_misaki_map[i][0], k_misaki_map[i][1]);
        if (!a.failed && !b.failed) ez_sb_append(out, b.data, b.len);
    }
    ok = !a.failed && !b.failed && !out->failed;
    ez_sb_free(&a);
    ez_sb_free(&b);
    return ok;
}

int32_t ez_g2p_misaki(const char *text, size_t len, int sentences, ez_g2p_espeak_fn espeak, void *ctx,
                      ez_strbuf *out) {
    ez_strbuf t = {0}, cur = {0};
    span *cuts = NULL;
    size_t ncuts = 0;
    int32_t rc = ELIZA_OK;

    if (len == 0) return ELIZA_OK; /* phonemizer returns no line at all: misaki gives '' */
    if (!quote_brackets(text, len, &t)) {
        rc = ez_fail(ELIZA_E_NOMEM, "out of memory phonemizing %zu bytes of text", len);
    } else if ((rc = phonemize_marks(&t, sentences, espeak, ctx, &cur, &cuts, &ncuts)) >= 0) {
        if (cur.failed || (cur.len > 0 && !finish_line(&cur, cuts, ncuts, out)))
            rc = ez_fail(ELIZA_E_NOMEM, "out of memory phonemizing %zu bytes of text", len);
    }
    free(cuts);
    ez_sb_free(&t);
    ez_sb_free(&cur);
    return rc;
}

int32_t ez_g2p_check_text(const char *text, size_t len) {
    const char *nul = len ? (const char *)memchr(text, '\0', len) : NULL;
    size_t bad;
    if (nul) return ez_fail(ELIZA_E_INVALID_ARG, "text holds a NUL byte at offset %zu", (size_t)(nul - text));
    bad = ez_utf8_invalid_at(text, len);
    if (bad < len)
        return ez_fail(ELIZA_E_INVALID_ARG, "text is not valid UTF-8: byte 0x%02x at offset %zu",
                       (unsigned char)text[bad], bad);
    return ELIZA_OK;
}

/* ---- chunks ---------------------------------------------------------------- */

static int only_punctuation(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint32_t c = ez_utf8_next(s, &i);
        if (!py_space(c) && !py_mark(c)) return 0;
    }
    return 1;
}

static void emit_line(ez_strbuf *out, const char *s, size_t n) {
    while (n > 0 && s[n - 1] == ' ') n--;
    if (n == 0) return;
    if (out->len > 0) ez_sb_append(out, "\n", 1);
    ez_sb_append(out, s, n);
}

/* How good a break after the word ending at s[end) is: 3 after .!?…,
 * 2 after :; 1 after , or —, 0 elsewhere (closing brackets and quotes are
 * looked through), as Kokoro's English pipeline prefers. */
static int break_rank(const char *s, size_t start, size_t end) {
    while (end > start) {
        size_t p = ez_utf8_prev(s, end), q = p;
        uint32_t c = ez_utf8_next(s, &q);
        if (c == ')' || c == '"' || c == 0x201D || c == 0xBB || c == ']' || c == '}') {
            end = p;
            continue;
        }
        if (sentence_end(c)) return 3;
        if (c == ':' || c == ';') return 2;
        if (c == ',' || c == 0x2014) return 1;
        return 0;
    }
    return 0;
}

/* Emits phonemes `s` as lines of at most max_chunk code points, cut at the
 * best-ranked space that fits (a word longer than max_chunk is cut inside). */
static void emit_chunks(ez_strbuf *out, const char *s, size_t n, int max_chunk) {
    size_t pos = 0;
    while (pos < n) {
        size_t i, count = 0, best[4] = {0, 0, 0, 0}, cut;
        int r;
        while (pos < n && s[pos] == ' ') pos++;
        if (pos >= n) break;
        for (i = pos; i < n; count++) {
            /* count code points lie in [pos, i) */
            if (s[i] == ' ' && i > pos) best[break_rank(s, pos, i)] = i;
            if (count == (size_t)max_chunk) break;
            ez_utf8_next(s, &i);
        }
        if (i >= n) { /* the rest fits */
            emit_line(out, s + pos, n - pos);
            break;
        }
        for (r = 3; r > 0 && !best[r]; r--) {
        }
        cut = best[r] ? best[r] : i;
        emit_line(out, s + pos, cut - pos);
        pos = cut;
    }
}

/* Appends the sentences of one line's phonemes `ps` ('\n' between them) to
 * `merged`, '\n' between them too, with every sentence that is only
 * punctuation (a piece espeak had nothing for) glued to its neighbour, the
 * previous one if any: the lines still join up to misaki's string. */
static void merge_sentences(const ez_strbuf *ps, ez_strbuf *merged, ez_strbuf *lead) {
    size_t s = 0;
    int have_prev = 0;
    sb_clear(merged);
    sb_clear(lead);
    while (s < ps->len) {
        const char *brk = (const char *)memchr(ps->data + s, '\n', ps->len - s);
        size_t e = brk ? (size_t)(brk - ps->data) : ps->len;
        span sent = py_strip(ps->data, s, e);
        const char *p = ps->data + sent.start;
        size_t n = sent.end - sent.start;
        s = e + 1;
        if (n == 0) continue;
        if (only_punctuation(p, n)) {
            ez_strbuf *to = have_prev ? merged : lead;
            if (to->len > 0) ez_sb_append(to, " ", 1);
            ez_sb_append(to, p, n);
            continue;
        }
        if (have_prev) ez_sb_append(merged, "\n", 1);
        if (lead->len > 0) {
            ez_sb_append(merged, lead->data, lead->len);
            ez_sb_append(merged, " ", 1);
            sb_clear(lead);
        }
        ez_sb_append(merged, p, n);
        have_prev = 1;
    }
}

typedef struct {
    ez_g2p_espeak_fn espeak;
    void *ctx;
} misaki_line;

static int32_t misaki_sentences(void *ctx, const char *text, size_t len, ez_strbuf *out) {
    const misaki_line *m = (const misaki_line *)ctx;
    return ez_g2p_misaki(text, len, 1, m->espeak, m->ctx, out);
}

int32_t ez_g2p_run(const char *text, size_t len, int max_chunk, ez_g2p_espeak_fn espeak, void *ctx,
                   ez_strbuf *out) {
    misaki_line m = {espeak, ctx};
    if (!espeak) return ez_fail(ELIZA_E_INVALID_ARG, "g2p: NULL espeak");
    return ez_g2p_run_lines(text, len, max_chunk, misaki_sentences, &m, out);
}

int32_t ez_g2p_run_lines(const char *text, size_t len, int max_chunk, ez_g2p_line_fn g2p, void *ctx,
                         ez_strbuf *out) {
    ez_strbuf ps = {0}, merged = {0}, lead = {0};
    size_t line = 0;
    int32_t rc;

    if ((!text && len) || !g2p || !out)
        return ez_fail(ELIZA_E_INVALID_ARG, "g2p: NULL text, G2P or output");
    if (max_chunk < 1) return ez_fail(ELIZA_E_INVALID_ARG, "g2p: max_chunk %d must be at least 1", max_chunk);
    rc = ez_g2p_check_text(text, len);
    if (rc < 0 || len == 0) return rc;

    /* Lines, as Kokoro's pipeline splits on '\n'; the G2P (misaki) on each, its
     * sentences on lines of their own, each cut to max_chunk. A line with
     * nothing but punctuation gives nothing (misaki would give the marks). */
    while (line <= len && rc >= 0) {
        const char *nl = (const char *)memchr(text + line, '\n', len - line);
        size_t line_end = nl ? (size_t)(nl - text) : len, s = 0;
        sb_clear(&ps);
        rc = g2p(ctx, text + line, line_end - line, &ps);
        if (rc >= 0) merge_sentences(&ps, &merged, &lead);
        while (rc >= 0 && s < merged.len) {
            const char *brk = (const char *)memchr(merged.data + s, '\n', merged.len - s);
            size_t e = brk ? (size_t)(brk - merged.data) : merged.len;
            emit_chunks(out, merged.data + s, e - s, max_chunk);
            s = e + 1;
        }
        line = line_end + 1;
    }
    if (rc >= 0 && (ps.failed || merged.failed || lead.failed || out->failed))
        rc = ez_fail(ELIZA_E_NOMEM, "out of memory phonemizing %zu bytes of text", len);
    ez_sb_free(&ps);
    ez_sb_free(&merged);
    ez_sb_free(&lead);
    return rc;
}
