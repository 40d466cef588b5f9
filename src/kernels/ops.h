/* ops.h: the element-wise and row-wise float ops of the forward pass
 * (norms, RoPE, activations, softmax, residual adds). Plain C written so the
 * compiler vectorizes it; they are a small share of the time next to the
 * matrix products and attention.
 *
 * The transcendental ones (exp, and the SiLU / GELU-tanh gates built on it)
 * have SIMD versions chosen at run time like the matmul tables (pa_cpu(),
 * which honours PASADA_CPU=scalar|avx2). Every table computes the same
 * algorithm (see pa_ops_kernels), so they agree to rounding; within one table
 * an element's result depends only on its input, never on where it sits in
 * the array or on the array's length (SIMD tails are masked, not scalar). */
#ifndef PASADA_OPS_H
#define PASADA_OPS_H

#include <stdbool.h>
#include <stdint.h>

/* out = x / rms(x) * w (w may be NULL: no scale). out may alias x. */
void pa_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps);
/* Rotates n_heads heads of head_dim floats in place; the first rope_dim
 * dims of each head rotate with the given cos/sin table (rope_dim/2 entries).
 * neox: pairs (i, i + rope_dim/2); otherwise adjacent pairs (2i, 2i+1). */
void pa_rope(float *x, int n_heads, int head_dim, int rope_dim, const float *cos_t,
             const float *sin_t, bool neox);
/* Fills cos/sin tables for one position: theta_i = pos * base^(-2i/rope_dim) / freq_factor[i]. */
void pa_rope_table(float *cos_t, float *sin_t, int rope_dim, int32_t pos, float base,
                   float freq_scale, const float *freq_factors);
/* pa_rope_table with cos and sin multiplied by mscale (in double, then
 * rounded): LongRoPE's attention factor. */
void pa_rope_table_ext(float *cos_t, float *sin_t, int rope_dim, int32_t pos, float base, float freq_scale,
                       const float *freq_factors, float mscale);
/* x[i] = cap * tanh(x[i] / cap) (logit soft-capping; cap > 0) */
void pa_softcap(float *x, float cap, int64_t n);
void pa_softmax(float *x, int64_t n);
/* gate[i] = act(gate[i]) * up[i] */
void pa_silu_mul(float *gate, const float *up, int64_t n);
void pa_gelu_tanh_mul(float *gate, const float *up, int64_t n);
/* y[i] = exp(x[i]); y may alias x. */
void pa_exp(float *y, const float *x, int64_t n);
void pa_add(float *x, const float *y, int64_t n); /* x += y */
void pa_scale(float *x, float s, int64_t n);
float pa_dot_f32(const float *a, const float *b, int64_t n);
void pa_axpy(float *y, float a, const float *x, int64_t n); /* y += a*x */

/* ---- the vectorized element-wise kernels, one table per instruction set ----
 * exp(x): n = round(x * log2 e), r = x - n ln2 (Cody-Waite, two constants),
 * exp(r) by a degree-7 polynomial (Cephes' expf coefficients), times 2^n
 * built in the exponent bits. Inputs above 88 are taken as 88 (exp(88) =
 * 1.65e38: no infinities); inputs below -87.3365 give 0 (the true value is
 * below FLT_MIN = 1.18e-38); NaN gives NaN. Relative error against double
 * exp over [-87.3, 88]: about 8e-8 (one ulp) in every table; tests/unit/
 * test_ops.c checks 2e-7.
 * silu_mul: gate = g / (1 + exp(-g)) * up; relative error about 2e-7
 * (checked: 1e-6).
 * gelu_tanh_mul: gate = g / (1 + exp(-2u)) * up, u = sqrt(2/pi) (g + 0.044715 g^3),
 * which is 0.5 g (1 + tanh(u)) rewritten without tanh (and without its
 * cancellation for negative u). Relative error: about half of 1e-6 +
 * 2.5e-7 |2u| (checked at that bound); the second term, the rounding of u
 * magnified by exp, matters only for g < -2, where the result is below 2%
 * of |g|. */
