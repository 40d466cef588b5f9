/* pasada_eval: runs token-id prompts through the public API and dumps what the
 * parity tests compare (tests/e2e/test_arch_parity.py, test_logit_parity.py):
 * the logits at every position (batched prefill or one token per step), or
 * greedy continuations. Uses only include/pasada.h.
 *
 *   pasada_eval logits       MODEL IDS_FILE OUT_DIR [-t THREADS] [--reference | --backend NAME]
 * [--kv-type f16|f32] pasada_eval logits-steps MODEL IDS_FILE OUT_DIR [-t THREADS] [--reference |
 * --backend NAME] [--kv-type f16|f32] pasada_eval logits-reuse MODEL IDS_FILE OUT_DIR [-t THREADS]
 * [--reference | --backend NAME] [--kv-type f16|f32] pasada_eval greedy       MODEL IDS_FILE N [-t
 * THREADS] [--reference | --backend NAME] [--kv-type f16|f32] pasada_eval mtp          MODEL
 * IDS_FILE OUT_DIR [...]   (also mtp-steps)
 * (--quantize TYPE: a Hugging Face folder's matrices quantized to TYPE at load)
 *
 * IDS_FILE holds one prompt per line as space-separated token ids (blank lines
 * are skipped). The logits modes write OUT_DIR/prompt<i>.f32: n_tokens x n_vocab
 * float32, little-endian, row-major. "logits" decodes each prompt in one batch
 * that wants every token's logits; "logits-steps" feeds it one token per decode
 * call, so the KV-cache path is exercised. "logits-reuse" decodes each prompt
 * in one batch, empties the sequence (its blocks stay in the prefix cache),
 * attaches the cached prefix of the prompt's first half + 1 tokens again
 * (pasada_seq_reuse_prefix) and decodes the rest in one batch: the rows
 * from the reused position on are that batch's, those before it the first
 * pass's; "reused R of N" goes to stderr per prompt. "greedy" decodes the prompt in one
 * batch, then one token per step, and prints one line per prompt with the N
 * argmax tokens (lowest id on ties); it stops only at N. --backend NAME runs
 * the model on that backend (cpu, cpu:TABLE, ref); --reference is --backend
 * ref (weights dequantized to F32, activations not quantized). --kv-type sets
 * the KV cache's values (default: the backend's, F16 on cpu, F32 on ref).
 * "mtp" (a model with a multi-token-prediction layer) decodes each prompt
 * in one batch keeping the final hidden states, then runs the MTP layer
 * over entries 0..n-2 (entry j: the hidden state at j with token j + 1)
 * in one batch, "mtp-steps" one entry per decode call, then one entry more
 * as a second draft step makes it (the last entry's own output hidden
 * state with its argmax token), and writes their logits: n x n_vocab. Errors print
 * pasada_last_error() and exit 1. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/hf.h" /* --quantize: a Hugging Face folder quantized at load */
#include "model/model.h" /* mtp: the multi-token-prediction context */
#include "pasada.h"

typedef struct {
  int32_t *ids;
  int32_t n;
} prompt;

typedef struct {
  prompt *items;
  int n;
} prompt_list;

static void die(const char *what) {
  fprintf(stderr, "pasada_eval: %s: %s\n", what, pasada_last_error());
  exit(1);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "pasada_eval: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n);
  if (!q) fail("out of memory");
  return q;
}

static void usage(void) {
  fprintf(
      stderr,
      "usage: pasada_eval logits|logits-steps|logits-reuse MODEL IDS_FILE OUT_DIR [-t THREADS] [--reference | --backend NAME] [--kv-type T]\n"
      "       pasada_eval greedy MODEL IDS_FILE N [-t THREADS] [--reference | --backend NAME] [--kv-type T]\n");
  exit(1);
}

