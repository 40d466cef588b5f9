/* output_grammar.c: the GBNF grammar of a family's tool calls, for
 * tool_choice "required" or a named function: the output is constrained to
 * an optional reasoning block, then one call (or several) in exactly the
 * syntax the family's parser reads (output_formats.c), each function's
 * arguments following its `parameters` JSON schema (server/json_schema.h).
 * Where the arguments are XML-style elements, each parameter gets its own
 * element: a string is raw text, any other type its JSON schema's grammar,
 * the required ones mandatory, in the schema's order. Markers that are
 * special tokens of the model's vocabulary are token references. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "server/json_schema.h"
#include "server/output_int.h"

#define MAX_FUNCS 128

typedef struct {
  const char *name;
  const cJSON *params; /* the JSON schema of the arguments (NULL: any object) */
} func;

/* Appends a C string literal. */
#define put(b, s) srv_buf_append((b), "" s, sizeof(s) - 1) /* s: a literal */

/* The vocabulary of the grammar srv_tool_grammar is writing on this
 * thread (its style's), or NULL: literals name its special tokens by
 * reference. */
static _Thread_local const pasada_tokenizer *g_vocab;

/* The length of the longest special token's text (2..64 bytes) that s[0..n)
 * starts with, and its id; 0 when none. */
static size_t special_at(const char *s, size_t n, int32_t *id) {
  char t[65];
  for (size_t len = n < 64 ? n : 64; len >= 2; len--) {
    memcpy(t, s, len);
    t[len] = 0;
    const int32_t k = pasada_tokenizer_find(g_vocab, t);
    if (k >= 0 && pa_gvocab_is_special(g_vocab, k)) {
      *id = k;
      return len;
    }
  }
  return 0;
}

/* A GBNF string literal of s[0..n) (quotes included). */
static void text_lit(srv_buf *b, const char *s, size_t n) {
  put(b, "\"");
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      char esc[2] = {'\\', (char)c};
      srv_buf_append(b, esc, 2);
    } else if (c == '\n') {
      put(b, "\\n");
    } else if (c == '\r') {
      put(b, "\\r");
    } else if (c == '\t') {
      put(b, "\\t");
    } else if (c < 0x20) {
      srv_buf_printf(b, "\\x%02X", c);
    } else {
      srv_buf_append(b, s + i, 1);
    }
  }
  put(b, "\"");
}

/* s[0..n) as a GBNF item: a string literal, or where the text holds special
 * tokens of g_vocab, a group of literals and token references. */
static void litn(srv_buf *b, const char *s, size_t n) {
  size_t start = 0;
  bool group = false;
  for (size_t i = 0; g_vocab && i < n; i++) {
    int32_t id;
    const size_t len = special_at(s + i, n - i, &id);
    if (!len) continue;
    srv_buf_append(b, group ? " " : "(", 1);
    group = true;
    if (i > start) {
      text_lit(b, s + start, i - start);
      put(b, " ");
    }
    srv_buf_printf(b, "<[%d]>", id);
    start = i + len;
    i = start - 1;
  }
  if (!group) return text_lit(b, s, n);
  if (n > start) {
    put(b, " ");
    text_lit(b, s + start, n - start);
  }
  put(b, ")");
}

static void lit(srv_buf *b, const char *s) {
  litn(b, s, strlen(s));
}

/* " " + the literal of s, nothing when s is empty. */
static void item(srv_buf *b, const char *s) {
  if (!*s) return;
  put(b, " ");
  lit(b, s);
}

/* `name ::= text without stop`: each byte of stop is allowed only where
 * the next one breaks the match, ( [^s0] | s0 ( [^s1] | s1 ( .. ) ) )*. */
static void rule_without(srv_buf *b, const char *name, const char *stop) {
  size_t n = strlen(stop);
  srv_buf_printf(b, "%s ::= (", name);
  for (size_t k = 0; k < n; k++) {
    unsigned char c = (unsigned char)stop[k];
    if (k) put(b, " (");
    if (c == ']' || c == '\\' || c == '^' || c == '-' || c == '[')
      srv_buf_printf(b, "[^\\%c]", c);
    else
      srv_buf_printf(b, "[^\\x%02X]", c);
    if (k + 1 < n) {
      put(b, " | ");
      litn(b, stop + k, 1);
    }
  }
  for (size_t k = 1; k < n; k++) put(b, ")");
  put(b, ")*\n");
}

