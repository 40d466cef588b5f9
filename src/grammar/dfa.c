/* dfa.c: determinizes each called rule's automaton (subset construction)
 * over classes of bytes no byte set tells apart, so that a byte moves a
 * head to one state with one table load. Calls stay calls: a state lists
 * the rules it may call and the state each returns to; a call of a rule
 * that matches the empty text is also an epsilon move. Then the states that
 * cannot complete their rule are cut, and calls after which the rule can
 * only end become tail calls (nothing pushed). */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "grammar/nfa.h"

typedef struct {
  const pa_nfa *nfa;
  pa_grammar *g;
  uint8_t rep[256]; /* a byte of each class */
  /* DFA states: their NFA state sets in one arena, a hash table over them */
  uint32_t *mem;
  size_t n_mem, cap_mem;
  size_t *mem_off; /* [state + 1] */
  int32_t *state_rule;
  uint32_t cap_states;
  uint32_t *slots; /* state + 1, 0 empty */
  uint32_t slot_mask;
  uint32_t *rule_dfa; /* [rule] its start state, PA_G_NONE until needed */
  /* closure scratch */
  uint32_t *stamp, cur_stamp;
  uint32_t *stack, *set;
  size_t n_calls, cap_calls;
  uint64_t work; /* edges scanned, against PA_G_MAX_DETERMINIZE */
  int err;
} dfa_builder;

static int oom(dfa_builder *d) {
  if (!d->err) d->err = pa_error(PASADA_ERR_NOMEM, "grammar: out of memory");
  return d->err;
}

/* Byte classes: refine the partition of 0..255 by every set. */
static void byte_classes(dfa_builder *d) {
  uint8_t *cls = d->g->cls;
  memset(cls, 0, 256);
  uint32_t n = 1;
  for (int32_t s = 0; s < d->nfa->n_sets; s++) {
    const pa_byteset *set = &d->nfa->sets[s];
    int16_t remap[512];
    for (int i = 0; i < 512; i++) remap[i] = -1;
    uint32_t next = 0;
    for (int b = 0; b < 256; b++) {
      int key = cls[b] * 2 + (pa_byteset_has(set, (unsigned)b) ? 1 : 0);
      if (remap[key] < 0) remap[key] = (int16_t)next++;
      cls[b] = (uint8_t)remap[key];
    }
    n = next;
  }
  d->g->n_cls = n;
  for (int b = 255; b >= 0; b--) d->rep[cls[b]] = (uint8_t)b;
}

