/* AVX2 + FMA kernels of the FFT convolution (ops_fft.h): the transforms
 * and spectra of the portable bodies (ops_fft_impl.h), one __m256 per
 * sample of 8 lanes, with fused multiply-adds, and with fewer passes over
 * the 32 points: the gather into bit-reversed order rides on the first two
 * radix-2 stages, and the later stages go two to a pass (as a radix-4
 * step). Same results up to rounding (tests/c/test_tts_ops.c holds both
 * to a DFT). Compiled with -mavx2 -mfma on x86-64 and only called when the
 * CPU has them. */
#include "tts/ops_fft.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>
#include <string.h>

#include "core/kernels/vmath_avx2.h"

/* Complex vectors: 8 lanes of real and imaginary parts. */
typedef struct {
    __m256 re, im;
} cvec;

static inline cvec cload(const float *re, const float *im) {
    cvec v = {_mm256_loadu_ps(re), _mm256_loadu_ps(im)};
    return v;
}

static inline void cstore(float *re, float *im, cvec v) {
    _mm256_storeu_ps(re, v.re);
    _mm256_storeu_ps(im, v.im);
}

static inline cvec cadd(cvec a, cvec b) {
    cvec v = {_mm256_add_ps(a.re, b.re), _mm256_add_ps(a.im, b.im)};
    return v;
}

static inline cvec csub(cvec a, cvec b) {
    cvec v = {_mm256_sub_ps(a.re, b.re), _mm256_sub_ps(a.im, b.im)};
    return v;
}

/* a (wr + i wi) */
static inline cvec cmul(cvec a, __m256 wr, __m256 wi) {
    cvec v = {_mm256_fmsub_ps(wr, a.re, _mm256_mul_ps(wi, a.im)), _mm256_fmadd_ps(wr, a.im, _mm256_mul_ps(wi, a.re))};
    return v;
}

/* a times -i (forward) or +i (inverse). */
static inline cvec crot(cvec a, int inverse) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    cvec v;
    if (inverse) {
        v.re = _mm256_xor_ps(a.im, sign);
        v.im = a.re;
    } else {
        v.re = a.im;
        v.im = _mm256_xor_ps(a.re, sign);
    }
    return v;
}

/* e^{-2 pi i j / len} (forward) or its conjugate, from the plan's table. */
static inline void twiddle(const ez_fft_plan *p, int j, int len, int inverse, __m256 *wr, __m256 *wi) {
    int idx = j * (p->n / len);
    *wr = _mm256_set1_ps(p->cos_n[idx]);
    *wi = _mm256_set1_ps(inverse ? p->sin_n[idx] : -p->sin_n[idx]);
}

/* The radix-2 stages of length 2 and 4 on a[0..3] (bit-reversed order). */
static inline void first_stages(cvec a[4], int inverse) {
    cvec b0 = cadd(a[0], a[1]), b1 = csub(a[0], a[1]), b2 = cadd(a[2], a[3]), b3 = crot(csub(a[2], a[3]), inverse);
    a[0] = cadd(b0, b2);
    a[2] = csub(b0, b2);
    a[1] = cadd(b1, b3);
    a[3] = csub(b1, b3);
}

/* The radix-2 stages of length len and 2 len in one pass over z[0..m). */
static void two_stages(const ez_fft_plan *p, ez_fft_lanes *re, ez_fft_lanes *im, int len, int inverse) {
    const int m = p->m, h = len / 2;
    for (int j = 0; j < h; j++) {
        __m256 wr, wi, vr, vi;
        twiddle(p, j, len, inverse, &wr, &wi);
        twiddle(p, j, 2 * len, inverse, &vr, &vi);
        for (int i = j; i < m; i += 2 * len) {
            cvec a = cload(re[i], im[i]), b = cload(re[i + h], im[i + h]);
            cvec c = cload(re[i + len], im[i + len]), e = cload(re[i + len + h], im[i + len + h]);
            cvec wb = cmul(b, wr, wi), we = cmul(e, wr, wi);
            cvec a1 = cadd(a, wb), b1 = csub(a, wb), c1 = cadd(c, we), e1 = csub(c, we);
            /* stage 2 len: (a1, c1) with v, (b1, e1) with v e^{-+ i pi / 2} */
            cvec vc = cmul(c1, vr, vi), ve = crot(cmul(e1, vr, vi), inverse);
            cstore(re[i], im[i], cadd(a1, vc));
            cstore(re[i + len], im[i + len], csub(a1, vc));
            cstore(re[i + h], im[i + h], cadd(b1, ve));
            cstore(re[i + len + h], im[i + len + h], csub(b1, ve));
        }
    }
}

