/* A backtracking matcher for the pre-tokenizer patterns (see regex.h). It
 * follows ECMAScript's matching rules, which libstdc++'s std::regex
 * implements: alternatives in order, greedy quantifiers longest first, lazy
 * ones shortest first, lookaheads atomic, an iteration of a quantified group
 * that matches nothing ends the loop. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/utf8.h"
#include "llm/regex.h"
#include "llm/unicode.h"

/* Bounds of one match attempt. A repeated group nests one recursion level
 * per iteration, so a long word under such a pattern (exaone-moe's letter
 * runs, superbpe's digit groups) could exhaust a host thread's stack: past
 * STACK_BUDGET bytes of this thread's stack (measured from the addresses of
 * locals; a distance above STACK_UNKNOWN means the locals are not on one
 * stack, as under a sanitizer's fake stack, and only MAX_DEPTH applies) the
 * attempt stops with ELIZA_E_UNSUPPORTED instead. */
#define STACK_BUDGET ((uintptr_t)256 * 1024)
#define STACK_UNKNOWN ((uintptr_t)64 * 1024 * 1024)
#define MAX_DEPTH 20000
#define INF (-1)

enum { N_CLASS, N_GROUP, N_LOOK, N_NLOOK, N_BOL, N_EOL, N_WORDB, N_NWORDB };
enum { E_SPACE = 1, E_NSPACE = 2, E_DIGIT = 4, E_NDIGIT = 8, E_WORD = 16, E_NWORD = 32,
       E_DOT = 64 };

typedef struct rx_node rx_node;
typedef struct {
    rx_node *items;
    int n, cap;
} rx_seq;
typedef struct {
    rx_seq *seqs;
    int n, cap;
} rx_alt;

struct rx_node {
    int kind;
    int min, max; /* max INF: unbounded */
    int greedy;
    /* N_CLASS: a set of values */
    int negate;
    unsigned esc;
    uint32_t (*rng)[2];
    int n_rng, cap_rng;
    /* N_GROUP, N_LOOK, N_NLOOK */
    rx_alt body;
    int single; /* N_GROUP: every alternative matches exactly one character */
};

struct ez_regex {
    int collapsed;
    rx_alt top;
};

/* ---- building ------------------------------------------------------------------ */

static void free_alt(rx_alt *a);

static void free_node(rx_node *nd) {
    free(nd->rng);
    free_alt(&nd->body);
}

static void free_alt(rx_alt *a) {
    int i, j;
    for (i = 0; i < a->n; i++) {
        for (j = 0; j < a->seqs[i].n; j++) free_node(&a->seqs[i].items[j]);
        free(a->seqs[i].items);
    }
    free(a->seqs);
    memset(a, 0, sizeof *a);
}

static int grow(void **p, int *cap, int need, size_t elem) {
    void *q;
    int c;
    if (need <= *cap) return 1;
    c = *cap ? *cap * 2 : 4;
    if (c < need) c = need;
    q = realloc(*p, (size_t)c * elem);
    if (!q) return 0;
    *p = q;
    *cap = c;
    return 1;
}

static int add_range(rx_node *nd, uint32_t lo, uint32_t hi) {
    if (!grow((void **)&nd->rng, &nd->cap_rng, nd->n_rng + 1, sizeof *nd->rng)) return 0;
    nd->rng[nd->n_rng][0] = lo;
    nd->rng[nd->n_rng][1] = hi;
    nd->n_rng++;
    return 1;
}

/* ---- parsing ------------------------------------------------------------------- */

typedef struct {
    const uint32_t *p;
    size_t n, i;
    int nomem;
    const char *bad; /* why the pattern was refused, or NULL */
} parser;

static int at_end(const parser *ps) { return ps->i >= ps->n; }
static uint32_t peek(const parser *ps) { return ps->i < ps->n ? ps->p[ps->i] : 0; }

static int refuse(parser *ps, const char *why) {
    if (!ps->bad) ps->bad = why;
    return 0;
}

static int hex_digit(uint32_t c) {
    if (c >= '0' && c <= '9') return (int)(c - '0');
    if (c >= 'a' && c <= 'f') return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return (int)(c - 'A' + 10);
    return -1;
}

/* After a backslash: a character (*cp), a class escape (*esc) or, outside a
 * class, an assertion (*kind N_WORDB / N_NWORDB). */
