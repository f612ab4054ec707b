/* Agglomerative speaker clustering with cannot-link groups (see cluster.h). */
#include "diar/cluster.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* The distance of a pair that may never merge. */
#define CANNOT_LINK INFINITY
/* Largest number of candidate assignments searched exhaustively for one
 * group; beyond it distinct centroids are taken greedily. */
#define MAX_SEARCH 100000.0

typedef struct {
    int a, b;      /* b merges into a (a < b) */
    float dist;
} merge_step;

static double dot_f(const float *a, const float *b, int dim) {
    double s = 0.0;
    for (int i = 0; i < dim; i++) s += (double)a[i] * b[i];
    return s;
}

static double dot_d(const double *a, const double *b, int dim) {
    double s = 0.0;
    for (int i = 0; i < dim; i++) s += a[i] * b[i];
    return s;
}

/* Nearest active neighbour of row i of the n x n matrix d. */
static void rescan_row(const float *d, int n, const uint8_t *active, int i, int *nn, float *nnd) {
    const float *row = d + (size_t)i * (size_t)n;
    int best = -1;
    float best_d = CANNOT_LINK;
    for (int j = 0; j < n; j++)
        if (active[j] && j != i && row[j] < best_d) {
            best_d = row[j];
            best = j;
        }
    nn[i] = best;
    nnd[i] = best_d;
}

/* The full merge sequence, closest pair first, until only cannot-link pairs
 * remain. Returns the number of merges written to steps (< n). */
static int agglomerate(const float *x, int n, int dim, const int32_t *group, float *d, double *sums,
                       double *norms, uint8_t *active, int *nn, float *nnd, merge_step *steps) {
    int n_steps = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < dim; j++) sums[(size_t)i * dim + j] = x[(size_t)i * dim + j];
        norms[i] = sqrt(dot_d(sums + (size_t)i * dim, sums + (size_t)i * dim, dim));
        active[i] = 1;
    }
    for (int i = 0; i < n; i++) {
        d[(size_t)i * n + i] = CANNOT_LINK;
        for (int j = i + 1; j < n; j++) {
            float v = CANNOT_LINK;
            if (group[i] != group[j])
                v = (float)(1.0 - dot_f(x + (size_t)i * dim, x + (size_t)j * dim, dim) / (norms[i] * norms[j]));
            d[(size_t)i * n + j] = d[(size_t)j * n + i] = v;
        }
    }
    for (int i = 0; i < n; i++) rescan_row(d, n, active, i, nn, nnd);

    for (;;) {
        int a = -1, b;
        float best = CANNOT_LINK;
        for (int i = 0; i < n; i++)
            if (active[i] && nnd[i] < best) {
                best = nnd[i];
                a = i;
            }
        if (a < 0) break;
        b = nn[a];
        if (b < a) {
            int t = a;
            a = b;
            b = t;
        }
        steps[n_steps].a = a;
        steps[n_steps].b = b;
        steps[n_steps].dist = best;
        n_steps++;

        active[b] = 0;
        for (int j = 0; j < dim; j++) sums[(size_t)a * dim + j] += sums[(size_t)b * dim + j];
        norms[a] = sqrt(dot_d(sums + (size_t)a * dim, sums + (size_t)a * dim, dim));
        for (int k = 0; k < n; k++) {
            float v;
            if (!active[k] || k == a) continue;
            v = CANNOT_LINK;
            if (d[(size_t)a * n + k] != CANNOT_LINK && d[(size_t)b * n + k] != CANNOT_LINK)
                v = (float)(1.0 - dot_d(sums + (size_t)a * dim, sums + (size_t)k * dim, dim) /
                                      (norms[a] * norms[k]));
            d[(size_t)a * n + k] = d[(size_t)k * n + a] = v;
            d[(size_t)b * n + k] = d[(size_t)k * n + b] = CANNOT_LINK;
        }
        rescan_row(d, n, active, a, nn, nnd);
        for (int k = 0; k < n; k++) {
            if (!active[k] || k == a) continue;
            if (nn[k] == a || nn[k] == b) {
                rescan_row(d, n, active, k, nn, nnd);
            } else if (d[(size_t)k * n + a] < nnd[k]) {
                nn[k] = a;
                nnd[k] = d[(size_t)k * n + a];
            }
        }
    }
    return n_steps;
}