static bool important(const dfa_builder *d, uint32_t s, int32_t rule) {
  const pa_nfa *n = d->nfa;
  if (s == n->rule_end[rule]) return true;
  for (uint32_t e = n->edge_off[s]; e < n->edge_off[s + 1]; e++)
    if (n->edges[e].label != PA_NFA_EPS) return true;
  return false;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Closes set[0..n) (NFA states of `rule`) under epsilon moves and calls of
 * rules that match the empty text, keeps the important states, sorted, in
 * d->set; returns their count. */
static uint32_t closure(dfa_builder *d, uint32_t n, int32_t rule) {
  const pa_nfa *nfa = d->nfa;
  if (++d->cur_stamp == 0) {
    memset(d->stamp, 0, (size_t)nfa->n_states * sizeof *d->stamp);
    d->cur_stamp = 1;
  }
  uint32_t sp = 0, out = 0;
  for (uint32_t i = 0; i < n; i++)
    if (d->stamp[d->set[i]] != d->cur_stamp)
      d->stamp[d->set[i]] = d->cur_stamp, d->stack[sp++] = d->set[i];
  while (sp) {
    uint32_t s = d->stack[--sp];
    if (important(d, s, rule)) d->set[out++] = s;
    for (uint32_t e = nfa->edge_off[s]; e < nfa->edge_off[s + 1]; e++) {
      const pa_nfa_edge *ed = &nfa->edges[e];
      bool eps = ed->label == PA_NFA_EPS ||
                 (ed->label <= PA_NFA_CALL && nfa->nullable[PA_NFA_CALL - ed->label]);
      if (eps && d->stamp[ed->to] != d->cur_stamp) {
        d->stamp[ed->to] = d->cur_stamp;
        d->stack[sp++] = ed->to;
      }
    }
  }
  qsort(d->set, out, sizeof *d->set, cmp_u32);
  return out;
}

static uint64_t hash_set(const uint32_t *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull ^ n;
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
  return h ^ (h >> 31);
}

static bool grow_states(dfa_builder *d) {
  pa_grammar *g = d->g;
  uint32_t cap = d->cap_states ? d->cap_states * 2 : 256;
  uint32_t *trans = realloc(g->trans, (size_t)cap * g->n_cls * sizeof *trans);
  if (trans) g->trans = trans;
  uint8_t *flags = realloc(g->flags, cap);
  if (flags) g->flags = flags;
  uint32_t *call_off = realloc(g->call_off, ((size_t)cap + 1) * sizeof *call_off);
  if (call_off) g->call_off = call_off;
  size_t *mem_off = realloc(d->mem_off, ((size_t)cap + 1) * sizeof *mem_off);
  if (mem_off) d->mem_off = mem_off;
  int32_t *rule = realloc(d->state_rule, (size_t)cap * sizeof *rule);
  if (rule) d->state_rule = rule;
  if (!trans || !flags || !call_off || !mem_off || !rule) return false;
  d->cap_states = cap;
  return true;
}

static void rehash(dfa_builder *d, uint32_t cap) {
  uint32_t *slots = calloc(cap, sizeof *slots);
  if (!slots) {
    oom(d);
    return;
  }
  for (uint32_t s = 0; s < d->g->n_states; s++) {
    uint32_t h =
        (uint32_t)hash_set(d->mem + d->mem_off[s], d->mem_off[s + 1] - d->mem_off[s]) & (cap - 1);
    while (slots[h]) h = (h + 1) & (cap - 1);
    slots[h] = s + 1;
  }
  free(d->slots);
  d->slots = slots;
  d->slot_mask = cap - 1;
}

/* The DFA state of the closed set d->set[0..n) of `rule`, made when new;
 * PA_G_NONE for the empty set (or on error). */
static uint32_t state_of(dfa_builder *d, uint32_t n, int32_t rule) {
  if (!n || d->err) return PA_G_NONE;
  pa_grammar *g = d->g;
  uint32_t h = (uint32_t)hash_set(d->set, n) & d->slot_mask;
  for (; d->slots[h]; h = (h + 1) & d->slot_mask) {
    uint32_t s = d->slots[h] - 1;
    size_t len = d->mem_off[s + 1] - d->mem_off[s];
    if (len == n && !memcmp(d->mem + d->mem_off[s], d->set, n * sizeof *d->set)) return s;
  }
  if (g->n_states >= PA_G_MAX_DFA || (uint64_t)(g->n_states + 1) * g->n_cls > PA_G_MAX_TABLE) {
    d->err = pa_error(PASADA_ERR_ARG,
                      "grammar: the deterministic automaton exceeds %u states or %u table "
                      "entries (repetitions too large, or too ambiguous?)",
                      PA_G_MAX_DFA, PA_G_MAX_TABLE);
    return PA_G_NONE;
  }
  if (g->n_states == d->cap_states && !grow_states(d)) return oom(d), PA_G_NONE;
  if (d->n_mem + n > d->cap_mem) {
    size_t cap = d->cap_mem ? d->cap_mem * 2 : 4096;
    while (cap < d->n_mem + n) cap *= 2;
    if (cap > ((size_t)1 << 27)) {
      d->err = pa_error(PASADA_ERR_ARG, "grammar: too large to determinize");
      return PA_G_NONE;
    }
    uint32_t *m = realloc(d->mem, cap * sizeof *m);
    if (!m) return oom(d), PA_G_NONE;
    d->mem = m;
    d->cap_mem = cap;
  }
  uint32_t s = g->n_states++;
  d->mem_off[s] = d->n_mem;
  memcpy(d->mem + d->n_mem, d->set, n * sizeof *d->set);
  d->n_mem += n;
  d->mem_off[s + 1] = d->n_mem;
  d->state_rule[s] = rule;
  d->slots[h] = s + 1;
  if ((uint64_t)g->n_states * 2 > d->slot_mask) rehash(d, (d->slot_mask + 1) * 2);
  return s;
}

/* The start state of rule r's automaton, made on first need. */
static uint32_t rule_start(dfa_builder *d, int32_t r) {
  if (d->rule_dfa[r] == PA_G_NONE) {
    d->set[0] = d->nfa->rule_start[r];
    d->rule_dfa[r] = state_of(d, closure(d, 1, r), r);
  }
  return d->rule_dfa[r];
}

static bool push_call(dfa_builder *d, uint32_t start, uint32_t ret) {
  pa_grammar *g = d->g;
  if (d->n_calls == d->cap_calls) {
    size_t cap = d->cap_calls ? d->cap_calls * 2 : 256;
    pa_gcall *c = realloc(g->calls, cap * sizeof *c);
    if (!c) return oom(d), false;
    g->calls = c;
    d->cap_calls = cap;
  }
  g->calls[d->n_calls++] = (pa_gcall){start, ret};
  return true;
}

/* Fills state s's transitions, calls and finality. */
static void expand(dfa_builder *d, uint32_t s) {
  const pa_nfa *nfa = d->nfa;
  pa_grammar *g = d->g;
  const int32_t rule = d->state_rule[s];
  /* copy the members: state_of may move the arena */
  uint32_t n_mem = (uint32_t)(d->mem_off[s + 1] - d->mem_off[s]);
  uint32_t *mem = malloc(((size_t)n_mem + 1) * sizeof *mem);
  if (!mem) {
    oom(d);
    return;
  }
  memcpy(mem, d->mem + d->mem_off[s], n_mem * sizeof *mem);
  bool final = false;
  for (uint32_t i = 0; i < n_mem; i++) final |= mem[i] == nfa->rule_end[rule];
  g->flags[s] = final ? PA_GS_FINAL : 0;
  uint32_t member_edges = 0;
  for (uint32_t i = 0; i < n_mem; i++)
    member_edges += nfa->edge_off[mem[i] + 1] - nfa->edge_off[mem[i]];
  d->work += (uint64_t)member_edges * (g->n_cls + 1);
  if (d->work > PA_G_MAX_DETERMINIZE && !d->err)
    d->err = pa_error(PASADA_ERR_ARG,
                      "grammar: too costly to determinize (the automaton exceeds the limits)");
  for (uint32_t c = 0; c < g->n_cls && !d->err; c++) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < n_mem; i++)
      for (uint32_t e = nfa->edge_off[mem[i]]; e < nfa->edge_off[mem[i] + 1]; e++) {
        const pa_nfa_edge *ed = &nfa->edges[e];
        if (ed->label >= 0 && pa_byteset_has(&nfa->sets[ed->label], d->rep[c]))
          d->set[n++] = ed->to;
      }
    /* state_of may grow the table: index it afresh */
    uint32_t t = state_of(d, n ? closure(d, n, rule) : 0, rule);
    g->trans[(size_t)s * g->n_cls + c] = t;
  }
  /* calls, one per callee, returning to the closure of their targets */
  g->call_off[s] = (uint32_t)d->n_calls;
  for (uint32_t i = 0; i < n_mem && !d->err; i++)
    for (uint32_t e = nfa->edge_off[mem[i]]; e < nfa->edge_off[mem[i] + 1]; e++) {
      const pa_nfa_edge *ed = &nfa->edges[e];
      if (ed->label > PA_NFA_CALL) continue;
      int32_t callee = PA_NFA_CALL - ed->label;
      /* every target of calls of this callee from s's members, once: at the
       * first such edge */
      uint32_t n = 0;
      bool first = true;
      for (uint32_t j = 0; j < n_mem && first; j++)
        for (uint32_t f = nfa->edge_off[mem[j]]; f < nfa->edge_off[mem[j] + 1]; f++) {
          const pa_nfa_edge *ef = &nfa->edges[f];
          if (ef->label != ed->label) continue;
          if (j < i || (j == i && f < e)) {
            first = false; /* an earlier edge already made this call */
            break;
          }
          d->set[n++] = ef->to;
        }
      if (!first) continue;
      uint32_t ret = state_of(d, closure(d, n, rule), rule);
      uint32_t start = rule_start(d, callee);
      if (d->err) break;
      if (start != PA_G_NONE && ret != PA_G_NONE)
        push_call(d, start, ret); /* else it matches nothing */
    }
  g->call_off[s + 1] = (uint32_t)d->n_calls;
  free(mem);
}

