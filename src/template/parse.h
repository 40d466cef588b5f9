/* parse.h: the template parser's state, shared by its statement half
 * (parse.c) and its expression half (parse_expr.c). The grammar is
 * jinja2's: the same precedence, tuples without parentheses, filters and
 * tests binding tighter than unary minus. */
#ifndef PASADA_TPL_PARSE_H
#define PASADA_TPL_PARSE_H

#include "template/tpl.h"

#define TPL_PARSE_DEPTH 300 /* nested statements and expressions */

typedef struct {
  struct pa_template *t;
  tpl_tokens toks;
  size_t i;  /* the current token */
  int depth; /* nesting, against TPL_PARSE_DEPTH */
  int loops; /* for bodies around the current statement (break, continue) */
  bool failed;
} tpl_parser;

/* A growable list of nodes while parsing (malloc'd), kept in the arena when done. */
typedef struct {
  tpl_node **v;
  size_t n, cap;
} tpl_nodevec;

tpl_token *tpl_p_cur(tpl_parser *p);
tpl_token *tpl_p_look(tpl_parser *p);
tpl_token *tpl_p_next(tpl_parser *p);
bool tpl_p_is(const tpl_token *t, const char *name); /* a name token with this text */
bool tpl_p_expect(tpl_parser *p, uint8_t type, const char *what);
bool tpl_p_expect_name(tpl_parser *p, const char *name);
bool tpl_p_fail(tpl_parser *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *tpl_p_describe(const tpl_token *t, char *buf, size_t cap);
tpl_node *tpl_p_node(tpl_parser *p, uint8_t type, int line);
const tpl_name *tpl_p_intern(tpl_parser *p, const char *s, size_t len);
bool tpl_p_push(tpl_parser *p, tpl_nodevec *v, tpl_node *n);
tpl_nodes tpl_p_finish(tpl_parser *p, tpl_nodevec *v);
bool tpl_p_enter(tpl_parser *p);
static inline void tpl_p_leave(tpl_parser *p) {
  p->depth--;
}

/* Expressions (parse_expr.c); NULL after an error. */
tpl_node *tpl_parse_expression(tpl_parser *p, bool with_condexpr);
tpl_node *tpl_parse_tuple(tpl_parser *p, bool simplified, bool with_condexpr,
                          const char *const *extra_end, bool explicit_parens, bool with_namespace);
tpl_node *tpl_parse_primary(tpl_parser *p, bool with_namespace);
/* The call arguments from '(' to ')' into n (args, kwnames/kwargs, c, d). */
bool tpl_parse_call_args(tpl_parser *p, tpl_node *n);
/* A filter chain: `| name(args)`...; with start_inline the first '|' is absent. */
tpl_node *tpl_parse_filter(tpl_parser *p, tpl_node *node, bool start_inline);
tpl_node *tpl_parse_assign_target(tpl_parser *p, bool with_tuple, bool name_only,
                                  const char *const *extra_end, bool with_namespace);

#endif
