/* delta.c: the host backends' linear-attention ops (backend.h: delta_net,
 * sigmoid_mul, state_copy): Gated DeltaNet's conv, normalisation and
 * recurrence over a pass's tokens, with every sequence's recurrent state
 * in the context (pa_bctx.ssm: [slot][recurrent layer][state]). One plain
 * implementation serves cpu and ref (sums in double); the recurrence runs
 * on the pool, a task per (sequence, value head). */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "base/base.h"

static float silu(float x) { return x / (1.0f + expf(-x)); }
static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

float *pa_cpu_ssm_state(pa_bctx *c, int32_t slot, int layer) {
  return c->ssm + ((int64_t)slot * c->n_recurrent + c->ssm_index[layer]) * pa_ssm_state_floats(c->hp);
}

typedef struct {
  pa_bctx *c;
  const pa_fwd_batch *b;
  const pa_delta_desc *d;
} delta_job;

/* The recurrence of one (sequence, value head) over the pass's tokens of
 * that sequence, in batch order. */
static void delta_task(void *arg, int i, int n_tasks) {
  (void)n_tasks;
  const delta_job *j = arg;
  pa_bctx *c = j->c;
  const pa_hparams *hp = c->hp;
  const pa_delta_desc *d = j->d;
  const int32_t s = i / hp->ssm_v_heads, h = i % hp->ssm_v_heads;
  const int Kd = hp->ssm_k_dim, Vd = hp->ssm_v_dim;
  /* rows packed as the products write them: qkv conv_dim wide, z and out
   * v_heads * Vd, beta and alpha v_heads */
  const int64_t cd = pa_ssm_conv_dim(hp), wq = cd, wz = (int64_t)hp->ssm_v_heads * Vd, wo = wz;
  const int64_t wb = hp->ssm_v_heads, wa = hp->ssm_v_heads;
  const int kh = h % hp->ssm_k_heads;
  float *S = pa_cpu_ssm_state(c, s, d->layer) + (int64_t)(hp->ssm_conv - 1) * cd + (int64_t)h * Kd * Vd;
  double kv[1024];
  for (int32_t t = 0; t < j->b->n; t++) {
    if (j->b->seq[t] != s) continue;
    if (j->b->pos[t] == 0) memset(S, 0, (size_t)Kd * Vd * sizeof(float));
    const float *row = c->buf[d->qkv] + t * wq;
    const float *q = row + (int64_t)kh * Kd, *k = row + (int64_t)hp->ssm_k_heads * Kd + (int64_t)kh * Kd;
    const float *v = row + 2 * (int64_t)hp->ssm_k_heads * Kd + (int64_t)h * Vd;
    const float g = d->a[h] * softplus(c->buf[d->alpha][t * wa + h] + d->dt_bias[h]);
    const float beta = sigmoid(c->buf[d->beta][t * wb + h]);
    const float decay = expf(g);
    for (int64_t e = 0; e < (int64_t)Kd * Vd; e++) S[e] *= decay;
    for (int y = 0; y < Vd; y++) kv[y] = 0;
    for (int x = 0; x < Kd; x++)
      for (int y = 0; y < Vd; y++) kv[y] += (double)S[x * Vd + y] * k[x];
    for (int y = 0; y < Vd; y++) kv[y] = (v[y] - kv[y]) * beta; /* delta */
    for (int x = 0; x < Kd; x++)
      for (int y = 0; y < Vd; y++) S[x * Vd + y] += (float)(k[x] * kv[y]);
    if (j->b->ckpt && j->b->ckpt[t] >= 0)
      memcpy(pa_cpu_ssm_state(c, j->b->ckpt[t], d->layer) + (int64_t)(hp->ssm_conv - 1) * cd +
                 (int64_t)h * Kd * Vd,
             S, (size_t)Kd * Vd * sizeof(float));
    float *o = c->buf[d->out] + t * wo + (int64_t)h * Vd;
    for (int y = 0; y < Vd; y++) kv[y] = 0;
    for (int x = 0; x < Kd; x++)
      for (int y = 0; y < Vd; y++) kv[y] += (double)S[x * Vd + y] * q[x];
    /* the gated norm: rmsnorm(o) * norm * silu(z) */
    double ss = 0;
    for (int y = 0; y < Vd; y++) ss += kv[y] * kv[y];
    const double inv = 1.0 / sqrt(ss / Vd + hp->norm_eps);
    const float *z = c->buf[d->z] + t * wz + (int64_t)h * Vd;
    for (int y = 0; y < Vd; y++) o[y] = (float)(kv[y] * inv) * d->norm[y] * silu(z[y]);
  }
}

