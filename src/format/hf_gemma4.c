/* hf_gemma4.c: Gemma 4 folders (Gemma4ForCausalLM, and the text model of
 * Gemma4ForConditionalGeneration) as llama.cpp's converter writes them:
 * the head sizes and KV head counts of the sliding and the global layers
 * (global_head_dim / num_global_key_value_heads, or transformers 5's
 * per_layer_config), the layer pattern, KV sharing, the double-wide FFN of
 * the sharing layers, per-layer inputs, the experts, each kind's RoPE (the
 * global layers' "proportional" RoPE as rope_freqs: factors of 1e30 freeze
 * the unrotated pairs), the logits' soft-cap; and the tensors under
 * llama.cpp's names, norms as stored (Gemma 4 multiplies by w), the
 * experts' fused gate_up_proj [E][2 ff][n_embd] and down_proj used as
 * stored, layer_scalar as layer_output_scale. The KV-sharing layers'
 * k_proj, v_proj and k_norm, which transformers ignores, are dropped. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "format/hf_internal.h"
#include "quant/quant.h"

/* One kind of layer's head size and KV heads (0: not seen yet). */
typedef struct {
  uint64_t head_dim, kv_heads;
} kind_shape;

/* Layer l's head size and KV heads: per_layer_config's overrides of
 * head_dim / num_key_value_heads (transformers 5 writes them there, keyed
 * by the layer's index, zero-padded), else the kind's defaults. */
static int layer_override(hf_ctx *c, const pj_value *plc, uint32_t l, uint64_t *hd, uint64_t *kv) {
  for (const pj_value *e = plc ? plc->child : NULL; e; e = e->next) {
    char *end = NULL;
    const unsigned long idx = strtoul(e->string, &end, 10);
    if (!e->string[0] || *end || idx != l) continue;
    if (!pj_is_obj(e))
      return pa_error(PASADA_ERR_FORMAT, "%s: per_layer_config['%.20s'] is not an object",
                      c->cfg_path, e->string);
    for (const pj_value *k = e->child; k; k = k->next) {
      const bool is_hd = !strcmp(k->string, "head_dim"),
                 is_kv = !strcmp(k->string, "num_key_value_heads");
      if (!is_hd && !is_kv)
        return pa_error(PASADA_ERR_UNSUPPORTED,
                        "%s: per_layer_config['%.20s'] overrides '%.60s' (supported: head_dim, "
                        "num_key_value_heads)",
                        c->cfg_path, e->string, k->string);
      if (!pj_is_num(k) || !(k->valuedouble >= 1 && k->valuedouble <= 65536) ||
          floor(k->valuedouble) != k->valuedouble)
        return pa_error(PASADA_ERR_FORMAT,
                        "%s: per_layer_config['%.20s'].%s is not an integer in [1, 65536]",
                        c->cfg_path, e->string, k->string);
      *(is_hd ? hd : kv) = (uint64_t)k->valuedouble;
    }
  }
  return PASADA_OK;
}

/* rope_parameters[kind] (transformers' defaults where rope_parameters is
 * absent: sliding "default" at 1e4, full "proportional" at 1e6 rotating a
 * quarter): its theta, the fraction rotated and the frequency divisor. */
