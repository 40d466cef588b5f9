/* parse.c: the statement half of the template parser (if, for, set, macro,
 * call, filter, with, raw data and {{ }} output, break/continue, the
 * {% generation %} block), its token and node helpers, and the check
 * jinja2's compiler makes of filter and test names. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/parse.h"

/* ---- arena ---- */

typedef struct arena_block {
  struct arena_block *next;
  size_t used, cap;
  _Alignas(16) char data[];
} arena_block;

void *tpl_arena_alloc(struct pa_template *t, size_t size) {
  size = (size + 15) & ~(size_t)15;
  arena_block *b = (arena_block *)t->arena;
  if (!b || b->cap - b->used < size) {
    const size_t cap = size > 65536 ? size : 65536;
    arena_block *nb = malloc(sizeof(arena_block) + cap);
    if (!nb) return NULL;
    nb->next = b;
    nb->used = 0;
    nb->cap = cap;
    t->arena = (char *)nb;
    b = nb;
  }
  void *p = b->data + b->used;
  b->used += size;
  memset(p, 0, size);
  return p;
}

void tpl_arena_free(struct pa_template *t) {
  arena_block *b = (arena_block *)t->arena;
  while (b) {
    arena_block *next = b->next;
    free(b);
    b = next;
  }
  t->arena = NULL;
}

/* ---- helpers ---- */

static tpl_token *tok_at(tpl_parser *p, size_t i) {
  return &p->toks.t[i < p->toks.n ? i : p->toks.n - 1];
}
tpl_token *tpl_p_cur(tpl_parser *p) {
  return tok_at(p, p->i);
}
tpl_token *tpl_p_look(tpl_parser *p) {
  return tok_at(p, p->i + 1);
}
tpl_token *tpl_p_next(tpl_parser *p) {
  tpl_token *t = tok_at(p, p->i);
  if (p->i + 1 < p->toks.n) p->i++;
  return t;
}

bool tpl_p_is(const tpl_token *t, const char *name) {
  return t->type == TK_NAME && t->len == strlen(name) && !memcmp(t->s, name, t->len);
}

bool tpl_p_fail(tpl_parser *p, int line, const char *fmt, ...) {
  if (p->failed) return false;
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pa_error(PASADA_ERR_FORMAT, "template line %d: %s", line, msg);
  p->failed = true;
  return false;
}

const char *tpl_p_describe(const tpl_token *t, char *buf, size_t cap) {
  switch (t->type) {
    case TK_EOF:
      return "end of template";
    case TK_DATA:
      return "template data";
    case TK_BLOCK_END:
      return "end of statement block";
    case TK_VAR_END:
      return "end of print statement";
    case TK_BLOCK_BEGIN:
      return "begin of statement block";
    case TK_VAR_BEGIN:
      return "begin of print statement";
    default:
      break;
  }
  const size_t n = t->len < 40 ? t->len : 40;
  snprintf(buf, cap, "'%.*s'", (int)n, t->s);
  return buf;
}

bool tpl_p_expect(tpl_parser *p, uint8_t type, const char *what) {
  const tpl_token *t = tpl_p_cur(p);
  if (t->type == type) {
    tpl_p_next(p);
    return true;
  }
  char desc[64];
  if (t->type == TK_EOF)
    return tpl_p_fail(p, t->line, "unexpected end of template, expected %s", what);
  return tpl_p_fail(p, t->line, "expected token %s, got %s", what,
                    tpl_p_describe(t, desc, sizeof desc));
}

bool tpl_p_expect_name(tpl_parser *p, const char *name) {
  if (tpl_p_is(tpl_p_cur(p), name)) {
    tpl_p_next(p);
    return true;
  }
  char want[64];
  snprintf(want, sizeof want, "'%s'", name);
  return tpl_p_expect(p, 0xff, want);
}

tpl_node *tpl_p_node(tpl_parser *p, uint8_t type, int line) {
  tpl_node *n = tpl_arena_alloc(p->t, sizeof(tpl_node));
  if (!n) {
    tpl_p_fail(p, line, "out of memory for the template");
    return NULL;
  }
  n->type = type;
  n->line = line;
  n->id = -1;
  n->val = tpl_none();
  return n;
}

