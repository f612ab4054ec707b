/* NEON + dotprod (ARMv8.2 SDOT) quantized dots; this file is compiled with
 * -march=armv8.2-a+dotprod and only called when the CPU reports dotprod.
 * Dequantization and the float dots are the NEON ones. */
#include "quant_kernels.h"

#if defined(EZ_ARCH_AARCH64) && defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>

static inline int32x4_t dot_i8x16(int32x4_t acc, int8x16_t a, int8x16_t b) {
    return vdotq_s32(acc, a, b);
}

#include "quant_neon_dots.h"

static const ez_type_kernels g_dotprod[EZ_TYPE_COUNT] = {
    [EZ_TYPE_Q4_0] = {ez_dequant_q4_0_neon, NULL, dot_q4_0_q8_0},
    [EZ_TYPE_Q5_0] = {ez_dequant_q5_0_neon, NULL, dot_q5_0_q8_0},
    [EZ_TYPE_Q8_0] = {ez_dequant_q8_0_neon, ez_quant_q8_0_ref, dot_q8_0_q8_0},
    [EZ_TYPE_Q4_K] = {ez_dequant_q4_k_neon, NULL, dot_q4_k_q8_k},
    [EZ_TYPE_Q5_K] = {ez_dequant_q5_k_neon, NULL, dot_q5_k_q8_k},
    [EZ_TYPE_Q6_K] = {ez_dequant_q6_k_neon, NULL, dot_q6_k_q8_k},
    [EZ_TYPE_Q4_1] = {ez_dequant_q4_1_ref, NULL, dot_q4_1_q8_1},
    [EZ_TYPE_Q5_1] = {ez_dequant_q5_1_ref, NULL, dot_q5_1_q8_1},
    [EZ_TYPE_IQ4_NL] = {ez_dequant_iq4_nl_ref, NULL, dot_iq4_nl_q8_0},
    [EZ_TYPE_MXFP4] = {ez_dequant_mxfp4_ref, NULL, dot_mxfp4_q8_0},
    [EZ_TYPE_Q2_K] = {ez_dequant_q2_k_ref, NULL, dot_q2_k_q8_k},
    [EZ_TYPE_Q3_K] = {ez_dequant_q3_k_ref, NULL, dot_q3_k_q8_k},
    [EZ_TYPE_IQ4_XS] = {ez_dequant_iq4_xs_ref, NULL, dot_iq4_xs_q8_k},
    [EZ_TYPE_TQ2_0] = {ez_dequant_tq2_0_ref, NULL, dot_tq2_0_q8_k},
    [EZ_TYPE_TQ1_0] = {ez_dequant_tq1_0_ref, NULL, dot_tq1_0_q8_k},
    [EZ_TYPE_IQ2_XXS] = {ez_dequant_iq2_xxs_ref, NULL, dot_iq2_xxs_q8_k},
    [EZ_TYPE_IQ2_XS] = {ez_dequant_iq2_xs_ref, NULL, dot_iq2_xs_q8_k},
    [EZ_TYPE_IQ2_S] = {ez_dequant_iq2_s_ref, NULL, dot_iq2_s_q8_k},
    [EZ_TYPE_IQ3_XXS] = {ez_dequant_iq3_xxs_ref, NULL, dot_iq3_xxs_q8_k},
    [EZ_TYPE_IQ3_S] = {ez_dequant_iq3_s_ref, NULL, dot_iq3_s_q8_k},
    [EZ_TYPE_IQ1_S] = {ez_dequant_iq1_s_ref, NULL, dot_iq1_s_q8_k},
    [EZ_TYPE_IQ1_M] = {ez_dequant_iq1_m_ref, NULL, dot_iq1_m_q8_k},
};

/* Types without an integer dot (floats, Q8_K) fall back to the NEON table
 * in ez_kernels(). */
const ez_type_kernels *ez_kernels_neon_dotprod(uint32_t type) {
    if (type >= EZ_TYPE_COUNT || !g_dotprod[type].dot) return NULL;
    return &g_dotprod[type];
}

#else

/* Not aarch64, or a compiler that did not enable dotprod for this file
 * (MSVC): the NEON table serves dotprod CPUs too. */
const ez_type_kernels *ez_kernels_neon_dotprod(uint32_t type) {
    (void)type;
    return NULL;
}

#endif
