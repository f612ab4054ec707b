#version 450
#define BLOCK_ELEMS 1
#define BLOCK_BYTES 2
#include "matvec.glsl"

float block_dot(uint boff, uint xi) { return f16_at(boff) * x[xi]; }
