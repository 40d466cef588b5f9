/* json_schema_finite.c: the check that a schema has a finite instance.
 * A value under a required property, among an array's first minItems items
 * or in an allOf is part of every instance; where each way through a $ref
 * target meets such a part that leads back to it, every instance holds a
 * deeper one and none is finite. The grammar compiler would refuse the
 * generated rules ("can never complete", naming a generated rule); the 400
 * here names the schema's own path of the recursion instead.
 *
 * Finiteness of the $ref targets is a least fixpoint: none is finite at
 * first, then a target is once one of its ways (an anyOf branch, a type,
 * optional properties, minItems 0) needs only finite targets. The test
 * errs towards finite (allOf parts judged one by one, anyOf apart from its
 * siblings, malformed keywords left to the generator): it refuses only
 * schemas that have no finite instance. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/json_schema_int.h"

#define FIN_MAX_STEPS (1L << 22) /* schema visits of one check; past it the check passes */
#define FIN_MAX_HOPS 32          /* $ref hops an explanation follows */

typedef struct {
  js_ctx *c;
  const cJSON **node; /* the root and every $ref target reachable from it */
  const char **ref;   /* the $ref text naming it ("#" for the root) */
  bool *finite;
  int n, cap;
  long steps;
  bool over; /* FIN_MAX_STEPS passed */
  /* the explanation of a target that is not finite: the $ref sites on the
   * way (site: the pointer of the schema holding the $ref) */
  bool explain, found;
  int start, n_hops, cycle; /* cycle: the first hop of the loop */
  struct {
    int target;
    char site[128];
  } hops[FIN_MAX_HOPS];
} fin_walk;

static int target_index(const fin_walk *w, const cJSON *node) {
  for (int i = 0; i < w->n; i++)
    if (w->node[i] == node) return i;
  return -1;
}

/* The table index of s's $ref target (added when new and `add`); -1 for
 * none, or for a $ref the generator refuses itself. */
static int target_of(fin_walk *w, const cJSON *s, bool add) {
  const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
  int why = 0;
  const cJSON *t = cJSON_IsString(ref) ? js_pointer(w->c->root, ref->valuestring, &why) : NULL;
  if (!t) return -1;
  int i = target_index(w, t);
  if (i >= 0 || !add) return i;
  if (w->n == w->cap) {
    int cap = w->cap ? 2 * w->cap : 16;
    const cJSON **node = realloc(w->node, (size_t)cap * sizeof *node);
    if (node) w->node = node;
    const char **refs = realloc(w->ref, (size_t)cap * sizeof *refs);
    if (refs) w->ref = refs;
    bool *finite = realloc(w->finite, (size_t)cap * sizeof *finite);
    if (finite) w->finite = finite;
    if (!node || !refs || !finite) return js_fail(w->c, "out of memory"), -1;
    w->cap = cap;
  }
  w->node[w->n] = t;
  w->ref[w->n] = ref->valuestring;
  w->finite[w->n] = false;
  return w->n++;
}

/* Adds the $ref targets of s and of every schema inside it to the table. */
static void collect(fin_walk *w, const cJSON *s, int depth) {
  static const char *const subs[] = {
      "items", "prefixItems", "additionalItems", "additionalProperties",
      "allOf", "anyOf",       "oneOf",           NULL};
  if (!cJSON_IsObject(s) || depth > 4 * JS_MAX_DEPTH || w->c->failed) return;
  target_of(w, s, true);
  for (const cJSON *k = s->child; k; k = k->next) {
    if (!strcmp(k->string, "properties") && cJSON_IsObject(k)) {
      for (const cJSON *p = k->child; p; p = p->next) collect(w, p, depth + 1);
    } else if (js_in_list(subs, k->string)) {
      if (cJSON_IsArray(k))
        for (const cJSON *x = k->child; x; x = x->next) collect(w, x, depth + 1);
      else
        collect(w, k, depth + 1);
    }
  }
}

static bool fin(fin_walk *w, const cJSON *s, int depth);

/* Whether x (a part every instance of the current schema holds, at
 * seg/seg2 below it) is finite; explaining, the first part that is not
 * is explained in turn. */
static bool part(fin_walk *w, const cJSON *x, const char *seg, const char *seg2, int depth) {
  const bool explain = w->explain;
  w->explain = false;
  bool ok = fin(w, x, depth + 1);
  w->explain = explain;
  if (ok || !explain || w->found) return ok;
  size_t old = js_push_path(w->c, seg);
  if (seg2) js_push_path(w->c, seg2);
  fin(w, x, depth + 1);
  js_pop_path(w->c, old);
  return false;
}

