/* GGUF reader: valid files parse and their getters work; every rule the
 * reader enforces is pinned by a test that builds the offending file; and a
 * generated corpus of thousands of mutants of a valid file (every truncation,
 * bit flips, huge counts and lengths, bad offsets, types, dims, alignments)
 * each returns OK or an error, never crashes, hangs or leaks (run under
 * -DELIZA_SANITIZE=ON for the "never" part). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "core/gguf.h"
#include "core/quant.h"
#include "eliza.h"
#include "check.h"

/* ---- a tiny GGUF writer ------------------------------------------------------ */

typedef struct {
    uint8_t *p;
    size_t len, cap;
} buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        b->p = (uint8_t *)realloc(b->p, cap);
        if (!b->p) {
            fprintf(stderr, "test writer: out of memory\n");
            exit(2);
        }
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, d, n);
    b->len += n;
}

static void put_u8(buf *b, uint8_t v) { put(b, &v, 1); }
static void put_u16(buf *b, uint16_t v) {
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(b, x, 2);
}
static void put_u32(buf *b, uint32_t v) {
    uint8_t x[4];
    int i;
    for (i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, 4);
}
static void put_u64(buf *b, uint64_t v) {
    uint8_t x[8];
    int i;
    for (i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
    put(b, x, 8);
}
static void put_f32(buf *b, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    put_u32(b, u);
}
static void put_f64(buf *b, double f) {
    uint64_t u;
    memcpy(&u, &f, 8);
    put_u64(b, u);
}

/* Fields a mutation can target, by what they are. */
enum {
    M_COUNT, M_STRLEN, M_VTYPE, M_ARRTYPE, M_ARRLEN, M_NDIMS, M_NE, M_TTYPE, M_OFFSET,
    M_ALIGN, M_VERSION
};

typedef struct {
    int section; /* 0 header, 1 kv, 2 tensor infos */
    size_t pos;
    int width;   /* 4 or 8 */
    int kind;
} mark;

#define MAX_MARKS 512

typedef struct {
    uint32_t version;
    buf kv, ti, data;
    uint64_t n_kv, n_t;
    uint64_t alignment;
    mark marks[MAX_MARKS];
    int n_marks;
} builder;

static void mark_here(builder *b, int section, int width, int kind) {
    buf *s = section == 1 ? &b->kv : &b->ti;
    if (b->n_marks < MAX_MARKS) {
        mark m;
        m.section = section;
        m.pos = s->len;
        m.width = width;
        m.kind = kind;
        b->marks[b->n_marks++] = m;
    }
}

static void b_init(builder *b) {
    memset(b, 0, sizeof *b);
    b->version = 3;
    b->alignment = 32;
}

static void b_free(builder *b) {
    free(b->kv.p);
    free(b->ti.p);
    free(b->data.p);
}

static void put_strn(builder *b, int section, const char *s, size_t n) {
    buf *d = section == 1 ? &b->kv : &b->ti;
    mark_here(b, section, 8, M_STRLEN);
    put_u64(d, n);
    put(d, s, n);
}

static void kv_head(builder *b, const char *key, uint32_t type) {
    put_strn(b, 1, key, strlen(key));
    mark_here(b, 1, 4, M_VTYPE);
    put_u32(&b->kv, type);
    b->n_kv++;
}

static void kv_u32(builder *b, const char *key, uint32_t v) {
    kv_head(b, key, EZ_GGUF_U32);
    if (strcmp(key, "general.alignment") == 0) {
        mark_here(b, 1, 4, M_ALIGN);
        b->alignment = v;
    }
    put_u32(&b->kv, v);
}

static void kv_str(builder *b, const char *key, const char *s, size_t n) {
    kv_head(b, key, EZ_GGUF_STRING);
    put_strn(b, 1, s, n);
}

static void arr_head(builder *b, const char *key, uint32_t et, uint64_t n) {
    kv_head(b, key, EZ_GGUF_ARRAY);
    mark_here(b, 1, 4, M_ARRTYPE);
    put_u32(&b->kv, et);
    mark_here(b, 1, 8, M_ARRLEN);
    put_u64(&b->kv, n);
}

static void kv_arr_strs(builder *b, const char *key, const char *const *s, uint64_t n) {
    uint64_t i;
    arr_head(b, key, EZ_GGUF_STRING, n);
    for (i = 0; i < n; i++) put_strn(b, 1, s[i], strlen(s[i]));
}

/* Appends a tensor whose data (nbytes) follows the previous one, aligned. */
static void tensor(builder *b, const char *name, uint32_t type, uint32_t n_dims,
                   const uint64_t *ne, const void *data, size_t nbytes) {
    uint32_t d;
    static const uint8_t zeros[256];
    while (b->data.len % b->alignment) put_u8(&b->data, 0);
    put_strn(b, 2, name, strlen(name));
    mark_here(b, 2, 4, M_NDIMS);
    put_u32(&b->ti, n_dims);
    for (d = 0; d < n_dims; d++) {
        mark_here(b, 2, 8, M_NE);
        put_u64(&b->ti, ne[d]);
    }
    mark_here(b, 2, 4, M_TTYPE);
    put_u32(&b->ti, type);
    mark_here(b, 2, 8, M_OFFSET);
    put_u64(&b->ti, b->data.len);
    if (data) {
        put(&b->data, data, nbytes);
    } else {
        while (nbytes) {
            size_t n = nbytes < sizeof zeros ? nbytes : sizeof zeros;
            put(&b->data, zeros, n);
            nbytes -= n;
        }
    }
    b->n_t++;
}

/* The file; marks become absolute offsets in *marks_out when given. */
static uint8_t *b_finish(builder *b, size_t *size, mark *marks_out) {
    buf f = {0};
    size_t kv_at, ti_at;
    int i;
    put(&f, "GGUF", 4);
    put_u32(&f, b->version);
    put_u64(&f, b->n_t);
    put_u64(&f, b->n_kv);
    kv_at = f.len;
    put(&f, b->kv.p, b->kv.len);
    ti_at = f.len;
    put(&f, b->ti.p, b->ti.len);
    if (b->n_t) {
        while (f.len % b->alignment) put_u8(&f, 0);
        put(&f, b->data.p, b->data.len);
    }
    if (marks_out) {
        for (i = 0; i < b->n_marks; i++) {
            marks_out[i] = b->marks[i];
            marks_out[i].pos += b->marks[i].section == 1 ? kv_at : ti_at;
        }
        /* The header fields. */
        marks_out[b->n_marks + 0] = (mark){0, 4, 4, M_VERSION};
        marks_out[b->n_marks + 1] = (mark){0, 8, 8, M_COUNT};
        marks_out[b->n_marks + 2] = (mark){0, 16, 8, M_COUNT};
    }
    *size = f.len;
    return f.p;
}

/* ---- the reference valid file --------------------------------------------------- */

static const char *const k_strs[] = {"a", "bb", "", "ccc", "<pad>", "\xe2\x96\x81the",
                                     "x\ny", "q\"uote", "back\\slash", "last"};

/* Q8_0 blocks: d = 0.5, q = i - 16, so element i of a block is (i - 16) / 2. */
static void make_q8_0(uint8_t *dst, int blocks) {
    int b, i;
    for (b = 0; b < blocks; b++) {
        uint8_t *blk = dst + b * 34;
        blk[0] = 0x00;
        blk[1] = 0x38; /* f16 0.5 */
        for (i = 0; i < 32; i++) blk[2 + i] = (uint8_t)(int8_t)(i - 16);
    }
}

/* Any bytes make a valid K-quant block once the f16 scales are finite. */
static void make_kquant(uint8_t *dst, size_t n, size_t block, size_t d_at, int two_scales) {
    size_t i;
    uint32_t x = 12345;
    for (i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        dst[i] = (uint8_t)(x >> 16);
    }
    for (i = 0; i + block <= n; i += block) {
        dst[i + d_at] = 0x00;
        dst[i + d_at + 1] = 0x1c; /* f16 1/256 */
        if (two_scales) {
            dst[i + d_at + 2] = 0x00;
            dst[i + d_at + 3] = 0x1c;
        }
    }
}

typedef struct {
    int with_alignment_key; /* write general.alignment = 32 explicitly */
    uint32_t version;
} ref_opts;

static void build_reference(builder *b, ref_opts o) {
    static const float f32v[6] = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, -7.0f};
    static const float four[4] = {1, 2, 3, 4};
    static const int32_t i32v[2] = {7, -7};
    uint8_t f16v[8], bf16v[4], q8[34 * 4], q4k[144], q6k[210 * 2];
    uint64_t ne[4];
    int i;

    b_init(b);
    if (o.version) b->version = o.version;
    kv_str(b, "general.architecture", "test", 4);
    if (o.with_alignment_key) kv_u32(b, "general.alignment", 32);
    kv_head(b, "test.u8", EZ_GGUF_U8);
    put_u8(&b->kv, 200);
    kv_head(b, "test.i8", EZ_GGUF_I8);
    put_u8(&b->kv, (uint8_t)(int8_t)-5);
    kv_head(b, "test.u16", EZ_GGUF_U16);
    put_u16(&b->kv, 60000);
    kv_head(b, "test.i16", EZ_GGUF_I16);
    put_u16(&b->kv, (uint16_t)(int16_t)-30000);
    kv_u32(b, "test.u32", 4000000000u);
    kv_head(b, "test.i32", EZ_GGUF_I32);
    put_u32(&b->kv, (uint32_t)(int32_t)-2000000000);
    kv_head(b, "test.f32", EZ_GGUF_F32);
    put_f32(&b->kv, 0.1f);
    kv_head(b, "test.bool", EZ_GGUF_BOOL);
    put_u8(&b->kv, 1);
    kv_head(b, "test.u64", EZ_GGUF_U64);
    put_u64(&b->kv, (1ull << 40) + 1);
    kv_head(b, "test.i64", EZ_GGUF_I64);
    put_u64(&b->kv, (uint64_t)-(int64_t)(1ll << 40));
    kv_head(b, "test.f64", EZ_GGUF_F64);
    put_f64(&b->kv, 0.1);
    kv_str(b, "test.str", "h\xc3\xa9llo \"q\"\n", 11);
    kv_str(b, "test.bad_utf8", "\xff\xfe ok \xe2\x82 \xed\xa0\x80", 12);
    kv_str(b, "test.nul", "a\0b", 3);
    arr_head(b, "test.arr_i32", EZ_GGUF_I32, 10);
    for (i = 0; i < 10; i++) put_u32(&b->kv, (uint32_t)(i * 3 - 5));
    kv_arr_strs(b, "test.arr_str", k_strs, 10);
    arr_head(b, "test.arr_f32", EZ_GGUF_F32, 4);
    put_f32(&b->kv, 1.5f);
    put_f32(&b->kv, INFINITY);
    put_f32(&b->kv, NAN);
    put_f32(&b->kv, -0.0f);
    arr_head(b, "test.arr_bool", EZ_GGUF_BOOL, 3);
    put_u8(&b->kv, 1);
    put_u8(&b->kv, 0);
    put_u8(&b->kv, 1);
    arr_head(b, "test.arr_empty", EZ_GGUF_U8, 0);

    ne[0] = 3;
    ne[1] = 2;
    tensor(b, "f32", EZ_TYPE_F32, 2, ne, f32v, sizeof f32v);
    /* f16: 1, -2, 0.5, 65504 */
    f16v[0] = 0x00; f16v[1] = 0x3c; f16v[2] = 0x00; f16v[3] = 0xc0;
    f16v[4] = 0x00; f16v[5] = 0x38; f16v[6] = 0xff; f16v[7] = 0x7b;
    ne[0] = 4;
    tensor(b, "f16", EZ_TYPE_F16, 1, ne, f16v, sizeof f16v);
    ne[0] = 2;
    bf16v[0] = 0x80; bf16v[1] = 0x3f; bf16v[2] = 0x40; bf16v[3] = 0xc0; /* 1, -3 */
    tensor(b, "bf16", EZ_TYPE_BF16, 1, ne, bf16v, sizeof bf16v);
    make_q8_0(q8, 4);
    ne[0] = 64;
    ne[1] = 2;
    tensor(b, "blk.0.q8", EZ_TYPE_Q8_0, 2, ne, q8, sizeof q8);
    make_kquant(q4k, sizeof q4k, 144, 0, 1);
    ne[0] = 256;
    tensor(b, "blk.0.q4k", EZ_TYPE_Q4_K, 1, ne, q4k, sizeof q4k);
    ne[0] = 2;
    tensor(b, "i32", EZ_TYPE_I32, 1, ne, i32v, sizeof i32v);
    ne[0] = 1; ne[1] = 2; ne[2] = 1; ne[3] = 2;
    tensor(b, "four", EZ_TYPE_F32, 4, ne, four, sizeof four);
    /* Last, so the file ends with tensor data and every truncation fails.
     * Two 210-byte rows: the second starts 2-aligned only. */
    make_kquant(q6k, sizeof q6k, 210, 208, 0);
    ne[0] = 256;
    ne[1] = 2;
    tensor(b, "blk.0.q6k", EZ_TYPE_Q6_K, 2, ne, q6k, sizeof q6k);
}

