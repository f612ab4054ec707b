/* The element-wise and reduction operations of the LLM forward pass, and the
 * matrix products over the stored (quantized) weights.
 *
 * Vector ops come as a table: the scalar reference (ops.c), an AVX2+FMA
 * variant (ops_avx2.c) and a NEON one (ops_neon.c), chosen once from
 * ez_simd_level_active(), so
 * ELIZA_FORCE_SCALAR=1 selects the reference. The two agree to float
 * rounding (summation order, a polynomial exp within 2 ulp); tests/c/
 * test_llm_ops.c holds them to it. */
#ifndef EZ_LLM_OPS_H
#define EZ_LLM_OPS_H

#include "core/common.h"
#include "core/pool.h"
#include "model.h"

typedef struct {
    /* sum of a[i] * b[i] */
    float (*dot)(const float *a, const float *b, int64_t n);
    /* y[i] += a * x[i] */
    void (*axpy)(float *y, float a, const float *x, int64_t n);
    /* out[r] = sum of a[r * lda + i] * b[i], r < 4: four rows against one
     * vector read once (attention scores of the heads sharing a key) */
    void (*dot4)(const float *a, int64_t lda, const float *b, int64_t n, float out[4]);
    /* y[r * ldy + i] += w[r] * x[i], r < 4 (the same heads' weighted values) */
    void (*axpy4)(float *y, int64_t ldy, const float w[4], const float *x, int64_t n);
    /* y[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; y may alias x */
    void (*rms_norm)(float *y, const float *x, const float *w, int64_t n, float eps);
    /* g[i] = gelu_tanh(g[i]) * u[i]  (GeGLU, PyTorch's approximate="tanh") */
    void (*gelu_tanh_mul)(float *g, const float *u, int64_t n);
    /* g[i] = silu(g[i]) * u[i]  (SwiGLU) */
    void (*silu_mul)(float *g, const float *u, int64_t n);
    /* x = softmax(x), in place */
    void (*softmax)(float *x, int64_t n);
    /* n floats -> n/32 Q8_0 blocks, rounded as llama.cpp's CPU backend does
     * on this architecture (see ez_llm_quant_q8_0_ref) */
    void (*quant_q8_0)(const float *x, void *dst, int64_t n);
    /* The F16 KV cache's dot4, axpy and axpy4: b and x are IEEE halves (its
     * single dot and its widening are core's F16 kernels, ez_kernels). */
    void (*dot4_f16)(const float *a, int64_t lda, const uint16_t *b, int64_t n, float out[4]);
    void (*axpy_f16)(float *y, float a, const uint16_t *x, int64_t n);
    void (*axpy4_f16)(float *y, int64_t ldy, const float w[4], const uint16_t *x, int64_t n);
    /* dst[i] = x[i] as F16, as ez_f32_to_f16 (nearest even; inf from 65520) */
    void (*to_f16)(uint16_t *dst, const float *x, int64_t n);
} ez_llm_ops;

/* Q8_0 activation blocks exactly as llama.cpp's CPU backend makes them, so
 * the integer codes (and hence every dot) agree with it: d = amax / 127
 * stored as F16; codes round(x * id) to nearest, ties to even, with
 * id = 127 / amax on x86-64 (ggml's AVX path) and id = 1 / d elsewhere
 * (its NEON and generic paths; the generic one rounds ties away from zero).
 * core's ez_quant_q8_0_ref follows ggml's generic reference, whose codes
 * differ from the x86 ones in about one element per thousand: enough to move
 * Gemma's logits by tenths. */
EZ_INTERNAL void ez_llm_quant_q8_0_ref(const float *x, void *dst, int64_t n);

/* Q8_1 activation blocks (Q4_1 / Q5_1 weights) as llama.cpp's CPU backend
 * makes them: Q8_0's codes and rounding on this architecture, plus
 * s = d * sum(codes) with the unrounded d, both stored as F16 (widened in
 * core's 40-byte ez_block_q8_1). */
EZ_INTERNAL void ez_llm_quant_q8_1(const float *x, void *dst, int64_t n);

