/* loader_arch.c: the hyper-parameters and tensors particular to one family
 * (phi3's LongRoPE keys, YaRN, gemma4, qwen35, bert), read with the checked
 * readers of loader.c (loader_internal.h). loader.c calls them by
 * architecture. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/loader_internal.h"

/* Phi-3's own keys: an optional sliding window over every layer (0 or
 * absent: none; transformers applies it to all layers, as here; llama.cpp
 * ignores it), and LongRoPE: the context length the short factors serve
 * and the attention factor that multiplies the RoPE tables. Its fused
 * tensors' shapes need n_embd = n_head * head_dim. */
int ld_phi3_hparams(struct pa_model *m) {
  pa_hparams *hp = &m->hp;
  int rc;
  if ((int64_t)hp->n_head * hp->head_dim != hp->n_embd || hp->head_dim_v != hp->head_dim)
    return pa_error(PASADA_ERR_FORMAT, "phi3: %d heads of %d values must make n_embd %d", hp->n_head,
                    hp->head_dim, hp->n_embd);
  uint32_t window = 0;
  if ((rc = ld_key_u32(m, "attention.sliding_window", false, &window))) return rc;
  if ((rc = ld_check_range("attention.sliding_window", window, 0, 1 << 24))) return rc;
  hp->sliding_window = (int32_t)window;
  for (int32_t i = 0; i < hp->n_layer; i++) hp->swa_layer[i] = window > 0;
  uint32_t orig = (uint32_t)hp->n_ctx_train;
  if ((rc = ld_key_u32(m, "rope.scaling.original_context_length", false, &orig))) return rc;
  if ((rc = ld_check_range("rope.scaling.original_context_length", orig, 1, 1 << 24))) return rc;
  m->n_ctx_orig = (int32_t)orig;
  if ((rc = ld_key_f32(m, "rope.scaling.attn_factor", false, &hp->rope_attn_factor))) return rc;
  if (!(hp->rope_attn_factor > 0 && hp->rope_attn_factor < 100))
    return pa_error(PASADA_ERR_FORMAT, "rope.scaling.attn_factor %g is out of range (0, 100)",
                    hp->rope_attn_factor);
  return PASADA_OK;
}

/* YaRN (rope.scaling.type "yarn", llama.cpp's keys): the factor, the
 * original context, beta_fast and beta_slow (default 32 and 1), the
 * extrapolation mix (yarn_ext_factor, default 1) and a further attention
 * factor (yarn_attn_factor, default 1). pa_model_yarn_factors turns them
 * into the RoPE tables' frequency factors and attention factor. */
int ld_yarn(struct pa_model *m, float factor) {
  pa_hparams *hp = &m->hp;
  int rc;
  uint32_t orig = (uint32_t)hp->n_ctx_train;
  float fast = 32.0f, slow = 1.0f, ext = 1.0f, attn = 1.0f;
  if ((rc = ld_key_u32(m, "rope.scaling.original_context_length", false, &orig)) ||
      (rc = ld_key_f32(m, "rope.scaling.yarn_beta_fast", false, &fast)) ||
      (rc = ld_key_f32(m, "rope.scaling.yarn_beta_slow", false, &slow)) ||
      (rc = ld_key_f32(m, "rope.scaling.yarn_ext_factor", false, &ext)) ||
      (rc = ld_key_f32(m, "rope.scaling.yarn_attn_factor", false, &attn)))
    return rc;
  if ((rc = ld_check_range("rope.scaling.original_context_length", orig, 1, 1 << 24))) return rc;
  if (!(fast > 0 && fast < 1e6f && slow > 0 && slow < 1e6f) || !(ext >= 0 && ext <= 1) ||
      !(attn > 0 && attn < 100))
    return pa_error(PASADA_ERR_FORMAT,
                    "yarn parameters out of range (beta_fast %g, beta_slow %g: (0, 1e6); ext_factor %g: [0, 1]; "
                    "attn_factor %g: (0, 100))",
                    fast, slow, ext, attn);
  m->yarn = (pa_yarn){.factor = factor, .orig_ctx = (int32_t)orig, .beta_fast = fast, .beta_slow = slow,
                      .ext_factor = ext, .attn_factor = attn, .truncate = true};
  return PASADA_OK;
}

