/* misaki 0.9.4's English G2P (misaki/en.py, version=None) in C.
 *
 *   tokens     spaCy's tokenizer, approximated: whitespace, then leading
 *              and trailing punctuation split off (abbreviations such as
 *              "Dr." and "a.m." keep their period), dashes and ellipses
 *              always apart. misaki's subtokenize regex then cuts each
 *              token; pieces without whitespace between them form a word
 *              group, looked up whole first, then by its longest known
 *              parts (misaki's left/right loop).
 *   tags       spaCy's tagger is replaced by rules (tag_word): CD for
 *              numbers, DT/IN/TO/PRP for the function words misaki's
 *              special cases ask about, NNP for capitalised words inside a
 *              sentence and for acronyms, VB after "to", NN after a
 *              determiner; everything else gets no tag, so a heteronym
 *              takes its DEFAULT entry.
 *   lexicon    Lexicon.__call__/get_word/lookup/stem_s/_ed/_ing/get_number
 *              as misaki has them, against the gold and silver tables.
 *   fallback   espeak-ng for a word neither table knows, rewritten as
 *              misaki's EspeakFallback does (its E2M table).
 *
 * Phoneme strings are handled as code point arrays (ps); a ps that is not
 * `ok` is misaki's None. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/gguf.h"
#include "core/quant.h"
#include "core/utf8.h"
#include "tts/g2p_en.h"

/* ---- phoneme strings ------------------------------------------------------ */

#define PS_MAX 768
#define WORD_MAX 256

typedef struct {
    int n, ok;
    uint32_t c[PS_MAX];
} ps;

static const uint32_t PRIMARY = 0x2C8, SECONDARY = 0x2CC;

/* The code point at s + *i (*i steps over it); 0 for a byte that starts no
 * valid sequence, taken as one code point of its own value. */
static int utf8_decode(const char *s, size_t n, size_t *i, uint32_t *cp) {
    const size_t len = ez_utf8_decode(s + *i, n - *i, cp);
    if (len) {
        *i += len;
        return 1;
    }
    *cp = (unsigned char)s[*i];
    *i += 1;
    return 0;
}

static void ps_none(ps *p) {
    p->n = 0;
    p->ok = 0;
}

static void ps_push(ps *p, uint32_t c) {
    if (!p->ok) return;
    if (p->n == PS_MAX) {
        ps_none(p); /* too long to say: left to the fallback */
        return;
    }
    p->c[p->n++] = c;
}

static void ps_utf8(ps *p, const char *s, size_t n) {
    size_t i = 0;
    uint32_t c;
    p->n = 0;
    p->ok = 1;
    while (i < n) {
        utf8_decode(s, n, &i, &c);
        ps_push(p, c);
    }
}

static void ps_str(ps *p, const char *s) { ps_utf8(p, s, strlen(s)); }

static void ps_cat(ps *p, const ps *q) {
    for (int i = 0; i < q->n; i++) ps_push(p, q->c[i]);
}

static void ps_cat_str(ps *p, const char *s) {
    ps t;
    ps_str(&t, s);
    ps_cat(p, &t);
}

static int ps_has(const ps *p, uint32_t c) {
    for (int i = 0; i < p->n; i++)
        if (p->c[i] == c) return 1;
    return 0;
}

static int in_set(uint32_t c, const char *set) {
    size_t i = 0, n = strlen(set);
    uint32_t d;
    while (i < n) {
        utf8_decode(set, n, &i, &d);
        if (d == c) return 1;
    }
    return 0;
}

static const char *const VOWELS = "AIOQWYaiuæɑɒɔəɛɜɪʊʌᵻ";
static const char *const CONSONANTS = "bdfhjklmnpstvwzðŋɡɹɾʃʒʤʧθ";
static const char *const NON_QUOTE_PUNCTS = ";:,.!?—…";
static const char *const PUNCTS = ";:,.!?—…\"“”";
static const char *const US_TAUS = "AIOWYiuæɑəɛɪɹʊʌ";
static const char *const VOCAB_US = "AIOWYbdfhijklmnpstuvwzæðŋɑɔəɛɜɡɪɹɾʃʊʌʒʤʧˈˌθᵊᵻʔ";
static const char *const VOCAB_GB = "AIQWYabdfhijklmnpstuvwzðŋɑɒɔəɛɜɡɪɹʃʊʌʒʤʧˈˌːθᵊ";

/* misaki's stress levels times two: -2 -> -4, -0.5 -> -1, 0.5 -> 1, ... */
enum { STRESS_NONE = 99 };

static void insert_before_first_vowel(ps *p, uint32_t mark) {
    int j = 0;
    while (j < p->n && !in_set(p->c[j], VOWELS)) j++;
    if (j == p->n) return; /* no vowel: unchanged, as misaki */
    if (p->n == PS_MAX) {
        ps_none(p);
        return;
    }
    memmove(p->c + j + 1, p->c + j, (size_t)(p->n - j) * sizeof p->c[0]);
    p->c[j] = mark;
    p->n++;
}

static void replace_cp(ps *p, uint32_t from, uint32_t to) {
    for (int i = 0; i < p->n; i++)
        if (p->c[i] == from) p->c[i] = to;
}

static void remove_cp(ps *p, uint32_t c) {
    int k = 0;
    for (int i = 0; i < p->n; i++)
        if (p->c[i] != c) p->c[k++] = p->c[i];
    p->n = k;
}

/* apply_stress(ps, stress) */
static void apply_stress(ps *p, int s2) {
    int has_p, has_s;
    if (!p->ok || s2 == STRESS_NONE) return;
    has_p = ps_has(p, PRIMARY);
    has_s = ps_has(p, SECONDARY);
    if (s2 < -2) {
        remove_cp(p, PRIMARY);
        remove_cp(p, SECONDARY);
    } else if (s2 == -2 || ((s2 == 0 || s2 == -1) && has_p)) {
        remove_cp(p, SECONDARY);
        replace_cp(p, PRIMARY, SECONDARY);
    } else if ((s2 == 0 || s2 == 1 || s2 == 2) && !has_p && !has_s) {
        insert_before_first_vowel(p, SECONDARY);
    } else if (s2 >= 2 && !has_p && has_s) {
        replace_cp(p, SECONDARY, PRIMARY);
    } else if (s2 > 2 && !has_p && !has_s) {
        insert_before_first_vowel(p, PRIMARY);
    }
}

static int stress_weight(const ps *p) {
    int w = 0;
    for (int i = 0; i < p->n; i++) w += in_set(p->c[i], "AIOQWYʤʧ") ? 2 : 1;
    return w;
}

/* ---- the lexicon file ------------------------------------------------------ */

typedef struct {
    const char *text; /* key NUL value NUL records */
    uint64_t size;
    const int32_t *index;
    uint64_t n;
} table;

struct ez_g2p_en {
    ez_gguf *file;
    table gold, silver;
    int british;
};

/* Which code points below 0x2000 a phoneme value may hold: the vocabulary,
 * plus the syntax of a "{TAG=ps;...}" value. */
#define VOCAB_LIMIT 0x2000
static void vocab_map(const char *vocab, unsigned char *ok) {
    size_t i = 0, n = strlen(vocab);
    uint32_t c;
    memset(ok, 0, VOCAB_LIMIT);
    while (i < n) {
        utf8_decode(vocab, n, &i, &c);
        if (c < VOCAB_LIMIT) ok[c] = 1;
    }
}

static int32_t load_table(ez_gguf *f, const char *name, const char *vocab, table *t) {
    static const char syntax[] = "{}=;ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    unsigned char ok[VOCAB_LIMIT], ok_dict[VOCAB_LIMIT];
    char tn[64], in[64];
    const ez_gguf_tensor *text, *index;
    snprintf(tn, sizeof tn, "lexicon.%s.text", name);
    snprintf(in, sizeof in, "lexicon.%s.index", name);
    text = ez_gguf_find_tensor(f, tn);
    index = ez_gguf_find_tensor(f, in);
    if (!text || !index || text->type != EZ_TYPE_I8 || index->type != EZ_TYPE_I32 || text->n_dims != 1 ||
        index->n_dims != 1)
        return ez_fail(ELIZA_E_FORMAT, "English lexicon: tensors %s (I8) and %s (I32) are missing or mistyped",
                       tn, in);
    t->text = (const char *)text->data;
    t->size = text->n_elements;
    t->index = (const int32_t *)(const void *)index->data;
    t->n = index->n_elements;
    vocab_map(vocab, ok);
    memcpy(ok_dict, ok, sizeof ok);
    for (const char *c = syntax; *c; c++) ok_dict[(unsigned char)*c] = 1;
    if (t->size == 0 || t->text[t->size - 1] != '\0')
        return ez_fail(ELIZA_E_FORMAT, "English lexicon %s: the text does not end with a NUL byte", name);
    for (uint64_t i = 0; i < t->n; i++) {
        int32_t o = t->index[i];
        const char *key, *val;
        size_t kn, vn, j = 0;
        uint32_t c;
        if (o < 0 || (uint64_t)o >= t->size)
            return ez_fail(ELIZA_E_FORMAT, "English lexicon %s: record %" PRIu64 " at offset %d is outside the "
                           "%" PRIu64 " bytes of text", name, i, (int)o, t->size);
        key = t->text + o;
        kn = strlen(key);
        if ((uint64_t)o + kn + 1 >= t->size)
            return ez_fail(ELIZA_E_FORMAT, "English lexicon %s: record %" PRIu64 " has no value", name, i);
        val = key + kn + 1;
        vn = strlen(val);
        if (i && strcmp(t->text + t->index[i - 1], key) >= 0)
            return ez_fail(ELIZA_E_FORMAT, "English lexicon %s: key '%.64s' is out of order", name, key);
        while (j < vn) {
            if (!utf8_decode(val, vn, &j, &c) || c >= VOCAB_LIMIT || !(val[0] == '{' ? ok_dict : ok)[c])
                return ez_fail(ELIZA_E_FORMAT, "English lexicon %s: '%.64s' -> '%.128s' holds a symbol outside "
                               "misaki's %s phonemes (U+%04X)", name, key, val, vocab == VOCAB_GB ? "British"
                               : "American", (unsigned)c);
        }
    }
    return ELIZA_OK;
}

