#version 450
// Causal attention of a batch of query tokens (the prompt pass) over an F32
// cache that already holds the batch's own keys and values: workgroup
// (b, h) takes query head h of the ROWS batch rows b * ROWS .. b * ROWS +
// ROWS - 1; row t sits at position pos = word pos_word of the step buffer
// (the position of row 0, as an int) + t and attends to its window
// [max(0, pos - n_swa + 1) or 0, pos]. The group walks the union of its
// rows' windows in chunks of WG positions: invocation j reads key c0 + j
// once and scores it against every row, and each value row read serves
// every row, with a running maximum and sum per row (one pass, no scratch).
// Rows before word row0_word (a bucket's padding) or past n_tok are masked
// and not written; windows end at the n_kv rows the cache holds.
#include "common.glsl"

#define MAX_HEAD_DIM 512
#define PER_INV (MAX_HEAD_DIM / 64)   // the host runs it with WG = 64
#define ROWS 4                        // ATTN_PREFILL_ROWS in vk_ops.c

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

shared float qs[ROWS][MAX_HEAD_DIM];
shared float w[ROWS][WG];

void main() {
    const uint gi = group_index(), t = gl_LocalInvocationID.x;
    const uint blk = gi / p.n_head, h = gi % p.n_head, row_lo = blk * ROWS;
    const uint row0 = st[p.row0_word];
    const int pos0 = int(st[p.pos_word]);
    const uint kvo = (h / (p.n_head / p.n_head_kv)) * p.head_dim;
    uint first[ROWS], end[ROWS];
    uint lo = 0xffffffffu, hi = 0u;
    for (uint r = 0; r < ROWS; r++) {
        const uint row = row_lo + r;
        const int pos = pos0 + int(row);
        const bool live = row < p.n_tok && row >= row0;
        first[r] = p.n_swa > 0 ? uint(max(0, pos - int(p.n_swa) + 1)) : 0u;
        end[r] = live ? min(uint(pos) + 1, p.n_kv) : 0u;
        if (end[r] > first[r]) {
            lo = min(lo, first[r]);
            hi = max(hi, end[r]);
        }
        for (uint d = t; d < p.head_dim; d += WG) qs[r][d] = live ? q[(row * p.n_head + h) * p.head_dim + d] : 0.0;
    }
    if (hi == 0u) return;
    barrier();
    float acc[ROWS][PER_INV];
    float m[ROWS], l[ROWS];
    for (uint r = 0; r < ROWS; r++) {
        m[r] = -1.0 / 0.0;
        l[r] = 0.0;
        for (uint i = 0; i < PER_INV; i++) acc[r][i] = 0.0;
    }
    for (uint c0 = lo; c0 < hi; c0 += WG) {
        const uint count = min(WG, hi - c0), c = c0 + t;
        float s[ROWS];
        for (uint r = 0; r < ROWS; r++) s[r] = 0.0;
        if (t < count) {
            const uint kb = c * p.kv_stride + kvo;
            for (uint d = 0; d < p.head_dim; d++) {
                const float kd = k[kb + d];
                for (uint r = 0; r < ROWS; r++) s[r] += qs[r][d] * kd;
            }
        }
        float corr[ROWS];
        for (uint r = 0; r < ROWS; r++) {
            const bool ok = t < count && c >= first[r] && c < end[r];
            const float sr = ok ? s[r] * p.scale : -1.0 / 0.0;
            const float m_new = max(m[r], wg_max(sr));
            const float e = ok ? exp(sr - m_new) : 0.0;
            w[r][t] = e;
            corr[r] = m[r] == m_new ? 1.0 : exp(m[r] - m_new);
            l[r] = l[r] * corr[r] + wg_sum(e);
            m[r] = m_new;
        }
        barrier();
        for (uint i = 0; i < PER_INV; i++) {
            const uint d = t + i * WG;
            if (d >= p.head_dim) break;
            float a[ROWS];
            for (uint r = 0; r < ROWS; r++) a[r] = acc[r][i] * corr[r];
            for (uint j = 0; j < count; j++) {
                const float vd = v[(c0 + j) * p.kv_stride + kvo + d];
                for (uint r = 0; r < ROWS; r++) a[r] += w[r][j] * vd;
            }
            for (uint r = 0; r < ROWS; r++) acc[r][i] = a[r];
        }
        barrier();
    }
    for (uint r = 0; r < ROWS; r++) {
        const uint row = row_lo + r;
        if (end[r] <= first[r]) continue;
        for (uint i = 0; i < PER_INV; i++) {
            const uint d = t + i * WG;
            if (d < p.head_dim) o[(row * p.n_head + h) * p.head_dim + d] = acc[r][i] / l[r];
        }
    }
}
