#version 450
// One row per workgroup, in place: x = exp(x - max) / sum.
#include "common.glsl"

layout(std430, binding = 0) buffer Vec { float x[]; };

layout(push_constant) uniform Push {
    uint n;
    uint n_rows;
} p;

void main() {
    const uint row = group_index();
    if (row >= p.n_rows) return;
    const uint base = row * p.n;
    float m = -1.0 / 0.0;
    for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG) m = max(m, x[base + i]);
    m = wg_max(m);
    float s = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG) {
        const float e = exp(x[base + i] - m);
        x[base + i] = e;
        s += e;
    }
    s = wg_sum(s);
    const float inv = 1.0 / s;
    for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG) x[base + i] *= inv;
}
