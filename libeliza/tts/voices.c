/* Voices by name and weighted blends of them ("a:0.7,b:0.3": the weighted
 * mean of the packs), and the style row an utterance takes. */
#include "tts/voices.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/strbuf.h"

static int find_voice(const ez_kokoro *m, const char *name, size_t len) {
    int n = ez_kokoro_voice_count(m);
    for (int i = 0; i < n; i++) {
        const char *v = ez_kokoro_voice_name(m, i);
        if (v && strlen(v) == len && memcmp(v, name, len) == 0) return i;
    }
    return -1;
}

static int32_t voice_not_found(const ez_kokoro *m, const char *name, size_t len) {
    ez_strbuf sb = {0};
    char *known;
    int32_t rc;
    int n = ez_kokoro_voice_count(m);
    for (int i = 0; i < n && i < 16; i++) ez_sb_printf(&sb, "%s%s", i ? ", " : "", ez_kokoro_voice_name(m, i));
    if (n > 16) ez_sb_printf(&sb, ", ... (%d in all)", n);
    known = ez_sb_take(&sb);
    rc = ez_fail(ELIZA_E_NOT_FOUND, "voice '%.*s' is not in the model (voices: %s)", (int)EZ_MIN(len, 200), name,
                 known ? known : "?");
    free(known);
    return rc;
}

static int is_space(char c) { return c == ' ' || c == '\t'; }

int32_t ez_tts_blend_parse(const ez_kokoro *m, const char *spec, ez_tts_blend *out) {
    const char *p = spec;
    double sum = 0.0;
    out->n = 0;
    if (ez_kokoro_voice_count(m) <= 0) return ez_fail(ELIZA_E_NOT_FOUND, "the model has no voices");
    if (!spec) {
        out->n = 1;
        out->index[0] = 0;
        out->weight[0] = 1.0f;
        return ELIZA_OK;
    }
    for (;;) {
        const char *item = p, *item_end, *colon, *name_end;
        double w = 1.0;
        int idx;
        while (*p && *p != ',') p++;
        item_end = p;
        while (item < item_end && is_space(*item)) item++;
        while (item_end > item && is_space(item_end[-1])) item_end--;
        for (colon = item; colon < item_end && *colon != ':'; colon++) {}
        if (colon == item_end) colon = NULL;
        name_end = colon ? colon : item_end;
        while (name_end > item && is_space(name_end[-1])) name_end--;
        if (name_end == item) return ez_fail(ELIZA_E_INVALID_ARG, "voice '%.200s': an entry has no name", spec);
        if (colon) {
            char num[64], *num_end;
            size_t len = (size_t)(item_end - colon - 1);
            if (len == 0 || len >= sizeof num)
                return ez_fail(ELIZA_E_INVALID_ARG, "voice '%.200s': bad weight for '%.*s'", spec,
                               (int)EZ_MIN(name_end - item, 200), item);
            memcpy(num, colon + 1, len);
            num[len] = '\0';
            w = strtod(num, &num_end);
            while (is_space(*num_end)) num_end++;
            if (num_end == num || *num_end != '\0' || !isfinite(w) || !(w > 0.0) || w > 1e30)
                return ez_fail(ELIZA_E_INVALID_ARG, "voice '%.200s': the weight of '%.*s' must be a finite number > 0",
                               spec, (int)EZ_MIN(name_end - item, 200), item);
        }
        idx = find_voice(m, item, (size_t)(name_end - item));
        if (idx < 0) return voice_not_found(m, item, (size_t)(name_end - item));
        if (out->n == EZ_TTS_MAX_BLEND)
            return ez_fail(ELIZA_E_INVALID_ARG, "voice '%.40s...': more than %d voices", spec, EZ_TTS_MAX_BLEND);
        out->index[out->n] = idx;
        out->weight[out->n++] = (float)w;
        sum += w;
        if (!*p) break;
        p++;
    }
    for (int i = 0; i < out->n; i++) out->weight[i] = (float)(out->weight[i] / sum);
    /* Styles of two languages make no voice of either (kokoro's voices are
     * trained per language): refused. A voice of unknown language mixes. */
    for (int i = 1; i < out->n; i++) {
        const char *a = ez_kokoro_voice_language(m, out->index[0]), *b = ez_kokoro_voice_language(m, out->index[i]);
        if (a && b && *a && *b && strcmp(a, b) != 0)
            return ez_fail(ELIZA_E_INVALID_ARG, "voice '%.200s' blends %s (%s) with %s (%s): blend voices of one "
                           "language", spec, ez_kokoro_voice_name(m, out->index[0]), a,
                           ez_kokoro_voice_name(m, out->index[i]), b);
    }
    return ELIZA_OK;
}

void ez_tts_blend_style(const ez_kokoro *m, const ez_tts_blend *b, int n_phonemes, float *style) {
    int row = EZ_MIN(EZ_MAX(n_phonemes, 1), EZ_KOKORO_MAX_PHONEMES) - 1;
    float r[EZ_KOKORO_STYLE_DIM];
    memset(style, 0, sizeof(float) * EZ_KOKORO_STYLE_DIM);
    for (int k = 0; k < b->n; k++) {
        ez_kokoro_voice_style(m, b->index[k], row, r);
        for (int d = 0; d < EZ_KOKORO_STYLE_DIM; d++) style[d] += b->weight[k] * r[d];
    }
}
