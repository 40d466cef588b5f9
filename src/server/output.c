/* output.c: splits what a chat model generated into content, reasoning and
 * tool calls (see output.h): the scan over the text that every family shares
 * (reasoning blocks, wrapper tokens, held-back marker prefixes, trimming),
 * the family detection from a chat template, and the listed calls. The
 * families' call syntaxes are in output_formats.c and output_whole.c. */
#define _GNU_SOURCE /* memmem */
#include "server/output.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/output_int.h"

static const char *const format_names[SRV_OUT_COUNT] = {
    [SRV_OUT_PLAIN] = "plain",
    [SRV_OUT_HERMES] = "hermes",
    [SRV_OUT_LLAMA3] = "llama3",
    [SRV_OUT_MISTRAL] = "mistral",
    [SRV_OUT_GPT_OSS] = "gpt-oss",
    [SRV_OUT_DEEPSEEK] = "deepseek",
    [SRV_OUT_QWEN3_CODER] = "qwen3-coder",
    [SRV_OUT_GRANITE] = "granite",
    [SRV_OUT_FUNCTIONARY] = "functionary",
    [SRV_OUT_COMMAND_R] = "command-r",
    [SRV_OUT_GEMMA] = "gemma",
    [SRV_OUT_KIMI] = "kimi",
    [SRV_OUT_GLM] = "glm",
    [SRV_OUT_MINIMAX] = "minimax",
    [SRV_OUT_DEEPSEEK_DSML] = "deepseek-dsml",
    [SRV_OUT_FUNCTIONARY_V32] = "functionary-v3.2",
    [SRV_OUT_FIREFUNCTION] = "firefunction",
    [SRV_OUT_COMMAND_R_PLUS] = "command-r-plus",
    [SRV_OUT_MINIMAX_M1] = "minimax-m1",
    [SRV_OUT_APRIEL] = "apriel",
    [SRV_OUT_NEMOTRON] = "nemotron",
    [SRV_OUT_SOLAR] = "solar",
    [SRV_OUT_LFM2] = "lfm2",
    [SRV_OUT_GIGACHAT] = "gigachat",
    [SRV_OUT_MINICPM] = "minicpm",
    [SRV_OUT_ATEM] = "atem",
};

const char *srv_out_format_name(srv_out_format f) {
  return f >= 0 && f < SRV_OUT_COUNT && format_names[f] ? format_names[f] : "unknown";
}

/* ---- detection ---- */

static bool has(const char *s, const char *m) {
  return strstr(s, m) != NULL;
}

static srv_out_format detect_format(const char *s) {
  if (has(s, "<|channel|>") && has(s, "commentary")) return SRV_OUT_GPT_OSS;
  if (has(s, "<atem:function_calls>")) return SRV_OUT_ATEM;
  if (has(s, "'>>>' + tool_call") || has(s, ">>>all")) return SRV_OUT_FUNCTIONARY_V32;
  if (has(s, "<function=") && has(s, "<parameter=")) return SRV_OUT_QWEN3_CODER;
  if (has(s, "<function=")) return SRV_OUT_FUNCTIONARY;
  if (has(s, "functools[")) return SRV_OUT_FIREFUNCTION;
  if (has(s,
          "\xef\xbd\x9c"
          "DSML"
          "\xef\xbd\x9c"))
    return SRV_OUT_DEEPSEEK_DSML;
  if (has(s,
          "tool\xe2\x96\x81"
          "calls\xe2\x96\x81"
          "begin"))
    return SRV_OUT_DEEPSEEK;
  if (has(s, "<|tool_calls_section_begin|>")) return SRV_OUT_KIMI;
  if (has(s, "<minimax:tool_call>")) return SRV_OUT_MINIMAX;
  if (has(s, "<arg_key>")) return SRV_OUT_GLM;
  if (has(s, "<|START_ACTION|>")) return SRV_OUT_COMMAND_R;
  if (has(s, "Action:") && has(s, "```json") && has(s, "tool_name")) return SRV_OUT_COMMAND_R_PLUS;
  if (has(s, "[TOOL_CALLS]")) return SRV_OUT_MISTRAL;
  if (has(s, "<|tool_call|>")) return SRV_OUT_GRANITE;
  if (has(s, "<|tool_call>")) return SRV_OUT_GEMMA;
  if (has(s, "<TOOLCALL>")) return SRV_OUT_NEMOTRON;
  if (has(s, "<|tool_call:begin|>")) return SRV_OUT_SOLAR;
  if (has(s, "<|tool_call_start|>") || has(s, "<|tool_list_start|>")) return SRV_OUT_LFM2;
  if (has(s, "<function name=") && has(s, "<param name=")) return SRV_OUT_MINICPM;
  if (has(s, "<|function_call|>") || (has(s, "function call") && has(s, "<|role_sep|>")))
    return SRV_OUT_GIGACHAT;
  if (has(s, "<tool_calls>") && has(s, "[BEGIN FINAL RESPONSE]")) return SRV_OUT_APRIEL;
  if (has(s, "<tool_calls>")) return SRV_OUT_MINIMAX_M1;
  if (has(s, "<tool_call>")) return SRV_OUT_HERMES;
  if (has(s, "<|python_tag|>") ||
      (has(s, "<|start_header_id|>") && has(s, "\"parameters\": ") && has(s, "tool_call")))
    return SRV_OUT_LLAMA3;
  return SRV_OUT_PLAIN;
}

