#version 450
// g[i] = act(g[i]) * u[i]: act 0 is GELU-tanh in its sigmoid form,
// x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)); act 1 is SiLU.
#include "common.glsl"

layout(std430, binding = 0) buffer Gate { float g[]; };
layout(std430, binding = 1) readonly buffer Up { float u[]; };

layout(push_constant) uniform Push {
    uint n;
    uint act;
} p;

void main() {
    const uint i = group_index() * WG + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    const float v = g[i];
    float a;
    if (p.act == 0) {
        const float t = 0.7978845608028654 * (v + 0.044715 * v * v * v);
        a = v / (1.0 + exp(-2.0 * t));
    } else {
        a = v / (1.0 + exp(-v));
    }
    g[i] = a * u[i];
}
