/* request.c: the request parts every generating API shares (see
 * request.h): function tools and the tool choice, JSON and GBNF output
 * constraints, logit biases, and the job's sampler made from them. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/json_schema.h"
#include "server/request.h"
#include "server/json_util.h"
#include "runtime/speculative.h"

#define BAD(e, param, ...) srv_fail(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

static bool name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 64) return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-'))
      return false;
  }
  return true;
}

bool srv_tools_check(const cJSON *tools, const char *param, srv_error *e) {
  if (!cJSON_IsArray(tools)) return BAD(e, param, "'%s' must be an array of tools", param);
  if (cJSON_GetArraySize(tools) > 512)
    return BAD(e, param, "'%s' has %d tools, at most 512 are allowed", param,
               cJSON_GetArraySize(tools));
  int i = 0;
  const cJSON *t;
  char p[128];
  cJSON_ArrayForEach(t, tools) {
    snprintf(p, sizeof p, "%s[%d]", param, i);
    const cJSON *type = srv_json_field(t, "type"), *fn = srv_json_field(t, "function");
    if (!cJSON_IsObject(t) || !cJSON_IsString(type))
      return BAD(e, p, "'%s' must be an object with a 'type'", p);
    if (strcmp(type->valuestring, "function") != 0)
      return BAD(e, p, "tools of type '%s' are not supported (only 'function')", type->valuestring);
    if (!cJSON_IsObject(fn)) return BAD(e, p, "'%s.function' must be an object", p);
    const cJSON *name = srv_json_field(fn, "name"), *desc = srv_json_field(fn, "description"),
                *params = srv_json_field(fn, "parameters"), *strict = srv_json_field(fn, "strict");
    if (!cJSON_IsString(name) || !name_ok(name->valuestring))
      return BAD(e, p, "'%s.function.name' must be 1 to 64 of a-z, A-Z, 0-9, '_' and '-'", p);
    if (desc && !cJSON_IsString(desc))
      return BAD(e, p, "'%s.function.description' must be a string", p);
    if (params && !cJSON_IsObject(params))
      return BAD(e, p, "'%s.function.parameters' must be a JSON schema object", p);
    if (strict && !cJSON_IsBool(strict))
      return BAD(e, p, "'%s.function.strict' must be a boolean", p);
    /* names are unique: a call must say which function it means */
    const cJSON *u;
    int k = 0;
    cJSON_ArrayForEach(u, tools) {
      if (k++ >= i) break;
      const cJSON *un = srv_json_field(srv_json_field(u, "function"), "name");
      if (strcmp(un->valuestring, name->valuestring) == 0)
        return BAD(e, p, "the function name '%s' is given twice", name->valuestring);
    }
    i++;
  }
  return true;
}

bool srv_tools_has(const cJSON *tools, const char *name) {
  const cJSON *t;
  cJSON_ArrayForEach(t, tools) {
    const cJSON *n = srv_json_field(srv_json_field(t, "function"), "name");
    if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0) return true;
  }
  return false;
}

bool srv_tools_apply(const srv_model_info *mi, const cJSON *tools, srv_tool_mode mode,
                     const char *name, bool parallel, srv_request *r, srv_error *e) {
  r->tools = tools && cJSON_GetArraySize(tools) > 0 && mode != SRV_TOOLS_NONE;
  if (!r->tools) {
    if (mode == SRV_TOOLS_REQUIRED || mode == SRV_TOOLS_NAMED)
      return BAD(e, "tool_choice", "'tool_choice' asks for a tool call but no tools are given");
    return true;
  }
  if (mi->style.format == SRV_OUT_PLAIN)
    return BAD(e, "tools",
               "the model's chat template has no tool-call syntax the server can parse, so tool "
               "calls cannot be returned");
  r->tool_defs = cJSON_Duplicate(tools, true);
  if (!r->tool_defs) return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
  if (mode == SRV_TOOLS_AUTO) return true;
  if (mode == SRV_TOOLS_NAMED && !srv_tools_has(tools, name))
    return BAD(e, "tool_choice", "'tool_choice' names the function '%s', which is not in 'tools'",
               name);
  if (r->grammar)
    return BAD(e, "tool_choice",
               "a required tool call cannot be combined with another output constraint");
  r->grammar = srv_tool_grammar(&mi->style, tools, mode == SRV_TOOLS_NAMED ? name : NULL, parallel,
                                r->in_reasoning, e);
  return r->grammar != NULL;
}

