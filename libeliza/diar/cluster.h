/* Speaker clustering: agglomerative clustering of embeddings with centroid
 * linkage on cosine distance and cannot-link groups, then assignment of
 * every embedding to the nearest cluster centroid (pyannote 3.x's
 * AgglomerativeClustering, with the constraint that two local speakers of
 * one window are two speakers). */
#ifndef EZ_DIAR_CLUSTER_H
#define EZ_DIAR_CLUSTER_H

#include "core/common.h"

/* Largest number of items ez_cluster_ahc accepts: it keeps an n x n float
 * distance matrix (4000: 64 MB). */
#define EZ_CLUSTER_MAX_ITEMS 4000

typedef struct {
    float threshold;       /* merging stops at a cosine distance above this */
    int num_clusters;      /* > 0: aim for exactly this many large clusters */
    int min_clusters;      /* 0 = no bound */
    int max_clusters;      /* 0 = no bound */
    int min_cluster_size;  /* a cluster with fewer items is not a speaker of its
                            * own (capped at 10% of the items, as pyannote) */
} ez_cluster_config;

/* Clusters n embeddings x: [n, dim] (any norm, none zero). Items with the
 * same group never end up in one cluster (cannot-link, transitive through
 * merges). Merging follows the closest pair of clusters (distance: 1 - cosine
 * of the clusters' summed embeddings) until the closest pair is farther than
 * the threshold; with a target number of clusters (num_clusters, or a bound
 * the threshold's result violates) the cut is the one nearest to the
 * threshold's that gives the target number of large clusters.
 *
 * On success *out_k large clusters, *out_centroids (malloc'ed, [k, dim],
 * unit norm, ordered by first member), labels[i] in [0, k) for members of a
 * large cluster and -1 for the others. k is 0 only when n is 0. */
EZ_INTERNAL int32_t ez_cluster_ahc(const float *x, int n, int dim, const int32_t *group,
                                   const ez_cluster_config *cfg, int32_t *labels, float **out_centroids,
                                   int *out_k);

/* *out (malloc'ed, [k, dim]): the unit-norm sum of the unit-norm x[i] with
 * labels[i] == c, for c in [0, k) (zeros for an empty cluster). NOMEM. */
EZ_INTERNAL int32_t ez_cluster_centroids(const float *x, int n, int dim, const int32_t *labels, int k,
                                         float **out);

/* labels[i] = the centroid ([k, dim], unit norm) most similar to x[i], where
 * the items of one group, which must be consecutive, take distinct
 * centroids (the assignment with the largest total similarity) when k is at
 * least the group's size. ELIZA_E_NOMEM. */
EZ_INTERNAL int32_t ez_cluster_assign(const float *x, int n, int dim, const int32_t *group,
                                   const float *centroids, int k, int32_t *labels);

#endif /* EZ_DIAR_CLUSTER_H */
