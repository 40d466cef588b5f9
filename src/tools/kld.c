/* kld.c: `pasada kld`: BASE and QUANT on the same windows, window by
 * window: BASE's log-probabilities of the window's scored rows are kept
 * (rows x vocabulary floats), then QUANT's rows are compared with them as
 * they come. Both models use the same log-softmax on the same thread count
 * and batch, so a model against itself gives bit-identical rows and a KL of
 * exactly 0. */
#include "tools/kld.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "format/gguf.h"
#include "model/model.h"

typedef struct {
  int32_t n_vocab, n_scored;
  float *lp_base;    /* n_scored x n_vocab: BASE's log-probs of this window */
  int32_t *top_base; /* BASE's argmax per row */
  double *nll_base;  /* BASE's NLL per row */
  float *lq;         /* QUANT's log-probs of one row */
  double *kl;        /* every scored token's KL, for the percentiles */
  int64_t n;         /* tokens compared so far */
  int64_t agree;
  double nb, nb2, nq, nq2, d, d2, kl_sum, kl_sum2;
} kld_state;

static int base_row(void *user, int32_t k, const float *logits, int32_t next) {
  kld_state *s = user;
  float *lp = s->lp_base + (size_t)k * (size_t)s->n_vocab;
  double lse;
  s->top_base[k] = pa_log_softmax(logits, s->n_vocab, lp, &lse);
  s->nll_base[k] = lse - (double)logits[next];
  return PASADA_OK;
}

