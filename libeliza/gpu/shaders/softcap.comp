#version 450
// x[i] = cap * tanh(x[i] / cap), i < n (Gemma's logit soft-capping).
#include "common.glsl"

layout(std430, binding = 0) buffer Vec { float x[]; };

layout(push_constant) uniform Push {
    uint n;
    float cap;
} p;

void main() {
    const uint i = group_index() * WG + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    x[i] = p.cap * tanh(x[i] / p.cap);
}
