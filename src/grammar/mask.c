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

/* Whether transition x stays inside the rule: to a state that calls
 * nothing (it may end the rule: a path through it goes on inside). */
static inline bool inside(const pa_grammar *g, uint32_t x) {
  return x != PA_G_NONE && (!(x & PA_G_SLOW) || !(g->flags[x & ~PA_G_SLOW] & PA_GS_CALLS));
}

/* A small set of states (plain ids), for the chains below. */
enum { SET_CAP = 64 };
typedef struct {
  uint32_t n, v[SET_CAP];
} state_set;

/* Adds state x; false when the set is full. */
static bool set_add(state_set *s, uint32_t x) {
  for (uint32_t i = 0; i < s->n; i++)
    if (s->v[i] == x) return true;
  if (s->n == SET_CAP) return false;
  s->v[s->n++] = x;
  return true;
}

static bool set_same(const state_set *a, const state_set *b) {
  if (a->n != b->n) return false;
  for (uint32_t i = 0; i < a->n; i++) {
    uint32_t k = 0;
    while (k < b->n && b->v[k] != a->v[i]) k++;
    if (k == b->n) return false;
  }
  return true;
}

/* Adds to *out where the bytes lo..hi take the states of *in, and their
 * flags to *flags: false when one leaves the rule (or the set fills). Runs
 * of bytes of one class are read once. */
static bool move_add(const pa_grammar *g, const state_set *in, unsigned lo, unsigned hi,
                     state_set *out, uint8_t *flags) {
  for (uint32_t i = 0; i < in->n; i++)
    for (unsigned b = lo; b <= hi; b++) {
      if (b > lo && g->cls[b] == g->cls[b - 1]) continue;
      const uint32_t x = g->trans[(size_t)in->v[i] * g->n_cls + g->cls[b]];
      if (!inside(g, x) || !set_add(out, x & ~PA_G_SLOW)) return false;
      *flags |= g->flags[x & ~PA_G_SLOW];
    }
  return true;
}

/* The same for the plain ASCII characters: printable, not " or \. */
static bool move_ascii(const pa_grammar *g, const state_set *in, state_set *out, uint8_t *flags) {
  return move_add(g, in, 0x20, 0x21, out, flags) && move_add(g, in, 0x23, 0x5B, out, flags) &&
         move_add(g, in, 0x5D, 0x7E, out, flags);
}

/* The same for every well-formed multi-byte UTF-8 character, a byte at a
 * time. */
static bool move_utf8(const pa_grammar *g, const state_set *in, state_set *out, uint8_t *flags) {
  /* lead bytes, the second byte's range, and the bytes after it */
  static const struct {
    uint8_t lead_lo, lead_hi, lo, hi, more;
  } forms[] = {{0xC2, 0xDF, 0x80, 0xBF, 0}, {0xE0, 0xE0, 0xA0, 0xBF, 1},
               {0xE1, 0xEC, 0x80, 0xBF, 1}, {0xED, 0xED, 0x80, 0x9F, 1},
               {0xEE, 0xEF, 0x80, 0xBF, 1}, {0xF0, 0xF0, 0x90, 0xBF, 2},
               {0xF1, 0xF3, 0x80, 0xBF, 2}, {0xF4, 0xF4, 0x80, 0x8F, 2}};
  for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++) {
    state_set a = {0}, b = {0};
    if (!move_add(g, in, forms[f].lead_lo, forms[f].lead_hi, &a, flags) ||
        !move_add(g, &a, forms[f].lo, forms[f].hi, &b, flags))
      return false;
    for (uint32_t k = 0; k < forms[f].more; k++) {
      a = b;
      b.n = 0;
      if (!move_add(g, &a, 0x80, 0xBF, &b, flags)) return false;
    }
    for (uint32_t i = 0; i < b.n; i++)
      if (!set_add(out, b.v[i])) return false;
  }
  return true;
}

/* Whether no plain character (ASCII; with utf8 the multi-byte ones too)
 * moves any state of *s. */
static bool none_moves(const pa_grammar *g, const state_set *s, bool utf8) {
  for (uint32_t i = 0; i < s->n; i++)
    for (unsigned b = 0x20; b < (utf8 ? 0xF5u : 0x7Fu); b++) {
      if (b == '"' || b == '\\' || (b >= 0x7F && b < 0xC2)) continue;
      if (g->trans[(size_t)s->v[i] * g->n_cls + g->cls[b]] != PA_G_NONE) return false;
    }
  return true;
}

