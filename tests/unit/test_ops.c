/* test_ops.c: the vectorized element-wise kernels (kernels/ops.h) against
 * their plain C twins and against double precision, on fresh random inputs
 * (the seed comes from the clock and is printed; PASADA_TEST_SEED=N replays
 * a run). For every table the CPU has (plain, avx2, avx512, as capped by
 * PASADA_CPU):
 * 1. exp over [-87.3, 88] and over [-20, 20] (softmax's usual range):
 *    relative error against double exp <= 2e-7 (measured: 8e-8, about one
 *    ulp), and against the plain twin <= 3e-7.
 * 2. SiLU and GELU-tanh gates on g in [-30, 30] and [-6, 6] times a random
 *    up in +-[0.5, 2): relative error against the double formulas <= 1e-6
 *    (SiLU), <= 1e-6 + 2.5e-7 |2u| (GELU: u's rounding, magnified by exp; the
 *    second term matters only for g < -2, where the result is below 2% of
 *    |g|) wherever the result is above 1e-30 in magnitude, and twice that
 *    against the plain twin; elsewhere an absolute error <= 1e-30. (GELU's double
 *    reference is g / (1 + exp(-2u)), equal to 0.5 g (1 + tanh(u)) but free
 *    of its cancellation for negative u.)
 * 3. Within a table an element's bits do not depend on its place: every
 *    length from 1 to 40 and offsets 0..3 reproduce the bits of one long call
 *    (SIMD tails are masked or padded, not scalar).
 * 4. Edges: exp(-inf) = 0, exp(NaN) is NaN, exp(x < -87.34) = 0, exp(1e4)
 *    finite; pa_softmax sums to 1.
 * 5. Half <-> float rows (the F16 KV cache): every table's bits equal the
 *    scalar conversions of the quant module (round to nearest even) on
 *    random floats of every magnitude (subnormal halves, overflow to inf,
 *    ties), specials and every one of the 65536 halves, at lengths 1..40
 *    (SIMD tails) and offsets 0..3.
 * 7. Q8 KV rows: every table's quants and scale equal the plain version's,
 *    and the plain version's equal roundf(x / scale) clamped to +-127 with
 *    scale = max |x| / 127, on random rows of lengths 1..300 and magnitudes
 *    from 1e-30 to 1e30, rows of exact ties (max 127: x / scale = k + 0.5),
 *    with NaN (skipped by the max, quantized to 0) and infinities (an
 *    infinite scale: every quant 0 or, for the infinities, NaN -> 0), and
 *    all-zero rows (scale 0, quants 0).
 * 6. rmsnorm and RoPE: every table's bits equal the plain versions' (same
 *    double chains, same products and sums) on random rows of every length
 *    1..300 (with and without a weight, in place and not) and on heads of
 *    sizes 8..256 with full and partial rotary dims, both pair layouts.
 * The largest errors seen are printed (the numbers ops.h documents). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/ops.h"
#include "quant/quant.h"
#include "test_util.h"

static int failures;
/* uniform in [lo, hi), never exactly 0 */
static float rnd_range(double lo, double hi) {
  for (;;) {
    float x = (float)(lo + (hi - lo) * rnd_unit());
    if (x != 0.0f) return x;
  }
}

#define N 4099 /* not a multiple of any vector width */

static double rel(double got, double want) {
  double d = fabs(got - want), m = fabs(want);
  return m > 0 ? d / m : d;
}

static void check_exp(const pa_ops_kernels *k, double lo, double hi, double *worst) {
  static float x[N], y[N], yp[N];
  for (int i = 0; i < N; i++) x[i] = rnd_range(lo, hi);
  k->exp(y, x, N);
  pa_ops_plain()->exp(yp, x, N);
  for (int i = 0; i < N; i++) {
    double e = rel(y[i], exp((double)x[i])), ep = rel(y[i], yp[i]);
    if (e > *worst) *worst = e;
    if (e > 2e-7 || ep > 3e-7 || !isfinite(y[i])) {
      if (failures++ < 10)
        printf("FAIL %s exp(%.9g) = %.9g, double %.9g, plain %.9g\n", k->name, x[i], y[i], exp((double)x[i]),
               yp[i]);
    }
  }
}

static double silu_ref(double g) { return g / (1.0 + exp(-g)); }
/* 0.5 g (1 + tanh(u)) = g / (1 + exp(-2u)): the same function, written
 * without the cancellation of 1 + tanh(u) near -1 (which leaves even double
 * with no correct digit for g < -9) */
static double gelu_ref(double g) {
  double u = 0.7978845608028654 * (g + 0.044715 * g * g * g);
  return g / (1.0 + exp(-2.0 * u));
}

