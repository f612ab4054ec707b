#version 450
#define TAIL_DOT
#include "matvec.glsl"

float quad_dot(uint base, uint q, vec4 xq) {
    const uint o = base + 16 * q;
    return dot(vec4(uintBitsToFloat(word_at(o)), uintBitsToFloat(word_at(o + 4)), uintBitsToFloat(word_at(o + 8)),
                    uintBitsToFloat(word_at(o + 12))),
               xq);
}
float tail_dot(uint base, uint i, uint xi) { return uintBitsToFloat(word_at(base + 4 * i)) * x[xi + i]; }