static int kind_rope(hf_ctx *c, const char *kind, double *theta, double *frac, double *factor) {
  const pj_value *rp = hf_member(c->cfg, "rope_parameters");
  const bool full = !strcmp(kind, "full_attention");
  *theta = full ? 1e6 : 1e4, *frac = full ? 0.25 : 1, *factor = 1;
  if (!rp) return PASADA_OK;
  const pj_value *k = hf_member(rp, kind), *type = hf_member(k, "rope_type");
  if (!pj_is_obj(k) || !pj_is_str(type))
    return pa_error(PASADA_ERR_FORMAT, "%s: rope_parameters.%s is not an object with a rope_type",
                    c->cfg_path, kind);
  const bool prop = !strcmp(type->valuestring, "proportional");
  if (strcmp(type->valuestring, "default") && (!full || !prop))
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: rope_parameters.%s.rope_type '%.40s' is not supported (%s)", c->cfg_path,
                    kind, type->valuestring, full ? "default, proportional" : "default");
  bool found = false;
  int rc;
  *frac = 1;
  if ((rc = hf_cfg_num(c, k, "rope_theta", theta, &found))) return rc;
  if (!found || !(*theta > 1 && *theta < 1e12))
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: rope_parameters.%s.rope_theta is missing or out of range", c->cfg_path,
                    kind);
  if (prop && ((rc = hf_cfg_num(c, k, "partial_rotary_factor", frac, &found)) ||
               (rc = hf_cfg_num(c, k, "factor", factor, &found))))
    return rc;
  if (!(*frac > 0 && *frac <= 1) || !(*factor > 0 && *factor < 1e6))
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: rope_parameters.%s: partial_rotary_factor %g must be in (0, 1], "
                    "factor %g in (0, 1e6)",
                    c->cfg_path, kind, *frac, *factor);
  return PASADA_OK;
}

/* A boolean key (absent: def). */
static int cfg_bool(hf_ctx *c, const char *key, bool def, bool *out) {
  const pj_value *j = hf_member(c->cfg, key);
  if (j && !pj_is_bool(j))
    return pa_error(PASADA_ERR_FORMAT, "%s: '%s' is not a boolean", c->cfg_path, key);
  *out = j ? pj_is_true(j) : def;
  return PASADA_OK;
}

static int set_i32_array(hf_ctx *c, gguf_writer *w, const char *suffix, const int32_t *v,
                         uint32_t n) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", c->arch, suffix);
  return gguf_writer_set_array(w, key, GGUF_TYPE_INT32, v, n);
}

static int set_f32(hf_ctx *c, gguf_writer *w, const char *suffix, double v) {
  char key[128];
  snprintf(key, sizeof key, "%s.%s", c->arch, suffix);
  return gguf_writer_set_f32(w, key, (float)v);
}

/* The layer pattern (layer_types, else transformers' five sliding layers
 * in six; the last layer full, as transformers forces it), each kind's
 * heads, KV sharing and the FFN widths. */
