/* context.c: contexts (KV cache, scratch, thread pool) and pasada_decode:
 * validates a batch, runs the architecture's forward pass, keeps the
 * sequences' lengths. Everything the forward pass needs is allocated here,
 * once; a decode step allocates nothing (the logits buffer grows only when a
 * batch asks for more rows than any before). A batch larger than
 * PA_FWD_TOKENS_MAX runs as several forward passes, so the scratch stays
 * small whatever the batch size. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "model/attention.h"
#include "model/model.h"

pasada_context_params pasada_context_default_params(void) {
  pasada_context_params p = {.n_ctx = 0, .n_seq_max = 1, .n_batch = 512, .n_threads = 0};
  return p;
}

void pasada_context_free(pasada_context *c) {
  if (!c) return;
  pa_pool_free(c->pool);
  pa_kv_free(&c->kv);
  pa_scratch *s = &c->s;
  void *p[] = {s->x, s->xb, s->q /* also k, v, att and h2 */, s->h1, s->rope_cos, s->rope_sin,
               s->rope_cos_swa, s->rope_sin_swa, s->scores, s->work, s->out_rows};
  for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) pa_free(p[i]);
  pa_free(c->logits);
  free(c->row_of);
  pa_free(c);
}

static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }
static size_t align16(size_t n_floats) { return (n_floats + 15) & ~(size_t)15; } /* 64 bytes */

/* The most tokens of one forward pass. A larger batch runs as several
 * forward passes over consecutive slices of it (micro-batches), so the
 * scratch (about 25 to 40 KiB per token on the small models) stays a few MiB
 * whatever n_batch is. The results are the same bits: every op computes each
 * token's row independently of the others in its pass, and a slice's K and V
 * are in the cache before any later slice attends to them. Measured pp512
 * against one 512-token pass: the same speed within the noise on SmolLM2 and
 * Gemma 3 270M (1 and 2 threads), faster on the Llama-1B shape (its FFN
 * buffers for 512 tokens outgrow the caches); 64 tokens were slower. */
#define PA_FWD_TOKENS_MAX 128

