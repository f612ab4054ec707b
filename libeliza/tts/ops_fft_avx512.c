/* AVX-512 kernels of the FFT convolution (ops_fft.h): the AVX2 kernels'
 * passes (ops_fft_avx2.c) with two samples of 8 lanes in each __m512
 * where the samples are neighbours in memory:
 *  - the radix-2 stages from length 8 on, where butterflies j and j + 1
 *    sit side by side: one vector of twiddles holds w_j in the low half and
 *    w_{j+1} in the high half;
 *  - the forward transform's split into bins, bins f and f + 1 at once
 *    (Z[M-f] and Z[M-f-1] are neighbours too, in the other order);
 *  - the filter spectra, 16 columns of a panel row in one vector.
 * The gather into bit-reversed order with the first two stages and the
 * inverse's merge, whose samples are scattered, stay 8 lanes wide, and the
 * moves in and out of lanes are the AVX2 ones. Same results up to rounding
 * (tests/c/test_tts_ops.c holds every kernel set to a DFT). Compiled with
 * the AVX-512 flags; used at the avx512 level only. */
#include "tts/ops_fft.h"

#if EZ_ARCH_X86_64

#include <immintrin.h>
#include <string.h>

/* 8-lane complex vectors (one sample), as in ops_fft_avx2.c. */
typedef struct {
    __m256 re, im;
} cvec;

/* Two neighbouring samples: sample i in the low half, i + 1 in the high. */
typedef struct {
    __m512 re, im;
} cvec2;

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

static inline cvec2 cload2(const float *re, const float *im) {
    cvec2 v = {_mm512_loadu_ps(re), _mm512_loadu_ps(im)};
    return v;
}

static inline void cstore2(float *re, float *im, cvec2 v) {
    _mm512_storeu_ps(re, v.re);
    _mm512_storeu_ps(im, v.im);
}

static inline cvec2 cadd2(cvec2 a, cvec2 b) {
    cvec2 v = {_mm512_add_ps(a.re, b.re), _mm512_add_ps(a.im, b.im)};
    return v;
}

static inline cvec2 csub2(cvec2 a, cvec2 b) {
    cvec2 v = {_mm512_sub_ps(a.re, b.re), _mm512_sub_ps(a.im, b.im)};
    return v;
}

/* a (wr + i wi) */
static inline cvec2 cmul2(cvec2 a, __m512 wr, __m512 wi) {
    cvec2 v = {_mm512_fmsub_ps(wr, a.re, _mm512_mul_ps(wi, a.im)), _mm512_fmadd_ps(wr, a.im, _mm512_mul_ps(wi, a.re))};
    return v;
}

static inline cvec2 crot2(cvec2 a, int inverse) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    cvec2 v;
    if (inverse) {
        v.re = _mm512_xor_ps(a.im, sign);
        v.im = a.re;
    } else {
        v.re = a.im;
        v.im = _mm512_xor_ps(a.re, sign);
    }
    return v;
}

/* a in lanes 0-7, b in lanes 8-15. */
static inline __m512 halves(float a, float b) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(a)), _mm256_set1_ps(b), 1);
}

/* The low and high halves of v swapped. */
static inline __m512 swap_halves(__m512 v) { return _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)); }

/* The twiddles of butterflies j and j + 1 at length len (e^{-2 pi i j / len}
 * forward, conjugated inverse). */
static inline void twiddle2(const ez_fft_plan *p, int j, int len, int inverse, __m512 *wr, __m512 *wi) {
    const int step = p->n / len, a = j * step, b = (j + 1) * step;
    *wr = halves(p->cos_n[a], p->cos_n[b]);
    *wi = inverse ? halves(p->sin_n[a], p->sin_n[b]) : halves(-p->sin_n[a], -p->sin_n[b]);
}

/* The radix-2 stages of length 2 and 4 on a[0..3] (bit-reversed order). */
static inline void first_stages(cvec a[4], int inverse) {
    cvec b0 = cadd(a[0], a[1]), b1 = csub(a[0], a[1]), b2 = cadd(a[2], a[3]), b3 = crot(csub(a[2], a[3]), inverse);
    a[0] = cadd(b0, b2);
    a[2] = csub(b0, b2);
    a[1] = cadd(b1, b3);
    a[3] = csub(b1, b3);
}

/* The stages of length len and 2 len (len >= 8) in one pass, butterflies
 * j and j + 1 together. */
