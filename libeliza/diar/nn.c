/* GGUF reading helpers and the LSTM layers of the diarization models. */
#include "diar/nn.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/gemm.h"
#include "core/kernels/lstm.h"
#include "core/platform.h"
#include "core/quant.h"

/* ---- GGUF reading ------------------------------------------------------------ */

int32_t ez_nn_key_str(const ez_gguf *g, const char *key, char *out, size_t cap) {
    ez_str s;
    int32_t rc;
    if ((rc = ez_gguf_need_str(g, key, &s))) return rc;
    if (s.len >= cap || memchr(s.ptr, 0, (size_t)s.len))
        return ez_fail(ELIZA_E_FORMAT, "metadata '%s' is not a short string (%" PRIu64 " bytes)", key, s.len);
    memcpy(out, s.ptr, (size_t)s.len);
    out[s.len] = 0;
    return ELIZA_OK;
}

int32_t ez_nn_check_arch(const ez_gguf *g, const char *arch, const char *what) {
    ez_str s;
    int32_t rc;
    if ((rc = ez_gguf_need_str(g, "general.architecture", &s))) return rc;
    if (s.len != strlen(arch) || memcmp(s.ptr, arch, (size_t)s.len) != 0)
        return ez_fail(ELIZA_E_UNSUPPORTED, "general.architecture is '%.*s', not '%s' (%s)", (int)EZ_MIN(s.len, 64u),
                       s.ptr, arch, what);
    return ELIZA_OK;
}

int32_t ez_nn_tensor_view(const ez_gguf *g, const char *name, int n_dims, const int64_t *dims, const float **out,
                          float **own) {
    const ez_gguf_tensor *t = ez_gguf_find_tensor(g, name);
    char want[96] = "", have[96] = "";
    size_t wl = 0, hl = 0;
    const float *v;
    int ok;
    *out = NULL;
    *own = NULL;
    if (!t) return ez_fail(ELIZA_E_FORMAT, "tensor '%s' is missing", name);
    ok = (int)t->n_dims == n_dims && t->type == EZ_TYPE_F32;
    for (int i = 0; i < n_dims; i++) {
        /* GGUF lists dimensions innermost first. */
        if (i < (int)t->n_dims && t->ne[t->n_dims - 1 - (uint32_t)i] != (uint64_t)dims[i]) ok = 0;
        wl += (size_t)snprintf(want + wl, sizeof want - EZ_MIN(wl, sizeof want), "%s%" PRId64, i ? ", " : "",
                               dims[i]);
        wl = EZ_MIN(wl, sizeof want - 1);
    }
    for (uint32_t i = 0; i < t->n_dims; i++) {
        hl += (size_t)snprintf(have + hl, sizeof have - EZ_MIN(hl, sizeof have), "%s%" PRIu64, i ? ", " : "",
                               t->ne[t->n_dims - 1 - i]);
        hl = EZ_MIN(hl, sizeof have - 1);
    }
    if (!ok)
        return ez_fail(ELIZA_E_FORMAT, "tensor '%s': %s [%s], expected F32 [%s]", name,
                       t->type == EZ_TYPE_F32 ? "F32" : "type other than F32", have, want);
    v = (const float *)(const void *)t->data;
    if ((uintptr_t)t->data % sizeof(float)) { /* a file aligned to less than a float */
        *own = (float *)malloc((size_t)t->n_elements * sizeof(float) + 1);
        if (!*own)
            return ez_fail(ELIZA_E_NOMEM, "tensor '%s': no memory for %" PRIu64 " floats", name, t->n_elements);
        memcpy(*own, t->data, (size_t)t->nbytes);
        v = *own;
    }
    for (uint64_t i = 0; i < t->n_elements; i++)
        if (!isfinite(v[i])) {
            free(*own);
            *own = NULL;
            return ez_fail(ELIZA_E_FORMAT, "tensor '%s': element %" PRIu64 " is not finite", name, i);
        }
    *out = v;
    return ELIZA_OK;
}