/* Reads IDS_FILE; every id must lie in [0, n_vocab). */
static prompt_list read_prompts(const char *path, int32_t n_vocab) {
  FILE *f = fopen(path, "r");
  if (!f) fail("%s: %s", path, strerror(errno));
  prompt_list list = {0};
  char *line = NULL;
  size_t cap = 0;
  int line_no = 0;
  while (getline(&line, &cap, f) != -1) {
    line_no++;
    prompt p = {0};
    int32_t p_cap = 0;
    char *s = line;
    for (;;) {
      while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n') s++;
      if (!*s) break;
      char *end;
      errno = 0;
      long v = strtol(s, &end, 10);
      if (end == s || errno || v < 0 || v >= n_vocab || (*end && !strchr(" \t\r\n", *end)))
        fail("%s:%d: bad token id (vocabulary has %d tokens)", path, line_no, (int)n_vocab);
      if (p.n == p_cap) {
        p_cap = p_cap ? 2 * p_cap : 64;
        p.ids = xrealloc(p.ids, (size_t)p_cap * sizeof *p.ids);
      }
      p.ids[p.n++] = (int32_t)v;
      s = end;
    }
    if (p.n == 0) continue;
    list.items = xrealloc(list.items, (size_t)(list.n + 1) * sizeof *list.items);
    list.items[list.n++] = p;
  }
  free(line);
  fclose(f);
  if (list.n == 0) fail("%s holds no prompts", path);
  return list;
}

/* Decodes tokens[0..n) of sequence 0 at positions p0.., wanting the logits of
 * every token (all_logits) or only of the last one. */
static void decode(pasada_context *ctx, const int32_t *tokens, int32_t n, int32_t p0,
                   bool all_logits) {
  int32_t *pos = xrealloc(NULL, (size_t)n * sizeof *pos);
  int32_t *seq = xrealloc(NULL, (size_t)n * sizeof *seq);
  int8_t *want = xrealloc(NULL, (size_t)n);
  for (int32_t i = 0; i < n; i++) {
    pos[i] = p0 + i;
    seq[i] = 0;
    want[i] = all_logits || i == n - 1;
  }
  pasada_batch batch = {
      .n_tokens = n, .token = tokens, .pos = pos, .seq_id = seq, .want_logits = want};
  if (pasada_decode(ctx, &batch) != PASADA_OK) die("decode");
  free(pos);
  free(seq);
  free(want);
}

static const float *logits_of(const pasada_context *ctx, int32_t i) {
  const float *l = pasada_get_logits(ctx, i);
  if (!l) die("no logits for a token that asked for them");
  return l;
}

/* Appends one row of float32 little-endian to f, whatever the host order. */
static void write_row(FILE *f, const float *row, int32_t n, const char *path) {
  static unsigned char buf[1 << 16];
  size_t used = 0;
  for (int32_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &row[i], 4);
    buf[used++] = (unsigned char)u;
    buf[used++] = (unsigned char)(u >> 8);
    buf[used++] = (unsigned char)(u >> 16);
    buf[used++] = (unsigned char)(u >> 24);
    if (used == sizeof buf || i == n - 1) {
      if (fwrite(buf, 1, used, f) != used) fail("cannot write %s", path);
      used = 0;
    }
  }
}

static int32_t argmax(const float *l, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; i++)
    if (l[i] > l[best]) best = i;
  return best;
}

/* OUT_DIR/prompt<k>.f32, created (its name into path). */
static FILE *open_out(const char *out_dir, int k, char *path, size_t cap) {
  if (snprintf(path, cap, "%s/prompt%d.f32", out_dir, k) >= (int)cap)
    fail("output path too long: %s", out_dir);
  FILE *f = fopen(path, "wb");
  if (!f) fail("cannot create %s", path);
  return f;
}

