/* profile.c: `pasada profile` (profile.h), over the library's recorder
 * behind PA_PROF (runtime/profiler.c): the driver, which loads the model,
 * measures the machine's ceilings once (bench_ceilings.c), warms up, then
 * prefill (tokenize a built-in text, decode its first N tokens in batches)
 * and decode (sample, decode one token, N times), each phase timed on the
 * wall clock; and the results per (op, layer) and per op name: bytes moved
 * and FLOPs (a cost model of the forward pass in llama.c / gemma3.c /
 * layers.c / attention.c: the least traffic each op needs), achieved rates,
 * the time each would take at the ceilings, a verdict, and the gap. The
 * reports of the results (table, JSON, Chrome trace-event JSON, SVG) are
 * profile_report.c's. On a Vulkan device the ops are timed on the GPU
 * instead, per shader (profile_gpu.c), and the report shows those times
 * per phase. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cpu/cpu.h" /* PA_ROWS_PAR: when the CPU backend spreads row-wise ops */
#include "base/base.h"
#include "pasada.h"
#include "tools/profile_internal.h"

/* ==== op names and the cost model ==== */

const prof_op_info PROF_OPS[PA_OP_COUNT] = {
    [PA_OP_EMBED] = {"token_embd", "embed", 0},
    [PA_OP_ROPE_TABLE] = {"rope_table", "rope", 0},
    [PA_OP_QKV] = {"attn_qkv", "matmul", 1},
    [PA_OP_ATTENTION] = {"attention", "attention", 1},
    [PA_OP_O] = {"attn_output", "matmul", 1},
    [PA_OP_POST_ATTN_NORM] = {"post_attention_norm", "norm", ROWS},
    [PA_OP_ATTN_RESIDUAL] = {"attn_residual", "add", ROWS},
    [PA_OP_GATE_UP] = {"ffn_gate_up", "matmul", 1},
    [PA_OP_DOWN] = {"ffn_down", "matmul", 1},
    [PA_OP_POST_FFN_NORM] = {"post_ffw_norm", "norm", ROWS},
    [PA_OP_FFN_RESIDUAL] = {"ffn_residual", "add", ROWS},
    [PA_OP_MOE] = {"ffn_moe", "moe", 1},
    [PA_OP_PER_LAYER_INPUT] = {"per_layer_input", "per_layer", 1},
    [PA_OP_OUTPUT] = {"output", "matmul", 1},
    [PA_OP_TOKENIZE] = {"tokenize", "tokenization", 0},
    [PA_OP_SAMPLE] = {"sample", "sampling", 0},
};

const char *const PROF_PHASE_NAME[2] = {"prefill", "decode"};

void prof_op_label(char *buf, size_t cap, int op, int layer) {
  if (op == EV_STEP)
    snprintf(buf, cap, "pasada_decode");
  else if (op == EV_PHASE)
    snprintf(buf, cap, "phase");
  else if (layer >= 0)
    snprintf(buf, cap, "blk.%d.%s", layer, PROF_OPS[op].name);
  else
    snprintf(buf, cap, "%s", PROF_OPS[op].name);
}

/* The weight matrices an op multiplies by (q, k and v are one op, as are
 * gate and up with the activation); their number. */
static int matrices_of(const struct pa_model *m, int op, int layer, const pa_matrix *out[3]) {
  if (op == PA_OP_OUTPUT) {
    out[0] = &m->output;
    return 1;
  }
  if (layer < 0) return 0;
  const pa_layer *L = &m->layers[layer];
  switch (op) {
  case PA_OP_QKV: out[0] = &L->wq, out[1] = &L->wk, out[2] = &L->wv; return 3;
  case PA_OP_O: out[0] = &L->wo; return 1;
  case PA_OP_GATE_UP: out[0] = &L->w_gate, out[1] = &L->w_up; return 2;
  case PA_OP_DOWN: out[0] = &L->w_down; return 1;
  default: return 0;
  }
}

static const pa_matrix *matrix_of(const struct pa_model *m, int op, int layer) {
  const pa_matrix *mats[3];
  return matrices_of(m, op, layer, mats) ? mats[0] : NULL;
}

static bool int8_dot(pa_type t) {
  const pa_type_traits *tr = pa_type_get((uint32_t)t);
  pa_type d = tr ? tr->vec_dot_type : PA_TYPE_F32;
  return d == PA_TYPE_Q8_0 || d == PA_TYPE_Q8_1 || d == PA_TYPE_Q8_K;
}

/* Bytes an op must move at least (weights once per call, activations read
 * and written once, the KV rows attention reads) and its floating-point
 * operations (a multiply-add is 2; element-wise ops counted per element). */
