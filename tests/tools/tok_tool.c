/* tok_tool: drives the tokenizer of a GGUF file for the end-to-end tests.
 *
 *   tok_tool MODEL.gguf info        one JSON line: model, pre, n_vocab, specials, chat format
 *   tok_tool MODEL.gguf serve [--pre NAME]
 *                                   requests on stdin, one per line, one answer line each
 *                                   (--pre: as if tokenizer.ggml.pre were NAME):
 *     enc  "TEXT"      ids, no BOS/EOS, special-token text stays text   -> [1, 2]
 *     encs "TEXT"      ids, no BOS/EOS, special-token text -> specials  -> [1, 2]
 *     enca "TEXT"      ids with BOS/EOS as the model says, specials on  -> [1, 2]
 *     dec  1 2 3       detokenized, control tokens dropped              -> "text"
 *     decs 1 2 3       detokenized, control tokens rendered             -> "text"
 *     stream 1 2 3     the streaming detokenizer's chunks, last = flush -> ["a", "b", ""]
 *     chat G "ROLE" "CONTENT" ...   the file's chat format (G: 1 = add the generation
 *                      prompt) -> {"text": "...", "ids": [...]} (ids: text tokenized
 *                      with add_special and parse_special, as a prompt is)
 *     time N "TEXT"    tokenizes TEXT N times -> {"tokens": n, "seconds": s}
 *     pre "TEXT"       the pre-tokenizer's pieces (BPE vocabularies)   -> ["a", " b"]
 * TEXT is a JSON string literal (\uXXXX escapes and surrogate pairs allowed).
 * Errors answer {"error": "..."} and the tool goes on with the next line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "format/gguf.h"
#include "format/hf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"

/* ---- a minimal JSON string reader and writer ---- */

static int hex4(const char *p, unsigned *v) {
  *v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return -1;
    *v = *v * 16 + (unsigned)d;
  }
  return 0;
}

static size_t put_utf8(unsigned cp, char *o) {
  if (cp < 0x80) return o[0] = (char)cp, 1;
  if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 63)), 2;
  if (cp < 0x10000)
    return o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 63)),
           o[2] = (char)(0x80 | (cp & 63)), 3;
  o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 63));
  o[2] = (char)(0x80 | ((cp >> 6) & 63)), o[3] = (char)(0x80 | (cp & 63));
  return 4;
}

/* Parses the JSON string starting at *p (after spaces) into a malloc'd
 * buffer; advances *p past it. NULL on a malformed string. */
static char *read_json_string(const char **p, size_t *len) {
  const char *s = *p;
  while (*s == ' ') s++;
  if (*s != '"') return NULL;
  s++;
  char *out = malloc(strlen(s) + 1), *o = out;
  if (!out) return NULL;
  while (*s && *s != '"') {
    if (*s != '\\') {
      *o++ = *s++;
      continue;
    }
    s++;
    unsigned cp, lo;
    switch (*s) {
      case 'n':
        *o++ = '\n', s++;
        break;
      case 't':
        *o++ = '\t', s++;
        break;
      case 'r':
        *o++ = '\r', s++;
        break;
      case 'b':
        *o++ = '\b', s++;
        break;
      case 'f':
        *o++ = '\f', s++;
        break;
      case '/':
        *o++ = '/', s++;
        break;
      case '\\':
        *o++ = '\\', s++;
        break;
      case '"':
        *o++ = '"', s++;
        break;
      case 'u':
        if (hex4(s + 1, &cp)) goto bad;
        s += 5;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (s[0] != '\\' || s[1] != 'u' || hex4(s + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
            goto bad;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          s += 6;
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          goto bad;
        }
        o += put_utf8(cp, o);
        break;
      default:
        goto bad;
    }
  }
  if (*s != '"') goto bad;
  *p = s + 1;
  *len = (size_t)(o - out);
  *o = '\0';
  return out;
bad:
  free(out);
  return NULL;
}

static void write_json_string(const char *s, size_t n) {
  putchar('"');
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c == '\n')
      fputs("\\n", stdout);
    else if (c < 0x20 || c == 0x7F)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

static void write_ids(const int32_t *ids, size_t n) {
  putchar('[');
  for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", (int)ids[i]);
  putchar(']');
}

static void write_error(const char *msg) {
  fputs("{\"error\": ", stdout);
  write_json_string(msg, strlen(msg));
  puts("}");
}

static size_t read_ids(const char *p, int32_t **ids) {
  size_t n = 0, cap = 16;
  *ids = malloc(cap * sizeof(int32_t));
  for (;;) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p) break;
    if (n == cap) *ids = realloc(*ids, (cap *= 2) * sizeof(int32_t));
    (*ids)[n++] = (int32_t)v;
    p = end;
  }
  return n;
}