typedef struct {
  const char *name; /* "plain", "avx2", "avx512" */
  void (*exp)(float *y, const float *x, int64_t n);
  void (*silu_mul)(float *gate, const float *up, int64_t n);
  void (*gelu_tanh_mul)(float *gate, const float *up, int64_t n);
  /* IEEE half <-> float, n values (the F16 KV cache): round to nearest even,
   * overflow to infinity, NaNs stay NaN; exact conversions, so every table
   * gives the same bits. */
  void (*f32_to_f16)(uint16_t *y, const float *x, int64_t n);
  void (*f16_to_f32)(float *y, const uint16_t *x, int64_t n);
  /* A row of the Q8 KV cache: returns scale = max |x| / 127 (NaN values
   * skipped) and sets q[i] = x[i] / scale rounded to nearest, ties away
   * from zero, within [-127, 127] (0 where the quotient is NaN, and all 0
   * when scale is 0); the same operations in every table, so the same bits. */
  float (*q8_row)(int8_t *q, const float *x, int64_t n);
  /* pa_rmsnorm and pa_rope (above), with the plain versions' bits: the
   * sum of squares in the same 8 double chains (lane k of a vector of
   * doubles is chain k; a float's square is exact in double, so a fused
   * multiply-add rounds as the plain add does), the same products and sums
   * in the same order */
  void (*rmsnorm)(float *out, const float *x, const float *w, int64_t n, float eps);
  void (*rope)(float *x, int n_heads, int head_dim, int rope_dim, const float *cos_t, const float *sin_t,
               bool neox);
  /* x += y, n values: one IEEE add each, so every table gives the same bits
   * (the residual adds; a scalar loop took ~4% of a 16-user serving step's
   * samples, SmolLM2) */
  void (*add)(float *x, const float *y, int64_t n);
} pa_ops_kernels;

const pa_ops_kernels *pa_ops_plain(void);  /* plain C, any CPU */
const pa_ops_kernels *pa_ops_avx2(void);   /* AVX2 + FMA + F16C; NULL when the CPU (as capped) lacks them */
const pa_ops_kernels *pa_ops_avx512(void); /* AVX-512 F + the above; NULL likewise */
const pa_ops_kernels *pa_ops_best(void);   /* the fastest this CPU has */
/* pa_exp, pa_rmsnorm, pa_silu_mul... (above) use the best table; code that
 * runs for a backend takes the backend's table instead. */

/* The SIMD bodies (src/kernels/cpu/ops_avx2.c, ops_avx512.c); call them only
 * through the tables above, which check the CPU. */
void pa_exp_avx2(float *y, const float *x, int64_t n);
void pa_silu_mul_avx2(float *gate, const float *up, int64_t n);
void pa_gelu_tanh_mul_avx2(float *gate, const float *up, int64_t n);
void pa_f32_to_f16_avx2(uint16_t *y, const float *x, int64_t n);
void pa_f16_to_f32_avx2(float *y, const uint16_t *x, int64_t n);
float pa_q8_row_avx2(int8_t *q, const float *x, int64_t n);
void pa_rmsnorm_avx2(float *out, const float *x, const float *w, int64_t n, float eps);
void pa_add_avx2(float *x, const float *y, int64_t n);
void pa_rope_avx2(float *x, int n_heads, int head_dim, int rope_dim, const float *cos_t, const float *sin_t,
                  bool neox);
void pa_exp_avx512(float *y, const float *x, int64_t n);
void pa_silu_mul_avx512(float *gate, const float *up, int64_t n);
void pa_gelu_tanh_mul_avx512(float *gate, const float *up, int64_t n);
void pa_f32_to_f16_avx512(uint16_t *y, const float *x, int64_t n);
void pa_f16_to_f32_avx512(float *y, const uint16_t *x, int64_t n);
float pa_q8_row_avx512(int8_t *q, const float *x, int64_t n);
void pa_rmsnorm_avx512(float *out, const float *x, const float *w, int64_t n, float eps);
void pa_add_avx512(float *x, const float *y, int64_t n);
void pa_rope_avx512(float *x, int n_heads, int head_dim, int rope_dim, const float *cos_t, const float *sin_t,
                    bool neox);

/* The constants every table shares. */
#define PA_EXP_HI 88.0f
#define PA_EXP_LO -87.33654f
#define PA_EXP_LOG2E 1.44269504088896341f
#define PA_EXP_C1 0.693359375f
#define PA_EXP_C2 -2.12194440e-4f
#define PA_EXP_P0 1.9875691500e-4f
#define PA_EXP_P1 1.3981999507e-3f
#define PA_EXP_P2 8.3334519073e-3f
#define PA_EXP_P3 4.1665795894e-2f
#define PA_EXP_P4 1.6666665459e-1f
#define PA_EXP_P5 5.0000001201e-1f
#define PA_GELU_K1 -1.5957691216057308f   /* -2 sqrt(2/pi) */
#define PA_GELU_K2 -0.07135481627260025f  /* -2 sqrt(2/pi) * 0.044715 */

#endif