/* The table in use (AVX2 or NEON when the CPU has it and ELIZA_FORCE_SCALAR is unset). */
EZ_INTERNAL const ez_llm_ops *ez_llm_ops_active(void);
EZ_INTERNAL const ez_llm_ops *ez_llm_ops_ref(void);
/* NULL when this build has no AVX2 variant (not x86-64); callers check the CPU. */
EZ_INTERNAL const ez_llm_ops *ez_llm_ops_avx2(void);
EZ_INTERNAL const ez_llm_ops *ez_llm_ops_avx512(void);
/* NULL when this build is not aarch64 (where NEON is baseline). */
EZ_INTERNAL const ez_llm_ops *ez_llm_ops_neon(void);

/* Rotary position embedding of one vector of n_heads heads of head_dim
 * values, rotating the first n_rot dims of each head by the angles whose
 * cosines and sines are cs[2i], cs[2i+1] (i < n_rot/2). neox pairs (i,
 * i + n_rot/2) (GPT-NeoX / HF rotate_half); otherwise (2i, 2i+1) (GPT-J /
 * original llama layout). */
EZ_INTERNAL void ez_rope(float *x, int n_heads, int head_dim, int n_rot, const float *cs, int neox);

/* cs[2i], cs[2i+1] = cos, sin of pos * freq_scale * base^(-2i/n_rot) / factors[i]
 * for i < n_rot/2 (factors may be NULL). Computed in double. */
EZ_INTERNAL void ez_rope_angles(float *cs, int32_t pos, int n_rot, float base, float freq_scale,
                                const float *factors);

/* Rope scaling as ggml's rope_yarn computes it (YaRN, LongRoPE factors, a
 * cos/sin scale). */
typedef struct {
    float base, freq_scale;
    const float *factors;   /* [n_rot / 2] frequency divisors, or NULL */
    float mscale;           /* multiplies cos and sin */
    float ext_factor;       /* YaRN extrapolation mix; 0 = plain interpolation */
    float corr_lo, corr_hi; /* YaRN: the ramp from extrapolated to interpolated dims */
} ez_rope_scaling;

/* cs[2i], cs[2i+1] = mscale * cos, sin of theta_i, where with extrap =
 * pos * base^(-2i/n_rot) / factors[i] and interp = freq_scale * extrap,
 * theta_i = interp (1 - m) + extrap m, m = ext_factor * (1 - clamp((i -
 * corr_lo) / max(0.001, corr_hi - corr_lo), 0, 1)). Computed in double. */
EZ_INTERNAL void ez_rope_angles_scaled(float *cs, int32_t pos, int n_rot, const ez_rope_scaling *r);

/* ---- matrix products over stored weights ------------------------------------------ */


/* Activations quantized to the formats the weights' dot kernels read. One
 * input (e.g. the normed hidden state) is quantized once per format and
 * shared by every matrix that reads it (q, k and v; gate and up), whatever
 * mix of weight types the group holds: each weight type's vec_dot_type
 * (core/quant.h) names the format, and a group of n matrices needs at most n.
 * Buffers grow on demand and are reused across calls. */
#define EZ_LLM_ACT_FORMATS 4

typedef struct {
    uint32_t type;          /* the vec_dot_type held (EZ_TYPE_COUNT: slot unused in this call) */
    uint8_t *data;          /* [n_rows] rows of row_bytes */
    size_t row_bytes, cap;
    void *x8;               /* data repacked for the x8 kernels, or NULL */
    size_t x8_cap;          /* bytes */
    int x8_ready;           /* x8 holds this call's activations */
} ez_llm_act_rows;

typedef struct {
    const float *x;         /* [n_rows, n_cols] row-major F32 */
    int64_t n_rows, n_cols;
    ez_llm_act_rows fmt[EZ_LLM_ACT_FORMATS];
} ez_llm_acts;

EZ_INTERNAL void ez_llm_acts_init(ez_llm_acts *a);
EZ_INTERNAL void ez_llm_acts_free(ez_llm_acts *a);

/* One matrix product of a group: y[m * ldy + r] = W[r] . x[m] for every row
 * r of W and every activation row m. */
typedef struct {
    const ez_llm_matrix *w;
    float *y;
    int64_t ldy;
} ez_llm_mm;

/* Computes every product of `mm` (all reading activations x [M, K], K =
 * n_cols of each matrix) in one parallel pass. ELIZA_E_NOMEM if a buffer
 * cannot grow. */
EZ_INTERNAL int32_t ez_llm_matmul(ez_pool *pool, ez_llm_acts *acts, const float *x, int64_t M,
                                  const ez_llm_mm *mm, int n_mm);