int32_t ez_g2p_en_open(const char *path, int british, ez_g2p_en **out) {
    ez_g2p_en *en;
    int32_t rc;
    ez_str arch;
    if (!path || !out) return ez_fail(ELIZA_E_INVALID_ARG, "English G2P: NULL lexicon path or output");
    *out = NULL;
    en = (ez_g2p_en *)calloc(1, sizeof *en);
    if (!en) return ez_fail(ELIZA_E_NOMEM, "out of memory opening the English G2P");
    en->british = british;
    rc = ez_gguf_open(path, &en->file);
    if (rc == ELIZA_OK && (ez_gguf_get_str(en->file, "general.architecture", &arch) != ELIZA_OK ||
                           arch.len != 9 || memcmp(arch.ptr, "misaki-en", 9) != 0))
        rc = ez_fail(ELIZA_E_FORMAT, "'%s' is not an English lexicon (general.architecture is not misaki-en; "
                     "write one with `python -m eliza.convert lexicon`)", path);
    if (rc == ELIZA_OK)
        rc = load_table(en->file, british ? "gb_gold" : "us_gold", british ? VOCAB_GB : VOCAB_US, &en->gold);
    if (rc == ELIZA_OK)
        rc = load_table(en->file, british ? "gb_silver" : "us_silver", british ? VOCAB_GB : VOCAB_US, &en->silver);
    if (rc < 0) {
        ez_g2p_en_close(en);
        return rc;
    }
    *out = en;
    return ELIZA_OK;
}

void ez_g2p_en_close(ez_g2p_en *en) {
    if (!en) return;
    ez_gguf_close(en->file);
    free(en);
}

