/* model.c: the public model API: load (GGUF → hyper-parameters, weights,
 * tokenizer), free, accessors and the `info` report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/base.h"
#include "format/hf.h"
#include "model/model.h"

const char *pasada_last_error(void) { return pa_last_error(); }

pasada_model_params pasada_model_default_params(void) {
  pasada_model_params p = {.vocab_only = false};
  return p;
}

void pasada_model_free(pasada_model *m) {
  if (!m) return;
  if (m->layers) {
    for (int i = 0; i < m->hp.n_layer + m->hp.n_mtp; i++) {
      pa_layer *L = &m->layers[i];
      float *v[] = {L->attn_norm, L->ffn_norm, L->q_norm, L->k_norm, L->post_attn_norm,
                    L->post_ffn_norm, L->bq, L->bk, L->bv, L->bo, L->b_up, L->b_down,
                    L->attn_out_norm, L->attn_out_norm_b, L->out_norm, L->out_norm_b,
                    L->attn_sinks, L->router_b, L->exp_gate_b, L->exp_up_b, L->exp_down_b,
                    L->ssm_conv, L->ssm_a, L->ssm_dt, L->ssm_norm, L->ple_norm, L->router_norm,
                    L->exp_scale, L->ffn_norm_2, L->post_ffn_norm_1, L->post_ffn_norm_2};
      for (size_t j = 0; j < sizeof v / sizeof v[0]; j++) pa_free(v[j]);
      pa_free(L->exp_gate); /* exp_up and exp_down share its allocation */
      pa_free(L->q_split);
      pa_free(L->exp_split);
    }
    pa_free(m->layers);
  }
  pa_free(m->attn_sinks);
  pa_unmap_huge(m->repacked, m->repacked_bytes);
  pa_backend_free(m->be);
  pa_free(m->output_norm);
  pa_free(m->mtp_enorm);
  pa_free(m->mtp_split);
  pa_free(m->mtp_hnorm);
  pa_free(m->mtp_norm);
  pa_free(m->embd_norm);
  pa_free(m->embd_norm_b);
  pa_free(m->rope_freqs);
  pa_free(m->ones); /* every layer's v_norm */
  pa_free(m->ple_proj_norm);
  pa_free(m->rope_long);
  pa_free(m->rope_short);
  pa_tokenizer_free(m->tok);
  gguf_close(m->gguf);
  free(m->arch_name);
  pa_free(m);
}

/* Once the tokenizer has copied what it needs, the metadata at the head of
 * the mapped file (token texts, merges, scores: 2 to 6 MiB on the small
 * models, more than the tables built from it) is not read again; its pages
 * go back to the page cache so they stop counting in the process's memory.
 * The mapping is read-only and stays valid: a later read of a key (the chat
 * template, `info`) faults its pages back in from the file. The tables of
 * string arrays (pointers into these pages) are freed: a loaded model's file
 * answers arr.strs == NULL for its token list and merges. */
static void release_metadata_pages(gguf_file *g) {
  gguf_drop_string_arrays(g); /* the pointers into those pages: 16 bytes a token and a merge */
  long page = sysconf(_SC_PAGESIZE);
  for (uint32_t i = 0; page > 0 && i < g->n_parts; i++) { /* a split model: each part's head */
    const gguf_file *p = g->parts ? g->parts[i] : g;
    if (!p->map) continue;
    uintptr_t start = (uintptr_t)p->map, end = (start + p->data_offset) & ~((uintptr_t)page - 1);
    if (start % (uintptr_t)page == 0 && end > start) (void)madvise((void *)start, end - start, MADV_DONTNEED);
  }
}

static int load(struct pa_model *m, const char *path, bool vocab_only, bool prepare, const char *backend,
                pa_backend *be) {
  int rc = gguf_open_model(path, &m->gguf); /* a whole file or every part of a split one */
  if (rc) return rc;
  if ((rc = gguf_get_string(m->gguf, "general.architecture", !vocab_only, &m->arch_name))) return rc;
  if (!m->arch_name) m->arch_name = pa_strdup("unknown");
  if ((rc = pa_tokenizer_load(m->gguf, &m->tok))) return rc;
  m->vocab_only = vocab_only;
  if (vocab_only) {
    release_metadata_pages(m->gguf);
    return PASADA_OK;
  }
  if ((rc = pa_model_load_hparams(m))) return rc;
  const gguf_tensor *emb = gguf_get_tensor(m->gguf, "token_embd.weight");
  if (!emb) return pa_error(PASADA_ERR_FORMAT, "required tensor 'token_embd.weight' is missing");
  if (emb->ne[1] < pa_tokenizer_n_vocab(m->tok) || emb->ne[1] > (1 << 24))
    return pa_error(PASADA_ERR_FORMAT, "token_embd.weight has %lld rows for a vocabulary of %d tokens",
                    (long long)emb->ne[1], pa_tokenizer_n_vocab(m->tok));
  m->hp.n_vocab = (int32_t)emb->ne[1];
  if ((rc = pa_model_load_weights(m))) return rc;
  /* the backend that runs the model, fitted to its weights' size, prepares
   * them (the CPU repacks them for its kernels) */
  if (be) {
    m->be = be;
  } else {
    pasada_model_stats st;
    pasada_model_get_stats(m, &st);
    if ((rc = pa_backend_create(backend, (uint64_t)(st.bytes_layers + st.bytes_output), &m->be))) return rc;
  }
  if (m->hp.n_expert > 0 && !m->be->ops->moe)
    return pa_error(PASADA_ERR_UNSUPPORTED, "backend %s does not run mixture-of-experts models (%d experts); "
                    "use cpu, ref or vulkan", m->be->name, m->hp.n_expert);
  if (m->hp.ssm_conv > 0 && !m->be->ops->delta_net)
    return pa_error(PASADA_ERR_UNSUPPORTED, "backend %s does not run linear-attention (recurrent) layers; use cpu, "
                    "ref or vulkan", m->be->name);
  if (prepare && (rc = m->be->ops->prepare_weights(m->be, m))) return rc;
  release_metadata_pages(m->gguf);
  return PASADA_OK;
}