static void one_stage(const ez_fft_plan *p, ez_fft_lanes *re, ez_fft_lanes *im, int len, int inverse) {
    const int m = p->m, h = len / 2;
    for (int j = 0; j < h; j++) {
        __m256 wr, wi;
        twiddle(p, j, len, inverse, &wr, &wi);
        for (int i = j; i < m; i += len) {
            cvec a = cload(re[i], im[i]), b = cmul(cload(re[i + h], im[i + h]), wr, wi);
            cstore(re[i], im[i], cadd(a, b));
            cstore(re[i + h], im[i + h], csub(a, b));
        }
    }
}

/* The stages from length 8 on (the first two are done by the caller). */
static void later_stages(const ez_fft_plan *p, ez_fft_lanes *re, ez_fft_lanes *im, int inverse) {
    int len = 8;
    for (; 2 * len <= p->m; len *= 4) two_stages(p, re, im, len, inverse);
    if (len <= p->m) one_stage(p, re, im, len, inverse);
}

/* in[q] = x[2q] + i x[2q+1] with x[u] = src[u step]. */
static inline cvec input_point(const float *src, int64_t step, int q) {
    return cload(src + 2 * q * step, src + (2 * q + 1) * step);
}

static void forward_block(const ez_fft_plan *p, const float *in, int64_t step, float *x, int64_t x_slot,
                          int64_t part) {
    const int m = p->m;
    const __m256 two = _mm256_set1_ps(2.0f);
    ez_fft_lanes re[EZ_FFT_MAX_N / 2], im[EZ_FFT_MAX_N / 2];
    /* the gather into bit-reversed order rides on the first two stages */
    for (int g = 0; g < m; g += 4) {
        cvec a[4];
        for (int t = 0; t < 4; t++) a[t] = input_point(in, step, p->rev[g + t]);
        first_stages(a, 0);
        for (int t = 0; t < 4; t++) cstore(re[g + t], im[g + t], a[t]);
    }
    later_stages(p, re, im, 0);
    {
        __m256 a = _mm256_loadu_ps(re[0]), b = _mm256_loadu_ps(im[0]);
        _mm256_storeu_ps(x, _mm256_mul_ps(two, _mm256_add_ps(a, b)));
        _mm256_storeu_ps(x + part, _mm256_mul_ps(two, _mm256_sub_ps(a, b)));
    }
    for (int f = 1; f < m; f++) {
        const __m256 c = _mm256_set1_ps(p->cos_n[f]), s = _mm256_set1_ps(p->sin_n[f]);
        __m256 ar = _mm256_loadu_ps(re[f]), ai = _mm256_loadu_ps(im[f]);
        __m256 br = _mm256_loadu_ps(re[m - f]), bi = _mm256_loadu_ps(im[m - f]);
        __m256 sr = _mm256_add_ps(ar, br), si = _mm256_sub_ps(ai, bi);
        __m256 dr = _mm256_sub_ps(ar, br), di = _mm256_add_ps(ai, bi);
        __m256 xr = _mm256_sub_ps(_mm256_fmadd_ps(c, di, sr), _mm256_mul_ps(s, dr));
        __m256 xi = _mm256_sub_ps(si, _mm256_fmadd_ps(c, dr, _mm256_mul_ps(s, di)));
        float *slot = x + f * x_slot;
        _mm256_storeu_ps(slot, xr);
        _mm256_storeu_ps(slot + part, xi);
        _mm256_storeu_ps(slot + 2 * part, _mm256_add_ps(xr, xi));
    }
}