static int parse_escape(parser *ps, int in_class, uint32_t *cp, unsigned *esc, int *kind) {
    uint32_t c;
    *esc = 0;
    *kind = -1;
    if (at_end(ps)) return refuse(ps, "pattern ends in a backslash");
    c = ps->p[ps->i++];
    switch (c) {
    case 's': *esc = E_SPACE; return 1;
    case 'S': *esc = E_NSPACE; return 1;
    case 'd': *esc = E_DIGIT; return 1;
    case 'D': *esc = E_NDIGIT; return 1;
    case 'w': *esc = E_WORD; return 1;
    case 'W': *esc = E_NWORD; return 1;
    case 'r': *cp = '\r'; return 1;
    case 'n': *cp = '\n'; return 1;
    case 't': *cp = '\t'; return 1;
    case 'v': *cp = '\v'; return 1;
    case 'f': *cp = '\f'; return 1;
    case '0': *cp = 0; return 1;
    case 'b':
        if (in_class) {
            *cp = 8;
        } else {
            *kind = N_WORDB;
        }
        return 1;
    case 'B':
        if (in_class) return refuse(ps, "\\B inside a class");
        *kind = N_NWORDB;
        return 1;
    case 'x':
    case 'u': {
        int digits = c == 'x' ? 2 : 4, k;
        uint32_t v = 0;
        for (k = 0; k < digits; k++) {
            int h = hex_digit(peek(ps));
            if (at_end(ps) || h < 0) return refuse(ps, "bad \\x or \\u escape");
            v = v * 16 + (uint32_t)h;
            ps->i++;
        }
        *cp = v;
        return 1;
    }
    default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9'))
            return refuse(ps, "unsupported escape (\\p{...} outside llama.cpp's categories, "
                              "back-references, ...)");
        *cp = c;
        return 1;
    }
}

static int parse_class(parser *ps, rx_node *nd) {
    nd->kind = N_CLASS;
    if (peek(ps) == '^') {
        nd->negate = 1;
        ps->i++;
    }
    for (;;) {
        uint32_t lo, hi;
        unsigned esc = 0;
        int kind;
        if (at_end(ps)) return refuse(ps, "unterminated character class");
        lo = ps->p[ps->i++];
        if (lo == ']') return 1;
        if (lo == '\\') {
            if (!parse_escape(ps, 1, &lo, &esc, &kind)) return 0;
            if (esc) {
                nd->esc |= esc;
                continue;
            }
        }
        hi = lo;
        if (peek(ps) == '-' && ps->i + 1 < ps->n && ps->p[ps->i + 1] != ']') {
            ps->i++;
            hi = ps->p[ps->i++];
            if (hi == '\\') {
                if (!parse_escape(ps, 1, &hi, &esc, &kind)) return 0;
                if (esc) return refuse(ps, "class escape as the end of a range");
            }
            if (hi < lo) return refuse(ps, "range out of order in a character class");
        }
        if (!add_range(nd, lo, hi)) {
            ps->nomem = 1;
            return 0;
        }
    }
}

static int parse_alt(parser *ps, rx_alt *out);

/* A node that always matches exactly one character, decided by that
 * character alone: a plain class, or a group of such alternatives. */
static int single_char(const rx_node *nd) {
    if (nd->min != 1 || nd->max != 1) return 0;
    return nd->kind == N_CLASS || (nd->kind == N_GROUP && nd->single);
}

/* Each alternative is lookaheads on the next character (with_looks) then
 * one single_char node. Such a group repeated (tekken's and gpt-4o's
 * ((?=[\p{L}])([^a-z]))*) is matched like a class, one loop instead of one
 * recursion level per character; the order of the alternatives cannot
 * matter since each takes one character. */
static int single_char_alts(const rx_alt *a, int with_looks) {
    int i, j;
    for (i = 0; i < a->n; i++) {
        const rx_seq *s = &a->seqs[i];
        if (s->n == 0) return 0;
        for (j = 0; j + 1 < s->n; j++) {
            const rx_node *l = &s->items[j];
            if (!with_looks || (l->kind != N_LOOK && l->kind != N_NLOOK) || !single_char_alts(&l->body, 0))
                return 0;
        }
        if (!single_char(&s->items[s->n - 1])) return 0;
    }
    return 1;
}

