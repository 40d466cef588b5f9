/* fuzz_output.c: libFuzzer target for the output parser (server/output.c),
 * which reads every byte a model generates. Byte 0 picks the family (mod the
 * number of families), byte 1 the options (bit 0 tools, bit 1 in_reasoning,
 * bits 2-3 the reasoning markers: none, <think>, [THINK], the family's own
 * from a detection), byte 2 where to cut the text for the streaming check;
 * the rest is the text. Beyond ASan and UBSan it checks the contract: the
 * parse of a prefix is extended by the parse of the whole (content and
 * reasoning are prefixes, calls keep ids, names and arguments), the final
 * parse extends the streaming one, and every call's arguments are a
 * compact JSON object. Seeds: assistant turns rendered by the chat
 * templates (tests/e2e/test_fuzz.py takes them from
 * tests/fixtures/output/cases.json). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/output.h"

static bool is_prefix(const char *a, size_t na, const char *b, size_t nb) {
  return na <= nb && memcmp(a, b, na) == 0;
}

/* b extends a: the streaming rule. */
static void check_extends(const srv_output *a, const srv_output *b) {
  if (!is_prefix(a->content, a->n_content, b->content, b->n_content)) abort();
  if (!is_prefix(a->reasoning, a->n_reasoning, b->reasoning, b->n_reasoning)) abort();
  if (a->n_calls > b->n_calls) abort();
  for (int i = 0; i < a->n_calls; i++)
    if (strcmp(a->calls[i].id, b->calls[i].id) || strcmp(a->calls[i].name, b->calls[i].name) ||
        strcmp(a->calls[i].arguments, b->calls[i].arguments))
      abort();
}

static void check_calls(const srv_output *o) {
  if (o->content[o->n_content] || o->reasoning[o->n_reasoning]) abort(); /* NUL-terminated */
  for (int i = 0; i < o->n_calls; i++) {
    const char *a = o->calls[i].arguments;
    cJSON *v = cJSON_Parse(a);
    if (!cJSON_IsObject(v) || !o->calls[i].name[0]) abort();
    cJSON_Delete(v);
    bool in_str = false;
    for (const char *s = a; *s; s++) {
      if (in_str) {
        if (*s == '\\' && s[1])
          s++;
        else if (*s == '"')
          in_str = false;
      } else if (*s == '"') {
        in_str = true;
      } else if (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r') {
        abort(); /* not compact */
      }
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  srv_out_style st = {.format = (srv_out_format)(data[0] % SRV_OUT_COUNT)};
  switch ((data[1] >> 2) & 3) {
    case 1:
      strcpy(st.think_open, "<think>");
      strcpy(st.think_close, "</think>");
      break;
    case 2:
      strcpy(st.think_open, "[THINK]");
      strcpy(st.think_close, "[/THINK]");
      break;
    case 3: { /* the family's own markers, as detection gives them */
      static const char *const srcs[] = {"<|START_ACTION|>", "<|tool_call>", "<|tool_call:begin|>",
                                         "<tool_calls>[BEGIN FINAL RESPONSE]"};
      srv_out_style d;
      srv_out_style_detect(srcs[data[0] % 4], NULL, &d);
      memcpy(st.think_open, d.think_open, sizeof st.think_open);
      memcpy(st.think_close, d.think_close, sizeof st.think_close);
      break;
    }
    default:
      break;
  }
  srv_out_opts o = {.tools = data[1] & 1, .in_reasoning = (data[1] >> 1) & 1, .id_seed = data[2]};
  const char *text = (const char *)data + 3;
  size_t n = size - 3, cut = n ? data[2] * n / 255 : 0;

  srv_output part, whole, fin;
  if (!srv_output_parse(&st, text, cut, &o, &part)) return 0;
  if (!srv_output_parse(&st, text, n, &o, &whole)) {
    srv_output_free(&part);
    return 0;
  }
  o.final = true;
  if (!srv_output_parse(&st, text, n, &o, &fin)) {
    srv_output_free(&part);
    srv_output_free(&whole);
    return 0;
  }
  check_calls(&part);
  check_calls(&whole);
  check_calls(&fin);
  check_extends(&part, &whole);
  check_extends(&whole, &fin);
  srv_output_free(&part);
  srv_output_free(&whole);
  srv_output_free(&fin);
  return 0;
}
