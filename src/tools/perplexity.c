/* perplexity.c: `pasada perplexity`: the evaluation windows (shared with
 * kld.c) and the perplexity over them, with its standard error, the running
 * value on stderr, and the reports. See perplexity.h for the method. */
#include "tools/perplexity.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "format/hf.h"

/* ---- evaluation windows ---- */

int pa_eval_model_open(const char *path, const pa_eval_params *p, pa_eval_model *out) {
  memset(out, 0, sizeof *out);
  pasada_model_params mp = pasada_model_default_params();
  mp.backend = p->backend;
  int rc = hf_set_load_type(p->quantize);
  if (!rc) rc = pasada_model_load(path, &mp, &out->model);
  hf_set_load_type(NULL);
  if (rc) return rc;
  pasada_context_params cp = pasada_context_default_params();
  cp.n_ctx = p->n_ctx;
  cp.n_seq_max = 1;
  cp.n_batch = p->n_batch > 0 && p->n_batch < p->n_ctx ? p->n_batch : p->n_ctx;
  cp.n_threads = p->n_threads;
  cp.kv_type = p->kv_type;
  if ((rc = pasada_context_create(out->model, &cp, &out->ctx))) {
    pasada_model_free(out->model);
    out->model = NULL;
    return rc;
  }
  out->tok = pasada_model_tokenizer(out->model);
  out->n_vocab = pasada_model_n_vocab(out->model);
  out->add_bos = pasada_tokenizer_add_bos(out->tok);
  out->bos = pasada_tokenizer_bos(out->tok);
  if (out->add_bos && out->bos < 0) {
    pa_eval_model_close(out);
    return pa_error(PASADA_ERR_FORMAT, "%s: the model asks for BOS but has no BOS token", path);
  }
  return PASADA_OK;
}

void pa_eval_model_close(pa_eval_model *m) {
  pasada_context_free(m->ctx);
  pasada_model_free(m->model);
  memset(m, 0, sizeof *m);
}

int pa_eval_tokenize(const pa_eval_model *m, const char *text, size_t len, int32_t **tokens,
                     size_t *n_tokens) {
  /* add_special: BOS as the model's flag says; EOS is never wanted here, and
   * a model whose flag asks for one gets it dropped (llama.cpp refuses them) */
  int rc = pasada_tokenize(m->tok, text, len, true, false, tokens, n_tokens);
  if (rc) return rc;
  int32_t eos = pasada_tokenizer_eos(m->tok);
  if (pasada_tokenizer_add_eos(m->tok) && *n_tokens > 0 && (*tokens)[*n_tokens - 1] == eos)
    (*n_tokens)--;
  return PASADA_OK;
}

int pa_eval_n_windows(size_t n_tokens, const pa_eval_params *p, int32_t *n_windows) {
  if (n_tokens < 2 * (size_t)p->n_ctx)
    return pa_error(PASADA_ERR_ARG,
                    "the text has %zu tokens; a context of %d needs at least %zu (2 windows)",
                    n_tokens, p->n_ctx, 2 * (size_t)p->n_ctx);
  size_t n = n_tokens / (size_t)p->n_ctx;
  if (p->n_chunks > 0 && (size_t)p->n_chunks < n) n = (size_t)p->n_chunks;
  *n_windows = n > INT32_MAX ? INT32_MAX : (int32_t)n;
  return PASADA_OK;
}

int pa_eval_window(pa_eval_model *m, const pa_eval_params *p, const int32_t *window,
                   pa_eval_row_fn fn, void *user) {
  int32_t n_ctx = p->n_ctx, first = pa_eval_first(n_ctx), last = n_ctx - 2;
  int32_t n_batch = p->n_batch > 0 && p->n_batch < n_ctx ? p->n_batch : n_ctx;
  int32_t *tok = malloc((size_t)n_batch * sizeof *tok),
          *pos = malloc((size_t)n_batch * sizeof *pos);
  int32_t *seq = calloc((size_t)n_batch, sizeof *seq);
  int8_t *want = malloc((size_t)n_batch);
  int rc = PASADA_OK;
  if (!tok || !pos || !seq || !want) {
    rc = pa_error(PASADA_ERR_NOMEM, "out of memory for a batch of %d tokens", n_batch);
    goto done;
  }
  pasada_seq_truncate(m->ctx, 0, 0);
  for (int32_t start = 0; start < n_ctx && !rc; start += n_batch) {
    int32_t n = n_ctx - start < n_batch ? n_ctx - start : n_batch;
    for (int32_t i = 0; i < n; i++) {
      int32_t p_i = start + i;
      /* llama.cpp's tool puts BOS in place of each window's first token */
      tok[i] = (p_i == 0 && m->add_bos) ? m->bos : window[p_i];
      pos[i] = p_i;
      want[i] = p_i >= first && p_i <= last;
    }
    pasada_batch b = {.n_tokens = n, .token = tok, .pos = pos, .seq_id = seq, .want_logits = want};
    double t0 = pa_time_s();
    rc = pasada_decode(m->ctx, &b);
    m->decode_seconds += pa_time_s() - t0;
    m->decode_tokens += n;
    for (int32_t i = 0; i < n && !rc; i++) {
      if (!want[i]) continue;
      const float *logits = pasada_get_logits(m->ctx, i);
      if (!logits) {
        rc = pa_error(PASADA_ERR_ARG, "no logits for position %d", start + i);
        break;
      }
      rc = fn(user, start + i - first, logits, window[start + i + 1]);
    }
  }
  pasada_seq_truncate(m->ctx, 0, 0);
done:
  free(tok);
  free(pos);
  free(seq);
  free(want);
  return rc;
}

