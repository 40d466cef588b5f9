/* verify.c: `pasada verify` (see verify.h). The two backends' contexts
 * decode the same chunk of a prompt one after the other, each
 * layer's residual stream captured by the context's layer hook, and the
 * chunk is compared before the next one runs, so memory holds one chunk of
 * hidden states and logits per context, whatever the prompts' length. */
#include "tools/verify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "format/gguf.h"
#include "kernels/ops.h"
#include "kernels/attention.h"
#include "model/model.h"
#include "tools/perplexity.h"

/* Why these numbers (docs/tools.md has the measurements): the fast path
 * rounds every matrix product's input to 8 bits per block, and on the
 * real models a layer's hidden states drift from the exact computation by
 * a mean relative error of 4e-3 .. 2e-2, with single tokens up to 0.18
 * (a token whose state is dominated by one huge channel); the logits sit
 * at a mean KL of 3-5e-3 from it, 5e-2 at worst. The defaults leave 2.5x
 * or more room above that on every model we test, and a kernel that drops
 * one block of a row of 18 (mean 0.40 at layer 0) or flips one output in
 * 64 lands far above them. */
pa_verify_tol pa_verify_default_tol(void) {
  pa_verify_tol t = {.hidden_mean = 0.05, .hidden_max = 0.5, .kl_mean = 0.03, .kl_max = 0.5, .top1 = 0.9};
  return t;
}

/* Another engine also quantizes differently (llama.cpp: F16 KV cache, its
 * own summation orders): it agrees with pasada about as well as with
 * itself under other settings (docs/parity.md), so the same logit bounds. */
pa_verify_tol pa_verify_default_tol_against(void) { return pa_verify_default_tol(); }

static const char *const BUILTIN_PROMPTS[] = {
    "The Eiffel Tower, completed in 1889 for the World's Fair, stands on the Champ de Mars in "
    "Paris. At first many artists disliked it, but it became the symbol of the city.",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n"
    "    for _ in range(n):\n        a, b = b, a + b\n    return a\n\nprint(fibonacci(10))",
    "Question: A train leaves at 9:40 and arrives at 13:05. How long is the journey?\n"
    "Answer: From 9:40 to 13:40 is 4 hours, minus 35 minutes, so 3 hours and 25 minutes.",
    "Il était une fois, dans un petit village au bord de la mer, une vieille femme qui "
    "racontait des histoires aux enfants. 昔々、海辺の小さな村に。",
};

typedef struct {
  float *buf;    /* [n_layer][cap_tok][E] */
  int32_t cap_tok;
  int64_t E;
  const pasada_context *ctx; /* a decode may run as several forward passes */
} capture;

static void capture_hook(void *user, int layer, const float *x, int32_t n_tok, int64_t E) {
  capture *c = user;
  const int32_t first = c->ctx->fwd_first; /* x holds batch tokens [first, first + n_tok) */
  if (first < 0 || n_tok > c->cap_tok - first) return; /* cannot happen: chunks are at most cap_tok */
  memcpy(c->buf + ((size_t)layer * (size_t)c->cap_tok + (size_t)first) * (size_t)E, x,
         (size_t)n_tok * (size_t)E * sizeof(float));
}

typedef struct {
  pasada_model *model;
  pasada_context *fast, *ref;
  capture cap_fast, cap_ref;
  int32_t n_vocab, n_layer, chunk;
  float *lp_a, *lp_b;        /* log-probs of one row each */
  double *layer_sum;         /* per layer: sum of relative errors */
  int64_t n_tok_layers;      /* tokens compared per layer */
  double kl_sum;
  int64_t agree;
  float *saved;              /* --save: fast logits of every position */
  int64_t saved_cap;
  int32_t *tokens, *offsets; /* every prompt, end to end; n_prompts + 1 offsets */
  int64_t n_tokens;
  int32_t n_prompts;
} verify_state;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void basename_copy(char *dst, size_t cap, const char *path) {
  const char *b = strrchr(path, '/');
  snprintf(dst, cap, "%s", b ? b + 1 : path);
}

/* ---- prompts ---- */