/* ---- tile kernels: many activation rows at once (prompt batches) ------------------ */

/* A group of EZ_LLM_TILE_ROWS weight rows is unpacked once into bytes and
 * dotted with every activation row; the per-pair dots would unpack it once
 * per row. The types with tile kernels are those of ez_llm_tile_traits_of
 * (and, at the avx512 level only, F16 and BF16: ez_llm_tile_float_avx512);
 * ops_qtile.c has the layouts. Computes y[m * ldy + r]
 * for r in [r0, r1), m in [0, M); scratch holds ez_llm_tile_scratch() bytes. */
#define EZ_LLM_TILE_ROWS 4

/* One K-quant super-block of one row, unpacked. */
typedef struct {
    uint8_t codes[256];       /* unsigned codes in element order */
    int16_t scale[8][16];     /* per 32-element chunk: lanes 0-7 scale its first 16, 8-15 its last 16 */
    int16_t offset[16];       /* per 16 elements, times the activation sums (bsums) */
    int32_t zp;               /* integer zero point: isum = sum scale*code*x - zp * sum offset*bsum */
    float d, c;               /* dot = dx * (d * isum - c * sum offset*bsum) */
    uint8_t pad[20];          /* 576 bytes: codes stay 32-byte aligned in arrays */
} ez_llm_ktile;

typedef void (*ez_llm_tile_fn)(const ez_llm_matrix *w, int64_t r0, int64_t r1, const uint8_t *x,
                               size_t x_row_bytes, int64_t M, float *y, int64_t ldy, void *scratch);

/* How a weight type's rows unpack for the tile and x8 kernels, from which
 * every tile kernel is chosen. */
typedef enum {
    EZ_LLM_TILE_Q32 = 1,  /* 32-element blocks: a byte per code and a float scale per block (Q8_0
                           * activations; Q8_1 for the types with a min) */
    EZ_LLM_TILE_QK = 2    /* 256-element super-blocks into ez_llm_ktile (Q8_K activations) */
} ez_llm_tile_family;

typedef struct {
    ez_llm_tile_family family;
    int zero_point;   /* Q32, unsigned codes: subtracted from each code (8 for Q4_0, 16 for Q5_0) */
    int is_signed;    /* Q32: the codes are int8 values (Q8_0, IQ4_NL, MXFP4); the x8 VNNI kernels
                       * take them as unsigned codes with zero point EZ_LLM_SIGNED_ZP */
    int wide;         /* QK, the largest code and so how the AVX2 kernels' 16-bit maddubs sums
                       * may be added: 0: codes <= 31, four summed in 16 bits; 1: <= 63 (Q6_K),
                       * two at a time; 2: <= 127 (IQ2_*, IQ3_XXS), each widened alone; 3: <= 255
                       * (IQ4_XS), sums in 32 bits only: no AVX2 kernel (the AVX-512 kernels sum
                       * every K type in 32 bits with vpdpbusd) */
    int scale32;      /* QK: one scale per 32 elements (else per 16; every wide 3 type has it) */
    int has_min;      /* Q32: weight = d * code + m (Q4_1, Q5_1; zero point 0, Q8_1 activations):
                       * block dot = d * dx * sum code*x + m * s, s = Q8_1's dx * sum x. Only x8
                       * kernels (the tile kernels read Q8_0 rows) */
} ez_llm_tile_traits;

/* NULL for types that only have per-pair dots. */
EZ_INTERNAL const ez_llm_tile_traits *ez_llm_tile_traits_of(uint32_t w_type);

EZ_INTERNAL size_t ez_llm_tile_scratch(uint32_t w_type, int64_t n_cols);
/* Unpacks rows [r0, r0 + n_rows) into codes [nb][TILE_ROWS][32], scales
 * [nb][TILE_ROWS] and, for the has_min types, mins [nb][TILE_ROWS] (mins is
 * not touched for the others and may be NULL; rows past n_rows zero). */
EZ_INTERNAL void ez_llm_tile_unpack_ref(const ez_llm_matrix *w, int64_t r0, int n_rows, uint8_t *codes,
                                        float *scales, float *mins);
/* The same with AVX2 (x86-64 only; the caller checks the CPU). */
EZ_INTERNAL void ez_llm_tile_unpack_avx2(const ez_llm_matrix *w, int64_t r0, int n_rows, uint8_t *codes,
                                         float *scales, float *mins);
