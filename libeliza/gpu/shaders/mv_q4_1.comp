#version 450
// Q4_1 (20 bytes): F16 d and m, then Q4_0's nibbles; value d * q + m.
#include "matvec.glsl"

float quad_dot(uint base, uint q, vec4 xq) {
    const uint o = base + 20 * (q / 8), i = q % 8;
    const vec2 dm = unpackHalf2x16(w[o >> 2]);
    const uint nib = (w[(o >> 2) + 1 + i % 4] >> (4 * (i / 4))) & 0x0f0f0f0fu;
    return dm.x * dot(u8x4(nib), xq) + dm.y * sum4(xq);
}
