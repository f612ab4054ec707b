/* Kokoro's decoder and iSTFTNet generator (kokoro/istftnet.py): Decoder,
 * Generator, SourceModuleHnNSF / SineGen, AdaINResBlock1, and TorchSTFT
 * (n_fft 20: a direct DFT is cheaper than any FFT set-up).
 *
 * The harmonic source follows PyTorch's float32 arithmetic step by step
 * (F.interpolate's fused multiply-adds included): its phase reaches 1e5 to
 * 1e6 radians, where one float step is a visible fraction of a cycle. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "tts/kokoro_impl.h"
#include "tts/ops.h"

#define PI_F 3.14159265358979323846f
#define SINE_AMP 0.1f         /* SineGen.sine_amp */
#define NOISE_STD 0.003f      /* SineGen.noise_std */
#define VOICED_THRESHOLD 10.0f /* Generator: voiced_threshod=10 */

int32_t ez_kokoro_decoder(ez_kokoro_ctx *c, const float *asr, int F, const float *f0, const float *n, const float *s,
                          float *x_out) {
    const ez_kokoro_hparams *hp = &c->m->hp;
    const ez_kokoro_weights *w = &c->m->w;
    const int D = hp->hidden, DE = hp->dec_hidden, R = hp->dec_res, mark = c->st->n;
    const int C_in = DE + R + 2;
    float *f0c, *nc, *xin, *x, *ares, *cat, *y;
    int32_t rc = ELIZA_E_NOMEM;
    int res = 1;

    if (!(f0c = ez_kokoro_alloc(c->st, F)) || !(nc = ez_kokoro_alloc(c->st, F)) ||
        !(xin = ez_kokoro_alloc(c->st, (int64_t)(D + 2) * F)) || !(x = ez_kokoro_alloc(c->st, (int64_t)DE * F)) ||
        !(ares = ez_kokoro_alloc(c->st, (int64_t)R * F)) || !(cat = ez_kokoro_alloc(c->st, (int64_t)C_in * F)) ||
        !(y = ez_kokoro_alloc(c->st, (int64_t)DE * F)))
        goto done;
    /* F0_conv / N_conv: stride 2 brings the curves back to the frame rate */
    if ((rc = ez_kokoro_conv1d_run(c, &w->f0_conv, f0, 2 * F, 2, 1, 1, f0c)) ||
        (rc = ez_kokoro_conv1d_run(c, &w->n_conv, n, 2 * F, 2, 1, 1, nc)))
        goto done;
    memcpy(xin, asr, (size_t)D * F * sizeof *xin);
    memcpy(xin + (int64_t)D * F, f0c, (size_t)F * sizeof *xin);
    memcpy(xin + (int64_t)(D + 1) * F, nc, (size_t)F * sizeof *xin);
    if ((rc = ez_kokoro_resblk_run(c, &w->encode, xin, F, s, x))) goto done;
    if ((rc = ez_kokoro_record(c, "dec_encode", x, DE, F, 0))) goto done;
    if ((rc = ez_kokoro_conv1d_run(c, &w->asr_res, asr, F, 1, 0, 1, ares))) goto done;

    for (int i = 0; i < EZ_KOKORO_N_DECODE; i++) {
        const ez_kokoro_resblk *b = &w->decode[i];
        const int last = i == EZ_KOKORO_N_DECODE - 1;
        if (res) {
            memcpy(cat, x, (size_t)DE * F * sizeof *cat);
            memcpy(cat + (int64_t)DE * F, ares, (size_t)R * F * sizeof *cat);
            memcpy(cat + (int64_t)(DE + R) * F, f0c, (size_t)F * sizeof *cat);
            memcpy(cat + (int64_t)(DE + R + 1) * F, nc, (size_t)F * sizeof *cat);
        }
        if ((rc = ez_kokoro_resblk_run(c, b, res ? cat : x, F, s, last ? x_out : y))) goto done;
        if (!last) memcpy(x, y, (size_t)DE * F * sizeof *x);
        if (b->upsample) res = 0;
    }
    rc = ez_kokoro_record(c, "gen_in", x_out, hp->ups_channels, 2 * (int64_t)F, 0);
done:
    ez_kokoro_release(c->st, mark);
    return rc;
}

/* ---- harmonic source --------------------------------------------------------------- */

/* torch.remainder(a, 1) */
static float rem1(float a) {
    float r = fmodf(a, 1.0f);
    if (r != 0.0f && r < 0.0f) r += 1.0f;
    return r;
}