static const char *find_exact(const table *t, const char *key) {
    uint64_t lo = 0, hi = t->n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        const char *k = t->text + t->index[mid];
        int c = strcmp(k, key);
        if (c == 0) return k + strlen(k) + 1;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static int is_lower_ascii(char c) { return c >= 'a' && c <= 'z'; }
static int is_upper_ascii(char c) { return c >= 'A' && c <= 'Z'; }
static char lower_c(char c) { return is_upper_ascii(c) ? (char)(c + 32) : c; }
static char upper_c(char c) { return is_lower_ascii(c) ? (char)(c - 32) : c; }

static void to_lower(const char *w, char *o) {
    size_t i = 0;
    for (; w[i]; i++) o[i] = lower_c(w[i]);
    o[i] = '\0';
}

static void capitalize(const char *w, char *o) {
    size_t i = 0;
    for (; w[i]; i++) o[i] = i ? lower_c(w[i]) : upper_c(w[i]);
    o[i] = '\0';
}

static int eq_lower(const char *w) {
    for (; *w; w++)
        if (is_upper_ascii(*w)) return 0;
    return 1;
}

static int eq_upper(const char *w) {
    for (; *w; w++)
        if (is_lower_ascii(*w)) return 0;
    return 1;
}

/* A key of misaki's grown dictionary: the table's own, else the form
 * grow_dictionary derives from a capitalised or lowercase key. */
static const char *find(const table *t, const char *key) {
    char alt[WORD_MAX];
    const char *v = find_exact(t, key);
    size_t n = strlen(key);
    if (v || n < 2 || n >= WORD_MAX) return v;
    if (eq_lower(key)) {
        capitalize(key, alt);
        return strcmp(alt, key) != 0 ? find_exact(t, alt) : NULL;
    }
    capitalize(key, alt);
    if (strcmp(alt, key) != 0) return NULL;
    to_lower(key, alt);
    v = find_exact(t, alt);
    /* grow_dictionary only adds the lowercase form's capitalisation when
     * that lowercase form is itself lowercase and differs from it */
    return v;
}

/* ---- tokens ----------------------------------------------------------------- */

typedef struct {
    char text[WORD_MAX];
    const char *tag;     /* spaCy-style tag, "" for none */
    int ws;              /* whitespace follows */
    int currency;        /* 0, or the currency mark: '$', 'L' (£), 'E' (€) */
    int prespace;
    int head;            /* misaki's is_head: not a later piece of a word group */
    int alias_to;        /* misaki's alias 'to' for a "2" between letters (Y2K) */
    ps ph;               /* ph.ok = 0: phonemes not yet known (None) */
} token;

typedef struct {
    int future_vowel; /* -1 None, 0 False, 1 True */
    int future_to;
} context;

typedef struct {
    const ez_g2p_en *en;
    ez_g2p_espeak_fn espeak;
    void *ctx;
    int32_t rc;
} g2p;

static int tag_is(const char *tag, const char *t) { return tag && strcmp(tag, t) == 0; }
static int tag_starts(const char *tag, const char *p) { return tag && strncmp(tag, p, strlen(p)) == 0; }

static const char *parent_tag(const char *tag) {
    if (!tag) return NULL;
    if (tag_starts(tag, "VB")) return "VERB";
    if (tag_starts(tag, "NN")) return "NOUN";
    if (tag_starts(tag, "ADV") || tag_starts(tag, "RB")) return "ADV";
    if (tag_starts(tag, "ADJ") || tag_starts(tag, "JJ")) return "ADJ";
    return tag;
}

/* The entry for `tag` of a value "{TAG=ps;...}"; NULL when it has none. */
static int dict_entry(const char *v, const char *tag, ps *out) {
    size_t tn = tag ? strlen(tag) : 0;
    const char *p = v + 1;
    if (!tag) return 0;
    while (*p && *p != '}') {
        const char *eq = strchr(p, '='), *end = eq ? strpbrk(eq, ";}") : NULL;
        if (!eq || !end) return 0;
        if ((size_t)(eq - p) == tn && memcmp(p, tag, tn) == 0) {
            if (end == eq + 1) ps_none(out);
            else ps_utf8(out, eq + 1, (size_t)(end - eq - 1));
            return 1;
        }
        p = *end == ';' ? end + 1 : end;
    }
    return 0;
}

static int dict_has(const char *v, const char *tag) {
    ps tmp;
    return dict_entry(v, tag, &tmp);
}

static void get_nnp(const g2p *g, const char *word, ps *out);

/* Lexicon.lookup */
static void lookup(const g2p *g, const char *word_in, const char *tag, int s2, const context *ctx, ps *out) {
    char word[WORD_MAX];
    int is_nnp = 0;
    const char *v;
    if (strlen(word_in) >= WORD_MAX) {
        ps_none(out);
        return;
    }
    strcpy(word, word_in);
    if (eq_upper(word) && !find(&g->en->gold, word)) {
        to_lower(word_in, word);
        is_nnp = tag_is(tag, "NNP");
    }
    v = find(&g->en->gold, word);
    if (!v && !is_nnp) v = find(&g->en->silver, word);
    ps_none(out);
    if (v && v[0] == '{') {
        const char *t = tag;
        if (ctx && ctx->future_vowel == -1 && dict_has(v, "None")) t = "None";
        else if (!t || !dict_has(v, t)) t = parent_tag(t);
        if (!dict_entry(v, t, out)) dict_entry(v, "DEFAULT", out);
    } else if (v) {
        ps_str(out, v);
    }
    if (!out->ok || (is_nnp && !ps_has(out, PRIMARY))) {
        ps nnp;
        get_nnp(g, word, &nnp);
        if (nnp.ok) {
            *out = nnp;
            return;
        }
    }
    apply_stress(out, s2);
}

/* Lexicon.get_NNP: the word spelt letter by letter. */
static void get_nnp(const g2p *g, const char *word, ps *out) {
    out->n = 0;
    out->ok = 1;
    for (const char *c = word; *c; c++) {
        char up[2] = {upper_c(*c), 0};
        const char *v;
        if (!is_lower_ascii(*c) && !is_upper_ascii(*c)) {
            if ((unsigned char)*c >= 0x80) {
                ps_none(out);
                return;
            }
            continue;
        }
        v = find(&g->en->gold, up);
        if (!v || v[0] == '{') {
            ps_none(out);
            return;
        }
        ps_cat_str(out, v);
    }
    apply_stress(out, 0);
    for (int i = out->n - 1; i >= 0; i--)
        if (out->c[i] == SECONDARY) {
            out->c[i] = PRIMARY;
            break;
        }
}

static int is_alpha_word(const char *w) {
    if (!*w) return 0;
    for (; *w; w++)
        if (!is_lower_ascii(*w) && !is_upper_ascii(*w) && (unsigned char)*w < 0x80) return 0;
    return 1;
}

/* every character among LEXICON_ORDS: ' - A-Z a-z */
static int lexicon_ords(const char *w) {
    for (; *w; w++)
        if (!is_lower_ascii(*w) && !is_upper_ascii(*w) && *w != '\'' && *w != '-') return 0;
    return 1;
}

static int is_symbol(const char *w) {
    return strcmp(w, "%") == 0 || strcmp(w, "&") == 0 || strcmp(w, "+") == 0 || strcmp(w, "@") == 0;
}

static const char *symbol_name(const char *w) {
    switch (w[0]) {
    case '%': return "percent";
    case '&': return "and";
    case '+': return "plus";
    default: return "at";
    }
}

/* Lexicon.is_known */
static int is_known(const g2p *g, const char *w) {
    char low[WORD_MAX];
    if (find(&g->en->gold, w) || is_symbol(w) || find(&g->en->silver, w)) return 1;
    /* not w.isalpha() or not all(ord(c) in LEXICON_ORDS): w.isalpha() fails on ' and - */
    if (!is_alpha_word(w) || !lexicon_ords(w)) return 0;
    if (strlen(w) == 1) return 1;
    to_lower(w, low);
    if (eq_upper(w) && find(&g->en->gold, low)) return 1;
    return eq_upper(w + 1);
}

static int last_is(const ps *p, const char *set) { return p->n && in_set(p->c[p->n - 1], set); }

/* Lexicon._s */
static void suffix_s(const g2p *g, ps *p) {
    if (!p->ok || !p->n) {
        ps_none(p);
        return;
    }
    if (last_is(p, "ptkfθ")) ps_push(p, 's');
    else if (last_is(p, "szʃʒʧʤ")) {
        ps_cat_str(p, g->en->british ? "ɪ" : "ᵻ");
        ps_push(p, 'z');
    } else ps_push(p, 'z');
}

/* Lexicon._ed */
static void suffix_ed(const g2p *g, ps *p) {
    if (!p->ok || !p->n) {
        ps_none(p);
        return;
    }
    if (last_is(p, "pkfθʃsʧ")) ps_push(p, 't');
    else if (last_is(p, "d")) {
        ps_cat_str(p, g->en->british ? "ɪ" : "ᵻ");
        ps_push(p, 'd');
    } else if (!last_is(p, "t")) ps_push(p, 'd');
    else if (g->en->british || p->n < 2) ps_cat_str(p, "ɪd");
    else if (in_set(p->c[p->n - 2], US_TAUS)) {
        p->n--;
        ps_cat_str(p, "ɾᵻd");
    } else ps_cat_str(p, "ᵻd");
}

/* Lexicon._ing */
static void suffix_ing(const g2p *g, ps *p) {
    if (!p->ok || !p->n) {
        ps_none(p);
        return;
    }
    if (g->en->british) {
        if (last_is(p, "əː")) {
            ps_none(p);
            return;
        }
    } else if (p->n > 1 && last_is(p, "t") && in_set(p->c[p->n - 2], US_TAUS)) {
        p->n--;
        ps_cat_str(p, "ɾɪŋ");
        return;
    }
    ps_cat_str(p, "ɪŋ");
}

static int ends(const char *w, const char *s) {
    size_t n = strlen(w), k = strlen(s);
    return n >= k && memcmp(w + n - k, s, k) == 0;
}

static void cut(const char *w, size_t drop, const char *add, char *o) {
    size_t n = strlen(w) - drop;
    memcpy(o, w, n);
    strcpy(o + n, add);
}

static void stem_s(const g2p *g, const char *w, const char *tag, int s2, const context *ctx, ps *out) {
    char stem[WORD_MAX + 2];
    size_t n = strlen(w);
    ps_none(out);
    if (n < 3 || !ends(w, "s")) return;
    cut(w, 1, "", stem);
    if (!ends(w, "ss") && is_known(g, stem)) {
    } else if ((cut(w, 2, "", stem), (ends(w, "'s") || (n > 4 && ends(w, "es") && !ends(w, "ies")))) &&
               is_known(g, stem)) {
    } else if (n > 4 && ends(w, "ies") && (cut(w, 3, "y", stem), is_known(g, stem))) {
    } else {
        return;
    }
    lookup(g, stem, tag, s2, ctx, out);
    suffix_s(g, out);
}

static void stem_ed(const g2p *g, const char *w, const char *tag, int s2, const context *ctx, ps *out) {
    char stem[WORD_MAX + 2];
    size_t n = strlen(w);
    ps_none(out);
    if (n < 4 || !ends(w, "d")) return;
    cut(w, 1, "", stem);
    if (!ends(w, "dd") && is_known(g, stem)) {
    } else if (n > 4 && ends(w, "ed") && !ends(w, "eed") && (cut(w, 2, "", stem), is_known(g, stem))) {
    } else {
        return;
    }
    lookup(g, stem, tag, s2, ctx, out);
    suffix_ed(g, out);
}

/* ([bcdgklmnprstvxz])\1ing$|cking$ */
static int doubled_ing(const char *w) {
    size_t n = strlen(w);
    if (ends(w, "cking")) return 1;
    return n >= 5 && ends(w, "ing") && w[n - 4] == w[n - 5] && strchr("bcdgklmnprstvxz", w[n - 4]) && w[n - 4];
}

static void stem_ing(const g2p *g, const char *w, const char *tag, int s2, const context *ctx, ps *out) {
    char stem[WORD_MAX + 2];
    size_t n = strlen(w);
    ps_none(out);
    if (n < 5 || !ends(w, "ing")) return;
    cut(w, 3, "", stem);
    if (n > 5 && is_known(g, stem)) {
    } else if ((cut(w, 3, "e", stem), is_known(g, stem))) {
    } else if (n > 5 && doubled_ing(w) && (cut(w, 4, "", stem), is_known(g, stem))) {
    } else {
        return;
    }
    lookup(g, stem, tag, s2, ctx, out);
    suffix_ing(g, out);
}

/* Lexicon.get_special_case; 1 when it decided (out may still be None). */
static int special_case(const g2p *g, const char *w, const char *tag, int s2, const context *ctx, ps *out) {
    const char *dot = strchr(w, '.');
    if (is_symbol(w)) {
        lookup(g, symbol_name(w), NULL, STRESS_NONE, ctx, out);
        return 1;
    }
    if (dot) {
        /* '.' in word.strip('.') and word.replace('.', '').isalpha() and
         * every part between periods shorter than 3 */
        size_t n = strlen(w), a = 0, b = n, run = 0, longest = 0, letters = 0;
        int inner = 0, alpha = 1;
        while (a < n && w[a] == '.') a++;
        while (b > a && w[b - 1] == '.') b--;
        for (size_t i = a; i < b; i++) inner |= w[i] == '.';
        for (size_t i = 0; i < n; i++) {
            if (w[i] == '.') {
                run = 0;
                continue;
            }
            letters++;
            if (!is_lower_ascii(w[i]) && !is_upper_ascii(w[i])) alpha = 0;
            if (++run > longest) longest = run;
        }
        if (inner && alpha && letters && longest < 3) {
            get_nnp(g, w, out);
            return 1;
        }
    }
    if (strcmp(w, "a") == 0 || strcmp(w, "A") == 0) {
        ps_str(out, tag_is(tag, "DT") ? "ɐ" : "ˈA");
        return 1;
    }
    if (strcmp(w, "am") == 0 || strcmp(w, "Am") == 0 || strcmp(w, "AM") == 0) {
        if (tag_starts(tag, "NN")) get_nnp(g, w, out);
        else if (ctx->future_vowel == -1 || strcmp(w, "am") != 0 || (s2 != STRESS_NONE && s2 > 0))
            lookup(g, "am", NULL, STRESS_NONE, NULL, out);
        else ps_str(out, "ɐm");
        return 1;
    }
    if (strcmp(w, "an") == 0 || strcmp(w, "An") == 0 || strcmp(w, "AN") == 0) {
        if (strcmp(w, "AN") == 0 && tag_starts(tag, "NN")) get_nnp(g, w, out);
        else ps_str(out, "ɐn");
        return 1;
    }
    if (strcmp(w, "I") == 0 && tag_is(tag, "PRP")) {
        ps_str(out, "ˌI");
        return 1;
    }
    if ((strcmp(w, "by") == 0 || strcmp(w, "By") == 0 || strcmp(w, "BY") == 0) && tag_is(parent_tag(tag), "ADV")) {
        ps_str(out, "bˈI");
        return 1;
    }
    if (strcmp(w, "to") == 0 || strcmp(w, "To") == 0 ||
        (strcmp(w, "TO") == 0 && (tag_is(tag, "TO") || tag_is(tag, "IN")))) {
        if (ctx->future_vowel == -1) lookup(g, "to", NULL, STRESS_NONE, NULL, out);
        else ps_str(out, ctx->future_vowel ? "tʊ" : "tə");
        return 1;
    }
    if (strcmp(w, "in") == 0 || strcmp(w, "In") == 0 || (strcmp(w, "IN") == 0 && !tag_is(tag, "NNP"))) {
        const char *s = ctx->future_vowel == -1 || !tag_is(tag, "IN") ? "ˈɪn" : "ɪn";
        ps_str(out, s);
        return 1;
    }
    if (strcmp(w, "the") == 0 || strcmp(w, "The") == 0 || (strcmp(w, "THE") == 0 && tag_is(tag, "DT"))) {
        ps_str(out, ctx->future_vowel == 1 ? "ði" : "ðə");
        return 1;
    }
    if (tag_is(tag, "IN") && (lower_c(w[0]) == 'v' && lower_c(w[1]) == 's' && (!w[2] || (w[2] == '.' && !w[3])))) {
        lookup(g, "versus", NULL, STRESS_NONE, ctx, out);
        return 1;
    }
    if (strcmp(w, "used") == 0 || strcmp(w, "Used") == 0 || strcmp(w, "USED") == 0) {
        const char *v = find(&g->en->gold, "used");
        ps_none(out);
        if (v && v[0] == '{')
            dict_entry(v, (tag_is(tag, "VBD") || tag_is(tag, "JJ")) && ctx->future_to ? "VBD" : "DEFAULT", out);
        return 1;
    }
    return 0;
}

static void get_word(const g2p *g, const char *word_in, const char *tag, int s2, const context *ctx, ps *out) {
    char word[WORD_MAX + 2], wl[WORD_MAX + 2], nap[WORD_MAX + 2];
    size_t n = strlen(word_in), k = 0;
    if (n >= WORD_MAX) {
        ps_none(out);
        return;
    }
    if (special_case(g, word_in, tag, s2, ctx, out)) return;
    strcpy(word, word_in);
    to_lower(word, wl);
    for (size_t i = 0; i < n; i++)
        if (word[i] != '\'') nap[k++] = word[i];
    nap[k] = '\0';
    if (n > 1 && is_alpha_word(nap) && strcmp(word, wl) != 0 && (!tag_is(tag, "NNP") || n > 7) &&
        !find(&g->en->gold, word) && !find(&g->en->silver, word) && (eq_upper(word) || eq_lower(word + 1))) {
        int ok = find(&g->en->gold, wl) || find(&g->en->silver, wl);
        if (!ok) {
            ps t;
            stem_s(g, wl, tag, s2, ctx, &t);
            if (!t.ok) stem_ed(g, wl, tag, s2, ctx, &t);
            if (!t.ok) stem_ing(g, wl, tag, s2, ctx, &t);
            ok = t.ok && t.n > 0;
        }
        if (ok) strcpy(word, wl);
    }
    n = strlen(word);
    if (is_known(g, word)) {
        lookup(g, word, tag, s2, ctx, out);
        return;
    }
    if (ends(word, "s'")) {
        cut(word, 2, "'s", wl);
        if (is_known(g, wl)) {
            lookup(g, wl, tag, s2, ctx, out);
            return;
        }
    }
    if (ends(word, "'")) {
        cut(word, 1, "", wl);
        if (is_known(g, wl)) {
            lookup(g, wl, tag, s2, ctx, out);
            return;
        }
    }
    stem_s(g, word, tag, s2, ctx, out);
    if (out->ok) return;
    stem_ed(g, word, tag, s2, ctx, out);
    if (out->ok) return;
    stem_ing(g, word, tag, s2 == STRESS_NONE ? 1 : s2, ctx, out);
}

/* ---- numbers ------------------------------------------------------------------ */

static int is_digits(const char *s, size_t n) {
    if (!n) return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

static int has_digit(const char *s) {
    for (; *s; s++)
        if (*s >= '0' && *s <= '9') return 1;
    return 0;
}

/* Lexicon.is_number */
static int is_number(const char *w, int head) {
    static const char *const sfx[] = {"ing", "'d", "ed", "'s", "st", "nd", "rd", "th", "s"};
    size_t n = strlen(w);
    if (!has_digit(w)) return 0;
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++)
        if (ends(w, sfx[i])) {
            n -= strlen(sfx[i]);
            break;
        }
    for (size_t i = 0; i < n; i++)
        if (!(w[i] >= '0' && w[i] <= '9') && w[i] != ',' && w[i] != '.' && !(head && i == 0 && w[i] == '-'))
            return 0;
    return 1;
}

static void join_word(ps *acc, const ps *p) {
    if (!p->ok) {
        ps_none(acc);
        return;
    }
    if (acc->n) ps_push(acc, ' ');
    ps_cat(acc, p);
}

/* extend_num on num2words' text: each word but "and" looked up */
static void extend_words(const g2p *g, const char *text, ps *acc) {
    char w[64];
    const char *p = text;
    while (*p && acc->ok) {
        size_t k = 0;
        while (*p == ' ') p++;
        while (*p && *p != ' ' && k < sizeof w - 1) w[k++] = *p++;
        w[k] = '\0';
        if (!k || strcmp(w, "and") == 0) continue;
        {
            ps t;
            lookup(g, w, NULL, strcmp(w, "point") == 0 ? -4 : STRESS_NONE, NULL, &t);
            join_word(acc, &t);
        }
    }
}

static void extend_num(const g2p *g, int kind, const char *digits, ps *acc) {
    char text[1024];
    if (!ez_g2p_en_number_words(kind, digits, text, sizeof text)) {
        ps_none(acc);
        return;
    }
    extend_words(g, text, acc);
}

static const char *const CURRENCY_UNITS[][2] = {{"dollar", "cent"}, {"pound", "pence"}, {"euro", "cent"}};

static int currency_index(int c) { return c == '$' ? 0 : c == 'L' ? 1 : 2; }

/* Lexicon.get_number */
static void get_number(const g2p *g, const char *word_in, int currency, int head, ps *out) {
    char word[WORD_MAX], plain[WORD_MAX], suffix[WORD_MAX] = "";
    size_t n = strlen(word_in), s = n, k = 0;
    int ordinal;
    out->n = 0;
    out->ok = 1;
    while (s > 0 && (is_lower_ascii(word_in[s - 1]) || word_in[s - 1] == '\'')) s--;
    memcpy(suffix, word_in + s, n - s + 1);
    memcpy(word, word_in, s);
    word[s] = '\0';
    if (word[0] == '-') {
        ps t;
        lookup(g, "minus", NULL, STRESS_NONE, NULL, &t);
        join_word(out, &t);
        memmove(word, word + 1, strlen(word));
    }
    for (const char *p = word; *p; p++)
        if (*p != ',') plain[k++] = *p;
    plain[k] = '\0';
    ordinal = strcmp(suffix, "st") == 0 || strcmp(suffix, "nd") == 0 || strcmp(suffix, "rd") == 0 ||
              strcmp(suffix, "th") == 0;
    if (is_digits(word, strlen(word)) && ordinal) {
        extend_num(g, 'o', word, out);
    } else if (out->n == 0 && strlen(word) == 4 && !currency && is_digits(word, 4)) {
        extend_num(g, 'y', word, out);
    } else if (!head && !strchr(word, '.')) {
        size_t m = strlen(plain);
        if (plain[0] == '0' || m > 3) {
            for (size_t i = 0; i < m; i++) {
                char d[2] = {plain[i], 0};
                extend_num(g, 'c', d, out);
            }
        } else if (m == 3 && !ends(plain, "00")) {
            char d[3] = {plain[0], 0, 0};
            extend_num(g, 'c', d, out);
            if (plain[1] == '0') {
                ps t;
                lookup(g, "O", NULL, -4, NULL, &t);
                join_word(out, &t);
                d[0] = plain[2];
            } else {
                d[0] = plain[1];
                d[1] = plain[2];
            }
            extend_num(g, 'c', d, out);
        } else {
            extend_num(g, 'c', plain, out);
        }
    } else if ((strchr(word, '.') && strchr(word, '.') != strrchr(word, '.')) || !head) {
        const char *p = plain;
        while (out->ok) {
            const char *e = strchr(p, '.');
            size_t m = e ? (size_t)(e - p) : strlen(p);
            char part[WORD_MAX];
            memcpy(part, p, m);
            part[m] = '\0';
            if (!m) {
            } else if (part[0] == '0' || (m != 2 && strspn(part + 1, "0") != m - 1)) {
                for (size_t i = 0; i < m; i++) {
                    char d[2] = {part[i], 0};
                    extend_num(g, 'c', d, out);
                }
            } else {
                extend_num(g, 'c', part, out);
            }
            if (!e) break;
            p = e + 1;
        }
    } else if (currency && (!strchr(word, '.') || strlen(strchr(word, '.') + 1) < 3)) {
        const char *const *units = CURRENCY_UNITS[currency_index(currency)];
        char whole[WORD_MAX], cents[WORD_MAX] = "";
        const char *dot = strchr(plain, '.');
        unsigned long long v[2] = {0, 0};
        int np = dot ? 2 : 1, first = 0, last = np;
        size_t wn = dot ? (size_t)(dot - plain) : strlen(plain);
        memcpy(whole, plain, wn);
        whole[wn] = '\0';
        if (dot) strcpy(cents, dot + 1);
        for (size_t i = 0; whole[i]; i++) v[0] = v[0] * 10 + (unsigned)(whole[i] - '0');
        for (size_t i = 0; cents[i]; i++) v[1] = v[1] * 10 + (unsigned)(cents[i] - '0');
        if (np > 1) {
            if (v[1] == 0) last = 1;
            else if (v[0] == 0) first = 1;
        }
        for (int i = first; i < last && out->ok; i++) {
            char digits[32];
            ps t;
            if (i > first) {
                lookup(g, "and", NULL, STRESS_NONE, NULL, &t);
                join_word(out, &t);
            }
            snprintf(digits, sizeof digits, "%llu", v[i]);
            extend_num(g, 'c', digits, out);
            if (v[i] != 1 && strcmp(units[i], "pence") != 0) {
                char plural[16];
                snprintf(plural, sizeof plural, "%ss", units[i]);
                stem_s(g, plural, NULL, STRESS_NONE, NULL, &t);
            } else {
                lookup(g, units[i], NULL, STRESS_NONE, NULL, &t);
            }
            join_word(out, &t);
        }
    } else if (!strchr(plain, '.')) {
        extend_num(g, ordinal ? 'o' : 'c', plain, out);
    } else if (plain[0] == '.') {
        ps t;
        lookup(g, "point", NULL, -4, NULL, &t);
        join_word(out, &t);
        for (const char *p = plain + 1; *p && out->ok; p++) {
            char d[2] = {*p, 0};
            if (*p < '0' || *p > '9') {
                ps_none(out);
                break;
            }
            extend_num(g, 'c', d, out);
        }
    } else {
        extend_num(g, 'f', plain, out);
    }
    if (!out->ok || out->n == 0) {
        ps_none(out);
        return;
    }
    if (strcmp(suffix, "s") == 0 || strcmp(suffix, "'s") == 0) suffix_s(g, out);
    else if (strcmp(suffix, "ed") == 0 || strcmp(suffix, "'d") == 0) suffix_ed(g, out);
    else if (strcmp(suffix, "ing") == 0) suffix_ing(g, out);
}

/* Lexicon.__call__ */
static void lexicon_call(const g2p *g, const token *tk, const context *ctx, ps *out) {
    const char *w = tk->text;
    int s2 = eq_lower(w) ? STRESS_NONE : eq_upper(w) ? 4 : 1;
    get_word(g, w, tk->tag, s2, ctx, out);
    if (out->ok) {
        if (tk->currency) {
            char plural[16];
            ps t;
            snprintf(plural, sizeof plural, "%ss", CURRENCY_UNITS[currency_index(tk->currency)][0]);
            stem_s(g, plural, NULL, STRESS_NONE, NULL, &t);
            if (t.ok) {
                ps_push(out, ' ');
                ps_cat(out, &t);
            }
        }
        return;
    }
    if (is_number(w, tk->head)) get_number(g, w, tk->currency, tk->head, out);
}

/* ---- espeak-ng fallback (misaki's EspeakFallback) ------------------------------- */

typedef struct {
    const char *from, *to;
} e2m;

/* E2M sorted by decreasing length as misaki sorts it (stable) */
static const e2m E2M[] = {
    {"ʔˌn\xcc\xa9", "ʔn"}, {"ʔn\xcc\xa9", "ʔn"}, {"a^ɪ", "I"}, {"a^ʊ", "W"}, {"d^ʒ", "ʤ"}, {"e^ɪ", "A"},
    {"t^ʃ", "ʧ"}, {"ɔ^ɪ", "Y"}, {"ə^l", "ᵊl"}, {"ʲo", "jo"}, {"ʲə", "jə"}, {"e", "A"}, {"ʲ", ""},
    {"ɚ", "əɹ"}, {"r", "ɹ"}, {"x", "k"}, {"ç", "k"}, {"ɐ", "ə"}, {"ɬ", "l"}, {"\xcc\x83", ""},
};

static void replace_seq(ps *p, const char *from, const char *to) {
    ps f, t, r;
    ps_str(&f, from);
    ps_str(&t, to);
    r.n = 0;
    r.ok = 1;
    for (int i = 0; i < p->n;) {
        if (i + f.n <= p->n && memcmp(p->c + i, f.c, (size_t)f.n * sizeof f.c[0]) == 0) {
            ps_cat(&r, &t);
            i += f.n;
        } else {
            ps_push(&r, p->c[i++]);
        }
    }
    *p = r;
}

/* phonemizer's punctuation marks, kept verbatim around what espeak says */
static int phonemizer_mark(uint32_t c) { return in_set(c, ";:,.!?¡¿—…\"«»“”(){}[]"); }

/* espeak-ng on one piece of text without marks, post-processed as
 * phonemizer does: lines joined, '_' word marks dropped, runs of spaces
 * squeezed, stripped; the U+0361 tie written '^'. */
static void espeak_piece(g2p *g, const char *text, ps *out) {
    ez_strbuf raw = {0};
    int32_t rc = g->espeak(g->ctx, text, &raw);
    int k = 0;
    ps p;
    ps_none(out);
    if (rc < 0) {
        g->rc = rc;
        ez_sb_free(&raw);
        return;
    }
    ps_utf8(&p, raw.data ? raw.data : "", raw.len);
    ez_sb_free(&raw);
    for (int i = 0; i < p.n; i++) {
        uint32_t c = p.c[i] == '\n' ? ' ' : p.c[i];
        if (c == '_') continue;
        if (c == ' ' && (k == 0 || p.c[k - 1] == ' ')) continue;
        p.c[k++] = c == 0x361 ? '^' : c;
    }
    while (k && p.c[k - 1] == ' ') k--;
    p.n = k;
    *out = p;
}

/* EspeakFallback.__call__ */
static void fallback(g2p *g, const char *text, ps *out) {
    size_t n = strlen(text), i = 0;
    ps p;
    ps_none(out);
    if (!g->espeak) return;
    ps_str(&p, "");
    /* phonemizer's preserve_punctuation: the text between runs of marks
     * phonemized alone, the runs put back as they were */
    while (i < n && p.ok && g->rc == ELIZA_OK) {
        size_t j = i, k;
        uint32_t c;
        int mark;
        utf8_decode(text, n, &j, &c);
        mark = phonemizer_mark(c);
        for (j = i; j < n;) {
            size_t q = j;
            utf8_decode(text, n, &q, &c);
            if (phonemizer_mark(c) != mark) break;
            j = q;
        }
        if (mark) {
            for (k = i; k < j;) {
                utf8_decode(text, n, &k, &c);
                ps_push(&p, c);
            }
        } else {
            char piece_[WORD_MAX * 4];
            ps q;
            size_t m = j - i < sizeof piece_ - 1 ? j - i : sizeof piece_ - 1;
            memcpy(piece_, text + i, m);
            piece_[m] = '\0';
            espeak_piece(g, piece_, &q);
            if (!q.ok) return;
            ps_cat(&p, &q);
        }
        i = j;
    }
    if (!p.ok || g->rc < 0) return;
    for (size_t e = 0; e < sizeof E2M / sizeof E2M[0]; e++) replace_seq(&p, E2M[e].from, E2M[e].to);
    /* re.sub(r'(\S)\u0329', r'ᵊ\1'), then the remaining U+0329 dropped */
    for (int e = 1; e < p.n; e++)
        if (p.c[e] == 0x329 && p.c[e - 1] != ' ') {
            p.c[e] = p.c[e - 1];
            p.c[e - 1] = 0x1D4A;
        }
    remove_cp(&p, 0x329);
    if (g->en->british) {
        replace_seq(&p, "e^ə", "ɛː");
        replace_seq(&p, "iə", "ɪə");
        replace_seq(&p, "ə^ʊ", "Q");
    } else {
        replace_seq(&p, "o^ʊ", "O");
        replace_seq(&p, "ɜːɹ", "ɜɹ");
        replace_seq(&p, "ɜː", "ɜɹ");
        replace_seq(&p, "ɪə", "iə");
        remove_cp(&p, 0x2D0);
    }
    replace_cp(&p, 'o', 0x254);
    remove_cp(&p, '^');
    *out = p;
}

/* ---- tokenizer and tagger --------------------------------------------------------- */

typedef struct {
    token *t;
    int n, cap;
} tokens;

static token *push_token(tokens *ts) {
    if (ts->n == ts->cap) {
        int cap = ts->cap ? ts->cap * 2 : 64;
        token *t = (token *)realloc(ts->t, (size_t)cap * sizeof *t);
        if (!t) return NULL;
        ts->t = t;
        ts->cap = cap;
    }
    memset(&ts->t[ts->n], 0, sizeof ts->t[0]);
    ts->t[ts->n].tag = "";
    ts->t[ts->n].head = 1;
    return &ts->t[ts->n++];
}

static int in_list(const char *w, const char *const *k, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(w, k[i]) == 0) return 1;
    return 0;
}

