/* matcher.c: one sequence's parse state and how bytes advance it. A state
 * is a set of heads (a DFA state and the frame below it) and whether the
 * root rule can end here. Frames (a return state over the frame below) are
 * hash-consed, so equal stacks are one id and a set of heads deduplicates
 * exactly. Frames the accepted text pushes are kept (committed); those a
 * mask or a look-ahead pushes are scratch, dropped after it. */
#include "grammar/matcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

static uint32_t hash2(uint32_t a, uint32_t b) {
  uint64_t h = ((uint64_t)a << 32 | b) * 0x9e3779b97f4a7c15ull;
  return (uint32_t)(h >> 32) ^ (uint32_t)h;
}

bool pa_gm_fail(pa_gmatcher *m, const char *why) {
  if (!m->err[0]) snprintf(m->err, sizeof m->err, "grammar: %s", why);
  return false;
}

/* ---- frames ---- */

static bool grow_frames(pa_gmatcher *m) {
  if (m->cap_frames >= PA_G_MAX_FRAMES) return pa_gm_fail(m, "the parse stack grew too deep");
  uint32_t cap = m->cap_frames * 2;
  pa_ghead *f = realloc(m->frames, (size_t)cap * sizeof *f);
  if (!f) return pa_gm_fail(m, "out of memory for the parse stack");
  m->frames = f;
  m->cap_frames = cap;
  return true;
}

/* Rebuilds a table of frame ids [from, to) with capacity cap (a power of 2). */
static bool rebuild(pa_gmatcher *m, uint32_t **tab, uint32_t **stamp, uint32_t *mask, uint32_t cap,
                    uint32_t from, uint32_t to) {
  uint32_t *t = calloc(cap, sizeof *t);
  uint32_t *s = stamp ? calloc(cap, sizeof *s) : NULL;
  if (!t || (stamp && !s)) {
    free(t);
    free(s);
    return pa_gm_fail(m, "out of memory for the parse stack");
  }
  for (uint32_t i = from; i < to; i++) {
    uint32_t h = hash2(m->frames[i].node, m->frames[i].parent) & (cap - 1);
    while (t[h] && (!s || s[h] == m->stamp)) h = (h + 1) & (cap - 1);
    t[h] = i + 1;
    if (s) s[h] = m->stamp;
  }
  free(*tab);
  *tab = t;
  if (stamp) {
    free(*stamp);
    *stamp = s;
  }
  *mask = cap - 1;
  return true;
}

uint32_t pa_gm_push(pa_gmatcher *m, uint32_t node, uint32_t parent, bool scratch) {
  uint32_t h0 = hash2(node, parent);
  for (uint32_t h = h0 & m->ctab_mask; m->ctab[h]; h = (h + 1) & m->ctab_mask) {
    const pa_ghead *f = &m->frames[m->ctab[h] - 1];
    if (f->node == node && f->parent == parent) return m->ctab[h] - 1;
  }
  if (scratch) {
    uint32_t h = h0 & m->stab_mask;
    for (; m->stab[h] && m->sstamp[h] == m->stamp; h = (h + 1) & m->stab_mask) {
      const pa_ghead *f = &m->frames[m->stab[h] - 1];
      if (f->node == node && f->parent == parent) return m->stab[h] - 1;
    }
    if (m->n_frames == m->cap_frames && !grow_frames(m)) return PA_G_NONE;
    uint32_t id = m->n_frames++;
    m->frames[id] = (pa_ghead){node, parent};
    m->stab[h] = id + 1;
    m->sstamp[h] = m->stamp;
    if ((m->n_frames - m->n_committed) * 2 > m->stab_mask &&
        !rebuild(m, &m->stab, &m->sstamp, &m->stab_mask, (m->stab_mask + 1) * 2, m->n_committed,
                 m->n_frames))
      return PA_G_NONE;
    return id;
  }
  /* committed: only while no scratch frame exists */
  if (m->n_frames == m->cap_frames && !grow_frames(m)) return PA_G_NONE;
  uint32_t id = m->n_frames++;
  m->n_committed = m->n_frames;
  m->frames[id] = (pa_ghead){node, parent};
  uint32_t h = h0 & m->ctab_mask;
  while (m->ctab[h]) h = (h + 1) & m->ctab_mask;
  m->ctab[h] = id + 1;
  if (m->n_committed * 2 > m->ctab_mask &&
      !rebuild(m, &m->ctab, NULL, &m->ctab_mask, (m->ctab_mask + 1) * 2, 0, m->n_committed))
    return PA_G_NONE;
  return id;
}

