/* Type traits of every GGML type id, float16 conversions, and the choice of
 * kernel table per CPU. The kernels themselves live in core/kernels/quant_*.c. */
#include "quant.h"

#include <string.h>

#include "cpu.h"
#include "kernels/quant_kernels.h"

_Static_assert(sizeof(ez_block_q4_0) == 18, "Q4_0 block is 18 bytes");
_Static_assert(sizeof(ez_block_q5_0) == 22, "Q5_0 block is 22 bytes");
_Static_assert(sizeof(ez_block_q8_0) == 34, "Q8_0 block is 34 bytes");
_Static_assert(sizeof(ez_block_q4_k) == 144, "Q4_K block is 144 bytes");
_Static_assert(sizeof(ez_block_q5_k) == 176, "Q5_K block is 176 bytes");
_Static_assert(sizeof(ez_block_q6_k) == 210, "Q6_K block is 210 bytes");
_Static_assert(sizeof(ez_block_q8_k) == 292, "Q8_K block is 292 bytes");
_Static_assert(sizeof(ez_block_q4_1) == 20, "Q4_1 block is 20 bytes");
_Static_assert(sizeof(ez_block_q5_1) == 24, "Q5_1 block is 24 bytes");
_Static_assert(sizeof(ez_block_q8_1) == 40, "Q8_1 block is 40 bytes");
_Static_assert(sizeof(ez_block_iq4_nl) == 18, "IQ4_NL block is 18 bytes");
_Static_assert(sizeof(ez_block_mxfp4) == 17, "MXFP4 block is 17 bytes");
_Static_assert(sizeof(ez_block_q2_k) == 84, "Q2_K block is 84 bytes");
_Static_assert(sizeof(ez_block_q3_k) == 110, "Q3_K block is 110 bytes");
_Static_assert(sizeof(ez_block_iq4_xs) == 136, "IQ4_XS block is 136 bytes");
_Static_assert(sizeof(ez_block_tq1_0) == 54, "TQ1_0 block is 54 bytes");
_Static_assert(sizeof(ez_block_tq2_0) == 66, "TQ2_0 block is 66 bytes");
_Static_assert(sizeof(ez_block_iq2_xxs) == 66, "IQ2_XXS block is 66 bytes");
_Static_assert(sizeof(ez_block_iq2_xs) == 74, "IQ2_XS block is 74 bytes");
_Static_assert(sizeof(ez_block_iq2_s) == 82, "IQ2_S block is 82 bytes");
_Static_assert(sizeof(ez_block_iq3_xxs) == 98, "IQ3_XXS block is 98 bytes");
_Static_assert(sizeof(ez_block_iq3_s) == 110, "IQ3_S block is 110 bytes");
_Static_assert(sizeof(ez_block_iq1_s) == 50, "IQ1_S block is 50 bytes");
_Static_assert(sizeof(ez_block_iq1_m) == 56, "IQ1_M block is 56 bytes");

/* Block sizes and bytes per block as ggml's type_traits and gguf-py's
 * GGML_QUANT_SIZES (gguf 0.19.0) define them. Ids 4-5 (Q4_2, Q4_3), 31-33
 * (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8) and 36-38 (IQ4_NL_4_4, ...) were retired
 * from ggml; no current writer emits them, so they stay unknown here. */
