/* expr.c: the expression half of the template evaluator: names, literals,
 * Python's operators (+ - * / // % ** on numbers, strings and lists; ~;
 * comparisons, in; and/or/not; conditional expressions), item and
 * attribute access, slices, calls, filters and tests. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "template/eval.h"

static bool type_error2(const char *op, tpl_val a, tpl_val b) {
  if (a.kind == TPL_UNDEF) return tpl_undefined_error(a);
  if (b.kind == TPL_UNDEF) return tpl_undefined_error(b);
  return tpl_err("unsupported operand type(s) for %s: '%s' and '%s'", op, tpl_type_name(a),
                 tpl_type_name(b));
}

static bool overflow(void) {
  return tpl_err("integer overflow");
}

static int64_t as_int(tpl_val v) {
  return v.kind == TPL_INT ? v.i : (int64_t)v.b;
}
static bool is_intlike(tpl_val v) {
  return v.kind == TPL_INT || v.kind == TPL_BOOL;
}

/* s * n (str, list or tuple repeated). */
static bool repeat(tpl_rt *rt, tpl_val s, int64_t n, tpl_val *out) {
  if (n < 0) n = 0;
  if (s.kind == TPL_STR) {
    const tpl_str *x = tpl_s(s);
    if (x->len && (uint64_t)n > tpl_heap_cur->max_str / x->len)
      return tpl_err("a string would exceed %zu bytes", tpl_heap_cur->max_str);
    if (!tpl_rt_step(rt, (uint64_t)n * x->len / 4096)) return false;
    tpl_buf b = {0};
    for (int64_t i = 0; i < n; i++)
      if (!tpl_buf_put(&b, x->s, x->len)) {
        tpl_buf_free(&b);
        return false;
      }
    return tpl_buf_take(&b, tpl_is_markup(s), out);
  }
  const tpl_list *x = tpl_l(s);
  if (x->n && (uint64_t)n > tpl_heap_cur->max_str / 16 / x->n)
    return tpl_err("a list would be too long");
  if (!tpl_rt_step(rt, (uint64_t)n * x->n / 256)) return false;
  tpl_list *l = tpl_list_new((size_t)n * x->n, x->h.sub);
  if (!l) return false;
  for (int64_t i = 0; i < n; i++)
    for (size_t k = 0; k < x->n; k++) l->v[l->n++] = tpl_ref(x->v[k]);
  *out = tpl_obj_val(l);
  return true;
}

static bool is_seq(tpl_val v) {
  return v.kind == TPL_LIST && (tpl_l(v)->h.sub == TPL_L_LIST || tpl_l(v)->h.sub == TPL_L_TUPLE);
}

static bool add(tpl_rt *rt, tpl_val a, tpl_val b, tpl_val *out) {
  if (a.kind == TPL_STR && b.kind == TPL_STR) {
    tpl_buf buf = {0};
    const bool ma = tpl_is_markup(a), mb = tpl_is_markup(b);
    bool ok;
    /* Markup + str escapes the str (markupsafe) */
    if (ma && !mb)
      ok = tpl_buf_put(&buf, tpl_s(a)->s, tpl_s(a)->len) &&
           tpl_escape(&buf, tpl_s(b)->s, tpl_s(b)->len);
    else if (mb && !ma)
      ok = tpl_escape(&buf, tpl_s(a)->s, tpl_s(a)->len) &&
           tpl_buf_put(&buf, tpl_s(b)->s, tpl_s(b)->len);
    else
      ok = tpl_buf_put(&buf, tpl_s(a)->s, tpl_s(a)->len) &&
           tpl_buf_put(&buf, tpl_s(b)->s, tpl_s(b)->len);
    if (!ok) {
      tpl_buf_free(&buf);
      return false;
    }
    return tpl_buf_take(&buf, ma || mb, out);
  }
  if (is_seq(a) && is_seq(b) && tpl_l(a)->h.sub == tpl_l(b)->h.sub) {
    const tpl_list *x = tpl_l(a), *y = tpl_l(b);
    if (!tpl_rt_step(rt, (x->n + y->n) / 256)) return false;
    tpl_list *l = tpl_list_new(x->n + y->n, x->h.sub);
    if (!l) return false;
    for (size_t i = 0; i < x->n; i++) l->v[l->n++] = tpl_ref(x->v[i]);
    for (size_t i = 0; i < y->n; i++) l->v[l->n++] = tpl_ref(y->v[i]);
    *out = tpl_obj_val(l);
    return true;
  }
  if (tpl_is_number(a) && tpl_is_number(b)) {
    if (a.kind == TPL_FLOAT || b.kind == TPL_FLOAT)
      return *out = tpl_float(tpl_num(a) + tpl_num(b)), true;
    int64_t r;
    if (__builtin_add_overflow(as_int(a), as_int(b), &r)) return overflow();
    return *out = tpl_int(r), true;
  }
  if (a.kind == TPL_STR && b.kind != TPL_UNDEF)
    return tpl_err("can only concatenate str (not \"%s\") to str", tpl_type_name(b));
  if (is_seq(a) && b.kind != TPL_UNDEF)
    return tpl_err("can only concatenate %s (not \"%s\") to %s", tpl_type_name(a), tpl_type_name(b),
                   tpl_type_name(a));
  return type_error2("+", a, b);
}

