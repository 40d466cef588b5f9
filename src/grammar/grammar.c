/* grammar.c: the public grammar object (pasada_grammar_create/free): GBNF
 * text compiled for one tokenizer's vocabulary; immutable once made (the
 * per-state token caches fill in on first use, atomically), so any number
 * of samplers on any threads share it. */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "grammar/nfa.h"

void pa_grammar_release(pa_grammar *g) {
  if (g->cache)
    for (uint32_t s = 0; s < g->n_states; s++) pa_gcache_free(atomic_load(&g->cache[s]));
  free(g->cache);
  free(g->trans);
  free(g->flags);
  free(g->call_off);
  free(g->calls);
  memset(g, 0, sizeof *g);
}

int pa_grammar_build(const pa_gast *ast, int32_t root, pa_grammar *g) {
  pa_nfa nfa;
  int st = pa_nfa_build(ast, root, &nfa);
  if (st) return st;
  st = pa_dfa_build(&nfa, root, g);
  pa_nfa_free(&nfa);
  if (!st && !(g->cache = calloc(g->n_states ? g->n_states : 1, sizeof *g->cache)))
    st = pa_error(PASADA_ERR_NOMEM, "grammar: out of memory");
  if (st) pa_grammar_release(g);
  return st;
}

int pasada_grammar_create(const pasada_tokenizer *tok, const char *gbnf, size_t len,
                          const char *root, pasada_grammar **out) {
  if (!out) return pa_error(PASADA_ERR_ARG, "grammar: no output given");
  *out = NULL;
  if (!tok) return pa_error(PASADA_ERR_ARG, "grammar: no tokenizer");
  if (!gbnf && len) return pa_error(PASADA_ERR_ARG, "grammar: no text");
  const char *root_name = root && *root ? root : "root";
  const pa_gvocab *v = pa_gvocab_get(tok);
  if (!v) return pa_error(PASADA_ERR_NOMEM, "grammar: out of memory for the vocabulary index");
  pa_gast ast;
  int st = pa_gbnf_parse_vocab(gbnf, len, tok, &ast);
  if (st) return st;
  int32_t r = pa_gast_find(&ast, root_name);
  if (r < 0) {
    pa_gast_free(&ast);
    return pa_error(PASADA_ERR_ARG, "grammar: no rule '%s' (the start rule)", root_name);
  }
  pa_grammar *g = calloc(1, sizeof *g);
  if (!g) {
    pa_gast_free(&ast);
    return pa_error(PASADA_ERR_NOMEM, "grammar: out of memory");
  }
  st = pa_grammar_build(&ast, r, g);
  pa_gast_free(&ast);
  if (st) {
    free(g);
    return st;
  }
  g->vocab = v;
  g->n_vocab = v->n_vocab;
  *out = g;
  return PASADA_OK;
}

void pasada_grammar_free(pasada_grammar *g) {
  if (!g) return;
  pa_grammar_release(g);
  free(g);
}