/* Words spaCy 3.8's English tokenizer keeps whole with their final period
 * (its tokenizer exceptions), without the period; and any single letter. */
static int keeps_period(const char *w, size_t n) {
    static const char *const k[] = {
        "Adm", "Ak", "Ala", "Apr", "Ariz", "Ark", "Aug", "Bros", "Calif", "Co", "Colo", "Conn", "Corp", "D.C",
        "Dec", "Del", "Dr", "E.G", "E.g", "Feb", "Fla", "Ga", "Gen", "Gov", "I.E", "I.e", "Ia", "Id", "Ill",
        "Inc", "Ind", "Jan", "Jr", "Jul", "Jun", "Kan", "Kans", "Ky", "La", "Ltd", "Mar", "Mass", "Md",
        "Messrs", "Mich", "Minn", "Miss", "Mo", "Mont", "Mr", "Mrs", "Ms", "Mt", "N.C", "N.D", "N.H", "N.J",
        "N.M", "N.Y", "Neb", "Nebr", "Nev", "Nov", "Oct", "Okla", "Ore", "Pa", "Ph.D", "Prof", "Rep", "Rev",
        "S.C", "Sen", "Sep", "Sept", "St", "Tenn", "Va", "Wash", "Wis", "a.m", "co", "e.g", "i.e", "p.m",
        "v.s", "vs"};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (strlen(k[i]) == n && memcmp(k[i], w, n) == 0) return 1;
    return n == 1 && is_lower_ascii(w[0]);
}

