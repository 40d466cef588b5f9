/* compile.c: a GBNF syntax tree -> one byte-level automaton with rule calls
 * (nfa.h). The analyses first: which rules match the empty text, which can
 * complete at all, left recursion (refused: a rule reaching itself before
 * any character), and which rules are recursive. Non-recursive rules up to
 * PA_G_INLINE_MAX states are inlined into their callers, so the automaton of
 * a caller knows what follows them. Code-point classes become the UTF-8
 * byte sequences of their ranges. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "grammar/nfa.h"

typedef struct {
  const pa_gast *ast;
  pa_nfa *nfa;
  bool *nullable, *productive, *recursive, *reachable, *inlined;
  uint32_t *size;   /* automaton states of a rule's body, inlined rules included */
  uint8_t *level;   /* depth of inlining inside a rule's body */
  uint64_t visits;  /* analysis budget */
  uint32_t counted; /* states utf8_range counts when asked to count */
  int err;
} builder;

static uint32_t class_size(builder *b, const pa_gx *e);

static int oom(builder *b) {
  if (!b->err) b->err = pa_error(PASADA_ERR_NOMEM, "grammar: out of memory");
  return b->err;
}

static const pa_gx *X(const builder *b, int32_t x) {
  return &b->ast->x[x];
}

/* ---- analyses over the tree ---- */

static bool budget(builder *b) {
  if (++b->visits > PA_G_MAX_ANALYSIS) {
    if (!b->err) b->err = pa_error(PASADA_ERR_ARG, "grammar: too large to analyse");
    return false;
  }
  return true;
}

/* Whether x matches the empty text (flag: nullable) or some finite text
 * (productive), given the rules' current values. */
static bool expr_prop(builder *b, int32_t x, const bool *rule_val, bool productive) {
  if (!budget(b)) return false;
  const pa_gx *e = X(b, x);
  switch (e->kind) {
    case PA_GX_SEQ:
      for (int32_t i = 0; i < e->count; i++)
        if (!expr_prop(b, b->ast->kids[e->first + i], rule_val, productive)) return false;
      return true;
    case PA_GX_ALT:
      for (int32_t i = 0; i < e->count; i++)
        if (expr_prop(b, b->ast->kids[e->first + i], rule_val, productive)) return true;
      return false;
    case PA_GX_REPEAT:
      return e->min == 0 || e->max == 0 || expr_prop(b, e->child, rule_val, productive);
    case PA_GX_CHARS:
      return productive;
    case PA_GX_LITERAL:
      return productive || e->count == 0;
    case PA_GX_REF:
      return rule_val[e->rule];
  }
  return false;
}

/* Least fixpoint of expr_prop over the rules. */
static int rule_props(builder *b, bool *val, bool productive) {
  const pa_gast *a = b->ast;
  for (bool changed = true; changed && !b->err;) {
    changed = false;
    for (int32_t r = 0; r < a->n_rules && !b->err; r++) {
      if (val[r]) continue;
      if (expr_prop(b, a->rules[r].expr, val, productive)) val[r] = changed = true;
    }
  }
  return b->err;
}

/* Calls f(b, rule, ctx) for every rule x references (left_only: those it
 * can reach before matching any character). */
typedef void (*ref_fn)(builder *b, int32_t rule, void *ctx);
static void each_ref(builder *b, int32_t x, bool left_only, ref_fn f, void *ctx) {
  if (!budget(b)) return;
  const pa_gx *e = X(b, x);
  switch (e->kind) {
    case PA_GX_SEQ:
      for (int32_t i = 0; i < e->count; i++) {
        int32_t k = b->ast->kids[e->first + i];
        each_ref(b, k, left_only, f, ctx);
        if (left_only && !expr_prop(b, k, b->nullable, false)) return;
      }
      return;
    case PA_GX_ALT:
      for (int32_t i = 0; i < e->count; i++)
        each_ref(b, b->ast->kids[e->first + i], left_only, f, ctx);
      return;
    case PA_GX_REPEAT:
      if (e->max != 0) each_ref(b, e->child, left_only, f, ctx);
      return;
    case PA_GX_REF:
      f(b, e->rule, ctx);
      return;
    default:
      return;
  }
}

