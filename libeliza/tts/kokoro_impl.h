/* Kokoro-82M internals shared by the model files: hyperparameters, the
 * weights of each module (float32, dequantized at load, PyTorch layouts as
 * docs/kokoro.md stores them), a per-forward scratch stack, and the stage
 * functions in data-flow order.
 *
 *   kokoro.c            loading and validation, top-level forward, profile
 *   kokoro_albert.c     ALBERT (one shared layer applied n times) + bert_encoder
 *   kokoro_predictor.c  duration encoder, durations, F0/N branch, text encoder,
 *                       and AdainResBlk1d (shared with the decoder)
 *   kokoro_decoder.c    decoder, iSTFTNet generator, harmonic source, STFT/iSTFT
 *
 * Buffers: "time-major" [T, C] (row t holds C values) for linears and LSTMs,
 * "channel-major" [C, T] for convolutions, as in ops.h. */
#ifndef EZ_TTS_KOKORO_IMPL_H
#define EZ_TTS_KOKORO_IMPL_H

#include "core/common.h"
#include "core/gguf.h"
#include "core/pool.h"
#include "tts/kokoro.h"
#include "tts/ops.h"

#define EZ_KOKORO_MAX_LAYERS 16   /* n_layer: duration encoder / text encoder depth */
#define EZ_KOKORO_MAX_UPS 4       /* generator upsampling stages */
#define EZ_KOKORO_MAX_KERNELS 8   /* resblocks per generator stage */
#define EZ_KOKORO_N_DECODE 4      /* Decoder.decode: three blocks, then one that upsamples */
#define EZ_KOKORO_SINE_RATE 24000 /* SineGen's rate: the reference hardcodes 24 kHz */
#define EZ_KOKORO_MAX_FFT 128     /* iSTFT n_fft */
#define EZ_KOKORO_MAX_HARMONICS 64

typedef struct {
    int sample_rate;
    int n_token;
    int hidden;        /* D: predictor / text encoder width */
    int style;         /* S: half a voice row */
    int max_dur;
    int n_layer;
    int te_kernel;     /* text encoder conv kernel */
    /* ALBERT */
    int bert_hidden, bert_heads, bert_ff, bert_layers, bert_embd, bert_max_pos;
    float bert_eps;
    /* decoder widths (from tensor shapes; the reference hardcodes 1024 / 64 / 512) */
    int dec_hidden;    /* encode / decode width */
    int dec_res;       /* asr_res channels */
    /* iSTFTNet generator */
    int n_ups, ups_rate[EZ_KOKORO_MAX_UPS], ups_kernel[EZ_KOKORO_MAX_UPS];
    int ups_channels;  /* upsample_initial_channel */
    int n_kernels, rb_kernel[EZ_KOKORO_MAX_KERNELS], rb_dilation[EZ_KOKORO_MAX_KERNELS][3];
    int n_fft, hop;
    int n_harmonic;    /* SineGen dim: fundamental + overtones */
} ez_kokoro_hparams;

/* A matrix as the file stores it, behind the model's mapping: float32 is
 * read in place, float16 is widened where it is used (ez_kokoro_f32,
 * ez_kokoro_rows). A tensor of any other type is dequantized to float32 at
 * load (the only heap copy of a weight). Vectors (biases, norms, alphas)
 * are plain `const float *`, in place when the file stores them as
 * float32. */
typedef struct {
    const void *data;
    uint32_t type;     /* EZ_TYPE_F32 or EZ_TYPE_F16 */
    int64_t n;         /* elements */
} ez_kokoro_tensor;

/* y = x . w^T + b; w: [n_out, n_in]. */
typedef struct {
    ez_kokoro_tensor w;
    const float *b;
    int n_out, n_in;
} ez_kokoro_linear;

/* Conv1d w: [c_out, c_in / groups, k]; ConvTranspose1d w: [c_in, c_out / groups, k]. */
typedef struct {
    ez_kokoro_tensor w;
    const float *b; /* may be NULL */
    int c_out, c_in, k;
    ez_tts_panels panels; /* w laid out for the direct path at open, or h NULL (kokoro.c: prepare_panels) */
} ez_kokoro_conv;

