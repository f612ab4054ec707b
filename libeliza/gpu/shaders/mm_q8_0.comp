#version 450
// Q8_0 weights for matmul.glsl (the layout: mv_q8_0.comp).
#include "matmul.glsl"

vec4 quad_deq(uint base, uint q) {
    const uint o = base + 34 * (q / 8);
    return f16_at(o) * s8x4(word_at(o + 2 + 4 * (q % 8)));
}