/* Python's float divmod (floor division and modulo of floats). */
static void float_divmod(double vx, double wx, double *div_out, double *mod_out) {
  double mod = fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod) {
    if ((wx < 0) != (mod < 0)) {
      mod += wx;
      div -= 1.0;
    }
  } else {
    mod = copysign(0.0, wx);
  }
  double floordiv;
  if (div) {
    floordiv = floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = copysign(0.0, vx / wx);
  }
  *div_out = floordiv;
  *mod_out = mod;
}

static bool int_pow(int64_t base, int64_t exp, tpl_val *out) {
  int64_t r = 1;
  while (exp > 0) {
    if (exp & 1 && __builtin_mul_overflow(r, base, &r)) return overflow();
    exp >>= 1;
    if (exp && __builtin_mul_overflow(base, base, &base)) return overflow();
  }
  *out = tpl_int(r);
  return true;
}

bool tpl_binop(tpl_rt *rt, int op, tpl_val a, tpl_val b, tpl_val *out) {
  static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**"};
  if (op == OP_ADD) return add(rt, a, b, out);
  if (op == OP_MUL) {
    if ((a.kind == TPL_STR || is_seq(a)) && is_intlike(b)) return repeat(rt, a, as_int(b), out);
    if ((b.kind == TPL_STR || is_seq(b)) && is_intlike(a)) return repeat(rt, b, as_int(a), out);
  }
  if (op == OP_MOD && a.kind == TPL_STR) return tpl_percent_format(rt, a, b, out);
  if (!tpl_is_number(a) || !tpl_is_number(b)) return type_error2(names[op], a, b);
  const bool fl = a.kind == TPL_FLOAT || b.kind == TPL_FLOAT;
  const double x = tpl_num(a), y = tpl_num(b);
  const int64_t i = fl ? 0 : as_int(a), j = fl ? 0 : as_int(b);
  int64_t r;
  switch (op) {
    case OP_SUB:
      if (fl) return *out = tpl_float(x - y), true;
      if (__builtin_sub_overflow(i, j, &r)) return overflow();
      return *out = tpl_int(r), true;
    case OP_MUL:
      if (fl) return *out = tpl_float(x * y), true;
      if (__builtin_mul_overflow(i, j, &r)) return overflow();
      return *out = tpl_int(r), true;
    case OP_DIV:
      if (y == 0) return tpl_err("division by zero");
      return *out = tpl_float(x / y), true;
    case OP_FLOORDIV:
    case OP_MOD:
      if (y == 0)
        return tpl_err(fl ? "float division by zero" : "integer division or modulo by zero");
      if (fl) {
        double d, m;
        float_divmod(x, y, &d, &m);
        return *out = tpl_float(op == OP_MOD ? m : d), true;
      }
      if (i == INT64_MIN && j == -1) return overflow();
      {
        int64_t q = i / j, m = i % j;
        if (m != 0 && ((m < 0) != (j < 0))) {
          q--;
          m += j;
        }
        return *out = tpl_int(op == OP_MOD ? m : q), true;
      }
    case OP_POW:
      if (!fl && j >= 0) return int_pow(i, j, out);
      if (x == 0 && y < 0) return tpl_err("0.0 cannot be raised to a negative power");
      if (x < 0 && y != floor(y))
        return tpl_err("a negative number to a fractional power is complex");
      return *out = tpl_float(pow(x, y)), true;
    default:
      return tpl_err("unknown operator");
  }
}