const tpl_name *tpl_p_intern(tpl_parser *p, const char *s, size_t len) {
  struct pa_template *t = p->t;
  for (size_t i = 0; i < t->n_names; i++)
    if (t->names[i]->str->len == len && !memcmp(t->names[i]->str->s, s, len)) return t->names[i];
  if (t->n_names == t->cap_names) {
    const size_t cap = t->cap_names ? t->cap_names * 2 : 64;
    const tpl_name **nn = realloc(t->names, cap * sizeof *nn);
    if (!nn) goto oom;
    t->names = nn;
    t->cap_names = cap;
  }
  tpl_name *name = tpl_arena_alloc(t, sizeof *name);
  if (!name || !(name->str = tpl_str_new(s, len))) goto oom;
  t->names[t->n_names++] = name;
  return name;
oom:
  tpl_p_fail(p, tpl_p_cur(p)->line, "out of memory for the template");
  return NULL;
}

bool tpl_p_push(tpl_parser *p, tpl_nodevec *v, tpl_node *n) {
  if (v->n == v->cap) {
    const size_t cap = v->cap ? v->cap * 2 : 8;
    tpl_node **nv = realloc(v->v, cap * sizeof *nv);
    if (!nv) return tpl_p_fail(p, n->line, "out of memory for the template");
    v->v = nv;
    v->cap = cap;
  }
  v->v[v->n++] = n;
  return true;
}

tpl_nodes tpl_p_finish(tpl_parser *p, tpl_nodevec *v) {
  tpl_nodes out = {NULL, 0};
  if (v->n) {
    out.v = tpl_arena_alloc(p->t, v->n * sizeof *out.v);
    if (out.v) {
      memcpy(out.v, v->v, v->n * sizeof *out.v);
      out.n = v->n;
    } else {
      tpl_p_fail(p, v->v[0]->line, "out of memory for the template");
    }
  }
  free(v->v);
  v->v = NULL;
  v->n = v->cap = 0;
  return out;
}

bool tpl_p_enter(tpl_parser *p) {
  if (++p->depth > TPL_PARSE_DEPTH) {
    p->depth--;
    return tpl_p_fail(p, tpl_p_cur(p)->line, "the template nests more than %d levels deep",
                      TPL_PARSE_DEPTH);
  }
  return true;
}

/* ---- statements ---- */

static bool subparse(tpl_parser *p, const char *const *end, tpl_nodes *out);

/* The body of a statement up to one of `end` (the end tag is the current
 * token after, unless drop). */
static bool parse_statements(tpl_parser *p, const char *const *end, bool drop, tpl_nodes *out) {
  if (tpl_p_cur(p)->type == TK_COLON) tpl_p_next(p);
  if (!tpl_p_expect(p, TK_BLOCK_END, "end of statement block")) return false;
  if (!subparse(p, end, out)) return false;
  if (tpl_p_cur(p)->type == TK_EOF) {
    char want[200] = "";
    for (const char *const *e = end; *e; e++)
      snprintf(want + strlen(want), sizeof want - strlen(want), "%s'%s'", e == end ? "" : " or ",
               *e);
    return tpl_p_fail(p, tpl_p_cur(p)->line,
                      "Unexpected end of template. Jinja was looking for the following tags: %s.",
                      want);
  }
  if (drop) tpl_p_next(p);
  return true;
}

static tpl_node *parse_set(tpl_parser *p) {
  const int line = tpl_p_next(p)->line;
  tpl_node *target = tpl_parse_assign_target(p, true, false, NULL, true);
  if (!target) return NULL;
  if (tpl_p_cur(p)->type == TK_ASSIGN) {
    tpl_p_next(p);
    tpl_node *n = tpl_p_node(p, N_SET, line);
    if (!n) return NULL;
    n->a = target;
    n->b = tpl_parse_tuple(p, false, true, NULL, false, false);
    return n->b ? n : NULL;
  }
  tpl_node *n = tpl_p_node(p, N_SETBLOCK, line);
  if (!n) return NULL;
  n->a = target;
  if (tpl_p_cur(p)->type == TK_PIPE && !(n->c = tpl_parse_filter(p, NULL, false))) return NULL;
  static const char *const end[] = {"endset", NULL};
  return parse_statements(p, end, true, &n->body) ? n : NULL;
}

