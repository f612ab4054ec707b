// y[y_off + r] = W[r] . x[x_off ..] for one row r per workgroup. The weight
// buffer is read as 32-bit words (no 8- or 16-bit storage feature needed);
// the including shader defines BLOCK_ELEMS, BLOCK_BYTES and
// block_dot(byte offset of the block, index of its first x element).
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
} p;

uint byte_at(uint off) { return (w[off >> 2] >> ((off & 3u) * 8u)) & 0xffu; }
int sbyte_at(uint off) { return int(byte_at(off) << 24) >> 24; }
// off is even.
uint u16_at(uint off) { return (w[off >> 2] >> ((off & 2u) * 8u)) & 0xffffu; }
float f16_at(uint off) { return unpackHalf2x16(u16_at(off)).x; }

float block_dot(uint boff, uint xi);

void main() {
    const uint row = group_index();
    if (row >= p.n_rows) return;
    const uint nb = p.n_cols / BLOCK_ELEMS;
    const uint base = row * p.row_bytes;
    float s = 0.0;
    for (uint b = gl_LocalInvocationID.x; b < nb; b += WG) s += block_dot(base + b * BLOCK_BYTES, p.x_off + b * BLOCK_ELEMS);
    s = wg_sum(s);
    if (gl_LocalInvocationID.x == 0) y[p.y_off + row] = s;
}
