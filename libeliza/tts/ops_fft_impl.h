/* The portable ez_fft_kernels (ops_fft.h), included by ops_fft.c and
 * compiled for the baseline ISA: loops over the EZ_FFT_LANES lanes the
 * compiler may vectorize (the restrict-qualified helpers tell it the rows
 * do not overlap). ops_fft_avx2.c has the same operations in AVX2 + FMA.
 *
 * The transforms: a real N-point transform is a complex M-point one (M =
 * N / 2) of z[q] = x[2q] + i x[2q+1], then the split
 *   X[f] = E[f] + e^{-2 pi i f / N} O[f],  E = (Z[f] + conj Z[M-f]) / 2,
 *   O = (Z[f] - conj Z[M-f]) / 2i,
 * and the inverse undoes it: Z[f] = E[f] + i O[f] with E = (Y[f] +
 * conj Y[M-f]) / 2, O = (Y[f] - conj Y[M-f]) e^{2 pi i f / N} / 2. The
 * halvings and the inverse's 1 / M are left out (ops_fft.h: the results
 * are 2 X and N y); the caller folds them into the filters' scale. The
 * complex transform is radix-2, decimation in time, on bit-reversed input.
 * Error: about eps log2 N of the sum of |x| per bin (measured 5e-8,
 * tests/c/test_tts_ops.c). */

/* Unfused (ISO C mode does not contract it); the AVX2 kernels use FMA. */
#define FFT_MADD(a, b, c) ((a) * (b) + (c))

/* a, b = a + w b, a - w b with w = wr + i wi. */
static inline void butterfly(float *restrict ar, float *restrict ai, float *restrict br, float *restrict bi, float wr,
                             float wi) {
    for (int l = 0; l < EZ_FFT_LANES; l++) {
        float tr = FFT_MADD(wr, br[l], -(wi * bi[l])), ti = FFT_MADD(wr, bi[l], wi * br[l]);
        float xr = ar[l], xi = ai[l];
        ar[l] = xr + tr;
        ai[l] = xi + ti;
        br[l] = xr - tr;
        bi[l] = xi - ti;
    }
}

/* butterfly with w = 1. */
static inline void butterfly1(float *restrict ar, float *restrict ai, float *restrict br, float *restrict bi) {
    for (int l = 0; l < EZ_FFT_LANES; l++) {
        float xr = ar[l], xi = ai[l], yr = br[l], yi = bi[l];
        ar[l] = xr + yr;
        ai[l] = xi + yi;
        br[l] = xr - yr;
        bi[l] = xi - yi;
    }
}

/* In place, M points, bit-reversed in, natural order out; e^{-...} forward,
 * e^{+...} inverse, unnormalized. */
static void cfft(const ez_fft_plan *p, ez_fft_lanes *re, ez_fft_lanes *im, int inverse) {
    const int m = p->m;
    for (int len = 2; len <= m; len <<= 1) {
        const int half = len / 2, step = p->n / len;
        for (int i = 0; i < m; i += len) butterfly1(re[i], im[i], re[i + half], im[i + half]);
        for (int j = 1; j < half; j++) {
            const float wr = p->cos_n[j * step], wi = inverse ? p->sin_n[j * step] : -p->sin_n[j * step];
            for (int i = j; i < m; i += len) butterfly(re[i], im[i], re[i + half], im[i + half], wr, wi);
        }
    }
}

/* Bin f of 2 X from a = Z[f], b = Z[M-f] (c, s: cos, sin of 2 pi f / N). */
static inline void split_bin(const float *restrict ar, const float *restrict ai, const float *restrict br,
                             const float *restrict bi, float c, float s, float *restrict xr, float *restrict xi) {
    for (int l = 0; l < EZ_FFT_LANES; l++) {
        /* with b conjugated: sum (sr, si), difference (dr, di) */
        float sr = ar[l] + br[l], si = ai[l] - bi[l], dr = ar[l] - br[l], di = ai[l] + bi[l];
        xr[l] = FFT_MADD(c, di, sr) - s * dr;
        xi[l] = si - FFT_MADD(c, dr, s * di);
    }
}

static void rfft(const ez_fft_plan *p, ez_fft_lanes *z_re, ez_fft_lanes *z_im, ez_fft_lanes *spec_re,
                 ez_fft_lanes *spec_im) {
    const int m = p->m;
    cfft(p, z_re, z_im, 0);
    for (int l = 0; l < EZ_FFT_LANES; l++) {
        float a = z_re[0][l], b = z_im[0][l];
        spec_re[0][l] = 2.0f * (a + b);
        spec_im[0][l] = 2.0f * (a - b);
    }
    for (int f = 1; f < m; f++)
        split_bin(z_re[f], z_im[f], z_re[m - f], z_im[m - f], p->cos_n[f], p->sin_n[f], spec_re[f], spec_im[f]);
}

