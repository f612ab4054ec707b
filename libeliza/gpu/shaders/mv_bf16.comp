#version 450
#define UNIT 8
#define TAIL_DOT
#include "matvec.glsl"

float unit_dot(uint base, uint u, uint xi) {
    const uint o = base + 16 * u, e = xi + 8 * u;
    float s = 0.0;
    for (uint j = 0; j < 4; j++) {
        const uint v = word_at(o + 4 * j);
        s += uintBitsToFloat(v << 16) * x[e + 2 * j] + uintBitsToFloat(v & 0xffff0000u) * x[e + 2 * j + 1];
    }
    return s;
}
float tail_dot(uint base, uint i, uint xi) { return uintBitsToFloat(u16_at(base + 2 * i) << 16) * x[xi + i]; }
