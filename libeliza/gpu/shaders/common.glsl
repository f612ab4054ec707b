// Shared by every shader: the workgroup size (specialization constant 0,
// a power of two the host picks), the flat index of a workgroup in a 2-D
// grid (a dimension holds at most 65535 groups everywhere), and a
// workgroup sum / max in shared memory, so no shader depends on the
// subgroup size (the `_sg` builds, EZ_SUBGROUP, of the matvecs and of the
// row ops below use subgroup arithmetic where the device has it:
// mv_reduce.glsl and wg_sum / wg_max here).
#extension GL_GOOGLE_include_directive : require
#ifdef EZ_SUBGROUP
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

shared float red[WG];

uint group_index() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

#ifdef EZ_SUBGROUP
// The `_sg` builds (EZ_SUBGROUP): each subgroup's sum or maximum, then every
// invocation combines the subgroups' results from shared memory (two
// barriers instead of the tree's log2(WG) + 2).
float wg_sum(float v) {
    const float s = subgroupAdd(v);
    if (subgroupElect()) red[gl_SubgroupID] = s;
    barrier();
    float r = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; i++) r += red[i];
    barrier();
    return r;
}

float wg_max(float v) {
    const float s = subgroupMax(v);
    if (subgroupElect()) red[gl_SubgroupID] = s;
    barrier();
    float r = red[0];
    for (uint i = 1; i < gl_NumSubgroups; i++) r = max(r, red[i]);
    barrier();
    return r;
}
#else
float wg_sum(float v) {
    const uint t = gl_LocalInvocationID.x;
    red[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) red[t] += red[t + s];
        barrier();
    }
    const float r = red[0];
    barrier();
    return r;
}

float wg_max(float v) {
    const uint t = gl_LocalInvocationID.x;
    red[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) red[t] = max(red[t], red[t + s]);
        barrier();
    }
    const float r = red[0];
    barrier();
    return r;
}
#endif

// The gated units' activations: act 0 is GELU-tanh in its sigmoid form,
// x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)); act 1 is SiLU.
float glu_act(float v, uint act) {
    if (act == 0) return v / (1.0 + exp(-2.0 * 0.7978845608028654 * (v + 0.044715 * v * v * v)));
    return v / (1.0 + exp(-v));
}
