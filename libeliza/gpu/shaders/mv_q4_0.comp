#version 450
// Q4_0 (18 bytes): F16 d, then 16 bytes whose low nibbles are elements
// 0..15 and high nibbles 16..31; value d * (q - 8).
#define UNIT 32
#include "matvec.glsl"

float unit_dot(uint base, uint u, uint xi) {
    const uint o = base + 18 * u, e = xi + 32 * u;
    float s = 0.0, sx = 0.0;
    for (uint j = 0; j < 4; j++) {
        const uint q = word_at(o + 2 + 4 * j);
        s += dot_u8x4(q & 0x0f0f0f0fu, e + 4 * j) + dot_u8x4((q >> 4) & 0x0f0f0f0fu, e + 16 + 4 * j);
        sx += sum4(e + 4 * j) + sum4(e + 16 + 4 * j);
    }
    return f16_at(o) * (s - 8.0 * sx);
}