int pa_model_yarn_factors(struct pa_model *m) {
  pa_hparams *hp = &m->hp;
  const pa_yarn *y = &m->yarn;
  if (!(y->factor > 0)) return PASADA_OK;
  const int half = hp->rope_dim / 2;
  if (!m->rope_freqs) {
    m->rope_freqs = pa_calloc((size_t)half, sizeof(float));
    if (!m->rope_freqs) return pa_error(PASADA_ERR_NOMEM, "out of memory");
    for (int i = 0; i < half; i++) m->rope_freqs[i] = 1.0f;
  }
  /* the dimensions whose wavelength turns beta_fast and beta_slow times
   * in the original context bound the ramp (floored and ceiled when
   * truncated, as llama.cpp always does) */
  const double n = hp->rope_dim, lb = 2.0 * log((double)hp->rope_base);
  double lo = n * log(y->orig_ctx / (y->beta_fast * 2.0 * 3.14159265358979323846)) / lb;
  double hi = n * log(y->orig_ctx / (y->beta_slow * 2.0 * 3.14159265358979323846)) / lb;
  if (y->truncate) lo = floor(lo), hi = ceil(hi);
  lo = lo > 0 ? lo : 0;
  hi = hi < n - 1 ? hi : n - 1;
  const double scale = 1.0 / y->factor, span = hi - lo > 0.001 ? hi - lo : 0.001;
  for (int i = 0; i < half; i++) {
    /* mix 1: the frequency as it is (extrapolated); 0: divided by factor */
    double r = (i - lo) / span;
    r = r < 0 ? 0 : r > 1 ? 1 : r;
    const double mix = (1.0 - r) * y->ext_factor;
    m->rope_freqs[i] = (float)(m->rope_freqs[i] / (scale * (1.0 - mix) + mix));
  }
  hp->rope_freq_scale = hp->rope_freq_scale_swa = 1.0f;
  if (y->ext_factor != 0) hp->rope_attn_factor *= y->attn_factor * (1.0f + 0.1f * logf(y->factor));
  return PASADA_OK;
}

/* Gemma 4's keys (llama.cpp's names): key_length / value_length are the
 * global layers' head sizes and key_length_swa / value_length_swa the
 * sliding layers' (512 and 256 in the released models), rope.dimension_count
 * and rope.dimension_count_swa each kind's rotated dims, head_count_kv
 * an array when the kinds' KV head counts differ (one count per kind); the
 * global layers' partial RoPE is rope_freqs (factors of 1e30 freeze the
 * unrotated pairs); shared_kv_layers: the last layers reuse the KV cache
 * of the last earlier layer of their kind. */
int ld_gemma4_hparams(struct pa_model *m) {
  pa_hparams *hp = &m->hp;
  const uint32_t n_layer = (uint32_t)hp->n_layer;
  int rc;
  hp->act = PA_ACT_GELU_TANH;
  hp->embed_scale = sqrtf((float)hp->n_embd);
  hp->attn_scale = 1.0f; /* q and k are RMS-normed per head: no 1/sqrt(head_dim) */
  uint32_t hd_swa = (uint32_t)hp->head_dim, hdv_swa = (uint32_t)hp->head_dim_v, rope_swa = 0;
  if ((rc = ld_key_u32(m, "attention.key_length_swa", false, &hd_swa)) ||
      (rc = ld_key_u32(m, "attention.value_length_swa", false, &hdv_swa)) ||
      (rc = ld_check_range("attention.key_length_swa", hd_swa, 2, 1024)) ||
      (rc = ld_check_range("attention.value_length_swa", hdv_swa, 1, 1024)))
    return rc;
  rope_swa = hd_swa;
  if ((rc = ld_key_u32(m, "rope.dimension_count_swa", false, &rope_swa))) return rc;
  if (hd_swa != hdv_swa || hp->head_dim_v != hp->head_dim)
    return pa_error(PASADA_ERR_FORMAT, "gemma4: key and value head sizes differ (%u/%u sliding, %d/%d global); "
                    "V may be K's projection, so they must be equal", hd_swa, hdv_swa, hp->head_dim, hp->head_dim_v);
  if (hd_swa % 2 || rope_swa % 2 || rope_swa == 0 || rope_swa > hd_swa)
    return pa_error(PASADA_ERR_FORMAT, "gemma4: rope.dimension_count_swa %u must be even and at most the even "
                    "head size %u", rope_swa, hd_swa);
  hp->head_dim_swa = (int32_t)hd_swa, hp->head_dim_v_swa = (int32_t)hdv_swa, hp->rope_dim_swa = (int32_t)rope_swa;
  hp->rope_base_swa = 10000.0f;
  hp->rope_freq_scale_swa = 1.0f;
  if ((rc = ld_key_f32(m, "rope.freq_base_swa", false, &hp->rope_base_swa))) return rc;
  if (!(hp->rope_base_swa > 1 && hp->rope_base_swa < 1e12f))
    return pa_error(PASADA_ERR_FORMAT, "rope.freq_base_swa %g is out of range", hp->rope_base_swa);
  if ((rc = ld_key_f32(m, "final_logit_softcapping", false, &hp->final_softcap))) return rc;
  if (!(hp->final_softcap >= 0 && hp->final_softcap < 1e6f))
    return pa_error(PASADA_ERR_FORMAT, "final_logit_softcapping %g is out of range [0, 1e6)", hp->final_softcap);
  uint32_t window = 0, per_layer = 0, shared = 0;
  if ((rc = ld_key_u32(m, "attention.sliding_window", true, &window)) ||
      (rc = ld_check_range("attention.sliding_window", window, 1, 1 << 24)) ||
      (rc = ld_key_u32(m, "embedding_length_per_layer_input", false, &per_layer)) ||
      (rc = ld_key_u32(m, "attention.shared_kv_layers", false, &shared)) ||
      (rc = ld_check_range("attention.shared_kv_layers", shared, 0, n_layer - 1)))
    return rc;
  hp->sliding_window = (int32_t)window;
  if (per_layer > 0 && ((uint64_t)per_layer > 8192 || (uint64_t)per_layer * n_layer > (1u << 20)))
    return pa_error(PASADA_ERR_FORMAT, "gemma4: embedding_length_per_layer_input %u over %u layers is out of "
                    "range (at most 8192 per layer, 1048576 in all)", per_layer, n_layer);
  hp->n_embd_per_layer = (int32_t)per_layer;
  if ((rc = ld_load_swa_pattern(m, 6))) return rc;
  /* the KV heads: one count per kind of layer */
  int32_t kvh[2] = {0, 0}; /* global, sliding */
  for (uint32_t l = 0; l < n_layer; l++) {
    int32_t *k = &kvh[hp->swa_layer[l]];
    if (*k && *k != m->kv_heads_layer[l])
      return pa_error(PASADA_ERR_UNSUPPORTED, "gemma4: attention.head_count_kv differs between %s layers (%d, %d): "
                      "not supported", hp->swa_layer[l] ? "sliding" : "global", *k, m->kv_heads_layer[l]);
    *k = m->kv_heads_layer[l];
  }
  hp->n_head_kv = kvh[0] ? kvh[0] : kvh[1];
  hp->n_head_kv_swa = kvh[1] ? kvh[1] : kvh[0];
  hp->n_kv_shared = (int32_t)shared;
  const uint32_t first = n_layer - shared;
  for (uint32_t l = 0; l < n_layer; l++) {
    int32_t from = (int32_t)l;
    if (l >= first) {
      from = -1;
      for (int32_t j = (int32_t)first - 1; j >= 0 && from < 0; j--)
        if (hp->swa_layer[j] == hp->swa_layer[l]) from = j;
      if (from < 0)
        return pa_error(PASADA_ERR_FORMAT, "gemma4: layer %u shares the KV cache of an earlier %s layer, and none "
                        "of the first %u is one", l, hp->swa_layer[l] ? "sliding" : "global", first);
    }
    hp->kv_from[l] = (int16_t)from;
  }
  return PASADA_OK;
}

