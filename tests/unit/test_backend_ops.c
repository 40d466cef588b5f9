/* test_backend_ops: the backend conformance suite. Every op of backend.h
 * on a backend under test against the reference backend ("ref"), on fresh
 * random inputs and weights of every tensor type, for batches of 1, 5 and
 * 19 tokens and KV caches of every type, with a tolerance per op:
 *   - upload / download, embedding lookup, RMS norm, residual add: exact
 *     (the same float operations in every table; a GPU backend's RMS norm
 *     within 1e-6: it sums the squares in float);
 *   - attention over the cache (the same K and V written into both caches;
 *     windowed too): within 2e-6 of the largest output (the SIMD tables'
 *     exponentials and float sums differ from the plain ones in the last
 *     bits; measured worst 2.4e-7), 1e-4 on a Q8 cache (those bits can move
 *     a weight across an edge of its 16-bit step; measured worst 1.4e-5);
 *     scores soft-capped too (Gemma 2);
 *   - matrix products with each fusion (input norm, biases, head norms,
 *     RoPE, KV store, gates, residual adds) and the logits (soft-capped
 *     too): within a bound
 *     per weight type (TOL_MM below) of the largest reference output, as
 *     a fast backend rounds activations to 8 bits (or to F16 for F16 and
 *     BF16 weights);
 *   - the final hidden states (the output norm of chosen rows, for
 *     embeddings): as the RMS norm.
 *   - the mixture-of-experts op (5 to 8 experts, 2 or 3 per token, an F32
 *     router, experts of the weight type 96 or 256 wide, renormalised or
 *     not, both gates, the GELU one with gemma4's router input norm and
 *     expert scales; once per weight type, every third type at
 *     PASADA_TEST_SCALE below 1): three times the products' bound (two products in a
 *     row, summed over the experts; measured worst 0.04 of the largest
 *     output, on cpu:avx512); the router runs the exact product on every host
 *     backend, so both sides choose the same experts; and gpt-oss's form
 *     of it: biases on the router and every expert, the clamped SwiGLU
 *     (biases large enough that both clamps bite);
 *   - attention with sinks (gpt-oss: a logit per head in the softmax's
 *     denominator), windowed too: as attention;
 *   - the linear-attention ops (Gated DeltaNet's delta_net in two shapes,
 *     with state copies between slots and a restarted sequence): within
 *     1e-4 of the largest output (the host backends sum in double, a GPU
 *     in float; measured worst 8e-7 on lavapipe); sigmoid_mul within 1e-6;
 *   - the per-layer inputs (gemma4): per_layer_embed exact (the token
 *     table's rows of every weight type, read on the host everywhere; add
 *     and scale in float); gelu_mul (a 37-wide gate times a slice of rows
 *     555 apart) within 1e-6 (gelu_tanh's SIMD tables);
 *   - YaRN: a third of the extras models take their RoPE factors and
 *     attention factor from pa_model_yarn_factors instead of random ones.
 * Inputs of each op are uploaded identically to both backends, so an op is
 * judged alone. The model's shape is small but not round: 97-token
 * vocabulary, two KV heads of four query heads, an FFN of 768; a third
 * of the models add soft-capping and Phi-3's RoPE (model_build's extras).
 *
 *   test_backend_ops [BACKEND...]     default: every CPU table this machine
 *                                     has ("cpu", "cpu:scalar", ...); "ref"
 *                                     (against itself) only when named: it
 *                                     is the other side of every comparison
 *   test_backend_ops vulkan:each      every usable Vulkan device (lavapipe
 *                                     too); exit 77 when there is none
 * A new backend passes this suite before it is used. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/base.h"
#include "model/model.h"
#include "test_util.h"

static int failures;

static float rnd_sym(float a) { return (float)((rnd_unit() * 2.0 - 1.0) * a); }

enum { E = 512, NH = 4, NKV = 2, HD = 64, F = 768, NV = 97, N_BATCH = 32, N_CTX = 64, FE_SMALL = 96, PLE_W = 555 };

static const pa_type TYPES[] = {PA_TYPE_F32,  PA_TYPE_F16,  PA_TYPE_BF16, PA_TYPE_Q4_0, PA_TYPE_Q4_1,
                                PA_TYPE_Q5_0, PA_TYPE_Q5_1, PA_TYPE_Q8_0, PA_TYPE_Q2_K, PA_TYPE_Q3_K,
                                PA_TYPE_Q4_K, PA_TYPE_Q5_K, PA_TYPE_Q6_K, PA_TYPE_IQ4_NL, PA_TYPE_IQ4_XS,
                                PA_TYPE_MXFP4, PA_TYPE_IQ2_XXS, PA_TYPE_IQ2_XS, PA_TYPE_IQ2_S, PA_TYPE_IQ3_XXS,
                                PA_TYPE_IQ3_S, PA_TYPE_IQ1_S, PA_TYPE_IQ1_M};
#define N_TYPES (int)(sizeof TYPES / sizeof TYPES[0])

/* The products' bound, relative to the largest reference output: measured
 * worst over many seeds, times about three (the fast backends quantize
 * activations to 8 bits per block; F16/BF16 weights take F16 activations). */
static double tol_mm(pa_type t) {
  if (t == PA_TYPE_F32) return 1e-5;
  if (t == PA_TYPE_F16 || t == PA_TYPE_BF16) return 5e-3;
  return 3e-2;
}

/* The host backends (cpu, cpu:TABLE, ref) sum a norm's squares in double
 * as the reference does; a GPU sums them in float, in its own order
 * (vulkan on lavapipe: measured worst 2.3e-7 of the largest output). */
static bool host_backend(const char *name) { return !strncmp(name, "cpu", 3) || !strcmp(name, "ref"); }

/* ---- a one-layer model in memory, the same for every backend ---- */

typedef struct {
  struct pa_model m;
  pa_layer layer;
  void *owned[64]; /* what this test allocated (the repacked copies are the model's) */
  const float *sinks[1]; /* the contexts' attention sinks (pa_bctx_params): NULL or the layer's */
  int n_owned;
} tmodel;

static void *keep(tmodel *t, void *p) {
  if (t->n_owned == (int)(sizeof t->owned / sizeof t->owned[0])) abort();
  t->owned[t->n_owned++] = p;
  return p;
}

/* The grid I-quants (no quantizer): random blocks whose fp16 d (IQ1_M: the
 * top nibbles of its four scale words) puts the values near `scale`. */
static bool is_grid_iq(pa_type t) { return pa_type_get(t)->from_float == NULL; }

static void random_grid_blocks(pa_type type, uint8_t *q, size_t bytes, float scale) {
  const pa_type_traits *tr = pa_type_get(type);
  for (size_t i = 0; i < bytes; i++) q[i] = (uint8_t)rng();
  for (size_t b = 0; b < bytes / tr->type_size; b++) {
    uint8_t *blk = q + b * tr->type_size;
    const pa_f16 d = pa_f32_to_f16(scale * 2e-3f * (float)(0.5 + rnd_unit()));
    if (type == PA_TYPE_IQ1_M) {
      uint8_t *sc = blk + offsetof(block_iq1_m, scales);
      for (int k = 0; k < 4; k++) sc[2 * k + 1] = (uint8_t)((sc[2 * k + 1] & 0x0F) | ((d >> (4 * k)) & 0xF) << 4);
    } else {
      memcpy(blk, &d, 2); /* d leads every other grid block */
    }
  }
}