int pasada_model_load(const char *path, const pasada_model_params *params, pasada_model **out) {
  return pa_model_load_backend(path, params, NULL, out);
}

int pa_model_load_backend(const char *path, const pasada_model_params *params, pa_backend *be,
                          pasada_model **out) {
  *out = NULL;
  struct pa_model *m = pa_calloc(1, sizeof *m);
  if (!m) {
    pa_backend_free(be);
    return pa_error(PASADA_ERR_NOMEM, "out of memory");
  }
  bool vocab_only = params && params->vocab_only;
  int rc = load(m, path, vocab_only, !(params && params->keep_file_layout), params ? params->backend : NULL, be);
  if (rc && m->be != be) pa_backend_free(be); /* not adopted yet */
  if (rc) {
    /* gguf errors already name the file; name it for the others */
    const char *msg = pa_last_error();
    if (strncmp(msg, path, strlen(path)) != 0) pa_error_prefix("%s", path);
    pasada_model_free(m);
    return rc;
  }
  *out = m;
  return PASADA_OK;
}

const pasada_tokenizer *pasada_model_tokenizer(const pasada_model *m) { return m->tok; }
int32_t pasada_model_n_vocab(const pasada_model *m) {
  return m->vocab_only ? pa_tokenizer_n_vocab(m->tok) : m->hp.n_vocab;
}
int32_t pasada_model_n_ctx_train(const pasada_model *m) { return m->hp.n_ctx_train; }
const char *pasada_model_arch(const pasada_model *m) { return m->arch_name; }
int32_t pasada_model_n_embd(const pasada_model *m) { return m->hp.n_embd; }
bool pasada_model_is_recurrent(const pasada_model *m) { return m->hp.ssm_conv > 0; }
pasada_pooling pasada_model_pooling(const pasada_model *m) { return (pasada_pooling)m->pooling; }

static void fmt_bytes(char *buf, size_t cap, double b) {
  const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4) b /= 1024, i++;
  snprintf(buf, cap, "%.2f %s", b, u[i]);
}

