/* loader.c: from a validated GGUF file to a model: the architecture's
 * hyper-parameters (checked for sane ranges and mutual consistency) and its
 * weight tensors (checked for presence, shape and a supported type); what
 * is particular to one family is in loader_arch.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/base.h"
#include "base/env.h"
#include "base/threadpool.h"
#include "kernels/layout.h"
#include "model/loader_internal.h"
#include "model/model.h"

int ld_key_u32(struct pa_model *m, const char *suffix, bool required, uint32_t *out) {
  char key[256];
  snprintf(key, sizeof key, "%s.%s", m->arch_name, suffix);
  return gguf_get_u32(m->gguf, key, required, out);
}

int ld_key_f32(struct pa_model *m, const char *suffix, bool required, float *out) {
  char key[256];
  snprintf(key, sizeof key, "%s.%s", m->arch_name, suffix);
  return gguf_get_f32(m->gguf, key, required, out);
}

int ld_check_range(const char *what, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    return pa_error(PASADA_ERR_FORMAT, "hyper-parameter %s = %lld is out of range [%lld, %lld]",
                    what, (long long)v, (long long)lo, (long long)hi);
  return PASADA_OK;
}

/* Mixture of experts (llama.cpp's keys): qwen3moe and qwen35moe have
 * experts in every layer (expert_count required), llama has them when expert_count > 0
 * (Mixtral; its experts are feed_forward_length wide unless
 * expert_feed_forward_length says otherwise), gemma4 too (beside its dense
 * FFN: expert_feed_forward_length required). */
static int load_experts(struct pa_model *m, uint32_t n_ff) {
  pa_hparams *hp = &m->hp;
  const bool moe_arch = hp->arch == PA_ARCH_QWEN3MOE || hp->arch == PA_ARCH_GPT_OSS || pa_is_qwen35moe(m);
  const bool gemma4 = hp->arch == PA_ARCH_GEMMA4;
  if (!moe_arch && hp->arch != PA_ARCH_LLAMA && !gemma4) return PASADA_OK;
  uint32_t n_expert = 0, n_used = 0, n_ff_exp = n_ff;
  int rc;
  if ((rc = ld_key_u32(m, "expert_count", moe_arch, &n_expert))) return rc;
  if (!moe_arch && n_expert == 0) return PASADA_OK;
  if ((rc = ld_check_range("expert_count", n_expert, 1, PA_MAX_EXPERTS))) return rc;
  if ((rc = ld_key_u32(m, "expert_used_count", true, &n_used))) return rc;
  if ((rc = ld_check_range("expert_used_count", n_used, 1,
                        n_expert < PA_MAX_EXPERTS_USED ? n_expert : PA_MAX_EXPERTS_USED)))
    return rc;
  if ((rc = ld_key_u32(m, "expert_feed_forward_length", moe_arch || gemma4, &n_ff_exp))) return rc;
  if ((rc = ld_check_range("expert_feed_forward_length", n_ff_exp, 1, 1 << 18))) return rc;
  hp->n_expert = (int32_t)n_expert;
  hp->n_expert_used = (int32_t)n_used;
  hp->n_ff_exp = (int32_t)n_ff_exp;
  return PASADA_OK;
}

/* A count that may be per layer (an array of n_layer integers, as
 * llama.cpp writes gemma4's feed_forward_length and head_count_kv) or one
 * for every layer: into out[0, n_layer); out[0] is the default of every
 * layer when the key is absent and not required. */
int ld_key_u32_layers(struct pa_model *m, const char *suffix, bool required, uint32_t n_layer, uint32_t *out) {
  char key[256];
  snprintf(key, sizeof key, "%s.%s", m->arch_name, suffix);
  const gguf_value *v = gguf_get(m->gguf, key);
  if (v && v->type == GGUF_TYPE_ARRAY) {
    const uint32_t t = v->arr.elem_type;
    if (!(t <= GGUF_TYPE_INT32 || t == GGUF_TYPE_UINT64 || t == GGUF_TYPE_INT64))
      return pa_error(PASADA_ERR_FORMAT, "%s is an array of a non-integer type", key);
    if (v->arr.count != n_layer)
      return pa_error(PASADA_ERR_FORMAT, "%s has %llu entries for %u layers", key,
                      (unsigned long long)v->arr.count, n_layer);
    for (uint32_t i = 0; i < n_layer; i++) {
      const int64_t x = gguf_arr_i64(v, i);
      if (x < 0 || x > INT32_MAX)
        return pa_error(PASADA_ERR_FORMAT, "%s[%u] = %lld is out of range", key, i, (long long)x);
      out[i] = (uint32_t)x;
    }
    return PASADA_OK;
  }
  uint32_t one = out[0];
  const int rc = gguf_get_u32(m->gguf, key, required, &one);
  for (uint32_t i = 0; !rc && i < n_layer; i++) out[i] = one;
  return rc;
}

/* The sliding-window layers: attention.sliding_window_pattern as one bool
 * per layer, or a period (layer i is local unless (i + 1) % period == 0;
 * `period` when absent). */
int ld_load_swa_pattern(struct pa_model *m, uint32_t period) {
  pa_hparams *hp = &m->hp;
  const uint32_t n_layer = (uint32_t)hp->n_layer;
  char key[256];
  snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", m->arch_name);
  const gguf_value *pat = gguf_get(m->gguf, key);
  if (pat && pat->type == GGUF_TYPE_ARRAY && pat->arr.elem_type == GGUF_TYPE_BOOL) {
    if (pat->arr.count != n_layer)
      return pa_error(PASADA_ERR_FORMAT, "%s has %llu entries for %u layers", key,
                      (unsigned long long)pat->arr.count, n_layer);
    for (uint32_t i = 0; i < n_layer; i++) hp->swa_layer[i] = gguf_arr_i64(pat, i) != 0;
    return PASADA_OK;
  }
  int rc = gguf_get_u32(m->gguf, key, false, &period);
  if (rc) return rc;
  if (period == 0) period = 1;
  for (uint32_t i = 0; i < n_layer; i++) hp->swa_layer[i] = (i + 1) % period != 0;
  return PASADA_OK;
}