static pa_matrix random_matrix(tmodel *t, pa_type type, int64_t rows, int64_t cols, float scale) {
  if (is_grid_iq(type)) {
    const size_t bytes = pa_row_size(type, cols) * (size_t)rows;
    void *q = keep(t, pa_alloc(bytes));
    random_grid_blocks(type, q, bytes, scale);
    return (pa_matrix){.type = type, .rows = rows, .cols = cols, .data = q};
  }
  float *f = malloc(sizeof(float) * (size_t)(rows * cols));
  for (int64_t i = 0; i < rows * cols; i++) f[i] = rnd_sym(scale);
  const size_t bytes = pa_row_size(type, cols) * (size_t)rows;
  void *q = keep(t, pa_alloc(bytes));
  if (type == PA_TYPE_F32)
    memcpy(q, f, bytes);
  else
    pa_type_get(type)->from_float(f, q, rows * cols);
  free(f);
  return (pa_matrix){.type = type, .rows = rows, .cols = cols, .data = q};
}

static float *random_vec(tmodel *t, int64_t n, float center, float spread) {
  float *v = keep(t, pa_alloc(sizeof(float) * (size_t)n));
  for (int64_t i = 0; i < n; i++) v[i] = center + rnd_sym(spread);
  return v;
}

/* The weights come from the generator state `seed`, so every backend gets
 * the same model; neox picks the RoPE pairing; extras turns on what Gemma 2
 * and Phi-3 add: soft-capped attention scores and logits (caps inside the
 * values' range, so they bend them), a partial RoPE (48 of 64 dims) with
 * per-frequency factors and an attention factor on the tables; experts
 * adds a mixture-of-experts block (the moe op's weights). */
static void model_build(tmodel *t, pa_type type, uint64_t seed, bool neox, bool extras, bool experts) {
  memset(t, 0, sizeof *t);
  const uint64_t saved = rng_state;
  rng_state = seed;
  pa_hparams *hp = &t->m.hp;
  hp->arch = PA_ARCH_LLAMA;
  hp->n_layer = 1, hp->n_embd = E, hp->n_head = NH, hp->n_head_kv = NKV, hp->head_dim = HD;
  hp->head_dim_v = HD, hp->n_ff = F, hp->n_vocab = NV, hp->n_ctx_train = 4096, hp->rope_dim = HD;
  hp->rope_neox = neox, hp->rope_base = 10000.0f, hp->rope_base_swa = 10000.0f;
  hp->rope_freq_scale = hp->rope_freq_scale_swa = 1.0f, hp->norm_eps = 1e-5f;
  hp->attn_scale = 1.0f / 8.0f, hp->embed_scale = 1.0f, hp->act = PA_ACT_SILU;
  pa_layer *L = &t->layer;
  L->wq = random_matrix(t, type, NH * HD, E, 0.1f);
  L->wk = random_matrix(t, type, NKV * HD, E, 0.1f);
  L->wv = random_matrix(t, type, NKV * HD, E, 0.1f);
  L->wo = random_matrix(t, type, E, NH * HD, 0.1f);
  L->w_gate = random_matrix(t, type, F, E, 0.1f);
  L->w_up = random_matrix(t, type, F, E, 0.1f);
  L->w_down = random_matrix(t, type, E, F, 0.1f);
  L->attn_norm = random_vec(t, E, 1.0f, 0.2f);
  L->ffn_norm = random_vec(t, E, 1.0f, 0.2f);
  L->q_norm = random_vec(t, HD, 1.0f, 0.2f);
  L->k_norm = random_vec(t, HD, 1.0f, 0.2f);
  L->bq = random_vec(t, NH * HD, 0.0f, 0.5f);
  L->bk = random_vec(t, NKV * HD, 0.0f, 0.5f);
  L->bv = random_vec(t, NKV * HD, 0.0f, 0.5f);
  t->m.tok_embd = random_matrix(t, type, NV, E, 1.0f);
  t->m.output = random_matrix(t, type, NV, E, 0.1f);
  t->m.output_norm = random_vec(t, E, 1.0f, 0.2f);
  /* bert's: LayerNorm weight and bias, learned positions and token types
   * (F32), the FFN's bias */
  t->m.embd_norm = random_vec(t, E, 1.0f, 0.2f);
  t->m.embd_norm_b = random_vec(t, E, 0.0f, 0.5f);
  t->m.pos_embd = random_matrix(t, PA_TYPE_F32, N_BATCH, E, 1.0f);
  t->m.type_embd = random_matrix(t, PA_TYPE_F32, 2, E, 1.0f);
  L->b_up = random_vec(t, F, 0.0f, 0.5f);
  /* gemma4's per-layer token table: a row as wide as the per-layer inputs
   * of the PLE buffer (PLE_W), or the widest whole blocks within it */
  hp->n_embd_per_layer = PLE_W;
  const int64_t bs = pa_type_get(type)->block_size;
  t->m.ple_embd = random_matrix(t, type, NV, bs == 1 ? PLE_W : PLE_W / bs * bs, 1.0f);
  t->m.layers = L;
  hp->rope_attn_factor = 1.0f;
  L->attn_sinks = random_vec(t, NH, 0.0f, 2.0f);
  if (extras) {
    hp->attn_softcap = 0.3f, hp->final_softcap = 1.5f, hp->rope_attn_factor = 1.25f, hp->rope_dim = 48;
    if (seed & 2) { /* YaRN's factors (gpt-oss's betas, a ramp over the first dims) */
      t->m.yarn = (pa_yarn){.factor = 8.0f, .orig_ctx = 256, .beta_fast = 32.0f, .beta_slow = 1.0f,
                            .ext_factor = 1.0f, .attn_factor = 1.0f, .truncate = true};
      if (pa_model_yarn_factors(&t->m)) abort();
      keep(t, t->m.rope_freqs);
    } else {
      t->m.rope_freqs = random_vec(t, 24, 3.0f, 2.0f);
    }
  }
  /* experts (when asked), drawn last: 5 to 8 of them, 2 or 3 per token, an
   * F32 router (as in converted files); each kind one 3-D block sliced per
   * expert, as loaded. Quantizing them is most of a build: the second side
   * built from a seed copies the first's bytes (the same values) */
  static struct {
    uint64_t seed;
    pa_type type;
    const void *block[4]; /* gate, up, down, router: the first side's */
  } made;
  if (experts) {
    hp->n_expert = 5 + (int32_t)((seed >> 8) % 4), hp->n_expert_used = 2 + (int32_t)((seed >> 12) % 2);
    hp->n_ff_exp = pa_type_get(type)->block_size == 256 ? 256 : FE_SMALL;
    const bool copy = made.seed == seed && made.type == type;
    /* gpt-oss's biases (drawn before the blocks, which the second side
     * copies without drawing): the gate's and up's large enough that the
     * SwiGLU's clamps (at 7) bite */
    const int64_t NE = hp->n_expert, FE = hp->n_ff_exp;
    L->router_b = random_vec(t, NE, 0.0f, 0.5f);
    L->exp_gate_b = random_vec(t, NE * FE, 0.0f, 12.0f);
    L->exp_up_b = random_vec(t, NE * FE, 0.0f, 12.0f);
    L->exp_down_b = random_vec(t, NE * E, 0.0f, 0.5f);
    L->exp_scale = random_vec(t, NE, 1.0f, 0.5f);
    L->exp_gate = keep(t, pa_calloc(3 * (size_t)hp->n_expert, sizeof(pa_matrix)));
    L->exp_up = L->exp_gate + hp->n_expert, L->exp_down = L->exp_gate + 2 * hp->n_expert;
    pa_matrix *kinds[3] = {L->exp_gate, L->exp_up, L->exp_down};
    for (int k = 0; k < 4; k++) {
      const pa_type ty = k == 3 ? PA_TYPE_F32 : type;
      const int64_t rows = k == 3 ? hp->n_expert : (k == 2 ? E : hp->n_ff_exp) * hp->n_expert;
      const int64_t cols = k == 2 ? hp->n_ff_exp : E;
      pa_matrix all;
      if (copy) {
        const size_t bytes = pa_row_size(ty, cols) * (size_t)rows;
        all = (pa_matrix){.type = ty, .rows = rows, .cols = cols, .data = keep(t, pa_alloc(bytes))};
        memcpy((void *)all.data, made.block[k], bytes);
      } else {
        all = random_matrix(t, ty, rows, cols, k == 3 ? 0.3f : 0.1f);
        made.block[k] = all.data;
      }
      if (k == 3) {
        L->router = all;
        continue;
      }
      const int64_t per = rows / hp->n_expert;
      for (int e = 0; e < hp->n_expert; e++)
        kinds[k][e] = (pa_matrix){.type = ty, .rows = per, .cols = cols,
                                  .data = (const uint8_t *)all.data + pa_row_size(ty, cols) * (size_t)(per * e)};
    }
    made.seed = copy ? 0 : seed, made.type = type;
  }
  rng_state = saved;
}