int32_t ez_nn_tensor(const ez_gguf *g, const char *name, int n_dims, const int64_t *dims, float **out) {
    const float *v;
    float *own;
    size_t n = 1;
    int32_t rc = ez_nn_tensor_view(g, name, n_dims, dims, &v, &own);
    *out = NULL;
    if (rc) return rc;
    if (own) {
        *out = own;
        return ELIZA_OK;
    }
    for (int i = 0; i < n_dims; i++) n *= (size_t)dims[i];
    *out = (float *)malloc(n * sizeof(float) + 1);
    if (!*out) return ez_fail(ELIZA_E_NOMEM, "tensor '%s': no memory for %zu floats", name, n);
    memcpy(*out, v, n * sizeof(float));
    return ELIZA_OK;
}

int32_t ez_nn_weight(const ez_gguf *g, const char *name, int n_dims, const int64_t *dims, const float **out,
                     ez_nn_owned *owned) {
    float *own;
    int32_t rc;
    if (owned->n == EZ_NN_MAX_OWNED) return ez_fail(ELIZA_E_INTERNAL, "tensor '%s': too many copies kept", name);
    if ((rc = ez_nn_tensor_view(g, name, n_dims, dims, out, &own))) return rc;
    if (own) owned->p[owned->n++] = own;
    return ELIZA_OK;
}

void ez_nn_owned_free(ez_nn_owned *owned) {
    for (int i = 0; i < owned->n; i++) free(owned->p[i]);
    owned->n = 0;
}

float *ez_nn_arena_get(ez_nn_arena *a, size_t floats, const char *what) {
    if (floats <= a->floats) return a->data;
    ez_aligned_free(a->data);
    a->floats = 0;
    a->data = floats <= SIZE_MAX / sizeof(float) ? (float *)ez_aligned_alloc(floats * sizeof(float)) : NULL;
    if (!a->data) {
        ez_fail(ELIZA_E_NOMEM, "%s: no memory for %zu MB of activations", what, floats * sizeof(float) >> 20);
        return NULL;
    }
    a->floats = floats;
    return a->data;
}

void ez_nn_arena_free(ez_nn_arena *a) {
    ez_aligned_free(a->data);
    a->data = NULL;
    a->floats = 0;
}

/* ---- LSTM: loading ------------------------------------------------------------- */

int32_t ez_nn_gate_order(const char *order, int perm[4]) {
    static const char internal[4] = {'i', 'f', 'g', 'o'};
    int seen = 0;
    if (strlen(order) != 4) goto bad;
    for (int pos = 0; pos < 4; pos++) {
        char c = order[pos] == 'c' ? 'g' : order[pos];
        int k = -1;
        for (int j = 0; j < 4; j++)
            if (internal[j] == c) k = j;
        if (k < 0 || (seen & (1 << k))) goto bad;
        seen |= 1 << k;
        perm[k] = pos;
    }
    return ELIZA_OK;
bad:
    return ez_fail(ELIZA_E_FORMAT,
                   "LSTM gate order '%.8s' is not four distinct gates of i, f, o, c (or g), e.g. \"iofc\"", order);
}

static int identity_order(const int perm[4]) { return perm[0] == 0 && perm[1] == 1 && perm[2] == 2 && perm[3] == 3; }

void ez_nn_lstm_free(ez_nn_lstm *l) {
    if (!l) return;
    free(l->own_ih);
    free(l->bias);
    ez_aligned_free(l->w_hh);
    memset(l, 0, sizeof *l);
}

