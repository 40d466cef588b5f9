/* mask.c: the set of tokens a parse state allows. The state's heads are
 * grouped by DFA state; for each, a cache built on first use splits the
 * vocabulary, as seen from that state over an unknown stack, into tokens
 * accepted inside the rule (whatever the stack), rejected inside it, and
 * uncertain: those some path reads past the rule's end. A mask is then the
 * union of the accepted sets, plus the uncertain tokens walked with the real
 * stack, plus end of generation where the root can end. Walks go through
 * the vocabulary in byte order, one level of heads per prefix byte, so a
 * shared prefix is read once and a rejected prefix skips every token below
 * it. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "grammar/matcher.h"

struct pa_gcache {
  uint32_t n_acc, n_unc;
  bool dense; /* accepted tokens as bits (n_vocab), else as ids */
  uint64_t *acc_bits;
  int32_t *acc_ids;
  /* uncertain tokens: rank ranges in byte order, and the bytes each
   * range's first shares with the last of the range before */
  uint32_t *unc_start, *unc_end;
  uint8_t *unc_lcp;
};

static inline void set_bit(uint64_t *bits, int32_t id) {
  bits[id >> 6] |= 1ull << (id & 63);
}
static inline bool has_bit(const uint64_t *bits, int32_t id) {
  return bits[id >> 6] >> (id & 63) & 1;
}

/* Computes level d + 1 from level d by `byte`. */
static bool step_any(pa_gmatcher *m, uint32_t d, uint8_t byte) {
  uint32_t at = m->lvl[d].off + m->lvl[d].n;
  if (at + PA_G_MAX_HEADS > m->lv_cap) {
    uint32_t cap = m->lv_cap * 2;
    while (at + PA_G_MAX_HEADS > cap) cap *= 2;
    pa_ghead *lv = realloc(m->lv, (size_t)cap * sizeof *lv);
    if (!lv) return pa_gm_fail(m, "out of memory for a mask");
    m->lv = lv;
    m->lv_cap = cap;
  }
  pa_gout o = {m->lv + at, 0, false};
  if (!pa_gm_advance(m, m->lv + m->lvl[d].off, m->lvl[d].n, byte, true, &o)) return false;
  m->lvl[d + 1].off = at;
  m->lvl[d + 1].n = o.n;
  m->lvl[d + 1].end = o.end;
  m->lvl[d + 1].unc = m->lvl[d].unc || m->lvl[d].end;
  return true;
}

/* step_any, with the common case inline: one head moving inside its rule. */
static inline __attribute__((always_inline)) bool step(pa_gmatcher *m, uint32_t d, uint8_t byte) {
  pa_glevel *lv = m->lvl + d;
  const uint32_t at = lv->off + 1;
  if (lv->n == 1 && at < m->lv_cap) {
    const pa_grammar *g = m->g;
    const pa_ghead h = m->lv[lv->off];
    const uint32_t t = g->trans[(size_t)h.node * g->n_cls + g->cls[byte]];
    if (t == PA_G_NONE || !(t & PA_G_SLOW)) {
      m->lv[at] = (pa_ghead){t, h.parent};
      lv[1] = (pa_glevel){at, t != PA_G_NONE, 0, (uint8_t)(lv->unc | lv->end)};
      m->steps++;
      return true;
    }
  }
  return step_any(m, d, byte);
}

/* Level 0: heads in[0..n), no end. */
static void level0(pa_gmatcher *m, const pa_ghead *in, uint32_t n) {
  memcpy(m->lv, in, (size_t)n * sizeof *in);
  m->lvl[0].off = 0;
  m->lvl[0].n = n;
  m->lvl[0].end = 0;
  m->lvl[0].unc = 0;
}

/* Walks the tokens of the rank ranges [start[k], end[k]) (lcp[k]: bytes
 * the first shares with the last of the range before; within a range the
 * vocabulary's lcp and skip) from level 0 and sets the bits of those it
 * accepts (skipping those set). */
