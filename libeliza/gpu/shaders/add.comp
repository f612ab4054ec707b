#version 450
// y[y_off + i] = x[x_off + i] (mode 0, a copy) or y[y_off + i] += x[x_off + i]
// (mode 1, a residual), i < n.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) buffer Output { float y[]; };

layout(push_constant) uniform Push {
    uint n;
    uint x_off;
    uint y_off;
    uint mode;
} p;

void main() {
    const uint i = group_index() * WG + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    const float v = x[p.x_off + i];
    y[p.y_off + i] = p.mode != 0 ? y[p.y_off + i] + v : v;
}
