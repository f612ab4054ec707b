/* A backend (llm/backend.h) that counts each step and hands it to the CPU
 * backend: what test_llm_model.c and test_llm_seam.c run a forward pass
 * through, to see that the pass goes through the seam step by step and
 * gives the session's logits bit for bit. */
#ifndef EZ_TEST_REC_BACKEND_H
#define EZ_TEST_REC_BACKEND_H

#include "core/error.h"
#include "llm/backend.h"

enum {
    REC_EMBED, REC_MATMUL, REC_NORM, REC_BIAS, REC_ADD, REC_ROPE, REC_GLU, REC_ATTN, REC_SOFTCAP,
    REC_SCALE, REC_ADD_SCALED, REC_SSM_CONV, REC_SSM_SCAN, REC_SSM_GATE_NORM, REC_COUNT
};

static const char *const REC_NAMES[REC_COUNT] = {
    "embed", "matmul", "rms_norm", "add_bias", "add", "rope", "glu", "attention", "softcap",
    "scale", "add_scaled", "ssm_conv", "ssm_scan", "ssm_gate_norm",
};

typedef struct {
    ez_llm_backend base;
    ez_llm_backend *cpu;
    int calls[REC_COUNT];
    int32_t fail_matmul;    /* returned by every product when nonzero */
} rec_backend;

static rec_backend *rec(ez_llm_backend *be) { return (rec_backend *)be; }
static ez_llm_backend *rec_cpu(ez_llm_backend *be, int op) {
    rec(be)->calls[op]++;
    return rec(be)->cpu;
}
static void rec_free(ez_llm_backend *be) { (void)be; }
static void rec_embed(ez_llm_backend *be, const ez_llm_matrix *e, const int32_t *t, int32_t n, float sc, float *x) {
    ez_llm_backend *c = rec_cpu(be, REC_EMBED);
    c->ops->embed(c, e, t, n, sc, x);
}
static int32_t rec_matmul(ez_llm_backend *be, const float *x, int64_t M, const ez_llm_mm *mm, int n_mm) {
    ez_llm_backend *c = rec_cpu(be, REC_MATMUL);
    if (rec(be)->fail_matmul) return ez_fail(rec(be)->fail_matmul, "recording backend: product refused");
    return c->ops->matmul(c, x, M, mm, n_mm);
}
static void rec_norm(ez_llm_backend *be, float *y, const float *x, const float *w, int64_t r, int64_t n, float eps) {
    ez_llm_backend *c = rec_cpu(be, REC_NORM);
    c->ops->rms_norm(c, y, x, w, r, n, eps);
}
static void rec_bias(ez_llm_backend *be, float *y, const float *b, int64_t r, int64_t n) {
    ez_llm_backend *c = rec_cpu(be, REC_BIAS);
    c->ops->add_bias(c, y, b, r, n);
}
static void rec_add(ez_llm_backend *be, float *y, const float *x, int64_t n) {
    ez_llm_backend *c = rec_cpu(be, REC_ADD);
    c->ops->add(c, y, x, n);
}
static void rec_rope(ez_llm_backend *be, float *x, int64_t r, int nh, int hd, int nr, const float *cs, int neox) {
    ez_llm_backend *c = rec_cpu(be, REC_ROPE);
    c->ops->rope(c, x, r, nh, hd, nr, cs, neox);
}
static void rec_glu(ez_llm_backend *be, float *g, const float *u, int64_t ld_u, int64_t r, int64_t n, int gelu) {
    ez_llm_backend *c = rec_cpu(be, REC_GLU);
    c->ops->glu(c, g, u, ld_u, r, n, gelu);
}
static void rec_attn(ez_llm_backend *be, ez_kv_cache *kv, int il, float *q, float *k, float *v, float *out, int32_t n,
                     int32_t pos0) {
    ez_llm_backend *c = rec_cpu(be, REC_ATTN);
    c->ops->attention(c, kv, il, q, k, v, out, n, pos0);
}
static void rec_softcap(ez_llm_backend *be, float *x, int64_t n, float cap) {
    ez_llm_backend *c = rec_cpu(be, REC_SOFTCAP);
    c->ops->softcap(c, x, n, cap);
}
static void rec_scale(ez_llm_backend *be, float *x, int64_t n, float s) {
    ez_llm_backend *c = rec_cpu(be, REC_SCALE);
    c->ops->scale(c, x, n, s);
}
static void rec_add_scaled(ez_llm_backend *be, float *y, const float *x, int64_t n, float s) {
    ez_llm_backend *c = rec_cpu(be, REC_ADD_SCALED);
    c->ops->add_scaled(c, y, x, n, s);
}
static void rec_ssm_conv(ez_llm_backend *be, float *state, const float *x, int64_t ld_x, const float *w,
                         const float *b, float *y, int32_t n, int n_ch, int d_conv) {
    ez_llm_backend *c = rec_cpu(be, REC_SSM_CONV);
    c->ops->ssm_conv(c, state, x, ld_x, w, b, y, n, n_ch, d_conv);
}
static void rec_ssm_scan(ez_llm_backend *be, const ez_ssm_shape *s, float *state, const float *xbc, const float *dt,
                         int64_t ld_dt, const float *dt_bias, const float *A, const float *D, float *y, int32_t n) {
    ez_llm_backend *c = rec_cpu(be, REC_SSM_SCAN);
    c->ops->ssm_scan(c, s, state, xbc, dt, ld_dt, dt_bias, A, D, y, n);
}
static void rec_ssm_gate_norm(ez_llm_backend *be, float *y, float *z, int64_t ld_z, const float *w, int64_t n_rows,
                              int64_t n, int n_group, float eps) {
    ez_llm_backend *c = rec_cpu(be, REC_SSM_GATE_NORM);
    c->ops->ssm_gate_norm(c, y, z, ld_z, w, n_rows, n, n_group, eps);
}

static const ez_llm_backend_ops REC_OPS = {
    "recording", rec_free,    rec_embed,      rec_matmul,   rec_norm,     rec_bias,         rec_add,
    rec_rope,    rec_glu,     rec_attn,       rec_softcap,  rec_scale,    rec_add_scaled,   rec_ssm_conv,
    rec_ssm_scan, rec_ssm_gate_norm,
};

#endif /* EZ_TEST_REC_BACKEND_H */