static int layers_config(hf_ctx *c, gguf_writer *w, uint32_t n_layer, uint64_t n_ff,
                         uint64_t *hd_full, uint64_t *hd_swa) {
  bool *swa = calloc(n_layer, sizeof *swa);
  int32_t *ff = calloc(n_layer, sizeof *ff), *kv = calloc(n_layer, sizeof *kv);
  int rc = PASADA_OK;
  if (!swa || !ff || !kv) {
    rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
    goto done;
  }
  const pj_value *lt = hf_member(c->cfg, "layer_types");
  if (lt && (!pj_is_arr(lt) || (uint64_t)pj_size(lt) != n_layer)) {
    rc = pa_error(PASADA_ERR_FORMAT,
                  "%s: layer_types is not an array of %u entries (num_hidden_layers)", c->cfg_path,
                  n_layer);
    goto done;
  }
  uint32_t i = 0;
  for (const pj_value *e = lt ? lt->child : NULL; e; e = e->next, i++) {
    if (!pj_is_str(e) ||
        (strcmp(e->valuestring, "sliding_attention") && strcmp(e->valuestring, "full_attention"))) {
      rc = pa_error(PASADA_ERR_FORMAT,
                    "%s: layer_types[%u] is not sliding_attention or full_attention", c->cfg_path,
                    i);
      goto done;
    }
    swa[i] = !strcmp(e->valuestring, "sliding_attention");
  }
  if (!lt)
    for (i = 0; i < n_layer; i++) swa[i] = (i + 1) % 6 != 0;
  swa[n_layer - 1] = false;
  /* heads: top-level head_dim / num_key_value_heads, the full layers'
   * global_head_dim (transformers' default 512) and, where K is V,
   * num_global_key_value_heads; per_layer_config overrides both */
  uint64_t hd = 256, n_kv = 0, n_head = 0, g_hd = 512, g_kv = 0, shared = 0;
  bool k_eq_v = false, double_wide = false;
  const pj_value *plc = hf_member(c->cfg, "per_layer_config");
  if ((rc = hf_cfg_uint(c, "head_dim", false, 1024, &hd)) ||
      (rc = hf_cfg_uint(c, "num_attention_heads", true, 1 << 16, &n_head)) ||
      (rc = hf_cfg_uint(c, "num_key_value_heads", false, 1 << 16, &n_kv)) ||
      (rc = hf_cfg_uint(c, "global_head_dim", false, 1024, &g_hd)) ||
      (rc = hf_cfg_uint(c, "num_global_key_value_heads", false, 1 << 16, &g_kv)) ||
      (rc = hf_cfg_uint(c, "num_kv_shared_layers", false, n_layer, &shared)) ||
      (rc = cfg_bool(c, "attention_k_eq_v", false, &k_eq_v)) ||
      (rc = cfg_bool(c, "use_double_wide_mlp", false, &double_wide)))
    goto done;
  if (plc && !pj_is_obj(plc)) {
    rc = pa_error(PASADA_ERR_FORMAT, "%s: per_layer_config is not an object", c->cfg_path);
    goto done;
  }
  for (const pj_value *e = plc ? plc->child : NULL; e; e = e->next) {
    char *end = NULL;
    if (!e->string[0] || strtoul(e->string, &end, 10) >= n_layer || *end || e->string[0] < '0' ||
        e->string[0] > '9') {
      rc = pa_error(PASADA_ERR_FORMAT,
                    "%s: per_layer_config key '%.20s' is not a layer index below %u", c->cfg_path,
                    e->string, n_layer);
      goto done;
    }
  }
  if (!n_kv) n_kv = n_head;
  kind_shape kinds[2] = {{0, 0}, {0, 0}}; /* full, sliding */
  for (i = 0; i < n_layer; i++) {
    uint64_t lhd = hd, lkv = n_kv;
    if (!swa[i] && !plc) lhd = g_hd, lkv = k_eq_v && g_kv ? g_kv : n_kv;
    if ((rc = layer_override(c, plc, i, &lhd, &lkv))) goto done;
    if (lhd < 2 || lhd % 2 || lkv == 0 || n_head % lkv) {
      rc = pa_error(PASADA_ERR_FORMAT,
                    "%s: layer %u has heads of %" PRIu64 " and %" PRIu64
                    " KV heads: need an "
                    "even head size and KV heads dividing the %" PRIu64 " heads",
                    c->cfg_path, i, lhd, lkv, n_head);
      goto done;
    }
    kind_shape *k = &kinds[swa[i]];
    if (k->head_dim && (k->head_dim != lhd || k->kv_heads != lkv)) {
      rc = pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: %s layers of different head sizes or KV heads (layer %u: %" PRIu64
                    " x %" PRIu64 ", earlier %" PRIu64 " x %" PRIu64 ") are not supported",
                    c->cfg_path, swa[i] ? "sliding" : "full attention", i, lkv, lhd, k->kv_heads,
                    k->head_dim);
      goto done;
    }
    k->head_dim = lhd, k->kv_heads = lkv;
    kv[i] = (int32_t)lkv;
  }
  *hd_full = kinds[0].head_dim;
  *hd_swa = kinds[1].head_dim ? kinds[1].head_dim : hd;
  /* KV sharing: the last `shared` layers reuse the cache of the last
   * earlier layer of their kind */
  const uint32_t first = n_layer - (uint32_t)shared;
  for (i = first; i < n_layer; i++) {
    bool found = false;
    for (uint32_t j = 0; j < first && !found; j++) found = swa[j] == swa[i];
    if (!found) {
      rc = pa_error(PASADA_ERR_FORMAT,
                    "%s: num_kv_shared_layers %" PRIu64
                    ": layer %u (%s) shares the KV cache of "
                    "an earlier layer of its kind, and none of the first %u is one",
                    c->cfg_path, shared, i, swa[i] ? "sliding_attention" : "full_attention", first);
      goto done;
    }
  }
  c->g4_first_shared = first;
  /* the full layers without a V projection of their own (V is K's) */
  if (!(c->g4_no_v = hf_keep_buf(c, n_layer))) {
    rc = pa_error(PASADA_ERR_NOMEM, "out of memory");
    goto done;
  }
  for (i = 0; i < n_layer; i++) c->g4_no_v[i] = k_eq_v && !swa[i];
  bool ff_differ = false, kv_differ = false;
  for (i = 0; i < n_layer; i++) {
    ff[i] = (int32_t)(n_ff * (double_wide && i >= first ? 2 : 1));
    ff_differ |= ff[i] != ff[0], kv_differ |= kv[i] != kv[0];
  }
  char key[128];
  snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", c->arch);
  if ((rc = gguf_writer_set_array(w, key, GGUF_TYPE_BOOL, swa, n_layer)) ||
      (rc = hf_set_u32(c, w, "attention.shared_kv_layers", shared)) ||
      (rc = hf_set_u32(c, w, "attention.key_length", *hd_full)) ||
      (rc = hf_set_u32(c, w, "attention.value_length", *hd_full)) ||
      (rc = hf_set_u32(c, w, "attention.key_length_swa", *hd_swa)) ||
      (rc = hf_set_u32(c, w, "attention.value_length_swa", *hd_swa)) ||
      (rc = kv_differ ? set_i32_array(c, w, "attention.head_count_kv", kv, n_layer)
                      : hf_set_u32(c, w, "attention.head_count_kv", (uint64_t)kv[0])) ||
      (rc = ff_differ ? set_i32_array(c, w, "feed_forward_length", ff, n_layer) : PASADA_OK))
    goto done;
done:
  free(swa), free(ff), free(kv);
  return rc;
}

