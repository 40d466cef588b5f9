/* tests.c: jinja2's tests (`x is defined`, `is string`, `is divisibleby 3`,
 * `is equalto y`, ...) with Python's notions of mapping, sequence,
 * iterable and identity. */
#include <string.h>

#include "template/eval.h"

enum {
  T_ODD,
  T_EVEN,
  T_DIVISIBLEBY,
  T_DEFINED,
  T_UNDEFINED,
  T_FILTER,
  T_TEST,
  T_NONE,
  T_BOOLEAN,
  T_FALSE,
  T_TRUE,
  T_INTEGER,
  T_FLOAT,
  T_LOWER,
  T_UPPER,
  T_STRING,
  T_MAPPING,
  T_NUMBER,
  T_SEQUENCE,
  T_ITERABLE,
  T_CALLABLE,
  T_SAMEAS,
  T_ESCAPED,
  T_IN,
  T_EQ,
  T_NE,
  T_GT,
  T_GE,
  T_LT,
  T_LE,
  T_COUNT
};

static const struct {
  const char *name;
  int id;
} TESTS[] = {{"odd", T_ODD},
             {"even", T_EVEN},
             {"divisibleby", T_DIVISIBLEBY},
             {"defined", T_DEFINED},
             {"undefined", T_UNDEFINED},
             {"filter", T_FILTER},
             {"test", T_TEST},
             {"none", T_NONE},
             {"boolean", T_BOOLEAN},
             {"false", T_FALSE},
             {"true", T_TRUE},
             {"integer", T_INTEGER},
             {"float", T_FLOAT},
             {"lower", T_LOWER},
             {"upper", T_UPPER},
             {"string", T_STRING},
             {"mapping", T_MAPPING},
             {"number", T_NUMBER},
             {"sequence", T_SEQUENCE},
             {"iterable", T_ITERABLE},
             {"callable", T_CALLABLE},
             {"sameas", T_SAMEAS},
             {"escaped", T_ESCAPED},
             {"in", T_IN},
             {"==", T_EQ},
             {"eq", T_EQ},
             {"equalto", T_EQ},
             {"!=", T_NE},
             {"ne", T_NE},
             {">", T_GT},
             {"gt", T_GT},
             {"greaterthan", T_GT},
             {">=", T_GE},
             {"ge", T_GE},
             {"<", T_LT},
             {"lt", T_LT},
             {"lessthan", T_LT},
             {"<=", T_LE},
             {"le", T_LE}};

int tpl_test_id(const char *name) {
  for (size_t i = 0; i < sizeof TESTS / sizeof TESTS[0]; i++)
    if (!strcmp(TESTS[i].name, name)) return TESTS[i].id;
  return -1;
}

/* value % n == r (Python's %, so floats and negative numbers work). */
static bool mod_is(tpl_rt *rt, tpl_val v, tpl_val n, int64_t r, bool *out) {
  tpl_val m;
  if (!tpl_binop(rt, OP_MOD, v, n, &m)) return false;
  *out = tpl_eq(m, tpl_int(r));
  tpl_drop(m);
  return true;
}

static bool is_sameas(tpl_val a, tpl_val b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case TPL_NONE:
    case TPL_UNDEF:
      return a.kind == TPL_NONE || a.o == b.o;
    case TPL_BOOL:
      return a.b == b.b;
    case TPL_INT:
      return a.i == b.i && a.i >= -5 && a.i <= 256; /* CPython's cached small ints */
    case TPL_FLOAT:
      return false;
    default:
      return a.o == b.o;
  }
}