/* Qwen3.5's linear-attention layers (llama.cpp's Qwen3-Next keys): the
 * conv's taps, the key heads (group_count) of state_size, the value heads
 * (time_step_rank) sharing inner_size; every full_attention_interval-th
 * layer (layer l with (l + 1) % interval == 0) is a gated attention layer,
 * the others recurrent. rope.dimension_sections (multi-section RoPE) is
 * not read: with text positions every section has the token's position,
 * which is plain RoPE over rope.dimension_count dims. */
int ld_qwen35_hparams(struct pa_model *m) {
  pa_hparams *hp = &m->hp;
  uint32_t conv = 0, k_dim = 0, k_heads = 0, v_heads = 0, inner = 0, interval = 4;
  int rc;
  if ((rc = ld_key_u32(m, "ssm.conv_kernel", true, &conv)) || (rc = ld_key_u32(m, "ssm.state_size", true, &k_dim)) ||
      (rc = ld_key_u32(m, "ssm.group_count", true, &k_heads)) ||
      (rc = ld_key_u32(m, "ssm.time_step_rank", true, &v_heads)) ||
      (rc = ld_key_u32(m, "ssm.inner_size", true, &inner)) ||
      (rc = ld_key_u32(m, "full_attention_interval", false, &interval)))
    return rc;
  if ((rc = ld_check_range("ssm.conv_kernel", conv, 2, 16)) || (rc = ld_check_range("ssm.state_size", k_dim, 1, 1024)) ||
      (rc = ld_check_range("ssm.group_count", k_heads, 1, 1024)) ||
      (rc = ld_check_range("ssm.time_step_rank", v_heads, 1, 1024)) ||
      (rc = ld_check_range("ssm.inner_size", inner, 1, 1 << 20)) ||
      (rc = ld_check_range("full_attention_interval", interval, 1, PA_MAX_LAYERS)))
    return rc;
  if (v_heads % k_heads || inner % v_heads || inner / v_heads > 1024)
    return pa_error(PASADA_ERR_FORMAT,
                    "ssm: %u value heads must be a multiple of %u key heads and share inner_size %u in heads of at "
                    "most 1024",
                    v_heads, k_heads, inner);
  hp->ssm_conv = (int32_t)conv;
  hp->ssm_k_dim = (int32_t)k_dim;
  hp->ssm_k_heads = (int32_t)k_heads;
  hp->ssm_v_heads = (int32_t)v_heads;
  hp->ssm_v_dim = (int32_t)(inner / v_heads);
  for (int32_t l = 0; l < hp->n_layer; l++) hp->recurrent[l] = (l + 1) % (int32_t)interval != 0;
  return PASADA_OK;
}