static void model_free(tmodel *t) {
  pa_unmap_huge(t->m.repacked, t->m.repacked_bytes);
  pa_backend_free(t->m.be);
  for (int i = 0; i < t->n_owned; i++) pa_free(t->owned[i]);
}

/* ---- a backend's context on that model ---- */

typedef struct {
  tmodel tm;
  pa_pool *pool;
  pa_kv_cache kv;
  pa_bctx *bc;
  const pa_backend_ops *ops;
} side;

static int side_open(side *s, const char *backend, pa_type type, uint64_t seed, bool neox, bool extras,
                     pa_kv_type kvt, bool experts) {
  memset(s, 0, sizeof *s);
  model_build(&s->tm, type, seed, neox, extras, experts);
  int rc = pa_backend_create(backend, 0, &s->tm.m.be);
  if (rc) return rc;
  s->ops = s->tm.m.be->ops;
  if ((rc = s->ops->prepare_weights(s->tm.m.be, &s->tm.m))) return rc;
  s->pool = pa_pool_create(2);
  if ((rc = pa_kv_init(&s->kv, 1, NKV, HD, HD, 1, N_CTX, 16, 0))) return rc; /* values: the backend's */
  const pa_layer *L = &s->tm.layer;
  const pa_matrix *mats[13] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down,
                               &s->tm.m.output, &s->tm.m.tok_embd};
  int n_mats = 9;
  if (L->exp_gate) {
    mats[n_mats++] = &L->router;
    mats[n_mats++] = L->exp_gate, mats[n_mats++] = L->exp_up, mats[n_mats++] = L->exp_down;
  }
  const pa_bctx_params bp = {.hp = &s->tm.m.hp, .rope_freqs = s->tm.m.rope_freqs, .n_batch = N_BATCH,
                             .n_seq_max = 1, .pool = s->pool, .kv = &s->kv, .kv_type = kvt,
                             .mats = mats, .n_mats = n_mats, .attn_sinks = s->tm.sinks};
  return s->ops->context_init(s->tm.m.be, &bp, &s->bc);
}

static void side_close(side *s) {
  if (s->bc) s->ops->context_free(s->bc);
  pa_kv_free(&s->kv);
  pa_pool_free(s->pool);
  model_free(&s->tm);
}

/* ---- comparison ---- */

static float got_a[N_BATCH * F], got_b[N_BATCH * F];

/* max |a - b| / max |b| over n values (0 when both are all zero; NaN or
 * infinity anywhere: infinity) */
static double rel_err(const float *a, const float *b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!isfinite(a[i]) || !isfinite(b[i])) return INFINITY;
    const double d = fabs((double)a[i] - (double)b[i]);
    num = d > num ? d : num;
    den = fabs((double)b[i]) > den ? fabs((double)b[i]) : den;
  }
  return num == 0 ? 0 : num / (den > 0 ? den : 1e-30);
}

static double worst[24]; /* per op, for the report */
static const char *OP_NAMES[] = {"upload", "embed", "rms_norm", "add", "matmul qkv", "kv store", "attention",
                                 "attention window", "matmul o + residual", "matmul gate_up", "matmul down + residual",
                                 "logits", "hidden", "layer_norm", "embed_add", "attention bidirectional",
                                 "matmul up + bias + gelu_erf", "moe + residual",
                                 "attention sinks", "moe biases + swiglu_oai", "scale", "per_layer_embed",
                                 "gelu_mul"};
enum {
  OP_UPLOAD, OP_EMBED, OP_NORM, OP_ADD, OP_QKV, OP_KV, OP_ATT, OP_ATT_W, OP_O, OP_GATE, OP_DOWN, OP_LOGITS,
  OP_HIDDEN, OP_LNORM, OP_EMBED_ADD, OP_ATT_BI, OP_UP_GELU, OP_MOE, OP_ATT_SINK, OP_MOE_OAI, OP_SCALE, OP_PLE, OP_GELU_MUL
};

static bool cur_extras; /* the model under test has model_build's extras */

static void expect(const char *backend, pa_type type, int n, pa_kv_type kvt, int op, const float *a, const float *b,
                   int64_t count, double tol) {
  const double e = rel_err(a, b, count);
  worst[op] = e > worst[op] ? e : worst[op];
  if (!(e <= tol) && failures++ < 20)
    printf("FAIL %s %s%s, %d tokens, %s cache: %s differs from ref by %.3g of its largest value (tolerance %.3g)\n",
           backend, pa_type_name(type), cur_extras ? " (soft-caps, partial RoPE, factors)" : "", n,
           pa_kv_type_name(kvt), OP_NAMES[op], e, tol);
}

static void download2(side *x, side *r, pa_buf buf, int64_t count) {
  x->ops->download(x->bc, buf, 0, got_a, count);
  r->ops->download(r->bc, buf, 0, got_b, count);
}

static void upload2(side *x, side *r, pa_buf buf, const float *v, int64_t count) {
  x->ops->upload(x->bc, buf, 0, v, count);
  r->ops->upload(r->bc, buf, 0, v, count);
}

static void random_fill(float *v, int64_t n, float a) {
  for (int64_t i = 0; i < n; i++) v[i] = rnd_sym(a);
}

/* out = W in, X += out on both (W: x's and r's copy of one matrix), X
 * holding x0 and the input h before; out and X compared. */
static void check_residual_product(const char *backend, side *x, side *r, const pa_fwd_batch *b, pa_type type,
                                   pa_kv_type kvt, int op, const pa_matrix *wx, const pa_matrix *wr, pa_buf in,
                                   const float *h, const float *x0) {
  const int n = b->n;
  upload2(x, r, in, h, n * wx->cols);
  upload2(x, r, PA_BUF_X, x0, (int64_t)n * E);
  pa_matmul_desc dx = pa_mm(wx, in, PA_BUF_XB), dr = pa_mm(wr, in, PA_BUF_XB);
  dx.residual = dr.residual = PA_BUF_X;
  x->ops->matmul(x->bc, b, &dx);
  r->ops->matmul(r->bc, b, &dr);
  download2(x, r, PA_BUF_XB, (int64_t)n * E);
  expect(backend, type, n, kvt, op, got_a, got_b, (int64_t)n * E, tol_mm(type));
  download2(x, r, PA_BUF_X, (int64_t)n * E);
  expect(backend, type, n, kvt, op, got_a, got_b, (int64_t)n * E, tol_mm(type));
}

