/* context.c: contexts (KV cache, thread pool, the backend's state) and
 * pasada_decode: validates a batch, runs the architecture's forward pass,
 * keeps the sequences' lengths. Everything the forward pass needs is
 * allocated here, once; a decode step allocates nothing (the logits buffer grows only when a
 * batch asks for more rows than any before). A batch larger than
 * PA_FWD_TOKENS_MAX runs as several forward passes, so the scratch stays
 * small whatever the batch size. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "model/model.h"

pasada_context_params pasada_context_default_params(void) {
  pasada_context_params p = {.n_ctx = 0, .n_seq_max = 1, .n_batch = 512, .n_threads = 0,
                             .pooling = PASADA_POOLING_NONE, .embd_normalize = true};
  return p;
}

void pasada_context_free(pasada_context *c) {
  if (!c) return;
  if (c->bc) c->be->ops->context_free(c->bc);
  if (c->be != c->model->be) pa_backend_free((pa_backend *)c->be);
  pa_pool_free(c->pool);
  pa_kv_free(&c->kv);
  pa_free(c->out_rows);
  pa_free(c->hook_x);
  pa_free(c->logits);
  pa_free(c->hidden);
  pa_free(c->embd_pool);
  pa_free(c->pool_n);
  free(c->row_of);
  pa_hybrid_free(c);
  pa_free(c->hp_own);
  for (int32_t s = 0; c->h_rows && s < c->n_seq_max; s++) free(c->h_rows[s]); /* realloc's */
  pa_free(c->h_rows);
  pa_free(c->h_pass);
  pa_free(c->h_pos0);
  pa_free(c->all_idx);
  pa_free(c);
}

/* The most tokens of one forward pass. A larger batch runs as several
 * forward passes over consecutive slices of it (micro-batches), so the
 * backend's buffers (about 25 to 40 KiB per token on the small models) stay
 * a few MiB whatever n_batch is. The results are the same bits: every op
 * computes each token's row independently of the others in its pass, and a
 * slice's K and V are in the cache before any later slice attends to them.
 * pp512 against one 512-token pass: the same speed within the noise on
 * SmolLM2 and Gemma 3 270M (1 and 2 threads), faster on the Llama-1B shape
 * (its FFN buffers for 512 tokens outgrow the caches); 64 tokens were
 * slower. */
#define PA_FWD_TOKENS_MAX 128

/* Every matrix the forward pass multiplies by (the backend sizes its
 * scratch for them; of the experts, the first of each kind stands for all,
 * as they share their shape and type); mats holds 20 per layer (the
 * multi-token-prediction ones too) + 5. */
static int32_t model_matrices(const struct pa_model *m, const pa_matrix **mats) {
  int32_t n = 0;
  mats[n++] = &m->output;
  mats[n++] = &m->tok_embd;
  if (m->ple_model_proj.data) mats[n++] = &m->ple_model_proj;
  if (m->mtp_eh.data) mats[n++] = &m->mtp_eh, mats[n++] = &m->mtp_eh_h;
  for (int l = 0; l < m->hp.n_layer + m->hp.n_mtp; l++) {
    const pa_layer *L = &m->layers[l];
    const pa_matrix *lm[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down,
                             &L->wq_gate, &L->ssm_qkv, &L->ssm_z, &L->ssm_beta, &L->ssm_alpha, &L->ssm_out,
                             &L->shexp_gate, &L->ple_gate, &L->ple_proj};
    for (int i = 0; i < 16; i++)
      if (lm[i]->data) mats[n++] = lm[i]; /* bert has no gate */
    if (L->exp_gate) {
      mats[n++] = &L->router;
      mats[n++] = &L->exp_gate[0], mats[n++] = &L->exp_up[0], mats[n++] = &L->exp_down[0];
    }
  }
  return n;
}

/* The backends that run on the host and read every weight layout. */
static bool host_backend(const char *name) { return !strncmp(name, "cpu", 3) || !strcmp(name, "ref"); }

/* A context of model m; with mtp one that runs its multi-token-prediction
 * layer (pa_context_create_mtp). */