/* The experts beside every layer's dense FFN (enable_moe_block):
 * num_experts, top_k_experts, moe_intermediate_size. */
static int experts_config(hf_ctx *c, gguf_writer *w) {
  bool moe = false;
  uint64_t n_expert = 0, n_used = 0, n_ff_exp = 0;
  int rc;
  if ((rc = cfg_bool(c, "enable_moe_block", false, &moe)) || !moe) return rc;
  if ((rc = hf_cfg_uint(c, "num_experts", true, 4096, &n_expert)) ||
      (rc = hf_cfg_uint(c, "top_k_experts", true, 4096, &n_used)) ||
      (rc = hf_cfg_uint(c, "moe_intermediate_size", true, 1 << 24, &n_ff_exp)))
    return rc;
  if (n_expert == 0 || n_used == 0 || n_used > n_expert || n_ff_exp == 0)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: %" PRIu64 " experts of %" PRIu64 " of which %" PRIu64
                    " per token: "
                    "need 1 <= per token <= experts and a width >= 1",
                    c->cfg_path, n_expert, n_ff_exp, n_used);
  c->g4_experts = (uint32_t)n_expert, c->n_ff_exp = (uint32_t)n_ff_exp;
  if ((rc = hf_set_u32(c, w, "expert_count", n_expert)) ||
      (rc = hf_set_u32(c, w, "expert_used_count", n_used)))
    return rc;
  return hf_set_u32(c, w, "expert_feed_forward_length", n_ff_exp);
}

