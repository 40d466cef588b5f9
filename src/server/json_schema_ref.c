/* json_schema_ref.c: the parts of JSON Schema -> GBNF that rewrite schemas
 * before they are spelled: local $ref resolution (JSON pointers), the check
 * that no $ref chain recurses before consuming input, and allOf,
 * where schemas merge keyword by keyword (types intersected, properties
 * merged, bounds tightened, additionalProperties applied to the other
 * side's properties), or fail with a 400 naming the keyword. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/json_schema_int.h"

const cJSON *js_pointer(const cJSON *root, const char *ref, int *why) {
  if (ref[0] != '#') return *why = 1, NULL;
  const cJSON *node = root;
  const char *p = ref + 1;
  while (*p == '/') {
    p++;
    char seg[256];
    size_t n = 0;
    for (; *p && *p != '/' && n + 1 < sizeof seg; p++) {
      char ch = *p;
      if (ch == '~' && (p[1] == '0' || p[1] == '1'))
        ch = *++p == '0' ? '~' : '/';
      else if (ch == '%' && p[1] && p[2]) {
        unsigned v;
        if (sscanf(p + 1, "%2x", &v) == 1) ch = (char)v, p += 2;
      }
      seg[n++] = ch;
    }
    seg[n] = 0;
    if (cJSON_IsArray(node)) {
      char *end;
      long i = strtol(seg, &end, 10);
      node = *end || i < 0 ? NULL : cJSON_GetArrayItem(node, (int)i);
    } else if (cJSON_IsObject(node)) {
      node = cJSON_GetObjectItemCaseSensitive(node, seg);
    } else {
      node = NULL;
    }
    if (!node) return *why = 2, NULL;
  }
  if (*p) return *why = 3, NULL;
  return node;
}

const cJSON *js_resolve(js_ctx *c, const char *ref) {
  int why = 0;
  const cJSON *node = js_pointer(c->root, ref, &why);
  if (!node)
    js_fail(c,
            why == 1   ? "$ref '%.200s': only references into the same schema (#...) are supported"
            : why == 2 ? "$ref '%.200s' names nothing in the schema"
                       : "$ref '%.200s' is not a JSON pointer",
            ref);
  return node;
}

/* ---- $ref cycles ---- */

/* One $ref followed on the current walk: its target, its text, and
 * whether an anyOf / oneOf of several branches lies between it and the
 * previous one (the cycle then has an exit: still left recursion). */
typedef struct {
  const cJSON *node;
  const char *ref;
  bool branch;
} js_hop;

typedef struct {
  js_ctx *c;
  js_hop hops[JS_MAX_DEPTH + 1];
  int n_hops;
  const cJSON **done; /* targets whose every chain was followed: no cycle */
  const cJSON **seen; /* targets scanned for entry points */
  int n_done, n_seen, cap_done, cap_seen;
} js_cycles;

static bool in_set(const cJSON *const *set, int n, const cJSON *x) {
  for (int i = 0; i < n; i++)
    if (set[i] == x) return true;
  return false;
}

static bool add_set(js_ctx *c, const cJSON ***set, int *n, int *cap, const cJSON *x) {
  if (*n == *cap) {
    int nc = *cap ? *cap * 2 : 16;
    const cJSON **v = realloc(*set, (size_t)nc * sizeof *v);
    if (!v) return js_fail(c, "out of memory");
    *set = v;
    *cap = nc;
  }
  (*set)[(*n)++] = x;
  return true;
}

/* The cycle hops[i..] closed by `ref` (branch: past an anyOf / oneOf). */
static bool report_cycle(js_cycles *w, int i, bool branch) {
  char chain[300];
  size_t n = 0;
  for (int k = i; k < w->n_hops; k++) {
    branch |= k > i && w->hops[k].branch;
    n += (size_t)snprintf(chain + n, sizeof chain - n, "%s\"%.80s\"", k > i ? " -> " : "",
                          w->hops[k].ref);
    if (n >= sizeof chain - 1) break;
  }
  return js_fail(w->c,
                 branch ? "$ref cycle through %s reaches itself before any input (an anyOf / "
                          "oneOf branch that recurses first is left recursion)"
                        : "$ref cycle through %s matches no finite value",
                 chain);
}

/* Follows s's chains of $ref, allOf, anyOf and oneOf (nothing consumed on
 * the way) in depth; a $ref to a target on the walk is a cycle. Deeper
 * than JS_MAX_DEPTH is the generator's own limit, refused as it does. */