/* ---- requests ---- */

static void do_encode(const pa_tokenizer *t, const char *arg, bool add_special,
                      bool parse_special) {
  size_t len;
  char *text = read_json_string(&arg, &len);
  if (!text) return write_error("malformed JSON string");
  int32_t *ids;
  size_t n;
  if (pa_tokenize(t, text, len, add_special, parse_special, &ids, &n)) {
    write_error(pa_last_error());
  } else {
    write_ids(ids, n);
    putchar('\n');
    free(ids);
  }
  free(text);
}

typedef struct {
  const char *base;
  size_t (*at)[2]; /* each piece's offset and length */
  size_t n, cap;
} pieces;

static int add_piece(void *ctx, const char *s, size_t len) {
  pieces *p = ctx;
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 64;
    void *grown = realloc(p->at, cap * sizeof *p->at);
    if (!grown) return pa_error(PASADA_ERR_NOMEM, "out of memory");
    p->at = grown, p->cap = cap;
  }
  p->at[p->n][0] = (size_t)(s - p->base), p->at[p->n][1] = len;
  p->n++;
  return 0;
}

/* The pre-tokenizer's pieces of a text, as a JSON array of strings. */
static void do_pretok(const pa_tokenizer *t, const char *arg) {
  size_t len;
  char *text = read_json_string(&arg, &len);
  if (!text) return write_error("malformed JSON string");
  pieces p = {.base = text};
  if (!t->pretok) {
    write_error("this vocabulary has no pre-tokenizer");
  } else if (pa_pretok_split(t->pretok, text, len, add_piece, &p)) {
    write_error(pa_last_error());
  } else {
    putchar('[');
    for (size_t i = 0; i < p.n; i++) {
      if (i) putchar(',');
      write_json_string(text + p.at[i][0], p.at[i][1]);
    }
    printf("]\n");
  }
  free(p.at);
  free(text);
}

static void do_decode(const pa_tokenizer *t, const char *arg, bool render_special) {
  int32_t *ids;
  size_t n = read_ids(arg, &ids);
  size_t len;
  char *s = pa_detokenize_len(t, ids, n, render_special, &len);
  if (!s)
    write_error("detokenize failed");
  else
    write_json_string(s, len), putchar('\n');
  free(s);
  free(ids);
}

static void do_stream(const pa_tokenizer *t, const char *arg) {
  int32_t *ids;
  size_t n = read_ids(arg, &ids);
  size_t cap = pa_detok_max_output(t);
  char *buf = malloc(cap);
  pa_detok d;
  pa_detok_init(&d, t, false);
  putchar('[');
  for (size_t i = 0; i <= n; i++) {
    size_t k = i < n ? pa_detok_push(&d, ids[i], buf, cap) : pa_detok_flush(&d, buf, cap);
    if (i) fputs(", ", stdout);
    write_json_string(buf, k);
  }
  puts("]");
  free(buf);
  free(ids);
}

static void do_chat(const pa_tokenizer *t, const pa_chat_format *fmt, const char *arg) {
  char *end;
  long gen = strtol(arg, &end, 10);
  arg = end;
  pa_chat_message msgs[64];
  char *owned[128];
  size_t n = 0, n_owned = 0, len;
  for (;;) {
    char *role = read_json_string(&arg, &len);
    if (!role) break;
    owned[n_owned++] = role;
    char *content = read_json_string(&arg, &len);
    if (!content || n == 64) break;
    owned[n_owned++] = content;
    msgs[n++] = (pa_chat_message){role, content};
  }
  char *text = pa_chat_render_format(fmt, msgs, n, gen != 0);
  if (!text) {
    write_error(pa_last_error());
  } else {
    int32_t *ids;
    size_t n_ids;
    if (pa_tokenize(t, text, strlen(text), true, true, &ids, &n_ids)) {
      write_error(pa_last_error());
    } else {
      fputs("{\"text\": ", stdout);
      write_json_string(text, strlen(text));
      fputs(", \"ids\": ", stdout);
      write_ids(ids, n_ids);
      puts("}");
      free(ids);
    }
  }
  free(text);
  for (size_t i = 0; i < n_owned; i++) free(owned[i]);
}

static void do_time(const pa_tokenizer *t, const char *arg) {
  char *end;
  long reps = strtol(arg, &end, 10);
  arg = end;
  size_t len;
  char *text = read_json_string(&arg, &len);
  if (!text || reps < 1) return free(text), write_error("usage: time N \"TEXT\"");
  size_t n = 0;
  double t0 = pa_time_s();
  for (long r = 0; r < reps; r++) {
    int32_t *ids;
    if (pa_tokenize(t, text, len, false, false, &ids, &n)) {
      free(text);
      return write_error(pa_last_error());
    }
    free(ids);
  }
  printf("{\"tokens\": %zu, \"seconds\": %.6f}\n", n, (pa_time_s() - t0) / (double)reps);
  free(text);
}