/* bert's tensors (llama.cpp's names): learned positions and token types,
 * the embeddings' LayerNorm, and per layer q/k/v/output, two LayerNorms,
 * up and down, every product with its bias. The lookup tables are F32, as
 * the embed_add op reads them. */
int ld_bert(struct pa_model *m) {
  const pa_hparams *hp = &m->hp;
  const int64_t E = hp->n_embd, F = hp->n_ff, Q = (int64_t)hp->n_head * hp->head_dim;
  int rc;
  uint32_t n_types = 2;
  if ((rc = gguf_get_u32(m->gguf, "tokenizer.ggml.token_type_count", false, &n_types))) return rc;
  if ((rc = ld_check_range("tokenizer.ggml.token_type_count", n_types, 1, 16))) return rc;
  if (hp->n_head_kv != hp->n_head || Q != E || hp->head_dim_v != hp->head_dim)
    return pa_error(PASADA_ERR_FORMAT, "bert: attention heads must cover the embedding (heads %d x %d, kv heads "
                    "%d, embedding %lld)", hp->n_head, hp->head_dim, hp->n_head_kv, (long long)E);
  if ((rc = ld_get_matrix(m, "position_embd.weight", E, hp->n_ctx_train, true, &m->pos_embd)) ||
      (rc = ld_get_matrix(m, "token_types.weight", E, n_types, true, &m->type_embd)) ||
      (rc = ld_get_vector(m, "token_embd_norm.weight", E, true, &m->embd_norm)) ||
      (rc = ld_get_vector(m, "token_embd_norm.bias", E, true, &m->embd_norm_b)))
    return rc;
  if (m->pos_embd.type != PA_TYPE_F32 || m->type_embd.type != PA_TYPE_F32)
    return pa_error(PASADA_ERR_UNSUPPORTED, "bert: position_embd and token_types must be F32 (they are %s, %s)",
                    pa_type_name(m->pos_embd.type), pa_type_name(m->type_embd.type));
  m->output = m->tok_embd; /* no output matrix: an embedding model computes no logits */
  m->layers = pa_calloc((size_t)hp->n_layer, sizeof(pa_layer));
  if (!m->layers) return pa_error(PASADA_ERR_NOMEM, "out of memory for layers");
  for (int i = 0; i < hp->n_layer; i++) {
    pa_layer *L = &m->layers[i];
    char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", i, s), n)
    if ((rc = ld_get_matrix(m, NAME("attn_q.weight"), E, E, true, &L->wq)) ||
        (rc = ld_get_matrix(m, NAME("attn_k.weight"), E, E, true, &L->wk)) ||
        (rc = ld_get_matrix(m, NAME("attn_v.weight"), E, E, true, &L->wv)) ||
        (rc = ld_get_matrix(m, NAME("attn_output.weight"), E, E, true, &L->wo)) ||
        (rc = ld_get_matrix(m, NAME("ffn_up.weight"), E, F, true, &L->w_up)) ||
        (rc = ld_get_matrix(m, NAME("ffn_down.weight"), F, E, true, &L->w_down)) ||
        (rc = ld_get_vector(m, NAME("attn_q.bias"), E, true, &L->bq)) ||
        (rc = ld_get_vector(m, NAME("attn_k.bias"), E, true, &L->bk)) ||
        (rc = ld_get_vector(m, NAME("attn_v.bias"), E, true, &L->bv)) ||
        (rc = ld_get_vector(m, NAME("attn_output.bias"), E, true, &L->bo)) ||
        (rc = ld_get_vector(m, NAME("ffn_up.bias"), F, true, &L->b_up)) ||
        (rc = ld_get_vector(m, NAME("ffn_down.bias"), E, true, &L->b_down)) ||
        (rc = ld_get_vector(m, NAME("attn_output_norm.weight"), E, true, &L->attn_out_norm)) ||
        (rc = ld_get_vector(m, NAME("attn_output_norm.bias"), E, true, &L->attn_out_norm_b)) ||
        (rc = ld_get_vector(m, NAME("layer_output_norm.weight"), E, true, &L->out_norm)) ||
        (rc = ld_get_vector(m, NAME("layer_output_norm.bias"), E, true, &L->out_norm_b)))
      return rc;
#undef NAME
  }
  return PASADA_OK;
}

