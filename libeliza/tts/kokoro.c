/* Kokoro-82M model and forward pass. Placeholder (issue #4): loading
 * reports ELIZA_E_UNSUPPORTED until the engine lands. */
#include "core/error.h"
#include "tts/kokoro.h"

int32_t ez_kokoro_load(const char *path, ez_kokoro **out) {
    (void)path;
    *out = NULL;
    return ez_fail(ELIZA_E_UNSUPPORTED, "the Kokoro engine is not in this build yet (issue #4)");
}
void ez_kokoro_free(ez_kokoro *m) { (void)m; }
int ez_kokoro_sample_rate(const ez_kokoro *m) { (void)m; return 24000; }
int ez_kokoro_voice_count(const ez_kokoro *m) { (void)m; return 0; }
const char *ez_kokoro_voice_name(const ez_kokoro *m, int index) { (void)m, (void)index; return NULL; }
const float *ez_kokoro_voice_pack(const ez_kokoro *m, int index) { (void)m, (void)index; return NULL; }
int ez_kokoro_symbol_id(const ez_kokoro *m, const char *sym, int len) { (void)m, (void)sym, (void)len; return -1; }
int ez_kokoro_profile(const ez_kokoro *m, ez_kokoro_phase *out, int max) { (void)m, (void)out, (void)max; return 0; }
int32_t ez_kokoro_forward(ez_kokoro *m, ez_pool *pool, const int32_t *ids, int n, const float *style,
                          float speed, int no_noise, uint64_t seed, volatile const int *cancel,
                          float **out_pcm, size_t *out_n) {
    (void)m, (void)pool, (void)ids, (void)n, (void)style, (void)speed, (void)no_noise, (void)seed, (void)cancel;
    *out_pcm = NULL;
    *out_n = 0;
    return ez_fail(ELIZA_E_UNSUPPORTED, "the Kokoro engine is not in this build yet (issue #4)");
}
