/* hf_qwen35.c: Qwen3.5 folders (Qwen3_5ForCausalLM, and the text model of
 * Qwen3_5ForConditionalGeneration) as llama.cpp's converter writes them:
 * the linear-attention (Gated DeltaNet) keys and layer pattern, partial and
 * multi-section RoPE, and the linear layers' tensors: value heads from
 * transformers' grouped order (value head j follows key head j / (n_v /
 * n_k)) to llama.cpp's tiled one (j follows j % n_k), conv1d squeezed to
 * [channels][taps], A as -exp(A_log). The full-attention layers' q_proj
 * (per head: q rows, then the output gate's) is kept as it is. Qwen3.5-MoE
 * (Qwen3_5MoeForCausalLM, arch qwen35moe): the same, with the router and
 * per-expert tensors of hf.c's mixtures and the shared expert's products
 * and gate as ffn_{gate,up,down}_shexp and ffn_gate_inp_shexp. The
 * multi-token-prediction layer (mtp.*) becomes one block more in
 * llama.cpp's nextn form (hf_qwen35_mtp_scan, hf_qwen35_mtp_tensor). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "format/hf_internal.h"
#include "quant/quant.h"

int hf_qwen35_config(hf_ctx *c, gguf_writer *w, uint64_t n_layer, uint64_t head_dim) {
  uint64_t conv = 0, kd = 0, vd = 0, nk = 0, nv = 0, interval = 4;
  int rc;
  if ((rc = hf_cfg_uint(c, "linear_conv_kernel_dim", true, 16, &conv)) ||
      (rc = hf_cfg_uint(c, "linear_key_head_dim", true, 1024, &kd)) ||
      (rc = hf_cfg_uint(c, "linear_value_head_dim", true, 1024, &vd)) ||
      (rc = hf_cfg_uint(c, "linear_num_key_heads", true, 1024, &nk)) ||
      (rc = hf_cfg_uint(c, "linear_num_value_heads", true, 1024, &nv)) ||
      (rc = hf_cfg_uint(c, "full_attention_interval", false, 4096, &interval)))
    return rc;
  /* without full_attention_interval (configs that keep only layer_types):
   * the first full attention layer's index + 1, checked against every layer
   * by hf_layer_types below */
  const pj_value *types = hf_member(c->cfg, "layer_types");
  if (!hf_member(c->cfg, "full_attention_interval") && pj_is_arr(types)) {
    uint64_t i = 0;
    for (const pj_value *e = types->child; e; e = e->next, i++)
      if (pj_is_str(e) && !strcmp(e->valuestring, "full_attention")) {
        interval = i + 1;
        break;
      }
  }
  if (conv < 2 || kd == 0 || vd == 0 || nk == 0 || nv == 0 || nv % nk || interval == 0)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: linear attention of %" PRIu64 " key heads of %" PRIu64 " and %" PRIu64
                    " value heads of %" PRIu64 ", conv kernel %" PRIu64
                    ", full_attention_interval %" PRIu64
                    ": need value heads a multiple of key heads, every size >= 1, a kernel >= 2",
                    c->cfg_path, nk, kd, nv, vd, conv, interval);
  /* pasada runs full attention in the layers l with (l + 1) % interval == 0 */
  if ((rc = hf_layer_types(c, n_layer, interval, "full_attention", "linear_attention",
                           "every full_attention_interval-th layer full attention, the others "
                           "linear")))
    return rc;
  const pj_value *gate = hf_member(c->cfg, "attn_output_gate");
  if (gate && !pj_is_true(gate))
    return pa_error(PASADA_ERR_UNSUPPORTED, "%s: attn_output_gate false is not supported",
                    c->cfg_path);
  uint64_t rope_dim = 0;
  if ((rc = hf_rope_dim(c, w, head_dim, 0.25 /* transformers' default for Qwen3.5 */, &rope_dim)) ||
      (rc = hf_set_u32(c, w, "ssm.conv_kernel", conv)) ||
      (rc = hf_set_u32(c, w, "ssm.state_size", kd)) ||
      (rc = hf_set_u32(c, w, "ssm.group_count", nk)) ||
      (rc = hf_set_u32(c, w, "ssm.time_step_rank", nv)) ||
      (rc = hf_set_u32(c, w, "ssm.inner_size", vd * nv)) ||
      (rc = hf_set_u32(c, w, "full_attention_interval", interval)))
    return rc;
  /* mrope_section: with text positions every section has the token's
   * position (the loader does not read it); written as llama.cpp does */
  const pj_value *rp = hf_member(c->cfg, "rope_parameters");
  if (!rp) rp = hf_member(c->cfg, "rope_scaling");
  const pj_value *ms = hf_member(rp, "mrope_section");
  if (ms) {
    int32_t sec[4] = {0};
    if (!pj_is_arr(ms) || pj_size(ms) > 4)
      return pa_error(PASADA_ERR_FORMAT, "%s: mrope_section is not an array of at most 4 integers",
                      c->cfg_path);
    int k = 0;
    for (const pj_value *e = ms->child; e; e = e->next, k++) {
      if (!pj_is_num(e) || !(e->valuedouble >= 0 && e->valuedouble <= 1 << 16) ||
          floor(e->valuedouble) != e->valuedouble)
        return pa_error(PASADA_ERR_FORMAT, "%s: mrope_section[%d] is not an integer in [0, 65536]",
                        c->cfg_path, k);
      sec[k] = (int32_t)e->valuedouble;
    }
    char key[64];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", c->arch);
    if ((rc = gguf_writer_set_array(w, key, GGUF_TYPE_INT32, sec, 4))) return rc;
  }
  c->lin_k_heads = (uint32_t)nk, c->lin_v_heads = (uint32_t)nv;
  c->lin_k_dim = (uint32_t)kd, c->lin_v_dim = (uint32_t)vd;
  return PASADA_OK;
}