/* Marks the states that can complete their rule (live), cuts the rest. */
static int trim(dfa_builder *d) {
  pa_grammar *g = d->g;
  const uint32_t n = g->n_states, nc = g->n_cls;
  bool *live = calloc(n, 1);
  /* predecessors (CSR): p is re-checked when one of its successors (a
   * transition target, a call's start or return) becomes live */
  uint32_t *cnt = calloc((size_t)n + 1, sizeof *cnt);
  if (!live || !cnt) {
    free(live);
    free(cnt);
    return oom(d);
  }
#define EACH_SUCC(p, BODY)                                                \
  do {                                                                    \
    for (uint32_t c_ = 0; c_ < nc; c_++) {                                \
      uint32_t t_ = g->trans[(size_t)(p)*nc + c_];                        \
      if (t_ != PA_G_NONE) {                                              \
        BODY(t_);                                                         \
      }                                                                   \
    }                                                                     \
    for (uint32_t k_ = g->call_off[p]; k_ < g->call_off[(p) + 1]; k_++) { \
      BODY(g->calls[k_].start);                                           \
      if (g->calls[k_].ret != PA_G_NONE) {                                \
        BODY(g->calls[k_].ret);                                           \
      }                                                                   \
    }                                                                     \
  } while (0)
  size_t total = 0;
#define COUNT(t) (cnt[(t) + 1]++, total++)
  for (uint32_t p = 0; p < n; p++) EACH_SUCC(p, COUNT);
  for (uint32_t s = 0; s < n; s++) cnt[s + 1] += cnt[s];
  uint32_t *pred = malloc((total + 1) * sizeof *pred),
           *fill = malloc(((size_t)n + 1) * sizeof *fill);
  uint32_t *todo = malloc(((size_t)n + 1) * sizeof *todo);
  if (!pred || !fill || !todo) {
    free(live), free(cnt), free(pred), free(fill), free(todo);
    return oom(d);
  }
  memcpy(fill, cnt, ((size_t)n + 1) * sizeof *fill);
#define STORE(t) (pred[fill[t]++] = p)
  for (uint32_t p = 0; p < n; p++) EACH_SUCC(p, STORE);
  uint32_t nt = 0;
  for (uint32_t s = 0; s < n; s++)
    if (g->flags[s] & PA_GS_FINAL) live[s] = true, todo[nt++] = s;
  while (nt) {
    uint32_t t = todo[--nt];
    for (uint32_t k = cnt[t]; k < cnt[t + 1]; k++) {
      uint32_t p = pred[k];
      if (live[p]) continue;
      bool ok = false;
      for (uint32_t c = 0; c < nc && !ok; c++) {
        uint32_t x = g->trans[(size_t)p * nc + c];
        ok = x != PA_G_NONE && live[x];
      }
      for (uint32_t j = g->call_off[p]; j < g->call_off[p + 1] && !ok; j++)
        ok = live[g->calls[j].start] && (g->calls[j].ret == PA_G_NONE || live[g->calls[j].ret]);
      if (ok) live[p] = true, todo[nt++] = p;
    }
  }
#undef EACH_SUCC
#undef COUNT
#undef STORE
  /* cut, then flags and tail calls */
  for (uint32_t s = 0; s < n; s++)
    for (uint32_t c = 0; c < nc; c++) {
      uint32_t *t = &g->trans[(size_t)s * nc + c];
      if (*t != PA_G_NONE && !live[*t]) *t = PA_G_NONE;
    }
  uint32_t w = 0;
  for (uint32_t s = 0; s < n; s++) {
    uint32_t from = g->call_off[s], to = g->call_off[s + 1];
    g->call_off[s] = w;
    for (uint32_t k = from; k < to; k++)
      if (live[s] && live[g->calls[k].start] && live[g->calls[k].ret]) g->calls[w++] = g->calls[k];
  }
  g->call_off[n] = w;
  for (uint32_t s = 0; s < n; s++) {
    uint8_t f = g->flags[s] & PA_GS_FINAL;
    for (uint32_t c = 0; c < nc && !(f & PA_GS_BYTES); c++)
      if (g->trans[(size_t)s * nc + c] != PA_G_NONE) f |= PA_GS_BYTES;
    if (g->call_off[s + 1] > g->call_off[s]) f |= PA_GS_CALLS;
    g->flags[s] = f;
  }
  for (uint32_t k = 0; k < w; k++) {
    uint32_t r = g->calls[k].ret;
    if (g->flags[r] == PA_GS_FINAL) g->calls[k].ret = PA_G_NONE; /* nothing follows: a tail call */
  }
  for (size_t i = 0; i < (size_t)n * nc; i++) {
    uint32_t t = g->trans[i];
    if (t != PA_G_NONE && g->flags[t] != PA_GS_BYTES) g->trans[i] = t | PA_G_SLOW;
  }
  bool root_live = live[g->start];
  free(live), free(cnt), free(pred), free(fill), free(todo);
  if (!root_live)
    return d->err = pa_error(PASADA_ERR_ARG, "grammar: the root rule matches no text");
  return PASADA_OK;
}

