/* Chat templates as llama.cpp's llama_chat_apply_template applies them
 * (llama-chat.cpp of llama.cpp 0.3.36): a template is found by its name
 * ("chatml", "llama3", ...) or recognized in a Jinja template's text by the
 * same markers llama.cpp looks for, and rendered by hand-written rules, not by
 * a Jinja engine. */
#ifndef EZ_LLM_CHAT_H
#define EZ_LLM_CHAT_H

#include "core/common.h"

/* The template named or recognized in tmpl, or -1 when none is. */
EZ_INTERNAL int ez_chat_detect(const char *tmpl);

/* The name of template t (as ez_chat_detect accepts it). */
EZ_INTERNAL const char *ez_chat_name(int t);

/* Renders msgs[0..n) with template t; add_assistant ends the prompt with the
 * opening of an assistant turn where the template has one. *out is malloc'd
 * (free()), NUL-terminated, *len bytes. ELIZA_E_INVALID_ARG for a message
 * without role or content, ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_chat_apply(int t, const eliza_chat_message *msgs, size_t n,
                                  int add_assistant, char **out, size_t *len);

#endif /* EZ_LLM_CHAT_H */