static tpl_node *parse_for(tpl_parser *p) {
  const int line = tpl_p_next(p)->line;
  static const char *const in_end[] = {"in", NULL}, *const rec_end[] = {"recursive", NULL};
  tpl_node *n = tpl_p_node(p, N_FOR, line);
  if (!n || !(n->a = tpl_parse_assign_target(p, true, false, in_end, false))) return NULL;
  if (!tpl_p_expect_name(p, "in")) return NULL;
  if (!(n->b = tpl_parse_tuple(p, false, false, rec_end, false, false))) return NULL;
  if (tpl_p_is(tpl_p_cur(p), "if")) {
    tpl_p_next(p);
    if (!(n->c = tpl_parse_expression(p, true))) return NULL;
  }
  if (tpl_p_is(tpl_p_cur(p), "recursive")) {
    tpl_p_next(p);
    n->flag |= TPL_RECURSIVE;
  }
  static const char *const end[] = {"endfor", "else", NULL}, *const end2[] = {"endfor", NULL};
  p->loops++;
  bool ok = parse_statements(p, end, false, &n->body);
  p->loops--;
  if (!ok) return NULL;
  if (tpl_p_is(tpl_p_next(p), "else") && !parse_statements(p, end2, true, &n->orelse)) return NULL;
  return n;
}

static tpl_node *parse_if(tpl_parser *p) {
  tpl_node *result = tpl_p_node(p, N_IF, tpl_p_next(p)->line), *node = result;
  static const char *const end[] = {"elif", "else", "endif", NULL}, *const end2[] = {"endif", NULL};
  for (;;) {
    if (!node || !(node->a = tpl_parse_tuple(p, false, false, NULL, false, false))) return NULL;
    if (!parse_statements(p, end, false, &node->body)) return NULL;
    const tpl_token *t = tpl_p_next(p);
    if (tpl_p_is(t, "elif")) {
      tpl_node *elif = tpl_p_node(p, N_IF, tpl_p_cur(p)->line);
      tpl_node **v = tpl_arena_alloc(p->t, sizeof *v);
      if (!elif || !v) return NULL;
      v[0] = elif;
      node->orelse.v = v;
      node->orelse.n = 1;
      node = elif;
      continue;
    }
    if (tpl_p_is(t, "else") && !parse_statements(p, end2, true, &node->orelse)) return NULL;
    return result;
  }
}

static bool parse_signature(tpl_parser *p, tpl_node *n) {
  if (!tpl_p_expect(p, TK_LPAREN, "'('")) return false;
  tpl_nodevec params = {0}, defaults = {0};
  while (tpl_p_cur(p)->type != TK_RPAREN) {
    if (params.n && !tpl_p_expect(p, TK_COMMA, "','")) goto fail;
    tpl_node *arg = tpl_parse_assign_target(p, false, true, NULL, false);
    if (!arg) goto fail;
    if (tpl_p_cur(p)->type == TK_ASSIGN) {
      tpl_p_next(p);
      tpl_node *d = tpl_parse_expression(p, true);
      if (!d || !tpl_p_push(p, &defaults, d)) goto fail;
    } else if (defaults.n) {
      tpl_p_fail(p, arg->line, "non-default argument follows default argument");
      goto fail;
    }
    if (!tpl_p_push(p, &params, arg)) goto fail;
  }
  if (!tpl_p_expect(p, TK_RPAREN, "')'")) goto fail;
  n->params = tpl_p_finish(p, &params);
  n->kwargs = tpl_p_finish(p, &defaults);
  return true;
fail:
  free(params.v);
  free(defaults.v);
  return false;
}

/* Which of caller, varargs and kwargs a macro body refers to (as names). */
static uint8_t body_uses(const struct pa_template *t, const tpl_node *n) {
  if (!n) return 0;
  uint8_t f = 0;
  if (n->type == N_NAME) {
    if (n->name == t->n_caller) f |= TPL_USES_CALLER;
    if (n->name == t->n_varargs) f |= TPL_USES_VARARGS;
    if (n->name == t->n_kwargs) f |= TPL_USES_KWARGS;
  }
  const tpl_node *kids[4] = {n->a, n->b, n->c, n->d};
  for (int i = 0; i < 4; i++) f |= body_uses(t, kids[i]);
  const tpl_nodes *lists[5] = {&n->args, &n->kwargs, &n->body, &n->orelse, &n->params};
  for (int l = 0; l < 5; l++)
    for (size_t i = 0; i < lists[l]->n; i++) f |= body_uses(t, lists[l]->v[i]);
  return f;
}

static uint8_t uses_in_body(const struct pa_template *t, const tpl_node *n) {
  uint8_t f = 0;
  for (size_t i = 0; i < n->body.n; i++) f |= body_uses(t, n->body.v[i]);
  return f;
}

