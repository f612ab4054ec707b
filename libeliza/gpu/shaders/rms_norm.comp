#version 450
// One row per workgroup: y = x / sqrt(mean(x^2) + eps) * w. y may be x
// (each invocation reads its elements before it writes them).
#include "common.glsl"

layout(std430, binding = 0) buffer Input { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float w[]; };
layout(std430, binding = 2) buffer Output { float y[]; };

layout(push_constant) uniform Push {
    uint n;
    uint n_rows;
    float eps;
} p;

void main() {
    const uint row = group_index();
    if (row >= p.n_rows) return;
    const uint base = row * p.n;
    float ss = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG) ss += x[base + i] * x[base + i];
    ss = wg_sum(ss);
    const float scale = 1.0 / sqrt(ss / float(p.n) + p.eps);
    for (uint i = gl_LocalInvocationID.x; i < p.n; i += WG) y[base + i] = x[base + i] * scale * w[i];
}