void pa_gm_drop_scratch(pa_gmatcher *m) {
  m->n_frames = m->n_committed;
  if (++m->stamp == 0) { /* stamps wrapped: clear them */
    memset(m->sstamp, 0, ((size_t)m->stab_mask + 1) * sizeof *m->sstamp);
    m->stamp = 1;
  }
}

/* ---- closure ---- */

/* Adds head (node, parent) to out unless present. */
static inline bool emit(pa_gmatcher *m, pa_gout *o, uint32_t node, uint32_t parent) {
  for (uint32_t i = 0; i < o->n; i++)
    if (o->h[i].node == node && o->h[i].parent == parent) return true;
  if (o->n == PA_G_MAX_HEADS)
    return pa_gm_fail(m, "the grammar is too ambiguous (too many parses at once)");
  o->h[o->n++] = (pa_ghead){node, parent};
  return true;
}

/* Whether (node, parent, jc) was already seen in this closure. */
static bool seen(pa_gmatcher *m, uint32_t node, uint32_t parent, uint32_t jc) {
  uint64_t key = ((uint64_t)node << 33) ^ ((uint64_t)parent << 1) ^ jc;
  uint32_t h = hash2(node, parent ^ (jc << 31)) & (PA_GM_VISIT_SLOTS - 1);
  for (; m->vstamp[h] == m->vcur; h = (h + 1) & (PA_GM_VISIT_SLOTS - 1))
    if (m->vkey[h] == key) return true;
  m->vstamp[h] = m->vcur;
  m->vcount++;
  m->vkey[h] = key;
  return false;
}

/* Every head reachable from state `node` over the stack `parent` without
 * reading a byte: itself when it reads bytes, the starts of the rules it
 * calls (their returns pushed), and when its rule may end, what the frame
 * below continues with (or the end of the root). */
bool pa_gm_closure(pa_gmatcher *m, uint32_t node, uint32_t parent, bool scratch, pa_gout *o) {
  const pa_grammar *g = m->g;
  m->vcount = 0;
  if (++m->vcur == 0) {
    memset(m->vstamp, 0, sizeof m->vstamp);
    m->vcur = 1;
  }
  uint32_t n = 0;
  m->work[n++] = (pa_gwork){node, parent, 0};
  while (n) {
    pa_gwork w = m->work[--n];
    if (seen(m, w.node, w.parent, w.jc)) continue;
    if (m->vcount >= PA_G_MAX_CLOSURE)
      return pa_gm_fail(m, "the grammar is too ambiguous (closure)");
    if (++m->steps > PA_G_WORK_BUDGET) return pa_gm_fail(m, "the grammar is too costly to follow");
    uint8_t f = g->flags[w.node];
    if ((f & PA_GS_BYTES) && !emit(m, o, w.node, w.parent)) return false;
    if (f & PA_GS_CALLS)
      for (uint32_t k = g->call_off[w.node]; k < g->call_off[w.node + 1]; k++) {
        const pa_gcall *c = &g->calls[k];
        uint32_t p = w.parent;
        if (c->ret != PA_G_NONE && (p = pa_gm_push(m, c->ret, w.parent, scratch)) == PA_G_NONE)
          return false;
        if (n == PA_G_MAX_CLOSURE) return pa_gm_fail(m, "the grammar is too ambiguous (closure)");
        m->work[n++] = (pa_gwork){c->start, p, 1};
      }
    /* a rule just called does not end at once: the caller's epsilon move
     * for a rule matching the empty text stands for that */
    if ((f & PA_GS_FINAL) && !w.jc) {
      if (w.parent == PA_G_NONE) {
        o->end = true;
      } else {
        if (n == PA_G_MAX_CLOSURE) return pa_gm_fail(m, "the grammar is too ambiguous (closure)");
        const pa_ghead fr = m->frames[w.parent];
        m->work[n++] = (pa_gwork){fr.node, fr.parent, 0};
      }
    }
  }
  return true;
}