/* Adjacency lists of the reference graph (left_only: the left-call one). */
typedef struct {
  int32_t *off, *to;
  int32_t n, cap;
} graph;

static void add_edge(builder *b, int32_t rule, void *ctx) {
  graph *gr = ctx;
  if (gr->n == gr->cap) {
    int32_t c = gr->cap ? gr->cap * 2 : 64;
    int32_t *t = realloc(gr->to, (size_t)c * sizeof *t);
    if (!t) {
      oom(b);
      return;
    }
    gr->to = t;
    gr->cap = c;
  }
  gr->to[gr->n++] = rule;
}

static int build_graph(builder *b, bool left_only, graph *gr) {
  const pa_gast *a = b->ast;
  *gr = (graph){0};
  gr->off = malloc(((size_t)a->n_rules + 1) * sizeof *gr->off);
  if (!gr->off) return oom(b);
  for (int32_t r = 0; r < a->n_rules && !b->err; r++) {
    gr->off[r] = gr->n;
    each_ref(b, a->rules[r].expr, left_only, add_edge, gr);
  }
  gr->off[a->n_rules] = gr->n;
  return b->err;
}

static void free_graph(graph *gr) {
  free(gr->off);
  free(gr->to);
}

/* Tarjan's strongly connected components, iteratively: marks recursive
 * rules (in a cycle) and calls visit(b, rule) for every rule, callees
 * before callers (reverse topological order of the components). With
 * report_cycle, the first cycle found is an error naming its rules. */
static int scc(builder *b, const graph *gr, bool report_cycle, void (*visit)(builder *, int32_t)) {
  const int32_t n = b->ast->n_rules;
  int32_t *index = malloc((size_t)n * sizeof *index), *low = malloc((size_t)n * sizeof *low);
  int32_t *stack = malloc((size_t)n * sizeof *stack), *call = malloc((size_t)n * sizeof *call);
  int32_t *edge = malloc((size_t)n * sizeof *edge);
  bool *on = calloc((size_t)n, 1);
  if (!index || !low || !stack || !call || !edge || !on) {
    oom(b);
    goto out;
  }
  for (int32_t i = 0; i < n; i++) index[i] = -1;
  int32_t next = 0, sp = 0;
  for (int32_t root = 0; root < n && !b->err; root++) {
    if (index[root] >= 0) continue;
    int32_t cp = 0;
    call[cp++] = root;
    index[root] = low[root] = next++;
    edge[root] = gr->off[root];
    stack[sp++] = root;
    on[root] = true;
    while (cp > 0 && !b->err) {
      int32_t v = call[cp - 1];
      if (edge[v] < gr->off[v + 1]) {
        int32_t w = gr->to[edge[v]++];
        if (index[w] < 0) {
          index[w] = low[w] = next++;
          edge[w] = gr->off[w];
          stack[sp++] = w;
          on[w] = true;
          call[cp++] = w;
        } else if (on[w] && index[w] < low[v]) {
          low[v] = index[w];
        }
        continue;
      }
      cp--;
      if (cp > 0 && low[v] < low[call[cp - 1]]) low[call[cp - 1]] = low[v];
      if (low[v] != index[v]) continue;
      /* v roots a component: the stack down to v */
      int32_t k = sp;
      while (stack[k - 1] != v) k--;
      k--;
      bool cyclic = sp - k > 1;
      for (int32_t e = gr->off[v]; e < gr->off[v + 1] && !cyclic; e++) cyclic = gr->to[e] == v;
      if (cyclic && report_cycle) {
        char path[512];
        size_t len = 0;
        for (int32_t i = k; i < sp && len < sizeof path - 64; i++)
          len += (size_t)snprintf(path + len, sizeof path - len, "%s'%s'", i > k ? ", " : "",
                                  b->ast->rules[stack[i]].name);
        const pa_grule *r = &b->ast->rules[v];
        int32_t line, col;
        pa_gast_where(b->ast, r->pos, &line, &col);
        b->err = pa_error(PASADA_ERR_ARG,
                          "grammar: line %d, column %d: rule '%s' is left-recursive (it can reach "
                          "itself before matching a character; rules in the cycle: %s)",
                          line, col, r->name, path);
        break;
      }
      for (int32_t i = k; i < sp; i++) {
        on[stack[i]] = false;
        if (b->recursive) b->recursive[stack[i]] = cyclic;
        if (visit) visit(b, stack[i]);
      }
      sp = k;
    }
  }
out:
  free(index);
  free(low);
  free(stack);
  free(call);
  free(edge);
  free(on);
  return b->err;
}