static uint8_t *reference_file(size_t *size, mark *marks, int *n_marks) {
    builder b;
    ref_opts o = {1, 3};
    uint8_t *f;
    build_reference(&b, o);
    f = b_finish(&b, size, marks);
    if (n_marks) *n_marks = b.n_marks + 3;
    b_free(&b);
    return f;
}

/* ---- a JSON checker (syntax + UTF-8) --------------------------------------------- */

typedef struct {
    const char *s;
    int depth;
} jp;

static void j_ws(jp *p) {
    while (*p->s == ' ' || *p->s == '\n' || *p->s == '\r' || *p->s == '\t') p->s++;
}

static int j_value(jp *p);

static int j_string(jp *p) {
    if (*p->s != '"') return 0;
    p->s++;
    for (;;) {
        unsigned char c = (unsigned char)*p->s;
        if (c == '"') {
            p->s++;
            return 1;
        }
        if (c < 0x20) return 0;
        if (c == '\\') {
            p->s++;
            if (strchr("\"\\/bfnrt", *p->s) && *p->s) {
                p->s++;
            } else if (*p->s == 'u') {
                int i;
                for (i = 1; i <= 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", p->s[i]) || !p->s[i]) return 0;
                p->s += 5;
            } else {
                return 0;
            }
        } else if (c < 0x80) {
            p->s++;
        } else {
            /* Strict UTF-8. */
            const unsigned char *u = (const unsigned char *)p->s;
            int len, i;
            unsigned lo = 0x80, hi = 0xBF;
            if (c >= 0xC2 && c <= 0xDF) len = 2;
            else if (c >= 0xE0 && c <= 0xEF) len = 3;
            else if (c >= 0xF0 && c <= 0xF4) len = 4;
            else return 0;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
            for (i = 1; i < len; i++) {
                unsigned b = u[i];
                if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
            }
            p->s += len;
        }
    }
}

static int j_number(jp *p) {
    const char *s = p->s;
    if (*s == '-') s++;
    if (*s == '0') {
        s++;
    } else if (*s >= '1' && *s <= '9') {
        while (*s >= '0' && *s <= '9') s++;
    } else {
        return 0;
    }
    if (*s == '.') {
        s++;
        if (!(*s >= '0' && *s <= '9')) return 0;
        while (*s >= '0' && *s <= '9') s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!(*s >= '0' && *s <= '9')) return 0;
        while (*s >= '0' && *s <= '9') s++;
    }
    p->s = s;
    return 1;
}

static int j_value(jp *p) {
    int ok = 0;
    if (++p->depth > 64) return 0;
    j_ws(p);
    if (*p->s == '{') {
        p->s++;
        j_ws(p);
        if (*p->s == '}') {
            p->s++;
            ok = 1;
        } else {
            for (;;) {
                j_ws(p);
                if (!j_string(p)) break;
                j_ws(p);
                if (*p->s != ':') break;
                p->s++;
                if (!j_value(p)) break;
                j_ws(p);
                if (*p->s == ',') {
                    p->s++;
                    continue;
                }
                if (*p->s == '}') {
                    p->s++;
                    ok = 1;
                }
                break;
            }
        }
    } else if (*p->s == '[') {
        p->s++;
        j_ws(p);
        if (*p->s == ']') {
            p->s++;
            ok = 1;
        } else {
            for (;;) {
                if (!j_value(p)) break;
                j_ws(p);
                if (*p->s == ',') {
                    p->s++;
                    continue;
                }
                if (*p->s == ']') {
                    p->s++;
                    ok = 1;
                }
                break;
            }
        }
    } else if (*p->s == '"') {
        ok = j_string(p);
    } else if (strncmp(p->s, "true", 4) == 0 || strncmp(p->s, "null", 4) == 0) {
        p->s += 4;
        ok = 1;
    } else if (strncmp(p->s, "false", 5) == 0) {
        p->s += 5;
        ok = 1;
    } else {
        ok = j_number(p);
    }
    p->depth--;
    return ok;
}

static int json_valid(const char *s) {
    jp p;
    p.s = s;
    p.depth = 0;
    if (!j_value(&p)) return 0;
    j_ws(&p);
    return *p.s == '\0';
}

/* ---- exercising an opened file ---------------------------------------------------- */

/* Everything a consumer might do with a file that opened; on a corrupt
 * mutant that opened anyway this must still be in bounds. */