/* gemma4's mixture of experts in layer i (llama.cpp's names): the router
 * ffn_gate_inp with its input's scale (ffn_gate_inp.scale, n_embd: the
 * router reads rmsnorm(x) * scale / sqrt(n_embd), made one vector here)
 * and each expert's weight scale (ffn_down_exps.scale, n_expert); the
 * experts' fused gate_up ([n_expert][2 n_ff_exp][n_embd], each expert's
 * gate rows then its up rows) copied apart once into a gate block and an
 * up block, so that each kind is one block of equal slices as every
 * backend reads experts; ffn_down_exps; the experts' input norm
 * (pre_ffw_norm_2) and the output norms of the dense FFN (post_ffw_norm_1)
 * and of the experts (post_ffw_norm_2). */
static int gemma4_experts(struct pa_model *m, int i) {
  const pa_hparams *hp = &m->hp;
  const int64_t E = hp->n_embd, NE = hp->n_expert, FE = hp->n_ff_exp;
  pa_layer *L = &m->layers[i];
  L->exp_gate = pa_calloc((size_t)NE * 4, sizeof(pa_matrix)); /* gate, up, down, then the fused slices */
  if (!L->exp_gate) return pa_error(PASADA_ERR_NOMEM, "out of memory for layer %d's experts", i);
  L->exp_up = L->exp_gate + NE, L->exp_down = L->exp_gate + 2 * NE;
  pa_matrix *gate_up = L->exp_gate + 3 * NE;
  char n[96];
  float *scale = NULL;
  int rc;
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", i, s), n)
  if ((rc = ld_get_matrix(m, NAME("ffn_gate_inp.weight"), E, NE, true, &L->router)) ||
      (rc = ld_get_vector(m, NAME("ffn_down_exps.scale"), NE, true, &L->exp_scale)) ||
      (rc = ld_get_vector(m, NAME("pre_ffw_norm_2.weight"), E, true, &L->ffn_norm_2)) ||
      (rc = ld_get_vector(m, NAME("post_ffw_norm_1.weight"), E, true, &L->post_ffn_norm_1)) ||
      (rc = ld_get_vector(m, NAME("post_ffw_norm_2.weight"), E, true, &L->post_ffn_norm_2)) ||
      (rc = ld_get_expert_slices(m, NAME("ffn_down_exps.weight"), FE, E, NE, L->exp_down)) ||
      (rc = ld_get_expert_slices(m, NAME("ffn_gate_up_exps.weight"), E, 2 * FE, NE, gate_up)) ||
      (rc = ld_get_vector(m, NAME("ffn_gate_inp.scale"), E, true, &scale)))
    return rc;
  L->router_norm = scale; /* the scale times 1/sqrt(n_embd), in place */
  const float root = (float)(1.0 / sqrt((double)E));
  for (int64_t j = 0; j < E; j++) L->router_norm[j] *= root;
  const size_t half = pa_row_size(gate_up[0].type, E) * (size_t)FE;
  if (half % 4)
    return pa_error(PASADA_ERR_UNSUPPORTED, "tensor '%s': an expert's %lld up rows of type %s do not start "
                    "4-byte aligned", n, (long long)FE, pa_type_name(gate_up[0].type));
  uint8_t *mem = L->exp_split = pa_alloc(2 * half * (size_t)NE);
  if (!mem) return pa_error(PASADA_ERR_NOMEM, "out of memory splitting '%s'", n);
  for (int64_t e = 0; e < NE; e++) {
    memcpy(mem + (size_t)e * half, gate_up[e].data, half);
    memcpy(mem + (size_t)(NE + e) * half, (const uint8_t *)gate_up[e].data + half, half);
    L->exp_gate[e] = L->exp_up[e] = (pa_matrix){.type = gate_up[0].type, .rows = FE, .cols = E};
    L->exp_gate[e].data = mem + (size_t)e * half;
    L->exp_up[e].data = mem + (size_t)(NE + e) * half;
  }
#undef NAME
  return PASADA_OK;
}

/* gemma4's tensors (llama.cpp's names; norms as Gemma 4 applies them,
 * x * w, with no 1 + w): per layer q with its head norm, k and v with k's
 * head norm where the layer stores its own KV (v absent: V is K's
 * projection, attention_k_eq_v), norms before and after the attention and
 * the FFN, and layer_output_scale, a scalar. The KV-sharing layers'
 * k and v tensors, if present, are not read. With per-layer inputs
 * (n_embd_per_layer P > 0): per_layer_token_embd [n_vocab][n_layer * P],
 * per_layer_model_proj [n_layer * P][n_embd], per_layer_proj_norm [P], and
 * per layer inp_gate [P][n_embd], proj [n_embd][P], post_norm [n_embd].
 * With experts (hp.n_expert > 0) each layer has them beside its dense FFN
 * (gemma4_experts). */
