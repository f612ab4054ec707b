#version 450
// Q4_K (144 bytes): F16 d and dmin, 12 bytes of 6-bit scales and mins,
// 128 bytes of nibbles: byte 32k + l holds element l of sub-block 2k (low)
// and of 2k + 1 (high); value (d * scale) * q - dmin * min.
//
// y[y_off + r] = W[r] . x[x_off ..], read 16 bytes at a time: a super-block
// is 9 aligned uvec4s (the header, then 8 of nibbles), and a row is whole
// super-blocks, so every load is one 16-byte word. The unit of work is a
// slice of 32 elements, one uvec4 of nibbles: slice s of a super-block
// (s < 8) holds elements 16 (s % 2) .. + 15 of sub-blocks 2 (s / 2) (low
// nibbles) and 2 (s / 2) + 1 (high). A workgroup takes WG / p.lanes row
// groups of MV_ROWS rows, p.lanes invocations per group (a power of two the host
// picks from the row's slices); invocation l of a group takes slices l,
// l + lanes, ... of each of its MV_ROWS rows, loading their x once for all MV_ROWS
// rows; then the group's sums (mv_reduce.glsl).
#include "common.glsl"

#define MV_ROWS 2

layout(std430, binding = 0) readonly buffer Weights { uvec4 w4[]; };
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

// Byte i < 12 of the packed scales (words 1..3 of the header).
uint scale_byte(uvec4 h, uint i) { return (h[1 + i / 4] >> (8 * (i % 4))) & 0xffu; }

vec4 nib4(uint v) { return vec4(v & 15u, (v >> 8) & 15u, (v >> 16) & 15u, (v >> 24) & 15u); }

void main() {
    const uint t = gl_LocalInvocationID.x;
    const uint lane = t % p.lanes;
    const uint row0 = (group_index() * (WG / p.lanes) + t / p.lanes) * MV_ROWS;
    const uint ns = p.n_cols / 32, r16 = p.row_bytes / 16;
    float acc[MV_ROWS];
    for (uint r = 0; r < MV_ROWS; r++) acc[r] = 0.0;
    for (uint s = lane; s < ns && row0 < p.n_rows; s += p.lanes) {
        const uint b = s / 8, k = (s % 8) / 2, e4 = 64 * b + 16 * k + 4 * (s % 2);
        vec4 xl[4], xh[4];
        for (uint i = 0; i < 4; i++) {
            xl[i] = x_quad(e4 + i);
            xh[i] = x_quad(e4 + 8 + i);
        }
        const float sl = dot(xl[0] + xl[1] + xl[2] + xl[3], vec4(1.0));
        const float sh = dot(xh[0] + xh[1] + xh[2] + xh[3], vec4(1.0));
        for (uint r = 0; r < MV_ROWS; r++) {
            const uint o = min(row0 + r, p.n_rows - 1) * r16 + 9 * b;
            const uvec4 h = w4[o], q = w4[o + 1 + (s % 8)];
            const vec2 dm = unpackHalf2x16(h.x);
            float sc0, mn0, sc1, mn1;
            if (k < 2) {
                sc0 = float(scale_byte(h, 2 * k) & 63u);
                mn0 = float(scale_byte(h, 2 * k + 4) & 63u);
                sc1 = float(scale_byte(h, 2 * k + 1) & 63u);
                mn1 = float(scale_byte(h, 2 * k + 5) & 63u);
            } else {
                const uint a0 = scale_byte(h, 2 * k + 4), a1 = scale_byte(h, 2 * k + 5);
                sc0 = float((a0 & 15u) | ((scale_byte(h, 2 * k - 4) >> 6) << 4));
                mn0 = float((a0 >> 4) | ((scale_byte(h, 2 * k) >> 6) << 4));
                sc1 = float((a1 & 15u) | ((scale_byte(h, 2 * k - 3) >> 6) << 4));
                mn1 = float((a1 >> 4) | ((scale_byte(h, 2 * k + 1) >> 6) << 4));
            }
            const float lo = dot(nib4(q.x), xl[0]) + dot(nib4(q.y), xl[1]) + dot(nib4(q.z), xl[2]) +
                             dot(nib4(q.w), xl[3]);
            const float hi = dot(nib4(q.x >> 4), xh[0]) + dot(nib4(q.y >> 4), xh[1]) + dot(nib4(q.z >> 4), xh[2]) +
                             dot(nib4(q.w >> 4), xh[3]);
            acc[r] += dm.x * (sc0 * lo + sc1 * hi) - dm.y * (mn0 * sl + mn1 * sh);
        }
    }
    store_rows(acc, t, lane, row0);
}