static void op_cost(const struct pa_model *m, int op, int layer, const prof_slot *s, double text_bytes,
                    double kv_elt, double *bytes, double *flops) {
  const pa_hparams *hp = &m->hp;
  const pa_attn_shape a = pa_layer_attn(hp, layer >= 0 && layer < hp->n_layer ? layer : 0);
  double E = hp->n_embd, hd = a.head_dim, hdv = a.head_dim_v;
  double Q = hp->n_head * hd, K = a.n_head_kv * hd, VV = a.n_head_kv * hdv, O = hp->n_head * hdv;
  double F = hp->n_ff, half = hp->rope_dim / 2, bases = hp->sliding_window ? 2 : 1;
  double T = (double)s->tokens, C = (double)s->calls;
  double b = 0, f = 0;
  const pa_matrix *mats[3];
  const int n_mats = matrices_of(m, op, layer, mats);
  if (n_mats > 0) { /* the activations read once, each output written once */
    b = T * (double)mats[0]->cols * 4;
    for (int i = 0; i < n_mats; i++) {
      double rows = (double)mats[i]->rows, cols = (double)mats[i]->cols;
      b += C * (double)pa_row_size(mats[i]->type, mats[i]->cols) * rows + T * rows * 4;
      f += 2 * rows * cols * T;
    }
    if (op == PA_OP_GATE_UP) /* silu(g)*u: ~6 ops per element; gelu_tanh(g)*u: ~10 */
      f += T * F * (hp->act == PA_ACT_SILU ? 6 : 10);
  } else {
    switch (op) {
    case PA_OP_EMBED:
      b = T * ((double)pa_row_size(m->tok_embd.type, m->tok_embd.cols) + E * 4);
      f = T * E;
      break;
    case PA_OP_ROPE_TABLE: /* a power, a product, a cosine and a sine per entry */
      b = T * half * 8 * bases;
      f = T * half * 4 * bases;
      break;
    case PA_OP_POST_ATTN_NORM:
    case PA_OP_POST_FFN_NORM:
      b = T * E * 8 + C * E * 4;
      f = 4 * T * E;
      break;
    case PA_OP_ATTENTION: /* KV rows read once (kv_elt bytes a value); q read, output written */
      b = s->span * (K + VV) * kv_elt + T * (Q + O) * 4;
      f = s->span * 2 * hp->n_head * (hd + hdv);
      break;
    case PA_OP_ATTN_RESIDUAL:
    case PA_OP_FFN_RESIDUAL:
      b = T * E * 12;
      f = T * E;
      break;
    case PA_OP_MOE: { /* the router, and each expert some token chose read once per call */
      const pa_layer *L = &m->layers[layer];
      const double Fe = hp->n_ff_exp, used = hp->n_expert_used;
      const double chosen = T * used / C < hp->n_expert ? T * used / C : hp->n_expert; /* per call */
      const double expert = (double)pa_matrix_bytes(&L->exp_gate[0]) + (double)pa_matrix_bytes(&L->exp_up[0]) +
                            (double)pa_matrix_bytes(&L->exp_down[0]);
      b = C * ((double)pa_matrix_bytes(&L->router) + chosen * expert) + T * E * 12;
      f = 2 * T * E * hp->n_expert + T * used * (6 * E * Fe + 6 * Fe + 2 * E);
      break;
    }
    case PA_OP_TOKENIZE: /* no floating point: only its bytes */
      b = text_bytes + T * 4;
      break;
    case PA_OP_SAMPLE: /* reads the logits; its work is sorting, not counted as FLOPs */
      b = C * hp->n_vocab * 4;
      break;
    default: break;
    }
  }
  *bytes = b;
  *flops = f;
}

/* ==== results ==== */

void pa_profile_default_params(pa_profile_params *p) {
  memset(p, 0, sizeof *p);
  p->n_prompt = 512;
  p->n_gen = 64;
  p->n_batch = 512;
  p->n_parallel = 1;
  p->seed = 1234;
  p->top = 20;
  p->progress = true;
}

void pa_profile_free(pa_profile_result *r) {
  if (!r) return;
  for (int i = 0; i < 2; i++) {
    free(r->ph[i].rows);
    free(r->ph[i].names);
    free(r->ph[i].layer_s);
  }
  free(r->ev);
  pa_profile_gpu_free(r->gpu);
  free(r);
}

double pa_profile_coverage(const pa_profile_result *r, int phase) {
  const prof_phase *ph = &r->ph[phase];
  return ph->wall_s > 0 ? ph->ops_s / ph->wall_s : 0;
}

static double max2(double a, double b) { return a > b ? a : b; }

