// y[y_off + r] = W[r] . x[x_off ..]: each workgroup takes WG / p.lanes rows,
// p.lanes invocations per row (a power of two the host picks from the row's
// length), each summing whole units (UNIT elements: a block of a 32-element
// quant type, a 32-element sub-block of a K quant, 8 floats) read as 32-bit
// words, then a shared-memory tree over the row's lanes (no subgroup
// operation, so no assumption on the subgroup size). The weight buffer needs
// no 8- or 16-bit storage feature; rows start at any even byte. The
// including shader defines UNIT and unit_dot(byte offset of the row, unit
// index, index of the row's first x element); float types also define
// TAIL_DOT for the n_cols % UNIT elements past the last whole unit.
#include "common.glsl"

layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 2) writeonly buffer Output { float y[]; };

layout(push_constant) uniform Push {
    uint n_cols;
    uint n_rows;
    uint row_bytes;
    uint x_off;
    uint y_off;
    uint lanes;
} p;

// The 32-bit word at an even byte offset.
uint word_at(uint off) {
    const uint i = off >> 2;
    return (off & 2u) == 0u ? w[i] : (w[i] >> 16) | (w[i + 1] << 16);
}
uint u16_at(uint off) { return (w[off >> 2] >> ((off & 2u) * 8u)) & 0xffffu; }
float f16_at(uint off) { return unpackHalf2x16(u16_at(off)).x; }
// The byte at any offset (scales of the K quants).
uint byte_at(uint off) { return (w[off >> 2] >> ((off & 3u) * 8u)) & 0xffu; }

// Four unsigned bytes of q (each 0..255) against x[xi .. xi + 3].
float dot_u8x4(uint q, uint xi) {
    return float(q & 0xffu) * x[xi] + float((q >> 8) & 0xffu) * x[xi + 1] + float((q >> 16) & 0xffu) * x[xi + 2] +
           float(q >> 24) * x[xi + 3];
}
// The same for four signed bytes.
float dot_s8x4(uint q, uint xi) {
    const int v = int(q);
    return float(bitfieldExtract(v, 0, 8)) * x[xi] + float(bitfieldExtract(v, 8, 8)) * x[xi + 1] +
           float(bitfieldExtract(v, 16, 8)) * x[xi + 2] + float(bitfieldExtract(v, 24, 8)) * x[xi + 3];
}
float sum4(uint xi) { return x[xi] + x[xi + 1] + x[xi + 2] + x[xi + 3]; }

float unit_dot(uint base, uint u, uint xi);
#ifdef TAIL_DOT
float tail_dot(uint base, uint i, uint xi);
#endif

void main() {
    const uint t = gl_LocalInvocationID.x;
    const uint lane = t % p.lanes;
    const uint row = group_index() * (WG / p.lanes) + t / p.lanes;
    float s = 0.0;
    if (row < p.n_rows) {
        const uint base = row * p.row_bytes, nu = p.n_cols / UNIT;
        for (uint u = lane; u < nu; u += p.lanes) s += unit_dot(base, u, p.x_off);
#ifdef TAIL_DOT
        for (uint i = nu * UNIT + lane; i < p.n_cols; i += p.lanes) s += tail_dot(base, i, p.x_off);
#endif
    }
    red[t] = s;
    barrier();
    for (uint st = p.lanes / 2; st > 0; st >>= 1) {
        if (lane < st) red[t] += red[t + st];
        barrier();
    }
    if (lane == 0 && row < p.n_rows) y[p.y_off + row] = red[t];
}