int hf_gemma4_config(hf_ctx *c, gguf_writer *w, uint64_t n_layer, uint64_t n_ff, uint64_t vocab) {
  int rc;
  const pj_value *act = hf_member(c->cfg, "hidden_activation"),
                 *bidir = hf_member(c->cfg, "use_bidirectional_attention");
  bool bias = false;
  if ((rc = cfg_bool(c, "attention_bias", false, &bias))) return rc;
  const char *bad = bias ? "attention_bias true"
                    : act && (!pj_is_str(act) || (strcmp(act->valuestring, "gelu_pytorch_tanh") &&
                                                  strcmp(act->valuestring, "gelu_tanh")))
                        ? "hidden_activation"
                    : pj_is_str(bidir) && !strcmp(bidir->valuestring, "all")
                        ? "use_bidirectional_attention \"all\""
                        : NULL;
  if (bad)
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: %s is not supported (Gemma 4 runs gelu_pytorch_tanh, causal "
                    "attention, no attention biases)",
                    c->cfg_path, bad);
  uint64_t hd_full = 0, hd_swa = 0, window = 512, per_layer = 0, vocab_pl = vocab;
  if ((rc = layers_config(c, w, (uint32_t)n_layer, n_ff, &hd_full, &hd_swa)) ||
      (rc = experts_config(c, w)) ||
      (rc = hf_cfg_uint(c, "sliding_window", false, 1 << 24, &window)) ||
      (rc = hf_cfg_uint(c, "hidden_size_per_layer_input", false, 8192, &per_layer)) ||
      (rc = hf_cfg_uint(c, "vocab_size_per_layer_input", false, INT32_MAX, &vocab_pl)))
    return rc;
  if (window == 0) return pa_error(PASADA_ERR_FORMAT, "%s: sliding_window is 0", c->cfg_path);
  if (per_layer && vocab_pl != vocab)
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: vocab_size_per_layer_input %" PRIu64 " differs from vocab_size %" PRIu64
                    ": not supported",
                    c->cfg_path, vocab_pl, vocab);
  c->g4_per_layer = (uint32_t)per_layer;
  double theta = 0, frac = 0, factor = 0, theta_swa = 0, frac_swa = 0, factor_swa = 0, cap = 0;
  bool found = false;
  if ((rc = kind_rope(c, "full_attention", &theta, &frac, &factor)) ||
      (rc = kind_rope(c, "sliding_attention", &theta_swa, &frac_swa, &factor_swa)) ||
      (rc = hf_cfg_num(c, c->cfg, "final_logit_softcapping", &cap, &found)))
    return rc;
  if (!(cap >= 0 && cap < 1e6))
    return pa_error(PASADA_ERR_FORMAT, "%s: final_logit_softcapping %g is out of range [0, 1e6)",
                    c->cfg_path, cap);
  /* the full layers rotate int(frac * hd / 2) pairs at theta^(-2i / hd) /
   * factor (transformers' proportional RoPE): rope_freqs divides the
   * frequencies (llama.cpp's converter writes 1 and 1e30) */
  const uint64_t half = hd_full / 2, rot = (uint64_t)(frac * (double)hd_full / 2);
  if (rot == 0)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: partial_rotary_factor %g rotates no pair of the %" PRIu64
                    "-wide full attention heads",
                    c->cfg_path, frac, hd_full);
  if (rot < half || factor != 1) {
    float *f = hf_keep_buf(c, half * sizeof *f);
    if (!f) return pa_error(PASADA_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < half; i++) f[i] = i < rot ? (float)factor : 1e30f;
    const int64_t ne[4] = {(int64_t)half, 1, 1, 1};
    if ((rc = gguf_writer_add_tensor(w, "rope_freqs.weight", PA_TYPE_F32, 1, ne, f,
                                     half * sizeof *f)))
      return rc;
  }
  if ((rc = hf_set_u32(c, w, "rope.dimension_count", hd_full)) ||
      (rc = hf_set_u32(c, w, "rope.dimension_count_swa", hd_swa)) ||
      (rc = set_f32(c, w, "rope.freq_base", theta)) ||
      (rc = set_f32(c, w, "rope.freq_base_swa", theta_swa)) ||
      (rc = hf_set_u32(c, w, "attention.sliding_window", window)) ||
      (rc = hf_set_u32(c, w, "embedding_length_per_layer_input", per_layer)))
    return rc;
  return found && cap > 0 ? set_f32(c, w, "final_logit_softcapping", cap) : PASADA_OK;
}

