/* output.c: splits what a chat model generated into content, reasoning and
 * tool calls (see output.h). This is the plain form: everything is content. */
#include "server/output.h"

#include <stdlib.h>
#include <string.h>

static const char *const format_names[SRV_OUT_COUNT] = {
    "plain",   "hermes",      "llama3",    "mistral", "gpt-oss", "deepseek", "qwen3-coder",
    "granite", "functionary", "command-r", "gemma",   "kimi",    "glm",      "minimax"};

const char *srv_out_format_name(srv_out_format f) {
  return f >= 0 && f < SRV_OUT_COUNT ? format_names[f] : "unknown";
}

void srv_out_style_detect(const char *template_src, const char *arch, srv_out_style *out) {
  (void)template_src;
  (void)arch;
  memset(out, 0, sizeof *out);
  out->format = SRV_OUT_PLAIN;
}

bool srv_output_parse(const srv_out_style *st, const char *text, size_t n, const srv_out_opts *o,
                      srv_output *out) {
  (void)st;
  (void)o;
  memset(out, 0, sizeof *out);
  out->content = malloc(n + 1);
  out->reasoning = malloc(1);
  if (!out->content || !out->reasoning) {
    srv_output_free(out);
    return false;
  }
  memcpy(out->content, text, n);
  out->content[n] = 0;
  out->n_content = n;
  out->reasoning[0] = 0;
  return true;
}

void srv_output_free(srv_output *out) {
  free(out->content);
  free(out->reasoning);
  for (int i = 0; i < out->n_calls; i++) {
    free(out->calls[i].name);
    free(out->calls[i].arguments);
  }
  free(out->calls);
  memset(out, 0, sizeof *out);
}
