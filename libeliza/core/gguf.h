/* GGUF v2/v3 reader over a read-only memory mapping.
 *
 * ez_gguf_open() validates everything before anything is used: magic,
 * version (v1 and big-endian files are refused with a message), counts
 * against the bytes that remain, every string and array length, value
 * types, key and tensor-name uniqueness, general.alignment (a power of two),
 * tensor dimension counts, element counts (overflow-checked), types (known
 * GGML ids whose block size divides the row), offsets (aligned) and extents
 * (inside the file). Afterwards every pointer it hands out is in bounds.
 * Keys and names are NUL-terminated copies; string values point into the
 * mapping and are not NUL-terminated. */
#ifndef EZ_GGUF_H
#define EZ_GGUF_H

#include "common.h"
#include "platform.h"

typedef enum {
    EZ_GGUF_U8 = 0, EZ_GGUF_I8 = 1, EZ_GGUF_U16 = 2, EZ_GGUF_I16 = 3,
    EZ_GGUF_U32 = 4, EZ_GGUF_I32 = 5, EZ_GGUF_F32 = 6, EZ_GGUF_BOOL = 7,
    EZ_GGUF_STRING = 8, EZ_GGUF_ARRAY = 9, EZ_GGUF_U64 = 10, EZ_GGUF_I64 = 11,
    EZ_GGUF_F64 = 12
} ez_gguf_vtype;

#define EZ_GGUF_MAX_DIMS 4

typedef struct { const char *ptr; uint64_t len; } ez_str; /* not NUL-terminated */

typedef struct {
    char *key;
    uint32_t type;            /* ez_gguf_vtype */
    uint32_t arr_type;        /* element type when type == ARRAY (never ARRAY) */
    uint64_t arr_len;         /* elements when type == ARRAY */
    const uint8_t *arr_data;  /* first element, in the mapping */
    union {
        uint64_t u;           /* unsigned ints and bool, widened */
        int64_t i;            /* signed ints, widened */
        double f;             /* F32 / F64, widened */
        ez_str s;             /* STRING */
    } v;
} ez_gguf_kv;

typedef struct {
    char *name;
    uint32_t type;                     /* GGML type id (ez_type) */
    uint32_t n_dims;                   /* 1..EZ_GGUF_MAX_DIMS */
    uint64_t ne[EZ_GGUF_MAX_DIMS];     /* innermost first; unused dims are 1 */
    uint64_t n_elements;
    uint64_t offset;                   /* from the start of the data section */
    uint64_t nbytes;
    const uint8_t *data;               /* in the mapping */
} ez_gguf_tensor;

typedef struct ez_gguf {
    ez_mapped_file map;       /* unused (data NULL) for ez_gguf_open_memory */
    const uint8_t *base;
    uint64_t size;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;     /* start of the tensor data section */
    uint64_t n_kv;
    ez_gguf_kv *kv;
    uint64_t n_tensors;
    ez_gguf_tensor *tensors;
    void *index;              /* name -> tensor lookup, private to gguf.c */
} ez_gguf;

/* Opens and validates `path`. ELIZA_E_IO / ELIZA_E_FORMAT / ELIZA_E_NOMEM,
 * with a message naming the offending key, tensor, offset or count. */
EZ_INTERNAL int32_t ez_gguf_open(const char *path, ez_gguf **out);

/* The same over a caller-owned buffer that must outlive the result (tests
 * and the fuzzer). */
EZ_INTERNAL int32_t ez_gguf_open_memory(const void *data, uint64_t size, ez_gguf **out);

EZ_INTERNAL void ez_gguf_close(ez_gguf *g);

/* NULL when absent. */
EZ_INTERNAL const ez_gguf_kv *ez_gguf_find_kv(const ez_gguf *g, const char *key);
EZ_INTERNAL const ez_gguf_tensor *ez_gguf_find_tensor(const ez_gguf *g, const char *name);

/* Typed getters: ELIZA_E_NOT_FOUND when absent, ELIZA_E_FORMAT (naming the
 * key) when the stored type does not convert without loss. */