static int parse_number(parser *ps, int *v) {
    int any = 0;
    *v = 0;
    while (peek(ps) >= '0' && peek(ps) <= '9' && !at_end(ps)) {
        *v = *v * 10 + (int)(ps->p[ps->i++] - '0');
        if (*v > 100000) return refuse(ps, "repeat count too large");
        any = 1;
    }
    return any;
}

static int parse_quant(parser *ps, rx_node *nd) {
    uint32_t c = peek(ps);
    nd->min = nd->max = 1;
    nd->greedy = 1;
    if (at_end(ps)) return 1;
    if (c == '*') {
        nd->min = 0;
        nd->max = INF;
    } else if (c == '+') {
        nd->min = 1;
        nd->max = INF;
    } else if (c == '?') {
        nd->min = 0;
        nd->max = 1;
    } else if (c == '{') {
        ps->i++;
        if (!parse_number(ps, &nd->min)) return refuse(ps, "bad {n,m} repeat");
        nd->max = nd->min;
        if (peek(ps) == ',') {
            ps->i++;
            nd->max = INF;
            if (peek(ps) != '}' && !parse_number(ps, &nd->max)) return refuse(ps, "bad {n,m} repeat");
        }
        if (peek(ps) != '}' || at_end(ps)) return refuse(ps, "bad {n,m} repeat");
        if (nd->max != INF && nd->max < nd->min) return refuse(ps, "{n,m} with m < n");
    } else {
        return 1;
    }
    ps->i++;
    if (peek(ps) == '?' && !at_end(ps)) {
        nd->greedy = 0;
        ps->i++;
    }
    c = peek(ps);
    if (!at_end(ps) && (c == '*' || c == '+' || c == '?' || c == '{'))
        return refuse(ps, "nothing to repeat");
    return 1;
}

static int parse_atom(parser *ps, rx_node *nd) {
    uint32_t c = ps->p[ps->i++];
    unsigned esc;
    int kind;
    memset(nd, 0, sizeof *nd);
    switch (c) {
    case '(':
        nd->kind = N_GROUP;
        if (peek(ps) == '?') {
            uint32_t k = ps->i + 1 < ps->n ? ps->p[ps->i + 1] : 0;
            if (k == ':') {
                nd->kind = N_GROUP;
            } else if (k == '=') {
                nd->kind = N_LOOK;
            } else if (k == '!') {
                nd->kind = N_NLOOK;
            } else {
                return refuse(ps, "unsupported group (only ( ), (?: ), (?= ), (?! ))");
            }
            ps->i += 2;
        }
        if (!parse_alt(ps, &nd->body)) return 0;
        if (peek(ps) != ')' || at_end(ps)) return refuse(ps, "unbalanced parenthesis");
        ps->i++;
        nd->single = nd->kind == N_GROUP && single_char_alts(&nd->body, 1);
        return 1;
    case ')':
        return refuse(ps, "unbalanced parenthesis");
    case '[':
        return parse_class(ps, nd);
    case '^': nd->kind = N_BOL; return 1;
    case '$': nd->kind = N_EOL; return 1;
    case '.':
        nd->kind = N_CLASS;
        nd->esc = E_DOT;
        return 1;
    case '*':
    case '+':
    case '?':
        return refuse(ps, "nothing to repeat");
    case '\\':
        if (!parse_escape(ps, 0, &c, &esc, &kind)) return 0;
        if (kind >= 0) {
            nd->kind = kind;
            return 1;
        }
        nd->kind = N_CLASS;
        if (esc) {
            nd->esc = esc;
            return 1;
        }
        break;
    default:
        nd->kind = N_CLASS;
        break;
    }
    if (!add_range(nd, c, c)) {
        ps->nomem = 1;
        return 0;
    }
    return 1;
}

static int parse_seq(parser *ps, rx_seq *seq) {
    while (!at_end(ps) && peek(ps) != '|' && peek(ps) != ')') {
        rx_node *nd;
        if (!grow((void **)&seq->items, &seq->cap, seq->n + 1, sizeof *seq->items)) {
            ps->nomem = 1;
            return 0;
        }
        nd = &seq->items[seq->n];
        if (!parse_atom(ps, nd)) {
            free_node(nd);
            return 0;
        }
        seq->n++;
        if (!parse_quant(ps, nd)) return 0;
        if (nd->kind != N_CLASS && nd->kind != N_GROUP && (nd->min != 1 || nd->max != 1))
            return refuse(ps, "a repeated assertion");
    }
    return 1;
}