static int add_prompt(verify_state *s, const int32_t *ids, size_t n, int32_t max_tokens) {
  if (n == 0) return PASADA_OK;
  if (n > (size_t)max_tokens) n = (size_t)max_tokens;
  int32_t *t = realloc(s->tokens, (size_t)(s->n_tokens + (int64_t)n) * sizeof(int32_t));
  int32_t *o = realloc(s->offsets, (size_t)(s->n_prompts + 2) * sizeof(int32_t));
  if (t) s->tokens = t;
  if (o) s->offsets = o;
  if (!t || !o) return pa_error(PASADA_ERR_NOMEM, "out of memory for the prompts");
  if (s->n_prompts == 0) s->offsets[0] = 0;
  memcpy(s->tokens + s->n_tokens, ids, n * sizeof(int32_t));
  s->n_tokens += (int64_t)n;
  s->offsets[++s->n_prompts] = (int32_t)s->n_tokens;
  return PASADA_OK;
}

static int tokenize_prompt(verify_state *s, const char *text, size_t len, int32_t max_tokens) {
  const pasada_tokenizer *tok = pasada_model_tokenizer(s->model);
  int32_t *ids = NULL;
  size_t n = 0;
  int rc = pasada_tokenize(tok, text, len, true, false, &ids, &n);
  if (rc) return rc;
  rc = add_prompt(s, ids, n, max_tokens);
  pasada_text_free(ids);
  return rc;
}

static int load_prompts(verify_state *s, const pa_verify_params *p, int32_t max_tokens) {
  if (!p->prompts_path) {
    for (size_t i = 0; i < sizeof BUILTIN_PROMPTS / sizeof BUILTIN_PROMPTS[0]; i++) {
      int rc = tokenize_prompt(s, BUILTIN_PROMPTS[i], strlen(BUILTIN_PROMPTS[i]), max_tokens);
      if (rc) return rc;
    }
    return PASADA_OK;
  }
  char *text;
  size_t len;
  int rc = pa_eval_read_text(p->prompts_path, &text, &len);
  if (rc) return rc;
  for (size_t i = 0; i < len && !rc;) {
    size_t j = i;
    while (j < len && text[j] != '\n') j++;
    size_t k = j;
    if (k > i && text[k - 1] == '\r') k--;
    bool blank = true;
    for (size_t q = i; q < k; q++) blank &= text[q] == ' ' || text[q] == '\t';
    if (!blank) rc = tokenize_prompt(s, text + i, k - i, max_tokens);
    i = j + 1;
  }
  free(text);
  if (!rc && s->n_prompts == 0)
    return pa_error(PASADA_ERR_ARG, "%s: no prompt in the file (one prompt per non-blank line)",
                    p->prompts_path);
  return rc;
}

/* ---- logits files ---- */

typedef struct {
  gguf_file *f;
  const float *logits; /* n_tokens rows of n_vocab */
} logits_file;