/* One batch of n tokens through every op on backend x and on ref. */
static void run_ops(const char *backend, side *x, side *r, pa_type type, int n, pa_kv_type kvt) {
  static float in[N_BATCH * F], in2[N_BATCH * F];
  int32_t tok[N_BATCH], pos[N_BATCH], seq[N_BATCH], out_idx[N_BATCH];
  for (int t = 0; t < n; t++) tok[t] = (int32_t)(rng() % NV), pos[t] = t, seq[t] = 0, out_idx[t] = t;
  const pa_fwd_batch b = {.n = n, .token = tok, .pos = pos, .seq = seq, .n_out = n, .out_idx = out_idx};
  if (pa_kv_reserve(&x->kv, n, seq, pos) || pa_kv_reserve(&r->kv, n, seq, pos)) {
    printf("FAIL no KV blocks for %d tokens\n", n);
    failures++;
    return;
  }
  const pa_layer *LX = &x->tm.layer, *LR = &r->tm.layer;
  const int64_t Q = NH * HD, K = NKV * HD;
  x->ops->begin(x->bc, &b);
  r->ops->begin(r->bc, &b);

  /* upload then download gives back the same floats */
  random_fill(in, (int64_t)n * E, 2.0f);
  x->ops->upload(x->bc, PA_BUF_X, 0, in, (int64_t)n * E);
  x->ops->download(x->bc, PA_BUF_X, 0, got_a, (int64_t)n * E);
  expect(backend, type, n, kvt, OP_UPLOAD, got_a, in, (int64_t)n * E, 0);

  x->ops->embed(x->bc, &b, &x->tm.m.tok_embd, 1.5f);
  r->ops->embed(r->bc, &b, &r->tm.m.tok_embd, 1.5f);
  download2(x, r, PA_BUF_X, (int64_t)n * E);
  expect(backend, type, n, kvt, OP_EMBED, got_a, got_b, (int64_t)n * E, 0);

  upload2(x, r, PA_BUF_X, in, (int64_t)n * E);
  x->ops->rms_norm(x->bc, PA_BUF_XB, PA_BUF_X, LX->ffn_norm, E, n);
  r->ops->rms_norm(r->bc, PA_BUF_XB, PA_BUF_X, LR->ffn_norm, E, n);
  download2(x, r, PA_BUF_XB, (int64_t)n * E);
  expect(backend, type, n, kvt, OP_NORM, got_a, got_b, (int64_t)n * E, host_backend(backend) ? 0 : 1e-6);

  random_fill(in2, (int64_t)n * E, 1.0f); /* add judged alone: the same XB on both */
  upload2(x, r, PA_BUF_XB, in2, (int64_t)n * E);
  x->ops->add(x->bc, PA_BUF_X, PA_BUF_XB, E, n);
  r->ops->add(r->bc, PA_BUF_X, PA_BUF_XB, E, n);
  download2(x, r, PA_BUF_X, (int64_t)n * E);
  expect(backend, type, n, kvt, OP_ADD, got_a, got_b, (int64_t)n * E, 0);

  /* scale (gemma4's layer scalars): X *= s, exact in float */
  const float s = 0.5f + (float)(rng() % 1000) / 1000.0f;
  x->ops->scale(x->bc, PA_BUF_X, s, E, n);
  r->ops->scale(r->bc, PA_BUF_X, s, E, n);
  download2(x, r, PA_BUF_X, (int64_t)n * E);
  expect(backend, type, n, kvt, OP_SCALE, got_a, got_b, (int64_t)n * E, 0);

  /* the per-layer inputs (gemma4): the token table's rows added to PLE
   * and scaled, exact in float (the same steps everywhere); then a gate of
   * an awkward width times a slice of PLE (rows PLE_W apart, from an odd
   * offset), gelu_tanh's tables within 1e-6 */
  {
    const pa_matrix *tx = &x->tm.m.ple_embd, *tr = &r->tm.m.ple_embd;
    random_fill(in, (int64_t)n * tx->cols, 1.0f);
    upload2(x, r, PA_BUF_PLE, in, (int64_t)n * tx->cols);
    x->ops->per_layer_embed(x->bc, &b, tx, 2.75f, 0.70710678f);
    r->ops->per_layer_embed(r->bc, &b, tr, 2.75f, 0.70710678f);
    download2(x, r, PA_BUF_PLE, (int64_t)n * tx->cols);
    expect(backend, type, n, kvt, OP_PLE, got_a, got_b, (int64_t)n * tx->cols, 0);
    const int64_t G = 37, off = 101;
    random_fill(in, (int64_t)n * PLE_W, 2.0f);
    upload2(x, r, PA_BUF_PLE, in, (int64_t)n * PLE_W);
    random_fill(in2, (int64_t)n * G, 4.0f);
    upload2(x, r, PA_BUF_H1, in2, (int64_t)n * G);
    x->ops->gelu_mul(x->bc, PA_BUF_H1, PA_BUF_PLE, G, PLE_W, off, n);
    r->ops->gelu_mul(r->bc, PA_BUF_H1, PA_BUF_PLE, G, PLE_W, off, n);
    download2(x, r, PA_BUF_H1, (int64_t)n * G);
    expect(backend, type, n, kvt, OP_GELU_MUL, got_a, got_b, (int64_t)n * G, 1e-6);
  }

  /* LayerNorm with weight and bias (bert), in place too; it and embed_add
   * read only F32 vectors and tables, so they run with the first weight
   * type only */
  if (type == TYPES[0]) {
    random_fill(in, (int64_t)n * E, 2.0f);
    for (int i = 0; i < n * E; i++) in[i] += 0.5f; /* a mean to take away */
    upload2(x, r, PA_BUF_X, in, (int64_t)n * E);
    x->ops->layer_norm(x->bc, PA_BUF_XB, PA_BUF_X, x->tm.m.embd_norm, x->tm.m.embd_norm_b, E, n);
    r->ops->layer_norm(r->bc, PA_BUF_XB, PA_BUF_X, r->tm.m.embd_norm, r->tm.m.embd_norm_b, E, n);
    download2(x, r, PA_BUF_XB, (int64_t)n * E);
    expect(backend, type, n, kvt, OP_LNORM, got_a, got_b, (int64_t)n * E, host_backend(backend) ? 0 : 2e-6);
    x->ops->layer_norm(x->bc, PA_BUF_X, PA_BUF_X, x->tm.m.embd_norm, x->tm.m.embd_norm_b, E, n);
    r->ops->layer_norm(r->bc, PA_BUF_X, PA_BUF_X, r->tm.m.embd_norm, r->tm.m.embd_norm_b, E, n);
    download2(x, r, PA_BUF_X, (int64_t)n * E);
    expect(backend, type, n, kvt, OP_LNORM, got_a, got_b, (int64_t)n * E, host_backend(backend) ? 0 : 2e-6);

    /* learned positions and the token-type row added to the embeddings */
    upload2(x, r, PA_BUF_X, in, (int64_t)n * E);
    x->ops->embed_add(x->bc, &b, &x->tm.m.pos_embd, true);
    r->ops->embed_add(r->bc, &b, &r->tm.m.pos_embd, true);
    x->ops->embed_add(x->bc, &b, &x->tm.m.type_embd, false);
    r->ops->embed_add(r->bc, &b, &r->tm.m.type_embd, false);
    download2(x, r, PA_BUF_X, (int64_t)n * E);
    expect(backend, type, n, kvt, OP_EMBED_ADD, got_a, got_b, (int64_t)n * E, 0);
  }

  /* q, k, v with every fusion the models use, K and V into the cache */
  upload2(x, r, PA_BUF_X, in, (int64_t)n * E);
  const pa_matrix *wx[3] = {&LX->wq, &LX->wk, &LX->wv}, *wr[3] = {&LR->wq, &LR->wk, &LR->wv};
  pa_matmul_desc dx = pa_mm3(wx[0], wx[1], wx[2], PA_BUF_X, PA_BUF_Q, PA_BUF_K, PA_BUF_V);
  pa_matmul_desc dr = pa_mm3(wr[0], wr[1], wr[2], PA_BUF_X, PA_BUF_Q, PA_BUF_K, PA_BUF_V);
  dx.in_norm = LX->attn_norm, dr.in_norm = LR->attn_norm;
  dx.bias[0] = LX->bq, dx.bias[1] = LX->bk, dx.bias[2] = LX->bv;
  dr.bias[0] = LR->bq, dr.bias[1] = LR->bk, dr.bias[2] = LR->bv;
  dx.head_norm[0] = LX->q_norm, dx.head_norm[1] = LX->k_norm;
  dr.head_norm[0] = LR->q_norm, dr.head_norm[1] = LR->k_norm;
  dx.rope[0] = dx.rope[1] = dr.rope[0] = dr.rope[1] = PA_ROPE_GLOBAL;
  dx.kv_layer = dr.kv_layer = 0;
  x->ops->matmul(x->bc, &b, &dx);
  r->ops->matmul(r->bc, &b, &dr);
  const pa_buf outs[3] = {PA_BUF_Q, PA_BUF_K, PA_BUF_V};
  const int64_t rows[3] = {Q, K, K};
  for (int m = 0; m < 3; m++) {
    download2(x, r, outs[m], n * rows[m]);
    expect(backend, type, n, kvt, OP_QKV, got_a, got_b, n * rows[m], tol_mm(type));
  }
  /* the cache holds what the products gave (through its own rounding) */
  static float kx[HD], vx[HD], kr[HD], vr[HD];
  for (int t = 0; t < n; t++)
    for (int h = 0; h < NKV; h++) {
      pa_kv_load(&x->kv, 0, 0, t, h, kx, vx);
      pa_kv_load(&r->kv, 0, 0, t, h, kr, vr);
      const double tol = tol_mm(type) + (kvt == PA_KV_Q8 ? 2.0 / 127 : kvt == PA_KV_F16 ? 2e-3 : 0);
      expect(backend, type, n, kvt, OP_KV, kx, kr, HD, tol);
      expect(backend, type, n, kvt, OP_KV, vx, vr, HD, tol);
    }

  /* attention alone: the same queries, the same K and V in both caches */
  random_fill(in, (int64_t)n * Q, 1.0f);
  upload2(x, r, PA_BUF_Q, in, (int64_t)n * Q);
  for (int t = 0; t < n; t++) {
    random_fill(in2, 2 * K, 1.0f);
    pa_kv_store(&x->kv, 0, 0, t, in2, in2 + K);
    pa_kv_store(&r->kv, 0, 0, t, in2, in2 + K);
  }
  /* the tables' exp and float sums differ in the last bits; on a Q8 cache
   * that can move a weight across a rounding edge of its 16-bit step
   * (1/32767 of the tile's largest weight: measured up to 1.4e-5) */
  const double tol_att = kvt == PA_KV_Q8 ? 1e-4 : 2e-6;
  x->ops->attention(x->bc, &b, 0, 0);
  r->ops->attention(r->bc, &b, 0, 0);
  download2(x, r, PA_BUF_ATT, (int64_t)n * Q);
  expect(backend, type, n, kvt, OP_ATT, got_a, got_b, (int64_t)n * Q, tol_att);
  x->ops->attention(x->bc, &b, 0, 3);
  r->ops->attention(r->bc, &b, 0, 3);
  download2(x, r, PA_BUF_ATT, (int64_t)n * Q);
  expect(backend, type, n, kvt, OP_ATT_W, got_a, got_b, (int64_t)n * Q, tol_att);
  /* bidirectional (bert): every token over the whole pass; the reference's
   * first row then differs from its causal one (it sees later tokens) */
  static float causal0[NH * HD];
  memcpy(causal0, got_b, sizeof causal0);
  x->tm.m.hp.bidirectional = r->tm.m.hp.bidirectional = true;
  x->ops->attention(x->bc, &b, 0, 0);
  r->ops->attention(r->bc, &b, 0, 0);
  x->tm.m.hp.bidirectional = r->tm.m.hp.bidirectional = false;
  download2(x, r, PA_BUF_ATT, (int64_t)n * Q);
  expect(backend, type, n, kvt, OP_ATT_BI, got_a, got_b, (int64_t)n * Q, tol_att);
  if (n > 1 && rel_err(got_b, causal0, Q) == 0 && failures++ < 20)
    printf("FAIL ref: bidirectional attention of the first token equals the causal one\n");
  /* with attention sinks (gpt-oss), whole and windowed; the reference's
   * output then differs from the causal one without */
  x->tm.sinks[0] = LX->attn_sinks, r->tm.sinks[0] = LR->attn_sinks;
  for (int w = 0; w < 2; w++) {
    x->ops->attention(x->bc, &b, 0, w ? 3 : 0);
    r->ops->attention(r->bc, &b, 0, w ? 3 : 0);
    download2(x, r, PA_BUF_ATT, (int64_t)n * Q);
    expect(backend, type, n, kvt, OP_ATT_SINK, got_a, got_b, (int64_t)n * Q, tol_att);
    if (!w && rel_err(got_b, causal0, Q) < 1e-3 && failures++ < 20)
      printf("FAIL ref: attention with sinks equals attention without\n");
  }
  x->tm.sinks[0] = r->tm.sinks[0] = NULL;

  /* x += Wo att */
  random_fill(in, (int64_t)n * E, 1.0f);
  random_fill(in2, (int64_t)n * Q, 1.0f);
  check_residual_product(backend, x, r, &b, type, kvt, OP_O, &LX->wo, &LR->wo, PA_BUF_ATT, in2, in);

  /* h = act(W_gate n) * (W_up n), n = rmsnorm(x): both gates */
  for (int g = 0; g < 2; g++) {
    upload2(x, r, PA_BUF_X, in, (int64_t)n * E);
    pa_matmul_desc ux = pa_mm2(&LX->w_gate, &LX->w_up, PA_BUF_X, PA_BUF_H1, PA_BUF_H2);
    pa_matmul_desc ur = pa_mm2(&LR->w_gate, &LR->w_up, PA_BUF_X, PA_BUF_H1, PA_BUF_H2);
    ux.in_norm = LX->ffn_norm, ur.in_norm = LR->ffn_norm;
    ux.gate = ur.gate = g ? PA_GATE_GELU_TANH : PA_GATE_SILU;
    x->ops->matmul(x->bc, &b, &ux);
    r->ops->matmul(r->bc, &b, &ur);
    download2(x, r, PA_BUF_H1, (int64_t)n * F);
    expect(backend, type, n, kvt, OP_GATE, got_a, got_b, (int64_t)n * F, 2 * tol_mm(type));
  }

  /* h = gelu_erf(W_up x + b_up) (bert's un-gated FFN) */
  upload2(x, r, PA_BUF_X, in, (int64_t)n * E);
  pa_matmul_desc gx = pa_mm(&LX->w_up, PA_BUF_X, PA_BUF_H1), gr = pa_mm(&LR->w_up, PA_BUF_X, PA_BUF_H1);
  gx.bias[0] = LX->b_up, gr.bias[0] = LR->b_up;
  gx.unary = gr.unary = PA_UNARY_GELU_ERF;
  x->ops->matmul(x->bc, &b, &gx);
  r->ops->matmul(r->bc, &b, &gr);
  download2(x, r, PA_BUF_H1, (int64_t)n * F);
  expect(backend, type, n, kvt, OP_UP_GELU, got_a, got_b, (int64_t)n * F, 2 * tol_mm(type));

  /* x += W_down h */
  random_fill(in2, (int64_t)n * F, 1.0f);
  check_residual_product(backend, x, r, &b, type, kvt, OP_DOWN, &LX->w_down, &LR->w_down, PA_BUF_H1, in2, in);

  /* x += the mixture of experts of rmsnorm(x), both gates (a backend
   * without the op refuses such models at load: skipped) */
  for (int g = 0; x->ops->moe && x->tm.m.hp.n_expert > 0 && g < 3; g++) {
    const pa_hparams *hp = &x->tm.m.hp;
    upload2(x, r, PA_BUF_X, in, (int64_t)n * E);
    pa_moe_desc mx = {.in = PA_BUF_X, .out = PA_BUF_XB, .in_norm = LX->ffn_norm, .router = &LX->router,
                      .n_expert = hp->n_expert, .n_used = hp->n_expert_used, .norm_topk = g == 0,
                      .gate = LX->exp_gate, .up = LX->exp_up, .down = LX->exp_down,
                      .act = g ? PA_GATE_GELU_TANH : PA_GATE_SILU, .residual = PA_BUF_X};
    if (g == 1) { /* gemma4: the router's own input norm, each chosen weight scaled */
      mx.router_norm = LX->attn_norm, mx.expert_scale = LX->exp_scale;
    }
    if (g == 2) { /* gpt-oss: biases everywhere, the clamped SwiGLU, softmax over the chosen */
      mx.norm_topk = true, mx.act = PA_GATE_SWIGLU_OAI;
      mx.router_bias = LX->router_b, mx.gate_bias = LX->exp_gate_b;
      mx.up_bias = LX->exp_up_b, mx.down_bias = LX->exp_down_b;
    }
    pa_moe_desc mr = mx;
    mr.in_norm = LR->ffn_norm, mr.router = &LR->router;
    mr.gate = LR->exp_gate, mr.up = LR->exp_up, mr.down = LR->exp_down;
    if (g == 1) mr.router_norm = LR->attn_norm, mr.expert_scale = LR->exp_scale;
    if (g == 2) {
      mr.router_bias = LR->router_b, mr.gate_bias = LR->exp_gate_b;
      mr.up_bias = LR->exp_up_b, mr.down_bias = LR->exp_down_b;
    }
    x->ops->moe(x->bc, &b, &mx);
    r->ops->moe(r->bc, &b, &mr);
    const int op = g == 2 ? OP_MOE_OAI : OP_MOE;
    download2(x, r, PA_BUF_XB, (int64_t)n * E);
    expect(backend, type, n, kvt, op, got_a, got_b, (int64_t)n * E, 3 * tol_mm(type));
    download2(x, r, PA_BUF_X, (int64_t)n * E);
    expect(backend, type, n, kvt, op, got_a, got_b, (int64_t)n * E, 3 * tol_mm(type));
  }

  /* logits of every token, then of two of them */
  static float lx[N_BATCH * NV], lr[N_BATCH * NV];
  upload2(x, r, PA_BUF_X, in, (int64_t)n * E);
  x->ops->logits(x->bc, &b, x->tm.m.output_norm, &x->tm.m.output, lx);
  r->ops->logits(r->bc, &b, r->tm.m.output_norm, &r->tm.m.output, lr);
  expect(backend, type, n, kvt, OP_LOGITS, lx, lr, (int64_t)n * NV, tol_mm(type));
  const int32_t two[2] = {n - 1, 0};
  const pa_fwd_batch b2 = {.n = n, .token = tok, .pos = pos, .seq = seq, .n_out = n > 1 ? 2 : 1, .out_idx = two};
  x->ops->logits(x->bc, &b2, x->tm.m.output_norm, &x->tm.m.output, lx);
  r->ops->logits(r->bc, &b2, r->tm.m.output_norm, &r->tm.m.output, lr);
  expect(backend, type, n, kvt, OP_LOGITS, lx, lr, (int64_t)b2.n_out * NV, tol_mm(type));
  /* the final hidden states (an embedding context's output): of two tokens
   * in reverse order, then of every token; the X rows are left as they were */
  static float hx[N_BATCH * E], hr[N_BATCH * E];
  for (int pass = 0; pass < 2; pass++) {
    const pa_fwd_batch *bh = pass ? &b : &b2;
    memset(hx, 0xff, sizeof hx); /* NaN: a row left unwritten fails */
    x->ops->hidden(x->bc, bh, x->tm.m.output_norm, hx);
    r->ops->hidden(r->bc, bh, r->tm.m.output_norm, hr);
    expect(backend, type, n, kvt, OP_HIDDEN, hx, hr, (int64_t)bh->n_out * E, host_backend(backend) ? 0 : 1e-6);
    /* without a norm (bert's output): the rows as they are */
    memset(hx, 0xff, sizeof hx);
    x->ops->hidden(x->bc, bh, NULL, hx);
    r->ops->hidden(r->bc, bh, NULL, hr);
    expect(backend, type, n, kvt, OP_HIDDEN, hx, hr, (int64_t)bh->n_out * E, 0);
  }
  x->ops->synchronize(x->bc);
  pa_kv_truncate(&x->kv, 0, 0);
  pa_kv_truncate(&r->kv, 0, 0);
}