int pa_model_load_hparams(struct pa_model *m) {
  pa_hparams *hp = &m->hp;
  const char *a = m->arch_name;
  if (!strcmp(a, "llama")) hp->arch = PA_ARCH_LLAMA;
  else if (!strcmp(a, "qwen2")) hp->arch = PA_ARCH_QWEN2;
  else if (!strcmp(a, "qwen3")) hp->arch = PA_ARCH_QWEN3;
  else if (!strcmp(a, "qwen3moe")) hp->arch = PA_ARCH_QWEN3MOE;
  else if (!strcmp(a, "gemma2")) hp->arch = PA_ARCH_GEMMA2;
  else if (!strcmp(a, "gemma3")) hp->arch = PA_ARCH_GEMMA3;
  else if (!strcmp(a, "phi3")) hp->arch = PA_ARCH_PHI3;
  else if (!strcmp(a, "bert")) hp->arch = PA_ARCH_BERT;
  else if (!strcmp(a, "gpt-oss")) hp->arch = PA_ARCH_GPT_OSS;
  else if (!strcmp(a, "gemma4")) hp->arch = PA_ARCH_GEMMA4;
  else if (!strcmp(a, "qwen35") || pa_is_qwen35moe(m)) hp->arch = PA_ARCH_QWEN35;
  else
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "architecture '%s' is not supported (supported: llama, qwen2, qwen3, qwen3moe, gemma2, "
                    "gemma3, gemma4, phi3, bert, gpt-oss, qwen35, qwen35moe)",
                    a);

  uint32_t n_layer = 0, n_embd = 0, n_head = 0, n_ff = 0, n_ctx = 0;
  int rc;
  if ((rc = ld_key_u32(m, "block_count", true, &n_layer)) ||
      (rc = ld_check_range("block_count", n_layer, 1, PA_MAX_LAYERS)) ||
      (rc = ld_key_u32(m, "embedding_length", true, &n_embd)) ||
      (rc = ld_key_u32(m, "attention.head_count", true, &n_head)))
    return rc;
  /* qwen35: the last nextn_predict_layers of the blocks are multi-token
   * prediction layers (llama.cpp's convention for nextn layers) */
  uint32_t n_mtp = 0;
  if (hp->arch == PA_ARCH_QWEN35 && (rc = ld_key_u32(m, "nextn_predict_layers", false, &n_mtp)))
    return rc;
  if (n_mtp > 1 || n_mtp >= n_layer)
    return pa_error(
        n_mtp > 1 ? PASADA_ERR_UNSUPPORTED : PASADA_ERR_FORMAT,
        "nextn_predict_layers %u of %u blocks: pasada runs one multi-token-prediction layer after "
        "at least one other",
        n_mtp, n_layer);
  /* counts that may be per layer (gemma4): the FFN widths, the KV heads */
  static uint32_t ff[PA_MAX_LAYERS], kvh[PA_MAX_LAYERS];
  kvh[0] = n_head;
  /* qwen35moe: no dense FFN; its FFN width is its shared expert's */
  uint32_t shexp = 0;
  if (pa_is_qwen35moe(m) && ((rc = ld_key_u32(m, "expert_shared_feed_forward_length", true, &shexp)) ||
                             (rc = ld_check_range("expert_shared_feed_forward_length", shexp, 1, 1 << 18))))
    return rc;
  ff[0] = shexp;
  if ((rc = ld_key_u32_layers(m, "feed_forward_length", !pa_is_qwen35moe(m), n_layer, ff)) ||
      (rc = ld_key_u32_layers(m, "attention.head_count_kv", false, n_layer, kvh)))
    return rc;
  for (uint32_t i = 0; i < n_layer; i++) {
    if (ff[i] > n_ff) n_ff = ff[i];
    /* gemma4: one count per kind of layer, checked with the kinds (ld_gemma4_hparams) */
    if (kvh[i] != kvh[0] && hp->arch != PA_ARCH_GEMMA4)
      return pa_error(PASADA_ERR_UNSUPPORTED, "attention.head_count_kv differs between layers (%u, %u): not supported",
                      kvh[0], kvh[i]);
    if ((rc = ld_check_range("attention.head_count_kv", kvh[i], 1, n_head))) return rc;
    if (n_head % kvh[i])
      return pa_error(PASADA_ERR_FORMAT, "attention.head_count %u is not a multiple of head_count_kv %u", n_head,
                      kvh[i]);
    m->kv_heads_layer[i] = (int32_t)kvh[i];
    if (ff[i] != ff[0] && hp->arch != PA_ARCH_GEMMA4)
      return pa_error(PASADA_ERR_UNSUPPORTED, "feed_forward_length differs between layers: not supported for %s", a);
    if ((rc = ld_check_range("feed_forward_length", ff[i], 1, 1 << 18))) return rc;
    m->ff_layer[i] = (int32_t)ff[i];
  }
  if (shexp) n_ff = shexp;
  n_ctx = 4096;
  if ((rc = ld_key_u32(m, "context_length", false, &n_ctx))) return rc;
  uint32_t n_head_kv = kvh[0];
  /* llama.cpp's enum: 0 none, 1 mean, 2 cls, 3 last (4 rank: not an
   * embedding pasada pools, read as none) */
  uint32_t pooling = 0;
  if ((rc = ld_key_u32(m, "pooling_type", false, &pooling))) return rc;
  m->pooling = pooling <= 3 ? (int32_t)pooling : 0;
  if ((rc = ld_check_range("embedding_length", n_embd, 1, 1 << 16)) ||
      (rc = ld_check_range("attention.head_count", n_head, 1, 1024)) ||
      (rc = ld_check_range("attention.head_count_kv", n_head_kv, 1, n_head)) ||
      (rc = ld_check_range("feed_forward_length", n_ff, 1, 1 << 18)) ||
      (rc = ld_check_range("context_length", n_ctx, 1, 1 << 24)))
    return rc;
  if (n_head % n_head_kv)
    return pa_error(PASADA_ERR_FORMAT, "attention.head_count %u is not a multiple of head_count_kv %u",
                    n_head, n_head_kv);
  uint32_t head_dim = n_embd / n_head, head_dim_v;
  if ((rc = ld_key_u32(m, "attention.key_length", false, &head_dim))) return rc;
  head_dim_v = head_dim;
  if ((rc = ld_key_u32(m, "attention.value_length", false, &head_dim_v))) return rc;
  if ((rc = ld_check_range("attention.key_length", head_dim, 2, 1024)) ||
      (rc = ld_check_range("attention.value_length", head_dim_v, 1, 1024)))
    return rc;
  if (head_dim % 2) return pa_error(PASADA_ERR_FORMAT, "attention.key_length %u is odd", head_dim);
  uint32_t rope_dim = head_dim;
  if ((rc = ld_key_u32(m, "rope.dimension_count", false, &rope_dim))) return rc;
  if (rope_dim % 2 || rope_dim > head_dim || rope_dim == 0)
    return pa_error(PASADA_ERR_FORMAT, "rope.dimension_count %u must be even and at most the head size %u",
                    rope_dim, head_dim);

  hp->n_layer = (int32_t)(n_layer - n_mtp);
  hp->n_mtp = (int32_t)n_mtp;
  hp->n_embd = (int32_t)n_embd;
  hp->n_head = (int32_t)n_head;
  hp->n_head_kv = (int32_t)n_head_kv;
  hp->head_dim = (int32_t)head_dim;
  hp->head_dim_v = (int32_t)head_dim_v;
  hp->n_ff = (int32_t)n_ff;
  hp->n_ctx_train = (int32_t)n_ctx;
  hp->rope_dim = (int32_t)rope_dim;
  /* one attention shape for both kinds of layers unless the family reads its own (gemma4) */
  hp->n_head_kv_swa = hp->n_head_kv, hp->head_dim_swa = hp->head_dim, hp->head_dim_v_swa = hp->head_dim_v;
  hp->rope_dim_swa = hp->rope_dim;

  hp->norm_eps = 1e-5f;
  /* bert's norms are LayerNorms (attention.layer_norm_epsilon) */
  const char *eps_key = hp->arch == PA_ARCH_BERT ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon";
  if ((rc = ld_key_f32(m, eps_key, false, &hp->norm_eps))) return rc;
  if (!(hp->norm_eps > 0 && hp->norm_eps < 1))
    return pa_error(PASADA_ERR_FORMAT, "%s %g is out of range (0, 1)", eps_key, hp->norm_eps);
  if (hp->arch == PA_ARCH_BERT) {
    bool causal = false;
    char ck[256];
    snprintf(ck, sizeof ck, "%s.attention.causal", a);
    if ((rc = gguf_get_bool(m->gguf, ck, false, &causal))) return rc;
    if (causal) return pa_error(PASADA_ERR_UNSUPPORTED, "%s = true: a causal bert is not supported", ck);
    hp->bidirectional = true;
  }
  hp->rope_base = 10000.0f;
  if ((rc = ld_key_f32(m, "rope.freq_base", false, &hp->rope_base))) return rc;
  if (!(hp->rope_base > 1 && hp->rope_base < 1e12f))
    return pa_error(PASADA_ERR_FORMAT, "rope.freq_base %g is out of range", hp->rope_base);
  hp->rope_freq_scale = 1.0f;
  char *scaling = NULL;
  char key[256];
  snprintf(key, sizeof key, "%s.rope.scaling.type", a);
  if ((rc = gguf_get_string(m->gguf, key, false, &scaling))) return rc;
  if (scaling && strcmp(scaling, "none") != 0) {
    const bool yarn = !strcmp(scaling, "yarn");
    if (strcmp(scaling, "linear") != 0 && !yarn) {
      rc = pa_error(PASADA_ERR_UNSUPPORTED, "rope scaling type '%s' is not supported (linear, yarn)", scaling);
      free(scaling);
      return rc;
    }
    float factor = 1.0f;
    if ((rc = ld_key_f32(m, "rope.scaling.factor", false, &factor))) {
      free(scaling);
      return rc;
    }
    if (!(factor >= 1.0f && factor <= 1024.0f)) {
      free(scaling);
      return pa_error(PASADA_ERR_FORMAT, "rope.scaling.factor %g is out of range", factor);
    }
    hp->rope_freq_scale = 1.0f / factor;
    free(scaling);
    if (yarn && (rc = ld_yarn(m, factor))) return rc;
    scaling = NULL;
  }
  free(scaling);
  hp->rope_base_swa = hp->rope_base;
  hp->rope_freq_scale_swa = hp->rope_freq_scale;
  hp->rope_neox = hp->arch != PA_ARCH_LLAMA;
  hp->attn_scale = 1.0f / sqrtf((float)head_dim);
  hp->embed_scale = 1.0f;
  hp->act = PA_ACT_SILU;
  hp->rope_attn_factor = 1.0f;

  if ((rc = load_experts(m, n_ff))) return rc;

  if (hp->arch == PA_ARCH_GEMMA2 || hp->arch == PA_ARCH_GEMMA3) {
    const bool g3 = hp->arch == PA_ARCH_GEMMA3;
    hp->act = PA_ACT_GELU_TANH;
    hp->embed_scale = sqrtf((float)n_embd);
    /* Gemma 3's local layers keep the original base and no scaling;
     * Gemma 2's use the global ones unless the file names a base. */
    if (g3) {
      hp->rope_base_swa = 10000.0f;
      hp->rope_freq_scale_swa = 1.0f;
    }
    if ((rc = ld_key_f32(m, "rope.freq_base_swa", false, &hp->rope_base_swa))) return rc;
    if (!(hp->rope_base_swa > 1 && hp->rope_base_swa < 1e12f))
      return pa_error(PASADA_ERR_FORMAT, "rope.freq_base_swa %g is out of range", hp->rope_base_swa);
    /* query_pre_attn_scalar is the head size in every Gemma 2 and 3 but the
     * 27B ones (46 and 62 layers), where it is n_embd / n_head (the files
     * do not store it; llama.cpp decides by the layer count too). */
    if (n_layer == (g3 ? 62u : 46u)) hp->attn_scale = 1.0f / sqrtf((float)n_embd / (float)n_head);
    if (!g3) { /* soft-capping: absent or 0 is none */
      if ((rc = ld_key_f32(m, "attn_logit_softcapping", false, &hp->attn_softcap)) ||
          (rc = ld_key_f32(m, "final_logit_softcapping", false, &hp->final_softcap)))
        return rc;
      if (!(hp->attn_softcap >= 0 && hp->attn_softcap < 1e6f) ||
          !(hp->final_softcap >= 0 && hp->final_softcap < 1e6f))
        return pa_error(PASADA_ERR_FORMAT, "logit soft-capping %g / %g is out of range [0, 1e6)",
                        hp->attn_softcap, hp->final_softcap);
    }
    uint32_t window = 4096; /* Gemma 2's when the file has none (llama.cpp's default) */
    if ((rc = ld_key_u32(m, "attention.sliding_window", g3, &window))) return rc;
    if ((rc = ld_check_range("attention.sliding_window", window, 1, 1 << 24))) return rc;
    hp->sliding_window = (int32_t)window;
    /* the local layers: Gemma 3 five in six (layer i is local unless
     * (i + 1) % 6 == 0), Gemma 2 every other one from the first */
    if ((rc = ld_load_swa_pattern(m, g3 ? 6 : 2))) return rc;
  }
  if (hp->arch == PA_ARCH_GEMMA4 && (rc = ld_gemma4_hparams(m))) return rc;
  if (hp->arch == PA_ARCH_PHI3 && (rc = ld_phi3_hparams(m))) return rc;
  if (hp->arch == PA_ARCH_GPT_OSS) {
    /* every other layer windowed, from the first (llama.cpp's pattern 2;
     * transformers' layer_types) */
    uint32_t window = 0;
    if ((rc = ld_key_u32(m, "attention.sliding_window", true, &window))) return rc;
    if ((rc = ld_check_range("attention.sliding_window", window, 1, 1 << 24))) return rc;
    hp->sliding_window = (int32_t)window;
    for (int32_t i = 0; i < hp->n_layer; i++) hp->swa_layer[i] = i % 2 == 0;
  }
  if (hp->arch == PA_ARCH_QWEN35 && (rc = ld_qwen35_hparams(m))) return rc;
  return PASADA_OK;
}

