#version 450
#define UNIT 8
#define TAIL_DOT
#include "matvec.glsl"

float unit_dot(uint base, uint u, uint xi) {
    const uint o = base + 16 * u, e = xi + 8 * u;
    float s = 0.0;
    for (uint j = 0; j < 4; j++) {
        const vec2 v = unpackHalf2x16(word_at(o + 4 * j));
        s += v.x * x[e + 2 * j] + v.y * x[e + 2 * j + 1];
    }
    return s;
}
float tail_dot(uint base, uint i, uint xi) { return f16_at(base + 2 * i) * x[xi + i]; }