/* memory- or compute-bound: within FAR_BELOW of the nearer ceiling (the one
 * that takes longer), named after it. Further from both: overhead-bound when
 * the op is tiny (under TINY_CALL a call), does no counted FLOPs, or leaves
 * the threads idle at its barriers half the time; otherwise compute-bound
 * (its own instructions are the limit: slow code, not the memory). */
static const char *verdict_of(const prof_row *w, int n_threads) {
  if (w->time_s <= 0) return "-";
  if (w->roof >= FAR_BELOW * w->time_s) return w->t_mem >= w->t_comp ? "memory" : "compute";
  double per_call = w->calls > 0 ? w->time_s / (double)w->calls : w->time_s;
  double idle = w->idle_s / (w->time_s * n_threads);
  if (per_call < TINY_CALL || w->flops <= 0 || idle >= 0.5) return "overhead";
  return "compute";
}

/* the seconds an op would take at the ceilings; ops on the calling thread
 * alone get one thread's share of them */
static void apply_ceilings(const pa_profile_result *r, const struct pa_model *m, prof_row *w, bool parallel) {
  if (!r->have_ceilings) return;
  double share = parallel ? 1.0 : 1.0 / r->ceil.n_threads;
  double bw = r->ceil.read_gbs * 1e9 * share, fma = r->ceil.fma_gflops * 1e9 * share;
  double i8 = r->ceil.int8_gops * 1e9 * share;
  const pa_matrix *mat = w->op >= 0 ? matrix_of(m, w->op, w->layer) : NULL;
  double comp = mat && int8_dot(mat->type) && i8 > 0 ? i8 : fma;
  w->t_mem = bw > 0 ? w->bytes / bw : 0;
  w->t_comp = comp > 0 ? w->flops / comp : 0;
  w->roof = max2(w->t_mem, w->t_comp);
  w->gap = w->time_s - w->roof;
  w->verdict = verdict_of(w, r->n_threads);
}

static int cmp_rows(const void *a, const void *b) {
  const prof_row *x = a, *y = b;
  return x->sort_key < y->sort_key ? 1 : x->sort_key > y->sort_key ? -1 : 0;
}

/* The profiler's own costs, measured in-process after the run on a scratch
 * profiler: one op record (a clock read before the op, pa_prof_record
 * after), and one clock read (the thread pool reads the clock twice on the
 * caller and once on each worker per run while timing). */
static void calibrate(pa_profile_result *r, const struct pa_model *m) {
  enum { BATCHES = 20, K = 1000 }; /* the fastest batch: a preemption does not count */
  struct pa_profiler scratch = {.model = m, .n_layer = r->n_layer};
  scratch.slots = calloc((size_t)2 * PA_OP_COUNT * (size_t)(r->n_layer + 1), sizeof(prof_slot));
  if (!scratch.slots || r->n_layer < 1) {
    free(scratch.slots);
    return;
  }
  struct pa_context fake;
  memset(&fake, 0, sizeof fake);
  fake.prof = &scratch;
  int64_t best_rec = INT64_MAX, best_clk = INT64_MAX;
  volatile int64_t sink = 0;
  for (int bt = 0; bt < BATCHES; bt++) {
    int64_t t0 = pa_prof_now_ns();
    for (int k = 0; k < K; k++) {
      int64_t t = pa_prof_now_ns();
      pa_prof_record(&fake, NULL, PA_OP_POST_ATTN_NORM, k % r->n_layer, 1, t);
    }
    int64_t t1 = pa_prof_now_ns();
    for (int k = 0; k < K; k++) sink += pa_prof_now_ns();
    int64_t t2 = pa_prof_now_ns();
    if (t1 - t0 < best_rec) best_rec = t1 - t0;
    if (t2 - t1 < best_clk) best_clk = t2 - t1;
  }
  (void)sink;
  r->record_ns = (double)best_rec / K;
  r->clock_ns = (double)best_clk / K;
  free(scratch.slots);
}

