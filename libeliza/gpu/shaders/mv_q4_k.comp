#version 450
// Q4_K (144 bytes): F16 d and dmin, 12 bytes of 6-bit scales and mins,
// 128 bytes of nibbles: byte 32k + l holds element l of sub-block 2k (low)
// and of 2k + 1 (high); value (d * scale) * q - dmin * min.
#define BLOCK_ELEMS 256
#define BLOCK_BYTES 144
#include "matvec.glsl"
#include "kquant.glsl"

float block_dot(uint boff, uint xi) {
    const float d = f16_at(boff), dmin = f16_at(boff + 2);
    float s = 0.0;
    for (uint k = 0; k < 8; k++) {
        float sc, mn;
        scale_min_k4(boff + 4, k, sc, mn);
        const float dl = d * sc, ml = dmin * mn;
        const uint q = boff + 16 + 32 * (k / 2), shift = 4 * (k % 2);
        for (uint l = 0; l < 32; l++) s += (dl * float((byte_at(q + l) >> shift) & 15u) - ml) * x[xi + 32 * k + l];
    }
    return s;
}