/* ---- weights ---- */

int ld_find_tensor(struct pa_model *m, const char *name, bool required, const gguf_tensor **out) {
  *out = gguf_get_tensor(m->gguf, name);
  if (!*out && required)
    return pa_error(PASADA_ERR_FORMAT, "required tensor '%s' is missing", name);
  return PASADA_OK;
}

int ld_check_shape(const gguf_tensor *t, int64_t cols, int64_t rows) {
  bool ok = t->ne[0] == cols && t->ne[1] == rows && t->ne[2] == 1 && t->ne[3] == 1;
  if (!ok)
    return pa_error(PASADA_ERR_FORMAT,
                    "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]", t->name,
                    (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                    (long long)t->ne[3], (long long)cols, (long long)rows);
  return PASADA_OK;
}

/* A matrix of `rows` rows of `cols` elements, used through pa_matmul. */
int ld_get_matrix(struct pa_model *m, const char *name, int64_t cols, int64_t rows, bool required,
                      pa_matrix *out) {
  const gguf_tensor *t;
  int rc = ld_find_tensor(m, name, required, &t);
  if (rc || !t) return rc;
  if ((rc = ld_check_shape(t, cols, rows))) return rc;
  const pa_cpu_kernels *k = pa_kernels_reference();
  const pa_type_traits *tr = pa_type_get(t->type);
  if (!tr || t->type >= PA_TYPE_COUNT || !k->vec_dot[t->type] || !tr->to_float)
    return pa_error(PASADA_ERR_UNSUPPORTED, "tensor '%s' has type %s, which matrix products do not support",
                    name, pa_type_name(t->type));
  if ((uintptr_t)t->data % 4)
    return pa_error(PASADA_ERR_FORMAT, "tensor '%s' data is not 4-byte aligned", name);
  out->type = (pa_type)t->type;
  out->cols = cols;
  out->rows = rows;
  out->data = t->data;
  return PASADA_OK;
}

/* The n_expert matrices of a 3-D expert tensor ([n_expert][rows][cols]):
 * out[e] is expert e's slice, rows x cols, in the file's bytes. */
int ld_get_expert_slices(struct pa_model *m, const char *name, int64_t cols, int64_t rows, int64_t n_expert,
                         pa_matrix *out) {
  const gguf_tensor *t;
  int rc = ld_find_tensor(m, name, true, &t);
  if (rc) return rc;
  if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != n_expert || t->ne[3] != 1)
    return pa_error(PASADA_ERR_FORMAT,
                    "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld] (3-D: one %lld x "
                    "%lld matrix per expert)",
                    name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                    (long long)cols, (long long)rows, (long long)n_expert, (long long)rows, (long long)cols);
  const pa_type_traits *tr = pa_type_get(t->type);
  if (!tr || t->type >= PA_TYPE_COUNT || !pa_kernels_reference()->vec_dot[t->type] || !tr->to_float)
    return pa_error(PASADA_ERR_UNSUPPORTED, "tensor '%s' has type %s, which matrix products do not support",
                    name, pa_type_name(t->type));
  const size_t slice = pa_row_size(t->type, cols) * (size_t)rows;
  if ((uintptr_t)t->data % 4 || slice % 4)
    return pa_error(PASADA_ERR_FORMAT, "tensor '%s' data is not 4-byte aligned", name);
  for (int64_t e = 0; e < n_expert; e++)
    out[e] = (pa_matrix){.type = (pa_type)t->type, .rows = rows, .cols = cols,
                         .data = (const uint8_t *)t->data + (size_t)e * slice};
  return PASADA_OK;
}

