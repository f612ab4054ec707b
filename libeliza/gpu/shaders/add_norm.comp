#version 450
// One row (of n_rows, each n long), one workgroup: a residual add between
// RMSNorms, the seam of two decoder blocks in one dispatch. With has_post, o = rms_norm(o) * wp first
// (Gemma's post-attention / post-FFN norm); then x += o, h = rms_norm(x) * w
// (the next block's input norm). Where n is a multiple of 4 and at most
// 4 CACHE WG, each invocation loads its vec4s of o, x, wp and w at once,
// keeps them in registers across the two sums and stores x and h at the
// end (decode's add_norm is one row: bound by the latency of its loads,
// not their bandwidth); otherwise three passes over the row, each
// invocation reading back only the elements it wrote.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Delta { float o[]; };
layout(std430, binding = 0) readonly buffer Delta4 { vec4 o4[]; };
layout(std430, binding = 1) readonly buffer PostWeight { float wp[]; };
layout(std430, binding = 1) readonly buffer PostWeight4 { vec4 wp4[]; };
layout(std430, binding = 2) buffer Residual { float x[]; };
layout(std430, binding = 2) buffer Residual4 { vec4 x4[]; };
layout(std430, binding = 3) readonly buffer Weight { float w[]; };
layout(std430, binding = 3) readonly buffer Weight4 { vec4 w4[]; };
layout(std430, binding = 4) writeonly buffer Normed { float h[]; };
layout(std430, binding = 4) writeonly buffer Normed4 { vec4 h4[]; };

layout(push_constant) uniform Push {
    uint n;
    uint has_post;
    float eps;
    uint n_rows;
} p;

#define CACHE 4

void main() {
    const uint t = gl_LocalInvocationID.x, row = group_index();
    if (row >= p.n_rows) return;
    const uint b = row * p.n;
    if ((p.n & 3u) == 0u && p.n <= 4 * CACHE * WG) {
        const uint n4 = p.n / 4, b4 = b / 4;
        vec4 ov[CACHE], xv[CACHE], pv[CACHE], wv[CACHE];
        float ss = 0.0;
        for (uint c = 0; c < CACHE; c++) {
            const uint i = t + c * WG;
            const bool in_row = i < n4;
            ov[c] = in_row ? o4[b4 + i] : vec4(0.0);
            xv[c] = in_row ? x4[b4 + i] : vec4(0.0);
            pv[c] = in_row && p.has_post != 0 ? wp4[i] : vec4(1.0);
            wv[c] = in_row ? w4[i] : vec4(0.0);
            ss += dot(ov[c], ov[c]);
        }
        const float post = p.has_post != 0 ? 1.0 / sqrt(wg_sum(ss) / float(p.n) + p.eps) : 1.0;
        ss = 0.0;
        for (uint c = 0; c < CACHE; c++) {
            xv[c] += ov[c] * post * pv[c];
            ss += dot(xv[c], xv[c]);
        }
        const float scale = 1.0 / sqrt(wg_sum(ss) / float(p.n) + p.eps);
        for (uint c = 0; c < CACHE; c++) {
            const uint i = t + c * WG;
            if (i < n4) {
                x4[b4 + i] = xv[c];
                h4[b4 + i] = xv[c] * scale * wv[c];
            }
        }
        return;
    }
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
