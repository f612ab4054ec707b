/* Making drafters by kind; see draft.h. */
#include "draft.h"

#include "core/error.h"
#include "draft_mtp.h"

const char *ez_draft_kind_name(int kind) {
    switch (kind) {
    case EZ_DRAFT_NONE: return "none";
    case EZ_DRAFT_NGRAM: return "ngram";
    case EZ_DRAFT_MTP: return "mtp";
    case EZ_DRAFT_MODEL: return "model";
    default: return "?";
    }
}

int ez_draft_kind_available(int kind) {
    return kind == EZ_DRAFT_NGRAM || kind == EZ_DRAFT_MTP || kind == EZ_DRAFT_MODEL;
}

int32_t ez_drafter_open(const ez_draft_open_params *p, ez_drafter **out) {
    *out = NULL;
    if (!p->target) return ez_fail(ELIZA_E_INVALID_ARG, "a drafter needs its target model");
    if (p->k_max < 1 || p->k_max > EZ_DRAFT_MAX)
        return ez_fail(ELIZA_E_INVALID_ARG, "draft_max_tokens %d is outside 1..%d", p->k_max, EZ_DRAFT_MAX);
    switch (p->kind) {
    case EZ_DRAFT_NGRAM: return ez_drafter_ngram_open(p, out);
    case EZ_DRAFT_MTP: return ez_draft_mtp_open(p, out);
    case EZ_DRAFT_MODEL:
        if (!p->path) return ez_fail(ELIZA_E_INVALID_ARG, "draft kind 'model' needs the draft model's path");
        return ez_drafter_model_open(p, out);
    default: return ez_fail(ELIZA_E_INVALID_ARG, "draft kind %d is not an eliza_llm_draft_kind", (int)p->kind);
    }
}

void ez_drafter_free(ez_drafter *d) {
    if (d) d->vt->free(d);
}
