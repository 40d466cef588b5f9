/* methods.c: attribute and item access as jinja2's immutable sandbox does
 * it (a method first, then the item; a method that changes a list or dict
 * is an unsafe undefined), the methods of dicts, lists and loops, and the
 * globals: range, namespace, dict, joiner, cycler, raise_exception and
 * strftime_now. String methods are in strmeth.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/env.h"
#include "template/eval.h"

#define TPL_MAX_RANGE 100000 /* jinja2's sandbox MAX_RANGE */

/* Method ids: string methods first (strmeth.c handles ids < M_STR_END). */
enum {
  M_STR_END = 100,
  M_GET = M_STR_END,
  M_ITEMS,
  M_KEYS,
  M_VALUES,
  M_DCOPY,
  M_FROMKEYS,
  M_LCOUNT,
  M_LINDEX,
  M_LCOPY,
  M_CYCLE,
  M_CHANGED,
  M_CNEXT,
  M_CRESET,
  M_UNSAFE, /* exists but the sandbox forbids it */
};

typedef struct {
  const char *name;
  int id;
} method_entry;

static const method_entry DICT_METHODS[] = {
    {"get", M_GET},        {"items", M_ITEMS},       {"keys", M_KEYS},     {"values", M_VALUES},
    {"copy", M_DCOPY},     {"fromkeys", M_FROMKEYS}, {"clear", M_UNSAFE},  {"pop", M_UNSAFE},
    {"popitem", M_UNSAFE}, {"setdefault", M_UNSAFE}, {"update", M_UNSAFE}, {NULL, 0}};
static const method_entry LIST_METHODS[] = {
    {"count", M_LCOUNT},  {"index", M_LINDEX},   {"copy", M_LCOPY},    {"append", M_UNSAFE},
    {"clear", M_UNSAFE},  {"extend", M_UNSAFE},  {"insert", M_UNSAFE}, {"pop", M_UNSAFE},
    {"remove", M_UNSAFE}, {"reverse", M_UNSAFE}, {"sort", M_UNSAFE},   {NULL, 0}};
static const method_entry TUPLE_METHODS[] = {{"count", M_LCOUNT}, {"index", M_LINDEX}, {NULL, 0}};
static const method_entry LOOP_METHODS[] = {{"cycle", M_CYCLE}, {"changed", M_CHANGED}, {NULL, 0}};
static const method_entry CYCLER_METHODS[] = {{"next", M_CNEXT}, {"reset", M_CRESET}, {NULL, 0}};

int tpl_str_method_id(const char *name, size_t len);
const char *tpl_str_method_name(int id);
bool tpl_str_method(tpl_rt *rt, tpl_val self, int id, const tpl_args *a, tpl_val *out);

static int find_method(const method_entry *t, const char *name, size_t len) {
  for (; t->name; t++)
    if (strlen(t->name) == len && !memcmp(t->name, name, len)) return t->id;
  return -1;
}

int tpl_method_id(tpl_val obj, const char *name, size_t len, bool *unsafe) {
  int id = -1;
  *unsafe = false;
  switch (obj.kind) {
    case TPL_STR:
      id = tpl_str_method_id(name, len);
      break;
    case TPL_DICT:
      id = find_method(DICT_METHODS, name, len);
      break;
    case TPL_LIST:
      if (tpl_l(obj)->h.sub == TPL_L_LIST)
        id = find_method(LIST_METHODS, name, len);
      else if (tpl_l(obj)->h.sub == TPL_L_TUPLE || tpl_l(obj)->h.sub == TPL_L_RANGE)
        id = find_method(TUPLE_METHODS, name, len);
      break;
    case TPL_LOOP:
      id = find_method(LOOP_METHODS, name, len);
      break;
    case TPL_FUNC:
      if (((tpl_func *)obj.o)->fkind == TPL_F_CYCLER) id = find_method(CYCLER_METHODS, name, len);
      break;
    default:
      break;
  }
  if (id == M_UNSAFE) *unsafe = true;
  return id;
}

