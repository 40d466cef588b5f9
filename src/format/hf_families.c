/* hf_families.c: the config.json keys of the Hugging Face families with
 * their own hyper-parameters: the mixtures of experts (Qwen3-MoE, Mixtral;
 * their experts as transformers' fused 3-D tensors too), Phi-3 (partial
 * rotary, the window, LongRoPE and its factor tensors), and the RoPE
 * scalings that become keys or tensors (llama3, YaRN). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "format/hf_internal.h"
#include "quant/quant.h"

/* The mixture of experts: expert_count, expert_used_count and (Qwen3-MoE,
 * Qwen3.5-MoE) expert_feed_forward_length; their experts in every layer and
 * the chosen weights renormalised, as pasada runs it; Qwen3.5-MoE's shared
 * expert's width as expert_shared_feed_forward_length. */
int hf_experts_config(hf_ctx *c, gguf_writer *w) {
  const bool q35 = !strcmp(c->arch, "qwen35moe"), q3 = q35 || !strcmp(c->arch, "qwen3moe");
  if (!q3 && !c->mixtral) return PASADA_OK;
  uint64_t n_expert = 0, n_used = 0, n_ff_exp = 0, step = 1;
  int rc;
  if ((rc = hf_cfg_uint(
           c, hf_member(c->cfg, "num_local_experts") ? "num_local_experts" : "num_experts", true,
           4096, &n_expert)) ||
      (rc = hf_cfg_uint(c, "num_experts_per_tok", true, 4096, &n_used)) ||
      (rc = hf_cfg_uint(c, q3 ? "moe_intermediate_size" : "intermediate_size", true, 1 << 24,
                        &n_ff_exp)) ||
      (rc = hf_cfg_uint(c, "decoder_sparse_step", false, 4096, &step)))
    return rc;
  if (n_expert == 0 || n_used == 0 || n_used > n_expert)
    return pa_error(PASADA_ERR_FORMAT, "%s: %" PRIu64 " experts of which %" PRIu64 " per token",
                    c->cfg_path, n_expert, n_used);
  const pj_value *mlp_only = hf_member(c->cfg, "mlp_only_layers"),
                 *norm = hf_member(c->cfg, "norm_topk_prob");
  if (q3 && (step != 1 || (mlp_only && !(pj_is_arr(mlp_only) && pj_size(mlp_only) == 0))))
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: experts in only some layers (decoder_sparse_step, mlp_only_layers) are "
                    "not supported",
                    c->cfg_path);
  if (q3 && norm && !pj_is_true(norm))
    return pa_error(PASADA_ERR_UNSUPPORTED, "%s: norm_topk_prob false is not supported",
                    c->cfg_path);
  c->n_expert = (uint32_t)n_expert, c->n_ff_exp = (uint32_t)n_ff_exp;
  char key[128];
  snprintf(key, sizeof key, "%s.expert_count", c->arch);
  if ((rc = gguf_writer_set_u32(w, key, (uint32_t)n_expert))) return rc;
  snprintf(key, sizeof key, "%s.expert_used_count", c->arch);
  if ((rc = gguf_writer_set_u32(w, key, (uint32_t)n_used))) return rc;
  if (q35) {
    uint64_t n_ff_sh = 0;
    if ((rc = hf_cfg_uint(c, "shared_expert_intermediate_size", true, 1 << 24, &n_ff_sh))) return rc;
    snprintf(key, sizeof key, "%s.expert_shared_feed_forward_length", c->arch);
    if ((rc = gguf_writer_set_u32(w, key, (uint32_t)n_ff_sh))) return rc;
  }
  snprintf(key, sizeof key, "%s.expert_feed_forward_length", c->arch);
  return q3 ? gguf_writer_set_u32(w, key, (uint32_t)n_ff_exp) : PASADA_OK;
}

int hf_expert_rows(hf_ctx *c, gguf_writer *w, const st_tensor *t, int64_t first, int64_t n,
                   const char *name) {
  const int64_t cols = t->ne[0], rows = t->ne[1], n_e = t->ne[2];
  const size_t es = hf_elem_size(t->type), part = (size_t)(n * cols) * es;
  uint8_t *dst = hf_keep_buf(c, part * (size_t)n_e);
  if (!dst) return pa_error(PASADA_ERR_NOMEM, "out of memory for '%s'", name);
  for (int64_t e = 0; e < n_e; e++)
    memcpy(dst + (size_t)e * part, t->data + (size_t)((e * rows + first) * cols) * es, part);
  st_tensor m = hf_mem_tensor(name, t->type, 3, cols, n, n_e, dst);
  return hf_add_tensor(c, w, -1, &m, name);
}

