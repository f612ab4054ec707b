/* The Gemma 4 assistant drafter (draft_mtp.c): ez_drafter_open's case for
 * EZ_DRAFT_MTP. */
#ifndef EZ_LLM_DRAFT_MTP_H
#define EZ_LLM_DRAFT_MTP_H

#include "draft.h"

/* A drafter from the gemma4-assistant GGUF p->path for the gemma4 target
 * p->target (p->pool: the target's threads). ELIZA_E_INVALID_ARG for a
 * missing path, a file of another architecture, or a drafter whose
 * vocabulary, hidden size (embedding_length_out), KV heads or window do not
 * match the target's (the message names both); the file's own load
 * errors; ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_draft_mtp_open(const ez_draft_open_params *p, ez_drafter **out);

#endif /* EZ_LLM_DRAFT_MTP_H */
