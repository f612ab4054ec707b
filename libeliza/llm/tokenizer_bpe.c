/* Byte-level BPE (tokenizer.ggml.model = "gpt2"), as llama.cpp does it:
 *   1. the pre-tokenizer cuts the text into words (llama.cpp's regexes per
 *      tokenizer.ggml.pre: hand-written rules where llama.cpp has them,
 *      the matcher of regex.c for the others);
 *   2. each word's bytes are mapped to GPT-2's printable code points;
 *   3. the adjacent pair with the lowest merge rank is merged until no pair
 *      has a rank (ties to the leftmost);
 *   4. each final symbol is looked up; one that is no token falls back to its
 *      single bytes where those are tokens, and is dropped otherwise. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/utf8.h"
#include "llm/regex.h"
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

/* Kimi K2 (llama.cpp's unicode_regex_split_custom_kimi_k2, which stands for
 * the whole of tokenization_kimi.py's regex):
 * [\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*
 * [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|...)?|...|\p{N}{1,3}
 * | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * read as llama.cpp reads it: a letter run is any non-Han letters. */
static int is_han(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2EBEF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

static int kimi_letter(const chunk *c, size_t i) {
    return (fl_at(c, i) & F_LETTER) && !is_han(cp_at(c, i));
}

static void split_kimi(const chunk *c, size_t pos, lenvec *out) {
    size_t prev = pos;
    while (pos < c->end) {
        uint32_t cp = c->cp[pos];
        uint16_t f = c->fl[pos], f2;
        int lead = !(cp == '\r' || cp == '\n' || (f & (F_LETTER | F_NUMBER)));
        size_t ws = 0, last_nl = 0;
        if (is_han(cp)) {
            while (is_han(cp_at(c, pos))) pos++;
        } else if (kimi_letter(c, pos) || (lead && kimi_letter(c, pos + 1))) {
            pos += lead;
            while (kimi_letter(c, pos)) pos++;
            if (pos < c->end) pos += contraction(c, pos, 1);
        } else if (f & F_NUMBER) {
            size_t ini = pos;
            while (fl_at(c, pos) & F_NUMBER) {
                if (++pos - ini >= 3) {
                    push_len(out, pos - prev);
                    prev = ini = pos;
                }
            }
        } else if ((f2 = cp == ' ' ? fl_at(c, pos + 1) : f) != 0 &&
                   !(f2 & (F_SPACE | F_LETTER | F_NUMBER))) {
            pos += cp == ' ';
            while (fl_at(c, pos) && !(fl_at(c, pos) & (F_SPACE | F_LETTER | F_NUMBER))) pos++;
            while (cp_at(c, pos) == '\r' || cp_at(c, pos) == '\n') pos++;
        } else {
            while (fl_at(c, pos + ws) & F_SPACE) {
                uint32_t w = c->cp[pos + ws];
                if (w == '\r' || w == '\n') last_nl = pos + ws + 1;
                ws++;
            }
            if (last_nl > 0)
                pos = last_nl;
            else if (ws > 1 && cp_at(c, pos + ws) != OUT_OF_RANGE)
                pos += ws - 1;
            else
                pos += ws > 0 ? ws : 1;
        }
        push_len(out, pos - prev);
        prev = pos;
    }
}

/* AFMoE and Tiny Aya digits (llama.cpp's unicode_regex_split_custom_afmoe):
 * a run of \p{N} is cut into groups of three from the right, the first
 * group taking the text before the run with it; the text after the last run
 * is one word. */
static void split_digit_groups(const chunk *c, size_t pos, lenvec *out) {
    size_t prev = pos;
    while (pos < c->end) {
        size_t start = pos, r;
        if (!(c->fl[pos] & F_NUMBER)) {
            pos++;
            continue;
        }
        while (fl_at(c, pos) & F_NUMBER) pos++;
        r = (pos - start) % 3;
        for (start += r ? r : 3; start <= pos; start += 3) {
            push_len(out, start - prev);
            prev = start;
        }
    }
    push_len(out, c->end - prev);
}

/* [^\n]+|[\n]+ (llama.cpp's unicode_regex_split_custom_newlines). */
static void split_newlines(const chunk *c, size_t pos, lenvec *out) {
    while (pos < c->end) {
        int nl = c->cp[pos] == '\n';
        size_t start = pos;
        while (pos < c->end && (c->cp[pos] == '\n') == nl) pos++;
        push_len(out, pos - start);
    }
}

/* llama.cpp's regex lists (llm_tokenizer_bpe in llama-vocab.cpp), verbatim:
 * the passes run in order, each re-cutting every word of the one before. */
static const char *const k_pre_regexes[EZ_PRE_COUNT][EZ_PRE_MAX_PASSES] = {
    /* default */
    [EZ_PRE_DEFAULT] = {
        "[\\p{P}\\$\\+<=>\\^~\\|]+",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
        "\\p{N}+",
        "[0-9][0-9][0-9]",
        NULL},
    /* gpt2, mpt, olmo, jais, trillion, granite_docling */
    [EZ_PRE_GPT2] = {
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
        NULL},
    /* llama3 */
    [EZ_PRE_LLAMA3] = {
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        NULL},
    /* stablelm2, qwen2, hunyuan, solar_open */
    [EZ_PRE_QWEN2] = {
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        NULL},
    /* qwen35 */
    [EZ_PRE_QWEN35] = {
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        NULL},
    /* jais2 */
    [EZ_PRE_JAIS2] = {
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
        NULL},
    /* deepseek_llm */
    [EZ_PRE_DEEPSEEK_LLM] = {
        "[\r\n]",
        "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
        "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
        "\\s+$",
        "[一-龥ࠀ-一가-퟿]+",
        "\\p{N}+",
        NULL},
    /* deepseek3_llm, hunyuan_dense, joyai_llm, hy_v4 */
    [EZ_PRE_DEEPSEEK3_LLM] = {
        "\\p{N}{1,3}",
        "[一-龥぀-ゟ゠-ヿ]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
        NULL},
    /* spark2_5 */
    [EZ_PRE_SPARK2_5] = {
        "\\p{N}{1,3}",
        "[一-龥぀-ゟ゠-ヿ]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
        "\\p{N}",
        NULL},
    /* youtu */
    [EZ_PRE_YOUTU] = {
        "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        NULL},
    /* deepseek_coder */
    [EZ_PRE_DEEPSEEK_CODER] = {
        "[\r\n]",
        "\\s?\\p{L}+",
        "\\s?\\p{P}+",
        "[一-龥ࠀ-一가-퟿]+",
        "\\p{N}",
        NULL},
    /* falcon */
    [EZ_PRE_FALCON] = {
        "[\\p{P}\\$\\+<=>\\^~\\|`]+",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
        "[0-9][0-9][0-9]",
        NULL},
    /* starcoder, refact, command_r, smollm, codeshell, exaone, minerva, mellum2 */
    [EZ_PRE_STARCODER] = {
        "\\p{N}",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
        NULL},
    /* poro, bloom, gpt3_finnish */
    [EZ_PRE_PORO] = {
        " ?[^(\\s|.,!?…。，、।۔،)]+",
        NULL},
    /* viking */
    [EZ_PRE_VIKING] = {
        " ?[^(\\s|.,!?…。，、।۔،)]+",
        "\\p{N}",
        NULL},
    /* tekken */
    [EZ_PRE_TEKKEN] = {
        "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        NULL},
    /* chameleon */
    [EZ_PRE_CHAMELEON] = {
        "<sentinel:[0-9]+>",
        "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
        "([\\t\\n]|    |  )",
        "\\p{N}",
        "[\\p{P}!-/:-@\\[-`{-~]",
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
        NULL},
    /* gpt4o, minimax_m2 */
    [EZ_PRE_GPT4O] = {
        "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        NULL},
    /* granite_emb_multi */
    [EZ_PRE_GRANITE_EMB_MULTI] = {
        "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        NULL},
    /* tiny_aya */
    [EZ_PRE_TINY_AYA] = {
        "\\d{1,3}(?=(?:\\d{3})*\\b)",
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        NULL},
    /* kimi_k2 */
    [EZ_PRE_KIMI_K2] = {
        "\\p{Han}+",
        NULL},
    /* superbpe */
    [EZ_PRE_SUPERBPE] = {
        "\\p{N}+",
        "(?=(\\d{3})+(?!\\d))",
        NULL},
    /* bailingmoe */
    [EZ_PRE_BAILINGMOE] = {
        "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
        NULL},
    /* seed_coder */
    [EZ_PRE_SEED_CODER] = {
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        NULL},
    /* ufakzeka */
    [EZ_PRE_UFAKZEKA] = {
        "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        NULL},
    /* afmoe */
    [EZ_PRE_AFMOE] = {
        "\\p{AFMoE_digits}",
        "[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        NULL},
    /* laguna */
    [EZ_PRE_LAGUNA] = {
        "[^\\n]+|[\\n]+",
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        NULL},
    /* exaone_moe */
    [EZ_PRE_EXAONE_MOE] = {
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
        NULL},
    /* minicpm5 */
    [EZ_PRE_MINICPM5] = {
        "\\p{N}{1,3}",
        "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        NULL},
    /* gemma4, sarvam_moe: only newlines cut (the merges run on whole lines) */
    [EZ_PRE_GEMMA4] = {"[^\\n]+|[\\n]+", NULL},
    [EZ_PRE_SARVAM_MOE] = {"[^\\n]+|[\\n]+", NULL},
    /* whitespace */
    [EZ_PRE_WHITESPACE] = {"\\S+", NULL},
};

typedef enum { PASS_GPT2, PASS_LLAMA3, PASS_QWEN2, PASS_QWEN35, PASS_KIMI, PASS_DIGIT_GROUPS,
               PASS_NEWLINES, PASS_REGEX } pass_kind;

/* The patterns llama.cpp runs through a hand-written rule instead of
 * std::regex (unicode_regex_split_custom); every other one is a regex. */
static const struct {
    const char *pattern;
    pass_kind kind;
} k_custom[] = {
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)", PASS_GPT2},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", PASS_LLAMA3},
    {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", PASS_LLAMA3},
    {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", PASS_QWEN2},
    {"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", PASS_QWEN35},
    {"\\p{Han}+", PASS_KIMI},
    {"\\p{AFMoE_digits}", PASS_DIGIT_GROUPS},
    {"\\d{1,3}(?=(?:\\d{3})*\\b)", PASS_DIGIT_GROUPS},
    {"[^\\n]+|[\\n]+", PASS_NEWLINES},
};

int32_t ez_pretok_init(ez_pretok *p, ez_pre_type pre) {
    int i;
    memset(p, 0, sizeof *p);
    if (pre < EZ_PRE_DEFAULT || pre >= EZ_PRE_COUNT)
        return ez_fail(ELIZA_E_INTERNAL, "unknown pre-tokenizer %d", (int)pre);
    for (i = 0; i < EZ_PRE_MAX_PASSES && k_pre_regexes[pre][i]; i++) {
        const char *pat = k_pre_regexes[pre][i];
        size_t k;
        p->kind[i] = PASS_REGEX;
        for (k = 0; k < sizeof k_custom / sizeof k_custom[0]; k++) {
            if (strcmp(pat, k_custom[k].pattern) == 0) p->kind[i] = (int)k_custom[k].kind;
        }
        p->n = i + 1;
        if (p->kind[i] == PASS_REGEX) {
            int32_t rc = ez_regex_compile(pat, &p->re[i]);
            if (rc) {
                ez_pretok_free(p);
                return rc;
            }
        }
    }
    return ELIZA_OK;
}

void ez_pretok_free(ez_pretok *p) {
    int i;
    for (i = 0; i < p->n; i++) ez_regex_free(p->re[i]);
    memset(p, 0, sizeof *p);
}

/* Re-cuts every word of *words with one hand-written rule; returns 0 on
 * allocation failure. */
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
        case PASS_KIMI: split_kimi(&c, start, &out); break;
        case PASS_DIGIT_GROUPS: split_digit_groups(&c, start, &out); break;
        case PASS_NEWLINES: split_newlines(&c, start, &out); break;
        case PASS_REGEX: break;
        }
        start = c.end;
    }
    free(words->len);
    *words = out;
    return !out.failed;
}

int32_t ez_pretok_split(const ez_pretok *p, const char *text, size_t len, size_t **out_lens,
                        size_t *n_out) {
    size_t n_cp = 0, i, w, at;
    int k;
    uint32_t *cp = NULL, *view = NULL;
    uint16_t *fl = NULL;
    size_t *off = NULL;
    lenvec words = {NULL, 0, 0, 0};
    int32_t rc = ELIZA_OK;

    *out_lens = NULL;
    *n_out = 0;
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
    for (k = 0; k < p->n && !words.failed; k++) {
        if (p->kind[k] != PASS_REGEX) {
            if (!run_pass((pass_kind)p->kind[k], cp, fl, &words)) goto nomem;
            continue;
        }
        if (!view && !(view = (uint32_t *)malloc(n_cp * sizeof *view))) goto nomem;
        for (i = 0; i < n_cp; i++) view[i] = ez_regex_view(p->re[k], cp[i]);
        if ((rc = ez_regex_split(p->re[k], view, &words.len, &words.n)) != ELIZA_OK) goto done;
        words.cap = words.n;
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
    free(view);
    free(off);
    free(fl);
    free(cp);
    return rc;
}

int32_t ez_bpe_pretokenize(ez_pre_type pre, const char *text, size_t len, size_t **out_lens,
                           size_t *n_out) {
    ez_pretok p;
    int32_t rc = ez_pretok_init(&p, pre);
    *out_lens = NULL;
    *n_out = 0;
    if (rc) return rc;
    rc = ez_pretok_split(&p, text, len, out_lens, n_out);
    ez_pretok_free(&p);
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

/* The length of the UTF-8 sequence that lead byte b starts (1 for a
 * continuation byte), as llama.cpp's unicode_len_utf8. */
static size_t utf8_lead_len(uint8_t b) {
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[b >> 4];
}

/* The token of one byte of a piece the vocabulary lacks: its one-byte text,
 * or for raw UTF-8 vocabularies only its <0xHH> token; -1 if none. */
static int32_t byte_fallback(const ez_tokenizer *tok, uint8_t b) {
    static const char hexd[] = "0123456789ABCDEF";
    const char name[6] = {'<', '0', 'x', hexd[b >> 4], hexd[b & 15], '>'};
    return tok->raw_utf8 ? ez_vocab_find(tok, name, sizeof name) : tok->char_token[b];
}

static int all_newlines(const char *word, size_t len) {
    size_t i;
    for (i = 0; i < len; i++) {
        if (word[i] != '\n') return 0;
    }
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
    for (i = 0; i < len;) {
        uint8_t utf8[4];
        size_t n, step;
        if (tok->raw_utf8) {
            /* One UTF-8 character (the lead byte's length, cut at the word's end). */
            step = n = EZ_MIN(len - i, utf8_lead_len((uint8_t)word[i]));
            memcpy(utf8, word + i, n);
        } else {
            n = ez_utf8_encode(ez_bpe_byte_to_cp((uint8_t)word[i]), utf8);
            step = 1;
        }
        i += step;
        s->sym[n_sym].prev = (int32_t)n_sym - 1;
        s->sym[n_sym].next = i == len ? -1 : (int32_t)n_sym + 1;
        s->sym[n_sym].start = (uint32_t)n_enc;
        s->sym[n_sym].n = (uint32_t)n;
        n_sym++;
        memcpy(s->enc + n_enc, utf8, n);
        n_enc += n;
    }
    if (tok->newline_words && all_newlines(word, len)) {
        id = ez_vocab_find(tok, s->enc, n_enc);
        if (id >= 0) return ez_idvec_push(out, id);
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
            id = byte_fallback(tok, (uint8_t)s->enc[sy->start + i]);
            if (id >= 0 && !ez_idvec_push(out, id)) return 0;
        }
    }
    return 1;
}

/* text with every " " as U+2581 (llama.cpp's llama_escape_whitespace), in
 * a malloc'd copy. */
static int32_t escape_spaces(const char *text, size_t len, char **out, size_t *n_out) {
    size_t i, n = 0, spaces = 0;
    char *t;
    for (i = 0; i < len; i++) spaces += text[i] == ' ';
    t = (char *)malloc(len + 2 * spaces + 1);
    if (!t) return ez_fail(ELIZA_E_NOMEM, "out of memory tokenizing %zu bytes", len);
    for (i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(t + n, "\xE2\x96\x81", 3);
            n += 3;
        } else {
            t[n++] = text[i];
        }
    }
    t[n] = '\0';
    *out = t;
    *n_out = n;
    return ELIZA_OK;
}

static int32_t bpe_fragment(const ez_tokenizer *tok, const char *text, size_t len, ez_idvec *out) {
    session s;
    size_t *lens = NULL, n_words = 0, w, at = 0;
    char *escaped = NULL;
    int32_t rc;

    if (len > (size_t)(INT32_MAX / (tok->escape_spaces ? 6 : 2)))
        return ez_fail(ELIZA_E_INVALID_ARG, "text fragment of %zu bytes is too long to tokenize",
                       len);
    if (tok->escape_spaces) {
        if ((rc = escape_spaces(text, len, &escaped, &len)) != ELIZA_OK) return rc;
        text = escaped;
    }
    rc = ez_pretok_split(&tok->pretok, text, len, &lens, &n_words);
    if (rc) {
        free(escaped);
        return rc;
    }
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
    free(escaped);
    return rc;
}

/* tokenizer.ggml.model "whitespace" (llama.cpp's whitespace session): the
 * text without its White_Space code points, each run between them (lowercased
 * where the normalizer says so) tokenized on its own. */
static int32_t whitespace_fragment(const ez_tokenizer *tok, const char *text, size_t len,
                                   ez_idvec *out) {
    char *seg = (char *)malloc(len + 1);
    size_t i = 0, n = 0;
    int32_t rc = ELIZA_OK;
    if (!seg) return ez_fail(ELIZA_E_NOMEM, "out of memory tokenizing %zu bytes", len);
    while (i <= len && rc == ELIZA_OK) {
        uint32_t cp = 0;
        size_t k = i < len ? ez_utf8_decode((const uint8_t *)text + i, len - i, &cp) : 0;
        if (i < len && k == 0) {
            rc = ez_fail(ELIZA_E_INVALID_ARG, "invalid UTF-8 at byte offset %zu", i);
            break;
        }
        if (i == len || (flags_of(cp) & F_SPACE)) {
            if (n > 0) rc = bpe_fragment(tok, seg, n, out);
            n = 0;
            i += i == len ? 1 : k;
            continue;
        }
        n += ez_utf8_encode(tok->lowercase ? ez_unicode_tolower(cp) : cp, (uint8_t *)seg + n);
        i += k;
    }
    free(seg);
    return rc;
}

int32_t ez_bpe_tokenize(const ez_tokenizer *tok, const char *text, size_t len, ez_idvec *out) {
    return tok->whitespace_model ? whitespace_fragment(tok, text, len, out)
                                 : bpe_fragment(tok, text, len, out);
}