const char *tpl_method_name(int id) {
  if (id < M_STR_END) return tpl_str_method_name(id);
  const method_entry *tables[] = {DICT_METHODS, LIST_METHODS, LOOP_METHODS, CYCLER_METHODS};
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
    for (const method_entry *e = tables[t]; e->name; e++)
      if (e->id == id) return e->name;
  return "method";
}

/* ---- attributes and items ---- */

/* The attribute lookup alone (no item): *found false when there is none. */
static bool attr_only(tpl_rt *rt, tpl_val obj, const char *name, size_t len, tpl_val *out,
                      bool *found) {
  *found = true;
  if (len >= 4 && name[0] == '_' && name[1] == '_' && name[len - 2] == '_' &&
      name[len - 1] == '_') {
    *out = tpl_undef_unsafe(name, tpl_type_name(obj));
    return true;
  }
  bool unsafe;
  const int id = tpl_method_id(obj, name, len, &unsafe);
  if (id >= 0) {
    if (unsafe) {
      *out = tpl_undef_unsafe(name, tpl_type_name(obj));
      return true;
    }
    tpl_func *f = tpl_func_new(TPL_F_METHOD, id, tpl_method_name(id));
    if (!f) return false;
    f->self = tpl_ref(obj);
    *out = tpl_obj_val(f);
    return true;
  }
  switch (obj.kind) {
    case TPL_LIST: /* groupby's named tuples */
      if (tpl_l(obj)->h.flags & TPL_GROUP) {
        if (len == 7 && !memcmp(name, "grouper", 7)) return *out = tpl_ref(tpl_l(obj)->v[0]), true;
        if (len == 4 && !memcmp(name, "list", 4)) return *out = tpl_ref(tpl_l(obj)->v[1]), true;
      }
      break;
    case TPL_LOOP:
      return tpl_loop_attr(rt, (tpl_loop *)obj.o, name, len, out, found);
    case TPL_NS: {
      const tpl_val *v = tpl_dict_get_str(tpl_d(obj), name, len);
      if (v) {
        *out = tpl_ref(*v);
        return true;
      }
      break;
    }
    case TPL_FUNC: {
      const tpl_func *f = (const tpl_func *)obj.o;
      if (f->fkind == TPL_F_MACRO && len == 4 && !memcmp(name, "name", 4) && f->name)
        return tpl_str_val(f->name, strlen(f->name), out);
      if (f->fkind == TPL_F_CYCLER && len == 7 && !memcmp(name, "current", 7)) {
        const tpl_list *items = tpl_l(f->self);
        *out = tpl_ref(items->v[f->count % (int64_t)items->n]);
        return true;
      }
      break;
    }
    case TPL_BOOL:
    case TPL_INT:
    case TPL_FLOAT:
      if ((len == 4 && !memcmp(name, "real", 4)) ||
          (len == 9 && !memcmp(name, "numerator", 9) && obj.kind != TPL_FLOAT)) {
        *out = obj.kind == TPL_BOOL ? tpl_int(obj.b) : obj;
        return true;
      }
      if (len == 4 && !memcmp(name, "imag", 4)) {
        *out = obj.kind == TPL_FLOAT ? tpl_float(0) : tpl_int(0);
        return true;
      }
      if (len == 11 && !memcmp(name, "denominator", 11) && obj.kind != TPL_FLOAT) {
        *out = tpl_int(1);
        return true;
      }
      break;
    default:
      break;
  }
  *found = false;
  return true;
}

static tpl_val missing_attr(tpl_val obj, const char *name, size_t len) {
  if (obj.kind == TPL_NONE)
    return tpl_undef_named("'None' has no attribute '%.*s'", (int)(len < 100 ? len : 100), name);
  return tpl_undef_named("'%s object' has no attribute '%.*s'", tpl_type_name(obj),
                         (int)(len < 100 ? len : 100), name);
}