static bool name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 128) return false;
  for (; *s; s++)
    if (!op_ident(*s)) return false;
  return true;
}

/* ---- the JSON-argument families ---- */

typedef struct {
  const char *open, *sep, *close; /* around the calls (parallel: sep between) */
  const char *pre, *mid, *post;   /* a call: pre NAME mid ARGS post */
  const char *id_rule;            /* GBNF of a call id between pre and NAME (Command R, Solar) */
  const char *name_rule;          /* GBNF after NAME (Kimi's :IDX, Mistral's [CALL_ID]) */
  const char *post_rule;          /* GBNF instead of post (an optional "id" in the object) */
  bool single;                    /* one call a turn */
} json_form;

#define DSB(x) "<\xef\xbd\x9c" x "\xef\xbd\x9c>"
#define DS_CALLS          \
  DSB("tool\xe2\x96\x81"  \
      "calls\xe2\x96\x81" \
      "begin")
#define DS_END            \
  DSB("tool\xe2\x96\x81"  \
      "calls\xe2\x96\x81" \
      "end")
#define DS_CALL          \
  DSB("tool\xe2\x96\x81" \
      "call\xe2\x96\x81" \
      "begin")
#define DS_CEND          \
  DSB("tool\xe2\x96\x81" \
      "call\xe2\x96\x81" \
      "end")
#define DS_SEP           \
  DSB("tool\xe2\x96\x81" \
      "sep")
#define OBJ                                                          \
  .pre = "{\"name\": \"", .mid = "\", \"arguments\": ", .post = "}", \
  .post_rule = "(\", \\\"id\\\": \\\"\" [a-zA-Z0-9_-]{1,40} \"\\\"\")? \"}\""

static const json_form J_HERMES = {.open = "",
                                   .sep = "",
                                   .close = "",
                                   .pre = "<tool_call>\n{\"name\": \"",
                                   .mid = "\", \"arguments\": ",
                                   .post = "}\n</tool_call>"};
static const json_form J_LLAMA3 = {.open = "",
                                   .sep = ";",
                                   .close = "",
                                   .pre = "{\"name\": \"",
                                   .mid = "\", \"parameters\": ",
                                   .post = "}"};
static const json_form J_MISTRAL_ARRAY = {.open = "[TOOL_CALLS][", .sep = ",", .close = "]", OBJ};
static const json_form J_MISTRAL_ARGS = {.open = "",
                                         .sep = "",
                                         .close = "",
                                         .pre = "[TOOL_CALLS]",
                                         .mid = "[ARGS]",
                                         .post = "",
                                         .name_rule = "(\"[CALL_ID]\" [a-zA-Z0-9]{1,40})?"};
static const json_form J_GRANITE = {.open = "<|tool_call|>[", .sep = ",", .close = "]", OBJ};
static const json_form J_FIREFUNCTION = {.open = "functools[", .sep = ",", .close = "]", OBJ};
static const json_form J_NEMOTRON = {
    .open = "<TOOLCALL>[", .sep = ",", .close = "]</TOOLCALL>", OBJ};
static const json_form J_APRIEL = {
    .open = "<tool_calls>[", .sep = ",", .close = "]</tool_calls>", OBJ};
static const json_form J_MINIMAX_M1 = {
    .open = "<tool_calls>\n", .sep = "", .close = "</tool_calls>", OBJ};
static const json_form J_GIGACHAT = {
    .open = "<|function_call|>", .sep = "", .close = "", OBJ, .single = true};
static const json_form J_GIGACHAT_ROLE = {.open = "<|message_sep|>\n\nfunction call<|role_sep|>\n",
                                          .sep = "",
                                          .close = "",
                                          OBJ,
                                          .single = true};
static const json_form J_COMMAND_R = {.open = "<|START_ACTION|>[\n    ",
                                      .sep = ",",
                                      .close = "]<|END_ACTION|>",
                                      .pre = "{\"tool_call_id\": \"",
                                      .mid = "\", \"parameters\": ",
                                      .post = "}",
                                      .id_rule = "[0-9]{1,3} \"\\\", \\\"tool_name\\\": \\\"\""};