int pasada_model_print_info(const pasada_model *m, FILE *f) {
  if (!m || !f) return pa_error(PASADA_ERR_ARG, "model info: no model or no file");
  const gguf_file *g = m->gguf;
  char *name = NULL;
  gguf_get_string(g, "general.name", false, &name);
  fprintf(f, "file:            %s\n", g->path ? g->path : "?");
  if (hf_is_dir(g->path)) { /* a Hugging Face folder: its GGUF view (hf.h) and safetensors files */
    fprintf(f, "format:          Hugging Face folder, %u safetensors file(s), read as GGUF (%llu metadata keys, "
               "%llu tensors)\n",
            g->n_parts - 1, (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors);
  } else {
    fprintf(f, "gguf version:    %u (%llu metadata keys, %llu tensors, alignment %llu)\n", g->version,
            (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors,
            (unsigned long long)g->alignment);
    if (g->n_parts > 1) fprintf(f, "split:           %u parts\n", g->n_parts);
  }
  fprintf(f, "name:            %s\n", name ? name : "(none)");
  free(name);
  fprintf(f, "architecture:    %s\n", m->arch_name);
  if (!m->vocab_only) {
    const pa_hparams *h = &m->hp;
    fprintf(f, "layers:          %d\n", h->n_layer);
    if (h->n_mtp)
      fprintf(f, "multi-token:     %d prediction layer (speculative decoding: --mtp)\n", h->n_mtp);
    fprintf(f, "embedding:       %d\n", h->n_embd);
    fprintf(f, "feed-forward:    %d\n", h->n_ff);
    if (h->n_expert)
      fprintf(f, "experts:         %d of %d per token, %d wide\n", h->n_expert_used, h->n_expert, h->n_ff_exp);
    fprintf(f, "heads:           %d (kv heads %d, head size %d, value size %d", h->n_head, h->n_head_kv, h->head_dim,
            h->head_dim_v);
    if (h->n_head_kv_swa != h->n_head_kv || h->head_dim_swa != h->head_dim || h->head_dim_v_swa != h->head_dim_v)
      fprintf(f, "; sliding layers: kv heads %d, head size %d, value size %d", h->n_head_kv_swa, h->head_dim_swa,
              h->head_dim_v_swa);
    fprintf(f, ")\n");
    fprintf(f, "context (train): %d\n", h->n_ctx_train);
    if (h->arch == PA_ARCH_BERT) {
      fprintf(f, "positions:       learned (%d), attention in both directions\n", h->n_ctx_train);
    } else {
      fprintf(f, "rope:            %s, dims %d, base %g, freq scale %g", h->rope_neox ? "neox" : "normal",
              h->rope_dim, h->rope_base, h->rope_freq_scale);
      if (h->sliding_window) fprintf(f, ", local base %g", h->rope_base_swa);
      if (m->yarn.factor > 0)
        fprintf(f, ", yarn factor %g over %d positions (attention factor %g)", m->yarn.factor, m->yarn.orig_ctx,
                h->rope_attn_factor);
      fprintf(f, "\n");
    }
    if (m->attn_sinks) fprintf(f, "attention sinks: a logit per head, every layer\n");
    if (h->sliding_window) {
      int n_swa = 0;
      for (int i = 0; i < h->n_layer; i++) n_swa += h->swa_layer[i];
      fprintf(f, "sliding window:  %d tokens on %d of %d layers\n", h->sliding_window, n_swa, h->n_layer);
    }
    fprintf(f, "norm epsilon:    %g%s\n", h->norm_eps, h->arch == PA_ARCH_BERT ? " (LayerNorm)" : "");
    fprintf(f, "activation:      %s\n", h->arch == PA_ARCH_BERT      ? "gelu-erf"
                                        : h->arch == PA_ARCH_GPT_OSS ? "swiglu-oai (clamped at 7, gated)"
                                        : h->act == PA_ACT_SILU      ? "silu (gated)"
                                                                     : "gelu-tanh (gated)");
    if (h->arch == PA_ARCH_BERT)
      fprintf(f, "vocab (embd):    %d (an encoder: no output head)\n", h->n_vocab);
    else
      fprintf(f, "vocab (embd):    %d%s\n", h->n_vocab,
              m->output.data == m->tok_embd.data ? " (output tied to embeddings)" : "");
    if (m->pooling) fprintf(f, "pooling:         %s\n", pasada_pooling_name((pasada_pooling)m->pooling));
    /* K and V of every layer for one position */
    /* K and V of every layer that stores them (not a KV-sharing or recurrent layer) */
    double kv_values = 0, q8_scales = 0;
    for (int l = 0; l < h->n_layer; l++) {
      if (h->recurrent[l] || (h->n_kv_shared > 0 && h->kv_from[l] != l)) continue;
      const pa_attn_shape a = pa_layer_attn(h, l);
      kv_values += (double)a.n_head_kv * (a.head_dim + a.head_dim_v);
      q8_scales += (double)a.n_head_kv * 2 * 4; /* a float for K and for V */
    }
    fprintf(f, "KV cache:        %.1f KiB per position (F16, the default; %.1f KiB as F32, %.1f KiB as Q8)\n",
            kv_values * 2 / 1024, kv_values * 4 / 1024, (kv_values + q8_scales) / 1024);
  }
  fprintf(f, "tokenizer:       %s (pre-tokenizer %s), %d tokens, bos %d, eos %d, add bos %s\n",
          pa_tokenizer_model_name(m->tok), pa_tokenizer_pre_name(m->tok), pa_tokenizer_n_vocab(m->tok),
          pa_tokenizer_bos(m->tok), pa_tokenizer_eos(m->tok), pa_tokenizer_add_bos(m->tok) ? "yes" : "no");
  /* tensor types: count and bytes */
  uint64_t count[PA_TYPE_COUNT] = {0}, bytes[PA_TYPE_COUNT] = {0}, elems = 0, total = 0;
  for (uint64_t i = 0; i < g->n_tensors; i++) {
    const gguf_tensor *t = &g->tensors[i];
    if (t->type < PA_TYPE_COUNT) {
      count[t->type]++;
      bytes[t->type] += t->nbytes;
    }
    total += t->nbytes;
    elems += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
  }
  char b[32];
  fmt_bytes(b, sizeof b, (double)total);
  fprintf(f, "tensors:         %llu, %.1f M parameters, %s", (unsigned long long)g->n_tensors,
          (double)elems / 1e6, b);
  if (elems) fprintf(f, " (%.2f bits per weight)", 8.0 * (double)total / (double)elems);
  fprintf(f, "\n");
  for (int t = 0; t < PA_TYPE_COUNT; t++) {
    if (!count[t]) continue;
    fmt_bytes(b, sizeof b, (double)bytes[t]);
    fprintf(f, "  %-6s %5llu tensors  %12s\n", pa_type_name((uint32_t)t), (unsigned long long)count[t], b);
  }
  return ferror(f) ? pa_error(PASADA_ERR_IO, "model info: writing failed") : PASADA_OK;
}
