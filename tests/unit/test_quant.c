/* test_quant.c: the tensor types of src/quant: the traits table and row
 * sizes; fp16 and bf16 conversions (every half value, rounding ties,
 * subnormals, overflow, NaN); and for every quantizer a quantize ->
 * dequantize round trip on seeded data of awkward magnitudes, with an error
 * bound per type (K-quants also against a plain min/max quantizer of the
 * same bit width). Bit-exactness against independent implementations is
 * tests/e2e/test_quant.py's job. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"
#include "test_check.h"

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* ---- a seeded generator (xorshift64*) ---- */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng_u64(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1Dull;
}
static double rng_uniform(void) { return (double)(rng_u64() >> 11) * 0x1.0p-53; }
static double rng_normal(void) {
  double u = rng_uniform(), v = rng_uniform();
  return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* ---- traits ---- */
static void test_traits(void) {
  static const struct {
    pa_type type;
    const char *name;
    int64_t block;
    size_t size;
    pa_type dot;
  } want[] = {
      {PA_TYPE_F32, "F32", 1, 4, PA_TYPE_F32},
      {PA_TYPE_F16, "F16", 1, 2, PA_TYPE_F32},
      {PA_TYPE_BF16, "BF16", 1, 2, PA_TYPE_F32},
      {PA_TYPE_Q4_0, "Q4_0", 32, 18, PA_TYPE_Q8_0},
      {PA_TYPE_Q4_1, "Q4_1", 32, 20, PA_TYPE_Q8_1},
      {PA_TYPE_Q5_0, "Q5_0", 32, 22, PA_TYPE_Q8_0},
      {PA_TYPE_Q5_1, "Q5_1", 32, 24, PA_TYPE_Q8_1},
      {PA_TYPE_Q8_0, "Q8_0", 32, 34, PA_TYPE_Q8_0},
      {PA_TYPE_Q8_1, "Q8_1", 32, 36, PA_TYPE_Q8_1},
      {PA_TYPE_Q2_K, "Q2_K", 256, 84, PA_TYPE_Q8_K},
      {PA_TYPE_Q3_K, "Q3_K", 256, 110, PA_TYPE_Q8_K},
      {PA_TYPE_Q4_K, "Q4_K", 256, 144, PA_TYPE_Q8_K},
      {PA_TYPE_Q5_K, "Q5_K", 256, 176, PA_TYPE_Q8_K},
      {PA_TYPE_Q6_K, "Q6_K", 256, 210, PA_TYPE_Q8_K},
      {PA_TYPE_Q8_K, "Q8_K", 256, 292, PA_TYPE_Q8_K},
      {PA_TYPE_IQ4_NL, "IQ4_NL", 32, 18, PA_TYPE_Q8_0},
      {PA_TYPE_IQ4_XS, "IQ4_XS", 256, 136, PA_TYPE_Q8_K},
      {PA_TYPE_MXFP4, "MXFP4", 32, 17, PA_TYPE_Q8_0},
  };
  int known = 0;
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const pa_type_traits *t = pa_type_get(want[i].type);
    CHECK(t != NULL, "no traits for type %d", (int)want[i].type);
    if (t == NULL) continue;
    CHECK(strcmp(t->name, want[i].name) == 0, "type %d named %s", (int)want[i].type, t->name);
    CHECK(strcmp(pa_type_name(want[i].type), want[i].name) == 0, "pa_type_name %s", want[i].name);
    CHECK(t->block_size == want[i].block && t->type_size == want[i].size, "%s: block %lld size %zu",
          t->name, (long long)t->block_size, t->type_size);
    CHECK(t->quantized == (want[i].block > 1), "%s: quantized flag", t->name);
    CHECK(t->vec_dot_type == want[i].dot, "%s: vec_dot_type %d", t->name, (int)t->vec_dot_type);
    CHECK(t->to_float != NULL && t->from_float != NULL, "%s: missing kernels", t->name);
    CHECK(pa_row_size(want[i].type, 0) == 0, "%s: empty row", t->name);
    CHECK(pa_row_size(want[i].type, want[i].block) == want[i].size, "%s: one block", t->name);
    CHECK(pa_row_size(want[i].type, 4096) == 4096 / (size_t)want[i].block * want[i].size,
          "%s: row of 4096", t->name);
    CHECK(pa_row_size(want[i].type, 4096 * 1024 * 256LL) ==
              (size_t)(4096 * 1024 * 256LL / want[i].block) * want[i].size,
          "%s: a row past 2^31 elements", t->name);
  }
  for (uint32_t t = 0; t < 1000; t++) known += pa_type_get(t) != NULL;
  /* the grid I-quants: dequantization only, 256-element blocks, Q8_K dots */
  static const struct {
    pa_type type;
    const char *name;
    size_t size;
  } grid[] = {{PA_TYPE_IQ2_XXS, "IQ2_XXS", 66}, {PA_TYPE_IQ2_XS, "IQ2_XS", 74}, {PA_TYPE_IQ2_S, "IQ2_S", 82},
              {PA_TYPE_IQ3_XXS, "IQ3_XXS", 98}, {PA_TYPE_IQ3_S, "IQ3_S", 110},  {PA_TYPE_IQ1_S, "IQ1_S", 50},
              {PA_TYPE_IQ1_M, "IQ1_M", 56}};
  for (size_t i = 0; i < sizeof grid / sizeof grid[0]; i++) {
    const pa_type_traits *t = pa_type_get(grid[i].type);
    CHECK(t && !strcmp(t->name, grid[i].name) && t->block_size == 256 && t->type_size == grid[i].size &&
              t->quantized && t->to_float && !t->from_float && t->vec_dot_type == PA_TYPE_Q8_K,
          "traits of %s", grid[i].name);
  }
  CHECK(known == (int)(sizeof want / sizeof want[0] + sizeof grid / sizeof grid[0]), "%d types have traits",
        known);
  const uint32_t unknown[] = {4, 5, 24, 25, 26, 27, 28, 31, 38, 40, 41, 1000, 0xFFFFFFFFu};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    CHECK(pa_type_get(unknown[i]) == NULL, "type %u should be unknown", unknown[i]);
    CHECK(strcmp(pa_type_name(unknown[i]), "?") == 0, "name of unknown type %u", unknown[i]);
  }
  CHECK(pa_row_size((pa_type)4, 32) == 0, "row size of an unknown type");
}