/* ---- sizes and the inlining decision ---- */

static uint32_t sat_add(uint32_t a, uint32_t b) {
  return a > UINT32_MAX - b ? UINT32_MAX : a + b;
}
static uint32_t sat_mul(uint32_t a, uint32_t b) {
  return b && a > UINT32_MAX / b ? UINT32_MAX : a * b;
}

/* States the automaton of x takes (an upper bound), and the deepest
 * inlining in it. */
static uint32_t expr_size(builder *b, int32_t x, uint8_t *level) {
  const pa_gx *e = X(b, x);
  uint32_t s = 0;
  switch (e->kind) {
    case PA_GX_SEQ:
    case PA_GX_ALT:
      for (int32_t i = 0; i < e->count; i++)
        s = sat_add(s, expr_size(b, b->ast->kids[e->first + i], level));
      return sat_add(s, 2);
    case PA_GX_REPEAT: {
      uint32_t copies = e->max >= 0 ? (uint32_t)e->max : (uint32_t)e->min + 1;
      return sat_add(sat_mul(sat_add(expr_size(b, e->child, level), 2), copies), 2);
    }
    case PA_GX_CHARS:
      return class_size(b, e);
    case PA_GX_LITERAL:
      return (uint32_t)e->count + 1;
    case PA_GX_REF:
      if (b->inlined[e->rule]) {
        if (b->level[e->rule] + 1 > *level) *level = (uint8_t)(b->level[e->rule] + 1);
        return b->size[e->rule];
      }
      return 2;
  }
  return 0;
}

static void decide_inline(builder *b, int32_t r) {
  uint8_t level = 0;
  b->size[r] = expr_size(b, b->ast->rules[r].expr, &level);
  b->level[r] = level;
  b->inlined[r] = !b->recursive[r] && b->size[r] <= PA_G_INLINE_MAX && level < PA_G_INLINE_LEVELS;
}

/* ---- automaton construction ---- */

static uint32_t new_state(builder *b) {
  if (b->nfa->n_states >= PA_G_MAX_NFA) {
    if (!b->err)
      b->err = pa_error(PASADA_ERR_ARG,
                        "grammar: the automaton exceeds %u states (repetitions too large?)",
                        PA_G_MAX_NFA);
    return 0;
  }
  return b->nfa->n_states++;
}

static void edge(builder *b, uint32_t from, uint32_t to, int32_t label) {
  pa_nfa *n = b->nfa;
  if (b->err) return;
  if (n->n_edges == n->cap_edges) {
    if (n->cap_edges >= 4 * PA_G_MAX_NFA) {
      b->err =
          pa_error(PASADA_ERR_ARG, "grammar: the automaton exceeds %u edges", 4 * PA_G_MAX_NFA);
      return;
    }
    uint32_t c = n->cap_edges ? n->cap_edges * 2 : 256;
    pa_nfa_edge *e = realloc(n->edges, (size_t)c * sizeof *e);
    if (!e) {
      oom(b);
      return;
    }
    n->edges = e;
    n->cap_edges = c;
  }
  n->edges[n->n_edges++] = (pa_nfa_edge){from, to, label};
}

static uint64_t set_hash(const pa_byteset *s) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 4; i++) h = (h ^ s->w[i]) * 0xff51afd7ed558ccdull;
  return h ^ (h >> 29);
}