int hf_expert_cols(hf_ctx *c, gguf_writer *w, const st_tensor *t, int64_t first, int64_t stride,
                   int64_t n, const char *name) {
  const int64_t cols = t->ne[0], rows = t->ne[1], n_e = t->ne[2];
  const size_t es = hf_elem_size(t->type);
  uint8_t *dst = hf_keep_buf(c, (size_t)(n_e * n * rows) * es);
  if (!dst) return pa_error(PASADA_ERR_NOMEM, "out of memory for '%s'", name);
  for (int64_t e = 0; e < n_e; e++)
    for (int64_t f = 0; f < n; f++)
      for (int64_t i = 0; i < rows; i++)
        memcpy(dst + (size_t)((e * n + f) * rows + i) * es,
               t->data + (size_t)((e * rows + i) * cols + first + f * stride) * es, es);
  st_tensor m = hf_mem_tensor(name, t->type, 3, rows, n, n_e, dst);
  return hf_add_tensor(c, w, -1, &m, name);
}

/* Whether t is [E][outer][inner] (ne inner, outer, E). */
static bool experts_shaped(const hf_ctx *c, const st_tensor *t, int64_t outer, int64_t inner) {
  return t->n_dims == 3 && t->ne[2] == (int64_t)c->n_expert && t->ne[1] == outer &&
         t->ne[0] == inner;
}

/* transformers' fused experts: as its modules hold them (gate_up_proj
 * [E][2 ff][n_embd], gate the first ff rows, up the rest; down_proj
 * [E][n_embd][ff]: llama.cpp's ffn_down_exps, used as stored), or
 * transposed as x @ W products ([E][n_embd][2 ff], gate the first ff
 * columns; [E][ff][n_embd]), as some published checkpoints store them.
 * gate_up_proj is copied: each expert's gate rows are followed by its up
 * rows, so neither half is one block the GGUF view could point at.
 * Both tensors of a layer have one orientation: where one's shape fits
 * both (2 ff == n_embd for gate_up_proj, ff == n_embd for down_proj) the
 * other's decides. */
int hf_fused_experts(hf_ctx *c, gguf_writer *w, uint32_t l) {
  const st_tensor *gu = c->fused[(size_t)l * 2], *dn = c->fused[(size_t)l * 2 + 1];
  if (!gu || !dn)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: tensor '%.100s' has no %s beside it (transformers' fused experts come as "
                    "gate_up_proj and down_proj)",
                    c->dir, (gu ? gu : dn)->name, gu ? "down_proj" : "gate_up_proj");
  const int64_t h = c->n_embd, ff = c->n_ff_exp;
  const bool gu_std = experts_shaped(c, gu, 2 * ff, h), gu_tr = experts_shaped(c, gu, h, 2 * ff),
             dn_std = experts_shaped(c, dn, h, ff), dn_tr = experts_shaped(c, dn, ff, h);
  const bool tr = gu_std != gu_tr ? gu_tr : dn_std != dn_tr ? dn_tr : false;
  const st_tensor *bad = !(tr ? gu_tr : gu_std) ? gu : !(tr ? dn_tr : dn_std) ? dn : NULL;
  if (bad) {
    const bool is_gu = bad == gu;
    const int64_t x = is_gu ? 2 * ff : h, y = is_gu ? h : ff; /* as transformers holds it */
    if (is_gu ? gu_std || gu_tr : dn_std || dn_tr) /* the other orientation: the pair disagrees */
      return pa_error(PASADA_ERR_FORMAT,
                      "%s: tensor '%.100s' is laid out %s but its layer's %s %s (transformers' "
                      "fused experts: both one way or the other)",
                      c->dir, bad->name, tr ? "as transformers' modules hold it" : "as x @ W",
                      is_gu ? "down_proj" : "gate_up_proj",
                      tr ? "as x @ W" : "as transformers' modules hold it");
    return pa_error(
        PASADA_ERR_FORMAT,
        "%s: tensor '%.100s' is not [%u experts][%" PRId64 "][%" PRId64
        "] or, as x @ W, [%u experts][%" PRId64 "][%" PRId64
        "] (config.json's experts, hidden_size and expert width; it is %u dims: %" PRId64
        " x %" PRId64 " x %" PRId64 ", innermost first)",
        c->dir, bad->name, c->n_expert, x, y, c->n_expert, y, x, bad->n_dims, bad->ne[0],
        bad->ne[1], bad->ne[2]);
  }
  char gate[64], up[64], down[64];
  snprintf(gate, sizeof gate, "blk.%u.ffn_gate_exps.weight", l);
  snprintf(up, sizeof up, "blk.%u.ffn_up_exps.weight", l);
  snprintf(down, sizeof down, "blk.%u.ffn_down_exps.weight", l);
  int rc;
  if (tr) {
    if ((rc = hf_expert_cols(c, w, gu, 0, 1, ff, gate)) ||
        (rc = hf_expert_cols(c, w, gu, ff, 1, ff, up)))
      return rc;
    return hf_expert_cols(c, w, dn, 0, 1, h, down);
  }
  if ((rc = hf_expert_rows(c, w, gu, 0, ff, gate)) || (rc = hf_expert_rows(c, w, gu, ff, ff, up)))
    return rc;
  return hf_add_tensor(c, w, (int32_t)c->fused_shard[(size_t)l * 2 + 1], dn, down);
}

