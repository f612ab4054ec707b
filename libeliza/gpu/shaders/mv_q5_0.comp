#version 450
// Q5_0 (22 bytes): F16 d, a 32-bit word of fifth bits (bit j for element
// j), then Q4_0's nibbles; value d * (q - 16).
#include "matvec.glsl"

// Bits 0..3 of h spread to the low bit of each byte, shifted up by 4.
uint spread4(uint h) { return ((h & 1u) | ((h & 2u) << 7) | ((h & 4u) << 14) | ((h & 8u) << 21)) << 4; }

float quad_dot(uint base, uint q, vec4 xq) {
    const uint o = base + 22 * (q / 8), i = q % 8;
    const uint nib = (word_at(o + 6 + 4 * (i % 4)) >> (4 * (i / 4))) & 0x0f0f0f0fu;
    return f16_at(o) * dot(u8x4(nib | spread4(word_at(o + 2) >> (4 * i))) - 16.0, xq);
}
