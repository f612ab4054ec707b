// y[y_off + r] = W[r] . x[x_off ..]: each workgroup takes WG / p.lanes row
// groups of MV_ROWS = 2 rows (each x load serves both),
// p.lanes invocations per group (a power of two the host picks from the
// row's length). Invocation l of a row takes the quads (4 consecutive elements:
// one 32-bit word of 8-bit quants, or the nibbles of one) l, l + lanes, ...,
// so neighbouring invocations read neighbouring words of the weights and of
// x (x as a vec4 where x_off is a multiple of 4); then the group's sums
// (mv_reduce.glsl). The weight buffer needs no 8- or 16-bit storage feature;
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
    uint glu;
    uint step_word;
    uint rope_hd;
    uint n_rot;
    uint cs_off;
    uint rope_row0;
} p;

#define MV_ROWS 2
#include "mv_reduce.glsl"

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
    const uint row0 = (group_index() * (WG / p.lanes) + t / p.lanes) * MV_ROWS;
    const uint nq = p.n_cols / 4, l = p.lanes;
    float acc[MV_ROWS];
    uint base[MV_ROWS];
    for (uint r = 0; r < MV_ROWS; r++) {
        acc[r] = 0.0;
        base[r] = min(row0 + r, p.n_rows - 1) * p.row_bytes;
    }
    if (row0 < p.n_rows) {
        uint q = lane;
        // Four quads per round, so each invocation has four quads' loads in
        // flight before it needs the first (decode is latency bound); each
        // quad's x serves the group's MV_ROWS rows.
        for (; q + 3 * l < nq; q += 4 * l) {
            const vec4 x0 = x_quad(q), x1 = x_quad(q + l), x2 = x_quad(q + 2 * l), x3 = x_quad(q + 3 * l);
            for (uint r = 0; r < MV_ROWS; r++)
                acc[r] += quad_dot(base[r], q, x0) + quad_dot(base[r], q + l, x1) + quad_dot(base[r], q + 2 * l, x2) +
                          quad_dot(base[r], q + 3 * l, x3);
        }
        for (; q < nq; q += l) {
            const vec4 x0 = x_quad(q);
            for (uint r = 0; r < MV_ROWS; r++) acc[r] += quad_dot(base[r], q, x0);
        }
#ifdef TAIL_DOT
        for (uint i = nq * 4 + lane; i < p.n_cols; i += l)
            for (uint r = 0; r < MV_ROWS; r++) acc[r] += tail_dot(base[r], i, p.x_off);
#endif
    }
    store_rows(acc, t, lane, row0);
}
