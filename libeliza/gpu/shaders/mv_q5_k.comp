#version 450
// Q5_K (176 bytes): Q4_K's header, 32 bytes of fifth bits (bit k of byte l
// for element l of sub-block k), then Q4_K's nibbles.
#define BLOCK_ELEMS 256
#define BLOCK_BYTES 176
#include "matvec.glsl"
#include "kquant.glsl"

float block_dot(uint boff, uint xi) {
    const float d = f16_at(boff), dmin = f16_at(boff + 2);
    float s = 0.0;
    for (uint k = 0; k < 8; k++) {
        float sc, mn;
        scale_min_k4(boff + 4, k, sc, mn);
        const float dl = d * sc, ml = dmin * mn;
        const uint q = boff + 48 + 32 * (k / 2), shift = 4 * (k % 2);
        for (uint l = 0; l < 32; l++) {
            const uint v = ((byte_at(q + l) >> shift) & 15u) | (((byte_at(boff + 16 + l) >> k) & 1u) << 4);
            s += (dl * float(v) - ml) * x[xi + 32 * k + l];
        }
    }
    return s;
}
