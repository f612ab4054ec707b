#version 450
// y[y_off + i] = x[x_off + i] (mode 0, a copy) or y[y_off + i] += x[x_off + i]
// (mode 1, a residual), i < n; with step_word set, y_off grows by that word
// of the step buffer (a cache row that moves with the position), and with
// from_word set, i below row_len times that word is skipped (the padding
// rows of a batch).
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) buffer Output { float y[]; };
layout(std430, binding = 2) readonly buffer Step { uint st[]; };

layout(push_constant) uniform Push {
    uint n;
    uint x_off;
    uint y_off;
    uint mode;
    uint step_word;
    uint from_word;
    uint row_len;
} p;

void main() {
    const uint i = group_index() * WG + gl_LocalInvocationID.x;
    if (i >= p.n || (p.from_word != 0xffffffffu && i < st[p.from_word] * p.row_len)) return;
    const uint yo = p.y_off + (p.step_word != 0xffffffffu ? st[p.step_word] : 0u);
    const float v = x[p.x_off + i];
    y[yo + i] = p.mode != 0 ? y[yo + i] + v : v;
}
