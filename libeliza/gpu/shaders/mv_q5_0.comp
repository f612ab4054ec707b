#version 450
// Q5_0 (22 bytes): F16 d, a 32-bit word of fifth bits (bit j for element
// j), then Q4_0's nibbles; value d * (q - 16).
#define UNIT 32
#include "matvec.glsl"

// Bits 0..3 of h spread to the low bit of each byte, shifted up by 4.
uint spread4(uint h) { return ((h & 1u) | ((h & 2u) << 7) | ((h & 4u) << 14) | ((h & 8u) << 21)) << 4; }

float unit_dot(uint base, uint u, uint xi) {
    const uint o = base + 22 * u, e = xi + 32 * u;
    const uint qh = word_at(o + 2);
    float s = 0.0, sx = 0.0;
    for (uint j = 0; j < 4; j++) {
        const uint q = word_at(o + 6 + 4 * j);
        s += dot_u8x4((q & 0x0f0f0f0fu) | spread4(qh >> (4 * j)), e + 4 * j);
        s += dot_u8x4(((q >> 4) & 0x0f0f0f0fu) | spread4(qh >> (16 + 4 * j)), e + 16 + 4 * j);
        sx += sum4(e + 4 * j) + sum4(e + 16 + 4 * j);
    }
    return f16_at(o) * (s - 16.0 * sx);
}
