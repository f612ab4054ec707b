#version 450
// Q4_K (144 bytes): F16 d and dmin, 12 bytes of 6-bit scales and mins,
// 128 bytes of nibbles: byte 32k + l holds element l of sub-block 2k (low)
// and of 2k + 1 (high); value (d * scale) * q - dmin * min.
#include "matvec.glsl"
#include "kquant.glsl"

float quad_dot(uint base, uint q, vec4 xq) {
    const uint o = base + 144 * (q / 64), e = 4 * (q % 64), j = e / 32;
    const vec2 dm = unpackHalf2x16(w[o >> 2]);
    const uint nib = (w[(o + 16 + 32 * (j / 2) + e % 32) >> 2] >> (4 * (j % 2))) & 0x0f0f0f0fu;
    float sc, mn;
    scale_min_k4(o + 4, j, sc, mn);
    return dm.x * sc * dot(u8x4(nib), xq) - dm.y * mn * sum4(xq);
}
