/* Tensor storage types (GGML numbering, as GGUF stores it), their block
 * layouts, and the kernels over them: row dequantization, activation
 * quantization, and fused dot products.
 *
 * A weight row of type T is dotted with an activation row stored in
 * traits(T)->vec_dot_type:
 *   F32, F16, BF16                      -> F32 activations
 *   Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4     -> Q8_0 activations (32-element blocks)
 *   Q4_1, Q5_1                          -> Q8_1 activations (Q8_0 plus d * sum)
 *   Q2_K .. Q6_K, IQ4_XS, TQ1_0, TQ2_0,
 *   IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS,
 *   IQ2_S, IQ1_S, IQ1_M                 -> Q8_K activations (256-element blocks)
 * (the pairs of ggml's CPU backend).
 *
 * Every kernel has a scalar reference (the *_ref table) and may have a fast
 * variant chosen once per process from the CPU features; ELIZA_FORCE_SCALAR=1
 * makes ez_kernels() return the reference. Fast and reference dequantization
 * are bit-identical; fast and reference dots differ only by float summation
 * order. */
#ifndef EZ_QUANT_H
#define EZ_QUANT_H

#include "common.h"

typedef enum {
    EZ_TYPE_F32 = 0,
    EZ_TYPE_F16 = 1,
    EZ_TYPE_Q4_0 = 2,
    EZ_TYPE_Q4_1 = 3,
    EZ_TYPE_Q5_0 = 6,
    EZ_TYPE_Q5_1 = 7,
    EZ_TYPE_Q8_0 = 8,
    EZ_TYPE_Q8_1 = 9,
    EZ_TYPE_Q2_K = 10,
    EZ_TYPE_Q3_K = 11,
    EZ_TYPE_Q4_K = 12,
    EZ_TYPE_Q5_K = 13,
    EZ_TYPE_Q6_K = 14,
    EZ_TYPE_Q8_K = 15,
    EZ_TYPE_IQ2_XXS = 16,
    EZ_TYPE_IQ2_XS = 17,
    EZ_TYPE_IQ3_XXS = 18,
    EZ_TYPE_IQ1_S = 19,
    EZ_TYPE_IQ4_NL = 20,
    EZ_TYPE_IQ3_S = 21,
    EZ_TYPE_IQ2_S = 22,
    EZ_TYPE_IQ4_XS = 23,
    EZ_TYPE_I8 = 24,
    EZ_TYPE_I16 = 25,
    EZ_TYPE_I32 = 26,
    EZ_TYPE_I64 = 27,
    EZ_TYPE_F64 = 28,
    EZ_TYPE_IQ1_M = 29,
    EZ_TYPE_BF16 = 30,
    EZ_TYPE_TQ1_0 = 34,
    EZ_TYPE_TQ2_0 = 35,
    EZ_TYPE_MXFP4 = 39,
    EZ_TYPE_NVFP4 = 40,
    EZ_TYPE_Q1_0 = 41,
    EZ_TYPE_COUNT = 42    /* upper bound of the table, not a type */
} ez_type;

#define EZ_QK 32     /* elements per block of Q4_0 / Q5_0 / Q8_0 */
#define EZ_QK_K 256  /* elements per super-block of the K quants */

/* Block layouts (packed, little-endian, as GGUF stores them). */
typedef struct { uint16_t d; uint8_t qs[EZ_QK / 2]; } ez_block_q4_0;              /* 18 B */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[EZ_QK / 2]; } ez_block_q5_0; /* 22 B */
typedef struct { uint16_t d; int8_t qs[EZ_QK]; } ez_block_q8_0;                   /* 34 B */
typedef struct { uint16_t d, m; uint8_t qs[EZ_QK / 2]; } ez_block_q4_1;           /* 20 B: d * q + m */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[EZ_QK / 2]; } ez_block_q5_1; /* 24 B */
/* Q8_1 (activations only): ggml stores d and s = d * sum(qs) as float16;
 * here they are those float16 values widened, which keeps the 40-byte block
 * gguf-py gives the type. */