/* A LongRoPE factor list of rope_parameters as an F32 tensor of n entries. */
static int rope_factors(hf_ctx *c, gguf_writer *w, const pj_value *rp, const char *key,
                        const char *name, uint64_t n) {
  const pj_value *a = hf_member(rp, key);
  if (!pj_is_arr(a) || (uint64_t)pj_size(a) != n)
    return pa_error(PASADA_ERR_FORMAT, "%s: LongRoPE's %s is not an array of %" PRIu64 " numbers",
                    c->cfg_path, key, n);
  float *f = hf_keep_buf(c, n * sizeof *f);
  if (!f) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  uint64_t i = 0;
  for (const pj_value *e = a->child; e; e = e->next, i++) {
    if (!pj_is_num(e) || !(e->valuedouble > 0 && e->valuedouble < 1e9))
      return pa_error(PASADA_ERR_FORMAT, "%s: %s[%" PRIu64 "] is not a number in (0, 1e9)",
                      c->cfg_path, key, i);
    f[i] = (float)e->valuedouble;
  }
  const int64_t ne[4] = {(int64_t)n, 1, 1, 1};
  return gguf_writer_add_tensor(w, name, PA_TYPE_F32, 1, ne, f, n * sizeof *f);
}

int hf_rope_dim(hf_ctx *c, gguf_writer *w, uint64_t head_dim, double def, uint64_t *rope_dim) {
  const pj_value *rp = hf_member(c->cfg, "rope_parameters");
  if (!rp) rp = hf_member(c->cfg, "rope_scaling");
  double prf = def;
  bool found = false;
  int rc;
  if ((rc = hf_cfg_num(c, c->cfg, "partial_rotary_factor", &prf, &found))) return rc;
  if (!found && (rc = hf_cfg_num(c, rp, "partial_rotary_factor", &prf, &found))) return rc;
  const double rd = (double)head_dim * prf;
  if (!(prf > 0 && prf <= 1) || floor(rd) != rd || (uint64_t)rd % 2)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: partial_rotary_factor %g does not rotate an even part of the head",
                    c->cfg_path, prf);
  *rope_dim = (uint64_t)rd;
  return hf_set_u32(c, w, "rope.dimension_count", *rope_dim);
}

int hf_set_u32(hf_ctx *c, gguf_writer *w, const char *suffix, uint64_t v) {
  char key[160];
  snprintf(key, sizeof key, "%s.%s", c->arch, suffix);
  return gguf_writer_set_u32(w, key, (uint32_t)v);
}

int hf_layer_types(hf_ctx *c, uint64_t n_layer, uint64_t period, const char *every, const char *other,
                   const char *rule) {
  const pj_value *lt = hf_member(c->cfg, "layer_types");
  if (lt && (!pj_is_arr(lt) || (uint64_t)pj_size(lt) != n_layer))
    return pa_error(PASADA_ERR_FORMAT, "%s: layer_types is not an array of %" PRIu64 " entries",
                    c->cfg_path, n_layer);
  uint32_t i = 0;
  for (const pj_value *e = lt ? lt->child : NULL; e; e = e->next, i++) {
    const char *want = (i + 1) % period == 0 ? every : other;
    if (!pj_is_str(e) || strcmp(e->valuestring, want) != 0)
      return pa_error(PASADA_ERR_UNSUPPORTED, "%s: layer_types[%u] is not %s (%s)", c->cfg_path, i,
                      want, rule);
  }
  return PASADA_OK;
}

