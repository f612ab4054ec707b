#version 450
// Q5_0 weights for matmul.glsl (the layout: mv_q5_0.comp).
#include "matmul.glsl"

uint spread4(uint h) { return ((h & 1u) | ((h & 2u) << 7) | ((h & 4u) << 14) | ((h & 8u) << 21)) << 4; }

vec4 quad_deq(uint base, uint q) {
    const uint o = base + 22 * (q / 8), i = q % 8;
    const uint nib = (word_at(o + 6 + 4 * (i % 4)) >> (4 * (i / 4))) & 0x0f0f0f0fu;
    return f16_at(o) * (u8x4(nib | spread4(word_at(o + 2) >> (4 * i))) - 16.0);
}
