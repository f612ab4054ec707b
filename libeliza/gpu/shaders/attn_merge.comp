#version 450
// The second half of attention.glsl: one workgroup per query head combines
// its chunks' (m, l, weighted values) into out = sum_c exp(m_c - M) acc_c /
// sum_c exp(m_c - M) l_c, M the largest m_c. WG (specialization constant)
// must equal the first half's, whose chunks are WG positions long.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Scratch { float part[]; };
layout(std430, binding = 1) writeonly buffer Output { float o[]; };
layout(std430, binding = 2) readonly buffer Step { uint st[]; };

layout(push_constant) uniform Push {
    uint n_head;
    uint head_dim;
    uint n_kv;
    uint step_word;
    uint n_chunks;
} p;

void main() {
    const uint h = group_index(), t = gl_LocalInvocationID.x;
    if (h >= p.n_head) return;
    const uint n_kv = p.step_word != 0xffffffffu ? st[p.step_word + 1] : p.n_kv;
    const uint used = (n_kv + WG - 1) / WG, stride = p.head_dim + 2, base = h * p.n_chunks * stride;
    float m = -1.0 / 0.0;
    for (uint c = t; c < used; c += WG) m = max(m, part[base + c * stride]);
    m = wg_max(m);
    float l = 0.0;
    for (uint c = t; c < used; c += WG) l += exp(part[base + c * stride] - m) * part[base + c * stride + 1];
    const float inv = 1.0 / wg_sum(l);
    for (uint d = t; d < p.head_dim; d += WG) {
        float acc = 0.0;
        for (uint c = 0; c < used; c++) acc += exp(part[base + c * stride] - m) * part[base + c * stride + 2 + d];
        o[h * p.head_dim + d] = acc * inv;
    }
}
