#version 450
// Q4_0 (18 bytes): F16 d, then 16 bytes whose low nibbles are elements
// 0..15 and high nibbles 16..31; value d * (q - 8).
#include "matvec.glsl"

float quad_dot(uint base, uint q, vec4 xq) {
    const uint o = base + 18 * (q / 8), i = q % 8;
    const uint nib = (word_at(o + 2 + 4 * (i % 4)) >> (4 * (i / 4))) & 0x0f0f0f0fu;
    return f16_at(o) * dot(u8x4(nib) - 8.0, xq);
}
