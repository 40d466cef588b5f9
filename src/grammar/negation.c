/* negation.c: negated token references (!<[id]>, !<text>): one whole
 * token other than the named one, as llama.cpp's GBNF has them. gbnf.c
 * spells one as a literal of 0xFE and the id in four 6-bit continuation
 * bytes (pa_gneg_spelling); no token is spelled with 0xFE, so a token's
 * bytes never cross it. At a token's start, a head whose state reads 0xFE
 * takes any token but the id its literal names, end-of-generation tokens
 * excepted (they end the grammar where it may end), to the state after the
 * literal: the ids are found by walking the literal's 64-way branches. */
#include <stdlib.h>
#include <string.h>

#include "grammar/matcher.h"

bool pa_gm_neg_init(pa_gmatcher *m) {
  const pa_grammar *g = m->g;
  const uint32_t c = g->cls[PA_G_NEG_BYTE];
  m->has_neg = false;
  for (uint32_t s = 0; s < g->n_states && !m->has_neg; s++)
    m->has_neg = g->trans[(size_t)s * g->n_cls + c] != PA_G_NONE;
  if (!m->has_neg) return true;
  m->neg_buf = malloc(5 * (size_t)PA_G_MAX_HEADS * sizeof *m->neg_buf);
  m->neg_acc = malloc((size_t)PA_G_MAX_HEADS * sizeof *m->neg_acc);
  return m->neg_buf && m->neg_acc;
}

void pa_gm_neg_free(pa_gmatcher *m) {
  free(m->neg_buf);
  free(m->neg_acc);
}

typedef bool (*neg_fn)(pa_gmatcher *m, int32_t id, const pa_gout *after, void *u);

/* The literals' id bytes from depth on (heads in[0..n_in)): fn for each id
 * whose literal leads somewhere. */
static bool walk(pa_gmatcher *m, const pa_ghead *in, uint32_t n_in, int depth, uint32_t id,
                 bool scratch, neg_fn fn, void *u) {
  const pa_grammar *g = m->g;
  pa_ghead *buf = m->neg_buf + (size_t)depth * PA_G_MAX_HEADS;
  for (int b = 0x80; b < 0xC0; b++) {
    const uint32_t c = g->cls[b];
    bool any = false;
    for (uint32_t i = 0; i < n_in && !any; i++)
      any = g->trans[(size_t)in[i].node * g->n_cls + c] != PA_G_NONE;
    if (!any) continue;
    pa_gout o = {buf, 0, false};
    if (!pa_gm_advance(m, in, n_in, (uint8_t)b, scratch, &o)) return false;
    if (!o.n && !o.end) continue;
    const uint32_t x = id << 6 | (uint32_t)(b & 0x3F);
    if (depth == 3 ? !fn(m, (int32_t)x, &o, u) : !walk(m, buf, o.n, depth + 1, x, scratch, fn, u))
      return false;
  }
  return true;
}

static bool neg_walk(pa_gmatcher *m, bool scratch, neg_fn fn, void *u) {
  if (!m->has_neg || m->finished || !m->n_cur) return true;
  pa_gout o = {m->neg_buf + 4 * (size_t)PA_G_MAX_HEADS, 0, false};
  if (!pa_gm_advance(m, m->cur, m->n_cur, PA_G_NEG_BYTE, scratch, &o)) return false;
  return !o.n || walk(m, o.h, o.n, 0, 0, scratch, fn, u);
}

static bool on_accept(pa_gmatcher *m, int32_t id, const pa_gout *after, void *u) {
  if (id == *(const int32_t *)u) return true; /* the excluded token */
  m->neg_end |= after->end;
  for (uint32_t i = 0; i < after->n; i++) {
    bool dup = false;
    for (uint32_t k = 0; k < m->n_neg_acc && !dup; k++)
      dup = m->neg_acc[k].node == after->h[i].node && m->neg_acc[k].parent == after->h[i].parent;
    if (dup) continue;
    if (m->n_neg_acc == PA_G_MAX_HEADS)
      return pa_gm_fail(m, "the grammar is too ambiguous (too many parses at once)");
    m->neg_acc[m->n_neg_acc++] = after->h[i];
  }
  return true;
}

bool pa_gm_neg_accept(pa_gmatcher *m, int32_t token) {
  m->n_neg_acc = 0;
  m->neg_end = false;
  if (pa_gvocab_is_eog(m->g->vocab, token)) return true;
  return neg_walk(m, false, on_accept, &token);
}

typedef struct {
  int n; /* distinct excluded ids seen, up to 2 */
  int32_t id;
} excl;

static bool on_allowed(pa_gmatcher *m, int32_t id, const pa_gout *after, void *u) {
  (void)m, (void)after;
  excl *x = u;
  if (x->n == 0) {
    x->n = 1;
    x->id = id;
  } else if (x->id != id) {
    x->n = 2; /* !<a> or !<b>: any token */
  }
  return true;
}

bool pa_gm_neg_allowed(pa_gmatcher *m, bool *all, int32_t *only_but) {
  excl x = {0, -1};
  *all = false;
  *only_but = -1;
  bool ok = neg_walk(m, true, on_allowed, &x);
  pa_gm_drop_scratch(m);
  if (!ok) return false;
  *all = x.n == 2;
  if (x.n == 1) *only_but = x.id;
  return true;
}