static tpl_node *parse_macro(tpl_parser *p) {
  tpl_node *n = tpl_p_node(p, N_MACRO, tpl_p_next(p)->line);
  if (!n) return NULL;
  tpl_node *name = tpl_parse_assign_target(p, false, true, NULL, false);
  if (!name || !parse_signature(p, n)) return NULL;
  n->name = name->name;
  static const char *const end[] = {"endmacro", NULL};
  const int loops = p->loops;
  p->loops = 0;
  const bool ok = parse_statements(p, end, true, &n->body);
  p->loops = loops;
  if (!ok) return NULL;
  n->flag = uses_in_body(p->t, n);
  return n;
}

static tpl_node *parse_call_block(tpl_parser *p) {
  tpl_node *n = tpl_p_node(p, N_CALLBLOCK, tpl_p_next(p)->line);
  if (!n) return NULL;
  if (tpl_p_cur(p)->type == TK_LPAREN && !parse_signature(p, n)) return NULL;
  tpl_node *call = tpl_parse_expression(p, true);
  if (!call) return NULL;
  if (call->type != N_CALL) return tpl_p_fail(p, n->line, "expected call"), NULL;
  n->a = call;
  static const char *const end[] = {"endcall", NULL};
  const int loops = p->loops;
  p->loops = 0;
  const bool ok = parse_statements(p, end, true, &n->body);
  p->loops = loops;
  if (!ok) return NULL;
  n->flag = uses_in_body(p->t, n);
  return n;
}

static tpl_node *parse_filter_block(tpl_parser *p) {
  tpl_node *n = tpl_p_node(p, N_FILTERBLOCK, tpl_p_next(p)->line);
  if (!n || !(n->c = tpl_parse_filter(p, NULL, true))) return NULL;
  static const char *const end[] = {"endfilter", NULL};
  return parse_statements(p, end, true, &n->body) ? n : NULL;
}

static tpl_node *parse_with(tpl_parser *p) {
  tpl_node *n = tpl_p_node(p, N_WITH, tpl_p_next(p)->line);
  if (!n) return NULL;
  tpl_nodevec targets = {0}, values = {0};
  while (tpl_p_cur(p)->type != TK_BLOCK_END) {
    if (targets.n && !tpl_p_expect(p, TK_COMMA, "','")) goto fail;
    tpl_node *t = tpl_parse_assign_target(p, true, false, NULL, false);
    if (!t || !tpl_p_push(p, &targets, t) || !tpl_p_expect(p, TK_ASSIGN, "'='")) goto fail;
    tpl_node *v = tpl_parse_expression(p, true);
    if (!v || !tpl_p_push(p, &values, v)) goto fail;
  }
  n->params = tpl_p_finish(p, &targets);
  n->args = tpl_p_finish(p, &values);
  static const char *const end[] = {"endwith", NULL};
  return parse_statements(p, end, true, &n->body) ? n : NULL;
fail:
  free(targets.v);
  free(values.v);
  return NULL;
}

static tpl_node *parse_block(tpl_parser *p) {
  tpl_node *n = tpl_p_node(p, N_BLOCK, tpl_p_next(p)->line);
  const tpl_token *name = tpl_p_cur(p);
  if (!n || !tpl_p_expect(p, TK_NAME, "name") || !(n->name = tpl_p_intern(p, name->s, name->len)))
    return NULL;
  if (tpl_p_is(tpl_p_cur(p), "scoped")) {
    tpl_p_next(p);
    n->flag |= TPL_SCOPED;
  }
  if (tpl_p_is(tpl_p_cur(p), "required")) tpl_p_next(p);
  if (tpl_p_cur(p)->type == TK_SUB)
    return tpl_p_fail(
               p, tpl_p_cur(p)->line,
               "Block names in Jinja have to be valid Python identifiers and may not contain "
               "hyphens, use an underscore instead."),
           NULL;
  static const char *const end[] = {"endblock", NULL};
  const int loops = p->loops;
  p->loops = 0;
  const bool ok = parse_statements(p, end, true, &n->body);
  p->loops = loops;
  if (!ok) return NULL;
  if (tpl_p_is(tpl_p_cur(p), n->name->str->s)) tpl_p_next(p);
  return n;
}

