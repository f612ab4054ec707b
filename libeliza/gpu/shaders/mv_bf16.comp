#version 450
#define TAIL_DOT
#include "matvec.glsl"

vec2 bf16x2(uint v) { return vec2(uintBitsToFloat(v << 16), uintBitsToFloat(v & 0xffff0000u)); }

float quad_dot(uint base, uint q, vec4 xq) {
    const uint o = base + 8 * q;
    return dot(vec4(bf16x2(word_at(o)), bf16x2(word_at(o + 4))), xq);
}
float tail_dot(uint base, uint i, uint xi) { return uintBitsToFloat(u16_at(base + 2 * i) << 16) * x[xi + i]; }