static bool walk_ranges(pa_gmatcher *m, const uint32_t *start, const uint32_t *end,
                        const uint8_t *lcp, uint32_t n_ranges, uint64_t *bits) {
  const pa_gvocab *v = m->g->vocab;
  uint32_t valid = 0, dead_at = UINT32_MAX;
  bool dead_end = false;
  for (uint32_t k = 0; k < n_ranges; k++) {
    for (uint32_t r = start[k]; r < end[k]; r++) {
      const uint32_t l = r == start[k] ? lcp[k] : v->lcp[r], len = v->off[r + 1] - v->off[r];
      const int32_t id = v->sorted_id[r];
      if (l >= dead_at) { /* below a prefix no head survives */
        /* tokens spelling just the prefix come first (byte order), then
         * the longer ones, all rejected: jump past them (the vocabulary's
         * lcp is at least l here, so its skips hold) */
        if (len == dead_at) {
          if (dead_end) set_bit(bits, id);
        } else {
          r = pa_gskip_hop(v->lcp, v->skip, r, end[k], dead_at) - 1;
        }
        continue;
      }
      dead_at = UINT32_MAX;
      if (valid > l) valid = l;
      if (has_bit(bits, id)) continue;
      const uint8_t *b = v->bytes + v->off[r];
      uint32_t d = valid;
      for (; d < len; d++) {
        if (!step(m, d, b[d])) return false;
        if (!m->lvl[d + 1].n) break;
      }
      if (d < len) { /* level d + 1 has no heads */
        dead_at = d + 1;
        dead_end = m->lvl[d + 1].end;
        valid = d + 1;
        if (d + 1 == len && dead_end) set_bit(bits, id);
        continue;
      }
      valid = len;
      if (m->lvl[len].n || m->lvl[len].end) set_bit(bits, id);
    }
  }
  return true;
}

/* ---- the per-state cache ---- */

typedef struct {
  int32_t *acc;
  uint32_t n_acc;
  uint32_t *unc_start, *unc_end; /* rank ranges, ascending, merged when adjacent */
  uint32_t n_unc, cap_unc;
  bool oom;
} sort_out;

static void add_unc(sort_out *o, uint32_t a, uint32_t z) {
  if (o->n_unc && o->unc_end[o->n_unc - 1] == a) {
    o->unc_end[o->n_unc - 1] = z;
    return;
  }
  if (o->n_unc == o->cap_unc) {
    uint32_t cap = o->cap_unc ? o->cap_unc * 2 : 256;
    uint32_t *s = realloc(o->unc_start, (size_t)cap * sizeof *s);
    if (s) o->unc_start = s;
    uint32_t *e = realloc(o->unc_end, (size_t)cap * sizeof *e);
    if (e) o->unc_end = e;
    if (!s || !e) {
      o->oom = true;
      return;
    }
    o->cap_unc = cap;
  }
  o->unc_start[o->n_unc] = a;
  o->unc_end[o->n_unc++] = z;
}

static void classify(sort_out *o, uint32_t r, int32_t id, bool accepted, bool uncertain) {
  if (accepted)
    o->acc[o->n_acc++] = id;
  else if (uncertain)
    add_unc(o, r, r + 1);
}

/* Walks the whole vocabulary from the single head (node over an unknown
 * stack, the bottom standing for it) and sorts every token. */
static bool sort_vocab(pa_gmatcher *m, uint32_t node, sort_out *o) {
  const pa_gvocab *v = m->g->vocab;
  const pa_grammar *g = m->g;
  const uint32_t n_sorted = (uint32_t)v->n_sorted;
  const pa_ghead h = {node, PA_G_NONE};
  level0(m, &h, 1);
  /* the bytes that keep a plain state in itself (a string's characters):
   * a token of those only is accepted without a walk */
  uint64_t loop[4] = {0};
  if (g->flags[node] == PA_GS_BYTES)
    for (int b = 0; b < 256; b++)
      if (g->trans[(size_t)node * g->n_cls + g->cls[b]] == node) /* a plain state: no PA_G_SLOW */
        loop[b >> 6] |= 1ull << (b & 63);
  const bool loops = loop[0] | loop[1] | loop[2] | loop[3];
  /* a chain of plain states that every printable ASCII byte but " and \
   * moves along alike (a string's characters counted up to a bound): a
   * token of those bytes no longer than the chain is accepted without a
   * walk */
  static const uint64_t plain[4] = {0xFFFFFFFB00000000ull, 0x7FFFFFFFEFFFFFFFull, 0, 0};
  uint32_t chain = 0;
  for (uint32_t q = node; chain < v->max_len; chain++) {
    uint32_t t = PA_G_NONE;
    bool same = true;
    for (int b = 0x20; b < 0x7F && same; b++) {
      if (!(plain[b >> 6] >> (b & 63) & 1)) continue;
      const uint32_t x = g->trans[(size_t)q * g->n_cls + g->cls[b]];
      same = x != PA_G_NONE && !(x & PA_G_SLOW) && (t == PA_G_NONE || x == t);
      t = x;
    }
    if (!same) break;
    q = t;
  }
  uint32_t valid = 0, dead_at = UINT32_MAX;
  bool dead_end = false, dead_unc_eq = false, dead_unc_deeper = false;
  for (uint32_t r = 0; r < n_sorted;) {
    const uint32_t l = v->lcp[r], len = v->off[r + 1] - v->off[r];
    const int32_t id = v->sorted_id[r];
    if (l >= dead_at) {
      /* tokens spelling just the prefix come first, then the longer ones,
       * all rejected or all uncertain: jump past them */
      if (len == dead_at) {
        classify(o, r, id, dead_end, dead_unc_eq);
        r++;
      } else {
        uint32_t next = pa_gskip_hop(v->lcp, v->skip, r, n_sorted, dead_at);
        if (dead_unc_deeper) add_unc(o, r, next);
        r = next;
      }
      continue;
    }
    dead_at = UINT32_MAX;
    if (valid > l) valid = l;
    if (loops || chain) {
      const uint64_t *bs = v->byteset[r];
      if ((loops &&
           !((bs[0] & ~loop[0]) | (bs[1] & ~loop[1]) | (bs[2] & ~loop[2]) | (bs[3] & ~loop[3]))) ||
          (len <= chain && !((bs[0] & ~plain[0]) | (bs[1] & ~plain[1]) | bs[2] | bs[3]))) {
        classify(o, r, id, true, false); /* levels past `valid` stay unknown */
        r++;
        continue;
      }
    }
    const uint8_t *b = v->bytes + v->off[r];
    uint32_t d = valid;
    for (; d < len; d++) {
      if (!step(m, d, b[d])) return false;
      if (!m->lvl[d + 1].n) break;
    }
    if (d < len) {
      const uint32_t D = d + 1;
      dead_at = D;
      valid = D;
      dead_end = m->lvl[D].end;
      dead_unc_eq = m->lvl[D].unc;                      /* a token ending at D */
      dead_unc_deeper = m->lvl[D].unc || m->lvl[D].end; /* one going past it */
      if (D == len)
        classify(o, r, id, dead_end, dead_unc_eq);
      else
        classify(o, r, id, false, dead_unc_deeper);
      r++;
      continue;
    }
    valid = len;
    classify(o, r, id, m->lvl[len].n || m->lvl[len].end, m->lvl[len].unc);
    r++;
  }
  return !o->oom || pa_gm_fail(m, "out of memory for a token cache");
}

