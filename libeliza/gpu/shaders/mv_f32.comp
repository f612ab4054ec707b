#version 450
#define BLOCK_ELEMS 1
#define BLOCK_BYTES 4
#include "matvec.glsl"

float block_dot(uint boff, uint xi) { return uintBitsToFloat(w[boff >> 2]) * x[xi]; }