/* item in container (Python's `in`). */
bool tpl_contains(tpl_val container, tpl_val item, bool *out) {
  switch (container.kind) {
    case TPL_UNDEF:
      *out = false;
      return true;
    case TPL_STR:
      if (item.kind != TPL_STR)
        return tpl_err("'in <string>' requires string as left operand, not %s",
                       tpl_type_name(item));
      *out = tpl_s(item)->len == 0 || tpl_memmem(tpl_s(container)->s, tpl_s(container)->len,
                                                 tpl_s(item)->s, tpl_s(item)->len) != NULL;
      return true;
    case TPL_LIST: {
      const tpl_list *l = tpl_l(container);
      *out = false;
      for (size_t i = 0; i < l->n && !*out; i++) *out = tpl_eq(l->v[i], item);
      return true;
    }
    case TPL_DICT: {
      bool err;
      *out = tpl_dict_get(tpl_d(container), item, &err) != NULL;
      return !err;
    }
    default:
      return tpl_err("argument of type '%s' is not iterable", tpl_type_name(container));
  }
}

bool tpl_compare_op(int op, tpl_val a, tpl_val b, bool *out) {
  int c;
  switch (op) {
    case CMP_EQ:
      *out = tpl_eq(a, b);
      return true;
    case CMP_NE:
      *out = !tpl_eq(a, b);
      return true;
    case CMP_IN:
      return tpl_contains(b, a, out);
    case CMP_NOTIN:
      if (!tpl_contains(b, a, out)) return false;
      *out = !*out;
      return true;
    default:
      break;
  }
  if (a.kind == TPL_UNDEF) return tpl_undefined_error(a);
  if (b.kind == TPL_UNDEF) return tpl_undefined_error(b);
  if (!tpl_compare(a, b, &c)) {
    static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};
    return tpl_err("'%s' not supported between instances of '%s' and '%s'", ops[op],
                   tpl_type_name(a), tpl_type_name(b));
  }
  /* NaN compares false both ways: tpl_compare gives 0, == must not hold */
  const bool nan = (a.kind == TPL_FLOAT && isnan(a.f)) || (b.kind == TPL_FLOAT && isnan(b.f));
  switch (op) {
    case CMP_LT:
      *out = c < 0;
      break;
    case CMP_LTEQ:
      *out = c <= 0 && !nan;
      break;
    case CMP_GT:
      *out = c > 0;
      break;
    default:
      *out = c >= 0 && !nan;
      break;
  }
  return true;
}