static void check_gate(const pa_ops_kernels *k, int gelu, double range, double *worst) {
  static float g[N], up[N], out[N], outp[N];
  for (int i = 0; i < N; i++) {
    g[i] = rnd_range(-range, range);
    float u = rnd_range(0.5, 2.0);
    up[i] = rng() & 1 ? u : -u;
  }
  memcpy(out, g, sizeof g);
  memcpy(outp, g, sizeof g);
  if (gelu) {
    k->gelu_tanh_mul(out, up, N);
    pa_ops_plain()->gelu_tanh_mul(outp, up, N);
  } else {
    k->silu_mul(out, up, N);
    pa_ops_plain()->silu_mul(outp, up, N);
  }
  for (int i = 0; i < N; i++) {
    double want = (gelu ? gelu_ref(g[i]) : silu_ref(g[i])) * up[i];
    /* GELU's exp argument z = -2u is rounded to float (~2.5e-7 |z|), which
     * exp turns into a relative error of the result; SiLU's -g is exact */
    double z = gelu ? 1.5957691216057308 * g[i] * (1.0 + 0.044715 * g[i] * g[i]) : 0.0;
    double tol = 1e-6 + 2.5e-7 * fabs(z);
    int ok;
    if (fabs(want) > 1e-30) {
      double e = rel(out[i], want), ep = rel(out[i], outp[i]);
      if (e / tol > *worst) *worst = e / tol;
      ok = e <= tol && ep <= 2 * tol;
    } else {
      ok = fabs(out[i] - want) <= 1e-30 && fabs(outp[i] - want) <= 1e-30;
    }
    if (!ok && failures++ < 10)
      printf("FAIL %s %s(%.9g) * %.9g = %.9g, double %.9g, plain %.9g\n", k->name, gelu ? "gelu" : "silu",
             g[i], up[i], out[i], want, outp[i]);
  }
}

/* every length 1..40 at offsets 0..3 gives the bits of one long call */
static void check_placement(const pa_ops_kernels *k) {
  enum { M = 48 };
  float x[M], up[M], whole[3][M], part[M];
  for (int i = 0; i < M; i++) {
    x[i] = rnd_range(-12, 12);
    up[i] = rnd_range(0.5, 2.0);
  }
  k->exp(whole[0], x, M);
  memcpy(whole[1], x, sizeof x);
  k->silu_mul(whole[1], up, M);
  memcpy(whole[2], x, sizeof x);
  k->gelu_tanh_mul(whole[2], up, M);
  for (int op = 0; op < 3; op++)
    for (int off = 0; off < 4; off++)
      for (int n = 1; off + n <= 44 && n <= 40; n++) {
        memcpy(part, x, sizeof x);
        if (op == 0) k->exp(part + off, x + off, n);
        if (op == 1) k->silu_mul(part + off, up + off, n);
        if (op == 2) k->gelu_tanh_mul(part + off, up + off, n);
        if (memcmp(part + off, whole[op] + off, (size_t)n * sizeof(float)) ||
            memcmp(part + off + n, x + off + n, (size_t)(M - off - n) * sizeof(float))) {
          if (failures++ < 10) printf("FAIL %s op %d: length %d at offset %d changes bits\n", k->name, op, n, off);
        }
      }
}

static void check_edges(const pa_ops_kernels *k) {
  float x[5] = {-INFINITY, NAN, -87.5f, 1e4f, -100.0f}, y[5];
  k->exp(y, x, 5);
  if (y[0] != 0.0f || !isnan(y[1]) || y[2] != 0.0f || !isfinite(y[3]) || y[3] < 1e38f || y[4] != 0.0f) {
    printf("FAIL %s exp edges: %g %g %g %g %g\n", k->name, y[0], y[1], y[2], y[3], y[4]);
    failures++;
  }
}

static void check_softmax(void) {
  float x[77];
  for (int i = 0; i < 77; i++) x[i] = rnd_range(-30, 30);
  pa_softmax(x, 77);
  double s = 0;
  for (int i = 0; i < 77; i++) s += x[i];
  if (fabs(s - 1.0) > 1e-5) {
    printf("FAIL softmax sums to %.9g\n", s);
    failures++;
  }
}