/* splitmix64's finalizer: a counter-based generator, so that each sample's
 * draws depend on the seed and the sample index only (not on the threads). */
static uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Standard normal draws 2p and 2p + 1 of sample i: Box-Muller on two
 * 24-bit uniforms from one 64-bit draw (tails to 5.8 sigma; the noise is
 * 0.003 or 0.1 / 3 of the sines' amplitude). */
static void gaussian_pair(uint64_t seed, int64_t i, int p, float out[2]) {
    uint64_t z = mix64(seed ^ mix64((uint64_t)i * 64u + (uint64_t)p));
    float u1 = ((float)(z >> 40) + 1.0f) * 0x1.0p-24f;        /* (0, 1] */
    float u2 = (float)((z >> 8) & 0xFFFFFFu) * 0x1.0p-24f;     /* [0, 1) */
    float r = sqrtf(-2.0f * logf(u1)), a = 6.2831853071795865f * u2;
    out[0] = r * cosf(a);
    out[1] = r * sinf(a);
}

/* torch.hann_window(n, periodic=True) in float32: arange * (2 pi / n), cos, * -0.5, + 0.5 */
static void hann(float *win, int n) {
    const float step = (float)(2.0 * 3.14159265358979323846 / n);
    for (int i = 0; i < n; i++) win[i] = cosf((float)i * step) * -0.5f + 0.5f;
}

typedef struct {
    const float *f0, *ph, *w, *b; /* ph: [T0, nh] phase at the frame rate, times upp */
    int T0, nh;
    float scale;                  /* (float)(1 / upp) */
    const uint64_t *noise;        /* seed, or NULL */
    float *src;
} sine_job;

static void sine_samples(void *ctx, int64_t i_begin, int64_t i_end, int thread_index) {
    const sine_job *j = (const sine_job *)ctx;
    float sw[EZ_KOKORO_MAX_HARMONICS];
    (void)thread_index;
    for (int64_t i = i_begin; i < i_end; i++) {
        float pos = fmaf(j->scale, (float)i + 0.5f, -0.5f), l0, l1, uv, acc;
        int64_t i0, i1, inear;
        if (pos < 0.0f) pos = 0.0f;
        i0 = EZ_MIN((int64_t)floorf(pos), (int64_t)j->T0 - 1);
        l1 = pos - (float)i0;
        l1 = l1 < 0.0f ? 0.0f : l1 > 1.0f ? 1.0f : l1;
        l0 = 1.0f - l1;
        i1 = i0 + (i0 < j->T0 - 1);
        inear = EZ_MIN((int64_t)floorf((float)i * j->scale), (int64_t)j->T0 - 1);
        uv = j->f0[inear] > VOICED_THRESHOLD ? 1.0f : 0.0f;
        for (int h = 0; h < j->nh; h++) {
            float p = fmaf(l0, j->ph[i0 * j->nh + h], l1 * j->ph[i1 * j->nh + h]);
            sw[h] = sinf(p) * SINE_AMP * uv;
        }
        if (j->noise) {
            float amp = uv * NOISE_STD + ((1.0f - uv) * SINE_AMP) / 3.0f, g[2];
            for (int h = 0; h < j->nh; h++) {
                if (!(h & 1)) gaussian_pair(*j->noise, i, h / 2, g);
                sw[h] += amp * g[h & 1];
            }
        }
        acc = j->b[0];
        for (int h = 0; h < j->nh; h++) acc += j->w[h] * sw[h];
        j->src[i] = tanhf(acc);
    }
}

/* SineGen + SourceModuleHnNSF: har_source[L] = tanh(l_linear(sines * uv + noise)).
 * The reference's random initial phase (torch.rand, harmonics above the
 * fundamental) is added to sample 0 only, which the 1/upp linear
 * downsampling never reads (its first output blends samples upp/2 - 1 and
 * upp/2): it has no effect on the output, so it is not drawn here. */
static int32_t sine_source(ez_kokoro_ctx *c, const float *f0, int T0, const uint64_t *noise, float *src) {
    const ez_kokoro_hparams *hp = &c->m->hp;
    const ez_kokoro_linear *lin = &c->m->w.l_linear;
    const int nh = hp->n_harmonic, mark = c->st->n;
    int upp = hp->hop;
    float *ph;
    sine_job job;
    for (int i = 0; i < hp->n_ups; i++) upp *= hp->ups_rate[i];
    if (!(ph = ez_kokoro_alloc(c->st, (int64_t)T0 * nh))) return ELIZA_E_NOMEM;

    /* rad = (f0 * h / sr) % 1 is constant over each frame's upp samples (nearest
     * upsampling), so downsampling it by upp (linear, centred) gives it back
     * exactly; phase = cumsum(rad) * 2 * pi (float32, accumulated in double
     * as torch.cumsum does on the CPU), then * upp. */
    for (int h = 0; h < nh; h++) {
        double cum = 0.0;
        for (int d = 0; d < T0; d++) {
            float rad = rem1((f0[d] * (float)(h + 1)) / (float)EZ_KOKORO_SINE_RATE);
            cum += rad;
            ph[(int64_t)d * nh + h] = (((float)cum * 2.0f) * PI_F) * (float)upp;
        }
    }
    /* F.interpolate(scale_factor=upp, mode="linear") and nn.Upsample (nearest),
     * with PyTorch's float index arithmetic (fused multiply-adds included) */
    job.f0 = f0;
    job.ph = ph;
    if (!(job.w = ez_kokoro_f32(c, &lin->w))) {
        ez_kokoro_release(c->st, mark);
        return ELIZA_E_NOMEM;
    }
    job.b = lin->b;
    job.T0 = T0;
    job.nh = nh;
    job.scale = (float)(1.0 / upp);
    job.noise = noise;
    job.src = src;
    ez_pool_for(c->pool, (int64_t)T0 * upp, 4096, sine_samples, &job);
    ez_kokoro_release(c->st, mark);
    return ELIZA_OK;
}

typedef struct {
    const float *x, *win;
    const double *cs, *sn;
    int64_t L, NF;
    int N, hop;
    float *out;
} stft_job;

static void stft_frames(void *ctx, int64_t j0, int64_t j1, int thread_index) {
    const stft_job *s = (const stft_job *)ctx;
    const int N = s->N, nb = N / 2 + 1, half = N / 2;
    float frame[EZ_KOKORO_MAX_FFT];
    (void)thread_index;
    for (int64_t j = j0; j < j1; j++) {
        for (int i = 0; i < N; i++) {
            int64_t p = j * s->hop + i - half; /* reflect: x[-1] = x[1], x[L] = x[L - 2] */
            if (p < 0) p = -p;
            if (p >= s->L) p = 2 * (s->L - 1) - p;
            frame[i] = s->x[p] * s->win[i];
        }
        for (int k = 0; k < nb; k++) {
            double re = 0.0, im = 0.0;
            for (int i = 0; i < N; i++) {
                int m = (k * i) % N;
                re += frame[i] * s->cs[m];
                im -= frame[i] * s->sn[m];
            }
            if (k == 0 || k == half) im = 0.0; /* a real transform's DC and Nyquist bins */
            s->out[(int64_t)k * s->NF + j] = (float)sqrt(re * re + im * im);
            s->out[(int64_t)(nb + k) * s->NF + j] = (float)atan2(im, re);
        }
    }
}

/* cos and sin of 2 pi i / N, i < N. */
static void twiddles(double *cs, double *sn, int N) {
    for (int i = 0; i < N; i++) {
        cs[i] = cos(2.0 * 3.14159265358979323846 * i / N);
        sn[i] = sin(2.0 * 3.14159265358979323846 * i / N);
    }
}

/* torch.stft(center=True, reflect padding, hann window, onesided) of x[L]
 * as [magnitude (n_fft/2 + 1 rows), phase (n_fft/2 + 1 rows)] x NF frames. */
static int32_t stft(ez_kokoro_ctx *c, const float *x, int64_t L, float *out) {
    const int N = c->m->hp.n_fft, half = N / 2;
    float win[EZ_KOKORO_MAX_FFT];
    double cs[EZ_KOKORO_MAX_FFT], sn[EZ_KOKORO_MAX_FFT];
    stft_job job;
    if (L <= half)
        return ez_fail(ELIZA_E_INVALID_ARG, "STFT of %" PRId64 " samples: reflect padding needs more than %d", L, half);
    hann(win, N);
    twiddles(cs, sn, N);
    job.x = x;
    job.win = win;
    job.cs = cs;
    job.sn = sn;
    job.L = L;
    job.NF = L / c->m->hp.hop + 1;
    job.N = N;
    job.hop = c->m->hp.hop;
    job.out = out;
    ez_pool_for(c->pool, job.NF, 256, stft_frames, &job);
    return ELIZA_OK;
}

int32_t ez_kokoro_source(ez_kokoro_ctx *c, const float *f0, int T0, const uint64_t *noise, float *har) {
    const ez_kokoro_hparams *hp = &c->m->hp;
    const int mark = c->st->n;
    int upp = hp->hop;
    int64_t L;
    float *src;
    int32_t rc = ELIZA_E_NOMEM;
    for (int i = 0; i < hp->n_ups; i++) upp *= hp->ups_rate[i];
    L = (int64_t)T0 * upp;
    if (!(src = ez_kokoro_alloc(c->st, L))) goto done;
    if ((rc = sine_source(c, f0, T0, noise, src)) || (rc = ez_kokoro_record(c, "har_source", src, L, 0, 0)) ||
        (rc = stft(c, src, L, har)))
        goto done;
    rc = ez_kokoro_record(c, "har", har, hp->n_fft + 2, L / hp->hop + 1, 0);
done:
    ez_kokoro_release(c->st, mark);
    return rc;
}

/* ---- generator ----------------------------------------------------------------------- */

/* The generator's element-wise passes over [C, T] buffers (millions of
 * values at the last stage), split over the pool. Each value goes through
 * the same operations whatever chunk holds it. */
enum { EW_COPY, EW_ADD, EW_ADD_COPY, EW_ADD_SCALE, EW_EXP, EW_SIN, EW_LEAKY };

typedef struct {
    int op;
    float *y, *z;
    const float *a;
    float v;
} ew_job;

static void ew_range(void *ctx, int64_t i0, int64_t i1, int thread_index) {
    const ew_job *j = (const ew_job *)ctx;
    float *y = j->y, *z = j->z;
    const float *a = j->a;
    (void)thread_index;
    switch (j->op) {
    case EW_COPY: memcpy(y + i0, a + i0, (size_t)(i1 - i0) * sizeof *y); break;
    case EW_ADD:
        for (int64_t i = i0; i < i1; i++) y[i] = a[i] + y[i];
        break;
    case EW_ADD_COPY: /* y = a + y, then z = y */
        for (int64_t i = i0; i < i1; i++) z[i] = y[i] = a[i] + y[i];
        break;
    case EW_ADD_SCALE: /* y = (y + a) / v */
        for (int64_t i = i0; i < i1; i++) y[i] = (y[i] + a[i]) / j->v;
        break;
    case EW_EXP:
        for (int64_t i = i0; i < i1; i++) y[i] = expf(y[i]);
        break;
    case EW_SIN:
        for (int64_t i = i0; i < i1; i++) y[i] = sinf(y[i]);
        break;
    default: ez_tts_leaky_relu(y + i0, i1 - i0, j->v); break;
    }
}

static void ew(ez_pool *pool, int op, float *y, float *z, const float *a, float v, int64_t n) {
    ew_job j;
    j.op = op;
    j.y = y;
    j.z = z;
    j.a = a;
    j.v = v;
    ez_pool_for(pool, n, 32768, ew_range, &j);
}

/* AdaINResBlock1: x [C, T] in place. The generator's unit of work: a
 * cancel is seen here, so it takes effect within one block. */
static int32_t resblock1(ez_kokoro_ctx *c, const ez_kokoro_resblock1 *b, float *x, int T, const float *s) {
    const int C = b->C, k = b->k, mark = c->st->n;
    float *t, *u;
    int32_t rc;
    if (ez_kokoro_cancelled(c)) return ez_fail(ELIZA_E_CANCELLED, "Kokoro forward cancelled in the generator");
    if (!(t = ez_kokoro_alloc(c->st, (int64_t)C * T)) || !(u = ez_kokoro_alloc(c->st, (int64_t)C * T)))
        return ELIZA_E_NOMEM;
    ew(c->pool, EW_COPY, t, NULL, x, 0.0f, (int64_t)C * T);
    for (int j = 0; j < 3; j++) {
        const int d = b->dilation[j];
        if ((rc = ez_kokoro_adain_run(c, &b->adain1[j], s, t, T, EZ_KOKORO_ACT_SNAKE, b->alpha1[j]))) return rc;
        if ((rc = ez_kokoro_conv1d_run(c, &b->convs1[j], t, T, 1, (k * d - d) / 2, d, u)) ||
            (rc = ez_kokoro_adain_run(c, &b->adain2[j], s, u, T, EZ_KOKORO_ACT_SNAKE, b->alpha2[j])) ||
            (rc = ez_kokoro_conv1d_run(c, &b->convs2[j], u, T, 1, (k - 1) / 2, 1, t)))
            return rc;
        /* x = t + x, and the next dilation's input t = x */
        ew(c->pool, j < 2 ? EW_ADD_COPY : EW_ADD, x, t, t, 0.0f, (int64_t)C * T);
    }
    ez_kokoro_release(c->st, mark);
    return ELIZA_OK;
}

typedef struct {
    const float *mag, *phase, *win;
    const double *cs, *sn;
    int64_t NF;
    int N;
    float *frames; /* [NF, N]: each frame's windowed inverse transform */
} istft_job;

static void istft_frames(void *ctx, int64_t j0, int64_t j1, int thread_index) {
    const istft_job *s = (const istft_job *)ctx;
    const int N = s->N, nb = N / 2 + 1, half = N / 2;
    double re[EZ_KOKORO_MAX_FFT / 2 + 1], im[EZ_KOKORO_MAX_FFT / 2 + 1];
    (void)thread_index;
    for (int64_t j = j0; j < j1; j++) {
        for (int k = 0; k < nb; k++) {
            float m = s->mag[(int64_t)k * s->NF + j], p = s->phase[(int64_t)k * s->NF + j];
            re[k] = m * cosf(p);
            im[k] = m * sinf(p);
        }
        /* irfft: the imaginary parts of the DC and Nyquist bins do not count */
        for (int i = 0; i < N; i++) {
            double acc = re[0] + (i & 1 ? -re[half] : re[half]);
            for (int k = 1; k < half; k++) {
                int mi = (k * i) % N;
                acc += 2.0 * (re[k] * s->cs[mi] - im[k] * s->sn[mi]);
            }
            s->frames[j * N + i] = (float)(acc / N) * s->win[i];
        }
    }
}

/* torch.istft(center=True, hann window) of Z = mag * exp(i * phase), each
 * [n_fft/2 + 1, NF], into pcm[hop * (NF - 1)]: overlap-add, divided by the
 * summed squared window. */
static int32_t istft(ez_kokoro_ctx *c, const float *mag, const float *phase, int64_t NF, float *pcm) {
    const int N = c->m->hp.n_fft, hop = c->m->hp.hop, half = N / 2, mark = c->st->n;
    const int64_t full = N + hop * (NF - 1);
    float win[EZ_KOKORO_MAX_FFT], *ola, *env, *frames;
    double cs[EZ_KOKORO_MAX_FFT], sn[EZ_KOKORO_MAX_FFT];
    istft_job job;
    if (!(ola = ez_kokoro_alloc(c->st, full)) || !(env = ez_kokoro_alloc(c->st, full)) ||
        !(frames = ez_kokoro_alloc(c->st, NF * N)))
        return ELIZA_E_NOMEM;
    hann(win, N);
    twiddles(cs, sn, N);
    job.mag = mag;
    job.phase = phase;
    job.win = win;
    job.cs = cs;
    job.sn = sn;
    job.NF = NF;
    job.N = N;
    job.frames = frames;
    ez_pool_for(c->pool, NF, 256, istft_frames, &job);
    memset(ola, 0, (size_t)full * sizeof *ola);
    memset(env, 0, (size_t)full * sizeof *env);
    for (int64_t j = 0; j < NF; j++)
        for (int i = 0; i < N; i++) {
            ola[j * hop + i] += frames[j * N + i];
            env[j * hop + i] += win[i] * win[i];
        }
    for (int64_t t = 0; t < hop * (NF - 1); t++) pcm[t] = ola[t + half] / env[t + half];
    ez_kokoro_release(c->st, mark);
    return ELIZA_OK;
}

/* Profile phase names of the upsampling stages. */
static const char *const STAGE_NAMES[EZ_KOKORO_MAX_UPS] = {"generator.0", "generator.1", "generator.2",
                                                            "generator.3"};

int32_t ez_kokoro_generator(ez_kokoro_ctx *c, const float *x_in, int T0, const float *har, const float *s,
                            float *pcm) {
    const ez_kokoro_hparams *hp = &c->m->hp;
    const ez_kokoro_weights *w = &c->m->w;
    const int nk = hp->n_kernels, nb = hp->n_fft / 2 + 1, mark = c->st->n;
    int64_t NF = 1, T = T0, C = hp->ups_channels;
    float *x, *xs, *up, *acc, *rb;
    int32_t rc = ELIZA_E_NOMEM;

    for (int i = 0; i < hp->n_ups; i++) NF *= hp->ups_rate[i];
    NF = NF * T0 + 1;
    if (!(x = ez_kokoro_alloc(c->st, C * T))) goto done;
    memcpy(x, x_in, (size_t)(C * T) * sizeof *x);

    for (int i = 0; i < hp->n_ups; i++) {
        const int last = i == hp->n_ups - 1, u = hp->ups_rate[i], k = hp->ups_kernel[i];
        const int64_t Co = C / 2;
        int stride = 1, kn = 1, pad = 0;
        int64_t Tn, Tu;
        if (!last) {
            for (int j = i + 1; j < hp->n_ups; j++) stride *= hp->ups_rate[j];
            kn = 2 * stride;
            pad = (stride + 1) / 2;
        }
        Tn = ez_conv1d_out_len((int)NF, kn, stride, pad, 1);
        Tu = ez_conv_transpose1d_out_len((int)T, k, u, (k - u) / 2, 0) + (last ? 1 : 0);
        if (Tn != Tu) {
            rc = ez_fail(ELIZA_E_FORMAT, "Kokoro generator stage %d: %" PRId64 " upsampled frames but %" PRId64
                         " source frames", i, Tu, Tn);
            goto done;
        }
        rc = ELIZA_E_NOMEM;
        if (!(xs = ez_kokoro_alloc(c->st, Co * Tn)) || !(up = ez_kokoro_alloc(c->st, Co * Tu)) ||
            !(acc = ez_kokoro_alloc(c->st, Co * Tu)) || !(rb = ez_kokoro_alloc(c->st, Co * Tu)))
            goto done;
        ew(c->pool, EW_LEAKY, x, NULL, NULL, 0.1f, C * T);
        if ((rc = ez_kokoro_conv1d_run(c, &w->noise_convs[i], har, (int)NF, stride, pad, 1, xs)) ||
            (rc = resblock1(c, &w->noise_res[i], xs, (int)Tn, s)))
            goto done;
        if (last) {
            /* ReflectionPad1d((1, 0)): a copy of column 1 in front */
            if ((rc = ez_kokoro_convt_run(c, &w->ups[i], x, (int)T, u, (k - u) / 2, 0, 1, acc))) goto done;
            for (int64_t ch = 0; ch < Co; ch++) {
                memcpy(up + ch * Tu + 1, acc + ch * (Tu - 1), (size_t)(Tu - 1) * sizeof *up);
                up[ch * Tu] = acc[ch * (Tu - 1) + 1];
            }
        } else {
            if ((rc = ez_kokoro_convt_run(c, &w->ups[i], x, (int)T, u, (k - u) / 2, 0, 1, up))) goto done;
        }
        ew(c->pool, EW_ADD, up, NULL, xs, 0.0f, Co * Tu);
        /* the stage's resblocks on the same input, averaged */
        for (int j = 0; j < nk; j++) {
            float *dst = j ? rb : acc;
            ew(c->pool, EW_COPY, dst, NULL, up, 0.0f, Co * Tu);
            if ((rc = resblock1(c, &w->resblocks[i * nk + j], dst, (int)Tu, s))) goto done;
            if (j) ew(c->pool, j == nk - 1 ? EW_ADD_SCALE : EW_ADD, acc, NULL, rb, (float)nk, Co * Tu);
        }
        x = acc;
        C = Co;
        T = Tu;
        ez_kokoro_phase_end(c, STAGE_NAMES[i]);
    }
    rc = ELIZA_E_NOMEM;
    if (T != NF || !(up = ez_kokoro_alloc(c->st, (hp->n_fft + 2) * T))) {
        if (T != NF)
            rc = ez_fail(ELIZA_E_FORMAT, "Kokoro generator: %" PRId64 " output frames where the source has %" PRId64, T,
                         NF);
        goto done;
    }
    ew(c->pool, EW_LEAKY, x, NULL, NULL, 0.01f, C * T);
    if ((rc = ez_kokoro_conv1d_run(c, &w->conv_post, x, (int)T, 1, 3, 1, up)) ||
        (rc = ez_kokoro_record(c, "conv_post", up, hp->n_fft + 2, T, 0))) goto done;
    /* spec = exp(x[:nb]), phase = sin(x[nb:]) */
    ew(c->pool, EW_EXP, up, NULL, NULL, 0.0f, nb * T);
    ew(c->pool, EW_SIN, up + nb * T, NULL, NULL, 0.0f, nb * T);
    rc = istft(c, up, up + nb * T, T, pcm);
done:
    ez_kokoro_release(c->st, mark);
    return rc;
}