static int create(pasada_model *m, const pasada_context_params *params, bool mtp,
                  pasada_context **out) {
  *out = NULL;
  if (!m) return pa_error(PASADA_ERR_ARG, "no model");
  if (m->vocab_only) return pa_error(PASADA_ERR_ARG, "the model was loaded vocabulary-only");
  pasada_context_params p = params ? *params : pasada_context_default_params();
  const pa_hparams *hp = &m->hp;
  if (mtp && (m->hp.n_mtp == 0 || m->be->ops->layer))
    return pa_error(
        PASADA_ERR_UNSUPPORTED,
        m->hp.n_mtp == 0
            ? "%s has no multi-token-prediction layer"
            : "multi-token prediction does not run on backend %s (a model split by layers)",
        m->hp.n_mtp == 0 ? m->arch_name : m->be->name);
  if (mtp) p.pooling = PASADA_POOLING_NONE, p.n_rollback = 0;
  if (p.n_ctx <= 0) p.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
  if (p.n_ctx > (1 << 22)) return pa_error(PASADA_ERR_ARG, "context size %d is too large", p.n_ctx);
  if (hp->arch == PA_ARCH_BERT) {
    /* learned positions: no position past the table's */
    if (p.n_ctx > hp->n_ctx_train) p.n_ctx = hp->n_ctx_train;
    if (p.pooling == PASADA_POOLING_NONE)
      return pa_error(PASADA_ERR_ARG, "bert is an embedding model: a context on it needs a pooling (mean, cls, last)");
  }
  if (p.n_seq_max <= 0 || p.n_seq_max > 1024)
    return pa_error(PASADA_ERR_ARG, "n_seq_max %d is out of range [1, 1024]", p.n_seq_max);
  if (p.n_batch <= 0) p.n_batch = 512;
  if (p.n_rollback < 0 || p.n_rollback > PASADA_ROLLBACK_MAX)
    return pa_error(PASADA_ERR_ARG, "n_rollback %d is out of range [0, %d]", p.n_rollback,
                    PASADA_ROLLBACK_MAX);
  if (p.n_batch > 65536) p.n_batch = 65536;
  if (p.n_threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    p.n_threads = n > 0 ? (int32_t)n : 1;
  }
  if (p.n_threads > 256) p.n_threads = 256;
  if (p.kv_type != PASADA_KV_DEFAULT && p.kv_type != PASADA_KV_F32 && p.kv_type != PASADA_KV_F16 &&
      p.kv_type != PASADA_KV_Q8)
    return pa_error(PASADA_ERR_ARG, "unknown KV cache type %d", (int)p.kv_type);
  if (p.pooling < PASADA_POOLING_NONE || p.pooling > PASADA_POOLING_LAST)
    return pa_error(PASADA_ERR_ARG, "unknown pooling %d", (int)p.pooling);

  struct pa_context *c = pa_calloc(1, sizeof *c);
  if (!c) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  c->model = m;
  c->be = m->be;
  c->n_ctx = p.n_ctx;
  c->n_seq_max = p.n_seq_max;
  c->n_batch_max = p.n_batch;
  c->n_batch = p.n_batch < PA_FWD_TOKENS_MAX ? p.n_batch : PA_FWD_TOKENS_MAX;
  /* a bidirectional encoder's input is one pass, however long */
  if (hp->bidirectional) c->n_batch = p.n_batch;
  c->n_threads = p.n_threads;
  int rc = PASADA_OK;
  /* an MTP context: one attention layer of the model's shape, no recurrent state */
  if (mtp) {
    c->mtp = true;
    if (!(c->hp_own = pa_alloc(sizeof *c->hp_own)) ||
        !(c->hidden = pa_alloc((size_t)p.n_batch * (size_t)hp->n_embd * sizeof(float)))) {
      pasada_context_free(c);
      return pa_error(PASADA_ERR_NOMEM, "out of memory");
    }
    *c->hp_own = m->hp;
    c->hp_own->n_layer = 1, c->hp_own->n_mtp = 0, c->hp_own->ssm_conv = 0,
    c->hp_own->n_kv_shared = 0;
    memset(c->hp_own->recurrent, 0, sizeof c->hp_own->recurrent);
    memset(c->hp_own->swa_layer, 0, sizeof c->hp_own->swa_layer);
    hp = c->hp_own;
  }
  /* another backend than the model's: one that reads the weights as the
   * model's prepared them (the host backends read every layout) */
  if (p.backend && *p.backend && strcmp(p.backend, m->be->name) != 0) {
    /* a device backend reads only the weights it prepared itself; the
     * host backends read the host's copy in any layout */
    if (!host_backend(p.backend)) {
      pa_free(c);
      return pa_error(PASADA_ERR_ARG, "a context on backend '%s' cannot run a model loaded for '%s' (load the "
                      "model with backend '%s')", p.backend, m->be->name, p.backend);
    }
    pasada_model_stats st;
    pasada_model_get_stats(m, &st);
    pa_backend *be = NULL;
    rc = pa_backend_create(p.backend, (uint64_t)(st.bytes_layers + st.bytes_output), &be);
    if (rc) {
      pa_free(c);
      return rc;
    }
    c->be = be;
  }

  c->pool = pa_pool_create(p.n_threads);
  c->row_of = malloc((size_t)p.n_batch * sizeof(int32_t));
  c->out_rows = pa_alloc((size_t)c->n_batch * sizeof(int32_t));
  c->pooling = p.pooling;
  c->embd_normalize = p.embd_normalize;
  if (c->pooling) {
    const size_t E = (size_t)hp->n_embd;
    c->hidden = pa_alloc((size_t)c->n_batch * E * sizeof(float));
    c->embd_pool = pa_alloc((size_t)p.n_seq_max * E * sizeof(double));
    c->pool_n = pa_alloc((size_t)p.n_seq_max * sizeof(int32_t));
    if (!c->hidden || !c->embd_pool || !c->pool_n) {
      pasada_context_free(c);
      return pa_error(PASADA_ERR_NOMEM, "out of memory for the embeddings of %d sequences", p.n_seq_max);
    }
    memset(c->pool_n, 0, (size_t)p.n_seq_max * sizeof(int32_t));
  }
  if (!c->pool || !c->row_of || !c->out_rows) {
    pasada_context_free(c);
    return pa_error(PASADA_ERR_NOMEM, "out of memory creating a context");
  }
  const pa_kv_type kt = p.kv_type == PASADA_KV_Q8    ? PA_KV_Q8
                        : p.kv_type == PASADA_KV_F16 ? PA_KV_F16
                        : p.kv_type == PASADA_KV_F32 ? PA_KV_F32
                                                     : c->be->ops->default_kv_type;
  /* the block manager here; the values are the backend's (context_init):
   * each layer's heads (pa_layer_attn), none for a layer that reads
   * another's cache (gemma4's KV sharing) or is recurrent (qwen35) */
  pa_kv_shape shape[PA_MAX_LAYERS];
  for (int l = 0; l < hp->n_layer; l++) {
    const pa_attn_shape a = pa_layer_attn(hp, l);
    const bool none = hp->recurrent[l] || (hp->n_kv_shared > 0 && hp->kv_from[l] != l);
    shape[l] = (pa_kv_shape){none ? 0 : a.n_head_kv, a.head_dim, a.head_dim_v};
  }
  rc = pa_kv_init_layers(&c->kv, hp->n_layer, shape, p.n_seq_max, p.n_ctx, p.kv_block_size, p.kv_blocks);
  if (rc) {
    pasada_context_free(c);
    return rc; /* message set by pa_kv_init */
  }
  const pa_matrix **mats =
      pa_alloc(((size_t)(m->hp.n_layer + m->hp.n_mtp) * 20 + 5) * sizeof *mats);
  if (!mats) {
    pasada_context_free(c);
    return pa_error(PASADA_ERR_NOMEM, "out of memory");
  }
  /* LongRoPE: the long factors when the context is longer than what the
   * short ones served in training (llama.cpp's choice; transformers
   * chooses by each call's largest position instead) */
  const float *freqs = m->rope_freqs ? m->rope_freqs
                       : m->rope_long ? (p.n_ctx > m->n_ctx_orig ? m->rope_long : m->rope_short)
                                      : NULL;
  /* a model with recurrent layers: two state snapshots per sequence slot
   * (the end of its prompt and of the whole sequence, hybrid.c), and the
   * rollback checkpoints asked for */
  const int32_t n_snap = hp->ssm_conv > 0 ? 2 * p.n_seq_max : 0;
  const int32_t n_ckpt = n_snap && !p.pooling ? p.n_rollback : 0;
  if (n_snap && (rc = pa_hybrid_init(c, n_snap, n_ckpt))) {
    pa_free(mats);
    pasada_context_free(c);
    return rc;
  }
  const pa_bctx_params bp = {.hp = hp,
                             .rope_freqs = freqs,
                             .n_batch = c->n_batch,
                             .n_seq_max = p.n_seq_max,
                             .pool = c->pool,
                             .kv = &c->kv,
                             .kv_type = kt,
                             .mats = mats,
                             .n_mats = model_matrices(m, mats),
                             .n_snap = n_snap + p.n_seq_max * n_ckpt,
                             .attn_sinks = (const float *const *)m->attn_sinks};
  rc = c->be->ops->context_init(c->be, &bp, &c->bc);
  pa_free(mats);
  if (rc) {
    pasada_context_free(c);
    return rc;
  }
  *out = c;
  return PASADA_OK;
}