static void do_info(const pa_tokenizer *t, const gguf_file *f) {
  pa_chat_format fmt;
  int chat_rc = pa_chat_detect_format(f, NULL, NULL, &fmt);
  printf("{\"model\": \"%s\", \"pre\": ", pa_tokenizer_model_name(t));
  write_json_string(pa_tokenizer_pre_name(t), strlen(pa_tokenizer_pre_name(t)));
  printf(", \"n_vocab\": %d, \"bos\": %d, \"eos\": %d, \"add_bos\": %s, \"add_eos\": %s",
         (int)pa_tokenizer_n_vocab(t), (int)pa_tokenizer_bos(t), (int)pa_tokenizer_eos(t),
         pa_tokenizer_add_bos(t) ? "true" : "false", pa_tokenizer_add_eos(t) ? "true" : "false");
  fputs(", \"eog\": [", stdout);
  for (int32_t id = 0, k = 0; id < pa_tokenizer_n_vocab(t); id++)
    if (pa_tokenizer_is_eog(t, id)) printf(k++ ? ", %d" : "%d", (int)id);
  printf("], \"chat\": \"%s\", \"default_system\": ", chat_rc ? "none" : pa_chat_name(fmt.kind));
  write_json_string(chat_rc ? "" : fmt.default_system, chat_rc ? 0 : strlen(fmt.default_system));
  printf(", \"max_output\": %zu}\n", pa_detok_max_output(t));
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: tok_tool MODEL.gguf|DIR info|serve [--pre NAME]\n");
    return 2;
  }
  gguf_file *f;
  pa_tokenizer *t;
  if (hf_is_dir(argv[1]) ? hf_open(argv[1], &f) : gguf_open(argv[1], &f)) { /* -m DIR too */
    fprintf(stderr, "tok_tool: %s\n", pa_last_error());
    return 1;
  }
  /* --pre NAME: read the vocabulary as if tokenizer.ggml.pre said NAME, to run
   * the pre-tokenizers of other families on a real vocabulary. */
  if (argc >= 5 && strcmp(argv[3], "--pre") == 0) {
    for (uint64_t i = 0; i < f->n_kv; i++)
      if (strcmp(f->kv[i].key, "tokenizer.ggml.pre") == 0 &&
          f->kv[i].value.type == GGUF_TYPE_STRING)
        f->kv[i].value.str = (gguf_str){argv[4], strlen(argv[4])};
  }
  if (pa_tokenizer_load(f, &t)) {
    fprintf(stderr, "tok_tool: %s\n", pa_last_error());
    gguf_close(f);
    return 1;
  }
  int rc = 0;
  if (strcmp(argv[2], "info") == 0) {
    do_info(t, f);
  } else if (strcmp(argv[2], "serve") == 0) {
    pa_chat_format fmt;
    if (pa_chat_detect_format(f, NULL, NULL, &fmt)) fmt = pa_chat_format_plain(PA_CHAT_NONE);
    size_t cap = 0;
    char *line = NULL;
    ssize_t got;
    while ((got = getline(&line, &cap, stdin)) > 0) {
      if (line[got - 1] == '\n') line[--got] = '\0';
      char *arg = strchr(line, ' ');
      if (arg)
        *arg++ = '\0';
      else
        arg = line + got;
      if (strcmp(line, "enc") == 0)
        do_encode(t, arg, false, false);
      else if (strcmp(line, "encs") == 0)
        do_encode(t, arg, false, true);
      else if (strcmp(line, "enca") == 0)
        do_encode(t, arg, true, true);
      else if (strcmp(line, "dec") == 0)
        do_decode(t, arg, false);
      else if (strcmp(line, "decs") == 0)
        do_decode(t, arg, true);
      else if (strcmp(line, "stream") == 0)
        do_stream(t, arg);
      else if (strcmp(line, "chat") == 0)
        do_chat(t, &fmt, arg);
      else if (strcmp(line, "time") == 0)
        do_time(t, arg);
      else if (strcmp(line, "pre") == 0)
        do_pretok(t, arg);
      else
        write_error("unknown request");
      fflush(stdout);
    }
    free(line);
  } else {
    fprintf(stderr, "tok_tool: unknown mode '%s'\n", argv[2]);
    rc = 2;
  }
  pa_tokenizer_free(t);
  gguf_close(f);
  return rc;
}