/* A $ref to target t that is not finite: explaining, one more hop. */
static bool hop(fin_walk *w, int t) {
  if (!w->explain || w->found) return false;
  if (w->n_hops == FIN_MAX_HOPS) return w->found = true, false;
  w->hops[w->n_hops].target = t;
  snprintf(w->hops[w->n_hops].site, sizeof w->hops[0].site, "%.127s", w->c->path);
  w->n_hops++;
  int seen = t == w->start ? 0 : -1;
  for (int i = 0; i + 1 < w->n_hops && seen < 0; i++)
    if (w->hops[i].target == t) seen = i + 1;
  if (seen >= 0) {
    w->cycle = seen;
    w->found = true;
    return false;
  }
  char saved[sizeof w->c->path];
  memcpy(saved, w->c->path, sizeof saved);
  snprintf(w->c->path, sizeof w->c->path, "%s", w->ref[t]);
  fin(w, w->node[t], 0);
  memcpy(w->c->path, saved, sizeof saved);
  return false;
}

static long count(const cJSON *s, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, k);
  return cJSON_IsNumber(v) && v->valuedouble > 0 ? (long)v->valuedouble : 0;
}

/* An object is finite when its required properties are (optional ones may
 * be left out, additional ones too). */
static bool fin_object(fin_walk *w, const cJSON *s, int depth) {
  const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
  const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
  const cJSON *add = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
  bool ok = true;
  for (const cJSON *r = cJSON_IsArray(req) ? req->child : NULL; ok && r; r = r->next) {
    if (!cJSON_IsString(r)) continue;
    const cJSON *p =
        cJSON_IsObject(props) ? cJSON_GetObjectItemCaseSensitive(props, r->valuestring) : NULL;
    if (p)
      ok = part(w, p, "properties", r->valuestring, depth);
    else if (cJSON_IsObject(add))
      ok = part(w, add, "additionalProperties", NULL, depth);
  }
  return ok;
}

/* An array is finite when its first minItems items are. */
static bool fin_array(fin_walk *w, const cJSON *s, int depth) {
  const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
  const cJSON *rest = cJSON_GetObjectItemCaseSensitive(s, "items");
  const char *prefix_name = "prefixItems", *rest_name = "items";
  if (!prefix && cJSON_IsArray(rest)) { /* draft 4-7 tuples */
    prefix = rest, prefix_name = "items";
    rest = cJSON_GetObjectItemCaseSensitive(s, "additionalItems"), rest_name = "additionalItems";
  }
  const long lo = count(s, "minItems");
  long j = 0;
  bool ok = true;
  for (const cJSON *p = cJSON_IsArray(prefix) ? prefix->child : NULL; ok && p && j < lo;
       p = p->next, j++) {
    char seg[24];
    snprintf(seg, sizeof seg, "%ld", j);
    ok = part(w, p, prefix_name, seg, depth);
  }
  if (ok && j < lo && cJSON_IsObject(rest)) ok = part(w, rest, rest_name, NULL, depth);
  return ok;
}

/* The schema's own type: finite when one of its types is. */
static bool fin_type(fin_walk *w, const cJSON *s, int depth) {
  static const char *const object_keys[] = {"properties", "required", "additionalProperties", NULL};
  static const char *const array_keys[] = {"items", "prefixItems", "additionalItems", "minItems",
                                           NULL};
  if (cJSON_GetObjectItemCaseSensitive(s, "enum") || cJSON_GetObjectItemCaseSensitive(s, "const"))
    return true;
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
  bool object = false, array = false;
  if (cJSON_IsString(type) || cJSON_IsArray(type)) {
    for (const cJSON *t = cJSON_IsArray(type) ? type->child : type; t;
         t = cJSON_IsArray(type) ? t->next : NULL) {
      if (!cJSON_IsString(t)) return true;
      bool o = !strcmp(t->valuestring, "object"), a = !strcmp(t->valuestring, "array");
      if (!o && !a) return true; /* a scalar */
      object |= o, array |= a;
    }
  } else {
    for (const cJSON *k = s->child; k; k = k->next) {
      object |= js_in_list(object_keys, k->string);
      array |= js_in_list(array_keys, k->string);
    }
    if (object == array) return true; /* any value (or refused by the generator) */
  }
  const bool explain = w->explain;
  w->explain = false;
  bool ok = (object && fin_object(w, s, depth)) || (array && fin_array(w, s, depth));
  w->explain = explain;
  if (!ok && explain && !w->found) object ? fin_object(w, s, depth) : fin_array(w, s, depth);
  return ok;
}