/* What a token of plain characters (vocab->plain_chars: whole characters,
 * the ASCII ones printable and not " or \) does from a state, whatever the
 * characters are: with at most `ascii` of them (ASCII only) or `any`
 * (multi-byte ones too) it stays inside the rule, accepted; with more than
 * `dead_ascii` or `dead_any` it dies inside the rule, its paths never
 * passing a state that calls or may end the rule, rejected. A string's
 * characters, counted up to a bound or not, and the names an object's keys
 * start with are such chains. */
typedef struct {
  uint32_t ascii, any, dead_ascii, dead_any;
} plain_limits;

static plain_limits plain_chains(const pa_grammar *g, uint32_t node, uint32_t max_len) {
  enum { EXIT = PA_GS_CALLS | PA_GS_FINAL };
  plain_limits lim = {0, 0, UINT32_MAX, UINT32_MAX};
  state_set sa = {1, {node}}, s8 = sa, na, n8;
  uint8_t fa = g->flags[node], f8 = fa; /* the flags of every state the chains reach */
  uint32_t k = 0, k8 = 0;
  bool utf8 = true;
  for (; k < max_len; k++) {
    uint8_t f = 0;
    na.n = 0;
    if (!move_ascii(g, &sa, &na, &f)) {
      if (!(fa & EXIT) && none_moves(g, &sa, false)) lim.dead_ascii = k;
      if (utf8 && !(f8 & EXIT) && none_moves(g, &s8, true)) lim.dead_any = k;
      break;
    }
    fa |= f;
    if (utf8) {
      f = 0;
      n8.n = 0;
      utf8 = move_ascii(g, &s8, &n8, &f) && move_utf8(g, &s8, &n8, &f);
      f8 |= f;
      k8 += utf8;
    }
    const bool fixed = set_same(&sa, &na) && (!utf8 || set_same(&s8, &n8));
    sa = na;
    s8 = n8;
    if (fixed) { /* the same states from here on: every length */
      k = max_len;
      if (utf8) k8 = max_len;
      break;
    }
  }
  lim.ascii = k;
  lim.any = k8;
  return lim;
}

/* Walks the whole vocabulary from the single head (node over an unknown
 * stack, the bottom standing for it) and sorts every token. */
static bool sort_vocab(pa_gmatcher *m, uint32_t node, sort_out *o) {
  const pa_gvocab *v = m->g->vocab;
  const pa_grammar *g = m->g;
  const uint32_t n_sorted = (uint32_t)v->n_sorted;
  const pa_ghead h = {node, PA_G_NONE};
  level0(m, &h, 1);
  /* the bytes that keep a state that calls nothing in itself (a string's
   * characters): a token of those only is accepted without a walk */
  uint64_t loop[4] = {0};
  if (!(g->flags[node] & PA_GS_CALLS))
    for (int b = 0; b < 256; b++)
      if ((g->trans[(size_t)node * g->n_cls + g->cls[b]] & ~PA_G_SLOW) == node)
        loop[b >> 6] |= 1ull << (b & 63);
  const bool loops = loop[0] | loop[1] | loop[2] | loop[3];
  const plain_limits lim = plain_chains(g, node, v->max_len);
  /* the verdict on a token of plain characters by vocab->plain_chars (bit
   * 7: multi-byte ones among them; the rest: how many): 1 accepted, 2
   * rejected, 0 to be walked */
  uint8_t verdict[256] = {0};
  for (uint32_t c = 1; c < 128; c++) {
    verdict[c] = c <= lim.ascii ? 1 : c > lim.dead_ascii ? 2 : 0;
    verdict[c | 128] = c <= lim.any ? 1 : c > lim.dead_any ? 2 : 0;
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
    if (verdict[v->plain_chars[r]]) {
      /* a run of tokens judged by their characters alone, without a walk:
       * the levels past `valid` stay unknown */
      uint32_t q = r;
      uint8_t vd;
      while (q < n_sorted && (vd = verdict[v->plain_chars[q]])) {
        if (valid > v->lcp[q]) valid = v->lcp[q];
        if (vd == 1) o->acc[o->n_acc++] = v->sorted_id[q];
        q++;
      }
      r = q;
      continue;
    }
    bool in = false;
    if (loops) {
      const uint64_t *bs = v->byteset[r];
      in = !((bs[0] & ~loop[0]) | (bs[1] & ~loop[1]) | (bs[2] & ~loop[2]) | (bs[3] & ~loop[3]));
    }
    if (in) {
      classify(o, r, id, true, false); /* levels past `valid` stay unknown */
      r++;
      continue;
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
