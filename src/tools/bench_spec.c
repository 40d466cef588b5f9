/* bench_spec.c: `pasada bench --lookup | --draft FILE | --mtp`: speculative
 * decoding against plain greedy decoding on one prompt (a code-editing one
 * by default, --text FILE otherwise, in the model's chat template when it
 * has one): generation tokens/s of each over interleaved repeats, the
 * acceptance rate, whether the tokens are identical, and the cost of one
 * forward pass of 1, 2, 3, 5, 9 and 17 tokens with every row's logits (a
 * verification of k drafts is a (k + 1)-token pass), which says what a
 * draft must win back. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "runtime/speculative.h"
#include "tools/bench.h"

static const char DEFAULT_TEXT[] =
    "Add type hints to every function in this Python module and return the whole module:\n\n"
    "import json\nimport os\n\n"
    "def load_config(path):\n    with open(path) as f:\n        return json.load(f)\n\n"
    "def save_config(path, config):\n    with open(path, \"w\") as f:\n"
    "        json.dump(config, f, indent=2)\n\n"
    "def merge(a, b):\n    out = dict(a)\n    for key, value in b.items():\n"
    "        if key in out and isinstance(out[key], dict) and isinstance(value, dict):\n"
    "            out[key] = merge(out[key], value)\n        else:\n            out[key] = value\n"
    "    return out\n\n"
    "def config_path(name):\n"
    "    return os.path.join(os.path.expanduser(\"~\"), \".config\", name + \".json\")\n";

static const int32_t COST_TOKENS[PA_BENCH_SPEC_COSTS] = {1, 2, 3, 5, 9, 17};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static pa_bench_rate rate_of(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return (pa_bench_rate){v[0], n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2, v[n - 1]};
}

typedef struct {
  pasada_model *model;
  pasada_context *ctx;
  pa_spec_draft *draft;
  pa_spec_mtp *mtp;
  int32_t n_vocab, n_prompt;
  int32_t *prompt, *hist, *out;
  float *scratch;
} bench_state;

/* The prompt's tokens: the text in the chat template when the model has one. */
static int prompt_tokens(bench_state *b, const char *text) {
  pasada_chat_template tmpl;
  char *rendered = NULL;
  pasada_chat_message msg = {"user", text};
  if (pasada_chat_detect(b->model, &tmpl) == PASADA_OK)
    pasada_chat_render_model(b->model, tmpl, &msg, 1, true, &rendered);
  const char *t = rendered ? rendered : text;
  const pasada_tokenizer *tok = pasada_model_tokenizer(b->model);
  int32_t *ids = NULL;
  size_t n = 0;
  int st = pasada_tokenize(tok, t, strlen(t), false, true, &ids, &n);
  pasada_text_free(rendered);
  if (st) return st;
  b->prompt = malloc((n + 1) * sizeof *b->prompt);
  if (!b->prompt) {
    pasada_text_free(ids);
    return pa_error(PASADA_ERR_NOMEM, "bench: out of memory");
  }
  const int32_t bos = pasada_tokenizer_bos(tok);
  b->n_prompt = 0;
  if (pasada_tokenizer_add_bos(tok) && bos >= 0 && (n == 0 || ids[0] != bos))
    b->prompt[b->n_prompt++] = bos;
  memcpy(b->prompt + b->n_prompt, ids, n * sizeof *ids);
  b->n_prompt += (int32_t)n;
  pasada_text_free(ids);
  return PASADA_OK;
}

static int decode(pasada_context *ctx, const int32_t *tokens, int32_t n, int32_t pos0, bool all) {
  int32_t pos[PA_SPEC_DRAFT_MAX + 1], seq[PA_SPEC_DRAFT_MAX + 1];
  int8_t want[PA_SPEC_DRAFT_MAX + 1];
  for (int32_t i = 0; i < n; i++) pos[i] = pos0 + i, seq[i] = 0, want[i] = all || i == n - 1;
  pasada_batch bt = {
      .n_tokens = n, .token = tokens, .pos = pos, .seq_id = seq, .want_logits = want};
  return pasada_decode(ctx, &bt);
}

/* Sequence 0 truncated to the prompt's first `keep` tokens, decoding again
 * what a model with recurrent layers dropped beyond its rollback states. */
