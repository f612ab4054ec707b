/* Internals shared by tokenizer.c (loading, special tokens, pieces),
 * tokenizer_spm.c (SentencePiece merges), tokenizer_bpe.c (pre-tokenizers
 * and byte-level BPE), tokenizer_wpm.c (BERT WordPiece) and tokenizer_ugm.c
 * (SentencePiece unigram). Not for use outside libeliza/llm/tokenizer*.c. */
#ifndef EZ_LLM_TOKENIZER_IMPL_H
#define EZ_LLM_TOKENIZER_IMPL_H

#include "llm/tokenizer.h"

/* Token attributes, with llama.cpp's meanings. */
enum {
    EZ_TA_UNKNOWN = 1u << 0,
    EZ_TA_UNUSED = 1u << 1,
    EZ_TA_NORMAL = 1u << 2,
    EZ_TA_CONTROL = 1u << 3,
    EZ_TA_USER_DEFINED = 1u << 4,
    EZ_TA_BYTE = 1u << 5,
    EZ_TA_LSTRIP = 1u << 7,
    EZ_TA_RSTRIP = 1u << 8,
    EZ_TA_EOG = 1u << 15 /* ours: ends generation */
};

/* tokenizer.ggml.model "llama", "gpt2", "bert", "t5". */
typedef enum { EZ_TOK_SPM = 1, EZ_TOK_BPE = 2, EZ_TOK_WPM = 3, EZ_TOK_UGM = 4 } ez_tok_type;

/* BPE pre-tokenizers: how text is cut into words before the merges. One
 * value per distinct list of llama.cpp's regexes (tokenizer_bpe.c holds the
 * lists; several tokenizer.ggml.pre names share one). */
typedef enum {
    EZ_PRE_DEFAULT = 1, /* punctuation runs, GPT-2 regex, digit runs, digit triples */
    EZ_PRE_GPT2,        /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    EZ_PRE_LLAMA3,      /* (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|... */
    EZ_PRE_QWEN2,       /* as LLAMA3 with \p{N} one digit at a time */
    EZ_PRE_QWEN35,      /* as QWEN2 with [\p{L}\p{M}]+ letter runs */
    EZ_PRE_JAIS2,
    EZ_PRE_DEEPSEEK_LLM,
    EZ_PRE_DEEPSEEK3_LLM,
    EZ_PRE_SPARK2_5,
    EZ_PRE_YOUTU,
    EZ_PRE_DEEPSEEK_CODER,
    EZ_PRE_FALCON,
    EZ_PRE_STARCODER,
    EZ_PRE_PORO,
    EZ_PRE_VIKING,
    EZ_PRE_TEKKEN,
    EZ_PRE_CHAMELEON,
    EZ_PRE_GPT4O,
    EZ_PRE_GRANITE_EMB_MULTI,
    EZ_PRE_TINY_AYA,
    EZ_PRE_KIMI_K2,
    EZ_PRE_SUPERBPE,
    EZ_PRE_BAILINGMOE,
    EZ_PRE_SEED_CODER,
    EZ_PRE_UFAKZEKA,
    EZ_PRE_AFMOE,
    EZ_PRE_LAGUNA,
    EZ_PRE_EXAONE_MOE,
    EZ_PRE_MINICPM5,
    EZ_PRE_GEMMA4,      /* [^\n]+|[\n]+ over raw UTF-8 with spaces as U+2581 (gemma4, granite-embed-multi-311m) */
    EZ_PRE_SARVAM_MOE,  /* the same split and escape, without gemma4's newline rule */
    EZ_PRE_WHITESPACE,  /* \S+ over raw UTF-8 */
    EZ_PRE_COUNT
} ez_pre_type;

/* A pre-tokenizer ready to run: its passes in order, each a rule written
 * out by hand (as llama.cpp has them for its most common regexes) or a
 * compiled regex. */
#define EZ_PRE_MAX_PASSES 8
typedef struct ez_regex ez_regex;
typedef struct {
    int n;
    int kind[EZ_PRE_MAX_PASSES];
    ez_regex *re[EZ_PRE_MAX_PASSES];
} ez_pretok;

/* Open-addressing hash table: per slot the entry's index + 1 (0 = empty)
 * and 32 bits of its hash, so that a probe rarely touches the entry. */
typedef struct {
    uint32_t (*slots)[2];
    uint32_t mask; /* capacity - 1, capacity a power of two */
} ez_htab;

