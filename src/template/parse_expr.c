/* parse_expr.c: the expression half of the template parser: conditional
 * expressions, or/and/not, comparisons, arithmetic, ~, unary signs,
 * literals, tuples, lists, dicts, attribute and item access, slices, calls,
 * filters and tests, as jinja2's parser builds them. */
#include <stdlib.h>
#include <string.h>

#include "template/parse.h"

static tpl_node *parse_or(tpl_parser *p);
static tpl_node *parse_unary(tpl_parser *p, bool with_filter);
static tpl_node *parse_postfix(tpl_parser *p, tpl_node *node);
static tpl_node *parse_filter_expr(tpl_parser *p, tpl_node *node);

static bool at_end_rule(tpl_parser *p, const char *const *extra) {
  const tpl_token *t = tpl_p_cur(p);
  if (t->type == TK_VAR_END || t->type == TK_BLOCK_END || t->type == TK_RPAREN) return true;
  for (; extra && *extra; extra++)
    if (tpl_p_is(t, *extra)) return true;
  return false;
}

tpl_node *tpl_parse_expression(tpl_parser *p, bool with_condexpr) {
  if (!with_condexpr) return parse_or(p);
  if (!tpl_p_enter(p)) return NULL;
  int line = tpl_p_cur(p)->line;
  tpl_node *expr1 = parse_or(p);
  while (expr1 && tpl_p_is(tpl_p_cur(p), "if")) {
    tpl_p_next(p);
    tpl_node *n = tpl_p_node(p, N_CONDEXPR, line);
    if (!n) return NULL;
    n->b = expr1;
    if (!(n->a = parse_or(p))) return NULL;
    if (tpl_p_is(tpl_p_cur(p), "else")) {
      tpl_p_next(p);
      if (!(n->c = tpl_parse_expression(p, true))) return NULL;
    }
    expr1 = n;
    line = tpl_p_cur(p)->line;
  }
  tpl_p_leave(p);
  return expr1;
}

static tpl_node *binary(tpl_parser *p, uint8_t type, uint8_t op, tpl_node *a, tpl_node *b,
                        int line) {
  if (!a || !b) return NULL;
  tpl_node *n = tpl_p_node(p, type, line);
  if (!n) return NULL;
  n->op = op;
  n->a = a;
  n->b = b;
  return n;
}

static tpl_node *parse_not(tpl_parser *p);
static tpl_node *parse_and(tpl_parser *p) {
  int line = tpl_p_cur(p)->line;
  tpl_node *left = parse_not(p);
  while (left && tpl_p_is(tpl_p_cur(p), "and")) {
    tpl_p_next(p);
    left = binary(p, N_AND, 0, left, parse_not(p), line);
    line = tpl_p_cur(p)->line;
  }
  return left;
}

static tpl_node *parse_or(tpl_parser *p) {
  int line = tpl_p_cur(p)->line;
  tpl_node *left = parse_and(p);
  while (left && tpl_p_is(tpl_p_cur(p), "or")) {
    tpl_p_next(p);
    left = binary(p, N_OR, 0, left, parse_and(p), line);
    line = tpl_p_cur(p)->line;
  }
  return left;
}

static tpl_node *parse_compare(tpl_parser *p);
static tpl_node *parse_not(tpl_parser *p) {
  if (tpl_p_is(tpl_p_cur(p), "not")) {
    const int line = tpl_p_next(p)->line;
    if (!tpl_p_enter(p)) return NULL;
    tpl_node *inner = parse_not(p);
    tpl_p_leave(p);
    if (!inner) return NULL;
    tpl_node *n = tpl_p_node(p, N_NOT, line);
    if (n) n->a = inner;
    return n;
  }
  return parse_compare(p);
}

