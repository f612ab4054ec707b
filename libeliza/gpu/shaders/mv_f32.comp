#version 450
#define UNIT 8
#define TAIL_DOT
#include "matvec.glsl"

float unit_dot(uint base, uint u, uint xi) {
    const uint o = base + 32 * u, e = xi + 8 * u;
    float s = 0.0;
    for (uint j = 0; j < 8; j++) s += uintBitsToFloat(word_at(o + 4 * j)) * x[e + j];
    return s;
}
float tail_dot(uint base, uint i, uint xi) { return uintBitsToFloat(word_at(base + 4 * i)) * x[xi + i]; }