/* Number of clusters of at least min_size items after each prefix of the
 * merges: large[m] for m = 0..n_steps. */
static void count_large(const merge_step *steps, int n_steps, int n, int min_size, int *size, int *large) {
    int count = 0;
    for (int i = 0; i < n; i++) {
        size[i] = 1;
        count += min_size <= 1;
    }
    large[0] = count;
    for (int m = 0; m < n_steps; m++) {
        int sa = size[steps[m].a], sb = size[steps[m].b];
        count -= (sa >= min_size) + (sb >= min_size);
        size[steps[m].a] = sa + sb;
        count += sa + sb >= min_size;
        large[m + 1] = count;
    }
}

/* Which prefix of the merges to keep. */
static int choose_cut(const merge_step *steps, int n_steps, const int *large, const ez_cluster_config *cfg) {
    int m_thr = 0, target = 0, best = 0;
    while (m_thr < n_steps && steps[m_thr].dist <= cfg->threshold) m_thr++;
    if (cfg->num_clusters > 0)
        target = cfg->num_clusters;
    else if (cfg->min_clusters > 0 && large[m_thr] < cfg->min_clusters)
        target = cfg->min_clusters;
    else if (cfg->max_clusters > 0 && large[m_thr] > cfg->max_clusters)
        target = cfg->max_clusters;
    if (!target) return m_thr;
    best = m_thr;
    for (int m = 0; m <= n_steps; m++) {
        int e = abs(large[m] - target), eb = abs(large[best] - target);
        if (e < eb || (e == eb && abs(m - m_thr) < abs(best - m_thr))) best = m;
    }
    return best;
}

/* The merges the config keeps, as a forest: root[i] is the lowest item of
 * i's cluster (merges keep the lower index) and size[root] its item count.
 * Owns the distance matrix and the merge sequence. */
static int32_t cut_merges(const float *x, int n, int dim, const int32_t *group, int min_size,
                          const ez_cluster_config *cfg, int *root, int *size) {
    float *d = (float *)malloc(sizeof(float) * (size_t)n * (size_t)n);
    float *nnd = (float *)malloc(sizeof(float) * (size_t)n);
    double *sums = (double *)malloc(sizeof(double) * (size_t)n * (size_t)dim);
    double *norms = (double *)malloc(sizeof(double) * (size_t)n);
    uint8_t *active = (uint8_t *)malloc((size_t)n);
    int *nn = (int *)malloc(sizeof(int) * (size_t)n);
    int *large = (int *)malloc(sizeof(int) * (size_t)(n + 1));
    merge_step *steps = (merge_step *)malloc(sizeof(merge_step) * (size_t)n);
    int32_t rc = ELIZA_OK;
    if (!d || !nnd || !sums || !norms || !active || !nn || !large || !steps) {
        rc = ez_fail(ELIZA_E_NOMEM, "out of memory clustering %d embeddings", n);
    } else {
        int n_steps = agglomerate(x, n, dim, group, d, sums, norms, active, nn, nnd, steps), cut;
        count_large(steps, n_steps, n, min_size, size, large);
        cut = choose_cut(steps, n_steps, large, cfg);
        for (int i = 0; i < n; i++) {
            root[i] = i;
            size[i] = 1;
        }
        for (int m = 0; m < cut; m++) {
            root[steps[m].b] = steps[m].a;
            size[steps[m].a] += size[steps[m].b];
        }
        /* A root precedes its members. */
        for (int i = 0; i < n; i++) root[i] = root[root[i]];
    }
    free(d);
    free(nnd);
    free(sums);
    free(norms);
    free(active);
    free(nn);
    free(large);
    free(steps);
    return rc;
}

/* cluster_of[r] for each root r: its index among the clusters kept (the
 * large ones, largest first; with a target number, at most that many), or
 * -1. When no cluster is large the largest stands for all. Returns how
 * many were kept. */