static tpl_node *parse_math1(tpl_parser *p);
static tpl_node *parse_compare(tpl_parser *p) {
  int line = tpl_p_cur(p)->line;
  tpl_node *expr = parse_math1(p);
  if (!expr) return NULL;
  tpl_nodevec operands = {0};
  uint8_t ops[64];
  size_t n_ops = 0;
  for (;;) {
    const tpl_token *t = tpl_p_cur(p);
    int op = -1;
    switch (t->type) {
      case TK_EQ:
        op = CMP_EQ;
        break;
      case TK_NE:
        op = CMP_NE;
        break;
      case TK_LT:
        op = CMP_LT;
        break;
      case TK_LTEQ:
        op = CMP_LTEQ;
        break;
      case TK_GT:
        op = CMP_GT;
        break;
      case TK_GTEQ:
        op = CMP_GTEQ;
        break;
      default:
        if (tpl_p_is(t, "in"))
          op = CMP_IN;
        else if (tpl_p_is(t, "not") && tpl_p_is(tpl_p_look(p), "in"))
          op = CMP_NOTIN;
    }
    if (op < 0) break;
    if (n_ops == sizeof ops) {
      free(operands.v);
      tpl_p_fail(p, t->line, "too many comparisons in a row");
      return NULL;
    }
    tpl_p_next(p);
    if (op == CMP_NOTIN) tpl_p_next(p);
    tpl_node *rhs = parse_math1(p);
    if (!rhs || !tpl_p_push(p, &operands, rhs)) {
      free(operands.v);
      return NULL;
    }
    ops[n_ops++] = (uint8_t)op;
    line = tpl_p_cur(p)->line;
  }
  if (!n_ops) return expr;
  tpl_node *n = tpl_p_node(p, N_COMPARE, line);
  if (!n) {
    free(operands.v);
    return NULL;
  }
  n->a = expr;
  n->args = tpl_p_finish(p, &operands);
  n->ops = tpl_arena_alloc(p->t, n_ops);
  if (!n->ops) return NULL;
  memcpy(n->ops, ops, n_ops);
  return n;
}

static tpl_node *parse_concat(tpl_parser *p);
static tpl_node *parse_math1(tpl_parser *p) {
  int line = tpl_p_cur(p)->line;
  tpl_node *left = parse_concat(p);
  while (left && (tpl_p_cur(p)->type == TK_ADD || tpl_p_cur(p)->type == TK_SUB)) {
    const uint8_t op = tpl_p_next(p)->type == TK_ADD ? OP_ADD : OP_SUB;
    left = binary(p, N_BINOP, op, left, parse_concat(p), line);
    line = tpl_p_cur(p)->line;
  }
  return left;
}

static tpl_node *parse_math2(tpl_parser *p);
static tpl_node *parse_concat(tpl_parser *p) {
  const int line = tpl_p_cur(p)->line;
  tpl_node *first = parse_math2(p);
  if (!first || tpl_p_cur(p)->type != TK_TILDE) return first;
  tpl_nodevec args = {0};
  if (!tpl_p_push(p, &args, first)) return NULL;
  while (tpl_p_cur(p)->type == TK_TILDE) {
    tpl_p_next(p);
    tpl_node *x = parse_math2(p);
    if (!x || !tpl_p_push(p, &args, x)) {
      free(args.v);
      return NULL;
    }
  }
  tpl_node *n = tpl_p_node(p, N_CONCAT, line);
  if (!n) {
    free(args.v);
    return NULL;
  }
  n->args = tpl_p_finish(p, &args);
  return n;
}

static tpl_node *parse_pow(tpl_parser *p);
static tpl_node *parse_math2(tpl_parser *p) {
  int line = tpl_p_cur(p)->line;
  tpl_node *left = parse_pow(p);
  for (;;) {
    if (!left) return NULL;
    uint8_t op;
    switch (tpl_p_cur(p)->type) {
      case TK_MUL:
        op = OP_MUL;
        break;
      case TK_DIV:
        op = OP_DIV;
        break;
      case TK_FLOORDIV:
        op = OP_FLOORDIV;
        break;
      case TK_MOD:
        op = OP_MOD;
        break;
      default:
        return left;
    }
    tpl_p_next(p);
    left = binary(p, N_BINOP, op, left, parse_pow(p), line);
    line = tpl_p_cur(p)->line;
  }
}

static tpl_node *parse_pow(tpl_parser *p) {
  int line = tpl_p_cur(p)->line;
  tpl_node *left = parse_unary(p, true);
  while (left && tpl_p_cur(p)->type == TK_POW) {
    tpl_p_next(p);
    left = binary(p, N_BINOP, OP_POW, left, parse_unary(p, true), line);
    line = tpl_p_cur(p)->line;
  }
  return left;
}

static tpl_node *parse_unary(tpl_parser *p, bool with_filter) {
  const tpl_token *t = tpl_p_cur(p);
  const int line = t->line;
  tpl_node *node;
  if (!tpl_p_enter(p)) return NULL;
  if (t->type == TK_SUB || t->type == TK_ADD) {
    const bool neg = t->type == TK_SUB;
    tpl_p_next(p);
    tpl_node *inner = parse_unary(p, false);
    if (!inner) return NULL;
    if (!(node = tpl_p_node(p, neg ? N_NEG : N_POS, line))) return NULL;
    node->a = inner;
  } else {
    node = tpl_parse_primary(p, false);
  }
  tpl_p_leave(p);
  if (!node) return NULL;
  node = parse_postfix(p, node);
  if (node && with_filter) node = parse_filter_expr(p, node);
  return node;
}