bool pa_gm_advance(pa_gmatcher *m, const pa_ghead *in, uint32_t n_in, uint8_t byte, bool scratch,
                   pa_gout *o) {
  const pa_grammar *g = m->g;
  const uint32_t nc = g->n_cls, c = g->cls[byte];
  o->n = 0;
  o->end = false;
  for (uint32_t i = 0; i < n_in; i++) {
    uint32_t t = g->trans[(size_t)in[i].node * nc + c];
    if (t == PA_G_NONE) continue;
    if (!(t & PA_G_SLOW)) { /* the common case: stays inside the rule */
      if (!emit(m, o, t, in[i].parent)) return false;
      continue;
    }
    if (!pa_gm_closure(m, t & ~PA_G_SLOW, in[i].parent, scratch, o)) return false;
  }
  m->steps += n_in;
  if (m->steps > PA_G_WORK_BUDGET) return pa_gm_fail(m, "the grammar is too costly to follow");
  return true;
}

/* ---- lifetime, the accepted state ---- */

int pa_gmatcher_create(const pa_grammar *g, pa_gmatcher **out) {
  *out = NULL;
  pa_gmatcher *m = calloc(1, sizeof *m);
  if (!m) return pa_error(PASADA_ERR_NOMEM, "grammar: out of memory");
  m->g = g;
  m->cap_frames = 1024;
  m->frames = malloc(m->cap_frames * sizeof *m->frames);
  m->ctab_mask = 4095;
  m->ctab = calloc(m->ctab_mask + 1, sizeof *m->ctab);
  m->stab_mask = 4095;
  m->stab = calloc(m->stab_mask + 1, sizeof *m->stab);
  m->sstamp = calloc(m->stab_mask + 1, sizeof *m->sstamp);
  m->stamp = 1;
  m->work = malloc(PA_G_MAX_CLOSURE * sizeof *m->work);
  for (int i = 0; i < 3; i++) m->buf[i] = malloc(PA_G_MAX_HEADS * sizeof *m->buf[i]);
  m->max_len = g->vocab ? g->vocab->max_len : 0;
  m->lvl = malloc(((size_t)m->max_len + 2) * sizeof *m->lvl);
  m->lv_cap = 4 * PA_G_MAX_HEADS;
  m->lv = malloc(m->lv_cap * sizeof *m->lv);
  if (!m->frames || !m->ctab || !m->stab || !m->sstamp || !m->work || !m->buf[0] || !m->buf[1] ||
      !m->buf[2] || !m->lvl || !m->lv || !pa_gm_neg_init(m)) {
    pa_gmatcher_free(m);
    return pa_error(PASADA_ERR_NOMEM, "grammar: out of memory for a matcher");
  }
  pa_gmatcher_reset(m);
  *out = m;
  return PASADA_OK;
}

void pa_gmatcher_free(pa_gmatcher *m) {
  if (!m) return;
  free(m->frames);
  free(m->ctab);
  free(m->stab);
  free(m->sstamp);
  free(m->work);
  for (int i = 0; i < 3; i++) free(m->buf[i]);
  free(m->lvl);
  free(m->lv);
  pa_gm_neg_free(m);
  free(m);
}

void pa_gmatcher_reset(pa_gmatcher *m) {
  m->n_frames = m->n_committed = 0;
  memset(m->ctab, 0, ((size_t)m->ctab_mask + 1) * sizeof *m->ctab);
  pa_gm_drop_scratch(m);
  m->err[0] = 0;
  m->dead = m->finished = false;
  m->steps = 0;
  m->cur = m->buf[0];
  pa_gout o = {m->cur, 0, false};
  if (!pa_gm_closure(m, m->g->start, PA_G_NONE, false, &o)) {
    m->dead = true;
    return;
  }
  m->n_cur = o.n;
  m->end = o.end;
}