static void exercise(const ez_gguf *g, const uint8_t *base, uint64_t size) {
    uint64_t i;
    char *json = NULL;

    CHECK(g->alignment && (g->alignment & (g->alignment - 1)) == 0);
    for (i = 0; i < g->n_kv; i++) {
        const ez_gguf_kv *kv = &g->kv[i];
        CHECK(ez_gguf_find_kv(g, kv->key) == kv);
        if (kv->type == EZ_GGUF_ARRAY && kv->arr_type == EZ_GGUF_STRING) {
            ez_str *tab = NULL;
            if (ez_gguf_arr_strings(kv, &tab) == ELIZA_OK) {
                uint64_t j;
                for (j = 0; j < kv->arr_len; j++)
                    CHECK((const uint8_t *)tab[j].ptr >= base &&
                          (const uint8_t *)tab[j].ptr + tab[j].len <= base + size);
                free(tab);
            }
        }
        if (kv->type == EZ_GGUF_STRING)
            CHECK((const uint8_t *)kv->v.s.ptr >= base &&
                  (const uint8_t *)kv->v.s.ptr + kv->v.s.len <= base + size);
    }
    for (i = 0; i < g->n_tensors; i++) {
        const ez_gguf_tensor *t = &g->tensors[i];
        CHECK(ez_gguf_find_tensor(g, t->name) == t);
        CHECK(t->n_dims >= 1 && t->n_dims <= 4);
        CHECK(t->data >= base && t->data + t->nbytes <= base + size);
        CHECK(t->offset % g->alignment == 0);
        if (t->n_elements <= (1u << 20)) {
            float *f = NULL;
            int32_t rc = ez_gguf_tensor_f32(t, &f);
            CHECK(rc == ELIZA_OK || rc == ELIZA_E_UNSUPPORTED);
            free(f);
        }
    }
    if (ez_gguf_info_json(g, 3, 1, &json) == ELIZA_OK) {
        CHECK(json_valid(json));
        free(json);
    } else {
        CHECK(0);
    }
    if (ez_gguf_info_json(g, UINT32_MAX, 1, &json) == ELIZA_OK) {
        CHECK(json_valid(json));
        free(json);
    } else {
        CHECK(0);
    }
}

/* Opens a private copy of exactly `size` bytes (so ASan sees any over-read). */
static int32_t open_copy(const uint8_t *data, size_t size, int run_exercise) {
    uint8_t *copy = (uint8_t *)malloc(size ? size : 1);
    ez_gguf *g = NULL;
    int32_t rc;
    if (!copy) return ELIZA_E_NOMEM;
    if (size) memcpy(copy, data, size);
    ez_clear_error();
    rc = ez_gguf_open_memory(copy, size, &g);
    if (rc == ELIZA_OK) {
        CHECK(g != NULL);
        if (g && run_exercise) exercise(g, copy, size);
        ez_gguf_close(g);
    } else {
        CHECK(g == NULL);
        CHECK(ez_error_message()[0] != '\0');
        CHECK(rc == ELIZA_E_FORMAT || rc == ELIZA_E_UNSUPPORTED || rc == ELIZA_E_NOMEM);
    }
    free(copy);
    return rc;
}

/* ---- tests: valid files ------------------------------------------------------------- */

static void test_gguf_reference_file_parses(void) {
    size_t size;
    uint8_t *f = reference_file(&size, NULL, NULL);
    ez_gguf *g = NULL;
    uint32_t u32;
    uint64_t u64;
    float f32;
    int bl;
    ez_str s;
    const ez_gguf_kv *arr;
    const ez_gguf_tensor *t;
    ez_str *tab = NULL;

    CHECK_RC(ez_gguf_open_memory(f, size, &g), ELIZA_OK);
    if (!g) goto done;
    CHECK(g->version == 3);
    CHECK(g->alignment == 32);
    CHECK(g->data_offset % 32 == 0);
    CHECK(g->n_kv == 21);
    CHECK(g->n_tensors == 8);

    CHECK_RC(ez_gguf_get_str(g, "general.architecture", &s), ELIZA_OK);
    CHECK(s.len == 4 && memcmp(s.ptr, "test", 4) == 0);
    CHECK_RC(ez_gguf_get_u32(g, "test.u8", &u32), ELIZA_OK);
    CHECK(u32 == 200);
    CHECK_RC(ez_gguf_get_u32(g, "test.u16", &u32), ELIZA_OK);
    CHECK(u32 == 60000);
    CHECK_RC(ez_gguf_get_u32(g, "test.u32", &u32), ELIZA_OK);
    CHECK(u32 == 4000000000u);
    CHECK_RC(ez_gguf_get_u32(g, "test.i8", &u32), ELIZA_E_FORMAT); /* negative */
    CHECK_RC(ez_gguf_get_u32(g, "test.u64", &u32), ELIZA_E_FORMAT); /* > UINT32_MAX */
    CHECK(strstr(ez_error_message(), "test.u64") != NULL);
    CHECK_RC(ez_gguf_get_u64(g, "test.u64", &u64), ELIZA_OK);
    CHECK(u64 == (1ull << 40) + 1);
    CHECK_RC(ez_gguf_get_u64(g, "test.i64", &u64), ELIZA_E_FORMAT);
    CHECK_RC(ez_gguf_get_f32(g, "test.f32", &f32), ELIZA_OK);
    CHECK(f32 == 0.1f);
    CHECK_RC(ez_gguf_get_f32(g, "test.f64", &f32), ELIZA_OK);
    CHECK(f32 == 0.1f);
    CHECK_RC(ez_gguf_get_f32(g, "test.u16", &f32), ELIZA_OK);
    CHECK(f32 == 60000.0f);
    CHECK_RC(ez_gguf_get_f32(g, "test.u32", &f32), ELIZA_E_FORMAT); /* not exact in a float */
    CHECK_RC(ez_gguf_get_f32(g, "test.str", &f32), ELIZA_E_FORMAT);
    CHECK_RC(ez_gguf_get_bool(g, "test.bool", &bl), ELIZA_OK);
    CHECK(bl == 1);
    CHECK_RC(ez_gguf_get_bool(g, "test.u8", &bl), ELIZA_E_FORMAT);
    CHECK_RC(ez_gguf_get_u32(g, "no.such.key", &u32), ELIZA_E_NOT_FOUND);
    CHECK(strstr(ez_error_message(), "no.such.key") != NULL);
    CHECK_RC(ez_gguf_get_str(g, "test.nul", &s), ELIZA_OK);
    CHECK(s.len == 3 && s.ptr[1] == '\0');

    CHECK_RC(ez_gguf_get_arr(g, "test.arr_i32", EZ_GGUF_I32, &arr), ELIZA_OK);
    CHECK(arr->arr_len == 10);
    CHECK_RC(ez_gguf_get_arr(g, "test.arr_i32", EZ_GGUF_F32, &arr), ELIZA_E_FORMAT);
    CHECK_RC(ez_gguf_get_arr(g, "test.u8", EZ_GGUF_U8, &arr), ELIZA_E_FORMAT);
    CHECK_RC(ez_gguf_get_arr(g, "test.arr_str", EZ_GGUF_STRING, &arr), ELIZA_OK);
    CHECK_RC(ez_gguf_arr_strings(arr, &tab), ELIZA_OK);
    if (tab) {
        int i;
        for (i = 0; i < 10; i++)
            CHECK(tab[i].len == strlen(k_strs[i]) && memcmp(tab[i].ptr, k_strs[i], tab[i].len) == 0);
        free(tab);
    }
    CHECK_RC(ez_gguf_get_arr(g, "test.arr_empty", EZ_GGUF_U8, &arr), ELIZA_OK);
    CHECK(arr->arr_len == 0);

    t = ez_gguf_find_tensor(g, "blk.0.q8");
    CHECK(t != NULL);
    if (t) {
        CHECK(t->type == EZ_TYPE_Q8_0);
        CHECK(t->n_dims == 2 && t->ne[0] == 64 && t->ne[1] == 2 && t->ne[2] == 1 && t->ne[3] == 1);
        CHECK(t->n_elements == 128);
        CHECK(t->nbytes == 4 * 34);
        CHECK(t->data == f + g->data_offset + t->offset); /* zero copy */
    }
    t = ez_gguf_find_tensor(g, "four");
    CHECK(t && t->n_dims == 4 && t->n_elements == 4);
    CHECK(ez_gguf_find_tensor(g, "blk.0") == NULL);
    CHECK(ez_gguf_find_tensor(g, "") == NULL);
    CHECK(strcmp(ez_gguf_vtype_name(EZ_GGUF_F32), "FLOAT32") == 0);
    CHECK(strcmp(ez_gguf_vtype_name(99), "UNKNOWN") == 0);

done:
    ez_gguf_close(g);
    free(f);
}

/* need_: absent or out of range is a FORMAT error naming the key; opt_:
 * absent leaves the output and the last error message as they were. */