static int keep_large(const int *root, const int *size, int n, int min_size, const ez_cluster_config *cfg,
                      int *cluster_of) {
    int keep = cfg->num_clusters > 0 ? cfg->num_clusters : cfg->max_clusters > 0 ? cfg->max_clusters : n, k = 0;
    for (int i = 0; i < n; i++) cluster_of[i] = -1;
    for (;;) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (root[i] == i && cluster_of[i] < 0 && size[i] >= min_size && (best < 0 || size[i] > size[best]))
                best = i;
        if (best < 0 || k == keep) break;
        cluster_of[best] = k++;
    }
    if (k == 0) {
        int best = 0;
        for (int i = 0; i < n; i++)
            if (root[i] == i && size[i] > size[best]) best = i;
        cluster_of[best] = k++;
    }
    return k;
}

/* labels[i]: the kept cluster of item i renumbered by first member, or -1. */
static int32_t label_by_first_member(const int *root, const int *cluster_of, int n, int k, int32_t *labels) {
    int *renumber = (int *)malloc(sizeof(int) * (size_t)k), next = 0;
    if (!renumber) return ez_fail(ELIZA_E_NOMEM, "out of memory labelling %d clusters", k);
    for (int c = 0; c < k; c++) renumber[c] = -1;
    for (int i = 0; i < n; i++) {
        int c = cluster_of[root[i]];
        if (c >= 0 && renumber[c] < 0) renumber[c] = next++;
    }
    for (int i = 0; i < n; i++) {
        int c = cluster_of[root[i]];
        labels[i] = c >= 0 ? renumber[c] : -1;
    }
    free(renumber);
    return ELIZA_OK;
}

int32_t ez_cluster_centroids(const float *x, int n, int dim, const int32_t *labels, int k, float **out) {
    double *sums = (double *)malloc(sizeof(double) * (size_t)dim);
    float *centroids = (float *)calloc((size_t)EZ_MAX(k, 1) * (size_t)dim, sizeof(float));
    *out = NULL;
    if (!sums || !centroids) {
        free(sums);
        free(centroids);
        return ez_fail(ELIZA_E_NOMEM, "out of memory for %d centroids", k);
    }
    for (int c = 0; c < k; c++) {
        double norm;
        for (int j = 0; j < dim; j++) sums[j] = 0.0;
        for (int i = 0; i < n; i++) {
            double inv;
            if (labels[i] != c) continue;
            inv = 1.0 / sqrt(dot_f(x + (size_t)i * dim, x + (size_t)i * dim, dim));
            for (int j = 0; j < dim; j++) sums[j] += x[(size_t)i * dim + j] * inv;
        }
        norm = sqrt(dot_d(sums, sums, dim));
        for (int j = 0; j < dim; j++) centroids[(size_t)c * dim + j] = (float)(norm > 0 ? sums[j] / norm : 0.0);
    }
    free(sums);
    *out = centroids;
    return ELIZA_OK;
}

int32_t ez_cluster_ahc(const float *x, int n, int dim, const int32_t *group, const ez_cluster_config *cfg,
                       int32_t *labels, float **out_centroids, int *out_k) {
    int *root = NULL, *size = NULL, *cluster_of = NULL;
    int min_size, k = 0;
    int32_t rc;

    *out_centroids = NULL;
    *out_k = 0;
    if (n < 0 || n > EZ_CLUSTER_MAX_ITEMS || dim < 1)
        return ez_fail(ELIZA_E_INVALID_ARG, "clustering %d embeddings of %d values: at most %d embeddings", n, dim,
                       EZ_CLUSTER_MAX_ITEMS);
    if (n == 0) return ELIZA_OK;
    min_size = (int)lround(0.1 * n);
    min_size = EZ_MIN(cfg->min_cluster_size, EZ_MAX(1, min_size));
    min_size = EZ_MAX(1, min_size);

    root = (int *)malloc(sizeof(int) * (size_t)n);
    size = (int *)malloc(sizeof(int) * (size_t)n);
    cluster_of = (int *)malloc(sizeof(int) * (size_t)n);
    if (!root || !size || !cluster_of) {
        rc = ez_fail(ELIZA_E_NOMEM, "out of memory clustering %d embeddings", n);
        goto done;
    }
    if (cfg->num_clusters == 1 || cfg->max_clusters == 1) {
        for (int i = 0; i < n; i++) root[i] = 0;
        cluster_of[0] = 0;
        k = 1;
    } else {
        if ((rc = cut_merges(x, n, dim, group, min_size, cfg, root, size))) goto done;
        k = keep_large(root, size, n, min_size, cfg, cluster_of);
    }
    if ((rc = label_by_first_member(root, cluster_of, n, k, labels)) ||
        (rc = ez_cluster_centroids(x, n, dim, labels, k, out_centroids)))
        goto done;
    *out_k = k;
done:
    free(root);
    free(size);
    free(cluster_of);
    return rc;
}