typedef struct {
    const char *s;
    size_t n;
    const char *tag; /* punctuation's tag; NULL for a word */
    int ws;          /* whitespace follows */
} piece;

/* The tag of a punctuation piece, or NULL for a word. */
static const char *punct_tag(const char *s, size_t n, int opening) {
    if (n == 1) switch (s[0]) {
        case '.': case '!': case '?': return ".";
        case ',': return ",";
        case ':': case ';': return ":";
        case '(': case '{': return "-LRB-";
        case ')': case ']': case '}': return "-RRB-";
        case '"': return opening ? "``" : "''";
        case '$': return "$";
        case '#': return "#";
        case '-': return ":";
        default: return NULL;
        }
    if (n == 3 && memcmp(s, "…", 3) == 0) return ":";
    if (n == 3 && (memcmp(s, "—", 3) == 0 || memcmp(s, "–", 3) == 0)) return ":";
    if (n == 3 && memcmp(s, "“", 3) == 0) return "``";
    if (n == 3 && memcmp(s, "”", 3) == 0) return "''";
    if (n == 2 && (memcmp(s, "£", 2) == 0)) return "$";
    if (n == 3 && (memcmp(s, "€", 3) == 0)) return "$";
    if (n >= 2) {
        size_t d = 0;
        while (d < n && s[d] == '.') d++;
        if (d == n) return ":";
    }
    return NULL;
}

static size_t prefix_len(const char *s, size_t n) {
    static const char *const k[] = {"\"", "(", "[", "{", "$", "#", "“", "£", "€", "…", "—", "–", "«", "„"};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        size_t m = strlen(k[i]);
        if (m < n && memcmp(s, k[i], m) == 0) return m;
    }
    return 0;
}

/* An opening single quote: ' or ‘ before a letter, not a contraction. */
static size_t single_quote_open(const char *s, size_t n) {
    static const char *const k[] = {"s", "ll", "re", "ve", "m", "d", "em", "tis", "twas", "cause", "n", "t"};
    size_t m = s[0] == '\'' ? 1 : (n >= 3 && memcmp(s, "‘", 3) == 0) ? 3 : 0;
    char rest[16];
    size_t r = 0;
    if (!m || m >= n || !(is_lower_ascii(s[m]) || is_upper_ascii(s[m]))) return 0;
    while (m + r < n && r < sizeof rest - 1 && (is_lower_ascii(s[m + r]) || is_upper_ascii(s[m + r]))) {
        rest[r] = lower_c(s[m + r]);
        r++;
    }
    rest[r] = '\0';
    if ((m + r == n || (m + r + 1 == n && s[n - 1] == '\'')) && in_list(rest, k, sizeof k / sizeof k[0])) return 0;
    return m;
}

static size_t suffix_len(const ez_g2p_en *en, const char *s, size_t n, int *squote) {
    static const char *const k[] = {"\"", ")", "]", "}", ",", "!", "?", ";", ":", "”", "…", "—", "–", "“", "»"};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        size_t m = strlen(k[i]);
        if (m < n && memcmp(s + n - m, k[i], m) == 0) return m;
    }
    if (*squote && n > 1 && s[n - 1] == '\'') return 1;
    if (*squote && n > 3 && memcmp(s + n - 3, "’", 3) == 0) return 3;
    if (n > 1 && s[n - 1] == '.') {
        char w[WORD_MAX];
        size_t d = 0;
        while (d < n && s[n - 1 - d] == '.') d++;
        if (d >= 2) return d < n ? d : 0;
        /* spaCy cuts a final period after lowercase letters and digits,
         * not after a capital (U.S., J.); nor from its exceptions */
        if ((is_upper_ascii(s[n - 2]) && (n == 2 || memchr(s, '.', n - 1))) || keeps_period(s, n - 1)) return 0;
        if (n < WORD_MAX) {
            memcpy(w, s, n);
            w[n] = '\0';
            if (find(&en->gold, w)) return 0;
        }
        return 1;
    }
    return 0;
}

/* Cuts one whitespace-free chunk into spaCy-like pieces; *squote says
 * whether a single quote is open in the line. */