bool srv_request_json(const cJSON *schema, const char *param, srv_request *r, srv_error *e) {
  if (r->grammar)
    return BAD(e, param, "'%s' cannot be combined with another output constraint", param);
  r->grammar = srv_json_schema_gbnf(schema, e);
  if (!r->grammar && e->status == 400 && !e->param[0])
    snprintf(e->param, sizeof e->param, "%s", param);
  return r->grammar != NULL;
}

bool srv_request_grammar(const char *gbnf, const char *param, srv_request *r, srv_error *e) {
  if (r->grammar)
    return BAD(e, param, "'%s' cannot be combined with another output constraint", param);
  if (!gbnf[0]) return BAD(e, param, "'%s' is empty", param);
  r->grammar = strdup(gbnf);
  if (!r->grammar) return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
  return true;
}

bool srv_request_logit_bias(const srv_model_info *mi, const cJSON *bias, const char *param,
                            srv_request *r, srv_error *e) {
  if (!bias) return true;
  if (!cJSON_IsObject(bias))
    return BAD(e, param, "'%s' must be an object of token ids and biases", param);
  int n = cJSON_GetArraySize(bias);
  if (n > 1024) return BAD(e, param, "'%s' has %d entries, at most 1024 are allowed", param, n);
  if (n == 0) return true;
  r->bias_ids = malloc((size_t)n * sizeof *r->bias_ids);
  r->bias = malloc((size_t)n * sizeof *r->bias);
  if (!r->bias_ids || !r->bias)
    return srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
  const cJSON *b;
  cJSON_ArrayForEach(b, bias) {
    char *end = NULL;
    long id = strtol(b->string, &end, 10);
    if (!b->string[0] || *end || id < 0 || id >= mi->n_vocab)
      return BAD(e, param, "'%s' has the key '%.32s', which is not a token id in [0, %d)", param,
                 b->string, mi->n_vocab);
    if (!cJSON_IsNumber(b) || !isfinite(b->valuedouble) || b->valuedouble < -100 ||
        b->valuedouble > 100)
      return BAD(e, param, "the bias of token %ld must be a number in [-100, 100]", id);
    r->bias_ids[r->n_bias] = (int32_t)id;
    r->bias[r->n_bias++] = (float)b->valuedouble;
  }
  return true;
}

/* ---- compiled grammars, shared by the requests that send the same one ----
 * A grammar is immutable once compiled and fills its per-state token caches
 * on first use (thread-safe), so requests with the same schema share one:
 * the second request skips the compilation and finds its states' masks
 * ready. Entries in use are never evicted; the least recently used idle one
 * makes room. */
#define GRAMMAR_CACHE 32

static struct {
  char *text;
  const pasada_tokenizer *tok;
  pasada_grammar *g;
  int refs;
  uint64_t used;
} gcache[GRAMMAR_CACHE];
static pthread_mutex_t gcache_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t gcache_clock;

static int gcache_find(const pasada_tokenizer *tok, const char *text) {
  for (int i = 0; i < GRAMMAR_CACHE; i++)
    if (gcache[i].g && gcache[i].tok == tok && strcmp(gcache[i].text, text) == 0) return i;
  return -1;
}

/* The compiled grammar of text (a reference the caller returns with
 * grammar_put), or NULL with the error in e. */