static void inverse_block(const ez_fft_plan *p, const float *y, int64_t y_slot, int64_t part, float *out,
                          int64_t step, int count) {
    const int m = p->m;
    ez_fft_lanes re[EZ_FFT_MAX_N / 2], im[EZ_FFT_MAX_N / 2];
    {
        __m256 y0 = _mm256_loadu_ps(y), ym = _mm256_loadu_ps(y + part);
        _mm256_storeu_ps(re[0], _mm256_add_ps(y0, ym));
        _mm256_storeu_ps(im[0], _mm256_sub_ps(y0, ym));
    }
    for (int f = 1; f < m; f++) {
        const __m256 c = _mm256_set1_ps(p->cos_n[f]), s = _mm256_set1_ps(p->sin_n[f]);
        const float *ya = y + f * y_slot, *yb = y + (m - f) * y_slot;
        cvec a = cload(ya, ya + part), b = cload(yb, yb + part);
        __m256 er = _mm256_add_ps(a.re, b.re), ei = _mm256_sub_ps(a.im, b.im);
        __m256 dr = _mm256_sub_ps(a.re, b.re), di = _mm256_add_ps(a.im, b.im);
        _mm256_storeu_ps(re[p->rev[f]], _mm256_sub_ps(er, _mm256_fmadd_ps(s, dr, _mm256_mul_ps(c, di))));
        _mm256_storeu_ps(im[p->rev[f]], _mm256_sub_ps(_mm256_fmadd_ps(c, dr, ei), _mm256_mul_ps(s, di)));
    }
    for (int g = 0; g < m; g += 4) {
        cvec a[4];
        for (int t = 0; t < 4; t++) a[t] = cload(re[g + t], im[g + t]);
        first_stages(a, 1);
        for (int t = 0; t < 4; t++) cstore(re[g + t], im[g + t], a[t]);
    }
    later_stages(p, re, im, 1);
    for (int r = 0; r < count; r++)
        _mm256_storeu_ps(out + r * step, _mm256_loadu_ps(r & 1 ? im[r >> 1] : re[r >> 1]));
}

/* ---- lanes ---------------------------------------------------------------------------------- */

/* Whole 8 x 8 blocks inside the input by transposes, the edges element by element. */
static void to_lanes(const float *x, int64_t ld, int n_rows, int64_t t0, int64_t n, int64_t t_len, float *dst,
                     int64_t dst_ld) {
    int64_t t = 0;
    if (n_rows == EZ_FFT_LANES)
        for (; t < n; t++) {
            if (t0 + t >= 0 && t + 8 <= n && t0 + t + 8 <= t_len) {
                __m256 r[8];
                for (int l = 0; l < 8; l++) r[l] = _mm256_loadu_ps(x + l * ld + t0 + t);
                ez_transpose8x8_avx2(r);
                for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + (t + i) * dst_ld, r[i]);
                t += 7;
            } else {
                for (int l = 0; l < 8; l++)
                    dst[t * dst_ld + l] = t0 + t >= 0 && t0 + t < t_len ? x[l * ld + t0 + t] : 0.0f;
            }
        }
    for (; t < n; t++) {
        const int inside = t0 + t >= 0 && t0 + t < t_len;
        for (int l = 0; l < 8; l++) dst[t * dst_ld + l] = inside && l < n_rows ? x[l * ld + t0 + t] : 0.0f;
    }
}

static void from_lanes(const float *src, int n_rows, int64_t n, const float *bias, float *y, int64_t ld) {
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + (t + i) * 8);
        ez_transpose8x8_avx2(r);
        for (int l = 0; l < n_rows; l++)
            _mm256_storeu_ps(y + l * ld + t, _mm256_add_ps(r[l], _mm256_set1_ps(bias ? bias[l] : 0.0f)));
    }
    for (int l = 0; l < n_rows; l++) {
        const float b = bias ? bias[l] : 0.0f;
        for (int64_t u = t; u < n; u++) y[l * ld + u] = src[u * 8 + l] + b;
    }
}

/* ---- filter spectra (nr a multiple of 16: two vectors per 16 columns of a panel row) ------- */

typedef struct {
    __m256 v[2];
} row16;

static inline void store16(float *p, row16 r) {
    _mm256_storeu_ps(p, r.v[0]);
    _mm256_storeu_ps(p + 8, r.v[1]);
}

static inline row16 sub16(row16 a, row16 b) {
    row16 r = {{_mm256_sub_ps(a.v[0], b.v[0]), _mm256_sub_ps(a.v[1], b.v[1])}};
    return r;
}

/* The layout and the sums are those of the portable spectra (ops_fft_impl.h),
 * 16 columns of a panel at a time. */
