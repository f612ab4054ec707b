// One query token against n_kv cached positions from row kv_first, split
// over the cache (flash-decoding), in one dispatch: workgroup (h, c) takes
// query head h and the WG positions of chunk c, and writes to the scratch
// buffer its chunk's largest score m, sum of exp(score - m) l and
// exp-weighted sum of values; the last of a head's chunks to finish (a
// counter per head, the scratch's first n_head words, taken with an atomic
// add) then combines them into out = sum_c exp(m_c - M) acc_c / sum_c
// exp(m_c - M) l_c, M the largest m_c, and sets the counter back to 0, so
// the counters must be 0 before the first run (ez_gpu_attn_scratch_reset).
// With step_word set, kv_first and n_kv are words step_word and step_word +
// 1 of the step buffer instead, so a recorded command buffer serves every
// position (the grid holds the chunks of the largest n_kv; the others
// return at once). The including shader defines the cache's k_at and v_at
// (element index -> value).
#include "common.glsl"

#define MAX_HEAD_DIM 512

layout(std430, binding = 0) readonly buffer Query { float q[]; };
layout(std430, binding = 3) coherent buffer Scratch { uint part[]; };
layout(std430, binding = 4) readonly buffer Step { uint st[]; };
layout(std430, binding = 5) writeonly buffer Output { float o[]; };

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
shared bool merges;

float part_at(uint i) { return uintBitsToFloat(part[i]); }

// The last chunk's workgroup: the head's chunks [0, used) combined.
void merge(uint h, uint used) {
    const uint t = gl_LocalInvocationID.x, stride = p.head_dim + 2, base = p.n_head + h * p.n_chunks * stride;
    float m = -1.0 / 0.0;
    for (uint c = t; c < used; c += WG) m = max(m, part_at(base + c * stride));
    m = wg_max(m);
    float l = 0.0;
    for (uint c = t; c < used; c += WG) l += exp(part_at(base + c * stride) - m) * part_at(base + c * stride + 1);
    const float inv = 1.0 / wg_sum(l);
    for (uint d = t; d < p.head_dim; d += WG) {
        float acc = 0.0;
        for (uint c = 0; c < used; c++) acc += exp(part_at(base + c * stride) - m) * part_at(base + c * stride + 2 + d);
        o[h * p.head_dim + d] = acc * inv;
    }
}

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
    const uint base = p.n_head + gi * (p.head_dim + 2);
    for (uint d = t; d < p.head_dim; d += WG) {
        float acc = 0.0;
        for (uint j = 0; j < count; j++) acc += w[j] * v_at((pos0 + j) * p.kv_stride + kvh * p.head_dim + d);
        part[base + 2 + d] = floatBitsToUint(acc);
    }
    if (t == 0) {
        part[base] = floatBitsToUint(m);
        part[base + 1] = floatBitsToUint(l);
    }
    // This chunk's partials reach memory before its count does.
    memoryBarrierBuffer();
    barrier();
    const uint used = (n_kv + WG - 1) / WG;
    if (t == 0) merges = atomicAdd(part[h], 1u) == used - 1;
    barrier();
    if (!merges) return;
    memoryBarrierBuffer();
    merge(h, used);
    if (t == 0) part[h] = 0u;
}
