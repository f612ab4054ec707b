#version 450
// g[i] = act(g[i]) * u[i] (common.glsl's glu_act), or with pairs,
// u[i] = act(g[2i]) * g[2i + 1]: the product of a matrix whose rows
// interleave the gate's and the up's (ez_gpu_matrix_upload_pair).
#include "common.glsl"

layout(std430, binding = 0) buffer Gate { float g[]; };
layout(std430, binding = 1) buffer Up { float u[]; };

layout(push_constant) uniform Push {
    uint n;
    uint act;
    uint pairs;
} p;

void main() {
    const uint i = group_index() * WG + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    if (p.pairs != 0)
        u[i] = glu_act(g[2 * i], p.act) * g[2 * i + 1];
    else
        g[i] = glu_act(g[i], p.act) * u[i];
}
