// The end of every matvec: the sums of a row group's p.lanes invocations
// for its MV_ROWS rows, written to y; with p.glu (1 + common.glsl's act),
// the rows are a gate's and an up's row i (MV_ROWS = 2, row0 = 2 i: a
// matrix from ez_gpu_matrix_upload_pair) and y[y_off + i] = act(gate) * up.
// With p.step_word other than 0xffffffff, y_off grows by that word of the
// step buffer at binding 3 (the value's matvec writes its cache row, which
// moves with the position). With p.rope_hd other than 0 (glu 0), each row
// pair is a GPT-J rope pair of a head of rope_hd rows: the pair's row
// p.rope_row0 + row0 of the whole matrix is dim d of its head, and where d <
// p.n_rot the pair is rotated by cosine and sine cs[p.cs_off + d], cs[p.cs_off
// + d + 1] of binding 4 (as qk_rope.comp): a query or key matvec with its
// rope. The including shader declares p (with lanes, n_rows, y_off, glu,
// step_word, rope_hd, n_rot, cs_off, rope_row0), y and MV_ROWS. Built as `NAME_sg` with
// EZ_SUBGROUP (where the device has subgroup arithmetic in compute): one
// subgroupAdd per row, then the row group's p.lanes / gl_SubgroupSize
// partial sums; subgroups are taken to be runs of consecutive invocations,
// so each lies within one row group when gl_SubgroupSize <= p.lanes (the
// host's lanes are at least the reported subgroup size); otherwise, and
// without EZ_SUBGROUP, a shared-memory tree over the lanes (no assumption
// on the subgroup size).
shared float sums[MV_ROWS * WG];

layout(std430, binding = 3) readonly buffer Step { uint st[]; };

layout(std430, binding = 4) readonly buffer Angles { float cs[]; };

uint y_base() { return p.y_off + (p.step_word != 0xffffffffu ? st[p.step_word] : 0u); }

// Row row0 + lane of the pair's sums v, rotated where p.rope_hd says.
float out_row(float v[MV_ROWS], uint lane, uint row0) {
    if (p.rope_hd == 0u) return v[lane];
    const uint d = (p.rope_row0 + row0) % p.rope_hd;
    if (d >= p.n_rot) return v[lane];
    const float c = cs[p.cs_off + d], s = cs[p.cs_off + d + 1];
    return lane == 0u ? v[0] * c - v[1] * s : v[0] * s + v[1] * c;
}

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
            float v[MV_ROWS];
            for (uint r = 0; r < MV_ROWS; r++) {
                v[r] = 0.0;
                for (uint i = 0; i < per; i++) v[r] += sums[r * WG + first + i];
            }
            y[y_base() + row0 + lane] = out_row(v, lane, row0);
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
        float v[MV_ROWS];
        for (uint r = 0; r < MV_ROWS; r++) v[r] = sums[r * WG + t - lane];
        y[y_base() + row0 + lane] = out_row(v, lane, row0);
    }
}
