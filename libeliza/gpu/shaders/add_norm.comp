#version 450
// One row (of n_rows, each n long), one workgroup: a residual add between
// RMSNorms, the seam of two decoder blocks in one dispatch. With has_post, o = rms_norm(o) * wp first
// (Gemma's post-attention / post-FFN norm); then x += o, h = rms_norm(x) * w
// (the next block's input norm). Each invocation reads back only the
// elements it wrote.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Delta { float o[]; };
layout(std430, binding = 1) readonly buffer PostWeight { float wp[]; };
layout(std430, binding = 2) buffer Residual { float x[]; };
layout(std430, binding = 3) readonly buffer Weight { float w[]; };
layout(std430, binding = 4) writeonly buffer Normed { float h[]; };

layout(push_constant) uniform Push {
    uint n;
    uint has_post;
    float eps;
    uint n_rows;
} p;

void main() {
    const uint t = gl_LocalInvocationID.x, row = group_index();
    if (row >= p.n_rows) return;
    const uint b = row * p.n;
    float post = 1.0;
    if (p.has_post != 0) {
        float ss = 0.0;
        for (uint i = t; i < p.n; i += WG) ss += o[b + i] * o[b + i];
        post = 1.0 / sqrt(wg_sum(ss) / float(p.n) + p.eps);
    }
    float ss = 0.0;
    for (uint i = t; i < p.n; i += WG) {
        const float v = x[b + i] + (p.has_post != 0 ? o[b + i] * post * wp[i] : o[b + i]);
        x[b + i] = v;
        ss += v * v;
    }
    const float scale = 1.0 / sqrt(wg_sum(ss) / float(p.n) + p.eps);
    for (uint i = t; i < p.n; i += WG) h[b + i] = x[b + i] * scale * w[i];
}