static void test_gguf_checked_and_optional_getters(void) {
    size_t size;
    uint8_t *f = reference_file(&size, NULL, NULL);
    ez_gguf *g = NULL;
    uint32_t u32 = 7;
    float f32 = 2.5f;
    int bl = 0;
    ez_str s = {"keep", 4};
    const ez_gguf_kv *arr = NULL;

    CHECK_RC(ez_gguf_open_memory(f, size, &g), ELIZA_OK);
    if (!g) goto done;
    CHECK_RC(ez_gguf_need_u32(g, "test.u16", 1, 60000, &u32), ELIZA_OK);
    CHECK(u32 == 60000);
    CHECK_RC(ez_gguf_need_u32(g, "test.u16", 1, 59999, &u32), ELIZA_E_FORMAT);
    CHECK(strstr(ez_error_message(), "'test.u16' = 60000 is outside [1, 59999]") != NULL);
    CHECK_RC(ez_gguf_need_u32(g, "test.gone", 0, 9, &u32), ELIZA_E_FORMAT);
    CHECK(strstr(ez_error_message(), "metadata key 'test.gone' is missing") != NULL);
    CHECK_RC(ez_gguf_need_f32(g, "test.f32", 0.0f, 1.0f, &f32), ELIZA_OK);
    CHECK(f32 == 0.1f);
    CHECK_RC(ez_gguf_need_f32(g, "test.f32", 0.5f, 1.0f, &f32), ELIZA_E_FORMAT);
    CHECK_RC(ez_gguf_need_bool(g, "test.bool", &bl), ELIZA_OK);
    CHECK(bl == 1);
    CHECK_RC(ez_gguf_need_bool(g, "test.gone", &bl), ELIZA_E_FORMAT);
    bl = 5;
    CHECK_RC(ez_gguf_opt_bool(g, "test.gone", &bl), ELIZA_OK);
    CHECK(bl == 5);
    CHECK_RC(ez_gguf_opt_bool(g, "test.bool", &bl), ELIZA_OK);
    CHECK(bl == 1);
    CHECK_RC(ez_gguf_opt_bool(g, "test.u8", &bl), ELIZA_E_FORMAT);
    CHECK_RC(ez_gguf_need_str(g, "test.u8", &s), ELIZA_E_FORMAT);
    CHECK_RC(ez_gguf_need_arr(g, "test.arr_i32", EZ_GGUF_I32, &arr), ELIZA_OK);
    CHECK(arr && arr->arr_len == 10);

    ez_fail(ELIZA_E_INTERNAL, "sentinel");
    u32 = 7;
    f32 = 2.5f;
    s.ptr = "keep";
    s.len = 4;
    CHECK_RC(ez_gguf_opt_u32(g, "test.gone", 0, 9, &u32), ELIZA_OK);
    CHECK_RC(ez_gguf_opt_f32(g, "test.gone", 0.0f, 9.0f, &f32), ELIZA_OK);
    CHECK_RC(ez_gguf_opt_str(g, "test.gone", &s), ELIZA_OK);
    CHECK_RC(ez_gguf_opt_arr(g, "test.gone", EZ_GGUF_I32, &arr), ELIZA_OK);
    CHECK(u32 == 7 && f32 == 2.5f && s.len == 4 && arr == NULL);
    CHECK(strcmp(ez_error_message(), "sentinel") == 0);
    /* present keys are checked as need_ checks them */
    CHECK_RC(ez_gguf_opt_u32(g, "test.u8", 0, 100, &u32), ELIZA_E_FORMAT);
    CHECK(u32 == 7);
    CHECK_RC(ez_gguf_opt_u32(g, "test.u8", 0, 200, &u32), ELIZA_OK);
    CHECK(u32 == 200);
    CHECK_RC(ez_gguf_opt_str(g, "test.str", &s), ELIZA_OK);
    CHECK(s.len == 11);
    CHECK_RC(ez_gguf_opt_arr(g, "test.arr_i32", EZ_GGUF_F32, &arr), ELIZA_E_FORMAT);
done:
    ez_gguf_close(g);
    free(f);
}

/* A NaN or infinite f32 is refused by its own message, whatever the range. */
static void test_gguf_f32_getters_refuse_non_finite_values(void) {
    static const float bad[2] = {NAN, -INFINITY};
    for (int i = 0; i < 2; i++) {
        builder b;
        size_t size;
        uint8_t *f;
        ez_gguf *g = NULL;
        float v = 3.0f;
        b_init(&b);
        kv_head(&b, "test.scale", EZ_GGUF_F32);
        put_f32(&b.kv, bad[i]);
        f = b_finish(&b, &size, NULL);
        b_free(&b);
        CHECK_RC(ez_gguf_open_memory(f, size, &g), ELIZA_OK);
        if (g) {
            CHECK_RC(ez_gguf_need_f32(g, "test.scale", -INFINITY, INFINITY, &v), ELIZA_E_FORMAT);
            CHECK(strstr(ez_error_message(), "metadata 'test.scale'") != NULL);
            CHECK(strstr(ez_error_message(), "is not a finite number") != NULL);
            CHECK_RC(ez_gguf_opt_f32(g, "test.scale", -1.0f, 1.0f, &v), ELIZA_E_FORMAT);
            CHECK(v == 3.0f);
        }
        ez_gguf_close(g);
        free(f);
    }
}

/* Elements of integer and bool arrays of every width, widened to int64 and
 * sign-extended where signed; other element types, a U64 past INT64_MAX
 * and an index past the end refused. */
static void test_gguf_arr_int_reads_every_integer_width(void) {
    builder b;
    size_t size;
    uint8_t *f;
    ez_gguf *g = NULL;
    const ez_gguf_kv *kv;
    int64_t v = 0;
    b_init(&b);
    arr_head(&b, "a.bool", EZ_GGUF_BOOL, 2);
    put_u8(&b.kv, 0);
    put_u8(&b.kv, 1);
    arr_head(&b, "a.i8", EZ_GGUF_I8, 1);
    put_u8(&b.kv, 0xfe);
    arr_head(&b, "a.u16", EZ_GGUF_U16, 2);
    put_u16(&b.kv, 1);
    put_u16(&b.kv, 0xfffe);
    arr_head(&b, "a.i16", EZ_GGUF_I16, 1);
    put_u16(&b.kv, 0xfffe);
    arr_head(&b, "a.u32", EZ_GGUF_U32, 1);
    put_u32(&b.kv, 0xfffffffeu);
    arr_head(&b, "a.i32", EZ_GGUF_I32, 1);
    put_u32(&b.kv, 0xfffffffeu);
    arr_head(&b, "a.i64", EZ_GGUF_I64, 1);
    put_u64(&b.kv, (uint64_t)-3);
    arr_head(&b, "a.u64", EZ_GGUF_U64, 2);
    put_u64(&b.kv, 1ull << 40);
    put_u64(&b.kv, ~0ull);
    arr_head(&b, "a.f32", EZ_GGUF_F32, 1);
    put_f32(&b.kv, 1.0f);
    kv_u32(&b, "a.scalar", 4);
    f = b_finish(&b, &size, NULL);
    b_free(&b);
    CHECK_RC(ez_gguf_open_memory(f, size, &g), ELIZA_OK);
    if (!g) goto done;
#define ARR_INT(key, i, want)                                                          \
    do {                                                                               \
        kv = ez_gguf_find_kv(g, key);                                                  \
        CHECK_RC(ez_gguf_arr_int(kv, i, &v), ELIZA_OK);                                \
        CHECK_MSG(v == (want), "%s[%d] = %" PRId64 ", want %" PRId64, key, i, v, (int64_t)(want)); \
    } while (0)
    ARR_INT("a.bool", 0, 0);
    ARR_INT("a.bool", 1, 1);
    ARR_INT("a.i8", 0, -2);
    ARR_INT("a.u16", 1, 0xfffe);
    ARR_INT("a.i16", 0, -2);
    ARR_INT("a.u32", 0, 0xfffffffe);
    ARR_INT("a.i32", 0, -2);
    ARR_INT("a.i64", 0, -3);
    ARR_INT("a.u64", 0, (int64_t)1 << 40);
#undef ARR_INT
    v = 9;
    CHECK_RC(ez_gguf_arr_int(ez_gguf_find_kv(g, "a.u64"), 1, &v), ELIZA_E_FORMAT);
    CHECK(strstr(ez_error_message(), "past INT64_MAX") != NULL && v == 9);
    CHECK_RC(ez_gguf_arr_int(ez_gguf_find_kv(g, "a.f32"), 0, &v), ELIZA_E_FORMAT);
    CHECK(strstr(ez_error_message(), "'a.f32' is an array of FLOAT32") != NULL);
    CHECK_RC(ez_gguf_arr_int(ez_gguf_find_kv(g, "a.u16"), 2, &v), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_gguf_arr_int(ez_gguf_find_kv(g, "a.scalar"), 0, &v), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_gguf_arr_int(NULL, 0, &v), ELIZA_E_INVALID_ARG);
done:
    ez_gguf_close(g);
    free(f);
}

static void test_gguf_version_2_and_default_alignment(void) {
    builder b;
    ref_opts o = {0, 2};
    size_t size;
    uint8_t *f;
    ez_gguf *g = NULL;

    build_reference(&b, o);
    f = b_finish(&b, &size, NULL);
    b_free(&b);
    CHECK_RC(ez_gguf_open_memory(f, size, &g), ELIZA_OK);
    if (g) {
        CHECK(g->version == 2);
        CHECK(g->alignment == 32);
        CHECK(ez_gguf_find_kv(g, "general.alignment") == NULL);
    }
    ez_gguf_close(g);
    free(f);
}