static const json_form J_COMMAND_R_PLUS = {.open = "Action:\n```json\n[\n    ",
                                           .sep = ",",
                                           .close = "]```",
                                           .pre = "{\n        \"tool_name\": \"",
                                           .mid = "\",\n        \"parameters\": ",
                                           .post = "\n    }"};
static const json_form J_FUNCTIONARY = {
    .open = "", .sep = "", .close = "", .pre = "<function=", .mid = ">", .post = "</function>"};
static const json_form J_FUNCTIONARY_V32 = {
    .open = "", .sep = ">>>", .close = "", .pre = "", .mid = "\n", .post = ""};
static const json_form J_KIMI = {.open = "<|tool_calls_section_begin|>",
                                 .sep = "",
                                 .close = "<|tool_calls_section_end|>",
                                 .pre = "<|tool_call_begin|>functions.",
                                 .mid = "<|tool_call_argument_begin|>",
                                 .post = "<|tool_call_end|>",
                                 .name_rule = "\":\" [0-9]{1,3}"};
static const json_form J_DEEPSEEK_V31 = {
    .open = DS_CALLS, .sep = "", .close = DS_END, .pre = DS_CALL, .mid = DS_SEP, .post = DS_CEND};
static const json_form J_DEEPSEEK_R1 = {.open = DS_CALLS,
                                        .sep = "",
                                        .close = DS_END,
                                        .pre = DS_CALL "function" DS_SEP,
                                        .mid = "\n```json\n",
                                        .post = "\n```" DS_CEND};
static const json_form J_SOLAR = {.open = "<|tool_calls|>",
                                  .sep = "",
                                  .close = "<|calls|>",
                                  .pre = "<|tool_call:begin|>",
                                  .mid = "<|tool_call:args|>",
                                  .post = "<|tool_call:end|>",
                                  .id_rule = "[a-zA-Z0-9]{1,16} \"<|tool_call:name|>\""};
static const json_form J_GPT_OSS = {.open = "",
                                    .sep = "",
                                    .close = "",
                                    .pre = " to=functions.",
                                    .mid = "<|channel|>commentary json<|message|>",
                                    .post = "",
                                    .single = true};

static const json_form *json_form_of(const srv_out_style *st) {
  switch (st->format) {
    case SRV_OUT_HERMES:
      return &J_HERMES;
    case SRV_OUT_LLAMA3:
      return &J_LLAMA3;
    case SRV_OUT_MISTRAL:
      return st->variant ? &J_MISTRAL_ARGS : &J_MISTRAL_ARRAY;
    case SRV_OUT_GRANITE:
      return &J_GRANITE;
    case SRV_OUT_FIREFUNCTION:
      return &J_FIREFUNCTION;
    case SRV_OUT_NEMOTRON:
      return &J_NEMOTRON;
    case SRV_OUT_APRIEL:
      return &J_APRIEL;
    case SRV_OUT_MINIMAX_M1:
      return &J_MINIMAX_M1;
    case SRV_OUT_GIGACHAT:
      return st->variant ? &J_GIGACHAT_ROLE : &J_GIGACHAT;
    case SRV_OUT_COMMAND_R:
      return &J_COMMAND_R;
    case SRV_OUT_COMMAND_R_PLUS:
      return &J_COMMAND_R_PLUS;
    case SRV_OUT_FUNCTIONARY:
      return &J_FUNCTIONARY;
    case SRV_OUT_FUNCTIONARY_V32:
      return &J_FUNCTIONARY_V32;
    case SRV_OUT_KIMI:
      return &J_KIMI;
    case SRV_OUT_DEEPSEEK:
      return st->variant ? &J_DEEPSEEK_V31 : &J_DEEPSEEK_R1;
    case SRV_OUT_SOLAR:
      return &J_SOLAR;
    case SRV_OUT_GPT_OSS:
      return &J_GPT_OSS;
    default:
      return NULL;
  }
}

/* ---- the XML-argument families ---- */

typedef struct {
  const char *open, *sep, *close;     /* around the calls */
  const char *pre, *mid, *post;       /* a call: pre NAME mid PARAMS post */
  const char *k_pre, *k_mid, *k_post; /* a parameter: k_pre KEY k_mid VALUE k_post */
  const char *k_mid_json;             /* k_mid for a non-string value (DSML's attribute) */
  const char *k_value;                /* after k_mid and whitespace, before the value (GLM) */
  bool single;
} xml_form;