static pasada_grammar *grammar_get(const pasada_tokenizer *tok, const char *text, srv_error *e) {
  pthread_mutex_lock(&gcache_mu);
  int i = gcache_find(tok, text);
  if (i >= 0) {
    gcache[i].refs++;
    gcache[i].used = ++gcache_clock;
    pthread_mutex_unlock(&gcache_mu);
    return gcache[i].g;
  }
  pthread_mutex_unlock(&gcache_mu);
  pasada_grammar *g = NULL; /* compiled outside the lock: it may take milliseconds */
  int rc = pasada_grammar_create(tok, text, strlen(text), "root", &g);
  if (rc != PASADA_OK) {
    if (rc == PASADA_ERR_NOMEM)
      srv_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    else
      srv_fail(e, 400, "invalid_request_error", NULL, "grammar",
               "the output grammar cannot be used: %s", pasada_last_error());
    return NULL;
  }
  pthread_mutex_lock(&gcache_mu);
  if ((i = gcache_find(tok, text)) >= 0) { /* another request compiled it meanwhile */
    gcache[i].refs++;
    gcache[i].used = ++gcache_clock;
    pthread_mutex_unlock(&gcache_mu);
    pasada_grammar_free(g);
    return gcache[i].g;
  }
  int slot = -1; /* an empty entry, else the least recently used idle one */
  for (int k = 0; k < GRAMMAR_CACHE && slot < 0; k++)
    if (!gcache[k].g) slot = k;
  for (int k = 0; k < GRAMMAR_CACHE && (slot < 0 || gcache[slot].g); k++)
    if (gcache[k].refs == 0 && (slot < 0 || gcache[k].used < gcache[slot].used)) slot = k;
  char *copy = slot >= 0 ? strdup(text) : NULL;
  if (copy) {
    if (gcache[slot].g) {
      pasada_grammar_free(gcache[slot].g);
      free(gcache[slot].text);
    }
    gcache[slot].text = copy;
    gcache[slot].tok = tok;
    gcache[slot].g = g;
    gcache[slot].refs = 1;
    gcache[slot].used = ++gcache_clock;
  }
  pthread_mutex_unlock(&gcache_mu);
  return g; /* uncached when every entry is in use: grammar_put frees it */
}

void srv_grammar_put(pasada_grammar *g) {
  if (!g) return;
  pthread_mutex_lock(&gcache_mu);
  for (int i = 0; i < GRAMMAR_CACHE; i++)
    if (gcache[i].g == g) {
      gcache[i].refs--;
      pthread_mutex_unlock(&gcache_mu);
      return;
    }
  pthread_mutex_unlock(&gcache_mu);
  pasada_grammar_free(g);
}

void srv_grammar_cache_clear(void) {
  pthread_mutex_lock(&gcache_mu);
  for (int i = 0; i < GRAMMAR_CACHE; i++) {
    pasada_grammar_free(gcache[i].g);
    free(gcache[i].text);
    memset(&gcache[i], 0, sizeof gcache[i]);
  }
  pthread_mutex_unlock(&gcache_mu);
}