/* The index of byte set s (added when new). */
static int32_t intern_set(builder *b, const pa_byteset *s) {
  pa_nfa *n = b->nfa;
  if ((uint32_t)n->n_sets * 2 + 2 > n->set_mask) {
    uint32_t cap = n->set_mask ? (n->set_mask + 1) * 2 : 256;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return oom(b), -1;
    for (int32_t i = 0; i < n->n_sets; i++) {
      uint32_t h = (uint32_t)set_hash(&n->sets[i]) & (cap - 1);
      while (slots[h]) h = (h + 1) & (cap - 1);
      slots[h] = (uint32_t)i + 1;
    }
    free(n->set_slots);
    n->set_slots = slots;
    n->set_mask = cap - 1;
  }
  uint32_t h = (uint32_t)set_hash(s) & n->set_mask;
  while (n->set_slots[h]) {
    int32_t i = (int32_t)n->set_slots[h] - 1;
    if (!memcmp(&n->sets[i], s, sizeof *s)) return i;
    h = (h + 1) & n->set_mask;
  }
  if (n->n_sets == n->cap_sets) {
    int32_t c = n->cap_sets ? n->cap_sets * 2 : 64;
    pa_byteset *v = realloc(n->sets, (size_t)c * sizeof *v);
    if (!v) return oom(b), -1;
    n->sets = v;
    n->cap_sets = c;
  }
  n->sets[n->n_sets] = *s;
  n->set_slots[h] = (uint32_t)n->n_sets + 1;
  return n->n_sets++;
}

static int32_t range_set(builder *b, unsigned lo, unsigned hi) {
  pa_byteset s = {{0}};
  for (unsigned c = lo; c <= hi; c++) s.w[c >> 6] |= 1ull << (c & 63);
  return intern_set(b, &s);
}