int pa_dfa_build(const pa_nfa *nfa, int32_t root, pa_grammar *g) {
  dfa_builder d = {.nfa = nfa, .g = g};
  g->n_states = 0;
  byte_classes(&d);
  d.rule_dfa = malloc((size_t)nfa->n_rules * sizeof *d.rule_dfa);
  d.stamp = calloc((size_t)nfa->n_states + 1, sizeof *d.stamp);
  d.stack = malloc(((size_t)nfa->n_states + 1) * sizeof *d.stack);
  /* a transition's targets: at most one per edge */
  d.set = malloc(((size_t)nfa->n_edges + nfa->n_states + 1) * sizeof *d.set);
  if (!d.rule_dfa || !d.stamp || !d.stack || !d.set) {
    oom(&d);
    goto out;
  }
  for (int32_t r = 0; r < nfa->n_rules; r++) d.rule_dfa[r] = PA_G_NONE;
  rehash(&d, 1024);
  if (d.err) goto out;
  g->start = rule_start(&d, root);
  if (g->start == PA_G_NONE && !d.err)
    d.err = pa_error(PASADA_ERR_ARG, "grammar: the root rule matches no text");
  for (uint32_t s = 0; s < g->n_states && !d.err; s++) expand(&d, s);
  if (!d.err) trim(&d);
out:
  free(d.mem);
  free(d.mem_off);
  free(d.state_rule);
  free(d.slots);
  free(d.rule_dfa);
  free(d.stamp);
  free(d.stack);
  free(d.set);
  return d.err;
}