bool tpl_getattr(tpl_rt *rt, tpl_val obj, const char *name, size_t len, tpl_val *out) {
  if (obj.kind == TPL_UNDEF) return tpl_undefined_error(obj);
  bool found;
  if (!attr_only(rt, obj, name, len, out, &found)) return false;
  if (found) return true;
  if (obj.kind == TPL_DICT) {
    const tpl_val *v = tpl_dict_get_str(tpl_d(obj), name, len);
    if (v) {
      *out = tpl_ref(*v);
      return true;
    }
  }
  *out = missing_attr(obj, name, len);
  return true;
}

bool tpl_getitem(tpl_rt *rt, tpl_val obj, tpl_val key, tpl_val *out) {
  if (obj.kind == TPL_UNDEF) return tpl_undefined_error(obj);
  const bool intkey = key.kind == TPL_INT || key.kind == TPL_BOOL;
  const int64_t k = key.kind == TPL_INT ? key.i : key.kind == TPL_BOOL ? key.b : 0;
  switch (obj.kind) {
    case TPL_DICT: {
      bool err;
      const tpl_val *v = tpl_dict_get(tpl_d(obj), key, &err);
      if (v) {
        *out = tpl_ref(*v);
        return true;
      }
      break;
    }
    case TPL_LIST: {
      const tpl_list *l = tpl_l(obj);
      const int sub = l->h.sub;
      if (intkey && (sub == TPL_L_LIST || sub == TPL_L_TUPLE || sub == TPL_L_RANGE)) {
        const int64_t i = k < 0 ? k + (int64_t)l->n : k;
        if (i >= 0 && i < (int64_t)l->n) {
          *out = tpl_ref(l->v[i]);
          return true;
        }
      }
      break;
    }
    case TPL_STR: {
      const tpl_str *s = tpl_s(obj);
      if (intkey) {
        const int64_t i = k < 0 ? k + (int64_t)s->ncp : k;
        if (i >= 0 && i < (int64_t)s->ncp) {
          size_t from = tpl_utf8_offset(s, (size_t)i), to = from;
          tpl_utf8_next(s->s, s->len, &to);
          tpl_str *c = tpl_str_markup(s->s + from, to - from, tpl_is_markup(obj));
          if (!c) return false;
          *out = tpl_obj_val(c);
          return true;
        }
      }
      break;
    }
    default:
      break;
  }
  if (key.kind == TPL_STR) {
    bool found;
    if (!attr_only(rt, obj, tpl_s(key)->s, tpl_s(key)->len, out, &found)) return false;
    if (found) return true;
  }
  if (key.kind == TPL_STR)
    *out = missing_attr(obj, tpl_s(key)->s, tpl_s(key)->len);
  else if (obj.kind == TPL_NONE)
    *out = tpl_undef_named("None has no element");
  else
    *out = tpl_undef_named("%s object has no element", tpl_type_name(obj));
  return true;
}

/* ---- argument binding ---- */

bool tpl_bind(const char *fn, const tpl_args *a, const char *const *names, size_t n,
              size_t required, tpl_val *out) {
  const tpl_val not_given = {.kind = TPL_UNDEF, .sub = 0xff};
  for (size_t i = 0; i < n; i++) out[i] = not_given;
  if (a->n_pos > n) return tpl_err("%s() takes at most %zu arguments (%zu given)", fn, n, a->n_pos);
  for (size_t i = 0; i < a->n_pos; i++) out[i] = a->pos[i];
  for (size_t k = 0; k < a->n_kw; k++) {
    size_t i = 0;
    while (i < n && strcmp(names[i], a->kw_names[k])) i++;
    if (i == n) return tpl_err("%s() got an unexpected keyword argument '%s'", fn, a->kw_names[k]);
    if (tpl_given(out[i]))
      return tpl_err("%s() got multiple values for argument '%s'", fn, names[i]);
    out[i] = a->kw[k];
  }
  for (size_t i = 0; i < required; i++)
    if (!tpl_given(out[i])) return tpl_err("%s() missing required argument '%s'", fn, names[i]);
  return true;
}

