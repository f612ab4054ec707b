// The end of every matvec: the sums of a row group's p.lanes invocations
// for its MV_ROWS rows, written to y; with p.glu (1 + common.glsl's act),
// the rows are a gate's and an up's row i (MV_ROWS = 2, row0 = 2 i: a
// matrix from ez_gpu_matrix_upload_pair) and y[y_off + i] = act(gate) * up.
// With p.step_word other than 0xffffffff, y_off grows by that word of the
// step buffer at binding 3 (the value's matvec writes its cache row, which
// moves with the position). The including shader declares p (with lanes,
// n_rows, y_off, glu, step_word), y and MV_ROWS. Built as `NAME_sg` with
// EZ_SUBGROUP (where the device has subgroup arithmetic in compute): one
// subgroupAdd per row, then the row group's p.lanes / gl_SubgroupSize
// partial sums; subgroups are taken to be runs of consecutive invocations,
// so each lies within one row group when gl_SubgroupSize <= p.lanes (the
// host's lanes are at least the reported subgroup size); otherwise, and
// without EZ_SUBGROUP, a shared-memory tree over the lanes (no assumption
// on the subgroup size).
shared float sums[MV_ROWS * WG];

layout(std430, binding = 3) readonly buffer Step { uint st[]; };

uint y_base() { return p.y_off + (p.step_word != 0xffffffffu ? st[p.step_word] : 0u); }

void store_rows(float acc[MV_ROWS], uint t, uint lane, uint row0) {
#ifdef EZ_SUBGROUP
    if (gl_SubgroupSize <= p.lanes) {
        const uint per = p.lanes / gl_SubgroupSize;
        for (uint r = 0; r < MV_ROWS; r++) {
            const float v = subgroupAdd(acc[r]);
            if (subgroupElect()) sums[r * WG + gl_SubgroupID] = v;
        }
        barrier();
        const uint first = (t / p.lanes) * per;
        if (p.glu != 0) {
            if (lane == 0 && row0 < p.n_rows) {
                float g = 0.0, u = 0.0;
                for (uint i = 0; i < per; i++) {
                    g += sums[first + i];
                    u += sums[WG + first + i];
                }
                y[y_base() + row0 / 2] = glu_act(g, p.glu - 1) * u;
            }
        } else if (lane < MV_ROWS && row0 + lane < p.n_rows) {
            float v = 0.0;
            for (uint i = 0; i < per; i++) v += sums[lane * WG + first + i];
            y[y_base() + row0 + lane] = v;
        }
        return;
    }
#endif
    for (uint r = 0; r < MV_ROWS; r++) sums[r * WG + t] = acc[r];
    barrier();
    for (uint st = p.lanes / 2; st > 0; st >>= 1) {
        if (lane < st)
            for (uint r = 0; r < MV_ROWS; r++) sums[r * WG + t] += sums[r * WG + t + st];
        barrier();
    }
    if (p.glu != 0) {
        if (lane == 0 && row0 < p.n_rows) y[y_base() + row0 / 2] = glu_act(sums[t], p.glu - 1) * sums[WG + t];
    } else if (lane < MV_ROWS && row0 + lane < p.n_rows) {
        y[y_base() + row0 + lane] = sums[lane * WG + t - lane];
    }
}