int pasada_context_create(pasada_model *m, const pasada_context_params *params,
                          pasada_context **out) {
  return create(m, params, false, out);
}

int pa_context_create_mtp(struct pa_model *m, const pasada_context_params *params,
                          struct pa_context **out) {
  return create(m, params, true, out);
}

void pa_context_set_mtp_input(struct pa_context *c, const float *rows) {
  c->mtp_in = rows;
}

const float *pa_context_mtp_hidden(const struct pa_context *c, int32_t i) {
  if (!c->mtp) return NULL;
  if (i < 0) i += c->row_of_n;
  if (i < 0 || i >= c->row_of_n || c->row_of[i] < 0) return NULL;
  return c->hidden + (size_t)c->row_of[i] * (size_t)c->model->hp.n_embd;
}

int pa_context_keep_hidden(struct pa_context *c) {
  if (c->keep_hidden) return PASADA_OK;
  if (c->pooling || c->mtp)
    return pa_error(PASADA_ERR_ARG, "an embedding or MTP context keeps no hidden states");
  const size_t S = (size_t)c->n_seq_max;
  c->h_rows = pa_calloc(S, sizeof *c->h_rows);
  c->h_pos0 = pa_calloc(3 * S, sizeof(int32_t));
  c->h_pass = pa_alloc((size_t)c->n_batch * (size_t)c->model->hp.n_embd * sizeof(float));
  c->all_idx = pa_alloc((size_t)c->n_batch * sizeof(int32_t));
  if (!c->h_rows || !c->h_pos0 || !c->h_pass || !c->all_idx)
    return pa_error(PASADA_ERR_NOMEM, "out of memory for the hidden states");
  c->h_n = c->h_pos0 + S, c->h_cap = c->h_n + S;
  for (int32_t i = 0; i < c->n_batch; i++) c->all_idx[i] = i;
  c->keep_hidden = true;
  return PASADA_OK;
}