static void run_logits(pasada_context *ctx, const prompt_list *prompts, const char *out_dir,
                       int32_t n_vocab, bool steps, bool reuse) {
  for (int k = 0; k < prompts->n; k++) {
    const prompt *p = &prompts->items[k];
    char path[4096];
    FILE *f = open_out(out_dir, k, path, sizeof path);
    pasada_seq_truncate(ctx, 0, 0);
    if (steps) {
      for (int32_t i = 0; i < p->n; i++) {
        decode(ctx, &p->ids[i], 1, i, true);
        write_row(f, logits_of(ctx, 0), n_vocab, path);
      }
    } else if (reuse) {
      decode(ctx, p->ids, p->n, 0, true);
      const int32_t half = p->n / 2 + 1 < p->n ? p->n / 2 + 1 : p->n;
      float *first = xrealloc(NULL, (size_t)half * (size_t)n_vocab * sizeof *first);
      for (int32_t i = 0; i < half; i++) memcpy(first + (size_t)i * n_vocab, logits_of(ctx, i), (size_t)n_vocab * 4);
      pasada_seq_truncate(ctx, 0, 0);
      const int32_t r = pasada_seq_reuse_prefix(ctx, 0, p->ids, half);
      fprintf(stderr, "reused %d of %d\n", (int)r, (int)p->n);
      for (int32_t i = 0; i < r; i++) write_row(f, first + (size_t)i * n_vocab, n_vocab, path);
      free(first);
      decode(ctx, p->ids + r, p->n - r, r, true);
      for (int32_t i = 0; i < p->n - r; i++) write_row(f, logits_of(ctx, i), n_vocab, path);
    } else {
      decode(ctx, p->ids, p->n, 0, true);
      for (int32_t i = 0; i < p->n; i++) write_row(f, logits_of(ctx, i), n_vocab, path);
    }
    if (fclose(f) != 0) fail("cannot write %s", path);
  }
}

static void run_mtp(pasada_context *ctx, const prompt_list *prompts, const char *out_dir,
                    int32_t n_vocab, bool steps) {
  pasada_context_params cp = pasada_context_default_params();
  cp.n_ctx = pasada_context_n_ctx(ctx);
  cp.n_batch = cp.n_ctx;
  pasada_kv_stats kv;
  pasada_kv_get_stats(ctx, &kv);
  cp.kv_type = kv.type; /* the target's cache type (--kv-type) */
  pasada_context *mtp;
  if (pa_context_create_mtp(ctx->model, &cp, &mtp) != PASADA_OK ||
      pa_context_keep_hidden(ctx) != PASADA_OK)
    die("mtp context");
  const int32_t E = pasada_model_n_embd(ctx->model);
  for (int k = 0; k < prompts->n; k++) {
    const prompt *p = &prompts->items[k];
    char path[4096];
    FILE *f = open_out(out_dir, k, path, sizeof path);
    pasada_seq_truncate(ctx, 0, 0);
    pasada_seq_truncate(mtp, 0, 0);
    decode(ctx, p->ids, p->n, 0, false);
    int32_t pos0, nh;
    const float *h = pa_context_hidden_rows(ctx, 0, &pos0, &nh);
    if (pos0 != 0 || nh != p->n)
      fail("the context kept rows [%d, %d) of %d", pos0, pos0 + nh, p->n);
    for (int32_t j = 0; j < p->n - 1; j += steps ? 1 : p->n - 1) {
      const int32_t m = steps ? 1 : p->n - 1;
      pa_context_set_mtp_input(mtp, h + (size_t)j * (size_t)E);
      decode(mtp, p->ids + 1 + j, m, j, true);
      for (int32_t i = 0; i < m; i++) write_row(f, logits_of(mtp, i), n_vocab, path);
    }
    /* a second draft step: the last entry's own hidden state with its argmax */
    const int32_t next = argmax(logits_of(mtp, -1), n_vocab);
    float *g = xrealloc(NULL, (size_t)E * sizeof *g);
    memcpy(g, pa_context_mtp_hidden(mtp, -1), (size_t)E * sizeof *g);
    pa_context_set_mtp_input(mtp, g);
    decode(mtp, &next, 1, p->n - 1, true);
    write_row(f, logits_of(mtp, 0), n_vocab, path);
    free(g);
    if (fclose(f) != 0) fail("cannot write %s", path);
  }
  pasada_context_free(mtp);
}

