#version 450
// Q8_0 (34 bytes): F16 d, then 32 int8 quants; value d * q.
#define BLOCK_ELEMS 32
#define BLOCK_BYTES 34
#include "matvec.glsl"

float block_dot(uint boff, uint xi) {
    float s = 0.0;
    for (uint j = 0; j < 32; j++) s += float(sbyte_at(boff + 2 + j)) * x[xi + j];
    return f16_at(boff) * s;
}
