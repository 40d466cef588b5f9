/* sampler.h: internals of the token sampler (the public API is the
 * pasada_sampler_* section of pasada.h).
 *
 * A sampler owns its parameters, a seeded PRNG, the window of recently
 * accepted tokens (for the repetition, presence and frequency penalties) and
 * scratch buffers sized once for the vocabulary, so sampling one token never
 * allocates. These helpers expose the intermediate steps so tests can check
 * each of them exactly. */
#ifndef PASADA_SAMPLER_H
#define PASADA_SAMPLER_H

#include <stdint.h>

#include "pasada.h"

typedef struct pa_sampler pa_sampler;

/* Applies the repetition, presence and frequency penalties of the tokens in
 * the window to `logits` (n_vocab values, modified in place). */
void pa_sampler_penalize(pa_sampler *s, float *logits, int32_t n_vocab);

/* Runs the whole pipeline except the final draw and writes, for every token,
 * the probability it would be drawn with (0 for the tokens that top-k, top-p
 * or min-p excluded; 1 for the greedy choice at temperature 0) to `probs`
 * (n_vocab floats). Returns PASADA_OK or an error status. */
int pa_sampler_distribution(pa_sampler *s, const float *logits, int32_t n_vocab, float *probs);

/* Uniform double in [0, 1) from the sampler's generator (advances it). */
double pa_sampler_uniform(pa_sampler *s);

#endif