int ld_get_experts(struct pa_model *m, int i) {
  const pa_hparams *hp = &m->hp;
  const int64_t E = hp->n_embd, NE = hp->n_expert, FE = hp->n_ff_exp;
  pa_layer *L = &m->layers[i];
  L->exp_gate = pa_calloc((size_t)NE * 3, sizeof(pa_matrix));
  if (!L->exp_gate) return pa_error(PASADA_ERR_NOMEM, "out of memory for layer %d's experts", i);
  L->exp_up = L->exp_gate + NE, L->exp_down = L->exp_gate + 2 * NE;
  char n[96];
  int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", i, s), n)
  if ((rc = ld_get_matrix(m, NAME("ffn_gate_inp.weight"), E, NE, true, &L->router)) ||
      (rc = ld_get_expert_slices(m, NAME("ffn_gate_exps.weight"), E, FE, NE, L->exp_gate)) ||
      (rc = ld_get_expert_slices(m, NAME("ffn_up_exps.weight"), E, FE, NE, L->exp_up)) ||
      (rc = ld_get_expert_slices(m, NAME("ffn_down_exps.weight"), FE, E, NE, L->exp_down)))
    return rc;
#undef NAME
  return PASADA_OK;
}

/* Rows [r0, r0 + rows) of matrix w as a matrix of its own that reads w's
 * bytes (no copy): how Phi-3's fused QKV and gate-up tensors become the
 * separate products the forward pass multiplies by. Rows of the file's
 * layout are contiguous, so the view is w's data from row r0 on; it must
 * start 4-byte aligned like every matrix. */