EZ_INTERNAL int32_t ez_gguf_get_u32(const ez_gguf *g, const char *key, uint32_t *out);
EZ_INTERNAL int32_t ez_gguf_get_u64(const ez_gguf *g, const char *key, uint64_t *out);
EZ_INTERNAL int32_t ez_gguf_get_f32(const ez_gguf *g, const char *key, float *out);
EZ_INTERNAL int32_t ez_gguf_get_bool(const ez_gguf *g, const char *key, int *out);
EZ_INTERNAL int32_t ez_gguf_get_str(const ez_gguf *g, const char *key, ez_str *out);
/* An array whose elements are `elem_type`. */
EZ_INTERNAL int32_t ez_gguf_get_arr(const ez_gguf *g, const char *key, uint32_t elem_type,
                                    const ez_gguf_kv **out);
/* Checked metadata for model loaders. The need_ getters fail with
 * ELIZA_E_FORMAT naming the key when it is absent ("metadata key 'K' is
 * missing"), stored in a type that does not convert without loss, or
 * outside [lo, hi] (f32: or not finite). The opt_ getters return ELIZA_OK
 * and leave *out as it is when the key is absent, recording no error, and
 * check a present key as the need_ getter does (opt_arr sets *out to NULL
 * when absent). */
EZ_INTERNAL int32_t ez_gguf_need_u32(const ez_gguf *g, const char *key, uint32_t lo, uint32_t hi,
                                     uint32_t *out);
EZ_INTERNAL int32_t ez_gguf_opt_u32(const ez_gguf *g, const char *key, uint32_t lo, uint32_t hi,
                                    uint32_t *out);
EZ_INTERNAL int32_t ez_gguf_need_f32(const ez_gguf *g, const char *key, float lo, float hi, float *out);
EZ_INTERNAL int32_t ez_gguf_opt_f32(const ez_gguf *g, const char *key, float lo, float hi, float *out);
EZ_INTERNAL int32_t ez_gguf_need_bool(const ez_gguf *g, const char *key, int *out);
EZ_INTERNAL int32_t ez_gguf_opt_bool(const ez_gguf *g, const char *key, int *out);
EZ_INTERNAL int32_t ez_gguf_need_str(const ez_gguf *g, const char *key, ez_str *out);
EZ_INTERNAL int32_t ez_gguf_opt_str(const ez_gguf *g, const char *key, ez_str *out);
EZ_INTERNAL int32_t ez_gguf_need_arr(const ez_gguf *g, const char *key, uint32_t elem_type,
                                     const ez_gguf_kv **out);
EZ_INTERNAL int32_t ez_gguf_opt_arr(const ez_gguf *g, const char *key, uint32_t elem_type,
                                    const ez_gguf_kv **out);

/* Element i of an array of integers or bools (any width, signed or not;
 * a bool reads as 0 or 1), widened to int64. ELIZA_E_FORMAT naming the key
 * for another element type or a U64 element past INT64_MAX,
 * ELIZA_E_INVALID_ARG for i past the end. */
EZ_INTERNAL int32_t ez_gguf_arr_int(const ez_gguf_kv *kv, uint64_t i, int64_t *out);

/* The strings of a STRING array, as a malloc'd table the caller free()s. */
EZ_INTERNAL int32_t ez_gguf_arr_strings(const ez_gguf_kv *kv, ez_str **out);

/* The document eliza_gguf_info_json() returns (docs/gguf.md): arrays show
 * their first max_array_items elements; tensors are listed when
 * include_tensors is nonzero. *out is malloc'd (eliza_free / free). */
EZ_INTERNAL int32_t ez_gguf_info_json(const ez_gguf *g, uint64_t max_array_items,
                                      int include_tensors, char **out);

/* Tensor t of g dequantized to a malloc'd array of t->n_elements floats in
 * storage order. ELIZA_E_UNSUPPORTED for a type without kernels,
 * ELIZA_E_NOMEM when the result cannot be allocated. */
EZ_INTERNAL int32_t ez_gguf_tensor_f32(const ez_gguf_tensor *t, float **out);

/* "UINT8", ..., "ARRAY". */
EZ_INTERNAL const char *ez_gguf_vtype_name(uint32_t type);

#endif /* EZ_GGUF_H */