const float *pa_context_hidden_rows(const struct pa_context *c, int32_t seq, int32_t *pos0,
                                    int32_t *n) {
  *pos0 = 0, *n = 0;
  if (!c->keep_hidden || seq < 0 || seq >= c->n_seq_max) return NULL;
  *pos0 = c->h_pos0[seq], *n = c->h_n[seq];
  return c->h_rows[seq];
}

void pa_context_hidden_drop(struct pa_context *c, int32_t seq, int32_t upto) {
  if (!c->keep_hidden || seq < 0 || seq >= c->n_seq_max) return;
  const int32_t k = upto - c->h_pos0[seq];
  if (k <= 0) return;
  const size_t E = (size_t)c->model->hp.n_embd;
  if (k >= c->h_n[seq]) {
    c->h_n[seq] = 0;
  } else {
    memmove(c->h_rows[seq], c->h_rows[seq] + (size_t)k * E,
            (size_t)(c->h_n[seq] - k) * E * sizeof(float));
    c->h_n[seq] -= k;
  }
  c->h_pos0[seq] = upto;
}

/* The pass's final hidden states (after output_norm), each appended to its
 * sequence's rows at its position (out of memory: the sequence's rows are
 * dropped, and a drafter finds none to draft from). */
static void keep_pass_hidden(pasada_context *c, const pa_fwd_batch *fb) {
  const size_t E = (size_t)c->model->hp.n_embd;
  pa_fwd_batch all = *fb;
  all.n_out = fb->n, all.out_idx = c->all_idx;
  c->be->ops->hidden(c->bc, &all, c->model->output_norm, c->h_pass);
  for (int32_t t = 0; t < fb->n; t++) {
    const int32_t s = fb->seq[t], p = fb->pos[t];
    if (c->h_n[s] == 0 || p < c->h_pos0[s] || p > c->h_pos0[s] + c->h_n[s])
      c->h_pos0[s] = p, c->h_n[s] = 0;
    c->h_n[s] = p - c->h_pos0[s];
    if (c->h_n[s] + 1 > c->h_cap[s]) {
      const int32_t cap = c->h_cap[s] ? 2 * c->h_cap[s] : 64;
      float *r = realloc(c->h_rows[s], (size_t)cap * E * sizeof(float));
      if (!r) {
        c->h_n[s] = 0;
        continue;
      }
      c->h_rows[s] = r, c->h_cap[s] = cap;
    }
    memcpy(c->h_rows[s] + (size_t)c->h_n[s] * E, c->h_pass + (size_t)t * E, E * sizeof(float));
    c->h_n[s]++;
  }
}

