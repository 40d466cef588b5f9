/* value.c: the template engine's values: the counting heap, strings, lists,
 * dicts with insertion order, and Python's truth, equality, ordering and
 * hashing over them. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/tpl.h"

_Thread_local tpl_heap *tpl_heap_cur;

#define TPL_EQ_DEPTH 200

void tpl_heap_init(tpl_heap *h, size_t limit, size_t max_str, bool immortal) {
  memset(h, 0, sizeof *h);
  h->live.prev = h->live.next = &h->live;
  h->limit = limit;
  h->max_str = max_str;
  h->immortal = immortal;
}

bool tpl_mem_error(void) {
  const tpl_heap *h = tpl_heap_cur;
  pa_error(PASADA_ERR_ARG, "memory limit reached (%zu MiB of values)", h ? h->limit >> 20 : 0);
  return false;
}

bool tpl_heap_charge(tpl_obj *o, size_t delta) {
  tpl_heap *h = tpl_heap_cur;
  if (!h) return true;
  if (delta > h->limit - h->used) return tpl_mem_error();
  h->used += delta;
  o->bytes += delta;
  return true;
}

void tpl_heap_refund(tpl_obj *o, size_t delta) {
  tpl_heap *h = tpl_heap_cur;
  if (delta > o->bytes) delta = o->bytes;
  o->bytes -= delta;
  if (h) h->used -= delta < h->used ? delta : h->used;
}

void *tpl_obj_new(uint8_t kind, size_t size) {
  tpl_heap *h = tpl_heap_cur;
  if (size > h->limit - h->used) {
    tpl_mem_error();
    return NULL;
  }
  tpl_obj *o = calloc(1, size);
  if (!o) {
    pa_error(PASADA_ERR_NOMEM, "out of memory for a template value");
    return NULL;
  }
  h->used += size;
  o->bytes = size;
  o->kind = kind;
  o->rc = h->immortal ? -1 : 1;
  o->next = h->live.next;
  o->prev = &h->live;
  h->live.next->prev = o;
  h->live.next = o;
  return o;
}

void tpl_retain_obj(tpl_obj *o) {
  if (o->rc >= 0) o->rc++;
}

/* Releases what the object holds (not the object itself). */
static void obj_clear(tpl_obj *o) {
  switch (o->kind) {
    case TPL_LIST: {
      tpl_list *l = (tpl_list *)o;
      for (size_t i = 0; i < l->n; i++) tpl_drop(l->v[i]);
      free(l->v);
      l->v = NULL;
      l->n = 0;
      break;
    }
    case TPL_DICT:
    case TPL_NS: {
      tpl_dict *d = (tpl_dict *)o;
      for (size_t i = 0; i < d->n; i++) {
        tpl_drop(d->k[i]);
        tpl_drop(d->v[i]);
      }
      free(d->k);
      free(d->v);
      free(d->idx);
      d->k = d->v = NULL;
      d->idx = NULL;
      d->n = 0;
      break;
    }
    case TPL_FUNC: {
      tpl_func *f = (tpl_func *)o;
      tpl_drop(f->self);
      f->self = tpl_none();
      if (f->closure) tpl_release_obj(&f->closure->h);
      f->closure = NULL;
      break;
    }
    case TPL_LOOP: {
      tpl_loop *l = (tpl_loop *)o;
      if (l->seq) tpl_release_obj(&l->seq->h);
      tpl_drop(l->changed);
      if (l->scope) tpl_release_obj(&l->scope->h);
      l->seq = NULL;
      l->scope = NULL;
      l->changed = tpl_none();
      break;
    }
    case TPL_SCOPE: {
      tpl_scope *s = (tpl_scope *)o;
      for (size_t i = 0; i < s->n; i++) tpl_drop(s->vals[i]);
      free(s->vals);
      free(s->names);
      s->vals = NULL;
      s->names = NULL;
      s->n = 0;
      if (s->parent) tpl_release_obj(&s->parent->h);
      s->parent = NULL;
      break;
    }
    case TPL_UNDEF: /* never an object */
    default:
      break;
  }
}

/* Objects whose count falls to zero are queued and freed in a loop, so that
 * a deeply nested value does not recurse once per level. */