bool srv_request_sampler(const srv_model_info *mi, const srv_request *r, pasada_sampler **out,
                         pasada_grammar **grammar, srv_error *e) {
  *out = NULL;
  *grammar = NULL;
  if (r->spec_mode == 1 + PA_SPEC_DRAFT && !mi->has_draft)
    return srv_fail(e, 400, "invalid_request_error", NULL, "speculative",
                    "'speculative.mode' \"draft\" needs a server started with --draft MODEL");
  if (r->spec_mode == 1 + PA_SPEC_MTP && !mi->has_mtp)
    return srv_fail(e, 400, "invalid_request_error", NULL, "speculative",
                    "'speculative.mode' \"mtp\" needs a server started with --mtp");
  if (mi->spec_limit == 0 && r->spec_mode > 1 + PA_SPEC_OFF)
    return srv_fail(
        e, 400, "invalid_request_error", NULL, "speculative",
        "speculative decoding on a model with recurrent layers needs a server started with "
        "--lookup, --draft or --mtp (the states that roll drafts back are made at start)");
  if (mi->spec_limit > 0 && r->spec_draft_max > mi->spec_limit)
    return srv_fail(
        e, 400, "invalid_request_error", NULL, "speculative",
        "'speculative.draft_max' is at most %d on this model with recurrent layers (the "
        "server's --draft-max)",
        mi->spec_limit);
  if (r->grammar && !(*grammar = grammar_get(mi->tok, r->grammar, e))) return false;
  if (pasada_sampler_create(&r->sampling, mi->n_vocab, out) != PASADA_OK) {
    srv_fail(e, 400, "invalid_request_error", NULL, NULL, "%s", pasada_last_error());
    goto fail;
  }
  if (r->n_bias &&
      pasada_sampler_set_logit_bias(*out, r->bias_ids, r->bias, (size_t)r->n_bias) != PASADA_OK) {
    srv_fail(e, 400, "invalid_request_error", NULL, "logit_bias", "%s", pasada_last_error());
    goto fail;
  }
  if (*grammar && pasada_sampler_set_grammar(*out, *grammar) != PASADA_OK) {
    srv_fail(e, 500, "server_error", NULL, NULL, "%s", pasada_last_error());
    goto fail;
  }
  return true;
fail:
  pasada_sampler_free(*out);
  srv_grammar_put(*grammar);
  *out = NULL;
  *grammar = NULL;
  return false;
}

/* ---- speculative decoding ---- */

bool srv_request_speculative(const cJSON *spec, const char *param, srv_request *r, srv_error *e) {
  if (!spec) return true;
  if (!cJSON_IsObject(spec))
    return BAD(e, param, "'%s' must be an object {\"mode\", \"draft_max\"}", param);
  const cJSON *m;
  cJSON_ArrayForEach(m, spec) {
    if (m->string && !strcmp(m->string, "mode")) {
      pa_spec_mode mode;
      if (!cJSON_IsString(m) || !pa_spec_mode_from_name(m->valuestring, &mode))
        return BAD(e, param, "'%s.mode' must be \"lookup\", \"draft\", \"mtp\" or \"off\"", param);
      r->spec_mode = 1 + (int)mode;
    } else if (m->string && !strcmp(m->string, "draft_max")) {
      const double d = m->valuedouble;
      if (!cJSON_IsNumber(m) || !isfinite(d) || d != floor(d) || d < 1 || d > PA_SPEC_DRAFT_MAX)
        return BAD(e, param, "'%s.draft_max' must be an integer from 1 to %d", param,
                   PA_SPEC_DRAFT_MAX);
      r->spec_draft_max = (int32_t)d;
    } else {
      return BAD(e, param, "'%s' has an unknown member '%.64s' (known: mode, draft_max)", param,
                 m->string ? m->string : "");
    }
  }
  return true;
}

bool srv_request_think_budget(const srv_model_info *mi, int32_t budget, srv_request *r,
                              srv_error *e) {
  const srv_out_style *st = &mi->style;
  const char *open = st->think_open, *close = st->think_close, *force = close;
  if (st->format == SRV_OUT_GPT_OSS) {
    open = "<|channel|>analysis<|message|>";
    close = "<|end|>";
    force = "<|end|><|start|>assistant<|channel|>final<|message|>";
  }
  if (!close[0]) return true;
  int32_t *ids = NULL;
  size_t n = 0;
  if (pasada_tokenize(mi->tok, force, strlen(force), false, true, &ids, &n) != PASADA_OK || !n ||
      n > sizeof r->think_force / sizeof r->think_force[0]) {
    pasada_text_free(ids);
    return srv_fail(e, 500, "server_error", NULL, NULL,
                    "the model's end-of-reasoning marker %s does not tokenize", force);
  }
  memcpy(r->think_force, ids, n * sizeof *ids);
  r->n_think_force = (int)n;
  pasada_text_free(ids);
  snprintf(r->think_open, sizeof r->think_open, "%s", open);
  snprintf(r->think_close, sizeof r->think_close, "%s", close);
  r->think_limit = true;
  r->think_budget = budget;
  return true;
}