static int row_view(const pa_matrix *w, int64_t r0, int64_t rows, const char *name, pa_matrix *out) {
  const size_t off = pa_row_size(w->type, w->cols) * (size_t)r0;
  if (((uintptr_t)w->data + off) % 4)
    return pa_error(PASADA_ERR_UNSUPPORTED, "tensor '%s': row %lld of type %s is not 4-byte aligned", name,
                    (long long)r0, pa_type_name(w->type));
  *out = *w;
  out->rows = rows;
  out->data = (const uint8_t *)w->data + off;
  return PASADA_OK;
}

/* A vector (norm weights, biases), copied to floats. */
int ld_get_vector(struct pa_model *m, const char *name, int64_t n, bool required, float **out) {
  const gguf_tensor *t;
  *out = NULL;
  int rc = ld_find_tensor(m, name, required, &t);
  if (rc || !t) return rc;
  if ((rc = ld_check_shape(t, n, 1))) return rc;
  const pa_type_traits *tr = pa_type_get(t->type);
  if (!tr || !tr->to_float)
    return pa_error(PASADA_ERR_UNSUPPORTED, "tensor '%s' has unsupported type %s", name,
                    pa_type_name(t->type));
  float *v = pa_calloc((size_t)n, sizeof(float));
  if (!v) return pa_error(PASADA_ERR_NOMEM, "out of memory for tensor '%s'", name);
  tr->to_float(t->data, v, n);
  *out = v;
  return PASADA_OK;
}

/* A table of `rows` rows of `cols` floats (the experts' biases: a row per
 * expert; a conv's taps: a row per channel), copied to floats. Required. */
int ld_get_table(struct pa_model *m, const char *name, int64_t cols, int64_t rows, float **out) {
  const gguf_tensor *t;
  *out = NULL;
  int rc = ld_find_tensor(m, name, true, &t);
  if (rc) return rc;
  if ((rc = ld_check_shape(t, cols, rows))) return rc;
  const pa_type_traits *tr = pa_type_get(t->type);
  if (!tr || !tr->to_float || t->type >= PA_TYPE_COUNT)
    return pa_error(PASADA_ERR_UNSUPPORTED, "tensor '%s' has unsupported type %s", name, pa_type_name(t->type));
  float *v = pa_calloc((size_t)(cols * rows), sizeof(float));
  if (!v) return pa_error(PASADA_ERR_NOMEM, "out of memory for tensor '%s'", name);
  for (int64_t r = 0; r < rows; r++) tr->to_float((const uint8_t *)t->data + pa_row_size(t->type, cols) * (size_t)r, v + r * cols, cols);
  *out = v;
  return PASADA_OK;
}