const char *pasada_context_backend(const pasada_context *c) { return c ? c->be->name : NULL; }

int pa_context_set_layer_hook(struct pa_context *c, pa_layer_hook hook, void *user) {
  if (hook && !c->hook_x) {
    c->hook_x = pa_alloc((size_t)c->n_batch * (size_t)c->model->hp.n_embd * sizeof(float));
    if (!c->hook_x) return pa_error(PASADA_ERR_NOMEM, "out of memory for the layer hook's buffer");
  }
  c->layer_hook = hook;
  c->layer_hook_user = user;
  return PASADA_OK;
}

void pa_layer_done(struct pa_context *c, int l, int32_t n_tok) {
  if (!c->layer_hook) return;
  const int64_t E = c->model->hp.n_embd;
  c->be->ops->download(c->bc, PA_BUF_X, 0, c->hook_x, (int64_t)n_tok * E);
  c->layer_hook(c->layer_hook_user, l, c->hook_x, n_tok, E);
}

int32_t pasada_context_n_ctx(const pasada_context *c) { return c->n_ctx; }

void pasada_seq_truncate(pasada_context *c, int32_t seq, int32_t p0) {
  if (seq < 0 || seq >= c->n_seq_max || p0 < 0) return;
  if (c->keep_hidden && c->h_n[seq] > p0 - c->h_pos0[seq])
    c->h_n[seq] = p0 > c->h_pos0[seq] ? p0 - c->h_pos0[seq] : 0;
  if (c->n_snap) {
    pa_hybrid_truncate(c, seq, p0);
    return;
  }
  pa_kv_truncate(&c->kv, seq, p0);
}

int pasada_seq_snapshot(pasada_context *c, int32_t seq) {
  if (!c || seq < 0 || seq >= c->n_seq_max)
    return pa_error(PASADA_ERR_ARG, "pasada_seq_snapshot: no sequence %d", seq);
  if (c->n_snap) pa_hybrid_snapshot(c, seq);
  return PASADA_OK;
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
  out->bytes = kv->values->bytes;
  out->type = kv->values->type == PA_KV_F16  ? PASADA_KV_F16
              : kv->values->type == PA_KV_Q8 ? PASADA_KV_Q8
                                             : PASADA_KV_F32;
}

int pasada_kv_type_from_name(const char *name, pasada_kv_type *out) {
  if (!out) return pa_error(PASADA_ERR_ARG, "kv type: no output given");
  if (!name) return pa_error(PASADA_ERR_ARG, "kv type: no name");
  if (!strcmp(name, "f32")) *out = PASADA_KV_F32;
  else if (!strcmp(name, "f16")) *out = PASADA_KV_F16;
  else if (!strcmp(name, "q8")) *out = PASADA_KV_Q8;
  else return pa_error(PASADA_ERR_ARG, "unknown kv type '%.40s' (known: f16, f32, q8)", name);
  return PASADA_OK;
}

const char *pasada_kv_type_name(pasada_kv_type type) {
  return type == PASADA_KV_F32 ? "f32" : type == PASADA_KV_F16 ? "f16" : type == PASADA_KV_Q8 ? "q8" : "default";
}

int32_t pasada_kv_blocks_needed(const pasada_context *c, int32_t n_tokens) {
  if (n_tokens <= 0) return 0;
  return (n_tokens + c->kv.block_size - 1) / c->kv.block_size;
}

int32_t pasada_kv_blocks_available(const pasada_context *c) { return pa_kv_available(&c->kv); }

/* The cache's events as the public type: the same fields (the callback
 * and its user travel in the context). */
