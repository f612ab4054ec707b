#version 450
#include "attention.glsl"

layout(std430, binding = 1) readonly buffer Keys { float k[]; };
layout(std430, binding = 2) readonly buffer Values { float v[]; };

float k_at(uint e) { return k[e]; }
float v_at(uint e) { return v[e]; }