static int back_to(bench_state *b, int32_t keep) {
  pasada_seq_truncate(b->ctx, 0, keep);
  for (int32_t done = pasada_seq_length(b->ctx, 0); done < keep;) {
    const int32_t len = keep - done < 256 ? keep - done : 256;
    int32_t pos[256], seq[256] = {0};
    for (int32_t i = 0; i < len; i++) pos[i] = done + i;
    pasada_batch bt = {.n_tokens = len, .token = b->prompt + done, .pos = pos, .seq_id = seq};
    const int st = pasada_decode(b->ctx, &bt);
    if (st) return st;
    done += len;
  }
  return PASADA_OK;
}

/* One greedy generation of n_gen tokens after the prompt (cached up to its
 * last token), plain (mode OFF) or speculative; the tokens in b->out. */
static int generate(bench_state *b, const pa_bench_spec_params *p, int mode, double *secs,
                    int64_t *drafted, int64_t *accepted, int64_t *steps) {
  pasada_sampler_params sp = pasada_sampler_default_params();
  sp.temp = 0, sp.repeat_last_n = 0;
  pasada_sampler *s = NULL;
  int st = pasada_sampler_create(&sp, b->n_vocab, &s);
  if (st) return st;
  const int32_t P = b->n_prompt;
  /* the MTP drafts from the prompt's hidden states: every one of them again */
  if (b->mtp) pa_spec_mtp_reset(b->mtp, 0);
  if ((st = back_to(b, b->mtp ? 0 : P - 1)) || (st = back_to(b, P - 1)) ||
      (st = decode(b->ctx, b->prompt + P - 1, 1, P - 1, false)))
    goto out;
  memcpy(b->hist, b->prompt, (size_t)P * sizeof *b->hist);
  const double t0 = now_s();
  int32_t n = 0, pos = P, tok;
  if ((st = pasada_sampler_sample(s, pasada_get_logits(b->ctx, -1), b->n_vocab, &tok))) goto out;
  pasada_sampler_accept(s, tok);
  b->out[n++] = tok;
  pa_spec_pace pace = {0};
  int32_t batch[PA_SPEC_DRAFT_MAX + 1], emitted[PA_SPEC_DRAFT_MAX + 1];
  while (n < p->n_gen) {
    b->hist[pos] = tok;
    int32_t k = mode == PA_SPEC_OFF ? 0 : pa_spec_pace_next(&pace, p->draft_max);
    if (k > p->n_gen - n - 1) k = p->n_gen - n - 1;
    int32_t m = 0;
    if (k > 0 && mode == PA_SPEC_LOOKUP)
      m = pa_spec_lookup(b->hist, pos + 1, p->lookup_ngram, 1, k, batch + 1);
    else if (k > 0 && mode == PA_SPEC_MTP &&
             (m = pa_spec_mtp_propose(b->mtp, 0, b->hist, pos + 1, k, true, batch + 1, NULL)) < 0) {
      st = PASADA_ERR_ARG;
      goto out;
    } else if (k > 0 && mode == PA_SPEC_DRAFT &&
               (m = pa_spec_draft_propose(b->draft, 0, b->hist, pos + 1, k, true, batch + 1,
                                          NULL)) < 0) {
      st = PASADA_ERR_ARG;
      goto out;
    }
    batch[0] = tok;
    if ((st = decode(b->ctx, batch, m + 1, pos, true))) goto out;
    int32_t n_out, n_acc;
    if ((st = pa_spec_verify(b->ctx, 0, s, NULL, batch + 1, m, NULL, b->n_vocab, b->scratch,
                             p->n_gen - n, emitted, &n_out, &n_acc)))
      goto out;
    pa_spec_pace_update(&pace, m, n_acc, p->draft_max);
    *drafted += n_out < m ? n_out : m, *accepted += n_acc, *steps += 1; /* drafts judged */
    for (int32_t i = 0; i < n_out; i++) b->out[n++] = emitted[i];
    memcpy(b->hist + pos + 1, batch + 1, (size_t)(n_out - 1) * sizeof *b->hist);
    pos += n_out;
    pasada_seq_truncate(b->ctx, 0, pos);
    if (pasada_seq_length(b->ctx, 0) != pos) {
      st = pa_error(PASADA_ERR_UNSUPPORTED,
                    "bench: rolling the rejected drafts back lost the sequence");
      goto out;
    }
    tok = emitted[n_out - 1];
  }
  *secs = now_s() - t0;
out:
  pasada_sampler_free(s);
  return st;
}

