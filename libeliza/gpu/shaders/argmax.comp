#version 450
// The first index of the largest value, as the CPU sampler's greedy pick
// (ties go to the smaller index), in two dispatches of this shader. Stage 0:
// each of the grid's workgroups reduces a grid-strided share of x to one
// (value, index) pair in the scratch words 2g, 2g + 1; stage 1: one
// workgroup reduces the n_groups pairs to best[0].
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Vec { float x[]; };
layout(std430, binding = 1) buffer Scratch { uint part[]; };
layout(std430, binding = 2) writeonly buffer Result { uint best[]; };

layout(push_constant) uniform Push {
    uint n;
    uint n_groups;
    uint stage;
} p;

shared uint idx[WG];

// (bv, bi) becomes the better of itself and (v, i); bi 0xffffffff is "none".
void take(inout float bv, inout uint bi, float v, uint i) {
    if (i != 0xffffffffu && (bi == 0xffffffffu || v > bv || (v == bv && i < bi))) {
        bv = v;
        bi = i;
    }
}

void main() {
    const uint t = gl_LocalInvocationID.x, g = group_index();
    float bv = -1.0 / 0.0;
    uint bi = 0xffffffffu;
    if (p.stage == 0) {
        for (uint i = g * WG + t; i < p.n; i += p.n_groups * WG) take(bv, bi, x[i], i);
    } else {
        for (uint j = t; j < p.n_groups; j += WG) take(bv, bi, uintBitsToFloat(part[2 * j]), part[2 * j + 1]);
    }
    red[t] = bv;
    idx[t] = bi;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) {
            float v = red[t];
            uint i = idx[t];
            take(v, i, red[t + s], idx[t + s]);
            red[t] = v;
            idx[t] = i;
        }
        barrier();
    }
    if (t == 0) {
        if (p.stage == 0) {
            part[2 * g] = floatBitsToUint(red[0]);
            part[2 * g + 1] = idx[0];
        } else {
            best[0] = idx[0];
        }
    }
}
