/* filters.c: jinja2's filters as the chat-template environment has them
 * (its own tojson: json.dumps with ensure_ascii=False), with their Python
 * behaviour: map/select/reject/unique/batch/slice/items make one-shot
 * generators, sort/unique/min/max ignore case by default, join and string
 * use str(), length counts code points. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/filters.h"

static const struct {
  const char *name;
  int id;
} FILTERS[] = {{"abs", F_ABS},
               {"attr", F_ATTR},
               {"batch", F_BATCH},
               {"capitalize", F_CAPITALIZE},
               {"center", F_CENTER},
               {"count", F_COUNT},
               {"d", F_DEFAULT},
               {"default", F_DEFAULT},
               {"dictsort", F_DICTSORT},
               {"e", F_ESCAPE},
               {"escape", F_ESCAPE},
               {"filesizeformat", F_FILESIZEFORMAT},
               {"first", F_FIRST},
               {"float", F_FLOAT},
               {"forceescape", F_FORCEESCAPE},
               {"format", F_FORMAT},
               {"groupby", F_GROUPBY},
               {"indent", F_INDENT},
               {"int", F_INT},
               {"items", F_ITEMS},
               {"join", F_JOIN},
               {"last", F_LAST},
               {"length", F_LENGTH},
               {"list", F_LIST},
               {"lower", F_LOWER},
               {"map", F_MAP},
               {"max", F_MAX},
               {"min", F_MIN},
               {"pprint", F_PPRINT},
               {"reject", F_REJECT},
               {"rejectattr", F_REJECTATTR},
               {"replace", F_REPLACE},
               {"reverse", F_REVERSE},
               {"round", F_ROUND},
               {"safe", F_SAFE},
               {"select", F_SELECT},
               {"selectattr", F_SELECTATTR},
               {"slice", F_SLICE},
               {"sort", F_SORT},
               {"string", F_STRING},
               {"striptags", F_STRIPTAGS},
               {"sum", F_SUM},
               {"title", F_TITLE},
               {"tojson", F_TOJSON},
               {"trim", F_TRIM},
               {"truncate", F_TRUNCATE},
               {"unique", F_UNIQUE},
               {"upper", F_UPPER},
               {"urlencode", F_URLENCODE},
               {"wordcount", F_WORDCOUNT}};

int tpl_filter_id(const char *name) {
  for (size_t i = 0; i < sizeof FILTERS / sizeof FILTERS[0]; i++)
    if (!strcmp(FILTERS[i].name, name)) return FILTERS[i].id;
  return -1;
}

bool tpl_f_arg_int(const char *fn, tpl_val v, int64_t dflt, int64_t *out) {
  if (!tpl_given(v)) {
    *out = dflt;
    return true;
  }
  if (v.kind == TPL_INT || v.kind == TPL_BOOL) {
    *out = v.kind == TPL_INT ? v.i : v.b;
    return true;
  }
  if (v.kind == TPL_UNDEF) return tpl_undefined_error(v);
  return tpl_err("%s: '%s' object cannot be interpreted as an integer", fn, tpl_type_name(v));
}

bool tpl_f_arg_bool(tpl_val v, bool dflt) {
  return tpl_given(v) ? tpl_truthy(v) : dflt;
}

/* Calls a str method on str(v) (markupsafe's soft_str: Markup stays Markup). */
bool tpl_f_str_method(tpl_rt *rt, tpl_val v, const char *method, const tpl_args *a, tpl_val *out) {
  tpl_val s;
  if (!tpl_to_str(v, &s)) return false;
  bool unsafe;
  const int id = tpl_method_id(s, method, strlen(method), &unsafe);
  const bool ok = tpl_call_method(rt, s, id, a, out);
  tpl_drop(s);
  return ok;
}

