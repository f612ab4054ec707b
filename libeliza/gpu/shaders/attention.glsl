// One query token against n_kv cached positions from row kv_first, split
// over the cache (flash-decoding): workgroup (h, c) takes query head h and
// the WG positions of chunk c, and writes to the scratch buffer its chunk's
// largest score m, sum of exp(score - m) l and exp-weighted sum of values;
// attn_merge.comp then combines the chunks of each head. With step_word
// set, kv_first and n_kv are words step_word and step_word + 1 of the step
// buffer instead, so a recorded command buffer serves every position (the
// grid holds the chunks of the largest n_kv; the others return at once).
// The including shader defines the cache's k_at and v_at (element index ->
// value).
#include "common.glsl"

#define MAX_HEAD_DIM 512

layout(std430, binding = 0) readonly buffer Query { float q[]; };
layout(std430, binding = 3) writeonly buffer Scratch { float part[]; };
layout(std430, binding = 4) readonly buffer Step { uint st[]; };

layout(push_constant) uniform Push {
    uint n_head;
    uint n_head_kv;
    uint head_dim;
    uint n_kv;
    uint kv_stride;
    float scale;
    uint kv_first;
    uint step_word;
    uint n_chunks;
} p;

float k_at(uint e);
float v_at(uint e);

shared float qs[MAX_HEAD_DIM];
shared float w[WG];

void main() {
    const uint gi = group_index();
    const uint h = gi / p.n_chunks, c = gi % p.n_chunks;
    const uint t = gl_LocalInvocationID.x;
    const bool dyn = p.step_word != 0xffffffffu;
    const uint kv_first = dyn ? st[p.step_word] : p.kv_first, n_kv = dyn ? st[p.step_word + 1] : p.n_kv;
    if (h >= p.n_head || c * WG >= n_kv) return;
    const uint kvh = h / (p.n_head / p.n_head_kv);
    const uint pos0 = kv_first + c * WG, count = min(WG, n_kv - c * WG);
    for (uint d = t; d < p.head_dim; d += WG) qs[d] = q[h * p.head_dim + d];
    barrier();
    float s = -1.0 / 0.0;
    if (t < count) {
        const uint kb = (pos0 + t) * p.kv_stride + kvh * p.head_dim;
        float acc = 0.0;
        for (uint d = 0; d < p.head_dim; d++) acc += qs[d] * k_at(kb + d);
        s = acc * p.scale;
    }
    const float m = wg_max(s);
    const float e = t < count ? exp(s - m) : 0.0;
    w[t] = e;
    const float l = wg_sum(e);
    const uint base = gi * (p.head_dim + 2);
    for (uint d = t; d < p.head_dim; d += WG) {
        float acc = 0.0;
        for (uint j = 0; j < count; j++) acc += w[j] * v_at((pos0 + j) * p.kv_stride + kvh * p.head_dim + d);
        part[base + 2 + d] = acc;
    }
    if (t == 0) {
        part[base] = m;
        part[base + 1] = l;
    }
}
