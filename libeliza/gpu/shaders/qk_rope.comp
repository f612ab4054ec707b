#version 450
// A decode step's query and key heads in one dispatch, one workgroup per
// head (query heads first): the per-head RMSNorm where the model has one
// (flag bit 0 for queries, bit 1 for keys), then rope on the first n_rot
// dims (GPT-J pairs or NeoX halves, the angles' cosines and sines from
// cs[cs_off ..]); queries are written back in place, keys into the cache
// at the element offset that word step_word of the step buffer holds.
#include "common.glsl"

#define MAX_HEAD_DIM 512

layout(std430, binding = 0) buffer Query { float q[]; };
layout(std430, binding = 1) readonly buffer Key { float k[]; };
layout(std430, binding = 2) readonly buffer QNorm { float qn[]; };
layout(std430, binding = 3) readonly buffer KNorm { float kn[]; };
layout(std430, binding = 4) readonly buffer Angles { float cs[]; };
layout(std430, binding = 5) writeonly buffer KCache { float kc[]; };
layout(std430, binding = 6) readonly buffer Step { uint st[]; };

layout(push_constant) uniform Push {
    uint n_head;
    uint n_head_kv;
    uint head_dim;
    uint n_rot;
    uint neox;
    uint cs_off;
    uint flags;
    float eps;
    uint step_word;
} p;

shared float hv[MAX_HEAD_DIM];

void main() {
    const uint g = group_index(), t = gl_LocalInvocationID.x;
    if (g >= p.n_head + p.n_head_kv) return;
    const bool is_q = g < p.n_head;
    const uint base = (is_q ? g : g - p.n_head) * p.head_dim;
    for (uint d = t; d < p.head_dim; d += WG) hv[d] = is_q ? q[base + d] : k[base + d];
    if ((p.flags & (is_q ? 1u : 2u)) != 0u) {
        float ss = 0.0;
        for (uint d = t; d < p.head_dim; d += WG) ss += hv[d] * hv[d];
        const float scale = 1.0 / sqrt(wg_sum(ss) / float(p.head_dim) + p.eps);
        for (uint d = t; d < p.head_dim; d += WG) hv[d] *= scale * (is_q ? qn[d] : kn[d]);
    }
    barrier();
    const uint half_rot = p.n_rot / 2, kb = is_q ? 0u : st[p.step_word];
    for (uint d = t; d < p.head_dim; d += WG) {
        float v = hv[d];
        if (d < p.n_rot) {
            const bool first = p.neox != 0 ? d < half_rot : (d & 1u) == 0u;
            const uint i = p.neox != 0 ? d % half_rot : d / 2;
            const uint other = p.neox != 0 ? (first ? d + half_rot : d - half_rot) : d ^ 1u;
            const float c = cs[p.cs_off + 2 * i], s = cs[p.cs_off + 2 * i + 1];
            v = first ? hv[d] * c - hv[other] * s : hv[other] * s + hv[d] * c;
        }
        if (is_q) {
            q[base + d] = v;
        } else {
            kc[kb + base + d] = v;
        }
    }
}