static int parse_alt(parser *ps, rx_alt *out) {
    for (;;) {
        rx_seq *seq;
        if (!grow((void **)&out->seqs, &out->cap, out->n + 1, sizeof *out->seqs)) {
            ps->nomem = 1;
            return 0;
        }
        seq = &out->seqs[out->n++];
        memset(seq, 0, sizeof *seq);
        if (!parse_seq(ps, seq)) return 0;
        if (peek(ps) != '|' || at_end(ps)) return 1;
        ps->i++;
    }
}

/* ---- llama.cpp's category collapse of a pattern ---------------------------------- */

typedef struct {
    const char *name;
    uint8_t byte;          /* what the text's non-ASCII members become */
    const char *ascii;     /* the ASCII members, as class text */
} ucat;

/* The table of llama.cpp's unicode_regex_split (\p{Lu} and friends are any
 * letter there). */
static const ucat k_ucats[] = {
    {"\\p{N}", 0xD1, "0-9"},
    {"\\p{L}", 0xD2, "A-Za-z"},
    {"\\p{P}", 0xD3, "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}"},
    {"\\p{M}", 0xD4, ""},
    {"\\p{S}", 0xD5, "\\$\\+<->\\^`\\|\\~"},
    {"\\p{Lu}", 0xD2, "A-Za-z"},
    {"\\p{Ll}", 0xD2, "A-Za-z"},
    {"\\p{Lt}", 0xD2, "A-Za-z"},
    {"\\p{Lm}", 0xD2, "A-Za-z"},
    {"\\p{Lo}", 0xD2, "A-Za-z"},
};
#define N_UCATS (sizeof k_ucats / sizeof k_ucats[0])

static int needs_collapse(const char *pattern) {
    size_t k;
    for (k = 0; k < N_UCATS; k++)
        if (strstr(pattern, k_ucats[k].name)) return 1;
    return 0;
}

static int push_cp(uint32_t **buf, size_t *n, size_t *cap, uint32_t c) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        uint32_t *q = (uint32_t *)realloc(*buf, nc * sizeof *q);
        if (!q) return 0;
        *buf = q;
        *cap = nc;
    }
    (*buf)[(*n)++] = c;
    return 1;
}

/* The pattern as the values the parser reads: code points, or with the
 * categories collapsed the bytes of llama.cpp's rewritten pattern. */
static int32_t pattern_values(const char *pattern, int collapsed, uint32_t **out, size_t *n_out) {
    size_t len = strlen(pattern), i, n = 0, cap = 0;
    uint32_t *buf = NULL;
    int inside = 0;
    for (i = 0; i < len;) {
        uint32_t cp;
        size_t k, m = ez_utf8_decode((const uint8_t *)pattern + i, len - i, &cp);
        if (m == 0) {
            free(buf);
            return ez_fail(ELIZA_E_INVALID_ARG, "regex: pattern is not valid UTF-8 at byte %zu", i);
        }
        if (!collapsed) {
            if (!push_cp(&buf, &n, &cap, cp)) goto nomem;
            i += m;
            continue;
        }
        if (cp >= 128) {
            free(buf);
            return ez_fail(ELIZA_E_INVALID_ARG,
                           "regex: pattern mixes Unicode categories and non-ASCII characters");
        }
        if (cp == '[' && (i == 0 || pattern[i - 1] != '\\')) {
            inside = 1;
        } else if (inside && cp == ']' && pattern[i - 1] != '\\') {
            inside = 0;
        } else if (cp == '\\') {
            for (k = 0; k < N_UCATS; k++) {
                size_t nl = strlen(k_ucats[k].name);
                const char *a;
                if (strncmp(pattern + i, k_ucats[k].name, nl) != 0) continue;
                if (!inside && !push_cp(&buf, &n, &cap, '[')) goto nomem;
                if (!push_cp(&buf, &n, &cap, k_ucats[k].byte)) goto nomem;
                for (a = k_ucats[k].ascii; *a; a++)
                    if (!push_cp(&buf, &n, &cap, (uint8_t)*a)) goto nomem;
                if (!inside && !push_cp(&buf, &n, &cap, ']')) goto nomem;
                i += nl;
                break;
            }
            if (k < N_UCATS) continue;
        }
        if (!push_cp(&buf, &n, &cap, cp)) goto nomem;
        i += m;
    }
    *out = buf;
    *n_out = n;
    return ELIZA_OK;
nomem:
    free(buf);
    return ez_fail(ELIZA_E_NOMEM, "regex: out of memory");
}