/* ---- the linear-attention ops (delta_net, sigmoid_mul, state_copy) ----
 * Gated DeltaNet in two shapes: 3 key heads of 20, 6 value heads of 12, a
 * conv of 4 taps; and 2 key heads of 136, 4 value heads of 130, 3 taps
 * (heads wider than a GPU workgroup of 128). Three sequences interleaved
 * in two passes (the second continues the states the first left), then a
 * state copied to another sequence's slot and a snapshot slot and run on
 * from both, then a sequence started again from position 0 (its slot's
 * old state dropped); then checkpoints: a pass of 5 tokens of sequence 1
 * and 2 of sequence 2 copies the states after four of them to checkpoint
 * slots, and each is run on from (copied back to sequence 0's slot) with
 * the inputs that followed it: the same outputs as the pass gave. The
 * conv's taps, A, the dt bias and the norm are the layer's weights (a GPU
 * backend reads them from the device). */
typedef struct {
  int kh, vh, kd, vd, conv;
} ssm_shape;
static const ssm_shape SSM_SHAPES[] = {{3, 6, 20, 12, 4}, {2, 4, 136, 130, 3}};
enum { SSM_SEQ = 3, SSM_MAX_CD = 2 * 2 * 136 + 4 * 130, SSM_MAX_VZ = 4 * 130, SSM_MAX_VH = 6 };
/* checkpoint slots past the snapshot (slots SSM_SEQ + 1 ...) */
enum { SSM_CKPT = 4 };

