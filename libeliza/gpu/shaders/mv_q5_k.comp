#version 450
// Q5_K (176 bytes): Q4_K's header, 32 bytes of fifth bits (bit k of byte l
// for element l of sub-block k), then Q4_K's nibbles.
#include "matvec.glsl"
#include "kquant.glsl"

float quad_dot(uint base, uint q, vec4 xq) {
    const uint o = base + 176 * (q / 64), e = 4 * (q % 64), j = e / 32, l = e % 32;
    const vec2 dm = unpackHalf2x16(w[o >> 2]);
    const uint nib = (w[(o + 48 + 32 * (j / 2) + l) >> 2] >> (4 * (j % 2))) & 0x0f0f0f0fu;
    const uint hi = ((w[(o + 16 + l) >> 2] >> j) & 0x01010101u) << 4;
    float sc, mn;
    scale_min_k4(o + 4, j, sc, mn);
    return dm.x * sc * dot(u8x4(nib | hi), xq) - dm.y * mn * sum4(xq);
}