static void set_think(srv_out_style *o, const char *open, const char *close) {
  snprintf(o->think_open, sizeof o->think_open, "%s", open);
  snprintf(o->think_close, sizeof o->think_close, "%s", close);
}

void srv_out_style_detect(const char *template_src, const char *arch, srv_out_style *out) {
  memset(out, 0, sizeof *out);
  const char *s = template_src ? template_src : "";
  out->format = detect_format(s);
  /* A template that names no family: the architecture's own syntax. */
  if (out->format == SRV_OUT_PLAIN && arch && !template_src) {
    if (!strcmp(arch, "qwen2") || !strcmp(arch, "qwen3") || !strcmp(arch, "qwen3moe"))
      out->format = SRV_OUT_HERMES;
    else if (!strcmp(arch, "gpt-oss"))
      out->format = SRV_OUT_GPT_OSS;
  }
  if (out->format == SRV_OUT_MISTRAL) out->variant = has(s, "[ARGS]");
  if (out->format == SRV_OUT_DEEPSEEK) out->variant = !has(s, "```json");
  if (out->format == SRV_OUT_DEEPSEEK_DSML) out->variant = !has(s, "function_calls>");
  if (out->format == SRV_OUT_GIGACHAT) out->variant = !has(s, "<|function_call|>");
  switch (out->format) {
    case SRV_OUT_GPT_OSS: /* harmony channels, parsed whole */
    case SRV_OUT_ATEM:
    case SRV_OUT_FUNCTIONARY_V32:
      return;
    case SRV_OUT_APRIEL:
      set_think(out, "", "[BEGIN FINAL RESPONSE]");
      return;
    case SRV_OUT_COMMAND_R:
      set_think(out, "<|START_THINKING|>", "<|END_THINKING|>");
      return;
    case SRV_OUT_GEMMA:
      set_think(out, "<|channel>thought\n", "<channel|>");
      return;
    case SRV_OUT_SOLAR:
      set_think(out, "<|think|>", "<|end|>");
      return;
    default:
      break;
  }
  if (has(s, "[THINK]"))
    set_think(out, "[THINK]", "[/THINK]");
  else if (has(s, "<think>") || has(s, "</think>"))
    set_think(out, "<think>", "</think>");
  else if (!template_src && arch && !strcmp(arch, "qwen3"))
    set_think(out, "<think>", "</think>");
}

/* ---- what a parse collects ---- */