/* One bidirectional single-layer LSTM, gates i, f, g, o; [0] forward, [1] reverse. */
typedef struct {
    ez_kokoro_tensor w_ih[2], w_hh[2];
    const float *hh_panels[2];    /* w_hh in core's step panels (ez_lstm_pack), laid out at load */
    const float *b_ih[2], *b_hh[2];
    int n_in, H;
} ez_kokoro_bilstm;

/* AdaIN1d: instance norm with its (inference-time) affine step, then the
 * style projection fc: [2C, S] -> (gamma, beta). */
typedef struct {
    ez_kokoro_linear fc;
    const float *norm_w, *norm_b; /* [C] */
    int affine_identity;          /* norm_w == 1 and norm_b == 0 everywhere */
    int C;
} ez_kokoro_adain;

/* AdainResBlk1d (StyleTTS 2). */
typedef struct {
    int dim_in, dim_out, upsample, learned_sc;
    ez_kokoro_adain norm1, norm2;
    ez_kokoro_conv conv1, conv2;   /* k 3, pad 1 */
    ez_kokoro_conv conv1x1;        /* learned_sc: [dim_out, dim_in, 1], no bias */
    ez_kokoro_conv pool;           /* upsample: depthwise ConvTranspose1d [dim_in, 1, 3], stride 2 */
} ez_kokoro_resblk;

/* AdaINResBlock1 (iSTFTNet generator): three (AdaIN, Snake, dilated conv,
 * AdaIN, Snake, conv) residual units. */
typedef struct {
    int C, k, dilation[3];
    ez_kokoro_adain adain1[3], adain2[3];
    const float *alpha1[3], *alpha2[3]; /* [C] */
    ez_kokoro_conv convs1[3], convs2[3];
} ez_kokoro_resblock1;

typedef struct {
    /* ALBERT */
    ez_kokoro_tensor word_emb;   /* [n_token, E] */
    ez_kokoro_tensor pos_emb;    /* [max_pos, E] */
    ez_kokoro_tensor type_emb;   /* [2, E], row 0 used */
    const float *emb_ln_w, *emb_ln_b;
    ez_kokoro_linear emb_map; /* E -> H */
    ez_kokoro_linear q, k, v, dense;
    const float *attn_ln_w, *attn_ln_b;
    ez_kokoro_linear ffn, ffn_out;
    const float *full_ln_w, *full_ln_b;
    ez_kokoro_linear bert_encoder; /* H -> D */
    /* predictor */
    ez_kokoro_bilstm dur_lstm[EZ_KOKORO_MAX_LAYERS];  /* D + S -> D */
    ez_kokoro_linear dur_aln[EZ_KOKORO_MAX_LAYERS];   /* AdaLayerNorm fc: S -> 2D */
    ez_kokoro_bilstm pred_lstm;                       /* D + S -> D */
    ez_kokoro_linear duration_proj;                   /* D -> max_dur */
    ez_kokoro_bilstm shared;                          /* D + S -> D */
    ez_kokoro_resblk f0[3], n[3];
    ez_kokoro_conv f0_proj, n_proj;                   /* [1, D/2, 1] */
    /* text encoder */
    ez_kokoro_tensor te_emb;                          /* [n_token, D] */
    ez_kokoro_conv te_conv[EZ_KOKORO_MAX_LAYERS];     /* [D, D, K] */
    const float *te_ln_g[EZ_KOKORO_MAX_LAYERS], *te_ln_b[EZ_KOKORO_MAX_LAYERS];
    ez_kokoro_bilstm te_lstm;                         /* D -> D */
    /* decoder */
    ez_kokoro_conv f0_conv, n_conv;                   /* [1, 1, 3], stride 2 */
    ez_kokoro_conv asr_res;                           /* [R, D, 1] */
    ez_kokoro_resblk encode, decode[EZ_KOKORO_N_DECODE];
    /* generator */
    ez_kokoro_linear l_linear;                        /* [1, n_harmonic] */
    ez_kokoro_conv ups[EZ_KOKORO_MAX_UPS];
    ez_kokoro_conv noise_convs[EZ_KOKORO_MAX_UPS];
    ez_kokoro_resblock1 noise_res[EZ_KOKORO_MAX_UPS];
    ez_kokoro_resblock1 resblocks[EZ_KOKORO_MAX_UPS * EZ_KOKORO_MAX_KERNELS];
    ez_kokoro_conv conv_post;                         /* [n_fft + 2, C_last, 7] */
} ez_kokoro_weights;