/* Milliseconds of one n-token pass with every row's logits at the prompt's end. */
static int verify_cost(bench_state *b, int32_t n, double *ms) {
  double t[7];
  for (int r = 0; r < 7; r++) {
    const double t0 = now_s();
    int st = decode(b->ctx, b->prompt, n, b->n_prompt, true);
    if (st) return st;
    t[r] = (now_s() - t0) * 1e3;
    if ((st = back_to(b, b->n_prompt))) return st;
  }
  *ms = rate_of(t, 7).median;
  return PASADA_OK;
}

int pa_bench_spec_run(const pa_bench_spec_params *p, pa_bench_spec_result *r) {
  *r = (pa_bench_spec_result){0};
  bench_state b = {0};
  char *text = NULL;
  double *plain = calloc((size_t)p->repeats, sizeof *plain);
  double *spec = calloc((size_t)p->repeats, sizeof *spec);
  int32_t *first = NULL;
  int st = plain && spec ? PASADA_OK : pa_error(PASADA_ERR_NOMEM, "bench: out of memory");
  pasada_model_params mp = pasada_model_default_params();
  mp.backend = p->backend;
  if (!st) st = pasada_model_load(p->model_path, &mp, &b.model);
  if (!st && p->text_path) {
    FILE *f = fopen(p->text_path, "rb");
    if (!f) st = pa_error(PASADA_ERR_IO, "bench: cannot open %s", p->text_path);
    long len = f && !fseek(f, 0, SEEK_END) ? ftell(f) : -1;
    if (f && len >= 0 && !fseek(f, 0, SEEK_SET) && (text = malloc((size_t)len + 1)) &&
        fread(text, 1, (size_t)len, f) == (size_t)len)
      text[len] = 0;
    else if (!st)
      st = pa_error(PASADA_ERR_IO, "bench: cannot read %s", p->text_path);
    if (f) fclose(f);
  }
  if (!st) st = prompt_tokens(&b, text ? text : DEFAULT_TEXT);
  const int32_t n_ctx = b.n_prompt + p->n_gen + PA_SPEC_DRAFT_MAX + 32;
  if (!st) {
    pasada_context_params cp = pasada_context_default_params();
    cp.n_ctx = n_ctx, cp.n_seq_max = 1, cp.n_threads = p->n_threads, cp.kv_type = p->kv_type;
    cp.n_rollback = pa_spec_rollback_states(p->draft_max); /* a recurrent model's verifications */
    st = pasada_context_create(b.model, &cp, &b.ctx);
  }
  if (!st && p->mode == PA_SPEC_DRAFT) {
    pasada_sampler_params sp = pasada_sampler_default_params();
    sp.seed = 1;
    st = pa_spec_draft_open(p->draft_path, b.model, &mp, 1, n_ctx, p->n_threads, &sp, &b.draft);
  }
  if (!st && p->mode == PA_SPEC_MTP) {
    pasada_sampler_params sp = pasada_sampler_default_params();
    sp.seed = 1;
    st = pa_spec_mtp_open(b.ctx, 1, n_ctx, p->n_threads, &sp, &b.mtp);
  }
  if (!st) {
    b.n_vocab = pasada_model_n_vocab(b.model);
    b.hist = malloc((size_t)n_ctx * sizeof *b.hist);
    b.out = malloc((size_t)(p->n_gen + PA_SPEC_DRAFT_MAX + 1) * sizeof *b.out);
    first = malloc((size_t)(p->n_gen + 1) * sizeof *first);
    b.scratch = malloc((size_t)b.n_vocab * sizeof *b.scratch);
    if (!b.hist || !b.out || !first || !b.scratch)
      st = pa_error(PASADA_ERR_NOMEM, "bench: out of memory");
  }
  /* the prompt once, then the pass costs and the interleaved runs */
  if (!st) st = back_to(&b, b.n_prompt);
  r->n_prompt = b.n_prompt;
  for (int i = 0; !st && i < PA_BENCH_SPEC_COSTS && COST_TOKENS[i] <= b.n_prompt; i++) {
    r->cost_tokens[i] = COST_TOKENS[i];
    st = verify_cost(&b, COST_TOKENS[i], &r->cost_ms[i]);
    r->n_costs = i + 1;
  }
  r->identical = true;
  for (int rep = 0; !st && rep < p->repeats; rep++) {
    int64_t d = 0, a = 0, steps = 0, d2 = 0, a2 = 0, s2 = 0;
    double secs = 0;
    if (p->progress) fprintf(stderr, "pasada bench: repeat %d of %d\n", rep + 1, p->repeats);
    if ((st = generate(&b, p, PA_SPEC_OFF, &secs, &d2, &a2, &s2))) break;
    plain[rep] = p->n_gen / secs;
    if (rep == 0) memcpy(first, b.out, (size_t)p->n_gen * sizeof *first);
    if ((st = generate(&b, p, p->mode, &secs, &d, &a, &steps))) break;
    spec[rep] = p->n_gen / secs;
    r->identical = r->identical && !memcmp(first, b.out, (size_t)p->n_gen * sizeof *first);
    r->drafted += d, r->accepted += a, r->steps += steps;
  }
  if (!st) {
    r->plain = rate_of(plain, p->repeats);
    r->spec = rate_of(spec, p->repeats);
  }
  pa_spec_draft_free(b.draft);
  pa_spec_mtp_free(b.mtp);
  pasada_context_free(b.ctx);
  pasada_model_free(b.model);
  free(b.prompt), free(b.hist), free(b.out), free(b.scratch), free(first), free(text);
  free(plain), free(spec);
  return st;
}

