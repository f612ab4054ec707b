#version 450
#define BLOCK_ELEMS 1
#define BLOCK_BYTES 2
#include "matvec.glsl"

float block_dot(uint boff, uint xi) { return uintBitsToFloat(u16_at(boff) << 16) * x[xi]; }
