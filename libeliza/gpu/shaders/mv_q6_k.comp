#version 450
// Q6_K (210 bytes): 128 bytes of low nibbles, 64 of high bit pairs, 16
// int8 scales, F16 d. In half h, ql byte l < 32 holds elements l (low) and
// 64 + l (high), byte 32 + l elements 32 + l and 96 + l; qh byte l the high
// bits of l, 32 + l, 64 + l, 96 + l. Value (d * scale) * (q - 32), a scale
// per 16 elements. A unit is the 32 elements 128 h + 32 i + l, l < 32.
#define UNIT 32
#include "matvec.glsl"

float sbyte(uint off) { return float(int(byte_at(off) << 24) >> 24); }

float unit_dot(uint base, uint u, uint xi) {
    const uint o = base + 210 * (u / 8), h = (u % 8) / 4, i = u % 4, e = xi + 32 * u;
    const uint ql = o + 64 * h + 32 * (i & 1u), qh = o + 128 + 32 * h;
    const uint lshift = 4 * (i >> 1), hshift = 2 * i;
    float s0 = 0.0, s1 = 0.0, sx0 = 0.0, sx1 = 0.0;
    for (uint j = 0; j < 8; j++) {
        const uint q = ((word_at(ql + 4 * j) >> lshift) & 0x0f0f0f0fu) | (((word_at(qh + 4 * j) >> hshift) & 0x03030303u) << 4);
        const float d = dot_u8x4(q, e + 4 * j), sx = sum4(e + 4 * j);
        if (j < 4) {
            s0 += d;
            sx0 += sx;
        } else {
            s1 += d;
            sx1 += sx;
        }
    }
    const uint sc = o + 192 + 8 * h + 2 * i;
    return f16_at(o + 208) * (sbyte(sc) * (s0 - 32.0 * sx0) + sbyte(sc + 1) * (s1 - 32.0 * sx1));
}
