/* Text -> Kokoro phonemes through libespeak-ng, loaded at run time (never
 * linked: espeak-ng is GPL-3.0), with espeak's IPA rewritten into Kokoro's
 * symbols exactly as misaki's EspeakG2P does. */
#ifndef EZ_TTS_G2P_H
#define EZ_TTS_G2P_H

#include "core/common.h"
#include "core/strbuf.h"

typedef struct ez_g2p ez_g2p;

/* Loads libespeak-ng: `library` if not NULL, else $ELIZA_ESPEAK_LIBRARY, else
 * the system's (libespeak-ng.so.1 / .dylib / .dll); data directory `data`,
 * else $ELIZA_ESPEAK_DATA, else the library's default; espeak voice
 * `language` (NULL = "en-us"). ELIZA_E_UNSUPPORTED with a message that says
 * how to provide espeak-ng when none loads. espeak-ng keeps global state:
 * calls are serialised inside. */
EZ_INTERNAL int32_t ez_g2p_open(const char *library, const char *data, const char *language,
                                ez_g2p **out);
EZ_INTERNAL void ez_g2p_close(ez_g2p *g);

/* Makes g an English G2P: misaki's en.G2P with the lexicons of GGUF file
 * `path` (eliza.convert lexicon), British (british = 1) or American, espeak-ng
 * only for the words they lack. Errors of ez_g2p_en_open. */
EZ_INTERNAL int32_t ez_g2p_use_lexicon(ez_g2p *g, const char *path, int british);

/* Appends the Kokoro phonemes of UTF-8 `text` (len bytes) to `out`, one
 * line per chunk: text is split into sentences, and a sentence whose
 * phonemes exceed max_chunk code points is split further at word
 * boundaries. ELIZA_E_INVALID_ARG for invalid UTF-8. */
EZ_INTERNAL int32_t ez_g2p_phonemize(ez_g2p *g, const char *text, size_t len, int max_chunk,
                                     ez_strbuf *out);

#endif /* EZ_TTS_G2P_H */