/* Python's slice index resolution (PySlice_AdjustIndices). */
static bool slice_of(tpl_rt *rt, tpl_val obj, const tpl_node *sl, tpl_scope *sc, tpl_val *out) {
  tpl_val parts[3] = {tpl_none(), tpl_none(), tpl_none()};
  const tpl_node *nodes[3] = {sl->a, sl->b, sl->c};
  bool ok = true, bad = false;
  for (int k = 0; k < 3 && ok; k++)
    if (nodes[k]) {
      ok = tpl_eval(rt, nodes[k], sc, &parts[k]);
      if (ok && parts[k].kind != TPL_NONE && !is_intlike(parts[k])) bad = true;
    }
  if (!ok) goto done;
  if (obj.kind == TPL_UNDEF) {
    ok = tpl_undefined_error(obj);
    goto done;
  }
  const bool sliceable = obj.kind == TPL_STR || (obj.kind == TPL_LIST &&
                                                 (is_seq(obj) || tpl_l(obj)->h.sub == TPL_L_RANGE));
  /* jinja2 slices with Python's own [a:b:c], not its getitem: errors stay */
  if (!sliceable) {
    ok = obj.kind == TPL_DICT ? tpl_err("unhashable type: 'slice'")
                              : tpl_err("'%s' object is not subscriptable", tpl_type_name(obj));
    goto done;
  }
  if (bad) {
    ok = tpl_err("slice indices must be integers or None or have an __index__ method");
    goto done;
  }
  const int64_t step = parts[2].kind == TPL_NONE ? 1 : as_int(parts[2]);
  if (step == 0) {
    ok = tpl_err("slice step cannot be zero");
    goto done;
  }
  int64_t len;
  tpl_len(obj, &len);
  const int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? len : len - 1;
  int64_t start, stop;
  if (parts[0].kind == TPL_NONE)
    start = step > 0 ? lower : upper;
  else {
    start = as_int(parts[0]);
    if (start < 0) start += len;
    start = start < lower ? lower : start > upper ? upper : start;
  }
  if (parts[1].kind == TPL_NONE)
    stop = step > 0 ? upper : lower;
  else {
    stop = as_int(parts[1]);
    if (stop < 0) stop += len;
    stop = stop < lower ? lower : stop > upper ? upper : stop;
  }
  int64_t count = 0;
  if (step > 0 && start < stop) count = (stop - start - 1) / step + 1;
  if (step < 0 && stop < start) count = (start - stop - 1) / (-step) + 1;
  if (!tpl_rt_step(rt, (uint64_t)count / 256)) {
    ok = false;
    goto done;
  }
  if (obj.kind == TPL_STR) {
    const tpl_str *s = tpl_s(obj);
    tpl_buf b = {0};
    if (step == 1) {
      const size_t from = tpl_utf8_offset(s, (size_t)start);
      const size_t to = count ? tpl_utf8_offset(s, (size_t)stop) : from;
      ok = tpl_buf_put(&b, s->s + from, to - from);
    } else {
      size_t *offs = malloc(((size_t)len + 1) * sizeof(size_t));
      if (!offs) {
        ok = tpl_errc(PASADA_ERR_NOMEM, "out of memory");
        goto done;
      }
      size_t o = 0;
      for (int64_t i = 0; i <= len; i++) {
        offs[i] = o;
        if (i < len) tpl_utf8_next(s->s, s->len, &o);
      }
      for (int64_t i = 0, at = start; ok && i < count; i++, at += step)
        ok = tpl_buf_put(&b, s->s + offs[at], offs[at + 1] - offs[at]);
      free(offs);
    }
    if (!ok)
      tpl_buf_free(&b);
    else
      ok = tpl_buf_take(&b, tpl_is_markup(obj), out);
    goto done;
  }
  const tpl_list *l = tpl_l(obj);
  tpl_list *r = tpl_list_new((size_t)count, l->h.sub == TPL_L_TUPLE ? TPL_L_TUPLE : TPL_L_LIST);
  if (!r) {
    ok = false;
    goto done;
  }
  for (int64_t i = 0, at = start; i < count; i++, at += step) r->v[r->n++] = tpl_ref(l->v[at]);
  *out = tpl_obj_val(r);
done:
  for (int k = 0; k < 3; k++) tpl_drop(parts[k]);
  return ok;
}

void tpl_args_free(tpl_args *a) {
  for (size_t i = 0; i < a->n_pos; i++) tpl_drop(a->pos[i]);
  for (size_t i = 0; i < a->n_kw; i++) tpl_drop(a->kw[i]);
  free(a->pos);
  free(a->kw);
  free((void *)a->kw_names);
  if (a->hold) tpl_release_obj(a->hold);
  memset(a, 0, sizeof *a);
}

static bool push_pos(tpl_args *a, size_t *cap, tpl_val v) {
  if (a->n_pos == *cap) {
    const size_t c = *cap ? *cap * 2 : 8;
    tpl_val *np = realloc(a->pos, c * sizeof *np);
    if (!np) {
      tpl_drop(v);
      return tpl_errc(PASADA_ERR_NOMEM, "out of memory");
    }
    a->pos = np;
    *cap = c;
  }
  a->pos[a->n_pos++] = v;
  return true;
}

