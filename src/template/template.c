/* template.c: the public face of the Jinja template engine
 * (pasada_template_parse / render / free, pasada.h): a parsed template owns
 * its syntax tree and its constants and is never changed by a render, so
 * renders may run on several threads at once; and a model's own template
 * with its BOS and EOS text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/tpl.h"

/* Keeps the message of a failure on one line (a template's text or a
 * raise_exception message may hold newlines and other control characters). */
static int one_line(int rc) {
  if (rc == PASADA_OK) return rc;
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", pa_last_error());
  for (char *p = msg; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = ' ';
  return pa_error(rc, "%s", msg);
}

PASADA_API int pasada_template_parse(const char *src, size_t len, pasada_template **out) {
  if (!out) return pa_error(PASADA_ERR_ARG, "template: no output given");
  *out = NULL;
  if (!src && len) return pa_error(PASADA_ERR_ARG, "template: no source given");
  struct pa_template *t = calloc(1, sizeof *t);
  if (!t) return pa_error(PASADA_ERR_NOMEM, "out of memory for a template");
  tpl_heap_init(&t->heap, SIZE_MAX / 2, SIZE_MAX / 2, true);
  tpl_heap *saved = tpl_heap_cur;
  tpl_heap_cur = &t->heap;
  const int rc = one_line(tpl_parse(t, src ? src : "", len));
  tpl_heap_cur = saved;
  if (rc) {
    pasada_template_free(t);
    return rc;
  }
  *out = t;
  return PASADA_OK;
}

PASADA_API int pasada_template_render(const pasada_template *t, const char *context_json,
                                      size_t len, char **out) {
  if (!out) return pa_error(PASADA_ERR_ARG, "template: no output given");
  *out = NULL;
  if (!t) return pa_error(PASADA_ERR_ARG, "template: no template given");
  if (!context_json) return pa_error(PASADA_ERR_ARG, "template: no variables given");
  return one_line(tpl_render(t, context_json, len, &tpl_default_limits, out));
}

PASADA_API void pasada_template_free(pasada_template *t) {
  if (!t) return;
  tpl_heap_sweep(&t->heap);
  tpl_arena_free(t);
  free(t->names);
  free(t);
}

/* The text of token id, special tokens as their text; "" for -1. */
static int token_text(const pasada_tokenizer *tok, int32_t id, char **out) {
  size_t n = id >= 0 ? pasada_token_to_piece(tok, id, true, NULL, 0) : 0;
  *out = malloc(n + 1);
  if (!*out) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  if (n) pasada_token_to_piece(tok, id, true, *out, n);
  (*out)[n] = '\0';
  return PASADA_OK;
}

PASADA_API int pasada_model_chat_template(const pasada_model *model, char **tmpl, char **bos,
                                          char **eos) {
  if (!model || !tmpl || !bos || !eos)
    return pa_error(PASADA_ERR_ARG, "chat template: no model or no output");
  *tmpl = *bos = *eos = NULL;
  if (pasada_model_meta_value(model, "tokenizer.chat_template", tmpl) != PASADA_OK)
    return pa_error(PASADA_ERR_ARG,
                    "the model has no chat template (no tokenizer.chat_template in its metadata)");
  const pasada_tokenizer *tok = pasada_model_tokenizer(model);
  int rc = token_text(tok, pasada_tokenizer_bos(tok), bos);
  if (!rc) rc = token_text(tok, pasada_tokenizer_eos(tok), eos);
  if (rc) {
    free(*tmpl);
    free(*bos);
    free(*eos);
    *tmpl = *bos = *eos = NULL;
  }
  return rc;
}