int ld_gemma4(struct pa_model *m) {
  const pa_hparams *hp = &m->hp;
  const int64_t E = hp->n_embd, HD_MAX = pa_attn_max(hp).head_dim;
  int rc;
  m->ones = pa_calloc((size_t)HD_MAX, sizeof(float));
  m->layers = pa_calloc((size_t)hp->n_layer, sizeof(pa_layer));
  if (!m->ones || !m->layers) return pa_error(PASADA_ERR_NOMEM, "out of memory for layers");
  for (int64_t i = 0; i < HD_MAX; i++) m->ones[i] = 1.0f;
  /* per-layer inputs: the token table of n_layer slices of P per token,
   * the embedding's projection to them and their norm */
  const int64_t P = hp->n_embd_per_layer, LP = (int64_t)hp->n_layer * P;
  if (P > 0 && ((rc = ld_get_matrix(m, "per_layer_token_embd.weight", LP, hp->n_vocab, true, &m->ple_embd)) ||
                (rc = ld_get_matrix(m, "per_layer_model_proj.weight", E, LP, true, &m->ple_model_proj)) ||
                (rc = ld_get_vector(m, "per_layer_proj_norm.weight", P, true, &m->ple_proj_norm))))
    return rc;
  for (int i = 0; i < hp->n_layer; i++) {
    pa_layer *L = &m->layers[i];
    const int64_t F = m->ff_layer[i];
    /* this layer's kind's heads: q and the output are n_head of them, k and v n_head_kv */
    const pa_attn_shape a = pa_layer_attn(hp, i);
    const int64_t HD = a.head_dim, Q = (int64_t)hp->n_head * HD, K = (int64_t)a.n_head_kv * HD;
    char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", i, s), n)
    if ((rc = ld_get_vector(m, NAME("attn_norm.weight"), E, true, &L->attn_norm)) ||
        (rc = ld_get_matrix(m, NAME("attn_q.weight"), E, Q, true, &L->wq)) ||
        (rc = ld_get_vector(m, NAME("attn_q_norm.weight"), HD, true, &L->q_norm)) ||
        (rc = ld_get_matrix(m, NAME("attn_output.weight"), Q, E, true, &L->wo)) ||
        (rc = ld_get_vector(m, NAME("post_attention_norm.weight"), E, true, &L->post_attn_norm)) ||
        (rc = ld_get_vector(m, NAME("ffn_norm.weight"), E, true, &L->ffn_norm)) ||
        (rc = ld_get_matrix(m, NAME("ffn_gate.weight"), E, F, true, &L->w_gate)) ||
        (rc = ld_get_matrix(m, NAME("ffn_up.weight"), E, F, true, &L->w_up)) ||
        (rc = ld_get_matrix(m, NAME("ffn_down.weight"), F, E, true, &L->w_down)) ||
        (rc = ld_get_vector(m, NAME("post_ffw_norm.weight"), E, true, &L->post_ffn_norm)))
      return rc;
    if (hp->n_kv_shared == 0 || hp->kv_from[i] == i) {
      if ((rc = ld_get_matrix(m, NAME("attn_k.weight"), E, K, true, &L->wk)) ||
          (rc = ld_get_vector(m, NAME("attn_k_norm.weight"), HD, true, &L->k_norm)) ||
          (rc = ld_get_matrix(m, NAME("attn_v.weight"), E, K, false, &L->wv)))
        return rc;
      if (!L->wv.data) L->wv = L->wk;
      L->v_norm = m->ones;
    }
    if (hp->n_expert > 0 && (rc = gemma4_experts(m, i))) return rc;
    if (P > 0 && ((rc = ld_get_matrix(m, NAME("inp_gate.weight"), E, P, true, &L->ple_gate)) ||
                  (rc = ld_get_matrix(m, NAME("proj.weight"), P, E, true, &L->ple_proj)) ||
                  (rc = ld_get_vector(m, NAME("post_norm.weight"), E, true, &L->ple_norm))))
      return rc;
    float *scale = NULL;
    if ((rc = ld_get_vector(m, NAME("layer_output_scale.weight"), 1, false, &scale))) return rc;
    L->out_scale = scale ? scale[0] : 1.0f;
    pa_free(scale);
    if (!isfinite(L->out_scale) || fabsf(L->out_scale) > 1e6f)
      return pa_error(PASADA_ERR_FORMAT, "tensor '%s' = %g is out of range", n, L->out_scale);
#undef NAME
  }
  return PASADA_OK;
}

/* A gated attention layer's q projection: per head, head_dim rows of q
 * then head_dim rows of its output gate (transformers' q_proj, kept so by
 * llama.cpp's converter); copied apart once into q rows then gate rows,
 * so q is a product with head norms and RoPE like any other. */