void tpl_release_obj(tpl_obj *o) {
  if (o->rc < 0) return;
  tpl_heap *h = tpl_heap_cur;
  if (h->sweeping) return;
  if (--o->rc > 0) return;
  o->prev->next = o->next;
  o->next->prev = o->prev;
  o->next = h->dead;
  h->dead = o;
  if (h->draining) return;
  h->draining = true;
  while (h->dead) {
    tpl_obj *d = h->dead;
    h->dead = d->next;
    obj_clear(d);
    h->used -= d->bytes < h->used ? d->bytes : h->used;
    free(d);
  }
  h->draining = false;
}

void tpl_heap_sweep(tpl_heap *h) {
  tpl_heap *saved = tpl_heap_cur;
  tpl_heap_cur = h;
  h->sweeping = true;
  for (tpl_obj *o = h->live.next; o != &h->live; o = o->next) obj_clear(o);
  for (tpl_obj *o = h->live.next; o != &h->live;) {
    tpl_obj *next = o->next;
    free(o);
    o = next;
  }
  h->live.prev = h->live.next = &h->live;
  h->used = 0;
  h->sweeping = false;
  tpl_heap_cur = saved;
}

/* ---- strings ---- */

tpl_str *tpl_str_markup(const char *s, size_t len, bool markup) {
  const tpl_heap *h = tpl_heap_cur;
  if (len > h->max_str) {
    pa_error(PASADA_ERR_ARG, "a string would exceed %zu bytes", h->max_str);
    return NULL;
  }
  tpl_str *o = tpl_obj_new(TPL_STR, sizeof(tpl_str) + len + 1);
  if (!o) return NULL;
  if (len) memcpy(o->s, s, len);
  o->s[len] = '\0';
  o->len = len;
  o->ncp = tpl_utf8_count(s, len);
  if (markup) o->h.sub |= TPL_MARKUP;
  return o;
}

tpl_str *tpl_str_new(const char *s, size_t len) {
  return tpl_str_markup(s, len, false);
}

bool tpl_str_val(const char *s, size_t len, tpl_val *out) {
  tpl_str *o = tpl_str_new(s, len);
  if (!o) return false;
  *out = tpl_obj_val(o);
  return true;
}

tpl_val tpl_undef_named(const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof msg) n = sizeof msg - 1;
  tpl_val v = tpl_undef();
  tpl_str *s = tpl_str_new(msg, (size_t)n);
  if (s) v.o = &s->h;
  return v;
}

tpl_val tpl_undef_unsafe(const char *attr, const char *type) {
  tpl_val v =
      tpl_undef_named("access to attribute '%.100s' of '%.40s' object is unsafe.", attr, type);
  v.sub = TPL_UNDEF_UNSAFE;
  return v;
}

/* ---- lists and dicts ---- */

tpl_list *tpl_list_new(size_t cap, tpl_list_kind kind) {
  tpl_list *l = tpl_obj_new(TPL_LIST, sizeof(tpl_list));
  if (!l) return NULL;
  l->h.sub = (uint8_t)kind;
  if (cap) {
    if (cap > tpl_heap_cur->max_str || !tpl_heap_charge(&l->h, cap * sizeof(tpl_val))) {
      if (cap > tpl_heap_cur->max_str)
        pa_error(PASADA_ERR_ARG, "a list would exceed %zu items", tpl_heap_cur->max_str);
      tpl_release_obj(&l->h);
      return NULL;
    }
    l->v = malloc(cap * sizeof(tpl_val));
    if (!l->v) {
      tpl_release_obj(&l->h);
      pa_error(PASADA_ERR_NOMEM, "out of memory for a list");
      return NULL;
    }
    l->cap = cap;
  }
  return l;
}

bool tpl_list_push(tpl_list *l, tpl_val v) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 8;
    if (l->n >= tpl_heap_cur->max_str) {
      tpl_drop(v);
      return tpl_err("a list would exceed %zu items", tpl_heap_cur->max_str);
    }
    if (!tpl_heap_charge(&l->h, (cap - l->cap) * sizeof(tpl_val))) {
      tpl_drop(v);
      return false;
    }
    tpl_val *nv = realloc(l->v, cap * sizeof(tpl_val));
    if (!nv) {
      tpl_drop(v);
      return tpl_errc(PASADA_ERR_NOMEM, "out of memory for a list");
    }
    l->v = nv;
    l->cap = cap;
  }
  l->v[l->n++] = v;
  return true;
}