bool tpl_call_test(tpl_rt *rt, int id, const char *name, tpl_val v, const tpl_args *a, bool *out) {
  if (id < 0) return tpl_err("No test named '%s' found.", name);
  const tpl_val arg = a->n_pos ? a->pos[0] : a->n_kw ? a->kw[0] : tpl_undef();
  const bool need_arg = id == T_DIVISIBLEBY || id == T_SAMEAS || id == T_IN || id >= T_EQ;
  if (need_arg && a->n_pos + a->n_kw != 1)
    return tpl_err("test '%s' takes exactly one argument", name);
  if (!need_arg && (a->n_pos || a->n_kw)) return tpl_err("test '%s' takes no arguments", name);
  switch (id) {
    case T_ODD:
      return mod_is(rt, v, tpl_int(2), 1, out);
    case T_EVEN:
      return mod_is(rt, v, tpl_int(2), 0, out);
    case T_DIVISIBLEBY:
      return mod_is(rt, v, arg, 0, out);
    case T_DEFINED:
      *out = v.kind != TPL_UNDEF;
      return true;
    case T_UNDEFINED:
      *out = v.kind == TPL_UNDEF;
      return true;
    case T_FILTER:
      *out = v.kind == TPL_STR && tpl_filter_id(tpl_s(v)->s) >= 0;
      return true;
    case T_TEST:
      *out = v.kind == TPL_STR && tpl_test_id(tpl_s(v)->s) >= 0;
      return true;
    case T_NONE:
      *out = v.kind == TPL_NONE;
      return true;
    case T_BOOLEAN:
      *out = v.kind == TPL_BOOL;
      return true;
    case T_FALSE:
      *out = v.kind == TPL_BOOL && !v.b;
      return true;
    case T_TRUE:
      *out = v.kind == TPL_BOOL && v.b;
      return true;
    case T_INTEGER:
      *out = v.kind == TPL_INT;
      return true;
    case T_FLOAT:
      *out = v.kind == TPL_FLOAT;
      return true;
    case T_LOWER:
    case T_UPPER: {
      tpl_val s, r;
      if (!tpl_to_str(v, &s)) return false;
      tpl_args none = {0};
      bool unsafe;
      const int m = tpl_method_id(s, id == T_LOWER ? "islower" : "isupper", 7, &unsafe);
      const bool ok = tpl_call_method(rt, s, m, &none, &r);
      tpl_drop(s);
      if (!ok) return false;
      *out = r.b;
      return true;
    }
    case T_STRING:
      *out = v.kind == TPL_STR;
      return true;
    case T_MAPPING:
      *out = v.kind == TPL_DICT;
      return true;
    case T_NUMBER:
      *out = tpl_is_number(v);
      return true;
    case T_SEQUENCE:
      *out =
          v.kind == TPL_STR || v.kind == TPL_DICT || v.kind == TPL_UNDEF ||
          (v.kind == TPL_LIST && (tpl_l(v)->h.sub == TPL_L_LIST || tpl_l(v)->h.sub == TPL_L_TUPLE ||
                                  tpl_l(v)->h.sub == TPL_L_RANGE));
      return true;
    case T_ITERABLE:
      *out = v.kind == TPL_STR || v.kind == TPL_LIST || v.kind == TPL_DICT || v.kind == TPL_UNDEF ||
             v.kind == TPL_LOOP;
      return true;
    case T_CALLABLE:
      *out = v.kind == TPL_FUNC || v.kind == TPL_LOOP || v.kind == TPL_UNDEF;
      return true;
    case T_SAMEAS:
      *out = is_sameas(v, arg);
      return true;
    case T_ESCAPED:
      *out = tpl_is_markup(v);
      return true;
    case T_IN:
      return tpl_contains(arg, v, out);
    case T_EQ:
      return tpl_compare_op(CMP_EQ, v, arg, out);
    case T_NE:
      return tpl_compare_op(CMP_NE, v, arg, out);
    case T_GT:
      return tpl_compare_op(CMP_GT, v, arg, out);
    case T_GE:
      return tpl_compare_op(CMP_GTEQ, v, arg, out);
    case T_LT:
      return tpl_compare_op(CMP_LT, v, arg, out);
    case T_LE:
      return tpl_compare_op(CMP_LTEQ, v, arg, out);
    default:
      return tpl_err("No test named '%s' found.", name);
  }
}