static void test_gguf_dequantizes_known_types(void) {
    size_t size;
    uint8_t *f = reference_file(&size, NULL, NULL);
    ez_gguf *g = NULL;
    float *v = NULL;
    int i;

    CHECK_RC(ez_gguf_open_memory(f, size, &g), ELIZA_OK);
    if (!g) goto done;
    CHECK_RC(ez_gguf_tensor_f32(ez_gguf_find_tensor(g, "f32"), &v), ELIZA_OK);
    CHECK(v && v[0] == 1.0f && v[1] == -2.5f && v[5] == -7.0f);
    free(v);
    v = NULL;
    CHECK_RC(ez_gguf_tensor_f32(ez_gguf_find_tensor(g, "f16"), &v), ELIZA_OK);
    CHECK(v && v[0] == 1.0f && v[1] == -2.0f && v[2] == 0.5f && v[3] == 65504.0f);
    free(v);
    v = NULL;
    CHECK_RC(ez_gguf_tensor_f32(ez_gguf_find_tensor(g, "bf16"), &v), ELIZA_OK);
    CHECK(v && v[0] == 1.0f && v[1] == -3.0f);
    free(v);
    v = NULL;
    CHECK_RC(ez_gguf_tensor_f32(ez_gguf_find_tensor(g, "blk.0.q8"), &v), ELIZA_OK);
    if (v)
        for (i = 0; i < 128; i++) CHECK(v[i] == (float)((i % 32) - 16) * 0.5f);
    free(v);
    v = NULL;
    CHECK_RC(ez_gguf_tensor_f32(ez_gguf_find_tensor(g, "blk.0.q6k"), &v), ELIZA_OK);
    if (v) {
        float ref[256];
        const ez_gguf_tensor *t = ez_gguf_find_tensor(g, "blk.0.q6k");
        for (i = 0; i < 512; i++) CHECK(isfinite(v[i]));
        /* The second row (2-aligned in the file) equals a direct dequant. */
        ez_kernels_ref(EZ_TYPE_Q6_K)->dequant(t->data + 210, ref, 256);
        for (i = 0; i < 256; i++) CHECK(v[256 + i] == ref[i]);
    }
    free(v);
    v = NULL;
    CHECK_RC(ez_gguf_tensor_f32(ez_gguf_find_tensor(g, "blk.0.q4k"), &v), ELIZA_OK);
    if (v)
        for (i = 0; i < 256; i++) CHECK(isfinite(v[i]));
    free(v);
    v = NULL;
    CHECK_RC(ez_gguf_tensor_f32(ez_gguf_find_tensor(g, "i32"), &v), ELIZA_E_UNSUPPORTED);
    CHECK(v == NULL);
    CHECK(strstr(ez_error_message(), "i32") != NULL);
done:
    ez_gguf_close(g);
    free(f);
}