/* Best injective map of g items to k centroids (g <= k), by depth-first
 * search over sim: [g, k]. */
static void best_injective(const double *sim, int g, int k, int item, double score, int *cur, uint8_t *used,
                           double *best_score, int *best) {
    if (item == g) {
        if (score > *best_score) {
            *best_score = score;
            memcpy(best, cur, sizeof(int) * (size_t)g);
        }
        return;
    }
    for (int c = 0; c < k; c++) {
        if (used[c]) continue;
        used[c] = 1;
        cur[item] = c;
        best_injective(sim, g, k, item + 1, score + sim[item * k + c], cur, used, best_score, best);
        used[c] = 0;
    }
}

/* Distinct centroids, most similar pair first (for groups too large for the
 * search). */
static void greedy_injective(const double *sim, int g, int k, uint8_t *used, int *best) {
    for (int a = 0; a < g; a++) best[a] = -1;
    for (int round = 0; round < g; round++) {
        int ba = -1, bc = -1;
        for (int a = 0; a < g; a++) {
            if (best[a] >= 0) continue;
            for (int c = 0; c < k; c++)
                if (!used[c] && (ba < 0 || sim[a * k + c] > sim[ba * k + bc])) {
                    ba = a;
                    bc = c;
                }
        }
        best[ba] = bc;
        used[bc] = 1;
    }
}

int32_t ez_cluster_assign(const float *x, int n, int dim, const int32_t *group, const float *centroids, int k,
                          int32_t *labels) {
    double *sim = NULL;
    int *cur = NULL, *best = NULL, max_g = 1;
    uint8_t *used = NULL;

    if (k <= 0) {
        for (int j = 0; j < n; j++) labels[j] = -1;
        return ELIZA_OK;
    }
    for (int i = 0, g = 1; i < n; i += g) {
        for (g = 1; i + g < n && group[i + g] == group[i];) g++;
        max_g = EZ_MAX(max_g, g);
    }
    sim = (double *)malloc(sizeof(double) * (size_t)max_g * (size_t)k);
    cur = (int *)malloc(sizeof(int) * (size_t)max_g);
    best = (int *)malloc(sizeof(int) * (size_t)max_g);
    used = (uint8_t *)malloc((size_t)k);
    if (!sim || !cur || !best || !used) {
        free(sim);
        free(cur);
        free(best);
        free(used);
        return ez_fail(ELIZA_E_NOMEM, "out of memory assigning %d embeddings to %d clusters", n, k);
    }
    for (int i = 0, g = 1; i < n; i += g) {
        double search = 1.0;
        for (g = 1; i + g < n && group[i + g] == group[i];) g++;
        for (int a = 0; a < g; a++) {
            const float *v = x + (size_t)(i + a) * dim;
            double inv = 1.0 / sqrt(dot_f(v, v, dim));
            for (int c = 0; c < k; c++) sim[a * k + c] = dot_f(v, centroids + (size_t)c * dim, dim) * inv;
        }
        memset(used, 0, (size_t)k);
        for (int a = 0; a < g && search <= MAX_SEARCH; a++) search *= k - a;
        if (g > k) {
            /* More local speakers than clusters: each takes its nearest. */
            for (int a = 0; a < g; a++) {
                best[a] = 0;
                for (int c = 1; c < k; c++)
                    if (sim[a * k + c] > sim[a * k + best[a]]) best[a] = c;
            }
        } else if (search <= MAX_SEARCH) {
            double best_score = -INFINITY;
            best_injective(sim, g, k, 0, 0.0, cur, used, &best_score, best);
        } else {
            greedy_injective(sim, g, k, used, best);
        }
        for (int a = 0; a < g; a++) labels[i + a] = best[a];
    }
    free(sim);
    free(cur);
    free(best);
    free(used);
    return ELIZA_OK;
}