static int open_logits_file(verify_state *s, const char *path, logits_file *lf, char *source,
                            size_t source_cap) {
  int rc = gguf_open(path, &lf->f);
  if (rc) return rc;
  gguf_file *f = lf->f;
  uint32_t n_vocab = 0;
  char *src = NULL;
  if ((rc = gguf_get_u32(f, "logits.n_vocab", true, &n_vocab))) return rc;
  if ((rc = gguf_get_string(f, "logits.source", false, &src))) return rc;
  snprintf(source, source_cap, "%s", src ? src : "unknown");
  free(src);
  if ((int64_t)n_vocab != s->n_vocab)
    return pa_error(PASADA_ERR_FORMAT, "%s: logits of %u tokens' vocabulary, the model has %d", path,
                    n_vocab, s->n_vocab);
  const gguf_value *vt = gguf_get(f, "logits.tokens"), *vo = gguf_get(f, "logits.prompt_offsets");
  const gguf_tensor *tl = gguf_get_tensor(f, "logits");
  if (!vt || !vo || !tl)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: not a logits file (needs logits.tokens, logits.prompt_offsets and a logits tensor)", path);
  if (vt->type != GGUF_TYPE_ARRAY || vo->type != GGUF_TYPE_ARRAY || !vt->arr.raw || !vo->arr.raw ||
      tl->type != PA_TYPE_F32 || tl->n_dims != 2)
    return pa_error(PASADA_ERR_FORMAT, "%s: logits.tokens and logits.prompt_offsets must be integer arrays, "
                    "the logits tensor 2-D F32", path);
  const int64_t n = (int64_t)vt->arr.count, np = (int64_t)vo->arr.count - 1;
  if (n < 1 || np < 1 || n > INT32_MAX || np > INT32_MAX)
    return pa_error(PASADA_ERR_FORMAT, "%s: no prompt in the file", path);
  if (tl->ne[0] != n_vocab || tl->ne[1] != n)
    return pa_error(PASADA_ERR_FORMAT, "%s: logits are %lld x %lld, expected %u x %lld", path,
                    (long long)tl->ne[0], (long long)tl->ne[1], n_vocab, (long long)n);
  s->tokens = malloc((size_t)n * sizeof(int32_t));
  s->offsets = malloc((size_t)(np + 1) * sizeof(int32_t));
  if (!s->tokens || !s->offsets) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  int64_t prev = 0;
  for (int64_t i = 0; i <= np; i++) {
    int64_t o = gguf_arr_i64(vo, (uint64_t)i);
    if ((i == 0 && o != 0) || o < prev || o > n || (i == np && o != n) || (i > 0 && o == prev))
      return pa_error(PASADA_ERR_FORMAT, "%s: logits.prompt_offsets[%lld] = %lld is out of order or range",
                      path, (long long)i, (long long)o);
    s->offsets[i] = (int32_t)(prev = o);
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t t = gguf_arr_i64(vt, (uint64_t)i);
    if (t < 0 || t >= s->n_vocab)
      return pa_error(PASADA_ERR_FORMAT, "%s: token %lld at index %lld is out of the vocabulary", path,
                      (long long)t, (long long)i);
    s->tokens[i] = (int32_t)t;
  }
  s->n_tokens = n;
  s->n_prompts = (int32_t)np;
  lf->logits = tl->data; /* aligned by the reader (general.alignment >= 4) */
  return PASADA_OK;
}

static int save_logits_file(const verify_state *s, const char *path, const char *model_name) {
  gguf_writer *w = gguf_writer_create();
  if (!w) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  char source[320];
  snprintf(source, sizeof source, "pasada %s", model_name);
  int64_t ne_l[2] = {s->n_vocab, s->n_tokens};
  int rc = gguf_writer_set_string(w, "general.architecture", "logits");
  if (!rc) rc = gguf_writer_set_string(w, "logits.source", source);
  if (!rc) rc = gguf_writer_set_u32(w, "logits.n_vocab", (uint32_t)s->n_vocab);
  if (!rc) rc = gguf_writer_set_array(w, "logits.tokens", GGUF_TYPE_INT32, s->tokens, (uint64_t)s->n_tokens);
  if (!rc)
    rc = gguf_writer_set_array(w, "logits.prompt_offsets", GGUF_TYPE_INT32, s->offsets,
                               (uint64_t)s->n_prompts + 1);
  if (!rc)
    rc = gguf_writer_add_tensor(w, "logits", PA_TYPE_F32, 2, ne_l, s->saved,
                                (uint64_t)s->n_tokens * (uint64_t)s->n_vocab * sizeof(float));
  if (!rc) rc = gguf_writer_write(w, path, 3);
  gguf_writer_free(w);
  return rc;
}

/* ---- the comparison ---- */

static int decode_chunk(pasada_context *ctx, const int32_t *ids, int32_t p0, int32_t n, int32_t *pos,
                        int32_t *seq, int8_t *want) {
  for (int32_t i = 0; i < n; i++) {
    pos[i] = p0 + i;
    seq[i] = 0;
    want[i] = 1;
  }
  pasada_batch b = {.n_tokens = n, .token = ids, .pos = pos, .seq_id = seq, .want_logits = want};
  return pasada_decode(ctx, &b);
}

/* Relative error of one hidden state: max |a - b| / max |b|. */
static double rel_err(const float *a, const float *b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]), m = fabs((double)b[i]);
    num = d > num ? d : num;
    den = m > den ? m : den;
  }
  if (den == 0) return num == 0 ? 0 : INFINITY;
  return num / den;
}

