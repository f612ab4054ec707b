#version 450
// The query and key heads of n_tok tokens in one dispatch, one workgroup
// per token and head (a token's query heads first): the per-head RMSNorm
// where the model has one (flag bit 0 for queries, bit 1 for keys), then
// rope on the first n_rot dims (GPT-J pairs or NeoX halves, token t's
// cosines and sines from cs[cs_off + t * cs_stride ..]); queries are
// written back in place, keys into the cache at the element offset that
// word step_word of the step buffer holds (token t one key row further).
// With row0_word set, tokens before that word of the step buffer (a
// bucket's padding) are skipped.
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
    uint n_tok;
    uint cs_stride;
    uint row0_word;
} p;

shared float hv[MAX_HEAD_DIM];

void main() {
    const uint heads = p.n_head + p.n_head_kv, gi = group_index(), t = gl_LocalInvocationID.x;
    const uint tok = gi / heads, g = gi % heads;
    if (tok >= p.n_tok || (p.row0_word != 0xffffffffu && tok < st[p.row0_word])) return;
    const bool is_q = g < p.n_head;
    const uint base = (is_q ? tok * p.n_head + g : tok * p.n_head_kv + g - p.n_head) * p.head_dim;
    const uint cs_off = p.cs_off + tok * p.cs_stride;
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
            const float c = cs[cs_off + 2 * i], s = cs[cs_off + 2 * i + 1];
            v = first ? hv[d] * c - hv[other] * s : hv[other] * s + hv[d] * c;
        }
        if (is_q) {
            q[base + d] = v;
        } else {
            kc[kb + base + d] = v;
        }
    }
}
