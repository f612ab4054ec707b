#version 450
// Causal attention of a batch of query tokens (the prompt pass) over an F32
// cache that already holds the batch's own keys and values. Workgroup
// (t, g) takes hpw query heads of batch row t that share one kv head
// (heads g * hpw ..), at position pos = word pos_word of the step buffer
// (the position of row 0, as an int) + t, and walks its window [max(0, pos
// - n_swa + 1) or 0, pos] in chunks of WG positions with a running maximum
// and sum per head (one pass, no scratch): each key and value read serves
// the hpw heads. Rows before word row0_word (a bucket's padding) return
// at once; the window ends at the n_kv rows the cache holds. The host
// keeps hpw * ceil(head_dim / WG) <= MAX_ACC and hpw * head_dim <= MAX_Q.
#include "common.glsl"

#define MAX_ACC 16
#define MAX_HPW 16
#define MAX_Q 2048

layout(std430, binding = 0) readonly buffer Query { float q[]; };
layout(std430, binding = 1) readonly buffer Keys { float k[]; };
layout(std430, binding = 2) readonly buffer Values { float v[]; };
layout(std430, binding = 3) writeonly buffer Output { float o[]; };
layout(std430, binding = 4) readonly buffer Step { uint st[]; };

layout(push_constant) uniform Push {
    uint n_head;
    uint n_head_kv;
    uint head_dim;
    uint kv_stride;
    float scale;
    uint n_swa;
    uint n_tok;
    uint row0_word;
    uint pos_word;
    uint n_kv;
    uint hpw;
} p;

shared float qs[MAX_Q];
shared float ws[MAX_HPW][WG];

// Per head g < hpw: ws[g][0] = the largest (mode 0) or the sum (mode 1)
// of ws[g][0 .. WG), one tree for all heads.
void reduce_heads(bool sum) {
    const uint t = gl_LocalInvocationID.x;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s)
            for (uint g = 0; g < p.hpw; g++) ws[g][t] = sum ? ws[g][t] + ws[g][t + s] : max(ws[g][t], ws[g][t + s]);
        barrier();
    }
}

void main() {
    const uint gi = group_index(), t = gl_LocalInvocationID.x, groups = p.n_head / p.hpw;
    const uint row = gi / groups, h0 = (gi % groups) * p.hpw;
    if (row >= p.n_tok || row < st[p.row0_word]) return;
    const int pos = int(st[p.pos_word]) + int(row);
    const uint first = p.n_swa > 0 ? uint(max(0, pos - int(p.n_swa) + 1)) : 0u, end = min(uint(pos) + 1, p.n_kv);
    const uint kvo = (h0 / (p.n_head / p.n_head_kv)) * p.head_dim, qo = (row * p.n_head + h0) * p.head_dim;
    const uint hd = p.head_dim, per_inv = (hd + WG - 1) / WG;
    for (uint i = t; i < p.hpw * hd; i += WG) qs[i] = q[qo + i];
    float acc[MAX_ACC], m[MAX_HPW], l[MAX_HPW], e[MAX_HPW];
    for (uint i = 0; i < MAX_ACC; i++) acc[i] = 0.0;
    for (uint g = 0; g < MAX_HPW; g++) {
        m[g] = -1.0 / 0.0;
        l[g] = 0.0;
    }
    barrier();
    for (uint c0 = first; c0 < end; c0 += WG) {
        const uint count = min(WG, end - c0);
        for (uint g = 0; g < p.hpw; g++) e[g] = -1.0 / 0.0;
        if (t < count) {
            const uint kb = (c0 + t) * p.kv_stride + kvo;
            for (uint g = 0; g < p.hpw; g++) e[g] = 0.0;
            for (uint d = 0; d < hd; d++) {
                const float kd = k[kb + d];
                for (uint g = 0; g < p.hpw; g++) e[g] += qs[g * hd + d] * kd;
            }
            for (uint g = 0; g < p.hpw; g++) e[g] *= p.scale;
        }
        for (uint g = 0; g < p.hpw; g++) ws[g][t] = e[g];
        reduce_heads(false);
        float corr[MAX_HPW];
        for (uint g = 0; g < p.hpw; g++) {
            const float m_new = max(m[g], ws[g][0]);
            corr[g] = exp(m[g] - m_new);
            m[g] = m_new;
        }
        barrier();
        for (uint g = 0; g < p.hpw; g++) ws[g][t] = t < count ? exp(e[g] - m[g]) : 0.0;
        barrier();
        // Each invocation's dims of each head, over the chunk's weights (read
        // before the sums below overwrite ws).
        for (uint g = 0; g < p.hpw; g++)
            for (uint i = 0; i < per_inv; i++) acc[g * per_inv + i] *= corr[g];
        for (uint j = 0; j < count; j++) {
            const uint vb = (c0 + j) * p.kv_stride + kvo;
            for (uint i = 0; i < per_inv; i++) {
                const uint d = t + i * WG;
                if (d >= hd) break;
                const float vd = v[vb + d];
                for (uint g = 0; g < p.hpw; g++) acc[g * per_inv + i] += ws[g][j] * vd;
            }
        }
        reduce_heads(true);
        for (uint g = 0; g < p.hpw; g++) l[g] = l[g] * corr[g] + ws[g][0];
        barrier();
    }
    for (uint g = 0; g < p.hpw; g++)
        for (uint i = 0; i < per_inv; i++) {
            const uint d = t + i * WG;
            if (d < hd) o[qo + g * hd + d] = acc[g * per_inv + i] / l[g];
        }
}
