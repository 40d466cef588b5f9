/* filters.h: what the filter files share: the filter ids, argument
 * helpers, attribute paths (make_attrgetter), sorting, and the filters of
 * filters_seq.c (sequences) and filters_text.c (text and numbers) that
 * filters.c dispatches to. */
#ifndef PASADA_TPL_FILTERS_H
#define PASADA_TPL_FILTERS_H

#include "template/eval.h"

enum {
  F_ABS,
  F_ATTR,
  F_BATCH,
  F_CAPITALIZE,
  F_CENTER,
  F_COUNT,
  F_DEFAULT,
  F_DICTSORT,
  F_ESCAPE,
  F_FILESIZEFORMAT,
  F_FIRST,
  F_FLOAT,
  F_FORCEESCAPE,
  F_FORMAT,
  F_GROUPBY,
  F_INDENT,
  F_INT,
  F_ITEMS,
  F_JOIN,
  F_LAST,
  F_LENGTH,
  F_LIST,
  F_LOWER,
  F_MAP,
  F_MAX,
  F_MIN,
  F_PPRINT,
  F_REJECT,
  F_REJECTATTR,
  F_REPLACE,
  F_REVERSE,
  F_ROUND,
  F_SAFE,
  F_SELECT,
  F_SELECTATTR,
  F_SLICE,
  F_SORT,
  F_STRING,
  F_STRIPTAGS,
  F_SUM,
  F_TITLE,
  F_TOJSON,
  F_TRIM,
  F_TRUNCATE,
  F_UNIQUE,
  F_UPPER,
  F_URLENCODE,
  F_WORDCOUNT,
};

/* an argument that was not given (tpl_bind's mark) */
#define TPL_NOT_GIVEN ((tpl_val){.kind = TPL_UNDEF, .sub = 0xff})

typedef struct {
  tpl_val parts[16];
  size_t n;
} tpl_attr_path;

/* An attribute path: "a.b.0" as parts ("a", "b", 0); an int is one part;
 * an absent or none attribute has none (the item itself). path_get looks
 * the item up part by part as environment.getitem does; a given default
 * replaces an undefined result. */
void tpl_path_free(tpl_attr_path *p);
bool tpl_path_parse(tpl_val attr, const char *s, size_t len, tpl_attr_path *p);
bool tpl_path_get(tpl_rt *rt, const tpl_attr_path *p, tpl_val item, tpl_val dflt, tpl_val *out);
/* jinja2's ignore_case: a string lower-cased (v taken), anything else as it is. */
bool tpl_fold_case(tpl_rt *rt, tpl_val v, tpl_val *out);
/* A stable sort of idx[0..n) by keys[idx[i]]; false when two keys do not order. */
bool tpl_sort_keys(tpl_rt *rt, tpl_val *keys, size_t *idx, size_t n, bool reverse);
/* sorted(items) by keys (keys[i] belongs to items->v[i]; all taken) as a new list. */
bool tpl_sorted_list(tpl_rt *rt, const tpl_list *items, tpl_val *keys, bool reverse, tpl_val *out);
tpl_list *tpl_gen_new(size_t cap); /* an empty generator */

/* The filters (p: the arguments bound by tpl_bind, in the filter's order). */
bool tpl_f_sort_like(tpl_rt *rt, int id, tpl_val v, const tpl_val *p, tpl_val *out);
bool tpl_f_select(tpl_rt *rt, int id, tpl_val v, const tpl_args *a, tpl_val *out);
bool tpl_f_map(tpl_rt *rt, tpl_val v, const tpl_args *a, tpl_val *out);
bool tpl_f_batch_slice(tpl_rt *rt, int id, tpl_val v, const tpl_val *p, tpl_val *out);
bool tpl_f_groupby(tpl_rt *rt, tpl_val v, const tpl_val *p, tpl_val *out);
bool tpl_f_tojson(tpl_val v, const tpl_val *p, tpl_val *out);
bool tpl_f_indent(tpl_rt *rt, tpl_val v, const tpl_val *p, tpl_val *out);
bool tpl_f_int(tpl_val v, const tpl_val *p, tpl_val *out);
bool tpl_f_float(tpl_val v, const tpl_val *p, tpl_val *out);
bool tpl_f_round(tpl_val v, const tpl_val *p, tpl_val *out);
bool tpl_f_title(tpl_val v, tpl_val *out);
bool tpl_f_truncate(tpl_rt *rt, tpl_val v, const tpl_val *p, tpl_val *out);
bool tpl_f_wordcount(tpl_val v, tpl_val *out);
bool tpl_f_striptags(tpl_val v, tpl_val *out);
bool tpl_f_filesize(tpl_val v, const tpl_val *p, tpl_val *out);
bool tpl_f_urlencode(tpl_val v, tpl_val *out);

/* An int argument (dflt when not given), a truth argument, and a str
 * method called on str(v) (Markup stays Markup). */
bool tpl_f_arg_int(const char *fn, tpl_val v, int64_t dflt, int64_t *out);
bool tpl_f_arg_bool(tpl_val v, bool dflt);
bool tpl_f_str_method(tpl_rt *rt, tpl_val v, const char *method, const tpl_args *a, tpl_val *out);

#endif
