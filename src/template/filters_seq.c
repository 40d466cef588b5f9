/* filters_seq.c: the filters over sequences: sort, unique, min, max,
 * select/reject(attr), map, batch, slice and groupby, with jinja2's
 * attribute paths ("a.b.0") and its case-insensitive comparisons; results
 * that jinja2 yields from a generator are one-shot generators here too. */
#include <stdlib.h>
#include <string.h>

#include "template/filters.h"

/* ---- attribute paths (make_attrgetter) ---- */

void tpl_path_free(tpl_attr_path *p) {
  for (size_t i = 0; i < p->n; i++) tpl_drop(p->parts[i]);
  p->n = 0;
}

/* "a.b.0" into its parts (digit parts as ints); an int is itself; absent: none. */
bool tpl_path_parse(tpl_val attr, const char *s, size_t len, tpl_attr_path *p) {
  p->n = 0;
  if (!s) {
    if (!tpl_given(attr) || attr.kind == TPL_NONE) return true;
    if (attr.kind != TPL_STR) {
      p->parts[p->n++] = tpl_ref(attr);
      return true;
    }
    s = tpl_s(attr)->s;
    len = tpl_s(attr)->len;
  }
  size_t i = 0;
  for (;;) {
    const char *dot = memchr(s + i, '.', len - i);
    const size_t e = dot ? (size_t)(dot - s) : len;
    if (p->n == 16) {
      tpl_path_free(p);
      return tpl_err("attribute path too long");
    }
    bool digits = e > i;
    for (size_t k = i; k < e; k++) digits &= s[k] >= '0' && s[k] <= '9';
    if (digits && e - i < 18) {
      int64_t n = 0;
      for (size_t k = i; k < e; k++) n = n * 10 + (s[k] - '0');
      p->parts[p->n++] = tpl_int(n);
    } else if (!tpl_str_val(s + i, e - i, &p->parts[p->n++])) {
      p->n--;
      tpl_path_free(p);
      return false;
    }
    if (!dot) return true;
    i = e + 1;
  }
}

/* item looked up along the path (environment.getitem at each step); a
 * given default replaces an undefined result. */
bool tpl_path_get(tpl_rt *rt, const tpl_attr_path *p, tpl_val item, tpl_val dflt, tpl_val *out) {
  tpl_val v = tpl_ref(item);
  for (size_t i = 0; i < p->n; i++) {
    tpl_val next;
    const bool ok = tpl_getitem(rt, v, p->parts[i], &next);
    tpl_drop(v);
    if (!ok) return false;
    v = next;
    if (tpl_given(dflt) && dflt.kind != TPL_NONE && v.kind == TPL_UNDEF) {
      tpl_drop(v);
      v = tpl_ref(dflt);
    }
  }
  *out = v;
  return true;
}

/* ignore_case: strings lower-cased, anything else as it is. */
bool tpl_fold_case(tpl_rt *rt, tpl_val v, tpl_val *out) {
  if (v.kind != TPL_STR) {
    *out = v;
    return true;
  }
  tpl_args none = {0};
  const bool ok = tpl_f_str_method(rt, v, "lower", &none, out);
  tpl_drop(v);
  return ok;
}

/* ---- sorting: stable, with comparisons that may fail ---- */

bool tpl_sort_keys(tpl_rt *rt, tpl_val *keys, size_t *idx, size_t n, bool reverse) {
  if (!tpl_rt_step(rt, n * 8)) return false;
  size_t *tmp = malloc((n + 1) * sizeof *tmp);
  if (!tmp) return tpl_errc(PASADA_ERR_NOMEM, "out of memory");
  for (size_t width = 1; width < n; width *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * width) {
      const size_t mid = lo + width < n ? lo + width : n,
                   hi = lo + 2 * width < n ? lo + 2 * width : n;
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        int c;
        if (!tpl_compare(keys[idx[j]], keys[idx[i]], &c)) {
          free(tmp);
          return false;
        }
        /* take the right one only when strictly before (stability) */
        if (reverse ? c > 0 : c < 0)
          tmp[k++] = idx[j++];
        else
          tmp[k++] = idx[i++];
      }
      while (i < mid) tmp[k++] = idx[i++];
      while (j < hi) tmp[k++] = idx[j++];
      memcpy(idx + lo, tmp + lo, (hi - lo) * sizeof *idx);
    }
  }
  free(tmp);
  return true;
}