static int encode_utf8(uint32_t cp, uint8_t *o) {
  if (cp < 0x80) return o[0] = (uint8_t)cp, 1;
  if (cp < 0x800) return o[0] = (uint8_t)(0xC0 | cp >> 6), o[1] = (uint8_t)(0x80 | (cp & 0x3F)), 2;
  if (cp < 0x10000) {
    o[0] = (uint8_t)(0xE0 | cp >> 12);
    o[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    o[2] = (uint8_t)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (uint8_t)(0xF0 | cp >> 18);
  o[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
  o[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
  o[3] = (uint8_t)(0x80 | (cp & 0x3F));
  return 4;
}

/* Edges from `from` to `to` for the code points lo..hi (no surrogates): the
 * range is split until each piece is a product of byte ranges (the pieces
 * of one encoded length whose continuation bytes span whole ranges). */
static void utf8_range(builder *b, uint32_t lo, uint32_t hi, uint32_t from, uint32_t to) {
  static const uint32_t bounds[3] = {0x7F, 0x7FF, 0xFFFF};
  for (int i = 0; i < 3; i++)
    if (lo <= bounds[i] && hi > bounds[i]) {
      utf8_range(b, lo, bounds[i], from, to);
      utf8_range(b, bounds[i] + 1, hi, from, to);
      return;
    }
  uint8_t l[4], h[4];
  int n = encode_utf8(lo, l);
  if (from == PA_G_NONE) { /* counting: the states a piece adds */
    b->counted += (uint32_t)n - 1;
    return;
  }
  for (int i = 1; i < n; i++) {
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) == (hi & ~m)) continue;
    if (lo & m) {
      utf8_range(b, lo, lo | m, from, to);
      utf8_range(b, (lo | m) + 1, hi, from, to);
      return;
    }
    if ((hi & m) != m) {
      utf8_range(b, lo, (hi & ~m) - 1, from, to);
      utf8_range(b, hi & ~m, hi, from, to);
      return;
    }
  }
  encode_utf8(hi, h);
  uint32_t cur = from;
  for (int i = 0; i < n && !b->err; i++) {
    uint32_t next = i == n - 1 ? to : new_state(b);
    int32_t set = range_set(b, l[i], h[i]);
    if (set < 0) return;
    edge(b, cur, next, set);
    cur = next;
  }
}

static int cmp_range(const void *pa, const void *pb) {
  const uint32_t *a = pa, *b = pb;
  return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* A class's code points as sorted, disjoint ranges without surrogates
 * (the complement for a negated class) into out (2 x (count + 2) slots);
 * returns the number of ranges. */
static int32_t class_ranges(const builder *b, const pa_gx *e, uint32_t *out) {
  uint32_t *r = out;
  int32_t n = e->count;
  if (n) memcpy(r, b->ast->ranges + 2 * e->first, (size_t)n * 2 * sizeof *r);
  qsort(r, (size_t)n, 2 * sizeof *r, cmp_range);
  int32_t m = 0;
  for (int32_t i = 0; i < n; i++) {
    if (m && r[2 * i] <= r[2 * m - 1] + 1) {
      if (r[2 * i + 1] > r[2 * m - 1]) r[2 * m - 1] = r[2 * i + 1];
    } else {
      r[2 * m] = r[2 * i];
      r[2 * m + 1] = r[2 * i + 1];
      m++;
    }
  }
  if (e->negated) { /* complement in place, from the back */
    uint32_t tmp_lo = 0;
    int32_t k = 0;
    uint32_t *c = malloc(((size_t)m + 1) * 2 * sizeof *c);
    if (!c) return -1;
    for (int32_t i = 0; i < m; i++) {
      if (r[2 * i] > tmp_lo) c[2 * k] = tmp_lo, c[2 * k + 1] = r[2 * i] - 1, k++;
      tmp_lo = r[2 * i + 1] + 1;
    }
    if (tmp_lo <= 0x10FFFF) c[2 * k] = tmp_lo, c[2 * k + 1] = 0x10FFFF, k++;
    memcpy(r, c, (size_t)k * 2 * sizeof *c);
    free(c);
    m = k;
  }
  /* drop the surrogates D800-DFFF (no UTF-8 spells them) */
  uint32_t *t = malloc(((size_t)m + 1) * 2 * sizeof *t);
  if (!t) return -1;
  memcpy(t, r, (size_t)m * 2 * sizeof *t);
  int32_t k = 0;
  for (int32_t i = 0; i < m; i++) {
    uint32_t lo = t[2 * i], hi = t[2 * i + 1];
    if (hi < 0xD800 || lo > 0xDFFF) {
      out[2 * k] = lo, out[2 * k + 1] = hi, k++;
      continue;
    }
    if (lo < 0xD800) out[2 * k] = lo, out[2 * k + 1] = 0xD7FF, k++;
    if (hi > 0xDFFF) out[2 * k] = 0xE000, out[2 * k + 1] = hi, k++;
  }
  free(t);
  return k;
}

/* States the automaton of class e takes. */
static uint32_t class_size(builder *b, const pa_gx *e) {
  uint32_t *r = malloc(((size_t)e->count + 2) * 2 * sizeof *r);
  int32_t n = r ? class_ranges(b, e, r) : -1;
  if (n < 0) {
    free(r);
    return oom(b), 2;
  }
  b->counted = 0;
  for (int32_t i = 0; i < n; i++) utf8_range(b, r[2 * i], r[2 * i + 1], PA_G_NONE, PA_G_NONE);
  free(r);
  return sat_add(b->counted, 2);
}

typedef struct {
  uint32_t start, end;
} frag;

static frag build(builder *b, int32_t x);

static frag build_rule_body(builder *b, int32_t rule) {
  return build(b, b->ast->rules[rule].expr);
}

static frag build(builder *b, int32_t x) {
  frag f = {new_state(b), 0};
  if (b->err) return f;
  const pa_gx *e = X(b, x);
  switch (e->kind) {
    case PA_GX_SEQ: {
      uint32_t cur = f.start;
      for (int32_t i = 0; i < e->count && !b->err; i++) {
        frag k = build(b, b->ast->kids[e->first + i]);
        edge(b, cur, k.start, PA_NFA_EPS);
        cur = k.end;
      }
      f.end = cur;
      return f;
    }
    case PA_GX_ALT: {
      f.end = new_state(b);
      for (int32_t i = 0; i < e->count && !b->err; i++) {
        frag k = build(b, b->ast->kids[e->first + i]);
        edge(b, f.start, k.start, PA_NFA_EPS);
        edge(b, k.end, f.end, PA_NFA_EPS);
      }
      return f;
    }
    case PA_GX_REPEAT: {
      uint32_t cur = f.start;
      for (int32_t i = 0; i < e->min && !b->err; i++) {
        frag k = build(b, e->child);
        edge(b, cur, k.start, PA_NFA_EPS);
        cur = k.end;
      }
      f.end = new_state(b);
      edge(b, cur, f.end, PA_NFA_EPS);
      if (e->max < 0) { /* a loop back to cur */
        frag k = build(b, e->child);
        edge(b, cur, k.start, PA_NFA_EPS);
        edge(b, k.end, cur, PA_NFA_EPS);
      } else {
        for (int32_t i = e->min; i < e->max && !b->err; i++) { /* optional copies, each may stop */
          frag k = build(b, e->child);
          edge(b, cur, k.start, PA_NFA_EPS);
          edge(b, k.end, f.end, PA_NFA_EPS);
          cur = k.end;
        }
      }
      return f;
    }
    case PA_GX_LITERAL: {
      uint32_t cur = f.start;
      for (int32_t i = 0; i < e->count && !b->err; i++) {
        uint8_t c = b->ast->lit[e->first + i];
        uint32_t next = new_state(b);
        int32_t set = range_set(b, c, c);
        if (set < 0) break;
        edge(b, cur, next, set);
        cur = next;
      }
      f.end = cur;
      return f;
    }
    case PA_GX_CHARS: {
      f.end = new_state(b);
      uint32_t *r = malloc(((size_t)e->count + 2) * 2 * sizeof *r);
      int32_t n = r ? class_ranges(b, e, r) : -1;
      if (n < 0) {
        free(r);
        oom(b);
        return f;
      }
      for (int32_t i = 0; i < n && !b->err; i++)
        utf8_range(b, r[2 * i], r[2 * i + 1], f.start, f.end);
      free(r);
      return f;
    }
    case PA_GX_REF: {
      if (b->inlined[e->rule]) {
        frag k = build_rule_body(b, e->rule);
        edge(b, f.start, k.start, PA_NFA_EPS);
        f.end = k.end;
      } else {
        f.end = new_state(b);
        edge(b, f.start, f.end, PA_NFA_CALL - e->rule);
      }
      return f;
    }
  }
  return f;
}

/* Marks the rules reachable from `r` through calls of the reference graph. */
static void mark_reachable(builder *b, const graph *gr, int32_t r) {
  int32_t *todo = malloc(((size_t)b->ast->n_rules + 1) * sizeof *todo);
  if (!todo) {
    oom(b);
    return;
  }
  int32_t n = 0;
  b->reachable[r] = true;
  todo[n++] = r;
  while (n) {
    int32_t v = todo[--n];
    for (int32_t e = gr->off[v]; e < gr->off[v + 1]; e++)
      if (!b->reachable[gr->to[e]]) b->reachable[gr->to[e]] = true, todo[n++] = gr->to[e];
  }
  free(todo);
}

static int sort_edges(pa_nfa *n) {
  n->edge_off = calloc((size_t)n->n_states + 1, sizeof *n->edge_off);
  pa_nfa_edge *sorted = malloc(((size_t)n->n_edges + 1) * sizeof *sorted);
  if (!n->edge_off || !sorted) {
    free(sorted);
    return pa_error(PASADA_ERR_NOMEM, "grammar: out of memory");
  }
  for (uint32_t i = 0; i < n->n_edges; i++) n->edge_off[n->edges[i].from + 1]++;
  for (uint32_t s = 0; s < n->n_states; s++) n->edge_off[s + 1] += n->edge_off[s];
  uint32_t *fill = malloc(((size_t)n->n_states + 1) * sizeof *fill);
  if (!fill) {
    free(sorted);
    return pa_error(PASADA_ERR_NOMEM, "grammar: out of memory");
  }
  memcpy(fill, n->edge_off, ((size_t)n->n_states + 1) * sizeof *fill);
  for (uint32_t i = 0; i < n->n_edges; i++) sorted[fill[n->edges[i].from]++] = n->edges[i];
  free(fill);
  free(n->edges);
  n->edges = sorted;
  n->cap_edges = n->n_edges + 1;
  return PASADA_OK;
}

int pa_nfa_build(const pa_gast *ast, int32_t root, pa_nfa *nfa) {
  memset(nfa, 0, sizeof *nfa);
  const int32_t nr = ast->n_rules;
  builder b = {.ast = ast, .nfa = nfa};
  b.nullable = calloc((size_t)nr, 1);
  b.productive = calloc((size_t)nr, 1);
  b.recursive = calloc((size_t)nr, 1);
  b.reachable = calloc((size_t)nr, 1);
  b.inlined = calloc((size_t)nr, 1);
  b.level = calloc((size_t)nr, 1);
  b.size = calloc((size_t)nr, sizeof *b.size);
  nfa->n_rules = nr;
  nfa->rule_start = malloc((size_t)nr * sizeof *nfa->rule_start);
  nfa->rule_end = malloc((size_t)nr * sizeof *nfa->rule_end);
  nfa->rule_names = malloc((size_t)nr * sizeof *nfa->rule_names);
  graph refs = {0}, left = {0};
  if (!b.nullable || !b.productive || !b.recursive || !b.reachable || !b.inlined || !b.level ||
      !b.size || !nfa->rule_start || !nfa->rule_end || !nfa->rule_names) {
    oom(&b);
    goto out;
  }
  for (int32_t r = 0; r < nr; r++) {
    nfa->rule_start[r] = nfa->rule_end[r] = PA_G_NONE;
    nfa->rule_names[r] = ast->rules[r].name;
  }
  if (rule_props(&b, b.nullable, false) || rule_props(&b, b.productive, true)) goto out;
  if (build_graph(&b, false, &refs)) goto out;
  mark_reachable(&b, &refs, root);
  for (int32_t r = 0; r < nr && !b.err; r++)
    if (b.reachable[r] && !b.productive[r]) {
      int32_t line, col;
      pa_gast_where(ast, ast->rules[r].pos, &line, &col);
      b.err = pa_error(PASADA_ERR_ARG,
                       "grammar: line %d, column %d: rule '%s' can never complete (every "
                       "alternative recurses without end)",
                       line, col, ast->rules[r].name);
    }
  if (b.err) goto out;
  /* left recursion: a cycle in the left-call graph */
  if (build_graph(&b, true, &left) || scc(&b, &left, true, NULL)) goto out;
  if (scc(&b, &refs, false, decide_inline)) goto out;
  b.inlined[root] = false; /* the root has its own automaton */
  nfa->nullable = malloc((size_t)nr);
  if (!nfa->nullable) {
    oom(&b);
    goto out;
  }
  memcpy(nfa->nullable, b.nullable, (size_t)nr);
  for (int32_t r = 0; r < nr && !b.err; r++) {
    if (!b.reachable[r] || (b.inlined[r] && r != root)) continue;
    frag f = build_rule_body(&b, r);
    nfa->rule_start[r] = f.start;
    nfa->rule_end[r] = f.end;
  }
  if (!b.err) b.err = sort_edges(nfa);
out:
  free(b.nullable);
  free(b.productive);
  free(b.recursive);
  free(b.reachable);
  free(b.inlined);
  free(b.level);
  free(b.size);
  free_graph(&refs);
  free_graph(&left);
  if (b.err) pa_nfa_free(nfa);
  return b.err;
}

void pa_nfa_free(pa_nfa *nfa) {
  free(nfa->edges);
  free(nfa->edge_off);
  free(nfa->sets);
  free(nfa->set_slots);
  free(nfa->rule_start);
  free(nfa->rule_end);
  free(nfa->nullable);
  free(nfa->rule_names);
  memset(nfa, 0, sizeof *nfa);
}