tpl_dict *tpl_dict_new(void) {
  return tpl_obj_new(TPL_DICT, sizeof(tpl_dict));
}
tpl_dict *tpl_ns_new(void) {
  return tpl_obj_new(TPL_NS, sizeof(tpl_dict));
}

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
  return mix64(h);
}

bool tpl_hash(tpl_val v, uint64_t *out) {
  switch (v.kind) {
    case TPL_UNDEF:
      *out = 0x5555;
      return true;
    case TPL_NONE:
      *out = 0x1234;
      return true;
    case TPL_BOOL:
      *out = mix64((uint64_t)v.b);
      return true;
    case TPL_INT:
      *out = mix64((uint64_t)v.i);
      return true;
    case TPL_FLOAT:
      if (v.f == floor(v.f) && fabs(v.f) < 9.2e18) {
        *out = mix64((uint64_t)(int64_t)v.f);
      } else {
        uint64_t bits;
        memcpy(&bits, &v.f, 8);
        *out = mix64(bits ^ 0xf10a7);
      }
      return true;
    case TPL_STR:
      *out = hash_bytes(tpl_s(v)->s, tpl_s(v)->len);
      return true;
    case TPL_LIST: {
      const tpl_list *l = tpl_l(v);
      if (l->h.sub == TPL_L_TUPLE) {
        uint64_t h = 0x7u;
        for (size_t i = 0; i < l->n; i++) {
          uint64_t e;
          if (!tpl_hash(l->v[i], &e)) return false;
          h = mix64(h * 31 + e);
        }
        *out = h;
        return true;
      }
      if (l->h.sub == TPL_L_LIST || l->h.sub >= TPL_L_ITEMS) break;
      *out = mix64((uint64_t)(uintptr_t)v.o);
      return true;
    }
    case TPL_DICT:
      break;
    default:
      *out = mix64((uint64_t)(uintptr_t)v.o);
      return true; /* identity */
  }
  pa_error(PASADA_ERR_ARG, "unhashable type: '%s'", tpl_type_name(v));
  return false;
}

static bool dict_index(tpl_dict *d, size_t icap) {
  int32_t *idx = malloc(icap * sizeof(int32_t));
  if (!idx) return tpl_errc(PASADA_ERR_NOMEM, "out of memory for a dict");
  if (!tpl_heap_charge(&d->h, icap * sizeof(int32_t))) {
    free(idx);
    return false;
  }
  if (d->idx) tpl_heap_refund(&d->h, d->icap * sizeof(int32_t));
  free(d->idx);
  memset(idx, 0xff, icap * sizeof(int32_t));
  for (size_t i = 0; i < d->n; i++) {
    uint64_t hv = 0;
    tpl_hash(d->k[i], &hv); /* keys in the dict are hashable */
    size_t j = hv & (icap - 1);
    while (idx[j] >= 0) j = (j + 1) & (icap - 1);
    idx[j] = (int32_t)i;
  }
  d->idx = idx;
  d->icap = icap;
  return true;
}

/* The slot of key k: its index into k/v, or -1. */
static long dict_find(const tpl_dict *d, tpl_val k, uint64_t hv) {
  if (!d->idx) {
    for (size_t i = 0; i < d->n; i++)
      if (tpl_eq(d->k[i], k)) return (long)i;
    return -1;
  }
  for (size_t j = hv & (d->icap - 1);; j = (j + 1) & (d->icap - 1)) {
    const int32_t e = d->idx[j];
    if (e < 0) return -1;
    if (tpl_eq(d->k[e], k)) return e;
  }
}

const tpl_val *tpl_dict_get(const tpl_dict *d, tpl_val k, bool *err) {
  uint64_t hv;
  *err = false;
  if (!tpl_hash(k, &hv)) {
    *err = true;
    return NULL;
  }
  const long i = dict_find(d, k, hv);
  return i < 0 ? NULL : &d->v[i];
}

