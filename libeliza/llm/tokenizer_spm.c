/* SentencePiece-style tokenization (tokenizer.ggml.model = "llama"), as
 * llama.cpp does it: spaces become U+2581, the text starts as one symbol per
 * UTF-8 character, and the adjacent pair whose concatenation is the
 * highest-scoring vocabulary token is merged until no pair is a token (ties
 * go to the leftmost pair). A final symbol that is no token falls back to its
 * bytes (<0xHH> tokens). */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "llm/tokenizer_impl.h"

typedef struct {
    int32_t prev, next; /* neighbours in the chain, -1 at the ends */
    uint32_t start, n;  /* bytes of the escaped text; n == 0 once merged away */
} symbol;

typedef struct {
    const ez_tokenizer *tok;
    const char *buf;
    symbol *sym;
    ez_bigram_queue queue;
} session;


/* Queues (left, right) if their concatenation is a token. */
static int try_pair(session *s, int32_t left, int32_t right) {
    ez_bigram b;
    int32_t id;
    if (left < 0 || right < 0) return 1;
    b.size = s->sym[left].n + s->sym[right].n;
    id = ez_vocab_find(s->tok, s->buf + s->sym[left].start, b.size);
    if (id < 0) return 1;
    b.priority = s->tok->score[id];
    b.left = left;
    b.right = right;
    return ez_bigram_push(&s->queue, b);
}

int32_t ez_spm_tokenize(const ez_tokenizer *tok, const char *text, size_t len, int prefix_space,
                        ez_idvec *out) {
    session s;
    char *buf = NULL;
    size_t n_buf = 0, i, n_sym = 0;
    int32_t rc = ELIZA_OK, k;

    memset(&s, 0, sizeof s);
    /* Escaped text: every space becomes U+2581 (3 bytes). */
    if (len > (size_t)(INT32_MAX / 3) - 1)
        return ez_fail(ELIZA_E_INVALID_ARG, "text fragment of %zu bytes is too long to tokenize",
                       len);
    buf = (char *)malloc(3 * len + 3);
    if (!buf) goto nomem;
    if (prefix_space) {
        memcpy(buf, "\xE2\x96\x81", 3);
        n_buf = 3;
    }
    for (i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(buf + n_buf, "\xE2\x96\x81", 3);
            n_buf += 3;
        } else {
            buf[n_buf++] = text[i];
        }
    }
    s.tok = tok;
    s.buf = buf;

    /* One symbol per UTF-8 character (the text is valid UTF-8). */
    for (i = 0; i < n_buf; i++) n_sym += ((uint8_t)buf[i] & 0xC0) != 0x80;
    s.sym = (symbol *)malloc((n_sym ? n_sym : 1) * sizeof *s.sym);
    if (!s.sym) goto nomem;
    for (i = 0, n_sym = 0; i < n_buf;) {
        uint8_t b = (uint8_t)buf[i];
        size_t n = b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
        if (n > n_buf - i) n = n_buf - i;
        s.sym[n_sym].prev = (int32_t)n_sym - 1;
        s.sym[n_sym].next = i + n == n_buf ? -1 : (int32_t)n_sym + 1;
        s.sym[n_sym].start = (uint32_t)i;
        s.sym[n_sym].n = (uint32_t)n;
        n_sym++;
        i += n;
    }
    for (i = 1; i < n_sym; i++) {
        if (!try_pair(&s, (int32_t)i - 1, (int32_t)i)) goto nomem;
    }

    while (s.queue.n > 0) {
        ez_bigram b = ez_bigram_pop(&s.queue);
        symbol *l = &s.sym[b.left], *r = &s.sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s.sym[r->next].prev = b.left;
        if (!try_pair(&s, l->prev, b.left) || !try_pair(&s, b.left, l->next)) goto nomem;
    }

    for (k = n_sym ? 0 : -1; k != -1; k = s.sym[k].next) {
        const symbol *sy = &s.sym[k];
        int32_t id = ez_vocab_find(tok, buf + sy->start, sy->n);
        if (id >= 0) {
            if (!ez_idvec_push(out, id)) goto nomem;
            continue;
        }
        for (i = 0; i < sy->n; i++) {
            uint8_t byte = (uint8_t)buf[sy->start + i];
            id = tok->byte_token[byte] >= 0 ? tok->byte_token[byte] : tok->unk;
            if (id < 0) {
                rc = ez_fail(ELIZA_E_UNSUPPORTED, "the vocabulary has no token for byte 0x%02X"
                             " (no <0x%02X> byte token and no unknown token)", byte, byte);
                goto done;
            }
            if (!ez_idvec_push(out, id)) goto nomem;
        }
    }
    goto done;

nomem:
    rc = ez_fail(ELIZA_E_NOMEM, "out of memory tokenizing %zu bytes", len);
done:
    free(s.queue.items);
    free(s.sym);
    free(buf);
    return rc;
}
