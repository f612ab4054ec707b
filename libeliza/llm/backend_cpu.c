/* The CPU backend (backend.h): ops.h's kernel tables, the grouped matrix
 * products of ops_matmul.c and attention.c, on the session's pool. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "backend.h"
#include "core/error.h"
#include "core/platform.h"
#include "core/quant.h"

typedef struct {
    ez_llm_backend base;
    ez_pool *pool;
    const ez_llm_ops *ops;
    ez_llm_acts acts;       /* quantized activations, reused across products */
    ez_attn attn;
    const ez_ssm_ops *ssm;
    float *ssm_work;        /* [threads][ez_ssm_scan_work_floats] for Mamba2 mixers, or NULL */
    int64_t ssm_work_floats; /* of one thread */
} cpu_backend;

static cpu_backend *cpu(ez_llm_backend *be) { return (cpu_backend *)be; }

static void cpu_free(ez_llm_backend *be) {
    cpu_backend *c = cpu(be);
    ez_llm_acts_free(&c->acts);
    ez_aligned_free(c->attn.scratch);
    ez_aligned_free(c->ssm_work);
    free(c);
}

static void cpu_embed(ez_llm_backend *be, const ez_llm_matrix *e, const int32_t *tokens, int32_t n, float scale,
                      float *x) {
    const ez_dequant_fn dequant = ez_kernels(e->type)->dequant;
    (void)be;
    for (int32_t i = 0; i < n; i++) {
        float *row = x + (int64_t)i * e->n_cols;
        dequant(e->data + (size_t)tokens[i] * e->row_bytes, row, e->n_cols);
        if (scale != 1.0f)
            for (int64_t j = 0; j < e->n_cols; j++) row[j] *= scale;
    }
}

static int32_t cpu_matmul(ez_llm_backend *be, const float *x, int64_t M, const ez_llm_mm *mm, int n_mm) {
    return ez_llm_matmul(cpu(be)->pool, &cpu(be)->acts, x, M, mm, n_mm);
}

/* y = x / rms(x), the sum of squares in double (transformers' Gemma 4
 * v_norm, a weightless RMSNorm). */
