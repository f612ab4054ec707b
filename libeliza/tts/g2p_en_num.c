/* Numbers as num2words 0.5 (lang EN) spells them for misaki: the words
 * only, since misaki splits num2words' text at every non-letter and drops
 * "and" (it keeps it only for a "#&" feature, which libeliza never sets). */
#include <stdio.h>
#include <string.h>

#include "tts/g2p_en.h"

static const char *const k_small[20] = {
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"};
static const char *const k_tens[10] = {"", "", "twenty", "thirty", "forty", "fifty",
                                       "sixty", "seventy", "eighty", "ninety"};
/* short scale, as num2words' EN cards */
static const char *const k_scales[] = {"thousand", "million", "billion", "trillion", "quadrillion", "quintillion"};

typedef struct {
    char *s;
    size_t n, cap;
    int ok;
} words;

static void put(words *w, const char *word) {
    size_t k = strlen(word);
    if (!w->ok) return;
    if (w->n + k + 2 > w->cap) {
        w->ok = 0;
        return;
    }
    if (w->n) w->s[w->n++] = ' ';
    memcpy(w->s + w->n, word, k);
    w->n += k;
    w->s[w->n] = '\0';
}

static void below_1000(words *w, unsigned v) {
    if (v >= 100) {
        put(w, k_small[v / 100]);
        put(w, "hundred");
        v %= 100;
        if (!v) return;
    }
    if (v < 20) {
        put(w, k_small[v]);
        return;
    }
    put(w, k_tens[v / 10]);
    if (v % 10) put(w, k_small[v % 10]);
}

/* num2words' splitnum/merge, which for English amounts to groups of three
 * digits, each followed by its scale word. */
static void cardinal(words *w, unsigned long long v) {
    unsigned groups[7];
    int n = 0;
    if (v == 0) {
        put(w, "zero");
        return;
    }
    while (v) {
        groups[n++] = (unsigned)(v % 1000);
        v /= 1000;
    }
    for (int i = n - 1; i >= 0; i--) {
        if (!groups[i]) continue;
        below_1000(w, groups[i]);
        if (i) put(w, k_scales[i - 1]);
    }
}

/* Lang EN's to_ordinal on the last word. */
static void ordinalize(words *w) {
    static const char *const k_ords[][2] = {
        {"one", "first"},   {"two", "second"}, {"three", "third"}, {"four", "fourth"},
        {"five", "fifth"},  {"six", "sixth"},  {"seven", "seventh"}, {"eight", "eighth"},
        {"nine", "ninth"},  {"ten", "tenth"},  {"eleven", "eleventh"}, {"twelve", "twelfth"}};
    char last[32];
    size_t start = w->n;
    if (!w->ok || !w->n) return;
    while (start && w->s[start - 1] != ' ') start--;
    if (w->n - start >= sizeof last - 4) {
        w->ok = 0;
        return;
    }
    memcpy(last, w->s + start, w->n - start);
    last[w->n - start] = '\0';
    w->n = start ? start - 1 : 0;
    w->s[w->n] = '\0';
    for (size_t i = 0; i < sizeof k_ords / sizeof k_ords[0]; i++)
        if (strcmp(last, k_ords[i][0]) == 0) {
            put(w, k_ords[i][1]);
            return;
        }
    size_t k = strlen(last);
    if (last[k - 1] == 'y') memcpy(last + k - 1, "ie", 3);
    strcat(last, "th");
    put(w, last);
}

/* Parses up to 18 decimal digits; 0 when there are none or too many. */
static int parse(const char *s, size_t n, unsigned long long *out) {
    unsigned long long v = 0;
    if (n == 0 || n > 18) return 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    *out = v;
    return 1;
}

int ez_g2p_en_number_words(int kind, const char *digits, char *out, size_t cap) {
    words w = {out, 0, cap, cap > 0};
    unsigned long long v;
    if (cap) out[0] = '\0';
    if (kind == 'f') {
        /* num2words(float("I.F")): str(float) keeps the fraction's digits
         * without trailing zeros, at least one */
        const char *dot = strchr(digits, '.');
        size_t ni = dot ? (size_t)(dot - digits) : strlen(digits), nf;
        if (!dot) return 0;
        nf = strlen(dot + 1);
        while (nf > 1 && dot[nf] == '0') nf--;
        if (ni == 0) v = 0;
        else if (!parse(digits, ni, &v)) return 0;
        if (nf == 0 || nf > 15) return 0;
        cardinal(&w, v);
        /* a float with an integral value is spelt as an integer */
        if (strspn(dot + 1, "0") == nf) return w.ok;
        put(&w, "point");
        for (size_t i = 0; i < nf; i++) {
            if (dot[1 + i] < '0' || dot[1 + i] > '9') return 0;
            put(&w, k_small[dot[1 + i] - '0']);
        }
        return w.ok;
    }
    if (!parse(digits, strlen(digits), &v)) return 0;
    if (kind == 'y') {
        unsigned long long high = v / 100, low = v % 100;
        if (high == 0 || (high % 10 == 0 && low < 10) || high >= 100) {
            cardinal(&w, v);
        } else {
            cardinal(&w, high);
            if (low == 0) put(&w, "hundred");
            else {
                if (low < 10) put(&w, "oh");
                cardinal(&w, low);
            }
        }
        return w.ok;
    }
    cardinal(&w, v);
    if (kind == 'o') ordinalize(&w);
    return w.ok;
}
