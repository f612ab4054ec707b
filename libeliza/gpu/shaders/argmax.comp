#version 450
// One workgroup: the first index of the largest value, as the CPU sampler's
// greedy pick (ties go to the smaller index).
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Vec { float x[]; };
layout(std430, binding = 1) writeonly buffer Result { uint best[]; };

layout(push_constant) uniform Push {
    uint n;
} p;

shared uint idx[WG];

void main() {
    const uint t = gl_LocalInvocationID.x;
    float bv = -1.0 / 0.0;
    uint bi = 0xffffffffu;
    for (uint i = t; i < p.n; i += WG) {
        if (bi == 0xffffffffu || x[i] > bv) {
            bv = x[i];
            bi = i;
        }
    }
    red[t] = bv;
    idx[t] = bi;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) {
            const float ov = red[t + s];
            const uint oi = idx[t + s];
            if (oi != 0xffffffffu && (idx[t] == 0xffffffffu || ov > red[t] || (ov == red[t] && oi < idx[t]))) {
                red[t] = ov;
                idx[t] = oi;
            }
        }
        barrier();
    }
    if (t == 0) best[0] = idx[0];
}
