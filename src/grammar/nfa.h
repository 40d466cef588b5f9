/* nfa.h: the byte-level automaton with rule calls that compile.c builds from
 * a syntax tree and dfa.c determinizes, one rule at a time. Private to
 * src/grammar. */
#ifndef PASADA_GRAMMAR_NFA_H
#define PASADA_GRAMMAR_NFA_H

#include <stdint.h>

#include "grammar/grammar.h"

/* An edge's label: a byte set (>= 0, an index into sets), epsilon, or a
 * call of rule r (PA_NFA_CALL - r). */
#define PA_NFA_EPS (-1)
#define PA_NFA_CALL (-2)

typedef struct {
  uint32_t from, to;
  int32_t label;
} pa_nfa_edge;

typedef struct {
  uint64_t w[4];
} pa_byteset;

typedef struct {
  uint32_t n_states;
  pa_nfa_edge *edges;
  uint32_t n_edges, cap_edges;
  uint32_t *edge_off; /* [state + 1] after pa_nfa_index: edges sorted by `from` */
  pa_byteset *sets;
  int32_t n_sets, cap_sets;
  uint32_t *set_slots; /* dedup table of sets: index + 1, 0 empty */
  uint32_t set_mask;
  /* per rule of the tree: its automaton's start and end (PA_G_NONE when the
   * rule is only ever inlined), whether it matches the empty text */
  int32_t n_rules;
  uint32_t *rule_start, *rule_end;
  bool *nullable;
  const char **rule_names; /* the tree's, for messages */
} pa_nfa;

/* Tree -> automaton: every rule reachable from root that is called (not
 * inlined) gets its own start/end. Checks left recursion and rules that
 * can never complete. */
int pa_nfa_build(const pa_gast *ast, int32_t root, pa_nfa *nfa);
void pa_nfa_free(pa_nfa *nfa);

/* Automaton -> deterministic automata over byte classes, into g (its
 * vocabulary fields are left alone). */
int pa_dfa_build(const pa_nfa *nfa, int32_t root, pa_grammar *g);

static inline bool pa_byteset_has(const pa_byteset *s, unsigned b) {
  return s->w[b >> 6] >> (b & 63) & 1;
}

#endif