/* Units of `unit` bytes in transformers' grouped order [n_k][r] to the
 * tiled [r][n_k], src to dst. */
static void tile_heads(const uint8_t *src, uint8_t *dst, uint32_t n_k, uint32_t r, size_t unit) {
  for (uint32_t k = 0; k < n_k; k++)
    for (uint32_t j = 0; j < r; j++)
      memcpy(dst + ((size_t)j * n_k + k) * unit, src + ((size_t)k * r + j) * unit, unit);
}

/* t (rows of row_bytes, `rows` of them, the last n_v * per_head of them
 * value heads' rows of per_head each; or, with `cols`, every row's last
 * n_v * per_head values) with the value heads tiled, as `name`: type
 * `type` over `data` (t's own or a converted copy). */
static int add_tiled(hf_ctx *c, gguf_writer *w, const st_tensor *t, const char *name, uint32_t type,
                     const void *data, int64_t ne0, int64_t rows, int64_t per_head, bool cols) {
  const uint32_t n_k = c->lin_k_heads, r = c->lin_v_heads / c->lin_k_heads;
  const size_t es = hf_elem_size(type), row = (size_t)ne0 * es;
  const int64_t v_part = (int64_t)c->lin_v_heads * per_head;
  if ((cols ? ne0 : rows) < v_part)
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: tensor '%.100s' is too small for %u value heads of %" PRId64, c->dir,
                    t->name, c->lin_v_heads, per_head);
  uint8_t *dst = hf_keep_buf(c, row * (size_t)rows);
  if (!dst) return pa_error(PASADA_ERR_NOMEM, "out of memory for '%s'", name);
  const uint8_t *src = data;
  if (cols) {
    const size_t keep = (size_t)(ne0 - v_part) * es;
    for (int64_t i = 0; i < rows; i++) {
      memcpy(dst + (size_t)i * row, src + (size_t)i * row, keep);
      tile_heads(src + (size_t)i * row + keep, dst + (size_t)i * row + keep, n_k, r,
                 (size_t)per_head * es);
    }
  } else {
    const size_t keep = (size_t)(rows - v_part) * row;
    memcpy(dst, src, keep);
    tile_heads(src + keep, dst + keep, n_k, r, (size_t)per_head * row);
  }
  st_tensor m = t->n_dims == 1 ? hf_mem_tensor(name, type, 1, rows, 1, 1, dst)
                               : hf_mem_tensor(name, type, 2, ne0, rows, 1, dst);
  return hf_add_tensor(c, w, -1, &m, name);
}