static bool left_walk(js_cycles *w, const cJSON *s, bool branch, int depth) {
  if (!cJSON_IsObject(s)) return true;
  if (depth > JS_MAX_DEPTH) return js_fail(w->c, "schemas nest deeper than %d", JS_MAX_DEPTH);
  const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
  int why = 0;
  const cJSON *t = cJSON_IsString(ref) ? js_pointer(w->c->root, ref->valuestring, &why) : NULL;
  if (t) {
    for (int i = 0; i < w->n_hops; i++)
      if (w->hops[i].node == t) return report_cycle(w, i, branch);
    if (!in_set(w->done, w->n_done, t)) { /* (n_hops <= depth <= JS_MAX_DEPTH) */
      w->hops[w->n_hops++] = (js_hop){t, ref->valuestring, branch};
      bool ok = left_walk(w, t, false, depth + 1);
      w->n_hops--;
      if (!ok || !add_set(w->c, &w->done, &w->n_done, &w->cap_done, t)) return false;
    }
  }
  static const char *const combos[] = {"allOf", "anyOf", "oneOf"};
  for (int k = 0; k < 3; k++) {
    const cJSON *subs = cJSON_GetObjectItemCaseSensitive(s, combos[k]);
    if (!cJSON_IsArray(subs)) continue;
    const bool several = k > 0 && cJSON_GetArraySize(subs) > 1;
    for (const cJSON *x = subs->child; x; x = x->next)
      if (!left_walk(w, x, branch || several, depth + 1)) return false;
  }
  return true;
}

/* Every schema under s reachable through any keyword (and $ref, each
 * target once) where a value starts after input was consumed (properties,
 * items, ...): the walk's entry points, with s's path for the error. */
static bool scan(js_cycles *w, const cJSON *s, int depth) {
  if (!cJSON_IsObject(s) || depth > 4 * JS_MAX_DEPTH) return true;
  js_ctx *c = w->c;
  static const char *const lists[] = {"allOf", "anyOf", "oneOf", "prefixItems", "items"};
  static const char *const singles[] = {"additionalProperties", "items", "additionalItems"};
  bool ok = true;
  for (int k = 0; k < 5 && ok; k++) { /* the combinators' branches and the tuples' items */
    const cJSON *subs = cJSON_GetObjectItemCaseSensitive(s, lists[k]);
    int i = 0;
    for (const cJSON *x = cJSON_IsArray(subs) ? subs->child : NULL; ok && x; x = x->next, i++) {
      char seg[48];
      snprintf(seg, sizeof seg, "%s/%d", lists[k], i);
      size_t old = js_push_path(c, seg);
      ok = (k < 3 || left_walk(w, x, false, 0)) && scan(w, x, depth + 1);
      js_pop_path(c, old);
    }
  }
  for (int k = 0; k < 3 && ok; k++) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(s, singles[k]);
    if (!cJSON_IsObject(x)) continue;
    size_t old = js_push_path(c, singles[k]);
    ok = left_walk(w, x, false, 0) && scan(w, x, depth + 1);
    js_pop_path(c, old);
  }
  const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
  for (const cJSON *x = cJSON_IsObject(props) ? props->child : NULL; ok && x; x = x->next) {
    size_t old = js_push_path(c, "properties");
    js_push_path(c, x->string);
    ok = left_walk(w, x, false, 0) && scan(w, x, depth + 1);
    js_pop_path(c, old);
  }
  const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
  int why = 0;
  const cJSON *t = ok && cJSON_IsString(ref) ? js_pointer(c->root, ref->valuestring, &why) : NULL;
  if (t && !in_set(w->seen, w->n_seen, t)) {
    char saved[sizeof c->path];
    memcpy(saved, c->path, sizeof saved);
    snprintf(c->path, sizeof c->path, "%s", ref->valuestring);
    ok = add_set(c, &w->seen, &w->n_seen, &w->cap_seen, t) && scan(w, t, depth + 1);
    memcpy(c->path, saved, sizeof saved);
  }
  return ok;
}

bool js_check_ref_cycles(js_ctx *c) {
  js_cycles w = {.c = c};
  bool ok = left_walk(&w, c->root, false, 0) && scan(&w, c->root, 0);
  free(w.done);
  free(w.seen);
  return ok;
}

cJSON *js_own(js_ctx *c, cJSON *x) {
  if (!x) return js_fail(c, "out of memory"), NULL;
  if (c->n_owned == c->cap_owned) {
    int cap = c->cap_owned ? c->cap_owned * 2 : 16;
    cJSON **v = realloc(c->owned, (size_t)cap * sizeof *v);
    if (!v) {
      cJSON_Delete(x);
      return js_fail(c, "out of memory"), NULL;
    }
    c->owned = v;
    c->cap_owned = cap;
  }
  c->owned[c->n_owned++] = x;
  return x;
}

/* Whether schema s has keys other than annotations and `except`. */
bool js_constrains(const cJSON *s, const char *except) {
  if (!cJSON_IsObject(s)) return false;
  for (const cJSON *k = s->child; k; k = k->next)
    if (!js_in_list(js_annotations, k->string) && (!except || strcmp(k->string, except)))
      return true;
  return false;
}

