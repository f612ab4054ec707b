#version 450
// Q6_K (210 bytes): 128 bytes of low nibbles, 64 of high bit pairs, 16
// int8 scales, F16 d. In half h, ql byte l < 32 holds elements l (low) and
// 64 + l (high), byte 32 + l elements 32 + l and 96 + l; qh byte l the high
// bits of l, 32 + l, 64 + l, 96 + l. Value (d * scale) * (q - 32).
#define BLOCK_ELEMS 256
#define BLOCK_BYTES 210
#include "matvec.glsl"

float block_dot(uint boff, uint xi) {
    const float d = f16_at(boff + 208);
    float s = 0.0;
    for (uint h = 0; h < 2; h++) {
        const uint ql = boff + 64 * h, qh = boff + 128 + 32 * h;
        for (uint l = 0; l < 32; l++) {
            const uint a = byte_at(ql + l), b = byte_at(ql + l + 32), hb = byte_at(qh + l);
            const int q0 = int((a & 15u) | ((hb & 3u) << 4)) - 32;
            const int q1 = int((b & 15u) | (((hb >> 2) & 3u) << 4)) - 32;
            const int q2 = int((a >> 4) | (((hb >> 4) & 3u) << 4)) - 32;
            const int q3 = int((b >> 4) | (((hb >> 6) & 3u) << 4)) - 32;
            const uint sc = boff + 192 + 8 * h + l / 16;
            const uint xo = xi + 128 * h + l;
            s += d * float(sbyte_at(sc)) * float(q0) * x[xo];
            s += d * float(sbyte_at(sc + 2)) * float(q1) * x[xo + 32];
            s += d * float(sbyte_at(sc + 4)) * float(q2) * x[xo + 64];
            s += d * float(sbyte_at(sc + 6)) * float(q3) * x[xo + 96];
        }
    }
    return s;
}
