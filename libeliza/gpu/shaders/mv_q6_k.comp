#version 450
// Q6_K (210 bytes): 128 bytes of low nibbles, 64 of high bit pairs, 16
// int8 scales, F16 d. Element 128 h + 32 i + l (l < 32): low nibble of ql
// byte 64 h + 32 (i & 1) + l (the high nibble for i >= 2), bits 2i, 2i + 1
// of qh byte 128 + 32 h + l; value (d * scale) * (q - 32), scale byte
// 192 + 8 h + 2 i + l / 16.
#include "matvec.glsl"

float quad_dot(uint base, uint q, vec4 xq) {
    const uint o = base + 210 * (q / 64), e = 4 * (q % 64), h = e / 128, i = (e % 128) / 32, l = e % 32;
    const uint lo = (word_at(o + 64 * h + 32 * (i & 1u) + l) >> (4 * (i >> 1))) & 0x0f0f0f0fu;
    const uint hi = ((word_at(o + 128 + 32 * h + l) >> (2 * i)) & 0x03030303u) << 4;
    const float sc = float(int(byte_at(o + 192 + 8 * h + 2 * i + l / 16) << 24) >> 24);
    return f16_at(o + 208) * sc * dot(u8x4(lo | hi) - 32.0, xq);
}