/* ---- fp16 ---- */
static float f16_value(uint16_t h) { /* the definition, in double */
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
  return (float)((h & 0x8000) ? -v : v);
}

static void test_f16(void) {
  /* Every half decodes to its value and encodes back to itself. */
  for (uint32_t h = 0; h < 65536; h++) {
    float f = pa_f16_to_f32((pa_f16)h);
    bool special = ((h >> 10) & 31) == 31;
    if (!special) {
      CHECK(bits_of(f) == bits_of(f16_value((uint16_t)h)), "f16 %04x -> %a", h, f);
      CHECK(pa_f32_to_f16(f) == h, "f16 %04x does not round-trip (%04x)", h, pa_f32_to_f16(f));
    } else if ((h & 1023) == 0) {
      CHECK(isinf(f) && (signbit(f) != 0) == ((h & 0x8000) != 0), "f16 %04x is not inf", h);
      CHECK(pa_f32_to_f16(f) == h, "inf %04x round trip", h);
    } else {
      CHECK(isnan(f), "f16 %04x is not NaN", h);
      uint16_t back = pa_f32_to_f16(f);
      CHECK((back & 0x7C00) == 0x7C00 && (back & 0x3FF) != 0 && (back & 0x8000) == (h & 0x8000),
            "NaN %04x -> %04x", h, back);
    }
  }
  /* Rounding: ties go to the even neighbour. */
  const struct {
    uint32_t in;
    uint16_t out;
  } cases[] = {
      {0x3F800000, 0x3C00}, /* 1 */
      {0x3F801000, 0x3C00}, /* 1 + 2^-11: tie, down to even */
      {0x3F801001, 0x3C01}, /* just above the tie */
      {0x3F803000, 0x3C02}, /* 1 + 3*2^-11: tie, up to even */
      {0x3F802FFF, 0x3C01},
      {0x477FE000, 0x7BFF}, /* 65504, the largest half */
      {0x477FEFFF, 0x7BFF}, /* just below the tie with 65536 */
      {0x477FF000, 0x7C00}, /* 65520: tie, to even = inf */
      {0x7F7FFFFF, 0x7C00}, /* FLT_MAX */
      {0x7F800000, 0x7C00}, /* inf */
      {0x38800000, 0x0400}, /* 2^-14, smallest normal */
      {0x387FE000, 0x0400}, /* largest subnormal + half an ulp: tie, up to even (0x400) */
      {0x387FC000, 0x03FF}, /* largest subnormal */
      {0x33800000, 0x0001}, /* 2^-24, smallest subnormal */
      {0x33000000, 0x0000}, /* 2^-25: tie between 0 and 1 -> 0 */
      {0x33000001, 0x0001}, /* above it */
      {0x33C00000, 0x0002}, /* 3*2^-25: tie between 1 and 2 -> 2 */
      {0x32FFFFFF, 0x0000},
      {0x00000001, 0x0000}, /* float subnormal */
      {0x00000000, 0x0000},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint16_t got = pa_f32_to_f16(float_of(cases[i].in));
    CHECK(got == cases[i].out, "f32 %08x -> f16 %04x, want %04x", cases[i].in, got, cases[i].out);
    got = pa_f32_to_f16(float_of(cases[i].in | 0x80000000u));
    CHECK(got == (cases[i].out | 0x8000), "-f32 %08x -> f16 %04x", cases[i].in, got);
  }
  CHECK((pa_f32_to_f16(NAN) & 0x7E00) == 0x7E00, "NaN must stay a quiet NaN");
  /* Random floats: the result is a nearest half, ties even. */
  for (int i = 0; i < 200000; i++) {
    uint32_t u = (uint32_t)rng_u64();
    float f = float_of(u);
    if (!isfinite(f) || fabsf(f) >= 65520.0f) continue;
    uint16_t h = pa_f32_to_f16(f);
    double err = fabs((double)f - (double)pa_f16_to_f32(h));
    for (int step = -1; step <= 1; step += 2) {
      uint16_t mag = (uint16_t)(h & 0x7FFF);
      if ((mag == 0 && step < 0) || mag + step > 0x7BFF) continue;
      uint16_t other = (uint16_t)((h & 0x8000) | (mag + step));
      double e2 = fabs((double)f - (double)pa_f16_to_f32(other));
      CHECK(err < e2 || (err == e2 && (h & 1) == 0), "f32 %08x -> %04x is not nearest-even", u, h);
    }
  }
}

