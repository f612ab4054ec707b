// y[y_off + r] = W[r] . x[x_off ..]: each workgroup takes WG / p.lanes rows,
// p.lanes invocations per row (a power of two the host picks from the row's
// length). Invocation l of a row takes the quads (4 consecutive elements:
// one 32-bit word of 8-bit quants, or the nibbles of one) l, l + lanes, ...,
// so neighbouring invocations read neighbouring words of the weights and of
// x (x as a vec4 where x_off is a multiple of 4); then a shared-memory tree
// over the row's lanes (no subgroup operation, so no assumption on the
// subgroup size). The weight buffer needs no 8- or 16-bit storage feature;
// rows start at any even byte. The including shader defines
// quad_dot(byte offset of the row, quad index, the quad's x) and, for the
// float types, TAIL_DOT with tail_dot for the n_cols % 4 elements past the
// last quad.
#include "common.glsl"
#include "weights.glsl"

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
} p;

float quad_dot(uint base, uint q, vec4 xq);
#ifdef TAIL_DOT
float tail_dot(uint base, uint i, uint xi);
#endif

// The x of quad q, as a vec4 where x's offset allows.
vec4 x_quad(uint q) {
    if ((p.x_off & 3u) == 0u) return x4[p.x_off / 4 + q];
    const uint e = p.x_off + 4 * q;
    return vec4(x[e], x[e + 1], x[e + 2], x[e + 3]);
}

void main() {
    const uint t = gl_LocalInvocationID.x;
    const uint lane = t % p.lanes;
    const uint row = group_index() * (WG / p.lanes) + t / p.lanes;
    float s = 0.0;
    if (row < p.n_rows) {
        const uint base = row * p.row_bytes, nq = p.n_cols / 4, l = p.lanes;
        uint q = lane;
        // Four quads per round, so each invocation has four quads' loads in
        // flight before it needs the first (decode is latency bound).
        for (; q + 3 * l < nq; q += 4 * l)
            s += quad_dot(base, q, x_quad(q)) + quad_dot(base, q + l, x_quad(q + l)) +
                 quad_dot(base, q + 2 * l, x_quad(q + 2 * l)) + quad_dot(base, q + 3 * l, x_quad(q + 3 * l));
        for (; q < nq; q += l) s += quad_dot(base, q, x_quad(q));
#ifdef TAIL_DOT
        for (uint i = nq * 4 + lane; i < p.n_cols; i += l) s += tail_dot(base, i, p.x_off);
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