int32_t ez_nn_lstm_load(const ez_gguf *g, const char *prefix, const char *gate_order, int n_dirs, int n_in,
                        int H, ez_nn_lstm *out) {
    char name[96];
    const float *w_ih, *w_hh, *b_ih, *b_hh;
    float *own[4] = {NULL, NULL, NULL, NULL}; /* copies of tensors the file does not align for floats */
    int perm[4];
    int64_t G = 4 * (int64_t)H;
    int32_t rc;
    memset(out, 0, sizeof *out);
    if ((rc = ez_nn_gate_order(gate_order, perm))) return rc;
    {
        int64_t d_ih[3] = {n_dirs, G, n_in}, d_hh[3] = {n_dirs, G, H}, d_b[2] = {n_dirs, G};
        snprintf(name, sizeof name, "%s.weight_ih", prefix);
        if ((rc = ez_nn_tensor_view(g, name, 3, d_ih, &w_ih, &own[0]))) goto done;
        snprintf(name, sizeof name, "%s.weight_hh", prefix);
        if ((rc = ez_nn_tensor_view(g, name, 3, d_hh, &w_hh, &own[1]))) goto done;
        snprintf(name, sizeof name, "%s.bias_ih", prefix);
        if ((rc = ez_nn_tensor_view(g, name, 2, d_b, &b_ih, &own[2]))) goto done;
        snprintf(name, sizeof name, "%s.bias_hh", prefix);
        if ((rc = ez_nn_tensor_view(g, name, 2, d_b, &b_hh, &own[3]))) goto done;
    }
    out->n_in = n_in;
    out->H = H;
    out->n_dirs = n_dirs;
    memcpy(out->perm, perm, sizeof perm);
    /* The input projection reads w_ih as stored; the recurrence reads w_hh in panels. */
    out->w_ih = w_ih;
    out->own_ih = own[0];
    own[0] = NULL;
    out->bias = (float *)malloc((size_t)(n_dirs * G) * sizeof(float));
    if (!out->bias) {
        rc = ez_fail(ELIZA_E_NOMEM, "LSTM '%s': no memory for its biases", prefix);
        goto done;
    }
    for (int d = 0; d < n_dirs; d++)
        for (int k = 0; k < 4; k++)
            for (int64_t j = 0; j < H; j++) {
                const int64_t src = d * G + perm[k] * (int64_t)H + j;
                out->bias[d * G + k * (int64_t)H + j] = b_ih[src] + b_hh[src];
            }
    out->w_hh = (float *)ez_aligned_alloc((size_t)n_dirs * ez_lstm_panels_floats(H) * sizeof(float));
    if (!out->w_hh) {
        rc = ez_fail(ELIZA_E_NOMEM, "LSTM '%s': no memory for its weights", prefix);
        goto done;
    }
    for (int d = 0; d < n_dirs; d++)
        ez_lstm_pack(H, w_hh + d * G * H, perm, out->w_hh + (size_t)d * ez_lstm_panels_floats(H));
    rc = ELIZA_OK;
done:
    for (int i = 0; i < 4; i++) free(own[i]);
    if (rc) ez_nn_lstm_free(out);
    return rc;
}

/* ---- LSTM: forward ----------------------------------------------------------------- */

/* Each output element is the same dot product whichever columns its GEMM
 * call covers (core/gemm.h), so projecting a run of gate blocks at a time
 * gives the bits one GEMM over reordered rows gave. */
void ez_nn_lstm_project(const ez_nn_lstm *l, ez_pool *pool, const float *x, int64_t rows, float *xp) {
    const int64_t H = l->H, G = 4 * H, N = (int64_t)l->n_dirs * G;
    if (identity_order(l->perm)) {
        ez_gemm_f32(pool, rows, N, l->n_in, x, l->n_in, l->w_ih, l->n_in, 1, xp, N, 0);
        return;
    }
    for (int d = 0; d < l->n_dirs; d++)
        for (int k = 0; k < 4;) {
            const float *w = l->w_ih + (d * G + l->perm[k] * H) * l->n_in;
            int run = 1;
            while (k + run < 4 && l->perm[k + run] == l->perm[k] + run) run++;
            ez_gemm_f32(pool, rows, run * H, l->n_in, x, l->n_in, w, l->n_in, 1, xp + d * G + k * H, N, 0);
            k += run;
        }
}

/* One work item: the whole recurrence of one direction for sequences
 * [b0, b1). */