static tpl_node *parse_list(tpl_parser *p, bool dict);

tpl_node *tpl_parse_primary(tpl_parser *p, bool with_namespace) {
  tpl_token *t = tpl_p_cur(p);
  char desc[64];
  tpl_node *n;
  switch (t->type) {
    case TK_NAME: {
      tpl_p_next(p);
      if (!(n = tpl_p_node(p, N_CONST, t->line))) return NULL;
      if ((t->len == 4 && !memcmp(t->s, "true", 4)) || (t->len == 4 && !memcmp(t->s, "True", 4))) {
        n->val = tpl_bool(true);
      } else if ((t->len == 5 && !memcmp(t->s, "false", 5)) ||
                 (t->len == 5 && !memcmp(t->s, "False", 5))) {
        n->val = tpl_bool(false);
      } else if ((t->len == 4 && !memcmp(t->s, "none", 4)) ||
                 (t->len == 4 && !memcmp(t->s, "None", 4))) {
        n->val = tpl_none();
      } else if (with_namespace && tpl_p_cur(p)->type == TK_DOT) {
        tpl_p_next(p);
        const tpl_token *attr = tpl_p_cur(p);
        if (!tpl_p_expect(p, TK_NAME, "name")) return NULL;
        n->type = N_NSREF;
        if (!(n->name = tpl_p_intern(p, t->s, t->len))) return NULL;
        if (!(n->name2 = tpl_p_intern(p, attr->s, attr->len))) return NULL;
      } else {
        n->type = N_NAME;
        if (!(n->name = tpl_p_intern(p, t->s, t->len))) return NULL;
      }
      return n;
    }
    case TK_STRING: {
      const int line = t->line;
      if (!(n = tpl_p_node(p, N_CONST, line))) return NULL;
      /* adjacent literals join: "a" "b" */
      size_t total = 0, i = p->i;
      while (p->toks.t[i].type == TK_STRING) total += p->toks.t[i++].str_len;
      char *buf = malloc(total + 1);
      if (!buf) {
        tpl_p_fail(p, line, "out of memory");
        return NULL;
      }
      size_t o = 0;
      while (tpl_p_cur(p)->type == TK_STRING) {
        const tpl_token *s = tpl_p_next(p);
        memcpy(buf + o, s->str, s->str_len);
        o += s->str_len;
      }
      tpl_str *str = tpl_str_new(buf, o);
      free(buf);
      if (!str) {
        tpl_p_fail(p, line, "out of memory");
        return NULL;
      }
      n->val = tpl_obj_val(str);
      return n;
    }
    case TK_INT:
    case TK_FLOAT:
      tpl_p_next(p);
      if (!(n = tpl_p_node(p, N_CONST, t->line))) return NULL;
      n->val = t->type == TK_INT ? tpl_int(t->i) : tpl_float(t->f);
      return n;
    case TK_LPAREN:
      tpl_p_next(p);
      if (!tpl_p_enter(p)) return NULL;
      n = tpl_parse_tuple(p, false, true, NULL, true, false);
      tpl_p_leave(p);
      if (!n || !tpl_p_expect(p, TK_RPAREN, "')'")) return NULL;
      return n;
    case TK_LBRACKET:
    case TK_LBRACE: {
      if (!tpl_p_enter(p)) return NULL;
      n = parse_list(p, t->type == TK_LBRACE);
      tpl_p_leave(p);
      return n;
    }
    default:
      tpl_p_fail(p, t->line, "unexpected %s", tpl_p_describe(t, desc, sizeof desc));
      return NULL;
  }
}

