/* GGUF v2/v3 reader. Layout (little-endian throughout):
 *
 *   "GGUF" u32 version u64 tensor_count u64 kv_count
 *   kv_count x   { string key, u32 type, value }
 *   tensor_count x { string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset }
 *   padding to general.alignment (default 32), then the data section;
 *   tensor offsets are relative to the data section.
 *
 * string = u64 length + bytes; array = u32 element type, u64 count, elements.
 *
 * Every length and count is checked against the bytes that remain before it
 * is used, so a corrupt count fails before anything proportional to it is
 * allocated. docs/gguf.md lists every rule. */
#include "gguf.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "quant.h"
#include "strbuf.h"

#define GGUF_DEFAULT_ALIGNMENT 32u
/* The spec caps keys at 65535 bytes; we hold tensor names to the same. */
#define GGUF_MAX_NAME 65535u
/* Index slots are 32-bit; no real file comes near this. */
#define GGUF_MAX_COUNT 0x7FFFFFFFu
/* Smallest encodings: key (8-byte length + 1 byte) + type (4) + a 1-byte
 * value; name (8 + 1) + n_dims (4) + one dim (8) + type (4) + offset (8). */
#define GGUF_MIN_KV_BYTES 14u
#define GGUF_MIN_TENSOR_BYTES 33u

/* ---- bounded little-endian reading ---------------------------------------- */

typedef struct {
    const uint8_t *base;
    uint64_t size, pos;
} reader;