const tpl_val *tpl_dict_get_str(const tpl_dict *d, const char *key, size_t len) {
  if (!d->idx) {
    for (size_t i = 0; i < d->n; i++) {
      const tpl_val k = d->k[i];
      if (k.kind == TPL_STR && tpl_s(k)->len == len && !memcmp(tpl_s(k)->s, key, len))
        return &d->v[i];
    }
    return NULL;
  }
  const uint64_t hv = hash_bytes(key, len);
  for (size_t j = hv & (d->icap - 1);; j = (j + 1) & (d->icap - 1)) {
    const int32_t e = d->idx[j];
    if (e < 0) return NULL;
    const tpl_val k = d->k[e];
    if (k.kind == TPL_STR && tpl_s(k)->len == len && !memcmp(tpl_s(k)->s, key, len))
      return &d->v[e];
  }
}

bool tpl_dict_set(tpl_dict *d, tpl_val k, tpl_val v) {
  uint64_t hv;
  if (!tpl_hash(k, &hv)) goto fail;
  const long i = dict_find(d, k, hv);
  if (i >= 0) {
    tpl_drop(k);
    tpl_drop(d->v[i]);
    d->v[i] = v;
    return true;
  }
  if (d->n == d->cap) {
    const size_t cap = d->cap ? d->cap * 2 : 4;
    if (d->n >= tpl_heap_cur->max_str) {
      pa_error(PASADA_ERR_ARG, "a dict would exceed %zu items", tpl_heap_cur->max_str);
      goto fail;
    }
    if (!tpl_heap_charge(&d->h, (cap - d->cap) * 2 * sizeof(tpl_val))) goto fail;
    tpl_val *nk = realloc(d->k, cap * sizeof(tpl_val));
    if (nk) d->k = nk;
    tpl_val *nv = nk ? realloc(d->v, cap * sizeof(tpl_val)) : NULL;
    if (nv) d->v = nv;
    if (!nk || !nv) {
      pa_error(PASADA_ERR_NOMEM, "out of memory for a dict");
      goto fail;
    }
    d->cap = cap;
  }
  d->k[d->n] = k;
  d->v[d->n] = v;
  d->n++;
  if (d->n > 8 && d->n * 2 > d->icap) {
    size_t icap = 32;
    while (icap < d->n * 4) icap *= 2;
    if (!dict_index(d, icap)) {
      d->n--;
      goto fail;
    }
  } else if (d->idx) {
    size_t j = hv & (d->icap - 1);
    while (d->idx[j] >= 0) j = (j + 1) & (d->icap - 1);
    d->idx[j] = (int32_t)(d->n - 1);
  }
  return true;
fail:
  tpl_drop(k);
  tpl_drop(v);
  return false;
}

tpl_func *tpl_func_new(tpl_func_kind kind, int id, const char *name) {
  tpl_func *f = tpl_obj_new(TPL_FUNC, sizeof(tpl_func));
  if (!f) return NULL;
  f->fkind = (uint8_t)kind;
  f->id = id;
  f->name = name;
  f->self = tpl_none();
  return f;
}

/* ---- Python semantics ---- */

bool tpl_is_number(tpl_val v) {
  return v.kind == TPL_BOOL || v.kind == TPL_INT || v.kind == TPL_FLOAT;
}

double tpl_num(tpl_val v) {
  return v.kind == TPL_FLOAT ? v.f : v.kind == TPL_INT ? (double)v.i : (double)v.b;
}

bool tpl_truthy(tpl_val v) {
  switch (v.kind) {
    case TPL_UNDEF:
    case TPL_NONE:
      return false;
    case TPL_BOOL:
      return v.b;
    case TPL_INT:
      return v.i != 0;
    case TPL_FLOAT:
      return v.f != 0.0;
    case TPL_STR:
      return tpl_s(v)->len != 0;
    case TPL_LIST: {
      const tpl_list *l = tpl_l(v);
      if (l->h.sub == TPL_L_GEN || l->h.sub == TPL_L_REVERSED) return true;
      return l->n != 0;
    }
    case TPL_DICT:
      return tpl_d(v)->n != 0;
    default:
      return true;
  }
}

