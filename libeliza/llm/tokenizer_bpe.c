/* Byte-level BPE (tokenizer.ggml.model = "gpt2"), as llama.cpp does it:
 *   1. the pre-tokenizer cuts the text into words (regex-like rules per
 *      tokenizer.ggml.pre, written out by hand as llama.cpp does);
 *   2. each word's bytes are mapped to GPT-2's printable code points;
 *   3. the adjacent pair with the lowest merge rank is merged until no pair
 *      has a rank (ties to the leftmost);
 *   4. each final symbol is looked up; one that is no token falls back to its
 *      single bytes where those are tokens, and is dropped otherwise. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "llm/tokenizer_impl.h"
#include "llm/unicode.h"

/* ---- GPT-2 byte <-> code point --------------------------------------------- */

/* Printable bytes map to themselves; the other 68 to U+0100.. in byte order. */
static int printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

uint32_t ez_bpe_byte_to_cp(uint8_t b) {
    if (printable(b)) return b;
    if (b <= 0x20) return 0x100u + b;
    if (b <= 0xA0) return 0x100u + 33u + (b - 0x7Fu);
    return 0x100u + 67u; /* 0xAD */
}

int ez_bpe_cp_to_byte(uint32_t cp) {
    if (cp < 0x100) return printable(cp) ? (int)cp : -1;
    if (cp < 0x100 + 33) return (int)(cp - 0x100);
    if (cp < 0x100 + 67) return (int)(cp - 0x100 - 33 + 0x7F);
    if (cp == 0x100 + 67) return 0xAD;
    return -1;
}

/* ---- pre-tokenizers ---------------------------------------------------------- */

/* Per code point flags, llama.cpp's layout: one category bit, White_Space. */
enum {
    F_UNDEF = 0x01, F_NUMBER = 0x02, F_LETTER = 0x04, F_SEP = 0x08, F_MARK = 0x10,
    F_PUNCT = 0x20, F_SYMBOL = 0x40, F_CONTROL = 0x80, F_SPACE = 0x100
};
#define OUT_OF_RANGE 0xFFFFFFFFu

static uint16_t flags_of(uint32_t cp) {
    uint8_t code = ez_unicode_code(cp);
    return (uint16_t)((1u << (code & EZ_UCAT_MASK)) | ((code & EZ_UWHITESPACE) ? F_SPACE : 0));
}

typedef struct {
    const uint32_t *cp;  /* code points of the whole fragment */
    const uint16_t *fl;  /* their flags */
    size_t end;          /* end of the current chunk; positions at or past it are out */
} chunk;

static uint32_t cp_at(const chunk *c, size_t i) { return i < c->end ? c->cp[i] : OUT_OF_RANGE; }
static uint16_t fl_at(const chunk *c, size_t i) { return i < c->end ? c->fl[i] : 0; }

typedef struct {
    size_t *len; /* word lengths in code points */
    size_t n, cap;
    int failed;
} lenvec;

static void push_len(lenvec *v, size_t n) {
    if (n == 0 || v->failed) return;
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        size_t *p = (size_t *)realloc(v->len, cap * sizeof *p);
        if (!p) {
            v->failed = 1;
            return;
        }
        v->len = p;
        v->cap = cap;
    }
    v->len[v->n++] = n;
}

static uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* 's 't 're 've 'm 'll 'd at pos (case-insensitive if fold): its length or 0. */
static size_t contraction(const chunk *c, size_t pos, int fold) {
    uint32_t a, b;
    if (c->cp[pos] != '\'' || pos + 1 >= c->end) return 0;
    a = fold ? ascii_lower(c->cp[pos + 1]) : c->cp[pos + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (pos + 2 >= c->end) return 0;
    b = fold ? ascii_lower(c->cp[pos + 2]) : c->cp[pos + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * with llama.cpp's reading of (?!\S): a whitespace run keeps its last
 * character for the next word only when more text follows in the chunk. */
static void split_gpt2(const chunk *c, size_t pos, lenvec *out) {
    while (pos < c->end) {
        uint32_t cp = c->cp[pos];
        uint16_t f2 = cp == ' ' ? fl_at(c, pos + 1) : c->fl[pos];
        size_t n = contraction(c, pos, 0), end, ws = 0;

        if (n == 0 && (f2 & (F_LETTER | F_NUMBER))) {
            uint16_t cls = f2 & F_LETTER ? F_LETTER : F_NUMBER;
            for (end = pos + (cp == ' '); fl_at(c, end) & cls; end++) {}
            n = end - pos;
        } else if (n == 0 && f2 && !(f2 & (F_SPACE | F_LETTER | F_NUMBER))) {
            end = pos + (cp == ' ');
            while (fl_at(c, end) && !(fl_at(c, end) & (F_SPACE | F_LETTER | F_NUMBER))) end++;
            n = end - pos;
        } else if (n == 0) {
            while (fl_at(c, pos + ws) & F_SPACE) ws++;
            n = ws > 1 && cp_at(c, pos + ws) != OUT_OF_RANGE ? ws - 1 : ws > 0 ? ws : 1;
        }
        push_len(out, n);
        pos += n;
    }
}

/* Llama 3 and Qwen 2 (digits = 3 or 1, marks = 0), Qwen 3.5 (digits 1, marks 1):
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,digits}
 * | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * where Qwen 3.5 reads \p{L} as [\p{L}\p{M}] (and excludes \p{M} from the
 * punctuation class). */
static void split_modern(const chunk *c, size_t pos, int digits, int marks, lenvec *out) {
    const uint16_t letter = (uint16_t)(F_LETTER | (marks ? F_MARK : 0));
    const uint16_t not_punct = (uint16_t)(F_SPACE | F_LETTER | F_NUMBER | (marks ? F_MARK : 0));
    while (pos < c->end) {
        uint32_t cp = c->cp[pos];
        uint16_t f = c->fl[pos];
        size_t n = contraction(c, pos, 1), end;

        if (n > 0) {
            push_len(out, n);
            pos += n;
            continue;
        }
        if (cp != '\r' && cp != '\n' && !(f & F_NUMBER) &&
            ((f & letter) || (fl_at(c, pos + 1) & letter))) {
            for (end = pos + 1; fl_at(c, end) & letter; end++) {}
            push_len(out, end - pos);
            pos = end;
            continue;
        }
        if (f & F_NUMBER) {
            /* Runs of digits in groups of `digits` from the left. */
            for (end = pos; fl_at(c, end) & F_NUMBER && end - pos < (size_t)digits; end++) {}
            push_len(out, end - pos);
            pos = end;
            continue;
        }
        if (!((cp == ' ' ? fl_at(c, pos + 1) : f) & not_punct)) {
            end = pos + (cp == ' ');
            while (fl_at(c, end) && !(fl_at(c, end) & not_punct)) end++;
            while (cp_at(c, end) == '\r' || cp_at(c, end) == '\n') end++;
            push_len(out, end - pos);
            pos = end;
            continue;
        }
        {
            size_t ws = 0, last_nl = 0;
            while (fl_at(c, pos + ws) & F_SPACE) {
                uint32_t w = c->cp[pos + ws];
                ws++;
                if (w == '\r' || w == '\n') last_nl = ws;
            }
            n = last_nl > 0 ? last_nl
                : ws > 1 && cp_at(c, pos + ws) != OUT_OF_RANGE ? ws - 1
                : ws > 0 ? ws : 1;
            push_len(out, n);
            pos += n;
        }
    }
}

/* The classes of llama.cpp's "default" pre-tokenizer regexes, which it runs
 * through std::regex on a copy of the text where each non-ASCII code point
 * stands for its category (White_Space first). */
static int punct_class(const chunk *c, size_t i) {
    /* [\p{P}\$\+<=>\^~\|] */
    uint32_t cp = c->cp[i];
    if (cp < 0x80) return cp != '`' && (c->fl[i] & (F_PUNCT | F_SYMBOL));
    return (c->fl[i] & (F_PUNCT | F_SPACE)) == F_PUNCT;
}
static int number_class(const chunk *c, size_t i) {
    /* \p{N} */
    uint32_t cp = c->cp[i];
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    return (c->fl[i] & (F_NUMBER | F_SPACE)) == F_NUMBER;
}

/* Isolates every maximal run of class members (a regex "[class]+"). */
static void split_runs(const chunk *c, size_t pos, int (*in_class)(const chunk *, size_t),
                       lenvec *out) {
    while (pos < c->end) {
        int cls = in_class(c, pos);
        size_t end = pos + 1;
        while (end < c->end && in_class(c, end) == cls) end++;
        push_len(out, end - pos);
        pos = end;
    }
}

/* Isolates "[0-9][0-9][0-9]" matches, scanning left to right. */
static void split_triples(const chunk *c, size_t pos, lenvec *out) {
    size_t gap = pos, i = pos;
    while (i + 3 <= c->end) {
        if (c->cp[i] - '0' < 10u && c->cp[i + 1] - '0' < 10u && c->cp[i + 2] - '0' < 10u) {
            push_len(out, i - gap);
            push_len(out, 3);
            i += 3;
            gap = i;
        } else {
            i++;
        }
    }
    push_len(out, c->end - gap);
}

typedef enum { PASS_GPT2, PASS_LLAMA3, PASS_QWEN2, PASS_QWEN35, PASS_PUNCT, PASS_DIGITS,
               PASS_TRIPLES } pass_kind;

/* Re-cuts every word of *words with one rule; returns 0 on allocation failure. */
static int run_pass(pass_kind kind, const uint32_t *cp, const uint16_t *fl, lenvec *words) {
    lenvec out = {NULL, 0, 0, 0};
    size_t w, start = 0;
    for (w = 0; w < words->n; w++) {
        chunk c;
        c.cp = cp;
        c.fl = fl;
        c.end = start + words->len[w];
        switch (kind) {
        case PASS_GPT2: split_gpt2(&c, start, &out); break;
        case PASS_LLAMA3: split_modern(&c, start, 3, 0, &out); break;
        case PASS_QWEN2: split_modern(&c, start, 1, 0, &out); break;
        case PASS_QWEN35: split_modern(&c, start, 1, 1, &out); break;
        case PASS_PUNCT: split_runs(&c, start, punct_class, &out); break;
        case PASS_DIGITS: split_runs(&c, start, number_class, &out); break;
        case PASS_TRIPLES: split_triples(&c, start, &out); break;
        }
        start = c.end;
    }
    free(words->len);
    *words = out;
    return !out.failed;
}

int32_t ez_bpe_pretokenize(ez_pre_type pre, const char *text, size_t len, size_t **out_lens,
                           size_t *n_out) {
    static const pass_kind default_passes[] = {PASS_PUNCT, PASS_GPT2, PASS_DIGITS, PASS_TRIPLES};
    pass_kind single;
    const pass_kind *passes = &single;
    size_t n_passes = 1, n_cp = 0, i, p, w, at;
    uint32_t *cp = NULL;
    uint16_t *fl = NULL;
    size_t *off = NULL;
    lenvec words = {NULL, 0, 0, 0};
    int32_t rc = ELIZA_OK;

    *out_lens = NULL;
    *n_out = 0;
    switch (pre) {
    case EZ_PRE_DEFAULT: passes = default_passes; n_passes = 4; break;
    case EZ_PRE_GPT2: single = PASS_GPT2; break;
    case EZ_PRE_LLAMA3: single = PASS_LLAMA3; break;
    case EZ_PRE_QWEN2: single = PASS_QWEN2; break;
    case EZ_PRE_QWEN35: single = PASS_QWEN35; break;
    default: return ez_fail(ELIZA_E_INTERNAL, "unknown pre-tokenizer %d", (int)pre);
    }
    if (len == 0) return ELIZA_OK;
    cp = (uint32_t *)malloc(len * sizeof *cp);
    fl = (uint16_t *)malloc(len * sizeof *fl);
    off = (size_t *)malloc((len + 1) * sizeof *off);
    if (!cp || !fl || !off) goto nomem;
    for (i = 0; i < len;) {
        size_t n = ez_utf8_decode((const uint8_t *)text + i, len - i, &cp[n_cp]);
        if (n == 0) {
            rc = ez_fail(ELIZA_E_INVALID_ARG, "invalid UTF-8 at byte offset %zu", i);
            goto done;
        }
        fl[n_cp] = flags_of(cp[n_cp]);
        off[n_cp++] = i;
        i += n;
    }
    off[n_cp] = len;

    push_len(&words, n_cp);
    for (p = 0; p < n_passes && !words.failed; p++) {
        if (!run_pass(passes[p], cp, fl, &words)) goto nomem;
    }
    if (words.failed) goto nomem;
    /* Code point lengths to byte lengths. */
    for (w = 0, at = 0; w < words.n; w++) {
        size_t next = at + words.len[w];
        words.len[w] = off[next] - off[at];
        at = next;
    }
    *out_lens = words.len;
    *n_out = words.n;
    words.len = NULL;
    goto done;

nomem:
    rc = ez_fail(ELIZA_E_NOMEM, "out of memory pre-tokenizing %zu bytes", len);
done:
    free(words.len);
    free(off);
    free(fl);
    free(cp);
    return rc;
}

/* ---- merges ------------------------------------------------------------------ */

typedef struct {
    int32_t prev, next;
    uint32_t start, n;
} symbol;

typedef struct {
    const ez_tokenizer *tok;
    char *enc;            /* the word in GPT-2 code points */
    size_t cap_enc;
    symbol *sym;
    size_t cap_sym;
    ez_bigram_queue queue;
} session;


static int try_pair(session *s, int32_t left, int32_t right) {
    ez_bigram b;
    const symbol *l, *r;
    int32_t rank;
    if (left < 0 || right < 0) return 1;
    l = &s->sym[left];
    r = &s->sym[right];
    rank = ez_merge_find(s->tok, s->enc + l->start, l->n, s->enc + r->start, r->n);
    if (rank < 0) return 1;
    b.priority = -(double)rank;
    b.left = left;
    b.right = right;
    b.size = l->n + r->n;
    return ez_bigram_push(&s->queue, b);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    void *q;
    if (need <= *cap) return 1;
    q = realloc(*p, need * elem);
    if (!q) return 0;
    *p = q;
    *cap = need;
    return 1;
}

/* Tokenizes one word (raw bytes). Returns 0 on allocation failure. */
static int bpe_word(session *s, const char *word, size_t len, ez_idvec *out) {
    const ez_tokenizer *tok = s->tok;
    size_t n_enc = 0, n_sym = 0, i;
    int32_t id, k;

    if (!grow((void **)&s->enc, &s->cap_enc, 2 * len, 1) ||
        !grow((void **)&s->sym, &s->cap_sym, 2 * len, sizeof *s->sym))
        return 0;
    for (i = 0; i < len; i++) {
        uint8_t utf8[4];
        size_t n = ez_utf8_encode(ez_bpe_byte_to_cp((uint8_t)word[i]), utf8);
        s->sym[n_sym].prev = (int32_t)n_sym - 1;
        s->sym[n_sym].next = i + 1 == len ? -1 : (int32_t)n_sym + 1;
        s->sym[n_sym].start = (uint32_t)n_enc;
        s->sym[n_sym].n = (uint32_t)n;
        n_sym++;
        memcpy(s->enc + n_enc, utf8, n);
        n_enc += n;
    }
    if (tok->ignore_merges) {
        id = ez_vocab_find(tok, s->enc, n_enc);
        if (id >= 0) return ez_idvec_push(out, id);
    }

    s->queue.n = 0;
    for (i = 1; i < n_sym; i++) {
        if (!try_pair(s, (int32_t)i - 1, (int32_t)i)) return 0;
    }
    while (s->queue.n > 0) {
        ez_bigram b = ez_bigram_pop(&s->queue);
        symbol *l = &s->sym[b.left], *r = &s->sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s->sym[r->next].prev = b.left;
        if (!try_pair(s, l->prev, b.left) || !try_pair(s, b.left, l->next)) return 0;
    }

    for (k = n_sym ? 0 : -1; k != -1; k = s->sym[k].next) {
        const symbol *sy = &s->sym[k];
        id = ez_vocab_find(tok, s->enc + sy->start, sy->n);
        if (id >= 0) {
            if (!ez_idvec_push(out, id)) return 0;
            continue;
        }
        for (i = 0; i < sy->n; i++) {
            id = tok->char_token[(uint8_t)s->enc[sy->start + i]];
            if (id >= 0 && !ez_idvec_push(out, id)) return 0;
        }
    }
    return 1;
}

int32_t ez_bpe_tokenize(const ez_tokenizer *tok, const char *text, size_t len, ez_idvec *out) {
    session s;
    size_t *lens = NULL, n_words = 0, w, at = 0;
    int32_t rc;

    if (len > (size_t)(INT32_MAX / 2))
        return ez_fail(ELIZA_E_INVALID_ARG, "text fragment of %zu bytes is too long to tokenize",
                       len);
    rc = ez_bpe_pretokenize(tok->pre, text, len, &lens, &n_words);
    if (rc) return rc;
    memset(&s, 0, sizeof s);
    s.tok = tok;
    for (w = 0; w < n_words; w++) {
        if (!bpe_word(&s, text + at, lens[w], out)) {
            rc = ez_fail(ELIZA_E_NOMEM, "out of memory tokenizing %zu bytes", len);
            break;
        }
        at += lens[w];
    }
    free(s.queue.items);
    free(s.sym);
    free(s.enc);
    free(lens);
    return rc;
}