#define DSML      \
  "<\xef\xbd\x9c" \
  "DSML\xef\xbd\x9c"
#define DSMLE      \
  "</\xef\xbd\x9c" \
  "DSML\xef\xbd\x9c"
/* Whitespace (ws) follows mid, each parameter and post. */
static const xml_form X_QWEN3_CODER = {.open = "",
                                       .sep = "",
                                       .close = "",
                                       .pre = "<tool_call>\n<function=",
                                       .mid = ">",
                                       .post = "</function>\n</tool_call>",
                                       .k_pre = "<parameter=",
                                       .k_mid = ">\n",
                                       .k_post = "\n</parameter>"};
static const xml_form X_GLM = {.open = "",
                               .sep = "",
                               .close = "",
                               .pre = "<tool_call>",
                               .mid = "",
                               .post = "</tool_call>",
                               .k_pre = "<arg_key>",
                               .k_mid = "</arg_key>",
                               .k_value = "<arg_value>",
                               .k_post = "</arg_value>"};
static const xml_form X_MINIMAX = {.open = "<minimax:tool_call>\n",
                                   .sep = "",
                                   .close = "</minimax:tool_call>",
                                   .pre = "<invoke name=\"",
                                   .mid = "\">",
                                   .post = "</invoke>",
                                   .k_pre = "<parameter name=\"",
                                   .k_mid = "\">",
                                   .k_post = "</parameter>"};
static const xml_form X_DSML_F = {.open = DSML "function_calls>\n",
                                  .sep = "",
                                  .close = DSMLE "function_calls>",
                                  .pre = DSML "invoke name=\"",
                                  .mid = "\">",
                                  .post = DSMLE "invoke>",
                                  .k_pre = DSML "parameter name=\"",
                                  .k_mid = "\" string=\"true\">",
                                  .k_post = DSMLE "parameter>",
                                  .k_mid_json = "\" string=\"false\">"};
static const xml_form X_DSML_T = {.open = DSML "tool_calls>\n",
                                  .sep = "",
                                  .close = DSMLE "tool_calls>",
                                  .pre = DSML "invoke name=\"",
                                  .mid = "\">",
                                  .post = DSMLE "invoke>",
                                  .k_pre = DSML "parameter name=\"",
                                  .k_mid = "\" string=\"true\">",
                                  .k_post = DSMLE "parameter>",
                                  .k_mid_json = "\" string=\"false\">"};
static const xml_form X_MINICPM = {.open = "",
                                   .sep = "",
                                   .close = "",
                                   .pre = "<function name=\"",
                                   .mid = "\">",
                                   .post = "</function>",
                                   .k_pre = "<param name=\"",
                                   .k_mid = "\">",
                                   .k_post = "</param>"};
static const xml_form X_ATEM = {.open = "",
                                .sep = "<|eom|><|start|>assistant",
                                .close = "",
                                .pre = " to=",
                                .mid = "<|message|><atem:function_calls>\n<atem:invoke name=\"",
                                .post = "</atem:invoke>\n</atem:function_calls>",
                                .k_pre = "<atem:parameter name=\"",
                                .k_mid = "\">",
                                .k_post = "</atem:parameter>"};

static const xml_form *xml_form_of(const srv_out_style *st) {
  switch (st->format) {
    case SRV_OUT_QWEN3_CODER:
      return &X_QWEN3_CODER;
    case SRV_OUT_GLM:
      return &X_GLM;
    case SRV_OUT_MINIMAX:
      return &X_MINIMAX;
    case SRV_OUT_DEEPSEEK_DSML:
      return st->variant ? &X_DSML_T : &X_DSML_F;
    case SRV_OUT_MINICPM:
      return &X_MINICPM;
    case SRV_OUT_ATEM:
      return &X_ATEM;
    default:
      return NULL;
  }
}

static bool is_string_schema(const cJSON *s) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
  return cJSON_IsString(t) && !strcmp(t->valuestring, "string");
}

static bool required(const cJSON *params, const char *key) {
  const cJSON *r, *req = cJSON_GetObjectItemCaseSensitive(params, "required");
  cJSON_ArrayForEach(r, req) if (cJSON_IsString(r) && !strcmp(r->valuestring, key)) return true;
  return false;
}