static bool is_ws(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

static void append_trimmed_lead(srv_buf *b, const char *s, size_t n) {
  if (b->n == 0)
    while (n && is_ws(*s)) s++, n--;
  if (n) srv_buf_append(b, s, n);
}

void op_content(op_state *p, const char *s, size_t n) {
  append_trimmed_lead(&p->content, s, n);
}
void op_reasoning(op_state *p, const char *s, size_t n) {
  append_trimmed_lead(&p->reasoning, s, n);
}

static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* call_ + 16 hex digits, a bijection of (seed, index): unique in a response.
 * Mistral's templates take back only 9 alphanumerics, so its family gets those. */
static void make_id(const op_state *p, int index, char *id, size_t cap) {
  uint64_t h = mix64(((uint64_t)p->o->id_seed << 32) | (uint32_t)index);
  if (p->st->format == SRV_OUT_MISTRAL) {
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    for (int k = 0; k < 9; k++, h /= 62) id[k] = al[h % 62];
    id[9] = 0;
    return;
  }
  snprintf(id, cap, "call_%016llx", (unsigned long long)h);
}

static bool push_call(op_state *p, const char *name, size_t n_name, char *args) {
  if (p->n_calls == p->cap_calls) {
    int cap = p->cap_calls ? 2 * p->cap_calls : 4;
    srv_tool_call *c = realloc(p->calls, (size_t)cap * sizeof *c);
    if (!c) goto oom;
    p->calls = c;
    p->cap_calls = cap;
  }
  srv_tool_call *c = &p->calls[p->n_calls];
  memset(c, 0, sizeof *c);
  c->name = malloc(n_name + 1);
  if (!c->name) goto oom;
  memcpy(c->name, name, n_name);
  c->name[n_name] = 0;
  c->arguments = args;
  make_id(p, p->n_calls, c->id, sizeof c->id);
  p->n_calls++;
  return true;
oom:
  free(args);
  p->oom = true;
  return false;
}

/* A function name: non-empty, no control characters or quotes. */
static bool name_ok(const char *s, size_t n) {
  if (n == 0 || n > 256) return false;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x20 || s[i] == '"' || s[i] == '\\') return false;
  return true;
}

static bool pend_push(op_state *p, op_pending *pd, const char *name, size_t n_name, char *args) {
  if (!args) {
    p->oom = true;
    return false;
  }
  char *nm = malloc(n_name + 1);
  if (pd->n == pd->cap) {
    int cap = pd->cap ? 2 * pd->cap : 4;
    struct op_pend_call *v = realloc(pd->v, (size_t)cap * sizeof *v);
    if (v) {
      pd->v = v;
      pd->cap = cap;
    }
  }
  if (!nm || pd->n == pd->cap) {
    free(nm);
    free(args);
    p->oom = true;
    return false;
  }
  memcpy(nm, name, n_name);
  nm[n_name] = 0;
  pd->v[pd->n].name = nm;
  pd->v[pd->n].args = args;
  pd->n++;
  return true;
}

bool op_pend_text(op_state *p, op_pending *pd, const char *name, size_t n_name, const char *args,
                  size_t n_args) {
  if (!name_ok(name, n_name)) return false;
  size_t a = 0;
  while (a < n_args && is_ws(args[a])) a++;
  if (a == n_args || args[a] != '{') return false;
  bool oom = false;
  char *c = op_json_compact(args, n_args, &oom);
  if (!c) {
    if (oom) p->oom = true;
    return false;
  }
  return pend_push(p, pd, name, n_name, c);
}

bool op_pend_obj(op_state *p, op_pending *pd, const char *name, size_t n_name, const cJSON *obj) {
  if (!name_ok(name, n_name) || (obj && !cJSON_IsObject(obj))) return false;
  return pend_push(p, pd, name, n_name, obj ? cJSON_PrintUnformatted(obj) : strdup("{}"));
}

void op_pend_commit(op_state *p, op_pending *pd) {
  for (int i = 0; i < pd->n; i++) {
    char *nm = pd->v[i].name;
    if (!p->oom)
      push_call(p, nm, strlen(nm), pd->v[i].args); /* takes the args */
    else
      free(pd->v[i].args);
    free(nm);
  }
  pd->n = 0;
  op_pend_free(pd);
}

void op_pend_free(op_pending *pd) {
  for (int i = 0; i < pd->n; i++) {
    free(pd->v[i].name);
    free(pd->v[i].args);
  }
  free(pd->v);
  memset(pd, 0, sizeof *pd);
}