static int split_chunk(const ez_g2p_en *en, const char *s, size_t n, int *squote, piece *out, int cap) {
    piece tail[32];
    int np = 0, nt = 0;
    size_t m;
    for (;;) {
        if (n && np < cap - 1 && (m = prefix_len(s, n)) > 0) {
            const char *t = punct_tag(s, m, 1);
            out[np++] = (piece){s, m, t ? t : (m == 2 && memcmp(s, "«", 2) == 0) || (m == 3 && memcmp(s, "„", 3) == 0)
                                                  ? "``" : NULL, 0};
        } else if (n && np < cap - 1 && (m = single_quote_open(s, n)) > 0) {
            out[np++] = (piece){s, m, "``", 0};
            *squote = 1;
        } else {
            break;
        }
        s += m;
        n -= m;
    }
    while (n && nt < 32 && (m = suffix_len(en, s, n, squote)) > 0) {
        const char *t = punct_tag(s + n - m, m, 0);
        if (!t && (s[n - m] == '\'' || (m == 3 && memcmp(s + n - m, "’", 3) == 0))) {
            t = "''";
            *squote = 0;
        } else if (!t && m == 3 && memcmp(s + n - m, "“", 3) == 0) {
            t = "``";
        }
        tail[nt++] = (piece){s + n - m, m, t, 0};
        n -= m;
    }
    /* dashes and ellipses inside a word stand apart */
    while (n && np < cap - 1) {
        size_t i = 0, cutp = n, cl = 0;
        for (; i + 3 <= n; i++)
            if (memcmp(s + i, "—", 3) == 0 || memcmp(s + i, "–", 3) == 0 || memcmp(s + i, "…", 3) == 0) {
                cutp = i;
                cl = 3;
                break;
            }
        if (cutp == n)
            for (i = 0; i + 2 <= n; i++)
                if (s[i] == '-' && s[i + 1] == '-') {
                    cutp = i;
                    cl = 2;
                    break;
                }
        if (cutp > 0) out[np++] = (piece){s, cutp < n ? cutp : n, NULL, 0};
        if (cutp >= n || np >= cap - 1) break;
        out[np++] = (piece){s + cutp, cl, ":", 0};
        s += cutp + cl;
        n -= cutp + cl;
    }
    while (nt && np < cap) out[np++] = tail[--nt];
    return np;
}

static int is_number_word(const char *w) {
    static const char *const k[] = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                                    "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen",
                                    "sixteen", "seventeen", "eighteen", "nineteen", "twenty", "thirty",
                                    "forty", "fifty", "sixty", "seventy", "eighty", "ninety", "hundred",
                                    "thousand", "million", "billion", "trillion", "dozen"};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (strcmp(w, k[i]) == 0) return 1;
    return 0;
}

/* The rules that stand in for spaCy's tagger (`next` is the next word,
 * NULL when punctuation or the end follows, "" when it is not a word). */
static const char *tag_word(const char *w, const char *prev, const char *next, int sentence_start) {
    static const char *const det[] = {"the", "a", "an", "my", "your", "his", "her", "its", "our", "their",
                                      "this", "that", "these", "those", "The", "A", "An", "My", "Your",
                                      "His", "Her", "Its", "Our", "Their", "This", "These", "Those"};
    static const char *const prep[] = {"in", "of", "on", "at", "by", "for", "with", "from", "into", "vs",
                                       "vs.", "In", "Of", "On", "At", "By", "For", "With", "From"};
    static const char *const modal[] = {"to", "will", "would", "can", "could", "shall", "should", "may",
                                        "might", "must", "do", "does", "did", "'ll", "not", "n't"};
    static const char *const be[] = {"is", "was", "'s", "has", "had", "seems", "means", "sounds", "looks"};
    static const char *const be_forms[] = {"is", "was", "are", "were", "be", "been", "am", "'m", "'re"};
    static const char *const subjects[] = {"I", "you", "he", "she", "we", "they", "You", "He", "She", "We",
                                           "They", "who"};
    char low[WORD_MAX];
    if (has_digit(w)) return "CD";
    to_lower(w, low);
    if (is_number_word(low)) return "CD";
    if (strcmp(low, "a") == 0 || strcmp(low, "an") == 0 || strcmp(low, "the") == 0) return "DT";
    if (strcmp(w, "I") == 0) return "PRP";
    if (strcmp(low, "to") == 0) return "TO";
    if (in_list(w, prep, sizeof prep / sizeof prep[0])) return "IN";
    if (strcmp(w, "am") == 0) return "VBP";
    if (strcmp(low, "used") == 0) return "VBD";
    /* "that" as a pronoun or determiner (stressed) vs a conjunction */
    if (strcmp(low, "that's") == 0) return "DT";
    if (strcmp(low, "that") == 0)
        return sentence_start || !next || in_list(next, be, sizeof be / sizeof be[0]) ? "DT" : "IN";
    if (strcmp(w, "Read") == 0 && sentence_start) return "VB"; /* an imperative */
    /* "read": past tense unless an infinitive */
    if (strcmp(low, "read") == 0) return prev && in_list(prev, modal, sizeof modal / sizeof modal[0]) ? "VB" : "VBD";
    /* live, lives, lived, dove: the verb unless a determiner comes before
     * (or, for "live", a verb in -ed: "played live") */
    if (strcmp(low, "live") == 0 || strcmp(low, "lives") == 0 || strcmp(low, "lived") == 0 ||
        strcmp(low, "dove") == 0) {
        if (prev && in_list(prev, det, sizeof det / sizeof det[0])) return "NN";
        return prev && strcmp(low, "live") == 0 && ends(prev, "ed") ? "RB" : "VBZ";
    }
    if (prev && (strcmp(prev, "please") == 0 || strcmp(prev, "Please") == 0)) return "VB";
    if (strlen(w) > 1 && eq_upper(w) && is_alpha_word(w)) return "NNP";
    for (const char *c = w + 1; *c; c++)
        if (is_upper_ascii(*c) && is_alpha_word(w)) return "NNP"; /* camelCase: macOS, iPhone */
    if (is_upper_ascii(w[0]) && !sentence_start) return "NNP";
    /* after a form of "be": a participle or an adjective */
    if (prev && in_list(prev, be_forms, sizeof be_forms / sizeof be_forms[0]))
        return strcmp(low, "wound") == 0 || ends(low, "ed") ? "VBN" : "JJ";
    /* after a subject pronoun: a verb */
    if (prev && in_list(prev, subjects, sizeof subjects / sizeof subjects[0])) return "VBP";
    /* an imperative: a sentence's first word before a determiner */
    if (sentence_start && next && in_list(next, det, sizeof det / sizeof det[0])) return "VB";
    if (prev && in_list(prev, modal, sizeof modal / sizeof modal[0])) return "VB";
    if (prev && in_list(prev, det, sizeof det / sizeof det[0])) return "NN";
    return "";
}

/* ---- subtokenize (misaki's SUBTOKEN_REGEX) ----------------------------------------- */

static int cp_at(const char *s, size_t n, size_t i, uint32_t *c) {
    size_t j = i;
    if (i >= n) return 0;
    utf8_decode(s, n, &j, c);
    return (int)(j - i);
}

static int is_letter(uint32_t c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= 0xC0 && c <= 0x24F && c != 0xD7 && c != 0xF7) ||
           (c >= 0x370 && c <= 0x52F);
}

static int is_lower_letter(uint32_t c) {
    if (c < 0x80) return c >= 'a' && c <= 'z';
    return is_letter(c) && ((c >= 0xDF && c <= 0xFF) || (c >= 0x100 && c <= 0x17F && (c & 1)));
}

static int is_upper_letter(uint32_t c) { return is_letter(c) && !is_lower_letter(c); }

static int is_apos(uint32_t c) { return c == '\'' || c == 0x2018 || c == 0x2019; }

/* \p{L}+(?:['‘’]\p{L})* from i; returns the end */
static size_t match_letters(const char *s, size_t n, size_t i) {
    uint32_t c;
    int k;
    size_t j = i;
    while ((k = cp_at(s, n, j, &c)) && is_letter(c)) j += (size_t)k;
    if (j == i) return i;
    for (;;) {
        size_t a = j;
        uint32_t d;
        int ka = cp_at(s, n, a, &c), kb;
        if (!ka || !is_apos(c)) break;
        kb = cp_at(s, n, a + (size_t)ka, &d);
        if (!kb || !is_letter(d)) break;
        j = a + (size_t)ka + (size_t)kb;
    }
    return j;
}

/* \p{L}*?(?:['‘’]\p{L})*?\p{Ll}(?=\p{Lu}) from i: the shortest run of
 * letters ending in a lowercase letter followed by an uppercase one. */
static size_t match_camel(const char *s, size_t n, size_t i) {
    size_t j = i;
    uint32_t c, d;
    int k;
    while ((k = cp_at(s, n, j, &c)) && is_letter(c)) {
        int kd = cp_at(s, n, j + (size_t)k, &d);
        if (is_lower_letter(c) && kd && is_upper_letter(d)) return j + (size_t)k;
        j += (size_t)k;
    }
    return i;
}

/* (?:\d?[,.]?\d)+ from i */
static size_t match_number(const char *s, size_t n, size_t i) {
    size_t j = i;
#define DIG(x) ((x) < n && s[x] >= '0' && s[x] <= '9')
#define SEP(x) ((x) < n && (s[x] == ',' || s[x] == '.'))
    for (;;) {
        if (DIG(j) && SEP(j + 1) && DIG(j + 2)) j += 3;
        else if (DIG(j) && DIG(j + 1)) j += 2;
        else if (SEP(j) && DIG(j + 1)) j += 2;
        else if (DIG(j)) j += 1;
        else break;
    }
#undef DIG
#undef SEP
    return j;
}