static void kv_event_relay(void *user, const pa_kv_event *ev) {
  pasada_context *c = user;
  const pasada_kv_event out = {.kind = ev->kind == PA_KV_EVENT_STORED ? PASADA_KV_EVENT_STORED
                                                                      : PASADA_KV_EVENT_REMOVED,
                               .block_hash = ev->hash,
                               .parent_hash = ev->parent_hash,
                               .tokens = ev->tokens,
                               .n_tokens = ev->n_tokens};
  c->kv_event_fn(c->kv_event_user, &out);
}

void pasada_kv_set_event_callback(pasada_context *c, pasada_kv_event_fn fn, void *user) {
  if (!c) return;
  c->kv_event_fn = fn;
  c->kv_event_user = user;
  c->kv.on_event = fn ? kv_event_relay : NULL;
  c->kv.event_user = fn ? c : NULL;
}

int32_t pasada_kv_cached_blocks(const pasada_context *c, uint64_t *hashes, uint64_t *parents,
                                int32_t max) {
  if (!c || (!hashes && max > 0)) return 0;
  return pa_kv_cached_hashes(&c->kv, hashes, parents, max < 0 ? 0 : max);
}

int32_t pasada_seq_reuse_prefix(pasada_context *c, int32_t seq, const int32_t *tokens, int32_t n) {
  if (seq < 0 || seq >= c->n_seq_max || !tokens || n <= 0) return 0;
  if (c->pooling) return 0; /* a pool needs every token's hidden state */
  if (n > c->n_ctx) n = c->n_ctx;
  if (c->n_snap) return pa_hybrid_reuse_prefix(c, seq, tokens, n);
  return pa_kv_reuse_prefix(&c->kv, seq, tokens, n);
}

static void forward(pasada_context *c, const pa_fwd_batch *fb) {
  if (c->model->hp.arch == PA_ARCH_GEMMA3 || c->model->hp.arch == PA_ARCH_GEMMA2)
    pa_forward_gemma3(c, fb);
  else if (c->model->hp.arch == PA_ARCH_GEMMA4)
    pa_forward_gemma4(c, fb);
  else if (c->model->hp.arch == PA_ARCH_BERT)
    pa_forward_bert(c, fb);
  else if (c->mtp)
    pa_forward_qwen35_mtp(c, fb);
  else if (c->model->hp.arch == PA_ARCH_QWEN35)
    pa_forward_qwen35(c, fb);
  else
    pa_forward_llama(c, fb);
}

/* Adds hidden state h (n floats) of a token at position pos to its
 * sequence's pool. */
static void pool_add(pasada_context *c, int32_t seq, int32_t pos, const float *h, int64_t n) {
  double *p = c->embd_pool + (size_t)seq * (size_t)n;
  if (pos == 0) {
    memset(p, 0, (size_t)n * sizeof(double));
    c->pool_n[seq] = 0;
  }
  if (c->pooling == PASADA_POOLING_MEAN)
    for (int64_t j = 0; j < n; j++) p[j] += h[j];
  else if (c->pooling == PASADA_POOLING_LAST || pos == 0)
    for (int64_t j = 0; j < n; j++) p[j] = h[j];
  c->pool_n[seq]++;
}

/* pasada_decode of an embedding context (the batch validated and its KV
 * room not yet taken): forward passes whose output is every token's final
 * hidden state, each added to its sequence's pool. */
static int decode_embeddings(pasada_context *c, const pasada_batch *b) {
  const int64_t E = c->model->hp.n_embd;
  c->row_of_n = b->n_tokens;
  for (int32_t i = 0; i < b->n_tokens; i++) c->row_of[i] = -1; /* no logits */
  c->n_logits = 0;
  int rc = pa_kv_reserve(&c->kv, b->n_tokens, b->seq_id, b->pos);
  if (rc) return rc;
  const int32_t n_pass = (b->n_tokens + c->n_batch - 1) / c->n_batch;
  for (int32_t k = 0, i0 = 0; k < n_pass; k++) {
    const int32_t i1 = (int32_t)((int64_t)b->n_tokens * (k + 1) / n_pass);
    for (int32_t i = 0; i < i1 - i0; i++) c->out_rows[i] = i;
    pa_fwd_batch fb = {.n = i1 - i0, .token = b->token + i0, .pos = b->pos + i0, .seq = b->seq_id + i0,
                       .n_out = i1 - i0, .out_idx = c->out_rows};
    c->fwd_first = i0;
    forward(c, &fb);
    for (int32_t i = 0; i < fb.n; i++) pool_add(c, fb.seq[i], fb.pos[i], c->hidden + (size_t)i * (size_t)E, E);
    i0 = i1;
  }
  c->fwd_first = 0;
  pa_kv_commit(&c->kv, b->n_tokens, b->token, b->seq_id, b->pos);
  return PASADA_OK;
}

