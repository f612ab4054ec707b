#version 450
// The F16 cache: two IEEE halves per 32-bit word, the lower one first.
#include "attention.glsl"

layout(std430, binding = 1) readonly buffer Keys { uint k[]; };
layout(std430, binding = 2) readonly buffer Values { uint v[]; };

float k_at(uint e) { return unpackHalf2x16(k[e >> 1])[e & 1u]; }
float v_at(uint e) { return unpackHalf2x16(v[e >> 1])[e & 1u]; }
