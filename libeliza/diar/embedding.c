/* GE2E speaker embedding. Placeholder (issue #5). */
#include "core/error.h"
#include "diar/embedding.h"

int32_t ez_emb_load(const char *path, ez_emb_model **out) {
    (void)path;
    *out = NULL;
    return ez_fail(ELIZA_E_UNSUPPORTED, "the embedding model is not in this build yet (issue #5)");
}
void ez_emb_free(ez_emb_model *m) { (void)m; }
int ez_emb_dim(const ez_emb_model *m) { (void)m; return 256; }
int ez_emb_sample_rate(const ez_emb_model *m) { (void)m; return 16000; }
int32_t ez_emb_embed(ez_emb_model *m, ez_pool *pool, const float *pcm, size_t n, float *out) {
    (void)m, (void)pool, (void)pcm, (void)n, (void)out;
    return ez_fail(ELIZA_E_UNSUPPORTED, "the embedding model is not in this build yet (issue #5)");
}
