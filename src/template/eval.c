/* eval.c: the statement half of the template evaluator: scopes (a for
 * loop's iteration, a macro call, a set or filter block each get their
 * own, as jinja2's frames do), output, if, for (loop variables, else,
 * filters, recursion, break/continue), set, macros and call blocks, and
 * the render entry point with its limits. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/eval.h"

enum { EX_OK = 0, EX_BREAK, EX_CONTINUE, EX_ERR };

const tpl_limits tpl_default_limits = {
    .max_output = 8u << 20,
    .max_memory = 256u << 20,
    .max_steps = 20000000,
    .max_depth = 500,
    .max_calls = 100,
};

bool tpl_rt_step(tpl_rt *rt, uint64_t n) {
  rt->steps += n;
  if (rt->steps <= rt->lim.max_steps) return true;
  return tpl_err("the template ran for more than %" PRIu64 " steps (an endless loop?)",
                 rt->lim.max_steps);
}

bool tpl_undefined_error(tpl_val v) {
  if (v.o) return tpl_err("%s", tpl_s(v)->s);
  return tpl_err("undefined value");
}

/* ---- scopes ---- */

static tpl_scope *scope_new(tpl_scope *parent) {
  tpl_scope *s = tpl_obj_new(TPL_SCOPE, sizeof(tpl_scope));
  if (!s) return NULL;
  s->parent = parent;
  if (parent) tpl_retain_obj(&parent->h);
  return s;
}

static void scope_free(tpl_scope *s) {
  if (s) tpl_release_obj(&s->h);
}

/* Drops a scope's variables (a loop reuses it for the next iteration). */
static void scope_clear(tpl_scope *s) {
  for (size_t i = 0; i < s->n; i++) tpl_drop(s->vals[i]);
  s->n = 0;
}

/* Binds name to v in s (taking v). */
static bool scope_set(tpl_scope *s, const tpl_name *name, tpl_val v) {
  for (size_t i = 0; i < s->n; i++)
    if (s->names[i] == name) {
      tpl_drop(s->vals[i]);
      s->vals[i] = v;
      return true;
    }
  if (s->n == s->cap) {
    const size_t cap = s->cap ? s->cap * 2 : 4;
    if (!tpl_heap_charge(&s->h, (cap - s->cap) * (sizeof(tpl_val) + sizeof(void *)))) {
      tpl_drop(v);
      return false;
    }
    const tpl_name **nn = realloc(s->names, cap * sizeof *nn);
    if (nn) s->names = nn;
    tpl_val *nv = nn ? realloc(s->vals, cap * sizeof *nv) : NULL;
    if (nv) s->vals = nv;
    if (!nn || !nv) {
      tpl_drop(v);
      return tpl_errc(PASADA_ERR_NOMEM, "out of memory for a variable");
    }
    s->cap = cap;
  }
  s->names[s->n] = name;
  s->vals[s->n++] = v;
  return true;
}

bool tpl_lookup(tpl_rt *rt, tpl_scope *sc, const tpl_name *name, tpl_val *out) {
  for (const tpl_scope *s = sc; s; s = s->parent)
    for (size_t i = 0; i < s->n; i++)
      if (s->names[i] == name) {
        *out = tpl_ref(s->vals[i]);
        return true;
      }
  const tpl_val *v = tpl_dict_get_str(rt->vars, name->str->s, name->str->len);
  if (v) {
    *out = tpl_ref(*v);
    return true;
  }
  const int g = tpl_global_id(name->str->s, name->str->len);
  if (g >= 0) {
    tpl_func *f = tpl_func_new(TPL_F_GLOBAL, g, tpl_global_name(g));
    if (!f) return false;
    *out = tpl_obj_val(f);
    return true;
  }
  *out = tpl_undef_named("'%.100s' is undefined", name->str->s);
  return true;
}

/* ---- assignment ---- */