static const ez_type_traits g_traits[EZ_TYPE_COUNT] = {
    [EZ_TYPE_F32] = {"F32", 1, 4, 1, EZ_TYPE_F32},
    [EZ_TYPE_F16] = {"F16", 1, 2, 1, EZ_TYPE_F32},
    [EZ_TYPE_Q4_0] = {"Q4_0", EZ_QK, 2 + EZ_QK / 2, 1, EZ_TYPE_Q8_0},
    [EZ_TYPE_Q4_1] = {"Q4_1", EZ_QK, 2 + 2 + EZ_QK / 2, 1, EZ_TYPE_Q8_1},
    [EZ_TYPE_Q5_0] = {"Q5_0", EZ_QK, 2 + 4 + EZ_QK / 2, 1, EZ_TYPE_Q8_0},
    [EZ_TYPE_Q5_1] = {"Q5_1", EZ_QK, 2 + 2 + 4 + EZ_QK / 2, 1, EZ_TYPE_Q8_1},
    [EZ_TYPE_Q8_0] = {"Q8_0", EZ_QK, 2 + EZ_QK, 1, EZ_TYPE_Q8_0},
    [EZ_TYPE_Q8_1] = {"Q8_1", EZ_QK, 4 + 4 + EZ_QK, 0, EZ_TYPE_F32},
    [EZ_TYPE_Q2_K] = {"Q2_K", EZ_QK_K, 2 + 2 + EZ_QK_K / 16 + EZ_QK_K / 4, 1, EZ_TYPE_Q8_K},
    [EZ_TYPE_Q3_K] = {"Q3_K", EZ_QK_K, 2 + EZ_QK_K / 4 + EZ_QK_K / 8 + 12, 1, EZ_TYPE_Q8_K},
    [EZ_TYPE_Q4_K] = {"Q4_K", EZ_QK_K, 2 + 2 + 12 + EZ_QK_K / 2, 1, EZ_TYPE_Q8_K},
    [EZ_TYPE_Q5_K] = {"Q5_K", EZ_QK_K, 2 + 2 + 12 + EZ_QK_K / 8 + EZ_QK_K / 2, 1, EZ_TYPE_Q8_K},
    [EZ_TYPE_Q6_K] = {"Q6_K", EZ_QK_K, EZ_QK_K / 2 + EZ_QK_K / 4 + EZ_QK_K / 16 + 2, 1, EZ_TYPE_Q8_K},
    [EZ_TYPE_Q8_K] = {"Q8_K", EZ_QK_K, 4 + EZ_QK_K + EZ_QK_K / 8, 0, EZ_TYPE_F32},
    [EZ_TYPE_IQ2_XXS] = {"IQ2_XXS", EZ_QK_K, 2 + EZ_QK_K / 4, 1, EZ_TYPE_Q8_K},
    [EZ_TYPE_IQ2_XS] = {"IQ2_XS", EZ_QK_K, 2 + EZ_QK_K / 4 + EZ_QK_K / 32, 1, EZ_TYPE_Q8_K},
    [EZ_TYPE_IQ3_XXS] = {"IQ3_XXS", EZ_QK_K, 2 + EZ_QK_K / 4 + EZ_QK_K / 8, 1, EZ_TYPE_Q8_K},
    [EZ_TYPE_IQ1_S] = {"IQ1_S", EZ_QK_K, 2 + EZ_QK_K / 8 + EZ_QK_K / 16, 1, EZ_TYPE_Q8_K},
    [EZ_TYPE_IQ4_NL] = {"IQ4_NL", EZ_QK, 2 + EZ_QK / 2, 1, EZ_TYPE_Q8_0},
    [EZ_TYPE_IQ3_S] = {"IQ3_S", EZ_QK_K, 2 + EZ_QK_K / 4 + EZ_QK_K / 8 + EZ_QK_K / 32 + 4, 1, EZ_TYPE_Q8_K},
    [EZ_TYPE_IQ2_S] = {"IQ2_S", EZ_QK_K, 2 + EZ_QK_K / 4 + EZ_QK_K / 16, 1, EZ_TYPE_Q8_K},
    [EZ_TYPE_IQ4_XS] = {"IQ4_XS", EZ_QK_K, 2 + 2 + EZ_QK_K / 2 + EZ_QK_K / 64, 1, EZ_TYPE_Q8_K},
    [EZ_TYPE_I8] = {"I8", 1, 1, 0, EZ_TYPE_F32},
    [EZ_TYPE_I16] = {"I16", 1, 2, 0, EZ_TYPE_F32},
    [EZ_TYPE_I32] = {"I32", 1, 4, 0, EZ_TYPE_F32},
    [EZ_TYPE_I64] = {"I64", 1, 8, 0, EZ_TYPE_F32},
    [EZ_TYPE_F64] = {"F64", 1, 8, 0, EZ_TYPE_F32},
    [EZ_TYPE_IQ1_M] = {"IQ1_M", EZ_QK_K, EZ_QK_K / 8 + EZ_QK_K / 16 + EZ_QK_K / 32, 1, EZ_TYPE_Q8_K},
    [EZ_TYPE_BF16] = {"BF16", 1, 2, 1, EZ_TYPE_F32},
    [EZ_TYPE_TQ1_0] = {"TQ1_0", EZ_QK_K, 2 + 4 * 13, 1, EZ_TYPE_Q8_K},
    [EZ_TYPE_TQ2_0] = {"TQ2_0", EZ_QK_K, 2 + 64, 1, EZ_TYPE_Q8_K},
    [EZ_TYPE_MXFP4] = {"MXFP4", 32, 1 + 16, 1, EZ_TYPE_Q8_0},
    [EZ_TYPE_NVFP4] = {"NVFP4", 64, 4 + 32, 0, EZ_TYPE_F32},
    [EZ_TYPE_Q1_0] = {"Q1_0", 128, 2 + 16, 0, EZ_TYPE_F32},
};

const ez_type_traits *ez_type_traits_of(uint32_t type) {
    if (type >= EZ_TYPE_COUNT || !g_traits[type].name) return NULL;
    return &g_traits[type];
}

uint64_t ez_row_bytes(uint32_t type, uint64_t n) {
    const ez_type_traits *tr = ez_type_traits_of(type);
    uint64_t bytes;
    if (!tr || n % tr->block_size != 0) return 0;
    if (!ez_mul_u64(n / tr->block_size, tr->type_size, &bytes)) return 0;
    return bytes;
}

const ez_type_kernels *ez_kernels(uint32_t type) {
    if (!ez_type_traits_of(type)) return NULL;
    return EZ_SIMD_PICK(ez_kernels_avx512(type), ez_kernels_avx2(type), ez_kernels_neon_dotprod(type),
                        ez_kernels_neon(type), ez_kernels_ref(type));
}

float ez_f16_to_f32(uint16_t h) {
    return ez_half_to_float(h);
}

uint16_t ez_f32_to_f16(float f) {
    uint32_t x, ax, sign;
    memcpy(&x, &f, sizeof x);
    sign = (x >> 16) & 0x8000u;
    ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: quiet, top payload bits kept (as F16C does) */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x38800000u) {
        /* Normal half range (>= 2^-14): rebias the exponent and round the 13
         * dropped mantissa bits to nearest even; a carry out of the mantissa
         * bumps the exponent, and everything from 65520 up becomes inf. */
        uint32_t r = ax - ((uint32_t)(127 - 15) << 23);
        uint32_t h = (r + 0x0fffu + ((r >> 13) & 1u)) >> 13;
        return (uint16_t)(sign | (h >= 0x7c00u ? 0x7c00u : h));
    }
    {
        /* Below 2^-14 the half is subnormal: round |f| / 2^-24 to nearest
         * even. |f| = m * 2^(e-150), so the quotient is m >> (126 - e). */
        uint32_t e = ax >> 23;
        uint32_t m, s, q, rem, half;
        if (e < 102) return (uint16_t)sign; /* below 2^-25: rounds to zero */
        m = (ax & 0x7fffffu) | 0x800000u;
        s = 126 - e;
        q = m >> s;
        rem = m & ((1u << s) - 1);
        half = 1u << (s - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
}

float ez_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
