#version 450
// Q4_0 (18 bytes): F16 d, then 16 bytes whose low nibbles are elements
// 0..15 and high nibbles 16..31; value d * (q - 8).
#define BLOCK_ELEMS 32
#define BLOCK_BYTES 18
#include "matvec.glsl"

float block_dot(uint boff, uint xi) {
    float s = 0.0;
    for (uint j = 0; j < 16; j++) {
        const uint q = byte_at(boff + 2 + j);
        s += float(int(q & 15u) - 8) * x[xi + j] + float(int(q >> 4) - 8) * x[xi + j + 16];
    }
    return f16_at(boff) * s;
}