/* Builds the cache of `node` (NULL with the error set on failure). */
static pa_gcache *build_cache(pa_gmatcher *m, uint32_t node) {
  const pa_gvocab *v = m->g->vocab;
  const int32_t nv = v->n_vocab;
  sort_out o = {.acc = malloc(((size_t)v->n_sorted + 1) * sizeof *o.acc)};
  pa_gcache *c = NULL;
  if (!o.acc) {
    pa_gm_fail(m, "out of memory for a token cache");
    goto out;
  }
  bool ok = sort_vocab(m, node, &o);
  pa_gm_drop_scratch(m);
  if (!ok) goto out;
  const size_t words = ((size_t)nv + 63) / 64;
  const bool dense = (size_t)o.n_acc * 32 > (size_t)nv;
  size_t bytes = sizeof *c + (dense ? words * 8 : (size_t)o.n_acc * 4) + (size_t)o.n_unc * 9 + 16;
  c = calloc(1, bytes);
  if (!c) {
    pa_gm_fail(m, "out of memory for a token cache");
    goto out;
  }
  uint8_t *p = (uint8_t *)(c + 1);
  c->n_acc = o.n_acc;
  c->n_unc = o.n_unc;
  c->dense = dense;
  if (dense) {
    c->acc_bits = (uint64_t *)p;
    for (uint32_t i = 0; i < o.n_acc; i++) set_bit(c->acc_bits, o.acc[i]);
    p += words * 8;
  } else {
    c->acc_ids = (int32_t *)p;
    if (o.n_acc) memcpy(c->acc_ids, o.acc, (size_t)o.n_acc * 4);
    p += (size_t)o.n_acc * 4;
  }
  c->unc_start = (uint32_t *)p;
  p += (size_t)o.n_unc * 4;
  c->unc_end = (uint32_t *)p;
  p += (size_t)o.n_unc * 4;
  c->unc_lcp = p;
  for (uint32_t i = 0; i < o.n_unc; i++) {
    c->unc_start[i] = o.unc_start[i];
    c->unc_end[i] = o.unc_end[i];
    uint32_t l = 0;
    if (i > 0) { /* the first of this range against the last of the one before */
      const uint32_t a = o.unc_end[i - 1] - 1, b = o.unc_start[i];
      const uint32_t na = v->off[a + 1] - v->off[a], nb = v->off[b + 1] - v->off[b];
      const uint8_t *pa = v->bytes + v->off[a], *pb = v->bytes + v->off[b];
      while (l < na && l < nb && l < 255 && pa[l] == pb[l]) l++;
    }
    c->unc_lcp[i] = (uint8_t)l;
  }
out:
  free(o.acc);
  free(o.unc_start);
  free(o.unc_end);
  return c;
}

