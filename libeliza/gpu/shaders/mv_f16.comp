#version 450
#define TAIL_DOT
#include "matvec.glsl"

float quad_dot(uint base, uint q, vec4 xq) {
    const uint o = base + 8 * q;
    return dot(vec4(unpackHalf2x16(word_at(o)), unpackHalf2x16(word_at(o + 4))), xq);
}
float tail_dot(uint base, uint i, uint xi) { return f16_at(base + 2 * i) * x[xi + i]; }
