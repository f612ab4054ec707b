// One query token against n_kv cached positions from row kv_first, one
// workgroup per query head: scores to the scratch buffer, softmax, then the
// weighted sum of values. With step_word set, kv_first and n_kv are words
// step_word and step_word + 1 of the step buffer instead, so a recorded
// command buffer serves every position. The including shader defines the
// cache's k_at and v_at (element index -> value).
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Query { float q[]; };
layout(std430, binding = 3) writeonly buffer Output { float o[]; };
layout(std430, binding = 4) buffer Scratch { float sc[]; };
layout(std430, binding = 5) readonly buffer Step { uint st[]; };

layout(push_constant) uniform Push {
    uint n_head;
    uint n_head_kv;
    uint head_dim;
    uint n_kv;
    uint kv_stride;
    float scale;
    uint kv_first;
    uint step_word;
} p;

float k_at(uint e);
float v_at(uint e);

void main() {
    const uint h = group_index();
    if (h >= p.n_head) return;
    const uint t0 = gl_LocalInvocationID.x;
    const bool dyn = p.step_word != 0xffffffffu;
    const uint kv_first = dyn ? st[p.step_word] : p.kv_first, n_kv = dyn ? st[p.step_word + 1] : p.n_kv;
    const uint kvh = h / (p.n_head / p.n_head_kv);
    const uint qb = h * p.head_dim, sb = h * n_kv;
    float m = -1.0 / 0.0;
    for (uint t = t0; t < n_kv; t += WG) {
        const uint kb = (kv_first + t) * p.kv_stride + kvh * p.head_dim;
        float s = 0.0;
        for (uint d = 0; d < p.head_dim; d++) s += q[qb + d] * k_at(kb + d);
        s *= p.scale;
        sc[sb + t] = s;
        m = max(m, s);
    }
    m = wg_max(m);
    float sum = 0.0;
    for (uint t = t0; t < n_kv; t += WG) {
        const float e = exp(sc[sb + t] - m);
        sc[sb + t] = e;
        sum += e;
    }
    sum = wg_sum(sum);
    memoryBarrierBuffer();
    barrier();
    const float inv = 1.0 / sum;
    for (uint d = t0; d < p.head_dim; d += WG) {
        float acc = 0.0;
        for (uint t = 0; t < n_kv; t++) acc += sc[sb + t] * v_at((kv_first + t) * p.kv_stride + kvh * p.head_dim + d);
        o[qb + d] = acc * inv;
    }
}