static bool assign(tpl_rt *rt, const tpl_node *target, tpl_scope *sc, tpl_val v) {
  switch (target->type) {
    case N_NAME:
      return scope_set(sc, target->name, tpl_ref(v));
    case N_NSREF: {
      tpl_val ns;
      if (!tpl_lookup(rt, sc, target->name, &ns)) return false;
      if (ns.kind != TPL_NS) {
        tpl_drop(ns);
        return tpl_err("cannot assign attribute on non-namespace object");
      }
      tpl_val key = tpl_obj_val(target->name2->str);
      const bool ok = tpl_dict_set(tpl_d(ns), key, tpl_ref(v));
      tpl_drop(ns);
      return ok;
    }
    case N_TUPLE: {
      tpl_list *items;
      if (!tpl_iterate(v, &items)) return false;
      bool ok = items->n == target->args.n;
      if (!ok) {
        if (items->n > target->args.n)
          pa_error(PASADA_ERR_ARG, "too many values to unpack (expected %zu)", target->args.n);
        else
          pa_error(PASADA_ERR_ARG, "not enough values to unpack (expected %zu, got %zu)",
                   target->args.n, items->n);
      }
      for (size_t i = 0; ok && i < items->n; i++)
        ok = assign(rt, target->args.v[i], sc, items->v[i]);
      tpl_release_obj(&items->h);
      return ok;
    }
    default:
      return tpl_err("cannot assign to this expression");
  }
}

/* ---- statements ---- */

static int exec_body(tpl_rt *rt, const tpl_nodes *body, tpl_scope *sc);

/* Runs body in a new scope under sc with its output captured into *out. */
static bool capture(tpl_rt *rt, const tpl_nodes *body, tpl_scope *sc, tpl_val *out) {
  tpl_buf buf = {0}, *saved = rt->out;
  tpl_scope *inner = scope_new(sc);
  if (!inner) return false;
  rt->out = &buf;
  const int r = exec_body(rt, body, inner);
  rt->out = saved;
  scope_free(inner);
  if (r == EX_ERR) {
    tpl_buf_free(&buf);
    return false;
  }
  return tpl_buf_take(&buf, false, out);
}

static bool emit(tpl_rt *rt, tpl_val v) {
  return tpl_str_of(rt->out, v);
}

static int exec_output(tpl_rt *rt, const tpl_node *n, tpl_scope *sc) {
  for (size_t i = 0; i < n->args.n; i++) {
    const tpl_node *x = n->args.v[i];
    if (x->type == N_CONST && x->val.kind == TPL_STR) {
      if (!tpl_buf_put(rt->out, tpl_s(x->val)->s, tpl_s(x->val)->len))
        return tpl_fail_at(rt, x), EX_ERR;
      continue;
    }
    tpl_val v;
    if (!tpl_eval(rt, x, sc, &v)) return EX_ERR;
    const bool ok = emit(rt, v);
    tpl_drop(v);
    if (!ok) return tpl_fail_at(rt, x), EX_ERR;
  }
  return EX_OK;
}