static tpl_node *parse_print(tpl_parser *p) {
  tpl_node *n = tpl_p_node(p, N_OUTPUT, tpl_p_next(p)->line);
  if (!n) return NULL;
  tpl_nodevec items = {0};
  while (tpl_p_cur(p)->type != TK_BLOCK_END) {
    if (items.n && !tpl_p_expect(p, TK_COMMA, "','")) goto fail;
    tpl_node *x = tpl_parse_expression(p, true);
    if (!x || !tpl_p_push(p, &items, x)) goto fail;
  }
  n->args = tpl_p_finish(p, &items);
  return n;
fail:
  free(items.v);
  return NULL;
}

/* include, import, from, extends: parsed, an error when run (no loader). */
static tpl_node *parse_unsupported(tpl_parser *p) {
  const tpl_token *t = tpl_p_next(p);
  tpl_node *n = tpl_p_node(p, N_UNSUPPORTED, t->line);
  if (!n || !(n->name = tpl_p_intern(p, t->s, t->len))) return NULL;
  while (tpl_p_cur(p)->type != TK_BLOCK_END && tpl_p_cur(p)->type != TK_EOF) tpl_p_next(p);
  return n;
}

static tpl_node *parse_statement(tpl_parser *p) {
  const tpl_token *t = tpl_p_cur(p);
  if (t->type != TK_NAME) return tpl_p_fail(p, t->line, "tag name expected"), NULL;
  if (!tpl_p_enter(p)) return NULL;
  tpl_node *n = NULL;
  if (tpl_p_is(t, "if"))
    n = parse_if(p);
  else if (tpl_p_is(t, "for"))
    n = parse_for(p);
  else if (tpl_p_is(t, "set"))
    n = parse_set(p);
  else if (tpl_p_is(t, "macro"))
    n = parse_macro(p);
  else if (tpl_p_is(t, "call"))
    n = parse_call_block(p);
  else if (tpl_p_is(t, "filter"))
    n = parse_filter_block(p);
  else if (tpl_p_is(t, "with"))
    n = parse_with(p);
  else if (tpl_p_is(t, "print"))
    n = parse_print(p);
  else if (tpl_p_is(t, "block"))
    n = parse_block(p);
  else if (tpl_p_is(t, "include") || tpl_p_is(t, "import") || tpl_p_is(t, "from") ||
           tpl_p_is(t, "extends"))
    n = parse_unsupported(p);
  else if (tpl_p_is(t, "break") || tpl_p_is(t, "continue")) {
    const bool brk = tpl_p_is(t, "break");
    tpl_p_next(p);
    if (!p->loops)
      tpl_p_fail(p, t->line, "'%s' outside a loop", brk ? "break" : "continue");
    else
      n = tpl_p_node(p, brk ? N_BREAK : N_CONTINUE, t->line);
  } else if (tpl_p_is(t, "generation")) {
    tpl_p_next(p);
    static const char *const end[] = {"endgeneration", NULL};
    n = tpl_p_node(p, N_SCOPE, t->line);
    const int loops = p->loops;
    p->loops = 0;
    if (n && !parse_statements(p, end, true, &n->body)) n = NULL;
    p->loops = loops;
  } else if (t->len > 3 && !memcmp(t->s, "end", 3)) {
    tpl_p_fail(p, t->line, "unexpected '%.*s'", (int)(t->len < 40 ? t->len : 40), t->s);
  } else {
    tpl_p_fail(p, t->line, "Encountered unknown tag '%.*s'.", (int)(t->len < 40 ? t->len : 40),
               t->s);
  }
  tpl_p_leave(p);
  return n;
}

static bool flush_output(tpl_parser *p, tpl_nodevec *data, tpl_nodevec *body) {
  if (!data->n) return true;
  tpl_node *n = tpl_p_node(p, N_OUTPUT, data->v[0]->line);
  if (!n) return false;
  n->args = tpl_p_finish(p, data);
  return tpl_p_push(p, body, n);
}