struct ez_tokenizer {
    ez_tok_type type;
    ez_pre_type pre;
    ez_pretok pretok;    /* BPE: the compiled passes of pre */
    int32_t n_vocab;

    char *text;          /* all token texts back to back */
    uint32_t *text_off;  /* [n_vocab + 1]: token i is text[text_off[i] .. text_off[i+1]) */
    float *score;        /* [n_vocab] */
    uint16_t *attr;      /* [n_vocab] EZ_TA_* */
    ez_htab vocab;       /* text -> id */

    /* BPE merges "left right": rank i is merge_text[merge_off[i] ..
     * merge_off[i+1]), the left part merge_split[i] bytes long, a space, the
     * right part. */
    int32_t n_merges;
    char *merge_text;
    uint32_t *merge_off;
    uint32_t *merge_split;
    ez_htab merges;      /* (left, right) -> rank */

    /* Special (control, user-defined, unknown) tokens, and every prefix of
     * their texts: the prefix of `len` bytes of token `rep`'s text; `full` is
     * the special token whose whole text it is, or -1. rep == -1: empty. */
    int32_t *special;
    int32_t n_special;
    struct ez_prefix {
        int32_t rep, full;
        uint32_t len;
    } *prefix;
    uint32_t prefix_mask;

    int32_t byte_token[256]; /* SPM byte fallback: <0xHH> (or the byte itself); -1 */
    int32_t char_token[256]; /* the one-byte text, -1 if none (BPE leftovers) */

    int32_t bos, eos, unk;   /* -1 when absent */
    int32_t sep;             /* WPM: appended after the text (BERT's [SEP]); -1 when absent */
    int add_bos, add_eos;
    int add_space_prefix;    /* SPM, UGM: " " before text that starts a fragment */
    int ignore_merges;       /* BPE: a word that is a token is taken whole */
    int raw_utf8;            /* BPE: merges run on UTF-8 characters, not GPT-2's byte code points;
                                a piece without a token falls back to <0xHH> tokens */
    int escape_spaces;       /* BPE: " " is U+2581 before the split, and again " " when rendered */
    int newline_words;       /* BPE: a word of newlines only that is a token is taken whole (gemma4) */
    int gemma4_model;        /* tokenizer.ggml.model "gemma4": BPE, pre-tokenizer gemma4 */
    int whitespace_model;    /* tokenizer.ggml.model "whitespace": BPE of the text's non-space runs */
    int clean_spaces;        /* BPE, WPM detokenize: " ." -> "." and similar */

    /* WPM: BERT's normalizer (tokenizer.ggml.normalizer.*). */
    int lowercase, strip_accents;

    /* Token ids sorted by text (bytes, shorter first on a common prefix), to
     * walk as a trie: WPM every token; UGM the normal, user-defined and
     * unused ones. sorted_user: UGM's user-defined tokens. */
    int32_t *sorted, n_sorted;
    int32_t *sorted_user, n_sorted_user;

    /* UGM: SentencePiece's normalizer and the unknown token's score. */
    int remove_extra_ws;     /* tokenizer.ggml.remove_extra_whitespaces */
    uint32_t *xcda;          /* the charsmap's double array, host order */
    uint32_t n_xcda;
    char *replacements;      /* NUL-terminated replacement strings */
    uint32_t n_replacements; /* bytes */
    float unk_score;         /* lowest normal score - 10 */
};

/* Growable id list. */
typedef struct {
    int32_t *ids;
    size_t n, cap;
} ez_idvec;

EZ_INTERNAL int32_t ez_idvec_push(ez_idvec *v, int32_t id);

/* Growable byte buffer (WPM words, UGM normalized text); free(buf) when done. */
typedef struct {
    char *buf;
    size_t len, cap;
} ez_bytevec;

/* Appends p[0..n); 0 on allocation failure (the buffer is unchanged). */
EZ_INTERNAL int ez_bytevec_put(ez_bytevec *b, const void *p, size_t n);