/* One for loop over `iterable` (evaluated), at recursion depth depth0. */
static int run_for(tpl_rt *rt, const tpl_node *n, tpl_scope *sc, tpl_val iterable, int depth0) {
  tpl_list *items;
  if (!tpl_iterate(iterable, &items)) return tpl_fail_at(rt, n->b ? n->b : n), EX_ERR;
  if (n->c) { /* the loop's filter: for x in xs if test */
    tpl_list *kept = tpl_list_new(0, TPL_L_LIST);
    bool ok = kept != NULL;
    for (size_t i = 0; ok && i < items->n; i++) {
      tpl_scope *ts = scope_new(sc);
      tpl_val keep = tpl_none();
      ok = ts && assign(rt, n->a, ts, items->v[i]) && tpl_eval(rt, n->c, ts, &keep);
      if (ok && tpl_truthy(keep)) ok = tpl_list_push(kept, tpl_ref(items->v[i]));
      tpl_drop(keep);
      scope_free(ts);
    }
    tpl_release_obj(&items->h);
    if (!ok) {
      if (kept) tpl_release_obj(&kept->h);
      return tpl_fail_at(rt, n), EX_ERR;
    }
    items = kept;
  }
  if (items->n == 0) {
    tpl_release_obj(&items->h);
    if (!n->orelse.n) return EX_OK;
    tpl_scope *es = scope_new(sc);
    if (!es) return tpl_fail_at(rt, n), EX_ERR;
    const int r = exec_body(rt, &n->orelse, es);
    scope_free(es);
    return r;
  }
  tpl_loop *loop = tpl_obj_new(TPL_LOOP, sizeof(tpl_loop));
  if (!loop) {
    tpl_release_obj(&items->h);
    return tpl_fail_at(rt, n), EX_ERR;
  }
  loop->seq = items;
  loop->depth0 = depth0;
  loop->node = n;
  loop->scope = sc;
  loop->changed = tpl_none();
  tpl_retain_obj(&sc->h);
  int r = EX_OK;
  /* each iteration starts with a fresh scope (jinja2's loop frame); one
   * that nothing kept (no macro defined in it) is emptied and reused */
  tpl_scope *is = NULL;
  for (size_t i = 0; i < items->n; i++) {
    if (!tpl_rt_step(rt, 1)) {
      r = EX_ERR;
      break;
    }
    loop->index0 = i;
    if (is && is->h.rc == 1) {
      scope_clear(is);
    } else {
      scope_free(is);
      is = scope_new(sc);
    }
    if (!is || !scope_set(is, rt->t->n_loop, tpl_ref(tpl_obj_val(loop))) ||
        !assign(rt, n->a, is, items->v[i])) {
      r = EX_ERR;
      break;
    }
    r = exec_body(rt, &n->body, is);
    if (r == EX_BREAK) {
      r = EX_OK;
      break;
    }
    if (r == EX_CONTINUE) r = EX_OK;
    if (r == EX_ERR) break;
  }
  scope_free(is);
  tpl_release_obj(&loop->h);
  if (r == EX_ERR) tpl_fail_at(rt, n);
  return r;
}

/* loop(items) of a recursive loop: the loop again at the next depth, its
 * output returned. */
static bool call_loop(tpl_rt *rt, tpl_loop *l, const tpl_args *a, tpl_val *out) {
  if (!(l->node->flag & TPL_RECURSIVE))
    return tpl_err("The loop must have the 'recursive' marker to be called recursively.");
  if (a->n_pos != 1 || a->n_kw) return tpl_err("loop() takes exactly one argument");
  if (++rt->calls > rt->lim.max_calls) {
    rt->calls--;
    return tpl_err("recursion deeper than %d calls", rt->lim.max_calls);
  }
  tpl_buf buf = {0}, *saved = rt->out;
  rt->out = &buf;
  const int r = run_for(rt, l->node, l->scope, a->pos[0], l->depth0 + 1);
  rt->out = saved;
  rt->calls--;
  if (r == EX_ERR) {
    tpl_buf_free(&buf);
    return false;
  }
  return tpl_buf_take(&buf, false, out);
}

/* Calls a macro (or a call block's caller): binds the arguments as jinja2's
 * Macro.__call__ does and renders the body. */