int32_t ez_regex_compile(const char *pattern, ez_regex **out) {
    ez_regex *re;
    parser ps;
    uint32_t *vals = NULL;
    size_t n_vals = 0;
    int32_t rc;
    *out = NULL;
    re = (ez_regex *)calloc(1, sizeof *re);
    if (!re) return ez_fail(ELIZA_E_NOMEM, "regex: out of memory");
    re->collapsed = needs_collapse(pattern);
    rc = pattern_values(pattern, re->collapsed, &vals, &n_vals);
    if (rc) {
        free(re);
        return rc;
    }
    memset(&ps, 0, sizeof ps);
    ps.p = vals;
    ps.n = n_vals;
    if (!parse_alt(&ps, &re->top) || !at_end(&ps)) {
        size_t at = ps.i;
        const char *why = ps.bad ? ps.bad : "unbalanced parenthesis";
        int nomem = ps.nomem;
        free(vals);
        ez_regex_free(re);
        if (nomem) return ez_fail(ELIZA_E_NOMEM, "regex: out of memory");
        return ez_fail(ELIZA_E_INVALID_ARG, "regex: %s (near position %zu of '%.80s')", why, at,
                       pattern);
    }
    free(vals);
    *out = re;
    return ELIZA_OK;
}

void ez_regex_free(ez_regex *re) {
    if (!re) return;
    free_alt(&re->top);
    free(re);
}

uint32_t ez_regex_view(const ez_regex *re, uint32_t cp) {
    uint8_t code;
    if (cp < 128) return cp;
    code = ez_unicode_code(cp);
    if (code & EZ_UWHITESPACE) return 0x0B;
    if (!re->collapsed) return cp;
    switch (code & EZ_UCAT_MASK) {
    case EZ_UCAT_NUMBER: return 0xD1;
    case EZ_UCAT_LETTER: return 0xD2;
    case EZ_UCAT_PUNCT: return 0xD3;
    case EZ_UCAT_MARK: return 0xD4;
    case EZ_UCAT_SYMBOL: return 0xD5;
    default: return 0xD0;
    }
}

/* ---- matching ------------------------------------------------------------------ */

static int is_space(uint32_t v) { return v == ' ' || (v >= '\t' && v <= '\r'); }
static int is_digit(uint32_t v) { return v >= '0' && v <= '9'; }
static int is_word(uint32_t v) {
    return is_digit(v) || (v >= 'a' && v <= 'z') || (v >= 'A' && v <= 'Z') || v == '_';
}

static int class_has(const rx_node *nd, uint32_t v) {
    int i, in = 0;
    unsigned e = nd->esc;
    for (i = 0; i < nd->n_rng && !in; i++) in = v >= nd->rng[i][0] && v <= nd->rng[i][1];
    if (!in && e) {
        in = ((e & E_SPACE) && is_space(v)) || ((e & E_NSPACE) && !is_space(v)) ||
             ((e & E_DIGIT) && is_digit(v)) || ((e & E_NDIGIT) && !is_digit(v)) ||
             ((e & E_WORD) && is_word(v)) || ((e & E_NWORD) && !is_word(v)) ||
             ((e & E_DOT) && v != '\n' && v != '\r' && v != 0x2028 && v != 0x2029);
    }
    return in != nd->negate;
}

/* Whether single_char node nd matches value v. */
static int char_matches(const rx_node *nd, uint32_t v) {
    int i, j;
    if (nd->kind == N_CLASS) return class_has(nd, v);
    for (i = 0; i < nd->body.n; i++) {
        const rx_seq *s = &nd->body.seqs[i];
        int ok = 1;
        for (j = 0; j + 1 < s->n && ok; j++) {
            const rx_node *l = &s->items[j];
            int k, any = 0;
            for (k = 0; k < l->body.n && !any; k++) any = char_matches(&l->body.seqs[k].items[0], v);
            ok = any == (l->kind == N_LOOK);
        }
        if (ok && char_matches(&s->items[s->n - 1], v)) return 1;
    }
    return 0;
}