/* Compares one position's logits: reference (or the file's) a, pasada b. */
static void compare_logits(verify_state *s, pa_verify_result *r, const float *a, const float *b,
                           int64_t position) {
  double lse_a, lse_b;
  int32_t ta = pa_log_softmax(a, s->n_vocab, s->lp_a, &lse_a);
  int32_t tb = pa_log_softmax(b, s->n_vocab, s->lp_b, &lse_b);
  double kl = 0, mx = 0;
  for (int32_t v = 0; v < s->n_vocab; v++) {
    kl += exp((double)s->lp_a[v]) * ((double)s->lp_a[v] - (double)s->lp_b[v]);
    double d = fabs((double)a[v] - (double)b[v]);
    mx = d > mx || isnan(d) ? d : mx;
  }
  if (isnan(kl) || isnan(mx)) kl = mx = INFINITY; /* NaN logits must not pass */
  if (kl < 0) kl = 0; /* rounding of a KL that is ~0 */
  s->kl_sum += kl;
  if (kl > r->kl_max || r->n_positions == 0) {
    r->kl_max = kl;
    r->kl_max_pos = (int32_t)position;
  }
  r->max_abs = mx > r->max_abs ? mx : r->max_abs;
  s->agree += ta == tb;
  r->n_positions++;
}

static int run_prompt(verify_state *s, const pa_verify_params *p, pa_verify_result *r, int32_t i,
                      const logits_file *lf, int32_t *pos, int32_t *seq, int8_t *want) {
  const int32_t *ids = s->tokens + s->offsets[i];
  const int32_t n = s->offsets[i + 1] - s->offsets[i];
  const int64_t E = s->cap_fast.E;
  pasada_seq_truncate(s->fast, 0, 0);
  if (s->ref) pasada_seq_truncate(s->ref, 0, 0);
  for (int32_t p0 = 0; p0 < n; p0 += s->chunk) {
    const int32_t m = n - p0 < s->chunk ? n - p0 : s->chunk;
    int rc = decode_chunk(s->fast, ids + p0, p0, m, pos, seq, want);
    if (!rc && s->ref) rc = decode_chunk(s->ref, ids + p0, p0, m, pos, seq, want);
    if (rc) return rc;
    if (s->ref) {
      for (int32_t l = 0; l < s->n_layer; l++) {
        const size_t off = (size_t)l * (size_t)s->chunk * (size_t)E;
        for (int32_t t = 0; t < m; t++) {
          double e = rel_err(s->cap_fast.buf + off + (size_t)t * (size_t)E,
                             s->cap_ref.buf + off + (size_t)t * (size_t)E, E);
          if (isnan(e)) e = INFINITY;
          r->layer_max[l] = e > r->layer_max[l] ? e : r->layer_max[l];
          r->layer_mean[l] += e; /* a sum until the end */
        }
      }
      s->n_tok_layers += m;
    }
    for (int32_t t = 0; t < m; t++) {
      const int64_t at = s->offsets[i] + p0 + t;
      const float *fast = pasada_get_logits(s->fast, t);
      const float *ref = lf ? lf->logits + (size_t)at * (size_t)s->n_vocab : pasada_get_logits(s->ref, t);
      compare_logits(s, r, ref, fast, at);
      if (s->saved) memcpy(s->saved + (size_t)at * (size_t)s->n_vocab, fast, (size_t)s->n_vocab * sizeof(float));
    }
  }
  return PASADA_OK;
}

