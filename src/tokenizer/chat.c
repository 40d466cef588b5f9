/* chat.c: chat templates, written out in C for the families we run.
 *
 * We do not run Jinja: the template in the file is recognised by its
 * markers, and each family's rendering is reproduced exactly as its official
 * Jinja template produces it for system/user/assistant messages, including
 * the details that matter for parity (Gemma folds the system message into the
 * first user turn and trims contents; Llama 3 trims; chatml does not; a
 * chatml template's default system prompt is read from the template text).
 * The BOS a template starts with is left to the tokenizer (see tokenizer.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/sbuf.h"
#include "tokenizer/tokenizer_internal.h"

/* ---- a growable string ---- */
static char *sb_finish(pa_sbuf *b) {
  char *s = pa_sbuf_finish(b);
  if (!s) pa_error(PASADA_ERR_NOMEM, "chat template: out of memory");
  return s;
}

/* Python's str.isspace, which Jinja's trim filter (str.strip) uses. */
static bool py_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* Appends s with leading and trailing whitespace removed (Jinja `| trim`). */
static void sb_trimmed(pa_sbuf *b, const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  size_t n = strlen(s), start = 0, end = n;
  uint32_t cp;
  while (start < n) {
    int k = pa_utf8_decode(u + start, n - start, &cp);
    if (k <= 0 || !py_space(cp)) break;
    start += (size_t)k;
  }
  size_t last_keep = start; /* end of the last non-space character */
  for (size_t i = start; i < n;) {
    int k = pa_utf8_decode(u + i, n - i, &cp);
    if (k <= 0) k = 1, cp = 0xFFFD;
    i += (size_t)k;
    if (!py_space(cp)) last_keep = i;
  }
  end = last_keep;
  pa_sbuf_put(b, s + start, end - start);
}

static const char *content_of(const pa_chat_message *m) { return m->content ? m->content : ""; }
static const char *role_of(const pa_chat_message *m) { return m->role ? m->role : ""; }

/* ---- the families ---- */

static void render_chatml(pa_sbuf *b, const pa_chat_format *fmt, const pa_chat_message *msgs, size_t n,
                          bool add_gen) {
  for (size_t i = 0; i < n; i++) {
    if (i == 0 && fmt->default_system[0] && strcmp(role_of(&msgs[0]), "system") != 0) {
      pa_sbuf_str(b, "<|im_start|>system\n");
      pa_sbuf_str(b, fmt->default_system);
      pa_sbuf_str(b, "<|im_end|>\n");
    }
    pa_sbuf_str(b, "<|im_start|>");
    pa_sbuf_str(b, role_of(&msgs[i]));
    pa_sbuf_str(b, "\n");
    pa_sbuf_str(b, content_of(&msgs[i]));
    pa_sbuf_str(b, "<|im_end|>\n");
  }
  if (add_gen) pa_sbuf_str(b, "<|im_start|>assistant\n");
}

/* Gemma's template (raise_exception in its Jinja): after an optional
 * system message, the roles alternate user, assistant, user, ... */
static int gemma_roles(const pa_chat_message *msgs, size_t n) {
  const size_t first = n > 0 && strcmp(role_of(&msgs[0]), "system") == 0;
  for (size_t i = first; i < n; i++) {
    const char *role = role_of(&msgs[i]);
    if ((strcmp(role, "user") == 0) != ((i - first) % 2 == 0))
      return pa_error(PASADA_ERR_ARG,
                      "gemma chat template: conversation roles must alternate "
                      "user/assistant/user/assistant/... (message %zu is '%s')",
                      i, role);
  }
  return PASADA_OK;
}

static int render_gemma(pa_sbuf *b, const pa_chat_message *msgs, size_t n, bool add_gen) {
  const int rc = gemma_roles(msgs, n);
  if (rc) return rc;
  const char *system = NULL;
  if (n > 0 && strcmp(role_of(&msgs[0]), "system") == 0) {
    system = content_of(&msgs[0]); /* not trimmed: the template adds it as is */
    msgs++;
    n--;
  }
  for (size_t i = 0; i < n; i++) {
    const char *role = role_of(&msgs[i]);
    pa_sbuf_str(b, "<start_of_turn>");
    pa_sbuf_str(b, strcmp(role, "assistant") == 0 ? "model" : role);
    pa_sbuf_str(b, "\n");
    if (i == 0 && system) {
      pa_sbuf_str(b, system);
      pa_sbuf_str(b, "\n\n");
    }
    sb_trimmed(b, content_of(&msgs[i]));
    pa_sbuf_str(b, "<end_of_turn>\n");
  }
  if (add_gen) pa_sbuf_str(b, "<start_of_turn>model\n");
  return PASADA_OK;
}