/* ---- allOf: merging schemas ---- */

/* s with its $ref and allOf folded in (a new owned schema, or s itself). */
const cJSON *js_flatten(js_ctx *c, const cJSON *s) {
  if (c->failed) return NULL;
  if (cJSON_IsTrue(s)) return js_own(c, cJSON_CreateObject());
  if (!cJSON_IsObject(s)) return js_fail(c, "a schema must be an object or a boolean"), NULL;
  const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
  const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
  if (!ref && !all) return s;
  if (++c->depth > JS_MAX_DEPTH)
    return js_fail(c, "schemas nest deeper than %d (a recursive allOf?)", JS_MAX_DEPTH), NULL;
  cJSON *rest = js_own(c, cJSON_Duplicate(s, true));
  if (!rest) return NULL;
  cJSON_DeleteItemFromObjectCaseSensitive(rest, "$ref");
  cJSON_DeleteItemFromObjectCaseSensitive(rest, "allOf");
  const cJSON *acc = rest;
  if (ref) {
    if (!cJSON_IsString(ref)) return js_fail(c, "$ref must be a string"), NULL;
    const cJSON *target = js_resolve(c, ref->valuestring);
    const cJSON *flat = target ? js_flatten(c, target) : NULL;
    acc = flat ? js_merge(c, acc, flat) : NULL;
  }
  if (all && acc) {
    if (!cJSON_IsArray(all) || !cJSON_GetArraySize(all))
      return js_fail(c, "allOf must be a non-empty array"), NULL;
    for (const cJSON *sub = all->child; sub && acc; sub = sub->next) {
      const cJSON *flat = js_flatten(c, sub);
      acc = flat ? js_merge(c, acc, flat) : NULL;
    }
  }
  c->depth--;
  return acc;
}

cJSON *js_as_types(js_ctx *c, const cJSON *t, cJSON *out) {
  if (cJSON_IsString(t)) {
    cJSON_AddItemToArray(out, cJSON_CreateString(t->valuestring));
  } else if (cJSON_IsArray(t)) {
    for (const cJSON *x = t->child; x; x = x->next)
      if (cJSON_IsString(x)) cJSON_AddItemToArray(out, cJSON_CreateString(x->valuestring));
  }
  return out;
}

static bool has_type(const cJSON *types, const char *t) {
  for (const cJSON *x = types->child; x; x = x->next)
    if (!strcmp(x->valuestring, t)) return true;
  return false;
}

/* The merged value of key k present in both a and b. */
static cJSON *merge_key(js_ctx *c, const char *k, const cJSON *x, const cJSON *y) {
  if (js_in_list(js_annotations, k)) return cJSON_Duplicate(x, true);
  if (!strcmp(k, "type")) {
    cJSON *tx = js_as_types(c, x, cJSON_CreateArray()),
          *ty = js_as_types(c, y, cJSON_CreateArray());
    cJSON *out = cJSON_CreateArray();
    for (const cJSON *t = tx->child; t; t = t->next) {
      if (has_type(ty, t->valuestring))
        cJSON_AddItemToArray(out, cJSON_CreateString(t->valuestring));
      else if (!strcmp(t->valuestring, "number") && has_type(ty, "integer"))
        cJSON_AddItemToArray(out, cJSON_CreateString("integer"));
      else if (!strcmp(t->valuestring, "integer") && has_type(ty, "number"))
        cJSON_AddItemToArray(out, cJSON_CreateString("integer"));
    }
    cJSON_Delete(tx);
    cJSON_Delete(ty);
    if (!cJSON_GetArraySize(out)) {
      cJSON_Delete(out);
      return js_fail(c, "allOf: the types have nothing in common"), NULL;
    }
    return out;
  }
  if (!strcmp(k, "properties")) {
    if (!cJSON_IsObject(x) || !cJSON_IsObject(y))
      return js_fail(c, "properties must be an object"), NULL;
    cJSON *out = cJSON_CreateObject();
    for (const cJSON *p = x->child; p; p = p->next) {
      const cJSON *q = cJSON_GetObjectItemCaseSensitive(y, p->string);
      const cJSON *m = q ? js_merge(c, js_flatten(c, p), js_flatten(c, q)) : p;
      if (!m) {
        cJSON_Delete(out);
        return NULL;
      }
      cJSON_AddItemToObject(out, p->string, cJSON_Duplicate(m, true));
    }
    for (const cJSON *q = y->child; q; q = q->next)
      if (!cJSON_GetObjectItemCaseSensitive(x, q->string))
        cJSON_AddItemToObject(out, q->string, cJSON_Duplicate(q, true));
    return out;
  }
  if (!strcmp(k, "required")) {
    cJSON *out = cJSON_Duplicate(x, true);
    for (const cJSON *q = y->child; q; q = q->next) {
      bool seen = false;
      for (const cJSON *p = x->child; p && !seen; p = p->next) seen = cJSON_Compare(p, q, true);
      if (!seen) cJSON_AddItemToArray(out, cJSON_Duplicate(q, true));
    }
    return out;
  }
  if (!strcmp(k, "additionalProperties") || !strcmp(k, "items")) {
    if (cJSON_IsFalse(x) || cJSON_IsFalse(y)) return cJSON_CreateFalse();
    if (cJSON_IsTrue(x)) return cJSON_Duplicate(y, true);
    if (cJSON_IsTrue(y)) return cJSON_Duplicate(x, true);
    if (cJSON_IsObject(x) && cJSON_IsObject(y)) {
      const cJSON *m = js_merge(c, js_flatten(c, x), js_flatten(c, y));
      return m ? cJSON_Duplicate(m, true) : NULL;
    }
  }
  if (!strcmp(k, "enum")) {
    cJSON *out = cJSON_CreateArray();
    for (const cJSON *p = x->child; p; p = p->next)
      for (const cJSON *q = y->child; q; q = q->next)
        if (cJSON_Compare(p, q, true)) {
          cJSON_AddItemToArray(out, cJSON_Duplicate(p, true));
          break;
        }
    return out;
  }
  bool lower = !strcmp(k, "minimum") || !strcmp(k, "minLength") || !strcmp(k, "minItems") ||
               (!strcmp(k, "exclusiveMinimum") && cJSON_IsNumber(x));
  bool upper = !strcmp(k, "maximum") || !strcmp(k, "maxLength") || !strcmp(k, "maxItems") ||
               (!strcmp(k, "exclusiveMaximum") && cJSON_IsNumber(x));
  if ((lower || upper) && cJSON_IsNumber(x) && cJSON_IsNumber(y)) {
    double v = lower ? fmax(x->valuedouble, y->valuedouble) : fmin(x->valuedouble, y->valuedouble);
    return cJSON_CreateNumber(v);
  }
  if (cJSON_Compare(x, y, true)) return cJSON_Duplicate(x, true);
  return js_fail(c, "allOf: '%s' differs between the schemas and cannot be merged", k), NULL;
}