static void judge(pa_verify_result *r) {
  const pa_verify_tol *t = &r->tol;
  r->first_bad_layer = -1;
  r->failure[0] = 0;
  if (!r->against)
    for (int32_t l = 0; l < r->n_layer && !r->failure[0]; l++) {
      if (!(r->layer_mean[l] <= t->hidden_mean))
        snprintf(r->failure, sizeof r->failure,
                 "layer %d: mean hidden-state relative error %.3g exceeds the tolerance %.3g", l,
                 r->layer_mean[l], t->hidden_mean);
      else if (!(r->layer_max[l] <= t->hidden_max))
        snprintf(r->failure, sizeof r->failure,
                 "layer %d: hidden-state relative error %.3g at one token exceeds the tolerance %.3g", l,
                 r->layer_max[l], t->hidden_max);
      if (r->failure[0]) r->first_bad_layer = l;
    }
  if (!r->failure[0] && !(r->kl_mean <= t->kl_mean))
    snprintf(r->failure, sizeof r->failure, "logits: mean KL %.3g exceeds the tolerance %.3g", r->kl_mean,
             t->kl_mean);
  if (!r->failure[0] && !(r->kl_max <= t->kl_max))
    snprintf(r->failure, sizeof r->failure, "logits: KL %.3g at position %d exceeds the tolerance %.3g",
             r->kl_max, r->kl_max_pos, t->kl_max);
  if (!r->failure[0] && !(r->top1 >= t->top1))
    snprintf(r->failure, sizeof r->failure, "logits: top-1 agreement %.2f%% is below the tolerance %.2f%%",
             100 * r->top1, 100 * t->top1);
  r->pass = r->failure[0] == 0;
}

static int make_context(pasada_model *m, const pa_verify_params *p, int32_t n_ctx, int32_t chunk,
                        const char *backend, pasada_context **out) {
  pasada_context_params cp = pasada_context_default_params();
  cp.n_ctx = n_ctx;
  cp.n_batch = chunk;
  cp.n_threads = p->n_threads;
  cp.backend = backend;
  return pasada_context_create(m, &cp, out);
}

