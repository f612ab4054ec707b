#version 450
// Q4_K weights for matmul.glsl (the layout: mv_q4_k.comp).
#include "matmul.glsl"
#include "kquant.glsl"

vec4 quad_deq(uint base, uint q) {
    const uint o = base + 144 * (q / 64), e = 4 * (q % 64), j = e / 32;
    const vec2 dm = unpackHalf2x16(w[o >> 2]);
    const uint nib = (w[(o + 16 + 32 * (j / 2) + e % 32) >> 2] >> (4 * (j % 2))) & 0x0f0f0f0fu;
    float sc, mn;
    scale_min_k4(o + 4, j, sc, mn);
    return dm.x * sc * u8x4(nib) - dm.y * mn;
}