static bool want_int(const char *what, tpl_val v, int64_t *out) {
  if (v.kind == TPL_INT || v.kind == TPL_BOOL) {
    *out = v.kind == TPL_INT ? v.i : v.b;
    return true;
  }
  if (v.kind == TPL_UNDEF) return tpl_undefined_error(v);
  return tpl_err("%s: '%s' object cannot be interpreted as an integer", what, tpl_type_name(v));
}

/* ---- dict, list, loop and cycler methods ---- */

static bool view(const tpl_dict *d, tpl_list_kind kind, tpl_val *out) {
  tpl_list *l = tpl_list_new(d->n, kind);
  if (!l) return false;
  for (size_t i = 0; i < d->n; i++) {
    if (kind == TPL_L_KEYS)
      l->v[l->n++] = tpl_ref(d->k[i]);
    else if (kind == TPL_L_VALUES)
      l->v[l->n++] = tpl_ref(d->v[i]);
    else {
      tpl_list *pair = tpl_list_new(2, TPL_L_TUPLE);
      if (!pair) {
        tpl_release_obj(&l->h);
        return false;
      }
      pair->v[0] = tpl_ref(d->k[i]);
      pair->v[1] = tpl_ref(d->v[i]);
      pair->n = 2;
      l->v[l->n++] = tpl_obj_val(pair);
    }
  }
  *out = tpl_obj_val(l);
  return true;
}

static bool dict_method(tpl_rt *rt, tpl_val self, int id, const tpl_args *a, tpl_val *out) {
  const tpl_dict *d = tpl_d(self);
  tpl_val p[2];
  switch (id) {
    case M_GET: {
      static const char *const names[] = {"key", "default"};
      if (a->n_kw) return tpl_err("get() takes no keyword arguments");
      if (!tpl_bind("get", a, names, 2, 1, p)) return false;
      bool err;
      const tpl_val *v = tpl_dict_get(d, p[0], &err);
      if (err) return false;
      *out = v ? tpl_ref(*v) : tpl_given(p[1]) ? tpl_ref(p[1]) : tpl_none();
      return true;
    }
    case M_ITEMS:
    case M_KEYS:
    case M_VALUES:
      if (a->n_pos || a->n_kw) return tpl_err("%s() takes no arguments", tpl_method_name(id));
      if (!tpl_rt_step(rt, d->n / 64)) return false;
      return view(d, id == M_ITEMS ? TPL_L_ITEMS : id == M_KEYS ? TPL_L_KEYS : TPL_L_VALUES, out);
    case M_DCOPY: {
      tpl_dict *c = tpl_dict_new();
      if (!c) return false;
      for (size_t i = 0; i < d->n; i++)
        if (!tpl_dict_set(c, tpl_ref(d->k[i]), tpl_ref(d->v[i]))) {
          tpl_release_obj(&c->h);
          return false;
        }
      *out = tpl_obj_val(c);
      return true;
    }
    case M_FROMKEYS: {
      static const char *const names[] = {"iterable", "value"};
      if (!tpl_bind("fromkeys", a, names, 2, 1, p)) return false;
      tpl_list *items;
      if (!tpl_iterate(p[0], &items)) return false;
      tpl_dict *c = tpl_dict_new();
      bool ok = c != NULL;
      for (size_t i = 0; ok && i < items->n; i++)
        ok = tpl_dict_set(c, tpl_ref(items->v[i]), tpl_given(p[1]) ? tpl_ref(p[1]) : tpl_none());
      tpl_release_obj(&items->h);
      if (!ok) {
        if (c) tpl_release_obj(&c->h);
        return false;
      }
      *out = tpl_obj_val(c);
      return true;
    }
    default:
      return tpl_err("dict has no such method");
  }
}

