#version 450
// Q5_0 (22 bytes): F16 d, a 32-bit word of fifth bits (bit j for element
// j), then Q4_0's nibbles; value d * (q - 16).
#define BLOCK_ELEMS 32
#define BLOCK_BYTES 22
#include "matvec.glsl"

float block_dot(uint boff, uint xi) {
    const uint qh = u16_at(boff + 2) | (u16_at(boff + 4) << 16);
    float s = 0.0;
    for (uint j = 0; j < 16; j++) {
        const uint q = byte_at(boff + 6 + j);
        const int q0 = int((q & 15u) | (((qh >> j) & 1u) << 4)) - 16;
        const int q1 = int((q >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - 16;
        s += float(q0) * x[xi + j] + float(q1) * x[xi + j + 16];
    }
    return f16_at(boff) * s;
}