int pa_model_load_weights(struct pa_model *m) {
  pa_hparams *hp = &m->hp;
  int64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
  int64_t Q = (int64_t)hp->n_head * hp->head_dim, K = (int64_t)hp->n_head_kv * hp->head_dim;
  int64_t VV = (int64_t)hp->n_head_kv * hp->head_dim_v, O = (int64_t)hp->n_head * hp->head_dim_v;
  int rc;
  if ((rc = ld_get_matrix(m, "token_embd.weight", E, V, true, &m->tok_embd))) return rc;
  if (hp->arch == PA_ARCH_BERT) return ld_bert(m);
  if ((rc = ld_get_vector(m, "output_norm.weight", E, true, &m->output_norm))) return rc;
  if ((rc = ld_get_matrix(m, "output.weight", E, V, false, &m->output))) return rc;
  if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */
  if ((rc = ld_get_vector(m, "rope_freqs.weight", hp->rope_dim / 2, false, &m->rope_freqs))) return rc;
  if (hp->arch == PA_ARCH_PHI3 && /* LongRoPE's factors: both or neither */
      ((rc = ld_get_vector(m, "rope_factors_long.weight", hp->rope_dim / 2, false, &m->rope_long)) ||
       (rc = ld_get_vector(m, "rope_factors_short.weight", hp->rope_dim / 2, m->rope_long != NULL, &m->rope_short))))
    return rc;
  if ((rc = pa_model_yarn_factors(m))) return rc;
  for (int i = 0; m->rope_long && i < hp->rope_dim / 2; i++)
    if (!(m->rope_long[i] > 0 && m->rope_short[i] > 0 && m->rope_long[i] < 1e9f && m->rope_short[i] < 1e9f))
      return pa_error(PASADA_ERR_FORMAT, "rope factor %d (long %g, short %g) is out of range (0, 1e9)", i,
                      m->rope_long[i], m->rope_short[i]);
  for (int i = 0; m->rope_freqs && i < hp->rope_dim / 2; i++)
    if (!(m->rope_freqs[i] > 0 && m->rope_freqs[i] <= 1e30f))
      return pa_error(PASADA_ERR_FORMAT, "rope_freqs.weight[%d] = %g is out of range (0, 1e30]", i,
                      m->rope_freqs[i]);
  if (hp->arch == PA_ARCH_GEMMA4) return ld_gemma4(m);

  if (hp->arch == PA_ARCH_QWEN35) return ld_qwen35(m);
  m->layers = pa_calloc((size_t)hp->n_layer, sizeof(pa_layer));
  if (!m->layers) return pa_error(PASADA_ERR_NOMEM, "out of memory for layers");
  bool qk_norm = hp->arch == PA_ARCH_QWEN3 || hp->arch == PA_ARCH_QWEN3MOE || hp->arch == PA_ARCH_GEMMA3;
  const int64_t NE = hp->n_expert, FE = hp->n_ff_exp;
  const bool oss = hp->arch == PA_ARCH_GPT_OSS;
  bool bias = hp->arch == PA_ARCH_QWEN2 || oss;
  bool post = hp->arch == PA_ARCH_GEMMA2 || hp->arch == PA_ARCH_GEMMA3;
  bool fused = hp->arch == PA_ARCH_PHI3;
  for (int i = 0; i < hp->n_layer; i++) {
    pa_layer *L = &m->layers[i];
    char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", i, s), n)
    if ((rc = ld_get_vector(m, NAME("attn_norm.weight"), E, true, &L->attn_norm)) ||
        (rc = ld_get_matrix(m, NAME("attn_output.weight"), O, E, true, &L->wo)) ||
        (rc = ld_get_vector(m, NAME(oss ? "post_attention_norm.weight" : "ffn_norm.weight"), E, true, &L->ffn_norm)))
      return rc;
    pa_matrix qkv = {0}, gate_up = {0};
    if (fused && ((rc = ld_get_matrix(m, NAME("attn_qkv.weight"), E, Q + K + VV, false, &qkv)) ||
                  (rc = ld_get_matrix(m, NAME("ffn_up.weight"), E, 2 * F, false, &gate_up))))
      return rc;
    if (qkv.data) { /* Phi-3: q, k and v are row ranges of one matrix */
      if ((rc = row_view(&qkv, 0, Q, NAME("attn_qkv.weight"), &L->wq)) ||
          (rc = row_view(&qkv, Q, K, n, &L->wk)) || (rc = row_view(&qkv, Q + K, VV, n, &L->wv)))
        return rc;
    } else if ((rc = ld_get_matrix(m, NAME("attn_q.weight"), E, Q, true, &L->wq)) ||
               (rc = ld_get_matrix(m, NAME("attn_k.weight"), E, K, true, &L->wk)) ||
               (rc = ld_get_matrix(m, NAME("attn_v.weight"), E, VV, true, &L->wv))) {
      return rc;
    }
    if (gate_up.data) { /* Phi-3: the gate's rows, then the up projection's */
      if ((rc = row_view(&gate_up, 0, F, NAME("ffn_up.weight"), &L->w_gate)) ||
          (rc = row_view(&gate_up, F, F, n, &L->w_up)) ||
          (rc = ld_get_matrix(m, NAME("ffn_down.weight"), F, E, true, &L->w_down)))
        return rc;
    } else if (NE == 0 && ((rc = ld_get_matrix(m, NAME("ffn_gate.weight"), E, F, true, &L->w_gate)) ||
                           (rc = ld_get_matrix(m, NAME("ffn_up.weight"), E, F, true, &L->w_up)) ||
                           (rc = ld_get_matrix(m, NAME("ffn_down.weight"), F, E, true, &L->w_down)))) {
      return rc;
    }
    if (NE > 0 && (rc = ld_get_experts(m, i))) return rc;
    if (qk_norm && ((rc = ld_get_vector(m, NAME("attn_q_norm.weight"), hp->head_dim, true, &L->q_norm)) ||
                    (rc = ld_get_vector(m, NAME("attn_k_norm.weight"), hp->head_dim, true, &L->k_norm))))
      return rc;
    if (bias && ((rc = ld_get_vector(m, NAME("attn_q.bias"), Q, oss, &L->bq)) ||
                 (rc = ld_get_vector(m, NAME("attn_k.bias"), K, oss, &L->bk)) ||
                 (rc = ld_get_vector(m, NAME("attn_v.bias"), VV, oss, &L->bv))))
      return rc;
    /* gpt-oss: the output's bias, the attention sinks (a logit per head),
     * and the router's and every expert's biases */
    if (oss && ((rc = ld_get_vector(m, NAME("attn_output.bias"), E, true, &L->bo)) ||
                (rc = ld_get_vector(m, NAME("attn_sinks.weight"), hp->n_head, true, &L->attn_sinks)) ||
                (rc = ld_get_vector(m, NAME("ffn_gate_inp.bias"), NE, true, &L->router_b)) ||
                (rc = ld_get_table(m, NAME("ffn_gate_exps.bias"), FE, NE, &L->exp_gate_b)) ||
                (rc = ld_get_table(m, NAME("ffn_up_exps.bias"), FE, NE, &L->exp_up_b)) ||
                (rc = ld_get_table(m, NAME("ffn_down_exps.bias"), E, NE, &L->exp_down_b))))
      return rc;
    if (post && ((rc = ld_get_vector(m, NAME("post_attention_norm.weight"), E, true, &L->post_attn_norm)) ||
                 (rc = ld_get_vector(m, NAME("post_ffw_norm.weight"), E, true, &L->post_ffn_norm))))
      return rc;
#undef NAME
  }
  if (oss) { /* the contexts' view of the sinks: a pointer per layer */
    m->attn_sinks = pa_calloc((size_t)hp->n_layer, sizeof *m->attn_sinks);
    if (!m->attn_sinks) return pa_error(PASADA_ERR_NOMEM, "out of memory");
    for (int i = 0; i < hp->n_layer; i++) m->attn_sinks[i] = m->layers[i].attn_sinks;
  }
  return PASADA_OK;
}

