/* pyannote segmentation-3.0 forward. Placeholder (issue #5). */
#include "core/error.h"
#include "diar/segmentation.h"

int32_t ez_seg_load(const char *path, ez_seg_model **out) {
    (void)path;
    *out = NULL;
    return ez_fail(ELIZA_E_UNSUPPORTED, "the segmentation model is not in this build yet (issue #5)");
}
void ez_seg_free(ez_seg_model *m) { (void)m; }
int ez_seg_sample_rate(const ez_seg_model *m) { (void)m; return 16000; }
int ez_seg_chunk_samples(const ez_seg_model *m) { (void)m; return 160000; }
int ez_seg_frames(const ez_seg_model *m, int n_samples) { (void)m, (void)n_samples; return 0; }
double ez_seg_frame_step(const ez_seg_model *m) { (void)m; return 0; }
double ez_seg_frame_duration(const ez_seg_model *m) { (void)m; return 0; }
int ez_seg_n_classes(const ez_seg_model *m) { (void)m; return 0; }
int ez_seg_n_speakers(const ez_seg_model *m) { (void)m; return 0; }
const uint8_t *ez_seg_powerset(const ez_seg_model *m) { (void)m; return NULL; }
int32_t ez_seg_forward(ez_seg_model *m, ez_pool *pool, const float *pcm, int n_chunks, int n_samples,
                       float *out) {
    (void)m, (void)pool, (void)pcm, (void)n_chunks, (void)n_samples, (void)out;
    return ez_fail(ELIZA_E_UNSUPPORTED, "the segmentation model is not in this build yet (issue #5)");
}
