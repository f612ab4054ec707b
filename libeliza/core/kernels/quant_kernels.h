/* Shared pieces of the quantization kernels (private to core/quant.c and
 * core/kernels/quant_*.c): the scalar helpers every instruction set needs
 * bit-for-bit, the reference kernels that fast tables reuse where SIMD does
 * not pay, and the NEON kernels the dotprod table builds on. */
#ifndef EZ_QUANT_KERNELS_H
#define EZ_QUANT_KERNELS_H

#include <string.h>

#include "core/quant.h"

/* IEEE binary16 -> binary32, exact. NaN payloads are kept and a signalling
 * NaN stays signalling, as numpy's float16 -> float32 cast does (the F16C and
 * NEON converters quiet it instead, so fast paths fix those lanes up). */
static inline float ez_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    float f;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;
    } else {
        /* Subnormal half: mant * 2^-24, renormalized as a float. */
        uint32_t e = 127 - 15 + 1;
        while (!(mant & 0x400u)) {
            mant <<= 1;
            e--;
        }
        bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
    }
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint16_t ez_load_u16(const void *p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The 12 scale bytes of a Q4_K / Q5_K super-block hold eight 6-bit scales
 * and eight 6-bit mins: bytes 0-3 and 4-7 carry the low 6 bits of scales 0-3
 * and mins 0-3 (their top 2 bits are the high bits of scales/mins 4-7), and
 * bytes 8-11 carry the low 4 bits of scale (low nibble) and min (high nibble)
 * 4-7. Unpacked four at a time in 32-bit words; the masks drop the bits a
 * shift carries in from the neighbouring byte (little-endian hosts only, as
 * GGUF itself). */
static inline void ez_unpack_q4k_scales(const uint8_t s[12], uint8_t sc[8], uint8_t mn[8]) {
    uint32_t w[3], out[4];
    memcpy(w, s, sizeof w);
    out[0] = w[0] & 0x3f3f3f3fu;
    out[1] = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 2) & 0x30303030u);
    out[2] = w[1] & 0x3f3f3f3fu;
    out[3] = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 2) & 0x30303030u);
    memcpy(sc, out, 8);
    memcpy(mn, out + 2, 8);
}

/* The float16 super-block scale of an IQ1_M block, whose four bit groups
 * sit in the top nibbles of the four 16-bit scale words. */
static inline uint16_t ez_iq1_m_d(const ez_block_iq1_m *b) {
    uint16_t sc[4];
    memcpy(sc, b->scales, sizeof sc);
    return (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
}

/* Sub-block ib (32 elements) of a 256-element super-block of a grid i-quant,
 * IQ4_XS or TQ1_0 as integers: element j is ez_iq_sub32_d(type, blk) *
 * ls[j / 16] * v[j], exactly. v: grid magnitude times sign (IQ1: 8 * grid
 * +- 1, the delta folded in), IQ4_XS's table value, TQ1_0's trit - 1;
 * ls: the integer scales of the two halves. ez_iq_sub32_d is the
 * super-block scale times the type's power-of-two unit. The prompt tile
 * kernels (llm/ops_qtile.c) unpack these types with them. */
EZ_INTERNAL void ez_iq_sub32(uint32_t type, const void *blk, int ib, int8_t v[32], int ls[2]);
EZ_INTERNAL float ez_iq_sub32_d(uint32_t type, const void *blk);

/* Reference kernels reused by the fast tables. */
EZ_INTERNAL void ez_dequant_f32_ref(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_q4_1_ref(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_q5_1_ref(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_iq4_nl_ref(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_mxfp4_ref(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_q2_k_ref(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_q3_k_ref(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_iq4_xs_ref(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_tq1_0_ref(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_tq2_0_ref(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_iq2_xxs_ref(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_iq2_xs_ref(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_iq2_s_ref(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_iq3_xxs_ref(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_iq3_s_ref(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_iq1_s_ref(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_iq1_m_ref(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_quant_q8_0_ref(const float *src, void *dst, int64_t n);
EZ_INTERNAL void ez_quant_q8_k_ref(const float *src, void *dst, int64_t n);
EZ_INTERNAL void ez_quant_q8_1_ref(const float *src, void *dst, int64_t n);

/* NEON dequantizers the dotprod table shares (defined on aarch64 only). */
EZ_INTERNAL void ez_dequant_q4_0_neon(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_q5_0_neon(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_q8_0_neon(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_q4_k_neon(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_q5_k_neon(const void *src, float *dst, int64_t n);
EZ_INTERNAL void ez_dequant_q6_k_neon(const void *src, float *dst, int64_t n);

#endif /* EZ_QUANT_KERNELS_H */