tpl_node *tpl_parse_tuple(tpl_parser *p, bool simplified, bool with_condexpr,
                          const char *const *extra_end, bool explicit_parens, bool with_namespace) {
  int line = tpl_p_cur(p)->line;
  tpl_nodevec args = {0};
  bool is_tuple = false;
  for (;;) {
    if (args.n && !tpl_p_expect(p, TK_COMMA, "','")) goto fail;
    if (at_end_rule(p, extra_end)) break;
    tpl_node *x =
        simplified ? tpl_parse_primary(p, with_namespace) : tpl_parse_expression(p, with_condexpr);
    if (!x || !tpl_p_push(p, &args, x)) goto fail;
    if (tpl_p_cur(p)->type != TK_COMMA) break;
    is_tuple = true;
    line = tpl_p_cur(p)->line;
  }
  if (!is_tuple) {
    if (args.n) {
      tpl_node *only = args.v[0];
      free(args.v);
      return only;
    }
    if (!explicit_parens) {
      char desc[64];
      tpl_p_fail(p, tpl_p_cur(p)->line, "Expected an expression, got %s",
                 tpl_p_describe(tpl_p_cur(p), desc, sizeof desc));
      goto fail;
    }
  }
  tpl_node *n = tpl_p_node(p, N_TUPLE, line);
  if (!n) goto fail;
  n->args = tpl_p_finish(p, &args);
  return n;
fail:
  free(args.v);
  return NULL;
}

static tpl_node *parse_list(tpl_parser *p, bool dict) {
  const tpl_token *open = tpl_p_next(p);
  const uint8_t close = dict ? TK_RBRACE : TK_RBRACKET;
  tpl_nodevec keys = {0}, vals = {0};
  while (tpl_p_cur(p)->type != close) {
    if (keys.n && !tpl_p_expect(p, TK_COMMA, "','")) goto fail;
    if (tpl_p_cur(p)->type == close) break;
    tpl_node *k = tpl_parse_expression(p, true);
    if (!k || !tpl_p_push(p, &keys, k)) goto fail;
    if (dict) {
      if (!tpl_p_expect(p, TK_COLON, "':'")) goto fail;
      tpl_node *v = tpl_parse_expression(p, true);
      if (!v || !tpl_p_push(p, &vals, v)) goto fail;
    }
  }
  if (!tpl_p_expect(p, close, dict ? "'}'" : "']'")) goto fail;
  tpl_node *n = tpl_p_node(p, dict ? N_DICT : N_LIST, open->line);
  if (!n) goto fail;
  n->args = tpl_p_finish(p, &keys);
  n->kwargs = tpl_p_finish(p, &vals);
  return n;
fail:
  free(keys.v);
  free(vals.v);
  return NULL;
}

static tpl_node *parse_subscribed(tpl_parser *p) {
  const int line = tpl_p_cur(p)->line;
  tpl_node *parts[3] = {NULL, NULL, NULL};
  if (tpl_p_cur(p)->type == TK_COLON) {
    tpl_p_next(p);
  } else {
    tpl_node *node = tpl_parse_expression(p, true);
    if (!node || tpl_p_cur(p)->type != TK_COLON) return node;
    tpl_p_next(p);
    parts[0] = node;
  }
  uint8_t t = tpl_p_cur(p)->type;
  if (t != TK_COLON && t != TK_RBRACKET && t != TK_COMMA &&
      !(parts[1] = tpl_parse_expression(p, true)))
    return NULL;
  if (tpl_p_cur(p)->type == TK_COLON) {
    tpl_p_next(p);
    t = tpl_p_cur(p)->type;
    if (t != TK_RBRACKET && t != TK_COMMA && !(parts[2] = tpl_parse_expression(p, true)))
      return NULL;
  }
  tpl_node *n = tpl_p_node(p, N_SLICE, line);
  if (!n) return NULL;
  n->a = parts[0];
  n->b = parts[1];
  n->c = parts[2];
  return n;
}

static tpl_node *parse_subscript(tpl_parser *p, tpl_node *node) {
  const tpl_token *t = tpl_p_next(p);
  if (t->type == TK_DOT) {
    const tpl_token *attr = tpl_p_next(p);
    if (attr->type == TK_NAME) {
      tpl_node *n = tpl_p_node(p, N_GETATTR, t->line);
      if (!n) return NULL;
      n->a = node;
      if (!(n->name = tpl_p_intern(p, attr->s, attr->len))) return NULL;
      return n;
    }
    if (attr->type != TK_INT) {
      tpl_p_fail(p, attr->line, "expected name or number");
      return NULL;
    }
    tpl_node *k = tpl_p_node(p, N_CONST, attr->line), *n = tpl_p_node(p, N_GETITEM, t->line);
    if (!k || !n) return NULL;
    k->val = tpl_int(attr->i);
    n->a = node;
    n->b = k;
    return n;
  }
  /* '[' */
  tpl_nodevec args = {0};
  while (tpl_p_cur(p)->type != TK_RBRACKET) {
    if (args.n && !tpl_p_expect(p, TK_COMMA, "','")) goto fail;
    tpl_node *x = parse_subscribed(p);
    if (!x || !tpl_p_push(p, &args, x)) goto fail;
  }
  if (!tpl_p_expect(p, TK_RBRACKET, "']'")) goto fail;
  tpl_node *n = tpl_p_node(p, N_GETITEM, t->line);
  if (!n) goto fail;
  n->a = node;
  if (args.n == 1) {
    n->b = args.v[0];
    free(args.v);
  } else {
    tpl_node *tup = tpl_p_node(p, N_TUPLE, t->line);
    if (!tup) goto fail;
    tup->args = tpl_p_finish(p, &args);
    n->b = tup;
  }
  return n;
fail:
  free(args.v);
  return NULL;
}