static void test_gguf_info_json_document(void) {
    size_t size;
    uint8_t *f = reference_file(&size, NULL, NULL);
    ez_gguf *g = NULL;
    char *j = NULL;

    CHECK_RC(ez_gguf_open_memory(f, size, &g), ELIZA_OK);
    if (!g) goto done;
    CHECK_RC(ez_gguf_info_json(g, 2, 1, &j), ELIZA_OK);
    if (j) {
        CHECK(json_valid(j));
        CHECK(strstr(j, "\"architecture\":\"test\"") != NULL);
        CHECK(strstr(j, "\"test.arr_i32\":{\"type\":\"INT32\",\"len\":10,\"items\":[-5,-2]}") != NULL);
        CHECK(strstr(j, "\"test.arr_str\":{\"type\":\"STRING\",\"len\":10,\"items\":[\"a\",\"bb\"]}") != NULL);
        CHECK(strstr(j, "\"test.arr_f32\":{\"type\":\"FLOAT32\",\"len\":4,\"items\":[1.5,null]}") != NULL);
        CHECK(strstr(j, "\"test.arr_empty\":{\"type\":\"UINT8\",\"len\":0,\"items\":[]}") != NULL);
        CHECK(strstr(j, "\"test.f32\":0.1,") != NULL);
        CHECK(strstr(j, "\"test.f64\":0.1,") != NULL);
        CHECK(strstr(j, "\"test.i64\":-1099511627776,") != NULL);
        CHECK(strstr(j, "\"test.bool\":true,") != NULL);
        CHECK(strstr(j, "\"test.str\":\"h\xc3\xa9llo \\\"q\\\"\\n\"") != NULL);
        /* Maximal subparts: ff, fe, e2 82, ed, a0, 80 -> six U+FFFD. */
        CHECK(strstr(j, "\"test.bad_utf8\":\"\xef\xbf\xbd\xef\xbf\xbd ok \xef\xbf\xbd "
                        "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"") != NULL);
        CHECK(strstr(j, "\"test.nul\":\"a\\u0000b\"") != NULL);
        CHECK(strstr(j, "\"test.u32\":\"UINT32\"") != NULL);
        CHECK(strstr(j, "\"test.arr_str\":\"ARRAY[STRING]\"") != NULL);
        CHECK(strstr(j, "{\"name\":\"blk.0.q8\",\"type\":\"Q8_0\",\"type_id\":8,"
                        "\"shape\":[64,2],\"offset\":") != NULL);
        CHECK(strstr(j, "\"tensor_count\":8,\"tensors\":[") != NULL);
        free(j);
        j = NULL;
    }
    CHECK_RC(ez_gguf_info_json(g, 0, 0, &j), ELIZA_OK);
    if (j) {
        CHECK(json_valid(j));
        CHECK(strstr(j, "\"tensors\"") == NULL);
        CHECK(strstr(j, "\"len\":10,\"items\":[]") != NULL);
        free(j);
        j = NULL;
    }
    CHECK_RC(ez_gguf_info_json(g, UINT32_MAX, 1, &j), ELIZA_OK);
    if (j) {
        CHECK(json_valid(j));
        CHECK(strstr(j, "\"last\"]") != NULL);
        CHECK(strstr(j, "[1.5,null,null,-0.0]") != NULL);
        free(j);
    }
done:
    ez_gguf_close(g);
    free(f);
}

/* ---- tests: the public API over a file ---------------------------------------------- */

static const char *k_tmp = "test_gguf_tmp.gguf";

static int write_file(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    int ok;
    if (!fp) return 0;
    ok = fwrite(data, 1, n, fp) == n;
    return fclose(fp) == 0 && ok;
}

static void test_gguf_public_api(void) {
    size_t size;
    uint8_t *f = reference_file(&size, NULL, NULL);
    eliza_gguf *h = NULL;
    eliza_gguf_info_params p;
    char *j = NULL;
    float *v = NULL;
    uint64_t n = 99;

    CHECK(write_file(k_tmp, f, size));
    CHECK_RC(eliza_gguf_open(k_tmp, &h), ELIZA_OK);
    CHECK(eliza_last_error()[0] == '\0');
    if (!h) goto done;
    CHECK_RC(eliza_gguf_info_json(h, NULL, &j), ELIZA_OK);
    CHECK(j && json_valid(j) && strstr(j, "\"len\":10,\"items\":[\"a\",\"bb\",\"\",\"ccc\","));
    CHECK(j && strstr(j, "\"file_size\":") != NULL);
    eliza_free(j);
    j = NULL;
    eliza_gguf_info_default_params(&p);
    CHECK(p.struct_size == sizeof p && p.max_array_items == 8 && p.include_tensors == 1);
    p.include_tensors = 0;
    p.max_array_items = 1;
    CHECK_RC(eliza_gguf_info_json(h, &p, &j), ELIZA_OK);
    CHECK(j && strstr(j, "\"tensors\"") == NULL && strstr(j, "\"items\":[\"a\"]"));
    eliza_free(j);
    j = NULL;
    /* An older, shorter struct: the missing fields keep their defaults. */
    p.struct_size = 8;
    CHECK_RC(eliza_gguf_info_json(h, &p, &j), ELIZA_OK);
    CHECK(j && strstr(j, "\"tensors\"") != NULL);
    eliza_free(j);
    j = NULL;
    p.struct_size = 0;
    CHECK_RC(eliza_gguf_info_json(h, &p, &j), ELIZA_E_ABI);
    CHECK(j == NULL);
    CHECK_RC(eliza_gguf_info_json(h, NULL, NULL), ELIZA_E_INVALID_ARG);

    CHECK_RC(eliza_gguf_tensor_f32(h, "blk.0.q8", &v, &n), ELIZA_OK);
    CHECK(n == 128 && v && v[1] == -7.5f);
    eliza_free(v);
    v = NULL;
    CHECK_RC(eliza_gguf_tensor_f32(h, "nope", &v, &n), ELIZA_E_NOT_FOUND);
    CHECK(v == NULL && n == 0 && strstr(eliza_last_error(), "nope"));
    CHECK_RC(eliza_gguf_tensor_f32(h, "i32", &v, &n), ELIZA_E_UNSUPPORTED);
    CHECK_RC(eliza_gguf_tensor_f32(h, NULL, &v, &n), ELIZA_E_INVALID_ARG);
    CHECK_RC(eliza_gguf_tensor_f32(NULL, "f32", &v, &n), ELIZA_E_INVALID_ARG);
    eliza_gguf_close(h);
    h = NULL;

    /* Errors name the file. */
    f[0] = 'X';
    CHECK(write_file(k_tmp, f, size));
    CHECK_RC(eliza_gguf_open(k_tmp, &h), ELIZA_E_FORMAT);
    CHECK(h == NULL && strstr(eliza_last_error(), k_tmp) && strstr(eliza_last_error(), "magic"));
    CHECK(write_file(k_tmp, f, 0));
    CHECK_RC(eliza_gguf_open(k_tmp, &h), ELIZA_E_FORMAT);
    CHECK_RC(eliza_gguf_open("/nonexistent/dir/model.gguf", &h), ELIZA_E_IO);
    CHECK(strstr(eliza_last_error(), "model.gguf") != NULL);
    CHECK_RC(eliza_gguf_open(NULL, &h), ELIZA_E_INVALID_ARG);
    CHECK_RC(eliza_gguf_open(k_tmp, NULL), ELIZA_E_INVALID_ARG);
    eliza_gguf_close(NULL);
done:
    eliza_gguf_close(h);
    remove(k_tmp);
    free(f);
}

/* ---- tests: every rule, one offending file each ---------------------------------------- */

/* Opens f and checks the code and that the message contains `needle`. */
static void expect_fail(const uint8_t *f, size_t size, int32_t want, const char *needle,
                        const char *what) {
    int32_t rc = open_copy(f, size, 0);
    if (rc != want) {
        fprintf(stderr, "  %s: got %s, expected %s (%s)\n", what, eliza_status_name(rc),
                eliza_status_name(want), ez_error_message());
        g_failed = 1;
    } else if (needle && !strstr(ez_error_message(), needle)) {
        fprintf(stderr, "  %s: message '%s' lacks '%s'\n", what, ez_error_message(), needle);
        g_failed = 1;
    }
}

/* The reference file with the u32/u64 field of mark `kind` number `nth`
 * (in file order) set to v. */
static uint8_t *ref_with(int kind, int nth, uint64_t v, size_t *size) {
    mark marks[MAX_MARKS + 3];
    int n_marks, i, seen = 0;
    uint8_t *f = reference_file(size, marks, &n_marks);
    for (i = 0; i < n_marks; i++) {
        if (marks[i].kind != kind || seen++ != nth) continue;
        if (marks[i].width == 4) {
            uint32_t x = (uint32_t)v;
            int k;
            for (k = 0; k < 4; k++) f[marks[i].pos + k] = (uint8_t)(x >> (8 * k));
        } else {
            int k;
            for (k = 0; k < 8; k++) f[marks[i].pos + k] = (uint8_t)(v >> (8 * k));
        }
        return f;
    }
    fprintf(stderr, "ref_with: no mark %d #%d\n", kind, nth);
    g_failed = 1;
    return f;
}

/* Index of the first M_NE / M_OFFSET / ... mark of tensor `name` is found by
 * order: tensors appear in the order build_reference writes them. */
enum { T_F32, T_F16, T_BF16, T_Q8, T_Q4K, T_I32, T_FOUR, T_Q6K };

static void test_gguf_rejects_bad_headers(void) {
    uint8_t f[64];
    size_t size;
    uint8_t *r;

    memset(f, 0, sizeof f);
    expect_fail(f, 0, ELIZA_E_FORMAT, "too short", "empty");
    expect_fail((const uint8_t *)"GGU", 3, ELIZA_E_FORMAT, "too short", "3 bytes");
    expect_fail((const uint8_t *)"GGML\x01\0\0\0", 8, ELIZA_E_FORMAT, "magic", "bad magic");
    expect_fail((const uint8_t *)"GGUF\x03\0", 6, ELIZA_E_FORMAT, "truncated", "6 bytes");
    memcpy(f, "GGUF\x01\0\0\0", 8);
    expect_fail(f, sizeof f, ELIZA_E_UNSUPPORTED, "version 1", "v1");
    memcpy(f, "GGUF\0\0\0\x03", 8);
    expect_fail(f, sizeof f, ELIZA_E_UNSUPPORTED, "big-endian", "big-endian v3");
    memcpy(f, "GGUF\0\0\0\x02", 8);
    expect_fail(f, sizeof f, ELIZA_E_UNSUPPORTED, "big-endian", "big-endian v2");
    memcpy(f, "GGUF\x04\0\0\0", 8);
    expect_fail(f, sizeof f, ELIZA_E_UNSUPPORTED, "version 4", "v4");
    memcpy(f, "GGUF\0\0\0\0", 8);
    expect_fail(f, sizeof f, ELIZA_E_FORMAT, "version", "v0");
    memcpy(f, "GGUF\x03\0\0\0", 8);
    expect_fail(f, 20, ELIZA_E_FORMAT, "24-byte", "short header");
    expect_fail(f, 24, ELIZA_OK, NULL, "no metadata, no tensors");

    r = ref_with(M_COUNT, 0, UINT64_MAX, &size);
    expect_fail(r, size, ELIZA_E_FORMAT, "tensors", "tensor count huge");
    free(r);
    r = ref_with(M_COUNT, 1, 1ull << 40, &size);
    expect_fail(r, size, ELIZA_E_FORMAT, "metadata", "kv count huge");
    free(r);
    r = ref_with(M_COUNT, 1, 1000, &size); /* fits the 14-byte minimum, fails while parsing */
    expect_fail(r, size, ELIZA_E_FORMAT, NULL, "kv count too large");
    free(r);
}

/* n_dims of each reference tensor, in file order (see build_reference). */
static const int k_ref_dims[] = {2, 1, 1, 2, 1, 1, 4, 2};

/* The M_NE mark number of dimension `dim` of reference tensor `t`. */
static int ne_mark(int t, int dim) {
    int i, n = 0;
    for (i = 0; i < t; i++) n += k_ref_dims[i];
    return n + dim;
}

static void expect_ref(int kind, int nth, uint64_t v, int32_t want, const char *needle,
                       const char *what) {
    size_t size;
    uint8_t *f = ref_with(kind, nth, v, &size);
    expect_fail(f, size, want, needle, what);
    free(f);
}

static void test_gguf_rejects_bad_tensor_infos(void) {
    size_t size;
    uint8_t *f;

    expect_ref(M_OFFSET, T_Q6K, 10 * 4096, ELIZA_E_FORMAT, "past the end of the file", "offset past EOF");
    expect_ref(M_OFFSET, T_F16, UINT64_MAX - 31, ELIZA_E_FORMAT, "overflows", "offset overflow");
    expect_ref(M_OFFSET, T_F16, 33, ELIZA_E_FORMAT, "not a multiple of the alignment 32", "misaligned offset");
    expect_ref(M_NDIMS, T_F32, 0, ELIZA_E_FORMAT, "0 dimensions", "n_dims 0");
    expect_ref(M_NDIMS, T_F32, 5, ELIZA_E_FORMAT, "5 dimensions", "n_dims 5");
    expect_ref(M_NE, ne_mark(T_F32, 1), 0, ELIZA_E_FORMAT, "dimension 1 is 0", "ne 0");
    expect_ref(M_NE, ne_mark(T_F32, 1), 1ull << 62, ELIZA_E_FORMAT, "element count overflows", "ne product overflow");
    expect_ref(M_NE, ne_mark(T_I32, 0), 1ull << 62, ELIZA_E_FORMAT, "byte size overflows", "nbytes overflow");
    expect_ref(M_NE, ne_mark(T_I32, 0), 1ull << 40, ELIZA_E_FORMAT, "past the end", "huge tensor");
    expect_ref(M_NE, ne_mark(T_Q8, 0), 48, ELIZA_E_FORMAT, "not a multiple of the Q8_0 block size 32", "row vs block");
    expect_ref(M_TTYPE, T_F32, 4, ELIZA_E_FORMAT, "unknown type id 4", "retired type");
    expect_ref(M_TTYPE, T_F32, 99, ELIZA_E_FORMAT, "unknown type id 99", "type 99");
    expect_ref(M_TTYPE, T_F32, UINT32_MAX, ELIZA_E_FORMAT, "unknown type id", "type 2^32-1");

    /* Every strict prefix ends inside a tensor's data or earlier. */
    f = reference_file(&size, NULL, NULL);
    expect_fail(f, size - 1, ELIZA_E_FORMAT, "data ends at", "one byte short");
    free(f);
}

static void test_gguf_rejects_bad_metadata(void) {
    expect_ref(M_STRLEN, 0, UINT64_MAX, ELIZA_E_FORMAT, "string length", "key length huge");
    expect_ref(M_STRLEN, 0, 0, ELIZA_E_FORMAT, "is empty", "empty key");
    expect_ref(M_STRLEN, 1, 1ull << 63, ELIZA_E_FORMAT, "general.architecture", "value length huge");
    expect_ref(M_VTYPE, 0, 13, ELIZA_E_FORMAT, "unknown value type 13", "value type 13");
    expect_ref(M_VTYPE, 0, UINT32_MAX, ELIZA_E_FORMAT, "unknown value type", "value type huge");
    expect_ref(M_ARRTYPE, 0, EZ_GGUF_ARRAY, ELIZA_E_UNSUPPORTED, "nested arrays", "nested array");
    expect_ref(M_ARRTYPE, 0, 13, ELIZA_E_FORMAT, "unknown array element type 13", "elem type 13");
    expect_ref(M_ARRLEN, 0, 1ull << 61, ELIZA_E_FORMAT, "test.arr_i32", "int array len huge");
    expect_ref(M_ARRLEN, 0, UINT64_MAX, ELIZA_E_FORMAT, "test.arr_i32", "int array len max");
    expect_ref(M_ARRLEN, 1, 1ull << 40, ELIZA_E_FORMAT, "cannot fit", "string array len huge");
    expect_ref(M_ARRLEN, 1, 11, ELIZA_E_FORMAT, NULL, "string array len + 1");
    expect_ref(M_ALIGN, 0, 0, ELIZA_E_FORMAT, "power of two", "alignment 0");
    expect_ref(M_ALIGN, 0, 3, ELIZA_E_FORMAT, "power of two", "alignment 3");
    expect_ref(M_ALIGN, 0, 0xFFFFFFFFu, ELIZA_E_FORMAT, "power of two", "alignment 2^32-1");
    expect_ref(M_ALIGN, 0, 0x80000000u, ELIZA_E_FORMAT, "alignment 2147483648", "alignment 2^31");
    expect_ref(M_ALIGN, 0, 64, ELIZA_E_FORMAT, NULL, "alignment 64 (offsets 32-aligned)");
}

/* Small hand-built files for the rules the reference cannot reach by
 * patching one field. */
static void test_gguf_rejects_bad_names_and_duplicates(void) {
    builder b;
    uint8_t *f;
    size_t size;
    uint64_t ne[1] = {4};
    static const float four[4] = {0};
    char *longkey;

    b_init(&b);
    kv_str(&b, "general.architecture", "x", 1);
    kv_str(&b, "general.architecture", "y", 1);
    f = b_finish(&b, &size, NULL);
    expect_fail(f, size, ELIZA_E_FORMAT, "'general.architecture' appears more than once", "dup key");
    free(f);
    b_free(&b);

    b_init(&b);
    tensor(&b, "w", EZ_TYPE_F32, 1, ne, four, sizeof four);
    tensor(&b, "v", EZ_TYPE_F32, 1, ne, four, sizeof four);
    tensor(&b, "w", EZ_TYPE_F32, 1, ne, four, sizeof four);
    f = b_finish(&b, &size, NULL);
    expect_fail(f, size, ELIZA_E_FORMAT, "tensor 'w' appears more than once", "dup tensor");
    free(f);
    b_free(&b);

    b_init(&b);
    kv_str(&b, "a\0b", "x", 1); /* strlen: key "a" */
    b.kv.len = 0;
    b.n_kv = 0;
    b.n_marks = 0;
    put_strn(&b, 1, "a\0b", 3);
    put_u32(&b.kv, EZ_GGUF_U8);
    put_u8(&b.kv, 1);
    b.n_kv = 1;
    f = b_finish(&b, &size, NULL);
    expect_fail(f, size, ELIZA_E_FORMAT, "contains a NUL byte", "NUL in key");
    free(f);
    b_free(&b);

    b_init(&b);
    tensor(&b, "", EZ_TYPE_F32, 1, ne, four, sizeof four);
    f = b_finish(&b, &size, NULL);
    expect_fail(f, size, ELIZA_E_FORMAT, "name of tensor 0 of 1 is empty", "empty tensor name");
    free(f);
    b_free(&b);

    b_init(&b);
    put_strn(&b, 2, "t\0x", 3);
    put_u32(&b.ti, 1);
    put_u64(&b.ti, 4);
    put_u32(&b.ti, EZ_TYPE_F32);
    put_u64(&b.ti, 0);
    put(&b.data, four, sizeof four);
    b.n_t = 1;
    f = b_finish(&b, &size, NULL);
    expect_fail(f, size, ELIZA_E_FORMAT, "contains a NUL byte", "NUL in tensor name");
    free(f);
    b_free(&b);

    longkey = (char *)malloc(65537);
    if (longkey) {
        memset(longkey, 'k', 65536);
        longkey[65536] = '\0';
        b_init(&b);
        kv_head(&b, longkey, EZ_GGUF_U8);
        put_u8(&b.kv, 1);
        f = b_finish(&b, &size, NULL);
        expect_fail(f, size, ELIZA_E_FORMAT, "65536 bytes long", "key too long");
        free(f);
        b_free(&b);
        free(longkey);
    }

    b_init(&b);
    kv_head(&b, "flag", EZ_GGUF_BOOL);
    put_u8(&b.kv, 2);
    f = b_finish(&b, &size, NULL);
    expect_fail(f, size, ELIZA_E_FORMAT, "'flag': bool value is 2", "bool 2");
    free(f);
    b_free(&b);

    b_init(&b);
    arr_head(&b, "flags", EZ_GGUF_BOOL, 2);
    put_u8(&b.kv, 0);
    put_u8(&b.kv, 7);
    f = b_finish(&b, &size, NULL);
    expect_fail(f, size, ELIZA_E_FORMAT, "bool element 1 is 7", "bool array 7");
    free(f);
    b_free(&b);

    b_init(&b);
    kv_head(&b, "general.alignment", EZ_GGUF_U64);
    put_u64(&b.kv, 32);
    f = b_finish(&b, &size, NULL);
    expect_fail(f, size, ELIZA_E_FORMAT, "UINT32 expected", "alignment as u64");
    free(f);
    b_free(&b);
}

static void test_gguf_alignment_1_reads_unaligned_data(void) {
    builder b;
    uint8_t *f;
    size_t size;
    uint64_t ne[1];
    static const uint8_t one = 7;
    static const float vals[3] = {1.5f, -2.0f, 3.0f};
    ez_gguf *g = NULL;
    float *v = NULL;

    b_init(&b);
    kv_u32(&b, "general.alignment", 1);
    ne[0] = 1;
    tensor(&b, "pad", EZ_TYPE_I8, 1, ne, &one, 1);
    ne[0] = 3;
    tensor(&b, "f", EZ_TYPE_F32, 1, ne, vals, sizeof vals); /* at an odd offset */
    f = b_finish(&b, &size, NULL);
    b_free(&b);
    CHECK_RC(ez_gguf_open_memory(f, size, &g), ELIZA_OK);
    if (g) {
        const ez_gguf_tensor *t = ez_gguf_find_tensor(g, "f");
        CHECK(g->alignment == 1);
        CHECK(t && t->offset == 1);
        if (t) CHECK_RC(ez_gguf_tensor_f32(t, &v), ELIZA_OK);
        CHECK(v && v[0] == 1.5f && v[1] == -2.0f && v[2] == 3.0f);
        free(v);
    }
    ez_gguf_close(g);
    free(f);
}

/* ---- tests: scale --------------------------------------------------------------------- */

static double now_s(void) { return (double)clock() / CLOCKS_PER_SEC; }

static void test_gguf_indexes_thousands_of_tensors(void) {
    enum { N = 6000 };
    builder b;
    uint8_t *f;
    size_t size;
    uint64_t ne[1] = {1};
    static const float one = 1.0f;
    ez_gguf *g = NULL;
    char name[64];
    int i;
    double t0;

    b_init(&b);
    for (i = 0; i < N; i++) {
        snprintf(name, sizeof name, "blk.%d.ffn_gate.weight", i);
        tensor(&b, name, EZ_TYPE_F32, 1, ne, &one, sizeof one);
    }
    f = b_finish(&b, &size, NULL);
    t0 = now_s();
    CHECK_RC(ez_gguf_open_memory(f, size, &g), ELIZA_OK);
    if (g) {
        int found = 0;
        for (i = 0; i < N; i++) {
            const ez_gguf_tensor *t;
            snprintf(name, sizeof name, "blk.%d.ffn_gate.weight", i);
            t = ez_gguf_find_tensor(g, name);
            found += t == &g->tensors[i];
        }
        CHECK(found == N);
        CHECK(ez_gguf_find_tensor(g, "blk.6000.ffn_gate.weight") == NULL);
    }
    printf("  %d tensors: open + %d lookups in %.3f s\n", N, N, now_s() - t0);
    ez_gguf_close(g);
    free(f);

    /* A duplicate among thousands is found. */
    snprintf(name, sizeof name, "blk.%d.ffn_gate.weight", 1234);
    tensor(&b, name, EZ_TYPE_F32, 1, ne, &one, sizeof one);
    f = b_finish(&b, &size, NULL);
    expect_fail(f, size, ELIZA_E_FORMAT, "'blk.1234.ffn_gate.weight' appears more than once",
                "duplicate among 6001");
    free(f);
    b_free(&b);
}

static void test_gguf_big_vocab_info_is_fast(void) {
    enum { N = 262144 };
    builder b;
    uint8_t *f;
    size_t size;
    ez_gguf *g = NULL;
    char tok[32];
    char *j = NULL;
    int i;
    double t0, t1;

    b_init(&b);
    kv_str(&b, "general.architecture", "gemma3", 6);
    arr_head(&b, "tokenizer.ggml.tokens", EZ_GGUF_STRING, N);
    for (i = 0; i < N; i++) {
        int n = snprintf(tok, sizeof tok, "tok%d", i);
        put_u64(&b.kv, (uint64_t)n);
        put(&b.kv, tok, (size_t)n);
    }
    arr_head(&b, "tokenizer.ggml.scores", EZ_GGUF_F32, N);
    for (i = 0; i < N; i++) put_f32(&b.kv, -(float)i);
    f = b_finish(&b, &size, NULL);
    b_free(&b);

    t0 = now_s();
    CHECK_RC(ez_gguf_open_memory(f, size, &g), ELIZA_OK);
    t1 = now_s();
    if (g) {
        CHECK_RC(ez_gguf_info_json(g, 8, 1, &j), ELIZA_OK);
        CHECK(j && strlen(j) < 1024);
        CHECK(j && strstr(j, "\"len\":262144,\"items\":[\"tok0\",") != NULL);
        /* Integral floats keep ".0" so that JSON readers see floats. */
        CHECK(j && strstr(j, "\"len\":262144,\"items\":[-0.0,-1.0,-2.0,") != NULL);
        free(j);
        j = NULL;
        printf("  262144-token vocab: open %.3f s, info (8 items) %.3f s\n", t1 - t0, now_s() - t1);
        t1 = now_s();
        CHECK_RC(ez_gguf_info_json(g, UINT32_MAX, 1, &j), ELIZA_OK);
        CHECK(j && json_valid(j) && strstr(j, "\"tok262143\"]") != NULL);
        printf("  262144-token vocab: full info %.3f s (%zu bytes)\n", now_s() - t1, j ? strlen(j) : 0);
        free(j);
    }
    ez_gguf_close(g);
    free(f);
}

/* ---- the mutant corpus --------------------------------------------------------------------- */

typedef struct {
    long ok, refused;
} tally;

static void count(tally *t, int32_t rc) {
    if (rc == ELIZA_OK) t->ok++;
    else t->refused++;
}

static void test_gguf_mutant_corpus_never_crashes(void) {
    mark marks[MAX_MARKS + 3];
    int n_marks, i, bit;
    size_t size, pos, n;
    uint8_t *ref = reference_file(&size, marks, &n_marks);
    uint8_t *m = (uint8_t *)malloc(size);
    tally t = {0, 0};
    uint32_t seed = 0x9E3779B9u;
    long truncations_ok = 0;
    static const uint64_t v64[] = {0, 1, 2, 3, 4, 7, 8, 31, 32, 33, 255, 0xFFFF, 0x7FFFFFFF,
                                   0x80000000u, 0xFFFFFFFFu, 1ull << 32, 1ull << 40,
                                   1ull << 62, 1ull << 63, UINT64_MAX - 7, UINT64_MAX};
    static const uint32_t v32[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                   24, 28, 30, 31, 36, 39, 40, 41, 42, 64, 255, 0xFFFF,
                                   0x7FFFFFFF, 0x80000000u, 0xFFFFFFFFu};
    double t0 = now_s();

    if (!m) {
        CHECK(0);
        free(ref);
        return;
    }
    /* Every truncation: all must fail (the file ends in tensor data). */
    for (n = 0; n < size; n++) {
        int32_t rc = open_copy(ref, n, 1);
        count(&t, rc);
        truncations_ok += rc == ELIZA_OK;
    }
    CHECK(truncations_ok == 0);
    CHECK(open_copy(ref, size, 1) == ELIZA_OK);

    /* Every bit of every byte, and each byte set to 0x00, 0x7F, 0x80, 0xFF. */
    for (pos = 0; pos < size; pos++) {
        static const uint8_t setv[] = {0x00, 0x7F, 0x80, 0xFF};
        for (bit = 0; bit < 8; bit++) {
            memcpy(m, ref, size);
            m[pos] ^= (uint8_t)(1u << bit);
            count(&t, open_copy(m, size, 1));
        }
        for (i = 0; i < 4; i++) {
            memcpy(m, ref, size);
            m[pos] = setv[i];
            count(&t, open_copy(m, size, 1));
        }
    }

    /* Every structural field set to boundary values and near its own value. */
    for (i = 0; i < n_marks; i++) {
        const mark *k = &marks[i];
        size_t j, nv = k->width == 8 ? sizeof v64 / sizeof v64[0] : sizeof v32 / sizeof v32[0];
        uint64_t orig = 0;
        int b8;
        for (b8 = 0; b8 < k->width; b8++) orig |= (uint64_t)ref[k->pos + b8] << (8 * b8);
        for (j = 0; j < nv + 6; j++) {
            uint64_t v;
            if (j < nv) v = k->width == 8 ? v64[j] : v32[j];
            else if (j == nv) v = orig + 1;
            else if (j == nv + 1) v = orig - 1;
            else if (j == nv + 2) v = orig * 2;
            else if (j == nv + 3) v = orig + 32;
            else if (j == nv + 4) v = (uint64_t)size - orig;
            else v = (uint64_t)size;
            memcpy(m, ref, size);
            for (b8 = 0; b8 < k->width; b8++) m[k->pos + b8] = (uint8_t)(v >> (8 * b8));
            count(&t, open_copy(m, size, 1));
        }
    }

    /* Random multi-byte damage, including spliced duplicates of regions. */
    for (i = 0; i < 4000; i++) {
        int edits, e;
        memcpy(m, ref, size);
        seed = seed * 1664525u + 1013904223u;
        edits = 1 + (int)((seed >> 16) % 8);
        for (e = 0; e < edits; e++) {
            size_t a, c, len;
            seed = seed * 1664525u + 1013904223u;
            a = (seed >> 8) % size;
            seed = seed * 1664525u + 1013904223u;
            if ((seed >> 28) < 12) {
                m[a] = (uint8_t)(seed >> 8);
            } else {
                c = (seed >> 4) % size;
                len = 1 + (seed >> 20) % 16;
                if (a + len > size) len = size - a;
                if (c + len > size) len = size - c;
                memmove(m + a, m + c, len);
            }
        }
        seed = seed * 1664525u + 1013904223u;
        count(&t, open_copy(m, (seed >> 30) ? size : (seed >> 8) % size, 1));
    }

    printf("  %ld mutants of a %zu-byte file: %ld opened, %ld refused (%.2f s)\n",
           t.ok + t.refused, size, t.ok, t.refused, now_s() - t0);
    CHECK(t.ok + t.refused > 5000);
    CHECK(t.refused > 1000);
    free(m);
    free(ref);
}

/* ---- seed corpus for the fuzzer (tests/fuzz/README.md) ----------------------------------- */

static int write_seed(const char *dir, const char *name, const uint8_t *f, size_t size) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!write_file(path, f, size)) {
        fprintf(stderr, "cannot write %s\n", path);
        return 0;
    }
    return 1;
}