/* L2 normalisation of n floats in place (eps inside the root, as FLA's). */
static void l2norm(float *x, int n) {
  double ss = 0;
  for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
  const float inv = (float)(1.0 / sqrt(ss + 1e-6));
  for (int i = 0; i < n; i++) x[i] *= inv;
}

void pa_cpu_delta_net(pa_bctx *c, const pa_fwd_batch *b, const pa_delta_desc *d) {
  const pa_hparams *hp = c->hp;
  const int64_t cd = pa_ssm_conv_dim(hp), wq = cd;
  const int taps = hp->ssm_conv, Kd = hp->ssm_k_dim;
  /* the conv, in place, token after token: each token's output reads the
   * previous inputs from the state, which then takes the token's input */
  for (int32_t t = 0; t < b->n; t++) {
    float *st = pa_cpu_ssm_state(c, b->seq[t], d->layer); /* [taps - 1][cd], oldest first */
    if (b->pos[t] == 0) memset(st, 0, (size_t)(taps - 1) * (size_t)cd * sizeof(float));
    float *row = c->buf[d->qkv] + t * wq;
    for (int64_t ch = 0; ch < cd; ch++) {
      const float *w = d->conv_w + ch * taps;
      double acc = (double)w[taps - 1] * row[ch];
      for (int j = 0; j < taps - 1; j++) acc += (double)w[j] * st[j * cd + ch];
      const float in = row[ch];
      for (int j = 0; j + 1 < taps - 1; j++) st[j * cd + ch] = st[(j + 1) * cd + ch];
      if (taps > 1) st[(int64_t)(taps - 2) * cd + ch] = in;
      row[ch] = silu((float)acc);
    }
    if (b->ckpt && b->ckpt[t] >= 0)
      memcpy(pa_cpu_ssm_state(c, b->ckpt[t], d->layer), st,
             (size_t)(taps - 1) * (size_t)cd * sizeof(float));
    /* q and k of every key head L2-normalised; q scaled by 1 / sqrt(Kd) */
    const float qs = 1.0f / sqrtf((float)Kd);
    for (int hh = 0; hh < 2 * hp->ssm_k_heads; hh++) l2norm(row + (int64_t)hh * Kd, Kd);
    for (int64_t i = 0; i < (int64_t)hp->ssm_k_heads * Kd; i++) row[i] *= qs;
  }
  delta_job j = {c, b, d};
  const int n_tasks = c->n_seq_max * hp->ssm_v_heads;
  if (c->pool)
    pa_pool_run_tasks(c->pool, delta_task, &j, n_tasks);
  else
    for (int i = 0; i < n_tasks; i++) delta_task(&j, i, n_tasks);
}

void pa_cpu_sigmoid_mul(pa_bctx *c, pa_buf x, pa_buf g, int64_t n, int64_t ng, int32_t n_tok) {
  float *xr = c->buf[x];
  const float *gr = c->buf[g];
  if (ng == 1)
    for (int64_t i = 0; i < n * n_tok; i++) xr[i] *= sigmoid(gr[i / n]);
  else
    for (int64_t i = 0; i < n * n_tok; i++) xr[i] *= sigmoid(gr[i]);
}

void pa_cpu_state_copy(pa_bctx *c, int32_t dst, int32_t src) {
  if (!c->ssm || dst == src) return;
  const size_t n = (size_t)c->n_recurrent * (size_t)pa_ssm_state_floats(c->hp);
  memcpy(c->ssm + (size_t)dst * n, c->ssm + (size_t)src * n, n * sizeof(float));
}