/* sorted(items, key=...) as a new list. keys[i] (taken) is items[i]'s key. */
bool tpl_sorted_list(tpl_rt *rt, const tpl_list *items, tpl_val *keys, bool reverse, tpl_val *out) {
  const size_t n = items->n;
  size_t *idx = malloc((n + 1) * sizeof *idx);
  bool ok = idx != NULL;
  if (!ok) pa_error(PASADA_ERR_NOMEM, "out of memory");
  for (size_t i = 0; ok && i < n; i++) idx[i] = i;
  ok = ok && tpl_sort_keys(rt, keys, idx, n, reverse);
  tpl_list *l = ok ? tpl_list_new(n, TPL_L_LIST) : NULL;
  if (l) {
    for (size_t i = 0; i < n; i++) l->v[l->n++] = tpl_ref(items->v[idx[i]]);
    *out = tpl_obj_val(l);
  }
  for (size_t i = 0; i < n; i++) tpl_drop(keys[i]);
  free(idx);
  return l != NULL;
}

/* The key of one item for sort/unique/min/max: its attribute(s), case folded. */
static bool item_key(tpl_rt *rt, const tpl_attr_path *paths, size_t np, bool multi, tpl_val item,
                     bool fold, tpl_val *out) {
  if (!multi) {
    tpl_val v;
    if (!tpl_path_get(rt, &paths[0], item, TPL_NOT_GIVEN, &v)) return false;
    return fold ? tpl_fold_case(rt, v, out) : (*out = v, true);
  }
  tpl_list *l = tpl_list_new(np, TPL_L_LIST);
  if (!l) return false;
  for (size_t i = 0; i < np; i++) {
    tpl_val v;
    if (!tpl_path_get(rt, &paths[i], item, TPL_NOT_GIVEN, &v) ||
        (fold && !tpl_fold_case(rt, v, &v))) {
      tpl_release_obj(&l->h);
      return false;
    }
    l->v[l->n++] = v;
  }
  *out = tpl_obj_val(l);
  return true;
}

tpl_list *tpl_gen_new(size_t cap) {
  return tpl_list_new(cap, TPL_L_GEN);
}

/* ---- the filters ---- */