/* ---- text helpers ---- */

bool op_at(const op_state *p, size_t i, const char *s, bool *more) {
  size_t k = strlen(s);
  if (more) *more = false;
  if (i + k <= p->n) return memcmp(p->t + i, s, k) == 0;
  if (i <= p->n && memcmp(p->t + i, s, p->n - i) == 0 && more) *more = true;
  return false;
}

int op_at3(const op_state *p, size_t i, const char *s) {
  bool more;
  if (op_at(p, i, s, &more)) return 1;
  return more ? 2 : 0;
}

size_t op_name_end(const op_state *p, size_t i, const char *close) {
  size_t lim = i + 256 + strlen(close) < p->n ? i + 256 + strlen(close) : p->n;
  size_t k = strlen(close);
  for (size_t j = i; j + k <= lim; j++)
    if (memcmp(p->t + j, close, k) == 0) return j;
  return lim == p->n ? p->n : (size_t)-1;
}

/* memchr for the first byte, then a compare: the markers are short, and
 * unlike memmem (whose sanitizer interceptor checks the whole haystack at
 * every call) the cost is where the match is. */
size_t op_find(const op_state *p, size_t i, const char *s) {
  size_t k = strlen(s);
  if (k == 0) return p->n;
  while (i < p->n && p->n - i >= k) {
    const char *f = memchr(p->t + i, s[0], p->n - i - k + 1);
    if (!f) break;
    size_t j = (size_t)(f - p->t);
    if (memcmp(f, s, k) == 0) return j;
    i = j + 1;
  }
  return p->n;
}

size_t op_skip_ws(const op_state *p, size_t i) {
  while (i < p->n && is_ws(p->t[i])) i++;
  return i;
}

size_t op_prefix_tail(const char *t, size_t n, const char *s) {
  size_t k = strlen(s);
  if (k == 0) return 0;
  for (size_t m = k - 1 < n ? k - 1 : n; m > 0; m--)
    if (memcmp(t + n - m, s, m) == 0) return m;
  return 0;
}

/* ---- the shared scan ---- */

#define MAX_MARK 12
enum { MK_THINK, MK_TRIG, MK_DROP };

typedef struct {
  const char *s;
  size_t len;
  int kind;
  const op_trigger *trig;
  bool first_only; /* counts only before any content or call */
  size_t next;     /* cached next occurrence at or after the scan position */
} mark;

/* The earliest marker at or after i (the cache makes the whole scan linear:
 * each marker's search only moves forward). */
static int next_mark(op_state *p, mark *m, int nm, size_t i, size_t *at) {
  int best = -1;
  for (int k = 0; k < nm; k++) {
    if (m[k].first_only) {
      /* only as the first thing of the output */
      bool first = p->content.n == 0 && p->n_calls == 0;
      size_t j = first ? op_skip_ws(p, i) : p->n;
      m[k].next = j < p->n && op_at(p, j, m[k].s, NULL) ? j : p->n;
    } else if (m[k].next < i || m[k].next == (size_t)-1) {
      m[k].next = op_find(p, i, m[k].s);
    }
    if (m[k].next < p->n && (best < 0 || m[k].next < *at)) {
      best = k;
      *at = m[k].next;
    }
  }
  return best;
}