/* params-f<i> ::= the parameters as elements, in the schema's order. */
static bool xml_params(srv_buf *b, const xml_form *x, int i, const func *f, srv_error *e) {
  const cJSON *props = cJSON_GetObjectItemCaseSensitive(f->params, "properties");
  if (!cJSON_IsObject(props) || !props->child) { /* any keys, raw values */
    srv_buf_printf(b, "params-f%d ::= (", i);
    lit(b, x->k_pre);
    put(b, " [a-zA-Z0-9_.-]{1,64} ");
    lit(b, x->k_mid);
    if (x->k_value) {
      put(b, " ws ");
      lit(b, x->k_value);
    }
    put(b, " xml-text ");
    lit(b, x->k_post);
    put(b, " ws)*\n");
    return true;
  }
  srv_buf rules = {0};
  srv_buf_printf(b, "params-f%d ::=", i);
  int j = 0;
  const cJSON *p;
  cJSON_ArrayForEach(p, props) {
    if (!name_ok(p->string)) {
      srv_buf_free(&rules);
      return srv_fail(e, 400, "invalid_request_error", NULL, "tools",
                      "parameter name \"%.64s\" of %s cannot be written in this model's tool "
                      "calls",
                      p->string, f->name);
    }
    bool str = is_string_schema(p);
    put(b, " (");
    lit(b, x->k_pre);
    put(b, " ");
    lit(b, p->string);
    put(b, " ");
    lit(b, !str && x->k_mid_json ? x->k_mid_json : x->k_mid);
    if (x->k_value) {
      put(b, " ws ");
      lit(b, x->k_value);
    }
    if (str) {
      put(b, " xml-text ");
    } else {
      char prefix[32];
      snprintf(prefix, sizeof prefix, "f%d-p%d", i, j);
      srv_buf_printf(b, " %s ", prefix);
      if (!srv_json_schema_rules(p, prefix, &rules, e)) {
        srv_buf_free(&rules);
        return false;
      }
    }
    lit(b, x->k_post);
    put(b, " ws");
    if (required(f->params, p->string))
      put(b, ")");
    else
      put(b, ")?");
    j++;
  }
  if (j == 0) put(b, " \"\"");
  put(b, "\n");
  if (rules.n) srv_buf_append(b, rules.p, rules.n);
  bool failed = rules.failed;
  srv_buf_free(&rules);
  if (failed) b->failed = true;
  return true;
}

/* ---- the literal-argument families: key=value calls (LFM2's Python
 * calls, Gemma 4's key:value objects) ---- */

typedef struct {
  const char *open, *sep, *close; /* around the calls */
  const char *pre, *mid, *post;   /* a call: pre NAME mid ARGS post */
  const char *eq, *comma;         /* KEY eq VALUE, comma between arguments */
  const char *q_open, *q_close;   /* a plain string's quotes (its text holds no q_close) */
  const char *t, *f;              /* a plain boolean's spellings */
  const char *tail;               /* optional after the calls */
  bool sorted;                    /* arguments in name order (Gemma 4's template sorts them);
                                     else the required ones first, each in the schema's order */
} lit_form;

/* LFM2: <|tool_call_start|>[f(a='x', b=1), g()]<|tool_call_end|> */
static const lit_form L_LFM2 = {.open = "<|tool_call_start|>[",
                                .sep = ", ",
                                .close = "]<|tool_call_end|>",
                                .pre = "",
                                .mid = "(",
                                .post = ")",
                                .eq = "=",
                                .comma = ", ",
                                .q_open = "'",
                                .q_close = "'",
                                .t = "True",
                                .f = "False"};
/* Gemma 4: <|tool_call>call:f{a:<|"|>x<|"|>,b:1}<tool_call|><|tool_response> */
static const lit_form L_GEMMA = {.open = "",
                                 .sep = "",
                                 .close = "",
                                 .tail = "<|tool_response>", /* the cue for the results */
                                 .pre = "<|tool_call>call:",
                                 .mid = "{",
                                 .post = "}<tool_call|>",
                                 .eq = ":",
                                 .comma = ",",
                                 .q_open = "<|\"|>",
                                 .q_close = "<|\"|>",
                                 .t = "true",
                                 .f = "false",
                                 .sorted = true};