int hf_qwen35_tensor(hf_ctx *c, gguf_writer *w, uint32_t shard, const st_tensor *t, bool *done) {
  unsigned layer;
  int at = 0;
  *done = false;
  if (sscanf(t->name, "model.layers.%u.%n", &layer, &at) != 1 || at == 0 || layer >= c->n_layer)
    return PASADA_OK;
  const char *rest = t->name + at;
  char name[64];
  if (!strcmp(rest, "post_attention_layernorm.weight")) {
    *done = true;
    snprintf(name, sizeof name, "blk.%u.post_attention_norm.weight", layer);
    return hf_add_tensor(c, w, (int32_t)shard, t, name);
  }
  static const struct {
    const char *hf, *gguf;
  } shexp[] = {{"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
               {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
               {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
               {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"}};
  for (size_t i = 0; c->n_expert && i < sizeof shexp / sizeof shexp[0]; i++)
    if (!strcmp(rest, shexp[i].hf)) {
      *done = true;
      snprintf(name, sizeof name, "blk.%u.%s", layer, shexp[i].gguf);
      return hf_add_tensor(c, w, (int32_t)shard, t, name);
    }
  if (strncmp(rest, "linear_attn.", 12) != 0) return PASADA_OK;
  *done = true;
  const char *part = rest + 12;
  if (t->type >= ST_TYPE_I64)
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: tensor '%.100s' has dtype %s (supported: F32, F16, BF16)", c->dir, t->name,
                    st_type_name(t->type));
  const int64_t kd2 = 2 * (int64_t)c->lin_k_heads * c->lin_k_dim,
                vz = (int64_t)c->lin_v_heads * c->lin_v_dim, nv = c->lin_v_heads;
  static const struct {
    const char *hf, *gguf;
    int kind;     /* 0: rows tiled by value head, 1: columns tiled, 2: as stored */
    int per_head; /* 0: lin_v_dim rows / values per head, 1: one */
    bool qk;      /* the q and k rows first (in_proj_qkv, conv1d) */
  } parts[] = {{"in_proj_qkv.weight", "attn_qkv.weight", 0, 0, true},
               {"in_proj_z.weight", "attn_gate.weight", 0, 0, false},
               {"in_proj_b.weight", "ssm_beta.weight", 0, 1, false},
               {"in_proj_a.weight", "ssm_alpha.weight", 0, 1, false},
               {"out_proj.weight", "ssm_out.weight", 1, 0, false},
               {"conv1d.weight", "ssm_conv1d.weight", 0, 0, true},
               {"A_log", "ssm_a", 0, 1, false},
               {"dt_bias", "ssm_dt.bias", 0, 1, false},
               {"norm.weight", "ssm_norm.weight", 2, 0, false}};
  size_t k = 0;
  while (k < sizeof parts / sizeof parts[0] && strcmp(part, parts[k].hf)) k++;
  if (k == sizeof parts / sizeof parts[0])
    return pa_error(PASADA_ERR_UNSUPPORTED,
                    "%s: tensor '%.100s' has no place in a qwen35 model (linear attention with "
                    "split in_proj_qkv, in_proj_z, in_proj_b, in_proj_a)",
                    c->dir, t->name);
  snprintf(name, sizeof name, "blk.%u.%s", layer, parts[k].gguf);
  if (parts[k].kind == 2) return hf_add_tensor(c, w, (int32_t)shard, t, name);
  const int64_t per_head = parts[k].per_head ? 1 : c->lin_v_dim;
  const int64_t want_rows = parts[k].kind == 1 ? -1 : (parts[k].qk ? kd2 : 0) + nv * per_head;
  const bool conv = !strcmp(part, "conv1d.weight"),
             one_d = !strcmp(part, "A_log") || !strcmp(part, "dt_bias");
  /* conv1d [channels][1][taps]; A_log, dt_bias [n_v]; the others matrices */
  const int64_t rows = conv ? t->ne[2] : one_d ? t->ne[0] : t->ne[1];
  const bool shape_ok = conv    ? t->n_dims == 3 && t->ne[1] == 1
                        : one_d ? t->n_dims == 1
                                : t->n_dims == 2;
  if (!shape_ok || (want_rows >= 0 && rows != want_rows) || (parts[k].kind == 1 && t->ne[0] != vz))
    return pa_error(PASADA_ERR_FORMAT,
                    "%s: tensor '%.100s' has the wrong shape for the linear heads of config.json "
                    "(%u dims: %" PRId64 " x %" PRId64 " x %" PRId64 ", innermost first; %" PRId64
                    " %s expected)",
                    c->dir, t->name, t->n_dims, t->ne[0], t->ne[1], t->ne[2],
                    want_rows >= 0 ? want_rows : vz,
                    want_rows < 0 ? "columns"
                    : conv        ? "channels of [1][taps]"
                                  : "rows");
  if (conv || one_d) { /* F32, as llama.cpp stores them */
    float *f = hf_f32(c, t);
    if (!f) return pa_error(PASADA_ERR_NOMEM, "out of memory for '%s'", name);
    if (!strcmp(part, "A_log"))
      for (int64_t i = 0; i < rows; i++) f[i] = -(float)exp((double)f[i]);
    const int64_t ne0 = conv ? t->ne[0] : 1;
    st_tensor flat = *t;
    flat.n_dims = one_d ? 1 : 2; /* one_d: a value per row for the tiling, one row in the result */
    return add_tiled(c, w, &flat, name, PA_TYPE_F32, f, ne0, rows, per_head, false);
  }
  return add_tiled(c, w, t, name, t->type, t->data, t->ne[0], parts[k].kind == 1 ? t->ne[1] : rows,
                   per_head, parts[k].kind == 1);
}

int hf_qwen35_mtp_scan(hf_ctx *c) {
  bool any = false, layer0 = false;
  for (uint32_t s = 0; s < c->n_shards; s++)
    for (uint64_t i = 0; i < c->shards[s]->n_tensors; i++) {
      char buf[GGUF_MAX_NAME_LEN + 64];
      const char *n = hf_text_model_name(c, c->shards[s]->tensors[i].name, buf, sizeof buf);
      unsigned l;
      if (!n || strncmp(n, "mtp.", 4)) continue;
      any = true;
      if (sscanf(n, "mtp.layers.%u.", &l) == 1) {
        if (l > 0)
          return pa_error(
              PASADA_ERR_UNSUPPORTED,
              "%s: tensor '%.100s': pasada runs one multi-token-prediction layer (mtp.layers.0)",
              c->dir, n);
        layer0 = true;
      }
    }
  if (any && !layer0)
    return pa_error(PASADA_ERR_FORMAT, "%s: mtp. tensors without their layer (mtp.layers.0.*)",
                    c->dir);
  c->n_mtp = any ? 1 : 0;
  return PASADA_OK;
}

int hf_qwen35_mtp_tensor(hf_ctx *c, gguf_writer *w, uint32_t shard, const st_tensor *t,
                         const char *name, char *renamed, size_t cap, bool *done) {
  static const struct {
    const char *hf, *gguf;
  } own[] = {{"mtp.fc.weight", "nextn.eh_proj.weight"},
             {"mtp.pre_fc_norm_embedding.weight", "nextn.enorm.weight"},
             {"mtp.pre_fc_norm_hidden.weight", "nextn.hnorm.weight"},
             {"mtp.norm.weight", "nextn.shared_head_norm.weight"}};
  const uint32_t block = c->n_layer - 1;
  *done = false;
  if (!strncmp(name, "mtp.layers.0.", 13)) {
    snprintf(renamed, cap, "model.layers.%u.%s", block, name + 13);
    return PASADA_OK;
  }
  for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
    if (!strcmp(name, own[i].hf)) {
      if (t->type >= ST_TYPE_I64)
        return pa_error(PASADA_ERR_UNSUPPORTED,
                        "%s: tensor '%.100s' has dtype %s (supported: F32, F16, BF16)", c->dir,
                        name, st_type_name(t->type));
      char gguf[96];
      snprintf(gguf, sizeof gguf, "blk.%u.%s", block, own[i].gguf);
      *done = true;
      return hf_add_tensor(c, w, (int32_t)shard, t, gguf);
    }
  return pa_error(
      PASADA_ERR_UNSUPPORTED,
      "%s: tensor '%.100s' has no place in a qwen35 model's multi-token "
      "prediction (mtp.fc, mtp.pre_fc_norm_embedding, mtp.pre_fc_norm_hidden, mtp.norm, "
      "mtp.layers.0.*)",
      c->dir, name);
}