static int write_corpus(const char *dir) {
    builder b;
    ref_opts o = {1, 3};
    uint8_t *f;
    size_t size;
    uint64_t ne[1] = {3};
    static const float vals[3] = {1, 2, 3};
    static const uint8_t one = 1;
    int ok = 1;

    build_reference(&b, o);
    f = b_finish(&b, &size, NULL);
    ok &= write_seed(dir, "reference_v3.gguf", f, size);
    free(f);
    b_free(&b);
    o.with_alignment_key = 0;
    o.version = 2;
    build_reference(&b, o);
    f = b_finish(&b, &size, NULL);
    ok &= write_seed(dir, "reference_v2.gguf", f, size);
    free(f);
    b_free(&b);

    b_init(&b);
    kv_u32(&b, "general.alignment", 1);
    kv_str(&b, "general.architecture", "llama", 5);
    kv_arr_strs(&b, "tokenizer.ggml.tokens", k_strs, 10);
    tensor(&b, "pad", EZ_TYPE_I8, 1, ne, &one, 1);
    tensor(&b, "f", EZ_TYPE_F32, 1, ne, vals, sizeof vals);
    f = b_finish(&b, &size, NULL);
    ok &= write_seed(dir, "alignment_1.gguf", f, size);
    free(f);
    b_free(&b);

    b_init(&b);
    f = b_finish(&b, &size, NULL);
    ok &= write_seed(dir, "empty.gguf", f, size);
    free(f);
    b_free(&b);
    return ok;
}