static uint64_t left(const reader *r) { return r->size - r->pos; }

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p) {
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static int get_u32(reader *r, uint32_t *v) {
    if (left(r) < 4) return 0;
    *v = le32(r->base + r->pos);
    r->pos += 4;
    return 1;
}

static int get_u64(reader *r, uint64_t *v) {
    if (left(r) < 8) return 0;
    *v = le64(r->base + r->pos);
    r->pos += 8;
    return 1;
}

/* ---- names in messages ----------------------------------------------------- */

/* A printable excerpt of a key or name for an error message: at most 64
 * bytes, non-ASCII and control bytes as '?'. */
typedef struct { char s[72]; } shown;

static shown show(const char *s, size_t n) {
    shown out;
    size_t i, m = n > 64 ? 64 : n;
    for (i = 0; i < m; i++) {
        unsigned char c = (unsigned char)s[i];
        out.s[i] = (c >= 0x20 && c < 0x7F) ? (char)c : '?';
    }
    if (n > m) {
        memcpy(out.s + m, "...", 3);
        m += 3;
    }
    out.s[m] = '\0';
    return out;
}

static shown show_z(const char *s) { return show(s, strlen(s)); }

/* ---- name -> index hash table ---------------------------------------------- */

typedef struct {
    uint32_t *slots;   /* entry index + 1; 0 is empty */
    uint64_t mask;
} name_table;

typedef struct {
    name_table kv, tensors;
} gguf_index;

static uint64_t hash_name(const char *s, size_t n) {
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    size_t i;
    for (i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

static int table_init(name_table *t, uint64_t n) {
    uint64_t cap = 16;
    while (cap < 2 * n) cap *= 2; /* n <= GGUF_MAX_COUNT, so no overflow */
    if (cap > SIZE_MAX / sizeof(uint32_t)) return 0;
    t->slots = (uint32_t *)calloc((size_t)cap, sizeof(uint32_t));
    t->mask = cap - 1;
    return t->slots != NULL;
}

/* Names live in the first member of each entry (ez_gguf_kv.key,
 * ez_gguf_tensor.name); `stride` is the entry size. */
static const char *name_at(const void *entries, size_t stride, uint32_t i) {
    return *(char *const *)((const char *)entries + (size_t)i * stride);
}

/* The slot holding `name`, or the empty slot where it would go. */
static uint32_t *table_slot(const name_table *t, const void *entries, size_t stride,
                            const char *name) {
    uint64_t i = hash_name(name, strlen(name)) & t->mask;
    for (;;) {
        uint32_t *slot = &t->slots[i];
        if (*slot == 0 || strcmp(name_at(entries, stride, *slot - 1), name) == 0) return slot;
        i = (i + 1) & t->mask;
    }
}

/* Inserts entry `i`; returns 0 if an entry of the same name exists. */
static int table_insert(name_table *t, const void *entries, size_t stride, uint32_t i) {
    uint32_t *slot = table_slot(t, entries, stride, name_at(entries, stride, i));
    if (*slot) return 0;
    *slot = i + 1;
    return 1;
}

/* ---- value types ------------------------------------------------------------ */

/* Bytes of a fixed-size value type; 0 for STRING, ARRAY and unknown ids. */
static uint64_t vtype_size(uint32_t type) {
    switch (type) {
    case EZ_GGUF_U8: case EZ_GGUF_I8: case EZ_GGUF_BOOL: return 1;
    case EZ_GGUF_U16: case EZ_GGUF_I16: return 2;
    case EZ_GGUF_U32: case EZ_GGUF_I32: case EZ_GGUF_F32: return 4;
    case EZ_GGUF_U64: case EZ_GGUF_I64: case EZ_GGUF_F64: return 8;
    default: return 0;
    }
}

const char *ez_gguf_vtype_name(uint32_t type) {
    static const char *const names[] = {"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32",
                                        "FLOAT32", "BOOL", "STRING", "ARRAY", "UINT64",
                                        "INT64", "FLOAT64"};
    return type < sizeof names / sizeof names[0] ? names[type] : "UNKNOWN";
}

/* ---- parsing ---------------------------------------------------------------- */

/* Reads a string header and checks its bytes are there. `what` names the
 * string for the message ("key of metadata entry 3", "key 'x': string value"). */
static int32_t read_str(reader *r, ez_str *out, const char *what) {
    uint64_t at = r->pos, len;
    if (!get_u64(r, &len))
        return ez_fail(ELIZA_E_FORMAT, "%s: truncated string length at offset %" PRIu64
                       " (file is %" PRIu64 " bytes)", what, at, r->size);
    if (len > left(r))
        return ez_fail(ELIZA_E_FORMAT, "%s: string length %" PRIu64 " at offset %" PRIu64
                       " exceeds the %" PRIu64 " bytes left in the file", what, len, at, left(r));
    out->ptr = (const char *)(r->base + r->pos);
    out->len = len;
    r->pos += len;
    return ELIZA_OK;
}

/* Reads a key or tensor name into a NUL-terminated copy. */
static int32_t read_name(reader *r, char **out, const char *what) {
    ez_str s = {NULL, 0};
    int32_t rc = read_str(r, &s, what);
    if (rc) return rc;
    if (s.len == 0) return ez_fail(ELIZA_E_FORMAT, "%s is empty", what);
    if (s.len > GGUF_MAX_NAME)
        return ez_fail(ELIZA_E_FORMAT, "%s is %" PRIu64 " bytes long (at most %u allowed)", what,
                       s.len, GGUF_MAX_NAME);
    if (memchr(s.ptr, '\0', (size_t)s.len))
        return ez_fail(ELIZA_E_FORMAT, "%s '%s' contains a NUL byte", what,
                       show(s.ptr, (size_t)s.len).s);
    *out = (char *)malloc((size_t)s.len + 1);
    if (!*out) return ez_fail(ELIZA_E_NOMEM, "out of memory copying %s", what);
    memcpy(*out, s.ptr, (size_t)s.len);
    (*out)[s.len] = '\0';
    return ELIZA_OK;
}

/* Reads one fixed-size scalar of `type` at p into kv->v. */
static void load_scalar(ez_gguf_kv *kv, uint32_t type, const uint8_t *p) {
    uint32_t u32;
    uint64_t u64;
    float f32;
    double f64;

    switch (type) {
    case EZ_GGUF_U8: case EZ_GGUF_BOOL: kv->v.u = p[0]; break;
    case EZ_GGUF_I8: kv->v.i = (int8_t)p[0]; break;
    case EZ_GGUF_U16: kv->v.u = (uint16_t)(p[0] | p[1] << 8); break;
    case EZ_GGUF_I16: kv->v.i = (int16_t)(uint16_t)(p[0] | p[1] << 8); break;
    case EZ_GGUF_U32: kv->v.u = le32(p); break;
    case EZ_GGUF_I32: kv->v.i = (int32_t)le32(p); break;
    case EZ_GGUF_U64: kv->v.u = le64(p); break;
    case EZ_GGUF_I64: kv->v.i = (int64_t)le64(p); break;
    case EZ_GGUF_F32:
        u32 = le32(p);
        memcpy(&f32, &u32, 4);
        kv->v.f = f32;
        break;
    case EZ_GGUF_F64:
        u64 = le64(p);
        memcpy(&f64, &u64, 8);
        kv->v.f = f64;
        break;
    default: break;
    }
}

static int32_t parse_array(reader *r, ez_gguf_kv *kv, const char *key) {
    uint64_t at = r->pos, n, esize, bytes, i;

    if (!get_u32(r, &kv->arr_type) || !get_u64(r, &n))
        return ez_fail(ELIZA_E_FORMAT, "key '%s': truncated array header at offset %" PRIu64, key,
                       at);
    if (kv->arr_type == EZ_GGUF_ARRAY)
        return ez_fail(ELIZA_E_UNSUPPORTED, "key '%s': nested arrays are not supported", key);
    kv->arr_len = n;
    kv->arr_data = r->base + r->pos;

    if (kv->arr_type == EZ_GGUF_STRING) {
        /* Each element takes at least its 8-byte length. */
        if (n > left(r) / 8)
            return ez_fail(ELIZA_E_FORMAT, "key '%s': array of %" PRIu64 " strings cannot fit"
                           " in the %" PRIu64 " bytes left in the file", key, n, left(r));
        for (i = 0; i < n; i++) {
            uint64_t len, sat = r->pos;
            if (!get_u64(r, &len))
                return ez_fail(ELIZA_E_FORMAT, "key '%s': array of %" PRIu64 " strings is"
                               " truncated after %" PRIu64 " strings", key, n, i);
            if (len > left(r))
                return ez_fail(ELIZA_E_FORMAT, "key '%s': string %" PRIu64 " of %" PRIu64
                               " has length %" PRIu64 " at offset %" PRIu64 ", past the end"
                               " of the file (%" PRIu64 " bytes)", key, i, n, len, sat, r->size);
            r->pos += len;
        }
        return ELIZA_OK;
    }

    esize = vtype_size(kv->arr_type);
    if (esize == 0)
        return ez_fail(ELIZA_E_FORMAT, "key '%s': unknown array element type %u", key,
                       kv->arr_type);
    if (!ez_mul_u64(n, esize, &bytes) || bytes > left(r))
        return ez_fail(ELIZA_E_FORMAT, "key '%s': array of %" PRIu64 " %s exceeds the %" PRIu64
                       " bytes left in the file", key, n, ez_gguf_vtype_name(kv->arr_type),
                       left(r));
    if (kv->arr_type == EZ_GGUF_BOOL) {
        for (i = 0; i < n; i++) {
            if (kv->arr_data[i] > 1)
                return ez_fail(ELIZA_E_FORMAT, "key '%s': bool element %" PRIu64 " is %u"
                               " (not 0 or 1)", key, i, kv->arr_data[i]);
        }
    }
    r->pos += bytes;
    return ELIZA_OK;
}

static int32_t parse_kv(reader *r, ez_gguf_kv *kv, uint64_t idx, uint64_t n_kv) {
    char what[96];
    uint64_t at = r->pos, size;
    int32_t rc;
    shown k;

    snprintf(what, sizeof what, "key of metadata entry %" PRIu64 " of %" PRIu64, idx, n_kv);
    rc = read_name(r, &kv->key, what);
    if (rc) return rc;
    k = show_z(kv->key);
    if (!get_u32(r, &kv->type))
        return ez_fail(ELIZA_E_FORMAT, "key '%s': truncated value type (entry at offset %" PRIu64
                       ")", k.s, at);
    if (kv->type == EZ_GGUF_ARRAY) return parse_array(r, kv, k.s);
    if (kv->type == EZ_GGUF_STRING) {
        snprintf(what, sizeof what, "key '%s'", k.s);
        return read_str(r, &kv->v.s, what);
    }
    size = vtype_size(kv->type);
    if (size == 0) return ez_fail(ELIZA_E_FORMAT, "key '%s': unknown value type %u", k.s, kv->type);
    if (left(r) < size)
        return ez_fail(ELIZA_E_FORMAT, "key '%s': %s value truncated at offset %" PRIu64
                       " (file is %" PRIu64 " bytes)", k.s, ez_gguf_vtype_name(kv->type), r->pos,
                       r->size);
    load_scalar(kv, kv->type, r->base + r->pos);
    if (kv->type == EZ_GGUF_BOOL && kv->v.u > 1)
        return ez_fail(ELIZA_E_FORMAT, "key '%s': bool value is %" PRIu64 " (not 0 or 1)", k.s,
                       kv->v.u);
    r->pos += size;
    return ELIZA_OK;
}

static int32_t parse_tensor_info(reader *r, ez_gguf_tensor *t, uint64_t idx, uint64_t n_t,
                                 uint64_t alignment) {
    char what[96];
    const ez_type_traits *tr;
    uint64_t row_blocks, nbytes, n = 1, at = r->pos;
    uint32_t d;
    int32_t rc;
    shown nm;

    snprintf(what, sizeof what, "name of tensor %" PRIu64 " of %" PRIu64, idx, n_t);
    rc = read_name(r, &t->name, what);
    if (rc) return rc;
    nm = show_z(t->name);

    if (!get_u32(r, &t->n_dims))
        return ez_fail(ELIZA_E_FORMAT, "tensor '%s': truncated info (at offset %" PRIu64 ")",
                       nm.s, at);
    if (t->n_dims < 1 || t->n_dims > EZ_GGUF_MAX_DIMS)
        return ez_fail(ELIZA_E_FORMAT, "tensor '%s': %u dimensions (1 to %d supported)", nm.s,
                       t->n_dims, EZ_GGUF_MAX_DIMS);
    for (d = 0; d < EZ_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (d = 0; d < t->n_dims; d++) {
        if (!get_u64(r, &t->ne[d]))
            return ez_fail(ELIZA_E_FORMAT, "tensor '%s': truncated shape (at offset %" PRIu64
                           ")", nm.s, at);
        if (t->ne[d] == 0)
            return ez_fail(ELIZA_E_FORMAT, "tensor '%s': dimension %u is 0 (empty tensors are"
                           " refused)", nm.s, d);
        if (!ez_mul_u64(n, t->ne[d], &n) || n > (uint64_t)INT64_MAX)
            return ez_fail(ELIZA_E_FORMAT, "tensor '%s': element count overflows at dimension"
                           " %u (%" PRIu64 ")", nm.s, d, t->ne[d]);
    }
    t->n_elements = n;
    if (!get_u32(r, &t->type) || !get_u64(r, &t->offset))
        return ez_fail(ELIZA_E_FORMAT, "tensor '%s': truncated info (at offset %" PRIu64 ")",
                       nm.s, at);

    tr = ez_type_traits_of(t->type);
    if (!tr || tr->block_size == 0 || tr->type_size == 0)
        return ez_fail(ELIZA_E_FORMAT, "tensor '%s': unknown type id %u", nm.s, t->type);
    if (t->ne[0] % tr->block_size != 0)
        return ez_fail(ELIZA_E_FORMAT, "tensor '%s': row length %" PRIu64 " is not a multiple"
                       " of the %s block size %u", nm.s, t->ne[0], tr->name, tr->block_size);
    row_blocks = t->ne[0] / tr->block_size;
    /* n / ne[0] rows of row_blocks blocks each. */
    if (!ez_mul_u64(row_blocks, tr->type_size, &nbytes) ||
        !ez_mul_u64(nbytes, n / t->ne[0], &nbytes))
        return ez_fail(ELIZA_E_FORMAT, "tensor '%s': byte size overflows (%" PRIu64
                       " elements of %s)", nm.s, n, tr->name);
    t->nbytes = nbytes;
    if (t->offset % alignment != 0)
        return ez_fail(ELIZA_E_FORMAT, "tensor '%s': offset %" PRIu64 " is not a multiple of"
                       " the alignment %" PRIu64, nm.s, t->offset, alignment);
    return ELIZA_OK;
}

static void index_free(gguf_index *ix) {
    if (!ix) return;
    free(ix->kv.slots);
    free(ix->tensors.slots);
    free(ix);
}

static int32_t parse_alignment(ez_gguf *g) {
    const ez_gguf_kv *kv = ez_gguf_find_kv(g, "general.alignment");
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    if (!kv) return ELIZA_OK;
    if (kv->type != EZ_GGUF_U32)
        return ez_fail(ELIZA_E_FORMAT, "key 'general.alignment' has type %s (UINT32 expected)",
                       ez_gguf_vtype_name(kv->type));
    if (kv->v.u == 0 || (kv->v.u & (kv->v.u - 1)) != 0)
        return ez_fail(ELIZA_E_FORMAT, "key 'general.alignment' is %" PRIu64 " (a power of two"
                       " expected)", kv->v.u);
    g->alignment = kv->v.u;
    return ELIZA_OK;
}

static int32_t parse_header(reader *r, ez_gguf *g) {
    const uint8_t *p = r->base;
    uint64_t need_kv, need_t, need;

    if (r->size < 4)
        return ez_fail(ELIZA_E_FORMAT, "file is %" PRIu64 " bytes, too short for a GGUF header",
                       r->size);
    if (memcmp(p, "GGUF", 4) != 0)
        return ez_fail(ELIZA_E_FORMAT, "not a GGUF file: magic is %02x %02x %02x %02x"
                       " ('GGUF' expected)", p[0], p[1], p[2], p[3]);
    if (r->size < 8)
        return ez_fail(ELIZA_E_FORMAT, "file is %" PRIu64 " bytes, truncated inside the GGUF"
                       " header", r->size);
    g->version = le32(p + 4);
    if (g->version == 1)
        return ez_fail(ELIZA_E_UNSUPPORTED, "GGUF version 1 is not supported (versions 2 and 3"
                       " are); re-convert the model with a current converter");
    if ((g->version & 0xFFFFu) == 0 && (g->version >> 24) >= 1 && (g->version >> 24) <= 3)
        return ez_fail(ELIZA_E_UNSUPPORTED, "big-endian GGUF file (version field reads 0x%08x,"
                       " byte-swapped %u): only little-endian files are supported", g->version,
                       g->version >> 24);
    if (g->version == 0)
        return ez_fail(ELIZA_E_FORMAT, "GGUF version is 0");
    if (g->version > 3)
        return ez_fail(ELIZA_E_UNSUPPORTED, "GGUF version %u is newer than this reader"
                       " (versions 2 and 3)", g->version);
    if (r->size < 24)
        return ez_fail(ELIZA_E_FORMAT, "file is %" PRIu64 " bytes, shorter than the 24-byte"
                       " GGUF header", r->size);
    r->pos = 8;
    get_u64(r, &g->n_tensors);
    get_u64(r, &g->n_kv);

    /* Counts against the bytes that remain, before any allocation. */
    if (g->n_kv > GGUF_MAX_COUNT || g->n_tensors > GGUF_MAX_COUNT)
        return ez_fail(ELIZA_E_FORMAT, "header counts %" PRIu64 " tensors and %" PRIu64
                       " metadata entries (at most %u each supported)", g->n_tensors, g->n_kv,
                       GGUF_MAX_COUNT);
    need_kv = g->n_kv * GGUF_MIN_KV_BYTES;
    need_t = g->n_tensors * GGUF_MIN_TENSOR_BYTES;
    need = need_kv + need_t; /* each < 2^37: no overflow */
    if (need > left(r))
        return ez_fail(ELIZA_E_FORMAT, "header counts %" PRIu64 " metadata entries and %" PRIu64
                       " tensors, which need at least %" PRIu64 " bytes, but only %" PRIu64
                       " bytes follow the header", g->n_kv, g->n_tensors, need, left(r));
    return ELIZA_OK;
}

static int32_t parse(const uint8_t *data, uint64_t size, ez_gguf **out) {
    reader r;
    ez_gguf *g;
    gguf_index *ix;
    uint64_t i;
    int32_t rc;

    r.base = data;
    r.size = size;
    r.pos = 0;
    *out = NULL;
    g = (ez_gguf *)calloc(1, sizeof *g);
    if (!g) return ez_fail(ELIZA_E_NOMEM, "out of memory opening a GGUF file");
    g->base = data;
    g->size = size;
    g->alignment = GGUF_DEFAULT_ALIGNMENT;

    rc = parse_header(&r, g);
    if (rc) goto fail;
    /* The counts are bounded by the file size here, so these are too. */
    ix = (gguf_index *)calloc(1, sizeof *ix);
    g->index = ix;
    g->kv = (ez_gguf_kv *)calloc((size_t)(g->n_kv ? g->n_kv : 1), sizeof *g->kv);
    g->tensors = (ez_gguf_tensor *)calloc((size_t)(g->n_tensors ? g->n_tensors : 1),
                                          sizeof *g->tensors);
    if (!ix || !g->kv || !g->tensors || !table_init(&ix->kv, g->n_kv) ||
        !table_init(&ix->tensors, g->n_tensors)) {
        rc = ez_fail(ELIZA_E_NOMEM, "out of memory indexing %" PRIu64 " metadata entries and %"
                     PRIu64 " tensors", g->n_kv, g->n_tensors);
        goto fail;
    }

    for (i = 0; i < g->n_kv; i++) {
        rc = parse_kv(&r, &g->kv[i], i, g->n_kv);
        if (rc) goto fail;
        if (!table_insert(&ix->kv, g->kv, sizeof *g->kv, (uint32_t)i)) {
            rc = ez_fail(ELIZA_E_FORMAT, "key '%s' appears more than once",
                         show_z(g->kv[i].key).s);
            goto fail;
        }
    }
    rc = parse_alignment(g);
    if (rc) goto fail;

    for (i = 0; i < g->n_tensors; i++) {
        rc = parse_tensor_info(&r, &g->tensors[i], i, g->n_tensors, g->alignment);
        if (rc) goto fail;
        if (!table_insert(&ix->tensors, g->tensors, sizeof *g->tensors, (uint32_t)i)) {
            rc = ez_fail(ELIZA_E_FORMAT, "tensor '%s' appears more than once",
                         show_z(g->tensors[i].name).s);
            goto fail;
        }
    }

    /* The data section starts at the next multiple of the alignment. */
    g->data_offset = (r.pos + (g->alignment - 1)) & ~(g->alignment - 1);
    if (g->data_offset < r.pos) {
        rc = ez_fail(ELIZA_E_FORMAT, "data section offset overflows (alignment %" PRIu64 ")",
                     g->alignment);
        goto fail;
    }
    for (i = 0; i < g->n_tensors; i++) {
        ez_gguf_tensor *t = &g->tensors[i];
        uint64_t start, end;
        if (!ez_add_u64(g->data_offset, t->offset, &start) ||
            !ez_add_u64(start, t->nbytes, &end)) {
            rc = ez_fail(ELIZA_E_FORMAT, "tensor '%s': offset %" PRIu64 " + %" PRIu64 " bytes"
                         " overflows", show_z(t->name).s, t->offset, t->nbytes);
            goto fail;
        }
        if (end > size) {
            rc = ez_fail(ELIZA_E_FORMAT, "tensor '%s': data ends at %" PRIu64 " past the end of"
                         " the file (%" PRIu64 " bytes)", show_z(t->name).s, end, size);
            goto fail;
        }
        t->data = data + start;
    }
    *out = g;
    return ELIZA_OK;

fail:
    ez_gguf_close(g);
    return rc;
}

/* ---- public ---------------------------------------------------------------- */

int32_t ez_gguf_open_memory(const void *data, uint64_t size, ez_gguf **out) {
    if (!out) return ez_fail(ELIZA_E_INVALID_ARG, "out is NULL");
    *out = NULL;
    if (!data && size) return ez_fail(ELIZA_E_INVALID_ARG, "data is NULL");
    return parse((const uint8_t *)data, data ? size : 0, out);
}

int32_t ez_gguf_open(const char *path, ez_gguf **out) {
    ez_mapped_file map;
    char msg[512];
    int32_t rc;

    if (!out) return ez_fail(ELIZA_E_INVALID_ARG, "out is NULL");
    *out = NULL;
    rc = ez_map_file(path, &map);
    if (rc) return rc;
    rc = parse(map.data, map.data ? map.size : 0, out);
    if (rc) {
        /* Say which file: the parser only knows offsets. */
        snprintf(msg, sizeof msg, "%s", ez_error_message());
        ez_unmap_file(&map);
        return ez_fail(rc, "%s: %s", path, msg);
    }
    (*out)->map = map;
    return ELIZA_OK;
}

void ez_gguf_close(ez_gguf *g) {
    uint64_t i;
    if (!g) return;
    if (g->kv)
        for (i = 0; i < g->n_kv; i++) free(g->kv[i].key);
    if (g->tensors)
        for (i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    index_free((gguf_index *)g->index);
    if (g->map.data) ez_unmap_file(&g->map);
    free(g);
}

const ez_gguf_kv *ez_gguf_find_kv(const ez_gguf *g, const char *key) {
    const gguf_index *ix;
    const uint32_t *slot;
    if (!g || !key || !g->index) return NULL;
    ix = (const gguf_index *)g->index;
    slot = table_slot(&ix->kv, g->kv, sizeof *g->kv, key);
    return *slot ? &g->kv[*slot - 1] : NULL;
}

const ez_gguf_tensor *ez_gguf_find_tensor(const ez_gguf *g, const char *name) {
    const gguf_index *ix;
    const uint32_t *slot;
    if (!g || !name || !g->index) return NULL;
    ix = (const gguf_index *)g->index;
    slot = table_slot(&ix->tensors, g->tensors, sizeof *g->tensors, name);
    return *slot ? &g->tensors[*slot - 1] : NULL;
}

/* ---- typed getters ------------------------------------------------------------ */

static int is_signed(uint32_t t) {
    return t == EZ_GGUF_I8 || t == EZ_GGUF_I16 || t == EZ_GGUF_I32 || t == EZ_GGUF_I64;
}

static int is_unsigned(uint32_t t) {
    return t == EZ_GGUF_U8 || t == EZ_GGUF_U16 || t == EZ_GGUF_U32 || t == EZ_GGUF_U64;
}

static int32_t find_or_fail(const ez_gguf *g, const char *key, const ez_gguf_kv **kv) {
    *kv = ez_gguf_find_kv(g, key);
    if (!*kv) return ez_fail(ELIZA_E_NOT_FOUND, "key '%s' not found", key ? key : "(null)");
    return ELIZA_OK;
}

static int32_t wrong_type(const ez_gguf_kv *kv, const char *wanted) {
    if (kv->type == EZ_GGUF_ARRAY)
        return ez_fail(ELIZA_E_FORMAT, "key '%s' is an array of %s (%s expected)",
                       show_z(kv->key).s, ez_gguf_vtype_name(kv->arr_type), wanted);
    return ez_fail(ELIZA_E_FORMAT, "key '%s' has type %s (%s expected)", show_z(kv->key).s,
                   ez_gguf_vtype_name(kv->type), wanted);
}

/* An integer value that fits in [0, max]. */
static int32_t get_uint(const ez_gguf *g, const char *key, uint64_t max, const char *wanted,
                        uint64_t *out) {
    const ez_gguf_kv *kv;
    int32_t rc = find_or_fail(g, key, &kv);
    if (rc) return rc;
    if (is_unsigned(kv->type)) {
        if (kv->v.u > max)
            return ez_fail(ELIZA_E_FORMAT, "key '%s' is %" PRIu64 ", out of range for %s",
                           show_z(kv->key).s, kv->v.u, wanted);
        *out = kv->v.u;
    } else if (is_signed(kv->type)) {
        if (kv->v.i < 0 || (uint64_t)kv->v.i > max)
            return ez_fail(ELIZA_E_FORMAT, "key '%s' is %" PRId64 ", out of range for %s",
                           show_z(kv->key).s, kv->v.i, wanted);
        *out = (uint64_t)kv->v.i;
    } else {
        return wrong_type(kv, wanted);
    }
    return ELIZA_OK;
}

int32_t ez_gguf_get_u32(const ez_gguf *g, const char *key, uint32_t *out) {
    uint64_t v = 0;
    int32_t rc = get_uint(g, key, UINT32_MAX, "UINT32", &v);
    if (rc) return rc;
    *out = (uint32_t)v;
    return ELIZA_OK;
}

int32_t ez_gguf_get_u64(const ez_gguf *g, const char *key, uint64_t *out) {
    return get_uint(g, key, UINT64_MAX, "UINT64", out);
}

int32_t ez_gguf_get_f32(const ez_gguf *g, const char *key, float *out) {
    const ez_gguf_kv *kv;
    int32_t rc = find_or_fail(g, key, &kv);
    if (rc) return rc;
    /* F64 narrows with rounding; integers only when exactly representable. */
    if (kv->type == EZ_GGUF_F32 || kv->type == EZ_GGUF_F64) {
        if (kv->type == EZ_GGUF_F64 && isfinite(kv->v.f) && fabs(kv->v.f) > FLT_MAX)
            return ez_fail(ELIZA_E_FORMAT, "key '%s' is %g, out of range for FLOAT32",
                           show_z(kv->key).s, kv->v.f);
        *out = (float)kv->v.f;
    } else if (is_unsigned(kv->type) && kv->v.u <= (1u << 24)) {
        *out = (float)kv->v.u;
    } else if (is_signed(kv->type) && kv->v.i >= -(1 << 24) && kv->v.i <= (1 << 24)) {
        *out = (float)kv->v.i;
    } else {
        return wrong_type(kv, "FLOAT32");
    }
    return ELIZA_OK;
}

int32_t ez_gguf_get_bool(const ez_gguf *g, const char *key, int *out) {
    const ez_gguf_kv *kv;
    int32_t rc = find_or_fail(g, key, &kv);
    if (rc) return rc;
    if (kv->type != EZ_GGUF_BOOL) return wrong_type(kv, "BOOL");
    *out = kv->v.u != 0;
    return ELIZA_OK;
}

int32_t ez_gguf_get_str(const ez_gguf *g, const char *key, ez_str *out) {
    const ez_gguf_kv *kv;
    int32_t rc = find_or_fail(g, key, &kv);
    if (rc) return rc;
    if (kv->type != EZ_GGUF_STRING) return wrong_type(kv, "STRING");
    *out = kv->v.s;
    return ELIZA_OK;
}

int32_t ez_gguf_get_arr(const ez_gguf *g, const char *key, uint32_t elem_type,
                        const ez_gguf_kv **out) {
    const ez_gguf_kv *kv;
    int32_t rc = find_or_fail(g, key, &kv);
    if (rc) return rc;
    if (kv->type != EZ_GGUF_ARRAY || kv->arr_type != elem_type) {
        char wanted[32];
        snprintf(wanted, sizeof wanted, "an array of %s", ez_gguf_vtype_name(elem_type));
        return wrong_type(kv, wanted);
    }
    *out = kv;
    return ELIZA_OK;
}

/* ---- checked metadata ----------------------------------------------------------- */

static int32_t missing(const char *key) {
    return ez_fail(ELIZA_E_FORMAT, "metadata key '%s' is missing", key ? key : "(null)");
}

int32_t ez_gguf_need_u32(const ez_gguf *g, const char *key, uint32_t lo, uint32_t hi, uint32_t *out) {
    uint32_t v = 0;
    int32_t rc;
    if (!ez_gguf_find_kv(g, key)) return missing(key);
    if ((rc = ez_gguf_get_u32(g, key, &v))) return rc;
    if (v < lo || v > hi)
        return ez_fail(ELIZA_E_FORMAT, "metadata '%s' = %" PRIu32 " is outside [%" PRIu32 ", %" PRIu32 "]", key, v,
                       lo, hi);
    *out = v;
    return ELIZA_OK;
}

int32_t ez_gguf_opt_u32(const ez_gguf *g, const char *key, uint32_t lo, uint32_t hi, uint32_t *out) {
    return ez_gguf_find_kv(g, key) ? ez_gguf_need_u32(g, key, lo, hi, out) : ELIZA_OK;
}

int32_t ez_gguf_need_f32(const ez_gguf *g, const char *key, float lo, float hi, float *out) {
    float v = 0.0f;
    int32_t rc;
    if (!ez_gguf_find_kv(g, key)) return missing(key);
    if ((rc = ez_gguf_get_f32(g, key, &v))) return rc;
    if (!isfinite(v)) return ez_fail(ELIZA_E_FORMAT, "metadata '%s' = %g is not a finite number", key, (double)v);
    if (v < lo || v > hi)
        return ez_fail(ELIZA_E_FORMAT, "metadata '%s' = %g is outside [%g, %g]", key, (double)v, (double)lo,
                       (double)hi);
    *out = v;
    return ELIZA_OK;
}

int32_t ez_gguf_opt_f32(const ez_gguf *g, const char *key, float lo, float hi, float *out) {
    return ez_gguf_find_kv(g, key) ? ez_gguf_need_f32(g, key, lo, hi, out) : ELIZA_OK;
}

int32_t ez_gguf_need_bool(const ez_gguf *g, const char *key, int *out) {
    return ez_gguf_find_kv(g, key) ? ez_gguf_get_bool(g, key, out) : missing(key);
}

int32_t ez_gguf_opt_bool(const ez_gguf *g, const char *key, int *out) {
    return ez_gguf_find_kv(g, key) ? ez_gguf_get_bool(g, key, out) : ELIZA_OK;
}

int32_t ez_gguf_need_str(const ez_gguf *g, const char *key, ez_str *out) {
    return ez_gguf_find_kv(g, key) ? ez_gguf_get_str(g, key, out) : missing(key);
}

int32_t ez_gguf_opt_str(const ez_gguf *g, const char *key, ez_str *out) {
    return ez_gguf_find_kv(g, key) ? ez_gguf_get_str(g, key, out) : ELIZA_OK;
}

int32_t ez_gguf_need_arr(const ez_gguf *g, const char *key, uint32_t elem_type, const ez_gguf_kv **out) {
    return ez_gguf_find_kv(g, key) ? ez_gguf_get_arr(g, key, elem_type, out) : missing(key);
}

int32_t ez_gguf_opt_arr(const ez_gguf *g, const char *key, uint32_t elem_type, const ez_gguf_kv **out) {
    *out = NULL;
    return ez_gguf_find_kv(g, key) ? ez_gguf_get_arr(g, key, elem_type, out) : ELIZA_OK;
}

int32_t ez_gguf_arr_int(const ez_gguf_kv *kv, uint64_t i, int64_t *out) {
    const uint8_t *p;
    uint64_t u;
    if (!kv || kv->type != EZ_GGUF_ARRAY)
        return ez_fail(ELIZA_E_INVALID_ARG, "key '%s' is not an array", kv ? show_z(kv->key).s : "(null)");
    if (kv->arr_type != EZ_GGUF_BOOL && !is_signed(kv->arr_type) && !is_unsigned(kv->arr_type))
        return wrong_type(kv, "integers or bools");
    if (i >= kv->arr_len)
        return ez_fail(ELIZA_E_INVALID_ARG, "key '%s': element %" PRIu64 " of %" PRIu64, show_z(kv->key).s, i,
                       kv->arr_len);
    /* Validated at open: the elements are in the file. */
    p = kv->arr_data + i * vtype_size(kv->arr_type);
    switch (kv->arr_type) {
    case EZ_GGUF_BOOL: *out = p[0] != 0; break;
    case EZ_GGUF_U8: *out = p[0]; break;
    case EZ_GGUF_I8: *out = (int8_t)p[0]; break;
    case EZ_GGUF_U16: *out = (uint16_t)(p[0] | p[1] << 8); break;
    case EZ_GGUF_I16: *out = (int16_t)(uint16_t)(p[0] | p[1] << 8); break;
    case EZ_GGUF_U32: *out = le32(p); break;
    case EZ_GGUF_I32: *out = (int32_t)le32(p); break;
    case EZ_GGUF_I64: *out = (int64_t)le64(p); break;
    default: /* U64 */
        u = le64(p);
        if (u > (uint64_t)INT64_MAX)
            return ez_fail(ELIZA_E_FORMAT, "key '%s': element %" PRIu64 " is %" PRIu64 ", past INT64_MAX",
                           show_z(kv->key).s, i, u);
        *out = (int64_t)u;
    }
    return ELIZA_OK;
}

int32_t ez_gguf_arr_strings(const ez_gguf_kv *kv, ez_str **out) {
    const uint8_t *p;
    ez_str *tab;
    uint64_t i;

    *out = NULL;
    if (!kv || kv->type != EZ_GGUF_ARRAY || kv->arr_type != EZ_GGUF_STRING)
        return ez_fail(ELIZA_E_INVALID_ARG, "key '%s' is not an array of strings",
                       kv ? show_z(kv->key).s : "(null)");
    if (kv->arr_len > SIZE_MAX / sizeof *tab)
        return ez_fail(ELIZA_E_NOMEM, "key '%s': %" PRIu64 " strings do not fit in memory",
                       show_z(kv->key).s, kv->arr_len);
    tab = (ez_str *)malloc((size_t)(kv->arr_len ? kv->arr_len : 1) * sizeof *tab);
    if (!tab)
        return ez_fail(ELIZA_E_NOMEM, "out of memory listing the %" PRIu64 " strings of key '%s'",
                       kv->arr_len, show_z(kv->key).s);
    /* Validated at open: every length and its bytes are in the file. */
    p = kv->arr_data;
    for (i = 0; i < kv->arr_len; i++) {
        uint64_t len = le64(p);
        tab[i].ptr = (const char *)(p + 8);
        tab[i].len = len;
        p += 8 + len;
    }
    *out = tab;
    return ELIZA_OK;
}

/* ---- the info document ---------------------------------------------------------- */

/* Appends a scalar (widened at open) as JSON. */
static void json_scalar(ez_strbuf *sb, uint32_t type, const ez_gguf_kv *kv) {
    switch (type) {
    case EZ_GGUF_BOOL: ez_sb_puts(sb, kv->v.u ? "true" : "false"); break;
    case EZ_GGUF_U8: case EZ_GGUF_U16: case EZ_GGUF_U32: case EZ_GGUF_U64:
        ez_sb_printf(sb, "%" PRIu64, kv->v.u);
        break;
    case EZ_GGUF_I8: case EZ_GGUF_I16: case EZ_GGUF_I32: case EZ_GGUF_I64:
        ez_sb_printf(sb, "%" PRId64, kv->v.i);
        break;
    case EZ_GGUF_F32: ez_sb_json_f32(sb, (float)kv->v.f); break;
    case EZ_GGUF_F64: ez_sb_json_num(sb, kv->v.f); break;
    default: ez_sb_puts(sb, "null"); break;
    }
}

static void json_name(ez_strbuf *sb, const char *s) { ez_sb_json_str(sb, s, strlen(s)); }

static void json_value(ez_strbuf *sb, const ez_gguf_kv *kv, uint64_t max_items) {
    uint64_t i, n, es;
    const uint8_t *p;

    if (kv->type == EZ_GGUF_STRING) {
        ez_sb_json_str(sb, kv->v.s.ptr, (size_t)kv->v.s.len);
        return;
    }
    if (kv->type != EZ_GGUF_ARRAY) {
        json_scalar(sb, kv->type, kv);
        return;
    }

    /* Every array, short or long, is {"type", "len", "items"}: items holds
     * the first min(len, max_items) elements. */
    n = EZ_MIN(kv->arr_len, max_items);
    ez_sb_puts(sb, "{\"type\":");
    json_name(sb, ez_gguf_vtype_name(kv->arr_type));
    ez_sb_printf(sb, ",\"len\":%" PRIu64 ",\"items\":[", kv->arr_len);
    p = kv->arr_data;
    if (kv->arr_type == EZ_GGUF_STRING) {
        for (i = 0; i < n; i++) {
            uint64_t len = le64(p); /* validated at open */
            if (i) ez_sb_append(sb, ",", 1);
            ez_sb_json_str(sb, (const char *)(p + 8), (size_t)len);
            p += 8 + len;
        }
    } else {
        ez_gguf_kv item;
        es = vtype_size(kv->arr_type);
        for (i = 0; i < n; i++) {
            if (i) ez_sb_append(sb, ",", 1);
            load_scalar(&item, kv->arr_type, p + i * es);
            json_scalar(sb, kv->arr_type, &item);
        }
    }
    ez_sb_puts(sb, "]}");
}

int32_t ez_gguf_info_json(const ez_gguf *g, uint64_t max_array_items, int include_tensors,
                          char **out) {
    ez_strbuf sb = {0};
    const ez_gguf_kv *arch;
    uint64_t i;
    uint32_t d;

    ez_sb_printf(&sb, "{\"version\":%u,\"alignment\":%" PRIu64 ",\"data_offset\":%" PRIu64
                 ",\"file_size\":%" PRIu64 ",\"architecture\":", g->version, g->alignment,
                 g->data_offset, g->size);
    arch = ez_gguf_find_kv(g, "general.architecture");
    if (arch && arch->type == EZ_GGUF_STRING)
        ez_sb_json_str(&sb, arch->v.s.ptr, (size_t)arch->v.s.len);
    else
        ez_sb_puts(&sb, "null");

    ez_sb_puts(&sb, ",\"metadata\":{");
    for (i = 0; i < g->n_kv; i++) {
        if (i) ez_sb_append(&sb, ",", 1);
        json_name(&sb, g->kv[i].key);
        ez_sb_append(&sb, ":", 1);
        json_value(&sb, &g->kv[i], max_array_items);
    }
    ez_sb_puts(&sb, "},\"metadata_types\":{");
    for (i = 0; i < g->n_kv; i++) {
        if (i) ez_sb_append(&sb, ",", 1);
        json_name(&sb, g->kv[i].key);
        if (g->kv[i].type == EZ_GGUF_ARRAY)
            ez_sb_printf(&sb, ":\"ARRAY[%s]\"", ez_gguf_vtype_name(g->kv[i].arr_type));
        else
            ez_sb_printf(&sb, ":\"%s\"", ez_gguf_vtype_name(g->kv[i].type));
    }
    ez_sb_printf(&sb, "},\"tensor_count\":%" PRIu64, g->n_tensors);

    if (include_tensors) {
        ez_sb_puts(&sb, ",\"tensors\":[");
        for (i = 0; i < g->n_tensors; i++) {
            const ez_gguf_tensor *t = &g->tensors[i];
            const ez_type_traits *tr = ez_type_traits_of(t->type); /* non-NULL: checked at open */
            if (i) ez_sb_append(&sb, ",", 1);
            ez_sb_puts(&sb, "{\"name\":");
            json_name(&sb, t->name);
            ez_sb_puts(&sb, ",\"type\":");
            json_name(&sb, tr && tr->name ? tr->name : "UNKNOWN");
            ez_sb_printf(&sb, ",\"type_id\":%u,\"shape\":[", t->type);
            for (d = 0; d < t->n_dims; d++)
                ez_sb_printf(&sb, "%s%" PRIu64, d ? "," : "", t->ne[d]);
            ez_sb_printf(&sb, "],\"offset\":%" PRIu64 ",\"nbytes\":%" PRIu64 "}", t->offset,
                         t->nbytes);
        }
        ez_sb_puts(&sb, "]");
    }
    ez_sb_puts(&sb, "}");

    *out = ez_sb_take(&sb);
    if (!*out) return ez_fail(ELIZA_E_NOMEM, "out of memory building the GGUF info document");
    return ELIZA_OK;
}

/* ---- dequantization ------------------------------------------------------------- */

int32_t ez_gguf_tensor_f32(const ez_gguf_tensor *t, float **out) {
    const ez_type_traits *tr = ez_type_traits_of(t->type);
    const ez_type_kernels *k = tr ? ez_kernels(t->type) : NULL;
    float *dst = NULL;
    uint8_t *scratch = NULL;
    uint64_t rows, row_bytes, r, need_align;
    int32_t rc = ELIZA_OK;
    shown nm = show_z(t->name);

    *out = NULL;
    if (!tr || !tr->has_kernels || !k || !k->dequant)
        return ez_fail(ELIZA_E_UNSUPPORTED, "tensor '%s' has type %s, which this build cannot"
                       " dequantize", nm.s, tr && tr->name ? tr->name : "(unknown)");
    if (t->n_elements > SIZE_MAX / sizeof(float))
        return ez_fail(ELIZA_E_NOMEM, "tensor '%s': %" PRIu64 " floats do not fit in memory",
                       nm.s, t->n_elements);
    dst = (float *)malloc((size_t)t->n_elements * sizeof(float));
    if (!dst) {
        rc = ez_fail(ELIZA_E_NOMEM, "tensor '%s': cannot allocate %" PRIu64 " floats", nm.s,
                     t->n_elements);
        goto done;
    }

    rows = t->n_elements / t->ne[0];
    row_bytes = t->nbytes / rows;
    /* Kernels load whole elements and blocks. A row not at its block's
     * natural alignment (general.alignment below 8, Q6_K rows of 210 bytes
     * after an odd row, a caller's unaligned buffer) is copied first. */
    need_align = tr->type_size & (~(uint64_t)tr->type_size + 1);
    if (need_align > 8) need_align = 8;
    for (r = 0; r < rows; r++) {
        const uint8_t *src = t->data + r * row_bytes;
        if ((uintptr_t)src % need_align != 0) {
            if (!scratch) scratch = (uint8_t *)malloc((size_t)row_bytes);
            if (!scratch) {
                rc = ez_fail(ELIZA_E_NOMEM, "tensor '%s': cannot allocate a %" PRIu64
                             "-byte row", nm.s, row_bytes);
                goto done;
            }
            memcpy(scratch, src, (size_t)row_bytes);
            src = scratch;
        }
        k->dequant(src, dst + r * t->ne[0], (int64_t)t->ne[0]);
    }
    *out = dst;
    dst = NULL;

done:
    free(scratch);
    free(dst);
    return rc;
}
