#version 450
// Q8_0 (34 bytes): F16 d, then 32 int8 quants; value d * q.
#include "matvec.glsl"

float quad_dot(uint base, uint q, vec4 xq) {
    const uint o = base + 34 * (q / 8);
    return f16_at(o) * dot(s8x4(word_at(o + 2 + 4 * (q % 8))), xq);
}