bool tpl_f_sort_like(tpl_rt *rt, int id, tpl_val v, const tpl_val *p, tpl_val *out) {
  /* sort(reverse, case_sensitive, attribute); unique/min/max(case_sensitive, attribute) */
  const bool is_sort = id == F_SORT;
  const bool reverse = is_sort && tpl_f_arg_bool(p[0], false);
  const bool fold = !tpl_f_arg_bool(is_sort ? p[1] : p[0], false);
  const tpl_val attr = is_sort ? p[2] : p[1];
  tpl_attr_path paths[8];
  size_t np = 1;
  bool multi = false;
  paths[0].n = 0;
  if (is_sort && tpl_given(attr) && attr.kind == TPL_STR &&
      memchr(tpl_s(attr)->s, ',', tpl_s(attr)->len)) {
    multi = true;
    np = 0;
    const char *s = tpl_s(attr)->s;
    const size_t len = tpl_s(attr)->len;
    for (size_t i = 0; i <= len && np < 8;) {
      const char *c = memchr(s + i, ',', len - i);
      const size_t e = c ? (size_t)(c - s) : len;
      if (!tpl_path_parse(tpl_none(), s + i, e - i, &paths[np])) goto fail_paths;
      np++;
      i = e + 1;
      if (!c) break;
    }
  } else if (!tpl_path_parse(attr, NULL, 0, &paths[0])) {
    return false;
  }
  tpl_list *items;
  if (!tpl_iterate(v, &items)) goto fail_paths;
  tpl_val *keys = calloc(items->n + 1, sizeof *keys);
  bool ok = keys != NULL;
  size_t got = 0;
  for (; ok && got < items->n; got++)
    ok = item_key(rt, paths, np, multi, items->v[got], fold, &keys[got]);
  if (!ok) got = got ? got - 1 : 0;
  if (ok && is_sort) {
    ok = tpl_sorted_list(rt, items, keys, reverse, out);
    got = 0;
  } else if (ok && id == F_UNIQUE) {
    tpl_list *r = tpl_gen_new(0);
    tpl_dict *seen = tpl_dict_new();
    ok = r && seen;
    for (size_t i = 0; ok && i < items->n; i++) {
      bool err;
      if (tpl_dict_get(seen, keys[i], &err)) continue;
      ok = !err && tpl_dict_set(seen, tpl_ref(keys[i]), tpl_none()) &&
           tpl_list_push(r, tpl_ref(items->v[i]));
    }
    if (seen) tpl_release_obj(&seen->h);
    if (ok)
      *out = tpl_obj_val(r);
    else if (r)
      tpl_release_obj(&r->h);
  } else if (ok) { /* min, max: the first best item */
    if (!items->n) {
      *out = tpl_undef_named("No aggregated item, sequence was empty.");
    } else {
      size_t best = 0;
      for (size_t i = 1; ok && i < items->n; i++) {
        int c;
        ok = tpl_compare(keys[i], keys[best], &c);
        if (ok && (id == F_MIN ? c < 0 : c > 0)) best = i;
      }
      if (ok) *out = tpl_ref(items->v[best]);
    }
  }
  for (size_t i = 0; keys && i < got; i++) tpl_drop(keys[i]);
  free(keys);
  tpl_release_obj(&items->h);
  for (size_t i = 0; i < np; i++) tpl_path_free(&paths[i]);
  return ok;
fail_paths:
  for (size_t i = 0; i < np; i++) tpl_path_free(&paths[i]);
  return false;
}

/* select / reject / selectattr / rejectattr */
bool tpl_f_select(tpl_rt *rt, int id, tpl_val v, const tpl_args *a, tpl_val *out) {
  const bool attr = id == F_SELECTATTR || id == F_REJECTATTR;
  const bool keep_true = id == F_SELECT || id == F_SELECTATTR;
  tpl_list *r = tpl_gen_new(0);
  if (!r) return false;
  if (!tpl_truthy(v)) {
    *out = tpl_obj_val(r);
    return true;
  }
  size_t off = 0;
  tpl_attr_path path = {.n = 0};
  if (attr) {
    if (a->n_pos < 1) {
      tpl_release_obj(&r->h);
      return tpl_err("Missing parameter for attribute name");
    }
    if (!tpl_path_parse(a->pos[0], NULL, 0, &path)) {
      tpl_release_obj(&r->h);
      return false;
    }
    off = 1;
  }
  int test = -2;
  const char *test_name = NULL;
  if (a->n_pos > off) {
    if (a->pos[off].kind != TPL_STR) {
      tpl_path_free(&path);
      tpl_release_obj(&r->h);
      return tpl_err("a test name must be a string");
    }
    test_name = tpl_s(a->pos[off])->s;
    test = tpl_test_id(test_name);
  }
  const tpl_args rest = {.pos = a->pos + (a->n_pos > off ? off + 1 : a->n_pos),
                         .n_pos = a->n_pos > off ? a->n_pos - off - 1 : 0,
                         .kw_names = a->kw_names,
                         .kw = a->kw,
                         .n_kw = a->n_kw};
  tpl_list *items = NULL;
  bool ok = tpl_iterate(v, &items);
  for (size_t i = 0; ok && i < items->n; i++) {
    tpl_val x;
    if (!(ok = tpl_path_get(rt, &path, items->v[i], TPL_NOT_GIVEN, &x))) break;
    bool t;
    if (test_name)
      ok = tpl_call_test(rt, test, test_name, x, &rest, &t);
    else
      t = tpl_truthy(x);
    tpl_drop(x);
    if (ok && t == keep_true) ok = tpl_list_push(r, tpl_ref(items->v[i]));
  }
  if (items) tpl_release_obj(&items->h);
  tpl_path_free(&path);
  if (!ok) {
    tpl_release_obj(&r->h);
    return false;
  }
  *out = tpl_obj_val(r);
  return true;
}