static int quant_row(void *user, int32_t k, const float *logits, int32_t next) {
  kld_state *s = user;
  const float *lp = s->lp_base + (size_t)k * (size_t)s->n_vocab;
  double lse;
  int32_t top = pa_log_softmax(logits, s->n_vocab, s->lq, &lse);
  double kl = 0;
  for (int32_t v = 0; v < s->n_vocab; v++)
    kl += exp((double)lp[v]) * ((double)lp[v] - (double)s->lq[v]);
  double nq = lse - (double)logits[next], nb = s->nll_base[k];
  s->kl[s->n++] = kl;
  s->kl_sum += kl;
  s->kl_sum2 += kl * kl;
  s->agree += top == s->top_base[k];
  s->nb += nb;
  s->nb2 += nb * nb;
  s->nq += nq;
  s->nq2 += nq * nq;
  s->d += nq - nb;
  s->d2 += (nq - nb) * (nq - nb);
  return PASADA_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void side_info(const char *path, const pa_eval_model *m, pa_kld_side *out) {
  const char *slash = strrchr(path, '/');
  snprintf(out->name, sizeof out->name, "%s", slash ? slash + 1 : path);
  struct stat st;
  out->file_bytes = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
  const gguf_file *f = m->model->gguf;
  uint64_t bytes = 0;
  for (uint64_t i = 0; f && i < f->n_tensors; i++) {
    const gguf_tensor *t = &f->tensors[i];
    out->n_params += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    bytes += t->nbytes;
  }
  out->bits_per_weight = out->n_params ? 8.0 * (double)bytes / (double)out->n_params : 0;
}

int pa_kld_run(const pa_kld_params *p, pa_kld_result *r) {
  memset(r, 0, sizeof *r);
  const char *slash = strrchr(p->text_path, '/');
  snprintf(r->text_name, sizeof r->text_name, "%s", slash ? slash + 1 : p->text_path);
  char *text = NULL;
  size_t len = 0;
  int rc = pa_eval_read_text(p->text_path, &text, &len);
  if (rc) return rc;
  pa_eval_model mb = {0}, mq = {0};
  int32_t *tokens = NULL, *tokens_q = NULL;
  size_t n_tokens = 0, n_tokens_q = 0;
  kld_state s = {0};
  pa_eval_params base_eval = p->eval;
  base_eval.quantize = NULL; /* --quantize is QUANT's */
  if ((rc = pa_eval_model_open(p->base_path, &base_eval, &mb))) goto done;
  if ((rc = pa_eval_model_open(p->quant_path, &p->eval, &mq))) goto done;
  if (mb.n_vocab != mq.n_vocab) {
    rc = pa_error(PASADA_ERR_ARG,
                  "BASE has %d tokens in its vocabulary and QUANT %d: not the same model",
                  mb.n_vocab, mq.n_vocab);
    goto done;
  }
  if ((rc = pa_eval_tokenize(&mb, text, len, &tokens, &n_tokens))) goto done;
  if ((rc = pa_eval_tokenize(&mq, text, len, &tokens_q, &n_tokens_q))) goto done;
  if (n_tokens != n_tokens_q || memcmp(tokens, tokens_q, n_tokens * sizeof *tokens) ||
      mb.add_bos != mq.add_bos || (mb.add_bos && mb.bos != mq.bos)) {
    rc = pa_error(PASADA_ERR_ARG,
                  "BASE and QUANT tokenize the text differently: not the same model");
    goto done;
  }
  if ((rc = pa_eval_n_windows(n_tokens, &p->eval, &r->n_windows))) goto done;
  r->n_text_tokens = n_tokens;
  r->n_ctx = p->eval.n_ctx;
  r->n_threads = p->eval.n_threads;
  if (r->n_threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    r->n_threads = n > 0 ? (int32_t)n : 1;
  }
  {
    pasada_kv_stats kvs;
    pasada_kv_get_stats(mb.ctx, &kvs);
    r->kv_type = pasada_kv_type_name(kvs.type);
  }
  s.n_vocab = mb.n_vocab;
  s.n_scored = pa_eval_n_scored(p->eval.n_ctx);
  size_t rows = (size_t)s.n_scored;
  s.lp_base = pa_alloc(rows * (size_t)s.n_vocab * sizeof(float));
  s.top_base = malloc(rows * sizeof(int32_t));
  s.nll_base = malloc(rows * sizeof(double));
  s.lq = pa_alloc((size_t)s.n_vocab * sizeof(float));
  s.kl = malloc((size_t)r->n_windows * rows * sizeof(double));
  if (!s.lp_base || !s.top_base || !s.nll_base || !s.lq || !s.kl) {
    rc = pa_error(PASADA_ERR_NOMEM, "out of memory for %zu rows of %d log-probabilities", rows,
                  s.n_vocab);
    goto done;
  }
  bool tty = isatty(2);
  if (p->progress)
    fprintf(stderr, "kld: %zu tokens, %d windows of %d (%d scored each)\n", n_tokens, r->n_windows,
            p->eval.n_ctx, s.n_scored);
  double t0 = pa_time_s();
  for (int32_t w = 0; w < r->n_windows; w++) {
    const int32_t *window = tokens + (size_t)w * (size_t)p->eval.n_ctx;
    if ((rc = pa_eval_window(&mb, &p->eval, window, base_row, &s))) goto done;
    if ((rc = pa_eval_window(&mq, &p->eval, window, quant_row, &s))) goto done;
    if (p->progress) {
      double el = pa_time_s() - t0;
      fprintf(stderr, "%s[%d/%d] KL %.6f  top-1 %.2f%%  ppl %.4f -> %.4f  %.0f s left%s",
              tty ? "\r" : "", w + 1, r->n_windows, s.kl_sum / (double)s.n,
              100.0 * (double)s.agree / (double)s.n, exp(s.nb / (double)s.n),
              exp(s.nq / (double)s.n), el / (w + 1) * (r->n_windows - w - 1), tty ? "   " : "\n");
      if (tty && w + 1 == r->n_windows) fputc('\n', stderr);
    }
  }
  r->seconds = pa_time_s() - t0;
  r->n_scored = s.n;
  pa_mean_se(s.kl_sum, s.kl_sum2, s.n, &r->kl_mean, &r->kl_se);
  pa_mean_se(s.d, s.d2, s.n, &r->ln_ratio, &r->ln_ratio_se);
  pa_mean_se(s.nb, s.nb2, s.n, &r->base.nll_mean, &r->base.nll_se);
  pa_mean_se(s.nq, s.nq2, s.n, &r->quant.nll_mean, &r->quant.nll_se);
  r->base.ppl = exp(r->base.nll_mean);
  r->base.ppl_se = r->base.ppl * r->base.nll_se;
  r->quant.ppl = exp(r->quant.nll_mean);
  r->quant.ppl_se = r->quant.ppl * r->quant.nll_se;
  r->top1 = s.n ? (double)s.agree / (double)s.n : 0;
  r->top1_se = s.n > 1 ? sqrt(r->top1 * (1 - r->top1) / (double)(s.n - 1)) : 0;
  qsort(s.kl, (size_t)s.n, sizeof(double), cmp_double);
  if (s.n) {
    size_t n = (size_t)s.n, i99 = (size_t)ceil(0.99 * (double)n);
    r->kl_median = n % 2 ? s.kl[n / 2] : 0.5 * (s.kl[n / 2 - 1] + s.kl[n / 2]);
    r->kl_p99 = s.kl[(i99 ? i99 : 1) - 1];
    r->kl_max = s.kl[n - 1];
  }
  side_info(p->base_path, &mb, &r->base);
  side_info(p->quant_path, &mq, &r->quant);
  r->base.tokens_per_s = mb.decode_seconds > 0 ? (double)mb.decode_tokens / mb.decode_seconds : 0;
  r->quant.tokens_per_s = mq.decode_seconds > 0 ? (double)mq.decode_tokens / mq.decode_seconds : 0;

done:
  free(text);
  free(tokens);
  free(tokens_q);
  pa_free(s.lp_base);
  free(s.top_base);
  free(s.nll_base);
  pa_free(s.lq);
  free(s.kl);
  pa_eval_model_close(&mq);
  pa_eval_model_close(&mb);
  return rc;
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

/* "+12.3%" for b relative to a. */
static void pct(char *buf, size_t n, double a, double b) {
  if (a > 0)
    snprintf(buf, n, "%+.2f%%", 100.0 * (b - a) / a);
  else
    snprintf(buf, n, "-");
}

void pa_kld_print_table(FILE *out, const pa_kld_result *r) {
  const pa_kld_side *b = &r->base, *q = &r->quant;
  char c1[32], c2[32], c3[32], v1[64], v2[64];
  fprintf(out, "kld: %d windows of %d tokens of %s, %lld tokens scored\n", r->n_windows, r->n_ctx,
          r->text_name, (long long)r->n_scored);
  fprintf(out, "base    %s\nquant   %s\n\n", b->name, q->name);
  fprintf(out, "%-16s %-26s %-26s %s\n", "", "base", "quant", "change");
  snprintf(v1, sizeof v1, "%.2f MiB (%.2f bpw)", mib(b->file_bytes), b->bits_per_weight);
  snprintf(v2, sizeof v2, "%.2f MiB (%.2f bpw)", mib(q->file_bytes), q->bits_per_weight);
  pct(c1, sizeof c1, (double)b->file_bytes, (double)q->file_bytes);
  fprintf(out, "%-16s %-26s %-26s %s\n", "size", v1, v2, c1);
  snprintf(v1, sizeof v1, "%.1f tok/s", b->tokens_per_s);
  snprintf(v2, sizeof v2, "%.1f tok/s", q->tokens_per_s);
  pct(c2, sizeof c2, b->tokens_per_s, q->tokens_per_s);
  fprintf(out, "%-16s %-26s %-26s %s\n", "speed", v1, v2, c2);
  snprintf(v1, sizeof v1, "%.4f +/- %.4f", b->ppl, b->ppl_se);
  snprintf(v2, sizeof v2, "%.4f +/- %.4f", q->ppl, q->ppl_se);
  pct(c3, sizeof c3, b->ppl, q->ppl);
  fprintf(out, "%-16s %-26s %-26s %s (ln ratio %.5f +/- %.5f)\n", "perplexity", v1, v2, c3,
          r->ln_ratio, r->ln_ratio_se);
  fprintf(out, "\n%-16s mean %.6f +/- %.6f   median %.6f   99%% %.6f   max %.6f nats\n",
          "KL(base||quant)", r->kl_mean, r->kl_se, r->kl_median, r->kl_p99, r->kl_max);
  fprintf(out, "%-16s %.3f%% +/- %.3f%% of scored tokens\n", "top-1 agree", 100.0 * r->top1,
          100.0 * r->top1_se);
  fprintf(out, "%-16s %.1f s, %d threads, KV %s (speed: tokens per second of decoding the windows)\n",
          "time", r->seconds, r->n_threads, r->kv_type ? r->kv_type : "?");
}

static void side_json(cJSON *o, const pa_kld_side *s) {
  cJSON_AddStringToObject(o, "file", s->name);
  cJSON_AddNumberToObject(o, "file_bytes", (double)s->file_bytes);
  cJSON_AddNumberToObject(o, "n_params", (double)s->n_params);
  cJSON_AddNumberToObject(o, "bits_per_weight", s->bits_per_weight);
  cJSON_AddNumberToObject(o, "ppl", s->ppl);
  cJSON_AddNumberToObject(o, "ppl_se", s->ppl_se);
  cJSON_AddNumberToObject(o, "nll_mean", s->nll_mean);
  cJSON_AddNumberToObject(o, "nll_se", s->nll_se);
  cJSON_AddNumberToObject(o, "tokens_per_s", s->tokens_per_s);
}

int pa_kld_print_json(FILE *out, const pa_kld_result *r) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return -1;
  cJSON *b = cJSON_AddObjectToObject(root, "base"), *q = cJSON_AddObjectToObject(root, "quant");
  if (b) side_json(b, &r->base);
  if (q) side_json(q, &r->quant);
  cJSON_AddStringToObject(root, "text", r->text_name);
  cJSON_AddNumberToObject(root, "n_text_tokens", (double)r->n_text_tokens);
  cJSON_AddNumberToObject(root, "n_ctx", r->n_ctx);
  cJSON_AddNumberToObject(root, "n_windows", r->n_windows);
  cJSON_AddNumberToObject(root, "n_scored", (double)r->n_scored);
  cJSON_AddNumberToObject(root, "n_threads", r->n_threads);
  cJSON_AddStringToObject(root, "kv_type", r->kv_type ? r->kv_type : "?");
  cJSON_AddNumberToObject(root, "kl_mean", r->kl_mean);
  cJSON_AddNumberToObject(root, "kl_se", r->kl_se);
  cJSON_AddNumberToObject(root, "kl_median", r->kl_median);
  cJSON_AddNumberToObject(root, "kl_p99", r->kl_p99);
  cJSON_AddNumberToObject(root, "kl_max", r->kl_max);
  cJSON_AddNumberToObject(root, "top1_agreement", r->top1);
  cJSON_AddNumberToObject(root, "top1_agreement_se", r->top1_se);
  cJSON_AddNumberToObject(root, "ppl_ratio", exp(r->ln_ratio));
  cJSON_AddNumberToObject(root, "ln_ppl_ratio", r->ln_ratio);
  cJSON_AddNumberToObject(root, "ln_ppl_ratio_se", r->ln_ratio_se);
  cJSON_AddNumberToObject(root, "ppl_change", r->quant.ppl - r->base.ppl);
  cJSON_AddNumberToObject(
      root, "size_ratio",
      r->base.file_bytes ? (double)r->quant.file_bytes / (double)r->base.file_bytes : 0);
  cJSON_AddNumberToObject(
      root, "speed_ratio",
      r->base.tokens_per_s > 0 ? r->quant.tokens_per_s / r->base.tokens_per_s : 0);
  cJSON_AddNumberToObject(root, "seconds", r->seconds);
  char *s = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!s) return -1;
  fprintf(out, "%s\n", s);
  cJSON_free(s);
  return 0;
}
