#version 450
// Q6_K weights for matmul.glsl (the layout: mv_q6_k.comp).
#include "matmul.glsl"

vec4 quad_deq(uint base, uint q) {
    const uint o = base + 210 * (q / 64), e = 4 * (q % 64), h = e / 128, i = (e % 128) / 32, l = e % 32;
    const uint lo = (word_at(o + 64 * h + 32 * (i & 1u) + l) >> (4 * (i >> 1))) & 0x0f0f0f0fu;
    const uint hi = ((word_at(o + 128 + 32 * h + l) >> (2 * i)) & 0x03030303u) << 4;
    const float sc = float(int(byte_at(o + 192 + 8 * h + 2 * i + l / 16) << 24) >> 24);
    return f16_at(o + 208) * sc * (u8x4(lo | hi) - 32.0);
}