int pa_verify_run(const pa_verify_params *p, pa_verify_result *r) {
  memset(r, 0, sizeof *r);
  r->first_bad_layer = -1;
  r->tol = p->tol;
  r->against = p->against_path != NULL;
  basename_copy(r->model_name, sizeof r->model_name, p->model_path);
  const char *backend = p->backend ? p->backend : "cpu";
  const char *against = p->against_backend ? p->against_backend : "ref";
  snprintf(r->backend, sizeof r->backend, "%s", backend);
  snprintf(r->against_backend, sizeof r->against_backend, "%s", against);
  const int32_t max_tokens = p->max_tokens > 0 ? p->max_tokens : 256;

  verify_state s = {0};
  logits_file lf = {0};
  int32_t *pos = NULL, *seq = NULL;
  int8_t *want = NULL;
  double t0 = now_s();
  pasada_model_params mp = pasada_model_default_params();
  /* the weights are prepared for the backend under test (the CPU repacks
   * them for its table), so that what it runs is what gets checked; the
   * other context reads them as they are */
  mp.backend = backend;
  pa_backend *custom = NULL;
  int rc = p->kernels ? pa_backend_cpu_create_with(p->kernels, 0, &custom) : PASADA_OK;
  if (!rc) rc = pa_model_load_backend(p->model_path, &mp, custom, &s.model);
  if (rc) return rc;
  if (custom) snprintf(r->backend, sizeof r->backend, "%s", custom->name);
  snprintf(r->kernels, sizeof r->kernels, "%s", s.model->be->kernels);
  s.n_vocab = pasada_model_n_vocab(s.model);
  s.n_layer = s.model->hp.n_layer;
  r->n_layer = s.n_layer;
  if (p->against_path)
    rc = open_logits_file(&s, p->against_path, &lf, r->against_source, sizeof r->against_source);
  else
    rc = load_prompts(&s, p, max_tokens);
  if (rc) goto done;
  r->n_prompts = s.n_prompts;

  int32_t longest = 0;
  for (int32_t i = 0; i < s.n_prompts; i++)
    longest = s.offsets[i + 1] - s.offsets[i] > longest ? s.offsets[i + 1] - s.offsets[i] : longest;
  if (longest > (1 << 20)) {
    rc = pa_error(PASADA_ERR_ARG, "a prompt of %d tokens is too long to verify", longest);
    goto done;
  }
  s.chunk = p->n_batch > 0 && p->n_batch < longest ? p->n_batch : longest;
  const int64_t E = s.model->hp.n_embd;
  const size_t cap_bytes = (size_t)s.n_layer * (size_t)s.chunk * (size_t)E * sizeof(float);
  rc = make_context(s.model, p, longest, s.chunk, NULL, &s.fast); /* the model's: under test */
  if (!rc && !p->against_path) rc = make_context(s.model, p, longest, s.chunk, against, &s.ref);
  if (rc) goto done;
  s.lp_a = malloc((size_t)s.n_vocab * sizeof(float));
  s.lp_b = malloc((size_t)s.n_vocab * sizeof(float));
  pos = malloc((size_t)s.chunk * sizeof(int32_t));
  seq = malloc((size_t)s.chunk * sizeof(int32_t));
  want = malloc((size_t)s.chunk);
  bool ok = s.lp_a && s.lp_b && pos && seq && want;
  if (s.ref) {
    s.cap_fast = (capture){.buf = malloc(cap_bytes), .cap_tok = s.chunk, .E = E, .ctx = s.fast};
    s.cap_ref = (capture){.buf = malloc(cap_bytes), .cap_tok = s.chunk, .E = E, .ctx = s.ref};
    r->layer_max = calloc((size_t)s.n_layer, sizeof(double));
    r->layer_mean = calloc((size_t)s.n_layer, sizeof(double));
    ok = ok && s.cap_fast.buf && s.cap_ref.buf && r->layer_max && r->layer_mean &&
         pa_context_set_layer_hook(s.fast, capture_hook, &s.cap_fast) == PASADA_OK &&
         pa_context_set_layer_hook(s.ref, capture_hook, &s.cap_ref) == PASADA_OK;
  }
  if (ok && p->save_path) {
    s.saved = malloc((size_t)s.n_tokens * (size_t)s.n_vocab * sizeof(float));
    ok = s.saved != NULL;
  }
  if (!ok) {
    rc = pa_error(PASADA_ERR_NOMEM, "out of memory for %d tokens of %d layers", s.chunk, s.n_layer);
    goto done;
  }
  for (int32_t i = 0; i < s.n_prompts && !rc; i++) {
    if (p->progress)
      fprintf(stderr, "verify: prompt %d/%d (%d tokens)\n", i + 1, s.n_prompts,
              s.offsets[i + 1] - s.offsets[i]);
    rc = run_prompt(&s, p, r, i, p->against_path ? &lf : NULL, pos, seq, want);
  }
  if (rc) goto done;
  r->kl_mean = r->n_positions ? s.kl_sum / (double)r->n_positions : 0;
  r->top1 = r->n_positions ? (double)s.agree / (double)r->n_positions : 1;
  if (s.ref)
    for (int32_t l = 0; l < s.n_layer; l++) r->layer_mean[l] /= (double)(s.n_tok_layers ? s.n_tok_layers : 1);
  judge(r);
  if (p->save_path) rc = save_logits_file(&s, p->save_path, r->model_name);
  r->seconds = now_s() - t0;

done:
  if (rc) pa_verify_result_free(r);
  free(pos);
  free(seq);
  free(want);
  free(s.lp_a);
  free(s.lp_b);
  free(s.cap_fast.buf);
  free(s.cap_ref.buf);
  free(s.saved);
  free(s.tokens);
  free(s.offsets);
  if (lf.f) gguf_close(lf.f);
  pasada_context_free(s.fast);
  pasada_context_free(s.ref);
  pasada_model_free(s.model);
  return rc;
}

void pa_verify_result_free(pa_verify_result *r) {
  free(r->layer_max);
  free(r->layer_mean);
  r->layer_max = r->layer_mean = NULL;
}

