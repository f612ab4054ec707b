#version 450
// Rotary embedding in place: one invocation per rotated pair. The angles'
// cosines and sines come from the host (ez_rope_angles, in double), so a
// replayed decode step changes only that small buffer.
#include "common.glsl"

layout(std430, binding = 0) buffer Vec { float x[]; };
layout(std430, binding = 1) readonly buffer Angles { float cs[]; };

layout(push_constant) uniform Push {
    uint x_off;
    uint cs_off;
    uint n_heads;
    uint head_dim;
    uint n_rot;
    uint neox;
} p;

void main() {
    const uint half_rot = p.n_rot / 2;
    const uint id = group_index() * WG + gl_LocalInvocationID.x;
    if (id >= p.n_heads * half_rot) return;
    const uint h = id / half_rot, i = id % half_rot;
    const uint base = p.x_off + h * p.head_dim;
    const uint a = base + (p.neox != 0 ? i : 2 * i), b = base + (p.neox != 0 ? i + half_rot : 2 * i + 1);
    const float c = cs[p.cs_off + 2 * i], s = cs[p.cs_off + 2 * i + 1];
    const float x0 = x[a], x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
}
