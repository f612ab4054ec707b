#version 450
// Causal attention of a batch of query tokens (the prompt pass) over an F32
// cache that already holds the batch's own keys and values: workgroup
// (t, h) takes query head h of batch row t, at position pos = word pos_word
// of the step buffer (the position of row 0, as an int) + t, and walks its
// window [max(0, pos - n_swa + 1) or 0, pos] in chunks of WG positions with
// a running maximum and sum (one pass, no scratch). Rows before word
// row0_word (a bucket's padding) return at once; the window ends at the
// n_kv rows the cache holds.
#include "common.glsl"

#define MAX_HEAD_DIM 512
#define PER_INV (MAX_HEAD_DIM / 64)   // the host runs it with WG = 64

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
} p;

shared float qs[MAX_HEAD_DIM];
shared float w[WG];

void main() {
    const uint gi = group_index(), t = gl_LocalInvocationID.x;
    const uint row = gi / p.n_head, h = gi % p.n_head;
    if (row >= p.n_tok || row < st[p.row0_word]) return;
    const int pos = int(st[p.pos_word]) + int(row);
    const uint first = p.n_swa > 0 ? uint(max(0, pos - int(p.n_swa) + 1)) : 0u, end = min(uint(pos) + 1, p.n_kv);
    const uint kvo = (h / (p.n_head / p.n_head_kv)) * p.head_dim, qo = (row * p.n_head + h) * p.head_dim;
    for (uint d = t; d < p.head_dim; d += WG) qs[d] = q[qo + d];
    barrier();
    float acc[PER_INV];
    for (uint i = 0; i < PER_INV; i++) acc[i] = 0.0;
    float m = -1.0 / 0.0, l = 0.0;
    for (uint c0 = first; c0 < end; c0 += WG) {
        const uint count = min(WG, end - c0);
        float s = -1.0 / 0.0;
        if (t < count) {
            const uint kb = (c0 + t) * p.kv_stride + kvo;
            float dot_qk = 0.0;
            for (uint d = 0; d < p.head_dim; d++) dot_qk += qs[d] * k[kb + d];
            s = dot_qk * p.scale;
        }
        const float m_new = max(m, wg_max(s));
        const float e = t < count ? exp(s - m_new) : 0.0;
        w[t] = e;
        const float corr = exp(m - m_new);
        l = l * corr + wg_sum(e);
        m = m_new;
        for (uint i = 0; i < PER_INV; i++) {
            const uint d = t + i * WG;
            if (d >= p.head_dim) break;
            float a = acc[i] * corr;
            for (uint j = 0; j < count; j++) a += w[j] * v[(c0 + j) * p.kv_stride + kvo + d];
            acc[i] = a;
        }
    }
    for (uint i = 0; i < PER_INV; i++) {
        const uint d = t + i * WG;
        if (d < p.head_dim) o[qo + d] = acc[i] / l;
    }
}