static bool call_macro(tpl_rt *rt, const tpl_func *f, const tpl_args *a, tpl_val *out) {
  const tpl_node *m = f->node;
  const struct pa_template *t = rt->t;
  const char *name = f->name ? f->name : "caller";
  const size_t np = m->params.n, nd = m->kwargs.n;
  if (a->n_pos > np && !(m->flag & TPL_USES_VARARGS))
    return tpl_err("macro '%s' takes not more than %zu argument(s)", name, np);
  if (++rt->calls > rt->lim.max_calls) {
    rt->calls--;
    return tpl_err("macro calls nested more than %d deep (endless recursion?)", rt->lim.max_calls);
  }
  bool ok = true;
  tpl_scope *sc = scope_new(f->closure);
  tpl_dict *kwargs = NULL;
  tpl_list *varargs = NULL;
  bool *bound = calloc(np + 1, sizeof(bool));
  if (!sc || !bound) {
    ok = false;
    if (!bound) pa_error(PASADA_ERR_NOMEM, "out of memory");
    goto done;
  }
  for (size_t i = 0; ok && i < a->n_pos; i++) {
    if (i < np) {
      ok = scope_set(sc, m->params.v[i]->name, tpl_ref(a->pos[i]));
      bound[i] = true;
    } else {
      if (!varargs && !(varargs = tpl_list_new(0, TPL_L_TUPLE)))
        ok = false;
      else
        ok = tpl_list_push(varargs, tpl_ref(a->pos[i]));
    }
  }
  tpl_val caller = tpl_undef();
  bool have_caller = false;
  for (size_t k = 0; ok && k < a->n_kw; k++) {
    const char *kw = a->kw_names[k];
    size_t i = 0;
    while (i < np && strcmp(m->params.v[i]->name->str->s, kw)) i++;
    if (i < np && !bound[i]) {
      ok = scope_set(sc, m->params.v[i]->name, tpl_ref(a->kw[k]));
      bound[i] = true;
    } else if (!strcmp(kw, "caller") && (m->flag & TPL_USES_CALLER) && !have_caller) {
      caller = a->kw[k];
      have_caller = true;
    } else if (m->flag & TPL_USES_KWARGS) {
      if (!kwargs && !(kwargs = tpl_dict_new())) ok = false;
      tpl_val key;
      ok = ok && tpl_str_val(kw, strlen(kw), &key) && tpl_dict_set(kwargs, key, tpl_ref(a->kw[k]));
    } else {
      ok = false;
      pa_error(PASADA_ERR_ARG, "macro '%s' takes no keyword argument '%s'", name, kw);
    }
  }
  /* missing parameters: their defaults (evaluated in the macro's scope, so
   * they may refer to earlier ones), else undefined */
  for (size_t i = 0; ok && i < np; i++) {
    if (bound[i]) continue;
    const tpl_name *pn = m->params.v[i]->name;
    tpl_val v;
    if (i >= np - nd)
      ok = tpl_eval(rt, m->kwargs.v[i - (np - nd)], sc, &v);
    else
      v = tpl_undef_named("parameter '%.100s' was not provided", pn->str->s);
    ok = ok && scope_set(sc, pn, v);
  }
  if (ok && (m->flag & TPL_USES_CALLER) && !have_caller) {
    bool explicit_param = false;
    for (size_t i = 0; i < np; i++) explicit_param |= m->params.v[i]->name == t->n_caller;
    if (!explicit_param) ok = scope_set(sc, t->n_caller, tpl_undef_named("No caller defined"));
  } else if (ok && have_caller) {
    ok = scope_set(sc, t->n_caller, tpl_ref(caller));
  }
  if (ok && (m->flag & TPL_USES_VARARGS)) {
    if (!varargs && !(varargs = tpl_list_new(0, TPL_L_TUPLE)))
      ok = false;
    else {
      ok = scope_set(sc, t->n_varargs, tpl_obj_val(varargs));
      varargs = NULL;
    }
  }
  if (ok && (m->flag & TPL_USES_KWARGS)) {
    if (!kwargs && !(kwargs = tpl_dict_new()))
      ok = false;
    else {
      ok = scope_set(sc, t->n_kwargs, tpl_obj_val(kwargs));
      kwargs = NULL;
    }
  }
  if (ok) {
    tpl_buf buf = {0}, *saved = rt->out;
    rt->out = &buf;
    const int r = exec_body(rt, &m->body, sc);
    rt->out = saved;
    if (r == EX_ERR) {
      tpl_buf_free(&buf);
      ok = false;
    } else {
      ok = tpl_buf_take(&buf, false, out);
    }
  }
done:
  free(bound);
  if (kwargs) tpl_release_obj(&kwargs->h);
  if (varargs) tpl_release_obj(&varargs->h);
  scope_free(sc);
  rt->calls--;
  return ok;
}

