/* espeak-ng G2P. Placeholder (issue #4). */
#include "core/error.h"
#include "tts/g2p.h"

int32_t ez_g2p_open(const char *library, const char *data, const char *language, ez_g2p **out) {
    (void)library, (void)data, (void)language;
    *out = NULL;
    return ez_fail(ELIZA_E_UNSUPPORTED, "text input needs espeak-ng, not in this build yet (issue #4)");
}
void ez_g2p_close(ez_g2p *g) { (void)g; }
int32_t ez_g2p_phonemize(ez_g2p *g, const char *text, size_t len, int max_chunk, ez_strbuf *out) {
    (void)g, (void)text, (void)len, (void)max_chunk, (void)out;
    return ez_fail(ELIZA_E_UNSUPPORTED, "text input needs espeak-ng, not in this build yet (issue #4)");
}