/* ---- bf16 ---- */
static void test_bf16(void) {
  for (uint32_t h = 0; h < 65536; h++) {
    float f = pa_bf16_to_f32((pa_bf16)h);
    CHECK(bits_of(f) == h << 16, "bf16 %04x decodes to %08x", h, bits_of(f));
    if (!isnan(f)) CHECK(pa_f32_to_bf16(f) == h, "bf16 %04x round trip", h);
    else CHECK((pa_f32_to_bf16(f) & 0x7FC0) == 0x7FC0, "bf16 NaN %04x stays a quiet NaN", h);
  }
  const struct {
    uint32_t in;
    uint16_t out;
  } cases[] = {
      {0x3F808000, 0x3F80}, /* tie: down to even */
      {0x3F818000, 0x3F82}, /* tie: up to even */
      {0x3F808001, 0x3F81}, {0x3F807FFF, 0x3F80},
      {0x7F7FFFFF, 0x7F80}, /* FLT_MAX rounds to inf */
      {0x7F7F7FFF, 0x7F7F}, {0x7F800000, 0x7F80},
      {0x00000001, 0x0000}, /* subnormals round like everything else */
      {0x00008000, 0x0000}, {0x00018000, 0x0002}, {0x007FFFFF, 0x0080},
      {0x7F800001, 0x7FC0}, /* signalling NaN becomes quiet */
      {0xFFC00001, 0xFFC0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint16_t got = pa_f32_to_bf16(float_of(cases[i].in));
    CHECK(got == cases[i].out, "f32 %08x -> bf16 %04x, want %04x", cases[i].in, got, cases[i].out);
  }
}

/* ---- round trips ---- */
#define N_SUPER 12
#define N (N_SUPER * QK_K) /* a multiple of every block size */

/* Gaussian data, one magnitude (10^-3 .. 10^3, inside fp16's range) and
 * one offset (up to one sigma) per 256. */
static void make_smooth(float *x) {
  for (int b = 0; b < N_SUPER; b++) {
    double scale = pow(10.0, -3.0 + 6.0 * rng_uniform());
    double offset = 2.0 * rng_uniform() - 1.0;
    for (int i = 0; i < QK_K; i++) x[b * QK_K + i] = (float)((rng_normal() + offset) * scale);
  }
}

/* What trips quantizers: magnitudes that differ by 10^6 between groups of 16
 * in one super-block, zeros, constants, lone spikes, one-sided data, values
 * on a grid (rounding ties). */
static void make_awkward(float *x) {
  for (int g = 0; g < N / 16; g++) {
    double scale = pow(10.0, -3.0 + 6.0 * rng_uniform());
    int kind = (int)(rng_u64() % 8);
    for (int i = 0; i < 16; i++) {
      float *v = &x[g * 16 + i];
      switch (kind) {
      case 0: *v = 0.0f; break;
      case 1: *v = (float)scale; break;
      case 2: *v = i == 5 ? (float)-scale : 0.0f; break;
      case 3: *v = (float)(fabs(rng_normal()) * scale); break;
      case 4: *v = (float)(-fabs(rng_normal()) * scale); break;
      case 5: *v = (float)((int)(rng_u64() % 17) - 8) * 0.25f; break;
      default: *v = (float)(rng_normal() * scale); break;
      }
    }
  }
}

/* sqrt(sum err^2 / sum x^2), per super-block, the worst one. */
static double worst_rel_rmse(const float *x, const float *y) {
  double worst = 0;
  for (int b = 0; b < N_SUPER; b++) {
    double se = 0, sx = 0;
    for (int i = b * QK_K; i < (b + 1) * QK_K; i++) {
      se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
      sx += (double)x[i] * x[i];
    }
    double r = sx > 0 ? sqrt(se / sx) : sqrt(se);
    if (r > worst) worst = r;
  }
  return worst;
}

/* max |err| / max |x| per super-block, the worst one. */
static double worst_max_error(const float *x, const float *y) {
  double worst = 0;
  for (int b = 0; b < N_SUPER; b++) {
    double err = 0, amax = 0;
    for (int i = b * QK_K; i < (b + 1) * QK_K; i++) {
      err = fmax(err, fabs((double)x[i] - y[i]));
      amax = fmax(amax, fabs((double)x[i]));
    }
    double r = amax > 0 ? err / amax : err;
    if (r > worst) worst = r;
  }
  return worst;
}

static double total_rel_rmse(const float *x, const float *y, int n) {
  double se = 0, sx = 0;
  for (int i = 0; i < n; i++) {
    se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
    sx += (double)x[i] * x[i];
  }
  return sx > 0 ? sqrt(se / sx) : sqrt(se);
}

/* The baseline of the K-quants: each group of `group` gets its own float
 * scale (and min, when asymmetric) from its range, levels by rounding. */
static void plain_quant(const float *x, float *y, int n, int group, int bits, bool asym) {
  const int levels = (1 << bits) - 1;
  for (int g = 0; g < n; g += group) {
    float lo = x[g], hi = x[g], amax = 0;
    for (int i = g; i < g + group; i++) {
      lo = fminf(lo, x[i]);
      hi = fmaxf(hi, x[i]);
      amax = fmaxf(amax, fabsf(x[i]));
    }
    float d, m;
    if (asym) {
      if (lo > 0) lo = 0;
      d = (hi - lo) / (float)levels;
      m = lo;
    } else {
      d = amax / (float)(1 << (bits - 1));
      m = -(float)(1 << (bits - 1)) * d;
    }
    for (int i = g; i < g + group; i++) {
      float q = d > 0 ? roundf((x[i] - m) / d) : 0.0f;
      q = fminf(fmaxf(q, 0.0f), (float)levels);
      y[i] = q * d + m;
    }
  }
}

typedef struct {
  pa_type type;
  double smooth_bound;  /* worst relative RMSE of a super-block, smooth data */
  double awkward_bound; /* worst max error / max magnitude of a super-block */
  int base_group, base_bits;
  bool base_asym; /* K-quants: the plain quantizer they must beat (within 5%) */
} round_trip_case;

static void test_round_trips(void) {
  /* Awkward bounds: half a step where the format allows it (8-bit: amax/254
   * plus the fp16 rounding of d; Q4_0/Q5_0 clamp one side: a full step),
   * measured with a margin for the K-quants, whose sub-block scales are
   * quantized against the super-block's. */
  static const round_trip_case cases[] = {
      {PA_TYPE_F16, 0.0003, 0.0005, 0, 0, false},  {PA_TYPE_BF16, 0.003, 0.004, 0, 0, false},
      {PA_TYPE_F32, 0.0, 0.0, 0, 0, false},        {PA_TYPE_Q8_0, 0.006, 0.0045, 0, 0, false},
      {PA_TYPE_Q8_1, 0.006, 0.0045, 0, 0, false},  {PA_TYPE_Q8_K, 0.012, 0.0045, 0, 0, false},
      {PA_TYPE_Q4_0, 0.12, 0.13, 0, 0, false},     {PA_TYPE_Q4_1, 0.10, 0.07, 0, 0, false},
      {PA_TYPE_Q5_0, 0.06, 0.065, 0, 0, false},    {PA_TYPE_Q5_1, 0.05, 0.035, 0, 0, false},
      {PA_TYPE_Q2_K, 0.45, 0.40, 16, 2, true},     {PA_TYPE_Q3_K, 0.22, 0.28, 16, 3, false},
      {PA_TYPE_Q4_K, 0.10, 0.10, 32, 4, true},     {PA_TYPE_Q5_K, 0.05, 0.05, 32, 5, true},
      {PA_TYPE_Q6_K, 0.025, 0.025, 16, 6, false},
      {PA_TYPE_IQ4_NL, 0.085, 0.08, 32, 4, false}, {PA_TYPE_IQ4_XS, 0.08, 0.075, 32, 4, false},
      /* E2M1 holds 4 and 6 (x 2^k) at the top: up to a quarter of amax */
      {PA_TYPE_MXFP4, 0.14, 0.26, 0, 0, false},
  };

  static float x[N], y[N], base[N];
  static uint8_t q[N * 4 + 64];
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const pa_type_traits *t = pa_type_get(cases[c].type);
    if (t == NULL || t->from_float == NULL) continue; /* reported by test_traits */
    for (int data = 0; data < 2; data++) {
      if (data == 0) make_smooth(x);
      else make_awkward(x);
      memset(q, 0xA5, sizeof q);
      t->from_float(x, q, N);
      CHECK(q[pa_row_size(cases[c].type, N)] == 0xA5, "%s wrote past its row", t->name);
      t->to_float(q, y, N);
      int bad = 0;
      for (int i = 0; i < N; i++) bad += !isfinite(y[i]);
      CHECK(bad == 0, "%s: %d non-finite values", t->name, bad);
      double worst = worst_rel_rmse(x, y);
      if (data == 0) {
        CHECK(worst <= cases[c].smooth_bound, "%s: smooth data, super-block error %.4g > %.4g",
              t->name, worst, cases[c].smooth_bound);
        if (cases[c].base_bits) {
          plain_quant(x, base, N, cases[c].base_group, cases[c].base_bits, cases[c].base_asym);
          double ours = total_rel_rmse(x, y, N), plain = total_rel_rmse(x, base, N);
          CHECK(ours <= 1.05 * plain, "%s: error %.4g, plain %d-bit quantizer %.4g", t->name,
                ours, cases[c].base_bits, plain);
          printf("%-5s relative rmse %.4f (plain %d-bit: %.4f)\n", t->name, ours,
                 cases[c].base_bits, plain);
        } else {
          printf("%-5s relative rmse %.4f\n", t->name, total_rel_rmse(x, y, N));
        }
      } else {
        /* Groups 10^6 apart share a super-block scale, so small groups may
         * vanish: bound the largest error by the super-block's magnitude. */
        double ratio = worst_max_error(x, y);
        CHECK(ratio <= cases[c].awkward_bound, "%s: awkward data, max error %.4g of amax > %.4g",
              t->name, ratio, cases[c].awkward_bound);
        printf("%-5s awkward data: max error / amax %.4f\n", t->name, ratio);
      }
    }
    /* All zeros quantize to exact zeros. */
    memset(x, 0, sizeof x);
    t->from_float(x, q, N);
    t->to_float(q, y, N);
    int nonzero = 0;
    for (int i = 0; i < N; i++) nonzero += y[i] != 0.0f;
    CHECK(nonzero == 0, "%s: zeros come back as %d non-zeros", t->name, nonzero);
  }
}

