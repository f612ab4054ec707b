/* Whether this build can run a GGUF language model, told from its metadata
 * and tensor table alone (no weights read), for `eliza info MODEL.gguf`. */
#ifndef EZ_LLM_CHECK_H
#define EZ_LLM_CHECK_H

#include "core/gguf.h"
#include "core/strbuf.h"

/* Appends the JSON object of eliza_llm_check_json() for g to sb. */
EZ_INTERNAL void ez_llm_check(const ez_gguf *g, ez_strbuf *sb);

#endif /* EZ_LLM_CHECK_H */
