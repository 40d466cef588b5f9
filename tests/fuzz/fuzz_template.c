/* fuzz_template.c: libFuzzer target for the Jinja template engine: the
 * input up to its first NUL byte is a template, parsed; what follows, when
 * there is any, is the render's JSON variables, else a conversation with
 * tools and tool calls. Every input must either fail with a one-line
 * message or render; nothing may crash, leak, hang or grow without bound
 * (ASan and UBSan watch; the render runs under small limits so that each
 * input ends quickly). Seeds: the corpus of chat templates (test_fuzz.py). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pasada.h"
#include "template/tpl.h"

static const char VARS[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": "
    "\"hi \\u00e9\"}, {\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"r\", "
    "\"tool_calls\": [{\"id\": \"call1\", \"type\": \"function\", \"function\": {\"name\": \"f\", "
    "\"arguments\": {\"a\": 1, \"b\": [1.5, \"x\"]}}}]}, {\"role\": \"tool\", \"tool_call_id\": "
    "\"call1\", \"content\": \"42\"}, {\"role\": \"user\", \"content\": [{\"type\": \"text\", "
    "\"text\": \"t\"}]}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
    "\"description\": \"d\", \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": "
    "{\"type\": \"integer\"}, \"b\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}}, "
    "\"required\": [\"a\"]}}}], \"documents\": null, \"add_generation_prompt\": true, "
    "\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"enable_thinking\": false}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nul = memchr(data, 0, size);
  const size_t tlen = nul ? (size_t)(nul - data) : size;
  pasada_template *t = NULL;
  if (pasada_template_parse((const char *)data, tlen, &t) != PASADA_OK) {
    if (!pasada_last_error()[0] || strchr(pasada_last_error(), '\n')) abort();
    return 0;
  }
  tpl_limits lim = tpl_default_limits;
  lim.max_steps = 200000;
  lim.max_output = 1 << 20;
  lim.max_memory = 64 << 20;
  const char *vars = VARS;
  size_t vlen = sizeof VARS - 1;
  if (nul && size - tlen > 1) {
    vars = (const char *)nul + 1;
    vlen = size - tlen - 1;
  }
  char *out = NULL;
  const int rc = tpl_render(t, vars, vlen, &lim, &out); /* with limits below the default */
  if (rc == PASADA_OK) {
    if (!out || !tpl_utf8_valid(out, strlen(out))) abort(); /* output is valid UTF-8 */
  } else if (out || !pasada_last_error()[0]) {
    abort();
  }
  free(out);
  pasada_template_free(t);
  return 0;
}