/* Phi-3: partial rotary (rope.dimension_count), the window over every
 * layer, and LongRoPE (factor tensors, original context, attention factor:
 * the given one, else sqrt(1 + ln(scale) / ln(original)) for scale > 1). */
int hf_phi3_config(hf_ctx *c, gguf_writer *w, uint64_t head_dim, uint64_t n_ctx) {
  const pj_value *rp = hf_member(c->cfg, "rope_parameters");
  if (!rp) rp = hf_member(c->cfg, "rope_scaling");
  uint64_t rope_dim = 0;
  int rc;
  if ((rc = hf_rope_dim(c, w, head_dim, 1, &rope_dim))) return rc;
  uint64_t window = 0;
  if ((rc = hf_cfg_uint(c, "sliding_window", false, 1 << 24, &window))) return rc;
  if (window && (rc = gguf_writer_set_u32(w, "phi3.attention.sliding_window", (uint32_t)window)))
    return rc;
  const pj_value *type = hf_member(rp, "rope_type");
  if (!type) type = hf_member(rp, "type");
  if (!pj_is_str(type) ||
      (strcmp(type->valuestring, "longrope") && strcmp(type->valuestring, "su")))
    return PASADA_OK;
  double orig = 0, attn = 0;
  bool fo = false, fa = false;
  if ((rc = hf_cfg_num(c, rp, "original_max_position_embeddings", &orig, &fo))) return rc;
  if (!fo && (rc = hf_cfg_num(c, c->cfg, "original_max_position_embeddings", &orig, &fo)))
    return rc;
  if (!fo || !(orig >= 1 && orig <= (1 << 24)) || floor(orig) != orig)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: LongRoPE needs original_max_position_embeddings in [1, 2^24]",
                    c->cfg_path);
  if ((rc = hf_cfg_num(c, rp, "attention_factor", &attn, &fa))) return rc;
  if (!fa) {
    const double scale = n_ctx ? (double)n_ctx / orig : 1;
    attn = scale <= 1 || orig <= 1 ? 1.0 : sqrt(1 + log(scale) / log(orig));
  }
  if ((rc = gguf_writer_set_u32(w, "phi3.rope.scaling.original_context_length", (uint32_t)orig)) ||
      (rc = gguf_writer_set_f32(w, "phi3.rope.scaling.attn_factor", (float)attn)))
    return rc;
  if ((rc = rope_factors(c, w, rp, "long_factor", "rope_factors_long.weight", rope_dim / 2)))
    return rc;
  return rope_factors(c, w, rp, "short_factor", "rope_factors_short.weight", rope_dim / 2);
}

/* Llama 3.1's RoPE scaling as llama.cpp's converter writes it: no scaling
 * keys, a rope_freqs tensor of head_dim / 2 factors that divide each
 * frequency: 1 for wavelengths under original / high_freq_factor, `factor`
 * above original / low_freq_factor, and between them the smooth blend
 * 1 / ((1 - s) / factor + s), s = (original / wavelength - low) / (high - low). */