static bool list_method(tpl_rt *rt, tpl_val self, int id, const tpl_args *a, tpl_val *out) {
  const tpl_list *l = tpl_l(self);
  if (!tpl_rt_step(rt, l->n / 64)) return false;
  switch (id) {
    case M_LCOUNT: {
      if (a->n_pos != 1 || a->n_kw) return tpl_err("count() takes exactly one argument");
      int64_t c = 0;
      for (size_t i = 0; i < l->n; i++) c += tpl_eq(l->v[i], a->pos[0]);
      *out = tpl_int(c);
      return true;
    }
    case M_LINDEX: {
      if (a->n_pos < 1 || a->n_pos > 3 || a->n_kw) return tpl_err("index() takes 1 to 3 arguments");
      int64_t from = 0, to = (int64_t)l->n, n = (int64_t)l->n;
      if (a->n_pos > 1 && !want_int("index", a->pos[1], &from)) return false;
      if (a->n_pos > 2 && !want_int("index", a->pos[2], &to)) return false;
      if (from < 0) from = from + n < 0 ? 0 : from + n;
      if (to < 0) to = to + n < 0 ? 0 : to + n;
      for (int64_t i = from; i < to && i < n; i++)
        if (tpl_eq(l->v[i], a->pos[0])) {
          *out = tpl_int(i);
          return true;
        }
      return tpl_err("%s.index(x): x not in %s", tpl_type_name(self), tpl_type_name(self));
    }
    case M_LCOPY: {
      tpl_list *c = tpl_list_new(l->n, TPL_L_LIST);
      if (!c) return false;
      for (size_t i = 0; i < l->n; i++) c->v[c->n++] = tpl_ref(l->v[i]);
      *out = tpl_obj_val(c);
      return true;
    }
    default:
      return tpl_err("list has no such method");
  }
}

static bool args_tuple(const tpl_args *a, tpl_val *out) {
  tpl_list *t = tpl_list_new(a->n_pos, TPL_L_TUPLE);
  if (!t) return false;
  for (size_t i = 0; i < a->n_pos; i++) t->v[t->n++] = tpl_ref(a->pos[i]);
  *out = tpl_obj_val(t);
  return true;
}

bool tpl_call_method(tpl_rt *rt, tpl_val self, int id, const tpl_args *a, tpl_val *out) {
  if (id < M_STR_END) return tpl_str_method(rt, self, id, a, out);
  switch (self.kind) {
    case TPL_DICT:
      return dict_method(rt, self, id, a, out);
    case TPL_LIST:
      return list_method(rt, self, id, a, out);
    case TPL_LOOP: {
      tpl_loop *l = (tpl_loop *)self.o;
      if (id == M_CYCLE) {
        if (!a->n_pos) return tpl_err("no items for cycling given");
        *out = tpl_ref(a->pos[l->index0 % a->n_pos]);
        return true;
      }
      tpl_val now;
      if (!args_tuple(a, &now)) return false;
      const bool changed = !l->has_changed || !tpl_eq(now, l->changed);
      if (changed) {
        tpl_drop(l->changed);
        l->changed = now;
        l->has_changed = true;
      } else {
        tpl_drop(now);
      }
      *out = tpl_bool(changed);
      return true;
    }
    case TPL_FUNC: { /* cycler */
      tpl_func *f = (tpl_func *)self.o;
      const tpl_list *items = tpl_l(f->self);
      if (id == M_CRESET) {
        f->count = 0;
        *out = tpl_none();
        return true;
      }
      *out = tpl_ref(items->v[f->count % (int64_t)items->n]);
      f->count = (f->count + 1) % (int64_t)items->n;
      return true;
    }
    default:
      return tpl_err("'%s' object has no such method", tpl_type_name(self));
  }
}

/* ---- loop ---- */