bool tpl_parse_call_args(tpl_parser *p, tpl_node *n) {
  const tpl_token *open = tpl_p_cur(p);
  if (!tpl_p_expect(p, TK_LPAREN, "'('")) return false;
  tpl_nodevec args = {0}, kwargs = {0};
  const tpl_name **names = NULL;
  size_t n_names = 0;
  bool require_comma = false;
  while (tpl_p_cur(p)->type != TK_RPAREN) {
    if (require_comma) {
      if (!tpl_p_expect(p, TK_COMMA, "','")) goto fail;
      if (tpl_p_cur(p)->type == TK_RPAREN) break;
    }
    const tpl_token *t = tpl_p_cur(p);
    if (t->type == TK_MUL || t->type == TK_POW) {
      const bool star = t->type == TK_MUL;
      if ((star && (n->c || n->d)) || (!star && n->d)) goto bad;
      tpl_p_next(p);
      tpl_node *x = tpl_parse_expression(p, true);
      if (!x) goto fail;
      if (star)
        n->c = x;
      else
        n->d = x;
    } else if (t->type == TK_NAME && tpl_p_look(p)->type == TK_ASSIGN) {
      if (n->d) goto bad;
      const tpl_name *key = tpl_p_intern(p, t->s, t->len);
      if (!key) goto fail;
      tpl_p_next(p);
      tpl_p_next(p);
      tpl_node *x = tpl_parse_expression(p, true);
      if (!x || !tpl_p_push(p, &kwargs, x)) goto fail;
      const tpl_name **nn = realloc(names, (n_names + 1) * sizeof *names);
      if (!nn) goto fail;
      names = nn;
      names[n_names++] = key;
    } else {
      if (n->c || n->d || kwargs.n) goto bad;
      tpl_node *x = tpl_parse_expression(p, true);
      if (!x || !tpl_p_push(p, &args, x)) goto fail;
    }
    require_comma = true;
  }
  if (!tpl_p_expect(p, TK_RPAREN, "')'")) goto fail;
  n->args = tpl_p_finish(p, &args);
  n->kwargs = tpl_p_finish(p, &kwargs);
  if (n_names) {
    n->kwnames = tpl_arena_alloc(p->t, n_names * sizeof *names);
    if (!n->kwnames) goto fail;
    memcpy(n->kwnames, names, n_names * sizeof *names);
  }
  free(names);
  return true;
bad:
  tpl_p_fail(p, open->line, "invalid syntax for function call expression");
fail:
  free(args.v);
  free(kwargs.v);
  free(names);
  return false;
}

static tpl_node *parse_call(tpl_parser *p, tpl_node *node) {
  tpl_node *n = tpl_p_node(p, N_CALL, tpl_p_cur(p)->line);
  if (!n) return NULL;
  n->a = node;
  return tpl_parse_call_args(p, n) ? n : NULL;
}

static tpl_node *parse_postfix(tpl_parser *p, tpl_node *node) {
  while (node) {
    const uint8_t t = tpl_p_cur(p)->type;
    if (t == TK_DOT || t == TK_LBRACKET)
      node = parse_subscript(p, node);
    else if (t == TK_LPAREN)
      node = parse_call(p, node);
    else
      break;
  }
  return node;
}

/* A dotted name (filter and test names may be "a.b"). */
static const tpl_name *dotted_name(tpl_parser *p) {
  const tpl_token *t = tpl_p_cur(p);
  if (!tpl_p_expect(p, TK_NAME, "name")) return NULL;
  if (tpl_p_cur(p)->type != TK_DOT) return tpl_p_intern(p, t->s, t->len);
  char buf[256];
  size_t n = t->len < sizeof buf ? t->len : sizeof buf - 1;
  memcpy(buf, t->s, n);
  while (tpl_p_cur(p)->type == TK_DOT) {
    tpl_p_next(p);
    const tpl_token *part = tpl_p_cur(p);
    if (!tpl_p_expect(p, TK_NAME, "name")) return NULL;
    if (n + 1 + part->len < sizeof buf) {
      buf[n++] = '.';
      memcpy(buf + n, part->s, part->len);
      n += part->len;
    }
  }
  return tpl_p_intern(p, buf, n);
}

