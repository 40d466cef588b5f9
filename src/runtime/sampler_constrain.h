/* sampler_constrain.h: what the sampler applies before its chain: a sparse
 * logit bias and a grammar's token mask (src/grammar). The sampler owns one
 * of these and calls it in order: bias, mask, then penalties and the
 * chain. */
#ifndef PASADA_SAMPLER_CONSTRAIN_H
#define PASADA_SAMPLER_CONSTRAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "grammar/grammar.h"

typedef struct {
  int32_t n_vocab;
  int32_t *bias_ids;
  float *bias;
  size_t n_bias;
  const pa_grammar *grammar;
  pa_gmatcher *matcher;
  uint64_t *allowed; /* n_vocab bits: the last mask */
} pa_sconstraint;

void pa_sconstraint_free(pa_sconstraint *c);
int pa_sconstraint_set_bias(pa_sconstraint *c, const int32_t *ids, const float *bias, size_t n);
int pa_sconstraint_set_grammar(pa_sconstraint *c, const pa_grammar *g);
/* logits[id] += bias for each entry. */
void pa_sconstraint_add_bias(const pa_sconstraint *c, float *logits);
/* Computes the grammar's mask into c->allowed: PASADA_OK, or PASADA_ERR_ARG
 * (a dead grammar, or no token allowed). */
int pa_sconstraint_mask(pa_sconstraint *c);
/* Sets logits[id] = -infinity for every token outside c->allowed. */
void pa_sconstraint_apply_mask(const pa_sconstraint *c, float *logits);
static inline bool pa_sconstraint_allowed(const pa_sconstraint *c, int32_t id) {
  return c->allowed[id >> 6] >> (id & 63) & 1;
}
/* The lowest allowed id (the pick when every allowed logit is -infinity). */
int32_t pa_sconstraint_first_allowed(const pa_sconstraint *c);

#endif
