/* tpl.h: the internals of the Jinja template engine (pasada_template_*):
 * values with Python's semantics, the heap that counts them, the lexer's
 * tokens, the syntax tree, and the evaluator's entry points. Every
 * function that can fail returns false (or NULL) with the reason in
 * pa_error's thread-local message. */
#ifndef PASADA_TPL_H
#define PASADA_TPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/base.h"

/* pa_error(PASADA_ERR_ARG or code, ...) that returns false. */
bool tpl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool tpl_errc(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The first occurrence of needle in hay, or NULL (memmem). */
const char *tpl_memmem(const char *hay, size_t n, const char *needle, size_t m);

/* ---- values ----
 * A value is a kind and a payload; strings, lists, dicts, namespaces,
 * callables and loops are reference-counted objects. Lists and dicts are
 * never changed once built (the sandbox forbids append, pop, update...), so
 * they are shared freely; only namespaces and loops change. */
typedef enum {
  TPL_UNDEF = 0, /* o: NULL or a str naming what is missing (for errors) */
  TPL_NONE,
  TPL_BOOL,
  TPL_INT,
  TPL_FLOAT,
  TPL_STR,
  TPL_LIST,  /* list, tuple, generator, dict view, range: tpl_list_kind */
  TPL_DICT,  /* keys in insertion order */
  TPL_NS,    /* namespace(): a tpl_dict that `set ns.x = ...` changes */
  TPL_FUNC,  /* macro, global function, bound method */
  TPL_LOOP,  /* a for loop's `loop` */
  TPL_SCOPE, /* not a value: a scope of variables (same heap) */
} tpl_kind;

typedef struct tpl_obj {
  struct tpl_obj *prev, *next; /* the heap's list of live objects */
  int32_t rc;                  /* references; < 0: immortal (a template's constant) */
  uint8_t kind;                /* tpl_kind */
  uint8_t sub;                 /* str: TPL_MARKUP bit; list: tpl_list_kind; undef: reason */
  uint8_t flags;               /* list: TPL_CONSUMED */
  size_t bytes;                /* counted against the heap's memory limit */
} tpl_obj;

typedef struct {
  uint8_t kind;
  uint8_t sub; /* TPL_UNDEF: tpl_undef_reason */
  union {
    bool b;
    int64_t i;
    double f;
    tpl_obj *o;
  };
} tpl_val;

enum { TPL_MARKUP = 1 }; /* str sub: markupsafe.Markup (|safe, |escape) */
enum {
  TPL_CONSUMED = 1,
  TPL_GROUP = 2
}; /* list flags: a generator already iterated; groupby's (grouper, list) */
typedef enum {
  TPL_UNDEF_PLAIN = 0,
  TPL_UNDEF_UNSAFE, /* a sandboxed attribute (list.append, _private): calling it is an error */
} tpl_undef_reason;

typedef struct {
  tpl_obj h;
  size_t len; /* bytes, without the terminating NUL */
  size_t ncp; /* code points (== len: ASCII) */
  char s[];
} tpl_str;

typedef enum {
  TPL_L_LIST = 0,
  TPL_L_TUPLE,
  TPL_L_GEN,      /* a generator (map, select...): iterates once, always true, no len */
  TPL_L_REVERSED, /* reversed(list): like a generator */
  TPL_L_ITEMS,    /* dict.items(), .keys(), .values(): len, no indexing */
  TPL_L_KEYS,
  TPL_L_VALUES,
  TPL_L_RANGE, /* range(): indexable; r_* keep its arguments for repr */
} tpl_list_kind;

typedef struct {
  tpl_obj h;
  size_t n, cap;
  tpl_val *v;
  int64_t r_start, r_stop, r_step;
} tpl_list;

typedef struct {
  tpl_obj h;
  size_t n, cap;
  tpl_val *k, *v;
  int32_t *idx; /* open-addressing index into k/v once n > 8; -1 empty */
  size_t icap;
} tpl_dict;

struct tpl_node;
struct tpl_scope;

typedef enum { TPL_F_MACRO, TPL_F_GLOBAL, TPL_F_METHOD, TPL_F_JOINER, TPL_F_CYCLER } tpl_func_kind;
typedef struct {
  tpl_obj h;
  uint8_t fkind;
  int id;                      /* global or method id */
  tpl_val self;                /* method: its object; joiner/cycler: state */
  const struct tpl_node *node; /* macro or call block */
  struct tpl_scope *closure;   /* macro: the scope it was defined in */
  const char *name;            /* for messages and repr */
  int64_t count;               /* joiner/cycler position */
} tpl_func;

typedef struct {
  tpl_obj h;
  tpl_list *seq; /* the items (the iterable, filtered, as a list) */
  size_t index0;
  int depth0;
  bool has_changed;
  tpl_val changed;             /* loop.changed()'s last arguments (a tuple) */
  const struct tpl_node *node; /* the for node, for loop(...) of a recursive loop */
  struct tpl_scope *scope;     /* the scope the loop runs in */
} tpl_loop;

/* An interned identifier of a template: scopes compare names by pointer. */
typedef struct tpl_name {
  tpl_str *str; /* immortal */
} tpl_name;

typedef struct tpl_scope {
  tpl_obj h;
  struct tpl_scope *parent;
  size_t n, cap;
  const tpl_name **names;
  tpl_val *vals;
} tpl_scope;

/* ---- heap ----
 * Every object lives on the heap of the thread's current parse or render
 * (tpl_heap_cur): a render's heap counts bytes against its limit and frees
 * what is left (cycles through namespaces and closures) at the end; a
 * template's heap makes its constants immortal, so that renders on several
 * threads share them without touching their counts. */
typedef struct {
  tpl_obj live; /* sentinel of the list of live objects */
  size_t used, limit;
  size_t max_str; /* the longest string or list a render may build */
  bool immortal;
  bool sweeping;
  bool draining;
  tpl_obj *dead; /* objects whose count fell to 0, being freed */
} tpl_heap;

extern _Thread_local tpl_heap *tpl_heap_cur;
void tpl_heap_init(tpl_heap *h, size_t limit, size_t max_str, bool immortal);
/* Frees every object still on the heap. */
void tpl_heap_sweep(tpl_heap *h);
/* Counts `delta` more bytes for an object's arrays; false past the limit. */
bool tpl_heap_charge(tpl_obj *o, size_t delta);
void tpl_heap_refund(tpl_obj *o, size_t delta);
void *tpl_obj_new(uint8_t kind, size_t size);
bool tpl_mem_error(void);

static inline tpl_val tpl_undef(void) {
  return (tpl_val){.kind = TPL_UNDEF};
}
static inline tpl_val tpl_none(void) {
  return (tpl_val){.kind = TPL_NONE};
}
static inline tpl_val tpl_bool(bool b) {
  return (tpl_val){.kind = TPL_BOOL, .b = b};
}
static inline tpl_val tpl_int(int64_t i) {
  return (tpl_val){.kind = TPL_INT, .i = i};
}
static inline tpl_val tpl_float(double f) {
  return (tpl_val){.kind = TPL_FLOAT, .f = f};
}
static inline tpl_val tpl_obj_val(void *o) {
  return (tpl_val){.kind = ((tpl_obj *)o)->kind, .o = o};
}
static inline bool tpl_is_obj(tpl_val v) {
  return v.kind >= TPL_STR || (v.kind == TPL_UNDEF && v.o);
}
static inline tpl_str *tpl_s(tpl_val v) {
  return (tpl_str *)v.o;
}
static inline tpl_list *tpl_l(tpl_val v) {
  return (tpl_list *)v.o;
}
static inline tpl_dict *tpl_d(tpl_val v) {
  return (tpl_dict *)v.o;
}

void tpl_retain_obj(tpl_obj *o);
void tpl_release_obj(tpl_obj *o);
static inline tpl_val tpl_ref(tpl_val v) {
  if (tpl_is_obj(v)) tpl_retain_obj(v.o);
  return v;
}
static inline void tpl_drop(tpl_val v) {
  if (tpl_is_obj(v)) tpl_release_obj(v.o);
}

/* Strings: the bytes are copied; NULL past the limits. */
tpl_str *tpl_str_new(const char *s, size_t len);
tpl_str *tpl_str_markup(const char *s, size_t len, bool markup);
bool tpl_str_val(const char *s, size_t len, tpl_val *out);
static inline bool tpl_is_markup(tpl_val v) {
  return v.kind == TPL_STR && (v.o->sub & TPL_MARKUP);
}
/* An undefined value naming what is missing ("'x' is undefined"). */
tpl_val tpl_undef_named(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
tpl_val tpl_undef_unsafe(const char *attr, const char *type);

tpl_list *tpl_list_new(size_t cap, tpl_list_kind kind);
/* Appends v, taking it (released when the append fails). */
bool tpl_list_push(tpl_list *l, tpl_val v);
tpl_dict *tpl_dict_new(void);
tpl_dict *tpl_ns_new(void);
/* Sets k to v, taking both; false for an unhashable key or past the limit. */
bool tpl_dict_set(tpl_dict *d, tpl_val k, tpl_val v);
/* The value at key k (borrowed), or NULL; *err on an unhashable key. */
const tpl_val *tpl_dict_get(const tpl_dict *d, tpl_val k, bool *err);
const tpl_val *tpl_dict_get_str(const tpl_dict *d, const char *key, size_t len);
tpl_func *tpl_func_new(tpl_func_kind kind, int id, const char *name);

/* Python semantics. */
bool tpl_truthy(tpl_val v);
bool tpl_eq(tpl_val a, tpl_val b); /* == (never fails) */
/* a < b: *lt; false with a TypeError for kinds that do not order */
bool tpl_less(tpl_val a, tpl_val b, bool *lt);
/* -1, 0, 1 with Python's ordering; false for kinds that do not order */
bool tpl_compare(tpl_val a, tpl_val b, int *out);
bool tpl_hash(tpl_val v, uint64_t *out);
const char *tpl_type_name(tpl_val v); /* Python's type name: "str", "dict", "NoneType" */
bool tpl_is_number(tpl_val v);        /* bool, int, float */
double tpl_num(tpl_val v);            /* a number as a double */
/* The items a for loop or list() walks, as a list (new reference): a list
 * or tuple itself, a dict's keys, a string's characters, undefined: none.
 * A generator is consumed. False when the value is not iterable. */
bool tpl_iterate(tpl_val v, tpl_list **out);
/* len(): false (TypeError) when the value has none. */
bool tpl_len(tpl_val v, int64_t *out);

/* ---- text ---- */
/* A growable text whose bytes the current heap counts; at most max_str. */
typedef struct {
  char *s;
  size_t n, cap;
} tpl_buf;
bool tpl_buf_put(tpl_buf *b, const char *s, size_t n);
static inline bool tpl_buf_str(tpl_buf *b, const char *s) {
  return tpl_buf_put(b, s, strlen(s));
}
bool tpl_buf_printf(tpl_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool tpl_buf_cp(tpl_buf *b, uint32_t cp);
void tpl_buf_free(tpl_buf *b);
/* The buffer as a string value (the buffer is emptied). */
bool tpl_buf_take(tpl_buf *b, bool markup, tpl_val *out);

uint32_t tpl_utf8_next(const char *s, size_t len, size_t *i);
size_t tpl_utf8_put(uint32_t cp, char *out);
/* Whether s is valid UTF-8 (no surrogates, no overlongs). */
bool tpl_utf8_valid(const char *s, size_t len);
size_t tpl_utf8_prefix(const char *s, size_t len); /* bytes of the valid prefix */
size_t tpl_utf8_count(const char *s, size_t len);
/* Byte offset of code point index i in s (i <= ncp). */
size_t tpl_utf8_offset(const tpl_str *s, size_t i);
bool tpl_cp_space(uint32_t cp); /* str.isspace() */
bool tpl_cp_alpha(uint32_t cp);
bool tpl_cp_digit(uint32_t cp);
bool tpl_cp_word(uint32_t cp); /* regex \w */
bool tpl_cp_printable(uint32_t cp);
uint32_t tpl_cp_upper(uint32_t cp);
uint32_t tpl_cp_lower(uint32_t cp);
bool tpl_cp_cased(uint32_t cp);
bool tpl_cp_is_upper(uint32_t cp);
bool tpl_cp_is_lower(uint32_t cp);

/* Python's repr(float) ("1.0", "1e-05", "inf") into buf (32 bytes). */
void tpl_float_repr(double f, char *buf);
/* str(v) and repr(v) appended to b; false past the limits or too deep. */
bool tpl_str_of(tpl_buf *b, tpl_val v);
bool tpl_repr(tpl_buf *b, tpl_val v, int depth);
bool tpl_ascii(tpl_buf *b, tpl_val v); /* ascii(v): repr with \x, \u, \U escapes */
/* str(v) as a string value (a string is returned as it is). */
bool tpl_to_str(tpl_val v, tpl_val *out);
/* HTML-escapes s (markupsafe.escape) into b. */
bool tpl_escape(tpl_buf *b, const char *s, size_t len);

/* ---- JSON ---- */
/* Parses JSON text into a value on the current heap (object keys in order;
 * a repeated key keeps its first place and its last value). */
bool tpl_json_parse(const char *s, size_t len, tpl_val *out);
typedef struct {
  bool ensure_ascii, sort_keys;
  const char *indent; /* NULL: one line */
  size_t indent_len;
  const char *item_sep, *key_sep;
  size_t item_sep_len, key_sep_len;
} tpl_json_opts;
/* json.dumps(v) appended to b. */
bool tpl_json_dump(tpl_buf *b, tpl_val v, const tpl_json_opts *o);

/* ---- lexer ---- */
typedef enum {
  TK_EOF = 0,
  TK_DATA,
  TK_VAR_BEGIN,
  TK_VAR_END,
  TK_BLOCK_BEGIN,
  TK_BLOCK_END,
  TK_NAME,
  TK_STRING,
  TK_INT,
  TK_FLOAT,
  /* operators */
  TK_ADD,
  TK_SUB,
  TK_DIV,
  TK_FLOORDIV,
  TK_MUL,
  TK_MOD,
  TK_POW,
  TK_TILDE,
  TK_LBRACKET,
  TK_RBRACKET,
  TK_LPAREN,
  TK_RPAREN,
  TK_LBRACE,
  TK_RBRACE,
  TK_EQ,
  TK_NE,
  TK_GT,
  TK_GTEQ,
  TK_LT,
  TK_LTEQ,
  TK_ASSIGN,
  TK_DOT,
  TK_COLON,
  TK_PIPE,
  TK_COMMA,
  TK_SEMICOLON,
} tpl_tok_type;

typedef struct {
  uint8_t type;
  int line;
  const char *s; /* data, name: its text (in the lexer's copy of the source) */
  size_t len;
  char *str; /* string literal: the decoded text (malloc'd) */
  size_t str_len;
  int64_t i;
  double f;
} tpl_token;

typedef struct {
  char *src; /* the source with newlines normalised */
  size_t len;
  tpl_token *t;
  size_t n, cap;
} tpl_tokens;

/* Splits src into tokens as jinja2's lexer does with trim_blocks and
 * lstrip_blocks; PASADA_ERR_FORMAT naming the line on an error. */
int tpl_lex(const char *src, size_t len, tpl_tokens *out);
void tpl_tokens_free(tpl_tokens *t);

/* ---- syntax tree ---- */
typedef enum {
  /* expressions */
  N_CONST,
  N_NAME,
  N_GETATTR,
  N_GETITEM,
  N_SLICE,
  N_CALL,
  N_FILTER,
  N_TEST,
  N_NOT,
  N_NEG,
  N_POS,
  N_BINOP,
  N_CONCAT,
  N_AND,
  N_OR,
  N_COMPARE,
  N_CONDEXPR,
  N_LIST,
  N_TUPLE,
  N_DICT,
  N_NSREF,
  /* statements */
  N_OUTPUT,
  N_IF,
  N_FOR,
  N_SET,
  N_SETBLOCK,
  N_MACRO,
  N_CALLBLOCK,
  N_FILTERBLOCK,
  N_WITH,
  N_SCOPE,
  N_BLOCK,
  N_BREAK,
  N_CONTINUE,
  N_UNSUPPORTED,
} tpl_node_type;

typedef enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW } tpl_binop_kind;
typedef enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LTEQ, CMP_GT, CMP_GTEQ, CMP_IN, CMP_NOTIN } tpl_cmpop;

typedef struct tpl_nodes {
  struct tpl_node **v;
  size_t n;
} tpl_nodes;

/* One node; the fields each type uses:
 *   N_CONST       val
 *   N_NAME        name
 *   N_GETATTR     a (object), name
 *   N_GETITEM     a (object), b (index or N_SLICE)
 *   N_SLICE       a, b, c (start, stop, step; each may be NULL)
 *   N_CALL        a (callee), args, kwnames/kwargs, c (*args), d (**kwargs)
 *   N_FILTER      a (input; NULL for the filter of a block), name, id, args as N_CALL
 *   N_TEST        a, name, id, args as N_CALL
 *   N_NOT/NEG/POS a
 *   N_BINOP       op, a, b
 *   N_CONCAT      args
 *   N_AND, N_OR   a, b
 *   N_COMPARE     a, args (operands), ops
 *   N_CONDEXPR    a (test), b (value when true), c (when false; NULL: undefined)
 *   N_LIST/TUPLE  args
 *   N_DICT        args (keys), kwargs (values)
 *   N_NSREF       name (the namespace), name2 (its attribute)
 *   N_OUTPUT      args (N_CONST data and expressions)
 *   N_IF          a (test), body, orelse (an elif is an N_IF alone in orelse)
 *   N_FOR         a (target), b (iterable), c (filter), body, orelse, flag (recursive)
 *   N_SET         a (target), b (value)
 *   N_SETBLOCK    a (target), c (filter chain or NULL), body
 *   N_MACRO       name, params/kwargs (defaults, aligned to the last params), body, flag
 *   N_CALLBLOCK   a (the N_CALL), params/kwargs (the caller's), body, flag
 *   N_FILTERBLOCK c (filter chain), body
 *   N_WITH        params (targets), args (values), body
 *   N_SCOPE       body ({% generation %})
 *   N_BLOCK       name, body, flag (TPL_SCOPED)
 *   N_UNSUPPORTED name (the tag) */
typedef struct tpl_node {
  uint8_t type;
  uint8_t op;
  uint8_t flag;
  int line;
  int id; /* filter / test id; -1 unknown (an error when evaluated) */
  struct tpl_node *a, *b, *c, *d;
  const tpl_name *name, *name2;
  tpl_nodes args, kwargs, body, orelse, params;
  const tpl_name **kwnames; /* N_CALL etc.: names of kwargs (args.n positional) */
  uint8_t *ops;             /* N_COMPARE */
  tpl_val val;
} tpl_node;

/* macro flags: what the body refers to */
enum {
  TPL_USES_CALLER = 1,
  TPL_USES_VARARGS = 2,
  TPL_USES_KWARGS = 4,
  TPL_RECURSIVE = 8,
  TPL_SCOPED = 16
};

struct pa_template {
  tpl_heap heap; /* the constants */
  char *arena;   /* nodes and name tables (a chain of blocks) */
  tpl_nodes body;
  const tpl_name **names; /* interned identifiers */
  size_t n_names, cap_names;
  const tpl_name *n_loop, *n_caller, *n_varargs, *n_kwargs;
};

/* Parses into t (its heap current); PASADA_ERR_FORMAT with the line. */
int tpl_parse(struct pa_template *t, const char *src, size_t len);
void *tpl_arena_alloc(struct pa_template *t, size_t size);
void tpl_arena_free(struct pa_template *t);

/* ---- filters, tests, globals and methods: ids by name (-1 unknown) ---- */
int tpl_filter_id(const char *name);
int tpl_test_id(const char *name);

/* ---- evaluation ---- */
typedef struct {
  size_t max_output;  /* bytes of the result, and of any string or list built */
  size_t max_memory;  /* bytes of live values */
  uint64_t max_steps; /* nodes evaluated, loop iterations, units of bulk work */
  int max_depth;      /* nested evaluation: macro calls, nested expressions */
  int max_calls;      /* nested macro calls */
} tpl_limits;
extern const tpl_limits tpl_default_limits;

typedef struct tpl_rt tpl_rt;
/* Renders t with the variables of the JSON object into *out (malloc'd). */
int tpl_render(const struct pa_template *t, const char *json, size_t len, const tpl_limits *lim,
               char **out);

/* Argument lists of calls to filters, tests, globals and methods. */
typedef struct {
  tpl_val *pos;
  size_t n_pos;
  const char **kw_names;
  tpl_val *kw;
  size_t n_kw;
  tpl_obj *hold; /* a **kwargs dict whose keys kw_names point into */
} tpl_args;
/* Binds args to the parameters `names` (n of them; the first `required`
 * must be given) into out[] (borrowed; undefined kind TPL_UNDEF with o NULL
 * and sub 0xff marks "not given"). False with a TypeError naming `fn`. */
bool tpl_bind(const char *fn, const tpl_args *a, const char *const *names, size_t n,
              size_t required, tpl_val *out);
static inline bool tpl_given(tpl_val v) {
  return !(v.kind == TPL_UNDEF && v.sub == 0xff);
}

bool tpl_rt_step(tpl_rt *rt, uint64_t n);
bool tpl_call_filter(tpl_rt *rt, int id, const char *name, tpl_val in, const tpl_args *a,
                     tpl_val *out);
bool tpl_call_test(tpl_rt *rt, int id, const char *name, tpl_val in, const tpl_args *a, bool *out);
/* Calls a callable value (macro, global, method) with the arguments. */
bool tpl_call_value(tpl_rt *rt, tpl_val fn, const tpl_args *a, tpl_val *out);
/* obj.name per the sandbox: a method (bound), an item, or undefined. */
bool tpl_getattr(tpl_rt *rt, tpl_val obj, const char *name, size_t len, tpl_val *out);
/* obj[key] per the sandbox: an item, else an attribute, else undefined. */
bool tpl_getitem(tpl_rt *rt, tpl_val obj, tpl_val key, tpl_val *out);
/* The method `name` of obj's type: its id, or -1; *unsafe when the sandbox
 * forbids it (a method that changes a list or dict). */
int tpl_method_id(tpl_val obj, const char *name, size_t len, bool *unsafe);
bool tpl_call_method(tpl_rt *rt, tpl_val self, int id, const tpl_args *a, tpl_val *out);
int tpl_global_id(const char *name, size_t len);
bool tpl_call_global(tpl_rt *rt, int id, const tpl_args *a, tpl_val *out);
const char *tpl_method_name(int id);
const char *tpl_global_name(int id);
/* Python's str % args and str.format(*args, **kwargs). */
bool tpl_percent_format(tpl_rt *rt, tpl_val fmt, tpl_val args, tpl_val *out);
bool tpl_str_format(tpl_rt *rt, tpl_val fmt, const tpl_args *a, tpl_val *out);
/* loop.attr; *found false for a name a loop does not have */
bool tpl_loop_attr(tpl_rt *rt, tpl_loop *l, const char *name, size_t len, tpl_val *out,
                   bool *found);
/* The current time for strftime_now (PASADA_TEMPLATE_NOW fixes it). */
int64_t tpl_now(void);

#endif