static void two_stages(const ez_fft_plan *p, ez_fft_lanes *re, ez_fft_lanes *im, int len, int inverse) {
    const int m = p->m, h = len / 2;
    for (int j = 0; j < h; j += 2) {
        __m512 wr, wi, vr, vi;
        twiddle2(p, j, len, inverse, &wr, &wi);
        twiddle2(p, j, 2 * len, inverse, &vr, &vi);
        for (int i = j; i < m; i += 2 * len) {
            cvec2 a = cload2(re[i], im[i]), b = cload2(re[i + h], im[i + h]);
            cvec2 c = cload2(re[i + len], im[i + len]), e = cload2(re[i + len + h], im[i + len + h]);
            cvec2 wb = cmul2(b, wr, wi), we = cmul2(e, wr, wi);
            cvec2 a1 = cadd2(a, wb), b1 = csub2(a, wb), c1 = cadd2(c, we), e1 = csub2(c, we);
            /* stage 2 len: (a1, c1) with v, (b1, e1) with v e^{-+ i pi / 2} */
            cvec2 vc = cmul2(c1, vr, vi), ve = crot2(cmul2(e1, vr, vi), inverse);
            cstore2(re[i], im[i], cadd2(a1, vc));
            cstore2(re[i + len], im[i + len], csub2(a1, vc));
            cstore2(re[i + h], im[i + h], cadd2(b1, ve));
            cstore2(re[i + len + h], im[i + len + h], csub2(b1, ve));
        }
    }
}

