// A weight matrix as 32-bit words at binding 0 (no 8- or 16-bit storage
// feature needed) and the readers of its packed fields, shared by the
// matrix-vector (matvec.glsl) and matrix-matrix (matmul.glsl) products.

layout(std430, binding = 0) readonly buffer Weights { uint w[]; };

// The 32-bit word at an even byte offset.
uint word_at(uint off) {
    const uint i = off >> 2;
    return (off & 2u) == 0u ? w[i] : (w[i] >> 16) | (w[i + 1] << 16);
}
uint u16_at(uint off) { return (w[off >> 2] >> ((off & 2u) * 8u)) & 0xffffu; }
float f16_at(uint off) { return unpackHalf2x16(u16_at(off)).x; }
// The byte at any offset (scales of the K quants).
uint byte_at(uint off) { return (w[off >> 2] >> ((off & 3u) * 8u)) & 0xffu; }

// The four unsigned bytes of q as floats, and the signed ones.
vec4 u8x4(uint q) { return vec4(q & 0xffu, (q >> 8) & 0xffu, (q >> 16) & 0xffu, q >> 24); }
vec4 s8x4(uint q) {
    const int v = int(q);
    return vec4(bitfieldExtract(v, 0, 8), bitfieldExtract(v, 8, 8), bitfieldExtract(v, 16, 8), bitfieldExtract(v, 24, 8));
}
float sum4(vec4 v) { return v.x + v.y + v.z + v.w; }