bool tpl_call_value(tpl_rt *rt, tpl_val fn, const tpl_args *a, tpl_val *out) {
  switch (fn.kind) {
    case TPL_FUNC: {
      tpl_func *f = (tpl_func *)fn.o;
      switch (f->fkind) {
        case TPL_F_MACRO:
          return call_macro(rt, f, a, out);
        case TPL_F_GLOBAL:
          return tpl_call_global(rt, f->id, a, out);
        case TPL_F_METHOD:
          return tpl_call_method(rt, f->self, f->id, a, out);
        case TPL_F_JOINER: {
          const bool first = f->count++ == 0;
          if (first) return tpl_str_val("", 0, out);
          *out = tpl_ref(f->self);
          return true;
        }
        default:
          return tpl_err("'%s' object is not callable", tpl_type_name(fn));
      }
    }
    case TPL_LOOP:
      return call_loop(rt, (tpl_loop *)fn.o, a, out);
    case TPL_UNDEF:
      return tpl_undefined_error(fn);
    default:
      return tpl_err("'%s' object is not callable", tpl_type_name(fn));
  }
}

static int exec_stmt(tpl_rt *rt, const tpl_node *n, tpl_scope *sc) {
  if (++rt->depth > rt->lim.max_depth) {
    rt->depth--;
    pa_error(PASADA_ERR_ARG, "the template nests deeper than %d levels", rt->lim.max_depth);
    return tpl_fail_at(rt, n), EX_ERR;
  }
  int r = EX_OK;
  tpl_val v = tpl_none();
  if (!tpl_rt_step(rt, 1)) {
    r = EX_ERR;
    goto out;
  }
  switch (n->type) {
    case N_OUTPUT:
      r = exec_output(rt, n, sc);
      break;
    case N_IF:
      if (!tpl_eval(rt, n->a, sc, &v))
        r = EX_ERR;
      else
        r = exec_body(rt, tpl_truthy(v) ? &n->body : &n->orelse, sc);
      break;
    case N_FOR:
      if (!tpl_eval(rt, n->b, sc, &v))
        r = EX_ERR;
      else
        r = run_for(rt, n, sc, v, 0);
      break;
    case N_SET:
      if (!tpl_eval(rt, n->b, sc, &v) || !assign(rt, n->a, sc, v)) r = EX_ERR;
      break;
    case N_SETBLOCK:
    case N_FILTERBLOCK: {
      tpl_val body;
      if (!capture(rt, &n->body, sc, &body)) {
        r = EX_ERR;
        break;
      }
      if (n->c) {
        const bool ok = tpl_apply_filters(rt, n->c, sc, body, &v);
        tpl_drop(body);
        if (!ok) {
          r = EX_ERR;
          break;
        }
      } else {
        v = body;
      }
      if (n->type == N_SETBLOCK ? !assign(rt, n->a, sc, v) : !emit(rt, v)) r = EX_ERR;
      break;
    }
    case N_MACRO: {
      tpl_func *f = tpl_func_new(TPL_F_MACRO, 0, n->name->str->s);
      if (!f) {
        r = EX_ERR;
        break;
      }
      f->node = n;
      f->closure = sc;
      tpl_retain_obj(&sc->h);
      if (!scope_set(sc, n->name, tpl_obj_val(f))) r = EX_ERR;
      break;
    }
    case N_CALLBLOCK: {
      tpl_func *caller = tpl_func_new(TPL_F_MACRO, 0, NULL);
      if (!caller) {
        r = EX_ERR;
        break;
      }
      caller->node = n;
      caller->closure = sc;
      tpl_retain_obj(&sc->h);
      const tpl_val cv = tpl_obj_val(caller);
      const tpl_node *call = n->a;
      tpl_val fn = tpl_none();
      tpl_args a = {0};
      bool ok = tpl_eval(rt, call->a, sc, &fn) && tpl_eval_args(rt, call, sc, "caller", cv, &a) &&
                tpl_call_value(rt, fn, &a, &v) && emit(rt, v);
      if (!ok) tpl_fail_at(rt, call);
      tpl_args_free(&a);
      tpl_drop(fn);
      tpl_drop(cv);
      if (!ok) r = EX_ERR;
      break;
    }
    case N_WITH: {
      tpl_scope *ws = scope_new(sc);
      bool ok = ws != NULL;
      tpl_val *vals = calloc(n->args.n + 1, sizeof(tpl_val));
      if (!vals) ok = false;
      size_t got = 0;
      for (; ok && got < n->args.n; got++) ok = tpl_eval(rt, n->args.v[got], sc, &vals[got]);
      for (size_t i = 0; ok && i < n->params.n; i++) ok = assign(rt, n->params.v[i], ws, vals[i]);
      for (size_t i = 0; vals && i < got; i++) tpl_drop(vals[i]);
      free(vals);
      r = ok ? exec_body(rt, &n->body, ws) : EX_ERR;
      scope_free(ws);
      break;
    }
    case N_SCOPE: {
      tpl_scope *inner = scope_new(sc);
      r = inner ? exec_body(rt, &n->body, inner) : EX_ERR;
      scope_free(inner);
      break;
    }
    case N_BLOCK: { /* rendered in place; unless scoped it sees only top-level variables */
      tpl_scope *inner = scope_new(n->flag & TPL_SCOPED ? sc : rt->root);
      r = inner ? exec_body(rt, &n->body, inner) : EX_ERR;
      scope_free(inner);
      break;
    }
    case N_BREAK:
      r = EX_BREAK;
      break;
    case N_CONTINUE:
      r = EX_CONTINUE;
      break;
    case N_UNSUPPORTED:
      pa_error(PASADA_ERR_ARG, "'%s' needs a template loader, which a chat template does not have",
               n->name->str->s);
      r = EX_ERR;
      break;
    default:
      pa_error(PASADA_ERR_ARG, "internal error: not a statement");
      r = EX_ERR;
      break;
  }
out:
  tpl_drop(v);
  rt->depth--;
  if (r == EX_ERR) tpl_fail_at(rt, n);
  return r;
}