/* K quants: tiles[sb * TILE_ROWS + r] for every super-block sb. */
EZ_INTERNAL void ez_llm_ktile_unpack(const ez_llm_matrix *w, int64_t r0, int n_rows, ez_llm_ktile *tiles);
/* The same tiles, byte for byte, with AVX2 codes for every K-tile type
 * (every type off x86-64 through ez_llm_ktile_unpack; on x86-64 the caller
 * checks the CPU). */
EZ_INTERNAL void ez_llm_ktile_unpack_avx2(const ez_llm_matrix *w, int64_t r0, int n_rows, ez_llm_ktile *tiles);
/* A Q2_K, Q3_K, TQ2_0, Q4_K, Q5_K or Q6_K super-block's scale, offset, zp, d and c (not its codes). */
EZ_INTERNAL void ez_llm_ksuper_scales(uint32_t type, const uint8_t *blk, ez_llm_ktile *t);
/* One super-block of one row into its tile, every field but pad. */
typedef void (*ez_llm_ksuper_fn)(const uint8_t *blk, ez_llm_ktile *t);
/* AVX2 (ops_iq_unpack_avx2.c) for the grid i-quants, IQ4_XS and TQ1_0, the
 * tiles of ez_llm_ktile_unpack byte for byte; NULL for other types and off
 * x86-64. */
EZ_INTERNAL ez_llm_ksuper_fn ez_llm_ksuper_iq_avx2(uint32_t w_type);
/* NULL when the type has no tile kernel (the has_min types; or, for
 * _active, under ELIZA_FORCE_SCALAR, where the per-pair reference dots are
 * used). */
EZ_INTERNAL ez_llm_tile_fn ez_llm_tile_ref(uint32_t w_type);
EZ_INTERNAL ez_llm_tile_fn ez_llm_tile_avx2(uint32_t w_type);
/* AVX2 plus AVX-VNNI's vpdpbusd where it pays (the Q*_0 family); NULL when
 * this build has no VNNI kernels. Callers check ez_llm_cpu_has_avxvnni(). */
EZ_INTERNAL ez_llm_tile_fn ez_llm_tile_avx2_vnni(uint32_t w_type);
EZ_INTERNAL int ez_llm_cpu_has_avxvnni(void);
/* F16 and BF16 weights against float32 activations (ops_qtile_avx512.c):
 * each output bit-equal to ez_kernels_avx512(type)->dot; NULL for other
 * types and off x86-64. Callers check the avx512 level. */
EZ_INTERNAL ez_llm_tile_fn ez_llm_tile_float_avx512(uint32_t w_type);
EZ_INTERNAL ez_llm_tile_fn ez_llm_tile_active(uint32_t w_type);

/* ---- x8 kernels: eight activation rows per vector lane ------------------------------
 *
 * For the tile types with unsigned codes (Q8_0 or, with a min, Q8_1 activations), the signed ones
 * where vpdpbusd sums (AVX-VNNI, AVX-512: see below), and every K-tile type
 * (Q8_K activations), with at least EZ_LLM_X8_MIN_ROWS activation rows.
 * The activations are repacked once per product into groups of 8 rows whose
 * blocks interleave the rows 4 bytes at a time, so one 32-byte load holds 4
 * elements of 8 rows: a weight's 4 codes broadcast against it give 8
 * partial dots at once, and each block's scale product and FMA serve 8 rows
 * instead of 1. */
#define EZ_LLM_X8_MIN_ROWS 4

/* Signed codes c (Q8_0, IQ4_NL, MXFP4) become the unsigned codes c + 128
 * (c ^ 0x80) with zero point 128: sum (c + 128) x - 128 sum x = sum c x.
 * vpdpbusd multiplies unsigned by signed bytes and sums four products into
 * 32 bits without saturating, so this is exact there (maddubs' 16-bit sums
 * of 255 * -128 pairs would saturate: the plain AVX2 kernels keep signed
 * types on the tile path). */
#define EZ_LLM_SIGNED_ZP 128
/* codes[0..n) ^= 0x80. */
EZ_INTERNAL void ez_llm_tile_codes_unsigned(uint8_t *codes, size_t n);

