/* Library-wide entry points: versions, capabilities, errors, memory, logging. */
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/platform.h"
#include "core/quant.h"
#include "core/strbuf.h"
#include "gpu/gpu.h"
#include "llm/draft.h"
#include "tts/ops.h"

#ifndef ELIZA_VERSION_STRING
#define ELIZA_VERSION_STRING "0.0.0"
#endif

uint32_t eliza_abi_version(void) { return ELIZA_ABI_VERSION; }

const char *eliza_version(void) { return ELIZA_VERSION_STRING; }

const char *eliza_last_error(void) { return ez_error_message(); }

void eliza_free(void *ptr) { free(ptr); }

void eliza_set_log_callback(eliza_log_fn fn, int32_t max_level, void *user_data) {
    ez_log_set_callback(fn, max_level, user_data);
}

const char *eliza_status_name(int32_t status) {
    switch (status) {
    case ELIZA_OK: return "ELIZA_OK";
    case ELIZA_DONE: return "ELIZA_DONE";
    case ELIZA_E_INVALID_ARG: return "ELIZA_E_INVALID_ARG";
    case ELIZA_E_IO: return "ELIZA_E_IO";
    case ELIZA_E_FORMAT: return "ELIZA_E_FORMAT";
    case ELIZA_E_UNSUPPORTED: return "ELIZA_E_UNSUPPORTED";
    case ELIZA_E_NOMEM: return "ELIZA_E_NOMEM";
    case ELIZA_E_CANCELLED: return "ELIZA_E_CANCELLED";
    case ELIZA_E_ABI: return "ELIZA_E_ABI";
    case ELIZA_E_NOT_FOUND: return "ELIZA_E_NOT_FOUND";
    case ELIZA_E_CONTEXT_FULL: return "ELIZA_E_CONTEXT_FULL";
    case ELIZA_E_STATE: return "ELIZA_E_STATE";
    case ELIZA_E_INTERNAL: return "ELIZA_E_INTERNAL";
    default: return "ELIZA_E_UNKNOWN";
    }
}

/* espeak-ng is GPL-3.0: it is only ever loaded at run time, never linked.
 * This probe answers "could the TTS engine find it without being told where"
 * ($ELIZA_ESPEAK_LIBRARY, then the system) for the capabilities report; a
 * host can still pass a path in eliza_tts_params. */
static int espeak_ng_loadable(void) {
    static const char *const names[] = {
#if defined(_WIN32)
        "libespeak-ng.dll", "espeak-ng.dll",
#elif defined(__APPLE__)
        "libespeak-ng.1.dylib", "libespeak-ng.dylib",
#else
        "libespeak-ng.so.1", "libespeak-ng.so",
#endif
    };
    const char *env = getenv("ELIZA_ESPEAK_LIBRARY");
    size_t i;
    if (env && *env) {
        void *lib = ez_dlopen(env);
        if (lib) {
            ez_dlclose(lib);
            return 1;
        }
    }
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *lib = ez_dlopen(names[i]);
        if (lib) {
            ez_dlclose(lib);
            return 1;
        }
    }
    return 0;
}

static void append_cpu_features(ez_strbuf *sb, uint32_t f) {
    static const struct { uint32_t bit; const char *name; } names[] = {
        {EZ_CPU_AVX2, "avx2"}, {EZ_CPU_FMA, "fma"}, {EZ_CPU_F16C, "f16c"},
        {EZ_CPU_AVX512F, "avx512f"}, {EZ_CPU_AVX512BW, "avx512bw"},
        {EZ_CPU_AVX512VL, "avx512vl"}, {EZ_CPU_AVX512DQ, "avx512dq"}, {EZ_CPU_AVX512VNNI, "avx512vnni"},
        {EZ_CPU_AVX512BF16, "avx512bf16"}, {EZ_CPU_AVX512VBMI, "avx512vbmi"}, {EZ_CPU_AVXVNNI, "avxvnni"},
        {EZ_CPU_NEON, "neon"},
        {EZ_CPU_DOTPROD, "dotprod"}, {EZ_CPU_FP16, "fp16"},
    };
    size_t i;
    int first = 1;
    ez_sb_puts(sb, "[");
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!(f & names[i].bit)) continue;
        ez_sb_printf(sb, "%s\"%s\"", first ? "" : ", ", names[i].name);
        first = 0;
    }
    ez_sb_puts(sb, "]");
}

static void append_quant_types(ez_strbuf *sb) {
    uint32_t t;
    int first = 1;
    ez_sb_puts(sb, "[");
    for (t = 0; t < EZ_TYPE_COUNT; t++) {
        const ez_type_traits *tr = ez_type_traits_of(t);
        if (!tr || !tr->has_kernels) continue;
        ez_sb_printf(sb, "%s\"%s\"", first ? "" : ", ", tr->name);
        first = 0;
    }
    ez_sb_puts(sb, "]");
}

static const char *build_capabilities(void) {
    const ez_cpu_info *cpu = ez_cpu_info_get();
    ez_strbuf sb = {0};
    ez_sb_printf(&sb, "{\"abi\": %d, \"version\": \"%s\", ", ELIZA_ABI_VERSION, ELIZA_VERSION_STRING);
    ez_sb_printf(&sb, "\"simd\": \"%s\", \"force_scalar\": %s, \"cpu\": ",
                 ez_simd_level_name(ez_simd_level_active()), ez_force_scalar() ? "true" : "false");
    append_cpu_features(&sb, cpu->features);
    ez_sb_printf(&sb, ", \"cpu_id\": {\"vendor\": \"%s\", \"family\": %u, \"model\": %u}",
                 ez_cpu_vendor_name(cpu->vendor), cpu->family, cpu->model);
    ez_sb_printf(&sb, ", \"n_cpus\": %d, \"quant_types\": ", ez_cpu_count());
    append_quant_types(&sb);
    ez_sb_puts(&sb, ", \"engines\": {\"llm\": true, \"tts\": true, \"diarization\": true}");
    {
        const char *why;
        const int on = ez_tts_bf16_default(&why);
        ez_sb_printf(&sb, ", \"tts_bf16\": {\"available\": %s, \"on\": %s, \"why\": \"%s\"}",
                     ez_tts_bf16_available() ? "true" : "false", on ? "true" : "false", why);
    }
    ez_sb_puts(&sb, ", \"llm_drafters\": [");
    for (int k = EZ_DRAFT_NONE + 1, first = 1; k < EZ_DRAFT_COUNT; k++) {
        if (!ez_draft_kind_available(k)) continue;
        ez_sb_printf(&sb, "%s\"%s\"", first ? "" : ", ", ez_draft_kind_name(k));
        first = 0;
    }
    ez_sb_puts(&sb, "]");
    ez_sb_printf(&sb, ", \"espeak_ng\": %s, ", espeak_ng_loadable() ? "true" : "false");
    ez_gpu_append_capabilities(&sb);
    ez_sb_puts(&sb, "}");
    return ez_sb_take(&sb);
}

const char *eliza_capabilities_json(void) {
    static const char *cached;
    const char *r;
    /* Built before taking the lock: ez_simd_level_active() takes it too. */
    ez_global_lock();
    r = cached;
    ez_global_unlock();
    if (r) return r;
    r = build_capabilities();
    if (!r) return "{}";
    ez_global_lock();
    if (!cached) {
        cached = r;
    } else {
        free((void *)r);
        r = cached;
    }
    ez_global_unlock();
    return r;
}