typedef struct {
    ez_kokoro_phase phase[EZ_KOKORO_MAX_PHASES];
    int n;
    uint64_t t0; /* end of the last phase, ns */
} ez_kokoro_phases;

struct ez_kokoro {
    ez_kokoro_hparams hp;
    ez_kokoro_weights w;
    ez_gguf *file;              /* the mapping the weights point into, closed with the model */
    float **bufs;               /* tensors of other types, dequantized at load */
    int n_bufs, cap_bufs;
    int n_voices;
    char **voice_names;
    char **voice_languages;     /* e.g. "en-us", "ja"; "" when the file does not say */
    char **voice_genders;       /* "f", "m" or "" */
    ez_kokoro_tensor *voices;   /* per voice: [EZ_KOKORO_MAX_PHONEMES, EZ_KOKORO_STYLE_DIM] */
    int n_vocab;
    uint32_t *vocab_cp;         /* code point of each symbol */
    int32_t *vocab_id;
    uint16_t *panels;           /* the convolutions' ez_tts_panels (kokoro.c: prepare_panels), or NULL */
    ez_kokoro_phases phases;    /* of the last forward */
    int bf16;                   /* the FFT convolutions in BF16 (ez_tts_conv1d_bf16; ez_tts_bf16_default) */
};

/* ---- per-forward scratch: a stack of allocations released to a mark ---------- */

#define EZ_KOKORO_STACK_MAX 256

typedef struct {
    void *p[EZ_KOKORO_STACK_MAX];
    int n;
} ez_kokoro_stack;

/* n floats, or NULL (after ez_fail(ELIZA_E_NOMEM)). */
EZ_INTERNAL float *ez_kokoro_alloc(ez_kokoro_stack *st, int64_t n);
/* Frees every allocation made after `mark` (a former st->n). */
EZ_INTERNAL void ez_kokoro_release(ez_kokoro_stack *st, int mark);

/* The forward context: model, pool, scratch, the optional trace, the
 * profile, and the caller's cancel flag (NULL: none), which long stages
 * poll between their blocks. */
typedef struct {
    const ez_kokoro *m;
    ez_pool *pool;
    ez_kokoro_stack *st;
    ez_kokoro_trace *trace;
    ez_kokoro_phases *phases;
    ez_atomic_int *cancel;
} ez_kokoro_ctx;

/* Whether the caller asked to cancel. */
static inline int ez_kokoro_cancelled(const ez_kokoro_ctx *c) { return c->cancel && ez_atomic_int_load(c->cancel); }

/* Ends a profile phase `name` (a static string) now. */
EZ_INTERNAL void ez_kokoro_phase_end(ez_kokoro_ctx *c, const char *name);

/* Records a copy of a stage output when tracing (shape in PyTorch's order,
 * batch dropped); `transpose` copies a [d1, d0] buffer as [d0, d1]. */
EZ_INTERNAL int32_t ez_kokoro_record(ez_kokoro_ctx *c, const char *name, const float *x, int64_t d0,
                                     int64_t d1, int transpose);

/* ---- weights --------------------------------------------------------------------- */

/* w as float32 for one use: w's own data when it is float32, otherwise
 * widened into an allocation of c->st (freed by the caller's release). NULL
 * after ez_fail(ELIZA_E_NOMEM). */
EZ_INTERNAL const float *ez_kokoro_f32(ez_kokoro_ctx *c, const ez_kokoro_tensor *w);

/* Rows [row, row + n_rows) of w, `width` elements each, widened into dst. */
EZ_INTERNAL void ez_kokoro_rows(const ez_kokoro_tensor *w, int64_t row, int64_t n_rows, int64_t width, float *dst);

/* ---- shared layers --------------------------------------------------------------- */

/* y[T, n_out] = x[T, n_in] . w^T + b. */
EZ_INTERNAL int32_t ez_kokoro_linear_run(ez_kokoro_ctx *c, const ez_kokoro_linear *l, const float *x, int T,
                                         float *y);