/* The activation types carry sums the dot products rely on. */
static void test_activation_sums(void) {
  static float x[N];
  static block_q8_K k[N / QK_K];
  static block_q8_1 b1[N / QK8_1];
  make_smooth(x);
  pa_quantize_q8_K(x, k, N);
  for (int b = 0; b < N / QK_K; b++)
    for (int g = 0; g < QK_K / 16; g++) {
      int s = 0;
      for (int i = 0; i < 16; i++) s += k[b].qs[16 * g + i];
      CHECK(k[b].bsums[g] == s, "Q8_K block %d bsums[%d] = %d, want %d", b, g, k[b].bsums[g], s);
    }
  pa_quantize_q8_1(x, b1, N);
  for (int b = 0; b < N / QK8_1; b++) {
    /* two loops: GCC 12 for aarch64 crashes vectorising both reductions in one */
    int s = 0;
    float amax = 0.0f;
    for (int i = 0; i < QK8_1; i++) s += b1[b].qs[i];
    for (int i = 0; i < QK8_1; i++) amax = fmaxf(amax, fabsf(x[b * QK8_1 + i]));
    /* s is d * sum, with d before its own fp16 rounding. */
    pa_f16 want = pa_f32_to_f16((float)s * (amax / 127.0f));
    CHECK(b1[b].s == want, "Q8_1 block %d: s = %04x, want %04x", b, b1[b].s, want);
  }
}

int main(void) {
  test_traits();
  test_f16();
  test_bf16();
  test_round_trips();
  test_activation_sums();
  if (failures) {
    fprintf(stderr, "test_quant: %d failures\n", failures);
    return 1;
  }
  printf("test_quant: ok\n");
  return 0;
}
