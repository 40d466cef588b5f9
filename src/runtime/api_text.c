/* api_text.c: the public text API of pasada.h (tokenize, detokenize,
 * streaming detokenizer, chat templates) over the tokenizer module. Thin
 * wrappers: the public types mirror the tokenizer's, checked at compile time. */
#include <stdlib.h>

#include "base/base.h"
#include "model/model.h"
#include "pasada.h"
#include "tokenizer/tokenizer.h"

/* pasada_tokenizer and pa_tokenizer name the same struct. */
_Static_assert((int)PASADA_CHAT_NONE == (int)PA_CHAT_NONE, "chat template ids");
_Static_assert((int)PASADA_CHAT_CHATML == (int)PA_CHAT_CHATML, "chat template ids");
_Static_assert((int)PASADA_CHAT_GEMMA == (int)PA_CHAT_GEMMA, "chat template ids");
_Static_assert((int)PASADA_CHAT_LLAMA3 == (int)PA_CHAT_LLAMA3, "chat template ids");
_Static_assert(sizeof(pasada_chat_message) == sizeof(pa_chat_message), "chat message layout");
_Static_assert(offsetof(pasada_chat_message, role) == offsetof(pa_chat_message, role),
               "chat message layout");
_Static_assert(offsetof(pasada_chat_message, content) == offsetof(pa_chat_message, content),
               "chat message layout");

/* ---- tokenizer ---- */

int32_t pasada_tokenizer_n_vocab(const pasada_tokenizer *tok) { return pa_tokenizer_n_vocab(tok); }
int32_t pasada_tokenizer_bos(const pasada_tokenizer *tok) { return pa_tokenizer_bos(tok); }
int32_t pasada_tokenizer_eos(const pasada_tokenizer *tok) { return pa_tokenizer_eos(tok); }
bool pasada_tokenizer_add_bos(const pasada_tokenizer *tok) { return pa_tokenizer_add_bos(tok); }
bool pasada_tokenizer_add_eos(const pasada_tokenizer *tok) { return pa_tokenizer_add_eos(tok); }

bool pasada_tokenizer_is_eog(const pasada_tokenizer *tok, int32_t id) {
  return pa_tokenizer_is_eog(tok, id);
}

int32_t pasada_tokenizer_find(const pasada_tokenizer *tok, const char *text) {
  return text ? pa_tokenizer_find(tok, text) : -1;
}

int pasada_tokenize(const pasada_tokenizer *tok, const char *text, size_t len, bool add_special,
                    bool parse_special, int32_t **out, size_t *n_out) {
  if (!out || !n_out) return pa_error(PASADA_ERR_ARG, "tokenize: no output given");
  *out = NULL;
  *n_out = 0;
  if (!tok) return pa_error(PASADA_ERR_ARG, "tokenize: no tokenizer");
  if (!text && len) return pa_error(PASADA_ERR_ARG, "tokenize: no text");
  return pa_tokenize(tok, text ? text : "", len, add_special, parse_special, out, n_out);
}

size_t pasada_token_to_piece(const pasada_tokenizer *tok, int32_t id, bool render_special,
                             char *buf, size_t cap) {
  return pa_token_to_piece(tok, id, render_special, buf, cap);
}

int pasada_detokenize(const pasada_tokenizer *tok, const int32_t *ids, size_t n,
                      bool render_special, char **out, size_t *out_len) {
  if (!out) return pa_error(PASADA_ERR_ARG, "detokenize: no output given");
  *out = NULL;
  if (out_len) *out_len = 0;
  if (!tok || (!ids && n)) return pa_error(PASADA_ERR_ARG, "detokenize: no tokenizer or no tokens");
  *out = pa_detokenize_len(tok, ids, n, render_special, out_len);
  if (!*out) return pa_error(PASADA_ERR_NOMEM, "detokenize: out of memory for %zu tokens", n);
  return PASADA_OK;
}

void pasada_text_free(void *p) { free(p); }

/* ---- streaming detokenizer ---- */

struct pasada_detok {
  pa_detok d;
  const pa_tokenizer *tok;
  bool render_special;
};