typedef struct {
    const ez_nn_lstm *l;
    const float *xp;
    int B, T, n_groups, group;
    int64_t xp_bstride, xp_tstride, y_bstride, y_tstride;
    float *y;
    float *scratch;      /* per item: h, c [group, H], gates [group, 4H] */
    int64_t scratch_per_item;
    const float **rows;  /* per item: [group] projected-input rows of this step */
    ez_lstm_step_fn step;
} recur_job;

static void recur_items(void *ctx, int64_t i0, int64_t i1, int thread_index) {
    const recur_job *job = (const recur_job *)ctx;
    const ez_nn_lstm *l = job->l;
    int H = l->H, G = 4 * H;
    (void)thread_index;
    for (int64_t item = i0; item < i1; item++) {
        int d = (int)(item / job->n_groups), grp = (int)(item % job->n_groups);
        int b0 = grp * job->group, nb = EZ_MIN(job->group, job->B - b0);
        float *h = job->scratch + item * job->scratch_per_item;
        float *c = h + (int64_t)job->group * H;
        float *gates = c + (int64_t)job->group * H;
        const float **rows = job->rows + item * job->group;
        const float *w = l->w_hh + (size_t)d * ez_lstm_panels_floats(H);
        if (nb <= 0) continue;
        memset(h, 0, (size_t)(2 * job->group * H) * sizeof(float));
        for (int s = 0; s < job->T; s++) {
            int t = d == 1 ? job->T - 1 - s : s;
            for (int b = 0; b < nb; b++)
                rows[b] = job->xp + (int64_t)(b0 + b) * job->xp_bstride + (int64_t)t * job->xp_tstride +
                          (int64_t)d * G;
            job->step(nb, H, 0, H, rows, l->bias + (int64_t)d * G, w, h, h, c, gates);
            for (int b = 0; b < nb; b++)
                memcpy(job->y + (int64_t)(b0 + b) * job->y_bstride + (int64_t)t * job->y_tstride +
                           (int64_t)d * H,
                       h + (int64_t)b * H, (size_t)H * sizeof(float));
        }
    }
}

int32_t ez_nn_lstm_recur(const ez_nn_lstm *l, ez_pool *pool, const float *xp, int B, int T,
                         int64_t xp_bstride, int64_t xp_tstride, float *y, int64_t y_bstride,
                         int64_t y_tstride) {
    recur_job job;
    int threads = pool ? ez_pool_threads(pool) : 1;
    int64_t n_items;
    memset(&job, 0, sizeof job);
    if (B <= 0 || T <= 0) return ELIZA_OK;
    job.l = l;
    job.xp = xp;
    job.B = B;
    job.T = T;
    job.xp_bstride = xp_bstride;
    job.xp_tstride = xp_tstride;
    job.y = y;
    job.y_bstride = y_bstride;
    job.y_tstride = y_tstride;
    /* Enough groups of sequences that every thread has a direction-group to
     * run; larger groups amortise each weight load over more sequences. */
    job.n_groups = EZ_MAX(1, EZ_MIN(B, (threads + l->n_dirs - 1) / l->n_dirs));
    job.group = (B + job.n_groups - 1) / job.n_groups;
    job.n_groups = (B + job.group - 1) / job.group;
    job.step = ez_lstm_step_for(l->H);
    n_items = (int64_t)l->n_dirs * job.n_groups;
    /* h, c and gates of one item, rounded to 64 bytes. */
    job.scratch_per_item = ((int64_t)job.group * 6 * l->H + 15) / 16 * 16;
    job.scratch = (float *)malloc((size_t)(n_items * job.scratch_per_item) * sizeof(float));
    job.rows = (const float **)malloc((size_t)(n_items * job.group) * sizeof(float *));
    if (!job.scratch || !job.rows) {
        free(job.scratch);
        free((void *)job.rows);
        return ez_fail(ELIZA_E_NOMEM, "LSTM: no memory for the state of %d sequences", B);
    }
    ez_pool_for(pool, n_items, 1, recur_items, &job);
    free(job.scratch);
    free((void *)job.rows);
    return ELIZA_OK;
}
