/* sampler_constrain.c: the sampler's logit bias and grammar mask (see
 * sampler_constrain.h). Buffers are sized when a bias or grammar is set;
 * applying them allocates nothing. */
#include "runtime/sampler_constrain.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

void pa_sconstraint_free(pa_sconstraint *c) {
  free(c->bias_ids);
  free(c->bias);
  pa_gmatcher_free(c->matcher);
  free(c->allowed);
  c->bias_ids = NULL;
  c->bias = NULL;
  c->n_bias = 0;
  c->matcher = NULL;
  c->allowed = NULL;
  c->grammar = NULL;
}

int pa_sconstraint_set_bias(pa_sconstraint *c, const int32_t *ids, const float *bias, size_t n) {
  if (n && (!ids || !bias)) return pa_error(PASADA_ERR_ARG, "sampler: logit bias: no arrays given");
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= c->n_vocab)
      return pa_error(PASADA_ERR_ARG,
                      "sampler: logit bias: token %d is outside the vocabulary of %d", ids[i],
                      c->n_vocab);
    if (!isfinite(bias[i]))
      return pa_error(PASADA_ERR_ARG, "sampler: logit bias of token %d is not a finite number",
                      ids[i]);
  }
  int32_t *ni = n ? malloc(n * sizeof *ni) : NULL;
  float *nb = n ? malloc(n * sizeof *nb) : NULL;
  if (n && (!ni || !nb)) {
    free(ni);
    free(nb);
    return pa_error(PASADA_ERR_NOMEM, "sampler: out of memory for a logit bias");
  }
  if (n) {
    memcpy(ni, ids, n * sizeof *ni);
    memcpy(nb, bias, n * sizeof *nb);
  }
  free(c->bias_ids);
  free(c->bias);
  c->bias_ids = ni;
  c->bias = nb;
  c->n_bias = n;
  return PASADA_OK;
}

int pa_sconstraint_set_grammar(pa_sconstraint *c, const pa_grammar *g) {
  if (!g) {
    pa_gmatcher_free(c->matcher);
    c->matcher = NULL;
    c->grammar = NULL;
    return PASADA_OK;
  }
  if (g->n_vocab != c->n_vocab)
    return pa_error(
        PASADA_ERR_ARG,
        "sampler: the grammar was made for a vocabulary of %d tokens, the sampler for %d",
        g->n_vocab, c->n_vocab);
  if (!c->allowed && !(c->allowed = calloc(((size_t)c->n_vocab + 63) / 64, 8)))
    return pa_error(PASADA_ERR_NOMEM, "sampler: out of memory for a grammar mask");
  pa_gmatcher *m;
  int st = pa_gmatcher_create(g, &m);
  if (st) return st;
  pa_gmatcher_free(c->matcher);
  c->matcher = m;
  c->grammar = g;
  return PASADA_OK;
}

void pa_sconstraint_add_bias(const pa_sconstraint *c, float *logits) {
  for (size_t i = 0; i < c->n_bias; i++) logits[c->bias_ids[i]] += c->bias[i];
}

int pa_sconstraint_mask(pa_sconstraint *c) {
  int64_t n = pa_gmatcher_mask(c->matcher, c->allowed);
  if (n < 0) return PASADA_ERR_ARG; /* the error names the grammar's reason */
  if (n == 0)
    return pa_error(PASADA_ERR_ARG,
                    "grammar: no token of the vocabulary can continue the text here");
  return PASADA_OK;
}

void pa_sconstraint_apply_mask(const pa_sconstraint *c, float *logits) {
  const int32_t n = c->n_vocab;
  for (int32_t w = 0; w * 64 < n; w++) {
    const uint64_t bits = c->allowed[w];
    const int32_t base = w * 64, len = n - base < 64 ? n - base : 64;
    if (bits == UINT64_MAX && len == 64) continue;
    if (!bits) {
      for (int32_t i = 0; i < len; i++) logits[base + i] = -INFINITY;
      continue;
    }
    for (int32_t i = 0; i < len; i++)
      if (!(bits >> i & 1)) logits[base + i] = -INFINITY;
  }
}

int32_t pa_sconstraint_first_allowed(const pa_sconstraint *c) {
  for (int32_t w = 0; w * 64 < c->n_vocab; w++)
    if (c->allowed[w]) return w * 64 + __builtin_ctzll(c->allowed[w]);
  return 0;
}