static void one_stage(const ez_fft_plan *p, ez_fft_lanes *re, ez_fft_lanes *im, int len, int inverse) {
    const int m = p->m, h = len / 2;
    for (int j = 0; j < h; j += 2) {
        __m512 wr, wi;
        twiddle2(p, j, len, inverse, &wr, &wi);
        for (int i = j; i < m; i += len) {
            cvec2 a = cload2(re[i], im[i]), b = cmul2(cload2(re[i + h], im[i + h]), wr, wi);
            cstore2(re[i], im[i], cadd2(a, b));
            cstore2(re[i + h], im[i + h], csub2(a, b));
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

/* Slot f of the forward output from the 8 lanes of xr, xi. */
static inline void store_slot(float *slot, int64_t part, __m256 xr, __m256 xi) {
    _mm256_storeu_ps(slot, xr);
    _mm256_storeu_ps(slot + part, xi);
    _mm256_storeu_ps(slot + 2 * part, _mm256_add_ps(xr, xi));
}

static void forward_block(const ez_fft_plan *p, const float *in, int64_t step, float *x, int64_t x_slot,
                          int64_t part) {
    const int m = p->m;
    const __m256 two = _mm256_set1_ps(2.0f);
    ez_fft_lanes re[EZ_FFT_MAX_N / 2], im[EZ_FFT_MAX_N / 2];
    int f = 1;
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
    /* bins f, f + 1 from Z[f..f+1] and Z[M-f], Z[M-f-1] (loaded as Z[M-f-1..M-f], halves swapped) */
    for (; f + 1 < m; f += 2) {
        const __m512 c = halves(p->cos_n[f], p->cos_n[f + 1]), s = halves(p->sin_n[f], p->sin_n[f + 1]);
        __m512 ar = _mm512_loadu_ps(re[f]), ai = _mm512_loadu_ps(im[f]);
        __m512 br = swap_halves(_mm512_loadu_ps(re[m - f - 1])), bi = swap_halves(_mm512_loadu_ps(im[m - f - 1]));
        __m512 sr = _mm512_add_ps(ar, br), si = _mm512_sub_ps(ai, bi);
        __m512 dr = _mm512_sub_ps(ar, br), di = _mm512_add_ps(ai, bi);
        __m512 xr = _mm512_sub_ps(_mm512_fmadd_ps(c, di, sr), _mm512_mul_ps(s, dr));
        __m512 xi = _mm512_sub_ps(si, _mm512_fmadd_ps(c, dr, _mm512_mul_ps(s, di)));
        store_slot(x + f * x_slot, part, _mm512_castps512_ps256(xr), _mm512_castps512_ps256(xi));
        store_slot(x + (f + 1) * x_slot, part, _mm512_extractf32x8_ps(xr, 1), _mm512_extractf32x8_ps(xi, 1));
    }
    for (; f < m; f++) {
        const __m256 c = _mm256_set1_ps(p->cos_n[f]), s = _mm256_set1_ps(p->sin_n[f]);
        __m256 ar = _mm256_loadu_ps(re[f]), ai = _mm256_loadu_ps(im[f]);
        __m256 br = _mm256_loadu_ps(re[m - f]), bi = _mm256_loadu_ps(im[m - f]);
        __m256 sr = _mm256_add_ps(ar, br), si = _mm256_sub_ps(ai, bi);
        __m256 dr = _mm256_sub_ps(ar, br), di = _mm256_add_ps(ai, bi);
        store_slot(x + f * x_slot, part, _mm256_sub_ps(_mm256_fmadd_ps(c, di, sr), _mm256_mul_ps(s, dr)),
                   _mm256_sub_ps(si, _mm256_fmadd_ps(c, dr, _mm256_mul_ps(s, di))));
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

/* ---- lanes: the AVX2 moves (bound by the transposes' loads and stores) ------------------- */

static void to_lanes(const float *x, int64_t ld, int n_rows, int64_t t0, int64_t n, int64_t t_len, float *dst,
                     int64_t dst_ld) {
    ez_fft_kernels_avx2()->to_lanes(x, ld, n_rows, t0, n, t_len, dst, dst_ld);
}

static void from_lanes(const float *src, int n_rows, int64_t n, const float *bias, float *y, int64_t ld) {
    ez_fft_kernels_avx2()->from_lanes(src, n_rows, n, bias, y, ld);
}

/* ---- filter spectra (nr a multiple of 16: one vector per 16 columns of a panel row) ------- */

/* The layout and the sums are those of the portable spectra (ops_fft_impl.h). */
static void spectra16(const ez_fft_plan *p, int f, float scale, const float *wt, int k, int c_in, int ci_pad,
                      int n_panels, int nr, float *out) {
    float cs[EZ_FFT_MAX_N], sn[EZ_FFT_MAX_N];
    const int64_t plane = ez_fft_plane_stride(ci_pad, nr, n_panels), width = (int64_t)n_panels * nr;
    const int n_planes = f == 0 ? 2 : 2 * f == p->m ? 3 : 6;
    const __m512 zero = _mm512_setzero_ps();
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
            __m512 ce = zero, co = zero, se = zero, so = zero, cf, sf, cg, sg;
            int j = 0;
            if (ci >= c_in) {
                for (int pl = 0; pl < n_planes; pl++) memset(top + pl * plane, 0, sizeof(float) * 16);
                continue;
            }
            for (; j + 1 < k; j += 2, row += 2 * width) {
                const __m512 r = _mm512_loadu_ps(row), u = _mm512_loadu_ps(row + width);
                ce = _mm512_fmadd_ps(_mm512_set1_ps(cs[j]), r, ce);
                se = _mm512_fmadd_ps(_mm512_set1_ps(sn[j]), r, se);
                co = _mm512_fmadd_ps(_mm512_set1_ps(cs[j + 1]), u, co);
                so = _mm512_fmadd_ps(_mm512_set1_ps(sn[j + 1]), u, so);
            }
            if (j < k) {
                const __m512 r = _mm512_loadu_ps(row);
                ce = _mm512_fmadd_ps(_mm512_set1_ps(cs[j]), r, ce);
                se = _mm512_fmadd_ps(_mm512_set1_ps(sn[j]), r, se);
            }
            /* slot f: C = ce + co, S = se + so; slot M - f: C = ce - co, S = so - se */
            cf = _mm512_add_ps(ce, co), sf = _mm512_add_ps(se, so);
            cg = _mm512_sub_ps(ce, co), sg = _mm512_sub_ps(so, se);
            _mm512_storeu_ps(top, cf);
            if (f == 0) {
                _mm512_storeu_ps(top + plane, cg);
                continue;
            }
            _mm512_storeu_ps(top + plane, _mm512_sub_ps(sf, cf));
            _mm512_storeu_ps(top + 2 * plane, _mm512_sub_ps(_mm512_sub_ps(zero, cf), sf));
            if (n_planes == 6) {
                _mm512_storeu_ps(top + 3 * plane, cg);
                _mm512_storeu_ps(top + 4 * plane, _mm512_sub_ps(sg, cg));
                _mm512_storeu_ps(top + 5 * plane, _mm512_sub_ps(_mm512_sub_ps(zero, cg), sg));
            }
        }
}

static void spectra(const ez_fft_plan *p, int f, float scale, const float *wt, int k, int c_in, int ci_pad,
                    int n_panels, int nr, float *out) {
    if (nr % 16 == 0)
        spectra16(p, f, scale, wt, k, c_in, ci_pad, n_panels, nr, out);
    else
        ez_fft_kernels_avx2()->spectra(p, f, scale, wt, k, c_in, ci_pad, n_panels, nr, out);
}

static const ez_fft_kernels avx512_kernels = {forward_block, inverse_block, to_lanes, from_lanes, spectra};

const ez_fft_kernels *ez_fft_kernels_avx512(void) { return &avx512_kernels; }

#else

const ez_fft_kernels *ez_fft_kernels_avx512(void) { return NULL; }

#endif
