#version 450
// Q4_1 (20 bytes): F16 d and m, then Q4_0's nibbles; value d * q + m.
#define UNIT 32
#include "matvec.glsl"

float unit_dot(uint base, uint u, uint xi) {
    const uint o = base + 20 * u, e = xi + 32 * u;
    const vec2 dm = unpackHalf2x16(word_at(o));
    float s = 0.0, sx = 0.0;
    for (uint j = 0; j < 4; j++) {
        const uint q = word_at(o + 4 + 4 * j);
        s += dot_u8x4(q & 0x0f0f0f0fu, e + 4 * j) + dot_u8x4((q >> 4) & 0x0f0f0f0fu, e + 16 + 4 * j);
        sx += sum4(e + 4 * j) + sum4(e + 16 + 4 * j);
    }
    return dm.x * s + dm.y * sx;
}