static bool push_kw(tpl_args *a, size_t *cap, const char *name, tpl_val v) {
  for (size_t i = 0; i < a->n_kw; i++)
    if (!strcmp(a->kw_names[i], name)) {
      tpl_drop(v);
      return tpl_err("got multiple values for keyword argument '%s'", name);
    }
  if (a->n_kw == *cap) {
    const size_t c = *cap ? *cap * 2 : 8;
    tpl_val *nk = realloc(a->kw, c * sizeof *nk);
    if (nk) a->kw = nk;
    const char **nn = nk ? realloc((void *)a->kw_names, c * sizeof *nn) : NULL;
    if (nn) a->kw_names = nn;
    if (!nk || !nn) {
      tpl_drop(v);
      return tpl_errc(PASADA_ERR_NOMEM, "out of memory");
    }
    *cap = c;
  }
  a->kw_names[a->n_kw] = name;
  a->kw[a->n_kw++] = v;
  return true;
}

bool tpl_eval_args(tpl_rt *rt, const tpl_node *n, tpl_scope *sc, const char *extra_kw,
                   tpl_val extra_val, tpl_args *a) {
  memset(a, 0, sizeof *a);
  size_t cp = 0, ck = 0;
  for (size_t i = 0; i < n->args.n; i++) {
    tpl_val v;
    if (!tpl_eval(rt, n->args.v[i], sc, &v) || !push_pos(a, &cp, v)) goto fail;
  }
  if (n->c) { /* *args */
    tpl_val v;
    tpl_list *items;
    if (!tpl_eval(rt, n->c, sc, &v)) goto fail;
    const bool ok = tpl_iterate(v, &items);
    tpl_drop(v);
    if (!ok) goto fail;
    for (size_t i = 0; i < items->n; i++)
      if (!push_pos(a, &cp, tpl_ref(items->v[i]))) {
        tpl_release_obj(&items->h);
        goto fail;
      }
    tpl_release_obj(&items->h);
  }
  for (size_t i = 0; i < n->kwargs.n; i++) {
    tpl_val v;
    if (!tpl_eval(rt, n->kwargs.v[i], sc, &v) || !push_kw(a, &ck, n->kwnames[i]->str->s, v))
      goto fail;
  }
  if (n->d) { /* **kwargs: the keys are the dict's strings, alive while it is */
    tpl_val v;
    if (!tpl_eval(rt, n->d, sc, &v)) goto fail;
    if (v.kind != TPL_DICT) {
      tpl_drop(v);
      pa_error(PASADA_ERR_ARG, "argument after ** must be a mapping, not %s", tpl_type_name(v));
      goto fail;
    }
    const tpl_dict *d = tpl_d(v);
    bool ok = true;
    for (size_t i = 0; ok && i < d->n; i++) {
      if (d->k[i].kind != TPL_STR) {
        pa_error(PASADA_ERR_ARG, "keywords must be strings");
        ok = false;
      } else {
        ok = push_kw(a, &ck, tpl_s(d->k[i])->s, tpl_ref(d->v[i]));
      }
    }
    a->hold = v.o; /* keeps the key strings alive */
    if (!ok) goto fail;
  }
  if (extra_kw && !push_kw(a, &ck, extra_kw, tpl_ref(extra_val))) goto fail;
  return true;
fail:
  tpl_args_free(a);
  return false;
}

static bool call_filter_node(tpl_rt *rt, const tpl_node *n, tpl_scope *sc, tpl_val in,
                             tpl_val *out) {
  tpl_args a;
  if (!tpl_eval_args(rt, n, sc, NULL, tpl_none(), &a)) return false;
  const bool ok = tpl_call_filter(rt, n->id, n->name->str->s, in, &a, out);
  tpl_args_free(&a);
  return ok;
}