/* transformers' name (after model.layers.N.) -> llama.cpp's (after blk.N.) */
static const struct {
  const char *hf, *gguf;
  uint8_t need; /* 1: only with per-layer inputs, 2: only with experts, 3: only in a layer with its
                  own KV, 4: only in a layer with its own KV and V projection */
} layer_names[] = {
    {"input_layernorm.weight", "attn_norm.weight", 0},
    {"self_attn.q_proj.weight", "attn_q.weight", 0},
    {"self_attn.q_norm.weight", "attn_q_norm.weight", 0},
    {"self_attn.k_proj.weight", "attn_k.weight", 3},
    {"self_attn.k_norm.weight", "attn_k_norm.weight", 3},
    {"self_attn.v_proj.weight", "attn_v.weight", 4},
    {"self_attn.o_proj.weight", "attn_output.weight", 0},
    {"post_attention_layernorm.weight", "post_attention_norm.weight", 0},
    {"pre_feedforward_layernorm.weight", "ffn_norm.weight", 0},
    {"mlp.gate_proj.weight", "ffn_gate.weight", 0},
    {"mlp.up_proj.weight", "ffn_up.weight", 0},
    {"mlp.down_proj.weight", "ffn_down.weight", 0},
    {"post_feedforward_layernorm.weight", "post_ffw_norm.weight", 0},
    {"layer_scalar", "layer_output_scale.weight", 0},
    {"per_layer_input_gate.weight", "inp_gate.weight", 1},
    {"per_layer_projection.weight", "proj.weight", 1},
    {"post_per_layer_input_norm.weight", "post_norm.weight", 1},
    {"router.proj.weight", "ffn_gate_inp.weight", 2},
    {"router.scale", "ffn_gate_inp.scale", 2},
    {"router.per_expert_scale", "ffn_down_exps.scale", 2},
    {"experts.gate_up_proj", "ffn_gate_up_exps.weight", 2},
    {"experts.down_proj", "ffn_down_exps.weight", 2},
    {"pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight", 2},
    {"post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight", 2},
    {"post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight", 2},
};

/* The experts' fused tensors as transformers' modules hold them (gate_up_proj
 * [E][2 ff][n_embd], down_proj [E][n_embd][ff]: llama.cpp's layout). */
static int check_experts(const hf_ctx *c, const st_tensor *t, bool gate_up) {
  const int64_t rows = gate_up ? 2 * (int64_t)c->n_ff_exp : c->n_embd,
                cols = gate_up ? c->n_embd : c->n_ff_exp;
  if (t->n_dims == 3 && t->ne[2] == c->g4_experts && t->ne[1] == rows && t->ne[0] == cols)
    return PASADA_OK;
  return pa_error(PASADA_ERR_FORMAT,
                  "%s: tensor '%.100s' is not [%u experts][%" PRId64 "][%" PRId64
                  "] (config.json's "
                  "num_experts, moe_intermediate_size, hidden_size; it is %u dims: %" PRId64
                  " x %" PRId64 " x %" PRId64 ", innermost first)",
                  c->dir, t->name, c->g4_experts, rows, cols, t->n_dims, t->ne[0], t->ne[1],
                  t->ne[2]);
}

/* The per-layer inputs' tensors of the model (the token table, the
 * embedding's projection, its norm), their shapes checked against
 * config.json (the model loader checks the per-layer ones). */