/* Bytes hash (FNV-1a, 64-bit), continuing from h (start with EZ_HASH_INIT). */
#define EZ_HASH_INIT 0xcbf29ce484222325ull
static inline uint64_t ez_hash_bytes(uint64_t h, const char *s, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Hash of a byte string for the vocabulary and merge tables. */
EZ_INTERNAL uint64_t ez_hash_span(const char *s, size_t n);

/* id of the token whose text is s[0..n), or -1. */
EZ_INTERNAL int32_t ez_vocab_find(const ez_tokenizer *tok, const char *s, size_t n);
/* rank of the merge (left, right), or -1. */
EZ_INTERNAL int32_t ez_merge_find(const ez_tokenizer *tok, const char *l, size_t nl,
                                  const char *r, size_t nr);

/* Appends the ids of one raw text fragment (valid UTF-8, no special tokens
 * left in it). SPM: prefix_space adds the space that add_space_prefix asks
 * for. */
EZ_INTERNAL int32_t ez_spm_tokenize(const ez_tokenizer *tok, const char *text, size_t len,
                                    int prefix_space, ez_idvec *out);
EZ_INTERNAL int32_t ez_bpe_tokenize(const ez_tokenizer *tok, const char *text, size_t len,
                                    ez_idvec *out);

/* WPM: the words of one fragment, then the longest tokens that make each.
 * UGM: the normalized fragment, then the best-scoring segmentation. */
EZ_INTERNAL int32_t ez_wpm_tokenize(const ez_tokenizer *tok, const char *text, size_t len,
                                    ez_idvec *out);
EZ_INTERNAL int32_t ez_ugm_tokenize(const ez_tokenizer *tok, const char *text, size_t len,
                                    ez_idvec *out);
/* UGM at load, before special tokens are classified (llama.cpp builds its
 * matchers from the file's token types): the matchers, the unknown score
 * and the charsmap of tokenizer.ggml.precompiled_charsmap (copied). */
EZ_INTERNAL int32_t ez_ugm_init(ez_tokenizer *tok, const ez_gguf *g);

/* The ids of the tokens whose attributes intersect `attrs` (0: every
 * token), sorted by text; *out malloc'd. */
EZ_INTERNAL int32_t ez_vocab_sorted(const ez_tokenizer *tok, uint16_t attrs, int32_t **out,
                                    int32_t *n_out);
/* One step down the trie of sorted ids: [*lo, *hi) share their first
 * `depth` bytes; keeps those whose next byte is b. Returns the id whose
 * whole text is the new prefix (depth + 1 bytes), or -1. */
EZ_INTERNAL int32_t ez_sorted_step(const ez_tokenizer *tok, const int32_t *ids, int32_t *lo,
                                   int32_t *hi, uint32_t depth, uint8_t b);

/* Builds the passes of pre (ELIZA_E_NOMEM, or the matcher's
 * ELIZA_E_INVALID_ARG for a pattern it refuses: a bug, tested for every
 * pre-tokenizer); ez_pretok_free releases them (a zeroed ez_pretok is
 * empty). */
EZ_INTERNAL int32_t ez_pretok_init(ez_pretok *p, ez_pre_type pre);
EZ_INTERNAL void ez_pretok_free(ez_pretok *p);

/* Cuts text[0..len) into words: *out_lens (malloc'd) receives the byte
 * length of each word, *n_out their count. */
EZ_INTERNAL int32_t ez_pretok_split(const ez_pretok *p, const char *text, size_t len,
                                    size_t **out_lens, size_t *n_out);
/* The same for a pre-tokenizer built for this one call. Exposed for tests. */
EZ_INTERNAL int32_t ez_bpe_pretokenize(ez_pre_type pre, const char *text, size_t len,
                                       size_t **out_lens, size_t *n_out);

/* A candidate merge of two adjacent symbols, queued by both tokenizers. */
typedef struct {
    double priority;       /* higher merges first: SPM piece score, BPE -rank */
    int32_t left, right;   /* symbol indices */
    uint32_t size;         /* bytes of left + right when queued: stale if it changed */
} ez_bigram;

/* A binary heap of bigrams: highest priority first, then the leftmost. */
typedef struct {
    ez_bigram *items;      /* malloc'd; free(items) when done */
    size_t n, cap;
} ez_bigram_queue;

/* 0 on allocation failure (the queue is unchanged). */
EZ_INTERNAL int ez_bigram_push(ez_bigram_queue *q, ez_bigram b);
/* Removes and returns the first bigram; q->n must be > 0. */
EZ_INTERNAL ez_bigram ez_bigram_pop(ez_bigram_queue *q);

/* GPT-2's byte <-> printable code point mapping. */
EZ_INTERNAL uint32_t ez_bpe_byte_to_cp(uint8_t b);
EZ_INTERNAL int ez_bpe_cp_to_byte(uint32_t cp); /* -1 if cp is not a mapped byte */

#endif /* EZ_LLM_TOKENIZER_IMPL_H */