int hf_llama3_rope(hf_ctx *c, gguf_writer *w, const pj_value *rp, double theta,
                   uint64_t rope_dim) {
  double factor = 8, low = 1, high = 4, orig = 8192;
  bool found = false;
  int rc;
  if ((rc = hf_cfg_num(c, rp, "factor", &factor, &found)) ||
      (rc = hf_cfg_num(c, rp, "low_freq_factor", &low, &found)) ||
      (rc = hf_cfg_num(c, rp, "high_freq_factor", &high, &found)) ||
      (rc = hf_cfg_num(c, rp, "original_max_position_embeddings", &orig, &found)))
    return rc;
  if (!(factor > 0 && factor < 1e6) || !(low > 0) || !(high > low) || !(high < 1e6) ||
      !(orig >= 1 && orig <= (1 << 24)))
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: llama3 rope scaling needs factor in (0, 1e6), 0 < low_freq_factor < "
                    "high_freq_factor < 1e6 and original_max_position_embeddings in [1, 2^24]",
                    c->cfg_path);
  if (!(theta > 1) || rope_dim < 2 || rope_dim % 2)
    return pa_error(PASADA_ERR_FORMAT, "%s: llama3 rope scaling needs rope_theta > 1 and an even head",
                    c->cfg_path);
  const uint64_t n = rope_dim / 2;
  float *f = hf_keep_buf(c, n * sizeof *f);
  if (!f) return pa_error(PASADA_ERR_NOMEM, "out of memory");
  const double low_wavelen = orig / low, high_wavelen = orig / high;
  for (uint64_t i = 0; i < n; i++) {
    /* the converter's frequencies are float32 */
    const float freq = (float)(1.0 / pow(theta, (double)(2 * i) / (double)rope_dim));
    const double wavelen = 2 * 3.14159265358979323846 / freq;
    if (wavelen < high_wavelen) {
      f[i] = 1;
    } else if (wavelen > low_wavelen) {
      f[i] = (float)factor;
    } else {
      const double s = (orig / wavelen - low) / (high - low);
      f[i] = (float)(1 / ((1 - s) / factor + s));
    }
  }
  const int64_t ne[4] = {(int64_t)n, 1, 1, 1};
  return gguf_writer_add_tensor(w, "rope_freqs.weight", PA_TYPE_F32, 1, ne, f, n * sizeof *f);
}

/* YaRN as llama.cpp's converter writes it: rope.scaling.type "yarn", the
 * factor and the original context (rope_parameters', else config.json's
 * original_max_position_embeddings); beta_fast / beta_slow only where they
 * differ from the loader's defaults (32, 1). The loader derives the ramp
 * and the attention factor 0.1 ln(factor) + 1 from them (as transformers
 * does when the scaling names no attention_factor / mscale, which are
 * refused here) and truncates the ramp's ends as llama.cpp does (the
 * `truncate` flag is not read). */
int hf_yarn_rope(hf_ctx *c, gguf_writer *w, const pj_value *rp) {
  double factor = 0, orig = 0, fast = 32, slow = 1, unused = 0;
  bool ff = false, fo = false, found = false;
  int rc;
  if ((rc = hf_cfg_num(c, rp, "factor", &factor, &ff)) ||
      (rc = hf_cfg_num(c, rp, "original_max_position_embeddings", &orig, &fo)) ||
      (rc = hf_cfg_num(c, rp, "beta_fast", &fast, &found)) ||
      (rc = hf_cfg_num(c, rp, "beta_slow", &slow, &found)))
    return rc;
  if (!fo && (rc = hf_cfg_num(c, c->cfg, "original_max_position_embeddings", &orig, &fo))) return rc;
  if (!ff || !(factor >= 1 && factor <= 1024) || !fo || !(orig >= 1 && orig <= (1 << 24)) ||
      floor(orig) != orig || !(fast > 0 && fast < 1e6) || !(slow > 0 && slow < 1e6))
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: yarn rope scaling needs factor in [1, 1024], "
                    "original_max_position_embeddings in [1, 2^24] and beta_fast, beta_slow in "
                    "(0, 1e6)",
                    c->cfg_path);
  static const char *const own[] = {"attention_factor", "mscale", "mscale_all_dim"};
  for (int i = 0; i < 3; i++) {
    if ((rc = hf_cfg_num(c, rp, own[i], &unused, &found))) return rc;
    if (found)
      return pa_error(PASADA_ERR_UNSUPPORTED, "%s: yarn's '%s' is not supported", c->cfg_path,
                      own[i]);
  }
  char key[128];
  snprintf(key, sizeof key, "%s.rope.scaling.type", c->arch);
  if ((rc = gguf_writer_set_string(w, key, "yarn"))) return rc;
  snprintf(key, sizeof key, "%s.rope.scaling.factor", c->arch);
  if ((rc = gguf_writer_set_f32(w, key, (float)factor))) return rc;
  snprintf(key, sizeof key, "%s.rope.scaling.original_context_length", c->arch);
  if ((rc = gguf_writer_set_u32(w, key, (uint32_t)orig))) return rc;
  snprintf(key, sizeof key, "%s.rope.scaling.yarn_beta_fast", c->arch);
  if (fast != 32 && (rc = gguf_writer_set_f32(w, key, (float)fast))) return rc;
  snprintf(key, sizeof key, "%s.rope.scaling.yarn_beta_slow", c->arch);
  return slow != 1 ? gguf_writer_set_f32(w, key, (float)slow) : PASADA_OK;
}