tpl_node *tpl_parse_filter(tpl_parser *p, tpl_node *node, bool start_inline) {
  while (tpl_p_cur(p)->type == TK_PIPE || start_inline) {
    if (!start_inline) tpl_p_next(p);
    const int line = tpl_p_cur(p)->line;
    tpl_node *f = tpl_p_node(p, N_FILTER, line);
    if (!f || !(f->name = dotted_name(p))) return NULL;
    f->a = node;
    f->id = tpl_filter_id(f->name->str->s);
    if (tpl_p_cur(p)->type == TK_LPAREN && !tpl_parse_call_args(p, f)) return NULL;
    node = f;
    start_inline = false;
  }
  return node;
}

static tpl_node *parse_test(tpl_parser *p, tpl_node *node) {
  const tpl_token *is = tpl_p_next(p);
  bool negated = false;
  if (tpl_p_is(tpl_p_cur(p), "not")) {
    tpl_p_next(p);
    negated = true;
  }
  tpl_node *n = tpl_p_node(p, N_TEST, is->line);
  if (!n || !(n->name = dotted_name(p))) return NULL;
  n->a = node;
  n->id = tpl_test_id(n->name->str->s);
  const tpl_token *t = tpl_p_cur(p);
  if (t->type == TK_LPAREN) {
    if (!tpl_parse_call_args(p, n)) return NULL;
  } else if ((t->type == TK_NAME || t->type == TK_STRING || t->type == TK_INT ||
              t->type == TK_FLOAT || t->type == TK_LBRACKET || t->type == TK_LBRACE) &&
             !tpl_p_is(t, "else") && !tpl_p_is(t, "or") && !tpl_p_is(t, "and")) {
    if (tpl_p_is(t, "is")) {
      tpl_p_fail(p, t->line, "You cannot chain multiple tests with is");
      return NULL;
    }
    tpl_node *arg = parse_postfix(p, tpl_parse_primary(p, false));
    if (!arg) return NULL;
    tpl_node **v = tpl_arena_alloc(p->t, sizeof *v);
    if (!v) return NULL;
    v[0] = arg;
    n->args.v = v;
    n->args.n = 1;
  }
  if (!negated) return n;
  tpl_node *no = tpl_p_node(p, N_NOT, is->line);
  if (no) no->a = n;
  return no;
}

static tpl_node *parse_filter_expr(tpl_parser *p, tpl_node *node) {
  while (node) {
    const tpl_token *t = tpl_p_cur(p);
    if (t->type == TK_PIPE)
      node = tpl_parse_filter(p, node, false);
    else if (tpl_p_is(t, "is"))
      node = parse_test(p, node);
    else if (t->type == TK_LPAREN)
      node = parse_call(p, node);
    else
      break;
  }
  return node;
}

tpl_node *tpl_parse_assign_target(tpl_parser *p, bool with_tuple, bool name_only,
                                  const char *const *extra_end, bool with_namespace) {
  tpl_node *target;
  if (name_only) {
    const tpl_token *t = tpl_p_cur(p);
    if (!tpl_p_expect(p, TK_NAME, "name")) return NULL;
    if (!(target = tpl_p_node(p, N_NAME, t->line))) return NULL;
    if (!(target->name = tpl_p_intern(p, t->s, t->len))) return NULL;
    return target;
  }
  target = with_tuple ? tpl_parse_tuple(p, true, true, extra_end, false, with_namespace)
                      : tpl_parse_primary(p, with_namespace);
  if (!target) return NULL;
  bool ok = target->type == N_NAME || target->type == N_NSREF;
  if (target->type == N_TUPLE) {
    ok = true;
    for (size_t i = 0; i < target->args.n; i++)
      if (target->args.v[i]->type != N_NAME && target->args.v[i]->type != N_NSREF) ok = false;
  }
  if (!ok) {
    const char *what = target->type == N_CONST   ? "const"
                       : target->type == N_TUPLE ? "tuple"
                                                 : "expression";
    tpl_p_fail(p, target->line, "can't assign to '%s'", what);
    return NULL;
  }
  return target;
}