int32_t pa_log_softmax(const float *logits, int32_t n, float *out, double *lse) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; i++)
    if (logits[i] > logits[best]) best = i;
  double mx = logits[best], sum = 0;
  for (int32_t i = 0; i < n; i++) sum += exp((double)logits[i] - mx);
  *lse = mx + log(sum);
  if (out)
    for (int32_t i = 0; i < n; i++) out[i] = (float)((double)logits[i] - *lse);
  return best;
}

void pa_mean_se(double sum, double sum2, int64_t n, double *mean, double *se) {
  *mean = n > 0 ? sum / (double)n : 0;
  double var = n > 0 ? sum2 / (double)n - *mean * *mean : 0;
  *se = (n > 1 && var > 0) ? sqrt(var / (double)(n - 1)) : 0;
}

/* ---- perplexity ---- */

typedef struct {
  int32_t n_vocab;
  double sum, sum2, window_sum;
  int64_t n;
} ppl_acc;

static int ppl_row(void *user, int32_t k, const float *logits, int32_t next) {
  ppl_acc *a = user;
  (void)k;
  double lse;
  pa_log_softmax(logits, a->n_vocab, NULL, &lse);
  double nll = lse - (double)logits[next];
  a->sum += nll;
  a->sum2 += nll * nll;
  a->window_sum += nll;
  a->n++;
  return PASADA_OK;
}

static void base_name(const char *path, char *out, size_t n) {
  const char *s = strrchr(path, '/');
  snprintf(out, n, "%s", s ? s + 1 : path);
}

int pa_eval_read_text(const char *path, char **out, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return pa_error(PASADA_ERR_IO, "%s: %s", path, strerror(errno));
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    if (cap - n < 4096) {
      char *b = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
      if (!b) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = b;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
  }
  int err = ferror(f);
  fclose(f);
  if (!buf) return pa_error(PASADA_ERR_NOMEM, "%s: out of memory reading it", path);
  if (err) {
    free(buf);
    return pa_error(PASADA_ERR_IO, "%s: read error", path);
  }
  buf[n] = 0;
  *out = buf;
  *len = n;
  return PASADA_OK;
}