static int build_phase(pa_profile_result *r, const struct pa_model *m, struct pa_profiler *pr, int phase,
                       double text_bytes) {
  prof_phase *ph = &r->ph[phase];
  int L = r->n_layer;
  ph->rows = calloc((size_t)PA_OP_COUNT * (size_t)(L + 1), sizeof(prof_row));
  ph->names = calloc(PA_OP_COUNT + 1, sizeof(prof_row));
  ph->layer_s = calloc((size_t)(L > 0 ? L : 1), sizeof(double));
  if (!ph->rows || !ph->names || !ph->layer_s) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  for (int op = 0; op < PA_OP_COUNT; op++) {
    prof_row agg = {0};
    for (int l = -1; l < L; l++) {
      const prof_slot *s = pa_prof_slot(pr, phase, op, l);
      if (!s->calls) continue;
      prof_row *w = &ph->rows[ph->n_rows++];
      prof_op_label(w->name, sizeof w->name, op, l);
      w->kind = PROF_OPS[op].kind;
      w->op = op;
      w->layer = l;
      w->calls = s->calls;
      w->tokens = s->tokens;
      w->time_s = (double)s->ns * 1e-9;
      w->idle_s = (double)s->idle_ns * 1e-9;
      op_cost(m, op, l, s, text_bytes, r->kv_elt, &w->bytes, &w->flops);
      apply_ceilings(r, m, w,
                     PROF_OPS[op].parallel == 1 || (PROF_OPS[op].parallel == ROWS && w->tokens >= PA_ROWS_PAR * w->calls));
      ph->ops_s += w->time_s;
      ph->idle_s += w->idle_s;
      if (l >= 0) ph->layer_s[l] += w->time_s;
      agg.calls += w->calls;
      agg.tokens += w->tokens;
      agg.time_s += w->time_s;
      agg.idle_s += w->idle_s;
      agg.bytes += w->bytes;
      agg.flops += w->flops;
      agg.t_mem += w->t_mem;
      agg.t_comp += w->t_comp;
      agg.roof += w->roof;
      agg.gap += w->gap;
    }
    if (!agg.calls) continue;
    snprintf(agg.name, sizeof agg.name, "%s", PROF_OPS[op].name);
    agg.kind = PROF_OPS[op].kind;
    agg.op = op;
    agg.layer = -1;
    if (r->have_ceilings) agg.verdict = verdict_of(&agg, r->n_threads);
    ph->names[ph->n_names++] = agg;
  }
  prof_row *ov = &ph->names[ph->n_names++];
  snprintf(ov->name, sizeof ov->name, "(engine overhead)");
  ov->kind = "overhead";
  ov->op = -1;
  ov->layer = -1;
  ov->calls = ph->decode_calls;
  ov->tokens = ph->tokens;
  ov->time_s = ph->wall_s - ph->ops_s;
  ov->gap = ov->time_s;
  if (r->have_ceilings) ov->verdict = "overhead";
  for (int k = 0; k < ph->n_rows; k++) { /* the profiler's own share of the wall time */
    const prof_row *w = &ph->rows[k];
    bool pool = PROF_OPS[w->op].parallel && r->n_threads > 1;
    ph->self_s += (double)w->calls * (r->record_ns + (pool ? 3 * r->clock_ns : 0)) * 1e-9;
  }
  for (int k = 0; k < ph->n_rows; k++) ph->rows[k].sort_key = r->have_ceilings ? ph->rows[k].gap : ph->rows[k].time_s;
  for (int k = 0; k < ph->n_names; k++)
    ph->names[k].sort_key = r->have_ceilings ? ph->names[k].gap : ph->names[k].time_s;
  qsort(ph->rows, (size_t)ph->n_rows, sizeof(prof_row), cmp_rows);
  qsort(ph->names, (size_t)ph->n_names, sizeof(prof_row), cmp_rows);
  return PASADA_OK;
}

/* ==== the driver ==== */

#define PROGRESS(p, ...)                        \
  do {                                          \
    if ((p)->progress) {                        \
      fprintf(stderr, "profile: " __VA_ARGS__); \
      fflush(stderr);                           \
    }                                           \
  } while (0)

/* The prompt: ordinary English prose, repeated as often as -p needs. */
static const char PARAGRAPH[] =
    "The lighthouse keeper climbed the narrow stairs every evening at dusk, counting the steps "
    "as her father had taught her: one hundred and twelve, never more and never fewer. From the "
    "lamp room she could see the fishing boats returning to the harbour, their sails patched "
    "with canvas of every colour, and beyond them the grey line where the sea met the sky. She "
    "trimmed the wick, polished the great lens until it shone, and wrote in the log the wind, "
    "the weather and the names of the ships that passed in the night.\n\n";

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* A model on a Vulkan device ("vulkan", "vulkan:N"; not split with the CPU:
 * "vulkan:N/L") is timed per shader on the GPU: no CPU probes, no host op
 * timers. */
static bool vulkan_named(const pa_profile_params *p) {
  return p->backend && !strncmp(p->backend, "vulkan", 6) && !strchr(p->backend, '/');
}
static const char NO_GPU_TRACE[] = "--trace: on a Vulkan device the ops are timed on the GPU, per shader, not one "
                                   "by one on the host: there is no op trace to write";