static const pa_gcache *get_cache(pa_gmatcher *m, uint32_t node) {
  _Atomic(pa_gcache *) *slot = &((pa_grammar *)m->g)->cache[node];
  pa_gcache *c = atomic_load_explicit(slot, memory_order_acquire);
  if (c) return c;
  pa_gcache *made = build_cache(m, node);
  if (!made) return NULL;
  pa_gcache *expected = NULL;
  if (atomic_compare_exchange_strong_explicit(slot, &expected, made, memory_order_acq_rel,
                                              memory_order_acquire))
    return made;
  free(made); /* another thread's is the same */
  return expected;
}

void pa_gcache_free(pa_gcache *c) {
  free(c);
}

/* ---- the mask ---- */

int64_t pa_gmatcher_mask(pa_gmatcher *m, uint64_t *bits) {
  const pa_gvocab *v = m->g->vocab;
  const size_t words = ((size_t)v->n_vocab + 63) / 64;
  memset(bits, 0, words * 8);
  if (m->dead) return pa_error(PASADA_ERR_ARG, "%s", m->err), -1;
  if (m->end)
    for (int32_t i = 0; i < v->n_eog; i++) set_bit(bits, v->eog[i]);
  if (!m->finished) {
    m->steps = 0;
    pa_gm_drop_scratch(m);
    /* heads grouped by DFA state: a group shares its cache and its walk */
    pa_ghead *group = m->buf[0] == m->cur ? m->buf[1] : m->buf[0];
    for (uint32_t i = 0; i < m->n_cur; i++) {
      const uint32_t node = m->cur[i].node;
      bool done = false;
      for (uint32_t j = 0; j < i && !done; j++) done = m->cur[j].node == node;
      if (done) continue;
      uint32_t n = 0;
      for (uint32_t j = i; j < m->n_cur; j++)
        if (m->cur[j].node == node) group[n++] = m->cur[j];
      const pa_gcache *c = get_cache(m, node);
      if (!c) goto fail;
      if (c->dense) {
        for (size_t w = 0; w < words; w++) bits[w] |= c->acc_bits[w];
      } else {
        for (uint32_t k = 0; k < c->n_acc; k++) set_bit(bits, c->acc_ids[k]);
      }
      if (c->n_unc) {
        level0(m, group, n);
        bool ok = walk_ranges(m, c->unc_start, c->unc_end, c->unc_lcp, c->n_unc, bits);
        pa_gm_drop_scratch(m);
        if (!ok) goto fail;
      }
    }
  }
  if (m->has_neg && !m->finished) { /* negated token references: any token but one */
    bool all;
    int32_t but;
    if (!pa_gm_neg_allowed(m, &all, &but)) goto fail;
    if (all || but >= 0) {
      /* end-of-generation tokens keep their own verdict: they are no
       * negation's match (they end the grammar, where it may end) */
      bool eog_bit[64];
      const int32_t ne = v->n_eog < 64 ? v->n_eog : 64;
      for (int32_t i = 0; i < ne; i++) eog_bit[i] = has_bit(bits, v->eog[i]);
      for (int32_t id = 0; id < v->n_vocab; id++)
        if (id != but || all) set_bit(bits, id);
      for (int32_t i = 0; i < ne; i++)
        if (!eog_bit[i]) bits[v->eog[i] / 64] &= ~(1ull << (v->eog[i] % 64));
    }
  }
  int64_t count = 0;
  for (size_t w = 0; w < words; w++) count += __builtin_popcountll(bits[w]);
  return count;
fail:
  m->dead = true;
  pa_error(PASADA_ERR_ARG, "%s", m->err);
  return -1;
}

bool pa_gmatcher_allows(pa_gmatcher *m, int32_t token) {
  const pa_gvocab *v = m->g->vocab;
  if (m->dead || token < 0 || token >= v->n_vocab) return false;
  if (m->end && pa_gvocab_is_eog(v, token)) return true;
  const int32_t r = v->rank[token];
  if (m->finished) return false;
  m->steps = 0;
  if (m->has_neg && !pa_gvocab_is_eog(v, token)) {
    bool all;
    int32_t but;
    if (pa_gm_neg_allowed(m, &all, &but) && (all || (but >= 0 && but != token))) return true;
  }
  if (r < 0) return false;
  pa_gm_drop_scratch(m);
  level0(m, m->cur, m->n_cur);
  const uint32_t len = v->off[r + 1] - v->off[r];
  const uint8_t *b = v->bytes + v->off[r];
  bool ok = true;
  uint32_t d = 0;
  for (; d < len && ok; d++) {
    ok = step(m, d, b[d]);
    if (ok && !m->lvl[d + 1].n) break;
  }
  bool alive =
      ok && (d == len ? m->lvl[len].n > 0 || m->lvl[len].end : d + 1 == len && m->lvl[len].end);
  pa_gm_drop_scratch(m);
  return alive;
}