/* a float of random bits in a random binade around the half range, sometimes a special */
static float rnd_half_case(void) {
  const uint64_t r = rng();
  uint32_t bits;
  switch (r % 16) {
    case 0: return INFINITY;
    case 1: return -0.0f;
    case 2: return NAN;
    case 3: /* exactly halfway between two halves: ties to even */
      bits = (uint32_t)((113 + (r >> 8) % 30) << 23) | (uint32_t)((r >> 16) & 0x7FE000u) | 0x1000u;
      break;
    default: bits = (uint32_t)((90 + (r >> 8) % 60) << 23) | (uint32_t)((r >> 16) & 0x7FFFFFu); break;
  }
  if (r & (1ull << 63)) bits |= 0x80000000u;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static void check_f16(const pa_ops_kernels *k) {
  enum { NH = 4096 };
  static float x[NH], back[NH], y[NH];
  static uint16_t h[NH], g[NH];
  for (int i = 0; i < NH; i++) x[i] = rnd_half_case();
  k->f32_to_f16(h, x, NH);
  for (int i = 0; i < NH; i++) {
    uint16_t want = pa_f32_to_f16(x[i]);
    const bool nan = isnan(x[i]);
    if ((nan ? (h[i] & 0x7C00) != 0x7C00 || !(h[i] & 0x3FF) : h[i] != want) && failures++ < 10)
      printf("FAIL %s f32_to_f16(%a) = 0x%04x, want 0x%04x\n", k->name, (double)x[i], h[i], want);
  }
  for (int i = 0; i < 65536 && i < NH * 16; i += NH) {
    for (int j = 0; j < NH; j++) g[j] = (uint16_t)(i + j);
    k->f16_to_f32(back, g, NH);
    for (int j = 0; j < NH; j++) {
      const float want = pa_f16_to_f32(g[j]);
      if (memcmp(&back[j], &want, sizeof want) && !(isnan(want) && isnan(back[j])) && failures++ < 10)
        printf("FAIL %s f16_to_f32(0x%04x) = %a, want %a\n", k->name, g[j], (double)back[j], (double)want);
    }
  }
  /* tails and offsets give the bits of the long call */
  for (int off = 0; off < 4; off++)
    for (int n = 1; n <= 40; n++) {
      uint16_t hh[48];
      float ff[48];
      k->f32_to_f16(hh, x + off, n);
      k->f16_to_f32(ff, h + off, n);
      k->f16_to_f32(y, h, 48);
      if ((memcmp(hh, h + off, (size_t)n * 2) || memcmp(ff, y + off, (size_t)n * 4)) && failures++ < 10)
        printf("FAIL %s half rows of %d values at offset %d differ from the long call\n", k->name, n, off);
    }
}

static void check_norm_rope(const pa_ops_kernels *k) {
  const pa_ops_kernels *p = pa_ops_plain();
  enum { MAXN = 300 };
  static float x[MAXN], w[MAXN], a[MAXN], b[MAXN];
  for (int n = 1; n <= MAXN; n++) {
    const float mag = (float)(rng() % 4 == 0 ? 1e-3 : rng() % 3 == 0 ? 300.0 : 1.0);
    for (int i = 0; i < n; i++) {
      x[i] = rnd_range(-mag, mag);
      w[i] = rnd_range(-2, 2);
    }
    const float eps = n % 2 ? 1e-6f : 1e-5f;
    p->rmsnorm(a, x, n % 3 ? w : NULL, n, eps);
    k->rmsnorm(b, x, n % 3 ? w : NULL, n, eps);
    if (memcmp(a, b, sizeof(float) * (size_t)n) && failures++ < 10)
      printf("FAIL %s rmsnorm of %d values differs from plain\n", k->name, n);
    memcpy(b, x, sizeof(float) * (size_t)n); /* in place */
    k->rmsnorm(b, b, n % 3 ? w : NULL, n, eps);
    if (memcmp(a, b, sizeof(float) * (size_t)n) && failures++ < 10)
      printf("FAIL %s rmsnorm in place of %d values differs\n", k->name, n);
  }
  static const int dims[][2] = {{64, 64}, {64, 32}, {80, 80}, {128, 64}, {256, 256}, {8, 8}, {96, 40}, {24, 22}};
  static float hx[4 * 256], ha[4 * 256], hb[4 * 256], ct[128], st[128];
  for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
    const int hd = dims[d][0], rd = dims[d][1], nh = 1 + (int)(rng() % 4);
    for (int i = 0; i < rd / 2; i++) {
      ct[i] = rnd_range(-1, 1);
      st[i] = rnd_range(-1, 1);
    }
    for (int neox = 0; neox < 2; neox++) {
      for (int i = 0; i < nh * hd; i++) hx[i] = rnd_range(-8, 8);
      memcpy(ha, hx, sizeof(float) * (size_t)(nh * hd));
      memcpy(hb, hx, sizeof(float) * (size_t)(nh * hd));
      p->rope(ha, nh, hd, rd, ct, st, neox);
      k->rope(hb, nh, hd, rd, ct, st, neox);
      if (memcmp(ha, hb, sizeof(float) * (size_t)(nh * hd)) && failures++ < 10)
        printf("FAIL %s rope (head %d, rotary %d, %s) differs from plain\n", k->name, hd, rd,
               neox ? "neox" : "adjacent pairs");
      if (!memcmp(ha, hx, sizeof(float) * (size_t)(nh * hd)) && failures++ < 10)
        printf("FAIL rope changed nothing (head %d)\n", hd);
    }
  }
}