typedef struct ez_llm_x8_block_s {
    int8_t q[8][8][4];   /* [4-byte group][row][byte]: one Q8_0 or Q8_1 block of 8 rows */
    float d[8];          /* block scales of the 8 rows */
    union {
        int32_t sum[8];  /* Q8_0 packs: sum of each row's 32 codes (for the weight's zero point) */
        float s[8];      /* Q8_1 packs: each row's s (d * sum as Q8_1 stores it, for the weight's min) */
    };
} ez_llm_x8_block;       /* 320 bytes */

/* The same for one Q8_K super-block of 8 rows. */
typedef struct ez_llm_x8k_block_s {
    int8_t q[64][8][4];      /* [4-byte group][row][byte] */
    float d[8];              /* super-block scales */
    int16_t bsums[8][8][2];  /* [pair i][row]: the row's sums of elements 32i..32i+15 and 32i+16..32i+31 */
} ez_llm_x8k_block;          /* 2336 bytes */

/* Rows [0, M) of Q8_0 activations (rows of x_row_bytes) into ceil(M / 8)
 * groups of K/32 blocks each; rows past M are zero. */
EZ_INTERNAL void ez_llm_pack_x8(const uint8_t *xq, size_t x_row_bytes, int64_t M, int64_t K, ez_llm_x8_block *dst);
/* The same for Q8_1 rows (core's ez_block_q8_1): d and s as stored, so the
 * min term m * s rounds as in the per-pair dots and llama.cpp's. */
EZ_INTERNAL void ez_llm_pack_x8_1(const uint8_t *xq, size_t x_row_bytes, int64_t M, int64_t K, ez_llm_x8_block *dst);
/* Q8_K rows into ceil(M / 8) groups of K/256 super-blocks. */
EZ_INTERNAL void ez_llm_pack_x8k(const uint8_t *xq, size_t x_row_bytes, int64_t M, int64_t K, ez_llm_x8k_block *dst);

/* y[m * ldy + r] for r in [r0, r1), m in [0, M), from activations packed for
 * the weight's family (ez_llm_x8_block or ez_llm_x8k_block); scratch as for
 * the tile kernels. */
typedef void (*ez_llm_x8_fn)(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, int64_t M, float *y,
                             int64_t ldy, void *scratch);

/* NULL for types without x8 kernels (see ez_llm_tile_traits). */
EZ_INTERNAL ez_llm_x8_fn ez_llm_x8_ref(uint32_t w_type);
EZ_INTERNAL ez_llm_x8_fn ez_llm_x8_avx2(uint32_t w_type);
EZ_INTERNAL ez_llm_x8_fn ez_llm_x8_avx2_vnni(uint32_t w_type);
/* AVX-512 (with VNNI): two groups of 8 activation rows per register. */
EZ_INTERNAL ez_llm_x8_fn ez_llm_x8_avx512(uint32_t w_type);
/* The fast kernel for this CPU, or NULL (also under ELIZA_FORCE_SCALAR). */
EZ_INTERNAL ez_llm_x8_fn ez_llm_x8_active(uint32_t w_type);

/* ---- gemv: one activation row against many weight rows (decode) ---------------------
 *
 * y[r - r0] for weight rows [r0, r1) of w against one activation row x (in
 * the type's vec_dot_type), the same floats, bit for bit, as the per-row dot
 * of the same level (ez_kernels_avx512(type)->dot, ...): several weight rows
 * go through each pass over x, sharing its loads and its per-block work, but
 * every row keeps the dot's own accumulators, summation order and final
 * reduction. The per-row dot loop is the reference. */
typedef void (*ez_llm_gemv_fn)(const ez_llm_matrix *w, int64_t r0, int64_t r1, const void *x, float *y);

/* NULL for the types without a multi-row kernel (Q4_0, Q5_0, Q8_0, IQ4_NL,
 * Q4_K, Q5_K, Q6_K, F16 and BF16 have one), and off x86-64. Callers check the CPU. An avx2
 * kernel of the same design was not clearly faster than the avx2 dots
 * (docs/simd.md), so that level keeps its dots. */
EZ_INTERNAL ez_llm_gemv_fn ez_llm_gemv_avx512(uint32_t w_type);
/* The kernel of the level in use (ELIZA_SIMD), or NULL: then the per-row dots. */
EZ_INTERNAL ez_llm_gemv_fn ez_llm_gemv_active(uint32_t w_type);

#endif /* EZ_LLM_OPS_H */