static const lit_form *lit_form_of(const srv_out_style *st) {
  return st->format == SRV_OUT_LFM2 ? &L_LFM2 : st->format == SRV_OUT_GEMMA ? &L_GEMMA : NULL;
}

/* A schema of only `type` (and annotations): the family's own spelling of
 * its values; anything else is written as JSON (both parse). */
static const char *plain_type(const cJSON *s) {
  const cJSON *k;
  cJSON_ArrayForEach(k, s) {
    if (strcmp(k->string, "type") && strcmp(k->string, "description") &&
        strcmp(k->string, "title") && strcmp(k->string, "examples") && strcmp(k->string, "default"))
      return NULL;
  }
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
  return cJSON_IsString(t) ? t->valuestring : NULL;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

#define LIT_MAX_PARAMS 64

/* params-f<i> ::= the arguments: every required one, any optional ones,
 * in the form's order, comma-separated. */
static bool lit_params(srv_buf *b, const lit_form *L, int i, const func *f, srv_error *e) {
  const cJSON *props = cJSON_GetObjectItemCaseSensitive(f->params, "properties");
  srv_buf rules = {0};
  bool ok = true;
  if (!cJSON_IsObject(props) || !props->child) { /* any keys, JSON values */
    char prefix[32];
    snprintf(prefix, sizeof prefix, "f%d-any", i);
    srv_buf_printf(b, "params-f%d ::= (f%d-kv (", i, i);
    lit(b, L->comma);
    srv_buf_printf(b, " f%d-kv)*)?\nf%d-kv ::= [a-zA-Z_] [a-zA-Z0-9_]{0,63} ", i, i);
    lit(b, L->eq);
    srv_buf_printf(b, " %s\n", prefix);
    cJSON *any = cJSON_CreateObject();
    ok = any ? srv_json_schema_rules(any, prefix, &rules, e)
             : srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    cJSON_Delete(any);
  } else {
    const cJSON *order[LIT_MAX_PARAMS];
    int n = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, props) {
      bool name_fits = name_ok(p->string) && !strpbrk(p->string, ".:/");
      if (!name_fits || n == LIT_MAX_PARAMS) {
        srv_buf_free(&rules);
        return srv_fail(e, 400, "invalid_request_error", NULL, "tools",
                        n == LIT_MAX_PARAMS
                            ? "%s has more than 64 parameters, more than this model's tool "
                              "calls are written with"
                            : "parameter name \"%.64s\" of %s cannot be written in this model's "
                              "tool calls",
                        n == LIT_MAX_PARAMS ? f->name : p->string, f->name);
      }
      order[n++] = p;
    }
    if (L->sorted) {
      qsort(order, (size_t)n, sizeof order[0], cmp_names);
    } else { /* required first (stable) */
      const cJSON *tmp[LIT_MAX_PARAMS];
      int m = 0;
      for (int r = 1; r >= 0; r--)
        for (int k = 0; k < n; k++)
          if (required(f->params, order[k]->string) == (r == 1)) tmp[m++] = order[k];
      memcpy(order, tmp, (size_t)n * sizeof order[0]);
    }
    /* f<i>-kv<k> ::= KEY eq VALUE */
    for (int k = 0; ok && k < n; k++) {
      srv_buf_printf(b, "f%d-kv%d ::=", i, k);
      lit(b, order[k]->string);
      put(b, " ");
      lit(b, L->eq);
      const char *type = plain_type(order[k]);
      if (type && !strcmp(type, "string")) {
        put(b, " ");
        lit(b, L->q_open);
        srv_buf_printf(b, " lit-text ");
        lit(b, L->q_close);
      } else if (type && !strcmp(type, "boolean")) {
        put(b, " (");
        lit(b, L->t);
        put(b, " | ");
        lit(b, L->f);
        put(b, ")");
      } else {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "f%d-p%d", i, k);
        srv_buf_printf(b, " %s", prefix);
        ok = srv_json_schema_rules(order[k], prefix, &rules, e);
      }
      put(b, "\n");
    }
    /* s<k>: arguments from k on, none written yet; the rest after one:
     * each (comma kv) required or optional */
    for (int k = 0; ok && k <= n; k++) {
      srv_buf_printf(b, "f%d-s%d ::=", i, k);
      if (k == n) {
        put(b, " \"\"\n");
        break;
      }
      srv_buf_printf(b, " f%d-kv%d", i, k);
      for (int j = k + 1; j < n; j++) {
        put(b, " (");
        lit(b, L->comma);
        srv_buf_printf(b, " f%d-kv%d)%s", i, j, required(f->params, order[j]->string) ? "" : "?");
      }
      if (!required(f->params, order[k]->string)) srv_buf_printf(b, " | f%d-s%d", i, k + 1);
      put(b, "\n");
    }
    srv_buf_printf(b, "params-f%d ::= f%d-s0\n", i, i);
  }
  if (ok && rules.n) srv_buf_append(b, rules.p, rules.n);
  if (rules.failed) b->failed = true;
  srv_buf_free(&rules);
  return ok;
}