static int check_params(const pa_profile_params *p) {
  if (!p->model_path) return pa_error(PASADA_ERR_ARG, "no model given (-m)");
  if (p->n_prompt < 1) return pa_error(PASADA_ERR_ARG, "the prompt needs at least 1 token (-p)");
  if (p->n_gen < 0) return pa_error(PASADA_ERR_ARG, "negative token count (-n)");
  if (p->n_batch < 1) return pa_error(PASADA_ERR_ARG, "batch size must be at least 1");
  if (p->n_parallel < 1 || p->n_parallel > 1024)
    return pa_error(PASADA_ERR_ARG, "parallel sequence count %d is out of range [1, 1024]", p->n_parallel);
  if (p->n_threads < 0 || p->n_threads > 256)
    return pa_error(PASADA_ERR_ARG, "thread count %d is out of range [1, 256]", p->n_threads);
  if (p->keep_events && vulkan_named(p)) return pa_error(PASADA_ERR_ARG, "%s", NO_GPU_TRACE);
  return PASADA_OK;
}

typedef struct {
  pasada_model *model;
  pasada_context *ctx;
  pasada_sampler *sampler;
  int32_t *tok, *pos, *seq;
  int32_t *text_tokens;
  char *text;
} run_state;

static int decode_tokens(run_state *st, int32_t n_batch, const int32_t *tokens, int32_t n, int32_t start,
                         int32_t seq, struct pa_profiler *prof) {
  for (int32_t i = 0; i < n; i += n_batch) {
    int32_t m = n - i < n_batch ? n - i : n_batch;
    for (int32_t j = 0; j < m; j++) {
      st->tok[j] = tokens[i + j];
      st->pos[j] = start + i + j;
      st->seq[j] = seq;
    }
    pasada_batch b = {.n_tokens = m, .token = st->tok, .pos = st->pos, .seq_id = st->seq};
    int64_t t0 = pa_prof_now_ns();
    int rc = pasada_decode(st->ctx, &b);
    if (rc) return rc;
    if (prof) pa_prof_push_event(prof, t0, pa_prof_now_ns(), 0, m, EV_STEP, -1);
  }
  return PASADA_OK;
}

