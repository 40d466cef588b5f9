/* ops.h: the element-wise and row-wise float ops of the forward pass
 * (norms, RoPE, activations, softmax, residual adds). Plain C written so the
 * compiler vectorizes it; they are a small share of the time next to the
 * matrix products and attention. */
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
void pa_softmax(float *x, int64_t n);
/* gate[i] = act(gate[i]) * up[i] */
void pa_silu_mul(float *gate, const float *up, int64_t n);
void pa_gelu_tanh_mul(float *gate, const float *up, int64_t n);
void pa_add(float *x, const float *y, int64_t n); /* x += y */
void pa_scale(float *x, float s, int64_t n);
float pa_dot_f32(const float *a, const float *b, int64_t n);
void pa_axpy(float *y, float a, const float *x, int64_t n); /* y += a*x */

#endif