static void spectra16(const ez_fft_plan *p, int f, float scale, const float *wt, int k, int c_in, int ci_pad,
                      int n_panels, int nr, float *out) {
    float cs[EZ_FFT_MAX_N], sn[EZ_FFT_MAX_N];
    const int64_t plane = ez_fft_plane_stride(ci_pad, nr, n_panels), width = (int64_t)n_panels * nr;
    const int n_planes = f == 0 ? 2 : 2 * f == p->m ? 3 : 6;
    for (int j = 0; j < k; j++) {
        int idx = (int)(((int64_t)f * j) % p->n);
        cs[j] = scale * p->cos_n[idx];
        sn[j] = scale * p->sin_n[idx];
    }
    for (int ci = 0; ci < ci_pad; ci++)
        for (int q16 = 0; q16 < n_panels * (nr / 16); q16++) {
            const int q = q16 / (nr / 16), h = q16 % (nr / 16);
            float *top = out + q * ez_fft_panel_stride(ci_pad, nr) + (int64_t)ci * nr + 16 * h;
            const float *row = wt + (int64_t)ci * k * width + (int64_t)q * nr + 16 * h;
            __m256 ce0 = _mm256_setzero_ps(), ce1 = ce0, co0 = ce0, co1 = ce0, se0 = ce0, se1 = ce0, so0 = ce0,
                   so1 = ce0;
            row16 cf, sf, cg, sg, zero = {{_mm256_setzero_ps(), _mm256_setzero_ps()}};
            int j = 0;
            if (ci >= c_in) {
                for (int pl = 0; pl < n_planes; pl++) memset(top + pl * plane, 0, sizeof(float) * 16);
                continue;
            }
            for (; j + 1 < k; j += 2, row += 2 * width) {
                __m256 c0 = _mm256_set1_ps(cs[j]), s0 = _mm256_set1_ps(sn[j]);
                __m256 c1 = _mm256_set1_ps(cs[j + 1]), s1 = _mm256_set1_ps(sn[j + 1]);
                __m256 r0 = _mm256_loadu_ps(row), r1 = _mm256_loadu_ps(row + 8);
                __m256 u0 = _mm256_loadu_ps(row + width), u1 = _mm256_loadu_ps(row + width + 8);
                ce0 = _mm256_fmadd_ps(c0, r0, ce0);
                ce1 = _mm256_fmadd_ps(c0, r1, ce1);
                se0 = _mm256_fmadd_ps(s0, r0, se0);
                se1 = _mm256_fmadd_ps(s0, r1, se1);
                co0 = _mm256_fmadd_ps(c1, u0, co0);
                co1 = _mm256_fmadd_ps(c1, u1, co1);
                so0 = _mm256_fmadd_ps(s1, u0, so0);
                so1 = _mm256_fmadd_ps(s1, u1, so1);
            }
            if (j < k) {
                __m256 c0 = _mm256_set1_ps(cs[j]), s0 = _mm256_set1_ps(sn[j]);
                __m256 r0 = _mm256_loadu_ps(row), r1 = _mm256_loadu_ps(row + 8);
                ce0 = _mm256_fmadd_ps(c0, r0, ce0);
                ce1 = _mm256_fmadd_ps(c0, r1, ce1);
                se0 = _mm256_fmadd_ps(s0, r0, se0);
                se1 = _mm256_fmadd_ps(s0, r1, se1);
            }
            cf.v[0] = _mm256_add_ps(ce0, co0), cf.v[1] = _mm256_add_ps(ce1, co1);
            sf.v[0] = _mm256_add_ps(se0, so0), sf.v[1] = _mm256_add_ps(se1, so1);
            cg.v[0] = _mm256_sub_ps(ce0, co0), cg.v[1] = _mm256_sub_ps(ce1, co1);
            sg.v[0] = _mm256_sub_ps(so0, se0), sg.v[1] = _mm256_sub_ps(so1, se1);
            if (f == 0) {
                store16(top, cf);
                store16(top + plane, cg);
                continue;
            }
            store16(top, cf);
            store16(top + plane, sub16(sf, cf));
            store16(top + 2 * plane, sub16(sub16(zero, cf), sf));
            if (n_planes == 6) {
                store16(top + 3 * plane, cg);
                store16(top + 4 * plane, sub16(sg, cg));
                store16(top + 5 * plane, sub16(sub16(zero, cg), sg));
            }
        }
}

static void spectra(const ez_fft_plan *p, int f, float scale, const float *wt, int k, int c_in, int ci_pad,
                    int n_panels, int nr, float *out) {
    if (nr % 16 == 0)
        spectra16(p, f, scale, wt, k, c_in, ci_pad, n_panels, nr, out);
    else
        ez_fft_kernels_portable()->spectra(p, f, scale, wt, k, c_in, ci_pad, n_panels, nr, out);
}

static const ez_fft_kernels avx2_kernels = {forward_block, inverse_block, to_lanes, from_lanes, spectra};

const ez_fft_kernels *ez_fft_kernels_avx2(void) { return &avx2_kernels; }

#else

const ez_fft_kernels *ez_fft_kernels_avx2(void) { return NULL; }

#endif