static int ssm_side_open(side *s, const char *backend, uint64_t seed, const ssm_shape *sh) {
  memset(s, 0, sizeof *s);
  model_build(&s->tm, PA_TYPE_F32, seed, true, false, false);
  pa_hparams *hp = &s->tm.m.hp;
  hp->ssm_conv = sh->conv, hp->ssm_k_heads = sh->kh, hp->ssm_v_heads = sh->vh;
  hp->ssm_k_dim = sh->kd, hp->ssm_v_dim = sh->vd, hp->recurrent[0] = true;
  /* the layer's linear-attention vectors, the same for every side of a seed */
  const uint64_t saved = rng_state;
  rng_state = seed ^ 0x9E3779B97F4A7C15ull;
  pa_layer *L = &s->tm.layer;
  const int64_t CD = pa_ssm_conv_dim(hp);
  L->ssm_conv = keep(&s->tm, pa_alloc(sizeof(float) * (size_t)(CD * sh->conv)));
  random_fill(L->ssm_conv, CD * sh->conv, 0.5f);
  L->ssm_a = keep(&s->tm, pa_alloc(sizeof(float) * (size_t)sh->vh));
  L->ssm_dt = keep(&s->tm, pa_alloc(sizeof(float) * (size_t)sh->vh));
  for (int h = 0; h < sh->vh; h++) L->ssm_a[h] = -(float)(0.05 + rnd_unit()), L->ssm_dt[h] = rnd_sym(0.5f);
  L->ssm_norm = random_vec(&s->tm, sh->vd, 1.0f, 0.3f);
  rng_state = saved;
  int rc = pa_backend_create(backend, 0, &s->tm.m.be);
  if (rc) return rc;
  s->ops = s->tm.m.be->ops;
  if (!s->ops->delta_net) return PASADA_ERR_UNSUPPORTED;
  if ((rc = s->ops->prepare_weights(s->tm.m.be, &s->tm.m))) return rc;
  s->pool = pa_pool_create(2);
  if ((rc = pa_kv_init(&s->kv, 1, NKV, HD, HD, SSM_SEQ, N_CTX, 16, 0))) return rc;
  const pa_matrix *mats[1] = {&s->tm.m.output};
  const pa_bctx_params bp = {.hp = hp,
                             .n_batch = N_BATCH,
                             .n_seq_max = SSM_SEQ,
                             .pool = s->pool,
                             .kv = &s->kv,
                             .kv_type = PA_KV_F32,
                             .mats = mats,
                             .n_mats = 1,
                             .n_snap = 1 + SSM_CKPT};
  return s->ops->context_init(s->tm.m.be, &bp, &s->bc);
}