void pa_bench_spec_print(FILE *f, const pa_bench_spec_params *p, const pa_bench_spec_result *r,
                         bool json) {
  const double acc = r->drafted ? (double)r->accepted / (double)r->drafted : 0;
  const char *mode = pa_spec_mode_name((pa_spec_mode)p->mode);
  if (json) {
    fprintf(f,
            "{\"speculative\": {\"model\": \"%s\", \"mode\": \"%s\", \"draft\": %s%s%s, "
            "\"draft_max\": %d, \"lookup_ngram\": %d, \"threads\": %d, \"prompt_tokens\": %d, "
            "\"gen_tokens\": %d, \"repeats\": %d,\n  \"plain_tok_s\": {\"min\": %.2f, \"median\": "
            "%.2f, \"max\": %.2f},\n  \"spec_tok_s\": {\"min\": %.2f, \"median\": %.2f, \"max\": "
            "%.2f},\n  \"speedup\": %.3f, \"acceptance\": %.4f, \"drafted\": %lld, \"accepted\": "
            "%lld, \"steps\": %lld, \"identical\": %s,\n  \"verify_cost\": [",
            p->model_path, mode, p->draft_path ? "\"" : "", p->draft_path ? p->draft_path : "null",
            p->draft_path ? "\"" : "", p->draft_max, p->lookup_ngram, p->n_threads, r->n_prompt,
            p->n_gen, p->repeats, r->plain.min, r->plain.median, r->plain.max, r->spec.min,
            r->spec.median, r->spec.max, r->plain.median > 0 ? r->spec.median / r->plain.median : 0,
            acc, (long long)r->drafted, (long long)r->accepted, (long long)r->steps,
            r->identical ? "true" : "false");
    for (int i = 0; i < r->n_costs; i++)
      fprintf(f, "%s{\"tokens\": %d, \"ms\": %.3f, \"vs_one\": %.3f}", i ? ", " : "",
              r->cost_tokens[i], r->cost_ms[i], r->cost_ms[i] / r->cost_ms[0]);
    fprintf(f, "]}}\n");
    return;
  }
  fprintf(f,
          "speculative decoding: %s%s%s, draft-max %d, prompt %d tokens, %d generated (greedy), "
          "%d repeats, %d threads\n",
          mode, p->draft_path ? " " : "", p->draft_path ? p->draft_path : "", p->draft_max,
          r->n_prompt, p->n_gen, p->repeats, p->n_threads);
  fprintf(f, "pass cost (every row's logits):");
  for (int i = 0; i < r->n_costs; i++)
    fprintf(f, "  %d tok %.2f ms (%.2fx)", r->cost_tokens[i], r->cost_ms[i],
            r->cost_ms[i] / r->cost_ms[0]);
  fprintf(f, "\n%-10s %8s %8s %8s tok/s\n", "", "min", "median", "max");
  fprintf(f, "%-10s %8.1f %8.1f %8.1f\n", "plain", r->plain.min, r->plain.median, r->plain.max);
  fprintf(f, "%-10s %8.1f %8.1f %8.1f\n", mode, r->spec.min, r->spec.median, r->spec.max);
  fprintf(f,
          "speed-up %.2fx, acceptance %.0f%% (%lld drafted, %lld accepted, %lld steps), "
          "output identical: %s\n",
          r->plain.median > 0 ? r->spec.median / r->plain.median : 0, acc * 100,
          (long long)r->drafted, (long long)r->accepted, (long long)r->steps,
          r->identical ? "yes" : "NO");
}
