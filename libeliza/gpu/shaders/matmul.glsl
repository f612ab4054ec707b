// Y = X W^T for a batch of tokens (the prompt pass): y[t * y_stride + y_off
// + r] = W[r] . x[t * n_cols ..], r < n_rows, t < n_tok. A workgroup of 128
// invocations takes a tile of 64 rows x 64 tokens; per step of 16 columns
// it dequantizes the tile's weights (2 quads of 4 elements per invocation)
// and loads its inputs into shared memory, transposed so that each
// invocation then reads its 4 rows and 8 tokens as vec4s and keeps 32
// sums in registers. The including shader defines quad_deq(byte offset of
// the row, quad index) -> the quad's 4 weights (0 past n_cols). With
// row0_word set, tiles whose tokens all come before word row0_word of the
// step buffer return at once (the padding of a bucket).
#include "common.glsl"
#include "weights.glsl"

#define BM 64
#define BN 64
#define BK 16

layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 1) readonly buffer Input4 { vec4 x4[]; };
layout(std430, binding = 2) writeonly buffer Output { float y[]; };
layout(std430, binding = 3) readonly buffer Step { uint st[]; };

layout(push_constant) uniform Push {
    uint n_cols;
    uint n_rows;
    uint row_bytes;
    uint y_off;
    uint y_stride;
    uint n_tok;
    uint row0_word;
} p;

vec4 quad_deq(uint base, uint q);

shared vec4 ws[BK][BM / 4];
shared vec4 xs[BK][BN / 4];

// The inputs of token t, elements 4q .. 4q + 3 (0 past the row or the batch).
vec4 x_quad(uint t, uint q) {
    const uint e = 4 * q;
    if (t >= p.n_tok || e >= p.n_cols) return vec4(0.0);
    if ((p.n_cols & 3u) == 0u) return x4[(t * p.n_cols + e) / 4];
    const uint b = t * p.n_cols + e;
    return vec4(x[b], e + 1 < p.n_cols ? x[b + 1] : 0.0, e + 2 < p.n_cols ? x[b + 2] : 0.0,
                e + 3 < p.n_cols ? x[b + 3] : 0.0);
}

// Invocation t's two quads of the step at column k0: weight row and token
// (t + 128 s) / 4 of the tile, quad t % 4 of the step.
void load_step(uint r0, uint t0, uint k0, out vec4 wv[2], out vec4 xv[2]) {
    const uint t = gl_LocalInvocationID.x, kq = t % 4;
    for (uint s = 0; s < 2; s++) {
        const uint r = (t + 128 * s) / 4;
        wv[s] = r0 + r < p.n_rows ? quad_deq((r0 + r) * p.row_bytes, k0 / 4 + kq) : vec4(0.0);
        xv[s] = x_quad(t0 + r, k0 / 4 + kq);
    }
}

void main() {
    const uint t = gl_LocalInvocationID.x;
    const uint r0 = gl_WorkGroupID.x * BM, t0 = gl_WorkGroupID.y * BN;
    if (p.row0_word != 0xffffffffu && t0 + BN <= st[p.row0_word]) return;
    const uint tr = t % 16, tc = t / 16;
    vec4 acc[8];
    for (uint j = 0; j < 8; j++) acc[j] = vec4(0.0);
    // The next step's weights and inputs are loaded into registers while
    // this step's are multiplied from shared memory.
    vec4 wv[2], xv[2];
    load_step(r0, t0, 0, wv, xv);
    for (uint k0 = 0; k0 < p.n_cols; k0 += BK) {
        for (uint s = 0; s < 2; s++) {
            const uint r = (t + 128 * s) / 4, kq = t % 4;
            for (uint c = 0; c < 4; c++) {
                ws[4 * kq + c][r / 4][r % 4] = wv[s][c];
                xs[4 * kq + c][r / 4][r % 4] = xv[s][c];
            }
        }
        barrier();
        if (k0 + BK < p.n_cols) load_step(r0, t0, k0 + BK, wv, xv);
        for (uint k = 0; k < BK; k++) {
            const vec4 a = ws[k][tr], b0 = xs[k][2 * tc], b1 = xs[k][2 * tc + 1];
            acc[0] += a * b0.x;
            acc[1] += a * b0.y;
            acc[2] += a * b0.z;
            acc[3] += a * b0.w;
            acc[4] += a * b1.x;
            acc[5] += a * b1.y;
            acc[6] += a * b1.z;
            acc[7] += a * b1.w;
        }
        barrier();
    }
    for (uint j = 0; j < 8; j++) {
        const uint tok = t0 + 8 * tc + j;
        if (tok >= p.n_tok) break;
        for (uint i = 0; i < 4; i++)
            if (r0 + 4 * tr + i < p.n_rows) y[tok * p.y_stride + p.y_off + r0 + 4 * tr + i] = acc[j][i];
    }
}