/* Z[f] (times 2) from a = Y[f], b = Y[M-f]. */
static inline void merge_bin(const float *restrict ar, const float *restrict ai, const float *restrict br,
                             const float *restrict bi, float c, float s, float *restrict zr, float *restrict zi) {
    for (int l = 0; l < EZ_FFT_LANES; l++) {
        float er = ar[l] + br[l], ei = ai[l] - bi[l], dr = ar[l] - br[l], di = ai[l] + bi[l];
        zr[l] = er - FFT_MADD(s, dr, c * di);
        zi[l] = FFT_MADD(c, dr, ei) - s * di;
    }
}

static void irfft(const ez_fft_plan *p, const ez_fft_lanes *spec_re, const ez_fft_lanes *spec_im, ez_fft_lanes *z_re,
                  ez_fft_lanes *z_im) {
    const int m = p->m;
    for (int l = 0; l < EZ_FFT_LANES; l++) {
        float y0 = spec_re[0][l], ym = spec_im[0][l];
        z_re[0][l] = y0 + ym;
        z_im[0][l] = y0 - ym;
    }
    for (int f = 1; f < m; f++)
        merge_bin(spec_re[f], spec_im[f], spec_re[m - f], spec_im[m - f], p->cos_n[f], p->sin_n[f], z_re[p->rev[f]],
                  z_im[p->rev[f]]);
    cfft(p, z_re, z_im, 1);
}

static void forward_block(const ez_fft_plan *p, const float *in, int64_t step, float *x, int64_t x_slot,
                          int64_t part) {
    const int m = p->m;
    ez_fft_lanes z_re[EZ_FFT_MAX_N / 2], z_im[EZ_FFT_MAX_N / 2], s_re[EZ_FFT_MAX_N / 2], s_im[EZ_FFT_MAX_N / 2];
    for (int q = 0; q < m; q++) {
        memcpy(z_re[p->rev[q]], in + 2 * q * step, sizeof(ez_fft_lanes));
        memcpy(z_im[p->rev[q]], in + (2 * q + 1) * step, sizeof(ez_fft_lanes));
    }
    rfft(p, z_re, z_im, s_re, s_im);
    memcpy(x, s_re[0], sizeof(ez_fft_lanes));
    memcpy(x + part, s_im[0], sizeof(ez_fft_lanes));
    for (int f = 1; f < m; f++) {
        float *slot = x + f * x_slot;
        memcpy(slot, s_re[f], sizeof(ez_fft_lanes));
        memcpy(slot + part, s_im[f], sizeof(ez_fft_lanes));
        for (int l = 0; l < EZ_FFT_LANES; l++) slot[2 * part + l] = s_re[f][l] + s_im[f][l];
    }
}

static void inverse_block(const ez_fft_plan *p, const float *y, int64_t y_slot, int64_t part, float *out,
                          int64_t step, int count) {
    const int m = p->m;
    ez_fft_lanes z_re[EZ_FFT_MAX_N / 2], z_im[EZ_FFT_MAX_N / 2], s_re[EZ_FFT_MAX_N / 2], s_im[EZ_FFT_MAX_N / 2];
    memcpy(s_re[0], y, sizeof(ez_fft_lanes));
    memcpy(s_im[0], y + part, sizeof(ez_fft_lanes));
    for (int f = 1; f < m; f++) {
        memcpy(s_re[f], y + f * y_slot, sizeof(ez_fft_lanes));
        memcpy(s_im[f], y + f * y_slot + part, sizeof(ez_fft_lanes));
    }
    irfft(p, s_re, s_im, z_re, z_im);
    for (int r = 0; r < count; r++) memcpy(out + r * step, r & 1 ? z_im[r >> 1] : z_re[r >> 1], sizeof(ez_fft_lanes));
}

/* ---- lanes ---------------------------------------------------------------------------------- */

static void to_lanes(const float *x, int64_t ld, int n_rows, int64_t t0, int64_t n, int64_t t_len, float *dst,
                     int64_t dst_ld) {
    for (int64_t t = 0; t < n; t++) {
        const int inside = t0 + t >= 0 && t0 + t < t_len;
        for (int l = 0; l < EZ_FFT_LANES; l++) dst[t * dst_ld + l] = inside && l < n_rows ? x[l * ld + t0 + t] : 0.0f;
    }
}

static void from_lanes(const float *src, int n_rows, int64_t n, const float *bias, float *y, int64_t ld) {
    for (int l = 0; l < n_rows; l++) {
        const float b = bias ? bias[l] : 0.0f;
        for (int64_t t = 0; t < n; t++) y[l * ld + t] = src[t * EZ_FFT_LANES + l] + b;
    }
}

/* ---- filter spectra --------------------------------------------------------------------- */

/* The tap coefficients of slot f, scaled: cs[j] = scale cos(2 pi f j / N),
 * sn[j] = scale sin(2 pi f j / N). */