static void rms_norm_plain(float *y, const float *x, int64_t n, float eps) {
    double ss = 0.0;
    float s;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
    s = 1.0f / sqrtf((float)(ss / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * s;
}

static void cpu_rms_norm(ez_llm_backend *be, float *y, const float *x, const float *w, int64_t n_rows, int64_t n,
                         float eps) {
    const ez_llm_ops *ops = cpu(be)->ops;
    for (int64_t r = 0; r < n_rows; r++) {
        if (w) ops->rms_norm(y + r * n, x + r * n, w, n, eps);
        else rms_norm_plain(y + r * n, x + r * n, n, eps);
    }
}

static void cpu_add_bias(ez_llm_backend *be, float *y, const float *b, int64_t n_rows, int64_t n) {
    (void)be;
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t i = 0; i < n; i++) y[r * n + i] += b[i];
}

static void cpu_add(ez_llm_backend *be, float *y, const float *x, int64_t n) {
    (void)be;
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

static void cpu_rope(ez_llm_backend *be, float *x, int64_t n_rows, int n_heads, int head_dim, int n_rot,
                     const float *cs, int neox) {
    (void)be;
    for (int64_t i = 0; i < n_rows; i++)
        ez_rope(x + i * n_heads * head_dim, n_heads, head_dim, n_rot, cs + i * n_rot, neox);
}

typedef struct {
    const ez_llm_ops *ops;
    float *g;
    const float *u;
    int64_t ld_u, n;
    int gelu;
} glu_job;

static void glu_rows(void *ctx, int64_t r0, int64_t r1, int thread_index) {
    const glu_job *job = (const glu_job *)ctx;
    (void)thread_index;
    for (int64_t r = r0; r < r1; r++) {
        if (job->gelu) job->ops->gelu_tanh_mul(job->g + r * job->n, job->u + r * job->ld_u, job->n);
        else job->ops->silu_mul(job->g + r * job->n, job->u + r * job->ld_u, job->n);
    }
}

static void cpu_glu(ez_llm_backend *be, float *g, const float *u, int64_t ld_u, int64_t n_rows, int64_t n, int gelu) {
    glu_job job = {cpu(be)->ops, g, u, ld_u, n, gelu};
    ez_pool_for(cpu(be)->pool, n_rows, EZ_MAX((int64_t)1, 8192 / n), glu_rows, &job);
}

static void cpu_attention(ez_llm_backend *be, ez_kv_cache *kv, int il, float *q, float *k, float *v, float *out,
                          int32_t n, int32_t pos0) {
    const ez_kv_layer *L = &kv->layers[il];
    ez_attn a = cpu(be)->attn;
    int64_t n_q, n_k, n_v;
    /* The layer's own head sizes (gemma4's sliding and full layers differ). */
    a.head_dim = L->fk.head_dim;
    a.head_dim_v = L->fv.head_dim;
    n_q = (int64_t)a.n_head * a.head_dim;
    n_k = (int64_t)a.n_head_kv * a.head_dim;
    n_v = (int64_t)a.n_head_kv * a.head_dim_v;
    /* The cache's transforms (kv.h): new keys and values are stored
     * smoothed and transformed, queries meet them in that domain, and the
     * output of attention is transformed back. The first batch of keys a
     * layer writes after a clear fixes its smoothing. */
    if (L->smooth) {
        if (L->src == il && k && !L->smooth->ready)
            ez_kv_smooth_fit(L->smooth, k, q, n, a.n_head);
        if (L->smooth->ready) {
            ez_kv_smooth_queries(L->smooth, q, n, a.n_head);
            if (L->src == il && k) ez_kv_smooth_keys(L->smooth, k, n);
        }
    }
    ez_kv_rotate(q, (int64_t)n * n_q, L->fk.rot);
    if (L->src == il && k) {
        ez_kv_rotate(k, (int64_t)n * n_k, L->fk.rot);
        ez_kv_rotate(v, (int64_t)n * n_v, L->fv.rot);
        for (int32_t i = 0; i < n; i++) {
            L->fk.kern->store(k + i * n_k, ez_kv_cache_k(kv, il, pos0 + i), n_k);
            L->fv.kern->store(v + i * n_v, ez_kv_cache_v(kv, il, pos0 + i), n_v);
        }
    }
    ez_attention(&a, L, q, out, n, pos0);
    ez_kv_unrotate(out, (int64_t)n * a.n_head * a.head_dim_v, L->fv.rot);
}

static void cpu_softcap(ez_llm_backend *be, float *x, int64_t n, float cap) {
    (void)be;
    for (int64_t i = 0; i < n; i++) x[i] = cap * tanhf(x[i] / cap);
}

static void cpu_scale(ez_llm_backend *be, float *x, int64_t n, float s) {
    (void)be;
    for (int64_t i = 0; i < n; i++) x[i] *= s;
}

static void cpu_add_scaled(ez_llm_backend *be, float *y, const float *x, int64_t n, float s) {
    (void)be;
    for (int64_t i = 0; i < n; i++) y[i] += x[i] * s;
}

static void cpu_ssm_conv(ez_llm_backend *be, float *state, const float *x, int64_t ld_x, const float *w,
                         const float *b, float *y, int32_t n, int n_ch, int d_conv) {
    ez_ssm_conv(cpu(be)->ssm, state, x, ld_x, w, b, y, n_ch, n, n_ch, d_conv);
}

typedef struct {
    cpu_backend *c;
    const ez_ssm_shape *s;
    float *state;
    const float *xbc, *dt, *dt_bias, *A, *D;
    int64_t ld_dt;
    float *y;
    int32_t n;
} scan_job;

/* Heads [h0, h1): the recurrent step for one token, else the chunked scan. */
static void scan_heads(void *ctx, int64_t h0, int64_t h1, int thread_index) {
    const scan_job *j = (const scan_job *)ctx;
    const int64_t d_in = (int64_t)j->s->n_head * j->s->head_dim, GN = (int64_t)j->s->n_group * j->s->d_state,
                  ld = d_in + 2 * GN;
    const float *x = j->xbc, *B = j->xbc + d_in, *C = j->xbc + d_in + GN;
    if (j->n == 1) {
        j->c->ssm->step(j->s, j->state, x, B, C, j->dt, j->dt_bias, j->A, j->D, j->y, (int)h0, (int)h1);
        return;
    }
    ez_ssm_scan(j->c->pool, j->c->ops, j->s, j->state, x, ld, B, C, ld, j->dt, j->ld_dt, j->dt_bias, j->A, j->D, j->y, d_in,
                j->n, (int)h0, (int)h1, j->c->ssm_work + (size_t)thread_index * (size_t)j->c->ssm_work_floats);
}

static void cpu_ssm_scan(ez_llm_backend *be, const ez_ssm_shape *s, float *state, const float *xbc, const float *dt,
                         int64_t ld_dt, const float *dt_bias, const float *A, const float *D, float *y, int32_t n) {
    scan_job job = {cpu(be), s, state, xbc, dt, dt_bias, A, D, ld_dt, y, n};
    ez_pool_for(cpu(be)->pool, s->n_head, 1, scan_heads, &job);
}

static void cpu_ssm_gate_norm(ez_llm_backend *be, float *y, float *z, int64_t ld_z, const float *w, int64_t n_rows,
                              int64_t n, int n_group, float eps) {
    const ez_llm_ops *ops = cpu(be)->ops;
    const int64_t gs = n / n_group;
    for (int64_t r = 0; r < n_rows; r++) {
        float *zr = z + r * ld_z, *yr = y + r * n;
        /* llama.cpp's swiglu_split(z, y) */
        ops->silu_mul(zr, yr, n);
        if (w)
            for (int64_t g = 0; g < n_group; g++) ops->rms_norm(zr + g * gs, zr + g * gs, w + g * gs, gs, eps);
        memcpy(yr, zr, sizeof(float) * (size_t)n);
    }
}

static const ez_llm_backend_ops CPU_OPS = {
    "cpu",        cpu_free,       cpu_embed,    cpu_matmul,   cpu_rms_norm,     cpu_add_bias,
    cpu_add,      cpu_rope,       cpu_glu,      cpu_attention, cpu_softcap,     cpu_scale,
    cpu_add_scaled, cpu_ssm_conv, cpu_ssm_scan, cpu_ssm_gate_norm,
};

/* The Mamba2 scan's per-thread scratch, for models with mixers. */
static int32_t alloc_ssm_work(cpu_backend *c, const ez_llm_hparams *hp) {
    ez_ssm_shape sh;
    size_t n;
    c->ssm = ez_ssm_ops_active();
    if (hp->ssm_d_inner <= 0) return ELIZA_OK;
    sh.n_head = hp->ssm_n_head;
    sh.head_dim = hp->ssm_d_inner / hp->ssm_n_head;
    sh.n_group = hp->ssm_n_group;
    sh.d_state = hp->ssm_d_state;
    c->ssm_work_floats = ez_ssm_scan_work_floats(&sh);
    n = (size_t)ez_pool_threads(c->pool) * (size_t)c->ssm_work_floats;
    c->ssm_work = (float *)ez_aligned_alloc(n * sizeof(float) + 64);
    if (!c->ssm_work)
        return ez_fail(ELIZA_E_NOMEM, "LLM buffers: cannot allocate %" PRIu64 " bytes of SSM scan workspace",
                       (uint64_t)(n * sizeof(float)));
    memset(c->ssm_work, 0, n * sizeof(float));
    return ELIZA_OK;
}

int32_t ez_llm_backend_cpu_create(ez_pool *pool, const ez_llm_hparams *hp, const ez_kv_cache *kv,
                                  ez_llm_backend **out) {
    cpu_backend *c;
    int32_t max_cap = 0;
    int quantized = 0;
    int32_t rc;
    size_t n;
    *out = NULL;
    c = (cpu_backend *)calloc(1, sizeof *c);
    if (!c) return ez_fail(ELIZA_E_NOMEM, "out of memory for the CPU backend");
    c->base.ops = &CPU_OPS;
    c->pool = pool;
    c->ops = ez_llm_ops_active();
    ez_llm_acts_init(&c->acts);
    for (int il = 0; il < kv->n_layer; il++) {
        const ez_kv_layer *L = &kv->layers[il];
        if (!L->k) continue;
        max_cap = EZ_MAX(max_cap, L->cap);
        quantized |= L->fk.type != EZ_KV_F32 || L->fv.type != EZ_KV_F32;
    }
    c->attn.pool = pool;
    c->attn.ops = c->ops;
    c->attn.n_threads = ez_pool_threads(pool);
    c->attn.n_head = hp->n_head;
    c->attn.n_head_kv = hp->n_head_kv;
    c->attn.head_dim = hp->head_dim;
    c->attn.head_dim_v = hp->head_dim_v;
    c->attn.scale = hp->attn_scale;
    c->attn.softcap = hp->attn_softcap;
    ez_attn_plan(&c->attn, max_cap, quantized);
    n = (size_t)c->attn.n_threads * c->attn.per_thread;
    c->attn.scratch = (float *)ez_aligned_alloc(n * sizeof(float) + 64);
    if (!c->attn.scratch) {
        free(c);
        return ez_fail(ELIZA_E_NOMEM, "LLM buffers: cannot allocate %" PRIu64 " bytes of attention workspace",
                       (uint64_t)(n * sizeof(float)));
    }
    memset(c->attn.scratch, 0, n * sizeof(float));
    if ((rc = alloc_ssm_work(c, hp))) {
        cpu_free(&c->base);
        return rc;
    }
    *out = &c->base;
    return ELIZA_OK;
}