bool tpl_loop_attr(tpl_rt *rt, tpl_loop *l, const char *name, size_t len, tpl_val *out,
                   bool *found) {
  (void)rt;
  const int64_t i = (int64_t)l->index0, n = (int64_t)l->seq->n;
  *found = true;
#define IS(s) (len == sizeof(s) - 1 && !memcmp(name, s, len))
  if (IS("index"))
    *out = tpl_int(i + 1);
  else if (IS("index0"))
    *out = tpl_int(i);
  else if (IS("revindex"))
    *out = tpl_int(n - i);
  else if (IS("revindex0"))
    *out = tpl_int(n - i - 1);
  else if (IS("first"))
    *out = tpl_bool(i == 0);
  else if (IS("last"))
    *out = tpl_bool(i == n - 1);
  else if (IS("length"))
    *out = tpl_int(n);
  else if (IS("depth"))
    *out = tpl_int(l->depth0 + 1);
  else if (IS("depth0"))
    *out = tpl_int(l->depth0);
  else if (IS("previtem"))
    *out = i > 0 ? tpl_ref(l->seq->v[i - 1]) : tpl_undef_named("there is no previous item");
  else if (IS("nextitem"))
    *out = i + 1 < n ? tpl_ref(l->seq->v[i + 1]) : tpl_undef_named("there is no next item");
  else
    *found = false;
#undef IS
  return true;
}

/* ---- globals ---- */

enum { G_RANGE, G_NAMESPACE, G_DICT, G_JOINER, G_CYCLER, G_RAISE, G_STRFTIME, G_COUNT };
static const char *const GLOBAL_NAMES[G_COUNT] = {
    "range", "namespace", "dict", "joiner", "cycler", "raise_exception", "strftime_now"};

int tpl_global_id(const char *name, size_t len) {
  for (int i = 0; i < G_COUNT; i++)
    if (strlen(GLOBAL_NAMES[i]) == len && !memcmp(GLOBAL_NAMES[i], name, len)) return i;
  return -1;
}

const char *tpl_global_name(int id) {
  return id >= 0 && id < G_COUNT ? GLOBAL_NAMES[id] : "function";
}

int64_t tpl_now(void) {
  int64_t fixed;
  if (pa_env_template_now(&fixed)) return fixed;
  return (int64_t)time(NULL);
}

/* dict(*args, **kwargs) into d: a mapping or pairs, then the keywords. */
static bool fill_dict(tpl_dict *d, const tpl_args *a, const char *fn) {
  if (a->n_pos > 1) return tpl_err("%s expected at most 1 argument, got %zu", fn, a->n_pos);
  if (a->n_pos == 1) {
    const tpl_val src = a->pos[0];
    if (src.kind == TPL_DICT || src.kind == TPL_NS) {
      const tpl_dict *s = tpl_d(src);
      for (size_t i = 0; i < s->n; i++)
        if (!tpl_dict_set(d, tpl_ref(s->k[i]), tpl_ref(s->v[i]))) return false;
    } else {
      tpl_list *items;
      if (!tpl_iterate(src, &items)) return false;
      bool ok = true;
      for (size_t i = 0; ok && i < items->n; i++) {
        tpl_list *pair;
        if (!(ok = tpl_iterate(items->v[i], &pair))) break;
        if (pair->n != 2) {
          ok = false;
          pa_error(PASADA_ERR_ARG, "%s: sequence element #%zu has length %zu; 2 is required", fn, i,
                   pair->n);
        } else {
          ok = tpl_dict_set(d, tpl_ref(pair->v[0]), tpl_ref(pair->v[1]));
        }
        tpl_release_obj(&pair->h);
      }
      tpl_release_obj(&items->h);
      if (!ok) return false;
    }
  }
  for (size_t k = 0; k < a->n_kw; k++) {
    tpl_val key;
    if (!tpl_str_val(a->kw_names[k], strlen(a->kw_names[k]), &key) ||
        !tpl_dict_set(d, key, tpl_ref(a->kw[k])))
      return false;
  }
  return true;
}