/* y = Conv1d (ez_tts_conv1d) of x [cv->c_in, t_in] with cv's weights. */
EZ_INTERNAL int32_t ez_kokoro_conv1d_run(ez_kokoro_ctx *c, const ez_kokoro_conv *cv, const float *x, int t_in,
                                         int stride, int pad, int dilation, float *y);
/* y = ConvTranspose1d (ez_tts_conv_transpose1d) of x [cv->c_in, t_in]. */
EZ_INTERNAL int32_t ez_kokoro_convt_run(ez_kokoro_ctx *c, const ez_kokoro_conv *cv, const float *x, int t_in,
                                        int stride, int pad, int out_pad, int groups, float *y);
/* y[T, 2H] = the bidirectional LSTM over x[T, n_in]. */
EZ_INTERNAL int32_t ez_kokoro_bilstm_run(ez_kokoro_ctx *c, const ez_kokoro_bilstm *l, const float *x,
                                         int T, float *y);
/* What follows an AdaIN (fused into it). */
typedef enum { EZ_KOKORO_ACT_NONE, EZ_KOKORO_ACT_LEAKY, EZ_KOKORO_ACT_SNAKE } ez_kokoro_act;

/* x: [C, T] in place: AdaIN with the style s [S], then LeakyReLU(0.2)
 * (ACT_LEAKY) or Snake with alpha [C] (ACT_SNAKE). */
EZ_INTERNAL int32_t ez_kokoro_adain_run(ez_kokoro_ctx *c, const ez_kokoro_adain *a, const float *s,
                                        float *x, int T, ez_kokoro_act act, const float *alpha);
/* out: [dim_out, T * (upsample ? 2 : 1)] = AdainResBlk1d(x [dim_in, T], s).
 * ELIZA_E_CANCELLED before it starts if the cancel flag is set. */
EZ_INTERNAL int32_t ez_kokoro_resblk_run(ez_kokoro_ctx *c, const ez_kokoro_resblk *b, const float *x,
                                         int T, const float *s, float *out);
/* [C, T] <-> [T, C]. */
EZ_INTERNAL void ez_kokoro_transpose(const float *x, int rows, int cols, float *y);

/* ---- stages ------------------------------------------------------------------------ */

/* ids [T] (padded) -> d_en [T, D] (ALBERT, then bert_encoder). */
EZ_INTERNAL int32_t ez_kokoro_albert(ez_kokoro_ctx *c, const int32_t *ids, int T, float *d_en);

/* d_en [T, D], predictor style s [S] -> d [T, D + S] (duration encoder) and
 * dur [T] frames per token; returns the total in *n_frames. */
EZ_INTERNAL int32_t ez_kokoro_durations(ez_kokoro_ctx *c, const float *d_en, int T, const float *s,
                                        float speed, float *d, int32_t *dur, int *n_frames);

/* en [F, D + S] (d repeated by the durations) -> F0, N [2F]. */
EZ_INTERNAL int32_t ez_kokoro_f0n(ez_kokoro_ctx *c, const float *en, int F, const float *s,
                                  float *f0, float *n);

/* ids [T] -> t_en [T, D]. */
EZ_INTERNAL int32_t ez_kokoro_text_encoder(ez_kokoro_ctx *c, const int32_t *ids, int T, float *t_en);

/* asr [D, F], F0/N [2F], decoder style s [S] -> x [ups_channels, 2F]. */
EZ_INTERNAL int32_t ez_kokoro_decoder(ez_kokoro_ctx *c, const float *asr, int F, const float *f0,
                                      const float *n, const float *s, float *x);

/* The harmonic source and its STFT: F0 [T0] -> har [n_fft + 2, T0 * upp / hop + 1]
 * (magnitudes then phases). noise: NULL for no noise, else the seed of the noise. */
EZ_INTERNAL int32_t ez_kokoro_source(ez_kokoro_ctx *c, const float *f0, int T0, const uint64_t *noise,
                                     float *har);

/* x [ups_channels, T0], har, style s -> pcm [T0 * upp]. */
EZ_INTERNAL int32_t ez_kokoro_generator(ez_kokoro_ctx *c, const float *x, int T0, const float *har,
                                        const float *s, float *pcm);

#endif /* EZ_TTS_KOKORO_IMPL_H */