typedef struct { float d, s; int8_t qs[EZ_QK]; } ez_block_q8_1;                   /* 40 B */
typedef struct { uint16_t d; uint8_t qs[EZ_QK / 2]; } ez_block_iq4_nl;            /* 18 B: d * kvalue[q] */
typedef struct { uint8_t e; uint8_t qs[EZ_QK / 2]; } ez_block_mxfp4;              /* 17 B: 2^(e-128) * kvalue[q] */
typedef struct {
    uint16_t d, dmin;        /* super-block scales of the 6-bit scales and mins */
    uint8_t scales[12];      /* 8 x (6-bit scale, 6-bit min), packed */
    uint8_t qs[EZ_QK_K / 2]; /* 4-bit quants */
} ez_block_q4_k;             /* 144 B */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[EZ_QK_K / 8]; /* 5th bits */
    uint8_t qs[EZ_QK_K / 2];
} ez_block_q5_k;             /* 176 B */
typedef struct {
    uint8_t ql[EZ_QK_K / 2]; /* low 4 bits */
    uint8_t qh[EZ_QK_K / 4]; /* high 2 bits */
    int8_t scales[EZ_QK_K / 16];
    uint16_t d;
} ez_block_q6_k;             /* 210 B */
typedef struct {
    uint8_t scales[EZ_QK_K / 16]; /* per 16: 4-bit scale (low), 4-bit min (high) */
    uint8_t qs[EZ_QK_K / 4];      /* 2-bit quants */
    uint16_t d, dmin;
} ez_block_q2_k;                  /* 84 B */
typedef struct {
    uint8_t hmask[EZ_QK_K / 8];   /* high bit of each quant, set: no -4 */
    uint8_t qs[EZ_QK_K / 4];      /* low 2 bits */
    uint8_t scales[12];           /* 16 x 6-bit scales, offset 32 */
    uint16_t d;
} ez_block_q3_k;                  /* 110 B */
typedef struct {
    uint16_t d;
    uint16_t scales_h;            /* high 2 bits of the 8 scales */
    uint8_t scales_l[EZ_QK_K / 64]; /* low 4 bits, two per byte */
    uint8_t qs[EZ_QK_K / 2];
} ez_block_iq4_xs;                /* 136 B */
typedef struct {
    uint8_t qs[(EZ_QK_K - 4 * EZ_QK_K / 64) / 5]; /* 5 trits per byte, as ceil(t * 256 / 243) */
    uint8_t qh[EZ_QK_K / 64];                     /* 4 trits per byte */
    uint16_t d;
} ez_block_tq1_0;                 /* 54 B */
typedef struct {
    uint8_t qs[EZ_QK_K / 4];      /* 2-bit codes q, value q - 1 */
    uint16_t d;
} ez_block_tq2_0;                 /* 66 B */
/* The grid i-quants: codes index llama.cpp's grids (core/kernels/quant_tables.h)
 * of 4 or 8 magnitudes, with sign bits, per-32 (or per-16) 4-bit or 3-bit
 * scales and one float16 super-block scale. */
typedef struct { uint16_t d; uint16_t qs[EZ_QK_K / 8]; } ez_block_iq2_xxs;                       /* 66 B */
typedef struct { uint16_t d; uint16_t qs[EZ_QK_K / 8]; uint8_t scales[EZ_QK_K / 32]; } ez_block_iq2_xs; /* 74 B */
typedef struct {
    uint16_t d;
    uint8_t qs[EZ_QK_K / 4];      /* 32 grid codes (low 8 bits), then 32 sign bytes */
    uint8_t qh[EZ_QK_K / 32];     /* high 2 bits of the codes */
    uint8_t scales[EZ_QK_K / 32];
} ez_block_iq2_s;                 /* 82 B */
typedef struct { uint16_t d; uint8_t qs[3 * EZ_QK_K / 8]; } ez_block_iq3_xxs; /* 98 B: 64 codes, 8 scale+sign words */
typedef struct {
    uint16_t d;
    uint8_t qs[EZ_QK_K / 4];      /* grid codes, low 8 bits */
    uint8_t qh[EZ_QK_K / 32];     /* ninth bits */
    uint8_t signs[EZ_QK_K / 8];
    uint8_t scales[EZ_QK_K / 64];
} ez_block_iq3_s;                 /* 110 B */
typedef struct { uint16_t d; uint8_t qs[EZ_QK_K / 8]; uint16_t qh[EZ_QK_K / 32]; } ez_block_iq1_s; /* 50 B */
typedef struct {
    uint8_t qs[EZ_QK_K / 8];      /* grid codes, low 8 bits */
    uint8_t qh[EZ_QK_K / 16];     /* per code: high 3 bits and the delta sign */
    uint8_t scales[EZ_QK_K / 32]; /* 3-bit scales; the float16 d in the top nibbles */
} ez_block_iq1_m;                 /* 56 B */