/* The worst relative difference of delta_net's outputs from ref over the
 * passes of one shape (-1: the backend has no such op). */
static double check_delta_shape(const char *backend, const ssm_shape *sh) {
  side x, r;
  const uint64_t seed = rng() | 1;
  int rc = ssm_side_open(&x, backend, seed, sh);
  if (rc == PASADA_ERR_UNSUPPORTED && !x.bc) { /* the backend refuses recurrent models at load */
    side_close(&x);
    return -1;
  }
  if (!rc) rc = ssm_side_open(&r, "ref", seed, sh);
  if (rc) {
    printf("FAIL %s delta_net: %s\n", backend, pasada_last_error());
    failures++;
    return 0;
  }
  const pa_hparams *hp = &x.tm.m.hp;
  const pa_layer *L = &x.tm.layer;
  const int64_t CD = pa_ssm_conv_dim(hp), VZ = (int64_t)sh->vh * sh->vd, VH = sh->vh;
  static float qkv[N_BATCH * SSM_MAX_CD], z[N_BATCH * SSM_MAX_VZ], be[N_BATCH * SSM_MAX_VH],
      al[N_BATCH * SSM_MAX_VH];
  const pa_delta_desc d = {.layer = 0, .qkv = PA_BUF_Q, .z = PA_BUF_K, .beta = PA_BUF_V, .alpha = PA_BUF_H1,
                           .out = PA_BUF_ATT, .conv_w = L->ssm_conv, .a = L->ssm_a, .dt_bias = L->ssm_dt,
                           .norm = L->ssm_norm};
  int32_t len[SSM_SEQ] = {0}, tok[N_BATCH], pos[N_BATCH], seq[N_BATCH];
  double worst_dn = 0;
  /* passes: 17 tokens over the 3 sequences, 9 more continuing them, one
   * token each of sequences 1 and 2 after 2 took 1's state, then sequence
   * 0 again from position 0 */
  for (int pass = 0; pass < 4; pass++) {
    const int n = pass == 0 ? 17 : pass == 1 ? 9 : pass == 2 ? 2 : 5;
    if (pass == 2) {
      x.ops->state_copy(x.bc, SSM_SEQ, 1), r.ops->state_copy(r.bc, SSM_SEQ, 1); /* a snapshot of 1 */
      x.ops->state_copy(x.bc, 2, SSM_SEQ), r.ops->state_copy(r.bc, 2, SSM_SEQ);
      len[2] = len[1];
    }
    if (pass == 3) len[0] = 0;
    for (int t = 0; t < n; t++) {
      seq[t] = pass == 2 ? 1 + t : pass == 3 ? 0 : (int32_t)(rng() % SSM_SEQ);
      pos[t] = len[seq[t]]++;
      tok[t] = 0;
    }
    random_fill(qkv, n * CD, 1.0f), random_fill(z, n * VZ, 1.5f);
    random_fill(be, n * VH, 2.0f), random_fill(al, n * VH, 2.0f);
    if (pass == 2) /* the same inputs for both: the same outputs */
      memcpy(qkv + CD, qkv, sizeof(float) * (size_t)CD), memcpy(z + VZ, z, sizeof(float) * (size_t)VZ),
      memcpy(be + VH, be, sizeof be[0] * (size_t)VH), memcpy(al + VH, al, sizeof al[0] * (size_t)VH);
    const pa_fwd_batch b = {.n = n, .token = tok, .pos = pos, .seq = seq};
    upload2(&x, &r, PA_BUF_Q, qkv, n * CD), upload2(&x, &r, PA_BUF_K, z, n * VZ);
    upload2(&x, &r, PA_BUF_V, be, n * VH), upload2(&x, &r, PA_BUF_H1, al, n * VH);
    x.ops->delta_net(x.bc, &b, &d);
    r.ops->delta_net(r.bc, &b, &d);
    download2(&x, &r, PA_BUF_ATT, n * VZ);
    const double e = rel_err(got_a, got_b, n * VZ);
    worst_dn = e > worst_dn ? e : worst_dn;
    if (!(e <= 1e-4) && failures++ < 20)
      printf("FAIL %s delta_net (key heads of %d) pass %d (%d tokens): differs from ref by %.3g of its largest "
             "value\n", backend, sh->kd, pass, n, e);
    if (pass == 2 && (rel_err(got_a, got_a + VZ, VZ) > 0 || rel_err(got_b, got_b + VZ, VZ) > 0) && failures++ < 20)
      printf("FAIL %s state_copy: a sequence run on from a copied state differs from its source\n", backend);
  }
  /* checkpoints: five tokens of sequence 1 (checkpoints after its 1st,
   * 2nd and 4th) and two of sequence 2 (after its 1st), interleaved */
  {
    enum { N = 7 };
    static const int32_t cs[N] = {1, 2, 1, 1, 2, 1, 1};
    const int32_t ck[N] = {SSM_SEQ + 1, SSM_SEQ + 4, SSM_SEQ + 2, -1, -1, SSM_SEQ + 3, -1};
    for (int t = 0; t < N; t++) seq[t] = cs[t], pos[t] = len[cs[t]]++, tok[t] = 0;
    random_fill(qkv, N * CD, 1.0f), random_fill(z, N * VZ, 1.5f);
    random_fill(be, N * VH, 2.0f), random_fill(al, N * VH, 2.0f);
    const pa_fwd_batch b = {.n = N, .token = tok, .pos = pos, .seq = seq, .ckpt = ck};
    upload2(&x, &r, PA_BUF_Q, qkv, N * CD), upload2(&x, &r, PA_BUF_K, z, N * VZ);
    upload2(&x, &r, PA_BUF_V, be, N * VH), upload2(&x, &r, PA_BUF_H1, al, N * VH);
    x.ops->delta_net(x.bc, &b, &d);
    r.ops->delta_net(r.bc, &b, &d);
    static float full[N * SSM_MAX_VZ];
    x.ops->download(x.bc, PA_BUF_ATT, 0, full, N * VZ);
    /* from each checkpoint, the next token of its sequence again, run as
     * sequence 0 (its slot takes the checkpoint) */
    for (int t = 0; t < N; t++) {
      int nx = -1; /* the next token of t's sequence in the pass */
      for (int u = t + 1; u < N && nx < 0; u++)
        if (cs[u] == cs[t]) nx = u;
      if (ck[t] < 0 || nx < 0) continue;
      x.ops->state_copy(x.bc, 0, ck[t]);
      const int32_t s0 = 0, p0 = pos[nx], t0 = 0;
      const pa_fwd_batch b1 = {.n = 1, .token = &t0, .pos = &p0, .seq = &s0};
      static float q1[SSM_MAX_CD];
      memcpy(q1, qkv + nx * CD, sizeof(float) * (size_t)CD);
      x.ops->upload(x.bc, PA_BUF_Q, 0, q1, CD), x.ops->upload(x.bc, PA_BUF_K, 0, z + nx * VZ, VZ);
      x.ops->upload(x.bc, PA_BUF_V, 0, be + nx * VH, VH),
          x.ops->upload(x.bc, PA_BUF_H1, 0, al + nx * VH, VH);
      x.ops->delta_net(x.bc, &b1, &d);
      x.ops->download(x.bc, PA_BUF_ATT, 0, got_a, VZ);
      x.ops->synchronize(x.bc);
      const double e = rel_err(got_a, full + nx * VZ, VZ);
      if (!(e <= 1e-6) && failures++ < 20)
        printf(
            "FAIL %s delta_net checkpoint after token %d: run on from it, token %d differs by "
            "%.3g\n",
            backend, t, nx, e);
    }
  }
  /* x *= sigmoid(g) */
  random_fill(qkv, 19 * 40, 3.0f), random_fill(z, 19 * 40, 3.0f);
  upload2(&x, &r, PA_BUF_ATT, qkv, 19 * 40), upload2(&x, &r, PA_BUF_H1, z, 19 * 40);
  x.ops->sigmoid_mul(x.bc, PA_BUF_ATT, PA_BUF_H1, 40, 40, 19);
  r.ops->sigmoid_mul(r.bc, PA_BUF_ATT, PA_BUF_H1, 40, 40, 19);
  download2(&x, &r, PA_BUF_ATT, 19 * 40);
  double es = rel_err(got_a, got_b, 19 * 40);
  /* one gate per row (qwen35moe's shared-expert gate): rows of 37, 19
   * gates, against the formula as well as the reference */
  random_fill(qkv, 19 * 37, 3.0f), random_fill(z, 19, 3.0f);
  upload2(&x, &r, PA_BUF_ATT, qkv, 19 * 37), upload2(&x, &r, PA_BUF_H1, z, 19);
  x.ops->sigmoid_mul(x.bc, PA_BUF_ATT, PA_BUF_H1, 37, 1, 19);
  r.ops->sigmoid_mul(r.bc, PA_BUF_ATT, PA_BUF_H1, 37, 1, 19);
  download2(&x, &r, PA_BUF_ATT, 19 * 37);
  for (int64_t i = 0; i < 19 * 37; i++) qkv[i] = (float)(qkv[i] / (1.0 + exp(-(double)z[i / 37])));
  const double eb = rel_err(got_a, got_b, 19 * 37), ef = rel_err(got_b, qkv, 19 * 37);
  es = es > eb ? es : eb;
  es = es > ef ? es : ef;
  if (!(es <= 1e-6) && failures++ < 20)
    printf("FAIL %s sigmoid_mul (elementwise, or one gate per row) differs from ref by %.3g\n", backend, es);
  printf("  %-16s delta_net (key heads of %d, value heads of %d) %.2g, sigmoid_mul %.2g from ref\n", backend,
         sh->kd, sh->vd, worst_dn, es);
  side_close(&x);
  side_close(&r);
  return worst_dn;
}