/* ---- main ------------------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    void (*fn)(void);
} test_case;

#define T(fn) {#fn, fn}

int main(int argc, char **argv) {
    static const test_case tests[] = {
        T(test_gguf_reference_file_parses),
        T(test_gguf_checked_and_optional_getters),
        T(test_gguf_f32_getters_refuse_non_finite_values),
        T(test_gguf_arr_int_reads_every_integer_width),
        T(test_gguf_version_2_and_default_alignment),
        T(test_gguf_dequantizes_known_types),
        T(test_gguf_info_json_document),
        T(test_gguf_public_api),
        T(test_gguf_rejects_bad_headers),
        T(test_gguf_rejects_bad_tensor_infos),
        T(test_gguf_rejects_bad_metadata),
        T(test_gguf_rejects_bad_names_and_duplicates),
        T(test_gguf_alignment_1_reads_unaligned_data),
        T(test_gguf_indexes_thousands_of_tensors),
        T(test_gguf_big_vocab_info_is_fast),
        T(test_gguf_mutant_corpus_never_crashes),
    };
    int passed = 0, failed = 0;
    size_t i;

    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) return write_corpus(argv[2]) ? 0 : 1;
    if (argc != 1) {
        fprintf(stderr, "usage: %s [--write-corpus DIR]\n", argv[0]);
        return 2;
    }

    for (i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        g_failed = 0;
        tests[i].fn();
        printf("%s %s\n", g_failed ? "FAIL" : "ok  ", tests[i].name);
        fflush(stdout);
        if (g_failed) failed++;
        else passed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