static void llama3_turn(pa_sbuf *b, const char *role, const char *content) {
  pa_sbuf_str(b, "<|start_header_id|>");
  pa_sbuf_str(b, role);
  pa_sbuf_str(b, "<|end_header_id|>\n\n");
  sb_trimmed(b, content);
  pa_sbuf_str(b, "<|eot_id|>");
}

static void render_llama3(pa_sbuf *b, const pa_chat_format *fmt, const pa_chat_message *msgs, size_t n,
                          bool add_gen) {
  if (fmt->date[0]) { /* 3.1+: a system turn always, with the knowledge dates */
    const char *system = "";
    if (n > 0 && strcmp(role_of(&msgs[0]), "system") == 0) {
      system = content_of(&msgs[0]);
      msgs++;
      n--;
    }
    pa_sbuf_str(b, "<|start_header_id|>system<|end_header_id|>\n\n");
    pa_sbuf_str(b, "Cutting Knowledge Date: December 2023\nToday Date: ");
    pa_sbuf_str(b, fmt->date);
    pa_sbuf_str(b, "\n\n");
    sb_trimmed(b, system);
    pa_sbuf_str(b, "<|eot_id|>");
  }
  for (size_t i = 0; i < n; i++) llama3_turn(b, role_of(&msgs[i]), content_of(&msgs[i]));
  if (add_gen) pa_sbuf_str(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

char *pa_chat_render_format(const pa_chat_format *fmt, const pa_chat_message *msgs, size_t n,
                            bool add_generation_prompt) {
  pa_sbuf b = {0};
  switch (fmt->kind) {
  case PA_CHAT_CHATML: render_chatml(&b, fmt, msgs, n, add_generation_prompt); break;
  case PA_CHAT_GEMMA:
    if (render_gemma(&b, msgs, n, add_generation_prompt)) {
      free(b.s);
      return NULL;
    }
    break;
  case PA_CHAT_LLAMA3: render_llama3(&b, fmt, msgs, n, add_generation_prompt); break;
  default: pa_error(PASADA_ERR_ARG, "chat template: none selected"); return NULL;
  }
  return sb_finish(&b);
}

pa_chat_format pa_chat_format_plain(pa_chat_template t) {
  pa_chat_format f;
  memset(&f, 0, sizeof f);
  f.kind = t;
  return f;
}

int pa_chat_check(pa_chat_template t, const pa_chat_message *msgs, size_t n) {
  switch (t) {
  case PA_CHAT_CHATML:
  case PA_CHAT_LLAMA3: return PASADA_OK;
  case PA_CHAT_GEMMA: return gemma_roles(msgs, n);
  default: return pa_error(PASADA_ERR_ARG, "chat template: none selected");
  }
}

char *pa_chat_render(pa_chat_template t, const pa_chat_message *msgs, size_t n,
                     bool add_generation_prompt) {
  pa_chat_format f = pa_chat_format_plain(t);
  return pa_chat_render_format(&f, msgs, n, add_generation_prompt);
}

/* ---- names and detection ---- */

int pa_chat_from_name(const char *name, pa_chat_template *out) {
  static const struct {
    const char *name;
    pa_chat_template t;
  } names[] = {{"chatml", PA_CHAT_CHATML},
               {"gemma", PA_CHAT_GEMMA},
               {"gemma3", PA_CHAT_GEMMA},
               {"llama3", PA_CHAT_LLAMA3},
               {"llama-3", PA_CHAT_LLAMA3}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (name && strcmp(name, names[i].name) == 0) {
      *out = names[i].t;
      return PASADA_OK;
    }
  return pa_error(PASADA_ERR_ARG, "unknown chat template '%.40s' (known: chatml, gemma, llama3)",
                  name ? name : "(null)");
}

const char *pa_chat_name(pa_chat_template t) {
  switch (t) {
  case PA_CHAT_CHATML: return "chatml";
  case PA_CHAT_GEMMA: return "gemma";
  case PA_CHAT_LLAMA3: return "llama3";
  default: return "none";
  }
}

/* The literal text of a chatml default system turn in the template:
 * '<|im_start|>system\n' LITERAL '<|im_end|>' inside one Jinja string, with
 * the newline written either as a real newline or as the escape \n. */
static void find_default_system(const char *tmpl, char *out, size_t cap) {
  out[0] = '\0';
  static const char head[] = "<|im_start|>system";
  for (const char *p = strstr(tmpl, head); p; p = strstr(p + 1, head)) {
    const char *q = p + sizeof head - 1;
    if (q[0] == '\n')
      q += 1;
    else if (q[0] == '\\' && q[1] == 'n')
      q += 2;
    else
      continue;
    const char *end = strstr(q, "<|im_end|>");
    if (!end || end == q) continue;
    /* A literal: no quote, no expression, no statement inside. */
    bool literal = true;
    for (const char *c = q; c < end && literal; c++)
      if (*c == '\'' || *c == '"' || *c == '{' || *c == '}') literal = c > q && c[-1] == '\\';
    if (!literal) continue;
    size_t o = 0;
    for (const char *c = q; c < end && o + 1 < cap; c++) {
      if (*c == '\\' && c + 1 < end) { /* Jinja string escapes */
        c++;
        out[o++] = *c == 'n' ? '\n' : *c == 't' ? '\t' : *c;
      } else {
        out[o++] = *c;
      }
    }
    out[o] = '\0';
    return;
  }
}

/* Whether the vocabulary has a token spelled `text`: from the loaded
 * tokenizer when there is one (a loaded model's file no longer holds its
 * token list: model.c drops it), else from the file's token list. */
static bool vocab_has(const gguf_file *f, const pa_tokenizer *tok, const char *text) {
  if (tok) return pa_tokenizer_find(tok, text) >= 0;
  const gguf_value *v = gguf_get(f, "tokenizer.ggml.tokens");
  if (!v || v->type != GGUF_TYPE_ARRAY || v->arr.elem_type != GGUF_TYPE_STRING || !v->arr.strs)
    return false;
  size_t n = strlen(text);
  for (uint64_t i = 0; i < v->arr.count; i++)
    if (v->arr.strs[i].len == n && memcmp(v->arr.strs[i].ptr, text, n) == 0) return true;
  return false;
}

int pa_chat_detect_format(const gguf_file *f, const pa_tokenizer *tok, const char *arch,
                          pa_chat_format *out) {
  memset(out, 0, sizeof *out);
  char *tmpl = NULL, *arch_owned = NULL;
  int rc = gguf_get_string(f, "tokenizer.chat_template", false, &tmpl);
  if (rc) return rc;
  if (tmpl) {
    if (strstr(tmpl, "<|im_start|>")) {
      out->kind = PA_CHAT_CHATML;
      find_default_system(tmpl, out->default_system, sizeof out->default_system);
    } else if (strstr(tmpl, "<start_of_turn>")) {
      out->kind = PA_CHAT_GEMMA;
    } else if (strstr(tmpl, "<|start_header_id|>")) {
      out->kind = PA_CHAT_LLAMA3;
      if (strstr(tmpl, "Cutting Knowledge Date"))
        snprintf(out->date, sizeof out->date, "26 Jul 2024");
    } else {
      free(tmpl);
      return pa_error(PASADA_ERR_UNSUPPORTED,
                      "tokenizer.chat_template is not a template pasada knows (no <|im_start|>, "
                      "<start_of_turn> or <|start_header_id|> marker); pass --chat-template "
                      "chatml|gemma|llama3");
    }
    free(tmpl);
    return PASADA_OK;
  }
  if (!arch) {
    if ((rc = gguf_get_string(f, "general.architecture", false, &arch_owned))) return rc;
    arch = arch_owned ? arch_owned : "";
  }
  if (strcmp(arch, "gemma") == 0 || strcmp(arch, "gemma2") == 0 || strcmp(arch, "gemma3") == 0)
    out->kind = PA_CHAT_GEMMA;
  else if (strcmp(arch, "qwen2") == 0 || strcmp(arch, "qwen3") == 0 ||
           strcmp(arch, "qwen2moe") == 0 || strcmp(arch, "qwen3moe") == 0)
    out->kind = PA_CHAT_CHATML;
  else if (strcmp(arch, "llama") == 0 && vocab_has(f, tok, "<|im_start|>"))
    out->kind = PA_CHAT_CHATML;
  if (out->kind == PA_CHAT_NONE) {
    rc = pa_error(PASADA_ERR_UNSUPPORTED,
                  "the model has no tokenizer.chat_template and architecture '%.40s' has no "
                  "default chat template; pass --chat-template chatml|gemma|llama3",
                  arch);
    free(arch_owned);
    return rc;
  }
  free(arch_owned);
  return PASADA_OK;
}

int pa_chat_detect(const gguf_file *f, const pa_tokenizer *tok, const char *arch,
                   pa_chat_template *out) {
  pa_chat_format fmt;
  int rc = pa_chat_detect_format(f, tok, arch, &fmt);
  *out = rc ? PA_CHAT_NONE : fmt.kind;
  return rc;
}