/* The matrices pa_model_repack may repack, each once (every expert's
 * slice on its own: an expert is a matrix of whole row groups; a tied output is
 * the embedding matrix: repacked as the output, the lookup reads it
 * through pa_matrix_get_row). An untied embedding matrix is only looked up
 * a row at a time, so it keeps the file's layout. */
static int repack_candidates(struct pa_model *m, pa_matrix **out) {
  int n = 0;
  if (m->mtp_eh.data) out[n++] = &m->mtp_eh, out[n++] = &m->mtp_eh_h;
  for (int i = 0; i < m->hp.n_layer + m->hp.n_mtp; i++) {
    pa_layer *L = &m->layers[i];
    pa_matrix *mats[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down, &L->router,
                         &L->shexp_gate, &L->wq_gate, &L->ssm_qkv, &L->ssm_z, &L->ssm_beta, &L->ssm_alpha, &L->ssm_out,
                         &L->ple_gate, &L->ple_proj};
    for (size_t k = 0; k < sizeof mats / sizeof mats[0]; k++)
      if (mats[k]->data) out[n++] = mats[k]; /* bert has no gate, a mixture no dense FFN */
    for (int e = 0; L->exp_gate && e < 3 * m->hp.n_expert; e++) out[n++] = &L->exp_gate[e];
  }
  out[n++] = m->output.data == m->tok_embd.data ? &m->tok_embd : &m->output;
  if (m->ple_model_proj.data) out[n++] = &m->ple_model_proj; /* the per-layer token table keeps its layout */
  return n;
}

/* Drops the pages of a repacked tensor's bytes from this process (they are
 * the file's, read-only and never written: a later read faults them in). */
