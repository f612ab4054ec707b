#version 450
// Q4_K (144 bytes): F16 d and dmin, 12 bytes of 6-bit scales and mins,
// 128 bytes of nibbles: byte 32k + l holds element l of sub-block 2k (low)
// and of 2k + 1 (high); value (d * scale) * q - dmin * min. A unit is one
// sub-block.
#define UNIT 32
#include "matvec.glsl"
#include "kquant.glsl"

float unit_dot(uint base, uint u, uint xi) {
    const uint o = base + 144 * (u / 8), k = u % 8, e = xi + 32 * u;
    const vec2 dm = unpackHalf2x16(word_at(o));
    const uint q = o + 16 + 32 * (k / 2), shift = 4 * (k % 2);
    float sc, mn, s = 0.0, sx = 0.0;
    scale_min_k4(o + 4, k, sc, mn);
    for (uint j = 0; j < 8; j++) {
        s += dot_u8x4((w[(q >> 2) + j] >> shift) & 0x0f0f0f0fu, e + 4 * j);
        sx += sum4(e + 4 * j);
    }
    return dm.x * sc * s - dm.y * mn * sx;
}