static void run_scan(op_state *p, const op_format *f) {
  const srv_out_style *st = p->st;
  mark m[MAX_MARK];
  int nm = 0;
  if (st->think_open[0])
    m[nm++] = (mark){st->think_open, strlen(st->think_open), MK_THINK, 0, false, 0};
  /* a closing marker before anything else ends a reasoning block the prompt
     opened without saying so */
  if (st->think_close[0] && st->think_open[0])
    m[nm++] = (mark){st->think_close, strlen(st->think_close), MK_DROP, 0, true, 0};
  for (int k = 0; p->o->tools && k < 3 && f->trig[k].open; k++)
    m[nm++] = (mark){f->trig[k].open, strlen(f->trig[k].open), MK_TRIG,
                     &f->trig[k],     f->trig[k].line_start,   0};
  for (int k = 0; k < 6 && f->drop[k]; k++)
    m[nm++] = (mark){f->drop[k], strlen(f->drop[k]), MK_DROP, 0, false, 0};
  for (int k = 0; k < nm; k++) m[k].next = (size_t)-1;

  const char *close = st->think_close;
  /* A family with a closing marker and no opening one reasons first. */
  bool reasoning = close[0] && (p->o->in_reasoning || !st->think_open[0]);
  size_t i = 0;
  while (i < p->n) {
    if (reasoning) {
      size_t j = op_find(p, i, close);
      if (j < p->n) {
        op_reasoning(p, p->t + i, j - i);
        i = j + strlen(close);
        reasoning = false;
        continue;
      }
      size_t keep = p->final ? 0 : op_prefix_tail(p->t + i, p->n - i, close);
      op_reasoning(p, p->t + i, p->n - i - keep);
      return;
    }
    size_t j = p->n;
    int k = next_mark(p, m, nm, i, &j);
    if (k < 0) {
      size_t keep = 0;
      if (!p->final)
        for (int q = 0; q < nm; q++) {
          if (m[q].first_only) {
            /* the whole output so far may be the start of one */
            bool first = p->content.n == 0 && p->n_calls == 0;
            size_t s = first ? op_skip_ws(p, i) : p->n;
            if (s < p->n && op_prefix_tail(p->t + s, p->n - s, m[q].s) == p->n - s &&
                p->n - s > keep)
              keep = p->n - s;
            continue;
          }
          size_t h = op_prefix_tail(p->t + i, p->n - i, m[q].s);
          if (h > keep) keep = h;
        }
      op_content(p, p->t + i, p->n - i - keep);
      return;
    }
    op_content(p, p->t + i, j - i);
    if (m[k].kind == MK_THINK) {
      reasoning = close[0] != 0;
      i = j + m[k].len;
      continue;
    }
    if (m[k].kind == MK_DROP) {
      i = j + m[k].len;
      continue;
    }
    size_t end = j;
    blk_rc rc = m[k].trig->fn(p, j, j + m[k].len, &end);
    if (p->oom) return;
    if (rc == BLK_DONE) {
      i = end > j ? end : j + m[k].len;
    } else if (rc == BLK_NOTCALL) { /* the trigger and what the parser examined are content */
      size_t stop = end > j + m[k].len && end <= p->n ? end : j + m[k].len;
      op_content(p, p->t + j, stop - j);
      i = stop;
    } else {
      if (p->final && end < p->n) op_content(p, p->t + end, p->n - end);
      return;
    }
  }
}

static size_t rtrim(const char *s, size_t n) {
  while (n && is_ws(s[n - 1])) n--;
  return n;
}

static char *take(srv_buf *b, size_t *n) {
  size_t k = b->p ? rtrim(b->p, b->n) : 0;
  char *s = b->p ? b->p : malloc(1);
  if (!s) return NULL;
  s[k] = 0;
  *n = k;
  b->p = NULL;
  return s;
}

bool srv_output_parse(const srv_out_style *st, const char *text, size_t n, const srv_out_opts *o,
                      srv_output *out) {
  memset(out, 0, sizeof *out);
  op_state p = {.st = st, .t = text ? text : "", .n = text ? n : 0, .o = o, .final = o->final};
  const op_format *f = op_format_of(st->format);
  if (f->whole)
    f->whole(&p);
  else
    run_scan(&p, f);
  bool ok = !p.oom && !p.content.failed && !p.reasoning.failed;
  if (ok) {
    out->content = take(&p.content, &out->n_content);
    out->reasoning = take(&p.reasoning, &out->n_reasoning);
    out->calls = p.calls;
    out->n_calls = p.n_calls;
    p.calls = NULL;
    p.n_calls = 0;
    ok = out->content && out->reasoning;
  }
  srv_buf_free(&p.content);
  srv_buf_free(&p.reasoning);
  for (int i = 0; i < p.n_calls; i++) {
    free(p.calls[i].name);
    free(p.calls[i].arguments);
  }
  free(p.calls);
  if (!ok) srv_output_free(out);
  return ok;
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