static int split_q_gate(pa_layer *L, const pa_matrix *qg, int32_t n_head, int32_t head_dim, const char *name) {
  const size_t row = pa_row_size(qg->type, qg->cols), head = row * (size_t)head_dim;
  uint8_t *mem = pa_alloc(2 * head * (size_t)n_head);
  if (!mem) return pa_error(PASADA_ERR_NOMEM, "out of memory splitting '%s'", name);
  for (int32_t h = 0; h < n_head; h++) {
    memcpy(mem + (size_t)h * head, (const uint8_t *)qg->data + (size_t)(2 * h) * head, head);
    memcpy(mem + (size_t)(n_head + h) * head, (const uint8_t *)qg->data + (size_t)(2 * h + 1) * head, head);
  }
  L->q_split = mem;
  L->wq = *qg;
  L->wq.rows = (int64_t)n_head * head_dim;
  L->wq.data = mem;
  L->wq_gate = L->wq;
  L->wq_gate.data = mem + head * (size_t)n_head;
  return PASADA_OK;
}

/* A matrix's columns [0, k) and [k, cols) as two matrices, copied apart
 * into one allocation (*mem): k a whole number of the type's blocks. */
static int split_columns(const pa_matrix *w, int64_t k, const char *name, void **mem, pa_matrix *a,
                         pa_matrix *b) {
  const pa_type_traits *t = pa_type_get(w->type);
  if (k % t->block_size || (w->cols - k) % t->block_size)
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "tensor '%s': its halves of %lld columns are not whole blocks of %s", name,
                    (long long)k, pa_type_name(w->type));
  const size_t row = pa_row_size(w->type, w->cols), ra = pa_row_size(w->type, k), rb = row - ra;
  uint8_t *p = pa_alloc(row * (size_t)w->rows);
  if (!p) return pa_error(PASADA_ERR_NOMEM, "out of memory splitting '%s'", name);
  for (int64_t r = 0; r < w->rows; r++) {
    memcpy(p + (size_t)r * ra, (const uint8_t *)w->data + (size_t)r * row, ra);
    memcpy(p + ra * (size_t)w->rows + (size_t)r * rb,
           (const uint8_t *)w->data + (size_t)r * row + ra, rb);
  }
  *mem = p;
  *a = *b = *w;
  a->cols = k, a->data = p;
  b->cols = w->cols - k, b->data = p + ra * (size_t)w->rows;
  return PASADA_OK;
}

/* Layer i of a Qwen3.5 file: recurrent, or an attention layer. */
static int ld_qwen35_layer(struct pa_model *m, int i, bool recurrent) {
  const pa_hparams *hp = &m->hp;
  const int64_t E = hp->n_embd, F = hp->n_ff, Q = (int64_t)hp->n_head * hp->head_dim;
  const int64_t K = (int64_t)hp->n_head_kv * hp->head_dim,
                VV = (int64_t)hp->n_head_kv * hp->head_dim_v;
  const int64_t O = (int64_t)hp->n_head * hp->head_dim_v, CD = pa_ssm_conv_dim(hp);
  const int64_t NV = hp->ssm_v_heads, VZ = NV * hp->ssm_v_dim;
  int rc;
  pa_layer *L = &m->layers[i];
  char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", i, s), n)
  const bool moe = hp->n_expert > 0;
  if ((rc = ld_get_vector(m, NAME("attn_norm.weight"), E, true, &L->attn_norm)) ||
      (rc = ld_get_vector(m, NAME("post_attention_norm.weight"), E, true, &L->ffn_norm)) ||
      (rc = ld_get_matrix(m, NAME(moe ? "ffn_gate_shexp.weight" : "ffn_gate.weight"), E, F, true,
                          &L->w_gate)) ||
      (rc = ld_get_matrix(m, NAME(moe ? "ffn_up_shexp.weight" : "ffn_up.weight"), E, F, true,
                          &L->w_up)) ||
      (rc = ld_get_matrix(m, NAME(moe ? "ffn_down_shexp.weight" : "ffn_down.weight"), F, E, true,
                          &L->w_down)))
    return rc;
  if (moe &&
      ((rc = ld_get_experts(m, i)) ||
       (rc = ld_get_matrix(m, NAME("ffn_gate_inp_shexp.weight"), E, 1, true, &L->shexp_gate))))
    return rc;
  if (recurrent) {
    if ((rc = ld_get_matrix(m, NAME("attn_qkv.weight"), E, CD, true, &L->ssm_qkv)) ||
        (rc = ld_get_matrix(m, NAME("attn_gate.weight"), E, VZ, true, &L->ssm_z)) ||
        (rc = ld_get_matrix(m, NAME("ssm_beta.weight"), E, NV, true, &L->ssm_beta)) ||
        (rc = ld_get_matrix(m, NAME("ssm_alpha.weight"), E, NV, true, &L->ssm_alpha)) ||
        (rc = ld_get_matrix(m, NAME("ssm_out.weight"), VZ, E, true, &L->ssm_out)) ||
        (rc = ld_get_table(m, NAME("ssm_conv1d.weight"), hp->ssm_conv, CD, &L->ssm_conv)) ||
        (rc = ld_get_vector(m, NAME("ssm_a"), NV, true, &L->ssm_a)) ||
        (rc = ld_get_vector(m, NAME("ssm_dt.bias"), NV, true, &L->ssm_dt)) ||
        (rc = ld_get_vector(m, NAME("ssm_norm.weight"), hp->ssm_v_dim, true, &L->ssm_norm)))
      return rc;
    for (int64_t h = 0; h < NV; h++)
      if (!(L->ssm_a[h] <= 0 && L->ssm_a[h] > -1e30f) || !isfinite(L->ssm_dt[h]))
        return pa_error(PASADA_ERR_FORMAT,
                        "tensor 'blk.%d.ssm_a' / 'ssm_dt.bias': head %lld has A %g (must "
                        "be -exp(A_log) <= 0) and dt bias %g",
                        i, (long long)h, L->ssm_a[h], L->ssm_dt[h]);
    return PASADA_OK;
  }
  pa_matrix qg = {0};
  if ((rc = ld_get_matrix(m, NAME("attn_q.weight"), E, 2 * Q, true, &qg)) ||
      (rc = split_q_gate(L, &qg, hp->n_head, hp->head_dim, n)) ||
      (rc = ld_get_matrix(m, NAME("attn_k.weight"), E, K, true, &L->wk)) ||
      (rc = ld_get_matrix(m, NAME("attn_v.weight"), E, VV, true, &L->wv)) ||
      (rc = ld_get_matrix(m, NAME("attn_output.weight"), O, E, true, &L->wo)) ||
      (rc = ld_get_vector(m, NAME("attn_q_norm.weight"), hp->head_dim, true, &L->q_norm)) ||
      (rc = ld_get_vector(m, NAME("attn_k_norm.weight"), hp->head_dim, true, &L->k_norm)))
    return rc;
#undef NAME
  return PASADA_OK;
}