static void check_delta_net(const char *backend) {
  for (size_t i = 0; i < sizeof SSM_SHAPES / sizeof SSM_SHAPES[0]; i++)
    if (check_delta_shape(backend, &SSM_SHAPES[i]) < 0) {
      printf("  %-16s delta_net: none (recurrent models refused at load)\n", backend);
      return;
    }
}

static void check_backend(const char *backend) {
  check_delta_net(backend);
  memset(worst, 0, sizeof worst);
  const pa_kv_type kvts[] = {PA_KV_F32, PA_KV_F16, PA_KV_Q8};
  const int counts[] = {1, 5, 19};
  /* PASADA_TEST_SCALE below 1: fewer caches per weight type, taken in turn,
   * so every cache type still meets several weight types */
  const int n_kvts = test_reps(3, 1);
  const int moe_third = (int)(rng() % 3);
  for (int ti = 0; ti < N_TYPES; ti++)
    for (int j = 0; j < n_kvts; j++) {
      const int k = (ti + j) % 3;
      const uint64_t seed = rng() | 1;
      const bool neox = (ti + k) % 2, extras = (ti + j) % 3 == 1;
      side x, r;
      /* experts once per weight type; with PASADA_TEST_SCALE below 1 (qemu),
       * on every third type, which third drawn per run */
      const bool experts = j == 0 && (test_scale() >= 1 || (ti + moe_third) % 3 == 0);
      /* The grid I-quants: one KV cache type each (the reference's
       * kernel for them is slow; the rotation (ti + j) % 3 still pairs
       * them with every cache type) */
      if (is_grid_iq(TYPES[ti]) && j > 0) break;
      int rc = side_open(&x, backend, TYPES[ti], seed, neox, extras, kvts[k], experts);
      if (!rc) rc = side_open(&r, "ref", TYPES[ti], seed, neox, extras, kvts[k], experts);
      if (rc) {
        printf("FAIL %s %s: %s\n", backend, pa_type_name(TYPES[ti]), pasada_last_error());
        failures++;
        return;
      }
      cur_extras = extras;
      for (int c = 0; c < 3; c++) run_ops(backend, &x, &r, TYPES[ti], counts[c], kvts[k]);
      side_close(&x);
      side_close(&r);
    }
  printf("  %-16s worst relative difference from ref:", backend);
  for (int op = 0; op <= OP_GELU_MUL; op++) printf(" %s %.2g%s", OP_NAMES[op], worst[op], op < OP_GELU_MUL ? "," : "\n");
}

/* A context on a GPU backend for a model loaded on the CPU is refused
 * (the GPU has none of its weights), not run. */
static void check_foreign_context(const char *gpu) {
  const char *root = getenv("PASADA_SOURCE_DIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/fixtures/tiny/llama.gguf", root ? root : ".");
  pasada_model *m = NULL;
  if (pasada_model_load(path, NULL, &m)) {
    printf("FAIL loading %s: %s\n", path, pasada_last_error());
    failures++;
    return;
  }
  pasada_context_params cp = pasada_context_default_params();
  cp.backend = gpu;
  pasada_context *c = NULL;
  const int rc = pasada_context_create(m, &cp, &c);
  if (rc != PASADA_ERR_ARG || c || !strstr(pasada_last_error(), gpu)) {
    printf("FAIL a %s context on a CPU model: status %d (%s)\n", gpu, rc, rc ? pasada_last_error() : "made");
    failures++;
  }
  pasada_context_free(c);
  pasada_model_free(m);
}

int main(int argc, char **argv) {
  test_seed("test_backend_ops");
  /* names: bad ones are errors that name them */
  pa_backend *be = NULL;
  if (pa_backend_create("tpu", 0, &be) != PASADA_ERR_ARG || be || !strstr(pasada_last_error(), "tpu")) {
    printf("FAIL an unknown backend was not refused by name\n");
    failures++;
  }
  if (pa_backend_create("cpu:neon", 0, &be) != PASADA_ERR_ARG || be) {
    printf("FAIL an unknown CPU table was not refused\n");
    failures++;
  }
  if (argc == 2 && !strcmp(argv[1], "vulkan:each")) {
    /* every Vulkan device this machine has that pasada can use */
    pa_device_info dev[16];
    int n = 0, used = 0;
    const int rc = pa_vulkan_devices(dev, 16, &n);
    for (int i = 0; !rc && i < n && i < 16; i++) {
      if (!dev[i].usable) {
        printf("  vulkan:%d (%s) skipped: it lacks %s\n", i, dev[i].name, dev[i].missing);
        continue;
      }
      char name[32];
      snprintf(name, sizeof name, "vulkan:%d", i);
      printf("  %s: %s (%s)\n", name, dev[i].name, dev[i].type);
      check_backend(name);
      check_foreign_context(name);
      used++;
    }
    if (!used) {
      const char *req = getenv("PASADA_REQUIRE_VULKAN");
      printf("%s: no usable Vulkan device (%s)\n", req && *req == '1' ? "FAIL" : "skipped",
             rc ? pasada_last_error() : "none found");
      return req && *req == '1' ? 1 : 77;
    }
  } else if (argc > 1) {
    for (int i = 1; i < argc; i++) check_backend(argv[i]);
  } else {
    const char *all[] = {"cpu",        "cpu:scalar",      "cpu:avx2",
                         "cpu:avx512", "cpu:avx512_vnni", "cpu:amx"};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
      if (!strncmp(all[i], "cpu:", 4) && !pa_kernels_by_name(all[i] + 4)) {
        printf("  %-16s skipped: this CPU lacks its instructions\n", all[i]);
        continue;
      }
      if (!strncmp(all[i], "cpu:", 4) && pa_kernels_by_name(all[i] + 4) == pa_kernels_best()) {
        printf("  %-16s skipped: the table \"cpu\" has, checked above\n", all[i]);
        continue;
      }
      check_backend(all[i]);
    }
  }
  printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
  return failures ? 1 : 0;
}