static bool subparse(tpl_parser *p, const char *const *end, tpl_nodes *out) {
  tpl_nodevec body = {0}, data = {0};
  while (tpl_p_cur(p)->type != TK_EOF && !p->failed) {
    const tpl_token *t = tpl_p_cur(p);
    if (t->type == TK_DATA) {
      tpl_node *n = tpl_p_node(p, N_CONST, t->line);
      tpl_str *s = n ? tpl_str_new(t->s, t->len) : NULL;
      if (!s) {
        tpl_p_fail(p, t->line, "out of memory for the template");
        break;
      }
      n->val = tpl_obj_val(s);
      if (!tpl_p_push(p, &data, n)) break;
      tpl_p_next(p);
    } else if (t->type == TK_VAR_BEGIN) {
      tpl_p_next(p);
      tpl_node *x = tpl_parse_tuple(p, false, true, NULL, false, false);
      if (!x || !tpl_p_push(p, &data, x) || !tpl_p_expect(p, TK_VAR_END, "end of print statement"))
        break;
    } else if (t->type == TK_BLOCK_BEGIN) {
      if (!flush_output(p, &data, &body)) break;
      tpl_p_next(p);
      if (end) {
        bool at_end = false;
        for (const char *const *e = end; *e; e++) at_end |= tpl_p_is(tpl_p_cur(p), *e);
        if (at_end) {
          *out = tpl_p_finish(p, &body);
          return !p->failed;
        }
      }
      tpl_node *n = parse_statement(p);
      if (!n || !tpl_p_push(p, &body, n) ||
          !tpl_p_expect(p, TK_BLOCK_END, "end of statement block"))
        break;
    } else {
      char desc[64];
      tpl_p_fail(p, t->line, "unexpected %s", tpl_p_describe(t, desc, sizeof desc));
      break;
    }
  }
  if (!p->failed) flush_output(p, &data, &body);
  free(data.v);
  *out = tpl_p_finish(p, &body);
  return !p->failed;
}

/* jinja2 looks filters and tests up when it compiles, except inside if
 * statements and conditional expressions, where an unknown one fails only
 * when it runs. */
static bool check_names(tpl_parser *p, const tpl_node *n, bool soft);

static bool check_list(tpl_parser *p, const tpl_nodes *l, bool soft) {
  for (size_t i = 0; i < l->n; i++)
    if (!check_names(p, l->v[i], soft)) return false;
  return true;
}

static bool check_names(tpl_parser *p, const tpl_node *n, bool soft) {
  if (!n) return true;
  switch (n->type) {
    case N_FILTER:
    case N_TEST:
      if (n->id < 0 && !soft)
        return tpl_p_fail(p, n->line, "No %s named '%s'.", n->type == N_FILTER ? "filter" : "test",
                          n->name->str->s);
      break;
    case N_IF:
    case N_CONDEXPR:
      soft = true;
      break;
    case N_FOR:
      return check_names(p, n->b, soft) && check_names(p, n->a, false) &&
             check_names(p, n->c, false) && check_list(p, &n->body, false) &&
             check_list(p, &n->orelse, false);
    case N_MACRO:
    case N_SETBLOCK:
    case N_FILTERBLOCK:
    case N_SCOPE:
    case N_BLOCK:
    case N_WITH:
      return check_names(p, n->c, false) && check_list(p, &n->kwargs, false) &&
             check_list(p, &n->body, false) && check_list(p, &n->args, soft);
    case N_CALLBLOCK:
      return check_names(p, n->a, soft) && check_list(p, &n->kwargs, false) &&
             check_list(p, &n->body, false);
    default:
      break;
  }
  const tpl_node *kids[4] = {n->a, n->b, n->c, n->d};
  for (int i = 0; i < 4; i++)
    if (!check_names(p, kids[i], soft)) return false;
  return check_list(p, &n->args, soft) && check_list(p, &n->kwargs, soft) &&
         check_list(p, &n->body, soft) && check_list(p, &n->orelse, soft);
}

int tpl_parse(struct pa_template *t, const char *src, size_t len) {
  tpl_parser p = {.t = t};
  int rc = tpl_lex(src, len, &p.toks);
  if (rc) return rc;
  if (!(t->n_loop = tpl_p_intern(&p, "loop", 4)) ||
      !(t->n_caller = tpl_p_intern(&p, "caller", 6)) ||
      !(t->n_varargs = tpl_p_intern(&p, "varargs", 7)) ||
      !(t->n_kwargs = tpl_p_intern(&p, "kwargs", 6))) {
    tpl_tokens_free(&p.toks);
    return PASADA_ERR_NOMEM;
  }
  if (subparse(&p, NULL, &t->body) && check_list(&p, &t->body, false))
    rc = PASADA_OK;
  else
    rc = PASADA_ERR_FORMAT;
  tpl_tokens_free(&p.toks);
  return rc;
}