/* Qwen3.5's layers (llama.cpp's names): every layer has attn_norm,
 * post_attention_norm (the FFN's input norm) and a dense FFN, or in
 * qwen35moe a mixture of experts (ld_get_experts) and a shared expert
 * (ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp, n_ff wide) with its gate
 * ffn_gate_inp_shexp (one row of n_embd); a recurrent
 * layer attn_qkv (mixed q, k, v), attn_gate (z), ssm_beta, ssm_alpha,
 * ssm_conv1d, ssm_a, ssm_dt.bias, ssm_norm and ssm_out; an attention layer
 * attn_q (q and gate), attn_k, attn_v, their head norms and attn_output.
 * A multi-token-prediction layer (hp.n_mtp, block n_layer) is an attention
 * layer with nextn.eh_proj (n_embd x 2 n_embd), nextn.enorm, nextn.hnorm
 * and nextn.shared_head_norm. */
int ld_qwen35(struct pa_model *m) {
  const pa_hparams *hp = &m->hp;
  const int64_t E = hp->n_embd;
  int rc;
  if (hp->head_dim_v != hp->head_dim)
    return pa_error(PASADA_ERR_FORMAT, "qwen35: key_length %d and value_length %d differ", hp->head_dim,
                    hp->head_dim_v);
  m->layers = pa_calloc((size_t)(hp->n_layer + hp->n_mtp), sizeof(pa_layer));
  if (!m->layers) return pa_error(PASADA_ERR_NOMEM, "out of memory for layers");
  for (int i = 0; i < hp->n_layer + hp->n_mtp; i++)
    if ((rc = ld_qwen35_layer(m, i, i < hp->n_layer && hp->recurrent[i]))) return rc;
  if (hp->n_mtp == 0) return PASADA_OK;
  char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.nextn.%s", hp->n_layer, s), n)
  pa_matrix eh = {0};
  if ((rc = ld_get_matrix(m, NAME("eh_proj.weight"), 2 * E, E, true, &eh)) ||
      (rc = split_columns(&eh, E, n, &m->mtp_split, &m->mtp_eh, &m->mtp_eh_h)) ||
      (rc = ld_get_vector(m, NAME("enorm.weight"), E, true, &m->mtp_enorm)) ||
      (rc = ld_get_vector(m, NAME("hnorm.weight"), E, true, &m->mtp_hnorm)) ||
      (rc = ld_get_vector(m, NAME("shared_head_norm.weight"), E, true, &m->mtp_norm)))
    return rc;
#undef NAME
  return PASADA_OK;
}