bool tpl_f_map(tpl_rt *rt, tpl_val v, const tpl_args *a, tpl_val *out) {
  tpl_list *r = tpl_gen_new(0);
  if (!r) return false;
  if (!tpl_truthy(v)) {
    *out = tpl_obj_val(r);
    return true;
  }
  tpl_attr_path path = {.n = 0};
  tpl_val dflt = TPL_NOT_GIVEN;
  const char *filter = NULL;
  int fid = -1;
  tpl_args rest = {0};
  bool ok = true;
  if (!a->n_pos && a->n_kw) {
    tpl_val attr = TPL_NOT_GIVEN;
    for (size_t k = 0; ok && k < a->n_kw; k++) {
      if (!strcmp(a->kw_names[k], "attribute"))
        attr = a->kw[k];
      else if (!strcmp(a->kw_names[k], "default"))
        dflt = a->kw[k];
      else
        ok = tpl_err("Unexpected keyword argument '%s'", a->kw_names[k]);
    }
    if (ok && !tpl_given(attr)) ok = tpl_err("map requires a filter argument");
    ok = ok && tpl_path_parse(attr, NULL, 0, &path);
  } else if (!a->n_pos) {
    ok = tpl_err("map requires a filter argument");
  } else if (a->pos[0].kind != TPL_STR) {
    ok = tpl_err("map: the filter name must be a string");
  } else {
    filter = tpl_s(a->pos[0])->s;
    fid = tpl_filter_id(filter);
    rest = (tpl_args){.pos = a->pos + 1,
                      .n_pos = a->n_pos - 1,
                      .kw_names = a->kw_names,
                      .kw = a->kw,
                      .n_kw = a->n_kw};
  }
  tpl_list *items = NULL;
  ok = ok && tpl_iterate(v, &items);
  for (size_t i = 0; ok && i < items->n; i++) {
    tpl_val x;
    if (filter)
      ok = tpl_call_filter(rt, fid, filter, items->v[i], &rest, &x);
    else
      ok = tpl_path_get(rt, &path, items->v[i], dflt, &x);
    ok = ok && tpl_list_push(r, x);
  }
  if (items) tpl_release_obj(&items->h);
  tpl_path_free(&path);
  if (!ok) {
    tpl_release_obj(&r->h);
    return false;
  }
  *out = tpl_obj_val(r);
  return true;
}

bool tpl_f_batch_slice(tpl_rt *rt, int id, tpl_val v, const tpl_val *p, tpl_val *out) {
  int64_t n;
  if (!tpl_f_arg_int(id == F_BATCH ? "batch" : "slice", p[0], 0, &n)) return false;
  const tpl_val fill = p[1];
  const bool has_fill = tpl_given(fill) && fill.kind != TPL_NONE;
  if (n <= 0)
    return tpl_err(id == F_BATCH ? "batch: linecount must be positive"
                                 : "integer division or modulo by zero");
  tpl_list *items;
  if (!tpl_iterate(v, &items)) return false;
  tpl_list *r = tpl_gen_new(0);
  bool ok = r != NULL && tpl_rt_step(rt, items->n / 64);
  const size_t len = items->n;
  if (id == F_BATCH) {
    for (size_t i = 0; ok && i < len; i += (size_t)n) {
      tpl_list *row = tpl_list_new(0, TPL_L_LIST);
      ok = row != NULL;
      for (size_t k = i; ok && k < len && k < i + (size_t)n; k++)
        ok = tpl_list_push(row, tpl_ref(items->v[k]));
      while (ok && has_fill && row->n < (size_t)n) ok = tpl_list_push(row, tpl_ref(fill));
      if (row) ok = ok ? tpl_list_push(r, tpl_obj_val(row)) : (tpl_release_obj(&row->h), false);
    }
  } else {
    const size_t per = len / (size_t)n, extra = len % (size_t)n;
    size_t offset = 0;
    for (size_t s = 0; ok && s < (size_t)n; s++) {
      const size_t start = offset + s * per;
      if (s < extra) offset++;
      const size_t end = offset + (s + 1) * per;
      tpl_list *row = tpl_list_new(0, TPL_L_LIST);
      ok = row != NULL;
      for (size_t k = start; ok && k < end; k++) ok = tpl_list_push(row, tpl_ref(items->v[k]));
      if (ok && has_fill && s >= extra) ok = tpl_list_push(row, tpl_ref(fill));
      if (row) ok = ok ? tpl_list_push(r, tpl_obj_val(row)) : (tpl_release_obj(&row->h), false);
    }
  }
  tpl_release_obj(&items->h);
  if (!ok) {
    if (r) tpl_release_obj(&r->h);
    return false;
  }
  *out = tpl_obj_val(r);
  return true;
}