int pa_ppl_run(const pa_ppl_params *p, pa_ppl_result *r) {
  memset(r, 0, sizeof *r);
  base_name(p->model_path, r->model_name, sizeof r->model_name);
  base_name(p->text_path, r->text_name, sizeof r->text_name);
  char *text = NULL;
  size_t len = 0;
  int rc = pa_eval_read_text(p->text_path, &text, &len);
  if (rc) return rc;
  pa_eval_model m;
  if ((rc = pa_eval_model_open(p->model_path, &p->eval, &m))) {
    free(text);
    return rc;
  }
  int32_t *tokens = NULL;
  size_t n_tokens = 0;
  int32_t n_windows = 0;
  rc = pa_eval_tokenize(&m, text, len, &tokens, &n_tokens);
  free(text);
  if (!rc) rc = pa_eval_n_windows(n_tokens, &p->eval, &n_windows);
  if (!rc && !(r->window_nll = calloc((size_t)n_windows, sizeof(double))))
    rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
  r->n_text_tokens = n_tokens;
  r->n_windows = n_windows;
  r->n_ctx = p->eval.n_ctx;
  r->n_batch =
      p->eval.n_batch > 0 && p->eval.n_batch < p->eval.n_ctx ? p->eval.n_batch : p->eval.n_ctx;
  r->n_threads = p->eval.n_threads;
  if (!rc) {
    pasada_kv_stats kvs;
    pasada_kv_get_stats(m.ctx, &kvs);
    r->kv_type = pasada_kv_type_name(kvs.type);
  }
  if (r->n_threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    r->n_threads = n > 0 ? (int32_t)n : 1;
  }
  ppl_acc acc = {.n_vocab = m.n_vocab};
  bool tty = isatty(2);
  double t0 = pa_time_s();
  if (!rc && p->progress)
    fprintf(stderr, "perplexity: %zu tokens, %d windows of %d (%d scored each)\n", n_tokens,
            n_windows, p->eval.n_ctx, pa_eval_n_scored(p->eval.n_ctx));
  for (int32_t w = 0; w < n_windows && !rc; w++) {
    acc.window_sum = 0;
    rc = pa_eval_window(&m, &p->eval, tokens + (size_t)w * (size_t)p->eval.n_ctx, ppl_row, &acc);
    if (rc) break;
    r->window_nll[w] = acc.window_sum;
    if (p->progress) {
      double mean, se, el = pa_time_s() - t0;
      pa_mean_se(acc.sum, acc.sum2, acc.n, &mean, &se);
      double eta = el / (w + 1) * (n_windows - w - 1);
      fprintf(stderr, "%s[%d/%d] ppl %.4f +/- %.4f  %.0f tok/s  %.0f s left%s", tty ? "\r" : "",
              w + 1, n_windows, exp(mean), exp(mean) * se,
              (double)m.decode_tokens / m.decode_seconds, eta, tty ? "   " : "\n");
      if (tty && w + 1 == n_windows) fputc('\n', stderr);
    }
  }
  r->seconds = pa_time_s() - t0;
  r->n_scored = acc.n;
  pa_mean_se(acc.sum, acc.sum2, acc.n, &r->nll_mean, &r->nll_se);
  r->ppl = exp(r->nll_mean);
  r->ppl_se = r->ppl * r->nll_se;
  r->tokens_per_s = m.decode_seconds > 0 ? (double)m.decode_tokens / m.decode_seconds : 0;
  free(tokens);
  pa_eval_model_close(&m);
  if (rc) pa_ppl_result_free(r);
  return rc;
}

void pa_ppl_result_free(pa_ppl_result *r) {
  free(r->window_nll);
  r->window_nll = NULL;
}

void pa_ppl_print_table(FILE *out, const pa_ppl_result *r) {
  fprintf(out, "model       %s\n", r->model_name);
  fprintf(out, "text        %s: %zu tokens\n", r->text_name, r->n_text_tokens);
  fprintf(out, "windows     %d of %d tokens, the last %d of each scored: %lld tokens\n",
          r->n_windows, r->n_ctx, pa_eval_n_scored(r->n_ctx), (long long)r->n_scored);
  fprintf(out, "perplexity  %.4f +/- %.4f\n", r->ppl, r->ppl_se);
  fprintf(out, "nll         %.6f +/- %.6f nats per token\n", r->nll_mean, r->nll_se);
  fprintf(out, "time        %.1f s, %.1f tok/s (%d threads, batch %d, KV %s)\n", r->seconds,
          r->tokens_per_s, r->n_threads, r->n_batch, r->kv_type ? r->kv_type : "?");
}

int pa_ppl_print_json(FILE *out, const pa_ppl_result *r) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return -1;
  cJSON_AddStringToObject(root, "model", r->model_name);
  cJSON_AddStringToObject(root, "text", r->text_name);
  cJSON_AddNumberToObject(root, "n_text_tokens", (double)r->n_text_tokens);
  cJSON_AddNumberToObject(root, "n_ctx", r->n_ctx);
  cJSON_AddNumberToObject(root, "n_batch", r->n_batch);
  cJSON_AddNumberToObject(root, "n_threads", r->n_threads);
  cJSON_AddStringToObject(root, "kv_type", r->kv_type ? r->kv_type : "?");
  cJSON_AddNumberToObject(root, "n_windows", r->n_windows);
  cJSON_AddNumberToObject(root, "n_scored", (double)r->n_scored);
  cJSON_AddNumberToObject(root, "ppl", r->ppl);
  cJSON_AddNumberToObject(root, "ppl_se", r->ppl_se);
  cJSON_AddNumberToObject(root, "nll_mean", r->nll_mean);
  cJSON_AddNumberToObject(root, "nll_se", r->nll_se);
  cJSON_AddNumberToObject(root, "seconds", r->seconds);
  cJSON_AddNumberToObject(root, "tokens_per_s", r->tokens_per_s);
  cJSON *w = cJSON_AddArrayToObject(root, "window_nll");
  for (int32_t i = 0; w && i < r->n_windows; i++)
    cJSON_AddItemToArray(w, cJSON_CreateNumber(r->window_nll[i]));
  char *s = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!s) return -1;
  fprintf(out, "%s\n", s);
  cJSON_free(s);
  return 0;
}
