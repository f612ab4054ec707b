#version 450
// Q8_0 (34 bytes): F16 d, then 32 int8 quants; value d * q.
#define UNIT 32
#include "matvec.glsl"

float unit_dot(uint base, uint u, uint xi) {
    const uint o = base + 34 * u, e = xi + 32 * u;
    float s = 0.0;
    for (uint j = 0; j < 8; j++) s += dot_s8x4(word_at(o + 2 + 4 * j), e + 4 * j);
    return f16_at(o) * s;
}