const char *tpl_type_name(tpl_val v) {
  switch (v.kind) {
    case TPL_UNDEF:
      return "Undefined";
    case TPL_NONE:
      return "NoneType";
    case TPL_BOOL:
      return "bool";
    case TPL_INT:
      return "int";
    case TPL_FLOAT:
      return "float";
    case TPL_STR:
      return tpl_is_markup(v) ? "Markup" : "str";
    case TPL_LIST: {
      static const char *const names[] = {
          "list",       "tuple",     "generator",   "list_reverseiterator",
          "dict_items", "dict_keys", "dict_values", "range"};
      return names[tpl_l(v)->h.sub & 7];
    }
    case TPL_DICT:
      return "dict";
    case TPL_NS:
      return "Namespace";
    case TPL_FUNC: {
      const tpl_func *f = (const tpl_func *)v.o;
      return f->fkind == TPL_F_MACRO    ? "Macro"
             : f->fkind == TPL_F_METHOD ? "builtin_function_or_method"
             : f->fkind == TPL_F_JOINER ? "Joiner"
             : f->fkind == TPL_F_CYCLER ? "Cycler"
                                        : "function";
    }
    case TPL_LOOP:
      return "LoopContext";
    default:
      return "object";
  }
}

static bool is_seq_list(tpl_val v) {
  return v.kind == TPL_LIST && (tpl_l(v)->h.sub == TPL_L_LIST || tpl_l(v)->h.sub == TPL_L_TUPLE ||
                                tpl_l(v)->h.sub == TPL_L_RANGE);
}

static bool eq_depth(tpl_val a, tpl_val b, int depth) {
  if (depth > TPL_EQ_DEPTH) return false;
  if (tpl_is_number(a) && tpl_is_number(b)) {
    if (a.kind == TPL_FLOAT || b.kind == TPL_FLOAT) return tpl_num(a) == tpl_num(b);
    const int64_t x = a.kind == TPL_INT ? a.i : a.b, y = b.kind == TPL_INT ? b.i : b.b;
    return x == y;
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case TPL_UNDEF:
    case TPL_NONE:
      return true;
    case TPL_STR:
      return tpl_s(a)->len == tpl_s(b)->len && !memcmp(tpl_s(a)->s, tpl_s(b)->s, tpl_s(a)->len);
    case TPL_LIST: {
      const tpl_list *x = tpl_l(a), *y = tpl_l(b);
      if (x == y) return true;
      const int kx = x->h.sub == TPL_L_RANGE ? TPL_L_LIST : x->h.sub;
      const int ky = y->h.sub == TPL_L_RANGE ? TPL_L_LIST : y->h.sub;
      if (kx != ky || kx == TPL_L_GEN || kx == TPL_L_REVERSED || x->n != y->n) return false;
      for (size_t i = 0; i < x->n; i++)
        if (!eq_depth(x->v[i], y->v[i], depth + 1)) return false;
      return true;
    }
    case TPL_DICT: {
      const tpl_dict *x = tpl_d(a), *y = tpl_d(b);
      if (x == y) return true;
      if (x->n != y->n) return false;
      for (size_t i = 0; i < x->n; i++) {
        bool err;
        const tpl_val *o = tpl_dict_get(y, x->k[i], &err);
        if (!o || !eq_depth(x->v[i], *o, depth + 1)) return false;
      }
      return true;
    }
    default:
      return a.o == b.o;
  }
}

bool tpl_eq(tpl_val a, tpl_val b) {
  return eq_depth(a, b, 0);
}