bool tpl_f_groupby(tpl_rt *rt, tpl_val v, const tpl_val *p, tpl_val *out) {
  tpl_attr_path path;
  if (!tpl_path_parse(p[0], NULL, 0, &path)) return false;
  const bool fold = !tpl_f_arg_bool(p[2], false);
  tpl_list *items;
  if (!tpl_iterate(v, &items)) {
    tpl_path_free(&path);
    return false;
  }
  const size_t n = items->n;
  tpl_val *keys = calloc(n + 1, sizeof *keys), *raw = calloc(n + 1, sizeof *raw);
  bool ok = keys && raw;
  size_t got = 0;
  for (; ok && got < n; got++) {
    ok = tpl_path_get(rt, &path, items->v[got], p[1], &raw[got]);
    if (ok && !(ok = fold ? tpl_fold_case(rt, tpl_ref(raw[got]), &keys[got])
                          : (keys[got] = tpl_ref(raw[got]), true))) {
      tpl_drop(raw[got]);
      break;
    }
  }
  tpl_val sorted = tpl_none();
  tpl_val *kcopy = ok ? calloc(n + 1, sizeof *kcopy) : NULL;
  if (ok && kcopy) {
    for (size_t i = 0; i < n; i++) kcopy[i] = tpl_ref(keys[i]);
    ok = tpl_sorted_list(rt, items, kcopy, false, &sorted);
  } else if (ok) {
    ok = tpl_errc(PASADA_ERR_NOMEM, "out of memory");
  }
  /* the sort is stable: sorted order of indices follows from keys again */
  tpl_list *r = ok ? tpl_list_new(0, TPL_L_LIST) : NULL;
  if (ok && r) {
    size_t *idx = malloc((n + 1) * sizeof *idx);
    ok = idx != NULL;
    for (size_t i = 0; ok && i < n; i++) idx[i] = i;
    ok = ok && tpl_sort_keys(rt, keys, idx, n, false);
    for (size_t i = 0; ok && i < n;) {
      size_t j = i;
      tpl_list *group = tpl_list_new(0, TPL_L_LIST);
      ok = group != NULL;
      while (ok && j < n && tpl_eq(keys[idx[j]], keys[idx[i]]))
        ok = tpl_list_push(group, tpl_ref(items->v[idx[j++]]));
      tpl_list *pair = ok ? tpl_list_new(2, TPL_L_TUPLE) : NULL;
      if (pair) {
        pair->h.flags |= TPL_GROUP;
        pair->v[pair->n++] = tpl_ref(raw[idx[i]]);
        pair->v[pair->n++] = tpl_obj_val(group);
        ok = tpl_list_push(r, tpl_obj_val(pair));
      } else if (group) {
        tpl_release_obj(&group->h);
        ok = false;
      }
      i = j;
    }
    free(idx);
  }
  tpl_drop(sorted);
  for (size_t i = 0; i < got; i++) {
    tpl_drop(keys[i]);
    tpl_drop(raw[i]);
  }
  free(keys);
  free(raw);
  free(kcopy);
  tpl_release_obj(&items->h);
  tpl_path_free(&path);
  if (!ok || !r) {
    if (r) tpl_release_obj(&r->h);
    return false;
  }
  *out = tpl_obj_val(r);
  return true;
}
