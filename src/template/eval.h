/* eval.h: the evaluator's state, shared by its statement half (eval.c) and
 * its expression half (expr.c). */
#ifndef PASADA_TPL_EVAL_H
#define PASADA_TPL_EVAL_H

#include "template/tpl.h"

struct tpl_rt {
  const struct pa_template *t;
  tpl_dict *vars; /* the render's variables (the JSON object) */
  tpl_limits lim;
  uint64_t steps;
  int depth, calls;
  tpl_buf *out;    /* where output goes now (a macro's body captures its own) */
  tpl_scope *root; /* the template's top-level scope */
  int err_line;    /* the line of the innermost node that failed; 0: none yet */
};

/* Evaluates an expression into *out (a new reference). */
bool tpl_eval(tpl_rt *rt, const tpl_node *n, tpl_scope *sc, tpl_val *out);
/* A variable: the scopes outward, then the render's variables, then the
 * globals; undefined when none has it. */
bool tpl_lookup(tpl_rt *rt, tpl_scope *sc, const tpl_name *name, tpl_val *out);
/* The arguments of a call, filter or test node (evaluated; tpl_args_free
 * drops them). extra_kw/extra_val: one more keyword argument (a call
 * block's caller), or NULL. */
bool tpl_eval_args(tpl_rt *rt, const tpl_node *n, tpl_scope *sc, const char *extra_kw,
                   tpl_val extra_val, tpl_args *a);
void tpl_args_free(tpl_args *a);
/* A chain of N_FILTER nodes whose innermost input is NULL, applied to in. */
bool tpl_apply_filters(tpl_rt *rt, const tpl_node *chain, tpl_scope *sc, tpl_val in, tpl_val *out);
/* Records the failing node's line (the innermost one wins). */
static inline bool tpl_fail_at(tpl_rt *rt, const tpl_node *n) {
  if (!rt->err_line) rt->err_line = n->line;
  return false;
}
/* Python's a OP b (tpl_binop), a CMP b (tpl_compare_op), item in container. */
bool tpl_binop(tpl_rt *rt, int op, tpl_val a, tpl_val b, tpl_val *out);
bool tpl_compare_op(int op, tpl_val a, tpl_val b, bool *out);
bool tpl_contains(tpl_val container, tpl_val item, bool *out);
/* An undefined value used where it cannot be: its message as the error. */
bool tpl_undefined_error(tpl_val v);

#endif