/* ---- reasoning ---- */

/* reasoning ::= a block before the calls: optional, or, when the prompt
 * opened it (in_reasoning), its text and close marker. Returns whether the
 * family reasons. */
static bool reasoning_rule(srv_buf *b, const srv_out_style *st, bool in_reasoning) {
  const char *open = st->think_open, *close = st->think_close, *after = "";
  if (st->format == SRV_OUT_GPT_OSS) {
    open = "<|channel|>analysis<|message|>";
    close = "<|end|>";
    after = "<|start|>assistant";
    in_reasoning = false; /* the prompt ends before the channel */
  } else if (st->format == SRV_OUT_SOLAR) {
    after = "<|begin|>assistant";
  } else if (st->format == SRV_OUT_ATEM) {
    open = " to=self<|message|>";
    close = "<|eom|>";
    after = "<|start|>assistant";
    in_reasoning = false;
  }
  if (!close[0]) return false;
  rule_without(b, "think-text", close);
  put(b, "reasoning ::= ");
  if (in_reasoning || !open[0]) {
    put(b, "think-text ");
  } else if (st->format == SRV_OUT_GPT_OSS || st->format == SRV_OUT_ATEM) {
    lit(b, open);
    put(b, " think-text ");
  } else { /* a close marker alone: a block the prompt opened unnoticed */
    put(b, "(");
    lit(b, open);
    put(b, " think-text)? ");
  }
  lit(b, close);
  if (after[0]) {
    put(b, " ");
    lit(b, after);
  }
  put(b, " ws\n");
  return true;
}

/* ---- the grammar ---- */

static bool collect(const cJSON *tools, const char *only, func *fs, int *nf, srv_error *e) {
  *nf = 0;
  if (!cJSON_IsArray(tools) || !tools->child)
    return srv_fail(e, 400, "invalid_request_error", NULL, "tools",
                    "tool_choice asks for a tool call but no tools were given");
  const cJSON *t;
  cJSON_ArrayForEach(t, tools) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
    if (!cJSON_IsObject(f)) f = t;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
    if (!cJSON_IsString(name)) continue;
    if (only && strcmp(only, name->valuestring)) continue;
    if (!name_ok(name->valuestring))
      return srv_fail(e, 400, "invalid_request_error", NULL, "tools",
                      "function name \"%.64s\" cannot be written in this model's tool calls",
                      name->valuestring);
    if (*nf == MAX_FUNCS)
      return srv_fail(e, 400, "invalid_request_error", NULL, "tools",
                      "more than %d functions for a required tool call", MAX_FUNCS);
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(f, "parameters");
    fs[(*nf)++] = (func){name->valuestring, cJSON_IsObject(params) ? params : NULL};
  }
  if (*nf == 0 && only)
    return srv_fail(e, 400, "invalid_request_error", NULL, "tool_choice",
                    "tool_choice names \"%.64s\", which is not among the tools", only);
  if (*nf == 0)
    return srv_fail(e, 400, "invalid_request_error", NULL, "tools", "no function among the tools");
  return true;
}

static bool args_rule(srv_buf *b, int i, const func *f, srv_error *e) {
  char prefix[32];
  snprintf(prefix, sizeof prefix, "f%d-args", i);
  if (f->params) return srv_json_schema_rules(f->params, prefix, b, e);
  cJSON *any = cJSON_Parse("{\"type\":\"object\"}");
  bool ok = any && srv_json_schema_rules(any, prefix, b, e);
  cJSON_Delete(any);
  if (!any) return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
  return ok;
}