static void release_pages(const void *data, size_t bytes) {
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return;
  const uintptr_t start = ((uintptr_t)data + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
  const uintptr_t end = ((uintptr_t)data + bytes) & ~((uintptr_t)page - 1);
  if (end > start) (void)madvise((void *)start, end - start, MADV_DONTNEED);
}

/* Repacking runs on every core (the 8B shape: 4.3 GB of Q4_K, ~6 s on
 * one thread, most of it page faults on both sides). Each thread reads its
 * part of the file's bytes with pread, a chunk at a time, rather than
 * through the mapping: pages read through the mapping count in the
 * process's memory until released, and where the file is mapped in 2 MB
 * pages (large folios) releasing part of one frees nothing (Gemma 3: 31 MB
 * stayed, RSS 1.17x weights + KV, and the load peaked at 1.8x). */
#define REPACK_CHUNK ((size_t)4 << 20)
#define REPACK_THREADS 64
typedef struct {
  const pa_matrix *w;
  pa_layout layout;
  uint8_t *dst;
  int fd;            /* the model file, or -1: read through the mapping */
  uint64_t file_off; /* of the matrix's first byte */
  uint8_t **bufs;    /* REPACK_CHUNK bytes per pool thread (entries may be NULL) */
} repack_job;

/* Reads exactly n bytes at off; false on an error or a short file. */
static bool pread_full(int fd, uint8_t *buf, size_t n, uint64_t off) {
  while (n) {
    const ssize_t got = pread(fd, buf, n, (off_t)off);
    if (got <= 0) return false;
    buf += got, n -= (size_t)got, off += (uint64_t)got;
  }
  return true;
}

/* Share ith of nth of one matrix's groups (a pool task). */
static void repack_task(void *arg, int ith, int nth) {
  const repack_job *j = arg;
  const pa_matrix *w = j->w;
  const int rows_per = pa_layout_group_rows(j->layout);
  long g0, g1;
  pa_split((long)(w->rows / rows_per), ith, nth, &g0, &g1);
  const size_t src_group = pa_row_size(w->type, w->cols) * (size_t)rows_per;
  const size_t dst_group = pa_layout_bytes(j->layout, w->type, rows_per, w->cols);
  const int64_t per = (int64_t)(REPACK_CHUNK / src_group);
  uint8_t *buf = j->fd >= 0 && per >= 1 ? j->bufs[ith] : NULL; /* else a group at a time, mapped */
  const int64_t step = buf ? per : 1;
  for (int64_t g = g0; g < g1; g += step) {
    const int64_t n = g1 - g < step ? g1 - g : step;
    const uint8_t *src = (const uint8_t *)w->data + (size_t)g * src_group;
    if (buf && pread_full(j->fd, buf, (size_t)n * src_group, j->file_off + (uint64_t)g * src_group))
      src = buf; /* else the same bytes through the mapping */
    pa_layout_repack(j->layout, w->type, w->cols, src, j->dst + (size_t)g * dst_group, n);
  }
}

/* The layout matrix w is to be repacked into: an interleaved one it fits
 * and kernel table k has a fast kernel for, or PA_LAYOUT_ROWS. */
static pa_layout target_layout(const pa_matrix *w, const pa_cpu_kernels *k) {
  if (!w->data || w->layout != PA_LAYOUT_ROWS) return PA_LAYOUT_ROWS;
  return pa_layout_pick(k, w->type, w->rows, w->cols);
}

/* Bytes a matrix takes in the repacked mapping (64-byte aligned). */
static size_t slot_bytes(const pa_matrix *w, pa_layout to) {
  return (pa_layout_bytes(to, w->type, w->rows, w->cols) + 63) & ~(size_t)63;
}

int pa_model_repack(struct pa_model *m, const pa_cpu_kernels *k) {
  if (pa_env_no_repack()) return PASADA_OK;
  pa_matrix **mats = pa_calloc(
      (size_t)(m->hp.n_layer + m->hp.n_mtp) * (17 + 3 * (size_t)m->hp.n_expert) + 4, sizeof *mats);
  if (!mats) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  const int n = repack_candidates(m, mats);
  /* When any matrix is repacked, the others are copied beside it as they
   * are (PA_LAYOUT_ROWS): then no weight page of the file stays mapped
   * (where the file is mapped in 2 MB pages, reading a 9 MB Q6_K tensor
   * through the mapping kept 31 MB of it resident), and every matrix has
   * the 2 MB pages. */
  size_t total = 0;
  bool any = false;
  for (int i = 0; i < n; i++) {
    if (!mats[i]->data || mats[i]->layout != PA_LAYOUT_ROWS) continue;
    const pa_layout to = target_layout(mats[i], k);
    any |= to != PA_LAYOUT_ROWS;
    total += slot_bytes(mats[i], to);
  }
  if (!any) {
    pa_free(mats);
    return PASADA_OK;
  }
  /* A mapping of its own, in 2 MB pages where the kernel has them:
   * decode streams every byte once per token, and with 4 KB pages each
   * page is a TLB miss whose walk misses the cache too (the 8B shape's
   * page tables alone are 9 MB). */
  uint8_t *dst = pa_map_huge(total); /* whole 4 KB pages past total, zeroed */
  if (!dst) { /* not fatal: the file's layout serves too, only slower */
    pa_log(1, "no memory to repack %zu bytes of weights; keeping the file's layout", total);
    pa_free(mats);
    return PASADA_OK;
  }
  const bool tied = m->output.data == m->tok_embd.data;
  /* the files themselves (each part of a split model), when they are the
   * ones mapped (same size); a model built in memory (tests) has none, and
   * its weights are not a file's pages */
  const gguf_file *g = m->gguf;
  const uint32_t n_parts = g ? g->n_parts : 0;
  int *fds = n_parts ? pa_calloc(n_parts, sizeof *fds) : NULL;
  for (uint32_t i = 0; fds && i < n_parts; i++) {
    const gguf_file *p = g->parts ? g->parts[i] : g;
    struct stat st;
    fds[i] = p->path && p->map ? open(p->path, O_RDONLY | O_CLOEXEC) : -1;
    if (fds[i] >= 0 && (fstat(fds[i], &st) != 0 || (uint64_t)st.st_size != p->size)) {
      close(fds[i]);
      fds[i] = -1;
    }
  }
  /* a pool of a thread per core (NULL: this one alone), and one chunk
   * buffer per thread for the whole load (mapped, not malloc'ed: glibc
   * would keep freed blocks of this size resident in the threads' arenas;
   * and mapped once: every new mapping is zeroed page by page, which was a
   * third of the 8B shape's load) */
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  pa_pool *pool = pa_pool_create(cores < 1 ? 1 : cores > REPACK_THREADS ? REPACK_THREADS : (int)cores);
  uint8_t *bufs[REPACK_THREADS] = {NULL};
  const int nbuf = fds ? pa_pool_size(pool) : 0;
  for (int i = 0; i < nbuf; i++) {
    bufs[i] = mmap(NULL, REPACK_CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (bufs[i] == MAP_FAILED) bufs[i] = NULL;
  }
  size_t at = 0;
  for (int i = 0; i < n; i++) {
    pa_matrix *w = mats[i];
    if (!w->data || w->layout != PA_LAYOUT_ROWS) continue;
    const pa_layout to = target_layout(w, k);
    const gguf_file *part = gguf_part_holding(g, w->data); /* NULL: not the file's bytes */
    uint32_t pi = 0;
    while (part && pi < n_parts && (g->parts ? g->parts[pi] : g) != part) pi++;
    const int fd = part && fds && pi < n_parts ? fds[pi] : -1;
    repack_job job = {w, to, dst + at, fd, fd >= 0 ? (uint64_t)((const uint8_t *)w->data - part->map) : 0, bufs};
    pa_pool_run(pool, repack_task, &job);
    if (g) release_pages(w->data, pa_row_size(w->type, w->cols) * (size_t)w->rows);
    w->data = dst + at;
    w->layout = to;
    at += slot_bytes(w, to);
  }
  for (int i = 0; i < nbuf; i++)
    if (bufs[i]) munmap(bufs[i], REPACK_CHUNK);
  pa_pool_free(pool);
  for (uint32_t i = 0; fds && i < n_parts; i++)
    if (fds[i] >= 0) close(fds[i]);
  pa_free(fds);
  if (tied) m->output = m->tok_embd;
  m->repacked = dst;
  m->repacked_bytes = total; /* pa_unmap_huge rounds it as pa_map_huge did */
  pa_free(mats);
  return PASADA_OK;
}
