/* The GPU backend of a build without Vulkan (no glslc, spirv-val or Vulkan
 * headers at build time): nothing opens, and the capabilities say why. */
#include <string.h>

#include "core/error.h"
#include "gpu.h"

void ez_gpu_params_default(ez_gpu_params *p) { memset(p, 0, sizeof *p); }

int32_t ez_gpu_open(const ez_gpu_params *p, ez_gpu **out) {
    (void)p;
    *out = NULL;
    return ez_fail(ELIZA_E_UNSUPPORTED, "this build has no GPU backend (built without glslc / Vulkan headers)");
}

void ez_gpu_close(ez_gpu *g) { (void)g; }

void ez_gpu_append_capabilities(ez_strbuf *sb) {
    ez_sb_puts(sb, "\"gpu\": {\"backend\": null, \"devices\": [], "
                   "\"reason\": \"built without the Vulkan backend (glslc / Vulkan headers not found)\"}");
}