bool tpl_call_filter(tpl_rt *rt, int id, const char *name, tpl_val v, const tpl_args *a,
                     tpl_val *out) {
  if (id < 0) return tpl_err("No filter named '%s' found.", name);
  tpl_val p[4];
#define BIND(...)                                                             \
  do {                                                                        \
    static const char *const n_[] = {__VA_ARGS__};                            \
    if (!tpl_bind(name, a, n_, sizeof n_ / sizeof n_[0], 0, p)) return false; \
  } while (0)
#define NOARGS()                                                              \
  do {                                                                        \
    if (a->n_pos || a->n_kw) return tpl_err("%s() takes no arguments", name); \
  } while (0)
  switch (id) {
    case F_ABS:
      NOARGS();
      if (v.kind == TPL_FLOAT)
        *out = tpl_float(fabs(v.f));
      else if (v.kind == TPL_INT || v.kind == TPL_BOOL) {
        const int64_t i = v.kind == TPL_INT ? v.i : v.b;
        if (i == INT64_MIN) return tpl_err("integer overflow");
        *out = tpl_int(i < 0 ? -i : i);
      } else if (v.kind == TPL_UNDEF)
        return tpl_undefined_error(v);
      else
        return tpl_err("bad operand type for abs(): '%s'", tpl_type_name(v));
      return true;
    case F_ATTR:
      BIND("name");
      if (p[0].kind != TPL_STR) return tpl_err("attr: the name must be a string");
      return tpl_getattr(rt, v, tpl_s(p[0])->s, tpl_s(p[0])->len, out);
    case F_BATCH:
    case F_SLICE:
      if (id == F_BATCH)
        BIND("linecount", "fill_with");
      else
        BIND("slices", "fill_with");
      return tpl_f_batch_slice(rt, id, v, p, out);
    case F_CAPITALIZE:
    case F_LOWER:
    case F_UPPER:
      NOARGS();
      return tpl_f_str_method(rt, v,
                              id == F_CAPITALIZE ? "capitalize"
                              : id == F_LOWER    ? "lower"
                                                 : "upper",
                              a, out);
    case F_CENTER: {
      BIND("width");
      const tpl_val w = tpl_given(p[0]) ? p[0] : tpl_int(80);
      const tpl_args ca = {.pos = (tpl_val *)&w, .n_pos = 1};
      return tpl_f_str_method(rt, v, "center", &ca, out);
    }
    case F_COUNT:
    case F_LENGTH: {
      NOARGS();
      int64_t n;
      if (!tpl_len(v, &n)) return false;
      *out = tpl_int(n);
      return true;
    }
    case F_DEFAULT:
      BIND("default_value", "boolean");
      if (v.kind == TPL_UNDEF || (tpl_f_arg_bool(p[1], false) && !tpl_truthy(v))) {
        if (tpl_given(p[0]))
          *out = tpl_ref(p[0]);
        else if (!tpl_str_val("", 0, out))
          return false;
      } else {
        *out = tpl_ref(v);
      }
      return true;
    case F_DICTSORT: {
      BIND("case_sensitive", "by", "reverse");
      if (v.kind != TPL_DICT) {
        if (v.kind == TPL_UNDEF) return tpl_undefined_error(v);
        return tpl_err("'%s' object has no attribute 'items'", tpl_type_name(v));
      }
      int pos = 0;
      if (tpl_given(p[1])) {
        if (p[1].kind == TPL_STR && !strcmp(tpl_s(p[1])->s, "value"))
          pos = 1;
        else if (!(p[1].kind == TPL_STR && !strcmp(tpl_s(p[1])->s, "key")))
          return tpl_err("You can only sort by either \"key\" or \"value\"");
      }
      tpl_val items;
      const tpl_dict *d = tpl_d(v);
      tpl_list *pairs = tpl_list_new(d->n, TPL_L_LIST);
      if (!pairs) return false;
      for (size_t i = 0; i < d->n; i++) {
        tpl_list *pair = tpl_list_new(2, TPL_L_TUPLE);
        if (!pair) {
          tpl_release_obj(&pairs->h);
          return false;
        }
        pair->v[0] = tpl_ref(d->k[i]);
        pair->v[1] = tpl_ref(d->v[i]);
        pair->n = 2;
        pairs->v[pairs->n++] = tpl_obj_val(pair);
      }
      items = tpl_obj_val(pairs);
      tpl_val *keys = calloc(d->n + 1, sizeof *keys);
      bool ok = keys != NULL;
      const bool fold = !tpl_f_arg_bool(p[0], false);
      for (size_t i = 0; ok && i < d->n; i++) {
        const tpl_val k = pos ? d->v[i] : d->k[i];
        ok = fold ? tpl_fold_case(rt, tpl_ref(k), &keys[i]) : (keys[i] = tpl_ref(k), true);
      }
      ok = ok && tpl_sorted_list(rt, pairs, keys, tpl_f_arg_bool(p[2], false), out);
      free(keys);
      tpl_drop(items);
      return ok;
    }
    case F_ESCAPE:
    case F_FORCEESCAPE: {
      NOARGS();
      if (id == F_ESCAPE && tpl_is_markup(v)) {
        *out = tpl_ref(v);
        return true;
      }
      tpl_buf b = {0};
      tpl_val sv;
      if (!tpl_to_str(v, &sv)) return false;
      const bool ok = tpl_escape(&b, tpl_s(sv)->s, tpl_s(sv)->len);
      tpl_drop(sv);
      if (!ok) {
        tpl_buf_free(&b);
        return false;
      }
      return tpl_buf_take(&b, true, out);
    }
    case F_FILESIZEFORMAT:
      BIND("binary");
      return tpl_f_filesize(v, p, out);
    case F_FIRST:
    case F_LAST: {
      NOARGS();
      if (id == F_LAST && v.kind == TPL_LIST &&
          (tpl_l(v)->h.sub == TPL_L_GEN || tpl_l(v)->h.sub == TPL_L_REVERSED))
        return tpl_err("'%s' object is not reversible", tpl_type_name(v));
      tpl_list *items;
      if (!tpl_iterate(v, &items)) return false;
      if (items->n)
        *out = tpl_ref(items->v[id == F_FIRST ? 0 : items->n - 1]);
      else
        *out = tpl_undef_named(id == F_FIRST ? "No first item, sequence was empty."
                                             : "No last item, sequence was empty.");
      tpl_release_obj(&items->h);
      return true;
    }
    case F_FLOAT:
      BIND("default");
      return tpl_f_float(v, p, out);
    case F_INT:
      BIND("default", "base");
      return tpl_f_int(v, p, out);
    case F_FORMAT: {
      tpl_val sv, args;
      if (a->n_pos && a->n_kw)
        return tpl_err("can't handle positional and keyword arguments at the same time");
      if (a->n_kw) {
        tpl_dict *d = tpl_dict_new();
        if (!d) return false;
        for (size_t k = 0; k < a->n_kw; k++) {
          tpl_val key;
          if (!tpl_str_val(a->kw_names[k], strlen(a->kw_names[k]), &key) ||
              !tpl_dict_set(d, key, tpl_ref(a->kw[k]))) {
            tpl_release_obj(&d->h);
            return false;
          }
        }
        args = tpl_obj_val(d);
      } else {
        tpl_list *t = tpl_list_new(a->n_pos, TPL_L_TUPLE);
        if (!t) return false;
        for (size_t i = 0; i < a->n_pos; i++) t->v[t->n++] = tpl_ref(a->pos[i]);
        args = tpl_obj_val(t);
      }
      bool ok = tpl_to_str(v, &sv);
      if (ok) {
        ok = tpl_percent_format(rt, sv, args, out);
        tpl_drop(sv);
      }
      tpl_drop(args);
      return ok;
    }
    case F_GROUPBY:
      BIND("attribute", "default", "case_sensitive");
      return tpl_f_groupby(rt, v, p, out);
    case F_INDENT:
      BIND("width", "first", "blank");
      return tpl_f_indent(rt, v, p, out);
    case F_ITEMS: {
      NOARGS();
      if (v.kind == TPL_UNDEF) {
        tpl_list *l = tpl_gen_new(0);
        if (!l) return false;
        *out = tpl_obj_val(l);
        return true;
      }
      if (v.kind != TPL_DICT) return tpl_err("Can only get item pairs from a mapping.");
      tpl_args none = {0};
      bool unsafe;
      if (!tpl_call_method(rt, v, tpl_method_id(v, "items", 5, &unsafe), &none, out)) return false;
      tpl_l(*out)->h.sub = TPL_L_GEN;
      return true;
    }
    case F_JOIN: {
      BIND("d", "attribute");
      tpl_list *items;
      if (!tpl_iterate(v, &items)) return false;
      tpl_attr_path path;
      if (!tpl_path_parse(p[1], NULL, 0, &path)) {
        tpl_release_obj(&items->h);
        return false;
      }
      tpl_val sep;
      bool ok = tpl_given(p[0]) ? tpl_to_str(p[0], &sep) : tpl_str_val("", 0, &sep);
      tpl_buf b = {0};
      ok = ok && tpl_rt_step(rt, items->n / 64);
      for (size_t i = 0; ok && i < items->n; i++) {
        tpl_val x;
        if (!(ok = tpl_path_get(rt, &path, items->v[i], TPL_NOT_GIVEN, &x))) break;
        if (i) ok = tpl_buf_put(&b, tpl_s(sep)->s, tpl_s(sep)->len);
        ok = ok && tpl_str_of(&b, x);
        tpl_drop(x);
      }
      if (ok) tpl_drop(sep);
      tpl_path_free(&path);
      tpl_release_obj(&items->h);
      if (!ok) {
        tpl_buf_free(&b);
        return false;
      }
      return tpl_buf_take(&b, false, out);
    }
    case F_LIST: {
      NOARGS();
      tpl_list *items;
      if (!tpl_iterate(v, &items)) return false;
      tpl_list *l = tpl_list_new(items->n, TPL_L_LIST);
      if (l) {
        for (size_t i = 0; i < items->n; i++) l->v[l->n++] = tpl_ref(items->v[i]);
        *out = tpl_obj_val(l);
      }
      tpl_release_obj(&items->h);
      return l != NULL;
    }
    case F_MAP:
      return tpl_f_map(rt, v, a, out);
    case F_MAX:
    case F_MIN:
    case F_UNIQUE:
      BIND("case_sensitive", "attribute");
      return tpl_f_sort_like(rt, id, v, p, out);
    case F_SORT:
      BIND("reverse", "case_sensitive", "attribute");
      return tpl_f_sort_like(rt, id, v, p, out);
    case F_PPRINT: {
      NOARGS();
      tpl_buf b = {0};
      if (!tpl_repr(&b, v, 0)) {
        tpl_buf_free(&b);
        return false;
      }
      return tpl_buf_take(&b, false, out);
    }
    case F_REJECT:
    case F_REJECTATTR:
    case F_SELECT:
    case F_SELECTATTR:
      return tpl_f_select(rt, id, v, a, out);
    case F_REPLACE: {
      BIND("old", "new", "count");
      tpl_val sv, o, n;
      if (!tpl_given(p[0]) || !tpl_given(p[1])) return tpl_err("replace() needs old and new");
      if (!tpl_to_str(v, &sv)) return false;
      bool ok = tpl_to_str(p[0], &o);
      if (ok && !(ok = tpl_to_str(p[1], &n))) tpl_drop(o);
      if (ok) {
        /* str(s).replace(str(old), str(new), count): plain strings */
        tpl_str *plain = tpl_str_new(tpl_s(sv)->s, tpl_s(sv)->len);
        tpl_str *pn = plain ? tpl_str_new(tpl_s(n)->s, tpl_s(n)->len) : NULL;
        ok = plain && pn;
        if (ok) {
          tpl_val args[3] = {o, tpl_obj_val(pn),
                             tpl_given(p[2]) && p[2].kind != TPL_NONE ? p[2] : tpl_int(-1)};
          const tpl_args ra = {.pos = args, .n_pos = 3};
          ok = tpl_f_str_method(rt, tpl_obj_val(plain), "replace", &ra, out);
        }
        if (plain) tpl_release_obj(&plain->h);
        if (pn) tpl_release_obj(&pn->h);
        tpl_drop(o);
        tpl_drop(n);
      }
      tpl_drop(sv);
      return ok;
    }
    case F_REVERSE: {
      NOARGS();
      if (v.kind == TPL_STR) {
        tpl_list *chars;
        if (!tpl_iterate(v, &chars)) return false;
        tpl_buf b = {0};
        bool ok = true;
        for (size_t i = chars->n; ok && i-- > 0;)
          ok = tpl_buf_put(&b, tpl_s(chars->v[i])->s, tpl_s(chars->v[i])->len);
        tpl_release_obj(&chars->h);
        if (!ok) {
          tpl_buf_free(&b);
          return false;
        }
        return tpl_buf_take(&b, tpl_is_markup(v), out);
      }
      if (v.kind == TPL_UNDEF) { /* reversed(Undefined): an empty iterator */
        tpl_list *r = tpl_list_new(0, TPL_L_REVERSED);
        if (!r) return false;
        *out = tpl_obj_val(r);
        return true;
      }
      const bool reversible = v.kind == TPL_DICT ||
                              (v.kind == TPL_LIST && tpl_l(v)->h.sub != TPL_L_GEN &&
                               tpl_l(v)->h.sub != TPL_L_REVERSED && tpl_l(v)->h.sub != TPL_L_ITEMS);
      tpl_list *items;
      if (!tpl_iterate(v, &items)) return tpl_err("argument must be iterable");
      tpl_list *r = tpl_list_new(items->n, reversible ? TPL_L_REVERSED : TPL_L_LIST);
      if (r)
        for (size_t i = items->n; i-- > 0;) r->v[r->n++] = tpl_ref(items->v[i]);
      tpl_release_obj(&items->h);
      if (!r) return false;
      *out = tpl_obj_val(r);
      return true;
    }
    case F_ROUND:
      BIND("precision", "method");
      return tpl_f_round(v, p, out);
    case F_SAFE: {
      NOARGS();
      tpl_val sv;
      if (!tpl_to_str(v, &sv)) return false;
      if (tpl_is_markup(sv)) {
        *out = sv;
        return true;
      }
      tpl_str *m = tpl_str_markup(tpl_s(sv)->s, tpl_s(sv)->len, true);
      tpl_drop(sv);
      if (!m) return false;
      *out = tpl_obj_val(m);
      return true;
    }
    case F_STRING:
      NOARGS();
      return tpl_to_str(v, out);
    case F_STRIPTAGS:
      NOARGS();
      return tpl_f_striptags(v, out);
    case F_SUM: {
      BIND("attribute", "start");
      tpl_attr_path path;
      if (!tpl_path_parse(p[0], NULL, 0, &path)) return false;
      tpl_list *items;
      if (!tpl_iterate(v, &items)) {
        tpl_path_free(&path);
        return false;
      }
      tpl_val acc = tpl_given(p[1]) ? tpl_ref(p[1]) : tpl_int(0);
      bool ok = true;
      if (acc.kind == TPL_STR) ok = tpl_err("sum() can't sum strings [use ''.join(seq) instead]");
      for (size_t i = 0; ok && i < items->n; i++) {
        tpl_val x, r;
        if (!(ok = tpl_path_get(rt, &path, items->v[i], TPL_NOT_GIVEN, &x))) break;
        ok = tpl_binop(rt, OP_ADD, acc, x, &r);
        tpl_drop(x);
        if (ok) {
          tpl_drop(acc);
          acc = r;
        }
      }
      tpl_release_obj(&items->h);
      tpl_path_free(&path);
      if (!ok) {
        tpl_drop(acc);
        return false;
      }
      *out = acc;
      return true;
    }
    case F_TITLE:
      NOARGS();
      return tpl_f_title(v, out);
    case F_TOJSON:
      BIND("ensure_ascii", "indent", "separators", "sort_keys");
      return tpl_f_tojson(v, p, out);
    case F_TRIM:
      return tpl_f_str_method(rt, v, "strip", a, out);
    case F_TRUNCATE:
      BIND("length", "killwords", "end", "leeway");
      return tpl_f_truncate(rt, v, p, out);
    case F_URLENCODE:
      NOARGS();
      return tpl_f_urlencode(v, out);
    case F_WORDCOUNT:
      NOARGS();
      return tpl_f_wordcount(v, out);
    default:
      return tpl_err("No filter named '%s' found.", name);
  }
#undef BIND
#undef NOARGS
}
