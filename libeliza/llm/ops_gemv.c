/* The multi-row matvec of the level in use (see ops.h, "gemv"). Only the
 * avx512 level has kernels: each sums exactly as that level's per-row dot,
 * so a kernel stands in for the dots of its own level only, never for
 * another level's. */
#include "core/cpu.h"
#include "ops.h"

ez_llm_gemv_fn ez_llm_gemv_active(uint32_t w_type) {
    return ez_simd_level_active() == EZ_SIMD_AVX512 ? ez_llm_gemv_avx512(w_type) : NULL;
}