typedef struct {
    float d;
    int8_t qs[EZ_QK_K];
    int16_t bsums[EZ_QK_K / 16]; /* sums of each 16 quants */
} ez_block_q8_k;             /* 292 B */

typedef struct {
    const char *name;       /* "Q4_K", ... */
    uint32_t block_size;    /* elements per block */
    uint32_t type_size;     /* bytes per block */
    int has_kernels;        /* dequantize + dot implemented in this build */
    ez_type vec_dot_type;   /* activation format of the dot (if has_kernels) */
} ez_type_traits;

/* Traits of a GGML type id, or NULL for an id no known GGML release uses. */
EZ_INTERNAL const ez_type_traits *ez_type_traits_of(uint32_t type);

/* Bytes of a row of `n` elements of `type`; 0 when n is not a multiple of the
 * block size, the type is unknown, or the size overflows. */
EZ_INTERNAL uint64_t ez_row_bytes(uint32_t type, uint64_t n);

/* dst[0..n) = values of the n elements at src (n a multiple of block_size). */
typedef void (*ez_dequant_fn)(const void *src, float *dst, int64_t n);
/* dst = src quantized to this type (activations); n a multiple of block_size. */
typedef void (*ez_quant_fn)(const float *src, void *dst, int64_t n);
/* Sum over n elements of w (a row of the weight type) times x (a row of the
 * weight type's vec_dot_type). */
typedef float (*ez_dot_fn)(int64_t n, const void *w, const void *x);

typedef struct {
    ez_dequant_fn dequant;  /* NULL if the type has no kernels */
    ez_quant_fn quant;      /* set for activation formats: Q8_0, Q8_1, Q8_K; NULL otherwise */
    ez_dot_fn dot;          /* weight type x vec_dot_type; NULL if none */
} ez_type_kernels;

/* The kernels in use for `type` (fast when available, reference under
 * ELIZA_FORCE_SCALAR=1). Never NULL for a type with traits; its members may
 * be NULL. */
EZ_INTERNAL const ez_type_kernels *ez_kernels(uint32_t type);

/* The scalar reference kernels, whatever the CPU. */
EZ_INTERNAL const ez_type_kernels *ez_kernels_ref(uint32_t type);

/* The kernel table of one instruction set for `type`, complete (members the
 * set does not speed up are its best fallback), or NULL when this build has
 * no such kernels for `type`: always NULL on other architectures. Callers must
 * check the CPU first (ez_cpu_features); ez_kernels() does. Tests and the
 * benchmark use these to compare every level the CPU runs, not only the
 * active one. */
EZ_INTERNAL const ez_type_kernels *ez_kernels_avx2(uint32_t type);
EZ_INTERNAL const ez_type_kernels *ez_kernels_avx512(uint32_t type);
EZ_INTERNAL const ez_type_kernels *ez_kernels_neon(uint32_t type);
EZ_INTERNAL const ez_type_kernels *ez_kernels_neon_dotprod(uint32_t type);

/* float16 / bfloat16 <-> float32, exact (IEEE rounding to nearest even on
 * the way down). Widening keeps NaN payloads, signalling ones included, as
 * numpy does; narrowing a NaN gives a quiet NaN with the top payload bits. */
EZ_INTERNAL float ez_f16_to_f32(uint16_t h);
EZ_INTERNAL uint16_t ez_f32_to_f16(float f);
EZ_INTERNAL float ez_bf16_to_f32(uint16_t h);

/* MXFP4's E8M0 block exponent as 2^(e-128), half the scale it stands for
 * (ggml's GGML_E8M0_TO_FP32_HALF): e = 0 and 1 give subnormals. */
EZ_INTERNAL float ez_e8m0_to_float_half(uint8_t e);

/* The sixteen 6-bit scales of a Q3_K super-block, offset 32 taken off. */
EZ_INTERNAL void ez_unpack_q3k_scales(const uint8_t s[12], int sc[16]);

#endif /* EZ_QUANT_H */
