#version 450
// Q4_1 weights for matmul.glsl (the layout: mv_q4_1.comp).
#include "matmul.glsl"

vec4 quad_deq(uint base, uint q) {
    const uint o = base + 20 * (q / 8), i = q % 8;
    const vec2 dm = unpackHalf2x16(w[o >> 2]);
    const uint nib = (w[(o >> 2) + 1 + i % 4] >> (4 * (i / 4))) & 0x0f0f0f0fu;
    return dm.x * u8x4(nib) + dm.y;
}
