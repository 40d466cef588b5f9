/* output_xml.c: tool calls whose arguments are XML-style parameters, one
 * element per argument: Qwen3-Coder's <function=..><parameter=..>, GLM's
 * <arg_key>/<arg_value>, MiniMax's and DeepSeek DSML's <invoke name=..>,
 * MiniCPM's <param name=..> and ATEM's <atem:invoke>. A value is typed by the
 * request's tool schema (see op_param_value). */
#define _GNU_SOURCE /* memmem */
#include <stdlib.h>
#include <string.h>

#include "server/output_int.h"

/* ---- XML-style parameters ---- */

typedef struct {
  const char *sec_close;  /* NULL: the trigger opens one call */
  const char *call_open;  /* before the name; NULL: the name follows the trigger */
  const char *name_close; /* NULL: the name ends at a newline or the first key */
  const char *call_close;
  const char *key_open, *key_close;
  bool attrs;           /* attributes up to '>' after the key (string="true") */
  const char *val_open; /* NULL: the value follows the key */
  const char *val_close;
  bool trim_nl; /* one newline after the key and before val_close is markup */
  bool cdata;   /* <![CDATA[..]]> values */
} xml_spec;

static blk_rc xml_call(op_state *p, const xml_spec *x, size_t i, size_t *e, op_pending *pd) {
  size_t n0 = i, n1;
  if (x->name_close) {
    n1 = op_name_end(p, i, x->name_close);
    if (n1 == p->n) return BLK_MORE;
    if (n1 == (size_t)-1) return BLK_NOTCALL;
    i = n1 + strlen(x->name_close);
  } else {
    n1 = i;
    while (n1 < p->n && op_ident(p->t[n1]) && n1 - n0 <= 256) n1++;
    if (n1 == p->n) return BLK_MORE;
    i = n1;
  }
  char name[257];
  if (n1 - n0 > 256 || n1 == n0) return BLK_NOTCALL;
  memcpy(name, p->t + n0, n1 - n0);
  name[n1 - n0] = 0;
  cJSON *args = cJSON_CreateObject();
  blk_rc rc = BLK_NOTCALL;
  while (args) {
    i = op_skip_ws(p, i);
    int c = op_at3(p, i, x->call_close), k = op_at3(p, i, x->key_open);
    if (c == 1) {
      *e = i + strlen(x->call_close);
      rc = BLK_DONE;
      break;
    }
    if (k != 1) {
      rc = c == 2 || k == 2 || i == p->n ? BLK_MORE : BLK_NOTCALL;
      break;
    }
    size_t k0 = i + strlen(x->key_open);
    size_t k1 = op_name_end(p, k0, x->key_close);
    if (k1 == p->n || k1 == (size_t)-1) {
      rc = k1 == p->n ? BLK_MORE : BLK_NOTCALL;
      break;
    }
    i = k1 + strlen(x->key_close);
    int string_attr = -1;
    if (x->attrs) {
      size_t g = op_name_end(p, i, ">");
      if (g == p->n || g == (size_t)-1) {
        rc = g == p->n ? BLK_MORE : BLK_NOTCALL;
        break;
      }
      const char *sa = memmem(p->t + i, g - i, "string=\"", 8);
      if (sa) {
        size_t off = (size_t)(sa - p->t) + 8;
        string_attr = off + 4 <= g && !memcmp(p->t + off, "true", 4);
      }
      i = g + 1;
    }
    if (x->val_open) {
      i = op_skip_ws(p, i);
      int v = op_at3(p, i, x->val_open);
      if (v != 1) {
        rc = v == 2 || i == p->n ? BLK_MORE : BLK_NOTCALL;
        break;
      }
      i += strlen(x->val_open);
    }
    size_t v1 = op_find(p, i, x->val_close);
    if (v1 == p->n) {
      rc = BLK_MORE;
      break;
    }
    size_t v0 = i;
    i = v1 + strlen(x->val_close);
    if (x->trim_nl && v0 < v1 && p->t[v0] == '\n') v0++;
    if (x->trim_nl && v1 > v0 && p->t[v1 - 1] == '\n') v1--;
    int sattr = string_attr;
    if (x->cdata && v1 - v0 >= 12 && !memcmp(p->t + v0, "<![CDATA[", 9) &&
        !memcmp(p->t + v1 - 3, "]]>", 3)) {
      v0 += 9;
      v1 -= 3;
      sattr = 1;
    }
    char key[257];
    memcpy(key, p->t + k0, k1 - k0);
    key[k1 - k0] = 0;
    cJSON *val = op_param_value(p, name, key, p->t + v0, v1 - v0, sattr);
    if (!val) {
      p->oom = true;
      break;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(args, key);
    cJSON_AddItemToObject(args, key, val);
  }
  if (!args) p->oom = true;
  if (rc == BLK_NOTCALL) *e = i; /* the text examined is content */
  if (rc == BLK_DONE && !op_pend_obj(p, pd, name, strlen(name), args)) rc = BLK_NOTCALL;
  cJSON_Delete(args);
  return rc;
}

static blk_rc xml_call_ctx(op_state *p, const void *x, size_t i, size_t *e, op_pending *pd) {
  return xml_call(p, x, i, e, pd);
}

static const xml_spec X_QWEN3_CODER = {.sec_close = "</tool_call>",
                                       .call_open = "<function=",
                                       .name_close = ">",
                                       .call_close = "</function>",
                                       .key_open = "<parameter=",
                                       .key_close = ">",
                                       .val_close = "</parameter>",
                                       .trim_nl = true};
static const xml_spec X_MINIMAX = {.sec_close = "</minimax:tool_call>",
                                   .call_open = "<invoke name=\"",
                                   .name_close = "\">",
                                   .call_close = "</invoke>",
                                   .key_open = "<parameter name=\"",
                                   .key_close = "\">",
                                   .val_close = "</parameter>"};
#define DSML      \
  "<\xef\xbd\x9c" \
  "DSML"          \
  "\xef\xbd\x9c"
#define DSML_END   \
  "</\xef\xbd\x9c" \
  "DSML"           \
  "\xef\xbd\x9c"
static const xml_spec X_DSML_F = {.sec_close = DSML_END "function_calls>",
                                  .call_open = DSML "invoke name=\"",
                                  .name_close = "\">",
                                  .call_close = DSML_END "invoke>",
                                  .key_open = DSML "parameter name=\"",
                                  .key_close = "\"",
                                  .attrs = true,
                                  .val_close = DSML_END "parameter>"};
static const xml_spec X_DSML_T = {.sec_close = DSML_END "tool_calls>",
                                  .call_open = DSML "invoke name=\"",
                                  .name_close = "\">",
                                  .call_close = DSML_END "invoke>",
                                  .key_open = DSML "parameter name=\"",
                                  .key_close = "\"",
                                  .attrs = true,
                                  .val_close = DSML_END "parameter>"};
static const xml_spec X_ATEM = {.sec_close = "</atem:function_calls>",
                                .call_open = "<atem:invoke name=\"",
                                .name_close = "\">",
                                .call_close = "</atem:invoke>",
                                .key_open = "<atem:parameter name=\"",
                                .key_close = "\">",
                                .val_close = "</atem:parameter>"};
static const xml_spec X_GLM = {.call_close = "</tool_call>",
                               .key_open = "<arg_key>",
                               .key_close = "</arg_key>",
                               .val_open = "<arg_value>",
                               .val_close = "</arg_value>"};
static const xml_spec X_MINICPM = {.name_close = "\">",
                                   .call_close = "</function>",
                                   .key_open = "<param name=\"",
                                   .key_close = "\">",
                                   .val_close = "</param>",
                                   .cdata = true};

static blk_rc xml_block(op_state *p, const xml_spec *x, size_t at, size_t body, size_t *end) {
  if (x->sec_close)
    return op_section(p, at, body, x->call_open, x->sec_close, xml_call_ctx, x, end);
  op_pending pd = {0};
  size_t e = at;
  blk_rc rc = xml_call(p, x, body, &e, &pd);
  if (rc == BLK_DONE) op_pend_commit(p, &pd);
  op_pend_free(&pd);
  *end = rc == BLK_MORE ? at : e;
  return rc;
}

#define XML_BLOCK(fn, spec)                                     \
  blk_rc fn(op_state *p, size_t at, size_t body, size_t *end) { \
    return xml_block(p, &spec, at, body, end);                  \
  }
XML_BLOCK(blk_qwen3_coder, X_QWEN3_CODER)
XML_BLOCK(blk_minimax, X_MINIMAX)
XML_BLOCK(blk_dsml_f, X_DSML_F)
XML_BLOCK(blk_dsml_t, X_DSML_T)
XML_BLOCK(blk_glm, X_GLM)
XML_BLOCK(blk_minicpm, X_MINICPM)

blk_rc op_atem_block(op_state *p, size_t at, size_t body, size_t *end) {
  return xml_block(p, &X_ATEM, at, body, end);
}
