#version 450
// Q4_0 weights for matmul.glsl (the layout: mv_q4_0.comp).
#include "matmul.glsl"

vec4 quad_deq(uint base, uint q) {
    const uint o = base + 18 * (q / 8), i = q % 8;
    const uint nib = (word_at(o + 2 + 4 * (i % 4)) >> (4 * (i / 4))) & 0x0f0f0f0fu;
    return f16_at(o) * (u8x4(nib) - 8.0);
}