static void tap_coefficients(const ez_fft_plan *p, int f, float scale, int k, float *cs, float *sn) {
    for (int j = 0; j < k; j++) {
        int idx = (int)(((int64_t)f * j) % p->n);
        cs[j] = scale * p->cos_n[idx];
        sn[j] = scale * p->sin_n[idx];
    }
}

/* Even-tap and odd-tap sums of one panel of a filter block, taps j at
 * row0 + j ld: acc = [ce | co | se | so], nr each. */
static inline void tap_sums(const float *restrict row0, int64_t ld, int k, const float *cs, const float *sn, int nr,
                            float *restrict acc) {
    float ce[EZ_FFT_MAX_NR], co[EZ_FFT_MAX_NR], se[EZ_FFT_MAX_NR], so[EZ_FFT_MAX_NR];
    int j = 0;
    for (int c = 0; c < nr; c++) ce[c] = co[c] = se[c] = so[c] = 0.0f;
    for (; j + 1 < k; j += 2) {
        const float *restrict r0 = row0 + j * ld, *restrict r1 = r0 + ld;
        const float c0 = cs[j], s0 = sn[j], c1 = cs[j + 1], s1 = sn[j + 1];
        for (int c = 0; c < nr; c++) {
            ce[c] = FFT_MADD(c0, r0[c], ce[c]);
            se[c] = FFT_MADD(s0, r0[c], se[c]);
            co[c] = FFT_MADD(c1, r1[c], co[c]);
            so[c] = FFT_MADD(s1, r1[c], so[c]);
        }
    }
    if (j < k) {
        const float *restrict r0 = row0 + j * ld;
        for (int c = 0; c < nr; c++) {
            ce[c] = FFT_MADD(cs[j], r0[c], ce[c]);
            se[c] = FFT_MADD(sn[j], r0[c], se[c]);
        }
    }
    for (int c = 0; c < nr; c++) {
        acc[c] = ce[c];
        acc[nr + c] = co[c];
        acc[2 * nr + c] = se[c];
        acc[3 * nr + c] = so[c];
    }
}

/* Output layout (ops_fft.c): planes of n_panels panels of nr columns, each
 * panel [ci_pad][nr] (strides: ez_fft_panel_stride, ez_fft_plane_stride).
 * f = 0: plane 0 holds bin 0, plane 1 bin M. Otherwise, per slot g of f,
 * M - f (one slot when f = M / 2), three planes: C, S - C, -(C + S),
 * where C + i S is the slot's conjugated, scaled filter spectrum (the
 * operands of the three-multiplication complex product, ops_fft.c). The taps: wt[(ci k + j)
 * (n_panels nr) + c] for column c. */
static void spectra(const ez_fft_plan *p, int f, float scale, const float *wt, int k, int c_in, int ci_pad,
                    int n_panels, int nr, float *out) {
    float cs[EZ_FFT_MAX_N], sn[EZ_FFT_MAX_N], acc[4 * EZ_FFT_MAX_NR];
    const int64_t plane = ez_fft_plane_stride(ci_pad, nr, n_panels), width = (int64_t)n_panels * nr;
    const int n_planes = f == 0 ? 2 : 2 * f == p->m ? 3 : 6;
    tap_coefficients(p, f, scale, k, cs, sn);
    for (int ci = 0; ci < ci_pad; ci++)
        for (int q = 0; q < n_panels; q++) {
            float *top = out + q * ez_fft_panel_stride(ci_pad, nr) + (int64_t)ci * nr;
            const float *ce = acc, *co = acc + nr, *se = acc + 2 * nr, *so = acc + 3 * nr;
            if (ci >= c_in) {
                for (int pl = 0; pl < n_planes; pl++) memset(top + pl * plane, 0, sizeof(float) * (size_t)nr);
                continue;
            }
            if (nr == 16)
                tap_sums(wt + (int64_t)ci * k * width + (int64_t)q * 16, width, k, cs, sn, 16, acc);
            else if (nr == 12)
                tap_sums(wt + (int64_t)ci * k * width + (int64_t)q * 12, width, k, cs, sn, 12, acc);
            else
                tap_sums(wt + (int64_t)ci * k * width + (int64_t)q * nr, width, k, cs, sn, nr, acc);
            for (int c = 0; c < nr; c++) {
                /* slot f: C = ce + co, S = se + so; slot M - f: C = ce - co, S = so - se */
                float cf = ce[c] + co[c], sf = se[c] + so[c], cg = ce[c] - co[c], sg = so[c] - se[c];
                if (f == 0) {
                    top[c] = cf;
                    top[plane + c] = cg;
                    continue;
                }
                top[c] = cf;
                top[plane + c] = sf - cf;
                top[2 * plane + c] = -cf - sf;
                if (n_planes == 6) {
                    top[3 * plane + c] = cg;
                    top[4 * plane + c] = sg - cg;
                    top[5 * plane + c] = -cg - sg;
                }
            }
        }
}
