/* Chat templates (llm/chat.c through eliza_llm_chat_apply): recognition by
 * name and by a Jinja template's markers, a few renderings written out as
 * llama.cpp's llama_chat_apply_template gives them, the refusal of unknown
 * templates and of messages without text. tests/llm/test_chat.py compares
 * every template with llama.cpp itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eliza.h"
#include "check.h"

static const eliza_chat_message k_conv[] = {
    {"system", "Be brief. "}, {"user", " Hi "}, {"assistant", "Hello"}, {"user", "Bye"}};
#define N_CONV (sizeof k_conv / sizeof k_conv[0])

static int renders(const char *tmpl, uint32_t add, const char *want) {
    char *out = NULL;
    size_t n = 0;
    int ok;
    int32_t rc = eliza_llm_chat_apply(NULL, tmpl, k_conv, N_CONV, add, &out, &n);
    ok = rc == ELIZA_OK && out && strlen(out) == n && strcmp(out, want) == 0;
    if (!ok) fprintf(stderr, "template '%s': rc %d, got '%s'\n", tmpl, rc, out ? out : "(null)");
    eliza_free(out);
    return ok;
}

static void test_templates_render_like_llama_cpp(void) {
    CHECK(renders("chatml", 1,
                  "<|im_start|>system\nBe brief. <|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n"
                  "<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
                  "<|im_start|>assistant\n"));
    /* Gemma folds the system message into the first user turn and trims. */
    CHECK(renders("gemma", 1,
                  "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello"
                  "<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"));
    CHECK(renders("llama3", 0,
                  "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\nHello<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"));
    CHECK(renders("phi3", 1,
                  "<|system|>\nBe brief. <|end|>\n<|user|>\n Hi <|end|>\n<|assistant|>\nHello<|end|>\n"
                  "<|user|>\nBye<|end|>\n<|assistant|>\n"));
    CHECK(renders("mistral-v7", 1,
                  "[SYSTEM_PROMPT] Be brief. [/SYSTEM_PROMPT][INST]  Hi [/INST] Hello</s>[INST] Bye[/INST]"));
    CHECK(renders("smolvlm", 1,
                  "<|im_start|>Be brief. \n\nUser:  Hi <end_of_utterance>\nAssistant: Hello"
                  "<end_of_utterance>\nUser: Bye<end_of_utterance>\nAssistant:"));
    /* A Jinja template is recognized by its markers. */
    CHECK(renders("{% for m in messages %}<|im_start|>{{ m.role }}...{% endfor %}", 0,
                  "<|im_start|>system\nBe brief. <|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n"
                  "<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"));
    CHECK(strcmp(eliza_chat_template_name("{{ '<start_of_turn>' }}"), "gemma") == 0);
    CHECK(strcmp(eliza_chat_template_name("granite-4.0"), "granite-4.0") == 0);
    CHECK(eliza_chat_template_name("{{ messages }}") == NULL);
    CHECK(eliza_chat_template_name(NULL) == NULL);
}

static void test_bad_input_is_refused(void) {
    char *out = (char *)1;
    size_t n = 7;
    static const eliza_chat_message no_content[] = {{"user", NULL}};
    CHECK_RC(eliza_llm_chat_apply(NULL, "{{ messages }}", k_conv, N_CONV, 1, &out, &n), ELIZA_E_UNSUPPORTED);
    CHECK(out == NULL && n == 0);
    CHECK(strstr(eliza_last_error(), "not recognized") != NULL);
    CHECK_RC(eliza_llm_chat_apply(NULL, "chatml", no_content, 1, 1, &out, &n), ELIZA_E_INVALID_ARG);
    CHECK_RC(eliza_llm_chat_apply(NULL, NULL, k_conv, N_CONV, 1, &out, &n), ELIZA_E_INVALID_ARG);
    CHECK_RC(eliza_llm_chat_apply(NULL, "chatml", NULL, 1, 1, &out, &n), ELIZA_E_INVALID_ARG);
    CHECK_RC(eliza_llm_chat_apply(NULL, "chatml", k_conv, N_CONV, 1, NULL, &n), ELIZA_E_INVALID_ARG);
    /* No messages: only the assistant's opening. */
    CHECK_RC(eliza_llm_chat_apply(NULL, "chatml", NULL, 0, 1, &out, &n), ELIZA_OK);
    CHECK(out && strcmp(out, "<|im_start|>assistant\n") == 0 && n == 22);
    eliza_free(out);
}

int main(void) {
    test_templates_render_like_llama_cpp();
    test_bad_input_is_refused();
    if (g_failed) {
        fprintf(stderr, "test_chat: %d checks FAILED\n", g_failed);
        return 1;
    }
    printf("test_chat: %d checks passed\n", g_passed);
    return 0;
}