static void run_greedy(pasada_context *ctx, const prompt_list *prompts, int32_t n_gen,
                       int32_t n_vocab) {
  for (int k = 0; k < prompts->n; k++) {
    const prompt *p = &prompts->items[k];
    pasada_seq_truncate(ctx, 0, 0);
    decode(ctx, p->ids, p->n, 0, false);
    int32_t tok = argmax(logits_of(ctx, p->n - 1), n_vocab);
    for (int32_t s = 0; s < n_gen; s++) {
      printf(s ? " %d" : "%d", (int)tok);
      if (s == n_gen - 1) break;
      decode(ctx, &tok, 1, p->n + s, false);
      tok = argmax(logits_of(ctx, 0), n_vocab);
    }
    printf("\n");
    fflush(stdout);
  }
}

int main(int argc, char **argv) {
  if (argc < 5) usage();
  const char *mode = argv[1], *model_path = argv[2], *ids_path = argv[3], *target = argv[4];
  bool greedy = strcmp(mode, "greedy") == 0;
  bool steps = strcmp(mode, "logits-steps") == 0, reuse = strcmp(mode, "logits-reuse") == 0;
  const bool mtp = strncmp(mode, "mtp", 3) == 0, mtp_steps = strcmp(mode, "mtp-steps") == 0;
  if (!greedy && !steps && !reuse && !mtp_steps && strcmp(mode, "mtp") != 0 &&
      strcmp(mode, "logits") != 0)
    usage();
  int32_t n_threads = 0;
  const char *backend = NULL;
  pasada_kv_type kv_type = PASADA_KV_DEFAULT;
  for (int i = 5; i < argc; i++) {
    if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) {
      n_threads = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--kv-type") == 0 && i + 1 < argc) {
      if (pasada_kv_type_from_name(argv[++i], &kv_type) != PASADA_OK) {
        fprintf(stderr, "pasada_eval: --kv-type wants f16, f32 or q8\n");
        return 2;
      }
    } else if (strcmp(argv[i], "--quantize") == 0 && i + 1 < argc) {
      if (hf_set_load_type(argv[++i]) != PASADA_OK) fail("--quantize: %s", pasada_last_error());
    } else if (strcmp(argv[i], "--reference") == 0) {
      backend = "ref"; /* F32-dequantized weights, unquantized activations */
    } else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
      backend = argv[++i];
    } else {
      usage();
    }
  }
  int32_t n_gen = 0;
  if (greedy) {
    char *end;
    long v = strtol(target, &end, 10);
    if (*end || v < 1 || v > 1 << 20) fail("N must be a positive count, not '%s'", target);
    n_gen = (int32_t)v;
  }

  pasada_model_params mp = pasada_model_default_params();
  mp.backend = backend;
  pasada_model *model;
  if (pasada_model_load(model_path, &mp, &model) != PASADA_OK) die("load");
  int32_t n_vocab = pasada_model_n_vocab(model);
  prompt_list prompts = read_prompts(ids_path, n_vocab);

  int32_t longest = 0;
  for (int k = 0; k < prompts.n; k++)
    if (prompts.items[k].n > longest) longest = prompts.items[k].n;
  pasada_context_params cp = pasada_context_default_params();
  cp.n_ctx = longest + n_gen;
  cp.n_seq_max = 1;
  if (cp.n_batch < longest) cp.n_batch = longest;
  cp.n_threads = n_threads;
  cp.kv_type = kv_type;
  pasada_context *ctx;
  if (pasada_context_create(model, &cp, &ctx) != PASADA_OK) die("context");

  if (greedy) {
    run_greedy(ctx, &prompts, n_gen, n_vocab);
  } else if (mtp) {
    run_mtp(ctx, &prompts, target, n_vocab, mtp_steps);
  } else {
    run_logits(ctx, &prompts, target, n_vocab, steps, reuse);
  }

  pasada_context_free(ctx);
  pasada_model_free(model);
  for (int k = 0; k < prompts.n; k++) free(prompts.items[k].ids);
  free(prompts.items);
  return 0;
}
