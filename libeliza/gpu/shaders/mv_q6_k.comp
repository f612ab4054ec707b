#version 450
// Q6_K (210 bytes): 128 bytes of low nibbles, 64 of high bit pairs, 16
// int8 scales, F16 d. Element 128 h + 32 i + l (l < 32): low nibble of ql
// byte 64 h + 32 (i & 1) + l (the high nibble for i >= 2), bits 2i, 2i + 1
// of qh byte 128 + 32 h + l; value (d * scale) * (q - 32), scale byte
// 192 + 8 h + 2 i + l / 16.
//
// y[y_off + r] = W[r] . x[x_off ..] over slices of 64 elements: slice s of a
// super-block (s < 4; h = s / 2, m = s % 2) is l = 16 m .. 16 m + 15 of
// each of the four i, read as three 16-byte runs (ql for i = 0 and 2, ql
// for i = 1 and 3, qh), four scale bytes and d: blocks start at any even
// byte, so a run is four or five 32-bit words, shifted together. Row groups
// of MV_ROWS rows, p.lanes invocations per group, x of a slice loaded once
// for the group's rows; then the group's sums (mv_reduce.glsl).
#include "common.glsl"
#include "weights.glsl"

#define MV_ROWS 2

layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 1) readonly buffer Input4 { vec4 x4[]; };
layout(std430, binding = 2) writeonly buffer Output { float y[]; };

layout(push_constant) uniform Push {
    uint n_cols;
    uint n_rows;
    uint row_bytes;
    uint x_off;
    uint y_off;
    uint lanes;
    uint glu;
    uint step_word;
    uint rope_hd;
    uint n_rot;
    uint cs_off;
    uint rope_row0;
} p;

#include "mv_reduce.glsl"

vec4 x_quad(uint q) {
    if ((p.x_off & 3u) == 0u) return x4[p.x_off / 4 + q];
    const uint e = p.x_off + 4 * q;
    return vec4(x[e], x[e + 1], x[e + 2], x[e + 3]);
}

// The 16 bytes at an even byte offset.
uvec4 load16(uint off) {
    const uint i = off >> 2;
    const uvec4 a = uvec4(w[i], w[i + 1], w[i + 2], w[i + 3]);
    if ((off & 2u) == 0u) return a;
    const uint e = w[i + 4];
    return uvec4((a.x >> 16) | (a.y << 16), (a.y >> 16) | (a.z << 16), (a.z >> 16) | (a.w << 16),
                 (a.w >> 16) | (e << 16));
}

float s8(uint word, uint byte) { return float(bitfieldExtract(int(word), int(8 * byte), 8)); }

void main() {
    const uint t = gl_LocalInvocationID.x;
    const uint lane = t % p.lanes;
    const uint row0 = (group_index() * (WG / p.lanes) + t / p.lanes) * MV_ROWS;
    const uint ns = p.n_cols / 64;
    float acc[MV_ROWS];
    for (uint r = 0; r < MV_ROWS; r++) acc[r] = 0.0;
    for (uint s = lane; s < ns && row0 < p.n_rows; s += p.lanes) {
        const uint b = s / 4, h = (s % 4) / 2, m = s % 2, e4 = 64 * b + 32 * h + 4 * m;
        vec4 xs[4][4];
        for (uint i = 0; i < 4; i++)
            for (uint k = 0; k < 4; k++) xs[i][k] = x_quad(e4 + 8 * i + k);
        for (uint r = 0; r < MV_ROWS; r++) {
            const uint o = min(row0 + r, p.n_rows - 1) * p.row_bytes + 210 * b;
            const uvec4 qa = load16(o + 64 * h + 16 * m), qb = load16(o + 64 * h + 32 + 16 * m);
            const uvec4 qh = load16(o + 128 + 32 * h + 16 * m);
            const uint sa = word_at(o + 192 + 8 * h), sb = word_at(o + 196 + 8 * h);
            vec4 d4 = vec4(0.0);
            for (uint k = 0; k < 4; k++) {
                const uint hb = qh[k];
                d4.x += dot(u8x4((qa[k] & 0x0f0f0f0fu) | ((hb & 0x03030303u) << 4)) - 32.0, xs[0][k]);
                d4.y += dot(u8x4((qb[k] & 0x0f0f0f0fu) | (((hb >> 2) & 0x03030303u) << 4)) - 32.0, xs[1][k]);
                d4.z += dot(u8x4(((qa[k] >> 4) & 0x0f0f0f0fu) | (((hb >> 4) & 0x03030303u) << 4)) - 32.0, xs[2][k]);
                d4.w += dot(u8x4(((qb[k] >> 4) & 0x0f0f0f0fu) | (((hb >> 6) & 0x03030303u) << 4)) - 32.0, xs[3][k]);
            }
            acc[r] += f16_at(o + 208) * dot(d4, vec4(s8(sa, m), s8(sa, 2 + m), s8(sb, m), s8(sb, 2 + m)));
        }
    }
    store_rows(acc, t, lane, row0);
}