int pasada_detok_create(const pasada_tokenizer *tok, bool render_special, pasada_detok **out) {
  *out = NULL;
  if (!tok) return pa_error(PASADA_ERR_ARG, "detokenizer: no tokenizer");
  pasada_detok *d = malloc(sizeof *d);
  if (!d) return pa_error(PASADA_ERR_NOMEM, "detokenizer: out of memory");
  d->tok = tok;
  d->render_special = render_special;
  pa_detok_init(&d->d, tok, render_special);
  *out = d;
  return PASADA_OK;
}

void pasada_detok_free(pasada_detok *d) { free(d); }

size_t pasada_detok_push(pasada_detok *d, int32_t id, char *buf, size_t cap) {
  return pa_detok_push(&d->d, id, buf, cap);
}

size_t pasada_detok_flush(pasada_detok *d, char *buf, size_t cap) {
  return pa_detok_flush(&d->d, buf, cap);
}

void pasada_detok_reset(pasada_detok *d) { pa_detok_init(&d->d, d->tok, d->render_special); }

/* ---- chat templates ---- */

int pasada_chat_detect(const pasada_model *model, pasada_chat_template *out) {
  if (!out) return pa_error(PASADA_ERR_ARG, "chat template: no output given");
  if (!model) return pa_error(PASADA_ERR_ARG, "chat template: no model");
  pa_chat_template t = PA_CHAT_NONE;
  int st = pa_chat_detect(model->gguf, model->tok, model->arch_name, &t);
  *out = (pasada_chat_template)t;
  return st;
}

int pasada_chat_from_name(const char *name, pasada_chat_template *out) {
  pa_chat_template t = PA_CHAT_NONE;
  if (!out) return pa_error(PASADA_ERR_ARG, "chat template: no output given");
  if (!name) return pa_error(PASADA_ERR_ARG, "chat template: no name");
  int st = pa_chat_from_name(name, &t);
  *out = (pasada_chat_template)t;
  return st;
}

const char *pasada_chat_name(pasada_chat_template tmpl) {
  return pa_chat_name((pa_chat_template)tmpl);
}

/* What both public render calls share: the conversation is checked first
 * (the template chosen, Gemma's roles), so a render that fails after that
 * ran out of memory. */
static int render(const pa_chat_format *fmt, const pasada_chat_message *msgs, size_t n,
                  bool add_generation_prompt, char **out) {
  if (!out) return pa_error(PASADA_ERR_ARG, "chat template: no output given");
  *out = NULL;
  if (!msgs && n) return pa_error(PASADA_ERR_ARG, "chat template: no messages");
  int st = pa_chat_check(fmt->kind, (const pa_chat_message *)msgs, n);
  if (st) return st;
  *out = pa_chat_render_format(fmt, (const pa_chat_message *)msgs, n, add_generation_prompt);
  return *out ? PASADA_OK : pa_error(PASADA_ERR_NOMEM, "chat template: out of memory");
}

int pasada_chat_render(pasada_chat_template tmpl, const pasada_chat_message *msgs, size_t n,
                       bool add_generation_prompt, char **out) {
  pa_chat_format fmt = pa_chat_format_plain((pa_chat_template)tmpl);
  return render(&fmt, msgs, n, add_generation_prompt, out);
}

int pasada_chat_check(pasada_chat_template tmpl, const pasada_chat_message *msgs, size_t n) {
  return pa_chat_check((pa_chat_template)tmpl, (const pa_chat_message *)msgs, n);
}

int pasada_chat_render_model(const pasada_model *model, pasada_chat_template tmpl,
                             const pasada_chat_message *msgs, size_t n, bool add_generation_prompt,
                             char **out) {
  pa_chat_format fmt = pa_chat_format_plain((pa_chat_template)tmpl);
  pa_chat_format own;
  if (model && pa_chat_detect_format(model->gguf, model->tok, model->arch_name, &own) == PASADA_OK &&
      own.kind == (pa_chat_template)tmpl)
    fmt = own;
  return render(&fmt, msgs, n, add_generation_prompt, out);
}
