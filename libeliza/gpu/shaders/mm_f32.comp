#version 450
// F32 weights for matmul.glsl; a row's last quad may be partial.
#include "matmul.glsl"

vec4 quad_deq(uint base, uint q) {
    const uint e = 4 * q, o = base + 16 * q;
    if (e + 3 < p.n_cols)
        return vec4(uintBitsToFloat(word_at(o)), uintBitsToFloat(word_at(o + 4)), uintBitsToFloat(word_at(o + 8)),
                    uintBitsToFloat(word_at(o + 12)));
    vec4 v = vec4(0.0);
    for (uint c = 0; c < 4 && e + c < p.n_cols; c++) v[c] = uintBitsToFloat(word_at(o + 4 * c));
    return v;
}
