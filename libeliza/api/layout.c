/* eliza_abi_layout_json(): sizeof/_Alignof/offsetof of every public struct of
 * eliza.h as this binary was compiled, so bindings (the Python ctypes
 * mirrors, and anyone else's) can prove they agree with the library before
 * they pass a struct across. tests/test_abi_layout.py checks this report
 * against a probe compiled from the header and against the Python mirrors. */
#include <inttypes.h>
#include <stddef.h>

#include "core/common.h"
#include "core/platform.h"
#include "core/strbuf.h"

/* The public structs, one entry each: S(type, F(field) F(field) ...) with
 * every field in declaration order. A struct added to eliza.h gets a line
 * here; a field appended to a struct gets an F() here, or the build fails
 * (see the coverage check below). */
#define ELIZA_PUBLIC_STRUCTS(S)                                                                  \
    S(eliza_gguf_info_params, F(struct_size) F(max_array_items) F(include_tensors) F(reserved))  \
    S(eliza_llm_params, F(struct_size) F(n_threads) F(context_size) F(n_batch) F(kv_type) F(kv_type_v) \
      F(draft_kind) F(draft_max_tokens) F(draft_path) F(n_gpu_layers) F(gpu_device) F(gpu_required)) \
    S(eliza_llm_stream_config, F(struct_size) F(flags) F(prompt) F(max_tokens) F(temperature)     \
      F(top_k) F(top_p) F(min_p) F(repeat_penalty) F(repeat_last_n) F(seed) F(stop) F(n_stop)    \
      F(context_size))                                                                            \
    S(eliza_llm_piece, F(struct_size) F(token) F(text) F(text_len))                               \
    S(eliza_llm_stats, F(struct_size) F(prompt_tokens) F(generated_tokens) F(stop_reason)         \
      F(prefill_ms) F(decode_ms) F(prefill_tokens_per_s) F(decode_tokens_per_s) F(draft_tokens)   \
      F(draft_accepted) F(draft_rounds) F(prompt_evaluated))                                      \
    S(eliza_chat_message, F(role) F(content))                                                     \
    S(eliza_tts_params, F(struct_size) F(n_threads) F(espeak_library) F(espeak_data) F(language)) \
    S(eliza_tts_config, F(struct_size) F(text) F(voice) F(speed) F(flags) F(seed) F(language))    \
    S(eliza_tts_chunk, F(struct_size) F(index) F(pcm) F(n_samples) F(phonemes))                   \
    S(eliza_diarizer_params, F(struct_size) F(n_threads))                                         \
    S(eliza_diarize_options, F(struct_size) F(step) F(num_speakers) F(min_speakers)               \
      F(max_speakers) F(threshold) F(min_duration_on) F(min_duration_off) F(batch_size)           \
      F(exclusive) F(identify_threshold) F(latency))                                              \
    S(eliza_diarize_turn, F(start) F(end) F(speaker) F(confidence))

#define ROUND_UP(n, a) (((n) + (a) - 1) / (a) * (a))
#define FIELD_END(T, f) (offsetof(T, f) + sizeof(((T *)0)->f))

typedef struct {
    const char *name;
    uint64_t offset, size;   /* bytes */
} field_layout;

static void emit_struct(ez_strbuf *sb, const char *name, uint64_t size, uint64_t align,
                        const field_layout *fields, size_t n_fields) {
    if (sb->len > 1) ez_sb_puts(sb, ",");
    ez_sb_printf(sb, "\"%s\":{\"size\":%" PRIu64 ",\"align\":%" PRIu64 ",\"fields\":{",
                 name, size, align);
    for (size_t i = 0; i < n_fields; i++)
        ez_sb_printf(sb, "%s\"%s\":[%" PRIu64 ",%" PRIu64 "]", i ? "," : "",
                     fields[i].name, fields[i].offset, fields[i].size);
    ez_sb_puts(sb, "}}");
}

static char *build_layout_json(void) {
    ez_strbuf sb = {0};

    /* Coverage, at compile time: some listed field must end within the
     * struct's final alignment unit, i.e. the last listed field's end rounded
     * up to _Alignof(T) is sizeof(T). A field appended to the header but
     * missing from the table fails the build here, unless it fits in what
     * would otherwise be tail padding; C cannot see that case, nor names,
     * order or inner gaps: tests/test_abi_layout.py checks them against a
     * probe compiled from the header. */
#define F(f) || ROUND_UP(FIELD_END(layout_t, f), _Alignof(layout_t)) == sizeof(layout_t)
#define S(T, FIELDS)                                                          \
    {                                                                         \
        typedef T layout_t;                                                   \
        _Static_assert(0 FIELDS, #T ": a field of the struct is missing from" \
                                    " ELIZA_PUBLIC_STRUCTS in layout.c");     \
    }
    ELIZA_PUBLIC_STRUCTS(S)
#undef S
#undef F

#define F(f) {#f, offsetof(layout_t, f), sizeof(((layout_t *)0)->f)},
#define S(T, FIELDS)                                                          \
    {                                                                         \
        typedef T layout_t;                                                   \
        static const field_layout fields[] = {FIELDS};                        \
        emit_struct(&sb, #T, sizeof(T), _Alignof(T), fields,                  \
                    sizeof fields / sizeof fields[0]);                        \
    }
    ez_sb_puts(&sb, "{");
    ELIZA_PUBLIC_STRUCTS(S)
    ez_sb_puts(&sb, "}");
#undef S
#undef F
    return ez_sb_take(&sb);
}

ELIZA_API const char *eliza_abi_layout_json(void) {
    /* Built once and kept for the life of the process; a failed allocation
     * is not cached, so a later call tries again. */
    static const char *json;
    const char *out;
    ez_global_lock();
    if (!json) json = build_layout_json();
    out = json;
    ez_global_unlock();
    return out ? out : "{}";
}