/* regex.findall(SUBTOKEN_REGEX, word): the [start, end) of each match */
static int subtokenize(const char *s, size_t n, size_t *starts, size_t *ends_, int cap) {
    size_t i = 0;
    int m = 0;
    while (i < n && m < cap) {
        uint32_t c = 0, d = 0, e = 0;
        int k = cp_at(s, n, i, &c), kd, ke;
        size_t j = i;
        if (i == 0 && is_apos(c)) { /* ^['‘’]+ */
            while ((kd = cp_at(s, n, j, &d)) && is_apos(d)) j += (size_t)kd;
        } else if (is_upper_letter(c) && (kd = cp_at(s, n, i + (size_t)k, &d)) && is_upper_letter(d) &&
                   (ke = cp_at(s, n, i + (size_t)k + (size_t)kd, &e)) && is_lower_letter(e)) {
            j = i + (size_t)k;
        } else if ((j = match_number(s, n, (i == 0 && c == '-') ? i + 1 : i)) > ((i == 0 && c == '-') ? i + 1 : i)) {
        } else if ((j = i, c == '-' || c == '_')) {
            while (j < n && (s[j] == '-' || s[j] == '_')) j++;
        } else if (is_apos(c) && (kd = cp_at(s, n, i + (size_t)k, &d)) && is_apos(d)) {
            while ((kd = cp_at(s, n, j, &d)) && is_apos(d)) j += (size_t)kd;
        } else if ((j = match_camel(s, n, i)) > i) {
        } else if ((j = match_letters(s, n, i)) > i) {
        } else if (!is_letter(c) && !is_apos(c) && !(c >= '0' && c <= '9')) {
            j = i + (size_t)k;
        } else if (is_apos(c)) { /* ['‘’]+$ */
            j = i;
            while ((kd = cp_at(s, n, j, &d)) && is_apos(d)) j += (size_t)kd;
            if (j != n) {
                i += (size_t)k;
                continue;
            }
        } else {
            i += (size_t)k;
            continue;
        }
        starts[m] = i;
        ends_[m++] = j;
        i = j;
    }
    return m;
}

/* ---- the G2P ------------------------------------------------------------------------------ */

static int all_in(const char *s, const char *set) {
    size_t i = 0, n = strlen(s);
    uint32_t c;
    while (i < n) {
        utf8_decode(s, n, &i, &c);
        if (!in_set(c, set)) return 0;
    }
    return 1;
}

static const char *const SUBTOKEN_JUNKS = "',-._‘’/";

/* G2P.token_context */
static void token_context(context *ctx, const ps *p, const token *tk) {
    if (p->ok && p->n)
        for (int i = 0; i < p->n; i++) {
            uint32_t c = p->c[i];
            if (in_set(c, NON_QUOTE_PUNCTS)) {
                ctx->future_vowel = -1;
                break;
            }
            if (in_set(c, VOWELS)) {
                ctx->future_vowel = 1;
                break;
            }
            if (in_set(c, CONSONANTS)) {
                ctx->future_vowel = 0;
                break;
            }
        }
    ctx->future_to = strcmp(tk->text, "to") == 0 || strcmp(tk->text, "To") == 0 ||
                     (strcmp(tk->text, "TO") == 0 && (tag_is(tk->tag, "TO") || tag_is(tk->tag, "IN")));
}

/* merge_tokens(w[a:b]) for a lookup: the text, the tag of its most
 * capitalised piece, the largest currency. */
static void merge_for_lookup(const token *w, int a, int b, token *out) {
    size_t n = 0;
    int best = -1, bw = -1;
    memset(out, 0, sizeof *out);
    for (int i = a; i < b; i++) {
        size_t k = strlen(w[i].text);
        int weight = 0;
        if (n + k + 1 >= WORD_MAX) {
            out->text[0] = '\0';
            return;
        }
        memcpy(out->text + n, w[i].text, k);
        n += k;
        if (i < b - 1 && w[i].ws) out->text[n++] = ' ';
        for (size_t j = 0; j < k; j++) weight += is_upper_ascii(w[i].text[j]) ? 2 : 1;
        if (weight > bw) {
            bw = weight;
            best = i;
        }
        if (w[i].currency > out->currency) out->currency = w[i].currency;
    }
    out->text[n] = '\0';
    out->tag = best >= 0 ? w[best].tag : "";
    out->head = a == 0;
}

static int char_class(uint32_t c) { return is_letter(c) ? 0 : (c >= '0' && c <= '9') ? 1 : 2; }

/* G2P.resolve_tokens */
static void resolve_tokens(token *w, int n) {
    char text[WORD_MAX * 4];
    size_t tn = 0, i = 0;
    int classes = 0, prespace, idx[64], ni = 0;
    for (int k = 0; k < n; k++) {
        size_t m = strlen(w[k].text);
        if (tn + m + 2 >= sizeof text) break;
        memcpy(text + tn, w[k].text, m);
        tn += m;
        if (k < n - 1 && w[k].ws) text[tn++] = ' ';
    }
    text[tn] = '\0';
    while (i < tn) {
        uint32_t c;
        utf8_decode(text, tn, &i, &c);
        if (!in_set(c, SUBTOKEN_JUNKS)) classes |= 1 << char_class(c);
    }
    prespace = strchr(text, ' ') || strchr(text, '/') || (classes & (classes - 1));
    for (int k = 0; k < n; k++) {
        if (!w[k].ph.ok) {
            if (k == n - 1 && strlen(w[k].text) <= 3 && w[k].text[0] && all_in(w[k].text, NON_QUOTE_PUNCTS) &&
                (strlen(w[k].text) == 1 || (unsigned char)w[k].text[0] >= 0x80)) {
                ps_str(&w[k].ph, w[k].text);
            } else if (all_in(w[k].text, SUBTOKEN_JUNKS)) {
                w[k].ph.ok = 1;
                w[k].ph.n = 0;
            }
        } else if (k > 0) {
            w[k].prespace = prespace;
        }
    }
    if (prespace) return;
    for (int k = 0; k < n && ni < 64; k++)
        if (w[k].ph.ok && w[k].ph.n) idx[ni++] = k;
    if (ni == 2 && strlen(w[idx[0]].text) == 1) {
        apply_stress(&w[idx[1]].ph, -1);
        return;
    }
    {
        int primaries = 0;
        for (int k = 0; k < ni; k++) primaries += ps_has(&w[idx[k]].ph, PRIMARY);
        if (ni < 2 || primaries <= (ni + 1) / 2) return;
    }
    /* sorted((has primary, weight, index))[:n // 2] */
    for (int a = 1; a < ni; a++)
        for (int b = a; b > 0; b--) {
            int x = idx[b - 1], y = idx[b];
            int kx = ps_has(&w[x].ph, PRIMARY), ky = ps_has(&w[y].ph, PRIMARY);
            int wx = stress_weight(&w[x].ph), wy = stress_weight(&w[y].ph);
            if (kx > ky || (kx == ky && (wx > wy || (wx == wy && x > y)))) {
                idx[b - 1] = y;
                idx[b] = x;
            } else {
                break;
            }
        }
    for (int k = 0; k < ni / 2; k++) apply_stress(&w[idx[k]].ph, -1);
}

/* One word group: misaki's left/right loop, else the fallback on the whole. */
static void resolve_group(g2p *g, token *w, int n, context *ctx) {
    int left = 0, right = n, should_fallback = 0;
    while (left < right) {
        token m;
        ps p;
        int known = 0;
        for (int k = left; k < right; k++) known |= w[k].ph.ok;
        ps_none(&p);
        if (!known) {
            merge_for_lookup(w, left, right, &m);
            if (m.text[0]) lexicon_call(g, &m, ctx, &p);
        }
        if (p.ok) {
            w[left].ph = p;
            for (int k = left + 1; k < right; k++) {
                w[k].ph.ok = 1;
                w[k].ph.n = 0;
            }
            token_context(ctx, &p, &m);
            right = left;
            left = 0;
        } else if (left + 1 < right) {
            left++;
        } else {
            right--;
            if (!w[right].ph.ok) {
                if (all_in(w[right].text, SUBTOKEN_JUNKS)) {
                    w[right].ph.ok = 1;
                    w[right].ph.n = 0;
                } else if (g->espeak) {
                    should_fallback = 1;
                    break;
                }
            }
            left = 0;
        }
    }
    if (should_fallback) {
        token m;
        merge_for_lookup(w, 0, n, &m);
        fallback(g, m.text, &w[0].ph);
        for (int k = 1; k < n; k++) {
            w[k].ph.ok = 1;
            w[k].ph.n = 0;
        }
        w[0].prespace = 0;
    } else {
        resolve_tokens(w, n);
    }
}

/* A unit of misaki's retokenized list: one token, or a group of tokens
 * with no whitespace between them. */
typedef struct {
    int start, n;
} unit;

static void emit_ps(ez_strbuf *out, const ps *p) {
    char b[4];
    for (int i = 0; i < p->n; i++) {
        uint32_t c = p->c[i];
        if (c == 0x27E) c = 'T'; /* version None: ɾ -> T, ʔ -> t */
        else if (c == 0x294) c = 't';
        ez_sb_append(out, b, ez_utf8_encode(c, b));
    }
}

/* The pieces of a line, with spaCy-style tags, before subtokenize. */
typedef struct {
    piece *p;
    int n, cap;
} pieces;

static int push_pieces(pieces *ps_, const piece *src, int n, int ws) {
    if (ps_->n + n > ps_->cap) {
        int cap = ps_->cap ? ps_->cap * 2 : 64;
        piece *p;
        while (cap < ps_->n + n) cap *= 2;
        p = (piece *)realloc(ps_->p, (size_t)cap * sizeof *p);
        if (!p) return 0;
        ps_->p = p;
        ps_->cap = cap;
    }
    for (int k = 0; k < n; k++) {
        ps_->p[ps_->n] = src[k];
        ps_->p[ps_->n++].ws = k == n - 1 ? ws : 0;
    }
    return 1;
}

static void piece_text(const piece *p, char *o) {
    size_t n = p->n < WORD_MAX ? p->n : WORD_MAX - 1;
    memcpy(o, p->s, n);
    o[n] = '\0';
    /* misaki: ‘ ’ -> ' */
    for (size_t k = 0; o[k]; k++)
        if ((unsigned char)o[k] == 0xE2 && (unsigned char)o[k + 1] == 0x80 &&
            ((unsigned char)o[k + 2] == 0x98 || (unsigned char)o[k + 2] == 0x99)) {
            o[k] = '\'';
            memmove(o + k + 1, o + k + 3, strlen(o + k + 3) + 1);
        }
}

static void punct_phonemes(token *t) {
    if (strcmp(t->tag, ":") == 0 && (strcmp(t->text, "-") == 0 || strcmp(t->text, "–") == 0)) ps_str(&t->ph, "—");
    else if (strcmp(t->tag, "-LRB-") == 0) ps_str(&t->ph, "(");
    else if (strcmp(t->tag, "-RRB-") == 0) ps_str(&t->ph, ")");
    else if (strcmp(t->tag, "``") == 0) ps_str(&t->ph, "“");
    else if (strcmp(t->tag, "''") == 0) ps_str(&t->ph, "”");
    else {
        size_t k = 0, m = strlen(t->text);
        ps_str(&t->ph, "");
        while (k < m) {
            uint32_t cp;
            utf8_decode(t->text, m, &k, &cp);
            if (in_set(cp, PUNCTS)) ps_push(&t->ph, cp);
        }
    }
}