int pasada_get_embeddings(const pasada_context *c, int32_t seq, float *out) {
  if (!c || !out) return pa_error(PASADA_ERR_ARG, "embeddings: no context or no output");
  if (!c->pooling) return pa_error(PASADA_ERR_ARG, "embeddings: the context has no pooling (a language-model context)");
  if (seq < 0 || seq >= c->n_seq_max)
    return pa_error(PASADA_ERR_ARG, "embeddings: sequence id %d is out of range [0, %d)", seq, c->n_seq_max);
  if (c->pool_n[seq] == 0 || c->kv.len[seq] == 0)
    return pa_error(PASADA_ERR_ARG, "embeddings: sequence %d has no tokens", seq);
  const int64_t E = c->model->hp.n_embd;
  const double *p = c->embd_pool + (size_t)seq * (size_t)E;
  const double scale = c->pooling == PASADA_POOLING_MEAN ? 1.0 / c->pool_n[seq] : 1.0;
  double ss = 0;
  for (int64_t j = 0; j < E; j++) ss += p[j] * scale * (p[j] * scale);
  /* a zero vector stays zero (as torch's F.normalize with its eps) */
  const double norm = c->embd_normalize && ss > 0 ? 1.0 / sqrt(ss) : 1.0;
  for (int64_t j = 0; j < E; j++) out[j] = (float)(p[j] * scale * norm);
  return PASADA_OK;
}

int pasada_pooling_from_name(const char *name, pasada_pooling *out) {
  if (!out || !name) return pa_error(PASADA_ERR_ARG, "pooling: no name or no output");
  if (!strcmp(name, "none")) *out = PASADA_POOLING_NONE;
  else if (!strcmp(name, "mean")) *out = PASADA_POOLING_MEAN;
  else if (!strcmp(name, "cls")) *out = PASADA_POOLING_CLS;
  else if (!strcmp(name, "last")) *out = PASADA_POOLING_LAST;
  else return pa_error(PASADA_ERR_ARG, "unknown pooling '%.40s' (known: last, mean, cls, none)", name);
  return PASADA_OK;
}

const char *pasada_pooling_name(pasada_pooling p) {
  return p == PASADA_POOLING_MEAN ? "mean" : p == PASADA_POOLING_CLS ? "cls" : p == PASADA_POOLING_LAST ? "last" : "none";
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
  if (hp->bidirectional) /* every token sees the whole input: all of it in this batch */
    for (int32_t i = 0; i < b->n_tokens; i++)
      if (c->kv.len[b->seq_id[i]] != 0)
        return pa_error(PASADA_ERR_ARG,
                        "%s attends in both directions: sequence %d's whole input must be in one batch "
                        "(it already has %d positions)",
                        c->model->arch_name, b->seq_id[i], c->kv.len[b->seq_id[i]]);
  if (c->pooling) return decode_embeddings(c, b);
  if (c->mtp && !c->mtp_in)
    return pa_error(PASADA_ERR_ARG, "an MTP context's batch needs its hidden states");
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
      if (c->row_of[i] >= 0) c->out_rows[n_out_k++] = i - i0;
    pa_fwd_batch fb = {.n = i1 - i0, .token = b->token + i0, .pos = b->pos + i0, .seq = b->seq_id + i0,
                       .n_out = n_out_k, .out_idx = c->out_rows};
    c->logits = logits ? logits + (size_t)rows * (size_t)hp->n_vocab : NULL;
    if (c->mtp) c->hidden_out = c->hidden + (size_t)rows * (size_t)hp->n_embd;
    c->fwd_first = i0;
    if (c->n_ckpt > 0) {
      pa_hybrid_pass(c, &fb);
      fb.ckpt = c->ckpt_slot;
    }
    forward(c, &fb);
    if (c->keep_hidden) keep_pass_hidden(c, &fb);
    rows += n_out_k;
    i0 = i1;
  }
  c->logits = logits;
  c->mtp_in = NULL;
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