static bool cmp_depth(tpl_val a, tpl_val b, int *out, int depth) {
  if (tpl_is_number(a) && tpl_is_number(b)) {
    if (a.kind == TPL_FLOAT || b.kind == TPL_FLOAT) {
      const double x = tpl_num(a), y = tpl_num(b);
      *out = x < y ? -1 : x > y ? 1 : 0; /* NaN: neither smaller nor larger */
      return true;
    }
    const int64_t x = a.kind == TPL_INT ? a.i : a.b, y = b.kind == TPL_INT ? b.i : b.b;
    *out = x < y ? -1 : x > y;
    return true;
  }
  if (a.kind == TPL_STR && b.kind == TPL_STR) {
    const tpl_str *x = tpl_s(a), *y = tpl_s(b);
    const size_t n = x->len < y->len ? x->len : y->len;
    const int c = memcmp(x->s, y->s, n);
    *out = c < 0 ? -1 : c > 0 ? 1 : x->len < y->len ? -1 : x->len > y->len;
    return true;
  }
  if (is_seq_list(a) && is_seq_list(b) &&
      (tpl_l(a)->h.sub == TPL_L_TUPLE) == (tpl_l(b)->h.sub == TPL_L_TUPLE) &&
      depth < TPL_EQ_DEPTH) {
    const tpl_list *x = tpl_l(a), *y = tpl_l(b);
    const size_t n = x->n < y->n ? x->n : y->n;
    for (size_t i = 0; i < n; i++)
      if (!eq_depth(x->v[i], y->v[i], depth + 1))
        return cmp_depth(x->v[i], y->v[i], out, depth + 1);
    *out = x->n < y->n ? -1 : x->n > y->n;
    return true;
  }
  pa_error(PASADA_ERR_ARG, "'<' not supported between instances of '%s' and '%s'", tpl_type_name(a),
           tpl_type_name(b));
  return false;
}

bool tpl_compare(tpl_val a, tpl_val b, int *out) {
  return cmp_depth(a, b, out, 0);
}

bool tpl_less(tpl_val a, tpl_val b, bool *lt) {
  int c;
  if (!tpl_compare(a, b, &c)) return false;
  *lt = c < 0;
  return true;
}

bool tpl_len(tpl_val v, int64_t *out) {
  switch (v.kind) {
    case TPL_UNDEF:
      *out = 0;
      return true;
    case TPL_STR:
      *out = (int64_t)tpl_s(v)->ncp;
      return true;
    case TPL_LIST:
      if (tpl_l(v)->h.sub == TPL_L_GEN || tpl_l(v)->h.sub == TPL_L_REVERSED) break;
      *out = (int64_t)tpl_l(v)->n;
      return true;
    case TPL_DICT:
      *out = (int64_t)tpl_d(v)->n;
      return true;
    case TPL_LOOP:
      *out = (int64_t)((tpl_loop *)v.o)->seq->n;
      return true;
    default:
      break;
  }
  pa_error(PASADA_ERR_ARG, "object of type '%s' has no len()", tpl_type_name(v));
  return false;
}

bool tpl_iterate(tpl_val v, tpl_list **out) {
  *out = NULL; /* on failure too: callers release it when set */
  switch (v.kind) {
    case TPL_UNDEF:
      *out = tpl_list_new(0, TPL_L_LIST);
      return *out != NULL;
    case TPL_LIST: {
      tpl_list *l = tpl_l(v);
      if (l->h.sub == TPL_L_GEN || l->h.sub == TPL_L_REVERSED) {
        if (l->h.flags & TPL_CONSUMED) {
          *out = tpl_list_new(0, TPL_L_LIST);
          return *out != NULL;
        }
        l->h.flags |= TPL_CONSUMED;
      }
      tpl_retain_obj(&l->h);
      *out = l;
      return true;
    }
    case TPL_DICT: {
      const tpl_dict *d = tpl_d(v);
      tpl_list *l = tpl_list_new(d->n, TPL_L_LIST);
      if (!l) return false;
      for (size_t i = 0; i < d->n; i++) l->v[l->n++] = tpl_ref(d->k[i]);
      *out = l;
      return true;
    }
    case TPL_STR: {
      const tpl_str *s = tpl_s(v);
      tpl_list *l = tpl_list_new(s->ncp, TPL_L_LIST);
      if (!l) return false;
      for (size_t i = 0; i < s->len;) {
        const size_t start = i;
        tpl_utf8_next(s->s, s->len, &i);
        tpl_val c;
        if (!tpl_str_val(s->s + start, i - start, &c)) {
          tpl_release_obj(&l->h);
          return false;
        }
        l->v[l->n++] = c;
      }
      *out = l;
      return true;
    }
    case TPL_LOOP:
      break;
    default:
      break;
  }
  pa_error(PASADA_ERR_ARG, "'%s' object is not iterable", tpl_type_name(v));
  return false;
}