int pa_profile_run(const pa_profile_params *p, pa_profile_result **out) {
  *out = NULL;
  int rc = check_params(p);
  if (rc) return rc;
  pa_profile_result *r = calloc(1, sizeof *r);
  if (!r) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  r->p = *p;
  int32_t n_threads = p->n_threads;
  if (n_threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    n_threads = n > 0 ? (int32_t)(n > 256 ? 256 : n) : 1;
  }
  r->n_threads = n_threads;
  r->cpu_path = pa_cpu_describe();
  snprintf(r->model_name, sizeof r->model_name, "%s", base_name(p->model_path));

  run_state st = {0};
  struct pa_profiler *prof = NULL;
  int32_t *step_tok = NULL; /* --parallel: each sequence's next token */
  int8_t *all_logits = NULL;
  pa_bench_prober prober = {0}; /* holds the read buffer until the runs end */
  /* the probes' child, forked before the model is loaded (pa_bench_prober) */
  if (!p->skip_ceilings && !p->off && !vulkan_named(p)) pa_bench_prober_start(&prober, n_threads);
  pasada_model_params mp = pasada_model_default_params();
  mp.backend = p->backend;
  if ((rc = pasada_model_load(p->model_path, &mp, &st.model))) goto fail;
  const struct pa_model *m = st.model;
  snprintf(r->arch, sizeof r->arch, "%s", pasada_model_arch(st.model));
  r->n_layer = m->hp.n_layer;
  PROGRESS(p, "loaded %s (%s, %d layers)\n", p->model_path, r->arch, r->n_layer);
  snprintf(r->backend, sizeof r->backend, "%s", m->be->name);
  if (pa_backend_is_vulkan(m->be)) {
    if (!(r->gpu = calloc(1, sizeof *r->gpu))) {
      rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
      goto fail;
    }
    if ((rc = pa_vulkan_backend_info(m->be, &r->gpu->dev))) goto fail;
    if (p->keep_events) {
      rc = pa_error(PASADA_ERR_ARG, "%s", NO_GPU_TRACE);
      goto fail;
    }
    if (!p->off)
      PROGRESS(p, "on vulkan:%d, %s: each shader timed on the GPU (a timestamp after every command); no "
               "ceilings\n", r->gpu->dev.index, r->gpu->dev.name);
  }

  /* the probes run before the context's threads exist and before any
   * weight is touched */
  if (!p->skip_ceilings && !p->off && !r->gpu) {
    PROGRESS(p, "measuring this machine's ceilings once, on %d thread%s (read bandwidth, fp32 FMA, int8 dot)...\n",
             n_threads, n_threads > 1 ? "s" : "");
    if ((rc = pa_bench_prober_measure(&prober, n_threads, &r->ceil))) goto fail;
    r->have_ceilings = true;
    PROGRESS(p, "read %.1f GB/s, fp32 FMA %.1f GFLOP/s (%s), int8 dot %.1f GOP/s (%s)\n", r->ceil.read_gbs,
             r->ceil.fma_gflops, r->ceil.fma_isa, r->ceil.int8_gops, r->ceil.int8_isa);
  }

  int64_t need = (int64_t)p->n_prompt + p->n_gen + 1;
  if (need > (1 << 22)) {
    rc = pa_error(PASADA_ERR_ARG, "-p + -n = %lld positions is too many", (long long)need - 1);
    goto fail;
  }
  pasada_context_params cp = pasada_context_default_params();
  cp.n_ctx = (int32_t)need;
  const int32_t np = p->n_parallel;
  cp.n_seq_max = np;
  cp.kv_type = p->kv_type;
  cp.n_batch = p->n_prompt < p->n_batch ? p->n_prompt : p->n_batch;
  if (cp.n_batch < np) cp.n_batch = np;
  cp.n_threads = n_threads;
  if ((rc = pasada_context_create(st.model, &cp, &st.ctx))) goto fail;
  r->n_batch = cp.n_batch;
  r->n_ctx = pasada_context_n_ctx(st.ctx);
  {
    pasada_kv_stats kvs;
    pasada_kv_get_stats(st.ctx, &kvs);
    r->kv_type = pasada_kv_type_name(kvs.type);
    /* bytes a value, scales included (Q8: a float per position and head) */
    const pa_hparams *hp = &st.model->hp;
    double per_pos = 0; /* values of a position, every layer that stores them */
    for (int l = 0; l < hp->n_layer; l++) {
      if (hp->recurrent[l] || (hp->n_kv_shared > 0 && hp->kv_from[l] != l)) continue;
      const pa_attn_shape a = pa_layer_attn(hp, l);
      per_pos += (double)a.n_head_kv * (a.head_dim + a.head_dim_v);
    }
    r->kv_elt = kvs.n_blocks > 0 && per_pos > 0
                    ? (double)kvs.bytes / ((double)kvs.n_blocks * kvs.block_size * per_pos)
                    : 4;
  }
  int32_t n_vocab = pasada_model_n_vocab(st.model);
  pasada_sampler_params sp = pasada_sampler_default_params();
  sp.seed = p->seed;
  if ((rc = pasada_sampler_create(&sp, n_vocab, &st.sampler))) goto fail;
  st.tok = malloc((size_t)r->n_batch * sizeof(int32_t));
  st.pos = malloc((size_t)r->n_batch * sizeof(int32_t));
  st.seq = malloc((size_t)r->n_batch * sizeof(int32_t));
  step_tok = malloc((size_t)np * sizeof(int32_t));
  all_logits = malloc((size_t)np);
  if (!st.tok || !st.pos || !st.seq || !step_tok || !all_logits) {
    rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
    goto fail;
  }

  /* the text: about 1.1 x n_prompt tokens of the paragraph repeated (the
   * bytes per token measured on one copy), cut at a space, so tokenization
   * is timed on about the text the prompt needs */
  const pasada_tokenizer *tk = pasada_model_tokenizer(st.model);
  int32_t *probe = NULL;
  size_t n_probe = 0, plen = strlen(PARAGRAPH);
  if ((rc = pasada_tokenize(tk, PARAGRAPH, plen, false, false, &probe, &n_probe))) goto fail;
  pasada_text_free(probe);
  size_t want = (size_t)((double)p->n_prompt * (double)plen / (double)(n_probe ? n_probe : 1) * 1.1) + 32;
  st.text = malloc(want + plen + 1);
  if (!st.text) {
    rc = pa_error(PASADA_ERR_NOMEM, "out of memory for the prompt text");
    goto fail;
  }
  size_t text_len = 0;
  while (text_len < want) {
    memcpy(st.text + text_len, PARAGRAPH, plen);
    text_len += plen;
  }
  if (text_len > want) {
    text_len = want;
    while (text_len > 1 && st.text[text_len - 1] != ' ') text_len--;
  }
  st.text[text_len] = 0;
  double text_bytes = (double)text_len;

  /* warm-up, not timed: touches the weights (mapped lazily), the caches,
   * the threads and the sampler */
  {
    int32_t n_warm = p->n_prompt < 16 ? p->n_prompt : 16;
    if (n_warm > r->n_batch) n_warm = r->n_batch;
    int32_t *wt = NULL;
    size_t n_wt = 0;
    if ((rc = pasada_tokenize(tk, PARAGRAPH, plen, true, false, &wt, &n_wt))) goto fail;
    if ((int64_t)n_wt < n_warm) n_warm = (int32_t)n_wt;
    PROGRESS(p, "warm-up\n");
    rc = n_warm > 0 ? decode_tokens(&st, r->n_batch, wt, n_warm, 0, 0, NULL) : PASADA_OK;
    for (int32_t i = 0; !rc && i < 2 && n_warm > 0 && n_warm + i < r->n_ctx; i++) {
      int32_t t;
      if (pasada_sampler_sample(st.sampler, pasada_get_logits(st.ctx, -1), n_vocab, &t)) t = wt[0];
      rc = decode_tokens(&st, 1, &t, 1, n_warm + i, 0, NULL);
    }
    pasada_text_free(wt);
    if (rc) goto fail;
    pasada_seq_truncate(st.ctx, 0, 0);
    pasada_sampler_reset(st.sampler);
  }

  /* the profiler: slots, and the event buffer sized for every op of the run
   * (none on a GPU: the ops there are timed per shader) */
  if (!p->off && !r->gpu) {
    prof = calloc(1, sizeof *prof);
    if (!prof) {
      rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
      goto fail;
    }
    prof->model = m;
    prof->n_layer = r->n_layer;
    prof->slots = calloc((size_t)2 * PA_OP_COUNT * (size_t)(r->n_layer + 1), sizeof(prof_slot));
    if (!prof->slots) {
      rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
      goto fail;
    }
    if (p->keep_events) {
      size_t forwards = (size_t)(p->n_prompt + r->n_batch - 1) / (size_t)r->n_batch + (size_t)p->n_gen;
      /* (the other sequences' prefills are not recorded) */
      size_t per_forward = 6 + (size_t)r->n_layer * 20;
      prof->cap_ev = forwards * (per_forward + 1) + (size_t)p->n_gen + 4;
      prof->ev = malloc(prof->cap_ev * sizeof(prof_event));
      if (!prof->ev) {
        rc = pa_error(PASADA_ERR_NOMEM, "out of memory for %zu trace events", prof->cap_ev);
        goto fail;
      }
    }
  }

  /* ---- the run ---- */
  PROGRESS(p, "prefill: %d tokens in batches of %d%s\n", p->n_prompt, r->n_batch,
           p->off ? " (profiler off)" : "");
  pasada_context *ctx = st.ctx;
  if (prof) {
    ctx->prof = prof;
    pa_pool_set_timing(ctx->pool, true);
    prof->last_idle = pa_pool_idle_ns(ctx->pool);
  }
  if (r->gpu && !p->off && (rc = pa_profile_gpu_begin(r->gpu, ctx))) goto fail;
  int64_t T0 = pa_prof_now_ns();
  r->t_origin = T0;
  size_t n_text_tokens = 0;
  int64_t t = pa_prof_now_ns();
  rc = pasada_tokenize(tk, st.text, (size_t)text_bytes, true, false, &st.text_tokens, &n_text_tokens);
  if (!rc && prof) pa_prof_record(ctx, NULL, PA_OP_TOKENIZE, -1, (int32_t)n_text_tokens, t);
  if (!rc && r->gpu) r->gpu->ph[0].tokenize_s = (double)(pa_prof_now_ns() - t) * 1e-9;
  if (!rc && n_text_tokens == 0) rc = pa_error(PASADA_ERR_ARG, "the prompt text gave no tokens");
  /* sequence s (with --parallel) takes the tokens from s on */
  const size_t n_need = (size_t)p->n_prompt + (size_t)np - 1;
  if (!rc && n_text_tokens < n_need) { /* repeat the tokens */
    int32_t *more = realloc(st.text_tokens, n_need * sizeof(int32_t));
    if (!more) {
      rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
    } else {
      for (size_t i = n_text_tokens; i < n_need; i++) more[i] = more[i % n_text_tokens];
      st.text_tokens = more;
    }
  }
  if (!rc) rc = decode_tokens(&st, r->n_batch, st.text_tokens, p->n_prompt, 0, 0, prof);
  int64_t T1 = pa_prof_now_ns();
  if (!rc && r->gpu && !p->off) rc = pa_profile_gpu_end_phase(r->gpu, ctx, 0);
  if (prof) {
    pa_prof_push_event(prof, T0, T1, 0, p->n_prompt, EV_PHASE, -1);
    prof->phase = 1;
  }
  /* --parallel: the other sequences' prompts (shifted by one token each, so
   * no two are alike), prefilled with the profiler detached; then each
   * sequence samples its first token from its own logits */
  if (!rc && np > 1) {
    PROGRESS(p, "prefill of sequences 2..%d (%d tokens each, not timed)\n", np, p->n_prompt);
    ctx->prof = NULL;
    for (int32_t s = 0; !rc && s < np; s++) {
      if (s > 0) rc = decode_tokens(&st, r->n_batch, st.text_tokens + s, p->n_prompt, 0, s, NULL);
      if (!rc) pasada_sampler_sample(st.sampler, pasada_get_logits(ctx, -1), n_vocab, &step_tok[s]);
      if (!rc && step_tok[s] >= 0) pasada_sampler_accept(st.sampler, step_tok[s]);
    }
    ctx->prof = prof;
    if (prof) prof->last_idle = pa_pool_idle_ns(ctx->pool); /* the untimed prefills' idle is nobody's */
    if (r->gpu && !p->off) pa_profile_gpu_discard(ctx);    /* and their GPU time */
    memset(all_logits, 1, (size_t)np);
  }
  int64_t T1b = pa_prof_now_ns(); /* the decode phase starts here */
  if (!rc && p->n_gen)
    PROGRESS(p, "decode: %d steps, one token per step%s\n", p->n_gen,
             np > 1 ? " for each sequence (--parallel)" : "");
  /* each step samples every sequence's next token from the last step's
   * logits (one sequence: the prefill's at step 0; --parallel: sampled
   * above), then decodes one token per sequence in one forward pass */
  for (int32_t i = 0; !rc && i < p->n_gen; i++) {
    if (np == 1 || i > 0) {
      t = pa_prof_now_ns();
      for (int32_t s = 0; s < np; s++) {
        pasada_sampler_sample(st.sampler, pasada_get_logits(ctx, np == 1 ? -1 : s), n_vocab,
                              &step_tok[s]);
        if (step_tok[s] >= 0) pasada_sampler_accept(st.sampler, step_tok[s]);
      }
      if (prof) pa_prof_record(ctx, NULL, PA_OP_SAMPLE, -1, np, t);
      if (r->gpu) r->gpu->ph[1].sample_s += (double)(pa_prof_now_ns() - t) * 1e-9;
    }
    for (int32_t s = 0; s < np && !rc; s++) {
      if (step_tok[s] < 0) {
        char why[256];
        snprintf(why, sizeof why, "%s", pa_last_error());
        rc = pa_error(PASADA_ERR_ARG, "sampling failed: %s", why);
      }
      st.tok[s] = step_tok[s];
      st.pos[s] = p->n_prompt + i;
      st.seq[s] = s;
    }
    if (rc) break;
    pasada_batch b = {.n_tokens = np, .token = st.tok, .pos = st.pos, .seq_id = st.seq,
                      .want_logits = np > 1 ? all_logits : NULL};
    const int64_t t0 = pa_prof_now_ns();
    rc = pasada_decode(ctx, &b);
    if (!rc && prof) pa_prof_push_event(prof, t0, pa_prof_now_ns(), 0, np, EV_STEP, -1);
  }
  int64_t T2 = pa_prof_now_ns();
  if (prof) {
    if (p->n_gen) pa_prof_push_event(prof, T1b, T2, 0, p->n_gen * np, EV_PHASE, -1);
    ctx->prof = NULL;
    pa_pool_set_timing(ctx->pool, false);
  }
  if (r->gpu && !p->off) {
    if (!rc) rc = pa_profile_gpu_end_phase(r->gpu, ctx, 1);
    pa_profile_gpu_end(ctx);
  }
  if (rc) goto fail;

  r->ph[0].tokens = p->n_prompt;
  r->ph[0].decode_calls = (p->n_prompt + r->n_batch - 1) / r->n_batch;
  r->ph[0].wall_s = (double)(T1 - T0) * 1e-9;
  r->ph[1].tokens = p->n_gen * np;
  r->ph[1].decode_calls = p->n_gen;
  r->ph[1].wall_s = (double)(T2 - T1b) * 1e-9;
  if (prof) {
    calibrate(r, m);
    for (int ph = 0; ph < 2; ph++)
      if ((rc = build_phase(r, m, prof, ph, text_bytes))) goto fail;
    r->ev = prof->ev;
    r->n_ev = prof->n_ev;
    r->dropped = prof->dropped;
    prof->ev = NULL;
  }
  rc = PASADA_OK;
  *out = r;
  r = NULL;
fail:
  pa_bench_prober_close(&prober);
  if (prof) {
    free(prof->slots);
    free(prof->ev);
    free(prof);
  }
  free(st.tok);
  free(st.pos);
  free(st.seq);
  free(step_tok);
  free(all_logits);
  free(st.text);
  pasada_text_free(st.text_tokens);
  pasada_sampler_free(st.sampler);
  pasada_context_free(st.ctx);
  pasada_model_free(st.model);
  pa_profile_free(r);
  return rc;
}