int pasada_context_create(pasada_model *m, const pasada_context_params *params, pasada_context **out) {
  *out = NULL;
  if (m->vocab_only) return pa_error(PASADA_ERR_ARG, "the model was loaded vocabulary-only");
  pasada_context_params p = params ? *params : pasada_context_default_params();
  const pa_hparams *hp = &m->hp;
  if (p.n_ctx <= 0) p.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
  if (p.n_ctx > (1 << 22)) return pa_error(PASADA_ERR_ARG, "context size %d is too large", p.n_ctx);
  if (p.n_seq_max <= 0 || p.n_seq_max > 1024)
    return pa_error(PASADA_ERR_ARG, "n_seq_max %d is out of range [1, 1024]", p.n_seq_max);
  if (p.n_batch <= 0) p.n_batch = 512;
  if (p.n_batch > 65536) p.n_batch = 65536;
  if (p.n_threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    p.n_threads = n > 0 ? (int32_t)n : 1;
  }
  if (p.n_threads > 256) p.n_threads = 256;

  struct pa_context *c = pa_calloc(1, sizeof *c);
  if (!c) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  c->model = m;
  c->n_ctx = p.n_ctx;
  c->n_seq_max = p.n_seq_max;
  c->n_batch_max = p.n_batch;
  c->n_batch = p.n_batch < PA_FWD_TOKENS_MAX ? p.n_batch : PA_FWD_TOKENS_MAX;
  c->n_threads = p.n_threads;
  c->reference_path = p.reference_path;
  if (!p.reference_path) { /* how far ahead the decode kernels ask for weights (kernels.h) */
    pasada_model_stats st;
    pasada_model_get_stats(m, &st);
    pa_kernels_fit_prefetch((uint64_t)(st.bytes_layers + st.bytes_output));
  }
  int64_t B = c->n_batch, E = hp->n_embd, F = hp->n_ff;
  int64_t Q = (int64_t)hp->n_head * hp->head_dim, K = (int64_t)hp->n_head_kv * hp->head_dim;
  int64_t VV = (int64_t)hp->n_head_kv * hp->head_dim_v, O = (int64_t)hp->n_head * hp->head_dim_v;

  c->pool = pa_pool_create(p.n_threads);
  c->row_of = malloc((size_t)p.n_batch * sizeof(int32_t));
  bool ok = c->pool && c->row_of;
  if (p.kv_type != PASADA_KV_DEFAULT && p.kv_type != PASADA_KV_F32 && p.kv_type != PASADA_KV_F16 &&
      p.kv_type != PASADA_KV_Q8) {
    pasada_context_free(c);
    return pa_error(PASADA_ERR_ARG, "unknown KV cache type %d", (int)p.kv_type);
  }
  const pa_kv_type kt = p.kv_type == PASADA_KV_Q8 ? PA_KV_Q8
                        : p.kv_type == PASADA_KV_F16 || (p.kv_type == PASADA_KV_DEFAULT && !p.reference_path)
                            ? PA_KV_F16
                            : PA_KV_F32;
  if (ok) {
    const int rc = pa_kv_init(&c->kv, hp->n_layer, hp->n_head_kv, hp->head_dim, hp->head_dim_v, kt, p.n_seq_max,
                              p.n_ctx, p.kv_block_size, p.kv_blocks);
    if (rc) {
      pasada_context_free(c);
      return rc; /* message set by pa_kv_init */
    }
  }
  pa_scratch *s = &c->s;
  if (ok) {
    s->x = pa_alloc((size_t)(B * E) * sizeof(float));
    s->xb = pa_alloc((size_t)(B * max_sz((size_t)E, (size_t)O)) * sizeof(float));
    /* q, k, v and att are dead once the attention block has added its
     * output to x, and h2 (the up projection) lives only inside the FFN:
     * they share one buffer (SmolLM2, 128 tokens: 0.75 MiB less) */
    const size_t fq = align16((size_t)(B * Q)), fk = align16((size_t)(B * K)),
                 fv = align16((size_t)(B * VV)), fo = align16((size_t)(B * O));
    s->q = pa_alloc(max_sz(fq + fk + fv + fo, (size_t)(B * F)) * sizeof(float));
    if (s->q) s->k = s->q + fq, s->v = s->k + fk, s->att = s->v + fv, s->h2 = s->q;
    s->h1 = pa_alloc((size_t)(B * max_sz((size_t)F, (size_t)E)) * sizeof(float));
    size_t rt = (size_t)(B * (hp->rope_dim / 2)) * sizeof(float);
    s->rope_cos = pa_alloc(rt);
    s->rope_sin = pa_alloc(rt);
    s->rope_cos_swa = pa_alloc(rt);
    s->rope_sin_swa = pa_alloc(rt);
    s->scores = pa_alloc(pa_attention_scratch_size(p.n_threads, c->n_batch, p.n_seq_max, hp));
    s->out_rows = pa_alloc((size_t)B * sizeof(int32_t));
    /* the largest activation scratch any matrix product of the model needs */
    size_t work = 0;
    const pa_matrix *mats[] = {&m->output, &m->tok_embd};
    for (int i = 0; i < 2; i++) work = max_sz(work, pa_matmul_work_size(mats[i], B));
    for (int l = 0; l < hp->n_layer; l++) {
      const pa_layer *L = &m->layers[l];
      const pa_matrix *lm[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
      for (int i = 0; i < 7; i++) work = max_sz(work, pa_matmul_work_size(lm[i], B));
      for (int i = 0; i < 7; i++) work = max_sz(work, pa_matmul_exact_work_size(lm[i], p.n_threads));
    }
    for (int i = 0; i < 2; i++) work = max_sz(work, pa_matmul_exact_work_size(mats[i], p.n_threads));
    s->work = pa_alloc(work);
    ok = s->x && s->xb && s->q && s->k && s->v && s->att && s->h1 && s->h2 && s->rope_cos &&
         s->rope_sin && s->rope_cos_swa && s->rope_sin_swa && s->scores && s->out_rows && s->work;
  }
  if (!ok) {
    pasada_context_free(c);
    return pa_error(PASADA_ERR_NOMEM, "out of memory creating a context of %d positions x %d sequences",
                    p.n_ctx, p.n_seq_max);
  }
  *out = c;
  return PASADA_OK;
}

int32_t pasada_context_n_ctx(const pasada_context *c) { return c->n_ctx; }

void pasada_seq_truncate(pasada_context *c, int32_t seq, int32_t p0) {
  if (seq < 0 || seq >= c->n_seq_max || p0 < 0) return;
  pa_kv_truncate(&c->kv, seq, p0);
}

int32_t pasada_seq_length(const pasada_context *c, int32_t seq) {
  if (seq < 0 || seq >= c->n_seq_max) return 0;
  return c->kv.len[seq];
}

void pasada_kv_get_stats(const pasada_context *c, pasada_kv_stats *out) {
  const pa_kv_cache *kv = &c->kv;
  out->block_size = kv->block_size;
  out->n_blocks = kv->n_blocks;
  out->n_free = kv->n_free;
  out->n_cached = kv->n_evictable;
  out->bytes = (int64_t)kv->n_blocks * kv->n_head_kv * (kv->k_part + kv->v_part) * kv->n_layer;
  out->type = kv->type == PA_KV_F16 ? PASADA_KV_F16 : kv->type == PA_KV_Q8 ? PASADA_KV_Q8 : PASADA_KV_F32;
}

int pasada_kv_type_from_name(const char *name) {
  if (!name) return -1;
  if (!strcmp(name, "f32")) return PASADA_KV_F32;
  if (!strcmp(name, "f16")) return PASADA_KV_F16;
  if (!strcmp(name, "q8")) return PASADA_KV_Q8;
  return -1;
}

const char *pasada_kv_type_name(pasada_kv_type type) {
  return type == PASADA_KV_F32 ? "f32" : type == PASADA_KV_F16 ? "f16" : type == PASADA_KV_Q8 ? "q8" : "default";
}

int32_t pasada_kv_blocks_needed(const pasada_context *c, int32_t n_tokens) {
  if (n_tokens <= 0) return 0;
  return (n_tokens + c->kv.block_size - 1) / c->kv.block_size;
}

int32_t pasada_kv_blocks_available(const pasada_context *c) { return pa_kv_available(&c->kv); }

int32_t pasada_seq_reuse_prefix(pasada_context *c, int32_t seq, const int32_t *tokens, int32_t n) {
  if (seq < 0 || seq >= c->n_seq_max || !tokens || n <= 0) return 0;
  if (n > c->n_ctx) n = c->n_ctx;
  return pa_kv_reuse_prefix(&c->kv, seq, tokens, n);
}

int pasada_decode(pasada_context *c, const pasada_batch *b) {
  const pa_hparams *hp = &c->model->hp;
  if (!b || b->n_tokens <= 0 || !b->token || !b->pos || !b->seq_id)
    return pa_error(PASADA_ERR_ARG, "empty or incomplete batch");
  if (b->n_tokens > c->n_batch_max)
    return pa_error(PASADA_ERR_ARG, "batch of %d tokens exceeds the context's batch size %d", b->n_tokens,
                    c->n_batch_max);
  /* Each sequence's positions must continue its cache: validate with a
   * running length per sequence, committed only if the whole batch is good. */
  int32_t n_out = 0;
  for (int32_t i = 0; i < b->n_tokens; i++) {
    int32_t t = b->token[i], s = b->seq_id[i];
    if (t < 0 || t >= hp->n_vocab)
      return pa_error(PASADA_ERR_ARG, "token id %d at batch index %d is out of range [0, %d)", t, i,
                      hp->n_vocab);
    if (s < 0 || s >= c->n_seq_max)
      return pa_error(PASADA_ERR_ARG, "sequence id %d is out of range [0, %d)", s, c->n_seq_max);
  }
  for (int32_t i = 0; i < b->n_tokens; i++) {
    int32_t s = b->seq_id[i], expect = c->kv.len[s];
    for (int32_t j = 0; j < i; j++) expect += b->seq_id[j] == s;
    if (b->pos[i] != expect)
      return pa_error(PASADA_ERR_ARG, "token %d of sequence %d has position %d, expected %d", i, s,
                      b->pos[i], expect);
    if (b->pos[i] >= c->n_ctx)
      return pa_error(PASADA_ERR_CONTEXT_FULL, "sequence %d is full: position %d, context size %d", s,
                      b->pos[i], c->n_ctx);
  }
  for (int32_t i = 0; i < b->n_tokens; i++) {
    bool want = b->want_logits ? b->want_logits[i] != 0 : i == b->n_tokens - 1;
    c->row_of[i] = want ? n_out++ : -1;
  }
  c->row_of_n = b->n_tokens;
  if (n_out > c->cap_logits) {
    pa_free(c->logits);
    c->logits = pa_alloc((size_t)n_out * (size_t)hp->n_vocab * sizeof(float));
    c->cap_logits = c->logits ? n_out : 0;
    if (!c->logits) return pa_error(PASADA_ERR_NOMEM, "out of memory for %d rows of logits", n_out);
  }
  c->n_logits = n_out;
  int rc = pa_kv_reserve(&c->kv, b->n_tokens, b->seq_id, b->pos);
  if (rc) return rc;
  /* Forward passes over equal slices of at most c->n_batch tokens. Each
   * writes its output rows at c->logits, so c->logits is moved past the
   * rows of the slices before it, and restored after. */
  float *const logits = c->logits;
  const int32_t n_pass = (b->n_tokens + c->n_batch - 1) / c->n_batch;
  for (int32_t k = 0, i0 = 0, rows = 0; k < n_pass; k++) {
    const int32_t i1 = (int32_t)((int64_t)b->n_tokens * (k + 1) / n_pass);
    int32_t n_out_k = 0;
    for (int32_t i = i0; i < i1; i++)
      if (c->row_of[i] >= 0) c->s.out_rows[n_out_k++] = i - i0;
    pa_fwd_batch fb = {.n = i1 - i0, .token = b->token + i0, .pos = b->pos + i0, .seq = b->seq_id + i0,
                       .n_out = n_out_k, .out_idx = c->s.out_rows};
    c->logits = logits ? logits + (size_t)rows * (size_t)hp->n_vocab : NULL;
    c->fwd_first = i0;
    if (hp->arch == PA_ARCH_GEMMA3)
      pa_forward_gemma3(c, &fb);
    else
      pa_forward_llama(c, &fb);
    rows += n_out_k;
    i0 = i1;
  }
  c->logits = logits;
  c->fwd_first = 0;
  pa_kv_commit(&c->kv, b->n_tokens, b->token, b->seq_id, b->pos);
  return PASADA_OK;
}

typedef struct {
  void (*fn)(void *arg, int32_t i);
  void *arg;
} parallel_call;

static void parallel_task(void *arg, int i, int n) {
  (void)n;
  const parallel_call *pc = arg;
  pc->fn(pc->arg, i);
}

void pasada_parallel_for(pasada_context *c, void (*fn)(void *arg, int32_t i), void *arg, int32_t n) {
  if (!c || !fn || n <= 0) return;
  parallel_call pc = {fn, arg};
  pa_pool_run_tasks(c->pool, parallel_task, &pc, n);
}

const float *pasada_get_logits(const pasada_context *c, int32_t i) {
  if (i < 0) i += c->row_of_n;
  if (i < 0 || i >= c->row_of_n || c->row_of[i] < 0) return NULL;
  return c->logits + (size_t)c->row_of[i] * (size_t)c->model->hp.n_vocab;
}