/* G2P.preprocess (no markdown features), spaCy's tokens and tags as
 * approximated here, and G2P.retokenize's pieces. */
/* The last character boundary of s at or before `at` (> from): a cut
 * there keeps the characters whole. */
static size_t utf8_floor(const char *s, size_t from, size_t at) {
    while (at > from + 1 && ((unsigned char)s[at] & 0xC0) == 0x80) at--;
    return at;
}

static int32_t tokenize(const ez_g2p_en *en, const char *text, size_t len, tokens *ts) {
    pieces pc = {0};
    size_t i = 0;
    int currency = 0, sentence_start = 1, squote = 0;
    const char **wtag = NULL;

    while (i < len) {
        /* every piece is at least a byte: room for all of a part's */
        piece tmp[WORD_MAX + 1];
        int np;
        size_t e;
        while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n')) i++;
        if (i >= len) break;
        e = i;
        while (e < len && text[e] != ' ' && text[e] != '\t' && text[e] != '\r' && text[e] != '\n') e++;
        /* A run of WORD_MAX bytes or more without whitespace is read in
         * parts of fewer, cut between characters, as if spaces split it:
         * no text is dropped, and every piece fits a token. */
        if (e - i >= WORD_MAX) e = utf8_floor(text, i, i + WORD_MAX - 1);
        np = split_chunk(en, text + i, e - i, &squote, tmp, WORD_MAX + 1);
        if (!push_pieces(&pc, tmp, np, e < len)) goto oom;
        i = e;
    }
    wtag = (const char **)calloc((size_t)(pc.n ? pc.n : 1), sizeof *wtag);
    if (!wtag) goto oom;
    for (int k = 0; k < pc.n; k++) {
        char w[WORD_MAX], pv[WORD_MAX], nx[WORD_MAX];
        if (pc.p[k].tag) {
            if (strcmp(pc.p[k].tag, ".") == 0) sentence_start = 1;
            continue;
        }
        piece_text(&pc.p[k], w);
        if (k > 0 && !pc.p[k - 1].tag) piece_text(&pc.p[k - 1], pv);
        else pv[0] = '\0';
        if (k + 1 < pc.n && !pc.p[k + 1].tag) piece_text(&pc.p[k + 1], nx);
        else nx[0] = '\0';
        wtag[k] = tag_word(w, pv[0] ? pv : NULL, k + 1 < pc.n && !pc.p[k + 1].tag ? nx : NULL, sentence_start);
        sentence_start = 0;
    }
    for (int k = 0; k < pc.n; k++) {
        const piece *p = &pc.p[k];
        char word[WORD_MAX];
        size_t st[WORD_MAX], en_[WORD_MAX]; /* a subtoken is at least a byte */
        int ns, hyphenated;
        if (p->tag) {
            token *t = push_token(ts);
            if (!t) goto oom;
            memcpy(t->text, p->s, p->n);
            t->text[p->n] = '\0';
            t->tag = p->tag;
            t->ws = p->ws;
            if (strcmp(t->tag, "$") == 0) {
                currency = t->text[0] == '$' ? '$' : (unsigned char)t->text[0] == 0xC2 ? 'L' : 'E';
                ps_str(&t->ph, "");
            } else {
                punct_phonemes(t);
            }
            continue;
        }
        piece_text(p, word);
        ns = subtokenize(word, strlen(word), st, en_, WORD_MAX);
        hyphenated = strchr(word, '-') != NULL && !has_digit(word);
        for (int j = 0; j < ns; j++) {
            token *t = push_token(ts);
            size_t m = en_[j] - st[j];
            if (!t) goto oom;
            memcpy(t->text, word + st[j], m);
            t->text[m] = '\0';
            /* spaCy splits hyphenated words and tags each part */
            t->tag = hyphenated && is_alpha_word(t->text) ? tag_word(t->text, j >= 2 ? ts->t[ts->n - 3].text : NULL,
                                                                      "", 0)
                                                         : wtag[k];
            t->ws = j == ns - 1 ? p->ws : 0;
            t->alias_to = j > 0 && j < ns - 1 && strcmp(t->text, "2") == 0 && st[j] > 0 &&
                          is_letter((unsigned char)word[st[j] - 1]) && is_letter((unsigned char)word[en_[j]]);
            if (currency) {
                int cd_next = k + 1 < pc.n && !pc.p[k + 1].tag && strcmp(wtag[k + 1], "CD") == 0;
                if (strcmp(wtag[k], "CD") != 0) currency = 0;
                else if (j == ns - 1 && !cd_next) t->currency = currency;
            }
        }
    }
    free(wtag);
    free(pc.p);
    return ELIZA_OK;
oom:
    free(wtag);
    free(pc.p);
    return ez_fail(ELIZA_E_NOMEM, "out of memory in the English G2P (%zu bytes of text)", len);
}

int32_t ez_g2p_en_line(const ez_g2p_en *en, const char *text, size_t len, int sentences, ez_g2p_espeak_fn espeak,
                       void *ctx, ez_strbuf *out) {
    g2p g = {en, espeak, ctx, ELIZA_OK};
    tokens ts = {0};
    unit *units = NULL;
    int nu = 0;
    context c = {-1, 0};

    if (!en || (!text && len) || !out) return ez_fail(ELIZA_E_INVALID_ARG, "English G2P: NULL argument");
    g.rc = tokenize(en, text, len, &ts);
    if (g.rc < 0) goto done;
    /* units: a token with whitespace (or phonemes) stands alone; pieces
     * without whitespace between them group */
    units = (unit *)malloc((size_t)(ts.n ? ts.n : 1) * sizeof *units);
    if (!units) goto oom;
    {
        int open = -1; /* the group a token without whitespace opened */
        for (int k = 0; k < ts.n; k++) {
            token *t = &ts.t[k];
            if (t->ph.ok || t->alias_to) {
                units[nu++] = (unit){k, 1};
                open = -1;
            } else if (open >= 0 && !ts.t[k - 1].ws) {
                units[open].n++;
            } else {
                units[nu++] = (unit){k, 1};
                open = t->ws ? -1 : nu - 1;
            }
        }
    }
    /* right to left, as misaki */
    for (int u = nu - 1; u >= 0 && g.rc == ELIZA_OK; u--) {
        token *w = &ts.t[units[u].start];
        if (units[u].n == 1) {
            if (w->alias_to) {
                token to = *w;
                strcpy(to.text, "to");
                lexicon_call(&g, &to, &c, &w->ph);
            } else if (!w->ph.ok) {
                lexicon_call(&g, w, &c, &w->ph);
                if (!w->ph.ok) fallback(&g, w->text, &w->ph);
            }
            token_context(&c, &w->ph, w);
        } else {
            resolve_group(&g, w, units[u].n, &c);
        }
    }
    if (g.rc < 0) goto done;
    /* merged tokens joined with their whitespace */
    for (int u = 0; u < nu; u++) {
        token *w = &ts.t[units[u].start];
        size_t before = out->len;
        int nl = 0;
        for (int k = 0; k < units[u].n; k++) {
            if (w[k].prespace && out->len > before && out->data[out->len - 1] != ' ' && w[k].ph.ok && w[k].ph.n)
                ez_sb_append(out, " ", 1);
            if (w[k].ph.ok) emit_ps(out, &w[k].ph);
            else ez_sb_puts(out, "❓");
        }
        if (sentences && units[u].n == 1 && strcmp(w->tag, ".") == 0) nl = 1;
        if (w[units[u].n - 1].ws) {
            int more = u + 1 < nu;
            if (nl && more && !(ts.t[units[u + 1].start].ph.ok && ts.t[units[u + 1].start].tag[0] &&
                                strcmp(ts.t[units[u + 1].start].tag, "''") == 0))
                ez_sb_append(out, "\n", 1);
            else ez_sb_append(out, " ", 1);
        }
    }
    goto done;
oom:
    g.rc = ez_fail(ELIZA_E_NOMEM, "out of memory in the English G2P (%zu bytes of text)", len);
done:
    free(ts.t);
    free(units);
    if (g.rc == ELIZA_OK && out->failed) g.rc = ez_fail(ELIZA_E_NOMEM, "out of memory in the English G2P");
    return g.rc;
}

/* ---- attaching the lexicons to a G2P ----------------------------------------------------------- */

int32_t ez_g2p_en_attach(ez_g2p *g, const char *language, const char *model_path) {
    const char *env = getenv("ELIZA_EN_LEXICON");
    char *path = NULL;
    FILE *f;
    int british, rc;
    if (strcmp(language, "en-us") == 0 || strcmp(language, "en") == 0) british = 0;
    else if (strcmp(language, "en-gb") == 0) british = 1;
    else return ELIZA_OK;
    if (env && *env) {
        rc = ez_g2p_use_lexicon(g, env, british);
        return rc < 0 ? ez_fail(rc, "$ELIZA_EN_LEXICON: %s", ez_error_message()) : rc;
    }
    if (model_path) {
        size_t d = strlen(model_path);
        while (d > 0 && model_path[d - 1] != '/' && model_path[d - 1] != '\\') d--;
        path = (char *)malloc(d + sizeof EZ_G2P_EN_LEXICON_FILE);
        if (!path) return ez_fail(ELIZA_E_NOMEM, "out of memory opening the English G2P");
        memcpy(path, model_path, d);
        memcpy(path + d, EZ_G2P_EN_LEXICON_FILE, sizeof EZ_G2P_EN_LEXICON_FILE);
    }
    f = path ? fopen(path, "rb") : NULL;
    if (!f) {
        ez_log(ELIZA_LOG_WARN, "no English lexicon beside the model (%s): %s through espeak-ng only; write it "
               "with `python -m eliza.convert lexicon %s` (make models does)", path ? path : "no model path",
               language, path ? path : EZ_G2P_EN_LEXICON_FILE);
        free(path);
        return ELIZA_OK;
    }
    fclose(f);
    rc = ez_g2p_use_lexicon(g, path, british);
    free(path);
    return rc;
}