static int per_layer_global(hf_ctx *c, gguf_writer *w, uint32_t shard, const st_tensor *t,
                            const char *rest, bool *done) {
  static const char *const hf[3] = {"embed_tokens_per_layer.weight",
                                    "per_layer_model_projection.weight",
                                    "per_layer_projection_norm.weight"};
  static const char *const gg[3] = {"per_layer_token_embd.weight", "per_layer_model_proj.weight",
                                    "per_layer_proj_norm.weight"};
  for (int k = 0; k < 3; k++) {
    if (strcmp(rest, hf[k])) continue;
    *done = true;
    if (!c->g4_per_layer)
      return pa_error(PASADA_ERR_FORMAT,
                      "%s: tensor '%.100s' is a per-layer input's, and config.json's "
                      "hidden_size_per_layer_input is 0",
                      c->dir, t->name);
    const int64_t lp = (int64_t)c->n_layer * c->g4_per_layer;
    const int64_t want0 = k == 0   ? lp
                          : k == 1 ? c->n_embd
                                   : c->g4_per_layer,
                  want1 = k == 0   ? -1
                          : k == 1 ? lp
                                   : 1;
    if (t->ne[0] != want0 || (want1 >= 0 && t->ne[1] != want1) || t->n_dims != (k == 2 ? 1u : 2u))
      return pa_error(PASADA_ERR_FORMAT,
                      "%s: tensor '%.100s' has the wrong shape for %u layers of "
                      "hidden_size_per_layer_input %u (%u dims: %" PRId64 " x %" PRId64
                      ", innermost first)",
                      c->dir, t->name, c->n_layer, c->g4_per_layer, t->n_dims, t->ne[0], t->ne[1]);
    return hf_add_tensor(c, w, (int32_t)shard, t, gg[k]);
  }
  return PASADA_OK;
}

int hf_gemma4_tensor(hf_ctx *c, gguf_writer *w, uint32_t shard, const st_tensor *t, bool *done) {
  *done = false;
  if (!strncmp(t->name, "model.", 6)) {
    int rc = per_layer_global(c, w, shard, t, t->name + 6, done);
    if (rc || *done) return rc;
  }
  unsigned layer;
  int at = 0;
  if (sscanf(t->name, "model.layers.%u.%n", &layer, &at) != 1 || at == 0 || layer >= c->n_layer)
    return PASADA_OK;
  const char *rest = t->name + at;
  size_t k = 0;
  while (k < sizeof layer_names / sizeof layer_names[0] && strcmp(rest, layer_names[k].hf)) k++;
  if (k == sizeof layer_names / sizeof layer_names[0])
    return PASADA_OK; /* hf.c: no place in the model */
  *done = true;
  const uint8_t need = layer_names[k].need;
  /* a KV-sharing layer's k and v, a K = V layer's v: transformers does not read them */
  if ((need >= 3 && layer >= c->g4_first_shared) || (need == 4 && c->g4_no_v[layer]))
    return PASADA_OK;
  if ((need == 1 && !c->g4_per_layer) || (need == 2 && !c->g4_experts))
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: tensor '%.100s' belongs to %s, which config.json's %s leaves out", c->dir,
                    t->name, need == 1 ? "per-layer inputs" : "experts",
                    need == 1 ? "hidden_size_per_layer_input" : "enable_moe_block");
  if (t->type >= ST_TYPE_I64)
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: tensor '%.100s' has dtype %s (supported: F32, F16, BF16)", c->dir, t->name,
                    st_type_name(t->type));
  int rc;
  if (!strncmp(rest, "experts.", 8) &&
      (rc = check_experts(c, t, !strcmp(rest, "experts.gate_up_proj"))))
    return rc;
  char name[64];
  snprintf(name, sizeof name, "blk.%u.%s", layer, layer_names[k].gguf);
  return hf_add_tensor(c, w, (int32_t)shard, t, name);
}