void pa_verify_print_table(FILE *out, const pa_verify_result *r) {
  const pa_verify_tol *t = &r->tol;
  if (r->against)
    fprintf(out, "pasada verify: %s, backend %s (kernels %s) against %s: %d prompts, %lld positions\n",
            r->model_name, r->backend, r->kernels, r->against_source, r->n_prompts, (long long)r->n_positions);
  else
    fprintf(out, "pasada verify: %s, backend %s (kernels %s) against backend %s: %d prompts, %lld positions\n",
            r->model_name, r->backend, r->kernels, r->against_backend, r->n_prompts, (long long)r->n_positions);
  if (!r->against) {
    fprintf(out, "\nhidden state after each layer: relative error max_i |fast - ref| / max_i |ref| over tokens\n");
    fprintf(out, "%6s  %12s  %12s\n", "layer", "mean", "max");
    fprintf(out, "%6s  %12.3g  %12.3g\n", "tol", t->hidden_mean, t->hidden_max);
    for (int32_t l = 0; l < r->n_layer; l++)
      fprintf(out, "%6d  %12.3e  %12.3e%s\n", l, r->layer_mean[l], r->layer_max[l],
              l == r->first_bad_layer ? "  <- first above tolerance" : "");
  }
  fprintf(out, "\nlogits (%s || pasada)          value   tolerance\n", r->against ? "file" : "reference");
  fprintf(out, "  KL mean (nats)        %12.3e  %10.3g\n", r->kl_mean, t->kl_mean);
  fprintf(out, "  KL max (nats)         %12.3e  %10.3g   at position %d\n", r->kl_max, t->kl_max, r->kl_max_pos);
  fprintf(out, "  top-1 agreement       %11.2f%%  %9.2f%%\n", 100 * r->top1, 100 * t->top1);
  fprintf(out, "  max |logit diff|      %12.3e  %10s\n", r->max_abs, "-");
  fprintf(out, "\n%s%s%s (%.1f s)\n", r->pass ? "PASS" : "FAIL", r->pass ? "" : ": ", r->failure, r->seconds);
}

/* A number, or null when it is not finite (JSON has no infinity). */
static void add_num(cJSON *o, const char *key, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, key, v);
  else
    cJSON_AddNullToObject(o, key);
}

int pa_verify_print_json(FILE *out, const pa_verify_result *r) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return -1;
  cJSON_AddStringToObject(o, "model", r->model_name);
  cJSON_AddStringToObject(o, "backend", r->backend);
  cJSON_AddStringToObject(o, "kernels", r->kernels);
  cJSON_AddStringToObject(o, "against", r->against ? r->against_source : r->against_backend);
  cJSON_AddNumberToObject(o, "prompts", r->n_prompts);
  cJSON_AddNumberToObject(o, "positions", (double)r->n_positions);
  if (!r->against) {
    cJSON *layers = cJSON_AddArrayToObject(o, "layers");
    for (int32_t l = 0; layers && l < r->n_layer; l++) {
      cJSON *e = cJSON_CreateObject();
      if (!e) break;
      cJSON_AddNumberToObject(e, "layer", l);
      add_num(e, "max_rel_err", r->layer_max[l]);
      add_num(e, "mean_rel_err", r->layer_mean[l]);
      cJSON_AddItemToArray(layers, e);
    }
  }
  cJSON *lg = cJSON_AddObjectToObject(o, "logits");
  if (lg) {
    add_num(lg, "kl_mean", r->kl_mean);
    add_num(lg, "kl_max", r->kl_max);
    cJSON_AddNumberToObject(lg, "kl_max_position", r->kl_max_pos);
    cJSON_AddNumberToObject(lg, "top1", r->top1);
    add_num(lg, "max_abs_diff", r->max_abs);
  }
  cJSON *tol = cJSON_AddObjectToObject(o, "tolerances");
  if (tol) {
    cJSON_AddNumberToObject(tol, "hidden_mean", r->tol.hidden_mean);
    cJSON_AddNumberToObject(tol, "hidden_max", r->tol.hidden_max);
    cJSON_AddNumberToObject(tol, "kl_mean", r->tol.kl_mean);
    cJSON_AddNumberToObject(tol, "kl_max", r->tol.kl_max);
    cJSON_AddNumberToObject(tol, "top1", r->tol.top1);
  }
  if (r->first_bad_layer >= 0) cJSON_AddNumberToObject(o, "first_bad_layer", r->first_bad_layer);
  cJSON_AddBoolToObject(o, "pass", r->pass);
  cJSON_AddStringToObject(o, "failure", r->failure);
  cJSON_AddNumberToObject(o, "seconds", r->seconds);
  char *s = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!s) return -1;
  fprintf(out, "%s\n", s);
  free(s);
  return 0;
}