bool tpl_apply_filters(tpl_rt *rt, const tpl_node *chain, tpl_scope *sc, tpl_val in, tpl_val *out) {
  tpl_val v;
  if (chain->a) {
    if (!tpl_apply_filters(rt, chain->a, sc, in, &v)) return false;
  } else {
    v = tpl_ref(in);
  }
  const bool ok = call_filter_node(rt, chain, sc, v, out);
  tpl_drop(v);
  return ok ? true : tpl_fail_at(rt, chain);
}

/* A method call obj.name(args) without building the bound method. */
static bool call_attr(tpl_rt *rt, const tpl_node *n, tpl_scope *sc, tpl_val *out) {
  const tpl_node *ga = n->a;
  tpl_val obj, fn = tpl_none();
  if (!tpl_eval(rt, ga->a, sc, &obj)) return false;
  bool ok;
  tpl_args a = {0};
  bool unsafe = false;
  const int id = obj.kind == TPL_UNDEF
                     ? -1
                     : tpl_method_id(obj, ga->name->str->s, ga->name->str->len, &unsafe);
  if (id >= 0 && !unsafe) {
    ok = tpl_eval_args(rt, n, sc, NULL, tpl_none(), &a) && tpl_call_method(rt, obj, id, &a, out);
  } else {
    ok = tpl_getattr(rt, obj, ga->name->str->s, ga->name->str->len, &fn);
    if (!ok) tpl_fail_at(rt, ga);
    ok = ok && tpl_eval_args(rt, n, sc, NULL, tpl_none(), &a) && tpl_call_value(rt, fn, &a, out);
  }
  tpl_args_free(&a);
  tpl_drop(fn);
  tpl_drop(obj);
  return ok;
}