/* Whether s has a finite instance, given the targets' finiteness so far. */
static bool fin(fin_walk *w, const cJSON *s, int depth) {
  if (!cJSON_IsObject(s) || depth > 4 * JS_MAX_DEPTH) return true;
  if (++w->steps > FIN_MAX_STEPS) w->over = true;
  if (w->over) return true;
  int t = target_of(w, s, false);
  bool ok = t < 0 || w->finite[t] || hop(w, t);
  const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
  int i = 0;
  for (const cJSON *x = cJSON_IsArray(all) ? all->child : NULL; ok && x; x = x->next, i++) {
    char seg[24];
    snprintf(seg, sizeof seg, "%d", i);
    ok = part(w, x, "allOf", seg, depth);
  }
  static const char *const combos[] = {"anyOf", "oneOf"};
  for (int k = 0; k < 2 && ok; k++) {
    const cJSON *alts = cJSON_GetObjectItemCaseSensitive(s, combos[k]);
    if (!cJSON_IsArray(alts) || !alts->child) continue;
    const bool explain = w->explain;
    w->explain = false;
    ok = false;
    for (const cJSON *x = alts->child; !ok && x; x = x->next) ok = fin(w, x, depth + 1);
    w->explain = explain;
    if (!ok) part(w, alts->child, combos[k], "0", depth); /* explains the first branch */
  }
  return ok && fin_type(w, s, depth);
}

bool js_check_finite(js_ctx *c) {
  fin_walk w = {.c = c};
  if (!cJSON_IsObject(c->root)) return true;
  /* the root is target 0, named "#" */
  w.cap = 16;
  w.node = malloc(16 * sizeof *w.node);
  w.ref = malloc(16 * sizeof *w.ref);
  w.finite = malloc(16 * sizeof *w.finite);
  bool ok = w.node && w.ref && w.finite;
  if (!ok) js_fail(c, "out of memory");
  if (ok) {
    w.node[0] = c->root, w.ref[0] = "#", w.finite[0] = false, w.n = 1;
    for (int i = 0; i < w.n && !c->failed; i++) collect(&w, w.node[i], 0);
    ok = !c->failed;
  }
  /* later targets first: a chain of definitions settles in one pass */
  for (bool changed = ok; changed && !w.over;) {
    changed = false;
    for (int i = w.n - 1; i >= 0; i--)
      if (!w.finite[i] && fin(&w, w.node[i], 0)) w.finite[i] = changed = true;
  }
  for (int i = 0; ok && !w.over && i < w.n; i++) {
    if (w.finite[i]) continue;
    char saved[sizeof c->path];
    memcpy(saved, c->path, sizeof saved);
    snprintf(c->path, sizeof c->path, "%s", w.ref[i]);
    w.explain = true, w.start = i;
    fin(&w, w.node[i], 0);
    char chain[240], hop_text[200];
    size_t n = 0;
    for (int k = w.cycle; k < w.n_hops; k++) {
      int len = snprintf(hop_text, sizeof hop_text, "%s%.100s -> \"%.80s\"",
                         k > w.cycle ? ", " : "", w.hops[k].site, w.ref[w.hops[k].target]);
      if (n + (size_t)len + 6 >= sizeof chain) { /* a long loop: its start, then "..." */
        snprintf(chain + n, sizeof chain - n, ", ...");
        break;
      }
      memcpy(chain + n, hop_text, (size_t)len + 1);
      n += (size_t)len;
    }
    /* where the loop is entered: the target itself, or the $ref leading to it */
    snprintf(c->path, sizeof c->path, "%s", w.cycle == 0 ? w.ref[i] : w.hops[w.cycle - 1].site);
    ok = js_fail(c,
                 "recursion through %s is required at every level (a required property, "
                 "minItems or allOf) and matches no finite value",
                 w.n_hops ? chain : w.ref[i]);
    memcpy(c->path, saved, sizeof saved);
  }
  free(w.node);
  free(w.ref);
  free(w.finite);
  return ok;
}