/* The schema both a and b describe, where the keywords merge. */
cJSON *js_merge(js_ctx *c, const cJSON *a, const cJSON *b) {
  if (!a || !b || c->failed) return NULL;
  cJSON *out = js_own(c, cJSON_CreateObject());
  if (!out) return NULL;
  for (const cJSON *k = a->child; k; k = k->next) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(b, k->string);
    cJSON *v = o ? merge_key(c, k->string, k, o) : cJSON_Duplicate(k, true);
    if (!v) return NULL;
    cJSON_AddItemToObject(out, k->string, v);
  }
  for (const cJSON *k = b->child; k; k = k->next)
    if (!cJSON_GetObjectItemCaseSensitive(a, k->string))
      cJSON_AddItemToObject(out, k->string, cJSON_Duplicate(k, true));
  const cJSON *any = cJSON_GetObjectItemCaseSensitive(out, "anyOf"),
              *one = cJSON_GetObjectItemCaseSensitive(out, "oneOf");
  if (any && one) return js_fail(c, "allOf: anyOf and oneOf cannot be merged"), NULL;
  /* additionalProperties sees only its own schema's properties: a property
   * the other side adds must pass it (false: must not appear) */
  cJSON *props = cJSON_GetObjectItemCaseSensitive(out, "properties");
  const cJSON *req = cJSON_GetObjectItemCaseSensitive(out, "required");
  for (int side = 0; side < 2; side++) {
    const cJSON *me = side ? b : a;
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(me, "additionalProperties");
    if (!addl || cJSON_IsTrue(addl)) continue;
    const cJSON *mine = cJSON_GetObjectItemCaseSensitive(me, "properties");
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
      if (cJSON_IsString(r) && cJSON_IsFalse(addl) &&
          !cJSON_GetObjectItemCaseSensitive(mine, r->valuestring))
        return js_fail(c,
                       "allOf: '%.64s' is required but a schema with additionalProperties false "
                       "does not list it",
                       r->valuestring),
               NULL;
    for (cJSON *p = props ? props->child : NULL, *next; p; p = next) {
      next = p->next;
      if (cJSON_GetObjectItemCaseSensitive(mine, p->string)) continue;
      if (cJSON_IsFalse(addl)) {
        cJSON_DeleteItemFromObjectCaseSensitive(props, p->string);
      } else {
        const cJSON *m = js_merge(c, js_flatten(c, p), js_flatten(c, addl));
        if (!m) return NULL;
        cJSON_ReplaceItemInObjectCaseSensitive(props, p->string, cJSON_Duplicate(m, true));
      }
    }
  }
  return out;
}