static bool eval_inner(tpl_rt *rt, const tpl_node *n, tpl_scope *sc, tpl_val *out) {
  tpl_val a = tpl_none(), b = tpl_none();
  bool ok = true;
  switch (n->type) {
    case N_CONST:
      *out = tpl_ref(n->val);
      return true;
    case N_NAME:
      return tpl_lookup(rt, sc, n->name, out);
    case N_GETATTR:
      if (!tpl_eval(rt, n->a, sc, &a)) return false;
      ok = tpl_getattr(rt, a, n->name->str->s, n->name->str->len, out);
      break;
    case N_GETITEM:
      if (!tpl_eval(rt, n->a, sc, &a)) return false;
      if (n->b->type == N_SLICE)
        ok = slice_of(rt, a, n->b, sc, out);
      else
        ok = tpl_eval(rt, n->b, sc, &b) && tpl_getitem(rt, a, b, out);
      break;
    case N_CALL: {
      if (n->a->type == N_GETATTR) return call_attr(rt, n, sc, out);
      tpl_args args = {0};
      ok = tpl_eval(rt, n->a, sc, &a) && tpl_eval_args(rt, n, sc, NULL, tpl_none(), &args) &&
           tpl_call_value(rt, a, &args, out);
      tpl_args_free(&args);
      break;
    }
    case N_FILTER:
      if (!tpl_eval(rt, n->a, sc, &a)) return false;
      ok = call_filter_node(rt, n, sc, a, out);
      break;
    case N_TEST: {
      if (!tpl_eval(rt, n->a, sc, &a)) return false;
      tpl_args args;
      bool r = false;
      ok = tpl_eval_args(rt, n, sc, NULL, tpl_none(), &args);
      ok = ok && tpl_call_test(rt, n->id, n->name->str->s, a, &args, &r);
      if (ok) *out = tpl_bool(r);
      tpl_args_free(&args);
      break;
    }
    case N_NOT:
      if (!tpl_eval(rt, n->a, sc, &a)) return false;
      *out = tpl_bool(!tpl_truthy(a));
      break;
    case N_NEG:
    case N_POS:
      if (!tpl_eval(rt, n->a, sc, &a)) return false;
      if (a.kind == TPL_FLOAT)
        *out = tpl_float(n->type == N_NEG ? -a.f : a.f);
      else if (is_intlike(a)) {
        if (n->type == N_NEG && as_int(a) == INT64_MIN)
          ok = overflow();
        else
          *out = tpl_int(n->type == N_NEG ? -as_int(a) : as_int(a));
      } else if (a.kind == TPL_UNDEF)
        ok = tpl_undefined_error(a);
      else
        ok = tpl_err("bad operand type for unary %c: '%s'", n->type == N_NEG ? '-' : '+',
                     tpl_type_name(a));
      break;
    case N_BINOP:
      ok = tpl_eval(rt, n->a, sc, &a) && tpl_eval(rt, n->b, sc, &b) &&
           tpl_binop(rt, n->op, a, b, out);
      break;
    case N_CONCAT: {
      tpl_buf buf = {0};
      for (size_t i = 0; ok && i < n->args.n; i++) {
        tpl_val v;
        ok = tpl_eval(rt, n->args.v[i], sc, &v);
        if (ok) {
          ok = tpl_str_of(&buf, v);
          tpl_drop(v);
        }
      }
      if (!ok)
        tpl_buf_free(&buf);
      else
        ok = tpl_buf_take(&buf, false, out);
      break;
    }
    case N_AND:
    case N_OR:
      if (!tpl_eval(rt, n->a, sc, &a)) return false;
      if (tpl_truthy(a) == (n->type == N_OR)) {
        *out = a;
        return true;
      }
      tpl_drop(a);
      return tpl_eval(rt, n->b, sc, out);
    case N_COMPARE: {
      if (!tpl_eval(rt, n->a, sc, &a)) return false;
      bool r = true;
      for (size_t i = 0; ok && r && i < n->args.n; i++) {
        ok = tpl_eval(rt, n->args.v[i], sc, &b) && tpl_compare_op(n->ops[i], a, b, &r);
        tpl_drop(a);
        a = b;
        b = tpl_none();
      }
      if (ok) *out = tpl_bool(r);
      break;
    }
    case N_CONDEXPR:
      if (!tpl_eval(rt, n->a, sc, &a)) return false;
      if (tpl_truthy(a))
        ok = tpl_eval(rt, n->b, sc, out);
      else if (n->c)
        ok = tpl_eval(rt, n->c, sc, out);
      else
        *out = tpl_undef_named(
            "the inline if-expression on line %d evaluated to false and no else section "
            "was defined.",
            n->line);
      break;
    case N_LIST:
    case N_TUPLE: {
      tpl_list *l = tpl_list_new(n->args.n, n->type == N_LIST ? TPL_L_LIST : TPL_L_TUPLE);
      if (!l) return false;
      for (size_t i = 0; ok && i < n->args.n; i++) {
        tpl_val v;
        ok = tpl_eval(rt, n->args.v[i], sc, &v);
        if (ok) l->v[l->n++] = v;
      }
      if (ok)
        *out = tpl_obj_val(l);
      else
        tpl_release_obj(&l->h);
      break;
    }
    case N_DICT: {
      tpl_dict *d = tpl_dict_new();
      if (!d) return false;
      for (size_t i = 0; ok && i < n->args.n; i++) {
        tpl_val k, v;
        ok = tpl_eval(rt, n->args.v[i], sc, &k);
        if (ok && !(ok = tpl_eval(rt, n->kwargs.v[i], sc, &v))) tpl_drop(k);
        if (ok) ok = tpl_dict_set(d, k, v);
      }
      if (ok)
        *out = tpl_obj_val(d);
      else
        tpl_release_obj(&d->h);
      break;
    }
    default:
      ok = tpl_err("internal error: not an expression");
  }
  tpl_drop(a);
  tpl_drop(b);
  return ok;
}

bool tpl_eval(tpl_rt *rt, const tpl_node *n, tpl_scope *sc, tpl_val *out) {
  if (++rt->depth > rt->lim.max_depth) {
    rt->depth--;
    pa_error(PASADA_ERR_ARG, "the template nests deeper than %d levels", rt->lim.max_depth);
    return tpl_fail_at(rt, n);
  }
  bool ok = tpl_rt_step(rt, 1) && eval_inner(rt, n, sc, out);
  rt->depth--;
  return ok ? true : tpl_fail_at(rt, n);
}