static int exec_body(tpl_rt *rt, const tpl_nodes *body, tpl_scope *sc) {
  for (size_t i = 0; i < body->n; i++) {
    const int r = exec_stmt(rt, body->v[i], sc);
    if (r != EX_OK) return r;
  }
  return EX_OK;
}

/* ---- render ---- */

int tpl_render(const struct pa_template *t, const char *json, size_t len, const tpl_limits *lim,
               char **out) {
  *out = NULL;
  tpl_heap heap, *saved = tpl_heap_cur;
  tpl_heap_init(&heap, lim->max_memory, lim->max_output, false);
  tpl_heap_cur = &heap;
  tpl_rt rt = {.t = t, .lim = *lim};
  tpl_buf buf = {0};
  rt.out = &buf;
  int rc = PASADA_OK;
  tpl_val vars;
  if (!tpl_json_parse(json, len, &vars)) {
    pa_error_prefix("template variables");
    rc = PASADA_ERR_ARG;
  } else if (vars.kind != TPL_DICT) {
    tpl_drop(vars);
    rc = pa_error(PASADA_ERR_ARG, "template variables: not a JSON object");
  } else {
    rt.vars = tpl_d(vars);
    tpl_scope *root = scope_new(NULL);
    rt.root = root;
    if (!root || exec_body(&rt, &t->body, root) == EX_ERR) {
      rc = PASADA_ERR_ARG;
      if (rt.err_line) pa_error_prefix("template line %d", rt.err_line);
    }
    scope_free(root);
    tpl_drop(vars);
  }
  if (rc == PASADA_OK) {
    *out = malloc(buf.n + 1);
    if (!*out)
      rc = pa_error(PASADA_ERR_NOMEM, "out of memory for the rendered template");
    else {
      if (buf.n) memcpy(*out, buf.s, buf.n);
      (*out)[buf.n] = '\0';
    }
  }
  tpl_buf_free(&buf);
  tpl_heap_sweep(&heap);
  tpl_heap_cur = saved;
  return rc;
}
