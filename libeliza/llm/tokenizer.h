/* Tokenizers read from GGUF metadata (tokenizer.ggml.*):
 *   model "llama" — SentencePiece-style: piece scores, "▁" for spaces,
 *     byte-fallback tokens <0xNN>, control and user-defined tokens, add_bos,
 *     add_space_prefix (gemma3, llama 1/2 style files);
 *   model "gpt2" — byte-level BPE with merges and the pre-tokenizer named by
 *     tokenizer.ggml.pre (llama-bpe, qwen2, ...; llama 3 and qwen2/3 files);
 *   model "bert" — WordPiece with BERT's normalizer (embedding models);
 *   model "t5" — SentencePiece unigram with the file's precompiled charsmap.
 * Token ids and text must equal llama.cpp's for the same file. */
#ifndef EZ_LLM_TOKENIZER_H
#define EZ_LLM_TOKENIZER_H

#include "core/common.h"
#include "core/gguf.h"

typedef struct ez_tokenizer ez_tokenizer;

/* Builds the tokenizer from the file's metadata (copies what it needs; the
 * gguf may be closed afterwards). ELIZA_E_FORMAT for missing/inconsistent
 * keys, ELIZA_E_UNSUPPORTED for an unknown model or pre-tokenizer. */
EZ_INTERNAL int32_t ez_tokenizer_load(const ez_gguf *g, ez_tokenizer **out);
EZ_INTERNAL void ez_tokenizer_free(ez_tokenizer *tok);

EZ_INTERNAL int32_t ez_tokenizer_n_vocab(const ez_tokenizer *tok);
EZ_INTERNAL int32_t ez_tokenizer_bos(const ez_tokenizer *tok);   /* -1 if none */
EZ_INTERNAL int32_t ez_tokenizer_eos(const ez_tokenizer *tok);   /* -1 if none */
EZ_INTERNAL int ez_tokenizer_add_bos(const ez_tokenizer *tok);   /* model asks for BOS */
/* End-of-generation: EOS, EOT, <end_of_turn>, <|im_end|>, ... */
EZ_INTERNAL int ez_tokenizer_is_eog(const ez_tokenizer *tok, int32_t id);

/* Tokenizes text[0..len) (valid UTF-8; ELIZA_E_INVALID_ARG otherwise, the
 * message giving the byte offset). add_bos is llama.cpp's add_special:
 * prepend BOS when the model asks for it (and append EOS when it sets
 * tokenizer.ggml.add_eos_token); parse_special: control token texts in the
 * input become their ids (user-defined ones always do, as in llama.cpp).
 * *out is malloc'd (free(); never NULL on success), *n_out ids. */
EZ_INTERNAL int32_t ez_tokenize(const ez_tokenizer *tok, const char *text, size_t len,
                                int add_bos, int parse_special, int32_t **out, size_t *n_out);

/* The bytes of one token (byte-fallback tokens give their raw byte; "▁"
 * becomes a space; control tokens give "" unless render_special). Writes up
 * to cap bytes, always sets *len to the full length; ELIZA_E_INVALID_ARG for
 * an id out of range. llama.cpp's token_to_piece with lstrip 0: what a
 * stream shows token by token. Whole texts: ez_detokenize. */
EZ_INTERNAL int32_t ez_token_piece(const ez_tokenizer *tok, int32_t id, int render_special,
                                   char *buf, size_t cap, size_t *len);

/* The text of ids[0..n) as llama.cpp's llama_detokenize gives it with
 * remove_special off and unparse_special = render_special: the pieces
 * concatenated, the first piece's leading space dropped when the model sets
 * add_space_prefix, and for BPE models whose pre-tokenizer asks for it
 * llama.cpp's clean-up (" ." -> ".", " 's" -> "'s", ...). *out is malloc'd
 * (free()), NUL-terminated, *len bytes long. ELIZA_E_INVALID_ARG for an id
 * out of range. */
EZ_INTERNAL int32_t ez_detokenize(const ez_tokenizer *tok, const int32_t *ids, size_t n,
                                  int render_special, char **out, size_t *len);

#endif /* EZ_LLM_TOKENIZER_H */