bool pa_gmatcher_accept_bytes(pa_gmatcher *m, const uint8_t *b, size_t n) {
  if (m->dead || m->finished) return n == 0 && !m->dead;
  m->steps = 0;
  const pa_ghead *in = m->cur;
  uint32_t n_in = m->n_cur;
  bool end = m->end;
  int ci = m->cur == m->buf[0] ? 0 : m->cur == m->buf[1] ? 1 : 2;
  for (size_t i = 0; i < n; i++) {
    pa_ghead *out = m->buf[(ci + 1 + (int)(i & 1)) % 3]; /* the two buffers cur is not */
    pa_gout o = {out, 0, false};
    if (!pa_gm_advance(m, in, n_in, b[i], false, &o)) {
      m->dead = true; /* the state is past recovery: the error says why */
      return false;
    }
    if (!o.n && !(o.end && i == n - 1)) return false;
    in = out;
    n_in = o.n;
    end = o.end;
  }
  m->cur = (pa_ghead *)in;
  m->n_cur = n_in;
  m->end = end;
  return true;
}

int pa_gmatcher_accept(pa_gmatcher *m, int32_t token) {
  const pa_gvocab *v = m->g->vocab;
  if (m->dead) return pa_error(PASADA_ERR_ARG, "%s", m->err[0] ? m->err : "grammar: dead");
  if (token < 0 || token >= v->n_vocab) {
    snprintf(m->err, sizeof m->err, "grammar: token %d is outside the vocabulary", token);
    m->dead = true;
    return pa_error(PASADA_ERR_ARG, "%s", m->err);
  }
  int32_t r = v->rank[token];
  bool eog = pa_gvocab_is_eog(v, token); /* ends the grammar, or matches a reference to it */
  if (eog && m->end) {
    m->finished = true;
    m->n_cur = 0;
    return PASADA_OK;
  }
  /* negated references the token satisfies, read before its bytes move the heads */
  m->n_neg_acc = 0;
  m->neg_end = false;
  m->steps = 0;
  if (m->has_neg && !m->finished && !pa_gm_neg_accept(m, token)) {
    m->dead = true;
    return pa_error(PASADA_ERR_ARG, "%s", m->err);
  }
  const bool neg = m->n_neg_acc || m->neg_end;
  if (r >= 0 && !m->finished &&
      pa_gmatcher_accept_bytes(m, v->bytes + v->off[r], v->off[r + 1] - v->off[r])) {
    for (uint32_t i = 0; i < m->n_neg_acc; i++) { /* both ways: the union */
      bool dup = false;
      for (uint32_t k = 0; k < m->n_cur && !dup; k++)
        dup = m->cur[k].node == m->neg_acc[i].node && m->cur[k].parent == m->neg_acc[i].parent;
      if (dup) continue;
      if (m->n_cur == PA_G_MAX_HEADS) {
        pa_gm_fail(m, "the grammar is too ambiguous (too many parses at once)");
        m->dead = true;
        return pa_error(PASADA_ERR_ARG, "%s", m->err);
      }
      m->cur[m->n_cur++] = m->neg_acc[i];
    }
    m->end |= m->neg_end;
    return PASADA_OK;
  }
  if (m->dead) return pa_error(PASADA_ERR_ARG, "%s", m->err);
  if (neg) {
    memcpy(m->cur, m->neg_acc, m->n_neg_acc * sizeof *m->cur);
    m->n_cur = m->n_neg_acc;
    m->end = m->neg_end;
    return PASADA_OK;
  }
  if (!m->err[0])
    snprintf(m->err, sizeof m->err, "grammar: token %d is not allowed here%s", token,
             eog           ? " (the grammar cannot end yet)"
             : m->finished ? " (the grammar has ended)"
                           : "");
  m->dead = true;
  return pa_error(PASADA_ERR_ARG, "%s", m->err);
}

bool pa_gmatcher_can_end(const pa_gmatcher *m) {
  return !m->dead && m->end;
}
bool pa_gmatcher_must_end(const pa_gmatcher *m) {
  return !m->dead && m->end && m->n_cur == 0;
}
bool pa_gmatcher_dead(const pa_gmatcher *m) {
  return m->dead;
}
const char *pa_gmatcher_error(const pa_gmatcher *m) {
  return m->err;
}