char *srv_tool_grammar(const srv_out_style *st, const cJSON *tools, const char *only_name,
                       bool parallel, bool in_reasoning, srv_error *e) {
  const json_form *jf = json_form_of(st);
  const xml_form *xf = jf ? NULL : xml_form_of(st);
  const lit_form *lf = jf || xf ? NULL : lit_form_of(st);
  if (!jf && !xf && !lf) {
    srv_fail(e, 400, "invalid_request_error", NULL, "tool_choice",
             "this model's tool calls (%s) cannot be forced by a grammar; use tool_choice "
             "\"auto\"",
             srv_out_format_name(st->format));
    return NULL;
  }
  func *fs = malloc(MAX_FUNCS * sizeof *fs);
  int nf = 0;
  if (!fs) {
    srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    return NULL;
  }
  if (!collect(tools, only_name, fs, &nf, e)) {
    free(fs);
    return NULL;
  }
  g_vocab = st->vocab; /* until the grammar is written */
  srv_buf b = {0};
  bool single = (jf ? jf->single : xf ? xf->single : false) || !parallel;
  const char *open = jf ? jf->open : xf ? xf->open : lf->open,
             *sep = jf ? jf->sep : xf ? xf->sep : lf->sep,
             *close = jf ? jf->close : xf ? xf->close : lf->close;
  /* a family with a close marker and no open one always reasons first */
  bool must = in_reasoning || (st->think_close[0] && !st->think_open[0]);
  bool reasons = reasoning_rule(&b, st, must);
  put(&b, "root ::=");
  if (st->format != SRV_OUT_FUNCTIONARY_V32) put(&b, " ws"); /* its first line is the name */
  if (reasons && must)
    put(&b, " reasoning");
  else if (reasons)
    put(&b, " reasoning?");
  item(&b, open);
  put(&b, " call");
  if (!single && st->format == SRV_OUT_FUNCTIONARY_V32) { /* a name line follows >>> */
    put(&b, " (ws \">>>\" call)*");
  } else if (!single) {
    put(&b, " (ws");
    if (sep[0]) {
      item(&b, sep);
      put(&b, " ws");
    }
    put(&b, " call)*");
  }
  put(&b, " ws");
  if (close[0]) {
    item(&b, close);
    put(&b, " ws");
  }
  if (lf && lf->tail) {
    put(&b, " (");
    lit(&b, lf->tail);
    put(&b, " ws)?");
  }
  put(&b, "\nws ::= [ \\t\\n]{0,8}\n");
  if (xf) put(&b, "xml-text ::= ([^<] | \"<\" [^/])*\n");
  if (lf) rule_without(&b, "lit-text", lf->q_close);
  put(&b, "call ::=");
  for (int i = 0; i < nf; i++) srv_buf_printf(&b, "%s call-f%d", i ? " |" : "", i);
  put(&b, "\n");
  bool ok = true;
  for (int i = 0; ok && i < nf; i++) {
    const func *f = &fs[i];
    srv_buf_printf(&b, "call-f%d ::=", i);
    item(&b, jf ? jf->pre : xf ? xf->pre : lf->pre);
    if (jf && jf->id_rule) srv_buf_printf(&b, " %s", jf->id_rule);
    item(&b, f->name);
    if (jf && jf->name_rule) srv_buf_printf(&b, " %s", jf->name_rule);
    item(&b, jf ? jf->mid : xf ? xf->mid : lf->mid);
    if (xf && st->format == SRV_OUT_ATEM) { /* the invoke repeats the name */
      item(&b, f->name);
      item(&b, "\">");
    }
    if (xf) put(&b, " ws"); /* and after each parameter */
    srv_buf_printf(&b, jf ? " f%d-args" : " params-f%d", i);
    if (jf && jf->post_rule)
      srv_buf_printf(&b, " %s", jf->post_rule);
    else
      item(&b, jf ? jf->post : xf ? xf->post : lf->post);
    put(&b, "\n");
    ok = jf ? args_rule(&b, i, f, e) : xf ? xml_params(&b, xf, i, f, e) : lit_params(&b, lf, i, f, e);
  }
  free(fs);
  g_vocab = NULL;
  if (ok && b.failed) ok = srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
  if (!ok) {
    srv_buf_free(&b);
    return NULL;
  }
  return b.p;
}