typedef struct {
    const uint32_t *v;
    size_t begin, end;
    size_t mstart, mend;
    int not_null;
    int depth, overflow;
    uintptr_t stack_base;  /* address of a local of the search */
} mctx;

static int out_of_stack(mctx *c) {
    char probe;
    uintptr_t here = (uintptr_t)&probe;
    uintptr_t used = here < c->stack_base ? c->stack_base - here : here - c->stack_base;
    return c->depth > MAX_DEPTH || (used > STACK_BUDGET && used < STACK_UNKNOWN);
}

/* What follows once a sequence is done: the rest of an enclosing sequence,
 * or the next iteration of a quantified group. NULL: the whole match. */
typedef struct cont {
    int rep;               /* 0: seq[idx..], 1: group n after `count` iterations */
    const rx_seq *seq;
    int idx;
    const rx_node *n;
    int count;
    size_t start;          /* where the iteration began */
    const struct cont *next;
} cont;

static int m_seq(mctx *c, const rx_seq *s, int idx, size_t pos, const cont *k);

static int m_alts(mctx *c, const rx_alt *a, size_t pos, const cont *k) {
    int i;
    for (i = 0; i < a->n && !c->overflow; i++)
        if (m_seq(c, &a->seqs[i], 0, pos, k)) return 1;
    return 0;
}

static int m_rep(mctx *c, const rx_node *n, int count, size_t pos, const cont *k);

static int run_k(mctx *c, const cont *k, size_t pos) {
    if (!k) {
        if (c->not_null && pos == c->mstart) return 0;
        c->mend = pos;
        return 1;
    }
    if (!k->rep) return m_seq(c, k->seq, k->idx, pos, k->next);
    if (pos == k->start && k->count - 1 >= k->n->min) return 0;
    return m_rep(c, k->n, k->count, pos, k->next);
}

static int m_rep(mctx *c, const rx_node *n, int count, size_t pos, const cont *k) {
    cont again;
    int more = n->max == INF || count < n->max;
    memset(&again, 0, sizeof again);
    again.rep = 1;
    again.n = n;
    again.count = count + 1;
    again.start = pos;
    again.next = k;
    if (count < n->min) return m_alts(c, &n->body, pos, &again);
    if (n->greedy) return (more && m_alts(c, &n->body, pos, &again)) || run_k(c, k, pos);
    return run_k(c, k, pos) || (more && m_alts(c, &n->body, pos, &again));
}

/* A greedy repeated group that ends the whole match (nothing after it, no
 * continuation): the match backtracking keeps takes the body's first match
 * at each iteration until the body fails, so the iterations are a loop
 * instead of one recursion level each (exaone-moe's letter runs). Returns
 * the result, or -1 where that does not hold (fewer than min iterations, an
 * empty iteration, an empty overall match that must not be): the caller
 * then backtracks in full. */
static int greedy_tail(mctx *c, const rx_node *n, size_t pos) {
    size_t at = pos, saved_end = c->mend;
    int count = 0, saved_nn = c->not_null, found = 1;
    c->not_null = 0;
    while ((n->max == INF || count < n->max) && found) {
        found = m_alts(c, &n->body, at, NULL);
        if (c->overflow) break;
        if (found && c->mend == at) {
            count = -1; /* an empty iteration: the rules for it need backtracking */
            break;
        }
        if (found) {
            at = c->mend;
            count++;
        }
    }
    c->not_null = saved_nn;
    c->mend = saved_end;
    if (c->overflow) return 0;
    if (count < n->min || (c->not_null && at == c->mstart)) return -1;
    return run_k(c, NULL, at);
}