/* Check 7. */
static void check_q8_row(const pa_ops_kernels *k) {
  enum { MAXN = 300 };
  static float x[MAXN];
  static int8_t got[MAXN], want[MAXN];
  for (int trial = 0; trial < 400; trial++) {
    const int n = 1 + (int)(rng() % MAXN), kind = trial % 5;
    const double mag = pow(10.0, -30.0 + (double)(rng() % 61));
    for (int i = 0; i < n; i++) {
      switch (kind) {
        case 0: x[i] = rnd_range(-mag, mag); break;
        case 1: x[i] = (float)((int)(rng() % 254) - 127) + (rng() % 2 ? 0.5f : 0.0f); break; /* ties */
        case 2: x[i] = rng() % 7 == 0 ? NAN : rnd_range(-mag, mag); break;
        case 3: x[i] = rng() % 11 == 0 ? (rng() % 2 ? INFINITY : -INFINITY) : rnd_range(-1, 1); break;
        default: x[i] = 0.0f; break;
      }
    }
    if (kind == 1) x[rng() % (uint64_t)n] = rng() % 2 ? 127.0f : -127.0f; /* scale exactly 1 */
    float amax = 0.0f;
    for (int i = 0; i < n; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    const float scale = amax / 127.0f;
    for (int i = 0; i < n; i++) {
      float r = scale > 0.0f ? roundf(x[i] / scale) : 0.0f;
      r = r == r ? (r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r) : 0.0f;
      want[i] = (int8_t)r;
    }
    const float sg = k->q8_row(got, x, n);
    if ((memcmp(&sg, &scale, sizeof sg) || memcmp(got, want, (size_t)n)) && failures++ < 10)
      printf("FAIL %s q8_row: a row of %d (kind %d, magnitude %g) differs from roundf's quants or scale\n",
             k->name, n, kind, mag);
  }
}

/* add: the plain loop's bits for every length 1..70 at offsets 0..3 (fresh
 * random values with infinities among them), nothing outside [off, off + n)
 * written, and x += x (the operands may be one array). */
static void check_add(const pa_ops_kernels *k) {
  enum { M = 80 };
  float x[M], y[M], want[M], got[M];
  for (int off = 0; off < 4; off++)
    for (int n = 1; off + n <= M && n <= 70; n++) {
      for (int i = 0; i < M; i++) {
        x[i] = rnd_range(-1e3, 1e3);
        y[i] = rnd_range(-1e3, 1e3);
      }
      x[off + n / 2] = INFINITY;
      y[off + n / 3] = -1e38f;
      memcpy(want, x, sizeof x);
      memcpy(got, x, sizeof x);
      pa_ops_plain()->add(want + off, y + off, n);
      k->add(got + off, y + off, n);
      if (memcmp(got, want, sizeof got) && failures++ < 10)
        printf("FAIL %s add: length %d at offset %d differs from the plain loop\n", k->name, n,
               off);
      for (int i = 0; i < off + n; i++) want[i] = x[i] + x[i];
      memcpy(got, x, sizeof x);
      k->add(got, got, off + n);
      if (memcmp(got, want, (size_t)(off + n) * sizeof(float)) && failures++ < 10)
        printf("FAIL %s add: x += x over %d values\n", k->name, off + n);
    }
}

int main(void) {
  test_seed("test_ops");
  const pa_ops_kernels *tables[] = {pa_ops_plain(), pa_ops_avx2(), pa_ops_avx512()};
  for (int t = 0; t < 3; t++) {
    const pa_ops_kernels *k = tables[t];
    if (!k) continue;
    double we = 0, ws = 0, wg = 0;
    for (int rep = 0; rep < 4; rep++) {
      check_exp(k, -87.3, 88.0, &we);
      check_exp(k, -20.0, 20.0, &we);
      check_gate(k, 0, 30.0, &ws);
      check_gate(k, 0, 6.0, &ws);
      check_gate(k, 1, 30.0, &wg);
      check_gate(k, 1, 6.0, &wg);
    }
    check_placement(k);
    check_edges(k);
    check_f16(k);
    check_q8_row(k);
    check_norm_rope(k);
    check_add(k);
    printf("  %-7s max relative error vs double: exp %.2e; silu_mul, gelu_tanh_mul: %.2f, %.2f of the bound\n",
           k->name, we, ws, wg);
  }
  check_softmax();
  printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