static bool g_range(tpl_rt *rt, const tpl_args *a, tpl_val *out) {
  if (a->n_kw) return tpl_err("range() takes no keyword arguments");
  if (a->n_pos < 1 || a->n_pos > 3)
    return tpl_err("range expected 1 to 3 arguments, got %zu", a->n_pos);
  int64_t v[3] = {0, 0, 1};
  for (size_t i = 0; i < a->n_pos; i++)
    if (!want_int("range", a->pos[i], &v[a->n_pos == 1 ? 1 : i])) return false;
  const int64_t start = v[0], stop = v[1], step = v[2];
  if (step == 0) return tpl_err("range() arg 3 must not be zero");
  /* the count in unsigned arithmetic: (stop - start) may not fit int64 */
  uint64_t count = 0;
  if (step > 0 && start < stop) count = ((uint64_t)stop - (uint64_t)start - 1) / (uint64_t)step + 1;
  if (step < 0 && stop < start)
    count = ((uint64_t)start - (uint64_t)stop - 1) / (0 - (uint64_t)step) + 1;
  if (count > TPL_MAX_RANGE)
    return tpl_err("Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).",
                   TPL_MAX_RANGE);
  if (!tpl_rt_step(rt, count / 64)) return false;
  tpl_list *l = tpl_list_new(count, TPL_L_RANGE);
  if (!l) return false;
  l->r_start = start;
  l->r_stop = stop;
  l->r_step = step;
  for (uint64_t i = 0; i < count; i++) l->v[l->n++] = tpl_int(start + (int64_t)i * step);
  *out = tpl_obj_val(l);
  return true;
}

static bool g_strftime(tpl_rt *rt, const tpl_args *a, tpl_val *out) {
  static const char *const names[] = {"format"};
  tpl_val p[1];
  if (!tpl_bind("strftime_now", a, names, 1, 1, p)) return false;
  if (p[0].kind != TPL_STR)
    return tpl_err("strftime() argument 1 must be str, not %s", tpl_type_name(p[0]));
  const time_t now = (time_t)tpl_now();
  struct tm tm;
  if (!localtime_r(&now, &tm)) return tpl_err("strftime_now: the time is out of range");
  const tpl_str *fmt = tpl_s(p[0]);
  if (fmt->len > 1024) return tpl_err("strftime_now: the format is too long");
  char buf[8192];
  buf[0] = '\0';
  const size_t n = fmt->len ? strftime(buf, sizeof buf, fmt->s, &tm) : 0;
  (void)rt;
  return tpl_str_val(buf, n, out);
}

bool tpl_call_global(tpl_rt *rt, int id, const tpl_args *a, tpl_val *out) {
  switch (id) {
    case G_RANGE:
      return g_range(rt, a, out);
    case G_NAMESPACE:
    case G_DICT: {
      tpl_dict *d = id == G_DICT ? tpl_dict_new() : tpl_ns_new();
      if (!d) return false;
      if (!fill_dict(d, a, GLOBAL_NAMES[id])) {
        tpl_release_obj(&d->h);
        return false;
      }
      *out = tpl_obj_val(d);
      return true;
    }
    case G_JOINER: {
      static const char *const names[] = {"sep"};
      tpl_val p[1];
      if (!tpl_bind("joiner", a, names, 1, 0, p)) return false;
      tpl_func *f = tpl_func_new(TPL_F_JOINER, 0, "joiner");
      if (!f) return false;
      if (tpl_given(p[0]))
        f->self = tpl_ref(p[0]);
      else if (!tpl_str_val(", ", 2, &f->self)) {
        tpl_release_obj(&f->h);
        return false;
      }
      *out = tpl_obj_val(f);
      return true;
    }
    case G_CYCLER: {
      if (!a->n_pos) return tpl_err("at least one item has to be provided");
      tpl_func *f = tpl_func_new(TPL_F_CYCLER, 0, "cycler");
      if (!f) return false;
      if (!args_tuple(a, &f->self)) {
        tpl_release_obj(&f->h);
        return false;
      }
      *out = tpl_obj_val(f);
      return true;
    }
    case G_RAISE: {
      static const char *const names[] = {"message"};
      tpl_val p[1];
      if (!tpl_bind("raise_exception", a, names, 1, 1, p)) return false;
      tpl_buf b = {0};
      if (!tpl_str_of(&b, p[0])) {
        tpl_buf_free(&b);
        return false;
      }
      pa_error(PASADA_ERR_ARG, "%.900s", b.s ? b.s : "");
      tpl_buf_free(&b);
      return false;
    }
    case G_STRFTIME:
      return g_strftime(rt, a, out);
    default:
      return tpl_err("unknown global");
  }
}
