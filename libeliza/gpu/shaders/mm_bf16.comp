#version 450
// BF16 weights for matmul.glsl; a row's last quad may be partial.
#include "matmul.glsl"

vec2 bf16x2(uint v) { return vec2(uintBitsToFloat(v << 16), uintBitsToFloat(v & 0xffff0000u)); }

vec4 quad_deq(uint base, uint q) {
    const uint e = 4 * q, o = base + 8 * q;
    if (e + 3 < p.n_cols) return vec4(bf16x2(word_at(o)), bf16x2(word_at(o + 4)));
    vec4 v = vec4(0.0);
    for (uint c = 0; c < 4 && e + c < p.n_cols; c++) v[c] = uintBitsToFloat(u16_at(o + 2 * c) << 16);
    return v;
}
