#version 450
// Q5_K (176 bytes): Q4_K's header, 32 bytes of fifth bits (bit k of byte l
// for element l of sub-block k), then Q4_K's nibbles. A unit is one
// sub-block.
#define UNIT 32
#include "matvec.glsl"
#include "kquant.glsl"

float unit_dot(uint base, uint u, uint xi) {
    const uint o = base + 176 * (u / 8), k = u % 8, e = xi + 32 * u;
    const vec2 dm = unpackHalf2x16(word_at(o));
    const uint q = o + 48 + 32 * (k / 2), shift = 4 * (k % 2);
    float sc, mn, s = 0.0, sx = 0.0;
    scale_min_k4(o + 4, k, sc, mn);
    for (uint j = 0; j < 8; j++) {
        const uint hi = ((w[((o + 16) >> 2) + j] >> k) & 0x01010101u) << 4;
        s += dot_u8x4(((w[(q >> 2) + j] >> shift) & 0x0f0f0f0fu) | hi, e + 4 * j);
        sx += sum4(e + 4 * j);
    }
    return dm.x * sc * s - dm.y * mn * sx;
}