static int m_seq(mctx *c, const rx_seq *s, int idx, size_t pos, const cont *k) {
    const rx_node *n;
    cont next;
    int r = 0;
    if (idx == s->n) return run_k(c, k, pos);
    if (c->overflow) return 0;
    ++c->depth;
    if (out_of_stack(c)) {
        c->overflow = 1;
        c->depth--;
        return 0;
    }
    n = &s->items[idx];
    memset(&next, 0, sizeof next);
    next.seq = s;
    next.idx = idx + 1;
    next.next = k;
    switch (n->single ? N_CLASS : n->kind) {
    case N_CLASS: {
        size_t most = 0, j;
        while (pos + most < c->end && (n->max == INF || most < (size_t)n->max) &&
               char_matches(n, c->v[pos + most]))
            most++;
        if (most < (size_t)n->min) break;
        if (n->greedy) {
            for (j = most + 1; j-- > (size_t)n->min && !c->overflow;)
                if ((r = m_seq(c, s, idx + 1, pos + j, k))) break;
        } else {
            for (j = (size_t)n->min; j <= most && !c->overflow; j++)
                if ((r = m_seq(c, s, idx + 1, pos + j, k))) break;
        }
        break;
    }
    case N_GROUP:
        if (n->min == 1 && n->max == 1)
            r = m_alts(c, &n->body, pos, &next);
        else if (k || idx + 1 != s->n || !n->greedy || (r = greedy_tail(c, n, pos)) < 0)
            r = m_rep(c, n, 0, pos, &next);
        break;
    case N_LOOK:
    case N_NLOOK: {
        size_t saved_end = c->mend, saved_start = c->mstart;
        int saved_nn = c->not_null, found;
        c->not_null = 0;
        found = m_alts(c, &n->body, pos, NULL);
        c->not_null = saved_nn;
        c->mend = saved_end;
        c->mstart = saved_start;
        if (found == (n->kind == N_LOOK)) r = m_seq(c, s, idx + 1, pos, k);
        break;
    }
    case N_BOL:
        if (pos == c->begin) r = m_seq(c, s, idx + 1, pos, k);
        break;
    case N_EOL:
        if (pos == c->end) r = m_seq(c, s, idx + 1, pos, k);
        break;
    case N_WORDB:
    case N_NWORDB: {
        int before = pos > c->begin && is_word(c->v[pos - 1]);
        int after = pos < c->end && is_word(c->v[pos]);
        if ((before != after) == (n->kind == N_WORDB)) r = m_seq(c, s, idx + 1, pos, k);
        break;
    }
    }
    c->depth--;
    return r;
}

/* std::regex_search from pos (only at pos when continuous). */
static int search(const ez_regex *re, mctx *c, size_t pos, int continuous) {
    size_t s;
    char base;
    c->stack_base = (uintptr_t)&base;
    for (s = pos; s <= c->end; s++) {
        c->mstart = s;
        c->depth = 0;
        if (m_alts(c, &re->top, s, NULL)) return 1;
        if (c->overflow || continuous) return 0;
    }
    return 0;
}

typedef struct {
    size_t *len;
    size_t n, cap;
} lens_out;

static int push_word(lens_out *o, size_t n) {
    if (n == 0) return 1;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        size_t *p = (size_t *)realloc(o->len, cap * sizeof *p);
        if (!p) return 0;
        o->len = p;
        o->cap = cap;
    }
    o->len[o->n++] = n;
    return 1;
}

int32_t ez_regex_split(const ez_regex *re, const uint32_t *view, size_t **lens, size_t *n) {
    lens_out out = {NULL, 0, 0};
    size_t w, start = 0;
    mctx c;
    for (w = 0; w < *n; w++) {
        size_t b = start, e = start + (*lens)[w], gap = b;
        int ok;
        start = e;
        memset(&c, 0, sizeof c);
        c.v = view;
        c.begin = b;
        c.end = e;
        ok = search(re, &c, b, 0);
        while (ok) {
            size_t ms = c.mstart, me = c.mend;
            if (!push_word(&out, ms - gap) || !push_word(&out, me - ms)) goto nomem;
            gap = me;
            if (me == ms) {
                if (me == e) break;
                c.not_null = 1;
                ok = search(re, &c, me, 1);
                c.not_null = 0;
                if (ok) continue;
                if (c.overflow) break;
                ok = search(re, &c, me + 1, 0);
            } else {
                ok = search(re, &c, me, 0);
            }
        }
        if (c.overflow) {
            free(out.len);
            return ez_fail(ELIZA_E_UNSUPPORTED,
                           "pre-tokenizer: a word of %zu characters needs more backtracking "
                           "than the matcher allows",
                           e - b);
        }
        if (!push_word(&out, e - gap)) goto nomem;
    }
    free(*lens);
    *lens = out.len;
    *n = out.n;
    return ELIZA_OK;
nomem:
    free(out.len);
    return ez_fail(ELIZA_E_NOMEM, "pre-tokenizer: out of memory");
}
